#include "model/vision/vision_tower.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/encoder_matmul.h"
#include "ops/full_attention.h"
#include "ops/gelu.h"
#include "ops/layer_norm.h"

namespace sanctum {

namespace {
constexpr float kNormEps = 1e-6f;  // every LayerNorm of the tower (transformers and mlx-vlm hard-code it)

// The (out, C, T, P, P) or (out, T, P, P, C) Conv3d kernel (`flat`: its elements, `shape`: its shape)
// as (out, C*T*P*P) f32 in the processor's (C, T, P, P) column order, so that the convolution is
// pixel_values · weightᵀ.
Tensor patch_matrix(const Tensor& flat, const std::vector<int64_t>& shape, const VisionConfig& c, const std::string& name) {
  const int64_t out = c.hidden_size, C = c.in_channels, T = c.temporal_patch_size, P = c.patch_size;
  auto shape_string = [&] {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + ")";
  };
  check(shape.size() == 5 && shape[0] == out, ErrorKind::invalid_input,
        name + ": expected a 5-D Conv3d kernel with " + std::to_string(out) + " outputs, got " + shape_string());
  const bool torch_layout = shape[1] == C && shape[2] == T && shape[3] == P && shape[4] == P;
  const bool mlx_layout = shape[1] == T && shape[2] == P && shape[3] == P && shape[4] == C;
  check(torch_layout || mlx_layout, ErrorKind::invalid_input,
        name + ": shape " + shape_string() + " matches neither (out, C, T, P, P) nor (out, T, P, P, C) for vision_config");
  Tensor m = Tensor::zeros({out, C * T * P * P}, DType::f32);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t y = 0; y < P; ++y)
          for (int64_t x = 0; x < P; ++x) {
            const int64_t at = torch_layout ? (((o * C + ch) * T + t) * P + y) * P + x : (((o * T + t) * P + y) * P + x) * C + ch;
            m.data<float>()[o * m.dim(1) + ((ch * T + t) * P + y) * P + x] = load_as_f32(flat.raw(), flat.dtype(), at);
          }
  return m;
}

// One interpolation axis as transformers computes it (align_corners bilinear, f32): the two taps of
// target index `i` on an axis of `size` over a table side of `side`, and their weights.
void axis_taps(int64_t i, int64_t size, int64_t side, int64_t taps[2], float weights[2]) {
  const float src = static_cast<float>(i) * static_cast<float>(side - 1) / static_cast<float>(std::max<int64_t>(size - 1, 1));
  const float floor = std::floor(src);
  for (int k = 0; k < 2; ++k) {
    taps[k] = std::clamp<int64_t>(static_cast<int64_t>(floor) + k, 0, side - 1);
    weights[k] = std::max(0.0f, 1.0f - std::abs(src - floor - static_cast<float>(k)));
  }
}
}  // namespace

VisionTower::VisionTower(Checkpoint& ckpt, const std::string& prefix, const VisionConfig& c, const QuantConfig& quant) : config_(c) {
  device_ = ckpt.device();
  const int64_t hid = c.hidden_size;
  const std::string conv = prefix + "patch_embed.proj.weight";
  patch_embed_ =
      dense_weight(patch_matrix(ckpt.flat_tensor(conv), ckpt.entry(conv).shape, c, conv).to(device_), prefix + "patch_embed.proj");
  patch_bias_ = ckpt.tensor(prefix + "patch_embed.proj.bias", {hid});
  ckpt.set_device(Device::cpu);  // the position table is resampled on the host (add_position_embeddings)
  pos_embed_ = ckpt.linear(prefix + "pos_embed", c.num_position_embeddings, hid, quant);
  ckpt.set_device(device_);
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string bp = prefix + "blocks." + std::to_string(i) + ".";
    Block b;
    b.norm1 = norm(ckpt, bp + "norm1", hid);
    b.norm2 = norm(ckpt, bp + "norm2", hid);
    b.qkv = linear(ckpt, bp + "attn.qkv", 3 * hid, hid, quant);
    b.proj = linear(ckpt, bp + "attn.proj", hid, hid, quant);
    b.fc1 = linear(ckpt, bp + "mlp.linear_fc1", c.intermediate_size, hid, quant);
    b.fc2 = linear(ckpt, bp + "mlp.linear_fc2", hid, c.intermediate_size, quant);
    blocks_.push_back(std::move(b));
  }
  const int64_t merged = hid * c.spatial_merge_size * c.spatial_merge_size;
  merger_norm_ = norm(ckpt, prefix + "merger.norm", hid);
  merger_fc1_ = linear(ckpt, prefix + "merger.linear_fc1", merged, merged, quant);
  merger_fc2_ = linear(ckpt, prefix + "merger.linear_fc2", c.out_hidden_size, merged, quant);

  // 2-D rotary over the whole head: head_dim / 4 frequencies of theta^(-2j / (head_dim / 2)), by
  // row in the first half of the pairs and by column in the second (transformers computes them in f32).
  const int64_t quarter = c.head_dim() / 4;
  std::vector<float> by_row(static_cast<size_t>(2 * quarter), 0.0f), by_col(static_cast<size_t>(2 * quarter), 0.0f);
  for (int64_t j = 0; j < quarter; ++j) {
    const float f = 1.0f / std::pow(static_cast<float>(c.rope_theta), static_cast<float>(2 * j) / static_cast<float>(2 * quarter));
    by_row[static_cast<size_t>(j)] = f;
    by_col[static_cast<size_t>(quarter + j)] = f;
  }
  rope_rows_ = ops::RopeTable::from_inv_freq(std::move(by_row));
  rope_cols_ = ops::RopeTable::from_inv_freq(std::move(by_col));
}

VisionTower::Linear VisionTower::linear(Checkpoint& ckpt, const std::string& prefix, int64_t rows, int64_t cols,
                                        const QuantConfig& quant) const {
  return {ckpt.linear(prefix, rows, cols, quant), ckpt.tensor(prefix + ".bias", {rows})};
}

VisionTower::Norm VisionTower::norm(Checkpoint& ckpt, const std::string& prefix, int64_t d) const {
  return {ckpt.tensor(prefix + ".weight", {d}), ckpt.tensor(prefix + ".bias", {d})};
}

void VisionTower::apply(const Linear& l, const Tensor& x, Tensor& y) const {
  ops::encoder_matmul(x, l.w, y);
  ops::add_bias(y, l.bias);
}

int64_t VisionTower::tokens_for(const GridThw& g) const {
  const int64_t m = config_.spatial_merge_size;
  return g.t * (g.h / m) * (g.w / m);
}

// h (patches, hidden) += the learned (side, side) position table resampled to each image's (h, w)
// grid (bilinear, corners aligned), patches in merge-block order, every frame alike. The four taps
// are mixed on the host and the sums added where h lives.
void VisionTower::add_position_embeddings(std::span<const GridThw> grids, Tensor& h) const {
  const int64_t side = config_.grid_side(), m = config_.spatial_merge_size, hid = config_.hidden_size;
  std::vector<int32_t> ids;
  std::vector<float> weights;
  for (const GridThw& g : grids)
    for (int64_t p = 0; p < g.patches(); ++p) {
      const int64_t within = p % (g.h * g.w), blocks_w = g.w / m;
      const int64_t row = (within / (m * m * blocks_w)) * m + (within / m) % m;
      const int64_t col = ((within / (m * m)) % blocks_w) * m + within % m;
      int64_t rt[2], ct[2];
      float rw[2], cw[2];
      axis_taps(row, g.h, side, rt, rw);
      axis_taps(col, g.w, side, ct, cw);
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) {
          ids.push_back(static_cast<int32_t>(rt[a] * side + ct[b]));
          weights.push_back(rw[a] * cw[b]);
        }
    }
  Tensor rows = Tensor::zeros({static_cast<int64_t>(ids.size()), hid}, DType::f32);  // (patches * 4, hidden)
  ops::embedding(pos_embed_, ids, rows);
  const float* r = rows.data<float>();
  Tensor mixed = Tensor::zeros({h.dim(0), hid}, DType::f32);  // (patches, hidden)
  for (int64_t p = 0; p < h.dim(0); ++p) {
    float* out = mixed.data<float>() + p * hid;
    const float* w = weights.data() + 4 * p;
    for (int64_t c = 0; c < hid; ++c) {
      const int64_t at = 4 * p * hid + c;
      out[c] = ((r[at] * w[0] + r[at + hid] * w[1]) + r[at + 2 * hid] * w[2]) + r[at + 3 * hid] * w[3];
    }
  }
  ops::add(h, device_ == Device::cpu ? mixed : mixed.to(device_), h);
}

void VisionTower::attention(const Block& b, const Tensor& x, std::span<const GridThw> grids, std::span<const int32_t> rows,
                            std::span<const int32_t> cols, Tensor& out) const {
  const int64_t n = x.dim(0), hid = config_.hidden_size, H = config_.num_heads, D = config_.head_dim();
  Tensor qkv = Tensor::zeros({n, 3 * hid}, DType::f32, device_);  // per token [q | k | v], heads within each
  apply(b.qkv, x, qkv);
  Tensor q = Tensor::zeros({n, hid}, DType::f32, device_), k = Tensor::zeros({n, hid}, DType::f32, device_),
         v = Tensor::zeros({n, hid}, DType::f32, device_);
  ops::copy(qkv.slice(1, 0, hid), q);
  ops::copy(qkv.slice(1, hid, 2 * hid), k);
  ops::copy(qkv.slice(1, 2 * hid, 3 * hid), v);
  Tensor q3 = q.reshape({n, H, D}), k3 = k.reshape({n, H, D}), v3 = v.reshape({n, H, D});
  for (Tensor* t : {&q3, &k3}) {
    ops::rope(*t, rows, rope_rows_);
    ops::rope(*t, cols, rope_cols_);
  }
  Tensor attn = Tensor::zeros({n, hid}, DType::f32, device_);
  Tensor attn3 = attn.reshape({n, H, D});
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  int64_t at = 0;
  for (const GridThw& g : grids)
    for (int64_t f = 0; f < g.t; ++f, at += g.h * g.w) {  // each frame attends within itself
      const int64_t end = at + g.h * g.w;
      Tensor o = attn3.slice(0, at, end);
      ops::full_attention(q3.slice(0, at, end), k3.slice(0, at, end), v3.slice(0, at, end), scale, o);
    }
  apply(b.proj, attn, out);
}

Tensor VisionTower::encode(const Tensor& pixel_values, std::span<const GridThw> grids) const {
  const VisionConfig& c = config_;
  const int64_t m = c.spatial_merge_size, hid = c.hidden_size;
  check(!grids.empty(), ErrorKind::invalid_argument, "vision tower: no images to encode");
  int64_t n = 0, tokens = 0;
  for (const GridThw& g : grids) {
    check(g.t >= 1 && g.h >= m && g.w >= m && g.h % m == 0 && g.w % m == 0 && g.patches() <= (int64_t{1} << 24),
          ErrorKind::invalid_argument,
          "vision tower: grid (" + std::to_string(g.t) + ", " + std::to_string(g.h) + ", " + std::to_string(g.w) +
              ") must have rows and columns that are positive multiples of spatial_merge_size " + std::to_string(m));
    n += g.patches();
    tokens += tokens_for(g);
  }
  check(pixel_values.dtype() == DType::f32 && pixel_values.ndim() == 2 && pixel_values.dim(0) == n &&
            pixel_values.dim(1) == c.patch_values() && pixel_values.device() == Device::cpu,
        ErrorKind::invalid_argument,
        "vision tower: pixel_values must be host f32 (" + std::to_string(n) + ", " + std::to_string(c.patch_values()) +
            ") for these grids, got " + pixel_values.shape_string());

  // Each patch's (row, column) in its frame, patches in merge-block order.
  std::vector<int32_t> rows, cols;
  rows.reserve(static_cast<size_t>(n));
  cols.reserve(static_cast<size_t>(n));
  for (const GridThw& g : grids)
    for (int64_t p = 0; p < g.patches(); ++p) {
      const int64_t within = p % (g.h * g.w), blocks_w = g.w / m;
      rows.push_back(static_cast<int32_t>((within / (m * m * blocks_w)) * m + (within / m) % m));
      cols.push_back(static_cast<int32_t>(((within / (m * m)) % blocks_w) * m + within % m));
    }

  Tensor h = Tensor::zeros({n, hid}, DType::f32, device_);  // the residual stream
  ops::encoder_matmul(device_ == Device::cpu ? pixel_values : pixel_values.to(device_), patch_embed_, h);
  ops::add_bias(h, patch_bias_);
  add_position_embeddings(grids, h);

  Tensor x = Tensor::zeros({n, hid}, DType::f32, device_), delta = Tensor::zeros({n, hid}, DType::f32, device_);
  Tensor mid = Tensor::zeros({n, c.intermediate_size}, DType::f32, device_);
  for (const Block& b : blocks_) {
    ops::layer_norm(h, b.norm1.weight, b.norm1.bias, kNormEps, x);
    attention(b, x, grids, rows, cols, delta);
    ops::add(h, delta, h);
    ops::layer_norm(h, b.norm2.weight, b.norm2.bias, kNormEps, x);
    apply(b.fc1, x, mid);
    ops::gelu(mid, mid, c.hidden_act);
    apply(b.fc2, mid, delta);
    ops::add(h, delta, h);
  }

  // Merger: norm each patch, then each merge block's patches side by side as one row.
  ops::layer_norm(h, merger_norm_.weight, merger_norm_.bias, kNormEps, x);
  const int64_t merged = hid * m * m;
  Tensor blocks = x.reshape({tokens, merged});
  Tensor wide = Tensor::zeros({tokens, merged}, DType::f32, device_);
  Tensor out = Tensor::zeros({tokens, c.out_hidden_size}, DType::f32, device_);
  apply(merger_fc1_, blocks, wide);
  ops::gelu(wide, wide, ops::GeluKind::erf);
  apply(merger_fc2_, wide, out);
  return device_ == Device::cpu ? out : out.to(Device::cpu);  // waits for the tower's kernels
}

}  // namespace sanctum

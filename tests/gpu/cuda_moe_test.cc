// The device-side MoE ops (routing, expert mat-vecs by id, grouping by expert, grouped tensor-core
// mat-mats, combine) against their CPU versions and scalar references, which the CPU parity suites
// hold to mlx-lm and transformers; and a whole MoE block on the device against the host. Skips
// without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <vector>

#include "../ops/op_test_util.h"
#include "../weights/safetensors_writer.h"
#include "base/error.h"
#include "base/tuning.h"
#include "gpu_test_util.h"
#include "model/blocks/moe.h"
#include "ops/cuda/matvec_tiles.h"
#include "ops/ops.h"
#include "ops/precision.h"
#include "ops/ref/matmul.h"
#include "ops/ref/moe.h"
#include "tensor/device_memory.h"

namespace sanctum {
namespace {

using test::Rng;

class CudaMoe : public test::RequiresGpu {};

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to(Device::cpu), hb = b.to(Device::cpu);
  return ha.nbytes() == hb.nbytes() && std::memcmp(ha.raw(), hb.raw(), ha.nbytes()) == 0;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  Tensor ha = a.to(Device::cpu), hb = b.to(Device::cpu);
  double worst = 0.0;
  for (int64_t i = 0; i < ha.numel(); ++i)
    worst = std::max(worst, static_cast<double>(std::abs(ha.data<float>()[i] - hb.data<float>()[i])));
  return worst;
}

TEST_F(CudaMoe, routing_matches_the_host_for_both_schemes_and_ties) {
  Rng rng(31);
  for (bool softmax_first : {true, false})
    for (int64_t experts : {8, 64, 100, 256, 600}) {
      const int64_t n = 5, k = experts >= 600 ? 32 : experts >= 64 ? 8 : 2;
      Tensor logits = test::random_tensor({n, experts}, DType::f32, rng);
      logits.data<float>()[3] = logits.data<float>()[5];  // a tie: the lower id must win on both sides
      ops::MoeRouting how{k, softmax_first, true};
      Tensor ids = Tensor::zeros({n, k}, DType::i32), w = Tensor::zeros({n, k}, DType::f32);
      Tensor gids = Tensor::zeros({n, k}, DType::i32, Device::cuda), gw = Tensor::zeros({n, k}, DType::f32, Device::cuda);
      ops::moe_route(logits, how, ids, w);
      ops::moe_route(logits.to(Device::cuda), how, gids, gw);
      Tensor hids = gids.to(Device::cpu);
      for (int64_t i = 0; i < n * k; ++i) EXPECT_EQ(hids.data<int32_t>()[i], ids.data<int32_t>()[i]) << i;
      EXPECT_LE(max_abs_diff(gw, w), 1e-7);
    }
}

// The shared expert as one more rank (decode): the appended id and the combine that reads its row
// from per_rank, on the device against the host.
TEST_F(CudaMoe, shared_expert_as_an_appended_rank_matches_the_host) {
  Rng rng(38);
  const int64_t n = 3, E = 64, k = 8, d = 70;
  Tensor logits = test::random_tensor({n, E}, DType::f32, rng);
  const ops::MoeRouting how{k, true, true};
  Tensor ids = Tensor::zeros({n, k + 1}, DType::i32), w = Tensor::zeros({n, k}, DType::f32);
  Tensor gids = Tensor::zeros({n, k + 1}, DType::i32, Device::cuda), gw = Tensor::zeros({n, k}, DType::f32, Device::cuda);
  ops::moe_route(logits, how, ids, w, static_cast<int32_t>(E));
  ops::moe_route(logits.to(Device::cuda), how, gids, gw, static_cast<int32_t>(E));
  Tensor hids = gids.to(Device::cpu);
  for (int64_t i = 0; i < n * (k + 1); ++i) EXPECT_EQ(hids.data<int32_t>()[i], ids.data<int32_t>()[i]) << i;
  EXPECT_LE(max_abs_diff(gw, w), 1e-7);
  Tensor per_rank = test::random_tensor({n * (k + 1), d}, DType::f32, rng), logit = test::random_tensor({n, 1}, DType::f32, rng);
  Tensor out = Tensor::zeros({n, d}, DType::f32), gout = Tensor::zeros({n, d}, DType::f32, Device::cuda);
  ops::moe_combine_shared_rank(per_rank, w, logit, out);
  ops::moe_combine_shared_rank(per_rank.to(Device::cuda), w.to(Device::cuda), logit.to(Device::cuda), gout);
  EXPECT_LE(max_abs_diff(gout, out), 1e-5);
}

TEST_F(CudaMoe, expert_matmul_by_device_ids_matches_per_expert_matmul) {
  Rng rng(32);
  for (int bits : {4, 8, 0}) {
    std::vector<Weight> host, dev;
    for (int e = 0; e < 6; ++e) {
      Weight w = bits ? test::random_quantized(72, 128, bits, 64, DType::bf16, rng)
                      : dense_weight(test::random_tensor({72, 128}, DType::bf16, rng));
      host.push_back(w);
      dev.push_back(test::gpu(w));
    }
    ops::ExpertSet hs(host), ds(dev);
    const int64_t n = 3, k = 2;
    Tensor x = test::random_tensor({n, 128}, DType::f32, rng);
    Tensor ids = Tensor::zeros({n * k}, DType::i32);
    const int32_t chosen[] = {5, 0, 2, 2, 1, 4};
    for (int i = 0; i < 6; ++i) ids.data<int32_t>()[i] = chosen[i];
    Tensor y = Tensor::zeros({n * k, 72}, DType::f32), gy = Tensor::zeros({n * k, 72}, DType::f32, Device::cuda);
    ops::expert_matmul(x, hs, ids, y);
    ops::expert_matmul(x.to(Device::cuda), ds, ids.to(Device::cuda), gy);
    EXPECT_LE(max_abs_diff(gy, y), 1e-4) << "bits " << bits;
  }
}

TEST_F(CudaMoe, combine_with_device_weights_and_shared_gate) {
  Rng rng(33);
  const int64_t n = 4, k = 3, d = 50;
  Tensor per_rank = test::random_tensor({n * k, d}, DType::f32, rng), w = test::random_tensor({n, k}, DType::f32, rng);
  Tensor shared = test::random_tensor({n, d}, DType::f32, rng), logit = test::random_tensor({n, 1}, DType::f32, rng);
  Tensor out = Tensor::zeros({n, d}, DType::f32), gout = Tensor::zeros({n, d}, DType::f32, Device::cuda);
  ops::moe_combine(per_rank, w, &shared, &logit, out);
  Tensor gs = shared.to(Device::cuda), gl = logit.to(Device::cuda);
  ops::moe_combine(per_rank.to(Device::cuda), w.to(Device::cuda), &gs, &gl, gout);
  EXPECT_LE(max_abs_diff(gout, out), 1e-5);
}

// ---- grouping by expert and grouped mat-mats (prompts) ----

// How a test's (token, rank) choices pick experts.
enum class Spread { uniform, even_only, one_expert };

Tensor choose_experts(int64_t m, int64_t E, Spread spread, Rng& rng) {
  Tensor ids = Tensor::zeros({m}, DType::i32);
  const int32_t only = static_cast<int32_t>(rng.integer(0, E - 1));
  for (int64_t i = 0; i < m; ++i) {
    int64_t e = rng.integer(0, E - 1);
    if (spread == Spread::even_only) e -= e % 2;
    if (spread == Spread::one_expert) e = only;
    ids.data<int32_t>()[i] = static_cast<int32_t>(e);
  }
  return ids;
}

using test::PrecisionScope;

TEST_F(CudaMoe, grouping_on_the_device_equals_the_stable_host_sort) {
  Rng rng(34);
  for (int64_t E : {8, 64, 256})
    for (int64_t m : {1, 33, 72, 4097, 32768})
      for (Spread spread : {Spread::uniform, Spread::even_only, Spread::one_expert}) {
        Tensor ids = choose_experts(m, E, spread, rng);
        Tensor offsets = Tensor::zeros({E + 1}, DType::i32), sorted = Tensor::zeros({m}, DType::i32);
        ops::moe_group(ids, E, offsets, sorted);
        Tensor goff = Tensor::zeros({E + 1}, DType::i32, Device::cuda), gsorted = Tensor::zeros({m}, DType::i32, Device::cuda);
        ops::moe_group(ids.to(Device::cuda), E, goff, gsorted);
        Tensor hoff = goff.to(Device::cpu), hsorted = gsorted.to(Device::cpu);
        ASSERT_EQ(std::memcmp(hoff.raw(), offsets.raw(), offsets.nbytes()), 0) << "E " << E << " m " << m;
        ASSERT_EQ(std::memcmp(hsorted.raw(), sorted.raw(), sorted.nbytes()), 0) << "E " << E << " m " << m;
      }
}

// Max |a - b| over sqrt(k) * rms(x) * rms(w), the magnitude of one output.
double grouped_error(const Tensor& got, const Tensor& want, const Tensor& x, const ops::ExpertSet& set) {
  Tensor g = got.to(Device::cpu);
  double worst = 0.0, xs = 0.0, ws = 0.0;
  for (int64_t i = 0; i < g.numel(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(g.data<float>()[i]) - want.data<float>()[i]));
  for (int64_t i = 0; i < x.numel(); ++i) xs += std::pow(x.data<float>()[i], 2);
  for (int64_t e = 0; e < set.size(); ++e)
    for (int64_t r = 0; r < set[e].rows; ++r)
      for (int64_t c = 0; c < set[e].cols; ++c) ws += std::pow(ops::ref::weight_at(set[e], r, c), 2);
  const double scale = std::sqrt(static_cast<double>(x.dim(1)) * xs / static_cast<double>(x.numel()) * ws /
                                 static_cast<double>(set.size() * set[0].rows * set[0].cols));
  return worst / scale;
}

// Each output of a tiled expert mat-vec in the bf16 mode within what its arithmetic can move it from
// the exact f32 result, whatever the inputs drawn: rounding x to bf16 moves each product x w by at
// most u |x w| (u = 2^-8; the bound allows for both operands' rounding, 2u + u^2, as above); the
// kernel sums codes offset by 128 (scale * sum((128 + q) x) + (bias - 128 scale) * sum(x), both
// sums and the host's reference in f32), and those sums move by at most cols * 2^-20 of their terms'
// magnitudes, 143 |scale| + |bias - 128 scale| times |x| a column (far more than f32 needs; they
// also bound |w|). Slot i is expert ids[i] on x row i / fan. Returns the worst output's error over
// its bound (<= 1 passes).
double tiled_rounding_ratio(const Tensor& got, const Tensor& want32, const Tensor& x, const ops::ExpertSet& set, const Tensor& ids) {
  const Tensor g = got.to(Device::cpu);
  const int64_t m = g.dim(0), rows = g.dim(1), cols = x.dim(1), fan = m / x.dim(0);
  const double per_product = std::ldexp(1.0, -7) + std::ldexp(1.0, -16), per_sum = static_cast<double>(cols) * std::ldexp(1.0, -20);
  double worst = 0.0;
  for (int64_t i = 0; i < m; ++i) {
    const Weight& w = set[ids.data<int32_t>()[i]];
    const float* xr = x.data<float>() + (i / fan) * x.stride(0);
    for (int64_t o = 0; o < rows; ++o) {
      double products = 0.0, offset_terms = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t grp = c / w.quant.group_size;
        const double scale = load_as_f32(w.scales.raw(), w.scales.dtype(), o * w.scales.stride(0) + grp);
        const double bias = load_as_f32(w.biases.raw(), w.biases.dtype(), o * w.biases.stride(0) + grp);
        const double ax = std::abs(static_cast<double>(xr[c]));
        products += ax * std::abs(static_cast<double>(ops::ref::weight_at(w, o, c)));
        offset_terms += ax * (143.0 * std::abs(scale) + std::abs(bias - 128.0 * scale));
      }
      const double bound = per_product * products + per_sum * offset_terms + 1e-30;
      const int64_t at = i * rows + o;
      worst = std::max(worst, std::abs(static_cast<double>(g.data<float>()[at]) - want32.data<float>()[at]) / bound);
    }
  }
  return worst;
}

struct Format {
  int bits, group;
  DType scales;
};

// Each output of the bf16 mode within the rounding of its operands of the exact f32 result:
// rounding x and each weight element to bf16 (unit roundoff u = 2^-8) moves each product x w by at
// most (2u + u^2) |x w|, so an output by at most that times the sum of |x w| over its columns; the
// f32 sums of the tensor cores add a little per column (2^-20 each here, far more than IEEE f32
// needs). Returns the worst output's error over its bound (<= 1 passes), whatever the inputs drawn.
double bf16_rounding_ratio(const Tensor& got, const Tensor& want32, const Tensor& x, const ops::ExpertSet& set, const Tensor& offsets,
                           const Tensor& sorted, ops::GroupedRows mode) {
  Tensor abs_x = Tensor::zeros({x.dim(0), x.dim(1)}, DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) abs_x.data<float>()[i] = std::abs(x.data<float>()[i]);
  std::vector<Weight> abs_w;
  for (int64_t e = 0; e < set.size(); ++e) {
    Tensor t = Tensor::zeros({set[e].rows, set[e].cols}, DType::f32);
    for (int64_t r = 0; r < set[e].rows; ++r)
      for (int64_t c = 0; c < set[e].cols; ++c) t.data<float>()[r * set[e].cols + c] = std::abs(ops::ref::weight_at(set[e], r, c));
    abs_w.push_back(dense_weight(t));
  }
  const int64_t m = got.dim(0);
  Tensor sums = Tensor::zeros({m, got.dim(1)}, DType::f32);
  ops::ref::grouped_expert_matmul(abs_x, ops::ExpertSet(abs_w), offsets.data<int32_t>(), sorted.data<int32_t>(), m, mode, false, sums);
  const Tensor g = got.to(Device::cpu);
  const double per_sum = std::ldexp(1.0, -7) + std::ldexp(1.0, -16) + static_cast<double>(x.dim(1)) * std::ldexp(1.0, -20);
  double worst = 0.0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double bound = per_sum * sums.data<float>()[i] + 1e-30;
    worst = std::max(worst, std::abs(static_cast<double>(g.data<float>()[i]) - want32.data<float>()[i]) / bound);
  }
  return worst;
}

// The tensor-core kernel in the bf16 mode against the reference with bf16 operands (same products,
// double sums) and, per output, within its operands' bf16 rounding of exact f32; the f32 mode
// against exact f32. Odd token counts, tile tails
// (rows not a multiple of 128), experts without rows, every row on one expert (several tiles).
TEST_F(CudaMoe, grouped_matmul_matches_the_reference_in_both_precisions) {
  Rng rng(35);
  const Format formats[] = {{4, 32, DType::bf16},  {4, 64, DType::bf16}, {4, 128, DType::bf16}, {8, 32, DType::bf16}, {8, 64, DType::f16},
                            {8, 128, DType::bf16}, {4, 64, DType::f16},  {4, 64, DType::f32},   {0, 0, DType::bf16}};
  struct Case {
    int64_t n, k, rows, cols;
    Spread spread;
  };
  const Case cases[] = {{9, 4, 72, 256, Spread::uniform},
                        {37, 2, 200, 128, Spread::even_only},
                        {130, 3, 136, 384, Spread::one_expert},
                        {1, 1, 64, 128, Spread::uniform}};
  for (const Format& f : formats)
    for (const Case& c : cases)
      for (ops::GroupedRows mode : {ops::GroupedRows::gather, ops::GroupedRows::scatter}) {
        const int64_t E = 8, m = c.n * c.k;
        std::vector<Weight> host, dev;
        for (int64_t e = 0; e < E; ++e) {
          Weight w = f.bits ? test::random_quantized(c.rows, c.cols, f.bits, f.group, f.scales, rng)
                            : dense_weight(test::random_tensor({c.rows, c.cols}, DType::bf16, rng));
          host.push_back(w);
          dev.push_back(test::gpu(w));
        }
        ops::ExpertSet hs(host), ds(dev);
        Tensor ids = choose_experts(m, E, c.spread, rng);
        Tensor offsets = Tensor::zeros({E + 1}, DType::i32), sorted = Tensor::zeros({m}, DType::i32);
        ops::moe_group(ids, E, offsets, sorted);
        const bool gather = mode == ops::GroupedRows::gather;
        Tensor x = test::random_tensor({gather ? c.n : m, c.cols}, DType::f32, rng);
        Tensor want16 = Tensor::zeros({m, c.rows}, DType::f32), want32 = Tensor::zeros({m, c.rows}, DType::f32);
        ops::ref::grouped_expert_matmul(x, hs, offsets.data<int32_t>(), sorted.data<int32_t>(), m, mode, true, want16);
        ops::ref::grouped_expert_matmul(x, hs, offsets.data<int32_t>(), sorted.data<int32_t>(), m, mode, false, want32);
        Tensor gx = x.to(Device::cuda), goff = offsets.to(Device::cuda), gsorted = sorted.to(Device::cuda);
        SCOPED_TRACE("bits " + std::to_string(f.bits) + " g" + std::to_string(f.group) + " n " + std::to_string(c.n) + " rows " +
                     std::to_string(c.rows) + (gather ? " gather " : " scatter ") + test::seed_note());
        {
          PrecisionScope p(ops::MatmulPrecision::bf16);
          Tensor y = Tensor::zeros({m, c.rows}, DType::f32, Device::cuda);
          ops::grouped_expert_matmul(gx, ds, goff, gsorted, mode, y);
          EXPECT_LE(grouped_error(y, want16, x, hs), 2e-5);
          EXPECT_LE(bf16_rounding_ratio(y, want32, x, hs, offsets, sorted, mode), 1.0);
        }
        {
          PrecisionScope p(ops::MatmulPrecision::f32);
          Tensor y = Tensor::zeros({m, c.rows}, DType::f32, Device::cuda);
          ops::grouped_expert_matmul(gx, ds, goff, gsorted, mode, y);
          EXPECT_LE(grouped_error(y, want32, x, hs), 1e-5);
        }
      }
}

// A (token, rank) row's result has the same bits whichever other tokens share the call.
TEST_F(CudaMoe, grouped_rows_do_not_depend_on_the_batch) {
  Rng rng(36);
  PrecisionScope p(ops::MatmulPrecision::bf16);
  const int64_t E = 16, k = 4, n = 300, part = 41, rows = 256, cols = 512;
  std::vector<Weight> dev;
  for (int64_t e = 0; e < E; ++e) dev.push_back(test::gpu(test::random_quantized(rows, cols, 4, 64, DType::bf16, rng)));
  ops::ExpertSet ds(dev);
  Tensor ids = choose_experts(n * k, E, Spread::uniform, rng);
  Tensor x = test::random_tensor({n, cols}, DType::f32, rng);
  // y rows in (token, rank) order for the first `tokens` tokens.
  auto run = [&](int64_t tokens) {
    const int64_t m = tokens * k;
    Tensor offsets = Tensor::zeros({E + 1}, DType::i32, Device::cuda), sorted = Tensor::zeros({m}, DType::i32, Device::cuda);
    ops::moe_group(ids.slice(0, 0, m).to(Device::cuda), E, offsets, sorted);
    Tensor mid = Tensor::zeros({m, rows}, DType::f32, Device::cuda), y = Tensor::zeros({m, rows}, DType::f32, Device::cuda);
    ops::grouped_expert_matmul(x.slice(0, 0, tokens).to(Device::cuda), ds, offsets, sorted, ops::GroupedRows::gather, mid);
    Tensor h = mid.to(Device::cpu), s = sorted.to(Device::cpu), out = Tensor::zeros({m, rows}, DType::f32);
    for (int64_t j = 0; j < m; ++j)
      std::memcpy(out.data<float>() + s.data<int32_t>()[j] * rows, h.data<float>() + j * rows, static_cast<size_t>(rows) * 4);
    return out;
  };
  Tensor all = run(n), some = run(part);
  for (int64_t i = 0; i < part * k; ++i)
    EXPECT_TRUE(test::same_bits(all.data<float>() + i * rows, some.data<float>() + i * rows, rows)) << "row " << i;
}

// ---- a whole MoE block: device (grouped, bf16 and host-grouped f32 modes) against the host ----

std::vector<uint16_t> bf16_bytes(const Tensor& t) {
  std::vector<uint16_t> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.raw(), v.size() * 2);
  return v;
}

// E quantized experts of (rows, cols) as one MLX grid at `name`.
void add_grid(std::vector<testing::StTensor>& ts, const std::string& name, int64_t E, int64_t rows, int64_t cols, int bits, int group,
              Rng& rng) {
  std::string data, scales, biases;
  for (int64_t e = 0; e < E; ++e) {
    Weight w = test::random_quantized(rows, cols, bits, group, DType::bf16, rng);
    data.append(static_cast<const char*>(w.data.raw()), w.data.nbytes());
    scales.append(static_cast<const char*>(w.scales.raw()), w.scales.nbytes());
    biases.append(static_cast<const char*>(w.biases.raw()), w.biases.nbytes());
  }
  ts.push_back({name + ".weight", "U32", {E, rows, cols * bits / 32}, data});
  ts.push_back({name + ".scales", "BF16", {E, rows, cols / group}, scales});
  ts.push_back({name + ".biases", "BF16", {E, rows, cols / group}, biases});
}

void add_linear(std::vector<testing::StTensor>& ts, const std::string& name, int64_t rows, int64_t cols, int bits, int group, Rng& rng) {
  Weight w = test::random_quantized(rows, cols, bits, group, DType::bf16, rng);
  ts.push_back({name + ".weight", "U32", {rows, cols * bits / 32}, std::string(static_cast<const char*>(w.data.raw()), w.data.nbytes())});
  ts.push_back({name + ".scales", "BF16", {rows, cols / group}, std::string(static_cast<const char*>(w.scales.raw()), w.scales.nbytes())});
  ts.push_back({name + ".biases", "BF16", {rows, cols / group}, std::string(static_cast<const char*>(w.biases.raw()), w.biases.nbytes())});
}

// Experts as MLX grids or as a Hugging Face fused gate_up grid; loaded in the f32 mode (checkpoint
// layout) or in the bf16 mode, which tiles the 4-bit grids for the decode mat-vec (the views of each
// expert, and of its gate and up halves, inside one tiled grid). Decode-sized inputs take the
// expert mat-vecs (in the bf16 mode gate, up and the SwiGLU in one launch), longer ones the grouped
// path.
TEST_F(CudaMoe, moe_block_on_the_device_matches_the_host) {
  Rng rng(37);
  const int64_t H = 128, I = 64, E = 16, k = 4, S = 64;
  for (int bits : {4, 8})
    for (bool fused_grid : {false, true})
      for (ops::MatmulPrecision load_mode : {ops::MatmulPrecision::f32, ops::MatmulPrecision::bf16}) {
        testing::TempDir dir;
        std::vector<testing::StTensor> ts;
        // Router: logit e = x[e] exactly on both sides (x's first E values are distinct multiples of
        // 1/4), so both pick the same experts and the comparison sees only the experts' arithmetic.
        Tensor router = Tensor::zeros({E, H}, DType::bf16);
        for (int64_t e = 0; e < E; ++e) router.data<uint16_t>()[e * H + e] = f32_to_bf16(1.0f);
        ts.push_back({"mlp.gate.weight", "BF16", {E, H}, testing::bytes_of(bf16_bytes(router))});
        ts.push_back({"mlp.shared_expert_gate.weight",
                      "BF16",
                      {1, H},
                      testing::bytes_of(bf16_bytes(test::random_tensor({1, H}, DType::bf16, rng, 0.1f)))});
        if (fused_grid) {  // Hugging Face names its grids without a ".weight"
          for (const char* name : {"mlp.experts.gate_up_proj", "mlp.experts.down_proj"}) {
            const bool gate_up = std::string(name).ends_with("gate_up_proj");
            add_grid(ts, name, E, gate_up ? 2 * I : H, gate_up ? H : I, bits, 64, rng);
            ts[ts.size() - 3].name = name;
          }
        } else {
          add_grid(ts, "mlp.switch_mlp.gate_proj", E, I, H, bits, 64, rng);
          add_grid(ts, "mlp.switch_mlp.up_proj", E, I, H, bits, 64, rng);
          add_grid(ts, "mlp.switch_mlp.down_proj", E, H, I, bits, 64, rng);
        }
        add_linear(ts, "mlp.shared_expert.gate_proj", S, H, bits, 64, rng);
        add_linear(ts, "mlp.shared_expert.up_proj", S, H, bits, 64, rng);
        add_linear(ts, "mlp.shared_expert.down_proj", H, S, bits, 64, rng);
        testing::write_bytes(dir.path / "model.safetensors", testing::make_safetensors(ts));
        const QuantConfig quant =
            QuantConfig::from_json(nlohmann::json::parse(R"({"quantization": {"group_size": 64, "bits": )" + std::to_string(bits) +
                                                         R"(, "mlp.gate": false, "mlp.shared_expert_gate": false}})"));
        MoeConfig cfg;
        cfg.hidden = H;
        cfg.expert_intermediate = I;
        cfg.n_experts = E;
        cfg.top_k = k;
        cfg.shared_expert_intermediate = S;
        Checkpoint hckpt(dir.str()), dckpt(dir.str());
        dckpt.set_device(Device::cuda);
        MoeBlock hblock(hckpt, "mlp.", cfg, quant);
        std::optional<MoeBlock> dblock;
        {
          PrecisionScope load(load_mode);
          dblock.emplace(dckpt, "mlp.", cfg, quant);
        }
        Workspace hws, dws(Device::cuda);
        for (int64_t n : {1, 3, 9, 37, 300}) {
          Tensor x = test::random_tensor({n, H}, DType::f32, rng);
          std::vector<int> order(static_cast<size_t>(E));
          for (int64_t t = 0; t < n; ++t) {
            std::iota(order.begin(), order.end(), 0);
            for (int64_t i = E - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(rng.integer(0, i))]);
            for (int64_t e = 0; e < E; ++e) x.data<float>()[t * H + e] = 0.25f * static_cast<float>(order[static_cast<size_t>(e)]);
          }
          Tensor want = Tensor::zeros({n, H}, DType::f32);
          hblock.forward(x, BatchRows{}, hws, want);
          double rms = 0.0;
          for (int64_t i = 0; i < want.numel(); ++i) rms += std::pow(want.data<float>()[i], 2);
          rms = std::sqrt(rms / static_cast<double>(want.numel()));
          for (ops::MatmulPrecision prec : {ops::MatmulPrecision::bf16, ops::MatmulPrecision::f32}) {
            PrecisionScope p(prec);
            Tensor out = Tensor::zeros({n, H}, DType::f32, Device::cuda);
            dblock->forward(x.to(Device::cuda), BatchRows{}, dws, out);
            Tensor got = out.to(Device::cpu);
            double worst = 0.0, sq = 0.0;
            for (int64_t i = 0; i < got.numel(); ++i) {
              const double d = std::abs(static_cast<double>(got.data<float>()[i]) - want.data<float>()[i]);
              worst = std::max(worst, d);
              sq += d * d;
            }
            const bool bf16 = prec == ops::MatmulPrecision::bf16;
            SCOPED_TRACE("bits " + std::to_string(bits) + (fused_grid ? " fused gate_up grid" : " mlx grids") + " loaded in " +
                         ops::matmul_precision_name(load_mode) + " n " + std::to_string(n) + (bf16 ? " bf16 " : " f32 ") +
                         test::seed_note());
            EXPECT_LE(worst / rms, bf16 ? 5e-2 : 1e-4);
            EXPECT_LE(std::sqrt(sq / static_cast<double>(got.numel())) / rms, bf16 ? 1e-2 : 1e-5);
            if (bf16 && n >= 16 && n <= 64) {  // the experts grouped by the tokens choosing them: the per-pair launches' bits
              Tuning per_pair;
              per_pair.set(Knob::group_decode_experts, false);
              const ScopedTuning use(per_pair);
              Tensor ungrouped = Tensor::zeros({n, H}, DType::f32, Device::cuda);
              dblock->forward(x.to(Device::cuda), BatchRows{}, dws, ungrouped);
              EXPECT_TRUE(same_bits(out, ungrouped)) << "grouped experts against the per-pair launches";
            }
          }
        }
      }
}

// ---- tiled experts (the bf16 mode's load-time layout) by device ids ----

// Tiles a host grid of E experts (E * rows, cols) as MoeBlock does at load: one weight on the GPU,
// reordered whole, then each expert a view of its rows.
std::vector<Weight> tiled_grid_views(const std::vector<Weight>& experts) {
  const Weight& a = experts[0];
  const int64_t E = static_cast<int64_t>(experts.size()), rows = a.rows;
  Tensor data = Tensor::zeros({E * rows, a.data.dim(1)}, a.data.dtype());
  Tensor scales = Tensor::zeros({E * rows, a.scales.dim(1)}, a.scales.dtype()),
         biases = Tensor::zeros({E * rows, a.biases.dim(1)}, a.biases.dtype());
  for (int64_t e = 0; e < E; ++e)
    for (auto [from, to] : {std::pair{&experts[static_cast<size_t>(e)].data, &data},
                            {&experts[static_cast<size_t>(e)].scales, &scales},
                            {&experts[static_cast<size_t>(e)].biases, &biases}})
      std::memcpy(static_cast<char*>(to->raw()) + e * from->nbytes(), from->raw(), from->nbytes());
  Weight whole = a;
  whole.data = data.to(Device::cuda);
  whole.scales = scales.to(Device::cuda);
  whole.biases = biases.to(Device::cuda);
  whole.rows = E * rows;
  EXPECT_TRUE(ops::cuda::can_tile(whole));
  ops::cuda::tile_weight(whole);
  std::vector<Weight> views;
  for (int64_t e = 0; e < E; ++e) {
    Weight v = whole;
    v.data = whole.data.slice(0, e * rows, (e + 1) * rows);
    v.scales = whole.scales.slice(0, e * rows, (e + 1) * rows);
    v.biases = whole.biases.slice(0, e * rows, (e + 1) * rows);
    v.rows = rows;
    views.push_back(v);
  }
  return views;
}

std::vector<Weight> random_experts(int64_t E, int64_t rows, int64_t cols, int group, DType scales, Rng& rng) {
  std::vector<Weight> v;
  for (int64_t e = 0; e < E; ++e) v.push_back(test::random_quantized(rows, cols, 4, group, scales, rng));
  return v;
}

// Expert shapes of the tiled-expert tests: small, the 35B-A3B's (512 x 2048), and f16 scales in
// groups of 128.
struct ExpertShape {
  int64_t inter, hidden;
  int group;
  DType scales;
};
constexpr ExpertShape kExpertShapes[] = {{64, 256, 64, DType::bf16}, {512, 2048, 64, DType::bf16}, {128, 640, 128, DType::f16}};

// Against exact f32 on the host, each output within the kernel's rounding (tiled_rounding_ratio; a
// statistical bound over all outputs had been crossed by one drawn input); gate and up in one launch
// against each alone, and with the SwiGLU fused bit for bit against that launch and silu_mul; a slot
// against the tiled dense mat-vec of its expert.
TEST_F(CudaMoe, tiled_experts_by_device_ids) {
  Rng rng(38);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  for (const ExpertShape& sh : kExpertShapes) {
    const int64_t E = 10, I = sh.inter, H = sh.hidden;
    const std::vector<Weight> hg = random_experts(E, I, H, sh.group, sh.scales, rng),
                              hu = random_experts(E, I, H, sh.group, sh.scales, rng);
    const std::vector<Weight> hd = random_experts(E, H, I, sh.group, sh.scales, rng);
    const ops::ExpertSet gate(tiled_grid_views(hg)), up(tiled_grid_views(hu)), down(tiled_grid_views(hd));
    const ops::ExpertSet host_gate(hg), host_up(hu), host_down(hd);
    for (int64_t n : {1, 3, 8}) {
      const int64_t k = 4, m = n * k;
      Tensor ids = choose_experts(m, E, Spread::uniform, rng), gids = ids.to(Device::cuda);
      const Tensor x = test::random_tensor({n, H}, DType::f32, rng), gx = x.to(Device::cuda);
      SCOPED_TRACE("I " + std::to_string(I) + " H " + std::to_string(H) + " n " + std::to_string(n) + " " + test::seed_note());

      Tensor g1 = Tensor::zeros({m, I}, DType::f32, Device::cuda), u1 = Tensor::zeros({m, I}, DType::f32, Device::cuda);
      ops::expert_matmul(gx, gate, gids, g1);
      ops::expert_matmul(gx, up, gids, u1);
      Tensor want_g = Tensor::zeros({m, I}, DType::f32), want_u = Tensor::zeros({m, I}, DType::f32);
      {
        PrecisionScope exact(ops::MatmulPrecision::f32);
        ops::expert_matmul(x, host_gate, ids, want_g);
        ops::expert_matmul(x, host_up, ids, want_u);
      }
      EXPECT_LE(tiled_rounding_ratio(g1, want_g, x, host_gate, ids), 1.0);
      EXPECT_LE(tiled_rounding_ratio(u1, want_u, x, host_up, ids), 1.0);

      Tensor g2 = Tensor::zeros({m, I}, DType::f32, Device::cuda), u2 = Tensor::zeros({m, I}, DType::f32, Device::cuda);
      ops::expert_gate_up_matmul(gx, gate, up, gids, g2, u2);
      EXPECT_LE(max_abs_diff(g2, g1), 1e-5 * (1.0 + max_abs_diff(g1, Tensor::zeros({m, I}, DType::f32, Device::cuda))));
      EXPECT_LE(max_abs_diff(u2, u1), 1e-5 * (1.0 + max_abs_diff(u1, Tensor::zeros({m, I}, DType::f32, Device::cuda))));

      // The SwiGLU in the gate/up launch: the bits of that launch followed by silu_mul (act strided).
      Tensor both = Tensor::zeros({m, I}, DType::f32, Device::cuda), fused_rows = Tensor::zeros({m, I + 8}, DType::f32, Device::cuda);
      Tensor fused = fused_rows.slice(1, 0, I);
      ops::silu_mul(g2, u2, both);
      ASSERT_TRUE(ops::expert_gate_up_silu_mul_ok(gx, gate, up, fused));
      ops::expert_gate_up_silu_mul(gx, gate, up, gids, fused);
      EXPECT_TRUE(same_bits(fused, both)) << "fused SwiGLU against gate/up then silu_mul";

      const int64_t slot = m - 1, e = ids.data<int32_t>()[slot];
      Tensor alone = Tensor::zeros({1, I}, DType::f32, Device::cuda);
      ops::matmul(gx.slice(0, slot / k, slot / k + 1), gate[e], alone);
      EXPECT_LE(max_abs_diff(alone, g1.slice(0, slot, slot + 1)),
                1e-5 * (1.0 + max_abs_diff(alone, Tensor::zeros({1, I}, DType::f32, Device::cuda))));

      Tensor act = Tensor::zeros({m, I}, DType::f32, Device::cuda), y = Tensor::zeros({m, H}, DType::f32, Device::cuda);
      ops::silu_mul(g1, u1, act);
      ops::expert_matmul(act, down, gids, y);
      Tensor want_y = Tensor::zeros({m, H}, DType::f32);
      {
        PrecisionScope exact(ops::MatmulPrecision::f32);
        ops::expert_matmul(act.to(Device::cpu), host_down, ids, want_y);
      }
      EXPECT_LE(tiled_rounding_ratio(y, want_y, act.to(Device::cpu), host_down, ids), 1.0);
    }
  }
}

// The fused expert SwiGLU is offered only where its kernel takes the call, and a call elsewhere is
// an error, not a wrong answer.
TEST_F(CudaMoe, fused_expert_swiglu_is_refused_where_no_kernel_takes_it) {
  Rng rng(41);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  const int64_t E = 4, I = 64, H = 256;
  const std::vector<Weight> hg = random_experts(E, I, H, 64, DType::bf16, rng), hu = random_experts(E, I, H, 64, DType::bf16, rng);
  const std::vector<Weight> hd = random_experts(E, H, I, 64, DType::bf16, rng);
  const ops::ExpertSet gate(tiled_grid_views(hg)), up(tiled_grid_views(hu)), down(tiled_grid_views(hd)), host_gate(hg), host_up(hu);
  std::vector<Weight> rows;
  for (const Weight& w : hg) rows.push_back(test::gpu(w));
  const ops::ExpertSet row_gate(rows);
  const Tensor gx = test::random_tensor({1, H}, DType::f32, rng).to(Device::cuda), x = test::random_tensor({1, H}, DType::f32, rng);
  Tensor act = Tensor::zeros({2, I}, DType::f32, Device::cuda), host_act = Tensor::zeros({2, I}, DType::f32);
  EXPECT_TRUE(ops::expert_gate_up_silu_mul_ok(gx, gate, up, act));
  EXPECT_FALSE(ops::expert_gate_up_silu_mul_ok(gx, row_gate, up, act)) << "row layout";
  EXPECT_FALSE(ops::expert_gate_up_silu_mul_ok(gx, gate, down, act)) << "gate and up of different shapes";
  EXPECT_FALSE(ops::expert_gate_up_silu_mul_ok(x, host_gate, host_up, host_act)) << "host";
  {
    PrecisionScope exact(ops::MatmulPrecision::f32);
    EXPECT_FALSE(ops::expert_gate_up_silu_mul_ok(gx, gate, up, act)) << "f32 mode";
    const Tensor ids = Tensor::zeros({2}, DType::i32, Device::cuda);
    EXPECT_THROW(ops::expert_gate_up_silu_mul(gx, gate, up, ids, act), Error);
  }
}

// ---- decode's experts grouped by the tokens that chose them ----

// The tasks as moe_expert_tasks defines them, checked from the definition alone: every slot in exactly
// one task of its own expert, a task's slots ascending and at most kExpertTaskSlots, the tasks in
// expert order and only the last of an expert short. Returns the tasks' defined words, in order.
std::vector<int32_t> checked_tasks(const Tensor& tasks_any, const Tensor& ids) {
  const Tensor tasks = tasks_any.to(Device::cpu);
  const int64_t m = ids.numel();
  const int32_t* t = tasks.data<int32_t>();
  std::vector<int> seen(static_cast<size_t>(m), 0);
  std::vector<int32_t> words = {t[0]};
  int32_t last_expert = -1, last_count = ops::kExpertTaskSlots;
  for (int32_t j = 0; j < t[0]; ++j) {
    const int32_t* task = t + 1 + j * ops::kExpertTaskWords;
    EXPECT_TRUE(task[1] >= 1 && task[1] <= ops::kExpertTaskSlots) << "task " << j;
    EXPECT_TRUE(task[0] > last_expert || (task[0] == last_expert && last_count == ops::kExpertTaskSlots)) << "task " << j;
    last_expert = task[0];
    last_count = task[1];
    words.insert(words.end(), task, task + 2);
    for (int32_t i = 0; i < task[1]; ++i) {
      const int32_t slot = task[2 + i];
      if (slot < 0 || slot >= m) {
        ADD_FAILURE() << "slot " << slot << " out of range in task " << j;
        continue;
      }
      ++seen[static_cast<size_t>(slot)];
      EXPECT_EQ(ids.data<int32_t>()[slot], task[0]) << "slot " << slot;
      if (i > 0) {
        EXPECT_LT(task[1 + i], slot) << "task " << j;
      }
      words.push_back(slot);
    }
  }
  for (int64_t s = 0; s < m; ++s) EXPECT_EQ(seen[static_cast<size_t>(s)], 1) << "slot " << s;
  return words;
}

TEST_F(CudaMoe, expert_tasks_on_the_device_equal_the_host) {
  Rng rng(44);
  for (int64_t E : {8, 65, 257})
    for (int64_t m : {1, 9, 16, 72, 144, 576})
      for (Spread spread : {Spread::uniform, Spread::even_only, Spread::one_expert}) {
        SCOPED_TRACE("E " + std::to_string(E) + " m " + std::to_string(m) + " " + test::seed_note());
        const Tensor ids = choose_experts(m, E, spread, rng);
        Tensor host = Tensor::zeros({1 + m * ops::kExpertTaskWords}, DType::i32);
        ops::moe_expert_tasks(ids, E, host);
        const std::vector<int32_t> want = checked_tasks(host, ids);
        Tensor dev = Tensor::zeros({1 + m * ops::kExpertTaskWords}, DType::i32, Device::cuda);
        ops::moe_expert_tasks(ids.to(Device::cuda), E, dev);
        EXPECT_EQ(checked_tasks(dev, ids), want);
      }
}

// Grouped launches against the per-slot launches over the same ids, bit for bit: gate/up with the
// SwiGLU into strided rows and the down projection; experts chosen by many slots (tasks of 8 and a
// partial one), by one slot, the shared expert appended to every token, and every slot on one expert.
TEST_F(CudaMoe, grouped_experts_give_each_slot_the_per_slot_bits) {
  Rng rng(45);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  for (const ExpertShape& sh : kExpertShapes) {
    const int64_t E = 12, I = sh.inter, H = sh.hidden;
    const std::vector<Weight> hg = random_experts(E + 1, I, H, sh.group, sh.scales, rng),
                              hu = random_experts(E + 1, I, H, sh.group, sh.scales, rng);
    const std::vector<Weight> hd = random_experts(E + 1, H, I, sh.group, sh.scales, rng);
    const ops::ExpertSet gate(tiled_grid_views(hg)), up(tiled_grid_views(hu)), down(tiled_grid_views(hd));
    for (int64_t n : {16, 33, 64})
      for (Spread spread : {Spread::uniform, Spread::one_expert}) {
        const int64_t k = 4, ranks = k + 1, m = n * ranks;
        SCOPED_TRACE("I " + std::to_string(I) + " H " + std::to_string(H) + " n " + std::to_string(n) + " " + test::seed_note());
        Tensor ids = choose_experts(m, E, spread, rng);
        for (int64_t t = 0; t < n; ++t) ids.data<int32_t>()[t * ranks + k] = static_cast<int32_t>(E);  // the shared expert
        const Tensor gids = ids.to(Device::cuda), gx = test::random_tensor({n, H}, DType::f32, rng).to(Device::cuda);
        Tensor tasks = Tensor::zeros({1 + m * ops::kExpertTaskWords}, DType::i32, Device::cuda);
        ops::moe_expert_tasks(gids, E + 1, tasks);

        Tensor want_rows = Tensor::zeros({m, I + 8}, DType::f32, Device::cuda),
               got_rows = Tensor::zeros({m, I + 8}, DType::f32, Device::cuda);
        Tensor want = want_rows.slice(1, 0, I), got = got_rows.slice(1, 0, I);
        ops::expert_gate_up_silu_mul(gx, gate, up, gids, want);
        ASSERT_TRUE(ops::grouped_experts_ok(gx, gate, got));
        ops::grouped_expert_gate_up_silu_mul(gx, gate, up, tasks, got);
        EXPECT_TRUE(same_bits(got, want)) << "gate/up with the SwiGLU";

        Tensor want_y = Tensor::zeros({m, H}, DType::f32, Device::cuda), got_y = Tensor::zeros({m, H}, DType::f32, Device::cuda);
        ops::expert_matmul(want, down, gids, want_y);
        ASSERT_TRUE(ops::grouped_experts_ok(want, down, got_y));
        ops::grouped_expert_matvec(want, down, tasks, got_y);
        EXPECT_TRUE(same_bits(got_y, want_y)) << "down";
      }
  }
}

// Grouped launches are offered only where their kernels take the call; elsewhere a call is an error.
TEST_F(CudaMoe, grouped_experts_are_refused_where_no_kernel_takes_them) {
  Rng rng(46);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  const int64_t E = 4, I = 64, H = 256, m = 32;
  const std::vector<Weight> hg = random_experts(E, I, H, 64, DType::bf16, rng), hu = random_experts(E, I, H, 64, DType::bf16, rng);
  const ops::ExpertSet gate(tiled_grid_views(hg)), up(tiled_grid_views(hu)), host_gate(hg);
  const Tensor gx = test::random_tensor({m / 4, H}, DType::f32, rng).to(Device::cuda);
  Tensor act = Tensor::zeros({m, I}, DType::f32, Device::cuda);
  Tensor tasks = Tensor::zeros({1 + m * ops::kExpertTaskWords}, DType::i32, Device::cuda);
  ops::moe_expert_tasks(choose_experts(m, E, Spread::uniform, rng).to(Device::cuda), E, tasks);
  EXPECT_TRUE(ops::grouped_experts_ok(gx, gate, act));
  EXPECT_FALSE(ops::grouped_experts_ok(gx.to(Device::cpu), host_gate, act)) << "host";
  Tensor short_tasks = tasks.slice(0, 0, m);
  EXPECT_THROW(ops::grouped_expert_gate_up_silu_mul(gx, gate, up, short_tasks, act), Error) << "tasks of another size";
  PrecisionScope exact(ops::MatmulPrecision::f32);
  EXPECT_FALSE(ops::grouped_experts_ok(gx, gate, act)) << "f32 mode";
  EXPECT_THROW(ops::grouped_expert_gate_up_silu_mul(gx, gate, up, tasks, act), Error);
}

// Decode's routing inside the gate/up launch: the ids and weights moe_route writes, bit for bit, and
// the bits of the unrouted launch over those ids; with the shared expert as an appended rank (softmax
// first, 256 experts) and without one (softmax over the k chosen), logits with ties and a -0/+0 pair.
TEST_F(CudaMoe, routing_inside_the_expert_launch_gives_moe_routes_bits) {
  Rng rng(43);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  struct Case {
    int64_t E, k;
    bool softmax_first, appended;
  };
  for (const Case& c : {Case{256, 8, true, true}, Case{8, 2, false, false}, Case{60, 4, true, false}}) {
    const int64_t I = 64, H = 256, sets = c.appended ? c.E + 1 : c.E, ranks = c.appended ? c.k + 1 : c.k;
    const int32_t appended = c.appended ? static_cast<int32_t>(c.E) : -1;
    const std::vector<Weight> hg = random_experts(sets, I, H, 64, DType::bf16, rng), hu = random_experts(sets, I, H, 64, DType::bf16, rng);
    const ops::ExpertSet gate(tiled_grid_views(hg)), up(tiled_grid_views(hu));
    const ops::MoeRouting how{c.k, c.softmax_first, true};
    for (int64_t n : {1, 3, 8}) {
      SCOPED_TRACE("E " + std::to_string(c.E) + " k " + std::to_string(c.k) + " n " + std::to_string(n) + " " + test::seed_note());
      Tensor logits = test::random_tensor({n, c.E}, DType::f32, rng);
      float* l = logits.data<float>();
      l[c.E - 1] = l[1];  // a tie: the lower id wins
      l[2] = -0.0f, l[3] = 0.0f;
      if (n > 1) l[c.E + 5] = l[c.E + 4] = 3.0f;  // a tie at the top of token 1
      const Tensor glogits = logits.to(Device::cuda), gx = test::random_tensor({n, H}, DType::f32, rng).to(Device::cuda);
      Tensor ids = Tensor::zeros({n * ranks}, DType::i32, Device::cuda), w = Tensor::zeros({n, c.k}, DType::f32, Device::cuda);
      ops::moe_route(glogits, how, ids, w, appended);
      Tensor want_act = Tensor::zeros({n * ranks, I}, DType::f32, Device::cuda),
             act = Tensor::zeros({n * ranks, I}, DType::f32, Device::cuda);
      ops::expert_gate_up_silu_mul(gx, gate, up, ids, want_act);
      Tensor routed_ids = Tensor::zeros({n * ranks}, DType::i32, Device::cuda),
             routed_w = Tensor::zeros({n, c.k}, DType::f32, Device::cuda);
      ASSERT_TRUE(ops::expert_gate_up_silu_mul_routed_ok(gx, gate, up, glogits, act));
      ops::expert_gate_up_silu_mul_routed(gx, gate, up, glogits, how, appended, routed_ids, routed_w, act);
      EXPECT_TRUE(same_bits(routed_ids, ids)) << "ids";
      EXPECT_TRUE(same_bits(routed_w, w)) << "weights";
      EXPECT_TRUE(same_bits(act, want_act)) << "act";
      // And moe_route's choices are the host's (the top k by two warp reductions a round).
      Tensor hids = Tensor::zeros({n * ranks}, DType::i32), hw = Tensor::zeros({n, c.k}, DType::f32);
      ops::moe_route(logits, how, hids, hw, appended);
      EXPECT_TRUE(same_bits(ids, hids)) << "device ids against the host's";
    }
  }
  // Refused, not wrong: more experts than the launch routes, and the host.
  const std::vector<Weight> hg = random_experts(300, 64, 256, 64, DType::bf16, rng),
                            hu = random_experts(300, 64, 256, 64, DType::bf16, rng);
  const ops::ExpertSet gate(tiled_grid_views(hg)), up(tiled_grid_views(hu));
  const Tensor gx = test::random_tensor({1, 256}, DType::f32, rng).to(Device::cuda);
  Tensor act = Tensor::zeros({8, 64}, DType::f32, Device::cuda);
  EXPECT_FALSE(ops::expert_gate_up_silu_mul_routed_ok(gx, gate, up, Tensor::zeros({1, 300}, DType::f32, Device::cuda), act));
  EXPECT_FALSE(ops::expert_gate_up_silu_mul_routed_ok(gx, gate, up, Tensor::zeros({1, 256}, DType::f32), act)) << "host logits";
  EXPECT_TRUE(ops::expert_gate_up_silu_mul_routed_ok(gx, gate, up, Tensor::zeros({1, 256}, DType::f32, Device::cuda), act));
  Tensor ids = Tensor::zeros({8}, DType::i32, Device::cuda), w = Tensor::zeros({1, 8}, DType::f32, Device::cuda);
  EXPECT_THROW(ops::expert_gate_up_silu_mul_routed(gx, gate, up, Tensor::zeros({1, 300}, DType::f32, Device::cuda),
                                                   ops::MoeRouting{8, true, true}, -1, ids, w, act),
               Error);
}

// The MoE combine at the end of one token's down launch (expert_down_combine_residual): per_rank with
// expert_matmul's bits, h and u with those of moe_combine_shared_rank_residual over those rows, the
// squares' sum within rounding of theirs; the MoE shape (2,048 x 512, groups of 64) and a small one
// (640 x 128, groups of 128, f16 scales); refused for two tokens, the f32 mode and the row layout.
TEST_F(CudaMoe, down_launch_combines_into_the_residual_stream) {
  Rng rng(45);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  struct Shape {
    int64_t hidden, inter;
    int group;
    DType scales;
  };
  for (const Shape& sh : {Shape{2048, 512, 64, DType::bf16}, Shape{640, 128, 128, DType::f16}})
    for (float offset : {0.0f, 1.0f}) {
      SCOPED_TRACE("H " + std::to_string(sh.hidden) + " offset " + std::to_string(offset) + " " + test::seed_note());
      const int64_t E = 12, k = 8, H = sh.hidden, I = sh.inter;
      const ops::ExpertSet down(tiled_grid_views(random_experts(E + 1, H, I, sh.group, sh.scales, rng)));
      Tensor ids = choose_experts(k + 1, E, Spread::uniform, rng);
      ids.data<int32_t>()[k] = static_cast<int32_t>(E);  // the shared expert, appended
      const Tensor gids = ids.to(Device::cuda), act = test::random_tensor({k + 1, I}, DType::f32, rng).to(Device::cuda);
      const Tensor weights = test::random_tensor({1, k}, DType::f32, rng).to(Device::cuda),
                   logit = test::random_tensor({1, 1}, DType::f32, rng).to(Device::cuda);
      const Tensor h0 = test::random_tensor({1, H}, DType::f32, rng), norm_w = test::random_tensor({H}, DType::bf16, rng).to(Device::cuda);
      // Unfused: the down launch, then the combine's residual form.
      Tensor want_rows = Tensor::zeros({k + 1, H}, DType::f32, Device::cuda), want_h = h0.to(Device::cuda);
      Tensor want_u = Tensor::zeros({1, H}, DType::f32, Device::cuda), want_sq = Tensor::zeros({1, H / 16}, DType::f32, Device::cuda);
      ops::expert_matmul(act, down, gids, want_rows);
      const int64_t want_count =
          ops::moe_combine_shared_rank_residual(want_rows, weights, logit, {&want_h, &norm_w, offset, &want_u, &want_sq});
      // Fused.
      Tensor rows = Tensor::zeros({k + 1, H}, DType::f32, Device::cuda), h = h0.to(Device::cuda);
      Tensor u = Tensor::zeros({1, H}, DType::f32, Device::cuda), sq = Tensor::zeros({1, H / 16}, DType::f32, Device::cuda);
      const ops::ResidualNorm r{&h, &norm_w, offset, &u, &sq};
      ASSERT_TRUE(ops::expert_down_combine_residual_ok(act, down, rows, r));
      const int64_t count = ops::expert_down_combine_residual(act, down, gids, weights, logit, rows, r);
      ASSERT_GE(count, 1);
      ASSERT_LE(count, H / 16);
      EXPECT_TRUE(same_bits(rows, want_rows)) << "per-rank rows";
      EXPECT_TRUE(same_bits(h, want_h)) << "h";
      EXPECT_TRUE(same_bits(u, want_u)) << "u";
      const Tensor a = sq.to(Device::cpu), b = want_sq.to(Device::cpu);
      double got = 0.0, want = 0.0;
      for (int64_t i = 0; i < count; ++i) got += a.data<float>()[i];
      for (int64_t i = 0; i < want_count; ++i) want += b.data<float>()[i];
      EXPECT_NEAR(got, want, 1e-5 * want) << "squares";
      // And again: the launch leaves its counters ready for the next one.
      Tensor h2 = h0.to(Device::cuda);
      const ops::ResidualNorm r2{&h2, &norm_w, offset, &u, &sq};
      ops::expert_down_combine_residual(act, down, gids, weights, logit, rows, r2);
      EXPECT_TRUE(same_bits(h2, want_h)) << "h, second launch";
    }
  const ops::ExpertSet down(tiled_grid_views(random_experts(5, 640, 128, 64, DType::bf16, rng)));
  std::vector<Weight> row_layout;
  for (const Weight& w : random_experts(5, 640, 128, 64, DType::bf16, rng)) row_layout.push_back(test::gpu(w));
  const ops::ExpertSet rows_down(row_layout);
  const Tensor norm_w = Tensor::zeros({640}, DType::bf16, Device::cuda);
  Tensor h = Tensor::zeros({1, 640}, DType::f32, Device::cuda), u = Tensor::zeros({1, 640}, DType::f32, Device::cuda);
  Tensor sq = Tensor::zeros({1, 40}, DType::f32, Device::cuda), act = Tensor::zeros({3, 128}, DType::f32, Device::cuda);
  Tensor rows = Tensor::zeros({3, 640}, DType::f32, Device::cuda), two_h = Tensor::zeros({2, 640}, DType::f32, Device::cuda);
  EXPECT_TRUE(ops::expert_down_combine_residual_ok(act, down, rows, {&h, &norm_w, 0.0f, &u, &sq}));
  EXPECT_FALSE(ops::expert_down_combine_residual_ok(act, down, rows, {&two_h, &norm_w, 0.0f, &u, &sq})) << "two tokens";
  EXPECT_FALSE(ops::expert_down_combine_residual_ok(act, rows_down, rows, {&h, &norm_w, 0.0f, &u, &sq})) << "row layout";
  {
    PrecisionScope exact(ops::MatmulPrecision::f32);
    EXPECT_FALSE(ops::expert_down_combine_residual_ok(act, down, rows, {&h, &norm_w, 0.0f, &u, &sq})) << "f32 mode";
  }
}

// The grouped tensor-core path (prompts) reads tiled experts as it reads the row layout.
TEST_F(CudaMoe, grouped_matmul_reads_tiled_experts) {
  Rng rng(39);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  for (int group : {64, 128})
    for (DType st : {DType::bf16, DType::f16}) {
      const int64_t E = 8, rows = 96, cols = 384, n = 37, k = 3, m = n * k;
      const std::vector<Weight> host = random_experts(E, rows, cols, group, st, rng);
      std::vector<Weight> rows_layout;
      for (const Weight& w : host) rows_layout.push_back(test::gpu(w));
      const ops::ExpertSet tiled(tiled_grid_views(host)), plain(rows_layout);
      Tensor ids = choose_experts(m, E, Spread::uniform, rng);
      Tensor offsets = Tensor::zeros({E + 1}, DType::i32, Device::cuda), sorted = Tensor::zeros({m}, DType::i32, Device::cuda);
      ops::moe_group(ids.to(Device::cuda), E, offsets, sorted);
      const Tensor x = test::random_tensor({n, cols}, DType::f32, rng).to(Device::cuda);
      Tensor a = Tensor::zeros({m, rows}, DType::f32, Device::cuda), b = Tensor::zeros({m, rows}, DType::f32, Device::cuda);
      ops::grouped_expert_matmul(x, tiled, offsets, sorted, ops::GroupedRows::gather, a);
      ops::grouped_expert_matmul(x, plain, offsets, sorted, ops::GroupedRows::gather, b);
      EXPECT_TRUE(same_bits(a, b)) << "g" << group << " " << dtype_name(st);
    }
}

}  // namespace
}  // namespace sanctum

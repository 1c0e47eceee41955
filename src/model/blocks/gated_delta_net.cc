#include "model/blocks/gated_delta_net.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "model/blocks/row_lora.h"
#include "model/blocks/stacked_linear.h"
#include "ops/ops.h"

namespace sanctum {

namespace {
enum Slot : size_t { kQkv = 400, kZ, kB, kA, kConv, kY, kStacked };
}

GatedDeltaNetBlock::GatedDeltaNetBlock(Checkpoint& ckpt, const std::string& prefix, const GatedDeltaNetShape& s, float norm_eps,
                                       const QuantConfig& quant)
    : shape_(s), eps_(norm_eps), prefix_(prefix) {
  const int64_t hv = s.heads.n_value_heads;
  in_qkv_ = ckpt.linear(prefix + "in_proj_qkv", s.conv_dim(), s.hidden, quant);
  in_z_ = ckpt.linear(prefix + "in_proj_z", s.value_dim(), s.hidden, quant);
  in_b_ = ckpt.linear(prefix + "in_proj_b", hv, s.hidden, quant);
  in_a_ = ckpt.linear(prefix + "in_proj_a", hv, s.hidden, quant);
  out_ = ckpt.linear(prefix + "out_proj", s.hidden, s.value_dim(), quant);
  for (Weight* w : {&in_qkv_, &in_z_, &in_b_, &in_a_, &out_}) ops::prepare_weight(*w);
  in_stacked_ = stack_linears(ckpt, {&in_qkv_, &in_z_, &in_b_, &in_a_}, prefix + "in_proj_{qkv,z,b,a}");

  // Hugging Face stores the depthwise kernel as (conv_dim, 1, K), mlx as (conv_dim, K, 1): the same
  // element order, so both are viewed as (conv_dim, K).
  Tensor conv = ckpt.tensor(prefix + "conv1d.weight");
  const bool hf_layout = conv.ndim() == 3 && conv.dim(0) == s.conv_dim() && conv.dim(1) == 1 && conv.dim(2) == s.conv_kernel;
  const bool mlx_layout = conv.ndim() == 3 && conv.dim(0) == s.conv_dim() && conv.dim(1) == s.conv_kernel && conv.dim(2) == 1;
  check(hf_layout || mlx_layout, ErrorKind::invalid_input,
        "tensor " + prefix + "conv1d.weight: expected (" + std::to_string(s.conv_dim()) + ", 1, " + std::to_string(s.conv_kernel) +
            ") or (" + std::to_string(s.conv_dim()) + ", " + std::to_string(s.conv_kernel) + ", 1), got " + conv.shape_string());
  conv_weight_ = conv.reshape({s.conv_dim(), s.conv_kernel});
  conv_taps_ = ops::conv1d_taps(conv_weight_);
  a_log_ = ckpt.tensor(prefix + "A_log", {hv});
  dt_bias_ = ckpt.tensor(prefix + "dt_bias", {hv});
  norm_ = ckpt.tensor(prefix + "norm.weight", {s.heads.value_dim});
}

LinearAttentionState GatedDeltaNetBlock::new_state(Device device) const {
  LinearAttentionState st;
  st.conv = Tensor::zeros({shape_.conv_kernel - 1, shape_.conv_dim()}, DType::f32, device);
  st.recurrent = Tensor::zeros({shape_.heads.n_value_heads, shape_.heads.value_dim, shape_.heads.key_dim}, DType::f32, device);
  return st;
}

void GatedDeltaNetBlock::forward(const BlockInput& x, const BatchRows& batch, size_t layer, Workspace& ws, const BlockOutput& out) const {
  const int64_t n = x.rows(), kd = shape_.key_dim(), cd = shape_.conv_dim(), hv = shape_.heads.n_value_heads;
  const int64_t vd = shape_.value_dim();
  Tensor qkv, z, b, a;
  if (in_stacked_.rows > 0) {  // one mat-vec, then views of its columns: [qkv | z | b | a]
    Tensor all = ws.get(kStacked, n, cd + vd + 2 * hv);
    x.matmul(in_stacked_, all);
    qkv = all.slice(1, 0, cd);
    z = all.slice(1, cd, cd + vd);
    b = all.slice(1, cd + vd, cd + vd + hv);
    a = all.slice(1, cd + vd + hv, cd + vd + 2 * hv);
  } else {
    qkv = ws.get(kQkv, n, cd);
    z = ws.get(kZ, n, vd);
    b = ws.get(kB, n, hv);
    a = ws.get(kA, n, hv);
    x.matmul(in_qkv_, qkv);
    x.matmul(in_z_, z);
    x.matmul(in_b_, b);
    x.matmul(in_a_, a);
  }
  if (batch_has_lora(batch)) {
    add_row_lora(batch, prefix_ + "in_proj_qkv", x.tensor(), qkv);
    add_row_lora(batch, prefix_ + "in_proj_z", x.tensor(), z);
    add_row_lora(batch, prefix_ + "in_proj_b", x.tensor(), b);
    add_row_lora(batch, prefix_ + "in_proj_a", x.tensor(), a);
  }

  Tensor conv = ws.get(kConv, n, cd);  // (n, conv_dim): [q | k | v] after conv + SiLU
  Tensor y = ws.get(kY, n, vd);
  // Sequences of one token (a decode step) go through one call each for the conv and the rule, not
  // two per sequence: a batch's decode then costs one dispatch (or launch) per op, whatever its size.
  std::vector<int64_t> one_rows;
  std::vector<Tensor*> conv_states, recurrent_states;
  for (const SequenceRows& s : batch.sequences)
    if (s.end - s.begin == 1) {
      one_rows.push_back(s.begin);
      conv_states.push_back(&s.state->linear(layer).conv);
      recurrent_states.push_back(&s.state->linear(layer).recurrent);
    }
  if (one_rows.size() < 2) one_rows.clear();
  if (!one_rows.empty()) {
    ops::causal_conv1d_silu_taps_rows(qkv, one_rows, conv_states, conv_taps_, conv);
    ops::gated_delta_rule_rows(conv.slice(1, 0, kd), conv.slice(1, kd, 2 * kd), conv.slice(1, 2 * kd, cd), a, b, a_log_, dt_bias_,
                               shape_.heads, one_rows, recurrent_states, y);
  }
  for (const SequenceRows& s : batch.sequences) {
    if (!one_rows.empty() && s.end - s.begin == 1) continue;
    LinearAttentionState& state = s.state->linear(layer);
    const int64_t pos0 = batch.positions_of(s).first(), rows = s.end - s.begin;
    Tensor conv_s = conv.slice(0, s.begin, s.end);
    ops::causal_conv1d_silu_taps(qkv.slice(0, s.begin, s.end), state.conv, conv_taps_, conv_s);
    // Rows [0, head) and [body_end, rows) token by token; [head, body_end) whole aligned chunks.
    const int64_t head = std::min(rows, (kChunk - pos0 % kChunk) % kChunk);
    const int64_t body_end = head + (rows - head) / kChunk * kChunk;
    auto run = [&](int64_t begin, int64_t end, ops::GatedDeltaAlgorithm algorithm) {
      if (begin == end) return;
      const int64_t r0 = s.begin + begin, r1 = s.begin + end;
      Tensor part = conv.slice(0, r0, r1);
      Tensor y_rows = y.slice(0, r0, r1);
      ops::gated_delta_rule(part.slice(1, 0, kd), part.slice(1, kd, 2 * kd), part.slice(1, 2 * kd, cd), a.slice(0, r0, r1),
                            b.slice(0, r0, r1), a_log_, dt_bias_, shape_.heads, state.recurrent, y_rows, algorithm);
    };
    run(0, head, ops::GatedDeltaAlgorithm::sequential);
    run(head, body_end, ops::GatedDeltaAlgorithm::chunked);
    run(body_end, rows, ops::GatedDeltaAlgorithm::sequential);
  }
  ops::gated_rms_norm(y, z, norm_, eps_, y);
  out.matmul(y, out_);
  add_row_lora(batch, prefix_ + "out_proj", y, out);
}

size_t GatedDeltaNetBlock::weight_bytes() const {
  return in_stacked_.nbytes() + in_qkv_.nbytes() + in_z_.nbytes() + in_b_.nbytes() + in_a_.nbytes() + out_.nbytes() +
         conv_weight_.nbytes() + a_log_.nbytes() + dt_bias_.nbytes() + norm_.nbytes();
}

DType GatedDeltaNetBlock::output_dtype(int64_t n) const { return ops::matmul_output_dtype(out_, n, out_.data.device()); }

}  // namespace sanctum

#include "model/blocks/attention.h"

#include <cmath>

#include "ops/ops.h"

namespace sanctum {

namespace {
enum Slot : size_t { kQ = 100, kAttn };
}

AttentionBlock::AttentionBlock(Checkpoint& ckpt, const std::string& prefix, const AttentionShape& s, bool qkv_bias,
                               const QuantConfig& quant)
    : shape_(s) {
  const int64_t q_dim = s.n_heads * s.head_dim, kv_dim = s.n_kv_heads * s.head_dim;
  q_ = ckpt.linear(prefix + "q_proj", q_dim, s.hidden, quant);
  k_ = ckpt.linear(prefix + "k_proj", kv_dim, s.hidden, quant);
  v_ = ckpt.linear(prefix + "v_proj", kv_dim, s.hidden, quant);
  o_ = ckpt.linear(prefix + "o_proj", s.hidden, q_dim, quant);
  if (qkv_bias) {
    q_bias_ = ckpt.tensor(prefix + "q_proj.bias", {q_dim});
    k_bias_ = ckpt.tensor(prefix + "k_proj.bias", {kv_dim});
    v_bias_ = ckpt.tensor(prefix + "v_proj.bias", {kv_dim});
  }
  for (Weight* w : {&q_, &k_, &v_, &o_}) ops::prepare_weight(*w);
}

void AttentionBlock::forward(const Tensor& x, std::span<const int32_t> positions, KvCache& cache, const ops::RopeTable& rope,
                             Workspace& ws, Tensor& out) const {
  const int64_t n = x.dim(0), pos0 = positions[0];
  const int64_t H = shape_.n_heads, KV = shape_.n_kv_heads, D = shape_.head_dim;

  Tensor q = ws.get(kQ, n, H * D);
  Tensor k = cache.key_rows(pos0, pos0 + n);  // new K/V go straight into the cache
  Tensor v = cache.value_rows(pos0, pos0 + n);
  ops::matmul(x, q_, q);
  ops::matmul(x, k_, k);
  ops::matmul(x, v_, v);
  if (q_bias_) {
    ops::add_bias(q, q_bias_);
    ops::add_bias(k, k_bias_);
    ops::add_bias(v, v_bias_);
  }
  Tensor q3 = q.reshape({n, H, D});
  Tensor k3 = k.reshape({n, KV, D});
  ops::rope(q3, positions, rope);
  ops::rope(k3, positions, rope);

  Tensor attn = ws.get(kAttn, n, H * D);
  Tensor attn3 = attn.reshape({n, H, D});
  ops::attention(q3, cache.keys(pos0 + n), cache.values(pos0 + n), pos0, 1.0f / std::sqrt(static_cast<float>(D)), attn3);
  ops::matmul(attn, o_, out);
}

size_t AttentionBlock::weight_bytes() const {
  return q_.nbytes() + k_.nbytes() + v_.nbytes() + o_.nbytes() + q_bias_.nbytes() + k_bias_.nbytes() + v_bias_.nbytes();
}

}  // namespace sanctum

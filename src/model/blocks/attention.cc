#include "model/blocks/attention.h"

#include <cmath>

#include "model/blocks/stacked_linear.h"
#include "ops/ops.h"

namespace sanctum {

namespace {
enum Slot : size_t { kQ = 100, kK, kV, kAttn, kQkv };
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
  qkv_ = stack_linears(ckpt, {&q_, &k_, &v_}, prefix + "{q,k,v}_proj");
}

void AttentionBlock::forward(const Tensor& x, const ops::Positions& positions, KvCache& cache, const ops::RopeTable& rope,
                             Workspace& ws, Tensor& out) const {
  const int64_t n = x.dim(0);
  const int64_t H = shape_.n_heads, KV = shape_.n_kv_heads, D = shape_.head_dim;

  // The new K/V rows are stored into the cache once rotated.
  Tensor q, k, v;
  if (qkv_.rows > 0) {  // one mat-vec, then views of its columns: [q | k | v]
    Tensor all = ws.get(kQkv, n, (H + 2 * KV) * D);
    ops::matmul(x, qkv_, all);
    q = all.slice(1, 0, H * D);
    k = all.slice(1, H * D, (H + KV) * D);
    v = all.slice(1, (H + KV) * D, (H + 2 * KV) * D);
  } else {
    q = ws.get(kQ, n, H * D);
    k = ws.get(kK, n, KV * D);
    v = ws.get(kV, n, KV * D);
    ops::matmul(x, q_, q);
    ops::matmul(x, k_, k);
    ops::matmul(x, v_, v);
  }
  if (q_bias_) {
    ops::add_bias(q, q_bias_);
    ops::add_bias(k, k_bias_);
    ops::add_bias(v, v_bias_);
  }
  Tensor q3 = q.reshape({n, H, D});
  Tensor k3 = k.reshape({n, KV, D});

  const int64_t capacity = cache.capacity();
  Tensor cached_k = cache.key_rows(0, capacity), cached_v = cache.value_rows(0, capacity);
  ops::rope_and_store(q3, k3, v, positions, rope, cached_k, cached_v);

  Tensor attn = ws.get(kAttn, n, H * D);
  Tensor attn3 = attn.reshape({n, H, D});
  ops::attention(q3, cache.keys(capacity), cache.values(capacity), positions, 1.0f / std::sqrt(static_cast<float>(D)), attn3);
  ops::matmul(attn, o_, out);
}

bool AttentionBlock::takes_bf16_input(int64_t n) const {
  const Weight& first = qkv_.rows > 0 ? qkv_ : q_;
  return ops::matmul_input_dtype(first, n, first.data.device()) == DType::bf16;
}

size_t AttentionBlock::weight_bytes() const {
  return qkv_.nbytes() + q_.nbytes() + k_.nbytes() + v_.nbytes() + o_.nbytes() + q_bias_.nbytes() + k_bias_.nbytes() + v_bias_.nbytes();
}

DType AttentionBlock::output_dtype(int64_t n) const { return ops::matmul_output_dtype(o_, n, o_.data.device()); }

}  // namespace sanctum

#include "model/blocks/attention.h"

#include <cmath>
#include <vector>

#include "model/blocks/row_lora.h"
#include "model/blocks/stacked_linear.h"
#include "ops/kv_cache_ops.h"
#include "ops/ops.h"

namespace sanctum {

namespace {
enum Slot : size_t { kQ = 100, kK, kV, kAttn, kQkv };
}

AttentionProjections::AttentionProjections(Checkpoint& ckpt, const std::string& prefix, const AttentionShape& s, int64_t q_rows,
                                           const QuantConfig& quant)
    : prefix(prefix) {
  const int64_t q_dim = s.n_heads * s.head_dim, kv_dim = s.n_kv_heads * s.head_dim;
  q = ckpt.linear(prefix + "q_proj", q_rows, s.hidden, quant);
  k = ckpt.linear(prefix + "k_proj", kv_dim, s.hidden, quant);
  v = ckpt.linear(prefix + "v_proj", kv_dim, s.hidden, quant);
  o = ckpt.linear(prefix + "o_proj", s.hidden, q_dim, quant);
  for (Weight* w : {&q, &k, &v, &o}) ops::prepare_weight(*w);
  qkv = stack_linears(ckpt, {&q, &k, &v}, prefix + "{q,k,v}_proj");
}

AttentionBlock::AttentionBlock(Checkpoint& ckpt, const std::string& prefix, const AttentionShape& s, bool qkv_bias,
                               const QuantConfig& quant)
    : shape_(s), w_(ckpt, prefix, s, s.n_heads * s.head_dim, quant) {
  if (qkv_bias) {
    const int64_t q_dim = s.n_heads * s.head_dim, kv_dim = s.n_kv_heads * s.head_dim;
    q_bias_ = ckpt.tensor(prefix + "q_proj.bias", {q_dim});
    k_bias_ = ckpt.tensor(prefix + "k_proj.bias", {kv_dim});
    v_bias_ = ckpt.tensor(prefix + "v_proj.bias", {kv_dim});
  }
}

void AttentionBlock::forward(const BlockInput& x, const BatchRows& batch, size_t layer, const ops::RopeTable& rope, Workspace& ws,
                             const BlockOutput& out) const {
  const int64_t n = x.rows();
  const int64_t H = shape_.n_heads, KV = shape_.n_kv_heads, D = shape_.head_dim;

  // The new K/V rows are stored into the cache once rotated.
  Tensor q, k, v;
  if (w_.qkv.rows > 0) {  // one mat-vec, then views of its columns: [q | k | v]
    Tensor all = ws.get(kQkv, n, (H + 2 * KV) * D);
    x.matmul(w_.qkv, all);
    q = all.slice(1, 0, H * D);
    k = all.slice(1, H * D, (H + KV) * D);
    v = all.slice(1, (H + KV) * D, (H + 2 * KV) * D);
  } else {
    q = ws.get(kQ, n, H * D);
    k = ws.get(kK, n, KV * D);
    v = ws.get(kV, n, KV * D);
    x.matmul(w_.q, q);
    x.matmul(w_.k, k);
    x.matmul(w_.v, v);
  }
  if (q_bias_) {
    ops::add_bias(q, q_bias_);
    ops::add_bias(k, k_bias_);
    ops::add_bias(v, v_bias_);
  }
  if (batch_has_lora(batch)) {
    add_row_lora(batch, w_.prefix + "q_proj", x.tensor(), q);
    add_row_lora(batch, w_.prefix + "k_proj", x.tensor(), k);
    add_row_lora(batch, w_.prefix + "v_proj", x.tensor(), v);
  }
  Tensor q3 = q.reshape({n, H, D});
  Tensor k3 = k.reshape({n, KV, D});

  // In bf16 where the kernel computes it so and the output projection rounds its input anyway (a GPU
  // prompt in the fast mode): half the bytes, and no conversion pass before the GEMM.
  const bool bf16 =
      ops::matmul_input_dtype(w_.o, n, x.device()) == DType::bf16 && ops::attention_output_dtype(n, D, x.device()) == DType::bf16;
  Tensor attn = bf16 ? ws.get_typed(kAttn, n, H * D, DType::bf16) : ws.get(kAttn, n, H * D);
  Tensor attn3 = attn.reshape({n, H, D});
  // Every sequence's rows at once, each over its own cache (one parallel region on the CPU).
  std::vector<ops::SequenceCache> caches;
  caches.reserve(batch.sequences.size());
  for (const SequenceRows& s : batch.sequences) {
    KvCache& cache = s.state->kv(layer);
    const int64_t capacity = cache.capacity();
    caches.push_back({s.begin, s.end, batch.positions_of(s), cache.key_rows(0, capacity), cache.value_rows(0, capacity)});
  }
  ops::rope_and_store(q3, k3, v, batch.positions.host, rope, caches);
  ops::attention(q3, caches, 1.0f / std::sqrt(static_cast<float>(D)), attn3);
  out.matmul(attn, w_.o);
  add_row_lora(batch, w_.prefix + "o_proj", attn, out);
}

bool AttentionBlock::takes_bf16_input(int64_t n) const {
  const Weight& first = w_.qkv.rows > 0 ? w_.qkv : w_.q;
  return ops::matmul_input_dtype(first, n, first.data.device()) == DType::bf16;
}

size_t AttentionBlock::weight_bytes() const { return w_.nbytes() + q_bias_.nbytes() + k_bias_.nbytes() + v_bias_.nbytes(); }

DType AttentionBlock::output_dtype(int64_t n) const { return ops::matmul_output_dtype(w_.o, n, w_.o.data.device()); }

}  // namespace sanctum

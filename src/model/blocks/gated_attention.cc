#include "model/blocks/gated_attention.h"

#include <cmath>
#include <vector>

#include "base/error.h"
#include "model/blocks/row_lora.h"
#include "model/blocks/stacked_linear.h"
#include "ops/kv_cache_ops.h"
#include "ops/ops.h"

namespace sanctum {

namespace {
enum Slot : size_t { kQueryGate = 300, kQuery, kKey, kValue, kAttn, kStacked };
}

GatedAttentionBlock::GatedAttentionBlock(Checkpoint& ckpt, const std::string& prefix, const AttentionShape& s, float norm_eps,
                                         float norm_offset, const QuantConfig& quant)
    : shape_(s), eps_(norm_eps), norm_offset_(norm_offset), w_(ckpt, prefix, s, 2 * s.n_heads * s.head_dim, quant) {
  q_norm_ = ckpt.tensor(prefix + "q_norm.weight", {s.head_dim});
  k_norm_ = ckpt.tensor(prefix + "k_norm.weight", {s.head_dim});
}

void GatedAttentionBlock::forward(const BlockInput& x, const BatchRows& batch, size_t layer, const ops::RopeTable& rope, Workspace& ws,
                                  const BlockOutput& out) const {
  const int64_t n = x.rows();
  const int64_t H = shape_.n_heads, KV = shape_.n_kv_heads, D = shape_.head_dim;

  // (n, H, 2D): per head the query then its gate; split into contiguous buffers. The new K/V rows
  // are stored into the cache once normalised and rotated.
  Tensor qg, k, v;
  if (w_.qkv.rows > 0) {  // one mat-vec, then views of its columns: [q and gate | k | v]
    Tensor all = ws.get(kStacked, n, 2 * (H + KV) * D);
    x.matmul(w_.qkv, all);
    qg = all.slice(1, 0, 2 * H * D);
    k = all.slice(1, 2 * H * D, (2 * H + KV) * D);
    v = all.slice(1, (2 * H + KV) * D, 2 * (H + KV) * D);
    if (n > 1) {  // the head views below (n * heads rows of D) need each token's rows contiguous
      Tensor qg_rows = ws.get(kQueryGate, n, 2 * H * D), k_rows = ws.get(kKey, n, KV * D);
      ops::copy(qg, qg_rows);
      ops::copy(k, k_rows);
      qg = qg_rows;
      k = k_rows;
    }
  } else {
    qg = ws.get(kQueryGate, n, 2 * H * D);
    k = ws.get(kKey, n, KV * D);
    v = ws.get(kValue, n, KV * D);
    x.matmul(w_.q, qg);
    x.matmul(w_.k, k);
    x.matmul(w_.v, v);
  }
  if (batch_has_lora(batch)) {
    add_row_lora(batch, w_.prefix + "q_proj", x.tensor(), qg);
    add_row_lora(batch, w_.prefix + "k_proj", x.tensor(), k);
    add_row_lora(batch, w_.prefix + "v_proj", x.tensor(), v);
  }
  // Per head the query then its gate, left where the projection wrote them: the q norm reads its rows
  // there and writes q contiguous, and the gate is read in place (on a GPU, copying them out had put
  // two copy nodes into the recorded step, which also kept the norm from starting early).
  Tensor qg3 = qg.reshape({n, H, 2 * D});
  Tensor q = ws.get(kQuery, n, H * D);
  Tensor q3 = q.reshape({n, H, D});
  Tensor k3 = k.reshape({n, KV, D});
  Tensor attn = ws.get(kAttn, n, H * D);
  Tensor attn3 = attn.reshape({n, H, D});
  // Every sequence's rows at once, each over its own cache (one parallel region on the CPU).
  std::vector<ops::SequenceCache> caches;
  caches.reserve(batch.sequences.size());
  for (const SequenceRows& s : batch.sequences) {
    KvCache& cache = s.state->kv(layer);
    const int64_t capacity = cache.capacity();
    caches.push_back({s.begin, s.end, batch.positions_of(s), cache.key_rows(0, capacity), cache.value_rows(0, capacity)});
  }
  if (batch.mrope.tables == nullptr) {
    ops::norm_rope_and_store(qg3.slice(2, 0, D).reshape({n * H, D}), q_norm_, k_norm_, eps_, norm_offset_, q3, k3, v, batch.positions.host,
                             rope, caches);
  } else {  // images: the same steps op by op, with one rotation per position component
    check(caches.size() == 1, ErrorKind::internal, "multimodal positions in a batch of several sequences");
    const ops::SequenceCache& s = caches.front();
    Tensor q_rows = q.reshape({n * H, D}), k_rows = k3.reshape({n * KV, D});
    ops::rms_norm(qg3.slice(2, 0, D).reshape({n * H, D}), q_norm_, eps_, q_rows, norm_offset_);
    ops::rms_norm(k_rows, k_norm_, eps_, k_rows, norm_offset_);
    const MropeTables& t = *batch.mrope.tables;
    for (Tensor* x : {&q3, &k3}) {
      ops::rope(*x, batch.mrope.t, t.t);
      ops::rope(*x, batch.mrope.h, t.h);
      ops::rope(*x, batch.mrope.w, t.w);
    }
    ops::store_kv_rows(k3.reshape({n, KV * D}), s.k, s.positions);
    ops::store_kv_rows(v, s.v, s.positions);
  }
  ops::gated_attention(q3, caches, 1.0f / std::sqrt(static_cast<float>(D)), qg3.slice(2, D, 2 * D), attn3);
  out.matmul(attn, w_.o);
  add_row_lora(batch, w_.prefix + "o_proj", attn, out);
}

DType GatedAttentionBlock::output_dtype(int64_t n) const { return ops::matmul_output_dtype(w_.o, n, w_.o.data.device()); }

}  // namespace sanctum

// The CPU's causal attention entry points: every query of every sequence of a call becomes a task
// per kv group (attention_decode.h), run in one parallel region; a bf16 prefill transposes its keys
// instead (attention_kv.cc). Each task's bits depend only on its own inputs, so a sequence gets the
// same results alone or batched, on any number of threads.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "ops/cpu/attention_decode.h"
#include "ops/cpu/kernels.h"

namespace sanctum::ops::cpu {

namespace {
// More queries than this over a bf16 cache: a prefill, whose keys are transposed once for them all.
constexpr int64_t kRowQueries = 8;
// Fewer tasks than threads, and rows at least this long: each task's keys and then its columns are
// shared out, so that one long sequence still keeps every thread busy.
constexpr int64_t kSplitKeys = 256;

int64_t blocks_of(int64_t d) { return (d + kKvBlock - 1) / kKvBlock; }

RowsView view(const KvRows& r, int64_t kv_head) {
  const auto* base = static_cast<const char*>(r.data.raw()) + kv_head * r.data.stride(1) * static_cast<int64_t>(dtype_size(r.data.dtype()));
  return RowsView{base, r.scales ? r.scales.data<const uint16_t>() + kv_head * r.scales.stride(1) : nullptr, r.data.stride(0),
                  r.scales ? r.scales.stride(0) : 0, r.format};
}

bool transposes(const AttentionSeq& s) { return s.k.format == KvFormat::bf16 && s.v.format == KvFormat::bf16 && s.q.dim(0) > kRowQueries; }

void append_tasks(const AttentionSeq& s, float scale, std::vector<DecodeTask>& tasks) {
  const int64_t n = s.q.dim(0), n_heads = s.q.dim(1), kv_heads = s.k.kv_heads(), group = n_heads / kv_heads;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t g = 0; g < kv_heads; ++g) {
      DecodeTask t;
      t.q = s.q.data<const float>() + i * s.q.stride(0) + g * group * s.q.stride(1);
      t.out = s.out.data<float>() + i * s.out.stride(0) + g * group * s.out.stride(1);
      t.q_stride = s.q.stride(1);
      t.o_stride = s.out.stride(1);
      t.k = view(s.k, g);
      t.v = view(s.v, g);
      t.n_keys = s.q_pos0 + i + 1;
      t.group = group;
      t.head_dim = s.q.dim(2);
      t.scale = scale;
      tasks.push_back(t);
    }
}

void run_task(const DecodeTask& t, DecodeScratch& s) {
  s.fit(t);
  const int64_t stride = p_stride(t.n_keys);
  if (s.p.size() < static_cast<size_t>(t.group * stride)) s.p.resize(static_cast<size_t>(t.group * stride));
  task_scores(t, 0, t.n_keys, s.p.data(), stride, s.mx.data(), s);
  task_exp(t, 0, t.n_keys, s.p.data(), stride, s.mx.data());
  task_values(t, s.p.data(), stride, 0, t.head_dim, s);
}

DecodeScratch& thread_scratch() {
  thread_local DecodeScratch scratch;
  return scratch;
}

// Calls fn(item, scratch) for items [0, n) on every thread of the pool, each taking the next item.
template <class F>
void for_each_item(ThreadPool& pool, int64_t n, F&& fn) {
  std::atomic<int64_t> next{0};
  const auto work = [&](int) {
    for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i, thread_scratch());
  };
  if (n == 1 || pool.size() == 1) return work(0);
  pool.run_on_all(work);
}

// Few long tasks: each task's keys in `pieces` ranges (scores, then exponentials once every range's
// maximum is known) and its columns in up to `pieces` ranges of whole blocks (values). Ranges start
// at multiples of the vector and maxima merge exactly, so the bits are those of run_task.
void run_split(ThreadPool& pool, const std::vector<DecodeTask>& tasks) {
  const int64_t n = static_cast<int64_t>(tasks.size()), pieces = (pool.size() + n - 1) / n, lanes = decode_lanes();
  std::vector<std::vector<float>> p(static_cast<size_t>(n)), maxima(static_cast<size_t>(n));
  for (int64_t a = 0; a < n; ++a) {
    p[static_cast<size_t>(a)].resize(
        static_cast<size_t>(tasks[static_cast<size_t>(a)].group * p_stride(tasks[static_cast<size_t>(a)].n_keys)));
    maxima[static_cast<size_t>(a)].resize(static_cast<size_t>(pieces * tasks[static_cast<size_t>(a)].group));
  }
  const auto keys = [&](const DecodeTask& t, int64_t c) {
    const auto at = [&](int64_t i) { return i == pieces ? t.n_keys : t.n_keys * i / pieces / lanes * lanes; };
    return std::pair{at(c), at(c + 1)};
  };
  for_each_item(pool, n * pieces, [&](int64_t item, DecodeScratch& s) {
    const DecodeTask& t = tasks[static_cast<size_t>(item / pieces)];
    const auto [j0, j1] = keys(t, item % pieces);
    s.fit(t);
    task_scores(t, j0, j1, p[static_cast<size_t>(item / pieces)].data(), p_stride(t.n_keys),
                maxima[static_cast<size_t>(item / pieces)].data() + item % pieces * t.group, s);
  });
  for_each_item(pool, n * pieces, [&](int64_t item, DecodeScratch& s) {
    const DecodeTask& t = tasks[static_cast<size_t>(item / pieces)];
    const float* m = maxima[static_cast<size_t>(item / pieces)].data();
    s.fit(t);
    for (int64_t r = 0; r < t.group; ++r) {
      float best = -INFINITY;
      for (int64_t c = 0; c < pieces; ++c) best = std::max(best, m[c * t.group + r]);
      s.mx[static_cast<size_t>(r)] = best;
    }
    const auto [j0, j1] = keys(t, item % pieces);
    task_exp(t, j0, j1, p[static_cast<size_t>(item / pieces)].data(), p_stride(t.n_keys), s.mx.data());
  });
  for_each_item(pool, n * pieces, [&](int64_t item, DecodeScratch& s) {
    const DecodeTask& t = tasks[static_cast<size_t>(item / pieces)];
    const int64_t blocks = blocks_of(t.head_dim), cols = std::min(pieces, blocks), c = item % pieces;
    if (c >= cols) return;
    s.fit(t);
    const int64_t c0 = blocks * c / cols * kKvBlock, c1 = c + 1 == cols ? t.head_dim : blocks * (c + 1) / cols * kKvBlock;
    task_values(t, p[static_cast<size_t>(item / pieces)].data(), p_stride(t.n_keys), c0, c1, s);
  });
}

void run_tasks(std::vector<DecodeTask>& tasks) {
  if (tasks.empty()) return;
  ThreadPool& pool = compute_pool();
  // Longest first, so that the items left to the last thread are short ones.
  std::stable_sort(tasks.begin(), tasks.end(), [](const DecodeTask& a, const DecodeTask& b) { return a.n_keys > b.n_keys; });
  if (static_cast<int64_t>(tasks.size()) < pool.size() && tasks.front().n_keys >= kSplitKeys) return run_split(pool, tasks);
  for_each_item(pool, static_cast<int64_t>(tasks.size()), [&](int64_t i, DecodeScratch& s) { run_task(tasks[static_cast<size_t>(i)], s); });
}
}  // namespace

void DecodeScratch::fit(const DecodeTask& t) {
  const int64_t d = t.head_dim, blocks = blocks_of(d), lanes = decode_lanes();
  const auto grow = [](std::vector<float>& v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  };
  grow(keys, lanes * d);
  grow(key_scales, lanes * blocks);
  grow(max_lanes, lanes * t.group);
  grow(zeros, d);
  // bounds of run_rows(w) * w and run_rows(w) * blocks_of(w) over every column width w <= d
  grow(values, std::max(8 * d, run_rows(1)));
  grow(value_scales, run_rows(1) + 128 + 8 * blocks);
  grow(value_mins, run_rows(1) + 128 + 8 * blocks);
  grow(acc, t.group * d);
  grow(bias, t.group * blocks);
  grow(mx, t.group);
}

int64_t DecodeScratch::run_rows(int64_t width) { return std::max<int64_t>(8, 4096 / width); }

int64_t p_stride(int64_t n_keys) {
  const int64_t lanes = decode_lanes();
  return (n_keys + lanes - 1) / lanes * lanes;
}

void attention_batch(std::span<const AttentionSeq> seqs, float scale, int64_t max_transposed_bytes) {
  std::vector<DecodeTask> tasks;
  for (const AttentionSeq& s : seqs)
    if (!transposes(s)) append_tasks(s, scale, tasks);
  run_tasks(tasks);
  for (const AttentionSeq& s : seqs)
    if (transposes(s)) attention_kv_transposed(s, scale, max_transposed_bytes);
}

void attention_kv(const Tensor& q, const KvRows& k, const KvRows& v, int64_t q_pos0, float scale, Tensor& out,
                  int64_t max_transposed_bytes) {
  const AttentionSeq seq{q, k, v, q_pos0, out};
  attention_batch({&seq, 1}, scale, max_transposed_bytes);
}

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_pos0, float scale, Tensor& out) {
  const AttentionSeq seq{q, KvRows{k, Tensor{}, KvFormat::f32, k.dim(2)}, KvRows{v, Tensor{}, KvFormat::f32, v.dim(2)}, q_pos0, out};
  attention_batch({&seq, 1}, scale);
}

}  // namespace sanctum::ops::cpu

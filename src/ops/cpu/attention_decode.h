#pragma once
// The CPU's attention of a few queries over cache rows, one task per (query, kv group): the pieces
// attention_decode.cc computes and attention_batch.cc schedules. A task's scores, probabilities and
// outputs have the bits of the one-head-at-a-time kernels whatever the split into pieces.
#include <cstdint>
#include <vector>

#include "ops/kv_format.h"

namespace sanctum::ops::cpu {

// One kv head's rows of one side of a cache, in its stored format; strides in elements of data
// (floats, bf16s or bytes) and of scales.
struct RowsView {
  const void* data = nullptr;
  const uint16_t* scales = nullptr;  // q8 and q4
  int64_t stride = 0, scale_stride = 0;
  KvFormat format = KvFormat::f32;
};

// One query row of one sequence against keys [0, n_keys) of one kv head: the `group` query heads
// that read that kv head, head r at q + r * q_stride, its output at out + r * o_stride.
struct DecodeTask {
  const float* q = nullptr;
  float* out = nullptr;
  int64_t q_stride = 0, o_stride = 0;
  RowsView k, v;
  int64_t n_keys = 0, group = 0, head_dim = 0;
  float scale = 1.0f;
};

// A thread's working memory for tasks; fit() sizes it for a task (grows only).
struct DecodeScratch {
  std::vector<float> p;  // (group, p_stride(n_keys)) scores, then probabilities
  std::vector<float> keys, key_scales, max_lanes, zeros;
  std::vector<float> values, value_scales, value_mins;
  std::vector<float> acc, bias;
  std::vector<float> mx;

  void fit(const DecodeTask& t);
  // Value rows widened at a time for columns of `width`: about 16 KB of f32, at least 8 rows.
  static int64_t run_rows(int64_t width);
};

// Lanes of the vector the kernels run at; a row of p needs room to n_keys rounded up to it.
int64_t decode_lanes();
int64_t p_stride(int64_t n_keys);

// Scores of keys [j0, j1) (j0 a multiple of decode_lanes()) into p (head r's row at r * stride) and
// each head's largest score in mx.
void task_scores(const DecodeTask& t, int64_t j0, int64_t j1, float* p, int64_t stride, float* mx, DecodeScratch& s);
// p = exp(p - mx) over keys [j0, j1) of each head; the range that ends the row also clears the
// row's padding.
void task_exp(const DecodeTask& t, int64_t j0, int64_t j1, float* p, int64_t stride, const float* mx);
// Output columns [c0, c1) (multiples of kKvBlock, or c1 = head_dim) from the probabilities in p.
void task_values(const DecodeTask& t, const float* p, int64_t stride, int64_t c0, int64_t c1, DecodeScratch& s);

}  // namespace sanctum::ops::cpu

// The GatedDeltaNet decode ops for a batch on the GPU (one launch for the conv and one for the rule
// over several sequences, each with its own state) against one-row GPU calls, bit for bit, and
// against the CPU. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../ops/op_test_util.h"
#include "gpu_test_util.h"
#include "ops/gated_delta.h"

namespace sanctum {
namespace {

using ops::GatedDeltaShape;
using test::gpu;
using test::host;
using test::Rng;

class CudaGatedDeltaRows : public test::RequiresGpu {};

// a and b: whole (contiguous) tensors.
bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor ha = host(a), hb = host(b);
  return ha.numel() == hb.numel() && std::memcmp(ha.raw(), hb.raw(), static_cast<size_t>(ha.numel()) * 4) == 0;
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  const Tensor ha = host(a), hb = host(b);
  double diff = 0.0, scale = 1e-30;
  for (int64_t i = 0; i < ha.numel(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(ha.data<float>()[i] - hb.data<float>()[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(hb.data<float>()[i])));
  }
  return diff / scale;
}

std::vector<int64_t> pick_rows(int64_t n, int64_t count, Rng& rng) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(rows[static_cast<size_t>(i)], rows[static_cast<size_t>(rng.integer(0, i))]);
  rows.resize(static_cast<size_t>(count));
  return rows;
}

// Sequences past the 64 a launch takes (70) run in two launches.
TEST_F(CudaGatedDeltaRows, batch_equals_one_row_calls_and_the_cpu) {
  const GatedDeltaShape shapes[] = {{16, 128, 48, 128}, {2, 24, 6, 40}, {2, 16, 4, 8}};
  for (const GatedDeltaShape& s : shapes) {
    for (int64_t count : {2, 5, 70}) {
      SCOPED_TRACE("Dk " + std::to_string(s.key_dim) + " Hv " + std::to_string(s.n_value_heads) + " sequences " + std::to_string(count) +
                   " " + test::seed_note());
      Rng rng(static_cast<uint64_t>(s.key_dim * 100 + count));
      const int64_t n = count + 3, kd = s.n_key_heads * s.key_dim, vd = s.n_value_heads * s.value_dim, channels = 2 * kd + vd;
      const int64_t kernel = 4;
      const Tensor qkv = test::random_tensor({n, channels}, DType::f32, rng);
      const Tensor a = test::random_tensor({n, s.n_value_heads}, DType::f32, rng);
      const Tensor b = test::random_tensor({n, s.n_value_heads}, DType::f32, rng);
      Tensor a_log = Tensor::zeros({s.n_value_heads}, DType::f32);
      for (int64_t h = 0; h < s.n_value_heads; ++h) a_log.data<float>()[h] = std::log(rng.uniform(0.01f, 16.0f));
      const Tensor dt_bias = test::random_tensor({s.n_value_heads}, DType::bf16, rng, 0.5f);
      const Tensor taps = ops::conv1d_taps(test::random_tensor({channels, kernel}, DType::f32, rng, 0.5f));
      const std::vector<int64_t> rows = pick_rows(n, count, rng);
      std::vector<Tensor> conv_host, rec_host;
      for (int64_t i = 0; i < count; ++i) {
        conv_host.push_back(test::random_tensor({kernel - 1, channels}, DType::f32, rng));
        rec_host.push_back(test::random_tensor({s.n_value_heads, s.value_dim, s.key_dim}, DType::f32, rng, 0.5f));
      }
      const Tensor g_qkv = gpu(qkv), g_a = gpu(a), g_b = gpu(b), g_a_log = gpu(a_log), g_dt = gpu(dt_bias), g_taps = gpu(taps);

      // The batch: one call each.
      std::vector<Tensor> conv_states, rec_states;
      std::vector<Tensor*> conv_ptrs, rec_ptrs;
      for (int64_t i = 0; i < count; ++i) {
        conv_states.push_back(gpu(conv_host[static_cast<size_t>(i)]));
        rec_states.push_back(gpu(rec_host[static_cast<size_t>(i)]));
      }
      for (int64_t i = 0; i < count; ++i) {
        conv_ptrs.push_back(&conv_states[static_cast<size_t>(i)]);
        rec_ptrs.push_back(&rec_states[static_cast<size_t>(i)]);
      }
      Tensor conv = gpu(Tensor::zeros({n, channels}, DType::f32)), y = gpu(Tensor::zeros({n, vd}, DType::f32));
      ops::causal_conv1d_silu_taps_rows(g_qkv, rows, conv_ptrs, g_taps, conv);
      ops::gated_delta_rule_rows(conv.slice(1, 0, kd), conv.slice(1, kd, 2 * kd), conv.slice(1, 2 * kd, channels), g_a, g_b, g_a_log, g_dt,
                                 s, rows, rec_ptrs, y);

      // One row at a time on the GPU, and on the CPU.
      Tensor conv1 = gpu(Tensor::zeros({n, channels}, DType::f32)), y1 = gpu(Tensor::zeros({n, vd}, DType::f32));
      Tensor conv_cpu = Tensor::zeros({n, channels}, DType::f32), y_cpu = Tensor::zeros({n, vd}, DType::f32);
      for (int64_t i = 0; i < count; ++i) {
        const int64_t r = rows[static_cast<size_t>(i)];
        Tensor cs = gpu(conv_host[static_cast<size_t>(i)]), rs = gpu(rec_host[static_cast<size_t>(i)]);
        Tensor c_row = conv1.slice(0, r, r + 1), y_row = y1.slice(0, r, r + 1);
        ops::causal_conv1d_silu_taps(g_qkv.slice(0, r, r + 1), cs, g_taps, c_row);
        ops::gated_delta_rule(c_row.slice(1, 0, kd), c_row.slice(1, kd, 2 * kd), c_row.slice(1, 2 * kd, channels), g_a.slice(0, r, r + 1),
                              g_b.slice(0, r, r + 1), g_a_log, g_dt, s, rs, y_row, ops::GatedDeltaAlgorithm::sequential);
        EXPECT_TRUE(same_bits(conv_states[static_cast<size_t>(i)], cs)) << "conv state of row " << r;
        EXPECT_TRUE(same_bits(rec_states[static_cast<size_t>(i)], rs)) << "recurrent state of row " << r;

        Tensor cs_cpu = conv_host[static_cast<size_t>(i)].clone(), rs_cpu = rec_host[static_cast<size_t>(i)].clone();
        Tensor cc_row = conv_cpu.slice(0, r, r + 1), yc_row = y_cpu.slice(0, r, r + 1);
        ops::causal_conv1d_silu_taps(qkv.slice(0, r, r + 1), cs_cpu, taps, cc_row);
        ops::gated_delta_rule(cc_row.slice(1, 0, kd), cc_row.slice(1, kd, 2 * kd), cc_row.slice(1, 2 * kd, channels), a.slice(0, r, r + 1),
                              b.slice(0, r, r + 1), a_log, dt_bias, s, rs_cpu, yc_row, ops::GatedDeltaAlgorithm::sequential);
        EXPECT_LT(max_rel_diff(rec_states[static_cast<size_t>(i)], rs_cpu), 1e-5) << "recurrent state of row " << r << " against the CPU";
      }
      EXPECT_TRUE(same_bits(conv, conv1));
      EXPECT_TRUE(same_bits(y, y1));
      EXPECT_LT(max_rel_diff(conv, conv_cpu), 1e-5);
      EXPECT_LT(max_rel_diff(y, y_cpu), 1e-4);
    }
  }
}

}  // namespace
}  // namespace sanctum

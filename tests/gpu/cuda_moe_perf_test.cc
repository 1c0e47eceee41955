// Timings of a MoE layer at the Qwen3.6-35B-A3B shape (hidden 2048, 256 experts, top-8, expert
// intermediate 512, shared expert 512, MLX 4-bit g64), for tuning: the host-grouped prompt path (one
// wait for the host per layer, cuBLAS per used expert) against the device-grouped one (moe_group and
// one tensor-core launch per projection). Not assertions: machines are noisy.
// Disabled by default; run on a GPU machine with --gtest_also_run_disabled_tests --gtest_filter='*Perf*'.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <vector>

#include "../ops/op_test_util.h"
#include "gpu_test_util.h"
#include "gpu_timing.h"
#include "ops/ops.h"
#include "ops/precision.h"
#include "tensor/device_memory.h"

namespace sanctum {
namespace {

struct XorShift {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  uint32_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<uint32_t>(s >> 32);
  }
};

// E experts of (rows, cols), MLX 4-bit g64 with bf16 scales, as views of one grid on the GPU.
std::vector<Weight> expert_grid(int64_t E, int64_t rows, int64_t cols, XorShift& rng) {
  constexpr int group = 64;
  Tensor data = Tensor::zeros({E, rows, cols / 8}, DType::u32), scales = Tensor::zeros({E, rows, cols / group}, DType::bf16),
         biases = Tensor::zeros({E, rows, cols / group}, DType::bf16);
  for (int64_t i = 0; i < data.numel(); ++i) data.data<uint32_t>()[i] = rng.next();
  for (int64_t i = 0; i < scales.numel(); ++i) {
    scales.data<uint16_t>()[i] = f32_to_bf16(0.002f + 0.004f * static_cast<float>(rng.next() % 1000) / 1000.0f);
    biases.data<uint16_t>()[i] = f32_to_bf16(-0.02f + 0.04f * static_cast<float>(rng.next() % 1000) / 1000.0f);
  }
  data = data.to(Device::cuda);
  scales = scales.to(Device::cuda);
  biases = biases.to(Device::cuda);
  std::vector<Weight> out;
  for (int64_t e = 0; e < E; ++e) {
    Weight w;
    w.data = data.slice(0, e, e + 1).squeeze0();
    w.scales = scales.slice(0, e, e + 1).squeeze0();
    w.biases = biases.slice(0, e, e + 1).squeeze0();
    w.quant = QuantParams{4, group};
    w.rows = rows;
    w.cols = cols;
    w.name = "expert";
    validate_weight(w);
    out.push_back(w);
  }
  return out;
}

TEST(CudaMoePerf, DISABLED_moe_layer_at_35b_a3b_shape) {
  if (!device_memory::cuda_available()) GTEST_SKIP();
  const int64_t H = 2048, E = 256, k = 8, I = 512, S = 512;
  XorShift rng;
  const std::vector<Weight> gates = expert_grid(E, I, H, rng), ups = expert_grid(E, I, H, rng), downs = expert_grid(E, H, I, rng);
  const ops::ExpertSet gate_set(gates), up_set(ups), down_set(downs);
  const Weight router = expert_grid(1, E, H, rng)[0], shared_gate = expert_grid(1, S, H, rng)[0], shared_up = expert_grid(1, S, H, rng)[0],
               shared_down = expert_grid(1, H, S, rng)[0];
  const Weight shared_gate_w = dense_weight(Tensor::zeros({1, H}, DType::bf16, Device::cuda));
  const ops::MatmulPrecision saved = ops::matmul_precision();
  ops::set_matmul_precision(ops::MatmulPrecision::bf16);
  const ops::MoeRouting how{k, true, true};

  for (int64_t n : {512, 4096}) {
    test::Rng xr(n);
    Tensor x = test::random_tensor({n, H}, DType::f32, xr).to(Device::cuda);
    Tensor logits = Tensor::zeros({n, E}, DType::f32, Device::cuda), slogit = Tensor::zeros({n, 1}, DType::f32, Device::cuda);
    Tensor gate = Tensor::zeros({n * k, I}, DType::f32, Device::cuda), up = Tensor::zeros({n * k, I}, DType::f32, Device::cuda);
    Tensor per_rank = Tensor::zeros({n * k, H}, DType::f32, Device::cuda), out = Tensor::zeros({n, H}, DType::f32, Device::cuda);
    Tensor sg = Tensor::zeros({n, S}, DType::f32, Device::cuda), su = Tensor::zeros({n, S}, DType::f32, Device::cuda);
    Tensor shared = Tensor::zeros({n, H}, DType::f32, Device::cuda);
    Tensor ids = Tensor::zeros({n, k}, DType::i32, Device::cuda), weights = Tensor::zeros({n, k}, DType::f32, Device::cuda);
    Tensor offsets = Tensor::zeros({E + 1}, DType::i32, Device::cuda), sorted = Tensor::zeros({n * k}, DType::i32, Device::cuda);
    Tensor flat_ids = ids.reshape({n * k});
    auto front = [&] {
      ops::matmul(x, router, logits);
      ops::matmul(x, shared_gate_w, slogit);
    };
    auto shared_mlp = [&] {
      ops::matmul(x, shared_gate, sg);
      ops::matmul(x, shared_up, su);
      ops::silu_mul(sg, su, sg);
      ops::matmul(sg, shared_down, shared);
    };
    // The host-grouped path as MoeBlock ran prompts before device grouping.
    Tensor rows_buf = Tensor::zeros({n * k, H}, DType::f32, Device::cuda), out_buf = Tensor::zeros({n * k, H}, DType::f32, Device::cuda);
    auto old_path = [&] {
      front();
      Tensor host_logits = logits.to(Device::cpu), host_slogit = slogit.to(Device::cpu);
      std::vector<float> w(static_cast<size_t>(n * k)), sw(static_cast<size_t>(n));
      std::vector<int32_t> hid(static_cast<size_t>(n * k));
      for (int64_t t = 0; t < n; ++t) {
        ops::route_token(host_logits.data<float>() + t * E, E, how, hid.data() + t * k, w.data() + t * k);
        sw[static_cast<size_t>(t)] = 1.0f / (1.0f + std::exp(-host_slogit.data<float>()[t]));
      }
      const std::vector<ops::ExpertRows> by_expert = ops::rows_by_expert(hid, E, k);
      std::vector<int32_t> local;
      for (int64_t e = 0; e < E; ++e) {
        const ops::ExpertRows& rows = by_expert[static_cast<size_t>(e)];
        if (rows.tokens.empty()) continue;
        const auto m = static_cast<int64_t>(rows.tokens.size());
        local.resize(static_cast<size_t>(m));
        std::iota(local.begin(), local.end(), 0);
        Tensor xe = rows_buf.slice(0, 0, m), g = gate.slice(0, 0, m), u = up.slice(0, 0, m), ye = out_buf.slice(0, 0, m);
        ops::copy_rows(x, rows.tokens, xe, local);
        ops::matmul(xe, gates[static_cast<size_t>(e)], g);
        ops::matmul(xe, ups[static_cast<size_t>(e)], u);
        ops::silu_mul(g, u, g);
        ops::matmul(g, downs[static_cast<size_t>(e)], ye);
        ops::copy_rows(ye, local, per_rank, rows.slots);
      }
      shared_mlp();
      ops::moe_combine(per_rank, w, &shared, sw, out);
    };
    auto route_group = [&] {
      ops::moe_route(logits, how, ids, weights);
      ops::moe_group(flat_ids, E, offsets, sorted);
    };
    auto gate_up = [&] {
      ops::grouped_expert_matmul(x, gate_set, offsets, sorted, ops::GroupedRows::gather, gate);
      ops::grouped_expert_matmul(x, up_set, offsets, sorted, ops::GroupedRows::gather, up);
    };
    auto down = [&] {
      ops::silu_mul(gate, up, gate);
      ops::grouped_expert_matmul(gate, down_set, offsets, sorted, ops::GroupedRows::scatter, per_rank);
    };
    auto new_path = [&] {
      front();
      route_group();
      gate_up();
      down();
      shared_mlp();
      ops::moe_combine(per_rank, weights, &shared, &slogit, out);
    };
    const double t_old = test::time_calls(old_path, 3, 2), t_new = test::time_calls(new_path, 10, 2);
    std::printf("moe layer n=%lld: host-grouped %8.3f ms   device-grouped %8.3f ms   (x%.1f; 40 layers of MoE: %.0f tok/s)\n",
                static_cast<long long>(n), t_old * 1e3, t_new * 1e3, t_old / t_new, static_cast<double>(n) / (40.0 * t_new));
    std::fflush(stdout);
    const double flops = 2.0 * static_cast<double>(n * k) * static_cast<double>(3 * I * H);
    const double t_gu = test::time_calls(gate_up, 10, 2), t_down = test::time_calls(down, 10, 2);
    std::printf(
        "  router+gate logits %.3f ms, route+group %.3f ms, gate+up %.3f ms, silu+down %.3f ms (experts %.0f TFLOP/s), "
        "shared %.3f ms\n",
        test::time_calls(front, 10, 2) * 1e3, test::time_calls(route_group, 10, 2) * 1e3, t_gu * 1e3, t_down * 1e3,
        flops / (t_gu + t_down) / 1e12, test::time_calls(shared_mlp, 10, 2) * 1e3);
    std::fflush(stdout);
  }
  ops::set_matmul_precision(saved);
}

}  // namespace
}  // namespace sanctum

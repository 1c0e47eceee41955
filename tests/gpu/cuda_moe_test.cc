// The device-side MoE ops (routing, expert mat-vecs by id, combine) against their CPU versions,
// which the CPU parity suites hold to mlx-lm and transformers. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../ops/op_test_util.h"
#include "gpu_test_util.h"
#include "ops/ops.h"
#include "tensor/device_memory.h"

namespace sanctum {
namespace {

using test::Rng;

class CudaMoe : public test::RequiresGpu {};

double max_abs_diff(const Tensor& a, const Tensor& b) {
  Tensor ha = a.to(Device::cpu), hb = b.to(Device::cpu);
  double worst = 0.0;
  for (int64_t i = 0; i < ha.numel(); ++i) worst = std::max(worst, static_cast<double>(std::abs(ha.data<float>()[i] - hb.data<float>()[i])));
  return worst;
}

TEST_F(CudaMoe, routing_matches_the_host_for_both_schemes_and_ties) {
  Rng rng(31);
  for (bool softmax_first : {true, false})
    for (int64_t experts : {8, 64, 256}) {
      const int64_t n = 5, k = experts >= 64 ? 8 : 2;
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

TEST_F(CudaMoe, expert_matmul_by_device_ids_matches_per_expert_matmul) {
  Rng rng(32);
  for (int bits : {4, 8, 0}) {
    std::vector<Weight> host, dev;
    for (int e = 0; e < 6; ++e) {
      Weight w = bits ? test::random_quantized(72, 128, bits, 64, DType::bf16, rng) : dense_weight(test::random_tensor({72, 128}, DType::bf16, rng));
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

}  // namespace
}  // namespace sanctum

// Stand-ins for a build without the CUDA backend. The op front ends only call these for tensors on
// the GPU, which such a build cannot create, so each one just says what is missing.
#include "ops/cuda/kernels.h"
#include "base/error.h"
#include "ops/cuda/gemm_tiles.h"
#include "ops/cuda/matvec_mma.cuh"
#include "ops/cuda/matvec_tiles.h"

namespace sanctum::ops::cuda {

namespace {
[[noreturn]] void no_cuda(const char* op) { fail(ErrorKind::unsupported, std::string("[") + op + "] this sanctum was built without CUDA"); }
}  // namespace

void matmul(const Tensor&, const Weight&, Tensor&) { no_cuda("matmul"); }
bool matmul_takes_bf16(const Weight&, int64_t) { return false; }
bool matmul_gives_bf16(const Weight&, int64_t) { return false; }
void embedding(const Weight&, std::span<const int32_t>, const int32_t*, Tensor&) { no_cuda("embedding"); }
void rms_norm(const Tensor&, const Tensor&, float, Tensor&, float) { no_cuda("rms_norm"); }
void add_rms_norm(Tensor&, const Tensor&, const Tensor&, float, Tensor&, float) { no_cuda("add_rms_norm"); }
void rope(Tensor&, std::span<const int32_t>, const int32_t*, const RopeTable&) { no_cuda("rope"); }
void rope_and_store(Tensor&, Tensor&, const Tensor&, std::span<const int32_t>, const int32_t*, const RopeTable&, Tensor&, Tensor&) {
  no_cuda("rope_and_store");
}
bool rms_norm_rows_in_one_warp(const Tensor&, const Tensor&) { return false; }
bool norm_rope_and_store_fused(const Tensor&, const Tensor&, const Tensor&) { return false; }
void rope_and_store_batch(Tensor&, Tensor&, const Tensor&, const RopeTable&, std::span<const RopeStoreSequence>) {
  no_cuda("rope_and_store");
}
void norm_rope_and_store_batch(const Tensor&, const Tensor&, const Tensor&, float, float, Tensor&, Tensor&, const Tensor&, const RopeTable&,
                               std::span<const RopeStoreSequence>) {
  no_cuda("norm_rope_and_store");
}
void norm_rope_and_store(const Tensor&, const Tensor&, const Tensor&, float, float, Tensor&, Tensor&, const Tensor&,
                         std::span<const int32_t>, const int32_t*, const RopeTable&, Tensor&, Tensor&) {
  no_cuda("norm_rope_and_store");
}
void softmax(Tensor&) { no_cuda("softmax"); }
void silu_mul(const Tensor&, const Tensor&, Tensor&) { no_cuda("silu_mul"); }
void sigmoid_mul(const Tensor&, const Tensor&, Tensor&) { no_cuda("sigmoid_mul"); }
void add(const Tensor&, const Tensor&, Tensor&) { no_cuda("add"); }
void add_bias(Tensor&, const Tensor&) { no_cuda("add_bias"); }
void copy(const Tensor&, Tensor&) { no_cuda("copy"); }
void store_rows(const Tensor&, Tensor&, int64_t, const int32_t*) { no_cuda("store_rows"); }
void attention(const Tensor&, const Tensor&, const Tensor&, int64_t, const int32_t*, float, Tensor&, const Tensor*) {
  no_cuda("attention");
}
void attention_kv(const Tensor&, const KvRows&, const KvRows&, int64_t, const int32_t*, float, Tensor&, const Tensor*) {
  no_cuda("attention");
}
void attention_kv_batch(std::span<const AttentionCall>, float) { no_cuda("attention"); }
void store_kv_rows(const Tensor&, const KvRows&, int64_t, const int32_t*) { no_cuda("store_kv_rows"); }
bool attention_takes_gate(int64_t) { return false; }
bool attention_gives_bf16(int64_t, int64_t) { return false; }
void causal_conv1d_silu_taps(const Tensor&, Tensor&, const Tensor&, Tensor&) { no_cuda("causal_conv1d_silu_taps"); }
void causal_conv1d_silu_taps_rows(const Tensor&, std::span<const int64_t>, std::span<Tensor* const>, const Tensor&, Tensor&) {
  no_cuda("causal_conv1d_silu_taps_rows");
}
void gated_delta_rule_rows(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                           const GatedDeltaShape&, std::span<const int64_t>, std::span<Tensor* const>, Tensor&) {
  no_cuda("gated_delta_rule_rows");
}
void gated_delta_rule(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                      const GatedDeltaShape&, Tensor&, Tensor&, GatedDeltaAlgorithm) {
  no_cuda("gated_delta_rule");
}
void gated_rms_norm(const Tensor&, const Tensor&, const Tensor&, float, Tensor&) { no_cuda("gated_rms_norm"); }
void copy_rows(const Tensor&, std::span<const int32_t>, Tensor&, std::span<const int32_t>) { no_cuda("copy_rows"); }
void moe_combine(const Tensor&, std::span<const float>, const Tensor*, std::span<const float>, Tensor&) { no_cuda("moe_combine"); }
void moe_route(const Tensor&, const MoeRouting&, Tensor&, Tensor&, int32_t) { no_cuda("moe_route"); }
void expert_matmul(const Tensor&, const ExpertSet&, const Tensor&, Tensor&) { no_cuda("expert_matmul"); }
void moe_combine_device(const Tensor&, const Tensor&, const Tensor*, const Tensor*, Tensor&) { no_cuda("moe_combine"); }
void moe_combine_shared_rank(const Tensor&, const Tensor&, const Tensor&, Tensor&) { no_cuda("moe_combine_shared_rank"); }
void layer_norm(const Tensor&, const Tensor&, const Tensor&, float, Tensor&) { no_cuda("layer_norm"); }
void gelu(const Tensor&, Tensor&, GeluKind) { no_cuda("gelu"); }
void full_attention(const Tensor&, const Tensor&, const Tensor&, float, Tensor&) { no_cuda("full_attention"); }
void encoder_matmul_f32(const Tensor&, const Weight&, Tensor&) { no_cuda("encoder_matmul"); }

bool mma_matvec_ok(const Weight&, const Tensor&, int64_t) { return false; }
void mma_matvec(const Tensor&, const Weight&, Tensor&) { no_cuda("matmul"); }
bool can_tile(const Weight&) { return false; }
void tile_weight(Weight&) { no_cuda("tile_weight"); }
void prepare_weight(Weight&) {}
bool tiles_matvec_ok(const Weight&, const Tensor&, int64_t) { return false; }
bool tiles_gemm_supported() { return false; }
bool tiles_gemm_ok(const Weight&, const Tensor&) { return false; }
bool tiles_gemm_preferred(const Weight&, int64_t) { return false; }
void tiles_gemm(const Tensor&, const Weight&, Tensor&) { no_cuda("tiles_gemm"); }
void tiles_matvec(const Tensor&, const Weight&, Tensor&) { no_cuda("matmul"); }
bool tiles_silu_mul_ok(const Weight&, const Tensor&) { return false; }
void tiles_matvec_silu_mul(const Tensor&, const Weight&, Tensor&) { no_cuda("matmul_silu_mul"); }
bool tiles_residual_ok(const Tensor&, const Weight&, const ResidualNorm&) { return false; }
int64_t tiles_matvec_residual(const Tensor&, const Weight&, const ResidualNorm&) { no_cuda("matmul_residual"); }
bool tiles_scaled_ok(const ScaledInput&, const Weight&) { return false; }
void tiles_matvec_scaled(const ScaledInput&, const Weight&, Tensor&) { no_cuda("matmul_scaled"); }
bool tiles_silu_mul_scaled_ok(const ScaledInput&, const Weight&) { return false; }
void tiles_matvec_silu_mul_scaled(const ScaledInput&, const Weight&, Tensor&) { no_cuda("matmul_silu_mul_scaled"); }
void apply_norm_scale(const ScaledInput&, Tensor&) { no_cuda("apply_norm_scale"); }
bool moe_combine_residual_ok(int64_t, const ResidualNorm&) { return false; }
int64_t moe_combine_shared_rank_residual(const Tensor&, const Tensor&, const Tensor&, const ResidualNorm&) {
  no_cuda("moe_combine_shared_rank_residual");
}
bool tiles_experts_ok(const ExpertSet&, const Tensor&) { return false; }
bool tiles_expert_silu_mul_ok(const ExpertSet&, const ExpertSet&, const Tensor&) { return false; }
void tiles_expert_silu_mul(const Tensor&, const ExpertSet&, const ExpertSet&, const Tensor&, Tensor&) {
  no_cuda("expert_gate_up_silu_mul");
}
void tiles_grouped_expert_silu_mul(const Tensor&, const ExpertSet&, const ExpertSet&, const Tensor&, Tensor&) {
  no_cuda("grouped expert mat-vec");
}
void tiles_grouped_expert_matvec(const Tensor&, const ExpertSet&, const Tensor&, Tensor&) { no_cuda("grouped expert mat-vec"); }
bool tiles_expert_combine_residual_ok(const ExpertSet&, const Tensor&, const Tensor&, const ResidualNorm&) { return false; }
int64_t tiles_expert_matvec_combine_residual(const Tensor&, const ExpertSet&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
                                             const ResidualNorm&) {
  no_cuda("expert_down_combine_residual");
}
bool tiles_routed_expert_silu_mul_ok(const ExpertSet&, const ExpertSet&, const Tensor&, const Tensor&) { return false; }
void tiles_routed_expert_silu_mul(const Tensor&, const ExpertSet&, const ExpertSet&, const Tensor&, const MoeRouting&, int32_t, Tensor&,
                                  Tensor&, Tensor&) {
  no_cuda("expert_gate_up_silu_mul_routed");
}
void tiles_expert_matvec(const Tensor&, const ExpertSet&, const ExpertSet*, const Tensor&, Tensor&, Tensor*) { no_cuda("expert mat-vec"); }

}  // namespace sanctum::ops::cuda

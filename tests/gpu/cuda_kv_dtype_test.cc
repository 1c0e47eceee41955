// The KV cache in bf16, q8 and q4v on a GPU (ops/kv_cache_ops.h), with the CPU as the reference: the GPU's
// stores write the CPU store's bytes for the same rows (plain, fused with RoPE, fused with the head
// norms, and recorded in a CUDA graph at device positions), and attention over the same stored bytes
// matches the CPU's attention over them on every GPU path (the decode kernel, the f32-math flash
// kernel, the bf16 tensor-core flash kernel, the Hopper one where it runs, cuBLAS), at head dims 64,
// 128, 256 and odd ones, GQA groups of 1, 4 and 8, and caches whose lengths are off every tile and
// span several 256-row blocks. Paths that read the same values from an f32 cache holding the
// dequantized rows (its "twin") give that cache's results. Fresh random data each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "../ops/op_test_util.h"
#include "base/error.h"
#include "gpu_test_util.h"
#include "ops/cuda/attention_paths.cuh"
#include "ops/cuda/kernels.h"
#include "ops/kv_cache_ops.h"
#include "ops/ops.h"
#include "ops/precision.h"
#include "ops/ref/kv_cache.h"
#include "tensor/device_memory.h"
#include "tensor/step_graph.h"

namespace sanctum {
namespace {

using device_memory::CopyKind;
using ops::KvCacheDtype;
using ops::KvFormat;
using ops::KvRows;
using test::Rng;

class CudaKv : public test::RequiresGpu {};

const KvCacheDtype kGpuDtypes[] = {KvCacheDtype::bf16, KvCacheDtype::q8, KvCacheDtype::q4v};

// The formats a dtype stores, keys' first: q4v's q8 keys and q4 values, the others' one format.
std::vector<KvFormat> formats_of(KvCacheDtype dtype) {
  const KvFormat k = ops::key_format(dtype), v = ops::value_format(dtype);
  return k == v ? std::vector<KvFormat>{k} : std::vector<KvFormat>{k, v};
}

struct PrecisionScope {
  explicit PrecisionScope(ops::MatmulPrecision p) : saved(ops::matmul_precision()) { ops::set_matmul_precision(p); }
  ~PrecisionScope() { ops::set_matmul_precision(saved); }
  ops::MatmulPrecision saved;
};

std::string case_name(KvCacheDtype dtype, int64_t n, int64_t pos0, int64_t heads, int64_t kv, int64_t d) {
  return std::string(ops::kv_cache_dtype_name(dtype)) + " n=" + std::to_string(n) + " pos0=" + std::to_string(pos0) +
         " heads=" + std::to_string(heads) + "/" + std::to_string(kv) + " d=" + std::to_string(d) + " " + test::seed_note();
}

std::vector<int32_t> positions_from(int64_t first, int64_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = static_cast<int32_t>(first + i);
  return p;
}

// Host rows (n, width) of normal values, every third row shifted off zero. With `specials` the first
// row holds values the roundings must agree on: bf16 ties both ways, a signed zero, a subnormal, an f32
// near the top of the range, and where the width allows a block of zeros (a q8 or q4 scale of 0), one
// of zeros of both signs (-0 first: the q4 min and max the CPU's scan keeps) and one of a single value
// (a q4 min just under it, a tiny scale).
Tensor random_rows(int64_t n, int64_t width, Rng& rng, bool specials = false) {
  Tensor t = Tensor::zeros({n, width}, DType::f32);
  float* x = t.data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < width; ++c) x[i * width + c] = rng.normal() + (i % 3 == 0 ? 2.0f : 0.0f);
  if (!specials) return t;
  const float special[] = {1.00390625f, 1.01171875f, -0.0f, 1e-40f, 3.0e38f, -2.5f};
  for (int64_t c = 0; c < width && c < 6; ++c) x[c] = special[c];
  for (int64_t c = 64; c < width && c < 128; ++c) x[c] = c == 96 ? -0.0f : 0.0f;
  for (int64_t c = 128; c < width && c < 160; ++c) x[c] = 0.3f;
  return t;
}

// Byte copies of a cache side between host and GPU: one copy per buffer (fresh sides are contiguous).
KvRows copy_side(const KvRows& from, Device to) {
  KvRows out = KvRows::zeros(from.rows(), from.kv_heads(), from.head_dim, from.format, to);
  const CopyKind kind = to == Device::cuda ? CopyKind::host_to_device : CopyKind::device_to_host;
  device_memory::cuda_copy(out.data.raw(), from.data.raw(), from.data.nbytes(), kind);
  if (from.scales) device_memory::cuda_copy(out.scales.raw(), from.scales.raw(), from.scales.nbytes(), kind);
  return out;
}

// The first byte where two host sides differ, or success.
::testing::AssertionResult same_bytes(const KvRows& got, const KvRows& want) {
  for (const auto& [a, b, what] : {std::tuple{&got.data, &want.data, "data"}, std::tuple{&got.scales, &want.scales, "scales"}}) {
    if (a->nbytes() != b->nbytes()) return ::testing::AssertionFailure() << what << " sizes differ";
    const auto* x = static_cast<const uint8_t*>(a->raw());
    const auto* y = static_cast<const uint8_t*>(b->raw());
    for (size_t i = 0; i < a->nbytes(); ++i)
      if (x[i] != y[i])
        return ::testing::AssertionFailure() << what << " byte " << i << " (row " << i / (a->nbytes() / a->dim(0)) << "): GPU " << int{x[i]}
                                             << ", CPU " << int{y[i]};
  }
  return ::testing::AssertionSuccess();
}

// A host cache side of `capacity` rows holding random rows [0, keys), written by the CPU's store.
KvRows stored_side(int64_t capacity, int64_t keys, int64_t heads, int64_t d, KvFormat format, Rng& rng) {
  KvRows side = KvRows::zeros(capacity, heads, d, format, Device::cpu);
  const std::vector<int32_t> pos = positions_from(0, keys);
  ops::store_kv_rows(random_rows(keys, heads * d, rng), side, ops::Positions{pos});
  return side;
}

// The f32 side holding a side's dequantized values, on the GPU.
KvRows f32_twin(const KvRows& host_side) {
  const Tensor values = ops::ref::dequantize_kv(host_side);
  return KvRows{test::gpu(values), Tensor{}, KvFormat::f32, host_side.head_dim};
}

// max |a - b| / max |b| over two same-shape f32 tensors on either device.
double relative_error(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = a_in.device() == Device::cpu ? a_in : test::host(a_in), b = b_in.device() == Device::cpu ? b_in : test::host(b_in);
  double worst = 0.0, scale = 1e-6;
  for (int64_t i = 0; i < b.numel(); ++i) scale = std::max(scale, static_cast<double>(std::fabs(b.data<float>()[i])));
  for (int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(a.data<float>()[i] - b.data<float>()[i])));
  return worst / scale;
}

TEST_F(CudaKv, stores_write_the_cpu_stores_bytes) {
  Rng rng(41);
  const int64_t capacity = 700;  // three 256-row blocks, the last part full
  struct Piece {
    int64_t first, n;
  };
  for (KvCacheDtype dtype : kGpuDtypes)
    for (KvFormat format : formats_of(dtype))
      for (int64_t d : {64, 128, 256, 80, 30})
        for (int64_t heads : {1, 4}) {
          KvRows cpu = KvRows::zeros(capacity, heads, d, format, Device::cpu);
          KvRows on_gpu = KvRows::zeros(capacity, heads, d, format, Device::cuda);
          for (Piece p : {Piece{0, 300}, Piece{300, 17}, Piece{317, 1}, Piece{318, 3}, Piece{321, 379}}) {
            const Tensor rows = random_rows(p.n, heads * d, rng, true);
            const std::vector<int32_t> pos = positions_from(p.first, p.n);
            ops::store_kv_rows(rows, cpu, ops::Positions{pos});
            ops::store_kv_rows(test::gpu(rows), on_gpu, ops::Positions{pos});
          }
          EXPECT_TRUE(same_bytes(copy_side(on_gpu, Device::cpu), cpu))
              << case_name(dtype, capacity, 0, heads, heads, d) << (format == KvFormat::q4 ? " (values)" : "");
        }
}

// One decode step's store recorded with its position on the device, replayed at several positions.
TEST_F(CudaKv, recorded_store_writes_the_cpu_stores_bytes_at_each_position) {
  Rng rng(42);
  const int64_t capacity = 520, heads = 2, d = 96;
  for (KvCacheDtype dtype : kGpuDtypes)
    for (KvFormat format : formats_of(dtype))
      for (int64_t n : {1, 3}) {
        KvRows cpu = KvRows::zeros(capacity, heads, d, format, Device::cpu);
        KvRows on_gpu = KvRows::zeros(capacity, heads, d, format, Device::cuda);
        Tensor src = Tensor::zeros({n, heads * d}, DType::f32, Device::cuda), step_pos = Tensor::zeros({n}, DType::i32, Device::cuda);
        std::vector<int32_t> host_pos = positions_from(0, n);
        auto step = [&] { ops::store_kv_rows(src, on_gpu, ops::Positions{host_pos, &step_pos}); };
        step();
        StepGraph graph;
        ASSERT_TRUE(graph.record(step)) << graph.last_error();
        for (int64_t first : {int64_t{0}, int64_t{255}, int64_t{256}, int64_t{400}, capacity - n}) {
          const Tensor rows = random_rows(n, heads * d, rng, true);
          const std::vector<int32_t> pos = positions_from(first, n);
          device_memory::cuda_copy(src.raw(), rows.raw(), rows.nbytes(), CopyKind::host_to_device);
          device_memory::cuda_copy(step_pos.raw(), pos.data(), pos.size() * sizeof(int32_t), CopyKind::host_to_device);
          graph.replay();
          ops::store_kv_rows(rows, cpu, ops::Positions{pos});
        }
        EXPECT_TRUE(same_bytes(copy_side(on_gpu, Device::cpu), cpu))
            << ops::kv_cache_dtype_name(dtype) << (format == KvFormat::q4 ? " (values)" : "") << " n=" << n;
      }
}

// (heads, kv heads, head dim, rotary dim, tokens) of the RoPE + store tests.
using HeadCase = std::tuple<int64_t, int64_t, int64_t, int, int64_t>;

// RoPE and the store in one launch (bf16) or rope then the stores (q8, q4v): q and k rotated as into an f32
// cache, and the cache holding what the CPU's store writes for the rotated k and for v.
TEST_F(CudaKv, rope_and_store_writes_the_cpu_stores_bytes_of_the_rotated_rows) {
  Rng rng(43);
  const int64_t capacity = 600, first = 257;
  for (KvCacheDtype dtype : kGpuDtypes)
    for (auto [heads, kv, d, rotary, n] : {HeadCase{8, 2, 64, 32, 5}, HeadCase{4, 4, 128, 128, 1}, HeadCase{16, 2, 256, 64, 17},
                                           HeadCase{12, 3, 80, 80, 3}, HeadCase{8, 1, 128, 96, 300}}) {
      ops::RopeConfig rc;
      rc.head_dim = static_cast<int>(d);
      rc.rotary_dim = rotary;
      rc.theta = 1e6;
      const ops::RopeTable table(rc);
      const Tensor q0 = test::random_tensor({n, heads, d}, DType::f32, rng), k0 = test::random_tensor({n, kv, d}, DType::f32, rng);
      const Tensor v = random_rows(n, kv * d, rng, true);
      const std::vector<int32_t> pos = positions_from(first, n);
      Tensor q = test::gpu(q0), k = test::gpu(k0), qf = test::gpu(q0), kf = test::gpu(k0), vg = test::gpu(v);
      KvRows ck = KvRows::zeros(capacity, kv, d, ops::key_format(dtype), Device::cuda);
      KvRows cv = KvRows::zeros(capacity, kv, d, ops::value_format(dtype), Device::cuda);
      KvRows fk = KvRows::zeros(capacity, kv, d, KvFormat::f32, Device::cuda);
      KvRows fv = KvRows::zeros(capacity, kv, d, KvFormat::f32, Device::cuda);
      ops::rope_and_store(q, k, vg, ops::Positions{pos}, table, ck, cv);
      ops::rope_and_store(qf, kf, vg, ops::Positions{pos}, table, fk, fv);
      const std::string what = case_name(dtype, n, first, heads, kv, d) + " rotary=" + std::to_string(rotary);
      EXPECT_EQ(relative_error(q, qf), 0.0) << what << ": q rotated as for an f32 cache";
      EXPECT_EQ(relative_error(k, kf), 0.0) << what << ": k rotated as for an f32 cache";
      KvRows want_k = KvRows::zeros(capacity, kv, d, ops::key_format(dtype), Device::cpu);
      KvRows want_v = KvRows::zeros(capacity, kv, d, ops::value_format(dtype), Device::cpu);
      ops::store_kv_rows(test::host(k).reshape({n, kv * d}), want_k, ops::Positions{pos});
      ops::store_kv_rows(v, want_v, ops::Positions{pos});
      EXPECT_TRUE(same_bytes(copy_side(ck, Device::cpu), want_k)) << what << ": cached k";
      EXPECT_TRUE(same_bytes(copy_side(cv, Device::cpu), want_v)) << what << ": cached v";
    }
}

// Gated attention's head norms, RoPE and the store: fused in one launch for a bf16 cache (decode), in
// separate ones for prompts, q8 and q4v; k normalised and rotated as for an f32 cache and stored as the CPU
// stores it.
TEST_F(CudaKv, norm_rope_and_store_writes_the_cpu_stores_bytes_of_the_normed_rows) {
  Rng rng(44);
  const int64_t capacity = 300, first = 100;
  for (KvCacheDtype dtype : kGpuDtypes)
    for (auto [heads, kv, d, rotary, n] : {HeadCase{16, 2, 256, 64, 1}, HeadCase{8, 2, 128, 128, 5}, HeadCase{6, 1, 96, 32, 70}}) {
      ops::RopeConfig rc;
      rc.head_dim = static_cast<int>(d);
      rc.rotary_dim = rotary;
      rc.theta = 1e7;
      const ops::RopeTable table(rc);
      const Tensor qw = test::gpu(test::random_tensor({d}, DType::f32, rng)), kw = test::gpu(test::random_tensor({d}, DType::f32, rng));
      const Tensor q_in = test::gpu(test::random_tensor({n * heads, d}, DType::f32, rng));
      const Tensor k0 = test::random_tensor({n, kv, d}, DType::f32, rng), v = random_rows(n, kv * d, rng, true);
      const std::vector<int32_t> pos = positions_from(first, n);
      Tensor q = Tensor::zeros({n, heads, d}, DType::f32, Device::cuda), qf = Tensor::zeros({n, heads, d}, DType::f32, Device::cuda);
      Tensor k = test::gpu(k0), kf = test::gpu(k0), vg = test::gpu(v);
      KvRows ck = KvRows::zeros(capacity, kv, d, ops::key_format(dtype), Device::cuda);
      KvRows cv = KvRows::zeros(capacity, kv, d, ops::value_format(dtype), Device::cuda);
      KvRows fk = KvRows::zeros(capacity, kv, d, KvFormat::f32, Device::cuda);
      KvRows fv = KvRows::zeros(capacity, kv, d, KvFormat::f32, Device::cuda);
      ops::norm_rope_and_store(q_in, qw, kw, 1e-6f, 0.0f, q, k, vg, ops::Positions{pos}, table, ck, cv);
      ops::norm_rope_and_store(q_in, qw, kw, 1e-6f, 0.0f, qf, kf, vg, ops::Positions{pos}, table, fk, fv);
      const std::string what = case_name(dtype, n, first, heads, kv, d);
      EXPECT_EQ(relative_error(q, qf), 0.0) << what << ": q";
      EXPECT_EQ(relative_error(k, kf), 0.0) << what << ": k";
      KvRows want_k = KvRows::zeros(capacity, kv, d, ops::key_format(dtype), Device::cpu);
      KvRows want_v = KvRows::zeros(capacity, kv, d, ops::value_format(dtype), Device::cpu);
      ops::store_kv_rows(test::host(k).reshape({n, kv * d}), want_k, ops::Positions{pos});
      ops::store_kv_rows(v, want_v, ops::Positions{pos});
      EXPECT_TRUE(same_bytes(copy_side(ck, Device::cpu), want_k)) << what << ": cached k";
      EXPECT_TRUE(same_bytes(copy_side(cv, Device::cpu), want_v)) << what << ": cached v";
    }
}

struct AttnCase {
  int64_t n, pos0, heads, kv_heads, d;
};

// The caches of one attention case: stored on the CPU, their bytes on the GPU, and the f32 twins.
struct Caches {
  KvRows k, v, gk, gv, fk, fv;
};

Caches make_caches(KvCacheDtype dtype, const AttnCase& c, Rng& rng) {
  const int64_t keys = c.pos0 + c.n, capacity = keys + 29;  // rows past the last query's position too
  Caches s;
  s.k = stored_side(capacity, keys, c.kv_heads, c.d, ops::key_format(dtype), rng);
  s.v = stored_side(capacity, keys, c.kv_heads, c.d, ops::value_format(dtype), rng);
  s.gk = copy_side(s.k, Device::cuda);
  s.gv = copy_side(s.v, Device::cuda);
  s.fk = f32_twin(s.k);
  s.fv = f32_twin(s.v);
  return s;
}

// ops::attention on the GPU against the CPU's over the same bytes, and against the f32 twin. The
// decode kernel and the flash kernel of attention.cu compute in f32 whatever the element: within
// 2e-5 of the largest CPU output (the sums' order differs), and the twin's result to 1e-6. From 64
// queries the fast mode runs on the tensor cores with Q and P in bf16: within 1e-2 (a few 1e-3 seen
// for an f32 cache against its reference).
void expect_gpu_attention_matches_cpu(KvCacheDtype dtype, const AttnCase& c, Rng& rng) {
  const std::string what =
      case_name(dtype, c.n, c.pos0, c.heads, c.kv_heads, c.d) + (ops::matmul_precision() == ops::MatmulPrecision::f32 ? " exact" : " fast");
  const Caches s = make_caches(dtype, c, rng);
  const Tensor q = test::random_tensor({c.n, c.heads, c.d}, DType::f32, rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  const std::vector<int32_t> pos = positions_from(c.pos0, c.n);
  Tensor want = Tensor::zeros({c.n, c.heads, c.d}, DType::f32);
  ops::attention(q, s.k, s.v, ops::Positions{pos}, scale, want);
  const Tensor qg = test::gpu(q);
  Tensor got = Tensor::zeros({c.n, c.heads, c.d}, DType::f32, Device::cuda), twin = got.clone();
  ops::attention(qg, s.gk, s.gv, ops::Positions{pos}, scale, got);
  ops::attention(qg, s.fk, s.fv, ops::Positions{pos}, scale, twin);
  const bool tensor_cores = c.n >= 64 && ops::matmul_precision() != ops::MatmulPrecision::f32;
  EXPECT_LE(relative_error(got, want), tensor_cores ? 1e-2 : 2e-5) << what;
  if (!tensor_cores) {
    EXPECT_LE(relative_error(got, twin), 1e-6) << what << ": against the f32 twin";
  }
}

TEST_F(CudaKv, decode_attention_reads_the_stored_rows_as_the_cpu_does) {
  Rng rng(45);
  PrecisionScope fast(ops::MatmulPrecision::bf16);  // up to 8 queries: the decode kernel
  for (KvCacheDtype dtype : kGpuDtypes)
    for (int64_t n : {1, 3})
      for (auto [heads, kv, d] : {std::tuple<int64_t, int64_t, int64_t>{8, 8, 64}, {16, 4, 128}, {16, 2, 256}, {8, 1, 80}, {6, 2, 30}})
        for (int64_t pos0 : {0, 37, 700, 3000}) expect_gpu_attention_matches_cpu(dtype, {n, pos0, heads, kv, d}, rng);
}

// The 27B's and the 24B's attention shapes over caches too large for L2 (9,000 keys), where a block
// takes up to 8 rows (query x head of the group) of its KV head: 6 or 18 of the 27B's (groups of 8,
// the last part empty), 4 or 12 of the 24B's.
TEST_F(CudaKv, decode_attention_at_production_shapes_reads_the_stored_rows_as_the_cpu_does) {
  Rng rng(49);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  for (KvCacheDtype dtype : kGpuDtypes)
    for (int64_t n : {1, 3})
      for (auto [heads, kv, d] : {std::tuple<int64_t, int64_t, int64_t>{24, 4, 256}, {32, 8, 128}})
        expect_gpu_attention_matches_cpu(dtype, {n, 9000, heads, kv, d}, rng);
}

TEST_F(CudaKv, flash_attention_of_attention_cu_reads_the_stored_rows_as_the_cpu_does) {
  Rng rng(46);
  for (auto precision : {ops::MatmulPrecision::f32, ops::MatmulPrecision::bf16}) {
    PrecisionScope scope(precision);  // exact mode: every n here; fast mode: 9 to 63 queries (with key splits)
    for (KvCacheDtype dtype : kGpuDtypes)
      for (AttnCase c : {AttnCase{1, 300, 4, 1, 128}, AttnCase{3, 511, 8, 2, 64}, AttnCase{17, 700, 8, 1, 256}, AttnCase{17, 0, 6, 6, 80},
                         AttnCase{40, 250, 16, 4, 96}})
        expect_gpu_attention_matches_cpu(dtype, c, rng);
  }
}

// From 64 queries in the fast mode, each tensor-core path run directly (and through the dispatch):
// against the CPU within the bf16 tolerance above; the flash kernels, which read bf16 K and V either
// way, give the f32 twin's bits.
TEST_F(CudaKv, tensor_core_prefill_paths_read_the_stored_rows_as_the_cpu_does) {
  Rng rng(47);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  for (KvCacheDtype dtype : kGpuDtypes)
    for (AttnCase c : {AttnCase{300, 0, 8, 1, 128}, AttnCase{77, 300, 8, 2, 64}, AttnCase{130, 700, 16, 4, 256}, AttnCase{64, 3, 4, 4, 128},
                       AttnCase{300, 211, 12, 3, 80}, AttnCase{100, 0, 8, 1, 96}}) {
      const std::string what = case_name(dtype, c.n, c.pos0, c.heads, c.kv_heads, c.d);
      expect_gpu_attention_matches_cpu(dtype, c, rng);
      const Caches s = make_caches(dtype, c, rng);
      const Tensor q = test::random_tensor({c.n, c.heads, c.d}, DType::f32, rng), qg = test::gpu(q);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
      const std::vector<int32_t> pos = positions_from(c.pos0, c.n);
      Tensor want = Tensor::zeros({c.n, c.heads, c.d}, DType::f32);
      ops::attention(q, s.k, s.v, ops::Positions{pos}, scale, want);
      auto out = [&] { return Tensor::zeros({c.n, c.heads, c.d}, DType::f32, Device::cuda); };
      Tensor got = out(), twin = out();
      auto view = [&](const KvRows& k, const KvRows& v, Tensor& o) { return ops::cuda::attn_view(qg, k, v, c.pos0, nullptr, scale, o); };
      ops::cuda::attention_gemm(view(s.gk, s.gv, got));
      EXPECT_LE(relative_error(got, want), 1e-2) << what << ": cuBLAS";
      if (ops::cuda::attention_flash_bf16_ok(view(s.gk, s.gv, got))) {
        ops::cuda::attention_flash_bf16(view(s.gk, s.gv, got));
        ops::cuda::attention_flash_bf16(view(s.fk, s.fv, twin));
        EXPECT_LE(relative_error(got, want), 1e-2) << what << ": flash (mma.sync)";
        EXPECT_EQ(relative_error(got, twin), 0.0) << what << ": flash (mma.sync) against the f32 twin";
      } else {
        EXPECT_TRUE(c.d != 64 && c.d != 128 && c.d != 256) << what << ": the flash kernel refused its head dim";
      }
      if (ops::cuda::attention_flash_wgmma_ok(view(s.gk, s.gv, got))) {
        ops::cuda::attention_flash_wgmma(view(s.gk, s.gv, got));
        ops::cuda::attention_flash_wgmma(view(s.fk, s.fv, twin));
        EXPECT_LE(relative_error(got, want), 1e-2) << what << ": flash (wgmma)";
        EXPECT_EQ(relative_error(got, twin), 0.0) << what << ": flash (wgmma) against the f32 twin";
        Tensor b16 = Tensor::zeros({c.n, c.heads, c.d}, DType::bf16, Device::cuda);
        ops::attention(qg, s.gk, s.gv, ops::Positions{pos}, scale, b16);  // attention_output_dtype's bf16 out
        const Tensor b16_host = test::host(b16), got_host = test::host(got);
        int64_t differ = 0;
        for (int64_t i = 0; i < got_host.numel(); ++i) differ += b16_host.data<uint16_t>()[i] != f32_to_bf16(got_host.data<float>()[i]);
        EXPECT_EQ(differ, 0) << what << ": bf16 out is the f32 out rounded";
      }
    }
}

// A decode step over a bf16, q8 or q4v cache recorded once with its position in device memory (RoPE and
// the store, then plain and gated attention), replayed across cache blocks: each replay gives the bits
// of the same ops run with host positions.
TEST_F(CudaKv, recorded_decode_step_gives_the_eager_bits) {
  Rng rng(48);
  const int64_t heads = 8, kv = 2, d = 128, capacity = 768;
  ops::RopeConfig rc;
  rc.head_dim = static_cast<int>(d);
  rc.rotary_dim = 64;
  rc.theta = 1e6;
  const ops::RopeTable table(rc);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  for (KvCacheDtype dtype : kGpuDtypes) {
    const KvRows k0 = stored_side(capacity, capacity, kv, d, ops::key_format(dtype), rng);
    const KvRows v0 = stored_side(capacity, capacity, kv, d, ops::value_format(dtype), rng);
    KvRows ck = copy_side(k0, Device::cuda), cv = copy_side(v0, Device::cuda);
    const Tensor q_src = test::gpu(test::random_tensor({1, heads, d}, DType::f32, rng));
    const Tensor k_src = test::gpu(test::random_tensor({1, kv, d}, DType::f32, rng)), v_src = test::gpu(random_rows(1, kv * d, rng));
    const Tensor gate = test::gpu(test::random_tensor({1, heads, d}, DType::f32, rng));
    Tensor q = Tensor::zeros({1, heads, d}, DType::f32, Device::cuda), k = Tensor::zeros({1, kv, d}, DType::f32, Device::cuda);
    Tensor out = Tensor::zeros({1, heads, d}, DType::f32, Device::cuda), gated = out.clone();
    Tensor step_pos = Tensor::zeros({1}, DType::i32, Device::cuda);
    std::vector<int32_t> host_pos{0};
    auto step_ops = [&](KvRows& sk, KvRows& sv, const ops::Positions& pos) {
      ops::copy(q_src, q);
      ops::copy(k_src, k);
      ops::rope_and_store(q, k, v_src, pos, table, sk, sv);
      ops::attention(q, sk, sv, pos, 0.1f, out);
      ops::gated_attention(q, sk, sv, pos, 0.1f, gate, gated);
    };
    step_ops(ck, cv, {host_pos, &step_pos});  // first uses allocate (the RoPE table, split scratch)
    StepGraph graph;
    ASSERT_TRUE(graph.record([&] { step_ops(ck, cv, {host_pos, &step_pos}); })) << graph.last_error();
    for (int32_t p : {0, 255, 256, 511, 767}) {
      KvRows ek = copy_side(copy_side(ck, Device::cpu), Device::cuda), ev = copy_side(copy_side(cv, Device::cpu), Device::cuda);
      device_memory::cuda_copy(step_pos.raw(), &p, sizeof(p), CopyKind::host_to_device);
      graph.replay();
      const Tensor replayed = test::host(out), replayed_gated = test::host(gated);
      const KvRows replayed_k = copy_side(ck, Device::cpu);
      const std::vector<int32_t> at{p};
      step_ops(ek, ev, {at, nullptr});
      const std::string what = std::string(ops::kv_cache_dtype_name(dtype)) + " position " + std::to_string(p);
      EXPECT_EQ(relative_error(replayed, out), 0.0) << what << ": attention";
      EXPECT_EQ(relative_error(replayed_gated, gated), 0.0) << what << ": gated attention";
      EXPECT_TRUE(same_bytes(replayed_k, copy_side(ek, Device::cpu))) << what << ": stored K";
    }
  }
}

// A decode step of many sequences, each one query over its own cache (ops::attention and
// gated_attention over SequenceCaches: one launch per launch shape on the GPU), gives every sequence
// the bits of its own call. The caches differ in length and capacity, one is long enough to take
// blocks of more rows (another launch shape), and 17 sequences need two launches of one shape.
TEST_F(CudaKv, decode_step_of_many_sequences_gives_each_sequence_its_own_bits) {
  Rng rng(52);
  PrecisionScope fast(ops::MatmulPrecision::bf16);  // the decode kernel's mode (exact mode runs each call alone)
  struct Shape {
    int64_t heads, kv, d;
  };
  const float scale = 0.125f;
  for (KvCacheDtype dtype : {KvCacheDtype::f32, KvCacheDtype::bf16, KvCacheDtype::q8, KvCacheDtype::q4v})
    for (Shape sh : {Shape{14, 2, 64}, Shape{16, 2, 128}, Shape{4, 4, 256}, Shape{6, 2, 30}})
      for (int64_t count : {2, 17}) {
        std::vector<KvRows> ks, vs;
        std::vector<std::vector<int32_t>> positions;
        for (int64_t i = 0; i < count; ++i) {
          const int64_t pos = rng.integer(0, 600);
          // Sequence 1's capacity passes 8 MiB of f32 K and V (the decode kernel's reread bound).
          const int64_t capacity = i == 1 ? 9000 : pos + 1 + rng.integer(0, 300);
          ks.push_back(copy_side(stored_side(capacity, pos + 1, sh.kv, sh.d, ops::key_format(dtype), rng), Device::cuda));
          vs.push_back(copy_side(stored_side(capacity, pos + 1, sh.kv, sh.d, ops::value_format(dtype), rng), Device::cuda));
          positions.push_back({static_cast<int32_t>(pos)});
        }
        std::vector<ops::SequenceCache> seqs;
        for (int64_t i = 0; i < count; ++i)
          seqs.push_back(
              {i, i + 1, ops::Positions{positions[static_cast<size_t>(i)]}, ks[static_cast<size_t>(i)], vs[static_cast<size_t>(i)]});
        const Tensor q = test::gpu(test::random_tensor({count, sh.heads, sh.d}, DType::f32, rng));
        const Tensor gate = test::gpu(test::random_tensor({count, sh.heads, sh.d}, DType::f32, rng));
        Tensor out = Tensor::zeros({count, sh.heads, sh.d}, DType::f32, Device::cuda), gated = out.clone();
        ops::attention(q, seqs, scale, out);
        ops::gated_attention(q, seqs, scale, gate, gated);
        const Tensor got = test::host(out), got_gated = test::host(gated);
        for (int64_t i = 0; i < count; ++i) {
          const ops::SequenceCache& s = seqs[static_cast<size_t>(i)];
          Tensor one = Tensor::zeros({1, sh.heads, sh.d}, DType::f32, Device::cuda), one_gated = one.clone();
          ops::attention(q.slice(0, i, i + 1), s.k, s.v, s.positions, scale, one);
          ops::gated_attention(q.slice(0, i, i + 1), s.k, s.v, s.positions, scale, gate.slice(0, i, i + 1), one_gated);
          const std::string what = case_name(dtype, count, s.positions.first(), sh.heads, sh.kv, sh.d) + " sequence " + std::to_string(i) +
                                   " of capacity " + std::to_string(s.k.rows());
          EXPECT_EQ(std::memcmp(got.slice(0, i, i + 1).raw(), test::host(one).raw(), one.nbytes()), 0) << what;
          EXPECT_EQ(std::memcmp(got_gated.slice(0, i, i + 1).raw(), test::host(one_gated).raw(), one.nbytes()), 0) << what << ", gated";
        }
      }
}

// A pair of formats no --kv-cache-dtype makes (bf16 keys with q4 values) is refused by the GPU's
// attention, naming the pairs it reads.
TEST_F(CudaKv, attention_refuses_a_pair_no_dtype_makes) {
  const int64_t d = 64;
  const KvRows k = KvRows::zeros(8, 1, d, KvFormat::bf16, Device::cuda);
  const KvRows v = KvRows::zeros(8, 1, d, KvFormat::q4, Device::cuda);
  const Tensor q = Tensor::zeros({1, 2, d}, DType::f32, Device::cuda);
  Tensor out = Tensor::zeros({1, 2, d}, DType::f32, Device::cuda);
  const std::vector<int32_t> pos{3};
  try {
    ops::attention(q, k, v, ops::Positions{pos}, 0.1f, out);
    ADD_FAILURE() << "bf16 keys with q4 values were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("or q8 keys with q4 values"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sanctum

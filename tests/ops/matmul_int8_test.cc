// ops::matmul in MatmulPrecision::int8 mode: against a scalar twin of the int8 algorithm (bit-exact:
// the integer sums are exact and the f32 sequence is fixed), against the f32 reference within a
// stated bound, rows independent of n, and every compiled SIMD target (VNNI and the fallbacks).
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL  // iterate the AVX3_DL (VNNI) target too, as the kernel's translation unit compiles it
#endif
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "../resident_memory.h"
#include "base/error.h"
#include "base/mapped_file.h"
#include "base/thread_pool.h"
#include "hwy/targets.h"
#include "matmul_rows_check.h"
#include "op_test_util.h"
#include "ops/matmul.h"
#include "ops/precision.h"
#include "ops/ref/matmul.h"

namespace sanctum {
namespace {

using test::Rng;

// "q4 g64 n=1 ..." labels; an ostringstream keeps GCC 12's -Wrestrict false positive on string + away.
template <class... Parts>
std::string label(const Parts&... parts) {
  std::ostringstream out;
  ((out << parts), ...);
  return out.str();
}

// Switches the process to int8 matmuls for one test and back to f32 afterwards.
class MatmulInt8 : public ::testing::Test {
 protected:
  void SetUp() override { ops::set_matmul_precision(ops::MatmulPrecision::int8); }
  void TearDown() override { ops::set_matmul_precision(ops::MatmulPrecision::f32); }
};

// The scalar twin of src/ops/cpu/matmul_int8.cc's numerics contract, written independently.
void ref_int8_matmul(const Tensor& x, const Weight& w, Tensor& y) {
  const int64_t n = x.dim(0), k = w.cols, G = w.quant.group_size, groups = k / G;
  const int bits = w.quant.bits, per_word = 32 / bits;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int32_t> q(static_cast<size_t>(k));
    std::vector<float> d(static_cast<size_t>(groups)), sx(d.size());
    for (int64_t g = 0; g < groups; ++g) {
      float amax = 0.0f, p[16] = {};
      for (int64_t c = g * G; c < (g + 1) * G; ++c) {
        const float v = test::at(x, i, c);
        amax = std::max(amax, std::fabs(v));
        p[c % 16] += v;
      }
      for (int s = 8; s >= 1; s /= 2)
        for (int j = 0; j < s; ++j) p[j] += p[j + s];
      d[g] = amax / 127.0f;
      sx[g] = p[0];
      const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
      for (int64_t c = g * G; c < (g + 1) * G; ++c) {
        const float scaled = test::at(x, i, c) * id;
        q[c] = static_cast<int32_t>(std::nearbyint(scaled));
      }
    }
    for (int64_t r = 0; r < w.rows; ++r) {
      const uint32_t* words = w.data.data<const uint32_t>() + r * w.data.stride(0);
      float tot = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        int64_t isum = 0;
        for (int64_t c = g * G; c < (g + 1) * G; ++c)
          isum += static_cast<int64_t>((words[c / per_word] >> (bits * (c % per_word))) & ((1u << bits) - 1u)) * q[c];
        const float t = static_cast<float>(isum) * d[g];
        tot = std::fma(t, test::at(w.scales, r, g), tot);
        tot = std::fma(test::at(w.biases, r, g), sx[g], tot);
      }
      y.data<float>()[i * y.stride(0) + r] = tot;
    }
  }
}

// First (i, r) where y and the twin differ in bits, as text; empty when identical.
std::string first_difference(const Tensor& y, const Tensor& ref) {
  for (int64_t i = 0; i < y.dim(0); ++i)
    for (int64_t r = 0; r < y.dim(1); ++r) {
      const float a = test::at(y, i, r), b = test::at(ref, i, r);
      if (std::memcmp(&a, &b, 4) != 0) return label("y(", i, ", ", r, ") = ", a, ", twin ", b);
    }
  return {};
}

void expect_matches_twin(const Tensor& x, const Weight& w, const std::string& what) {
  Tensor y = Tensor::zeros({x.dim(0), w.rows}, DType::f32);
  Tensor ref = Tensor::zeros({x.dim(0), w.rows}, DType::f32);
  ops::matmul(x, w, y);
  ref_int8_matmul(x, w, ref);
  const std::string diff = first_difference(y, ref);
  EXPECT_TRUE(diff.empty()) << what << ": " << diff << " " << test::seed_note();
}

TEST_F(MatmulInt8, matches_scalar_twin_bit_exactly_for_every_bits_group_and_size) {
  Rng rng(11);
  for (int bits : {4, 8})
    for (int g : {32, 64, 128})
      for (DType sdt : {DType::bf16, DType::f16, DType::f32})
        for (int64_t k : {int64_t{g}, int64_t{3} * g, int64_t{704}, int64_t{736}, int64_t{896}})  // 704, 736: 5 chunks of 128 + a tail
          for (auto [n, m] : {std::pair<int64_t, int64_t>{1, 33}, {1, 1}, {1, 47}, {2, 17}, {5, 33}, {9, 40}}) {
            if (k % g != 0) continue;
            Weight w = test::random_quantized(m, k, bits, g, sdt, rng);
            Tensor x = test::random_tensor({n, k}, DType::f32, rng);
            expect_matches_twin(x, w, label("q", bits, " g", g, " ", dtype_name(sdt), " n=", n, " k=", k, " m=", m));
          }
}

TEST_F(MatmulInt8, strided_and_misaligned_rows_match_twin_and_leave_padding) {
  Rng rng(12);
  for (int bits : {4, 8})
    for (int64_t n : {1, 7}) {
      const int64_t k = 384, m = 37;
      Weight w = test::random_quantized(m, k, bits, 64, DType::bf16, rng);
      Tensor x = test::strided_matrix(n, k, DType::f32, rng, 5, 1);
      Tensor y_base = Tensor::zeros({n, m + 4}, DType::f32);
      Tensor y = y_base.slice(1, 3, 3 + m);
      Tensor ref = Tensor::zeros({n, m}, DType::f32);
      ops::matmul(x, w, y);
      ref_int8_matmul(x, w, ref);
      EXPECT_TRUE(first_difference(y, ref).empty())
          << "q" << bits << " n=" << n << " " << first_difference(y, ref) << " " << test::seed_note();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c : {0, 1, 2, int(m) + 3}) EXPECT_EQ(y_base.data<float>()[i * (m + 4) + c], 0.0f) << "padding clobbered";
    }
}

// Error of int8 activations against the exact f32 reference, normalised like matmul_test:
// |y - ref| / Σ_c |x_c| (|s q| + |b|). Rounding x to 127 levels per group moves each x_c by at most
// amax_g / 254; with random signs the errors add like a random walk, so on normal data (amax ≈ 3σ,
// mean |x| ≈ 0.8σ) the normalised error is ~1.5% / sqrt(k) — measured ≤ 7.2e-4 at k = 896 for every
// bits/group (relative rms error of y 3e-3..7e-3). Bound: kInt8Tolerance = 3e-3.
constexpr double kInt8Tolerance = 3e-3;

TEST_F(MatmulInt8, stays_within_stated_error_of_f32_reference) {
  Rng rng(13);
  for (int bits : {4, 8})
    for (int g : {32, 64, 128}) {
      const int64_t n = 3, k = 896, m = 64;
      Weight w = test::random_quantized(m, k, bits, g, DType::bf16, rng);
      Tensor x = test::random_tensor({n, k}, DType::f32, rng);
      Tensor y = Tensor::zeros({n, m}, DType::f32), ref = Tensor::zeros({n, m}, DType::f32);
      ops::matmul(x, w, y);
      ops::ref::matmul(x, w, ref);
      double worst = 0.0, err2 = 0.0, ref2 = 0.0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < m; ++r) {
          double mag = 1e-30;
          for (int64_t c = 0; c < k; ++c) {
            const int64_t gi = c / g;
            const double s = test::at(w.scales, r, gi), b = test::at(w.biases, r, gi);
            const double q = (ops::ref::weight_at(w, r, c) - b) / (s == 0.0 ? 1.0 : s);
            mag += std::abs(test::at(x, i, c)) * (std::abs(s * q) + std::abs(b));
          }
          const double e = std::abs(static_cast<double>(test::at(y, i, r)) - test::at(ref, i, r));
          worst = std::max(worst, e / mag);
          err2 += e * e;
          ref2 += static_cast<double>(test::at(ref, i, r)) * test::at(ref, i, r);
        }
      EXPECT_LE(worst, kInt8Tolerance) << "q" << bits << " g" << g << " " << test::seed_note();
      std::printf("int8 vs f32: q%d g%-3d normalised error %.2e, relative rms error %.2e\n", bits, g, worst, std::sqrt(err2 / ref2));
    }
}

TEST_F(MatmulInt8, rows_are_bit_identical_for_any_n) {
  Rng rng(14);
  test::expect_rows_independent_of_n(test::random_quantized(37, 896, 4, 64, DType::bf16, rng), 150, rng, "q4 g64 k=896");
  test::expect_rows_independent_of_n(test::random_quantized(21, 4864, 8, 32, DType::f16, rng), 50, rng, "q8 g32 k=4864");
  test::expect_rows_independent_of_n(test::random_quantized(70, 4864, 4, 128, DType::f32, rng), 13, rng, "q4 g128 k=4864");
  test::expect_rows_independent_of_n(test::random_quantized(33, 640, 8, 128, DType::bf16, rng), 9, rng, "q8 g128 k=640");
}

TEST_F(MatmulInt8, results_do_not_depend_on_thread_count) {
  // The compute pool is sized once per process, so the property is checked against the
  // single-threaded scalar twin at sizes that the kernels split across every pool thread.
  Rng rng(15);
  Weight w = test::random_quantized(4864, 896, 4, 64, DType::bf16, rng);
  for (int64_t n : {1, 6}) {
    Tensor x = test::random_tensor({n, 896}, DType::f32, rng);
    expect_matches_twin(x, w, label("m=4864 n=", n, " threads=", compute_pool().size()));
  }
}

// A copy of w prepared as a model load prepares it in int8 mode: repacked for the VNNI kernels
// (ops/cpu/int8_weight.h) where this CPU runs them.
Weight prepared_int8(const Weight& w) {
  Weight p = w;
  ops::prepare_weight(p);
  return p;
}

bool cpu_has_vnni() { return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"); }

// Every SIMD target compiled into the binary meets the twin bit-exactly: AVX3_DL runs the VNNI
// kernels, AVX3 / AVX2 / SSE4 / scalar the portable loops (a CPU without VNNI).
TEST_F(MatmulInt8, every_compiled_target_matches_twin_and_keeps_rows_independent) {
  Rng rng(16);
  std::vector<std::string> names;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string name = hwy::TargetName(target);
    names.push_back(name);
    for (int bits : {4, 8})
      for (int g : {32, 128}) {
        Weight w = test::random_quantized(19, 384, bits, g, DType::bf16, rng);
        expect_matches_twin(test::random_tensor({1, 384}, DType::f32, rng), w, label(name, " q", bits, " g", g, " n=1"));
        expect_matches_twin(test::random_tensor({6, 384}, DType::f32, rng), w, label(name, " q", bits, " g", g, " n=6"));
        test::expect_rows_independent_of_n(w, 11, rng, name);
        // Prepared on this target: repacked where it runs the VNNI kernels, the checkpoint layout elsewhere.
        Weight p = prepared_int8(w);
        expect_matches_twin(test::random_tensor({1, 384}, DType::f32, rng), p, label(name, " prepared q", bits, " g", g, " n=1"));
        expect_matches_twin(test::random_tensor({6, 384}, DType::f32, rng), p, label(name, " prepared q", bits, " g", g, " n=6"));
      }
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(names.size(), 2u) << "expected the VNNI target and at least one fallback";
  if (__builtin_cpu_supports("avx512vnni")) {
    EXPECT_NE(std::find(names.begin(), names.end(), "AVX3_DL"), names.end()) << "the VNNI kernels were not exercised";
  }
}

TEST_F(MatmulInt8, repacked_weights_match_twin_bit_exactly_for_every_bits_group_and_size) {
  Rng rng(18);
  for (int bits : {4, 8})
    for (int g : {32, 64, 128})
      for (DType sdt : {DType::bf16, DType::f16, DType::f32})
        // k = 32: a 4-bit row of 16 bytes, a quarter of one 64-byte step; 736: a partial last step.
        for (int64_t k : {int64_t{32}, int64_t{g}, int64_t{3} * g, int64_t{736}, int64_t{896}})
          for (auto [n, m] : {std::pair<int64_t, int64_t>{1, 1}, {1, 16}, {1, 47}, {2, 17}, {5, 33}, {9, 15}}) {
            if (k % g != 0) continue;
            Weight p = prepared_int8(test::random_quantized(m, k, bits, g, sdt, rng));
            if (cpu_has_vnni()) {
              ASSERT_NE(p.packed, nullptr) << "int8 mode did not repack the weight";
            }
            Tensor x = test::random_tensor({n, k}, DType::f32, rng);
            expect_matches_twin(x, p, label("repacked q", bits, " g", g, " ", dtype_name(sdt), " n=", n, " k=", k, " m=", m));
          }
}

TEST_F(MatmulInt8, repacked_rows_are_bit_identical_for_any_n_and_thread_count) {
  Rng rng(19);
  test::expect_rows_independent_of_n(prepared_int8(test::random_quantized(37, 896, 4, 64, DType::bf16, rng)), 150, rng, "repacked q4 g64");
  test::expect_rows_independent_of_n(prepared_int8(test::random_quantized(21, 4864, 8, 32, DType::f16, rng)), 50, rng, "repacked q8 g32");
  Weight w = prepared_int8(test::random_quantized(4864, 896, 4, 64, DType::bf16, rng));
  for (int64_t n : {1, 6})
    expect_matches_twin(test::random_tensor({n, 896}, DType::f32, rng), w,
                        label("repacked m=4864 n=", n, " threads=", compute_pool().size()));
}

// Decode batches (n from 2 up to the row-tiled kernel's limit and one past it, into the panels): every
// row count, both widths, every group size and scale dtype, checkpoint and repacked layouts, at k
// with a partial last 64-byte step or a partial 128-value unit and m with a partial 16-row block.
TEST_F(MatmulInt8, decode_batches_of_every_row_count_match_twin_bit_exactly) {
  Rng rng(22);
  const DType dtypes[] = {DType::bf16, DType::f16, DType::f32};
  int case_index = 0;
  for (int bits : {4, 8})
    for (int g : {32, 64, 128})
      for (int64_t k : {int64_t{3} * g, int64_t{5} * g, int64_t{736}}) {
        if (k % g != 0) continue;
        const DType sdt = dtypes[case_index++ % 3];
        const int64_t m = 16 + 2 * (case_index % 9) + 1;  // odd, 17..33
        const Weight w = test::random_quantized(m, k, bits, g, sdt, rng);
        const Weight p = prepared_int8(w);
        for (int64_t n = 1; n <= 17; ++n) {
          const std::string what = label("q", bits, " g", g, " ", dtype_name(sdt), " n=", n, " k=", k, " m=", m);
          expect_matches_twin(test::random_tensor({n, k}, DType::f32, rng), w, what);
          expect_matches_twin(test::random_tensor({n, k}, DType::f32, rng), p, "repacked " + what);
        }
      }
}

// What keeps a sequence's logits independent of the rest of its batch: each row of an n-row call is
// the 1-row call on that row, bit for bit, for every decode batch size.
TEST_F(MatmulInt8, each_row_of_a_decode_batch_equals_that_row_alone) {
  Rng rng(23);
  for (int bits : {4, 8})
    for (int g : {32, 64, 128}) {
      const Weight w = test::random_quantized(45, 640, bits, g, g == 64 ? DType::f16 : DType::bf16, rng);
      const Weight p = prepared_int8(test::random_quantized(51, 896, bits, g, g == 128 ? DType::f32 : DType::bf16, rng));
      for (int64_t n = 2; n <= 16; ++n) {
        test::expect_rows_independent_of_n(w, n, rng, label("q", bits, " g", g, " n=", n));
        test::expect_rows_independent_of_n(p, n, rng, label("repacked q", bits, " g", g, " n=", n));
      }
    }
}

// The f32 kernels (and every other reader) keep the checkpoint layout, so switching modes after a
// load prepared in int8 mode changes nothing there.
TEST_F(MatmulInt8, repacking_leaves_the_f32_mode_unchanged) {
  Rng rng(20);
  for (int bits : {4, 8}) {
    Weight w = test::random_quantized(45, 384, bits, 64, DType::bf16, rng);
    Weight p = prepared_int8(w);
    Tensor x = test::random_tensor({3, 384}, DType::f32, rng);
    Tensor y = Tensor::zeros({3, 45}, DType::f32), yp = Tensor::zeros({3, 45}, DType::f32);
    ops::set_matmul_precision(ops::MatmulPrecision::f32);
    ops::matmul(x, w, y);
    ops::matmul(x, p, yp);
    ops::set_matmul_precision(ops::MatmulPrecision::int8);
    EXPECT_TRUE(test::same_bits(y.data<float>(), yp.data<float>(), 3 * 45)) << "q" << bits << " " << test::seed_note();
  }
}

// A weight read from a mapped file, as a checkpoint's is: once repacked, its pages leave the
// resident set and neither mode's results change (the f32 mode faults them back in).
TEST_F(MatmulInt8, repacking_a_mapped_weight_releases_its_pages_and_keeps_its_numbers) {
  if (!cpu_has_vnni()) GTEST_SKIP() << "no VNNI: int8 mode reads the checkpoint layout and repacks nothing";
  Rng rng(21);
  const int64_t m = 1000, k = 896;
  Weight w = test::random_quantized(m, k, 4, 64, DType::bf16, rng);
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "sanctum-int8-XXXXXX").string();
  const std::string dir = ::mkdtemp(tmpl.data());
  {
    std::ofstream out(dir + "/w.bin", std::ios::binary);
    for (const Tensor* t : {&w.biases, &w.scales, &w.data})
      out.write(static_cast<const char*>(t->raw()), static_cast<std::streamsize>(t->nbytes()));
  }
  auto file = std::make_shared<MappedFile>(dir + "/w.bin");
  fs::remove_all(dir);
  Weight mapped = w;
  const uint8_t* at = file->data();
  mapped.biases = Tensor::view_of(at, {m, k / 64}, DType::bf16, file);
  mapped.scales = Tensor::view_of(at + w.biases.nbytes(), {m, k / 64}, DType::bf16, file);
  mapped.data = Tensor::view_of(at + w.biases.nbytes() + w.scales.nbytes(), {m, k / 8}, DType::u32, file);

  Tensor x = test::random_tensor({1, k}, DType::f32, rng);
  Tensor before = Tensor::zeros({1, m}, DType::f32);
  ops::matmul(x, mapped, before);  // reads (faults in) the whole mapping
  const long resident = test::resident_kib(file->data());
  ASSERT_GE(resident, static_cast<long>(file->size() / 1024)) << "the mapping was not found in /proc/self/smaps";
  ops::prepare_weight(mapped);
  ASSERT_NE(mapped.packed, nullptr);
  EXPECT_LE(test::resident_kib(file->data()), 4) << "the checkpoint's pages stayed resident (" << resident << " KiB before)";

  Tensor after = Tensor::zeros({1, m}, DType::f32);
  ops::matmul(x, mapped, after);
  EXPECT_TRUE(test::same_bits(before.data<float>(), after.data<float>(), m)) << test::seed_note();
  EXPECT_LE(test::resident_kib(file->data()), 4) << "an int8 matmul read the checkpoint's pages again";
  expect_matches_twin(x, mapped, "mapped, repacked");
  expect_matches_twin(test::random_tensor({7, k}, DType::f32, rng), mapped, "mapped, repacked, n=7");
  ops::set_matmul_precision(ops::MatmulPrecision::f32);
  Tensor f32_mapped = Tensor::zeros({1, m}, DType::f32), f32_heap = Tensor::zeros({1, m}, DType::f32);
  ops::matmul(x, mapped, f32_mapped);
  ops::matmul(x, w, f32_heap);
  EXPECT_TRUE(test::same_bits(f32_mapped.data<float>(), f32_heap.data<float>(), m)) << test::seed_note();
}

TEST(MatmulPrecision, defaults_to_f32_and_parses_names) {
  EXPECT_EQ(ops::matmul_precision(), std::getenv("SANCTUM_MATMUL_PRECISION")
                                         ? ops::parse_matmul_precision(std::getenv("SANCTUM_MATMUL_PRECISION"))
                                         : ops::MatmulPrecision::f32);
  EXPECT_EQ(ops::parse_matmul_precision("int8"), ops::MatmulPrecision::int8);
  EXPECT_EQ(ops::parse_matmul_precision("f32"), ops::MatmulPrecision::f32);
  EXPECT_STREQ(ops::matmul_precision_name(ops::MatmulPrecision::int8), "int8");
  EXPECT_THROW(ops::parse_matmul_precision("int4"), Error);
}

TEST_F(MatmulInt8, dense_weights_keep_the_f32_path) {
  Rng rng(17);
  Weight d = dense_weight(test::random_tensor({13, 99}, DType::bf16, rng));
  Tensor x = test::random_tensor({3, 99}, DType::f32, rng);
  Tensor y = Tensor::zeros({3, 13}, DType::f32), y32 = Tensor::zeros({3, 13}, DType::f32);
  ops::matmul(x, d, y);
  ops::set_matmul_precision(ops::MatmulPrecision::f32);
  ops::matmul(x, d, y32);
  EXPECT_TRUE(test::same_bits(y.data<float>(), y32.data<float>(), 3 * 13));
}

}  // namespace
}  // namespace sanctum

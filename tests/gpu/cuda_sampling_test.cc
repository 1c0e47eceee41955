// Token selection on the GPU (ops/sampling.h) against the host: argmax bit for bit with
// sanctum::argmax, draws against the scalar twin at the same uniforms, and sampled frequencies
// against the host Sampler's distribution, without and under allowed-token masks (the host path's
// mask_row); the chained decode's pieces (feed_pick, the queued copies back). Skips without a GPU;
// scripts/gpu_check.sh runs it there.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "../ops/op_test_util.h"
#include "base/error.h"
#include "gpu_test_util.h"
#include "ops/ref/sampling.h"
#include "ops/sampling.h"
#include "sampling/sampler.h"
#include "tensor/device_memory.h"

namespace sanctum {
namespace {

using test::Rng;

class CudaSampling : public test::RequiresGpu {};

// Random logits with the awkward cases: repeated maxima, -inf, NaN, -0 beside +0, middle ties.
std::vector<float> awkward_logits(Rng& rng, int64_t vocab, float scale) {
  std::vector<float> l(static_cast<size_t>(vocab));
  for (float& x : l) x = rng.normal() * scale;
  if (vocab >= 8) {
    auto at = [&]() -> float& { return l[static_cast<size_t>(rng.integer(0, vocab - 1))]; };
    const float top = *std::max_element(l.begin(), l.end()) + 0.5f;
    at() = top;
    at() = top;
    at() = -INFINITY;
    at() = NAN;
    at() = 0.0f;
    at() = -0.0f;
    const float mid = at();
    for (int i = 0; i < 4; ++i) at() = mid;
  }
  return l;
}

// (rows, vocab) on the GPU with a row stride of vocab + pad (a strided view, as a wider scratch gives).
Tensor upload_rows(const std::vector<std::vector<float>>& rows, int64_t vocab, int64_t pad) {
  Tensor wide = Tensor::zeros({static_cast<int64_t>(rows.size()), vocab + pad}, DType::f32);
  for (size_t r = 0; r < rows.size(); ++r)
    std::copy(rows[r].begin(), rows[r].end(), wide.data<float>() + static_cast<int64_t>(r) * (vocab + pad));
  return test::gpu(wide).slice(1, 0, vocab);
}

std::vector<int32_t> download(const Tensor& ids) {
  Tensor h = test::host(ids);
  return std::vector<int32_t>(h.data<int32_t>(), h.data<int32_t>() + h.numel());
}

TEST_F(CudaSampling, argmax_rows_is_the_host_argmax_bit_for_bit) {
  Rng rng(21);
  SCOPED_TRACE(test::seed_note());
  for (int64_t vocab : {1, 2, 31, 32, 33, 769, 1025, 4096, 5125, 151936, 248320}) {
    std::vector<std::vector<float>> rows;
    for (int r = 0; r < 6; ++r) rows.push_back(awkward_logits(rng, vocab, 2.0f));
    rows.push_back(std::vector<float>(static_cast<size_t>(vocab), -INFINITY));  // nothing finite: 0
    std::vector<float> nan_row(static_cast<size_t>(vocab), NAN);
    nan_row.back() = -INFINITY;
    rows.push_back(nan_row);
    if (vocab >= 2) {
      std::vector<float> last_ties(static_cast<size_t>(vocab), 1.0f);  // all equal: the first wins
      rows.push_back(last_ties);
      std::vector<float> tail(static_cast<size_t>(vocab), -1.0f);
      tail.back() = 7.0f;
      tail[static_cast<size_t>(vocab / 2)] = NAN;
      rows.push_back(tail);
    }
    for (int64_t pad : {int64_t{0}, int64_t{3}}) {
      Tensor logits = upload_rows(rows, vocab, pad);
      Tensor ids = Tensor::zeros({static_cast<int64_t>(rows.size())}, DType::i32, Device::cuda);
      ops::argmax_rows(logits, ids);
      const auto got = download(ids);
      for (size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(got[r], argmax(rows[r])) << "vocab " << vocab << " row " << r << " pad " << pad;
    }
  }
}

TEST_F(CudaSampling, argmax_rows_takes_many_rows_and_repeated_calls) {
  Rng rng(24);
  SCOPED_TRACE(test::seed_note());
  for (int64_t rows : {int64_t{100}, int64_t{3}, int64_t{100}}) {  // the per-row scratch grows, then is reused
    for (int64_t vocab : {int64_t{769}, int64_t{9000}}) {
      std::vector<std::vector<float>> logits_rows;
      for (int64_t r = 0; r < rows; ++r) logits_rows.push_back(awkward_logits(rng, vocab, 1.0f));
      Tensor logits = upload_rows(logits_rows, vocab, 0);
      Tensor ids = Tensor::zeros({rows}, DType::i32, Device::cuda);
      for (int call = 0; call < 2; ++call) {
        ops::argmax_rows(logits, ids);
        const auto got = download(ids);
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(got[static_cast<size_t>(r)], argmax(logits_rows[static_cast<size_t>(r)])) << "row " << r;
      }
    }
  }
}

// Device draws at given uniforms against the scalar twin at the same uniforms. The weights differ
// only in the last bits of exp and of sums, so draws agree unless a uniform falls on a boundary.
TEST_F(CudaSampling, sample_rows_draws_what_the_reference_draws) {
  Rng rng(22);
  SCOPED_TRACE(test::seed_note());
  std::mt19937_64 stream(test::test_seed());
  const ops::RowSampling configs[] = {
      {1.0f, 1.0f, 0, 0.0f},     {0.7f, 0.9f, 0, 0.0f}, {1.3f, 1.0f, 40, 0.0f},      {1.0f, 0.5f, 5, 0.05f},   {0.8f, 1.0f, 0, 0.1f},
      {2.0f, 0.95f, 1000, 0.0f}, {1.0f, 1.0f, 1, 0.0f}, {1.0f, 1.0f, 1 << 20, 0.0f}, {0.6f, 0.99f, 50, 0.02f},
  };
  for (int64_t vocab : {1, 33, 769, 5125, 151936}) {
    for (const auto& c : configs) {
      for (float scale : {1.0f, 4.0f}) {
        const int64_t rows = 8;
        std::vector<std::vector<float>> logits_rows;
        for (int64_t r = 0; r < rows; ++r) logits_rows.push_back(awkward_logits(rng, vocab, scale));
        std::vector<std::vector<float>> weights;
        for (const auto& l : logits_rows) weights.push_back(ops::ref::sample_weights(l, c));
        Tensor logits = upload_rows(logits_rows, vocab, 1);
        Tensor ids = Tensor::zeros({rows}, DType::i32, Device::cuda);
        int mismatches = 0, draws = 0;
        const int calls = vocab > 10000 ? 5 : 25;
        for (int call = 0; call < calls; ++call) {
          std::vector<double> u(static_cast<size_t>(rows));
          for (double& x : u) x = std::uniform_real_distribution<double>(0.0, 1.0)(stream);
          ops::sample_rows(logits, c, u, ids);
          const auto got = download(ids);
          for (int64_t r = 0; r < rows; ++r, ++draws) {
            const int32_t want = ops::ref::draw_row(weights[static_cast<size_t>(r)], u[static_cast<size_t>(r)]);
            if (got[static_cast<size_t>(r)] != want) ++mismatches;
            ASSERT_GE(got[static_cast<size_t>(r)], 0);
            ASSERT_LT(got[static_cast<size_t>(r)], vocab);
          }
        }
        EXPECT_LE(mismatches, std::max(1, draws / 100)) << "vocab " << vocab << " T " << c.temperature << " top_p " << c.top_p << " top_k "
                                                        << c.top_k << " min_p " << c.min_p << " scale " << scale;
      }
    }
  }
}

// Top-p at temperature > 0: device draws with the Sampler's own uniform stream are the Sampler's
// draws, and their frequencies pass a chi-square test against its probabilities.
TEST_F(CudaSampling, top_p_draws_follow_the_host_sampler) {
  for (int64_t vocab : {1000, 151936}) {
    std::mt19937_64 gen(77);
    std::vector<float> logits(static_cast<size_t>(vocab));
    // Spread enough that top-p keeps hundreds of ids at either size.
    const float scale = vocab < 10000 ? 1.0f : 3.0f;
    for (float& x : logits) x = std::normal_distribution<float>(0.0f, scale)(gen);
    SamplingParams sp;
    sp.temperature = 0.8f;
    sp.top_p = 0.9f;
    sp.seed = 5;
    Sampler host(sp), stream(sp);  // stream: the uniforms host.sample() would draw with
    std::vector<float> copy = logits;
    const std::vector<float> p = host.probabilities(copy, RecentTokens());
    // Sampler::draw_at over p, as a search of its running sums (the same sums, in the same order).
    std::vector<double> running(p.size());
    double acc = 0.0;
    for (size_t i = 0; i < p.size(); ++i) running[i] = acc += p[i] > 0.0f ? p[i] : 0.0f;
    auto host_draw = [&](double u) {
      const auto it = std::upper_bound(running.begin(), running.end(), u * acc);
      return static_cast<int32_t>(it == running.end()
                                      ? std::find_if(p.rbegin(), p.rend(), [](float x) { return x > 0.0f; }).base() - p.begin() - 1
                                      : it - running.begin());
    };
    const int64_t rows = ops::kMaxSampleRows;
    Tensor on_gpu = upload_rows(std::vector<std::vector<float>>(static_cast<size_t>(rows), logits), vocab, 0);
    Tensor ids = Tensor::zeros({rows}, DType::i32, Device::cuda);
    const ops::RowSampling rs{sp.temperature, sp.top_p, sp.top_k, sp.min_p};
    const int calls = 320;  // 20480 draws
    std::vector<int64_t> counts(static_cast<size_t>(vocab), 0);
    int same = 0, outside = 0;
    for (int call = 0; call < calls; ++call) {
      std::vector<double> u(static_cast<size_t>(rows));
      for (double& x : u) x = stream.uniform();
      ops::sample_rows(on_gpu, rs, u, ids);
      const auto got = download(ids);
      for (size_t r = 0; r < got.size(); ++r) {
        const int32_t t = got[r];
        same += host_draw(u[r]) == t;
        outside += p[static_cast<size_t>(t)] <= 0.0f;
        ++counts[static_cast<size_t>(t)];
      }
    }
    const int64_t n = calls * rows;
    EXPECT_GE(same, n - n / 1000) << "vocab " << vocab;  // identical draws but for boundary rounding
    EXPECT_EQ(outside, 0) << "vocab " << vocab;
    // Pearson chi-square over the kept ids, those expecting fewer than 5 draws pooled into one cell.
    double chi2 = 0.0, pooled_expect = 0.0;
    int64_t pooled_count = 0, cells = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      const double e = static_cast<double>(p[static_cast<size_t>(i)]) * static_cast<double>(n);
      if (e <= 0.0) continue;
      if (e < 5.0) {
        pooled_expect += e;
        pooled_count += counts[static_cast<size_t>(i)];
        continue;
      }
      const double d = static_cast<double>(counts[static_cast<size_t>(i)]) - e;
      chi2 += d * d / e;
      ++cells;
    }
    if (pooled_expect > 0.0) {
      const double d = static_cast<double>(pooled_count) - pooled_expect;
      chi2 += d * d / pooled_expect;
      ++cells;
    }
    ASSERT_GE(cells, 50) << "vocab " << vocab << ": too few cells for the test to mean anything";
    const double df = static_cast<double>(cells - 1);
    // Mean df, standard deviation sqrt(2 df): 6 deviations above is a false alarm rate far below 1e-6.
    EXPECT_LT(chi2, df + 6.0 * std::sqrt(2.0 * df)) << "vocab " << vocab << " cells " << cells;
    std::printf("vocab %lld: %lld draws, %d identical to the host sampler, chi2 %.1f on %.0f df\n", static_cast<long long>(vocab),
                static_cast<long long>(n), same, chi2, df);
  }
}

// Allowed-token masks (a grammar's): the kinds a constrained decode meets, each row's mask built over
// `words` u32 words (bit i % 32 of word i / 32: id i allowed). far_below also lowers the allowed ids'
// logits far under the forbidden ones', so that a pick that ignored the mask could not look right.
enum class MaskKind { sparse, single, all, none, far_below, dense };
constexpr MaskKind kMaskKinds[] = {MaskKind::sparse, MaskKind::single, MaskKind::all, MaskKind::none, MaskKind::far_below, MaskKind::dense};

std::vector<uint32_t> make_mask(Rng& rng, MaskKind kind, int64_t vocab, int64_t words, std::vector<float>& logits) {
  std::vector<uint32_t> m(static_cast<size_t>(words), 0u);
  auto allow = [&](int64_t i) {
    if (i / 32 < words) m[static_cast<size_t>(i / 32)] |= 1u << (i % 32);
  };
  switch (kind) {
    case MaskKind::sparse:  // a JSON state: a few hundred ids of the vocabulary
      for (int k = 0; k < 300; ++k) allow(rng.integer(0, vocab - 1));
      break;
    case MaskKind::single: allow(rng.integer(0, vocab - 1)); break;
    case MaskKind::all: std::fill(m.begin(), m.end(), ~0u); break;
    case MaskKind::none: break;
    case MaskKind::far_below:
      for (int k = 0; k < 200; ++k) {
        const int64_t i = rng.integer(0, vocab - 1);
        allow(i);
        logits[static_cast<size_t>(i)] = rng.normal() - 60.0f;
      }
      break;
    case MaskKind::dense:
      for (uint32_t& w : m) w = static_cast<uint32_t>(rng.integer(0, UINT32_MAX));
      break;
  }
  return m;
}

// One call's rows, a row of every mask kind (twice: the second with the awkward values), their masks
// as a (rows, words) u32 tensor on the GPU, and each row as the host's mask_row leaves it.
struct MaskedRows {
  std::vector<std::vector<float>> logits, masked;
  Tensor allowed;
};
MaskedRows masked_rows(Rng& rng, int64_t vocab, int64_t words, float scale) {
  MaskedRows out;
  Tensor allowed = Tensor::zeros({2 * static_cast<int64_t>(std::size(kMaskKinds)), words}, DType::u32);
  int64_t r = 0;
  for (int copy = 0; copy < 2; ++copy)
    for (MaskKind kind : kMaskKinds) {
      std::vector<float> l = copy == 0 ? std::vector<float>(static_cast<size_t>(vocab)) : awkward_logits(rng, vocab, scale);
      if (copy == 0)
        for (float& x : l) x = rng.normal() * scale;
      const std::vector<uint32_t> m = make_mask(rng, kind, vocab, words, l);
      std::copy(m.begin(), m.end(), allowed.data<uint32_t>() + r * words);
      std::vector<float> masked = l;
      ops::ref::mask_row(masked, m);
      out.logits.push_back(std::move(l));
      out.masked.push_back(std::move(masked));
      ++r;
    }
  out.allowed = test::gpu(allowed);
  return out;
}

// The mask's words cover the vocabulary exactly, past it, or short of it (the last ids never allowed).
std::vector<int64_t> word_counts(int64_t vocab) {
  const int64_t exact = (vocab + 31) / 32;
  std::vector<int64_t> w = {exact, exact + 2};
  if (exact > 1) w.push_back(exact - 1);
  return w;
}

TEST_F(CudaSampling, masked_argmax_is_the_host_argmax_of_the_masked_row) {
  Rng rng(31);
  SCOPED_TRACE(test::seed_note());
  for (int64_t vocab : {int64_t{1}, int64_t{33}, int64_t{1000 + 7}, int64_t{4096}, int64_t{151936}, int64_t{248320}}) {
    for (int64_t words : word_counts(vocab)) {
      const MaskedRows rows = masked_rows(rng, vocab, words, 2.0f);
      Tensor logits = upload_rows(rows.logits, vocab, 3);
      Tensor ids = Tensor::zeros({static_cast<int64_t>(rows.logits.size())}, DType::i32, Device::cuda);
      ops::argmax_rows(logits, ids, rows.allowed);
      const auto got = download(ids);
      for (size_t r = 0; r < got.size(); ++r)
        EXPECT_EQ(got[r], argmax(rows.masked[r])) << "vocab " << vocab << " words " << words << " row " << r;
    }
  }
}

// Seeded sampling under masks: the device's draws at given uniforms against the scalar twin's on the
// masked row (the host path: mask_row, then the Sampler), and never a token the mask leaves out.
TEST_F(CudaSampling, masked_sampling_draws_what_the_reference_draws_on_the_masked_row) {
  Rng rng(32);
  SCOPED_TRACE(test::seed_note());
  std::mt19937_64 stream(test::test_seed());
  const ops::RowSampling configs[] = {{1.0f, 1.0f, 0, 0.0f}, {0.7f, 0.9f, 0, 0.0f}, {1.3f, 1.0f, 40, 0.0f},      {1.0f, 0.5f, 5, 0.05f},
                                      {0.8f, 1.0f, 0, 0.1f}, {1.0f, 1.0f, 1, 0.0f}, {1.0f, 1.0f, 1 << 20, 0.0f}, {0.6f, 0.99f, 50, 0.02f}};
  for (int64_t vocab : {int64_t{33}, int64_t{1000 + 7}, int64_t{151936}, int64_t{248320}}) {
    for (int64_t words : word_counts(vocab)) {
      const MaskedRows rows = masked_rows(rng, vocab, words, vocab > 10000 ? 3.0f : 1.5f);
      const int64_t n = static_cast<int64_t>(rows.logits.size());
      Tensor logits = upload_rows(rows.logits, vocab, 1);
      Tensor ids = Tensor::zeros({n}, DType::i32, Device::cuda);
      for (const auto& c : configs) {
        std::vector<std::vector<float>> weights;
        for (const auto& m : rows.masked) weights.push_back(ops::ref::sample_weights(m, c));
        int mismatches = 0, draws = 0, forbidden = 0;
        const int calls = vocab > 10000 ? 3 : 10;
        for (int call = 0; call < calls; ++call) {
          std::vector<double> u(static_cast<size_t>(n));
          for (double& x : u) x = std::uniform_real_distribution<double>(0.0, 1.0)(stream);
          ops::sample_rows(logits, c, u, ids, rows.allowed);
          const auto got = download(ids);
          for (size_t r = 0; r < got.size(); ++r, ++draws) {
            mismatches += got[r] != ops::ref::draw_row(weights[r], u[r]);
            const bool any_allowed = std::any_of(rows.masked[r].begin(), rows.masked[r].end(), [](float x) { return x > -INFINITY; });
            forbidden += any_allowed && !(rows.masked[r][static_cast<size_t>(got[r])] > -INFINITY);
            if (!any_allowed) {
              EXPECT_EQ(got[r], 0) << "nothing allowed: token 0, row " << r;
            }
          }
        }
        const std::string where = "vocab " + std::to_string(vocab) + " words " + std::to_string(words) + " T " +
                                  std::to_string(c.temperature) + " top_p " + std::to_string(c.top_p) + " top_k " +
                                  std::to_string(c.top_k) + " min_p " + std::to_string(c.min_p);
        EXPECT_EQ(forbidden, 0) << where;
        EXPECT_LE(mismatches, std::max(1, draws / 100)) << where;
      }
    }
  }
}

// What a decode step pays for its token at a production vocabulary: the device pick (ids back)
// against copying the row to the host and sampling there. Printed, not asserted.
TEST_F(CudaSampling, timing_at_vocab_248320) {
  const int64_t vocab = 248320;
  Rng rng(23);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (float& x : row) x = rng.normal() * 3.0f;
  Tensor logits = upload_rows({row}, vocab, 0);
  Tensor ids = Tensor::zeros({1}, DType::i32, Device::cuda);
  std::vector<float> host_row(static_cast<size_t>(vocab));
  auto time_us = [](auto&& body) {
    body();
    device_memory::cuda_synchronize();
    const int reps = 20;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) body();
    device_memory::cuda_synchronize();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  const double u[1] = {0.37};
  auto device = [&](const ops::RowSampling* s) {
    return time_us([&] {
      if (s) ops::sample_rows(logits, *s, u, ids);
      else ops::argmax_rows(logits, ids);
      int32_t id = 0;
      device_memory::cuda_copy(&id, ids.raw(), sizeof(id), device_memory::CopyKind::device_to_host);
    });
  };
  auto on_host = [&](const SamplingParams* s) {
    return time_us([&] {
      device_memory::cuda_copy(host_row.data(), logits.raw(), host_row.size() * sizeof(float), device_memory::CopyKind::device_to_host);
      if (s) {
        Sampler sampler(*s);
        sampler.sample(host_row, RecentTokens());
      } else {
        argmax(host_row);
      }
    });
  };
  struct Case {
    const char* name;
    ops::RowSampling rs;
  } cases[] = {{"T=1", {1.0f, 1.0f, 0, 0.0f}},
               {"T=0.8 top_p=0.9", {0.8f, 0.9f, 0, 0.0f}},
               {"T=0.7 top_k=40 top_p=0.95", {0.7f, 0.95f, 40, 0.0f}},
               {"T=1 min_p=0.05", {1.0f, 1.0f, 0, 0.05f}}};
  std::printf("vocab %lld, one row, us per token (device pick + 4-byte copy | row copy + host pick):\n", static_cast<long long>(vocab));
  std::printf("  greedy: %.1f | %.1f\n", device(nullptr), on_host(nullptr));
  for (const auto& c : cases) {
    SamplingParams sp;
    sp.temperature = c.rs.temperature;
    sp.top_p = c.rs.top_p;
    sp.top_k = c.rs.top_k;
    sp.min_p = c.rs.min_p;
    std::printf("  %s: %.1f | %.1f\n", c.name, device(&c.rs), on_host(&sp));
  }
}

// feed_pick against its host twin; then a run of picks, each fed back into the step buffer as
// chained decode steps do, read back through queued copies after the whole run was queued.
TEST_F(CudaSampling, feed_pick_and_queued_copies_carry_a_run_of_picks) {
  auto i32 = [](std::vector<int32_t> v) {
    Tensor t = Tensor::zeros({static_cast<int64_t>(v.size())}, DType::i32);
    std::copy(v.begin(), v.end(), t.data<int32_t>());
    return t;
  };
  auto values = [](const Tensor& t) {
    const Tensor h = t.to(Device::cpu);
    return std::vector<int32_t>(h.data<int32_t>(), h.data<int32_t>() + h.dim(0));
  };
  const Tensor host_picked = i32({412, 7});
  Tensor host_step = i32({3, 41});
  Tensor step = host_step.to(Device::cuda);
  ops::feed_pick(host_picked, host_step);
  ops::feed_pick(host_picked.to(Device::cuda), step);
  EXPECT_EQ(values(host_step), (std::vector<int32_t>{412, 42}));
  EXPECT_EQ(values(step), values(host_step));

  Rng rng(91);
  const int64_t vocab = 1000;
  const int steps = 12;
  std::vector<Tensor> rows;
  std::vector<int32_t> expected;
  for (int i = 0; i < steps; ++i) {
    std::vector<float> row(static_cast<size_t>(vocab));
    for (float& x : row) x = rng.normal();
    expected.push_back(static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
    Tensor t = Tensor::zeros({1, vocab}, DType::f32);
    std::copy(row.begin(), row.end(), t.data<float>());
    rows.push_back(t.to(Device::cuda));
  }
  Tensor ids = Tensor::zeros({1}, DType::i32, Device::cuda);
  step = i32({5, 0}).to(Device::cuda);
  std::vector<uint64_t> tickets;
  for (int i = 0; i < steps; ++i) {
    ops::argmax_rows(rows[static_cast<size_t>(i)], ids);
    ops::feed_pick(ids, step);
    tickets.push_back(device_memory::queue_copy_to_host(ids.raw(), sizeof(int32_t)));
  }
  // Only the last kPendingCopies tickets are still held; the earlier ones were dropped.
  for (size_t i = 0; i < tickets.size(); ++i) {
    int32_t got = -1;
    if (i + device_memory::kPendingCopies < tickets.size()) {
      EXPECT_THROW(device_memory::collect_copy(tickets[i], &got, sizeof(got)), Error) << "ticket " << i;
    } else {
      device_memory::collect_copy(tickets[i], &got, sizeof(got));
      EXPECT_EQ(got, expected[i]) << "step " << i;
    }
  }
  int32_t again = 0;
  EXPECT_THROW(device_memory::collect_copy(tickets.back(), &again, sizeof(again)), Error);  // collected already
  EXPECT_EQ(values(step), (std::vector<int32_t>{expected.back(), steps}));
}

}  // namespace
}  // namespace sanctum

// A CPU KV cache grows in place inside reserved address space: these tests fail if growing ever
// copies or moves rows that fit the reservation, loses or changes a stored byte (every dtype), grows
// past whole blocks (what bytes() and the memory plan count), or breaks copy-on-write sharing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "model/state.h"
#include "ops/kv_cache_ops.h"

namespace sanctum {
namespace {

constexpr int64_t kHeads = 2, kHeadDim = 40;  // 40: a last quantization block shorter than 32

int64_t whole_blocks(int64_t rows) { return (rows + KvCache::kBlockTokens - 1) / KvCache::kBlockTokens * KvCache::kBlockTokens; }

// (end - begin, kHeads * kHeadDim) f32 rows, each different, with a spread that varies per block.
Tensor source_rows(int64_t begin, int64_t end, float seed) {
  Tensor t = Tensor::zeros({end - begin, kHeads * kHeadDim}, DType::f32);
  float* p = t.data<float>();
  for (int64_t r = begin; r < end; ++r)
    for (int64_t c = 0; c < kHeads * kHeadDim; ++c)
      *p++ = std::sin(seed + 0.37f * static_cast<float>(r) + 0.11f * static_cast<float>(c)) * static_cast<float>(1 + c % 5);
  return t;
}

void store(const Tensor& src, const ops::KvRows& dst, int64_t row0) {
  std::vector<int32_t> positions(static_cast<size_t>(src.dim(0)));
  std::iota(positions.begin(), positions.end(), static_cast<int32_t>(row0));
  ops::store_kv_rows(src, dst, ops::Positions{positions});
}

// Appends rows [length, end) to layer 0 the way a model forward does: keys from `seed`, values
// from seed + 1.
void append(SequenceState& s, int64_t end, float seed) {
  const int64_t begin = s.length();
  KvCache& c = s.kv(0);
  c.reserve(end);
  store(source_rows(begin, end, seed), c.key_rows(0, c.capacity()), begin);
  store(source_rows(begin, end, seed + 1), c.value_rows(0, c.capacity()), begin);
  s.advance(end - begin);
}

// What a cache of `dtype` holds after rows [begin, end) were stored from `seed`, written the same way
// into storage that never grows.
struct Expected {
  ops::KvRows k, v;
  Expected(ops::KvCacheDtype dtype, int64_t rows)
      : k(ops::KvRows::zeros(rows, kHeads, kHeadDim, ops::key_format(dtype), Device::cpu)),
        v(ops::KvRows::zeros(rows, kHeads, kHeadDim, ops::value_format(dtype), Device::cpu)) {}
  void add(int64_t begin, int64_t end, float seed) {
    store(source_rows(begin, end, seed), k, begin);
    store(source_rows(begin, end, seed + 1), v, begin);
  }
};

bool same_rows(const ops::KvRows& a, const ops::KvRows& b, int64_t begin, int64_t end) {
  auto same = [&](const Tensor& x, const Tensor& y) {
    if (!x || !y) return !x && !y;
    const Tensor xs = x.slice(0, begin, end), ys = y.slice(0, begin, end);
    return xs.nbytes() == ys.nbytes() && std::memcmp(xs.raw(), ys.raw(), xs.nbytes()) == 0;
  };
  return same(a.data, b.data) && same(a.scales, b.scales);
}

bool holds(const KvCache& c, const Expected& e, int64_t begin, int64_t end) {
  return same_rows(c.keys(end), e.k, begin, end) && same_rows(c.values(end), e.v, begin, end);
}

SequenceState state_of(ops::KvCacheDtype dtype, int64_t reserve_tokens) {
  std::vector<KvCache> kv;
  kv.emplace_back(kHeads, kHeadDim, Device::cpu, dtype, reserve_tokens);
  return SequenceState(std::move(kv), std::vector<LinearAttentionState>(1));
}

class KvCacheGrowth : public ::testing::TestWithParam<ops::KvCacheDtype> {};

TEST_P(KvCacheGrowth, growing_across_many_blocks_keeps_every_row_in_place_and_commits_whole_blocks) {
  const ops::KvCacheDtype dtype = GetParam();
  SequenceState s = state_of(dtype, 4096);
  Expected want(dtype, 3000);
  append(s, 1, 0.0f);
  want.add(0, 1, 0.0f);
  const void* id = s.kv(0).storage_id();
  const void* keys = s.kv(0).keys(0).data.raw();
  const void* values = s.kv(0).values(0).data.raw();
  for (int64_t begin = 1; begin < 3000; begin += 37) {
    const int64_t end = std::min<int64_t>(begin + 37, 3000);
    append(s, end, 0.0f);
    want.add(begin, end, 0.0f);
    const KvCache& c = s.kv(0);
    ASSERT_EQ(c.storage_id(), id) << "moved at " << end << " rows";
    ASSERT_EQ(c.keys(0).data.raw(), keys);
    ASSERT_EQ(c.values(0).data.raw(), values);
    ASSERT_EQ(c.capacity(), whole_blocks(end));
    ASSERT_EQ(c.bytes(), static_cast<size_t>(c.capacity()) * KvCache::bytes_per_token(kHeads, kHeadDim, dtype));
  }
  const KvCache& c = s.kv(0);
  EXPECT_TRUE(holds(c, want, 0, 3000));
  // Rows grown into but never written read as zero, as in a freshly allocated cache.
  const Expected zeros(dtype, c.capacity());
  EXPECT_TRUE(same_rows(c.keys(c.capacity()), zeros.k, 3000, c.capacity()));
  EXPECT_TRUE(same_rows(c.values(c.capacity()), zeros.v, 3000, c.capacity()));
}

TEST_P(KvCacheGrowth, growing_past_the_reservation_moves_the_rows_rarely_and_keeps_them) {
  const ops::KvCacheDtype dtype = GetParam();
  SequenceState s = state_of(dtype, 512);
  Expected want(dtype, 2048);
  int moves = 0;
  const void* id = nullptr;
  for (int64_t begin = 0; begin < 2048; begin += 100) {
    const int64_t end = std::min<int64_t>(begin + 100, 2048);
    append(s, end, 3.0f);
    want.add(begin, end, 3.0f);
    if (id != nullptr && s.kv(0).storage_id() != id) ++moves;
    id = s.kv(0).storage_id();
    ASSERT_EQ(s.kv(0).capacity(), whole_blocks(end));
    ASSERT_TRUE(holds(s.kv(0), want, 0, end)) << "after growing to " << end << " rows";
  }
  // Each move leaves room for half again as many rows: 768, 1024, 1536, 2304; never one per block.
  EXPECT_GE(moves, 1);
  EXPECT_LE(moves, 4);
}

TEST_P(KvCacheGrowth, a_writer_outgrowing_storage_a_snapshot_shares_copies_once_and_the_snapshot_keeps_its_rows) {
  const ops::KvCacheDtype dtype = GetParam();
  SequenceState s = state_of(dtype, 4096);
  Expected want(dtype, 2000);
  append(s, 700, 1.0f);
  want.add(0, 700, 1.0f);
  auto snap = s.snapshot();
  const void* shared = s.kv(0).storage_id();
  const size_t snapshot_bytes = s.kv(0).bytes();
  append(s, 760, 1.0f);  // within the capacity, above every snapshot: in place
  want.add(700, 760, 1.0f);
  EXPECT_EQ(s.kv(0).storage_id(), shared);
  append(s, 1500, 1.0f);  // past it: the writer copies out; the snapshot's buffer keeps its size
  want.add(760, 1500, 1.0f);
  EXPECT_NE(s.kv(0).storage_id(), shared);
  const void* own = s.kv(0).storage_id();
  append(s, 2000, 1.0f);  // its own storage now: in place again
  want.add(1500, 2000, 1.0f);
  EXPECT_EQ(s.kv(0).storage_id(), own);
  EXPECT_TRUE(holds(s.kv(0), want, 0, 2000));

  SequenceState reader;
  reader.restore(*snap);
  EXPECT_EQ(reader.kv(0).storage_id(), shared);
  EXPECT_EQ(reader.kv(0).bytes(), snapshot_bytes);
  EXPECT_TRUE(holds(reader.kv(0), want, 0, 700));
  append(reader, 710, 9.0f);  // the writer left: the tail above the snapshot is free, taken in place
  EXPECT_EQ(reader.kv(0).storage_id(), shared);
  Expected reader_rows(dtype, 710);
  reader_rows.add(700, 710, 9.0f);
  EXPECT_TRUE(holds(reader.kv(0), want, 0, 700));
  EXPECT_TRUE(holds(reader.kv(0), reader_rows, 700, 710));
  SequenceState again;
  again.restore(*snap);
  EXPECT_TRUE(holds(again.kv(0), want, 0, 700));
}

TEST_P(KvCacheGrowth, a_moved_cache_keeps_its_rows_and_its_right_to_grow_in_place) {
  const ops::KvCacheDtype dtype = GetParam();
  SequenceState s = state_of(dtype, 4096);
  Expected want(dtype, 1300);
  append(s, 600, 2.0f);
  want.add(0, 600, 2.0f);
  const void* id = s.kv(0).storage_id();
  std::vector<KvCache> kv;
  kv.push_back(std::move(s.kv(0)));  // move construction
  SequenceState t(std::move(kv), std::vector<LinearAttentionState>(1));
  t.advance(600);
  append(t, 1000, 2.0f);
  want.add(600, 1000, 2.0f);
  EXPECT_EQ(t.kv(0).storage_id(), id);
  KvCache assigned;
  assigned = std::move(t.kv(0));  // move assignment
  std::vector<KvCache> kv2;
  kv2.push_back(std::move(assigned));
  SequenceState u(std::move(kv2), std::vector<LinearAttentionState>(1));
  u.advance(1000);
  append(u, 1300, 2.0f);
  want.add(1000, 1300, 2.0f);
  EXPECT_EQ(u.kv(0).storage_id(), id);
  EXPECT_TRUE(holds(u.kv(0), want, 0, 1300));
}

TEST_P(KvCacheGrowth, a_copied_cache_reads_the_same_rows_and_copies_before_it_writes) {
  const ops::KvCacheDtype dtype = GetParam();
  SequenceState s = state_of(dtype, 4096);
  Expected want(dtype, 1300);
  append(s, 600, 4.0f);
  want.add(0, 600, 4.0f);
  SequenceState copy = s;
  EXPECT_EQ(copy.kv(0).storage_id(), s.kv(0).storage_id());
  append(copy, 610, 7.0f);
  EXPECT_NE(copy.kv(0).storage_id(), s.kv(0).storage_id());
  const void* id = s.kv(0).storage_id();
  append(s, 1300, 4.0f);  // the original keeps growing in place
  want.add(600, 1300, 4.0f);
  EXPECT_EQ(s.kv(0).storage_id(), id);
  Expected copy_rows(dtype, 610);
  copy_rows.add(600, 610, 7.0f);
  EXPECT_TRUE(holds(s.kv(0), want, 0, 1300));
  EXPECT_TRUE(holds(copy.kv(0), want, 0, 600));
  EXPECT_TRUE(holds(copy.kv(0), copy_rows, 600, 610));
}

const auto kDtypes = ::testing::Values(ops::KvCacheDtype::f32, ops::KvCacheDtype::bf16, ops::KvCacheDtype::q8, ops::KvCacheDtype::q4v);
std::string dtype_name(const ::testing::TestParamInfo<ops::KvCacheDtype>& info) { return ops::kv_cache_dtype_name(info.param); }
INSTANTIATE_TEST_SUITE_P(EveryDtype, KvCacheGrowth, kDtypes, dtype_name);

// kB of a /proc/self/status line ("VmRSS", "VmHWM").
int64_t status_kib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  return -1;
}

TEST(KvCacheGrowthMemory, peak_resident_bytes_stay_at_the_cache_size_while_it_grows) {
  // 8,192 tokens of 8 f32 heads of 128: 64 MiB of K and V. Growing by copying half again would
  // peak near 140 MiB (7,168 rows copied into 10,752).
  constexpr int64_t heads = 8, dim = 128, tokens = 8192, step = KvCache::kBlockTokens;
  std::vector<KvCache> kv;
  kv.emplace_back(heads, dim, Device::cpu, ops::KvCacheDtype::f32, tokens);
  SequenceState s(std::move(kv), std::vector<LinearAttentionState>(1));
  const Tensor rows = Tensor::zeros({step, heads * dim}, DType::f32);
  std::fill_n(rows.data<float>(), step * heads * dim, 1.0f);
  std::vector<int32_t> positions(static_cast<size_t>(step));
  {
    std::ofstream reset("/proc/self/clear_refs");  // VmHWM starts again from VmRSS
    reset << "5";
  }
  const int64_t before = status_kib("VmRSS");
  ASSERT_GT(before, 0);
  ASSERT_LE(status_kib("VmHWM"), before + 1024) << "the peak could not be reset through /proc/self/clear_refs";
  for (int64_t row0 = 0; row0 < tokens; row0 += step) {
    KvCache& c = s.kv(0);
    c.reserve(row0 + step);
    std::iota(positions.begin(), positions.end(), static_cast<int32_t>(row0));
    ops::store_kv_rows(rows, c.key_rows(0, c.capacity()), ops::Positions{positions});
    ops::store_kv_rows(rows, c.value_rows(0, c.capacity()), ops::Positions{positions});
    s.advance(step);
  }
  const int64_t cache_kib = 64 << 10, grown = status_kib("VmRSS") - before, peak = status_kib("VmHWM") - before;
  EXPECT_GE(grown, cache_kib - 1024);  // the probe sees the cache
  EXPECT_LE(peak, cache_kib + (8 << 10)) << "peak " << peak << " KiB over the cache's " << cache_kib;
}

}  // namespace
}  // namespace sanctum

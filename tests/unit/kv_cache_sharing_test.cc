// KV rows are shared copy-on-write between a sequence, its snapshots and the states restored from
// them. These tests write through every kind of handle and check that no other handle's rows
// change: they fail if a write ever lands in storage that a snapshot or another request reads. Each
// runs for every KV cache dtype: the sharing logic must not depend on the stored format. CMake runs
// them again with SANCTUM_TUNE=kv_shared_pages=0: storage copied instead of pages shared.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "base/tuning.h"
#include "engine/prefix_cache.h"
#include "model/state.h"
#include "ops/kv_cache_ops.h"
#include "ops/ref/kv_cache.h"
#include "tensor/device_memory.h"
#include "tensor/host_rows.h"

namespace sanctum {
namespace {

// Caches made during a test take its dtype (KvCache's default is the process-wide setting).
class KvCacheSharing : public ::testing::TestWithParam<ops::KvCacheDtype> {
 protected:
  void SetUp() override { ops::set_kv_cache_dtype(GetParam()); }
  void TearDown() override { ops::set_kv_cache_dtype(ops::KvCacheDtype::f32); }
  const Tuning tuning_ = Tuning::from_environment();
  const ScopedTuning scoped_{tuning_};
};
using PrefixCachePool = KvCacheSharing;

SequenceState attention_state() { return SequenceState(std::vector<KvCache>(1, KvCache(1, 2)), std::vector<LinearAttentionState>(1)); }

// Appends one token whose K and V rows hold `value`, the way a model forward does.
void append(SequenceState& s, float value) {
  const int64_t row = s.length();
  s.kv(0).reserve(row + 1);
  const Tensor rows = Tensor::zeros({1, 2}, DType::f32);
  rows.data<float>()[0] = rows.data<float>()[1] = value;
  const int32_t position = static_cast<int32_t>(row);
  const ops::Positions at{std::span<const int32_t>(&position, 1)};
  ops::store_kv_rows(rows, s.kv(0).key_rows(0, s.kv(0).capacity()), at);
  ops::store_kv_rows(rows, s.kv(0).value_rows(0, s.kv(0).capacity()), at);
  s.advance(1);
}

// Key row `row` (its first value) of the n rows a handle holds, as stored.
float key_at(const KvCache& c, int64_t n, int64_t row) { return ops::ref::dequantize_kv(c.keys(n)).data<float>()[row * 2]; }

// The stored value of `value`: exact for f32 and for these small integers in bf16; q8 keeps it to
// half a step of 1/127 of itself.
bool holds(float got, float value) { return std::fabs(got - value) <= std::fabs(value) / 127.0f; }

// The memory a state's buffers hold, shared buffers once: what the prompt cache counts (whole pages,
// so for these one-head caches more than KvCache::bytes()).
size_t held_bytes(const SequenceState& s) {
  std::unordered_map<const void*, size_t> buffers;
  s.for_each_buffer([&](const void* id, size_t bytes) { buffers[id] = bytes; });
  size_t sum = 0;
  for (const auto& [id, bytes] : buffers) sum += bytes;
  return sum;
}

std::vector<float> keys_of(const SequenceState& snap) {
  SequenceState reader;
  reader.restore(snap);
  std::vector<float> out;
  for (int64_t i = 0; i < reader.length(); ++i) out.push_back(std::round(key_at(reader.kv(0), reader.length(), i)));
  return out;
}

// The shape of a small model's layer: two kv heads of 64.
constexpr int64_t kWideHeads = 2, kWideDim = 64;
SequenceState wide_state() {
  return SequenceState(std::vector<KvCache>(1, KvCache(kWideHeads, kWideDim)), std::vector<LinearAttentionState>(1));
}
void append_wide(SequenceState& s, float value) {
  const int64_t row = s.length();
  s.kv(0).reserve(row + 1);
  const Tensor rows = Tensor::zeros({1, kWideHeads * kWideDim}, DType::f32);
  std::fill_n(rows.data<float>(), kWideHeads * kWideDim, value);
  const int32_t position = static_cast<int32_t>(row);
  const ops::Positions at{std::span<const int32_t>(&position, 1)};
  ops::store_kv_rows(rows, s.kv(0).key_rows(0, s.kv(0).capacity()), at);
  ops::store_kv_rows(rows, s.kv(0).value_rows(0, s.kv(0).capacity()), at);
  s.advance(1);
}

TEST_P(KvCacheSharing, concurrent_continuations_of_one_snapshot_hold_its_rows_once) {
  constexpr int64_t kPrompt = 1000;
  SequenceState s = wide_state();
  for (int64_t i = 0; i < kPrompt; ++i) append_wide(s, static_cast<float>(i % 100));
  const auto snap = s.snapshot();
  s = SequenceState();  // only the snapshot holds the prompt now, as in the prompt cache
  const size_t before = HostRows::allocated_bytes();
  std::vector<SequenceState> sequences(4);
  for (size_t q = 0; q < sequences.size(); ++q) {
    sequences[q].restore(*snap);
    for (int i = 0; i < 20; ++i) append_wide(sequences[q], static_cast<float>(q + 1));
  }
  for (size_t q = 0; q < sequences.size(); ++q) {
    const KvCache& kv = sequences[q].kv(0);
    const Tensor keys = ops::ref::dequantize_kv(kv.keys(kPrompt + 20));
    for (int64_t row : {int64_t{0}, int64_t{517}, kPrompt - 1})
      ASSERT_TRUE(holds(keys.data<float>()[row * kWideHeads * kWideDim], static_cast<float>(row % 100))) << "sequence " << q;
    for (int64_t row = kPrompt; row < kPrompt + 20; ++row)
      ASSERT_TRUE(holds(keys.data<float>()[row * kWideHeads * kWideDim + 5], static_cast<float>(q + 1))) << "sequence " << q;
  }
  // The first continues the snapshot's storage in place; each other one holds only its own rows
  // when pages are shared, and a copy of the prompt's when not. Counted as the prompt cache and the
  // engine count (each buffer once), and as the memory file's allocated pages.
  const size_t prompt_copy = static_cast<size_t>(kPrompt) * KvCache::bytes_per_token(kWideHeads, kWideDim, GetParam());
  std::unordered_map<const void*, size_t> buffers;
  for (const SequenceState& q : sequences) q.for_each_buffer([&](const void* id, size_t bytes) { buffers[id] = bytes; });
  size_t held = 0;
  for (const auto& [id, bytes] : buffers) held += bytes;
  if (current_tuning().on(Knob::kv_shared_pages)) {
    EXPECT_LT(held, prompt_copy + prompt_copy / 2);
    EXPECT_LT(HostRows::allocated_bytes() - before, prompt_copy / 4) << "three continuations copied the prompt's rows";
  } else {
    EXPECT_GE(held, 4 * prompt_copy);
    EXPECT_GE(HostRows::allocated_bytes() - before, 3 * prompt_copy);
  }
}

TEST_P(KvCacheSharing, snapshot_shares_rows_and_the_writer_keeps_appending_in_place) {
  SequenceState s = attention_state();
  for (float x : {1.0f, 2.0f, 3.0f}) append(s, x);
  auto snap = s.snapshot();
  SequenceState view;
  view.restore(*snap);
  EXPECT_EQ(view.kv(0).storage_id(), s.kv(0).storage_id());  // no copy taken
  append(s, 4.0f);
  EXPECT_EQ(s.kv(0).storage_id(), view.kv(0).storage_id());  // appended above the snapshot, in place
  EXPECT_EQ(keys_of(*snap), (std::vector<float>{1, 2, 3}));
}

TEST_P(KvCacheSharing, states_restored_from_one_snapshot_never_see_each_others_writes) {
  SequenceState s = attention_state();
  for (float x : {1.0f, 2.0f, 3.0f}) append(s, x);
  auto snap = s.snapshot();
  s = SequenceState();  // the original sequence ends: its writer right on the tail is released
  SequenceState a, b;
  a.restore(*snap);
  b.restore(*snap);
  append(a, 10.0f);  // takes the free tail in place
  append(b, 20.0f);  // must copy: row 3 belongs to a
  append(a, 11.0f);
  EXPECT_NE(a.kv(0).storage_id(), b.kv(0).storage_id());
  EXPECT_TRUE(holds(key_at(a.kv(0), 5, 3), 10.0f));
  EXPECT_TRUE(holds(key_at(a.kv(0), 5, 4), 11.0f));
  EXPECT_TRUE(holds(key_at(b.kv(0), 4, 3), 20.0f));
  EXPECT_EQ(keys_of(*snap), (std::vector<float>{1, 2, 3}));
}

TEST_P(KvCacheSharing, writing_below_a_snapshot_after_truncation_copies_first) {
  SequenceState s = attention_state();
  for (float x : {1.0f, 2.0f, 3.0f}) append(s, x);
  auto snap = s.snapshot();
  s.truncate(1);  // e.g. a rejected draft
  append(s, 9.0f);
  EXPECT_TRUE(holds(key_at(s.kv(0), 2, 1), 9.0f));
  EXPECT_EQ(keys_of(*snap), (std::vector<float>{1, 2, 3}));
}

TEST_P(KvCacheSharing, a_copied_state_is_unaffected_by_the_original) {
  SequenceState s = attention_state();
  for (float x : {1.0f, 2.0f}) append(s, x);
  SequenceState copy = s;
  s.truncate(1);
  append(s, 7.0f);
  append(s, 8.0f);
  EXPECT_TRUE(holds(key_at(copy.kv(0), 2, 1), 2.0f));
}

TEST_P(KvCacheSharing, writing_shared_rows_without_reserve_is_refused) {
  SequenceState s = attention_state();
  append(s, 1.0f);
  auto snap = s.snapshot();
  SequenceState other;
  other.restore(*snap);
  EXPECT_THROW(other.kv(0).key_rows(1, 2), Error);
}

TEST_P(KvCacheSharing, storage_no_longer_shared_is_written_in_place_again) {
  SequenceState s = attention_state();
  for (float x : {1.0f, 2.0f, 3.0f}) append(s, x);
  const void* id = s.kv(0).storage_id();
  { auto snap = s.snapshot(); }  // dropped at once
  s.truncate(1);
  append(s, 5.0f);
  EXPECT_EQ(s.kv(0).storage_id(), id);
}

TEST_P(PrefixCachePool, counts_storage_shared_by_several_snapshots_once) {
  SequenceState s = attention_state();
  std::vector<int32_t> tokens;
  PrefixCache pool(64 << 20);
  for (int turn = 0; turn < 4; ++turn) {  // one growing conversation: four snapshots, one buffer
    for (int i = 0; i < 8; ++i) {
      tokens.push_back(static_cast<int32_t>(tokens.size()));
      append(s, static_cast<float>(tokens.size()));
    }
    pool.store(tokens, s);
  }
  const PrefixCacheStats st = pool.stats();
  EXPECT_EQ(st.entries, 4u);
  EXPECT_EQ(st.bytes, held_bytes(s));
  EXPECT_EQ(st.shared_bytes, 3 * held_bytes(s));
}

TEST_P(PrefixCachePool, evicting_a_sharer_keeps_the_buffer_until_the_last_one_goes) {
  SequenceState s = attention_state();
  std::vector<int32_t> tokens;
  const size_t buffer = [] {
    SequenceState t = attention_state();
    append(t, 0.0f);
    return held_bytes(t);
  }();
  PrefixCache pool(buffer);  // room for exactly one buffer
  for (int turn = 0; turn < 3; ++turn) {
    tokens.push_back(turn);
    append(s, static_cast<float>(turn));
    pool.store(tokens, s);
  }
  EXPECT_EQ(pool.stats().entries, 3u);  // all share the one buffer: nothing had to go
  EXPECT_EQ(pool.stats().bytes, buffer);
  SequenceState other = attention_state();
  append(other, 5.0f);
  pool.store(std::vector<int32_t>{99}, other);  // a second buffer: the three older entries go
  EXPECT_EQ(pool.stats().entries, 1u);
  EXPECT_EQ(pool.stats().bytes, buffer);
}

// What admission and the memory plan read: CPU caches commit 256-row blocks and map shared pages
// unless the knob says copy; a GPU cache maps granules only where a GPU offers them.
TEST_P(KvCacheSharing, commit_unit_and_mapping_follow_the_device_and_the_knob) {
  EXPECT_EQ(KvCache::commit_rows(kWideHeads, kWideDim, Device::cpu, GetParam()), KvCache::kBlockTokens);
  EXPECT_EQ(KvCache::maps_shared_rows(kWideHeads, kWideDim, Device::cpu, GetParam()),
            current_tuning().on(Knob::kv_shared_pages) && HostRows::available());
  Tuning copied = current_tuning();
  copied.set(Knob::kv_shared_pages, false);
  const ScopedTuning use(copied);
  EXPECT_FALSE(KvCache::maps_shared_rows(kWideHeads, kWideDim, Device::cpu, GetParam()));
  EXPECT_FALSE(KvCache::maps_shared_rows(kWideHeads, kWideDim, Device::cuda, GetParam()));
  EXPECT_EQ(KvCache::commit_rows(kWideHeads, kWideDim, Device::cuda, GetParam()), KvCache::kBlockTokens);
  if (!device_memory::cuda_available()) {
    const ScopedTuning mapped(tuning_);
    EXPECT_FALSE(KvCache::maps_shared_rows(kWideHeads, kWideDim, Device::cuda, GetParam())) << "no GPU: nothing to map";
  }
}

const auto kDtypes = ::testing::Values(ops::KvCacheDtype::f32, ops::KvCacheDtype::bf16, ops::KvCacheDtype::q8, ops::KvCacheDtype::q4v);
std::string dtype_name(const ::testing::TestParamInfo<ops::KvCacheDtype>& info) { return ops::kv_cache_dtype_name(info.param); }
INSTANTIATE_TEST_SUITE_P(EveryDtype, KvCacheSharing, kDtypes, dtype_name);
INSTANTIATE_TEST_SUITE_P(EveryDtype, PrefixCachePool, kDtypes, dtype_name);

}  // namespace
}  // namespace sanctum

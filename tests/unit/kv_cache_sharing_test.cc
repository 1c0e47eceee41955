// KV rows are shared copy-on-write between a sequence, its snapshots and the states restored from
// them. These tests write through every kind of handle and check that no other handle's rows
// change: they fail if a write ever lands in storage that a snapshot or another request reads.
#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"
#include "engine/prefix_cache.h"
#include "model/state.h"

namespace sanctum {
namespace {

SequenceState attention_state() { return SequenceState(std::vector<KvCache>(1, KvCache(1, 2)), std::vector<LinearAttentionState>(1)); }

// Appends one token whose K and V rows hold `value`, the way a model forward does.
void append(SequenceState& s, float value) {
  const int64_t row = s.length();
  s.kv(0).reserve(row + 1);
  float* k = s.kv(0).key_rows(row, row + 1).data<float>();
  float* v = s.kv(0).value_rows(row, row + 1).data<float>();
  k[0] = k[1] = v[0] = v[1] = value;
  s.advance(1);
}

std::vector<float> keys_of(const SequenceState& snap) {
  SequenceState reader;
  reader.restore(snap);
  const Tensor k = reader.kv(0).keys(reader.length());
  std::vector<float> out;
  for (int64_t i = 0; i < reader.length(); ++i) out.push_back(k.data<float>()[i * 2]);
  return out;
}

TEST(KvCacheSharing, snapshot_shares_rows_and_the_writer_keeps_appending_in_place) {
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

TEST(KvCacheSharing, states_restored_from_one_snapshot_never_see_each_others_writes) {
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
  EXPECT_EQ(a.kv(0).keys(5).data<float>()[3 * 2], 10.0f);
  EXPECT_EQ(a.kv(0).keys(5).data<float>()[4 * 2], 11.0f);
  EXPECT_EQ(b.kv(0).keys(4).data<float>()[3 * 2], 20.0f);
  EXPECT_EQ(keys_of(*snap), (std::vector<float>{1, 2, 3}));
}

TEST(KvCacheSharing, writing_below_a_snapshot_after_truncation_copies_first) {
  SequenceState s = attention_state();
  for (float x : {1.0f, 2.0f, 3.0f}) append(s, x);
  auto snap = s.snapshot();
  s.truncate(1);  // e.g. a rejected draft
  append(s, 9.0f);
  EXPECT_EQ(s.kv(0).keys(2).data<float>()[1 * 2], 9.0f);
  EXPECT_EQ(keys_of(*snap), (std::vector<float>{1, 2, 3}));
}

TEST(KvCacheSharing, a_copied_state_is_unaffected_by_the_original) {
  SequenceState s = attention_state();
  for (float x : {1.0f, 2.0f}) append(s, x);
  SequenceState copy = s;
  s.truncate(1);
  append(s, 7.0f);
  append(s, 8.0f);
  EXPECT_EQ(copy.kv(0).keys(2).data<float>()[1 * 2], 2.0f);
}

TEST(KvCacheSharing, writing_shared_rows_without_reserve_is_refused) {
  SequenceState s = attention_state();
  append(s, 1.0f);
  auto snap = s.snapshot();
  SequenceState other;
  other.restore(*snap);
  EXPECT_THROW(other.kv(0).key_rows(1, 2), Error);
}

TEST(KvCacheSharing, storage_no_longer_shared_is_written_in_place_again) {
  SequenceState s = attention_state();
  for (float x : {1.0f, 2.0f, 3.0f}) append(s, x);
  const void* id = s.kv(0).storage_id();
  { auto snap = s.snapshot(); }  // dropped at once
  s.truncate(1);
  append(s, 5.0f);
  EXPECT_EQ(s.kv(0).storage_id(), id);
}

TEST(PrefixCachePool, counts_storage_shared_by_several_snapshots_once) {
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
  EXPECT_EQ(st.bytes, s.kv(0).bytes());
  EXPECT_EQ(st.shared_bytes, 3 * s.kv(0).bytes());
}

TEST(PrefixCachePool, evicting_a_sharer_keeps_the_buffer_until_the_last_one_goes) {
  SequenceState s = attention_state();
  std::vector<int32_t> tokens;
  const size_t buffer = [] {
    SequenceState t = attention_state();
    append(t, 0.0f);
    return t.kv(0).bytes();
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

}  // namespace
}  // namespace sanctum

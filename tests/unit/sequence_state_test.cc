#include "model/state.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace sanctum {

TEST(KvCache, grows_in_blocks_and_keeps_rows) {
  KvCache c(2, 4, Device::cpu, ops::KvCacheDtype::f32);
  c.reserve(3);
  EXPECT_EQ(c.capacity(), KvCache::kBlockTokens);
  c.key_rows(0, 3).data.data<float>()[5] = 7.0f;
  c.reserve(KvCache::kBlockTokens + 1);
  EXPECT_GE(c.capacity(), 2 * KvCache::kBlockTokens);
  EXPECT_EQ(c.keys(3).data.data<float>()[5], 7.0f);
}

TEST(SequenceState, snapshot_restore_is_exact_and_independent) {
  std::vector<KvCache> kv(2, KvCache(1, 2, Device::cpu, ops::KvCacheDtype::f32));
  SequenceState s(std::move(kv), std::vector<LinearAttentionState>(2));
  s.kv(0).reserve(4);
  s.kv(0).key_rows(0, 1).data.data<float>()[0] = 1.0f;
  s.advance(1);
  auto snap = s.snapshot();
  s.truncate(0);  // rewrite row 0 after the snapshot, the way a model forward writes
  s.kv(0).reserve(1);
  s.kv(0).key_rows(0, 1).data.data<float>()[0] = 9.0f;
  s.advance(3);
  s.restore(*snap);
  EXPECT_EQ(s.length(), 1);
  EXPECT_EQ(s.kv(0).keys(1).data.data<float>()[0], 1.0f);
  EXPECT_EQ(snap->length(), 1);
}

TEST(SequenceState, truncate_refuses_recurrent_state) {
  std::vector<LinearAttentionState> lin(1);
  lin[0].recurrent = Tensor::zeros({1, 2, 2}, DType::f32);
  SequenceState s(std::vector<KvCache>(1), std::move(lin));
  s.advance(3);
  EXPECT_THROW(s.truncate(1), Error);
  SequenceState plain(std::vector<KvCache>(1, KvCache(1, 2)), std::vector<LinearAttentionState>(1));
  plain.advance(3);
  plain.truncate(1);
  EXPECT_EQ(plain.length(), 1);
}

}  // namespace sanctum

// SequenceState carries the multimodal rotary offset (rope_delta) through every way a state is copied
// or rolled back, so text after an image keeps its positions in forks, prompt-cache restores and
// rejected drafts.
#include <gtest/gtest.h>

#include "model/state.h"

namespace sanctum {
namespace {

TEST(RopeDelta, snapshots_restores_and_rewinds_keep_it) {
  SequenceState s(std::vector<KvCache>(1, KvCache(1, 4)), std::vector<LinearAttentionState>(1));
  s.kv(0).reserve(8);
  s.advance(8);
  s.set_rope_delta(-5);
  const auto snap = s.snapshot();
  EXPECT_EQ(snap->rope_delta(), -5);
  SequenceState restored;
  restored.restore(*snap);
  EXPECT_EQ(restored.rope_delta(), -5);

  const SequenceState::Checkpoint before = s.checkpoint();
  s.set_rope_delta(-9);  // a forward with another image after the checkpoint
  s.rewind(before);
  EXPECT_EQ(s.rope_delta(), -5);
  EXPECT_EQ(SequenceState().rope_delta(), 0);
}

}  // namespace
}  // namespace sanctum

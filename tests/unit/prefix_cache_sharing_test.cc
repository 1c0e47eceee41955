// A multi-turn conversation through the prompt cache on a real hybrid model: every turn hits the
// previous turn's snapshot, the snapshots share their KV buffers instead of holding one copy each,
// and the outputs equal those of running every turn from scratch.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "engine/cached_generation.h"
#include "model/model.h"

namespace sanctum {
namespace {

const std::string kModel = std::string(SANCTUM_TEST_DATA_DIR) + "/hf_fixtures/qwen3_5_text";

TEST(PrefixCacheSharing, conversation_turns_share_kv_buffers_and_outputs_stay_exact) {
  auto model = load_model(kModel);
  const int64_t vocab = model->vocab_size();
  GenerationParams params;
  params.max_tokens = 8;
  params.ignore_eos = true;
  PrefixCache cache(size_t{256} << 20);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 150; ++i) prompt.push_back(static_cast<int32_t>((i * 7919) % vocab));
  int64_t reused_total = 0;
  for (int turn = 0; turn < 5; ++turn) {
    int64_t reused = 0;
    GenerationResult cached = generate_with_cache(*model, &cache, prompt, params, {}, &reused);
    GenerationResult fresh = generate_with_cache(*model, nullptr, prompt, params);
    EXPECT_EQ(cached.tokens, fresh.tokens) << "turn " << turn;
    if (turn > 0) {
      EXPECT_GT(reused, 0) << "turn " << turn;
    }
    reused_total += reused;
    prompt.insert(prompt.end(), cached.tokens.begin(), cached.tokens.end());
    for (int i = 0; i < 60; ++i) prompt.push_back(static_cast<int32_t>((prompt.size() * 104729) % vocab));
  }
  const PrefixCacheStats st = cache.stats();
  EXPECT_GE(st.entries, 4u);
  EXPECT_GT(st.shared_bytes, 0u);  // without sharing every snapshot would hold its own copy
  std::printf("prompt cache: %zu snapshots hold %zu bytes; deep copies would hold %zu; %lld prompt tokens reused\n", st.entries, st.bytes,
              st.bytes + st.shared_bytes, static_cast<long long>(reused_total));
}

}  // namespace
}  // namespace sanctum

// End-of-generation snapshots on hybrid models (TailSnapshot): the state rebuilt after a generation
// is bit for bit the one a prefill from scratch has at the same aligned position; the next turn of a
// conversation continues from it, past the previous prompt and most of the previous answer; work
// interrupted by a request and resumed gives the same bits; and the pool stays within its bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "engine/cached_generation.h"
#include "model/default_model.h"
#include "model/model.h"

namespace sanctum {
namespace {

const std::string kFixture = std::string(SANCTUM_TEST_DATA_DIR) + "/hf_fixtures/qwen3_5_text";

std::vector<int32_t> tokens_of(int64_t n, int64_t vocab, int64_t salt) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7919 + salt * 104729) % (vocab - 5) + 5));
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a || !b) return !a && !b;
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Every KV row and every conv/recurrent state of two states of `length` tokens, bitwise.
void expect_same_state(const SequenceState& a_snap, const SequenceState& b_snap, size_t layers) {
  SequenceState a, b;
  a.restore(a_snap);
  b.restore(b_snap);
  ASSERT_EQ(a.length(), b.length());
  const int64_t n = a.length();
  for (size_t i = 0; i < layers; ++i) {
    if (a.linear(i).recurrent) {
      EXPECT_TRUE(same_bits(a.linear(i).recurrent, b.linear(i).recurrent)) << "recurrent state, layer " << i;
      EXPECT_TRUE(same_bits(a.linear(i).conv, b.linear(i).conv)) << "conv state, layer " << i;
    } else {
      EXPECT_TRUE(same_bits(a.kv(i).keys(n).data.clone(), b.kv(i).keys(n).data.clone())) << "keys, layer " << i;
      EXPECT_TRUE(same_bits(a.kv(i).values(n).data.clone(), b.kv(i).values(n).data.clone())) << "values, layer " << i;
    }
  }
}

// What a request whose prompt is `tokens` (and longer) computes from scratch at `at`.
std::shared_ptr<const SequenceState> prefill_from_scratch(Model& model, std::vector<int32_t> tokens, int64_t at) {
  tokens.resize(static_cast<size_t>(at + 2));
  std::shared_ptr<const SequenceState> seen;
  GenerationParams params;
  params.max_tokens = 1;
  params.snapshot_at = {at};
  params.on_snapshot = [&](const SequenceState& s) { seen = s.snapshot(); };
  SequenceState state = model.new_state();
  generate(model, state, tokens, params);
  return seen;
}

GenerationParams greedy(int max_tokens) {
  GenerationParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

TEST(TailSnapshot, equals_a_prefill_from_scratch_bit_for_bit) {
  auto model = load_model(kFixture);
  const size_t layers = static_cast<size_t>(model->config().num_hidden_layers);
  // Prompts on both sides of a 128-token CPU piece and of the first aligned point; outputs that
  // cross one and several 64-token boundaries.
  for (auto [prompt_len, max_tokens] : {std::pair{40, 100}, {150, 60}, {200, 200}, {129, 64}}) {
    PrefixCache cache(size_t{64} << 20);
    const std::vector<int32_t> prompt = tokens_of(prompt_len, model->vocab_size(), prompt_len);
    std::unique_ptr<TailSnapshot> tail;
    GenerationResult r = generate_with_cache(*model, &cache, prompt, greedy(max_tokens), {}, nullptr, &tail);
    std::vector<int32_t> sequence = prompt;
    sequence.insert(sequence.end(), r.tokens.begin(), r.tokens.end());
    const int64_t target = PrefixCache::aligned_point(static_cast<int64_t>(sequence.size()));
    ASSERT_TRUE(tail) << prompt_len;
    EXPECT_EQ(tail->target(), target);
    EXPECT_EQ(tail->position(), PrefixCache::aligned_point(prompt_len));
    ASSERT_TRUE(tail->finish(*model, cache));
    EXPECT_EQ(tail->forwards(), (target - PrefixCache::aligned_point(prompt_len) + 63) / 64);

    // The pool now answers a prompt that extends the sequence from exactly that snapshot.
    std::vector<int32_t> next = sequence;
    next.push_back(7);
    next.push_back(8);
    SequenceState restored;
    ASSERT_EQ(cache.acquire(*model, next, restored), target);
    expect_same_state(*restored.snapshot(), *prefill_from_scratch(*model, sequence, target), layers);
  }
}

TEST(TailSnapshot, next_turn_continues_past_the_previous_answer_and_outputs_stay_exact) {
  for (const std::string& dir : {kFixture, default_model_dir()}) {
    auto model = load_model(dir);
    const int64_t vocab = model->vocab_size();
    for (bool speculate : {false, true}) {
      PrefixCache cache(size_t{256} << 20);
      GenerationParams params = greedy(90);
      params.speculate = speculate;
      params.lookup.always = true;
      std::vector<int32_t> prompt = tokens_of(70, vocab, 1);
      int64_t previous_end = 0;  // previous prompt + answer
      for (int turn = 0; turn < 5; ++turn) {
        int64_t reused = 0;
        std::unique_ptr<TailSnapshot> tail;
        GenerationResult cached = generate_with_cache(*model, &cache, prompt, params, {}, &reused, &tail);
        GenerationResult fresh = generate_with_cache(*model, nullptr, prompt, params);
        EXPECT_EQ(cached.tokens, fresh.tokens) << dir << " turn " << turn << " speculate " << speculate;
        if (turn > 0) {
          // Everything up to the last aligned point of the previous prompt + answer.
          EXPECT_EQ(reused, PrefixCache::aligned_point(previous_end)) << dir << " turn " << turn;
          EXPECT_GT(reused, previous_end - 64 - PrefixCache::kMinRecomputed);
        }
        if (tail) tail->finish(*model, cache);
        prompt.insert(prompt.end(), cached.tokens.begin(), cached.tokens.end());
        previous_end = static_cast<int64_t>(prompt.size());
        const auto message = tokens_of(25 + 10 * turn, vocab, 100 + turn);  // the next user or tool message
        prompt.insert(prompt.end(), message.begin(), message.end());
      }
    }
  }
}

TEST(TailSnapshot, work_paused_by_a_request_resumes_to_the_same_bits) {
  auto model = load_model(kFixture);
  const size_t layers = static_cast<size_t>(model->config().num_hidden_layers);
  const std::vector<int32_t> prompt = tokens_of(100, model->vocab_size(), 3);
  std::vector<int32_t> sequence;  // prompt + output
  auto tail_of = [&](PrefixCache& cache) {
    std::unique_ptr<TailSnapshot> tail;
    GenerationResult r = generate_with_cache(*model, &cache, prompt, greedy(250), {}, nullptr, &tail);
    sequence = prompt;
    sequence.insert(sequence.end(), r.tokens.begin(), r.tokens.end());
    return tail;
  };
  PrefixCache straight(size_t{64} << 20), paused(size_t{64} << 20);
  auto a = tail_of(straight);
  auto b = tail_of(paused);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(b->position(), 64);
  ASSERT_EQ(b->target(), 320);  // 350 tokens: four steps of 64 from 64
  ASSERT_TRUE(a->finish(*model, straight));
  EXPECT_FALSE(b->step(*model, paused));
  EXPECT_FALSE(b->step(*model, paused));
  b->pause(paused);  // a request runs here, and can continue from the stepping stone at 192
  std::vector<int32_t> next(sequence.begin(), sequence.end());
  SequenceState probe;
  EXPECT_EQ(paused.acquire(*model, next, probe), 192);
  const size_t entries = paused.stats().entries;
  EXPECT_TRUE(b->finish(*model, paused));
  EXPECT_EQ(b->forwards(), 4);
  EXPECT_EQ(paused.stats().entries, entries);  // the stepping stone gave way to the snapshot
  SequenceState sa, sb;
  ASSERT_EQ(straight.acquire(*model, next, sa), 320);
  ASSERT_EQ(paused.acquire(*model, next, sb), 320);
  expect_same_state(*sa.snapshot(), *sb.snapshot(), layers);
}

TEST(TailSnapshot, pool_stays_within_its_bytes_over_a_long_conversation) {
  auto model = load_model(kFixture);
  const int64_t vocab = model->vocab_size();
  // Room for a few snapshots only: the conversation's KV buffer plus a handful of recurrent states.
  PrefixCache probe(size_t{1} << 30);
  std::vector<int32_t> prompt = tokens_of(300, vocab, 9);
  generate_with_cache(*model, &probe, prompt, greedy(1));
  const size_t one = probe.stats().bytes;
  ASSERT_GT(one, 0u);
  const size_t budget = one * 3;
  PrefixCache cache(budget);
  int64_t reused_total = 0;
  for (int turn = 0; turn < 10; ++turn) {
    int64_t reused = 0;
    std::unique_ptr<TailSnapshot> tail;
    GenerationResult r = generate_with_cache(*model, &cache, prompt, greedy(80), {}, &reused, &tail);
    EXPECT_LE(cache.stats().bytes, budget) << "turn " << turn;
    if (tail) {
      tail->step(*model, cache);
      tail->pause(cache);  // a stepping stone goes into the pool too
      EXPECT_LE(cache.stats().bytes, budget) << "turn " << turn;
      tail->finish(*model, cache);
    }
    EXPECT_LE(cache.stats().bytes, budget) << "turn " << turn;
    EXPECT_EQ(cache.stats().bytes, cache.recount_bytes()) << "turn " << turn;
    EXPECT_GT(cache.stats().entries, 0u);
    reused_total += reused;
    prompt.insert(prompt.end(), r.tokens.begin(), r.tokens.end());
    const auto message = tokens_of(30, vocab, turn);
    prompt.insert(prompt.end(), message.begin(), message.end());
  }
  EXPECT_GT(reused_total, 0);
}

}  // namespace
}  // namespace sanctum

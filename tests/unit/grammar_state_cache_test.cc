// The whole-state mask cache: every stored mask comes back bit for bit whatever form it is kept in,
// only the exact key finds it, and the least recently used entries go once the budget is passed.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/stack_machine.h"
#include "grammar/state_mask_cache.h"
#include "grammar/vocabulary.h"

namespace sanctum::grammar {
namespace {

// 4,096 ids: every 7th has no bytes (not ordinary), id 5 ends generation.
std::shared_ptr<const Vocabulary> wide_vocab() {
  std::vector<std::string> tokens(4096);
  for (size_t id = 0; id < tokens.size(); ++id)
    if (id % 7 != 0) tokens[id] = std::to_string(id);
  return std::make_shared<const Vocabulary>(tokens, std::vector<int32_t>{5});
}

std::vector<uint32_t> mask_of(const std::vector<int32_t>& ids, size_t words) {
  std::vector<uint32_t> mask(words, 0);
  for (int32_t id : ids) mask[static_cast<size_t>(id) / 32] |= uint32_t{1} << (id % 32);
  return mask;
}

// A dense random mask: too many flips either way, so it is kept whole.
std::vector<uint32_t> random_mask(size_t words, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(words);
  for (auto& w : mask) w = static_cast<uint32_t>(rng());
  return mask;
}

TEST(StateMaskCache, every_form_returns_the_stored_mask) {
  const auto vocab = wide_vocab();
  const size_t words = vocab->mask_words();
  std::vector<uint32_t> all_but_few = vocab->ordinary_mask();
  for (int32_t id : {1, 2, 300, 4095}) all_but_few[static_cast<size_t>(id) / 32] &= ~(uint32_t{1} << (id % 32));
  all_but_few[0] |= uint32_t{1} << 5;  // the end token, which is not ordinary
  const std::vector<std::vector<uint32_t>> masks = {mask_of({}, words), mask_of({5}, words),    mask_of({1, 64, 65, 4000}, words),
                                                    all_but_few,        vocab->ordinary_mask(), random_mask(words, 1)};
  StateMaskCache cache(1 << 20);
  for (uint32_t k = 0; k < masks.size(); ++k) cache.insert(std::vector<uint32_t>{k, kRootParent}, masks[k], *vocab);
  ASSERT_EQ(cache.entries(), masks.size());
  for (uint32_t k = 0; k < masks.size(); ++k) {
    std::vector<uint32_t> out = random_mask(words, 100 + k);  // stale contents must be overwritten
    ASSERT_TRUE(cache.find(std::vector<uint32_t>{k, kRootParent}, out, *vocab)) << "mask " << k;
    EXPECT_EQ(out, masks[k]) << "mask " << k;
  }
  EXPECT_EQ(cache.hits(), masks.size());
}

TEST(StateMaskCache, sparse_masks_are_stored_smaller_than_a_bitset) {
  const auto vocab = wide_vocab();
  const size_t bitset_bytes = vocab->mask_words() * sizeof(uint32_t);
  StateMaskCache sparse(1 << 20), complement(1 << 20), dense(1 << 20);
  sparse.insert(std::vector<uint32_t>{1}, mask_of({1, 2, 3}, vocab->mask_words()), *vocab);
  complement.insert(std::vector<uint32_t>{1}, vocab->ordinary_mask(), *vocab);
  dense.insert(std::vector<uint32_t>{1}, random_mask(vocab->mask_words(), 2), *vocab);
  EXPECT_LT(sparse.bytes(), bitset_bytes / 2);
  EXPECT_LT(complement.bytes(), bitset_bytes / 2);
  EXPECT_GT(dense.bytes(), bitset_bytes);
}

TEST(StateMaskCache, only_the_exact_key_finds_an_entry) {
  const auto vocab = wide_vocab();
  StateMaskCache cache(1 << 20);
  const std::vector<uint32_t> key = {1, 10, 11, kRootParent, 12, kRootParent};
  cache.insert(key, mask_of({7}, vocab->mask_words()), *vocab);
  std::vector<uint32_t> out(vocab->mask_words());
  EXPECT_FALSE(cache.find(std::vector<uint32_t>(key.begin(), key.end() - 2), out, *vocab));  // a prefix
  std::vector<uint32_t> other = key;
  other[0] = 0;  // the same stacks without the accept flag
  EXPECT_FALSE(cache.find(other, out, *vocab));
  EXPECT_TRUE(cache.find(key, out, *vocab));
  EXPECT_EQ(cache.misses(), 2u);
}

TEST(StateMaskCache, the_least_recently_used_entries_go_past_the_budget) {
  const auto vocab = wide_vocab();
  StateMaskCache probe(1 << 20);
  probe.insert(std::vector<uint32_t>{0}, random_mask(vocab->mask_words(), 0), *vocab);
  const size_t entry = probe.bytes();
  // Room for three dense entries, not four.
  StateMaskCache cache(entry * 3 + entry / 2);
  std::vector<uint32_t> out(vocab->mask_words());
  for (uint32_t k = 0; k < 3; ++k) cache.insert(std::vector<uint32_t>{k}, random_mask(vocab->mask_words(), k), *vocab);
  ASSERT_EQ(cache.entries(), 3u);
  ASSERT_TRUE(cache.find(std::vector<uint32_t>{0}, out, *vocab));  // 0 is now the most recent; 1 the oldest
  cache.insert(std::vector<uint32_t>{3}, random_mask(vocab->mask_words(), 3), *vocab);
  EXPECT_EQ(cache.entries(), 3u);
  EXPECT_LE(cache.bytes(), cache.budget_bytes());
  EXPECT_FALSE(cache.find(std::vector<uint32_t>{1}, out, *vocab));
  for (uint32_t k : {0u, 2u, 3u}) {
    ASSERT_TRUE(cache.find(std::vector<uint32_t>{k}, out, *vocab)) << k;
    EXPECT_EQ(out, random_mask(vocab->mask_words(), k)) << k;
  }
}

TEST(StateMaskCache, a_zero_budget_or_an_overlong_key_stores_nothing) {
  const auto vocab = wide_vocab();
  const auto mask = mask_of({1}, vocab->mask_words());
  std::vector<uint32_t> out(vocab->mask_words());
  StateMaskCache off(0);
  off.insert(std::vector<uint32_t>{1}, mask, *vocab);
  EXPECT_FALSE(off.find(std::vector<uint32_t>{1}, out, *vocab));
  EXPECT_EQ(off.entries(), 0u);
  StateMaskCache cache(1 << 20);
  const std::vector<uint32_t> long_key(StateMaskCache::kMaxKeyWords + 1, 3);
  cache.insert(long_key, mask, *vocab);
  EXPECT_EQ(cache.entries(), 0u);
}

}  // namespace
}  // namespace sanctum::grammar

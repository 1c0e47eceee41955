// The bounded store of context masks and repeat profiles: what is stored comes back, the least
// recently used entries go once the budget is passed, a value someone holds survives its eviction,
// and a profile is never dropped while a stored mask still refers to it.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/mask_store.h"
#include "grammar/repeat_profile.h"

namespace sanctum::grammar {
namespace {

std::shared_ptr<const PositionMask> mask_of(size_t n, int32_t first = 0, std::shared_ptr<const RepeatProfile> profile = nullptr) {
  auto m = std::make_shared<PositionMask>();
  m->ids.resize(n);
  std::iota(m->ids.begin(), m->ids.end(), first);
  m->accepted_count = n;
  m->profile = std::move(profile);
  m->profile_count = m->profile ? 1 : 0;
  return m;
}

std::shared_ptr<const RepeatProfile> profile_of(size_t n) {
  auto p = std::make_shared<RepeatProfile>();
  p->ids.resize(n);
  std::iota(p->ids.begin(), p->ids.end(), 0);
  p->upto = {static_cast<uint32_t>(n)};
  return p;
}

// "k3", "p10": built by appending (GCC 12 warns falsely on "k" + std::to_string(n) at -O3).
std::string name(char prefix, int n) {
  std::string s(1, prefix);
  s += std::to_string(n);
  return s;
}

// What one mask of `n` ids under a two-byte key costs the store.
size_t entry_bytes(size_t n) {
  MaskStore probe(size_t{1} << 20);
  probe.add_mask("k0", mask_of(n));
  return probe.bytes();
}

TEST(MaskStore, stored_values_come_back_and_the_first_of_a_race_stays) {
  MaskStore store(size_t{1} << 20);
  const auto first = mask_of(10), second = mask_of(10);
  EXPECT_EQ(store.add_mask("a", first), first);
  EXPECT_EQ(store.add_mask("a", second), first);  // computed twice by racing threads: one is kept
  EXPECT_EQ(store.find_mask("a"), first);
  EXPECT_EQ(store.find_mask("b"), nullptr);
  EXPECT_EQ(store.find_profile("a"), nullptr);  // masks and profiles have keys of their own
  const auto p = profile_of(5);
  EXPECT_EQ(store.add_profile("a", p), p);
  EXPECT_EQ(store.find_profile("a"), p);
  const MaskStore::Stats s = store.stats();
  EXPECT_EQ(s.masks, 1u);
  EXPECT_EQ(s.mask_bytes, 10 * sizeof(int32_t));
  EXPECT_EQ(s.profiles, 1u);
  EXPECT_EQ(s.profile_bytes, p->memory_bytes());
  EXPECT_EQ(s.evicted, 0u);
}

TEST(MaskStore, the_least_recently_used_go_past_the_budget_down_to_three_quarters) {
  const size_t e = entry_bytes(1000);
  // Room for four entries and a half: the fifth evicts down to 3.375 entries, so two go.
  MaskStore store(e * 4 + e / 2);
  for (int k = 0; k < 4; ++k) store.add_mask(name('k', k), mask_of(1000));
  ASSERT_EQ(store.bytes(), 4 * e);
  ASSERT_NE(store.find_mask("k0"), nullptr);  // k0 is now as recent as k3; k1 and k2 are the oldest
  store.add_mask("k4", mask_of(1000));
  EXPECT_EQ(store.find_mask("k1"), nullptr);
  EXPECT_EQ(store.find_mask("k2"), nullptr);
  for (const char* k : {"k0", "k3", "k4"}) EXPECT_NE(store.find_mask(k), nullptr) << k;
  EXPECT_EQ(store.bytes(), 3 * e);
  EXPECT_EQ(store.stats().evicted, 2u);
}

TEST(MaskStore, a_held_value_survives_its_eviction) {
  const size_t e = entry_bytes(1000);
  MaskStore store(e * 2);
  std::shared_ptr<const PositionMask> held = store.add_mask("k0", mask_of(1000, 7));
  for (int k = 1; k < 6; ++k) store.add_mask(name('k', k), mask_of(1000));
  ASSERT_EQ(store.find_mask("k0"), nullptr);
  ASSERT_EQ(held->ids.size(), 1000u);
  EXPECT_EQ(held->ids.front(), 7);
  EXPECT_EQ(held->ids.back(), 1006);
}

TEST(MaskStore, a_value_bigger_than_the_budget_is_returned_but_not_stored) {
  MaskStore store(entry_bytes(100));
  const auto big = mask_of(1000);
  EXPECT_EQ(store.add_mask("big", big), big);
  EXPECT_EQ(store.find_mask("big"), nullptr);
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(MaskStore, a_profile_goes_only_after_the_stored_masks_that_refer_to_it) {
  // Profiles are stored first (so they are the oldest), then masks, half of which refer to one. A
  // profile is alive only while the store or a stored mask holds it (the test keeps none), so a
  // profile dropped under a stored mask shows as more profiles alive than stored (stats() does not
  // touch recency, so the check does not change what is evicted).
  const size_t e = entry_bytes(200);
  MaskStore store(e * 12);
  std::mt19937 rng(3);
  std::vector<std::string> keys;
  std::vector<std::weak_ptr<const RepeatProfile>> profiles;
  for (int round = 0; round < 300; ++round) {
    if (round % 10 == 0) {
      keys.push_back(name('p', round));
      auto p = profile_of(300);
      profiles.push_back(p);
      store.add_profile(keys.back(), std::move(p));
    }
    std::shared_ptr<const RepeatProfile> profile = rng() % 2 ? store.find_profile(keys[rng() % keys.size()]) : nullptr;
    store.add_mask(name('m', round), mask_of(200, round, std::move(profile)));
    ASSERT_LE(store.bytes(), e * 12) << "round " << round;
    size_t alive = 0;
    for (const auto& w : profiles) alive += !w.expired();
    ASSERT_EQ(alive, store.stats().profiles) << "round " << round << ": a stored mask holds a profile the store dropped";
  }
  EXPECT_LT(store.stats().profiles, profiles.size());  // the rule delays profiles, it does not pin them
  EXPECT_GT(store.stats().evicted, 100u);
}

}  // namespace
}  // namespace sanctum::grammar

// Prompt-lookup drafting and the gate that decides whether (and how long) to draft from measured
// costs. Times are fed in, never measured, so these tests do not depend on the machine.
#include "engine/spec/prompt_lookup.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace sanctum::spec {
namespace {

TEST(PromptLookup, drafts_what_followed_the_most_recent_match) {
  const std::vector<int32_t> ctx = {1, 2, 3, 4, 5, 1, 2, 3, 9, 8, 7, 6, 1, 2, 3};
  PromptLookupParams p;
  p.max_draft = 3;
  EXPECT_EQ(propose(ctx, p, 10), (std::vector<int32_t>{9, 8, 7}));
}

TEST(PromptLookup, cascades_to_shorter_ngrams_and_is_empty_without_a_match) {
  PromptLookupParams p;
  p.max_draft = 2;
  EXPECT_EQ(propose(std::vector<int32_t>{4, 7, 8, 5, 6, 7}, p, 10), (std::vector<int32_t>{8, 5}));
  EXPECT_TRUE(propose(std::vector<int32_t>{1, 2, 3, 4}, p, 10).empty());
  EXPECT_TRUE(propose(std::vector<int32_t>{1, 2, 1}, p, 0).empty());  // no budget
}

TEST(PromptLookup, a_match_near_the_end_extends_with_its_period) {
  PromptLookupParams p;
  p.max_draft = 5;
  p.ngram = 2;
  EXPECT_EQ(propose(std::vector<int32_t>{9, 5, 5, 5}, p, 10), (std::vector<int32_t>{5, 5, 5, 5, 5}));
  EXPECT_EQ(propose(std::vector<int32_t>{9, 1, 2, 1, 2}, p, 10), (std::vector<int32_t>{1, 2, 1, 2, 1}));
  EXPECT_EQ(propose(std::vector<int32_t>{9, 1, 2, 1, 2}, p, 3), (std::vector<int32_t>{1, 2, 1}));  // capped by the budget
}

TEST(DraftGate, times_a_plain_step_before_drafting) {
  SpeculationStats stats;
  DraftGate gate(stats, 8, false);
  EXPECT_EQ(gate.draft_length(), 0);
  gate.on_plain_step(0.01);
  EXPECT_GT(gate.draft_length(), 0);
}

TEST(DraftGate, stops_drafting_where_verification_costs_as_much_as_the_tokens_it_saves) {
  SpeculationStats stats;
  DraftGate gate(stats, 4, false);
  gate.on_plain_step(0.01);
  for (int rows = 2; rows <= 5; ++rows) stats.cost[static_cast<size_t>(rows)] = rows;  // compute-bound: r rows = r steps
  for (int i = 0; i < 8; ++i) gate.on_verified(5, 4, 1, 0.05);                         // one of four kept
  int drafted = 0;
  for (int step = 0; step < 64; ++step) {
    if (gate.draft_length() > 0) ++drafted;
    gate.on_plain_step(0.01);
  }
  EXPECT_LE(drafted, 4);  // only occasional probes
}

TEST(DraftGate, drafts_the_length_whose_measured_cost_pays_best) {
  SpeculationStats stats;
  DraftGate gate(stats, 8, false);
  gate.on_plain_step(0.01);
  for (int rows = 2; rows <= 9; ++rows) stats.cost[static_cast<size_t>(rows)] = 1.0 + 0.5 * ((rows + 3) / 4);  // tiles of 4 rows
  for (int i = 0; i < 8; ++i) gate.on_verified(8, 7, 7, 0.02);                                                 // every draft kept
  EXPECT_EQ(gate.draft_length(), 7);  // 8 rows: two tiles, the best tokens per cost
}

TEST(DraftGate, plain_run_counts_the_plain_steps_it_will_grant_in_a_row) {
  SpeculationStats stats;
  DraftGate gate(stats, 4, false);
  EXPECT_EQ(gate.plain_run(), 1);  // the first step is timed alone
  gate.on_plain_step(0.01);
  for (int rows = 2; rows <= 5; ++rows) stats.cost[static_cast<size_t>(rows)] = rows;
  for (int i = 0; i < 8; ++i) gate.on_verified(5, 4, 1, 0.05);  // drafting does not pay
  for (int step = 0; step < 300; ++step) {
    if (gate.draft_length() > 0) continue;  // a probe
    const int run = gate.plain_run();
    ASSERT_GE(run, 1);
    for (int k = 0; k < run; ++k) {  // exactly what the gate then asks for, one step at a time
      if (k > 0) {
        ASSERT_EQ(gate.draft_length(), 0) << "step " << step << ", " << k << " into a run of " << run;
      }
      gate.on_plain_step(0.01);
    }
    step += run - 1;
  }
  DraftGate off(stats, 0, false);
  EXPECT_EQ(off.plain_run(), std::numeric_limits<int>::max());
  DraftGate always(stats, 3, true);
  EXPECT_EQ(always.plain_run(), 1);
}

TEST(DraftGate, always_drafts_the_maximum_when_told_to) {
  SpeculationStats stats;
  DraftGate gate(stats, 3, true);
  EXPECT_EQ(gate.draft_length(), 3);
  DraftGate off(stats, 0, true);
  EXPECT_EQ(off.draft_length(), 0);
}

}  // namespace
}  // namespace sanctum::spec

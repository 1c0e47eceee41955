// Budgets over fixed windows: requests and tokens per window, Retry-After until the rollover,
// refunds, and per-identity overrides.
#include <gtest/gtest.h>

#include "router/budget.h"

namespace sanctum::router {
namespace {

using Clock = BudgetWindow::Clock;
Clock::time_point at(double s) {
  return Clock::time_point{} + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

TEST(RouterBudget, request_limit_refuses_with_retry_after_until_the_window_rolls_over) {
  BudgetWindow w({2, 0, 60});
  EXPECT_TRUE(w.try_admit(at(100)).allowed);
  EXPECT_TRUE(w.try_admit(at(110)).allowed);
  BudgetVerdict v = w.try_admit(at(120.2));
  EXPECT_FALSE(v.allowed);
  EXPECT_STREQ(v.exceeded, "requests");
  EXPECT_EQ(v.retry_after_s, 40);  // the window began at 100 and ends at 160 (39.8 s, rounded up)
  EXPECT_FALSE(w.try_admit(at(159.9)).allowed);
  EXPECT_TRUE(w.try_admit(at(160)).allowed);  // a new window
  EXPECT_EQ(w.requests_used(at(160)), 1);
}

TEST(RouterBudget, tokens_count_after_the_fact_and_block_the_next_request) {
  BudgetWindow w({0, 100, 10});
  EXPECT_TRUE(w.try_admit(at(0)).allowed);
  w.add_tokens(60, at(1));
  EXPECT_TRUE(w.try_admit(at(2)).allowed);  // 60 < 100: still admitted
  w.add_tokens(60, at(3));                  // this one crossed the limit and still completed
  BudgetVerdict v = w.try_admit(at(4));
  EXPECT_FALSE(v.allowed);
  EXPECT_STREQ(v.exceeded, "tokens");
  EXPECT_EQ(v.retry_after_s, 6);
  EXPECT_EQ(w.tokens_used(at(4)), 120);
  EXPECT_TRUE(w.try_admit(at(10)).allowed);
  EXPECT_EQ(w.tokens_used(at(10)), 0);
}

TEST(RouterBudget, retry_after_is_at_least_one_second) {
  BudgetWindow w({1, 0, 1});
  EXPECT_TRUE(w.try_admit(at(0)).allowed);
  BudgetVerdict v = w.try_admit(at(0.999));
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.retry_after_s, 1);
}

TEST(RouterBudget, a_refund_gives_the_admission_back) {
  BudgetWindow w({1, 0, 60});
  EXPECT_TRUE(w.try_admit(at(0)).allowed);
  w.refund(at(1));
  EXPECT_TRUE(w.try_admit(at(2)).allowed);
  EXPECT_FALSE(w.try_admit(at(3)).allowed);
}

TEST(RouterBudget, book_keeps_one_window_per_identity_with_overrides) {
  BudgetBook book({1, 0, 60}, {{"vip", {3, 0, 60}}, {"free", {0, 0, 60}}});
  BudgetWindow* alice = book.window("alice");
  BudgetWindow* bob = book.window("bob");
  ASSERT_TRUE(alice && bob);
  EXPECT_NE(alice, bob);
  EXPECT_EQ(alice, book.window("alice"));
  EXPECT_TRUE(alice->try_admit(at(0)).allowed);
  EXPECT_FALSE(alice->try_admit(at(0)).allowed);
  EXPECT_TRUE(bob->try_admit(at(0)).allowed);  // alice's use is not bob's
  BudgetWindow* vip = book.window("vip");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(vip->try_admit(at(0)).allowed);
  EXPECT_FALSE(vip->try_admit(at(0)).allowed);
  EXPECT_EQ(book.window("free"), nullptr);  // unlimited: nothing to count
}

}  // namespace
}  // namespace sanctum::router

#pragma once
// Request and token budgets over fixed windows. One BudgetWindow counts for one key (a client
// identity, or a backend); the window starts with the first request after the previous one ended.
// A request is admitted while both counts are under their limits; tokens are only known when the
// response ends, so they are added afterwards and the request that crosses the token limit still
// completes — the next one is refused until the window rolls over. Refusals carry Retry-After.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace sanctum::router {

struct BudgetLimits {
  int64_t requests = 0;  // per window; 0: unlimited
  int64_t tokens = 0;    // prompt + completion per window; 0: unlimited
  double window_s = 60;
  bool unlimited() const { return requests <= 0 && tokens <= 0; }
};

struct BudgetVerdict {
  bool allowed = true;
  const char* exceeded = "";  // "requests" | "tokens" when refused
  int retry_after_s = 0;      // whole seconds until the window rolls over (at least 1)
};

class BudgetWindow {
 public:
  using Clock = std::chrono::steady_clock;
  explicit BudgetWindow(BudgetLimits limits) : limits_(limits) {}

  // Counts the request when admitted.
  BudgetVerdict try_admit(Clock::time_point now);
  // Takes back an admission (another budget refused the same request).
  void refund(Clock::time_point now);
  void add_tokens(int64_t tokens, Clock::time_point now);

  int64_t requests_used(Clock::time_point now);
  int64_t tokens_used(Clock::time_point now);

 private:
  void roll(Clock::time_point now);

  BudgetLimits limits_;
  std::mutex mutex_;
  bool started_ = false;
  Clock::time_point window_start_{};
  int64_t requests_ = 0;
  int64_t tokens_ = 0;
};

// Windows by key, created on first use with the limits `limits_for(key)` gives.
class BudgetBook {
 public:
  using Clock = std::chrono::steady_clock;
  BudgetBook(BudgetLimits defaults, std::map<std::string, BudgetLimits> overrides)
      : defaults_(defaults), overrides_(std::move(overrides)) {}

  BudgetLimits limits_for(const std::string& key) const;
  // nullptr when the key's limits are unlimited (nothing to count).
  BudgetWindow* window(const std::string& key);

 private:
  BudgetLimits defaults_;
  std::map<std::string, BudgetLimits> overrides_;
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<BudgetWindow>> windows_;
};

}  // namespace sanctum::router

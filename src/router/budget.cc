#include "router/budget.h"

#include <cmath>

namespace sanctum::router {

void BudgetWindow::roll(Clock::time_point now) {
  const auto length = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits_.window_s));
  if (!started_ || now - window_start_ >= length) {
    started_ = true;
    window_start_ = now;
    requests_ = 0;
    tokens_ = 0;
  }
}

BudgetVerdict BudgetWindow::try_admit(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  roll(now);
  BudgetVerdict v;
  if (limits_.requests > 0 && requests_ >= limits_.requests) v.exceeded = "requests";
  else if (limits_.tokens > 0 && tokens_ >= limits_.tokens) v.exceeded = "tokens";
  if (*v.exceeded) {
    v.allowed = false;
    const double left = limits_.window_s - std::chrono::duration<double>(now - window_start_).count();
    v.retry_after_s = std::max(1, static_cast<int>(std::ceil(left)));
    return v;
  }
  ++requests_;
  return v;
}

void BudgetWindow::refund(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  roll(now);
  if (requests_ > 0) --requests_;
}

void BudgetWindow::add_tokens(int64_t tokens, Clock::time_point now) {
  if (tokens <= 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  roll(now);
  tokens_ += tokens;
}

int64_t BudgetWindow::requests_used(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  roll(now);
  return requests_;
}

int64_t BudgetWindow::tokens_used(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  roll(now);
  return tokens_;
}

BudgetLimits BudgetBook::limits_for(const std::string& key) const {
  auto it = overrides_.find(key);
  return it == overrides_.end() ? defaults_ : it->second;
}

BudgetWindow* BudgetBook::window(const std::string& key) {
  const BudgetLimits limits = limits_for(key);
  if (limits.unlimited()) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = windows_[key];
  if (!slot) slot = std::make_unique<BudgetWindow>(limits);
  return slot.get();
}

}  // namespace sanctum::router

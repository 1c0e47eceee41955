#include "router/latency_ema.h"

#include <algorithm>

namespace sanctum::router {

void LatencyEma::observe(double seconds) {
  if (!(seconds >= 0)) return;  // NaN or negative: a clock glitch, not a sample
  std::lock_guard<std::mutex> lock(mutex_);
  value_ = samples_ == 0 ? seconds : alpha_ * seconds + (1 - alpha_) * value_;
  ++samples_;
}

std::optional<double> LatencyEma::value() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (samples_ == 0) return std::nullopt;
  return value_;
}

long LatencyEma::samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return samples_;
}

bool is_slow(double ema, std::optional<double> best_equivalent, double factor, double absolute_limit) {
  if (absolute_limit > 0 && ema > absolute_limit) return true;
  // A floor of 1 ms keeps microsecond-level jitter between two fast replicas from flagging one.
  if (factor > 0 && best_equivalent && ema > 0.001 && ema > factor * std::max(*best_equivalent, 0.001)) return true;
  return false;
}

}  // namespace sanctum::router

#pragma once
// Exponential moving average of a latency: ema = alpha * sample + (1 - alpha) * ema, the first
// sample taken as is. Thread-safe (one small mutex; updated once per request).
#include <mutex>
#include <optional>

namespace sanctum::router {

class LatencyEma {
 public:
  explicit LatencyEma(double alpha = 0.2) : alpha_(alpha) {}
  void observe(double seconds);
  std::optional<double> value() const;  // nullopt before the first sample
  long samples() const;

 private:
  double alpha_;
  mutable std::mutex mutex_;
  double value_ = 0;
  long samples_ = 0;
};

// Is `ema` slow? Past the absolute limit (when > 0), or past `factor` times the best EMA among the
// upstreams it is equivalent to (when that best is known and factor > 0).
bool is_slow(double ema, std::optional<double> best_equivalent, double factor, double absolute_limit);

}  // namespace sanctum::router

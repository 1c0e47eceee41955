#pragma once
// Circuit breaker for one upstream URL. Closed: requests flow and consecutive failures are counted;
// `failures` in a row open it. Open: nothing is sent until `cooldown` has passed; then it is
// half-open and exactly one request (the probe) may go. The probe's success closes it, its failure
// opens it for another cool-down. Thread-safe; time is passed in so tests can drive it.
#include <chrono>
#include <mutex>
#include <optional>

namespace sanctum::router {

class CircuitBreaker {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State { closed = 0, half_open = 1, open = 2 };
  struct Params {
    int failures = 5;        // consecutive failures that open the breaker
    double cooldown_s = 30;  // open -> half-open after this long
  };

  explicit CircuitBreaker(Params params) : params_(params) {}

  // May a request go now? Moves open -> half-open once the cool-down is over and then admits a
  // single probe; `transition` (optional) receives the new state when this call changed it.
  bool allow(Clock::time_point now, std::optional<State>* transition = nullptr);
  // Without side effects: would allow() admit a request now?
  bool would_allow(Clock::time_point now) const;
  // Outcome of a request that allow() admitted. Each returns the new state when it changed.
  std::optional<State> on_success();
  std::optional<State> on_failure(Clock::time_point now);
  // An admitted request that ended without a verdict (the client left): frees the probe slot.
  void on_abandon();

  State state() const;
  int consecutive_failures() const;

 private:
  Params params_;
  mutable std::mutex mutex_;
  State state_ = State::closed;
  int failures_ = 0;
  bool probe_in_flight_ = false;
  Clock::time_point opened_at_{};
};

const char* to_string(CircuitBreaker::State s);

}  // namespace sanctum::router

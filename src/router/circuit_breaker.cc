#include "router/circuit_breaker.h"

namespace sanctum::router {

const char* to_string(CircuitBreaker::State s) {
  switch (s) {
    case CircuitBreaker::State::closed: return "closed";
    case CircuitBreaker::State::half_open: return "half_open";
    case CircuitBreaker::State::open: return "open";
  }
  return "unknown";
}

bool CircuitBreaker::allow(Clock::time_point now, std::optional<State>* transition) {
  std::lock_guard<std::mutex> lock(mutex_);
  switch (state_) {
    case State::closed: return true;
    case State::open:
      if (now - opened_at_ < std::chrono::duration<double>(params_.cooldown_s)) return false;
      state_ = State::half_open;
      if (transition) *transition = state_;
      probe_in_flight_ = true;
      return true;
    case State::half_open:
      if (probe_in_flight_) return false;
      probe_in_flight_ = true;
      return true;
  }
  return false;
}

bool CircuitBreaker::would_allow(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  switch (state_) {
    case State::closed: return true;
    case State::open: return now - opened_at_ >= std::chrono::duration<double>(params_.cooldown_s);
    case State::half_open: return !probe_in_flight_;
  }
  return false;
}

std::optional<CircuitBreaker::State> CircuitBreaker::on_success() {
  std::lock_guard<std::mutex> lock(mutex_);
  failures_ = 0;
  probe_in_flight_ = false;
  if (state_ == State::closed) return std::nullopt;
  state_ = State::closed;
  return state_;
}

std::optional<CircuitBreaker::State> CircuitBreaker::on_failure(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++failures_;
  probe_in_flight_ = false;
  if (state_ == State::half_open || (state_ == State::closed && failures_ >= params_.failures)) {
    state_ = State::open;
    opened_at_ = now;
    return state_;
  }
  if (state_ == State::open) opened_at_ = now;  // a late failure of a request admitted before opening
  return std::nullopt;
}

void CircuitBreaker::on_abandon() {
  std::lock_guard<std::mutex> lock(mutex_);
  probe_in_flight_ = false;
}

CircuitBreaker::State CircuitBreaker::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

int CircuitBreaker::consecutive_failures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failures_;
}

}  // namespace sanctum::router

#include "router/upstream_pool.h"

namespace sanctum::router {

std::unique_ptr<UpstreamConnection> UpstreamPool::take() {
  const auto now = Clock::now();
  std::vector<std::unique_ptr<UpstreamConnection>> stale;  // closed outside the lock
  std::unique_ptr<UpstreamConnection> found;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!idle_.empty()) {
      std::unique_ptr<UpstreamConnection> c = std::move(idle_.back());
      idle_.pop_back();
      if (now - c->idle_since < idle_ttl_ && c->idle_usable()) {
        found = std::move(c);
        break;
      }
      stale.push_back(std::move(c));
    }
  }
  return found;
}

void UpstreamPool::give_back(std::unique_ptr<UpstreamConnection> conn) {
  if (!conn) return;
  conn->idle_since = Clock::now();
  conn->set_cancel(nullptr);
  conn->set_deadline(Clock::time_point::max());
  std::lock_guard<std::mutex> lock(mutex_);
  if (idle_.size() >= max_idle_) return;  // dropped (closed) on return
  idle_.push_back(std::move(conn));
}

size_t UpstreamPool::idle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return idle_.size();
}

}  // namespace sanctum::router

#pragma once
// Keep-alive connections to one upstream URL, shared by every request thread. A connection goes
// back to the pool only after a complete response with keep-alive; one that has been idle too long
// or shows EOF/junk when taken out is dropped.
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "router/upstream_connection.h"

namespace sanctum::router {

class UpstreamPool {
 public:
  using Clock = std::chrono::steady_clock;
  UpstreamPool(UpstreamUrl url, std::shared_ptr<const UpstreamTls> tls, size_t max_idle, double idle_ttl_s = 20)
      : url_(std::move(url)), tls_(std::move(tls)), max_idle_(max_idle), idle_ttl_(idle_ttl_s) {}

  const UpstreamUrl& url() const { return url_; }
  const UpstreamTls* tls() const { return tls_.get(); }

  // A usable idle connection, or nullptr.
  std::unique_ptr<UpstreamConnection> take();
  void give_back(std::unique_ptr<UpstreamConnection> conn);
  size_t idle() const;

 private:
  UpstreamUrl url_;
  std::shared_ptr<const UpstreamTls> tls_;
  size_t max_idle_;
  std::chrono::duration<double> idle_ttl_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<UpstreamConnection>> idle_;  // most recently used last
};

}  // namespace sanctum::router

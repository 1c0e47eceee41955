#pragma once
// Background checks, never on the request path: one thread per upstream URL probes health every
// health.interval_s (GET /v1/models, then /health; healthy when either answers 2xx within
// health.timeout_s) and, when the backend has a canary, asks the canary question every
// canary.interval_s (the answer must contain the expected string). A hung upstream only delays its
// own thread.
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "router/fleet.h"

namespace sanctum::router {

class Prober {
 public:
  explicit Prober(Fleet& fleet) : fleet_(fleet) {}
  ~Prober() { stop(); }
  void start();
  void stop();

  // One health probe / canary run (exposed for tests and for the first round at start-up).
  static bool probe_health(UpstreamState& u, double timeout_s, std::string& detail);
  static bool run_canary(UpstreamState& u, const CanaryConfig& canary, std::string& detail);

 private:
  void loop(UpstreamState& u);

  Fleet& fleet_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace sanctum::router

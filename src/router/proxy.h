#pragma once
// The proxied completions (POST /v1/chat/completions and /v1/completions): read just enough of the
// request to route it, admit it through the client's budget, take the upstreams Fleet::plan gives
// and try them in order (each backend's budget first) until one gives a usable answer, then charge
// the tokens relayed. How one upstream is tried and relayed is upstream_attempt.h.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "router/budget.h"
#include "router/fleet.h"
#include "router/router_config.h"
#include "router/router_metrics.h"
#include "server/exchange.h"

namespace sanctum::router {

// What one proxied request did, for the access log and metrics.
struct ProxyOutcome {
  std::string backend = "-";
  std::string upstream = "-";
  int attempts = 0;
  int failovers = 0;
  double ttfb_s = -1;
  int64_t tokens = 0;
  std::string error;  // why it failed, when it did
};

struct ProxyRequest;
enum class AttemptResult;

class Proxy {
 public:
  using Clock = std::chrono::steady_clock;
  Proxy(const RouterConfig& config, RouterMetrics& metrics, Fleet& fleet);

  // Answers one completion request on `ex`; `identity` (empty when anonymous) picks the client budget.
  // Throws ApiError for a request it cannot route (400, 404, 503).
  void handle(server::Exchange& ex, const std::string& identity, ProxyOutcome& outcome);

 private:
  // The budgets that admitted the request (they are charged its tokens) and why others refused it.
  struct Admission {
    BudgetWindow* client_window = nullptr;  // null: the client has no budget
    const BackendState* backend = nullptr;  // the backend whose budget admitted the latest attempt
    int budget_retry_after = 0;             // > 0: some backend's budget refused the request
    bool any_tried = false;                 // some upstream was actually called
  };

  bool admit_client(server::Exchange& ex, const std::string& identity, Clock::time_point now, Admission& admission, ProxyOutcome& outcome);
  std::vector<UpstreamState*> choose_upstreams(const std::string& model, Clock::time_point now, Admission& admission,
                                               ProxyOutcome& outcome);
  AttemptResult try_upstreams(server::Exchange& ex, const std::vector<UpstreamState*>& plan, ProxyRequest& request, Admission& admission,
                              ProxyOutcome& outcome);
  bool admit_backend(const BackendState& backend, const std::string& request_id, Admission& admission);
  void record_answer(const server::Exchange& ex, const Admission& admission, const ProxyOutcome& outcome);
  void answer_unanswered(server::Exchange& ex, const ProxyRequest& request, const Admission& admission, ProxyOutcome& outcome);

  const RouterConfig& config_;
  RouterMetrics& metrics_;
  Fleet& fleet_;
  BudgetBook client_budgets_;
};

}  // namespace sanctum::router

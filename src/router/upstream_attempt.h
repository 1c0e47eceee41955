#pragma once
// One try of one upstream for a proxied request: send it, then relay a whole body or a stream to
// the client. Failover is allowed only while nothing has reached the client: an upstream that fails
// before that (connect error, timeout, dropped connection, 5xx, a failed quality check) is recorded
// and the caller tries the next. A 4xx is the client's problem and is relayed as is. Once the first
// byte of a stream has gone out the upstream is never switched: a broken stream ends with an SSE
// error event. Every end is counted in the attempt metrics and reported to the fleet.
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "router/api_dialect.h"
#include "router/fleet.h"
#include "router/proxy.h"
#include "router/quality.h"
#include "router/router_metrics.h"
#include "router/upstream_call.h"
#include "server/exchange.h"

namespace sanctum::router {

// A completion request as the upstreams get it, and why the ones tried so far failed.
struct ProxyRequest {
  std::string path;
  std::string requested;  // the model the client named, or the default
  std::string model;      // the served name it resolves to
  std::string body;       // as sent upstream: `model` is the served name
  ApiDialect dialect = ApiDialect::openai;
  bool stream = false;
  std::chrono::steady_clock::time_point arrived;
  std::vector<std::pair<std::string, std::string>> failures;  // (upstream, reason) for the final error
  bool last_was_timeout = false;
};

enum class AttemptResult {
  done,         // an answer (success or a relayed 4xx) reached the client
  next,         // this upstream failed before anything reached the client: try the next
  client_gone,  // the client disconnected: the request is over
};

class UpstreamAttempt {
 public:
  using Clock = std::chrono::steady_clock;
  // `next_label` names the upstream the caller tries next ("-": none), for the failover log line.
  UpstreamAttempt(Fleet& fleet, RouterMetrics& metrics, server::Exchange& ex, ProxyRequest& request, ProxyOutcome& outcome,
                  UpstreamState& upstream, std::string next_label);

  AttemptResult run();

 private:
  struct StreamRelay;

  AttemptResult give_up_on_5xx(int status);
  AttemptResult relay_whole_body(int status);
  AttemptResult relay_stream();
  void pump_stream(StreamRelay& s);
  void check_events(const std::vector<std::string>& events, StreamRelay& s, std::string& batch);
  bool send_batch(StreamRelay& s, const std::string& batch);
  AttemptResult end_unsent_stream(StreamRelay& s);
  void end_sent_stream(StreamRelay& s);

  // The ways an attempt ends.
  void record(const std::string& result);
  AttemptResult give_up(const std::string& result, const std::string& why);
  AttemptResult client_left(bool stream_begun);
  AttemptResult quality_failed(QualityFlag flag, const std::string& detail);

  Fleet& fleet_;
  RouterMetrics& metrics_;
  server::Exchange& ex_;
  ProxyRequest& request_;
  ProxyOutcome& outcome_;
  UpstreamState& u_;
  const BackendConfig& backend_;
  std::string next_label_;
  Clock::time_point started_;
  UpstreamCall call_;
};

}  // namespace sanctum::router

#include "router/upstream_attempt.h"

#include <optional>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "base/utf8.h"
#include "router/answer_reader.h"
#include "router/sse_reader.h"

namespace sanctum::router {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMaxBodyBytes = 64u << 20;  // a non-streamed completion larger than this is refused

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// What the detectors say about a finished or growing text.
QualityFlag check_text(const QualityConfig& q, const std::string& text, std::string& detail) {
  if (auto rep = trailing_repetition(text, q.repetition)) {
    std::string unit = utf8::lossy(rep->unit);
    detail = "'" + unit.substr(0, 40) + "' repeated " + std::to_string(rep->repeats) + " times";
    return QualityFlag::repetition;
  }
  return QualityFlag::none;
}

// What the detectors say about a whole 2xx body.
struct BodyVerdict {
  bool parsed = true;  // false: not a JSON object, which no detector needs to look at
  QualityFlag flag = QualityFlag::none;
  std::string detail;
  std::optional<int64_t> total_tokens;  // set only for a body that passed
};

BodyVerdict judge_body(const QualityConfig& q, const std::string& answer, ApiDialect dialect) {
  BodyVerdict v;
  if (q.utf8 && !utf8::is_valid(answer)) {
    v.flag = QualityFlag::utf8;
    v.detail = "invalid UTF-8 at byte " + std::to_string(utf8::find_invalid(answer));
    return v;
  }
  const CompletionInfo info = inspect_completion_body(answer, dialect);
  v.parsed = info.parsed;
  if (!info.parsed) return v;
  if (q.empty && info.empty) {
    v.flag = QualityFlag::empty;
    v.detail = "no text, reasoning or tool calls in any choice";
  } else {
    v.flag = check_text(q, info.text, v.detail);
  }
  if (v.flag == QualityFlag::none) v.total_tokens = info.total_tokens;
  return v;
}

std::vector<std::pair<std::string, std::string>> upstream_headers(const UpstreamState& u, const server::HttpRequest& req) {
  std::vector<std::pair<std::string, std::string>> h{{"X-Request-Id", req.request_id}};
  if (!u.backend.config.api_key.empty()) h.emplace_back("Authorization", "Bearer " + u.backend.config.api_key);
  h.emplace_back("Accept", "application/json, text/event-stream");
  return h;
}

std::vector<std::pair<std::string, std::string>> client_headers(const UpstreamState& u) {
  return {{"X-Sanctum-Backend", u.backend.config.name}, {"X-Sanctum-Upstream", u.backend.config.name + "#" + std::to_string(u.index)}};
}

}  // namespace

// A stream being relayed: what was seen, what was sent, and why it stopped.
struct UpstreamAttempt::StreamRelay {
  SseSplitter splitter;
  std::string text;      // choice 0's text so far (its tail), for the detectors
  bool started = false;  // the client has the stream's head
  bool saw_done = false;
  bool saw_content = false;
  int64_t content_events = 0;
  std::optional<int64_t> usage;                        // a total the upstream reported
  std::optional<int64_t> input_tokens, output_tokens;  // or its two parts, from different events
  QualityFlag flag = QualityFlag::none;
  std::string flag_detail;
  std::string broken;  // why the stream broke (empty: it did not)
  FailureKind broken_kind = FailureKind::closed;
  bool client_gone = false;
  bool upstream_error_event = false;
  double first_event_s = 0;  // attempt start -> the first event sent on
};

UpstreamAttempt::UpstreamAttempt(Fleet& fleet, RouterMetrics& metrics, server::Exchange& ex, ProxyRequest& request, ProxyOutcome& outcome,
                                 UpstreamState& upstream, std::string next_label)
    : fleet_(fleet), metrics_(metrics), ex_(ex), request_(request), outcome_(outcome), u_(upstream), backend_(upstream.backend.config),
      next_label_(std::move(next_label)), started_(Clock::now()),
      call_(upstream.pool, backend_.timeouts, [&ex] { return ex.peer_closed(); }) {}

AttemptResult UpstreamAttempt::run() {
  UpstreamRequest up;
  up.path = request_.path;
  up.body = request_.body;
  up.headers = upstream_headers(u_, ex_.request());
  try {
    call_.start(up);
  } catch (const UpstreamFailure& f) {
    if (f.kind() == FailureKind::cancelled) return client_left(false);
    return give_up(to_string(f.kind()), f.what());
  }
  const int status = call_.status();
  if (status >= 500) return give_up_on_5xx(status);
  if (!request_.stream || !call_.event_stream() || status != 200) return relay_whole_body(status);
  return relay_stream();
}

AttemptResult UpstreamAttempt::give_up_on_5xx(int status) {
  std::string detail;
  try {
    detail = call_.read_all(64 * 1024);
  } catch (const UpstreamFailure&) {
  }
  return give_up("http_5xx", "HTTP " + std::to_string(status) + (detail.empty() ? "" : ": " + detail.substr(0, 200)));
}

// A whole body: read it (bounded), check it when it is a 2xx, relay it.
AttemptResult UpstreamAttempt::relay_whole_body(int status) {
  std::string answer;
  try {
    answer = call_.read_all(kMaxBodyBytes);
  } catch (const UpstreamFailure& f) {
    if (f.kind() == FailureKind::cancelled) return client_left(false);
    return give_up(to_string(f.kind()), f.what());
  }
  if (status >= 200 && status < 300) {
    const BodyVerdict v = judge_body(backend_.quality, answer, request_.dialect);
    if (!v.parsed) return give_up("bad_response", "the upstream's 2xx body is not a JSON object");
    if (v.flag != QualityFlag::none) return quality_failed(v.flag, v.detail);
    if (v.total_tokens) outcome_.tokens = *v.total_tokens;
    fleet_.on_success(u_, call_.head_seconds(), since(started_));
    record("ok");
  } else {
    fleet_.on_success(u_, call_.head_seconds(), since(started_));  // alive and answering
    record("http_4xx");
  }
  auto headers = client_headers(u_);
  if (const std::string ra = call_.header("Retry-After"); !ra.empty()) headers.emplace_back("Retry-After", ra);
  ex_.respond(status, call_.content_type().empty() ? "application/json" : call_.content_type(), answer, headers);
  outcome_.ttfb_s = since(request_.arrived);
  return AttemptResult::done;
}

// A stream: whole events only, each checked before the client sees it.
AttemptResult UpstreamAttempt::relay_stream() {
  StreamRelay s;
  pump_stream(s);
  if (s.client_gone || s.broken_kind == FailureKind::cancelled) return client_left(s.started);
  if (!s.started) return end_unsent_stream(s);
  end_sent_stream(s);
  if (s.usage) outcome_.tokens = *s.usage;
  else if (s.input_tokens || s.output_tokens) outcome_.tokens = s.input_tokens.value_or(0) + s.output_tokens.value_or(0);
  else outcome_.tokens = s.content_events;
  return AttemptResult::done;
}

// Reads events until the upstream ends or breaks, one fails a check, or the client leaves; each
// read's events that passed go on to the client in one chunk.
void UpstreamAttempt::pump_stream(StreamRelay& s) {
  std::vector<std::string> events;
  std::string batch;
  for (;;) {
    std::string bytes;
    bool more = true;
    try {
      more = call_.read_some(bytes);
    } catch (const UpstreamFailure& f) {
      s.broken = f.what();
      s.broken_kind = f.kind();
      return;
    }
    events.clear();
    if (!s.splitter.feed(bytes, events)) {
      s.broken = "an SSE event longer than 1 MiB: the upstream is not speaking SSE";
      s.broken_kind = FailureKind::bad_response;
      return;
    }
    batch.clear();
    check_events(events, s, batch);
    if (s.flag != QualityFlag::none && !s.started) return;  // nothing sent yet: fail over
    if (!batch.empty() && !send_batch(s, batch)) {
      s.client_gone = true;
      return;
    }
    if (s.flag != QualityFlag::none || !more) return;
  }
}

// Appends to `batch` the events that pass the checks, up to the first that fails (s.flag says why).
void UpstreamAttempt::check_events(const std::vector<std::string>& events, StreamRelay& s, std::string& batch) {
  const QualityConfig& q = backend_.quality;
  for (const std::string& event : events) {
    if (q.utf8 && !utf8::is_valid(event)) {
      s.flag = QualityFlag::utf8;
      s.flag_detail = "invalid UTF-8 in a stream event";
      return;
    }
    const SseEventInfo info = inspect_sse_event(event, request_.dialect);
    if (info.done) s.saw_done = true;
    if (info.error) s.upstream_error_event = true;
    if (info.total_tokens) s.usage = info.total_tokens;
    if (info.input_tokens) s.input_tokens = info.input_tokens;
    if (info.output_tokens) s.output_tokens = info.output_tokens;
    if (!info.text.empty() || info.has_tool_call) {
      s.saw_content = true;
      ++s.content_events;
    }
    s.text += info.text;
    if (s.text.size() > (64u << 10)) s.text.erase(0, s.text.size() - (32u << 10));  // the detectors look at the tail only
    if (!info.text.empty() && (s.flag = check_text(q, s.text, s.flag_detail)) != QualityFlag::none) return;
    batch += event;
  }
}

// Sends one batch of events, the stream's head first; false once the client is gone.
bool UpstreamAttempt::send_batch(StreamRelay& s, const std::string& batch) {
  if (!s.started) {
    s.started = true;
    if (!ex_.begin_stream(client_headers(u_))) return false;
    outcome_.ttfb_s = since(request_.arrived);
    metrics_.time_to_first_byte.with({backend_.name}).observe(outcome_.ttfb_s);
    s.first_event_s = since(started_);
  }
  return ex_.send_chunk(batch);
}

// Nothing reached the client: this upstream simply failed, and the next one may do better.
AttemptResult UpstreamAttempt::end_unsent_stream(StreamRelay& s) {
  if (s.flag != QualityFlag::none) return quality_failed(s.flag, s.flag_detail);
  if (s.broken.empty() && !s.saw_done) s.broken = "the stream ended without any event";
  if (!s.broken.empty()) return give_up(s.broken_kind == FailureKind::timeout ? "timeout" : "stream_broken", s.broken);
  // Only [DONE] (or nothing but comments): relay it as it is.
  if (!ex_.begin_stream(client_headers(u_))) return AttemptResult::client_gone;
  if (request_.dialect == ApiDialect::openai) ex_.send_chunk("data: [DONE]\n\n");
  ex_.end_stream();
  fleet_.on_success(u_, call_.head_seconds(), since(started_));
  record("ok");
  return AttemptResult::done;
}

// The client has bytes from this upstream: whatever happened, this stream ends here.
void UpstreamAttempt::end_sent_stream(StreamRelay& s) {
  if (s.flag != QualityFlag::none) {
    fleet_.flag_quality(u_, s.flag, s.flag_detail);
    fleet_.on_abandon(u_);
    record("quality");
    ex_.send_chunk(dialect_error_event(request_.dialect,
                                       "The upstream's output failed a quality check (" + std::string(to_string(s.flag)) +
                                           "): " + s.flag_detail + "; the stream was cut",
                                       std::string("degenerate_output_") + to_string(s.flag)));
    ex_.end_stream();
    outcome_.error = std::string("quality: ") + to_string(s.flag);
  } else if (!s.broken.empty() || !s.saw_done) {
    if (s.broken.empty()) s.broken = "the upstream ended the stream without its final event";
    fleet_.on_failure(u_, s.broken);
    record("stream_broken");
    log::warn("upstream stream broke after the client got data: ending it with an error event",
              {{"request_id", ex_.request().request_id}, {"backend", backend_.name}, {"upstream", u_.label}, {"error", s.broken}});
    ex_.send_chunk(dialect_error_event(request_.dialect, "The upstream stream broke: " + s.broken, "upstream_stream_broken"));
    ex_.end_stream();
    outcome_.error = "stream broken: " + s.broken;
  } else {
    if (backend_.quality.empty && !s.saw_content && !s.upstream_error_event)
      fleet_.flag_quality(u_, QualityFlag::empty, "a stream without any text");
    ex_.end_stream();
    fleet_.on_success(u_, s.first_event_s, since(started_));
    record("ok");
  }
}

void UpstreamAttempt::record(const std::string& result) { metrics_.attempts.with({backend_.name, u_.label, result}).inc(); }

// The upstream failed before the client got anything: a breaker failure, and the next one is tried.
AttemptResult UpstreamAttempt::give_up(const std::string& result, const std::string& why) {
  record(result);
  fleet_.on_failure(u_, why);
  request_.failures.emplace_back(u_.label, why);
  request_.last_was_timeout = result == "timeout";
  metrics_.failovers.with({backend_.name, u_.label, result}).inc();
  log::warn("upstream attempt failed", {{"request_id", ex_.request().request_id},
                                        {"backend", backend_.name},
                                        {"upstream", u_.label},
                                        {"outcome", result},
                                        {"error", why},
                                        {"next", next_label_}});
  return AttemptResult::next;
}

// The client left: no fault of the upstream's. A stream already begun is ended, else 499.
AttemptResult UpstreamAttempt::client_left(bool stream_begun) {
  fleet_.on_abandon(u_);
  record("cancelled");
  outcome_.error = "client went away";
  ex_.set_close_after();
  if (stream_begun) ex_.end_stream();
  else ex_.respond(499, "application/json", "");
  return AttemptResult::client_gone;
}

// Reachable and answering, but the answer failed a quality check: flagged, not a breaker failure.
AttemptResult UpstreamAttempt::quality_failed(QualityFlag flag, const std::string& detail) {
  fleet_.flag_quality(u_, flag, detail);
  fleet_.on_abandon(u_);
  record("quality");
  request_.failures.emplace_back(u_.label, std::string("quality: ") + to_string(flag) + " (" + detail + ")");
  metrics_.failovers.with({backend_.name, u_.label, "quality"}).inc();
  return AttemptResult::next;
}

}  // namespace sanctum::router

// The proxied completions: pick the upstreams (Fleet::plan), try them in order until one gives a
// usable answer, relay it. Failover happens on connect errors, timeouts, dropped connections, 5xx
// and responses that fail a quality check — but only while nothing has reached the client. A 4xx is
// the client's problem and is relayed as is. Once the first byte of a stream has gone out the
// upstream is never switched: a broken stream ends with an SSE error event.
#include <nlohmann/json.hpp>

#include "base/log.h"
#include "base/utf8.h"
#include "router/router_app.h"
#include "router/sse_reader.h"
#include "router/upstream_call.h"
#include "server/api_error.h"

namespace sanctum::router {

using nlohmann::json;
using server::ApiError;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMaxBodyBytes = 64u << 20;  // a non-streamed completion larger than this is refused

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string error_event(const std::string& message, const std::string& code) {
  json e = {{"error", {{"message", message}, {"type", "upstream_error"}, {"param", nullptr}, {"code", code}}}};
  return "data: " + e.dump() + "\n\n";
}

// What the detectors say about a finished or growing text.
QualityFlag check_text(const QualityConfig& q, const std::string& text, std::string& detail) {
  if (auto rep = trailing_repetition(text, q.repetition)) {
    std::string unit = utf8::lossy(rep->unit);
    detail = "'" + unit.substr(0, 40) + "' repeated " + std::to_string(rep->repeats) + " times";
    return QualityFlag::repetition;
  }
  return QualityFlag::none;
}

enum class AttemptResult {
  done,        // an answer (success or a relayed 4xx) reached the client
  next,        // this upstream failed before anything reached the client: try the next
  client_gone  // the client disconnected
};

struct RequestContext {
  server::Exchange& ex;
  std::string path;
  std::string body;
  bool stream = false;
  Clock::time_point arrived;
  std::vector<std::pair<std::string, std::string>> failures;  // (upstream, reason) for the final error
  bool last_was_timeout = false;
};

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

void RouterApp::proxy(server::Exchange& ex, const std::string& path, const std::string& identity, ProxyOutcome& outcome) {
  const server::HttpRequest& req = ex.request();
  RequestContext ctx{ex, path, req.body, false, req.arrived, {}, false};

  // Just enough parsing to route: the model and whether it streams. The upstream validates the rest.
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) throw server::bad_request("The request body is not valid JSON", "", "invalid_json");
  if (!body.is_object()) throw server::bad_request("The request body must be a JSON object", "", "invalid_json");
  std::string requested;
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) throw server::bad_request("'model' must be a string", "model");
    requested = m->get<std::string>();
  }
  if (requested.empty()) requested = config_.default_model;
  if (requested.empty()) throw server::bad_request("'model' is required", "model", "missing_model");
  const std::string model = config_.resolve(requested);
  if (model.empty()) throw server::model_not_found(requested);
  ex.model = requested;
  if (auto s = body.find("stream"); s != body.end() && s->is_boolean()) ctx.stream = s->get<bool>();
  if (model != requested || !body.contains("model")) {
    body["model"] = model;  // the upstream knows the served name, not the alias
    ctx.body = body.dump();
  }

  // The caller's budget first: a refused client must not use up a backend's.
  const auto now = Clock::now();
  BudgetWindow* client_window = client_budgets_.window(identity);
  if (client_window) {
    const BudgetVerdict v = client_window->try_admit(now);
    if (!v.allowed) {
      metrics_.budget_rejections.with({"client", "-"}).inc();
      log::warn("budget exceeded", {{"request_id", req.request_id}, {"scope", "client"}, {"identity", identity}, {"limit", v.exceeded},
                                    {"retry_after_s", std::to_string(v.retry_after_s)}});
      outcome.error = std::string("client budget: ") + v.exceeded;
      const ApiError e(429, "rate_limit_exceeded",
                       std::string("Budget exceeded for client '") + identity + "': " + v.exceeded + " per window; retry later",
                       "", "budget_exceeded");
      ex.respond(429, "application/json", error_body(e), {{"Retry-After", std::to_string(v.retry_after_s)}});
      return;
    }
  }

  std::vector<UpstreamState*> plan = fleet_.plan(model, now);
  if (plan.empty()) {
    if (client_window) client_window->refund(now);
    metrics_.requests.with({"-", "-", "503"}).inc();
    outcome.error = "no eligible upstream";
    throw server::unavailable("No healthy upstream for model '" + model + "' (breakers open, degraded or failing health checks)",
                              "no_upstream");
  }

  const BackendState* admitted_backend = nullptr;
  int budget_retry_after = 0;
  bool any_tried = false;
  for (size_t i = 0; i < plan.size(); ++i) {
    UpstreamState& u = *plan[i];
    const BackendState& b = u.backend;
    if (&b != admitted_backend) {
      if (b.budget) {
        const BudgetVerdict v = b.budget->try_admit(Clock::now());
        if (!v.allowed) {
          metrics_.budget_rejections.with({"backend", b.config.name}).inc();
          log::warn("budget exceeded", {{"request_id", req.request_id}, {"scope", "backend"}, {"backend", b.config.name},
                                        {"limit", v.exceeded}, {"retry_after_s", std::to_string(v.retry_after_s)}});
          budget_retry_after = budget_retry_after == 0 ? v.retry_after_s : std::min(budget_retry_after, v.retry_after_s);
          while (i + 1 < plan.size() && &plan[i + 1]->backend == &b) ++i;  // skip the rest of this backend
          continue;
        }
      }
      admitted_backend = &b;
    }
    if (!fleet_.admit(u, Clock::now())) continue;  // its breaker opened meanwhile
    if (any_tried) {
      ++outcome.failovers;
    }
    any_tried = true;
    ++outcome.attempts;
    outcome.backend = b.config.name;
    outcome.upstream = u.label;

    const auto attempt_start = Clock::now();
    UpstreamCall call(u.pool, b.config.timeouts, [&ex] { return ex.peer_closed(); });
    UpstreamRequest up_req;
    up_req.path = path;
    up_req.body = ctx.body;
    up_req.headers = upstream_headers(u, req);
    std::string failure;
    FailureKind kind = FailureKind::bad_response;
    bool failed = false;
    try {
      call.start(up_req);
    } catch (const UpstreamFailure& f) {
      failed = true;
      kind = f.kind();
      failure = f.what();
    }
    auto record_attempt = [&](const std::string& result) { metrics_.attempts.with({b.config.name, u.label, result}).inc(); };
    auto give_up_on = [&](const std::string& result, const std::string& why, bool breaker_failure) {
      record_attempt(result);
      if (breaker_failure) fleet_.on_failure(u, why);
      else fleet_.on_abandon(u);
      ctx.failures.emplace_back(u.label, why);
      ctx.last_was_timeout = result == "timeout";
      metrics_.failovers.with({b.config.name, u.label, result}).inc();
      log::warn("upstream attempt failed", {{"request_id", req.request_id}, {"backend", b.config.name}, {"upstream", u.label},
                                            {"outcome", result}, {"error", why},
                                            {"next", i + 1 < plan.size() ? plan[i + 1]->label : std::string("-")}});
    };
    // The client left: no fault of the upstream's. A stream already begun is ended, else 499.
    auto client_left = [&](bool stream_begun) {
      fleet_.on_abandon(u);
      record_attempt("cancelled");
      outcome.error = "client went away";
      ex.set_close_after();
      if (stream_begun) ex.end_stream();
      else ex.respond(499, "application/json", "");
    };
    // Reachable and answering, but the answer failed a quality check: flagged, not a breaker failure.
    auto quality_failed = [&](QualityFlag flag, const std::string& detail) {
      fleet_.flag_quality(u, flag, detail);
      fleet_.on_abandon(u);
      record_attempt("quality");
      ctx.failures.emplace_back(u.label, std::string("quality: ") + to_string(flag) + " (" + detail + ")");
      metrics_.failovers.with({b.config.name, u.label, "quality"}).inc();
    };
    if (failed) {
      if (kind == FailureKind::cancelled) {
        client_left(false);
        return;
      }
      give_up_on(to_string(kind), failure, true);
      continue;
    }

    const int status = call.status();
    if (status >= 500) {
      std::string detail;
      try {
        detail = call.read_all(64 * 1024);
      } catch (const UpstreamFailure&) {
      }
      give_up_on("http_5xx", "HTTP " + std::to_string(status) + (detail.empty() ? "" : ": " + detail.substr(0, 200)), true);
      continue;
    }

    if (!ctx.stream || !call.event_stream() || status != 200) {
      // A whole body: read it (bounded), check it, relay it.
      std::string answer;
      try {
        answer = call.read_all(kMaxBodyBytes);
      } catch (const UpstreamFailure& f) {
        if (f.kind() == FailureKind::cancelled) {
          client_left(false);
          return;
        }
        give_up_on(to_string(f.kind()), f.what(), true);
        continue;
      }
      if (status >= 200 && status < 300) {
        const QualityConfig& q = b.config.quality;
        QualityFlag flag = QualityFlag::none;
        std::string detail;
        if (q.utf8 && !utf8::is_valid(answer)) {
          flag = QualityFlag::utf8;
          detail = "invalid UTF-8 at byte " + std::to_string(utf8::find_invalid(answer));
        } else {
          const CompletionInfo info = inspect_completion_body(answer);
          if (!info.parsed) {
            give_up_on("bad_response", "the upstream's 2xx body is not a JSON object", true);
            continue;
          }
          if (q.empty && info.empty) {
            flag = QualityFlag::empty;
            detail = "no text, reasoning or tool calls in any choice";
          } else {
            flag = check_text(q, info.text, detail);
          }
          if (flag == QualityFlag::none && info.total_tokens) outcome.tokens = *info.total_tokens;
        }
        if (flag != QualityFlag::none) {
          quality_failed(flag, detail);
          continue;
        }
        fleet_.on_success(u, call.head_seconds(), since(attempt_start));
        record_attempt("ok");
      } else {
        fleet_.on_success(u, call.head_seconds(), since(attempt_start));  // alive and answering
        record_attempt("http_4xx");
      }
      auto headers = client_headers(u);
      if (const std::string ra = call.header("Retry-After"); !ra.empty()) headers.emplace_back("Retry-After", ra);
      ex.respond(status, call.content_type().empty() ? "application/json" : call.content_type(), answer, headers);
      outcome.ttfb_s = since(ctx.arrived);
      break;
    }

    // A stream: whole events only, each checked before the client sees it.
    SseSplitter splitter;
    std::vector<std::string> events;
    std::string text;
    std::string batch;
    bool started = false;
    bool saw_done = false;
    bool saw_content = false;
    int64_t content_events = 0;
    std::optional<int64_t> usage;
    const QualityConfig& q = b.config.quality;
    QualityFlag flag = QualityFlag::none;
    std::string flag_detail;
    std::string broken;  // why the stream broke (empty: it did not)
    FailureKind broken_kind = FailureKind::closed;
    bool client_gone = false;
    bool upstream_error_event = false;
    double first_event_s = 0;
    for (;;) {
      std::string bytes;
      bool more = true;
      try {
        more = call.read_some(bytes);
      } catch (const UpstreamFailure& f) {
        broken = f.what();
        broken_kind = f.kind();
        break;
      }
      events.clear();
      if (!splitter.feed(bytes, events)) {
        broken = "an SSE event longer than 1 MiB: the upstream is not speaking SSE";
        broken_kind = FailureKind::bad_response;
        break;
      }
      batch.clear();
      for (const std::string& event : events) {
        if (q.utf8 && !utf8::is_valid(event)) {
          flag = QualityFlag::utf8;
          flag_detail = "invalid UTF-8 in a stream event";
          break;
        }
        const SseEventInfo info = inspect_sse_event(event);
        if (info.done) saw_done = true;
        if (info.error) upstream_error_event = true;
        if (info.total_tokens) usage = info.total_tokens;
        if (!info.text.empty() || info.has_tool_call) {
          saw_content = true;
          ++content_events;
        }
        text += info.text;
        if (text.size() > (64u << 10)) text.erase(0, text.size() - (32u << 10));  // the detectors look at the tail only
        if (!info.text.empty() && (flag = check_text(q, text, flag_detail)) != QualityFlag::none) break;
        batch += event;
      }
      if (flag != QualityFlag::none && !started) break;  // nothing sent yet: fail over
      if (!batch.empty()) {
        if (!started) {
          started = true;
          if (!ex.begin_stream(client_headers(u))) {
            client_gone = true;
            break;
          }
          outcome.ttfb_s = since(ctx.arrived);
          metrics_.time_to_first_byte.with({b.config.name}).observe(outcome.ttfb_s);
          first_event_s = since(attempt_start);
        }
        if (!ex.send_chunk(batch)) {
          client_gone = true;
          break;
        }
      }
      if (flag != QualityFlag::none) break;
      if (!more) break;
    }
    if (client_gone || broken_kind == FailureKind::cancelled) {
      client_left(started);
      return;
    }
    if (!started) {
      // Nothing reached the client: this upstream simply failed; the next one may do better.
      if (flag != QualityFlag::none) {
        quality_failed(flag, flag_detail);
        continue;
      }
      if (broken.empty() && !saw_done) broken = "the stream ended without any event";
      if (!broken.empty()) {
        give_up_on(broken_kind == FailureKind::timeout ? "timeout" : "stream_broken", broken, true);
        continue;
      }
      // Only [DONE] (or nothing but comments): relay it as it is.
      if (!ex.begin_stream(client_headers(u))) return;
      ex.send_chunk("data: [DONE]\n\n");
      ex.end_stream();
      fleet_.on_success(u, call.head_seconds(), since(attempt_start));
      record_attempt("ok");
      break;
    }
    // The client has bytes from this upstream: whatever happens now ends this stream.
    if (flag != QualityFlag::none) {
      fleet_.flag_quality(u, flag, flag_detail);
      fleet_.on_abandon(u);
      record_attempt("quality");
      ex.send_chunk(error_event("The upstream's output failed a quality check (" + std::string(to_string(flag)) + "): " + flag_detail +
                                    "; the stream was cut",
                                std::string("degenerate_output_") + to_string(flag)));
      ex.end_stream();
      outcome.error = std::string("quality: ") + to_string(flag);
    } else if (!broken.empty() || !saw_done) {
      if (broken.empty()) broken = "the upstream ended the stream without [DONE]";
      fleet_.on_failure(u, broken);
      record_attempt("stream_broken");
      log::warn("upstream stream broke after the client got data: ending it with an error event",
                {{"request_id", req.request_id}, {"backend", b.config.name}, {"upstream", u.label}, {"error", broken}});
      ex.send_chunk(error_event("The upstream stream broke: " + broken, "upstream_stream_broken"));
      ex.end_stream();
      outcome.error = "stream broken: " + broken;
    } else {
      if (q.empty && !saw_content && !upstream_error_event) fleet_.flag_quality(u, QualityFlag::empty, "a stream without any text");
      ex.end_stream();
      fleet_.on_success(u, first_event_s, since(attempt_start));
      record_attempt("ok");
    }
    outcome.tokens = usage.value_or(content_events);
    break;
  }

  if (ex.responded()) {
    metrics_.requests.with({outcome.backend, outcome.upstream, std::to_string(ex.status())}).inc();
    if (outcome.tokens > 0) {
      const auto t = Clock::now();
      if (client_window) client_window->add_tokens(outcome.tokens, t);
      if (admitted_backend && admitted_backend->budget) admitted_backend->budget->add_tokens(outcome.tokens, t);
      metrics_.tokens.with({outcome.backend}).inc(static_cast<double>(outcome.tokens));
    }
    return;
  }

  // Nobody answered.
  if (!any_tried && budget_retry_after > 0) {
    if (client_window) client_window->refund(Clock::now());
    outcome.error = "backend budget exceeded";
    metrics_.requests.with({"-", "-", "429"}).inc();
    const ApiError e(429, "rate_limit_exceeded", "Budget exceeded for every backend serving '" + model + "'; retry later", "",
                     "budget_exceeded");
    ex.respond(429, "application/json", error_body(e), {{"Retry-After", std::to_string(budget_retry_after)}});
    return;
  }
  std::string summary;
  for (const auto& [who, why] : ctx.failures) summary += (summary.empty() ? "" : "; ") + who + ": " + why;
  if (summary.empty()) summary = "every upstream's breaker is open";
  outcome.error = summary;
  const int status = ctx.last_was_timeout ? 504 : 502;
  metrics_.requests.with({outcome.backend, "-", std::to_string(status)}).inc();
  const ApiError e(status, "upstream_error", "No upstream for '" + model + "' gave a usable answer: " + summary, "",
                   status == 504 ? "upstream_timeout" : "upstream_failed");
  ex.respond(status, "application/json", error_body(e), {{"Retry-After", "1"}});
}

}  // namespace sanctum::router

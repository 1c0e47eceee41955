#include "router/proxy.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "router/api_dialect.h"
#include "router/upstream_attempt.h"
#include "server/api_error.h"

namespace sanctum::router {

// Order-preserving: a rewritten body keeps the client's key order (tool schemas and call arguments reach the
// chat template in it).
using json = nlohmann::ordered_json;
using server::ApiError;

namespace {

// Just enough parsing to route: the model and whether it streams. The upstream validates the rest.
ProxyRequest read_request(const RouterConfig& config, const server::HttpRequest& req) {
  ProxyRequest r;
  r.path = req.path;
  r.dialect = dialect_of_path(req.path);
  r.body = req.body;
  r.arrived = req.arrived;
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) throw server::bad_request("The request body is not valid JSON", "", "invalid_json");
  if (!body.is_object()) throw server::bad_request("The request body must be a JSON object", "", "invalid_json");
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) throw server::bad_request("'model' must be a string", "model");
    r.requested = m->get<std::string>();
  }
  if (r.requested.empty()) r.requested = config.default_model;
  if (r.requested.empty()) throw server::bad_request("'model' is required", "model", "missing_model");
  r.model = config.resolve(r.requested);
  if (r.model.empty()) throw server::model_not_found(r.requested);
  if (auto s = body.find("stream"); s != body.end() && s->is_boolean())
    r.stream = s->get<bool>() && r.dialect != ApiDialect::tokens && r.dialect != ApiDialect::message_tokens;
  if (r.model != r.requested || !body.contains("model")) {
    body["model"] = r.model;  // the upstream knows the served name, not the alias
    r.body = body.dump();
  }
  return r;
}

}  // namespace

Proxy::Proxy(const RouterConfig& config, RouterMetrics& metrics, Fleet& fleet)
    : config_(config), metrics_(metrics), fleet_(fleet), client_budgets_(config.client_budget, config.client_budgets) {}

void Proxy::handle(server::Exchange& ex, const std::string& identity, ProxyOutcome& outcome) {
  ProxyRequest request = read_request(config_, ex.request());
  ex.model = request.requested;
  const auto now = Clock::now();
  Admission admission;
  if (!admit_client(ex, identity, now, admission, outcome)) return;
  const std::vector<UpstreamState*> plan = choose_upstreams(request.model, now, admission, outcome);
  switch (try_upstreams(ex, plan, request, admission, outcome)) {
    case AttemptResult::done: return record_answer(ex, admission, outcome);
    case AttemptResult::client_gone: return;
    case AttemptResult::next: return answer_unanswered(ex, request, admission, outcome);
  }
}

// The caller's budget first: a refused client must not use up a backend's. False: refused with a 429.
bool Proxy::admit_client(server::Exchange& ex, const std::string& identity, Clock::time_point now, Admission& admission,
                         ProxyOutcome& outcome) {
  admission.client_window = client_budgets_.window(identity);
  if (!admission.client_window) return true;
  const BudgetVerdict v = admission.client_window->try_admit(now);
  if (v.allowed) return true;
  metrics_.budget_rejections.with({"client", "-"}).inc();
  log::warn("budget exceeded", {{"request_id", ex.request().request_id},
                                {"scope", "client"},
                                {"identity", identity},
                                {"limit", v.exceeded},
                                {"retry_after_s", std::to_string(v.retry_after_s)}});
  outcome.error = std::string("client budget: ") + v.exceeded;
  const ApiError e(429, "rate_limit_exceeded",
                   std::string("Budget exceeded for client '") + identity + "': " + v.exceeded + " per window; retry later", "",
                   "budget_exceeded");
  ex.respond(429, "application/json", dialect_error_body(dialect_of_path(ex.request().path), e),
             {{"Retry-After", std::to_string(v.retry_after_s)}});
  return false;
}

// The upstreams to try, in order; none eligible is a 503 and gives the client its admission back.
std::vector<UpstreamState*> Proxy::choose_upstreams(const std::string& model, Clock::time_point now, Admission& admission,
                                                    ProxyOutcome& outcome) {
  std::vector<UpstreamState*> plan = fleet_.plan(model, now);
  if (!plan.empty()) return plan;
  if (admission.client_window) admission.client_window->refund(now);
  metrics_.requests.with({"-", "-", "503"}).inc();
  outcome.error = "no eligible upstream";
  throw server::unavailable("No healthy upstream for model '" + model + "' (breakers open, degraded or failing health checks)",
                            "no_upstream");
}

// Failover: each upstream in turn, past a backend whose budget refuses and an upstream whose breaker
// opened meanwhile, until one answers or the client leaves.
AttemptResult Proxy::try_upstreams(server::Exchange& ex, const std::vector<UpstreamState*>& plan, ProxyRequest& request,
                                   Admission& admission, ProxyOutcome& outcome) {
  for (size_t i = 0; i < plan.size(); ++i) {
    UpstreamState& u = *plan[i];
    const BackendState& b = u.backend;
    if (&b != admission.backend) {
      if (!admit_backend(b, ex.request().request_id, admission)) {
        while (i + 1 < plan.size() && &plan[i + 1]->backend == &b) ++i;  // skip the rest of this backend
        continue;
      }
      admission.backend = &b;
    }
    if (!fleet_.admit(u, Clock::now())) continue;  // its breaker opened meanwhile
    if (admission.any_tried) ++outcome.failovers;
    admission.any_tried = true;
    ++outcome.attempts;
    outcome.backend = b.config.name;
    outcome.upstream = u.label;
    std::string next = i + 1 < plan.size() ? plan[i + 1]->label : std::string("-");
    const AttemptResult result = UpstreamAttempt(fleet_, metrics_, ex, request, outcome, u, std::move(next)).run();
    if (result != AttemptResult::next) return result;
  }
  return AttemptResult::next;
}

// A backend's own budget; a refusal is remembered for the 429 when every backend refuses.
bool Proxy::admit_backend(const BackendState& b, const std::string& request_id, Admission& admission) {
  if (!b.budget) return true;
  const BudgetVerdict v = b.budget->try_admit(Clock::now());
  if (v.allowed) return true;
  metrics_.budget_rejections.with({"backend", b.config.name}).inc();
  log::warn("budget exceeded", {{"request_id", request_id},
                                {"scope", "backend"},
                                {"backend", b.config.name},
                                {"limit", v.exceeded},
                                {"retry_after_s", std::to_string(v.retry_after_s)}});
  const int wait = admission.budget_retry_after;
  admission.budget_retry_after = wait == 0 ? v.retry_after_s : std::min(wait, v.retry_after_s);
  return false;
}

// Counts who answered and charges the tokens relayed to the budgets that admitted the request.
void Proxy::record_answer(const server::Exchange& ex, const Admission& admission, const ProxyOutcome& outcome) {
  metrics_.requests.with({outcome.backend, outcome.upstream, std::to_string(ex.status())}).inc();
  if (outcome.tokens <= 0) return;
  const auto t = Clock::now();
  if (admission.client_window) admission.client_window->add_tokens(outcome.tokens, t);
  if (admission.backend && admission.backend->budget) admission.backend->budget->add_tokens(outcome.tokens, t);
  metrics_.tokens.with({outcome.backend}).inc(static_cast<double>(outcome.tokens));
}

// Nobody answered: a 429 when only budgets stood in the way, else a 502 (504 when the last try timed
// out) that names every upstream's failure.
void Proxy::answer_unanswered(server::Exchange& ex, const ProxyRequest& request, const Admission& admission, ProxyOutcome& outcome) {
  if (!admission.any_tried && admission.budget_retry_after > 0) {
    if (admission.client_window) admission.client_window->refund(Clock::now());
    outcome.error = "backend budget exceeded";
    metrics_.requests.with({"-", "-", "429"}).inc();
    const ApiError e(429, "rate_limit_exceeded", "Budget exceeded for every backend serving '" + request.model + "'; retry later", "",
                     "budget_exceeded");
    ex.respond(429, "application/json", dialect_error_body(request.dialect, e),
               {{"Retry-After", std::to_string(admission.budget_retry_after)}});
    return;
  }
  std::string summary;
  for (const auto& [who, why] : request.failures) summary += (summary.empty() ? "" : "; ") + who + ": " + why;
  if (summary.empty()) summary = "every upstream's breaker is open";
  outcome.error = summary;
  const int status = request.last_was_timeout ? 504 : 502;
  metrics_.requests.with({outcome.backend, "-", std::to_string(status)}).inc();
  const ApiError e(status, "upstream_error", "No upstream for '" + request.model + "' gave a usable answer: " + summary, "",
                   status == 504 ? "upstream_timeout" : "upstream_failed");
  ex.respond(status, "application/json", dialect_error_body(request.dialect, e), {{"Retry-After", "1"}});
}

}  // namespace sanctum::router

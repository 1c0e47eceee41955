#include "server/app.h"

#include <algorithm>
#include <future>
#include <iterator>

#include "base/error.h"
#include "base/log.h"
#include "base/process_memory.h"
#include "base/version.h"
#include "server/auth.h"
#include "server/ui/ui_routes.h"
#include "tensor/host_rows.h"

namespace sanctum::server {

using nlohmann::json;

App::App(ServerOptions options, ServerMetrics& metrics) : options_(std::move(options)), metrics_(metrics) {
  routes_.add("GET", "/health", [this](Exchange& ex, std::string_view) { health(ex); })
      .add("GET", "/health/deep", [this](Exchange& ex, std::string_view) { deep_health(ex); })
      .add("GET", "/metrics",
           [this](Exchange& ex, std::string_view) {
             // The grammar caches grow as requests compute masks: read them at the scrape.
             for (const auto& m : models_)
               if (m->grammars) {
                 const auto s = m->grammars->stats();
                 metrics_.grammar_cache_bytes.with({m->id}).set(static_cast<double>(s.bytes));
                 metrics_.grammar_cache_grammars.with({m->id}).set(static_cast<double>(s.grammars));
               }
             ex.respond(200, "text/plain; version=0.0.4; charset=utf-8", metrics_.registry.render());
           })
      .add("GET", "/v1/models", [this](Exchange& ex, std::string_view) { list_models(ex); })
      .add("GET", "/v1/models/{model}", [this](Exchange& ex, std::string_view id) { get_model(ex, std::string(id)); })
      .add("POST", "/v1/chat/completions", [this](Exchange& ex, std::string_view) { completions(ex, true); })
      .add("POST", "/v1/completions", [this](Exchange& ex, std::string_view) { completions(ex, false); })
      .add("POST", "/v1/messages", [this](Exchange& ex, std::string_view) { messages(ex); })
      .add("POST", "/v1/messages/count_tokens", [this](Exchange& ex, std::string_view) { count_message_tokens(ex); })
      .add("POST", "/v1/responses", [this](Exchange& ex, std::string_view) { responses(ex); })
      .add("GET", "/v1/responses/{id}", [this](Exchange& ex, std::string_view id) { get_response(ex, std::string(id)); })
      .add("DELETE", "/v1/responses/{id}", [this](Exchange& ex, std::string_view id) { delete_response(ex, std::string(id)); })
      .add("POST", "/tokenize", [this](Exchange& ex, std::string_view) { tokenize(ex); })
      .add("POST", "/detokenize", [this](Exchange& ex, std::string_view) { detokenize(ex); });
  if (options_.admin)
    routes_.add("GET", "/admin/adapters", [this](Exchange& ex, std::string_view) { admin_adapters(ex, false); })
        .add("POST", "/admin/adapters", [this](Exchange& ex, std::string_view) { admin_adapters(ex, true); });
  if (options_.ui) ui::add_routes(routes_);
}

App::~App() { stop_engines(); }

void App::add_model(std::unique_ptr<ServedModel> model) { models_.push_back(std::move(model)); }

void App::stop_engines() {
  for (auto& m : models_)
    if (m->engine) m->engine->stop();
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

void App::handle(Exchange& ex) {
  const HttpRequest& req = ex.request();
  inflight_.fetch_add(1);
  metrics_.http_inflight.inc();
  try {
    routes_.dispatch(ex);
  } catch (const ApiError& e) {
    if (!ex.responded()) ex.respond_error(e);
  } catch (const std::exception& e) {
    log::error("internal error", {{"request_id", req.request_id}, {"route", ex.route}, {"error", e.what()}});
    if (!ex.responded()) ex.respond_error(internal_error(req.request_id));
  }
  if (!ex.responded()) ex.respond_error(internal_error(req.request_id));
  const double seconds = seconds_since(req.arrived);
  // Methods come from clients: only known ones become label values, so the series stay bounded.
  static const char* const kMethods[] = {"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"};
  const bool known = std::find(std::begin(kMethods), std::end(kMethods), req.method) != std::end(kMethods);
  metrics_.observe_http(ex.route, known ? req.method : "other", ex.status(), seconds);
  metrics_.http_inflight.dec();
  inflight_.fetch_sub(1);
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f", seconds * 1000.0);
  const ClientParts who = split_client(req.client);
  log::info("access", {{"request_id", req.request_id},
                       {"client", who.address},
                       {"identity", who.identity.empty() ? "-" : who.identity},
                       {"method", req.method},
                       {"route", ex.route},
                       {"path", req.path},
                       {"status", std::to_string(ex.status())},
                       {"model", ex.model.empty() ? "-" : ex.model},
                       {"prompt_tokens", std::to_string(ex.prompt_tokens)},
                       {"completion_tokens", std::to_string(ex.completion_tokens)},
                       {"prefill_ms", ex.prefill_ms < 0 ? "-" : std::to_string(ex.prefill_ms)},
                       {"duration_ms", ms}});
}

void App::health(Exchange& ex) {
  if (draining()) {
    ex.set_close_after();
    ex.respond_json(503, {{"status", "draining"}});
    return;
  }
  // The memory plans are fixed at startup and the live figures are atomics: nothing here waits on an engine.
  // The kernel's resident set counts a KV page once per mapping; pages concurrent sequences share
  // (tensor/host_rows.h) are memory once.
  const size_t resident = resident_bytes();
  const size_t resident_once = resident - std::min(resident, HostRows::duplicate_mapped_bytes());
  nlohmann::json memory = {{"limit_mib",
                            options_.memory_limit_bytes ? nlohmann::json(options_.memory_limit_bytes >> 20) : nlohmann::json(nullptr)},
                           {"resident_mib", static_cast<double>(resident_once) / double(1 << 20)},
                           {"process_mib", static_cast<double>(process_bytes_) / double(1 << 20)}};
  for (const auto& m : models_) memory["models"][m->id] = m->memory.to_json();
  ex.respond_json(200, {{"status", "ok"},
                        {"version", build::version()},
                        {"commit", build::commit()},
                        {"device", device_name(options_.device)},
                        {"memory", memory}});
}

namespace {
// Just waits: a deep probe proves the engine can run one step, nothing about the text.
class ProbeSink : public GenerationSink {
 public:
  bool on_token(int, const TokenOutput&) override { return true; }
  void on_choice_end(int, const GenerationResult& r) override { tokens_ = r.tokens.size(); }
  void on_done(const std::string& error) override { done_.set_value(error); }
  std::future<std::string> future() { return done_.get_future(); }
  size_t tokens() const { return tokens_; }

 private:
  std::promise<std::string> done_;
  size_t tokens_ = 0;
};
}  // namespace

void App::deep_health(Exchange& ex) {
  if (draining()) {
    ex.set_close_after();
    ex.respond_json(503, {{"status", "draining"}});
    return;
  }
  json per_model = json::object();
  bool ok = true;
  for (auto& m : models_) {
    auto sink = std::make_shared<ProbeSink>();
    auto done = sink->future();
    auto job = std::make_shared<InferenceJob>();
    job->request_id = ex.request().request_id;
    int32_t token = m->tokenizer->bos_id() >= 0 ? m->tokenizer->bos_id() : (m->eos_ids.empty() ? 0 : m->eos_ids[0]);
    if (token >= m->engine->model().vocab_size()) token = 0;
    job->prompt = {token};
    job->params.max_tokens = 1;
    job->params.ignore_eos = true;
    job->sink = sink;
    const auto t0 = std::chrono::steady_clock::now();
    std::string status;
    switch (m->engine->submit(job)) {
      case Engine::Admit::queue_full: status = "queue_full"; break;
      case Engine::Admit::stopped: status = "stopped"; break;
      case Engine::Admit::accepted: {
        auto wait = std::chrono::duration<double>(options_.deep_health_timeout);
        if (done.wait_for(wait) != std::future_status::ready) {
          job->cancelled = true;
          status = "timeout";
        } else {
          std::string error = done.get();
          status = error.empty() ? "ok" : "error";
        }
      }
    }
    ok = ok && status == "ok";
    per_model[m->id] = {{"status", status}, {"seconds", seconds_since(t0)}};
  }
  ex.respond_json(ok ? 200 : 503, {{"status", ok ? "ok" : "unhealthy"}, {"models", per_model}});
}

json App::model_card(const ServedModel& m) const {
  // thinking: the template honours chat_template_kwargs.enable_thinking (the chat page offers the switch).
  return {{"id", m.id},
          {"object", "model"},
          {"created", m.created},
          {"owned_by", "sanctum"},
          {"max_model_len", m.context_length},
          {"thinking", m.prompts->thinking()}};
}

void App::list_models(Exchange& ex) {
  json data = json::array();
  for (const auto& m : models_) {
    data.push_back(model_card(*m));
    if (!m->loras) continue;
    // Each adapter as its own model, with vLLM's LoRA fields: parent the base it runs on, root its directory.
    for (const auto& [name, entry] : m->loras->list()) {
      json card = model_card(*m);
      card["id"] = m->id + ":" + name;
      card["parent"] = m->id;
      card["root"] = entry.path;
      data.push_back(std::move(card));
    }
  }
  ex.respond_json(200, {{"object", "list"}, {"data", data}});
}

void App::get_model(Exchange& ex, const std::string& id) {
  if (id.empty()) throw model_not_found(id);  // resolve_model takes "" as the first model
  std::shared_ptr<const ServedLora> lora;
  const ServedModel& m = resolve_model(id, &lora);
  json card = model_card(m);
  if (lora) {
    card["id"] = id;
    card["parent"] = m.id;
    card["root"] = lora->adapter->dir();
  }
  ex.respond_json(200, card);
}

ServedModel& App::resolve_model(const std::string& name, std::shared_ptr<const ServedLora>* lora) {
  check(!models_.empty(), ErrorKind::internal, "no model is loaded");
  if (name.empty()) return *models_.front();
  for (auto& m : models_)
    if (m->id == name) return *m;
  const size_t colon = name.rfind(':');
  if (colon != std::string::npos) {
    const std::string base = name.substr(0, colon), adapter = name.substr(colon + 1);
    for (auto& m : models_) {
      if (m->id != base || !m->loras) continue;
      std::shared_ptr<const ServedLora> found = m->loras->find(adapter);
      if (!found) break;
      if (lora) *lora = std::move(found);
      return *m;
    }
  }
  throw model_not_found(name);
}

void App::set_lora_gauge(const ServedModel& m) {
  metrics_.loras_loaded.with({m.id}).set(m.loras ? static_cast<double>(m.loras->size()) : 0.0);
}

}  // namespace sanctum::server

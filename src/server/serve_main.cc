#include "server/serve_main.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/mapped_file.h"
#include "base/process_memory.h"
#include "base/tuning.h"
#include "base/version.h"
#include "model/model.h"
#include "ops/precision.h"
#include "server/listener.h"
#include "server/lora_specs.h"
#include "server/process_lifecycle.h"
#include "weights/adapters/lora_adapter.h"

namespace sanctum::server {

ModelSpec parse_model_spec(const std::string& arg) {
  ModelSpec spec;
  size_t eq = arg.find('=');
  if (eq != std::string::npos && eq > 0) {
    spec.id = arg.substr(0, eq);
    spec.dir = arg.substr(eq + 1);
  } else {
    spec.dir = arg;
    std::string d = arg;
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    size_t slash = d.find_last_of('/');
    spec.id = slash == std::string::npos ? d : d.substr(slash + 1);
  }
  check(!spec.id.empty() && !spec.dir.empty(), ErrorKind::invalid_argument, "--model " + arg + ": expected DIR or NAME=DIR");
  return spec;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A model loaded, with everything but its engine: the engines start once every model's memory
// is planned.
struct LoadedModel {
  std::unique_ptr<ServedModel> served;
  std::unique_ptr<Model> model;
};

LoadedModel load_served_model(const ModelSpec& spec, const ServerOptions& options) {
  auto m = std::make_unique<ServedModel>();
  m->id = spec.id;
  m->dir = spec.dir;
  m->created = static_cast<int64_t>(std::time(nullptr));
  m->tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(spec.dir));
  std::shared_ptr<const LoraAdapter> adapter;
  if (!spec.adapter_dir.empty()) adapter = LoraAdapter::load(spec.adapter_dir, spec.adapter_verified.get());
  std::unique_ptr<Model> model = load_model(spec.dir, options.device, options.tuning, spec.verified.get(), adapter);
  if (spec.verified) spec.verified->clear();  // the weights are mapped: their descriptors can go
  if (spec.adapter_verified) spec.adapter_verified->clear();
  if (adapter)
    log::info("adapter merged",
              {{"model", spec.id}, {"adapter", spec.adapter_dir}, {"modules", std::to_string(adapter->targets().size())}});
  const ModelConfig& cfg = model->config();
  check(static_cast<int64_t>(m->tokenizer->vocab_size()) <= cfg.vocab_size, ErrorKind::invalid_input,
        spec.dir + ": the tokenizer has " + std::to_string(m->tokenizer->vocab_size()) + " tokens but the model's vocab_size is " +
            std::to_string(cfg.vocab_size));
  m->context_length = cfg.context_limit();
  if (cfg.attention_window > 0 && cfg.context_limit() < cfg.max_position_embeddings)
    log::warn("context capped at the sliding window",
              {{"model", spec.id},
               {"window", std::to_string(cfg.attention_window)},
               {"max_position_embeddings", std::to_string(cfg.max_position_embeddings)},
               {"why", "sliding-window attention is not implemented; within the window it is exact"}});
  if (cfg.has_vision) m->processor = image::load_processor_config(spec.dir);
  m->eos_ids = cfg.eos_token_ids;
  for (int32_t id : m->tokenizer->eos_ids())
    if (std::find(m->eos_ids.begin(), m->eos_ids.end(), id) == m->eos_ids.end()) m->eos_ids.push_back(id);
  m->prompts = std::make_unique<PromptBuilder>(*m->tokenizer);
  m->tool_parser = options.tool_parser ? *options.tool_parser : detect_tool_parser(m->tokenizer->chat_template(), *m->tokenizer);
  log::info("tool-call format", {{"model", spec.id},
                                 {"tool_parser", tool_parser_name(m->tool_parser)},
                                 {"source", options.tool_parser ? "--tool-parser" : "chat template"}});
  return {std::move(m), std::move(model)};
}

// Every model's memory plan under the flags; with --memory-limit-mb, the bounds fitted under it beside
// the process's own memory, which this returns. Each model's grammar cache is made here, bounded by
// its plan.
size_t plan_memory(std::vector<LoadedModel>& loaded, const ServerOptions& options) {
  std::vector<MemoryPlan> plans;
  for (const LoadedModel& l : loaded) {
    const int64_t piece = options.prefill_chunk > 0 ? options.prefill_chunk : l.model->prefill_chunk();
    plans.push_back(sanctum::plan_memory(*l.model, options.state_bytes, options.prompt_cache_bytes, piece));
    plans.back().grammar_cache = options.grammar_cache_bytes;
  }
  const size_t process = process_memory(resident_bytes(), mapped_resident_bytes() + weight_copy_bytes());
  log::info("process memory", {{"mib", std::to_string(process >> 20)}, {"what", "resident besides the models, counted in the limit"}});
  if (options.memory_limit_bytes > 0)
    fit_memory_limit(plans, options.memory_limit_bytes, options.state_bytes_given, options.prompt_cache_given, options.grammar_cache_given,
                     process);
  for (size_t i = 0; i < loaded.size(); ++i) {
    ServedModel& m = *loaded[i].served;
    m.grammars = std::make_unique<GrammarCache>(*m.tokenizer, static_cast<size_t>(loaded[i].model->config().vocab_size), m.eos_ids,
                                                plans[i].grammar_cache);
    loaded[i].served->memory = plans[i];
    log::info("memory plan", {{"model", loaded[i].served->id}, {"plan", plans[i].to_json().dump()}});
  }
  return process;
}

void start_engine(LoadedModel& l, const ServerOptions& options, ServerMetrics& metrics) {
  ServedModel& m = *l.served;
  EngineOptions engine;
  engine.max_queue = options.max_queue;
  engine.prompt_cache_bytes = m.memory.prompt_cache;
  engine.max_seqs = options.max_seqs;
  engine.state_bytes = m.memory.state_bound;
  engine.cache_yields_to_state = m.memory.cache_yields_to_state;
  engine.max_batch_tokens = options.max_batch_tokens > 0 ? options.max_batch_tokens : options.prefill_chunk;
  m.engine = std::make_unique<Engine>(m.id, std::move(l.model), engine, metrics.engine);
  for (const auto& [part, bytes] : {std::pair<const char*, size_t>{"weights", m.memory.weights},
                                    {"state_bound", m.memory.state_bound},
                                    {"prompt_cache", m.memory.prompt_cache},
                                    {"grammar_cache", m.memory.grammar_cache},
                                    {"scratch", m.memory.scratch}})
    metrics.memory_plan.with({m.id, part}).set(static_cast<double>(bytes));
}

// The --lora flags and --lora-list file applied to every model's adapter set (at start-up, and again
// on SIGHUP: each model's set changes whole or not at all).
void apply_loras(App& app, const ServerOptions& options) {
  std::vector<std::string> ids;
  for (const auto& m : app.models()) ids.push_back(m->id);
  LoraLists lists = read_lora_lists(options.loras, options.lora_list, ids);
  for (const auto& m : app.models()) {
    const std::string changes = m->loras->apply(lists[m->id]);
    app.set_lora_gauge(*m);
    log::info("adapters applied", {{"model", m->id}, {"changes", changes}, {"loaded", std::to_string(m->loras->size())}});
  }
}

// Every model gets an adapter set when --lora, --lora-list or --admin is given.
void start_loras(App& app, const ServerOptions& options) {
  if (options.loras.empty() && options.lora_list.empty() && !options.admin) return;
  std::vector<std::string> ids;
  for (const auto& m : app.models()) ids.push_back(m->id);
  const LoraLists lists = read_lora_lists(options.loras, options.lora_list, ids);
  for (const auto& m : app.models()) {
    auto it = lists.find(m->id);
    const auto given = static_cast<int64_t>(it == lists.end() ? 0 : it->second.size());
    const int64_t max = options.max_loras >= 0 ? options.max_loras : std::max<int64_t>(given, options.admin ? 4 : 0);
    check(given <= max, ErrorKind::invalid_argument,
          std::to_string(given) + " adapters are given for model '" + m->id + "', more than --max-loras " + std::to_string(max) +
              ": raise --max-loras or list fewer");
    m->loras = std::make_unique<LoraRegistry>(m->engine->model(), max, options.max_lora_rank, options.lora_gate);
  }
  apply_loras(app, options);
}

}  // namespace

int run_server(const ServerOptions& options, const std::vector<ModelSpec>& models, const std::vector<PreBindCheck>& checks,
               ListenerSecurity security) {
  check(!models.empty(), ErrorKind::invalid_argument, "at least one --model DIR is required");
  for (size_t i = 0; i < models.size(); ++i)
    for (size_t j = i + 1; j < models.size(); ++j)
      check(models[i].id != models[j].id, ErrorKind::invalid_argument, "two models are named '" + models[i].id + "'; use NAME=DIR");

  // Signals are taken by sigwait on this thread only: block them before any other thread starts.
  const sigset_t signals = block_process_signals();

  log::info("starting", {{"version", build::version()},
                         {"commit", build::commit()},
                         {"cuda", build::cuda_built() ? "on" : "off"},
                         {"device", device_name(options.device)},
                         {"matmul_precision", ops::matmul_precision_name(ops::matmul_precision())},
                         {"tuning", options.tuning == Tuning{} ? "defaults" : options.tuning.differences()}});
  ServerMetrics metrics;
  metrics.model_loaded.set(0);
  for (const PreBindCheck& c : checks) {
    const auto t0 = std::chrono::steady_clock::now();
    c.run();
    metrics.startup_seconds.with({c.phase}).observe(seconds_since(t0));
    log::info("start-up check passed", {{"phase", c.phase}, {"seconds", std::to_string(seconds_since(t0))}});
  }

  App app(options, metrics);
  std::vector<LoadedModel> loaded;
  for (const ModelSpec& spec : models) {
    const auto t0 = std::chrono::steady_clock::now();
    loaded.push_back(load_served_model(spec, options));
    metrics.startup_seconds.with({"model_load"}).observe(seconds_since(t0));
    log::info("model loaded", {{"model", spec.id},
                               {"dir", spec.dir},
                               {"device", device_name(options.device)},
                               {"seconds", std::to_string(seconds_since(t0))}});
  }
  app.set_process_memory(plan_memory(loaded, options));
  for (LoadedModel& l : loaded) {
    start_engine(l, options, metrics);
    app.add_model(std::move(l.served));
  }
  start_loras(app, options);

  std::shared_ptr<TlsContext> tls = security.tls;
  Listener listener(app, std::move(security));
  listener.bind();
  listener.start();
  metrics.model_loaded.set(1);
  log::info("listening", {{"addresses", join_addresses(listener.endpoints(false))},
                          {"tls_addresses", join_addresses(listener.endpoints(true))},
                          {"models", std::to_string(models.size())}});

  const bool reread_loras = app.models().front()->loras != nullptr;
  const int sig = wait_for_stop_signal(signals, tls.get(), [&] {
    if (!reread_loras) return;
    try {
      apply_loras(app, options);
    } catch (const std::exception& e) {
      log::error("SIGHUP: adapter list refused, the adapters loaded before keep serving", {{"error", e.what()}});
    }
  });
  log::info("shutting down: draining in-flight requests",
            {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}, {"inflight", std::to_string(app.inflight())}});
  app.begin_drain();
  listener.stop_accepting();
  if (const int left = wait_for_drain([&] { return app.inflight(); }, options.drain_timeout); left > 0)
    log::warn("drain timeout: cancelling what is left", {{"inflight", std::to_string(left)}});
  app.stop_engines();
  listener.close_connections(2.0);
  metrics.model_loaded.set(0);
  log::info("stopped");
  if (listener.open_connections() > 0) {
    // A connection thread is stuck writing to a client that stopped reading: do not wait on it.
    std::fflush(nullptr);
    std::_Exit(0);
  }
  return 0;
}

}  // namespace sanctum::server

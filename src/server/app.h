#pragma once
// The request router and the served models. Health, model list and metrics are answered right on
// the connection thread from state that never waits on an inference queue; completions go through
// the model's Engine.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/tuning.h"
#include "engine/spec/prompt_lookup.h"

#include "chat/prompt_builder.h"
#include "chat/tools/tool_call_parser.h"
#include "engine/engine.h"
#include "engine/memory_plan.h"
#include "image/processor_config.h"
#include "server/auth.h"
#include "server/exchange.h"
#include "server/grammar_cache.h"
#include "server/lora_registry.h"
#include "server/openai_request.h"
#include "server/request_handler.h"
#include "server/response_store.h"
#include "server/route_table.h"
#include "server/server_metrics.h"
#include "server/text_sink.h"
#include "tensor/dtype.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::server {

struct ServerOptions : ListenOptions {
  size_t max_queue = 16;         // waiting requests per model (the running batch not counted)
  int max_seqs = 16;             // --max-seqs: sequences in a model's running batch
  int64_t max_batch_tokens = 0;  // --max-batch-tokens: tokens per forward step; 0: the prefill chunk
  size_t state_bytes = 0;        // --kv-cache-mb: the running sequences' state at their longest; 0: no bound
  int stream_flush_tokens = 1;
  double drain_timeout = 30.0;  // seconds in-flight requests get after SIGTERM
  int default_max_tokens = 512;
  double deep_health_timeout = 10.0;
  bool speculate = true;                          // prompt-lookup speculation (exact; backs off when it does not pay)
  spec::PromptLookupParams lookup;                // --pld-max-draft / --pld-ngram
  size_t prompt_cache_bytes = 1u << 30;           // --prompt-cache-mb; 0 disables prompt-cache reuse
  size_t memory_limit_bytes = 0;                  // --memory-limit-mb: the bounds above are fitted under it; 0: none
  bool state_bytes_given = false;                 // --kv-cache-mb was given (--memory-limit-mb leaves it)
  bool prompt_cache_given = false;                // --prompt-cache-mb was given
  size_t grammar_cache_bytes = 0;                 // --grammar-cache-mb: compiled grammars and their masks, per model
  bool grammar_cache_given = false;               // --grammar-cache-mb was given (--memory-limit-mb leaves it)
  int prefill_chunk = 0;                          // --prefill-chunk: prompt tokens per forward; 0: the model's
  Device device = Device::cpu;                    // --device: where every served model's weights and state live
  Tuning tuning;                                  // --tune / SANCTUM_TUNE: every served model's optimizations
  std::optional<ToolParserKind> tool_parser;      // --tool-parser; unset: each model's is detected
  bool ui = true;                                 // the chat page at GET / (--no-ui turns it off)
  ImageOptions images;                            // --max-image-pixels, --max-images-per-request, --allow-image-urls
  std::vector<std::string> loras;                 // --lora [MODEL:]NAME=DIR: adapters served per request
  std::string lora_list;                          // --lora-list FILE: more of them, re-read on SIGHUP
  int64_t max_loras = -1;                         // --max-loras: resident adapters per model; -1: as many as given
  int64_t max_lora_rank = 64;                     // --max-lora-rank: the largest rank an adapter may have
  LoraGate lora_gate;                             // --lora-manifest [--lora-manifest-pubkey P]
  bool admin = false;                             // --admin: GET/POST /admin/adapters exist
  std::vector<std::string> admin_identities;      // --admin-identity: mTLS client CNs the admin endpoints accept
  std::shared_ptr<const BearerAuth> admin_token;  // --auth-token-file's token, which the admin endpoints accept
};

struct ServedModel {
  std::string id;  // what requests name in `model`
  std::string dir;
  int64_t created = 0;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<PromptBuilder> prompts;  // over `tokenizer`: the checkpoint's chat template, or ChatML
  int64_t context_length = 0;
  std::vector<int32_t> eos_ids;
  ToolParserKind tool_parser = ToolParserKind::none;  // the tool-call format its output is parsed with
  std::unique_ptr<GrammarCache> grammars;             // over `tokenizer`: constrained output (server/request_constraint.h)
  std::unique_ptr<Engine> engine;
  MemoryPlan memory;                                // engine/memory_plan.h: what its memory is made of
  std::optional<image::ProcessorConfig> processor;  // its preprocessor_config.json, when it has a vision tower
  std::unique_ptr<LoraRegistry> loras;              // adapters served per request as `id`:NAME
};

// A chat or completion job submitted to its model's engine, and what its handler follows it with.
struct Generation {
  ServedModel* model = nullptr;
  std::string model_name;  // as the request named it: the model's id, or id:ADAPTER
  std::shared_ptr<InferenceJob> job;
  std::shared_ptr<TextSink> sink;
  int completion_tokens = 0;  // every choice's, once followed to the end
};

class App : public RequestHandler {
 public:
  App(ServerOptions options, ServerMetrics& metrics);
  ~App() override;

  void add_model(std::unique_ptr<ServedModel> model);
  // Answers one request; never throws (faults become 500s, logged with the request id).
  void handle(Exchange& ex) override;

  void begin_drain() { draining_ = true; }
  bool draining() const override { return draining_.load(); }
  const ListenOptions& listen_options() const override { return options_; }
  void observe_refused(const std::string& route, int status) override { metrics_.observe_http(route, "-", status, 0.0); }
  int inflight() const { return inflight_.load(); }
  void stop_engines();

  const ServerOptions& options() const { return options_; }
  // The process's own memory besides the models at startup (engine/memory_plan.h), for /health.
  void set_process_memory(size_t bytes) { process_bytes_ = bytes; }
  ServerMetrics& metrics() { return metrics_; }
  // The served models, for start-up and SIGHUP (adapter lists); not for request paths.
  const std::vector<std::unique_ptr<ServedModel>>& models() const { return models_; }
  void set_lora_gauge(const ServedModel& m);

 private:
  void health(Exchange& ex);
  void deep_health(Exchange& ex);
  void list_models(Exchange& ex);
  void get_model(Exchange& ex, const std::string& id);
  void completions(Exchange& ex, bool chat);
  void messages(Exchange& ex);  // server/messages_handlers.cc
  void count_message_tokens(Exchange& ex);
  void responses(Exchange& ex);  // server/responses_handlers.cc
  void get_response(Exchange& ex, const std::string& id);
  void delete_response(Exchange& ex, const std::string& id);
  void tokenize(Exchange& ex);  // server/tokenize_handlers.cc
  void detokenize(Exchange& ex);
  // The chat and completions path that the other APIs translate their requests into
  // (server/openai_handlers.cc): checks the request against its model, builds the prompt and
  // submits the job. follow() then hands each choice's deltas to `on_delta` until the job ends;
  // false when the client left (the job is cancelled, the exchange answered or closed). `error`
  // is set on an internal fault.
  Generation start_generation(Exchange& ex, const OpenAiRequest& r);
  bool follow(Exchange& ex, Generation& g, bool stream, const std::function<void(ChoiceDelta&)>& on_delta, std::string& error);
  // `name` is a model's id, or MODEL:ADAPTER for one of its per-request adapters (then set into *lora,
  // when given). Unknown names of either kind: 404 model_not_found naming them.
  ServedModel& resolve_model(const std::string& name, std::shared_ptr<const ServedLora>* lora = nullptr);
  void admin_adapters(Exchange& ex, bool post);  // server/admin_handlers.cc
  void require_admin(const Exchange& ex) const;
  nlohmann::json model_card(const ServedModel& m) const;

  ServerOptions options_;
  size_t process_bytes_ = 0;
  ServerMetrics& metrics_;
  std::vector<std::unique_ptr<ServedModel>> models_;
  RouteTable<> routes_;
  ResponseStore stored_responses_;  // /v1/responses kept for previous_response_id
  std::atomic<bool> draining_{false};
  std::atomic<int> inflight_{0};
};

}  // namespace sanctum::server

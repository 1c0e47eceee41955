// POST /v1/chat/completions and /v1/completions: parse, build the prompt, queue the job, then
// either stream SSE chunks or collect one body. The connection thread watches the socket while it
// waits, so a client that leaves cancels its generation within a step. start_generation() and
// follow() are the path the Messages and Responses APIs translate into as well.
#include <atomic>
#include <ctime>
#include <random>

#include "server/app.h"
#include "server/openai_response.h"
#include "server/request_constraint.h"
#include "server/request_prompt.h"
#include "server/text_sink.h"

namespace sanctum::server {

using nlohmann::json;

namespace {

constexpr auto kPollSlice = std::chrono::milliseconds(20);
constexpr const char* kFingerprint = "fp_sanctum_0_1";

std::string response_id(bool chat) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = static_cast<uint64_t>(std::time(nullptr));
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s-%08llx%08llx", chat ? "chatcmpl" : "cmpl", static_cast<unsigned long long>(salt & 0xffffffffu),
                static_cast<unsigned long long>(++counter));
  return buf;
}

int resolve_max_tokens(const ServedModel& m, const OpenAiRequest& r, size_t prompt_tokens, int default_max) {
  const int64_t ctx = m.context_length > 0 ? m.context_length : (int64_t{1} << 30);
  const int64_t room = ctx - static_cast<int64_t>(prompt_tokens);
  const char* param = r.chat ? "messages" : "prompt";
  if (room <= 0)
    throw bad_request("The prompt has " + std::to_string(prompt_tokens) + " tokens; this model's context is " + std::to_string(ctx) +
                          " tokens",
                      param, "context_length_exceeded");
  if (r.max_tokens) {
    if (*r.max_tokens > room)
      throw bad_request("max_tokens " + std::to_string(*r.max_tokens) + " plus the prompt's " + std::to_string(prompt_tokens) +
                            " tokens exceeds this model's context of " + std::to_string(ctx),
                        r.max_tokens ? "max_tokens" : param, "context_length_exceeded");
    return *r.max_tokens;
  }
  return static_cast<int>(std::min<int64_t>(default_max, room));
}

// A job that could never be admitted under --kv-cache-mb, even alone, is a 400 now, not a wait or
// an overrun of the bound. A max_tokens the client left to the server shrinks to what fits.
void fit_state_bound(const Engine& engine, InferenceJob& job, bool max_tokens_given, const char* prompt_param) {
  const size_t limit = engine.options().state_bytes;
  if (limit == 0 || engine.reserve_bytes(job) <= limit) return;
  if (!max_tokens_given) {
    int lo = 0, hi = job.params.max_tokens;  // the most that fits lies in [lo, hi)
    while (hi - lo > 1) {
      const int mid = lo + (hi - lo) / 2;
      job.params.max_tokens = mid;
      (engine.reserve_bytes(job) <= limit ? lo : hi) = mid;
    }
    job.params.max_tokens = lo;
    if (lo > 0) return;
    job.params.max_tokens = 1;
  }
  const auto mib = [](size_t b) { return std::to_string((b + (size_t{1} << 20) - 1) >> 20); };
  throw bad_request("this request needs " + mib(engine.reserve_bytes(job)) + " MiB of KV cache and state (" +
                        std::to_string(job.prompt.size()) + " prompt tokens + max_tokens " + std::to_string(job.params.max_tokens) +
                        (job.n > 1 ? ", n = " + std::to_string(job.n) : std::string()) +
                        ") and the server bounds the running sequences' state at " + mib(limit) +
                        " MiB (--kv-cache-mb, or what --memory-limit-mb leaves); send a shorter prompt, a smaller max_tokens or n",
                    max_tokens_given ? "max_tokens" : prompt_param, "context_length_exceeded");
}

// Each prepared image at its run of <|image_pad|> tokens (expanded to its token count, in prompt
// order), for the engine to encode and place.
std::vector<JobImage> job_images(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt,
                                 std::vector<image::PreparedImage> prepared) {
  std::vector<JobImage> out;
  if (prepared.empty()) return out;
  const int32_t pad = tokenizer.token_to_id("<|image_pad|>");
  check(pad >= 0, ErrorKind::internal, "a prompt with images but no <|image_pad|> token in the vocabulary");
  size_t at = 0;
  for (image::PreparedImage& p : prepared) {
    while (at < prompt.size() && prompt[at] != pad) ++at;
    const size_t begin = at;
    while (at < prompt.size() && prompt[at] == pad) ++at;
    check(static_cast<int64_t>(at - begin) == p.token_count(), ErrorKind::internal,
          "image placeholders: a run of " + std::to_string(at - begin) + " tokens for an image of " + std::to_string(p.token_count()));
    JobImage j;
    j.offset = static_cast<int64_t>(begin);
    j.token_count = p.token_count();
    j.hash = p.content_hash;
    j.rows = p.rows;
    j.cols = p.cols;
    j.grid = GridThw{p.grid_thw[0], p.grid_thw[1], p.grid_thw[2]};
    j.pixel_values = std::make_shared<const std::vector<float>>(std::move(p.pixel_values));
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

Generation App::start_generation(Exchange& ex, const OpenAiRequest& r) {
  if (draining()) throw unavailable("The server is shutting down", "draining");
  const bool chat = r.chat;
  std::shared_ptr<const ServedLora> lora;
  ServedModel& m = resolve_model(r.model, &lora);
  ex.model = lora ? m.id + ":" + lora->name : m.id;
  if (r.reasoning_effort && m.tokenizer->chat_template().find("reasoning_effort") == std::string::npos)
    throw bad_request("model '" + m.id + "' has a chat template that does not read reasoning_effort; leave it out", "reasoning_effort",
                      "unsupported_parameter");
  const bool parse_tools = chat && !r.tools.offered().is_null();
  if (parse_tools && m.tool_parser == ToolParserKind::none)
    throw bad_request("model '" + m.id + "' has no tool-call format (none was detected from its chat template, or --tool-parser none); " +
                          "start the server with --tool-parser qwen_xml|hermes|mistral, or send no 'tools'",
                      "tools", "unsupported_parameter");
  PromptImages images{m.id, m.processor ? &*m.processor : nullptr, &options_.images, {}};
  BuiltPrompt prompt = request_prompt(*m.prompts, r, m.engine->model().vocab_size(), &images);
  ex.prompt_tokens = static_cast<int>(prompt.ids.size());

  auto job = std::make_shared<InferenceJob>();
  job->request_id = ex.request().request_id;
  job->arrived = ex.request().arrived;
  job->params.max_tokens = resolve_max_tokens(m, r, prompt.ids.size(), options_.default_max_tokens);
  job->params.sampling = r.sampling;
  job->params.ignore_eos = r.ignore_eos;
  job->params.stop_ids = r.stop_token_ids;
  job->params.speculate = options_.speculate;
  job->params.lookup = options_.lookup;
  job->params.prefill_chunk = options_.prefill_chunk;
  job->params.constraint = request_constraint(m, r, prompt);
  job->n = r.n;
  job->seed_given = r.seed_given;
  job->top_logprobs = r.logprobs ? r.top_logprobs : -1;
  job->prompt = std::move(prompt.ids);
  job->images = job_images(*m.tokenizer, job->prompt, std::move(images.prepared));
  job->lora = lora;

  TextSinkOptions so;
  so.tokenizer = m.tokenizer.get();
  so.stop = r.stop;
  so.hidden_ids = r.stop_token_ids;
  if (!r.ignore_eos) so.hidden_ids.insert(so.hidden_ids.end(), m.eos_ids.begin(), m.eos_ids.end());
  // Call tags may be special tokens (Mistral's [TOOL_CALLS] and [ARGS] always are): the parser must
  // see them, so with tools offered the text keeps special tokens, as vLLM does.
  so.skip_special_tokens = r.skip_special_tokens && !parse_tools;
  if (parse_tools) {
    so.tool_parser = m.tool_parser;
    so.tools = r.tools.offered();
    so.parallel_tool_calls = r.tools.parallel;
    so.tool_call_seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  }
  so.want_logprobs = r.logprobs;
  so.flush_tokens = r.stream ? std::max(1, options_.stream_flush_tokens) : 1 << 30;
  so.split_reasoning = chat && m.prompts->thinking();
  so.start_in_reasoning = prompt.start_in_reasoning;
  so.n = r.n;
  so.time_to_first_token = &metrics_.time_to_first_token;
  so.arrived = ex.request().arrived;
  auto sink = std::make_shared<TextSink>(so);
  job->sink = sink;

  fit_state_bound(*m.engine, *job, r.max_tokens.has_value(), chat ? "messages" : "prompt");
  switch (m.engine->submit(job)) {
    case Engine::Admit::queue_full: throw queue_full(m.id);
    case Engine::Admit::stopped: throw unavailable("The model is not serving", "draining");
    case Engine::Admit::accepted: break;
  }
  if (lora) metrics_.lora_requests.with({m.id, lora->name}).inc();
  return Generation{&m, ex.model, std::move(job), std::move(sink), 0};
}

bool App::follow(Exchange& ex, Generation& g, bool stream, const std::function<void(ChoiceDelta&)>& on_delta, std::string& error) {
  bool done = false;
  while (!done) {
    std::vector<SinkEvent> events = g.sink->take(kPollSlice);
    if (events.empty()) {
      if (ex.peer_closed()) g.job->cancelled = true;
      if (g.job->cancelled) {
        ex.set_close_after();
        if (!ex.responded()) ex.respond_error(ApiError(499, "invalid_request_error", "client closed the request"));
        return false;  // the engine drops the job at its next step; the sink outlives us through the job
      }
      continue;
    }
    for (SinkEvent& e : events) {
      if (e.done) {
        done = true;
        error = e.error;
        continue;
      }
      ChoiceDelta& d = e.delta;
      if (d.cancelled) continue;
      g.completion_tokens += d.completion_tokens;
      if (d.finish_reason && d.index == 0) ex.prefill_ms = d.prefill_seconds * 1000.0;
      on_delta(d);
    }
    if (g.job->cancelled && stream) {
      ex.set_close_after();
      return false;
    }
  }
  ex.completion_tokens = g.completion_tokens;
  return true;
}

void App::completions(Exchange& ex, bool chat) {
  if (draining()) throw unavailable("The server is shutting down", "draining");
  const RequestJson body = parse_body(ex.request().body);
  const OpenAiRequest r = chat ? parse_chat_request(body) : parse_completion_request(body);
  Generation g = start_generation(ex, r);
  const ServedModel& m = *g.model;

  ResponseMeta meta{response_id(chat), static_cast<int64_t>(std::time(nullptr)), g.model_name, kFingerprint, chat};
  std::vector<ChoiceText> choices(static_cast<size_t>(r.n));
  std::vector<size_t> text_offsets(static_cast<size_t>(r.n), 0);

  if (r.stream) {
    if (!ex.begin_stream()) {
      g.job->cancelled = true;
      return;
    }
    if (chat) {
      const std::string role = "assistant";
      for (int i = 0; i < r.n; ++i)
        if (!ex.send_event(dump(chunk_json(meta, i, &role, "", "", json(), std::nullopt)))) g.job->cancelled = true;
    }
  }
  auto send = [&](const json& chunk) {
    if (!g.job->cancelled && !ex.send_event(dump(chunk))) g.job->cancelled = true;
  };

  std::string error;
  const bool finished = follow(
      ex, g, r.stream,
      [&](ChoiceDelta& d) {
        const size_t i = static_cast<size_t>(d.index);
        if (!r.stream) return accumulate(choices[i], d);
        json lp = r.logprobs && !d.logprobs.empty() ? logprobs_json(*m.tokenizer, d.logprobs, chat, text_offsets[i]) : json();
        text_offsets[i] += utf8_chars(d.content);
        for (const json& chunk : delta_chunks(meta, d, lp)) send(chunk);
      },
      error);
  if (!finished) return;
  if (!r.stream) {
    if (!error.empty()) throw internal_error(ex.request().request_id);
    ex.respond_json(200, full_response(meta, choices, ex.prompt_tokens, r.logprobs, *m.tokenizer));
    return;
  }
  if (!error.empty()) {
    send(json::parse(error_body(internal_error(ex.request().request_id))));
  } else if (r.include_usage) {
    send(usage_chunk(meta, ex.prompt_tokens, g.completion_tokens));
  }
  if (!g.job->cancelled) ex.send_event("[DONE]");
  ex.end_stream();
}

}  // namespace sanctum::server

// POST /v1/messages: Anthropic's Messages API served by the chat path (server/messages_request.h
// translates, server/messages_response.h answers). Errors take Anthropic's shape with the same
// statuses as the OpenAI routes; the anthropic-version and anthropic-beta headers are not read.
#include "base/log.h"
#include "server/app.h"
#include "server/messages_request.h"
#include "server/messages_response.h"
#include "server/request_prompt.h"

namespace sanctum::server {

namespace {

void respond_anthropic_error(Exchange& ex, const ApiError& e) {
  ex.respond_error(e, anthropic_error_json(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

void App::messages(Exchange& ex) {
  try {
    if (draining()) throw unavailable("The server is shutting down", "draining");
    const MessagesRequest mr = translate_messages_request(parse_body(ex.request().body));
    const OpenAiRequest r = parse_translated(mr.chat);
    Generation g;
    try {
      const ServedModel& m = resolve_model(r.model);
      if (mr.thinking == MessagesRequest::Thinking::enabled && !m.prompts->thinking())
        throw bad_request("model '" + m.id + "' does not think (its chat template writes no <think> blocks); leave 'thinking' out",
                          "thinking", "unsupported_parameter");
      g = start_generation(ex, r);
    } catch (const ApiError& e) {
      throw mr.chat.renamed(e);
    }
    const MessageMeta meta{object_id("msg_"), g.model_name, ex.prompt_tokens, mr.show_thinking};
    MessageEvents events(meta);
    ChoiceText answer;
    auto send = [&](const std::vector<SseEvent>& out) {
      for (const SseEvent& e : out)
        if (!g.job->cancelled && !ex.send_chunk(sse_frame(e))) g.job->cancelled = true;
    };
    if (r.stream) {
      if (!ex.begin_stream()) {
        g.job->cancelled = true;
        return;
      }
      send(events.start());
    }
    std::string error;
    const bool finished = follow(
        ex, g, r.stream,
        [&](ChoiceDelta& d) {
          if (r.stream) send(events.delta(d));
          else accumulate(answer, d);
        },
        error);
    if (!finished) return;
    if (!r.stream) {
      if (!error.empty()) throw internal_error(ex.request().request_id);
      ex.respond(200, "application/json", message_json(meta, answer).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      return;
    }
    if (!error.empty()) send({{"error", anthropic_error_json(internal_error(ex.request().request_id))}});
    ex.end_stream();
  } catch (const ApiError& e) {
    if (ex.responded()) throw;
    respond_anthropic_error(ex, e);
  } catch (const std::exception& e) {
    if (ex.responded()) throw;
    log::error("internal error", {{"request_id", ex.request().request_id}, {"route", ex.route}, {"error", e.what()}});
    respond_anthropic_error(ex, internal_error(ex.request().request_id));
  }
}

// The prompt's token count exactly as POST /v1/messages would build it (template, tools, thinking).
void App::count_message_tokens(Exchange& ex) {
  try {
    const MessagesRequest mr = translate_count_tokens_request(parse_body(ex.request().body));
    const OpenAiRequest r = parse_translated(mr.chat);
    try {
      ServedModel& m = resolve_model(r.model);
      ex.model = m.id;
      if (mr.thinking == MessagesRequest::Thinking::enabled && !m.prompts->thinking())
        throw bad_request("model '" + m.id + "' does not think (its chat template writes no <think> blocks); leave 'thinking' out",
                          "thinking", "unsupported_parameter");
      const BuiltPrompt prompt = request_prompt(*m.prompts, r, m.engine->model().vocab_size());
      ex.prompt_tokens = static_cast<int>(prompt.ids.size());
      ex.respond_json(200, {{"input_tokens", prompt.ids.size()}});
    } catch (const ApiError& e) {
      throw mr.chat.renamed(e);
    }
  } catch (const ApiError& e) {
    respond_anthropic_error(ex, e);
  }
}

}  // namespace sanctum::server

// POST /v1/responses: OpenAI's Responses API served by the chat path (server/responses_request.h
// translates, server/responses_response.h answers). A stored answer's conversation is kept before
// its last event is sent, so a client may chain on it as soon as it has the id.
#include <ctime>

#include "server/app.h"
#include "server/responses_request.h"
#include "server/responses_response.h"

namespace sanctum::server {

void App::responses(Exchange& ex) {
  if (draining()) throw unavailable("The server is shutting down", "draining");
  const ResponsesRequest rr = translate_responses_request(parse_body(ex.request().body), stored_responses_);
  const OpenAiRequest r = parse_translated(rr.chat);
  Generation g;
  try {
    const ServedModel& m = resolve_model(r.model);
    if (rr.reasoning_on && !m.prompts->thinking())
      throw bad_request("model '" + m.id +
                            "' does not reason (its chat template writes no <think> blocks); send reasoning.effort \"none\" or " +
                            "leave it out",
                        "reasoning.effort", "unsupported_parameter");
    g = start_generation(ex, r);
  } catch (const ApiError& e) {
    throw rr.chat.renamed(e);
  }
  ResponseHead head{object_id("resp_"), static_cast<int64_t>(std::time(nullptr)), g.model_name, rr.echo, rr.store, r.sampling.temperature,
                    r.sampling.top_p};
  ResponseOutput output(std::move(head), ex.prompt_tokens);
  auto send = [&](const std::vector<ResponseOutput::json>& events) {
    for (const ResponseOutput::json& e : events) {
      const std::string frame =
          "event: " + e["type"].get<std::string>() + "\ndata: " + e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
      if (!g.job->cancelled && !ex.send_chunk(frame)) g.job->cancelled = true;
    }
  };
  if (r.stream) {
    if (!ex.begin_stream()) {
      g.job->cancelled = true;
      return;
    }
    send(output.start());
  }
  std::string error;
  const bool finished = follow(
      ex, g, r.stream,
      [&](ChoiceDelta& d) {
        std::vector<ResponseOutput::json> events = output.delta(d);
        if (output.finished() && rr.store) {
          nlohmann::ordered_json conversation = rr.conversation;
          conversation.push_back(output.assistant_message());
          stored_responses_.put(output.response()["id"].get<std::string>(), std::move(conversation), output.response());
        }
        if (r.stream) send(events);
      },
      error);
  if (!finished) return;
  if (!r.stream) {
    if (!error.empty()) throw internal_error(ex.request().request_id);
    ex.respond(200, "application/json", output.response().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  if (!error.empty()) send(output.fail(internal_error(ex.request().request_id).what()));
  ex.end_stream();
}

namespace {
ApiError response_not_found(const std::string& id) {
  return ApiError(404, "invalid_request_error", "No response with id '" + id + "' is stored here (never stored, deleted or evicted)",
                  "response_id", "response_not_found");
}
}  // namespace

// GET /v1/responses/{id}: a stored answer as it was answered.
void App::get_response(Exchange& ex, const std::string& id) {
  const auto response = stored_responses_.response(id);
  if (!response) throw response_not_found(id);
  ex.respond(200, "application/json", response->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// DELETE /v1/responses/{id}: forgets it; a later previous_response_id naming it is a 400.
void App::delete_response(Exchange& ex, const std::string& id) {
  if (!stored_responses_.erase(id)) throw response_not_found(id);
  ex.respond_json(200, {{"id", id}, {"object", "response"}, {"deleted", true}});
}

}  // namespace sanctum::server

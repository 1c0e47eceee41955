// POST /v1/responses below HTTP: input items become the chat request the chat path serves (with the
// stored conversation of previous_response_id before them), and the chat path's deltas of scripted
// model output become the response object and the numbered events the openai SDK assembles into it.
#include <gtest/gtest.h>

#include "scripted_output.h"
#include "server/responses_request.h"
#include "server/responses_response.h"

namespace sanctum::server {
namespace {

using json = nlohmann::ordered_json;
using testing::run_scripted;

const std::string kThinkTextCall =
    "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\", \"days\": 2}}\n</tool_call>";

ResponseHead head() {
  ResponseHead h;
  h.id = "resp_test";
  h.created_at = 5;
  h.model = "m";
  h.echo = {{"instructions", "Be brief."}};
  return h;
}

struct Streamed {
  std::vector<json> events;
  json response;  // the object built by the same machine
};

Streamed stream(const std::vector<ChoiceDelta>& deltas) {
  ResponseOutput out(head(), 11);
  Streamed s;
  s.events = out.start();
  for (const ChoiceDelta& d : deltas)
    for (json& e : out.delta(d)) s.events.push_back(std::move(e));
  s.response = out.response();
  return s;
}

json whole(const ChoiceDelta& d) {
  ResponseOutput out(head(), 11);
  out.delta(d);
  return out.response();
}

// What the openai SDK's ResponseStreamState builds: items by output_index, text and argument deltas
// into them, the final object from the last event; checks the numbering and the order it relies on.
json assemble(const std::vector<json>& events) {
  json output = json::array();
  std::vector<bool> done;
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    EXPECT_EQ(e["sequence_number"], i);
    const std::string type = e["type"];
    if (i == 0) {
      EXPECT_EQ(type, "response.created");
    }
    if (type == "response.output_item.added") {
      EXPECT_EQ(e["output_index"], output.size());
      output.push_back(e["item"]);
      done.push_back(false);
      continue;
    }
    if (!e.contains("output_index")) continue;
    const size_t k = e["output_index"];
    EXPECT_LT(k, output.size()) << type;
    EXPECT_FALSE(done[k]) << type;
    json& item = output[k];
    if (e.contains("item_id")) {
      EXPECT_EQ(e["item_id"], item["id"]);
    }
    if (type == "response.content_part.added") {
      item["content"].push_back(e["part"]);
    } else if (type == "response.output_text.delta" || type == "response.reasoning_text.delta") {
      json& text = item["content"][e["content_index"].get<size_t>()]["text"];
      text = text.get<std::string>() + e["delta"].get<std::string>();
    } else if (type == "response.function_call_arguments.delta") {
      item["arguments"] = item["arguments"].get<std::string>() + e["delta"].get<std::string>();
    } else if (type == "response.output_text.done" || type == "response.reasoning_text.done") {
      EXPECT_EQ(e["text"], item["content"][0]["text"]);
    } else if (type == "response.function_call_arguments.done") {
      EXPECT_EQ(e["arguments"], item["arguments"]);
    } else if (type == "response.output_item.done") {
      item["status"] = e["item"]["status"];
      EXPECT_EQ(e["item"], item);
      done[k] = true;
    }
  }
  for (size_t k = 0; k < done.size(); ++k) EXPECT_TRUE(done[k]) << k;
  const json& last = events.back();
  EXPECT_EQ(last["response"]["output"], output);
  return last;
}

std::vector<std::string> types(const std::vector<json>& events) {
  std::vector<std::string> out;
  for (const json& e : events) {
    const std::string t = e["type"];
    if (out.empty() || out.back() != t || t.find(".delta") == std::string::npos) out.push_back(t);
  }
  return out;
}

// Ids are drawn per run: equal up to them.
json without_ids(json response) {
  response.erase("id");
  for (json& item : response["output"]) item.erase("id");
  for (json& item : response["output"])
    if (item["type"] == "function_call") item.erase("call_id");
  return response;
}

TEST(ServerResponses, reasoning_text_and_a_call_become_three_items_streamed_as_the_whole_response) {
  const testing::ScriptedRun run = run_scripted(kThinkTextCall);
  const json r = whole(run.whole);
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_TRUE(r["incomplete_details"].is_null());
  EXPECT_EQ(r["instructions"], "Be brief.");
  const json& output = r["output"];
  ASSERT_EQ(output.size(), 3u) << r.dump(2);
  EXPECT_EQ(output[0]["type"], "reasoning");
  EXPECT_EQ(output[0]["content"], json::parse(R"([{"type": "reasoning_text", "text": "\nThe user wants weather.\n"}])"));
  EXPECT_EQ(output[1]["type"], "message");
  EXPECT_EQ(output[1]["content"], json::parse(R"([{"type": "output_text", "text": "Let me check.\n", "annotations": []}])"));
  EXPECT_EQ(output[2]["type"], "function_call");
  EXPECT_EQ(output[2]["name"], "get_weather");
  EXPECT_EQ(json::parse(output[2]["arguments"].get<std::string>()), json::parse(R"({"city": "Paris", "days": 2})"));
  for (const json& item : output) EXPECT_EQ(item["status"], "completed");
  EXPECT_EQ(r["usage"]["input_tokens"], 11);
  EXPECT_EQ(r["usage"]["output_tokens"], run.whole.completion_tokens);
  EXPECT_EQ(r["usage"]["total_tokens"], 11 + run.whole.completion_tokens);

  const Streamed s = stream(run.stream);
  const std::vector<std::string> expected = {"response.created",
                                             "response.in_progress",
                                             "response.output_item.added",
                                             "response.content_part.added",
                                             "response.reasoning_text.delta",
                                             "response.reasoning_text.done",
                                             "response.content_part.done",
                                             "response.output_item.done",
                                             "response.output_item.added",
                                             "response.content_part.added",
                                             "response.output_text.delta",
                                             "response.output_text.done",
                                             "response.content_part.done",
                                             "response.output_item.done",
                                             "response.output_item.added",
                                             "response.function_call_arguments.delta",
                                             "response.function_call_arguments.done",
                                             "response.output_item.done",
                                             "response.completed"};
  EXPECT_EQ(types(s.events), expected);
  EXPECT_EQ(s.events[0]["response"]["status"], "in_progress");
  EXPECT_TRUE(s.events[0]["response"]["output"].empty());
  const json last = assemble(s.events);
  EXPECT_EQ(last["response"], s.response);
  EXPECT_EQ(without_ids(s.response), without_ids(r));
}

TEST(ServerResponses, a_cut_answer_is_incomplete_with_the_reason) {
  const testing::ScriptedRun run = run_scripted("Hello there", FinishReason::length);
  const json r = whole(run.whole);
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"], json::parse(R"({"reason": "max_output_tokens"})"));
  EXPECT_EQ(r["output"][0]["status"], "incomplete");
  const Streamed s = stream(run.stream);
  EXPECT_EQ(s.events.back()["type"], "response.incomplete");
  assemble(s.events);
  EXPECT_EQ(without_ids(s.response), without_ids(r));
}

TEST(ServerResponses, the_answer_joins_the_conversation_as_one_assistant_turn) {
  ResponseOutput out(head(), 3);
  out.delta(run_scripted(kThinkTextCall).whole);
  const json m = out.assistant_message();
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["content"], "Let me check.\n");
  EXPECT_EQ(m["reasoning_content"], "\nThe user wants weather.\n");
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_EQ(m["tool_calls"][0]["id"], out.response()["output"][2]["call_id"]);
  EXPECT_TRUE(m["tool_calls"][0]["function"]["arguments"].is_string());
}

TEST(ServerResponses, input_items_become_chat_messages_after_the_instructions) {
  const json body = json::parse(R"({
    "model": "m", "instructions": "Be brief.", "max_output_tokens": 9, "temperature": 0.5,
    "tools": [{"type": "function", "name": "get_weather", "description": "Weather.", "parameters": {"type": "object"}, "strict": false}],
    "tool_choice": {"type": "function", "name": "get_weather"}, "parallel_tool_calls": false,
    "text": {"format": {"type": "text"}}, "reasoning": {"effort": "low", "summary": "auto"},
    "input": [
      {"role": "user", "content": "Weather in Paris?"},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Call it."}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
      {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
      {"type": "function_call_output", "call_id": "c1", "output": "18 C"},
      {"role": "user", "content": [{"type": "input_text", "text": "Thanks."}]}]})");
  ResponseStore store;
  const ResponsesRequest r = translate_responses_request(body, store);
  const json messages = json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "Checking.", "reasoning_content": "Call it.", "tool_calls": [
      {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
    {"role": "user", "content": "Thanks."}])");
  EXPECT_EQ(r.chat.body["messages"], messages) << r.chat.body["messages"].dump(2);
  EXPECT_EQ(r.conversation, json(messages.begin() + 1, messages.end()));  // kept without the instructions
  EXPECT_EQ(r.chat.body["max_tokens"], 9);
  EXPECT_EQ(r.chat.body["tools"][0], json::parse(R"({"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                                     "parameters": {"type": "object"}, "strict": false}})"));
  EXPECT_EQ(r.chat.body["tool_choice"], json::parse(R"({"type": "function", "function": {"name": "get_weather"}})"));
  EXPECT_EQ(r.chat.body["response_format"], json::parse(R"({"type": "text"})"));
  EXPECT_EQ(r.chat.body["chat_template_kwargs"], json::parse(R"({"enable_thinking": true})"));
  EXPECT_TRUE(r.reasoning_on);
  EXPECT_EQ(r.echo["tools"], body["tools"]);
}

TEST(ServerResponses, previous_response_id_puts_the_stored_conversation_first) {
  ResponseStore store;
  const json earlier = json::parse(R"([{"role": "user", "content": "I am Ada."}, {"role": "assistant", "content": "Hello Ada."}])");
  store.put("resp_1", earlier);
  const json body = json::parse(R"({"model": "m", "instructions": "New rules.", "previous_response_id": "resp_1", "input": "Who am I?"})");
  const ResponsesRequest r = translate_responses_request(body, store);
  const json& m = r.chat.body["messages"];
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0]["content"], "New rules.");
  EXPECT_EQ(json(m.begin() + 1, m.begin() + 3), earlier);
  EXPECT_EQ(m[3], json::parse(R"({"role": "user", "content": "Who am I?"})"));
  EXPECT_EQ(r.conversation.size(), 3u);
  EXPECT_EQ(r.chat.client_param("messages[1]"), "previous_response_id");
  EXPECT_EQ(r.chat.client_param("messages[3].content"), "input.content");
  EXPECT_EQ(r.chat.client_param("response_format.json_schema.schema"), "text.format.schema");
  EXPECT_EQ(r.chat.client_param("response_format.type"), "text.format.type");
  EXPECT_EQ(r.chat.client_param("max_tokens"), "max_output_tokens");

  try {
    translate_responses_request(json::parse(R"({"input": "x", "previous_response_id": "resp_unknown"})"), store);
    ADD_FAILURE() << "an unknown id was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "previous_response_id");
    EXPECT_EQ(e.code(), "previous_response_not_found");
  }
}

std::string error_param(const json& body) {
  ResponseStore store;
  try {
    parse_translated(translate_responses_request(body, store).chat);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  return "(accepted)";
}

TEST(ServerResponses, errors_name_the_field_the_client_sent) {
  const json base = json::parse(R"({"model": "m", "input": "hi"})");
  auto with = [&](const char* key, const char* value) {
    json b = base;
    b[key] = json::parse(value);
    return error_param(b);
  };
  EXPECT_EQ(error_param(base), "(accepted)");
  EXPECT_EQ(with("some_future_field", "1"), "some_future_field");
  EXPECT_EQ(with("include", R"(["reasoning.encrypted_content"])"), "include");
  EXPECT_EQ(with("background", "true"), "background");
  EXPECT_EQ(with("conversation", "\"c\""), "conversation");
  EXPECT_EQ(with("max_output_tokens", "0"), "max_output_tokens");
  EXPECT_EQ(with("input", "[]"), "input");
  EXPECT_EQ(with("input", R"([{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}])"), "input[0].content[0]");
  EXPECT_EQ(with("input", R"([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{nope"}])"), "input[0].arguments");
  EXPECT_EQ(with("tools", R"([{"type": "web_search"}])"), "tools[0].type");
  EXPECT_EQ(with("tools", R"([{"type": "function", "name": "bad name"}])"), "tools[0].name");
  EXPECT_EQ(with("text", R"({"verbosity": "low"})"), "text.verbosity");
  EXPECT_EQ(with("reasoning", R"({"effort": "extreme"})"), "reasoning.effort");
}

TEST(ServerResponses, the_store_evicts_the_oldest_by_count_and_by_bytes) {
  ResponseStore by_count(2, 1 << 20);
  for (const char* id : {"a", "b", "c"}) by_count.put(id, json::array({{{"role", "user"}, {"content", id}}}));
  EXPECT_FALSE(by_count.get("a"));
  EXPECT_TRUE(by_count.get("b") && by_count.get("c"));

  const json big = json::array({{{"role", "user"}, {"content", std::string(400, 'x')}}});
  ResponseStore by_bytes(100, 1000);
  for (const char* id : {"a", "b", "c"}) by_bytes.put(id, big);
  EXPECT_EQ(by_bytes.size(), 2u);
  EXPECT_FALSE(by_bytes.get("a"));
  EXPECT_LE(by_bytes.bytes(), 1000u);
  by_bytes.put("huge", json::array({{{"role", "user"}, {"content", std::string(2000, 'x')}}}));
  EXPECT_FALSE(by_bytes.get("huge"));  // larger than the whole store: not kept, nothing evicted for it
  EXPECT_EQ(by_bytes.size(), 2u);
}

}  // namespace
}  // namespace sanctum::server

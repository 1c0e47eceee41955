// POST /v1/messages below HTTP: an Anthropic request becomes the chat request the chat path serves
// (messages, tool_use / tool_result, system, thinking, errors named by the client's field), and the
// chat path's deltas of scripted model output become the message and the SSE events the anthropic
// SDK assembles into the same message.
#include <gtest/gtest.h>

#include "scripted_output.h"
#include "server/messages_request.h"
#include "server/messages_response.h"

namespace sanctum::server {
namespace {

using json = nlohmann::ordered_json;
using testing::run_scripted;

const std::string kThinkTextCall =
    "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\", \"days\": 2}}\n</tool_call>";

MessageMeta meta() { return MessageMeta{"msg_test", "m", 11, true}; }

ChoiceText whole(const ChoiceDelta& d) {
  ChoiceText c;
  accumulate(c, d);
  return c;
}

// What the anthropic SDK's stream accumulator builds (lib/streaming/_messages.py), checking the
// event order it relies on: message_start first, deltas only into the open block, message_stop last.
json assemble(const std::vector<SseEvent>& events) {
  json message;
  std::string partial_json;
  bool open = false;
  for (size_t i = 0; i < events.size(); ++i) {
    const SseEvent& e = events[i];
    EXPECT_EQ(e.data["type"], e.name);
    if (i == 0) {
      EXPECT_EQ(e.name, "message_start");
      message = e.data["message"];
    } else if (e.name == "content_block_start") {
      EXPECT_FALSE(open);
      EXPECT_EQ(e.data["index"], message["content"].size());
      message["content"].push_back(e.data["content_block"]);
      open = true;
      partial_json.clear();
    } else if (e.name == "content_block_delta") {
      EXPECT_TRUE(open);
      json& block = message["content"][e.data["index"].get<size_t>()];
      const json& d = e.data["delta"];
      if (d["type"] == "text_delta") block["text"] = block["text"].get<std::string>() + d["text"].get<std::string>();
      else if (d["type"] == "thinking_delta") block["thinking"] = block["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      else if (d["type"] == "input_json_delta") partial_json += d["partial_json"].get<std::string>();
      else ADD_FAILURE() << d.dump();
    } else if (e.name == "content_block_stop") {
      EXPECT_TRUE(open);
      json& block = message["content"][e.data["index"].get<size_t>()];
      if (block["type"] == "tool_use" && !partial_json.empty()) block["input"] = json::parse(partial_json);
      open = false;
    } else if (e.name == "message_delta") {
      message["stop_reason"] = e.data["delta"]["stop_reason"];
      message["stop_sequence"] = e.data["delta"]["stop_sequence"];
      message["usage"]["output_tokens"] = e.data["usage"]["output_tokens"];
    } else if (e.name != "ping") {
      EXPECT_EQ(e.name, "message_stop");
      EXPECT_EQ(i + 1, events.size());
    }
  }
  return message;
}

std::vector<SseEvent> stream_events(const std::vector<ChoiceDelta>& deltas, MessageMeta m = meta()) {
  MessageEvents events(std::move(m));
  std::vector<SseEvent> out = events.start();
  for (const ChoiceDelta& d : deltas)
    for (SseEvent& e : events.delta(d)) out.push_back(std::move(e));
  return out;
}

std::vector<std::string> names(const std::vector<SseEvent>& events) {
  std::vector<std::string> out;
  for (const SseEvent& e : events)
    if (out.empty() || out.back() != e.name || e.name != "content_block_delta") out.push_back(e.name);
  return out;
}

TEST(ServerMessages, thinking_text_and_a_call_become_three_blocks_streamed_as_the_whole_message) {
  const testing::ScriptedRun run = run_scripted(kThinkTextCall);
  const json message = message_json(meta(), whole(run.whole));
  ASSERT_EQ(message["content"].size(), 3u) << message.dump();
  EXPECT_EQ(message["content"][0], json::parse(R"({"type": "thinking", "thinking": "\nThe user wants weather.\n", "signature": ""})"));
  EXPECT_EQ(message["content"][1], json::parse(R"({"type": "text", "text": "Let me check.\n"})"));
  const json& call = message["content"][2];
  EXPECT_EQ(call["type"], "tool_use");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["input"], json::parse(R"({"city": "Paris", "days": 2})"));
  EXPECT_EQ(message["stop_reason"], "tool_use");
  EXPECT_TRUE(message["stop_sequence"].is_null());
  EXPECT_EQ(message["usage"], json::parse(R"({"input_tokens": 11, "output_tokens": )" + std::to_string(run.whole.completion_tokens) + "}"));

  const std::vector<SseEvent> events = stream_events(run.stream);
  const std::vector<std::string> expected = {"message_start",       "content_block_start", "ping",
                                             "content_block_delta", "content_block_stop",  "content_block_start",
                                             "content_block_delta", "content_block_stop",  "content_block_start",
                                             "content_block_delta", "content_block_stop",  "message_delta",
                                             "message_stop"};
  EXPECT_EQ(names(events), expected);
  json streamed = assemble(events);
  streamed["content"][2]["id"] = call["id"];  // each run draws its own call ids
  EXPECT_EQ(streamed, message);
  EXPECT_EQ(events[0].data["message"]["usage"]["output_tokens"], 0);
}

TEST(ServerMessages, stop_reasons_name_a_stop_sequence_and_a_cut) {
  const testing::ScriptedRun stopped = run_scripted("Hello there. STOP and more", FinishReason::stop, {"zzz", "STOP"});
  json m = message_json(meta(), whole(stopped.whole));
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], "STOP");
  EXPECT_EQ(m["content"][0]["text"], "Hello there. ");
  EXPECT_EQ(assemble(stream_events(stopped.stream)), m);

  const testing::ScriptedRun cut = run_scripted("Hello there", FinishReason::length);
  m = message_json(meta(), whole(cut.whole));
  EXPECT_EQ(m["stop_reason"], "max_tokens");
  EXPECT_EQ(assemble(stream_events(cut.stream)), m);

  const testing::ScriptedRun ended = run_scripted("Hello there");
  EXPECT_EQ(message_json(meta(), whole(ended.whole))["stop_reason"], "end_turn");
}

TEST(ServerMessages, omitted_thinking_keeps_the_block_without_its_text) {
  const testing::ScriptedRun run = run_scripted("<think>\nsecret\n</think>\n\nAnswer.");
  MessageMeta m = meta();
  m.show_thinking = false;
  const json message = message_json(m, whole(run.whole));
  EXPECT_EQ(message["content"][0]["thinking"], "");
  EXPECT_EQ(assemble(stream_events(run.stream, m)), message);
}

TEST(ServerMessages, a_conversation_with_tool_use_and_tool_results_becomes_chat_messages) {
  const json body = json::parse(R"({
    "model": "m", "max_tokens": 5, "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}],
    "stop_sequences": ["END"], "temperature": 0.5, "top_k": 4, "metadata": {"user_id": "u1"},
    "tools": [{"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "messages": [
      {"role": "user", "content": "Weather in Paris and Oslo?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "Two calls.", "signature": "x"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "t2", "name": "get_weather", "input": {"city": "Oslo"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "18 C"},
        {"type": "tool_result", "tool_use_id": "t2", "is_error": true, "content": [{"type": "text", "text": "timeout"}]},
        {"type": "text", "text": "Summarize."}]}]})");
  const MessagesRequest r = translate_messages_request(body);
  const json expected = json::parse(R"({
    "model": "m", "max_tokens": 5, "temperature": 0.5, "top_k": 4, "stop": ["END"],
    "messages": [
      {"role": "system", "content": "Be brief.\nUse tools."},
      {"role": "user", "content": "Weather in Paris and Oslo?"},
      {"role": "assistant", "content": "Checking.", "reasoning_content": "Two calls.", "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
        {"id": "t2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
      {"role": "tool", "tool_call_id": "t1", "content": "18 C"},
      {"role": "tool", "tool_call_id": "t2", "content": "Error: timeout"},
      {"role": "user", "content": "Summarize."}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object"}}}],
    "tool_choice": "auto", "parallel_tool_calls": false,
    "chat_template_kwargs": {"enable_thinking": true}})");
  EXPECT_EQ(r.chat.body, expected) << r.chat.body.dump(2);
  const std::vector<std::string> origins = {"system",     "messages[0]", "messages[1]", "messages[2].content[0]", "messages[2].content[1]",
                                            "messages[2]"};
  EXPECT_EQ(r.chat.message_origins, origins);
  EXPECT_EQ(r.thinking, MessagesRequest::Thinking::enabled);
  EXPECT_EQ(parse_translated(r.chat).messages.size(), 6u);  // the chat path takes it as it is
}

TEST(ServerMessages, tool_choice_kinds_map_to_the_chat_choices) {
  auto choice = [](const char* tc) {
    json body = json::parse(R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                                "tools": [{"name": "f", "input_schema": {"type": "object"}}]})");
    body["tool_choice"] = json::parse(tc);
    return translate_messages_request(body).chat.body["tool_choice"];
  };
  EXPECT_EQ(choice(R"({"type": "any"})"), "required");
  EXPECT_EQ(choice(R"({"type": "none"})"), "none");
  EXPECT_EQ(choice(R"({"type": "tool", "name": "f"})"), json::parse(R"({"type": "function", "function": {"name": "f"}})"));
}

std::string error_param(const json& body) {
  try {
    parse_translated(translate_messages_request(body).chat);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  return "(accepted)";
}

TEST(ServerMessages, errors_name_the_field_the_client_sent) {
  const json base = json::parse(R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})");
  auto with = [&](const char* key, const char* value) {
    json b = base;
    b[key] = json::parse(value);
    return error_param(b);
  };
  EXPECT_EQ(error_param(base), "(accepted)");
  EXPECT_EQ(with("some_future_field", "1"), "some_future_field");
  EXPECT_EQ(with("container", "\"c\""), "container");
  EXPECT_EQ(with("metadata", R"({"other": 1})"), "metadata");
  EXPECT_EQ(with("service_tier", "\"priority\""), "service_tier");
  EXPECT_EQ(with("stop_sequences", "[1]"), "stop_sequences");
  EXPECT_EQ(with("temperature", "3"), "temperature");
  EXPECT_EQ(with("tools", R"([{"name": "get weather", "input_schema": {}}])"), "tools[0].name");
  EXPECT_EQ(with("tools", R"([{"name": "f", "input_schema": 3}])"), "tools[0].input_schema");
  EXPECT_EQ(with("tools", R"([{"type": "web_search_20250305", "name": "web_search"}])"), "tools[0].type");
  json unknown_tool = base;
  unknown_tool["tools"] = json::parse(R"([{"name": "f", "input_schema": {"type": "object"}}])");
  unknown_tool["tool_choice"] = json::parse(R"({"type": "tool", "name": "g"})");
  EXPECT_EQ(error_param(unknown_tool), "tool_choice.name");
  EXPECT_EQ(with("thinking", R"({"type": "sometimes"})"), "thinking.type");
  EXPECT_EQ(with("messages", R"([{"role": "system", "content": "x"}])"), "messages[0].role");
  EXPECT_EQ(with("messages", R"([{"role": "user", "content": [{"type": "image", "source": {}}]}])"), "messages[0].content[0].source.type");
  EXPECT_EQ(with("messages", R"([{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": []}]}])"),
            "messages[0].content[0].input");
  json no_max = base;
  no_max.erase("max_tokens");
  EXPECT_EQ(error_param(no_max), "max_tokens");
}

TEST(ServerMessages, chat_path_params_are_renamed_on_whole_segments) {
  ChatTranslation t;
  t.fields = {{"stop", "stop_sequences"}};
  t.tool_fields = {{"parameters", "input_schema"}};
  t.add_message(json::object(), "system");
  t.add_message(json::object(), "messages[4].content[1]");
  EXPECT_EQ(t.client_param("stop"), "stop_sequences");
  EXPECT_EQ(t.client_param("stop_token_ids"), "stop_token_ids");
  EXPECT_EQ(t.client_param("messages[1].tool_call_id"), "messages[4].content[1].tool_call_id");
  EXPECT_EQ(t.client_param("messages[9]"), "messages");
  EXPECT_EQ(t.client_param("messages"), "messages");
  EXPECT_EQ(t.client_param("tools[2].function.parameters"), "tools[2].input_schema");
  EXPECT_EQ(t.client_param("tools[2].function.name"), "tools[2].name");
  EXPECT_EQ(t.client_param("tool_choice.function.name"), "tool_choice.name");
}

TEST(ServerMessages, errors_take_anthropics_shape_and_types) {
  EXPECT_EQ(anthropic_error_json(bad_request("no", "x")),
            json::parse(R"({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}})"));
  EXPECT_EQ(anthropic_error_type(404), "not_found_error");
  EXPECT_EQ(anthropic_error_type(401), "authentication_error");
  EXPECT_EQ(anthropic_error_type(429), "rate_limit_error");
  EXPECT_EQ(anthropic_error_type(503), "overloaded_error");
  EXPECT_EQ(anthropic_error_type(500), "api_error");
  EXPECT_EQ(sse_frame({"ping", {{"type", "ping"}}}), "event: ping\ndata: {\"type\":\"ping\"}\n\n");
}

}  // namespace
}  // namespace sanctum::server

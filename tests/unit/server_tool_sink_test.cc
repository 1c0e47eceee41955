// Tool calls end to end below HTTP: model output as tokens of a real tokenizer goes through the chat
// sink (detokenizer, stop strings, <think> split, tool-call parser) and comes out as the JSON a
// client receives, streamed (delta.tool_calls: index, id, type and name first, then arguments) and
// whole (message.tool_calls, content null when only calls were made), with finish_reason
// "tool_calls" only when a call was parsed.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "server/openai_response.h"
#include "server/text_sink.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::server {
namespace {

using nlohmann::json;

const Tokenizer& qwen3() {
  static const Tokenizer t = Tokenizer::load(SANCTUM_TEST_DATA_DIR "/tokenizers/qwen3");
  return t;
}

const Tokenizer& tekken() {
  static const Tokenizer t = Tokenizer::load(SANCTUM_TEST_DATA_DIR "/tokenizers/tekken_nemo");
  return t;
}

std::string read_template(const std::string& name) {
  std::ifstream in(SANCTUM_TEST_DATA_DIR "/chat_templates/" + name + ".jinja");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

const nlohmann::ordered_json kTools = nlohmann::ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}
])");

struct SinkRun {
  std::vector<json> chunks;  // streamed
  json response;             // whole
};

// Feeds `output` token by token through a sink configured as the chat handler does, and renders
// the result both ways.
SinkRun run_sink(const std::string& output, ToolParserKind parser, FinishReason finish = FinishReason::stop, bool parallel = true,
                 bool start_in_reasoning = false, const Tokenizer& tok = qwen3(), bool skip_special_tokens = true) {
  const std::vector<int32_t> ids = tok.encode(output, /*add_special_tokens=*/false, /*parse_special=*/true);
  const ResponseMeta meta{"chatcmpl-test", 0, "m", "fp", true};
  SinkRun run;
  ChoiceText whole;
  for (bool stream : {true, false}) {
    TextSinkOptions so;
    so.tokenizer = &tok;
    so.skip_special_tokens = skip_special_tokens;
    so.flush_tokens = stream ? 1 : 1 << 30;
    so.split_reasoning = true;
    so.start_in_reasoning = start_in_reasoning;
    so.tool_parser = parser;
    so.tools = kTools;
    so.parallel_tool_calls = parallel;
    so.tool_call_seed = 5;
    TextSink sink(so);
    for (int32_t id : ids) {
      TokenOutput t;
      t.token = id;
      sink.on_token(0, t);
    }
    GenerationResult result;
    result.tokens = ids;
    result.finish = finish;
    sink.on_choice_end(0, result);
    sink.on_done("");
    for (SinkEvent& e : sink.take(std::chrono::milliseconds(0))) {
      if (e.done) continue;
      if (stream) {
        for (json& c : delta_chunks(meta, e.delta, json())) run.chunks.push_back(std::move(c));
      } else {
        whole.content += e.delta.content;
        whole.reasoning += e.delta.reasoning;
        add_tool_call_pieces(whole.tool_calls, e.delta.tool_calls);
        if (e.delta.finish_reason) whole.finish_reason = *e.delta.finish_reason;
      }
    }
  }
  run.response = full_response(meta, {whole}, 3, false, tok);
  return run;
}

// What a streaming client assembles: content, reasoning, calls, finish_reason; checks that each
// call's first piece carries index, id, type and name, and later pieces only arguments.
struct Assembled {
  std::string content, reasoning, finish_reason;
  std::vector<json> calls;  // {id, name, arguments}
};

Assembled assemble(const std::vector<json>& chunks) {
  Assembled a;
  for (const json& chunk : chunks) {
    const json& choice = chunk["choices"][0];
    const json& delta = choice["delta"];
    if (delta.contains("content")) a.content += delta["content"].get<std::string>();
    if (delta.contains("reasoning_content")) a.reasoning += delta["reasoning_content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) a.finish_reason = choice["finish_reason"];
    if (!delta.contains("tool_calls")) continue;
    for (const json& piece : delta["tool_calls"]) {
      const size_t index = piece["index"].get<size_t>();
      if (index == a.calls.size()) {
        EXPECT_TRUE(piece.contains("id") && piece["type"] == "function" && piece["function"].contains("name")) << piece.dump();
        a.calls.push_back({{"id", piece["id"]}, {"name", piece["function"]["name"]}, {"arguments", piece["function"]["arguments"]}});
      } else {
        EXPECT_EQ(index + 1, a.calls.size()) << piece.dump();
        EXPECT_FALSE(piece.contains("id") || piece["function"].contains("name")) << piece.dump();
        a.calls.back()["arguments"] = a.calls.back()["arguments"].get<std::string>() + piece["function"]["arguments"].get<std::string>();
      }
    }
  }
  return a;
}

TEST(ServerToolSink, hermes_call_after_text_streams_name_first_and_ends_with_tool_calls) {
  const SinkRun r = run_sink(
      "I'll look that up.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
      ToolParserKind::hermes);
  const Assembled a = assemble(r.chunks);
  EXPECT_EQ(a.content, "I'll look that up.\n");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0]["name"], "get_weather");
  EXPECT_EQ(json::parse(a.calls[0]["arguments"].get<std::string>()), json::parse(R"({"city": "Paris", "days": 2})"));
  EXPECT_EQ(a.finish_reason, "tool_calls");

  const json& message = r.response["choices"][0]["message"];
  EXPECT_EQ(message["content"], "I'll look that up.\n");
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  const json& call = message["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().size(), 29u);
  EXPECT_TRUE(call["function"]["arguments"].is_string());
  EXPECT_EQ(r.response["choices"][0]["finish_reason"], "tool_calls");
}

TEST(ServerToolSink, qwen_xml_two_calls_without_text_give_null_content_and_both_calls) {
  const std::string output =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"
      "</tool_call>\n<tool_call>\n<function=search>\n<parameter=query>\nfjords\n</parameter>\n</function>\n</tool_call>";
  const SinkRun r = run_sink(output, ToolParserKind::qwen_xml);
  const Assembled a = assemble(r.chunks);
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(json::parse(a.calls[0]["arguments"].get<std::string>()), json::parse(R"({"city": "Oslo", "days": 3})"));
  EXPECT_EQ(a.calls[1]["name"], "search");
  EXPECT_NE(a.calls[0]["id"], a.calls[1]["id"]);
  EXPECT_EQ(a.finish_reason, "tool_calls");

  const json& message = r.response["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  ASSERT_EQ(message["tool_calls"].size(), 2u);
  EXPECT_EQ(json::parse(message["tool_calls"][1]["function"]["arguments"].get<std::string>()), json::parse(R"({"query": "fjords"})"));
}

TEST(ServerToolSink, parallel_tool_calls_false_keeps_only_the_first_call) {
  const std::string output =
      "<tool_call>\n<function=search>\n<parameter=query>\na\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=search>\n"
      "<parameter=query>\nb\n</parameter>\n</function>\n</tool_call>";
  const SinkRun r = run_sink(output, ToolParserKind::qwen_xml, FinishReason::stop, /*parallel=*/false);
  EXPECT_EQ(assemble(r.chunks).calls.size(), 1u);
  EXPECT_EQ(r.response["choices"][0]["message"]["tool_calls"].size(), 1u);
}

TEST(ServerToolSink, a_call_inside_think_stays_reasoning_and_one_right_after_it_is_a_call) {
  const std::string call = "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}\n</tool_call>";
  SinkRun inside = run_sink("<think>\nmaybe " + call + "\n</think>\n\nNo call needed.", ToolParserKind::hermes);
  Assembled a = assemble(inside.chunks);
  EXPECT_TRUE(a.calls.empty());
  EXPECT_NE(a.reasoning.find("<tool_call>"), std::string::npos);
  EXPECT_EQ(a.content, "No call needed.");
  EXPECT_EQ(a.finish_reason, "stop");
  EXPECT_FALSE(inside.response["choices"][0]["message"].contains("tool_calls"));

  SinkRun after = run_sink("<think>\nI should search.\n</think>\n\n" + call, ToolParserKind::hermes);
  a = assemble(after.chunks);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.reasoning, "\nI should search.\n");
  EXPECT_EQ(a.content, "");
  EXPECT_EQ(a.finish_reason, "tool_calls");
  EXPECT_TRUE(after.response["choices"][0]["message"]["content"].is_null());

  // A prompt that opened the block already (enable_thinking templates): the same split.
  SinkRun opened = run_sink("I should search.\n</think>\n\n" + call, ToolParserKind::hermes, FinishReason::stop, true, true);
  EXPECT_EQ(assemble(opened.chunks).calls.size(), 1u);
}

TEST(ServerToolSink, malformed_call_is_content_with_finish_reason_stop) {
  const std::string output = "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \n</tool_call>";
  const SinkRun r = run_sink(output, ToolParserKind::hermes);
  const Assembled a = assemble(r.chunks);
  EXPECT_TRUE(a.calls.empty());
  EXPECT_EQ(a.content, output);
  EXPECT_EQ(a.finish_reason, "stop");
  EXPECT_EQ(r.response["choices"][0]["message"]["content"], output);
  EXPECT_FALSE(r.response["choices"][0]["message"].contains("tool_calls"));
}

TEST(ServerToolSink, output_cut_by_max_tokens_keeps_finish_reason_length) {
  const SinkRun r = run_sink("<tool_call>\n<function=search>\n<parameter=query>\nhalf", ToolParserKind::qwen_xml, FinishReason::length);
  const Assembled a = assemble(r.chunks);
  EXPECT_EQ(a.finish_reason, "length");
  ASSERT_EQ(a.calls.size(), 1u);  // what was read is returned; the client sees why it is short
  EXPECT_EQ(r.response["choices"][0]["finish_reason"], "length");
}

TEST(ServerToolSink, without_a_parser_tags_are_plain_content) {
  const std::string output = "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>";
  const SinkRun r = run_sink(output, ToolParserKind::none);
  EXPECT_EQ(assemble(r.chunks).content, output);
  EXPECT_EQ(r.response["choices"][0]["finish_reason"], "stop");
}

TEST(ServerToolSink, mistral_calls_need_control_tokens_kept_in_the_decoded_text) {
  // [TOOL_CALLS] and [ARGS] are control tokens of the tekken vocabulary: the server decodes with
  // special tokens kept whenever tools are parsed; skipping them would leave bare text.
  const std::string output = "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}";
  ASSERT_GE(tekken().token_to_id("[TOOL_CALLS]"), 0);
  const SinkRun kept = run_sink(output, ToolParserKind::mistral, FinishReason::stop, true, false, tekken(), /*skip_special_tokens=*/false);
  const Assembled a = assemble(kept.chunks);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0]["name"], "get_weather");
  EXPECT_EQ(a.calls[0]["id"].get<std::string>().size(), 9u);
  EXPECT_EQ(json::parse(a.calls[0]["arguments"].get<std::string>()), json::parse(R"({"city": "Rome"})"));
  EXPECT_EQ(a.finish_reason, "tool_calls");

  const SinkRun skipped = run_sink(output, ToolParserKind::mistral, FinishReason::stop, true, false, tekken(), true);
  EXPECT_TRUE(assemble(skipped.chunks).calls.empty());
}

TEST(ServerToolSink, the_format_is_detected_from_the_template_and_vocabulary) {
  EXPECT_EQ(detect_tool_parser(read_template("Qwen3.5-4B"), qwen3()), ToolParserKind::qwen_xml);
  EXPECT_EQ(detect_tool_parser(read_template("Qwen3-Coder"), qwen3()), ToolParserKind::qwen_xml);
  EXPECT_EQ(detect_tool_parser(read_template("Qwen-Qwen2.5-7B-Instruct"), qwen3()), ToolParserKind::hermes);
  EXPECT_EQ(detect_tool_parser(qwen3().chat_template(), qwen3()), ToolParserKind::hermes);
  EXPECT_EQ(detect_tool_parser(read_template("unsloth-mistral-Devstral-Small-2507"), tekken()), ToolParserKind::mistral);
  EXPECT_EQ(detect_tool_parser(read_template("google-gemma-2-2b-it"), qwen3()), ToolParserKind::none);
}

}  // namespace
}  // namespace sanctum::server

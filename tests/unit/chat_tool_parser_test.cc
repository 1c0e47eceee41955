// Tool-call parsers (chat/tools/): every format must give the same calls and content whatever the
// chunking (every split point of multi-call samples, and byte by byte), keep malformed output as
// content, and stream a call's name before its arguments.
#include <gtest/gtest.h>

#include "chat/tools/json_scan.h"
#include "chat/tools/qwen_xml_parser.h"
#include "chat/tools/tool_call_parser.h"

namespace sanctum {
namespace {

using nlohmann::json;

struct Call {
  std::string id, name, arguments;
  bool ended = false;
};

struct Parsed {
  std::string content;
  std::vector<Call> calls;
};

// Folds events into content and calls, checking their order: begin, then fragments, then end.
void fold(const std::vector<ToolCallEvent>& events, Parsed& p) {
  for (const ToolCallEvent& e : events) {
    switch (e.kind) {
      case ToolCallEvent::Kind::content: p.content += e.text; break;
      case ToolCallEvent::Kind::call_begin:
        ASSERT_EQ(e.index, static_cast<int>(p.calls.size()));
        ASSERT_TRUE(p.calls.empty() || p.calls.back().ended) << "a call began before the last one ended";
        p.calls.push_back({e.id, e.name, "", false});
        break;
      case ToolCallEvent::Kind::arguments:
        ASSERT_EQ(e.index + 1, static_cast<int>(p.calls.size()));
        ASSERT_FALSE(p.calls.back().ended);
        p.calls.back().arguments += e.text;
        break;
      case ToolCallEvent::Kind::call_end:
        ASSERT_EQ(e.index + 1, static_cast<int>(p.calls.size()));
        p.calls.back().ended = true;
        break;
    }
  }
}

Parsed parse_pieces(ToolParserKind kind, const json& tools, const std::vector<std::string>& pieces) {
  auto parser = make_tool_call_parser(kind, tools, 7);
  Parsed p;
  for (const std::string& piece : pieces) fold(parser->push(piece), p);
  fold(parser->finish(), p);
  for (const Call& c : p.calls) EXPECT_TRUE(c.ended) << c.name;
  return p;
}

Parsed parse_whole(ToolParserKind kind, const json& tools, const std::string& text) { return parse_pieces(kind, tools, {text}); }

// The property the server relies on: chunking never changes the outcome.
void expect_split_invariant(ToolParserKind kind, const json& tools, const std::string& text) {
  const Parsed whole = parse_whole(kind, tools, text);
  auto same = [&](const Parsed& p, const std::string& how) {
    EXPECT_EQ(p.content, whole.content) << how;
    ASSERT_EQ(p.calls.size(), whole.calls.size()) << how;
    for (size_t k = 0; k < p.calls.size(); ++k) {
      EXPECT_EQ(p.calls[k].name, whole.calls[k].name) << how;
      EXPECT_EQ(p.calls[k].arguments, whole.calls[k].arguments) << how;
    }
  };
  for (size_t cut = 0; cut <= text.size(); ++cut)
    same(parse_pieces(kind, tools, {text.substr(0, cut), text.substr(cut)}), "split at " + std::to_string(cut));
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  same(parse_pieces(kind, tools, bytes), "byte by byte");
}

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}, "precision": {"type": "number"},
    "metric": {"type": "boolean"}, "hours": {"type": "array"}, "where": {"type": "object"},
    "note": {"type": ["string", "null"]}, "count": {"type": ["integer", "null"]}}}}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}
])");

const std::string kQwenTwoCalls =
    "Let me check both.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
    "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=search>\n<parameter=query>\nevents in\nParis\n</parameter>\n"
    "</function>\n</tool_call>";

TEST(ChatToolParser, qwen_xml_two_calls_after_text_parse_with_typed_arguments) {
  const Parsed p = parse_whole(ToolParserKind::qwen_xml, kTools, kQwenTwoCalls);
  EXPECT_EQ(p.content, "Let me check both.\n\n");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(R"({"city": "Paris", "days": 3})"));
  EXPECT_EQ(p.calls[1].name, "search");
  EXPECT_EQ(json::parse(p.calls[1].arguments), json::parse(R"({"query": "events in\nParis"})"));
}

TEST(ChatToolParser, qwen_xml_every_split_point_gives_the_same_calls) {
  expect_split_invariant(ToolParserKind::qwen_xml, kTools, kQwenTwoCalls);
}

TEST(ChatToolParser, qwen_xml_values_follow_the_schema_types) {
  const std::string text =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\n 42 \n</parameter>\n<parameter=precision>\n0.25\n</parameter>\n"
      "<parameter=metric>\nTrue\n</parameter>\n<parameter=hours>\n[1, 2]\n</parameter>\n<parameter=where>\n{\"lat\": 1.5}\n"
      "</parameter>\n<parameter=note>\nnull\n</parameter>\n<parameter=count>\nnull\n</parameter>\n<parameter=days>\nthree\n"
      "</parameter>\n<parameter=extra>\n7\n</parameter>\n</function>\n</tool_call>";
  const Parsed p = parse_whole(ToolParserKind::qwen_xml, kTools, text);
  ASSERT_EQ(p.calls.size(), 1u);
  const json args = json::parse(p.calls[0].arguments);
  EXPECT_EQ(args["city"], " 42 ");  // strings keep their text, inner spaces included
  EXPECT_EQ(args["precision"], 0.25);
  EXPECT_EQ(args["metric"], true);
  EXPECT_EQ(args["hours"], json::parse("[1, 2]"));
  EXPECT_EQ(args["where"], json::parse(R"({"lat": 1.5})"));
  EXPECT_EQ(args["note"], "null");  // a string type keeps the word
  EXPECT_TRUE(args["count"].is_null());
  EXPECT_EQ(args["days"], "three");  // not an integer: the text stays
  EXPECT_EQ(args["extra"], "7");     // not in the schema: text
  EXPECT_EQ(p.content, "");
}

TEST(ChatToolParser, qwen_xml_streams_the_name_before_any_argument) {
  auto parser = make_tool_call_parser(ToolParserKind::qwen_xml, kTools, 1);
  auto events = parser->push("<tool_call>\n<function=get_weather>\n<parameter=city>\nPar");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, ToolCallEvent::Kind::call_begin);
  EXPECT_EQ(events[0].name, "get_weather");
  EXPECT_EQ(events[0].id.size(), 29u);
  EXPECT_TRUE(events[0].id.starts_with("call_"));
  events = parser->push("is\n</parameter>\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, ToolCallEvent::Kind::arguments);
  EXPECT_EQ(events[0].text, R"({"city":"Paris")");
}

TEST(ChatToolParser, qwen_xml_call_without_parameters_has_empty_object_arguments) {
  const Parsed p = parse_whole(ToolParserKind::qwen_xml, kTools, "<tool_call>\n<function=search>\n</function>\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{}");
}

TEST(ChatToolParser, qwen_xml_output_cut_inside_a_call_closes_it_with_what_was_read) {
  const Parsed p = parse_whole(ToolParserKind::qwen_xml, kTools,
                               "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(R"({"city": "Paris", "days": 2})"));
}

TEST(ChatToolParser, qwen_xml_malformed_output_stays_content) {
  for (const std::string text : {"<tool_call>\nnot a call\n</tool_call>", "a <tool_call> in prose", "<tool_call>\n<function=bad name\n",
                                 "<tool_call><function=>x</function></tool_call>", "ends with <tool_ca", "<tool_call>"}) {
    const Parsed p = parse_whole(ToolParserKind::qwen_xml, kTools, text);
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
    expect_split_invariant(ToolParserKind::qwen_xml, kTools, text);
  }
}

TEST(ChatToolParser, text_after_a_call_is_content_and_whitespace_between_calls_is_not) {
  const std::string text = "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n</function>\n</tool_call>\n\nDone.";
  const Parsed p = parse_whole(ToolParserKind::qwen_xml, kTools, text);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "\n\nDone.");
  expect_split_invariant(ToolParserKind::qwen_xml, kTools, text);
}

const std::string kHermesTwoCalls =
    "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>\n"
    "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"a </tool_call-like> string\"}}\n</tool_call>";

TEST(ChatToolParser, hermes_two_calls_parse_and_every_split_point_agrees) {
  const Parsed p = parse_whole(ToolParserKind::hermes, kTools, kHermesTwoCalls);
  EXPECT_EQ(p.content, "Sure.\n");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(R"({"city": "Paris", "days": 3})"));
  EXPECT_EQ(p.calls[1].name, "search");
  EXPECT_EQ(json::parse(p.calls[1].arguments)["query"], "a </tool_call-like> string");
  expect_split_invariant(ToolParserKind::hermes, kTools, kHermesTwoCalls);
}

TEST(ChatToolParser, hermes_accepts_arguments_as_a_json_string_and_an_unclosed_last_call) {
  const Parsed p =
      parse_whole(ToolParserKind::hermes, kTools, "<tool_call>\n{\"name\": \"search\", \"arguments\": \"{\\\"query\\\": \\\"x\\\"}\"}");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(R"({"query": "x"})"));
}

TEST(ChatToolParser, hermes_malformed_output_stays_content) {
  for (const std::string text :
       {"<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \n</tool_call>", "<tool_call>\n[1, 2]\n</tool_call>",
        "<tool_call>\n{\"arguments\": {}}\n</tool_call> after", "<tool_call>{\"name\": \"x\"", "plain <tool_c"}) {
    const Parsed p = parse_whole(ToolParserKind::hermes, kTools, text);
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
    expect_split_invariant(ToolParserKind::hermes, kTools, text);
  }
}

const std::string kMistralTwoCalls =
    "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"note\": \"a } and a [ARGS]\"}[TOOL_CALLS]search[ARGS]{\"query\": \"x\"}";

TEST(ChatToolParser, mistral_name_args_form_parses_repeated_calls_at_every_split_point) {
  const Parsed p = parse_whole(ToolParserKind::mistral, kTools, kMistralTwoCalls);
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(p.calls[0].arguments)["note"], "a } and a [ARGS]");
  EXPECT_EQ(p.calls[1].name, "search");
  expect_split_invariant(ToolParserKind::mistral, kTools, kMistralTwoCalls);
}

TEST(ChatToolParser, mistral_ids_are_nine_letters_and_digits) {
  const Parsed p = parse_whole(ToolParserKind::mistral, kTools, kMistralTwoCalls);
  for (const Call& c : p.calls) {
    EXPECT_EQ(c.id.size(), 9u) << c.id;
    for (char ch : c.id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << c.id;
  }
  EXPECT_NE(p.calls[0].id, p.calls[1].id);
}

TEST(ChatToolParser, mistral_call_id_form_and_json_array_form_parse) {
  const std::string with_id = "[TOOL_CALLS]search[CALL_ID]a1b2c3d4e[ARGS]{\"query\": \"x\"}";
  Parsed p = parse_whole(ToolParserKind::mistral, kTools, with_id);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "search");
  expect_split_invariant(ToolParserKind::mistral, kTools, with_id);

  const std::string array =
      "Checking. [TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
      "{\"name\": \"search\", \"arguments\": {\"query\": \"y\"}}]";
  p = parse_whole(ToolParserKind::mistral, kTools, array);
  EXPECT_EQ(p.content, "Checking. ");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(R"({"city": "Oslo"})"));
  EXPECT_EQ(p.calls[1].name, "search");
  expect_split_invariant(ToolParserKind::mistral, kTools, array);
}

TEST(ChatToolParser, mistral_malformed_output_stays_content) {
  for (const std::string text : {"[TOOL_CALLS]search[ARGS]{\"query\": ", "[TOOL_CALLS]bad name[ARGS]{}", "[TOOL_CALLS][{\"x\": 1}]",
                                 "[TOOL_CALLS]search[ARGS][1]", "[TOOL_CALLS]", "text [TOOL_CA"}) {
    const Parsed p = parse_whole(ToolParserKind::mistral, kTools, text);
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
    expect_split_invariant(ToolParserKind::mistral, kTools, text);
  }
}

TEST(ChatToolParser, whitespace_that_ends_text_after_a_call_is_kept_at_every_split_point) {
  // Found by the fuzzer: only whitespace right after a call is dropped, never the end of later text.
  for (const auto& [kind, text] :
       std::vector<std::pair<ToolParserKind, std::string>>{{ToolParserKind::mistral, "[TOOL_CALLS]search[ARGS]{}then text \n"},
                                                           {ToolParserKind::hermes,
                                                            "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call> done \n"},
                                                           {ToolParserKind::qwen_xml,
                                                            "<tool_call>\n<function=search>\n</function>\n</tool_call>\ndone \n"}}) {
    const Parsed p = parse_whole(kind, kTools, text);
    EXPECT_EQ(p.calls.size(), 1u) << text;
    EXPECT_TRUE(p.content.ends_with(" \n")) << text;
    expect_split_invariant(kind, kTools, text);
  }
}

TEST(ChatToolParser, parser_names_round_trip_and_unknown_names_are_refused) {
  for (ToolParserKind k : {ToolParserKind::none, ToolParserKind::qwen_xml, ToolParserKind::hermes, ToolParserKind::mistral})
    EXPECT_EQ(tool_parser_from_name(tool_parser_name(k)), k);
  EXPECT_FALSE(tool_parser_from_name("qwen"));
  EXPECT_EQ(make_tool_call_parser(ToolParserKind::none, kTools, 1), nullptr);
}

TEST(ChatToolParser, json_nested_past_the_depth_limit_is_not_parsed) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  EXPECT_TRUE(parse_json_lenient(deep).is_discarded());
  EXPECT_EQ(scan_json_container(deep).state, JsonScan::State::invalid);
  EXPECT_FALSE(parse_json_lenient("[[1]]").is_discarded());
}

}  // namespace
}  // namespace sanctum

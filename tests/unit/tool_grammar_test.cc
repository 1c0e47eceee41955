// Tool-call grammars (server/tool_grammar.h) against our own parsers: seeded random walks through
// each format's grammar, read back by the format's parser (chat/tools/), must give calls of the
// offered tools whose arguments follow their schemas (checked by hand here), one call when
// parallel_tool_calls is false, only the named function when one is named, and no content.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "chat/tools/tool_call_parser.h"
#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "server/api_error.h"
#include "server/tool_grammar.h"

namespace sanctum::server {
namespace {

using json = nlohmann::ordered_json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 12},
    "unit": {"type": "string", "enum": ["c", "f"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
    "query": {"type": "string"},
    "filters": {"type": "object", "properties": {"lang": {"enum": ["en", "fr"]}}, "required": ["lang"], "additionalProperties": false},
    "limit": {"type": "number", "minimum": 0, "maximum": 50},
    "exact": {"type": "boolean"}}, "required": ["query", "filters"]}}},
  {"type": "function", "function": {"name": "now"}}])");

// Single characters, the call formats' tags and pieces that straddle them, and an end token.
std::shared_ptr<const grammar::Vocabulary> vocab() {
  std::vector<std::string> t;
  for (char c = 0x20; c < 0x7f; ++c) t.emplace_back(1, c);
  for (const char* s :
       {"\n",   "<tool_call>", "</tool_call>", "<function=", "<parameter=", "</parameter>", "</function>", "[TOOL_CALLS]", "[ARGS]",  "{\"",
        "\": ", "\", \"",      "city",         "query",      "get_weather", "search",       "\n</",        "\xc3\xa9",     "</param", "<"})
    t.emplace_back(s);
  t.emplace_back();  // end
  return std::make_shared<const grammar::Vocabulary>(t, std::vector<int32_t>{static_cast<int32_t>(t.size() - 1)});
}

// A seeded walk: a random allowed token each step, leaning towards tokens that close what is open
// (a newline, a quote, a bracket) so that unbounded text ends; the end token where the grammar can end.
std::string walk(const grammar::CompiledGrammar& g, uint32_t seed) {
  grammar::GrammarMatcher m(g);
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(g.vocab().mask_words());
  std::string out;
  for (int step = 0; step < 20000 && !m.is_complete(); ++step) {
    m.fill_mask(mask);
    std::vector<int32_t> allowed, closing;
    for (int32_t id = 0; static_cast<size_t>(id) < g.vocab().size(); ++id) {
      if (!((mask[static_cast<size_t>(id) / 32] >> (id % 32)) & 1)) continue;
      allowed.push_back(id);
      const std::string& b = g.vocab().bytes(id);
      if (g.vocab().is_eos(id) || (!b.empty() && std::string("\n\"}]<").find(b[0]) != std::string::npos)) closing.push_back(id);
    }
    if (allowed.empty()) return out + "<dead end>";
    int32_t id = allowed[rng() % allowed.size()];
    if (m.can_end() && rng() % 3 == 0) id = g.vocab().eos_ids()[0];
    else if (!closing.empty() && rng() % 2 == 0) id = closing[rng() % closing.size()];
    EXPECT_TRUE(m.accept(id));
    out += g.vocab().bytes(id);
  }
  return out;
}

struct Call {
  std::string name;
  std::string arguments;
};

std::vector<Call> parse(ToolParserKind format, const std::string& text, std::string& content) {
  auto parser = make_tool_call_parser(format, kTools, 1);
  std::vector<ToolCallEvent> events = parser->push(text);
  for (auto& e : parser->finish()) events.push_back(std::move(e));
  std::vector<Call> calls;
  for (const ToolCallEvent& e : events) {
    if (e.kind == ToolCallEvent::Kind::content) content += e.text;
    if (e.kind == ToolCallEvent::Kind::call_begin) calls.push_back({e.name, ""});
    if (e.kind == ToolCallEvent::Kind::arguments) calls.back().arguments += e.text;
  }
  return calls;
}

size_t utf8_chars(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The schemas of kTools, checked by hand: "" when valid.
std::string violation(const Call& c) {
  const json a = json::parse(c.arguments, nullptr, false);
  if (a.is_discarded() || !a.is_object()) return "arguments are not a JSON object";
  auto allow_only = [&](std::set<std::string> keys) -> std::string {
    for (const auto& [k, v] : a.items())
      if (!keys.count(k)) return "unexpected argument " + k;
    return "";
  };
  if (c.name == "get_weather") {
    if (auto e = allow_only({"city", "unit", "days"}); !e.empty()) return e;
    if (!a.contains("city") || !a["city"].is_string() || utf8_chars(a["city"].get<std::string>()) > 12) return "bad city";
    if (a.contains("unit") && a["unit"] != "c" && a["unit"] != "f") return "bad unit";
    if (a.contains("days") && (!a["days"].is_number_integer() || a["days"] < 1 || a["days"] > 7)) return "bad days";
    return "";
  }
  if (c.name == "search") {
    if (auto e = allow_only({"query", "filters", "limit", "exact"}); !e.empty()) return e;
    if (!a.contains("query") || !a["query"].is_string()) return "bad query";
    if (!a.contains("filters") || !a["filters"].is_object() || a["filters"].size() != 1 ||
        (a["filters"]["lang"] != "en" && a["filters"]["lang"] != "fr"))
      return "bad filters";
    if (a.contains("limit") && (!a["limit"].is_number() || a["limit"] < 0 || a["limit"] > 50)) return "bad limit";
    if (a.contains("exact") && !a["exact"].is_boolean()) return "bad exact";
    return "";
  }
  if (c.name == "now") return a.empty() ? "" : "now takes no arguments";
  return "unknown function " + c.name;
}

struct Case {
  ToolParserKind format;
  bool args_tag;
};

const Case kCases[] = {{ToolParserKind::qwen_xml, false},
                       {ToolParserKind::hermes, false},
                       {ToolParserKind::mistral, true},
                       {ToolParserKind::mistral, false}};

TEST(ToolGrammar, walks_parse_into_calls_whose_arguments_follow_the_schemas) {
  const auto v = vocab();
  for (const Case& c : kCases)
    for (const std::string only : {"", "search"})
      for (bool parallel : {true, false}) {
        ToolGrammarRequest r;
        r.format = c.format;
        r.tools = &kTools;
        r.only = only;
        r.parallel = parallel;
        r.mistral_args_tag = c.args_tag;
        const grammar::CompiledGrammar g(tool_call_grammar(r), v);
        std::set<std::string> names;
        size_t most = 0;
        for (uint32_t seed = 0; seed < 40; ++seed) {
          const std::string text = walk(g, seed);
          std::string content;
          const std::vector<Call> calls = parse(c.format, text, content);
          const std::string where = std::string(tool_parser_name(c.format)) + (c.args_tag ? "+args" : "") + " only=" + only +
                                    " parallel=" + std::to_string(parallel) + " seed " + std::to_string(seed) + ": " + text;
          ASSERT_FALSE(calls.empty()) << where;
          EXPECT_EQ(content, "") << where;
          if (!parallel) {
            EXPECT_EQ(calls.size(), 1u) << where;
          }
          for (const Call& call : calls) {
            EXPECT_EQ(violation(call), "") << where << "\n arguments " << call.arguments;
            if (!only.empty()) {
              EXPECT_EQ(call.name, only) << where;
            }
            names.insert(call.name);
          }
          most = std::max(most, calls.size());
        }
        if (only.empty()) {
          EXPECT_EQ(names.size(), 3u);  // every tool is reachable
        }
        if (parallel) {
          EXPECT_GT(most, 1u);  // and several calls in one answer
        }
      }
}

TEST(ToolGrammar, an_opened_call_starts_after_its_tag) {
  const auto v = vocab();
  for (const Case& c : kCases) {
    ToolGrammarRequest r;
    r.format = c.format;
    r.tools = &kTools;
    r.opened = true;
    r.mistral_args_tag = c.args_tag;
    const grammar::CompiledGrammar g(tool_call_grammar(r), v);
    for (uint32_t seed = 0; seed < 10; ++seed) {
      const std::string text = std::string(tool_call_open_tag(c.format)) + walk(g, seed);
      std::string content;
      const std::vector<Call> calls = parse(c.format, text, content);
      ASSERT_FALSE(calls.empty()) << text;
      EXPECT_EQ(content, "") << text;
    }
  }
}

TEST(ToolGrammar, with_an_answer_schema_the_output_is_calls_or_that_value) {
  const json answer = json::parse(R"({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})");
  const auto v = vocab();
  for (const Case& c : kCases) {
    ToolGrammarRequest r;
    r.format = c.format;
    r.tools = &kTools;
    r.strict_only = true;  // tool_choice "auto": no tool is strict here, so any arguments
    r.answer_schema = &answer;
    r.mistral_args_tag = c.args_tag;
    const grammar::CompiledGrammar g(tool_call_grammar(r), v);
    int answered = 0, called = 0;
    for (uint32_t seed = 0; seed < 30; ++seed) {
      const std::string text = walk(g, seed);
      std::string content;
      const std::vector<Call> calls = parse(c.format, text, content);
      if (calls.empty()) {
        const json value = json::parse(content, nullptr, false);
        ASSERT_TRUE(value.is_object() && value.size() == 1 && value["ok"].is_boolean()) << text;
        ++answered;
        continue;
      }
      EXPECT_EQ(content, "") << text;
      for (const Call& call : calls) EXPECT_TRUE(json::parse(call.arguments, nullptr, false).is_object()) << text;
      ++called;
    }
    EXPECT_GT(answered, 0) << tool_parser_name(c.format);
    EXPECT_GT(called, 0) << tool_parser_name(c.format);
  }
}

TEST(ToolGrammar, an_xml_text_value_never_holds_a_tag_that_would_end_it) {
  ToolGrammarRequest r;
  r.format = ToolParserKind::qwen_xml;
  r.tools = &kTools;
  r.only = "search";
  const grammar::CompiledGrammar g(tool_call_grammar(r), vocab());
  grammar::GrammarMatcher m(g);
  ASSERT_TRUE(m.accept_bytes("<tool_call>\n<function=search>\n<parameter=query>\na < b </par"));
  EXPECT_FALSE(m.accept_bytes("ameter>"));
  EXPECT_FALSE(m.accept_bytes("</function>"));
  EXPECT_FALSE(m.accept_bytes("<parameter="));
  EXPECT_TRUE(m.accept_bytes("am <x>\n</parameter>\n"));
}

TEST(ToolGrammar, strict_only_leaves_other_tools_free_and_unenforceable_schemas_are_400s) {
  json tools = kTools;
  tools[0]["function"]["strict"] = true;
  tools[1]["function"]["parameters"]["properties"]["query"]["not"] = json{{"const", "x"}};
  ToolGrammarRequest r;
  r.format = ToolParserKind::hermes;
  r.tools = &tools;
  r.strict_only = true;  // search is not strict: its 'not' is never compiled
  EXPECT_NO_THROW(tool_call_grammar(r));
  r.strict_only = false;
  try {
    tool_call_grammar(r);
    FAIL() << "a 'not' keyword was compiled";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "tools[1].function.parameters");
    EXPECT_NE(std::string(e.what()).find("not"), std::string::npos);
  }
  // A text parameter in the XML format keeps its raw text: a pattern could not be checked on it.
  tools = kTools;
  tools[0]["function"]["parameters"]["properties"]["city"]["pattern"] = "^[A-Z]";
  r.format = ToolParserKind::qwen_xml;
  r.tools = &tools;
  try {
    tool_call_grammar(r);
    FAIL() << "a pattern on an XML text value was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "tools[0].function.parameters");
    EXPECT_NE(std::string(e.what()).find("pattern"), std::string::npos);
  }
}

}  // namespace
}  // namespace sanctum::server

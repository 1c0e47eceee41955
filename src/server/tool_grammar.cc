#include "server/tool_grammar.h"

#include <map>
#include <set>

#include "chat/tools/qwen_xml_parser.h"
#include "grammar/codepoints.h"
#include "grammar/json_builder.h"
#include "server/api_error.h"

namespace sanctum::server {

namespace {

using json = nlohmann::ordered_json;
using grammar::Grammar;
using grammar::GrammarError;
using grammar::Item;
using grammar::SchemaJson;
using grammar::Sequence;

// Tags that end a parameter value in the XML parser: a text value must not contain them.
const std::vector<std::string> kValueEnds = {"</parameter>", "<parameter=", "</function>"};

// Keywords a text parameter's schema may hold (the value stays the raw text, so only these can be
// checked on it); anything else is refused for the qwen_xml format.
const std::set<std::string> kTextKeywords = {"type",        "enum",    "const",    "minLength", "maxLength", "title",
                                             "description", "default", "examples", "nullable",  "$comment"};

struct Tool {
  size_t index;  // in `tools`
  std::string name;
  SchemaJson parameters;  // an object schema
  bool constrained;       // its arguments follow `parameters`
};

std::string where(size_t i) { return "tools[" + std::to_string(i) + "].function.parameters"; }

[[noreturn]] void refuse(const Tool& t, const std::string& feature, const std::string& message) {
  throw bad_request("tool '" + t.name + "': " + message + " (unsupported: " + feature + ")", where(t.index), "unsupported_schema");
}

// Text with no value-ending tag in it: a right-recursive automaton over the tags' prefixes (any
// other character returns to the start; a '<' starts a new prefix). Every state may end, since the
// closing "\n</parameter>" starts with a newline, which no tag holds.
Item tag_free_text(Grammar& g) {
  std::set<std::string> prefixes;
  for (const std::string& tag : kValueEnds)
    for (size_t n = 0; n < tag.size(); ++n) prefixes.insert(tag.substr(0, n));
  std::map<std::string, uint32_t> rule;
  for (const std::string& p : prefixes) rule[p] = g.declare("text");
  for (const std::string& p : prefixes) {
    std::vector<Sequence> alts{{}};
    grammar::CodepointSet special;
    special.add('<', '<');
    std::set<char> next;
    for (const std::string& tag : kValueEnds)
      if (tag.size() > p.size() && tag.compare(0, p.size(), p) == 0) next.insert(tag[p.size()]);
    for (char c : next) {
      special.add(static_cast<char32_t>(c), static_cast<char32_t>(c));
      const std::string longer = p + c;
      if (prefixes.count(longer)) alts.push_back({g.byte(static_cast<uint8_t>(c)), Grammar::ref(rule[longer])});
      // else: c would complete a tag, so it is not allowed here
    }
    if (!next.count('<')) alts.push_back({g.byte('<'), Grammar::ref(rule["<"])});
    special.normalize();
    alts.push_back({grammar::codepoint_item(g, special.complement(), "char"), Grammar::ref(rule[""])});
    g.define(rule[p], alts);
  }
  return Grammar::ref(rule[""]);
}

// The value of a text parameter, as the raw text the parser keeps.
Item text_value(Grammar& g, const Tool& t, const std::string& key, const SchemaJson& schema, Item free_text) {
  for (const auto& [k, v] : schema.items())
    if (!kTextKeywords.count(k))
      refuse(t, k, "parameter '" + key + "' is written as raw text in this model's call format; '" + k + "' cannot be enforced on it");
  const auto types = grammar::schema_types(schema);
  if (types && !types->count("string"))
    refuse(t, "type", "parameter '" + key + "' has no string type, but this model's call format writes its value as text");
  auto safe = [&](const std::string& s) {
    for (const std::string& tag : kValueEnds)
      if (s.find(tag) != std::string::npos) refuse(t, "enum", "parameter '" + key + "' has a value holding '" + tag + "'");
    return s;
  };
  if (schema.contains("const") || schema.contains("enum")) {
    std::vector<Sequence> alts;
    const json values = schema.contains("const") ? json::array({schema["const"]}) : schema["enum"];
    for (const auto& v : values) {
      if (!v.is_string()) continue;  // text reads back as a string only
      Sequence s;
      g.append_literal(s, safe(v.get<std::string>()));
      alts.push_back(std::move(s));
    }
    if (alts.empty()) refuse(t, "enum", "parameter '" + key + "' has no string value, but this model's call format writes it as text");
    return Grammar::ref(g.add_rule("enum", alts));
  }
  if (!schema.contains("minLength") && !schema.contains("maxLength")) return free_text;
  auto count = [&](const char* k, int64_t fallback) -> int64_t {
    if (!schema.contains(k)) return fallback;
    if (!schema[k].is_number_unsigned() && !schema[k].is_number_integer()) refuse(t, k, std::string(k) + " must be an integer");
    return schema[k].get<int64_t>();
  };
  // Characters other than '<' never form a tag.
  grammar::CodepointSet lt;
  lt.add('<', '<');
  try {
    return Grammar::ref(grammar::make_repeat(g, grammar::codepoint_item(g, lt.complement(), "char"), count("minLength", 0),
                                             count("maxLength", -1), "chars", 2000));
  } catch (const GrammarError& e) {
    refuse(t, e.feature(), e.what());
  }
}

// Integers the parser reads back (int64): unbounded ones get bounds JSON numbers can hold exactly.
SchemaJson bounded_integer(SchemaJson schema) {
  constexpr int64_t kBound = 999'999'999'999'999;
  if (!schema.contains("minimum") && !schema.contains("exclusiveMinimum")) schema["minimum"] = -kBound;
  if (!schema.contains("maximum") && !schema.contains("exclusiveMaximum")) schema["maximum"] = kBound;
  return schema;
}

bool types_within(const std::optional<std::set<std::string>>& types, std::initializer_list<const char*> allowed) {
  if (!types) return false;
  for (const std::string& t : *types) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || t == a;
    if (!ok) return false;
  }
  return true;
}

// <function=NAME>\n then each parameter, then </function>.
Item xml_function(Grammar& g, const Tool& t, grammar::JsonBuilder* builder, Item free_text) {
  Sequence body;
  g.append_literal(body, "<function=" + t.name + ">\n");
  if (!t.constrained) {
    // Any parameters: a name without tag characters, a text value.
    grammar::CodepointSet bad;
    bad.add('<', '<'), bad.add('>', '>'), bad.add('\n', '\n');
    Sequence p;
    g.append_literal(p, "<parameter=");
    p.push_back(Grammar::ref(grammar::make_plus(g, grammar::codepoint_item(g, bad.complement(), "char"), "key")));
    g.append_literal(p, ">\n");
    p.push_back(free_text);
    g.append_literal(p, "\n</parameter>\n");
    body.push_back(Grammar::ref(grammar::make_star(g, grammar::as_item(g, p, "parameter"), "parameters")));
  } else if (!t.parameters.is_null()) {
    const SchemaJson& s = t.parameters;
    if (!s.contains("properties") || !s["properties"].is_object())
      refuse(t, "properties", "this model's call format writes parameters one by one: 'parameters' must declare 'properties'");
    std::set<std::string> required;
    if (s.contains("required") && s["required"].is_array())
      for (const auto& r : s["required"])
        if (r.is_string()) required.insert(r.get<std::string>());
    for (const std::string& r : required)
      if (!s["properties"].contains(r)) refuse(t, "required", "required parameter '" + r + "' is not among 'properties'");
    for (const auto& [key, prop] : s["properties"].items()) {
      if (key.empty() || key.find_first_of("<>\n") != std::string::npos)
        refuse(t, "properties", "parameter name '" + key + "' holds a character this model's call format cannot write in a tag");
      Sequence p;
      g.append_literal(p, "<parameter=" + key + ">\n");
      const std::string path = "#/properties/" + key;
      switch (parameter_kind(prop)) {
        case ParameterKind::text: p.push_back(text_value(g, t, key, prop, free_text)); break;
        case ParameterKind::integer:
          if (!types_within(grammar::schema_types(prop), {"integer", "null"}))
            refuse(t, "type", "parameter '" + key + "' is read back as an integer but its schema allows other values");
          p.push_back(builder->value(bounded_integer(prop), path, 1));
          break;
        case ParameterKind::number:
          if (!types_within(grammar::schema_types(prop), {"number", "integer", "null"}))
            refuse(t, "type", "parameter '" + key + "' is read back as a number but its schema allows other values");
          p.push_back(builder->value(prop, path, 1));
          break;
        case ParameterKind::boolean:
          if (!types_within(grammar::schema_types(prop), {"boolean", "null"}))
            refuse(t, "type", "parameter '" + key + "' is read back as a boolean but its schema allows other values");
          p.push_back(builder->value(prop, path, 1));
          break;
        case ParameterKind::json: p.push_back(builder->value(prop, path, 1)); break;
      }
      g.append_literal(p, "\n</parameter>\n");
      const Item one = grammar::as_item(g, p, "parameter");
      body.push_back(required.count(key) ? one : Grammar::ref(grammar::make_optional(g, one, "parameter_opt")));
    }
  }
  g.append_literal(body, "</function>");
  return grammar::as_item(g, body, "function");
}

// {"name": NAME, "arguments": ARGS} as the templates write it (tojson: ", " and ": ").
Item json_call(Grammar& g, const Tool& t, Item arguments) {
  Sequence s;
  g.append_literal(s, "{\"name\": " + json(t.name).dump() + ", \"arguments\": ");
  s.push_back(arguments);
  g.append_literal(s, "}");
  return grammar::as_item(g, s, "call");
}

Item alternatives(Grammar& g, const std::vector<Item>& items, const std::string& name) {
  std::vector<Sequence> alts;
  for (const Item& i : items) alts.push_back({i});
  return alts.size() == 1 ? items[0] : Grammar::ref(g.add_rule(name, alts));
}

// first (sep call)*, or first alone.
Item repeated(Grammar& g, Item first, Item call, const std::string& sep, bool parallel) {
  if (!parallel) return first;
  Sequence more;
  g.append_literal(more, sep);
  more.push_back(call);
  return Grammar::ref(g.add_rule("calls", {{first, Grammar::ref(grammar::make_star(g, grammar::as_item(g, more, "more"), "more_calls"))}}));
}

}  // namespace

const char* tool_call_open_tag(ToolParserKind format) { return format == ToolParserKind::mistral ? "[TOOL_CALLS]" : "<tool_call>"; }

std::shared_ptr<const grammar::Grammar> tool_call_grammar(const ToolGrammarRequest& r) {
  auto g = std::make_shared<Grammar>();
  std::vector<Tool> tools;
  for (size_t i = 0; i < r.tools->size(); ++i) {
    const json& f = (*r.tools)[i]["function"];
    const std::string name = f["name"].get<std::string>();
    if (!r.only.empty() && name != r.only) continue;
    const bool strict = f.contains("strict") && f["strict"] == true;
    // No parameters (null or absent): the function takes none, and its arguments are {}.
    SchemaJson params = f.contains("parameters") && f["parameters"].is_object() ? f["parameters"] : SchemaJson();
    tools.push_back(Tool{i, name, std::move(params), !r.strict_only || strict});
  }
  grammar::JsonGrammarOptions options;
  // The hermes and XML parsers end a call or a value at the first closing tag, even inside a JSON
  // string: argument strings write '<' as \u003c.
  if (r.format != ToolParserKind::mistral) options.escaped_only = "<";
  std::vector<std::unique_ptr<grammar::JsonBuilder>> builders;  // each reads its tool's parameters
  builders.reserve(tools.size());
  const SchemaJson any_object = {{"type", "object"}};
  std::vector<Item> calls;  // per tool, without the opening tag
  const Item free_text = r.format == ToolParserKind::qwen_xml ? tag_free_text(*g) : Item{};
  for (const Tool& t : tools) {
    try {
      const bool own_schema = t.constrained && !t.parameters.is_null();
      builders.push_back(std::make_unique<grammar::JsonBuilder>(*g, own_schema ? t.parameters : any_object, options));
      grammar::JsonBuilder& b = *builders.back();
      switch (r.format) {
        case ToolParserKind::qwen_xml: calls.push_back(xml_function(*g, t, &b, free_text)); break;
        case ToolParserKind::hermes:
        case ToolParserKind::mistral: {
          Sequence none;
          g->append_literal(none, "{}");
          const Item args = t.constrained && t.parameters.is_null() ? grammar::as_item(*g, none, "no_arguments")
                                                                    : b.value(t.constrained ? t.parameters : any_object, "#", 0);
          if (r.format == ToolParserKind::mistral && r.mistral_args_tag) {
            Sequence s;
            g->append_literal(s, t.name + "[ARGS]");
            s.push_back(args);
            calls.push_back(grammar::as_item(*g, s, "call"));
          } else {
            calls.push_back(json_call(*g, t, args));
          }
          break;
        }
        case ToolParserKind::none: throw bad_request("this model has no tool-call format", "tools");
      }
    } catch (const GrammarError& e) {
      refuse(t, e.feature(), e.what());
    }
  }
  const Item one = alternatives(*g, calls, "tool");
  const std::string open = tool_call_open_tag(r.format);
  Sequence root;
  if (r.lead_blank_lines) {
    grammar::ByteSet blank;
    blank.add(' '), blank.add('\n');
    root.push_back(Grammar::ref(grammar::make_repeat(*g, g->bytes(blank), 0, 2, "lead")));
  }
  switch (r.format) {
    case ToolParserKind::qwen_xml:
    case ToolParserKind::hermes: {
      // <tool_call>\nCALL\n</tool_call>, calls on their own lines.
      Sequence inner;
      g->append_literal(inner, "\n");
      inner.push_back(one);
      g->append_literal(inner, "\n</tool_call>");
      const Item body = grammar::as_item(*g, inner, "body");
      Sequence tagged;
      g->append_literal(tagged, open);
      tagged.push_back(body);
      const Item call = grammar::as_item(*g, tagged, "call");
      root.push_back(repeated(*g, r.opened ? body : call, call, "\n", r.parallel));
      break;
    }
    case ToolParserKind::mistral:
      if (r.mistral_args_tag) {
        Sequence tagged;
        g->append_literal(tagged, open);
        tagged.push_back(one);
        const Item call = grammar::as_item(*g, tagged, "call");
        root.push_back(repeated(*g, r.opened ? one : call, call, "", r.parallel));
      } else {
        // [TOOL_CALLS][CALL, CALL]
        Sequence list;
        if (!r.opened) g->append_literal(list, open);
        g->append_literal(list, "[");
        list.push_back(repeated(*g, one, one, ", ", r.parallel));
        g->append_literal(list, "]");
        root.push_back(grammar::as_item(*g, list, "calls"));
      }
      break;
    case ToolParserKind::none: break;
  }
  std::vector<Sequence> answers{root};
  if (r.answer_schema) {
    // Or no call: the response_format value, with the blanks JSON allows around it.
    grammar::JsonGrammarOptions plain;
    const SchemaJson& schema = *r.answer_schema;
    try {
      grammar::JsonBuilder b(*g, schema, plain);
      answers.push_back({b.ws(), b.value(schema, "#", 0), b.ws()});
    } catch (const GrammarError& e) {
      throw bad_request("'response_format': the JSON schema cannot be enforced (unsupported: " + e.feature() + "): " + e.what(),
                        "response_format", "unsupported_schema");
    }
  }
  g->finish(g->add_rule("root", answers));
  return g;
}

}  // namespace sanctum::server

// Object, array, string and number rules of the JSON Schema compiler.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "grammar/codepoints.h"
#include "grammar/json_builder.h"
#include "grammar/json_numbers.h"
#include "grammar/json_regex.h"

namespace sanctum::grammar {

namespace {

// Formats as anchored patterns: each admits only values Python's format checkers accept (dates stop
// at day 28 so every month is valid).
const std::map<std::string, std::string> kFormats = {
    {"date", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])$"},
    {"time", "^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"},
    {"date-time",
     "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]"
     "([01][0-9]|2[0-3]):[0-5][0-9])$"},
    {"uuid", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
    {"email", "^[a-z0-9._+-]{1,32}@[a-z0-9]{1,32}(\\.[a-z]{2,8}){1,3}$"},
    {"ipv4", "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$"},
    {"hostname", "^[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?){0,3}$"},
    {"uri", "^https?://[a-z0-9]{1,20}(\\.[a-z0-9]{1,20}){0,3}(/[a-zA-Z0-9._~-]{0,20}){0,5}$"},
};

int64_t count_of(const SchemaJson& schema, const char* key, int64_t fallback) {
  if (!schema.contains(key)) return fallback;
  const auto& v = schema[key];
  if (!v.is_number() || v.get<double>() < 0 || v.get<double>() != std::floor(v.get<double>()))
    throw GrammarError(key, std::string("json schema: ") + key + " must be a non-negative integer");
  return v.get<double>() > 1e12 ? int64_t{1'000'000'000'000} : static_cast<int64_t>(v.get<double>());
}

}  // namespace

Item JsonBuilder::sep() {
  if (!sep_) {
    Sequence s{ws_};
    g_.append_literal(s, ",");
    s.push_back(ws_);
    sep_ = Grammar::ref(g_.add_rule("sep", {s}));
  }
  return *sep_;
}

Item JsonBuilder::string_any() {
  if (!string_any_) {
    // Any decoded character, plus the escapes json_char_item does not produce (\/ and \uXXXX, no
    // surrogates so every escape is one character).
    const Item raw = json_char_item(g_, CodepointSet{}.complement(), "char", options_.escaped_only);
    ByteSet hex, hex_no_d, d, low;
    hex.add_range('0', '9'), hex.add_range('a', 'f'), hex.add_range('A', 'F');
    hex_no_d = hex;
    hex_no_d.bits = {};
    hex_no_d.add_range('0', '9'), hex_no_d.add_range('a', 'c'), hex_no_d.add_range('A', 'C'), hex_no_d.add_range('e', 'f'),
        hex_no_d.add_range('E', 'F');
    d.add('d'), d.add('D');
    low.add_range('0', '7');
    Sequence u1, u2, slash;
    g_.append_literal(u1, "\\u");
    u2 = u1;
    u1.insert(u1.end(), {g_.bytes(hex_no_d), g_.bytes(hex), g_.bytes(hex), g_.bytes(hex)});
    u2.insert(u2.end(), {g_.bytes(d), g_.bytes(low), g_.bytes(hex), g_.bytes(hex)});
    g_.append_literal(slash, "\\/");
    const Item ch = Grammar::ref(g_.add_rule("string_char", {{raw}, u1, u2, slash}));
    Sequence s;
    g_.append_literal(s, "\"");
    s.push_back(Grammar::ref(make_star(g_, ch, "string_chars")));
    g_.append_literal(s, "\"");
    string_any_ = Grammar::ref(g_.add_rule("string", {s}));
  }
  return *string_any_;
}

Item JsonBuilder::any_value() {
  if (!any_value_) {
    const uint32_t value = g_.declare("value");
    any_value_ = Grammar::ref(value);
    const Item members = map_object(true, 0, -1, "#any", 0);
    const Item elements = array(SchemaJson::object(), "#any", 0);
    std::vector<Sequence> alts = {{members}, {elements}, {string_any()}, {number(SchemaJson::object(), false, "#any")}};
    for (const char* lit : {"true", "false", "null"}) {
      Sequence s;
      g_.append_literal(s, lit);
      alts.push_back(s);
    }
    g_.define(value, alts);
  }
  return *any_value_;
}

Item JsonBuilder::map_object(const SchemaJson& value_schema, int64_t min, int64_t max, const std::string& path, int depth) {
  if (max >= 0 && min > max) throw GrammarError("minProperties", "json schema: minProperties > maxProperties at " + path);
  if (min > options_.max_repeat || max > options_.max_repeat)
    unsupported("maxProperties", path, "a property count over " + std::to_string(options_.max_repeat));
  const Item val = value_schema == true ? any_value() : value(value_schema, path + "/additionalProperties", depth + 1);
  Sequence member{string_any(), ws_};
  g_.append_literal(member, ":");
  member.push_back(ws_);
  member.push_back(val);
  const Item m = as_item(g_, member, "member");
  Sequence body;
  g_.append_literal(body, "{");
  body.push_back(ws_);
  if (max != 0) {
    const Item more = as_item(g_, {sep(), m}, "more_member");
    Sequence list{m, Grammar::ref(
                         make_repeat(g_, more, std::max<int64_t>(min - 1, 0), max < 0 ? -1 : max - 1, "members", options_.max_repeat))};
    const Item l = as_item(g_, list, "member_list");
    body.push_back(min > 0 ? l : Grammar::ref(make_optional(g_, l, "member_list_opt")));
    body.push_back(ws_);
  }
  g_.append_literal(body, "}");
  return Grammar::ref(g_.add_rule("map", {body}));
}

Item JsonBuilder::object(const SchemaJson& schema, const std::string& path, int depth) {
  const SchemaJson props = schema.value("properties", SchemaJson::object());
  if (!props.is_object()) throw GrammarError("properties", "json schema: properties at " + path + " is not an object");
  const SchemaJson additional = schema.value("additionalProperties", SchemaJson(true));
  std::vector<std::string> required;
  if (schema.contains("required") && schema["required"].is_array())
    for (const auto& r : schema["required"])
      if (r.is_string()) required.push_back(r);
  const int64_t min_props = count_of(schema, "minProperties", 0), max_props = count_of(schema, "maxProperties", -1);
  if (props.empty() && required.empty())
    return map_object(additional == false ? SchemaJson(false) : additional, additional == false ? 0 : min_props,
                      additional == false ? 0 : max_props, path, depth);
  // Declared properties only, in the schema's key order; extra keys are not generated (a subset of
  // what additionalProperties allows, always valid). Required keys without a declared schema take
  // the additionalProperties schema.
  std::vector<std::pair<std::string, SchemaJson>> members;
  for (const auto& [name, sub] : props.items()) members.push_back({name, sub});
  for (const auto& r : required)
    if (!props.contains(r)) members.push_back({r, additional.is_object() ? additional : SchemaJson(true)});
  std::vector<bool> is_required;
  for (const auto& [name, sub] : members) is_required.push_back(std::find(required.begin(), required.end(), name) != required.end());
  if (static_cast<int64_t>(required.size()) < min_props)
    unsupported("minProperties", path, "minProperties above the number of required properties");
  if (max_props >= 0 && static_cast<int64_t>(members.size()) > max_props)
    unsupported("maxProperties", path, "maxProperties below the number of declared properties");
  std::vector<Item> member_items;
  for (size_t i = 0; i < members.size(); ++i) {
    Sequence s;
    g_.append_literal(s, escape_only(SchemaJson(members[i].first).dump(), options_.escaped_only));
    s.push_back(ws_);
    g_.append_literal(s, ":");
    s.push_back(ws_);
    const std::string sub_path = path + "/properties/" + members[i].first;
    s.push_back(members[i].second == true ? any_value() : value(members[i].second, sub_path, depth + 1));
    member_items.push_back(as_item(g_, s, "prop"));
  }
  // first(i): members from i when none was written yet; rest(i): after one was (comma first).
  const size_t n = members.size();
  std::vector<Item> first(n + 1), rest(n + 1);
  first[n] = Grammar::ref(g_.add_rule("obj_end", {{}}));
  rest[n] = first[n];
  for (size_t k = n; k-- > 0;) {
    std::vector<Sequence> ra = {{sep(), member_items[k], rest[k + 1]}};
    if (!is_required[k]) ra.push_back({rest[k + 1]});
    rest[k] = Grammar::ref(g_.add_rule("obj_rest", ra));
    std::vector<Sequence> fa = {{member_items[k], rest[k + 1]}};
    if (!is_required[k]) fa.push_back({first[k + 1]});
    first[k] = Grammar::ref(g_.add_rule("obj_first", fa));
  }
  Sequence body;
  g_.append_literal(body, "{");
  body.insert(body.end(), {ws_, first[0], ws_});
  g_.append_literal(body, "}");
  return Grammar::ref(g_.add_rule("object", {body}));
}

Item JsonBuilder::array(const SchemaJson& schema, const std::string& path, int depth) {
  std::vector<SchemaJson> prefix;
  SchemaJson rest = true;
  if (schema.contains("prefixItems")) {
    for (const auto& p : schema["prefixItems"]) prefix.push_back(p);
    if (schema.contains("items")) rest = schema["items"];
  } else if (schema.contains("items") && schema["items"].is_array()) {
    for (const auto& p : schema["items"]) prefix.push_back(p);
    rest = schema.value("additionalItems", SchemaJson(true));
  } else if (schema.contains("items")) {
    rest = schema["items"];
  }
  const int64_t p = static_cast<int64_t>(prefix.size());
  const int64_t min = count_of(schema, "minItems", 0);
  int64_t max = count_of(schema, "maxItems", -1);
  if (rest == false) max = max < 0 ? p : std::min(max, p);
  if (max >= 0 && min > max) unsupported("minItems", path, "minItems above the number of items allowed");
  if (min > options_.max_repeat || max > options_.max_repeat)
    unsupported("maxItems", path, "an item count over " + std::to_string(options_.max_repeat));
  std::vector<Item> prefix_items;
  for (int64_t k = 0; k < p && (max < 0 || k < max); ++k)
    prefix_items.push_back(value(prefix[static_cast<size_t>(k)], path + "/prefixItems/" + std::to_string(k), depth + 1));
  std::optional<Item> rest_item;
  auto rest_value = [&] {
    if (!rest_item) rest_item = rest == true ? any_value() : value(rest, path + "/items", depth + 1);
    return *rest_item;
  };
  // list(k, lead): items k.. with a leading separator when lead.
  std::function<Sequence(int64_t, bool)> list = [&](int64_t k, bool lead) -> Sequence {
    if (max >= 0 && k >= max) return {};
    if (k >= p) {
      const int64_t lo = std::max<int64_t>(min - k, 0), hi = max < 0 ? -1 : max - k;
      const Item more = as_item(g_, {sep(), rest_value()}, "more_item");
      if (lead) return {Grammar::ref(make_repeat(g_, more, lo, hi, "items", options_.max_repeat))};
      Sequence s{rest_value(),
                 Grammar::ref(make_repeat(g_, more, std::max<int64_t>(lo - 1, 0), hi < 0 ? -1 : hi - 1, "items", options_.max_repeat))};
      if (lo > 0) return s;
      return {Grammar::ref(make_optional(g_, as_item(g_, s, "item_list"), "item_list_opt"))};
    }
    Sequence s;
    if (lead) s.push_back(sep());
    s.push_back(prefix_items[static_cast<size_t>(k)]);
    const Sequence tail = list(k + 1, true);
    s.insert(s.end(), tail.begin(), tail.end());
    if (k < min) return s;
    return {Grammar::ref(make_optional(g_, as_item(g_, s, "tuple_item"), "tuple_opt"))};
  };
  Sequence body;
  g_.append_literal(body, "[");
  body.push_back(ws_);
  const Sequence items = list(0, false);
  body.insert(body.end(), items.begin(), items.end());
  if (!items.empty()) body.push_back(ws_);
  g_.append_literal(body, "]");
  return Grammar::ref(g_.add_rule("array", {body}));
}

Item JsonBuilder::string(const SchemaJson& schema, const std::string& path) {
  const bool has_length = schema.contains("minLength") || schema.contains("maxLength");
  std::string pattern;
  if (schema.contains("format")) {
    const std::string format = schema["format"].is_string() ? schema["format"].get<std::string>() : "";
    auto it = kFormats.find(format);
    if (it == kFormats.end()) unsupported("format", path, "string format '" + format + "'");
    pattern = it->second;
  }
  if (schema.contains("pattern")) {
    if (!pattern.empty()) unsupported("pattern", path, "a pattern together with a format");
    if (!schema["pattern"].is_string()) throw GrammarError("pattern", "json schema: pattern at " + path + " is not a string");
    pattern = schema["pattern"];
  }
  if (pattern.empty() && !has_length) return string_any();
  if (!pattern.empty() && has_length) unsupported("pattern", path, "a pattern or format together with minLength/maxLength");
  Sequence s;
  g_.append_literal(s, "\"");
  if (!pattern.empty()) {
    s.push_back(json_pattern_item(g_, pattern, "pattern", options_.escaped_only));
  } else {
    const int64_t min = count_of(schema, "minLength", 0), max = count_of(schema, "maxLength", -1);
    if (max >= 0 && min > max) throw GrammarError("minLength", "json schema: minLength > maxLength at " + path);
    if (min > options_.max_repeat || max > options_.max_repeat)
      unsupported("maxLength", path, "a string length bound over " + std::to_string(options_.max_repeat));
    string_any();  // builds the shared character rule
    if (!bounded_char_) bounded_char_ = json_char_item(g_, CodepointSet{}.complement(), "char", options_.escaped_only);
    s.push_back(Grammar::ref(make_repeat(g_, *bounded_char_, min, max, "chars", options_.max_repeat)));
  }
  g_.append_literal(s, "\"");
  return Grammar::ref(g_.add_rule("string_c", {s}));
}

Item JsonBuilder::number(const SchemaJson& schema, bool integer, const std::string& path) {
  NumberBounds b;
  auto read = [&](const char* key) -> std::optional<double> {
    if (!schema.contains(key) || !schema[key].is_number()) return std::nullopt;
    return schema[key].get<double>();
  };
  b.minimum = read("minimum");
  b.maximum = read("maximum");
  // Draft 4 writes exclusiveMinimum: true beside minimum; later drafts give the bound itself.
  if (schema.contains("exclusiveMinimum")) {
    if (schema["exclusiveMinimum"].is_boolean()) b.exclusive_minimum = schema["exclusiveMinimum"].get<bool>();
    else if (auto v = read("exclusiveMinimum"); v && (!b.minimum || *v >= *b.minimum)) b.minimum = v, b.exclusive_minimum = true;
  }
  if (schema.contains("exclusiveMaximum")) {
    if (schema["exclusiveMaximum"].is_boolean()) b.exclusive_maximum = schema["exclusiveMaximum"].get<bool>();
    else if (auto v = read("exclusiveMaximum"); v && (!b.maximum || *v <= *b.maximum)) b.maximum = v, b.exclusive_maximum = true;
  }
  const bool bounded = b.minimum || b.maximum;
  if (!bounded) {
    std::optional<Item>& cached = integer ? integer_any_ : number_any_;
    if (!cached) cached = integer ? json_integer_item(g_, b, "integer") : json_number_item(g_, b, "number");
    return *cached;
  }
  return integer ? json_integer_item(g_, b, "integer_" + path) : json_number_item(g_, b, "number_" + path);
}

}  // namespace sanctum::grammar

#include "chat/tools/qwen_xml_parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "chat/tools/json_scan.h"

namespace sanctum {
namespace {

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";
constexpr size_t kMaxNameBytes = 256;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool starts_with_any(std::string_view type, std::initializer_list<std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view p) { return type.starts_with(p); });
}

// The schema's type name; for a list of types the first that is not "null".
std::string schema_type(const nlohmann::ordered_json& schema) {
  if (!schema.is_object()) return "string";
  auto it = schema.find("type");
  if (it == schema.end()) return "string";
  if (it->is_string()) return lower(it->get<std::string>());
  if (it->is_array())
    for (const auto& t : *it)
      if (t.is_string() && t.get<std::string>() != "null") return lower(t.get<std::string>());
  return "string";
}

// A tag name: <function=NAME> / <parameter=KEY>. Empty when the text up to '>' cannot be one.
std::optional<std::string> tag_value(std::string_view rest, size_t& end) {
  const size_t close = rest.find('>');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view name = rest.substr(0, close);
  end = close + 1;
  return std::string(name);
}

bool valid_name(std::string_view name) {
  return !name.empty() && name.size() <= kMaxNameBytes && name.find_first_of("<\n") == std::string_view::npos;
}

// The nearest of several tags in `s`: (position, which), or (npos, -1).
std::pair<size_t, int> nearest(std::string_view s, std::initializer_list<std::string_view> tags) {
  std::pair<size_t, int> best{std::string_view::npos, -1};
  int k = 0;
  for (std::string_view t : tags) {
    const size_t p = s.find(t);
    if (p < best.first) best = {p, k};
    ++k;
  }
  return best;
}

}  // namespace

ParameterKind parameter_kind(const nlohmann::ordered_json& property_schema) {
  const std::string type = schema_type(property_schema);
  if (type == "string" || type == "str" || type == "text" || type == "varchar" || type == "char" || type == "enum")
    return ParameterKind::text;
  if (starts_with_any(type, {"int", "uint", "long", "short", "unsigned"})) return ParameterKind::integer;
  if (starts_with_any(type, {"num", "float", "double"})) return ParameterKind::number;
  if (type == "boolean" || type == "bool" || type == "binary") return ParameterKind::boolean;
  return ParameterKind::json;  // object, array and types we do not know
}

nlohmann::ordered_json convert_parameter_value(const nlohmann::ordered_json& property_schema, std::string value) {
  const ParameterKind kind = parameter_kind(property_schema);
  if (kind == ParameterKind::text) return value;
  const std::string_view v = trim_json_space(value);
  if (lower(v) == "null") return nullptr;
  switch (kind) {
    case ParameterKind::integer: {
      int64_t i = 0;
      const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), i);
      if (ec == std::errc() && ptr == v.data() + v.size() && !v.empty()) return i;
      return value;
    }
    case ParameterKind::number: {
      nlohmann::ordered_json n = parse_json_lenient(v);
      return !n.is_discarded() && n.is_number() ? n : nlohmann::ordered_json(value);
    }
    case ParameterKind::boolean: {
      const std::string b = lower(v);
      if (b == "true" || b == "false") return b == "true";
      return value;
    }
    default: {
      nlohmann::ordered_json parsed = parse_json_lenient(v);
      return parsed.is_discarded() ? nlohmann::ordered_json(value) : parsed;
    }
  }
}

QwenXmlParser::QwenXmlParser(ToolCallIds ids, const nlohmann::ordered_json& tools) : ToolCallParser(std::move(ids)) {
  if (!tools.is_array()) return;
  for (const auto& tool : tools) {
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object()) continue;
    const auto& f = tool["function"];
    if (!f.contains("name") || !f["name"].is_string()) continue;
    nlohmann::ordered_json props = nlohmann::ordered_json::object();
    if (f.contains("parameters") && f["parameters"].is_object() && f["parameters"].contains("properties") &&
        f["parameters"]["properties"].is_object())
      props = f["parameters"]["properties"];
    properties_[f["name"].get<std::string>()] = std::move(props);
  }
}

nlohmann::ordered_json QwenXmlParser::convert(const std::string& key, std::string value) const {
  auto f = properties_.find(function_);
  if (f == properties_.end() || !f->second.contains(key)) return value;  // no schema: keep the text
  return convert_parameter_value(f->second[key], std::move(value));
}

void QwenXmlParser::close_function() {
  arguments(members_ == 0 ? "{}" : "}");
  end_call();
  members_ = 0;
}

void QwenXmlParser::consume(bool at_end) {
  while (step(at_end)) {
  }
}

bool QwenXmlParser::step(bool at_end) {
  switch (state_) {
    case State::text:
      if (!take_text_until(kCallOpen, at_end)) return false;
      state_ = State::call_open;
      return true;

    case State::call_open:
    case State::after_function: {
      const size_t k = held_.find_first_not_of(" \t\r\n");
      if (k == std::string::npos) {
        if (at_end) {
          if (state_ == State::call_open) content(std::string(kCallOpen) + held_);
          held_.clear();
        }
        return false;
      }
      const std::string_view rest = std::string_view(held_).substr(k);
      if (state_ == State::after_function && rest.starts_with(kCallClose)) {
        held_.erase(0, k + kCallClose.size());
        state_ = State::text;
        return true;
      }
      if (rest.starts_with(kFunctionOpen)) {
        size_t end = 0;
        std::optional<std::string> name = tag_value(rest.substr(kFunctionOpen.size()), end);
        if (name && valid_name(*name)) {
          held_.erase(0, k + kFunctionOpen.size() + end);
          function_ = *name;
          begin_call(*name);
          state_ = State::function_body;
          return true;
        }
        const bool may_grow =
            !name && !at_end && rest.size() <= kFunctionOpen.size() + kMaxNameBytes && rest.find('\n') == std::string_view::npos;
        if (may_grow) return false;
      } else if (!at_end && (kFunctionOpen.starts_with(rest) || (state_ == State::after_function && kCallClose.starts_with(rest)))) {
        return false;  // a tag still arriving
      }
      // Not a call after all: the opening tag is content, and so is what follows.
      if (state_ == State::call_open) content(kCallOpen);
      state_ = State::text;
      return true;
    }

    case State::function_body: {
      const auto [pos, which] = nearest(held_, {kParameterOpen, kFunctionClose});
      if (which == 1) {
        held_.erase(0, pos + kFunctionClose.size());
        close_function();
        state_ = State::after_function;
        return true;
      }
      if (which == 0) {
        size_t end = 0;
        std::optional<std::string> key = tag_value(std::string_view(held_).substr(pos + kParameterOpen.size()), end);
        if (!key) {
          if (!at_end) return false;
          held_.clear();
          close_function();
          state_ = State::text;
          return false;
        }
        held_.erase(0, pos + kParameterOpen.size() + end);
        key_ = *key;
        state_ = State::value;
        return true;
      }
      if (at_end) {
        held_.clear();
        close_function();
        state_ = State::text;
        return false;
      }
      // Only whitespace belongs here: keep just what may be the start of a tag.
      const size_t keep = std::max(partial_tag_tail(held_, kParameterOpen), partial_tag_tail(held_, kFunctionClose));
      held_.erase(0, held_.size() - keep);
      return false;
    }

    case State::value: {
      const auto [pos, which] = nearest(held_, {kParameterClose, kParameterOpen, kFunctionClose});
      if (which < 0 && !at_end) return false;
      std::string value = which < 0 ? held_ : held_.substr(0, pos);
      held_.erase(0, which < 0 ? held_.size() : pos + (which == 0 ? kParameterClose.size() : 0));
      if (value.starts_with('\n')) value.erase(0, 1);
      if (value.ends_with('\n')) value.pop_back();
      const std::string member = dump_json(nlohmann::ordered_json(key_)) + ":" + dump_json(convert(key_, std::move(value)));
      arguments((members_++ == 0 ? "{" : ",") + member);
      state_ = State::function_body;
      return true;
    }
  }
  return false;
}

}  // namespace sanctum

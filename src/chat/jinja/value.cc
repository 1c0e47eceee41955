#include "chat/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "base/utf8.h"

namespace sanctum::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  for (auto& [k, old] : items)
    if (k == key) {
      old = std::move(v);
      return;
    }
  items.emplace_back(key, std::move(v));
}

const Value* Args::kw(std::string_view name) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

const Value* Args::get(size_t pos, std::string_view name) const {
  if (pos < positional.size()) return &positional[pos];
  return kw(name);
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return integer(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& x : j) items.push_back(from_json(x));
      return make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value v = make_dict();
      for (const auto& [k, x] : j.items()) v.dict->items.emplace_back(k, from_json(x));
      return v;
    }
    default: return none();
  }
}

std::string dict_key(const Value& key) {
  if (key.is_string()) return key.s;
  std::string tagged(1, '\x01');
  tagged += key.repr();
  return tagged;
}

Value key_value(const std::string& key) {
  if (key.empty() || key[0] != '\x01') return Value::string(key);
  const std::string r = key.substr(1);
  if (r == "None") return Value::none();
  if (r == "True" || r == "False") return Value::boolean(r == "True");
  if (r.find_first_of(".en") != std::string::npos) return Value::number(std::strtod(r.c_str(), nullptr));
  return Value::integer(std::strtoll(r.c_str(), nullptr, 10));
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return b;
    case Kind::integer: return i != 0;
    case Kind::number: return d != 0;
    case Kind::string: return !s.empty();
    case Kind::list: return generator || !list->empty();
    case Kind::dict: return dict->is_namespace || !dict->items.empty();
    case Kind::function: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::number: return "float";
    case Kind::string: return "str";
    case Kind::list: return "list";
    case Kind::dict: return dict->is_namespace ? "Namespace" : "dict";
    case Kind::function: return "function";
  }
  return "?";
}

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    const size_t n = b0 < 0x80 ? 1 : (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 1;
    char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    out += cp;
    i += n;
  }
  return out;
}

std::string from_u32(std::u32string_view s) {
  std::string out;
  for (char32_t cp : s) utf8::append(out, cp);
  return out;
}

size_t Value::length() const {
  switch (kind) {
    case Kind::undefined: return 0;
    case Kind::string: return to_u32(s).size();
    case Kind::list:
      if (generator) fail(ErrorKind::invalid_input, "object of type 'generator' has no len()");
      return list->size();
    case Kind::dict: return dict->items.size();
    default: fail(ErrorKind::invalid_input, std::string("object of type '") + type_name() + "' has no len()");
  }
}

List Value::iterate() const {
  switch (kind) {
    case Kind::undefined: return {};
    case Kind::list: return *list;
    case Kind::dict: {
      List keys;
      for (const auto& [k, v] : dict->items) keys.push_back(key_value(k));
      return keys;
    }
    case Kind::string: {
      List chars;
      for (char32_t c : to_u32(s)) chars.push_back(string(from_u32(std::u32string(1, c))));
      return chars;
    }
    default: fail(ErrorKind::invalid_input, std::string("'") + type_name() + "' object is not iterable");
  }
}

std::string python_float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // d.ddde+XX
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  std::string sign;
  if (mant[0] == '-') sign = "-", mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  if (exp < -4 || exp >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + eb;
  }
  if (exp < 0) return sign + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  const size_t int_len = static_cast<size_t>(exp) + 1;
  if (digits.size() <= int_len) return sign + digits + std::string(int_len - digits.size(), '0') + ".0";
  return sign + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

namespace {

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : to_u32(s)) {
    char buf[16];
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || c == 0xFEFF) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += from_u32(std::u32string(1, c));
    }
  }
  out += quote;
  return out;
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : to_u32(s)) {
    char buf[16];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          }
          out += buf;
        } else {
          out += from_u32(std::u32string(1, c));
        }
    }
  }
  out += '"';
}

void dump_into(std::string& out, const Value& v, int indent, int level, const std::string& item_sep, const std::string& key_sep,
               bool sort_keys, bool ensure_ascii) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * lvl), ' ');
  };
  switch (v.kind) {
    case Value::Kind::undefined: fail(ErrorKind::invalid_input, "Object of type Undefined is not JSON serializable");
    case Value::Kind::none: out += "null"; return;
    case Value::Kind::boolean: out += v.b ? "true" : "false"; return;
    case Value::Kind::integer: out += std::to_string(v.i); return;
    case Value::Kind::number:
      if (std::isnan(v.d)) out += "NaN";
      else if (std::isinf(v.d)) out += v.d > 0 ? "Infinity" : "-Infinity";
      else out += python_float_repr(v.d);
      return;
    case Value::Kind::string: json_string(out, v.s, ensure_ascii); return;
    case Value::Kind::list: {
      if (v.generator) fail(ErrorKind::invalid_input, "Object of type generator is not JSON serializable");
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += item_sep;
        newline(level + 1);
        dump_into(out, (*v.list)[k], indent, level + 1, item_sep, key_sep, sort_keys, ensure_ascii);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Kind::dict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict->items) items.push_back(&kv);
      if (sort_keys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += item_sep;
        newline(level + 1);
        const Value key = key_value(items[k]->first);
        json_string(out,
                    key.is_string()                    ? key.s
                    : key.kind == Value::Kind::boolean ? (key.b ? "true" : "false")
                    : key.is_none()                    ? "null"
                                                       : key.repr(),
                    ensure_ascii);
        out += key_sep;
        dump_into(out, items[k]->second, indent, level + 1, item_sep, key_sep, sort_keys, ensure_ascii);
      }
      newline(level);
      out += '}';
      return;
    }
    case Value::Kind::function: fail(ErrorKind::invalid_input, "Object of type function is not JSON serializable");
  }
}

}  // namespace

std::string dumps(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep, bool sort_keys, bool ensure_ascii) {
  std::string out;
  dump_into(out, v, indent, 0, item_sep, key_sep, sort_keys, ensure_ascii);
  return out;
}

std::string Value::str() const {
  switch (kind) {
    case Kind::undefined: return "";
    case Kind::string: return s;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind) {
    case Kind::undefined: return "";
    case Kind::none: return "None";
    case Kind::boolean: return b ? "True" : "False";
    case Kind::integer: return std::to_string(i);
    case Kind::number: return python_float_repr(d);
    case Kind::string: return repr_string(s);
    case Kind::list: {
      std::string out = "[";
      for (size_t k = 0; k < list->size(); ++k) out += (k ? ", " : "") + (*list)[k].repr();
      return out + "]";
    }
    case Kind::dict: {
      if (dict->is_namespace) return "<Namespace>";
      std::string out = "{";
      for (size_t k = 0; k < dict->items.size(); ++k)
        out += (k ? ", " : "") + key_value(dict->items[k].first).repr() + ": " + dict->items[k].second.repr();
      return out + "}";
    }
    case Kind::function: return "<function>";
  }
  return "";
}

nlohmann::ordered_json Value::to_json() const { return nlohmann::ordered_json::parse(dumps(*this, -1, ",", ":", false, false)); }

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Kind::number || b.kind == Value::Kind::number) return a.as_double() == b.as_double();
    return (a.kind == Value::Kind::boolean ? a.b : a.i) == (b.kind == Value::Kind::boolean ? b.b : b.i);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::undefined:
    case Value::Kind::none: return true;
    case Value::Kind::string: return a.s == b.s;
    case Value::Kind::list:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case Value::Kind::dict:
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    case Value::Kind::function: return a.fn == b.fn;
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() < b.as_double();
  if (a.is_string() && b.is_string()) return a.s < b.s;
  if (a.is_list() && b.is_list()) {
    const size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k) {
      if (less((*a.list)[k], (*b.list)[k])) return true;
      if (less((*b.list)[k], (*a.list)[k])) return false;
    }
    return a.list->size() < b.list->size();
  }
  fail(ErrorKind::invalid_input, std::string("'<' not supported between instances of '") + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace sanctum::jinja

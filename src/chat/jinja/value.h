#pragma once
// Values of the Jinja-subset interpreter, with Python semantics where templates can see them:
// str() / repr() formatting, truthiness, equality, ordering, JSON round-trips.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace sanctum::jinja {

struct Value;
class Interpreter;
using List = std::vector<Value>;

struct Dict {
  std::vector<std::pair<std::string, Value>> items;  // insertion order, as Python dicts
  bool is_namespace = false;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
};

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* kw(std::string_view name) const;
  // Positional index `pos` or keyword `name`, else nullptr.
  const Value* get(size_t pos, std::string_view name) const;
};

using Function = std::function<Value(const Args&, Interpreter&)>;

struct Value {
  enum class Kind : uint8_t { undefined, none, boolean, integer, number, string, list, dict, function };
  Kind kind = Kind::undefined;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;  // string value, or the name of an undefined variable
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Function> fn;
  bool generator = false;  // list produced by map/select/...: Python sees a generator (not JSON serializable)
  bool markup = false;     // string marked safe (|safe, |e): `+` with a plain string escapes the plain side

  // clang-format off
  static Value undefined(std::string name = {}) { Value v; v.s = std::move(name); return v; }
  static Value none() { Value v; v.kind = Kind::none; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::boolean; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::integer; v.i = x; return v; }
  static Value number(double x) { Value v; v.kind = Kind::number; v.d = x; return v; }
  static Value string(std::string x) { Value v; v.kind = Kind::string; v.s = std::move(x); return v; }
  static Value make_list(List items = {}) { Value v; v.kind = Kind::list; v.list = std::make_shared<List>(std::move(items)); return v; }
  static Value make_dict() { Value v; v.kind = Kind::dict; v.dict = std::make_shared<Dict>(); return v; }
  static Value function(Function f) { Value v; v.kind = Kind::function; v.fn = std::make_shared<Function>(std::move(f)); return v; }
  // clang-format on
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return kind == Kind::undefined; }
  bool is_none() const { return kind == Kind::none; }
  bool is_string() const { return kind == Kind::string; }
  bool is_list() const { return kind == Kind::list; }
  bool is_dict() const { return kind == Kind::dict; }
  bool is_number() const { return kind == Kind::integer || kind == Kind::number || kind == Kind::boolean; }
  double as_double() const { return kind == Kind::number ? d : kind == Kind::boolean ? (b ? 1 : 0) : static_cast<double>(i); }

  bool truthy() const;
  std::string str() const;   // Python str()
  std::string repr() const;  // Python repr()
  const char* type_name() const;
  // Python len(); throws for types without one.
  size_t length() const;
  // Iteration as a Jinja for loop does (dict -> keys, string -> characters, undefined -> nothing).
  List iterate() const;
  nlohmann::ordered_json to_json() const;
};

bool equals(const Value& a, const Value& b);
// Python ordering (<); throws Error for incomparable types.
bool less(const Value& a, const Value& b);

// json.dumps(value, ensure_ascii, indent, separators, sort_keys) byte for byte.
std::string dumps(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep, bool sort_keys, bool ensure_ascii);
std::string python_float_repr(double x);

// Dict keys are strings; other key types (ints, as in `{512: 128}`) are stored tagged with a leading
// '\x01' and their repr, and come back as their original type.
std::string dict_key(const Value& key);
Value key_value(const std::string& key);

// Code point helpers for Python string indexing.
std::u32string to_u32(std::string_view s);
std::string from_u32(std::u32string_view s);

}  // namespace sanctum::jinja

// Filters and tests available to templates (the ones real chat templates use, plus their close kin).
#include <algorithm>
#include <cmath>
#include <set>

#include "chat/jinja/interpreter.h"
#include "chat/jinja/parser.h"

namespace sanctum::jinja {
namespace {

const std::set<std::string>& filter_names() {
  static const std::set<std::string> names = {"abs",     "attr",     "batch",  "capitalize", "center",     "count",    "d",
                                              "default", "dictsort", "e",      "escape",     "first",      "float",    "indent",
                                              "int",     "items",    "join",   "last",       "length",     "list",     "lower",
                                              "map",     "max",      "min",    "reject",     "rejectattr", "replace",  "reverse",
                                              "round",   "safe",     "select", "selectattr", "sort",       "string",   "sum",
                                              "title",   "tojson",   "trim",   "unique",     "upper",      "wordcount"};
  return names;
}

const std::set<std::string>& test_names() {
  static const std::set<std::string> names = {"boolean",  "callable", "defined", "divisibleby", "eq",    "equalto", "==",       "even",
                                              "false",    "float",    "ge",      "gt",          "in",    "integer", "iterable", "le",
                                              "lower",    "lt",       "mapping", "ne",          "none",  "number",  "odd",      "sameas",
                                              "sequence", "string",   "true",    "undefined",   "upper", "filter",  "test"};
  return names;
}

bool is_space32(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

Value attr_path(const Value& v, const std::string& path, Interpreter& in) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (cur.is_dict()) {
      const Value* x = cur.dict->find(part);
      cur = x ? *x : Value::undefined(part);
    } else if (cur.is_list() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      const size_t k = std::stoul(part);
      cur = k < cur.list->size() ? (*cur.list)[k] : Value::undefined(part);
    } else {
      cur = Value::undefined(part);
    }
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

int64_t to_int(const Value& v, int64_t fallback) {
  switch (v.kind) {
    case Value::Kind::integer: return v.i;
    case Value::Kind::boolean: return v.b;
    case Value::Kind::number: return std::isfinite(v.d) && std::fabs(v.d) < 9.2e18 ? static_cast<int64_t>(v.d) : fallback;
    case Value::Kind::string: {
      try {
        size_t used = 0;
        const long long x = std::stoll(v.s, &used);
        return used == v.s.size() ? x : fallback;
      } catch (...) {
        return fallback;
      }
    }
    default: return fallback;
  }
}

std::string case_map(const std::string& s, bool upper) {
  std::string out = s;
  for (char& c : out)
    c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

bool is_known_filter(const std::string& name) { return filter_names().count(name) != 0; }
bool is_known_test(const std::string& name) { return test_names().count(name) != 0; }

bool contains(const Value& container, const Value& item, Interpreter& in) {
  if (container.is_string()) {
    if (!item.is_string()) in.error(0, "'in <string>' requires string as left operand");
    return container.s.find(item.s) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : *container.list)
      if (equals(v, item)) return true;
    return false;
  }
  if (container.is_dict()) return container.dict->find(dict_key(item)) != nullptr;
  if (container.is_undefined()) return false;
  in.error(0, std::string("argument of type '") + container.type_name() + "' is not iterable");
}

std::string python_strip(const std::string& s, const Value* chars, bool left, bool right) {
  const std::u32string u = to_u32(s);
  std::u32string set;
  const bool custom = chars && chars->is_string();
  if (custom) set = to_u32(chars->s);
  auto strip_it = [&](char32_t c) { return custom ? set.find(c) != std::u32string::npos : is_space32(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_it(u[b])) ++b;
  if (right)
    while (e > b && strip_it(u[e - 1])) --e;
  return from_u32(u.substr(b, e - b));
}

Value apply_filter(const std::string& name, const Value& v, const Args& a, Interpreter& in) {
  const Value* a0 = a.positional.empty() ? nullptr : &a.positional[0];
  if (name == "tojson") {
    const Value* indent = a.get(0, "indent");
    const Value* seps = a.kw("separators");
    const Value* sort = a.kw("sort_keys");
    const Value* ascii = a.kw("ensure_ascii");
    const int ind = indent && indent->kind == Value::Kind::integer ? static_cast<int>(std::clamp<int64_t>(indent->i, 0, 64)) : -1;
    std::string item_sep = ind >= 0 ? "," : ", ", key_sep = ": ";
    if (seps && seps->is_list() && seps->list->size() == 2) item_sep = (*seps->list)[0].str(), key_sep = (*seps->list)[1].str();
    return Value::string(dumps(v, ind, item_sep, key_sep, sort && sort->truthy(), ascii && ascii->truthy()));
  }
  if (name == "length" || name == "count") return Value::integer(static_cast<int64_t>(v.length()));
  if (name == "string") return Value::string(v.str());
  if (name == "safe" || name == "e" || name == "escape") {
    if (name == "safe" || v.markup) {
      Value r = Value::string(v.str());
      r.markup = true;
      return r;
    }
    Value r = Value::string(html_escape(v.str()));
    r.markup = true;
    return r;
  }
  if (name == "trim") return Value::string(python_strip(v.str(), a0, true, true));
  if (name == "upper") return Value::string(case_map(v.str(), true));
  if (name == "lower") return Value::string(case_map(v.str(), false));
  if (name == "capitalize") {
    std::string s = case_map(v.str(), false);
    if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    return Value::string(s);
  }
  if (name == "title") {
    std::string s = v.str();
    bool start = true;
    for (char& c : s) {
      const bool alpha = std::isalpha(static_cast<unsigned char>(c));
      c = static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
      start = !alpha;
    }
    return Value::string(s);
  }
  if (name == "default" || name == "d") {
    const Value* boolean = a.get(1, "boolean");
    const bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
    const Value* dv = a.get(0, "default_value");
    return use_default ? (dv ? *dv : Value::string("")) : v;
  }
  if (name == "join") {
    const Value* sep = a.get(0, "d");
    const Value* attribute = a.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& x : v.iterate()) {
      if (!first) out += sep ? sep->str() : "";
      first = false;
      out += attribute ? attr_path(x, attribute->str(), in).str() : x.str();
    }
    return Value::string(out);
  }
  if (name == "first" || name == "last") {
    const List items = v.iterate();
    if (items.empty()) return Value::undefined();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::make_list(v.iterate());
  if (name == "items") {
    if (v.is_undefined()) return Value::make_list();
    if (!v.is_dict()) in.error(0, "items filter needs a mapping");
    List out;
    for (const auto& [k, x] : v.dict->items) out.push_back(Value::make_list({key_value(k), x}));
    return Value::make_list(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) in.error(0, "dictsort filter needs a mapping");
    const Value* cs = a.get(0, "case_sensitive");
    const Value* by = a.get(1, "by");
    const Value* rev = a.get(2, "reverse");
    const bool by_value = by && by->str() == "value";
    List out;
    for (const auto& [k, x] : v.dict->items) out.push_back(Value::make_list({key_value(k), x}));
    auto key = [&](const Value& pair) {
      Value k = (*pair.list)[by_value ? 1 : 0];
      if (k.is_string() && !(cs && cs->truthy())) k.s = case_map(k.s, false);
      return k;
    };
    std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) { return less(key(x), key(y)); });
    if (rev && rev->truthy()) std::reverse(out.begin(), out.end());
    return Value::make_list(std::move(out));
  }
  if ((name == "map" || name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") &&
      (v.is_none() || v.is_undefined() || (v.kind == Value::Kind::boolean && !v.b))) {
    Value empty = Value::make_list();
    empty.generator = true;
    return empty;
  }
  if (name == "map") {
    List out;
    const Value* attribute = a.kw("attribute");
    const Value* dflt = a.kw("default");
    for (const Value& x : v.iterate()) {
      if (attribute) {
        Value r = attr_path(x, attribute->str(), in);
        out.push_back(r.is_undefined() && dflt ? *dflt : r);
      } else if (a0) {
        Args rest;
        rest.positional.assign(a.positional.begin() + 1, a.positional.end());
        rest.keyword = a.keyword;
        out.push_back(apply_filter(a0->str(), x, rest, in));
      } else {
        out.push_back(x);
      }
    }
    Value g = Value::make_list(std::move(out));
    g.generator = true;
    return g;
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool keep_if = name == "select" || name == "selectattr";
    const size_t test_pos = by_attr ? 1 : 0;
    List out;
    for (const Value& x : v.iterate()) {
      const Value subject = by_attr ? (a0 ? attr_path(x, a0->str(), in) : Value::undefined()) : x;
      bool ok;
      if (a.positional.size() > test_pos) {
        const std::string test = a.positional[test_pos].str();
        if (!is_known_test(test)) in.error(0, "no test named '" + test + "'");
        Args rest;
        rest.positional.assign(a.positional.begin() + static_cast<long>(test_pos) + 1, a.positional.end());
        ok = apply_test(test, subject, rest, in);
      } else {
        ok = subject.truthy();
      }
      if (ok == keep_if) out.push_back(x);
    }
    Value g = Value::make_list(std::move(out));
    g.generator = true;
    return g;
  }
  if (name == "replace") {
    if (a.positional.size() < 2) in.error(0, "replace filter needs old and new strings");
    Args rest;
    rest.positional = a.positional;
    return (*bound_method(Value::string(v.str()), "replace").fn)(rest, in);
  }
  if (name == "indent") {
    const Value* width = a.get(0, "width");
    const Value* first = a.get(1, "first");
    const Value* blank = a.get(2, "blank");
    const std::string pad = width && width->is_string()
                                ? width->s
                                : std::string(static_cast<size_t>(std::clamp<int64_t>(width ? to_int(*width, 4) : 4, 0, 256)), ' ');
    const std::string s = v.str();
    std::string out;
    size_t start = 0;
    bool first_line = true;
    while (true) {
      const size_t nl = s.find('\n', start);
      const std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      const bool indent_it = first_line ? (first && first->truthy()) : (!line.empty() || (blank && blank->truthy()));
      if (indent_it) out += pad;
      out += line;
      if (nl == std::string::npos) break;
      out += '\n';
      start = nl + 1;
      first_line = false;
    }
    return Value::string(out);
  }
  if (name == "int") return Value::integer(to_int(v, a0 ? to_int(*a0, 0) : 0));
  if (name == "float") {
    if (v.is_number()) return Value::number(v.as_double());
    try {
      return Value::number(std::stod(v.str()));
    } catch (...) {
      return Value::number(a0 ? a0->as_double() : 0.0);
    }
  }
  if (name == "abs") {
    if (v.kind == Value::Kind::integer && v.i != INT64_MIN) return Value::integer(v.i < 0 ? -v.i : v.i);
    return Value::number(std::fabs(v.as_double()));
  }
  if (name == "round") {
    const Value* precision = a.get(0, "precision");
    const double scale = std::pow(10.0, precision ? static_cast<double>(to_int(*precision, 0)) : 0.0);
    return Value::number(std::nearbyint(v.as_double() * scale) / scale);
  }
  if (name == "unique") {
    List out;
    for (const Value& x : v.iterate())
      if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equals(x, y); })) out.push_back(x);
    return Value::make_list(std::move(out));
  }
  if (name == "sort") {
    const Value* rev = a.get(0, "reverse");
    const Value* attribute = a.get(2, "attribute");
    List out = v.iterate();
    auto key = [&](const Value& x) { return attribute ? attr_path(x, attribute->str(), in) : x; };
    std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) { return less(key(x), key(y)); });
    if (rev && rev->truthy()) std::reverse(out.begin(), out.end());
    return Value::make_list(std::move(out));
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string u = to_u32(v.s);
      std::reverse(u.begin(), u.end());
      return Value::string(from_u32(u));
    }
    List out = v.iterate();
    std::reverse(out.begin(), out.end());
    return Value::make_list(std::move(out));
  }
  if (name == "sum") {
    const Value* attribute = a.kw("attribute");
    Value total = a.get(1, "start") ? *a.get(1, "start") : Value::integer(0);
    for (const Value& x : v.iterate()) {
      const Value y = attribute ? attr_path(x, attribute->str(), in) : x;
      if (!y.is_number()) in.error(0, "sum filter needs numbers");
      int64_t r = 0;
      const int64_t yi = y.kind == Value::Kind::boolean ? y.b : y.i;
      total = total.kind == Value::Kind::integer && y.kind != Value::Kind::number && !__builtin_add_overflow(total.i, yi, &r)
                  ? Value::integer(r)
                  : Value::number(total.as_double() + y.as_double());
    }
    return total;
  }
  if (name == "min" || name == "max") {
    const List items = v.iterate();
    if (items.empty()) return Value::undefined();
    Value best = items[0];
    for (const Value& x : items)
      if (name == "min" ? less(x, best) : less(best, x)) best = x;
    return best;
  }
  if (name == "wordcount") {
    size_t n = 0;
    bool in_word = false;
    for (char32_t c : to_u32(v.str())) {
      const bool w = !is_space32(c);
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value::integer(static_cast<int64_t>(n));
  }
  if (name == "center") {
    const int64_t width = std::clamp<int64_t>(a0 ? to_int(*a0, 80) : 80, 0, 4096);
    std::string s = v.str();
    const auto len = static_cast<int64_t>(to_u32(s).size());
    if (len >= width) return Value::string(s);
    const int64_t left = (width - len) / 2;
    return Value::string(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(width - len - left), ' '));
  }
  if (name == "attr") return a0 && v.is_dict() ? attr_path(v, a0->str(), in) : Value::undefined();
  if (name == "batch") {
    const int64_t size = std::max<int64_t>(1, a0 ? to_int(*a0, 1) : 1);
    List out, cur;
    for (const Value& x : v.iterate()) {
      cur.push_back(x);
      if (static_cast<int64_t>(cur.size()) == size) out.push_back(Value::make_list(std::move(cur))), cur.clear();
    }
    if (!cur.empty()) out.push_back(Value::make_list(std::move(cur)));
    return Value::make_list(std::move(out));
  }
  in.error(0, "no filter named '" + name + "'");
}

bool apply_test(const std::string& name, const Value& v, const Args& a, Interpreter& in) {
  const Value* a0 = a.positional.empty() ? nullptr : &a.positional[0];
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == K::boolean;
  if (name == "true") return v.kind == K::boolean && v.b;
  if (name == "false") return v.kind == K::boolean && !v.b;
  if (name == "integer") return v.kind == K::integer;
  if (name == "float") return v.kind == K::number;
  if (name == "number") return v.kind == K::integer || v.kind == K::number || v.kind == K::boolean;
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.dict->is_namespace;
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "callable") return v.kind == K::function;
  if (name == "lower") return v.is_string() && case_map(v.s, false) == v.s;
  if (name == "upper") return v.is_string() && case_map(v.s, true) == v.s;
  if (name == "filter") return is_known_filter(v.str());
  if (name == "test") return is_known_test(v.str());
  if (name == "even" || name == "odd") return v.kind == K::integer && ((v.i % 2 == 0) == (name == "even"));
  if (!a0) in.error(0, "test '" + name + "' needs an argument");
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, *a0);
  if (name == "ne") return !equals(v, *a0);
  if (name == "sameas") return v.kind == a0->kind && equals(v, *a0);
  if (name == "lt") return less(v, *a0);
  if (name == "gt") return less(*a0, v);
  if (name == "le") return !less(*a0, v);
  if (name == "ge") return !less(v, *a0);
  if (name == "in") return contains(*a0, v, in);
  if (name == "divisibleby") {
    const int64_t d = a0->kind == K::integer ? a0->i : 0;
    if (d == 0 || v.kind != K::integer) return false;
    return v.i % d == 0;
  }
  in.error(0, "no test named '" + name + "'");
}

}  // namespace sanctum::jinja

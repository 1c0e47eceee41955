// Methods templates call on values: str (strip, split, startswith, replace, format, ...), dict (get,
// items, keys, values) and list (index, count). Mutating methods are absent, as in the immutable sandbox
// transformers renders with.
#include <algorithm>

#include "chat/jinja/interpreter.h"

namespace sanctum::jinja {
namespace {

bool is_ws(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 || c == 0x3000 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029;
}

List split(const std::string& s, const Value* sep, int64_t maxsplit, Interpreter& in) {
  List out;
  if (!sep || sep->is_none()) {
    const std::u32string u = to_u32(s);
    size_t i = 0;
    while (i < u.size()) {
      while (i < u.size() && is_ws(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = u.size();
        while (e > i && is_ws(u[e - 1])) --e;
        out.push_back(Value::string(from_u32(u.substr(i, e - i))));
        break;
      }
      size_t j = i;
      while (j < u.size() && !is_ws(u[j])) ++j;
      out.push_back(Value::string(from_u32(u.substr(i, j - i))));
      i = j;
    }
    return out;
  }
  const std::string d = sep->str();
  if (d.empty()) in.error(0, "empty separator");
  size_t start = 0;
  while (true) {
    const size_t at = (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) ? std::string::npos : s.find(d, start);
    if (at == std::string::npos) {
      out.push_back(Value::string(s.substr(start)));
      return out;
    }
    out.push_back(Value::string(s.substr(start, at - start)));
    start = at + d.size();
  }
}

bool affix_match(const std::string& s, const Value& arg, bool prefix) {
  auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (arg.is_list()) return std::any_of(arg.list->begin(), arg.list->end(), [&](const Value& v) { return one(v.str()); });
  return one(arg.str());
}

std::string format(const std::string& fmt, const Args& a, Interpreter& in) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (fmt[i] == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (fmt[i] == '{') {
      const size_t close = fmt.find('}', i);
      if (close == std::string::npos) in.error(0, "single '{' in format string");
      const std::string field = fmt.substr(i + 1, close - i - 1);
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_index < a.positional.size() ? &a.positional[auto_index] : nullptr;
        ++auto_index;
      } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
        const size_t k = std::stoul(field);
        v = k < a.positional.size() ? &a.positional[k] : nullptr;
      } else {
        v = a.kw(field);
      }
      if (!v) in.error(0, "format: no value for field '{" + field + "}'");
      out += v->str();
      i = close;
    } else {
      out += fmt[i];
    }
  }
  return out;
}

template <class F>
Value method(F f) {
  return Value::function([f](const Args& a, Interpreter& in) { return f(a, in); });
}

Value string_method(const std::string& s, const std::string& name) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return method([s, left, right](const Args& a, Interpreter&) {
      return Value::string(python_strip(s, a.positional.empty() ? nullptr : &a.positional[0], left, right));
    });
  }
  if (name == "split" || name == "rsplit") {
    const bool reverse = name == "rsplit";
    return method([s, reverse](const Args& a, Interpreter& in) {
      const Value* sep = a.get(0, "sep");
      const Value* maxsplit = a.get(1, "maxsplit");
      const int64_t m = maxsplit && maxsplit->kind == Value::Kind::integer ? maxsplit->i : -1;
      if (!reverse || m < 0) return Value::make_list(split(s, sep, m, in));
      // rsplit with a limit: split everything, then rejoin the leading part.
      List all = split(s, sep, -1, in);
      if (static_cast<int64_t>(all.size()) <= m + 1) return Value::make_list(std::move(all));
      const std::string d = sep && !sep->is_none() ? sep->str() : " ";
      std::string head;
      const size_t keep_head = all.size() - static_cast<size_t>(m);
      for (size_t k = 0; k < keep_head; ++k) head += (k ? d : "") + all[k].s;
      List out{Value::string(head)};
      out.insert(out.end(), all.begin() + static_cast<long>(keep_head), all.end());
      return Value::make_list(std::move(out));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return method([s, prefix](const Args& a, Interpreter& in) {
      if (a.positional.empty()) in.error(0, "startswith/endswith needs an argument");
      return Value::boolean(affix_match(s, a.positional[0], prefix));
    });
  }
  if (name == "upper" || name == "lower") {
    const bool up = name == "upper";
    return method([s, up](const Args&, Interpreter&) {
      std::string out = s;
      for (char& c : out)
        c = static_cast<char>(up ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
      return Value::string(out);
    });
  }
  if (name == "title" || name == "capitalize") {
    const std::string filter = name;
    return method([s, filter](const Args& a, Interpreter& in) { return apply_filter(filter, Value::string(s), a, in); });
  }
  if (name == "replace") {
    return method([s](const Args& a, Interpreter& in) {
      if (a.positional.size() < 2) in.error(0, "replace needs old and new strings");
      const std::string from = a.positional[0].str(), to = a.positional[1].str();
      int64_t count = a.positional.size() > 2 && a.positional[2].kind == Value::Kind::integer ? a.positional[2].i : -1;
      std::string out;
      if (from.empty()) {
        const std::u32string u = to_u32(s);
        for (size_t k = 0; k <= u.size(); ++k) {
          if (count != 0) out += to, --count;
          if (k < u.size()) out += from_u32(u.substr(k, 1));
        }
        return Value::string(out);
      }
      size_t start = 0;
      while (count != 0) {
        const size_t at = s.find(from, start);
        if (at == std::string::npos) break;
        out += s.substr(start, at - start) + to;
        start = at + from.size();
        --count;
      }
      out += s.substr(start);
      return Value::string(out);
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    const std::string op = name;
    return method([s, op](const Args& a, Interpreter& in) {
      if (a.positional.empty()) in.error(0, op + " needs an argument");
      const std::string needle = a.positional[0].str();
      if (op == "count") {
        if (needle.empty()) return Value::integer(static_cast<int64_t>(to_u32(s).size() + 1));
        int64_t n = 0;
        for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + needle.size())) ++n;
        return Value::integer(n);
      }
      const size_t at = op == "rfind" ? s.rfind(needle) : s.find(needle);
      if (at == std::string::npos) {
        if (op == "index") in.error(0, "substring not found");
        return Value::integer(-1);
      }
      return Value::integer(static_cast<int64_t>(to_u32(s.substr(0, at)).size()));
    });
  }
  if (name == "join") {
    return method([s](const Args& a, Interpreter& in) {
      if (a.positional.empty()) in.error(0, "join needs an iterable");
      std::string out;
      bool first = true;
      for (const Value& v : a.positional[0].iterate()) out += (first ? "" : s) + v.str(), first = false;
      return Value::string(out);
    });
  }
  if (name == "format") return method([s](const Args& a, Interpreter& in) { return Value::string(format(s, a, in)); });
  if (name == "splitlines") {
    return method([s](const Args&, Interpreter&) {
      List out;
      size_t start = 0;
      while (start < s.size()) {
        const size_t nl = s.find_first_of("\r\n", start);
        if (nl == std::string::npos) {
          out.push_back(Value::string(s.substr(start)));
          break;
        }
        out.push_back(Value::string(s.substr(start, nl - start)));
        start = nl + ((s[nl] == '\r' && nl + 1 < s.size() && s[nl + 1] == '\n') ? 2 : 1);
      }
      return Value::make_list(std::move(out));
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" || name == "isupper") {
    const std::string op = name;
    return method([s, op](const Args&, Interpreter&) {
      if (s.empty()) return Value::boolean(false);
      bool cased = false;
      for (unsigned char c : s) {
        bool ok = true;
        if (op == "isdigit") ok = std::isdigit(c);
        else if (op == "isalpha") ok = std::isalpha(c) || c >= 0x80;
        else if (op == "isalnum") ok = std::isalnum(c) || c >= 0x80;
        else if (op == "isspace") ok = std::isspace(c);
        else if (op == "islower") ok = !std::isupper(c), cased = cased || std::islower(c);
        else ok = !std::islower(c), cased = cased || std::isupper(c);
        if (!ok) return Value::boolean(false);
      }
      return Value::boolean(op == "islower" || op == "isupper" ? cased : true);
    });
  }
  return Value::undefined(name);
}

}  // namespace

Value bound_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) return string_method(obj.s, name);
  if (obj.is_dict() && !obj.dict->is_namespace) {
    const auto dict = obj.dict;
    if (name == "get")
      return method([dict](const Args& a, Interpreter& in) {
        if (a.positional.empty()) in.error(0, "get needs a key");
        const Value* v = dict->find(dict_key(a.positional[0]));
        return v ? *v : a.positional.size() > 1 ? a.positional[1] : Value::none();
      });
    if (name == "items" || name == "keys" || name == "values") {
      const int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
      return method([dict, which](const Args&, Interpreter&) {
        List out;
        for (const auto& [k, v] : dict->items)
          out.push_back(which == 0 ? Value::make_list({key_value(k), v}) : which == 1 ? key_value(k) : v);
        return Value::make_list(std::move(out));
      });
    }
    return Value::undefined(name);
  }
  if (obj.is_list()) {
    const auto list = obj.list;
    if (name == "index" || name == "count") {
      const bool index = name == "index";
      return method([list, index](const Args& a, Interpreter& in) {
        if (a.positional.empty()) in.error(0, "index/count needs an argument");
        int64_t n = 0;
        for (size_t k = 0; k < list->size(); ++k) {
          if (!equals((*list)[k], a.positional[0])) continue;
          if (index) return Value::integer(static_cast<int64_t>(k));
          ++n;
        }
        if (index) in.error(0, "value is not in list");
        return Value::integer(n);
      });
    }
  }
  return Value::undefined(name);
}

}  // namespace sanctum::jinja

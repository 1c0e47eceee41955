#include "chat/jinja/interpreter.h"

#include <cmath>
#include <set>

#include "base/error.h"

namespace sanctum::jinja {

Interpreter::Interpreter(std::map<std::string, Value> globals) { frames_.push_back(std::make_shared<Frame>(std::move(globals))); }

Interpreter::~Interpreter() {
  // Templates can build reference cycles ({% set ns.self = ns %}); empty every reachable container so
  // shared ownership cannot leak them.
  std::vector<Value> stack;
  std::set<const void*> seen;
  for (const auto& f : frames_)
    for (auto& [k, v] : *f) stack.push_back(v);
  std::vector<Value> containers;
  while (!stack.empty()) {
    Value v = std::move(stack.back());
    stack.pop_back();
    if (v.is_list() && seen.insert(v.list.get()).second) {
      for (const Value& x : *v.list) stack.push_back(x);
      containers.push_back(v);
    } else if (v.is_dict() && seen.insert(v.dict.get()).second) {
      for (const auto& [k, x] : v.dict->items) stack.push_back(x);
      containers.push_back(v);
    }
  }
  for (Value& c : containers) {
    if (c.is_list()) c.list->clear();
    else c.dict->items.clear();
  }
}

void Interpreter::error(int line, const std::string& message) const {
  fail(ErrorKind::invalid_input, "chat template: line " + std::to_string(line > 0 ? line : line_) + ": " + message);
}

std::string Interpreter::render(const Body& body) {
  std::string out;
  exec(body, out);
  return out;
}

void Interpreter::grow(std::string& out, const std::string& piece) {
  if (out.size() + piece.size() > kMaxOutput) error(line_, "rendered output exceeds the size limit");
  out += piece;
}

Value Interpreter::lookup(const std::string& name) const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    auto f = (*it)->find(name);
    if (f != (*it)->end()) return f->second;
  }
  return Value::undefined(name);
}

void Interpreter::assign(const std::string& name, Value v) { (*frames_.back())[name] = std::move(v); }

void Interpreter::assign_targets(const std::vector<std::string>& targets, const Value& v, int line) {
  if (targets.size() == 1) {
    assign(targets[0], v);
    return;
  }
  const List items = v.iterate();
  if (items.size() != targets.size())
    error(line, "cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()) + " names");
  for (size_t k = 0; k < targets.size(); ++k) assign(targets[k], items[k]);
}

void Interpreter::exec(const Body& body, std::string& out) {
  for (const auto& sp : body) {
    if (flow_ != Flow::normal) return;
    const Stmt& s = *sp;
    line_ = s.line;
    switch (s.kind) {
      case Stmt::Kind::text: grow(out, s.text); break;
      case Stmt::Kind::output: grow(out, eval(*s.expr).str()); break;
      case Stmt::Kind::if_:
        for (const auto& [cond, branch] : s.branches) {
          if (!cond || eval(*cond).truthy()) {
            exec(branch, out);
            break;
          }
        }
        break;
      case Stmt::Kind::for_: exec_for(s, out); break;
      case Stmt::Kind::set: {
        Value v = eval(*s.expr);
        if (!s.text.empty()) {
          Value ns = lookup(s.targets[0]);
          if (!ns.is_dict() || !ns.dict->is_namespace) error(s.line, "can only set attributes on a namespace() object");
          if (!s.text.empty() && s.text[0] == '_') error(s.line, "namespace attributes cannot start with '_'");
          ns.dict->set(s.text, std::move(v));
        } else {
          assign_targets(s.targets, v, s.line);
        }
        break;
      }
      case Stmt::Kind::set_block: {
        std::string captured;
        exec(s.body, captured);
        Value v = Value::string(std::move(captured));
        if (s.expr) {
          // The filter chain was parsed with a null innermost subject: apply from the inside out.
          std::vector<const Expr*> chain;
          for (const Expr* f = s.expr.get(); f; f = f->args[0].get()) chain.push_back(f);
          for (auto it = chain.rbegin(); it != chain.rend(); ++it) v = apply_filter((*it)->name, v, eval_args(**it, 1), *this);
        }
        assign(s.targets[0], std::move(v));
        break;
      }
      case Stmt::Kind::macro: exec_macro(s); break;
      case Stmt::Kind::filter_block: {
        std::string captured;
        exec(s.body, captured);
        Value v = Value::string(std::move(captured));
        std::vector<const Expr*> chain;
        for (const Expr* f = s.expr.get(); f; f = f->args[0].get()) chain.push_back(f);
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) v = apply_filter((*it)->name, v, eval_args(**it, 1), *this);
        grow(out, v.str());
        break;
      }
      case Stmt::Kind::block: exec(s.body, out); break;
      case Stmt::Kind::break_: flow_ = Flow::break_; return;
      case Stmt::Kind::continue_: flow_ = Flow::continue_; return;
      case Stmt::Kind::call_block: error(s.line, "call blocks are not supported");
    }
  }
}

void Interpreter::exec_for(const Stmt& s, std::string& out) {
  const Value iterable = eval(*s.expr);
  if (iterable.is_none()) error(s.line, "'NoneType' object is not iterable");
  List items = iterable.iterate();
  frames_.push_back(std::make_shared<Frame>());
  if (s.condition) {
    List kept;
    for (const Value& v : items) {
      assign_targets(s.targets, v, s.line);
      if (eval(*s.condition).truthy()) kept.push_back(v);
    }
    items = std::move(kept);
  }
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < n; ++k) {
    Value loop = Value::make_dict();
    Dict& d = *loop.dict;
    d.set("index", Value::integer(k + 1));
    d.set("index0", Value::integer(k));
    d.set("revindex", Value::integer(n - k));
    d.set("revindex0", Value::integer(n - k - 1));
    d.set("first", Value::boolean(k == 0));
    d.set("last", Value::boolean(k == n - 1));
    d.set("length", Value::integer(n));
    d.set("previtem", k > 0 ? items[k - 1] : Value::undefined("previtem"));
    d.set("nextitem", k + 1 < n ? items[k + 1] : Value::undefined("nextitem"));
    d.set("cycle", Value::function([k](const Args& a, Interpreter& in) {
            if (a.positional.empty()) in.error(0, "loop.cycle needs at least one argument");
            return a.positional[static_cast<size_t>(k) % a.positional.size()];
          }));
    assign("loop", loop);
    assign_targets(s.targets, items[k], s.line);
    exec(s.body, out);
    if (flow_ == Flow::break_) {
      flow_ = Flow::normal;
      break;
    }
    flow_ = Flow::normal;
  }
  frames_.pop_back();
  if (n == 0) exec(s.else_body, out);
}

void Interpreter::exec_macro(const Stmt& s) {
  const Stmt* def = &s;
  std::weak_ptr<Frame> root_ref = frames_.front();  // weak: the macro itself lives in that frame
  Value fn = Value::function([def, root_ref](const Args& args, Interpreter& in) -> Value {
    if (in.call_depth_ > 100) in.error(def->line, "macro recursion too deep");
    auto root = root_ref.lock();
    if (!root) in.error(def->line, "macro called after its template finished");
    auto saved = std::move(in.frames_);
    const int saved_line = in.line_;
    in.frames_ = {root, std::make_shared<Frame>()};
    ++in.call_depth_;
    std::string out;
    try {
      for (size_t k = 1; k < def->targets.size(); ++k) {
        const std::string& param = def->targets[k];
        const Value* v = args.get(k - 1, param);
        in.assign(param, v ? *v : def->defaults[k - 1] ? in.eval(*def->defaults[k - 1]) : Value::undefined(param));
      }
      in.exec(def->body, out);
    } catch (...) {
      in.frames_ = std::move(saved);
      --in.call_depth_;
      throw;
    }
    in.flow_ = Flow::normal;
    in.frames_ = std::move(saved);
    in.line_ = saved_line;
    --in.call_depth_;
    return Value::string(std::move(out));
  });
  assign(s.targets[0], std::move(fn));
}

Args Interpreter::eval_args(const Expr& e, size_t first) {
  Args a;
  const size_t n_kw = e.keywords.size();
  const size_t n_pos = e.args.size() - first - n_kw;
  for (size_t k = 0; k < n_pos; ++k) a.positional.push_back(eval(*e.args[first + k]));
  for (size_t k = 0; k < n_kw; ++k) a.keyword.emplace_back(e.keywords[k], eval(*e.args[first + n_pos + k]));
  return a;
}

Value Interpreter::call(const Value& fn, const Args& args, int line) {
  if (fn.kind != Value::Kind::function) {
    if (fn.is_undefined()) error(line, "'" + fn.s + "' is undefined");
    error(line, std::string("'") + fn.type_name() + "' object is not callable");
  }
  return (*fn.fn)(args, *this);
}

Value Interpreter::attribute(const Value& obj, const std::string& name, int line) {
  if (obj.is_undefined()) error(line, "'" + (obj.s.empty() ? std::string("value") : obj.s) + "' is undefined (reading ." + name + ")");
  Value m = bound_method(obj, name);
  if (!m.is_undefined()) return m;
  if (obj.is_dict()) {
    const Value* v = obj.dict->find(name);
    return v ? *v : Value::undefined(name);
  }
  return Value::undefined(name);
}

Value Interpreter::item(const Value& obj, const Value& key, int line) {
  if (obj.is_undefined()) error(line, "'" + (obj.s.empty() ? std::string("value") : obj.s) + "' is undefined (subscripted)");
  if (obj.is_dict()) {
    const Value* v = obj.dict->find(dict_key(key));
    if (v) return *v;
    return key.is_string() ? attribute(obj, key.s, line) : Value::undefined();
  }
  if ((obj.is_list() || obj.is_string()) && (key.kind == Value::Kind::integer || key.kind == Value::Kind::boolean)) {
    const int64_t idx = key.kind == Value::Kind::boolean ? key.b : key.i;
    if (obj.is_list()) {
      const auto n = static_cast<int64_t>(obj.list->size());
      const int64_t k = idx < 0 ? idx + n : idx;
      return k >= 0 && k < n ? (*obj.list)[k] : Value::undefined();
    }
    const std::u32string u = to_u32(obj.s);
    const auto n = static_cast<int64_t>(u.size());
    const int64_t k = idx < 0 ? idx + n : idx;
    return k >= 0 && k < n ? Value::string(from_u32(u.substr(k, 1))) : Value::undefined();
  }
  if (key.is_string()) return attribute(obj, key.s, line);
  return Value::undefined();
}

Value Interpreter::slice(const Value& obj, const Expr& e) {
  auto bound = [&](const ExprPtr& x, bool* present) -> int64_t {
    *present = false;
    if (!x) return 0;
    const Value v = eval(*x);
    if (v.is_none()) return 0;
    if (v.kind != Value::Kind::integer) error(e.line, "slice indices must be integers");
    *present = true;
    return v.i;
  };
  bool has_start, has_stop, has_step;
  const int64_t start_v = bound(e.args[1], &has_start), stop_v = bound(e.args[2], &has_stop);
  int64_t step = bound(e.args[3], &has_step);
  if (!has_step) step = 1;
  if (step == 0) error(e.line, "slice step cannot be zero");
  auto pick = [&](auto n, auto get) {
    const auto len = static_cast<int64_t>(n);
    auto norm = [&](int64_t v, bool present, int64_t dflt) {
      if (!present) return dflt;
      if (v < 0) v += len;
      if (step > 0) return std::clamp<int64_t>(v, 0, len);
      return std::clamp<int64_t>(v, -1, len - 1);
    };
    const int64_t start = norm(start_v, has_start, step > 0 ? 0 : len - 1);
    const int64_t stop = norm(stop_v, has_stop, step > 0 ? len : -1);
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) get(k);
  };
  if (obj.is_list()) {
    List out;
    pick(obj.list->size(), [&](int64_t k) { out.push_back((*obj.list)[k]); });
    return Value::make_list(std::move(out));
  }
  if (obj.is_string()) {
    const std::u32string u = to_u32(obj.s);
    std::u32string out;
    pick(u.size(), [&](int64_t k) { out += u[k]; });
    return Value::string(from_u32(out));
  }
  if (obj.is_undefined()) error(e.line, "'" + obj.s + "' is undefined (sliced)");
  error(e.line, std::string("'") + obj.type_name() + "' object is not subscriptable");
}

Value Interpreter::eval(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::literal: return e.value;
    case Expr::Kind::name: return lookup(e.name);
    case Expr::Kind::list: {
      List items;
      for (const auto& a : e.args) items.push_back(eval(*a));
      return Value::make_list(std::move(items));
    }
    case Expr::Kind::dict: {
      Value d = Value::make_dict();
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        const Value key = eval(*e.args[k]);
        d.dict->set(dict_key(key), eval(*e.args[k + 1]));
      }
      return d;
    }
    case Expr::Kind::attr: return attribute(eval(*e.args[0]), e.name, e.line);
    case Expr::Kind::item: return item(eval(*e.args[0]), eval(*e.args[1]), e.line);
    case Expr::Kind::slice: return slice(eval(*e.args[0]), e);
    case Expr::Kind::call: {
      const Value fn = eval(*e.args[0]);
      return call(fn, eval_args(e, 1), e.line);
    }
    case Expr::Kind::filter: {
      line_ = e.line;
      return apply_filter(e.name, eval(*e.args[0]), eval_args(e, 1), *this);
    }
    case Expr::Kind::test: {
      line_ = e.line;
      const bool r = apply_test(e.name, eval(*e.args[0]), eval_args(e, 1), *this);
      return Value::boolean(r != e.negated);
    }
    case Expr::Kind::neg: {
      const Value v = eval(*e.args[0]);
      if ((v.kind == Value::Kind::integer && v.i != INT64_MIN) || v.kind == Value::Kind::boolean)
        return Value::integer(-(v.kind == Value::Kind::integer ? v.i : v.b));
      if (v.kind == Value::Kind::integer) return Value::number(-static_cast<double>(v.i));
      if (v.kind == Value::Kind::number) return Value::number(-v.d);
      error(e.line, std::string("bad operand type for unary -: '") + v.type_name() + "'");
    }
    case Expr::Kind::not_: return Value::boolean(!eval(*e.args[0]).truthy());
    case Expr::Kind::and_: {
      Value a = eval(*e.args[0]);
      return a.truthy() ? eval(*e.args[1]) : a;
    }
    case Expr::Kind::or_: {
      Value a = eval(*e.args[0]);
      return a.truthy() ? a : eval(*e.args[1]);
    }
    case Expr::Kind::cond:
      if (eval(*e.args[0]).truthy()) return eval(*e.args[1]);
      return e.args[2] ? eval(*e.args[2]) : Value::undefined();
    case Expr::Kind::binary: return binary(e.name, eval(*e.args[0]), eval(*e.args[1]), e.line);
  }
  error(e.line, "unknown expression");
}

Value Interpreter::binary(const std::string& op, const Value& a, const Value& b, int line) {
  if (op == "~") {
    std::string s = a.str() + b.str();
    if (s.size() > kMaxOutput) error(line, "string too long");
    return Value::string(std::move(s));
  }
  if (op == "==") return Value::boolean(equals(a, b));
  if (op == "!=") return Value::boolean(!equals(a, b));
  if (op == "<") return Value::boolean(less(a, b));
  if (op == ">") return Value::boolean(less(b, a));
  if (op == "<=") return Value::boolean(!less(b, a));
  if (op == ">=") return Value::boolean(!less(a, b));
  if (op == "in") return Value::boolean(contains(b, a, *this));
  if (op == "notin") return Value::boolean(!contains(b, a, *this));
  const bool ints = (a.kind == Value::Kind::integer || a.kind == Value::Kind::boolean) &&
                    (b.kind == Value::Kind::integer || b.kind == Value::Kind::boolean);
  const int64_t ai = a.kind == Value::Kind::boolean ? a.b : a.i, bi = b.kind == Value::Kind::boolean ? b.b : b.i;
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (!a.markup && !b.markup) return Value::string(a.s + b.s);
      Value r = Value::string((a.markup ? a.s : html_escape(a.s)) + (b.markup ? b.s : html_escape(b.s)));
      r.markup = true;
      return r;
    }
    if (a.is_list() && b.is_list()) {
      List out = *a.list;
      out.insert(out.end(), b.list->begin(), b.list->end());
      return Value::make_list(std::move(out));
    }
  }
  if (op == "*" && ((a.is_string() || a.is_list()) && (b.kind == Value::Kind::integer))) {
    if (b.i > 0 && (a.is_string() ? a.s.size() : a.list->size()) * static_cast<size_t>(b.i) > kMaxOutput)
      error(line, "repetition too large");
    if (a.is_string()) {
      std::string s;
      for (int64_t k = 0; k < b.i; ++k) s += a.s;
      return Value::string(std::move(s));
    }
    List out;
    for (int64_t k = 0; k < b.i; ++k) out.insert(out.end(), a.list->begin(), a.list->end());
    return Value::make_list(std::move(out));
  }
  if (!a.is_number() || !b.is_number())
    error(line, std::string("unsupported operand types for ") + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  const double x = a.as_double(), y = b.as_double();
  int64_t r = 0;  // integer results that overflow 64 bits fall back to float (Python would grow the int)
  if (op == "+") return ints && !__builtin_add_overflow(ai, bi, &r) ? Value::integer(r) : Value::number(x + y);
  if (op == "-") return ints && !__builtin_sub_overflow(ai, bi, &r) ? Value::integer(r) : Value::number(x - y);
  if (op == "*") return ints && !__builtin_mul_overflow(ai, bi, &r) ? Value::integer(r) : Value::number(x * y);
  if (op == "/") {
    if (y == 0) error(line, "division by zero");
    return Value::number(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) error(line, "integer division or modulo by zero");
    if (ints) {
      if (ai == INT64_MIN && bi == -1) error(line, "integer overflow");
      int64_t q = ai / bi, r = ai % bi;
      if (r != 0 && ((r < 0) != (bi < 0))) --q, r += bi;
      return op == "//" ? Value::integer(q) : Value::integer(r);
    }
    const double q = std::floor(x / y);
    return op == "//" ? Value::number(q) : Value::number(x - q * y);
  }
  if (op == "**") {
    if (ints && bi >= 0 && bi < 64) {
      int64_t p = 1;
      bool overflow = false;
      for (int64_t k = 0; k < bi && !overflow; ++k) overflow = __builtin_mul_overflow(p, ai, &p);
      if (!overflow) return Value::integer(p);
    }
    return Value::number(std::pow(x, y));
  }
  error(line, "unknown operator " + op);
}

}  // namespace sanctum::jinja

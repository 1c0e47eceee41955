#pragma once
// Tree-walking interpreter for parsed templates: Jinja scoping (for loops and macros get their own
// scope; namespace() objects carry state out of loops), loop variables, loop controls, macros.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chat/jinja/ast.h"

namespace sanctum::jinja {

class Interpreter {
 public:
  // `globals`: names visible to the template (messages, tools, add_generation_prompt, ...).
  explicit Interpreter(std::map<std::string, Value> globals);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  std::string render(const Body& body);

  Value eval(const Expr& e);
  Value call(const Value& fn, const Args& args, int line);
  [[noreturn]] void error(int line, const std::string& message) const;
  int line() const { return line_; }

 private:
  using Frame = std::map<std::string, Value>;
  void exec(const Body& body, std::string& out);
  void exec_for(const Stmt& s, std::string& out);
  void exec_macro(const Stmt& s);
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);
  void assign_targets(const std::vector<std::string>& targets, const Value& v, int line);
  Value binary(const std::string& op, const Value& a, const Value& b, int line);
  Value attribute(const Value& obj, const std::string& name, int line);
  Value item(const Value& obj, const Value& key, int line);
  Value slice(const Value& obj, const Expr& e);
  Args eval_args(const Expr& e, size_t first);
  void grow(std::string& out, const std::string& piece);

  std::vector<std::shared_ptr<Frame>> frames_;
  enum class Flow { normal, break_, continue_ } flow_ = Flow::normal;
  int line_ = 0;
  int call_depth_ = 0;
};

// Builtins (filters.cc, methods.cc).
Value apply_filter(const std::string& name, const Value& subject, const Args& args, Interpreter& in);
bool apply_test(const std::string& name, const Value& subject, const Args& args, Interpreter& in);
// Bound method of a str / dict / list value, or undefined when there is none by that name.
Value bound_method(const Value& obj, const std::string& name);
std::string html_escape(const std::string& s);
bool contains(const Value& container, const Value& item, Interpreter& in);
// Python str.strip / lstrip / rstrip (chars null or not a string: Unicode whitespace).
std::string python_strip(const std::string& s, const Value* chars, bool left, bool right);

constexpr size_t kMaxOutput = 64u << 20;  // rendered text cap: a template cannot exhaust memory

}  // namespace sanctum::jinja

#pragma once
// Syntax tree of a parsed template. Expressions and statements are plain structs; the interpreter
// gives them meaning.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace sanctum::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind { literal, name, list, dict, attr, item, slice, call, filter, test, neg, not_, binary, and_, or_, cond };
  Kind kind = Kind::literal;
  int line = 0;
  Value value;       // literal
  std::string name;  // variable, attribute, filter, test or operator
  // literal: -; name: -; list: items; dict: k0,v0,k1,v1...; attr: obj; item: obj, index;
  // slice: obj, start, stop, step (null when absent); call: callee, args...; filter/test: subject, args...;
  // neg/not_: operand; binary/and_/or_: lhs, rhs; cond: test, then, else (else may be null).
  std::vector<ExprPtr> args;
  std::vector<std::string> keywords;  // call/filter/test: names of the trailing keyword arguments
  bool negated = false;               // test: "is not"
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind { text, output, if_, for_, set, set_block, macro, filter_block, call_block, break_, continue_, block };
  Kind kind = Kind::text;
  int line = 0;
  std::string text;                                // text; set: namespace attribute (when set on ns.attr)
  ExprPtr expr;                                    // output / for iterable / set value / filter_block filter (subject null)
  std::vector<std::string> targets;                // for / set targets; macro: name then parameter names
  std::vector<ExprPtr> defaults;                   // macro parameter defaults (null when none), aligned with targets[1..]
  ExprPtr condition;                               // for ... if condition
  std::vector<std::pair<ExprPtr, Body>> branches;  // if/elif (condition), else (null condition)
  Body body, else_body;
};

}  // namespace sanctum::jinja

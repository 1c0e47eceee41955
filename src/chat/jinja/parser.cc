#include "chat/jinja/parser.h"

#include <set>

#include "chat/jinja/lexer.h"

namespace sanctum::jinja {
namespace {

class ExprParser {
 public:
  // soft: inside an if block or conditional expression, where Jinja reports unknown filters and tests
  // only when they run.
  ExprParser(const std::vector<Token>& tokens, bool soft) : t_(tokens), soft_(soft) {}

  const Token& peek(size_t ahead = 0) const { return t_[std::min(pos_ + ahead, t_.size() - 1)]; }
  bool at_end() const { return peek().type == Token::Type::end; }
  bool is_op(const char* op, size_t ahead = 0) const { return peek(ahead).type == Token::Type::op && peek(ahead).text == op; }
  bool is_name(const char* n, size_t ahead = 0) const { return peek(ahead).type == Token::Type::name && peek(ahead).text == n; }
  const Token& next() { return t_[std::min(pos_++, t_.size() - 1)]; }
  void expect_op(const char* op) {
    if (!is_op(op)) error(std::string("expected '") + op + "'");
    ++pos_;
  }
  std::string expect_name() {
    if (peek().type != Token::Type::name) error("expected a name");
    return next().text;
  }
  void expect_end() {
    if (!at_end()) error("unexpected '" + describe(peek()) + "'");
  }
  [[noreturn]] void error(const std::string& message) const {
    syntax_error(peek().line, message + (at_end() ? " at end of tag" : " near '" + describe(peek()) + "'"));
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Token::Type::integer: return std::to_string(t.i);
      case Token::Type::number: return python_float_repr(t.d);
      case Token::Type::end: return "end of tag";
      default: return t.text;
    }
  }

  ExprPtr expression(bool with_condexpr = true) {
    ExprPtr e = or_expr();
    if (!with_condexpr) return e;
    const bool was_soft = soft_;
    if (is_name("if")) soft_ = true;
    struct Restore {
      bool& flag;
      bool value;
      ~Restore() { flag = value; }
    } restore{soft_, was_soft};
    while (is_name("if")) {
      const int line = next().line;
      auto c = make(Expr::Kind::cond, line);
      ExprPtr test = or_expr();
      ExprPtr otherwise;
      if (is_name("else")) {
        next();
        otherwise = expression();
      }
      c->args.push_back(std::move(test));
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  // A comma-separated list at top level becomes a tuple (list) value.
  ExprPtr tuple_or_expression(bool with_condexpr = true) {
    ExprPtr first = expression(with_condexpr);
    if (!is_op(",")) return first;
    auto list = make(Expr::Kind::list, first->line);
    list->args.push_back(std::move(first));
    while (is_op(",")) {
      next();
      if (at_end() || is_name("if")) break;
      list->args.push_back(expression(with_condexpr));
    }
    return list;
  }

 private:
  static ExprPtr make(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }
  static ExprPtr binary(Expr::Kind k, std::string op, ExprPtr a, ExprPtr b) {
    auto e = make(k, a->line);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) next(), e = binary(Expr::Kind::or_, "or", std::move(e), and_expr());
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) next(), e = binary(Expr::Kind::and_, "and", std::move(e), not_expr());
    return e;
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      auto e = make(Expr::Kind::not_, next().line);
      e->args.push_back(not_expr());
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = math1();
    while (true) {
      if (peek().type == Token::Type::op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == ">" ||
                                             peek().text == "<=" || peek().text == ">=")) {
        const std::string op = next().text;
        e = binary(Expr::Kind::binary, op, std::move(e), math1());
      } else if (is_name("in")) {
        next();
        e = binary(Expr::Kind::binary, "in", std::move(e), math1());
      } else if (is_name("not") && is_name("in", 1)) {
        pos_ += 2;
        e = binary(Expr::Kind::binary, "notin", std::move(e), math1());
      } else {
        return e;
      }
    }
  }
  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = next().text;
      e = binary(Expr::Kind::binary, op, std::move(e), concat());
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = math2();
    while (is_op("~")) next(), e = binary(Expr::Kind::binary, "~", std::move(e), math2());
    return e;
  }
  ExprPtr math2() {
    ExprPtr e = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = next().text;
      e = binary(Expr::Kind::binary, op, std::move(e), power());
    }
    return e;
  }
  ExprPtr power() {
    ExprPtr e = unary(true);
    while (is_op("**")) next(), e = binary(Expr::Kind::binary, "**", std::move(e), unary(true));
    return e;
  }
  ExprPtr unary(bool with_filter) {
    struct DepthGuard {
      int& d;
      explicit DepthGuard(int& depth) : d(depth) { ++d; }
      ~DepthGuard() { --d; }
    } guard(depth_);
    if (depth_ > 200) error("expression nested too deeply");
    ExprPtr e;
    if (is_op("-")) {
      e = make(Expr::Kind::neg, next().line);
      e->args.push_back(unary(false));
    } else if (is_op("+")) {
      next();
      e = unary(false);
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filters(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& tok = peek();
    switch (tok.type) {
      case Token::Type::name: {
        next();
        auto e = make(Expr::Kind::literal, tok.line);
        if (tok.text == "true" || tok.text == "True") e->value = Value::boolean(true);
        else if (tok.text == "false" || tok.text == "False") e->value = Value::boolean(false);
        else if (tok.text == "none" || tok.text == "None") e->value = Value::none();
        else e->kind = Expr::Kind::name, e->name = tok.text;
        return e;
      }
      case Token::Type::string: {
        std::string s;
        const int line = tok.line;
        while (peek().type == Token::Type::string) s += next().text;  // adjacent literals concatenate
        auto e = make(Expr::Kind::literal, line);
        e->value = Value::string(std::move(s));
        return e;
      }
      case Token::Type::integer:
      case Token::Type::number: {
        next();
        auto e = make(Expr::Kind::literal, tok.line);
        e->value = tok.type == Token::Type::integer ? Value::integer(tok.i) : Value::number(tok.d);
        return e;
      }
      case Token::Type::op:
        if (tok.text == "(") {
          next();
          if (is_op(")")) {
            next();
            return make(Expr::Kind::list, tok.line);
          }
          ExprPtr e = tuple_or_expression();
          expect_op(")");
          return e;
        }
        if (tok.text == "[") {
          next();
          auto e = make(Expr::Kind::list, tok.line);
          while (!is_op("]")) {
            e->args.push_back(expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("]");
          return e;
        }
        if (tok.text == "{") {
          next();
          auto e = make(Expr::Kind::dict, tok.line);
          while (!is_op("}")) {
            e->args.push_back(expression());
            expect_op(":");
            e->args.push_back(expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("}");
          return e;
        }
        break;
      default: break;
    }
    error("expected an expression");
  }

  void call_args(Expr& e) {
    expect_op("(");
    std::vector<ExprPtr> kw_values;
    while (!is_op(")")) {
      if (peek().type == Token::Type::name && is_op("=", 1)) {
        e.keywords.push_back(next().text);
        next();
        kw_values.push_back(expression());
      } else {
        if (!e.keywords.empty()) error("positional argument after keyword argument");
        e.args.push_back(expression());
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
    for (auto& v : kw_values) e.args.push_back(std::move(v));
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        next();
        const Token& tok = next();
        if (tok.type == Token::Type::integer) {
          auto item = make(Expr::Kind::item, tok.line);
          item->args.push_back(std::move(e));
          auto idx = make(Expr::Kind::literal, tok.line);
          idx->value = Value::integer(tok.i);
          item->args.push_back(std::move(idx));
          e = std::move(item);
          continue;
        }
        if (tok.type != Token::Type::name) error("expected an attribute name after '.'");
        auto attr = make(Expr::Kind::attr, tok.line);
        attr->name = tok.text;
        attr->args.push_back(std::move(e));
        e = std::move(attr);
      } else if (is_op("[")) {
        const int line = next().line;
        ExprPtr start, stop, step;
        if (!is_op(":")) start = expression();
        if (is_op(":")) {
          next();
          if (!is_op(":") && !is_op("]")) stop = expression();
          if (is_op(":")) {
            next();
            if (!is_op("]")) step = expression();
          }
          auto s = make(Expr::Kind::slice, line);
          s->args.push_back(std::move(e));
          s->args.push_back(std::move(start));
          s->args.push_back(std::move(stop));
          s->args.push_back(std::move(step));
          e = std::move(s);
        } else {
          if (!start) error("empty subscript");
          auto item = make(Expr::Kind::item, line);
          item->args.push_back(std::move(e));
          item->args.push_back(std::move(start));
          e = std::move(item);
        }
        expect_op("]");
      } else if (is_op("(")) {
        auto call = make(Expr::Kind::call, peek().line);
        call->args.push_back(std::move(e));
        call_args(*call);
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  ExprPtr filters(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        next();
        e = filter_call(std::move(e));
      } else if (is_name("is")) {
        const int line = next().line;
        auto test = make(Expr::Kind::test, line);
        if (is_name("not")) next(), test->negated = true;
        test->name = expect_name();
        if (!is_known_test(test->name) && !soft_) syntax_error(line, "no test named '" + test->name + "'");
        test->args.push_back(std::move(e));
        if (is_op("(")) {
          call_args(*test);
        } else if ((peek().type == Token::Type::name && !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if") &&
                    !is_name("in") && !is_name("not")) ||
                   peek().type == Token::Type::string || peek().type == Token::Type::integer || peek().type == Token::Type::number ||
                   is_op("[") || is_op("{")) {
          test->args.push_back(postfix(primary()));
        }
        e = std::move(test);
      } else if (is_op("(")) {
        auto call = make(Expr::Kind::call, peek().line);
        call->args.push_back(std::move(e));
        call_args(*call);
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

 public:
  ExprPtr filter_call(ExprPtr subject) {
    const int line = peek().line;
    auto f = make(Expr::Kind::filter, line);
    f->name = expect_name();
    while (is_op(".")) {
      next();
      f->name += '.';
      f->name += expect_name();
    }
    if (!is_known_filter(f->name) && !soft_) syntax_error(line, "no filter named '" + f->name + "'");
    f->args.push_back(std::move(subject));
    if (is_op("(")) call_args(*f);
    return f;
  }

 private:
  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;

 public:
  bool soft_ = false;
};

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Chunk> chunks) : chunks_(std::move(chunks)) {}

  Body parse_all() {
    Body body = parse_body({});
    if (idx_ < chunks_.size()) syntax_error(chunks_[idx_].line, "unexpected '" + chunks_[idx_].tokens[0].text + "'");
    return body;
  }

 private:
  static const std::string& keyword(const Chunk& c) { return c.tokens[0].text; }

  Body parse_body(const std::set<std::string>& terminators) {
    Body body;
    while (idx_ < chunks_.size()) {
      const Chunk& c = chunks_[idx_];
      if (c.kind == Chunk::Kind::text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::text;
        s->text = c.text;
        s->line = c.line;
        body.push_back(std::move(s));
        ++idx_;
        continue;
      }
      if (c.kind == Chunk::Kind::expression) {
        ExprParser p(c.tokens, soft_ > 0);
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::output;
        s->line = c.line;
        if (p.at_end()) syntax_error(c.line, "empty expression");
        s->expr = p.tuple_or_expression();
        p.expect_end();
        body.push_back(std::move(s));
        ++idx_;
        continue;
      }
      if (c.tokens[0].type != Token::Type::name) syntax_error(c.line, "expected a statement name");
      if (terminators.count(keyword(c))) return body;
      body.push_back(statement());
    }
    if (!terminators.empty()) {
      std::string names;
      for (const auto& t : terminators) names += (names.empty() ? "" : " or ") + t;
      syntax_error(chunks_.empty() ? 1 : chunks_.back().line, "unexpected end of template; expected " + names);
    }
    return body;
  }

  StmtPtr statement() {
    const Chunk& c = chunks_[idx_++];
    if (++depth_ > 200) syntax_error(c.line, "statements nested too deeply");
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    ExprParser p(c.tokens, soft_ > 0);
    const std::string kw = p.next().text;
    auto s = std::make_unique<Stmt>();
    s->line = c.line;
    if (kw == "if") {
      s->kind = Stmt::Kind::if_;
      ++soft_;
      struct Unsoft {
        int& d;
        ~Unsoft() { --d; }
      } unsoft{soft_};
      p.soft_ = true;
      ExprPtr cond = p.expression();
      p.expect_end();
      while (true) {
        Body b = parse_body({"elif", "else", "endif"});
        s->branches.emplace_back(std::move(cond), std::move(b));
        const Chunk& t = chunks_[idx_++];
        ExprParser tp(t.tokens, true);
        const std::string k = tp.next().text;
        if (k == "endif") {
          tp.expect_end();
          break;
        }
        if (k == "elif") {
          cond = tp.expression();
          tp.expect_end();
          continue;
        }
        tp.expect_end();  // else
        Body e = parse_body({"endif"});
        s->branches.emplace_back(nullptr, std::move(e));
        ++idx_;
        break;
      }
    } else if (kw == "for") {
      s->kind = Stmt::Kind::for_;
      s->targets.push_back(p.expect_name());
      while (p.is_op(",")) p.next(), s->targets.push_back(p.expect_name());
      if (!p.is_name("in")) p.error("expected 'in'");
      p.next();
      s->expr = p.tuple_or_expression(false);
      if (p.is_name("if")) p.next(), s->condition = p.expression();
      if (p.is_name("recursive")) p.error("recursive loops are not supported");
      p.expect_end();
      s->body = parse_body({"else", "endfor"});
      if (keyword(chunks_[idx_]) == "else") {
        ++idx_;
        s->else_body = parse_body({"endfor"});
      }
      ++idx_;
    } else if (kw == "set") {
      const std::string first = p.expect_name();
      s->targets.push_back(first);
      if (p.is_op(".")) {
        p.next();
        s->text = p.expect_name();
      }
      while (p.is_op(",")) p.next(), s->targets.push_back(p.expect_name());
      if (p.is_op("=")) {
        p.next();
        s->kind = Stmt::Kind::set;
        s->expr = p.tuple_or_expression();
        p.expect_end();
      } else {
        s->kind = Stmt::Kind::set_block;
        if (p.is_op("|")) {
          p.next();
          s->expr = p.filter_call(nullptr);
          while (p.is_op("|")) p.next(), s->expr = p.filter_call(std::move(s->expr));
        }
        p.expect_end();
        s->body = parse_body({"endset"});
        ++idx_;
      }
    } else if (kw == "macro") {
      s->kind = Stmt::Kind::macro;
      s->targets.push_back(p.expect_name());
      p.expect_op("(");
      while (!p.is_op(")")) {
        s->targets.push_back(p.expect_name());
        if (p.is_op("=")) {
          p.next();
          s->defaults.push_back(p.expression());
        } else {
          s->defaults.push_back(nullptr);
        }
        if (!p.is_op(",")) break;
        p.next();
      }
      p.expect_op(")");
      p.expect_end();
      s->body = parse_body({"endmacro"});
      ++idx_;
    } else if (kw == "filter") {
      s->kind = Stmt::Kind::filter_block;
      s->expr = p.filter_call(nullptr);
      while (p.is_op("|")) p.next(), s->expr = p.filter_call(std::move(s->expr));
      p.expect_end();
      s->body = parse_body({"endfilter"});
      ++idx_;
    } else if (kw == "generation") {
      s->kind = Stmt::Kind::block;
      p.expect_end();
      s->body = parse_body({"endgeneration"});
      ++idx_;
    } else if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_;
      p.expect_end();
    } else {
      syntax_error(c.line, "unknown or unsupported statement '" + kw + "'");
    }
    return s;
  }

  std::vector<Chunk> chunks_;
  size_t idx_ = 0;
  int depth_ = 0;
  int soft_ = 0;  // open if blocks
};

}  // namespace

Body parse_template(std::string_view source) { return TemplateParser(lex_template(source)).parse_all(); }

}  // namespace sanctum::jinja

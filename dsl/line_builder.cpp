#include "line_builder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "diagnostics.h"
#include "grammar.h"
#include "kdsl/error.h"

namespace kdsl {
namespace {

namespace g = grammar;
using ast::BinaryOp;
using ast::Expr;
using ast::ExprKind;
using ast::ExprPtr;
using ast::Stmt;
using ast::StmtKind;
using ast::StmtPtr;

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

/// How an error message names the token at `p`: "'x'", "'+='", "end of line", ... (an error at
/// a non-ASCII byte has a message of its own: grammar::non_ascii).
std::string describe_token(const char* p, const char* end) {
  if (p >= end) return "end of line";
  const auto c = static_cast<unsigned char>(*p);
  if (c == '"' || c == '\'') return "string literal";
  if (c < 0x20 || c == 0x7f) {
    static const char* hex = "0123456789abcdef";
    return std::string("character 0x") + hex[c >> 4] + hex[c & 15];
  }
  return "'" + std::string(p, token_length(p, end)) + "'";
}

/// The decoded contents of a string literal (with its quotes): the escapes of SPEC section 2
/// are replaced; any other backslash is kept as written.
std::string decode_string(std::string_view lit) {
  const size_t q = lit.size() >= 6 && lit[0] == lit[1] && lit[1] == lit[2] ? 3 : 1;
  const std::string_view body = lit.substr(q, lit.size() - 2 * q);
  std::string out;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char next = body[++i];
    switch (next) {
      case '\\':
      case '"':
      case '\'':
        out += next;
        break;
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      default:
        out += '\\';
        out += next;
        break;
    }
  }
  return out;
}

ExprPtr make_expr(ExprKind kind, SourceLoc loc, uint32_t end) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->loc = loc;
  e->end = end;
  return e;
}

StmtPtr make_stmt(StmtKind kind, SourceLoc loc, uint32_t end) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->loc = loc;
  s->end = end;
  return s;
}

}  // namespace

uint32_t token_length(const char* p, const char* end) {
  if (p >= end) return 1;
  if (static_cast<unsigned char>(*p) >= 0x80) {
    char32_t cp = 0;
    const size_t n = utf8_sequence(std::string_view(p, static_cast<size_t>(end - p)), 0, &cp);
    return n > 0 ? static_cast<uint32_t>(n) : 1;
  }
  const char* q = p;
  if (is_word_char(*q) ||
      (*q == '.' && q + 1 < end && std::isdigit(static_cast<unsigned char>(q[1])))) {
    const bool number = !std::isalpha(static_cast<unsigned char>(*q)) && *q != '_';
    while (q < end && (is_word_char(*q) || (number && *q == '.'))) ++q;
    return static_cast<uint32_t>(q - p);
  }
  const std::string_view rest(p, static_cast<size_t>(end - p));
  for (std::string_view op : {"//=", "**=", "**", "//", "==", "!=", "<=", ">=", "->",
                              "+=", "-=", "*=", "/=", "%=", "&&", "||", "<<", ">>"}) {
    if (rest.starts_with(op)) return static_cast<uint32_t>(op.size());
  }
  return 1;
}

std::string expand_message(std::string message, const char* p, const char* end) {
  const size_t at = message.find("{token}");
  if (at != std::string::npos) message.replace(at, 7, describe_token(p, end));
  return message;
}

/// Pushes `e`, whose tree is `depth` deep; a tree deeper than max_nesting is an error reported
/// at `at` (at e when null).
void LineBuilder::push(ExprPtr e, uint32_t depth, const char* at) {
  if (depth > g::max_nesting) {
    if (at) fail(at, g::message<g::too_deep>);
    fail(*e, g::message<g::too_deep>);
  }
  items_.push_back(Item{std::move(e), depth, {}, {}});
}

LineBuilder::Item LineBuilder::pop() {
  if (items_.size() <= marks_.back().base)
    throw InternalError("kdsl parser: operand stack underflow");
  Item it = std::move(items_.back());
  items_.pop_back();
  return it;
}

LineBuilder::Mark LineBuilder::pop_mark() {
  Mark m = marks_.back();
  marks_.pop_back();
  return m;
}

void LineBuilder::name(const char* b, const char* e) {
  auto x = make_expr(ExprKind::name, loc(b), end(e));
  x->name.assign(b, e);
  push(std::move(x), 1, b);
}

void LineBuilder::int_literal(const char* b, const char* e) {
  constexpr uint64_t max = std::numeric_limits<int64_t>::max();
  uint64_t v = 0;
  for (const char* p = b; p < e; ++p) {
    if (*p == '_') continue;
    const auto d = static_cast<uint64_t>(*p - '0');
    if (v > (max - d) / 10) {
      throw SyntaxError{line_.offset_at(pos(b)), pos(e) - pos(b), "integer literal too large"};
    }
    v = v * 10 + d;
  }
  auto x = make_expr(ExprKind::int_lit, loc(b), end(e));
  x->int_value = static_cast<int64_t>(v);
  push(std::move(x), 1, b);
}

void LineBuilder::float_literal(const char* b, const char* e) {
  std::string digits;
  for (const char* p = b; p < e; ++p) {
    if (*p != '_') digits += *p;
  }
  const double v = std::strtod(digits.c_str(), nullptr);
  if (std::isinf(v)) {
    throw SyntaxError{line_.offset_at(pos(b)), pos(e) - pos(b), "float literal too large"};
  }
  auto x = make_expr(ExprKind::float_lit, loc(b), end(e));
  x->float_value = v;
  push(std::move(x), 1, b);
}

void LineBuilder::string_literal(const char* b, const char* e) {
  auto x = make_expr(ExprKind::string_lit, loc(b), end(e));
  x->name = decode_string(std::string_view(b, static_cast<size_t>(e - b)));
  push(std::move(x), 1, b);
}

void LineBuilder::bool_literal(const char* b, const char* e, bool value) {
  auto x = make_expr(ExprKind::bool_lit, loc(b), end(e));
  x->bool_value = value;
  push(std::move(x), 1, b);
}

void LineBuilder::slice(const char* b, const char* e) {
  push(make_expr(ExprKind::slice, loc(b), end(e)), 1, b);
}

void LineBuilder::comma(const char* e) {
  marks_.back().comma = true;
  marks_.back().comma_end = end(e);
}

/// Replaces the items from `base` on by one tuple spanning [loc, end); sets *depth to its depth.
ExprPtr LineBuilder::tuple(size_t base, SourceLoc loc, uint32_t end, uint32_t* depth) {
  auto t = make_expr(ExprKind::tuple, loc, end);
  *depth = 1;
  for (size_t i = base; i < items_.size(); ++i) {
    *depth = std::max(*depth, items_[i].depth + 1);
    t->args.push_back(std::move(items_[i].expr));
  }
  items_.resize(base);
  return t;
}

void LineBuilder::tuple_if_comma() {
  Mark& m = marks_.back();
  if (!m.comma) return;
  m.comma = false;
  const SourceLoc first = items_[m.base].expr->loc;
  const uint32_t last_end = std::max(items_.back().expr->end, m.comma_end);
  uint32_t depth = 0;
  ExprPtr t = tuple(m.base, first, last_end, &depth);
  push(std::move(t), depth, nullptr);
}

void LineBuilder::close_paren(const char* b, const char* e) {
  const Mark m = pop_mark();
  if (items_.size() == m.base + 1 && !m.comma) {
    Expr& x = *items_.back().expr;  // a parenthesized expression: its span takes the parentheses
    x.loc = loc(b);
    x.end = end(e);
    return;
  }
  uint32_t depth = 0;
  ExprPtr t = tuple(m.base, loc(b), end(e), &depth);
  push(std::move(t), depth, b);
}

void LineBuilder::close_call(const char* open, const char* e) {
  const Mark m = pop_mark();
  Item callee = std::move(items_[m.base - 1]);
  auto call = make_expr(ExprKind::call, callee.expr->loc, end(e));
  uint32_t depth = callee.depth;
  call->args.push_back(std::move(callee.expr));
  std::unordered_set<std::string> seen;
  for (size_t i = m.base; i < items_.size(); ++i) {
    Item& it = items_[i];
    depth = std::max(depth, it.depth);
    if (it.keyword.empty()) {
      if (!call->keywords.empty()) fail(*it.expr, "positional argument follows keyword argument");
      call->args.push_back(std::move(it.expr));
      continue;
    }
    if (!seen.insert(it.keyword).second) {
      throw SyntaxError{it.keyword_loc.offset, static_cast<uint32_t>(it.keyword.size()),
                        "keyword argument '" + it.keyword + "' repeated"};
    }
    call->keywords.push_back(
        ast::Keyword{std::move(it.keyword), it.keyword_loc, std::move(it.expr)});
  }
  items_.resize(m.base - 1);
  push(std::move(call), depth + 1, open);
}

void LineBuilder::close_subscript(const char* open, const char* e) {
  const Mark m = pop_mark();
  Item base = std::move(items_[m.base - 1]);
  auto sub = make_expr(ExprKind::subscript, base.expr->loc, end(e));
  uint32_t depth = base.depth;
  sub->args.push_back(std::move(base.expr));
  for (size_t i = m.base; i < items_.size(); ++i) {
    depth = std::max(depth, items_[i].depth);
    sub->args.push_back(std::move(items_[i].expr));
  }
  items_.resize(m.base - 1);
  push(std::move(sub), depth + 1, open);
}

void LineBuilder::keyword_name(const char* b) {
  const char* e = b;
  while (is_word_char(*e)) ++e;
  items_.push_back(Item{nullptr, 0, std::string(b, e), loc(b)});
}

void LineBuilder::keyword_value() {
  Item value = pop();
  items_.back().expr = std::move(value.expr);
  items_.back().depth = value.depth;
}

void LineBuilder::binary(ExprKind kind, uint8_t op, const char* op_at) {
  Item rhs = pop();
  Item lhs = pop();
  auto x = make_expr(kind, lhs.expr->loc, rhs.expr->end);
  x->op = op;
  x->args.push_back(std::move(lhs.expr));
  x->args.push_back(std::move(rhs.expr));
  push(std::move(x), std::max(lhs.depth, rhs.depth) + 1, op_at);
}

void LineBuilder::unary(ExprKind kind, uint8_t op, const char* op_at) {
  Item operand = pop();
  auto x = make_expr(kind, loc(op_at), operand.expr->end);
  x->op = op;
  x->args.push_back(std::move(operand.expr));
  push(std::move(x), operand.depth + 1, op_at);
}

void LineBuilder::ternary(const char* if_at) {
  Item orelse = pop();
  Item cond = pop();
  Item then = pop();
  auto x = make_expr(ExprKind::ternary, then.expr->loc, orelse.expr->end);
  const uint32_t depth = std::max({then.depth, cond.depth, orelse.depth}) + 1;
  x->args.push_back(std::move(cond.expr));
  x->args.push_back(std::move(then.expr));
  x->args.push_back(std::move(orelse.expr));
  push(std::move(x), depth, if_at);
}

void LineBuilder::decorator(const char* b, const char* e) {
  result_.kind = LineKind::decorator;
  result_.loc = loc(b);
  result_.end = end(e);
  result_.decorator = pop().expr;
}

void LineBuilder::def_name(const char* b, const char* e) {
  result_.def.name.assign(b, e);
  result_.def.loc = loc(b);
}

void LineBuilder::generic_name(const char* b, const char* e) {
  result_.def.generics.push_back(ast::Generic{std::string(b, e), loc(b), nullptr});
}

void LineBuilder::star_param(const char* b) {
  if (star_at_) fail(b, "only one '*' may appear in a parameter list");
  star_at_ = b;
}

void LineBuilder::param_name(const char* b, const char* e) {
  ast::Param p;
  p.name.assign(b, e);
  p.loc = loc(b);
  p.keyword_only = star_at_ != nullptr;
  param_after_star_ = p.keyword_only;
  result_.def.params.push_back(std::move(p));
}

void LineBuilder::def_header(const char* b, const char* e) {
  if (star_at_ && !param_after_star_) fail(star_at_, "'*' must be followed by a parameter");
  result_.kind = LineKind::def;
  result_.loc = loc(b);
  result_.end = end(e);
}

void LineBuilder::for_header(const char* b, const char* e) {
  auto s = make_stmt(StmtKind::for_, loc(b), end(e));
  s->value = pop().expr;
  for (auto& it : items_) s->targets.push_back(std::move(it.expr));
  items_.clear();
  set_stmt(std::move(s));
  result_.kind = LineKind::for_;
}

void LineBuilder::if_header(const char* b, const char* e, LineKind kind) {
  auto s = make_stmt(StmtKind::if_, loc(b), end(e));
  s->value = pop().expr;
  set_stmt(std::move(s));
  result_.kind = kind;
}

void LineBuilder::else_header(const char* b, const char* e) {
  result_.kind = LineKind::else_;
  result_.loc = loc(b);
  result_.end = end(e);
}

void LineBuilder::pass(const char* b, const char* e) {
  set_stmt(make_stmt(StmtKind::pass, loc(b), end(e)));
}

void LineBuilder::return_stmt(const char* b, const char* e) {
  auto s = make_stmt(StmtKind::return_, loc(b), end(e));
  if (items_.size() > marks_.back().base) s->value = pop().expr;
  pop_mark();
  set_stmt(std::move(s));
}

void LineBuilder::assign() {
  Item value = pop();
  pop_mark();
  Item target = pop();
  check_target(*target.expr);
  auto s = make_stmt(StmtKind::assign, target.expr->loc, value.expr->end);
  s->targets.push_back(std::move(target.expr));
  s->value = std::move(value.expr);
  set_stmt(std::move(s));
}

void LineBuilder::aug_assign(BinaryOp op) {
  Item value = pop();
  Item target = pop();
  if (target.expr->kind != ExprKind::name && target.expr->kind != ExprKind::subscript) {
    fail(*target.expr, "an augmented assignment needs a name or a subscript on its left");
  }
  auto s = make_stmt(StmtKind::aug_assign, target.expr->loc, value.expr->end);
  s->aug_op = op;
  s->targets.push_back(std::move(target.expr));
  s->value = std::move(value.expr);
  set_stmt(std::move(s));
}

void LineBuilder::annotated_assign() {
  Item value = pop();
  Item annotation = pop();
  Item target = pop();
  if (target.expr->kind != ExprKind::name) fail(*target.expr, "only a name can be annotated");
  auto s = make_stmt(StmtKind::assign, target.expr->loc, value.expr->end);
  s->targets.push_back(std::move(target.expr));
  s->value = std::move(value.expr);
  set_stmt(std::move(s));
  result_.annotation = std::move(annotation.expr);
}

void LineBuilder::simple_stmt() {
  if (result_.stmt) return;
  Item value = pop();
  auto s = make_stmt(StmtKind::expr, value.expr->loc, value.expr->end);
  s->value = std::move(value.expr);
  set_stmt(std::move(s));
}

void LineBuilder::set_stmt(StmtPtr s) {
  result_.loc = s->loc;
  result_.end = s->end;
  result_.stmt = std::move(s);
}

/// Checks that `e` can be assigned to: a name, a subscript, or a tuple of those.
void LineBuilder::check_target(const Expr& e) const {
  switch (e.kind) {
    case ExprKind::name:
    case ExprKind::subscript:
      return;
    case ExprKind::tuple:
      if (e.args.empty()) fail(e, "cannot assign to ()");
      for (const auto& a : e.args) check_target(*a);
      return;
    case ExprKind::call:
      fail(e, "cannot assign to a function call");
    case ExprKind::int_lit:
    case ExprKind::float_lit:
    case ExprKind::bool_lit:
    case ExprKind::string_lit:
      fail(e, "cannot assign to a literal");
    default:
      fail(e, "cannot assign to an expression");
  }
}

ParsedLine LineBuilder::take() {
  if (!items_.empty() || marks_.size() != 1) {
    throw InternalError("kdsl parser: operands left over after parsing a line");
  }
  return std::move(result_);
}

}  // namespace kdsl

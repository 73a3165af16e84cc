#include "line_parser.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grammar.h"
#include "kdsl/error.h"

namespace kdsl {
namespace {

namespace g = grammar;
namespace pegtl = tao::pegtl;
using ast::BinaryOp;
using ast::CompareOp;
using ast::Expr;
using ast::ExprKind;
using ast::ExprPtr;
using ast::Stmt;
using ast::StmtKind;
using ast::StmtPtr;

/// The first syntax error of a line: where (file offset), how much to underline, what.
struct SyntaxError {
  uint32_t offset;
  uint32_t length;
  std::string message;
};

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

/// Length in bytes of the token that starts at `p` (1 at the end of the text).
uint32_t token_length(const char* p, const char* end) {
  if (p >= end) return 1;
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

/// How an error message names the token at `p`: "'x'", "'+='", "end of line", ...
std::string describe_token(const char* p, const char* end) {
  if (p >= end) return "end of line";
  const auto c = static_cast<unsigned char>(*p);
  if (c == '"' || c == '\'') return "string literal";
  if (c >= 0x80) return "non-ASCII character";
  if (c < 0x20 || c == 0x7f) {
    static const char* hex = "0123456789abcdef";
    return std::string("character 0x") + hex[c >> 4] + hex[c & 15];
  }
  return "'" + std::string(p, token_length(p, end)) + "'";
}

/// `message` with "{token}" replaced by the description of the token at `p`.
std::string expand(std::string message, const char* p, const char* end) {
  const size_t at = message.find("{token}");
  if (at != std::string::npos) message.replace(at, 7, describe_token(p, end));
  return message;
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

/// An operand on the builder's stack: an expression and the depth of its tree, or the value of
/// a keyword argument.
struct Item {
  ExprPtr expr;
  uint32_t depth = 1;
  std::string keyword;  // not empty: `keyword=expr` in a call
  SourceLoc keyword_loc;
};

/// Where the operands of an open bracket, `return` or `=` start on the stack, and whether a
/// comma was seen at that level (which makes a tuple).
struct Mark {
  size_t base = 0;
  bool comma = false;
  uint32_t comma_end = 0;
};

/// The parse state: builds the AST of one line from the actions' calls, bottom-up on a stack.
/// Every method is called by an action after its rule matched; the grammar never backtracks
/// over such a rule (see grammar.h), so the stack always mirrors the text read so far.
class Builder {
 public:
  Builder(const LogicalLine& line, const SourceFile& file)
      : line_(line), file_(file), begin_(line.text.data()) {
    marks_.push_back({});
  }

  // Positions in the line (pointers into line.text) to positions in the file.
  SourceLoc loc(const char* p) const { return SourceLoc::at(&file_, line_.offset_at(pos(p))); }
  uint32_t end(const char* p) const { return line_.offset_after(pos(p)); }
  const char* text_end() const { return begin_ + line_.text.size(); }

  [[noreturn]] void fail(const char* p, std::string message) const {
    throw SyntaxError{line_.offset_at(pos(p)), token_length(p, text_end()), std::move(message)};
  }
  [[noreturn]] void fail(const Expr& e, std::string message) const {
    throw SyntaxError{e.loc.offset, e.span(), std::move(message)};
  }

  // Atoms
  void name(const char* b, const char* e);
  void int_literal(const char* b, const char* e);
  void float_literal(const char* b, const char* e);
  void string_literal(const char* b, const char* e);
  void bool_literal(const char* b, const char* e, bool value);
  void slice(const char* b, const char* e);

  // Brackets, commas, keyword arguments
  void open() { marks_.push_back({items_.size()}); }
  void comma(const char* e);
  void close_paren(const char* b, const char* e);
  void close_call(const char* open, const char* e);
  void close_subscript(const char* open, const char* e);
  void keyword_name(const char* b);
  void keyword_value();
  void tuple_if_comma();

  // Operators
  void binary(ExprKind kind, uint8_t op, const char* op_at);
  void unary(ExprKind kind, uint8_t op, const char* op_at);
  void ternary(const char* if_at);

  // Lines
  void decorator(const char* b, const char* e);
  void def_name(const char* b, const char* e);
  void generic_name(const char* b, const char* e);
  void generic_constraint() { result_.def.generics.back().constraint = pop().expr; }
  void star_param(const char* b);
  void param_name(const char* b, const char* e);
  void param_annotation() { result_.def.params.back().annotation = pop().expr; }
  void param_default() { result_.def.params.back().default_value = pop().expr; }
  void returns() { result_.def.returns = pop().expr; }
  void def_header(const char* b, const char* e);
  void for_header(const char* b, const char* e);
  void if_header(const char* b, const char* e, LineKind kind);
  void else_header(const char* b, const char* e);
  void pass(const char* b, const char* e);
  void return_stmt(const char* b, const char* e);
  void assign();
  void aug_assign(BinaryOp op);
  void annotated_assign();
  void simple_stmt();

  /// The line's content. Before: the whole line matched.
  ParsedLine take();

 private:
  uint32_t pos(const char* p) const { return static_cast<uint32_t>(p - begin_); }
  void push(ExprPtr e, uint32_t depth, const char* at);
  Item pop();
  Mark pop_mark();
  ExprPtr tuple(size_t base, SourceLoc loc, uint32_t end, uint32_t* depth);
  void set_stmt(StmtPtr s);
  void check_target(const Expr& e) const;

  const LogicalLine& line_;
  const SourceFile& file_;
  const char* begin_;
  std::vector<Item> items_;
  std::vector<Mark> marks_;
  ParsedLine result_;
  const char* star_at_ = nullptr;  // the lone '*' of a parameter list
  bool param_after_star_ = false;
};

/// Pushes `e`, whose tree is `depth` deep; a tree deeper than max_nesting is an error reported
/// at `at` (at e when null).
void Builder::push(ExprPtr e, uint32_t depth, const char* at) {
  if (depth > g::max_nesting) {
    if (at) fail(at, g::message<g::too_deep>);
    fail(*e, g::message<g::too_deep>);
  }
  items_.push_back(Item{std::move(e), depth, {}, {}});
}

Item Builder::pop() {
  if (items_.size() <= marks_.back().base)
    throw InternalError("kdsl parser: operand stack underflow");
  Item it = std::move(items_.back());
  items_.pop_back();
  return it;
}

Mark Builder::pop_mark() {
  Mark m = marks_.back();
  marks_.pop_back();
  return m;
}

void Builder::name(const char* b, const char* e) {
  auto x = make_expr(ExprKind::name, loc(b), end(e));
  x->name.assign(b, e);
  push(std::move(x), 1, b);
}

void Builder::int_literal(const char* b, const char* e) {
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

void Builder::float_literal(const char* b, const char* e) {
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

void Builder::string_literal(const char* b, const char* e) {
  auto x = make_expr(ExprKind::string_lit, loc(b), end(e));
  x->name = decode_string(std::string_view(b, static_cast<size_t>(e - b)));
  push(std::move(x), 1, b);
}

void Builder::bool_literal(const char* b, const char* e, bool value) {
  auto x = make_expr(ExprKind::bool_lit, loc(b), end(e));
  x->bool_value = value;
  push(std::move(x), 1, b);
}

void Builder::slice(const char* b, const char* e) {
  push(make_expr(ExprKind::slice, loc(b), end(e)), 1, b);
}

void Builder::comma(const char* e) {
  marks_.back().comma = true;
  marks_.back().comma_end = end(e);
}

/// Replaces the items from `base` on by one tuple spanning [loc, end); sets *depth to its depth.
ExprPtr Builder::tuple(size_t base, SourceLoc loc, uint32_t end, uint32_t* depth) {
  auto t = make_expr(ExprKind::tuple, loc, end);
  *depth = 1;
  for (size_t i = base; i < items_.size(); ++i) {
    *depth = std::max(*depth, items_[i].depth + 1);
    t->args.push_back(std::move(items_[i].expr));
  }
  items_.resize(base);
  return t;
}

void Builder::tuple_if_comma() {
  Mark& m = marks_.back();
  if (!m.comma) return;
  m.comma = false;
  const SourceLoc first = items_[m.base].expr->loc;
  const uint32_t last_end = std::max(items_.back().expr->end, m.comma_end);
  uint32_t depth = 0;
  ExprPtr t = tuple(m.base, first, last_end, &depth);
  push(std::move(t), depth, nullptr);
}

void Builder::close_paren(const char* b, const char* e) {
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

void Builder::close_call(const char* open, const char* e) {
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

void Builder::close_subscript(const char* open, const char* e) {
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

void Builder::keyword_name(const char* b) {
  const char* e = b;
  while (is_word_char(*e)) ++e;
  items_.push_back(Item{nullptr, 0, std::string(b, e), loc(b)});
}

void Builder::keyword_value() {
  Item value = pop();
  items_.back().expr = std::move(value.expr);
  items_.back().depth = value.depth;
}

void Builder::binary(ExprKind kind, uint8_t op, const char* op_at) {
  Item rhs = pop();
  Item lhs = pop();
  auto x = make_expr(kind, lhs.expr->loc, rhs.expr->end);
  x->op = op;
  x->args.push_back(std::move(lhs.expr));
  x->args.push_back(std::move(rhs.expr));
  push(std::move(x), std::max(lhs.depth, rhs.depth) + 1, op_at);
}

void Builder::unary(ExprKind kind, uint8_t op, const char* op_at) {
  Item operand = pop();
  auto x = make_expr(kind, loc(op_at), operand.expr->end);
  x->op = op;
  x->args.push_back(std::move(operand.expr));
  push(std::move(x), operand.depth + 1, op_at);
}

void Builder::ternary(const char* if_at) {
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

void Builder::decorator(const char* b, const char* e) {
  result_.kind = LineKind::decorator;
  result_.loc = loc(b);
  result_.end = end(e);
  result_.decorator = pop().expr;
}

void Builder::def_name(const char* b, const char* e) {
  result_.def.name.assign(b, e);
  result_.def.loc = loc(b);
}

void Builder::generic_name(const char* b, const char* e) {
  result_.def.generics.push_back(ast::Generic{std::string(b, e), loc(b), nullptr});
}

void Builder::star_param(const char* b) {
  if (star_at_) fail(b, "only one '*' may appear in a parameter list");
  star_at_ = b;
}

void Builder::param_name(const char* b, const char* e) {
  ast::Param p;
  p.name.assign(b, e);
  p.loc = loc(b);
  p.keyword_only = star_at_ != nullptr;
  param_after_star_ = p.keyword_only;
  result_.def.params.push_back(std::move(p));
}

void Builder::def_header(const char* b, const char* e) {
  if (star_at_ && !param_after_star_) fail(star_at_, "'*' must be followed by a parameter");
  result_.kind = LineKind::def;
  result_.loc = loc(b);
  result_.end = end(e);
}

void Builder::for_header(const char* b, const char* e) {
  auto s = make_stmt(StmtKind::for_, loc(b), end(e));
  s->value = pop().expr;
  for (auto& it : items_) s->targets.push_back(std::move(it.expr));
  items_.clear();
  set_stmt(std::move(s));
  result_.kind = LineKind::for_;
}

void Builder::if_header(const char* b, const char* e, LineKind kind) {
  auto s = make_stmt(StmtKind::if_, loc(b), end(e));
  s->value = pop().expr;
  set_stmt(std::move(s));
  result_.kind = kind;
}

void Builder::else_header(const char* b, const char* e) {
  result_.kind = LineKind::else_;
  result_.loc = loc(b);
  result_.end = end(e);
}

void Builder::pass(const char* b, const char* e) {
  set_stmt(make_stmt(StmtKind::pass, loc(b), end(e)));
}

void Builder::return_stmt(const char* b, const char* e) {
  auto s = make_stmt(StmtKind::return_, loc(b), end(e));
  if (items_.size() > marks_.back().base) s->value = pop().expr;
  pop_mark();
  set_stmt(std::move(s));
}

void Builder::assign() {
  Item value = pop();
  pop_mark();
  Item target = pop();
  check_target(*target.expr);
  auto s = make_stmt(StmtKind::assign, target.expr->loc, value.expr->end);
  s->targets.push_back(std::move(target.expr));
  s->value = std::move(value.expr);
  set_stmt(std::move(s));
}

void Builder::aug_assign(BinaryOp op) {
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

void Builder::annotated_assign() {
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

void Builder::simple_stmt() {
  if (result_.stmt) return;
  Item value = pop();
  auto s = make_stmt(StmtKind::expr, value.expr->loc, value.expr->end);
  s->value = std::move(value.expr);
  set_stmt(std::move(s));
}

void Builder::set_stmt(StmtPtr s) {
  result_.loc = s->loc;
  result_.end = s->end;
  result_.stmt = std::move(s);
}

/// Checks that `e` can be assigned to: a name, a subscript, or a tuple of those.
void Builder::check_target(const Expr& e) const {
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

ParsedLine Builder::take() {
  if (!items_.empty() || marks_.size() != 1) {
    throw InternalError("kdsl parser: operands left over after parsing a line");
  }
  return std::move(result_);
}

/// Error reporting: every raise<> and failed must<> throws a SyntaxError with the rule's message.
template <typename Rule>
struct Control : pegtl::normal<Rule> {
  template <typename ParseInput>
  [[noreturn]] static void raise(const ParseInput& in, Builder& b) {
    static_assert(g::message<Rule> != nullptr,
                  "every must<> target and raise<> tag needs a message");
    b.fail(in.current(), expand(g::message<Rule>, in.current(), in.end()));
  }
};

// ---------------------------------------------------------------------------------------------
// Actions: each calls the Builder with the text its rule matched.

template <typename Rule>
struct Action : pegtl::nothing<Rule> {};

template <auto Method>
struct Call {
  template <typename Input>
  static void apply(const Input& in, Builder& b) {
    (b.*Method)(in.begin(), in.end());
  }
};
template <auto Method>
struct CallAt {
  template <typename Input>
  static void apply(const Input& in, Builder& b) {
    (b.*Method)(in.begin());
  }
};
template <auto Method>
struct Call0 {
  template <typename Input>
  static void apply(const Input&, Builder& b) {
    (b.*Method)();
  }
};

// clang-format off
template <> struct Action<g::name_atom> : Call<&Builder::name> {};
template <> struct Action<g::int_lit> : Call<&Builder::int_literal> {};
template <> struct Action<g::float_lit> : Call<&Builder::float_literal> {};
template <> struct Action<g::string_lit> : Call<&Builder::string_literal> {};
template <> struct Action<g::slice_colon> : Call<&Builder::slice> {};
template <> struct Action<g::paren_open> : Call0<&Builder::open> {};
template <> struct Action<g::call_open> : Call0<&Builder::open> {};
template <> struct Action<g::subscript_open> : Call0<&Builder::open> {};
template <> struct Action<g::return_kw> : Call0<&Builder::open> {};
template <> struct Action<g::assign_op> : Call0<&Builder::open> {};
template <> struct Action<g::paren_atom> : Call<&Builder::close_paren> {};
template <> struct Action<g::call_trailer> : Call<&Builder::close_call> {};
template <> struct Action<g::subscript_trailer> : Call<&Builder::close_subscript> {};
template <> struct Action<g::kwarg_name> : CallAt<&Builder::keyword_name> {};
template <> struct Action<g::kwarg> : Call0<&Builder::keyword_value> {};
template <> struct Action<g::exprlist> : Call0<&Builder::tuple_if_comma> {};
template <> struct Action<g::ternary_tail> : CallAt<&Builder::ternary> {};
template <> struct Action<g::decorator> : Call<&Builder::decorator> {};
template <> struct Action<g::def_name> : Call<&Builder::def_name> {};
template <> struct Action<g::generic_name> : Call<&Builder::generic_name> {};
template <> struct Action<g::generic_constraint> : Call0<&Builder::generic_constraint> {};
template <> struct Action<g::star_param> : CallAt<&Builder::star_param> {};
template <> struct Action<g::param_name> : Call<&Builder::param_name> {};
template <> struct Action<g::param_annotation> : Call0<&Builder::param_annotation> {};
template <> struct Action<g::param_default> : Call0<&Builder::param_default> {};
template <> struct Action<g::returns> : Call0<&Builder::returns> {};
template <> struct Action<g::def_header> : Call<&Builder::def_header> {};
template <> struct Action<g::for_var> : Call<&Builder::name> {};
template <> struct Action<g::for_header> : Call<&Builder::for_header> {};
template <> struct Action<g::else_header> : Call<&Builder::else_header> {};
template <> struct Action<g::pass_stmt> : Call<&Builder::pass> {};
template <> struct Action<g::return_stmt> : Call<&Builder::return_stmt> {};
template <> struct Action<g::assign_tail> : Call0<&Builder::assign> {};
template <> struct Action<g::annotation_tail> : Call0<&Builder::annotated_assign> {};
template <> struct Action<g::simple_stmt> : Call0<&Builder::simple_stmt> {};
// clang-format on

template <>
struct Action<g::comma> {
  template <typename Input>
  static void apply(const Input& in, Builder& b) {
    b.comma(in.end());
  }
};

template <>
struct Action<g::true_lit> {
  template <typename Input>
  static void apply(const Input& in, Builder& b) {
    b.bool_literal(in.begin(), in.end(), true);
  }
};

template <>
struct Action<g::false_lit> {
  template <typename Input>
  static void apply(const Input& in, Builder& b) {
    b.bool_literal(in.begin(), in.end(), false);
  }
};

template <>
struct Action<g::if_header> {
  template <typename Input>
  static void apply(const Input& in, Builder& b) {
    b.if_header(in.begin(), in.end(), LineKind::if_);
  }
};

template <>
struct Action<g::elif_header> {
  template <typename Input>
  static void apply(const Input& in, Builder& b) {
    b.if_header(in.begin(), in.end(), LineKind::elif);
  }
};

/// The AST form of an operator rule: kind and op.
template <typename Op>
struct OpInfo;
template <ExprKind K, auto O>
struct OpIs {
  static constexpr ExprKind kind = K;
  static constexpr uint8_t op = static_cast<uint8_t>(O);
};
// clang-format off
template <> struct OpInfo<g::pow_op> : OpIs<ExprKind::binary, BinaryOp::pow> {};
template <> struct OpInfo<g::mul_op> : OpIs<ExprKind::binary, BinaryOp::mul> {};
template <> struct OpInfo<g::div_op> : OpIs<ExprKind::binary, BinaryOp::div> {};
template <> struct OpInfo<g::floordiv_op> : OpIs<ExprKind::binary, BinaryOp::floordiv> {};
template <> struct OpInfo<g::mod_op> : OpIs<ExprKind::binary, BinaryOp::mod> {};
template <> struct OpInfo<g::add_op> : OpIs<ExprKind::binary, BinaryOp::add> {};
template <> struct OpInfo<g::sub_op> : OpIs<ExprKind::binary, BinaryOp::sub> {};
template <> struct OpInfo<g::lt_op> : OpIs<ExprKind::compare, CompareOp::lt> {};
template <> struct OpInfo<g::le_op> : OpIs<ExprKind::compare, CompareOp::le> {};
template <> struct OpInfo<g::gt_op> : OpIs<ExprKind::compare, CompareOp::gt> {};
template <> struct OpInfo<g::ge_op> : OpIs<ExprKind::compare, CompareOp::ge> {};
template <> struct OpInfo<g::eq_op> : OpIs<ExprKind::compare, CompareOp::eq> {};
template <> struct OpInfo<g::ne_op> : OpIs<ExprKind::compare, CompareOp::ne> {};
template <> struct OpInfo<g::and_op> : OpIs<ExprKind::bool_op, ast::BoolOp::and_> {};
template <> struct OpInfo<g::or_op> : OpIs<ExprKind::bool_op, ast::BoolOp::or_> {};
template <> struct OpInfo<g::neg_op> : OpIs<ExprKind::unary, ast::UnaryOp::neg> {};
template <> struct OpInfo<g::pos_op> : OpIs<ExprKind::unary, ast::UnaryOp::pos> {};
template <> struct OpInfo<g::not_op> : OpIs<ExprKind::not_op, 0> {};
template <> struct OpInfo<g::iadd_op> : OpIs<ExprKind::binary, BinaryOp::add> {};
template <> struct OpInfo<g::isub_op> : OpIs<ExprKind::binary, BinaryOp::sub> {};
template <> struct OpInfo<g::imul_op> : OpIs<ExprKind::binary, BinaryOp::mul> {};
template <> struct OpInfo<g::idiv_op> : OpIs<ExprKind::binary, BinaryOp::div> {};
// clang-format on

template <typename Op, typename Operand>
struct Action<g::binary_tail<Op, Operand>> {
  template <typename Input>
  static void apply(const Input& in, Builder& b) {
    b.binary(OpInfo<Op>::kind, OpInfo<Op>::op, in.begin());
  }
};

/// pow_tail, neg, pos, not_prefix: an operator applied to the operand on the stack.
template <typename Op, bool Binary>
struct OperatorAction {
  template <typename Input>
  static void apply(const Input& in, Builder& b) {
    if constexpr (Binary) {
      b.binary(OpInfo<Op>::kind, OpInfo<Op>::op, in.begin());
    } else {
      b.unary(OpInfo<Op>::kind, OpInfo<Op>::op, in.begin());
    }
  }
};
template <>
struct Action<g::pow_tail> : OperatorAction<g::pow_op, true> {};
template <>
struct Action<g::neg> : OperatorAction<g::neg_op, false> {};
template <>
struct Action<g::pos> : OperatorAction<g::pos_op, false> {};
template <>
struct Action<g::not_prefix> : OperatorAction<g::not_op, false> {};

template <typename Op>
struct Action<g::aug_tail<Op>> {
  template <typename Input>
  static void apply(const Input&, Builder& b) {
    b.aug_assign(static_cast<BinaryOp>(OpInfo<Op>::op));
  }
};

}  // namespace

std::optional<ParsedLine> parse_line(const LogicalLine& line, const SourceFile& file,
                                     Diagnostics& diags) {
  Builder builder(line, file);
  pegtl::memory_input<pegtl::tracking_mode::lazy, pegtl::eol::lf_crlf, const char*> in(
      line.text.data(), line.text.data() + line.text.size(), file.path().c_str());
  try {
    if (!pegtl::parse<g::line, Action, Control>(in, builder)) {
      throw InternalError("kdsl parser: a line neither matched nor raised an error");
    }
  } catch (const SyntaxError& e) {
    diags.error(SourceLoc::at(&file, e.offset), e.message, e.length);
    return std::nullopt;
  }
  return builder.take();
}

}  // namespace kdsl

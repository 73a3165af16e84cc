#include "ast.h"

#include <charconv>
#include <string_view>

namespace kdsl::ast {
namespace {

const char* binary_op_text(uint8_t op) {
  switch (static_cast<BinaryOp>(op)) {
    case BinaryOp::add:
      return "+";
    case BinaryOp::sub:
      return "-";
    case BinaryOp::mul:
      return "*";
    case BinaryOp::div:
      return "/";
    case BinaryOp::floordiv:
      return "//";
    case BinaryOp::mod:
      return "%";
    case BinaryOp::pow:
      return "**";
  }
  return "?";
}

const char* compare_op_text(uint8_t op) {
  switch (static_cast<CompareOp>(op)) {
    case CompareOp::lt:
      return "<";
    case CompareOp::le:
      return "<=";
    case CompareOp::eq:
      return "==";
    case CompareOp::ne:
      return "!=";
    case CompareOp::gt:
      return ">";
    case CompareOp::ge:
      return ">=";
  }
  return "?";
}

/// `s` as a double-quoted string literal with \\ \" \n \t and \xNN escapes.
std::string quote(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// The shortest text that reads back as `v`, always with a '.' or an exponent.
std::string float_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

void print_expr(const Expr& e, std::string& out);

void print_list(const std::vector<ExprPtr>& xs, size_t from, std::string& out) {
  for (size_t i = from; i < xs.size(); ++i) {
    if (i > from) out += ", ";
    print_expr(*xs[i], out);
  }
}

void print_call(const Expr& e, std::string& out) {
  print_expr(*e.args[0], out);
  out += "(";
  print_list(e.args, 1, out);
  for (size_t i = 0; i < e.keywords.size(); ++i) {
    if (i > 0 || e.args.size() > 1) out += ", ";
    out += e.keywords[i].name + "=";
    print_expr(*e.keywords[i].value, out);
  }
  out += ")";
}

/// Operators print fully parenthesized, so the tree's shape is visible.
void print_operator(const Expr& e, std::string& out) {
  out += "(";
  switch (e.kind) {
    case ExprKind::unary:
      out += static_cast<UnaryOp>(e.op) == UnaryOp::neg ? "-" : "+";
      print_expr(*e.args[0], out);
      break;
    case ExprKind::not_op:
      out += "not ";
      print_expr(*e.args[0], out);
      break;
    case ExprKind::ternary:
      print_expr(*e.args[1], out);
      out += " if ";
      print_expr(*e.args[0], out);
      out += " else ";
      print_expr(*e.args[2], out);
      break;
    default: {
      const char* op = e.kind == ExprKind::binary                  ? binary_op_text(e.op)
                       : e.kind == ExprKind::compare               ? compare_op_text(e.op)
                       : static_cast<BoolOp>(e.op) == BoolOp::and_ ? "and"
                                                                   : "or";
      print_expr(*e.args[0], out);
      out += std::string(" ") + op + " ";
      print_expr(*e.args[1], out);
    }
  }
  out += ")";
}

void print_expr(const Expr& e, std::string& out) {
  switch (e.kind) {
    case ExprKind::name:
      out += e.name;
      return;
    case ExprKind::int_lit:
      out += std::to_string(e.int_value);
      return;
    case ExprKind::float_lit:
      out += float_text(e.float_value);
      return;
    case ExprKind::bool_lit:
      out += e.bool_value ? "True" : "False";
      return;
    case ExprKind::string_lit:
      out += quote(e.name);
      return;
    case ExprKind::slice:
      out += ":";
      return;
    case ExprKind::tuple:
      out += "(";
      print_list(e.args, 0, out);
      out += e.args.size() == 1 ? ",)" : ")";
      return;
    case ExprKind::call:
      print_call(e, out);
      return;
    case ExprKind::subscript:
      print_expr(*e.args[0], out);
      out += "[";
      print_list(e.args, 1, out);
      out += "]";
      return;
    default:
      print_operator(e, out);
      return;
  }
}

std::string expr_text(const Expr& e) {
  std::string out;
  print_expr(e, out);
  return out;
}

void print_body(const std::vector<StmtPtr>& body, int indent, std::string& out);

void print_stmt(const Stmt& s, int indent, std::string& out) {
  const std::string pad(2 * indent, ' ');
  out += pad;
  switch (s.kind) {
    case StmtKind::assign:
      out += expr_text(*s.targets[0]) + " = " + expr_text(*s.value);
      break;
    case StmtKind::aug_assign:
      out += expr_text(*s.targets[0]) + " " + binary_op_text(static_cast<uint8_t>(s.aug_op)) +
             "= " + expr_text(*s.value);
      break;
    case StmtKind::expr:
      out += expr_text(*s.value);
      break;
    case StmtKind::pass:
      out += "pass";
      break;
    case StmtKind::return_:
      out += s.value ? "return " + expr_text(*s.value) : "return";
      break;
    case StmtKind::for_:
      out += "for ";
      print_list(s.targets, 0, out);
      out += " in " + expr_text(*s.value) + ":\n";
      print_body(s.body, indent + 1, out);
      return;
    case StmtKind::if_:
      out += "if " + expr_text(*s.value) + ":\n";
      print_body(s.body, indent + 1, out);
      if (!s.orelse.empty()) {
        out += pad + "else:\n";
        print_body(s.orelse, indent + 1, out);
      }
      return;
  }
  out += "\n";
}

void print_body(const std::vector<StmtPtr>& body, int indent, std::string& out) {
  for (const auto& s : body) print_stmt(*s, indent, out);
}

void print_params(const FunctionDef& f, std::string& out) {
  bool star = false;
  for (size_t i = 0; i < f.params.size(); ++i) {
    const Param& p = f.params[i];
    if (i > 0) out += ", ";
    if (p.keyword_only && !star) out += "*, ";
    star = star || p.keyword_only;
    out += p.name;
    if (p.annotation) out += ": " + expr_text(*p.annotation);
    if (p.default_value) out += " = " + expr_text(*p.default_value);
  }
}

void print_function(const FunctionDef& f, std::string& out) {
  for (const auto& d : f.decorators) out += "  @" + expr_text(*d) + "\n";
  out += "  def " + f.name;
  if (!f.generics.empty()) {
    out += "[";
    for (size_t i = 0; i < f.generics.size(); ++i) {
      if (i > 0) out += ", ";
      out += f.generics[i].name;
      if (f.generics[i].constraint) out += ": " + expr_text(*f.generics[i].constraint);
    }
    out += "]";
  }
  out += "(";
  print_params(f, out);
  out += ")";
  if (f.returns) out += " -> " + expr_text(*f.returns);
  out += ":\n";
  if (!f.docstring.empty()) out += "    doc " + quote(f.docstring) + "\n";
  print_body(f.body, 2, out);
}

}  // namespace

bool FunctionDef::is_kernel() const {
  for (const auto& d : decorators) {
    const Expr& name = d->kind == ExprKind::call ? *d->args[0] : *d;
    if (name.kind == ExprKind::name && name.name == "kernel") return true;
  }
  return false;
}

const FunctionDef* Module::find_function(const std::string& name) const {
  for (const auto& f : functions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string print(const Expr& e) {
  return expr_text(e);
}

std::string print(const Module& m) {
  std::string out = "module\n";
  if (!m.docstring.empty()) out += "  doc " + quote(m.docstring) + "\n";
  for (const auto& c : m.constants) {
    out += "  const " + c.name;
    if (c.annotation) out += ": " + expr_text(*c.annotation);
    out += " = " + expr_text(*c.value) + "\n";
  }
  for (const auto& f : m.functions) print_function(f, out);
  return out;
}

}  // namespace kdsl::ast

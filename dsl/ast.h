// Abstract syntax tree of a .kdsl module, as written (before name resolution and typing).
// Produced by parse_module() (parser.h); consumed by sema (sema.h). Every node carries the
// location of its first character and the byte offset just past its last one, so that
// diagnostics can underline it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "source.h"

namespace kdsl::ast {

enum class ExprKind : uint8_t {
  name,        // `x`; name = identifier
  int_lit,     // `42`; int_value
  float_lit,   // `1e-6`, `2.0`; float_value
  bool_lit,    // `True` / `False`; bool_value
  string_lit,  // `"""doc"""` or `"tanh"`; name = decoded text
  tuple,       // `(a, b)`, `a, b`; args = elements (a 1-tuple needs a trailing comma)
  slice,       // `:` inside a subscript (the whole axis); no children
  unary,       // `-a`, `+a`; op = UnaryOp; args = [operand]
  binary,      // `a + b`; op = BinaryOp; args = [lhs, rhs]
  compare,     // `a < b`; op = CompareOp; args = [lhs, rhs]
  bool_op,     // `a and b`; op = BoolOp; args = [lhs, rhs]
  not_op,      // `not a`; args = [operand]
  ternary,     // `a if c else b`; args = [c, a, b]
  call,        // `f(a, k=v)`; args = [callee, positional...]; keywords
  subscript,   // `x[m, :]`; args = [base, index...] (an index is an expression or a slice)
};

enum class UnaryOp : uint8_t { neg, pos };
enum class BinaryOp : uint8_t { add, sub, mul, div, floordiv, mod, pow };
enum class CompareOp : uint8_t { lt, le, eq, ne, gt, ge };
enum class BoolOp : uint8_t { and_, or_ };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// `name=value` in a call.
struct Keyword {
  std::string name;
  SourceLoc loc;
  ExprPtr value;
};

struct Expr {
  ExprKind kind = ExprKind::name;
  SourceLoc loc;     // first character
  uint32_t end = 0;  // byte offset one past the last character (same file as loc)
  std::string name;  // name: identifier; string_lit: decoded contents
  int64_t int_value = 0;
  double float_value = 0;
  bool bool_value = false;
  uint8_t op = 0;  // UnaryOp / BinaryOp / CompareOp / BoolOp, by kind
  std::vector<ExprPtr> args;
  std::vector<Keyword> keywords;

  /// Bytes to underline from loc (up to the end of loc's line).
  uint32_t span() const { return end > loc.offset ? end - loc.offset : 1; }
};

enum class StmtKind : uint8_t {
  assign,      // `target = value`; targets = [target] (a name, subscript, or tuple of those)
  aug_assign,  // `target += value`; targets = [target]; aug_op
  expr,        // an expression on its own line (a docstring, or an error reported by sema)
  pass,        // `pass`
  return_,     // `return value` (value may be null; a tuple for several results)
  for_,        // `for a, b in value:`; targets = loop variables (names); body
  if_,         // `if value:`; body; orelse (`elif` is an orelse holding one if_ statement)
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

struct Stmt {
  StmtKind kind = StmtKind::pass;
  SourceLoc loc;
  uint32_t end = 0;
  std::vector<ExprPtr> targets;
  BinaryOp aug_op = BinaryOp::add;  // aug_assign: add (+=), sub (-=), mul (*=), div (/=)
  ExprPtr value;
  std::vector<StmtPtr> body;
  std::vector<StmtPtr> orelse;
  SourceLoc else_loc;  // if_: location of the `else`/`elif` keyword, when present
};

/// `T` or `T: (f32, f16)` or `T: float` in `def k[...]`.
struct Generic {
  std::string name;
  SourceLoc loc;
  ExprPtr constraint;  // null, a name, or a tuple of names
};

/// One function parameter: `name: annotation = default`. A lone `*` is not a Param: the
/// parameters after it have keyword_only = true.
struct Param {
  std::string name;
  SourceLoc loc;
  ExprPtr annotation;     // may be null (helpers)
  ExprPtr default_value;  // may be null
  bool keyword_only = false;
};

/// `@decorator ... def name[generics](params) -> returns:` with its body.
struct FunctionDef {
  std::string name;
  SourceLoc loc;                    // the name in the def line
  std::vector<ExprPtr> decorators;  // `kernel` (a name) or a call such as `kernel(...)`
  std::vector<Generic> generics;
  std::vector<Param> params;
  ExprPtr returns;        // may be null
  std::string docstring;  // the first statement when it is a string literal (removed from body)
  SourceLoc docstring_loc;
  std::vector<StmtPtr> body;

  bool is_kernel() const;  // has a `kernel` decorator
};

/// Module-level constant: `NAME = expr` or `NAME: type = expr`.
struct ConstDef {
  std::string name;
  SourceLoc loc;
  ExprPtr annotation;  // may be null
  ExprPtr value;
};

struct Module {
  std::shared_ptr<const SourceFile> file;
  std::string docstring;
  std::vector<ConstDef> constants;     // in source order
  std::vector<FunctionDef> functions;  // in source order (kernels and helpers)

  const FunctionDef* find_function(const std::string& name) const;
};

/// An indented, deterministic text form of the tree (for tests and `kdsl emit --ast`).
std::string print(const Module& m);
std::string print(const Expr& e);

}  // namespace kdsl::ast

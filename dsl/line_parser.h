// Parsing of one logical line (SPEC section 3): runs the PEGTL grammar of grammar.h with the
// actions of line_parser.cpp and returns the line's piece of AST. parser.cpp assembles these
// pieces into blocks, functions and the module.
#pragma once

#include <cstdint>
#include <optional>

#include "ast.h"
#include "diagnostics.h"
#include "layout.h"

namespace kdsl {

/// What a logical line is.
enum class LineKind : uint8_t { decorator, def, for_, if_, elif, else_, stmt };

/// The content of one logical line. Block headers come without their block.
struct ParsedLine {
  LineKind kind = LineKind::stmt;
  SourceLoc loc;     // the first character: '@', a header's keyword, a statement's first token
  uint32_t end = 0;  // file offset past the last character (for a header: past its ':')
  ast::ExprPtr decorator;   // decorator: a name, or a call of one
  ast::FunctionDef def;     // def: name, loc, generics, params and returns; no body yet
  ast::StmtPtr stmt;        // for_, if_, elif (an if_ statement) and stmt; loc and end set
  ast::ExprPtr annotation;  // stmt is the annotated assignment `NAME: annotation = value`
};

/// Parses one logical line of `file`.
/// Before: `line` was produced by layout() on `file` and is not broken.
/// After: returns the line's content, every Expr and Stmt with loc and end; or reports the
/// line's first syntax error to `diags` and returns nullopt.
std::optional<ParsedLine> parse_line(const LogicalLine& line, const SourceFile& file,
                                     Diagnostics& diags);

}  // namespace kdsl

// Parser (SPEC sections 2 to 4): source text -> ast::Module. Runs the layout pass (layout.h),
// parses each logical line (line_parser.h) and assembles the lines into blocks by their depth,
// then into functions, constants and the module.
#pragma once

#include <memory>
#include <string>

#include "ast.h"
#include "diagnostics.h"
#include "source.h"

namespace kdsl {

/// Parses one module.
/// Before: `file` is not null.
/// After: every layout error, syntax error and module-structure error of the file has been
/// reported to `diags` (a line with an error is skipped with its block, and parsing goes on).
/// The returned module keeps `file` alive and holds the docstring, constants and functions that
/// parsed, in source order; every Expr and Stmt in it has loc and end (an expression in
/// parentheses spans them too; a for/if statement spans its header line, keyword to ':'). When
/// `diags` has errors the module is incomplete and only good for more diagnostics.
std::unique_ptr<ast::Module> parse_module(std::shared_ptr<const SourceFile> file,
                                          Diagnostics& diags);

/// parse_module() on the in-memory source `text`, named `path` in diagnostics.
std::unique_ptr<ast::Module> parse_source(std::string path, std::string text, Diagnostics& diags);

}  // namespace kdsl

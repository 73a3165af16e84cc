// The AST builder behind the line parser: the actions of line_parser.cpp call it with the text
// each grammar rule matched, and it assembles the line's piece of AST. Internal to the parser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ast.h"
#include "layout.h"
#include "line_parser.h"

namespace kdsl {

/// The first syntax error of a line: where (file offset), how many bytes to underline, what, and
/// a hint ("" for none).
struct SyntaxError {
  uint32_t offset;
  uint32_t length;
  std::string message;
  std::string hint;
};

/// Length in bytes of the token that starts at `p` (1 at the end of the text; a non-ASCII
/// character's bytes when it is well-formed UTF-8).
uint32_t token_length(const char* p, const char* end);

/// `message` with "{token}" replaced by a description of the token at `p` ("'x'", "'+='",
/// "string literal", "end of line", ...).
std::string expand_message(std::string message, const char* p, const char* end);

/// Builds the AST of one logical line, bottom-up on a stack, from the calls of the grammar's
/// actions (the parse state of line_parser.cpp). Each method is called by the action of a rule
/// that matched, with pointers into the line's text; the grammar never backtracks over such a rule
/// (see grammar.h), so the stack always mirrors the text read so far. Methods throw SyntaxError.
class LineBuilder {
 public:
  LineBuilder(const LogicalLine& line, const SourceFile& file)
      : line_(line), file_(file), begin_(line.text.data()) {
    marks_.push_back({});
  }

  // Positions in the line (pointers into line.text) to positions in the file.
  SourceLoc loc(const char* p) const { return SourceLoc::at(&file_, line_.offset_at(pos(p))); }
  uint32_t end(const char* p) const { return line_.offset_after(pos(p)); }
  const char* text_end() const { return begin_ + line_.text.size(); }

  [[noreturn]] void fail(const char* p, std::string message, std::string hint = "") const {
    throw SyntaxError{line_.offset_at(pos(p)), token_length(p, text_end()), std::move(message),
                      std::move(hint)};
  }
  [[noreturn]] void fail(const ast::Expr& e, std::string message) const {
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
  void binary(ast::ExprKind kind, uint8_t op, const char* op_at);
  void unary(ast::ExprKind kind, uint8_t op, const char* op_at);
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
  void aug_assign(ast::BinaryOp op);
  void annotated_assign();
  void simple_stmt();

  /// The line's content. Before: the whole line matched.
  ParsedLine take();

 private:
  /// An operand on the builder's stack: an expression and the depth of its tree, or the value of
  /// a keyword argument.
  struct Item {
    ast::ExprPtr expr;
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

  uint32_t pos(const char* p) const { return static_cast<uint32_t>(p - begin_); }
  void push(ast::ExprPtr e, uint32_t depth, const char* at);
  Item pop();
  Mark pop_mark();
  ast::ExprPtr tuple(size_t base, SourceLoc loc, uint32_t end, uint32_t* depth);
  void set_stmt(ast::StmtPtr s);
  void check_target(const ast::Expr& e) const;

  const LogicalLine& line_;
  const SourceFile& file_;
  const char* begin_;
  std::vector<Item> items_;
  std::vector<Mark> marks_;
  ParsedLine result_;
  const char* star_at_ = nullptr;  // the lone '*' of a parameter list
  bool param_after_star_ = false;
};

}  // namespace kdsl

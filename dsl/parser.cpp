#include "parser.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "layout.h"
#include "line_parser.h"

namespace kdsl {
namespace {

using ast::ExprKind;
using ast::StmtKind;
using ast::StmtPtr;

/// The line starts with keyword `kw` (a whole word).
bool starts_with_keyword(std::string_view text, std::string_view kw) {
  if (!text.starts_with(kw)) return false;
  if (text.size() == kw.size()) return true;
  const char c = text[kw.size()];
  return !(std::isalnum(static_cast<unsigned char>(c)) || c == '_');
}

uint32_t span(const ParsedLine& line) {
  return line.end > line.loc.offset ? line.end - line.loc.offset : 1;
}

/// The docstring: the first statement of a body, when it is a string literal on its own.
bool is_docstring(const ast::Stmt& s) {
  return s.kind == StmtKind::expr && s.value->kind == ExprKind::string_lit;
}

/// Builds the module from its logical lines. Lines are consumed in order through a cursor; a
/// block is the run of lines deeper than its header.
class Assembler {
 public:
  Assembler(const std::vector<LogicalLine>& lines, const SourceFile& file, Diagnostics& diags)
      : lines_(lines), file_(file), diags_(diags) {}

  /// Fills `m` from all the lines. Before: a fresh Assembler. After: every line consumed.
  void module(ast::Module& m);

 private:
  std::optional<ParsedLine> next_line();
  void skip_block(uint32_t depth);
  std::vector<StmtPtr> block(uint32_t depth);
  StmtPtr statement(ParsedLine line, uint32_t depth);
  StmtPtr if_chain(ParsedLine line, uint32_t depth);
  ast::FunctionDef function(ParsedLine line, std::vector<ast::ExprPtr> decorators, uint32_t depth);
  void module_line(ast::Module& m, ParsedLine& line, bool first);
  void else_without_if(const ParsedLine& line, uint32_t depth);
  bool decorated_next() const;
  void decorator_without_def(const ParsedLine& decorator) {
    diags_.error(decorator.loc, "a decorator must be followed by a def", span(decorator));
  }

  const std::vector<LogicalLine>& lines_;
  const SourceFile& file_;
  Diagnostics& diags_;
  size_t pos_ = 0;
};

/// Parses the line at the cursor and moves past it. A broken line, or one with a syntax error
/// (reported), is skipped with its block and gives nullopt.
std::optional<ParsedLine> Assembler::next_line() {
  const LogicalLine& line = lines_[pos_++];
  std::optional<ParsedLine> parsed;
  if (!line.broken) parsed = parse_line(line, file_, diags_);
  if (!parsed) skip_block(line.depth);
  return parsed;
}

/// The line at the cursor is meant to continue a run of decorators: it starts with 'def' or '@'.
/// Decided from its text, before it is parsed, so that a decorator followed by anything else is
/// reported before that line's own errors, and a def line with a syntax error is not also
/// reported as a missing def.
bool Assembler::decorated_next() const {
  const std::string_view text = lines_[pos_].text;
  return starts_with_keyword(text, "def") || text.starts_with('@');
}

/// Moves the cursor past the lines deeper than `depth`.
void Assembler::skip_block(uint32_t depth) {
  while (pos_ < lines_.size() && lines_[pos_].depth > depth) ++pos_;
}

/// The statements of the block at `depth` that starts at the cursor; stops at the first line
/// less deep. Definitions and decorators in it are reported (functions do not nest).
std::vector<StmtPtr> Assembler::block(uint32_t depth) {
  std::vector<StmtPtr> body;
  std::optional<ParsedLine> decorator;  // the last of a run of decorators
  while (pos_ < lines_.size() && lines_[pos_].depth >= depth) {
    if (lines_[pos_].depth > depth) {  // not produced by layout(); skipped defensively
      ++pos_;
      continue;
    }
    if (decorator && !decorated_next()) {
      decorator_without_def(*decorator);
      decorator.reset();
    }
    std::optional<ParsedLine> line = next_line();
    if (!line) {
      decorator.reset();  // a def or decorator line with a syntax error: that error is enough
      continue;
    }
    if (line->kind == LineKind::decorator) {
      decorator = std::move(line);
      continue;
    }
    if (line->kind == LineKind::def) {
      diags_.error(line->loc, "nested functions are not supported", 3);
      function(std::move(*line), {}, depth);  // parsed for its errors, then dropped
      decorator.reset();
      continue;
    }
    if (decorator) decorator_without_def(*decorator);
    decorator.reset();
    if (line->kind == LineKind::elif || line->kind == LineKind::else_) {
      else_without_if(*line, depth);
      continue;
    }
    body.push_back(statement(std::move(*line), depth));
  }
  if (decorator) decorator_without_def(*decorator);
  return body;
}

void Assembler::else_without_if(const ParsedLine& line, uint32_t depth) {
  const bool elif = line.kind == LineKind::elif;
  diags_.error(line.loc, elif ? "'elif' without a matching 'if'" : "'else' without a matching 'if'",
               4);
  skip_block(depth);
}

/// A statement from its line; a header takes its block (and an `if` its elif/else chain).
StmtPtr Assembler::statement(ParsedLine line, uint32_t depth) {
  if (line.kind == LineKind::if_) return if_chain(std::move(line), depth);
  if (line.annotation) {
    diags_.error(line.annotation->loc, "only module-level constants can be annotated",
                 line.annotation->span());
  }
  StmtPtr s = std::move(line.stmt);
  if (line.kind == LineKind::for_) s->body = block(depth + 1);
  return s;
}

/// An if statement, its block, and the elif/else lines that follow it at the same depth (an
/// elif becomes an if statement alone in the orelse of the one before).
StmtPtr Assembler::if_chain(ParsedLine line, uint32_t depth) {
  StmtPtr top = std::move(line.stmt);
  top->body = block(depth + 1);
  ast::Stmt* last = top.get();
  while (pos_ < lines_.size() && lines_[pos_].depth == depth &&
         (starts_with_keyword(lines_[pos_].text, "elif") ||
          starts_with_keyword(lines_[pos_].text, "else"))) {
    std::optional<ParsedLine> next = next_line();
    if (!next) continue;  // reported; the rest of the chain still belongs to this if
    last->else_loc = next->loc;
    if (next->kind == LineKind::else_) {
      last->orelse = block(depth + 1);
      break;
    }
    StmtPtr inner = std::move(next->stmt);
    inner->body = block(depth + 1);
    last->orelse.push_back(std::move(inner));
    last = last->orelse.back().get();
  }
  return top;
}

/// A function from its def line, its decorators and its block.
ast::FunctionDef Assembler::function(ParsedLine line, std::vector<ast::ExprPtr> decorators,
                                     uint32_t depth) {
  ast::FunctionDef f = std::move(line.def);
  f.decorators = std::move(decorators);
  f.body = block(depth + 1);
  if (!f.body.empty() && is_docstring(*f.body.front())) {
    f.docstring = f.body.front()->value->name;
    f.docstring_loc = f.body.front()->loc;
    f.body.erase(f.body.begin());
  }
  return f;
}

void Assembler::module(ast::Module& m) {
  std::vector<ast::ExprPtr> decorators;
  std::optional<ParsedLine> last_decorator;
  bool first = true;
  while (pos_ < lines_.size()) {
    if (lines_[pos_].depth > 0) {  // not produced by layout(); skipped defensively
      ++pos_;
      continue;
    }
    if (last_decorator && !decorated_next()) {
      decorator_without_def(*last_decorator);
      decorators.clear();
      last_decorator.reset();
    }
    std::optional<ParsedLine> line = next_line();
    if (!line) {
      decorators.clear();  // a def or decorator line with a syntax error: that error is enough
      last_decorator.reset();
      continue;
    }
    if (line->kind == LineKind::decorator) {
      decorators.push_back(std::move(line->decorator));
      last_decorator = std::move(line);
      continue;
    }
    if (line->kind == LineKind::def) {
      m.functions.push_back(function(std::move(*line), std::move(decorators), 0));
      decorators.clear();
      last_decorator.reset();
    } else {
      if (last_decorator) decorator_without_def(*last_decorator);
      decorators.clear();
      last_decorator.reset();
      module_line(m, *line, first);
    }
    first = false;
  }
  if (last_decorator) decorator_without_def(*last_decorator);
}

/// Adds a module-level line that is not a def or decorator: a constant, or the docstring when
/// it is the first line; anything else is reported (after which its block is parsed for errors).
void Assembler::module_line(ast::Module& m, ParsedLine& line, bool first) {
  ast::Stmt* s = line.stmt.get();
  if (line.kind == LineKind::stmt && s->kind == StmtKind::assign &&
      s->targets[0]->kind == ExprKind::name) {
    ast::Expr& target = *s->targets[0];
    m.constants.push_back(
        ast::ConstDef{target.name, target.loc, std::move(line.annotation), std::move(s->value)});
    return;
  }
  if (line.kind == LineKind::stmt && first && is_docstring(*s)) {
    m.docstring = s->value->name;
    return;
  }
  if (line.kind == LineKind::elif || line.kind == LineKind::else_) {
    else_without_if(line, 0);
    return;
  }
  diags_.error(line.loc, "only constants, helper functions and kernels may appear at module level",
               span(line));
  statement(std::move(line), 0);
}

}  // namespace

std::unique_ptr<ast::Module> parse_module(std::shared_ptr<const SourceFile> file,
                                          Diagnostics& diags) {
  auto m = std::make_unique<ast::Module>();
  m->file = std::move(file);
  // A NUL byte never occurs in text: the file is binary (or mis-encoded, e.g. UTF-16), and
  // parsing it would only report some unmatched bracket.
  if (const size_t nul = m->file->text().find('\0'); nul != std::string::npos) {
    diags
        .error(SourceLoc::at(m->file.get(), static_cast<uint32_t>(nul)),
               "a NUL byte: this is not a text file")
        .hint = ".kdsl files are UTF-8 text (is this a binary or a UTF-16 file?)";
    return m;
  }
  // Layout reports its errors (brackets, strings, indentation) over the whole file before the
  // lines are parsed; both are merged here into source order.
  Diagnostics found;
  const std::vector<LogicalLine> lines = layout(*m->file, found);
  Assembler(lines, *m->file, found).module(*m);
  std::vector<Diagnostic> sorted = found.all();
  std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return a.loc.offset < b.loc.offset;
  });
  for (Diagnostic& d : sorted) diags.append(std::move(d));
  return m;
}

std::unique_ptr<ast::Module> parse_source(std::string path, std::string text, Diagnostics& diags) {
  return parse_module(std::make_shared<const SourceFile>(std::move(path), std::move(text)), diags);
}

}  // namespace kdsl

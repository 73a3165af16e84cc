#include "layout.h"

#include <cctype>
#include <string_view>
#include <utility>

namespace kdsl {
namespace {

constexpr uint32_t tab_width = 8;

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}
bool is_open_bracket(char c) {
  return c == '(' || c == '[' || c == '{';
}
bool is_close_bracket(char c) {
  return c == ')' || c == ']' || c == '}';
}

char closer_of(char open) {
  switch (open) {
    case '(':
      return ')';
    case '[':
      return ']';
    default:
      return '}';
  }
}

std::string quoted(char c) {
  return std::string("'") + c + "'";
}

/// The keyword a block header starts with (def, for, if, elif, else); empty otherwise.
std::string_view header_keyword(std::string_view text) {
  size_t n = 0;
  while (n < text.size() && (std::isalnum(static_cast<unsigned char>(text[n])) || text[n] == '_')) {
    ++n;
  }
  std::string_view word = text.substr(0, n);
  for (std::string_view k : {"def", "for", "if", "elif", "else"}) {
    if (word == k) return word;
  }
  return {};
}

/// Turns indentation widths into block depths (the second half of the layout pass).
class Indenter {
 public:
  Indenter(const SourceFile& file, Diagnostics& diags) : file_(file), diags_(diags) {}

  /// Sets line.depth from line.indent and the lines before; reports indentation errors.
  void add(LogicalLine& line);
  /// Reports a block header left without a block at the end of the file.
  void finish();

 private:
  struct Level {
    uint32_t indent;
    bool real;  // false: a level opened by an "unexpected indent" (no block, no depth)
    // The smallest indentation that continues this level: `indent`, or less after a line
    // whose unindent matched no outer level rejoined it (both widths then continue it).
    uint32_t low;
  };

  void open_block(LogicalLine& line);
  void dedent(LogicalLine& line);
  void error(uint32_t offset, std::string message) {
    diags_.error(SourceLoc::at(&file_, offset), std::move(message));
  }

  const SourceFile& file_;
  Diagnostics& diags_;
  std::vector<Level> levels_{{0, true, 0}};
  uint32_t depth_ = 0;
  // The previous line opens a block: whether to report a missing block, and where.
  bool pending_ = false;
  bool pending_silent_ = false;
  std::string pending_keyword_;
  uint32_t pending_end_ = 0;
  uint32_t pending_indent_ = 0;  // the header's own indentation
};

void Indenter::add(LogicalLine& line) {
  const uint32_t top = levels_.back().indent;
  const uint32_t start = line.offset_at(0);
  if (pending_) {
    pending_ = false;
    // A header on a line whose unindent matched no outer level (reported there) sits below the
    // level it rejoined: a line deeper than the header itself is its block.
    if (line.indent > top || (line.indent > pending_indent_ && pending_indent_ < top)) {
      open_block(line);
    } else if (!pending_silent_) {
      error(start, "expected an indented block after '" + pending_keyword_ + "'");
    }
  } else if (line.indent > top) {
    error(start, "unexpected indent");
    levels_.push_back({line.indent, false, line.indent});
  }
  if (line.indent < top) dedent(line);
  line.depth = depth_;
  if (depth_ > max_block_depth) line.broken = true;  // reported once, where the depth grew
  // A line may be followed by a block when it ends in ':', when it starts with a header's
  // keyword (a header without its ':' is a syntax error the grammar reports) or when it is
  // broken. Only a well-formed header is reported when no block follows it.
  pending_keyword_ = std::string(header_keyword(line.text));
  if (line.opens_block || line.broken || !pending_keyword_.empty()) {
    pending_ = true;
    pending_silent_ = line.broken || !line.opens_block || pending_keyword_.empty();
    pending_end_ = line.offsets.back();
    pending_indent_ = line.indent;
  }
}

void Indenter::open_block(LogicalLine& line) {
  levels_.push_back({line.indent, true, line.indent});
  ++depth_;
  if (depth_ == max_block_depth + 1) {
    error(line.offset_at(0),
          "too many levels of indentation (limit " + std::to_string(max_block_depth) + ")");
  }
}

void Indenter::dedent(LogicalLine& line) {
  Level popped = levels_.back();
  while (levels_.back().low > line.indent) {
    popped = levels_.back();
    levels_.pop_back();
    if (popped.real) --depth_;
  }
  if (levels_.back().indent < line.indent) {
    // The line rejoins the block it closed last; the lines after it continue that block at
    // either indentation, so the mistake is reported once.
    error(line.offset_at(0), "unindent does not match any outer indentation level");
    levels_.push_back({popped.indent, popped.real, line.indent});
    if (popped.real) ++depth_;
  }
}

void Indenter::finish() {
  if (pending_ && !pending_silent_) {
    error(pending_end_, "expected an indented block after '" + pending_keyword_ + "'");
  }
}

/// Splits the text into logical lines (the first half of the layout pass).
class Scanner {
 public:
  Scanner(const SourceFile& file, Diagnostics& diags)
      : file_(file), text_(file.text()), diags_(diags) {}

  /// Scans the whole file. Before: a fresh Scanner. After: the lines, in file order.
  std::vector<LogicalLine> run();

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  bool at_line_break(size_t p) const {
    return p >= text_.size() || text_[p] == '\n' ||
           (text_[p] == '\r' && (p + 1 == text_.size() || text_[p + 1] == '\n'));
  }
  void skip_line_break() {
    if (pos_ < text_.size() && text_[pos_] == '\r') ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '\n') ++pos_;
  }
  void skip_to_line_break() {
    while (!at_line_break(pos_)) ++pos_;
  }

  bool skip_blank_line();
  void check_utf8(size_t begin, size_t end, const char* where);
  uint32_t scan_indent();
  void scan_line(LogicalLine& line);
  bool scan_string(LogicalLine& line);
  void scan_close_bracket(LogicalLine& line);
  void append(LogicalLine& line, char c, size_t offset) {
    line.text.push_back(c);
    line.offsets.push_back(static_cast<uint32_t>(offset));
  }
  void error(size_t offset, std::string message, uint32_t length = 1) {
    diags_.error(SourceLoc::at(&file_, static_cast<uint32_t>(offset)), std::move(message), length);
  }

  const SourceFile& file_;
  const std::string& text_;
  Diagnostics& diags_;
  size_t pos_ = 0;
  std::vector<size_t> brackets_;  // offsets of the brackets open in the current logical line
  bool bad_utf8_seen_ = false;    // reported once per file
};

std::vector<LogicalLine> Scanner::run() {
  std::vector<LogicalLine> lines;
  Indenter indenter(file_, diags_);
  if (text_.starts_with("\xEF\xBB\xBF")) pos_ = 3;  // a UTF-8 byte order mark
  while (!at_end()) {
    if (skip_blank_line()) continue;
    LogicalLine line;
    line.indent = scan_indent();
    scan_line(line);
    while (!line.text.empty() && is_blank(line.text.back())) {
      line.text.pop_back();
      line.offsets.pop_back();
    }
    if (line.text.empty()) continue;  // only a '\' continuation and blanks
    line.offsets.push_back(line.offsets.back() + 1);
    line.opens_block = line.text.back() == ':';
    indenter.add(line);
    lines.push_back(std::move(line));
  }
  indenter.finish();
  return lines;
}

/// At the start of a physical line: consumes it and returns true when it holds only blanks
/// and maybe a comment; otherwise consumes nothing.
bool Scanner::skip_blank_line() {
  size_t p = pos_;
  while (p < text_.size() && is_blank(text_[p])) ++p;
  if (!at_line_break(p) && text_[p] != '#') return false;
  pos_ = p;
  skip_to_line_break();
  check_utf8(p, pos_, "a comment");
  skip_line_break();
  return true;
}

/// Reports the first byte in [begin, end) that is not part of well-formed UTF-8 (the grammar
/// rejects any non-ASCII byte outside comments and strings), once per file.
void Scanner::check_utf8(size_t begin, size_t end, const char* where) {
  for (size_t i = begin; i < end && !bad_utf8_seen_;) {
    const auto b = static_cast<unsigned char>(text_[i]);
    char32_t cp = 0;
    const size_t n = b < 0x80 ? 1 : utf8_sequence(std::string_view(text_).substr(0, end), i, &cp);
    if (n > 0) {
      i += n;
      continue;
    }
    static const char* hex = "0123456789abcdef";
    auto& d = diags_.error(
        SourceLoc::at(&file_, static_cast<uint32_t>(i)),
        std::string("invalid UTF-8 byte \\x") + hex[b >> 4] + hex[b & 15] + " in " + where);
    d.hint =
        ".kdsl files are UTF-8 text (was this one saved in another encoding, such as "
        "Latin-1?)";
    bad_utf8_seen_ = true;
  }
}

/// Consumes the indentation of a non-blank physical line; reports its first tab.
uint32_t Scanner::scan_indent() {
  uint32_t width = 0;
  bool tab_seen = false;
  for (; pos_ < text_.size() && is_blank(text_[pos_]); ++pos_) {
    if (text_[pos_] == ' ') {
      ++width;
      continue;
    }
    if (!tab_seen) error(pos_, "tab in indentation; kdsl indents with spaces only");
    tab_seen = true;
    width = (width / tab_width + 1) * tab_width;
  }
  return width;
}

/// Scans from the first token to the end of the logical line, consuming its line break.
void Scanner::scan_line(LogicalLine& line) {
  brackets_.clear();
  while (!at_end()) {
    const char c = text_[pos_];
    if (at_line_break(pos_)) {
      if (brackets_.empty()) break;
      append(line, ' ', pos_);
      skip_line_break();
    } else if (c == '#') {
      const size_t comment = pos_;
      skip_to_line_break();
      check_utf8(comment, pos_, "a comment");
    } else if (c == '\\' && at_line_break(pos_ + 1)) {
      append(line, ' ', pos_);
      ++pos_;
      skip_line_break();
    } else if (c == '"' || c == '\'') {
      if (!scan_string(line)) {
        brackets_.clear();  // an unterminated string ends the logical line
        line.broken = true;
      }
    } else if (is_close_bracket(c)) {
      scan_close_bracket(line);
    } else {
      if (is_open_bracket(c)) brackets_.push_back(pos_);
      append(line, c, pos_);
      ++pos_;
    }
  }
  skip_line_break();
  if (!brackets_.empty()) {
    error(brackets_.back(), quoted(text_[brackets_.back()]) + " was never closed");
    line.broken = true;
  }
}

/// Consumes a string literal starting at pos_ (a quote). Returns false after reporting an
/// unterminated string; a short string then stops before the line break.
bool Scanner::scan_string(LogicalLine& line) {
  const size_t open = pos_;
  const char quote = text_[pos_];
  const bool triple =
      pos_ + 2 < text_.size() && text_[pos_ + 1] == quote && text_[pos_ + 2] == quote;
  const size_t quotes = triple ? 3 : 1;
  for (size_t i = 0; i < quotes; ++i) append(line, quote, pos_++);
  while (true) {
    if (at_end() || (!triple && at_line_break(pos_))) {
      error(open, "unterminated string literal", static_cast<uint32_t>(quotes));
      return false;
    }
    const char c = text_[pos_];
    if (c == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') {
      ++pos_;  // keep "\r\n" in a triple-quoted string as "\n"
      continue;
    }
    if (c == quote && (!triple || (pos_ + 2 < text_.size() && text_[pos_ + 1] == quote &&
                                   text_[pos_ + 2] == quote))) {
      for (size_t i = 0; i < quotes; ++i) append(line, quote, pos_++);
      check_utf8(open, pos_, "a string");
      return true;
    }
    append(line, c, pos_++);
    if (c == '\\' && !at_end() && (triple || !at_line_break(pos_))) {
      if (text_[pos_] == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') ++pos_;
      append(line, text_[pos_], pos_);
      ++pos_;
    }
  }
}

/// Consumes a closing bracket at pos_, checking it against the innermost open one.
void Scanner::scan_close_bracket(LogicalLine& line) {
  const char c = text_[pos_];
  if (brackets_.empty()) {
    error(pos_, "unmatched " + quoted(c));
    line.broken = true;
  } else {
    const char open = text_[brackets_.back()];
    if (closer_of(open) != c) {
      error(pos_, "closing " + quoted(c) + " does not match " + quoted(open));
      line.broken = true;
    }
    brackets_.pop_back();
  }
  append(line, c, pos_);
  ++pos_;
}

}  // namespace

std::vector<LogicalLine> layout(const SourceFile& file, Diagnostics& diags) {
  return Scanner(file, diags).run();
}

}  // namespace kdsl

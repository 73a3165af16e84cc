#include "diagnostics.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <utf8proc.h>

#include "kdsl/error.h"

namespace kdsl {
namespace {

const char* severity_word(Severity s) {
  switch (s) {
    case Severity::error:
      return "error";
    case Severity::warning:
      return "warning";
    case Severity::note:
      return "note";
  }
  return "error";
}

const char* severity_color(Severity s) {
  switch (s) {
    case Severity::error:
      return "\033[1;31m";
    case Severity::warning:
      return "\033[1;35m";
    case Severity::note:
      return "\033[1;36m";
  }
  return "";
}

// Edits (insert, delete, substitute, or swap two adjacent characters) that turn a into b: the
// optimal string alignment distance, so that a transposed pair ('maen' for 'mean') is one edit.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], before[j - 2] + 1);
      }
    }
    std::swap(before, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Code points a terminal would act on rather than show: C1 controls, and the invisible marks
// that reorder or hide text (bidirectional controls, zero-width characters, line separators, the
// byte-order mark).
bool hidden_code_point(char32_t c) {
  return (c >= 0x80 && c <= 0x9f) || c == 0x061c || (c >= 0x200b && c <= 0x200f) ||
         (c >= 0x2028 && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) || c == 0xfeff;
}

// The columns a code point takes on a terminal (utf8proc's width from the Unicode character
// database: 2 for East Asian wide and fullwidth characters and emoji, 0 for combining marks drawn
// over the character before them), so that the caret lands under the reported byte's character
// however wide the characters before it are.
size_t display_width(char32_t c) {
  return static_cast<size_t>(std::max(0, utf8proc_charwidth(static_cast<utf8proc_int32_t>(c))));
}

// One displayed unit of a source line: its bytes, its text on the terminal and its width (in
// terminal columns).
struct Piece {
  size_t begin = 0, bytes = 1;
  std::string text;
  size_t width = 1;
};

// The line split into what a diagnostic shows: ASCII and well-formed UTF-8 as written (one
// column each, two for wide characters, none for combining marks: display_width), a tab as a tab,
// other bytes (control bytes, a binary file) as \xHH and hidden code points as \u{HHHH}, so that
// nothing in a source file can drive the terminal.
std::vector<Piece> pieces(std::string_view line) {
  std::vector<Piece> out;
  for (size_t i = 0; i < line.size();) {
    Piece p;
    p.begin = i;
    const auto b = static_cast<unsigned char>(line[i]);
    char32_t cp = 0;
    if (b == '\t' || b == '\n' || (b >= 0x20 && b < 0x7f)) {
      p.text = std::string(1, line[i]);
    } else if (b >= 0x80 && (p.bytes = utf8_sequence(line, i, &cp)) > 0) {
      if (hidden_code_point(cp)) {
        p.text = fmt::format("\\u{{{:04x}}}", static_cast<uint32_t>(cp));
      } else {
        p.text = std::string(line.substr(i, p.bytes));
        p.width = display_width(cp);
      }
    } else {
      p.bytes = 1;
      p.text = fmt::format("\\x{:02x}", b);
    }
    if (p.text.size() > 1 && p.text[0] == '\\') p.width = p.text.size();
    i += p.bytes;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

size_t utf8_sequence(std::string_view text, size_t i, char32_t* cp) {
  utf8proc_int32_t c = 0;
  const utf8proc_ssize_t n =
      utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                       static_cast<utf8proc_ssize_t>(std::min<size_t>(text.size() - i, 4)), &c);
  if (n < 2) return 0;  // an error, or an ASCII byte (not a sequence)
  *cp = static_cast<char32_t>(c);
  return static_cast<size_t>(n);
}

std::string terminal_safe(std::string_view text) {
  std::string out;
  for (const Piece& p : pieces(text)) out += p.text;
  return out;
}

namespace {

// Source line `line` as a diagnostic shows it (pieces() above), a long one as a window of about
// 160 columns around column `col` (1-based, in bytes), cut with "...". `marker` gets the blanks
// (tabs where the line has them) that put a caret under the column; `underline` the columns that
// the `length` bytes from there take on screen (at least 1), within the window.
std::string shown_line(std::string_view line, uint32_t col, uint32_t length, std::string* marker,
                       size_t* underline) {
  constexpr size_t kWindow = 160, kBefore = 80;
  const std::vector<Piece> all = pieces(line);
  const size_t at = col > 0 ? col - 1 : 0;
  size_t caret = 0;  // the piece under the caret (all.size(): past the end)
  while (caret < all.size() && all[caret].begin + all[caret].bytes <= at) ++caret;
  size_t total = 0;
  for (const Piece& p : all) total += p.width;
  size_t first = 0, last = all.size();  // the window [first, last)
  if (total > kWindow + 40) {
    size_t w = 0;
    first = caret;
    while (first > 0 && w + all[first - 1].width <= kBefore) w += all[--first].width;
    last = first;
    for (w = 0; last < all.size() && w + all[last].width <= kWindow; ++last) w += all[last].width;
    last = std::max(last, std::min(caret + 1, all.size()));
  }
  std::string out;
  if (first > 0) {
    out += "...";
    *marker += "   ";
  }
  *underline = 0;
  for (size_t k = first; k < last; ++k) {
    const Piece& p = all[k];
    out += p.text;
    if (k < caret) {
      *marker += p.text == "\t" ? std::string("\t") : std::string(p.width, ' ');
    } else if (p.begin < at + std::max<uint32_t>(length, 1)) {
      *underline += p.width;
    }
  }
  if (last < all.size()) out += "...";
  *underline = std::max<size_t>(*underline, 1);
  return out;
}

}  // namespace

std::string render_diagnostic(const Diagnostic& d, bool color) {
  const char* bold = color ? "\033[1m" : "";
  const char* reset = color ? "\033[0m" : "";
  const char* sev = color ? severity_color(d.severity) : "";
  const char* green = color ? "\033[1;32m" : "";
  std::string out;
  out += bold;
  if (d.loc.file) {
    out += terminal_safe(d.loc.file->path());
    if (d.loc.line > 0) {
      out += fmt::format(":{}:{}", d.loc.line, d.loc.col);
    }
    out += ": ";
  }
  out += reset;
  out += sev;
  out += severity_word(d.severity);
  out += ": ";
  out += reset;
  out += bold;
  out += d.message;
  out += reset;
  out += "\n";
  if (d.loc.valid()) {
    std::string_view line = d.loc.file->line_text(d.loc.line);
    std::string marker;
    size_t underline = 1;
    out += shown_line(line, d.loc.col, d.length, &marker, &underline);
    out += "\n";
    out += green;
    out += marker + "^" + std::string(underline - 1, '~');
    out += reset;
    out += "\n";
  }
  if (!d.hint.empty()) {
    out += color ? "\033[1;36mhint:\033[0m " : "hint: ";
    out += d.hint;
    out += "\n";
  }
  return out;
}

Diagnostic& Diagnostics::add(Severity s, SourceLoc loc, std::string message, uint32_t length) {
  if (s == Severity::error) ++errors_;
  list_.push_back(Diagnostic{s, loc, length, std::move(message), {}});
  return list_.back();
}

Diagnostic& Diagnostics::error(SourceLoc loc, std::string message, uint32_t length) {
  return add(Severity::error, loc, std::move(message), length);
}
Diagnostic& Diagnostics::warning(SourceLoc loc, std::string message, uint32_t length) {
  return add(Severity::warning, loc, std::move(message), length);
}
Diagnostic& Diagnostics::note(SourceLoc loc, std::string message, uint32_t length) {
  return add(Severity::note, loc, std::move(message), length);
}

Diagnostic& Diagnostics::append(Diagnostic d) {
  if (d.severity == Severity::error) ++errors_;
  list_.push_back(std::move(d));
  return list_.back();
}

std::string Diagnostics::render(bool color) const {
  std::string out;
  for (const auto& d : list_) out += render_diagnostic(d, color);
  return out;
}

void Diagnostics::throw_if_errors() const {
  if (has_errors()) throw SourceError(render(false));
}

std::string closest_name(std::string_view name, const std::vector<std::string>& candidates) {
  const size_t limit = std::max<size_t>(1, name.size() / 3);
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    // The distance is at least the difference in length: such a candidate is never close enough.
    const size_t longer = std::max(name.size(), c.size()),
                 shorter = std::min(name.size(), c.size());
    if (longer - shorter > limit) continue;
    size_t d = edit_distance(name, c);
    if (d < best_d || (d == best_d && c < best)) best_d = d, best = c;
  }
  return best_d <= limit && best_d > 0 ? best : std::string();
}

}  // namespace kdsl

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

// Code points a terminal would act on rather than show, or would not show at all: C1 controls,
// the line and paragraph separators, and the format characters (Unicode category Cf: the
// bidirectional controls, zero-width spaces and joiners, the word joiner, the byte-order mark, the
// invisible tag characters U+E0001 to U+E007F, ...), which reorder or hide text.
bool hidden_code_point(char32_t c) {
  return (c >= 0x80 && c <= 0x9f) || c == 0x2028 || c == 0x2029 ||
         utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_CF;
}

// Whether a code point that utf8proc's Unicode version does not assign is set aside for wide
// characters: the CJK ideograph blocks and planes 2 and 3 (wide by default in
// EastAsianWidth.txt), and the emoji blocks U+1F000 to U+1FAFF and U+1FC00 to U+1FFFD (reserved
// for pictographs in emoji-data.txt). Characters that later Unicode versions add there, such as
// the CJK Extension I ideographs (Unicode 15.1) or the emoji of Unicode 16, are shown wide by
// terminals with newer tables.
bool reserved_wide(char32_t c) {
  return (c >= 0x3400 && c <= 0x4dbf) || (c >= 0x4e00 && c <= 0x9fff) ||
         (c >= 0xf900 && c <= 0xfaff) || (c >= 0x1f000 && c <= 0x1faff) ||
         (c >= 0x1fc00 && c <= 0x1fffd) || (c >= 0x20000 && c <= 0x2fffd) ||
         (c >= 0x30000 && c <= 0x3fffd);
}

// The columns a code point takes on a terminal (utf8proc's width from the Unicode character
// database: 2 for East Asian wide and fullwidth characters and emoji, 0 for combining marks drawn
// over the character before them), so that the caret lands under the reported byte's character
// however wide the characters before it are.
size_t display_width(char32_t c) {
  const auto u = static_cast<utf8proc_int32_t>(c);
  if (utf8proc_category(u) == UTF8PROC_CATEGORY_CN && reserved_wide(c)) return 2;
  return static_cast<size_t>(std::max(0, utf8proc_charwidth(u)));
}

// One displayed unit of a source line: its bytes, its text on the terminal, its width (in
// terminal columns; a tab's is set where the line is laid out) and its code point (0 for an
// ASCII byte or a byte shown as \xHH).
struct Piece {
  size_t begin = 0, bytes = 1;
  std::string text;
  size_t width = 1;
  char32_t cp = 0;
};

// The piece for `cp` written as \u{HHHH}.
void escape_code_point(Piece& p) {
  p.text = fmt::format("\\u{{{:04x}}}", static_cast<uint32_t>(p.cp));
  p.width = p.text.size();
}

// The line split into what a diagnostic shows: ASCII and well-formed UTF-8 as written (one
// column each, two for wide characters, none for combining marks: display_width), a tab as a tab,
// other bytes (control bytes, a binary file) as \xHH and hidden code points as \u{HHHH}, so that
// nothing in a source file can drive the terminal. `offset` is added to each piece's `begin`.
std::vector<Piece> pieces(std::string_view line, size_t offset = 0) {
  std::vector<Piece> out;
  for (size_t i = 0; i < line.size();) {
    Piece p;
    p.begin = offset + i;
    const auto b = static_cast<unsigned char>(line[i]);
    char32_t cp = 0;
    if (b == '\t' || b == '\n' || (b >= 0x20 && b < 0x7f)) {
      p.text = std::string(1, line[i]);
    } else if (b >= 0x80 && (p.bytes = utf8_sequence(line, i, &cp)) > 0) {
      p.cp = cp;
      if (hidden_code_point(cp)) {
        escape_code_point(p);
      } else {
        p.text = std::string(line.substr(i, p.bytes));
        p.width = display_width(cp);
      }
    } else {
      p.bytes = 1;
      p.text = fmt::format("\\x{:02x}", b);
      p.width = p.text.size();
    }
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

std::string terminal_safe_name(std::string_view text) {
  std::string out;
  for (const Piece& p : pieces(text)) {
    if (p.text == "\n" || p.text == "\t") {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(p.text[0]));
    } else {
      out += p.text;
    }
  }
  return out;
}

namespace {

// Source line `line` as a diagnostic shows it (pieces() above), a long one as a window of about
// 160 columns around column `col` (1-based, in bytes), cut with "...". `marker` gets the blanks
// (tabs where the line has them) that put a caret under the column; `underline` the columns that
// the `length` bytes from there take on screen (at least 1), within the window.
std::string shown_line(std::string_view line, uint32_t col, uint32_t length, std::string* marker,
                       size_t* underline) {
  constexpr size_t kWindow = 160, kBefore = 80, kTabStop = 8;
  // Only the bytes within kReach of the column are looked at: a window of characters of one
  // column or more takes at most 4 bytes a column, so each diagnostic costs the same on a line
  // of megabytes (a long run of zero-width characters only narrows the window).
  constexpr size_t kReach = 4 * (kWindow + 40);
  const size_t at = col > 0 ? col - 1 : 0;
  const auto continuation = [&](size_t i) {
    return (static_cast<unsigned char>(line[i]) & 0xc0) == 0x80;
  };
  size_t lo = std::min(line.size(), at > kReach ? at - kReach : 0);
  for (int k = 0; k < 3 && lo > 0 && lo < at && continuation(lo); ++k) ++lo;  // a first byte
  size_t hi = std::min(line.size(), std::max(at, lo) + kReach);
  for (int k = 0; k < 3 && hi < line.size() && continuation(hi); ++k) ++hi;  // a whole character
  std::vector<Piece> all = pieces(line.substr(lo, hi - lo), lo);
  size_t caret = 0;  // the piece under the caret (all.size(): past the end)
  while (caret < all.size() && all[caret].begin + all[caret].bytes <= at) ++caret;
  // A zero-width character under the caret (a combining mark with no letter before it, say) is
  // shown as \u{HHHH}: drawn as written, it would leave the caret under nothing.
  if (caret < all.size() && all[caret].width == 0 && all[caret].cp != 0) {
    escape_code_point(all[caret]);
  }
  // A tab takes the columns to the next tab stop (counted from the slice's start: about right
  // for a window), so that a line of tabs is cut to a window like any other.
  size_t total = 0;
  for (Piece& p : all) {
    if (p.text == "\t") p.width = kTabStop - total % kTabStop;
    total += p.width;
  }
  const bool sliced = lo > 0 || hi < line.size();
  size_t first = 0, last = all.size();  // the window [first, last)
  if (sliced || total > kWindow + 40) {
    size_t w = 0;
    first = caret;
    while (first > 0 && w + all[first - 1].width <= kBefore) w += all[--first].width;
    // Not from a zero-width character, which would be drawn over the "...".
    while (first < caret && all[first].width == 0) ++first;
    last = first;
    for (w = 0; last < all.size() && w + all[last].width <= kWindow; ++last) w += all[last].width;
    last = std::max(last, std::min(caret + 1, all.size()));
  }
  std::string out;
  if (first > 0 || lo > 0) {
    out += "...";
    *marker += "   ";
  }
  *underline = 0;
  for (size_t k = first; k < last; ++k) {
    const Piece& p = all[k];
    const bool tab = p.text == "\t";
    out += p.text;
    if (k < caret) {
      *marker += tab ? std::string("\t") : std::string(p.width, ' ');
    } else if (p.begin < at + std::max<uint32_t>(length, 1)) {
      *underline += tab ? 1 : p.width;
    }
  }
  if (last < all.size() || hi < line.size()) out += "...";
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
    out += terminal_safe_name(d.loc.file->path());
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

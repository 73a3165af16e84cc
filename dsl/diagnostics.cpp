#include "diagnostics.h"

#include <algorithm>

#include <fmt/format.h>

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

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// The length of the UTF-8 sequence at text[i] if it is a valid one of a printable character
// (not a C1 control, U+0080 to U+009F), else 0.
size_t printable_utf8(std::string_view text, size_t i) {
  const auto b = static_cast<unsigned char>(text[i]);
  const size_t n = b >= 0xf0 && b <= 0xf4 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 && b < 0xe0 ? 2 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return 0;
  }
  if (b == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) return 0;  // C1 controls
  return n;
}

// Source line `line` as a diagnostic shows it: control bytes and bytes that are not UTF-8 (a
// binary file, a stray escape sequence) as \xHH, never sent to the terminal; a long line as a
// window of about 160 bytes around column `col` (1-based), with "..." where it is cut. `marker`
// gets the blanks (tabs where the line has them) that put a caret under the column.
std::string shown_line(std::string_view line, uint32_t col, std::string* marker) {
  constexpr size_t kWindow = 160, kBefore = 80;
  const size_t at = col > 0 ? col - 1 : 0;
  size_t begin = 0, end = line.size();
  if (line.size() > kWindow + 40) {
    begin = at > kBefore ? at - kBefore : 0;
    end = std::min(line.size(), begin + kWindow);
  }
  std::string out;
  if (begin > 0) {
    out += "...";
    *marker += "   ";
  }
  for (size_t i = begin; i < end;) {
    const auto b = static_cast<unsigned char>(line[i]);
    size_t n = 1;
    std::string piece;
    if (b == '\t' || (b >= 0x20 && b < 0x7f)) {
      piece = std::string(1, line[i]);
    } else if (b >= 0x80 && (n = printable_utf8(line, i)) > 0) {
      piece = std::string(line.substr(i, n));
    } else {
      n = 1;
      piece = fmt::format("\\x{:02x}", b);
    }
    out += piece;
    if (i < at)
      *marker += b == '\t' ? std::string("\t")
                           : std::string(b >= 0x80 && piece.size() == n ? 1 : piece.size(), ' ');
    i += n;
  }
  if (end < line.size()) out += "...";
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
    out += d.loc.file->path();
    if (d.loc.line > 0) {
      out += ":" + std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col);
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
    out += shown_line(line, d.loc.col, &marker);
    out += "\n";
    uint32_t room =
        d.loc.col <= line.size() ? static_cast<uint32_t>(line.size()) - d.loc.col + 1 : 1;
    uint32_t len = std::max<uint32_t>(1, std::min({d.length, room, 120u}));
    out += green;
    out += marker + "^" + std::string(len - 1, '~');
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

std::string Diagnostics::render(bool color) const {
  std::string out;
  for (const auto& d : list_) out += render_diagnostic(d, color);
  return out;
}

void Diagnostics::throw_if_errors() const {
  if (has_errors()) throw SourceError(render(false));
}

std::string closest_name(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    size_t d = edit_distance(name, c);
    if (d < best_d || (d == best_d && c < best)) best_d = d, best = c;
  }
  size_t limit = std::max<size_t>(1, name.size() / 3);
  return best_d <= limit && best_d > 0 ? best : std::string();
}

}  // namespace kdsl

// User-facing diagnostics: file:line:col: error: message, the source line, a caret, a hint.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "source.h"

namespace kdsl {

enum class Severity { error, warning, note };

/// One message about a place in the source. `length` is the number of bytes underlined on the
/// location's line (1 = a lone caret). `hint` is printed on its own line after the caret.
struct Diagnostic {
  Severity severity = Severity::error;
  SourceLoc loc;
  uint32_t length = 1;
  std::string message;
  std::string hint;
};

/// Renders one diagnostic compiler-style. With `color`, uses ANSI colors (for terminals).
std::string render_diagnostic(const Diagnostic& d, bool color = false);

/// The length (2 to 4) of the well-formed UTF-8 sequence at text[i] (a byte >= 0x80), with its
/// code point in *cp; 0 if the bytes there are not one (a lone continuation byte, an overlong
/// form, a surrogate, a value above U+10FFFF, a truncated sequence).
size_t utf8_sequence(std::string_view text, size_t i, char32_t* cp);

/// `text` safe to print on a terminal: control bytes (newlines and tabs kept), bytes that are not
/// well-formed UTF-8 and code points that reorder or hide text are shown as \xHH or \u{HHHH},
/// as the source lines of diagnostics are. For messages that echo what a user or a file gave (a
/// file name, a docstring, an environment variable).
std::string terminal_safe(std::string_view text);

/// A file name (or other text that must stay on one line) safe to print on a terminal: as
/// terminal_safe, and newlines and tabs shown as \x0a and \x09 too, so that a name cannot start a
/// line that reads as a diagnostic of its own.
std::string terminal_safe_name(std::string_view text);

/// Collects diagnostics across passes so that a run reports every error it can, not just the first.
/// Not thread-safe; one per compilation.
class Diagnostics {
 public:
  Diagnostic& error(SourceLoc loc, std::string message, uint32_t length = 1);
  Diagnostic& warning(SourceLoc loc, std::string message, uint32_t length = 1);
  Diagnostic& note(SourceLoc loc, std::string message, uint32_t length = 1);
  /// Adds a diagnostic made elsewhere (e.g. collected apart, then put in source order).
  Diagnostic& append(Diagnostic d);

  bool has_errors() const { return errors_ > 0; }
  size_t error_count() const { return errors_; }
  const std::vector<Diagnostic>& all() const { return list_; }
  /// Every diagnostic, rendered in the order reported, separated by newlines.
  std::string render(bool color = false) const;
  /// Throws kdsl::SourceError carrying render() if any error was reported.
  void throw_if_errors() const;

 private:
  Diagnostic& add(Severity s, SourceLoc loc, std::string message, uint32_t length);
  std::vector<Diagnostic> list_;
  size_t errors_ = 0;
};

/// The candidate closest to `name` by edit distance when it is close enough to be a likely typo
/// (at most a third of the name's length, at least 1); empty when none is.
std::string closest_name(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace kdsl

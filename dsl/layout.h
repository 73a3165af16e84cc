// Layout pass (SPEC section 2): turns a source file into logical lines, each with its block
// nesting depth, the way CPython's tokenizer prepares lines for its parser. The grammar
// (grammar.h) then only ever sees one logical line, and every position it reports maps back to
// an exact file offset through LogicalLine::offsets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "diagnostics.h"
#include "source.h"

namespace kdsl {

/// Deepest block nesting a module may have; deeper blocks are an error.
inline constexpr uint32_t max_block_depth = 100;

/// One logical line: the physical lines joined while a bracket is open or after a '\' that
/// ends a line, without the comments, the indentation and the trailing blanks.
struct LogicalLine {
  /// The joined text. It starts at the first token and is never empty. A line break inside
  /// brackets, or a '\' and the line break after it, is one space. Triple-quoted strings keep
  /// their line breaks as '\n' (a "\r\n" becomes "\n").
  std::string text;
  /// offsets[i] is the byte offset in the file of text[i]; offsets[text.size()] is the offset
  /// just past the last character. Offsets increase strictly.
  std::vector<uint32_t> offsets;
  /// Width of the indentation of the first physical line (a tab advances to the next multiple
  /// of 8, after being reported).
  uint32_t indent = 0;
  /// Block nesting depth: 0 at module level, one more inside each block header's block.
  uint32_t depth = 0;
  /// The text ends in ':' (a block header, or a line the grammar will reject).
  bool opens_block = false;
  /// The layout pass reported an error in this line: a parser skips it and the lines of its
  /// block without reporting anything more about it.
  bool broken = false;

  /// File offset of the character at text position `i` (i <= text.size()).
  uint32_t offset_at(size_t i) const { return offsets[i]; }
  /// File offset just past the character before text position `i` (i > 0): the end of a
  /// token that ends at `i`.
  uint32_t offset_after(size_t i) const { return offsets[i - 1] + 1; }
};

/// Splits `file` into logical lines, in file order; blank and comment-only lines are dropped.
/// Before: nothing (any bytes are accepted). After: every layout error of SPEC section 2 (and
/// the first byte of a comment or string that is not well-formed UTF-8) has been reported to
/// `diags` at its exact line:col, the lines containing one are marked `broken`, and depths follow
/// the indentation (a line indented deeper than its predecessor without a header before it keeps
/// its predecessor's depth; a line whose unindent matches no outer level joins the innermost block
/// it closed, and the lines after it continue that block at its indentation or at the line's own).
/// Depths increase by at most one from a line to the next, and only after a line that ends in ':',
/// starts with def, for, if, elif or else, or is broken.
std::vector<LogicalLine> layout(const SourceFile& file, Diagnostics& diags);

}  // namespace kdsl

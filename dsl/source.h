// Source files and positions in them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kdsl {

/// The text of one .kdsl file (or an in-memory module) with a table of line starts.
/// Immutable after construction; positions refer to it through SourceLoc.
class SourceFile {
 public:
  /// Throws kdsl::Error when `text` is larger than max_bytes.
  SourceFile(std::string path, std::string text);

  /// Reads a file; throws kdsl::Error naming the path and the OS error when it cannot, and when
  /// it is larger than max_bytes or not a regular file (or a link to one): a directory, a FIFO, a
  /// device or a socket is refused before it is opened, naming what it is.
  static std::shared_ptr<const SourceFile> read(const std::string& path);

  /// Largest source text (bytes): positions are 32-bit offsets, and no real module comes near.
  static constexpr size_t max_bytes = size_t{16} << 20;

  const std::string& path() const { return path_; }
  const std::string& text() const { return text_; }
  /// Number of lines (a final line without '\n' counts).
  uint32_t line_count() const { return static_cast<uint32_t>(line_starts_.size()); }
  /// Line `line` (1-based) without its line terminator.
  std::string_view line_text(uint32_t line) const;
  /// Converts a byte offset (clamped to the text size) into a 1-based line and column (in bytes).
  void line_col(uint32_t offset, uint32_t* line, uint32_t* col) const;

 private:
  std::string path_;
  std::string text_;
  std::vector<uint32_t> line_starts_;
};

/// A position in a SourceFile: 1-based line and column (columns count bytes). `file` may be
/// null for positions that are not in any source (built-ins); such locations print without a line.
struct SourceLoc {
  const SourceFile* file = nullptr;
  uint32_t line = 0;
  uint32_t col = 0;
  uint32_t offset = 0;  // byte offset in file->text()

  bool valid() const { return file != nullptr && line > 0; }
  /// Makes a location from a byte offset in `f`.
  static SourceLoc at(const SourceFile* f, uint32_t offset);
};

}  // namespace kdsl

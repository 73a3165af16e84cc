#include "source.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "kdsl/error.h"

namespace kdsl {

namespace {

[[noreturn]] void too_large(const std::string& path, uintmax_t bytes) {
  throw Error(fmt::format("'{}' is {} bytes; a .kdsl module may be at most {} MiB", path, bytes,
                          SourceFile::max_bytes >> 20));
}

[[noreturn]] void too_long(const std::string& path) {
  throw Error(fmt::format("'{}' goes on past {} MiB; a .kdsl module may be at most {} MiB", path,
                          SourceFile::max_bytes >> 20, SourceFile::max_bytes >> 20));
}

}  // namespace

SourceFile::SourceFile(std::string path, std::string text)
    : path_(std::move(path)), text_(std::move(text)) {
  if (text_.size() > max_bytes) too_large(path_, text_.size());
  line_starts_.push_back(0);
  for (uint32_t i = 0; i < text_.size(); ++i) {
    if (text_[i] == '\n' && i + 1 < text_.size()) line_starts_.push_back(i + 1);
  }
}

std::shared_ptr<const SourceFile> SourceFile::read(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error("cannot read '" + path + "': it is a directory, not a .kdsl file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (!ec && bytes > max_bytes) too_large(path, bytes);  // before reading any of it
  // Read at most max_bytes + 1 bytes: a pipe, a device (/dev/zero) or a file still growing has
  // no size to check first.
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes) too_long(path);
  }
  if (in.bad()) throw Error("cannot read '" + path + "': " + std::strerror(errno));
  return std::make_shared<const SourceFile>(path, std::move(text));
}

std::string_view SourceFile::line_text(uint32_t line) const {
  if (line == 0 || line > line_starts_.size()) return {};
  uint32_t begin = line_starts_[line - 1];
  uint32_t end = line < line_starts_.size() ? line_starts_[line] : text_.size();
  while (end > begin && (text_[end - 1] == '\n' || text_[end - 1] == '\r')) --end;
  return std::string_view(text_).substr(begin, end - begin);
}

void SourceFile::line_col(uint32_t offset, uint32_t* line, uint32_t* col) const {
  offset = std::min<uint32_t>(offset, text_.size());
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  uint32_t idx = static_cast<uint32_t>(it - line_starts_.begin());  // >= 1
  *line = idx;
  *col = offset - line_starts_[idx - 1] + 1;
}

SourceLoc SourceLoc::at(const SourceFile* f, uint32_t offset) {
  SourceLoc loc;
  loc.file = f;
  loc.offset = offset;
  if (f) f->line_col(offset, &loc.line, &loc.col);
  return loc;
}

}  // namespace kdsl

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

// What a file that is not a regular file is, for the message refusing it.
const char* file_kind(std::filesystem::file_type t) {
  switch (t) {
    case std::filesystem::file_type::directory:
      return "a directory";
    case std::filesystem::file_type::fifo:
      return "a FIFO (named pipe)";
    case std::filesystem::file_type::character:
      return "a character device";
    case std::filesystem::file_type::block:
      return "a block device";
    case std::filesystem::file_type::socket:
      return "a socket";
    default:
      return "a file of an unknown kind";
  }
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
  // Only a regular file (or a link to one) is opened: opening a FIFO waits for a writer, for good
  // if none comes, and a device (/dev/zero) need not end. Its size is checked before reading.
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec) throw Error("cannot open '" + path + "': " + ec.message());
  if (st.type() == std::filesystem::file_type::directory) {
    throw Error("cannot read '" + path + "': it is a directory, not a .kdsl file");
  }
  if (st.type() != std::filesystem::file_type::regular) {
    throw Error("cannot read '" + path + "': it is " + file_kind(st.type()) +
                ", not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (!ec && bytes > max_bytes) too_large(path, bytes);  // before reading any of it
  // Read at most max_bytes + 1 bytes: a file still growing (or replaced since it was checked)
  // may be longer than its size said.
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

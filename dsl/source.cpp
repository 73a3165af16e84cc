#include "source.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "fd.h"
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

// The type of an opened file, from fstat's st_mode, for file_kind.
std::filesystem::file_type opened_type(mode_t mode) {
  if (S_ISDIR(mode)) return std::filesystem::file_type::directory;
  if (S_ISFIFO(mode)) return std::filesystem::file_type::fifo;
  if (S_ISCHR(mode)) return std::filesystem::file_type::character;
  if (S_ISBLK(mode)) return std::filesystem::file_type::block;
  if (S_ISSOCK(mode)) return std::filesystem::file_type::socket;
  return std::filesystem::file_type::unknown;
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
  // Only a regular file (or a link to one) is read: opening a FIFO waits for a writer, for good
  // if none comes, and a device (/dev/zero) need not end. The path's type is checked before it is
  // opened (a device is not opened at all), and the opened file's type again, with O_NONBLOCK so
  // that a FIFO put in the path's place between the two does not block the open (regular files
  // ignore the flag). Its size is checked before reading.
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec) throw Error("cannot open '" + path + "': " + ec.message());
  const auto refuse = [&path](std::filesystem::file_type type) {
    if (type == std::filesystem::file_type::directory) {
      throw Error("cannot read '" + path + "': it is a directory, not a .kdsl file");
    }
    throw Error("cannot read '" + path + "': it is " + file_kind(type) + ", not a regular file");
  };
  if (st.type() != std::filesystem::file_type::regular) refuse(st.type());
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat opened {};
  if (::fstat(fd.get(), &opened) != 0)
    throw Error("cannot read '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(opened.st_mode)) refuse(opened_type(opened.st_mode));
  const auto bytes = static_cast<uintmax_t>(opened.st_size);
  if (bytes > max_bytes) too_large(path, bytes);  // before reading any of it
  // Read at most max_bytes + 1 bytes: a file still growing may be longer than its size said.
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot read '" + path + "': " + std::strerror(errno));
    if (n == 0) break;
    text.append(chunk, static_cast<size_t>(n));
    if (text.size() > max_bytes) too_long(path);
  }
  return std::make_shared<const SourceFile>(path, std::move(text));
}

std::string_view SourceFile::line_text(uint32_t line) const {
  if (line == 0 || line > line_starts_.size()) return {};
  uint32_t begin = line_starts_[line - 1];
  uint32_t end = line < line_starts_.size() ? line_starts_[line] : text_.size();
  // Without its line break ("\n", "\r\n", or a "\r" that ends the file: layout.cpp), but with any
  // other carriage return, which an error may be about.
  if (end > begin && text_[end - 1] == '\n') --end;
  if (end > begin && text_[end - 1] == '\r') --end;
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

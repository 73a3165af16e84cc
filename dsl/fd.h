// Owning a POSIX file descriptor, shared by the front end (the source loader) and the runtime
// (the disk cache).
#pragma once

#include <unistd.h>

#include <utility>

namespace kdsl {

/// Owns a file descriptor (-1: none) and closes it when destroyed.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  /// Gives the descriptor up without closing it (to close it and see close's error).
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace kdsl

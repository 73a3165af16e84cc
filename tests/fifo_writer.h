// A named pipe (FIFO) for a test, with a writer that opens and closes it whenever a reader has it
// open: a reader that blocks in open() waiting for a writer (what kdsl must not do) then reads an
// empty file instead of waiting forever, so such a regression fails the test instead of hanging it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace kdsl::testing {

class FifoWriter {
 public:
  /// Makes the FIFO `path` (ok() says whether that worked) and starts the writer.
  explicit FifoWriter(std::string path)
      : path_(std::move(path)),
        ok_(::mkfifo(path_.c_str(), 0600) == 0),
        thread_([this] { run(); }) {}
  ~FifoWriter() {
    stop_ = true;
    thread_.join();
    ::unlink(path_.c_str());
  }
  FifoWriter(const FifoWriter&) = delete;
  FifoWriter& operator=(const FifoWriter&) = delete;

  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }

 private:
  void run() {
    while (!stop_) {
      // O_NONBLOCK: without a reader the open fails (ENXIO) instead of waiting for one.
      const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::string path_;
  bool ok_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: it starts once the members above are set
};

}  // namespace kdsl::testing

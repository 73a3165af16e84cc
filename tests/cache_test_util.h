// Helpers shared by the disk-cache tests: a fresh directory per test, captured log messages,
// environment overrides, fake keys and cubins, forked children.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "src/log.h"

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "scoped_env.h"
#include "src/cache.h"

namespace kdsl::testing {
namespace fs = std::filesystem;

/// Keeps every log message in memory.
class CaptureSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> at(spdlog::level::level_enum level) {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [l, text] : messages_) {
      if (l == level) out.push_back(text);
    }
    return out;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    messages_.emplace_back(msg.level, std::string(msg.payload.data(), msg.payload.size()));
  }
  void flush_() override {}

 private:
  std::vector<std::pair<spdlog::level::level_enum, std::string>> messages_;
};

/// A fresh temporary directory per test (removed afterwards) and captured warnings.
class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "kdsl-cache-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    sink_ = std::make_shared<CaptureSink>();
    kdsl::log().sinks().push_back(sink_);
    previous_level_ = kdsl::log().level();
    kdsl::log().set_level(spdlog::level::info);
  }
  void TearDown() override {
    auto& sinks = kdsl::log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    kdsl::log().set_level(previous_level_);
    std::error_code ec;
    for (const auto& p : fs::recursive_directory_iterator(root_, ec)) {
      if (p.is_directory(ec)) ::chmod(p.path().c_str(), 0700);
    }
    ::chmod(root_.c_str(), 0700);
    fs::remove_all(root_, ec);
  }

  /// A config for a cache directory (to be created) under the test's temporary directory.
  CacheConfig config(const std::string& name = "cache") const {
    CacheConfig c;
    c.dir = root_ / name;
    c.lock_timeout = std::chrono::seconds(30);
    return c;
  }
  std::vector<std::string> warnings() { return sink_->at(spdlog::level::warn); }

  fs::path root_;
  std::shared_ptr<CaptureSink> sink_;
  spdlog::level::level_enum previous_level_ = spdlog::level::warn;
};

/// A key as the runtime would build it, varied by symbol and arch.
inline CacheKeyInputs test_key(const std::string& symbol = "kdsl_rms_norm_bf16_n8192",
                               const std::string& arch = "sm_90") {
  CacheKeyInputs k;
  k.source = "extern \"C\" __global__ void " + symbol + "(float* y) { y[threadIdx.x] = 1.0f; }\n";
  k.options = {"--gpu-architecture=" + arch, "-std=c++20"};
  k.arch = arch;
  k.nvrtc_version = "13.0";
  k.kdsl_version = "0.1.0";
  k.kernel_symbol = symbol;
  return k;
}

/// Pseudo-random bytes standing in for a cubin, the same for the same key in every process.
inline std::string fake_cubin(const CacheKeyInputs& key, size_t bytes = 4096) {
  std::string hex = cache_key_hex(key);
  std::mt19937_64 rng(std::stoull(hex.substr(0, 16), nullptr, 16));
  std::string out =
      "\x7f"
      "ELF";
  while (out.size() < bytes) out.push_back(static_cast<char>(rng() & 0xff));
  return out;
}

/// Files under dir whose names end with `suffix`.
inline std::vector<fs::path> files_ending(const fs::path& dir, const std::string& suffix) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& p : fs::recursive_directory_iterator(dir, ec)) {
    if (p.is_regular_file(ec) && p.path().filename().string().ends_with(suffix)) {
      out.push_back(p.path());
    }
  }
  return out;
}

/// Every regular file under dir.
inline std::vector<fs::path> all_files(const fs::path& dir) {
  return files_ending(dir, "");
}

/// Forks; the child runs fn and exits with its result (an exception gives 100). Returns the pid.
inline pid_t fork_child(const std::function<int()>& fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int code = 100;
    try {
      code = fn();
    } catch (...) {
    }
    ::_exit(code);
  }
  return pid;
}

/// Waits for a child; returns its exit code, or -1 when it did not exit normally.
inline int wait_child(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace kdsl::testing

// Running the `kdsl` binary from tests: a private temporary directory (also the disk cache), the
// command's exit code, stdout and stderr.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace kdsl::testing {

struct CliResult {
  int code = -1;
  std::string out, err;
};

/// The source tree (KDSL_SOURCE_DIR in the environment wins: the tree may have moved).
inline std::string source_dir() {
  const char* root = std::getenv("KDSL_SOURCE_DIR");
  return root ? root : KDSL_SOURCE_DIR;
}

/// The kdsl binary: $KDSL_CLI when set, else the one CMake built, else the `kdsl` beside this
/// test binary (the GPU machine's .device/bin, where scripts/device/stage.sh puts both).
inline std::string cli_path() {
  const char* p = std::getenv("KDSL_CLI");
  if (p && *p) return p;
  if (std::filesystem::exists(KDSL_CLI_PATH)) return KDSL_CLI_PATH;
  std::error_code ec;
  return (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "kdsl").string();
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

/// A test with its own temporary directory; `kdsl(...)` runs the binary with KDSL_CACHE_DIR set
/// to <tmp>/cache and KDSL_LOG_LEVEL unset, in the source tree.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (std::filesystem::temp_directory_path() / "kdsl_cli_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    tmp_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(tmp_, ec);
  }

  std::filesystem::path tmp() const { return tmp_; }
  std::string cache_dir() const { return (tmp_ / "cache").string(); }
  std::string path(const std::string& name) const { return (tmp_ / name).string(); }
  static std::string src(const std::string& relative) { return source_dir() + "/" + relative; }

  /// Runs kdsl with `args`; `env` entries are set (an empty value unsets the variable).
  CliResult kdsl(const std::vector<std::string>& args,
                 const std::map<std::string, std::string>& env = {}) const {
    std::filesystem::path out = tmp_ / "stdout.txt", err = tmp_ / "stderr.txt";
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("KDSL_CACHE_DIR", cache_dir().c_str(), 1);
      ::unsetenv("KDSL_LOG_LEVEL");
      ::unsetenv("KDSL_CACHE");
      ::unsetenv("KDSL_CACHE_MAX_SIZE");
      for (const auto& [k, v] : env) {
        if (v.empty()) {
          ::unsetenv(k.c_str());
        } else {
          ::setenv(k.c_str(), v.c_str(), 1);
        }
      }
      if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(err.c_str(), "w", stderr) ||
          ::chdir(source_dir().c_str()) != 0) {
        ::_exit(126);
      }
      std::string bin = cli_path();
      std::vector<char*> argv = {bin.data()};
      std::vector<std::string> copy = args;
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    CliResult r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_text(out);
    r.err = read_text(err);
    return r;
  }

  std::filesystem::path tmp_;
};

/// Prints the command's output when an expectation about it fails.
inline std::string show(const CliResult& r) {
  return "exit code " + std::to_string(r.code) + "\n--- stdout:\n" + r.out + "--- stderr:\n" +
         r.err;
}

}  // namespace kdsl::testing

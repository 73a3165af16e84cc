// The disk cache across processes: the same key in another program, a hit in a second process,
// eight processes compiling one kernel at once.
#include <fstream>
#include <sstream>
#include <thread>

#include "cache_test_util.h"
#include "src/cache.h"

namespace kdsl {
namespace {
using namespace kdsl::testing;

constexpr const char* kChildOut = "KDSL_CACHE_TEST_CHILD_OUT";

// Not a test of its own: the body of the child program the tests below start (this same binary,
// run again with a filter). Writes "<hit|miss> <key hex> <cubin ok>" to $KDSL_CACHE_TEST_CHILD_OUT.
TEST(CacheChildProcess, CompileIfAsked) {
  const char* out = std::getenv(kChildOut);
  if (out == nullptr)
    GTEST_SKIP()
        << "runs only as the child program of CacheTest.AnotherProgramHitsTheEntryWithTheSameKey";
  CacheKeyInputs key = test_key();
  CompiledEntry e = compile_cached(key, "{}", [&] { return fake_cubin(key); });
  std::ofstream(out) << (e.hit ? "hit" : "miss") << ' ' << e.key_hex << ' '
                     << (e.cubin == fake_cubin(key) ? "ok" : "bad") << '\n';
}

// Runs CacheChildProcess.CompileIfAsked in a new program (fork + exec) and returns what it wrote.
std::string run_child_program(const fs::path& out) {
  ScopedEnv env(kChildOut, out.c_str());
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, STDOUT_FILENO);
    ::execl("/proc/self/exe", "cache_process_test", "--gtest_filter=CacheChildProcess.*",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  EXPECT_EQ(wait_child(pid), 0);
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(CacheTest, AnotherProgramHitsTheEntryWithTheSameKey) {
  ScopedEnv dir("KDSL_CACHE_DIR", config().dir.c_str());
  ScopedEnv on("KDSL_CACHE", nullptr);
  ScopedEnv fault("KDSL_CACHE_FAULT", nullptr);
  const std::string hex = cache_key_hex(test_key());
  EXPECT_EQ(run_child_program(root_ / "first"), "miss " + hex + " ok\n");
  EXPECT_EQ(run_child_program(root_ / "second"), "hit " + hex + " ok\n");
  EXPECT_EQ(files_ending(config().dir, ".kdslbin").size(), 1u);
}

TEST_F(CacheTest, EightProcessesCompilingOneKernelLeaveOneEntry) {
  const CacheConfig cfg = config();
  const CacheKeyInputs key = test_key();
  const fs::path compiles = root_ / "compiles";  // one byte per compile() call, in any process
  int start[2];
  ASSERT_EQ(::pipe(start), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    children.push_back(fork_child([&] {
      ::close(start[1]);
      char c;
      while (::read(start[0], &c, 1) > 0) {
      }  // all children start when the parent closes the pipe
      DiskCache cache(cfg);
      CompiledEntry e = cache.get_or_compile(key, "{}", [&] {
        int fd = ::open(compiles.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd < 0 || ::write(fd, "c", 1) != 1) ::_exit(3);
        ::close(fd);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        return fake_cubin(key);
      });
      return e.cubin == fake_cubin(key) ? 0 : 2;
    }));
  }
  ::close(start[0]);
  ::close(start[1]);
  for (pid_t pid : children) EXPECT_EQ(wait_child(pid), 0) << "child " << pid;

  EXPECT_EQ(fs::file_size(compiles), 1u) << "the lock makes the others wait for one compile";
  // Exactly one file: the entry (no temporary or lock file), and it is valid.
  std::vector<fs::path> files = all_files(cfg.dir);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0], DiskCache(cfg).entry_path(cache_key_hex(key)));
  DiskCache check(cfg);
  CompiledEntry e = check.get_or_compile(key, "{}", []() -> std::string {
    ADD_FAILURE() << "the entry should be valid";
    return "";
  });
  EXPECT_TRUE(e.hit);
  EXPECT_EQ(e.cubin, fake_cubin(key));
  EXPECT_TRUE(warnings().empty());
}

TEST_F(CacheTest, EightProcessesWithoutLockingStillSucceed) {
  CacheConfig cfg = config();
  cfg.faults.lock = true;  // as on a file system without flock
  const CacheKeyInputs key = test_key();
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    children.push_back(fork_child([&] {
      CompiledEntry e = DiskCache(cfg).get_or_compile(key, "{}", [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return fake_cubin(key);
      });
      return e.cubin == fake_cubin(key) ? 0 : 2;
    }));
  }
  for (pid_t pid : children) EXPECT_EQ(wait_child(pid), 0);
  std::vector<fs::path> files = all_files(cfg.dir);
  ASSERT_EQ(files.size(), 1u);
  CacheConfig plain = config();
  EXPECT_TRUE(DiskCache(plain).get_or_compile(key, "{}", [] { return std::string(); }).hit);
}

TEST_F(CacheTest, KeyIsTheSameInAForkedProcess) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = fork_child([&] {
    std::string hex = cache_key_hex(test_key());
    return ::write(fds[1], hex.data(), hex.size()) == static_cast<ssize_t>(hex.size()) ? 0 : 1;
  });
  ASSERT_EQ(wait_child(pid), 0);
  char buf[32];
  ASSERT_EQ(::read(fds[0], buf, sizeof(buf)), 32);
  EXPECT_EQ(std::string(buf, 32), cache_key_hex(test_key()));
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace kdsl

#include "disasm.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "kdsl/error.h"

namespace kdsl::cli {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> search_dirs() {
  std::vector<fs::path> dirs;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* v = std::getenv(var);
    if (v && *v) dirs.push_back(fs::path(v) / "bin");
  }
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    size_t pos = 0;
    while (pos <= p.size()) {
      size_t colon = p.find(':', pos);
      std::string dir = p.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
      if (!dir.empty()) dirs.emplace_back(dir);
      if (colon == std::string::npos) break;
      pos = colon + 1;
    }
  }
  dirs.emplace_back("/usr/local/cuda/bin");
  return dirs;
}

bool executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

std::optional<Disassembler> find_disassembler() {
  for (const fs::path& dir : search_dirs()) {
    // nvdisasm first: it does the work (cuobjdump -sass runs it), and -g prints the line of the
    // generated CUDA source (kdsl emit --cuda) above each instruction.
    if (executable(dir / "nvdisasm"))
      return Disassembler{(dir / "nvdisasm").string(), {"-c", "-g"}};
    if (executable(dir / "cuobjdump")) return Disassembler{(dir / "cuobjdump").string(), {"-sass"}};
  }
  return std::nullopt;
}

std::string no_disassembler_message() {
  return "--sass needs the CUDA toolkit's disassembler (cuobjdump or nvdisasm), and none is "
         "installed: looked in $CUDA_HOME/bin, $CUDA_PATH/bin, PATH and /usr/local/cuda/bin "
         "(--ptx needs no tool)";
}

int disassemble(const Disassembler& d, const std::string& cubin, const std::string& symbol) {
  fs::path dir = fs::temp_directory_path();
  std::string templ = (dir / (symbol + ".XXXXXX.cubin")).string();
  int fd = ::mkstemps(templ.data(), 6);
  if (fd < 0) {
    throw Error(fmt::format("cannot create a temporary file in {}: {}", dir.string(),
                            std::strerror(errno)));
  }
  const std::string path = templ;
  struct Remove {
    std::string path;
    ~Remove() { ::unlink(path.c_str()); }
  } remove{path};
  size_t done = 0;
  while (done < cubin.size()) {
    ssize_t n = ::write(fd, cubin.data() + done, cubin.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      throw Error(fmt::format("cannot write {}: {}", path, std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  std::vector<std::string> argv_s = {d.path};
  argv_s.insert(argv_s.end(), d.args.begin(), d.args.end());
  argv_s.push_back(path);
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  pid_t pid = ::fork();
  if (pid < 0) throw Error(fmt::format("cannot run {}: {}", d.path, std::strerror(errno)));
  if (pid == 0) {
    ::execv(d.path.c_str(), argv.data());
    std::fprintf(stderr, "kdsl: error: cannot run %s: %s\n", d.path.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      throw Error(fmt::format("waiting for {}: {}", d.path, std::strerror(errno)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error(fmt::format("{} failed on the cubin of {} ({})", d.path, symbol,
                            WIFEXITED(status) ? fmt::format("exit code {}", WEXITSTATUS(status))
                                              : std::string("killed by a signal")));
  }
  return 0;
}

}  // namespace kdsl::cli

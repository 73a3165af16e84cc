#include "src/nvrtc.h"
#include "log.h"

#include <nvrtc.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <mutex>
#include <optional>
#include <sstream>

#include "kdsl/error.h"

namespace kdsl {
namespace {

// Throws InternalError for an NVRTC call that fails for a reason other than the source (out of
// memory, a broken installation).
void check_nvrtc(nvrtcResult r, const char* what) {
  if (r == NVRTC_SUCCESS) return;
  throw InternalError(fmt::format("{} failed: {}", what, nvrtcGetErrorString(r)));
}

// Owns one nvrtcProgram.
class Program {
 public:
  Program(const std::string& source, const std::string& name) {
    check_nvrtc(nvrtcCreateProgram(&prog_, source.c_str(), name.c_str(), 0, nullptr, nullptr),
                "nvrtcCreateProgram");
  }
  ~Program() { nvrtcDestroyProgram(&prog_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram get() const { return prog_; }

  std::string log() const {
    size_t size = 0;
    check_nvrtc(nvrtcGetProgramLogSize(prog_, &size), "nvrtcGetProgramLogSize");
    std::string log(size, '\0');
    check_nvrtc(nvrtcGetProgramLog(prog_, log.data()), "nvrtcGetProgramLog");
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    return log;
  }

  std::string ptx() const {
    size_t size = 0;
    check_nvrtc(nvrtcGetPTXSize(prog_, &size), "nvrtcGetPTXSize");
    std::string data(size, '\0');
    check_nvrtc(nvrtcGetPTX(prog_, data.data()), "nvrtcGetPTX");
    while (!data.empty() && data.back() == '\0') data.pop_back();
    return data;
  }

  std::string cubin() const {
    size_t size = 0;
    check_nvrtc(nvrtcGetCUBINSize(prog_, &size), "nvrtcGetCUBINSize");
    std::string data(size, '\0');
    check_nvrtc(nvrtcGetCUBIN(prog_, data.data()), "nvrtcGetCUBIN");
    return data;
  }

 private:
  nvrtcProgram prog_ = nullptr;
};

// The line of the first "<program>(<line>): error" in an NVRTC log.
std::optional<int> first_error_line(const std::string& log, const std::string& program_name) {
  const std::string prefix = program_name + "(";
  for (size_t pos = log.find(prefix); pos != std::string::npos; pos = log.find(prefix, pos + 1)) {
    const char* begin = log.data() + pos + prefix.size();
    int line = 0;
    auto [end, ec] = std::from_chars(begin, log.data() + log.size(), line);
    if (ec == std::errc() &&
        std::string_view(end, log.data() + log.size()).starts_with("): error")) {
      return line;
    }
  }
  return std::nullopt;
}

// Lines [line - 2, line + 2] of source, numbered, the error line marked with '>'.
std::string source_excerpt(const std::string& source, int line) {
  std::istringstream in(source);
  std::string text;
  std::string out;
  for (int n = 1; std::getline(in, text) && n <= line + 2; ++n) {
    if (n >= line - 2) out += fmt::format("{} {:5} | {}\n", n == line ? '>' : ' ', n, text);
  }
  return out;
}

std::string compile_error_message(const std::string& source, const std::string& program_name,
                                  const std::string& arch, const std::vector<std::string>& options,
                                  const std::string& log) {
  std::string msg = fmt::format(
      "NVRTC {} failed to compile '{}' for {}\noptions: {}\nNVRTC log:\n{}\n", nvrtc_version(),
      program_name, arch, fmt::join(options, " "), log.empty() ? "(empty)" : log);
  if (auto line = first_error_line(log, program_name)) {
    msg += fmt::format("source around line {}:\n{}", *line, source_excerpt(source, *line));
  }
  msg +=
      "hint: kdsl generates this source; if the .kdsl program is valid, please report this "
      "message as a kdsl bug";
  return msg;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

std::vector<std::string> nvrtc_options(const std::string& arch,
                                       const std::vector<std::string>& extra) {
  std::vector<std::string> all = {"--gpu-architecture=" + arch, "-std=c++20"};
  all.insert(all.end(), extra.begin(), extra.end());
  return all;
}

namespace {

// Checks `arch`, then compiles `prog` with the options for `target` ("sm_90" or "compute_90").
// Returns NVRTC's log and sets `ms`; throws CompileError for a rejected source or architecture.
std::string compile_program(const Program& prog, const std::string& source,
                            const std::string& program_name, const std::string& arch,
                            const std::string& target, const std::vector<std::string>& options,
                            double& ms) {
  if (!nvrtc_supports_arch(arch)) {
    throw CompileError(fmt::format(
        "NVRTC {} cannot compile '{}' for '{}': not a supported architecture (supported: {}, "
        "optionally with suffix 'a' from sm_90 or 'f' from sm_100)",
        nvrtc_version(), program_name, arch, fmt::join(nvrtc_supported_archs(), ", ")));
  }
  const std::vector<std::string> all = nvrtc_options(target, options);
  std::vector<const char*> argv;
  for (const auto& o : all) argv.push_back(o.c_str());
  auto start = std::chrono::steady_clock::now();
  nvrtcResult r = nvrtcCompileProgram(prog.get(), static_cast<int>(argv.size()), argv.data());
  ms = ms_since(start);
  std::string nvrtc_log = prog.log();
  if (r == NVRTC_ERROR_COMPILATION || r == NVRTC_ERROR_INVALID_OPTION) {
    throw CompileError(compile_error_message(source, program_name, target, all, nvrtc_log));
  }
  check_nvrtc(r, "nvrtcCompileProgram");
  if (!nvrtc_log.empty())
    log().debug("NVRTC log for '{}' ({}):\n{}", program_name, target, nvrtc_log);
  return nvrtc_log;
}

}  // namespace

Cubin nvrtc_compile(const std::string& source, const std::string& program_name,
                    const std::string& arch, const std::vector<std::string>& options) {
  Program prog(source, program_name);
  double ms = 0;
  std::string nvrtc_log = compile_program(prog, source, program_name, arch, arch, options, ms);
  return Cubin{prog.cubin(), std::move(nvrtc_log), ms};
}

std::string nvrtc_compile_ptx(const std::string& source, const std::string& program_name,
                              const std::string& arch, const std::vector<std::string>& options) {
  std::string virtual_arch = arch.starts_with("sm_") ? "compute_" + arch.substr(3) : arch;
  Program prog(source, program_name);
  double ms = 0;
  compile_program(prog, source, program_name, arch, virtual_arch, options, ms);
  return prog.ptx();
}

std::string nvrtc_version() {
  int major = 0;
  int minor = 0;
  check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return fmt::format("{}.{}", major, minor);
}

const std::vector<std::string>& nvrtc_supported_archs() {
  static const std::vector<std::string> archs = [] {
    int n = 0;
    check_nvrtc(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
    std::vector<int> nums(static_cast<size_t>(n));
    check_nvrtc(nvrtcGetSupportedArchs(nums.data()), "nvrtcGetSupportedArchs");
    std::sort(nums.begin(), nums.end());
    std::vector<std::string> out;
    for (int a : nums) out.push_back(fmt::format("sm_{}", a));
    return out;
  }();
  return archs;
}

bool nvrtc_supports_arch(const std::string& arch) {
  std::string_view rest(arch);
  if (!rest.starts_with("sm_")) return false;
  rest.remove_prefix(3);
  int num = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), num);
  if (ec != std::errc() || end == rest.data()) return false;
  std::string_view suffix = rest.substr(static_cast<size_t>(end - rest.data()));
  bool suffix_ok = suffix.empty() || (suffix == "a" && num >= 90) || (suffix == "f" && num >= 100);
  const std::string base = fmt::format("sm_{}", num);
  const auto& archs = nvrtc_supported_archs();
  return suffix_ok && arch == base + std::string(suffix) &&
         std::find(archs.begin(), archs.end(), base) != archs.end();
}

}  // namespace kdsl

// Pieces shared by the `kdsl` subcommands.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kdsl/error.h"
#include "src/compiler.h"

namespace kdsl::cli {

/// Exit codes (docs/cli.md).
enum Exit : int { kOk = 0, kUserError = 1, kUsage = 2, kVerifyFailed = 3, kNoGpu = 4 };

/// A bad command line detected after parsing (exit code 2).
class UsageError : public Error {
 public:
  using Error::Error;
};

/// Options naming one kernel specialization: FILE, --kernel, --dtype / -D, --shape.
struct KernelOptions {
  std::string file;
  std::string kernel;
  std::string dtype;                 // --dtype bf16: the kernel's only generic
  std::vector<std::string> defines;  // -D T=bf16
  std::string shape;                 // --shape M=1024,N=8192
  std::string arch;                  // --arch sm_90
  std::string schedule;              // --schedule group=512,prefetch=1 (expert)
};

void add_kernel_options(CLI::App& app, KernelOptions& o, bool need_kernel);

/// Parses "M=1024,N=8192" (also accepts several --shape options joined by commas). Throws
/// UsageError for malformed text.
std::map<std::string, int64_t> parse_shape(const std::string& text);

/// The binding of the kernel's generics from --dtype / -D. Throws UsageError when a generic is
/// not given, is given twice or does not exist, and ArgumentError when the dtype is unknown or
/// not allowed.
std::vector<DType> resolve_binding(const KernelSignature& sig, const KernelOptions& o);

/// Loads the module and finds the kernel (ArgumentError listing the kernels when missing).
struct Selected {
  std::shared_ptr<const FrontEnd> fe;
  const KernelSignature* sig = nullptr;
};
Selected select_kernel(const KernelOptions& o);

/// The compile target: --arch if given, else the first GPU's, else sm_90 (with `note` saying so).
DeviceTarget target_for(const std::string& arch, std::string* note);

/// A subcommand: its CLI11 app and the function that runs it (returns the exit code).
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// Each adds its subcommand to `app`.
Command register_check(CLI::App& app);
Command register_list(CLI::App& app);
Command register_emit(CLI::App& app);
Command register_compile(CLI::App& app);
Command register_run(CLI::App& app);
Command register_tune(CLI::App& app);

/// Whether stdout / stderr is a terminal (colors).
bool stderr_is_tty();

}  // namespace kdsl::cli

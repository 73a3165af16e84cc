// Pieces shared by the `kdsl` subcommands (docs/cli.md).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

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

/// A malformed or incomplete command line, found after parsing (exit code 2).
class UsageError : public Error {
 public:
  using Error::Error;
};

/// A GPU-only action on a machine without a usable GPU (exit code 4). what() is the whole line.
class NoGpuError : public Error {
 public:
  using Error::Error;
};

/// Adds a repeatable option that takes exactly one value per occurrence (so it never swallows
/// the positional FILE that follows it).
CLI::Option* add_list_option(CLI::App& app, const std::string& name, std::vector<std::string>& into,
                             const std::string& help);

/// A validator refusing a value that is empty or only blanks, with `message` (what the option
/// expects). A string option not given stays empty, so without it `--arch ""` (or a variable that
/// expanded to nothing) would read as the option left out and fall back to its default.
CLI::Validator not_blank(const std::string& message);

/// Adds --seed, a seed of the random inputs: a whole number from 0 to 2^64 - 1 (a negative or
/// larger one is a usage error, not wrapped).
CLI::Option* add_seed_option(CLI::App& app, uint64_t& into);

/// Adds --warmup-ms, the least warm-up in milliseconds of GPU time before timing (time_cuda's
/// min_warmup_ms): a number from 0 to 10000 (NaN, infinities and text are usage errors);
/// `help_suffix` ends the help text, e.g. " (--bench)".
CLI::Option* add_warmup_ms_option(CLI::App& app, double& into, const std::string& help_suffix);

// ---------------------------------------------------------------------------------------------
// Dtypes and shapes on the command line

/// The prefix an error is printed after: none for a rendered diagnostic (FILE:LINE:COL: error:
/// ..., the source line and a caret), else "kdsl: error: ".
const char* error_prefix(const std::string& error);

/// The items of a comma-separated option value (--dtype, -k, --arch), each without the spaces
/// and tabs around it ("f16, bf16" is f16 and bf16, as in --shape and --schedule).
std::vector<std::string> split_list(const std::string& text);

/// Symbol -> its values, from every --shape option joined: "M=1024,N=4096,8192" gives M [1024]
/// and N [4096, 8192] (a bare number continues the list of the NAME= before it).
using ShapeLists = std::map<std::string, std::vector<int64_t>>;

/// Parses the --shape options. Throws UsageError for malformed text or a symbol set twice.
ShapeLists parse_shape_lists(const std::vector<std::string>& options);

/// The dtypes named by --dtype (for a kernel's only generic) and -D NAME=LIST.
struct DtypeRequest {
  std::vector<DType> only;                          // --dtype f32,bf16
  std::map<std::string, std::vector<DType>> named;  // -D T=f32,bf16
  std::string only_text;                            // as typed, for messages
};

/// Parses --dtype and -D. Throws UsageError for an unknown dtype spelling or malformed -D.
DtypeRequest parse_dtype_request(const std::string& dtype, const std::vector<std::string>& defines);

/// The dtype bindings of `sig` the request names: the cartesian product over its generics.
/// A generic the request leaves out takes its whole domain when `whole_domain` is set, else
/// throws UsageError. A dtype outside a generic's domain throws ArgumentError when `strict`, else
/// is dropped. --dtype on a kernel without exactly one generic throws ArgumentError when `strict`
/// (else it is ignored for a kernel without generics).
std::vector<std::vector<DType>> bindings_for(const KernelSignature& sig, const DtypeRequest& req,
                                             bool whole_domain, bool strict);

/// "bf16" or "T=bf16, U=f32" for messages and tables.
std::string binding_text(const KernelSignature& sig, const std::vector<DType>& binding);

/// "M=1024,N=8192" in the kernel's symbol order.
std::string shape_values_text(const std::map<std::string, int64_t>& shape);

// ---------------------------------------------------------------------------------------------
// One specialization (emit, run)

/// Options naming one kernel specialization: FILE, --kernel, --dtype / -D, --shape, --arch,
/// --schedule.
struct KernelOptions {
  std::string file;
  std::string kernel;
  std::string dtype;
  std::vector<std::string> defines;
  std::vector<std::string> shape;
  std::string arch;
  std::string schedule;
};

void add_kernel_options(CLI::App& app, KernelOptions& o, bool with_arch = true,
                        bool with_schedule = true);

/// Reads and checks the .kdsl file (kdsl::Error when it cannot be read, SourceError for errors).
std::shared_ptr<const FrontEnd> load_module(const std::string& path);

/// Loads the module and finds the kernel (ArgumentError listing the kernels when missing).
struct Selected {
  std::shared_ptr<const FrontEnd> fe;
  const KernelSignature* sig = nullptr;
};
Selected select_kernel(const std::string& file, const std::string& kernel);

/// The one binding the options name (UsageError when they name none or several).
std::vector<DType> single_binding(const KernelSignature& sig, const KernelOptions& o);

/// Every symbol's one value from --shape (UsageError when a symbol has several values;
/// ArgumentError for a name the kernel does not have).
std::map<std::string, int64_t> single_shape(const KernelSignature& sig, const KernelOptions& o);

/// The specialization the options describe, taking the tensors to be 16-byte aligned and
/// contiguous. The IR can be printed with the vector length left symbolic (need_vector false);
/// code needs it (a UsageError without it).
Specialization spec_from(const KernelSignature& sig, const KernelOptions& o, bool need_vector);

/// UsageError naming the first shape symbol of `sig` that `shape` leaves out (`from_inputs`: the
/// command also takes sizes from --in files, and the message says so).
void require_shapes(const KernelSignature& sig, const std::map<std::string, int64_t>& shape,
                    bool from_inputs);

/// The compile target: --arch if given (UsageError when NVRTC does not support it), else the
/// first GPU's, else sm_90 (with `note` saying so).
DeviceTarget target_for(const std::string& arch, std::string* note);

/// The schedule hint from --schedule (UsageError for malformed text).
ScheduleHint parse_schedule(const std::string& text);

// ---------------------------------------------------------------------------------------------
// Lists of specializations (compile, bench)

struct SpecListOptions {
  std::string file;
  std::string kernels;  // -k a,b; empty: every kernel of the file
  std::string dtype;
  std::vector<std::string> defines;
  std::vector<std::string> shape;
  std::string schedule;
};

void add_spec_list_options(CLI::App& app, SpecListOptions& o);

/// One specialization to compile or time.
struct SpecRequest {
  const KernelSignature* sig = nullptr;
  Specialization spec;                   // 16-byte aligned, contiguous tensors
  std::map<std::string, int64_t> shape;  // the symbols it needs (compile: only the vector one)
};

struct SpecList {
  std::shared_ptr<const FrontEnd> fe;
  std::vector<SpecRequest> specs;  // in order: kernel, binding, shape; no duplicates
};

/// Expands the options into specializations: kernels x bindings x shapes. With `all_symbols`
/// every shape symbol needs values (bench); without, only specialized ones (compile).
SpecList expand_specs(const SpecListOptions& o, bool all_symbols);

// ---------------------------------------------------------------------------------------------
// Subcommands

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
Command register_bench(CLI::App& app);
Command register_cache(CLI::App& app);

/// Whether stderr is a terminal (progress bar).
bool stderr_is_tty();
/// Whether diagnostics on stderr are colored: a terminal and NO_COLOR unset.
bool use_color();

/// Whether a CUDA driver and device are usable; `why` says why not.
bool have_gpu(std::string* why);

/// Prints "kdsl: note: NOTE" on stderr unless NOTE is empty or -q is given.
void print_note(const std::string& note);

/// Runs body(i) for every i in [0, n) on `threads` threads (the calling one among them, at least
/// one, at most n), each taking the next unclaimed index, so the calls run in no fixed order.
/// `body` must be safe to run concurrently and should catch its own errors: the first exception
/// it lets out is rethrown here after every thread has finished (the indices not yet claimed by
/// then still run).
void parallel_for(size_t n, size_t threads, const std::function<void(size_t)>& body);

/// "1.5 KiB", "12.0 MiB".
std::string human_bytes(uint64_t bytes);

/// `j` as --json prints it (indented by 2). Strings that are not UTF-8 (a file name, a docstring,
/// a directory taken from the environment) have their bad bytes replaced by U+FFFD instead of
/// failing the whole output.
std::string json_text(const nlohmann::json& j);

}  // namespace kdsl::cli

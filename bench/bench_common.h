// What the kernel benchmarks (kdsl_bench_norm, kdsl_bench_scan) share: the command line (CLI11),
// the same-run device-to-device copy that every ratio is to, timing one problem with CUDA events
// (L2 flushed), and the JSON records, rewritten after each one so that a run cut short keeps what
// it measured.
#pragma once

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>

#include "src/driver.h"
#include "src/gpu_bench.h"
#include "src/harness.h"

namespace kdsl::bench {

struct Options {
  std::string out_path;    // JSON records (none when empty)
  std::string source;      // the kdsl source tree holding stdlib/
  std::string only;        // time only this kernel
  std::string only_dtype;  // time only this dtype (where the benchmark has several)
  int reps = 30;           // timed launches per problem (median reported)
};

/// One problem's timing: median and minimum over the launches, the minimal bytes (each input
/// read once, each output written once) and the GB/s they give at the median.
struct Measured {
  Timing t;
  uint64_t bytes = 0;
  double gbps = 0;
};

/// A benchmark run on GPU 0: parses the command line, measures the 1 GiB copy, collects records.
class Session {
 public:
  /// `usage` is the --help text's first line; --only accepts the `kernel` of each of `cases`; a
  /// non-empty `dtypes` adds --dtype, which accepts those.
  template <class Cases>
  Session(std::string program, const std::string& usage, const Cases& cases,
          const std::vector<std::string>& dtypes = {})
      : program_(std::move(program)), app_(usage) {
    std::vector<std::string> kernels;
    for (const auto& c : cases) kernels.push_back(c.kernel);
    const char* env = std::getenv("KDSL_SOURCE_DIR");
    opt_.source = env ? env : KDSL_SOURCE_DIR;
    app_.add_option("out", opt_.out_path, "JSON file of the records (default: none)");
    app_.add_option("--source", opt_.source, "The kdsl source tree, holding stdlib/")
        ->check(CLI::ExistingDirectory)
        ->capture_default_str();
    app_.add_option("--reps", opt_.reps, "Timed launches per problem; the median is reported")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    app_.add_option("--only", opt_.only, "Time only this kernel")->check(CLI::IsMember(kernels));
    if (!dtypes.empty()) {
      app_.add_option("--dtype", opt_.only_dtype, "Time only this dtype")
          ->check(CLI::IsMember(dtypes));
    }
  }

  /// Parses the command line and measures the copy. Returns an exit status to stop with (0 after
  /// --help, 2 on a usage error, 4 without a GPU), or -1 to go on.
  int start(int argc, char** argv) {
    try {
      app_.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      if (app_.exit(e) == 0) return 0;  // --help
      std::cerr << program_ << ": usage error (see " << program_ << " --help)\n";
      return 2;
    }
    if (!opt_.out_path.empty()) {  // checked before timing anything, without creating the file
      std::filesystem::path dir = std::filesystem::path(opt_.out_path).parent_path();
      if (dir.empty()) dir = ".";
      if (!std::filesystem::is_directory(dir) || access(dir.c_str(), W_OK) != 0) {
        std::cerr << program_ << ": usage error: cannot write " << opt_.out_path << " (no writable "
                  << "directory " << dir.string() << ")\n";
        return 2;
      }
    }
    std::string why;
    if (!driver_or_null(&why) || device_count() == 0) {
      std::cerr << program_ << ": no GPU: " << why << "\n";
      return 4;
    }
    primary_context(0);
    Timing copy_t;
    copy_gbps_ = copy_bandwidth_gbps(nullptr, size_t{1} << 30, &copy_t);
    records_.push_back(
        {{"op", "copy"}, {"bytes", 2ull << 30}, {"us", copy_t.median_us}, {"GBps", copy_gbps_}});
    fmt::print("device-to-device copy (1 GiB): {:.1f} us, {:.0f} GB/s\n", copy_t.median_us,
               copy_gbps_);
    return -1;
  }

  const Options& options() const { return opt_; }
  double copy_gbps() const { return copy_gbps_; }

  /// Times `gpu`'s launch (at least 5 warm-up launches and kMinWarmupMs of them, then
  /// options().reps, L2 flushed before each).
  Measured time(const Problem& p, GpuRun& gpu) const {
    Measured m;
    m.t = time_cuda(
        nullptr, [&] { gpu.launch(); }, 5, opt_.reps, true);
    m.bytes = minimal_bytes(p);
    m.gbps = static_cast<double>(m.bytes) / (m.t.median_us * 1e3);
    return m;
  }

  /// Appends `rec` with the measurement's fields and the kernel's symbol and schedule, and
  /// rewrites the JSON file.
  void add(nlohmann::json rec, const Measured& m, const LaunchPlan& plan) {
    rec["us"] = m.t.median_us;
    rec["min_us"] = m.t.min_us;
    rec["warmup"] = m.t.warmup;
    rec["bytes"] = m.bytes;
    rec["GBps"] = m.gbps;
    rec["ratio_to_copy"] = m.gbps / copy_gbps_;
    rec["symbol"] = plan.symbol;
    rec["schedule"] = plan.schedule;
    records_.push_back(std::move(rec));
    if (!opt_.out_path.empty()) std::ofstream(opt_.out_path) << records_.dump(1) << "\n";
  }

 private:
  std::string program_;
  CLI::App app_;
  Options opt_;
  double copy_gbps_ = 0;
  nlohmann::json records_ = nlohmann::json::array();
};

/// main() of a benchmark: runs `run`, and reports an exception as `program: what` (status 1).
template <class Run>
int guarded_main(const char* program, Run run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace kdsl::bench

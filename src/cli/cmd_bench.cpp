// kdsl bench: time a list of specializations against the same-run copy bandwidth.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

#include "cli.h"
#include "dsl/diagnostics.h"
#include "inputs.h"
#include "src/driver.h"
#include "src/gpu_bench.h"
#include "src/harness.h"
#include "src/log.h"
#include "src/runtime_impl.h"
#include "src/text_util.h"

namespace kdsl::cli {
namespace {

struct BenchOptions {
  SpecListOptions specs;
  int warmup = 10, reps = 50;
  double warmup_ms = kMinWarmupMs;
  bool no_flush = false, json = false;
  uint64_t seed = 0;
};

struct Row {
  std::string kernel, dtype, shape, symbol, schedule, error;
  Timing t;
  uint64_t bytes = 0;
  double gbps = 0;
};

Row bench_one(const SpecList& list, const SpecRequest& r, const BenchOptions& o,
              const ScheduleHint& hint) {
  Row row;
  row.kernel = r.sig->name;
  row.dtype = binding_text(*r.sig, r.spec.binding);
  row.shape = shape_values_text(r.shape);
  check_sizes(*r.sig, r.spec.binding, r.shape);
  ProblemSpec ps;
  ps.kernel = r.sig->name;
  ps.binding = r.spec.binding;
  ps.shapes = r.shape;
  ps.seed = o.seed;
  ps.schedule = hint;
  Problem p = make_problem(list.fe, ps);
  GpuRun gpu(p);
  row.symbol = gpu.loaded().plan.symbol;
  row.schedule = gpu.loaded().plan.schedule;
  row.t = time_cuda(
      nullptr, [&] { gpu.launch(); }, o.warmup, o.reps, !o.no_flush, o.warmup_ms);
  row.bytes = minimal_bytes(p);
  row.gbps = row.t.median_us > 0 ? static_cast<double>(row.bytes) / (row.t.median_us * 1e3) : 0;
  return row;
}

int bench(const BenchOptions& o) {
  SpecList list = expand_specs(o.specs, /*all_symbols=*/true);
  ScheduleHint hint = parse_schedule(o.specs.schedule);
  std::string why;
  if (!have_gpu(&why)) {
    // What can be checked without a GPU is, as with one: a hint that cannot apply to a
    // specialization (for the default target) is a usage error (exit 2); a specialization that
    // cannot be generated (a row beyond the row schedule, a scan the GPU schedule cannot run,
    // a bad KDSL_MATH) fails its row with a GPU (exit 1), so it is reported here too. Otherwise
    // nothing is timed (exit 4).
    const DeviceTarget target = target_for("", nullptr);
    std::string first_error;
    int errors = 0;
    for (const SpecRequest& r : list.specs) {
      try {
        generate(lower_specialized(*list.fe, r.sig->name, r.spec), r.spec, target, hint);
      } catch (const ScheduleHintError&) {
        throw;
      } catch (const Error& e) {
        if (errors++ == 0) first_error = e.what();
      }
    }
    if (errors) {
      throw ArgumentError(fmt::format("{} of {} specialization{} cannot be compiled; the first: {}",
                                      errors, list.specs.size(), list.specs.size() == 1 ? "" : "s",
                                      first_error));
    }
    throw NoGpuError(
        fmt::format("no GPU, so nothing was timed: kdsl bench needs one. Reason: {}", why));
  }
  primary_context(0);
  DeviceInfo dev = device_info(0);
  Timing copy_t;
  double copy_gbps = copy_bandwidth_gbps(nullptr, size_t{1} << 30, &copy_t);
  const std::string header = fmt::format("{:<20} {:<6} {:<22} {:>10} {:>8} {:>8}  {}", "kernel",
                                         "dtype", "shape", "us", "GB/s", "of copy", "schedule");
  if (!o.json) {
    std::cout << fmt::format(
                     "{}: copy bandwidth {:.0f} GB/s (1 GiB device-to-device); median of "
                     "{} after at least {} warm-up and {} ms, L2 {}\n",
                     dev.name, copy_gbps, counted(o.reps, "run", "runs"), o.warmup, o.warmup_ms,
                     o.no_flush ? "not flushed" : "flushed before each run")
              << header << "\n"
              << std::flush;
  }
  nlohmann::json results = nlohmann::json::array();
  int failed = 0, hint_errors = 0;
  for (const SpecRequest& r : list.specs) {
    Row row;
    try {
      row = bench_one(list, r, o, hint);
    } catch (const NoGpuError&) {
      throw;
    } catch (const Error& e) {
      const bool hint_error = dynamic_cast<const ScheduleHintError*>(&e) != nullptr;
      row.kernel = r.sig->name;
      row.dtype = binding_text(*r.sig, r.spec.binding);
      row.shape = shape_values_text(r.shape);
      row.error = (hint_error ? "--schedule: " : "") + std::string(e.what());
      ++failed;
      hint_errors += hint_error;
    }
    nlohmann::json j = {{"kernel", row.kernel}, {"dtype", row.dtype}, {"shape", r.shape}};
    if (row.error.empty()) {
      double ratio = row.gbps / copy_gbps;
      if (!o.json) {
        std::cout << fmt::format("{:<20} {:<6} {:<22} {:>10.2f} {:>8.0f} {:>8.3f}  {}\n",
                                 row.kernel, row.dtype, row.shape, row.t.median_us, row.gbps, ratio,
                                 row.schedule)
                  << std::flush;
      }
      j.update({{"symbol", row.symbol},
                {"schedule", row.schedule},
                {"median_us", row.t.median_us},
                {"min_us", row.t.min_us},
                {"max_us", row.t.max_us},
                {"warmup", row.t.warmup},
                {"bytes", row.bytes},
                {"GBps", row.gbps},
                {"ratio_to_copy", ratio}});
    } else {
      if (!o.json) {
        std::cout << fmt::format("{:<20} {:<6} {:<22} {:>10}\n", row.kernel, row.dtype, row.shape,
                                 "FAILED");
        std::cerr << "kdsl: error: " << terminal_safe(row.error) << "\n";
      }
      j["error"] = row.error;
    }
    results.push_back(std::move(j));
  }
  if (o.json) {
    nlohmann::json report = {{"device", dev.name},       {"copy_GBps", copy_gbps},
                             {"reps", o.reps},           {"warmup", o.warmup},
                             {"warmup_ms", o.warmup_ms}, {"l2_flushed", !o.no_flush},
                             {"results", results}};
    std::cout << json_text(report) << "\n";
  }
  // A hint that cannot apply to a specialization is the command line's fault: exit code 2.
  return hint_errors ? kUsage : failed ? kUserError : kOk;
}

}  // namespace

Command register_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand(
      "bench", "Time kernels on the GPU against the copy bandwidth (several dtypes and shapes)");
  add_spec_list_options(*sub, o->specs);
  sub->add_option("--warmup", o->warmup, "Untimed runs before timing, at least (default 10)")
      ->check(CLI::Range(0, 100000));
  add_warmup_ms_option(*sub, o->warmup_ms, "");
  sub->add_option("--reps", o->reps, "Timed runs; the median is reported (default 50)")
      ->check(CLI::Range(1, 100000));
  sub->add_flag("--no-flush", o->no_flush, "Do not flush L2 between timed runs");
  add_seed_option(*sub, o->seed);
  sub->add_flag("--json", o->json, "Print a JSON report instead of the table");
  sub->footer(
      "Every combination of kernel, dtype and shape (each shape symbol needs values) is timed "
      "with CUDA events, L2 flushed before each run, on random inputs. GB/s counts each input "
      "read once and each output written once (InOut: both); 'of copy' divides it by the "
      "bandwidth of a 1 GiB device-to-device copy measured in the same run.\n"
      "Exit code 4 without a GPU.\n"
      "Example: kdsl bench stdlib/rms_norm.kdsl -k rms_norm --dtype f32,bf16 --shape "
      "M=4096,N=1024,4096,8192");
  return {sub, [o]() { return bench(*o); }};
}

}  // namespace kdsl::cli

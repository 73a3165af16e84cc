// kdsl run: make or read inputs, run a kernel on the GPU (or the CPU reference), verify, time.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>

#include "cli.h"
#include "inputs.h"
#include "src/driver.h"
#include "src/gpu_bench.h"
#include "src/harness.h"
#include "src/log.h"
#include "src/npy.h"
#include "src/runtime_impl.h"
#include "src/text_util.h"
#include "src/verify.h"

namespace kdsl::cli {
namespace {

struct RunOptions {
  KernelOptions k;
  DataOptions data;
  std::vector<std::string> out;
  bool verify = false, bench = false, json = false;
  std::string device = "gpu";
  int warmup = 10, reps = 50;
  double warmup_ms = kMinWarmupMs;
  bool no_flush = false;
};

// Compares each output with the reference; prints one line per output. Returns whether all match.
bool verify_outputs(const Problem& p, const std::vector<HostTensor>& reference, bool print,
                    nlohmann::json& report) {
  bool all_ok = true;
  nlohmann::json checks = nlohmann::json::array();
  for (size_t t = 0; t < p.tensors.size(); ++t) {
    const ir::TensorParam& tp = p.ir.tensors[t];
    if (tp.role == ir::Role::in) continue;
    // Scans and column sums: the error of a running sum follows its partial sums.
    const Tolerance tol = output_tolerance(p, t, reference[t]);
    Comparison c = compare(p.tensors[t], reference[t], tol);
    std::string line = fmt::format(
        "verify {}: {} ({}, max abs error {:.3g}, tolerance rtol {:g} atol {:g} against the CPU "
        "float64 reference)",
        tp.name, c.ok ? "ok" : "FAILED", counted(c.checked, "value", "values"), c.max_abs_error,
        tol.rtol, tol.atol);
    const std::string note = overflow_note(tp.dtype, c);
    if (!c.ok) {
      line += fmt::format("; {}, worst at {}", counted(c.mismatches, "mismatch", "mismatches"),
                          describe_worst(p.tensors[t], c));
      if (!note.empty()) line += "; " + note;
    }
    if (print) std::cout << line << "\n";
    nlohmann::json j = {{"output", tp.name},
                        {"ok", c.ok},
                        {"checked", c.checked},
                        {"mismatches", c.mismatches},
                        {"max_abs_error", c.max_abs_error},
                        {"rtol", tol.rtol},
                        {"atol", tol.atol}};
    if (!c.ok) {
      j["worst"] = {{"flat_index", c.worst},
                    {"where", describe_worst(p.tensors[t], c)},
                    {"got", c.got},
                    {"expected", c.expected},
                    {"tolerance", c.bound}};
      if (!note.empty()) j["note"] = note;
    }
    checks.push_back(std::move(j));
    all_ok &= c.ok;
  }
  report["verify"] = checks;
  return all_ok;
}

void finish_outputs(const RunOptions& o, const Problem& p,
                    const std::vector<std::pair<int, std::string>>& files, nlohmann::json& report) {
  nlohmann::json outputs = nlohmann::json::object();
  for (size_t t = 0; t < p.tensors.size(); ++t) {
    const ir::TensorParam& tp = p.ir.tensors[t];
    if (tp.role == ir::Role::in) continue;
    nlohmann::json s = summarize(p.tensors[t]);
    for (const auto& [index, path] : files) {
      if (index == static_cast<int>(t)) {
        write_npy(path, p.tensors[t]);
        s["file"] = path;
      }
    }
    if (!o.json) {
      std::cout << summary_line(tp.name, s)
                << (s.contains("file") ? " -> " + s["file"].get<std::string>() : "") << "\n";
    }
    outputs[tp.name] = std::move(s);
  }
  report["outputs"] = outputs;
}

int run(const RunOptions& o) {
  if (o.device == "cpu" && (o.verify || o.bench)) {
    throw UsageError(
        fmt::format("{} needs the GPU: with --device cpu the CPU reference is all "
                    "that runs",
                    o.verify ? "--verify" : "--bench"));
  }
  // A malformed --arch is a usage error whatever runs (found by a new-user test: with --device
  // cpu it was accepted silently), before the kernel and its shapes are looked at.
  if (!o.k.arch.empty()) target_for(o.k.arch, nullptr);
  nlohmann::json report;
  report["file"] = o.k.file;
  nlohmann::json inputs = nlohmann::json::object();
  Problem p = build_problem(o.k, o.data, inputs);
  auto files = resolve_outputs(p, o.out, o.data.in);
  report["kernel"] = p.ir.name;
  report["dtype"] = binding_text(*p.sig, p.spec.binding);
  std::map<std::string, int64_t> shape;
  for (size_t s = 0; s < p.ir.symbols.size(); ++s) shape[p.ir.symbols[s].name] = p.symbols[s];
  report["shape"] = shape;
  report["inputs"] = inputs;

  if (o.device == "cpu") {
    if (!p.schedule.empty()) {  // checked after the hint's text, so a malformed one says why
      throw UsageError(
          "--schedule chooses how the GPU code runs: with --device cpu the CPU reference "
          "interpreter runs, and it has no schedule");
    }
    auto t0 = std::chrono::steady_clock::now();
    p.tensors = run_reference(p);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    report["device"] = "cpu";
    if (!o.json) {
      std::cout << fmt::format(
          "{} ({}, {}): ran on the CPU reference interpreter (float64) in "
          "{:.1f} ms\n",
          p.ir.name, report["dtype"].get<std::string>(), shape_values_text(shape), ms);
    }
    finish_outputs(o, p, files, report);
    if (o.json) std::cout << json_text(report) << "\n";
    return kOk;
  }

  std::string why;
  if (!have_gpu(&why)) {
    std::string note;
    DeviceTarget target = target_for(o.k.arch, &note);
    CompiledKernel ck = compile_kernel(*p.fe, p.ir.name, p.spec, target, nullptr, p.schedule);
    throw NoGpuError(fmt::format(
        "no GPU, so nothing ran: compiled {} for {} ({}); --device cpu "
        "runs the CPU reference. Reason: {}",
        ck.gen.plan.symbol, target.arch, ck.binary.hit ? "disk cache hit" : "NVRTC", why));
  }
  if (!o.k.arch.empty())
    log().warn("--arch is ignored by kdsl run on a GPU: it compiles for the GPU");
  primary_context(0);
  DeviceInfo dev = device_info(0);
  log().info("GPU 0: {} ({}, {} SMs)", dev.name, dev.arch, dev.sm_count);
  report["device"] = dev.name;
  std::vector<HostTensor> before = p.tensors;  // InOut contents on entry, for the reference
  GpuRun gpu(p);
  const detail::LoadedSpec& ls = gpu.loaded();
  if (!o.json) {
    std::cout << fmt::format("{} on {}: schedule {}{}, {} ({:.1f} ms)\n", ls.plan.symbol, dev.name,
                             ls.plan.schedule,
                             ls.tuned.empty() ? "" : fmt::format(" (tuned: {})", ls.tuned),
                             ls.cache_hit ? "disk cache hit" : "compiled by NVRTC",
                             ls.cache_hit ? ls.load_ms : ls.compile_ms);
  }
  report["symbol"] = ls.plan.symbol;
  report["schedule"] = ls.plan.schedule;
  report["tuned"] = ls.tuned;
  report["cache_hit"] = ls.cache_hit;
  gpu.launch();
  gpu.download(p.tensors);
  int code = kOk;
  if (o.verify) {
    Problem ref_problem = p;
    ref_problem.tensors = before;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<HostTensor> reference = run_reference(ref_problem);
    log().info(
        "CPU reference: {:.1f} ms",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!verify_outputs(p, reference, !o.json, report)) code = kVerifyFailed;
  }
  if (o.bench) {
    Timing copy_t;
    double copy_gbps = copy_bandwidth_gbps(nullptr, size_t{1} << 30, &copy_t);
    Timing t = time_cuda(
        nullptr, [&] { gpu.launch(); }, o.warmup, o.reps, !o.no_flush, o.warmup_ms);
    uint64_t bytes = minimal_bytes(p);
    double gbps = static_cast<double>(bytes) / (t.median_us * 1e3);
    if (!o.json) {
      std::cout << fmt::format(
          "bench: {:.2f} us median ({} after {} warm-up, L2 {}; min {:.2f}, max {:.2f}), "
          "{:.0f} GB/s over {} bytes, {:.3f} of the same-run copy bandwidth ({:.0f} GB/s, 1 GiB "
          "device-to-device)\n",
          t.median_us, counted(t.reps, "run", "runs"), t.warmup,
          o.no_flush ? "not flushed" : "flushed", t.min_us, t.max_us, gbps, bytes, gbps / copy_gbps,
          copy_gbps);
    }
    report["bench"] = {{"median_us", t.median_us},
                       {"min_us", t.min_us},
                       {"max_us", t.max_us},
                       {"reps", t.reps},
                       {"warmup", t.warmup},
                       {"warmup_ms", o.warmup_ms},
                       {"l2_flushed", !o.no_flush},
                       {"bytes", bytes},
                       {"GBps", gbps},
                       {"copy_GBps", copy_gbps},
                       {"ratio_to_copy", gbps / copy_gbps}};
  }
  finish_outputs(o, p, files, report);
  if (o.json) std::cout << json_text(report) << "\n";
  return code;
}

}  // namespace

Command register_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub =
      app.add_subcommand("run", "Run a kernel on the GPU (or the CPU reference); verify, time");
  add_kernel_options(*sub, o->k);
  add_list_option(*sub, "--in", o->data.in,
                  "Input NAME from a .npy file (--in x=x.npy) or a constant (--in w=const:1.5); "
                  "inputs not given are random (repeatable)");
  sub->add_flag("--convert", o->data.convert,
                "Round .npy inputs of another dtype (e.g. f32 for a bf16 tensor) to the "
                "parameter's dtype instead of refusing them");
  add_list_option(*sub, "--out", o->out,
                  "Write output NAME to a .npy file: --out y=y.npy (repeatable)");
  add_list_option(*sub, "--arg", o->data.args, "Scalar parameter: --arg eps=1e-5 (repeatable)");
  add_seed_option(*sub, o->data.seed);
  sub->add_option("--device", o->device, "gpu (default) or cpu (the reference interpreter)")
      ->check(CLI::IsMember({"gpu", "cpu"}));
  sub->add_flag("--verify", o->verify,
                "Compare every output with the CPU float64 reference (exit code 3 on a mismatch; "
                "needs the GPU)");
  CLI::Option* bench = sub->add_flag("--bench", o->bench,
                                     "Time the kernel (CUDA events, L2 flushed) against a copy");
  // The timing options apply to --bench only: alone they would be ignored without a word.
  sub->add_option("--warmup", o->warmup,
                  "Untimed runs before timing, at least (--bench; default 10)")
      ->check(CLI::Range(0, 100000))
      ->needs(bench);
  add_warmup_ms_option(*sub, o->warmup_ms, " (--bench)")->needs(bench);
  sub->add_option("--reps", o->reps, "Timed runs; the median is reported (--bench; default 50)")
      ->check(CLI::Range(1, 100000))
      ->needs(bench);
  sub->add_flag("--no-flush", o->no_flush, "Do not flush L2 between timed runs (--bench)")
      ->needs(bench);
  sub->add_flag("--json", o->json, "Print a JSON report instead of text");
  sub->footer(
      "Random inputs: floats standard normal, integers uniform in [-100, 100], bool a fair coin, "
      "seeded by --seed and the tensor's position. Shape symbols not in --shape come from the "
      ".npy files. Each output is summarized (min, max, mean, NaN count); docs/cli.md has the "
      "formats and tolerances.\n"
      "Exit codes: 0 ok, 1 user error, 2 usage, 3 verification failed, 4 no GPU.\n"
      "Examples:\n"
      "  kdsl run stdlib/rms_norm.kdsl -k rms_norm --dtype bf16 --shape M=1024,N=8192 --verify "
      "--bench\n"
      "  kdsl run stdlib/rms_norm.kdsl -k rms_norm --dtype f32 --in x=x.npy --in w=const:1 "
      "--out y=y.npy --device cpu");
  return {sub, [o]() { return run(*o); }};
}

}  // namespace kdsl::cli

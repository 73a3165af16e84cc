// kdsl run: make or read inputs, run a kernel on the GPU (or the CPU reference), verify, time.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

#include "cli.h"
#include "src/driver.h"
#include "src/gpu_bench.h"
#include "src/interp.h"
#include "src/npy.h"
#include "src/harness.h"
#include "src/runtime_impl.h"
#include "src/verify.h"

namespace kdsl::cli {
namespace {

struct RunOptions {
  KernelOptions k;
  bool verify = false, bench = false, json = false;
  std::vector<std::string> in, out, args;
  uint64_t seed = 0;
  std::string device = "gpu";
  int warmup = 10, reps = 50;
  bool no_flush = false;
};

std::pair<std::string, std::string> split_assign(const std::string& s, const char* option) {
  size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) {
    throw UsageError(fmt::format("bad {} '{}': expected NAME=VALUE", option, s));
  }
  return {s.substr(0, eq), s.substr(eq + 1)};
}

const SignatureParam* tensor_param(const KernelSignature& sig, const std::string& name) {
  for (const SignatureParam& p : sig.params) {
    if (p.is_tensor && p.name == name) return &p;
  }
  return nullptr;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// --in files give inputs and, for symbols --shape leaves out, their sizes.
void read_inputs(const RunOptions& o, const KernelSignature& sig, const std::vector<DType>& binding,
                 ProblemSpec& ps) {
  for (const std::string& item : o.in) {
    auto [name, path] = split_assign(item, "--in");
    const SignatureParam* tp = tensor_param(sig, name);
    if (!tp) throw ArgumentError(fmt::format("--in {}: kernel '{}' has no tensor parameter '{}'", item, sig.name, name));
    if (tp->role == ir::Role::out) throw ArgumentError(fmt::format("--in {}: '{}' is an output", item, name));
    DType want = tp->generic >= 0 ? binding[tp->generic] : tp->dtype;
    HostTensor h = read_npy(path, want);
    if (h.dtype != want) {
      throw ArgumentError(fmt::format("{}: has dtype {} but '{}' is {}", path, dtype_name(h.dtype), name, dtype_name(want)));
    }
    if (h.shape.size() != tp->shape.size()) {
      throw ArgumentError(fmt::format("{}: has shape {} but '{}' has {} axes", path, shape_text(h.shape), name, tp->shape.size()));
    }
    for (size_t ax = 0; ax < tp->shape.size(); ++ax) {
      const ir::Extent& e = tp->shape[ax];
      if (e.symbol < 0) {
        if (h.shape[ax] != e.constant) throw ArgumentError(fmt::format("{}: axis {} must have size {}", path, ax, e.constant));
        continue;
      }
      const std::string& sym = sig.symbols[e.symbol].name;
      auto it = ps.shapes.find(sym);
      if (it == ps.shapes.end()) {
        ps.shapes[sym] = h.shape[ax];
      } else if (it->second != h.shape[ax]) {
        throw ArgumentError(fmt::format("{}: has shape {} but {} = {}", path, shape_text(h.shape), sym, it->second));
      }
    }
    ps.inputs[name] = std::move(h);
  }
}

Problem build_problem(const RunOptions& o) {
  Selected sel = select_kernel(o.k);
  const KernelSignature& sig = *sel.sig;
  ProblemSpec ps;
  ps.kernel = sig.name;
  ps.seed = o.seed;
  ps.binding = resolve_binding(sig, o.k);
  ps.schedule = ScheduleHint::parse(o.k.schedule);
  ps.shapes = parse_shape(o.k.shape);
  for (const auto& entry : ps.shapes) {
    const std::string& name = entry.first;  // a lambda uses it (clang 14: no captured bindings)
    bool known = std::any_of(sig.symbols.begin(), sig.symbols.end(), [&](const ir::Symbol& s) { return s.name == name; });
    if (!known) throw UsageError(fmt::format("kernel '{}' has no shape symbol {}", sig.name, name));
  }
  read_inputs(o, sig, ps.binding, ps);
  for (const ir::Symbol& s : sig.symbols) {
    if (!ps.shapes.count(s.name)) {
      throw UsageError(fmt::format("shape symbol {} is not set: add --shape {}=SIZE (or an --in file "
                                   "that has it)",
                                   s.name, s.name));
    }
  }
  for (const std::string& a : o.args) {
    auto [name, value] = split_assign(a, "--arg");
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != value.size()) throw UsageError(fmt::format("--arg {}: '{}' is not a number", a, value));
    ps.scalars[name] = v;
  }
  return make_problem(sel.fe, ps);
}

int param_tensor(const ir::Kernel& k, const std::string& name) {
  for (size_t t = 0; t < k.tensors.size(); ++t) {
    if (k.tensors[t].name == name) return static_cast<int>(t);
  }
  return -1;
}

void write_outputs(const RunOptions& o, const Problem& p) {
  for (const std::string& item : o.out) {
    auto [name, path] = split_assign(item, "--out");
    int t = param_tensor(p.ir, name);
    if (t < 0 || p.ir.tensors[t].role == ir::Role::in) {
      throw ArgumentError(fmt::format("--out {}: kernel '{}' has no output '{}'", item, p.ir.name, name));
    }
    write_npy(path, p.tensors[t]);
  }
}

int run(const RunOptions& o) {
  Problem p = build_problem(o);
  nlohmann::json report;
  report["kernel"] = p.ir.name;
  report["file"] = o.k.file;
  std::vector<HostTensor> reference;
  if (o.device == "cpu") {
    p.tensors = run_reference(p);
    write_outputs(o, p);
    std::cout << fmt::format("{}: ran on the CPU reference interpreter (float64)\n", p.ir.name);
    if (o.json) std::cout << report.dump(2) << "\n";
    return kOk;
  }
  std::string why;
  if (!driver_or_null(&why) || device_count() == 0) {
    std::string note;
    DeviceTarget target = target_for(o.k.arch, &note);
    CompiledKernel ck = compile_kernel(*p.fe, p.ir.name, p.spec, target, nullptr, p.schedule);
    reference = run_reference(p);
    std::cerr << fmt::format("kdsl: no GPU: {}\n", why.empty() ? "no CUDA device" : why);
    std::cerr << fmt::format("kdsl: compiled {} for {} ({}) and ran the CPU reference instead; "
                             "nothing ran on a GPU{}\n",
                             ck.gen.plan.symbol, target.arch, ck.binary.hit ? "disk cache hit" : "NVRTC",
                             o.verify ? ", so there is nothing to verify" : "");
    p.tensors = reference;
    write_outputs(o, p);
    return kNoGpu;
  }
  primary_context(0);
  DeviceInfo dev = device_info(0);
  report["device"] = dev.name;
  std::vector<HostTensor> before = p.tensors;  // InOut contents on entry, for the reference
  GpuRun gpu(p);
  const detail::LoadedSpec& ls = gpu.loaded();
  std::cout << fmt::format("{} on {}: schedule {}, {} ({:.1f} ms)\n", ls.plan.symbol, dev.name,
                           ls.plan.schedule, ls.cache_hit ? "disk cache hit" : "compiled by NVRTC",
                           ls.cache_hit ? ls.load_ms : ls.compile_ms);
  report["symbol"] = ls.plan.symbol;
  report["schedule"] = ls.plan.schedule;
  gpu.launch();
  gpu.download(p.tensors);
  int code = kOk;
  if (o.verify) {
    Problem ref_problem = p;
    ref_problem.tensors = before;
    reference = run_reference(ref_problem);
    nlohmann::json checks = nlohmann::json::array();
    for (size_t t = 0; t < p.tensors.size(); ++t) {
      const ir::TensorParam& tp = p.ir.tensors[t];
      if (tp.role == ir::Role::in) continue;
      Tolerance tol = tolerance_for(tp.dtype);
      Comparison c = compare(p.tensors[t], reference[t], tol);
      std::string line = fmt::format("verify {}: {} ({} values, max abs error {:.3g}, tolerance rtol {:g} "
                                     "atol {:g}, CPU float64 reference)",
                                     tp.name, c.ok ? "ok" : "FAILED", c.checked, c.max_abs_error, tol.rtol, tol.atol);
      if (!c.ok) line += fmt::format("; {} mismatches, worst at {}", c.mismatches, describe_worst(p.tensors[t], c));
      std::cout << line << "\n";
      checks.push_back({{"output", tp.name}, {"ok", c.ok}, {"max_abs_error", c.max_abs_error},
                        {"mismatches", c.mismatches}, {"rtol", tol.rtol}, {"atol", tol.atol}});
      if (!c.ok) code = kVerifyFailed;
    }
    report["verify"] = checks;
  }
  if (o.bench) {
    Timing copy_t;
    double copy_gbps = copy_bandwidth_gbps(nullptr, size_t{1} << 30, &copy_t);
    Timing t = time_cuda(nullptr, [&] { gpu.launch(); }, o.warmup, o.reps, !o.no_flush);
    uint64_t bytes = minimal_bytes(p);
    double gbps = static_cast<double>(bytes) / (t.median_us * 1e3);
    std::cout << fmt::format("bench: {:.2f} us median ({} runs after {} warm-up, L2 flushed; min {:.2f}, max "
                             "{:.2f}), {:.0f} GB/s over {} bytes, {:.3f} of the same-run copy bandwidth "
                             "({:.0f} GB/s, 1 GiB device-to-device)\n",
                             t.median_us, t.reps, o.warmup, t.min_us, t.max_us, gbps, bytes, gbps / copy_gbps,
                             copy_gbps);
    report["bench"] = {{"median_us", t.median_us}, {"min_us", t.min_us}, {"max_us", t.max_us},
                       {"reps", t.reps}, {"bytes", bytes}, {"GBps", gbps}, {"copy_GBps", copy_gbps},
                       {"ratio_to_copy", gbps / copy_gbps}};
  }
  write_outputs(o, p);
  if (o.json) std::cout << report.dump(2) << "\n";
  return code;
}

}  // namespace

Command register_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run", "Run a kernel on the GPU (or the CPU reference), verify, time");
  add_kernel_options(*sub, o->k, true);
  sub->add_flag("--verify", o->verify, "Compare every output with the CPU float64 reference");
  sub->add_flag("--bench", o->bench, "Time the kernel (CUDA events, L2 flushed) against a copy");
  sub->add_flag("--json", o->json, "Print a JSON report");
  sub->add_option("--in", o->in, "Read input NAME from a .npy file: --in x=x.npy (repeatable)");
  sub->add_option("--out", o->out, "Write output NAME to a .npy file: --out y=y.npy (repeatable)");
  sub->add_option("--arg", o->args, "Scalar parameter: --arg eps=1e-5 (repeatable)");
  sub->add_option("--seed", o->seed, "Seed of the random inputs (standard normal floats)");
  sub->add_option("--device", o->device, "gpu (default) or cpu (the reference interpreter)")
      ->check(CLI::IsMember({"gpu", "cpu"}));
  sub->add_option("--warmup", o->warmup, "Untimed runs before timing (--bench)");
  sub->add_option("--reps", o->reps, "Timed runs; the median is reported (--bench)");
  sub->add_flag("--no-flush", o->no_flush, "Do not flush L2 between timed runs (--bench)");
  sub->footer("Example: kdsl run stdlib/rms_norm.kdsl -k rms_norm --dtype bf16 --shape M=1024,N=8192 "
              "--verify --bench");
  return {sub, [o]() { return run(*o); }};
}

}  // namespace kdsl::cli

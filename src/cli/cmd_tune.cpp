// kdsl tune: time the candidate schedules of one specialization on this GPU and record the winner.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <thread>

#include "cli.h"
#include "src/compiler.h"
#include "src/driver.h"
#include "src/harness.h"
#include "src/text_util.h"
#include "src/tuning.h"
#include "src/verify.h"

namespace kdsl::cli {
namespace {

struct TuneOptions {
  KernelOptions k;
  int warmup = 5, reps = 30;
  double warmup_ms = kMinWarmupMs;
  bool json = false, dry_run = false, list = false;
};

// True when every output of `got` matches `want` within output_tolerance (scans and column
// sums: scan_tolerance, since schedules group a running sum's additions differently).
bool same_results(const Problem& p, const std::vector<HostTensor>& got,
                  const std::vector<HostTensor>& want, std::string* why) {
  for (size_t t = 0; t < got.size(); ++t) {
    const ir::TensorParam& tp = p.ir.tensors[t];
    if (tp.role == ir::Role::in) continue;
    Comparison c = compare(got[t], want[t], output_tolerance(p, t, want[t]));
    if (!c.ok) {
      *why = fmt::format("output {}: {}", tp.name, describe_worst(got[t], c));
      return false;
    }
  }
  return true;
}

// Compiles candidates [1, n) into the disk cache on one thread per core, so that the timing loop
// (one candidate at a time, on the GPU) finds each cubin there instead of waiting on NVRTC in
// turn: for a scan kernel's 27 layouts this is most of kdsl tune's time. A candidate that fails
// to compile is left to the loop, which reports it.
void precompile(const Problem& p, const Specialization& spec, const DeviceTarget& target,
                const std::vector<ScheduleHint>& candidates) {
  if (candidates.size() < 2) return;
  parallel_for(candidates.size() - 1, std::max(1u, std::thread::hardware_concurrency()),
               [&](size_t i) {
                 try {
                   compile_kernel(*p.fe, p.sig->name, spec, target, nullptr, candidates[i + 1]);
                 } catch (const std::exception&) {  // reported when the loop reaches it
                 }
               });
}

// --list: the candidates tune would time, each with the schedule it generates, for the GPU in
// use or --arch; nothing is compiled or run, so no GPU is needed.
int list_candidates(const TuneOptions& o, const Selected& sel, const std::string& shape_text) {
  const Specialization spec = spec_from(*sel.sig, o.k, /*need_vector=*/true);
  const ir::Kernel k = lower_specialized(*sel.fe, sel.sig->name, spec);
  std::string note;
  const DeviceTarget target = target_for(o.k.arch, &note);
  // Nothing is compiled here: the note names what is done for that architecture.
  if (const size_t at = note.find("compiling for"); at != std::string::npos) {
    note.replace(at, 9, "listing");
  }
  print_note(note);
  const std::vector<ScheduleHint> candidates = tuning_candidates(k, spec, target);
  nlohmann::json rows = nlohmann::json::array();
  if (!o.json) {
    std::cout << fmt::format(
        "{} at {} for {}: {}\n", k.name, shape_text, target.arch,
        counted(static_cast<int64_t>(candidates.size()), "candidate", "candidates"));
  }
  for (const ScheduleHint& h : candidates) {
    const GeneratedKernel gen = generate(k, spec, target, h);
    const std::string label = h.empty() ? "default" : h.str();
    // The line of --explain that gives the layout: rows "N = ...: ... -> rows.cta (...)",
    // scans "scan.columns: ...", rows without a vector axis "no vector axis: ... ->
    // rows.subwarp (...)" (their lines were empty).
    std::string summary;
    for (const std::string& r : gen.plan.reasons) {
      if (r.rfind("N = ", 0) == 0 || r.rfind(gen.plan.schedule + ":", 0) == 0 ||
          r.find("-> " + gen.plan.schedule + " (") != std::string::npos) {
        summary = r;
        break;
      }
    }
    if (!o.json) std::cout << fmt::format("  {:<44} {}\n", label, summary);
    rows.push_back({{"hint", h.str()}, {"schedule", gen.plan.schedule}, {"summary", summary}});
  }
  if (o.json) {
    std::cout << json_text({{"kernel", k.name},
                            {"shape", shape_text},
                            {"arch", target.arch},
                            {"candidates", rows}})
              << "\n";
  }
  return kOk;
}

int tune(const TuneOptions& o) {
  Selected sel = select_kernel(o.k.file, o.k.kernel);
  ProblemSpec ps;
  ps.kernel = sel.sig->name;
  ps.binding = single_binding(*sel.sig, o.k);
  ps.shapes = single_shape(*sel.sig, o.k);
  require_shapes(*sel.sig, ps.shapes, /*from_inputs=*/false);
  std::string shape_text = shape_values_text(ps.shapes);
  ps.use_tuning_db = false;
  if (o.list) return list_candidates(o, sel, shape_text);
  if (!o.k.arch.empty()) {
    throw UsageError(
        fmt::format("--arch {}: only with --list (kdsl tune times the candidates on "
                    "this GPU, for its architecture)",
                    o.k.arch));
  }
  Problem p = make_problem(sel.fe, ps);
  std::string why;
  if (!driver_or_null(&why) || device_count() == 0) {
    // A specialization that cannot be generated (a row beyond the row schedule, a scan the GPU
    // schedule cannot run, a bad KDSL_MATH) is its own error (exit 1), as with a GPU.
    generate(p.ir, p.spec, target_for("", nullptr), ScheduleHint{});
    throw NoGpuError(fmt::format("no GPU, so nothing was timed: kdsl tune needs one. Reason: {}",
                                 why.empty() ? "no CUDA device" : why));
  }
  primary_context(0);
  const DeviceTarget& target = detail::context_target(detail::current_context());
  std::vector<ScheduleHint> candidates = tuning_candidates(p.ir, p.spec, target);
  std::vector<HostTensor> reference;
  double best_us = 0, default_us = 0;
  std::string best_hint;
  nlohmann::json rows = nlohmann::json::array();
  auto say = [&](const std::string& line) {  // the text report; --json prints only the JSON
    if (!o.json) std::cout << line;
  };
  say(fmt::format("tuning {} on {} at {} ({})\n", p.ir.name, target.name, shape_text,
                  counted(static_cast<int64_t>(candidates.size()), "candidate", "candidates")));
  std::string key;  // what a launch with these arguments looks up (GpuRun::specialization)
  for (size_t i = 0; i < candidates.size(); ++i) {
    Problem pc = p;
    pc.schedule = candidates[i];
    GpuRun gpu(pc);
    if (i == 0) {
      key = tuning_key(p.ir.name, gpu.specialization());
      precompile(p, gpu.specialization(), target, candidates);
    }
    gpu.launch();
    std::vector<HostTensor> out = pc.tensors;
    gpu.download(out);
    std::string label = candidates[i].empty() ? "default" : candidates[i].str();
    if (i == 0) {
      reference = out;
    } else if (std::string diff; !same_results(p, out, reference, &diff)) {
      say(fmt::format("  {:<44} skipped: results differ from the default ({})\n", label, diff));
      continue;
    }
    Timing t = time_cuda(
        nullptr, [&] { gpu.launch(); }, o.warmup, o.reps, true, o.warmup_ms);
    say(fmt::format("  {:<44} {:9.2f} us  ({})\n", label, t.median_us, gpu.loaded().plan.schedule));
    rows.push_back(
        {{"hint", candidates[i].str()}, {"us", t.median_us}, {"symbol", gpu.loaded().plan.symbol}});
    if (i == 0) default_us = t.median_us;
    if (i == 0 || t.median_us < best_us) {
      best_us = t.median_us;
      best_hint = candidates[i].str();
    }
  }
  say(fmt::format("best: {} ({:.2f} us; default {:.2f} us, {:.1f}% faster)\n",
                  best_hint.empty() ? "default" : best_hint, best_us, default_us,
                  100.0 * (default_us - best_us) / default_us));
  std::string recorded;  // the database written, if any
  if (!o.dry_run) {
    TuningDb* db = TuningDb::default_db();
    if (!db) {
      std::cerr << "kdsl: the disk cache is off (KDSL_CACHE=off): nothing recorded\n";
    } else {
      db->record(target.name, key, {best_hint, best_us, default_us, shape_text, o.warmup_ms});
      recorded = db->path().string();
      say(fmt::format("recorded in {}; launches of this specialization on {} use it\n",
                      db->path().string(), target.name));
    }
  }
  if (o.json) {
    std::cout << json_text({{"key", key},
                            {"gpu", target.name},
                            {"shape", shape_text},
                            {"best", best_hint},
                            {"recorded", recorded},
                            {"best_us", best_us},
                            {"default_us", default_us},
                            {"candidates", rows}})
              << "\n";
  }
  return kOk;
}

}  // namespace

Command register_tune(CLI::App& app) {
  auto o = std::make_shared<TuneOptions>();
  CLI::App* sub = app.add_subcommand(
      "tune",
      "Time the candidate schedules of a specialization on this GPU and record the fastest");
  add_kernel_options(*sub, o->k, /*with_arch=*/false, /*with_schedule=*/false);
  CLI::Option* list = sub->add_flag(
      "--list", o->list,
      "Print the candidate schedules and exit: nothing is compiled or timed, no GPU needed");
  // The timing options do nothing with --list: given with it, they are usage errors.
  sub->add_option("--warmup", o->warmup, "Untimed runs per candidate, at least (default 5)")
      ->check(CLI::Range(0, 100000))
      ->excludes(list);
  add_warmup_ms_option(*sub, o->warmup_ms, ", per candidate")->excludes(list);
  sub->add_option("--reps", o->reps, "Timed runs per candidate; the median is kept (default 30)")
      ->check(CLI::Range(1, 100000))
      ->excludes(list);
  sub->add_flag("--json", o->json, "Print a JSON report");
  sub->add_flag("--dry-run", o->dry_run, "Do not record the winner")->excludes(list);
  sub->add_option("--arch", o->k.arch,
                  "With --list: the GPU architecture to list for, e.g. sm_90 (default: this "
                  "GPU's, else sm_90)")
      ->check(not_blank("empty architecture: expected one, e.g. sm_90"));
  sub->footer(
      "Example: kdsl tune stdlib/rms_norm.kdsl -k rms_norm --dtype bf16 --shape M=8192,N=8192\n"
      "The record (in the disk cache directory, tuning.json) is keyed by GPU name, kernel and\n"
      "specialization (dtypes, N, alignment); later launches of that specialization use it.");
  return {sub, [o]() { return tune(*o); }};
}

}  // namespace kdsl::cli

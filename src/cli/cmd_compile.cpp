// kdsl compile: fill the disk cache with a list of specializations, compiled by NVRTC in parallel.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "cli.h"
#include "dsl/diagnostics.h"
#include "src/cache.h"
#include "src/log.h"
#include "src/nvrtc.h"

namespace kdsl::cli {
namespace {

struct CompileOptions {
  SpecListOptions specs;
  std::string archs;  // --arch sm_90,sm_100
  int jobs = 0;
  bool json = false;
  bool no_progress = false;
  bool force_progress = false;
};

// One specialization for one architecture, and what became of it.
struct Job {
  const SpecRequest* req = nullptr;
  DeviceTarget target;
  enum Status { kPending, kCompiled, kHit, kFailed } status = kPending;
  std::string symbol;
  double ms = 0;  // NVRTC time (compiled) or cache time (hit)
  std::string error;
  bool hint_error = false;  // a --schedule hint that cannot apply (a usage error)
  std::string not_stored;   // compiled, but not put in the disk cache: why (CompiledEntry)
  std::string key_hex;      // the disk cache entry's key (compiled or hit)
};

// A one-line bar on stderr, redrawn as jobs finish: "[#####.....] 12/40 kdsl_...".
class ProgressBar {
 public:
  ProgressBar(size_t total, bool on) : total_(total), on_(on) {}
  void update(size_t done, const std::string& last) {
    if (!on_) return;
    const int width = 30;
    int filled = static_cast<int>(width * done / std::max<size_t>(total_, 1));
    std::string label = last.size() > 40 ? last.substr(0, 37) + "..." : last;
    std::cerr << fmt::format("\r[{}{}] {}/{} {:<40}", std::string(filled, '#'),
                             std::string(width - filled, '.'), done, total_, label)
              << std::flush;
  }
  // Clears the bar so a message can be printed on a clean line.
  void clear() {
    if (on_) std::cerr << "\r" << std::string(80, ' ') << "\r" << std::flush;
  }

 private:
  size_t total_;
  bool on_;
};

// `text` without the newlines at its end (a rendered diagnostic ends with one).
std::string trim_newlines(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

std::vector<std::string> split_archs(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& a : split_list(text)) {
    if (a.empty()) throw UsageError(fmt::format("--arch '{}': empty entry", text));
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  return out;
}

std::string job_line(const Job& j) {
  switch (j.status) {
    case Job::kCompiled:
      return fmt::format("{} ({}): compiled in {:.1f} ms{}", j.symbol, j.target.arch, j.ms,
                         j.not_stored.empty() ? "" : " (not stored)");
    case Job::kHit:
      return fmt::format("{} ({}): disk cache hit ({:.2f} ms)", j.symbol, j.target.arch, j.ms);
    default:
      return fmt::format("{} ({}): FAILED", j.symbol, j.target.arch);
  }
}

int compile(const CompileOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  // A malformed --arch is reported before the kernel and its shapes are looked at (found by a
  // new-user test: it was reported only once every shape symbol had a value).
  std::vector<DeviceTarget> targets;
  if (!o.archs.empty()) {
    for (const std::string& a : split_archs(o.archs)) targets.push_back(target_for(a, nullptr));
  }
  SpecList list = expand_specs(o.specs, /*all_symbols=*/false);
  ScheduleHint hint = parse_schedule(o.specs.schedule);
  if (targets.empty()) {
    std::string note;
    targets.push_back(target_for("", &note));
    print_note(note);
  }
  std::vector<Job> jobs;
  for (const SpecRequest& r : list.specs) {
    for (const DeviceTarget& t : targets) {
      Job j;
      j.req = &r;
      j.target = t;
      j.symbol = r.spec.symbol(r.sig->name, vector_axis_tensors(*r.sig));
      jobs.push_back(std::move(j));
    }
  }
  size_t threads =
      o.jobs > 0 ? static_cast<size_t>(o.jobs) : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, jobs.size());
  const bool bar_on = !o.no_progress && !o.json &&
                      (o.force_progress || (stderr_is_tty() && jobs.size() > 4)) &&
                      log().should_log(spdlog::level::warn);
  // With the bar on a terminal that is also stdout, only failures and the summary are printed.
  const bool lines = !o.json && !(bar_on && isatty(STDOUT_FILENO));
  log().info("compiling {} specialization{} on {} thread{} (NVRTC {})", jobs.size(),
             jobs.size() == 1 ? "" : "s", threads, threads == 1 ? "" : "s", nvrtc_version());
  ProgressBar bar(jobs.size(), bar_on);
  std::mutex mu;       // guards the jobs' results, `printed`, `done` and the terminal
  size_t printed = 0;  // jobs [0, printed) have had their line printed, in order
  size_t done = 0;
  auto finish = [&](size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    ++done;
    if (jobs[i].status == Job::kFailed && !lines) {
      bar.clear();
      std::cerr << fmt::format("{}{} ({}): {}\n", error_prefix(jobs[i].error), jobs[i].symbol,
                               jobs[i].target.arch, terminal_safe(trim_newlines(jobs[i].error)));
    }
    while (printed < jobs.size() && jobs[printed].status != Job::kPending) {
      const Job& j = jobs[printed++];
      if (!lines) continue;
      bar.clear();
      std::cout << job_line(j) << "\n" << std::flush;
      if (j.status == Job::kFailed) {
        std::cerr << error_prefix(j.error) << terminal_safe(trim_newlines(j.error)) << "\n";
      }
    }
    bar.update(done, jobs[i].symbol);
  };
  parallel_for(jobs.size(), threads, [&](size_t i) {
    Job& j = jobs[i];
    Job result = j;
    try {
      CompiledKernel ck =
          compile_kernel(*list.fe, j.req->sig->name, j.req->spec, j.target, nullptr, hint);
      result.symbol = ck.gen.plan.symbol;
      result.status = ck.binary.hit ? Job::kHit : Job::kCompiled;
      result.ms = ck.binary.hit ? ck.binary.load_ms : ck.binary.compile_ms;
      // With the cache off, not storing is what was asked for (the note below says so).
      if (default_disk_cache().config().enabled) result.not_stored = ck.binary.not_stored;
      result.key_hex = ck.binary.key_hex;
    } catch (const ScheduleHintError& e) {
      result.status = Job::kFailed;
      result.error = std::string("--schedule: ") + e.what();
      result.hint_error = true;
    } catch (const std::exception& e) {
      result.status = Job::kFailed;
      result.error = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      j = std::move(result);
    }
    finish(i);
  });
  bar.clear();
  // An entry stored or found, then evicted by a later store of the same command to stay within
  // KDSL_CACHE_MAX_SIZE, is not in the cache the command filled (found by a new-user test:
  // reported as stored). (One that another process removes, a clear, is that process's doing.)
  if (default_disk_cache().config().enabled) {
    for (Job& j : jobs) {
      if (j.status == Job::kFailed || !j.not_stored.empty() || j.key_hex.empty()) continue;
      if (!default_disk_cache().evicted(j.key_hex)) continue;
      std::error_code ec;
      if (std::filesystem::exists(default_disk_cache().entry_path(j.key_hex), ec) || ec) continue;
      j.not_stored = fmt::format(
          "evicted by a later compile of this command to stay within the cache's size limit ({} "
          "bytes, KDSL_CACHE_MAX_SIZE)",
          default_disk_cache().config().max_bytes);
    }
  }

  size_t compiled = 0, hits = 0, failed = 0, hint_errors = 0, not_stored = 0;
  std::string not_stored_why;  // the first one's reason
  double nvrtc_ms = 0;
  nlohmann::json results = nlohmann::json::array();
  const bool cache_on = default_disk_cache().config().enabled;
  for (const Job& j : jobs) {
    compiled += j.status == Job::kCompiled;
    hits += j.status == Job::kHit;
    failed += j.status == Job::kFailed;
    hint_errors += j.hint_error;
    if (!j.not_stored.empty() && not_stored++ == 0) not_stored_why = j.not_stored;
    if (j.status == Job::kCompiled) nvrtc_ms += j.ms;
    const char* status = j.status == Job::kCompiled ? "compiled"
                         : j.status == Job::kHit    ? "hit"
                                                    : "failed";
    nlohmann::json r = {{"kernel", j.req->sig->name},
                        {"dtype", binding_text(*j.req->sig, j.req->spec.binding)},
                        {"shape", j.req->shape},
                        {"arch", j.target.arch},
                        {"symbol", j.symbol},
                        {"status", status},
                        {"stored", cache_on && j.status != Job::kFailed && j.not_stored.empty()},
                        {"ms", j.ms}};
    if (j.status == Job::kFailed) r["error"] = j.error;
    results.push_back(std::move(r));
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.json) {
    nlohmann::json report = {
        {"results", results},   {"compiled", compiled},     {"hits", hits},
        {"failed", failed},     {"not_stored", not_stored}, {"seconds", seconds},
        {"nvrtc_ms", nvrtc_ms}, {"threads", threads},       {"nvrtc", nvrtc_version()}};
    std::cout << json_text(report) << "\n";
  } else {
    std::cout << fmt::format(
        "{} specialization{}: {} compiled, {} disk-cache hit{}, {} failed in "
        "{:.1f} s ({:.1f} s in NVRTC on {} thread{})\n",
        jobs.size(), jobs.size() == 1 ? "" : "s", compiled, hits, hits == 1 ? "" : "s", failed,
        seconds, nvrtc_ms / 1e3, threads, threads == 1 ? "" : "s");
  }
  if (!cache_on && compiled) {
    print_note("the disk cache is off (KDSL_CACHE): nothing was stored");
  }
  // Filling the cache is the command's job: a kernel compiled but not stored is an error.
  if (not_stored) {
    const std::string dir = default_disk_cache().config().dir.string();
    // (A hit evicted later counts too: it is not in the cache either.)
    std::cerr << (not_stored == compiled + hits
                      ? fmt::format("kdsl: error: nothing compiled was stored in the disk cache "
                                    "({}): {}\n",
                                    dir, not_stored_why)
                      : fmt::format("kdsl: error: {} of {} specializations are not in the disk "
                                    "cache ({}): {}\n",
                                    not_stored, compiled + hits, dir, not_stored_why));
  }
  // A hint that cannot apply to a specialization is the command line's fault: exit code 2.
  return hint_errors ? kUsage : failed || not_stored ? kUserError : kOk;
}

}  // namespace

Command register_compile(CLI::App& app) {
  auto o = std::make_shared<CompileOptions>();
  CLI::App* sub = app.add_subcommand(
      "compile", "Compile specializations into the disk cache (no GPU needed with --arch)");
  add_spec_list_options(*sub, o->specs);
  sub->add_option("--arch", o->archs,
                  "GPU architectures, comma-separated, e.g. sm_90 or sm_90,sm_100 (default: this "
                  "GPU's, else sm_90)")
      ->check(not_blank("empty architecture list: expected one or more, e.g. sm_90 or "
                        "sm_90,sm_100"));
  sub->add_option("-j,--jobs", o->jobs, "Parallel NVRTC compiles (default: one per CPU core)")
      ->check(CLI::Range(0, 4096));
  sub->add_flag("--json", o->json, "Print a JSON report instead of text");
  // Three flags, so that the contradictory pairs are usage errors naming both (CLI11 excludes
  // whole options: one --progress,!--no-progress flag would also refuse --progress
  // --force-progress).
  CLI::Option* on = sub->add_flag("--progress")->description("The progress bar as by default");
  CLI::Option* off = sub->add_flag("--no-progress", o->no_progress,
                                   "No progress bar (by default there is one on stderr when it is "
                                   "a terminal and more than 4 specializations are compiled)");
  sub->add_flag("--force-progress", o->force_progress, "Draw the progress bar even off a terminal")
      ->excludes(off);
  on->excludes(off);
  sub->footer(
      "Every combination of kernel (-k, default all), dtype (--dtype / -D, default every dtype "
      "the kernel allows), specialized shape value (--shape; other symbols are run-time values "
      "and ignored) and architecture (--arch) is compiled, for 16-byte aligned contiguous tensors, "
      "into the disk cache (KDSL_CACHE_DIR). One line per specialization, then a summary; "
      "failures print NVRTC's message and make the exit code 1 (2 for a --schedule hint that "
      "cannot apply), and so does a kernel compiled but not stored (an unusable cache directory, "
      "a full disk); with KDSL_CACHE=off kernels are compiled (checked) and nothing is stored.\n"
      "Examples:\n"
      "  kdsl compile stdlib/rms_norm.kdsl -k rms_norm --dtype bf16 --shape N=8192\n"
      "  kdsl compile stdlib/softmax.kdsl --dtype f32,f16,bf16 --shape N=1024,4096,8192 "
      "--arch sm_90");
  return {sub, [o]() { return compile(*o); }};
}

}  // namespace kdsl::cli

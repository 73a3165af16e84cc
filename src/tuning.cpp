#include "tuning.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cache.h"
#include "cache_file.h"
#include "codegen_expr.h"
#include "codegen_scan.h"
#include "compiler.h"
#include "gpu_bench.h"
#include "kdsl/error.h"
#include "log.h"
#include "schedule_scan.h"

namespace kdsl {

namespace {

// A scan kernel's candidates: the default's steps (t), lanes along the positions (lp) and, along
// a middle axis, rows per access (vr), each halved, kept and doubled (every key given, so each
// candidate is one layout), where the tile has a thread per row and an access is at most 16
// bytes. kdsl tune's runs of bench/RESULTS.md (tenth session) found layouts 5-17% faster than
// the default of then within this neighbourhood (e.g. bf16 linear_recurrence t=16,vr=2 against
// t=8,vr=4), which became the default; the neighbourhood of today's default is searched alike.
std::vector<ScheduleHint> scan_candidates(const ir::Kernel& k, const Specialization& spec,
                                          const DeviceTarget& target) {
  std::vector<ScheduleHint> out = {ScheduleHint{}};
  const ScanSchedule s0 = choose_scan_schedule(k, spec, target);
  int widest = 1;  // bytes of the widest element loaded or stored
  for (const ir::TensorParam& t : k.tensors)
    widest = std::max(widest, static_cast<int>(dtype_size(t.dtype)));
  auto same = [](const ScanSchedule& a, const ScanSchedule& b) {
    return a.t == b.t && a.lp == b.lp && a.lr == b.lr && a.wp == b.wp && a.wr == b.wr &&
           a.vr == b.vr && a.vp == b.vp;
  };
  std::vector<ScanSchedule> seen = {s0};
  for (int vr : {s0.vr, s0.vr / 2, s0.vr * 2}) {
    if (vr < 1 || vr > 16 || (!s0.columns && vr != 1) || vr * widest > 16) continue;
    for (int lp : {s0.lp, s0.lp / 2, s0.lp * 2}) {
      if (lp < 1 || lp > 32) continue;
      for (int t : {s0.t, s0.t / 2, s0.t * 2}) {
        if (t < 1 || t > 64) continue;
        ScheduleHint h;
        h.t = t;
        h.lp = lp;
        if (s0.columns) h.vr = vr;
        // A layout whose tile exceeds the 48 KiB of static shared memory (a combine of many
        // values) tries the default's warps along the positions, which the scheduler lowered to
        // fit (choose_scan_schedule), else is left out.
        std::optional<ScanSchedule> fitting;
        for (bool own_warps : {false, true}) {
          if (own_warps) h.wp = s0.wp;
          try {
            ScanSchedule c = choose_scan_schedule(k, spec, target, h);
            if (scan_tile_smem_bytes(k, spec, c) <= 48 * 1024) {
              fitting = c;
              break;
            }
          } catch (const ArgumentError&) {
            // more rows per tile than threads
          }
        }
        if (!fitting) continue;
        const ScanSchedule& s = *fitting;
        if (std::any_of(seen.begin(), seen.end(),
                        [&](const ScanSchedule& o) { return same(o, s); })) {
          continue;  // the default, or a layout the short sequence folds into another
        }
        seen.push_back(s);
        out.push_back(h);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<ScheduleHint> tuning_candidates(const ir::Kernel& k, const Specialization& spec,
                                            const DeviceTarget& target) {
  if (needs_scan_schedule(k)) return scan_candidates(k, spec, target);
  std::vector<ScheduleHint> out = {ScheduleHint{}};
  // Candidates are told apart by the code they generate, comments (the explain, which names the
  // hint) left out: a field that changes nothing for this kernel (pack on streamed or f32 rows)
  // would otherwise time one kernel twice.
  auto code = [&](const ScheduleHint& h) {
    std::string text, line;
    std::istringstream in(generate(k, spec, target, h).source);
    while (std::getline(in, line)) {
      const size_t at = line.find_first_not_of(' ');
      if (at == std::string::npos || line.compare(at, 2, "//") != 0) text += line + "\n";
    }
    return text;
  };
  std::vector<std::string> seen = {code(ScheduleHint{})};
  auto add = [&](const ScheduleHint& h) {
    std::string c;
    try {
      c = code(h);
    } catch (const ArgumentError&) {
      return;  // a combination this kernel cannot take (e.g. staging rows it does not cache)
    }
    if (std::find(seen.begin(), seen.end(), c) != seen.end()) return;  // an earlier candidate's
    seen.push_back(std::move(c));
    out.push_back(h);
  };
  for (bool persistent : {true, false}) {
    ScheduleHint base;
    base.persistent = persistent;
    int g0 = choose_row_schedule(k, spec, target, base).group;
    for (int g : {g0, g0 / 2, g0 * 2}) {
      // Beyond 1024 threads a row is a cluster of CTAs of 1024 (the default for rows beyond
      // one CTA).
      if (g < 1 || (g > 1024 && (!supports_clusters(target) || g > 8 * 1024))) continue;
      ScheduleHint h = base;
      h.group = g;
      if (g > 1024) h.cluster = g / 1024;
      if (persistent) {
        for (bool prefetch : {false, true}) {
          h.prefetch = prefetch;
          add(h);
        }
      } else {
        add(h);
      }
      if (g == g0) {  // packing 16-bit rows in pairs, or not, at the default grid and group
        ScheduleHint p = h;
        p.prefetch.reset();
        for (bool pack : {false, true}) {
          p.pack = pack;
          add(p);
        }
      }
    }
  }
  // Persistent grids: rows staged in shared memory or not; column accumulators in registers or
  // in shared memory (each measured faster for some kernels and shapes, bench/RESULTS.md).
  RowSchedule d = choose_row_schedule(k, spec, target, {});
  if (d.persistent) {
    for (int stage : {0, 2, 3}) {
      ScheduleHint h;
      h.stage = stage;
      add(h);
      if (d.column_reduction) {
        for (bool smem : {false, true}) {
          h.smem_columns = smem;
          h.cache_rows = true;
          add(h);
        }
      }
    }
  }
  // Long rows: the row on one CTA or split over a thread-block cluster of 2 or 4 (measured
  // either way faster depending on the kernel, bench/RESULTS.md).
  if (supports_clusters(target) && (d.group >= 512 || d.cluster > 1)) {
    // (And 8 for rows beyond one CTA of 1024 threads, which take a cluster by default.)
    for (int cluster : {1, 2, 4, 8}) {
      if (cluster == 8 && d.group <= 1024) continue;
      ScheduleHint h;
      h.cluster = cluster;
      add(h);
    }
  }
  // Streamed rows of many chunks per thread: the chunk loop rolled 16 or 4 chunks at a time,
  // beside the default's 8 (kRolledChunks). Fully unrolled (unroll=0), such a phase issues
  // every chunk's loads first and ptxas spills or takes 255 registers: 35-50% slower at
  // N = 262144 (twenty-ninth session, bench/RESULTS.md), so not a candidate. At 1-2 chunks
  // rolling was slower (twenty-sixth session), so only from kRollFromChunks chunks.
  if (!d.cache_rows && d.chunks >= kRollFromChunks) {
    for (int unroll : {16, 4}) {
      ScheduleHint h;
      h.unroll = unroll;
      add(h);
    }
  }
  // The sum of exp(x - max) in the max's pass or after it (OnlineSum), the other way than the
  // default (online where the rows are streamed; not timed on register-resident rows).
  if (d.cluster == 1 && !online_sums(k).empty()) {
    ScheduleHint h;
    h.online = !d.online;
    add(h);
  }
  // The combine of the warps' partials, the other way than the default (measured faster either
  // way depending on the kernel: RMSNorm backward f32 8192 x 10240 251 us in warp order against
  // 292 with the butterfly, LayerNorm backward at the same shape 344 against 322; sixteenth
  // session, bench/RESULTS.md).
  // (Not on a cluster whose pushed partials have no such choice.)
  if (d.reductions > 0 && d.group > 32 * d.cluster &&
      !pushes_partials(d.cluster, d.column_reduction, row_reductions(k))) {
    ScheduleHint h;
    h.butterfly = !d.butterfly;
    add(h);
  }
  // A cluster row's pushed partials packed and pushed lane by lane (RowSchedule::push = 3); and,
  // for cluster rows with column reductions and staged rows, 4 times the elements a thread on
  // clusters of 2 with the staged rows read again in each phase (RowSchedule::reread), where
  // they would not fit the registers otherwise. Prepared for LayerNorm backward bf16 N = 32768
  // on the H200 (0.65 of copy by default); not yet timed on a GPU (forty-first session,
  // bench/RESULTS.md).
  if (d.cluster > 1 && d.reductions > 0 && d.group > 32 &&
      pushes_partials(d.cluster, d.column_reduction, row_reductions(k))) {
    ScheduleHint h;
    h.push = 3;
    add(h);
    if (d.column_reduction && d.stage >= 2 && d.group >= 512) {
      h.cluster = 2;
      h.group = d.group / 4;
      h.smem_columns = false;
      h.stage = 2;
      h.reread = true;
      add(h);
    }
  }
  return out;
}

std::string tuning_key(const std::string& kernel, const Specialization& spec) {
  std::string dtypes;
  for (DType t : spec.binding) {
    if (!dtypes.empty()) dtypes += ',';
    dtypes += dtype_name(t);
  }
  // KDSL_MATH changes the generated code, so a schedule measured under it is kept apart; unset
  // (or auto) the key has no suffix, as records made before the suffix existed.
  const std::string math = cuda::math_override();
  return fmt::format("{}:{}:n{}:a{:x}:c{:x}{}", kernel, dtypes, spec.vector_extent,
                     spec.aligned_mask, spec.contiguous_mask, math.empty() ? "" : ":math=" + math);
}

TuningDb* TuningDb::default_db() {
  static std::optional<TuningDb> db = []() -> std::optional<TuningDb> {
    CacheConfig c = CacheConfig::from_env();
    if (!c.enabled) return std::nullopt;
    return TuningDb(c.dir);
  }();
  return db ? &*db : nullptr;
}

namespace {

// The database, or an empty one when the file is missing or damaged (not JSON, a number beyond a
// double, not an object: `damaged` is then set).
nlohmann::json read_db(const std::filesystem::path& path, bool* damaged = nullptr) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    nlohmann::json j = nlohmann::json::parse(ss.str());
    if (j.is_object()) return j;
  } catch (const nlohmann::json::exception&) {
  }
  log().warn("ignoring the damaged tuning database {} (run kdsl tune again to rebuild it)",
             path.string());
  if (damaged) *damaged = true;
  return nlohmann::json::object();
}

}  // namespace

std::optional<TunedSchedule> TuningDb::lookup(const std::string& gpu,
                                              const std::string& key) const {
  nlohmann::json db = read_db(path());
  if (!db.contains(gpu) || !db[gpu].is_object() || !db[gpu].contains(key)) return std::nullopt;
  const nlohmann::json& r = db[gpu][key];
  try {
    TunedSchedule t;
    t.hint = r.at("hint").get<std::string>();
    t.us = r.at("us").get<double>();
    t.default_us = r.at("default_us").get<double>();
    t.shape = r.value("shape", "");
    t.warmup_ms = r.value("warmup_ms", 0.0);
    ScheduleHint::parse(t.hint);  // reject records this version cannot use
    return t;
  } catch (const std::exception& e) {
    log().warn("ignoring the tuning record for {} on {}: {}", key, gpu, e.what());
    return std::nullopt;
  }
}

void TuningDb::record(const std::string& gpu, const std::string& key,
                      const TunedSchedule& t) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  // The cache's entry lock (released however this returns) and atomic write (a temporary file,
  // fsync'ed, renamed into place; removed on failure).
  const CacheFaults no_faults;
  std::string error;
  std::optional<EntryLock> lock =
      EntryLock::acquire(dir_ / "tuning.json.lock", std::chrono::seconds(30), no_faults, &error);
  if (!lock) throw Error(error);
  bool damaged = false;
  nlohmann::json db = read_db(path(), &damaged);
  if (db.contains(gpu) && !db[gpu].is_object()) {  // not a set of records: replaced
    log().warn("replacing the entry of {} in the tuning database {}: not an object of records", gpu,
               path().string());
    damaged = true;
  }
  if (damaged) {  // what this write replaces is kept beside it, never lost
    const std::filesystem::path kept = path().string() + ".damaged";
    std::filesystem::copy_file(path(), kept, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) throw Error(fmt::format("cannot keep a copy of {}: {}", path().string(), ec.message()));
    log().warn("kept the tuning database as it was in {}", kept.string());
  }
  if (!db.contains(gpu) || !db[gpu].is_object()) db[gpu] = nlohmann::json::object();
  db[gpu][key] = {{"hint", t.hint},
                  {"us", t.us},
                  {"default_us", t.default_us},
                  {"shape", t.shape},
                  {"warmup_ms", t.warmup_ms}};
  error = write_file_atomic(
      path(), db.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", no_faults);
  if (!error.empty()) throw Error(error);
}

CompiledKernel compile_with_tuning(const FrontEnd& fe, const std::string& name,
                                   const Specialization& spec, const DeviceTarget& target,
                                   const ScheduleHint& hint, const TuningDb* db, DiskCache* cache,
                                   std::string* tuned) {
  if (tuned) tuned->clear();
  if (!hint.empty() || !db) return compile_kernel(fe, name, spec, target, cache, hint);
  std::optional<TunedSchedule> record = db->lookup(target.name, tuning_key(name, spec));
  if (!record || record->hint.empty()) return compile_kernel(fe, name, spec, target, cache);
  ScheduleHint recorded = ScheduleHint::parse(record->hint);  // lookup checked the text
  if (!(record->warmup_ms >= kMinWarmupMs)) {
    log().warn(
        "the tuned schedule '{}' for {} on {} was timed after a short warm-up ({} ms; kdsl tune "
        "now warms each candidate up for {:g} ms): the default, timed first, may have looked "
        "slower than it is; run kdsl tune again to re-measure",
        record->hint, name, target.name, record->warmup_ms, kMinWarmupMs);
  }
  try {
    CompiledKernel ck = compile_kernel(fe, name, spec, target, cache, recorded);
    if (tuned) *tuned = record->hint;
    return ck;
  } catch (const ScheduleHintError& e) {
    log().warn("ignoring the tuned schedule '{}' for {}: {}", record->hint, name, e.what());
    return compile_kernel(fe, name, spec, target, cache);
  }
}

}  // namespace kdsl

// Autotuning: candidate schedules for a specialization, and the database of measured winners
// (`kdsl tune` writes it; the runtime reads it when it compiles a specialization).
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compiler.h"
#include "schedule.h"
#include "specialization.h"

namespace kdsl {

/// The schedules `kdsl tune` times for a kernel: the scheduler's default first (an empty hint),
/// then variations of the grid (persistent or one CTA per row), the threads per row (half and
/// twice the default), next-row prefetching, 16-bit packing, rows staged in shared memory and
/// column accumulators in shared memory or registers (persistent grids), for long rows (512 or
/// more threads per row) the row on one CTA or on a thread-block cluster of 2 or 4 CTAs, and
/// the other combine of the warps' partials than the default's. For a scan kernel: the
/// default's steps, lanes along the positions and (middle axis) rows per access, each halved,
/// kept or doubled (up to 26 layouts besides the default). Deterministic.
std::vector<ScheduleHint> tuning_candidates(const ir::Kernel& k, const Specialization& spec,
                                            const DeviceTarget& target);

/// The key of a specialization in the database: kernel, dtypes, vector length, alignment and
/// contiguity bits, e.g. "rms_norm:bf16:n8192:a1f:c1f", and ":math=accurate" or ":math=approx"
/// when KDSL_MATH sets the f32 math (it changes the generated code). Throws
/// kdsl::ArgumentError for a malformed KDSL_MATH.
std::string tuning_key(const std::string& kernel, const Specialization& spec);

/// A measured winner: the schedule hint (empty: the default was fastest) and the times, us.
struct TunedSchedule {
  std::string hint;
  double us = 0;
  double default_us = 0;
  std::string shape;  // the shape it was measured at, e.g. "M=8192,N=8192"
  /// The least warm-up of each candidate's timing, ms (`kdsl tune --warmup-ms`); 0 in records
  /// made before it was recorded, when 5 warm-up runs were all: the default, timed first, could
  /// then look up to 14% slower than it is (bench/RESULTS.md, thirty-first session).
  double warmup_ms = 0;
};

/// `tuning.json` in a cache directory: {GPU name: {key: record}}. Reads tolerate a missing or
/// damaged file (damaged: one warning, then ignored); writes go to a temporary file renamed into
/// place under a lock file, so concurrent `kdsl tune` runs do not lose each other's records.
class TuningDb {
 public:
  explicit TuningDb(std::filesystem::path dir) : dir_(std::move(dir)) {}
  /// The database in the disk cache's directory (KDSL_CACHE_DIR, ...); none when the cache is off.
  static TuningDb* default_db();

  std::optional<TunedSchedule> lookup(const std::string& gpu, const std::string& key) const;
  /// Adds or replaces a record. Throws kdsl::Error when the file cannot be written.
  void record(const std::string& gpu, const std::string& key, const TunedSchedule& t) const;
  std::filesystem::path path() const { return dir_ / "tuning.json"; }

 private:
  std::filesystem::path dir_;
};

/// What a launch compiles: `name` at `spec` for `target` with the caller's `hint` when it is not
/// empty (a ScheduleHintError if it cannot apply), else with the schedule `kdsl tune` recorded in
/// `db` (null: none) for this GPU model (`target.name`) under tuning_key(name, spec), else the
/// scheduler's default. A recorded hint this version cannot follow (a record from another kdsl)
/// is not the caller's error: it is ignored with a warning and the default is compiled. `tuned`
/// (optional) is set to the recorded hint when a record was used, else to "". Throws as
/// compile_kernel.
CompiledKernel compile_with_tuning(const FrontEnd& fe, const std::string& name,
                                   const Specialization& spec, const DeviceTarget& target,
                                   const ScheduleHint& hint, const TuningDb* db,
                                   DiskCache* cache = nullptr, std::string* tuned = nullptr);

}  // namespace kdsl

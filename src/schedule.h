// Choosing how a kernel's parallel loop and vector axis map onto the GPU.
//
// Row schedules (every kernel whose body reduces or maps along its vector axis):
//   Each loop iteration (a "row", e.g. one of M rows of an (M, N) tensor) is processed by a group
//   of G threads; a thread owns VEC consecutive elements in each of C chunks of the row (element
//   index (c * G + lane) * VEC + v), so a warp's accesses are contiguous and, when the tensors
//   allow it (16-byte aligned base and row strides, unit stride along the row), 16 bytes wide.
//   A CTA holds R = threads / G groups. The body runs in phases separated by reductions; a
//   reduction combines each thread's partial state with butterfly shuffles in a fixed lane order
//   and, for G > 32, the warps' results through shared memory: a second butterfly over the
//   warps, or the warps added in order (deterministic either way). The butterfly by default; in
//   order on a cluster without column reductions and for f32 rows of one reduction on 1024
//   threads with a partly filled last chunk (measured); `butterfly=0|1` chooses (not on a
//   cluster with column reductions, below).
//   Names by G: rows.subwarp (G < 32, several rows per warp), rows.warp (G = 32), rows.cta.
//
//   Grids. One CTA per R rows ("one CTA per row group") when no state is carried across rows:
//   small threads (about 16 elements each), many rows in flight per SM. A persistent grid (about
//   SMs x resident CTAs, looping over rows) otherwise: loop-invariant vectors (weights) are
//   loaded once per CTA, the next row's loads can be issued while this row computes (prefetch),
//   and column reductions (dw[:] += ...) accumulate across a CTA's rows in shared memory (each
//   thread owns its slots: no barrier, no atomics), then per-group partials are summed in a fixed
//   order by a follow-up kernel (in f64 for f32 partials). Kernels with column reductions are
//   always persistent.
//
//   Threads per row (measured on an H200, bench/RESULTS.md): without column reductions, one CTA
//   per row up to 16K elements and the fewest threads whose share of the row fits the register
//   budget (about 40 f32 or 80 packed 16-bit elements each), so that an SM holds as many rows as
//   its registers allow; RMSNorm-like kernels (one reduction, 16-bit rows) keep about 16 elements
//   per thread, which fills the GPU at small row counts (up to 16K elements). 16-bit rows of 16K
//   to 32K elements with one level of reductions stay one CTA per row with the register-budget
//   threads, where that is at most 512 or the kernel writes two rows (RMSNorm, LayerNorm, the
//   residual-add RMSNorm). Longer rows, f32 rows beyond 16K and softmax-like kernels there: a
//   persistent grid.
//
//   Clusters (rows.cluster, G > 1024 possible): a row's G threads span a thread-block cluster of
//   K CTAs (sm_90). With column reductions (backward kernels) each warp writes its partial state
//   into the same slot of every CTA of the cluster (distributed shared memory; with st.async, a
//   4-byte word at a time, counted on an mbarrier of the receiving CTA), and so do row
//   reductions without column reductions; once they are in every thread combines the row's G / 32
//   partials from its own shared memory, lanes in turn then a butterfly (a fixed order: the same
//   bits in every CTA, on every run). Each CTA keeps the column accumulators of its own columns.
//   Chosen (K = 4) where a 1024-thread row was measured slower: backward kernels whose row does
//   not fit one CTA (column accumulators beyond its shared memory, or elements beyond its
//   registers) and single-phase kernels on long rows (softmax backward at N = 32768); K = 8 of
//   1024 threads for long rows of one row input and at most one weight vector that it holds in
//   registers (16-bit rows with 3 or 4 chunks per thread, f32 with 4 to 8: softmax and RMSNorm
//   at N = 131072 to 262144); `cluster=K` forces it. Backward kernels with one chunk per
//   thread at 1024 threads take 512 threads and prefetch the next row (on 16-bit rows RMSNorm-like
//   ones keep 1024 threads and LayerNorm backward stages instead, below), and so do f32 backward
//   kernels with several reductions at 3 chunks per thread (LayerNorm backward at N = 10240) where
//   the rows stay in registers at 512 threads.
//
//   Staged rows (rows.stage, `stage=D`): on a persistent grid, each thread copies its 16-byte
//   chunks of the next D - 1 rows into shared memory with cp.async (sm_80), one commit group per
//   row, waits for its own current row's group and reads it into registers; rows past the end
//   and chunks past N are zero-filled. Each thread reads only what it copied, so no barrier is
//   needed. The bytes in flight then take no registers. Per-row scalars of 4 or 8 bytes (rstd,
//   mu) are loaded one row ahead into registers instead (copying them per thread was measured
//   up to 46% slower, eighteenth session). Chosen (D = 2, measured on an H200) for backward
//   kernels with column reductions on 16-bit rows (RMSNorm-like ones at every length up to 16
//   elements per thread, LayerNorm backward with one chunk per thread or where it would
//   otherwise prefetch, there keeping its loop-invariant vectors in registers; with one chunk
//   per thread its rows are also held as packed pairs), and for softmax-like kernels on long
//   16-bit rows (512 threads per row); D is lowered, with a reason, where D rows do not fit the
//   shared memory. A copy's source address is formed even for a row past the end: the copy then
//   ignores its source (cp.async with a source size of 0).
//
//   Column accumulators (dw[:] += ...): in registers for backward kernels with at most 16
//   elements per thread on 16-bit rows or with one reduction (measured: the shared-memory load
//   and store per element and row kept the shared-memory pipe busy), else in shared memory, each
//   thread owning its slots. At the end each thread stores its partials VEC at a time (16-byte
//   stores for f32; one element per store was measured to fill the queue of global stores at
//   the end of every CTA). The follow-up kernel sums the partials with 256-thread CTAs of 8 (f32:
//   32) columns x 32 slices, each slice summing every 32nd partial with 8 loads in flight, then
//   the slices in order (deterministic).
//
//   Registers. Rows are held in registers (each element read once: "register-resident") when the
//   cached vectors fit a budget of about 40 registers per thread (so that 1024 or more threads
//   fit on an SM); 16-bit rows may be held as packed pairs; otherwise every phase re-reads the
//   row ("streaming": at most one extra read per reduction phase). Threads per row grow until the
//   cached vectors fit.
//
//   The thresholds were measured on an H200 (bench/RESULTS.md); `kdsl tune` times the
//   alternatives (grid kind, threads per row, prefetch, packing) on the GPU at hand and records
//   the fastest per GPU model and specialization (src/tuning.h); launches use that record.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dsl/ir.h"
#include "kdsl/error.h"
#include "specialization.h"

namespace kdsl {

/// A schedule hint that is malformed or cannot apply to the kernel, specialization or target
/// (e.g. group=2048 without a cluster, cluster=2 before sm_90, vec=8 where N is not a multiple of
/// 8). It is the user's input: the CLI reports it as a usage error (exit code 2). what() names
/// the hint and why.
class ScheduleHintError : public ArgumentError {
 public:
  using ArgumentError::ArgumentError;
};

/// The GPU a kernel is compiled for: what the scheduler needs to know about it.
struct DeviceTarget {
  std::string name;  // the GPU's name, e.g. "NVIDIA H200" (keys tuning records; not in codegen)
  std::string arch = "sm_90";
  int sm_count = 132;
  int max_threads_per_sm = 2048;
  int regs_per_sm = 65536;
  int max_smem_per_cta = 227 * 1024;  // bytes, with the opt-in limit
};

/// Overrides of the scheduler's choices, for autotuning (`kdsl tune`) and experiments
/// (`kdsl run --schedule group=512,prefetch=1`). Unset fields keep the scheduler's choice.
struct ScheduleHint {
  std::optional<int> vec;    // elements per access: 1, 2, 4 or 8
  std::optional<int> group;  // threads per row: a power of two, 1 to 1024 (1024 x cluster)
  std::optional<bool> cache_rows;
  std::optional<bool> cache_invariant;
  std::optional<bool> prefetch;      // load the next row while the current one is computed
  std::optional<bool> pack;          // hold cached 16-bit rows as packed pairs (half the registers)
  std::optional<bool> stream;        // evict-first cache hints on row loads and stores
  std::optional<bool> persistent;    // a persistent grid (else one CTA per R rows)
  std::optional<int> min_ctas;       // __launch_bounds__ minimum CTAs per SM (caps registers)
  std::optional<bool> smem_columns;  // column-reduction accumulators in shared memory
  std::optional<int> cluster;        // CTAs per row (a thread-block cluster): 1, 2, 4 or 8
  std::optional<int> stage;          // rows staged ahead in shared memory (cp.async): 0, 2 to 8
  std::optional<bool> butterfly;     // warps' partials combined by a butterfly (1) or in order (0)
  std::optional<int> unroll;         // chunks per unrolled step of a streamed phase (0: all)
  std::optional<bool> online;        // sums of exp(x - c(max(x))) in the max's pass (1) or after
  std::optional<int> push;           // a cluster row's pushed partials: 0 to 3 (RowSchedule::push)
  std::optional<bool> reread;        // staged rows read from shared memory in each phase
  // Scan kernels (schedule_scan.h): the tile's layout, as KDSL_SCAN_SCHEDULE's keys of the same
  // names. Powers of two: t 1 to 64, lp, wp 1 to 32, vr 1 to 16.
  std::optional<int> t;   // steps: positions (of VP) each thread scans along the sequence
  std::optional<int> lp;  // lanes of a warp along the positions (32 / lp along the rows)
  std::optional<int> wp;  // warps of a CTA along the positions
  std::optional<int> vr;  // rows per access (scan.columns)

  bool empty() const;
  /// Sets a key of the row schedule (vec ... stage) / of the scan schedule (t, lp, wp, vr).
  bool has_row_keys() const;
  bool has_scan_keys() const;
  /// Parses "group=512,prefetch=1,pack=0" (spaces around keys and values are ignored); throws
  /// ScheduleHintError for an empty item, an unknown key, a value out of its key's range, a key
  /// given twice, or stage with prefetch=1.
  static ScheduleHint parse(const std::string& text);
  /// The canonical text form (keys in a fixed order), "" when empty.
  std::string str() const;
};

/// True when `k` has row reductions. On a cluster their partials are pushed with st.async, a
/// 4-byte word at a time (an f32 sum, a Welford state's three words, an argmax's value and
/// index), one mbarrier per point of the row where reductions combine.
bool row_reductions(const ir::Kernel& k);

/// A row sum that can run online: sum(exp(u - c)) where u is a float vector (f32 or f64) of
/// reduction depth d and the scalar c has depth d + 1 (it needs a reduction of u's phase, as the
/// safe maximum of softmax does). Computed in u's phase with a running maximum m of u and the sum
/// s of exp(u - m), rescaled by exp(m_old - m_new) as m grows, then sum = s * exp(m - c) once c
/// is known (Milakov & Gimelshein, 2018, "Online normalizer calculation for softmax"): the row
/// is read once fewer where the schedule streams it.
struct OnlineSum {
  ir::ValueId sum;  // the reduce node
  ir::ValueId u;    // the vector whose exponentials are summed
  ir::ValueId c;    // the scalar subtracted from u
};
std::vector<OnlineSum> online_sums(const ir::Kernel& k);

/// Whether a row reduction's warps push their partials into every CTA of the cluster
/// (codegen_rows.cpp: with column reductions, or with row reductions, which go by st.async with
/// no cluster barrier per row) rather than each CTA's total being read back after a cluster
/// barrier.
inline bool pushes_partials(int cluster, bool column_reduction, bool reductions) {
  return cluster > 1 && (column_reduction || reductions);
}

/// Streamed rows of at least kRollFromChunks chunks a thread roll their chunk loop kRolledChunks
/// chunks at a time unless a hint says otherwise (RowSchedule::unroll; measured in the
/// twenty-ninth session, bench/RESULTS.md).
inline constexpr int kRollFromChunks = 32;
inline constexpr int kRolledChunks = 8;

struct RowSchedule {
  std::string name;               // rows.subwarp, rows.warp, rows.cta or rows.cluster
  int vec = 1;                    // elements per access (VEC)
  int group = 32;                 // threads per row (G)
  int rows_per_cta = 1;           // R
  int threads = 32;               // G * R
  int chunks = 1;                 // C = ceil(N / (G * VEC))
  bool cache_rows = true;         // row loads held in registers across phases
  bool cache_invariant = true;    // loop-invariant vector loads held in registers across rows
  bool prefetch = false;          // the next row's cached loads are issued before this row's work
  bool pack = false;              // cached 16-bit vectors held as packed pairs in 32-bit registers
  bool stream = false;            // row loads/stores use evict-first hints (ld/st.global.cs)
  bool persistent = true;         // grid of about SMs x resident CTAs looping over rows
  int min_ctas = 0;               // __launch_bounds__(threads, min_ctas) when > 0
  bool smem_columns = false;      // column accumulators in shared memory instead of registers
  int ctas_per_sm = 1;            // persistent grid: CTAs per SM
  int cluster = 1;                // K: a row's G threads span a cluster of K CTAs (G / K each)
  bool column_reduction = false;  // the kernel has column reductions (dw[:] += ...)
  int stage = 0;                  // rows in the shared-memory pipeline (cp.async), 0 = none
  // How a row reduction combines its warps' partials (G > 32 threads per row): each lane reads
  // one warp's partial and a second warp butterfly combines them (true), or every thread adds
  // them in warp order (false). Both give every thread the same bits, in a fixed order.
  bool butterfly = true;
  // A phase that holds nothing of the row in registers (streamed rows, no column accumulators in
  // registers) unrolls its loop over the thread's chunks this many at a time (0: all C). Fully
  // unrolled, the compiler issues every chunk's loads first: softmax backward bf16 N = 32768
  // streamed on 512 threads takes 78 registers so, 31 unrolled by one (ptxas, sm_90).
  // Default: kRolledChunks where the phase streams kRollFromChunks chunks or more (measured).
  int unroll = 0;
  // The online_sums of the kernel run in the pass of the reductions they depend on (a row
  // streamed once fewer); only on one CTA per row (not on clusters: not written there).
  // Default: rows streamed (cache_rows false) in kRollFromChunks chunks or more.
  bool online = false;
  // How the warps of a cluster row push their partials into every CTA of the cluster (rows with
  // row reductions on G > 32 threads): bit 0 set, lane q of the warp pushes to CTA q (one push
  // each) where lane 0 pushes to all K in turn; bit 1 set, the warp's states of all the row's
  // reductions combined at one point are packed into one struct, pushed with vector st.async
  // (one push per CTA, where each reduction's state is pushed word by word) and read back in
  // one shared-memory load. 0, the default, is neither.
  int push = 0;
  // Staged rows (stage >= 2) read from their shared-memory slots by every phase that uses them,
  // a chunk at a time, instead of into registers once for the row's phases: the rows then hold
  // no registers across the row's reductions (each thread reads back only its own slots, which
  // stay until the row's iteration ends). An experiment for the long backward rows at 16
  // elements a thread (bench/experiments/s41.sh); off by default.
  bool reread = false;
  int staged_loads = 0;    // row loads staged per row (16-byte chunks of each thread)
  int staged_scalars = 0;  // per-row scalars loaded a row ahead (4 or 8 bytes, in registers)
  int phases = 0;          // reduction phases (a reduction of a reduction's result: 2)
  int reductions = 0;      // row reductions in the kernel
  int element_bytes = 4;   // bytes of the smallest element along the row (2: bf16, f16)
  std::vector<std::string> reasons;
};

/// The compute capability in the target's architecture name: 90 for "sm_90", "sm_90a" or
/// "compute_90" (0 when there is none).
int compute_capability(const DeviceTarget& target);

/// True when `target` has thread-block clusters (sm_90 and newer: "sm_90", "sm_90a", "sm_100f").
bool supports_clusters(const DeviceTarget& target);

/// The target for compiling for `arch` without its GPU (`kdsl compile --arch sm_86`): the
/// architecture's opt-in shared memory per CTA and threads per SM (CUDA C++ Programming Guide,
/// "Technical Specifications per Compute Capability"); the SM count stays the H200's (132), which
/// only the launch uses. Throws nothing; an unknown architecture keeps the sm_90 figures.
DeviceTarget target_for_arch(const std::string& arch);

/// What a staged row schedule (`stage` >= 2) copies into shared memory for IR node `node` of
/// `k`: a row load (loop and vector axes) with 16-byte accesses of `vec` elements, its tensor
/// aligned and contiguous in `spec` (copied into the staging buffer); a per-row scalar load of
/// 4 or 8 bytes (e.g. rstd: loaded a row ahead into a register); or nothing. The scheduler sizes
/// the staging buffer with it and code generation lays out the slots with it, so the two agree.
enum class StagedLoad { none, row, scalar };
StagedLoad staged_load(const ir::Kernel& k, const Specialization& spec, const ir::Node& node,
                       int vec);

/// Chooses the row schedule for `k` (already specialized) on `target`. Deterministic: the same
/// kernel, specialization and target give the same schedule. Throws ScheduleHintError for a hint
/// that cannot apply (a hint that is merely moot, e.g. persistent=0 with column reductions or
/// smem_columns without them, is noted in the reasons instead), and kdsl::ArgumentError for rows
/// beyond the row schedule (N at 2^31 or more, or more than 512 elements per thread).
RowSchedule choose_row_schedule(const ir::Kernel& k, const Specialization& spec,
                                const DeviceTarget& target, const ScheduleHint& hint = {});

}  // namespace kdsl

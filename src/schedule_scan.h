// The scan schedule: kernels whose body scans along its vector axis (scan, cumsum, ..., shift,
// first/last, or column reductions over part of the loop), on a GPU.
//
// The work is a grid of tiles. A tile is TD consecutive loop iterations ("rows", flattened in
// the order of the tensors' axes, the innermost loop variable fastest) by CL consecutive positions
// along the scan ("a chunk"), in processing order (from the last position to the first for a
// reverse scan). A CTA of 32 * WR * WP threads processes one tile at a time: thread (warp
// (wr, wp), lane (lp, lr)) owns VR consecutive rows and, for each of T steps, VP consecutive
// positions:
//   row      = tile_row * TD + (wr * LR + lr) * VR + v                      (v < VR)
//   position = chunk * CL + ((wp * T + j) * LP + lp) * VP + vp               (j < T, vp < VP)
// so TD = WR * LR * VR and CL = WP * T * LP * VP. Two layouts come from the same structure:
//   - scan.columns (the vector axis is a middle axis, e.g. x[b, :, d] of a (B, L, D) tensor): the
//     rows are contiguous in memory, VR rows make one access and VP = 1. Memory-bound kernels
//     over long sequences use accesses of VR = 2 rows (8 bytes of f32, 4 of 16-bit) with LR = 16
//     lanes along the rows -> a 128-byte (f32) or 64-byte line per position and warp, LP = 2
//     lanes and WP = 8 warps along the positions, 8 to 32 steps from a register budget that
//     plans two CTAs of 256 threads per SM (launch bounds of 2 CTAs, also when an override
//     gives this layout);
//     16-bit kernels with several transcendentals per element (RG-LRU, with the approximate f32
//     math of 16-bit data) use VR = 2 with LR = 32 lanes along the rows, LP = 1, 8 or 16 steps;
//     the same in f32, logcumsumexp, 8-byte elements and short sequences use element accesses
//     of 32 bytes of rows (LR = 32 / size).
//   - scan.rows (the vector axis is the last, contiguous axis, e.g. x[m, :]): VP consecutive
//     positions make one 16-byte access, VR = 1 and LP = 32 lanes along the positions.
// Short sequences fold positions into rows (fewer lanes/warps along the positions), so a tile is
// never much longer than the sequence.
//
// One pass, each element read once: the tile is loaded into registers, scanned (sequentially in
// each thread over its VP positions, then across the LP lanes with warp shuffles, carried over the
// T steps, then across the WP warps through shared memory), and the tile's exclusive prefix comes
// from a decoupled look-back over the tiles before it in the same rows (Merrill & Garland, 2016,
// "Single-pass Parallel Prefix Scan with Decoupled Look-back"): each tile publishes its aggregate,
// then its inclusive prefix, with a flag; tiles take an atomic ticket so that they start in
// processing order (chunk-major), which makes the look-back deadlock-free. The look-back combines
// the inclusive prefix it finds with the later aggregates from left to right, which gives exactly
// the bits of the chained definition incl[c] = incl[c-1] (+) agg[c] whichever tile it finds: the
// results are deterministic. The epilogue (outputs, first/last, column-reduction partials) runs
// on the tile still in registers.
//
// Packed look-back (the default when the carried states take at most three 32-bit words, e.g. a
// sum or the affine pair of a real linear recurrence): each row of a tile publishes its state and
// status (1 aggregate, 2 inclusive prefix) together in one 16-byte word, written and read in one
// access, and walks back over its own row's words, one thread per row, with no barrier and no
// fence in the chain. Measured on the H200 the fenced per-tile flags (packed=0: the data, a
// barrier, then a release of the flag; the waiter's acquire, then the data) cost about 1.7 us per
// chunk on the critical path of a long sequence (bench/RESULTS.md).
//
// Optional pipelining (look-back mode): while tile n looks back and writes its outputs, the loads
// of tile n + 1 are in flight, in registers (pipeline=1) or as cp.async copies into shared memory
// (pipeline=2). Neither is the default: both measured slower on the H200 (more registers or more
// shared-memory traffic per element than the latency they hide).
//
// Optional rescanning (rescan=1, scan.columns without pipelining): phase A keeps only each
// thread's total and phase B scans the thread's elements again from the prefix before it, so the
// loads stay live through the look-back instead of the local prefixes. With packed 16-bit loads
// ptxas (CUDA 13.0, sm_90) gives bf16 cumsum_mid at (1, 32768, 2048) 80 registers instead of 116
// (three CTAs per SM instead of two) and linear_recurrence 93 instead of 124, unspilled. The
// default for 16-bit middle-axis scans without elementwise math on the 2-row layout (on the H200
// at L = 32768, bf16: cumsum_mid 3% and linear_recurrence_bwd 6% faster, linear_recurrence 11%
// with the twice longer tiles the freed registers allow; cumsum_mid at (4, 2048, 2048) 2% slower;
// schedule_scan.cpp has the figures); KDSL_SCAN_SCHEDULE=rescan=0 turns it off.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsl/ir.h"
#include "schedule.h"
#include "specialization.h"

namespace kdsl {

struct ScanSchedule {
  std::string name;         // scan.columns or scan.rows
  bool columns = true;      // the rows are the contiguous dimension (else the positions are)
  bool reverse = false;     // processing order from the last position to the first
  int vr = 1, vp = 1;       // rows and positions per access of a thread
  int lr = 32, lp = 1;      // lanes along the rows and along the positions (lr * lp = 32)
  int wr = 1, wp = 1;       // warps along the rows and along the positions
  int t = 1;                // steps of VP positions per thread
  bool blocked = false;     // a thread's steps are consecutive positions (else interleaved)
  bool pipeline = false;    // look-back mode: the next tile's loads are issued during the look-back
  bool async_copy = false;  // ... as cp.async copies into shared memory (else into registers)
  int window = 0;           // look-back: predecessors examined at once (0: threads / rows per tile)
  int64_t chunks = 1;       // NCH = ceil(L / CL)
  bool vector_fast = false;    // scan.rows: 16-byte accesses along the positions (spec-aligned)
  std::vector<int> row_order;  // loop variables, slowest first (the flattening of rows)
  int fast_loop = -1;          // scan.columns: the loop variable whose axis is contiguous
  int ctas_per_sm = 2;
  bool packed = true;  // look-back: states of at most 3 words published with their status in
                       // one 16-byte word per row (else per-tile flags, fenced)
  int min_ctas = 0;    // __launch_bounds__' minimum CTAs per SM (caps the registers; 0: none)
  // scan.columns: phase A keeps only each thread's carry, and phase B scans the thread's elements
  // again from the prefix before it, so the loads stay live through the look-back instead of the
  // local prefixes (half the register words for packed 16-bit loads; the combine runs twice per
  // element either way). Not with pipelining, whose phase A loads the next tile.
  bool rescan = false;
  // scan.columns: positions along the scan axis in 64-bit arithmetic even where 32 bits hold
  // them (Emitter::emit_constants): unless every vector tensor is f16 or bf16, or by
  // KDSL_SCAN_SCHEDULE pos64=1 / pos64=0, for comparisons.
  bool wide_positions = false;
  // scan.columns with blocked steps of one position: a transcendental result (exp, sigmoid, ...)
  // that phase A computes and phase B evaluates again, at the same step or at a neighbouring one
  // (a shifted operand: RG-LRU backward's a at t + 1 is a at t one step on), is kept from phase A
  // in registers (K<i>[T][VR], Emitter::kept_) instead of being computed again, except at the
  // steps the thread's phase A did not cover. KDSL_SCAN_SCHEDULE keep=0 turns it off.
  bool keep_math = true;
  // scan.columns: column pointers stepped by a byte count hidden from NVVM (kdsl_sc_bytes), one
  // 64-bit add per access, where NVVM otherwise rebuilds an element index and scales it per
  // access (4 SASS instructions, not 2). Set where the kernel has much math per element.
  bool byte_steps = false;
  // Who set the tile's layout keys (t, lp, wp, vr): "" the scheduler, else "KDSL_SCAN_SCHEDULE"
  // or "schedule hint ..." (layout_hint: the caller's hint), for errors the layout causes later
  // (codegen: a tile whose shared memory exceeds the static limit).
  std::string layout_source;
  bool layout_hint = false;
  std::vector<std::string> reasons;

  int threads() const { return 32 * wr * wp; }
  int td() const { return wr * lr * vr; }
  int64_t cl() const { return static_cast<int64_t>(wp) * t * lp * vp; }
};

/// Whether node `n` is a transcendental evaluation (exp, log, sqrt, sigmoid, silu, ...): what
/// counts as element math in the scan schedule.
bool is_transcendental(const ir::Node& n);

/// True when `k` needs the scan schedule: it scans, shifts, takes first/last, or reduces scalars
/// over some but not all of its loop variables.
bool needs_scan_schedule(const ir::Kernel& k);
/// Whether `k` has a scan, shift, extract, first or last (the scan schedule's own reasons).
bool has_scan_ops(const ir::Kernel& k);
/// The first column reduction of a scalar over part of the parallel loop (`dlam[d] += ...` in
/// parallel(B, D)), which also puts a kernel in the scan schedule; nullptr if none.
const ir::Store* partial_column_reduction(const ir::Kernel& k);

/// Chooses the scan schedule for `k` (specialized). Deterministic for a given environment: the
/// variable KDSL_SCAN_SCHEDULE ("t=4,lp=2,wp=8,vr=4,pipeline=2,window=8,ctas=3") overrides the
/// steps per thread, the lanes and warps along the positions, the rows per access (scan.columns;
/// any of t, lp, wp or vr starts from the element-access layout, not the 2-row one) and the
/// pipelining (pipeline=1: the next tile's loads into registers, 2: into
/// shared memory by cp.async, 0: none), the rescanning tile (rescan=1, ScanSchedule::rescan),
/// 64-bit positions (pos64=1), keeping phase A's transcendental results for phase B (keep=1, the
/// default; ScanSchedule::keep_math) and the CTAs per SM the registers must allow, for experiments
/// (the source, hence the cache key, changes with them). `hint`'s t, lp, wp and vr
/// (`--schedule`, `kdsl tune`'s record) override the same keys of the variable, the same way.
/// Throws kdsl::SourceError when the kernel's scans cannot run in one pass (e.g. scans in
/// opposite directions), kdsl::ArgumentError for a malformed KDSL_SCAN_SCHEDULE or one whose tile
/// has more rows than threads, and kdsl::ScheduleHintError for such a `hint`, a `hint` with keys
/// of the row schedule, or vr along the last axis.
ScanSchedule choose_scan_schedule(const ir::Kernel& k, const Specialization& spec,
                                  const DeviceTarget& target, const ScheduleHint& hint = {});

}  // namespace kdsl

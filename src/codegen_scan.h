// CUDA C++ for the scan schedule (schedule_scan.h).
#pragma once

#include "codegen_cuda.h"
#include "schedule_scan.h"

namespace kdsl {

/// Emits kernel `k` (specialized by `spec`) for the scan schedule `s`: the main kernel, and a
/// follow-up kernel summing the partials of column reductions in a fixed order. Before:
/// ir::verify(k) holds. After: the source defines the plan's symbols, taking the parameter block
/// `plan.slots` describe; the plan's workspaces hold the look-back flags (zeroed before each
/// launch), the published tile states and the partial sums; the grid is one CTA per tile, capped
/// at the persistent grid (plan.rows_per_cta rows times plan.row_splits chunks per tile row).
/// Same inputs give byte-identical output. Throws kdsl::SourceError for kernels the schedule
/// cannot run in one pass (codegen_scan_plan.h) and kdsl::InternalError for malformed IR.
GeneratedKernel generate_scan_kernel(const ir::Kernel& k, const Specialization& spec,
                                     const ScanSchedule& s);

/// Bytes of static shared memory the tile of schedule `s` takes for kernel `k` (the warps'
/// prefixes, the look-back window, cp.async staging, column-reduction partials): what
/// generate_scan_kernel checks against the 48 KiB a kernel may hold statically. `s.chunks` must
/// be set (one chunk: no look-back). Throws kdsl::SourceError as generate_scan_kernel does for
/// kernels the schedule cannot run.
uint64_t scan_tile_smem_bytes(const ir::Kernel& k, const Specialization& spec,
                              const ScanSchedule& s);

/// Device code the scan kernels use (look-back flags, shuffles, vector accesses), emitted after
/// cuda_prelude().
const char* cuda_scan_prelude();

}  // namespace kdsl

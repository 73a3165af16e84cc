// What the runtime needs to launch a compiled specialization: the kernel symbols, the launch
// configuration, the byte layout of the parameter block and the workspace. Produced by codegen,
// stored as JSON next to the cubin in the disk cache, read back on a hit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kdsl/dtype.h"

namespace kdsl {

/// One field of the kernel's parameter block (a struct passed by value).
struct ParamSlot {
  enum class Kind : uint8_t {
    tensor_ptr,  // device pointer of tensor `index`
    stride,      // stride of axis `axis` of tensor `index`, in elements (i64)
    symbol,      // value of shape symbol `index` (i64)
    scalar,      // scalar parameter `index`, converted to `dtype`
    rows,        // number of loop iterations (product of the loop extents; i64)
    workspace,   // device pointer to workspace region `index`
    partials,    // number of per-group partial sums in each workspace region (i64)
  };
  Kind kind = Kind::tensor_ptr;
  int32_t index = 0;
  int32_t axis = 0;
  uint32_t offset = 0;  // bytes from the start of the block
  uint32_t size = 8;    // bytes
  DType dtype = DType::i64;
};

/// A scratch buffer the launch needs (per-CTA partial sums of a column reduction; the scan
/// schedule's look-back flags, published tile states and per-row partials). Its size is
/// bytes_per_cta * grid + bytes_per_row * rows + bytes_fixed.
struct WorkspaceSpec {
  uint64_t bytes_per_cta = 0;  // multiplied by the grid size at launch
  uint64_t bytes_per_row = 0;  // multiplied by the number of loop iterations (rows)
  uint64_t bytes_fixed = 0;
  bool zeroed = false;  // cleared to zero (on the launch's stream) before the main kernel
};

/// A second kernel launched after the main one (e.g. the final, fixed-order reduction of the
/// per-CTA partial sums). Its parameter block is the same as the main kernel's.
struct FollowUp {
  std::string symbol;
  uint32_t block_threads = 256;
  uint64_t grid_elements = 0;  // threads in the whole grid (a multiple of block_threads)
};

struct LaunchPlan {
  std::string symbol;                // the main kernel, e.g. kdsl_rms_norm_bf16_n8192
  std::string schedule;              // e.g. "rows.cta" (documented in schedule.h)
  std::vector<std::string> reasons;  // why this schedule (kdsl emit --explain)
  uint32_t block_threads = 256;
  uint32_t rows_per_cta = 1;     // loop iterations a CTA works on at once
  uint32_t row_splits = 1;       // CTAs of work per rows_per_cta rows (scan chunks, cluster CTAs)
  uint32_t cluster = 1;          // CTAs per thread-block cluster (x); the grid is a multiple of it
  uint32_t max_ctas_per_sm = 1;  // persistent grid: at most this many CTAs per SM
  /// Column-reduction partials each CTA (each cluster) stores: rows_per_cta, or 1 where the
  /// CTA's row groups add theirs together first (codegen_rows.cpp).
  uint32_t partials_per_cta = 1;
  bool persistent = true;     // false: one CTA per rows_per_cta rows
  uint32_t dynamic_smem = 0;  // bytes
  uint32_t param_bytes = 0;
  std::vector<ParamSlot> slots;
  std::vector<WorkspaceSpec> workspaces;
  std::vector<FollowUp> follow_ups;
  std::vector<uint32_t> aligned_tensors;  // tensors whose accesses assume 16-byte alignment

  /// The number of partials of the row schedule's column reductions for a grid of `grid` CTAs:
  /// partials_per_cta per CTA, or per cluster when a row spans a cluster.
  int64_t partials(uint32_t grid) const {
    return static_cast<int64_t>(grid / cluster) * partials_per_cta;
  }

  std::string to_json() const;
  /// Parses what to_json() wrote; throws kdsl::Error on malformed input.
  static LaunchPlan from_json(const std::string& text);
};

}  // namespace kdsl

// The CPU reference interpreter: the executable meaning of a kernel, with no GPU.
#pragma once

#include <vector>

#include "dsl/ir.h"
#include "host_tensor.h"

namespace kdsl {

/// Runs kernel `k` on host tensors in float64 (complex128 for c64), as dsl/SPEC.md section 14
/// defines: inputs are converted exactly from their storage dtype, every operation is computed in
/// float64, explicit casts round to their target dtype, reductions and column reductions
/// accumulate in float64, and outputs are rounded to their storage dtype when written.
///
/// `tensors[i]` is tensor parameter i (row-major); `scalars[i]` is scalar parameter i (the real
/// part; c64 scalars are not supported). Every shape symbol of `k` must have a value
/// (`symbols[i]`), consistent with the tensors' shapes. Outputs are written in place; InOut
/// tensors are read first. Rows run on several threads; the result does not depend on their
/// number. Throws kdsl::ArgumentError on shape mismatches.
void interpret(const ir::Kernel& k, std::vector<HostTensor>& tensors,
               const std::vector<double>& scalars, const std::vector<int64_t>& symbols);

}  // namespace kdsl

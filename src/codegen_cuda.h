// CUDA C++ code generation: a specialized kernel plus its schedule in, NVRTC-ready source out.
#pragma once

#include <string>

#include "dsl/ir.h"
#include "launch_plan.h"
#include "schedule.h"
#include "specialization.h"

namespace kdsl {

struct GeneratedKernel {
  std::string source;  // self-contained CUDA C++ (no #include), deterministic
  LaunchPlan plan;
};

/// Emits the kernel `k` (specialized by `spec`: its vector symbol has a value) for the row
/// schedule `s`. Before: ir::verify(k) holds. After: the source defines `plan.symbol` (and the
/// follow-up kernels listed in the plan) as extern "C" __global__ functions taking one parameter
/// block laid out as `plan.slots` describe. Same inputs give byte-identical output.
/// Throws kdsl::InternalError for IR the schedule cannot express.
GeneratedKernel generate_rows_kernel(const ir::Kernel& k, const Specialization& spec,
                                     const RowSchedule& s);

}  // namespace kdsl

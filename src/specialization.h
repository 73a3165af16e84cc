// The facts a launch fixes at compile time: dtype binding, vector-axis length, alignment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsl/ir.h"
#include "kdsl/dtype.h"

namespace kdsl {

/// One specialization of a kernel. Launches with equal keys share one compiled binary.
struct Specialization {
  std::vector<DType> binding;  // one dtype per generic, in declaration order
  int64_t vector_extent = -1;  // the vector symbol's value; -1 when the kernel has none
  uint32_t aligned_mask = 0;   // bit t: tensor t's base and loop-axis strides allow 16-byte access
  uint32_t contiguous_mask = 0;  // bit t: tensor t's vector-axis stride is 1

  bool operator==(const Specialization&) const = default;
  /// The kernel symbol: kdsl_<kernel>[_<dtype>...][_n<N>][_u<hex>] where the last part appears
  /// only when some tensor is not aligned or not contiguous, e.g. kdsl_rms_norm_bf16_n8192.
  std::string symbol(const std::string& kernel, uint32_t all_vector_tensors) const;
};

/// Sets the vector symbol's value in a kernel lowered by sema (a negative vector_extent leaves it
/// symbolic, for printing). Throws kdsl::ArgumentError if the value is 0.
void specialize(ir::Kernel& k, const Specialization& s);

}  // namespace kdsl

// The facts a launch fixes at compile time: dtype binding, vector-axis length, alignment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsl/ir.h"
#include "kdsl/dtype.h"

namespace kdsl {

/// The bit of tensor `tensor` (an index into ir::Kernel::tensors) in the 32-bit masks below.
/// Sema allows at most kMaxKernelParams (32) parameters, so every tensor has one; throws
/// kdsl::InternalError for an index outside [0, 32).
uint32_t tensor_bit(int32_t tensor);

/// One specialization of a kernel. Launches with equal keys share one compiled binary.
struct Specialization {
  std::vector<DType> binding;  // one dtype per generic, in declaration order
  int64_t vector_extent = -1;  // the vector symbol's value; -1 when the kernel has none
  uint32_t aligned_mask = 0;   // bit t: tensor t's base and loop-axis strides allow 16-byte access
  uint32_t contiguous_mask = 0;  // bit t: tensor t's vector-axis stride is 1

  bool operator==(const Specialization&) const = default;
  /// Whether tensor `tensor` allows 16-byte vector accesses (aligned and contiguous).
  bool fast(int32_t tensor) const {
    return (aligned_mask & contiguous_mask & tensor_bit(tensor)) != 0;
  }
  bool contiguous(int32_t tensor) const { return (contiguous_mask & tensor_bit(tensor)) != 0; }
  /// The kernel symbol: kdsl_<kernel>[_<dtype>...][_n<N>][_u<hex>] where the last part appears
  /// only when some tensor is not aligned or not contiguous, e.g. kdsl_rms_norm_bf16_n8192.
  std::string symbol(const std::string& kernel, uint32_t all_vector_tensors) const;
};

/// Sets the vector symbol's value in a kernel lowered by sema (a negative vector_extent leaves it
/// symbolic, for printing). Throws kdsl::ArgumentError if the value is 0.
void specialize(ir::Kernel& k, const Specialization& s);

}  // namespace kdsl

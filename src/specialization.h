// The facts a launch fixes at compile time: dtype binding, vector-axis length, alignment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsl/ir.h"
#include "dsl/sema.h"
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

/// The two layout bits of one tensor argument, as a launch sets them in a Specialization's masks.
struct TensorLayoutBits {
  bool aligned = true;     // a 16-byte aligned base; other axes of size > 1 step 16-byte multiples
  bool contiguous = true;  // every axis of the vector symbol has stride 1 (or size 1)
};

/// The layout bits of a tensor declared with shape `declared` (axes of the kernel's vector symbol
/// `vector_symbol` are vector axes) passed with sizes `shape` and strides `strides` (elements,
/// one per declared axis) of `element_bytes`-byte elements, its base 16-byte aligned or not.
TensorLayoutBits tensor_layout_bits(const std::vector<ir::Extent>& declared, int32_t vector_symbol,
                                    const int64_t* shape, const int64_t* strides,
                                    size_t element_bytes, bool base_aligned);

/// Sets `spec`'s aligned and contiguous masks to those of a launch of `sig` (bound as
/// `spec.binding`) whose tensors are row-major (C-contiguous, as a fresh PyTorch tensor) at
/// 16-byte aligned bases, as tensor_layout_bits gives them. `sizes` holds each shape symbol's
/// value by index (the vector symbol's comes from spec.vector_extent when set); a size not known
/// (negative, or missing) is taken to be 16: more than 1, and a multiple of 16 bytes, and so is
/// a size of 0 (an empty tensor launches nothing). So a tensor is contiguous where the axes after
/// its vector axis have size 1, which, sizes unknown, means where the vector axis is its last.
void set_row_major_masks(Specialization& spec, const KernelSignature& sig,
                         const std::vector<int64_t>& sizes);

/// The tensors of `sig` (a bit each, as in the masks) with an axis of the vector symbol: those a
/// view along the vector axis may read or write, for naming a specialization (symbol()) before
/// its code is generated.
uint32_t vector_axis_tensors(const KernelSignature& sig);

/// Sets the vector symbol's value in a kernel lowered by sema (a negative vector_extent leaves it
/// symbolic, for printing). Throws kdsl::ArgumentError if the value is 0.
void specialize(ir::Kernel& k, const Specialization& s);

}  // namespace kdsl

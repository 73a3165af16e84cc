#include "specialization.h"

#include <fmt/format.h>

#include <algorithm>

#include "dsl/sema.h"
#include "kdsl/error.h"

namespace kdsl {

uint32_t tensor_bit(int32_t tensor) {
  if (tensor < 0 || tensor >= 32) {
    throw InternalError(fmt::format(
        "tensor {} has no bit in a specialization's 32-bit masks (sema allows {} parameters)",
        tensor, kMaxKernelParams));
  }
  return uint32_t{1} << tensor;
}

TensorLayoutBits tensor_layout_bits(const std::vector<ir::Extent>& declared, int32_t vector_symbol,
                                    const int64_t* shape, const int64_t* strides,
                                    size_t element_bytes, bool base_aligned) {
  TensorLayoutBits bits;
  bits.aligned = base_aligned;
  for (size_t ax = 0; ax < declared.size(); ++ax) {
    const int64_t n = shape[ax];
    if (declared[ax].symbol >= 0 && declared[ax].symbol == vector_symbol) {
      bits.contiguous = bits.contiguous && (strides[ax] == 1 || n == 1);
    } else if (n > 1 && (static_cast<uint64_t>(strides[ax]) * element_bytes) % 16 != 0) {
      bits.aligned = false;
    }
  }
  return bits;
}

void set_row_major_masks(Specialization& spec, const KernelSignature& sig,
                         const std::vector<int64_t>& sizes) {
  constexpr int64_t kUnknown = 16;
  auto size_of = [&](const ir::Extent& e) -> int64_t {
    if (e.symbol < 0) return e.constant;
    if (e.symbol == sig.vector_symbol && spec.vector_extent > 0) return spec.vector_extent;
    const auto at = static_cast<size_t>(e.symbol);
    return at < sizes.size() && sizes[at] > 0 ? sizes[at] : kUnknown;
  };
  spec.aligned_mask = spec.contiguous_mask = 0;
  int32_t tensor = 0;
  for (const SignatureParam& p : sig.params) {
    if (!p.is_tensor) continue;
    std::vector<int64_t> shape(p.shape.size()), strides(p.shape.size());
    int64_t stride = 1;
    for (size_t ax = p.shape.size(); ax-- > 0;) {
      shape[ax] = size_of(p.shape[ax]);
      strides[ax] = stride;
      // (An overflowing stride stays a large multiple of 16, as the sizes' product would be.)
      if (__builtin_mul_overflow(stride, std::max<int64_t>(shape[ax], 1), &stride)) {
        stride = int64_t{1} << 60;
      }
    }
    const DType dtype = p.generic >= 0 ? spec.binding.at(static_cast<size_t>(p.generic)) : p.dtype;
    const TensorLayoutBits bits = tensor_layout_bits(p.shape, sig.vector_symbol, shape.data(),
                                                     strides.data(), dtype_size(dtype), true);
    if (bits.aligned) spec.aligned_mask |= tensor_bit(tensor);
    if (bits.contiguous) spec.contiguous_mask |= tensor_bit(tensor);
    ++tensor;
  }
}

uint32_t vector_axis_tensors(const KernelSignature& sig) {
  uint32_t mask = 0;
  int32_t tensor = 0;
  for (const SignatureParam& p : sig.params) {
    if (!p.is_tensor) continue;
    for (const ir::Extent& e : p.shape) {
      if (e.symbol >= 0 && e.symbol == sig.vector_symbol) mask |= tensor_bit(tensor);
    }
    ++tensor;
  }
  return mask;
}

std::string Specialization::symbol(const std::string& kernel, uint32_t all_vector_tensors) const {
  std::string s = "kdsl_" + kernel;
  for (DType t : binding) s += fmt::format("_{}", dtype_name(t));
  if (vector_extent >= 0) s += fmt::format("_n{}", vector_extent);
  uint32_t fast = aligned_mask & contiguous_mask & all_vector_tensors;
  if (fast != all_vector_tensors) {
    s += fmt::format("_u{:x}{:x}", aligned_mask & all_vector_tensors,
                     contiguous_mask & all_vector_tensors);
  }
  return s;
}

void specialize(ir::Kernel& k, const Specialization& s) {
  if (k.vector_symbol < 0 || s.vector_extent < 0) return;  // < 0: leave the length symbolic
  if (s.vector_extent == 0) {
    throw ArgumentError(
        fmt::format("kernel '{}': the vector axis {} has size 0; it must be at least 1", k.name,
                    k.symbols[k.vector_symbol].name));
  }
  k.symbols[k.vector_symbol].value = s.vector_extent;
}

}  // namespace kdsl

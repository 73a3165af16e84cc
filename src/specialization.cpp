#include "specialization.h"

#include <fmt/format.h>

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
        fmt::format("kernel '{}': the vector axis {} must have a positive size "
                    "(got {})",
                    k.name, k.symbols[k.vector_symbol].name, s.vector_extent));
  }
  k.symbols[k.vector_symbol].value = s.vector_extent;
}

}  // namespace kdsl

// Element types kdsl kernels compute on and store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kdsl/export.h"

namespace kdsl {

/// Storage and arithmetic element types.
/// f16: IEEE binary16; bf16: bfloat16 (8-bit exponent, 7-bit mantissa); f32/f64: IEEE binary32/64;
/// i32/i64: two's-complement integers; b8: bool stored as one byte (0 or 1);
/// c64: complex number stored as two f32 (real, imaginary), 8 bytes.
enum class DType : uint8_t { f16, bf16, f32, f64, i32, i64, b8, c64 };

inline constexpr DType kAllDTypes[] = {DType::f16, DType::bf16, DType::f32, DType::f64,
                                       DType::i32, DType::i64,  DType::b8,  DType::c64};

/// The spelling used in .kdsl source, file names and kernel symbols ("f16", "bf16", "bool", ...).
KDSL_API std::string_view dtype_name(DType t);
/// Size of one element in bytes.
KDSL_API size_t dtype_size(DType t);
/// Parses a spelling produced by dtype_name ("bool" for b8); nullopt when unknown.
KDSL_API std::optional<DType> parse_dtype(std::string_view name);

inline constexpr bool is_float(DType t) {
  return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::f64;
}
inline constexpr bool is_int(DType t) {
  return t == DType::i32 || t == DType::i64;
}
inline constexpr bool is_complex(DType t) {
  return t == DType::c64;
}

/// The type reductions and scan carries accumulate in: f64 for f64, c64 for c64, i64 for integers,
/// f32 for every other float type (f16, bf16, f32).
inline constexpr DType accumulator_dtype(DType t) {
  switch (t) {
    case DType::f64:
      return DType::f64;
    case DType::c64:
      return DType::c64;
    case DType::i32:
    case DType::i64:
    case DType::b8:
      return DType::i64;
    default:
      return DType::f32;
  }
}

}  // namespace kdsl

// Host-side rounding to the storage dtypes, shared by constant folding and the CPU interpreter.
#pragma once

#include <cstdint>
#include <string>

#include "kdsl/dtype.h"

namespace kdsl {

/// Rounds `v` to the nearest value representable in `t` (round to nearest, ties to even; overflow
/// to +-inf; NaN stays NaN). Integers truncate toward zero and saturate; bool gives 0 or 1.
/// f16 follows IEEE binary16, bf16 has f32's exponent range with 8 significant bits.
double round_to(DType t, double v);

/// Whether `v` fits a scalar or constant of dtype `t` without silent truncation or saturation:
/// integers and bool take whole numbers within their range (bool: 0 or 1); floats take any value
/// their dtype can hold, inf and nan included, but not a finite one it would round to infinity.
/// Returns "" when it fits, else why not ("which holds whole numbers only", ...).
std::string value_fit_problem(double v, DType t);

/// Bit-level conversions between storage formats and double (exact for widening).
double f16_bits_to_double(uint16_t bits);
double bf16_bits_to_double(uint16_t bits);
uint16_t double_to_f16_bits(double v);   // round to nearest even
uint16_t double_to_bf16_bits(double v);  // round to nearest even

}  // namespace kdsl

// Device-side support code shared by every generated kernel.
#pragma once

namespace kdsl {

/// CUDA C++ source (no includes) defining storage conversions (bf16/f16 as raw 16-bit values,
/// computed in f32; needs sm_80+), complex numbers, NaN-propagating min/max, vector loads/stores
/// and deterministic reduction operators (sum, max, min, Welford/Chan variance, argmax/argmin).
const char* cuda_prelude();

}  // namespace kdsl

// Device-side support code shared by every generated kernel.
#pragma once

namespace kdsl {

/// CUDA C++ source (no includes) defining storage conversions (bf16/f16 as raw 16-bit values,
/// computed in f32; needs sm_80+), complex numbers, NaN-propagating min/max, vector loads/stores
/// and deterministic reduction operators (sum, max, min, Welford/Chan variance, argmax/argmin).
const char* cuda_prelude();

/// CUDA C++ source of the approximate f32 math (kdsl_ex2_approx, kdsl_div_approx,
/// kdsl_sqrt_approx: PTX approximations without .ftz; kdsl_exp_approx and kdsl_sigmoid_approx,
/// .ftz approximations on operands scaled so that subnormal results are still kept;
/// kdsl_exp_approx_ftz, inside sigmoid, silu and expm1, where a flushed subnormal cannot show;
/// kdsl_expm1_approx, a polynomial below |x| = 1/2). Emitted after cuda_prelude() by the kernels
/// whose f32 math is approximate (cuda::approx_math).
const char* cuda_approx_math_prelude();

/// CUDA C++ source of the asynchronous global-to-shared copies (cp.async, sm_80+): kdsl_cp_async
/// of 4, 8 or 16 bytes (zero-filled when not ok), kdsl_cp_commit, kdsl_cp_wait_group<N> and
/// kdsl_cp_wait (all of this thread's copies). Emitted after cuda_prelude() by the kernels that
/// stage data in shared memory.
const char* cuda_async_copy_prelude();

}  // namespace kdsl

// Comparing a kernel's outputs with the reference interpreter's.
#pragma once

#include <string>

#include "host_tensor.h"

namespace kdsl {

/// |got - expected| <= atol + rtol * |expected| elementwise. NaN matches only NaN; infinities
/// must match exactly.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

/// The documented tolerance for outputs stored as `t` (dsl/SPEC.md section 14): a few units in
/// the last place of the storage format, since the GPU computes in f32 (f64 for f64) with its
/// own summation order while the reference computes in f64 and rounds once.
/// f64: 1e-9/1e-12; f32 and c64: 1e-4/1e-5; f16: 4e-3/1e-3; bf16: 3e-2/1e-2; integers and
/// bool: exact.
Tolerance tolerance_for(DType t);

/// The tolerance for an output of a kernel that scans or reduces along part of its loop
/// (running sums, recurrences, column sums): tolerance_for(t) with atol raised to rtol / 10
/// times the root-mean-square of `expected` (its finite values, both parts of complex ones).
/// Running sums of random inputs cross zero, where the error of an f32 sum follows the size of
/// the partial sums, not of the value: a purely relative bound there fails correct kernels
/// whichever order they sum in.
Tolerance scan_tolerance(DType t, const HostTensor& expected);

/// The tolerance for a row output of a kernel with row reductions (normalizations, softmax and
/// their backward kernels): tolerance_for(t)'s rtol, and an atol that follows the output's
/// root-mean-square, since the error of such an output follows the size of the row's values, not
/// of the element (softmax backward's dy - sum(dy * y) cancels: f32, N = 10240, 4e-5 off on
/// -0.0078 where the output's root-mean-square is about 100).
/// - f32, c64, f64: as scan_tolerance (rtol / 10 times the root-mean-square, at least the fixed
///   atol, which also covers rows that cancel entirely: RMSNorm backward of N = 1 is 1.2e-8 off
///   on 9.8e-6, the f32 limit there).
/// - f16, bf16: rtol / 10 times the root-mean-square in place of the fixed atol (at least rtol
///   times the dtype's smallest normal value). Their rounding is relative and well above f32's
///   cancellation, and the fixed atol could exceed every value: softmax outputs over 32768
///   columns average 3e-5, under bf16's 1e-2, so an output of zeros passed.
/// Integer outputs stay exact.
Tolerance row_tolerance(DType t, const HostTensor& expected);

struct Comparison {
  bool ok = true;
  int64_t checked = 0;
  int64_t mismatches = 0;
  int64_t worst = -1;  // flat index of the element with the largest error relative to its bound
  double got = 0, expected = 0, bound = 0;
  double max_abs_error = 0;
  double max_abs_expected = 0;     // the largest finite |expected| (either part of a complex one)
  int64_t nonfinite_expected = 0;  // expected values (parts) that are infinite or NaN
};

/// A note for a failed comparison whose reference reaches the end of the output dtype's range
/// (an infinity or NaN in `expected`, or a finite value above 1/1000 of the dtype's largest):
/// then the kernel's f32 arithmetic may overflow where the f64 reference does not, or overflow
/// in another order, and the inputs, not the kernel, are the likely cause (e.g. a complex
/// recurrence over random N(0, 1) coefficients, whose products grow about e^0.06 a step). Empty
/// when the comparison passed or the reference stays well inside the range.
std::string overflow_note(DType t, const Comparison& c);

/// Compares `got` with `expected` (same dtype and shape).
Comparison compare(const HostTensor& got, const HostTensor& expected, Tolerance tol);

/// "index (i, j): got X, expected Y, tolerance Z" for the worst element.
std::string describe_worst(const HostTensor& t, const Comparison& c);

}  // namespace kdsl

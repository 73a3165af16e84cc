// Float64 reference semantics of the elementwise functions of the IR. Used to fold constants in
// sema and by the CPU interpreter, so both agree by construction.
#pragma once

#include "ir.h"

namespace kdsl {

/// f(x) in float64. Bool results (isnan, ...) are 0 or 1. real/imag/conj of a real number are
/// x, 0 and x. lnot gives 1 for 0 and 0 otherwise.
double ref_unary(ir::UnaryFn fn, double x);

/// a op b in float64, with Python semantics for floordiv and mod (the result of mod has the sign
/// of b). min/max return NaN if either operand is NaN. land/lor treat nonzero as true.
/// `complex` is not a real function and returns NaN.
double ref_binary(ir::BinaryFn fn, double a, double b);

/// a cmp b (IEEE: every comparison with NaN is false except ne).
bool ref_compare(ir::CompareFn fn, double a, double b);

}  // namespace kdsl

// Internal to the CPU reference interpreter (interp.cpp, interp_scan.cpp): the value of one node
// for one loop iteration and the scalar semantics shared by kernel nodes and scan regions.
#pragma once

#include <cstddef>
#include <vector>

#include "dsl/ir.h"

namespace kdsl::interp_detail {

/// A value for one loop iteration: one element (scalar) or n elements (vector); `im` is used by
/// c64 values only.
struct Val {
  bool vec = false;
  std::vector<double> re, im;
  double r(size_t j) const { return re[vec ? j : 0]; }
  double i(size_t j) const { return im.empty() ? 0.0 : im[vec ? j : 0]; }
};

/// One element: a real number (im = 0) or a complex one.
struct Cplx {
  double re = 0, im = 0;
};

/// An elementwise node (cast, unary, binary, compare, select) on one element of its operands,
/// `arg0_dtype` being the dtype of its first operand. Float64 semantics (SPEC section 14).
Cplx eval_elementwise(const ir::Node& n, DType arg0_dtype, const Cplx* args);

/// The k results of scan node `n` (SPEC section 10) over `len` positions; `args` are the
/// values of n's operands (k values, then k initial values when n.has_init). Sequential, in
/// float64 (complex128): the plain definition, the reference the GPU is tested against.
void eval_scan(const ir::Kernel& k, const ir::Node& n, const std::vector<const Val*>& args,
               size_t len, std::vector<Val>& results);

/// shift(v, n.index, fill): out[t] = v[t - index] where 0 <= t - index < len, else fill.
void eval_shift(const ir::Node& n, const Val& v, const Val& fill, size_t len, Val& out);

}  // namespace kdsl::interp_detail

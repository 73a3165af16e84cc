#include "verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kdsl {

Tolerance tolerance_for(DType t) {
  switch (t) {
    case DType::f64:
      return {1e-9, 1e-12};
    case DType::f32:
    case DType::c64:
      return {1e-4, 1e-5};
    case DType::f16:
      return {4e-3, 1e-3};
    case DType::bf16:
      return {3e-2, 1e-2};
    default:
      return {0, 0};
  }
}

namespace {

// rtol / 10 times the root-mean-square of the finite values of `expected` (both parts of complex
// ones).
double rms_atol(double rtol, const HostTensor& expected) {
  double ss = 0;
  const int64_t n = expected.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double x = expected.get(i), y = expected.get_imag(i);
    if (std::isfinite(x)) ss += x * x;
    if (std::isfinite(y)) ss += y * y;
  }
  return rtol * 0.1 * std::sqrt(ss / std::max<int64_t>(n, 1));
}

// The smallest positive normal value of a 16-bit floating-point dtype (0 for the others).
double smallest_normal(DType t) {
  switch (t) {
    case DType::bf16:
      return std::numeric_limits<float>::min();
    case DType::f16:
      return 0x1p-14;
    default:
      return 0;
  }
}

}  // namespace

Tolerance scan_tolerance(DType t, const HostTensor& expected) {
  Tolerance tol = tolerance_for(t);
  tol.atol = std::max(tol.atol, rms_atol(tol.rtol, expected));
  return tol;
}

Tolerance row_tolerance(DType t, const HostTensor& expected) {
  if (t != DType::f16 && t != DType::bf16) return scan_tolerance(t, expected);
  Tolerance tol = tolerance_for(t);
  tol.atol = std::max(rms_atol(tol.rtol, expected), tol.rtol * smallest_normal(t));
  return tol;
}

Comparison compare(const HostTensor& got, const HostTensor& expected, Tolerance tol) {
  Comparison c;
  double worst_ratio = -1;
  int64_t n = expected.numel();
  for (int64_t i = 0; i < n; ++i) {
    for (int part = 0; part < (got.dtype == DType::c64 ? 2 : 1); ++part) {
      double g = part ? got.get_imag(i) : got.get(i);
      double e = part ? expected.get_imag(i) : expected.get(i);
      double bound = tol.atol + tol.rtol * std::fabs(e);
      double err;
      bool ok;
      if (std::isnan(e) || std::isnan(g)) {
        ok = std::isnan(e) && std::isnan(g);
        err = ok ? 0 : INFINITY;
      } else if (std::isinf(e) || std::isinf(g)) {
        ok = g == e;
        err = ok ? 0 : INFINITY;
      } else {
        err = std::fabs(g - e);
        ok = err <= bound;
      }
      ++c.checked;
      if (std::isfinite(e)) {
        c.max_abs_expected = std::max(c.max_abs_expected, std::fabs(e));
      } else {
        ++c.nonfinite_expected;
      }
      if (!ok) ++c.mismatches;
      if (std::isfinite(err)) c.max_abs_error = std::max(c.max_abs_error, err);
      double ratio = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0);
      if (ratio > worst_ratio || (!ok && c.ok)) {
        worst_ratio = ratio;
        c.worst = i;
        c.got = g;
        c.expected = e;
        c.bound = bound;
      }
      if (!ok) c.ok = false;
    }
  }
  return c;
}

std::string overflow_note(DType t, const Comparison& c) {
  if (c.ok) return "";
  double largest = 0;
  switch (t) {
    case DType::f64:
      largest = 1.7976931348623157e308;
      break;
    case DType::f32:
    case DType::c64:
      largest = 3.4028234663852886e38;
      break;
    case DType::f16:
      largest = 65504.0;
      break;
    case DType::bf16:
      largest = 3.3895313892515355e38;
      break;
    default:
      return "";
  }
  if (c.nonfinite_expected > 0) {
    return fmt::format(
        "the reference itself has {} infinite or NaN {}: the inputs overflow {}; give bounded "
        "ones (--in)",
        c.nonfinite_expected, c.nonfinite_expected == 1 ? "value" : "values", dtype_name(t));
  }
  if (c.max_abs_expected > largest * 1e-3) {
    return fmt::format(
        "the reference reaches {:.3g}, near the largest {} ({:g}): the inputs may overflow the "
        "kernel's arithmetic; give bounded ones (--in)",
        c.max_abs_expected, dtype_name(t), largest);
  }
  return "";
}

std::string describe_worst(const HostTensor& t, const Comparison& c) {
  if (c.worst < 0) return "no elements";
  std::string idx;
  int64_t rest = c.worst;
  std::vector<int64_t> st = t.strides();
  for (size_t a = 0; a < t.shape.size(); ++a) {
    idx += fmt::format("{}{}", a ? ", " : "", rest / st[a]);
    rest %= st[a];
  }
  return fmt::format("index ({}): got {:.9g}, expected {:.9g}, tolerance {:.3g}", idx, c.got,
                     c.expected, c.bound);
}

}  // namespace kdsl

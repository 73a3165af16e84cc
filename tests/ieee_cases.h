// NaN and infinity inputs to the stdlib kernels, with the result IEEE arithmetic gives for each
// (the table in docs/reliability.md). tests/bad_input_test.cpp checks them on the CPU reference
// interpreter, tests/ieee_gpu_test.cpp on the GPU. Every case is f32 with M = 2 rows of N = 8:
// row 0 of `input` holds the special values, row 1 ordinary ones, and the other inputs are seeded
// random normals.
#pragma once

#include <cmath>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "src/harness.h"

namespace kdsl::testing {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

struct IeeeCase {
  const char* name;
  const char* file;  // under the source tree
  const char* kernel;
  const char* input;  // the input whose row 0 is `row`
  std::vector<double> row;
  const char* output;  // the output checked
  // One character per checked element: 'n' NaN, '+' +inf, '-' -inf, '0' zero (either sign),
  // 'f' finite and non-zero. Checked: row 0 of an (M, N) output, element 0 of an (M,) output,
  // every element of an (N,) output (a column reduction over both rows).
  std::string expected;
  // The GPU's classes where they differ (empty: the same): the reference interpreter computes in
  // float64, the kernels in f32, so a value whose square overflows f32 is finite only on the CPU.
  std::string gpu_expected;
};

/// Names a case in test output (gtest finds it by argument-dependent lookup).
inline void PrintTo(const IeeeCase& c, std::ostream* os) {
  *os << c.name;
}

/// n values: four of 1e38 (their f32 sum overflows at the fourth), then ones.
inline std::vector<double> overflow_row(size_t n) {
  std::vector<double> row(n, 1.0);
  for (size_t i = 0; i < 4 && i < n; ++i) row[i] = 1e38;
  return row;
}

inline const std::vector<IeeeCase>& ieee_cases() {
  static const std::vector<IeeeCase> cases = {
      {"softmax_nan",
       "stdlib/softmax.kdsl",
       "softmax",
       "x",
       {1, 2, kNaN, 4, 5, 6, 7, 8},
       "y",
       "nnnnnnnn"},
      {"softmax_plus_inf",
       "stdlib/softmax.kdsl",
       "softmax",
       "x",
       {1, 2, kInf, 4, 5, 6, 7, 8},
       "y",
       "nnnnnnnn"},
      {"softmax_minus_inf",
       "stdlib/softmax.kdsl",
       "softmax",
       "x",
       {1, 2, -kInf, 4, 5, 6, 7, 8},
       "y",
       "ff0fffff"},
      {"softmax_all_minus_inf", "stdlib/softmax.kdsl", "softmax", "x",
       std::vector<double>(8, -kInf), "y", "00000000"},
      // -inf before the first finite value, and the maximum last (each later value raises the
      // running maximum of an online sum, which rescales its sum each time).
      {"softmax_minus_inf_first_rising",
       "stdlib/softmax.kdsl",
       "softmax",
       "x",
       {-kInf, -kInf, -3, -2, -1, 0, 1, 2},
       "y",
       "00ffffff"},
      {"log_softmax_minus_inf_first_rising",
       "stdlib/softmax.kdsl",
       "log_softmax",
       "x",
       {-kInf, -kInf, -3, -2, -1, 0, 1, 2},
       "y",
       "--ffffff"},
      {"log_softmax_nan",
       "stdlib/softmax.kdsl",
       "log_softmax",
       "x",
       {1, 2, kNaN, 4, 5, 6, 7, 8},
       "y",
       "nnnnnnnn"},
      {"log_softmax_plus_inf",
       "stdlib/softmax.kdsl",
       "log_softmax",
       "x",
       {1, 2, kInf, 4, 5, 6, 7, 8},
       "y",
       "nnnnnnnn"},
      {"log_softmax_minus_inf",
       "stdlib/softmax.kdsl",
       "log_softmax",
       "x",
       {1, 2, -kInf, 4, 5, 6, 7, 8},
       "y",
       "ff-fffff"},
      {"log_softmax_all_minus_inf", "stdlib/softmax.kdsl", "log_softmax", "x",
       std::vector<double>(8, -kInf), "y", "--------"},
      {"rms_norm_nan",
       "stdlib/rms_norm.kdsl",
       "rms_norm",
       "x",
       {1, 2, kNaN, 4, 5, 6, 7, 8},
       "y",
       "nnnnnnnn"},
      {"rms_norm_nan_rstd",
       "stdlib/rms_norm.kdsl",
       "rms_norm",
       "x",
       {1, 2, kNaN, 4, 5, 6, 7, 8},
       "rstd",
       "n"},
      {"rms_norm_plus_inf",
       "stdlib/rms_norm.kdsl",
       "rms_norm",
       "x",
       {1, 2, kInf, 4, 5, 6, 7, 8},
       "y",
       "00n00000"},
      {"rms_norm_plus_inf_rstd",
       "stdlib/rms_norm.kdsl",
       "rms_norm",
       "x",
       {1, 2, kInf, 4, 5, 6, 7, 8},
       "rstd",
       "0"},
      {"rms_norm_square_overflows_f32",
       "stdlib/rms_norm.kdsl",
       "rms_norm",
       "x",
       {1, 2, 1e30, 4, 5, 6, 7, 8},
       "y",
       "ffffffff",
       "00000000"},
      {"rms_norm_square_overflows_f32_rstd",
       "stdlib/rms_norm.kdsl",
       "rms_norm",
       "x",
       {1, 2, 1e30, 4, 5, 6, 7, 8},
       "rstd",
       "f",
       "0"},
      {"rms_norm_zero_row", "stdlib/rms_norm.kdsl", "rms_norm", "x", std::vector<double>(8, 0), "y",
       "00000000"},
      {"rms_norm_zero_row_rstd", "stdlib/rms_norm.kdsl", "rms_norm", "x", std::vector<double>(8, 0),
       "rstd", "f"},
      {"layer_norm_nan",
       "stdlib/layer_norm.kdsl",
       "layer_norm",
       "x",
       {1, 2, kNaN, 4, 5, 6, 7, 8},
       "y",
       "nnnnnnnn"},
      {"layer_norm_plus_inf",
       "stdlib/layer_norm.kdsl",
       "layer_norm",
       "x",
       {1, 2, kInf, 4, 5, 6, 7, 8},
       "y",
       "nnnnnnnn"},
      {"layer_norm_plus_inf_mu",
       "stdlib/layer_norm.kdsl",
       "layer_norm",
       "x",
       {1, 2, kInf, 4, 5, 6, 7, 8},
       "mu",
       "+"},
      // One thread holds the row (N = 8); its sum shifted by the first value, 0, is 2.1e19, whose
      // square overflows f32 though the sum of squares (6.3e37) and the variance do not: the
      // variance must stay finite and right (s * (s / n), not s * s / n).
      {"layer_norm_square_of_sum_overflows_f32",
       "stdlib/layer_norm.kdsl",
       "layer_norm",
       "x",
       {0, 3e18, 3e18, 3e18, 3e18, 3e18, 3e18, 3e18},
       "y",
       "ffffffff"},
      {"layer_norm_constant_row", "stdlib/layer_norm.kdsl", "layer_norm", "x",
       std::vector<double>(8, 3), "y", "ffffffff"},
      {"rms_norm_bwd_nan_dy",
       "stdlib/rms_norm.kdsl",
       "rms_norm_bwd",
       "dy",
       {1, 2, kNaN, 4, 5, 6, 7, 8},
       "dx",
       "nnnnnnnn"},
      {"rms_norm_bwd_nan_dy_dw",
       "stdlib/rms_norm.kdsl",
       "rms_norm_bwd",
       "dy",
       {1, 2, kNaN, 4, 5, 6, 7, 8},
       "dw",
       "ffnfffff"},
      // Scans (stdlib/scan.kdsl): a running sum that reaches +inf stays +inf, inf - inf is NaN
      // from there on, 0 * inf is NaN, exp(-inf) contributes nothing.
      {"cumsum_plus_inf",
       "stdlib/scan.kdsl",
       "cumsum",
       "x",
       {1, 2, kInf, 4, 5, 6, 7, 8},
       "y",
       "ff++++++"},
      {"cumsum_nan",
       "stdlib/scan.kdsl",
       "cumsum",
       "x",
       {1, 2, kNaN, 4, 5, 6, 7, 8},
       "y",
       "ffnnnnnn"},
      {"cumsum_inf_minus_inf",
       "stdlib/scan.kdsl",
       "cumsum",
       "x",
       {1, kInf, -kInf, 4, 5, 6, 7, 8},
       "y",
       "f+nnnnnn"},
      {"cumsum_reverse_plus_inf",
       "stdlib/scan.kdsl",
       "cumsum_reverse",
       "x",
       {1, 2, kInf, 4, 5, 6, 7, 8},
       "y",
       "+++fffff"},
      // 5000 positions (more than one chunk of the GPU schedule): the f32 sum overflows at the
      // fourth and stays +inf across the chunks (the float64 reference's 4e38 is +inf in the
      // f32 output too).
      {"cumsum_overflows_f32_long", "stdlib/scan.kdsl", "cumsum", "x", overflow_row(5000), "y",
       "fff" + std::string(4997, '+')},
      {"cumprod_zero_times_inf",
       "stdlib/scan.kdsl",
       "cumprod",
       "x",
       {2, 0, kInf, 4, 5, 6, 7, 8},
       "y",
       "f0nnnnnn"},
      {"logcumsumexp_minus_inf",
       "stdlib/scan.kdsl",
       "logcumsumexp",
       "x",
       {-kInf, -kInf, 1, 2, 3, 4, 5, 6},
       "y",
       "--ffffff"},
      {"logcumsumexp_plus_inf",
       "stdlib/scan.kdsl",
       "logcumsumexp",
       "x",
       {1, kInf, 2, 3, 4, 5, 6, 7},
       "y",
       "f+++++++"},
      {"logcumsumexp_nan",
       "stdlib/scan.kdsl",
       "logcumsumexp",
       "x",
       {1, kNaN, 2, 3, 4, 5, 6, 7},
       "y",
       "fnnnnnnn"},
  };
  return cases;
}

/// The class of one value, as IeeeCase::expected spells it.
inline char ieee_class(double v) {
  if (std::isnan(v)) return 'n';
  if (std::isinf(v)) return v > 0 ? '+' : '-';
  return v == 0 ? '0' : 'f';
}

/// The problem of a case: M = 2, N = 8, f32; row 1 of the special input is 0.5, -1, 1.5, ...
inline Problem ieee_problem(const IeeeCase& c, std::shared_ptr<const FrontEnd> fe) {
  ProblemSpec ps;
  ps.kernel = c.kernel;
  ps.binding = {DType::f32};
  ps.shapes = {{"M", 2}, {"N", static_cast<int64_t>(c.row.size())}};
  ps.seed = 7;
  HostTensor x(DType::f32, {2, static_cast<int64_t>(c.row.size())});
  for (size_t j = 0; j < c.row.size(); ++j) {
    x.set(static_cast<int64_t>(j), c.row[j]);
    x.set(static_cast<int64_t>(c.row.size() + j), (j % 2 ? -1.0 : 1.0) * (0.5 + 0.5 * j));
  }
  ps.inputs[c.input] = x;
  return make_problem(std::move(fe), ps);
}

/// The classes of the checked elements of output `name` of `p` in `tensors`.
inline std::string ieee_classes(const Problem& p, const std::vector<HostTensor>& tensors,
                                const std::string& name) {
  for (size_t t = 0; t < p.ir.tensors.size(); ++t) {
    if (p.ir.tensors[t].name != name) continue;
    const HostTensor& h = tensors[t];
    int64_t count = h.shape.size() == 2 ? h.shape[1] : h.shape[0] == 2 ? 1 : h.numel();
    std::string out;
    for (int64_t i = 0; i < count; ++i) out += ieee_class(h.get(i));
    return out;
  }
  return "(no output " + name + ")";
}

/// The elements of output `name` finite in both `got` and the reference `ref` that differ by more
/// than 1e-4 + 1e-4 |reference|, one "element I: GOT against REF" per line (empty: none).
inline std::string ieee_finite_mismatches(const Problem& p, const std::vector<HostTensor>& got,
                                          const std::vector<HostTensor>& ref,
                                          const std::string& name) {
  std::string out;
  for (size_t t = 0; t < got.size(); ++t) {
    if (p.ir.tensors[t].name != name) continue;
    for (int64_t i = 0; i < got[t].numel(); ++i) {
      double g = got[t].get(i), r = ref[t].get(i);
      if (std::isfinite(g) && std::isfinite(r) && std::fabs(g - r) > 1e-4 + 1e-4 * std::fabs(r)) {
        out += "element " + std::to_string(i) + ": " + std::to_string(g) + " against " +
               std::to_string(r) + "\n";
      }
    }
  }
  return out;
}

}  // namespace kdsl::testing

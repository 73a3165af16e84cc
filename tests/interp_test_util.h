// Shared by the interpreter tests: problems built from stdlib or inline modules, float64
// forward formulas of the stdlib kernels, finite differences, and the comparison with a float64
// reference.
//
// Tolerance (expect_rounded_from): the interpreter computes in float64 and rounds once to the
// storage dtype, so an output must lie within half a unit in the last place of its dtype of the
// float64 reference (relative 2^-24 for f32, 2^-11 for f16, 2^-8 for bf16, and half the
// subnormal spacing near zero), plus 1e-12 of the tensor's largest magnitude for the float64
// rounding differences between two summation orders.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "src/harness.h"

namespace kdsl::interp_testing {

using Vec = std::vector<double>;
using Refs = std::map<std::string, Vec>;  // expected output values by tensor name, row-major

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

inline std::shared_ptr<const FrontEnd> stdlib(const std::string& file) {
  static std::map<std::string, std::shared_ptr<const FrontEnd>> cache;
  auto& fe = cache[file];
  if (!fe) fe = run_front_end(SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/" + file));
  return fe;
}

// Significand bits after the point, and the spacing of subnormals, of a storage dtype.
inline int mantissa_bits(DType t) {
  return t == DType::f16 ? 10 : t == DType::bf16 ? 7 : 23;
}
inline double subnormal_spacing(DType t) {
  return std::ldexp(1.0, t == DType::f16 ? -24 : t == DType::bf16 ? -133 : -149);
}

/// Checks `got` (an output tensor) against the float64 reference with the tolerance stated at
/// the top of this file.
inline void expect_rounded_from(const HostTensor& got, const Vec& ref, const std::string& label) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(ref.size())) << label;
  double scale = 0;
  for (double r : ref) {
    if (std::isfinite(r)) scale = std::max(scale, std::fabs(r));
  }
  int bad = 0;
  for (size_t i = 0; i < ref.size() && bad < 5; ++i) {
    double g = got.get(static_cast<int64_t>(i)), r = ref[i];
    if (std::isinf(r) || std::isnan(r)) {
      if (!(g == r || (std::isnan(g) && std::isnan(r)))) {
        ADD_FAILURE() << label << " [" << i << "]: got " << g << ", expected " << r;
        ++bad;
      }
      continue;
    }
    double tol = 0.5 * std::fabs(r) * std::ldexp(1.0, -mantissa_bits(got.dtype)) * (1 + 1e-9) +
                 0.5 * subnormal_spacing(got.dtype) + 1e-12 * scale;
    if (!(std::fabs(g - r) <= tol)) {
      ADD_FAILURE() << label << " [" << i << "]: got " << g << ", expected " << r << " (|diff| "
                    << std::fabs(g - r) << " > " << tol << ")";
      ++bad;
    }
  }
}

/// A module from source text (which must check without errors).
inline std::shared_ptr<const FrontEnd> module(const std::string& text) {
  return run_front_end(std::make_shared<const SourceFile>("t.kdsl", text));
}

/// A problem for `kernel` of `fe` (bound to `binding`) with every shape symbol given; `inputs`
/// override the random inputs.
inline Problem problem(std::shared_ptr<const FrontEnd> fe, const std::string& kernel,
                       std::vector<DType> binding, std::map<std::string, int64_t> shapes,
                       std::map<std::string, HostTensor> inputs = {},
                       std::map<std::string, double> scalars = {}, uint64_t seed = 1) {
  ProblemSpec ps;
  ps.kernel = kernel;
  ps.binding = std::move(binding);
  ps.shapes = std::move(shapes);
  ps.seed = seed;
  ps.inputs = std::move(inputs);
  ps.scalars = std::move(scalars);
  return make_problem(std::move(fe), ps);
}

/// A problem for stdlib `kernel` with shapes (M, N); `inputs` override the random inputs.
inline Problem problem(const std::string& file, const std::string& kernel, DType t, int64_t m,
                       int64_t n, uint64_t seed, std::map<std::string, HostTensor> inputs = {},
                       std::map<std::string, double> scalars = {}) {
  return problem(stdlib(file), kernel, {t}, {{"M", m}, {"N", n}}, std::move(inputs),
                 std::move(scalars), seed);
}

inline const HostTensor& tensor(const Problem& p, const std::vector<HostTensor>& ts,
                                const std::string& name) {
  for (size_t i = 0; i < p.ir.tensors.size(); ++i) {
    if (p.ir.tensors[i].name == name) return ts[i];
  }
  throw std::runtime_error("no tensor " + name);
}

inline Vec values(const HostTensor& t) {
  Vec v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.get(static_cast<int64_t>(i));
  return v;
}

inline HostTensor make_tensor(DType t, std::vector<int64_t> shape, const Vec& v) {
  HostTensor h(t, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) h.set(static_cast<int64_t>(i), v[i]);
  return h;
}

/// Seeded standard-normal values.
inline Vec normal(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, scale);
  Vec v(n);
  for (double& x : v) x = d(rng);
  return v;
}

inline double rounded(DType t, double v) {
  HostTensor h(t, {1});
  h.set(0, v);
  return h.get(0);
}

// --- Float64 forward formulas, one row at a time -----------------------------------------------

struct RmsRow {
  Vec y;
  double r;
};
inline RmsRow rms_norm_row(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t j = 0; j < x.size(); ++j) y[j] = x[j] * r * w[j];
  return {y, r};
}

struct LnRow {
  Vec y;
  double mu, r;
};
inline LnRow layer_norm_row(const Vec& x, const Vec& w, const Vec& b, double eps) {
  double n = static_cast<double>(x.size()), mu = 0, var = 0;
  for (double v : x) mu += v;
  mu /= n;
  for (double v : x) var += (v - mu) * (v - mu);
  var /= n;
  double r = 1.0 / std::sqrt(var + eps);
  Vec y(x.size());
  for (size_t j = 0; j < x.size(); ++j) y[j] = (x[j] - mu) * r * w[j] + b[j];
  return {y, mu, r};
}

inline Vec softmax_row(const Vec& x) {
  double mx = -kInf;
  for (double v : x) mx = std::max(mx, v);
  if (mx == -kInf) return Vec(x.size(), 0.0);  // the documented all -inf policy
  double s = 0;
  for (double v : x) s += std::exp(v - mx);
  Vec y(x.size());
  for (size_t j = 0; j < x.size(); ++j) y[j] = std::exp(x[j] - mx) / s;
  return y;
}

inline Vec log_softmax_row(const Vec& x) {
  double mx = -kInf;
  for (double v : x) mx = std::max(mx, v);
  if (mx == -kInf) return Vec(x.size(), -kInf);
  double s = 0;
  for (double v : x) s += std::exp(v - mx);
  Vec y(x.size());
  for (size_t j = 0; j < x.size(); ++j) y[j] = x[j] - mx - std::log(s);
  return y;
}

inline Vec row(const Vec& v, int64_t m, int64_t n) {
  return Vec(v.begin() + m * n, v.begin() + (m + 1) * n);
}

/// Random rows x (dtype t, named `x_name`) and their RMSNorm rstd (f32, eps = 1e-6, named rstd):
/// the saved tensors of a backward kernel.
inline std::map<std::string, HostTensor> rms_saved(DType t, int64_t m, int64_t n, uint64_t seed,
                                                   const char* x_name) {
  Vec x = values(make_tensor(t, {m, n}, normal(static_cast<size_t>(m * n), seed)));
  Vec w(static_cast<size_t>(n), 1.0), r(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) r[i] = rms_norm_row(row(x, i, n), w, 1e-6).r;
  return {{x_name, make_tensor(t, {m, n}, x)}, {"rstd", make_tensor(DType::f32, {m}, r)}};
}

// --- Finite differences -------------------------------------------------------------------------
//
// Central differences in float64 with step 1e-5 * max(1, |v|). A backward kernel run in f32 must
// agree to 2e-5 of the gradient's largest magnitude (the f32 rounding of its inputs and of saved
// statistics, about 1e-7, plus the finite-difference error, about 1e-9).

using Loss = std::function<double(const Vec&)>;

inline Vec finite_difference(const Loss& loss, Vec v) {
  Vec g(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    double h = 1e-5 * std::max(1.0, std::fabs(v[i])), keep = v[i];
    v[i] = keep + h;
    double up = loss(v);
    v[i] = keep - h;
    double down = loss(v);
    v[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

inline void expect_gradient(const HostTensor& got, const Vec& fd, const std::string& label) {
  double scale = 0;
  for (double v : fd) scale = std::max(scale, std::fabs(v));
  ASSERT_GT(scale, 0) << label;
  for (size_t i = 0; i < fd.size(); ++i) {
    EXPECT_NEAR(got.get(static_cast<int64_t>(i)), fd[i], 2e-5 * scale) << label << " [" << i << "]";
  }
}

inline double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

/// Random f32 values (exactly representable, so the float64 formulas see the kernel's inputs).
Vec f32_values(size_t n, uint64_t seed, double scale = 1.0, double offset = 0.0) {
  Vec v = normal(n, seed, scale);
  for (double& x : v) x = rounded(DType::f32, x + offset);
  return v;
}

}  // namespace kdsl::interp_testing

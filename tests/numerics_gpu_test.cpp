// The numerics cases of issue 3 on the GPU: closed-form expectations (and, where the GPU's f32
// arithmetic is expected to agree, the reference interpreter with the documented tolerance).
// Skips without a CUDA driver or device.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "cache_test_util.h"
#include "gpu_test_util.h"

namespace kdsl {
namespace {

using Vec = std::vector<double>;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

HostTensor make_tensor(DType t, std::vector<int64_t> shape, const Vec& v) {
  HostTensor h(t, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) h.set(static_cast<int64_t>(i), v[i]);
  return h;
}

Vec normal(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, scale);
  Vec v(n);
  for (double& x : v) x = d(rng);
  return v;
}

Problem problem(const std::string& file, const std::string& kernel, DType t, int64_t m, int64_t n,
                std::map<std::string, HostTensor> inputs,
                std::map<std::string, double> scalars = {}, uint64_t seed = 1) {
  ProblemSpec ps;
  ps.kernel = kernel;
  ps.binding = {t};
  ps.shapes = {{"M", m}, {"N", n}};
  ps.inputs = std::move(inputs);
  ps.scalars = std::move(scalars);
  ps.seed = seed;
  return make_problem(testing::front_end(file), ps);
}

/// Runs `p` on the GPU and returns every tensor (outputs downloaded).
std::vector<HostTensor> run_gpu(const Problem& p) {
  GpuRun gpu(p);
  gpu.launch();
  std::vector<HostTensor> out = p.tensors;
  gpu.download(out);
  return out;
}

const HostTensor& tensor(const Problem& p, const std::vector<HostTensor>& ts,
                         const std::string& name) {
  for (size_t i = 0; i < p.ir.tensors.size(); ++i) {
    if (p.ir.tensors[i].name == name) return ts[i];
  }
  throw std::runtime_error("no tensor " + name);
}

TEST(NumericsGpu, LayerNormOfAZeroF16RowWithTinyEpsIsFinite) {
  KDSL_REQUIRE_GPU();
  for (int64_t n : {int64_t{1000}, int64_t{4096}}) {
    const int64_t m = 64;
    Problem p =
        problem("stdlib/layer_norm.kdsl", "layer_norm", DType::f16, m, n,
                {{"x", make_tensor(DType::f16, {m, n}, Vec(m * n, 0.0))}}, {{"eps", 1e-12}}, 2);
    std::vector<HostTensor> got = run_gpu(p);
    const HostTensor &y = tensor(p, got, "y"), &b = tensor(p, got, "b");
    for (int64_t i = 0; i < m; ++i) {
      ASSERT_EQ(tensor(p, got, "mu").get(i), 0.0);
      ASSERT_NEAR(tensor(p, got, "rstd").get(i), 1e6, 1.0);  // f32 eps: not rsqrt(0) = inf
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(y.get(i * n + j), b.get(j)) << i << ", " << j;
    }
    testing::expect_gpu_matches_reference(p, fmt::format("zero row N={}", n));
  }
}

TEST(NumericsGpu, VarianceWithoutCancellation) {
  KDSL_REQUIRE_GPU();
  const int64_t n = 10240, m = 4;
  Vec x(m * n, 256.0);
  for (int64_t i = 0; i < m; ++i) x[i * n + n - 1] = 255.0;
  Problem p = problem("stdlib/layer_norm.kdsl", "layer_norm", DType::f32, m, n,
                      {{"x", make_tensor(DType::f32, {m, n}, x)},
                       {"w", make_tensor(DType::f32, {n}, Vec(n, 1.0))},
                       {"b", make_tensor(DType::f32, {n}, Vec(n, 0.0))}},
                      {{"eps", 1e-5}});
  std::vector<HostTensor> got = run_gpu(p);
  double mu = 256.0 - 1.0 / n, var = (1.0 / n) * (1.0 - 1.0 / n);
  double eps = static_cast<float>(1e-5), r = 1.0 / std::sqrt(var + eps);
  // The GPU's mean is an f32 just below 256, a multiple of 2^-16 = 1.5e-5: x - mean carries up
  // to one such step (a correctly rounded mean, half of it) of absolute error, a sizeable part
  // of the 9.77e-5 between 256 and the mean. The interpreter (float64) has no such error.
  const double mean_error = std::ldexp(1.0, -16);
  const HostTensor& y = tensor(p, got, "y");
  for (int64_t i = 0; i < m; ++i) {
    double rstd = tensor(p, got, "rstd").get(i);
    EXPECT_NEAR(rstd, r, r * 1e-4) << "var = " << 1 / (rstd * rstd) - eps;  // var ~ 9.76e-5
    EXPECT_NEAR(tensor(p, got, "mu").get(i), mu, mean_error * 1.01);
    EXPECT_NEAR(y.get(i * n + n - 1), (255.0 - mu) * r, 1e-2);  // about -96.4
    for (int64_t j = 0; j + 1 < n; ++j) {
      ASSERT_NEAR(y.get(i * n + j), (1.0 / n) * r, mean_error * r * 1.01 + 1e-6) << i << ", " << j;
      ASSERT_GT(y.get(i * n + j), 0.0);  // about +0.0094, never the wrong sign
    }
  }
}

TEST(NumericsGpu, RmsNormOfLargeF16InputsIsScaleInvariant) {
  KDSL_REQUIRE_GPU();
  const int64_t m = 64, n = 4096;
  Vec small = normal(m * n, 3);
  for (double& v : small) v = std::clamp(v, -7.5, 7.5);
  HostTensor xs = make_tensor(DType::f16, {m, n}, small);
  HostTensor xb(DType::f16, {m, n});
  for (int64_t i = 0; i < m * n; ++i) xb.set(i, xs.get(i) * 8192.0);  // exact: a power of 2
  HostTensor w = make_tensor(DType::f16, {n}, normal(n, 4));
  Problem ps = problem("stdlib/rms_norm.kdsl", "rms_norm", DType::f16, m, n, {{"x", xs}, {"w", w}});
  Problem pb = problem("stdlib/rms_norm.kdsl", "rms_norm", DType::f16, m, n, {{"x", xb}, {"w", w}});
  std::vector<HostTensor> gs = run_gpu(ps), gb = run_gpu(pb);
  const HostTensor &ys = tensor(ps, gs, "y"), &yb = tensor(pb, gb, "y");
  int64_t nonzero = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    ASSERT_TRUE(std::isfinite(yb.get(i))) << i;
    // f16 results of f32 computations that differ by a few f32 ulps: one f16 ulp apart at most.
    ASSERT_NEAR(yb.get(i), ys.get(i), std::ldexp(std::fabs(ys.get(i)), -10) + 1e-7) << i;
    nonzero += yb.get(i) != 0;
  }
  EXPECT_GT(nonzero, m * n * 9 / 10);
  for (int64_t i = 0; i < m; ++i) {
    double rs = tensor(ps, gs, "rstd").get(i), rb = tensor(pb, gb, "rstd").get(i);
    EXPECT_NEAR(rb * 8192.0, rs, rs * 1e-5);
  }
  testing::expect_gpu_matches_reference(pb, "rms_norm f16 x ~ 1e4");
}

TEST(NumericsGpu, AddRmsNormBwdIsResidualGradientPlusRmsNormBwd) {
  KDSL_REQUIRE_GPU();
  const int64_t m = 300, n = 4096;
  for (DType t : kDtypes) {
    // Realistic saved tensors: h and rstd from the forward on the CPU reference.
    Problem fwd = problem("stdlib/rms_norm.kdsl", "add_rms_norm", t, m, n, {}, {}, 5);
    std::vector<HostTensor> f = run_reference(fwd);
    std::map<std::string, HostTensor> in = {{"h", tensor(fwd, f, "h")},
                                            {"rstd", tensor(fwd, f, "rstd")},
                                            {"w", tensor(fwd, f, "w")},
                                            {"dy", make_tensor(t, {m, n}, normal(m * n, 6))},
                                            {"dh", make_tensor(t, {m, n}, normal(m * n, 7))}};
    Problem fused = problem("stdlib/rms_norm.kdsl", "add_rms_norm_bwd", t, m, n, in);
    std::vector<HostTensor> got = testing::expect_gpu_matches_reference(
        fused, fmt::format("add_rms_norm_bwd {}", dtype_name(t)));
    in["x"] = in["h"];
    in.erase("h");
    in.erase("dh");
    Problem plain = problem("stdlib/rms_norm.kdsl", "rms_norm_bwd", t, m, n, in);
    std::vector<HostTensor> got_plain = run_gpu(plain);
    const HostTensor &dx = tensor(fused, got, "dx"), &dx_plain = tensor(plain, got_plain, "dx");
    const HostTensor& dh = tensor(fused, fused.tensors, "dh");
    Tolerance tol = tolerance_for(t);
    for (int64_t i = 0; i < m * n; ++i) {
      double expected = dh.get(i) + dx_plain.get(i);
      // Two roundings to T (dx_plain and dx): twice the documented tolerance.
      ASSERT_NEAR(dx.get(i), expected, 2 * (tol.atol + tol.rtol * std::fabs(expected)))
          << dtype_name(t) << " " << i;
    }
    // dw does not see dh at all (the two kernels may sum the rows in different orders).
    const HostTensor &dw = tensor(fused, got, "dw"), &dw_plain = tensor(plain, got_plain, "dw");
    for (int64_t j = 0; j < n; ++j) {
      double e = dw_plain.get(j);
      ASSERT_NEAR(dw.get(j), e, 2 * (tol.atol + tol.rtol * std::fabs(e)))
          << dtype_name(t) << " " << j;
    }
  }
}

TEST(NumericsGpu, SoftmaxOfAMostlyMaskedRow) {
  KDSL_REQUIRE_GPU();
  const int64_t n = 4096, m = 3;
  for (DType t : kDtypes) {
    // Row 0: the first 8 entries finite; row 1: entirely -inf; row 2: entirely finite.
    Vec x(m * n, -kInf), head = normal(8, 8, 3.0), last = normal(n, 9, 3.0);
    for (int j = 0; j < 8; ++j) x[j] = head[j];
    for (int64_t j = 0; j < n; ++j) x[2 * n + j] = last[j];
    HostTensor xt = make_tensor(t, {m, n}, x);
    Problem sp = problem("stdlib/softmax.kdsl", "softmax", t, m, n, {{"x", xt}});
    Problem lp = problem("stdlib/softmax.kdsl", "log_softmax", t, m, n, {{"x", xt}});
    HostTensor y =
        testing::expect_gpu_matches_reference(sp, fmt::format("softmax {}", dtype_name(t)))[1];
    HostTensor ly =
        testing::expect_gpu_matches_reference(lp, fmt::format("log_softmax {}", dtype_name(t)))[1];
    double mx = -kInf, s = 0;
    for (int j = 0; j < 8; ++j) mx = std::max(mx, xt.get(j));
    for (int j = 0; j < 8; ++j) s += std::exp(xt.get(j) - mx);
    Tolerance tol = tolerance_for(t);
    for (int j = 0; j < 8; ++j) {
      double e = std::exp(xt.get(j) - mx) / s, le = xt.get(j) - mx - std::log(s);
      EXPECT_NEAR(y.get(j), e, tol.atol + tol.rtol * e) << dtype_name(t) << " " << j;
      EXPECT_NEAR(ly.get(j), le, tol.atol + tol.rtol * std::fabs(le)) << dtype_name(t) << " " << j;
    }
    for (int64_t j = 8; j < 2 * n; ++j) {
      ASSERT_EQ(y.get(j), 0.0) << dtype_name(t) << " " << j;  // exact zeros, no NaN
      ASSERT_EQ(ly.get(j), -kInf) << dtype_name(t) << " " << j;
    }
  }
}

// The f32 math of a kernel follows the precision of its data (dsl/SPEC.md section 14.2): with
// 16-bit data, exp, exp2, sigmoid, silu, expm1, sqrt and division use the PTX approximations; with
// f32 data, CUDA's full-precision functions. Each output is stored in f32, so its error shows. The
// bounds with 16-bit data: 2^-16 for exp, sigmoid, silu and expm1 over (-80, 80) (twice the 2^-17
// that the rounding of x * log2(e) can reach near |x| = 88), 2^-20 (8 f32 ulps) for exp2, sqrt,
// division and expm1 over (-1.25, 1.25) (its polynomial below |x| = 1/2, ex2.approx above); with
// f32 data, 4 ulps and correct rounding. IEEE special values classify as in float64.
TEST(NumericsGpu, MathFunctionsMeetTheirErrorBounds) {
  KDSL_REQUIRE_GPU();
  testing::ScopedEnv math("KDSL_MATH", nullptr);  // the rule, not an override
  const int64_t m = 4, n = 4096;
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<double> ux(-80.0, 80.0), uy(-3.0, 3.0);
  Vec x(m * n), y(m * n);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = ux(rng);
    y[i] = std::pow(10.0, uy(rng));
  }
  // Row 0 starts with special values; x / y covers -inf / 0, inf / inf, 0 / 0 and NaN.
  const Vec sx = {-kInf, kInf, std::nan(""), 0.0, -0.0, 1.0, -1.0, 0.0};
  const Vec sy = {0.0, kInf, 1.0, 0.0, 2.0, std::nan(""), 0.0, kInf};
  for (size_t i = 0; i < sx.size(); ++i) {
    x[i] = sx[i];
    y[i] = sy[i];
  }
  struct Fn {
    const char* out;
    double (*ref)(double, double);
    double approx_bound, full_bound;  // relative, for 16-bit and for f32 data
    bool zero_sign = false;           // a zero result keeps the argument's sign (expm1(-0) = -0)
  };
  const Fn fns[] = {
      {"e", [](double a, double) { return std::exp(a); }, 0x1p-16, 0x1p-21},
      {"e2", [](double a, double) { return std::exp2(a); }, 0x1p-20, 0x1p-21},
      {"sg", [](double a, double) { return 1.0 / (1.0 + std::exp(-a)); }, 0x1p-16, 0x1p-21},
      {"sl", [](double a, double) { return a / (1.0 + std::exp(-a)); }, 0x1p-16, 0x1p-21},
      {"sq", [](double, double b) { return std::sqrt(b); }, 0x1p-20, 0x1p-23},
      {"q", [](double a, double b) { return a / b; }, 0x1p-20, 0x1p-23},
      {"em", [](double a, double) { return std::expm1(a); }, 0x1p-16, 0x1p-21, true},
      // x / 64 is exact in f32, so the reference sees the kernel's argument.
      {"ems", [](double a, double) { return std::expm1(a / 64); }, 0x1p-20, 0x1p-21, true},
  };
  for (DType t : kDtypes) {
    const HostTensor xt = make_tensor(t, {m, n}, x), yt = make_tensor(t, {m, n}, y);
    ProblemSpec ps;
    ps.kernel = "math_fns";
    ps.binding = {t};
    ps.shapes = {{"M", m}, {"N", n}};
    ps.inputs = {{"x", xt}, {"y", yt}};
    Problem p = make_problem(testing::front_end("tests/data/math_fns.kdsl"), ps);
    const std::vector<HostTensor> got = run_gpu(p);
    const bool approx = t != DType::f32;
    for (const Fn& f : fns) {
      const HostTensor& out = tensor(p, got, f.out);
      const double bound = approx ? f.approx_bound : f.full_bound;
      double worst = 0;
      int64_t worst_at = 0;
      for (int64_t i = 0; i < m * n; ++i) {
        const double want = f.ref(xt.get(i), yt.get(i)), have = out.get(i);
        if (std::isnan(want)) {  // special values: the same class as in float64
          EXPECT_TRUE(std::isnan(have)) << dtype_name(t) << " " << f.out << " at " << i;
        } else if (std::isinf(want) || want == 0.0) {  // the same infinity; a zero of either sign
          EXPECT_EQ(have, want) << dtype_name(t) << " " << f.out << " at " << i;
          if (f.zero_sign) {
            EXPECT_EQ(std::signbit(have), std::signbit(want)) << dtype_name(t) << " " << f.out;
          }
        } else if (const double rel = std::fabs(have - want) / std::fabs(want);
                   !(rel <= worst) && !std::isnan(worst)) {
          worst = rel;  // also a NaN where a number is expected (kept: it fails)
          worst_at = i;
        }
      }
      fmt::print("{} {}: largest relative error {:.3g} at x = {}, y = {} (bound {:.3g})\n",
                 dtype_name(t), f.out, worst, xt.get(worst_at), yt.get(worst_at), bound);
      EXPECT_LE(worst, bound) << dtype_name(t) << " " << f.out << " at " << worst_at;
    }
  }
}

}  // namespace
}  // namespace kdsl

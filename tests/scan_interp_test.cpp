// The reference interpreter's scans (SPEC section 10) against independent references: plain
// sequential loops written here, in float64 (std::complex<double> for c64).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <random>

#include "src/harness.h"

namespace kdsl {
namespace {

std::shared_ptr<const FrontEnd> module(const std::string& text) {
  return run_front_end(std::make_shared<const SourceFile>("scan_test.kdsl", text));
}

HostTensor tensor(DType t, std::vector<int64_t> shape, const std::vector<double>& values) {
  HostTensor h(t, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) h.set(static_cast<int64_t>(i), values[i]);
  return h;
}

std::vector<double> random_values(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

// Runs `kernel` on the interpreter; returns every tensor afterwards, by name.
std::map<std::string, HostTensor> run(const std::shared_ptr<const FrontEnd>& fe,
                                      const std::string& kernel, std::vector<DType> binding,
                                      std::map<std::string, int64_t> shapes,
                                      std::map<std::string, HostTensor> inputs) {
  ProblemSpec ps;
  ps.kernel = kernel;
  ps.binding = std::move(binding);
  ps.shapes = std::move(shapes);
  ps.inputs = std::move(inputs);
  Problem p = make_problem(fe, ps);
  std::vector<HostTensor> out = run_reference(p);
  std::map<std::string, HostTensor> named;
  for (size_t t = 0; t < out.size(); ++t) named[p.ir.tensors[t].name] = out[t];
  return named;
}

const char* const kAffine = R"(
def affine(left, right):
    a1, b1 = left
    a2, b2 = right
    return a1 * a2, a2 * b1 + b2


@kernel
def affine_scan(a: Tensor[f64, (M, L)], b: Tensor[f64, (M, L)],
                *, fa: Out[f64, (M, L)], fb: Out[f64, (M, L)],
                ra: Out[f64, (M, L)], rb: Out[f64, (M, L)]):
    for m in parallel(M):
        fa[m, :], fb[m, :] = scan(affine, (a[m, :], b[m, :]))
        ra[m, :], rb[m, :] = scan(affine, (a[m, :], b[m, :]), reverse=True)
)";

TEST(ScanInterp, AffinePairForwardAndReverseOfTheIssue) {
  auto fe = module(kAffine);
  auto out = run(fe, "affine_scan", {}, {{"M", 1}, {"L", 4}},
                 {{"a", tensor(DType::f64, {1, 4}, {1, 1.5, 0.8, 2})},
                  {"b", tensor(DType::f64, {1, 4}, {1, -1, 0.5, 2})}});
  const double fa[] = {1, 1.5, 1.2, 2.4}, fb[] = {1, 0.5, 0.9, 3.8};
  const double ra[] = {2.4, 2.4, 1.6, 2}, rb[] = {3.15, 2.15, 2.1, 2};
  for (int64_t t = 0; t < 4; ++t) {
    EXPECT_NEAR(out["fa"].get(t), fa[t], 1e-12) << t;
    EXPECT_NEAR(out["fb"].get(t), fb[t], 1e-12) << t;
    EXPECT_NEAR(out["ra"].get(t), ra[t], 1e-12) << t;
    EXPECT_NEAR(out["rb"].get(t), rb[t], 1e-12) << t;
  }
}

const char* const kCumsum = R"(
@kernel
def sums(x: Tensor[f32, (M, L)], *, fwd: Out[f32, (M, L)], rev: Out[f32, (M, L)],
         fwd_ex: Out[f32, (M, L)], rev_ex: Out[f32, (M, L)], fwd_init: Out[f32, (M, L)],
         rev_ex_init: Out[f32, (M, L)]):
    for m in parallel(M):
        v = x[m, :]
        fwd[m, :] = cumsum(v)
        rev[m, :] = cumsum(v, reverse=True)
        fwd_ex[m, :] = cumsum(v, exclusive=True)
        rev_ex[m, :] = cumsum(v, reverse=True, exclusive=True)
        fwd_init[m, :] = cumsum(v, init=2.5)
        rev_ex_init[m, :] = cumsum(v, init=-1.0, reverse=True, exclusive=True)
)";

TEST(ScanInterp, ReverseCumsumOfLargeThenSmallValuesIsExact) {
  auto fe = module(kCumsum);
  std::vector<double> x(64, 1.0);
  for (int i = 0; i < 32; ++i) x[i] = 1e8;
  auto out = run(fe, "sums", {}, {{"M", 1}, {"L", 64}}, {{"x", tensor(DType::f32, {1, 64}, x)}});
  EXPECT_EQ(out["rev"].get(32), 32.0);
  EXPECT_EQ(out["rev"].get(63), 1.0);
  EXPECT_EQ(out["rev_ex"].get(32), 31.0);
}

TEST(ScanInterp, CumsumEveryVariantAtLengthsThatAreNoMultipleOfAnyChunk) {
  auto fe = module(kCumsum);
  for (int64_t len : {1, 7, 1000, 65537}) {
    const int64_t rows = 3;
    std::vector<double> x = random_values(static_cast<size_t>(rows * len), 7 + len);
    HostTensor xt = tensor(DType::f32, {rows, len}, x);
    auto out = run(fe, "sums", {}, {{"M", rows}, {"L", len}}, {{"x", xt}});
    for (int64_t m = 0; m < rows; ++m) {
      // Independent references: running sums over the f32-rounded inputs, in float64.
      std::vector<double> in(static_cast<size_t>(len));
      for (int64_t t = 0; t < len; ++t) in[t] = xt.get(m * len + t);
      double f = 0, r = 0;
      std::vector<double> fwd(in.size()), rev(in.size());
      for (int64_t t = 0; t < len; ++t) fwd[t] = f += in[t];
      for (int64_t t = len; t-- > 0;) rev[t] = r += in[t];
      for (int64_t t = 0; t < len; ++t) {
        const int64_t i = m * len + t;
        const double tol = 1e-6 * (1 + std::fabs(fwd[t]) + std::fabs(rev[t]));
        ASSERT_NEAR(out["fwd"].get(i), fwd[t], tol) << len << " " << t;
        ASSERT_NEAR(out["rev"].get(i), rev[t], tol) << len << " " << t;
        ASSERT_NEAR(out["fwd_ex"].get(i), t ? fwd[t - 1] : 0.0, tol) << len << " " << t;
        ASSERT_NEAR(out["rev_ex"].get(i), t + 1 < len ? rev[t + 1] : 0.0, tol) << len << " " << t;
        ASSERT_NEAR(out["fwd_init"].get(i), 2.5 + fwd[t], tol) << len << " " << t;
        ASSERT_NEAR(out["rev_ex_init"].get(i), t + 1 < len ? rev[t + 1] - 1.0 : -1.0, tol)
            << len << " " << t;
      }
    }
  }
}

const char* const kRecurrence = R"(
def affine(left, right):
    a1, b1 = left
    a2, b2 = right
    return a1 * a2, a2 * b1 + b2


@kernel
def recurrence[T: (f32, c64)](a: Tensor[T, (B, L, D)], x: Tensor[T, (B, L, D)],
                              h0: Tensor[T, (B, D)],
                              *, h: Out[T, (B, L, D)], h_last: Out[T, (B, D)]):
    for b, d in parallel(B, D):
        one = T(1.0)
        _, hv = scan(affine, (a[b, :, d], x[b, :, d]), init=(one, h0[b, d]))
        h[b, :, d] = hv
        h_last[b, d] = last(hv)
)";

TEST(ScanInterp, LinearRecurrenceWithHalfDecayOverALongSequence) {
  auto fe = module(kRecurrence);
  const int64_t len = 65536;
  std::vector<double> x = random_values(static_cast<size_t>(len), 3);
  HostTensor xt = tensor(DType::f32, {1, len, 1}, x);
  HostTensor at = tensor(DType::f32, {1, len, 1}, std::vector<double>(len, 0.5));
  HostTensor h0 = tensor(DType::f32, {1, 1}, {0.25});
  auto out = run(fe, "recurrence", {DType::f32}, {{"B", 1}, {"L", len}, {"D", 1}},
                 {{"a", at}, {"x", xt}, {"h0", h0}});
  double h = 0.25;
  for (int64_t t = 0; t < len; ++t) {
    h = 0.5 * h + xt.get(t);
    ASSERT_NEAR(out["h"].get(t), h, 1e-5 * std::fabs(h) + 1e-30) << t;
  }
  EXPECT_NEAR(out["h_last"].get(0), h, 1e-5 * std::fabs(h));
}

TEST(ScanInterp, ComplexDiagonalRecurrenceAlongAMiddleAxis) {
  auto fe = module(kRecurrence);
  const int64_t B = 2, L = 33, D = 3;
  HostTensor a(DType::c64, {B, L, D}), x(DType::c64, {B, L, D}), h0(DType::c64, {B, D});
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-0.7, 0.7);
  for (int64_t i = 0; i < a.numel(); ++i) {
    a.set(i, u(rng), u(rng));
    x.set(i, u(rng), u(rng));
  }
  for (int64_t i = 0; i < h0.numel(); ++i) h0.set(i, u(rng), u(rng));
  auto out = run(fe, "recurrence", {DType::c64}, {{"B", B}, {"L", L}, {"D", D}},
                 {{"a", a}, {"x", x}, {"h0", h0}});
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t d = 0; d < D; ++d) {
      std::complex<double> h(h0.get(b * D + d), h0.get_imag(b * D + d));
      for (int64_t t = 0; t < L; ++t) {
        const int64_t i = (b * L + t) * D + d;
        h = std::complex<double>(a.get(i), a.get_imag(i)) * h +
            std::complex<double>(x.get(i), x.get_imag(i));
        ASSERT_NEAR(out["h"].get(i), h.real(), 1e-6) << b << " " << t << " " << d;
        ASSERT_NEAR(out["h"].get_imag(i), h.imag(), 1e-6) << b << " " << t << " " << d;
      }
      EXPECT_NEAR(out["h_last"].get(b * D + d), h.real(), 1e-6);
      EXPECT_NEAR(out["h_last"].get_imag(b * D + d), h.imag(), 1e-6);
    }
  }
}

const char* const kBuiltins = R"(
@kernel
def builtins(x: Tensor[f64, (M, L)], *, prod: Out[f64, (M, L)], mx: Out[f64, (M, L)],
             mn_rev: Out[f64, (M, L)], lse: Out[f64, (M, L)], lse_rev_ex: Out[f64, (M, L)],
             mx_ex: Out[f64, (M, L)], ends: Out[f64, (M, 2)]):
    for m in parallel(M):
        v = x[m, :]
        prod[m, :] = cumprod(v)
        mx[m, :] = cummax(v)
        mn_rev[m, :] = cummin(v, reverse=True)
        lse[m, :] = logcumsumexp(v)
        lse_rev_ex[m, :] = logcumsumexp(v, reverse=True, exclusive=True)
        mx_ex[m, :] = cummax(v, exclusive=True)
        ends[m, 0] = first(v)
        ends[m, 1] = last(v)
)";

TEST(ScanInterp, BuiltinScansMatchSequentialLoops) {
  auto fe = module(kBuiltins);
  for (int64_t len : {1, 7, 1000}) {
    std::vector<double> x = random_values(static_cast<size_t>(len), 100 + len, 0.5, 1.5);
    x[len / 2] = 40.0;  // a large value: logcumsumexp must not overflow
    auto out =
        run(fe, "builtins", {}, {{"M", 1}, {"L", len}}, {{"x", tensor(DType::f64, {1, len}, x)}});
    const double inf = std::numeric_limits<double>::infinity();
    double p = 1, mx = -inf, lse_m = -inf, lse_s = 0;
    for (int64_t t = 0; t < len; ++t) {
      ASSERT_EQ(out["mx_ex"].get(t), mx) << t;
      p *= x[t];
      mx = std::max(mx, x[t]);
      // log(sum exp) with a running maximum.
      if (x[t] > lse_m) {
        lse_s = lse_s * std::exp(lse_m - x[t]) + 1;
        lse_m = x[t];
      } else {
        lse_s += std::exp(x[t] - lse_m);
      }
      ASSERT_NEAR(out["prod"].get(t), p, 1e-12 * std::fabs(p)) << t;
      ASSERT_EQ(out["mx"].get(t), mx) << t;
      ASSERT_NEAR(out["lse"].get(t), lse_m + std::log(lse_s), 1e-12 * (1 + lse_m)) << t;
    }
    double mn = inf, rm = -inf, rs = 0;
    for (int64_t t = len; t-- > 0;) {
      if (rs > 0) {
        ASSERT_NEAR(out["lse_rev_ex"].get(t), rm + std::log(rs), 1e-12 * (1 + rm)) << t;
      } else {
        ASSERT_EQ(out["lse_rev_ex"].get(t), -inf) << t;
      }
      mn = std::min(mn, x[t]);
      ASSERT_EQ(out["mn_rev"].get(t), mn) << t;
      if (x[t] > rm) {
        rs = rs * std::exp(rm - x[t]) + 1;
        rm = x[t];
      } else {
        rs += std::exp(x[t] - rm);
      }
    }
    EXPECT_EQ(out["ends"].get(0), x[0]);
    EXPECT_EQ(out["ends"].get(1), x[len - 1]);
  }
}

const char* const kShift = R"(
@kernel
def shifts(x: Tensor[f32, (M, L)], *, back2: Out[f32, (M, L)], ahead3: Out[f32, (M, L)],
           far: Out[f32, (M, L)]):
    for m in parallel(M):
        v = x[m, :]
        back2[m, :] = shift(v, 2, -1.0)
        ahead3[m, :] = shift(v, -3, 7.0)
        far[m, :] = shift(v, 100, 0.5)
)";

TEST(ScanInterp, ShiftReadsNeighboursAndFillsOutside) {
  auto fe = module(kShift);
  const int64_t len = 10;
  std::vector<double> x = random_values(len, 5);
  HostTensor xt = tensor(DType::f32, {1, len}, x);
  auto out = run(fe, "shifts", {}, {{"M", 1}, {"L", len}}, {{"x", xt}});
  for (int64_t t = 0; t < len; ++t) {
    EXPECT_EQ(out["back2"].get(t), t >= 2 ? xt.get(t - 2) : -1.0) << t;
    EXPECT_EQ(out["ahead3"].get(t), t + 3 < len ? xt.get(t + 3) : 7.0) << t;
    EXPECT_EQ(out["far"].get(t), 0.5) << t;
  }
}

const char* const kColumn = R"(
@kernel
def column(x: Tensor[f32, (B, L, D)], *, y: Out[f32, (B, L, D)], s: Out[f32, (D,)]):
    for b, d in parallel(B, D):
        v = x[b, :, d]
        y[b, :, d] = cumsum(v * v, reverse=True)
        s[d] += sum(v)
)";

TEST(ScanInterp, MiddleAxisScanAndAColumnReductionOverPartOfTheLoop) {
  auto fe = module(kColumn);
  const int64_t B = 3, L = 7, D = 5;
  std::vector<double> x = random_values(static_cast<size_t>(B * L * D), 9);
  HostTensor xt = tensor(DType::f32, {B, L, D}, x);
  auto out = run(fe, "column", {}, {{"B", B}, {"L", L}, {"D", D}}, {{"x", xt}});
  for (int64_t d = 0; d < D; ++d) {
    double total = 0;
    for (int64_t b = 0; b < B; ++b) {
      double r = 0;
      for (int64_t t = L; t-- > 0;) {
        const int64_t i = (b * L + t) * D + d;
        r += xt.get(i) * xt.get(i);
        total += xt.get(i);
        EXPECT_NEAR(out["y"].get(i), r, 1e-6 * (1 + r));
      }
    }
    EXPECT_NEAR(out["s"].get(d), total, 1e-5);
  }
}

}  // namespace
}  // namespace kdsl

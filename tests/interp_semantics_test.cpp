// The meaning of the language's features (dsl/SPEC.md), executed by the reference interpreter on
// small kernels written here: numeric model (float64 values, rounding at casts and stores),
// reductions and their NaN and tie rules, floor division, broadcasting, helpers, if/else,
// accumulation into Out and InOut tensors, column reductions, and the math library's formulas.
#include <complex>

#include "interp_test_util.h"

namespace kdsl {
namespace {

using namespace interp_testing;

/// Kernel `k` of `text` (bound to `binding`) after a run of the interpreter on the given inputs.
struct Ran {
  Ran(const std::string& text, std::map<std::string, int64_t> shapes,
      std::map<std::string, HostTensor> inputs = {}, std::map<std::string, double> scalars = {},
      std::vector<DType> binding = {})
      : p(problem(module(text), "k", std::move(binding), std::move(shapes), std::move(inputs),
                  std::move(scalars))),
        out(run_reference(p)) {}
  double at(const std::string& name, int64_t i) const { return tensor(p, out, name).get(i); }
  Vec all(const std::string& name) const { return values(tensor(p, out, name)); }

  Problem p;
  std::vector<HostTensor> out;
};

HostTensor f32_row(const Vec& v) {
  return make_tensor(DType::f32, {1, static_cast<int64_t>(v.size())}, v);
}

TEST(InterpSemantics, ValuesAreFloat64UntilACastOrAStore) {
  // 1 + 2^-30 is not an f32, but the f32 value a holds it exactly until f32(a) rounds it.
  Ran r(R"(@kernel
def k(x: Tensor[f32, (M, N)], *, kept: Out[f64, (M, N)], cast: Out[f64, (M, N)],
      stored: Out[f32, (M, N)]):
    for m in parallel(M):
        a = x[m, :] + 2.0 ** -30
        kept[m, :] = f64(a)
        cast[m, :] = f64(f32(a))
        stored[m, :] = a
)",
        {{"M", 1}, {"N", 2}}, {{"x", f32_row({1.0, 3.0})}});
  EXPECT_EQ(r.at("kept", 0), 1.0 + std::ldexp(1.0, -30));
  EXPECT_EQ(r.at("cast", 0), 1.0);
  EXPECT_EQ(r.at("stored", 0), 1.0);
  EXPECT_EQ(r.at("kept", 1), 3.0 + std::ldexp(1.0, -30));
}

TEST(InterpSemantics, HalfArithmeticIsNotRoundedPerOperationInTheInterpreter) {
  // The GPU rounds f16 + f16 to f16 (1.0 here); the interpreter keeps 1 + 2^-12 until a cast.
  Ran r(R"(@kernel
def k(x: Tensor[f16, (M, N)], *, y: Out[f32, (M, N)], z: Out[f32, (M, N)]):
    for m in parallel(M):
        s = x[m, :] + f16(2.0 ** -12)
        y[m, :] = f32(s)
        z[m, :] = f32(f16(s))
)",
        {{"M", 1}, {"N", 1}}, {{"x", make_tensor(DType::f16, {1, 1}, {1.0})}});
  EXPECT_EQ(r.at("y", 0), 1.0 + std::ldexp(1.0, -12));
  EXPECT_EQ(r.at("z", 0), 1.0);
}

TEST(InterpSemantics, ScalarParametersAreRoundedToTheirDtype) {
  Ran r(R"(@kernel
def k(x: Tensor[f32, (M, N)], s: f16, i: i32, *, y: Out[f64, (M, N)], j: Out[i64, (M,)]):
    for m in parallel(M):
        y[m, :] = f64(x[m, :] * f32(s))
        j[m] = i64(i)
)",
        {{"M", 1}, {"N", 1}}, {{"x", f32_row({1.0})}}, {{"s", 0.1}, {"i", -2.7}});
  EXPECT_EQ(r.at("y", 0), 0.0999755859375);  // 0.1 in f16
  EXPECT_EQ(r.at("j", 0), -2.0);             // toward zero
}

TEST(InterpSemantics, IntegersHaveNoNegativeZero) {
  // i32(-0.5), 0 * -5, -4 % 2, an i32 scalar given as -0 and the constant -0 are all the integer
  // 0, which f32() makes +0 (1 / 0 = +inf, as the GPU's integer arithmetic gives). The
  // interpreter's float64 arithmetic made each -0.0 (-inf here; found by a new-user test).
  Ran r(R"(C = -0

@kernel
def k(x: Tensor[f32, (M, 1)], *, y: Out[f32, (M, 5)], n: i32):
    for m in parallel(M):
        i = i32(x[m, 0])
        y[m, 0] = 1.0 / f32(i32(x[m, 0] * -1.0))
        y[m, 1] = 1.0 / f32(i * -5)
        y[m, 2] = 1.0 / f32((i - 4) % 2)
        y[m, 3] = 1.0 / f32(n)
        y[m, 4] = 1.0 / f32(C)
)",
        {{"M", 1}}, {{"x", f32_row({0.5})}}, {{"n", -0.0}});
  for (int64_t j = 0; j < 5; ++j) {
    EXPECT_EQ(r.at("y", j), std::numeric_limits<double>::infinity()) << "element " << j;
  }
}

TEST(InterpSemantics, ReductionsAndTheirNanAndTieRules) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const char* text = R"(@kernel
def k(x: Tensor[f32, (M, N)], *, s: Out[f32, (M,)], mx: Out[f32, (M,)], mn: Out[f32, (M,)],
      am: Out[i64, (M,)], an: Out[i64, (M,)], v: Out[f32, (M,)], mu: Out[f32, (M,)]):
    for m in parallel(M):
        r = x[m, :]
        s[m] = sum(r)
        mx[m] = max(r)
        mn[m] = min(r)
        am[m] = argmax(r)
        an[m] = argmin(r)
        v[m] = var(r)
        mu[m] = mean(r)
)";
  Ran a(text, {{"M", 2}, {"N", 5}},
        {{"x", make_tensor(DType::f32, {2, 5}, {1, 4, -2, 4, -2, 1, nan, 7, nan, -9})}});
  EXPECT_EQ(a.at("s", 0), 5.0);
  EXPECT_EQ(a.at("mx", 0), 4.0);
  EXPECT_EQ(a.at("mn", 0), -2.0);
  EXPECT_EQ(a.at("am", 0), 1.0);  // the first of the two 4s
  EXPECT_EQ(a.at("an", 0), 2.0);  // the first of the two -2s
  EXPECT_EQ(a.at("mu", 0), 1.0);
  EXPECT_FLOAT_EQ(a.at("v", 0), (0 + 9 + 9 + 9 + 9) / 5.0);  // population variance
  EXPECT_TRUE(std::isnan(a.at("s", 1)));
  EXPECT_TRUE(std::isnan(a.at("mx", 1)));
  EXPECT_TRUE(std::isnan(a.at("mn", 1)));
  EXPECT_EQ(a.at("am", 1), 1.0);  // NaN counts as the extreme: the first NaN
  EXPECT_EQ(a.at("an", 1), 1.0);
}

TEST(InterpSemantics, ElementwiseMinMaxPropagateNan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Ran r(R"(@kernel
def k(x: Tensor[f32, (M, N)], *, lo: Out[f32, (M, N)], hi: Out[f32, (M, N)]):
    for m in parallel(M):
        lo[m, :] = min(x[m, :], 0.0)
        hi[m, :] = max(x[m, :], 0.0)
)",
        {{"M", 1}, {"N", 3}}, {{"x", f32_row({-1.5, nan, 2.0})}});
  EXPECT_EQ(r.all("lo")[0], -1.5);
  EXPECT_TRUE(std::isnan(r.all("lo")[1]));
  EXPECT_TRUE(std::isnan(r.all("hi")[1]));
  EXPECT_EQ(r.all("hi")[2], 2.0);
}

TEST(InterpSemantics, FloorDivisionAndModuloFollowPython) {
  Ran r(R"(@kernel
def k(x: Tensor[f32, (M, N)], i: i32, *, q: Out[i32, (M,)], rem: Out[i32, (M,)],
      fq: Out[f32, (M, N)], fr: Out[f32, (M, N)]):
    for m in parallel(M):
        q[m] = i // 2
        rem[m] = i % 2
        fq[m, :] = x[m, :] // 2.0
        fr[m, :] = x[m, :] % 2.0
)",
        {{"M", 1}, {"N", 2}}, {{"x", f32_row({-7.5, 7.5})}}, {{"i", -7}});
  EXPECT_EQ(r.at("q", 0), -4.0);
  EXPECT_EQ(r.at("rem", 0), 1.0);
  EXPECT_EQ(r.all("fq"), (Vec{-4.0, 3.0}));
  EXPECT_EQ(r.all("fr"), (Vec{0.5, 1.5}));
}

TEST(InterpSemantics, BroadcastingViewsPositionAndConstantIndices) {
  // Per-row scalars (s[m], a reduction) and per-column vectors (w) broadcast against rows;
  // position() counts along the vector axis; a constant index picks one column.
  Ran r(R"(@kernel
def k(x: Tensor[f32, (M, N)], w: Tensor[f32, (N,)], s: Tensor[f32, (M,)], pair: Tensor[f32, (M, 2)],
      *, y: Out[f32, (M, N)]):
    for m in parallel(M):
        y[m, :] = x[m, :] * w[:] + s[m] - max(x[m, :]) + f32(position()) * pair[m, 1]
)",
        {{"M", 2}, {"N", 3}},
        {{"x", make_tensor(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6})},
         {"w", make_tensor(DType::f32, {3}, {10, 20, 30})},
         {"s", make_tensor(DType::f32, {2}, {100, 200})},
         {"pair", make_tensor(DType::f32, {2, 2}, {0, 1000, 0, 2000})}});
  EXPECT_EQ(r.all("y"), (Vec{1 * 10 + 100 - 3, 2 * 20 + 100 - 3 + 1000, 3 * 30 + 100 - 3 + 2000,
                             4 * 10 + 200 - 6, 5 * 20 + 200 - 6 + 2000, 6 * 30 + 200 - 6 + 4000}));
}

// A bare 1-D bool tensor along the vector axis is its vector (w means w[:], section 7.2) as an
// operand of not, and, or, where and if ... else, as a bare float tensor is of arithmetic.
TEST(InterpSemantics, BareBoolTensorsAreTheirVectors) {
  Ran r(R"(@kernel
def k(x: Tensor[bool, (M, N)], w: Tensor[bool, (N,)], v: Tensor[f32, (M, N)],
      *, a: Out[bool, (M, N)], b: Out[bool, (M, N)], c: Out[f32, (M, N)], d: Out[f32, (M, N)]):
    for m in parallel(M):
        a[m, :] = x[m, :] and not w
        b[m, :] = w or x[m, :]
        c[m, :] = where(w, v[m, :], -1.0)
        d[m, :] = v[m, :] if w else 2.0
)",
        {{"M", 2}, {"N", 4}},
        {{"x", make_tensor(DType::b8, {2, 4}, {1, 1, 0, 1, 1, 0, 1, 1})},
         {"w", make_tensor(DType::b8, {4}, {1, 0, 0, 1})},
         {"v", make_tensor(DType::f32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}});
  EXPECT_EQ(r.all("a"), (Vec{0, 1, 0, 0, 0, 0, 1, 0}));
  EXPECT_EQ(r.all("b"), (Vec{1, 1, 0, 1, 1, 0, 1, 1}));
  EXPECT_EQ(r.all("c"), (Vec{1, -1, -1, 4, 5, -1, -1, 8}));
  EXPECT_EQ(r.all("d"), (Vec{1, 2, 2, 4, 5, 2, 2, 8}));
}

TEST(InterpSemantics, HelpersInlineAndReturnTuples) {
  Ran r(R"(
SHIFT = 1
def stats(v):
    """Mean and variance of a row."""
    return mean(v), var(v)

def standardize(v, eps: f32 = 0.0):
    mu, sigma2 = stats(v)
    return (v - mu) * rsqrt(sigma2 + eps) + SHIFT

@kernel
def k(x: Tensor[f32, (M, N)], *, y: Out[f32, (M, N)]):
    for m in parallel(M):
        y[m, :] = standardize(x[m, :])
)",
        {{"M", 1}, {"N", 4}}, {{"x", f32_row({1, 3, 5, 7})}});
  double sd = std::sqrt(5.0);
  Vec expected = {-3 / sd + 1, -1 / sd + 1, 1 / sd + 1, 3 / sd + 1};
  expect_rounded_from(tensor(r.p, r.out, "y"), expected, "standardize");
}

TEST(InterpSemantics, IfElseOnAUniformConditionChoosesPerRow) {
  Ran r(R"(@kernel
def k(x: Tensor[f32, (M, N)], clip: f32, *, y: Out[f32, (M, N)], flag: Out[i32, (M,)]):
    for m in parallel(M):
        v = x[m, :]
        if sum(v) > 0.0:
            y[m, :] = v
            f = 1
        elif clip > 0.0:
            y[m, :] = max(v, -clip)
            f = 2
        else:
            y[m, :] = -v
            f = 3
        flag[m] = f
)",
        {{"M", 2}, {"N", 2}}, {{"x", make_tensor(DType::f32, {2, 2}, {1, 2, -5, 1})}},
        {{"clip", 2.0}});
  EXPECT_EQ(r.all("y"), (Vec{1, 2, -2, 1}));
  EXPECT_EQ(r.all("flag"), (Vec{1, 2}));
}

TEST(InterpSemantics, AccumulationIntoOutStartsFromZeroAndIntoInOutFromItsContents) {
  const char* text = R"(@kernel
def k(x: Tensor[f32, (M, N)], on: f32, *, a: Out[f32, (M, N)], b: InOut[f32, (M, N)],
      c: Out[f32, (M, N)]):
    for m in parallel(M):
        a[m, :] += x[m, :]
        a[m, :] += x[m, :]
        b[m, :] += x[m, :]
        if on > 0.0:
            c[m, :] += x[m, :]
)";
  HostTensor b = make_tensor(DType::f32, {1, 2}, {100, 200});
  Ran yes(text, {{"M", 1}, {"N", 2}}, {{"x", f32_row({1, 2})}, {"b", b}}, {{"on", 1.0}});
  EXPECT_EQ(yes.all("a"), (Vec{2, 4}));
  EXPECT_EQ(yes.all("b"), (Vec{101, 202}));
  EXPECT_EQ(yes.all("c"), (Vec{1, 2}));
  Ran no(text, {{"M", 1}, {"N", 2}}, {{"x", f32_row({1, 2})}, {"b", b}}, {{"on", -1.0}});
  EXPECT_EQ(no.all("c"), (Vec{0, 0}));  // += on the branch not taken: still from zero
}

TEST(InterpSemantics, ColumnReductionsSumOverTheOmittedLoopVariable) {
  const char* text = R"(@kernel
def k(x: Tensor[f32, (M, N)], *, dw: Out[f32, (N,)], acc: InOut[f64, (N,)], total: Out[f32, (1,)]):
    for m in parallel(M):
        dw[:] += x[m, :]
        acc[:] += f64(x[m, :]) * 2.0
        total[0] += sum(x[m, :])
)";
  const int64_t m = 37, n = 5;
  Vec x = normal(m * n, 9);
  HostTensor acc = make_tensor(DType::f64, {n}, {1, 2, 3, 4, 5});
  Ran r(text, {{"M", m}, {"N", n}}, {{"x", make_tensor(DType::f32, {m, n}, x)}, {"acc", acc}});
  Vec xs = values(tensor(r.p, r.p.tensors, "x")), dw(n, 0.0), twice(n, 0.0);
  double total = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      dw[j] += xs[i * n + j];
      twice[j] += 2 * xs[i * n + j];
      total += xs[i * n + j];
    }
  }
  for (int64_t j = 0; j < n; ++j) twice[j] += static_cast<double>(j + 1);
  expect_rounded_from(tensor(r.p, r.out, "dw"), dw, "dw");
  expect_rounded_from(tensor(r.p, r.out, "acc"), twice, "acc");
  expect_rounded_from(tensor(r.p, r.out, "total"), {total}, "total");
  // No rows: Out column reductions are zeros, InOut ones keep their contents.
  Ran empty(text, {{"M", 0}, {"N", n}}, {{"acc", acc}});
  EXPECT_EQ(empty.all("dw"), Vec(n, 0.0));
  EXPECT_EQ(empty.all("acc"), (Vec{1, 2, 3, 4, 5}));
  EXPECT_EQ(empty.all("total"), Vec{0.0});
}

// c64(re, im) builds a complex number (of dtype c64, a scalar or a vector after its parts),
// which, unlike c64(x) = (x, 0), used to be typed f32 and rejected wherever a c64 was expected.
TEST(InterpSemantics, ComplexFromRealAndImaginaryParts) {
  Ran r(R"(@kernel
def k(x: Tensor[f32, (M, N)], re: f32, im: f32, *, yr: Out[f32, (M, N)], yi: Out[f32, (M, N)]):
    for m in parallel(M):
        s = c64(re, im)
        z = c64(x[m, :], 2 * im) * s + c64(1.0, x[m, :]) / s
        yr[m, :] = real(z)
        yi[m, :] = imag(z)
)",
        {{"M", 1}, {"N", 2}}, {{"x", f32_row({2.0, -0.5})}}, {{"re", 3.0}, {"im", -1.0}});
  const std::complex<double> s(3.0, -1.0);
  for (int64_t i = 0; i < 2; ++i) {
    const double x = i == 0 ? 2.0 : -0.5;
    const std::complex<double> z =
        std::complex<double>(x, -2.0) * s + std::complex<double>(1, x) / s;
    EXPECT_NEAR(r.at("yr", i), z.real(), 1e-6) << i;
    EXPECT_NEAR(r.at("yi", i), z.imag(), 1e-6) << i;
  }
}

TEST(InterpSemantics, MathLibraryFormulas) {
  Ran r(R"(@kernel
def k(x: Tensor[f64, (M, N)], *, y: Out[f64, (M, N)]):
    for m in parallel(M):
        v = x[m, :]
        y[m, :] = exp(v) + 2.0 * exp2(v) + 3.0 * log1p(abs(v)) + 4.0 * expm1(v) + 5.0 * tanh(v) + 6.0 * sigmoid(v) + 7.0 * erf(v) + 8.0 * silu(v) + 9.0 * gelu(v) + 10.0 * gelu_tanh(v) + 11.0 * softplus(v) + 12.0 * floor(v) + 13.0 * ceil(v) + 14.0 * sqrt(abs(v)) + 15.0 * rsqrt(abs(v) + 1.0) + 16.0 * log(abs(v) + 1.0) + 17.0 * log2(abs(v) + 1.0) + 18.0 * pow(abs(v), 1.5)
)",
        {{"M", 1}, {"N", 6}},
        {{"x", make_tensor(DType::f64, {1, 6}, {-3.25, -0.5, 0.0, 0.125, 1.75, 20.0})}});
  Vec got = r.all("y");
  const double pi = 3.14159265358979323846;
  Vec xs = {-3.25, -0.5, 0.0, 0.125, 1.75, 20.0};
  for (size_t i = 0; i < xs.size(); ++i) {
    double v = xs[i], a = std::fabs(v), sig = 1 / (1 + std::exp(-v));
    double gelu = v / 2 * (1 + std::erf(v / std::sqrt(2.0)));
    double gelu_t = v / 2 * (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715 * v * v * v)));
    double softplus = std::log(1 + std::exp(v));
    double e = std::exp(v) + 2 * std::pow(2.0, v) + 3 * std::log(1 + a) + 4 * (std::exp(v) - 1) +
               5 * std::tanh(v) + 6 * sig + 7 * std::erf(v) + 8 * v * sig + 9 * gelu + 10 * gelu_t +
               11 * softplus + 12 * std::floor(v) + 13 * std::ceil(v) + 14 * std::sqrt(a) +
               15 / std::sqrt(a + 1) + 16 * std::log(a + 1) + 17 * std::log(a + 1) / std::log(2.0) +
               18 * std::pow(a, 1.5);
    EXPECT_NEAR(got[i], e, 1e-12 * std::max(1.0, std::fabs(e))) << "x = " << v;
  }
}

}  // namespace
}  // namespace kdsl

// The numerics cases of issue 3 in the reference interpreter, against closed forms.
// (tests/numerics_gpu_test.cpp runs the same cases on the GPU.) Tolerances: interp_test_util.h.
#include "interp_test_util.h"

namespace kdsl {
namespace {

using namespace interp_testing;

TEST(InterpNumerics, NormalizationStatisticsAreF32ForHalfStorage) {
  for (const char* file : {"stdlib/rms_norm.kdsl", "stdlib/layer_norm.kdsl"}) {
    for (const KernelSignature& sig : stdlib(file)->kernels) {
      for (const SignatureParam& prm : sig.params) {
        if (prm.name == "eps" || prm.name == "rstd" || prm.name == "mu") {
          EXPECT_EQ(prm.generic, -1) << sig.name << " " << prm.name;
          EXPECT_EQ(prm.dtype, DType::f32) << sig.name << " " << prm.name;
        }
      }
    }
  }
}

TEST(InterpNumerics, LayerNormOfAZeroF16RowWithTinyEpsIsFinite) {
  const int64_t m = 3, n = 4096;
  for (bool zero_bias : {false, true}) {
    Vec b = zero_bias ? Vec(n, 0.0) : normal(n, 41);
    Problem p = problem("stdlib/layer_norm.kdsl", "layer_norm", DType::f16, m, n, 42,
                        {{"x", make_tensor(DType::f16, {m, n}, Vec(m * n, 0.0))},
                         {"b", make_tensor(DType::f16, {n}, b)}},
                        {{"eps", 1e-12}});
    std::vector<HostTensor> got = run_reference(p);
    Vec y = values(tensor(p, got, "y")), rstd = values(tensor(p, got, "rstd"));
    Vec bias = values(tensor(p, p.tensors, "b"));
    for (int64_t i = 0; i < m; ++i) {
      EXPECT_EQ(tensor(p, got, "mu").get(i), 0.0);
      // eps is f32 (1e-12 would be 0 in f16): rstd = 1/sqrt(1e-12) = 1e6, not inf.
      EXPECT_NEAR(rstd[i], 1e6, 1.0);
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(y[i * n + j], bias[j]) << i << ", " << j;
    }
  }
}

TEST(InterpNumerics, VarianceWithoutCancellation) {
  const int64_t n = 10240;
  Vec x(n, 256.0);
  x[n - 1] = 255.0;
  Problem p = problem("stdlib/layer_norm.kdsl", "layer_norm", DType::f32, 1, n, 43,
                      {{"x", make_tensor(DType::f32, {1, n}, x)},
                       {"w", make_tensor(DType::f32, {n}, Vec(n, 1.0))},
                       {"b", make_tensor(DType::f32, {n}, Vec(n, 0.0))}},
                      {{"eps", 1e-5}});
  std::vector<HostTensor> got = run_reference(p);
  // mean = 256 - 1/N, var = (1/N)(1 - 1/N) = 9.7647e-5; E[x^2] - E[x]^2 in f32 would lose it all.
  double mu = 256.0 - 1.0 / n, var = (1.0 / n) * (1.0 - 1.0 / n), eps = rounded(DType::f32, 1e-5);
  double r = 1.0 / std::sqrt(var + eps);
  EXPECT_NEAR(var, 9.76e-5, 1e-7);
  double rstd = tensor(p, got, "rstd").get(0);
  EXPECT_NEAR(rstd, r, r * 1e-7);
  EXPECT_NEAR(1.0 / (rstd * rstd) - eps, 9.7647e-5, 1e-9);
  EXPECT_EQ(tensor(p, got, "mu").get(0), rounded(DType::f32, mu));
  const HostTensor& y = tensor(p, got, "y");
  EXPECT_NEAR(y.get(n - 1), -96.37, 0.01);
  EXPECT_NEAR(y.get(n - 1), (255.0 - mu) * r, 1e-5);
  for (int64_t j = 0; j + 1 < n; ++j) {
    ASSERT_NEAR(y.get(j), (1.0 / n) * r, 1e-9) << j;  // about +0.0094
  }
  EXPECT_NEAR(y.get(0), 0.0094, 0.0001);
}

TEST(InterpNumerics, RmsNormOfLargeF16InputsIsScaleInvariant) {
  const int64_t m = 4, n = 4096;
  Vec small = normal(m * n, 51);
  for (double& v : small) v = rounded(DType::f16, std::clamp(v, -7.5, 7.5));
  Vec big(small.size());
  for (size_t i = 0; i < small.size(); ++i) big[i] = small[i] * 8192.0;  // exact in f16
  double largest = 0;
  for (double v : big) largest = std::max(largest, std::fabs(v));
  ASSERT_GT(largest, 1e4);  // magnitudes around 1e4; x^2 overflows f16, not f32
  Vec w = normal(n, 52);
  auto run = [&](const Vec& x) {
    Problem p = problem(
        "stdlib/rms_norm.kdsl", "rms_norm", DType::f16, m, n, 53,
        {{"x", make_tensor(DType::f16, {m, n}, x)}, {"w", make_tensor(DType::f16, {n}, w)}});
    std::vector<HostTensor> got = run_reference(p);
    return std::make_pair(values(tensor(p, got, "y")), values(tensor(p, got, "rstd")));
  };
  auto [y_small, r_small] = run(small);
  auto [y_big, r_big] = run(big);
  for (int64_t i = 0; i < m; ++i) EXPECT_NEAR(r_big[i] * 8192.0, r_small[i], r_small[i] * 1e-6);
  int nonzero = 0;
  for (size_t i = 0; i < y_big.size(); ++i) {
    ASSERT_TRUE(std::isfinite(y_big[i])) << i;
    // eps = 1e-6 against mean(x^2) ~ 1 changes y by 5e-7 relative: below f16's half ulp, so
    // the two results round to the same value except at a rare rounding tie.
    ASSERT_NEAR(y_big[i], y_small[i], std::ldexp(std::fabs(y_small[i]), -10) + 1e-7) << i;
    nonzero += y_big[i] != 0;
  }
  EXPECT_GT(nonzero, static_cast<int>(y_big.size() * 9 / 10));
}

TEST(InterpNumerics, AddRmsNormBwdIsResidualGradientPlusRmsNormBwd) {
  const int64_t m = 5, n = 1000;
  for (DType t : kDtypes) {
    auto saved = rms_saved(t, m, n, 61, "h");
    Vec dh = normal(m * n, 62), dy = normal(m * n, 63);
    std::map<std::string, HostTensor> in = saved;
    in["dh"] = make_tensor(t, {m, n}, dh);
    in["dy"] = make_tensor(t, {m, n}, dy);
    in["w"] = make_tensor(t, {n}, normal(n, 64));
    Problem fused = problem("stdlib/rms_norm.kdsl", "add_rms_norm_bwd", t, m, n, 65, in);
    Vec h = values(in["h"]), w = values(in["w"]), r = values(in["rstd"]);
    dh = values(in["dh"]);
    dy = values(in["dy"]);
    Vec expected(m * n);
    for (int64_t i = 0; i < m; ++i) {
      double gh = 0;
      for (int64_t j = 0; j < n; ++j) gh += dy[i * n + j] * w[j] * h[i * n + j] / n;
      for (int64_t j = 0; j < n; ++j) {
        double rms_bwd = r[i] * dy[i * n + j] * w[j] - h[i * n + j] * r[i] * r[i] * r[i] * gh;
        expected[i * n + j] = dh[i * n + j] + rms_bwd;
      }
    }
    std::vector<HostTensor> got = run_reference(fused);
    expect_rounded_from(tensor(fused, got, "dx"), expected, fmt::format("dx {}", dtype_name(t)));
    // And the rms_norm_bwd kernel on the same h (as x) gives dx - dh, the same dw.
    in.erase("dh");
    in["x"] = in["h"];
    in.erase("h");
    Problem plain = problem("stdlib/rms_norm.kdsl", "rms_norm_bwd", t, m, n, 66, in);
    std::vector<HostTensor> got_plain = run_reference(plain);
    Vec dx_plain = values(tensor(plain, got_plain, "dx"));
    double largest = 0;
    for (double v : expected) largest = std::max(largest, std::fabs(v));
    for (size_t i = 0; i < expected.size(); ++i) {
      // Both are rounded to T: allow an ulp of each at the scale of the row.
      ASSERT_NEAR(tensor(fused, got, "dx").get(i), dh[i] + dx_plain[i],
                  2 * std::ldexp(largest, -mantissa_bits(t)))
          << dtype_name(t) << " " << i;
    }
    Vec dw_fused = values(tensor(fused, got, "dw")),
        dw_plain = values(tensor(plain, got_plain, "dw"));
    EXPECT_EQ(dw_fused, dw_plain) << dtype_name(t);
  }
}

TEST(InterpNumerics, SoftmaxOfAMostlyMaskedRow) {
  const int64_t n = 4096;
  for (DType t : kDtypes) {
    // Row 0: only the first 8 entries finite. Row 1: entirely -inf (fully masked).
    Vec x(2 * n, -kInf), head = normal(8, 71, 3.0);
    for (int j = 0; j < 8; ++j) x[j] = rounded(t, head[j]);
    Vec first8(x.begin(), x.begin() + 8);
    Vec s8 = softmax_row(first8), l8 = log_softmax_row(first8);
    HostTensor xt = make_tensor(t, {2, n}, x);
    Problem sp = problem("stdlib/softmax.kdsl", "softmax", t, 2, n, 72, {{"x", xt}});
    Problem lp = problem("stdlib/softmax.kdsl", "log_softmax", t, 2, n, 73, {{"x", xt}});
    const HostTensor y = run_reference(sp)[1];
    const HostTensor ly = run_reference(lp)[1];
    Vec ys(s8), ls(l8);
    ys.resize(n, 0.0);
    ls.resize(n, -kInf);
    ys.resize(2 * n, 0.0);    // the all -inf row: zeros
    ls.resize(2 * n, -kInf);  // and -inf
    expect_rounded_from(y, ys, fmt::format("softmax {}", dtype_name(t)));
    expect_rounded_from(ly, ls, fmt::format("log_softmax {}", dtype_name(t)));
    for (int64_t j = 8; j < 2 * n; ++j) {
      ASSERT_EQ(y.get(j), 0.0) << j;
      ASSERT_FALSE(std::signbit(y.get(j))) << j;
      ASSERT_EQ(ly.get(j), -kInf) << j;
    }
    // Backward through the saved outputs: masked entries get zero gradient from softmax_bwd,
    // and log_softmax_bwd passes dy through where exp(y) = 0.
    Vec dy = normal(2 * n, 74);
    HostTensor dyt = make_tensor(t, {2, n}, dy);
    Problem sb =
        problem("stdlib/softmax.kdsl", "softmax_bwd", t, 2, n, 75, {{"dy", dyt}, {"y", y}});
    Problem lb =
        problem("stdlib/softmax.kdsl", "log_softmax_bwd", t, 2, n, 76, {{"dy", dyt}, {"y", ly}});
    HostTensor dxs = tensor(sb, run_reference(sb), "dx"), dxl = tensor(lb, run_reference(lb), "dx");
    for (int64_t j = 8; j < 2 * n; ++j) {
      ASSERT_EQ(dxs.get(j), 0.0) << j;
      ASSERT_EQ(dxl.get(j), dyt.get(j)) << j;
    }
  }
}

}  // namespace
}  // namespace kdsl

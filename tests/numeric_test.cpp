#include "dsl/numeric.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "src/verify.h"

namespace kdsl {
namespace {

TEST(Numeric, Bf16RoundsToNearestEven) {
  EXPECT_EQ(round_to(DType::bf16, 1.0), 1.0);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even gives 1.
  EXPECT_EQ(round_to(DType::bf16, 1.0 + std::ldexp(1.0, -8)), 1.0);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even gives 1 + 2^-6.
  EXPECT_EQ(round_to(DType::bf16, 1.0 + 3 * std::ldexp(1.0, -8)), 1.0 + std::ldexp(1.0, -6));
  EXPECT_TRUE(std::isinf(round_to(DType::bf16, 3.4e38)));
}

TEST(Numeric, F16LimitsAndSubnormals) {
  EXPECT_EQ(round_to(DType::f16, 65504.0), 65504.0);
  EXPECT_TRUE(std::isinf(round_to(DType::f16, 65520.0)));  // halfway to 2^16 rounds up
  EXPECT_EQ(round_to(DType::f16, 65519.0), 65504.0);
  EXPECT_EQ(round_to(DType::f16, std::ldexp(1.0, -24)), std::ldexp(1.0, -24));
  EXPECT_EQ(round_to(DType::f16, std::ldexp(1.0, -26)), 0.0);
}

TEST(Numeric, BitConversionsRoundTrip) {
  std::mt19937 rng(7);
  for (int i = 0; i < 65536; ++i) {
    uint16_t b = static_cast<uint16_t>(i);
    double h = f16_bits_to_double(b);
    if (!std::isnan(h)) {
      EXPECT_EQ(double_to_f16_bits(h), b) << i;
    }
    double bf = bf16_bits_to_double(b);
    if (!std::isnan(bf)) {
      EXPECT_EQ(double_to_bf16_bits(bf), b) << i;
    }
  }
  std::normal_distribution<double> nd(0, 100);
  for (int i = 0; i < 1000; ++i) {
    double v = nd(rng);
    EXPECT_EQ(f16_bits_to_double(double_to_f16_bits(v)), round_to(DType::f16, v));
    EXPECT_EQ(bf16_bits_to_double(double_to_bf16_bits(v)), round_to(DType::bf16, v));
  }
}

TEST(Numeric, IntegersTruncateAndSaturate) {
  EXPECT_EQ(round_to(DType::i32, -2.7), -2.0);
  EXPECT_EQ(round_to(DType::i32, 1e20), 2147483647.0);
  EXPECT_EQ(round_to(DType::b8, 0.5), 1.0);
}

// A correct f32 running sum of random values fails a purely relative bound where the sums cross
// zero; scan_tolerance (the CLI's --verify and the scan tests use it) accepts it and still
// rejects an element off by a fraction of a step.
TEST(Verify, ScanToleranceFollowsThePartialSums) {
  std::mt19937 rng(20261130);
  std::uniform_real_distribution<double> step(-1.0, 1.0);
  const int64_t n = 32768;
  HostTensor got(DType::f32, {n}), ref(DType::f32, {n});
  float sum32 = 0;
  double sum64 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(static_cast<float>(step(rng)));
    sum32 += static_cast<float>(x);
    sum64 += x;
    got.set(i, sum32);
    ref.set(i, sum64);
  }
  EXPECT_FALSE(compare(got, ref, tolerance_for(DType::f32)).ok)
      << "this input was meant to show the relative bound failing a correct sum";
  const Tolerance tol = scan_tolerance(DType::f32, ref);
  EXPECT_GT(tol.atol, tolerance_for(DType::f32).atol);
  EXPECT_TRUE(compare(got, ref, tol).ok);
  got.set(n / 2, got.get(n / 2) + 0.25);  // a quarter of a typical step off
  const Comparison bad = compare(got, ref, tol);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.worst, n / 2);
}

// Row outputs of reduction kernels (row_tolerance): the absolute tolerance follows the output's
// root-mean-square value. 16-bit: in place of the dtype's fixed atol. Softmax outputs of a bf16
// row of 32768 average 3e-5, far under bf16's atol of 1e-2: an output of zeros, or one off by
// 20%, passed the dtype's tolerance and fails this one; the bf16 rounding of every value still
// passes. f32: at least the fixed atol; a value that cancels (softmax backward:
// y * (dy - sum(dy * y)) near y = 0) may be off by far more than 1e-4 of itself while its error
// is small beside the row's values.
TEST(Verify, RowOutputsScaleTheAbsoluteToleranceWithTheirValues) {
  std::mt19937 rng(20261204);
  std::normal_distribution<double> normal(0.0, 1.0);
  const int64_t n = 32768;
  HostTensor ref(DType::bf16, {n}), rounded(DType::bf16, {n}), zeros(DType::bf16, {n}),
      off(DType::bf16, {n});
  double total = 0;
  std::vector<double> e(n);
  for (int64_t i = 0; i < n; ++i) total += e[i] = std::exp(normal(rng));
  for (int64_t i = 0; i < n; ++i) {
    ref.set(i, e[i] / total);  // HostTensor::set rounds to bf16
    rounded.set(i, ref.get(i));
    zeros.set(i, 0.0);
    off.set(i, ref.get(i) * (i == n / 3 ? 1.2 : 1.0));
  }
  EXPECT_TRUE(compare(zeros, ref, tolerance_for(DType::bf16)).ok)
      << "this input was meant to show the fixed atol accepting zeros";
  const Tolerance tol = row_tolerance(DType::bf16, ref);
  EXPECT_LT(tol.atol, 1e-6);
  EXPECT_TRUE(compare(rounded, ref, tol).ok);
  EXPECT_FALSE(compare(zeros, ref, tol).ok);
  const Comparison c = compare(off, ref, tol);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.worst, n / 3);

  HostTensor dx(DType::f32, {4}), got(DType::f32, {4});
  for (int64_t i = 0; i < 4; ++i) dx.set(i, i == 0 ? -0.0078206 : (i % 2 ? 150.0 : -120.0));
  for (int64_t i = 0; i < 4; ++i) got.set(i, dx.get(i));
  got.set(0, -0.0077840);
  EXPECT_FALSE(compare(got, dx, tolerance_for(DType::f32)).ok);
  EXPECT_TRUE(compare(got, dx, row_tolerance(DType::f32, dx)).ok);
  HostTensor one(DType::f32, {1});  // RMSNorm backward at N = 1 cancels entirely (on the H200)
  one.set(0, -9.83686277e-06);
  HostTensor one_got(DType::f32, {1});
  one_got.set(0, -9.84884173e-06);
  EXPECT_TRUE(compare(one_got, one, row_tolerance(DType::f32, one)).ok);
  got.set(1, 150.1);  // 0.1 off on 150: beyond rtol x 150 + atol (about 0.016)
  EXPECT_FALSE(compare(got, dx, row_tolerance(DType::f32, dx)).ok);
  // f16 outputs below its smallest normal (6.1e-5) keep an atol of rtol times that.
  HostTensor tiny(DType::f16, {2});
  tiny.set(0, 0.0);
  tiny.set(1, 0.0);
  EXPECT_NEAR(row_tolerance(DType::f16, tiny).atol, 4e-3 * 0x1p-14, 1e-15);
}

// A failed comparison says when the reference itself reaches the end of the output's range (the
// inputs overflow, as a complex recurrence over random N(0, 1) coefficients does), and not when
// the values are ordinary.
TEST(Verify, FailuresNearTheEndOfTheRangeSaySo) {
  HostTensor got(DType::f32, {4}), ref(DType::f32, {4});
  for (int64_t i = 0; i < 4; ++i) {
    got.set(i, 1.5 * static_cast<double>(i + 1));
    ref.set(i, 1.5 * static_cast<double>(i + 1));
  }
  const Tolerance tol = tolerance_for(DType::f32);
  EXPECT_EQ(overflow_note(DType::f32, compare(got, ref, tol)), "") << "passed";
  got.set(2, 7.0);
  EXPECT_EQ(overflow_note(DType::f32, compare(got, ref, tol)), "") << "an ordinary mismatch";
  ref.set(3, -2.8e38);
  got.set(3, -INFINITY);
  const Comparison near = compare(got, ref, tol);
  EXPECT_FALSE(near.ok);
  EXPECT_DOUBLE_EQ(near.max_abs_expected, static_cast<double>(static_cast<float>(2.8e38)));
  EXPECT_NE(overflow_note(DType::f32, near).find("the reference reaches 2.8e+38"),
            std::string::npos)
      << overflow_note(DType::f32, near);
  ref.set(0, INFINITY);
  const Comparison inf = compare(got, ref, tol);
  EXPECT_EQ(inf.nonfinite_expected, 1);
  EXPECT_NE(overflow_note(DType::f32, inf).find("1 infinite or NaN value"), std::string::npos);
  HostTensor h(DType::f16, {1}), hr(DType::f16, {1});
  h.set(0, 60000.0);
  hr.set(0, 30000.0);
  EXPECT_NE(overflow_note(DType::f16, compare(h, hr, tolerance_for(DType::f16))).find("65504"),
            std::string::npos);
}

}  // namespace
}  // namespace kdsl

#include "dsl/numeric.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

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

}  // namespace
}  // namespace kdsl

#include "numeric.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace kdsl {
namespace {

// Rounds to a binary format with `digits` significant bits, minimum normal exponent `emin`
// (value 2^emin) and largest finite value `max_finite`. Scaling by a power of two is exact, so
// one nearbyint (ties to even in the default rounding mode) gives a correctly rounded result.
double round_binary(double v, int digits, int emin, double max_finite) {
  if (!std::isfinite(v) || v == 0) return v;
  int e = std::max(std::ilogb(v), emin);
  double ulp = std::ldexp(1.0, e - (digits - 1));
  double r = std::nearbyint(v / ulp) * ulp;
  if (std::fabs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), v);
  return r;
}

constexpr double kF16Max = 65504.0;
constexpr double kBF16Max = 3.38953138925153547590470800371487866880e38;

double saturate_int(double v, double lo, double hi) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(v) + 0.0;  // -0.5 truncates to 0, not -0.0 (integers have no -0)
  return t < lo ? lo : (t > hi ? hi : t);
}

}  // namespace

double round_to(DType t, double v) {
  switch (t) {
    case DType::f16:
      return round_binary(v, 11, -14, kF16Max);
    case DType::bf16:
      return round_binary(v, 8, -126, kBF16Max);
    case DType::f32:
    case DType::c64:
      return static_cast<double>(static_cast<float>(v));
    case DType::f64:
      return v;
    case DType::i32:
      return saturate_int(v, -2147483648.0, 2147483647.0);
    case DType::i64:
      return saturate_int(v, -9223372036854775808.0, 9223372036854774784.0);
    case DType::b8:
      return v != 0 ? 1 : 0;
  }
  return v;
}

double f16_bits_to_double(uint16_t bits) {
  int sign = bits >> 15, exp = (bits >> 10) & 0x1f, man = bits & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), -24);
  } else if (exp == 31) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(static_cast<double>(man | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

double bf16_bits_to_double(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t double_to_f16_bits(double v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return 0x7e00;
  double r = std::fabs(round_to(DType::f16, v));
  if (std::isinf(r)) return sign | 0x7c00;
  if (r == 0) return sign;
  int e = std::ilogb(r);
  if (e < -14) return sign | static_cast<uint16_t>(std::ldexp(r, 24));  // subnormal
  uint16_t man = static_cast<uint16_t>(std::ldexp(r, 10 - e)) & 0x3ff;
  return sign | static_cast<uint16_t>((e + 15) << 10) | man;
}

uint16_t double_to_bf16_bits(double v) {
  if (std::isnan(v)) return std::signbit(v) ? 0xffc0 : 0x7fc0;
  float f = static_cast<float>(round_to(DType::bf16, v));  // exact: bf16 values are floats
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<uint16_t>(u >> 16);
}

std::string value_fit_problem(double v, DType t) {
  if (is_int(t) || t == DType::b8) {
    if (!std::isfinite(v) || v != std::trunc(v)) return "which holds whole numbers only";
    if (t == DType::b8 && v != 0 && v != 1) return "which holds 0 or 1 only";
    // (2^63 itself is the first double beyond i64; 2^31 - 1 is exact.)
    const bool i32 = t == DType::i32;
    if (i32 ? v < -2147483648.0 || v > 2147483647.0
            : v < -9223372036854775808.0 || v >= 9223372036854775808.0) {
      return i32 ? "which holds -2147483648 to 2147483647"
                 : "which holds -9223372036854775808 to 9223372036854775807";
    }
    return "";
  }
  const double max = t == DType::f16    ? 65504.0
                     : t == DType::bf16 ? 3.3895313892515355e38
                     : t == DType::f64  ? std::numeric_limits<double>::max()
                                        : static_cast<double>(std::numeric_limits<float>::max());
  if (std::isfinite(v) && std::fabs(v) > max) {
    return fmt::format("whose largest finite value is {} (give inf for infinity)", max);
  }
  return "";
}

}  // namespace kdsl

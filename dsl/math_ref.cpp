#include "math_ref.h"

#include <cmath>
#include <limits>

namespace kdsl {

double ref_unary(ir::UnaryFn fn, double x) {
  using F = ir::UnaryFn;
  constexpr double kSqrt2OverPi = 0.79788456080286535587989211986876;
  switch (fn) {
    case F::neg:
      return -x;
    case F::lnot:
      return x == 0 ? 1 : 0;
    case F::exp:
      return std::exp(x);
    case F::exp2:
      return std::exp2(x);
    case F::log:
      return std::log(x);
    case F::log2:
      return std::log2(x);
    case F::log1p:
      return std::log1p(x);
    case F::expm1:
      return std::expm1(x);
    case F::sqrt:
      return std::sqrt(x);
    case F::rsqrt:
      return 1.0 / std::sqrt(x);
    case F::abs:
      return std::fabs(x);
    case F::floor:
      return std::floor(x);
    case F::ceil:
      return std::ceil(x);
    case F::tanh:
      return std::tanh(x);
    case F::sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case F::erf:
      return std::erf(x);
    case F::silu:
      return x / (1.0 + std::exp(-x));
    case F::gelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case F::gelu_tanh:
      return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
    case F::softplus:
      return std::fmax(x, 0.0) + std::log1p(std::exp(-std::fabs(x)));
    case F::isnan:
      return std::isnan(x) ? 1 : 0;
    case F::isinf:
      return std::isinf(x) ? 1 : 0;
    case F::isfinite:
      return std::isfinite(x) ? 1 : 0;
    case F::real:
      return x;
    case F::imag:
      return 0;
    case F::conj:
      return x;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

double ref_binary(ir::BinaryFn fn, double a, double b) {
  using F = ir::BinaryFn;
  switch (fn) {
    case F::add:
      return a + b;
    case F::sub:
      return a - b;
    case F::mul:
      return a * b;
    case F::div:
      return a / b;
    case F::floordiv:
      return std::floor(a / b);
    case F::mod: {
      double r = std::fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    case F::pow:
      return std::pow(a, b);
    case F::min:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN()
                                            : std::fmin(a, b);
    case F::max:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN()
                                            : std::fmax(a, b);
    case F::land:
      return (a != 0 && b != 0) ? 1 : 0;
    case F::lor:
      return (a != 0 || b != 0) ? 1 : 0;
    case F::complex:
      break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

bool ref_compare(ir::CompareFn fn, double a, double b) {
  using F = ir::CompareFn;
  switch (fn) {
    case F::lt:
      return a < b;
    case F::le:
      return a <= b;
    case F::eq:
      return a == b;
    case F::ne:
      return a != b;
    case F::gt:
      return a > b;
    case F::ge:
      return a >= b;
  }
  return false;
}

}  // namespace kdsl

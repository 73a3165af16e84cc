#include "codegen_expr.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "kdsl/error.h"
#include "text_util.h"

namespace kdsl::cuda {

const char* reg_type(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16:
    case DType::f32:
      return "float";
    case DType::f64:
      return "double";
    case DType::i32:
      return "int";
    case DType::i64:
      return "kdsl_i64";  // long long (cuda_prelude.cpp), one word: kdsl_i64{} is valid C++
    case DType::b8:
      return "bool";
    case DType::c64:
      return "kdsl_c64";
  }
  return "float";
}

const char* storage_type(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16:
      return "kdsl_u16";
    case DType::b8:
      return "kdsl_u8";  // one word, so that kdsl_u8{} value-initializes it
    default:
      return reg_type(t);
  }
}

std::string from_storage(DType t, const std::string& e) {
  switch (t) {
    case DType::bf16:
      return fmt::format("kdsl_bf16_to_f32({})", e);
    case DType::f16:
      return fmt::format("kdsl_f16_to_f32({})", e);
    case DType::b8:
      return fmt::format("({} != 0)", e);
    default:
      return e;
  }
}

std::string to_storage(DType t, const std::string& e) {
  switch (t) {
    case DType::bf16:
      return fmt::format("kdsl_f32_to_bf16({})", e);
    case DType::f16:
      return fmt::format("kdsl_f32_to_f16({})", e);
    case DType::b8:
      return fmt::format("static_cast<unsigned char>({})", e);
    default:
      return e;
  }
}

namespace {

std::string float_literal(double v, bool single) {
  if (std::isnan(v)) return single ? "kdsl_nan_f()" : "kdsl_nan_d()";
  if (std::isinf(v)) {
    return fmt::format("{}{}", v < 0 ? "-" : "", single ? "kdsl_inf_f()" : "kdsl_inf_d()");
  }
  if (single) return fmt::format("{:a}f", static_cast<double>(static_cast<float>(v)));
  return fmt::format("{:a}", v);
}

std::string round16(DType t, const std::string& e) {
  if (t == DType::bf16) return fmt::format("kdsl_round_bf16({})", e);
  if (t == DType::f16) return fmt::format("kdsl_round_f16({})", e);
  return e;
}

std::string cast_expr(DType from, DType to, const std::string& a) {
  if (from == to) return a;
  if (to == DType::b8) return fmt::format("({} != {})", a, zero(from));
  std::string x = a;
  if (from == DType::b8) x = fmt::format("({} ? 1 : 0)", a);
  switch (to) {
    case DType::bf16:
    case DType::f16: {
      bool f32_reg = from == DType::f32 || from == DType::f16 || from == DType::bf16;
      return round16(to, f32_reg ? x : fmt::format("static_cast<float>({})", x));
    }
    case DType::f32:
      if (from == DType::f16 || from == DType::bf16) return x;
      return fmt::format("static_cast<float>({})", x);
    case DType::f64:
      return fmt::format("static_cast<double>({})", x);
    case DType::i32:
      return fmt::format("static_cast<int>({})", x);
    case DType::i64:
      return fmt::format("static_cast<long long>({})", x);
    default:
      break;
  }
  throw InternalError(
      fmt::format("codegen: no conversion from {} to {}", dtype_name(from), dtype_name(to)));
}

std::string unary_expr(ir::UnaryFn fn, DType t, DType result, const std::string& a, bool approx) {
  using F = ir::UnaryFn;
  bool d = t == DType::f64;
  approx = approx && t != DType::f64;
  auto f = [&](const char* name) { return fmt::format("{}{}({})", name, d ? "" : "f", a); };
  const char* one = d ? "1.0" : "1.f";
  std::string r;
  if (t == DType::c64) {
    switch (fn) {
      case F::neg:
        return fmt::format("(-{})", a);
      case F::abs:
        return fmt::format("kdsl_cabs({})", a);
      case F::real:
        return fmt::format("({}).re", a);
      case F::imag:
        return fmt::format("({}).im", a);
      case F::conj:
        return fmt::format("kdsl_conj({})", a);
      default:
        break;
    }
  } else if (is_int(t) || t == DType::b8) {
    switch (fn) {
      case F::neg:
        return fmt::format("(-{})", a);
      case F::lnot:
        return fmt::format("(!{})", a);
      case F::abs:
        return fmt::format("{}({})", t == DType::i64 ? "llabs" : "abs", a);
      default:
        break;
    }
  } else {
    switch (fn) {
      case F::neg:
        r = fmt::format("(-{})", a);
        break;
      case F::exp:
        r = approx ? fmt::format("kdsl_exp_approx({})", a) : f("exp");
        break;
      case F::exp2:
        r = approx ? fmt::format("kdsl_ex2_approx({})", a) : f("exp2");
        break;
      case F::log:
        r = f("log");
        break;
      case F::log2:
        r = f("log2");
        break;
      case F::log1p:
        r = f("log1p");
        break;
      case F::expm1:
        r = approx ? fmt::format("kdsl_expm1_approx({})", a) : f("expm1");
        break;
      case F::sqrt:
        // Not for f16 arithmetic: its square roots can lie within 2^-25 (relative) of an f16
        // rounding midpoint, closer than sqrt.approx's error, so only the correctly rounded f32
        // root rounds to the correctly rounded f16 one (division and bf16 keep a wider margin).
        r = approx && t != DType::f16 ? fmt::format("kdsl_sqrt_approx({})", a) : f("sqrt");
        break;
      case F::rsqrt:
        r = f("rsqrt");
        break;
      case F::abs:
        r = f("fabs");
        break;
      case F::floor:
        r = f("floor");
        break;
      case F::ceil:
        r = f("ceil");
        break;
      case F::tanh:
        r = f("tanh");
        break;
      case F::erf:
        r = f("erf");
        break;
      case F::sigmoid:
        r = approx ? fmt::format("kdsl_sigmoid_approx({})", a)
                   : fmt::format("({} / ({} + {}(-{})))", one, one, d ? "exp" : "expf", a);
        break;
      case F::silu:
        r = approx ? fmt::format("({} * kdsl_sigmoid_approx({}))", a, a)
                   : fmt::format("({} / ({} + {}(-{})))", a, one, d ? "exp" : "expf", a);
        break;
      case F::gelu:
        r = fmt::format("({0} * {1} * ({2} + {3}({1} * {4})))", d ? "0.5" : "0.5f", a, one,
                        d ? "erf" : "erff",
                        d ? "0.70710678118654752440" : "0.70710678118654752440f");
        break;
      case F::gelu_tanh:
        r = fmt::format("({0} * {1} * ({2} + {3}({4} * ({1} + {5} * {1} * {1} * {1}))))",
                        d ? "0.5" : "0.5f", a, one, d ? "tanh" : "tanhf",
                        d ? "0.79788456080286535588" : "0.79788456080286535588f",
                        d ? "0.044715" : "0.044715f");
        break;
      case F::softplus:
        r = fmt::format("({0}({1}, {2}) + {3}({4}(-{5}({1}))))", d ? "fmax" : "fmaxf", a,
                        d ? "0.0" : "0.f", d ? "log1p" : "log1pf",
                        d ? "exp" : (approx ? "kdsl_exp_approx" : "expf"), d ? "fabs" : "fabsf");
        break;
      case F::isnan:
        return fmt::format("({0} != {0})", a);
      case F::isinf:
        return fmt::format("({}({}) == {})", d ? "fabs" : "fabsf", a,
                           d ? "kdsl_inf_d()" : "kdsl_inf_f()");
      case F::isfinite:
        return fmt::format("({}({}) < {})", d ? "fabs" : "fabsf", a,
                           d ? "kdsl_inf_d()" : "kdsl_inf_f()");
      default:
        break;
    }
    if (!r.empty()) return round16(result, r);
  }
  throw InternalError(fmt::format("codegen: {} of {}", ir::name(fn), dtype_name(t)));
}

std::string binary_expr(ir::BinaryFn fn, DType t, const std::string& a, const std::string& b,
                        bool approx) {
  using F = ir::BinaryFn;
  bool d = t == DType::f64;
  std::string r;
  switch (fn) {
    case F::add:
      r = fmt::format("({} + {})", a, b);
      break;
    case F::sub:
      r = fmt::format("({} - {})", a, b);
      break;
    case F::mul:
      r = fmt::format("({} * {})", a, b);
      break;
    case F::div:
      r = approx && (t == DType::f32 || t == DType::f16 || t == DType::bf16)
              ? fmt::format("kdsl_div_approx({}, {})", a, b)
              : fmt::format("({} / {})", a, b);
      break;
    case F::floordiv:
      r = fmt::format("kdsl_floordiv({}, {})", a, b);
      break;
    case F::mod:
      r = fmt::format("kdsl_mod({}, {})", a, b);
      break;
    case F::pow:
      r = fmt::format("{}({}, {})", d ? "pow" : "powf", a, b);
      break;
    case F::min:
      r = fmt::format("kdsl_min({}, {})", a, b);
      break;
    case F::max:
      r = fmt::format("kdsl_max({}, {})", a, b);
      break;
    case F::land:
      return fmt::format("({} && {})", a, b);
    case F::lor:
      return fmt::format("({} || {})", a, b);
    case F::complex:
      return fmt::format("kdsl_c64{{{}, {}}}", a, b);
  }
  return round16(t, r);
}

}  // namespace

std::string convert(DType from, DType to, const std::string& e) {
  return cast_expr(from, to, e);
}

std::string literal(DType t, double v, double im) {
  switch (t) {
    case DType::f16:
    case DType::bf16:
    case DType::f32:
      return float_literal(v, true);
    case DType::f64:
      return float_literal(v, false);
    case DType::i32:
      return fmt::format("{}", static_cast<int64_t>(v));
    case DType::i64:
      return fmt::format("{}LL", static_cast<int64_t>(v));
    case DType::b8:
      return v != 0 ? "true" : "false";
    case DType::c64:
      return fmt::format("kdsl_c64{{{}, {}}}", float_literal(v, true), float_literal(im, true));
  }
  return "0";
}

ir::ValueId stored_value(const ir::Kernel& k, ir::ValueId v, DType storage) {
  const ir::Node& n = k.node(v);
  if (n.op == ir::Op::cast && n.type.dtype == storage &&
      (storage == DType::bf16 || storage == DType::f16) &&
      k.node(n.args[0]).type.dtype == DType::f32) {
    return n.args[0];
  }
  return v;
}

std::string zero(DType t) {
  return literal(t, 0);
}

namespace {

enum class MathMode { by_data, accurate, approx };

MathMode math_mode() {
  const char* env = std::getenv("KDSL_MATH");
  if (env == nullptr || *env == '\0') return MathMode::by_data;
  // Any case, spaces around ignored (as KDSL_CACHE).
  const std::string mode = env_word(env);
  if (mode == "auto") return MathMode::by_data;
  if (mode == "accurate") return MathMode::accurate;
  if (mode == "approx") return MathMode::approx;
  throw ArgumentError(
      fmt::format("KDSL_MATH='{}': expected 'auto' (the default), 'accurate' or 'approx'", env));
}

// The kernel has a float generic, and every one is bound to f16 or bf16.
bool sixteen_bit_generics(const ir::Kernel& k) {
  bool any = false;
  for (const auto& [name, dtype] : k.generics) {
    if (dtype == DType::f16 || dtype == DType::bf16) {
      any = true;
    } else if (is_float(dtype) || dtype == DType::c64) {
      return false;
    }
  }
  return any;
}

}  // namespace

std::string math_override() {
  switch (math_mode()) {
    case MathMode::by_data:
      return "";
    case MathMode::accurate:
      return "accurate";
    case MathMode::approx:
      return "approx";
  }
  return "";
}

bool approx_math(const ir::Kernel& k) {
  const MathMode m = math_mode();
  return m == MathMode::by_data ? sixteen_bit_generics(k) : m == MathMode::approx;
}

std::string math_note(const ir::Kernel& k) {
  const char* what =
      "ex2.approx, rcp.approx, div.full and sqrt.approx for exp, exp2, sigmoid, silu, softplus, "
      "expm1 (a polynomial near 0), / and sqrt";
  switch (math_mode()) {
    case MathMode::accurate:
      return "f32 math: full precision (KDSL_MATH=accurate)";
    case MathMode::approx:
      return fmt::format("f32 math: approximate (KDSL_MATH=approx): {}", what);
    case MathMode::by_data:
      break;
  }
  return sixteen_bit_generics(k)
             ? fmt::format("f32 math: approximate (every float generic is f16 or bf16): {}", what)
             : "f32 math: full precision (no float generic, or one bound to f32 or f64)";
}

namespace {

// Node `id` is a float constant other than zero (also once rounded to f32) and NaN.
bool nonzero_constant(const ir::Kernel& k, ir::ValueId id) {
  const ir::Node& c = k.node(id);
  return c.op == ir::Op::constant && is_float(c.type.dtype) &&
         static_cast<float>(c.number) != 0.f && !std::isnan(c.number);
}

// Node `id` is max(x, c) (either order) with a constant c >= 2^-126, the smallest normal f32:
// never subnormal (NaN where x is NaN).
bool never_subnormal(const ir::Kernel& k, ir::ValueId id) {
  const ir::Node& m = k.node(id);
  if (m.op != ir::Op::binary || static_cast<ir::BinaryFn>(m.fn) != ir::BinaryFn::max) return false;
  for (ir::ValueId a : m.args) {
    const ir::Node& c = k.node(a);
    if (c.op == ir::Op::constant && c.type.dtype == DType::f32 &&
        c.number >= static_cast<double>(std::numeric_limits<float>::min()))
      return true;
  }
  return false;
}

}  // namespace

std::string op_expr(const ir::Kernel& k, const ir::Node& n, const std::vector<std::string>& args,
                    const std::vector<DType>& arg_dtypes) {
  switch (n.op) {
    case ir::Op::constant:
      return literal(n.type.dtype, n.number, n.number_im);
    case ir::Op::cast:
      return cast_expr(arg_dtypes[0], n.type.dtype, args[0]);
    case ir::Op::unary:
      if (static_cast<ir::UnaryFn>(n.fn) == ir::UnaryFn::rsqrt && arg_dtypes[0] == DType::f32 &&
          never_subnormal(k, n.args[0])) {
        return fmt::format("kdsl_rsqrt_normal({})", args[0]);
      }
      return unary_expr(static_cast<ir::UnaryFn>(n.fn), arg_dtypes[0], n.type.dtype, args[0],
                        approx_math(k));
    case ir::Op::binary: {
      const auto fn = static_cast<ir::BinaryFn>(n.fn);
      if ((fn == ir::BinaryFn::max || fn == ir::BinaryFn::min) && arg_dtypes[0] == DType::f32 &&
          arg_dtypes[1] == DType::f32 &&
          (nonzero_constant(k, n.args[0]) || nonzero_constant(k, n.args[1]))) {
        return fmt::format("kdsl_{}_nan({}, {})", fn == ir::BinaryFn::max ? "max" : "min", args[0],
                           args[1]);
      }
      return binary_expr(fn, arg_dtypes[0], args[0], args[1], approx_math(k));
    }
    case ir::Op::compare: {
      static const char* const ops[] = {"<", "<=", "==", "!=", ">", ">="};
      return fmt::format("({} {} {})", args[0], ops[n.fn], args[1]);
    }
    case ir::Op::select:
      return fmt::format("({} ? {} : {})", args[0], args[1], args[2]);
    default:
      break;
  }
  throw InternalError(fmt::format("codegen: op_expr of {}", ir::name(n.op)));
}

namespace {

std::string highest(DType t) {
  if (t == DType::i64) return "0x7fffffffffffffffLL";
  if (t == DType::i32) return "0x7fffffff";
  return literal(t, INFINITY);
}

std::string lowest(DType t) {
  if (t == DType::i64) return "(-0x7fffffffffffffffLL - 1)";
  if (t == DType::i32) return "(-0x7fffffff - 1)";
  return "(-" + literal(t, INFINITY) + ")";
}

}  // namespace

ReduceSpelling reduce_spelling(ir::ReduceKind kind, DType acc) {
  std::string t = reg_type(acc);
  switch (kind) {
    case ir::ReduceKind::sum:
      return {t, zero(acc), "kdsl_op_sum{}", "{0}"};
    case ir::ReduceKind::max:
      return {t, lowest(acc), "kdsl_op_max{}", "{0}"};
    case ir::ReduceKind::min:
      return {t, highest(acc), "kdsl_op_min{}", "{0}"};
    case ir::ReduceKind::var:
      return {fmt::format("kdsl_welford<{}>", t), fmt::format("kdsl_welford<{}>{{0, 0, 0}}", t),
              "kdsl_op_var{}", "({0}.m2 / {0}.n)"};
    case ir::ReduceKind::argmax:
      return {fmt::format("kdsl_arg<{}>", t),
              fmt::format("kdsl_arg<{}>{{{}, 0x7fffffffffffffffLL}}", t, lowest(acc)),
              "kdsl_op_argmax{}", "{0}.i"};
    case ir::ReduceKind::argmin:
      return {fmt::format("kdsl_arg<{}>", t),
              fmt::format("kdsl_arg<{}>{{{}, 0x7fffffffffffffffLL}}", t, highest(acc)),
              "kdsl_op_argmin{}", "{0}.i"};
    case ir::ReduceKind::first:
    case ir::ReduceKind::last:
      break;  // positional: only the scan schedule computes them
  }
  throw InternalError(fmt::format("codegen: no reduction spelling for {}", ir::name(kind)));
}

}  // namespace kdsl::cuda

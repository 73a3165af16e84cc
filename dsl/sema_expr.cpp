// Expressions: names, operators, views, casts and built-in functions.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "math_ref.h"
#include "numeric.h"
#include "sema_internal.h"
#include "text.h"

namespace kdsl::sema {

using ir::Form;
using ir::Op;
using Kind = Value::Kind;

namespace {

struct UnaryBuiltin {
  const char* name;
  ir::UnaryFn fn;
};
constexpr UnaryBuiltin kUnaryBuiltins[] = {
    {"exp", ir::UnaryFn::exp},
    {"exp2", ir::UnaryFn::exp2},
    {"log", ir::UnaryFn::log},
    {"log2", ir::UnaryFn::log2},
    {"log1p", ir::UnaryFn::log1p},
    {"expm1", ir::UnaryFn::expm1},
    {"sqrt", ir::UnaryFn::sqrt},
    {"rsqrt", ir::UnaryFn::rsqrt},
    {"abs", ir::UnaryFn::abs},
    {"floor", ir::UnaryFn::floor},
    {"ceil", ir::UnaryFn::ceil},
    {"tanh", ir::UnaryFn::tanh},
    {"sigmoid", ir::UnaryFn::sigmoid},
    {"erf", ir::UnaryFn::erf},
    {"silu", ir::UnaryFn::silu},
    {"gelu", ir::UnaryFn::gelu},
    {"gelu_tanh", ir::UnaryFn::gelu_tanh},
    {"softplus", ir::UnaryFn::softplus},
    {"isnan", ir::UnaryFn::isnan},
    {"isinf", ir::UnaryFn::isinf},
    {"isfinite", ir::UnaryFn::isfinite},
    {"real", ir::UnaryFn::real},
    {"imag", ir::UnaryFn::imag},
    {"conj", ir::UnaryFn::conj},
};

const char* const kOtherBuiltins[] = {"min",          "max",    "pow",     "where",  "sum",
                                      "mean",         "var",    "argmax",  "argmin", "position",
                                      "scan",         "cumsum", "cumprod", "cummax", "cummin",
                                      "logcumsumexp", "shift",  "first",   "last",   "parallel"};

const UnaryBuiltin* find_unary(const std::string& name) {
  for (const auto& b : kUnaryBuiltins) {
    if (name == b.name) return &b;
  }
  return nullptr;
}

bool is_bool_result(ir::UnaryFn fn) {
  return fn == ir::UnaryFn::isnan || fn == ir::UnaryFn::isinf || fn == ir::UnaryFn::isfinite;
}

Form join(Form a, Form b) {
  return a == Form::vector || b == Form::vector ? Form::vector : Form::scalar;
}

// Operand `i` of `at` (a binary operator or comparison, or a call such as min(a, b)), where a
// message about it puts its caret; `at` itself when it has no such operand.
const ast::Expr& operand(const ast::Expr& at, size_t i) {
  using EK = ast::ExprKind;
  const size_t at_arg = at.kind == EK::call ? i + 1 : i;
  if ((at.kind == EK::binary || at.kind == EK::compare || at.kind == EK::call) &&
      at_arg < at.args.size() && at.args[at_arg]) {
    return *at.args[at_arg];
  }
  return at;
}

}  // namespace

bool is_builtin(const std::string& name) {
  if (find_unary(name)) return true;
  for (const char* b : kOtherBuiltins) {
    if (name == b) return true;
  }
  return false;
}

const char* reserved_name(const ModuleScope& scope, const std::string& name) {
  if (scope.has_constant(name)) return "a module constant";
  // (A kernel's name is no callable function: a parameter may take it, as `def k(..., k: i32)`.)
  if (const ast::FunctionDef* fn = scope.function(name); fn && !fn->is_kernel())
    return "a function";
  if (parse_dtype(name)) return "a dtype";
  if (is_builtin(name)) return "a built-in function";
  if (name == "inf" || name == "nan" || name == "pi") return "a built-in constant";
  return nullptr;
}

std::vector<std::string> builtin_names() {
  std::vector<std::string> out;
  for (const auto& b : kUnaryBuiltins) out.push_back(b.name);
  for (const char* b : kOtherBuiltins) out.push_back(b);
  return out;
}

bool Value::same_as(const Value& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::node:
      return id == o.id;
    case Kind::weak:
      return num == o.num && is_int == o.is_int;
    case Kind::tuple:
      if (elems.size() != o.elems.size()) return false;
      for (size_t i = 0; i < elems.size(); ++i) {
        if (!elems[i].same_as(o.elems[i])) return false;
      }
      return true;
    case Kind::tensor:
    case Kind::loopvar:
      return index == o.index;
    case Kind::helper:
      return fn == o.fn;
    case Kind::dtype:
      return dtype == o.dtype;
    default:
      return false;
  }
}

ir::ValueId Builder::add(ir::Node n) {
  // The node's identity as raw bytes (no formatting: this runs for every node of every kernel
  // when a module loads). Constants compare by their bits.
  std::string key;
  key.reserve(48 + sizeof(ir::ValueId) * n.args.size() + 16 * n.view.size());
  auto put = [&key](const auto& v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(n.op);
  put(n.type.dtype);
  put(n.type.form);
  put(n.fn);
  put(n.index);
  put(n.number);
  put(n.number_im);
  put(n.reverse);
  put(n.exclusive);
  put(n.has_init);
  put(n.args.size());
  for (ir::ValueId a : n.args) put(a);
  for (const auto& a : n.view) {
    put(a.kind);
    put(a.value);
  }
  auto it = seen_.find(key);
  if (it != seen_.end() && n.op != Op::scan) return it->second;
  nodes_->push_back(std::move(n));
  auto id = static_cast<ir::ValueId>(nodes_->size() - 1);
  seen_[key] = id;
  return id;
}

Lowerer::Lowerer(ModuleScope& scope, const KernelSignature* sig, ir::Kernel* kernel)
    : scope_(scope),
      sig_(sig),
      kernel_(kernel),
      kernel_builder_(kernel ? &kernel->nodes : &scratch_),
      builder_(&kernel_builder_) {
  frames_.push_back(Frame{});
}

std::string Lowerer::describe(const Value& v) const {
  switch (v.kind) {
    case Kind::node:
      return fmt::format("a {} {}", v.type.form == Form::vector ? "vector of" : "scalar",
                         dtype_name(v.type.dtype));
    case Kind::weak:
      return "a number";
    case Kind::tuple:
      return fmt::format("a tuple of {}", v.elems.size());
    case Kind::tensor:
      return fmt::format("tensor '{}'", kernel_->tensors[v.index].name);
    case Kind::loopvar:
      return fmt::format("loop variable '{}'", kernel_->loop[v.index].name);
    case Kind::helper:
      return fmt::format("helper function '{}'", v.fn->name);
    case Kind::dtype:
      return fmt::format("dtype {}", dtype_name(v.dtype));
    default:
      return "an invalid value";
  }
}

std::optional<std::string> Lowerer::example_view(int32_t tensor, size_t* unreachable) const {
  const ir::TensorParam& t = kernel_->tensors[tensor];
  std::string out = t.name + "[";
  std::vector<bool> used(kernel_->loop.size(), false);
  bool slice = false;  // a view has at most one ':'
  for (size_t ax = 0; ax < t.shape.size(); ++ax) {
    std::string idx;
    if (!slice && t.shape[ax].symbol >= 0 && t.shape[ax].symbol == kernel_->vector_symbol) {
      idx = ":";
    }
    for (size_t l = 0; idx.empty() && l < kernel_->loop.size(); ++l) {
      if (!used[l] && kernel_->loop[l].extent == t.shape[ax].symbol) {
        idx = kernel_->loop[l].name;
        used[l] = true;
      }
    }
    if (idx.empty() && t.shape[ax].symbol < 0) idx = "0";
    if (idx.empty() && kernel_->vector_symbol < 0 && !slice) idx = ":";
    if (idx.empty()) {
      if (unreachable) *unreachable = ax;
      return std::nullopt;
    }
    slice |= idx == ":";
    out += (ax ? ", " : "") + idx;
  }
  return out + "]";
}

std::string Lowerer::unreachable_axis(int32_t tensor, size_t axis, bool named) const {
  const ir::TensorParam& t = kernel_->tensors[tensor];
  std::string loops;
  for (const ir::LoopVar& l : kernel_->loop) {
    loops += fmt::format("{}{} over {}", loops.empty() ? "" : ", ", l.name,
                         kernel_->symbols[l.extent].name);
  }
  return fmt::format(
      "no index fits {} (size {}): ':' takes the vector axis{}, a loop variable an axis of its "
      "extent ({}), an integer an axis of fixed size",
      named ? fmt::format("axis {} of '{}'", axis, t.name) : fmt::format("its axis {}", axis),
      kernel_->symbols[t.shape[axis].symbol].name,
      kernel_->vector_symbol >= 0
          ? fmt::format(" ({})", kernel_->symbols[kernel_->vector_symbol].name)
          : std::string(),
      loops);
}

std::vector<std::string> Lowerer::visible_names() const {
  std::vector<std::string> out = scope_.names();
  for (const auto& [n, v] : frames_.back().locals) out.push_back(n);
  if (kernel_ && !frames_.back().helper) {
    for (const auto& t : kernel_->tensors) out.push_back(t.name);
    for (const auto& s : kernel_->scalars) out.push_back(s.name);
    for (const auto& s : kernel_->symbols) out.push_back(s.name);
    for (const auto& g : kernel_->generics) out.push_back(g.first);
    if (in_loop_) {
      for (const auto& l : kernel_->loop) out.push_back(l.name);
    }
  }
  return out;
}

Value Lowerer::constant(double v, DType t, Form form) {
  ir::Node n;
  n.op = Op::constant;
  n.type = {t, Form::scalar};
  n.number = round_to(t, v);
  ir::ValueId id = builder_->add(std::move(n));
  (void)form;
  return Value::of(id, {t, Form::scalar});
}

Value Lowerer::lookup(const ast::Expr& e) {
  const std::string& n = e.name;
  Frame& f = frames_.back();
  if (auto it = f.locals.find(n); it != f.locals.end()) {
    if (it->second.kind == Kind::undefined) {
      auto& d = diags().error(e.loc,
                              fmt::format("'{}' is assigned on only one path of the if at line "
                                          "{}, so it may be undefined here",
                                          n, it->second.where.line),
                              e.span());
      d.hint = fmt::format("assign '{}' before the if, or on every branch of it", n);
      return Value::error();
    }
    return it->second;
  }
  if (kernel_ && !f.helper) {
    if (in_loop_) {
      for (size_t i = 0; i < kernel_->loop.size(); ++i) {
        if (kernel_->loop[i].name == n) {
          Value v;
          v.kind = Kind::loopvar;
          v.index = static_cast<int32_t>(i);
          return v;
        }
      }
    }
    for (size_t i = 0; i < kernel_->tensors.size(); ++i) {
      if (kernel_->tensors[i].name == n) {
        Value v;
        v.kind = Kind::tensor;
        v.index = static_cast<int32_t>(i);
        return v;
      }
    }
    for (size_t i = 0; i < kernel_->scalars.size(); ++i) {
      if (kernel_->scalars[i].name == n) {
        ir::Node node;
        node.op = Op::param;
        node.index = static_cast<int32_t>(i);
        node.type = {kernel_->scalars[i].dtype, Form::scalar};
        return Value::of(builder_->add(std::move(node)), {kernel_->scalars[i].dtype, Form::scalar});
      }
    }
    for (size_t i = 0; i < kernel_->symbols.size(); ++i) {
      if (kernel_->symbols[i].name == n) {
        ir::Node node;
        node.op = Op::shape;
        node.index = static_cast<int32_t>(i);
        node.type = {DType::i64, Form::scalar};
        return Value::of(builder_->add(std::move(node)), {DType::i64, Form::scalar});
      }
    }
    for (const auto& [gname, t] : kernel_->generics) {
      if (gname == n) {
        Value v;
        v.kind = Kind::dtype;
        v.dtype = t;
        return v;
      }
    }
  }
  if (scope_.has_constant(n)) {
    auto c = scope_.constant(n);
    if (!c) return Value::error();
    if (c->dtype) return constant(c->value, *c->dtype);
    return Value::weak(c->value, c->is_int);
  }
  if (const ast::FunctionDef* fn = scope_.function(n)) {
    Value v;
    v.kind = Kind::helper;
    v.fn = fn;
    return v;
  }
  if (auto t = parse_dtype(n)) {
    Value v;
    v.kind = Kind::dtype;
    v.dtype = *t;
    return v;
  }
  if (n == "inf") return Value::weak(std::numeric_limits<double>::infinity(), false);
  if (n == "nan") return Value::weak(std::numeric_limits<double>::quiet_NaN(), false);
  if (n == "pi") return Value::weak(3.14159265358979323846, false);
  if (is_builtin(n)) {
    diags().error(e.loc, fmt::format("'{}' is a built-in function; call it: {}(...)", n, n),
                  e.span());
    return Value::error();
  }
  diags().error(e.loc, fmt::format("unknown name '{}'", n), e.span()).hint =
      scope_.typo_hint(e.loc, n, [this] { return visible_names(); });
  return Value::error();
}

Value Lowerer::vector_of_tensor(int32_t tensor, const ast::Expr& at) {
  const ir::TensorParam& t = kernel_->tensors[tensor];
  if (t.shape.size() == 1 && t.shape[0].symbol >= 0 &&
      t.shape[0].symbol == kernel_->vector_symbol) {
    if (!in_loop_) {
      diags().error(at.loc, "tensors can only be read inside the parallel loop", at.span());
      return Value::error();
    }
    if (t.role == ir::Role::out) {
      diags().error(at.loc, fmt::format("'{}' is an output (Out) and cannot be read", t.name),
                    at.span());
      return Value::error();
    }
    ir::Node n;
    n.op = Op::load;
    n.index = tensor;
    n.view = {ir::AxisIndex{ir::AxisIndex::Kind::vector, 0}};
    n.type = {t.dtype, Form::vector};
    n.loc = at.loc;
    n.length = at.span();
    return Value::of(builder_->add(std::move(n)), {t.dtype, Form::vector});
  }
  size_t axis = 0;
  if (auto view = example_view(tensor, &axis)) {
    diags().error(at.loc,
                  fmt::format("'{}' is a tensor; index it (for example {}) to read a vector "
                              "or an element",
                              t.name, *view),
                  at.span());
  } else {
    auto& d = diags().error(
        at.loc,
        fmt::format("'{}' is a tensor, but {}", t.name, unreachable_axis(tensor, axis, false)),
        at.span());
    if (t.shape.size() == 1 && kernel_->vector_symbol >= 0) {
      d.hint = fmt::format("to read '{}' as a vector along {}, give it the shape ({},)", t.name,
                           kernel_->symbols[kernel_->vector_symbol].name,
                           kernel_->symbols[kernel_->vector_symbol].name);
    }
  }
  return Value::error();
}

bool Lowerer::expect_node(const Value& v, const ast::Expr& at, const char* what) {
  if (v.kind == Kind::node || v.kind == Kind::weak) return true;
  if (v.is_error()) return false;
  auto& d = diags().error(
      at.loc, fmt::format("{} needs a scalar or a vector, not {}", what, describe(v)), at.span());
  if (v.kind == Kind::loopvar) {
    d.hint =
        "a loop variable only indexes tensors; to use a row's position as a value, pass it in a "
        "tensor";
  }
  return false;
}

bool fits_int(DType t, double v) {
  const double lo = t == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
  const double hi = t == DType::i32 ? 2147483648.0 : 9223372036854775808.0;  // exclusive
  return v >= lo && v < hi;                                                  // false for NaN
}

std::string int_misfit(DType t, double v) {
  if (!std::isfinite(v)) {
    return fmt::format(
        "overflows float64, in which numbers are computed at compile time (it gives {})",
        std::isnan(v) ? "nan"
        : v > 0       ? "inf"
                      : "-inf");
  }
  return fmt::format("{:.0f} does not fit {} (from {})", v, dtype_name(t),
                     t == DType::i32 ? "-2147483648 to 2147483647"
                                     : "-9223372036854775808 to 9223372036854775807");
}

Value Lowerer::materialize(const Value& v, DType t, const ast::Expr* at) {
  if (v.kind != Kind::weak) return v;
  if (is_int(t) && !v.is_int) {
    if (at) {
      auto& d = diags().error(at->loc,
                              fmt::format("the number {} is not an integer but is used as {}",
                                          // 1.0, not 1: a float-typed number of integral value
                                          v.num == std::trunc(v.num) && std::fabs(v.num) < 1e15
                                              ? fmt::format("{:.1f}", v.num)
                                              : fmt::format("{}", v.num),
                                          dtype_name(t)),
                              at->span());
      d.hint =
          "number literals adapt to the dtype of the other operand; convert the integer "
          "operand to a float first, e.g. f32(...)";
    }
    return Value::error();
  }
  if (t == DType::b8) {
    if (at) {
      diags().error(at->loc,
                    "a number cannot be used as a bool; write True or False or a "
                    "comparison",
                    at->span());
    }
    return Value::error();
  }
  // An integer beyond the dtype's range would be clamped in silence (i * 3000000000 with i: i32).
  if (is_int(t) && !fits_int(t, v.num)) {
    if (at) {
      auto& d = diags().error(at->loc, "the number " + int_misfit(t, v.num), at->span());
      if (std::isfinite(v.num)) {
        d.hint = t == DType::i32
                     ? "convert the operand to a wider dtype first, e.g. i64(...) or f64(...)"
                     : "convert the operand to a float dtype first, e.g. f64(...)";
      }
    }
    return Value::error();
  }
  return constant(v.num, t);
}

std::optional<double> Lowerer::fold(ir::ValueId id, bool* int_div_by_zero) const {
  const ir::Node& n = builder_->node(id);
  std::vector<double> a;
  for (ir::ValueId arg : n.args) {
    auto x = fold(arg, int_div_by_zero);
    if (!x) return std::nullopt;
    a.push_back(*x);
  }
  switch (n.op) {
    case Op::constant:
      return n.number;
    case Op::cast:
      return round_to(n.type.dtype, a[0]);
    case Op::unary:
      return ref_unary(static_cast<ir::UnaryFn>(n.fn), a[0]);
    case Op::compare:
      return ref_compare(static_cast<ir::CompareFn>(n.fn), a[0], a[1]) ? 1 : 0;
    case Op::select:
      return a[0] != 0 ? a[1] : a[2];
    case Op::binary: {
      auto fn = static_cast<ir::BinaryFn>(n.fn);
      if (fn == ir::BinaryFn::complex) return std::nullopt;
      if (is_int(n.type.dtype) && a[1] == 0 &&
          (fn == ir::BinaryFn::floordiv || fn == ir::BinaryFn::mod)) {
        *int_div_by_zero = true;
        return std::nullopt;
      }
      return ref_binary(fn, a[0], a[1]);
    }
    default:
      return std::nullopt;
  }
}

Value Lowerer::to_node(const Value& v, const ast::Expr* at) {
  if (v.kind != Kind::weak) return v;
  bool fits32 = v.num >= -2147483648.0 && v.num <= 2147483647.0;
  return materialize(v, v.is_int ? (fits32 ? DType::i32 : DType::i64) : DType::f32, at);
}

bool Lowerer::unify(Value& a, Value& b, const ast::Expr& at, const char* spelling) {
  if (a.kind == Kind::weak && b.kind == Kind::node) a = materialize(a, b.type.dtype, &at);
  if (b.kind == Kind::weak && a.kind == Kind::node) b = materialize(b, a.type.dtype, &at);
  // Two untyped numbers, an integer and a float (where(c, -1, 0.5)): the integer's spelling.
  std::optional<double> weak_int;
  if (a.kind == Kind::weak && b.kind == Kind::weak) {
    if (a.is_int != b.is_int) weak_int = a.is_int ? a.num : b.num;
    a = to_node(a, &at);
    b = to_node(b, &at);
  }
  if (a.is_error() || b.is_error()) return false;
  if (a.type.dtype != b.type.dtype && weak_int) {
    auto& d = diags().error(
        at.loc,
        fmt::format("operands of '{}' are an untyped integer ({}) and an untyped float, which "
                    "take different dtypes: {} and {}",
                    spelling, *weak_int, dtype_name(a.type.dtype), dtype_name(b.type.dtype)),
        at.span());
    d.hint =
        fmt::format("write the integer as a float: {:.1f} (dsl/SPEC.md section 6.2)", *weak_int);
    return false;
  }
  if (a.type.dtype != b.type.dtype) {
    auto& d =
        diags().error(at.loc,
                      fmt::format("operands of '{}' have different dtypes: {} and {}", spelling,
                                  dtype_name(a.type.dtype), dtype_name(b.type.dtype)),
                      at.span());
    // The suggested conversion: to the accumulator dtype of the float side where only one side
    // is a float (i32 against f32: f32(...), not the integer's accumulator i64), else of the
    // first operand (bf16 against f32: f32(...)).
    const DType side =
        is_float(b.type.dtype) && !is_float(a.type.dtype) ? b.type.dtype : a.type.dtype;
    d.hint = fmt::format("kdsl never converts implicitly; convert one side, e.g. {}(...)",
                         dtype_name(accumulator_dtype(side)));
    return false;
  }
  return true;
}

Value Lowerer::cast(const Value& v, DType t, const ast::Expr* at) {
  if (v.is_error()) return v;
  if (v.kind == Kind::weak) {
    if (t == DType::b8) return constant(v.num != 0 ? 1 : 0, t);
    return constant(is_int(t) ? std::trunc(v.num) : v.num, t);
  }
  if (v.kind != Kind::node) return Value::error();
  if (v.type.dtype == t) return v;
  if (v.type.dtype == DType::c64) {
    if (at) {
      diags().error(
          at->loc,
          fmt::format("cannot convert c64 to {}; take real(z), imag(z) or abs(z)", dtype_name(t)),
          at->span());
    }
    return Value::error();
  }
  if (t == DType::c64) {
    Value re = cast(v, DType::f32, at);
    Value im = constant(0, DType::f32);
    ir::Node n;
    n.op = Op::binary;
    n.fn = static_cast<uint8_t>(ir::BinaryFn::complex);
    n.args = {re.id, im.id};
    n.type = {DType::c64, v.type.form};
    return Value::of(builder_->add(std::move(n)), {DType::c64, v.type.form});
  }
  ir::Node n;
  n.op = Op::cast;
  n.args = {v.id};
  n.type = {t, v.type.form};
  return Value::of(builder_->add(std::move(n)), {t, v.type.form});
}

Value Lowerer::select(const Value& c0, const Value& a0, const Value& b0, const ast::Expr* at,
                      const char* spelling) {
  Value c = c0, a = a0, b = b0;
  if (c.is_error() || a.is_error() || b.is_error()) return Value::error();
  if (a.kind == Kind::weak && b.kind == Kind::weak && a.num == b.num && a.is_int == b.is_int) {
    return a;
  }
  static const ast::Expr kNowhere;
  if (!unify(a, b, at ? *at : kNowhere, spelling)) return Value::error();
  ir::Node n;
  n.op = Op::select;
  n.args = {c.id, a.id, b.id};
  n.type = {a.type.dtype, join(c.type.form, join(a.type.form, b.type.form))};
  ir::Type t = n.type;
  return Value::of(builder_->add(std::move(n)), t);
}

Value Lowerer::binary(ir::BinaryFn fn, Value a, Value b, const ast::Expr& at, const char* spelling,
                      const ast::Expr* lhs, const ast::Expr* rhs) {
  const ast::Expr& a_at = lhs ? *lhs : operand(at, 0);
  const ast::Expr& b_at = rhs ? *rhs : operand(at, 1);
  if (a.kind == Kind::tensor) a = vector_of_tensor(a.index, a_at);
  if (b.kind == Kind::tensor) b = vector_of_tensor(b.index, b_at);
  if (a.is_error() || b.is_error()) return Value::error();
  std::string what = fmt::format("'{}'", spelling);
  if (!expect_node(a, a_at, what.c_str()) || !expect_node(b, b_at, what.c_str())) {
    return Value::error();
  }
  if (a.kind == Kind::weak && b.kind == Kind::weak) {
    if ((fn == ir::BinaryFn::div || fn == ir::BinaryFn::floordiv || fn == ir::BinaryFn::mod) &&
        b.num == 0) {
      diags().error(at.loc, "division by zero in a constant expression", at.span());
      return Value::error();
    }
    double r = ref_binary(fn, a.num, b.num);
    bool int_result =
        a.is_int && b.is_int && fn != ir::BinaryFn::div && !(fn == ir::BinaryFn::pow && b.num < 0);
    return Value::weak(r, int_result);
  }
  if (fn == ir::BinaryFn::pow && b.kind == Kind::weak && b.is_int && b.num == 2 &&
      a.kind == Kind::node && is_float(a.type.dtype)) {
    return binary(ir::BinaryFn::mul, a, a, at, "*");
  }
  if (!unify(a, b, at, spelling)) return Value::error();
  DType t = a.type.dtype;
  std::string problem;
  if (t == DType::b8) {
    problem = fmt::format("'{}' does not apply to bool values", spelling);
  } else if (t == DType::c64 && fn != ir::BinaryFn::add && fn != ir::BinaryFn::sub &&
             fn != ir::BinaryFn::mul && fn != ir::BinaryFn::div) {
    problem = fmt::format("'{}' does not apply to complex values", spelling);
  } else if (is_int(t) && fn == ir::BinaryFn::div) {
    problem = "'/' on integers; use '//' for floor division or convert to a float dtype";
  } else if (is_int(t) && fn == ir::BinaryFn::pow) {
    problem = "'**' needs float operands; convert with f32(...)";
  }
  if (!problem.empty()) {
    diags().error(at.loc, problem, at.span());
    return Value::error();
  }
  ir::Node n;
  n.op = Op::binary;
  n.fn = static_cast<uint8_t>(fn);
  n.args = {a.id, b.id};
  n.type = {t, join(a.type.form, b.type.form)};
  ir::Type type = n.type;
  return Value::of(builder_->add(std::move(n)), type);
}

Value Lowerer::compare(ir::CompareFn fn, Value a, Value b, const ast::Expr& at,
                       const char* spelling) {
  if (a.kind == Kind::tensor) a = vector_of_tensor(a.index, operand(at, 0));
  if (b.kind == Kind::tensor) b = vector_of_tensor(b.index, operand(at, 1));
  if (a.is_error() || b.is_error()) return Value::error();
  std::string what = fmt::format("'{}'", spelling);
  if (!expect_node(a, operand(at, 0), what.c_str()) ||
      !expect_node(b, operand(at, 1), what.c_str())) {
    return Value::error();
  }
  if (a.kind == Kind::weak && b.kind == Kind::weak) {
    return constant(ref_compare(fn, a.num, b.num) ? 1 : 0, DType::b8);
  }
  if (!unify(a, b, at, spelling)) return Value::error();
  DType t = a.type.dtype;
  if ((t == DType::c64 || t == DType::b8) && fn != ir::CompareFn::eq && fn != ir::CompareFn::ne) {
    diags().error(at.loc, fmt::format("'{}' does not order {} values", spelling, dtype_name(t)),
                  at.span());
    return Value::error();
  }
  ir::Node n;
  n.op = Op::compare;
  n.fn = static_cast<uint8_t>(fn);
  n.args = {a.id, b.id};
  n.type = {DType::b8, join(a.type.form, b.type.form)};
  ir::Type type = n.type;
  return Value::of(builder_->add(std::move(n)), type);
}

Value Lowerer::logical(ir::BinaryFn fn, Value a, Value b, const ast::Expr& at,
                       const char* spelling) {
  if (a.is_error() || b.is_error()) return Value::error();
  for (const Value* v : {&a, &b}) {
    if (v->kind != Kind::node || v->type.dtype != DType::b8) {
      diags().error(
          at.loc,
          fmt::format("'{}' needs bool operands (comparisons), not {}", spelling, describe(*v)),
          at.span());
      return Value::error();
    }
  }
  ir::Node n;
  n.op = Op::binary;
  n.fn = static_cast<uint8_t>(fn);
  n.args = {a.id, b.id};
  n.type = {DType::b8, join(a.type.form, b.type.form)};
  ir::Type type = n.type;
  return Value::of(builder_->add(std::move(n)), type);
}

Value Lowerer::unary_math(ir::UnaryFn fn, const Value& a0, const ast::Expr& at) {
  Value a = a0;
  if (a.kind == Kind::tensor) a = vector_of_tensor(a.index, at);
  const char* fname = ir::name(fn);
  // `at` is the argument of a call such as exp(x), or the expression -x.
  const bool op = at.kind == ast::ExprKind::unary;
  std::string what = op ? "unary '-'" : fmt::format("{}()", fname);
  if (!expect_node(a, op ? *at.args[0] : at, what.c_str())) return Value::error();
  if (a.kind == Kind::weak) {
    if (is_bool_result(fn)) return constant(ref_unary(fn, a.num), DType::b8);
    // -1 is an integer as 1 is (an integer tensor's operand, a shift() offset).
    const bool int_result = a.is_int && (fn == ir::UnaryFn::neg || fn == ir::UnaryFn::abs);
    return Value::weak(ref_unary(fn, a.num), int_result);
  }
  DType t = a.type.dtype;
  // conj of a real number is the number (so one generic kernel serves real and complex dtypes).
  if (fn == ir::UnaryFn::conj && (is_float(t) || is_int(t))) return a;
  DType result = is_bool_result(fn) ? DType::b8 : t;
  bool ok = is_float(t);
  if (fn == ir::UnaryFn::abs) {
    ok = is_float(t) || is_int(t) || t == DType::c64;
    if (t == DType::c64) result = DType::f32;
  } else if (fn == ir::UnaryFn::real || fn == ir::UnaryFn::imag) {
    ok = t == DType::c64;
    result = DType::f32;
  } else if (fn == ir::UnaryFn::conj) {
    ok = t == DType::c64;
  } else if (fn == ir::UnaryFn::neg) {
    ok = t != DType::b8;
  } else if (fn == ir::UnaryFn::lnot) {
    ok = t == DType::b8;
  }
  if (!ok) {
    const char* need =
        (fn == ir::UnaryFn::real || fn == ir::UnaryFn::imag || fn == ir::UnaryFn::conj) ? "a c64"
                                                                                        : "a float";
    auto& d = diags().error(
        at.loc, fmt::format("{}() needs {} argument, not {}", fname, need, describe(a)), at.span());
    if (is_int(t)) d.hint = "convert it first, e.g. f32(...)";
    return Value::error();
  }
  ir::Node n;
  n.op = Op::unary;
  n.fn = static_cast<uint8_t>(fn);
  n.args = {a.id};
  n.type = {result, a.type.form};
  ir::Type type = n.type;
  return Value::of(builder_->add(std::move(n)), type);
}

Value Lowerer::reduce(ir::ReduceKind kind, const Value& a0, const ast::Expr& at,
                      const ast::Expr& call, const std::string& fname) {
  Value a = a0;
  if (a.kind == Kind::tensor) a = vector_of_tensor(a.index, at);
  if (a.is_error()) return a;
  if (!a.is_vector()) {
    diags().error(
        at.loc,
        fmt::format("{}() reduces a vector (a view such as x[m, :]), not {}", fname, describe(a)),
        at.span());
    return Value::error();
  }
  DType t = a.type.dtype;
  bool ok = t != DType::b8 && (t != DType::c64 || kind == ir::ReduceKind::sum);
  if (kind == ir::ReduceKind::var) ok = is_float(t);
  if (!ok) {
    diags().error(at.loc, fmt::format("{}() does not apply to {} values", fname, dtype_name(t)),
                  at.span());
    return Value::error();
  }
  DType acc = accumulator_dtype(t);
  a = cast(a, acc, &at);
  ir::Node n;
  n.op = Op::reduce;
  n.fn = static_cast<uint8_t>(kind);
  n.args = {a.id};
  bool arg = kind == ir::ReduceKind::argmax || kind == ir::ReduceKind::argmin;
  n.type = {arg ? DType::i64 : acc, Form::scalar};
  n.loc = call.loc;
  n.length = call.span();
  ir::Type type = n.type;
  return Value::of(builder_->add(std::move(n)), type);
}

const ast::Expr* Lowerer::keyword(const ast::Expr& call, const std::string& name) const {
  for (const auto& k : call.keywords) {
    if (k.name == name) return k.value.get();
  }
  return nullptr;
}

Value Lowerer::expr(const ast::Expr& e) {
  using EK = ast::ExprKind;
  switch (e.kind) {
    case EK::name:
      return lookup(e);
    case EK::int_lit: {
      // Numbers are computed in float64 (SPEC 6.2): a literal it cannot hold exactly (beyond 2^53,
      // such as 9007199254740993 or 2^63 - 1) would be another number in silence, and a message
      // would name a number that was never written (found by a new-user test).
      const double v = static_cast<double>(e.int_value);
      if (v >= 9223372036854775808.0 || static_cast<int64_t>(v) != e.int_value) {
        auto& d = diags().error(
            e.loc,
            fmt::format("integer literal {} is not exact in float64, in which numbers are "
                        "computed at compile time (it would be {:.0f})",
                        e.int_value, v),
            e.span());
        d.hint = "integers up to 2^53 = 9007199254740992 in magnitude are exact";
        return Value::error();
      }
      return Value::weak(v, true);
    }
    case EK::float_lit:
      return Value::weak(e.float_value, false);
    case EK::bool_lit:
      return constant(e.bool_value ? 1 : 0, DType::b8);
    case EK::string_lit:
      diags().error(e.loc, "strings are only used as docstrings", e.span());
      return Value::error();
    case EK::slice:
      diags().error(e.loc, "':' is only allowed inside a subscript", e.span());
      return Value::error();
    case EK::tuple: {
      Value v;
      v.kind = Kind::tuple;
      for (const auto& a : e.args) {
        Value el = expr(*a);
        if (el.is_error()) return el;
        if (el.kind == Kind::tensor) el = vector_of_tensor(el.index, *a);
        v.elems.push_back(el);
      }
      return v;
    }
    case EK::unary: {
      Value a = expr(*e.args[0]);
      if (static_cast<ast::UnaryOp>(e.op) == ast::UnaryOp::pos) {
        return expect_node(a, *e.args[0], "unary '+'") ? a : Value::error();
      }
      return unary_math(ir::UnaryFn::neg, a, e);
    }
    case EK::binary: {
      static const ir::BinaryFn fns[] = {
          ir::BinaryFn::add,      ir::BinaryFn::sub, ir::BinaryFn::mul, ir::BinaryFn::div,
          ir::BinaryFn::floordiv, ir::BinaryFn::mod, ir::BinaryFn::pow};
      static const char* const spellings[] = {"+", "-", "*", "/", "//", "%", "**"};
      Value a = expr(*e.args[0]);
      Value b = expr(*e.args[1]);
      return binary(fns[e.op], a, b, e, spellings[e.op]);
    }
    case EK::compare: {
      static const char* const spellings[] = {"<", "<=", "==", "!=", ">", ">="};
      Value a = expr(*e.args[0]);
      Value b = expr(*e.args[1]);
      return compare(static_cast<ir::CompareFn>(e.op), a, b, e, spellings[e.op]);
    }
    case EK::bool_op: {
      bool is_and = static_cast<ast::BoolOp>(e.op) == ast::BoolOp::and_;
      Value a = expr(*e.args[0]);
      Value b = expr(*e.args[1]);
      if (a.kind == Kind::tensor) a = vector_of_tensor(a.index, *e.args[0]);
      if (b.kind == Kind::tensor) b = vector_of_tensor(b.index, *e.args[1]);
      return logical(is_and ? ir::BinaryFn::land : ir::BinaryFn::lor, a, b, e,
                     is_and ? "and" : "or");
    }
    case EK::not_op: {
      Value a = expr(*e.args[0]);
      if (a.is_error()) return a;
      if (a.kind == Kind::tensor) a = vector_of_tensor(a.index, *e.args[0]);  // w means w[:]
      if (a.is_error()) return a;
      if (a.kind != Kind::node || a.type.dtype != DType::b8) {
        diags().error(e.loc, fmt::format("'not' needs a bool operand, not {}", describe(a)),
                      e.span());
        return Value::error();
      }
      return unary_math(ir::UnaryFn::lnot, a, e);
    }
    case EK::ternary: {
      Value c = expr(*e.args[0]);
      Value a = expr(*e.args[1]);
      Value b = expr(*e.args[2]);
      if (c.kind == Kind::tensor) c = vector_of_tensor(c.index, *e.args[0]);
      if (c.is_error()) return c;
      if (c.kind != Kind::node || c.type.dtype != DType::b8) {
        diags().error(
            e.args[0]->loc,
            fmt::format("the condition of 'if ... else' must be a bool, not {}", describe(c)),
            e.args[0]->span());
        return Value::error();
      }
      if (a.kind == Kind::tensor) a = vector_of_tensor(a.index, *e.args[1]);
      if (b.kind == Kind::tensor) b = vector_of_tensor(b.index, *e.args[2]);
      if (!expect_node(a, *e.args[1], "'if ... else'") ||
          !expect_node(b, *e.args[2], "'if ... else'")) {
        return Value::error();
      }
      return select(c, a, b, &e, "if ... else");
    }
    case EK::call:
      return call(e);
    case EK::subscript:
      return subscript(e);
  }
  return Value::error();
}

bool Lowerer::parse_view(const ast::Expr& e, int32_t tensor, ir::View* out) {
  const ir::TensorParam& t = kernel_->tensors[tensor];
  size_t n = e.args.size() - 1;
  if (n != t.shape.size()) {
    diags().error(e.loc,
                  fmt::format("'{}' has {} but is indexed with {}", t.name,
                              counted(static_cast<int64_t>(t.shape.size()), "axis", "axes"),
                              counted(static_cast<int64_t>(n), "index", "indices")),
                  e.span());
    return false;
  }
  auto symbol_name = [&](const ir::Extent& x) {
    return x.symbol >= 0 ? kernel_->symbols[x.symbol].name : std::to_string(x.constant);
  };
  const ast::Expr* second_slice = nullptr;
  size_t slices = 0;
  for (size_t i = 0; i < n; ++i) {
    if (e.args[i + 1]->kind != ast::ExprKind::slice) continue;
    if (++slices == 2) second_slice = e.args[i + 1].get();
  }
  if (second_slice) {
    auto& d = diags().error(second_slice->loc,
                            fmt::format("a view has at most one ':' (the vector axis), but '{}' "
                                        "has {}",
                                        ast::print(e), slices),
                            second_slice->span());
    d.hint = "index the other axes by loop variables of the parallel loop";
    return false;
  }
  for (size_t i = 0; i < n; ++i) {
    const ast::Expr& idx = *e.args[i + 1];
    const ir::Extent& ext = t.shape[i];
    if (idx.kind == ast::ExprKind::slice) {
      if (ext.symbol < 0) {
        diags().error(idx.loc,
                      fmt::format("':' needs an axis whose size is a shape symbol, but axis {} of "
                                  "'{}' has the fixed size {}",
                                  i, t.name, ext.constant),
                      idx.span());
        return false;
      }
      if (kernel_->vector_symbol < 0) {
        diags().error(idx.loc, "':' (a view) is only used inside the parallel loop", idx.span());
        return false;
      }
      if (ext.symbol != kernel_->vector_symbol) {
        auto& d = diags().error(
            idx.loc,
            fmt::format("':' marks axis {} of '{}' (size {}), but the vectors of this kernel "
                        "run along {}",
                        i, t.name, symbol_name(ext), kernel_->symbols[kernel_->vector_symbol].name),
            idx.span());
        d.hint = fmt::format(
            "every ':' of a kernel is on an axis of size {} (the vector axis, "
            "set by its first view); index this axis by a loop variable",
            kernel_->symbols[kernel_->vector_symbol].name);
        return false;
      }
      out->push_back({ir::AxisIndex::Kind::vector, 0});
      continue;
    }
    if (idx.kind == ast::ExprKind::int_lit) {
      if (ext.symbol >= 0) {
        auto& d = diags().error(idx.loc,
                                fmt::format("a constant index needs an axis of fixed size, but "
                                            "axis {} of '{}' has size {}, known only at launch",
                                            i, t.name, symbol_name(ext)),
                                idx.span());
        d.hint =
            "give the axis a fixed size in the tensor's type, as in (M, 2), or index it "
            "with ':' or a loop variable";
        return false;
      }
      if (idx.int_value >= ext.constant) {
        diags().error(idx.loc,
                      fmt::format("index {} is out of range for axis {} of '{}' (size {})",
                                  idx.int_value, i, t.name, ext.constant),
                      idx.span());
        return false;
      }
      out->push_back({ir::AxisIndex::Kind::constant, idx.int_value});
      continue;
    }
    int32_t var = -1;
    if (idx.kind == ast::ExprKind::name && in_loop_) {
      for (size_t k = 0; k < kernel_->loop.size(); ++k) {
        if (kernel_->loop[k].name == idx.name) var = static_cast<int32_t>(k);
      }
    }
    if (var < 0) {
      std::string what = idx.kind == ast::ExprKind::name
                             ? fmt::format("'{}' is not a loop variable; ", idx.name)
                             : std::string();
      auto& d = diags().error(idx.loc,
                              what +
                                  "tensors are indexed by the variables of the parallel "
                                  "loop, ':' or integer constants",
                              idx.span());
      d.hint = "there is no gather: an index cannot be a computed value";
      return false;
    }
    if (kernel_->loop[var].extent != ext.symbol) {
      diags().error(idx.loc,
                    fmt::format("axis {} of '{}' has size {}, but loop variable '{}' ranges over "
                                "{}",
                                i, t.name, symbol_name(ext), idx.name,
                                kernel_->symbols[kernel_->loop[var].extent].name),
                    idx.span());
      return false;
    }
    for (const auto& prev : *out) {
      if (prev.kind == ir::AxisIndex::Kind::loop && prev.value == var) {
        diags().error(idx.loc, fmt::format("loop variable '{}' indexes two axes", idx.name),
                      idx.span());
        return false;
      }
    }
    out->push_back({ir::AxisIndex::Kind::loop, var});
  }
  return true;
}

Value Lowerer::subscript(const ast::Expr& e) {
  const ast::Expr& base = *e.args[0];
  Value b = expr(base);
  if (b.is_error()) return b;
  if (b.kind == Kind::tensor) {
    const ir::TensorParam& t = kernel_->tensors[b.index];
    if (!in_loop_) {
      diags().error(e.loc, "tensors can only be read inside the parallel loop", e.span());
      return Value::error();
    }
    if (t.role == ir::Role::out) {
      auto& d = diags().error(
          e.loc, fmt::format("'{}' is an output (Out) and cannot be read", t.name), e.span());
      d.hint =
          "keep the value in a local variable, or declare it InOut[...] to read its "
          "contents on entry";
      return Value::error();
    }
    ir::Node n;
    n.op = Op::load;
    n.index = b.index;
    if (!parse_view(e, b.index, &n.view)) return Value::error();
    bool vec = false;
    for (const auto& a : n.view) vec |= a.kind == ir::AxisIndex::Kind::vector;
    n.type = {t.dtype, vec ? Form::vector : Form::scalar};
    n.loc = e.loc;
    n.length = e.span();
    ir::Type type = n.type;
    return Value::of(builder_->add(std::move(n)), type);
  }
  if (b.kind == Kind::tuple) {
    const ast::Expr* idx = e.args.size() == 2 ? e.args[1].get() : nullptr;
    int64_t i = 0;
    bool ok = idx && idx->kind == ast::ExprKind::int_lit;
    if (ok) i = idx->int_value;
    if (idx && idx->kind == ast::ExprKind::unary && idx->args[0]->kind == ast::ExprKind::int_lit &&
        static_cast<ast::UnaryOp>(idx->op) == ast::UnaryOp::neg) {
      ok = true;
      i = -idx->args[0]->int_value;
    }
    int64_t size = static_cast<int64_t>(b.elems.size());
    if (ok && i < 0) i += size;
    if (!ok || i < 0 || i >= size) {
      diags().error(e.loc,
                    fmt::format("a tuple of {} is indexed with an integer constant from {} to {}",
                                size, -size, size - 1),
                    e.span());
      return Value::error();
    }
    return b.elems[static_cast<size_t>(i)];
  }
  diags().error(base.loc, fmt::format("{} cannot be indexed", describe(b)), base.span());
  return Value::error();
}

Value Lowerer::call(const ast::Expr& e) {
  const ast::Expr& callee = *e.args[0];
  if (callee.kind != ast::ExprKind::name) {
    diags().error(callee.loc, "only functions named directly can be called", callee.span());
    return Value::error();
  }
  const std::string& name = callee.name;
  std::vector<Value> args;
  for (size_t i = 1; i < e.args.size(); ++i) args.push_back(expr(*e.args[i]));
  bool local = frames_.back().locals.count(name) > 0;
  Value f = local ? frames_.back().locals[name] : Value::error();
  if (!local) {
    if (is_builtin(name)) return call_builtin(name, e, args);
    f = lookup(callee);
  }
  if (f.is_error()) return f;
  if (f.kind == Kind::dtype) {
    if (!e.keywords.empty() || args.empty() || args.size() > 2 ||
        (args.size() == 2 && f.dtype != DType::c64)) {
      diags().error(
          e.loc,
          fmt::format("{}(x) converts one value{}", dtype_name(f.dtype),
                      f.dtype == DType::c64 ? "; c64(re, im) builds a complex number" : ""),
          e.span());
      return Value::error();
    }
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].kind == Kind::tensor) args[i] = vector_of_tensor(args[i].index, *e.args[i + 1]);
      if (!expect_node(args[i], *e.args[i + 1], "a conversion")) return Value::error();
    }
    if (args.size() == 2) {  // c64(re, im): each part converted to f32, the result a c64
      Value re = cast(materialize(args[0], DType::f32, e.args[1].get()), DType::f32, &e);
      Value im = cast(materialize(args[1], DType::f32, e.args[2].get()), DType::f32, &e);
      if (re.is_error() || im.is_error()) return Value::error();
      ir::Node n;
      n.op = Op::binary;
      n.fn = static_cast<uint8_t>(ir::BinaryFn::complex);
      n.args = {re.id, im.id};
      n.type = {DType::c64, join(re.type.form, im.type.form)};
      const ir::Type type = n.type;
      return Value::of(builder_->add(std::move(n)), type);
    }
    // An explicit cast rounds (SPEC section 14), also to the dtype a value already has: the
    // interpreter keeps computed values in float64, so f32(a + b) of f32 a and b rounds there.
    // Loads, parameters, constants and casts already hold values of their dtype.
    const Value& v = args[0];
    if (v.kind == Kind::node && v.type.dtype == f.dtype && is_float(f.dtype) &&
        f.dtype != DType::f64) {
      Op op = builder_->node(v.id).op;
      if (op != Op::load && op != Op::param && op != Op::constant && op != Op::cast) {
        ir::Node n;
        n.op = Op::cast;
        n.args = {v.id};
        n.type = v.type;
        return Value::of(builder_->add(std::move(n)), v.type);
      }
    }
    return cast(args[0], f.dtype, &e);
  }
  if (f.kind == Kind::helper) {
    if (f.fn->is_kernel()) {
      diags().error(callee.loc,
                    fmt::format("'{}' is a kernel; kernels cannot be called from kdsl code (move "
                                "the shared part into a helper)",
                                name),
                    callee.span());
      return Value::error();
    }
    return call_helper(*f.fn, e, args);
  }
  diags().error(callee.loc, fmt::format("{} is not a function", describe(f)), callee.span());
  return Value::error();
}

Value Lowerer::call_builtin(const std::string& name, const ast::Expr& e, std::vector<Value>& args) {
  auto arity = [&](size_t lo, size_t hi) {
    if (args.size() >= lo && args.size() <= hi) return true;
    std::string expect = lo == hi ? counted(static_cast<int64_t>(lo), "argument", "arguments")
                                  : fmt::format("{} to {} arguments", lo, hi);
    diags().error(e.loc, fmt::format("{}() takes {} ({} given)", name, expect, args.size()),
                  e.span());
    return false;
  };
  auto no_keywords = [&]() {
    if (e.keywords.empty()) return true;
    diags().error(e.keywords[0].loc,
                  fmt::format("{}() takes no keyword argument '{}'", name, e.keywords[0].name),
                  static_cast<uint32_t>(e.keywords[0].name.size()));
    return false;
  };
  for (const auto& a : args) {
    if (a.is_error()) return a;
  }
  const ast::Expr& a0 = e.args.size() > 1 ? *e.args[1] : e;
  if (const UnaryBuiltin* u = find_unary(name)) {
    if (!arity(1, 1) || !no_keywords()) return Value::error();
    return unary_math(u->fn, args[0], a0);
  }
  if (name == "scan" || name == "cumsum" || name == "cumprod" || name == "cummax" ||
      name == "cummin" || name == "logcumsumexp" || name == "first" || name == "last") {
    return scan_call(name, e, args);
  }
  if (name == "shift") return shift_call(e, args);
  if (!no_keywords()) return Value::error();
  if (name == "parallel") {
    diags().error(e.loc, "parallel(...) is only used in the header of the kernel's for loop",
                  e.span());
    return Value::error();
  }
  if (name == "position") {
    if (!arity(0, 0)) return Value::error();
    if (combine_fn_) {
      auto& d = diags().error(e.loc,
                              fmt::format("the combine function '{}' may use only its arguments, "
                                          "numbers and elementwise math, not position()",
                                          *combine_fn_),
                              e.span());
      d.hint =
          "it combines two scalars (or tuples of scalars) at a time; scan a tuple that "
          "carries position() as a value instead";
      return Value::error();
    }
    if (!kernel_ || !in_loop_ || kernel_->vector_symbol < 0) {
      diags().error(e.loc, "position() is the index along the vector axis, inside the loop",
                    e.span());
      return Value::error();
    }
    ir::Node n;
    n.op = Op::position;
    n.type = {DType::i64, Form::vector};
    return Value::of(builder_->add(std::move(n)), {DType::i64, Form::vector});
  }
  if ((name == "min" || name == "max") && args.size() == 2) {
    return binary(name == "min" ? ir::BinaryFn::min : ir::BinaryFn::max, args[0], args[1], e,
                  name.c_str());
  }
  if (name == "pow") {
    if (!arity(2, 2)) return Value::error();
    return binary(ir::BinaryFn::pow, args[0], args[1], e, "pow");
  }
  if (name == "where") {
    if (!arity(3, 3)) return Value::error();
    Value c = args[0];
    if (c.kind == Kind::tensor) c = vector_of_tensor(c.index, a0);
    if (c.is_error()) return c;
    if (c.kind != Kind::node || c.type.dtype != DType::b8) {
      auto& d = diags().error(
          a0.loc, fmt::format("the condition of where() must be a bool, not {}", describe(c)),
          a0.span());
      d.hint = "write a comparison, e.g. where(v != 0.0, a, b)";
      return Value::error();
    }
    for (int i = 1; i <= 2; ++i) {
      if (args[i].kind == Kind::tensor) args[i] = vector_of_tensor(args[i].index, *e.args[i + 1]);
      if (!expect_node(args[i], *e.args[i + 1], "where()")) return Value::error();
    }
    return select(c, args[1], args[2], &e);
  }
  if (!arity(1, 1)) return Value::error();
  if (name == "mean") {
    Value s = reduce(ir::ReduceKind::sum, args[0], a0, e, name);
    if (s.is_error()) return s;
    if (!is_float(s.type.dtype) && s.type.dtype != DType::c64) {
      auto& d = diags().error(
          a0.loc, fmt::format("mean() needs a float vector, not {}", describe(args[0])), a0.span());
      d.hint = "convert it first, e.g. mean(f32(...))";
      return Value::error();
    }
    ir::Node n;
    n.op = Op::shape;
    n.index = kernel_->vector_symbol;
    n.type = {DType::i64, Form::scalar};
    Value count = Value::of(builder_->add(std::move(n)), {DType::i64, Form::scalar});
    return binary(ir::BinaryFn::div, s, cast(count, s.type.dtype, &e), e, "/");
  }
  static const std::pair<const char*, ir::ReduceKind> reductions[] = {
      {"sum", ir::ReduceKind::sum},       {"max", ir::ReduceKind::max},
      {"min", ir::ReduceKind::min},       {"var", ir::ReduceKind::var},
      {"argmax", ir::ReduceKind::argmax}, {"argmin", ir::ReduceKind::argmin}};
  for (const auto& [rname, kind] : reductions) {
    if (name == rname) return reduce(kind, args[0], a0, e, name);
  }
  diags().error(e.loc, fmt::format("unknown built-in '{}'", name), e.span());
  return Value::error();
}

// scan_call and shift_call are in sema_scan.cpp.

}  // namespace kdsl::sema

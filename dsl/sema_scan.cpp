// Sequence operations along the vector axis (SPEC section 10): scan() with a user combine
// function, the built-in scans (cumsum, cumprod, cummax, cummin, logcumsumexp), shift(), first()
// and last().
//
// A scan lowers to one Op::scan node whose combine function is an ir::Region: for a user helper,
// the helper inlined on 2k Op::arg nodes (the left tuple first); for a built-in, the region is
// built here. The k results are read through Op::extract nodes.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "sema_internal.h"

namespace kdsl::sema {

using ir::Form;
using ir::Op;
using Kind = Value::Kind;

namespace {

struct BuiltinScan {
  const char* name;
  ir::ScanKind kind;
};
constexpr BuiltinScan kBuiltinScans[] = {{"cumsum", ir::ScanKind::sum},
                                         {"cumprod", ir::ScanKind::prod},
                                         {"cummax", ir::ScanKind::max},
                                         {"cummin", ir::ScanKind::min},
                                         {"logcumsumexp", ir::ScanKind::logaddexp}};

const BuiltinScan* find_builtin(const std::string& name) {
  for (const auto& b : kBuiltinScans) {
    if (name == b.name) return &b;
  }
  return nullptr;
}

std::string count_of(size_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// The region of a built-in scan on dtype t: (left, right) -> left (+) right.
ir::Region builtin_region(ir::ScanKind kind, DType t) {
  ir::Region r;
  r.num_args = 2;
  Builder b(&r.nodes);
  auto node = [&](Op op, uint8_t fn, std::vector<ir::ValueId> args, DType dt, int32_t index = -1) {
    ir::Node n;
    n.op = op;
    n.fn = fn;
    n.args = std::move(args);
    n.type = {dt, Form::scalar};
    n.index = index;
    return b.add(std::move(n));
  };
  auto bin = [&](ir::BinaryFn fn, ir::ValueId x, ir::ValueId y) {
    return node(Op::binary, static_cast<uint8_t>(fn), {x, y}, t);
  };
  ir::ValueId left = node(Op::arg, 0, {}, t, 0);
  ir::ValueId right = node(Op::arg, 0, {}, t, 1);
  ir::ValueId out = left;
  switch (kind) {
    case ir::ScanKind::sum:
      out = bin(ir::BinaryFn::add, left, right);
      break;
    case ir::ScanKind::prod:
      out = bin(ir::BinaryFn::mul, left, right);
      break;
    case ir::ScanKind::max:
      out = bin(ir::BinaryFn::max, left, right);
      break;
    case ir::ScanKind::min:
      out = bin(ir::BinaryFn::min, left, right);
      break;
    case ir::ScanKind::logaddexp: {
      // m + log1p(exp(min - max)); when min - max is NaN (both -inf, both +inf, or a NaN
      // operand) the result is max, which is then -inf, +inf or NaN as it should be.
      ir::ValueId m = bin(ir::BinaryFn::max, left, right);
      ir::ValueId lo = bin(ir::BinaryFn::min, left, right);
      ir::ValueId d = bin(ir::BinaryFn::sub, lo, m);
      ir::ValueId e = node(Op::unary, static_cast<uint8_t>(ir::UnaryFn::exp), {d}, t);
      ir::ValueId l = node(Op::unary, static_cast<uint8_t>(ir::UnaryFn::log1p), {e}, t);
      ir::ValueId s = bin(ir::BinaryFn::add, m, l);
      ir::ValueId ok =
          node(Op::compare, static_cast<uint8_t>(ir::CompareFn::eq), {d, d}, DType::b8);
      out = node(Op::select, 0, {ok, s, m}, t);
      break;
    }
    case ir::ScanKind::custom:
      break;
  }
  r.results = {out};
  return r;
}

// Removes the region's nodes its results do not use, keeping their order.
void prune(ir::Region& r) {
  std::vector<bool> live(r.nodes.size(), false);
  for (ir::ValueId v : r.results) live[v] = true;
  for (size_t i = r.nodes.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (ir::ValueId a : r.nodes[i].args) live[a] = true;
  }
  std::vector<ir::ValueId> remap(r.nodes.size(), -1);
  std::vector<ir::Node> kept;
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    if (!live[i]) continue;
    ir::Node n = std::move(r.nodes[i]);
    for (auto& a : n.args) a = remap[a];
    remap[i] = static_cast<ir::ValueId>(kept.size());
    kept.push_back(std::move(n));
  }
  r.nodes = std::move(kept);
  for (auto& v : r.results) v = remap[v];
}

const char* region_misuse(const ir::Node& n) {
  switch (n.op) {
    case Op::arg:
    case Op::constant:
    case Op::cast:
    case Op::unary:
    case Op::binary:
    case Op::compare:
    case Op::select:
      return nullptr;
    case Op::position:
      return "position()";
    case Op::scan:
    case Op::extract:
      return "a scan";
    case Op::shift:
      return "shift()";
    case Op::reduce:
      return "a reduction";
    default:
      return "kernel values";
  }
}

}  // namespace

bool Lowerer::scan_values(const ast::Expr& at, Value v, bool builtin, std::vector<Value>* out,
                          std::vector<DType>* given) {
  std::vector<Value> elems;
  if (v.kind == Kind::tuple) {
    if (builtin || v.elems.empty()) {
      diags().error(at.loc,
                    builtin ? "a built-in scan takes one vector, not a tuple"
                            : "scan() needs at least one value to scan",
                    at.span());
      return false;
    }
    elems = v.elems;
  } else {
    elems = {v};
  }
  for (Value& x : elems) {
    if (x.kind == Kind::tensor) x = vector_of_tensor(x.index, at);
    if (x.is_error()) return false;
    if (x.kind == Kind::weak) x = to_node(x, &at);
    if (x.kind != Kind::node) {
      diags().error(at.loc,
                    fmt::format("scan values are vectors (or scalars, repeated along the vector "
                                "axis), not {}",
                                describe(x)),
                    at.span());
      return false;
    }
    if (given) given->push_back(x.type.dtype);
    x = cast(x, accumulator_dtype(x.type.dtype), &at);
    if (x.is_error()) return false;
    out->push_back(x);
  }
  return true;
}

bool Lowerer::scan_options(const std::string& name, const ast::Expr& e, size_t k, bool custom,
                           const std::vector<Value>& values, ir::Node* node) {
  bool ok = true;
  for (const ast::Keyword& kw : e.keywords) {
    const ast::Expr& v = *kw.value;
    if (kw.name == "reverse" || kw.name == "exclusive") {
      if (v.kind != ast::ExprKind::bool_lit) {
        auto& d = diags().error(v.loc, fmt::format("{}= takes True or False (a constant)", kw.name),
                                v.span());
        d.hint = "the direction and kind of a scan are fixed when the kernel is compiled";
        ok = false;
        continue;
      }
      (kw.name == "reverse" ? node->reverse : node->exclusive) = v.bool_value;
      continue;
    }
    if (kw.name != "init") {
      auto& d =
          diags().error(kw.loc, fmt::format("{}() takes no keyword argument '{}'", name, kw.name),
                        static_cast<uint32_t>(kw.name.size()));
      d.hint = "its keyword arguments are init=, reverse= and exclusive=";
      ok = false;
      continue;
    }
    Value iv = expr(v);
    if (iv.is_error()) {
      ok = false;
      continue;
    }
    std::vector<Value> inits = iv.kind == Kind::tuple ? iv.elems : std::vector<Value>{iv};
    if (inits.size() != k) {
      diags().error(v.loc,
                    fmt::format("init= has {}, but {}() scans {}; give one initial value per "
                                "scanned value",
                                count_of(inits.size(), "value", "values"), name,
                                count_of(k, "value", "values")),
                    v.span());
      ok = false;
      continue;
    }
    for (size_t i = 0; i < k; ++i) {
      DType t = values[i].type.dtype;
      Value x = inits[i];
      if (x.kind == Kind::weak) x = materialize(x, t, &v);
      if (x.is_error()) {
        ok = false;
        break;
      }
      if (x.kind != Kind::node || x.type.form != Form::scalar) {
        diags().error(v.loc,
                      fmt::format("initial value {} of {}() must be a scalar (one value per loop "
                                  "iteration), not {}",
                                  i, name, describe(x)),
                      v.span());
        ok = false;
        break;
      }
      // Like the values, a 16-bit init is widened to the accumulator dtype.
      if (x.type.dtype != t && accumulator_dtype(x.type.dtype) == t) x = cast(x, t, &v);
      if (x.type.dtype != t) {
        auto& d = diags().error(v.loc,
                                fmt::format("initial value {} is {}, but {}() accumulates value "
                                            "{} in {}",
                                            i, dtype_name(x.type.dtype), name, i, dtype_name(t)),
                                v.span());
        d.hint = fmt::format("convert it: {}(...)", dtype_name(t));
        ok = false;
        break;
      }
      node->args.push_back(x.id);
    }
    node->has_init = ok;
  }
  if (ok && custom && node->exclusive && !node->has_init) {
    auto& d = diags().error(e.loc,
                            "an exclusive scan with a user combine function needs init= (its "
                            "first output is the initial value)",
                            e.span());
    d.hint = "pass the identity of your combine function, e.g. init=(1.0, 0.0) for an affine pair";
    ok = false;
  }
  return ok;
}

int32_t Lowerer::combine_region(const ast::FunctionDef& fn, const ast::Expr& e,
                                const std::vector<Value>& values, bool tuple) {
  const ast::Expr& op_expr = *e.args[1];
  size_t required = 0;
  for (const ast::Param& p : fn.params) required += p.default_value ? 0 : 1;
  size_t k = values.size();
  std::string side = tuple ? fmt::format("a tuple of {}", k) : std::string("one value");
  // Errors in the combine function's definition (its parameters, its results) point into the
  // definition, followed by a note at the scan that uses it, as an error in a helper's body is
  // followed by one at the call that inlined it (SPEC section 4.2).
  const auto note_call = [&] {
    diags().note(e.loc, fmt::format("in this call of helper '{}'", fn.name), e.span());
  };
  if (fn.params.size() < 2 || required > 2) {
    auto& d = diags().error(
        fn.loc,
        fmt::format("the combine function '{}' takes {}, but scan() calls it "
                    "with two: left and right (each {})",
                    fn.name, count_of(fn.params.size(), "parameter", "parameters"), side),
        static_cast<uint32_t>(fn.name.size()));
    d.hint = fmt::format("define it as def {}(left, right): ...", fn.name);
    note_call();
    return -1;
  }
  ir::Region region;
  region.num_args = static_cast<int32_t>(2 * k);
  Builder rb(&region.nodes);
  Builder* saved = builder_;
  builder_ = &rb;
  std::vector<Value> sides(2);
  for (size_t s = 0; s < 2; ++s) {
    std::vector<Value> elems;
    for (size_t i = 0; i < k; ++i) {
      ir::Node n;
      n.op = Op::arg;
      n.index = static_cast<int32_t>(s * k + i);
      n.type = {values[i].type.dtype, Form::scalar};
      elems.push_back(Value::of(rb.add(std::move(n)), {values[i].type.dtype, Form::scalar}));
    }
    if (tuple) {
      sides[s].kind = Kind::tuple;
      sides[s].elems = std::move(elems);
    } else {
      sides[s] = elems[0];
    }
  }
  // A call site without the scan's keywords (they are not the helper's arguments): the callee,
  // then the scanned values' expression for both arguments (where argument errors point).
  ast::Expr site;
  site.kind = ast::ExprKind::call;
  site.loc = e.loc;
  site.end = e.end;
  for (size_t i = 0; i < 3; ++i) {
    const ast::Expr& src = *e.args[i == 0 ? 0 : 2];
    auto x = std::make_unique<ast::Expr>();
    x->kind = src.kind;
    x->loc = src.loc;
    x->end = src.end;
    site.args.push_back(std::move(x));
  }
  const std::string* saved_combine = combine_fn_;
  combine_fn_ = &fn.name;
  Value r = call_helper(fn, site, sides);
  combine_fn_ = saved_combine;
  for (const ir::Node& n : region.nodes) {
    if (const char* what = region_misuse(n)) {
      auto& d = diags().error(op_expr.loc,
                              fmt::format("the combine function '{}' may use only its arguments, "
                                          "numbers and elementwise math, not {}",
                                          fn.name, what),
                              op_expr.span());
      d.hint = "it combines two scalars (or tuples of scalars) at a time";
      builder_ = saved;
      return -1;
    }
  }
  std::vector<Value> outs;
  if (!r.is_error()) outs = r.kind == Kind::tuple ? r.elems : std::vector<Value>{r};
  const SourceLoc ret = fn.body.empty() ? fn.loc : fn.body.back()->loc;
  bool ok = !r.is_error();
  if (ok && outs.size() != k) {
    diags().error(ret,
                  fmt::format("the combine function '{}' returns {}, but the scan has {}", fn.name,
                              r.kind == Kind::tuple ? fmt::format("a tuple of {}", outs.size())
                                                    : std::string("one value"),
                              count_of(k, "value", "values")),
                  6);
    ok = false;
  }
  for (size_t i = 0; ok && i < k; ++i) {
    DType t = values[i].type.dtype;
    Value o = outs[i];
    if (o.kind == Kind::weak) o = materialize(o, t, nullptr);
    if (o.kind != Kind::node || o.type.form != Form::scalar) {
      diags().error(ret,
                    fmt::format("result {} of the combine function '{}' must be a scalar, not {}",
                                i, fn.name, describe(o)),
                    6);
      ok = false;
    } else if (o.type.dtype != t) {
      auto& d = diags().error(ret,
                              fmt::format("result {} of the combine function '{}' is {}, but the "
                                          "scan accumulates value {} in {}",
                                          i, fn.name, dtype_name(o.type.dtype), i, dtype_name(t)),
                              6);
      d.hint = fmt::format("convert it: {}(...)", dtype_name(t));
      ok = false;
    } else {
      region.results.push_back(o.id);
    }
  }
  builder_ = saved;
  if (!ok) {
    // (A body with errors has its note from call_helper already.)
    if (!r.is_error()) note_call();
    return -1;
  }
  prune(region);
  kernel_->regions.push_back(std::move(region));
  return static_cast<int32_t>(kernel_->regions.size() - 1);
}

Value Lowerer::scan_call(const std::string& name, const ast::Expr& e, std::vector<Value>& args) {
  if (name == "first" || name == "last") return first_last(name, e, args);
  if (!kernel_ || !in_loop_ || kernel_->vector_symbol < 0) {
    diags().error(e.loc,
                  fmt::format("{}() works along the vector axis, inside the parallel loop", name),
                  e.span());
    return Value::error();
  }
  const BuiltinScan* builtin = find_builtin(name);
  size_t positional = builtin ? 1 : 2;
  if (args.size() != positional) {
    auto& d = diags().error(
        e.loc,
        fmt::format("{}() takes {} ({} given)", name,
                    count_of(positional, "positional argument", "positional arguments"),
                    args.size()),
        e.span());
    d.hint = builtin ? fmt::format("{}(v, init=..., reverse=False, exclusive=False)", name)
                     : "scan(op, values, init=..., reverse=False, exclusive=False)";
    return Value::error();
  }
  bool tuple = false;
  std::vector<Value> values;
  const ast::FunctionDef* fn = nullptr;
  if (builtin) {
    std::vector<DType> given;
    if (!scan_values(*e.args[1], args[0], true, &values, &given)) return Value::error();
    DType t = values[0].type.dtype;
    bool ok = true;
    if (builtin->kind == ir::ScanKind::max || builtin->kind == ir::ScanKind::min)
      ok = t != DType::c64;
    if (builtin->kind == ir::ScanKind::logaddexp) ok = is_float(t);
    if (!ok) {
      diags().error(e.args[1]->loc,
                    fmt::format("{}() does not apply to {} values", name, dtype_name(given[0])),
                    e.args[1]->span());
      return Value::error();
    }
  } else {
    const Value& op = args[0];
    if (op.kind != Kind::helper || op.fn->is_kernel()) {
      auto& d = diags().error(
          e.args[1]->loc,
          fmt::format(
              "the first argument of scan() is its combine function, "
              "a helper def op(left, right), not {}",
              op.kind == Kind::helper ? fmt::format("kernel '{}'", op.fn->name) : describe(op)),
          e.args[1]->span());
      d.hint = "for sums, products, maxima and minima use cumsum, cumprod, cummax, cummin";
      return Value::error();
    }
    fn = op.fn;
    tuple = args[1].kind == Kind::tuple;
    if (!scan_values(*e.args[2], args[1], false, &values)) return Value::error();
  }
  ir::Node n;
  n.op = Op::scan;
  n.fn = static_cast<uint8_t>(builtin ? builtin->kind : ir::ScanKind::custom);
  n.loc = e.loc;
  n.length = e.span();
  for (const Value& v : values) {
    n.args.push_back(v.id);
    n.results.push_back({v.type.dtype, Form::vector});
  }
  n.type = n.results[0];
  if (!scan_options(name, e, values.size(), !builtin, values, &n)) return Value::error();
  if (builtin) {
    kernel_->regions.push_back(builtin_region(builtin->kind, values[0].type.dtype));
    n.index = static_cast<int32_t>(kernel_->regions.size() - 1);
  } else {
    n.index = combine_region(*fn, e, values, tuple);
    if (n.index < 0) return Value::error();
  }
  std::vector<ir::Type> results = n.results;
  ir::ValueId scan = builder_->add(std::move(n));
  std::vector<Value> outs;
  for (size_t i = 0; i < results.size(); ++i) {
    ir::Node x;
    x.op = Op::extract;
    x.index = static_cast<int32_t>(i);
    x.args = {scan};
    x.type = results[i];
    outs.push_back(Value::of(builder_->add(std::move(x)), results[i]));
  }
  if (!tuple) return outs[0];
  Value t;
  t.kind = Kind::tuple;
  t.elems = std::move(outs);
  return t;
}

Value Lowerer::first_last(const std::string& name, const ast::Expr& e, std::vector<Value>& args) {
  if (!e.keywords.empty()) {
    diags().error(e.keywords[0].loc,
                  fmt::format("{}() takes no keyword argument '{}'", name, e.keywords[0].name),
                  static_cast<uint32_t>(e.keywords[0].name.size()));
    return Value::error();
  }
  if (args.size() != 1) {
    diags().error(e.loc, fmt::format("{}() takes 1 argument ({} given)", name, args.size()),
                  e.span());
    return Value::error();
  }
  const ast::Expr& at = *e.args[1];
  Value v = args[0];
  if (v.kind == Kind::tensor) v = vector_of_tensor(v.index, at);
  if (v.is_error()) return v;
  if (!v.is_vector()) {
    diags().error(at.loc,
                  fmt::format("{}() takes a vector (it gives the element at position {}), not {}",
                              name, name == "first" ? "0" : "N - 1", describe(v)),
                  at.span());
    return Value::error();
  }
  ir::Node n;
  n.op = Op::reduce;
  n.fn = static_cast<uint8_t>(name == "first" ? ir::ReduceKind::first : ir::ReduceKind::last);
  n.args = {v.id};
  n.type = {v.type.dtype, Form::scalar};
  n.loc = e.loc;  // the call: later stages' errors about this value underline `last(h)`
  n.length = e.span();
  ir::Type type = n.type;
  return Value::of(builder_->add(std::move(n)), type);
}

// The largest offset of shift(), either way (dsl/SPEC.md section 10.4); its IR holds 32 bits.
constexpr int32_t kMaxShift = 1000000000;

Value Lowerer::shift_call(const ast::Expr& e, std::vector<Value>& args) {
  if (!e.keywords.empty()) {
    diags().error(e.keywords[0].loc,
                  fmt::format("shift() takes no keyword argument '{}'", e.keywords[0].name),
                  static_cast<uint32_t>(e.keywords[0].name.size()));
    return Value::error();
  }
  for (const Value& a : args) {
    if (a.is_error()) return a;
  }
  if (args.size() != 3) {
    auto& d = diags().error(e.loc, fmt::format("shift() takes 3 arguments ({} given)", args.size()),
                            e.span());
    d.hint = "shift(v, k, fill): out[t] = v[t - k], or fill where t - k is outside the sequence";
    return Value::error();
  }
  const ast::Expr& at = *e.args[1];
  Value v = args[0];
  if (v.kind == Kind::tensor) v = vector_of_tensor(v.index, at);
  if (v.is_error()) return v;
  if (!v.is_vector()) {
    diags().error(at.loc,
                  fmt::format("shift() moves a vector along the vector axis, not {}", describe(v)),
                  at.span());
    return Value::error();
  }
  const ast::Expr& kat = *e.args[2];
  const Value& kv = args[1];
  if (kv.kind != Kind::weak) {
    auto& d = diags().error(kat.loc,
                            fmt::format("shift() needs a constant integer offset (a number, an "
                                        "unannotated module constant or an expression of them), "
                                        "not {}",
                                        describe(kv)),
                            kat.span());
    d.hint =
        "the offset is fixed when the kernel is compiled: 1 reads v[t - 1], -1 reads v[t + 1]; an "
        "annotated constant (K: i32 = 1) is a typed scalar, write K = 1";
    return Value::error();
  }
  // An integer literal (or integer constant): 1.0 would read as a position only by rounding.
  if (!kv.is_int) {
    const bool whole = std::trunc(kv.num) == kv.num && std::fabs(kv.num) < 1e15;
    auto& d = diags().error(
        kat.loc,
        fmt::format("the offset of shift() must be an integer, not {}",
                    whole ? fmt::format("{:.1f}", kv.num) : fmt::format("{}", kv.num)),
        kat.span());
    d.hint =
        "the offset counts positions: 1 reads v[t - 1], -1 reads v[t + 1]; '/' gives a float, '//' "
        "an integer";
    return Value::error();
  }
  if (std::fabs(kv.num) > kMaxShift) {
    auto& d =
        diags().error(kat.loc,
                      fmt::format("the offset of shift() is {:.0f}; it must be from -{} to {}",
                                  kv.num, kMaxShift, kMaxShift),
                      kat.span());
    d.hint = "an offset at least the sequence's length gives only the fill value";
    return Value::error();
  }
  const ast::Expr& fat = *e.args[3];
  Value fill = args[2];
  if (fill.kind == Kind::weak) fill = materialize(fill, v.type.dtype, &fat);
  if (fill.is_error()) return fill;
  if (fill.kind != Kind::node || fill.type.form != Form::scalar ||
      fill.type.dtype != v.type.dtype) {
    auto& d = diags().error(fat.loc,
                            fmt::format("the fill value of shift() must be a scalar {} (the "
                                        "vector's dtype), not {}",
                                        dtype_name(v.type.dtype), describe(fill)),
                            fat.span());
    if (fill.kind == Kind::node && fill.type.form == Form::scalar) {
      d.hint = fmt::format("convert it: {}(...)", dtype_name(v.type.dtype));
    }
    return Value::error();
  }
  auto k = static_cast<int32_t>(kv.num);
  if (k == 0) return v;
  ir::Node n;
  n.op = Op::shift;
  n.index = k;
  n.args = {v.id, fill.id};
  n.type = v.type;
  n.loc = e.loc;
  n.length = e.span();
  ir::Type type = n.type;
  return Value::of(builder_->add(std::move(n)), type);
}

}  // namespace kdsl::sema

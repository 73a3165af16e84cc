#include "ir.h"

#include <fmt/format.h>

#include "kdsl/error.h"

namespace kdsl::ir {

const char* name(Op op) {
  static const char* const names[] = {"const",  "param",  "shape", "position", "load",
                                      "arg",    "cast",   "unary", "binary",   "compare",
                                      "select", "reduce", "scan",  "extract",  "shift"};
  return names[static_cast<int>(op)];
}

const char* name(UnaryFn fn) {
  static const char* const names[] = {
      "neg",       "not",      "exp",   "exp2",  "log",      "log2",    "log1p", "expm1", "sqrt",
      "rsqrt",     "abs",      "floor", "ceil",  "tanh",     "sigmoid", "erf",   "silu",  "gelu",
      "gelu_tanh", "softplus", "isnan", "isinf", "isfinite", "real",    "imag",  "conj"};
  return names[static_cast<int>(fn)];
}

const char* name(BinaryFn fn) {
  static const char* const names[] = {"add", "sub", "mul", "div", "floordiv", "mod",
                                      "pow", "min", "max", "and", "or",       "complex"};
  return names[static_cast<int>(fn)];
}

const char* name(CompareFn fn) {
  static const char* const names[] = {"lt", "le", "eq", "ne", "gt", "ge"};
  return names[static_cast<int>(fn)];
}

const char* name(ReduceKind kind) {
  static const char* const names[] = {"sum",    "max",    "min",   "var",
                                      "argmax", "argmin", "first", "last"};
  return names[static_cast<int>(kind)];
}

const char* name(ScanKind kind) {
  static const char* const names[] = {"custom", "sum", "prod", "max", "min", "logaddexp"};
  return names[static_cast<int>(kind)];
}

namespace {

std::string type_str(const Type& t) {
  return fmt::format("{} {}", t.form == Form::vector ? "vec" : "scalar", dtype_name(t.dtype));
}

std::string extent_str(const Kernel& k, const Extent& e) {
  if (e.symbol < 0) return std::to_string(e.constant);
  const Symbol& s = k.symbols.at(e.symbol);
  return s.value ? fmt::format("{}={}", s.name, *s.value) : s.name;
}

std::string view_str(const Kernel& k, const TensorParam& t, const View& v) {
  std::string out = t.name + "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    switch (v[i].kind) {
      case AxisIndex::Kind::loop:
        out += k.loop.at(v[i].value).name;
        break;
      case AxisIndex::Kind::vector:
        out += ":";
        break;
      case AxisIndex::Kind::constant:
        out += std::to_string(v[i].value);
        break;
    }
  }
  return out + "]";
}

std::string number_str(double v) {
  std::string s = fmt::format("{}", v);
  return s;
}

}  // namespace

std::string scalar_value_str(double v, DType t) {
  if (t == DType::b8) return v != 0 ? "True" : "False";
  if (is_int(t)) return fmt::format("{}", static_cast<int64_t>(v));
  if (t == DType::f32 || t == DType::f16 || t == DType::bf16) {
    return fmt::format("{}", static_cast<float>(v));
  }
  return number_str(v);
}

namespace {

std::string node_str(const Kernel& k, const Node& n) {
  std::string s = fmt::format("{} {}", name(n.op), type_str(n.type));
  switch (n.op) {
    case Op::constant:
      s += " " + number_str(n.number);
      if (n.type.dtype == DType::c64) s += fmt::format("{:+}j", n.number_im);
      break;
    case Op::param:
      s += " " + k.scalars.at(n.index).name;
      break;
    case Op::shape:
      s += " " + k.symbols.at(n.index).name;
      break;
    case Op::load:
      s += " " + view_str(k, k.tensors.at(n.index), n.view);
      break;
    case Op::arg:
      s += fmt::format(" #{}", n.index);
      break;
    case Op::unary:
      s += std::string(" ") + name(static_cast<UnaryFn>(n.fn));
      break;
    case Op::binary:
      s += std::string(" ") + name(static_cast<BinaryFn>(n.fn));
      break;
    case Op::compare:
      s += std::string(" ") + name(static_cast<CompareFn>(n.fn));
      break;
    case Op::reduce:
      s += std::string(" ") + name(static_cast<ReduceKind>(n.fn));
      break;
    case Op::scan:
      s += fmt::format(" {} region{}{}{}{} -> {}", name(static_cast<ScanKind>(n.fn)), n.index,
                       n.reverse ? " reverse" : "", n.exclusive ? " exclusive" : "",
                       n.has_init ? " init" : "", n.results.size());
      break;
    case Op::extract:
      s += fmt::format(" #{}", n.index);
      break;
    case Op::shift:
      s += fmt::format(" by {}", n.index);
      break;
    default:
      break;
  }
  for (size_t i = 0; i < n.args.size(); ++i) s += fmt::format("{}%{}", i ? ", " : " ", n.args[i]);
  return s;
}

const char* role_str(Role r) {
  switch (r) {
    case Role::in:
      return "Tensor";
    case Role::out:
      return "Out";
    case Role::inout:
      return "InOut";
  }
  return "?";
}

const char* store_str(StoreKind k) {
  switch (k) {
    case StoreKind::write:
      return "=";
    case StoreKind::accumulate:
      return "+=";
    case StoreKind::reduce:
      return "+= (reduce)";
  }
  return "?";
}

}  // namespace

std::string print(const Kernel& k) {
  std::string out = "kernel " + k.name;
  if (!k.generics.empty()) {
    out += "[";
    for (size_t i = 0; i < k.generics.size(); ++i) {
      out += fmt::format("{}{}={}", i ? ", " : "", k.generics[i].first,
                         dtype_name(k.generics[i].second));
    }
    out += "]";
  }
  out += "(";
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Param& p = k.params[i];
    if (i) out += ", ";
    if (p.is_tensor) {
      const TensorParam& t = k.tensors.at(p.index);
      out += fmt::format("{}: {}[{}, (", t.name, role_str(t.role), dtype_name(t.dtype));
      for (size_t a = 0; a < t.shape.size(); ++a) {
        out += (a ? ", " : "") + extent_str(k, t.shape[a]);
      }
      out += t.shape.size() == 1 ? ",)]" : ")]";
    } else {
      const ScalarParam& s = k.scalars.at(p.index);
      out += fmt::format("{}: {}", s.name, dtype_name(s.dtype));
      if (s.default_value) out += " = " + scalar_value_str(*s.default_value, s.dtype);
    }
  }
  out += ")\n";
  out += "  parallel";
  for (const LoopVar& v : k.loop)
    out += fmt::format(" {} in {};", v.name, k.symbols.at(v.extent).name);
  if (k.vector_symbol >= 0) {
    out += " vector axis " + extent_str(k, Extent{k.vector_symbol, 0});
  }
  out += "\n";
  for (size_t r = 0; r < k.regions.size(); ++r) {
    const Region& reg = k.regions[r];
    out += fmt::format("  region{}({} args):\n", r, reg.num_args);
    for (size_t i = 0; i < reg.nodes.size(); ++i) {
      out += fmt::format("    %{} = {}\n", i, node_str(k, reg.nodes[i]));
    }
    out += "    yield";
    for (size_t i = 0; i < reg.results.size(); ++i) {
      out += fmt::format("{}%{}", i ? ", " : " ", reg.results[i]);
    }
    out += "\n";
  }
  for (size_t i = 0; i < k.nodes.size(); ++i) {
    out += fmt::format("  %{} = {}\n", i, node_str(k, k.nodes[i]));
  }
  for (const Store& s : k.stores) {
    out += fmt::format("  store {} {} %{}\n", view_str(k, k.tensors.at(s.tensor), s.view),
                       store_str(s.kind), s.value);
  }
  return out;
}

namespace {

[[noreturn]] void broken(const Kernel& k, const std::string& what) {
  throw InternalError(
      fmt::format("IR of kernel '{}' is malformed: {}\n{}", k.name, what, print(k)));
}

void verify_view(const Kernel& k, const TensorParam& t, const View& v, const char* what) {
  if (v.size() != t.shape.size()) {
    broken(k,
           fmt::format("{} of {} indexes {} of {} axes", what, t.name, v.size(), t.shape.size()));
  }
  for (const AxisIndex& a : v) {
    if (a.kind == AxisIndex::Kind::loop && (a.value < 0 || a.value >= (int64_t)k.loop.size())) {
      broken(k, fmt::format("{} of {} uses an unknown loop variable", what, t.name));
    }
  }
}

bool has_vector_axis(const View& v) {
  for (const AxisIndex& a : v) {
    if (a.kind == AxisIndex::Kind::vector) return true;
  }
  return false;
}

// A scan: k values (any form) and k scalar initial values of the result dtypes; a region of 2k
// scalar arguments whose results have those dtypes.
void verify_scan(const Kernel& k, const std::vector<Node>& nodes, const Node& n, size_t i) {
  if (n.index < 0 || n.index >= (int32_t)k.regions.size()) broken(k, "bad scan region");
  const Region& r = k.regions[n.index];
  size_t m = n.results.size();
  bool ok = m > 0 && n.args.size() == (n.has_init ? 2 * m : m) && r.results.size() == m &&
            r.num_args == static_cast<int32_t>(2 * m) && n.type == n.results[0];
  for (size_t j = 0; ok && j < m; ++j) {
    DType t = n.results[j].dtype;
    ok = n.results[j].form == Form::vector && nodes[n.args[j]].type.dtype == t &&
         r.nodes[r.results[j]].type.dtype == t &&
         (!n.has_init || (nodes[n.args[m + j]].type == Type{t, Form::scalar}));
  }
  for (const Node& rn : r.nodes) {
    ok = ok && rn.type.form == Form::scalar &&
         (rn.op == Op::arg || rn.op == Op::constant || rn.op == Op::cast || rn.op == Op::unary ||
          rn.op == Op::binary || rn.op == Op::compare || rn.op == Op::select);
  }
  if (!ok) broken(k, fmt::format("%{} is a malformed scan", i));
}

void verify_nodes(const Kernel& k, const std::vector<Node>& nodes, int32_t num_args) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    for (ValueId a : n.args) {
      if (a < 0 || static_cast<size_t>(a) >= i) broken(k, fmt::format("%{} uses %{}", i, a));
    }
    auto arg = [&](size_t j) -> const Node& { return nodes[n.args.at(j)]; };
    switch (n.op) {
      case Op::param:
        if (n.index < 0 || n.index >= (int32_t)k.scalars.size()) broken(k, "bad param index");
        break;
      case Op::shape:
        if (n.index < 0 || n.index >= (int32_t)k.symbols.size()) broken(k, "bad symbol index");
        break;
      case Op::load: {
        if (n.index < 0 || n.index >= (int32_t)k.tensors.size()) broken(k, "bad tensor index");
        const TensorParam& t = k.tensors[n.index];
        if (t.role == Role::out) broken(k, fmt::format("%{} loads output {}", i, t.name));
        verify_view(k, t, n.view, "load");
        Form f = has_vector_axis(n.view) ? Form::vector : Form::scalar;
        if (n.type.form != f || n.type.dtype != t.dtype) {
          broken(k, fmt::format("%{} has the wrong type for a load of {}", i, t.name));
        }
        break;
      }
      case Op::arg:
        if (n.index < 0 || n.index >= num_args) broken(k, fmt::format("%{} bad arg", i));
        break;
      case Op::binary:
      case Op::compare:
        if (n.args.size() != 2) broken(k, fmt::format("%{} needs 2 operands", i));
        if (arg(0).type.dtype != arg(1).type.dtype) {
          broken(k, fmt::format("%{} mixes dtypes", i));
        }
        break;
      case Op::select:
        if (n.args.size() != 3 || arg(0).type.dtype != DType::b8 ||
            arg(1).type.dtype != arg(2).type.dtype || arg(1).type.dtype != n.type.dtype) {
          broken(k, fmt::format("%{} is a malformed select", i));
        }
        break;
      case Op::reduce:
        if (n.args.size() != 1 || arg(0).type.form != Form::vector || n.type.form != Form::scalar) {
          broken(k, fmt::format("%{} is a malformed reduction", i));
        }
        break;
      case Op::scan:
        verify_scan(k, nodes, n, i);
        break;
      case Op::extract:
        if (n.args.size() != 1 || arg(0).results.size() <= static_cast<size_t>(n.index) ||
            !(arg(0).results[n.index] == n.type)) {
          broken(k, fmt::format("%{} extracts a missing result", i));
        }
        break;
      case Op::shift:
        if (n.args.size() != 2 || arg(0).type.form != Form::vector ||
            arg(1).type.form != Form::scalar || arg(0).type.dtype != n.type.dtype ||
            arg(1).type.dtype != n.type.dtype || n.type.form != Form::vector) {
          broken(k, fmt::format("%{} is a malformed shift", i));
        }
        break;
      default:
        break;
    }
    if (n.type.form == Form::scalar) {
      for (ValueId a : n.args) {
        if (nodes[a].type.form == Form::vector && n.op != Op::reduce && n.op != Op::extract) {
          broken(k, fmt::format("scalar %{} has vector operand %{}", i, a));
        }
      }
    }
  }
}

}  // namespace

void verify(const Kernel& k) {
  for (const Region& r : k.regions) {
    verify_nodes(k, r.nodes, r.num_args);
    for (ValueId v : r.results) {
      if (v < 0 || v >= (ValueId)r.nodes.size()) broken(k, "region result out of range");
    }
  }
  verify_nodes(k, k.nodes, 0);
  for (const Store& s : k.stores) {
    if (s.tensor < 0 || s.tensor >= (int32_t)k.tensors.size()) broken(k, "store to bad tensor");
    const TensorParam& t = k.tensors[s.tensor];
    if (t.role == Role::in) broken(k, fmt::format("store to input {}", t.name));
    verify_view(k, t, s.view, "store");
    if (s.value < 0 || s.value >= (ValueId)k.nodes.size()) broken(k, "store of bad value");
    if (s.kind == StoreKind::write && k.node(s.value).type.dtype != t.dtype) {
      broken(k, fmt::format("store to {} has dtype {}", t.name,
                            dtype_name(k.node(s.value).type.dtype)));
    }
    if (!has_vector_axis(s.view) && k.node(s.value).type.form == Form::vector) {
      broken(k, fmt::format("vector stored into element view of {}", t.name));
    }
  }
}

}  // namespace kdsl::ir

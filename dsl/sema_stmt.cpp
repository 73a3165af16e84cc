// Statements, stores, helpers and whole kernels.
#include <fmt/format.h>

#include <algorithm>

#include "kdsl/error.h"
#include "sema_internal.h"
#include "text.h"

namespace kdsl::sema {

using ir::Form;
using ir::Op;
using Kind = Value::Kind;

bool is_parallel_loop(const ast::Stmt& s) {
  return s.kind == ast::StmtKind::for_ && s.value && s.value->kind == ast::ExprKind::call &&
         s.value->args[0]->kind == ast::ExprKind::name && s.value->args[0]->name == "parallel";
}

void report_non_parallel_for(Diagnostics& diags, const ast::Stmt& s) {
  auto& d = diags.error(s.loc, "for loops iterate over parallel(...) only", 3);
  d.hint = "work along the vector axis is written with vectors, reductions and scans";
}

bool StoreKey::operator<(const StoreKey& o) const {
  if (tensor != o.tensor) return tensor < o.tensor;
  return std::lexicographical_compare(view.begin(), view.end(), o.view.begin(), o.view.end(),
                                      [](const ir::AxisIndex& a, const ir::AxisIndex& b) {
                                        return std::tie(a.kind, a.value) <
                                               std::tie(b.kind, b.value);
                                      });
}

namespace {

const char* stmt_keyword(const ast::Stmt& s) {
  switch (s.kind) {
    case ast::StmtKind::for_:
      return "for";
    case ast::StmtKind::if_:
      return "if";
    case ast::StmtKind::return_:
      return "return";
    default:
      return "statement";
  }
}

// Two views of one tensor are disjoint when some axis has different constant positions.
bool disjoint(const ir::View& a, const ir::View& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i].kind == ir::AxisIndex::Kind::constant && b[i].kind == ir::AxisIndex::Kind::constant &&
        a[i].value != b[i].value) {
      return true;
    }
  }
  return false;
}

}  // namespace

void Lowerer::bind(const std::string& name, Value v, const ast::Expr& at) {
  const char* what = nullptr;
  if (kernel_ && !frames_.back().helper) {
    for (const auto& t : kernel_->tensors) {
      if (t.name == name) what = "a tensor parameter";
    }
    for (const auto& s : kernel_->scalars) {
      if (s.name == name) what = "a scalar parameter";
    }
    for (const auto& s : kernel_->symbols) {
      if (s.name == name) what = "a shape symbol";
    }
    for (const auto& l : kernel_->loop) {
      if (l.name == name) what = "a loop variable";
    }
    for (const auto& g : kernel_->generics) {
      if (g.first == name) what = "a generic";
    }
  }
  // (Built-ins as well: `mean = ...` used to be accepted, and a later mean(v) then said only "a
  // number is not a function"; found by a new-user test.)
  if (!what && scope_.function(name)) what = "a function";  // a kernel's name too
  if (!what) what = reserved_name(scope_, name);
  if (what) {
    diags().error(at.loc, fmt::format("cannot assign to '{}': it is {}", name, what), at.span());
    // Later uses of the name are not reported again (`helper = 2.0` then `s + helper` used to
    // add "'+' needs a scalar or a vector, not helper function 'helper'"; SPEC 15).
    frames_.back().locals[name] = Value::error();
    return;
  }
  if (v.kind == Kind::helper || v.kind == Kind::dtype || v.kind == Kind::loopvar) {
    diags().error(at.loc, fmt::format("cannot assign {} to a variable", describe(v)), at.span());
    v = Value::error();
  }
  frames_.back().locals[name] = std::move(v);
}

void Lowerer::stmts(const std::vector<ast::StmtPtr>& body) {
  for (const auto& s : body) stmt(*s);
}

void Lowerer::stmt(const ast::Stmt& s) {
  switch (s.kind) {
    case ast::StmtKind::assign: {
      Value v = expr(*s.value);
      assign(*s.targets[0], v, s);
      return;
    }
    case ast::StmtKind::aug_assign:
      aug_assign(s);
      return;
    case ast::StmtKind::expr: {
      Value v = expr(*s.value);
      if (!v.is_error()) {
        auto& d =
            diags().error(s.value->loc, "this expression's value is not used", s.value->span());
        d.hint = "assign it to a variable or store it into an output";
      }
      return;
    }
    case ast::StmtKind::pass:
      return;
    case ast::StmtKind::return_: {
      bool helper = frames_.back().helper;
      auto& d = diags().error(s.loc,
                              helper ? "return must be the last statement of a helper"
                                     : "kernels do not return values; they write Out[...] "
                                       "parameters",
                              6);
      if (helper) {
        d.hint = "assign the result on each branch of the if (or use where), then return it once";
      }
      return;
    }
    case ast::StmtKind::for_:
      for_stmt(s);
      return;
    case ast::StmtKind::if_:
      if_stmt(s);
      return;
  }
}

void Lowerer::assign(const ast::Expr& target, const Value& v0, const ast::Stmt& s) {
  Value v = v0;
  if (v.kind == Kind::tensor && kernel_) v = vector_of_tensor(v.index, *s.value);
  switch (target.kind) {
    case ast::ExprKind::name:
      bind(target.name, v, target);
      return;
    case ast::ExprKind::tuple: {
      if (v.is_error()) {
        for (const auto& t : target.args) assign(*t, v, s);
        return;
      }
      if (v.kind != Kind::tuple || v.elems.size() != target.args.size()) {
        diags().error(
            target.loc,
            fmt::format("cannot unpack {} into {} targets", describe(v), target.args.size()),
            target.span());
        // The targets are bound to errors, so that their later uses report nothing more.
        for (const auto& t : target.args) assign(*t, Value::error(), s);
        return;
      }
      for (size_t i = 0; i < target.args.size(); ++i) assign(*target.args[i], v.elems[i], s);
      return;
    }
    case ast::ExprKind::subscript:
      store(target, v, false, s);
      return;
    default:
      diags().error(target.loc, "cannot assign to this expression", target.span());
      return;
  }
}

void Lowerer::aug_assign(const ast::Stmt& s) {
  static const char* const spellings[] = {"+", "-", "*", "/", "//", "%", "**"};
  const ast::Expr& target = *s.targets[0];
  Value v = expr(*s.value);
  if (target.kind == ast::ExprKind::subscript) {
    if (s.aug_op != ast::BinaryOp::add) {
      static const char* const ops[] = {"+=", "-=", "*=", "/="};
      auto& d = diags().error(s.loc,
                              fmt::format("'{}' into a tensor is not supported; tensors take = "
                                          "and += only",
                                          ops[static_cast<int>(s.aug_op)]),
                              s.end - s.loc.offset);
      if (s.aug_op == ast::BinaryOp::sub) d.hint = "add the negated value: += -(...)";
      skip_stores(target);
      return;
    }
    store(target, v, true, s);
    return;
  }
  if (target.kind != ast::ExprKind::name) {
    diags().error(target.loc, "cannot assign to this expression", target.span());
    return;
  }
  Value old = lookup(target);
  auto op = static_cast<uint8_t>(s.aug_op);
  // bind() reports an assignment to a loop variable; it is not also reported as an operand.
  Value sum = old.kind == Kind::loopvar ? Value::error()
                                        : binary(static_cast<ir::BinaryFn>(op), old, v, *s.value,
                                                 spellings[op], &target, s.value.get());
  bind(target.name, sum, target);
}

void Lowerer::store(const ast::Expr& target, Value v, bool accumulate, const ast::Stmt& s) {
  if (frames_.back().helper) {
    diags().error(target.loc, "helpers cannot write to tensors; return the value instead",
                  target.span());
    return;
  }
  const ast::Expr& base = *target.args[0];
  Value b = base.kind == ast::ExprKind::name ? lookup(base) : Value::error();
  if (b.is_error()) {
    if (base.kind != ast::ExprKind::name) {
      diags().error(base.loc, "only tensor parameters can be stored into", base.span());
    }
    return;
  }
  if (b.kind != Kind::tensor) {
    diags().error(base.loc, fmt::format("cannot store into {}", describe(b)), base.span());
    return;
  }
  const ir::TensorParam& t = kernel_->tensors[b.index];
  failed_stores_.insert(b.index);  // until the store below is recorded
  if (t.role == ir::Role::in) {
    auto& d = diags().error(
        base.loc, fmt::format("'{}' is an input (Tensor[...]) and cannot be written", t.name),
        base.span());
    d.hint = "declare it Out[...] or InOut[...]";
    return;
  }
  if (!in_loop_) {
    diags().error(target.loc, "outputs are written inside the parallel loop", target.span());
    return;
  }
  StoreKey key{b.index, {}};
  if (!parse_view(target, b.index, &key.view)) return;
  bool vector_view = false;
  std::vector<bool> used(kernel_->loop.size(), false);
  for (const auto& a : key.view) {
    if (a.kind == ir::AxisIndex::Kind::vector) vector_view = true;
    if (a.kind == ir::AxisIndex::Kind::loop) used[a.value] = true;
  }
  std::string missing;
  for (size_t i = 0; i < used.size(); ++i) {
    if (!used[i]) missing += (missing.empty() ? "" : ", ") + kernel_->loop[i].name;
  }
  bool reduce = !missing.empty();
  if (reduce && !accumulate) {
    auto& d = diags().error(target.loc,
                            fmt::format("this store does not depend on loop variable {}, so every "
                                        "iteration would write the same elements",
                                        missing),
                            target.span());
    d.hint = fmt::format("use += to sum over {} (a column reduction)", missing);
    return;
  }
  if (v.kind == Kind::tensor) v = vector_of_tensor(v.index, *s.value);
  if (v.is_error()) return;
  if (!expect_node(v, *s.value, "a store")) return;
  if (!vector_view && v.is_vector()) {
    auto& d = diags().error(s.value->loc,
                            fmt::format("'{}' is a single element, but the value stored into it "
                                        "is {}",
                                        ast::print(target), describe(v)),
                            s.value->span());
    d.hint = "reduce the vector first (sum, mean, max, ...), or store it into a view with ':'";
    return;
  }
  DType acc = accumulator_dtype(t.dtype);
  if (v.kind == Kind::weak) v = materialize(v, accumulate ? acc : t.dtype, s.value.get());
  if (v.is_error()) return;
  bool dtype_ok = v.type.dtype == t.dtype || (accumulate && v.type.dtype == acc);
  if (!dtype_ok) {
    std::string spelled = std::string(dtype_name(t.dtype));
    for (const auto& p : sig_->params) {
      if (p.name == t.name && p.generic >= 0) spelled = sig_->generics[p.generic].name;
    }
    auto& d = diags().error(
        s.value->loc,
        fmt::format("the value stored into '{}' is {}, but '{}' holds {}{}", t.name,
                    dtype_name(v.type.dtype), t.name, dtype_name(t.dtype),
                    accumulate ? fmt::format(" (+= also takes {})", dtype_name(acc)) : ""),
        s.value->span());
    d.hint = fmt::format("convert explicitly: {}(...)", spelled);
    return;
  }
  for (const auto& [k, st] : stores_) {
    if (k.tensor == key.tensor && !(k.view == key.view) && !disjoint(k.view, key.view)) {
      diags().error(target.loc,
                    fmt::format("'{}' is written through two overlapping views (see line {})",
                                t.name, st.loc.line),
                    target.span());
      return;
    }
  }
  StoreState& st = stores_[key];
  if (st.kind != StoreState::Kind::unset &&
      st.store != (reduce ? ir::StoreKind::reduce : ir::StoreKind::write)) {
    throw InternalError("sema: one view stored both as a column reduction and a write");
  }
  failed_stores_.erase(b.index);
  st.store = reduce ? ir::StoreKind::reduce : ir::StoreKind::write;
  st.loc = target.loc;
  if (!accumulate) {
    st.kind = StoreState::Kind::written;
    st.value = v;
    return;
  }
  Value c = cast(v, acc, s.value.get());
  Value base_value;
  if (st.kind != StoreState::Kind::unset) {
    base_value = cast(st.value, acc, s.value.get());
  } else if (!reduce && t.role == ir::Role::inout) {
    ir::Node n;
    n.op = Op::load;
    n.index = key.tensor;
    n.view = key.view;
    n.type = {t.dtype, vector_view ? Form::vector : Form::scalar};
    n.loc = target.loc;
    ir::Type type = n.type;
    base_value = cast(Value::of(builder_->add(std::move(n)), type), acc, s.value.get());
  }
  st.value =
      base_value.kind == Kind::node ? binary(ir::BinaryFn::add, base_value, c, *s.value, "+") : c;
  st.kind = StoreState::Kind::accumulated;
}

Value Lowerer::merge(const Value& cond, const Value& a, const Value& b, const std::string& what,
                     const ast::Stmt& s) {
  if (a.same_as(b)) return a;
  if (a.kind == Kind::undefined || b.kind == Kind::undefined) {
    Value u;
    u.kind = Kind::undefined;
    u.where = s.loc;
    return u;
  }
  if (a.is_error() || b.is_error() || cond.is_error()) return Value::error();
  if (a.kind == Kind::tuple && b.kind == Kind::tuple && a.elems.size() == b.elems.size()) {
    Value t;
    t.kind = Kind::tuple;
    for (size_t i = 0; i < a.elems.size(); ++i) {
      t.elems.push_back(merge(cond, a.elems[i], b.elems[i], what, s));
    }
    return t;
  }
  bool numeric = (a.kind == Kind::node || a.kind == Kind::weak) &&
                 (b.kind == Kind::node || b.kind == Kind::weak);
  if (!numeric || (a.kind == Kind::node && b.kind == Kind::node && a.type.dtype != b.type.dtype)) {
    diags().error(s.loc,
                  fmt::format("'{}' is {} on one branch of this if and {} on the other", what,
                              describe(a), describe(b)),
                  2);
    return Value::error();
  }
  return select(cond, a, b, s.value.get());
}

void Lowerer::if_stmt(const ast::Stmt& s) {
  Value cond = expr(*s.value);
  if (!cond.is_error()) {
    if (cond.kind != Kind::node || cond.type.dtype != DType::b8) {
      diags().error(s.value->loc,
                    fmt::format("an if condition must be a bool, not {}", describe(cond)),
                    s.value->span());
      cond = Value::error();
    } else if (cond.is_vector()) {
      auto& d = diags().error(s.value->loc,
                              "an if condition must be uniform (a scalar), but this one is a "
                              "vector",
                              s.value->span());
      d.hint = "use where(cond, a, b) to choose per element";
      cond = Value::error();
    }
  }
  auto locals_before = frames_.back().locals;
  auto stores_before = stores_;
  stmts(s.body);
  auto then_locals = frames_.back().locals;
  auto then_stores = stores_;
  frames_.back().locals = locals_before;
  stores_ = stores_before;
  stmts(s.orelse);
  auto else_locals = frames_.back().locals;
  auto else_stores = stores_;

  std::map<std::string, Value> merged;
  for (const auto* side : {&then_locals, &else_locals}) {
    for (const auto& [name, v] : *side) {
      if (merged.count(name)) continue;
      auto a = then_locals.find(name);
      auto b = else_locals.find(name);
      Value undef;
      undef.kind = Kind::undefined;
      undef.where = s.loc;
      const Value& va = a != then_locals.end() ? a->second : undef;
      const Value& vb = b != else_locals.end() ? b->second : undef;
      merged[name] = merge(cond, va, vb, name, s);
    }
  }
  frames_.back().locals = std::move(merged);

  std::map<StoreKey, StoreState> merged_stores;
  for (const auto* side : {&then_stores, &else_stores}) {
    for (const auto& entry : *side) {
      const StoreKey& key = entry.first;  // not a structured binding: the lambda below uses it
      if (merged_stores.count(key)) continue;
      StoreState empty;
      auto a = then_stores.find(key);
      auto b = else_stores.find(key);
      StoreState sa = a != then_stores.end() ? a->second : empty;
      StoreState sb = b != else_stores.end() ? b->second : empty;
      const ir::TensorParam& t = kernel_->tensors[key.tensor];
      DType acc = accumulator_dtype(t.dtype);
      StoreState out = sa.kind != StoreState::Kind::unset ? sa : sb;
      bool reduce = out.store == ir::StoreKind::reduce;
      auto fill = [&](StoreState& x) {
        if (x.kind != StoreState::Kind::unset) return true;
        if (reduce || (t.role == ir::Role::out && out.kind == StoreState::Kind::accumulated)) {
          x.value = constant(0, acc);  // += into an Out tensor starts from zero
        } else if (t.role == ir::Role::inout) {
          ir::Node n;
          n.op = Op::load;
          n.index = key.tensor;
          n.view = key.view;
          bool vec = std::any_of(key.view.begin(), key.view.end(), [](const ir::AxisIndex& i) {
            return i.kind == ir::AxisIndex::Kind::vector;
          });
          n.type = {t.dtype, vec ? Form::vector : Form::scalar};
          ir::Type type = n.type;
          x.value = Value::of(builder_->add(std::move(n)), type);
        } else {
          auto& d = diags().error(out.loc,
                                  fmt::format("'{}' is written on only one branch of the if at "
                                              "line {}",
                                              t.name, s.loc.line),
                                  static_cast<uint32_t>(t.name.size()));
          d.hint = "write it on both branches, or choose the value with where(...)";
          failed_stores_.insert(key.tensor);
          return false;
        }
        x.kind = StoreState::Kind::written;
        return true;
      };
      if (!fill(sa) || !fill(sb)) continue;
      if (!(sa.value.same_as(sb.value))) {
        Value va = sa.value, vb = sb.value;
        if (va.kind == Kind::node && vb.kind == Kind::node && va.type.dtype != vb.type.dtype) {
          va = cast(va, acc, s.value.get());
          vb = cast(vb, acc, s.value.get());
        }
        out.value = cond.is_error() ? Value::error() : select(cond, va, vb, s.value.get());
      }
      out.kind =
          sa.kind == StoreState::Kind::accumulated || sb.kind == StoreState::Kind::accumulated
              ? StoreState::Kind::accumulated
              : StoreState::Kind::written;
      merged_stores[key] = out;
    }
  }
  stores_ = std::move(merged_stores);
}

void Lowerer::skip_stores(const ast::Expr& target) {
  if (!kernel_) return;
  if (target.kind == ast::ExprKind::tuple) {
    for (const auto& t : target.args) skip_stores(*t);
  }
  if (target.kind != ast::ExprKind::subscript || target.args[0]->kind != ast::ExprKind::name) {
    return;
  }
  for (size_t i = 0; i < kernel_->tensors.size(); ++i) {
    if (kernel_->tensors[i].name == target.args[0]->name) {
      failed_stores_.insert(static_cast<int32_t>(i));
    }
  }
}

void Lowerer::skip_stores(const std::vector<ast::StmtPtr>& body) {
  for (const auto& s : body) {
    for (const auto& t : s->targets) skip_stores(*t);
    skip_stores(s->body);
    skip_stores(s->orelse);
  }
}

void Lowerer::for_stmt(const ast::Stmt& s) {
  if (!is_parallel_loop(s)) {
    report_non_parallel_for(diags(), s);
    skip_stores(s.body);
    return;
  }
  if (frames_.back().helper) {
    auto& d = diags().error(s.loc, "helpers cannot contain loops", 3);
    d.hint =
        "a helper runs inside the kernel's parallel loop; work along a row is written with "
        "vectors";
    skip_stores(s.body);
    return;
  }
  if (in_loop_ || loop_seen_) {
    diags().error(s.loc,
                  "a kernel has exactly one parallel loop, at the top level of its body; "
                  "loops along the vector axis are implicit (vectors)",
                  3);
    skip_stores(s.body);
    return;
  }
  for (const auto& t : s.targets) {
    for (const auto& [name, v] : frames_.back().locals) {
      if (name == t->name) {
        diags().error(t->loc, fmt::format("loop variable '{}' hides a local variable", name),
                      t->span());
      }
    }
  }
  in_loop_ = true;
  stmts(s.body);
  in_loop_ = false;
  loop_seen_ = true;
}

void Lowerer::lower_kernel_body(const ast::FunctionDef& fn) {
  bool after_reported = false;
  for (const auto& s : fn.body) {
    if (loop_seen_) {
      for (const auto& t : s->targets) skip_stores(*t);
      skip_stores(s->body);
      skip_stores(s->orelse);
      if (!after_reported) {
        diags().error(s->loc,
                      "statements after the parallel loop are not supported; move them into "
                      "the loop",
                      static_cast<uint32_t>(std::string(stmt_keyword(*s)).size()));
        after_reported = true;
      }
      continue;
    }
    stmt(*s);
  }
  finish_stores(fn);
}

void Lowerer::finish_stores(const ast::FunctionDef& fn) {
  for (auto& [key, st] : stores_) {
    if (st.value.is_error() || st.value.kind != Kind::node) continue;
    const ir::TensorParam& t = kernel_->tensors[key.tensor];
    Value v = st.value;
    if (st.store == ir::StoreKind::write) v = cast(v, t.dtype, nullptr);
    if (v.is_error()) continue;
    kernel_->stores.push_back(ir::Store{key.tensor, key.view, v.id, st.store, st.loc});
  }
  for (size_t i = 0; i < kernel_->tensors.size(); ++i) {
    const ir::TensorParam& t = kernel_->tensors[i];
    if (t.role == ir::Role::in) continue;
    bool written = std::any_of(stores_.begin(), stores_.end(),
                               [&](const auto& kv) { return kv.first.tensor == (int32_t)i; });
    if (!written && !failed_stores_.count(static_cast<int32_t>(i))) {
      diags().error(t.loc, fmt::format("output '{}' is never written", t.name),
                    static_cast<uint32_t>(t.name.size()));
    }
  }
  (void)fn;
}

Value Lowerer::call_helper(const ast::FunctionDef& fn, const ast::Expr& e,
                           std::vector<Value>& args) {
  if (std::find(inline_stack_.begin(), inline_stack_.end(), &fn) != inline_stack_.end()) {
    std::string chain;
    auto first = std::find(inline_stack_.begin(), inline_stack_.end(), &fn);
    for (auto it = first; it != inline_stack_.end(); ++it) chain += (*it)->name + " -> ";
    diags().error(e.loc,
                  fmt::format("recursive call of helper '{}' ({}{}); helpers are inlined, so "
                              "they cannot recurse",
                              fn.name, chain, fn.name),
                  e.span());
    return Value::error();
  }
  if (!fn.generics.empty()) {
    diags().error(fn.loc,
                  "helpers cannot have generics; leave parameters unannotated to accept any "
                  "dtype",
                  static_cast<uint32_t>(fn.name.size()));
    return Value::error();
  }
  Frame frame;
  frame.helper = true;
  std::vector<bool> bound(fn.params.size(), false);
  if (args.size() > fn.params.size()) {
    size_t required = static_cast<size_t>(
        std::count_if(fn.params.begin(), fn.params.end(),
                      [](const ast::Param& p) { return p.default_value == nullptr; }));
    diags().error(e.loc,
                  fmt::format("'{}' takes {}{} argument{} ({} given)", fn.name,
                              required == fn.params.size() ? "" : "at most ", fn.params.size(),
                              fn.params.size() == 1 ? "" : "s", args.size()),
                  e.span());
    return Value::error();
  }
  std::vector<Value> values(fn.params.size());
  std::vector<const ast::Expr*> where(fn.params.size(), &e);
  for (size_t i = 0; i < args.size(); ++i) {
    values[i] = args[i];
    where[i] = e.args[i + 1].get();
    bound[i] = true;
  }
  for (const auto& k : e.keywords) {
    size_t i = 0;
    while (i < fn.params.size() && fn.params[i].name != k.name) ++i;
    if (i == fn.params.size() || bound[i]) {
      diags().error(k.loc,
                    i == fn.params.size()
                        ? fmt::format("'{}' has no parameter '{}'", fn.name, k.name)
                        : fmt::format("argument '{}' of '{}' is given twice", k.name, fn.name),
                    static_cast<uint32_t>(k.name.size()));
      return Value::error();
    }
    values[i] = expr(*k.value);
    where[i] = k.value.get();
    bound[i] = true;
  }
  for (size_t i = 0; i < fn.params.size(); ++i) {
    const ast::Param& p = fn.params[i];
    if (!bound[i]) {
      if (!p.default_value) {
        diags().error(e.loc, fmt::format("missing argument '{}' in call to '{}'", p.name, fn.name),
                      e.span());
        return Value::error();
      }
      auto c = eval_constant_expr(scope_, *p.default_value);
      if (!c) return Value::error();
      values[i] = c->dtype ? constant(c->value, *c->dtype) : Value::weak(c->value, c->is_int);
    }
    Value& v = values[i];
    if (v.is_error()) return v;
    if (v.kind == Kind::tensor) {
      const ir::TensorParam& t = kernel_->tensors[v.index];
      auto& d = diags().error(where[i]->loc,
                              fmt::format("tensor '{}' cannot be passed to a helper; helpers "
                                          "take numbers and vectors",
                                          t.name),
                              where[i]->span());
      size_t axis = 0;
      const auto view = example_view(v.index, &axis);
      d.hint =
          view ? fmt::format("pass a view such as {}", *view) : unreachable_axis(v.index, axis);
      return Value::error();
    }
    if (p.annotation) {
      std::optional<DType> t;
      if (p.annotation->kind == ast::ExprKind::name) t = parse_dtype(p.annotation->name);
      if (!t) {
        diags().error(p.annotation->loc, "a helper parameter's type is a dtype such as f32",
                      p.annotation->span());
        return Value::error();
      }
      v = materialize(v, *t, where[i]);
      if (v.is_error()) return v;
      if (v.kind != Kind::node || v.type.dtype != *t) {
        diags().error(where[i]->loc,
                      fmt::format("argument '{}' of '{}' must be {}, not {}", p.name, fn.name,
                                  dtype_name(*t), describe(v)),
                      where[i]->span());
        return Value::error();
      }
    }
    frame.locals[p.name] = v;
  }
  if (inline_stack_.size() >= 64) {
    diags().error(e.loc, "helpers are nested more than 64 calls deep", e.span());
    return Value::error();
  }
  // Every call is inlined, so a helper calling another twice doubles the work at each level;
  // a budget keeps that bounded (and reported once) instead of running for ever.
  if (++inlined_calls_ > kMaxInlinedCalls) {
    if (!inline_budget_reported_) {
      diags()
          .error(e.loc,
                 fmt::format("helper calls expand to more than {} inlined calls in this kernel",
                             kMaxInlinedCalls),
                 e.span())
          .hint =
          "each call of a helper is inlined; compute a value once and reuse it instead of "
          "calling the same helper several times";
      inline_budget_reported_ = true;
    }
    return Value::error();
  }
  if (failed_helpers_.count(&fn)) return Value::error();  // its errors are reported already
  const size_t errors_before = diags().error_count();
  frames_.push_back(std::move(frame));
  inline_stack_.push_back(&fn);
  Value result = Value::error();
  bool returned = false;
  for (size_t i = 0; i < fn.body.size(); ++i) {
    const ast::Stmt& s = *fn.body[i];
    if (s.kind == ast::StmtKind::return_ && i + 1 == fn.body.size()) {
      if (s.value) {
        result = expr(*s.value);
      } else {
        diags().error(s.loc, "a helper's return needs a value", 6);
      }
      returned = true;
      break;
    }
    stmt(s);
  }
  if (!returned) {
    diags().error(fn.loc, fmt::format("helper '{}' must end with a return statement", fn.name),
                  static_cast<uint32_t>(fn.name.size()));
  }
  inline_stack_.pop_back();
  frames_.pop_back();
  // A body with errors gives the same errors at every call: inline it no more (each call would
  // re-lower it, and calls that fan out would repeat that exponentially). The errors point into
  // the helper; a note names the call that inlined it (its arguments decide the body's types),
  // one per level of nesting.
  if (diags().error_count() > errors_before) {
    failed_helpers_.insert(&fn);
    diags().note(e.loc, fmt::format("in this call of helper '{}'", fn.name), e.span());
  }
  return result;
}

namespace {

// Removes nodes no store depends on and renumbers the rest, keeping their order.
void eliminate_dead_nodes(ir::Kernel& k) {
  std::vector<bool> live(k.nodes.size(), false);
  for (const auto& s : k.stores) live[s.value] = true;
  for (size_t i = k.nodes.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (ir::ValueId a : k.nodes[i].args) live[a] = true;
  }
  std::vector<ir::ValueId> remap(k.nodes.size(), -1);
  std::vector<ir::Node> kept;
  for (size_t i = 0; i < k.nodes.size(); ++i) {
    if (!live[i]) continue;
    ir::Node n = std::move(k.nodes[i]);
    for (auto& a : n.args) a = remap[a];
    remap[i] = static_cast<ir::ValueId>(kept.size());
    kept.push_back(std::move(n));
  }
  k.nodes = std::move(kept);
  for (auto& s : k.stores) s.value = remap[s.value];
}

ir::Kernel kernel_from_signature(const KernelSignature& sig, const std::vector<DType>& binding) {
  ir::Kernel k;
  k.name = sig.name;
  k.docstring = sig.docstring;
  k.loc = sig.loc;
  for (size_t g = 0; g < sig.generics.size(); ++g)
    k.generics.push_back({sig.generics[g].name, binding[g]});
  for (const SignatureParam& p : sig.params) {
    DType t = p.generic >= 0 ? binding[p.generic] : p.dtype;
    if (p.is_tensor) {
      k.params.push_back({true, static_cast<int32_t>(k.tensors.size()), p.keyword_only});
      k.tensors.push_back({p.name, t, p.shape, p.role, p.loc});
    } else {
      k.params.push_back({false, static_cast<int32_t>(k.scalars.size()), p.keyword_only});
      k.scalars.push_back({p.name, t, p.default_value, p.loc});
    }
  }
  k.symbols = sig.symbols;
  for (size_t i = 0; i < sig.loop_vars.size(); ++i) {
    k.loop.push_back({sig.loop_vars[i], sig.loop_extents[i]});
  }
  k.vector_symbol = sig.vector_symbol;
  return k;
}

void check_binding(const KernelSignature& sig, const std::vector<DType>& binding) {
  if (binding.size() != sig.generics.size()) {
    throw ArgumentError(
        fmt::format("kernel '{}' has {} but {} given", sig.name,
                    counted(static_cast<int64_t>(sig.generics.size()), "generic", "generics"),
                    counted(static_cast<int64_t>(binding.size()), "dtype was", "dtypes were")));
  }
  for (size_t g = 0; g < binding.size(); ++g) {
    const auto& dom = sig.generics[g].domain;
    if (std::find(dom.begin(), dom.end(), binding[g]) == dom.end()) {
      std::string allowed;
      for (DType t : dom) allowed += (allowed.empty() ? "" : ", ") + std::string(dtype_name(t));
      throw ArgumentError(fmt::format("kernel '{}': {} = {} is not allowed ({} is one of {})",
                                      sig.name, sig.generics[g].name, dtype_name(binding[g]),
                                      sig.generics[g].name, allowed));
    }
  }
}

}  // namespace

std::optional<ir::Kernel> lower_kernel_in(ModuleScope& scope, const ast::FunctionDef& fn,
                                          const KernelSignature& sig,
                                          const std::vector<DType>& binding) {
  check_binding(sig, binding);
  size_t errors = scope.diags().error_count();
  for (const SignatureParam& p : sig.params) {
    if (!p.is_tensor && p.generic >= 0 && binding[p.generic] == DType::c64) {
      scope.diags()
          .error(p.loc, c64_scalar_message(p.name), static_cast<uint32_t>(p.name.size()))
          .hint = c64_scalar_hint;
    }
  }
  if (scope.diags().error_count() != errors) return std::nullopt;
  ir::Kernel k = kernel_from_signature(sig, binding);
  Lowerer low(scope, &sig, &k);
  low.lower_kernel_body(fn);
  if (scope.diags().error_count() != errors) return std::nullopt;
  eliminate_dead_nodes(k);
  ir::verify(k);
  return k;
}

}  // namespace kdsl::sema

namespace kdsl {

std::optional<ir::Kernel> lower_kernel(const ast::Module& m, const std::string& name,
                                       const std::vector<DType>& binding, Diagnostics& diags) {
  sema::ModuleScope scope(m, diags);
  const ast::FunctionDef* fn = scope.function(name);
  if (!fn || !fn->is_kernel()) {
    std::string kernels;
    for (const auto& f : m.functions) {
      if (f.is_kernel()) kernels += (kernels.empty() ? "" : ", ") + f.name;
    }
    throw ArgumentError(fmt::format("no kernel named '{}' in {} (kernels: {})", name,
                                    m.file ? m.file->path() : "module",
                                    kernels.empty() ? "none" : kernels));
  }
  auto sig = sema::build_signature(scope, *fn);
  if (!sig) return std::nullopt;
  return sema::lower_kernel_in(scope, *fn, *sig, binding);
}

}  // namespace kdsl

// Module scope, constants and kernel headers (signatures).
#include <fmt/format.h>

#include <algorithm>

#include "numeric.h"
#include "sema_internal.h"

namespace kdsl::sema {

std::optional<std::vector<DType>> dtype_set(const std::string& name) {
  using D = DType;
  if (name == "float") return std::vector<DType>{D::f16, D::bf16, D::f32, D::f64};
  if (name == "half") return std::vector<DType>{D::f16, D::bf16};
  if (name == "real") return std::vector<DType>{D::f16, D::bf16, D::f32, D::f64, D::i32, D::i64};
  if (name == "complex") return std::vector<DType>{D::c64};
  if (auto t = parse_dtype(name)) return std::vector<DType>{*t};
  return std::nullopt;
}

ModuleScope::ModuleScope(const ast::Module& m, Diagnostics& diags) : module_(m), diags_(&diags) {
  // Names are registered in source order, so a second definition is the one reported.
  struct Def {
    const std::string* name;
    SourceLoc loc;
    const ast::FunctionDef* fn;
    const ast::ConstDef* c;
  };
  std::vector<Def> defs;
  for (const auto& f : m.functions) defs.push_back({&f.name, f.loc, &f, nullptr});
  for (const auto& c : m.constants) defs.push_back({&c.name, c.loc, nullptr, &c});
  std::stable_sort(defs.begin(), defs.end(),
                   [](const Def& a, const Def& b) { return a.loc.offset < b.loc.offset; });
  std::map<std::string, SourceLoc> first;
  for (const Def& d : defs) {
    auto [it, fresh] = first.insert({*d.name, d.loc});
    if (!fresh) {
      diags_->error(d.loc,
                    fmt::format("'{}' is defined twice in this module (first at line {})", *d.name,
                                it->second.line),
                    static_cast<uint32_t>(d.name->size()));
      continue;
    }
    if (d.fn) functions_[*d.name] = d.fn;
    if (d.c) constants_[*d.name] = d.c;
  }
}

const ast::FunctionDef* ModuleScope::function(const std::string& name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : it->second;
}

std::vector<std::string> ModuleScope::names() const {
  std::vector<std::string> out;
  for (const auto& [n, f] : functions_) {
    if (!f->is_kernel()) out.push_back(n);
  }
  for (const auto& [n, c] : constants_) out.push_back(n);
  for (auto& b : builtin_names()) out.push_back(b);
  for (const char* c : {"inf", "nan", "pi", "f16", "bf16", "f32", "f64", "i32", "i64", "c64"}) {
    out.push_back(c);
  }
  return out;
}

bool ModuleScope::first_report(const SourceLoc& loc, const std::string& msg) {
  return reported_.insert({loc.offset, msg}).second;
}

std::string ModuleScope::typo_hint(const SourceLoc& loc, const std::string& name,
                                   const std::function<std::vector<std::string>()>& candidates) {
  auto it = typo_hints_.find(loc.offset);
  if (it != typo_hints_.end()) return it->second;
  if (typo_hints_.size() >= kTypoHintLimit) return "";
  std::string near = closest_name(name, candidates());
  std::string hint = near.empty() ? "" : fmt::format("did you mean '{}'?", near);
  typo_hints_.emplace(loc.offset, hint);
  return hint;
}

std::optional<ConstValue> ModuleScope::constant(const std::string& name) {
  auto done = evaluated_.find(name);
  if (done != evaluated_.end()) return done->second;
  const ast::ConstDef* def = constants_.at(name);
  auto cycle = std::find(evaluating_.begin(), evaluating_.end(), name);
  if (cycle != evaluating_.end()) {
    std::string chain;
    for (auto it = cycle; it != evaluating_.end(); ++it) chain += *it + " -> ";
    chain += name;
    diags_->error(
        def->loc,
        cycle + 1 == evaluating_.end()
            ? fmt::format("constant '{}' is defined in terms of itself", name)
            : fmt::format("constant '{}' is defined in terms of itself ({})", name, chain),
        static_cast<uint32_t>(name.size()));
    evaluated_[name] = std::nullopt;
    return std::nullopt;
  }
  evaluating_.push_back(name);
  std::optional<ConstValue> v = eval_constant_expr(*this, *def->value);
  if (v && def->annotation) {
    const ast::Expr& a = *def->annotation;
    std::optional<DType> t;
    if (a.kind == ast::ExprKind::name) t = parse_dtype(a.name);
    if (!t) {
      diags_->error(a.loc, "a constant's type must be a dtype such as f32 or i32", a.span());
      v = std::nullopt;
    } else if (*t == DType::b8 && v->dtype != DType::b8) {
      // SPEC section 6.2: no number adapts to bool (as for a bool parameter's default).
      diags_
          ->error(def->value->loc,
                  fmt::format(
                      "constant '{}' is declared bool but its value is {}", name,
                      v->dtype ? fmt::format("of dtype {}", dtype_name(*v->dtype)) : "a number"),
                  def->value->span())
          .hint = "write True or False";
      v = std::nullopt;
    } else if (is_int(*t) && !v->is_int) {
      diags_->error(def->value->loc,
                    fmt::format("constant '{}' is declared {} but its value is not an integer",
                                name, dtype_name(*t)),
                    def->value->span());
      v = std::nullopt;
    } else if (is_int(*t) && !fits_int(*t, v->value)) {
      diags_->error(def->value->loc,
                    fmt::format("constant '{}' is declared {} but its value {}", name,
                                dtype_name(*t), int_misfit(*t, v->value)),
                    def->value->span());
      v = std::nullopt;
    } else {
      v->dtype = *t;
      v->value = round_to(*t, v->value);
    }
  }
  evaluating_.pop_back();
  if (evaluated_.count(name)) return std::nullopt;  // part of a cycle, already reported
  evaluated_[name] = v;
  return v;
}

std::optional<ConstValue> eval_constant_expr(ModuleScope& scope, const ast::Expr& e) {
  Lowerer low(scope, nullptr, nullptr);
  size_t errors = scope.diags().error_count();
  Value v = low.expr(e);
  if (v.is_error() || scope.diags().error_count() != errors) return std::nullopt;
  if (v.kind == Value::Kind::weak) return ConstValue{v.num, v.is_int, std::nullopt};
  bool div_by_zero = false;
  if (v.kind == Value::Kind::node && v.type.dtype != DType::c64) {
    // Typed: an annotated constant, a cast or a bool in the expression.
    if (auto x = low.fold(v.id, &div_by_zero)) {
      DType t = v.type.dtype;
      if (is_int(t) && !fits_int(t, *x)) {  // i32 or i64 arithmetic that overflows
        scope.diags().error(
            e.loc, "this constant expression is out of range: the number " + int_misfit(t, *x),
            e.span());
        return std::nullopt;
      }
      return ConstValue{round_to(t, *x), is_int(t) || t == DType::b8, t};
    }
  }
  scope.diags().error(e.loc,
                      div_by_zero ? "division by zero in a constant expression"
                                  : "expected a constant expression (numbers, constants, "
                                    "arithmetic and math functions)",
                      e.span());
  return std::nullopt;
}

std::string c64_scalar_message(const std::string& param) {
  return fmt::format("scalar parameter '{}' is c64: scalars of dtype c64 are not supported", param);
}

namespace {

struct HeaderBuilder {
  ModuleScope& scope;
  const ast::FunctionDef& fn;
  KernelSignature sig;
  bool ok = true;

  Diagnostics& diags() { return scope.diags(); }
  void error(const ast::Expr& at, const std::string& msg, const std::string& hint = "") {
    diags().error(at.loc, msg, at.span()).hint = hint;
    ok = false;
  }

  int generic_index(const std::string& name) const {
    for (size_t i = 0; i < sig.generics.size(); ++i) {
      if (sig.generics[i].name == name) return static_cast<int>(i);
    }
    return -1;
  }

  void add_generic_constraint(const ast::Expr& c, std::vector<DType>* domain) {
    if (c.kind != ast::ExprKind::name) {
      error(c,
            "a generic's constraint is a dtype, a dtype set (float, half, real, complex) or a "
            "tuple of them");
      return;
    }
    auto set = dtype_set(c.name);
    if (!set) {
      error(c, fmt::format("unknown dtype or dtype set '{}'", c.name),
            "dtypes: f16, bf16, f32, f64, i32, i64, bool, c64; sets: float, half, real, complex");
      return;
    }
    for (DType t : *set) {
      if (std::find(domain->begin(), domain->end(), t) == domain->end()) domain->push_back(t);
    }
  }

  void generics() {
    for (const ast::Generic& g : fn.generics) {
      GenericInfo info{g.name, {}, g.loc};
      if (generic_index(g.name) >= 0 || parse_dtype(g.name)) {
        diags().error(g.loc, fmt::format("generic '{}' is already a dtype or generic name", g.name),
                      static_cast<uint32_t>(g.name.size()));
        ok = false;
        continue;
      }
      if (!g.constraint) {
        info.domain = *dtype_set("float");
      } else if (g.constraint->kind == ast::ExprKind::tuple && g.constraint->args.empty()) {
        error(*g.constraint, fmt::format("generic '{}' has no dtypes", g.name),
              fmt::format("list at least one, e.g. {}: (f32, bf16)", g.name));
        ok = false;
        info.domain = *dtype_set("float");  // checked on as the default, without follow-on errors
      } else if (g.constraint->kind == ast::ExprKind::tuple) {
        for (const auto& c : g.constraint->args) add_generic_constraint(*c, &info.domain);
      } else {
        add_generic_constraint(*g.constraint, &info.domain);
      }
      sig.generics.push_back(std::move(info));
    }
  }

  // Resolves a dtype annotation: a dtype name or a generic of this kernel.
  bool dtype_ref(const ast::Expr& e, SignatureParam* p) {
    if (e.kind == ast::ExprKind::name) {
      if (auto t = parse_dtype(e.name)) {
        p->dtype = *t;
        return true;
      }
      int g = generic_index(e.name);
      if (g >= 0) {
        p->generic = g;
        return true;
      }
    }
    std::vector<std::string> names = {"f16", "bf16", "f32", "f64", "i32", "i64", "bool", "c64"};
    for (const auto& g : sig.generics) names.push_back(g.name);
    std::string hint;
    if (e.kind == ast::ExprKind::name) {
      std::string near = closest_name(e.name, names);
      if (!near.empty()) hint = fmt::format("did you mean '{}'?", near);
    }
    error(e,
          "expected a dtype (f16, bf16, f32, f64, i32, i64, bool, c64) or a generic of this "
          "kernel",
          hint);
    return false;
  }

  int32_t symbol(const std::string& name, SourceLoc loc) {
    for (size_t i = 0; i < sig.symbols.size(); ++i) {
      if (sig.symbols[i].name == name) return static_cast<int32_t>(i);
    }
    sig.symbols.push_back(ir::Symbol{name, false, std::nullopt, loc});
    return static_cast<int32_t>(sig.symbols.size() - 1);
  }

  bool shape(const ast::Expr& e, SignatureParam* p) {
    if (e.kind != ast::ExprKind::tuple) {
      error(e, "a tensor's shape is a tuple of shape symbols or sizes",
            e.kind == ast::ExprKind::name ? fmt::format("write ({},) for one axis", e.name) : "");
      return false;
    }
    if (e.args.empty()) {
      error(e, "a tensor needs at least one axis (use a scalar parameter for a single value)");
      return false;
    }
    if (e.args.size() > 8) {
      error(e, "a tensor has at most 8 axes");
      return false;
    }
    for (const auto& a : e.args) {
      if (a->kind == ast::ExprKind::name && !parse_dtype(a->name) && generic_index(a->name) < 0) {
        p->shape.push_back(ir::Extent{symbol(a->name, a->loc), 0});
      } else if (a->kind == ast::ExprKind::int_lit && a->int_value > 0) {
        p->shape.push_back(ir::Extent{-1, a->int_value});
      } else {
        error(*a, "a shape entry is a shape symbol (a name such as N) or a positive integer");
        return false;
      }
    }
    return true;
  }

  bool tensor_annotation(const ast::Expr& a, SignatureParam* p) {
    const std::string& kind = a.args[0]->name;
    p->role = kind == "Tensor" ? ir::Role::in : kind == "Out" ? ir::Role::out : ir::Role::inout;
    if (a.args.size() != 3) {
      error(a, fmt::format("{} takes a dtype and a shape: {}[f32, (M, N)]", kind, kind));
      return false;
    }
    return dtype_ref(*a.args[1], p) && shape(*a.args[2], p);
  }

  void scalar_default(const ast::Param& ap, SignatureParam* p) {
    if (!ap.default_value) return;
    auto v = eval_constant_expr(scope, *ap.default_value);
    if (!v) {
      ok = false;
      return;
    }
    if (p->generic < 0 && p->dtype == DType::b8 && v->dtype != DType::b8) {
      // SPEC section 6.2: no number adapts to bool.
      error(*ap.default_value,
            fmt::format(
                "the default of '{}' must be a bool, not {}", ap.name,
                v->dtype ? fmt::format("a value of dtype {}", dtype_name(*v->dtype)) : "a number"),
            "write True or False");
      return;
    }
    if (p->generic < 0 && is_int(p->dtype) && !v->is_int) {
      error(*ap.default_value, fmt::format("the default of '{}' must be an integer ({})", ap.name,
                                           dtype_name(p->dtype)));
      return;
    }
    if (p->generic < 0 && is_int(p->dtype) && !fits_int(p->dtype, v->value)) {
      error(*ap.default_value, fmt::format("the default of '{}' is out of range: the number {}",
                                           ap.name, int_misfit(p->dtype, v->value)));
      return;
    }
    p->default_value = p->generic < 0 ? round_to(p->dtype, v->value) : v->value;
  }

  void param(const ast::Param& ap) {
    SignatureParam p;
    p.name = ap.name;
    p.loc = ap.loc;
    p.keyword_only = ap.keyword_only;
    for (const auto& q : sig.params) {
      if (q.name == ap.name) {
        diags().error(ap.loc, fmt::format("duplicate parameter '{}'", ap.name),
                      static_cast<uint32_t>(ap.name.size()));
        ok = false;
        return;
      }
    }
    if (const char* what = reserved_name(scope, ap.name)) {
      diags().error(ap.loc, fmt::format("parameter '{}' cannot take the name of {}", ap.name, what),
                    static_cast<uint32_t>(ap.name.size()));
      ok = false;
      return;
    }
    if (!ap.annotation) {
      diags().error(ap.loc,
                    fmt::format("kernel parameter '{}' needs a type: Tensor[...], Out[...], "
                                "InOut[...] or a dtype such as f32",
                                ap.name),
                    static_cast<uint32_t>(ap.name.size()));
      ok = false;
      return;
    }
    const ast::Expr& a = *ap.annotation;
    bool is_tensor_type =
        a.kind == ast::ExprKind::subscript && a.args[0]->kind == ast::ExprKind::name &&
        (a.args[0]->name == "Tensor" || a.args[0]->name == "Out" || a.args[0]->name == "InOut");
    if (is_tensor_type) {
      if (!tensor_annotation(a, &p)) return;
      if (ap.default_value) {
        error(*ap.default_value, "tensor parameters cannot have default values");
        return;
      }
    } else {
      p.is_tensor = false;
      if (!dtype_ref(a, &p)) return;
      if (p.generic < 0 && p.dtype == DType::c64) {
        error(a, c64_scalar_message(ap.name), c64_scalar_hint);
        return;
      }
      scalar_default(ap, &p);
    }
    sig.params.push_back(std::move(p));
  }

  void check_generics_inferable() {
    for (size_t g = 0; g < sig.generics.size(); ++g) {
      bool used = false;
      for (const auto& p : sig.params) used |= p.is_tensor && p.generic == static_cast<int>(g);
      if (!used) {
        auto& d = diags().error(sig.generics[g].loc,
                                fmt::format("generic '{}' is not the dtype of any tensor "
                                            "parameter, so a launch cannot infer it",
                                            sig.generics[g].name),
                                static_cast<uint32_t>(sig.generics[g].name.size()));
        d.hint = "make it the dtype of a tensor parameter, or use a fixed dtype such as f32";
        ok = false;
      }
    }
  }

  const ast::Stmt* find_loop() {
    for (const auto& s : fn.body) {
      if (is_parallel_loop(*s)) return s.get();
    }
    return nullptr;
  }

  void loop() {
    const ast::Stmt* s = find_loop();
    if (!s) {
      ok = false;
      // A loop over something else (range(M), say) is the mistake to report, at that loop.
      for (const auto& other : fn.body) {
        if (other->kind == ast::StmtKind::for_) {
          report_non_parallel_for(diags(), *other);
          return;
        }
      }
      diags().error(fn.loc,
                    fmt::format("kernel '{}' has no parallel loop; its body needs "
                                "`for i in parallel(M):` over the independent indices",
                                fn.name),
                    static_cast<uint32_t>(fn.name.size()));
      return;
    }
    const ast::Expr& call = *s->value;
    if (call.args.size() - 1 != s->targets.size()) {
      size_t extents = call.args.size() - 1, vars = s->targets.size();
      error(call,
            fmt::format("parallel() has {} extent{} but the loop has {} variable{}", extents,
                        extents == 1 ? "" : "s", vars, vars == 1 ? "" : "s"),
            "give one extent (a shape symbol) per loop variable");
      return;
    }
    if (!call.keywords.empty()) {
      diags().error(call.keywords[0].loc, "parallel() takes no keyword arguments",
                    static_cast<uint32_t>(call.keywords[0].name.size()));
      ok = false;
      return;
    }
    for (size_t i = 1; i < call.args.size(); ++i) {
      const ast::Expr& ext = *call.args[i];
      int32_t sym = -1;
      for (size_t k = 0; ext.kind == ast::ExprKind::name && k < sig.symbols.size(); ++k) {
        if (sig.symbols[k].name == ext.name) sym = static_cast<int32_t>(k);
      }
      if (sym < 0) {
        error(ext, "the extents of parallel() are shape symbols of the tensor parameters");
        return;
      }
      const ast::Expr& var = *s->targets[i - 1];
      if (std::find(sig.loop_vars.begin(), sig.loop_vars.end(), var.name) != sig.loop_vars.end()) {
        error(var, fmt::format("loop variable '{}' is given twice", var.name),
              "give each loop variable its own name, e.g. for b, d in parallel(B, D)");
        return;
      }
      sig.loop_vars.push_back(var.name);
      sig.loop_extents.push_back(sym);
    }
    find_vector_axis(s->body);
  }

  // The vector axis is the symbol of the first `:` in a view of a tensor parameter (or of a bare
  // 1-D tensor whose axis is not a loop extent). Conflicts are reported while lowering.
  void scan_expr(const ast::Expr& e) {
    if (sig.vector_symbol >= 0) return;
    if (e.kind == ast::ExprKind::subscript && e.args[0]->kind == ast::ExprKind::name) {
      const SignatureParam* t = tensor(e.args[0]->name);
      for (size_t i = 1; t && i < e.args.size() && i - 1 < t->shape.size(); ++i) {
        if (e.args[i]->kind == ast::ExprKind::slice && t->shape[i - 1].symbol >= 0) {
          sig.vector_symbol = t->shape[i - 1].symbol;
          return;
        }
      }
    }
    for (const auto& a : e.args) {
      if (a) scan_expr(*a);
    }
    for (const auto& k : e.keywords) {
      if (k.value) scan_expr(*k.value);
    }
  }

  void scan_bare(const ast::Expr& e) {
    if (sig.vector_symbol >= 0) return;
    if (e.kind == ast::ExprKind::name) {
      const SignatureParam* t = tensor(e.name);
      if (t && t->shape.size() == 1 && t->shape[0].symbol >= 0 &&
          std::find(sig.loop_extents.begin(), sig.loop_extents.end(), t->shape[0].symbol) ==
              sig.loop_extents.end()) {
        sig.vector_symbol = t->shape[0].symbol;
      }
      return;
    }
    for (const auto& a : e.args) {
      if (a) scan_bare(*a);
    }
    for (const auto& k : e.keywords) {
      if (k.value) scan_bare(*k.value);
    }
  }

  template <typename F>
  void walk(const std::vector<ast::StmtPtr>& body, F&& f) {
    for (const auto& s : body) {
      for (const auto& t : s->targets) f(*t);
      if (s->value) f(*s->value);
      walk(s->body, f);
      walk(s->orelse, f);
    }
  }

  void find_vector_axis(const std::vector<ast::StmtPtr>& body) {
    walk(body, [&](const ast::Expr& e) { scan_expr(e); });
    walk(body, [&](const ast::Expr& e) { scan_bare(e); });
    if (sig.vector_symbol >= 0) sig.symbols[sig.vector_symbol].specialized = true;
  }

  const SignatureParam* tensor(const std::string& name) const {
    for (const auto& p : sig.params) {
      if (p.is_tensor && p.name == name) return &p;
    }
    return nullptr;
  }

  // The runtime's fixed-size argument tables (kMaxKernelParams and the others, sema.h): each
  // limit a kernel exceeds is an error at its name.
  void check_limits() {
    auto limit = [&](size_t count, int most, const char* what, const char* hint) {
      if (count <= static_cast<size_t>(most)) return;
      diags()
          .error(fn.loc,
                 fmt::format("kernel '{}' has {} {}; a kernel may have at most {}", fn.name, count,
                             what, most),
                 static_cast<uint32_t>(fn.name.size()))
          .hint = hint;
      ok = false;
    };
    limit(sig.params.size(), kMaxKernelParams, "parameters (tensors and scalars)",
          "stack tensors of one shape along a new axis, or split the kernel");
    limit(sig.symbols.size(), kMaxKernelSymbols, "shape symbols",
          "axes of equal size can share a symbol");
    limit(sig.generics.size(), kMaxKernelGenerics, "generics",
          "tensors of one dtype can share a generic");
  }

  void decorators() {
    bool marked = false;
    for (const auto& d : fn.decorators) {
      const ast::Expr& e = *d;
      if (e.kind == ast::ExprKind::name && e.name == "kernel") {
        if (marked) error(e, "@kernel is given twice");
        marked = true;
        continue;
      }
      if (e.kind == ast::ExprKind::call && e.args[0]->kind == ast::ExprKind::name &&
          e.args[0]->name == "kernel") {
        error(e, "@kernel takes no arguments");
        continue;
      }
      error(e, "unknown decorator; kernels are marked @kernel and helpers have no decorator");
    }
  }
};

}  // namespace

std::optional<KernelSignature> build_signature(ModuleScope& scope, const ast::FunctionDef& fn) {
  HeaderBuilder h{scope, fn, {}};
  h.sig.name = fn.name;
  h.sig.docstring = fn.docstring;
  h.sig.loc = fn.loc;
  h.decorators();
  h.generics();
  for (const ast::Param& p : fn.params) h.param(p);
  if (fn.returns) h.error(*fn.returns, "kernels return results through Out[...] parameters");
  if (!h.ok) return std::nullopt;
  h.check_limits();
  h.check_generics_inferable();
  h.loop();
  if (!h.ok) return std::nullopt;
  return std::move(h.sig);
}

}  // namespace kdsl::sema

namespace kdsl {

std::vector<KernelSignature> kernel_signatures(const ast::Module& m, Diagnostics& diags) {
  sema::ModuleScope scope(m, diags);
  std::vector<KernelSignature> out;
  for (const auto& f : m.functions) {
    if (!f.is_kernel()) continue;
    if (auto sig = sema::build_signature(scope, f)) out.push_back(std::move(*sig));
  }
  return out;
}

}  // namespace kdsl

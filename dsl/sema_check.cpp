// check_module: every constant, every kernel under every dtype binding, and the names of every
// helper, with the diagnostics of a module merged, deduplicated and in source order.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "sema_internal.h"

namespace kdsl {
namespace {

// A diagnostic's place and message: the same error found again (for another kernel or binding)
// has the same key.
using DiagnosticKey = std::tuple<const SourceFile*, uint32_t, std::string>;
DiagnosticKey key_of(const Diagnostic& d) {
  return {d.loc.file, d.loc.offset, d.message};
}

// The diagnostics of a module, each place and message once, in the order first reported.
class UniqueDiagnostics {
 public:
  void add(const Diagnostic& d) {
    if (keys_.insert(key_of(d)).second) list_.push_back(d);
  }
  std::vector<Diagnostic>& list() { return list_; }

 private:
  std::set<DiagnosticKey> keys_;
  std::vector<Diagnostic> list_;
};

// Every binding in the product of the generics' domains.
std::vector<std::vector<DType>> all_bindings(const KernelSignature& sig) {
  std::vector<std::vector<DType>> bindings = {{}};
  for (const auto& g : sig.generics) {
    std::vector<std::vector<DType>> next;
    for (const auto& b : bindings) {
      for (DType t : g.domain) {
        next.push_back(b);
        next.back().push_back(t);
      }
    }
    bindings = std::move(next);
  }
  return bindings;
}

// The diagnostics of kernel `f` under every binding of its generics. A diagnostic found under
// some bindings only says under which: "(with T = f16)". `scope` is the module's, shared by every
// kernel; what it reports goes to the Diagnostics of the header or of the binding at hand.
void check_kernel(sema::ModuleScope& scope, const ast::FunctionDef& f, UniqueDiagnostics& out) {
  Diagnostics header;
  Diagnostics* const module_level = scope.report_to(&header);
  auto sig = sema::build_signature(scope, f);
  for (const auto& d : header.all()) out.add(d);
  if (!sig) {
    scope.report_to(module_level);
    return;
  }
  struct Seen {
    Diagnostic d;
    std::vector<std::string> bindings;
  };
  auto bindings = all_bindings(*sig);
  std::vector<Seen> seen;
  std::map<DiagnosticKey, size_t> index;  // into seen
  for (const auto& b : bindings) {
    Diagnostics local;
    scope.report_to(&local);
    sema::lower_kernel_in(scope, f, *sig, b);
    std::string label;
    for (size_t g = 0; g < b.size(); ++g) {
      label += fmt::format("{}{} = {}", g ? ", " : "", sig->generics[g].name, dtype_name(b[g]));
    }
    for (const auto& d : local.all()) {
      auto [it, fresh] = index.emplace(key_of(d), seen.size());
      if (fresh) {
        seen.push_back({d, {label}});
      } else {
        seen[it->second].bindings.push_back(label);
      }
    }
  }
  scope.report_to(module_level);
  for (auto& s : seen) {
    if (s.bindings.size() < bindings.size() && !s.bindings[0].empty()) {
      std::string which;
      for (const auto& l : s.bindings) which += (which.empty() ? "" : "; ") + l;
      s.d.message += fmt::format(" (with {})", which);
    }
    out.add(s.d);
  }
}

// Names a helper's body may use without defining them.
bool predefined(const std::string& n) {
  static const std::set<std::string> names = {"inf", "nan", "pi"};
  return names.count(n) || sema::is_builtin(n) || parse_dtype(n).has_value();
}

// Helpers are typed only where they are called (their parameters take the arguments' types), so a
// helper no kernel calls would go unchecked. This pass checks what needs no types: decorators
// (helpers have none), and the names that no call could resolve (neither a parameter, a local, a
// module-level name nor a built-in). An unknown name's hint offers only the names visible at that
// point, as when the helper is inlined (Lowerer::visible_names).
class HelperNames {
 public:
  HelperNames(sema::ModuleScope& scope, const ast::FunctionDef& fn, Diagnostics& diags)
      : scope_(scope), diags_(diags) {
    for (const auto& d : fn.decorators) {
      diags_.error(d->loc,
                   "unknown decorator; kernels are marked @kernel and helpers have no decorator",
                   d->span());
    }
    for (const auto& p : fn.params) {
      defined_.insert(p.name);
      if (const char* what = sema::reserved_name(scope_, p.name)) {
        diags_.error(p.loc, fmt::format("parameter '{}' cannot take the name of {}", p.name, what),
                     static_cast<uint32_t>(p.name.size()));
      }
    }
    collect(fn.body);
    // A default is a constant expression: it sees no parameter or local.
    for (const auto& p : fn.params) {
      if (p.default_value) use(*p.default_value, {});
    }
    std::set<std::string> visible;
    for (const auto& p : fn.params) visible.insert(p.name);
    uses(fn.body, &visible);
  }

 private:
  // Adds the names that assignment target `t` binds to `names`.
  static void bind(const ast::Expr& t, std::set<std::string>* names) {
    if (t.kind == ast::ExprKind::name) names->insert(t.name);
    if (t.kind == ast::ExprKind::tuple) {
      for (const auto& a : t.args) bind(*a, names);
    }
  }

  void target(const ast::Expr& t) { bind(t, &defined_); }

  // A for loop in a helper is an error of its own (reported when the helper is lowered); the
  // names in it are not checked.
  void collect(const std::vector<ast::StmtPtr>& body) {
    for (const auto& s : body) {
      if (s->kind == ast::StmtKind::for_) continue;
      if (s->kind == ast::StmtKind::assign) {
        for (const auto& t : s->targets) target(*t);
      }
      collect(s->body);
      collect(s->orelse);
    }
  }

  // Checks the names `body` uses, in order. `visible` holds the parameters and the locals
  // assigned so far, and gets those `body` assigns: after an if, those of either branch (as the
  // Lowerer merges the branches' locals).
  void uses(const std::vector<ast::StmtPtr>& body, std::set<std::string>* visible) {
    for (const auto& s : body) {
      if (s->kind == ast::StmtKind::for_) continue;
      for (const auto& t : s->targets) {
        if (t->kind != ast::ExprKind::name) use(*t, *visible);
      }
      if (s->kind == ast::StmtKind::aug_assign && s->targets[0]->kind == ast::ExprKind::name) {
        use(*s->targets[0], *visible);
      }
      if (s->value) use(*s->value, *visible);
      if (s->kind == ast::StmtKind::if_) {
        std::set<std::string> then_visible = *visible;
        uses(s->body, &then_visible);
        uses(s->orelse, visible);
        visible->insert(then_visible.begin(), then_visible.end());
      }
      if (s->kind == ast::StmtKind::assign) {
        for (const auto& t : s->targets) bind(*t, visible);
      }
    }
  }

  void use(const ast::Expr& e, const std::set<std::string>& visible) {
    if (e.kind == ast::ExprKind::name) {
      const std::string& n = e.name;
      if (defined_.count(n) || scope_.has_constant(n) || scope_.function(n) || predefined(n)) {
        return;
      }
      diags_.error(e.loc, fmt::format("unknown name '{}'", n), e.span()).hint =
          scope_.typo_hint(e.loc, n, [&] {
            std::vector<std::string> candidates = scope_.names();
            candidates.insert(candidates.end(), visible.begin(), visible.end());
            return candidates;
          });
      return;
    }
    for (const auto& a : e.args) {
      if (a) use(*a, visible);
    }
    for (const auto& k : e.keywords) {
      if (k.value) use(*k.value, visible);
    }
  }

  sema::ModuleScope& scope_;
  Diagnostics& diags_;
  std::set<std::string> defined_;
};

}  // namespace

void check_module(const ast::Module& m, Diagnostics& diags) {
  UniqueDiagnostics unique;
  // One scope for the module: its names are registered and its constants evaluated once (with
  // their errors), not again for each kernel.
  Diagnostics module_level;
  sema::ModuleScope scope(m, module_level);
  for (const auto& c : m.constants) {
    if (scope.has_constant(c.name)) scope.constant(c.name);
  }
  std::vector<const ast::FunctionDef*> kernels;  // each name's first definition
  for (const auto& f : m.functions) {
    if (scope.function(f.name) != &f) continue;  // defined twice: reported by the scope
    if (f.is_kernel()) {
      kernels.push_back(&f);
    } else {
      HelperNames(scope, f, module_level);
    }
  }
  for (const auto& d : module_level.all()) unique.add(d);
  for (const ast::FunctionDef* f : kernels) check_kernel(scope, *f, unique);
  std::vector<Diagnostic>& out = unique.list();
  // In source order; a note stays right after the diagnostic it was reported after (the call
  // that inlined a helper follows the error in the helper's body).
  std::vector<std::vector<Diagnostic>> groups;
  for (auto& d : out) {
    if (d.severity == Severity::note && !groups.empty()) {
      groups.back().push_back(std::move(d));
    } else {
      groups.push_back({std::move(d)});
    }
  }
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a.front().loc.offset < b.front().loc.offset;
  });
  out.clear();
  for (auto& g : groups) {
    for (auto& d : g) out.push_back(std::move(d));
  }
  for (auto& d : out) diags.append(std::move(d));
}

}  // namespace kdsl

// Internal to sema: values during lowering, the module scope and the lowering context.
// Split over sema_scope.cpp (names, constants, kernel headers), sema_expr.cpp (expressions and
// built-ins) and sema_stmt.cpp (statements, stores, helpers, whole kernels).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ast.h"
#include "diagnostics.h"
#include "ir.h"
#include "sema.h"

namespace kdsl::sema {

/// A value during lowering. Most are IR nodes; the rest exist only at compile time.
struct Value {
  enum class Kind : uint8_t {
    error,      // an error was already reported; operations on it stay silent
    node,       // an IR node (id, type)
    weak,       // an untyped number (literal or unannotated constant); adapts to the other operand
    tuple,      // elems
    tensor,     // a tensor parameter (index); usable bare as a vector when 1-D over the vector axis
    loopvar,    // a parallel loop variable (index)
    helper,     // a helper function (fn)
    dtype,      // a dtype or bound generic, usable as a cast (dtype)
    undefined,  // a local assigned on only one path of an if (where = the if)
  };
  Kind kind = Kind::error;
  ir::ValueId id = -1;
  ir::Type type;
  double num = 0;
  bool is_int = false;
  std::vector<Value> elems;
  int32_t index = -1;
  const ast::FunctionDef* fn = nullptr;
  DType dtype = DType::f32;
  SourceLoc where;

  static Value error() { return {}; }
  static Value of(ir::ValueId id, ir::Type t) {
    Value v;
    v.kind = Kind::node;
    v.id = id;
    v.type = t;
    return v;
  }
  static Value weak(double num, bool is_int) {
    Value v;
    v.kind = Kind::weak;
    v.num = is_int ? num + 0.0 : num;  // an integer has no -0: -0 is 0 (SPEC 6.2)
    v.is_int = is_int;
    return v;
  }
  bool is_error() const { return kind == Kind::error; }
  bool is_vector() const { return kind == Kind::node && type.form == ir::Form::vector; }
  bool same_as(const Value& o) const;
};

/// A module-level constant after evaluation.
struct ConstValue {
  double value = 0;
  bool is_int = false;
  std::optional<DType> dtype;  // set for annotated constants (`EPS: f32 = 1e-6`)
};

/// Whether `v`, an integer-valued number computed at compile time, is a value of integer dtype
/// `t` (i32 or i64): finite and within t's range.
bool fits_int(DType t, double v);
/// Why `v` is not a value of integer dtype `t`, to follow "the number ": "3000000000 does not fit
/// i32 (from -2147483648 to 2147483647)", or, when v is inf or NaN, that it overflowed float64.
/// Before: !fits_int(t, v).
std::string int_misfit(DType t, double v);

/// The built-in functions (exp, sum, where, parallel, ...): their names are not looked up in
/// scopes.
bool is_builtin(const std::string& name);
class ModuleScope;
/// What `name` already names at module level, as "a module constant", "a function" (a helper,
/// not a kernel), "a dtype", "a built-in function" or "a built-in constant" (inf, nan, pi);
/// nullptr when nothing. Locals and parameters cannot take such a name (SPEC 12.2).
const char* reserved_name(const ModuleScope& scope, const std::string& name);
std::vector<std::string> builtin_names();

/// Named dtype sets usable as generic constraints: float, half, real, complex.
std::optional<std::vector<DType>> dtype_set(const std::string& name);

/// Module-level names: helpers, kernels and constants (evaluated on first use, cycles reported).
class ModuleScope {
 public:
  ModuleScope(const ast::Module& m, Diagnostics& diags);

  const ast::Module& module() const { return module_; }
  Diagnostics& diags() { return *diags_; }
  /// Sends what is reported through this scope from now on to `to`; returns where it went before.
  /// check_module keeps one scope for a whole module (its constants evaluated and its names
  /// registered once) and gives each kernel and binding its own Diagnostics.
  Diagnostics* report_to(Diagnostics* to) { return std::exchange(diags_, to); }
  const ast::FunctionDef* function(const std::string& name) const;
  bool has_constant(const std::string& name) const { return constants_.count(name) > 0; }
  /// The value of constant `name`; nullopt (error reported once) when it cannot be evaluated.
  std::optional<ConstValue> constant(const std::string& name);
  /// The names visible everywhere in the module, for did-you-mean hints: its constants and
  /// helpers (not its kernels, which no code can call), the built-in functions and constants and
  /// the dtypes. Code sees more where it is: parameters and locals (and, in a kernel, its tensors,
  /// shape symbols, generics and loop variables).
  std::vector<std::string> names() const;
  /// True the first time a given (location, message) is reported through it: module-level
  /// errors found while lowering several kernels are reported once.
  bool first_report(const SourceLoc& loc, const std::string& msg);
  /// The hint for the unknown name `name` at `loc`: "did you mean 'X'?" with X the closest of the
  /// names `candidates()` gives, or "" when none is close. Each search looks through every
  /// visible name, so, as clang's -fspell-checking-limit does, only the first kTypoHintLimit
  /// places of a module get one: a module with many unknown names is checked in linear time. A
  /// place asked again (under another binding) gets the same answer.
  std::string typo_hint(const SourceLoc& loc, const std::string& name,
                        const std::function<std::vector<std::string>()>& candidates);
  static constexpr size_t kTypoHintLimit = 100;

 private:
  const ast::Module& module_;
  Diagnostics* diags_;
  std::map<std::string, const ast::FunctionDef*> functions_;
  std::map<std::string, const ast::ConstDef*> constants_;
  std::map<std::string, std::optional<ConstValue>> evaluated_;
  std::vector<std::string> evaluating_;  // constants being evaluated, outermost first
  std::set<std::pair<uint32_t, std::string>> reported_;
  std::map<uint32_t, std::string> typo_hints_;  // by file offset
};

/// The error for a scalar parameter of dtype c64 (written so, or a generic bound to c64), and its
/// hint. A launch passes a scalar as one real number (kdsl::Arg, `kdsl run --arg`) and a default
/// cannot be complex, so such a parameter could only ever hold (x, 0).
std::string c64_scalar_message(const std::string& param);
inline constexpr const char* c64_scalar_hint =
    "pass the real and imaginary parts as two f32 scalars and build the value with c64(re, im)";

/// True when `s` is a `for ... in parallel(...)` loop.
bool is_parallel_loop(const ast::Stmt& s);
/// Reports `s`, a for loop over anything but parallel(...) (SPEC section 7.1), at its `for`.
void report_non_parallel_for(Diagnostics& diags, const ast::Stmt& s);

/// Builds the signature of a kernel's header (generics, parameters, shape symbols, vector axis).
/// Reports errors and returns nullopt when the header is malformed.
std::optional<KernelSignature> build_signature(ModuleScope& scope, const ast::FunctionDef& fn);

/// Appends IR nodes with common-subexpression elimination.
class Builder {
 public:
  explicit Builder(std::vector<ir::Node>* nodes) : nodes_(nodes) {}
  ir::ValueId add(ir::Node n);
  const ir::Node& node(ir::ValueId id) const { return (*nodes_)[static_cast<size_t>(id)]; }

 private:
  std::vector<ir::Node>* nodes_;
  std::unordered_map<std::string, ir::ValueId> seen_;
};

/// Pending value of one output view while the kernel body is lowered.
struct StoreState {
  enum class Kind : uint8_t { unset, written, accumulated };
  Kind kind = Kind::unset;
  Value value;  // written: the value; accumulated: the running sum (accumulator dtype)
  ir::StoreKind store = ir::StoreKind::write;
  SourceLoc loc;
};

struct StoreKey {
  int32_t tensor;
  ir::View view;
  bool operator<(const StoreKey& o) const;
};

/// Lowers one kernel (or, with no kernel, evaluates constant expressions).
class Lowerer {
 public:
  Lowerer(ModuleScope& scope, const KernelSignature* sig, ir::Kernel* kernel);

  // Expressions (sema_expr.cpp).
  Value expr(const ast::Expr& e);
  /// Converts a weak number to a node of dtype `t` (reporting a float literal used as integer).
  Value materialize(const Value& v, DType t, const ast::Expr* at);
  /// Converts a weak number to a node of its default dtype (f32, or i32 for integers).
  Value to_node(const Value& v, const ast::Expr* at);
  /// The value of node `id` when it depends on constants only (casts round, other operations are
  /// exact in float64, as in the interpreter); nullopt otherwise. Sets `*int_div_by_zero` when
  /// an integer // or % by zero is met.
  std::optional<double> fold(ir::ValueId id, bool* int_div_by_zero) const;
  Value constant(double v, DType t, ir::Form form = ir::Form::scalar);
  Value cast(const Value& v, DType t, const ast::Expr* at);
  /// where(c, a, b); `spelling` names it in a dtype mismatch ("if ... else" for a ? : b).
  Value select(const Value& c, const Value& a, const Value& b, const ast::Expr* at,
               const char* spelling = "where");
  /// a OP b at `at`; a message about an operand points at `lhs` or `rhs` when given, else at
  /// that operand of `at` (an operator or a call such as min(a, b)).
  Value binary(ir::BinaryFn fn, Value a, Value b, const ast::Expr& at, const char* spelling,
               const ast::Expr* lhs = nullptr, const ast::Expr* rhs = nullptr);

  // Statements (sema_stmt.cpp).
  void lower_kernel_body(const ast::FunctionDef& fn);
  void finish_stores(const ast::FunctionDef& fn);

  Diagnostics& diags() { return scope_.diags(); }
  ModuleScope& scope() { return scope_; }

 private:
  friend struct ExprRules;
  struct Frame {
    std::map<std::string, Value> locals;
    bool helper = false;
  };

  // Names.
  Value lookup(const ast::Expr& name);
  std::vector<std::string> visible_names() const;
  void bind(const std::string& name, Value v, const ast::Expr& at);

  // Expressions.
  Value subscript(const ast::Expr& e);
  Value view(const ast::Expr& e, int32_t tensor, ir::View* out_view);
  bool parse_view(const ast::Expr& e, int32_t tensor, ir::View* out);
  Value call(const ast::Expr& e);
  Value call_builtin(const std::string& name, const ast::Expr& e, std::vector<Value>& args);
  Value call_helper(const ast::FunctionDef& fn, const ast::Expr& e, std::vector<Value>& args);
  Value unary_math(ir::UnaryFn fn, const Value& a, const ast::Expr& at);
  // `at`: the reduced argument (where its errors point); `call`: the whole call (the node's place).
  Value reduce(ir::ReduceKind kind, const Value& a, const ast::Expr& at, const ast::Expr& call,
               const std::string& fname);
  Value compare(ir::CompareFn fn, Value a, Value b, const ast::Expr& at, const char* spelling);
  Value logical(ir::BinaryFn fn, Value a, Value b, const ast::Expr& at, const char* spelling);
  Value vector_of_tensor(int32_t tensor, const ast::Expr& at);
  // Scans, shift, first and last (sema_scan.cpp).
  Value scan_call(const std::string& name, const ast::Expr& e, std::vector<Value>& args);
  Value shift_call(const ast::Expr& e, std::vector<Value>& args);
  Value first_last(const std::string& name, const ast::Expr& e, std::vector<Value>& args);
  // `given` (optional): each value's dtype before the accumulator's widening (i32 -> i64).
  bool scan_values(const ast::Expr& at, Value v, bool builtin, std::vector<Value>* out,
                   std::vector<DType>* given = nullptr);
  bool scan_options(const std::string& name, const ast::Expr& e, size_t k, bool custom,
                    const std::vector<Value>& values, ir::Node* node);
  int32_t combine_region(const ast::FunctionDef& fn, const ast::Expr& e,
                         const std::vector<Value>& values, bool tuple);
  bool unify(Value& a, Value& b, const ast::Expr& at, const char* spelling);
  /// True when `v` is a number, scalar or vector; otherwise reports `what` needs one, at `at`
  /// (the operand that is `v`), and returns false.
  bool expect_node(const Value& v, const ast::Expr& at, const char* what);
  std::string describe(const Value& v) const;
  /// How tensor `tensor` could be indexed here, for hints: `x[m, :]`, `rstd[m]`; nullopt when
  /// no index of this kernel fits one of its axes (a symbol that is neither the vector axis nor
  /// a free loop variable's extent), that axis then in `*unreachable`.
  std::optional<std::string> example_view(int32_t tensor, size_t* unreachable = nullptr) const;
  /// "no index fits axis A of 'w' (size K): ..." (`named`; else "its axis A") with what each
  /// index takes, for messages.
  std::string unreachable_axis(int32_t tensor, size_t axis, bool named = true) const;
  const ast::Expr* keyword(const ast::Expr& call, const std::string& name) const;

  // Statements.
  void stmt(const ast::Stmt& s);
  void stmts(const std::vector<ast::StmtPtr>& body);
  void assign(const ast::Expr& target, const Value& v, const ast::Stmt& s);
  void aug_assign(const ast::Stmt& s);
  void store(const ast::Expr& target, Value v, bool accumulate, const ast::Stmt& s);
  void if_stmt(const ast::Stmt& s);
  void for_stmt(const ast::Stmt& s);
  /// Outputs stored by statements that are not lowered (after an error) count as attempted, so
  /// that the error is not followed by "never written".
  void skip_stores(const ast::Expr& target);
  void skip_stores(const std::vector<ast::StmtPtr>& body);
  Value merge(const Value& cond, const Value& a, const Value& b, const std::string& what,
              const ast::Stmt& s);

  ModuleScope& scope_;
  const KernelSignature* sig_;
  ir::Kernel* kernel_;
  std::vector<ir::Node> scratch_;  // nodes when evaluating constants without a kernel
  Builder kernel_builder_;
  Builder* builder_;
  // The combine function whose body is being lowered into a scan's region (nullptr elsewhere):
  // position() there is an error at its own place, not a type error and then one at the scan.
  const std::string* combine_fn_ = nullptr;
  std::vector<Frame> frames_;
  std::vector<const ast::FunctionDef*> inline_stack_;
  static constexpr size_t kMaxInlinedCalls = 10000;  // helper calls inlined into one kernel
  size_t inlined_calls_ = 0;
  bool inline_budget_reported_ = false;
  std::set<const ast::FunctionDef*> failed_helpers_;  // helpers whose body reported an error
  std::map<StoreKey, StoreState> stores_;
  // Outputs with a store that failed with an error: not also reported as "never written".
  std::set<int32_t> failed_stores_;
  bool in_loop_ = false;
  bool loop_seen_ = false;
};

/// Evaluates a constant expression (numbers, constants, arithmetic, math functions) to a number.
std::optional<ConstValue> eval_constant_expr(ModuleScope& scope, const ast::Expr& e);

/// lower_kernel (sema.h) of kernel `fn` with signature `sig` (from build_signature), in a scope
/// that may be shared by several kernels and bindings; errors go to scope.diags().
std::optional<ir::Kernel> lower_kernel_in(ModuleScope& scope, const ast::FunctionDef& fn,
                                          const KernelSignature& sig,
                                          const std::vector<DType>& binding);

}  // namespace kdsl::sema

#include "codegen_scan_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "dsl/diagnostics.h"
#include "kdsl/error.h"

namespace kdsl::scan_codegen {
namespace {

using ir::Op;

bool has_kind(const ir::View& v, ir::AxisIndex::Kind kind) {
  return std::any_of(v.begin(), v.end(), [&](const ir::AxisIndex& a) { return a.kind == kind; });
}

// The first of `id` and its operands (depth first, left to right) whose node satisfies `pred`,
// or -1.
template <class Pred>
ir::ValueId find_operand(const ir::Kernel& k, ir::ValueId id, Pred pred) {
  std::vector<ir::ValueId> stack = {id};
  std::vector<bool> seen(k.nodes.size(), false);
  while (!stack.empty()) {
    const ir::ValueId at = stack.back();
    stack.pop_back();
    if (at < 0 || static_cast<size_t>(at) >= seen.size() || seen[at]) continue;
    seen[at] = true;
    const ir::Node& n = k.node(at);
    if (pred(n)) return at;
    for (auto a = n.args.rbegin(); a != n.args.rend(); ++a) stack.push_back(*a);
  }
  return -1;
}

[[noreturn]] void unsupported(const ir::Kernel& k, ir::ValueId id, SourceLoc loc,
                              const std::string& msg, const std::string& hint) {
  // Nodes made by sema for an expression may have no location; use the nearest operand's that
  // has one (a select's condition may be a parameter, which has none). The underline: the span
  // of the node found, or of the node that starts at the given location.
  const bool given = loc.valid();
  const ir::ValueId found = find_operand(k, id, [&](const ir::Node& n) {
    return n.loc.valid() && (!given || n.loc.offset == loc.offset);
  });
  uint32_t length = 1;
  if (found >= 0) {
    if (!given) loc = k.node(found).loc;
    length = std::max(k.node(found).length, 1u);
  }
  Diagnostic d;
  d.loc = loc;
  d.length = length;
  d.message = msg + " (in the GPU scan schedule)";
  d.hint = hint;
  throw SourceError(loc.valid() ? render_diagnostic(d)
                                : fmt::format("kernel '{}': {}; {}", k.name, d.message, hint));
}

class Planner {
 public:
  Planner(const ir::Kernel& k, const ScanSchedule& s) : k_(k), s_(s) {}

  Plan run() {
    classify();
    find_states();
    plan_stores();
    check_inout_element_reads();
    for (const State& st : p_.states) {
      for (ir::ValueId a : st.args) need(a, 0, true);
    }
    p_.lookback = s_.chunks > 1 && !p_.states.empty();
    return std::move(p_);
  }

 private:
  void classify();
  Where join(Where a, Where b, ir::ValueId at);
  void find_states();
  void plan_stores();
  void need_scalar(ir::ValueId id);
  void need(ir::ValueId id, int delta, bool phase_a, ir::ValueId shifted_by = -1);
  void check_shifted_inout(ir::ValueId load, ir::ValueId at) const;
  void check_inout_element_reads() const;
  struct ScaledSum {
    ir::ValueId sum = -1;  // the reduce(sum) node; -1 when the stored value is not one
    std::vector<std::pair<ir::ValueId, bool>> factors;  // (value, divide), innermost first
    bool negate = false;                                // -sum(v): each partial negated
    bool add_old = false;  // u[b, d] += ... on an InOut element: the follow-up adds the old value
    ir::ValueId bad = -1;  // where the walk stopped (sum -1), for the diagnostic
    std::string why;       // and why, when more is known than "not this form"
    std::string hint;      // (with why: what to do instead)
  };
  ScaledSum scaled_sum(const ir::Store& st, std::vector<ir::ValueId>* chain) const;
  [[noreturn]] void refuse_scan_sum(ir::ValueId sum) const;
  std::string scan_schedule_hint(const std::string& rule) const;

  const ir::Kernel& k_;
  const ScanSchedule& s_;
  Plan p_;
  std::vector<bool> scan_dep_;
  std::vector<std::vector<ir::ValueId>> users_;
  // reduce(sum) nodes stored through tile partials (scaled_sum), not carried as states
  std::vector<bool> store_sum_only_;
  std::vector<ScaledSum> scaled_;  // per store: its tile-partial sum (sum -1: none)
  std::set<ir::ValueId> scalars_seen_;
};

// A hint that gives `rule` with the reason the kernel is in the scan schedule: its scans (shift,
// first, last), or, in a kernel without them, a column reduction over part of the loop, which a
// user would not connect with scans.
std::string Planner::scan_schedule_hint(const std::string& rule) const {
  const ir::Store* partial = has_scan_ops(k_) ? nullptr : partial_column_reduction(k_);
  if (!partial) return "in a kernel with scans (or shift, first, last), " + rule;
  return fmt::format(
      "the column reduction over part of the loop{} puts this kernel in the GPU scan schedule "
      "(SPEC 11.3), where {}; compute it in a second kernel",
      partial->loc.valid() ? fmt::format(" at line {}", partial->loc.line) : "", rule);
}

Where Planner::join(Where a, Where b, ir::ValueId at) {
  if (a == Where::vec || b == Where::vec) {
    Where other = a == Where::vec ? b : a;
    if (other == Where::begin || other == Where::end) {
      // Point at the whole-sequence operand (`last(h)` of `h - last(h)`): the expression itself
      // may have no location of its own, and its first operand is the scan.
      ir::ValueId culprit = at;
      for (ir::ValueId arg : k_.node(at).args) {
        if ((p_.where[arg] == Where::begin || p_.where[arg] == Where::end) &&
            k_.node(arg).loc.valid()) {
          culprit = arg;
          break;
        }
      }
      unsupported(k_, culprit, k_.node(culprit).loc,
                  "a value computed along the whole sequence (first, last or a reduction) is "
                  "used with the sequence's per-position values (in vector math, or in a "
                  "condition choosing between them)",
                  scan_schedule_hint("such values can only be stored (or combined into stored "
                                     "scalars)"));
    }
    return Where::vec;
  }
  if ((a == Where::begin && b == Where::end) || (a == Where::end && b == Where::begin)) {
    unsupported(k_, at, k_.node(at).loc, "this value combines the two ends of the sequence",
                "one tile holds the first position and another the last; store them separately");
  }
  return std::max(a, b);
}

void Planner::classify() {
  const size_t n = k_.nodes.size();
  p_.where.assign(n, Where::uniform);
  scan_dep_.assign(n, false);
  users_.assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = k_.nodes[i];
    auto id = static_cast<ir::ValueId>(i);
    for (ir::ValueId a : node.args) {
      users_[a].push_back(id);
      scan_dep_[i] = scan_dep_[i] || scan_dep_[a];
    }
    Where w = Where::uniform;
    switch (node.op) {
      case Op::constant:
      case Op::param:
      case Op::shape:
        break;
      case Op::position:
      case Op::scan:
      case Op::extract:
      case Op::shift:
        w = Where::vec;
        break;
      case Op::load:
        w = has_kind(node.view, ir::AxisIndex::Kind::vector) ? Where::vec
            : has_kind(node.view, ir::AxisIndex::Kind::loop) ? Where::row
                                                             : Where::uniform;
        break;
      case Op::reduce: {
        auto kind = static_cast<ir::ReduceKind>(node.fn);
        if (kind == ir::ReduceKind::var || kind == ir::ReduceKind::argmax ||
            kind == ir::ReduceKind::argmin) {
          unsupported(k_, id, node.loc,
                      fmt::format("{}() along the sequence is not supported", ir::name(kind)),
                      "compute it in a kernel without scans");
        }
        // In processing order: the first position of a reverse scan is its end.
        if (kind == ir::ReduceKind::first) {
          w = s_.reverse ? Where::end : Where::begin;
        } else if (kind == ir::ReduceKind::last) {
          w = s_.reverse ? Where::begin : Where::end;
        } else {
          w = Where::end;  // a total, carried through the look-back
        }
        break;
      }
      default:
        for (ir::ValueId a : node.args) w = join(w, p_.where[a], id);
        break;
    }
    if (node.op == Op::scan) scan_dep_[i] = true;
    p_.where[i] = w;
  }
}

// The sum along the sequence that store `st` writes through tile partials, or none (sum -1):
//   - a column reduction of a sum, out[...] += sum(v);
//   - a column reduction of a scaled sum, out[...] += k * sum(v) (sum(v) * k, sum(v) / k, -sum(v),
//     nested), where every k is the same along the sequence (uniform or per row), in a float type:
//     each thread's partial is scaled (k * (x + y) = k * x + k * y up to rounding: the rounding
//     differs from the total's by a few ulp; negation is exact);
//   - the same stored into an element view when v depends on a scan's result, which a carried
//     total cannot hold (phase A has no scan result): out[b, d] = ..., out[b, d] += ... (on an
//     InOut element: old + ..., the old value added by the follow-up), with casts that round to
//     the tensor's type or widen exactly (the store rounds once, as the casts would). An unscaled
//     sum of integers or complex values too (exact, or as a column reduction's partials).
// `chain` gets the nodes from the stored value down to the sum. find_states keeps a chain only
// where no other value uses its nodes (other such stores may: each store sums its own partials).
Planner::ScaledSum Planner::scaled_sum(const ir::Store& st, std::vector<ir::ValueId>* chain) const {
  ScaledSum r;
  chain->clear();
  if (has_kind(st.view, ir::AxisIndex::Kind::vector)) return r;
  auto uniform_along = [&](ir::ValueId id) {
    return p_.where[id] == Where::uniform || p_.where[id] == Where::row;
  };
  const DType stored = k_.tensors[st.tensor].dtype;
  const bool element = st.kind != ir::StoreKind::reduce;
  auto dtype = [&](ir::ValueId id) { return k_.node(id).type.dtype; };
  // A cast that cannot change the stored value: exact (to the same type, f16 or bf16 to f32, a
  // float to f64, i32 to i64), or, at the top of an element store (`top`: above an add of the
  // old value), a conversion to the tensor's own type, which the store makes once anyway.
  auto harmless_cast = [&](ir::ValueId id, bool top) {
    const ir::Node& c = k_.node(id);
    if (c.op != Op::cast) return false;
    const DType from = dtype(c.args[0]), to = c.type.dtype;
    const bool exact = from == to || (is_float(from) && to == DType::f64) ||
                       (to == DType::f32 && (from == DType::f16 || from == DType::bf16)) ||
                       (from == DType::i32 && to == DType::i64);
    return exact || (top && element && to == stored);
  };
  ir::ValueId at = st.value;
  const ir::Node* n = &k_.node(at);
  chain->push_back(at);
  auto step = [&](ir::ValueId next) {
    at = next;
    n = &k_.node(at);
    chain->push_back(at);
  };
  auto stop = [&](std::string why) {
    r.bad = at;
    r.why = std::move(why);
    return r;
  };
  bool cast = false;  // a cast was passed
  while (harmless_cast(at, true)) {
    step(n->args[0]);
    cast = true;
  }
  ir::ValueId added = -1;  // the add of the old value, if any
  if (element && k_.tensors[st.tensor].role == ir::Role::inout && n->op == Op::binary &&
      static_cast<ir::BinaryFn>(n->fn) == ir::BinaryFn::add) {
    // u[b, d] += v: old + v (sema's lowering), old read through exact casts.
    for (int side = 0; side < 2 && !r.add_old; ++side) {
      std::vector<ir::ValueId> old = {n->args[side]};
      while (harmless_cast(old.back(), false)) old.push_back(k_.node(old.back()).args[0]);
      const ir::Node& load = k_.node(old.back());
      if (load.op == Op::load && load.index == st.tensor && load.view == st.view) {
        // (The old value's load and casts stay out of the chain: other values may read it too,
        // as the tiles read the contents on entry and only the follow-up writes.)
        r.add_old = true;
        added = at;
        step(n->args[1 - side]);
      }
    }
  }
  while (harmless_cast(at, false)) {
    step(n->args[0]);
    cast = true;
  }
  if (n->op == Op::cast) {
    if (added >= 0) {
      r.hint = "add the unrounded sum: the store rounds once, after the old value is added";
      return stop(
          fmt::format("a sum of a scan's result converted to {} before the old value "
                      "of the InOut element is added is not supported (a second "
                      "rounding)",
                      dtype_name(n->type.dtype)));
    }
    r.hint = element ? "store the sum into a tensor of that type, or round it in a second kernel"
                     : "drop the cast: the column reduction adds the unrounded terms and "
                       "rounds to the tensor's type once, when it stores";
    return stop(element ? fmt::format("a sum of a scan's result converted to {} before it is "
                                      "stored into a {} tensor is not supported",
                                      dtype_name(n->type.dtype), dtype_name(stored))
                        : "a cast inside a column reduction of a sum of a scan's result rounds "
                          "each term before the reduction adds them: not supported");
  }
  const DType acc = n->type.dtype;
  if (added >= 0 && dtype(added) != acc) {
    // old + T(v), v in another type than the element's: the follow-up adds in v's type.
    r.hint = fmt::format("sum in the element's type: sum({}(...))", dtype_name(dtype(added)));
    return stop(
        fmt::format("a sum of {} values of a scan's result added to an InOut {} element "
                    "is not supported (the old value is added in the sum's type)",
                    dtype_name(acc), dtype_name(dtype(added))));
  }
  while (true) {
    ir::ValueId next = -1;
    if (n->op == Op::unary && static_cast<ir::UnaryFn>(n->fn) == ir::UnaryFn::neg) {
      next = n->args[0];
      r.negate = !r.negate;
    } else if (n->op == Op::binary) {
      const auto fn = static_cast<ir::BinaryFn>(n->fn);
      if (fn == ir::BinaryFn::mul && uniform_along(n->args[0])) {
        next = n->args[1];
        r.factors.push_back({n->args[0], false});
      } else if ((fn == ir::BinaryFn::mul || fn == ir::BinaryFn::div) &&
                 uniform_along(n->args[1])) {
        next = n->args[0];
        r.factors.push_back({n->args[1], fn == ir::BinaryFn::div});
      }
    }
    if (next < 0) break;
    if (dtype(next) != acc) return stop("");
    step(next);
  }
  // The innermost of the casts from `id` down to a sum (that of the sum itself), or -1.
  auto cast_of_sum = [&](ir::ValueId id) {
    ir::ValueId inner = -1;
    for (; k_.node(id).op == Op::cast; id = k_.node(id).args[0]) inner = id;
    const ir::Node& s = k_.node(id);
    return s.op == Op::reduce && static_cast<ir::ReduceKind>(s.fn) == ir::ReduceKind::sum ? inner
                                                                                          : -1;
  };
  if (const ir::ValueId c = cast_of_sum(at); c >= 0) {
    // Under a negation, factor or divisor (casts above them were passed): each tile's partial
    // would be converted, not the sum.
    r.hint = "convert the whole stored value (T(-sum(...))), or sum in the wanted type";
    return stop(
        fmt::format("a sum of a scan's result converted to {} under a negation, factor "
                    "or divisor is not supported",
                    dtype_name(dtype(c))));
  }
  if (n->op != Op::reduce || static_cast<ir::ReduceKind>(n->fn) != ir::ReduceKind::sum) {
    return stop("");
  }
  const bool plain = at == st.value && st.kind == ir::StoreKind::reduce;
  // Element stores, and the forms only they need (casts, negation, the old value), only where
  // the summed values need a scan's result (else the total is carried, exactly as written).
  if (!plain && (element || cast || r.negate) && !scan_dep_[n->args[0]]) return ScaledSum{};
  if (!r.factors.empty() && !is_float(acc)) {
    // A scaled integer partial would round differently ((7 / 2) + (7 / 2) is not 14 / 2).
    r.hint = "scale the values inside sum(...), or store the sum and scale it in a second kernel";
    return stop(
        fmt::format("a sum of {} values of a scan's result multiplied or divided along "
                    "the way is not supported (each tile's partial would round "
                    "differently): floats only",
                    dtype_name(acc)));
  }
  r.sum = at;
  std::reverse(r.factors.begin(), r.factors.end());
  return r;
}

// A scan-dependent sum that no store takes through tile partials: the diagnostic at the first
// store whose value uses it in a form scaled_sum refused (where the walk stopped), else at the sum.
void Planner::refuse_scan_sum(ir::ValueId sum) const {
  const std::string what =
      "a reduction along the sequence of a scan's result can only be stored: a sum, as a column "
      "reduction (out[d] += sum(...)) or into an element (out[b, d] = sum(...) or += on an "
      "InOut), at most negated, multiplied or divided by values that are the same along the "
      "sequence, or cast to the tensor's type";
  const std::string hint = "move the other arithmetic inside sum(...), or into a second kernel";
  std::vector<bool> seen(k_.nodes.size(), false);
  auto uses = [&](ir::ValueId from) {
    std::fill(seen.begin(), seen.end(), false);
    std::vector<ir::ValueId> stack = {from};
    while (!stack.empty()) {
      const ir::ValueId v = stack.back();
      stack.pop_back();
      if (v == sum) return true;
      if (seen[v]) continue;
      seen[v] = true;
      for (ir::ValueId a : k_.node(v).args) stack.push_back(a);
    }
    return false;
  };
  for (const ir::Store& st : k_.stores) {
    std::vector<ir::ValueId> chain;
    const ScaledSum ss = scaled_sum(st, &chain);
    if (ss.bad < 0 || !uses(st.value)) continue;
    // At the refused node, or its nearest located operand (unsupported), where that is on the
    // store's line; else at the store (the operand may be the sum's first use on another line,
    // shared by CSE).
    const ir::ValueId near =
        find_operand(k_, ss.bad, [](const ir::Node& n) { return n.loc.valid(); });
    const SourceLoc at = near >= 0 && k_.node(near).loc.line == st.loc.line ? SourceLoc{} : st.loc;
    unsupported(k_, ss.bad, at, ss.why.empty() ? what : ss.why, ss.hint.empty() ? hint : ss.hint);
  }
  unsupported(k_, sum, k_.node(sum).loc, what, hint);
}

void Planner::find_states() {
  // Each store's scaled sum, kept where every use of its chain's nodes is in a kept chain (a sum
  // CSE'd between two stores serves both) or a kept store: until nothing changes.
  const size_t ns = k_.stores.size();
  scaled_.assign(ns, {});
  std::vector<std::vector<ir::ValueId>> chains(ns);
  for (size_t j = 0; j < ns; ++j) scaled_[j] = scaled_sum(k_.stores[j], &chains[j]);
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<bool> in_chain(k_.nodes.size(), false);
    for (size_t j = 0; j < ns; ++j) {
      if (scaled_[j].sum < 0) continue;
      for (ir::ValueId c : chains[j]) in_chain[c] = true;
    }
    for (size_t j = 0; j < ns; ++j) {
      if (scaled_[j].sum < 0) continue;
      bool ok = true;
      for (ir::ValueId c : chains[j]) {
        for (ir::ValueId u : users_[c]) ok = ok && in_chain[u];
        for (size_t o = 0; o < ns; ++o) ok = ok && (k_.stores[o].value != c || scaled_[o].sum >= 0);
      }
      if (!ok) {
        scaled_[j] = {};
        changed = true;
      }
    }
  }
  store_sum_only_.assign(k_.nodes.size(), false);
  for (const ScaledSum& ss : scaled_) {
    if (ss.sum >= 0) store_sum_only_[ss.sum] = true;
  }
  for (size_t i = 0; i < k_.nodes.size(); ++i) {
    const ir::Node& n = k_.nodes[i];
    auto id = static_cast<ir::ValueId>(i);
    State st;
    st.node = id;
    if (n.op == Op::scan) {
      st.scan = true;
      st.kind = static_cast<ir::ScanKind>(n.fn);
      st.region = &k_.regions.at(n.index);
      st.exclusive = n.exclusive;
      size_t m = n.results.size();
      for (size_t j = 0; j < m; ++j) {
        st.dtypes.push_back(n.results[j].dtype);
        st.args.push_back(n.args[j]);
        if (n.has_init) st.inits.push_back(n.args[m + j]);
      }
      for (ir::ValueId a : n.args) {
        if (scan_dep_[a]) {
          unsupported(k_, id, n.loc, "this scan's values depend on another scan's result",
                      "the GPU schedule runs one level of scans per kernel; split the kernel");
        }
      }
    } else if (n.op == Op::reduce) {
      auto kind = static_cast<ir::ReduceKind>(n.fn);
      if (kind == ir::ReduceKind::first || kind == ir::ReduceKind::last) continue;
      if (store_sum_only_[i]) continue;
      st.scan = false;
      st.kind = kind == ir::ReduceKind::sum   ? ir::ScanKind::sum
                : kind == ir::ReduceKind::max ? ir::ScanKind::max
                                              : ir::ScanKind::min;
      st.dtypes = {n.type.dtype};
      st.args = {n.args[0]};
      if (scan_dep_[n.args[0]]) refuse_scan_sum(id);
    } else {
      continue;
    }
    p_.any_custom = p_.any_custom || st.custom();
    p_.state_of[id] = static_cast<int>(p_.states.size());
    p_.states.push_back(std::move(st));
  }
}

void Planner::plan_stores() {
  for (const ir::Store& st : k_.stores) {
    StorePlan sp;
    const ir::Node& v = k_.node(st.value);
    bool vec_view = has_kind(st.view, ir::AxisIndex::Kind::vector);
    Where w = p_.where[st.value];
    if (vec_view) {
      if (st.kind == ir::StoreKind::reduce) {
        unsupported(k_, st.value, st.loc,
                    "a column reduction of a vector along the sequence is not supported",
                    "reduce it in a kernel without scans");
      }
      if (w == Where::begin || w == Where::end) {
        unsupported(k_, st.value, st.loc,
                    "a value computed along the whole sequence is stored along the sequence",
                    "store it into an element view");
      }
      sp.how = StorePlan::How::vector;
      need(st.value, 0, false);
    } else if (const ScaledSum& ss = scaled_[p_.stores.size()]; ss.sum >= 0) {
      sp.how = StorePlan::How::tile_partial;
      sp.sum = k_.node(ss.sum).args[0];
      sp.factors = ss.factors;
      sp.negate = ss.negate;
      sp.add_old = ss.add_old;
      sp.acc = k_.node(ss.sum).type.dtype;
      sp.ws = p_.partial_workspaces++;
      sp.per_row = s_.chunks;
      need(sp.sum, 0, false);
    } else {
      sp.how =
          st.kind == ir::StoreKind::reduce ? StorePlan::How::row_partial : StorePlan::How::scalar;
      sp.where = w == Where::end ? Where::end : Where::begin;
      sp.acc = v.type.dtype;
      if (sp.how == StorePlan::How::row_partial) sp.ws = p_.partial_workspaces++;
      need_scalar(st.value);
    }
    p_.stores.push_back(sp);
  }
}

// The vector values a begin/end scalar needs at its element.
void Planner::need_scalar(ir::ValueId id) {
  if (!scalars_seen_.insert(id).second) return;
  const ir::Node& n = k_.node(id);
  if (p_.where[id] == Where::uniform || p_.where[id] == Where::row) return;
  if (n.op == Op::reduce) {
    auto kind = static_cast<ir::ReduceKind>(n.fn);
    if (kind == ir::ReduceKind::first || kind == ir::ReduceKind::last) need(n.args[0], 0, false);
    return;  // carried reductions: the state's value at the end
  }
  for (ir::ValueId a : n.args) need_scalar(a);
}

// An InOut tensor read at a shifted position (load `load`, reported at node `at`) and written by
// the same kernel: another thread, or the tile before this one, may already have stored that
// position (the GPU schedule orders no load of one position before the store to another), so the
// load would not see the contents on entry that the language promises (dsl/SPEC.md).
void Planner::check_shifted_inout(ir::ValueId load, ir::ValueId at) const {
  const int32_t t = k_.node(load).index;
  if (k_.tensors[t].role != ir::Role::inout) return;
  if (std::none_of(k_.stores.begin(), k_.stores.end(),
                   [&](const ir::Store& st) { return st.tensor == t; })) {
    return;
  }
  unsupported(k_, at, k_.node(at).loc,
              fmt::format("InOut tensor '{}' is read at a shifted position and written by this "
                          "kernel: on the GPU another thread may have written that position first",
                          k_.tensors[t].name),
              "write the result to an Out tensor, or pass the input as a separate tensor");
}

// An InOut tensor read at an element (a value the same along the sequence) and written by the
// main kernel (an element at the sequence's start or end, or a vector along it): the tiles of a
// row's chunks run in any order, so one may read the element after another wrote it, not the
// contents on entry the language promises (found by a new-user test). Column reductions and sums
// through tile partials are written by the follow-up, after every tile has read; a vector read
// at its own positions is read and written by the same thread.
void Planner::check_inout_element_reads() const {
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    const StorePlan::How how = p_.stores[j].how;
    if (how != StorePlan::How::scalar && how != StorePlan::How::vector) continue;
    const int32_t t = k_.stores[j].tensor;
    if (k_.tensors[t].role != ir::Role::inout) continue;
    for (size_t i = 0; i < k_.nodes.size(); ++i) {
      const ir::Node& n = k_.nodes[i];
      if (n.op != Op::load || n.index != t || p_.where[i] == Where::vec) continue;
      unsupported(k_, static_cast<ir::ValueId>(i), n.loc,
                  fmt::format("InOut tensor '{}' is read at an element and written by this kernel "
                              "(line {}): on the GPU the chunks of a long sequence run in any "
                              "order, so one may read it after another wrote it",
                              k_.tensors[t].name, k_.stores[j].loc.line),
                  "write the result to an Out tensor, or pass the input as a separate tensor");
    }
  }
}

void Planner::need(ir::ValueId id, int delta, bool phase_a, ir::ValueId shifted_by) {
  const ir::Node& n = k_.node(id);
  if (p_.where[id] != Where::vec) {
    need_scalar(id);
    return;
  }
  if (!(phase_a ? p_.phase_a : p_.phase_b).insert({id, delta}).second) return;
  switch (n.op) {
    case Op::load: {
      if (delta != 0) check_shifted_inout(id, id);
      auto it = p_.access_of.find({id, delta});
      int a = -1;
      if (it != p_.access_of.end()) {
        a = it->second;
      } else {
        for (size_t i = 0; i < p_.accesses.size(); ++i) {
          const Access& x = p_.accesses[i];
          if (x.tensor == n.index && x.view == n.view && x.delta == delta) a = static_cast<int>(i);
        }
        if (a < 0) {
          p_.accesses.push_back({n.index, n.view, delta, false, false});
          a = static_cast<int>(p_.accesses.size() - 1);
        }
        p_.access_of[{id, delta}] = a;
      }
      (phase_a ? p_.accesses[a].phase_a : p_.accesses[a].phase_b) = true;
      return;
    }
    case Op::extract:
    case Op::scan:
      if (phase_a || delta != 0) {
        // The caret at the shift that moved it (shift(c * 2.0, 1, 0.0)), else at the scan.
        const ir::ValueId at = delta != 0 && shifted_by >= 0 && k_.node(shifted_by).loc.valid()
                                   ? shifted_by
                                   : (n.op == Op::extract ? n.args[0] : id);
        unsupported(k_, at, k_.node(at).loc, "a scan's result is shifted",
                    "shift the scan's inputs instead, or use an exclusive scan for the previous "
                    "element");
      }
      return;  // from the carried state
    case Op::shift:
      if (k_.node(n.args[0]).op == Op::load) check_shifted_inout(n.args[0], id);  // caret: shift
      need(n.args[0], delta + n.index, phase_a, id);
      return;
    case Op::position:
      return;
    default:
      for (ir::ValueId a : n.args) need(a, delta, phase_a, shifted_by);
      return;
  }
}

}  // namespace

Plan plan_scan_kernel(const ir::Kernel& k, const ScanSchedule& s) {
  return Planner(k, s).run();
}

}  // namespace kdsl::scan_codegen

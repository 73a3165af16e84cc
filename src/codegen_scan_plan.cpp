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

[[noreturn]] void unsupported(const ir::Kernel& k, ir::ValueId id, SourceLoc loc,
                              const std::string& msg, const std::string& hint) {
  // Nodes made by sema for an expression may have no location; use the nearest operand's that
  // has one, depth first and left to right (a select's condition may be a parameter, which has
  // none). The underline: the span of the node found, or of the node that starts at the given
  // location.
  uint32_t length = 1;
  const bool given = loc.valid();
  std::vector<ir::ValueId> stack = {id};
  std::vector<bool> seen(k.nodes.size(), false);
  while (!stack.empty()) {
    const ir::ValueId at = stack.back();
    stack.pop_back();
    if (at < 0 || static_cast<size_t>(at) >= seen.size() || seen[at]) continue;
    seen[at] = true;
    const ir::Node& n = k.node(at);
    if (n.loc.valid() && (!given || n.loc.offset == loc.offset)) {
      if (!given) loc = n.loc;
      length = std::max(n.length, 1u);
      break;
    }
    for (auto a = n.args.rbegin(); a != n.args.rend(); ++a) stack.push_back(*a);
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
  void need(ir::ValueId id, int delta, bool phase_a);
  void check_shifted_inout(ir::ValueId load, ir::ValueId at) const;
  struct ScaledSum {
    ir::ValueId sum = -1;  // the reduce(sum) node; -1 when the stored value is not one
    std::vector<std::pair<ir::ValueId, bool>> factors;  // (value, divide), innermost first
  };
  ScaledSum scaled_sum(const ir::Store& st, std::vector<ir::ValueId>* chain) const;

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
                  "in a kernel with scans, such values can only be stored (or combined into "
                  "stored scalars)");
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
//   - a column reduction of a scaled sum, out[...] += k * sum(v) (sum(v) * k, sum(v) / k, nested),
//     where every k is the same along the sequence (uniform or per row), in a float type: each
//     thread's partial is scaled (k * (x + y) = k * x + k * y up to rounding: the rounding
//     differs from the total's by a few ulp);
//   - the same stored into an element view (= or +=, a cast to the tensor's type allowed) when v
//     depends on a scan's result, which a carried total cannot hold (phase A has no scan result).
// `chain` gets the nodes from the stored value down to the sum. find_states keeps a chain only
// where no other value uses its nodes (other such stores may: each store sums its own partials).
Planner::ScaledSum Planner::scaled_sum(const ir::Store& st, std::vector<ir::ValueId>* chain) const {
  ScaledSum r;
  chain->clear();
  if (has_kind(st.view, ir::AxisIndex::Kind::vector)) return r;
  auto uniform_along = [&](ir::ValueId id) {
    return p_.where[id] == Where::uniform || p_.where[id] == Where::row;
  };
  ir::ValueId at = st.value;
  std::vector<std::pair<ir::ValueId, bool>> outer_first;
  const ir::Node* n = &k_.node(at);
  chain->push_back(at);
  if (n->op == Op::cast && st.kind == ir::StoreKind::write && is_float(n->type.dtype)) {
    at = n->args[0];
    n = &k_.node(at);
    chain->push_back(at);
  }
  const DType acc = n->type.dtype;
  while (n->op == Op::binary) {
    const auto fn = static_cast<ir::BinaryFn>(n->fn);
    ir::ValueId next = -1;
    if (fn == ir::BinaryFn::mul && uniform_along(n->args[0])) {
      next = n->args[1];
      outer_first.push_back({n->args[0], false});
    } else if ((fn == ir::BinaryFn::mul || fn == ir::BinaryFn::div) && uniform_along(n->args[1])) {
      next = n->args[0];
      outer_first.push_back({n->args[1], fn == ir::BinaryFn::div});
    } else {
      return r;
    }
    if (k_.node(next).type.dtype != acc) return r;
    at = next;
    n = &k_.node(at);
    chain->push_back(at);
  }
  if (n->op != Op::reduce || static_cast<ir::ReduceKind>(n->fn) != ir::ReduceKind::sum) return r;
  const bool plain = at == st.value && st.kind == ir::StoreKind::reduce;
  if (!plain) {
    // Scaled or stored into an element: floats only (a scaled integer partial would round
    // differently: (7 / 2) + (7 / 2) is not 14 / 2), and for element stores only where the
    // summed values need a scan's result (else the total is carried, exactly as written).
    if (!is_float(acc) || (st.kind != ir::StoreKind::reduce && !scan_dep_[n->args[0]])) return r;
  }
  r.sum = at;
  r.factors.assign(outer_first.rbegin(), outer_first.rend());
  return r;
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
      if (scan_dep_[n.args[0]]) {
        unsupported(k_, id, n.loc,
                    "a reduction along the sequence of a scan's result can only be stored: a "
                    "sum, as a column reduction (out[d] += sum(...)) or into an element "
                    "(out[b, d] = sum(...)), at most multiplied or divided by values that are "
                    "the same along the sequence",
                    "move the other arithmetic inside sum(...), or into a second kernel");
      }
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

void Planner::need(ir::ValueId id, int delta, bool phase_a) {
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
        unsupported(k_, id, k_.node(n.op == Op::extract ? n.args[0] : id).loc,
                    "a scan's result is shifted",
                    "shift the scan's inputs instead, or use an exclusive scan for the previous "
                    "element");
      }
      return;  // from the carried state
    case Op::shift:
      if (k_.node(n.args[0]).op == Op::load) check_shifted_inout(n.args[0], id);  // caret: shift
      need(n.args[0], delta + n.index, phase_a);
      return;
    case Op::position:
      return;
    default:
      for (ir::ValueId a : n.args) need(a, delta, phase_a);
      return;
  }
}

}  // namespace

Plan plan_scan_kernel(const ir::Kernel& k, const ScanSchedule& s) {
  return Planner(k, s).run();
}

}  // namespace kdsl::scan_codegen

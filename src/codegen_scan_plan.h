// Internal to the scan codegen (codegen_scan_plan.cpp, codegen_scan.cpp): what a kernel computes
// where in the scan schedule (schedule_scan.h).
//
// Every scalar node is uniform (the same for all rows), per row (depends on the loop indices), or
// available at one end of the sequence: `begin` (the first position in processing order) or
// `end` (the last) -- first(v), last(v) and reductions along the sequence, whose total is carried
// through the look-back. Vector nodes are evaluated per element; under shift(v, k, fill), v is
// evaluated at a shifted position (delta = k), so a shift needs no data exchange between threads.
//
// The tile's work is split by the look-back: phase A computes the elements of every carried state
// (scans, and reductions whose total is stored) and scans them locally; phase B, once the tile's
// prefix is known, computes everything the stores need. Loads needed in both phases are held in
// registers from phase A.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dsl/ir.h"
#include "schedule_scan.h"

namespace kdsl::scan_codegen {

enum class Where : uint8_t { uniform, row, begin, end, vec };

/// A value carried through the look-back: a scan (its k results) or a reduction along the
/// sequence whose total a store needs (k = 1, a built-in combine).
struct State {
  ir::ValueId node = -1;
  bool scan = true;
  ir::ScanKind kind = ir::ScanKind::sum;
  const ir::Region* region = nullptr;  // scans
  std::vector<DType> dtypes;           // one per component
  std::vector<ir::ValueId> args;       // the scanned values (vector or scalar nodes)
  std::vector<ir::ValueId> inits;      // initial scalars; empty when none
  bool exclusive = false;
  bool custom() const { return kind == ir::ScanKind::custom; }
};

/// A vector node evaluated at physical position t - delta of the element being computed.
using At = std::pair<ir::ValueId, int>;

/// A vector load: tensor `tensor` through `view`, at position t - delta.
struct Access {
  int32_t tensor = -1;
  ir::View view;
  int delta = 0;
  bool phase_a = false;  // loaded before the look-back (and held when phase B needs it too)
  bool phase_b = false;
};

struct StorePlan {
  enum class How : uint8_t {
    vector,        // a vector view, written per element in phase B
    scalar,        // a scalar view, written by the thread at `where` (begin or end)
    tile_partial,  // += sum(v) over some loop variables (or = / += a scaled sum of a scan's
                   // result: Planner::scaled_sum): one partial sum per row and chunk
    row_partial,   // += a scalar over some loop variables: one partial per row, at `where`
  };
  How how = How::vector;
  Where where = Where::begin;
  int ws = -1;           // partials: workspace index
  ir::ValueId sum = -1;  // tile_partial: the summed vector
  // tile_partial: values the same along the sequence (uniform or per row) that each thread's
  // partial is multiplied by (divided by where `second`), in order: dl[d] += 2.0 * sum(c).
  std::vector<std::pair<ir::ValueId, bool>> factors;
  bool negate = false;  // tile_partial: each partial negated (-sum(v))
  bool add_old =
      false;  // tile_partial into an InOut element with +=: the follow-up adds the old value
  DType acc = DType::f32;  // partials: the type they are summed in
  int64_t per_row = 1;     // partials per row (chunks for tile partials, else 1)
};

struct Plan {
  std::vector<Where> where;  // per node
  std::vector<State> states;
  std::map<ir::ValueId, int> state_of;  // scan or carried reduce node -> state
  std::set<At> phase_a, phase_b;        // vector values computed in each phase
  std::vector<Access> accesses;
  std::map<At, int> access_of;    // (load node, delta) -> access
  std::vector<StorePlan> stores;  // per ir::Store
  int partial_workspaces = 0;
  bool lookback = false;  // more than one chunk and something to carry
  bool any_custom = false;
};

/// Plans kernel `k` for schedule `s`. Throws kdsl::SourceError (rendered at the offending node)
/// for what the scan schedule cannot compute in one pass: a scan of a scan's result, shift of a
/// scan's result, a reduction along the sequence used in vector math or mixing both ends, var /
/// argmax / argmin along the sequence, and column reductions of vectors.
Plan plan_scan_kernel(const ir::Kernel& k, const ScanSchedule& s);

}  // namespace kdsl::scan_codegen

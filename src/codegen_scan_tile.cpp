// The tile function of the scan schedule (schedule_scan.h): one tile of TD rows by CL positions,
// processed by one CTA. Generated code, in order:
//   rows     the loop indices, validity and access offsets of the thread's VR rows; per-row
//            scalars (scalar loads and math on them) as arrays over the VR rows
//   phase A  loads of what the scans need; per element, the carried states' elements; the
//            thread's local inclusive scan over its VP positions (kept: s), the scan across the
//            LP lanes (the prefix before each step: pr) and the thread's carry over its T steps
//   look-back  warp aggregates through shared memory; one thread per row publishes the tile's
//            aggregate, finds the closest inclusive prefix before it and publishes its own
//   phase B  the element outputs z (+) s, the epilogue math, stores, column-reduction partials
//            and the scalars of the sequence's first and last position
#include <fmt/format.h>

#include <functional>

#include "codegen_expr.h"
#include "codegen_scan_emit.h"
#include "kdsl/error.h"

namespace kdsl::scan_codegen {

using ir::Form;
using ir::Op;

bool Emitter::uses_fast(const ir::View& view) const {
  for (const ir::AxisIndex& a : view) {
    if (a.kind == ir::AxisIndex::Kind::loop && a.value == s_.fast_loop) return true;
  }
  return false;
}

// The row part of an element's offset (loop and constant axes), from the loop indices i<l>.
std::string Emitter::offset(int32_t tensor, const ir::View& view, const std::string& suffix) const {
  std::string e = "0LL";
  for (size_t ax = 0; ax < view.size(); ++ax) {
    const ir::AxisIndex& a = view[ax];
    if (a.kind == ir::AxisIndex::Kind::loop) {
      e += fmt::format(" + i{}{} * p.st{}_{}", a.value, suffix, tensor, ax);
    } else if (a.kind == ir::AxisIndex::Kind::constant && a.value != 0) {
      e += fmt::format(" + {}LL * p.st{}_{}", a.value, tensor, ax);
    }
  }
  return e;
}

// Functions of a flattened row: the row offsets of each access and store, and the partial-sum
// index of row-partial column reductions.
void Emitter::emit_row_functions() {
  auto fn = [&](const std::string& name, const std::string& body) {
    t_.line("__device__ __forceinline__ long long {}_{}(const kdsl_params_{}& p, long long r) {{",
            name, sym_, sym_);
    t_.in();
    for (size_t l = 0; l < k_.loop.size(); ++l) t_.line("long long i{} = 0;", l);
    row_index_code("r", "i", "");
    t_.line("return {};", body);
    t_.out();
    t_.line("}}");
  };
  for (size_t a = 0; a < p_.accesses.size(); ++a) {
    fn(fmt::format("kdsl_ao{}", a), offset(p_.accesses[a].tensor, p_.accesses[a].view, ""));
  }
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    fn(fmt::format("kdsl_so{}", j), offset(k_.stores[j].tensor, k_.stores[j].view, ""));
    if (p_.stores[j].how != StorePlan::How::row_partial) continue;
    std::vector<int> kept, omitted;
    split_loop(k_.stores[j].view, &kept, &omitted);
    std::string ko = "0LL", oo = "0LL";
    for (int l : kept) ko = fmt::format("({}) * p.sym{} + i{}", ko, k_.loop[l].extent, l);
    for (int l : omitted) oo = fmt::format("({}) * p.sym{} + i{}", oo, k_.loop[l].extent, l);
    fn(fmt::format("kdsl_pi{}", j),
       fmt::format("({}) * ({}) + ({})", oo, extent_product(kept), ko));
  }
  t_.line("");
}

std::string Emitter::vstride(int32_t tensor, const ir::View& view) const {
  if (s_.vector_fast) return "1LL";  // scan.rows with vector accesses: contiguous (specialized)
  return fmt::format("p.st{}_{}", tensor, vector_axis(view));
}

std::string Emitter::scalar(ir::ValueId id) const {
  return p_.where[id] == Where::row ? fmt::format("rs{}[v]", id) : fmt::format("u{}", id);
}

std::string Emitter::init_state(size_t i) const {
  const State& st = p_.states[i];
  std::string e = fmt::format("{}{{", state_type(i));
  for (size_t c = 0; c < st.inits.size(); ++c) e += (c ? ", " : "") + scalar(st.inits[c]);
  if (st.custom()) e += ", 1";
  return e + "}";
}

// The first position (processing order) of step j of the thread: the steps are interleaved with
// the lanes (scan.rows: each step of a warp covers LP * VP consecutive positions) or blocked (scan.
// columns: a thread's T steps are consecutive positions).
std::string Emitter::q0_expr(const std::string& sfx, const std::string& j) const {
  if (s_.blocked)
    return fmt::format("qt{} + ((static_cast<kdsl_pos>(wp) * LP + lp) * T + {}) * VP", sfx, j);
  return fmt::format("qt{} + ((static_cast<kdsl_pos>(wp) * T + {}) * LP + lp) * VP", sfx, j);
}

// scan.columns: the thread's position q0 moves by VP (blocked) or LP * VP positions per step j.
std::string Emitter::q0_step() const {
  return s_.blocked ? "VP" : "LP * VP";
}

// scan.columns: `ptr`, a pointer to the element at step 0 (offset `offset` plus the physical
// position read at shift `delta` times the stride `vs`), and `ptr`_s, its step per j (in bytes
// where ScanSchedule::byte_steps holds, else in elements), so that each access of the unrolled
// steps costs one 64-bit add instead of a 64-bit multiply. The pointer is only dereferenced where
// `ok` holds.
void Emitter::emit_column_pointer(const std::string& ptr, const std::string& type,
                                  const std::string& base, const std::string& offset, int delta,
                                  const std::string& sfx, const std::string& vs) {
  t_.line("{} {} = {} + {} + ((REV ? L - 1 - ({}) : {}) - ({})) * {};", type, ptr, base, offset,
          q0_expr(sfx, "0"), q0_expr(sfx, "0"), delta, vs);
  if (s_.byte_steps) {
    t_.line("const long long {0}_s = kdsl_sc_bytes((REV ? -({1}) : ({1})) * {2} * {3});", ptr,
            q0_step(), vs, "static_cast<long long>(sizeof(*" + ptr + "))");
  } else {
    t_.line("const long long {0}_s = (REV ? -({1}) : ({1})) * {2};", ptr, q0_step(), vs);
  }
}

// Moves column pointer `ptr` to the next step (emit_column_pointer).
std::string Emitter::column_step(const std::string& ptr) const {
  return s_.byte_steps ? fmt::format("kdsl_sc_step({0}, {0}_s);", ptr)
                       : fmt::format("{0} += {0}_s;", ptr);
}

void Emitter::emit_constants() {
  // scan.columns: positions (processing order and physical, with their shifts) in 32-bit
  // arithmetic where the sequence is short enough, fewer instructions per element than 64-bit
  // adds and compares (the bounds of the shifted accesses are tested per element). Offsets stay
  // 64-bit. Measured (twenty-third session, bf16 (1, 32768, 2048), three rounds): rg_lru_bwd
  // 521.7 -> 512.4 us, linear_recurrence_bwd 204.9 -> 200.1; not on scan.rows, where the last-axis
  // cumsum bf16 4096 x 8192 was 1.8% slower (42.6 -> 43.3 us), nor with f32 tensors
  // (ScanSchedule::wide_positions: the f32 backward recurrence was 20% slower).
  const bool narrow = s_.blocked && !s_.wide_positions && len_ + s_.cl() <= (int64_t{1} << 30);
  t_.line("using kdsl_pos = {};  // positions along the scan axis", narrow ? "int" : "long long");
  t_.line("using kdsl_upos = {};", narrow ? "unsigned" : "unsigned long long");
  t_.line("constexpr kdsl_pos L = {};", len_);
  t_.line("constexpr int VR = VRT, VP = {}, LR = {}, LP = {}, WR = {}, WP = {}, T = {};", s_.vp,
          s_.lr, s_.lp, s_.wr, s_.wp, s_.t);
  t_.line("constexpr int TD = WR * LR * VR;  // rows per tile");
  t_.line("constexpr bool FAST = VR > 1;  // 16-byte accesses of VR rows (scan.columns)");
  t_.line("constexpr kdsl_pos CL = {};", s_.cl());
  t_.line("constexpr bool REV = {}, ALL_VALID = L % CL == 0;", s_.reverse ? "true" : "false");
  t_.line("const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;");
  t_.line("const int wp = warp % WP, wr = warp / WP, lr = lane % LR, lp = lane / LR;");
  t_.line("const int rr0 = (wr * LR + lr) * VR;  // the thread's first row in the tile");
  t_.line("(void)lp; (void)wp; (void)tid;");
  for (size_t t = 0; t < k_.tensors.size(); ++t) {
    t_.line("{}{}* __restrict__ t{} = p.t{};", k_.tensors[t].role == ir::Role::in ? "const " : "",
            cuda::storage_type(k_.tensors[t].dtype), t, t);
  }
}

// Splits flattened row `r` into the loop indices <prefix><l><suffix>, the innermost fastest.
void Emitter::row_index_code(const std::string& r, const std::string& prefix,
                             const std::string& suffix) {
  t_.line("{{");
  t_.in();
  t_.line("long long rest = {};", r);
  for (size_t i = s_.row_order.size(); i-- > 0;) {
    int l = s_.row_order[i];
    if (i == 0) {
      t_.line("{}{}{} = rest;", prefix, l, suffix);
    } else {
      t_.line("{}{}{} = rest % p.sym{};", prefix, l, suffix, k_.loop[l].extent);
      t_.line("rest /= p.sym{};", k_.loop[l].extent);
    }
  }
  t_.out();
  t_.line("}}");
}

std::vector<ir::ValueId> Emitter::row_nodes() const {
  std::vector<ir::ValueId> rows;
  for (size_t i = 0; i < k_.nodes.size(); ++i) {
    if (p_.where[i] == Where::row) rows.push_back(static_cast<ir::ValueId>(i));
  }
  return rows;
}

// The per-tile values of the thread's rows (suffix: "" the current tile, "_n" the next one).
void Emitter::emit_row_decls(const std::string& sfx) {
  t_.line("long long c{0} = 0, rt{0} = 0, r0{0} = 0;", sfx);
  t_.line("kdsl_pos qt{} = 0;", sfx);
  t_.line("bool rv{}[VR];", sfx);
  for (size_t a = 0; a < p_.accesses.size(); ++a) t_.line("long long ao{}{} = 0;", a, sfx);
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    if (p_.stores[j].how == StorePlan::How::vector) t_.line("long long so{}{} = 0;", j, sfx);
  }
  for (ir::ValueId id : row_nodes()) {
    t_.line("{} rs{}{}[VR];", cuda::reg_type(k_.node(id).type.dtype), id, sfx);
  }
}

// Tile `tile`: its chunk and row tile (chunk-major, so that predecessors come first), row
// validity, the offsets of row r0 and the per-row scalars. An empty `tile`: the chunk and row tile
// are given (tile_c, tile_rt: the ticket's thread divided it once for the CTA).
void Emitter::emit_row_assign(const std::string& sfx, const std::string& tile) {
  if (tile.empty()) {
    t_.line("c{0} = tile_c;", sfx);
    t_.line("rt{0} = tile_rt;", sfx);
  } else {
    t_.line("c{0} = {1} / RT;", sfx, tile);
    t_.line("rt{0} = {1} - c{0} * RT;", sfx, tile);
  }
  t_.line("r0{0} = rt{0} * TD + rr0;", sfx);
  t_.line("qt{0} = static_cast<kdsl_pos>(c{0} * CL);  // the tile's first position", sfx);
  t_.line("#pragma unroll");
  t_.line("for (int v = 0; v < VR; ++v) rv{0}[v] = r0{0} < p.rows;  // VR divides the rows", sfx);
  for (size_t a = 0; a < p_.accesses.size(); ++a) {
    t_.line("ao{0}{2} = kdsl_ao{0}_{1}(p, r0{2});", a, sym_, sfx);
  }
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    if (p_.stores[j].how == StorePlan::How::vector) {
      t_.line("so{0}{2} = kdsl_so{0}_{1}(p, r0{2});", j, sym_, sfx);
    }
  }
  std::vector<ir::ValueId> rows = row_nodes();
  if (rows.empty()) return;
  t_.line("#pragma unroll");
  t_.line("for (int v = 0; v < VR; ++v) {{");
  t_.in();
  for (size_t l = 0; l < k_.loop.size(); ++l) t_.line("long long i{} = 0;", l);
  row_index_code(fmt::format("r0{} + v", sfx), "i", "");
  for (ir::ValueId id : rows) {
    const ir::Node& n = k_.node(id);
    if (n.op == Op::load) {
      std::string v = cuda::from_storage(
          n.type.dtype, fmt::format("t{}[{}]", n.index, offset(n.index, n.view, "")));
      t_.line("rs{}{}[v] = rv{}[v] ? {} : {};", id, sfx, sfx, v, cuda::zero(n.type.dtype));
      continue;
    }
    std::vector<std::string> args;
    std::vector<DType> dts;
    for (ir::ValueId a : n.args) {
      args.push_back(p_.where[a] == Where::row ? fmt::format("rs{}{}[v]", a, sfx) : scalar(a));
      dts.push_back(k_.node(a).type.dtype);
    }
    t_.line("rs{}{}[v] = {};", id, sfx, cuda::op_expr(k_, n, args, dts));
  }
  t_.out();
  t_.line("}}");
}

// The current tile's row values := the next tile's.
void Emitter::emit_row_copy() {
  t_.line("c = c_n; rt = rt_n; r0 = r0_n; qt = qt_n;");
  t_.line("#pragma unroll");
  t_.line("for (int v = 0; v < VR; ++v) rv[v] = rv_n[v];");
  for (size_t a = 0; a < p_.accesses.size(); ++a) t_.line("ao{0} = ao{0}_n;", a);
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    if (p_.stores[j].how == StorePlan::How::vector) t_.line("so{0} = so{0}_n;", j);
  }
  for (ir::ValueId id : row_nodes()) {
    t_.line("#pragma unroll");
    t_.line("for (int v = 0; v < VR; ++v) rs{0}[v] = rs{0}_n[v];", id);
  }
}

// ok: processing-order position `q` read at shift `delta` is inside the sequence and the
// thread's row is a row of the tensor; pp (when `need_pp` or a shift needs it): its physical
// position. Unshifted, pp is inside exactly when 0 <= q < L, and q is never negative.
void Emitter::emit_position(const std::string& q, int delta, const std::string& sfx, bool need_pp) {
  if (need_pp || delta != 0) {
    t_.line("const kdsl_pos pp = (REV ? L - 1 - {0} : {0}) - ({1});", q, delta);
  }
  if (delta == 0) {
    t_.line("const bool ok = (ALL_VALID || {} < L) && rv{}[0];", q, sfx);
  } else {
    t_.line(
        "const bool ok = (ALL_VALID || {} < L) && static_cast<kdsl_upos>(pp) < "
        "static_cast<kdsl_upos>(L) && rv{}[0];",
        q, sfx);
  }
}

// Opens a loop over the VP positions from q0, each with its pp and ok (the caller closes it).
void Emitter::emit_position_loop(int delta, const std::string& sfx) {
  t_.line("#pragma unroll");
  t_.line("for (int vp = 0; vp < VP; ++vp) {{");
  t_.in();
  t_.line("const kdsl_pos q = q0 + vp;");
  emit_position("q", delta, sfx, true);
}

// pl: the first physical position of the VP positions from q0 (scan.rows, vector accesses).
void Emitter::emit_vector_position(int delta, const std::string& sfx) {
  t_.line("const kdsl_pos pl = (REV ? L - q0 - VP : q0) - ({});", delta);
  t_.line("const bool ok = (ALL_VALID || q0 < L) && pl >= 0 && pl + VP <= L && rv{}[0];", sfx);
}

// The unshifted access of the same tensor and view whose registers hold access `a`'s elements
// at a thread's other steps, or -1. A thread's steps are consecutive positions (scan.columns, one
// position per access), so an access at shift d reads at step j what the unshifted one read at
// step j + SH (SH = d on a reverse scan, -d on a forward one): only the |d| steps whose partner
// falls outside the thread's steps are loaded; the rest are copied (emit_shift_copies). This
// takes rg_lru_bwd's second load of gate_a (at t + 1) from 8 loads a thread and tile to 1.
// Not when the loads are pipelined (the next tile's go to other arrays). A copied step beyond
// the sequence's end may hold an element where a load would have put zero; every use of such a
// step is masked (its position is outside the sequence).
int Emitter::shift_source(int a) const {
  const Access& x = p_.accesses[a];
  if (!s_.columns || !s_.blocked || pipelined() || s_.vp != 1 || x.delta == 0 ||
      std::abs(x.delta) >= s_.t) {
    return -1;
  }
  for (size_t b = 0; b < p_.accesses.size(); ++b) {
    const Access& y = p_.accesses[b];
    if (y.tensor == x.tensor && y.view == x.view && y.delta == 0) return static_cast<int>(b);
  }
  return -1;
}

// The register array of access `a` in the non-pipelined tile: R<a> when phase A loads it, else
// RB<a> (both issued when the tile starts).
std::string Emitter::array_of(int a) const {
  return fmt::format("{}{}", loaded_in_b(a) ? "RB" : "R", a);
}

// After every load of the tile is issued: the shifted accesses' elements at the steps their
// unshifted partner read (shift_source).
void Emitter::emit_shift_copies() {
  for (size_t a = 0; a < p_.accesses.size(); ++a) {
    const int b = shift_source(static_cast<int>(a));
    if (b < 0) continue;
    const std::string sh = fmt::format("SH{}", a);
    t_.line("#pragma unroll");
    t_.line("for (int j = 0; j < T; ++j) {{  // {} at the other steps: {}'s registers",
            array_of(static_cast<int>(a)), array_of(b));
    t_.in();
    t_.line("if (j + {0} >= 0 && j + {0} < T) {{", sh);
    t_.in();
    t_.line("#pragma unroll");
    t_.line("for (int v = 0; v < VR * VP; ++v) {}[j][v] = {}[j + {}][v];",
            array_of(static_cast<int>(a)), array_of(b), sh);
    t_.out();
    t_.line("}}");
    t_.out();
    t_.line("}}");
  }
}

// Loads of access `a` for all T steps into R<a>[T][VR * VP] (storage format), zero where the row
// or the position is outside the tensor (steps copied from a partner: shift_source).
void Emitter::emit_load(int a, const std::string& sfx, const std::string& array, bool declare) {
  const Access& x = p_.accesses[a];
  const DType dt = k_.tensors[x.tensor].dtype;
  const std::string st = cuda::storage_type(dt);
  const std::string base = fmt::format("t{}", x.tensor);
  const std::string vs = vstride(x.tensor, x.view);
  if (declare) t_.line("{} {}[T][VR * VP];", st, array);
  auto q0 = [&]() { t_.line("const kdsl_pos q0 = {};", q0_expr(sfx, "j")); };
  if (s_.columns) {
    // 16-byte accesses of VR rows when the launch allows them; else one row at a time. Both
    // step a pointer from the thread's first position (emit_column_pointer).
    const std::string ptr = fmt::format("ap{}", a);
    const bool copied = sfx.empty() && shift_source(a) >= 0;
    if (copied) t_.line("constexpr int SH{} = REV ? {} : -({});", a, x.delta, x.delta);
    auto steps = [&](bool fast) {
      t_.line("#pragma unroll");
      t_.line("for (int j = 0; j < T; ++j) {{");
      t_.in();
      if (copied) {
        t_.line("if (j + SH{0} < 0 || j + SH{0} >= T) {{  // else copied", a);
        t_.in();
      }
      q0();
      emit_position("q0", x.delta, sfx, false);
      if (!fast) {
        t_.line("{}[j][0] = ok ? *{} : {}{{}};", array, ptr, st);
      } else if (uses_fast(x.view)) {
        t_.line("if (ok) {{");
        t_.in();
        t_.line("kdsl_sc_vld<VR>({}, &{}[j][0]);", ptr, array);
        t_.out();
        t_.line("}} else {{");
        t_.in();
        t_.line("#pragma unroll");
        t_.line("for (int v = 0; v < VR; ++v) {}[j][v] = {}{{}};", array, st);
        t_.out();
        t_.line("}}");
      } else {
        t_.line("const {} y = ok ? *{} : {}{{}};", st, ptr, st);
        t_.line("#pragma unroll");
        t_.line("for (int v = 0; v < VR; ++v) {}[j][v] = y;", array);
      }
      if (copied) {
        t_.out();
        t_.line("}}");
      }
      t_.line("{}", column_step(ptr));
      t_.out();
      t_.line("}}");
    };
    t_.line("{{");
    t_.in();
    emit_column_pointer(ptr, fmt::format("const {}*", st), base, fmt::format("ao{}{}", a, sfx),
                        x.delta, sfx, vs);
    t_.line("if constexpr (FAST) {{");
    t_.in();
    steps(true);
    t_.out();
    t_.line("}} else {{  // one row per thread (VR = 1), element accesses");
    t_.in();
    steps(false);
    t_.out();
    t_.line("}}");
    t_.out();
    t_.line("}}");
    return;
  }
  t_.line("#pragma unroll");
  t_.line("for (int j = 0; j < T; ++j) {{");
  t_.in();
  q0();
  if (s_.vector_fast && x.delta % s_.vp == 0) {
    emit_vector_position(x.delta, sfx);
    t_.line("if (ok) {{");
    t_.in();
    t_.line("{} tmp[VP];", st);
    t_.line("kdsl_sc_vld<VP>({} + ao{}{} + pl, tmp);", base, a, sfx);
    t_.line("#pragma unroll");
    t_.line("for (int vp = 0; vp < VP; ++vp) {}[j][vp] = tmp[REV ? VP - 1 - vp : vp];", array);
    t_.out();
    t_.line("}} else {{");
    t_.in();
    t_.line("#pragma unroll");
    t_.line("for (int vp = 0; vp < VP; ++vp) {}[j][vp] = {}{{}};", array, st);
    t_.out();
    t_.line("}}");
  } else {
    emit_position_loop(x.delta, sfx);
    t_.line("{}[j][vp] = ok ? {}[ao{}{} + pp * {}] : {}{{}};", array, base, a, sfx, vs, st);
    t_.out();
    t_.line("}}");
  }
  t_.out();
  t_.line("}}");
}

// The staged pipeline's copies of access `a`: CB<a> bytes each (VR rows or VP positions in one
// copy where the plain loads make one 16-byte access, else one element), staged when that is a
// size cp.async copies (4, 8 or 16 bytes; else the access is loaded into registers as in the
// register pipeline).
void Emitter::emit_stage_constants() {
  for (size_t a = 0; a < p_.accesses.size(); ++a) {
    const Access& x = p_.accesses[a];
    if (!x.phase_a) continue;
    const size_t es = dtype_size(k_.tensors[x.tensor].dtype);
    std::string cb;
    if (s_.columns) {
      cb = uses_fast(x.view) ? fmt::format("(FAST ? VR : 1) * {}", es) : std::to_string(es);
    } else {
      cb = s_.vector_fast && x.delta % s_.vp == 0 ? fmt::format("VP * {}", es) : std::to_string(es);
    }
    t_.line("constexpr int CB{0} = {1};  // bytes per cp.async copy of access {0}", a, cb);
    t_.line("constexpr bool AS{0} = CB{0} == 4 || CB{0} == 8 || CB{0} == 16;", a);
  }
}

void Emitter::emit_staged_load(int a, const std::string& sfx) {
  const Access& x = p_.accesses[a];
  const std::string base = fmt::format("t{}", x.tensor);
  const std::string vs = vstride(x.tensor, x.view);
  auto copy = [&](const std::string& slot, const std::string& from) {
    t_.line(
        "kdsl_cp_async<CB{0}>(&sm.stg{0}[j][tid][{1}], ok ? static_cast<const void*>({2}) : "
        "static_cast<const void*>({3}), ok);",
        a, slot, from, base);
  };
  auto at = [&](const std::string& offset) {
    return fmt::format("{} + ao{}{} + {}", base, a, sfx, offset);
  };
  const std::string ptr = fmt::format("ap{}", a);
  t_.line("if constexpr (AS{}) {{", a);
  t_.in();
  if (s_.columns) {
    const std::string st = cuda::storage_type(k_.tensors[x.tensor].dtype);
    emit_column_pointer(ptr, fmt::format("const {}*", st), base, fmt::format("ao{}{}", a, sfx),
                        x.delta, sfx, vs);
  }
  t_.line("#pragma unroll");
  t_.line("for (int j = 0; j < T; ++j) {{");
  t_.in();
  t_.line("const kdsl_pos q0 = {};", q0_expr(sfx, "j"));
  if (s_.columns) {
    emit_position("q0", x.delta, sfx, false);
    copy("0", ptr);
    t_.line("{}", column_step(ptr));
  } else if (s_.vector_fast && x.delta % s_.vp == 0) {
    emit_vector_position(x.delta, sfx);
    copy("0", at("pl"));
  } else {
    emit_position_loop(x.delta, sfx);
    copy("vp", at(fmt::format("pp * {}", vs)));
    t_.out();
    t_.line("}}");
  }
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}} else {{");
  t_.in();
  emit_load(a, sfx, fmt::format("R{}", a), false);
  t_.out();
  t_.line("}}");
}

void Emitter::emit_staged_loads(const std::string& sfx) {
  for (size_t a = 0; a < p_.accesses.size(); ++a) {
    if (p_.accesses[a].phase_a) emit_staged_load(static_cast<int>(a), sfx);
  }
}

// The current tile's staged elements: shared memory -> R<a> (what the plain loads would give).
void Emitter::emit_stage_reads() {
  t_.line("kdsl_cp_wait();  // this thread's copies (it reads only its own slots)");
  for (size_t a = 0; a < p_.accesses.size(); ++a) {
    const Access& x = p_.accesses[a];
    if (!x.phase_a) continue;
    t_.line("if constexpr (AS{}) {{", a);
    t_.in();
    t_.line("#pragma unroll");
    t_.line("for (int j = 0; j < T; ++j) {{");
    t_.in();
    t_.line("#pragma unroll");
    if (s_.columns) {
      t_.line("for (int v = 0; v < VR; ++v) R{0}[j][v] = sm.stg{0}[j][tid][{1}];", a,
              uses_fast(x.view) ? "v" : "0");
    } else if (s_.vector_fast && x.delta % s_.vp == 0) {
      t_.line(
          "for (int vp = 0; vp < VP; ++vp) R{0}[j][vp] = sm.stg{0}[j][tid][REV ? VP - 1 - vp : "
          "vp];",
          a);
    } else {
      t_.line("for (int vp = 0; vp < VP; ++vp) R{0}[j][vp] = sm.stg{0}[j][tid][vp];", a);
    }
    t_.out();
    t_.line("}}");
    t_.out();
    t_.line("}}");
  }
}

// Phase A's loads go to R<a>, phase B's to RB<a>. Pipelined (look-back mode), phase A's loads are
// the next tile's, so every access phase B needs is loaded again into RB; else an access both
// phases need is loaded once, into R.
bool Emitter::loaded_in_b(int a) const {
  const Access& x = p_.accesses[a];
  return x.phase_b && (pipelined() || !x.phase_a);
}

void Emitter::emit_loads(bool phase_a, const std::string& sfx, bool declare) {
  for (size_t a = 0; a < p_.accesses.size(); ++a) {
    const auto i = static_cast<int>(a);
    if (phase_a ? p_.accesses[a].phase_a : loaded_in_b(i)) {
      emit_load(i, sfx, fmt::format("{}{}", phase_a ? "R" : "RB", a), declare);
    }
  }
}

// The values phase A computes that phase B would compute again (ScanSchedule::keep_math):
// transcendental results, which phase B needs at the same position or within the thread's steps
// (blocked steps of one position, so that step j + d holds the position d steps on). Phase A
// writes each into K<i>[j][v * VP + vp]; phase B reads it there (elem), and computes it only at
// steps outside the thread's (a shift across the thread's first or last step).
void Emitter::plan_kept() {
  if (!s_.keep_math || !s_.blocked || s_.vp != 1 || pipelined()) return;
  for (const At& a : p_.phase_a) {
    if (!is_transcendental(k_.node(a.first))) continue;
    for (const At& b : p_.phase_b) {
      if (b.first != a.first) continue;
      kept_.push_back(a);
      break;
    }
  }
}

// The step offset d at which kept value i holds (node, delta) of step j: j + d (any sign; the
// caller tests the range). A value at delta is the node's value delta positions before the
// element in sequence order (tp - delta); steps run in processing order.
int Emitter::kept_step(size_t i, int delta) const {
  const int da = kept_[i].second;
  return s_.reverse ? delta - da : da - delta;
}

// The value of vector node `id` at physical position tp - delta of the current element, as a
// variable name; its statements are emitted on first use (memo holds what is in scope).
// In phase B a kept value (plan_kept) is read from phase A's registers where they hold it.
std::string Emitter::elem(ir::ValueId id, int delta, std::map<At, std::string>& memo) {
  if (p_.where[id] != Where::vec) return scalar(id);
  auto it = memo.find({id, delta});
  if (it != memo.end()) return it->second;
  const ir::Node& n = k_.node(id);
  std::string name = delta == 0
                         ? fmt::format("x{}", id)
                         : fmt::format("x{}{}{}", id, delta > 0 ? "_p" : "_m", std::abs(delta));
  const char* rt = cuda::reg_type(n.type.dtype);
  if (in_phase_b_ && !keep_off_) {
    for (size_t i = 0; i < kept_.size(); ++i) {
      if (kept_[i].first != id) continue;
      const int d = kept_step(i, delta);
      if (d <= -s_.t || d >= s_.t) continue;
      // Kept from phase A where step j + d is the thread's; computed here where it is not (the
      // test folds once the steps are unrolled).
      const std::string kn = name + "_k";
      t_.line("{} {};", rt, kn);
      t_.line("if (j + ({0}) >= 0 && j + ({0}) < T) {{", d);
      t_.in();
      t_.line("{} = K{}[j + ({})][v * VP + vp];", kn, i, d);
      t_.out();
      t_.line("}} else {{");
      t_.in();
      std::map<At, std::string> inner = memo;  // the block's names end with it
      keep_off_ = true;
      const std::string v = elem(id, delta, inner);
      keep_off_ = false;
      t_.line("{} = {};", kn, v);
      t_.out();
      t_.line("}}");
      memo[{id, delta}] = kn;
      return kn;
    }
  }
  switch (n.op) {
    case Op::load: {
      int a = p_.access_of.at({id, delta});
      const char* array = in_phase_b_ && loaded_in_b(a) ? "RB" : "R";
      t_.line("const {} {} = {};", rt, name,
              cuda::from_storage(n.type.dtype, fmt::format("{}{}[j][v * VP + vp]", array, a)));
      break;
    }
    case Op::position:
      t_.line("const long long {} = tp - ({});", name, delta);
      break;
    case Op::shift: {
      std::string inner = elem(n.args[0], delta + n.index, memo);
      int d = delta + n.index;
      t_.line(
          "const {} {} = static_cast<kdsl_upos>(tp - ({})) < static_cast<kdsl_upos>(L) ? {} : "
          "{};",
          rt, name, d, inner, scalar(n.args[1]));
      break;
    }
    case Op::extract: {
      int si = p_.state_of.at(n.args[0]);
      t_.line("const {} {} = o{}.c{};", rt, name, si, n.index);
      break;
    }
    default: {
      std::vector<std::string> args;
      std::vector<DType> dts;
      for (ir::ValueId a : n.args) {
        args.push_back(elem(a, delta, memo));
        dts.push_back(k_.node(a).type.dtype);
      }
      t_.line("const {} {} = {};", rt, name, cuda::op_expr(k_, n, args, dts));
      break;
    }
  }
  memo[{id, delta}] = name;
  return name;
}

// Inclusive scan of state i's value `x` across the LP lanes of the row group (Hillis-Steele);
// leaves `before` (the exclusive prefix: empty in lane 0) and `tot` (the group's total).
void Emitter::emit_lane_scan(size_t i, const std::string& x) {
  const std::string ty = state_type(i);
  t_.line("{} x = {};", ty, x);
  t_.line("#pragma unroll");
  t_.line("for (int d = 1; d < LP; d *= 2) {{");
  t_.in();
  t_.line("const {} y = kdsl_sc_shfl_up(x, d * LR);", ty);
  t_.line("if (lp >= d) x = {}_op(y, x);", ty);
  t_.out();
  t_.line("}}");
  t_.line("const {0} ex = kdsl_sc_shfl_up(x, LR);", ty);
  t_.line("const {0} before = lp > 0 ? ex : {0}_empty();", ty);
  t_.line("const {} tot = kdsl_sc_shfl_idx(x, (LP - 1) * LR + lr);", ty);
}

// State i's element at the current position, as an expression of its type.
std::string Emitter::element_state(size_t i, std::map<At, std::string>& memo) {
  const State& st = p_.states[i];
  std::string e = fmt::format("{}{{", state_type(i));
  for (size_t c = 0; c < st.args.size(); ++c) e += (c ? ", " : "") + elem(st.args[c], 0, memo);
  if (st.custom()) e += ", 1";
  return e + "}";
}

void Emitter::emit_phase_a() {
  t_.line("// phase A: the carried states' elements, scanned in the thread, across lanes, over");
  if (rescan()) {
    t_.line("// steps; only the thread's total is kept (phase B scans its elements again)");
  } else {
    t_.line("// steps; s: each element's prefix within the warp (exclusive for exclusive scans)");
  }
  for (size_t i = 0; i < p_.states.size(); ++i) {
    if (!rescan()) t_.line("{} s{}[T][VR * VP];", state_type(i), i);
    if (s_.blocked)
      t_.line("{} pr{}[VR];  // the prefix before the thread within the warp", state_type(i), i);
  }
  if (p_.states.empty()) return;
  for (size_t i = 0; i < kept_.size(); ++i) {
    const ir::ValueId id = kept_[i].first;
    t_.line("{} K{}[T][VR * VP];  // x{} (delta {}) for phase B",
            cuda::reg_type(k_.node(id).type.dtype), i, id, kept_[i].second);
  }
  t_.line("#pragma unroll");
  t_.line("for (int v = 0; v < VR; ++v) {{");
  t_.in();
  for (size_t i = 0; i < p_.states.size(); ++i) {
    t_.line("{0} cy{1} = {0}_empty();  // the carry over the steps", state_type(i), i);
  }
  t_.line("#pragma unroll");
  t_.line("for (int j = 0; j < T; ++j) {{");
  t_.in();
  t_.line("const kdsl_pos q0 = {};", q0_expr(""));
  for (size_t i = 0; i < p_.states.size(); ++i) t_.line("{} a{};", state_type(i), i);
  t_.line("#pragma unroll");
  t_.line("for (int vp = 0; vp < VP; ++vp) {{");
  t_.in();
  t_.line("const kdsl_pos q = q0 + vp;");
  t_.line("const bool qv = ALL_VALID || q < L;");
  t_.line("const kdsl_pos tp = REV ? L - 1 - q : q;");
  t_.line("(void)tp;");
  std::map<At, std::string> memo;
  for (size_t i = 0; i < p_.states.size(); ++i) {
    const std::string ty = state_type(i);
    t_.line("const {} e{} = {};", ty, i, element_state(i, memo));
    t_.line("if (vp == 0) {{");
    t_.in();
    t_.line("a{0} = qv ? e{0} : {1}_empty();", i, ty);
    t_.out();
    t_.line("}} else if (qv) {{");
    t_.in();
    t_.line("a{0} = {1}_op(a{0}, e{0});", i, ty);
    t_.out();
    t_.line("}}");
    if (!rescan()) t_.line("s{0}[j][v * VP + vp] = a{0};", i);
  }
  for (size_t i = 0; i < kept_.size(); ++i) {
    // The states' elements computed it already (elem returns their name); else it is computed
    // here, from phase A's loads.
    const std::string v = elem(kept_[i].first, kept_[i].second, memo);
    t_.line("K{}[j][v * VP + vp] = {};", i, v);
  }
  t_.out();
  t_.line("}}");
  for (size_t i = 0; i < p_.states.size(); ++i) {
    const std::string ty = state_type(i);
    if (rescan()) {
      t_.line("cy{0} = j == 0 ? a{0} : {1}_op(cy{0}, a{0});", i, ty);
      continue;
    }
    if (s_.blocked) {
      // The thread's own positions are consecutive: a sequential scan over its steps now, the
      // lane scan once after them.
      t_.line("if (j > 0) {{");
      t_.in();
      t_.line("#pragma unroll");
      t_.line(
          "for (int vp = 0; vp < VP; ++vp) s{0}[j][v * VP + vp] = {1}_op(cy{0}, s{0}[j][v * VP + "
          "vp]);",
          i, ty);
      t_.out();
      t_.line("}}");
      t_.line("cy{0} = s{0}[j][v * VP + VP - 1];", i);
      continue;
    }
    t_.line("{{");
    t_.in();
    if (s_.lp > 1) {
      emit_lane_scan(i, fmt::format("a{}", i));
      t_.line("const {0} pre = lp > 0 ? {0}_op(cy{1}, before) : cy{1};", ty, i);
      t_.line("cy{0} = {1}_op(cy{0}, tot);", i, ty);
    } else {
      t_.line("const {} pre = cy{};", ty, i);
      t_.line("cy{0} = {1}_op(cy{0}, a{0});", i, ty);
    }
    emit_prefix_steps(i);
    t_.out();
    t_.line("}}");
  }
  t_.out();
  t_.line("}}");
  if (s_.blocked) {
    // s holds the thread's local inclusive prefixes and cy its total: scan the totals across the
    // lanes; what comes before the thread (pr) joins the warp's prefix in phase B, once per row.
    for (size_t i = 0; i < p_.states.size(); ++i) {
      if (s_.lp > 1) {
        t_.line("{{");
        t_.in();
        emit_lane_scan(i, fmt::format("cy{}", i));
        t_.line("pr{}[v] = before;", i);
        t_.line("cy{} = tot;", i);
        t_.out();
        t_.line("}}");
      } else {
        t_.line("pr{0}[v] = {1}_empty();", i, state_type(i));
      }
    }
  }
  if (warp_smem()) {
    t_.line("if (lp == 0) {{");
    t_.in();
    for (size_t i = 0; i < p_.states.size(); ++i) t_.line("sm.w{0}[wp][rr0 + v] = cy{0};", i);
    if (p_.lookback) {
      for (size_t i = 0; i < p_.states.size(); ++i) {
        if (!p_.states[i].inits.empty()) {
          t_.line("if (c == 0 && wp == 0) sm.in{}[rr0 + v] = {};", i, init_state(i));
        }
      }
    }
    t_.out();
    t_.line("}}");
  }
  t_.out();
  t_.line("}}");
}

// s[j][...] = pre (+) s[j][...] for the VP elements of step j (exclusive scans: shifted by one
// element).
void Emitter::emit_prefix_steps(size_t i) {
  const std::string ty = state_type(i);
  t_.line("#pragma unroll");
  if (p_.states[i].exclusive) {
    t_.line("for (int vp = VP - 1; vp > 0; --vp) {{");
    t_.in();
    t_.line("s{0}[j][v * VP + vp] = {1}_op(pre, s{0}[j][v * VP + vp - 1]);", i, ty);
    t_.out();
    t_.line("}}");
    t_.line("s{}[j][v * VP] = pre;", i);
  } else {
    t_.line(
        "for (int vp = 0; vp < VP; ++vp) s{0}[j][v * VP + vp] = {1}_op(pre, s{0}[j][v * VP + vp]);",
        i, ty);
  }
}

// Warp aggregates to shared memory, then (with several chunks) the decoupled look-back: thread
// rr < TD works on row rr of the tile.
// The tile's exclusive prefix comes from the chunks before it in the same row tile: the nearest
// one with an inclusive prefix (flag 2), then the aggregates (flag 1) after it, combined left to
// right -- exactly incl[c - 1] of the chained definition incl[c] = incl[c - 1] (+) agg[c],
// whichever tile is found, so the results are deterministic. The CTA looks at KW predecessors'
// flags at once and loads their states (row rr by the threads tid % TD == rr) in parallel.
//
// First a non-blocking peek while the tile's own loads are in flight: when every predecessor up
// to an inclusive one has published, the states are loaded now and the tile will only publish its
// inclusive prefix.
void Emitter::emit_lookback_setup() {
  if (!p_.lookback) return;
  if (packed()) {
    t_.line("constexpr int KW = {};  // aggregates kept in shared memory per row",
            lookback_window());
    t_.line("const long long tile = c * RT + rt;");
    t_.line("uint4* pk = reinterpret_cast<uint4*>(p.ws0 + 16);  // packed words, (tile, row)");
    return;
  }
  t_.line("// look-back: a non-blocking peek at the previous chunks while the loads are in flight");
  t_.line("constexpr int KW = {};  // predecessors examined at once", lookback_window());
  t_.line("unsigned* flags = reinterpret_cast<unsigned*>(p.ws0 + 16);");
  t_.line("const long long tile = c * RT + rt, ntiles = RT * {}LL;", s_.chunks);
  t_.line("unsigned char* sbase = p.ws1;");
  for (size_t i = 0; i < p_.states.size(); ++i) {
    const std::string ty = state_type(i);
    t_.line("{0}* agg{1} = reinterpret_cast<{0}*>(sbase);", ty, i);
    t_.line("{0}* inc{1} = agg{1} + ntiles * TD;", ty, i);
    t_.line(
        "sbase = reinterpret_cast<unsigned char*>(  // the next state's arrays, 16-byte aligned");
    t_.line("    (reinterpret_cast<unsigned long long>(inc{} + ntiles * TD) + 15) & ~15ULL);", i);
  }
  t_.line(
      "long long found = -1;  // the chunk of the nearest inclusive prefix (-1: not yet known)");
  t_.line("if (c > 0) {{");
  t_.in();
  t_.line(
      "if (tid < KW) sm.lbs[tid] = c - 1 - tid >= 0 ? kdsl_sc_ld_acquire(flags + (c - 1 - tid) * "
      "RT + rt) : 0u;");
  t_.line("__syncthreads();");
  t_.line("int k = 0;");
  t_.line("while (k < KW && sm.lbs[k] == 1u) ++k;");
  t_.line("if (k < KW && sm.lbs[k] == 2u) found = c - 1 - k;");
  t_.line("if (found >= 0) {{  // load the states now: incl[found], agg[found + 1 .. c - 1]");
  t_.in();
  emit_state_loads("0");
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}}");
  t_.line("const bool preloaded = found >= 0;");
}

// Loads states w0 + j of the look-back (j = tid / TD < KW; state 0 is incl[found], state q > 0 is
// agg[found + q]) into shared memory, for row tid % TD.
void Emitter::emit_state_loads(const std::string& w0) {
  t_.line("{{");
  t_.in();
  t_.line("const int j = tid / TD, rr = tid % TD;");
  t_.line("const long long q = ({}) + j, at = ((found + q) * RT + rt) * TD + rr;", w0);
  t_.line("if (j < KW && q < c - found) {{");
  t_.in();
  for (size_t i = 0; i < p_.states.size(); ++i) {
    t_.line("sm.lbv{0}[j][rr] = q == 0 ? kdsl_sc_ldcg(inc{0} + at) : kdsl_sc_ldcg(agg{0} + at);",
            i);
  }
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}}");
}

int Emitter::lookback_window() const {
  int auto_window = std::max(1, std::min(32, s_.threads() / s_.td()));
  return s_.window > 0 ? std::min(s_.window, auto_window) : auto_window;
}

// After phase A (every warp's aggregate in shared memory): the tile's aggregate per row; unless
// the peek found everything, publish it (flag 1) and look back, waiting for flags; then publish
// the inclusive prefix (flag 2). Data are written, then the CTA synchronizes, then one thread
// releases the flag (the release is cumulative over the barrier, PTX memory model). Last, the
// warps' aggregates in sm.w become the warps' prefixes for phase B (emit_warp_prefixes).
void Emitter::emit_lookback(const std::function<void()>& between) {
  if (p_.states.empty() || !warp_smem()) {
    between();
    return;
  }
  t_.line("// tile look-back");
  t_.line("__syncthreads();");
  between();
  if (!p_.lookback) return;
  if (packed()) {
    emit_packed_lookback();
    return;
  }
  for (size_t i = 0; i < p_.states.size(); ++i) {
    const std::string ty = state_type(i);
    t_.line("{0} ag{1} = {0}_empty(), ex{1} = {0}_empty();", ty, i);
    t_.line("if (tid < TD) {{");
    t_.in();
    t_.line("ag{0} = sm.w{0}[0][tid];", i);
    t_.line("#pragma unroll");
    t_.line("for (int w = 1; w < WP; ++w) ag{0} = {1}_op(ag{0}, sm.w{0}[w][tid]);", i, ty);
    if (!p_.states[i].inits.empty()) t_.line("if (c == 0) ex{0} = sm.in{0}[tid];", i);
    t_.out();
    t_.line("}}");
  }
  t_.line("if (c > 0) {{");
  t_.in();
  t_.line("if (!preloaded) {{  // publish the aggregate, then wait for the predecessors");
  t_.in();
  t_.line("if (tid < TD) {{");
  t_.in();
  for (size_t i = 0; i < p_.states.size(); ++i) t_.line("agg{0}[tile * TD + tid] = ag{0};", i);
  t_.out();
  t_.line("}}");
  t_.line("__syncthreads();");
  t_.line("if (tid == 0) kdsl_sc_st_release(flags + tile, 1u);");
  t_.line("for (long long base = c - 1;; base -= KW) {{");
  t_.in();
  t_.line(
      "if (tid < KW) sm.lbs[tid] = base - tid >= 0 ? kdsl_sc_wait(flags + (base - tid) * RT + rt) "
      ": 0u;");
  t_.line("__syncthreads();");
  t_.line("int k = 0;");
  t_.line("while (k < KW && sm.lbs[k] == 1u) ++k;");
  t_.line("const bool hit = k < KW && sm.lbs[k] == 2u;");
  t_.line("__syncthreads();");
  t_.line("if (hit) {{");
  t_.in();
  t_.line("found = base - k;");
  t_.line("break;");
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}}");
  t_.line(
      "// combine incl[found], agg[found + 1], ..., agg[c - 1] from left to right, KW at a time");
  t_.line("for (long long w0 = 0; w0 < c - found; w0 += KW) {{");
  t_.in();
  t_.line("if (!(preloaded && w0 == 0)) {{");
  t_.in();
  emit_state_loads("w0");
  t_.line("__syncthreads();");
  t_.out();
  t_.line("}}");
  t_.line("if (tid < TD) {{");
  t_.in();
  t_.line("for (int jj = 0; jj < KW && w0 + jj < c - found; ++jj) {{");
  t_.in();
  for (size_t i = 0; i < p_.states.size(); ++i) {
    t_.line("ex{0} = w0 + jj == 0 ? sm.lbv{0}[jj][tid] : {1}_op(ex{0}, sm.lbv{0}[jj][tid]);", i,
            state_type(i));
  }
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}}");
  t_.line("__syncthreads();");
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}}");
  t_.line("if (tid < TD) {{");
  t_.in();
  for (size_t i = 0; i < p_.states.size(); ++i) {
    t_.line("inc{0}[tile * TD + tid] = {1}_op(ex{0}, ag{0});", i, state_type(i));
  }
  t_.out();
  t_.line("}}");
  t_.line("__syncthreads();");
  t_.line("if (tid == 0) kdsl_sc_st_release(flags + tile, 2u);");
  // The warps' prefixes after the inclusive prefix is published: the next chunks wait on it.
  t_.line("if (tid < TD) {{");
  t_.in();
  for (size_t i = 0; i < p_.states.size(); ++i) emit_warp_prefixes(i);
  t_.out();
  t_.line("}}");
  t_.line("__syncthreads();");
}

// After the look-back, in thread tid < TD (row tid of the tile): state i's prefix before each
// warp's first position, ex (+) agg[warp 0] (+) ... (+) agg[warp w - 1], written over the warps'
// aggregates sm.w<i>[w][tid] for phase B, which then reads its warp's one value instead of
// combining the WP - 1 aggregates before it in every thread (a chain of shared-memory loads
// and combines per row of the thread).
void Emitter::emit_warp_prefixes(size_t i) {
  const std::string ty = state_type(i);
  t_.line("{{");
  t_.in();
  t_.line("{} y = ex{};", ty, i);
  t_.line("#pragma unroll");
  t_.line("for (int w = 0; w < WP; ++w) {{");
  t_.in();
  t_.line("const {} a = sm.w{}[w][tid];", ty, i);
  t_.line("sm.w{}[w][tid] = y;", i);
  t_.line("if (w + 1 < WP) y = {}_op(y, a);", ty);
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}}");
}

namespace {

// 32-bit words of a state in a packed look-back word (its components, and the emptiness flag of
// a user combine function); -1 when a component is not 32 bits wide in registers.
int packed_words(const State& st) {
  for (DType t : st.dtypes) {
    if (t != DType::f32 && t != DType::bf16 && t != DType::f16 && t != DType::i32) return -1;
  }
  return static_cast<int>(st.dtypes.size()) + (st.custom() ? 1 : 0);
}

}  // namespace

bool Emitter::packed() const {
  if (!p_.lookback || !s_.packed || p_.states.empty()) return false;
  int words = 0;
  for (const State& st : p_.states) {
    const int w = packed_words(st);
    if (w < 0) return false;
    words += w;
  }
  return words <= 3;
}

// The look-back with packed words, one thread per row (tid < TD), no barrier until the end: the
// tile publishes its aggregate (status 1), walks back over the previous chunks of its row until
// an inclusive prefix (status 2), keeping the aggregates passed (the first KW in shared memory,
// older ones read again: a word that has meanwhile become an inclusive prefix replaces what was
// combined so far), combines them from left to right -- exactly the bits of the chained
// definition incl[c] = incl[c - 1] (+) agg[c], whichever prefix it finds -- and publishes its
// inclusive prefix.
void Emitter::emit_packed_lookback() {
  std::vector<int> offs;  // each state's first word
  int words = 0;
  for (const State& st : p_.states) {
    offs.push_back(words);
    words += packed_words(st);
  }
  auto pack = [&](const std::string& w, const std::string& prefix) {
    for (size_t i = 0; i < p_.states.size(); ++i) {
      t_.line("memcpy(reinterpret_cast<unsigned*>(&{}) + {}, &{}{}, sizeof({}{}));", w, offs[i],
              prefix, i, prefix, i);
    }
  };
  auto unpack = [&](const std::string& w, const std::string& prefix) {
    for (size_t i = 0; i < p_.states.size(); ++i) {
      t_.line("{} {}{};", state_type(i), prefix, i);
      t_.line("memcpy(&{}{}, reinterpret_cast<const unsigned*>(&{}) + {}, sizeof({}{}));", prefix,
              i, w, offs[i], prefix, i);
    }
  };
  for (size_t i = 0; i < p_.states.size(); ++i) {
    t_.line("{0} ag{1} = {0}_empty(), ex{1} = {0}_empty();", state_type(i), i);
  }
  t_.line("if (tid < TD) {{");
  t_.in();
  for (size_t i = 0; i < p_.states.size(); ++i) {
    t_.line("ag{0} = sm.w{0}[0][tid];", i);
    t_.line("#pragma unroll");
    t_.line("for (int w = 1; w < WP; ++w) ag{0} = {1}_op(ag{0}, sm.w{0}[w][tid]);", i,
            state_type(i));
    if (!p_.states[i].inits.empty()) t_.line("if (c == 0) ex{0} = sm.in{0}[tid];", i);
  }
  t_.line("if (c > 0) {{");
  t_.in();
  t_.line("uint4 w = make_uint4(0u, 0u, 0u, 1u);");
  pack("w", "ag");
  t_.line("kdsl_sc_pk_st(pk + tile * TD + tid, w);");
  t_.line("long long j = c - 1;");
  t_.line("int n = 0;  // aggregates passed: chunks c - 1, ..., c - n");
  t_.line("for (;;) {{");
  t_.in();
  t_.line("w = kdsl_sc_pk_wait(pk + (j * RT + rt) * TD + tid);");
  t_.line("if (w.w == 2u) break;");
  t_.line("if (n < KW) sm.lbp[n][tid] = w;");
  t_.line("++n;");
  t_.line("--j;");
  t_.out();
  t_.line("}}");
  unpack("w", "e");
  for (size_t i = 0; i < p_.states.size(); ++i) t_.line("ex{0} = e{0};", i);
  t_.line("for (int q = n - 1; q >= 0; --q) {{  // chunk c - 1 - q, left to right");
  t_.in();
  t_.line(
      "const uint4 a = q < KW ? sm.lbp[q][tid] : kdsl_sc_pk_ld(pk + ((c - 1 - q) * RT + rt) * TD "
      "+ tid);");
  unpack("a", "s");
  for (size_t i = 0; i < p_.states.size(); ++i) {
    t_.line("ex{0} = a.w == 2u ? s{0} : {1}_op(ex{0}, s{0});", i, state_type(i));
  }
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}}");
  t_.line("uint4 w2 = make_uint4(0u, 0u, 0u, 2u);");
  for (size_t i = 0; i < p_.states.size(); ++i) {
    t_.line("const {0} in{1} = {0}_op(ex{1}, ag{1});", state_type(i), i);
  }
  pack("w2", "in");
  t_.line("kdsl_sc_pk_st(pk + tile * TD + tid, w2);");
  // The warps' prefixes after the inclusive prefix is published: the next chunks wait on it.
  for (size_t i = 0; i < p_.states.size(); ++i) emit_warp_prefixes(i);
  t_.out();
  t_.line("}}");
  t_.line("__syncthreads();");
}

void Emitter::emit_uniforms() {
  for (size_t i = 0; i < k_.nodes.size(); ++i) {
    if (p_.where[i] != Where::uniform) continue;
    const ir::Node& n = k_.nodes[i];
    const char* rt = cuda::reg_type(n.type.dtype);
    std::string v;
    switch (n.op) {
      case Op::param:
        v = n.type.dtype == DType::b8 ? fmt::format("(p.sc{} != 0)", n.index)
                                      : fmt::format("p.sc{}", n.index);
        break;
      case Op::shape:
        v = n.index == k_.vector_symbol ? fmt::format("{}LL", len_)
                                        : fmt::format("p.sym{}", n.index);
        break;
      case Op::load: {
        std::string off = "0LL";
        for (size_t ax = 0; ax < n.view.size(); ++ax) {
          if (n.view[ax].value != 0) {
            off += fmt::format(" + {}LL * p.st{}_{}", n.view[ax].value, n.index, ax);
          }
        }
        v = cuda::from_storage(n.type.dtype, fmt::format("t{}[{}]", n.index, off));
        break;
      }
      default: {
        std::vector<std::string> args;
        std::vector<DType> dts;
        for (ir::ValueId a : n.args) {
          args.push_back(fmt::format("u{}", a));
          dts.push_back(k_.node(a).type.dtype);
        }
        v = cuda::op_expr(k_, n, args, dts);
      }
    }
    t_.line("const {} u{} = {};", rt, i, v);
    t_.line("(void)u{};", i);
  }
}

// The work of one tile after its rows are set and its phase-A loads issued: phase-B loads, the
// peek at the previous chunk, phase A, the look-back (`between` is emitted right after the
// barrier that ends phase A: the pipelined loop issues the next tile's loads there), phase B,
// the column-reduction partials.
void Emitter::emit_tile_body(const std::function<void()>& between) {
  emit_loads(false, "", true);
  emit_shift_copies();
  emit_lookback_setup();
  emit_phase_a();
  emit_lookback(between);
  in_phase_b_ = true;
  emit_phase_b();
  in_phase_b_ = false;
  emit_tile_partials();
}

// Unless pipelined, a function per tile, called from the loop over tiles (kdsl_run).
void Emitter::emit_tile() {
  emit_row_functions();
  if (pipelined()) return;
  t_.line("template <int VRT>");
  t_.line(
      "__device__ __forceinline__ void kdsl_tile_{0}(const kdsl_params_{0}& p, kdsl_smem_{0}& sm,",
      sym_);
  if (p_.lookback) {
    t_.line(
        "                                              const long long tile_c, const long long "
        "tile_rt) {{");
  } else {
    t_.line("                                              const long long tile_index) {{");
  }
  t_.in();
  emit_constants();
  emit_uniforms();
  t_.line("const long long RT = (p.rows + TD - 1) / TD;");
  emit_row_decls("");
  emit_row_assign("", p_.lookback ? "" : "tile_index");
  t_.line("// every load of the tile, issued at once");
  emit_loads(true, "", true);
  emit_tile_body([] {});
  t_.out();
  t_.line("}}");
  t_.line("");
}

}  // namespace kdsl::scan_codegen

// Phase B of the scan tile (codegen_scan_tile.cpp): with the tile's prefix known, every element's
// scan outputs, the epilogue math, vector stores (16-byte where the layout allows), the scalars
// of the sequence's first and last position, and the column reductions' partial sums.
#include <fmt/format.h>

#include "codegen_expr.h"
#include "codegen_scan_emit.h"
#include "kdsl/error.h"

namespace kdsl::scan_codegen {

using ir::Op;

void Emitter::emit_phase_b() {
  t_.line("// phase B: outputs, epilogue, stores");
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    if (p_.stores[j].how == StorePlan::How::vector) {
      t_.line("{} O{}[T][VR * VP];", cuda::storage_type(k_.tensors[k_.stores[j].tensor].dtype), j);
    }
    if (p_.stores[j].how == StorePlan::How::tile_partial) {
      t_.line("{} pa{}[VR];", cuda::reg_type(p_.stores[j].acc), j);
    }
  }
  // Rescanning, each row's prefix Z runs along the thread's elements: Z[VR], with the rows
  // inside the steps so that a step's rows are finished (and packed for the store) together. The
  // loads are made opaque first: else the compiler keeps phase A's converted elements live
  // through the look-back instead of the packed loads.
  if (rescan()) {
    for (size_t a = 0; a < p_.accesses.size(); ++a) {
      if (!p_.accesses[a].phase_a) continue;
      t_.line("#pragma unroll");
      t_.line("for (int j = 0; j < T; ++j) kdsl_sc_opaque(R{}[j]);", a);
    }
    for (size_t i = 0; i < p_.states.size(); ++i) t_.line("{} Z{}[VR];", state_type(i), i);
  }
  t_.line("#pragma unroll");
  t_.line("for (int v = 0; v < VR; ++v) {{");
  t_.in();
  for (size_t i = 0; i < p_.states.size(); ++i) {
    const std::string ty = state_type(i);
    // With a look-back, its threads left each warp's prefix in sm.w (emit_warp_prefixes).
    std::string base = p_.lookback                   ? fmt::format("sm.w{}[wp][rr0 + v]", i)
                       : !p_.states[i].inits.empty() ? init_state(i)
                                                     : ty + "_empty()";
    t_.line("{} Y{} = {};  // the prefix before the warp's first position", ty, i, base);
    if (warp_smem() && !p_.lookback) {
      t_.line("#pragma unroll");
      t_.line("for (int w = 0; w < WP - 1; ++w) {{");
      t_.in();
      t_.line("if (w < wp) Y{0} = {1}_op(Y{0}, sm.w{0}[w][rr0 + v]);", i, ty);
      t_.out();
      t_.line("}}");
    }
  }
  if (s_.blocked) {
    for (size_t i = 0; i < p_.states.size(); ++i) {
      if (rescan()) {
        t_.line("Z{1}[v] = {0}_op(Y{1}, pr{1}[v]);  // ... and before the thread", state_type(i),
                i);
      } else {
        t_.line("const {0} Z{1} = {0}_op(Y{1}, pr{1}[v]);  // ... and before the thread",
                state_type(i), i);
      }
    }
  }
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    if (p_.stores[j].how != StorePlan::How::tile_partial) continue;
    t_.line("pa{}[v] = {};", j, cuda::zero(p_.stores[j].acc));
  }
  if (rescan()) {
    t_.out();
    t_.line("}}");
  }
  t_.line("#pragma unroll");
  t_.line("for (int j = 0; j < T; ++j) {{");
  t_.in();
  t_.line("const kdsl_pos q0 = {};", q0_expr(""));
  if (rescan()) {
    t_.line("#pragma unroll");
    t_.line("for (int v = 0; v < VR; ++v) {{");
    t_.in();
  }
  t_.line("#pragma unroll");
  t_.line("for (int vp = 0; vp < VP; ++vp) {{");
  t_.in();
  t_.line("const kdsl_pos q = q0 + vp;");
  t_.line("const bool qv = ALL_VALID || q < L;");
  t_.line("const kdsl_pos tp = REV ? L - 1 - q : q;");
  t_.line("(void)qv; (void)tp;");
  std::map<At, std::string> memo;
  bool any_exclusive = false;
  for (const State& st : p_.states) any_exclusive |= st.exclusive;
  if (s_.blocked && any_exclusive && !rescan()) {
    // The element before (j, vp) in the thread: (j, vp - 1), or (j - 1, VP - 1).
    t_.line("const int pj = vp > 0 ? j : j - 1, pvp = vp > 0 ? vp - 1 : VP - 1;");
  }
  for (size_t i = 0; i < p_.states.size(); ++i) {
    const std::string ty = state_type(i);
    if (rescan()) {
      // Z: the prefix before the element, then through it (inclusive) or up to it (exclusive).
      t_.line("const {} e{} = {};", ty, i, element_state(i, memo));
      if (p_.states[i].exclusive) {
        t_.line("const {0} o{1} = Z{1}[v];", ty, i);
        t_.line("if (qv) Z{0}[v] = {1}_op(Z{0}[v], e{0});", i, ty);
      } else {
        t_.line("if (qv) Z{0}[v] = {1}_op(Z{0}[v], e{0});", i, ty);
        t_.line("const {0} o{1} = Z{1}[v];", ty, i);
      }
    } else if (!s_.blocked) {
      t_.line("const {0} o{1} = {0}_op(Y{1}, s{1}[j][v * VP + vp]);", ty, i);
    } else if (p_.states[i].exclusive) {
      t_.line(
          "const {0} o{1} = j == 0 && vp == 0 ? Z{1} : {0}_op(Z{1}, s{1}[pj < 0 ? 0 : pj][v * VP + "
          "pvp]);",
          ty, i);
    } else {
      t_.line("const {0} o{1} = {0}_op(Z{1}, s{1}[j][v * VP + vp]);", ty, i);
    }
    t_.line("(void)o{};", i);
  }
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    const StorePlan& sp = p_.stores[j];
    const ir::Store& st = k_.stores[j];
    if (sp.how == StorePlan::How::vector) {
      // A cast to the tensor's 16-bit dtype is rounded by the store itself.
      ir::ValueId val = cuda::stored_value(k_, st.value, k_.tensors[st.tensor].dtype);
      if (p_.where[val] != Where::vec) val = st.value;
      std::string v = elem(val, 0, memo);
      t_.line("O{}[j][v * VP + vp] = {};", j, cuda::to_storage(k_.tensors[st.tensor].dtype, v));
    } else if (sp.how == StorePlan::How::tile_partial) {
      std::string v = elem(sp.sum, 0, memo);
      t_.line("if (qv) pa{0}[v] = pa{0}[v] + {1};", j, v);
    }
  }
  emit_end(true, memo);
  emit_end(false, memo);
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}}");
  t_.line("{{");
  t_.in();
  if (s_.columns) {
    for (size_t j = 0; j < k_.stores.size(); ++j) {
      if (p_.stores[j].how != StorePlan::How::vector) continue;
      const ir::Store& st = k_.stores[j];
      emit_column_pointer(fmt::format("sp{}", j),
                          std::string(cuda::storage_type(k_.tensors[st.tensor].dtype)) + "*",
                          fmt::format("t{}", st.tensor), fmt::format("so{}", j), 0, "",
                          vstride(st.tensor, st.view));
    }
  }
  t_.line("#pragma unroll");
  t_.line("for (int j = 0; j < T; ++j) {{");
  t_.in();
  t_.line("const kdsl_pos q0 = {};", q0_expr(""));
  emit_step_stores();
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}}");
}

// The vector stores of step j.
void Emitter::emit_step_stores() {
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    if (p_.stores[j].how != StorePlan::How::vector) continue;
    const ir::Store& st = k_.stores[j];
    const std::string sty = cuda::storage_type(k_.tensors[st.tensor].dtype);
    const std::string vs = vstride(st.tensor, st.view);
    t_.line("{{  // store {}", k_.tensors[st.tensor].name);
    t_.in();
    if (s_.columns) {
      // sp<j>: the store's pointer at this step (emit_column_pointer, before the steps).
      t_.line("const bool ok = ALL_VALID || q0 < L;");
      if (uses_fast(st.view)) {
        t_.line("if constexpr (FAST) {{");
        t_.in();
        t_.line("if (ok && rv[0]) kdsl_sc_vst<VR>(sp{}, &O{}[j][0]);", j, j);
        t_.out();
        t_.line("}} else {{");
        t_.in();
      } else {
        t_.line("{{");
        t_.in();
      }
      t_.line("if (ok && rv[0]) *sp{} = O{}[j][0];  // VR = 1", j, j);
      t_.out();
      t_.line("}}");
      t_.line("{}", column_step(fmt::format("sp{}", j)));
    } else if (s_.vector_fast) {
      t_.line("const kdsl_pos pl = REV ? L - q0 - VP : q0;");
      t_.line("if ((ALL_VALID || q0 < L) && rv[0]) {{");
      t_.in();
      t_.line("{} tmp[VP];", sty);
      t_.line("#pragma unroll");
      t_.line("for (int vp = 0; vp < VP; ++vp) tmp[REV ? VP - 1 - vp : vp] = O{}[j][vp];", j);
      t_.line("kdsl_sc_vst<VP>(t{} + so{} + pl, tmp);", st.tensor, j);
      t_.out();
      t_.line("}}");
    } else {
      t_.line("#pragma unroll");
      t_.line("for (int vp = 0; vp < VP; ++vp) {{");
      t_.in();
      t_.line("const kdsl_pos q = q0 + vp;");
      t_.line("const kdsl_pos pp = REV ? L - 1 - q : q;");
      t_.line("#pragma unroll");
      t_.line("for (int v = 0; v < VR; ++v) {{");
      t_.in();
      t_.line("if ((ALL_VALID || q < L) && rv[v]) t{}[so{} + pp * {}] = O{}[j][v * VP + vp];",
              st.tensor, j, vs, j);
      t_.out();
      t_.line("}}");
      t_.out();
      t_.line("}}");
    }
    t_.out();
    t_.line("}}");
  }
}

// A begin/end scalar, emitted in the element of that position.
std::string Emitter::end_scalar(ir::ValueId id, std::map<At, std::string>& memo,
                                std::map<ir::ValueId, std::string>& scalars) {
  Where w = p_.where[id];
  if (w == Where::uniform || w == Where::row) return scalar(id);
  auto it = scalars.find(id);
  if (it != scalars.end()) return it->second;
  const ir::Node& n = k_.node(id);
  std::string name = fmt::format("es{}", id);
  std::string value;
  if (n.op == Op::reduce) {
    auto kind = static_cast<ir::ReduceKind>(n.fn);
    if (kind == ir::ReduceKind::first || kind == ir::ReduceKind::last) {
      value = elem(n.args[0], 0, memo);
    } else {
      value = fmt::format("o{}.c0", p_.state_of.at(id));
    }
  } else {
    std::vector<std::string> args;
    std::vector<DType> dts;
    for (ir::ValueId a : n.args) {
      args.push_back(end_scalar(a, memo, scalars));
      dts.push_back(k_.node(a).type.dtype);
    }
    value = cuda::op_expr(k_, n, args, dts);
  }
  t_.line("const {} {} = {};", cuda::reg_type(n.type.dtype), name, value);
  scalars[id] = name;
  return name;
}

// Stores of the scalars available at the first (begin) or last (end) position in processing order,
// by the thread holding that element.
void Emitter::emit_end(bool begin, std::map<At, std::string> memo) {
  bool any = false;
  for (const StorePlan& sp : p_.stores) {
    any |= (sp.how == StorePlan::How::scalar || sp.how == StorePlan::How::row_partial) &&
           (sp.where == Where::begin) == begin;
  }
  if (!any) return;
  const int64_t q = begin ? 0 : len_ - 1;
  const int64_t cl = s_.cl();
  const int64_t o = q % cl;
  const int64_t per_warp = static_cast<int64_t>(s_.t) * s_.lp * s_.vp;
  const int64_t wpe = o / per_warp, rem = o % per_warp;
  int64_t je = rem / (s_.lp * s_.vp), lpe = (rem / s_.vp) % s_.lp;
  if (s_.blocked) {
    lpe = rem / (s_.t * s_.vp);
    je = (rem / s_.vp) % s_.t;
  }
  const int64_t vpe = rem % s_.vp;
  t_.line("if (j == {} && vp == {} && c == {}LL && wp == {} && lp == {}) {{  // the {} position",
          je, vpe, q / cl, wpe, lpe, begin ? "first" : "last");
  t_.in();
  std::map<ir::ValueId, std::string> scalars;
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    const StorePlan& sp = p_.stores[j];
    if (!((sp.how == StorePlan::How::scalar || sp.how == StorePlan::How::row_partial) &&
          (sp.where == Where::begin) == begin)) {
      continue;
    }
    const ir::Store& st = k_.stores[j];
    std::string v = end_scalar(st.value, memo, scalars);
    if (sp.how == StorePlan::How::scalar) {
      t_.line("if (rv[v]) t{}[kdsl_so{}_{}(p, r0 + v)] = {};", st.tensor, j, sym_,
              cuda::to_storage(k_.tensors[st.tensor].dtype, v));
    } else {
      const char* acc = cuda::reg_type(sp.acc);
      t_.line("if (rv[v]) reinterpret_cast<{}*>({})[kdsl_pi{}_{}(p, r0 + v)] = {};", acc,
              ws_name(sp.ws), j, sym_, v);
    }
  }
  t_.out();
  t_.line("}}");
}

// Column reductions of sum(v): each thread's sums per row, then across the LP lanes (butterfly)
// and the WP warps (shared memory, in order): one partial per row and chunk.
void Emitter::emit_tile_partials() {
  std::vector<size_t> stores;
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    if (p_.stores[j].how == StorePlan::How::tile_partial) stores.push_back(j);
  }
  if (stores.empty()) return;
  t_.line("// column-reduction partials of this tile");
  for (size_t j : stores) {
    t_.line("#pragma unroll");
    t_.line("for (int v = 0; v < VR; ++v) {{");
    t_.in();
    // A scaled sum (k * sum(v)): each thread's partial scaled, the same along its row.
    for (const auto& [f, divide] : p_.stores[j].factors) {
      t_.line("pa{0}[v] = pa{0}[v] {1} {2};", j, divide ? "/" : "*",
              cuda::convert(k_.node(f).type.dtype, p_.stores[j].acc, scalar(f)));
    }
    if (p_.stores[j].negate) t_.line("pa{0}[v] = -pa{0}[v];", j);
    t_.line("#pragma unroll");
    t_.line("for (int o = LP / 2; o > 0; o /= 2) {{");
    t_.in();
    t_.line("const auto y = kdsl_shfl(pa{}[v], o * LR);", j);
    t_.line("pa{0}[v] = (lp & o) ? y + pa{0}[v] : pa{0}[v] + y;", j);
    t_.out();
    t_.line("}}");
    t_.line("if (lp == 0) sm.pp{0}[wp][rr0 + v] = pa{0}[v];", j);
    t_.out();
    t_.line("}}");
  }
  t_.line("__syncthreads();");
  t_.line("if (tid < TD && rt * TD + tid < p.rows) {{");
  t_.in();
  for (size_t l = 0; l < k_.loop.size(); ++l) t_.line("long long li{};", l);
  row_index_code("rt * TD + tid", "li", "");
  for (size_t j : stores) {
    const ir::Store& st = k_.stores[j];
    DType acc = p_.stores[j].acc;
    std::vector<int> kept, omitted;
    split_loop(st.view, &kept, &omitted);
    std::string ko = "0LL", oo = "0LL";
    for (int l : kept) ko = fmt::format("({}) * p.sym{} + li{}", ko, k_.loop[l].extent, l);
    for (int l : omitted) oo = fmt::format("({}) * p.sym{} + li{}", oo, k_.loop[l].extent, l);
    t_.line("{{");
    t_.in();
    t_.line("{} a = sm.pp{}[0][tid];", cuda::reg_type(acc), j);
    t_.line("#pragma unroll");
    t_.line("for (int w = 1; w < WP; ++w) a = a + sm.pp{}[w][tid];", j);
    t_.line("reinterpret_cast<{}*>({})[(({}) * {}LL + c) * ({}) + ({})] = a;", cuda::reg_type(acc),
            ws_name(p_.stores[j].ws), oo, s_.chunks, extent_product(kept), ko);
    t_.out();
    t_.line("}}");
  }
  t_.out();
  t_.line("}}");
}

}  // namespace kdsl::scan_codegen

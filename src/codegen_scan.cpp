// CUDA C++ for the scan schedule (schedule_scan.h): the kernel's declarations, its main loop over
// tiles and the follow-up reduction of column-reduction partials. The tile itself is emitted by
// codegen_scan_tile.cpp.
#include "codegen_scan.h"

#include <fmt/format.h>

#include <algorithm>

#include "codegen_expr.h"
#include "codegen_scan_emit.h"
#include "cuda_prelude.h"
#include "kdsl/error.h"
#include "text_util.h"

namespace kdsl::scan_codegen {

using ir::Form;
using ir::Op;

bool has_vector_axis(const ir::View& v) {
  for (const ir::AxisIndex& a : v) {
    if (a.kind == ir::AxisIndex::Kind::vector) return true;
  }
  return false;
}

int vector_axis(const ir::View& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].kind == ir::AxisIndex::Kind::vector) return static_cast<int>(i);
  }
  return -1;
}

Emitter::Emitter(const ir::Kernel& k, const Specialization& spec, const ScanSchedule& s,
                 const Plan& p)
    : k_(k), spec_(spec), s_(s), p_(p) {
  len_ = k.vector_symbol >= 0 ? k.symbols[k.vector_symbol].value.value_or(1) : 1;
  plan_kept();
}

std::string Emitter::state_type(size_t i) const {
  return fmt::format("kdsl_st{}_{}", i, sym_);
}

void Emitter::plan_params() {
  codegen::SlotLayout slots(k_, plan_);
  // Workspaces: look-back flags (zeroed) and published states, then one per column reduction.
  const int64_t nch = s_.chunks;
  const uint64_t td = static_cast<uint64_t>(s_.wr * s_.lr);  // the smallest tile (VR = 1)
  const uint64_t td_max = static_cast<uint64_t>(s_.td());
  int ws = 0;
  if (p_.lookback) {
    WorkspaceSpec flags;
    flags.bytes_per_row = (static_cast<uint64_t>(nch) * 4 + td - 1) / td;
    flags.bytes_fixed = 16 + static_cast<uint64_t>(nch) * 4;
    if (packed()) {  // the ticket counter, then a 16-byte word per row and chunk (rows padded)
      flags.bytes_per_row = static_cast<uint64_t>(nch) * 16;
      flags.bytes_fixed = 16 + static_cast<uint64_t>(nch) * td_max * 16;
    }
    flags.zeroed = true;
    plan_.workspaces.push_back(flags);
    slots.add(ParamSlot::Kind::workspace, ws++, 0, 8, DType::i64);
    uint64_t state_bytes = 0;  // an upper bound of the states' sizes (8 bytes per field)
    for (const State& st : p_.states) state_bytes += 8 * (st.dtypes.size() + 1);
    WorkspaceSpec states;  // the fenced look-back's aggregates and prefixes (packed: unused)
    if (!packed()) {
      states.bytes_per_row = 2 * static_cast<uint64_t>(nch) * state_bytes;
      states.bytes_fixed = 2 * static_cast<uint64_t>(nch) * td_max * state_bytes + 256;
    }
    plan_.workspaces.push_back(states);
    slots.add(ParamSlot::Kind::workspace, ws++, 0, 8, DType::i64);
  }
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    const StorePlan& sp = p_.stores[j];
    if (sp.ws < 0) continue;
    WorkspaceSpec w;
    w.bytes_per_row = static_cast<uint64_t>(sp.per_row) * dtype_size(sp.acc);
    plan_.workspaces.push_back(w);
    slots.add(ParamSlot::Kind::workspace, ws++, 0, 8, DType::i64);
  }
  slots.finish();
}

std::string Emitter::ws_name(int partial_ws) const {
  return fmt::format("p.ws{}", partial_ws + (p_.lookback ? 2 : 0));
}

void Emitter::emit_params_struct() {
  codegen::emit_params_struct(t_, k_, plan_, sym_,
                              [](const ParamSlot&) { return std::string("unsigned char*"); });
}

// One struct per carried state, its identity ("empty") and its combine function, from the
// scan's region (or the built-in operator of a reduction). Custom combine functions have no known
// identity: their states carry a flag h (0: empty) and the combine skips empty operands. It does
// so with selects after combining unconditionally (the combine has no side effects, and an empty
// state's components are zeros, on which it has no undefined behaviour unless it divides
// integers: those keep the early returns), not with early returns: where a flag is known at compile
// time the selects fold away, and where it is not (the prefix a thread applies to each of its
// elements, the warps' totals) they cost one select per component instead of a branch around
// every combine (rg_lru_bwd bf16: about 19 SASS instructions per combine with the branches).
// That is for states of 4-byte components; states with 8-byte ones (c64, f64, i64) keep the early
// returns: the complex backward recurrence took 92 registers instead of 79 with the selects (two
// CTAs per SM instead of three) and ran 18% slower on the H200 (twelfth session).
void Emitter::emit_states() {
  for (size_t i = 0; i < p_.states.size(); ++i) {
    const State& st = p_.states[i];
    const std::string ty = state_type(i);
    const size_t m = st.dtypes.size();
    t_.line("// carried state {}: {} of %{} ({})", i, st.scan ? "scan" : "reduction", st.node,
            ir::name(st.kind));
    t_.line("struct {} {{", ty);
    t_.in();
    for (size_t c = 0; c < m; ++c) t_.line("{} c{};", cuda::reg_type(st.dtypes[c]), c);
    if (st.custom()) t_.line("int h;");
    t_.out();
    t_.line("}};");
    t_.line("__device__ __forceinline__ {0} {0}_empty() {{", ty);
    t_.in();
    t_.line("{} s;", ty);
    for (size_t c = 0; c < m; ++c) t_.line("s.c{} = {};", c, identity(st, c));
    if (st.custom()) t_.line("s.h = 0;");
    t_.line("return s;");
    t_.out();
    t_.line("}}");
    t_.line("__device__ __forceinline__ {0} {0}_op(const {0}& l, const {0}& r) {{", ty);
    t_.in();
    auto int_division = [](const ir::Node& n) {
      const auto fn = static_cast<ir::BinaryFn>(n.fn);
      return n.op == Op::binary && is_int(n.type.dtype) &&
             (fn == ir::BinaryFn::floordiv || fn == ir::BinaryFn::mod);
    };
    const bool selects =
        st.custom() && st.region &&
        std::all_of(st.dtypes.begin(), st.dtypes.end(),
                    [](DType t) { return dtype_size(t) <= 4; }) &&
        std::none_of(st.region->nodes.begin(), st.region->nodes.end(), int_division);
    if (st.custom() && !selects) {
      t_.line("if (!r.h) return l;");
      t_.line("if (!l.h) return r;");
    }
    t_.line("{} o;", ty);
    if (st.region) {
      const ir::Region& r = *st.region;
      for (size_t n = 0; n < r.nodes.size(); ++n) {
        const ir::Node& node = r.nodes[n];
        std::string value;
        if (node.op == Op::arg) {
          auto a = static_cast<size_t>(node.index);
          value = a < m ? fmt::format("l.c{}", a) : fmt::format("r.c{}", a - m);
        } else {
          std::vector<std::string> args;
          std::vector<DType> dts;
          for (ir::ValueId a : node.args) {
            args.push_back(fmt::format("g{}", a));
            dts.push_back(r.nodes[a].type.dtype);
          }
          value = cuda::op_expr(k_, node, args, dts);
        }
        t_.line("const {} g{} = {};", cuda::reg_type(node.type.dtype), n, value);
      }
      for (size_t c = 0; c < m; ++c) {
        if (selects) {
          t_.line("o.c{0} = r.h ? (l.h ? g{1} : r.c{0}) : l.c{0};", c, r.results[c]);
        } else {
          t_.line("o.c{} = g{};", c, r.results[c]);
        }
      }
    } else {
      const char* f = st.kind == ir::ScanKind::sum   ? "l.c0 + r.c0"
                      : st.kind == ir::ScanKind::max ? "kdsl_max(l.c0, r.c0)"
                                                     : "kdsl_min(l.c0, r.c0)";
      t_.line("o.c0 = {};", f);
    }
    if (st.custom()) t_.line("{}", selects ? "o.h = l.h | r.h;" : "o.h = 1;");
    t_.line("return o;");
    t_.out();
    t_.line("}}");
    for (const char* kind : {"up", "idx"}) {
      t_.line("__device__ __forceinline__ {0} kdsl_sc_shfl_{1}(const {0}& s, int d) {{", ty, kind);
      t_.in();
      t_.line("{} o;", ty);
      for (size_t c = 0; c < m; ++c) t_.line("o.c{0} = kdsl_sc_shfl_{1}(s.c{0}, d);", c, kind);
      // Shuffled states are never empty when every position is valid.
      if (st.custom() && len_ % s_.cl() == 0) t_.line("o.h = 1;");
      if (st.custom() && len_ % s_.cl() != 0) t_.line("o.h = kdsl_sc_shfl_{}(s.h, d);", kind);
      t_.line("return o;");
      t_.out();
      t_.line("}}");
    }
    t_.line("");
  }
}

std::string Emitter::identity(const State& st, size_t c) const {
  DType t = st.dtypes[c];
  const bool integer = is_int(t);
  switch (st.kind) {
    case ir::ScanKind::sum:
    case ir::ScanKind::custom:
      return cuda::zero(t);
    case ir::ScanKind::prod:
      return cuda::literal(t, 1);
    case ir::ScanKind::max:
      return integer ? (t == DType::i64 ? "(-0x7fffffffffffffffLL - 1)" : "(-0x7fffffff - 1)")
                     : "(-" + cuda::literal(t, INFINITY) + ")";
    case ir::ScanKind::min:
      return integer ? (t == DType::i64 ? "0x7fffffffffffffffLL" : "0x7fffffff")
                     : cuda::literal(t, INFINITY);
    case ir::ScanKind::logaddexp:
      return "(-" + cuda::literal(t, INFINITY) + ")";
  }
  return cuda::zero(t);
}

// The bytes of emit_smem's struct, padding aside except each state's (its components, plus the
// flag of a custom combine, rounded up to the widest component).
uint64_t Emitter::smem_bytes() const {
  const uint64_t td = static_cast<uint64_t>(s_.td()), wp = static_cast<uint64_t>(s_.wp);
  const uint64_t win = p_.lookback ? static_cast<uint64_t>(lookback_window()) : 0;
  uint64_t n = 8;
  if (packed()) {
    n += 16 * win * td;
  } else if (p_.lookback) {
    n += 4 * win;
  }
  for (const State& st : p_.states) {
    uint64_t bytes = st.custom() ? 4 : 0, align = 4;
    for (DType t : st.dtypes) {
      bytes += dtype_size(t);
      align = std::max<uint64_t>(align, t == DType::c64 ? 4 : dtype_size(t));
    }
    bytes = (bytes + align - 1) / align * align;
    if (warp_smem()) n += bytes * wp * td;
    if (p_.lookback && !packed()) n += bytes * td * win;  // lbv
    if (p_.lookback && !st.inits.empty()) n += bytes * td;
  }
  if (staged()) {
    for (const Access& a : p_.accesses) {
      if (!a.phase_a) continue;
      n += 16 + dtype_size(k_.tensors[a.tensor].dtype) * static_cast<uint64_t>(s_.t) *
                    static_cast<uint64_t>(s_.threads()) * static_cast<uint64_t>(s_.vr * s_.vp);
    }
  }
  for (size_t j = 0; j < p_.stores.size(); ++j) {
    if (p_.stores[j].how != StorePlan::How::tile_partial) continue;
    n += dtype_size(p_.stores[j].acc) * wp * td;
  }
  return n;
}

// The tile's shared memory is static: at most 48 KiB. Only a layout set by KDSL_SCAN_SCHEDULE or
// a schedule hint can exceed it (the scheduler's own stay far below); that is the override's
// error, reported before NVRTC and ptxas would fail on it.
void Emitter::check_smem() const {
  constexpr uint64_t kStaticSmem = 48 * 1024;
  const uint64_t n = smem_bytes();
  if (n <= kStaticSmem) return;
  const std::string msg = fmt::format(
      "scan schedule: the tile ({} x {}, {} along the positions) needs about {} bytes of shared "
      "memory, over the {} a kernel may hold statically; lower wp or vr",
      counted(s_.td(), "row", "rows"), counted(s_.cl(), "position", "positions"),
      counted(s_.wp, "warp", "warps"), n, kStaticSmem);
  if (s_.layout_hint) throw ScheduleHintError(fmt::format("{}: {}", s_.layout_source, msg));
  if (!s_.layout_source.empty()) {
    throw ArgumentError(fmt::format("{}: {}", s_.layout_source, msg));
  }
  throw InternalError(msg);
}

void Emitter::emit_smem() {
  t_.line("struct kdsl_smem_{} {{", sym_);
  t_.in();
  t_.line("long long ticket;");
  if (p_.lookback && !pipelined()) t_.line("long long ticket_rt;  // the ticket's row tile");
  if (packed()) {
    t_.line("uint4 lbp[{}][{}];  // packed look-back: the aggregates passed, per row",
            lookback_window(), s_.td());
  } else if (p_.lookback) {
    t_.line("unsigned lbs[{}];  // look-back: the predecessors' flags", lookback_window());
  }
  for (size_t i = 0; i < p_.states.size(); ++i) {
    if (warp_smem()) t_.line("{} w{}[{}][{}];", state_type(i), i, s_.wp, s_.td());
    if (p_.lookback && !packed()) {
      t_.line("{} lbv{}[{}][{}];", state_type(i), i, lookback_window(), s_.td());
    }
    if (p_.lookback && !p_.states[i].inits.empty()) {
      t_.line("{} in{}[{}];", state_type(i), i, s_.td());
    }
  }
  if (staged()) {
    for (size_t a = 0; a < p_.accesses.size(); ++a) {
      if (!p_.accesses[a].phase_a) continue;
      t_.line("alignas(16) {} stg{}[{}][{}][{}];  // cp.async staging: step, thread, elements",
              cuda::storage_type(k_.tensors[p_.accesses[a].tensor].dtype), a, s_.t, s_.threads(),
              s_.vr * s_.vp);
    }
  }
  for (size_t j = 0; j < p_.stores.size(); ++j) {
    if (p_.stores[j].how != StorePlan::How::tile_partial) continue;
    t_.line("{} pp{}[{}][{}];", cuda::reg_type(p_.stores[j].acc), j, s_.wp, s_.td());
  }
  t_.out();
  t_.line("}};");
  t_.line("");
}

// The kernel: whether every access may be vectorized (scan.columns, checked on the launch's
// strides and pointers), then the tiles: in ticket order when tiles depend on each other, else
// a grid-stride loop.
void Emitter::emit_main() {
  emit_run();
  t_.line("extern \"C\" __global__ void __launch_bounds__({}) {}(const kdsl_params_{} p) {{",
          s_.min_ctas > 0 ? fmt::format("{}, {}", s_.threads(), s_.min_ctas)
                          : std::to_string(s_.threads()),
          sym_, sym_);
  t_.in();
  t_.line("__shared__ kdsl_smem_{} sm;", sym_);
  t_.line("const bool fast = {};", fast_condition());
  t_.line("if (fast) kdsl_run_{0}<{1}>(p, sm); else kdsl_run_{0}<1>(p, sm);", sym_,
          s_.columns ? s_.vr : 1);
  t_.out();
  t_.line("}}");
  t_.line("");
}

// The tiles of one launch: in ticket order when tiles depend on each other (look-back), else a
// grid-stride loop. VRT: rows per access (1 when the launch does not allow 16-byte accesses).
void Emitter::emit_run() {
  t_.line("template <int VRT>");
  t_.line(
      "__device__ __forceinline__ void kdsl_run_{0}(const kdsl_params_{0}& p, kdsl_smem_{0}& sm) "
      "{{",
      sym_);
  t_.in();
  if (!pipelined()) {
    t_.line("constexpr int TD = {} * VRT;", s_.wr * s_.lr);
    t_.line("const long long tiles = (p.rows + TD - 1) / TD * {}LL;", s_.chunks);
    if (p_.lookback) {
      // Tiles in ticket order (chunk-major), so a tile only waits for tiles that started before.
      // The ticket's thread splits it into chunk and row tile once for the CTA (a 64-bit
      // division that every warp would otherwise repeat).
      t_.line("const long long RT = (p.rows + TD - 1) / TD;");
      t_.line("unsigned long long* counter = reinterpret_cast<unsigned long long*>(p.ws0);");
      t_.line("for (;;) {{");
      t_.in();
      t_.line("if (threadIdx.x == 0) {{");
      t_.in();
      t_.line("const long long tk = static_cast<long long>(atomicAdd(counter, 1ULL));");
      t_.line("const long long tc = tk < tiles ? tk / RT : {}LL;  // (no tile: RT may be 0)",
              s_.chunks);
      t_.line("sm.ticket = tc;");
      t_.line("sm.ticket_rt = tk - tc * RT;");
      t_.out();
      t_.line("}}");
      t_.line("__syncthreads();  // also: the previous tile is done with shared memory");
      t_.line("const long long tc = sm.ticket;");
      t_.line("if (tc >= {}LL) return;", s_.chunks);
      t_.line("kdsl_tile_{}<VRT>(p, sm, tc, sm.ticket_rt);", sym_);
    } else {
      t_.line("for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {{");
      t_.in();
      t_.line("__syncthreads();  // the previous tile is done with shared memory");
      t_.line("kdsl_tile_{}<VRT>(p, sm, tile);", sym_);
    }
    t_.out();
    t_.line("}}");
    t_.out();
    t_.line("}}");
    t_.line("");
    return;
  }
  // Tiles in ticket order; while tile n looks back and writes its outputs, the loads of tile
  // n + 1 (its ticket taken at the start of tile n) are in flight: into registers, or (staged)
  // as cp.async copies into shared memory, which cost no registers while they fly and are read
  // into registers when tile n + 1 starts. Each thread reads only the slots it copied, so the
  // copies need no barrier, only the thread's own wait.
  emit_constants();
  emit_uniforms();
  t_.line("const long long RT = (p.rows + TD - 1) / TD;");
  t_.line("const long long tiles = RT * {}LL;", s_.chunks);
  t_.line("unsigned long long* counter = reinterpret_cast<unsigned long long*>(p.ws0);");
  t_.line("if (tid == 0) sm.ticket = static_cast<long long>(atomicAdd(counter, 1ULL));");
  t_.line("__syncthreads();");
  t_.line("const long long tk = sm.ticket;");
  t_.line("if (tk >= tiles) return;");
  emit_row_decls("");
  emit_row_decls("_n");
  emit_row_assign("", "tk");
  if (staged()) {
    emit_stage_constants();
    for (size_t a = 0; a < p_.accesses.size(); ++a) {
      if (p_.accesses[a].phase_a) {
        t_.line("{} R{}[T][VR * VP];", cuda::storage_type(k_.tensors[p_.accesses[a].tensor].dtype),
                a);
      }
    }
    emit_staged_loads("");
    emit_stage_reads();
  } else {
    emit_loads(true, "", true);
  }
  t_.line("for (;;) {{");
  t_.in();
  t_.line("__syncthreads();  // the previous tile is done with shared memory and the ticket");
  t_.line("if (tid == 0) sm.ticket = static_cast<long long>(atomicAdd(counter, 1ULL));");
  emit_tile_body([&] {
    t_.line("const long long nt = sm.ticket;  // the next tile: its loads overlap this look-back");
    t_.line("if (nt < tiles) {{");
    t_.in();
    emit_row_assign("_n", "nt");
    if (staged()) {
      emit_staged_loads("_n");
    } else {
      emit_loads(true, "_n", false);
    }
    t_.out();
    t_.line("}}");
  });
  t_.line("if (nt >= tiles) return;");
  emit_row_copy();
  if (staged()) emit_stage_reads();
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}}");
  t_.line("");
}

std::string Emitter::fast_condition() const {
  if (!s_.columns || s_.vr == 1 || s_.fast_loop < 0) return "false";
  std::string cond = fmt::format("p.sym{} % {} == 0", k_.loop[s_.fast_loop].extent, s_.vr);
  std::set<int32_t> seen;
  auto check = [&](int32_t tensor, const ir::View& view) {
    bool uses_fast = false;
    for (const ir::AxisIndex& a : view) {
      uses_fast |= a.kind == ir::AxisIndex::Kind::loop && a.value == s_.fast_loop;
    }
    if (!has_vector_axis(view) || !uses_fast || !seen.insert(tensor).second) return;
    const size_t bytes = dtype_size(k_.tensors[tensor].dtype) * static_cast<size_t>(s_.vr);
    cond += fmt::format(" && reinterpret_cast<unsigned long long>(p.t{}) % {} == 0", tensor, bytes);
    for (size_t ax = 0; ax < view.size(); ++ax) {
      const ir::AxisIndex& a = view[ax];
      if (a.kind == ir::AxisIndex::Kind::loop && a.value == s_.fast_loop) {
        cond += fmt::format(" && p.st{}_{} == 1", tensor, ax);
      } else {
        cond += fmt::format(" && p.st{}_{} % {} == 0", tensor, ax, s_.vr);
      }
    }
  };
  for (const Access& a : p_.accesses) check(a.tensor, a.view);
  for (const ir::Store& st : k_.stores) check(st.tensor, st.view);
  return cond;
}

// Column reductions: partial sums per row (and chunk) in a workspace, summed here in a fixed order
// by one warp per output element (lanes stride over the partials, then a butterfly).
void Emitter::emit_finalize() {
  std::string fsym = sym_ + "_finalize";
  FollowUp f;
  f.symbol = fsym;
  f.block_threads = 256;
  f.grid_elements = 256ULL * 1024;
  t_.line("// Fixed-order sums of the column reductions' partials (deterministic).");
  t_.line("extern \"C\" __global__ void __launch_bounds__(256) {}(const kdsl_params_{} p) {{", fsym,
          sym_);
  t_.in();
  t_.line("const long long warp = (static_cast<long long>(blockIdx.x) * 256 + threadIdx.x) >> 5;");
  t_.line("const long long warps = static_cast<long long>(gridDim.x) * 8;");
  t_.line("const int lane = threadIdx.x & 31;");
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    const StorePlan& sp = p_.stores[j];
    if (sp.ws < 0) continue;
    const ir::Store& st = k_.stores[j];
    const ir::TensorParam& tp = k_.tensors[st.tensor];
    DType acc = sp.acc;
    std::vector<int> kept, omitted;
    split_loop(st.view, &kept, &omitted);
    t_.line("{{  // {} (store {})", tp.name, j);
    t_.in();
    t_.line("const long long kn = {};", extent_product(kept));
    t_.line("const long long terms = {} * {}LL;", extent_product(omitted), sp.per_row);
    // f32 partials are summed in f64 (SPEC 11.3, as the row kernels' finalize does: thousands
    // of partials in f32 would lose digits), then rounded once.
    const DType sum_t = acc == DType::f32 ? DType::f64 : acc;
    t_.line("const {}* ws = reinterpret_cast<const {}*>({});", cuda::reg_type(acc),
            cuda::reg_type(acc), ws_name(sp.ws));
    t_.line("for (long long kk = warp; kk < kn; kk += warps) {{");
    t_.in();
    t_.line("{} a = {};", cuda::reg_type(sum_t), cuda::zero(sum_t));
    t_.line("for (long long u = lane; u < terms; u += 32) a = a + {};",
            cuda::convert(acc, sum_t, "ws[u * kn + kk]"));
    t_.line("a = kdsl_warp_reduce<32>(a, kdsl_op_sum{{}});");
    t_.line("if (lane == 0) {{");
    t_.in();
    t_.line("long long rest = kk;");
    for (size_t i = kept.size(); i-- > 0;) {
      t_.line("const long long i{} = rest % p.sym{};", kept[i], k_.loop[kept[i]].extent);
      t_.line("rest /= p.sym{};", k_.loop[kept[i]].extent);
    }
    std::string off = "0LL";
    for (size_t ax = 0; ax < st.view.size(); ++ax) {
      const ir::AxisIndex& a = st.view[ax];
      if (a.kind == ir::AxisIndex::Kind::loop)
        off += fmt::format(" + i{} * p.st{}_{}", a.value, st.tensor, ax);
      if (a.kind == ir::AxisIndex::Kind::constant && a.value != 0) {
        off += fmt::format(" + {}LL * p.st{}_{}", a.value, st.tensor, ax);
      }
    }
    t_.line("{}* out = p.t{} + ({});", cuda::storage_type(tp.dtype), st.tensor, off);
    // (An = overwrites; an element's += adds the old value: sp.add_old.)
    if (tp.role == ir::Role::inout && (st.kind == ir::StoreKind::reduce || sp.add_old)) {
      t_.line("a = a + {};", cuda::convert(tp.dtype, sum_t, cuda::from_storage(tp.dtype, "*out")));
    }
    t_.line("*out = {};", cuda::to_storage(tp.dtype, cuda::convert(sum_t, tp.dtype, "a")));
    t_.out();
    t_.line("}}");
    t_.out();
    t_.line("}}");
    t_.out();
    t_.line("}}");
  }
  t_.out();
  t_.line("}}");
  plan_.follow_ups.push_back(f);
}

void Emitter::split_loop(const ir::View& view, std::vector<int>* kept,
                         std::vector<int>* omitted) const {
  for (int l : s_.row_order) {
    bool in = false;
    for (const ir::AxisIndex& a : view) in |= a.kind == ir::AxisIndex::Kind::loop && a.value == l;
    (in ? kept : omitted)->push_back(l);
  }
}

std::string Emitter::extent_product(const std::vector<int>& loops) const {
  std::string e = "1LL";
  for (int l : loops) e += fmt::format(" * p.sym{}", k_.loop[l].extent);
  return e;
}

GeneratedKernel Emitter::run() {
  uint32_t vector_tensors = 0;
  for (const Access& a : p_.accesses) vector_tensors |= tensor_bit(a.tensor);
  for (const ir::Store& st : k_.stores) {
    if (has_vector_axis(st.view)) vector_tensors |= tensor_bit(st.tensor);
  }
  // Only scan.rows with vector accesses depends on the alignment flags of the specialization.
  sym_ = spec_.symbol(k_.name, s_.columns || s_.vp == 1 ? 0u : vector_tensors);
  if (!s_.columns && !s_.vector_fast) sym_ = spec_.symbol(k_.name, 0u);
  plan_.symbol = sym_;
  plan_.schedule = s_.name;
  plan_.reasons = s_.reasons;
  plan_.reasons.push_back(cuda::math_note(k_));
  plan_.block_threads = static_cast<uint32_t>(s_.threads());
  plan_.rows_per_cta = static_cast<uint32_t>(s_.td());
  plan_.row_splits = static_cast<uint32_t>(s_.chunks);
  plan_.max_ctas_per_sm = static_cast<uint32_t>(s_.ctas_per_sm);
  if (s_.vector_fast) {
    for (size_t t = 0; t < k_.tensors.size(); ++t) {
      if (vector_tensors & tensor_bit(static_cast<int32_t>(t)))
        plan_.aligned_tensors.push_back(static_cast<uint32_t>(t));
    }
  }
  check_smem();
  plan_params();
  t_.line("// Generated by kdsl {} for kernel '{}' ({}).", KDSL_VERSION, k_.name, sym_);
  t_.line("// Schedule {}:", s_.name);
  for (const std::string& r : s_.reasons) t_.line("//   {}", r);
  t_.line("// {}", cuda::math_note(k_));
  t_.raw(cuda_prelude());
  if (cuda::approx_math(k_)) t_.raw(cuda_approx_math_prelude());
  t_.raw(cuda_async_copy_prelude());
  t_.raw(cuda_scan_prelude());
  t_.line("");
  emit_params_struct();
  emit_states();
  emit_smem();
  emit_tile();
  emit_main();
  if (p_.partial_workspaces > 0) emit_finalize();
  return {t_.str(), plan_};
}

}  // namespace kdsl::scan_codegen

namespace kdsl {

namespace {

// The cp.async staging (T steps x VR * VP elements per thread and phase-A access) must fit in 32
// of the 48 KiB of static shared memory; else the next tile's loads go to registers.
ScanSchedule staging_checked(const ir::Kernel& k, const ScanSchedule& s,
                             const scan_codegen::Plan& p) {
  size_t staging = 0;
  for (const scan_codegen::Access& a : p.accesses) {
    if (a.phase_a) {
      staging += static_cast<size_t>(s.t) * s.threads() * s.vr * s.vp *
                 dtype_size(k.tensors[a.tensor].dtype);
    }
  }
  if (!(s.async_copy && p.lookback && s.pipeline && staging > 32 * 1024)) return s;
  ScanSchedule registers = s;
  registers.async_copy = false;
  registers.reasons.push_back(fmt::format(
      "cp.async staging would take {} bytes of shared memory: the next tile's loads go to "
      "registers",
      staging));
  return registers;
}

}  // namespace

uint64_t scan_tile_smem_bytes(const ir::Kernel& k, const Specialization& spec,
                              const ScanSchedule& s) {
  const scan_codegen::Plan p = scan_codegen::plan_scan_kernel(k, s);
  return scan_codegen::Emitter(k, spec, staging_checked(k, s, p), p).smem_bytes();
}

GeneratedKernel generate_scan_kernel(const ir::Kernel& k, const Specialization& spec,
                                     const ScanSchedule& s) {
  const scan_codegen::Plan p = scan_codegen::plan_scan_kernel(k, s);
  const ScanSchedule checked = staging_checked(k, s, p);  // (the Emitter keeps a reference)
  scan_codegen::Emitter e(k, spec, checked, p);
  return e.run();
}

}  // namespace kdsl

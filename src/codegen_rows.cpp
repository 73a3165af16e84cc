// CUDA C++ for the row schedules (see schedule.h): a persistent grid of CTAs, each with R groups
// of G threads, one loop iteration ("row") per group at a time, the row's vector axis split into
// C chunks of VEC elements per thread. The body runs in phases separated by reductions. With a
// thread-block cluster (rows.cluster) a row's G threads are spread over the cluster's K CTAs.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <set>

#include "codegen_cuda.h"
#include "codegen_expr.h"
#include "codegen_text.h"
#include "cuda_prelude.h"
#include "dsl/diagnostics.h"
#include "kdsl/error.h"

namespace kdsl {
namespace {

using ir::Form;
using ir::Op;

using codegen::Text;

constexpr double kInf = std::numeric_limits<double>::infinity();

bool vector_view(const ir::View& v) {
  return std::any_of(v.begin(), v.end(),
                     [](const ir::AxisIndex& a) { return a.kind == ir::AxisIndex::Kind::vector; });
}

bool loop_view(const ir::View& v) {
  return std::any_of(v.begin(), v.end(),
                     [](const ir::AxisIndex& a) { return a.kind == ir::AxisIndex::Kind::loop; });
}

// A distinct (tensor, view) pair; its element offset for the current row is `o<id>`.
struct Access {
  int32_t tensor;
  ir::View view;
};

class RowEmitter {
 public:
  RowEmitter(const ir::Kernel& k, const Specialization& spec, const RowSchedule& s)
      : k_(k), spec_(spec), s_(s) {
    n_ = k.vector_symbol >= 0 ? *k.symbols[k.vector_symbol].value : 1;
    vec_ = s.vec;
    g_ = s.group;
    r_ = s.rows_per_cta;
    c_ = s.chunks;
    k_cl_ = s.cluster;
    push_ = pushes_partials(k_cl_, s.column_reduction, row_reductions(k));
    if (s.online) {
      for (const OnlineSum& o : online_sums(k)) online_[o.sum] = o;
    }
  }

  GeneratedKernel run();

 private:
  void analyze();
  int access_of(int32_t tensor, const ir::View& view);
  void plan_params();
  void emit_params_struct();
  void emit_main();
  void emit_cluster_helpers();
  void emit_row_body();
  void emit_finalize();
  void emit_group_combine();
  void choose_group_combine();
  void emit_scalar(ir::ValueId id);
  void emit_phase(int p);
  void emit_chunk_load(const std::string& dst, int access, const std::string& cond,
                       const std::string& offset_prefix = "");
  void emit_chunk_store(const std::string& src, int access, DType t);
  std::string name(ir::ValueId id) const;
  std::string elem_ptr(int access, const std::string& index, const std::string& prefix = "") const;
  void emit_row_indices(const std::string& prefix, const std::string& row);
  void emit_cached_loads(bool invariant, const std::string& array_prefix,
                         const std::string& offset_prefix, const std::string& valid,
                         bool skip_staged = false);
  bool staged(ir::ValueId id) const;
  bool reread(ir::ValueId id) const { return s_.reread && staged(id); }
  std::string stage_slot(size_t load, const std::string& stage) const;
  void emit_stage_issue(const std::string& row, const std::string& stage);
  void emit_scalar_prefetch(const std::string& row, const std::string& prefix, bool declare);
  void emit_stage_reads();
  std::string offset_expr(const Access& a, const std::string& prefix) const;
  bool packed(ir::ValueId id) const;
  /// How reduction `r` is spelled in CUDA (its state type and combine operator).
  cuda::ReduceSpelling spelling(ir::ValueId r) const {
    const ir::Node& n = k_.node(r);
    if (online_.count(r)) {
      // (m, s): the running maximum of u and the sum of exp(u - m); OnlineSum in schedule.h.
      const std::string t = fmt::format("kdsl_sumexp<{}>", cuda::reg_type(n.type.dtype));
      return {t, fmt::format("{}{{-{}, 0}}", t, cuda::literal(n.type.dtype, kInf)),
              "kdsl_op_sumexp<kdsl_exp_fn>{}", "{0}.s"};
    }
    return cuda::reduce_spelling(static_cast<ir::ReduceKind>(n.fn), k_.node(n.args[0]).type.dtype);
  }
  /// The vector a reduction reads in its phase: u for an online sum, else its argument.
  ir::ValueId reduced(ir::ValueId r) const {
    auto it = online_.find(r);
    return it != online_.end() ? it->second.u : k_.node(r).args[0];
  }
  /// The kernel's exp (approximate or not, as its math) applied to the CUDA expression `x`.
  std::string exp_of(ir::ValueId r, const std::string& x) const {
    const ir::Node& e = k_.node(k_.node(r).args[0]);
    return cuda::op_expr(k_, e, {x}, {e.type.dtype});
  }
  /// The accumulator of column reduction `store` for element (c, v) of this thread.
  std::string column_slot(size_t store) const {
    return s_.smem_columns ? fmt::format("CA{}[(c * VEC + v) * {} + {}]", store,
                                         k_cl_ > 1 ? "GC" : "G", k_cl_ > 1 ? "tl" : "lane")
                           : fmt::format("CA{}[c * VEC + v]", store);
  }
  std::map<size_t, uint32_t> smem_offset_;    // byte offset of each column accumulator in kdsl_smem
  uint32_t stage_offset_ = 0;                 // byte offset of the row-staging buffer in kdsl_smem
  std::vector<ir::ValueId> staged_;           // the row loads staged in shared memory, in order
  std::map<ir::ValueId, int> staged_scalar_;  // per-row scalars loaded a row ahead; slots
  /// "true" when an access streams (read or written once per row) and the schedule asks for
  /// evict-first cache hints.
  const char* cs(int access) const {
    return s_.stream && loop_view(accesses_[access].view) ? "true" : "false";
  }
  std::string vstride(int access) const;
  bool fast(int32_t tensor) const { return spec_.fast(tensor); }
  bool contiguous(int32_t tensor) const { return spec_.contiguous(tensor); }
  std::string in_range() const;
  /// Opens the unrolled loop over the thread's C chunks of a row, with the chunk's first column
  /// (`col`) and whether it lies in the row (`in_range`); the caller closes it.
  void open_chunk_loop(int unroll = 0) {
    if (unroll > 0) {
      t_.line("#pragma unroll {}", unroll);
    } else {
      t_.line("#pragma unroll");
    }
    t_.line("for (int c = 0; c < C; ++c) {{");
    t_.in();
    t_.line("const int col = (c * G + lane) * VEC;");
    t_.line("const bool in_range = {};", in_range());
  }

  const ir::Kernel& k_;
  const Specialization& spec_;
  const RowSchedule& s_;
  int64_t n_;
  int vec_, g_, r_, c_;
  int k_cl_ = 1;  // CTAs per row (a thread-block cluster); 1 without clusters
  // On a cluster, with column reductions: each warp writes its row partials into every CTA of the
  // cluster (measured faster for backward kernels, nineteenth session: LayerNorm backward bf16
  // 4096 x 32768 348 us against 389, RMSNorm backward 288 against 323).
  bool push_ = false;
  std::map<ir::ValueId, OnlineSum> online_;  // the sums run online (RowSchedule::online)
  /// This CTA's (with clusters: this cluster's) index and the grid's count of them.
  const char* cta_index() const { return k_cl_ > 1 ? "(blockIdx.x / K)" : "blockIdx.x"; }
  const char* cta_count() const { return k_cl_ > 1 ? "(gridDim.x / K)" : "gridDim.x"; }
  std::vector<int> level_;
  std::vector<bool> row_dep_;
  std::vector<bool> hoisted_;
  std::vector<bool> cached_;
  int phases_ = 0;
  std::vector<Access> accesses_;
  std::map<ir::ValueId, int> load_access_;
  std::vector<int> store_access_;
  std::vector<int> store_ws_;  // workspace index of each reduce store, -1 otherwise
  // The CTA's R row groups add their column partials together (in shared memory, in group
  // order) before one of them stores the CTA's partial (choose_group_combine()).
  bool combine_groups_ = false;
  // On a cluster with pushed partials: each warp's partial goes to every CTA with st.async, which
  // counts its bytes on an mbarrier of the receiving CTA, instead of plain remote stores and a
  // cluster barrier per row (analyze(), emit_phase()).
  bool async_push_ = false;
  // RowSchedule::push bit 1 where partials are pushed: a point's states in one struct.
  bool packed_push_ = false;
  int points_ = 0;  // the points of the row where reductions combine (their levels' count)
  std::string sym_;
  LaunchPlan plan_;
  Text t_;
};

int RowEmitter::access_of(int32_t tensor, const ir::View& view) {
  for (size_t i = 0; i < accesses_.size(); ++i) {
    if (accesses_[i].tensor == tensor && accesses_[i].view == view) return static_cast<int>(i);
  }
  accesses_.push_back({tensor, view});
  return static_cast<int>(accesses_.size() - 1);
}

void RowEmitter::analyze() {
  size_t n = k_.nodes.size();
  level_.assign(n, 0);
  row_dep_.assign(n, false);
  hoisted_.assign(n, false);
  cached_.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = k_.nodes[i];
    int lv = 0;
    bool dep = node.op == Op::load && loop_view(node.view);
    for (ir::ValueId a : node.args) {
      lv = std::max(lv, level_[a]);
      dep = dep || row_dep_[a];
    }
    if (node.op == Op::reduce) lv = level_[reduced(static_cast<ir::ValueId>(i))] + 1;
    if (node.op == Op::scan || node.op == Op::shift || node.op == Op::extract) {
      throw InternalError("codegen: scans are not handled by the row schedule");
    }
    level_[i] = lv;
    row_dep_[i] = dep;
    hoisted_[i] = node.type.form == Form::scalar && lv == 0 && !dep && node.op != Op::load;
    if (node.op == Op::load) {
      load_access_[static_cast<ir::ValueId>(i)] = access_of(node.index, node.view);
      if (node.type.form == Form::vector) {
        cached_[i] = loop_view(node.view) ? s_.cache_rows : s_.cache_invariant;
      }
    }
  }
  int ws = 0;
  for (const ir::Store& st : k_.stores) {
    store_access_.push_back(access_of(st.tensor, st.view));
    store_ws_.push_back(st.kind == ir::StoreKind::reduce ? ws++ : -1);
    if (st.kind == ir::StoreKind::reduce && loop_view(st.view)) {
      // Vector column reductions that keep some loop variables (GroupNorm's dw[g, :] += v): the
      // interpreter runs them; no GPU schedule does yet (dsl/SPEC.md section 11.3). Reported at
      // the store, as the scan schedule's limits are.
      const std::string& name = k_.tensors[st.tensor].name;
      Diagnostic d;
      d.loc = st.loc;  // the store's target: the tensor's name
      d.length = static_cast<uint32_t>(name.size());
      d.message = fmt::format(
          "the column reduction into '{}' keeps some loop variables and sums over the others, "
          "with a vector value; the GPU code generator does not support that yet (dsl/SPEC.md "
          "section 11.3)",
          name);
      d.hint = "the CPU reference interpreter runs it (kdsl run --device cpu)";
      throw SourceError(st.loc.valid()
                            ? render_diagnostic(d)
                            : fmt::format("kernel '{}': {}; {}", k_.name, d.message, d.hint));
    }
    if (vector_view(st.view) || st.kind == ir::StoreKind::reduce) {
      phases_ = std::max(phases_, level_[st.value] + (vector_view(st.view) ? 1 : 0));
    }
  }
  // The pushed partials with st.async: the reductions' states a 4-byte word at a time, an
  // mbarrier per buffer and per point of the row where reductions combine (phase p's reductions
  // complete one phase of kdsl_full[p][buf] per row: softmax's max, then its sum). With no
  // cluster barrier per row, whose release waited for the previous row's stores, softmax
  // backward bf16 4096 x 32768 took 200 us against 214, RMSNorm bf16 512 x 262144 201 against
  // 227 (twenty-seventh session, AK4; f32 states at one point); softmax's two points 257 against
  // 280 us at bf16 512 x 262144 (twenty-ninth session, AL1). States of more than one word
  // (LayerNorm's Welford state) were pushed from the thirtieth session on.
  async_push_ = push_ && g_ > 32 && row_reductions(k_);
  packed_push_ = async_push_ && (s_.push & 2);
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = k_.nodes[i];
    if (node.op == Op::reduce) {
      points_ = std::max(points_, level_[reduced(static_cast<ir::ValueId>(i))] + 1);
    }
  }
  phases_ = std::max(phases_, points_);
}

std::string RowEmitter::name(ir::ValueId id) const {
  const ir::Node& n = k_.node(id);
  if (n.type.form == Form::scalar) return fmt::format("s{}", id);
  if (n.op == Op::load) {
    if (reread(id)) return fmt::format("Lc{}[v]", id);
    if (packed(id)) {
      return fmt::format("kdsl_unpack_{}(L{}[(c * VEC + v) >> 1], v & 1)",
                         n.type.dtype == DType::bf16 ? "bf16" : "f16", id);
    }
    return cached_[id] ? fmt::format("L{}[c * VEC + v]", id) : fmt::format("Lc{}[v]", id);
  }
  if (n.op == Op::position) return "static_cast<long long>(col + v)";
  return fmt::format("v{}", id);
}

std::string RowEmitter::vstride(int access) const {
  const Access& a = accesses_[access];
  for (size_t ax = 0; ax < a.view.size(); ++ax) {
    if (a.view[ax].kind == ir::AxisIndex::Kind::vector) {
      return contiguous(a.tensor) ? "" : fmt::format("p.st{}_{}", a.tensor, ax);
    }
  }
  return "";
}

std::string RowEmitter::elem_ptr(int access, const std::string& index,
                                 const std::string& prefix) const {
  const Access& a = accesses_[access];
  std::string vs = vstride(access);
  std::string o = loop_view(a.view) ? prefix + "o" : "o";
  if (vs.empty()) return fmt::format("t{} + {}{} + {}", a.tensor, o, access, index);
  return fmt::format("t{} + {}{} + static_cast<long long>({}) * {}", a.tensor, o, access, index,
                     vs);
}

bool RowEmitter::packed(ir::ValueId id) const {
  const ir::Node& n = k_.node(id);
  return cached_[id] && !reread(id) && s_.pack && vec_ >= 2 && fast(n.index) &&
         dtype_size(n.type.dtype) == 2;
}

std::string RowEmitter::offset_expr(const Access& a, const std::string& prefix) const {
  std::string e = "0LL";
  for (size_t ax = 0; ax < a.view.size(); ++ax) {
    const ir::AxisIndex& ix = a.view[ax];
    if (ix.kind == ir::AxisIndex::Kind::loop) {
      e += fmt::format(" + {}i{} * p.st{}_{}", prefix, ix.value, a.tensor, ax);
    }
    if (ix.kind == ir::AxisIndex::Kind::constant && ix.value != 0) {
      e += fmt::format(" + {}LL * p.st{}_{}", ix.value, a.tensor, ax);
    }
  }
  return e;
}

// The loop indices of row `row` and the offsets of the row-dependent accesses, named with
// `prefix` (i0, o3 for the current row; ni0, no3 for the prefetched one).
void RowEmitter::emit_row_indices(const std::string& prefix, const std::string& row) {
  if (k_.loop.size() == 1) {
    t_.line("const long long {}i0 = {};", prefix, row);
  } else {
    t_.line("long long {}rest = {};", prefix, row);
    for (size_t l = k_.loop.size(); l-- > 1;) {
      t_.line("const long long {}i{} = {}rest % p.sym{};", prefix, l, prefix, k_.loop[l].extent);
      t_.line("{}rest /= p.sym{};", prefix, k_.loop[l].extent);
    }
    t_.line("const long long {}i0 = {}rest;", prefix, prefix);
  }
  for (size_t a = 0; a < accesses_.size(); ++a) {
    if (loop_view(accesses_[a].view)) {
      t_.line("const long long {}o{} = {};", prefix, a, offset_expr(accesses_[a], prefix));
    }
  }
}

// Loads the cached vectors (row-dependent or loop-invariant ones) of this thread's chunks into
// arrays named <array_prefix><node id>: packed pairs of 16-bit values, or register values.
void RowEmitter::emit_cached_loads(bool invariant, const std::string& array_prefix,
                                   const std::string& offset_prefix, const std::string& valid,
                                   bool skip_staged) {
  std::vector<ir::ValueId> ids;
  for (size_t i = 0; i < k_.nodes.size(); ++i) {
    const ir::Node& n = k_.nodes[i];
    if (skip_staged && staged(static_cast<ir::ValueId>(i))) continue;
    if (n.op == Op::load && n.type.form == Form::vector && cached_[i] &&
        loop_view(n.view) != invariant) {
      ids.push_back(static_cast<ir::ValueId>(i));
    }
  }
  if (ids.empty()) return;
  open_chunk_loop();
  for (ir::ValueId id : ids) {
    int a = load_access_.at(id);
    std::string cond = valid.empty() ? "in_range" : valid + " && in_range";
    if (packed(id)) {
      t_.line("if ({}) {{", cond);
      t_.in();
      t_.line("kdsl_load_raw<VEC, {}>({}, &{}{}[c * VEC / 2]);", cs(a),
              elem_ptr(a, "col", offset_prefix), array_prefix, id);
      t_.out();
      t_.line("}} else {{");
      t_.in();
      t_.line("#pragma unroll");
      t_.line("for (int v = 0; v < VEC / 2; ++v) {}{}[c * VEC / 2 + v] = 0u;", array_prefix, id);
      t_.out();
      t_.line("}}");
    } else {
      emit_chunk_load(fmt::format("&{}{}[c * VEC]", array_prefix, id), a, cond, offset_prefix);
    }
  }
  t_.out();
  t_.line("}}");
}

// A row load staged in shared memory (rows.stage > 1): cached, and a row load by staged_load (the
// scheduler's rule, schedule.h), so the buffer sizes agree.
bool RowEmitter::staged(ir::ValueId id) const {
  return s_.stage >= 2 && cached_[id] &&
         staged_load(k_, spec_, k_.node(id), vec_) == StagedLoad::row;
}

// Issues this thread's copies of row `row` into stage `stage` of the staging buffer (zeros for
// a row past the end or a chunk past N), as one commit group. Slots are laid out [stage][load]
// [chunk][thread] in 16-byte units, so a warp's copies fill 512 contiguous bytes. Per-row scalars
// are not copied here: see emit_scalar_prefetch.
void RowEmitter::emit_stage_issue(const std::string& row, const std::string& stage) {
  t_.line("{{");
  t_.in();
  t_.line("const long long srow = {};", row);
  emit_row_indices("s", "srow");
  t_.line("const bool svalid = srow < p.rows;");
  t_.line("const int sst = {};", stage);
  open_chunk_loop();
  for (size_t li = 0; li < staged_.size(); ++li) {
    int a = load_access_.at(staged_[li]);
    t_.line("kdsl_cp_async<16>(kdsl_stage + (((sst * NS + {}) * C + c) * T + threadIdx.x) * 16,",
            li);
    // The source address is formed even for a row past the end or a chunk past N: with `ok`
    // false the copy ignores its source (PTX cp.async with a source size of 0) and zero-fills.
    // Selecting a valid address instead made ptxas form every chunk's address under a
    // predicate, 64 more instructions per kernel (LayerNorm backward bf16 N = 8192).
    t_.line("                  static_cast<const void*>({}), svalid && in_range);",
            elem_ptr(a, "col", "s"));
  }
  t_.out();
  t_.line("}}");
  t_.out();
  t_.line("}}");
  t_.line("kdsl_cp_commit();");
}

// Per-row scalars of a staged schedule (RMSNorm backward's rstd, LayerNorm backward's mu and
// rstd) are loaded one row ahead into registers SC<slot>: before the loop for the CTA's first row
// (`declare`), and at the top of each iteration for the next one, after the iteration has taken
// this row's values into SCc<slot>. Each thread loads them itself (the lanes of a row read one
// address). Copying them into shared memory with a 4-byte cp.async per thread instead, as the
// rows are, made a hand-written LayerNorm backward bf16 46% slower at 32768 x 4096 (205.7 us
// against 301.3, 2 CTAs of 512 threads per SM) and 6% slower at 8192 x 8192 (eighteenth
// session, bench/experiments/lnbwd.cu).
void RowEmitter::emit_scalar_prefetch(const std::string& row, const std::string& prefix,
                                      bool declare) {
  if (staged_scalar_.empty()) return;
  for (const auto& [id, slot] : staged_scalar_) {
    if (declare) t_.line("{} SC{};", cuda::reg_type(k_.node(id).type.dtype), slot);
  }
  t_.line("{{");
  t_.in();
  t_.line("const long long {}row = {};", prefix, row);
  emit_row_indices(prefix, prefix + "row");
  for (const auto& [id, slot] : staged_scalar_) {
    const ir::Node& n = k_.node(id);
    const std::string v = cuda::from_storage(
        n.type.dtype, fmt::format("t{}[{}o{}]", n.index, prefix, load_access_.at(id)));
    t_.line("SC{} = {}row < p.rows ? {} : {};", slot, prefix, v, cuda::zero(n.type.dtype));
  }
  t_.out();
  t_.line("}}");
}

// This thread's 16-byte slot of chunk c of staged load `load` (staged_ order) in stage `stage`,
// as a pointer to the load's storage type.
std::string RowEmitter::stage_slot(size_t load, const std::string& stage) const {
  DType dt = k_.tensors[k_.node(staged_[load]).index].dtype;
  return fmt::format(
      "reinterpret_cast<const {}*>(kdsl_stage + ((({} * NS + {}) * C + c) * T + threadIdx.x) * 16)",
      cuda::storage_type(dt), stage, load);
}

// Reads this row's staged chunks (stage `sidx`) from shared memory into the register arrays.
void RowEmitter::emit_stage_reads() {
  t_.line("#pragma unroll");
  t_.line("for (int c = 0; c < C; ++c) {{");
  t_.in();
  for (size_t li = 0; li < staged_.size(); ++li) {
    ir::ValueId id = staged_[li];
    if (reread(id)) continue;  // read by each phase (emit_phase)
    DType dt = k_.tensors[k_.node(id).index].dtype;
    std::string slot = stage_slot(li, "sidx");
    if (packed(id)) {
      t_.line("kdsl_load_raw<VEC>({}, &L{}[c * VEC / 2]);", slot, id);
    } else if (dt == DType::bf16 || dt == DType::f16) {
      t_.line("kdsl_load<VEC>({}, &L{}[c * VEC], {});", slot, id,
              dt == DType::bf16 ? "true" : "false");
    } else {
      t_.line("kdsl_load<VEC>({}, &L{}[c * VEC]);", slot, id);
    }
  }
  t_.out();
  t_.line("}}");
}

std::string RowEmitter::in_range() const {
  return n_ % (static_cast<int64_t>(g_) * vec_) == 0 ? "true" : "(c < C - 1 || col < N)";
}

void RowEmitter::plan_params() {
  codegen::SlotLayout slots(k_, plan_);
  slots.add(ParamSlot::Kind::partials, 0, 0, 8, DType::i64);
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    if (store_ws_[j] < 0) continue;
    const ir::Store& st = k_.stores[j];
    uint64_t per_group = (vector_view(st.view) ? static_cast<uint64_t>(n_) : 1) *
                         dtype_size(k_.node(st.value).type.dtype);
    plan_.workspaces.push_back({per_group * static_cast<uint64_t>(combine_groups_ ? 1 : r_)});
    slots.add(ParamSlot::Kind::workspace, store_ws_[j], 0, 8, DType::i64);
  }
  slots.finish();
}

void RowEmitter::emit_params_struct() {
  codegen::emit_params_struct(t_, k_, plan_, sym_, [&](const ParamSlot& s) {
    DType acc = DType::f32;  // a column reduction's partials: its value's dtype
    for (size_t j = 0; j < k_.stores.size(); ++j) {
      if (store_ws_[j] == s.index) acc = k_.node(k_.stores[j].value).type.dtype;
    }
    return fmt::format("{}*", cuda::reg_type(acc));
  });
}

void RowEmitter::emit_scalar(ir::ValueId id) {
  const ir::Node& n = k_.node(id);
  const char* rt = cuda::reg_type(n.type.dtype);
  switch (n.op) {
    case Op::param: {
      std::string v = fmt::format("p.sc{}", n.index);
      if (n.type.dtype == DType::b8) v = fmt::format("(p.sc{} != 0)", n.index);
      t_.line("const {} s{} = {};", rt, id, v);
      return;
    }
    case Op::shape:
      t_.line(
          "const long long s{} = {};", id,
          n.index == k_.vector_symbol ? fmt::format("{}LL", n_) : fmt::format("p.sym{}", n.index));
      return;
    case Op::load: {
      int a = load_access_.at(id);
      std::string v = cuda::from_storage(n.type.dtype, fmt::format("t{}[o{}]", n.index, a));
      if (auto it = staged_scalar_.find(id); it != staged_scalar_.end()) {
        v = fmt::format("SCc{}", it->second);
      }
      t_.line("const {} s{} = valid ? {} : {};", rt, id, v, cuda::zero(n.type.dtype));
      return;
    }
    case Op::reduce:
      return;  // assigned at the end of its phase
    default:
      break;
  }
  std::vector<std::string> args;
  std::vector<DType> dts;
  for (ir::ValueId a : n.args) {
    args.push_back(name(a));
    dts.push_back(k_.node(a).type.dtype);
  }
  t_.line("const {} s{} = {};", rt, id, cuda::op_expr(k_, n, args, dts));
}

void RowEmitter::emit_chunk_load(const std::string& dst, int access, const std::string& cond,
                                 const std::string& offset_prefix) {
  const Access& a = accesses_[access];
  DType dt = k_.tensors[a.tensor].dtype;
  t_.line("if ({}) {{", cond);
  t_.in();
  if (fast(a.tensor) && vec_ > 1 && (dt == DType::bf16 || dt == DType::f16)) {
    t_.line("kdsl_load<VEC, {}>({}, {}, {});", cs(access), elem_ptr(access, "col", offset_prefix),
            dst, dt == DType::bf16 ? "true" : "false");
  } else if (fast(a.tensor) && vec_ > 1 && (dt == DType::f32 || dt == DType::b8)) {
    t_.line("kdsl_load<VEC, {}>({}, {});", cs(access), elem_ptr(access, "col", offset_prefix), dst);
  } else {
    t_.line("#pragma unroll");
    t_.line("for (int v = 0; v < VEC; ++v) ({})[v] = {};", dst,
            cuda::from_storage(dt, "*(" + elem_ptr(access, "col + v", offset_prefix) + ")"));
  }
  t_.out();
  t_.line("}} else {{");
  t_.in();
  t_.line("#pragma unroll");
  t_.line("for (int v = 0; v < VEC; ++v) ({})[v] = {};", dst, cuda::zero(dt));
  t_.out();
  t_.line("}}");
}

void RowEmitter::emit_chunk_store(const std::string& src, int access, DType dt) {
  const Access& a = accesses_[access];
  if (fast(a.tensor) && vec_ > 1 && (dt == DType::bf16 || dt == DType::f16)) {
    t_.line("kdsl_store<VEC, {}>({}, {}, {});", cs(access), elem_ptr(access, "col"), src,
            dt == DType::bf16 ? "true" : "false");
  } else if (fast(a.tensor) && vec_ > 1 && (dt == DType::f32 || dt == DType::b8)) {
    t_.line("kdsl_store<VEC, {}>({}, {});", cs(access), elem_ptr(access, "col"), src);
  } else {
    t_.line("#pragma unroll");
    t_.line("for (int v = 0; v < VEC; ++v) *({}) = {};", elem_ptr(access, "col + v"),
            cuda::to_storage(dt, src + "[v]"));
  }
}

void RowEmitter::emit_phase(int p) {
  // What this phase computes along the vector axis: reductions of level-p vectors, stores of
  // level-p values, and everything they need.
  std::vector<ir::ValueId> reductions;
  std::set<ir::ValueId> need;
  std::vector<ir::ValueId> work;
  for (size_t i = 0; i < k_.nodes.size(); ++i) {
    const ir::Node& n = k_.nodes[i];
    if (n.op == Op::reduce && level_[reduced(static_cast<ir::ValueId>(i))] == p) {
      reductions.push_back(static_cast<ir::ValueId>(i));
      work.push_back(reduced(static_cast<ir::ValueId>(i)));
    }
  }
  std::vector<size_t> stores;
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    const ir::Store& st = k_.stores[j];
    if (!vector_view(st.view)) continue;
    if (level_[st.value] == p ||
        (k_.node(st.value).type.form == Form::scalar && level_[st.value] == p)) {
      stores.push_back(j);
      work.push_back(st.value);
    }
  }
  if (reductions.empty() && stores.empty()) return;
  while (!work.empty()) {
    ir::ValueId id = work.back();
    work.pop_back();
    const ir::Node& n = k_.node(id);
    if (n.type.form != Form::vector || !need.insert(id).second) continue;
    if (n.op == Op::load) continue;
    for (ir::ValueId a : n.args) work.push_back(a);
  }
  t_.line("// phase {}", p);
  t_.line("{{");
  t_.in();
  for (ir::ValueId r : reductions) {
    auto sp = spelling(r);
    t_.line("acc{} = {};", r, sp.identity);
    if (static_cast<ir::ReduceKind>(k_.node(r).fn) == ir::ReduceKind::var) {
      // The thread's elements as shifted sums (the shift is its first element); see
      // kdsl_welford_shifted in the prelude.
      t_.line("{0} K{1} = 0, S{1} = 0, Q{1} = 0;", cuda::reg_type(k_.node(r).type.dtype), r);
      t_.line("int n{} = 0;", r);
    }
  }
  // A phase that indexes no register array by chunk (no cached vectors, no column accumulators
  // in registers) may roll its chunk loop (RowSchedule::unroll).
  bool rollable = s_.unroll > 0;
  for (ir::ValueId id : need) {
    const ir::Node& n = k_.node(id);
    if (n.op == Op::load && cached_[id]) rollable = false;
  }
  for (size_t j : stores) {
    if (k_.stores[j].kind != ir::StoreKind::write) rollable = false;
  }
  open_chunk_loop(rollable ? s_.unroll : 0);
  for (ir::ValueId id : need) {
    const ir::Node& n = k_.node(id);
    if (n.op != Op::load || !reread(id)) continue;
    // RowSchedule::reread: this chunk of the staged row, from this thread's slot.
    const size_t li =
        static_cast<size_t>(std::find(staged_.begin(), staged_.end(), id) - staged_.begin());
    const DType dt = k_.tensors[n.index].dtype;
    t_.line("{} Lc{}[VEC];", cuda::reg_type(n.type.dtype), id);
    t_.line("kdsl_load<VEC>({}, Lc{}{});", stage_slot(li, "sidx"), id,
            dt == DType::bf16  ? ", true"
            : dt == DType::f16 ? ", false"
                               : "");
  }
  for (ir::ValueId id : need) {
    const ir::Node& n = k_.node(id);
    if (n.op != Op::load || cached_[id]) continue;
    int a = load_access_.at(id);
    t_.line("{} Lc{}[VEC];", cuda::reg_type(n.type.dtype), id);
    emit_chunk_load(fmt::format("Lc{}", id), a,
                    loop_view(n.view) ? "valid && in_range" : "in_range");
  }
  for (size_t j : stores) {
    const ir::Store& st = k_.stores[j];
    if (st.kind == ir::StoreKind::write) {
      t_.line("{} O{}[VEC];", cuda::reg_type(k_.tensors[st.tensor].dtype), j);
    }
  }
  for (ir::ValueId r : reductions) {
    if (online_.count(r)) t_.line("{} X{}[VEC];", cuda::reg_type(k_.node(r).type.dtype), r);
  }
  t_.line("#pragma unroll");
  t_.line("for (int v = 0; v < VEC; ++v) {{");
  t_.in();
  for (ir::ValueId id : need) {
    const ir::Node& n = k_.node(id);
    if (n.op == Op::load || n.op == Op::position) continue;
    std::vector<std::string> args;
    std::vector<DType> dts;
    for (ir::ValueId a : n.args) {
      args.push_back(name(a));
      dts.push_back(k_.node(a).type.dtype);
    }
    t_.line("const {} v{} = {};", cuda::reg_type(n.type.dtype), id,
            cuda::op_expr(k_, n, args, dts));
  }
  for (ir::ValueId r : reductions) {
    const ir::Node& n = k_.node(r);
    auto kind = static_cast<ir::ReduceKind>(n.fn);
    auto sp = spelling(r);
    std::string x = name(reduced(r));
    if (online_.count(r)) {
      // The chunk's values, -inf past N; added after the loop over the chunk (below).
      t_.line("X{0}[v] = in_range ? {1} : -{2};", r, x, cuda::literal(n.type.dtype, kInf));
    } else if (kind == ir::ReduceKind::var) {
      // Chunk 0 is in range whenever any chunk of this thread is (columns grow with c).
      t_.line("if (c == 0 && v == 0) K{} = {};", r, x);
      t_.line("if (in_range) {{");
      t_.in();
      t_.line("const {} d = {} - K{};", cuda::reg_type(k_.node(r).type.dtype), x, r);
      t_.line("S{0} = S{0} + d;", r);
      t_.line("Q{0} = Q{0} + d * d;", r);
      t_.out();
      t_.line("}}");
    } else if (kind == ir::ReduceKind::argmax || kind == ir::ReduceKind::argmin) {
      t_.line("if (in_range) acc{0} = {1}(acc{0}, {2}{{{3}, static_cast<long long>(col + v)}});", r,
              sp.op, sp.state_type, x);
    } else {
      t_.line("if (in_range) acc{0} = {1}(acc{0}, {2});", r, sp.op, x);
    }
  }
  for (size_t j : stores) {
    const ir::Store& st = k_.stores[j];
    if (st.kind == ir::StoreKind::write) {
      t_.line("O{}[v] = {};", j,
              name(cuda::stored_value(k_, st.value, k_.tensors[st.tensor].dtype)));
    } else {
      t_.line("if (valid && in_range) {0} = {0} + {1};", column_slot(j), name(st.value));
    }
  }
  t_.out();
  t_.line("}}");
  for (ir::ValueId r : reductions) {
    if (static_cast<ir::ReduceKind>(k_.node(r).fn) != ir::ReduceKind::var) continue;
    t_.line("if (in_range) n{} += VEC;", r);
  }
  for (ir::ValueId r : reductions) {
    if (!online_.count(r)) continue;
    // An online sum takes a chunk at a time, without branches (a branch per value was slower:
    // softmax bf16 2048 x 65536, 16 chunks a thread fully unrolled, 383 us against 289 so and
    // 245 not online; bf16 1024 x 131072 306 against 297; f32 512 x 262144 554 against 580;
    // twenty-ninth session, H100):
    // the chunk's maximum (a NaN never wins it), the sum rescaled to the larger maximum (m = -inf
    // only while s = 0, and exp(-inf - -inf) would be NaN), then each value's exp; -inf adds
    // nothing, +inf or NaN make the sum NaN (inf - inf, NaN - m), as they make softmax's.
    const char* t = cuda::reg_type(k_.node(r).type.dtype);
    const std::string inf = cuda::literal(k_.node(r).type.dtype, kInf);
    t_.line("{{");
    t_.in();
    t_.line("{} mc = acc{}.m;", t, r);
    t_.line("#pragma unroll");
    t_.line("for (int v = 0; v < VEC; ++v) mc = X{0}[v] > mc ? X{0}[v] : mc;", r);
    t_.line("acc{0}.s = mc == acc{0}.m ? acc{0}.s : acc{0}.s * {1};", r,
            exp_of(r, fmt::format("(acc{}.m - mc)", r)));
    t_.line("acc{}.m = mc;", r);
    t_.line("#pragma unroll");
    t_.line("for (int v = 0; v < VEC; ++v) acc{0}.s += X{0}[v] == -{1} ? {2}(0) : {3};", r, inf, t,
            exp_of(r, fmt::format("(X{}[v] - mc)", r)));
    t_.out();
    t_.line("}}");
  }
  for (size_t j : stores) {
    const ir::Store& st = k_.stores[j];
    if (st.kind != ir::StoreKind::write) continue;
    t_.line("if (valid && in_range) {{");
    t_.in();
    emit_chunk_store(fmt::format("O{}", j), store_access_[j], k_.tensors[st.tensor].dtype);
    t_.out();
    t_.line("}}");
  }
  t_.out();
  t_.line("}}");
  for (ir::ValueId r : reductions) {
    if (static_cast<ir::ReduceKind>(k_.node(r).fn) != ir::ReduceKind::var) continue;
    t_.line("acc{0} = kdsl_welford_shifted(K{0}, S{0}, Q{0}, n{0});", r);
  }
  // Combine the threads' partial states: butterfly within the group's warp, then (G > 32)
  // through shared memory (below).
  int width = std::min(g_, 32);
  // RowSchedule::push bit 1: the point's states packed into one struct (declared with the
  // buffers), every butterfly done before the warp pushes the struct once per CTA.
  const bool packed = packed_push_ && !reductions.empty();
  // RowSchedule::push bit 0: lane q of the warp pushes to CTA q (after the butterfly every lane
  // holds the warp's partial), where lane 0 pushes to every CTA in turn.
  const std::string pushers = (s_.push & 1) ? "(tl & 31) < K" : "(tl & 31) == 0";
  const std::string push_to = (s_.push & 1) ? "kdsl_push_{}(&{}[buf][group][lane >> 5], {}, "
                                              "&kdsl_full[{}][buf], tl & 31);"
                                            : "for (int q = 0; q < K; ++q) kdsl_push_{}(&{}[buf]"
                                              "[group][lane >> 5], {}, &kdsl_full[{}][buf], q);";
  if (packed) {
    for (ir::ValueId r : reductions) {
      t_.line("acc{0} = kdsl_warp_reduce<{1}>(acc{0}, {2});", r, width, spelling(r).op);
    }
    t_.line("__syncwarp();");
    t_.line("if ({}) {{", pushers);
    t_.in();
    t_.line("kdsl_pk{} pk;", p);
    for (ir::ValueId r : reductions) t_.line("pk.a{0} = acc{0};", r);
    if (!(s_.push & 1)) t_.line("#pragma unroll");
    t_.line(fmt::runtime(push_to), "packed", fmt::format("redp{}", p), "pk", p);
    t_.close();
  }
  for (ir::ValueId r : packed ? std::vector<ir::ValueId>{} : reductions) {
    auto sp = spelling(r);
    t_.line("acc{0} = kdsl_warp_reduce<{1}>(acc{0}, {2});", r, width, sp.op);
    if (g_ > 32 && !push_) {
      t_.line("if ((lane & 31) == 0) red{}[buf][group][lane >> 5] = acc{};", r, r);
    } else if (g_ > 32) {
      // On a cluster each warp's first lane writes the warp's partial into the same slot of
      // every CTA of the cluster (distributed shared memory): once they are in, every CTA holds
      // all G / 32 partials of the row, with no barrier of its own and no remote load on the
      // way. The writes are st.async (async_push_: here every row reduction), a 4-byte word of
      // the state at a time, each counting its 4 bytes on the receiving CTA's mbarrier for this
      // point of the row and buffer, and each CTA waits for its own mbarrier's phase. (Before,
      // plain remote stores and a cluster barrier, whose release makes each warp wait for its
      // earlier global stores, the previous row's dx, first; measured, twenty-second session,
      // bf16 4096 x 32768, three rounds: LayerNorm backward 330 -> 285 us, RMSNorm backward 276
      // -> 234 with st.async.) Reuse
      // of a buffer two rows later is safe without a barrier: a CTA pushes row r + 2 into buffer b
      // only after its own mbarrier saw every warp's row r + 1 partials, and each warp pushes row r
      // + 1 only after it has read (and used) row r's from buffer b; the
      // __syncwarp orders the other lanes' reads before lane 0's push in the memory model too
      // (their values reach lane 0 through shuffles, which do not order memory).
      t_.line("__syncwarp();");
      t_.line("if ({}) {{", pushers);
      t_.in();
      if (!(s_.push & 1)) t_.line("#pragma unroll");
      t_.line(fmt::runtime(push_to), "async", fmt::format("red{}", r), fmt::format("acc{}", r), p);
      t_.close();
    }
  }
  if (g_ > 32 && push_ && !reductions.empty()) {
    // The row's G / 32 partials, in a fixed order (the same bits in every thread of every CTA):
    // lane l combines partials l, l + 32, ... in turn, then a butterfly over the lanes, lower
    // lanes first.
    const int partials = g_ / 32;  // a power of two, at least 2 x K
    // The CTA receives every warp's partial of each of its R rows for each reduction: the phase
    // of this buffer's mbarrier completes when those bytes have arrived (and thread 0 has said
    // how many: the count may go below zero before it does).
    std::string state_bytes = packed ? fmt::format("sizeof(kdsl_pk{})", p) : "";
    for (ir::ValueId r : packed ? std::vector<ir::ValueId>{} : reductions) {
      state_bytes +=
          fmt::format("{}sizeof({})", state_bytes.empty() ? "" : " + ", spelling(r).state_type);
    }
    t_.line(
        "if (threadIdx.x == 0) kdsl_mbar_expect(&kdsl_full[{}][buf], static_cast<unsigned>(({}) "
        "* {}));",
        p, state_bytes, r_ * partials);
    t_.line("kdsl_mbar_wait(&kdsl_full[{}][buf], kdsl_ph);", p);
    if (packed) {
      // Each partial's packed states in one load, then the butterflies.
      const std::string at = partials <= 32 ? fmt::format("tl & {}", partials - 1) : "tl & 31";
      t_.line("{{");
      t_.in();
      t_.line("kdsl_pk{0} pk = redp{0}[buf][group][{1}];", p, at);
      for (ir::ValueId r : reductions) t_.line("acc{0} = pk.a{0};", r);
      if (partials > 32) {
        t_.line("#pragma unroll");
        t_.line("for (int j = 1; j < {}; ++j) {{", partials / 32);
        t_.in();
        t_.line("pk = redp{}[buf][group][j * 32 + (tl & 31)];", p);
        for (ir::ValueId r : reductions)
          t_.line("acc{0} = {1}(acc{0}, pk.a{0});", r, spelling(r).op);
        t_.close();
      }
      t_.close();
      for (ir::ValueId r : reductions) {
        t_.line("acc{0} = kdsl_warp_reduce<{1}>(acc{0}, {2});", r, std::min(partials, 32),
                spelling(r).op);
      }
    }
    for (ir::ValueId r : packed ? std::vector<ir::ValueId>{} : reductions) {
      auto sp = spelling(r);
      if (partials <= 32) {
        t_.line("acc{0} = red{0}[buf][group][tl & {1}];", r, partials - 1);
        t_.line("acc{0} = kdsl_warp_reduce<{1}>(acc{0}, {2});", r, partials, sp.op);
      } else {
        t_.line("acc{0} = red{0}[buf][group][tl & 31];", r);
        t_.line("#pragma unroll");
        t_.line(
            "for (int j = 1; j < {1}; ++j) acc{0} = {2}(acc{0}, red{0}[buf][group][j * 32 + (tl & "
            "31)]);",
            r, partials / 32, sp.op);
        t_.line("acc{0} = kdsl_warp_reduce<32>(acc{0}, {1});", r, sp.op);
      }
    }
  } else if (g_ > 32 && !reductions.empty()) {
    // The CTA's warps' results (W = the group's warps in this CTA), by the schedule's choice:
    // - butterfly: each lane reads warp (lane mod W)'s and a second butterfly over W lanes
    //   combines them, lower warps first, as the first did within a warp. One shared-memory load
    //   and log2(W) shuffles per thread instead of W loads (these kernels are partly issue-bound;
    //   fourteenth session, bench/RESULTS.md: RMSNorm backward bf16 8192 x 8192 129 -> 117 us,
    //   LayerNorm bf16 4096 x 32768 148 -> 139);
    // - in order: every thread adds the W partials in warp order (f32 rows of one reduction on
    //   1024 threads whose last chunk is partly filled, where the butterfly was slower).
    // Either way every lane ends with the same bits. (Clusters push, above: until the thirtieth
    // session LayerNorm's Welford states on a cluster went through each CTA's total and a
    // cluster barrier per row, 25-48% slower than pushed; AM2, bench/RESULTS.md.)
    if (k_cl_ > 1) throw InternalError("codegen: a cluster row's reductions are not pushed");
    t_.line("__syncthreads();");
    const int warps = g_ / 32;
    for (ir::ValueId r : reductions) {
      auto sp = spelling(r);
      if (!s_.butterfly) {
        t_.line("acc{0} = red{0}[buf][group][0];", r);
        t_.line("#pragma unroll");
        t_.line("for (int w = 1; w < {2}; ++w) acc{0} = {1}(acc{0}, red{0}[buf][group][w]);", r,
                sp.op, warps);
      } else {  // W >= 2: G > 32
        t_.line("acc{0} = red{0}[buf][group][threadIdx.x & {1}u];", r, warps - 1);
        t_.line("acc{0} = kdsl_warp_reduce<{1}>(acc{0}, {2});", r, warps, sp.op);
      }
    }
  }
  t_.out();
  t_.line("}}");
  (void)p;
}

void RowEmitter::emit_row_body() {
  // Scalars and phases in dependency order.
  for (int p = 0; p <= phases_; ++p) {
    for (size_t i = 0; i < k_.nodes.size(); ++i) {
      const ir::Node& n = k_.nodes[i];
      if (n.type.form == Form::scalar && !hoisted_[i] && level_[i] == p) {
        if (auto o = online_.find(static_cast<ir::ValueId>(i)); o != online_.end()) {
          // sum(exp(u - c)) = s * exp(m - c); s = 0 only where every u was -inf (or the row is
          // empty), where the sum is 0 * exp(-inf - c): 0, or NaN for c = -inf as it was.
          const char* t = cuda::reg_type(n.type.dtype);
          const std::string c = name(o->second.c);
          t_.line("const {0} s{1} = acc{1}.s == 0 ? {0}(0) * {2} : acc{1}.s * {3};", t, i,
                  exp_of(o->first, fmt::format("(-{} - {})", cuda::literal(n.type.dtype, kInf), c)),
                  exp_of(o->first, fmt::format("(acc{}.m - {})", i, c)));
        } else if (n.op == Op::reduce) {
          t_.line("const {} s{} = {};", cuda::reg_type(n.type.dtype), i,
                  fmt::format(fmt::runtime(spelling(static_cast<ir::ValueId>(i)).result),
                              fmt::format("acc{}", i)));
        } else {
          emit_scalar(static_cast<ir::ValueId>(i));
        }
      }
    }
    if (p < phases_) {
      // Reduction results of phase p are declared inside its block; hoist them out.
      std::vector<ir::ValueId> reds;
      for (size_t i = 0; i < k_.nodes.size(); ++i) {
        const ir::Node& n = k_.nodes[i];
        if (n.op == Op::reduce && level_[reduced(static_cast<ir::ValueId>(i))] == p)
          reds.push_back(static_cast<ir::ValueId>(i));
      }
      for (ir::ValueId r : reds) {
        auto sp = spelling(r);
        t_.line("{} acc{};", sp.state_type, r);
      }
      emit_phase(p);
    }
  }
  // Scalar stores and scalar column reductions, by the group's first thread.
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    const ir::Store& st = k_.stores[j];
    if (vector_view(st.view)) continue;
    if (st.kind == ir::StoreKind::write) {
      t_.line(
          "if (valid && lane == 0) t{}[o{}] = {};", st.tensor, store_access_[j],
          cuda::to_storage(k_.tensors[st.tensor].dtype,
                           name(cuda::stored_value(k_, st.value, k_.tensors[st.tensor].dtype))));
    } else {
      t_.line("if (valid && lane == 0) CS{0} = CS{0} + {1};", j, name(st.value));
    }
  }
  if (s_.prefetch) {
    for (size_t i = 0; i < k_.nodes.size(); ++i) {
      const ir::Node& n = k_.nodes[i];
      if (n.op != Op::load || n.type.form != Form::vector || !cached_[i] || !loop_view(n.view))
        continue;
      t_.line("#pragma unroll");
      t_.line("for (int i = 0; i < {}; ++i) L{}[i] = P{}[i];",
              packed(static_cast<ir::ValueId>(i)) ? "C * VEC / 2" : "C * VEC", i, i);
    }
  }
}

void RowEmitter::emit_main() {
  std::string bounds =
      s_.min_ctas > 0 ? fmt::format("{}, {}", s_.threads, s_.min_ctas) : std::to_string(s_.threads);
  if (k_cl_ > 1) emit_cluster_helpers();
  if (!online_.empty()) {
    // The kernel's exp, for the online sums' combine (kdsl_op_sumexp in the prelude).
    t_.line("struct kdsl_exp_fn {{");
    std::set<DType> types;
    for (const auto& [r, o] : online_) {
      const DType t = k_.node(r).type.dtype;
      if (!types.insert(t).second) continue;
      t_.line("  __device__ __forceinline__ {0} operator()({0} x) const {{ return {1}; }}",
              cuda::reg_type(t), exp_of(r, "x"));
    }
    t_.line("}};");
  }
  t_.line("extern \"C\" __global__ void __launch_bounds__({}) {}{}(const kdsl_params_{} p) {{",
          bounds, k_cl_ > 1 ? fmt::format("__cluster_dims__({}, 1, 1) ", k_cl_) : "", sym_, sym_);
  t_.in();
  t_.line("constexpr long long N = {}LL;  // vector axis ({})", n_,
          k_.vector_symbol >= 0 ? k_.symbols[k_.vector_symbol].name : "none");
  t_.line("constexpr int VEC = {}, G = {}, R = {}, C = {};", vec_, g_, r_, c_);
  if (s_.smem_columns || s_.stage >= 2) {
    t_.line("extern __shared__ __align__(16) unsigned char kdsl_smem[];");
  }
  // (With one row per CTA the group is always 0; a constant group and `valid` were measured
  // both faster and slower, by ptxas's register choices: LayerNorm bf16 4096 x 32768 went from
  // 64 to 116 registers and 139 to 168 us; fourteenth session, bench/RESULTS.md.)
  if (k_cl_ > 1) {
    // A row's G threads: GC in each of the cluster's K CTAs; `tl` is the thread's place among
    // its CTA's GC, `lane` its place in the row (CTA rank major).
    t_.line("constexpr int K = {}, GC = G / K;", k_cl_);
    t_.line("const int tl = static_cast<int>(threadIdx.x) % GC;");
    t_.line("const int lane = static_cast<int>(blockIdx.x % K) * GC + tl;");
    t_.line("const int group = static_cast<int>(threadIdx.x) / GC;");
  } else {
    t_.line("const int lane = static_cast<int>(threadIdx.x) % G;");
    t_.line("const int group = static_cast<int>(threadIdx.x) / G;");
  }
  for (size_t t = 0; t < k_.tensors.size(); ++t) {
    t_.line("{}{}* __restrict__ t{} = p.t{};", k_.tensors[t].role == ir::Role::in ? "const " : "",
            cuda::storage_type(k_.tensors[t].dtype), t, t);
  }
  // Offsets of accesses that do not depend on the row.
  for (size_t a = 0; a < accesses_.size(); ++a) {
    if (!loop_view(accesses_[a].view)) {
      t_.line("const long long o{} = {};", a, offset_expr(accesses_[a], ""));
    }
  }
  for (size_t i = 0; i < k_.nodes.size(); ++i) {
    if (hoisted_[i]) emit_scalar(static_cast<ir::ValueId>(i));
  }
  // Shared memory for combining partial reductions across warps (double-buffered by row).
  if (g_ > 32) {
    for (size_t i = 0; i < k_.nodes.size() && !packed_push_; ++i) {
      const ir::Node& n = k_.nodes[i];
      if (n.op != Op::reduce) continue;
      auto sp = spelling(static_cast<ir::ValueId>(i));
      // Pushed to every CTA of a cluster: every warp's partial of the row (K x GC / 32).
      t_.line("__shared__ {} red{}[2][R][G / 32];", sp.state_type, i);
    }
    for (int p = 0; p < points_ && packed_push_; ++p) {
      // RowSchedule::push bit 1: the states of point p's reductions in one struct, aligned for
      // the widest vector st.async its size allows (its padding is pushed and counted too).
      // (Each member's own alignment too: an alignas weaker than a member's is ill-formed, so a
      // state of 8-byte words beside 4-byte ones aligns the struct to 8, padding included.)
      std::string members, bytes, aligns;
      std::set<std::string> types;
      for (size_t i = 0; i < k_.nodes.size(); ++i) {
        const ir::Node& n = k_.nodes[i];
        if (n.op != Op::reduce || level_[reduced(static_cast<ir::ValueId>(i))] != p) continue;
        const std::string type = spelling(static_cast<ir::ValueId>(i)).state_type;
        members += fmt::format(" {} a{};", type, i);
        bytes += fmt::format("{}sizeof({})", bytes.empty() ? "" : " + ", type);
        if (types.insert(type).second) aligns += fmt::format(" alignas({})", type);
      }
      if (members.empty()) continue;
      t_.line(
          "struct alignas(({0}) % 16 == 0 ? 16 : ({0}) % 8 == 0 ? 8 : 4){1} kdsl_pk{2} {{{3} }};",
          bytes, aligns, p, members);
      t_.line("__shared__ kdsl_pk{0} redp{0}[2][R][G / 32];", p);
    }
    if (async_push_) {
      // One mbarrier per point of the row where reductions combine (phase p) and buffer:
      // kdsl_full[p][b]'s phase k completes when row 2k + b's phase-p partials are in. Each level
      // reuses its buffers as one level did: a CTA pushes row r + 2's phase-p partials only after
      // its own kdsl_full[p] saw every warp's row r + 1 partials of that phase, which each warp
      // pushed after reading row r's.
      t_.line("__shared__ unsigned long long kdsl_full[{}][2];", points_);
      t_.line("if (threadIdx.x == 0) {{");
      t_.line("  #pragma unroll");
      t_.line("  for (int i = 0; i < {}; ++i) {{", points_);
      t_.line("    kdsl_mbar_init(&kdsl_full[i][0], 1u);");
      t_.line("    kdsl_mbar_init(&kdsl_full[i][1], 1u);");
      t_.line("  }}");
      t_.line("}}");
    }
    // Every CTA of the cluster has started (and its mbarriers are initialized) before another
    // writes into its shared memory (the CUDA programming guide's condition for distributed
    // shared memory).
    if (push_) t_.line("kdsl_cluster_sync();");
  }
  // Declarations of the cached vectors: packed pairs of 16-bit values or register values.
  auto declare_cached = [&](bool invariant, const std::string& prefix) {
    for (size_t i = 0; i < k_.nodes.size(); ++i) {
      const ir::Node& n = k_.nodes[i];
      if (n.op != Op::load || n.type.form != Form::vector || !cached_[i] ||
          loop_view(n.view) == invariant || reread(static_cast<ir::ValueId>(i))) {
        continue;
      }
      if (packed(static_cast<ir::ValueId>(i))) {
        t_.line("unsigned {}{}[C * VEC / 2];", prefix, i);
      } else {
        t_.line("{} {}{}[C * VEC];", cuda::reg_type(n.type.dtype), prefix, i);
      }
    }
  };
  // Loop-invariant vectors (weights) held in registers for all rows.
  declare_cached(true, "L");
  emit_cached_loads(true, "L", "", "");
  // Column-reduction accumulators.
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    const ir::Store& st = k_.stores[j];
    if (st.kind != ir::StoreKind::reduce) continue;
    DType acc = k_.node(st.value).type.dtype;
    if (vector_view(st.view)) {
      if (s_.smem_columns) {
        // In shared memory, laid out so that a warp's lanes touch consecutive words; each
        // thread owns its slots, so no barrier or atomic is needed.
        const char* gc = k_cl_ > 1 ? "GC" : "G";
        t_.line("{0}* CA{1} = reinterpret_cast<{0}*>(kdsl_smem + {2}) + group * (C * VEC * {3});",
                cuda::reg_type(acc), j, smem_offset_[j], gc);
        t_.line("#pragma unroll");
        t_.line("for (int i = 0; i < C * VEC; ++i) CA{}[i * {} + {}] = {};", j, gc,
                k_cl_ > 1 ? "tl" : "lane", cuda::zero(acc));
      } else {
        t_.line("{} CA{}[C * VEC];", cuda::reg_type(acc), j);
        t_.line("#pragma unroll");
        t_.line("for (int i = 0; i < C * VEC; ++i) CA{}[i] = {};", j, cuda::zero(acc));
      }
    } else {
      t_.line("{} CS{} = {};", cuda::reg_type(acc), j, cuda::zero(acc));
    }
  }
  // With prefetching, the row vectors of the next iteration are loaded while this one computes:
  // L holds the current row, P the next; the first row is loaded before the loop.
  if (s_.prefetch) {
    declare_cached(false, "L");
    declare_cached(false, "P");
    t_.line("{{");
    t_.in();
    t_.line("const long long frow = static_cast<long long>({}) * R + group;", cta_index());
    emit_row_indices("f", "frow");
    emit_cached_loads(false, "L", "f", "frow < p.rows");
    t_.out();
    t_.line("}}");
  }
  // Rows staged in shared memory: the first STAGES - 1 rows' copies are issued before the loop;
  // each iteration issues the copies of the row STAGES - 1 ahead, waits for its own row's and
  // reads it into registers. Each thread reads back only what it copied itself.
  if (s_.stage >= 2) {
    t_.line("constexpr int STAGES = {}, NS = {}, T = {};", s_.stage, staged_.size(), s_.threads);
    t_.line("unsigned char* const kdsl_stage = kdsl_smem + {};", stage_offset_);
    emit_scalar_prefetch(fmt::format("static_cast<long long>({}) * R + group", cta_index()), "f",
                         true);
    for (int st = 0; st + 1 < s_.stage; ++st) {
      emit_stage_issue(fmt::format("static_cast<long long>({}) * R + group + {}LL * {} * R",
                                   cta_index(), st, cta_count()),
                       std::to_string(st));
    }
    t_.line("int sidx = 0;");
  }
  if (s_.persistent) {
    t_.line("int buf = 0;");
    // The parity of the phase of buffer buf's mbarrier that this row completes.
    if (async_push_) t_.line("unsigned kdsl_ph = 0;");
    t_.line("for (long long row0 = static_cast<long long>({}) * R; row0 < p.rows;", cta_index());
    t_.line("     row0 += static_cast<long long>({}) * R, buf ^= 1{}{}) {{", cta_count(),
            async_push_ ? ", kdsl_ph ^= buf == 0 ? 1u : 0u" : "",
            s_.stage >= 2 ? ", sidx = sidx + 1 == STAGES ? 0 : sidx + 1" : "");
  } else {
    // One CTA per R rows: no loop, so nothing stays live across rows.
    t_.line("const int buf = 0;");
    if (async_push_) t_.line("const unsigned kdsl_ph = 0;");
    t_.line("{{");
    t_.line("  const long long row0 = static_cast<long long>({}) * R;", cta_index());
  }
  t_.in();
  t_.line("const long long row = row0 + group;");
  t_.line("const bool valid = row < p.rows;");
  emit_row_indices("", "row");
  if (s_.prefetch) {
    t_.line("const long long nrow = row + static_cast<long long>({}) * R;", cta_count());
    emit_row_indices("n", "nrow");
    emit_cached_loads(false, "P", "n", "nrow < p.rows");
  } else if (s_.stage >= 2) {
    emit_stage_issue(fmt::format("row + {}LL * {} * R", s_.stage - 1, cta_count()),
                     "sidx == 0 ? STAGES - 1 : sidx - 1");
    for (const auto& [id, slot] : staged_scalar_) {
      t_.line("const {} SCc{} = SC{};", cuda::reg_type(k_.node(id).type.dtype), slot, slot);
    }
    emit_scalar_prefetch(fmt::format("row + static_cast<long long>({}) * R", cta_count()), "q",
                         false);
    t_.line("kdsl_cp_wait_group<STAGES - 1>();");
    declare_cached(false, "L");
    emit_stage_reads();
    emit_cached_loads(false, "L", "", "valid", /*skip_staged=*/true);
  } else {
    // Row loads held in registers: all issued before the first use.
    declare_cached(false, "L");
    emit_cached_loads(false, "L", "", "valid");
  }
  emit_row_body();
  t_.out();
  t_.line("}}");
  // The copies issued for rows past the end (zeros) complete before the CTA exits.
  if (s_.stage >= 2) t_.line("kdsl_cp_wait();");
  // Per-group partial sums of the column reductions, for the follow-up kernel.
  if (combine_groups_) emit_group_combine();
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    const ir::Store& st = k_.stores[j];
    if (st.kind != ir::StoreKind::reduce) continue;
    t_.line("{{");
    t_.in();
    if (combine_groups_) {
      t_.line("const long long part = {};", cta_index());
    } else {
      t_.line("const long long part = static_cast<long long>({}) * R + group;", cta_index());
    }
    if (vector_view(st.view)) {
      open_chunk_loop();
      // The chunk's VEC partials stored together (f32 with VEC >= 4: 16-byte stores; VEC = 2:
      // 8-byte; wider types one by one), aligned since VEC divides N (the schedule's rule) and
      // each workspace starts 256-byte aligned (runtime.cpp). One element per store left a
      // warp's stores 32 bytes apart and, at the end of every CTA, the queue of global stores
      // full (twenty-first session, Nsight Compute on LayerNorm backward bf16 8192 x 8192: 12%
      // of the warps' stall samples waiting on it).
      const DType acc = k_.node(st.value).type.dtype;
      t_.line("{} W[VEC];", cuda::reg_type(acc));
      t_.line("#pragma unroll");
      t_.line("for (int v = 0; v < VEC; ++v) W[v] = {};", column_slot(j));
      t_.line("if ({}in_range) kdsl_store<VEC>(p.ws{} + part * N + col, W);",
              combine_groups_ ? "group == 0 && " : "", store_ws_[j]);
      t_.out();
      t_.line("}}");
    } else {
      t_.line("if (lane == 0) p.ws{}[part] = CS{};", store_ws_[j], j);
    }
    t_.out();
    t_.line("}}");
  }
  // No CTA leaves while another CTA of its cluster may still read or write its shared memory.
  if (k_cl_ > 1) t_.line("kdsl_cluster_sync();");
  t_.out();
  t_.line("}}");
  t_.line("");
}

void RowEmitter::emit_cluster_helpers() {
  // Thread-block clusters (sm_90): the barrier across the cluster's CTAs (release/acquire, so
  // shared-memory writes before it are seen by the other CTAs after it).
  t_.line("__device__ __forceinline__ void kdsl_cluster_sync() {{");
  t_.line(
      R"(  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");)");
  t_.line("}}");
  if (!async_push_) return;
  // mbarriers (sm_90): initialized for one arrival (thread 0's, with the expected bytes) and made
  // visible to the cluster; a 4-byte st.async into CTA `rank`'s copy of `slot` that counts its
  // bytes on that CTA's copy of `bar` (no fence, unlike a cluster barrier's release, which waits
  // for this thread's earlier global stores: twenty-second session, Nsight Compute); and the wait
  // for a phase of the CTA's own mbarrier, with acquire semantics at cluster scope.
  t_.line(
      "__device__ __forceinline__ void kdsl_mbar_init(unsigned long long* bar, unsigned count) {{");
  t_.line("  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));");
  t_.line(
      R"(  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n\tfence.mbarrier_init.release.cluster;" :: "r"(b), "r"(count) : "memory");)");
  t_.line("}}");
  t_.line(
      "__device__ __forceinline__ void kdsl_push_async(float* slot, float v, unsigned long long* "
      "bar, int rank) {{");
  t_.line("  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(slot));");
  t_.line("  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));");
  t_.line(
      R"(  asm volatile("{{\n\t.reg .b32 ra, rb;\n\tmapa.shared::cluster.u32 ra, %0, %2;\n\tmapa.shared::cluster.u32 rb, %1, %2;\n\tst.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [ra], %3, [rb];\n\t}}" :: "r"(a), "r"(b), "r"(rank), "r"(__float_as_uint(v)) : "memory");)");
  t_.line("}}");
  // A state of several 4-byte words (a Welford state, an argmax's value and index), pushed a
  // word at a time; each word counts its 4 bytes.
  t_.line(
      "template <class S> __device__ __forceinline__ void kdsl_push_async(S* slot, const S& v, "
      "unsigned long long* bar, int rank) {{");
  t_.line("  static_assert(sizeof(S) % 4 == 0, \"a pushed state is made of 4-byte words\");");
  t_.line("  #pragma unroll");
  t_.line("  for (int i = 0; i < static_cast<int>(sizeof(S) / 4); ++i) {{");
  t_.line("    float w;");
  t_.line("    memcpy(&w, reinterpret_cast<const char*>(&v) + 4 * i, 4);");
  t_.line("    kdsl_push_async(reinterpret_cast<float*>(slot) + i, w, bar, rank);");
  t_.line("  }}");
  t_.line("}}");
  if (packed_push_) {
    // RowSchedule::push bit 1: a packed struct of states in one or a few vector st.async (16,
    // then 8, then 4 bytes at a time, as its alignment allows), each counting its bytes; the two
    // addresses mapped once.
    t_.line(
        "template <class S> __device__ __forceinline__ void kdsl_push_packed(S* slot, const S& v, "
        "unsigned long long* bar, int rank) {{");
    t_.line("  static_assert(sizeof(S) % 4 == 0, \"a pushed state is made of 4-byte words\");");
    t_.line(
        "  constexpr int W = static_cast<int>(sizeof(S) / 4), A = static_cast<int>(alignof(S));");
    t_.line("  unsigned w[W];");
    t_.line("  memcpy(w, &v, sizeof(S));");
    t_.line("  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(slot));");
    t_.line("  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));");
    t_.line("  unsigned ra, rb;");
    t_.line(R"(  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(rank));)");
    t_.line(R"(  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(b), "r"(rank));)");
    t_.line("  #pragma unroll");
    t_.line("  for (int i = 0; i < W;) {{");
    t_.line("    if (A >= 16 && W - i >= 4) {{");
    t_.line(
        R"(      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {{%1, %2, %3, %4}}, [%5];" :: "r"(ra + 4 * i), "r"(w[i]), "r"(w[i + 1]), "r"(w[i + 2]), "r"(w[i + 3]), "r"(rb) : "memory");)");
    t_.line("      i += 4;");
    t_.line("    }} else if (A >= 8 && W - i >= 2) {{");
    t_.line(
        R"(      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {{%1, %2}}, [%3];" :: "r"(ra + 4 * i), "r"(w[i]), "r"(w[i + 1]), "r"(rb) : "memory");)");
    t_.line("      i += 2;");
    t_.line("    }} else {{");
    t_.line(
        R"(      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" :: "r"(ra + 4 * i), "r"(w[i]), "r"(rb) : "memory");)");
    t_.line("      i += 1;");
    t_.line("    }}");
    t_.line("  }}");
    t_.line("}}");
  }
  t_.line(
      "__device__ __forceinline__ void kdsl_mbar_expect(unsigned long long* bar, unsigned bytes) "
      "{{");
  t_.line("  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));");
  t_.line(
      R"(  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory");)");
  t_.line("}}");
  t_.line(
      "__device__ __forceinline__ void kdsl_mbar_wait(unsigned long long* bar, unsigned parity) "
      "{{");
  t_.line("  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));");
  t_.line("  unsigned ok = 0;");
  t_.line("  do {{");
  t_.line(
      R"(    asm volatile("{{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}}" : "=r"(ok) : "r"(b), "r"(parity) : "memory");)");
  t_.line("  }} while (!ok);");
  t_.line("}}");
}

// Several row groups per CTA (short rows): their column partials are added in the CTA first, so
// that the workspace holds one partial per CTA, not R. At LayerNorm backward bf16 65536 x 1024 (2
// groups per CTA, 528 CTAs) that halved the 8.7 MB the row kernel wrote at its end and the
// follow-up kernel read (twenty-second session: 120.8 -> 116.3 us on one machine, 112.8 ->
// 108.3 in the full benchmark). Only where every column reduction is a vector, R <= 8 (group 0
// adds the others' partials alone), and the (R - 1) x N partials take at most 8 KiB of static
// shared memory and 48 KiB with the dynamic shared memory, so that the CTA still fits on every
// target and the shared memory hardly changes its occupancy. Called once the dynamic shared
// memory is known.
void RowEmitter::choose_group_combine() {
  if (k_cl_ != 1 || r_ <= 1 || r_ > 8) return;
  uint64_t bytes = 0;
  for (const ir::Store& st : k_.stores) {
    if (st.kind != ir::StoreKind::reduce) continue;
    if (!vector_view(st.view)) return;
    bytes += static_cast<uint64_t>(r_ - 1) * static_cast<uint64_t>(n_) *
             dtype_size(k_.node(st.value).type.dtype);
  }
  combine_groups_ = bytes > 0 && bytes <= 8192 && plan_.dynamic_smem + bytes <= 48 * 1024;
}

// The column partials of the CTA's R row groups added together (combine_groups_): groups 1 to
// R - 1 put theirs into shared memory, and group 0 adds them to its own in group order, so that
// it stores the CTA's one partial. A fixed order: the same bits on every run.
void RowEmitter::emit_group_combine() {
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    const ir::Store& st = k_.stores[j];
    if (st.kind != ir::StoreKind::reduce) continue;
    t_.line("__shared__ __align__(16) {} gsum{}[R - 1][N];",
            cuda::reg_type(k_.node(st.value).type.dtype), j);
  }
  t_.line("if (group > 0) {{");
  t_.in();
  open_chunk_loop();
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    const ir::Store& st = k_.stores[j];
    if (st.kind != ir::StoreKind::reduce) continue;
    t_.line("{{");
    t_.in();
    t_.line("{} W[VEC];", cuda::reg_type(k_.node(st.value).type.dtype));
    t_.line("#pragma unroll");
    t_.line("for (int v = 0; v < VEC; ++v) W[v] = {};", column_slot(j));
    t_.line("if (in_range) kdsl_store<VEC>(&gsum{}[group - 1][col], W);", j);
    t_.close();
  }
  t_.close();
  t_.close();
  t_.line("__syncthreads();");
  t_.line("if (group == 0) {{");
  t_.in();
  open_chunk_loop();
  t_.line("if (!in_range) continue;");
  for (size_t j = 0; j < k_.stores.size(); ++j) {
    const ir::Store& st = k_.stores[j];
    if (st.kind != ir::StoreKind::reduce) continue;
    t_.line("for (int q = 1; q < R; ++q) {{");
    t_.in();
    t_.line("{} W[VEC];", cuda::reg_type(k_.node(st.value).type.dtype));
    t_.line("kdsl_load<VEC>(&gsum{}[q - 1][col], W);", j);
    t_.line("#pragma unroll");
    t_.line("for (int v = 0; v < VEC; ++v) {0} = {0} + W[v];", column_slot(j));
    t_.close();
  }
  t_.close();
  t_.close();
}

// The follow-up kernel: the fixed-order sum of the partials of each column reduction. Each CTA
// of 256 threads owns FC x FV consecutive columns of one reduction (FV = 4 with 16-byte loads
// when the partials are f32 rows of a multiple of 4 columns, else 1); its FS = 256 / FC slices of
// FC threads each sum every FS-th partial, 8 independent loads at a time, and slice 0 adds the
// slices' sums in slice order (independent shared-memory loads, one add chain per column: it
// was 0.7 us faster than a tree of barriers at FS = 32, twenty-second session). FC is the
// largest of 16, 8, 4 and 2 that still gives every reduction's columns together at least 256
// CTAs (an earlier form with up to 512 CTAs of 92 registers ran two waves at N = 8192), with
// FC x FV >= 8, so that a slice reads whole 32-byte sectors. At LayerNorm backward N = 1024 the
// kernel had run 32 CTAs, one per 32 columns of both reductions in turn, on a GPU of 132 SMs: 10.6
// us under Nsight Compute at 65536 x 1024, now 256 CTAs. The order depends only on the partial
// count and N, so the result is deterministic.
void RowEmitter::emit_finalize() {
  constexpr int kThreads = 256, kBatch = 8, kMinCtas = 256;
  std::string fsym = sym_ + "_finalize";
  FollowUp f;
  f.symbol = fsym;
  f.block_threads = kThreads;
  // 16-byte loads of 4 f32 partials need every reduction to be an f32 vector over N % 4 == 0.
  int fv = n_ % 4 == 0 ? 4 : 1;
  std::vector<size_t> reduce_stores;
  for (size_t jj = 0; jj < k_.stores.size(); ++jj) {
    const ir::Store& st = k_.stores[jj];
    if (st.kind != ir::StoreKind::reduce) continue;
    reduce_stores.push_back(jj);
    if (!vector_view(st.view) || k_.node(st.value).type.dtype != DType::f32) fv = 1;
  }
  auto width_of = [&](size_t jj) -> uint64_t {
    return vector_view(k_.stores[jj].view) ? static_cast<uint64_t>(n_) : 1;
  };
  auto ctas_for = [&](int fc) {
    uint64_t ctas = 0;
    for (size_t jj : reduce_stores) ctas += (width_of(jj) + fc * fv - 1) / (fc * fv);
    return ctas;
  };
  int fc = 16;
  while (fc > 1 && fc * fv > 8 && ctas_for(fc) < kMinCtas) fc /= 2;
  const int fs_count = kThreads / fc;
  t_.line("// Fixed-order sum of the partials of each column reduction (deterministic): {} columns",
          fc * fv);
  t_.line(
      "// of one reduction per CTA, {} slices each summing every {}th partial, then the slices in",
      fs_count, fs_count);
  t_.line("// order.");
  t_.line("extern \"C\" __global__ void __launch_bounds__({}) {}(const kdsl_params_{} p) {{",
          kThreads, fsym, sym_);
  t_.in();
  t_.line("constexpr int FC = {}, FS = {}, FB = {}, FV = {};", fc, fs_count, kBatch, fv);
  t_.line(
      "const int fc = static_cast<int>(threadIdx.x) % FC, fs = static_cast<int>(threadIdx.x) / "
      "FC;");
  t_.line("const long long parts = p.partials;");
  t_.line("long long cb = blockIdx.x;  // this CTA's column block, counted over the reductions");
  for (size_t jj : reduce_stores) {
    const ir::Store& st = k_.stores[jj];
    const ir::TensorParam& tp = k_.tensors[st.tensor];
    DType acc = k_.node(st.value).type.dtype;
    std::string off = "0LL";
    std::string vs = "1LL";
    for (size_t ax = 0; ax < st.view.size(); ++ax) {
      if (st.view[ax].kind == ir::AxisIndex::Kind::constant) {
        off += fmt::format(" + {}LL * p.st{}_{}", st.view[ax].value, st.tensor, ax);
      } else if (st.view[ax].kind == ir::AxisIndex::Kind::vector) {
        vs = fmt::format("p.st{}_{}", st.tensor, ax);
      }
    }
    const uint64_t width = width_of(jj);
    const uint64_t blocks = (width + fc * fv - 1) / (fc * fv);
    // f32 partials are summed in f64: thousands of partials in f32 would lose digits.
    DType sum_t = acc == DType::f32 ? DType::f64 : acc;
    std::string rt = cuda::reg_type(sum_t);
    t_.line("if (cb < {}LL) {{", blocks);
    t_.in();
    t_.line("__shared__ {} fsum{}[FS][FC * FV];", rt, jj);
    t_.line("const long long j = (cb * FC + fc) * FV;");
    t_.line("const bool ok = j < {}LL;", width);
    t_.line("{} a[FV];", rt);
    t_.line("#pragma unroll");
    t_.line("for (int e = 0; e < FV; ++e) a[e] = {};", cuda::zero(sum_t));
    t_.line("for (long long q0 = fs; q0 < parts; q0 += FS * FB) {{");
    t_.in();
    t_.line("{} v[FB][FV];", cuda::reg_type(acc));
    t_.line("#pragma unroll");
    t_.line("for (int u = 0; u < FB; ++u) {{");
    t_.in();
    t_.line("const long long q = q0 + static_cast<long long>(u) * FS;");
    t_.line("if (ok && q < parts) {{");
    t_.line("  kdsl_load<FV>(p.ws{} + q * {}LL + j, v[u]);", store_ws_[jj], width);
    t_.line("}} else {{");
    t_.line("  #pragma unroll");
    t_.line("  for (int e = 0; e < FV; ++e) v[u][e] = {};", cuda::zero(acc));
    t_.line("}}");
    t_.close();
    t_.line("#pragma unroll");
    t_.line("for (int u = 0; u < FB; ++u) {{");
    t_.line("  if (q0 + static_cast<long long>(u) * FS >= parts) continue;");
    t_.line("  #pragma unroll");
    t_.line("  for (int e = 0; e < FV; ++e) a[e] = a[e] + {};",
            cuda::convert(acc, sum_t, "v[u][e]"));
    t_.line("}}");
    t_.close();
    t_.line("#pragma unroll");
    t_.line("for (int e = 0; e < FV; ++e) fsum{}[fs][fc * FV + e] = a[e];", jj);
    t_.line("__syncthreads();");
    t_.line("if (fs == 0 && ok) {{");
    t_.in();
    t_.line("#pragma unroll");
    t_.line("for (int q = 1; q < FS; ++q) {{");
    t_.line("  #pragma unroll");
    t_.line("  for (int e = 0; e < FV; ++e) a[e] = a[e] + fsum{}[q][fc * FV + e];", jj);
    t_.line("}}");
    t_.line("#pragma unroll");
    t_.line("for (int e = 0; e < FV; ++e) {{");
    t_.in();
    t_.line("if (j + e >= {}LL) break;", width);
    t_.line("{} s = a[e];", rt);
    t_.line("{}* out = p.t{} + {} + (j + e) * {};", cuda::storage_type(tp.dtype), st.tensor, off,
            vs);
    if (tp.role == ir::Role::inout) {
      t_.line("s = s + {};", cuda::convert(tp.dtype, sum_t, cuda::from_storage(tp.dtype, "*out")));
    }
    t_.line("*out = {};", cuda::to_storage(tp.dtype, cuda::convert(sum_t, tp.dtype, "s")));
    t_.close();
    t_.close();
    t_.line("return;");
    t_.close();
    t_.line("cb -= {}LL;", blocks);
  }
  t_.close();
  f.grid_elements = ctas_for(fc) * f.block_threads;
  plan_.follow_ups.push_back(f);
}

GeneratedKernel RowEmitter::run() {
  analyze();
  uint32_t vector_tensors = 0;
  for (const Access& a : accesses_) {
    if (vector_view(a.view)) vector_tensors |= tensor_bit(a.tensor);
  }
  sym_ = spec_.symbol(k_.name, vector_tensors);
  plan_.symbol = sym_;
  plan_.schedule = s_.name;
  plan_.reasons = s_.reasons;
  plan_.block_threads = static_cast<uint32_t>(s_.threads);
  plan_.rows_per_cta = static_cast<uint32_t>(r_);
  plan_.cluster = static_cast<uint32_t>(k_cl_);
  plan_.row_splits = static_cast<uint32_t>(k_cl_);
  plan_.max_ctas_per_sm = static_cast<uint32_t>(s_.ctas_per_sm);
  plan_.persistent = s_.persistent;
  if (s_.persistent) {
    plan_.reasons.push_back(
        fmt::format("persistent grid: at most {} CTA{} per SM by threads (the driver's "
                    "occupancy for this kernel, with its registers and shared memory, decides "
                    "at launch), each looping over rows",
                    s_.ctas_per_sm, s_.ctas_per_sm == 1 ? "" : "s"));
  } else {
    plan_.reasons.push_back(
        k_cl_ > 1 ? fmt::format("grid: one cluster of {} CTAs per row group, as many clusters as "
                                "row groups",
                                k_cl_)
                  : "grid: one CTA per row group, as many CTAs as row groups");
  }
  if (async_push_) {
    plan_.reasons.push_back(
        points_ > 1
            ? fmt::format("row partials: each warp's pushed to every CTA of the cluster with "
                          "st.async, counted on an mbarrier of the receiving CTA for each of the "
                          "row's {} points of combine (no cluster barrier per row; measured at "
                          "one point, not yet at several)",
                          points_)
            : "row partials: each warp's pushed to every CTA of the cluster with st.async, "
              "counted on an mbarrier of the receiving CTA (no cluster barrier per row; "
              "measured)");
  }
  plan_.reasons.push_back(cuda::math_note(k_));
  for (size_t t = 0; t < k_.tensors.size(); ++t) {
    if (fast(static_cast<int32_t>(t)) && (vector_tensors & tensor_bit(static_cast<int32_t>(t))) &&
        vec_ > 1) {
      plan_.aligned_tensors.push_back(static_cast<uint32_t>(t));
    }
  }
  if (s_.smem_columns) {
    uint32_t off = 0;
    for (size_t j = 0; j < k_.stores.size(); ++j) {
      const ir::Store& st = k_.stores[j];
      if (st.kind != ir::StoreKind::reduce || !vector_view(st.view)) continue;
      smem_offset_[j] = off;
      off += static_cast<uint32_t>(dtype_size(k_.node(st.value).type.dtype)) * c_ * vec_ *
             (g_ / k_cl_) * r_;
      off = (off + 15) / 16 * 16;
    }
    plan_.dynamic_smem = off;
  }
  if (s_.stage >= 2) {
    for (size_t i = 0; i < k_.nodes.size(); ++i) {
      const auto id = static_cast<ir::ValueId>(i);
      if (staged(id)) staged_.push_back(id);
      if (staged_load(k_, spec_, k_.node(id), vec_) == StagedLoad::scalar) {
        int slot = static_cast<int>(staged_scalar_.size());
        staged_scalar_[id] = slot;
      }
    }
    if (static_cast<int>(staged_.size()) != s_.staged_loads ||
        static_cast<int>(staged_scalar_.size()) != s_.staged_scalars) {
      throw InternalError(fmt::format(
          "{}: {} row loads staged and {} row scalars loaded ahead, the schedule planned {} and {}",
          sym_, staged_.size(), staged_scalar_.size(), s_.staged_loads, s_.staged_scalars));
    }
    stage_offset_ = (plan_.dynamic_smem + 15) / 16 * 16;
    plan_.dynamic_smem =
        stage_offset_ + static_cast<uint32_t>(s_.stage * s_.threads * staged_.size() * c_ * 16);
  }
  choose_group_combine();
  plan_.partials_per_cta = static_cast<uint32_t>(combine_groups_ ? 1 : r_);
  plan_params();
  t_.line("// Generated by kdsl {} for kernel '{}' ({}).", KDSL_VERSION, k_.name, sym_);
  t_.line("// Schedule {}:", s_.name);
  for (const std::string& r : s_.reasons) t_.line("//   {}", r);
  t_.line("// {}", cuda::math_note(k_));
  t_.raw(cuda_prelude());
  if (cuda::approx_math(k_)) t_.raw(cuda_approx_math_prelude());
  t_.line("");
  emit_params_struct();
  if (s_.stage >= 2) t_.raw(cuda_async_copy_prelude());
  emit_main();
  if (!plan_.workspaces.empty()) emit_finalize();
  return {t_.str(), plan_};
}

}  // namespace

GeneratedKernel generate_rows_kernel(const ir::Kernel& k, const Specialization& spec,
                                     const RowSchedule& s) {
  RowEmitter e(k, spec, s);
  return e.run();
}

}  // namespace kdsl

#include "schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <functional>
#include <map>

#include "kdsl/error.h"

namespace kdsl {

namespace {

// Every thread holds its share of a row in an unrolled loop (code size grows with it), with
// 32-bit column indices. The largest share tested is 256 elements (bf16 N = 262144).
constexpr int64_t kMaxElementsPerThread = 512;
// The registers a thread can have (sm_50 and newer).
constexpr int64_t kMaxRegistersPerThread = 255;

// Per IR node, the reductions on its longest path from the inputs, itself included: a row
// reduction of values that need no reduction is at depth 1, softmax's sum (of exp(x - max)) at 2.
std::vector<int> reduction_depths(const ir::Kernel& k) {
  std::vector<int> depth(k.nodes.size(), 0);
  for (size_t i = 0; i < k.nodes.size(); ++i) {
    int d = 0;
    for (ir::ValueId a : k.nodes[i].args) {
      if (a >= 0 && static_cast<size_t>(a) < i) d = std::max(d, depth[static_cast<size_t>(a)]);
    }
    depth[i] = d + (k.nodes[i].op == ir::Op::reduce ? 1 : 0);
  }
  return depth;
}

int pow2_ceil(int64_t v) {
  int p = 1;
  while (p < v && p < (1 << 30)) p <<= 1;
  return p;
}

bool has_vector_axis(const ir::View& v) {
  return std::any_of(v.begin(), v.end(),
                     [](const ir::AxisIndex& a) { return a.kind == ir::AxisIndex::Kind::vector; });
}

bool has_loop_axis(const ir::View& v) {
  return std::any_of(v.begin(), v.end(),
                     [](const ir::AxisIndex& a) { return a.kind == ir::AxisIndex::Kind::loop; });
}

// Registers (32-bit) one element of a value of dtype `t` takes.
int reg_words(DType t) {
  return dtype_size(accumulator_dtype(t)) == 8 || t == DType::f64 ? 2 : 1;
}

// Registers per element the cached loads of each kind take, for a given packing choice.
struct Words {
  double row = 0, invariant = 0, column = 0;
};

// Registers per element vector load `n` takes when held: half a word packed in pairs.
double load_words(const ir::Node& n, const Specialization& spec, bool pack, int vec) {
  const bool packed = pack && vec >= 2 && spec.fast(n.index) && dtype_size(n.type.dtype) == 2;
  return packed ? 0.5 : reg_words(n.type.dtype);
}

Words cached_words(const ir::Kernel& k, const Specialization& spec, bool pack, int vec) {
  Words w;
  for (const ir::Node& n : k.nodes) {
    if (n.op != ir::Op::load || n.type.form != ir::Form::vector) continue;
    (has_loop_axis(n.view) ? w.row : w.invariant) += load_words(n, spec, pack, vec);
  }
  for (const ir::Store& s : k.stores) {
    if (s.kind == ir::StoreKind::reduce && has_vector_axis(s.view)) {
      w.column += reg_words(k.node(s.value).type.dtype);
    }
  }
  return w;
}

// The column accumulators a thread of schedule `s` of `k` holds in registers (none when they are
// in shared memory).
int64_t register_accumulators(const ir::Kernel& k, const Specialization& spec,
                              const RowSchedule& s) {
  if (!s.column_reduction || s.smem_columns) return 0;
  return static_cast<int64_t>(int64_t{s.chunks} * s.vec *
                              cached_words(k, spec, s.pack, s.vec).column);
}

}  // namespace

int compute_capability(const DeviceTarget& target) {
  const std::string& a = target.arch;
  int cc = 0;
  for (size_t i = a.rfind('_') + 1; i < a.size() && std::isdigit(static_cast<unsigned char>(a[i]));
       ++i) {
    cc = cc * 10 + (a[i] - '0');
  }
  return cc;
}

bool row_reductions(const ir::Kernel& k) {
  return std::any_of(k.nodes.begin(), k.nodes.end(),
                     [](const ir::Node& n) { return n.op == ir::Op::reduce; });
}

// Bytes of the static shared-memory buffers of the row reductions' partial states
// (codegen_rows.cpp: red<i>[2][R][G / 32] per reduction, or with push +2 on a pushed cluster
// one struct per point of the row, redp<p>[2][R][G / 32], each member at its alignment and the
// struct at its own), and the mbarriers of the pushed partials; `push` is RowSchedule::push.
int64_t partial_state_bytes(const ir::Kernel& k, const RowSchedule& s, int push) {
  if (s.group <= 32) return 0;
  const std::vector<int> depth = reduction_depths(k);
  // Per point of the row: the struct's bytes so far, the sum of its members' sizes, its alignment.
  std::map<int, std::array<int64_t, 3>> points;
  int64_t unpacked = 0;
  for (const ir::Node& n : k.nodes) {
    if (n.op != ir::Op::reduce) continue;
    const DType acc = k.node(n.args[0]).type.dtype;
    const int64_t w = static_cast<int64_t>(dtype_size(acc));
    const auto kind = static_cast<ir::ReduceKind>(n.fn);
    int64_t size = w, align = acc == DType::c64 ? 4 : w;
    if (kind == ir::ReduceKind::var) size = 3 * w;  // kdsl_welford<T>: n, mean, m2
    if (kind == ir::ReduceKind::argmax || kind == ir::ReduceKind::argmin) {
      size = 16;  // kdsl_arg<T>: the value, then a long long
      align = 8;
    }
    unpacked += size;
    auto& [offset, bytes, a] = points[depth[static_cast<size_t>(n.args[0])]];
    offset = (offset + align - 1) / align * align + size;
    bytes += size;
    a = std::max(a, align);
  }
  const bool packed = s.cluster > 1 && (push & 2) && row_reductions(k);
  int64_t per_partial = unpacked;
  if (packed) {
    per_partial = 0;
    for (const auto& [p, pt] : points) {
      const int64_t align = std::max(pt[2], int64_t{pt[1] % 16 == 0 ? 16 : pt[1] % 8 == 0 ? 8 : 4});
      per_partial += (pt[0] + align - 1) / align * align;
    }
  }
  return 2 * int64_t{s.rows_per_cta} * (s.group / 32) * per_partial +
         16 * static_cast<int64_t>(points.size());
}

std::vector<OnlineSum> online_sums(const ir::Kernel& k) {
  std::vector<OnlineSum> out;
  const std::vector<int> depth = reduction_depths(k);
  for (size_t i = 0; i < k.nodes.size(); ++i) {
    const ir::Node& r = k.nodes[i];
    if (r.op != ir::Op::reduce || static_cast<ir::ReduceKind>(r.fn) != ir::ReduceKind::sum) {
      continue;
    }
    const ir::Node& e = k.node(r.args[0]);
    if (e.op != ir::Op::unary || static_cast<ir::UnaryFn>(e.fn) != ir::UnaryFn::exp) continue;
    const ir::Node& d = k.node(e.args[0]);
    if (d.op != ir::Op::binary || static_cast<ir::BinaryFn>(d.fn) != ir::BinaryFn::sub) continue;
    const ir::ValueId u = d.args[0], c = d.args[1];
    const DType t = k.node(u).type.dtype;
    if ((t != DType::f32 && t != DType::f64) || k.node(u).type.form != ir::Form::vector ||
        k.node(c).type.form != ir::Form::scalar || k.node(c).type.dtype != t || e.type.dtype != t ||
        d.type.dtype != t) {
      continue;
    }
    if (depth[static_cast<size_t>(c)] != depth[static_cast<size_t>(u)] + 1) continue;
    out.push_back({static_cast<ir::ValueId>(i), u, c});
  }
  return out;
}

bool supports_clusters(const DeviceTarget& target) {
  return compute_capability(target) >= 90;
}

DeviceTarget target_for_arch(const std::string& arch) {
  DeviceTarget t;
  t.arch = arch;
  switch (compute_capability(t)) {
    case 75:
      t.max_smem_per_cta = 64 * 1024;
      t.max_threads_per_sm = 1024;
      break;
    case 80:
    case 87:
      t.max_smem_per_cta = 163 * 1024;
      break;
    case 86:
    case 89:
    case 120:
    case 121:
      t.max_smem_per_cta = 99 * 1024;
      t.max_threads_per_sm = 1536;
      break;
    default:  // sm_90, sm_100, sm_103, ...: 227 KiB and 2048 threads
      break;
  }
  return t;
}

namespace {

// The row schedule with `cluster` CTAs per row; sets `*columns_overflow` when the column-reduction
// accumulators were meant for shared memory but do not fit there. `hint` is the user's (named in
// the reasons) unless `internal`.
RowSchedule choose_rows(const ir::Kernel& k, const Specialization& spec, const DeviceTarget& target,
                        const ScheduleHint& hint, int cluster, bool* columns_overflow,
                        bool internal = false) {
  RowSchedule s;
  int64_t n = k.vector_symbol >= 0 ? *k.symbols[k.vector_symbol].value : 1;
  size_t min_size = 16;
  bool any_fast = false;
  std::vector<DType> row_dtypes;  // the dtypes of the tensors accessed along the vector axis
  for (size_t t = 0; t < k.tensors.size(); ++t) {
    bool vec_access = false;
    for (const ir::Node& node : k.nodes) {
      vec_access |=
          node.op == ir::Op::load && node.index == (int32_t)t && has_vector_axis(node.view);
    }
    for (const ir::Store& st : k.stores)
      vec_access |= st.tensor == (int32_t)t && has_vector_axis(st.view);
    if (!vec_access) continue;
    min_size = std::min(min_size, dtype_size(k.tensors[t].dtype));
    if (std::find(row_dtypes.begin(), row_dtypes.end(), k.tensors[t].dtype) == row_dtypes.end())
      row_dtypes.push_back(k.tensors[t].dtype);
    any_fast |= spec.fast(static_cast<int32_t>(t));
  }
  s.vec = 1;
  if (any_fast) {
    for (int v : {8, 4, 2}) {
      if (static_cast<size_t>(v) * min_size <= 16 && n % v == 0) {
        s.vec = v;
        break;
      }
    }
  }
  if (hint.vec && !internal && n % *hint.vec != 0) {
    throw ScheduleHintError(
        fmt::format("schedule hint vec={}: N = {} is not a multiple of {} (vec divides the row)",
                    *hint.vec, n, *hint.vec));
  }
  if (hint.vec && !internal && *hint.vec > 1 && !any_fast) {
    throw ScheduleHintError(fmt::format(
        "schedule hint vec={}: vector accesses need a tensor along the row that is 16-byte "
        "aligned and contiguous (none is)",
        *hint.vec));
  }
  if (hint.vec && n % *hint.vec == 0 && (*hint.vec == 1 || any_fast)) s.vec = *hint.vec;
  int64_t vectors = (n + s.vec - 1) / s.vec;
  // A persistent grid pays off when rows share state across iterations: column reductions
  // (dw[:] += ...) accumulate in registers across a CTA's rows. Otherwise one CTA handles R rows
  // and the hardware overlaps CTAs, as long as each thread is small (about 16 elements, few
  // registers) so that many rows are in flight per SM.
  bool column_reduction = std::any_of(k.stores.begin(), k.stores.end(), [](const ir::Store& st) {
    return st.kind == ir::StoreKind::reduce;
  });
  int reductions = static_cast<int>(std::count_if(
      k.nodes.begin(), k.nodes.end(), [](const ir::Node& x) { return x.op == ir::Op::reduce; }));
  // Measured on an H200 (bench/RESULTS.md, "schedule experiments" and the fourth session's
  // sweeps): one CTA per row wins for every kernel without column reductions up to 16K elements
  // per row, once its threads are large (below); a persistent grid that prefetches the next row
  // wins for longer rows. `kdsl tune` measures both on the GPU at hand.
  const std::vector<int> depth = reduction_depths(k);
  const int phases = depth.empty() ? 0 : *std::max_element(depth.begin(), depth.end());
  // Threads per row: about 16 elements per thread, then more threads while the cached vectors
  // (row loads, weights, column accumulators) exceed the register budget.
  // Packing halves the registers of cached 16-bit rows in kernels with one pass over them; in
  // backward kernels (several row inputs, column reductions) the compiler keeps both forms live,
  // so there it costs registers (ptxas: rms_norm_bwd bf16 N=8192, 82 vs 61 registers).
  s.pack = hint.pack.value_or(!column_reduction);
  Words words = cached_words(k, spec, s.pack, s.vec);
  // Column-reduction accumulators go to shared memory (each thread owns its slots), so they
  // take no registers.
  s.smem_columns = hint.smem_columns.value_or(column_reduction);
  const double per_elem = words.row + words.invariant + (s.smem_columns ? 0.0 : words.column);
  const double budget = std::max(16.0, target.regs_per_sm / 1024.0 - 24.0);
  // One CTA per row: about 16 elements per thread (small threads, many rows in flight).
  // With column reductions (always persistent): about 4 chunks per thread (VEC x 4 elements), at
  // least 64 threads for long rows, then more threads per row until the cached vectors (the
  // accumulators too, when they are not in shared memory) fit the budget.
  // Without column reductions: the fewest threads per row whose share of the row fits the
  // register budget (about 40 words: 40 f32 or 80 packed 16-bit elements), so that an SM holds
  // as many rows, and keeps as many bytes in flight, as its registers allow (measured at 8192 x
  // 10240 f32: 0.93 of copy with 256 threads per row against 0.32 with 1024; LayerNorm bf16
  // 8192 x 8192: 0.76 with 128 against 0.36 with 512). Loop-invariant vectors (weights) are then
  // re-read from L1 where they do not fit too (measured: no cost). Single-reduction kernels on
  // 16-bit rows (RMSNorm) keep about 16 elements per thread: with 1024 rows, fewer threads
  // per row leave SMs idle (18.4 us against 15.1 us at 1024 x 8192).
  // Kernels whose reductions depend on each other (softmax: the max, then the sum of exponentials)
  // wait at a CTA barrier per phase: there at most about 40 elements per thread, packed or not,
  // measured faster (softmax bf16 8192 x 8192: 0.82 of copy with 256 threads per row against
  // 0.77 with 128; 4096 x 32768: 0.65 with 1024 against 0.58 with 512).
  const double row_words = std::max(words.row, phases >= 2 ? 1.0 : 0.5);
  const int64_t per_thread_vectors =
      std::max<int64_t>(1, static_cast<int64_t>(budget / row_words) / s.vec);
  const int fit_group =
      std::clamp(pow2_ceil((vectors + per_thread_vectors - 1) / per_thread_vectors), 1, 1024);
  // Rows of 16K to 32K 16-bit elements with one level of reductions also run one CTA per row,
  // with the threads the registers allow, where that was measured faster (bf16 4096 x 32768,
  // sixth session): up to 512 threads per row (layer_norm 152 us against 165 persistent,
  // rms_norm 150 against 156), or 1024 when the kernel writes two rows (add_rms_norm 264
  // against 287 on a cluster). Softmax backward (1024 threads, one row written) keeps its cluster
  // (210 us against 257 with one CTA per row); dependent reductions (softmax: 209 against 156)
  // and f32 rows (layer_norm: 192 against 171) keep the persistent grid.
  const auto row_outputs = std::count_if(k.stores.begin(), k.stores.end(), [](const ir::Store& st) {
    return st.kind == ir::StoreKind::write && has_vector_axis(st.view);
  });
  const bool long_simple = !column_reduction && n <= 32768 && phases == 1 && min_size == 2 &&
                           (fit_group <= 512 || row_outputs >= 2);
  const bool simple = !column_reduction && (n <= 16384 || long_simple);
  s.persistent = hint.persistent.value_or(!simple) || column_reduction;
  const bool small_threads = reductions <= 1 && min_size == 2;
  int group;
  if (!s.persistent && small_threads && n <= 16384) {
    int64_t chunks_target = std::max(1, 16 / s.vec);
    group = std::clamp(pow2_ceil((vectors + chunks_target - 1) / chunks_target), 1, 1024);
  } else if (!column_reduction) {
    group = s.persistent && vectors > 256 ? std::max(fit_group, 64) : fit_group;
  } else {
    group = vectors <= 16    ? pow2_ceil(vectors)
            : vectors <= 256 ? 32
                             : std::clamp(pow2_ceil((vectors + 3) / 4), 64, 1024);
  }
  // A thread-block cluster of K CTAs per row: the row's G threads are spread over K CTAs, so G
  // may reach 1024 * K.
  if (cluster > 1) group = std::clamp(group, 64 * cluster, 1024 * cluster);
  while (column_reduction && group < 1024 * cluster &&
         group<vectors&& static_cast<double>((vectors + group - 1) / group) * s.vec * per_elem>
             budget) {
    group *= 2;
  }
  if (hint.group) group = *hint.group;
  if (cluster == 1 && group > 1024) {
    throw ScheduleHintError(fmt::format(
        "schedule hint group={}: more than 1024 threads per row need a cluster (cluster=2, 4 or 8)",
        group));
  }
  if (cluster > 1 && !supports_clusters(target)) {
    throw ScheduleHintError(
        fmt::format("schedule hint cluster={}: thread-block clusters need sm_90 or newer, not {}",
                    cluster, target.arch));
  }
  if (cluster > 1 && (group / cluster < 64 || group / cluster > 1024)) {
    throw ScheduleHintError(fmt::format(
        "schedule hint cluster={}: a row's {} threads would give {} per CTA; a cluster needs "
        "64 to 1024 threads per CTA and row (group from {} to {})",
        cluster, group, group / cluster, 64 * cluster, 1024 * cluster));
  }
  s.group = group;
  s.cluster = cluster;
  s.name = cluster > 1   ? "rows.cluster"
           : group < 32  ? "rows.subwarp"
           : group == 32 ? "rows.warp"
                         : "rows.cta";
  s.threads = std::max(group / cluster, 256);
  s.rows_per_cta = s.threads / (s.group / cluster);
  s.chunks = static_cast<int>((vectors + s.group - 1) / s.group);
  // What kdsl_load / kdsl_store issue per chunk (src/cuda_prelude.cpp): f32 and 16-bit elements
  // in accesses of up to 16 bytes (VEC = 8 f32: two), except a pair of 16-bit elements (two
  // 2-byte accesses; a register-resident row packed in pairs is loaded as 4-byte words), bool
  // rows (one byte an element) in one access of VEC bytes, other types element by element.
  // Each element size has its own accesses: with tensors of several sizes along the row (a bf16
  // row and its bool mask) the reason gives each dtype's. (It gave only the smallest's, the
  // mask's, which read as the accesses of the row's data: found on the README's masked_softmax.)
  const auto access_text = [&](size_t size) {
    const auto bytes = static_cast<int64_t>(size);
    const bool pair16 = size == 2 && s.vec == 2;
    const int64_t access = (size == 1 || size == 2 || size == 4) && !pair16
                               ? std::min<int64_t>(s.vec * bytes, 16)
                               : bytes;
    const int64_t accesses = s.vec * bytes / access;
    return fmt::format("{}{}-byte accesses{}", accesses > 1 ? fmt::format("{} x ", accesses) : "",
                       access, accesses > 1 ? " per vector" : "");
  };
  // The row's dtypes by element size, largest first: "f32, i32: 16-byte accesses; bool: ...".
  std::map<size_t, std::string, std::greater<>> by_size;
  for (DType t : row_dtypes) {
    std::string& names = by_size[dtype_size(t)];
    names += fmt::format("{}{}", names.empty() ? "" : ", ", dtype_name(t));
  }
  std::string accesses_text;
  for (const auto& [size, names] : by_size) {
    accesses_text +=
        fmt::format("{}{}: {}", accesses_text.empty() ? "" : "; ", names, access_text(size));
  }
  // One element size (the common case) keeps the short form, "VEC = 8 (16-byte accesses)".
  if (by_size.size() <= 1) accesses_text = access_text(min_size);
  const std::string rows_text =
      cluster > 1
          ? fmt::format(
                "{} thread{} per row in a cluster of {} CTAs of {}, {} row{} per "
                "cluster",
                s.group, s.group == 1 ? "" : "s", cluster, s.threads, s.rows_per_cta,
                s.rows_per_cta == 1 ? "" : "s")
          : fmt::format("{} thread{} per row, {} row{} per CTA", s.group, s.group == 1 ? "" : "s",
                        s.rows_per_cta, s.rows_per_cta == 1 ? "" : "s");
  // (A kernel without a vector axis has no N and no vector accesses: found by a new-user test,
  // its explain read "N = 1: VEC = 1 (16-byte accesses)".)
  const std::string axis_text =
      k.vector_symbol < 0
          ? std::string("no vector axis: element accesses (each row's elements read one by one)")
          : fmt::format("N = {}: VEC = {} ({}), {} vector{} per row", n, s.vec, accesses_text,
                        vectors, vectors == 1 ? "" : "s");
  s.reasons.push_back(fmt::format(
      "{} -> {} ({}, {} chunk{} per thread), {}", axis_text, s.name, rows_text, s.chunks,
      s.chunks == 1 ? "" : "s",
      !s.persistent      ? (cluster > 1 ? "one cluster per row group (no state across rows)"
                                        : "one CTA per row group (no state across rows)")
      : column_reduction ? "persistent grid (column reductions accumulate across a CTA's rows)"
                         : "persistent grid (CTAs loop over rows)"));
  if (hint.persistent && !*hint.persistent && column_reduction) {
    s.reasons.push_back(
        "persistent=0 does not apply: column reductions accumulate across a CTA's rows");
  }
  if (const int64_t fits = pow2_ceil(vectors);
      !internal && (hint.group || hint.cluster) && s.group > fits) {
    // Allowed (kdsl tune times such variants), but said: those threads only take part in the
    // reductions.
    s.reasons.push_back(fmt::format(
        "schedule hint {}: {} threads per row for {} vector{}: {} of them hold no element ({} "
        "covers the row)",
        hint.str(), s.group, vectors, vectors == 1 ? "" : "s", s.group - vectors,
        64 * cluster > fits ? fmt::format("group={} without a cluster", fits)
                            : fmt::format("group={}", fits)));
  }

  // Register budget for cached vectors: enough that at least 1024 threads (more rows in
  // flight) fit on an SM: 64 registers per thread, minus about 24 for indices and temporaries.
  const Words& w = words;
  const double elems = static_cast<double>(s.chunks) * s.vec;
  double smem_bytes = elems * (s.group / cluster) * s.rows_per_cta * w.column * 4;
  // Up to 96 KiB per CTA (two CTAs per SM); a 1024-thread CTA is alone on its SM anyway.
  double smem_limit = std::min(s.threads >= 1024 ? 200.0 * 1024 : 96.0 * 1024,
                               static_cast<double>(target.max_smem_per_cta));
  if (s.smem_columns && smem_bytes > smem_limit) {
    s.smem_columns = false;
    if (columns_overflow) *columns_overflow = true;
    if (hint.smem_columns) {
      s.reasons.push_back(fmt::format(
          "smem_columns=1 does not fit: {:.0f} KiB of column accumulators per CTA, at most {:.0f} "
          "KiB; they stay in registers",
          smem_bytes / 1024, smem_limit / 1024));
    }
  }
  if (hint.smem_columns && !column_reduction) {
    // Moot (the flag stays, so the generated code is that of the hint as given).
    s.reasons.push_back(fmt::format(
        "smem_columns={:d} does not apply: the kernel has no column reductions (dw[:] += ...)",
        *hint.smem_columns));
  } else if (s.smem_columns) {
    s.reasons.push_back(fmt::format(
        "column-reduction accumulators in shared memory ({:.0f} KiB per CTA)", smem_bytes / 1024));
  }
  double need = elems * (w.row + w.invariant + (s.smem_columns ? 0.0 : w.column));
  s.cache_invariant = hint.cache_invariant.value_or(need <= budget || w.invariant == 0);
  if (!s.cache_invariant) need -= elems * w.invariant;
  // (reread=1 with stage: the staged rows are held in shared memory, not registers.)
  s.cache_rows = hint.cache_rows.value_or(
      need <= budget || (hint.reread.value_or(false) && hint.stage.value_or(0) >= 2));
  if (!s.cache_rows) need -= elems * w.row;
  // A prefetch issues the next row's cached row loads early. A kernel without row loads (element
  // accesses only, or vectors it only stores) has none to issue: prefetching would add dead index
  // arithmetic and nothing else, and kdsl tune would time one launch twice (found by a new-user
  // test: `tune --list` of a kernel without a vector axis listed prefetch=0 and prefetch=1).
  const bool row_loads = w.row > 0;
  s.prefetch = s.persistent && s.cache_rows && row_loads &&
               hint.prefetch.value_or(!column_reduction && need + elems * w.row <= budget);
  if (!internal && hint.prefetch && *hint.prefetch && !row_loads) {
    s.reasons.push_back("prefetch=1 does not apply: the kernel has no row loads to prefetch");
  }
  // The shared-memory pipeline: each thread copies its 16-byte chunks of the next stage - 1 rows
  // into shared memory with cp.async (sm_80), so those bytes are in flight without registers.
  // Per-row scalars of 4 or 8 bytes (RMSNorm backward's rstd) are loaded a row ahead into
  // registers (not copied with the rows: measured slower, codegen_rows.cpp), so that their load
  // latency is not paid at the start of every row.
  int staged = 0, staged_scalars = 0;
  for (const ir::Node& node : k.nodes) {
    StagedLoad sl = staged_load(k, spec, node, s.vec);
    staged += sl == StagedLoad::row;
    staged_scalars += sl == StagedLoad::scalar;
  }
  int stage = hint.stage.value_or(0);
  const bool stageable =
      s.persistent && s.cache_rows && staged > 0 && compute_capability(target) >= 80;
  if (stage >= 2 && !stageable && internal) stage = 0;  // the scheduler's own re-choice
  if (stage >= 2 && !stageable) {
    std::string why = !s.persistent ? "a persistent grid (persistent=1)"
                      : !s.cache_rows && hint.reread.value_or(false)
                          ? "cache_rows=1, which is reread=1's default (reread=1 then reads the "
                            "staged rows from shared memory in each phase; they are not held in "
                            "registers)"
                      : !s.cache_rows ? "register-resident rows (cache_rows=1)"
                      : staged == 0   ? "row loads of 16 bytes (aligned, contiguous rows; vec)"
                                      : fmt::format("sm_80 or newer, not {}", target.arch);
    throw ScheduleHintError(
        fmt::format("schedule hint stage={}: staging rows in shared memory needs {}", stage, why));
  }
  const double stage_bytes =
      static_cast<double>(staged) * s.chunks * 16 * s.threads;  // scalars: in registers
  const int asked = stage;
  // The static buffers of the row reductions' partials (two rows, every warp of the row;
  // codegen_rows.cpp): 16 bytes per state, the bound the stage counts were measured with, or
  // their exact bytes where more (f64 var: 24 bytes a state; push=2 packs them, padded). The
  // push is settled below; the hint's is the one it takes where it applies.
  const double partial_bytes =
      std::max(s.group > 32 ? 2.0 * reductions * s.rows_per_cta * (s.group / 32) * 16 : 0.0,
               static_cast<double>(partial_state_bytes(k, s, hint.push.value_or(0))));
  while (stage >= 2 && (s.smem_columns ? smem_bytes : 0.0) + partial_bytes + stage * stage_bytes >
                           static_cast<double>(target.max_smem_per_cta)) {
    --stage;
  }
  if (stage < asked) {
    s.reasons.push_back(fmt::format(
        "stage={} does not fit: {} buffers of {:.0f} KiB (a row each), {:.0f} KiB of column "
        "accumulators and {:.0f} KiB of partials need {:.0f} KiB, beyond the {} KiB of shared "
        "memory per CTA; {}",
        asked, asked, stage_bytes / 1024, s.smem_columns ? smem_bytes / 1024 : 0.0,
        partial_bytes / 1024,
        (asked * stage_bytes + partial_bytes + (s.smem_columns ? smem_bytes : 0.0)) / 1024,
        target.max_smem_per_cta / 1024,
        stage >= 2 ? fmt::format("staging {} rows", stage) : std::string("no staging")));
  }
  if (stage >= 2) {
    s.stage = stage;
    s.staged_loads = staged;
    s.staged_scalars = staged_scalars;
    s.prefetch = false;
    s.reasons.push_back(fmt::format(
        "rows staged in shared memory: {} buffers ({:.0f} KiB per CTA), the next {} copied "
        "ahead with cp.async (row loads: {}{})",
        stage, stage * stage_bytes / 1024,
        stage == 2 ? std::string("row group") : fmt::format("{} row groups", stage - 1), staged,
        staged_scalars > 0 ? fmt::format("; per-row scalars: {}, loaded a row ahead into registers",
                                         staged_scalars)
                           : std::string()));
    if (hint.reread && *hint.reread) {
      // RowSchedule::reread: the staged rows hold no registers across the row.
      s.reread = true;
      for (const ir::Node& node : k.nodes) {
        if (staged_load(k, spec, node, s.vec) != StagedLoad::row) continue;
        need -= elems * load_words(node, spec, s.pack, s.vec);
      }
      s.reasons.push_back(
          "staged rows read again from shared memory by each phase that uses them, a chunk at a "
          "time (reread=1): they take no registers across the row");
    }
  }
  if (hint.reread && *hint.reread && !s.reread) {
    s.reasons.push_back("reread=1 does not apply: no rows are staged in shared memory (stage)");
  }
  if (s.prefetch) need += elems * w.row;
  if (!s.cache_invariant) {
    s.reasons.push_back("loop-invariant vectors are re-read per row (from L1/L2)");
  }
  const char* packed = !(s.pack && min_size == 2 && s.vec >= 2) ? ""
                       : s.vec == 2 ? ", 16-bit values packed in pairs, loaded 4 bytes at a time"
                                    : ", 16-bit values packed in pairs";
  const std::string budget_text =
      need > budget
          ? fmt::format("over the budget of {:.0f}: ptxas may spill some to local memory", budget)
          : fmt::format("budget {:.0f}", budget);
  std::string held = fmt::format("{:.0f}", need);  // "about N registers per thread hold"
  held += held == "1" ? " register per thread holds" : " registers per thread hold";
  if (s.cache_rows && need < 0.5) {
    s.reasons.push_back("register-resident: no vector to hold; each element is read once");
  } else if (s.cache_rows) {
    s.reasons.push_back(fmt::format(
        "register-resident: about {} the cached vectors{}{} ({}); each element is read once", held,
        packed, s.prefetch ? ", the next row prefetched" : "", budget_text));
  } else if (need < 0.5) {
    s.reasons.push_back(
        "streaming: no row is held in registers; each reduction phase re-reads the row");
  } else {
    // The rows are re-read; what stays in registers is loop-invariant vectors (weights) and
    // column accumulators.
    const bool inv = s.cache_invariant && w.invariant > 0;
    const bool col = !s.smem_columns && w.column > 0;
    s.reasons.push_back(fmt::format(
        "streaming: no row is held in registers (each reduction phase re-reads the row); about "
        "{} the {}{}{}{} ({})",
        held, inv ? "loop-invariant vectors" : "", inv && col ? " and " : "",
        col ? "column accumulators" : "", inv ? packed : "", budget_text));
  }
  s.stream = hint.stream.value_or(false);
  s.min_ctas = hint.min_ctas.value_or(0);
  if (const int fit = std::max(1, target.max_threads_per_sm / s.threads); s.min_ctas > fit) {
    // More CTAs than the SM's threads allow: ptxas would ignore the bound ("out of range").
    s.reasons.push_back(fmt::format(
        "min_ctas={} does not apply as given: {} CTAs of {} threads exceed the SM's {} threads; "
        "the launch bounds ask for {}",
        s.min_ctas, s.min_ctas, s.threads, target.max_threads_per_sm, fit));
    s.min_ctas = fit;
  }
  // Streamed phases' chunk loop unrolled `unroll` chunks at a time (codegen_rows.cpp applies it
  // to the phases that hold nothing in registers across chunks). Rows streamed in 32 chunks or
  // more a thread roll it 8 at a time unless the hint says otherwise: fully unrolled, every
  // chunk's loads are issued first and ptxas spills or takes 255 registers (twenty-ninth session,
  // H100, 512 x 262144: softmax f32 719 us against 1112, RMSNorm f32 597 against 825, LayerNorm
  // f32 580 against 932, bf16 301 against 412 at 32 chunks; 16 at a time within 2% of 8 but for
  // LayerNorm f32, 8% slower). Fewer chunks keep the full unroll (at 1-2 chunks rolling was
  // slower, twenty-sixth session).
  const bool roll_rule = !hint.unroll && !s.cache_rows && s.chunks >= kRollFromChunks;
  s.unroll = hint.unroll.value_or(roll_rule ? kRolledChunks : 0);
  if (s.unroll >= s.chunks) s.unroll = 0;  // every chunk: the loop is unrolled anyway
  if (roll_rule) {
    s.reasons.push_back(fmt::format(
        "{} chunks a thread, streamed: the chunk loop rolled {} chunks at a time (measured; "
        "fully unrolled it spills)",
        s.chunks, kRolledChunks));
  }
  // Sums of exp(x - c(max(x))) (softmax, log_softmax) in the max's pass (OnlineSum): by default
  // where the rows are streamed in kRollFromChunks chunks a thread or more, each phase re-reading
  // them, so the row is read once fewer (2 reads and a write instead of 3 and a write; twenty-ninth
  // session, H100: softmax f32 512 x 262144 580 us against 720, bf16 1024 x 131072 297 against
  // 373). With 16 chunks a thread, fully unrolled, it was slower for bf16 (2048 x 65536: 289
  // against 245; softmax f32 2048 x 65536: 613 against 654), so shorter rows are not online by
  // default. Not on
  // clusters (not written there) nor, unless asked, on register-resident
  // rows (no read to save; not measured).
  const bool has_online = !online_sums(k).empty();
  s.online = has_online && cluster == 1 &&
             hint.online.value_or(!s.cache_rows && s.chunks >= kRollFromChunks);
  if (s.online) {
    s.reasons.push_back(
        "online softmax: the sum of exp(x - max) runs in the pass of the max, rescaled as the "
        "running maximum grows (Milakov & Gimelshein, 2018)" +
        std::string(s.cache_rows ? "" : "; each streamed row is read once fewer"));
  } else if (hint.online && *hint.online) {
    s.reasons.push_back(has_online ? "online=1 does not apply: a row on a cluster"
                                   : "online=1 does not apply: no sum of exp(x - c) after a "
                                     "reduction of x");
  }
  // What the hint does: nothing where the rows are held in registers (each phase holds them, so
  // none rolls); a full unroll where it is at least the thread's chunks, which differs from the
  // default where that rolls (kRollFromChunks chunks and more).
  if (hint.unroll && s.cache_rows) {
    // (With reread=1 the staged rows are not held in registers, but each phase's chunk loop
    // reads them from shared memory fully unrolled all the same.)
    s.reasons.push_back(fmt::format(
        "unroll={} does not apply: {}", *hint.unroll,
        s.reread ? "the staged rows are read from shared memory by each phase (reread=1), in "
                   "chunk loops unrolled fully"
                 : "the rows are held in registers"));
  } else if (hint.unroll && *hint.unroll == 0) {
    s.reasons.push_back(fmt::format(
        "unroll=0: the chunk loop of the streamed phases is unrolled fully ({} chunk{} a "
        "thread{})",
        s.chunks, s.chunks == 1 ? "" : "s",
        s.chunks >= kRollFromChunks
            ? fmt::format("; without the hint a streamed row of {} chunks or more rolls it {} at "
                          "a time: fully unrolled it spills",
                          kRollFromChunks, kRolledChunks)
            : ""));
  } else if (hint.unroll && *hint.unroll > 0) {
    s.reasons.push_back(
        s.unroll == 0
            ? fmt::format("unroll={} is at least the thread's {} chunk{} of a row: the chunk loop "
                          "is unrolled fully",
                          *hint.unroll, s.chunks, s.chunks == 1 ? "" : "s")
            : fmt::format("streamed phases unrolled {} chunk{} at a time (the phases that hold "
                          "no registers across chunks)",
                          s.unroll, s.unroll == 1 ? "" : "s"));
  }
  // The combine of a row reduction's warps' partials (more than 32 threads per row): a second
  // warp butterfly on one CTA per row group, in warp order on a cluster (each measured faster
  // there, fourteenth session, bench/RESULTS.md). On a cluster that pushes partials (every
  // cluster with row or column reductions) neither: every warp writes its partial
  // into every CTA of the cluster, combined by lanes and a butterfly once they are in
  // (nineteenth and twenty-seventh sessions, codegen_rows.cpp), so the hint does not apply there.
  // Also in warp order for f32 rows with one row reduction on 1024 threads whose last chunk is only
  // partly filled (seventeenth session, AB1: RMSNorm backward f32 8192 x 10240 251 us against 294,
  // the only benchmarked row the rule covers; LayerNorm backward there, two reductions, 345 against
  // 322, so not with two; the kernels on 256 or 512 threads at that N within 1% either way). `kdsl
  // tune` times the other.
  const bool ragged_f32 =
      min_size == 4 && reductions == 1 && s.group == 1024 && cluster == 1 && vectors % 1024 != 0;
  s.butterfly = hint.butterfly.value_or(cluster == 1 && !ragged_f32);
  if (!hint.butterfly && ragged_f32) {
    s.reasons.push_back(
        "f32 rows with one reduction and a partly filled last chunk: the warps' partials added "
        "in warp order, not by a butterfly (measured)");
  }
  // (Noted on the re-chosen schedule too: a measured rule's re-choice keeps these reasons.)
  const bool pushed = pushes_partials(cluster, column_reduction, row_reductions(k));
  if (hint.butterfly && (reductions == 0 || s.group <= 32 * cluster || pushed)) {
    s.reasons.push_back(fmt::format(
        "butterfly={:d} does not apply: {}", *hint.butterfly,
        reductions == 0 ? "the kernel has no row reductions"
        : pushed        ? "on this cluster every CTA receives every warp's partial and "
                          "combines them by lanes and a butterfly"
                 : "a row's threads in a CTA are one warp or less (no partials to combine)"));
  }
  // How a cluster row's warps push their partials (RowSchedule::push): only where they push
  // with st.async, a row of more than one warp with row reductions on a cluster.
  const bool async_pushed = pushed && reductions > 0 && s.group > 32;
  if (hint.push && *hint.push != 0 && !async_pushed) {
    s.reasons.push_back(
        fmt::format("push={} does not apply: {}", *hint.push,
                    cluster == 1      ? "the row is on one CTA (no partials pushed to a cluster)"
                    : reductions == 0 ? "the kernel has no row reductions"
                                      : "a row's threads are one warp (no partials to push)"));
  } else if (hint.push) {
    s.push = *hint.push;
    if (s.push != 0) {
      s.reasons.push_back(fmt::format(
          "row partials: {}{}", (s.push & 1) ? "lane q of each warp pushes to CTA q" : "",
          (s.push & 2) ? fmt::format("{}the states of a point's reductions packed, one vector "
                                     "st.async per CTA",
                                     (s.push & 1) ? "; " : "")
                       : ""));
    }
  }
  if (!hint.empty() && !internal) s.reasons.push_back("schedule hint: " + hint.str());
  // The grid is sized at launch from the driver's occupancy for the compiled kernel; this is an
  // upper bound (threads per SM), so that the generated source depends on the kernel, the
  // specialization and the architecture only.
  s.ctas_per_sm = std::max(1, std::min(target.max_threads_per_sm / s.threads, 32));
  s.column_reduction = column_reduction;
  s.phases = phases;
  s.reductions = reductions;
  s.element_bytes = static_cast<int>(min_size);
  return s;
}

}  // namespace

StagedLoad staged_load(const ir::Kernel& k, const Specialization& spec, const ir::Node& node,
                       int vec) {
  if (node.op != ir::Op::load || !has_loop_axis(node.view)) return StagedLoad::none;
  size_t bytes = dtype_size(k.tensors[static_cast<size_t>(node.index)].dtype);
  if (node.type.form == ir::Form::scalar) {
    return bytes == 4 || bytes == 8 ? StagedLoad::scalar : StagedLoad::none;
  }
  bool fast = spec.fast(node.index);
  return node.type.form == ir::Form::vector && fast && bytes * static_cast<size_t>(vec) == 16
             ? StagedLoad::row
             : StagedLoad::none;
}

namespace {

RowSchedule choose_row_schedule_unchecked(const ir::Kernel& k, const Specialization& spec,
                                          const DeviceTarget& target, const ScheduleHint& hint);
RowSchedule choose_row_schedule_fitted(const ir::Kernel& k, const Specialization& spec,
                                       const DeviceTarget& target, const ScheduleHint& hint);

}  // namespace

namespace {

// The static shared memory a kernel may declare (ptxas: 0xc000 bytes).
constexpr int64_t kMaxStaticSmem = 48 * 1024;

}  // namespace

RowSchedule choose_row_schedule(const ir::Kernel& k, const Specialization& spec,
                                const DeviceTarget& target, const ScheduleHint& hint) {
  RowSchedule s = choose_row_schedule_fitted(k, spec, target, hint);
  // The reductions' partial states of every warp of a row (a cluster row of up to 256 warps),
  // in static shared memory: beyond 48 KiB ptxas rejects the kernel (found by a test: seven
  // f64 reductions at one point, argmax and var among them, on group=8192,cluster=8 took 68 KiB).
  if (const int64_t bytes = partial_state_bytes(k, s, s.push); bytes > kMaxStaticSmem) {
    const std::string what = fmt::format(
        "the partial states of the row's reductions from its {} warps take {:.1f} KiB of static "
        "shared memory, beyond the {} KiB a kernel may declare",
        s.group / 32, static_cast<double>(bytes) / 1024, kMaxStaticSmem / 1024);
    if (hint.group || hint.cluster) {
      throw ScheduleHintError(
          fmt::format("schedule hint {}: {} (give a smaller group)", hint.str(), what));
    }
    throw ArgumentError(fmt::format(
        "{}: rows of N = {} elements on {} threads per row: {} (fewer or smaller reductions)",
        k.name, k.vector_symbol >= 0 ? *k.symbols[k.vector_symbol].value : 1, s.group, what));
  }
  return s;
}

namespace {

RowSchedule choose_row_schedule_fitted(const ir::Kernel& k, const Specialization& spec,
                                       const DeviceTarget& target, const ScheduleHint& hint) {
  if (hint.has_scan_keys()) {
    throw ScheduleHintError(fmt::format(
        "schedule hint {}: t, lp, wp and vr apply to scan kernels; '{}' is a row kernel (its "
        "keys are vec, group, cache_rows, ...)",
        hint.str(), k.name));
  }
  RowSchedule s = choose_row_schedule_unchecked(k, spec, target, hint);
  // Checked on the final schedule: the measured rules' re-choice can make rows register-resident
  // (a cluster, column accumulators in registers), which a prefetch needs.
  if (hint.prefetch && *hint.prefetch && !s.prefetch &&
      cached_words(k, spec, s.pack, s.vec).row > 0) {  // without row loads: moot, said above
    throw ScheduleHintError(fmt::format(
        "schedule hint prefetch=1: prefetching the next row needs {}",
        !s.persistent   ? "a persistent grid (persistent=1)"
        : !s.cache_rows ? "register-resident rows (cache_rows=1; these rows are re-read per phase)"
                        : "no rows staged in shared memory (this schedule stages them)"));
  }
  const int64_t n = k.vector_symbol >= 0 ? *k.symbols[k.vector_symbol].value : 1;
  if (n >= (int64_t{1} << 31)) {
    throw ArgumentError(fmt::format(
        "{}: rows of N = {} elements are beyond the row schedule (N must be below 2^31)", k.name,
        n));
  }
  if (int64_t{s.chunks} * s.vec <= kMaxElementsPerThread) return s;
  // Beyond the row schedule. Advice only where a larger group holds the row: up to 1024 threads
  // on one CTA, or a cluster of up to 8 CTAs of 1024 where the target has clusters; and, with
  // column reductions, where a thread's column accumulators in registers stay within the 255
  // registers it has (kMaxRegistersPerThread): beyond them they spill to local memory (for
  // layer_norm_bwd at N = 4194304, 8 CTAs of 1024 would leave 1024 a thread).
  const int64_t vectors = (n + s.vec - 1) / s.vec;
  const int64_t max_group = supports_clusters(target) ? 8 * 1024 : 1024;
  auto holds_elements = [&](int64_t g) {
    return (vectors + g - 1) / g * s.vec <= kMaxElementsPerThread;
  };
  // The column accumulators a thread holds in registers with `g` threads per row (a cluster of
  // g / 1024 CTAs beyond 1024), or -1 where no schedule has that group.
  auto accumulators_at = [&](int64_t g) -> int64_t {
    if (!s.column_reduction) return 0;
    ScheduleHint h = hint;
    h.group = static_cast<int>(g);
    h.cluster = g > 1024 ? std::optional<int>(static_cast<int>(g / 1024)) : std::nullopt;
    try {
      return register_accumulators(k, spec, choose_row_schedule_unchecked(k, spec, target, h));
    } catch (const ScheduleHintError&) {
      return -1;
    }
  };
  // The smallest group above `from` that holds the row (0: none), and else, where only the
  // column accumulators keep a group from holding it, why.
  auto larger_group = [&](int64_t from, std::string* why) -> int64_t {
    for (int64_t g = 2 * from; g <= max_group; g *= 2) {
      if (!holds_elements(g)) continue;
      const int64_t held = accumulators_at(g);
      if (held >= 0 && held <= kMaxRegistersPerThread) return g;
      if (held > kMaxRegistersPerThread) {
        *why = fmt::format(
            "no group holds this row: with group={}{} a thread would hold {} column "
            "accumulators in registers, more than the {} it has",
            g, g > 1024 ? fmt::format(",cluster={}", g / 1024) : "", held, kMaxRegistersPerThread);
      }
    }
    return 0;
  };
  if (hint.group) {
    std::string advice = "no group holds this row";
    if (const int64_t g = larger_group(*hint.group, &advice); g > 0) {
      advice = g > 1024 ? "give a larger group, with cluster" : "give a larger group";
    }
    throw ScheduleHintError(fmt::format(
        "schedule hint group={}: {} elements per thread at N = {}, beyond the row schedule (at "
        "most {}; {})",
        *hint.group, int64_t{s.chunks} * s.vec, n, kMaxElementsPerThread, advice));
  }
  std::string advice = "no group holds this row";
  // Rows beyond one CTA of 1024 threads (more than 512 elements a thread: 16-bit N above
  // 524288, or an odd N, element by element, above 524288) of kernels without column
  // reductions go to the smallest cluster of CTAs of 1024 threads that holds them, streamed (a
  // user's cluster= taken as given: its CTAs get 1024 threads). Not measured; kdsl tune times
  // other clusters. Column reductions keep the error: their accumulators (C * VEC a thread)
  // would spill.
  auto widened = [&](int64_t g) {
    ScheduleHint wide = hint;
    wide.group = static_cast<int>(g);
    wide.cluster = static_cast<int>(g / 1024);
    RowSchedule c = choose_row_schedule_unchecked(k, spec, target, wide);
    // The user's own hint is noted, not the widened one.
    c.reasons.erase(
        std::remove_if(c.reasons.begin(), c.reasons.end(),
                       [](const std::string& r) { return r.rfind("schedule hint: ", 0) == 0; }),
        c.reasons.end());
    if (!hint.empty()) c.reasons.push_back("schedule hint: " + hint.str());
    c.reasons.push_back(fmt::format(
        "more than {} elements a thread on one CTA: a cluster of {} CTAs of 1024 threads per "
        "row (not measured; kdsl tune times other clusters)",
        kMaxElementsPerThread, g / 1024));
    return c;
  };
  const bool widen = supports_clusters(target) && !s.column_reduction;
  if (widen && hint.cluster && *hint.cluster > 1) {
    const int64_t g = 1024 * int64_t{*hint.cluster};
    if (holds_elements(g)) return widened(g);
  }
  if (const int64_t g = larger_group(s.group, &advice); g > 0) {
    if (widen && !hint.cluster && g > 1024) return widened(g);
    advice = g > 1024 ? fmt::format("try --schedule group={},cluster={}", g, g / 1024)
                      : fmt::format("try --schedule group={}", g);
  }
  if (hint.cluster) {  // the user's cluster leaves too many elements a thread: a hint error
    throw ScheduleHintError(fmt::format(
        "schedule hint cluster={}: {} elements per thread at N = {} ({} threads per row), beyond "
        "the row schedule (at most {}; {})",
        *hint.cluster, int64_t{s.chunks} * s.vec, n, s.group, kMaxElementsPerThread, advice));
  }
  throw ArgumentError(fmt::format(
      "{}: rows of N = {} elements are beyond the row schedule ({} elements per thread, at "
      "most {}; {})",
      k.name, n, int64_t{s.chunks} * s.vec, kMaxElementsPerThread, advice));
}

RowSchedule choose_row_schedule_unchecked(const ir::Kernel& k, const Specialization& spec,
                                          const DeviceTarget& target, const ScheduleHint& hint) {
  bool overflow = false;
  RowSchedule s = choose_rows(k, spec, target, hint, hint.cluster.value_or(1), &overflow);
  const bool clusters = supports_clusters(target);
  // Measured rules (bench/RESULTS.md, fourth and fifth sessions, bf16 and f32 on an H200), each
  // only where the user's hint leaves the choice open.
  ScheduleHint h = hint;
  int cluster = hint.cluster.value_or(1);
  std::vector<std::string> why;
  std::string persistent_note;  // why a user's persistent=0 (unroll, online=1) keeps a row streamed
  std::string four_ctas;        // the cluster-of-four reason the register-accumulator rule replaced
  bool f32_prefetch_rule = false;
  if (!hint.cluster && !hint.group && s.group == 1024) {
    // Whether the row's elements are beyond one CTA's registers: streamed rows, with a user's
    // cache_rows (either value) set aside, since register-resident rows are what the cluster
    // makes possible and streamed rows the cluster keeps.
    bool elements_beyond = !s.cache_rows;
    if (hint.cache_rows) {
      ScheduleHint open = hint;
      open.cache_rows.reset();
      elements_beyond = !choose_rows(k, spec, target, open, cluster, nullptr).cache_rows;
    }
    // Long rows without column reductions, streamed on one CTA, that a cluster of 8 CTAs of
    // 1024 threads holds in registers: the row on that cluster, read once.
    // - 16-bit rows with 3 or 4 chunks per thread (bf16 N = 196608 to 262144; twenty-seventh
    //   session, AK1, bf16 512 x 262144: softmax 252 us against 451 streamed, RMSNorm 226
    //   against 394). Not with 1 or 2 chunks per thread (softmax 2048 x 65536: 381 against
    //   208, 1024 x 131072: 363 against 290; each row pays the cluster's reductions, about 3 us
    //   a row there); 8 chunks spill (softmax at N = 524288: 152 bytes).
    // - f32 rows with 4 to 8 chunks per thread (N = 131072 to 262144; thirtieth session, AM1 on
    //   an H100, us, streamed against the cluster: softmax 512 x 262144 579 -> 388, 640 x 196608
    //   548 -> 368, 1024 x 131072 589 -> 371, log_softmax the same, RMSNorm 597 -> 443, 534 ->
    //   384, 571 -> 437; no spill at 52-64 registers). At 2 chunks equal (softmax f32 2048 x
    //   65536, AK1: 470 against 476).
    // Only for kernels of one row input and at most one loop-invariant vector (softmax,
    // RMSNorm): LayerNorm (two weight vectors) was slower on the cluster at bf16 (24 bytes
    // spilled, 426 us against 345) and at f32 without a spill (AM1: 718 against 579 at 512 x
    // 262144, 818 against 582 at 1024 x 131072; not found why); softmax backward's two rows
    // spill 64 bytes at bf16 N = 262144. The row fills at least the fewest chunks (a tail of a
    // few vectors in one more chunk is not the measured row). Hints the cluster can honour
    // (cache_rows=1, prefetch, stage=0, online=0) keep it; hints of streamed rows (unroll, and
    // online=1 where the kernel has such a sum) keep the row streamed on one CTA, and so does
    // persistent=0 (the cluster runs on a persistent grid), with a reason.
    bool long_cluster = false;
    const Words held = cached_words(k, spec, false, s.vec);
    const bool online_asked = hint.online.value_or(false) && !online_sums(k).empty();
    if (clusters && !s.column_reduction && (s.element_bytes == 2 || s.element_bytes == 4) &&
        elements_beyond && hint.cache_rows.value_or(true) && hint.stage.value_or(0) < 2 &&
        held.row <= 1 && held.invariant <= 1) {
      ScheduleHint eight = hint;
      eight.group = 8 * 1024;
      eight.persistent = true;
      const RowSchedule on8 = choose_rows(k, spec, target, eight, 8, nullptr, /*internal=*/true);
      const int fewest = s.element_bytes == 2 ? 3 : 4;
      const int most = s.element_bytes == 2 ? 4 : 8;
      const int64_t n = k.vector_symbol >= 0 ? *k.symbols[k.vector_symbol].value : 1;
      long_cluster =
          on8.cache_rows && n >= int64_t{fewest} * 8 * 1024 * s.vec && on8.chunks <= most;
      if (long_cluster && !s.persistent) {
        long_cluster = false;
        if (hint.persistent == false) {
          persistent_note =
              "persistent=0: the row is streamed (the cluster of 8 CTAs of 1024 threads that "
              "would hold it in registers runs on a persistent grid)";
        }
      }
      if (long_cluster && (hint.unroll || online_asked)) {
        long_cluster = false;
        persistent_note = fmt::format(
            "{}: the row is streamed, not held in registers (a hint of streamed rows; without it "
            "a cluster of 8 CTAs of 1024 threads holds the row in registers)",
            hint.unroll ? fmt::format("unroll={}", *hint.unroll) : std::string("online=1"));
      }
    }
    if (long_cluster) {
      cluster = 8;
      h.group = 8 * 1024;
      why.push_back(fmt::format(
          "a long {} row: a cluster of 8 CTAs of 1024 threads holds it in registers (read once; "
          "measured)",
          s.element_bytes == 2 ? "16-bit" : "f32"));
    } else if (clusters && s.column_reduction && (overflow || elements_beyond)) {
      // Column reductions whose row does not fit one CTA (N = 32768): the row's accumulators
      // beyond its shared memory (LayerNorm backward) or its elements beyond its registers
      // (RMSNorm backward, re-read per phase). A cluster of four CTAs, each with a quarter of the
      // columns, holds the row (LayerNorm backward 430 us against 2369; RMSNorm backward 387
      // against 546).
      cluster = 4;
      const std::string beyond = overflow ? "its column accumulators exceed the shared memory"
                                          : "its elements exceed the registers";
      why.push_back(fmt::format(
          "the row does not fit one CTA ({}): a cluster of 4 CTAs per row, each with a quarter "
          "of the columns",
          beyond));
      // 16-bit rows of 3073 to 4096 vectors (N = 32768; thirteenth session, bf16 4096 x 32768,
      // X4): one chunk per thread on the cluster, so the column accumulators stay in registers
      // (LayerNorm backward 411 us against 430); kernels with one row reduction (RMSNorm-like)
      // are faster still on 8 CTAs of 512 threads (RMSNorm backward 357 against 369,
      // add_rms_norm_bwd 396 against 465; LayerNorm backward 452 there). f32 rows keep the
      // shared memory (RMSNorm backward f32 on 8 CTAs: 493 against 473); shorter and longer rows
      // were not measured. Hints equal to what the rule chooses (smem_columns=0, cache_rows=1)
      // keep it; prefetch and stage hints were measured slower with it (572 us against 379 with
      // prefetch=1) and keep the cluster of four (a stage hint without group= and cluster= is
      // refused at this N: at 1024 threads the rows would not be register-resident).
      const int64_t n = k.vector_symbol >= 0 ? *k.symbols[k.vector_symbol].value : 1;
      const int64_t vectors = (n + s.vec - 1) / s.vec;
      if (s.element_bytes == 2 && vectors > 3 * 1024 && vectors <= 8 * 512 &&
          !hint.smem_columns.value_or(false) && hint.cache_rows.value_or(true) && !hint.prefetch &&
          !hint.stage) {
        four_ctas = why.back();
        h.smem_columns = false;
        // The next row staged in shared memory (nineteenth session, bf16 4096 x 32768, two
        // rounds each: LayerNorm backward 384 us against 412, RMSNorm backward 321 against 355;
        // three or four stages within 1% of two, so the rows in flight are not what limits
        // these kernels).
        h.stage = 2;
        if (s.reductions == 1) {
          cluster = 8;
          h.group = 8 * 512;
        }
        why.back() = fmt::format(
            "the row does not fit one CTA ({}): a cluster of {}, each with {} of the columns, "
            "the column accumulators in registers (measured at bf16 N = 32768: {})",
            beyond, cluster == 8 ? "8 CTAs of 512 threads per row" : "4 CTAs per row",
            cluster == 8 ? "an eighth" : "a quarter",
            cluster == 8 ? "RMSNorm backward 357 us against 369 on 4 CTAs of 1024 with the "
                           "accumulators in shared memory; staged: 321"
                         : "LayerNorm backward 411 us against 430 with the accumulators in "
                           "shared memory; staged: 384");
      }
    } else if (clusters && !s.column_reduction && s.persistent && s.phases == 1) {
      // Single-phase kernels on long rows (softmax backward at N = 32768): four CTAs of 256
      // threads per row instead of one of 1024 (212 us against 258).
      cluster = 4;
      why.push_back(
          "a long single-phase row: a cluster of 4 CTAs of 256 threads instead of one of 1024");
    } else if (s.column_reduction && s.element_bytes == 4 && s.reductions >= 2 && s.chunks == 3 &&
               s.vec == 4 && s.cache_rows && !hint.cache_rows && !hint.prefetch && !hint.stage) {
      // f32 rows of 2049 to 3072 vectors with several row reductions (LayerNorm backward): 512
      // threads per row with the next row prefetched, over the register budget (128 registers,
      // 48 bytes spilled) but with a second row in flight per SM (seventeenth session, AB2,
      // `kdsl tune` at f32 8192 x 10240: 276 us against 323). RMSNorm backward (one reduction)
      // is slower that way (274 against 251), so not there. Only with 16-byte accesses (the
      // measured case) and where the user leaves cache_rows open (the give-way below decides on
      // whether the rows stay in registers at 512 threads, which cache_rows=1 would force).
      h.group = 512;
      h.prefetch = true;
      f32_prefetch_rule = true;
      why.push_back(
          "f32 rows of 3 chunks per thread at 1024 threads with several reductions: 512 threads "
          "per row instead, the next row prefetched (measured)");
    } else if (s.column_reduction && s.chunks == 1 && s.cache_rows && !hint.prefetch &&
               !hint.stage) {
      // Column reductions with one chunk per thread (N = 8192 bf16): 512 threads per row with
      // the next row prefetched (RMSNorm backward 152.5 us against 168.4; LayerNorm backward
      // 191.9 against 205.0). Prefetching needs register-resident rows (not with cache_rows=0).
      h.group = 512;
      h.prefetch = true;
      why.push_back(
          "column reductions with one chunk per thread at 1024 threads per row: 512 threads "
          "instead, the next row prefetched");
    }
  }
  const bool open = !hint.smem_columns && !hint.cache_rows && cluster == 1;
  const bool rows16 = s.element_bytes == 2;
  bool staging_rule = false, pack_rule = false, long_dependent_rule = false;
  if (open && s.column_reduction && s.chunks * s.vec <= 16 && (rows16 || s.reductions == 1)) {
    // Backward kernels with at most 16 elements per thread (fifth session, sweeps 5 and 6): the
    // column accumulators in registers, not shared memory, whose load and store per element and
    // row kept the shared-memory pipe busy (LayerNorm backward 32768 x 4096: 275 us against 292;
    // RMSNorm backward f32 8192 x 10240: 252 against 294). RMSNorm-like kernels (one reduction)
    // on 16-bit rows also stage the next row in shared memory (cp.async) and keep 1024 threads
    // at N = 8192 (RMSNorm backward 8192 x 8192: 128 us against 147; 32768 x 4096: 213 against
    // 247); LayerNorm backward stages instead of prefetching at 512 threads (150 us against
    // 162), and since its per-row scalars are loaded a row ahead into registers instead of
    // being copied with the rows, also with one chunk per thread (eighteenth session, bf16:
    // 32768 x 4096 225 us against 268, 65536 x 1024 126 against 145; N = 2048, shorter rows and
    // a user's group giving one chunk per thread are extrapolated). A user's stage= stands
    // (stage=0: no staging).
    h.smem_columns = false;
    h.cache_rows = true;
    why.push_back("column accumulators in registers (measured)");
    const bool prefetch_rule = h.prefetch && !hint.prefetch;
    if (rows16 && !hint.stage && !hint.prefetch &&
        (s.reductions == 1 || prefetch_rule || (s.reductions >= 2 && s.chunks == 1))) {
      if (prefetch_rule && s.reductions == 1) {  // 1024 threads, no prefetch
        h.group.reset();
        why.erase(why.begin());
      } else if (prefetch_rule) {
        why.front() =
            "column reductions with one chunk per thread at 1024 threads per row: 512 threads "
            "instead";
        // There (LayerNorm backward, 2 chunks per thread at 512 threads: one CTA per SM with
        // or without them) the loop-invariant vectors stay in registers, not re-read per row
        // from L1 (eighteenth session, bf16 8192 x 8192: 128 us against 133; ptxas 13.0: 126
        // registers, still one CTA of 512 threads per SM). Not under a user's min_ctas, whose
        // register cap it would exceed.
        if (!hint.cache_invariant && !hint.min_ctas) {
          h.cache_invariant = true;
          why.front() += ", the loop-invariant vectors kept in registers (measured)";
        }
      }
      // Several reductions and one chunk per thread (LayerNorm backward at N = 1024 to 4096):
      // the cached 16-bit vectors (the staged rows, and the weights held in registers) also
      // packed in pairs (twenty-first session, bf16 32768 x 4096: 221.6 us against 224.6, three
      // rounds, as in AC5; 65536 x 1024 equal in AC5). Not at two chunks (8192 x 8192: 127.9
      // against 127.5) or for RMSNorm backward (slower packed in AC5).
      if (s.reductions >= 2 && s.chunks == 1 && !prefetch_rule && !hint.pack) {
        h.pack = true;
        pack_rule = true;
      }
      h.prefetch.reset();
      h.stage = 2;
      staging_rule = true;
    }
  } else if (open && !hint.group && !hint.stage && !hint.prefetch && !s.column_reduction &&
             s.persistent && s.phases >= 2 && rows16 && s.group == 1024) {
    // Dependent reductions (softmax) on long 16-bit rows: the next row staged in shared memory,
    // the row kept by 1024 threads where it can be staged so (softmax bf16 4096 x 32768: 144.0
    // us against 147.7 at 512 threads, log_softmax 144.5 against 147.6; twenty-fourth session),
    // else by 512 (162 us against 199 unstaged at 1024 in the sixth session; at 2048 x 65536,
    // where the rows are streamed, 207 against 258 at 1024).
    h.group = 1024;
    h.stage = 2;
    staging_rule = true;
    long_dependent_rule = true;
    why.push_back("a long row with dependent reductions: 1024 threads per row");
  }
  if (!persistent_note.empty()) s.reasons.push_back(persistent_note);
  if (why.empty()) return s;
  RowSchedule first = s;
  s = choose_rows(k, spec, target, h, cluster, nullptr, /*internal=*/true);
  if (long_dependent_rule && s.stage < 2) {
    // 512 threads unless that gives a thread more elements than the row schedule holds (16-bit
    // N above 262144): then 1024, streamed.
    ScheduleHint half = h;
    half.group = 512;
    RowSchedule on512 = choose_rows(k, spec, target, half, cluster, nullptr, /*internal=*/true);
    if (int64_t{on512.chunks} * on512.vec <= kMaxElementsPerThread) {
      h = half;
      s = std::move(on512);
      why.back() = "a long row with dependent reductions: 512 threads per row";
    }
  }
  if (pack_rule && (s.stage < 2 || s.chunks != 1)) {
    // Packing was measured on staged rows of one chunk per thread only; rows that could not be
    // staged, or whose packed registers let fewer threads take two chunks each, stay unpacked.
    h.pack.reset();
    pack_rule = false;
    s = choose_rows(k, spec, target, h, cluster, nullptr, /*internal=*/true);
  }
  if (!four_ctas.empty() && !s.cache_rows) {
    // The accumulators took the registers the rows needed (a kernel with many column sums):
    // the cluster of four with them in shared memory, which keeps the rows register-resident.
    h = hint;
    cluster = 4;
    why.back() = four_ctas;
    s = choose_rows(k, spec, target, h, cluster, nullptr, /*internal=*/true);
  }
  // The f32 prefetch rule holds only where the rows stay in registers at 512 threads, so the
  // next row can be prefetched: at N = 12288 they are streamed there instead (LayerNorm backward
  // f32 8192 x 12288: 446 us against 367 at 1024 threads; seventeenth session, AB3).
  if (f32_prefetch_rule && !s.prefetch) {
    first.reasons.insert(
        first.reasons.begin() + 1,
        "f32 rows of 3 chunks per thread with several reductions: 1024 threads kept (at 512 the "
        "rows would be streamed, with no next row prefetched)");
    return first;
  }
  // The user's stage= stands: a re-choice that could not stage (e.g. rows no longer fit the
  // registers) gives way to the schedule chosen with the hint as given.
  if (hint.stage && *hint.stage >= 2 && first.stage >= 2 && s.stage < 2) return first;
  if (staging_rule) {
    // (The rule does not fire on a user's cache_rows: streamed rows here are too long.)
    why.back() += s.stage >= 2 && pack_rule ? ", the next row staged in shared memory, 16-bit "
                                              "values packed in pairs (measured)"
                  : s.stage >= 2            ? ", the next row staged in shared memory (measured)"
                  : !s.cache_rows ? "; the rows are streamed (too long for the registers), so "
                                    "none is staged"
                                  : "; the rows cannot be staged (no 16-byte row loads or no "
                                    "room)";
  }
  if (!hint.empty()) s.reasons.push_back("schedule hint: " + hint.str());
  if (!persistent_note.empty()) s.reasons.push_back(persistent_note);
  s.reasons.insert(s.reasons.begin() + 1, why.begin(), why.end());
  return s;
}

}  // namespace

}  // namespace kdsl

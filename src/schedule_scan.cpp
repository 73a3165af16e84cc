#include "schedule_scan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "codegen_expr.h"
#include "codegen_scan.h"
#include "dsl/diagnostics.h"
#include "kdsl/error.h"
#include "schedule_hint.h"
#include "text_util.h"

namespace kdsl {
namespace {

bool power_of_two(int v, int hi) {
  return v >= 1 && v <= hi && (v & (v - 1)) == 0;
}

bool has_kind(const ir::View& v, ir::AxisIndex::Kind kind) {
  return std::any_of(v.begin(), v.end(), [&](const ir::AxisIndex& a) { return a.kind == kind; });
}

[[noreturn]] void unsupported(const ir::Node& n, const std::string& msg, const std::string& hint) {
  Diagnostic d;
  d.loc = n.loc;
  d.message = msg;
  d.hint = hint;
  throw SourceError(n.loc.valid() ? render_diagnostic(d) : msg + " (" + hint + ")");
}

// Half 32-bit registers one element takes: of the carried states (with the emptiness flag of
// user combine functions) and of the loads (a shift adds a load). 16-bit loads take a whole
// register, or half of one when `packed16` (accesses of several rows keep them in pairs).
int element_half_words(const ir::Kernel& k, bool packed16) {
  int half = 0;
  for (const ir::Node& n : k.nodes) {
    if (n.op == ir::Op::scan) {
      for (const ir::Type& t : n.results) half += dtype_size(t.dtype) == 8 ? 4 : 2;
      if (static_cast<ir::ScanKind>(n.fn) == ir::ScanKind::custom) half += 2;
    } else if ((n.op == ir::Op::load || n.op == ir::Op::shift) && n.type.form == ir::Form::vector) {
      const size_t e = dtype_size(n.type.dtype);
      half += e == 8 ? 4 : e == 2 && packed16 ? 1 : 2;
    }
  }
  return std::max(half, 2);
}

// 32-bit registers one element takes, 16-bit loads unpacked.
int element_words(const ir::Kernel& k) {
  return element_half_words(k, false) / 2;
}

// Whether a scan of the kernel combines by logaddexp (logcumsumexp): transcendental math in the
// combine, evaluated at each level of the scan, rather than once per element.
bool logaddexp_combine(const ir::Kernel& k) {
  for (const ir::Node& n : k.nodes) {
    if (n.op == ir::Op::scan && static_cast<ir::ScanKind>(n.fn) == ir::ScanKind::logaddexp)
      return true;
  }
  return false;
}

// Transcendental evaluations per element of the scanned axis (exp, log, sqrt, sigmoid, ... and a
// logaddexp scan's combine): the kernels with several (RG-LRU) are bound by their instructions,
// not by memory: they keep element accesses, or take the 16-bit heavy-math layout below.
int element_math(const ir::Kernel& k) {
  int n_math = 0;
  for (const ir::Node& n : k.nodes) {
    if (n.type.form != ir::Form::vector) continue;
    if (n.op == ir::Op::scan && static_cast<ir::ScanKind>(n.fn) == ir::ScanKind::logaddexp) {
      n_math += 2;
    } else if (is_transcendental(n)) {
      ++n_math;
    }
  }
  return n_math;
}

// KDSL_SCAN_SCHEDULE ("key=value,..."; see choose_scan_schedule), read once per choice.
struct ScanHints {
  std::string text;                                // the variable as given ("" when unset)
  std::vector<std::pair<std::string, int>> items;  // key, value
  bool from_hint = false;  // the caller's schedule hint (`--schedule`, a tuned record)

  // What the messages name, and the error they throw (a hint's is a ScheduleHintError, which a
  // tuned record from another kdsl version is ignored on).
  std::string source() const {
    return from_hint ? fmt::format("schedule hint {}", text) : "KDSL_SCAN_SCHEDULE";
  }
  [[noreturn]] void fail(const std::string& msg) const {
    if (from_hint) throw ScheduleHintError(fmt::format("{}: {}", source(), msg));
    throw ArgumentError(fmt::format("{}: {}", source(), msg));
  }

  // The last value given for `key`, else `fallback`.
  int value(const std::string& key, int fallback) const {
    for (auto it = items.rbegin(); it != items.rend(); ++it) {
      if (it->first == key) return it->second;
    }
    return fallback;
  }

  // A key of the tile's layout (t, lp, wp, vr) is set: the overrides then apply to the
  // element-access layout they were written against, not to the default 2-row one.
  bool sets_layout() const {
    return std::any_of(items.begin(), items.end(), [](const auto& kv) {
      return kv.first == "t" || kv.first == "lp" || kv.first == "wp" || kv.first == "vr";
    });
  }
};

// KDSL_SCAN_SCHEDULE's keys: the hint's scan keys and the look-back's knobs.
const std::vector<ScheduleKey>& scan_keys() {
  static const std::vector<ScheduleKey> keys = {
      {"t", "a power of two from 1 to 64", [](int v) { return power_of_two(v, 64); }},
      {"lp", "a power of two from 1 to 32", [](int v) { return power_of_two(v, 32); }},
      {"wp", "a power of two from 1 to 32", [](int v) { return power_of_two(v, 32); }},
      {"vr", "a power of two from 1 to 16", [](int v) { return power_of_two(v, 16); }},
      {"window", "a power of two from 1 to 32", [](int v) { return power_of_two(v, 32); }},
      {"pipeline", "0, 1 or 2", [](int v) { return v >= 0 && v <= 2; }},
      {"ctas", "0 to 32", [](int v) { return v >= 0 && v <= 32; }},
      {"packed", "0 or 1", [](int v) { return v == 0 || v == 1; }},
      {"rescan", "0 or 1", [](int v) { return v == 0 || v == 1; }},
      {"pos64", "0 or 1", [](int v) { return v == 0 || v == 1; }},
      {"keep", "0 or 1", [](int v) { return v == 0 || v == 1; }}};
  return keys;
}

// Read as `--schedule` is (parse_schedule_items), but its errors are ArgumentErrors: not a hint,
// so a tuned record is not ignored for them, and the CLI does not name --schedule. Unlike an empty
// `--schedule ""` (a usage error), an empty or blank variable is as if unset: setting a variable
// to nothing is the usual way to clear it.
ScanHints read_hints() {
  ScanHints h;
  const char* env = std::getenv("KDSL_SCAN_SCHEDULE");
  if (!env || !*env) return h;
  h.text = env;
  try {
    h.items = parse_schedule_items(
        h.text, "KDSL_SCAN_SCHEDULE", scan_keys(),
        "t (1 to 64), lp, wp, window (1 to 32), vr (1 to 16), powers of two; pipeline (0, 1, 2), "
        "ctas (0 to 32), packed (0 or 1), rescan (0 or 1), pos64 (0 or 1), keep (0 or 1)");
  } catch (const ScheduleHintError& e) {
    throw ArgumentError(e.what());
  }
  return h;
}

// The scan keys of a schedule hint (ScheduleHint::parse checked their ranges).
ScanHints hints_of(const ScheduleHint& hint) {
  ScanHints h;
  h.from_hint = true;
  h.text = hint.str();
  if (hint.t) h.items.emplace_back("t", *hint.t);
  if (hint.lp) h.items.emplace_back("lp", *hint.lp);
  if (hint.wp) h.items.emplace_back("wp", *hint.wp);
  if (hint.vr) h.items.emplace_back("vr", *hint.vr);
  return h;
}

// The ranges were checked when the text was read (parse_schedule_items, ScheduleHint::parse).
void apply_hints(ScanSchedule& s, const ScanHints& h) {
  if (h.items.empty()) return;
  for (const auto& [key, v] : h.items) {
    if (key == "t") {
      s.t = v;
    } else if (key == "lp") {
      s.lp = v;
      s.lr = 32 / v;
    } else if (key == "wp") {
      s.wp = v;
    } else if (key == "vr") {
      if (!s.columns && v != 1) {
        h.fail("vr (rows per access) applies to scan.columns (a scan along a middle axis) only");
      }
      s.vr = v;
    } else if (key == "window") {
      s.window = v;
    } else if (key == "packed") {
      s.packed = v != 0;
    } else if (key == "rescan") {
      s.rescan = v != 0;
    } else if (key == "pos64") {
      s.wide_positions = v != 0;
    } else if (key == "keep") {
      s.keep_math = v != 0;
    } else if (key == "ctas") {
      s.min_ctas = v;
    } else if (key == "pipeline") {
      s.pipeline = v != 0;
      s.async_copy = v == 2;
    } else {
      throw InternalError(fmt::format("scan schedule: unknown key '{}'", key));
    }
  }
  s.reasons.push_back(h.from_hint ? h.source() : fmt::format("KDSL_SCAN_SCHEDULE={}", h.text));
}

// The scheduler's own tile within the 48 KiB of static shared memory. The tile keeps a state per
// row and warp along the positions (and, looking back, per row and predecessor in its window), so
// a combine of many values can take the default tile past the limit: a 300-tuple of f32 (1204
// bytes a state with its emptiness flag) needs 385416 bytes at 8 rows x 8 warps. Halving the
// warps along the rows, then along the positions (the window follows the threads), then the rows
// per access halves those arrays; a tile that still does not fit is the kernel's limit, a
// diagnostic at its widest scan. Layouts an override sets are left as given (check_smem names
// the override).
void fit_shared_memory(const ir::Kernel& k, const Specialization& spec, ScanSchedule& s,
                       int64_t len) {
  constexpr uint64_t kStaticSmem = 48 * 1024;
  uint64_t bytes = scan_tile_smem_bytes(k, spec, s);
  if (bytes <= kStaticSmem) return;
  const uint64_t first = bytes;
  const int wr = s.wr, wp = s.wp, vr = s.vr;
  while (bytes > kStaticSmem) {
    bool smaller = false;
    for (int knob = 0; knob < 3 && !smaller; ++knob) {
      ScanSchedule c = s;
      int& v = knob == 0 ? c.wr : knob == 1 ? c.wp : c.vr;
      if (v == 1) continue;
      v /= 2;
      c.chunks = (len + c.cl() - 1) / c.cl();
      if (c.chunks > 1 && c.td() > c.threads()) continue;  // the look-back: a thread per row
      s = c;
      smaller = true;
    }
    if (!smaller) break;
    bytes = scan_tile_smem_bytes(k, spec, s);
  }
  if (bytes > kStaticSmem) {
    const ir::Node* widest = nullptr;
    for (const ir::Node& n : k.nodes) {
      if (n.op == ir::Op::scan && (!widest || n.results.size() > widest->results.size()))
        widest = &n;
    }
    const std::string msg = fmt::format(
        "the scan's states need about {} bytes of shared memory in the smallest tile of the GPU "
        "schedule ({}, {}), over the {} a kernel may hold statically",
        bytes, counted(s.td(), "row", "rows"), counted(s.threads(), "thread", "threads"),
        kStaticSmem);
    const std::string hint =
        "carry fewer values through one scan (split the tuple into several scans of the same "
        "sequence)";
    if (widest) unsupported(*widest, msg, hint);
    throw SourceError(fmt::format("kernel '{}': {} ({})", k.name, msg, hint));
  }
  if (s.vr < 2) s.rescan = false;  // rescanning holds packed pairs of rows
  s.reasons.push_back(fmt::format(
      "shared memory: the combine's states took the tile to {} bytes, over the {} a kernel may "
      "hold statically; wr={},wp={},vr={} became wr={},wp={},vr={} ({} bytes)",
      first, kStaticSmem, wr, wp, vr, s.wr, s.wp, s.vr, bytes));
}

}  // namespace

bool is_transcendental(const ir::Node& n) {
  using F = ir::UnaryFn;
  if (n.op != ir::Op::unary) return false;
  switch (static_cast<F>(n.fn)) {
    case F::exp:
    case F::exp2:
    case F::log:
    case F::log2:
    case F::log1p:
    case F::expm1:
    case F::sqrt:
    case F::rsqrt:
    case F::tanh:
    case F::sigmoid:
    case F::erf:
    case F::silu:
    case F::gelu:
    case F::gelu_tanh:
    case F::softplus:
      return true;
    default:
      return false;
  }
}

bool has_scan_ops(const ir::Kernel& k) {
  for (const ir::Node& n : k.nodes) {
    if (n.op == ir::Op::scan || n.op == ir::Op::shift || n.op == ir::Op::extract) return true;
    if (n.op == ir::Op::reduce && (static_cast<ir::ReduceKind>(n.fn) == ir::ReduceKind::first ||
                                   static_cast<ir::ReduceKind>(n.fn) == ir::ReduceKind::last)) {
      return true;
    }
  }
  return false;
}

const ir::Store* partial_column_reduction(const ir::Kernel& k) {
  // Column reductions over part of the loop (dlam[d] += sum(v) in parallel(B, D)); those of vectors
  // (GroupNorm's dw[g, :] += v) stay with the row schedule, which reduces along rows.
  for (const ir::Store& s : k.stores) {
    if (s.kind == ir::StoreKind::reduce && has_kind(s.view, ir::AxisIndex::Kind::loop) &&
        !has_kind(s.view, ir::AxisIndex::Kind::vector)) {
      return &s;
    }
  }
  return nullptr;
}

bool needs_scan_schedule(const ir::Kernel& k) {
  return has_scan_ops(k) || partial_column_reduction(k) != nullptr;
}

ScanSchedule choose_scan_schedule(const ir::Kernel& k, const Specialization& spec,
                                  const DeviceTarget& target, const ScheduleHint& hint) {
  (void)target;
  if (hint.has_row_keys()) {
    throw ScheduleHintError(fmt::format(
        "schedule hint {}: '{}' is a scan kernel; its keys are t, lp, wp and vr (vec, group, "
        "... apply to row kernels: normalizations, softmax)",
        hint.str(), k.name));
  }
  ScanSchedule s;
  const int64_t len = k.vector_symbol >= 0 ? k.symbols[k.vector_symbol].value.value_or(1) : 1;
  // The explain names the sequence's length by the kernel's own symbol (N of cumsum's (M, N), L
  // of a recurrence's (B, L, D)).
  const std::string len_name = k.vector_symbol >= 0 ? k.symbols[k.vector_symbol].name : "L";
  // Positions, chunk counts and tile numbers are 64-bit; 2^62 keeps their sums from overflowing
  // (a sequence that long could not be allocated anyway).
  if (len >= (int64_t{1} << 62)) {
    throw ArgumentError(fmt::format(
        "{}: a sequence of {} positions is beyond the scan schedule (its length must be below "
        "2^62)",
        k.name, len));
  }
  // Direction: every scan of the kernel runs the same way (one pass over the sequence).
  const ir::Node* first_scan = nullptr;
  for (const ir::Node& n : k.nodes) {
    if (n.op != ir::Op::scan) continue;
    if (first_scan && n.reverse != first_scan->reverse) {
      unsupported(n,
                  "this kernel scans in both directions, which the GPU schedule cannot do in one "
                  "pass",
                  "split it into two kernels, one per direction");
    }
    if (!first_scan) first_scan = &n;
  }
  s.reverse = first_scan && first_scan->reverse;

  // The reference access: the first vector load or store. Its last axis decides the layout; its
  // loop axes, in order, the flattening of the rows (the innermost fastest).
  int32_t ref_tensor = -1;
  ir::View ref;
  size_t vmin = 16, vmax = 0;
  bool float32_or_less = true;  // every vector tensor is f32, f16 or bf16
  uint32_t vector_tensors = 0;
  auto see = [&](int32_t tensor, const ir::View& view) {
    if (!has_kind(view, ir::AxisIndex::Kind::vector)) return;
    if (ref_tensor < 0) {
      ref_tensor = tensor;
      ref = view;
    }
    vector_tensors |= tensor_bit(tensor);
    const DType dt = k.tensors[tensor].dtype;
    vmin = std::min(vmin, dtype_size(dt));
    vmax = std::max(vmax, dtype_size(dt));
    float32_or_less &= dt == DType::f32 || dt == DType::f16 || dt == DType::bf16;
  };
  for (const ir::Node& n : k.nodes) {
    if (n.op == ir::Op::load) see(n.index, n.view);
  }
  for (const ir::Store& st : k.stores) see(st.tensor, st.view);
  s.columns = ref_tensor >= 0 && ref.back().kind != ir::AxisIndex::Kind::vector;
  std::vector<bool> placed(k.loop.size(), false);
  std::vector<int> inner;
  for (const ir::AxisIndex& a : ref) {
    if (a.kind == ir::AxisIndex::Kind::loop && !placed[a.value]) {
      placed[a.value] = true;
      inner.push_back(static_cast<int>(a.value));
    }
  }
  for (size_t l = 0; l < k.loop.size(); ++l) {
    if (!placed[l]) s.row_order.push_back(static_cast<int>(l));
  }
  s.row_order.insert(s.row_order.end(), inner.begin(), inner.end());
  if (s.columns && ref.back().kind == ir::AxisIndex::Kind::loop)
    s.fast_loop = static_cast<int>(ref.back().value);

  // 32-bit registers per element (the loads, then the local prefixes held between the look-back
  // and the epilogue); the steps per thread follow from a budget of them, below.
  const int words = element_words(k);
  const int vec = static_cast<int>(std::clamp<size_t>(16 / vmin, 1, 8));
  if (s.columns) {
    // One row per lane, LR lanes covering 32 bytes of a position (a sector), the others and the
    // warps along the positions (replaced below by accesses of 2 rows, 16 lanes along the rows,
    // for memory-bound kernels); a thread's T positions are consecutive (scanned sequentially, then
    // one lane scan per tile, so shuffles stay well below the memory time).
    s.name = "scan.columns";
    s.blocked = true;
    s.lr = static_cast<int>(std::clamp<size_t>(32 / vmin, 1, 32));
    s.lp = 32 / s.lr;
    s.wp = 8;
  } else {
    // Lanes along the positions, VP consecutive positions per access: each step of a warp reads
    // 32 * VP consecutive elements.
    s.name = "scan.rows";
    bool fast = (spec.aligned_mask & spec.contiguous_mask & vector_tensors) == vector_tensors;
    s.vp = 1;
    if (fast) {
      for (int v = vec; v > 1; v /= 2) {
        if (len % v == 0) {
          s.vp = v;
          break;
        }
      }
    }
    s.vector_fast = s.vp > 1;
    s.lr = 1;
    s.lp = 32;
    s.wp = 8;
  }
  s.t = 0;  // chosen below unless KDSL_SCAN_SCHEDULE sets it
  // scan.columns over a long sequence, f32, f16 or bf16 tensors, little math per element:
  // accesses of VR = 2 rows (8 bytes of f32, 4 of f16/bf16), 16 lanes along the rows and 2 along
  // the positions, and as many elements per thread (a power of two up to 64) as about 208
  // register words hold (256 for rescanning 16-bit tensors, below; 16-bit loads packed in pairs),
  // 8 to 32 steps so that a tile spans at least 128 positions.
  // Measured on the H200 at (1, 32768, 2048) (bench/RESULTS.md):
  // - ninth session (T6), 8-byte accesses (VR = 8 / size) against the element accesses of
  //   32-byte rows before them, which issue 2 to 4 times the load instructions per byte: f32
  //   cumsum 0.62 -> 0.82 of copy, linear recurrence 0.66 -> 0.82, its backward 0.62 -> 0.80;
  //   bf16 0.50 -> 0.65, 0.45 -> 0.51, 0.43 -> 0.65;
  // - tenth session (kdsl tune, with pointer-stepped addresses), the best of 27 layouts each:
  //   bf16 linear recurrence VR = 2 with 16 steps 149 us against 179 us with VR = 4 and 8 steps
  //   (the same elements per thread), its backward 211 (VR = 2, 16 steps: 32 elements of about
  //   6.5 words) against 232, cumsum 86 (32 steps) against 91; f32 cumsum 32 steps 142 against
  //   149 with 16. The f32 backward (8 words per element) keeps 8 steps: 16 measured slower
  //   (ninth session, T2: 0.68 against 0.80 of copy).
  // RG-LRU (5 or more transcendental evaluations per element) is bound by its instructions and
  // measured slower this way (see below for 16-bit tensors). Integer, 8-byte and mixed-width
  // tensors are not measured this way and keep element accesses; so does a KDSL_SCAN_SCHEDULE or
  // hint that sets the layout (t, lp, wp, vr).
  const ScanHints hints = read_hints(), given = hints_of(hint);
  const bool set_layout = hints.sets_layout() || given.sets_layout();
  // Little math per element over a long middle-axis sequence: the memory-bound 2-row layout
  // (below, or an override that lands on it) with its budget of register words of elements.
  const bool light = s.columns && float32_or_less && len > 256 && element_math(k) < 2;
  // 16-bit tensors there rescan by default (ScanSchedule::rescan): the packed loads, not the f32
  // local prefixes, stay live through the look-back, so the same registers hold more elements.
  // Measured on the H200 (sixteenth session, bench/results/scan_2026-12-01_s16.txt; same binary,
  // two rounds, us at (1, 32768, 2048) bf16, default -> rescan):
  // - cumsum_mid (32 steps either way) 89.3 -> 86.2; at (1, 32768, 1024) 54.5 -> 52.2; at
  //   (4, 2048, 2048) 30.0 -> 30.6;
  // - linear_recurrence_bwd (16 steps either way) 215.8 -> 203.5; 121.2 -> 116.2; 66.7 -> 62.5;
  // - linear_recurrence: rescan at 16 steps 135.7 -> 136.8, at 32 steps 121.5 (the budget
  //   below); 83.8 -> 76.2; 44.3 -> 42.6. The backward recurrence at 32 steps spills: 341 us.
  // f32 kernels are not measured this way (their loads take whole registers) and do not rescan;
  // neither do kernels with elementwise math (phase B would evaluate it again) or without a scan
  // (shift, first/last, column sums: nothing to scan again). (KDSL_SCAN_SCHEDULE's rescan=0
  // gives the previous default, pipelining no rescanning: both with the budget of 208 words.)
  const bool any_scan = std::any_of(k.nodes.begin(), k.nodes.end(),
                                    [](const ir::Node& n) { return n.op == ir::Op::scan; });
  const bool rescan16 = light && vmax == 2 && element_math(k) == 0 && any_scan &&
                        hints.value("rescan", 1) != 0 && hints.value("pipeline", 0) == 0;
  const int light_budget = rescan16 ? 256 : 208;
  auto sets_ctas = [](const ScanHints& h) {
    return std::any_of(h.items.begin(), h.items.end(),
                       [](const auto& kv) { return kv.first == "ctas"; });
  };
  const bool ctas_keyed = sets_ctas(hints) || sets_ctas(given);
  // Its fewest elements per thread, 8 steps of 2 rows, must fit the budget: a combine of many
  // values (a tuple of 24 sums: 416 words) keeps the element-access layout, whose steps follow
  // its own budget below.
  const bool wide = light && !set_layout && 16 * element_half_words(k, true) <= 2 * light_budget;
  if (wide) {
    s.vr = 2;
    s.lr = 16;
    s.lp = 2;
    const int half = element_half_words(k, true);
    // Rescanning 16-bit kernels of one f32 state (cumsum, cumprod: 3 half words an element) fit
    // 128 elements, 64 steps, where the sequence still makes at least 8 tiles of 1024 positions:
    // cumsum_mid bf16 at (1, 32768, 2048) 81.9 us against 85.2 at 32 steps (kdsl tune,
    // twenty-fourth session); the others stop at 64 elements, 32 steps.
    const int e_max = rescan16 && half <= 3 && len >= 8192 ? 128 : 64;
    int e = 8;
    while (e * 2 <= e_max && e * 2 * half <= 2 * light_budget) e *= 2;
    s.t = std::clamp(e / s.vr, 8, e_max / 2);
    // The budget (words of elements; the loads and the prefixes are not all live at once) was
    // measured with two CTAs of 256 threads per SM (128 registers a thread); the launch bounds
    // hold ptxas to that. Without them the bf16 backward recurrence took 144 registers
    // once its combine became branch-free (one CTA per SM: 212 -> 292 us on the H200, twelfth
    // session), and 128 with them, unspilled.
    s.min_ctas = 2;
    s.reasons.push_back(fmt::format(
        "{}-byte accesses of {} rows, {}-byte lines per position and warp, {} steps: about {} "
        "register words of elements per thread, loads and prefixes, within a budget of {}{} (few "
        "transcendentals per element: memory-bound)",
        s.vr * vmin, s.vr, s.lr * s.vr * vmin, s.t, s.t * s.vr * half / 2, light_budget,
        rescan16 ? " (rescanning: the prefixes are not held through the look-back)" : ""));
  }
  // The same over 16-bit tensors with much elementwise math (RG-LRU), which is bound by its
  // instructions: accesses of VR = 2 rows, the 32 lanes along the rows (a 128-byte line per
  // position and warp), and as many elements per thread (a power of two, 16 to 32) as about 192
  // register words hold (loads unpacked, states and prefixes: the math's temporaries take the
  // rest). Measured on the H200 with the approximate math of 16-bit data (eleventh session,
  // bench/RESULTS.md), at (1, 32768, 2048) bf16:
  // - kdsl tune of 18 layouts: rg_lru (6 words per element) 16 steps 311 us against 355 with the
  //   element accesses of 8 steps before it (but 312 with element accesses of 16 steps: the
  //   forward gains from the steps), 339-350 with 8 steps of 2 rows; rg_lru_bwd (10 words) 8
  //   steps and lp = 1 643 us against 807 (element accesses: 807-1186), 16 steps 903;
  // - logcumsumexp, whose math is in the combine: 8-19% slower this way (278 -> 302 us forward,
  //   930 -> 1111 us for logcumsumexp_reverse_mid_bwd), so it keeps element accesses;
  // - f32 RG-LRU: every 2-row layout slower than the element accesses (tune: best rg_lru_bwd
  //   t=8,lp=2,vr=1 1082 us, default 1134, 2-row layouts 1112-3145).
  // Measured with the approximate math only, and only where 16 elements fit the budget.
  const bool heavy_kernel = s.columns && float32_or_less && vmax == 2 && len > 256 &&
                            element_math(k) >= 2 && !logaddexp_combine(k) && 16 * words <= 192 &&
                            cuda::approx_math(k);
  const bool heavy16 = heavy_kernel && !set_layout;
  const bool any_shift = std::any_of(k.nodes.begin(), k.nodes.end(),
                                     [](const ir::Node& n) { return n.op == ir::Op::shift; });
  if (heavy16) {
    s.vr = 2;
    s.lr = 32;
    s.lp = 1;
    int e = 16;
    while (e * 2 <= 32 && e * 2 * words <= 192) e *= 2;
    s.t = e / s.vr;
    // Two CTAs of 256 threads per SM (128 registers a thread) where a shifted operand lets
    // phase B take values kept from phase A (ScanSchedule::keep_math): ptxas (CUDA 13.0, sm_90)
    // gave rg_lru_bwd bf16 164 registers with them (one CTA per SM) and 128 with these bounds,
    // spilling the same 12 bytes as without kept values. Measured on the H200 at (1, 32768, 2048)
    // (twenty-fifth session, bench/results/ab_2026-12-03_s25.txt), us: rg_lru_bwd bf16 482 ->
    // 474 kept with the bounds, 668 kept without them, 485 with the bounds alone; f16 483 -> 462.
    // rg_lru (no shift, nothing kept) got 0.6% slower with the bounds (248 -> 249.5): none there.
    if (any_shift) s.min_ctas = 2;
    s.reasons.push_back(fmt::format(
        "4-byte accesses of 2 rows, 128-byte lines per position and warp, {} steps: about {} "
        "register words of elements per thread (much math per element: bound by instructions)",
        s.t, s.t * s.vr * words));
  }
  s.rescan = rescan16;
  // Column pointers stepped in bytes (ScanSchedule::byte_steps) in kernels with much math per
  // element (bound by instructions). Measured on an H100 at (1, 32768, 2048), three rounds
  // (thirty-second session, bench/results/scan_ab_h100_2026-12-06_s32.txt), us: rg_lru_bwd bf16
  // 505 -> 495, f32 1050 -> 1043; rg_lru bf16 257.3 -> 258.1 (within the rounds' spread). On every
  // middle-axis scan, cumsum_mid bf16 was 0.6% slower (105.9 -> 106.7) and linear_recurrence and
  // its backward within 0.3%: not there.
  s.byte_steps = s.columns && element_math(k) >= 2 && !logaddexp_combine(k);
  // Positions along the scan axis in 32-bit arithmetic (Emitter::emit_constants) where every
  // vector tensor is f16 or bf16. Measured on the H200 at (1, 32768, 2048): bf16 rg_lru_bwd 1.8%
  // and linear_recurrence_bwd 2.3% faster (twenty-third session, AG3); f32 linear_recurrence_bwd
  // 20% slower (444 us against 367 with 64-bit positions, the same code otherwise; 5-10% at
  // (1, 32768, 1024) and (4, 2048, 2048)) and f32 rg_lru_bwd 0.4% slower (twenty-fourth
  // session, bench/results/f32_2026-12-03_s24.txt).
  s.wide_positions = !(float32_or_less && vmax == 2);
  apply_hints(s, hints);
  apply_hints(s, given);  // the caller's hint over the variable's
  if (s.rescan && s.vr < 2 && hints.value("rescan", 0) == 0) {
    // An override's element accesses (vr=1) keep 16-bit loads unpacked: rescanning saves no
    // registers there and was not measured, so only an explicit rescan=1 gets it.
    s.rescan = false;
    s.reasons.push_back(
        "no rescanning: element accesses (one row each) keep 16-bit loads unpacked");
  }
  if (s.t == 0) {
    // Register words of elements per thread: about 80 along middle axes (measured on the H200 at
    // (1, 32768, 2048): fewer steps mean more chunks, each a step of the look-back chain; more
    // spill or lower occupancy), about 40 along the last axis (measured before the packed
    // look-back), and 64 there for kernels of at most 2 words per element and no transcendentals
    // per element (cumsum: seventeenth session, AB2, bench/results/rows_2026-12-02_s17.txt: bf16
    // with 4 steps instead of 2 at 2048 x 32768 86.4 -> 78.8 us, 1024 x 32768 47.8 -> 45.8, 2560 x
    // 8192 33.3 -> 29.0, 8192 x 2048 25.7 -> 25.6; f32 with 8 steps instead of 4 143.4 ->
    // 141.6, 81.7 -> 79.4, 53.9 -> 51.5, 42.1 -> 42.1; bf16 with 8 steps was slower, 90.7 at
    // 2048 x 32768). The other light last-axis kernels (cumprod, cummax, the exclusive and reverse
    // scans) take the same budget without being timed; heavier ones keep 40 (not re-measured).
    const bool light_rows = !s.columns && words <= 2 && element_math(k) == 0;
    const int budget = s.columns ? 80 : light_rows ? 64 : 40;
    s.t = 1;
    for (int t : {16, 8, 4, 2}) {
      if (t * s.vp * s.vr * words <= budget) {
        s.t = t;
        break;
      }
    }
  }
  // A layout override that lands on the memory-bound 2-row layout within its register budget
  // (`kdsl tune`'s candidates, a tuned record, `--schedule t=16,lp=2,vr=2`) gets the default's
  // launch bounds, so the default's layout given as a hint compiles to the default's code; more
  // steps than the budget holds (tune's doubled t) are left to ptxas; a `ctas` key wins.
  if (set_layout && !ctas_keyed && light && s.vr == 2 && s.lp == 2 && s.wr == 1 && s.wp == 8 &&
      s.t * s.vr * element_half_words(k, true) <= 2 * light_budget) {
    s.min_ctas = 2;
  }
  // The same for the heavy-math 2-row layout of 16-bit tensors with a shifted operand (above:
  // `--schedule t=8,lp=1,vr=2`, the default of bf16 rg_lru_bwd, and tune's candidates of it).
  if (set_layout && !ctas_keyed && heavy_kernel && any_shift && s.vr == 2 && s.lr == 32 &&
      s.lp == 1 && s.wr == 1 && s.wp == 8 && s.t * s.vr * words <= 192) {
    s.min_ctas = 2;
  }
  if (set_layout) {
    const ScanHints& by = given.sets_layout() ? given : hints;
    s.layout_source = by.source();
    s.layout_hint = by.from_hint;
  }
  // Short sequences: halve the tile's length (steps, then lanes, then warps along the positions
  // move to the rows) while it is at least twice the sequence.
  const int t_set = s.t, lp_set = s.lp, wp_set = s.wp;
  while (s.cl() / 2 >= len && (s.t > 1 || s.lp > 1 || s.wp > 1)) {
    if (s.t > 1) {
      s.t /= 2;
    } else if (s.lp > 1) {
      s.lp /= 2;
      s.lr *= 2;
    } else {
      s.wp /= 2;
      s.wr *= 2;
    }
  }
  if (set_layout && (s.t != t_set || s.lp != lp_set || s.wp != wp_set)) {
    s.reasons.push_back(
        fmt::format("{} folded to the sequence ({} = {}): t={},lp={},wp={} became t={},lp={},wp={}",
                    s.layout_source, len_name, len, t_set, lp_set, wp_set, s.t, s.lp, s.wp));
  }
  // A single position: nothing to scan across threads; 16-byte accesses of VR rows (when the
  // launch allows them).
  if (s.columns && len == 1) {
    if (set_layout && s.vr != vec) {
      s.reasons.push_back(fmt::format("{}: vr={} replaced by {} at {} = 1 (one position)",
                                      s.layout_source, s.vr, vec, len_name));
    }
    s.vr = vec;
  }
  // An override's tile is bounded by its registers: past about 1024 words of elements per thread
  // (four times the 255 registers a thread can have) the kernel spills most of them and NVRTC
  // takes minutes (t=64,vr=16 on a c64 recurrence: 8192 words). The defaults hold at most 256.
  if (const int64_t held = int64_t{s.t} * s.vp * s.vr * words; set_layout && held > 1024) {
    (given.sets_layout() ? given : hints)
        .fail(fmt::format("the tile holds about {} register words of elements per thread ({} x "
                          "{} x {} x {} per element); at most 1024 (lower t or vr)",
                          held, counted(s.t, "step", "steps"), counted(s.vr, "row", "rows"),
                          counted(s.vp, "position", "positions"), counted(words, "word", "words")));
  }
  s.chunks = (len + s.cl() - 1) / s.cl();
  if (!set_layout) fit_shared_memory(k, spec, s, len);
  if (s.chunks > 1 && s.td() > s.threads()) {
    // The look-back takes one thread per row of a tile; only overrides can break that.
    const std::string msg =
        fmt::format("scan schedule: {} rows per tile but {} threads", s.td(), s.threads());
    if (set_layout) {
      (given.sets_layout() ? given : hints)
          .fail(fmt::format(
              "{}; the look-back needs a thread per row (raise wp or lp, or lower vr)", msg));
    }
    throw InternalError(msg);
  }
  if (s.rescan && (!s.blocked || s.pipeline)) {
    s.rescan = false;
    const char* why = !s.blocked
                          ? "it applies to scans along a middle axis (scan.columns), not the last"
                          : "pipelining loads the next tile in phase A";
    s.reasons.push_back(fmt::format("KDSL_SCAN_SCHEDULE rescan=1 ignored: {}", why));
  }
  if (!s.blocked) {  // the other middle-axis keys, said as rescan's is
    for (const char* key : {"pos64", "keep"}) {
      const int v = hints.value(key, -1);
      if (v < 0) continue;
      s.reasons.push_back(
          fmt::format("KDSL_SCAN_SCHEDULE {}={} ignored: it applies to scans along a middle axis "
                      "(scan.columns), not the last",
                      key, v));
    }
  }
  if (s.rescan) {
    s.reasons.push_back(
        "rescan: a thread keeps its loaded elements, not their local prefixes, through the "
        "look-back and scans them again from the prefix before it");
  }
  s.ctas_per_sm = std::max(1, 2048 / s.threads());
  if (s.min_ctas > 0) {
    s.reasons.push_back(fmt::format(
        "launch bounds: at least {} of {} threads per SM ({})", counted(s.min_ctas, "CTA", "CTAs"),
        s.threads(),
        ctas_keyed ? "KDSL_SCAN_SCHEDULE ctas"
        : heavy_kernel && s.lr == 32
            ? "the heavy-math 2-row layout: 128 registers a thread"
            : "the memory-bound 2-row layout: its register budget was measured with two"));
  }
  s.reasons.push_back(fmt::format(
      "{}: {} = {}, {} scan: tiles of {} x {} ({}); {} threads = {} x {} warps (rows x "
      "positions), lanes {} x {}, {} x {} per access, {}; {} per element",
      s.name, len_name, len, s.reverse ? "reverse" : "forward", counted(s.td(), "row", "rows"),
      counted(s.cl(), "position", "positions"), counted(s.chunks, "chunk", "chunks"), s.threads(),
      s.wr, s.wp, s.lr, s.lp, counted(s.vr, "row", "rows"), counted(s.vp, "position", "positions"),
      counted(s.t, "step", "steps"), counted(words, "register word", "register words")));
  s.reasons.push_back(s.chunks > 1 ? "chunks chained by a decoupled look-back (atomic tickets in "
                                     "processing order, flags zeroed per launch)"
                                   : "one chunk per row: no look-back");
  if (!s.columns) {
    s.reasons.push_back(s.vector_fast ? fmt::format("{}-element accesses along the positions", s.vp)
                                      : fmt::format("element accesses (a tensor is unaligned or "
                                                    "strided, or {} is not a multiple of the "
                                                    "vector width)",
                                                    len_name));
  } else {
    s.reasons.push_back(
        fmt::format("{}-row accesses when every tensor's rows are contiguous and "
                    "aligned to the access (checked at launch), else element accesses",
                    s.vr));
    if (s.byte_steps) {
      s.reasons.push_back(
          "column pointers stepped by a byte count: one 64-bit add per access (much math per "
          "element: measured faster there, not on memory-bound scans)");
    }
  }
  return s;
}

}  // namespace kdsl

// The scan schedule's generated CUDA, run on the CPU emulation (cuda_emu.h), against the reference
// interpreter: both layouts, both directions, inclusive and exclusive, built-in and user combine
// functions, with and without init, the 16-byte and the element paths, several chunks (look-back
// between CTAs running at once), shifts, first/last and column reductions. Skips without a host
// C++ compiler.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu_test_util.h"
#include "scan_emu_util.h"
#include "scan_test_inputs.h"
#include "scoped_env.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KDSL_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(KDSL_EMU_ASAN)
#define KDSL_EMU_ASAN 1
#endif

namespace kdsl {
namespace {

#ifdef KDSL_EMU_ASAN
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

const char* const kSource = R"(
def affine(left, right):
    a1, b1 = left
    a2, b2 = right
    return a1 * a2, a2 * b1 + b2


@kernel
def recurrence[T: (f32, bf16, c64)](a: Tensor[T, (B, L, D)], x: Tensor[T, (B, L, D)],
                                    h0: Tensor[T, (B, D)],
                                    *, h: Out[T, (B, L, D)], h_last: Out[T, (B, D)]):
    for b, d in parallel(B, D):
        one = T(1.0)
        _, hv = scan(affine, (a[b, :, d], x[b, :, d]), init=(one, h0[b, d]))
        h[b, :, d] = T(hv)
        h_last[b, d] = T(last(hv))


@kernel
def recurrence_bwd[T: (f32, bf16)](a: Tensor[T, (B, L, D)], h: Tensor[T, (B, L, D)],
                                   h0: Tensor[T, (B, D)], dh: Tensor[T, (B, L, D)],
                                   *, dx: Out[T, (B, L, D)], da: Out[T, (B, L, D)],
                                   dh0: Out[T, (B, D)], da_sum: Out[f32, (D,)]):
    for b, d in parallel(B, D):
        a_next = shift(f32(a[b, :, d]), -1, 0.0)
        _, g = scan(affine, (a_next, f32(dh[b, :, d])), reverse=True)
        h_prev = shift(f32(h[b, :, d]), 1, f32(h0[b, d]))
        dx[b, :, d] = T(g)
        da[b, :, d] = T(g * h_prev)
        dh0[b, d] = T(first(f32(a[b, :, d]) * g))
        da_sum[d] += sum(g * h_prev)


@kernel
def sums(x: Tensor[f32, (M, N)], *, fwd: Out[f32, (M, N)], fwd_ex: Out[f32, (M, N)],
         lse: Out[f32, (M, N)], mx: Out[f32, (M, N)], total: Out[f32, (M,)],
         ends: Out[f32, (M, 2)]):
    for m in parallel(M):
        v = x[m, :]
        fwd[m, :] = cumsum(v, init=0.5)
        fwd_ex[m, :] = cumprod(v * 0.01 + 1.0, exclusive=True)
        lse[m, :] = logcumsumexp(v)
        mx[m, :] = cummax(v)
        total[m] = sum(v) + last(v)
        ends[m, 0] = first(v)
        ends[m, 1] = last(v) * 2.0


@kernel
def sums_rev(x: Tensor[f32, (M, N)], *, rev_ex: Out[f32, (M, N)], lse: Out[f32, (M, N)],
             mn: Out[f32, (M, N)], total: Out[f32, (M,)]):
    for m in parallel(M):
        v = x[m, :]
        rev_ex[m, :] = cumsum(v, reverse=True, exclusive=True)
        lse[m, :] = logcumsumexp(v, reverse=True)
        mn[m, :] = cummin(v, reverse=True)
        total[m] = max(v) - first(v)


@kernel
def masked_mid[T: (f32, bf16)](x: Tensor[T, (B, L, D)], keep: Tensor[bool, (B, L, D)],
                               *, y: Out[T, (B, L, D)], kept: Out[f32, (B, D)]):
    for b, d in parallel(B, D):
        v = where(not keep[b, :, d], 0.0, f32(x[b, :, d]))
        y[b, :, d] = T(cumsum(v, reverse=True))
        kept[b, d] = sum(where(keep[b, :, d], 1.0, 0.0))


@kernel
def masked_rows(x: Tensor[f32, (M, N)], keep: Tensor[bool, (M, N)], *, y: Out[f32, (M, N)]):
    for m in parallel(M):
        y[m, :] = cumsum(where(not keep[m, :] or x[m, :] > 3.0, 0.0, x[m, :]), exclusive=True)


@kernel
def custom_rows(a: Tensor[f32, (M, N)], x: Tensor[f32, (M, N)],
                *, fa: Out[f32, (M, N)], fb: Out[f32, (M, N)], eb: Out[f32, (M, N)]):
    for m in parallel(M):
        p, q = scan(affine, (a[m, :], x[m, :]), reverse=True)
        fa[m, :] = p
        fb[m, :] = q
        _, r = scan(affine, (a[m, :], x[m, :]), init=(1.0, 0.25), exclusive=True, reverse=True)
        eb[m, :] = r


@kernel
def int_rows[T: (i32, i64)](x: Tensor[T, (M, N)], *, s: Out[T, (M, N)], mx: Out[T, (M, N)]):
    for m in parallel(M):
        s[m, :] = T(cumsum(x[m, :], reverse=True))
        mx[m, :] = T(cummax(x[m, :], reverse=True))


@kernel
def int_mid[T: (i32, i64)](x: Tensor[T, (B, L, D)], *, s: Out[T, (B, L, D)],
                           mn: Out[T, (B, L, D)]):
    for b, d in parallel(B, D):
        s[b, :, d] = T(cumsum(x[b, :, d], exclusive=True))
        mn[b, :, d] = T(cummin(x[b, :, d]))
)";

std::shared_ptr<const FrontEnd> module() {
  static auto fe = run_front_end(std::make_shared<const SourceFile>("emu.kdsl", kSource));
  return fe;
}

// Decay factors in (0.5, 1) (c64: modulus below 1), so recurrences stay bounded.
HostTensor decays(DType t, std::vector<int64_t> shape, uint64_t seed) {
  HostTensor h(t, std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.5, 0.999), ph(-3.1, 3.1);
  for (int64_t i = 0; i < h.numel(); ++i) {
    double r = u(rng), angle = ph(rng);
    if (t == DType::c64) {
      h.set(i, r * std::cos(angle), r * std::sin(angle));
    } else {
      h.set(i, r);
    }
  }
  return h;
}

// The f32 recurrence kernels at (2, 700, 24): several chunks of a row for the look-back.
Problem recurrence_problem(const char* kernel, uint64_t& seed) {
  ProblemSpec ps;
  ps.kernel = kernel;
  ps.binding = {DType::f32};
  ps.shapes = {{"B", 2}, {"L", 700}, {"D", 24}};
  ps.inputs["a"] = decays(DType::f32, {2, 700, 24}, seed++);
  ps.seed = seed++;
  return make_problem(module(), ps);
}

class ScanEmu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  }
};

TEST_F(ScanEmu, RecurrenceAlongAMiddleAxis) {
  uint64_t seed = 1;
  for (DType t : {DType::f32, DType::bf16, DType::c64}) {
    // (B, L, D): several chunks (look-back), a partial last chunk, one position; D a multiple
    // of the 16-byte width (vector accesses) and not (element accesses).
    for (auto [B, L, D] : {std::tuple<int64_t, int64_t, int64_t>{2, 300, 24},
                           {1, 1000, 8},
                           {1, 1, 16},
                           {3, 7, 5},
                           {1, 130, 9}}) {
      ProblemSpec ps;
      ps.kernel = "recurrence";
      ps.binding = {t};
      ps.shapes = {{"B", B}, {"L", L}, {"D", D}};
      ps.inputs["a"] = decays(t, {B, L, D}, seed++);
      ps.seed = seed++;
      Problem p = make_problem(module(), ps);
      emu::expect_emulated_matches_reference(
          p, fmt::format("recurrence {} B={} L={} D={}", dtype_name(t), B, L, D));
      if (HasFailure()) return;
    }
  }
}

TEST_F(ScanEmu, RecurrenceBackwardWithShiftsFirstAndAColumnReduction) {
  uint64_t seed = 100;
  for (DType t : {DType::f32, DType::bf16}) {
    for (auto [B, L, D] : {std::tuple<int64_t, int64_t, int64_t>{2, 200, 16}, {3, 33, 3}}) {
      ProblemSpec ps;
      ps.kernel = "recurrence_bwd";
      ps.binding = {t};
      ps.shapes = {{"B", B}, {"L", L}, {"D", D}};
      ps.inputs["a"] = decays(t, {B, L, D}, seed++);
      ps.seed = seed++;
      Problem p = make_problem(module(), ps);
      emu::expect_emulated_matches_reference(
          p, fmt::format("recurrence_bwd {} B={} L={} D={}", dtype_name(t), B, L, D));
      if (HasFailure()) return;
    }
  }
}

TEST_F(ScanEmu, BuiltinScansAlongTheLastAxis) {
  uint64_t seed = 200;
  for (auto [M, N] : {std::pair<int64_t, int64_t>{3, 20000}, {5, 7}, {2, 1000}, {1, 1}}) {
    for (const char* kernel : {"sums", "sums_rev"}) {
      ProblemSpec ps;
      ps.kernel = kernel;
      ps.shapes = {{"M", M}, {"N", N}};
      ps.seed = seed++;
      Problem p = make_problem(module(), ps);
      emu::expect_emulated_matches_reference(p, fmt::format("{} M={} N={}", kernel, M, N));
      if (HasFailure()) return;
    }
  }
}

// Integer scans (i64 values were declared with a two-word type, `long long{}`, which neither
// NVRTC nor g++ accepts) along the last and a middle axis, against the interpreter.
TEST_F(ScanEmu, IntegerScansAlongBothAxes) {
  uint64_t seed = 500;
  for (DType t : {DType::i32, DType::i64}) {
    for (const char* kernel : {"int_rows", "int_mid"}) {
      ProblemSpec ps;
      ps.kernel = kernel;
      ps.binding = {t};
      ps.shapes = std::string(kernel) == "int_rows"
                      ? std::map<std::string, int64_t>{{"M", 3}, {"N", 1000}}
                      : std::map<std::string, int64_t>{{"B", 2}, {"L", 300}, {"D", 5}};
      ps.seed = seed++;
      Problem p = make_problem(module(), ps);
      emu::expect_emulated_matches_reference(p, fmt::format("{} {}", kernel, dtype_name(t)));
      if (HasFailure()) return;
    }
  }
}

TEST_F(ScanEmu, UserCombineFunctionWithoutInitReverseAndExclusive) {
  testing::ScanScheduleEnv env("");
  uint64_t seed = 300;
  // The default schedule, then the staged (cp.async) pipeline along contiguous rows.
  for (auto [M, N, hint] : {std::tuple<int64_t, int64_t, const char*>{2, 9000, ""},
                            {4, 33, ""},
                            {2, 9000, "pipeline=2"},
                            {3, 4099, "pipeline=2,window=1"}}) {
    env.set(hint);
    ProblemSpec ps;
    ps.kernel = "custom_rows";
    ps.shapes = {{"M", M}, {"N", N}};
    ps.inputs["a"] = decays(DType::f32, {M, N}, seed++);
    ps.seed = seed++;
    Problem p = make_problem(module(), ps);
    emu::expect_emulated_matches_reference(p, fmt::format("custom_rows M={} N={} {}", M, N, hint));
    if (HasFailure()) return;
  }
}

// The schedule's knobs (KDSL_SCAN_SCHEDULE): a look-back window of 1 and 2 tiles (several windows
// per look-back), the pipelined loop, other tile shapes, 16-byte accesses of several rows (D = 24
// is a multiple of every VR tried).
TEST_F(ScanEmu, ScheduleVariants) {
  testing::ScanScheduleEnv env("");
  uint64_t seed = 400;
  std::vector<const char*> hints = {"window=1",
                                    "window=2,pipeline=1",
                                    "pipeline=1",
                                    "t=2,lp=4,wp=4",
                                    "vr=4",
                                    "vr=4,pipeline=1",
                                    "lp=1",
                                    "vr=2,lp=2,t=4,pipeline=1",
                                    "pipeline=2",
                                    "vr=4,pipeline=2,ctas=2",
                                    "window=1,vr=2,lp=2,t=4,pipeline=2",
                                    "packed=0",
                                    "packed=0,window=2,pipeline=1"};
  // Under AddressSanitizer (the sanitized CI build, where this test took 15 minutes) one hint per
  // code path: the emulated kernels are compiled without the sanitizer, so the other hints add
  // only time there.
  if (kAsan) hints = {"vr=4", "pipeline=2", "packed=0,window=2,pipeline=1"};
  for (const char* hint : hints) {
    env.set(hint);
    for (const char* kernel : {"recurrence", "recurrence_bwd"}) {
      Problem p = recurrence_problem(kernel, seed);
      emu::expect_emulated_matches_reference(p, fmt::format("{} with {}", kernel, hint));
      if (HasFailure()) return;
    }
  }
}

// Bool tensors as scan inputs (1-byte elements: their loads, zero fill and rescanning; `not` on
// them), along a middle axis (16-byte accesses of 2 rows with D even, element accesses with D odd)
// and the last.
TEST_F(ScanEmu, BoolInputs) {
  testing::ScanScheduleEnv env("");
  uint64_t seed = 600;
  for (const char* hint : {"", "rescan=1"}) {
    env.set(hint);
    for (DType t : {DType::f32, DType::bf16}) {
      for (auto [b, l, d] : {std::tuple<int64_t, int64_t, int64_t>{2, 700, 24}, {3, 333, 5}}) {
        ProblemSpec ps;
        ps.kernel = "masked_mid";
        ps.binding = {t};
        ps.shapes = {{"B", b}, {"L", l}, {"D", d}};
        ps.seed = seed++;
        Problem p = make_problem(module(), ps);
        emu::expect_emulated_matches_reference(
            p, fmt::format("masked_mid {} ({}, {}, {}) with '{}'", dtype_name(t), b, l, d, hint));
        if (HasFailure()) return;
      }
    }
  }
  ProblemSpec ps;
  ps.kernel = "masked_rows";
  ps.shapes = {{"M", 3}, {"N", 5000}};
  ps.seed = seed;
  Problem p = make_problem(module(), ps);
  emu::expect_emulated_matches_reference(p, "masked_rows M=3 N=5000");
}

// Source of kernels scanning an n-tuple of f32 (even components summed, odd ones by max), along a
// middle axis (wide_mid) and the last (wide_rows); each output weighs the components differently,
// so a component mixed up with another shows.
std::string wide_tuple_source(int n) {
  std::vector<std::string> a, b, combined, values, names, weighted;
  for (int i = 0; i < n; ++i) {
    a.push_back(fmt::format("a{}", i));
    b.push_back(fmt::format("b{}", i));
    combined.push_back(i % 2 == 0 ? fmt::format("a{0} + b{0}", i)
                                  : fmt::format("max(a{0}, b{0})", i));
    values.push_back(fmt::format("X * {}.0 + {}.0", i + 1, i % 5));
    names.push_back(fmt::format("s{}", i));
    weighted.push_back(fmt::format("s{} * {}.0", i, i % 7 + 1));
  }
  auto join = [](const std::vector<std::string>& v) {
    return fmt::format("{}", fmt::join(v, ", "));
  };
  auto with = [&](const std::string& x) {
    std::string r = join(values);
    for (size_t at = r.find('X'); at != std::string::npos; at = r.find('X', at + x.size()))
      r.replace(at, 1, x);
    return r;
  };
  return fmt::format(R"(
def wide_op(left, right):
    {0} = left
    {1} = right
    return {2}


@kernel
def wide_mid(x: Tensor[f32, (B, L, D)], *, y: Out[f32, (B, L, D)], z: Out[f32, (B, L, D)]):
    for b, d in parallel(B, D):
        {3} = scan(wide_op, ({4}))
        y[b, :, d] = {5}
        z[b, :, d] = s{7}


@kernel
def wide_rows(x: Tensor[f32, (M, N)], *, y: Out[f32, (M, N)], z: Out[f32, (M, N)]):
    for m in parallel(M):
        {3} = scan(wide_op, ({6}), reverse=True)
        y[m, :] = {5}
        z[m, :] = s{7}
)",
                     join(a), join(b), join(combined), join(names), with("x[b, :, d]"),
                     fmt::format("{}", fmt::join(weighted, " + ")), with("x[m, :]"), n - 1);
}

// Scans whose combine carries many values: the default tile would hold more than the 48 KiB of
// static shared memory (a 24-tuple of f32 along a middle axis, 48 values along a short last axis),
// so the scheduler gives up warps (choose_scan_schedule's fit_shared_memory) and the kernels
// still match the interpreter, with several chunks (the look-back's window of wide states) and one.
TEST_F(ScanEmu, WideTupleStatesFitSharedMemory) {
  testing::ScanScheduleEnv env("");
  uint64_t seed = 700;
  for (int n : {24, 48}) {
    auto fe = run_front_end(std::make_shared<const SourceFile>("wide.kdsl", wide_tuple_source(n)));
    for (auto [kernel, shape] : {std::pair<const char*, std::map<std::string, int64_t>>{
                                     "wide_mid", {{"B", 2}, {"L", 300}, {"D", 6}}},
                                 {"wide_rows", {{"M", 5}, {"N", 16}}},
                                 {"wide_rows", {{"M", 3}, {"N", 3000}}}}) {
      ProblemSpec ps;
      ps.kernel = kernel;
      ps.shapes = shape;
      ps.seed = seed++;
      Problem p = make_problem(fe, ps);
      emu::expect_emulated_matches_reference(p, fmt::format("{} with {} values", kernel, n));
      if (HasFailure()) return;
    }
  }
}

// Sums along the sequence of a scan's result, scaled by values the same along it (a constant, a
// per-channel weight, a parameter, nested, a division) and stored as column reductions (Out and
// InOut) or into elements (=, +=, mean, a cast to the tensor's 16-bit type; an InOut element
// overwritten): each thread's tile partial is scaled (Planner::scaled_sum, found by a new-user
// test: dl[d] += 2.0 * sum(c) was refused). Forward and reverse scans, several chunks (a partial
// last one) and one, 16-byte and element accesses, against the interpreter.
constexpr const char* kScaledSums = R"(
@kernel
def scaled[T: (f32, bf16)](x: Tensor[T, (B, L, D)], w: Tensor[f32, (D,)], r: Tensor[f32, (B, D)], *,
                           y: Out[T, (B, L, D)], dl: Out[f32, (D,)], dk: InOut[f32, (D,)],
                           s: Out[T, (B, D)], t: Out[f32, (B, D)], u: InOut[f32, (B, D)],
                           mn: Out[f32, (B, D)], k: f32 = 0.75):
    for b, d in parallel(B, D):
        c = cumsum(f32(x[b, :, d]))
        y[b, :, d] = T(c)
        dl[d] += 2.0 * sum(c * w[d])
        dk[d] += (sum(c) * w[d]) / (k + abs(r[b, d]))
        s[b, d] = T(sum(c - 1.0) * k)
        t[b, d] += sum(c * c) / 64.0
        u[b, d] = w[d] * sum(c)
        mn[b, d] = mean(c * w[d])


@kernel
def scaled_rows(x: Tensor[f32, (M, N)], v: Tensor[f32, (M,)], *, y: Out[f32, (M, N)], s: Out[f32, (M,)],
                 dl: Out[f32, (1,)]):
    for m in parallel(M):
        c = cumsum(x[m, :], reverse=True)
        y[m, :] = c
        s[m] = sum(c) / (abs(v[m]) + 1.0)
        dl[0] += 0.5 * sum(c)


@kernel
def scaled_more[T: (f32, bf16)](x: Tensor[T, (B, L, D)], w: Tensor[f32, (D,)], *,
                                u: InOut[f32, (B, D)], ub: InOut[T, (B, D)], sb: Out[T, (B, D)],
                                n: Out[f32, (D,)], r: Out[f32, (B, D)], k: f32 = 0.75):
    for b, d in parallel(B, D):
        c = cumsum(f32(x[b, :, d]), reverse=True)
        r[b, d] = u[b, d] * 2.0
        u[b, d] += w[d] * sum(c)
        ub[b, d] += sum(c) * k
        sb[b, d] += T(sum(c * c) * k)
        n[d] += -sum(c) / k


@kernel
def int_sums(x: Tensor[i32, (B, L, D)], *, s: Out[i64, (B, D)], dl: Out[i64, (D,)],
             u: InOut[i64, (B, D)]):
    for b, d in parallel(B, D):
        c = cumsum(x[b, :, d])
        s[b, d] = sum(c)
        dl[d] += -sum(c)
        u[b, d] += sum(c)


@kernel
def complex_sums(x: Tensor[c64, (B, L, D)], *, s: Out[c64, (B, D)], dl: Out[c64, (D,)]):
    for b, d in parallel(B, D):
        c = cumsum(x[b, :, d])
        s[b, d] = -sum(c)
        dl[d] += sum(c)
)";

TEST_F(ScanEmu, ScaledSumsOfAScanAreStored) {
  testing::ScanScheduleEnv env("");
  auto fe = run_front_end(std::make_shared<const SourceFile>("scaled.kdsl", kScaledSums));
  uint64_t seed = 800;
  for (DType t : {DType::f32, DType::bf16}) {
    for (auto [b, l, d] :
         {std::tuple<int64_t, int64_t, int64_t>{2, 700, 24}, {3, 333, 5}, {1, 40, 16}}) {
      ProblemSpec ps;
      ps.kernel = "scaled";
      ps.binding = {t};
      ps.shapes = {{"B", b}, {"L", l}, {"D", d}};
      ps.seed = seed++;
      Problem p = make_problem(fe, ps);
      emu::expect_emulated_matches_reference(
          p, fmt::format("scaled {} ({}, {}, {})", dtype_name(t), b, l, d));
      if (HasFailure()) return;
    }
  }
  for (auto [m, n] : {std::pair<int64_t, int64_t>{3, 5000}, {5, 7}}) {
    ProblemSpec ps;
    ps.kernel = "scaled_rows";
    ps.shapes = {{"M", m}, {"N", n}};
    ps.seed = seed++;
    Problem p = make_problem(fe, ps);
    emu::expect_emulated_matches_reference(p, fmt::format("scaled_rows {} x {}", m, n));
    if (HasFailure()) return;
  }
}

// The forms a second new-user test found refused: += into an InOut element (old + the sum: the
// follow-up adds the old value; the tiles may read the element too, as r does), a cast to the
// tensor's type with +=, a negated sum, and unscaled sums of integers and complex values stored
// into elements (exact, or as column reductions' partials are). Reverse scans, several chunks and
// one, f32 and bf16.
TEST_F(ScanEmu, SumsOfAScanIntoInOutElementsNegatedIntegerAndComplex) {
  testing::ScanScheduleEnv env("");
  auto fe = run_front_end(std::make_shared<const SourceFile>("scaled.kdsl", kScaledSums));
  uint64_t seed = 900;
  for (auto [b, l, d] :
       {std::tuple<int64_t, int64_t, int64_t>{2, 700, 24}, {3, 333, 5}, {1, 40, 16}}) {
    for (const char* kernel : {"scaled_more", "int_sums", "complex_sums"}) {
      for (DType t : {DType::f32, DType::bf16}) {
        const bool generic = std::string(kernel) == "scaled_more";
        if (!generic && t != DType::f32) continue;
        ProblemSpec ps;
        ps.kernel = kernel;
        if (generic) ps.binding = {t};
        ps.shapes = {{"B", b}, {"L", l}, {"D", d}};
        ps.seed = seed++;
        Problem p = make_problem(fe, ps);
        emu::expect_emulated_matches_reference(
            p, fmt::format("{} {} ({}, {}, {})", kernel, dtype_name(t), b, l, d));
        if (HasFailure()) return;
      }
    }
  }
}

// The stdlib middle-axis scan kernel `name` (real dtypes), if there is one.
std::optional<testing::ScanKernel> stdlib_middle_kernel(const std::string& name) {
  for (const testing::ScanKernel& c : testing::stdlib_scan_kernels()) {
    if (c.kernel == name && !c.complex && c.middle) return c;
  }
  return std::nullopt;
}

// The rescanning tile (ScanSchedule::rescan, the default for 16-bit light middle-axis scans, or
// KDSL_SCAN_SCHEDULE rescan=1: phase B scans each thread's elements again from the prefix before
// it) on stdlib kernels with inclusive, exclusive and reverse scans, an initial state, shifted
// inputs and a column reduction (rg_lru_bwd's dLambda); 16-byte accesses of 2 rows (D even) with
// several chunks, and element accesses (D odd).
TEST_F(ScanEmu, RescanningTilesMatchTheInterpreter) {
  testing::ScanScheduleEnv env("");
  std::vector<std::pair<std::string, DType>> cases = {{"cumsum_mid", DType::bf16},
                                                      {"cumsum_reverse_exclusive_mid", DType::bf16},
                                                      {"linear_recurrence", DType::bf16},
                                                      {"linear_recurrence_h0_bwd", DType::bf16},
                                                      {"linear_recurrence_bwd", DType::f32},
                                                      {"cumprod_exclusive_mid_bwd", DType::f16},
                                                      {"rg_lru_bwd", DType::bf16}};
  if (kAsan) cases.resize(2);
  uint64_t seed = 500;
  // (16-bit tensors rescan by default: rescan=0 keeps the local prefixes' tile tested there.)
  for (const char* hint : {"rescan=1", "rescan=1,vr=2,lp=2,t=4", "rescan=0"}) {
    env.set(hint);
    for (const auto& [name, dtype] : cases) {
      std::optional<testing::ScanKernel> k = stdlib_middle_kernel(name);
      ASSERT_TRUE(k) << name;
      auto fe = testing::front_end(k->file);
      for (auto [b, l, d] : {std::tuple<int64_t, int64_t, int64_t>{2, 700, 24}, {3, 333, 5}}) {
        Problem p = testing::scan_problem(fe, *k, dtype, b, l, d, seed++);
        emu::expect_emulated_matches_reference(
            p, fmt::format("{} {} ({}, {}, {}) with {}", name, dtype_name(dtype), b, l, d, hint));
        if (HasFailure()) return;
      }
    }
  }
}

// Phase A's transcendental results kept for phase B (ScanSchedule::keep_math: RG-LRU backward's
// sigmoid and exp of gate_a, computed by phase A at t + 1 and read by phase B one step on, and
// computed again at each thread's last step): the default layouts (bf16: 2-row accesses, D even,
// several chunks and a partial tile; element accesses, D odd; f32), lanes along the positions,
// a rescanning tile (phase B reads them at the same step), and keep=0.
TEST_F(ScanEmu, KeptPhaseAValuesMatchTheInterpreter) {
  testing::ScanScheduleEnv env("");
  std::optional<testing::ScanKernel> k = stdlib_middle_kernel("rg_lru_bwd");
  ASSERT_TRUE(k);
  auto fe = testing::front_end(k->file);
  uint64_t seed = 1300;
  for (const char* hint : {"", "keep=1,lp=2,t=4,vr=2", "keep=1,rescan=1", "keep=0"}) {
    env.set(hint);
    for (DType dtype : {DType::bf16, DType::f32}) {
      for (auto [b, l, d] : {std::tuple<int64_t, int64_t, int64_t>{2, 700, 24}, {3, 333, 5}}) {
        Problem p = testing::scan_problem(fe, *k, dtype, b, l, d, seed++);
        emu::expect_emulated_matches_reference(
            p,
            fmt::format("rg_lru_bwd {} ({}, {}, {}) with '{}'", dtype_name(dtype), b, l, d, hint));
        if (HasFailure()) return;
      }
    }
  }
}

// The default 64-step tile of rescanned 16-bit cumsum-like kernels (sequences of at least 8192):
// tiles of 1024 positions, a partial last one, 2-row accesses (D even) and element accesses.
TEST_F(ScanEmu, SixtyFourStepTilesMatchTheInterpreter) {
  testing::ScanScheduleEnv env("");
  uint64_t seed = 900;
  for (const auto& [name, dtype] : std::vector<std::pair<std::string, DType>>{
           {"cumsum_mid", DType::bf16}, {"cumprod_reverse_exclusive_mid", DType::f16}}) {
    std::optional<testing::ScanKernel> k = stdlib_middle_kernel(name);
    ASSERT_TRUE(k) << name;
    auto fe = testing::front_end(k->file);
    for (auto [b, l, d] : {std::tuple<int64_t, int64_t, int64_t>{1, 9000, 4}, {1, 8200, 3}}) {
      Problem p = testing::scan_problem(fe, *k, dtype, b, l, d, seed++);
      ASSERT_NE(p.ir.name.find(name), std::string::npos);
      emu::expect_emulated_matches_reference(
          p, fmt::format("{} {} ({}, {}, {})", name, dtype_name(dtype), b, l, d));
      if (HasFailure()) return;
    }
  }
}

// Every stdlib scan kernel, f32, at a shape with several chunks and odd sizes and at a short one;
// the recurrences in bf16 too.
class StdlibScanEmu : public ::testing::TestWithParam<testing::ScanKernel> {};

TEST_P(StdlibScanEmu, MatchesTheInterpreter) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  const testing::ScanKernel& k = GetParam();
  auto fe = testing::front_end(k.file);
  std::vector<DType> dtypes = {DType::f32};
  if (k.file != "stdlib/scan.kdsl" && !k.complex) dtypes.push_back(DType::bf16);
  if (k.file == "stdlib/linear_recurrence.kdsl" && !k.complex) dtypes.push_back(DType::f16);
  uint64_t seed = 1;
  for (DType t : dtypes) {
    for (auto [b, l, d] :
         {std::tuple<int64_t, int64_t, int64_t>{2, k.middle ? 333 : 9000, 5}, {3, 7, 4}}) {
      Problem p = testing::scan_problem(fe, k, t, b, l, d, seed++);
      emu::expect_emulated_matches_reference(
          p, fmt::format("{} {} ({}, {}, {})", k.kernel, dtype_name(k.complex ? DType::c64 : t), b,
                         l, d));
      if (HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stdlib, StdlibScanEmu, ::testing::ValuesIn(testing::stdlib_scan_kernels()),
                         [](const auto& info) {
                           return info.param.kernel + (info.param.complex ? "_c64" : "");
                         });

}  // namespace
}  // namespace kdsl

// Every stdlib normalization kernel's generated CUDA (the row schedules: one CTA per row and the
// persistent grid, column reductions through per-CTA partials and the follow-up kernel) run on
// the CPU emulation of cuda_emu.h and compared with the reference interpreter, so a codegen or
// scheduling regression shows without a GPU. f32 and bf16 at row lengths with and without a tail;
// a grid capped below the row count makes the persistent CTAs loop.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <random>
#include <tuple>

#include "gpu_test_util.h"
#include "norm_cases.h"
#include "scan_emu_util.h"
#include "src/compiler.h"
#include "src/schedule.h"

namespace kdsl {
namespace {

class RowsEmu : public ::testing::TestWithParam<testing::KernelCase> {};

TEST_P(RowsEmu, MatchesTheInterpreter) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  const testing::KernelCase& kc = GetParam();
  auto fe = testing::front_end(kc.file);
  uint64_t seed = 11;
  // Row lengths with a tail (7, 1000) and without (4096), in a 32-bit and a packed 16-bit dtype.
  for (auto [t, n] : {std::pair{DType::f32, int64_t{1000}}, std::pair{DType::bf16, int64_t{7}},
                      std::pair{DType::bf16, int64_t{4096}}}) {
    for (int64_t m : {int64_t{1}, int64_t{37}}) {
      ProblemSpec ps;
      ps.kernel = kc.kernel;
      ps.binding = {t};
      ps.shapes = {{"M", m}, {"N", n}};
      ps.seed = seed++;
      ps.inputs = testing::forward_tensors(fe, ps, kc.forward);
      Problem p = make_problem(fe, ps);
      emu::expect_emulated_matches_reference(
          p, fmt::format("{} {} M={} N={}", kc.kernel, dtype_name(t), m, n), /*grid_cap=*/5);
      if (HasFailure()) return;
    }
  }
}

struct HintedCase {
  DType dtype;
  int64_t n;
  const char* hint;
};

// Runs `kc` at M = 37 under each case's schedule hint on the emulation (a persistent grid of at
// most 8 CTAs, 4 at once) against the interpreter; `check` inspects each generated kernel.
void expect_hinted_schedules(
    const testing::KernelCase& kc, uint64_t seed, std::initializer_list<HintedCase> cases,
    bool cache_rows, const std::function<void(const GeneratedKernel&, const char*)>& check) {
  auto fe = testing::front_end(kc.file);
  for (const HintedCase& c : cases) {
    ProblemSpec ps;
    ps.kernel = kc.kernel;
    ps.binding = {c.dtype};
    ps.shapes = {{"M", 37}, {"N", c.n}};
    ps.seed = seed++;
    ps.inputs = testing::forward_tensors(fe, ps, kc.forward);
    Problem p = make_problem(fe, ps);
    ScheduleHint h = ScheduleHint::parse(c.hint);
    if (cache_rows) h.cache_rows = true;
    check(generate(p.ir, p.spec, DeviceTarget{}, h), c.hint);
    emu::expect_emulated_matches_reference(
        p, fmt::format("{} {} M=37 N={} {}", kc.kernel, dtype_name(c.dtype), c.n, c.hint),
        /*grid_cap=*/8, /*concurrent=*/4, h);
    if (::testing::Test::HasFailure()) return;
  }
}

// A row split over a thread-block cluster (rows.cluster): the row's reductions combine the CTAs'
// partial states through distributed shared memory, each CTA keeps its own columns' accumulators.
// Two CTAs of 256 threads per row (bf16 N = 4096); four CTAs of 64 threads per row with four rows
// per cluster and a tail (f32 N = 1000); persistent grids of two clusters, so clusters loop; the
// column accumulators of backward kernels in registers on a cluster (the default at bf16
// N = 32768); eight CTAs of 256 threads per row, whose 64 warp partials (more than a warp's
// lanes) every CTA combines with a tail (f32 N = 8200; LayerNorm backward, pushed to every CTA,
// and softmax backward, the CTA totals read back: 2048 threads per row are slow to emulate).
TEST_P(RowsEmu, ClusterSchedules) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  auto check = [](const GeneratedKernel& gen, const char* hint) {
    EXPECT_EQ(gen.plan.schedule, "rows.cluster") << hint;
    EXPECT_NE(gen.source.find("__cluster_dims__"), std::string::npos) << hint;
  };
  expect_hinted_schedules(GetParam(), 71,
                          {{DType::bf16, 4096, "cluster=2,group=512"},
                           {DType::f32, 1000, "cluster=4,group=256"},
                           {DType::f32, 1000, "cluster=2,group=256,persistent=0"},
                           {DType::bf16, 4096, "cluster=4,group=512,smem_columns=0"}},
                          /*cache_rows=*/false, check);
  const std::string kernel = GetParam().kernel;
  if (kernel == "layer_norm_bwd" || kernel == "softmax_bwd") {
    expect_hinted_schedules(GetParam(), 75, {{DType::f32, 8200, "cluster=8,group=2048"}},
                            /*cache_rows=*/false, check);
  }
}

// The pushed partials' variants (RowSchedule::push): lane q of each warp pushing to CTA q, the
// states of a point's reductions packed into one struct (LayerNorm's Welford state, softmax's two
// points, LayerNorm backward's two sums), and both; on clusters of 2 and 4 with a tail, and, for
// LayerNorm backward, 64 warp partials a row (more than a warp's lanes combine at once).
TEST_P(RowsEmu, PushedPartialsVariants) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  const Specialization spec{{DType::f32}, 1000, ~0u, ~0u};
  const bool reductions = row_reductions(
      lower_specialized(*testing::front_end(GetParam().file), GetParam().kernel, spec));
  auto check = [reductions](const GeneratedKernel& gen, const char* hint) {
    const std::string h = hint;
    const int push = h[h.find("push=") + 5] - '0';
    const bool packed = gen.source.find("kdsl_push_packed(&redp") != std::string::npos;
    const bool lanes = gen.source.find("if ((tl & 31) < K) {") != std::string::npos;
    EXPECT_EQ(packed, reductions && (push & 2)) << hint;
    EXPECT_EQ(lanes, reductions && (push & 1)) << hint;
  };
  expect_hinted_schedules(GetParam(), 171,
                          {{DType::bf16, 4096, "cluster=2,group=512,push=1"},
                           {DType::f32, 1000, "cluster=4,group=256,push=2"},
                           {DType::bf16, 4096, "cluster=4,group=512,smem_columns=0,push=3"}},
                          /*cache_rows=*/false, check);
  if (std::string(GetParam().kernel) == "layer_norm_bwd") {
    expect_hinted_schedules(GetParam(), 175, {{DType::f32, 8200, "cluster=8,group=2048,push=3"}},
                            /*cache_rows=*/false, check);
  }
}

// The two combines of a row reduction's warps' partials: in warp order without a cluster (8
// warps per row), the butterfly on a cluster of 2 CTAs (2 warps per CTA, a tail). Each generated
// kernel has the combine it was asked for; on the cluster, kernels with column or row reductions
// push every warp's partial to every CTA instead (the hint does not apply).
TEST_P(RowsEmu, CombinesOfTheWarps) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  const Specialization spec{{DType::f32}, 1000, ~0u, ~0u};
  const bool reductions = row_reductions(
      lower_specialized(*testing::front_end(GetParam().file), GetParam().kernel, spec));
  expect_hinted_schedules(
      GetParam(), 151,
      {{DType::bf16, 4096, "butterfly=0,group=256"},
       {DType::f32, 1000, "butterfly=1,cluster=2,group=128"}},
      /*cache_rows=*/false, [reductions](const GeneratedKernel& gen, const char* hint) {
        const bool loop = gen.source.find("for (int w = 1; w <") != std::string::npos;
        if (gen.source.find("[buf][group][") == std::string::npos) return;  // no row reduction
        EXPECT_EQ(loop, std::string(hint).starts_with("butterfly=0")) << hint;
        const bool pushed = gen.source.find("++q) kdsl_push_async(&red") != std::string::npos;
        EXPECT_EQ(pushed, gen.plan.cluster > 1 && (!gen.plan.workspaces.empty() || reductions))
            << hint;
      });
}

// Rows staged in shared memory (rows.stage): each thread copies its chunks of the rows ahead
// with cp.async and reads them back; rows past the end and chunks past N are zero-filled. A
// persistent grid of 8 CTAs over 37 rows, so stages wrap around; a tail (f32 N = 1000); a
// cluster, and a cluster with the column accumulators in registers (the default of 16-bit
// backward kernels at N = 32768).
TEST_P(RowsEmu, StagedRows) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  expect_hinted_schedules(
      GetParam(), 131,
      {{DType::bf16, 4096, "persistent=1,stage=3"},
       {DType::f32, 1000, "persistent=1,group=64,stage=2"},
       {DType::bf16, 4096, "persistent=1,cluster=2,group=512,stage=4"},
       {DType::bf16, 4096, "persistent=1,cluster=4,group=512,smem_columns=0,stage=2"}},
      /*cache_rows=*/true, [](const GeneratedKernel& gen, const char* hint) {
        EXPECT_NE(gen.source.find("kdsl_cp_wait_group<STAGES - 1>()"), std::string::npos) << hint;
      });
}

// Staged rows read again from shared memory by each phase that uses them (reread=1): stages that
// wrap around on a persistent grid of 8 CTAs over 37 rows, a tail (f32 N = 1000), and a cluster of
// 2 CTAs with the column accumulators in registers and the packed pushes (the layout it is for:
// LayerNorm backward bf16 N = 32768 on 2 CTAs of 512). Kernels whose rows are not staged (no
// 16-byte row loads) say that the hint does not apply.
TEST_P(RowsEmu, StagedRowsReadAgain) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  expect_hinted_schedules(
      GetParam(), 191,
      {{DType::bf16, 4096, "persistent=1,stage=3,reread=1"},
       {DType::f32, 1000, "persistent=1,group=64,stage=2,reread=1"},
       {DType::bf16, 4096,
        "persistent=1,cluster=2,group=256,smem_columns=0,stage=2,reread=1,push=3"}},
      /*cache_rows=*/true, [](const GeneratedKernel& gen, const char* hint) {
        const bool applies =
            gen.source.find("(reread=1): they take no registers") != std::string::npos;
        if (!applies) {
          EXPECT_NE(gen.source.find("reread=1 does not apply"), std::string::npos) << hint;
          return;
        }
        // Every staged row is read in the phases' chunk loops, none into a row array.
        EXPECT_NE(gen.source.find("threadIdx.x) * 16), Lc"), std::string::npos) << hint;
        EXPECT_EQ(gen.source.find("threadIdx.x) * 16), &L"), std::string::npos) << hint;
      });
}

// Streamed rows (each phase re-reads the row, the weights too) with the chunk loop rolled 1 or 2
// chunks at a time (unroll): 8 chunks per thread at bf16 N = 4096 on 64 threads, 8 with a tail at
// f32 N = 1000 on 32 threads (the last chunk partly past N), one CTA per row and a persistent grid.
TEST_P(RowsEmu, StreamedRowsRolledInSteps) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  expect_hinted_schedules(
      GetParam(), 171,
      {{DType::bf16, 4096, "cache_rows=0,cache_invariant=0,group=64,persistent=0,unroll=1"},
       {DType::f32, 1000, "cache_rows=0,cache_invariant=0,group=32,unroll=2"}},
      /*cache_rows=*/false, [](const GeneratedKernel& gen, const char* hint) {
        const std::string u = std::string(hint).ends_with("unroll=1") ? "1" : "2";
        EXPECT_NE(gen.source.find("#pragma unroll " + u + "\n"), std::string::npos) << hint;
      });
}

// Sums of exp(x - max) online in the max's pass (OnlineSum, softmax and log_softmax): streamed
// rows with a tail on 64 threads (16 chunks), register-resident rows on request
// (online=1) on one CTA per row and on a persistent grid that loops.
TEST_P(RowsEmu, OnlineSums) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  const Specialization spec{{DType::f32}, 1000, ~0u, ~0u};
  if (online_sums(lower_specialized(*testing::front_end(GetParam().file), GetParam().kernel, spec))
          .empty()) {
    GTEST_SKIP() << "no sum of exp(x - c(max(x)))";
  }
  expect_hinted_schedules(
      GetParam(), 181,
      {{DType::f32, 1000, "cache_rows=0,group=64,online=1"},
       {DType::bf16, 4096, "online=1"},
       {DType::f32, 1000, "online=1,persistent=1,group=128"}},
      /*cache_rows=*/false, [](const GeneratedKernel& gen, const char* hint) {
        EXPECT_NE(gen.source.find("kdsl_op_sumexp<kdsl_exp_fn>{}"), std::string::npos) << hint;
      });
}

// LayerNorm backward f32 with 3 chunks per thread at 1024 threads takes 512 threads with the next
// row prefetched (a measured rule); at N = 10000 the last chunk has a tail. A persistent grid of
// 8 CTAs over 37 rows, so each CTA prefetches past its last row.
TEST(RowsEmuRules, LayerNormBackwardF32PrefetchWithATail) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  auto fe = testing::front_end("stdlib/layer_norm.kdsl");
  ProblemSpec ps;
  ps.kernel = "layer_norm_bwd";
  ps.binding = {DType::f32};
  ps.shapes = {{"M", 37}, {"N", 10000}};
  ps.seed = 171;
  ps.inputs = testing::forward_tensors(fe, ps, "layer_norm");
  Problem p = make_problem(fe, ps);
  const RowSchedule s = choose_row_schedule(p.ir, p.spec, DeviceTarget{});
  ASSERT_EQ(s.group, 512);
  ASSERT_TRUE(s.prefetch);
  emu::expect_emulated_matches_reference(p, "layer_norm_bwd f32 M=37 N=10000", /*grid_cap=*/8,
                                         /*concurrent=*/4);
}

// `kdsl run --verify` and `kdsl tune` compare a column sum (dw, a sum over every row) with the
// tolerance of running sums: its f32 error follows the size of its terms, not of the value,
// which cancels (RMSNorm backward f32 at 4096 x 32768 on the H200: 3e-5 off on values of 0.02
// summed from 4096 terms of about 0.6). Row outputs get row_tolerance: in f32 the same.
TEST(Verify, ColumnSumsUseTheToleranceOfRunningSums) {
  auto fe = testing::front_end("stdlib/rms_norm.kdsl");
  ProblemSpec ps;
  ps.kernel = "rms_norm_bwd";
  ps.binding = {DType::f32};
  ps.shapes = {{"M", 3}, {"N", 64}};
  Problem p = make_problem(fe, ps);
  int dx = -1, dw = -1;
  for (size_t t = 0; t < p.ir.tensors.size(); ++t) {
    if (p.ir.tensors[t].name == "dx") dx = static_cast<int>(t);
    if (p.ir.tensors[t].name == "dw") dw = static_cast<int>(t);
  }
  ASSERT_GE(dx, 0);
  ASSERT_GE(dw, 0);
  HostTensor sums(DType::f32, {64});
  for (int64_t i = 0; i < 64; ++i) sums.set(i, i % 2 ? 50.0 : -50.0);  // root mean square 50
  const Tolerance col = output_tolerance(p, static_cast<size_t>(dw), sums);
  EXPECT_DOUBLE_EQ(col.rtol, tolerance_for(DType::f32).rtol);
  EXPECT_NEAR(col.atol, 1e-4 * 0.1 * 50, 1e-12);
  const Tolerance row = output_tolerance(p, static_cast<size_t>(dx), sums);
  EXPECT_NEAR(row.atol, 1e-4 * 0.1 * 50, 1e-12);
  EXPECT_DOUBLE_EQ(row.rtol, tolerance_for(DType::f32).rtol);
  HostTensor small(DType::f32, {64});
  for (int64_t i = 0; i < 64; ++i) small.set(i, 1e-4);  // f32 keeps the fixed atol as a floor
  EXPECT_DOUBLE_EQ(output_tolerance(p, static_cast<size_t>(dx), small).atol,
                   tolerance_for(DType::f32).atol);

  // Still tight enough to catch one row's contribution missing from a column sum: the real
  // reference dw of 512 rows, against itself without row 7's term dy * x * rstd in one column.
  ProblemSpec rs = ps;
  rs.shapes = {{"M", 512}, {"N", 64}};
  rs.seed = 5;
  rs.inputs = testing::forward_tensors(fe, rs, "rms_norm");
  Problem rp = make_problem(fe, rs);
  const std::vector<HostTensor> ref = run_reference(rp);
  const HostTensor& want = ref[static_cast<size_t>(dw)];
  const Tolerance tol = output_tolerance(rp, static_cast<size_t>(dw), want);
  EXPECT_GT(tol.atol, tolerance_for(DType::f32).atol);
  EXPECT_TRUE(compare(want, want, tol).ok);
  auto in = [&](const char* name) -> const HostTensor& {
    for (size_t t = 0; t < rp.ir.tensors.size(); ++t)
      if (rp.ir.tensors[t].name == name) return rp.tensors[t];
    throw std::runtime_error(name);
  };
  int missed = 0;
  for (int64_t j = 0; j < 64; ++j) {
    HostTensor got = want;
    const double term = in("dy").get(7 * 64 + j) * in("x").get(7 * 64 + j) * in("rstd").get(7);
    if (std::fabs(term) < 0.5) continue;  // a row's typical term: |dy x rstd| of about 0.6
    got.set(j, want.get(j) - term);
    missed += !compare(got, want, tol).ok;
    EXPECT_FALSE(compare(got, want, tol).ok) << "column " << j << ", term " << term;
  }
  EXPECT_GT(missed, 0);
}

INSTANTIATE_TEST_SUITE_P(Stdlib, RowsEmu, ::testing::ValuesIn(testing::kKernels),
                         [](const auto& info) { return std::string(info.param.kernel); });

// LayerNorm's variance on rows whose mean is 10^4 times their spread (and a far outlier now and
// then as a thread's first value, the shift of its shifted sums): a one-pass sum(x^2) - sum(x)^2
// / n in f32 loses every digit here (its rounding error, about 6e-8 * 1e8 * n, exceeds the sum of
// squared deviations, about n), so rstd within 1e-4 of the float64 reference checks that the
// generated code does not cancel. (y is not compared: the f32 mean itself is off by up to half
// an ulp of 10^4, 5e-4, which y = (x - mu) * rstd * w + b carries.) f32 with a tail, and bf16
// rows with one and several chunks per thread.
TEST(RowsEmuNumerics, LayerNormVarianceOfRowsWithALargeMean) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  auto fe = testing::front_end("stdlib/layer_norm.kdsl");
  std::mt19937_64 rng(5);
  std::normal_distribution<double> spread(0.0, 1.0);
  for (auto [t, n, mean, scale] : {std::tuple{DType::f32, int64_t{1000}, 1e4, 1.0},
                                   std::tuple{DType::bf16, int64_t{4096}, 4096.0, 64.0},
                                   std::tuple{DType::bf16, int64_t{64}, 4096.0, 64.0}}) {
    const int64_t m = 3;
    HostTensor x(t, {m, n});
    for (int64_t i = 0; i < m * n; ++i) {
      x.set(i, i % 97 == 0 ? mean + 40 * scale : mean + scale * spread(rng));
    }
    ProblemSpec ps;
    ps.kernel = "layer_norm";
    ps.binding = {t};
    ps.shapes = {{"M", m}, {"N", n}};
    ps.seed = 201;
    ps.inputs = {{"x", x}};
    Problem p = make_problem(fe, ps);
    std::vector<HostTensor> ref = run_reference(p);
    std::vector<HostTensor> got = emu::run_emulated(p, /*grid_cap=*/5, /*concurrent=*/4, {});
    for (size_t k = 0; k < got.size(); ++k) {
      if (p.ir.tensors[k].name != "rstd") continue;
      for (int64_t i = 0; i < m; ++i) {
        EXPECT_NEAR(got[k].get(i), ref[k].get(i), 1e-4 * ref[k].get(i))
            << dtype_name(t) << " N=" << n << " row " << i;
      }
    }
  }
}

// The row groups of a CTA add their column partials in shared memory before one partial per CTA
// goes to the follow-up kernel (R = 8 at f32 N = 128, R = 2 with a tail at f32 N = 1000 and
// staged at bf16 N = 1024), and not where they would take more than 8 KiB (bf16 N = 512, R = 4):
// each generated kernel takes the path the rule says, and every one matches the interpreter.
TEST(RowsEmuColumns, RowGroupsCombineTheirPartials) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  for (const char* kernel : {"layer_norm_bwd", "rms_norm_bwd"}) {
    const testing::KernelCase& kc = *std::find_if(
        std::begin(testing::kKernels), std::end(testing::kKernels),
        [&](const testing::KernelCase& c) { return std::string(c.kernel) == kernel; });
    const bool ln = std::string(kernel) == "layer_norm_bwd";
    for (const HintedCase& c :
         {HintedCase{DType::f32, 128, ""}, HintedCase{DType::f32, 1000, ""},
          HintedCase{DType::bf16, 1024, ""}, HintedCase{DType::bf16, 512, ""}}) {
      const std::string what = fmt::format("{} {} N={}", kernel, dtype_name(c.dtype), c.n);
      // LayerNorm backward at bf16 N = 512: 3 x 512 x 2 partials of 4 bytes, over 8 KiB.
      const bool over = ln && c.n == 512;
      expect_hinted_schedules(
          kc, 301, {c}, /*cache_rows=*/false, [&](const GeneratedKernel& gen, const char*) {
            const bool combined = gen.source.find("gsum") != std::string::npos;
            EXPECT_EQ(combined, gen.plan.rows_per_cta > 1 && !over) << what;
            EXPECT_EQ(gen.plan.partials_per_cta, combined ? 1u : gen.plan.rows_per_cta) << what;
          });
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// A cluster row whose reductions are combined at two points of the row (the mean, then the
// variance around it) pushes each point's partials with st.async on an mbarrier of its own
// (kdsl_full[0] and kdsl_full[1]), with no cluster barrier per combine; with a column reduction,
// on a cluster of 2 CTAs, against the interpreter. Without column reductions too (the same
// kernel's row part, cs dropped), and LayerNorm's Welford states (three words each, pushed a word
// at a time).
TEST(RowsEmuColumns, ClusterRowsWithTwoCombinesPushOnAnMbarrierEach) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  static constexpr const char* kSource = R"(
@kernel
def centred_bwd[T: (f32, bf16)](x: Tensor[T, (M, N)], *, y: Out[T, (M, N)], cs: Out[T, (N,)]):
    for m in parallel(M):
        xf = f32(x[m, :])
        mu = mean(xf)
        v = mean((xf - mu) * (xf - mu))
        y[m, :] = T((xf - mu) * rsqrt(v + 1e-5))
        cs[:] += xf * v

@kernel
def centred[T: (f32, bf16)](x: Tensor[T, (M, N)], *, y: Out[T, (M, N)]):
    for m in parallel(M):
        xf = f32(x[m, :])
        mu = mean(xf)
        v = mean((xf - mu) * (xf - mu))
        y[m, :] = T((xf - mu) * rsqrt(v + 1e-5))
)";
  auto fe = run_front_end(std::make_shared<const SourceFile>("centred.kdsl", kSource));
  ProblemSpec ps;
  ps.kernel = "centred_bwd";
  ps.binding = {DType::f32};
  ps.shapes = {{"M", 37}, {"N", 1000}};
  ps.seed = 17;
  const ScheduleHint h = ScheduleHint::parse("cluster=2,group=128");
  for (const char* kernel : {"centred_bwd", "centred"}) {
    ps.kernel = kernel;
    Problem p = make_problem(fe, ps);
    const GeneratedKernel gen = generate(p.ir, p.spec, DeviceTarget{}, h);
    ASSERT_EQ(gen.plan.cluster, 2u) << kernel;
    EXPECT_NE(gen.source.find("&kdsl_full[1][buf], q);"), std::string::npos) << kernel;
    EXPECT_NE(gen.source.find("kdsl_mbar_wait(&kdsl_full[0][buf], kdsl_ph);"), std::string::npos)
        << kernel;
    emu::expect_emulated_matches_reference(p, fmt::format("{} f32 M=37 N=1000 cluster=2", kernel),
                                           8, 4, h);
  }
  auto ln = testing::front_end("stdlib/layer_norm.kdsl");
  ps.kernel = "layer_norm";
  ps.inputs.clear();
  Problem p = make_problem(ln, ps);
  const GeneratedKernel gen = generate(p.ir, p.spec, DeviceTarget{}, h);
  EXPECT_NE(gen.source.find("kdsl_mbar_wait(&kdsl_full[0][buf], kdsl_ph);"), std::string::npos);
  EXPECT_NE(gen.source.find("sizeof(kdsl_welford<float>)"), std::string::npos);
  emu::expect_emulated_matches_reference(p, "layer_norm f32 M=37 N=1000 cluster=2", 8, 4, h);
}

// bool tensors along the row are read and written in accesses of VEC bytes (kdsl_load /
// kdsl_store of kdsl_u8), not byte by byte: README's masked softmax and a kernel with a bool
// output, at VEC = 8 (bf16 N = 4096), 4 (f32 N = 1004), 2 (bf16 N = 1002) and 1 (bf16 N = 7),
// with random masks, against the interpreter.
TEST(RowsEmuBool, MasksAndBoolOutputsInVectorAccesses) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  static constexpr const char* kSource = R"(
@kernel
def masked_softmax[T: (f32, f16, bf16)](x: Tensor[T, (M, N)], mask: Tensor[bool, (M, N)],
                                        scale: f32 = 1.0, *, y: Out[T, (M, N)]):
    for m in parallel(M):
        s = where(mask[m, :], f32(x[m, :]) * scale, -inf)
        mx = max(s)
        e = exp(s - where(mx == -inf, 0.0, mx))
        total = sum(e)
        y[m, :] = T(e * where(total > 0.0, 1.0 / total, 0.0))

@kernel
def above_mean[T: (f32, bf16)](x: Tensor[T, (M, N)], keep: Tensor[bool, (M, N)],
                               *, y: Out[bool, (M, N)]):
    for m in parallel(M):
        xf = f32(x[m, :])
        y[m, :] = (xf > mean(xf)) != keep[m, :]
)";
  auto fe = run_front_end(std::make_shared<const SourceFile>("masked.kdsl", kSource));
  uint64_t seed = 41;
  for (const char* kernel : {"masked_softmax", "above_mean"}) {
    for (auto [t, n, vec] :
         {std::tuple{DType::bf16, int64_t{4096}, 8}, std::tuple{DType::f32, int64_t{1004}, 4},
          std::tuple{DType::bf16, int64_t{1002}, 2}, std::tuple{DType::bf16, int64_t{7}, 1}}) {
      ProblemSpec ps;
      ps.kernel = kernel;
      ps.binding = {t};
      ps.shapes = {{"M", 37}, {"N", n}};
      ps.seed = seed++;
      Problem p = make_problem(fe, ps);
      // Every tensor taken as 16-byte aligned, as rows padded to 16 bytes would be (row-major
      // rows of 1004 or 1002 bools are not, and a launch of them reads them element by element),
      // so that what is tested is the vector access of bool elements.
      p.spec.aligned_mask = p.spec.contiguous_mask = ~0u;
      const std::string what = fmt::format("{} {} N={}", kernel, dtype_name(t), n);
      const GeneratedKernel gen = generate(p.ir, p.spec, DeviceTarget{});
      ASSERT_NE(gen.source.find(fmt::format("VEC = {},", vec)), std::string::npos) << what;
      // The mask is tensor 1; the bool output of above_mean is tensor 2.
      const bool vector_access = vec > 1;
      EXPECT_EQ(gen.source.find("kdsl_load<VEC, false>(t1 + ") != std::string::npos, vector_access)
          << what;
      EXPECT_EQ(gen.source.find("*(t1 + ") == std::string::npos, vector_access) << what;
      if (std::string(kernel) == "above_mean") {
        EXPECT_EQ(gen.source.find("kdsl_store<VEC, false>(t2 + ") != std::string::npos,
                  vector_access)
            << what;
      }
      emu::expect_emulated_matches_reference(p, what);
      if (HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace kdsl

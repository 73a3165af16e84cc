// The expert hints push= (how a cluster row's warps push their reductions' partial states) and
// reread= (staged rows read from shared memory by each phase) on kernels of many reduction
// states (tests/data/row_states.kdsl), run on the CPU emulation of cuda_emu.h against the
// reference interpreter: seven reductions at one point (max, min, sum, argmax, argmin, an f64
// sum, var) then a sum of exponentials and a column reduction; i64 sums and maxima of i32 rows;
// f64 means, variances and argmax; reductions at three points of the row with two column
// reductions. Clusters of 2 to 8 CTAs with a tail, several rows per cluster, staged rows that
// wrap around on a persistent grid, and argmax/argmin rows full of ties, NaN and -inf.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "gpu_test_util.h"
#include "scan_emu_util.h"
#include "src/compiler.h"
#include "src/schedule.h"

namespace kdsl {
namespace {

struct Case {
  const char* kernel;
  DType dtype;
  int64_t n;
  const char* hint;
};

void expect_cases(std::initializer_list<Case> cases, bool ties) {
  auto fe = testing::front_end("tests/data/row_states.kdsl");
  uint64_t seed = 7;
  for (const Case& c : cases) {
    const int64_t m = 37;
    ProblemSpec ps;
    ps.kernel = c.kernel;
    ps.binding = {c.dtype};
    ps.shapes = {{"M", m}, {"N", c.n}};
    ps.seed = seed++;
    if (ties) {
      // Values 0, 1 and 2 (ties everywhere), a NaN in every fifth row, a row of 2 with its
      // maximum last, a row of -inf.
      HostTensor x(c.dtype, {m, c.n});
      for (int64_t i = 0; i < m * c.n; ++i) {
        const int64_t row = i / c.n, col = i % c.n;
        double v = static_cast<double>((i * 7919) % 3);
        if (row % 5 == 1 && col == c.n / 2) v = NAN;
        if (row % 5 == 2) v = col == c.n - 1 ? 5.0 : 2.0;
        if (row % 5 == 3) v = -INFINITY;
        x.set(i, v);
      }
      ps.inputs = {{"x", x}};
    }
    Problem p = make_problem(fe, ps);
    const ScheduleHint h = ScheduleHint::parse(c.hint);
    const std::string what = fmt::format("{} {} M={} N={} {}{}", c.kernel, dtype_name(c.dtype), m,
                                         c.n, c.hint, ties ? " (ties)" : "");
    const GeneratedKernel gen = generate(p.ir, p.spec, DeviceTarget{}, h);
    const std::string& s = gen.source;
    // Each hint is followed where it applies.
    if (h.push && (*h.push & 2)) {
      EXPECT_NE(s.find("kdsl_push_packed(&redp"), s.npos) << what;
    }
    if (h.push && (*h.push & 1)) {
      EXPECT_NE(s.find("if ((tl & 31) < K) {"), s.npos) << what;
    }
    if (h.reread) {
      EXPECT_NE(s.find("(reread=1): they take no registers"), s.npos) << what;
    }
    emu::expect_emulated_matches_reference(p, what, /*grid_cap=*/8, /*concurrent=*/4, h);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(RowsHintsEmu, PushedStatesOfManyReductions) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  expect_cases({{"many", DType::f32, 1000, "cluster=8,group=512,push=3"},
                {"many", DType::f16, 8200, "cluster=8,group=1024,push=2"},
                {"many", DType::bf16, 4096, "cluster=2,group=256,push=1,persistent=0"},
                {"ints", DType::i32, 1000, "cluster=4,group=256,push=3"},
                {"dbl", DType::f64, 1000, "cluster=8,group=512,push=3"},
                {"threelevel", DType::bf16, 4096, "cluster=2,group=512,push=3"}},
               /*ties=*/false);
}

TEST(RowsHintsEmu, StagedRowsReadAgainWithManyReductions) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  expect_cases(
      {{"many", DType::bf16, 4096, "persistent=1,cluster=2,group=256,stage=3,reread=1,push=1"},
       {"many", DType::f16, 1000, "persistent=1,cluster=2,group=512,stage=2,reread=1,push=2"},
       {"ints", DType::i32, 8200, "persistent=1,stage=5,reread=1"},
       {"dbl", DType::f64, 4096, "persistent=1,cluster=2,group=256,stage=3,reread=1,push=1"},
       {"threelevel", DType::f32, 1000,
        "persistent=1,cluster=4,group=512,stage=2,reread=1,push=3,smem_columns=0"},
       {"threelevel", DType::f32, 1000, "persistent=1,stage=2,reread=1,online=1"}},
      /*ties=*/false);
}

TEST(RowsHintsEmu, ArgmaxTiesNanAndInfThroughPushes) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  expect_cases(
      {{"argonly", DType::bf16, 8200, "cluster=8,group=1024,push=3"},
       {"argonly", DType::f32, 64, "cluster=8,group=512,push=3"},
       {"many", DType::f32, 1000, "cluster=4,group=512,push=1"},
       {"many", DType::bf16, 4096, "persistent=1,cluster=2,group=256,stage=3,reread=1,push=3"}},
      /*ties=*/true);
}

// With reread=1 the rows are not held in registers; unroll= still does not apply (each phase's
// chunk loop over the staged rows is unrolled fully), and the explain says why.
TEST(RowsHintsEmu, UnrollWithStagedRowsReadAgainSaysWhy) {
  auto fe = testing::front_end("tests/data/row_states.kdsl");
  Specialization spec{{DType::bf16}, 4096, ~0u, ~0u};
  ir::Kernel k = lower_specialized(*fe, "many", spec);
  const RowSchedule s = choose_row_schedule(
      k, spec, DeviceTarget{}, ScheduleHint::parse("persistent=1,stage=4,reread=1,unroll=2"));
  ASSERT_TRUE(s.reread);
  EXPECT_NE(std::find(s.reasons.begin(), s.reasons.end(),
                      "unroll=2 does not apply: the staged rows are read from shared memory by "
                      "each phase (reread=1), in chunk loops unrolled fully"),
            s.reasons.end());
}

}  // namespace
}  // namespace kdsl

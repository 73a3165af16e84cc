// The row scheduler's choices at the shapes they were measured on (bench/RESULTS.md, fourth
// session), the schedule hints' checks, and the launch plan of a cluster schedule. A change of
// rule shows here first; the reasons are in src/schedule.h and src/schedule.cpp.
#include "src/schedule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "cache_test_util.h"
#include "kdsl/error.h"
#include "scoped_env.h"
#include "src/compiler.h"
#include "src/launch_plan.h"
#include "src/schedule_scan.h"

namespace kdsl {
namespace {

const FrontEnd& module(const std::string& file) {
  static std::map<std::string, std::shared_ptr<const FrontEnd>> cache;
  auto& fe = cache[file];
  if (!fe) {
    fe = run_front_end(SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/stdlib/" + file));
  }
  return *fe;
}

struct Chosen {
  ir::Kernel k;
  Specialization spec;
  RowSchedule s;
  std::string source;  // the generated CUDA
  LaunchPlan plan;
};

Chosen choose(const std::string& file, const std::string& kernel, DType t, int64_t n,
              const std::string& hint = "", const std::string& arch = "sm_90") {
  Specialization spec{{t}, n, ~0u, ~0u};
  ir::Kernel k = lower_specialized(module(file), kernel, spec);
  DeviceTarget target;
  target.arch = arch;
  ScheduleHint h = ScheduleHint::parse(hint);
  RowSchedule s = choose_row_schedule(k, spec, target, h);
  GeneratedKernel g = generate(k, spec, target, h);
  return {std::move(k), spec, std::move(s), std::move(g.source), std::move(g.plan)};
}

bool has_reason(const RowSchedule& s, const std::string& text) {
  return std::any_of(s.reasons.begin(), s.reasons.end(),
                     [&](const std::string& r) { return r.find(text) != std::string::npos; });
}

std::string reasons(const RowSchedule& s) {
  std::string out;
  for (const std::string& r : s.reasons) out += r + "\n";
  return out;
}

// The generated source without its comments (the explain) and blank lines.
std::string without_comments(const std::string& src) {
  std::string out, line;
  std::istringstream in(src);
  while (std::getline(in, line)) {
    line = line.substr(0, line.find("//"));
    if (line.find_first_not_of(" \t") != std::string::npos) out += line + "\n";
  }
  return out;
}

// Rows the row schedule cannot hold (more than 512 elements per thread on the largest cluster,
// or N at 2^31 and beyond, where the 32-bit column indices would wrap) and 16-bit tensors before
// sm_80 (no cvt.rn.bf16x2.f32) are argument errors up front, not broken code or a ptxas failure.
// Rows beyond one CTA of 1024 threads go to the smallest cluster that holds them.
TEST(RowSchedule, RowsBeyondTheScheduleAndOldArchitecturesAreErrors) {
  EXPECT_NO_THROW(choose("rms_norm.kdsl", "rms_norm", DType::bf16, 262144));
  Chosen wide = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 2097152);
  EXPECT_EQ(wide.s.cluster, 4);
  EXPECT_EQ(wide.s.group, 4096);
  EXPECT_TRUE(has_reason(wide.s, "more than 512 elements a thread on one CTA: a cluster of 4 CTAs"))
      << reasons(wide.s);
  EXPECT_FALSE(has_reason(wide.s, "schedule hint")) << reasons(wide.s);
  EXPECT_NE(wide.source.find("__cluster_dims__(4, 1, 1)"), std::string::npos);
  try {
    choose("rms_norm.kdsl", "rms_norm", DType::bf16, 8388608);
    ADD_FAILURE() << "N = 8388608 was accepted";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("no group holds this row"), std::string::npos) << e.what();
  }
  EXPECT_THROW(choose("rms_norm.kdsl", "rms_norm", DType::f32, int64_t{1} << 31), ArgumentError);
  EXPECT_THROW(choose("rms_norm.kdsl", "rms_norm", DType::bf16, 99999999999999), ArgumentError);
  try {
    choose("rms_norm.kdsl", "rms_norm", DType::bf16, 1000, "", "sm_75");
    ADD_FAILURE() << "bf16 on sm_75 was accepted";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("sm_80"), std::string::npos) << e.what();
  }
  EXPECT_THROW(choose("rms_norm.kdsl", "rms_norm", DType::f16, 1000, "", "sm_75"), ArgumentError);
  EXPECT_NO_THROW(choose("rms_norm.kdsl", "rms_norm", DType::f32, 1000, "", "sm_75"));
  // 16-bit softmax rows above N = 262144 (more than 512 elements a thread at 512 threads) keep
  // 1024 threads, streamed; beyond what 1024 hold the error names a group that holds the row.
  for (int64_t n : {int64_t{262152}, int64_t{524288}}) {
    for (const char* kernel : {"softmax", "log_softmax"}) {
      Chosen c = choose("softmax.kdsl", kernel, DType::bf16, n);
      EXPECT_EQ(c.s.group, 1024) << kernel << " " << n;
      EXPECT_FALSE(c.s.cache_rows) << kernel << " " << n;
      EXPECT_TRUE(has_reason(c.s, "a long row with dependent reductions: 1024 threads per row"))
          << kernel << " " << n;
    }
  }
  // Beyond them: a cluster of 2 CTAs of 1024 on sm_90; an error before clusters (sm_80), and
  // where the user's cluster= forbids it, with a group that would hold the row as advice.
  EXPECT_EQ(choose("softmax.kdsl", "softmax", DType::bf16, 1048576).s.cluster, 2);
  for (auto [arch, hint, advice] :
       {std::tuple{"sm_90", "cluster=1", "try --schedule group=2048,cluster=2"},
        std::tuple{"sm_80", "", "no group holds this row"}}) {
    try {
      choose("softmax.kdsl", "softmax", DType::bf16, 1048576, hint, arch);
      ADD_FAILURE() << "N = 1048576 was accepted on " << arch;
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(advice), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(choose("softmax.kdsl", "softmax", DType::bf16, 1048576, "group=2048,cluster=2"));
  // A user's cluster= without group= gets CTAs of 1024 threads there, and the explain echoes the
  // user's hint, not the widened one.
  Chosen four = choose("softmax.kdsl", "softmax", DType::bf16, 1048576, "cluster=4,cache_rows=0");
  EXPECT_EQ(four.s.cluster, 4);
  EXPECT_EQ(four.s.group, 4096);
  EXPECT_TRUE(has_reason(four.s, "schedule hint: cache_rows=0,cluster=4")) << reasons(four.s);
  EXPECT_FALSE(has_reason(four.s, "group=4096")) << reasons(four.s);
  // Column reductions keep the error: their accumulators (C * VEC a thread) would spill.
  EXPECT_THROW(choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 4194304), ArgumentError);
}

TEST(RowSchedule, OneCtaPerRowWithTheFewestThreadsWhoseShareFitsTheRegisters) {
  // 10240 f32 elements, 40 per thread: 256 threads (measured 0.93 of copy against 0.32 with the
  // old 1024-thread persistent default).
  for (const char* kernel : {"layer_norm", "softmax"}) {
    Chosen c = choose(std::string(kernel) + ".kdsl", kernel, DType::f32, 10240);
    EXPECT_FALSE(c.s.persistent) << kernel;
    EXPECT_EQ(c.s.group, 256) << kernel;
    EXPECT_EQ(c.s.cluster, 1) << kernel;
    EXPECT_TRUE(c.s.cache_rows) << kernel;
  }
  // 8192 packed bf16, 80 per thread (one phase): 128 threads; softmax (two phases) keeps 40: 256.
  EXPECT_EQ(choose("layer_norm.kdsl", "layer_norm", DType::bf16, 8192).s.group, 128);
  EXPECT_EQ(choose("softmax.kdsl", "softmax", DType::bf16, 8192).s.group, 256);
  // RMSNorm bf16 (one reduction, 16-bit rows) keeps about 16 elements per thread.
  Chosen r = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 8192);
  EXPECT_FALSE(r.s.persistent);
  EXPECT_EQ(r.s.group, 512);
}

TEST(RowSchedule, LongRowsRunOnAPersistentGrid) {
  // 16-bit rows up to 32K elements with one level of reductions: one CTA per row, with the
  // threads the registers allow (512), or 1024 when two rows are written (measured).
  for (const char* kernel : {"rms_norm", "add_rms_norm"}) {
    Chosen r = choose("rms_norm.kdsl", kernel, DType::bf16, 32768);
    EXPECT_FALSE(r.s.persistent) << kernel;
    EXPECT_EQ(r.s.group, std::string(kernel) == "rms_norm" ? 512 : 1024) << kernel;
    EXPECT_EQ(r.s.cluster, 1) << kernel;
  }
  Chosen l = choose("layer_norm.kdsl", "layer_norm", DType::bf16, 32768);
  EXPECT_FALSE(l.s.persistent);
  EXPECT_EQ(l.s.group, 512);
  // Longer rows and f32 rows stay on the persistent grid.
  EXPECT_TRUE(choose("rms_norm.kdsl", "rms_norm", DType::bf16, 65536).s.persistent);
  EXPECT_TRUE(choose("layer_norm.kdsl", "layer_norm", DType::f32, 32768).s.persistent);
  // Two phases: no cluster; 1024 threads per row with the next row staged in shared memory.
  Chosen s = choose("softmax.kdsl", "softmax", DType::bf16, 32768);
  EXPECT_TRUE(s.s.persistent);
  EXPECT_EQ(s.s.group, 1024);
  EXPECT_EQ(s.s.stage, 2);
  EXPECT_EQ(s.s.cluster, 1);
  EXPECT_NE(s.source.find("kdsl_cp_async<16>"), std::string::npos);
  // Rows too long to stage (streamed) keep 512 threads per row.
  Chosen s2 = choose("softmax.kdsl", "log_softmax", DType::bf16, 65536);
  EXPECT_EQ(s2.s.group, 512);
  EXPECT_LT(s2.s.stage, 2);
  EXPECT_TRUE(has_reason(s2.s, "a long row with dependent reductions: 512 threads per row"));
  // f32 rows of that length stay on 1024 threads without staging.
  EXPECT_EQ(choose("softmax.kdsl", "softmax", DType::f32, 32768).s.stage, 0);
}

TEST(RowSchedule, ClustersWhereOneCtaPerRowWasMeasuredSlower) {
  // Backward rows that do not fit one CTA: accumulators beyond shared memory (LayerNorm) or
  // elements beyond registers (RMSNorm). 16-bit rows of N = 32768 keep the column accumulators
  // in registers; one row reduction (RMSNorm, add-RMSNorm): 8 CTAs of 512 threads.
  struct Want {
    const char* file;
    const char* kernel;
    DType t;
    int64_t n;
    int cluster;
    bool smem_columns;
  };
  for (const Want& w : {Want{"layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 32768, 4, false},
                        Want{"layer_norm.kdsl", "layer_norm_bwd", DType::f16, 32768, 4, false},
                        Want{"rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 32768, 8, false},
                        Want{"rms_norm.kdsl", "add_rms_norm_bwd", DType::bf16, 32768, 8, false},
                        Want{"layer_norm.kdsl", "layer_norm_bwd", DType::f32, 32768, 4, true},
                        Want{"rms_norm.kdsl", "rms_norm_bwd", DType::f32, 32768, 4, true},
                        Want{"rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 65536, 4, true}}) {
    const std::string label = fmt::format("{} {} N={}", w.kernel, dtype_name(w.t), w.n);
    Chosen c = choose(w.file, w.kernel, w.t, w.n);
    EXPECT_EQ(c.s.name, "rows.cluster") << label;
    EXPECT_EQ(c.s.cluster, w.cluster) << label;
    EXPECT_EQ(c.s.smem_columns, w.smem_columns) << label;
    EXPECT_TRUE(c.s.cache_rows) << label;
    EXPECT_EQ(c.s.threads, c.s.group / w.cluster) << label;
    if (w.cluster == 8) {
      EXPECT_EQ(c.s.threads, 512) << label;
      EXPECT_EQ(c.s.chunks, 1) << label;
    }
    // 16-bit rows with the accumulators in registers also stage the next row (measured).
    EXPECT_EQ(c.s.stage, w.smem_columns ? 0 : 2) << label;
  }
  // Rows of 3073 to 4096 vectors only (measured at 4096); 16392 and 24576 elements keep the
  // cluster of four with the accumulators in shared memory.
  EXPECT_EQ(choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 32760).s.cluster, 8);
  for (int64_t n : {int64_t{16392}, int64_t{24576}}) {
    Chosen c = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, n);
    EXPECT_EQ(c.s.cluster, 4) << n;
    EXPECT_TRUE(c.s.smem_columns) << n;
  }
  // Hints equal to the rule's choice keep it (the same code); smem_columns=1, prefetch and stage
  // hints keep the cluster of four (prefetch on 8 CTAs: 572 us against 379).
  const Chosen d = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 32768);
  for (const char* hint : {"smem_columns=0", "cache_rows=1"}) {
    Chosen c = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 32768, hint);
    EXPECT_EQ(c.s.cluster, 8) << hint;
    EXPECT_EQ(c.s.group, 4096) << hint;
    EXPECT_FALSE(c.s.smem_columns) << hint;
    EXPECT_EQ(without_comments(c.source), without_comments(d.source)) << hint;
  }
  for (const char* hint : {"smem_columns=1", "prefetch=1", "stage=0"}) {
    Chosen c = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 32768, hint);
    EXPECT_EQ(c.s.cluster, 4) << hint;
  }
  // A kernel whose column accumulators would take the registers its rows need (four column
  // sums): the cluster of four with them in shared memory, the rows register-resident.
  auto fe = run_front_end(std::make_shared<const SourceFile>("four_sums.kdsl", R"(
@kernel
def four_sums[T: (f32, f16, bf16)](a: Tensor[T, (M, N)], b: Tensor[T, (M, N)],
        c: Tensor[T, (M, N)], e: Tensor[T, (M, N)], *, d1: Out[f32, (N,)], d2: Out[f32, (N,)],
        d3: Out[f32, (N,)], d4: Out[f32, (N,)], y: Out[T, (M, N)]):
    for m in parallel(M):
        s = sum(f32(a[m, :]) * f32(b[m, :]))
        y[m, :] = T(f32(a[m, :]) * s + f32(c[m, :]) + f32(e[m, :]))
        d1[:] += f32(a[m, :])
        d2[:] += f32(b[m, :])
        d3[:] += f32(c[m, :])
        d4[:] += f32(e[m, :])
)"));
  Specialization spec{{DType::bf16}, 32768, ~0u, ~0u};
  DeviceTarget target;
  RowSchedule f =
      choose_row_schedule(lower_specialized(*fe, "four_sums", spec), spec, target, ScheduleHint{});
  EXPECT_EQ(f.cluster, 4);
  EXPECT_TRUE(f.smem_columns);
  EXPECT_TRUE(f.cache_rows);
  // A long single-phase row: four CTAs of 256 threads.
  Chosen b = choose("softmax.kdsl", "softmax_bwd", DType::bf16, 32768);
  EXPECT_EQ(b.s.cluster, 4);
  EXPECT_EQ(b.s.group, 1024);
  EXPECT_EQ(b.s.threads, 256);
  // LayerNorm backward with one chunk per thread at 1024 threads: 512 threads, the next row
  // staged in shared memory, the column accumulators in registers.
  Chosen p = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 8192);
  EXPECT_EQ(p.s.group, 512);
  EXPECT_FALSE(p.s.prefetch);
  EXPECT_EQ(p.s.stage, 2);
  EXPECT_FALSE(p.s.smem_columns);
  EXPECT_EQ(p.s.cluster, 1);
  // A user's group stands: no cluster is added to it.
  Chosen u = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 32768, "group=1024");
  EXPECT_EQ(u.s.cluster, 1);
  EXPECT_EQ(u.s.group, 1024);
}

TEST(RowSchedule, MinCtasBeyondTheSmsThreadsIsClampedAndNoted) {
  // 4 CTAs of 1024 threads exceed an SM's 2048: ptxas would ignore __launch_bounds__(1024, 4).
  Chosen c = choose("softmax.kdsl", "softmax", DType::bf16, 262144, "min_ctas=4");
  EXPECT_EQ(c.s.threads, 1024);
  EXPECT_EQ(c.s.min_ctas, 2);
  EXPECT_TRUE(has_reason(c.s,
                         "min_ctas=4 does not apply as given: 4 CTAs of 1024 threads exceed "
                         "the SM's 2048 threads; the launch bounds ask for 2"))
      << reasons(c.s);
  EXPECT_NE(c.source.find("__launch_bounds__(1024, 2)"), std::string::npos);
  Chosen ok = choose("softmax.kdsl", "softmax", DType::bf16, 262144, "min_ctas=2");
  EXPECT_EQ(ok.s.min_ctas, 2);
  EXPECT_FALSE(has_reason(ok.s, "does not apply")) << reasons(ok.s);
}

TEST(RowSchedule, LongForwardRowsHeldOnAClusterOfEight) {
  // 16-bit rows that stream on one CTA and that 8 CTAs of 1024 threads hold in registers with 3
  // or 4 chunks per thread: that cluster, the row read once (softmax and RMSNorm, measured).
  for (const char* kernel : {"softmax", "log_softmax"}) {
    for (int64_t n : {int64_t{196608}, int64_t{262144}}) {
      Chosen c = choose("softmax.kdsl", kernel, DType::bf16, n);
      EXPECT_EQ(c.s.name, "rows.cluster") << kernel << " " << n;
      EXPECT_EQ(c.s.cluster, 8) << kernel << " " << n;
      EXPECT_EQ(c.s.group, 8192) << kernel << " " << n;
      EXPECT_EQ(c.s.threads, 1024) << kernel << " " << n;
      EXPECT_TRUE(c.s.cache_rows) << kernel << " " << n;
      EXPECT_TRUE(has_reason(c.s, "a long 16-bit row: a cluster of 8 CTAs of 1024 threads"))
          << kernel << " " << n;
      EXPECT_NE(c.source.find("__cluster_dims__(8, 1, 1)"), std::string::npos) << kernel;
    }
  }
  Chosen r = choose("rms_norm.kdsl", "rms_norm", DType::f16, 262144);
  EXPECT_EQ(r.s.cluster, 8);
  EXPECT_TRUE(r.s.cache_rows);
  // f32 rows with 4 to 8 chunks per thread there (N = 131072 to 262144; measured at 4, 6 and 8).
  for (const char* kernel : {"softmax", "log_softmax"}) {
    for (int64_t n : {int64_t{131072}, int64_t{196608}, int64_t{262144}}) {
      Chosen c = choose("softmax.kdsl", kernel, DType::f32, n);
      EXPECT_EQ(c.s.cluster, 8) << kernel << " " << n;
      EXPECT_EQ(c.s.group, 8192) << kernel << " " << n;
      EXPECT_TRUE(c.s.cache_rows) << kernel << " " << n;
      EXPECT_FALSE(c.s.online) << kernel << " " << n;
      EXPECT_TRUE(has_reason(c.s, "a long f32 row: a cluster of 8 CTAs of 1024 threads"))
          << reasons(c.s);
    }
  }
  Chosen rf = choose("rms_norm.kdsl", "rms_norm", DType::f32, 262144);
  EXPECT_EQ(rf.s.cluster, 8);
  EXPECT_EQ(rf.s.chunks, 8);
  EXPECT_TRUE(rf.s.cache_rows);
  // Not with 1 or 2 chunks per thread there (measured slower; f32: 3, not measured), beyond 8
  // f32 chunks (N = 327680), for two row inputs (softmax backward, add_rms_norm) or two weight
  // vectors (LayerNorm, slower on the cluster), nor under the user's cache_rows=0,
  // persistent=0, group, cluster, unroll or online=1.
  EXPECT_EQ(choose("softmax.kdsl", "softmax", DType::bf16, 65536).s.cluster, 1);
  EXPECT_EQ(choose("softmax.kdsl", "softmax", DType::bf16, 131072).s.cluster, 1);
  EXPECT_EQ(choose("rms_norm.kdsl", "rms_norm", DType::bf16, 131072).s.cluster, 4);
  EXPECT_EQ(choose("softmax.kdsl", "softmax", DType::f32, 98304).s.cluster, 1);
  EXPECT_EQ(choose("softmax.kdsl", "softmax", DType::f32, 327680).s.cluster, 1);
  EXPECT_EQ(choose("softmax.kdsl", "softmax_bwd", DType::bf16, 262144).s.cluster, 4);
  EXPECT_EQ(choose("softmax.kdsl", "softmax_bwd", DType::f32, 262144).s.cluster, 4);
  EXPECT_EQ(choose("rms_norm.kdsl", "add_rms_norm", DType::f32, 262144).s.cluster, 4);
  EXPECT_EQ(choose("layer_norm.kdsl", "layer_norm", DType::bf16, 262144).s.cluster, 4);
  EXPECT_EQ(choose("layer_norm.kdsl", "layer_norm", DType::f32, 262144).s.cluster, 4);
  for (const char* hint :
       {"cache_rows=0", "persistent=0", "group=512", "cluster=4", "unroll=16", "online=1"}) {
    for (DType t : {DType::bf16, DType::f32}) {
      Chosen c = choose("softmax.kdsl", "softmax", t, 262144, hint);
      EXPECT_NE(c.s.cluster, 8) << hint;
    }
  }
  // A row that needs one more chunk only for a tail of vectors is not the measured row.
  EXPECT_EQ(choose("softmax.kdsl", "softmax", DType::f32, 98308).s.cluster, 1);
  EXPECT_NE(choose("softmax.kdsl", "softmax", DType::bf16, 131080).s.cluster, 8);
  // persistent=0 says why the row is streamed.
  Chosen np = choose("softmax.kdsl", "softmax", DType::f32, 262144, "persistent=0");
  EXPECT_EQ(np.s.cluster, 1);
  EXPECT_TRUE(has_reason(np.s, "persistent=0: the row is streamed")) << reasons(np.s);
  // So do the hints of streamed rows.
  for (const char* hint : {"unroll=16", "unroll=0", "online=1"}) {
    Chosen st = choose("softmax.kdsl", "softmax", DType::f32, 262144, hint);
    EXPECT_EQ(st.s.cluster, 1) << hint;
    EXPECT_TRUE(has_reason(st.s, std::string(hint) + ": the row is streamed, not held in"))
        << reasons(st.s);
  }
  // A single-phase row streamed by such a hint may still take the long single-phase rule's
  // cluster of 4 CTAs of 256, which the explain then names; the hint's note does not claim one
  // CTA (found by a new-user test: RMSNorm f32 at N = 262144 with unroll=64).
  Chosen rs = choose("rms_norm.kdsl", "rms_norm", DType::f32, 262144, "unroll=64");
  EXPECT_EQ(rs.s.cluster, 4);
  EXPECT_TRUE(has_reason(rs.s, "unroll=64: the row is streamed, not held in")) << reasons(rs.s);
  EXPECT_FALSE(has_reason(rs.s, "on one CTA")) << reasons(rs.s);
  // Hints the cluster honours keep it, and online=1 where there is no sum of exp to take online
  // (it does not apply, and changes nothing).
  EXPECT_EQ(choose("softmax.kdsl", "softmax", DType::f32, 262144, "online=0").s.cluster, 8);
  Chosen ro = choose("rms_norm.kdsl", "rms_norm", DType::f32, 262144, "online=1");
  EXPECT_EQ(ro.s.cluster, 8);
  EXPECT_TRUE(has_reason(ro.s, "online=1 does not apply")) << reasons(ro.s);
  EXPECT_EQ(without_comments(ro.source),
            without_comments(choose("rms_norm.kdsl", "rms_norm", DType::f32, 262144).source));
  for (const char* hint : {"cache_rows=1", "prefetch=0", "prefetch=1", "stage=0", "pack=1"}) {
    Chosen c = choose("softmax.kdsl", "softmax", DType::bf16, 262144, hint);
    EXPECT_EQ(c.s.cluster, 8) << hint;
    EXPECT_TRUE(c.s.cache_rows) << hint;
  }
  EXPECT_EQ(choose("rms_norm.kdsl", "rms_norm", DType::bf16, 196608, "prefetch=0").s.cluster, 8);
}

// Backward kernels with at most 16 elements per thread keep the column accumulators in
// registers; on 16-bit rows RMSNorm-like ones (one reduction) and LayerNorm backward (up to
// N = 8192) also stage the next row; LayerNorm backward in f32 keeps them in shared memory
// (measured slower in registers).
TEST(RowSchedule, BackwardColumnAccumulatorsAndStagedRows) {
  for (int64_t n : {1024, 4096, 8192}) {
    Chosen r = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, n);
    EXPECT_FALSE(r.s.smem_columns) << n;
    EXPECT_TRUE(r.s.cache_rows) << n;
    EXPECT_EQ(r.s.stage, 2) << n;
    EXPECT_EQ(r.s.staged_loads, 2) << n;    // x and dy
    EXPECT_EQ(r.s.staged_scalars, 1) << n;  // rstd
    EXPECT_NE(r.source.find("kdsl_cp_wait_group<STAGES - 1>()"), std::string::npos) << n;
    // Per-row scalars are loaded a row ahead into registers, not copied with the rows: the
    // shared memory holds the rows alone.
    EXPECT_EQ(r.source.find("kdsl_cp_async<4>"), std::string::npos) << n;
    EXPECT_NE(r.source.find("const float SCc0 = SC0;"), std::string::npos) << n;
    EXPECT_EQ(r.plan.dynamic_smem, static_cast<uint32_t>(2 * r.s.threads * 2 * r.s.chunks * 16))
        << n;
    // LayerNorm backward (two reductions) stages too (measured at N = 1024, 4096 and 8192),
    // and at N = 8192 (2 chunks per thread at 512 threads) keeps w in registers.
    Chosen l = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, n);
    EXPECT_FALSE(l.s.smem_columns) << n;
    EXPECT_EQ(l.s.stage, 2) << n;
    EXPECT_EQ(l.s.staged_scalars, 2) << n;  // mu and rstd
    EXPECT_TRUE(l.s.cache_invariant) << n;
    EXPECT_EQ(l.s.group, n / 8 / l.s.chunks) << n;
    EXPECT_EQ(l.s.chunks, n == 8192 ? 2 : 1) << n;
    // With one chunk per thread its staged rows are packed in pairs (measured at 32768 x 4096);
    // RMSNorm backward's are not (measured slower), nor LayerNorm backward's at 2 chunks.
    EXPECT_EQ(l.s.pack, n != 8192) << n;
    EXPECT_FALSE(r.s.pack) << n;
    EXPECT_EQ(has_reason(l.s, "16-bit values packed in pairs (measured)"), n != 8192)
        << reasons(l.s);
    for (const Chosen* c : {&r, &l}) {
      // The staged copies form their source address unconditionally (the copy ignores it for
      // a row past the end), and the per-CTA partials leave VEC at a time.
      EXPECT_EQ(c->source.find("svalid && in_range ? static_cast<const void*>"), std::string::npos)
          << n;
      EXPECT_NE(c->source.find(" + col), svalid && in_range);"), std::string::npos) << n;
      // With several rows per CTA (N = 1024: 2) the row groups add their partials together in
      // shared memory first, and group 0 stores the CTA's one partial.
      const bool combined = c->s.rows_per_cta > 1;
      EXPECT_EQ(combined, n == 1024) << n;
      EXPECT_NE(
          c->source.find(combined ? "if (group == 0 && in_range) kdsl_store<VEC>(p.ws0 + part * "
                                    "N + col, W);"
                                  : "if (in_range) kdsl_store<VEC>(p.ws0 + part * N + col, W);"),
          std::string::npos)
          << n;
      EXPECT_EQ(c->source.find("__shared__ __align__(16) float gsum") != std::string::npos,
                combined)
          << n;
      const LaunchPlan& plan = c->plan;
      EXPECT_EQ(plan.partials_per_cta, combined ? 1u : plan.rows_per_cta) << n;
      // One partial per CTA in all three: combined at N = 1024, one row group per CTA above.
      EXPECT_EQ(plan.partials(8), 8) << n;
      EXPECT_EQ(LaunchPlan::from_json(plan.to_json()).partials_per_cta, plan.partials_per_cta) << n;
      // A plan written before the field existed: one partial per row group.
      nlohmann::json old_plan = nlohmann::json::parse(plan.to_json());
      old_plan.erase("partials_per_cta");
      EXPECT_EQ(LaunchPlan::from_json(old_plan.dump()).partials_per_cta, plan.rows_per_cta) << n;
      // One partial per CTA: the workspace holds one row of N f32 partials per CTA.
      ASSERT_FALSE(plan.workspaces.empty()) << n;
      EXPECT_EQ(plan.workspaces[0].bytes_per_cta,
                static_cast<uint64_t>(n) * 4 * plan.partials_per_cta)
          << n;
    }
  }
  // A user's pack=0 stands.
  EXPECT_FALSE(choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 4096, "pack=0").s.pack);
  // Odd rows (VEC = 1) store their partials one by one through the same helper.
  Chosen odd = choose("layer_norm.kdsl", "layer_norm_bwd", DType::f32, 1001);
  EXPECT_EQ(odd.s.vec, 1);
  EXPECT_NE(odd.source.find("if (in_range) kdsl_store<VEC>(p.ws1 + part * N + col, W);"),
            std::string::npos);
  // LayerNorm backward's staged kernel takes this row's mu and rstd (SCc) and loads the next
  // row's (the CTA's rows step by the grid) into SC.
  Chosen lb = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 8192);
  EXPECT_NE(lb.source.find("const float SCc1 = SC1;"), std::string::npos);
  EXPECT_NE(lb.source.find("const long long qrow = row + static_cast<long long>(gridDim.x) * R;"),
            std::string::npos);
  EXPECT_TRUE(std::any_of(lb.s.reasons.begin(), lb.s.reasons.end(), [](const std::string& r) {
    return r.find("loop-invariant vectors kept in registers (measured)") != std::string::npos;
  }));
  // A user's cache_invariant=0 stands at N = 8192, and so does a user's min_ctas (whose register
  // cap the cached w would exceed); a user's group equal to the default changes nothing, and a
  // user's stage=0 keeps the rows unstaged.
  EXPECT_FALSE(choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 8192, "cache_invariant=0")
                   .s.cache_invariant);
  EXPECT_FALSE(choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 8192, "min_ctas=2")
                   .s.cache_invariant);
  EXPECT_EQ(choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 4096, "group=512").s.stage, 2);
  EXPECT_EQ(choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 4096, "stage=0").s.stage, 0);
  // Longer LayerNorm backward rows (2 chunks per thread at 1024 threads) are not staged (not
  // measured).
  EXPECT_EQ(choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 16384).s.stage, 0);
  EXPECT_EQ(choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 8192).s.group, 1024);
  Chosen f = choose("rms_norm.kdsl", "rms_norm_bwd", DType::f32, 10240);
  EXPECT_FALSE(f.s.smem_columns);
  EXPECT_EQ(f.s.stage, 0);
  EXPECT_EQ(f.s.group, 1024);
  EXPECT_FALSE(f.s.prefetch);
  // LayerNorm backward f32 at 3 chunks per thread (two reductions): 512 threads, the next row
  // prefetched (measured); at 2 chunks (N = 8192) and with a user's group it keeps 1024.
  Chosen lf = choose("layer_norm.kdsl", "layer_norm_bwd", DType::f32, 10240);
  EXPECT_TRUE(lf.s.smem_columns);
  EXPECT_EQ(lf.s.group, 512);
  EXPECT_TRUE(lf.s.prefetch);
  EXPECT_TRUE(has_reason(lf.s, "512 threads per row instead, the next row prefetched"))
      << reasons(lf.s);
  Chosen l8 = choose("layer_norm.kdsl", "layer_norm_bwd", DType::f32, 8192);
  EXPECT_EQ(l8.s.group, 1024);
  EXPECT_FALSE(l8.s.prefetch);
  // At N = 12288 the rows would be streamed at 512 threads (no prefetch): 1024 threads kept,
  // the same code as before the rule.
  Chosen l12 = choose("layer_norm.kdsl", "layer_norm_bwd", DType::f32, 12288);
  EXPECT_EQ(l12.s.group, 1024);
  EXPECT_FALSE(l12.s.prefetch);
  EXPECT_TRUE(l12.s.cache_rows);
  EXPECT_TRUE(has_reason(l12.s, "1024 threads kept")) << reasons(l12.s);
  // A user's cache_rows=1 (the default's own choice) leaves the rule out: 1024 threads.
  Chosen lc = choose("layer_norm.kdsl", "layer_norm_bwd", DType::f32, 12288, "cache_rows=1");
  EXPECT_EQ(lc.s.group, 1024);
  EXPECT_FALSE(lc.s.prefetch);
  EXPECT_EQ(
      without_comments(l12.source),
      without_comments(
          choose("layer_norm.kdsl", "layer_norm_bwd", DType::f32, 12288, "group=1024").source));
  Chosen lg = choose("layer_norm.kdsl", "layer_norm_bwd", DType::f32, 10240, "group=1024");
  EXPECT_EQ(lg.s.group, 1024);
  EXPECT_FALSE(lg.s.prefetch);
  // A user's choice stands.
  Chosen u = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 4096, "smem_columns=1");
  EXPECT_TRUE(u.s.smem_columns);
  EXPECT_EQ(u.s.stage, 0);
}

// stage=D: checked, and fewer rows (or none) where D rows do not fit the shared memory.
TEST(RowSchedule, StageHintsAreChecked) {
  // One CTA per row group keeps nothing across rows: nothing to stage.
  EXPECT_THROW(choose("rms_norm.kdsl", "rms_norm", DType::bf16, 8192, "persistent=0,stage=2"),
               ArgumentError);
  EXPECT_THROW(ScheduleHint::parse("stage=1"), ArgumentError);
  EXPECT_THROW(ScheduleHint::parse("stage=9"), ArgumentError);
  // Conflicting hints are errors, not silently dropped: a key given twice, and two ways of
  // fetching the next row.
  EXPECT_THROW(ScheduleHint::parse("group=256,group=512"), ArgumentError);
  EXPECT_THROW(ScheduleHint::parse("stage=2,prefetch=1"), ArgumentError);
  EXPECT_NO_THROW(ScheduleHint::parse("stage=2,prefetch=0"));
  // persistent=0 cannot apply to column reductions; the explain says so.
  Chosen p = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 8192, "persistent=0");
  EXPECT_TRUE(p.s.persistent);
  EXPECT_TRUE(std::any_of(p.s.reasons.begin(), p.s.reasons.end(), [](const std::string& r) {
    return r.find("persistent=0 does not apply") != std::string::npos;
  }));
  Chosen s = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 8192, "persistent=1,stage=4");
  EXPECT_EQ(s.s.stage, 4);
  EXPECT_EQ(s.s.staged_loads, 1);  // x (w is loop-invariant)
  EXPECT_EQ(s.s.staged_scalars, 0);
  EXPECT_EQ(s.plan.dynamic_smem, static_cast<uint32_t>(4 * s.s.threads * s.s.chunks * 16));
  // The user's stage= stands where the scheduler's own rules would re-choose (512 threads and a
  // prefetch for one chunk per thread): the default kernel of RMSNorm backward at N = 8192.
  Chosen d = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 8192);
  Chosen u = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 8192, "stage=2");
  EXPECT_EQ(u.s.stage, 2);
  EXPECT_EQ(u.s.group, d.s.group);
  EXPECT_FALSE(u.s.prefetch);
  Chosen a = choose("rms_norm.kdsl", "add_rms_norm_bwd", DType::bf16, 8192, "stage=2");
  EXPECT_EQ(a.s.stage, 2);
  // Which requirement failed is named.
  try {
    choose("rms_norm.kdsl", "rms_norm", DType::bf16, 8192, "stage=2");
    ADD_FAILURE() << "stage=2 on one CTA per row was accepted";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("persistent=1"), std::string::npos) << e.what();
  }
  // Rows without 16-byte loads (N = 1002 bf16) are not staged, and the reason says so.
  Chosen t = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 1002);
  EXPECT_EQ(t.s.stage, 0);
  EXPECT_EQ(t.source.find("kdsl_cp_async"), std::string::npos);
  bool said = false;
  for (const std::string& r : t.s.reasons) said |= r.find("cannot be staged") != std::string::npos;
  EXPECT_TRUE(said);
  // f32 LayerNorm backward at N = 10240: 96 KiB of accumulators leave no room for 2 rows.
  Chosen n = choose("layer_norm.kdsl", "layer_norm_bwd", DType::f32, 10240, "stage=2");
  EXPECT_EQ(n.s.stage, 0);
}

// Compiling for an architecture without its GPU uses that architecture's shared memory per CTA:
// on sm_86 (99 KiB) fewer rows are staged than on sm_90 (227 KiB).
TEST(RowSchedule, TargetForArchHasItsSharedMemory) {
  EXPECT_EQ(target_for_arch("sm_86").max_smem_per_cta, 99 * 1024);
  EXPECT_EQ(target_for_arch("sm_86").max_threads_per_sm, 1536);
  EXPECT_EQ(target_for_arch("sm_80").max_smem_per_cta, 163 * 1024);
  EXPECT_EQ(target_for_arch("sm_90a").max_smem_per_cta, 227 * 1024);
  Specialization spec{{DType::bf16}, 8192, ~0u, ~0u};
  ir::Kernel k = lower_specialized(module("rms_norm.kdsl"), "rms_norm_bwd", spec);
  ScheduleHint h = ScheduleHint::parse("stage=8");
  RowSchedule big = choose_row_schedule(k, spec, target_for_arch("sm_90"), h);
  RowSchedule small = choose_row_schedule(k, spec, target_for_arch("sm_86"), h);
  EXPECT_GT(big.stage, small.stage);
  EXPECT_GE(small.stage, 2);
}

TEST(RowSchedule, NoClustersBeforeHopper) {
  EXPECT_EQ(choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 32768, "", "sm_80").s.cluster,
            1);
  EXPECT_EQ(choose("softmax.kdsl", "softmax_bwd", DType::bf16, 32768, "", "sm_86").s.cluster, 1);
  EXPECT_EQ(choose("softmax.kdsl", "softmax_bwd", DType::bf16, 32768, "", "sm_100f").s.cluster, 4);
  EXPECT_EQ(choose("softmax.kdsl", "softmax_bwd", DType::bf16, 32768, "", "sm_90a").s.cluster, 4);
  EXPECT_THROW(choose("rms_norm.kdsl", "rms_norm", DType::bf16, 32768, "cluster=2", "sm_80"),
               ArgumentError);
}

TEST(RowSchedule, ClusterHintsAreChecked) {
  EXPECT_THROW(ScheduleHint::parse("cluster=3"), ArgumentError);
  EXPECT_THROW(ScheduleHint::parse("cluster=16"), ArgumentError);
  EXPECT_EQ(ScheduleHint::parse("group=2048,cluster=2").str(), "group=2048,cluster=2");
  // More than 1024 threads per row without a cluster, and fewer than 64 per CTA with one.
  EXPECT_THROW(choose("rms_norm.kdsl", "rms_norm", DType::bf16, 32768, "group=2048"),
               ArgumentError);
  EXPECT_THROW(choose("rms_norm.kdsl", "rms_norm", DType::bf16, 32768, "cluster=4,group=128"),
               ArgumentError);
  Chosen c = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 32768, "cluster=2,group=2048");
  EXPECT_EQ(c.s.group, 2048);
  EXPECT_EQ(c.s.threads, 1024);
}

// Hint text: empty items are errors naming their place, spaces around keys and values are
// ignored, and a number beyond an int names the key's range.
TEST(ScheduleHint, ParseRejectsEmptyItemsIgnoresSpacesAndNamesRanges) {
  auto message = [](const std::string& text) {
    try {
      ScheduleHint::parse(text);
    } catch (const ScheduleHintError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("group=256,,stage=2"),
            "schedule hint 'group=256,,stage=2': item 2 is empty; give KEY=INTEGER items "
            "separated by commas");
  EXPECT_EQ(message("group=256,"),
            "schedule hint 'group=256,': item 2 is empty (a comma at the end); give KEY=INTEGER "
            "items separated by commas");
  EXPECT_EQ(message(",group=256"),
            "schedule hint ',group=256': item 1 is empty; give KEY=INTEGER items separated by "
            "commas");
  EXPECT_EQ(message("vec=99999999999999999999"),
            "schedule hint 'vec=99999999999999999999': 99999999999999999999 is out of range (vec "
            "is 1, 2, 4 or 8)");
  EXPECT_EQ(message("group=x"), "schedule hint 'group=x': expected KEY=INTEGER");
  EXPECT_EQ(ScheduleHint::parse("group =256").str(), "group=256");
  EXPECT_EQ(ScheduleHint::parse(" group=256 , stage = 2").str(), "group=256,stage=2");
  EXPECT_TRUE(ScheduleHint::parse("").empty());
  EXPECT_TRUE(ScheduleHint::parse(" ").empty());
}

// A hint that cannot apply is a ScheduleHintError (the CLI's usage error), naming the hint.
// prefetch=1 is checked on the final schedule: where the measured rules' re-choice makes rows
// register-resident (a cluster at N = 32768, column accumulators in registers), the prefetch
// applies; and no rule replaces it with staging (softmax at N = 32768 stages by default).
TEST(RowSchedule, PrefetchHintsApplyAfterTheMeasuredRules) {
  Chosen c = choose("rms_norm.kdsl", "rms_norm_bwd", DType::f32, 32768, "prefetch=1");
  EXPECT_EQ(c.s.cluster, 4);
  EXPECT_TRUE(c.s.prefetch);
  Chosen a = choose("rms_norm.kdsl", "add_rms_norm_bwd", DType::bf16, 8192, "group=512,prefetch=1");
  EXPECT_EQ(a.s.group, 512);
  EXPECT_TRUE(a.s.prefetch);
  EXPECT_EQ(a.s.stage, 0);
  Chosen d = choose("softmax.kdsl", "softmax", DType::bf16, 32768);
  EXPECT_EQ(d.s.stage, 2);  // the default the hint must not be folded into
  Chosen p = choose("softmax.kdsl", "softmax", DType::bf16, 32768, "prefetch=1");
  EXPECT_TRUE(p.s.prefetch);
  EXPECT_EQ(p.s.stage, 0);
}

TEST(RowSchedule, HintsThatCannotApplyAreHintErrors) {
  auto why = [](const std::string& kernel, DType t, int64_t n, const std::string& hint,
                const std::string& arch = "sm_90") {
    try {
      choose("rms_norm.kdsl", kernel, t, n, hint, arch);
    } catch (const ScheduleHintError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(why("rms_norm", DType::bf16, 32768, "group=2048"),
            "schedule hint group=2048: more than 1024 threads per row need a cluster (cluster=2, 4 "
            "or 8)");
  EXPECT_EQ(why("rms_norm", DType::f32, 8192, "cluster=2", "sm_75"),
            "schedule hint cluster=2: thread-block clusters need sm_90 or newer, not sm_75");
  EXPECT_EQ(why("rms_norm", DType::f32, 8192, "persistent=1,stage=2", "sm_75"),
            "schedule hint stage=2: staging rows in shared memory needs sm_80 or newer, not sm_75");
  EXPECT_EQ(why("rms_norm", DType::f32, 1001, "vec=8"),
            "schedule hint vec=8: N = 1001 is not a multiple of 8 (vec divides the row)");
  EXPECT_EQ(why("rms_norm", DType::f32, 8192, "prefetch=1"),
            "schedule hint prefetch=1: prefetching the next row needs a persistent grid "
            "(persistent=1)");
  EXPECT_EQ(why("rms_norm", DType::f32, 8192, "persistent=1,cache_rows=0,prefetch=1"),
            "schedule hint prefetch=1: prefetching the next row needs register-resident rows "
            "(cache_rows=1; these rows are re-read per phase)");
  EXPECT_NE(why("rms_norm", DType::f32, 8192, "group=1").find("schedule hint group=1:"),
            std::string::npos);
  // What can apply still does.
  EXPECT_EQ(why("rms_norm", DType::f32, 1000, "vec=8"), "accepted");
  EXPECT_EQ(why("rms_norm", DType::f32, 8192, "prefetch=0"), "accepted");
  EXPECT_EQ(why("rms_norm", DType::f32, 8192, "persistent=1,prefetch=1"), "accepted");
  // The tuner drops candidates that cannot apply, as before (they are ArgumentErrors too).
  EXPECT_THROW(choose("rms_norm.kdsl", "rms_norm", DType::f32, 1001, "vec=8"), ArgumentError);
}

// The explain text is true, and its lines agree with each other.
// unroll=U: the phases that hold nothing in registers across chunks roll their chunk loop U at a
// time; where the rows are held (or a thread has no more than U chunks) the hint is noted as moot
// and the code is the fully unrolled one.
TEST(RowSchedule, UnrollAppliesToStreamedPhasesOnly) {
  const std::string hint = "cache_rows=0,cache_invariant=0,persistent=0,group=512,unroll=2";
  Chosen sb = choose("softmax.kdsl", "softmax_bwd", DType::bf16, 32768, hint);
  EXPECT_EQ(sb.s.unroll, 2);
  EXPECT_TRUE(has_reason(sb.s, "streamed phases unrolled 2 chunks at a time")) << reasons(sb.s);
  // Both phases (the sum, then dx) re-read the row: both loops roll.
  size_t rolled = 0;
  for (size_t at = 0; (at = sb.source.find("#pragma unroll 2\n", at)) != std::string::npos; ++at) {
    ++rolled;
  }
  EXPECT_EQ(rolled, 2u) << sb.source;
  // RMSNorm with its weight held in registers: the reduction phase rolls, the phase that reads
  // the weight (held per chunk) does not.
  Chosen rw = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 32768,
                     "cache_rows=0,persistent=0,group=512,unroll=1");
  EXPECT_FALSE(rw.s.cache_invariant);  // (re-read by the scheduler: no room at 64 chunks)
  Chosen rk = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 4096,
                     "cache_rows=0,cache_invariant=1,group=128,unroll=1");
  ASSERT_TRUE(rk.s.cache_invariant);
  ASSERT_GT(rk.s.chunks, 1);
  EXPECT_NE(rk.source.find("#pragma unroll 1\n"), std::string::npos) << rk.source;
  // Backward with column accumulators in registers: their phase is fully unrolled.
  Chosen lb = choose("layer_norm.kdsl", "layer_norm_bwd", DType::f32, 4096,
                     "cache_rows=0,cache_invariant=0,group=128,unroll=1");
  EXPECT_EQ(lb.source.find("#pragma unroll 1\n"), lb.source.rfind("#pragma unroll 1\n"))
      << "one rolled phase (the reductions), not the column phase";
  // Moot on register-resident rows, unroll=0 too (the default there).
  const Chosen held_default = choose("softmax.kdsl", "softmax_bwd", DType::bf16, 8192, "");
  for (const char* hint : {"unroll=1", "unroll=0"}) {
    Chosen held = choose("softmax.kdsl", "softmax_bwd", DType::bf16, 8192, hint);
    EXPECT_TRUE(held.s.cache_rows);
    EXPECT_TRUE(
        has_reason(held.s, std::string(hint) + " does not apply: the rows are held in registers"))
        << reasons(held.s);
    EXPECT_EQ(held.source.find("#pragma unroll 1\n"), std::string::npos);
    EXPECT_EQ(without_comments(held.source), without_comments(held_default.source)) << hint;
  }
  // No more chunks than U: the loop is unrolled fully, as the default does at 1 chunk...
  Chosen few =
      choose("softmax.kdsl", "softmax_bwd", DType::bf16, 8192, "cache_rows=0,group=1024,unroll=4");
  EXPECT_EQ(few.s.unroll, 0);
  EXPECT_TRUE(has_reason(
      few.s,
      "unroll=4 is at least the thread's 1 chunk of a row: the chunk loop is unrolled fully"))
      << reasons(few.s);
  // ... and unlike unroll=8 at 32 chunks a thread (the default of streamed rows that long): the
  // same code as unroll=0, and the explain says so.
  Chosen all = choose("softmax.kdsl", "softmax", DType::f32, 131072, "unroll=64");
  ASSERT_FALSE(all.s.cache_rows);
  ASSERT_EQ(all.s.chunks, 32);
  EXPECT_EQ(all.s.unroll, 0);
  EXPECT_TRUE(has_reason(all.s,
                         "unroll=64 is at least the thread's 32 chunks of a row: the "
                         "chunk loop is unrolled fully"))
      << reasons(all.s);
  EXPECT_FALSE(has_reason(all.s, "does not apply")) << reasons(all.s);
  EXPECT_EQ(
      without_comments(all.source),
      without_comments(choose("softmax.kdsl", "softmax", DType::f32, 131072, "unroll=0").source));
  EXPECT_NE(
      without_comments(all.source),
      without_comments(choose("softmax.kdsl", "softmax", DType::f32, 131072, "unroll=8").source));
  EXPECT_THROW(ScheduleHint::parse("unroll=3"), ScheduleHintError);
  EXPECT_THROW(ScheduleHint::parse("unroll=128"), ScheduleHintError);
  EXPECT_EQ(ScheduleHint::parse("unroll=0").str(), "unroll=0");
}

// Rows streamed in kRollFromChunks chunks or more a thread roll their chunk loop kRolledChunks
// at a time by default (measured); unroll=0 keeps the full unroll, and fewer chunks keep it too.
TEST(RowSchedule, LongStreamedRowsRollTheirChunkLoopByDefault) {
  Chosen sm = choose("softmax.kdsl", "softmax", DType::f32, 524288, "");
  ASSERT_FALSE(sm.s.cache_rows);
  ASSERT_GE(sm.s.chunks, kRollFromChunks);
  EXPECT_EQ(sm.s.unroll, kRolledChunks);
  EXPECT_TRUE(has_reason(sm.s, "the chunk loop rolled 8 chunks at a time")) << reasons(sm.s);
  EXPECT_NE(sm.source.find("#pragma unroll 8\n"), std::string::npos);
  Chosen full = choose("softmax.kdsl", "softmax", DType::f32, 524288, "unroll=0");
  EXPECT_EQ(full.s.unroll, 0);
  EXPECT_FALSE(has_reason(full.s, "the chunk loop rolled")) << reasons(full.s);
  EXPECT_TRUE(has_reason(full.s,
                         "unroll=0: the chunk loop of the streamed phases is unrolled "
                         "fully (128 chunks a thread; without the hint a streamed row of 32 "
                         "chunks or more rolls it 8 at a time"))
      << reasons(full.s);
  EXPECT_EQ(full.source.find("#pragma unroll 8\n"), std::string::npos);
  // A user's unroll stands.
  EXPECT_EQ(choose("softmax.kdsl", "softmax", DType::f32, 524288, "unroll=16").s.unroll, 16);
  // 16 chunks (bf16 N = 65536 streamed on 512 threads): fully unrolled.
  Chosen shorter = choose("softmax.kdsl", "softmax", DType::bf16, 65536, "");
  ASSERT_FALSE(shorter.s.cache_rows);
  ASSERT_LT(shorter.s.chunks, kRollFromChunks);
  EXPECT_EQ(shorter.s.unroll, 0);
}

// Sums of exp(x - c) whose c needs a reduction of x (softmax's safe maximum) run online in the
// max's pass where the rows are streamed in 32 chunks a thread or more (OnlineSum): one read of
// the row fewer. online=0 keeps
// the separate pass; online=1 asks for it on register-resident rows; clusters and kernels with no
// such sum keep their reductions as they are.
TEST(RowSchedule, OnlineSumsOfStreamedSoftmaxRows) {
  for (const char* kernel : {"softmax", "log_softmax"}) {
    Chosen on = choose("softmax.kdsl", kernel, DType::f32, 524288);
    ASSERT_FALSE(on.s.cache_rows) << kernel;
    EXPECT_TRUE(on.s.online) << kernel;
    EXPECT_TRUE(has_reason(on.s, "each streamed row is read once fewer")) << reasons(on.s);
    EXPECT_NE(on.source.find("kdsl_op_sumexp<kdsl_exp_fn>{}"), std::string::npos) << kernel;
    // Two phases (the max with the sum, then the output) instead of three.
    EXPECT_NE(on.source.find("// phase 1"), std::string::npos) << kernel;
    EXPECT_EQ(on.source.find("// phase 2"), std::string::npos) << kernel;
    Chosen off = choose("softmax.kdsl", kernel, DType::f32, 524288, "online=0");
    EXPECT_FALSE(off.s.online) << kernel;
    EXPECT_EQ(off.source.find("kdsl_op_sumexp<"), std::string::npos) << kernel;
    EXPECT_NE(off.source.find("// phase 2"), std::string::npos) << kernel;
  }
  ASSERT_EQ(online_sums(choose("softmax.kdsl", "softmax", DType::f32, 8).k).size(), 1u);
  EXPECT_TRUE(online_sums(choose("softmax.kdsl", "softmax_bwd", DType::f32, 8).k).empty());
  EXPECT_TRUE(online_sums(choose("layer_norm.kdsl", "layer_norm", DType::f32, 8).k).empty());
  // Streamed in 16 chunks a thread (bf16 N = 65536 on 512 threads): not by default.
  Chosen sixteen = choose("softmax.kdsl", "softmax", DType::bf16, 65536);
  ASSERT_FALSE(sixteen.s.cache_rows);
  ASSERT_LT(sixteen.s.chunks, kRollFromChunks);
  EXPECT_FALSE(sixteen.s.online);
  // Register-resident rows: not by default, on request.
  Chosen held = choose("softmax.kdsl", "softmax", DType::bf16, 8192);
  ASSERT_TRUE(held.s.cache_rows);
  EXPECT_FALSE(held.s.online);
  Chosen asked = choose("softmax.kdsl", "softmax", DType::bf16, 8192, "online=1");
  EXPECT_TRUE(asked.s.online);
  EXPECT_TRUE(has_reason(asked.s, "online softmax: the sum of exp(x - max) runs in the pass of"))
      << reasons(asked.s);
  EXPECT_FALSE(has_reason(asked.s, "read once fewer")) << reasons(asked.s);
  // Moot: on a cluster, or with no such sum.
  Chosen cl = choose("softmax.kdsl", "softmax", DType::f32, 8192, "online=1,cluster=2,group=512");
  EXPECT_FALSE(cl.s.online);
  EXPECT_TRUE(has_reason(cl.s, "online=1 does not apply: a row on a cluster")) << reasons(cl.s);
  Chosen rms = choose("rms_norm.kdsl", "rms_norm", DType::f32, 8192, "online=1");
  EXPECT_FALSE(rms.s.online);
  EXPECT_TRUE(has_reason(rms.s, "online=1 does not apply: no sum of exp")) << reasons(rms.s);
  EXPECT_EQ(ScheduleHint::parse("online=0").str(), "online=0");
  EXPECT_THROW(ScheduleHint::parse("online=2"), ScheduleHintError);
}

TEST(RowSchedule, ExplainLinesAreTrueAndAgree) {
  // A moot hint is noted; nothing claims 0 KiB of accumulators.
  Chosen m = choose("rms_norm.kdsl", "rms_norm", DType::f32, 8192, "smem_columns=1");
  EXPECT_TRUE(has_reason(m.s,
                         "smem_columns=1 does not apply: the kernel has no column "
                         "reductions"))
      << reasons(m.s);
  EXPECT_FALSE(has_reason(m.s, "accumulators in shared memory")) << reasons(m.s);
  // The combine of the warps' partials: the butterfly on one CTA per row, warp order on a
  // cluster, either on request; moot (and noted) where a row's threads in a CTA are one warp.
  EXPECT_TRUE(choose("rms_norm.kdsl", "rms_norm_bwd", DType::f32, 8192).s.butterfly);
  // Two reductions on 1024 threads with a partly filled last chunk: the butterfly.
  Chosen two = choose("layer_norm.kdsl", "layer_norm_bwd", DType::f32, 10240, "group=1024");
  ASSERT_EQ(two.s.group, 1024);
  EXPECT_TRUE(two.s.butterfly);
  EXPECT_TRUE(choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 10240).s.butterfly);
  // f32, one reduction, 1024 threads, a partly filled last chunk: warp order (measured).
  Chosen ragged = choose("rms_norm.kdsl", "rms_norm_bwd", DType::f32, 10240);
  EXPECT_FALSE(ragged.s.butterfly);
  EXPECT_TRUE(has_reason(ragged.s, "partly filled last chunk: the warps' partials added in warp"))
      << reasons(ragged.s);
  EXPECT_TRUE(
      choose("rms_norm.kdsl", "rms_norm_bwd", DType::f32, 10240, "butterfly=1").s.butterfly);
  EXPECT_FALSE(
      choose("rms_norm.kdsl", "rms_norm_bwd", DType::f32, 10240, "butterfly=0").s.butterfly);
  Chosen cl = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 32768);
  ASSERT_GT(cl.s.cluster, 1);
  EXPECT_FALSE(cl.s.butterfly);
  // On a cluster with column or row reductions every warp's partial goes to every CTA: the hint
  // is moot there (and noted).
  Chosen clb = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 32768, "butterfly=1");
  EXPECT_TRUE(has_reason(clb.s, "butterfly=1 does not apply: on this cluster every CTA receives"))
      << reasons(clb.s);
  EXPECT_EQ(without_comments(clb.source), without_comments(cl.source));
  Chosen pb = choose("softmax.kdsl", "softmax_bwd", DType::bf16, 32768, "butterfly=1");
  ASSERT_GT(pb.s.cluster, 1);
  EXPECT_TRUE(has_reason(pb.s, "butterfly=1 does not apply: on this cluster every CTA receives"))
      << reasons(pb.s);
  Chosen sb = choose("softmax.kdsl", "softmax", DType::bf16, 262144, "butterfly=1");
  ASSERT_GT(sb.s.cluster, 1);
  EXPECT_TRUE(has_reason(sb.s, "butterfly=1 does not apply: on this cluster every CTA receives"))
      << reasons(sb.s);
  Chosen lb = choose("layer_norm.kdsl", "layer_norm", DType::bf16, 262144, "butterfly=1");
  ASSERT_GT(lb.s.cluster, 1);
  EXPECT_TRUE(has_reason(lb.s, "butterfly=1 does not apply: on this cluster every CTA receives"))
      << reasons(lb.s);
  Chosen one = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 256, "butterfly=0,group=32");
  EXPECT_TRUE(
      has_reason(one.s, "butterfly=0 does not apply: a row's threads in a CTA are one warp"))
      << reasons(one.s);
  // Also where a measured rule re-chooses the schedule (16-bit backward rows are staged).
  Chosen staged = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 256, "butterfly=0");
  ASSERT_LE(staged.s.group, 32);
  EXPECT_TRUE(has_reason(staged.s, "butterfly=0 does not apply")) << reasons(staged.s);
  // f32 with VEC = 8: two 16-byte loads per vector (kdsl_load), not 32-byte accesses.
  Chosen v = choose("rms_norm.kdsl", "rms_norm", DType::f32, 8192, "vec=8");
  EXPECT_TRUE(has_reason(v.s, "VEC = 8 (2 x 16-byte accesses per vector)")) << reasons(v.s);
  EXPECT_FALSE(has_reason(v.s, "32-byte")) << reasons(v.s);
  EXPECT_TRUE(has_reason(choose("rms_norm.kdsl", "rms_norm", DType::bf16, 8192).s,
                         "VEC = 8 (16-byte accesses)"));
  // LayerNorm backward at N = 8192: 512 threads and 2 chunks per thread; the rule that chose 512
  // threads names the 1024 threads it replaced.
  Chosen l = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 8192);
  EXPECT_TRUE(has_reason(l.s, "512 threads per row, 1 row per CTA, 2 chunks per thread"))
      << reasons(l.s);
  EXPECT_TRUE(has_reason(l.s, "one chunk per thread at 1024 threads per row: 512 threads instead"))
      << reasons(l.s);
  EXPECT_FALSE(has_reason(l.s, "the next 1 row group")) << reasons(l.s);
  // Streaming rows: no "about 0 registers".
  Chosen r = choose("layer_norm.kdsl", "layer_norm", DType::f32, 8192, "cache_rows=0");
  EXPECT_TRUE(has_reason(r.s,
                         "streaming: no row is held in registers; each reduction phase "
                         "re-reads the row"))
      << reasons(r.s);
  EXPECT_FALSE(has_reason(r.s, "about 0 registers")) << reasons(r.s);
  Chosen w = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 8192, "cache_rows=0");
  EXPECT_TRUE(has_reason(w.s, "registers per thread hold the loop-invariant vectors"))
      << reasons(w.s);
  // A cluster: the row spans the cluster's CTAs.
  Chosen c = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 32768);
  EXPECT_TRUE(has_reason(c.s,
                         "4096 threads per row in a cluster of 4 CTAs of 1024, 1 row per "
                         "cluster"))
      << reasons(c.s);
  EXPECT_FALSE(has_reason(c.s, "row per CTA")) << reasons(c.s);
  // A pair of 16-bit elements is two 2-byte accesses (kdsl_load), not one 4-byte access; packed
  // register-resident rows are loaded as 4-byte words (kdsl_load_raw).
  Chosen p = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 8192, "vec=2");
  EXPECT_TRUE(has_reason(p.s, "VEC = 2 (2 x 2-byte accesses per vector)")) << reasons(p.s);
  EXPECT_TRUE(has_reason(p.s, "16-bit values packed in pairs, loaded 4 bytes at a time"))
      << reasons(p.s);
  EXPECT_FALSE(has_reason(choose("rms_norm.kdsl", "rms_norm", DType::bf16, 8192, "vec=2,pack=0").s,
                          "4 bytes at a time"));
  // Softmax's staging rule on rows too long for the registers: they are streamed, not "cannot be
  // staged".
  Chosen sm = choose("softmax.kdsl", "softmax", DType::bf16, 65536);
  EXPECT_TRUE(has_reason(sm.s,
                         "the rows are streamed (too long for the registers), so none is "
                         "staged"))
      << reasons(sm.s);
  EXPECT_FALSE(has_reason(sm.s, "cannot be staged")) << reasons(sm.s);
  // push= (RowSchedule::push) applies only where a cluster row's warps push row partials.
  for (int v : {1, 2, 3}) {
    const std::string h = fmt::format("push={}", v);
    Chosen on = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 32768, h.c_str());
    ASSERT_GT(on.s.cluster, 1);
    EXPECT_EQ(on.s.push, v);
    EXPECT_TRUE(has_reason(on.s, "row partials: ")) << reasons(on.s);
    Chosen off = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 8192, h.c_str());
    EXPECT_EQ(off.s.push, 0);
    EXPECT_TRUE(has_reason(off.s, h + " does not apply: the row is on one CTA")) << reasons(off.s);
  }
  EXPECT_EQ(choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 32768).s.push, 0);
  // reread=1 (RowSchedule::reread) with staged rows; the rows need no registers, so a layout
  // whose rows would not fit them keeps its rows (cache_rows) and stages them.
  Chosen rr = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 32768,
                     "cluster=2,group=1024,smem_columns=0,stage=2,reread=1");
  EXPECT_TRUE(rr.s.reread);
  EXPECT_TRUE(rr.s.cache_rows);
  EXPECT_EQ(rr.s.stage, 2);
  EXPECT_TRUE(has_reason(rr.s, "(reread=1): they take no registers")) << reasons(rr.s);
  Chosen no = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 8192, "reread=1");
  EXPECT_FALSE(no.s.reread);
  EXPECT_TRUE(has_reason(no.s, "reread=1 does not apply")) << reasons(no.s);
  EXPECT_FALSE(choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 32768).s.reread);
  // With cache_rows=0 the rows are not staged at all; the refusal says what reread=1 needs.
  try {
    choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 32768,
           "stage=2,reread=1,cache_rows=0");
    ADD_FAILURE() << "stage=2,reread=1,cache_rows=0 was accepted";
  } catch (const ScheduleHintError& e) {
    EXPECT_NE(std::string(e.what()).find("needs cache_rows=1, which is reread=1's default"),
              std::string::npos)
        << e.what();
  }
}

// The cluster rule for column reductions names what does not fit one CTA, and a user's
// cache_rows=0 (rows streamed by request, not because they are too long) does not trigger it, nor
// the 512-thread rule whose prefetch streamed rows cannot take.
TEST(RowSchedule, ClusterRuleNamesWhatDoesNotFitAndLeavesRequestedStreamingAlone) {
  Chosen r = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 32768);
  EXPECT_EQ(r.s.cluster, 8);
  EXPECT_TRUE(has_reason(r.s,
                         "the row does not fit one CTA (its elements exceed the registers): a "
                         "cluster of 8 CTAs of 512 threads per row, each with an eighth of the "
                         "columns, the column accumulators in registers (measured at bf16 N = "
                         "32768: RMSNorm backward 357 us against 369 on 4 CTAs of 1024 with the "
                         "accumulators in shared memory; staged: 321)"))
      << reasons(r.s);
  Chosen l = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 32768);
  EXPECT_EQ(l.s.cluster, 4);
  EXPECT_TRUE(has_reason(l.s,
                         "the row does not fit one CTA (its column accumulators exceed the "
                         "shared memory)"))
      << reasons(l.s);
  for (const char* kernel : {"rms_norm_bwd", "add_rms_norm_bwd"}) {
    Chosen s = choose("rms_norm.kdsl", kernel, DType::bf16, 8192, "cache_rows=0");
    EXPECT_EQ(s.s.cluster, 1) << kernel << reasons(s.s);
    EXPECT_EQ(s.s.group, 1024) << kernel << reasons(s.s);
    EXPECT_FALSE(s.s.cache_rows) << kernel;
    EXPECT_FALSE(has_reason(s.s, "prefetched")) << kernel << reasons(s.s);
  }
  // Where the rows would be streamed anyway (N = 32768), the cluster stays.
  EXPECT_EQ(choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 32768, "cache_rows=0").s.cluster,
            4);
}

// A group too small for the row suggests a larger one only where one exists.
// A hint that gives a row more threads than it has vectors is followed, and the explain says so
// with the group that covers the row; the default and a covering hint say nothing.
TEST(RowSchedule, OversizedGroupOrClusterHintsAreNoted) {
  // bf16, N = 1024: 128 vectors of 8.
  Chosen g = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 1024, "group=1024");
  EXPECT_EQ(g.s.group, 1024);
  EXPECT_TRUE(has_reason(g.s,
                         "schedule hint group=1024: 1024 threads per row for 128 vectors: 896 of "
                         "them hold no element (group=128 covers the row)"))
      << reasons(g.s);
  Chosen c = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 1024, "cluster=8");
  EXPECT_TRUE(has_reason(c.s, "(group=128 without a cluster covers the row)")) << reasons(c.s);
  for (const char* hint : {"", "group=128", "group=64"}) {
    Chosen d = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 1024, hint);
    EXPECT_FALSE(has_reason(d.s, "hold no element")) << hint << "\n" << reasons(d.s);
  }
}

TEST(RowSchedule, TooManyElementsPerThreadSuggestsWhatExists) {
  auto error = [](DType t, int64_t n, const std::string& hint,
                  const std::string& arch = "sm_90") -> std::string {
    try {
      choose("rms_norm.kdsl", "rms_norm", t, n, hint, arch);
    } catch (const ScheduleHintError& e) {
      return e.what();
    }
    return "no error";
  };
  auto says = [](const std::string& message, const std::string& advice) {
    return message.find("(at most 512; " + advice + ")") != std::string::npos;
  };
  EXPECT_TRUE(says(error(DType::f32, 8192, "group=1"), "give a larger group"));
  // Above 1024 threads only with a cluster, which needs sm_90.
  EXPECT_TRUE(says(error(DType::bf16, 1 << 20, "group=1024"), "give a larger group, with cluster"));
  EXPECT_TRUE(says(error(DType::bf16, 1 << 19, "group=256", "sm_80"), "give a larger group"));
  EXPECT_TRUE(says(error(DType::bf16, 1 << 20, "group=512", "sm_80"), "no group holds this row"));
  // A row that no group holds (1024 elements per thread at 8192 threads).
  EXPECT_TRUE(says(error(DType::bf16, 1 << 23, "group=8192,cluster=8"), "no group holds this row"));
  EXPECT_TRUE(says(error(DType::bf16, 1 << 23, "group=1024"), "no group holds this row"));
  // A cluster hint alone that leaves too many elements a thread is a hint error that names it,
  // with the group and cluster that hold the row.
  const std::string c2 = error(DType::f32, 1 << 21, "cluster=2");
  EXPECT_NE(c2.find("schedule hint cluster=2: 2048 elements per thread at N = 2097152 (1024 "
                    "threads per row)"),
            std::string::npos)
      << c2;
  EXPECT_TRUE(says(c2, "try --schedule group=4096,cluster=4")) << c2;
}

// Column reductions: advice names only a group whose column accumulators in registers stay
// within the 255 registers a thread has. Beyond the default cluster of 4 CTAs (N = 4194304) the
// largest cluster would leave 512 elements a thread, each with its accumulators: no advice.
TEST(RowSchedule, ColumnReductionAdviceKeepsTheAccumulatorsInAThreadsRegisters) {
  auto error = [](const char* file, const char* kernel, DType t, int64_t n,
                  const std::string& hint = "") -> std::string {
    try {
      choose(file, kernel, t, n, hint);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  for (DType t : {DType::f32, DType::bf16}) {
    const std::string ln = error("layer_norm.kdsl", "layer_norm_bwd", t, 4194304);
    EXPECT_NE(ln.find("no group holds this row: with group=8192,cluster=8 a thread would hold "
                      "1024 column accumulators in registers, more than the 255 it has"),
              std::string::npos)
        << ln;
    EXPECT_EQ(ln.find("try --schedule"), std::string::npos) << ln;
    const std::string rn = error("rms_norm.kdsl", "rms_norm_bwd", t, 4194304);
    EXPECT_NE(rn.find("a thread would hold 512 column accumulators"), std::string::npos) << rn;
    // A user's group gets the same answer.
    const std::string hinted = error("rms_norm.kdsl", "rms_norm_bwd", t, 4194304, "group=1024");
    EXPECT_NE(hinted.find("(at most 512; no group holds this row: with group=8192,cluster=8"),
              std::string::npos)
        << hinted;
  }
  // With cluster=1 at N = 1048576 (f32: 1024 elements a thread on one CTA), 2048 and 4096
  // threads would leave 512 and 256 accumulators a thread: the advice is 8192 (128).
  const std::string one = error("rms_norm.kdsl", "rms_norm_bwd", DType::f32, 1048576, "cluster=1");
  EXPECT_NE(one.find("at most 512; try --schedule group=8192,cluster=8)"), std::string::npos)
      << one;
  EXPECT_EQ(error("rms_norm.kdsl", "rms_norm_bwd", DType::f32, 1048576, "group=8192,cluster=8"),
            "no error");
  // Without column reductions the advice is unchanged: the smallest group that holds the row.
  EXPECT_NE(error("softmax.kdsl", "softmax_bwd", DType::f32, 1048576, "cluster=1")
                .find("try --schedule group=2048,cluster=2"),
            std::string::npos);
}

// The explain text of a cluster that is not persistent names clusters, not CTAs, per row group.
TEST(RowSchedule, ExplainSaysOneClusterPerRowGroup) {
  Chosen c = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 32768, "cluster=2");
  ASSERT_EQ(c.s.name, "rows.cluster");
  ASSERT_FALSE(c.s.persistent);
  EXPECT_TRUE(has_reason(c.s, "8 chunks per thread), one cluster per row group (no state"))
      << reasons(c.s);
  const auto& r = c.plan.reasons;
  EXPECT_NE(std::find(r.begin(), r.end(),
                      "grid: one cluster of 2 CTAs per row group, as many clusters as row groups"),
            r.end());
  Chosen one = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 8192);
  EXPECT_TRUE(has_reason(one.s, "one CTA per row group (no state across rows)")) << reasons(one.s);
}

TEST(RowSchedule, AClusterKernelDeclaresItsClusterAndCountsPartialsPerCluster) {
  Chosen c = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 32768);
  GeneratedKernel gen = generate(c.k, c.spec, DeviceTarget{});
  EXPECT_NE(gen.source.find("__cluster_dims__(4, 1, 1)"), std::string::npos);
  EXPECT_NE(gen.source.find("kdsl_cluster_sync();"), std::string::npos);
  EXPECT_EQ(gen.plan.schedule, "rows.cluster");
  EXPECT_EQ(gen.plan.cluster, 4u);
  EXPECT_EQ(gen.plan.row_splits, 4u);
  EXPECT_EQ(gen.plan.partials(8), 2 * static_cast<int64_t>(gen.plan.rows_per_cta));
  LaunchPlan back = LaunchPlan::from_json(gen.plan.to_json());
  EXPECT_EQ(back.cluster, 4u);
  // Column reductions on a cluster: each warp writes its row partials into every CTA with
  // st.async, counted on an mbarrier of the receiving CTA (no cluster barrier per row, no CTA
  // barrier, no remote load); without them (softmax backward) the CTA's total is read by the
  // others after the cluster barrier.
  EXPECT_NE(gen.source.find("for (int q = 0; q < K; ++q) kdsl_push_async(&red"), std::string::npos);
  EXPECT_NE(gen.source.find("if (threadIdx.x == 0) kdsl_mbar_expect(&kdsl_full[0][buf], "),
            std::string::npos);
  EXPECT_NE(gen.source.find("kdsl_mbar_wait(&kdsl_full[0][buf], kdsl_ph);"), std::string::npos);
  EXPECT_EQ(gen.source.find("redc"), std::string::npos);
  const size_t main_at = gen.source.find("__cluster_dims__(4, 1, 1)");
  const std::string main_kernel =
      gen.source.substr(main_at, gen.source.find("_finalize(", main_at) - main_at);
  EXPECT_EQ(main_kernel.find("__syncthreads();"), std::string::npos);
  // Every CTA has started (a cluster barrier) before the loop's first remote write, and none
  // leaves before the others are done with its shared memory (one after the loop): no cluster
  // barrier in the row loop.
  EXPECT_LT(main_kernel.find("kdsl_cluster_sync();"), main_kernel.find("for (long long row0"));
  size_t syncs = 0;
  for (size_t at = main_kernel.find("kdsl_cluster_sync();"); at != std::string::npos;
       at = main_kernel.find("kdsl_cluster_sync();", at + 1)) {
    ++syncs;
  }
  EXPECT_EQ(syncs, 2u);
  EXPECT_NE(main_kernel.find("__syncwarp();\n"), std::string::npos);
  // The partials' buffers count against the shared memory the stages may take: 7 stages of
  // 32 KiB and 16 KiB of partials do not fit 227 KiB.
  Chosen big = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 65536,
                      "cluster=8,group=8192,smem_columns=0,stage=8,cache_rows=1");
  EXPECT_EQ(big.s.stage, 6) << reasons(big.s);
  EXPECT_TRUE(has_reason(big.s, "stage=8 does not fit: 8 buffers of 32 KiB (a row each)"))
      << reasons(big.s);
  // One row of 128 KiB fits, two buffers of it do not: the message says what the stages need.
  Chosen two = choose("softmax.kdsl", "softmax", DType::f32, 32768, "stage=2");
  EXPECT_LT(two.s.stage, 2);
  EXPECT_TRUE(has_reason(two.s,
                         "stage=2 does not fit: 2 buffers of 128 KiB (a row each), 0 KiB "
                         "of column accumulators and 2 KiB of partials need 258 KiB, "
                         "beyond the 227 KiB"))
      << reasons(two.s);
  // Rows without 16-byte row loads on the cluster rule: not staged, and the explain says so.
  Chosen v4 = choose("rms_norm.kdsl", "add_rms_norm_bwd", DType::bf16, 16380);
  ASSERT_EQ(v4.s.cluster, 8) << reasons(v4.s);
  EXPECT_LT(v4.s.stage, 2);
  EXPECT_FALSE(has_reason(v4.s, "rows staged in shared memory")) << reasons(v4.s);
  EXPECT_TRUE(has_reason(choose("rms_norm.kdsl", "add_rms_norm_bwd", DType::bf16, 32768).s,
                         "rows staged in shared memory"));
  // Row reductions on a cluster push their partials with st.async: at one point of the row
  // (softmax backward) on one mbarrier per buffer, at two (softmax: the sum follows the max) on
  // one per point.
  Chosen sm = choose("softmax.kdsl", "softmax", DType::bf16, 262144);
  ASSERT_GT(sm.s.cluster, 1);
  const std::string sms = generate(sm.k, sm.spec, DeviceTarget{}).source;
  EXPECT_NE(sms.find("kdsl_push_async(&red"), std::string::npos);
  EXPECT_NE(sms.find("__shared__ unsigned long long kdsl_full[2][2];"), std::string::npos);
  EXPECT_NE(sms.find("kdsl_mbar_wait(&kdsl_full[0][buf], kdsl_ph);"), std::string::npos);
  EXPECT_NE(sms.find("kdsl_mbar_wait(&kdsl_full[1][buf], kdsl_ph);"), std::string::npos);
  Chosen sp = choose("softmax.kdsl", "softmax_bwd", DType::bf16, 32768);
  ASSERT_GT(sp.s.cluster, 1);
  EXPECT_NE(sp.source.find("kdsl_push_async(&red"), std::string::npos);
  EXPECT_EQ(sp.source.find("kdsl_full[1][buf]"), std::string::npos);
  // LayerNorm's Welford state (three words) and its sum are pushed too, their bytes counted by
  // the states' sizes.
  Chosen ln = choose("layer_norm.kdsl", "layer_norm", DType::bf16, 262144);
  ASSERT_GT(ln.s.cluster, 1);
  EXPECT_NE(ln.source.find("kdsl_push_async(&red"), std::string::npos);
  EXPECT_NE(
      ln.source.find("static_cast<unsigned>((sizeof(float) + sizeof(kdsl_welford<float>)) * "),
      std::string::npos);
  EXPECT_TRUE(row_reductions(sp.k));
  EXPECT_TRUE(row_reductions(sm.k));
  EXPECT_TRUE(row_reductions(ln.k));
  // Without a cluster the generated source has none of it.
  Chosen one = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 8192);
  std::string src = generate(one.k, one.spec, DeviceTarget{}).source;
  EXPECT_EQ(src.find("__cluster_dims__"), std::string::npos);
  EXPECT_EQ(src.find("kdsl_cluster_sync"), std::string::npos);
}

}  // namespace
}  // namespace kdsl

namespace kdsl {
namespace {

ScanSchedule choose_scan(const std::string& file, const std::string& kernel, DType t, int64_t len) {
  Specialization spec{{t}, len, ~0u, ~0u};
  ir::Kernel k = lower_specialized(module(file), kernel, spec);
  DeviceTarget target;
  target.arch = "sm_90";
  return choose_scan_schedule(k, spec, target);
}

// Sets KDSL_SCAN_SCHEDULE for one scope (unset when empty), restoring the previous value.
using testing::ScanScheduleEnv;

// The middle-axis layout measured on the H200 at (1, 32768, 2048) (bench/RESULTS.md, ninth to
// eleventh sessions): memory-bound kernels take accesses of 2 rows, 16 lanes along the rows and 8
// to 32 steps from a register budget (64 for a rescanned 16-bit cumsum over L >= 8192); 16-bit
// kernels with much elementwise math (RG-LRU) take accesses of 2 rows, 32 lanes along the rows
// and 8 or 16 steps from a smaller budget; f32 ones
// with much math, logcumsumexp (math in the combine), 8-byte elements and short sequences keep
// element accesses of 32-byte rows.
// 32-bit positions along the scan axis only where every vector tensor is 16-bit (measured faster
// there, and 20% slower for the f32 backward recurrence); KDSL_SCAN_SCHEDULE pos64 overrides.
TEST(ScanSchedule, NarrowPositionsOnlyFor16BitTensors) {
  ScanScheduleEnv env("");
  for (DType t : {DType::bf16, DType::f16, DType::f32}) {
    ScanSchedule s = choose_scan("linear_recurrence.kdsl", "linear_recurrence_bwd", t, 32768);
    EXPECT_EQ(s.wide_positions, t == DType::f32) << dtype_name(t);
  }
  EXPECT_TRUE(choose_scan("rg_lru.kdsl", "rg_lru_bwd", DType::f32, 32768).wide_positions);
  env.set("pos64=1");
  EXPECT_TRUE(choose_scan("scan.kdsl", "cumsum_mid", DType::bf16, 32768).wide_positions);
  env.set("pos64=0");
  EXPECT_FALSE(choose_scan("linear_recurrence.kdsl", "linear_recurrence_bwd", DType::f32, 32768)
                   .wide_positions);
}

// Phase A's transcendental results are kept for phase B by default; KDSL_SCAN_SCHEDULE keep=0
// turns that off (for comparisons).
TEST(ScanSchedule, KeepsPhaseAMathUnlessToldNotTo) {
  ScanScheduleEnv env("");
  EXPECT_TRUE(choose_scan("rg_lru.kdsl", "rg_lru_bwd", DType::bf16, 32768).keep_math);
  env.set("keep=0");
  EXPECT_FALSE(choose_scan("rg_lru.kdsl", "rg_lru_bwd", DType::bf16, 32768).keep_math);
  env.set("keep=1");
  EXPECT_TRUE(choose_scan("rg_lru.kdsl", "rg_lru_bwd", DType::f32, 32768).keep_math);
  env.set("keep=2");
  EXPECT_THROW(choose_scan("rg_lru.kdsl", "rg_lru_bwd", DType::f32, 32768), ArgumentError);
}

TEST(ScanSchedule, MiddleAxisLayoutFollowsTheMeasuredRule) {
  ScanScheduleEnv none("");
  testing::ScopedEnv math("KDSL_MATH", nullptr);
  struct Case {
    const char* file;
    const char* kernel;
    DType t;
    int64_t len;
    int vr, lr, lp, steps;
  };
  const Case cases[] = {
      {"scan.kdsl", "cumsum_mid", DType::f32, 32768, 2, 16, 2, 32},
      // rescanning one f32 state (3 half words): 128 elements, where L makes 8 tiles of 1024
      {"scan.kdsl", "cumsum_mid", DType::bf16, 32768, 2, 16, 2, 64},
      {"scan.kdsl", "cumsum_mid", DType::bf16, 8191, 2, 16, 2, 32},
      {"linear_recurrence.kdsl", "linear_recurrence", DType::f32, 32768, 2, 16, 2, 16},
      // rescanning 16-bit tensors: a budget of 256 words holds 64 elements of 8 half words
      {"linear_recurrence.kdsl", "linear_recurrence", DType::bf16, 32768, 2, 16, 2, 32},
      // 32 elements of packed 16-bit loads fit the budget, 32 of f32 do not
      {"linear_recurrence.kdsl", "linear_recurrence_bwd", DType::bf16, 32768, 2, 16, 2, 16},
      {"linear_recurrence.kdsl", "linear_recurrence_bwd", DType::f32, 4097, 2, 16, 2, 8},
      {"rg_lru.kdsl", "rg_lru", DType::f32, 32768, 1, 8, 4, 8},
      {"rg_lru.kdsl", "rg_lru", DType::bf16, 32768, 2, 32, 1, 16},     // 6 words per element
      {"rg_lru.kdsl", "rg_lru_bwd", DType::bf16, 32768, 2, 32, 1, 8},  // 10 words
      {"rg_lru.kdsl", "rg_lru_bwd", DType::f16, 4097, 2, 32, 1, 8},
      {"scan.kdsl", "logcumsumexp_mid", DType::bf16, 32768, 1, 16, 2, 16},  // math in the combine
      {"rg_lru.kdsl", "rg_lru_bwd", DType::bf16, 256, 1, 16, 2, 8},  // short: element accesses
      {"scan.kdsl", "logcumsumexp_mid", DType::f32, 32768, 1, 8, 4, 16},
      {"scan.kdsl", "cumsum_mid", DType::f64, 32768, 1, 4, 8, 16},
      {"scan.kdsl", "cumsum_mid", DType::f32, 200, 1, 8, 4, 8},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} {} L={}", c.kernel, dtype_name(c.t), c.len));
    ScanSchedule s = choose_scan(c.file, c.kernel, c.t, c.len);
    EXPECT_EQ(s.name, "scan.columns");
    EXPECT_EQ(s.vr, c.vr);
    EXPECT_EQ(s.lr, c.lr);
    EXPECT_EQ(s.lp, c.lp);
    EXPECT_EQ(s.t, c.steps);
    EXPECT_EQ(s.lr * s.lp, 32);
    EXPECT_LE(s.td(), s.threads());  // one look-back thread per row of a tile
    // The 16-bit memory-bound layout rescans (measured faster on the H200, sixteenth session);
    // f32, the instruction-bound and the element-access layouts do not.
    EXPECT_EQ(s.rescan, c.t == DType::bf16 && c.vr == 2 && c.lr == 16) << "rescan";
  }
  // Along the last axis: 64 register words of elements for cumsum-like kernels (2 words per
  // element, no transcendentals: bf16 4 steps of 8, f32 8 of 4; measured, seventeenth session);
  // logcumsumexp (the same words, a transcendental combine) keeps 40 (f32: 4 steps).
  for (auto [kernel, t, steps] :
       {std::tuple{"cumsum", DType::bf16, 4}, std::tuple{"cumsum", DType::f32, 8},
        std::tuple{"logcumsumexp", DType::f32, 4}}) {
    ScanSchedule s = choose_scan("scan.kdsl", kernel, t, 32768);
    EXPECT_EQ(s.name, "scan.rows") << kernel;
    EXPECT_EQ(s.t, steps) << kernel << " " << dtype_name(t);
  }
  // rescan=0 gives the previous default (16 steps for linear_recurrence bf16); pipelining, which
  // loads the next tile in phase A, does not rescan either; rescan=1 on f32 does.
  {
    ScanScheduleEnv env("rescan=0");
    ScanSchedule s = choose_scan("linear_recurrence.kdsl", "linear_recurrence", DType::bf16, 32768);
    EXPECT_FALSE(s.rescan);
    EXPECT_EQ(s.t, 16);
  }
  {
    ScanScheduleEnv env("pipeline=1");
    ScanSchedule s = choose_scan("linear_recurrence.kdsl", "linear_recurrence", DType::bf16, 32768);
    EXPECT_FALSE(s.rescan);
    EXPECT_EQ(s.t, 16);
  }
  {
    ScanScheduleEnv env("pipeline=1,rescan=1");
    ScanSchedule s = choose_scan("scan.kdsl", "cumsum_mid", DType::bf16, 32768);
    EXPECT_FALSE(s.rescan);
    EXPECT_NE(fmt::format("{}", fmt::join(s.reasons, "\n")).find("rescan=1 ignored"),
              std::string::npos);
  }
  // pos64 and keep, middle-axis keys too, say so the same way on a last-axis scan.
  {
    ScanScheduleEnv env("pos64=1,keep=0");
    const std::string why = fmt::format(
        "{}", fmt::join(choose_scan("scan.kdsl", "cumsum", DType::f32, 32768).reasons, "\n"));
    EXPECT_NE(why.find("pos64=1 ignored: it applies to scans along a middle axis"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("keep=0 ignored"), std::string::npos) << why;
    EXPECT_EQ(fmt::format(
                  "{}", fmt::join(choose_scan("scan.kdsl", "cumsum_mid", DType::f32, 32768).reasons,
                                  "\n"))
                  .find("ignored"),
              std::string::npos);
  }
  {
    ScanScheduleEnv env("rescan=1");
    EXPECT_TRUE(choose_scan("scan.kdsl", "cumsum_mid", DType::f32, 32768).rescan);
  }
  // f16 rescans as bf16 does; short sequences (element accesses) do not.
  EXPECT_TRUE(choose_scan("linear_recurrence.kdsl", "linear_recurrence", DType::f16, 32768).rescan);
  EXPECT_FALSE(choose_scan("scan.kdsl", "cumsum_mid", DType::bf16, 256).rescan);
  EXPECT_TRUE(choose_scan("scan.kdsl", "cumsum_mid", DType::bf16, 257).rescan);
  // A layout override keeps the default's rescanning with 2-row accesses (a tuned record of the
  // default layout compiles to the default's code) but not with element accesses (unpacked
  // loads: nothing saved, not measured), unless rescan=1 asks for it.
  {
    ScanScheduleEnv env("t=32,lp=2,vr=2");
    ScanSchedule s = choose_scan("linear_recurrence.kdsl", "linear_recurrence", DType::bf16, 32768);
    EXPECT_TRUE(s.rescan);
    EXPECT_EQ(s.min_ctas, 2);
  }
  {
    ScanScheduleEnv env("t=8");
    EXPECT_FALSE(
        choose_scan("linear_recurrence.kdsl", "linear_recurrence", DType::bf16, 32768).rescan);
  }
  {
    ScanScheduleEnv env("t=8,rescan=1");
    EXPECT_TRUE(
        choose_scan("linear_recurrence.kdsl", "linear_recurrence", DType::bf16, 32768).rescan);
  }
  // Overrides of the layout start from the element-access one they were measured against, and
  // a tile with more rows than threads is the override's error, not an internal one.
  {
    ScanScheduleEnv env("t=16");
    ScanSchedule s = choose_scan("scan.kdsl", "cumsum_mid", DType::f32, 32768);
    EXPECT_EQ(s.vr, 1);
    EXPECT_EQ(s.lr, 8);
    EXPECT_EQ(s.t, 16);
  }
  {
    ScanScheduleEnv env("pipeline=1");  // not a layout key: the 8-byte layout stays
    EXPECT_EQ(choose_scan("scan.kdsl", "cumsum_mid", DType::f32, 32768).vr, 2);
  }
  {
    ScanScheduleEnv env("vr=8,wp=1");
    EXPECT_THROW(choose_scan("scan.kdsl", "cumsum_mid", DType::f32, 32768), ArgumentError);
  }
  // The memory-bound 2-row layout plans two 256-thread CTAs per SM and says so in its launch
  // bounds (without them linear_recurrence_bwd bf16 took 144 registers: one CTA per SM, 38%
  // slower on the H200). Given as an override (a tuned record of the default layout), it gets
  // the same bounds within the same register budget; a ctas key wins. RG-LRU backward's 16-bit
  // instruction-bound layout asks for two CTAs as well (it keeps phase A's sigmoid and exp for
  // phase B: 164 registers without the bounds); other layouts, the forward's too, get none.
  EXPECT_EQ(
      choose_scan("linear_recurrence.kdsl", "linear_recurrence_bwd", DType::bf16, 32768).min_ctas,
      2);
  EXPECT_EQ(choose_scan("rg_lru.kdsl", "rg_lru_bwd", DType::bf16, 32768).min_ctas, 2);
  EXPECT_EQ(choose_scan("rg_lru.kdsl", "rg_lru_bwd", DType::f32, 32768).min_ctas, 0);
  EXPECT_EQ(choose_scan("rg_lru.kdsl", "rg_lru", DType::bf16, 32768).min_ctas, 0);
  EXPECT_EQ(choose_scan("scan.kdsl", "logcumsumexp_mid", DType::bf16, 32768).min_ctas, 0);
  const std::pair<const char*, int> overrides[] = {
      {"t=16,lp=2,vr=2", 2}, {"t=8,lp=2,vr=2", 2}, {"t=16,lp=2,vr=2,ctas=3", 3},
      {"t=16,lp=4,vr=4", 0}, {"ctas=0", 0},        {"t=32,lp=2,vr=2", 0}};  // past the budget
  {
    ScanScheduleEnv env("ctas=3");  // the explain follows the bounds the code gets
    ScanSchedule s =
        choose_scan("linear_recurrence.kdsl", "linear_recurrence_bwd", DType::bf16, 32768);
    EXPECT_EQ(s.min_ctas, 3);
    EXPECT_NE(fmt::format("{}", fmt::join(s.reasons, "\n")).find("at least 3 CTAs"),
              std::string::npos);
  }
  // Sequences of 2^62 positions or more are refused (64-bit chunk counts would overflow).
  EXPECT_THROW(choose_scan("scan.kdsl", "cumsum_mid", DType::bf16, int64_t{1} << 62),
               ArgumentError);
  for (const auto& [layout, ctas] : overrides) {
    SCOPED_TRACE(layout);
    ScanScheduleEnv env(layout);
    EXPECT_EQ(
        choose_scan("linear_recurrence.kdsl", "linear_recurrence_bwd", DType::bf16, 32768).min_ctas,
        ctas);
  }
  // So does RG-LRU backward's heavy-math layout given as an override (docs/cli.md names
  // t=8,lp=1,vr=2 as its default; tune's candidates): the same bounds, and the explain says why.
  // Other layouts of it, and the forward's (no shifted operand), get none.
  const std::pair<const char*, int> heavy_overrides[] = {{"t=8,lp=1,vr=2", 2},
                                                         {"t=16,lp=1,vr=2", 0},
                                                         {"t=8,lp=2,vr=2", 0},
                                                         {"t=8,lp=1,vr=2,ctas=3", 3}};
  for (const auto& [layout, ctas] : heavy_overrides) {
    SCOPED_TRACE(layout);
    ScanScheduleEnv env(layout);
    ScanSchedule s = choose_scan("rg_lru.kdsl", "rg_lru_bwd", DType::bf16, 32768);
    EXPECT_EQ(s.min_ctas, ctas);
    if (ctas == 2) {
      EXPECT_NE(fmt::format("{}", fmt::join(s.reasons, "\n")).find("heavy-math 2-row layout"),
                std::string::npos);
    }
  }
  {
    ScanScheduleEnv env("t=8,lp=1,vr=2");
    EXPECT_EQ(choose_scan("rg_lru.kdsl", "rg_lru", DType::bf16, 32768).min_ctas, 0);
  }
  // The variable is read strictly: what is not key=integer, or a key given twice, is an error
  // naming it, not a value read up to its first stray character; so is a value out of its key's
  // range (packed and the look-back's knobs too) and an empty item, a trailing comma included.
  for (const char* bad :
       {"t=4;vr=2", "vr=2.9", "t=16,t=8", "t", "=4", "t=", "t=4,,vr=2", "packed=2", "packed=-5",
        "pipeline=3", "window=3", "ctas=33", "t=16,vr=2,"}) {
    ScanScheduleEnv env(bad);
    try {
      choose_scan("scan.kdsl", "cumsum_mid", DType::f32, 32768);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("KDSL_SCAN_SCHEDULE"), std::string::npos) << e.what();
    }
  }
  // A layout override holding more than 1024 register words per thread is refused (it would
  // compile for minutes into a kernel that spills): 64 steps x 16 rows of c64 recurrences.
  {
    ScanScheduleEnv env("t=64,vr=16,lp=32,wp=1");
    try {
      choose_scan("linear_recurrence.kdsl", "linear_recurrence", DType::c64, 32768);
      ADD_FAILURE() << "a tile of 8192 register words was accepted";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("at most 1024"), std::string::npos) << e.what();
    }
  }
  {
    ScanScheduleEnv env(" t = 16 , vr=2 ");  // spaces around items, keys and values
    EXPECT_EQ(choose_scan("scan.kdsl", "cumsum_mid", DType::f32, 32768).t, 16);
  }
  // The 16-bit heavy-math layout was measured with the approximate math only.
  {
    testing::ScopedEnv env("KDSL_MATH", "accurate");
    ScanSchedule s = choose_scan("rg_lru.kdsl", "rg_lru_bwd", DType::bf16, 32768);
    EXPECT_EQ(s.vr, 1);
    EXPECT_EQ(s.lr, 16);
  }
  // The last axis keeps its own layout: lanes along the positions, one row per access.
  ScanSchedule rows = choose_scan("scan.kdsl", "cumsum", DType::f32, 32768);
  EXPECT_EQ(rows.name, "scan.rows");
  EXPECT_EQ(rows.vr, 1);
  EXPECT_EQ(rows.lp, 32);
}

// KDSL_SCAN_SCHEDULE is read by the --schedule hint's reader: the same text is accepted or refused
// for the same reason, in the same words, with the variable's name for the hint's.
TEST(ScanSchedule, VariableReadsAsTheScheduleHint) {
  auto hint_message = [](const std::string& text) {
    try {
      ScheduleHint::parse(text);
    } catch (const ScheduleHintError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  auto variable_message = [](const std::string& text) {
    ScanScheduleEnv env(text.c_str());
    try {
      choose_scan("scan.kdsl", "cumsum_mid", DType::f32, 32768);
    } catch (const ScheduleHintError& e) {
      return "a ScheduleHintError (the CLI would name --schedule): " + std::string(e.what());
    } catch (const ArgumentError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  for (const char* text :
       {"t=16,,vr=2", "t=16,vr=2,", ",t=16", "t=16,t=8", "t=x", "t", "t=3", "lp=64", "vr=32",
        "t=99999999999999999999", " t = 16 , vr = 2 ", "t=+16", "t=16;vr=2"}) {
    SCOPED_TRACE(text);
    std::string expected = hint_message(text);
    if (expected.starts_with("schedule hint ")) {
      expected = "KDSL_SCAN_SCHEDULE " + expected.substr(std::string("schedule hint ").size());
    }
    EXPECT_EQ(variable_message(text), expected);
  }
  // Its own keys name their ranges the same way.
  EXPECT_EQ(variable_message("t=16,packed=2"), "KDSL_SCAN_SCHEDULE 'packed=2': packed is 0 or 1");
  EXPECT_EQ(variable_message("packed=-5"), "KDSL_SCAN_SCHEDULE 'packed=-5': packed is 0 or 1");
  EXPECT_EQ(variable_message("pipeline=3"),
            "KDSL_SCAN_SCHEDULE 'pipeline=3': pipeline is 0, 1 or 2");
  EXPECT_EQ(
      variable_message("group=256"),
      "KDSL_SCAN_SCHEDULE 'group=256': keys are t (1 to 64), lp, wp, window (1 to 32), vr "
      "(1 to 16), powers of two; pipeline (0, 1, 2), ctas (0 to 32), packed (0 or 1), rescan (0 or "
      "1), pos64 (0 or 1), keep (0 or 1)");
  EXPECT_EQ(variable_message("pos64=2"), "KDSL_SCAN_SCHEDULE 'pos64=2': pos64 is 0 or 1");
  {
    ScanScheduleEnv env(" packed = 0 , pipeline = 2 ");
    ScanSchedule s = choose_scan("scan.kdsl", "cumsum_mid", DType::f32, 32768);
    EXPECT_FALSE(s.packed);
    EXPECT_TRUE(s.async_copy);
  }
}

// The explain names the sequence's length by the kernel's own symbol: N along the last axis of
// cumsum's (M, N), L along the middle axis of (B, L, D).
TEST(ScanSchedule, ExplainNamesTheLengthByTheKernelsSymbol) {
  auto joined = [](const ScanSchedule& s) { return fmt::format("{}", fmt::join(s.reasons, "\n")); };
  const std::string rows = joined(choose_scan("scan.kdsl", "cumsum", DType::f32, 32768));
  EXPECT_NE(rows.find("scan.rows: N = 32768, forward scan"), std::string::npos) << rows;
  EXPECT_EQ(rows.find("L = "), std::string::npos) << rows;
  const std::string mid = joined(choose_scan("scan.kdsl", "cumsum_mid", DType::f32, 32768));
  EXPECT_NE(mid.find("scan.columns: L = 32768, forward scan"), std::string::npos) << mid;
}

// The row reductions' partial states of every warp of a row sit in static shared memory, at most
// 48 KiB a kernel (ptxas: "uses too much shared data (0x11010 bytes, 0xc000 max)"): nine
// reductions at one point (argmax, argmin and var among them, 136 bytes of f64 states) on 256
// warps per row take 68 KiB. A usage error naming the hint, or without a hint (the default's
// 8192 threads per row at N = 4194304) an argument error, where NVRTC failed before; the packed
// pushes (push=2) count their structs' padding; 2048 threads per row still compile.
TEST(RowSchedule, PartialStatesBeyondStaticSharedMemoryAreAnError) {
  auto fe = run_front_end(std::make_shared<const SourceFile>("fat.kdsl", R"(
@kernel
def fat[T: (f32, f64)](x: Tensor[T, (M, N)], *, y: Out[T, (M, N)], a: Out[i64, (M,)],
                       b: Out[i64, (M,)], c: Out[i64, (M,)], d: Out[i64, (M,)]):
    for m in parallel(M):
        xf = x[m, :]
        a[m] = argmax(xf)
        b[m] = argmin(xf)
        c[m] = argmax(xf * xf)
        d[m] = argmin(xf * xf)
        y[m, :] = xf * max(xf) + min(xf) + sum(xf) + var(xf) + var(xf * xf)
)"));
  DeviceTarget target;
  target.arch = "sm_90";
  auto schedule = [&](DType t, int64_t n, const char* hint) {
    Specialization spec{{t}, n, ~0u, ~0u};
    ir::Kernel k = lower_specialized(*fe, "fat", spec);
    return choose_row_schedule(k, spec, target, ScheduleHint::parse(hint));
  };
  for (const char* hint : {"cluster=8,group=8192", "cluster=8,group=8192,push=3"}) {
    try {
      schedule(DType::f64, 32768, hint);
      ADD_FAILURE() << hint << ": no error";
    } catch (const ScheduleHintError& e) {
      EXPECT_NE(std::string(e.what()).find("68.0 KiB of static shared memory, beyond the 48 KiB"),
                std::string::npos)
          << e.what();
    }
  }
  // f32: 100 bytes of states a partial (50 KiB).
  EXPECT_THROW(schedule(DType::f32, 32768, "cluster=8,group=8192"), ScheduleHintError);
  try {
    schedule(DType::f32, 4194304, "");
    ADD_FAILURE() << "no error at N = 4194304";
  } catch (const ScheduleHintError& e) {
    ADD_FAILURE() << "a hint error without a hint: " << e.what();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("fat: rows of N = 4194304 elements on 8192 threads"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(schedule(DType::f64, 32768, "cluster=8,group=2048,push=3").group, 2048);
}

// The stages' fit counts the partial states at their bytes: two f64 variances are 48 bytes a
// warp's partial, beyond the 16 a state the fit assumed before. Seven stages of 32 KiB (224 KiB)
// and 3.0 KiB of partials exceed 227 KiB, so six are staged (found in review: the old fit
// staged seven, a launch beyond the shared memory of a CTA).
TEST(RowSchedule, StagesFitTheExactBytesOfWidePartialStates) {
  auto fe = run_front_end(std::make_shared<const SourceFile>("vv.kdsl", R"(
@kernel
def vv[T: (f64,)](x: Tensor[T, (M, N)], *, y: Out[T, (M, N)], v: Out[f64, (M,)]):
    for m in parallel(M):
        xf = x[m, :]
        a = var(xf)
        b = var(xf * 2.0)
        v[m] = a + b
        y[m, :] = xf * a
)"));
  DeviceTarget target;
  target.arch = "sm_90";
  Specialization spec{{DType::f64}, 4096, ~0u, ~0u};
  ir::Kernel k = lower_specialized(*fe, "vv", spec);
  RowSchedule s = choose_row_schedule(
      k, spec, target, ScheduleHint::parse("group=1024,cluster=1,persistent=1,stage=8"));
  EXPECT_EQ(s.stage, 6) << reasons(s);
  EXPECT_TRUE(has_reason(s,
                         "stage=8 does not fit: 8 buffers of 32 KiB (a row each), 0 KiB of "
                         "column accumulators and 3 KiB of partials need 259 KiB"))
      << reasons(s);
  // Five stages and the partials fit: the hint is taken as asked.
  EXPECT_EQ(choose_row_schedule(k, spec, target,
                                ScheduleHint::parse("group=1024,cluster=1,persistent=1,stage=5"))
                .stage,
            5);
}

}  // namespace
}  // namespace kdsl

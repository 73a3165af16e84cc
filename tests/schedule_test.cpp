// The row scheduler's choices at the shapes they were measured on (bench/RESULTS.md, fourth
// session), the schedule hints' checks, and the launch plan of a cluster schedule. A change of
// rule shows here first; the reasons are in src/schedule.h and src/schedule.cpp.
#include "src/schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "kdsl/error.h"
#include "src/compiler.h"
#include "src/launch_plan.h"

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
};

Chosen choose(const std::string& file, const std::string& kernel, DType t, int64_t n,
              const std::string& hint = "", const std::string& arch = "sm_90") {
  Specialization spec{{t}, n, ~0u, ~0u};
  ir::Kernel k = lower_specialized(module(file), kernel, spec);
  DeviceTarget target;
  target.arch = arch;
  RowSchedule s = choose_row_schedule(k, spec, target, ScheduleHint::parse(hint));
  return {std::move(k), spec, std::move(s)};
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
  Chosen r = choose("rms_norm.kdsl", "rms_norm", DType::bf16, 32768);
  EXPECT_TRUE(r.s.persistent);
  EXPECT_EQ(r.s.group, 512);
  EXPECT_EQ(r.s.cluster, 1);
  Chosen s = choose("softmax.kdsl", "softmax", DType::bf16, 32768);  // two phases: no cluster
  EXPECT_TRUE(s.s.persistent);
  EXPECT_EQ(s.s.group, 1024);
  EXPECT_EQ(s.s.cluster, 1);
}

TEST(RowSchedule, ClustersWhereOneCtaPerRowWasMeasuredSlower) {
  // Backward rows that do not fit one CTA: accumulators beyond shared memory (LayerNorm) or
  // elements beyond registers (RMSNorm).
  for (auto [file, kernel] : {std::pair{"layer_norm.kdsl", "layer_norm_bwd"},
                              std::pair{"rms_norm.kdsl", "rms_norm_bwd"}}) {
    Chosen c = choose(file, kernel, DType::bf16, 32768);
    EXPECT_EQ(c.s.name, "rows.cluster") << kernel;
    EXPECT_EQ(c.s.cluster, 4) << kernel;
    EXPECT_TRUE(c.s.smem_columns) << kernel;
    EXPECT_TRUE(c.s.cache_rows) << kernel;
    EXPECT_EQ(c.s.threads, c.s.group / 4) << kernel;
  }
  // A long single-phase row: four CTAs of 256 threads.
  Chosen b = choose("softmax.kdsl", "softmax_bwd", DType::bf16, 32768);
  EXPECT_EQ(b.s.cluster, 4);
  EXPECT_EQ(b.s.group, 1024);
  EXPECT_EQ(b.s.threads, 256);
  // Backward kernels with one chunk per thread at 1024 threads: 512 threads, prefetching.
  Chosen p = choose("rms_norm.kdsl", "rms_norm_bwd", DType::bf16, 8192);
  EXPECT_EQ(p.s.group, 512);
  EXPECT_TRUE(p.s.prefetch);
  EXPECT_EQ(p.s.cluster, 1);
  // A user's group stands: no cluster is added to it.
  Chosen u = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 32768, "group=1024");
  EXPECT_EQ(u.s.cluster, 1);
  EXPECT_EQ(u.s.group, 1024);
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
  // Without a cluster the generated source has none of it.
  Chosen one = choose("layer_norm.kdsl", "layer_norm_bwd", DType::bf16, 8192);
  std::string src = generate(one.k, one.spec, DeviceTarget{}).source;
  EXPECT_EQ(src.find("__cluster_dims__"), std::string::npos);
  EXPECT_EQ(src.find("kdsl_cluster_sync"), std::string::npos);
}

}  // namespace
}  // namespace kdsl

// The GPU actions of the `kdsl` binary: run (--verify, --bench, .npy in and out) and bench.
// Skipped without a GPU. On the GPU machine (after scripts/device/stage.sh) it runs the kdsl
// staged beside it: scripts/device/gpu_checks.sh cli_gpu_test.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "src/driver.h"
#include "src/host_tensor.h"
#include "src/npy.h"

namespace kdsl::testing {
namespace {

#define REQUIRE_GPU()                                                                         \
  do {                                                                                        \
    std::string why_;                                                                         \
    if (!::kdsl::driver_or_null(&why_) || ::kdsl::device_count() == 0) {                      \
      GTEST_SKIP() << "skipped: no GPU (" << (why_.empty() ? "no CUDA device" : why_) << ")"; \
    }                                                                                         \
  } while (0)

const std::string kRms = "stdlib/rms_norm.kdsl";

TEST_F(CliTest, RunVerifyPassesOnTheGpu) {
  REQUIRE_GPU();
  CliResult r = kdsl(
      {"run", kRms, "-k", "rms_norm", "--dtype", "bf16", "--shape", "M=256,N=4096", "--verify"});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("kdsl_rms_norm_bf16_n4096 on "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verify y: ok (1048576 values, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verify rstd: ok (256 values, "), std::string::npos) << r.out;
}

TEST_F(CliTest, RunOnTheGpuReadsAndWritesNpyFiles) {
  REQUIRE_GPU();
  // Row [3, 4, 0, 0] with eps = 0: r = 0.4, y = x * r * w.
  HostTensor x(DType::f32, {1, 4});
  HostTensor w(DType::f32, {4});
  double xs[] = {3, 4, 0, 0}, ws[] = {1, 2, 0.5, -1};
  for (int i = 0; i < 4; ++i) {
    x.set(i, xs[i]);
    w.set(i, ws[i]);
  }
  write_npy(path("x.npy"), x);
  write_npy(path("w.npy"), w);
  CliResult r =
      kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f32", "--in", "x=" + path("x.npy"), "--in",
            "w=" + path("w.npy"), "--arg", "eps=0", "--out", "y=" + path("y.npy"), "--verify"});
  ASSERT_EQ(r.code, 0) << show(r);
  HostTensor y = read_npy(path("y.npy"), DType::f32);
  double want[] = {1.2, 3.2, 0, 0};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y.get(i), want[i], 1e-5) << i;
}

TEST_F(CliTest, RunVerifyBenchJson) {
  REQUIRE_GPU();
  CliResult r = kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f16", "--shape", "M=512,N=1024",
                      "--verify", "--bench", "--reps", "5", "--warmup", "2", "--json"});
  ASSERT_EQ(r.code, 0) << show(r);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["symbol"], "kdsl_rms_norm_f16_n1024");
  ASSERT_EQ(j["verify"].size(), 2u);
  EXPECT_EQ(j["verify"][0]["ok"], true);
  EXPECT_GT(j["bench"]["median_us"].get<double>(), 0);
  EXPECT_GT(j["bench"]["copy_GBps"].get<double>(), 100);
  EXPECT_EQ(j["bench"]["bytes"], 2 * 512 * 1024 * 2 + 1024 * 2 + 512 * 4);
  // At least --warmup runs, and more to fill --warmup-ms (25 ms of a kernel of a few us).
  EXPECT_GT(j["bench"]["warmup"].get<int>(), 2);
  EXPECT_EQ(j["bench"]["warmup_ms"].get<double>(), 25.0);
}

TEST_F(CliTest, RunBenchWarmupByCountOnly) {
  REQUIRE_GPU();
  CliResult r = kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f16", "--shape", "M=512,N=1024",
                      "--bench", "--reps", "5", "--warmup", "3", "--warmup-ms", "0", "--json"});
  ASSERT_EQ(r.code, 0) << show(r);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["bench"]["warmup"].get<int>(), 3);
}

TEST_F(CliTest, BenchPrintsATableAndJson) {
  REQUIRE_GPU();
  CliResult r = kdsl({"bench", kRms, "-k", "rms_norm", "--dtype", "f32,bf16", "--shape",
                      "M=1024,N=1024,4096", "--reps", "5", "--warmup", "2"});
  ASSERT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("copy bandwidth "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernel               dtype  shape"), std::string::npos) << r.out;
  EXPECT_EQ(count_lines(r.out), 2u + 4u) << r.out;  // device line, header, 2 dtypes x 2 shapes
  EXPECT_NE(r.out.find("rms_norm             bf16   M=1024,N=4096"), std::string::npos) << r.out;

  CliResult j = kdsl({"bench", kRms, "-k", "rms_norm", "--dtype", "bf16", "--shape",
                      "M=2048,N=8192", "--reps", "5", "--warmup", "2", "--json"});
  ASSERT_EQ(j.code, 0) << show(j);
  auto doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["results"].size(), 1u);
  const auto& row = doc["results"][0];
  EXPECT_EQ(row["symbol"], "kdsl_rms_norm_bf16_n8192");
  double ratio = row["ratio_to_copy"].get<double>();
  EXPECT_GT(ratio, 0.05);
  EXPECT_LT(ratio, 2.0);
}

}  // namespace
}  // namespace kdsl::testing

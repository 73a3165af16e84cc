// The driver loader without a GPU: a missing libcuda.so.1 is a clear error, never a crash.
#include "src/driver.h"
#include "src/gpu_bench.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "kdsl/error.h"

namespace kdsl {
namespace {

TEST(Driver, MissingLibraryGivesNullAndAReason) {
  std::string why;
  auto d = load_driver("libkdsl_no_such_cuda.so.1", &why);
  EXPECT_EQ(d, nullptr);
  EXPECT_NE(why.find("no CUDA driver"), std::string::npos) << why;
  EXPECT_NE(why.find("libkdsl_no_such_cuda.so.1 not found"), std::string::npos) << why;
  EXPECT_NE(why.find("launching needs the NVIDIA driver"), std::string::npos) << why;
}

TEST(Driver, StubLibraryResolvesEverySymbolThenFailsInit) {
  // The toolkit's link stub exports every driver function (so this checks the versioned names
  // against CUDA 13) but its cuInit always fails. It is only opened here, never linked.
  const char* root = std::getenv("CUDA_HOME");
  std::string stub =
      std::string(root != nullptr ? root : "/usr/local/cuda") + "/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no CUDA stub library at " << stub;
  std::string why;
  EXPECT_EQ(load_driver(stub, &why), nullptr);
  EXPECT_NE(why.find("cuInit failed because " + stub + " is the CUDA toolkit's link stub"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("too old"), std::string::npos) << why;
}

TEST(Driver, ProcessDriverIsNullWithReasonOrUsable) {
  std::string why;
  const Driver* d = driver_or_null(&why);
  if (d != nullptr) {
    // A machine with a driver: every function resolved, the version known.
    EXPECT_NE(d->cuLaunchKernel, nullptr);
    EXPECT_NE(d->cuMemAlloc, nullptr);
    EXPECT_GE(d->version, 12000);
    EXPECT_NO_THROW(driver());
    return;
  }
  EXPECT_FALSE(why.empty());
  // The same answer on the second call (loaded once).
  std::string again;
  EXPECT_EQ(driver_or_null(&again), nullptr);
  EXPECT_EQ(again, why);
  try {
    driver();
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    EXPECT_EQ(std::string(e.what()), why);
    if (why.starts_with("no CUDA driver")) {
      EXPECT_NE(why.find("libcuda.so.1"), std::string::npos) << why;
    }
  }
  EXPECT_THROW(device_count(), CudaError);
  EXPECT_THROW(device_info(0), CudaError);
  EXPECT_THROW(primary_context(0), CudaError);
  EXPECT_THROW(DeviceBuffer(16), CudaError);
}

TEST(Driver, CheckNamesTheCallAndTheError) {
  EXPECT_NO_THROW(check(CUDA_SUCCESS, "cuNothing"));
  try {
    check(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc");
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("cuMemAlloc failed"), std::string::npos) << msg;
    // With a driver: the name; without: the number.
    EXPECT_TRUE(msg.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos ||
                msg.find("CUresult 2") != std::string::npos)
        << msg;
  }
}

TEST(Driver, EmptyDeviceBufferNeedsNoDriver) {
  DeviceBuffer b;
  EXPECT_EQ(b.ptr(), 0u);
  EXPECT_EQ(b.size(), 0u);
  DeviceBuffer zero(0);
  EXPECT_EQ(zero.ptr(), 0u);
  DeviceBuffer moved = std::move(zero);
  EXPECT_EQ(moved.size(), 0u);
}

}  // namespace
}  // namespace kdsl

// time_cuda's warm-up batches (src/gpu_bench.cpp), which need no GPU to check.
TEST(Timing, WarmupFillsTheMinimumTimeFromTheMeanRun) {
  using kdsl::next_warmup_batch;
  EXPECT_EQ(next_warmup_batch(10, 25.0, 0, 0, 0, 0), 10);      // the warm-up runs first
  EXPECT_EQ(next_warmup_batch(0, 25.0, 0, 0, 0, 0), 1);        // at least one to size the rest
  EXPECT_EQ(next_warmup_batch(0, 0.0, 0, 0, 0, 0), 0);         // --warmup 0 --warmup-ms 0: none
  EXPECT_EQ(next_warmup_batch(10, 0.0, 10, 1.0, 10, 1.0), 0);  // count only: done after them
  // 10 runs of 0.125 ms: 23.75 ms left at 0.125 ms a run.
  EXPECT_EQ(next_warmup_batch(10, 25.0, 10, 1.25, 10, 1.25), 190);
  // A slow first run (a cold instruction cache) sizes the next batch short; the loop goes on
  // with the next batch's mean.
  EXPECT_EQ(next_warmup_batch(1, 25.0, 1, 5.0, 1, 5.0), 4);
  EXPECT_EQ(next_warmup_batch(1, 25.0, 5, 5.5, 4, 0.5), 156);
  EXPECT_EQ(next_warmup_batch(1, 25.0, 161, 25.0, 156, 19.5), 0);  // 25 ms reached
  // A NaN time counts as none.
  EXPECT_EQ(next_warmup_batch(3, std::nan(""), 0, 0, 0, 0), 3);
  EXPECT_EQ(next_warmup_batch(3, std::nan(""), 3, 0.3, 3, 0.3), 0);
}

TEST(Timing, WarmupEndsWhenRunsTakeNoTime) {
  // A launch with nothing to do (M = 0) adds no GPU time: the batches are capped, and the
  // warm-up stops kMaxExtraWarmup runs beyond --warmup.
  using kdsl::kMaxExtraWarmup;
  using kdsl::next_warmup_batch;
  int done = 5, batch = next_warmup_batch(5, 25.0, 0, 0, 0, 0), rounds = 0;
  EXPECT_EQ(batch, 5);
  while ((batch = next_warmup_batch(5, 25.0, done, 0.0, batch, 0.0)) > 0) {
    EXPECT_LE(done + batch, 5 + kMaxExtraWarmup);
    done += batch;
    ASSERT_LT(++rounds, 10);
  }
  EXPECT_EQ(done, 5 + kMaxExtraWarmup);
}

// The driver loader without a GPU: a missing libcuda.so.1 is a clear error, never a crash.
#include "src/driver.h"

#include <gtest/gtest.h>

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

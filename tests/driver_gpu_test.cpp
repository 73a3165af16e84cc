// Driver, NVRTC and module loading on a real GPU. Skips, saying so, without a CUDA driver.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kdsl/error.h"
#include "src/driver.h"
#include "src/module.h"
#include "src/nvrtc.h"

namespace kdsl {
namespace {

#define KDSL_REQUIRE_GPU()                                             \
  do {                                                                 \
    std::string why;                                                   \
    if (driver_or_null(&why) == nullptr) GTEST_SKIP() << why;          \
    if (device_count() == 0) GTEST_SKIP() << "no CUDA device visible"; \
  } while (0)

// y[i] = a * x[i] + (bytes of dynamic shared memory, as a float), staged through shared memory.
constexpr const char* kKernel = R"(
extern "C" __global__ void kdsl_gpu_test_axpb(float* y, const float* x, float a, int n,
                                              int smem_floats) {
  extern __shared__ float stage[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int slot = threadIdx.x % smem_floats;
  if (i < n) stage[slot] = x[i];
  __syncthreads();
  if (i < n) y[i] = a * stage[slot] + 4.0f * smem_floats;
}
)";

TEST(DriverGpu, DeviceInfoIsPlausible) {
  KDSL_REQUIRE_GPU();
  DeviceInfo info = device_info(0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.cc_major, 7);
  EXPECT_EQ(info.arch, "sm_" + std::to_string(info.cc_major) + std::to_string(info.cc_minor));
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GE(info.max_smem_per_block_optin, 48 * 1024);
  EXPECT_GT(info.l2_bytes, 0u);
  EXPECT_GT(info.total_mem, size_t{1} << 30);
  EXPECT_THROW(device_info(device_count()), CudaError);
}

TEST(DriverGpu, AllocMemsetCopyBack) {
  KDSL_REQUIRE_GPU();
  primary_context(0);
  const Driver& d = driver();
  DeviceBuffer buf(1 << 20);
  ASSERT_NE(buf.ptr(), 0u);
  check(d.cuMemsetD8(buf.ptr(), 0x5a, buf.size()), "cuMemsetD8");
  std::vector<unsigned char> host(buf.size());
  check(d.cuMemcpyDtoH(host.data(), buf.ptr(), host.size()), "cuMemcpyDtoH");
  for (size_t i = 0; i < host.size(); i += 4093) ASSERT_EQ(host[i], 0x5a) << i;
  EXPECT_EQ(host.back(), 0x5a);

  DeviceBuffer moved = std::move(buf);
  EXPECT_EQ(buf.ptr(), 0u);
  EXPECT_NE(moved.ptr(), 0u);
}

// Compiles, loads and launches the kernel on device `ordinal` and checks every output element.
void run_axpb(int dynamic_smem_bytes, int ordinal = 0) {
  CUcontext ctx = primary_context(ordinal);
  const Driver& d = driver();
  Cubin cubin = nvrtc_compile(kKernel, "kdsl_gpu_test_axpb", device_info(ordinal).arch, {});
  LoadedKernel k = load_kernel(ctx, cubin.data, "kdsl_gpu_test_axpb", dynamic_smem_bytes);
  // The second load returns the same handles.
  LoadedKernel again = load_kernel(ctx, cubin.data, "kdsl_gpu_test_axpb", dynamic_smem_bytes);
  EXPECT_EQ(k.module, again.module);
  EXPECT_EQ(k.function, again.function);

  int n = 100000;
  std::vector<float> x(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 1000) * 0.5f;
  DeviceBuffer dx(x.size() * sizeof(float));
  DeviceBuffer dy(x.size() * sizeof(float));
  check(d.cuMemcpyHtoD(dx.ptr(), x.data(), dx.size()), "cuMemcpyHtoD");
  check(d.cuMemsetD8(dy.ptr(), 0, dy.size()), "cuMemsetD8");

  float a = 3.0f;
  int smem_floats = dynamic_smem_bytes / 4;
  CUdeviceptr y_ptr = dy.ptr();
  CUdeviceptr x_ptr = dx.ptr();
  void* args[] = {&y_ptr, &x_ptr, &a, &n, &smem_floats};
  unsigned block = 256;
  unsigned grid = (static_cast<unsigned>(n) + block - 1) / block;
  check(d.cuLaunchKernel(k.function, grid, 1, 1, block, 1, 1,
                         static_cast<unsigned>(dynamic_smem_bytes), nullptr, args, nullptr),
        "cuLaunchKernel");
  check(d.cuCtxSynchronize(), "cuCtxSynchronize");

  std::vector<float> y(x.size());
  check(d.cuMemcpyDtoH(y.data(), dy.ptr(), dy.size()), "cuMemcpyDtoH");
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_EQ(y[i], a * x[i] + 4.0f * static_cast<float>(smem_floats)) << "at " << i;
  }
}

TEST(DriverGpu, CompileLoadLaunch) {
  KDSL_REQUIRE_GPU();
  run_axpb(1024);
}

TEST(DriverGpu, EveryDeviceRunsTheKernelInItsOwnContext) {
  KDSL_REQUIRE_GPU();
  for (int i = 0; i < device_count(); ++i) {
    SCOPED_TRACE("device " + std::to_string(i));
    run_axpb(2048, i);
  }
  if (device_count() > 1) {
    // Each context has its own module for the same cubin.
    Cubin cubin = nvrtc_compile(kKernel, "kdsl_gpu_test_axpb", device_info(0).arch, {});
    LoadedKernel k0 = load_kernel(primary_context(0), cubin.data, "kdsl_gpu_test_axpb", 0);
    LoadedKernel k1 = load_kernel(primary_context(1), cubin.data, "kdsl_gpu_test_axpb", 0);
    EXPECT_NE(k0.module, k1.module);
  }
}

TEST(DriverGpu, DynamicSharedMemoryAbove48KiB) {
  KDSL_REQUIRE_GPU();
  if (device_info(0).max_smem_per_block_optin < 96 * 1024) GTEST_SKIP() << "needs 96 KiB";
  run_axpb(96 * 1024);
}

TEST(DriverGpu, TooMuchSharedMemoryIsAClearError) {
  KDSL_REQUIRE_GPU();
  CUcontext ctx = primary_context(0);
  Cubin cubin = nvrtc_compile(kKernel, "kdsl_gpu_test_axpb", device_info(0).arch, {});
  int too_much = device_info(0).max_smem_per_block_optin + 1024;
  try {
    load_kernel(ctx, cubin.data, "kdsl_gpu_test_axpb", too_much);
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(too_much)), std::string::npos) << e.what();
  }
}

TEST(DriverGpu, MissingSymbolAndForeignCubinAreCompileErrors) {
  KDSL_REQUIRE_GPU();
  CUcontext ctx = primary_context(0);
  Cubin cubin = nvrtc_compile(kKernel, "kdsl_gpu_test_axpb", device_info(0).arch, {});
  EXPECT_THROW(load_kernel(ctx, cubin.data, "no_such_kernel", 0), CompileError);
  // A cubin for an architecture newer than any this test expects to run on.
  const auto& archs = nvrtc_supported_archs();
  if (archs.back() != device_info(0).arch) {
    Cubin other = nvrtc_compile(kKernel, "kdsl_gpu_test_axpb", archs.back(), {});
    EXPECT_THROW(load_kernel(ctx, other.data, "kdsl_gpu_test_axpb", 0), CompileError);
  }
  std::string garbage = "definitely not a cubin";
  EXPECT_THROW(load_kernel(ctx, garbage, "kdsl_gpu_test_axpb", 0), CompileError);
}

TEST(DriverGpu, ModulesAreUnloadedPerContext) {
  KDSL_REQUIRE_GPU();
  CUcontext ctx = primary_context(0);
  Cubin cubin = nvrtc_compile(kKernel, "kdsl_gpu_test_axpb", device_info(0).arch, {"-lineinfo"});
  LoadedKernel first = load_kernel(ctx, cubin.data, "kdsl_gpu_test_axpb", 0);
  unload_modules(ctx);
  LoadedKernel second = load_kernel(ctx, cubin.data, "kdsl_gpu_test_axpb", 0);
  EXPECT_NE(second.module, nullptr);
  (void)first;
}

}  // namespace
}  // namespace kdsl

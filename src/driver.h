// The CUDA Driver API, loaded at run time from libcuda.so.1 (never linked), and small helpers on
// it: device properties, primary contexts and an owning device buffer.
//
// kdsl parses, generates and compiles kernels without a GPU; only launching needs the driver. So a
// missing libcuda.so.1 is reported when a driver function is first needed, never at load time.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <memory>
#include <string>

namespace kdsl {

// Every driver function kdsl calls. cuda.h #defines many of these names to versioned symbols
// (cuMemAlloc -> cuMemAlloc_v2, cuGraphInstantiate -> cuGraphInstantiateWithFlags); the table
// follows the same mapping, so `drv.cuMemAlloc(...)` calls exactly what a linked program would.
// clang-format off
#define KDSL_DRIVER_FUNCTIONS(X) \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) \
  X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetAttribute) X(cuDeviceGetName) \
  X(cuDeviceTotalMem) \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) \
  X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetDevice) X(cuCtxSynchronize) \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) \
  X(cuFuncSetAttribute) X(cuFuncGetAttribute) \
  X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuOccupancyMaxActiveClusters) \
  X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemcpyDtoDAsync) \
  X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) \
  X(cuMemsetD8) X(cuMemsetD8Async) X(cuMemGetInfo) X(cuPointerGetAttribute) \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuStreamIsCapturing) X(cuStreamGetCtx) \
  X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy) \
  X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime) X(cuEventDestroy)
// clang-format on

/// Pointers to the driver functions, all non-null once loaded. Immutable after loading, so any
/// thread may call through it.
struct Driver {
#define KDSL_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  KDSL_DRIVER_FUNCTIONS(KDSL_DRIVER_MEMBER)
#undef KDSL_DRIVER_MEMBER
  int version = 0;  ///< cuDriverGetVersion: 1000 * major + 10 * minor (13000 for CUDA 13.0).
};

/// Loads `library` (normally "libcuda.so.1"), resolves every function and calls cuInit(0). Returns
/// null and sets *why (when why is not null) to a user-facing reason when the library is missing,
/// too old, or cuInit fails. Does not cache: each call loads again (tests use it with a missing
/// name).
std::unique_ptr<Driver> load_driver(const std::string& library, std::string* why);

/// The process-wide driver, loaded once from libcuda.so.1 on first call (thread-safe). Returns null
/// with *why set when it cannot be used; never crashes on a machine without a GPU.
const Driver* driver_or_null(std::string* why = nullptr);

/// The process-wide driver. Throws CudaError with the reason when it cannot be loaded.
const Driver& driver();

/// Throws CudaError "<what> failed: <CUDA_ERROR_NAME> (<description>)" unless r is CUDA_SUCCESS.
void check(CUresult r, const char* what);

/// "CUDA_ERROR_NAME (description)" for a result code; works without a driver (prints the number).
std::string cuda_error_text(CUresult r);

/// Properties of one device that code generation and launch configuration use.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;  ///< e.g. "NVIDIA H200".
  int cc_major = 0;  ///< Compute capability, e.g. 9.0 for Hopper.
  int cc_minor = 0;
  std::string arch;  ///< NVRTC architecture for the compute capability, e.g. "sm_90".
  int sm_count = 0;
  int max_smem_per_block_optin = 0;  ///< Bytes of shared memory one CTA may opt in to.
  int max_threads_per_sm = 0;
  size_t l2_bytes = 0;
  size_t total_mem = 0;  ///< Bytes of device memory.
};

/// Number of CUDA devices. Throws CudaError without a driver.
int device_count();

/// Properties of device `ordinal` (queried once per device, then cached; thread-safe). Throws
/// CudaError without a driver or for an ordinal out of range.
DeviceInfo device_info(int ordinal);

/// The primary context of device `ordinal`, retained on first use (kept for the life of the
/// process), and made current on the calling thread. Thread-safe. Throws CudaError.
CUcontext primary_context(int ordinal);

/// Device memory from cuMemAlloc, freed with cuMemFree. Move-only. Allocates in the context current
/// on the calling thread; with unified addressing (every 64-bit Linux platform) it may be freed
/// with any context current.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `bytes` bytes (none for 0, giving ptr() == 0). Throws CudaError (no driver, no
  /// current context, out of memory: the message gives the size).
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  CUdeviceptr ptr() const { return ptr_; }
  size_t size() const { return bytes_; }  ///< Bytes.

 private:
  void release() noexcept;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

}  // namespace kdsl

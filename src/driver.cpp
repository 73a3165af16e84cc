#include "src/driver.h"

#include <dlfcn.h>

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <utility>

#include "kdsl/error.h"

// Two levels so that the argument is macro-expanded first: KDSL_STR(cuMemAlloc) is "cuMemAlloc_v2".
#define KDSL_STR2(x) #x
#define KDSL_STR(x) KDSL_STR2(x)

namespace kdsl {
namespace {

constexpr const char* kNoDriverHint =
    "kdsl can parse, generate and compile kernels without a GPU, but launching needs the NVIDIA "
    "driver";

template <typename Fn>
bool resolve(void* lib, const char* symbol, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (*out == nullptr && missing->empty()) *missing = symbol;
  return *out != nullptr;
}

void set_why(std::string* why, std::string text) {
  if (why != nullptr) *why = std::move(text);
}

// "CUDA_ERROR_NAME (description)", or the number when the driver cannot name it.
std::string error_text(const Driver* d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d != nullptr) {
    d->cuGetErrorName(r, &name);
    d->cuGetErrorString(r, &text);
  }
  if (name == nullptr) return fmt::format("CUresult {}", static_cast<int>(r));
  return fmt::format("{} ({})", name, text != nullptr ? text : "no description");
}

}  // namespace

std::unique_ptr<Driver> load_driver(const std::string& library, std::string* why) {
  // The handle is never closed: the function pointers live as long as the process.
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    set_why(why, fmt::format("no CUDA driver: {} not found ({}; {})", library, kNoDriverHint,
                             err != nullptr ? err : "dlopen failed"));
    return nullptr;
  }
  auto d = std::make_unique<Driver>();
  std::string missing;
#define KDSL_DRIVER_RESOLVE(name) resolve(lib, KDSL_STR(name), &d->name, &missing);
  KDSL_DRIVER_FUNCTIONS(KDSL_DRIVER_RESOLVE)
#undef KDSL_DRIVER_RESOLVE
  if (d->cuDriverGetVersion != nullptr) d->cuDriverGetVersion(&d->version);
  if (!missing.empty()) {
    set_why(why, fmt::format("CUDA driver too old: {} (version {}.{}) has no {}; kdsl needs the "
                             "driver of CUDA {}.{} or newer. Update the NVIDIA driver.",
                             library, d->version / 1000, d->version % 1000 / 10, missing,
                             CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10));
    return nullptr;
  }
  CUresult r = d->cuInit(0);
  if (r == CUDA_ERROR_STUB_LIBRARY) {
    set_why(why, fmt::format("CUDA driver unusable: cuInit failed because {} is the CUDA "
                             "toolkit's link stub, not the NVIDIA driver; remove the stubs "
                             "directory from LD_LIBRARY_PATH",
                             library));
    return nullptr;
  }
  if (r != CUDA_SUCCESS) {
    set_why(why, fmt::format("CUDA driver unusable: cuInit failed with {}; check that a GPU is "
                             "visible (nvidia-smi, CUDA_VISIBLE_DEVICES)",
                             error_text(d.get(), r)));
    return nullptr;
  }
  return d;
}

const Driver* driver_or_null(std::string* why) {
  static std::once_flag once;
  static std::unique_ptr<Driver> loaded;
  static std::string reason;
  std::call_once(once, [] { loaded = load_driver("libcuda.so.1", &reason); });
  if (loaded == nullptr) set_why(why, reason);
  return loaded.get();
}

const Driver& driver() {
  std::string why;
  const Driver* d = driver_or_null(&why);
  if (d == nullptr) throw CudaError(why);
  return *d;
}

std::string cuda_error_text(CUresult r) {
  return error_text(driver_or_null(), r);
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  throw CudaError(fmt::format("{} failed: {}", what, cuda_error_text(r)));
}

int device_count() {
  int n = 0;
  check(driver().cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

namespace {

CUdevice device_handle(int ordinal) {
  const Driver& d = driver();
  int n = device_count();
  if (ordinal < 0 || ordinal >= n) {
    throw CudaError(
        fmt::format("CUDA device {} does not exist: {} device(s) visible (ordinals 0 to "
                    "{}); check CUDA_VISIBLE_DEVICES",
                    ordinal, n, n - 1));
  }
  CUdevice dev = 0;
  check(d.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  return dev;
}

int attribute(CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  check(driver().cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
  return v;
}

DeviceInfo query_device(int ordinal) {
  const Driver& d = driver();
  CUdevice dev = device_handle(ordinal);
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName");
  info.name = name;
  info.cc_major = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.arch = fmt::format("sm_{}{}", info.cc_major, info.cc_minor);
  info.sm_count = attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.max_smem_per_block_optin =
      attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info.max_threads_per_sm = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  info.l2_bytes = static_cast<size_t>(attribute(dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
  check(d.cuDeviceTotalMem(&info.total_mem, dev), "cuDeviceTotalMem");
  return info;
}

std::mutex g_devices_mutex;
std::map<int, DeviceInfo> g_device_info;     // guarded by g_devices_mutex
std::map<int, CUcontext> g_primary_context;  // guarded by g_devices_mutex

}  // namespace

DeviceInfo device_info(int ordinal) {
  std::lock_guard lock(g_devices_mutex);
  auto it = g_device_info.find(ordinal);
  if (it == g_device_info.end()) it = g_device_info.emplace(ordinal, query_device(ordinal)).first;
  return it->second;
}

CUcontext primary_context(int ordinal) {
  const Driver& d = driver();
  CUcontext ctx = nullptr;
  {
    std::lock_guard lock(g_devices_mutex);
    auto it = g_primary_context.find(ordinal);
    if (it == g_primary_context.end()) {
      CUdevice dev = device_handle(ordinal);
      check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
      it = g_primary_context.emplace(ordinal, ctx).first;
    }
    ctx = it->second;
  }
  check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  return ctx;
}

DeviceBuffer::DeviceBuffer(size_t bytes) {
  if (bytes == 0) return;
  CUresult r = driver().cuMemAlloc(&ptr_, bytes);
  if (r != CUDA_SUCCESS) {
    ptr_ = 0;
    const char* hint =
        r == CUDA_ERROR_INVALID_CONTEXT
            ? "; no CUDA context is current on this thread: call primary_context() first"
            : "";
    throw CudaError(
        fmt::format("cuMemAlloc of {} bytes failed: {}{}", bytes, cuda_error_text(r), hint));
  }
  bytes_ = bytes;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  release();
}

void DeviceBuffer::release() noexcept {
  // A buffer only holds memory when the driver loaded, so driver_or_null() is not null here.
  if (ptr_ != 0) driver_or_null()->cuMemFree(ptr_);
  ptr_ = 0;
  bytes_ = 0;
}

}  // namespace kdsl

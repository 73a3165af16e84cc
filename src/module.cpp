#include "src/module.h"

#include <xxhash.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "kdsl/error.h"
#include "src/driver.h"

namespace kdsl {
namespace {

// Without the opt-in attribute a CTA may use 48 KiB of shared memory, static and dynamic together.
constexpr int kDefaultSmemBytes = 48 * 1024;

struct LoadedFunction {
  CUfunction function = nullptr;
  int dynamic_smem_limit =
      -1;  // bytes of dynamic shared memory a launch may use; -1: not known yet
};

struct LoadedModule {
  CUmodule module = nullptr;
  std::map<std::string, LoadedFunction> functions;
};

// (context, XXH3-128 of the cubin: high, low)
using ModuleKey = std::tuple<CUcontext, uint64_t, uint64_t>;

std::mutex g_mutex;
std::map<ModuleKey, LoadedModule> g_modules;  // guarded by g_mutex

// Makes a context current for one scope, then restores the previous one.
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx) {
    check(driver().cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
    if (previous_ != ctx) check(driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  }
  ~ScopedContext() { driver().cuCtxSetCurrent(previous_); }
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  CUcontext previous_ = nullptr;
};

// "device 0 (sm_90)" for the current context, for messages.
std::string current_device_text() {
  const Driver& d = driver();
  CUdevice dev = 0;
  int major = 0;
  int minor = 0;
  if (d.cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
      d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) !=
          CUDA_SUCCESS ||
      d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) !=
          CUDA_SUCCESS) {
    return "the current device";
  }
  return fmt::format("device {} (sm_{}{})", static_cast<int>(dev), major, minor);
}

CUmodule load_module(const std::string& cubin, const std::string& symbol) {
  CUmodule module = nullptr;
  CUresult r = driver().cuModuleLoadData(&module, cubin.data());
  if (r != CUDA_SUCCESS) {
    throw CompileError(fmt::format(
        "the CUDA driver cannot load the cubin of kernel '{}' ({} bytes) on {}: {}; was it "
        "compiled "
        "for another architecture? Clear the kernel cache (kdsl cache clear) if this persists",
        symbol, cubin.size(), current_device_text(), cuda_error_text(r)));
  }
  return module;
}

CUfunction get_function(CUmodule module, const std::string& symbol) {
  CUfunction fn = nullptr;
  CUresult r = driver().cuModuleGetFunction(&fn, module, symbol.c_str());
  if (r != CUDA_SUCCESS) {
    throw CompileError(
        fmt::format("kernel '{}' is not in its cubin: {} (is it declared "
                    "extern \"C\" __global__?)",
                    symbol, cuda_error_text(r)));
  }
  return fn;
}

void raise_smem_limit(LoadedFunction& f, const std::string& symbol, int bytes) {
  if (f.dynamic_smem_limit < 0) {
    int static_bytes = 0;
    check(
        driver().cuFuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f.function),
        "cuFuncGetAttribute(SHARED_SIZE_BYTES)");
    f.dynamic_smem_limit = std::max(0, kDefaultSmemBytes - static_bytes);
  }
  if (bytes <= f.dynamic_smem_limit) return;
  CUresult r = driver().cuFuncSetAttribute(f.function,
                                           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
  if (r != CUDA_SUCCESS) {
    int static_bytes = 0;
    driver().cuFuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f.function);
    throw CompileError(fmt::format(
        "kernel '{}' needs {} bytes of dynamic shared memory (plus {} static) per CTA, more than "
        "{} allows: {}; choose a smaller tile or block size",
        symbol, bytes, static_bytes, current_device_text(), cuda_error_text(r)));
  }
  f.dynamic_smem_limit = bytes;
}

}  // namespace

LoadedKernel load_kernel(CUcontext context, const std::string& cubin, const std::string& symbol,
                         int dynamic_smem_bytes) {
  if (context == nullptr || dynamic_smem_bytes < 0) {
    throw InternalError(
        fmt::format("load_kernel('{}'): null context or negative shared memory "
                    "({} bytes)",
                    symbol, dynamic_smem_bytes));
  }
  XXH128_hash_t h = XXH3_128bits(cubin.data(), cubin.size());
  std::lock_guard lock(g_mutex);
  ScopedContext scoped(context);
  auto [it, inserted] = g_modules.try_emplace(ModuleKey{context, h.high64, h.low64});
  if (inserted) {
    try {
      it->second.module = load_module(cubin, symbol);
    } catch (...) {
      g_modules.erase(it);
      throw;
    }
  }
  LoadedModule& m = it->second;
  auto fit = m.functions.find(symbol);
  if (fit == m.functions.end()) {
    fit = m.functions.emplace(symbol, LoadedFunction{get_function(m.module, symbol)}).first;
  }
  raise_smem_limit(fit->second, symbol, dynamic_smem_bytes);
  return LoadedKernel{m.module, fit->second.function};
}

void unload_modules(CUcontext context) {
  std::lock_guard lock(g_mutex);
  auto first = g_modules.lower_bound(ModuleKey{context, 0, 0});
  auto last = first;
  while (last != g_modules.end() && std::get<0>(last->first) == context) ++last;
  if (first == last) return;
  ScopedContext scoped(context);
  for (auto it = first; it != last; ++it) driver().cuModuleUnload(it->second.module);
  g_modules.erase(first, last);
}

}  // namespace kdsl

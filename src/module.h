// Loading cubins into CUDA contexts: one module per (context, cubin), kept for the life of the
// context, so one process can drive several GPUs.
#pragma once

#include <cuda.h>

#include <string>

namespace kdsl {

/// A kernel ready to launch in one context. Both handles stay valid until unload_modules(context).
struct LoadedKernel {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
};

/// Loads `cubin` into `context` (once per context and cubin; later calls return the same handles)
/// and looks up the kernel `symbol`. When `dynamic_smem_bytes` exceeds the 48 KiB default, raises
/// the kernel's dynamic shared-memory limit to it (bytes). The calling thread's current context is
/// restored before returning. Thread-safe.
/// Throws CudaError without a driver; CompileError when the driver rejects the cubin (e.g. built
/// for another architecture), the symbol is missing, or the shared memory cannot be granted.
LoadedKernel load_kernel(CUcontext context, const std::string& cubin, const std::string& symbol,
                         int dynamic_smem_bytes);

/// Unloads every module load_kernel loaded into `context`; call it before destroying a context
/// that kdsl used. Handles from that context become invalid. Thread-safe.
void unload_modules(CUcontext context);

}  // namespace kdsl

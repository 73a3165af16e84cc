// Tensors from PyTorch, JAX, CuPy and other frameworks through DLPack, without copying.
//
//   DLManagedTensor* m = ...;                 // e.g. from torch.utils.dlpack.to_dlpack
//   kernel.launch(stream, {kdsl::from_dlpack(*m), ...});
//
// Needs <dlpack/dlpack.h> (Debian: libdlpack-dev; DLPack 0.6 or newer).
#pragma once

#include <dlpack/dlpack.h>

#include "kdsl/export.h"
#include "kdsl/kdsl.h"

namespace kdsl {

/// A TensorRef viewing the memory of `t`; nothing is copied or owned, so keep the producer's
/// tensor alive until the kernels using it have run. The pointer is `t.data + t.byte_offset`;
/// shape and strides (both in elements) are copied; null strides mean row-major (C-contiguous).
///
/// Dtypes (code, bits, lanes 1): kDLFloat 16/32/64 -> f16/f32/f64, kDLBfloat 16 -> bf16,
/// kDLInt 32/64 -> i32/i64, kDLBool 8 (code 6, DLPack 0.8 and later) -> b8,
/// kDLComplex 64 -> c64.
///
/// Throws ArgumentError, naming what was found, for: a device other than kDLCUDA or
/// kDLCUDAManaged; any other dtype (uint8, int16, float8, ...) or lanes other than 1; ndim below
/// 0 or above kMaxRank; a null shape with ndim > 0; a negative size or stride; null strides with
/// more than 2^63 elements (as TensorRef::contiguous). The device ordinal
/// (t.device.device_id) is not checked: launch in a context of that device. Thread-safe.
KDSL_API TensorRef from_dlpack(const DLTensor& t);

/// from_dlpack(t.dl_tensor). Does not take ownership: the caller still calls t.deleter when it
/// no longer needs the memory.
KDSL_API TensorRef from_dlpack(const DLManagedTensor& t);

}  // namespace kdsl

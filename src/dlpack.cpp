// DLPack tensors as kdsl TensorRefs (include/kdsl/dlpack.h).
#include "kdsl/dlpack.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <span>
#include <string>

namespace kdsl {
namespace {

// kDLBool was added in DLPack 0.8; Debian's 0.6 header does not define it.
constexpr uint8_t kDLBoolCode = 6;

std::string device_text(const DLDevice& d) {
  switch (d.device_type) {
    case kDLCPU:
      return "kDLCPU (host memory)";
    case kDLCUDAHost:
      return "kDLCUDAHost (pinned host memory)";
    case kDLOpenCL:
      return "kDLOpenCL";
    case kDLVulkan:
      return "kDLVulkan";
    case kDLMetal:
      return "kDLMetal";
    case kDLVPI:
      return "kDLVPI";
    case kDLROCM:
      return "kDLROCM";
    case kDLROCMHost:
      return "kDLROCMHost";
    case kDLExtDev:
      return "kDLExtDev";
    default:
      return fmt::format("device type {}", static_cast<int>(d.device_type));
  }
}

// "uint8", "float32x4", "code 9, 16 bits".
std::string dtype_text(const DLDataType& t) {
  static const char* const names[] = {"int",    "uint",    "float", "opaque handle",
                                      "bfloat", "complex", "bool"};
  std::string s = t.code < std::size(names)
                      ? fmt::format("{}{}", names[t.code], t.bits)
                      : fmt::format("code {}, {} bits", static_cast<int>(t.code), t.bits);
  if (t.lanes != 1) s += fmt::format("x{}", t.lanes);
  return s;
}

std::optional<DType> to_dtype(const DLDataType& t) {
  if (t.lanes != 1) return std::nullopt;
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 16) return DType::f16;
      if (t.bits == 32) return DType::f32;
      if (t.bits == 64) return DType::f64;
      break;
    case kDLBfloat:
      if (t.bits == 16) return DType::bf16;
      break;
    case kDLInt:
      if (t.bits == 32) return DType::i32;
      if (t.bits == 64) return DType::i64;
      break;
    case kDLComplex:
      if (t.bits == 64) return DType::c64;
      break;
    case kDLBoolCode:
      if (t.bits == 8) return DType::b8;
      break;
    default:
      break;
  }
  return std::nullopt;
}

[[noreturn]] void reject(const std::string& what) {
  throw ArgumentError("DLPack tensor: " + what);
}

}  // namespace

TensorRef from_dlpack(const DLTensor& t) {
  if (t.device.device_type != kDLCUDA && t.device.device_type != kDLCUDAManaged) {
    reject(fmt::format("device is {}; kdsl needs CUDA device memory (kDLCUDA or kDLCUDAManaged)",
                       device_text(t.device)));
  }
  std::optional<DType> dtype = to_dtype(t.dtype);
  if (!dtype) {
    reject(
        fmt::format("dtype {} is not supported; kdsl takes float16, float32, float64, "
                    "bfloat16, int32, int64, bool and complex64, with lanes 1",
                    dtype_text(t.dtype)));
  }
  if (t.ndim < 0 || t.ndim > kMaxRank) {
    reject(fmt::format("ndim is {}; kdsl takes 0 to {} axes", t.ndim, kMaxRank));
  }
  if (t.ndim > 0 && t.shape == nullptr) reject(fmt::format("ndim is {} but shape is null", t.ndim));
  TensorRef r;
  r.data = t.data ? static_cast<char*>(t.data) + t.byte_offset : nullptr;
  r.dtype = *dtype;
  r.rank = t.ndim;
  int64_t contiguous = 1;
  for (int32_t a = t.ndim; a-- > 0;) {
    if (t.shape[a] < 0) reject(fmt::format("axis {} has negative size {}", a, t.shape[a]));
    int64_t stride = t.strides ? t.strides[a] : contiguous;
    if (stride < 0) {
      reject(
          fmt::format("axis {} has negative stride {}; kdsl takes non-negative strides (copy "
                      "or flip the tensor first)",
                      a, stride));
    }
    r.shape[a] = t.shape[a];
    r.strides[a] = stride;
    if (!t.strides &&
        __builtin_mul_overflow(contiguous, std::max<int64_t>(t.shape[a], 1), &contiguous)) {
      reject(fmt::format("shape {} has more than 2^63 elements",
                         fmt::join(std::span<const int64_t>(t.shape, t.ndim), "x")));
    }
  }
  return r;
}

TensorRef from_dlpack(const DLManagedTensor& t) {
  return from_dlpack(t.dl_tensor);
}

}  // namespace kdsl

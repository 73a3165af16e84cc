// kdsl: GPU normalization and scan kernels written in .kdsl files, compiled at run time.
//
//   kdsl::Module m = kdsl::Module::load("stdlib/rms_norm.kdsl");
//   kdsl::Kernel k = m.kernel("rms_norm");
//   k.launch(stream, {x, w, 1e-6, y, rstd});   // TensorRefs and numbers, in parameter order
//
// The first launch of a specialization (dtype binding, vector-axis length, alignment) compiles it
// with NVRTC for the current GPU, through the disk cache; later launches reuse it and do no
// string building, allocation or synchronization. Parsing, checking and compiling need no GPU.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kdsl/dtype.h"
#include "kdsl/error.h"
#include "kdsl/export.h"

// A CUDA stream (cuda.h: `typedef struct CUstream_st* CUstream`; cudaStream_t is the same type).
struct CUstream_st;

namespace kdsl {

inline constexpr int kMaxRank = 8;

/// A tensor in device memory, not owned: base pointer, dtype, shape and strides (in elements).
/// Strides may be any non-negative values; kernels need the vector axis (the axis a view marks
/// ':') to have stride 1 for 16-byte accesses, and fall back to element accesses otherwise.
struct KDSL_API TensorRef {
  void* data = nullptr;
  DType dtype = DType::f32;
  int32_t rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};

  /// A row-major (C-contiguous) tensor. Throws ArgumentError for more than kMaxRank axes or a
  /// negative size.
  static TensorRef contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape);
  static TensorRef contiguous(void* data, DType dtype, std::span<const int64_t> shape);
  /// A tensor with explicit strides (elements). Throws ArgumentError when the counts of sizes and
  /// strides differ, for more than kMaxRank axes, or for a negative size or stride.
  static TensorRef strided(void* data, DType dtype, std::span<const int64_t> shape,
                           std::span<const int64_t> strides);
  static TensorRef strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                           std::initializer_list<int64_t> strides);
  /// Number of elements (product of the sizes).
  int64_t numel() const;
};

/// One launch argument: a tensor, a number for a scalar parameter (converted to its dtype), or
/// Arg::use_default() for a scalar parameter that has a default. Numbers are carried as double:
/// integers are exact up to 2^53 in magnitude. The launch throws ArgumentError for a number its
/// scalar's dtype cannot hold (a fraction or an out-of-range value for an integer or bool, a
/// finite value beyond the largest finite f16, bf16 or f32); f16 and bf16 values are rounded to
/// their dtype (to nearest, ties to even), as the CPU reference rounds them.
class Arg {
 public:
  enum class Kind : uint8_t { tensor, number, default_value };
  Arg(const TensorRef& t) : kind_(Kind::tensor), tensor_(t) {}  // NOLINT: implicit by design
  /// Any arithmetic type (double, float, int, int64_t, size_t, unsigned, bool: 1 or 0, ...); a
  /// pointer is not a number.
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Arg(T v) : kind_(Kind::number), number_(static_cast<double>(v)) {}  // NOLINT
  static Arg use_default() { return Arg(); }

  Kind kind() const { return kind_; }
  const TensorRef& tensor() const { return tensor_; }
  double number() const { return number_; }

 private:
  Arg() : kind_(Kind::default_value) {}
  Kind kind_;
  TensorRef tensor_{};
  double number_ = 0;
};

/// A kernel parameter as a caller sees it.
struct ParamInfo {
  std::string name;
  bool is_tensor = true;
  bool is_output = false;               // Out or InOut
  bool accumulates = false;             // InOut: its contents on entry are read
  std::string dtype;                    // "f32", or a generic's name such as "T"
  std::vector<std::string> shape;       // symbols or sizes, e.g. {"M", "N"}
  std::optional<double> default_value;  // scalars
};

namespace detail {
class KernelImpl;
class ModuleImpl;
}  // namespace detail

/// One kernel of a module. Cheap to copy (a shared handle); thread-safe: launches from several
/// threads and on several GPUs may run concurrently. A default-constructed Kernel is empty: its
/// methods throw kdsl::Error.
class KDSL_API Kernel {
 public:
  /// The kernel's name in its module, e.g. "rms_norm".
  const std::string& name() const;
  /// The kernel's docstring (formula and source).
  const std::string& docstring() const;
  /// The parameters in launch order (inputs, scalars and outputs as the `def` lists them).
  const std::vector<ParamInfo>& params() const;

  /// Launches the kernel on `stream` (in the calling thread's current CUDA context; when there is
  /// none, the primary context of device 0 is made current). `args` follow the parameter order.
  /// The first launch of a specialization compiles it (NVRTC, through the disk cache) and loads
  /// it; later ones only check the arguments and enqueue. Asynchronous: returns before the
  /// kernel runs. A launch with an empty parallel loop (e.g. M = 0) enqueues nothing except what
  /// writes column-reduction outputs (zeros, or unchanged for InOut). Capturable into a CUDA
  /// graph once the specialization is loaded and, for kernels with a column reduction, once the
  /// stream has had one launch outside capture (docs/runtime.md).
  /// Throws ArgumentError (the argument, what was expected, what was given; also a column
  /// reduction captured on a stream without workspace), CompileError, CudaError (no driver, or
  /// the driver refused the launch). Every argument is checked before anything is enqueued.
  void launch(CUstream_st* stream, std::span<const Arg> args) const;
  void launch(CUstream_st* stream, std::initializer_list<Arg> args) const {
    launch(stream, std::span<const Arg>(args.begin(), args.size()));
  }

  /// Checks `args` and compiles and loads their specialization in the current context without
  /// launching (for warm-up before CUDA graph capture; it allocates no workspace, see launch).
  /// Returns the kernel symbol, e.g. "kdsl_rms_norm_bf16_n8192". Throws as launch does.
  std::string prepare(std::span<const Arg> args) const;
  std::string prepare(std::initializer_list<Arg> args) const {
    return prepare(std::span<const Arg>(args.begin(), args.size()));
  }

  /// kdsl's internals (src/runtime_impl.h), for its tools and tests; not a stable API.
  const detail::KernelImpl& impl() const { return *impl_; }

 private:
  friend class Module;
  std::shared_ptr<detail::KernelImpl> impl_;
};

/// A parsed and checked .kdsl module. Cheap to copy; immutable; thread-safe. A default-constructed
/// Module is empty: its methods throw kdsl::Error.
class KDSL_API Module {
 public:
  /// Reads, parses and checks a .kdsl file. Throws kdsl::Error when the file cannot be read and
  /// kdsl::SourceError with every diagnostic (file:line:col, source line, caret) when it has
  /// errors.
  static Module load(const std::string& path);
  /// The same for source text in memory; `name` appears in diagnostics.
  static Module from_source(const std::string& source, const std::string& name = "<memory>");

  /// The kernel `name`. Throws ArgumentError (listing the module's kernels) when there is none.
  Kernel kernel(const std::string& name) const;
  /// The names of the module's kernels, in source order.
  std::vector<std::string> kernel_names() const;
  /// The path given to load(), or the name given to from_source().
  const std::string& path() const;

  /// kdsl's internals (src/runtime_impl.h), for its tools and tests; not a stable API.
  const detail::ModuleImpl& impl() const { return *impl_; }

 private:
  std::shared_ptr<detail::ModuleImpl> impl_;
};

}  // namespace kdsl

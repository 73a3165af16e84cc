// Exceptions thrown by kdsl.
#pragma once

#include <stdexcept>
#include <string>

#include "kdsl/export.h"

namespace kdsl {

/// Base of every exception kdsl throws. what() is a complete, user-facing message.
class KDSL_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A .kdsl program is malformed or ill-typed, or uses what the GPU code generator does not support
/// yet (scans in both directions, a vector column reduction that keeps some loop variables, ...).
/// what() holds every diagnostic, rendered compiler-style (file:line:col: error: message, the
/// source line, a caret, hints).
class KDSL_API SourceError : public Error {
 public:
  using Error::Error;
};

/// A launch or API call got an argument that does not fit the kernel (wrong dtype, rank, size,
/// alignment, null pointer, overlap). The message names the argument and what was expected.
class KDSL_API ArgumentError : public Error {
 public:
  using Error::Error;
};

/// NVRTC rejected generated code or the driver refused to load it (the message carries the kernel,
/// specialization, architecture, options and the compiler log).
class KDSL_API CompileError : public Error {
 public:
  using Error::Error;
};

/// The CUDA driver is missing or failed (no libcuda.so.1, no device, a failed launch).
class KDSL_API CudaError : public Error {
 public:
  using Error::Error;
};

/// A bug in kdsl itself (a broken invariant). Please report it with the message.
class KDSL_API InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace kdsl

// Tensors in host memory: the CPU interpreter's operands, .npy files, random inputs.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kdsl/dtype.h"

namespace kdsl {

/// A dense, row-major (C-order) tensor owning its bytes. Strides are in elements.
struct HostTensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(DType t, std::vector<int64_t> shape);

  int64_t numel() const;
  std::vector<int64_t> strides() const;
  /// Element i (flat, row-major) as a double (the real part for c64). Exact for every dtype
  /// except i64 beyond 2^53.
  double get(int64_t i) const;
  double get_imag(int64_t i) const;
  /// Stores v rounded to the dtype (round to nearest even; integers truncate and saturate).
  void set(int64_t i, double v, double imag = 0);
  /// Fills every byte with `byte` (used to poison outputs before a kernel writes them).
  void poison(uint8_t byte = 0xff);
};

/// Fills `t` with seeded random values. Floats: standard normal (c64: both parts); i32/i64:
/// uniform in [-100, 100]; bool: fair coin. Element i's value depends only on the seed and i (the
/// fill runs on several threads in blocks of 65536 elements, each with its own generator), so the
/// same seed gives the same values on every machine.
void fill_random(HostTensor& t, uint64_t seed);

}  // namespace kdsl

#include "host_tensor.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dsl/numeric.h"
#include "kdsl/error.h"

namespace kdsl {

HostTensor::HostTensor(DType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {
  const int64_t n = numel();
  uint64_t size = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n), dtype_size(t), &size) ||
      size > static_cast<uint64_t>(PTRDIFF_MAX)) {
    throw ArgumentError(fmt::format("a {} tensor of shape ({}) is too large for host memory",
                                    dtype_name(t), fmt::join(shape, ", ")));
  }
  try {
    bytes.assign(static_cast<size_t>(size), 0);
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("out of host memory for a {} tensor of shape ({}) ({} bytes)",
                            dtype_name(t), fmt::join(shape, ", "), size));
  }
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw ArgumentError("tensor sizes must not be negative");
    if (__builtin_mul_overflow(n, d, &n)) {
      throw ArgumentError(fmt::format("a tensor of shape ({}) has more than 2^63 elements",
                                      fmt::join(shape, ", ")));
    }
  }
  return n;
}

std::vector<int64_t> HostTensor::strides() const {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * shape[i];
  return st;
}

namespace {

template <class T>
T read(const std::vector<uint8_t>& b, int64_t i) {
  T v;
  std::memcpy(&v, b.data() + static_cast<size_t>(i) * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void write(std::vector<uint8_t>& b, int64_t i, T v) {
  std::memcpy(b.data() + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
}

}  // namespace

double HostTensor::get(int64_t i) const {
  switch (dtype) {
    case DType::f16:
      return f16_bits_to_double(read<uint16_t>(bytes, i));
    case DType::bf16:
      return bf16_bits_to_double(read<uint16_t>(bytes, i));
    case DType::f32:
      return read<float>(bytes, i);
    case DType::f64:
      return read<double>(bytes, i);
    case DType::i32:
      return read<int32_t>(bytes, i);
    case DType::i64:
      return static_cast<double>(read<int64_t>(bytes, i));
    case DType::b8:
      return read<uint8_t>(bytes, i) != 0 ? 1 : 0;
    case DType::c64:
      return read<float>(bytes, 2 * i);
  }
  return 0;
}

double HostTensor::get_imag(int64_t i) const {
  return dtype == DType::c64 ? read<float>(bytes, 2 * i + 1) : 0;
}

void HostTensor::set(int64_t i, double v, double imag) {
  switch (dtype) {
    case DType::f16:
      write<uint16_t>(bytes, i, double_to_f16_bits(v));
      break;
    case DType::bf16:
      write<uint16_t>(bytes, i, double_to_bf16_bits(v));
      break;
    case DType::f32:
      write<float>(bytes, i, static_cast<float>(v));
      break;
    case DType::f64:
      write<double>(bytes, i, v);
      break;
    case DType::i32:
      write<int32_t>(bytes, i, static_cast<int32_t>(round_to(DType::i32, v)));
      break;
    case DType::i64:
      write<int64_t>(bytes, i, static_cast<int64_t>(round_to(DType::i64, v)));
      break;
    case DType::b8:
      write<uint8_t>(bytes, i, v != 0 ? 1 : 0);
      break;
    case DType::c64:
      write<float>(bytes, 2 * i, static_cast<float>(v));
      write<float>(bytes, 2 * i + 1, static_cast<float>(imag));
      break;
  }
}

void HostTensor::poison(uint8_t byte) {
  if (!bytes.empty())
    std::memset(bytes.data(), byte, bytes.size());  // data() may be null when empty
}

namespace {

// Fills elements [begin, end) from a generator seeded by (seed, block): the values depend only on
// the seed and the element index, not on how many threads fill.
void fill_block(HostTensor& t, uint64_t seed, int64_t block, int64_t begin, int64_t end) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL +
                      static_cast<uint64_t>(block) * 0xbf58476d1ce4e5b9ULL + 1);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> ints(-100, 100);
  std::bernoulli_distribution coin(0.5);
  for (int64_t i = begin; i < end; ++i) {
    if (is_float(t.dtype)) {
      t.set(i, normal(rng));
    } else if (t.dtype == DType::c64) {
      double re = normal(rng);
      t.set(i, re, normal(rng));
    } else if (is_int(t.dtype)) {
      t.set(i, ints(rng));
    } else {
      t.set(i, coin(rng) ? 1 : 0);
    }
  }
}

}  // namespace

void fill_random(HostTensor& t, uint64_t seed) {
  constexpr int64_t kBlock = 1 << 16;
  int64_t n = t.numel();
  int64_t blocks = (n + kBlock - 1) / kBlock;
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  int64_t threads = std::min<int64_t>(hw, std::max<int64_t>(1, blocks / 4));
  auto work = [&](int64_t w) {
    for (int64_t b = w; b < blocks; b += threads) {
      fill_block(t, seed, b, b * kBlock, std::min(n, (b + 1) * kBlock));
    }
  };
  std::vector<std::thread> pool;
  for (int64_t w = 1; w < threads; ++w) pool.emplace_back(work, w);
  work(0);
  for (auto& th : pool) th.join();
}

}  // namespace kdsl

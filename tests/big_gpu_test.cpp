// Shapes past 32-bit arithmetic on the GPU: more than 2^31 elements, more than 65535 rows, and a
// column reduction over 70,000 rows, each with an answer that is cheap to know exactly. Inputs are
// filled on the device with one repeated byte (cuMemsetD8), so nothing of gigabytes size moves
// through the host; a sample of rows and the last element are read back. Skips without a GPU or
// when the device has too little free memory.
#include <cmath>
#include <cstring>
#include <vector>

#include "dsl/numeric.h"
#include "gpu_test_util.h"

namespace kdsl {
namespace {

Kernel stdlib_kernel(const std::string& file, const std::string& name) {
  const char* root = std::getenv("KDSL_SOURCE_DIR");  // the tree may have moved (GPU machine)
  static std::map<std::string, Module> modules;
  auto it = modules.find(file);
  if (it == modules.end()) {
    it =
        modules.emplace(file, Module::load(std::string(root ? root : KDSL_SOURCE_DIR) + "/" + file))
            .first;
  }
  return it->second.kernel(name);
}

bool enough_memory(size_t bytes) {
  size_t free = 0, total = 0;
  check(driver().cuMemGetInfo(&free, &total), "cuMemGetInfo");
  return free > bytes + (size_t{2} << 30);  // and 2 GiB to spare
}

void fill(const DeviceBuffer& b, uint8_t byte) {
  check(driver().cuMemsetD8(b.ptr(), byte, b.size()), "cuMemsetD8");
}

template <class T>
std::vector<T> read(const DeviceBuffer& b, size_t first, size_t count) {
  std::vector<T> out(count);
  check(driver().cuMemcpyDtoH(out.data(), b.ptr() + first * sizeof(T), count * sizeof(T)),
        "cuMemcpyDtoH");
  return out;
}

void* ptr(const DeviceBuffer& b) {
  return reinterpret_cast<void*>(b.ptr());
}

// RMSNorm of a constant row c is x * r * w = c / sqrt(c^2 + eps) * w, which rounds to w in f16
// (c / sqrt(c^2 + 1e-6) = 1 - 4.5e-7 with c = 1.0586, far below half an f16 ulp).
void check_rms_norm_constant_rows(int64_t M, int64_t N) {
  const size_t elems = static_cast<size_t>(M) * static_cast<size_t>(N);
  if (!enough_memory(2 * elems * 2 + static_cast<size_t>(M) * 4)) {
    GTEST_SKIP() << "skipped: needs " << (4 * elems >> 30) << " GiB of free device memory";
  }
  DeviceBuffer x(elems * 2), w(static_cast<size_t>(N) * 2), y(elems * 2),
      rstd(static_cast<size_t>(M) * 4);
  fill(x, 0x3c);  // every f16 is 0x3c3c = 1.05859375
  fill(y, 0xff);  // NaN until written
  fill(rstd, 0xff);
  std::vector<uint16_t> wh(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) wh[j] = double_to_f16_bits(static_cast<double>(j % 64 + 1) / 64);
  check(driver().cuMemcpyHtoD(w.ptr(), wh.data(), wh.size() * 2), "cuMemcpyHtoD");

  Kernel k = stdlib_kernel("stdlib/rms_norm.kdsl", "rms_norm");
  k.launch(nullptr, {TensorRef::contiguous(ptr(x), DType::f16, {M, N}),
                     TensorRef::contiguous(ptr(w), DType::f16, {N}), Arg::use_default(),
                     TensorRef::contiguous(ptr(y), DType::f16, {M, N}),
                     TensorRef::contiguous(ptr(rstd), DType::f32, {M})});
  check(driver().cuCtxSynchronize(), "rms_norm (cuCtxSynchronize)");

  const double c = f16_bits_to_double(0x3c3c);
  const double r = 1 / std::sqrt(c * c + 1e-6);
  // Rows at both ends, around 2^16 rows and around element 2^31, and the last row.
  std::vector<int64_t> rows = {0, 1, 65535, 65536, M / 2, M - 2, M - 1};
  const int64_t row_2_31 = (int64_t{1} << 31) / N;
  if (row_2_31 < M)
    rows.insert(rows.end(), {row_2_31 - 1, row_2_31, std::min(row_2_31 + 1, M - 1)});
  for (int64_t m : rows) {
    if (m < 0 || m >= M) continue;
    std::vector<uint16_t> got =
        read<uint16_t>(y, static_cast<size_t>(m * N), static_cast<size_t>(N));
    int bad = 0;
    for (int64_t j = 0; j < N; ++j) {
      if (got[j] != wh[j] && bad++ < 3) {
        ADD_FAILURE() << "y[" << m << ", " << j << "] = " << f16_bits_to_double(got[j])
                      << ", expected " << f16_bits_to_double(wh[j]);
      }
    }
    EXPECT_EQ(bad, 0) << "row " << m << " of " << M;
  }
  std::vector<float> rs = read<float>(rstd, 0, static_cast<size_t>(M));
  int bad = 0;
  for (int64_t m = 0; m < M; ++m) {
    if (!(std::fabs(rs[m] - r) <= 1e-5 * r) && bad++ < 3) {
      ADD_FAILURE() << "rstd[" << m << "] = " << rs[m] << ", expected " << r;
    }
  }
  EXPECT_EQ(bad, 0);
  // The very last element on its own (the end of a 4.6 GB tensor).
  EXPECT_EQ(read<uint16_t>(y, elems - 1, 1)[0], wh[N - 1]);
}

TEST(BigShapes, RmsNormPast2To31ElementsAnd65535Rows) {
  KDSL_REQUIRE_GPU();
  check_rms_norm_constant_rows(70000, 32768);  // 2.29e9 elements, 4.6 GB per f16 tensor
}

TEST(BigShapes, RmsNormShortRowsPast65535Rows) {
  KDSL_REQUIRE_GPU();
  check_rms_norm_constant_rows(70000, 7);  // sub-warp groups: many rows per CTA
  check_rms_norm_constant_rows(1 << 20, 64);
}

// A column reduction over 70,000 rows: dw[j] = sum over rows of dy * x * r with constant dy, x, r,
// so every column sums 70,000 equal f32 terms (accumulated in f32 then f64 across partials).
TEST(BigShapes, RmsNormBackwardColumnSumOver70000Rows) {
  KDSL_REQUIRE_GPU();
  const int64_t M = 70000, N = 4096;
  const size_t elems = static_cast<size_t>(M * N);
  if (!enough_memory(3 * elems * 2)) GTEST_SKIP() << "skipped: too little free device memory";
  DeviceBuffer dy(elems * 2), x(elems * 2), w(static_cast<size_t>(N) * 2),
      rstd(static_cast<size_t>(M) * 4), dx(elems * 2), dw(static_cast<size_t>(N) * 2);
  fill(dy, 0x3c);
  fill(x, 0x3c);
  fill(w, 0x3c);
  fill(rstd, 0x3c);  // every f32 is 0x3c3c3c3c
  fill(dx, 0xff);
  fill(dw, 0xff);
  Kernel k = stdlib_kernel("stdlib/rms_norm.kdsl", "rms_norm_bwd");
  k.launch(nullptr, {TensorRef::contiguous(ptr(dy), DType::f16, {M, N}),
                     TensorRef::contiguous(ptr(x), DType::f16, {M, N}),
                     TensorRef::contiguous(ptr(w), DType::f16, {N}),
                     TensorRef::contiguous(ptr(rstd), DType::f32, {M}),
                     TensorRef::contiguous(ptr(dx), DType::f16, {M, N}),
                     TensorRef::contiguous(ptr(dw), DType::f16, {N})});
  check(driver().cuCtxSynchronize(), "rms_norm_bwd (cuCtxSynchronize)");
  const double c = f16_bits_to_double(0x3c3c);
  float r = 0;
  const uint32_t rbits = 0x3c3c3c3c;
  std::memcpy(&r, &rbits, 4);
  const double expected = static_cast<double>(M) * c * c * r;
  std::vector<uint16_t> got = read<uint16_t>(dw, 0, static_cast<size_t>(N));
  int bad = 0;
  for (int64_t j = 0; j < N; ++j) {
    double v = f16_bits_to_double(got[j]);
    // f16 rounding of the result (2^-11 relative) dominates the f32 sum's error.
    if (!(std::fabs(v - expected) <= 1e-3 * expected) && bad++ < 3) {
      ADD_FAILURE() << "dw[" << j << "] = " << v << ", expected " << expected;
    }
  }
  EXPECT_EQ(bad, 0);
  // dx of a constant row: r * g - x * r^3 * mean(g * x) with g = dy * w, all constants.
  const double g = c * c;
  const double dx_expected = r * g - c * r * r * r * (g * c);
  std::vector<uint16_t> last =
      read<uint16_t>(dx, elems - static_cast<size_t>(N), static_cast<size_t>(N));
  for (int64_t j = 0; j < N; j += 511) {
    EXPECT_NEAR(f16_bits_to_double(last[j]), dx_expected, 2e-3 * std::fabs(dx_expected) + 1e-6)
        << "dx[" << M - 1 << ", " << j << "]";
  }
}

}  // namespace
}  // namespace kdsl

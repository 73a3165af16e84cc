// The stdlib scan kernels on the GPU against the CPU reference interpreter (issue 4):
//   Small:  every kernel, f32 and bf16 (c64 for the complex ones), at short and odd lengths
//           (1, 7, 33, 1000, 65537) and a medium shape; the whole output is checked.
//   Big:    the recurrences, rg_lru and cumsum at (4, 2048, 2048), (1, 8192, 2560),
//           (1, 32768, 1024), (1, 32768, 2048); the interpreter checks a sample of 8 columns (the
//           kernels are independent across columns, and the column reductions are per column).
//   Cases:  reverse cumsum of 1e8s then 1s (exact), determinism (same bits twice), and cumsum
//           along a length-1 axis of a (309504, 1, 16384) tensor (more than 2^32 elements; needs
//           about 41 GB of device memory, skipped with less).
// Skips without a GPU. Inputs are realistic where conditioning matters (scan_test_inputs.h).
#include <fmt/format.h>

#include "gpu_test_util.h"
#include "scan_test_inputs.h"
#include "src/runtime_impl.h"

namespace kdsl {
namespace {

using testing::ScanKernel;

// |got - expected| <= atol + rtol |expected| with scan_tolerance: the dtype's tolerance, atol at
// least rtol / 10 times the output's root-mean-square.
void expect_close(const HostTensor& got, const HostTensor& ref, DType t, const std::string& label) {
  Tolerance tol = scan_tolerance(t, ref);
  Comparison c = compare(got, ref, tol);
  EXPECT_TRUE(c.ok) << label << ": " << c.mismatches << " of " << c.checked << " values off; worst "
                    << describe_worst(got, c);
}

// Runs `p` on the GPU; returns every tensor afterwards.
std::vector<HostTensor> run_gpu(const Problem& p, std::string* symbol = nullptr) {
  GpuRun gpu(p);
  gpu.launch();
  std::vector<HostTensor> got = p.tensors;
  gpu.download(got);
  if (symbol) *symbol = gpu.loaded().plan.symbol + " " + gpu.loaded().plan.schedule;
  return got;
}

void expect_gpu_matches(const Problem& p, const std::string& label) {
  std::vector<HostTensor> ref = run_reference(p);
  std::string symbol;
  std::vector<HostTensor> got = run_gpu(p, &symbol);
  for (size_t t = 0; t < got.size(); ++t) {
    if (p.ir.tensors[t].role == ir::Role::in) continue;
    expect_close(got[t], ref[t], p.ir.tensors[t].dtype,
                 fmt::format("{} ({}) output {}", label, symbol, p.ir.tensors[t].name));
  }
}

// The entries `idx` of axis `axis` of `t`.
HostTensor slice(const HostTensor& t, size_t axis, const std::vector<int64_t>& idx) {
  std::vector<int64_t> shape = t.shape;
  shape[axis] = static_cast<int64_t>(idx.size());
  HostTensor out(t.dtype, shape);
  int64_t outer = 1, inner = 1;
  for (size_t a = 0; a < axis; ++a) outer *= t.shape[a];
  for (size_t a = axis + 1; a < t.shape.size(); ++a) inner *= t.shape[a];
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t k = 0; k < idx.size(); ++k) {
      for (int64_t i = 0; i < inner; ++i) {
        int64_t from = (o * t.shape[axis] + idx[k]) * inner + i;
        int64_t to = (o * static_cast<int64_t>(idx.size()) + static_cast<int64_t>(k)) * inner + i;
        out.set(to, t.get(from), t.get_imag(from));
      }
    }
  }
  return out;
}

// Runs `p` on the GPU and checks the columns `idx` of symbol `sym` (D or M) of every output
// against the interpreter run on those columns only.
void expect_gpu_matches_sample(const std::shared_ptr<const FrontEnd>& fe, const Problem& p,
                               const std::string& sym, const std::vector<int64_t>& idx,
                               const std::string& label) {
  std::string symbol;
  std::vector<HostTensor> got = run_gpu(p, &symbol);
  int32_t s = -1;
  for (size_t i = 0; i < p.ir.symbols.size(); ++i) {
    if (p.ir.symbols[i].name == sym) s = static_cast<int32_t>(i);
  }
  ASSERT_GE(s, 0);
  ProblemSpec ps;
  ps.kernel = p.ir.name;
  for (const auto& g : p.ir.generics) ps.binding.push_back(g.second);
  for (size_t i = 0; i < p.ir.symbols.size(); ++i) {
    ps.shapes[p.ir.symbols[i].name] =
        static_cast<int32_t>(i) == s ? static_cast<int64_t>(idx.size()) : p.symbols[i];
  }
  auto sliced = [&](size_t t, const HostTensor& h) {
    HostTensor out = h;
    for (size_t ax = 0; ax < p.ir.tensors[t].shape.size(); ++ax) {
      if (p.ir.tensors[t].shape[ax].symbol == s) out = slice(out, ax, idx);
    }
    return out;
  };
  for (size_t t = 0; t < p.ir.tensors.size(); ++t) {
    if (p.ir.tensors[t].role == ir::Role::in)
      ps.inputs[p.ir.tensors[t].name] = sliced(t, p.tensors[t]);
  }
  for (size_t i = 0; i < p.ir.scalars.size(); ++i) ps.scalars[p.ir.scalars[i].name] = p.scalars[i];
  Problem small = make_problem(fe, ps);
  std::vector<HostTensor> ref = run_reference(small);
  for (size_t t = 0; t < got.size(); ++t) {
    if (p.ir.tensors[t].role == ir::Role::in) continue;
    expect_close(sliced(t, got[t]), ref[t], p.ir.tensors[t].dtype,
                 fmt::format("{} ({}) output {}", label, symbol, p.ir.tensors[t].name));
  }
}

std::vector<DType> dtypes_of(const ScanKernel& k) {
  if (k.complex) return {DType::c64};
  if (k.file == "stdlib/linear_recurrence.kdsl") return {DType::f32, DType::bf16, DType::f16};
  return {DType::f32, DType::bf16};
}

class StdlibScanGpu : public ::testing::TestWithParam<ScanKernel> {};

TEST_P(StdlibScanGpu, Small) {
  KDSL_REQUIRE_GPU();
  const ScanKernel& k = GetParam();
  auto fe = testing::front_end(k.file);
  uint64_t seed = 1;
  for (DType t : dtypes_of(k)) {
    for (auto [b, l, d] : {std::tuple<int64_t, int64_t, int64_t>{2, 1, 5},
                           {2, 7, 5},
                           {3, 33, 7},
                           {2, 1000, 5},
                           {1, 65537, 3},
                           {2, 4096, 64}}) {
      Problem p = testing::scan_problem(fe, k, t, b, l, d, seed++);
      expect_gpu_matches(p, fmt::format("{} {} ({}, {}, {})", k.kernel, dtype_name(t), b, l, d));
      if (HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stdlib, StdlibScanGpu, ::testing::ValuesIn(testing::stdlib_scan_kernels()),
                         [](const auto& info) {
                           return info.param.kernel + (info.param.complex ? "_c64" : "");
                         });

std::vector<ScanKernel> big_kernels() {
  std::vector<ScanKernel> out;
  for (const ScanKernel& k : testing::stdlib_scan_kernels()) {
    if (k.kernel == "linear_recurrence" || k.kernel == "linear_recurrence_bwd" ||
        k.kernel == "complex_linear_recurrence_bwd" || k.kernel == "rg_lru" ||
        k.kernel == "rg_lru_bwd" || k.kernel == "cumsum_mid" || k.kernel == "cumsum" ||
        k.kernel == "logcumsumexp_reverse_mid_bwd") {
      out.push_back(k);
    }
  }
  return out;
}

class StdlibScanGpuBig : public ::testing::TestWithParam<ScanKernel> {};

TEST_P(StdlibScanGpuBig, IssueShapes) {
  KDSL_REQUIRE_GPU();
  const ScanKernel& k = GetParam();
  auto fe = testing::front_end(k.file);
  uint64_t seed = 100;
  for (DType t : dtypes_of(k)) {
    for (auto [b, l, d] : {std::tuple<int64_t, int64_t, int64_t>{4, 2048, 2048},
                           {1, 8192, 2560},
                           {1, 32768, 1024},
                           {1, 32768, 2048}}) {
      // Last-axis kernels: (M, N) = (B * D, L).
      Problem p = k.middle ? testing::scan_problem(fe, k, t, b, l, d, seed++, true)
                           : testing::scan_problem(fe, k, t, b * d, l, 1, seed++, true);
      int64_t n = k.middle ? d : b * d;
      std::vector<int64_t> idx = {0, 1, n / 3, n / 2, n / 2 + 1, 2 * n / 3, n - 2, n - 1};
      expect_gpu_matches_sample(
          fe, p, k.middle ? "D" : "M", idx,
          fmt::format("{} {} ({}, {}, {})", k.kernel, dtype_name(t), b, l, d));
      if (HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stdlib, StdlibScanGpuBig, ::testing::ValuesIn(big_kernels()),
                         [](const auto& info) {
                           return info.param.kernel + (info.param.complex ? "_c64" : "");
                         });

TEST(ScanGpu, ReverseCumsumOfLargeThenSmallValuesIsExact) {
  KDSL_REQUIRE_GPU();
  auto fe = testing::front_end("stdlib/scan.kdsl");
  HostTensor x(DType::f32, {1, 64});
  for (int64_t i = 0; i < 64; ++i) x.set(i, i < 32 ? 1e8 : 1.0);
  ProblemSpec ps;
  ps.kernel = "cumsum_reverse";
  ps.binding = {DType::f32};
  ps.shapes = {{"M", 1}, {"N", 64}};
  ps.inputs["x"] = x;
  Problem p = make_problem(fe, ps);
  std::vector<HostTensor> got = run_gpu(p);
  EXPECT_EQ(got[1].get(32), 32.0);
  EXPECT_EQ(got[1].get(63), 1.0);
}

TEST(ScanGpu, SameBitsOnEveryRun) {
  KDSL_REQUIRE_GPU();
  for (const char* kernel : {"linear_recurrence", "rg_lru_bwd"}) {
    ScanKernel k{kernel[0] == 'r' ? "stdlib/rg_lru.kdsl" : "stdlib/linear_recurrence.kdsl", kernel,
                 true, false};
    auto fe = testing::front_end(k.file);
    Problem p = testing::scan_problem(fe, k, DType::f32, 2, 16384, 512, 7, true);
    std::vector<HostTensor> a = run_gpu(p), b = run_gpu(p);
    for (size_t t = 0; t < a.size(); ++t) {
      if (p.ir.tensors[t].role == ir::Role::in) continue;
      EXPECT_EQ(a[t].bytes, b[t].bytes) << kernel << " output " << p.ir.tensors[t].name;
    }
  }
}

TEST(ScanGpu, CumsumAlongALengthOneAxisOfMoreThan4GElements) {
  KDSL_REQUIRE_GPU();
  const int64_t B = 309504, L = 1, D = 16384;
  const uint64_t bytes = static_cast<uint64_t>(B * L * D) * 4;
  size_t free_bytes = 0, total = 0;
  check(driver().cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
  if (free_bytes < 2 * bytes + (1ull << 30)) {
    GTEST_SKIP() << "skipped: needs " << (2 * bytes >> 30) << " GiB of device memory, "
                 << (free_bytes >> 30) << " GiB free";
  }
  auto fe = testing::front_end("stdlib/scan.kdsl");
  DeviceBuffer x(bytes), y(bytes);
  check(driver().cuMemsetD8(x.ptr(), 0, bytes), "cuMemsetD8");
  check(driver().cuMemsetD8(y.ptr(), 0xff, bytes), "cuMemsetD8");
  detail::KernelImpl kernel(fe, fe->find("cumsum_mid"));
  TensorRef xr = TensorRef::contiguous(reinterpret_cast<void*>(x.ptr()), DType::f32, {B, L, D});
  TensorRef yr = TensorRef::contiguous(reinterpret_cast<void*>(y.ptr()), DType::f32, {B, L, D});
  std::vector<Arg> args = {Arg(xr), Arg(yr)};
  kernel.launch(nullptr, args);
  check(driver().cuCtxSynchronize(), "cumsum_mid");
  // Every element written and zero: check in 1 GiB pieces.
  std::vector<uint32_t> host((1ull << 30) / 4);
  for (uint64_t off = 0; off < bytes; off += host.size() * 4) {
    uint64_t n = std::min<uint64_t>(host.size() * 4, bytes - off);
    check(driver().cuMemcpyDtoH(host.data(), y.ptr() + off, n), "cuMemcpyDtoH");
    for (uint64_t i = 0; i < n / 4; ++i) {
      ASSERT_EQ(host[i], 0u) << "element " << off / 4 + i;
    }
  }
}

}  // namespace
}  // namespace kdsl

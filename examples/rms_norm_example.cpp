// Embedding kdsl in a C++ program: load the stdlib RMSNorm, launch it on a CUDA stream on memory
// from cudaMalloc, and check the result against a double-precision computation on the host.
//
//   rms_norm_example [PATH/TO/rms_norm.kdsl [M N]]
//
// Built in-tree (examples/CMakeLists.txt) and, from the same source, by the standalone project in
// examples/embed against an installed kdsl. M and N, given together, are positive integers.
// Exit status: 0 when every value is within tolerance, 1 on a mismatch or an error, 2 on a bad
// command line, 4 when there is no GPU to run on.
#include <cuda_runtime.h>
#include <kdsl/kdsl.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef KDSL_EXAMPLE_STDLIB_DIR
#define KDSL_EXAMPLE_STDLIB_DIR "stdlib"
#endif

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitNoGpu = 4;
constexpr float kEps = 1e-6f;
// y and rstd are computed in f32 (a tree sum of N squares, rsqrtf): their error relative to the
// double-precision reference is a few f32 ulps (~1e-7 each), far below this bound.
constexpr double kTolerance = 1e-5;  // |got - want| / max(1, |want|)

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// cudaMalloc'd floats, freed on scope exit.
class DeviceFloats {
 public:
  explicit DeviceFloats(size_t count) : bytes_(count * sizeof(float)) {
    check(cudaMalloc(&ptr_, bytes_), "cudaMalloc");
  }
  ~DeviceFloats() { cudaFree(ptr_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* get() const { return static_cast<float*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

std::vector<float> random_floats(size_t count, uint64_t seed, float mean, float stddev) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> v(count);
  for (float& f : v) f = dist(gen);
  return v;
}

// Largest |got - want| / max(1, |want|) over the elements.
double max_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double e = std::abs(static_cast<double>(got[i]) - want[i]) / std::max(1.0, std::abs(want[i]));
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

// RMSNorm in double: rstd[m] = 1 / sqrt(mean(x[m, :]^2) + eps), y[m, :] = x[m, :] * rstd[m] * w.
void reference(const std::vector<float>& x, const std::vector<float>& w, int64_t m, int64_t n,
               std::vector<double>& y, std::vector<double>& rstd) {
  for (int64_t r = 0; r < m; ++r) {
    double sq = 0;
    for (int64_t c = 0; c < n; ++c) sq += static_cast<double>(x[r * n + c]) * x[r * n + c];
    rstd[r] = 1.0 / std::sqrt(sq / static_cast<double>(n) + kEps);
    for (int64_t c = 0; c < n; ++c) y[r * n + c] = x[r * n + c] * rstd[r] * w[c];
  }
}

int run(const kdsl::Kernel& rms_norm, int64_t m, int64_t n) {
  std::vector<float> x = random_floats(static_cast<size_t>(m * n), 1, 0.0f, 1.0f);
  std::vector<float> w = random_floats(static_cast<size_t>(n), 2, 1.0f, 0.25f);
  DeviceFloats dx(x.size()), dw(w.size()), dy(x.size()), drstd(static_cast<size_t>(m));
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaMemcpyAsync(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice, stream), "upload");
  check(cudaMemcpyAsync(dw.get(), w.data(), dw.bytes(), cudaMemcpyHostToDevice, stream), "upload");
  // Poison the outputs (0xff bytes are NaNs) so that anything the kernel misses shows.
  check(cudaMemsetAsync(dy.get(), 0xff, dy.bytes(), stream), "cudaMemset");
  check(cudaMemsetAsync(drstd.get(), 0xff, drstd.bytes(), stream), "cudaMemset");

  using kdsl::DType, kdsl::TensorRef;
  rms_norm.launch(stream, {TensorRef::contiguous(dx.get(), DType::f32, {m, n}),
                           TensorRef::contiguous(dw.get(), DType::f32, {n}), kEps,
                           TensorRef::contiguous(dy.get(), DType::f32, {m, n}),
                           TensorRef::contiguous(drstd.get(), DType::f32, {m})});

  std::vector<float> y(x.size()), rstd(static_cast<size_t>(m));
  check(cudaMemcpyAsync(y.data(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost, stream),
        "download");
  check(cudaMemcpyAsync(rstd.data(), drstd.get(), drstd.bytes(), cudaMemcpyDeviceToHost, stream),
        "download");
  check(cudaStreamSynchronize(stream), "rms_norm on the GPU");
  cudaStreamDestroy(stream);

  std::vector<double> want_y(y.size()), want_rstd(rstd.size());
  reference(x, w, m, n, want_y, want_rstd);
  double ey = max_error(y, want_y), er = max_error(rstd, want_rstd);
  bool ok = ey <= kTolerance && er <= kTolerance;
  std::printf(
      "rms_norm f32 M=%lld N=%lld: max error y %.3g, rstd %.3g (tolerance %.0e relative "
      "to max(1, |reference|)): %s\n",
      static_cast<long long>(m), static_cast<long long>(n), ey, er, kTolerance,
      ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}

// `text` as a positive count (every character a digit of it), or false.
bool parse_count(const char* text, int64_t& out) {
  const char* end = text + std::strlen(text);
  auto [ptr, ec] = std::from_chars(text, end, out);
  return ec == std::errc() && ptr == end && out > 0;
}

}  // namespace

int main(int argc, char** argv) {
  // M alone, extra arguments or a count that is not a positive integer are refused (a lone M
  // was ignored and "7x" read as 7).
  int64_t m = 1000, n = 4096;
  if (argc == 3 || argc > 4 ||
      (argc == 4 && !(parse_count(argv[2], m) && parse_count(argv[3], n)))) {
    std::fprintf(stderr,
                 "rms_norm_example: usage: rms_norm_example [PATH/TO/rms_norm.kdsl [M N]] (M and "
                 "N positive integers)\n");
    return kExitUsage;
  }
  std::string path = argc > 1 ? argv[1] : KDSL_EXAMPLE_STDLIB_DIR "/rms_norm.kdsl";
  try {
    // Parsing and checking the module needs no GPU.
    kdsl::Kernel rms_norm = kdsl::Module::load(path).kernel("rms_norm");
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "rms_norm_example: no GPU (%s); loaded %s but nothing to run\n",
                   e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device", path.c_str());
      return kExitNoGpu;
    }
    return run(rms_norm, m, n);
  } catch (const kdsl::Error& e) {  // ArgumentError, CompileError, CudaError, SourceError
    std::fprintf(stderr, "rms_norm_example: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rms_norm_example: %s\n", e.what());
  }
  return 1;
}

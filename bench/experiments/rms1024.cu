// Experiment (thirteenth session): how fast can RMSNorm bf16 at 1024 x 8192 go on the H200?
// Hand-written variants, timed like kdsl_bench_norm (median of CUDA-event timings, L2 flushed by
// writing a 256 MiB buffer before each run):
//   reg<T>   one CTA of T threads per row, the row in registers (8 elements per 16-byte chunk)
//   smem<T>  one CTA of T threads per row, the row copied to shared memory with cp.async, then
//            read twice from there (sum of squares, then the output): few registers, so up to
//            eight 256-thread CTAs (eight rows) per SM, all 1024 rows in flight at once
//   copy     a 16-byte-vector copy of the same bytes (read x, write y)
// Build: nvcc -O3 -arch=sm_90 -o rms1024 rms1024.cu
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kN = 8192;

__device__ __forceinline__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = 0.f;
  for (int i = 0; i < nw; ++i) t += red[i];
  return t;
}

__device__ __forceinline__ void sumsq8(const uint4 u, float& s) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float2 f = __bfloat1622float2(h[k]);
    s = fmaf(f.x, f.x, s);
    s = fmaf(f.y, f.y, s);
  }
}

__device__ __forceinline__ uint4 scale8(const uint4 u, const uint4 w, float r) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
  const __nv_bfloat162* g = reinterpret_cast<const __nv_bfloat162*>(&w);
  uint4 o;
  __nv_bfloat162* q = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float2 f = __bfloat1622float2(h[k]), wf = __bfloat1622float2(g[k]);
    q[k] = __floats2bfloat162_rn(f.x * r * wf.x, f.y * r * wf.y);
  }
  return o;
}

template <int T, int MINB>
__global__ void __launch_bounds__(T, MINB)
    rms_reg(const uint4* __restrict__ x, const uint4* __restrict__ w, uint4* __restrict__ y) {
  constexpr int C = kN / 8 / T;
  __shared__ float red[T / 32];
  const long long base = static_cast<long long>(blockIdx.x) * (kN / 8);
  uint4 v[C];
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < C; ++c) v[c] = x[base + c * T + threadIdx.x];
#pragma unroll
  for (int c = 0; c < C; ++c) sumsq8(v[c], s);
  const float r = rsqrtf(block_sum(s, red) / kN + 1e-6f);
#pragma unroll
  for (int c = 0; c < C; ++c)
    y[base + c * T + threadIdx.x] = scale8(v[c], w[c * T + threadIdx.x], r);
}

template <int T, int MINB>
__global__ void __launch_bounds__(T, MINB)
    rms_smem(const uint4* __restrict__ x, const uint4* __restrict__ w, uint4* __restrict__ y) {
  constexpr int C = kN / 8 / T;
  __shared__ uint4 row[kN / 8];
  __shared__ float red[T / 32];
  const long long base = static_cast<long long>(blockIdx.x) * (kN / 8);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&row[c * T + threadIdx.x]));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst),
                 "l"(x + base + c * T + threadIdx.x));
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < C; ++c) sumsq8(row[c * T + threadIdx.x], s);
  const float r = rsqrtf(block_sum(s, red) / kN + 1e-6f);
#pragma unroll
  for (int c = 0; c < C; ++c)
    y[base + c * T + threadIdx.x] = scale8(row[c * T + threadIdx.x], w[c * T + threadIdx.x], r);
}

__global__ void copy16(const uint4* __restrict__ x, uint4* __restrict__ y, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    y[i] = x[i];
}

#define CK(e)                                                         \
  do {                                                                \
    cudaError_t err_ = (e);                                           \
    if (err_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #e, cudaGetErrorString(err_)); \
      std::exit(1);                                                   \
    }                                                                 \
  } while (0)

int main(int argc, char** argv) {
  const int M = argc > 1 ? std::atoi(argv[1]) : 1024;
  const size_t nx = static_cast<size_t>(M) * kN;
  std::vector<__nv_bfloat16> hx(nx), hw(kN);
  srand(1);
  for (auto& v : hx) v = __float2bfloat16(static_cast<float>(rand()) / RAND_MAX * 4.f - 2.f);
  for (auto& v : hw) v = __float2bfloat16(static_cast<float>(rand()) / RAND_MAX + 0.5f);
  __nv_bfloat16 *x, *w, *y;
  char* flush;
  const size_t flush_bytes = 256u << 20;
  CK(cudaMalloc(&x, nx * 2));
  CK(cudaMalloc(&y, nx * 2));
  CK(cudaMalloc(&w, kN * 2));
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMemcpy(x, hx.data(), nx * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(w, hw.data(), kN * 2, cudaMemcpyHostToDevice));
  // float64 reference of a few rows
  auto check = [&](const char* name) {
    std::vector<__nv_bfloat16> hy(nx);
    CK(cudaMemcpy(hy.data(), y, nx * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int m = 0; m < M; m += 97) {
      double ss = 0;
      for (int n = 0; n < kN; ++n) {
        double v = __bfloat162float(hx[(size_t)m * kN + n]);
        ss += v * v;
      }
      double r = 1.0 / std::sqrt(ss / kN + 1e-6);
      for (int n = 0; n < kN; ++n) {
        double ref = __bfloat162float(hx[(size_t)m * kN + n]) * r * __bfloat162float(hw[n]);
        double got = __bfloat162float(hy[(size_t)m * kN + n]);
        worst = std::max(worst, std::fabs(got - ref) / (std::fabs(ref) + 1e-2));
      }
    }
    if (!(worst < 2e-2)) std::printf("  %s: WRONG (worst rel err %.3g)\n", name, worst);
  };
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto time = [&](const char* name, auto launch, bool verify) {
    if (verify) {
      CK(cudaMemset(y, 0xff, nx * 2));
      launch();
      CK(cudaDeviceSynchronize());
      check(name);
    }
    std::vector<float> t;
    for (int i = 0; i < 105; ++i) {
      CK(cudaMemsetAsync(flush, i, flush_bytes));
      CK(cudaEventRecord(a));
      launch();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms;
      CK(cudaEventElapsedTime(&ms, a, b));
      if (i >= 5) t.push_back(ms * 1000.f);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    const double us = t[t.size() / 2];
    std::printf("%-28s M=%d %8.2f us  %7.1f GB/s\n", name, M, us, 2.0 * nx * 2 / us / 1e3);
  };
  const uint4* X = reinterpret_cast<const uint4*>(x);
  const uint4* W = reinterpret_cast<const uint4*>(w);
  uint4* Y = reinterpret_cast<uint4*>(y);
  int occ;
#define OCC(k, T)                                                   \
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, T, 0)); \
  std::printf("  occupancy %-20s %d CTAs/SM\n", #k, occ);
  OCC((rms_smem<256, 8>), 256);
  OCC((rms_smem<128, 16>), 128);
  OCC((rms_reg<256, 8>), 256);
  OCC((rms_reg<512, 2>), 512);
  OCC((rms_reg<128, 8>), 128);
  for (int round = 0; round < 2; ++round) {
    time(
        "copy16 (grid 132x16x256)", [&] { copy16<<<132 * 8, 256>>>(X, Y, nx / 8); }, false);
    time(
        "cudaMemcpyAsync d2d", [&] { CK(cudaMemcpyAsync(y, x, nx * 2, cudaMemcpyDeviceToDevice)); },
        false);
    time(
        "reg<512,2>", [&] { rms_reg<512, 2><<<M, 512>>>(X, W, Y); }, round == 0);
    time(
        "reg<256,8>", [&] { rms_reg<256, 8><<<M, 256>>>(X, W, Y); }, round == 0);
    time(
        "reg<256,4>", [&] { rms_reg<256, 4><<<M, 256>>>(X, W, Y); }, round == 0);
    time(
        "reg<128,8>", [&] { rms_reg<128, 8><<<M, 128>>>(X, W, Y); }, round == 0);
    time(
        "smem<256,8>", [&] { rms_smem<256, 8><<<M, 256>>>(X, W, Y); }, round == 0);
    time(
        "smem<128,16>", [&] { rms_smem<128, 16><<<M, 128>>>(X, W, Y); }, round == 0);
    time(
        "smem<512,4>", [&] { rms_smem<512, 4><<<M, 512>>>(X, W, Y); }, round == 0);
  }
  return 0;
}

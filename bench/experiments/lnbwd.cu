// Experiment (eighteenth session): how fast can LayerNorm backward bf16 go on the H200 with the
// structure kdsl generates (a persistent grid, one CTA per row, the column sums dw and db in f32
// registers across a CTA's rows, per-CTA partials summed in a fixed order by a second kernel)?
// kdsl reached 0.46-0.71 of copy there (AB3), RMSNorm backward 0.53-0.91. The variants differ in
// what kdsl's code does not do:
//   - x and dy held packed (two bf16 per 32-bit register) and unpacked in each phase;
//   - w loaded once per CTA and kept packed in registers (kdsl re-reads it per phase);
//   - 32-bit indexing, one row per CTA with no `valid` test per element;
//   - __launch_bounds__(T, MINB): MINB CTAs per SM.
// Rows come through shared memory (cp.async, the next row copied while this one is computed, as
// kdsl's stage=2) when STAGE, else straight from global memory into registers with the next
// row's loads issued before this row's math (as kdsl's prefetch=1).
// Timed like kdsl_bench_norm: median of CUDA-event timings of the two kernels, L2 flushed by
// writing a 256 MiB buffer before each run; the ratio is to a 1 GiB device-to-device copy timed
// the same way in the same process. dx, dw and db are checked against a double-precision
// reference on the CPU (dx on 64 rows spread over M, dw and db over all rows); a NaN fails.
// Run: lnbwd [8192|4096|1024 [VARIANT]] (one shape; VARIANT, 1-based, one of its variants).
// Build: nvcc -O3 -arch=sm_90 -std=c++17 -o lnbwd lnbwd.cu
// With kdsl's generated kernels at N = 8192 as the last variant of that shape (run_generated):
//   kdsl emit stdlib/layer_norm.kdsl -k layer_norm_bwd --dtype bf16 --shape N=8192 > kdsl_gen.cuh
//   nvcc ... -DKDSL_GEN_N=8192 -DKDSL_GEN_T=512 -DKDSL_GEN_SMEM=65536 -I. -o lnbwd lnbwd.cu
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__device__ __forceinline__ float bf_lo(unsigned w) {
  return __uint_as_float(w << 16);
}
__device__ __forceinline__ float bf_hi(unsigned w) {
  return __uint_as_float(w & 0xffff0000u);
}
__device__ __forceinline__ unsigned bf_pack(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<unsigned*>(&h);
}
__device__ __forceinline__ void cp16(void* s, const void* g) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(s));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(g) : "memory");
}
// The zero-filling form kdsl emits: the source size in a register (16, or 0 for a row past M).
__device__ __forceinline__ void cp16z(void* s, const void* g, bool ok) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(s));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(a), "l"(g), "r"(ok ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
__device__ __forceinline__ void cp_wait1() {
  asm volatile("cp.async.wait_group 1;" ::: "memory");
}

// One CTA of T threads per row of N bf16; C = N / 8 / T 16-byte chunks per thread.
// F (what kdsl's generated code does, one at a time): 1 stages the per-row scalars mu and rstd
// in shared memory with a 4-byte cp.async per thread; 2 indexes rows with 64-bit runtime strides;
// 4 tests a runtime `valid` (row + threadIdx.x / T < M) on every column accumulation and store;
// 8 issues every row copy in the zero-filling form, also past the last row (it does not combine
// with 1: that path copies no scalars).
template <int N, int T, int MINB, bool STAGE, bool WREG, int F = 0>
__global__ void __launch_bounds__(T, MINB)
    lnbwd(const uint4* __restrict__ dy, const uint4* __restrict__ x, const uint4* __restrict__ w,
          const float* __restrict__ mu, const float* __restrict__ rstd, uint4* __restrict__ dx,
          float* __restrict__ ws, int M, long long st) {
  constexpr int V = N / 8, C = V / T, W = T / 32;
  constexpr bool SCP = (F & 1) && STAGE, WIDE = F & 2, VALID = F & 4, ZFILL = F & 8;
  __shared__ float scal[2][2][SCP ? T * 2 : 1];
  const uint4* const xb = x;
  const uint4* const dyb = dy;
  uint4* const dxb = dx;
  auto at = [&](auto* base, int r, int v) {
    if constexpr (WIDE) {
      return base + (static_cast<long long>(r) * st + static_cast<long long>(v) * 8) / 8;
    } else {
      return base + r * V + v;
    }
  };
  static_assert(C * T == V, "T must divide N / 8");
  extern __shared__ uint4 stage[];  // [2 buffers][x, dy][C][T] when STAGE
  __shared__ float red[2][2][W];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  float adw[C * 8], adb[C * 8];
#pragma unroll
  for (int i = 0; i < C * 8; ++i) adw[i] = adb[i] = 0.f;
  uint4 wr[C];
  if (WREG) {
#pragma unroll
    for (int c = 0; c < C; ++c) wr[c] = w[c * T + t];
  }
  uint4 xr[C], dr[C];  // this row (packed)
  uint4 xn[C], dn[C];  // the next row, in flight (!STAGE)
  int row = blockIdx.x;
  const int step = gridDim.x;
  auto fetch = [&](int r, int buf) {
    if (STAGE && ZFILL) {
      const bool ok = r < M;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        cp16z(&stage[((buf * 2 + 0) * C + c) * T + t], ok ? at(xb, r, c * T + t) : xb, ok);
        cp16z(&stage[((buf * 2 + 1) * C + c) * T + t], ok ? at(dyb, r, c * T + t) : dyb, ok);
      }
      cp_commit();
    } else if (STAGE) {
      if (r < M) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
          cp16(&stage[((buf * 2 + 0) * C + c) * T + t], at(xb, r, c * T + t));
          cp16(&stage[((buf * 2 + 1) * C + c) * T + t], at(dyb, r, c * T + t));
        }
        if (SCP) {
          const unsigned a0 = static_cast<unsigned>(__cvta_generic_to_shared(&scal[buf][0][2 * t]));
          const unsigned a1 = static_cast<unsigned>(__cvta_generic_to_shared(&scal[buf][1][2 * t]));
          asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(a0), "l"(mu + r)
                       : "memory");
          asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(a1), "l"(rstd + r)
                       : "memory");
        }
      }
      cp_commit();
    } else if (r < M) {
#pragma unroll
      for (int c = 0; c < C; ++c) {
        xn[c] = *at(xb, r, c * T + t);
        dn[c] = *at(dyb, r, c * T + t);
      }
    }
  };
  fetch(row, 0);
  float mn = row < M ? mu[row] : 0.f, rn = row < M ? rstd[row] : 0.f;
  int buf = 0;
  for (; row < M; row += step, buf ^= 1) {
    if (STAGE) {
      fetch(row + step, buf ^ 1);
      cp_wait1();
#pragma unroll
      for (int c = 0; c < C; ++c) {
        xr[c] = stage[((buf * 2 + 0) * C + c) * T + t];
        dr[c] = stage[((buf * 2 + 1) * C + c) * T + t];
      }
    } else {
#pragma unroll
      for (int c = 0; c < C; ++c) {
        xr[c] = xn[c];
        dr[c] = dn[c];
      }
      fetch(row + step, 0);
    }
    const bool valid = !VALID || row + static_cast<int>(threadIdx.x / T) < M;
    const float m = SCP ? scal[buf][0][2 * t] : mn, r = SCP ? scal[buf][1][2 * t] : rn;
    if (!SCP && row + step < M) {
      mn = mu[row + step];
      rn = rstd[row + step];
    }
    float s1 = 0.f, s2 = 0.f;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const uint4 wv = WREG ? wr[c] : w[c * T + t];
      const unsigned xa[4] = {xr[c].x, xr[c].y, xr[c].z, xr[c].w};
      const unsigned da[4] = {dr[c].x, dr[c].y, dr[c].z, dr[c].w};
      const unsigned wa[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float xv = j & 1 ? bf_hi(xa[j / 2]) : bf_lo(xa[j / 2]);
        const float dv = j & 1 ? bf_hi(da[j / 2]) : bf_lo(da[j / 2]);
        const float wf = j & 1 ? bf_hi(wa[j / 2]) : bf_lo(wa[j / 2]);
        const float xh = (xv - m) * r, g = dv * wf;
        s1 += g;
        s2 = fmaf(g, xh, s2);
        if (valid) adw[c * 8 + j] = fmaf(dv, xh, adw[c * 8 + j]);
        if (valid) adb[c * 8 + j] += dv;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      s1 += __shfl_xor_sync(0xffffffffu, s1, o);
      s2 += __shfl_xor_sync(0xffffffffu, s2, o);
    }
    if (lane == 0) {
      red[buf][0][warp] = s1;
      red[buf][1][warp] = s2;
    }
    __syncthreads();
    s1 = lane < W ? red[buf][0][lane] : 0.f;
    s2 = lane < W ? red[buf][1][lane] : 0.f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {  // lanes W to 31 hold zeros
      s1 += __shfl_xor_sync(0xffffffffu, s1, o);
      s2 += __shfl_xor_sync(0xffffffffu, s2, o);
    }
    const float mg = s1 * (1.f / N), mgx = s2 * (1.f / N);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const uint4 wv = WREG ? wr[c] : w[c * T + t];
      const unsigned xa[4] = {xr[c].x, xr[c].y, xr[c].z, xr[c].w};
      const unsigned da[4] = {dr[c].x, dr[c].y, dr[c].z, dr[c].w};
      const unsigned wa[4] = {wv.x, wv.y, wv.z, wv.w};
      float o[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float xv = j & 1 ? bf_hi(xa[j / 2]) : bf_lo(xa[j / 2]);
        const float dv = j & 1 ? bf_hi(da[j / 2]) : bf_lo(da[j / 2]);
        const float wf = j & 1 ? bf_hi(wa[j / 2]) : bf_lo(wa[j / 2]);
        const float xh = (xv - m) * r;
        o[j] = r * (dv * wf - mg - xh * mgx);
      }
      if (valid)
        *at(dxb, row, c * T + t) = make_uint4(bf_pack(o[0], o[1]), bf_pack(o[2], o[3]),
                                              bf_pack(o[4], o[5]), bf_pack(o[6], o[7]));
    }
  }
  // Partials of this CTA: ws[blockIdx.x][0 or 1][N].
  float4* p = reinterpret_cast<float4*>(ws + static_cast<size_t>(blockIdx.x) * 2 * N);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int v = c * T + t;
    p[2 * v] = make_float4(adw[c * 8], adw[c * 8 + 1], adw[c * 8 + 2], adw[c * 8 + 3]);
    p[2 * v + 1] = make_float4(adw[c * 8 + 4], adw[c * 8 + 5], adw[c * 8 + 6], adw[c * 8 + 7]);
    p[2 * V + 2 * v] = make_float4(adb[c * 8], adb[c * 8 + 1], adb[c * 8 + 2], adb[c * 8 + 3]);
    p[2 * V + 2 * v + 1] =
        make_float4(adb[c * 8 + 4], adb[c * 8 + 5], adb[c * 8 + 6], adb[c * 8 + 7]);
  }
}

// RPT rows per CTA and iteration, the same T threads over each (one chunk of each row per
// thread, C = 1): the rows' copies, scalars, sums and the cross-warp barrier are shared by RPT
// rows, so the per-row overhead (the barrier, the reduction's shuffles, the loop) is paid once
// per RPT rows and twice the bytes are in flight per CTA. Staged, w in registers, F = 0.
template <int N, int T, int MINB, int RPT>
__global__ void __launch_bounds__(T, MINB)
    lnbwd_rows(const uint4* __restrict__ dy, const uint4* __restrict__ x,
               const uint4* __restrict__ w, const float* __restrict__ mu,
               const float* __restrict__ rstd, uint4* __restrict__ dx, float* __restrict__ ws,
               int M, long long) {
  constexpr int V = N / 8, W = T / 32;
  static_assert(V == T, "one 16-byte chunk of each row per thread");
  extern __shared__ uint4 stage[];  // [2 buffers][RPT rows][x, dy][T]
  __shared__ float red[2][2 * RPT][W];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  float adw[8], adb[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) adw[i] = adb[i] = 0.f;
  const uint4 wv = w[t];
  const unsigned wa[4] = {wv.x, wv.y, wv.z, wv.w};
  const int step = gridDim.x * RPT;
  auto fetch = [&](int base, int buf) {
#pragma unroll
    for (int rr = 0; rr < RPT; ++rr) {
      if (base + rr < M) {
        cp16(&stage[((buf * RPT + rr) * 2 + 0) * T + t], &x[(base + rr) * V + t]);
        cp16(&stage[((buf * RPT + rr) * 2 + 1) * T + t], &dy[(base + rr) * V + t]);
      }
    }
    cp_commit();
  };
  int base = blockIdx.x * RPT;
  fetch(base, 0);
  float mn[RPT], rn[RPT];
#pragma unroll
  for (int rr = 0; rr < RPT; ++rr) {
    mn[rr] = base + rr < M ? mu[base + rr] : 0.f;
    rn[rr] = base + rr < M ? rstd[base + rr] : 0.f;
  }
  int buf = 0;
  for (; base < M; base += step, buf ^= 1) {
    fetch(base + step, buf ^ 1);
    cp_wait1();
    uint4 xr[RPT], dr[RPT];
    float m[RPT], r[RPT], s[2 * RPT];
#pragma unroll
    for (int rr = 0; rr < RPT; ++rr) {
      xr[rr] = stage[((buf * RPT + rr) * 2 + 0) * T + t];
      dr[rr] = stage[((buf * RPT + rr) * 2 + 1) * T + t];
      m[rr] = mn[rr];
      r[rr] = rn[rr];
      if (base + step + rr < M) {
        mn[rr] = mu[base + step + rr];
        rn[rr] = rstd[base + step + rr];
      }
    }
#pragma unroll
    for (int rr = 0; rr < RPT; ++rr) {
      const bool valid = base + rr < M;  // rows past M: zeros in, nothing accumulated
      const unsigned xa[4] = {xr[rr].x, xr[rr].y, xr[rr].z, xr[rr].w};
      const unsigned da[4] = {dr[rr].x, dr[rr].y, dr[rr].z, dr[rr].w};
      float s1 = 0.f, s2 = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float xv = j & 1 ? bf_hi(xa[j / 2]) : bf_lo(xa[j / 2]);
        const float dv = valid ? (j & 1 ? bf_hi(da[j / 2]) : bf_lo(da[j / 2])) : 0.f;
        const float wf = j & 1 ? bf_hi(wa[j / 2]) : bf_lo(wa[j / 2]);
        const float xh = (xv - m[rr]) * r[rr], g = dv * wf;
        s1 += g;
        s2 = fmaf(g, xh, s2);
        adw[j] = fmaf(dv, xh, adw[j]);
        adb[j] += dv;
      }
      s[2 * rr] = s1;
      s[2 * rr + 1] = s2;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
      for (int i = 0; i < 2 * RPT; ++i) s[i] += __shfl_xor_sync(0xffffffffu, s[i], o);
    }
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < 2 * RPT; ++i) red[buf][i][warp] = s[i];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 2 * RPT; ++i) s[i] = lane < W ? red[buf][i][lane] : 0.f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {  // lanes W to 31 hold zeros
#pragma unroll
      for (int i = 0; i < 2 * RPT; ++i) s[i] += __shfl_xor_sync(0xffffffffu, s[i], o);
    }
#pragma unroll
    for (int rr = 0; rr < RPT; ++rr) {
      if (base + rr >= M) continue;
      const float mg = s[2 * rr] * (1.f / N), mgx = s[2 * rr + 1] * (1.f / N);
      const unsigned xa[4] = {xr[rr].x, xr[rr].y, xr[rr].z, xr[rr].w};
      const unsigned da[4] = {dr[rr].x, dr[rr].y, dr[rr].z, dr[rr].w};
      float o[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float xv = j & 1 ? bf_hi(xa[j / 2]) : bf_lo(xa[j / 2]);
        const float dv = j & 1 ? bf_hi(da[j / 2]) : bf_lo(da[j / 2]);
        const float wf = j & 1 ? bf_hi(wa[j / 2]) : bf_lo(wa[j / 2]);
        const float xh = (xv - m[rr]) * r[rr];
        o[j] = r[rr] * (dv * wf - mg - xh * mgx);
      }
      dx[(base + rr) * V + t] = make_uint4(bf_pack(o[0], o[1]), bf_pack(o[2], o[3]),
                                           bf_pack(o[4], o[5]), bf_pack(o[6], o[7]));
    }
  }
  float4* p = reinterpret_cast<float4*>(ws + static_cast<size_t>(blockIdx.x) * 2 * N);
  p[2 * t] = make_float4(adw[0], adw[1], adw[2], adw[3]);
  p[2 * t + 1] = make_float4(adw[4], adw[5], adw[6], adw[7]);
  p[2 * V + 2 * t] = make_float4(adb[0], adb[1], adb[2], adb[3]);
  p[2 * V + 2 * t + 1] = make_float4(adb[4], adb[5], adb[6], adb[7]);
}

// dw and db: per column, the partials summed in order (deterministic).
__global__ void finalize(const float* __restrict__ ws, int parts, int n, __nv_bfloat16* dw,
                         __nv_bfloat16* db) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= 2 * n) return;
  const int which = j / n, col = j % n;
  float s = 0.f;
  for (int q = 0; q < parts; ++q) s += ws[(static_cast<size_t>(q) * 2 + which) * n + col];
  (which ? db : dw)[col] = __float2bfloat16_rn(s);
}

static float bf2f(__nv_bfloat16 h) {
  return __bfloat162float(h);
}
// The larger of two relative errors, NaN the larger of all (std::max would drop a NaN error: a
// NaN output, e.g. the 0xffff poison left unwritten, must fail the check).
static double worse(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
}

struct Problem {
  int M, N;
  __nv_bfloat16 *dy, *x, *w, *dx, *dw, *db;
  float *mu, *rstd, *ws;
  std::vector<__nv_bfloat16> hdy, hx, hw;
  std::vector<float> hmu, hrstd;
};

static int g_variant = 0, g_only_variant = -1;  // argv[2]: run only that variant (1-based)

using Kernel = void (*)(const uint4*, const uint4*, const uint4*, const float*, const float*,
                        uint4*, float*, int, long long);

// Checks and times kernel k (T threads, smem bytes of dynamic shared memory) on P.
// Checks and times one launch of LayerNorm backward on P: `launch` runs both kernels (the row
// kernel and the finalize), `parts` times each alone (the row kernel, then the finalize), after
// the full launch; regs, spill, per_sm and grid describe the row kernel for the report.
template <class Launch, class Part1, class Part2>
static void run_launch(Problem& P, const char* name, int N, int T, int F, int regs, size_t spill,
                       int per_sm, int grid, Launch launch, Part1 part1, Part2 part2, float* flush,
                       size_t flush_bytes, double copy_gbs);

// The persistent grid of row kernel `k` (T threads, smem bytes of dynamic shared memory): the
// CTAs resident at once on every SM, at most one per row; *per_sm and *fa describe the kernel.
static int persistent_grid(const void* k, int T, int smem, int M, int* per_sm,
                           cudaFuncAttributes* fa) {
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int sms = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, k, T, smem));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaFuncGetAttributes(fa, k));
  return std::min(M, *per_sm * sms);
}

static void run_kernel(Problem& P, const char* name, Kernel k, int N, int T, int F, int smem,
                       float* flush, size_t flush_bytes, double copy_gbs) {
  if (g_only_variant >= 0 && ++g_variant != g_only_variant) return;
  int per_sm = 0;
  cudaFuncAttributes fa;
  const int grid = persistent_grid(reinterpret_cast<const void*>(k), T, smem, P.M, &per_sm, &fa);
  const int M = P.M;
  auto main_kernel = [&] {
    k<<<grid, T, smem>>>(reinterpret_cast<const uint4*>(P.dy), reinterpret_cast<const uint4*>(P.x),
                         reinterpret_cast<const uint4*>(P.w), P.mu, P.rstd,
                         reinterpret_cast<uint4*>(P.dx), P.ws, M, static_cast<long long>(N));
  };
  auto fin = [&] { finalize<<<(2 * N + 255) / 256, 256>>>(P.ws, grid, N, P.dw, P.db); };
  auto launch = [&] {
    main_kernel();
    fin();
  };
  run_launch(P, name, N, T, F, fa.numRegs, static_cast<size_t>(fa.localSizeBytes), per_sm, grid,
             launch, main_kernel, fin, flush, flush_bytes, copy_gbs);
}

template <class Launch, class Part1, class Part2>
static void run_launch(Problem& P, const char* name, int N, int T, int F, int regs, size_t spill,
                       int per_sm, int grid, Launch launch, Part1 part1, Part2 part2, float* flush,
                       size_t flush_bytes, double copy_gbs) {
  const int M = P.M;
  CK(cudaMemset(P.dx, 0xff, sizeof(__nv_bfloat16) * M * N));  // poison
  CK(cudaMemset(P.dw, 0xff, sizeof(__nv_bfloat16) * N));
  CK(cudaMemset(P.db, 0xff, sizeof(__nv_bfloat16) * N));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  // Check against a double-precision reference.
  std::vector<__nv_bfloat16> hdx(static_cast<size_t>(M) * N), hdw(N), hdb(N);
  CK(cudaMemcpy(hdx.data(), P.dx, hdx.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hdw.data(), P.dw, N * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hdb.data(), P.db, N * 2, cudaMemcpyDeviceToHost));
  std::vector<double> rdw(N, 0.0), rdb(N, 0.0);
  double worst_dx = 0.0, worst_dw = 0.0, worst_db = 0.0;
  const int every = std::max(1, M / 64);
  for (int m = 0; m < M; ++m) {
    const size_t b = static_cast<size_t>(m) * N;
    const double mu = P.hmu[m], r = P.hrstd[m];
    double s1 = 0, s2 = 0;
    for (int j = 0; j < N; ++j) {
      const double xh = (bf2f(P.hx[b + j]) - mu) * r, dv = bf2f(P.hdy[b + j]);
      rdw[j] += dv * xh;
      rdb[j] += dv;
      if (m % every == 0) {
        const double g = dv * bf2f(P.hw[j]);
        s1 += g;
        s2 += g * xh;
      }
    }
    if (m % every) continue;
    for (int j = 0; j < N; ++j) {
      const double xh = (bf2f(P.hx[b + j]) - mu) * r, g = bf2f(P.hdy[b + j]) * bf2f(P.hw[j]);
      const double ref = r * (g - s1 / N - xh * s2 / N);
      const double got = bf2f(hdx[b + j]);
      worst_dx = worse(worst_dx, std::fabs(got - ref) / (1e-2 + std::fabs(ref)));
    }
  }
  double rms_dw = 0, rms_db = 0;
  for (int j = 0; j < N; ++j) rms_dw += rdw[j] * rdw[j], rms_db += rdb[j] * rdb[j];
  rms_dw = std::sqrt(rms_dw / N), rms_db = std::sqrt(rms_db / N);
  for (int j = 0; j < N; ++j) {
    worst_dw =
        worse(worst_dw, std::fabs(bf2f(hdw[j]) - rdw[j]) / (0.1 * rms_dw + std::fabs(rdw[j])));
    worst_db =
        worse(worst_db, std::fabs(bf2f(hdb[j]) - rdb[j]) / (0.1 * rms_db + std::fabs(rdb[j])));
  }
  // bf16 outputs: 2^-8 relative rounding; dx has atol 1e-2 (values about 1), column sums
  // 1/10 of their RMS.
  const bool ok = worst_dx < 2e-2 && worst_dw < 2e-2 && worst_db < 2e-2;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto median_us = [&](auto&& fn) {
    std::vector<float> ts;
    for (int rep = 0; rep < 60; ++rep) {
      CK(cudaMemsetAsync(flush, rep & 0xff, flush_bytes));
      CK(cudaEventRecord(a));
      fn();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      if (rep >= 5) ts.push_back(ms * 1e3f);
    }
    std::sort(ts.begin(), ts.end());
    return static_cast<double>(ts[ts.size() / 2]);
  };
  const double us = median_us(launch);
  const double us1 = median_us(part1), us2 = median_us(part2);
  const double bytes = 3.0 * M * N * 2 + 2.0 * M * 4 + 3.0 * N * 2;
  const double gbs = bytes / us * 1e-3;
  std::printf(
      "lnbwd bf16 M=%-6d N=%-6d %-28s F=%d T=%-5d regs=%-3d spill=%-4zu ctas/SM=%d grid=%-4d %8.2f "
      "us (rows %.2f, finalize %.2f) %6.0f GB/s %.3f of copy  %s (dx %.1e dw %.1e db %.1e)\n",
      M, N, name, F, T, regs, spill, per_sm, grid, us, us1, us2, gbs, gbs / copy_gbs,
      ok ? "ok" : "FAILED", worst_dx, worst_dw, worst_db);
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
}

template <int N, int T, int MINB, bool STAGE, bool WREG, int F = 0>
static void run(Problem& P, const char* name, float* flush, size_t flush_bytes, double copy_gbs) {
  run_kernel(P, name, lnbwd<N, T, MINB, STAGE, WREG, F>, N, T, F, STAGE ? 2 * 2 * (N / 8) * 16 : 0,
             flush, flush_bytes, copy_gbs);
}

template <int N, int T, int MINB, int RPT>
static void run_rows(Problem& P, const char* name, float* flush, size_t flush_bytes,
                     double copy_gbs) {
  run_kernel(P, name, lnbwd_rows<N, T, MINB, RPT>, N, T, 0, 2 * RPT * 2 * (N / 8) * 16, flush,
             flush_bytes, copy_gbs);
}

#ifdef KDSL_GEN_N
// kdsl's own generated kernels (`kdsl emit stdlib/layer_norm.kdsl -k layer_norm_bwd --dtype bf16
// --shape N=KDSL_GEN_N --cuda > kdsl_gen.cuh`, compiled here by nvcc instead of NVRTC) in this
// harness, with the grids kdsl's runtime gives them: the row kernel's persistent grid from the
// driver's occupancy, the finalize one CTA of 256 threads per 32 columns. KDSL_GEN_T and
// KDSL_GEN_SMEM are the row kernel's threads and dynamic shared memory (`--explain`).
#include "kdsl_gen.cuh"
#define KDSL_CAT2(a, b) a##b
#define KDSL_CAT(a, b) KDSL_CAT2(a, b)
#define KDSL_ROWS KDSL_CAT(kdsl_layer_norm_bwd_bf16_n, KDSL_GEN_N)
#define KDSL_FIN KDSL_CAT(KDSL_ROWS, _finalize)
#define KDSL_PARAMS KDSL_CAT(kdsl_params_, KDSL_ROWS)
static void run_generated(Problem& P, const char* name, float* flush, size_t flush_bytes,
                          double copy_gbs) {
  if (g_only_variant >= 0 && ++g_variant != g_only_variant) return;
  constexpr int N = KDSL_GEN_N, T = KDSL_GEN_T, smem = KDSL_GEN_SMEM;
  const int M = P.M;
  int per_sm = 0;
  cudaFuncAttributes fa;
  const int grid =
      persistent_grid(reinterpret_cast<const void*>(KDSL_ROWS), T, smem, M, &per_sm, &fa);
  KDSL_PARAMS p{};
  p.t0 = reinterpret_cast<const kdsl_u16*>(P.dy);
  p.st0_0 = N;
  p.st0_1 = 1;
  p.t1 = reinterpret_cast<const kdsl_u16*>(P.x);
  p.st1_0 = N;
  p.st1_1 = 1;
  p.t2 = reinterpret_cast<const kdsl_u16*>(P.w);
  p.st2_0 = 1;
  p.t3 = P.mu;
  p.st3_0 = 1;
  p.t4 = P.rstd;
  p.st4_0 = 1;
  p.t5 = reinterpret_cast<kdsl_u16*>(P.dx);
  p.st5_0 = N;
  p.st5_1 = 1;
  p.t6 = reinterpret_cast<kdsl_u16*>(P.dw);
  p.st6_0 = 1;
  p.t7 = reinterpret_cast<kdsl_u16*>(P.db);
  p.st7_0 = 1;
  p.sym0 = M;
  p.sym1 = N;
  p.rows = M;
  p.partials = grid;
  p.ws0 = P.ws;
  p.ws1 = P.ws + static_cast<size_t>(grid) * N;
  auto rows = [&] { KDSL_ROWS<<<grid, T, smem>>>(p); };
  auto fin = [&] { KDSL_FIN<<<(N + 31) / 32, 256>>>(p); };
  auto launch = [&] {
    rows();
    fin();
  };
  run_launch(P, name, N, T, 0, fa.numRegs, static_cast<size_t>(fa.localSizeBytes), per_sm, grid,
             launch, rows, fin, flush, flush_bytes, copy_gbs);
}
#endif

static Problem make(int M, int N, std::mt19937& rng) {
  Problem P{};
  P.M = M;
  P.N = N;
  const size_t e = static_cast<size_t>(M) * N;
  std::normal_distribution<float> nd(0.f, 1.f);
  P.hdy.resize(e);
  P.hx.resize(e);
  P.hw.resize(N);
  P.hmu.resize(M);
  P.hrstd.resize(M);
  for (size_t i = 0; i < e; ++i)
    P.hdy[i] = __float2bfloat16(nd(rng)), P.hx[i] = __float2bfloat16(nd(rng) * 2.f + 0.5f);
  for (int j = 0; j < N; ++j) P.hw[j] = __float2bfloat16(1.f + 0.1f * nd(rng));
  for (int m = 0; m < M; ++m) {  // the row's own statistics, as a forward pass gives them
    double s = 0, q = 0;
    for (int j = 0; j < N; ++j) s += bf2f(P.hx[static_cast<size_t>(m) * N + j]);
    const double mean = s / N;
    for (int j = 0; j < N; ++j) {
      const double d = bf2f(P.hx[static_cast<size_t>(m) * N + j]) - mean;
      q += d * d;
    }
    P.hmu[m] = static_cast<float>(mean);
    P.hrstd[m] = static_cast<float>(1.0 / std::sqrt(q / N + 1e-5));
  }
  CK(cudaMalloc(&P.dy, e * 2));
  CK(cudaMalloc(&P.x, e * 2));
  CK(cudaMalloc(&P.dx, e * 2));
  CK(cudaMalloc(&P.w, N * 2));
  CK(cudaMalloc(&P.dw, N * 2));
  CK(cudaMalloc(&P.db, N * 2));
  CK(cudaMalloc(&P.mu, M * 4));
  CK(cudaMalloc(&P.rstd, M * 4));
  CK(cudaMalloc(&P.ws, static_cast<size_t>(4096) * 2 * N * 4));
  CK(cudaMemcpy(P.dy, P.hdy.data(), e * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(P.x, P.hx.data(), e * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(P.w, P.hw.data(), N * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(P.mu, P.hmu.data(), M * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(P.rstd, P.hrstd.data(), M * 4, cudaMemcpyHostToDevice));
  return P;
}

static void release(Problem& P) {
  for (void* p : {static_cast<void*>(P.dy), static_cast<void*>(P.x), static_cast<void*>(P.dx),
                  static_cast<void*>(P.w), static_cast<void*>(P.dw), static_cast<void*>(P.db),
                  static_cast<void*>(P.mu), static_cast<void*>(P.rstd), static_cast<void*>(P.ws)})
    CK(cudaFree(p));
}

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  if (argc > 2) g_only_variant = std::atoi(argv[2]);
  const size_t flush_bytes = 256u << 20;
  float* flush;
  CK(cudaMalloc(&flush, flush_bytes));
  // The copy: 1 GiB device to device, median of 20 after 3.
  double copy_gbs;
  {
    const size_t n = 1u << 30;
    void *s, *d;
    CK(cudaMalloc(&s, n));
    CK(cudaMalloc(&d, n));
    CK(cudaMemset(s, 1, n));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> ts;
    for (int i = 0; i < 23; ++i) {
      CK(cudaEventRecord(a));
      CK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice));
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms;
      CK(cudaEventElapsedTime(&ms, a, b));
      if (i >= 3) ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    copy_gbs = 2.0 * n / (ts[ts.size() / 2] * 1e-3) * 1e-9;
    std::printf("copy 1 GiB: %.0f GB/s (read + write)\n", copy_gbs);
    CK(cudaFree(s));
    CK(cudaFree(d));
  }
  std::mt19937 rng(20261202);
  if (only.empty() || only == "8192") {
    Problem P = make(8192, 8192, rng);
    run<8192, 512, 1, true, true>(P, "stage, w in registers", flush, flush_bytes, copy_gbs);
    run<8192, 512, 1, true, true, 1>(P, "stage, w in registers", flush, flush_bytes, copy_gbs);
    run<8192, 512, 1, true, true, 2>(P, "stage, w in registers", flush, flush_bytes, copy_gbs);
    run<8192, 512, 1, true, true, 4>(P, "stage, w in registers", flush, flush_bytes, copy_gbs);
    run<8192, 512, 1, true, true, 7>(P, "stage, w in registers", flush, flush_bytes, copy_gbs);
    run<8192, 512, 1, true, true, 8>(P, "stage, w in registers", flush, flush_bytes, copy_gbs);
    run<8192, 512, 1, true, false>(P, "stage, w re-read", flush, flush_bytes, copy_gbs);
    run<8192, 512, 1, true, false, 7>(P, "stage, w re-read", flush, flush_bytes, copy_gbs);
    run<8192, 1024, 1, true, true>(P, "stage, w in registers", flush, flush_bytes, copy_gbs);
#ifdef KDSL_GEN_N
    run_generated(P, "kdsl's generated kernels", flush, flush_bytes, copy_gbs);
#endif
    release(P);
  }
  if (only.empty() || only == "4096") {
    Problem P = make(32768, 4096, rng);
    run<4096, 512, 2, true, true>(P, "stage, 2 CTAs, w in regs", flush, flush_bytes, copy_gbs);
    run<4096, 512, 2, true, true, 1>(P, "stage, 2 CTAs, w in regs", flush, flush_bytes, copy_gbs);
    run<4096, 512, 2, true, true, 2>(P, "stage, 2 CTAs, w in regs", flush, flush_bytes, copy_gbs);
    run<4096, 512, 2, true, true, 4>(P, "stage, 2 CTAs, w in regs", flush, flush_bytes, copy_gbs);
    run<4096, 512, 2, true, true, 7>(P, "stage, 2 CTAs, w in regs", flush, flush_bytes, copy_gbs);
    run<4096, 512, 2, true, true, 8>(P, "stage, 2 CTAs, w in regs", flush, flush_bytes, copy_gbs);
    run<4096, 512, 2, false, true>(P, "prefetch, 2 CTAs, w in regs", flush, flush_bytes, copy_gbs);
    run<4096, 512, 2, false, true, 6>(P, "prefetch, 2 CTAs, w in regs", flush, flush_bytes,
                                      copy_gbs);
    run_rows<4096, 512, 2, 1>(P, "1 row per iteration, 2 CTAs", flush, flush_bytes, copy_gbs);
    run_rows<4096, 512, 2, 2>(P, "2 rows per iteration, 2 CTAs", flush, flush_bytes, copy_gbs);
    release(P);
  }
  if (only.empty() || only == "1024") {
    Problem P = make(65536, 1024, rng);
    run<1024, 128, 8, true, true>(P, "stage, 8 CTAs, w in regs", flush, flush_bytes, copy_gbs);
    run<1024, 128, 8, true, true, 7>(P, "stage, 8 CTAs, w in regs", flush, flush_bytes, copy_gbs);
    run<1024, 128, 8, false, true>(P, "prefetch, 8 CTAs, w in regs", flush, flush_bytes, copy_gbs);
    run_rows<1024, 128, 8, 1>(P, "1 row per iteration, 8 CTAs", flush, flush_bytes, copy_gbs);
    run_rows<1024, 128, 8, 2>(P, "2 rows per iteration, 8 CTAs", flush, flush_bytes, copy_gbs);
    run_rows<1024, 128, 4, 4>(P, "4 rows per iteration, 4 CTAs", flush, flush_bytes, copy_gbs);
    release(P);
  }
  CK(cudaFree(flush));
  return 0;
}

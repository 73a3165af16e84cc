// Device-side support code of the scan schedule, emitted after cuda_prelude() in scan kernels.
#include "codegen_scan.h"

namespace kdsl {

const char* cuda_scan_prelude() {
  return R"KDSL(// ---- kdsl scan prelude: look-back flags, shuffles, vector accesses ----
// Flags of the decoupled look-back: written with release semantics after the tile's data, read
// with acquire semantics before it (PTX memory model, gpu scope).
__device__ __forceinline__ unsigned kdsl_sc_ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void kdsl_sc_st_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned kdsl_sc_wait(const unsigned* p) {
  unsigned v;
  int spins = 0;
  while ((v = kdsl_sc_ld_acquire(p)) == 0u) {
    if (++spins > 4) __nanosleep(64);
  }
  return v;
}
// Packed look-back words: a row's published state (at most three 32-bit words) and its status
// (1: the tile's aggregate, 2: its inclusive prefix) in one 16-byte word, written and read by one
// thread in one aligned 16-byte access, which the GPU performs as a single transaction (what
// CUB's tile status words also rely on): the state cannot be seen without its status, so no fence
// orders them.
__device__ __forceinline__ void kdsl_sc_pk_st(uint4* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ uint4 kdsl_sc_pk_ld(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint4 kdsl_sc_pk_wait(const uint4* p) {
  uint4 v;
  int spins = 0;
  while ((v = kdsl_sc_pk_ld(p)).w == 0u) {
    if (++spins > 4) __nanosleep(32);
  }
  return v;
}
// Barrier 1 over the first n threads of the CTA (n a multiple of 32): the look-back warps.
__device__ __forceinline__ void kdsl_sc_bar(int n) { asm volatile("bar.sync 1, %0;" :: "r"(n) : "memory"); }
// A published state, read from L2 (never a stale L1 line).
template <class T> __device__ __forceinline__ T kdsl_sc_ldcg(const T* p) {
  static_assert(sizeof(T) % 4 == 0, "states are made of 32-bit words");
  T r;
  const unsigned* s = reinterpret_cast<const unsigned*>(p);
  unsigned* d = reinterpret_cast<unsigned*>(&r);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T) / 4); ++i) d[i] = __ldcg(s + i);
  return r;
}
__device__ __forceinline__ float kdsl_sc_shfl_up(float v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }
__device__ __forceinline__ double kdsl_sc_shfl_up(double v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }
__device__ __forceinline__ int kdsl_sc_shfl_up(int v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }
__device__ __forceinline__ long long kdsl_sc_shfl_up(long long v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }
__device__ __forceinline__ kdsl_c64 kdsl_sc_shfl_up(kdsl_c64 v, int d) { return {kdsl_sc_shfl_up(v.re, d), kdsl_sc_shfl_up(v.im, d)}; }
__device__ __forceinline__ float kdsl_sc_shfl_idx(float v, int s) { return __shfl_sync(0xffffffffu, v, s); }
__device__ __forceinline__ double kdsl_sc_shfl_idx(double v, int s) { return __shfl_sync(0xffffffffu, v, s); }
__device__ __forceinline__ int kdsl_sc_shfl_idx(int v, int s) { return __shfl_sync(0xffffffffu, v, s); }
__device__ __forceinline__ long long kdsl_sc_shfl_idx(long long v, int s) { return __shfl_sync(0xffffffffu, v, s); }
__device__ __forceinline__ kdsl_c64 kdsl_sc_shfl_idx(kdsl_c64 v, int s) { return {kdsl_sc_shfl_idx(v.re, s), kdsl_sc_shfl_idx(v.im, s)}; }
// Hides a register array's values from common-subexpression elimination (an empty asm that may
// change each word), so that what was computed from them is computed again where needed, not
// held: a rescanning tile converts its packed 16-bit loads again in phase B.
template <class S, int N> __device__ __forceinline__ void kdsl_sc_opaque(S (&a)[N]) {
  if constexpr ((sizeof(S) * N) % 4 == 0) {
    unsigned w[sizeof(S) * N / 4];
    memcpy(w, a, sizeof(w));
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(S) * N / 4); ++i) asm volatile("" : "+r"(w[i]));
    memcpy(a, w, sizeof(w));
  } else {
    static_assert(sizeof(S) <= 2, "kdsl_sc_opaque: 8- or 16-bit elements, or whole 32-bit words");
#pragma unroll
    for (int i = 0; i < N; ++i) {
      unsigned short h = 0;
      memcpy(&h, &a[i], sizeof(S));
      asm volatile("" : "+h"(h));
      memcpy(&a[i], &h, sizeof(S));
    }
  }
}
// A column pointer's step in bytes (a multiple of the element size), hidden from NVVM (an empty
// asm that may change it), so that each step of the unrolled accesses stays one 64-bit add of the
// pointer (2 SASS instructions). A step NVVM can see through is folded back into an element index
// that is scaled into an address per access (a subtract, shift and add: 4 instructions).
__device__ __forceinline__ long long kdsl_sc_bytes(long long bytes) {
  asm("" : "+l"(bytes));
  return bytes;
}
template <class S> __device__ __forceinline__ void kdsl_sc_step(const S*& p, long long bytes) {
  p = reinterpret_cast<const S*>(reinterpret_cast<const char*>(p) + bytes);
}
template <class S> __device__ __forceinline__ void kdsl_sc_step(S*& p, long long bytes) {
  p = reinterpret_cast<S*>(reinterpret_cast<char*>(p) + bytes);
}
// N consecutive elements in one access of N * sizeof(S) bytes (16, 8 or 4; else element by
// element). The pointer must be aligned to the access size.
template <int N, class S> __device__ __forceinline__ void kdsl_sc_vld(const S* p, S* o) {
  constexpr int B = N * static_cast<int>(sizeof(S));
  if constexpr (B == 16) {
    uint4 q = *reinterpret_cast<const uint4*>(p);
    memcpy(o, &q, 16);
  } else if constexpr (B == 8) {
    uint2 q = *reinterpret_cast<const uint2*>(p);
    memcpy(o, &q, 8);
  } else if constexpr (B == 4) {
    unsigned q = *reinterpret_cast<const unsigned*>(p);
    memcpy(o, &q, 4);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) o[i] = p[i];
  }
}
template <int N, class S> __device__ __forceinline__ void kdsl_sc_vst(S* p, const S* v) {
  constexpr int B = N * static_cast<int>(sizeof(S));
  if constexpr (B == 16) {
    uint4 q;
    memcpy(&q, v, 16);
    *reinterpret_cast<uint4*>(p) = q;
  } else if constexpr (B == 8) {
    uint2 q;
    memcpy(&q, v, 8);
    *reinterpret_cast<uint2*>(p) = q;
  } else if constexpr (B == 4) {
    unsigned q;
    memcpy(&q, v, 4);
    *reinterpret_cast<unsigned*>(p) = q;
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) p[i] = v[i];
  }
}
// ---- end of scan prelude ----
)KDSL";
}

}  // namespace kdsl

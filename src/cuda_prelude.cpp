// The device-side support code every generated kernel starts with. It includes no header, so
// generated programs compile with NVRTC and no include path.
#include "cuda_prelude.h"

namespace kdsl {

const char* cuda_prelude() {
  return R"KDSL(// ---- kdsl prelude: storage conversions, complex numbers, reductions ----
typedef unsigned short kdsl_u16;
typedef unsigned char kdsl_u8;  // bool tensors (b8)
typedef long long kdsl_i64;     // i64: one word, so that kdsl_i64{} value-initializes it

__device__ __forceinline__ float kdsl_inf_f() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ float kdsl_nan_f() { return __int_as_float(0x7fffffff); }
__device__ __forceinline__ double kdsl_inf_d() { return __longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ double kdsl_nan_d() { return __longlong_as_double(0x7ff8000000000000LL); }

// bf16 and f16 are stored as raw 16-bit patterns and computed in f32 (needs sm_80 or newer).
__device__ __forceinline__ float kdsl_bf16_to_f32(kdsl_u16 h) {
  return __uint_as_float(static_cast<unsigned>(h) << 16);
}
__device__ __forceinline__ kdsl_u16 kdsl_f32_to_bf16(float f) {
  kdsl_u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
__device__ __forceinline__ float kdsl_f16_to_f32(kdsl_u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ kdsl_u16 kdsl_f32_to_f16(float f) {
  kdsl_u16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
__device__ __forceinline__ float kdsl_round_bf16(float f) { return kdsl_bf16_to_f32(kdsl_f32_to_bf16(f)); }
__device__ __forceinline__ float kdsl_round_f16(float f) { return kdsl_f16_to_f32(kdsl_f32_to_f16(f)); }
__device__ __forceinline__ unsigned kdsl_pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ unsigned kdsl_pack_f16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Complex numbers (c64: two f32).
struct kdsl_c64 { float re, im; };
__device__ __forceinline__ kdsl_c64 operator+(kdsl_c64 a, kdsl_c64 b) { return {a.re + b.re, a.im + b.im}; }
__device__ __forceinline__ kdsl_c64 operator-(kdsl_c64 a, kdsl_c64 b) { return {a.re - b.re, a.im - b.im}; }
__device__ __forceinline__ kdsl_c64 operator-(kdsl_c64 a) { return {-a.re, -a.im}; }
__device__ __forceinline__ kdsl_c64 operator*(kdsl_c64 a, kdsl_c64 b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
__device__ __forceinline__ kdsl_c64 operator/(kdsl_c64 a, kdsl_c64 b) {
  float d = b.re * b.re + b.im * b.im;
  return {(a.re * b.re + a.im * b.im) / d, (a.im * b.re - a.re * b.im) / d};
}
__device__ __forceinline__ bool operator==(kdsl_c64 a, kdsl_c64 b) { return a.re == b.re && a.im == b.im; }
__device__ __forceinline__ bool operator!=(kdsl_c64 a, kdsl_c64 b) { return !(a == b); }
__device__ __forceinline__ float kdsl_cabs(kdsl_c64 a) { return hypotf(a.re, a.im); }
__device__ __forceinline__ kdsl_c64 kdsl_conj(kdsl_c64 a) { return {a.re, -a.im}; }

// Elementwise helpers with Python/IEEE semantics: min/max propagate NaN; floordiv/mod floor.
__device__ __forceinline__ float kdsl_max(float a, float b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ float kdsl_min(float a, float b) { return (a < b || a != a) ? a : b; }
__device__ __forceinline__ double kdsl_max(double a, double b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ double kdsl_min(double a, double b) { return (a < b || a != a) ? a : b; }
__device__ __forceinline__ int kdsl_max(int a, int b) { return a > b ? a : b; }
__device__ __forceinline__ int kdsl_min(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ long long kdsl_max(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long kdsl_min(long long a, long long b) { return a < b ? a : b; }
// f32 max and min with a constant operand other than zero (kdsl::cuda::op_expr): one max.NaN /
// min.NaN (sm_80+) where kdsl_max takes a compare, a NaN test and a select. A NaN operand gives
// NaN either way (here the canonical one, not the operand's payload), and with a non-zero
// constant no tie of +0 and -0 can arise.
__device__ __forceinline__ float kdsl_max_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return kdsl_max(a, b);
#endif
}
__device__ __forceinline__ float kdsl_min_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return kdsl_min(a, b);
#endif
}
// rsqrt of an f32 operand that is never subnormal (max(x, c) with a constant c >= 2^-126):
// rsqrt.approx.ftz gives CUDA's rsqrtf (rsqrt.approx.f32) there, without ptxas's rescaling of
// subnormal operands (three instructions on sm_90).
__device__ __forceinline__ float kdsl_rsqrt_normal(float x) {
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
template <class T> __device__ __forceinline__ T kdsl_floordiv(T a, T b) {
  T q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ float kdsl_floordiv(float a, float b) { return floorf(a / b); }
__device__ __forceinline__ double kdsl_floordiv(double a, double b) { return floor(a / b); }
template <class T> __device__ __forceinline__ T kdsl_mod(T a, T b) {
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ float kdsl_mod(float a, float b) {
  float r = fmodf(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ double kdsl_mod(double a, double b) {
  double r = fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// 16-byte global accesses. CS = true marks data read or written once (ld/st.global.cs: evict
// first), so it does not push reused data (weights) out of L2.
template <bool CS> __device__ __forceinline__ uint4 kdsl_ld16(const void* p) {
  uint4 r;
  if constexpr (CS) {
    asm("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  } else {
    r = *reinterpret_cast<const uint4*>(p);
  }
  return r;
}
template <bool CS> __device__ __forceinline__ void kdsl_st16(void* p, uint4 v) {
  if constexpr (CS) {
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
  } else {
    *reinterpret_cast<uint4*>(p) = v;
  }
}

// Vector loads and stores: V consecutive elements, widened to / narrowed from the register
// type. The pointer must be aligned to V * sizeof(element) when V > 1.
template <int V, bool CS = false> __device__ __forceinline__ void kdsl_load(const kdsl_u16* p, float* o, bool is_bf16) {
  if constexpr (V % 8 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 8) {
      uint4 q = kdsl_ld16<CS>(p + i);
      unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        kdsl_u16 lo = static_cast<kdsl_u16>(w[j] & 0xffffu), hi = static_cast<kdsl_u16>(w[j] >> 16);
        o[i + 2 * j] = is_bf16 ? kdsl_bf16_to_f32(lo) : kdsl_f16_to_f32(lo);
        o[i + 2 * j + 1] = is_bf16 ? kdsl_bf16_to_f32(hi) : kdsl_f16_to_f32(hi);
      }
    }
  } else if constexpr (V == 4) {
    uint2 q = *reinterpret_cast<const uint2*>(p);
    unsigned w[2] = {q.x, q.y};
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      kdsl_u16 lo = static_cast<kdsl_u16>(w[j] & 0xffffu), hi = static_cast<kdsl_u16>(w[j] >> 16);
      o[2 * j] = is_bf16 ? kdsl_bf16_to_f32(lo) : kdsl_f16_to_f32(lo);
      o[2 * j + 1] = is_bf16 ? kdsl_bf16_to_f32(hi) : kdsl_f16_to_f32(hi);
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) o[i] = is_bf16 ? kdsl_bf16_to_f32(p[i]) : kdsl_f16_to_f32(p[i]);
  }
}
template <int V, bool CS = false> __device__ __forceinline__ void kdsl_load(const float* p, float* o) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 4) {
      uint4 q = kdsl_ld16<CS>(p + i);
      o[i] = __uint_as_float(q.x); o[i + 1] = __uint_as_float(q.y);
      o[i + 2] = __uint_as_float(q.z); o[i + 3] = __uint_as_float(q.w);
    }
  } else if constexpr (V == 2) {
    float2 q = *reinterpret_cast<const float2*>(p);
    o[0] = q.x; o[1] = q.y;
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) o[i] = p[i];
  }
}
// bool tensors (one byte an element): V bytes in one access of up to 8 bytes (V = 8 of a 16-bit
// row's vector, 4 of an f32 row's), instead of V one-byte loads.
template <int V, bool CS = false> __device__ __forceinline__ void kdsl_load(const kdsl_u8* p, bool* o) {
  if constexpr (V % 8 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 8) {
      uint2 q = *reinterpret_cast<const uint2*>(p + i);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        o[i + j] = ((q.x >> (8 * j)) & 0xffu) != 0;
        o[i + 4 + j] = ((q.y >> (8 * j)) & 0xffu) != 0;
      }
    }
  } else if constexpr (V == 4) {
    unsigned q = *reinterpret_cast<const unsigned*>(p);
#pragma unroll
    for (int j = 0; j < 4; ++j) o[j] = ((q >> (8 * j)) & 0xffu) != 0;
  } else if constexpr (V == 2) {
    unsigned short q = *reinterpret_cast<const unsigned short*>(p);
    o[0] = (q & 0xffu) != 0;
    o[1] = (q >> 8) != 0;
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) o[i] = p[i] != 0;
  }
}
template <int V, bool CS = false> __device__ __forceinline__ void kdsl_store(kdsl_u8* p, const bool* v) {
  if constexpr (V % 8 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 8) {
      unsigned lo = 0, hi = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        lo |= static_cast<unsigned>(v[i + j]) << (8 * j);
        hi |= static_cast<unsigned>(v[i + 4 + j]) << (8 * j);
      }
      *reinterpret_cast<uint2*>(p + i) = make_uint2(lo, hi);
    }
  } else if constexpr (V == 4) {
    unsigned w = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) w |= static_cast<unsigned>(v[j]) << (8 * j);
    *reinterpret_cast<unsigned*>(p) = w;
  } else if constexpr (V == 2) {
    *reinterpret_cast<unsigned short*>(p) =
        static_cast<unsigned short>(static_cast<unsigned>(v[0]) | static_cast<unsigned>(v[1]) << 8);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p[i] = static_cast<kdsl_u8>(v[i]);
  }
}
template <int V, bool CS = false, class T> __device__ __forceinline__ void kdsl_load(const T* p, T* o) {
#pragma unroll
  for (int i = 0; i < V; ++i) o[i] = p[i];
}
template <int V, bool CS = false> __device__ __forceinline__ void kdsl_store(kdsl_u16* p, const float* v, bool is_bf16) {
  if constexpr (V % 8 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 8) {
      unsigned w[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        w[j] = is_bf16 ? kdsl_pack_bf16x2(v[i + 2 * j], v[i + 2 * j + 1])
                       : kdsl_pack_f16x2(v[i + 2 * j], v[i + 2 * j + 1]);
      }
      kdsl_st16<CS>(p + i, make_uint4(w[0], w[1], w[2], w[3]));
    }
  } else if constexpr (V == 4) {
    unsigned w0 = is_bf16 ? kdsl_pack_bf16x2(v[0], v[1]) : kdsl_pack_f16x2(v[0], v[1]);
    unsigned w1 = is_bf16 ? kdsl_pack_bf16x2(v[2], v[3]) : kdsl_pack_f16x2(v[2], v[3]);
    *reinterpret_cast<uint2*>(p) = make_uint2(w0, w1);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p[i] = is_bf16 ? kdsl_f32_to_bf16(v[i]) : kdsl_f32_to_f16(v[i]);
  }
}
template <int V, bool CS = false> __device__ __forceinline__ void kdsl_store(float* p, const float* v) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 4) {
      kdsl_st16<CS>(p + i, make_uint4(__float_as_uint(v[i]), __float_as_uint(v[i + 1]),
                                      __float_as_uint(v[i + 2]), __float_as_uint(v[i + 3])));
    }
  } else if constexpr (V == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p[i] = v[i];
  }
}
template <int V, bool CS = false, class T> __device__ __forceinline__ void kdsl_store(T* p, const T* v) {
#pragma unroll
  for (int i = 0; i < V; ++i) p[i] = v[i];
}

// Packed 16-bit values: V elements loaded raw into V / 2 32-bit words (register-resident rows
// take half the registers), and one element unpacked to f32.
template <int V, bool CS = false> __device__ __forceinline__ void kdsl_load_raw(const kdsl_u16* p, unsigned* w) {
  if constexpr (V % 8 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 8) {
      uint4 q = kdsl_ld16<CS>(p + i);
      w[i / 2] = q.x; w[i / 2 + 1] = q.y; w[i / 2 + 2] = q.z; w[i / 2 + 3] = q.w;
    }
  } else if constexpr (V == 4) {
    uint2 q = *reinterpret_cast<const uint2*>(p);
    w[0] = q.x; w[1] = q.y;
  } else {
    w[0] = *reinterpret_cast<const unsigned*>(p);
  }
}
__device__ __forceinline__ float kdsl_unpack_bf16(unsigned w, int hi) {
  return __uint_as_float(hi ? (w & 0xffff0000u) : (w << 16));
}
__device__ __forceinline__ float kdsl_unpack_f16(unsigned w, int hi) {
  return kdsl_f16_to_f32(static_cast<kdsl_u16>(hi ? (w >> 16) : (w & 0xffffu)));
}

// Reduction states and their combine operators. Combines are applied in a fixed order, so every
// reduction gives the same bits on every run.
template <class T> struct kdsl_welford { T n, mean, m2; };
template <class T> struct kdsl_arg { T v; long long i; };
// An online sum of exponentials (Milakov & Gimelshein, 2018): the running maximum m of the values
// seen and s = sum(exp(x - m)); s = 0 (with m = -inf) before any value above -inf.
template <class T> struct kdsl_sumexp { T m, s; };
struct kdsl_op_sum {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct kdsl_op_max {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return kdsl_max(a, b); }
};
struct kdsl_op_min {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return kdsl_min(a, b); }
};
// Chan, Golub & LeVeque (1979): merging (count, mean, M2) of two disjoint parts.
struct kdsl_op_var {
  template <class T>
  __device__ __forceinline__ kdsl_welford<T> operator()(kdsl_welford<T> a, kdsl_welford<T> b) const {
    T n = a.n + b.n;
    if (b.n == 0) return a;
    if (a.n == 0) return b;
    T d = b.mean - a.mean;
    T f = b.n / n;
    return {n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
  }
};
// Merging two online sums onto the larger maximum; E is the kernel's exp. Not commutative in bits
// (an FMA may fuse either product), so kdsl_warp_reduce orders its operands.
template <class E> struct kdsl_op_sumexp {
  template <class T> __device__ __forceinline__ kdsl_sumexp<T> operator()(kdsl_sumexp<T> a, kdsl_sumexp<T> b) const {
    if (a.s == T(0)) return b;
    if (b.s == T(0)) return a;
    const T m = a.m > b.m ? a.m : b.m;
    return {m, a.s * E()(a.m - m) + b.s * E()(b.m - m)};
  }
};
// argmax/argmin: the first index of the extreme value; NaN is the maximum (and the minimum).
struct kdsl_op_argmax {
  template <class T> __device__ __forceinline__ kdsl_arg<T> operator()(kdsl_arg<T> a, kdsl_arg<T> b) const {
    bool an = a.v != a.v, bn = b.v != b.v;
    bool take_b = (bn && !an) || (!an && !bn && b.v > a.v) || ((an == bn) && (an || b.v == a.v) && b.i < a.i);
    return take_b ? b : a;
  }
};
struct kdsl_op_argmin {
  template <class T> __device__ __forceinline__ kdsl_arg<T> operator()(kdsl_arg<T> a, kdsl_arg<T> b) const {
    bool an = a.v != a.v, bn = b.v != b.v;
    bool take_b = (bn && !an) || (!an && !bn && b.v < a.v) || ((an == bn) && (an || b.v == a.v) && b.i < a.i);
    return take_b ? b : a;
  }
};
// Welford state of the n values one thread holds, from their sums shifted by the thread's first
// value k: s = sum(x - k), q = sum((x - k)^2) ("shifted data", Chan, Golub & LeVeque 1983).
// Then mean = k + s / n and M2 = q - s^2 / n. Since k is one of the values, (k - mean)^2 is at
// most M2 (n - 1) / n, so the subtraction loses at most a factor n - 1 in relative accuracy (n is
// a thread's share of a row, e.g. 64), unlike sum(x^2) - sum(x)^2 / n over the raw values. Three
// operations per value instead of Welford's division per merge.
template <class T> __device__ __forceinline__ kdsl_welford<T> kdsl_welford_shifted(T k, T s, T q, int n) {
  if (n == 0) return {T(0), T(0), T(0)};
  const T inv = T(1) / T(n);
  // s * (s / n), not s * s / n: s * s overflows f32 once |s| > 1.8e19, while q may not.
  const T m2 = q - s * (s * inv);
  // Rounding can leave m2 slightly below zero; clamp that, but keep a NaN (an infinite value
  // gives s = q = inf, and inf - inf = NaN, as the two-pass variance would).
  return {T(n), k + s * inv, m2 < T(0) ? T(0) : m2};
}

__device__ __forceinline__ float kdsl_shfl(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ double kdsl_shfl(double v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ int kdsl_shfl(int v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ long long kdsl_shfl(long long v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ kdsl_c64 kdsl_shfl(kdsl_c64 v, int o) { return {kdsl_shfl(v.re, o), kdsl_shfl(v.im, o)}; }
template <class T> __device__ __forceinline__ kdsl_welford<T> kdsl_shfl(kdsl_welford<T> v, int o) {
  return {kdsl_shfl(v.n, o), kdsl_shfl(v.mean, o), kdsl_shfl(v.m2, o)};
}
template <class T> __device__ __forceinline__ kdsl_sumexp<T> kdsl_shfl(kdsl_sumexp<T> v, int o) {
  return {kdsl_shfl(v.m, o), kdsl_shfl(v.s, o)};
}
template <class T> __device__ __forceinline__ kdsl_arg<T> kdsl_shfl(kdsl_arg<T> v, int o) {
  return {kdsl_shfl(v.v, o), kdsl_shfl(v.i, o)};
}
// Combines whose two operand orders give the same result: IEEE addition commutes (only a NaN
// result's payload bits could depend on the order; it is a NaN either way). This holds while the
// operands are values, not products the compiler could fuse into an FMA on one lane only: the
// callers pass accumulators (sums started at +0) and values loaded from memory.
template <class Op, class T> struct kdsl_commutes { static constexpr bool value = false; };
template <> struct kdsl_commutes<kdsl_op_sum, float> { static constexpr bool value = true; };
template <> struct kdsl_commutes<kdsl_op_sum, double> { static constexpr bool value = true; };
// Butterfly reduction over aligned groups of W lanes (W a power of two, at most 32). Each step
// combines (lower lane, higher lane) in that order, so every lane ends with identical bits.
template <int W, class T, class Op> __device__ __forceinline__ T kdsl_warp_reduce(T v, Op op) {
  static_assert(W >= 1 && W <= 32 && (W & (W - 1)) == 0, "W: a power of two, at most 32");
  const int lane = static_cast<int>(threadIdx.x & 31u);
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) {
    T other = kdsl_shfl(v, o);
    if constexpr (kdsl_commutes<Op, T>::value) {  // no operand selects: one shuffle and one add
      v = op(v, other);
      continue;
    }
    const bool upper = (lane & o) != 0;
    // One combine on selected operands: the compiler does not see that two orders of a Welford
    // merge or a NaN-aware max are alike, and would evaluate both.
    v = op(upper ? other : v, upper ? v : other);
  }
  return v;
}
// ---- end of prelude ----
)KDSL";
}

const char* cuda_approx_math_prelude() {
  return R"KDSL(// ---- kdsl approximate f32 math ----
// Emitted where every floating-point generic of the kernel is bound to a 16-bit dtype
// (kdsl::cuda::approx_math; dsl/SPEC.md section 14.2), or with KDSL_MATH=approx: the PTX
// approximations ex2.approx, rcp.approx, sqrt.approx and div.full (full range, at most 2 ulp).
// Their relative errors are a few f32 ulp (exp of x: the rounding of x * log2(e), at most 2^-17
// when |x| is near 88), far below the rounding error of the data (2^-8 relative for bf16, 2^-11
// for f16). Subnormal results are kept: the .ftz forms run where a flushed subnormal cannot show
// (kdsl_exp_approx_ftz) or on operands scaled to stay normal (kdsl_exp_approx,
// kdsl_sigmoid_approx); kdsl_expm1_approx is a polynomial near 0.
__device__ __forceinline__ float kdsl_ex2_approx(float x) {
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
// e^x as the square of 2^(x log2(e) / 2), from ex2.approx.ftz: the half power is normal for
// every e^x >= 2^-252, so the square rounds a subnormal e^x, and overflows to infinity, where
// e^x does, as the unflushed ex2.approx would; three instructions where ex2.approx.f32 takes
// five (sm_90: ptxas rescales around it). The argument's rounding is that of x * log2(e) (the
// constant is half of log2(e)'s f32 value, exactly); the square doubles ex2.approx's own
// relative error, about 2^-22.
__device__ __forceinline__ float kdsl_exp_approx(float x) {
  float h;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(h) : "f"(x * 0x1.715476p-1f));
  return h * h;
}
// e^x flushing a subnormal result to zero (ex2.approx.ftz of x * log2(e): one instruction). Only
// where that cannot show: e^x enters 1 + e^x
// (sigmoid, silu) or e^x - 1 with |x| >= 1/2 (expm1), which round to 1 and -1 alike for every
// |e^x| < 2^-25.
__device__ __forceinline__ float kdsl_exp_approx_ftz(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * 1.44269504088896341f));
  return r;
}
// sigmoid(x) = 1 / (1 + e^-x) with rcp.approx.ftz: the denominator d >= 1 is divided by 4 in
// the fma (exactly: one rounding of (1 + e^-x) / 4), so 4 / d > 2^-126 stays normal for every
// finite d, and the product by 1/4 rounds a subnormal sigmoid as rcp.approx.f32 would (the
// same bits: ptxas's rescaling around an unflushed rcp is this one). Three instructions where
// 1.f + e and rcp.approx.f32 take six.
__device__ __forceinline__ float kdsl_sigmoid_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(fmaf(kdsl_exp_approx_ftz(-x), 0.25f, 0.25f)));
  return 0.25f * r;
}
__device__ __forceinline__ float kdsl_div_approx(float a, float b) {
  float r;
  asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float kdsl_sqrt_approx(float x) {
  float r;
  asm("sqrt.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
// expm1(x) = e^x - 1: for |x| < 1/2 the Taylor polynomial of degree 8, x (1 + x q(x)) (truncation
// below 1.4e-8 relative, and -0 stays -0); else e^x - 1 from ex2.approx, whose relative error the
// subtraction multiplies by at most e^0.5 / (e^0.5 - 1) = 2.54. NaN and infinities as in expm1f.
// About 15 instructions where CUDA's expm1f takes about 28 (sm_90 SASS of rg_lru_bwd).
__device__ __forceinline__ float kdsl_expm1_approx(float x) {
  float q = fmaf(x, 2.48015873e-5f, 1.98412698e-4f);  // 1/8!, 1/7!
  q = fmaf(q, x, 1.38888889e-3f);                      // 1/6!
  q = fmaf(q, x, 8.33333333e-3f);                      // 1/5!
  q = fmaf(q, x, 4.16666667e-2f);                      // 1/4!
  q = fmaf(q, x, 1.66666667e-1f);                      // 1/3!
  q = fmaf(q, x, 0.5f);                                // 1/2!
  const float e = kdsl_exp_approx_ftz(x) - 1.f;
  return fabsf(x) < 0.5f ? x * fmaf(x, q, 1.f) : e;
}
// ---- end of approximate math ----
)KDSL";
}

const char* cuda_async_copy_prelude() {
  return R"KDSL(// ---- kdsl asynchronous copies (cp.async, sm_80+) ----
// Asynchronous copy of B bytes (4, 8 or 16) from global to shared memory (sm_80+), bypassing the
// registers; when ok is false the source is ignored (nothing is read, so g may lie outside any
// allocation) and the B bytes are zero-filled. Completed by kdsl_cp_wait or kdsl_cp_wait_group
// (this thread's copies only).
template <int B> __device__ __forceinline__ void kdsl_cp_async(void* smem, const void* g, bool ok) {
  static_assert(B == 4 || B == 8 || B == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = ok ? B : 0;
  if constexpr (B == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(s), "l"(g), "r"(n) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" :: "r"(s), "l"(g), "n"(B), "r"(n) : "memory");
  }
}
__device__ __forceinline__ void kdsl_cp_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }
// Closes this thread's group of copies issued since the last commit.
__device__ __forceinline__ void kdsl_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N> __device__ __forceinline__ void kdsl_cp_wait_group() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
)KDSL";
}

}  // namespace kdsl

// A CPU emulation of the CUDA subset kdsl's generated kernels use, for testing codegen without a
// GPU: the generated source (its PTX inline assembly replaced, see emulated_source) is compiled
// by the host C++ compiler into a shared library, and every CUDA thread of the CTAs running at
// once is a fiber (its own stack and registers) on the launching host thread.
// - A fiber runs alone until it waits: at __syncthreads, a named barrier, a warp shuffle (a
//   barrier of the warp's 32 lanes), a cluster barrier, and at every acquire or packed look-back
//   load, so that a tile spinning on another tile's flag lets that tile run.
// - The fibers are resumed in rounds, each from a random fiber up or down, so CTAs running at once
//   interleave and a missing barrier shows whenever the thread that reads runs before the one
//   that writes. Random delays before a tile publishes its prefix make other tiles' look-backs
//   often find only its aggregate (a scan's decoupled look-back is exercised). The order and the
//   delays come from a seed per launch (process_seed: KDSL_EMU_SEED replays a failed test).
// - Fibers, not one std::thread per CUDA thread: ScanEmu.ScheduleVariants took 402 s with
//   threads (most of it in the kernel: futex waits, page faults of fresh stacks and shared
//   memory), 44 s with fibers, reused stacks and shared memory and precompiled headers.
// - Its kernels are compiled without any sanitizer, so the sanitized CI run leaves these tests
//   out (ctest label `emu`).
#pragma once

#include <dlfcn.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "src/codegen_scan.h"
#include "src/cuda_prelude.h"

namespace kdsl::emu {

/// The standard headers of the emulation, precompiled once (see Library): parsing them took
/// two thirds of each kernel's compile.
inline const char* kHostHeaders = R"EMU(
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>
#include <ucontext.h>
)EMU";

/// The host compiler's command, less its input and output; the precompiled header is built
/// with the same options, or the compiler would ignore it. No control-flow protection: a fiber's
/// first switch returns into a function no call entered (see kdsl_emu_make).
inline const char* kHostCompile = "g++ -std=c++20 -O1 -w -fPIC -pthread -fcf-protection=none";

/// The name of the file holding kHostHeaders, with a hash of them, of the options and of the
/// compiler's version and target (a precompiled header of another compiler would be ignored).
inline std::string host_header_name() {
  static const std::string name = [] {
    std::string version;
    if (FILE* f = popen("g++ -dumpfullversion -dumpmachine 2>/dev/null", "r")) {
      char buf[256];
      while (fgets(buf, sizeof buf, f)) version += buf;
      pclose(f);
    }
    return fmt::format(
        "kdsl_emu_host_{:016x}.h",
        std::hash<std::string>{}(std::string(kHostHeaders) + kHostCompile + version));
  }();
  return name;
}

/// The host definitions of CUDA's built-ins, placed (after the headers) before the generated
/// source.
inline const char* kHostCuda = R"EMU(
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#define __restrict__ __restrict
struct kdsl_dim3 { unsigned x = 0, y = 1, z = 1; };
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
struct float4 { float x, y, z, w; };
struct float2 { float x, y; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float2 make_float2(float a, float b) { return {a, b}; }
// The fibers of one launch's wave: kdsl_emu_yield returns to the launcher's loop, which resumes
// the next unfinished fiber. On x86-64 a switch saves the callee-saved registers on the stack
// and swaps stack pointers (swapcontext also saves the signal mask, a system call per switch,
// which took half the time); elsewhere it is swapcontext.
#if defined(__x86_64__)
struct KdslEmuContext { void* sp = nullptr; };
extern "C" void kdsl_emu_switch(void** save, void* to);
asm(R"(
  .pushsection .text
  .p2align 4
  .type kdsl_emu_switch, @function
kdsl_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size kdsl_emu_switch, .-kdsl_emu_switch
  .popsection
)");
inline void kdsl_emu_swap(KdslEmuContext* from, KdslEmuContext* to) { kdsl_emu_switch(&from->sp, to->sp); }
// A fiber's first switch pops six zero registers and returns into start, with the stack aligned
// as after a call.
inline void kdsl_emu_make(KdslEmuContext* c, unsigned char* stack, size_t size, void (*start)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + size) & ~uintptr_t{15};
  auto* sp = reinterpret_cast<void**>(top - 64);
  for (int i = 0; i < 8; ++i) sp[i] = nullptr;
  sp[6] = reinterpret_cast<void*>(start);
  c->sp = sp;
}
#else
struct KdslEmuContext { ucontext_t uc; };
inline void kdsl_emu_swap(KdslEmuContext* from, KdslEmuContext* to) { swapcontext(&from->uc, &to->uc); }
inline void kdsl_emu_make(KdslEmuContext* c, unsigned char* stack, size_t size, void (*start)()) {
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = stack;
  c->uc.uc_stack.ss_size = size;
  c->uc.uc_link = nullptr;
  makecontext(&c->uc, start, 0);
}
#endif
inline thread_local KdslEmuContext kdsl_emu_main;
inline thread_local KdslEmuContext* kdsl_emu_self = nullptr;
inline thread_local unsigned long long kdsl_emu_progress = 0;  // barriers passed, fibers done
inline thread_local unsigned long long kdsl_emu_spins = 0;     // yields outside a barrier
inline void kdsl_emu_yield() { kdsl_emu_swap(kdsl_emu_self, &kdsl_emu_main); }
inline void kdsl_emu_spin() {
  ++kdsl_emu_spins;
  kdsl_emu_yield();
}
// A barrier of n fibers: the last to arrive opens it, the others yield until it is open.
struct KdslEmuBarrier {
  explicit KdslEmuBarrier(unsigned n) : n(n) {}
  void arrive_and_wait() {
    const unsigned long long g = generation;
    if (++arrived == n) {
      arrived = 0;
      ++generation;
      ++kdsl_emu_progress;
      return;
    }
    while (generation == g) kdsl_emu_yield();
  }
  unsigned n, arrived = 0;
  unsigned long long generation = 0;
};
struct KdslEmuCta;
// A thread-block cluster: its CTAs run at once; barrier.cluster is a barrier over all their
// threads, and mapa maps an address in one CTA's shared memory to the same place in another's.
struct KdslEmuCluster {
  explicit KdslEmuCluster(unsigned threads) : all(threads) {}
  KdslEmuBarrier all;
  std::vector<KdslEmuCta*> ctas;
};
// A CTA's shared memory (kdsl::emu::LaunchMemory): 256 KiB for __shared__ declarations, then
// 256 KiB of dynamic shared memory.
constexpr size_t kKdslEmuSmemWords = 32 * 1024, kKdslEmuDynamicWords = 32 * 1024;
struct KdslEmuCta {
  KdslEmuCta(unsigned threads, unsigned long long* memory)
      : all(threads), smem(memory), dynamic_smem(smem + kKdslEmuSmemWords) {
    for (unsigned w = 0; w < (threads + 31) / 32; ++w) warps.push_back(std::make_unique<KdslEmuBarrier>(32));
    buf.resize((threads + 31) / 32);
  }
  KdslEmuBarrier all;
  std::vector<std::unique_ptr<KdslEmuBarrier>> warps;
  std::vector<std::array<unsigned long long, 32>> buf;
  std::unique_ptr<KdslEmuBarrier> named;
  unsigned long long *smem, *dynamic_smem;
  std::map<int, size_t> smem_at;  // declaration -> byte offset in smem
  size_t smem_used = 0;
  std::atomic<int> vote_fail{0};
  KdslEmuCluster* cluster = nullptr;
};
inline thread_local kdsl_dim3 threadIdx, blockIdx;
inline kdsl_dim3 gridDim, blockDim;
inline thread_local KdslEmuCta* kdsl_emu_cta = nullptr;
// The I-th __shared__ declaration of the source: placed after the earlier ones the first time a
// thread of the CTA reaches it, at the same place for every other thread.
template <class T, int I> T* kdsl_emu_smem() {
  KdslEmuCta* c = kdsl_emu_cta;
  auto it = c->smem_at.find(I);
  if (it == c->smem_at.end()) {
    it = c->smem_at.emplace(I, c->smem_used).first;
    c->smem_used += (sizeof(T) + 15) / 16 * 16;
    if (c->smem_used > kKdslEmuSmemWords * sizeof(c->smem[0])) { std::fprintf(stderr, "emu: shared memory overflow\n"); std::abort(); }
  }
  return reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(c->smem) + it->second);
}
inline unsigned char* kdsl_emu_dynamic_smem() {
  return reinterpret_cast<unsigned char*>(kdsl_emu_cta->dynamic_smem);
}
inline void __syncthreads() { kdsl_emu_cta->all.arrive_and_wait(); }
inline int __syncthreads_and(int pred) {
  KdslEmuCta* c = kdsl_emu_cta;
  if (!pred) c->vote_fail.fetch_add(1);
  c->all.arrive_and_wait();
  int r = c->vote_fail.load() == 0;
  c->all.arrive_and_wait();
  if (threadIdx.x == 0) c->vote_fail.store(0);
  c->all.arrive_and_wait();
  return r;
}
inline void kdsl_emu_named_bar(int n) {
  if (!kdsl_emu_cta->named) kdsl_emu_cta->named = std::make_unique<KdslEmuBarrier>(n);
  kdsl_emu_cta->named->arrive_and_wait();
}
inline void kdsl_emu_cluster_sync() { kdsl_emu_cta->cluster->all.arrive_and_wait(); }
inline unsigned long long kdsl_emu_mapa(const void* p, int rank) {
  const KdslEmuCta* me = kdsl_emu_cta;
  const KdslEmuCta* to = me->cluster->ctas.at(static_cast<size_t>(rank));
  const auto off = static_cast<const unsigned char*>(p) -
                   reinterpret_cast<const unsigned char*>(me->smem);
  if (off < 0 || static_cast<size_t>(off) >= (kKdslEmuSmemWords + kKdslEmuDynamicWords) * sizeof(me->smem[0])) {
    std::fprintf(stderr, "emu: mapa of an address outside the CTA's shared memory\n");
    std::abort();
  }
  return reinterpret_cast<unsigned long long>(reinterpret_cast<const unsigned char*>(to->smem) + off);
}
// An mbarrier (the 8 bytes of its shared variable): the transaction count (may go below zero
// while stores arrive before their count is expected), the arrivals still pending in the phase
// and expected per phase, and the phase's parity. The fibers of a launch share one host thread,
// so no atomics.
struct KdslEmuMbar {
  int tx;
  unsigned pending : 15, count : 15, phase : 1;
};
static_assert(sizeof(KdslEmuMbar) == 8, "an mbarrier is 8 bytes");
inline void kdsl_emu_mbar_step(KdslEmuMbar* m) {
  if (m->pending == 0 && m->tx == 0) {
    m->phase ^= 1u;
    m->pending = m->count;
    ++kdsl_emu_progress;
  }
}
inline void kdsl_emu_mbar_init(unsigned long long* bar, unsigned count) {
  auto* m = reinterpret_cast<KdslEmuMbar*>(bar);
  m->tx = 0;
  m->pending = count;
  m->count = count;
  m->phase = 0;
}
inline void kdsl_emu_mbar_expect(unsigned long long* bar, unsigned bytes) {
  auto* m = reinterpret_cast<KdslEmuMbar*>(bar);
  if (m->pending == 0) { std::fprintf(stderr, "emu: mbarrier arrival with none pending\n"); std::abort(); }
  m->tx += static_cast<int>(bytes);
  m->pending -= 1;
  kdsl_emu_mbar_step(m);
}
// st.async of 4 bytes into CTA `rank`'s copy of `slot`, counted on its copy of `bar`.
inline void kdsl_emu_push_async(float* slot, float v, unsigned long long* bar, int rank) {
  *reinterpret_cast<float*>(kdsl_emu_mapa(slot, rank)) = v;
  auto* m = reinterpret_cast<KdslEmuMbar*>(kdsl_emu_mapa(bar, rank));
  m->tx -= 4;
  kdsl_emu_mbar_step(m);
}
// st.async of n 4-byte words (a vector of 1, 2 or 4) into CTA `rank`'s copy of `slot`, counted
// on its copy of `bar` (the packed pushes of RowSchedule::push).
inline void kdsl_emu_push_words(unsigned* slot, const unsigned* w, int n, unsigned long long* bar, int rank) {
  auto* to = reinterpret_cast<unsigned*>(kdsl_emu_mapa(slot, rank));
  for (int i = 0; i < n; ++i) to[i] = w[i];
  auto* m = reinterpret_cast<KdslEmuMbar*>(kdsl_emu_mapa(bar, rank));
  m->tx -= 4 * n;
  kdsl_emu_mbar_step(m);
}
// try_wait.parity: whether the phase of that parity has completed (yielding when it has not).
inline unsigned kdsl_emu_mbar_try_wait(unsigned long long* bar, unsigned parity) {
  if (reinterpret_cast<KdslEmuMbar*>(bar)->phase != parity) return 1;
  kdsl_emu_spin();
  return 0;
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __nanosleep(unsigned) { kdsl_emu_spin(); }
// A barrier of the thread's warp (all 32 lanes, as the shuffles).
inline void __syncwarp(unsigned = 0xffffffffu) { kdsl_emu_cta->warps[threadIdx.x >> 5]->arrive_and_wait(); }
template <class T> T kdsl_emu_shfl(T v, unsigned src) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  auto& buf = kdsl_emu_cta->buf[warp];
  std::memcpy(&buf[lane], &v, sizeof(T));
  kdsl_emu_cta->warps[warp]->arrive_and_wait();
  T r;
  std::memcpy(&r, &buf[src & 31u], sizeof(T));
  kdsl_emu_cta->warps[warp]->arrive_and_wait();
  return r;
}
template <class T> T __shfl_up_sync(unsigned, T v, int d) {
  unsigned lane = threadIdx.x & 31u;
  return kdsl_emu_shfl(v, lane >= static_cast<unsigned>(d) ? lane - d : lane);
}
template <class T> T __shfl_sync(unsigned, T v, int s) { return kdsl_emu_shfl(v, static_cast<unsigned>(s)); }
template <class T> T __shfl_xor_sync(unsigned, T v, int m) { return kdsl_emu_shfl(v, (threadIdx.x & 31u) ^ m); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline unsigned __ldcg(const unsigned* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
// A GPU faults on a misaligned vector access; the host would not: every 16-byte access (and a
// copy's shared-memory slot, and its source when it reads one) is checked here.
inline void kdsl_emu_check_aligned(const void* p, unsigned bytes) {
  if (reinterpret_cast<std::uintptr_t>(p) % bytes != 0) {
    std::fprintf(stderr, "emu: misaligned %u-byte access at %p\n", bytes, p);
    std::abort();
  }
}
inline uint4 kdsl_emu_ld16(const void* p) {
  kdsl_emu_check_aligned(p, 16);
  return *reinterpret_cast<const uint4*>(p);
}
inline void kdsl_emu_st16(void* p, uint4 v) {
  kdsl_emu_check_aligned(p, 16);
  *reinterpret_cast<uint4*>(p) = v;
}
inline void kdsl_emu_cp_async(void* smem, const void* g, int bytes, int n) {
  kdsl_emu_check_aligned(smem, static_cast<unsigned>(bytes));
  if (n > 0) kdsl_emu_check_aligned(g, static_cast<unsigned>(bytes));
  std::memset(smem, 0, static_cast<size_t>(bytes));
  if (n > 0) std::memcpy(smem, g, static_cast<size_t>(n));
}
inline unsigned kdsl_emu_ld_acquire(const unsigned* p) {
  kdsl_emu_spin();
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
// The fiber order and the delays come from this generator, seeded by each launch (the test
// process's seed, see kdsl::emu::launch_seed), so that a failing order can be replayed.
inline thread_local std::minstd_rand kdsl_emu_rng;
// Random delays before a tile's inclusive prefix is published (every other fiber runs on 1 to 64
// times), so that other tiles' look-backs often find only its aggregate.
inline void kdsl_emu_jitter() {
  for (unsigned i = 1 + kdsl_emu_rng() % 64; i > 0; --i) kdsl_emu_spin();
}
inline void kdsl_emu_st_release(unsigned* p, unsigned v) {
  if (v == 2u) kdsl_emu_jitter();
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
// Packed look-back words: 16-byte accesses that are single transactions on the GPU; here no
// other fiber runs during one.
inline void kdsl_emu_pk_st(uint4* p, uint4 v) {
  if (v.w == 2u) kdsl_emu_jitter();
  *p = v;
}
inline uint4 kdsl_emu_pk_ld(const uint4* p) {
  kdsl_emu_spin();
  return *p;
}
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline unsigned short kdsl_emu_f32_to_bf16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((u >> 16) | 0x40u);
  return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline unsigned short kdsl_emu_f32_to_f16(float f) {
  _Float16 h = static_cast<_Float16>(f);
  unsigned short r;
  std::memcpy(&r, &h, 2);
  return r;
}
inline float kdsl_emu_f16_to_f32(unsigned short b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}
using std::min;
using std::max;
)EMU";

/// The launcher, compiled into the library with the kernel.
inline const char* kLauncher = R"EMU(
// The stacks (`stack_bytes` each, from `stacks`) and the CTAs' shared memory (`smem[i]` for the
// i-th CTA of a batch) come from the test process, enough for one batch.
extern "C" void kdsl_emu_launch(void (*entry)(const void*), const void* params, unsigned grid,
                                unsigned block, unsigned concurrent, unsigned cluster,
                                unsigned char* stacks, size_t kStack,
                                unsigned long long* const* smem, unsigned long long seed) {
  kdsl_emu_rng.seed(static_cast<std::uint_fast32_t>(seed % 2147483646u + 1u));
  gridDim.x = grid;
  blockDim.x = block;
  // A cluster's CTAs run in the same batch.
  concurrent = (concurrent + cluster - 1) / cluster * cluster;
  struct Fiber {
    KdslEmuContext ctx;
    unsigned t, b;
    KdslEmuCta* cta;
    bool done;
  };
  static thread_local void (*run_entry)(const void*);
  static thread_local const void* run_params;
  static thread_local Fiber* running;
  run_entry = entry;
  run_params = params;
  for (unsigned b0 = 0; b0 < grid; b0 += concurrent) {
    std::vector<std::unique_ptr<KdslEmuCta>> ctas;
    std::vector<std::unique_ptr<KdslEmuCluster>> clusters;
    std::vector<Fiber> fibers;
    for (unsigned b = b0; b < grid && b < b0 + concurrent; ++b) {
      ctas.push_back(std::make_unique<KdslEmuCta>(block, smem[b - b0]));
      KdslEmuCta* cta = ctas.back().get();
      if (cluster > 1) {
        if (b % cluster == 0) clusters.push_back(std::make_unique<KdslEmuCluster>(block * cluster));
        cta->cluster = clusters.back().get();
        cta->cluster->ctas.push_back(cta);
      }
      for (unsigned t = 0; t < block; ++t) fibers.push_back(Fiber{{}, t, b, cta, false});
    }
    // A canary word at the bottom of each stack, checked when its fiber ends: an overflow that
    // runs over it is reported (one that jumps over it is not).
    constexpr unsigned long long kCanary = 0x6b64736c43414e59ull;
    for (size_t i = 0; i < fibers.size(); ++i) {
      unsigned char* base = stacks + i * kStack;
      std::memcpy(base, &kCanary, sizeof(kCanary));
      // A fiber never returns from start: once done it switches back for good.
      kdsl_emu_make(&fibers[i].ctx, base + sizeof(kCanary), kStack - sizeof(kCanary), +[] {
        run_entry(run_params);
        running->done = true;
        ++kdsl_emu_progress;
        kdsl_emu_yield();
      });
    }
    // Resume the unfinished fibers in turn, each round from a random fiber up or down, so that
    // between two barriers a thread may run before or after any other (a missing barrier shows
    // whichever thread writes and whichever reads). A round in which no barrier opened, no fiber
    // finished and none spun (waited on a flag) is a deadlock: every fiber waits at a barrier
    // (e.g. one some threads never reach). Rounds of spinning alone, many over, are one too.
    std::minstd_rand& order = kdsl_emu_rng;
    const size_t n = fibers.size();
    size_t live = n;
    unsigned long long idle_rounds = 0;
    while (live > 0) {
      const unsigned long long before = kdsl_emu_progress, spins = kdsl_emu_spins;
      const size_t start = order() % n;
      const bool down = order() & 1u;
      for (size_t k = 0; k < n; ++k) {
        Fiber& f = fibers[down ? (start + n - k) % n : (start + k) % n];
        if (f.done) continue;
        running = &f;
        threadIdx.x = f.t;
        blockIdx.x = f.b;
        kdsl_emu_cta = f.cta;
        kdsl_emu_self = &f.ctx;
        kdsl_emu_swap(&kdsl_emu_main, &f.ctx);
        if (!f.done) continue;
        --live;
        if (std::memcmp(stacks + static_cast<size_t>(&f - fibers.data()) * kStack, &kCanary, sizeof(kCanary)) != 0) {
          std::fprintf(stderr, "emu: a fiber overflowed its stack\n");
          std::abort();
        }
      }
      idle_rounds = kdsl_emu_progress == before ? idle_rounds + 1 : 0;
      if ((idle_rounds > 0 && kdsl_emu_spins == spins) || idle_rounds > 100000) { std::fprintf(stderr, "emu: deadlock (no fiber can go on)\n"); std::abort(); }
    }
  }
}
)EMU";

inline void replace_once(std::string& s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  if (at == std::string::npos) throw std::runtime_error("cuda_emu: cannot find '" + from + "'");
  s.replace(at, from.size(), to);
}

inline void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

/// The generated source made host C++: PTX inline assembly replaced by the emulation's
/// functions, __shared__ variables placed in the CTA's buffer, and extern "C" entry points
/// kdsl_emu_entry_<i> calling the kernels `symbols[i]` with a pointer to the parameter block.
inline std::string emulated_source(std::string src, const std::vector<std::string>& symbols) {
  replace_all(src, R"(asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));)",
              "r = kdsl_emu_f32_to_bf16(f);");
  replace_all(src, R"(asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));)",
              "f = kdsl_emu_f16_to_f32(h);");
  replace_all(src, R"(asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));)",
              "r = kdsl_emu_f32_to_f16(f);");
  replace_all(src, R"(asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));)",
              "r = kdsl_emu_f32_to_bf16(lo) | (unsigned(kdsl_emu_f32_to_bf16(hi)) << 16);");
  replace_all(src, R"(asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));)",
              "r = kdsl_emu_f32_to_f16(lo) | (unsigned(kdsl_emu_f32_to_f16(hi)) << 16);");
  replace_all(
      src, R"(asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");)",
      "v = kdsl_emu_ld_acquire(p);");
  replace_all(
      src, R"(asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");)",
      "kdsl_emu_st_release(p, v);");
  replace_all(src, R"(asm volatile("bar.sync 1, %0;" :: "r"(n) : "memory");)",
              "kdsl_emu_named_bar(n);");
  // Streaming (evict-first) 16-byte accesses are plain accesses on the host.
  replace_all(src,
              R"(asm("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), )"
              R"("=r"(r.z), "=r"(r.w) : "l"(p));)",
              "r = *reinterpret_cast<const uint4*>(p);");
  replace_all(src,
              R"(asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(v.x), )"
              R"("r"(v.y), "r"(v.z), "r"(v.w) : "memory");)",
              "*reinterpret_cast<uint4*>(p) = v;");
  replace_all(src,
              R"(asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), )"
              R"("r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");)",
              "kdsl_emu_pk_st(p, v);");
  replace_all(src,
              R"(asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), )"
              R"("=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");)",
              "v = kdsl_emu_pk_ld(p);");
  // 16-byte accesses (the streaming ones replaced above too): checked for alignment.
  replace_all(src, "r = *reinterpret_cast<const uint4*>(p);", "r = kdsl_emu_ld16(p);");
  replace_all(src, "*reinterpret_cast<uint4*>(p) = v;", "kdsl_emu_st16(p, v);");
  // Asynchronous global-to-shared copies: done at once (zero-filled when not ok); waiting is a
  // no-op.
  replace_all(src, "const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));", "");
  replace_all(src,
              R"(asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(s), "l"(g), )"
              R"("r"(n) : "memory");)",
              "kdsl_emu_cp_async(smem, g, 16, n);");
  replace_all(src,
              R"(asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" :: "r"(s), "l"(g), )"
              R"("n"(B), "r"(n) : "memory");)",
              "kdsl_emu_cp_async(smem, g, B, n);");
  replace_all(src, R"(asm volatile("cp.async.wait_all;" ::: "memory");)", "");
  replace_all(src, R"(asm volatile("cp.async.commit_group;" ::: "memory");)", "");
  replace_all(src, R"(asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");)", "");
  // Thread-block clusters (the row schedule's rows.cluster).
  replace_all(src,
              R"(asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.)"
              R"(acquire.aligned;" ::: "memory");)",
              "kdsl_emu_cluster_sync();");
  // mbarriers and st.async (the pushed partials of a cluster row).
  replace_all(src, "const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(slot));", "");
  replace_all(src, "const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));", "");
  replace_all(src,
              R"(asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n\tfence.mbarrier_init.)"
              R"(release.cluster;" :: "r"(b), "r"(count) : "memory");)",
              "kdsl_emu_mbar_init(bar, count);");
  replace_all(src,
              R"(asm volatile("{\n\t.reg .b32 ra, rb;\n\tmapa.shared::cluster.u32 ra, %0, %2;\n\t)"
              R"(mapa.shared::cluster.u32 rb, %1, %2;\n\tst.async.shared::cluster.mbarrier::)"
              R"(complete_tx::bytes.b32 [ra], %3, [rb];\n\t}" :: "r"(a), "r"(b), "r"(rank), )"
              R"("r"(__float_as_uint(v)) : "memory");)",
              "kdsl_emu_push_async(slot, v, bar, rank);");
  // The packed pushes (RowSchedule::push bit 1): the addresses' mapa is done in the store.
  replace_all(src, R"(asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(rank));)",
              "ra = 0;");
  replace_all(src, R"(asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(b), "r"(rank));)",
              "rb = 0;");
  replace_all(src,
              R"(asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], )"
              R"({%1, %2, %3, %4}, [%5];" :: "r"(ra + 4 * i), "r"(w[i]), "r"(w[i + 1]), )"
              R"("r"(w[i + 2]), "r"(w[i + 3]), "r"(rb) : "memory");)",
              "kdsl_emu_push_words(reinterpret_cast<unsigned*>(slot) + i, &w[i], 4, bar, rank);");
  replace_all(src,
              R"(asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], )"
              R"({%1, %2}, [%3];" :: "r"(ra + 4 * i), "r"(w[i]), "r"(w[i + 1]), "r"(rb) : )"
              R"("memory");)",
              "kdsl_emu_push_words(reinterpret_cast<unsigned*>(slot) + i, &w[i], 2, bar, rank);");
  replace_all(
      src,
      R"(asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, )"
      R"([%2];" :: "r"(ra + 4 * i), "r"(w[i]), "r"(rb) : "memory");)",
      "kdsl_emu_push_words(reinterpret_cast<unsigned*>(slot) + i, &w[i], 1, bar, rank);");
  replace_all(src,
              R"(asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), )"
              R"("r"(bytes) : "memory");)",
              "kdsl_emu_mbar_expect(bar, bytes);");
  replace_all(src,
              R"(asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.acquire.cluster.)"
              R"(shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}" : "=r"(ok) : )"
              R"("r"(b), "r"(parity) : "memory");)",
              "ok = kdsl_emu_mbar_try_wait(bar, parity);");
  // Approximate math (kdsl::cuda::approx_math): the host's full-precision functions.
  replace_all(src, R"(asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x));)", "r = exp2f(x);");
  replace_all(src,
              R"(asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * 1.44269504088896341f));)",
              "r = expf(x);");
  replace_all(src, R"(asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(h) : "f"(x * 0x1.715476p-1f));)",
              "h = expf(0.5f * x);");
  replace_all(src,
              R"(asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : )"
              R"("f"(fmaf(kdsl_exp_approx_ftz(-x), 0.25f, 0.25f)));)",
              "r = 1.f / fmaf(kdsl_exp_approx_ftz(-x), 0.25f, 0.25f);");
  replace_all(src, R"(asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));)", "r = a / b;");
  replace_all(src, R"(asm("sqrt.approx.f32 %0, %1;" : "=f"(r) : "f"(x));)", "r = sqrtf(x);");
  replace_all(src, R"(asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));)",
              "r = kdsl_max(a, b);");
  replace_all(src, R"(asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));)",
              "r = kdsl_min(a, b);");
  replace_all(src, R"(asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));)",
              "r = 1.f / sqrtf(x);");
  // The rescanning scan tile's barrier to common-subexpression elimination: no effect on values.
  replace_all(src, R"(asm volatile("" : "+r"(w[i]));)", "");
  replace_all(src, R"(asm volatile("" : "+h"(h));)", "");
  replace_all(src, R"(asm("" : "+l"(bytes));)", "");
  if (src.find("asm(") != std::string::npos || src.find("asm volatile(") != std::string::npos) {
    throw std::runtime_error("cuda_emu: unhandled inline assembly in the generated source");
  }
  // Dynamic shared memory (the launch's bytes): its own buffer of the CTA.
  replace_all(src, "extern __shared__ __align__(16) unsigned char kdsl_smem[];",
              "unsigned char* kdsl_smem = kdsl_emu_dynamic_smem();");
  if (src.find("extern __shared__") != std::string::npos) {
    throw std::runtime_error("cuda_emu: unhandled dynamic shared memory declaration");
  }
  // Every static __shared__ variable is placed at a multiple of 16 bytes (kdsl_emu_smem), so an
  // alignment of 16 asks for nothing more.
  replace_all(src, "__shared__ __align__(16) ", "__shared__ ");
  if (src.find("__align__(") != std::string::npos) {
    throw std::runtime_error("cuda_emu: unhandled __align__ in the generated source");
  }
  // "__shared__ TYPE NAME[D1][D2];" -> "TYPE (&NAME)[D1][D2] = *kdsl_emu_smem<TYPE[D1][D2], I>();"
  int index = 0;
  for (size_t at = src.find("__shared__ "); at != std::string::npos;
       at = src.find("__shared__ ", at)) {
    size_t end = src.find(';', at);
    std::string decl = src.substr(at + 11, end - at - 11);
    size_t bracket = std::min(decl.find('['), decl.size());
    std::string head = decl.substr(0, bracket), dims = decl.substr(bracket);
    size_t space = head.rfind(' ');
    std::string type = head.substr(0, space), name = head.substr(space + 1);
    std::string ref = dims.empty() ? type + "& " + name : type + " (&" + name + ")" + dims;
    src.replace(at, end - at,
                fmt::format("{} = *kdsl_emu_smem<{}{}, {}>()", ref, type, dims, index++));
  }
  std::string out =
      fmt::format("#include \"{}\"\n", host_header_name()) + kHostCuda + src + kLauncher;
  for (size_t i = 0; i < symbols.size(); ++i) {
    out += fmt::format(
        "extern \"C\" void kdsl_emu_entry_{}(const void* p) {{ {}(*static_cast<const "
        "kdsl_params_{}*>(p)); }}\n",
        i, symbols[i], symbols[0]);
  }
  return out;
}

/// The fibers' stacks and the CTAs' shared memory of emulated launches: one set for the host
/// thread, grown as launches need, shared by every library's launches. Reusing them matters:
/// fresh stacks' page faults and zeroing 512 KiB of shared memory per CTA took most of the
/// emulations' time. A CTA finds what an earlier one left in shared memory (as on a GPU); a
/// new buffer starts filled with 0xff bytes (NaN as floats), never zeros.
struct LaunchMemory {
  static constexpr size_t kStack = 256 * 1024;  // bytes per fiber: reserved, not committed
  static constexpr size_t kSmemWords = 64 * 1024;
  unsigned char* stacks = nullptr;
  size_t stack_slots = 0;
  std::vector<std::unique_ptr<unsigned long long[]>> buffers;
  std::vector<unsigned long long*> smem;

  static LaunchMemory& get() {
    static thread_local LaunchMemory m;
    return m;
  }
  void reserve(size_t fibers, size_t ctas) {
    if (fibers > stack_slots) {
      if (stacks) munmap(stacks, stack_slots * kStack);
      void* m = mmap(nullptr, fibers * kStack, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED) throw std::runtime_error("cuda_emu: no memory for the fibers' stacks");
      stacks = static_cast<unsigned char*>(m);
      stack_slots = fibers;
    }
    while (buffers.size() < ctas) {
      buffers.emplace_back(new unsigned long long[kSmemWords]);
      std::memset(buffers.back().get(), 0xff, kSmemWords * sizeof(unsigned long long));
      smem.push_back(buffers.back().get());
    }
  }
  ~LaunchMemory() {
    if (stacks) munmap(stacks, stack_slots * kStack);
  }
};

/// The seed of the emulated launches' fiber order and delays: KDSL_EMU_SEED when set (to replay
/// a failure), else drawn once per test process. The n-th launch of the process takes seed + n,
/// so a test run alone with the same seed (under ctest each test is a process of its own) replays
/// its launches exactly. A failing test that launched prints the seed (SeedReporter).
inline unsigned long long process_seed() {
  static const unsigned long long seed = [] {
    if (const char* e = std::getenv("KDSL_EMU_SEED"); e && *e) {
      char* end = nullptr;
      const unsigned long long s = std::strtoull(e, &end, 10);
      if (*end == '\0') return s;
      std::fprintf(stderr, "emu: KDSL_EMU_SEED='%s' is not a decimal number; ignored\n", e);
    }
    std::random_device rd;
    return (static_cast<unsigned long long>(rd()) << 32) ^ rd();
  }();
  return seed;
}
inline std::atomic<unsigned long long> launches{0};
/// Prints the emulation's seed after a failed test that launched an emulated kernel.
class SeedReporter : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed() && launches.load() > 0) {
      std::fprintf(stderr,
                   "emu: this process's emulated launches ordered their fibers from seed %llu; "
                   "KDSL_EMU_SEED=%llu with the same --gtest_filter replays them\n",
                   process_seed(), process_seed());
    }
  }
};
inline const bool seed_reporter_installed = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new SeedReporter);
  return true;
}();

inline unsigned long long launch_seed() {
  (void)seed_reporter_installed;  // referenced, so that its initialization is not deferred
  return process_seed() + launches.fetch_add(1);
}

/// A compiled emulation: the library and its entry points.
class Library {
 public:
  Library(const std::string& source, const std::string& name, size_t entries) {
    std::filesystem::path dir = std::filesystem::temp_directory_path() / "kdsl_emu";
    std::filesystem::create_directories(dir);
    // Tests run in parallel processes that may compile the same kernel: each process writes
    // its own files (pid and a counter in the name), so none dlopens a library another is
    // still writing.
    static std::atomic<unsigned> counter{0};
    std::string stem = fmt::format("{}_{}_{}", name, getpid(), counter++);
    std::filesystem::path cpp = dir / (stem + ".cpp"), so = dir / (stem + ".so");
    std::ofstream(cpp) << source;
    precompile_host_headers(dir);
    std::string cmd = fmt::format("{} -shared -o '{}' '{}' 2> '{}.log'", kHostCompile, so.string(),
                                  cpp.string(), so.string());
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream log(so.string() + ".log");
      std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      throw std::runtime_error("cuda_emu: the host compiler rejected " + cpp.string() + ":\n" +
                               text.substr(0, 4000));
    }
    handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw std::runtime_error(std::string("cuda_emu: dlopen: ") + dlerror());
    // The loaded library stays mapped; the files are no longer needed.
    std::error_code ignored;
    for (const auto& f : {cpp, so, std::filesystem::path(so.string() + ".log")}) {
      std::filesystem::remove(f, ignored);
    }
    launch_ = reinterpret_cast<Launch>(dlsym(handle_, "kdsl_emu_launch"));
    for (size_t i = 0; i < entries; ++i) {
      entries_.push_back(
          reinterpret_cast<Entry>(dlsym(handle_, fmt::format("kdsl_emu_entry_{}", i).c_str())));
    }
  }
  ~Library() {
    if (handle_) dlclose(handle_);
  }

  /// Writes kHostHeaders to `dir` and precompiles them there, once for every process of the
  /// test run: each file is written under a name of its own and renamed into place, so a
  /// process never reads one another is writing. Without the precompiled header (a failed
  /// build) the compiler reads the header itself: slower, same result.
  static void precompile_host_headers(const std::filesystem::path& dir) {
    const std::filesystem::path header = dir / host_header_name();
    const std::filesystem::path pch = header.string() + ".gch";
    if (std::filesystem::exists(pch)) return;
    const std::string mine = fmt::format(".{}", getpid());
    std::error_code ignored;
    if (!std::filesystem::exists(header)) {
      std::ofstream out(header.string() + mine);
      out << kHostHeaders;
      out.close();
      if (!out) return;  // not written (e.g. the disk is full): the compile will say so
      std::filesystem::rename(header.string() + mine, header, ignored);
    }
    const std::string cmd = fmt::format("{} -x c++-header -o '{}' '{}' 2> /dev/null", kHostCompile,
                                        pch.string() + mine, header.string());
    if (std::system(cmd.c_str()) == 0) std::filesystem::rename(pch.string() + mine, pch, ignored);
    std::filesystem::remove(pch.string() + mine, ignored);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  /// Runs entry point `i` on `grid` CTAs of `block` threads, `concurrent` CTAs at a time, in
  /// clusters of `cluster` CTAs (the grid is a multiple of it).
  void launch(size_t i, const void* params, unsigned grid, unsigned block, unsigned concurrent,
              unsigned cluster = 1) const {
    const unsigned batch = std::min(grid, (concurrent + cluster - 1) / cluster * cluster);
    LaunchMemory& m = LaunchMemory::get();
    m.reserve(static_cast<size_t>(batch) * block, batch);
    launch_(entries_.at(i), params, grid, block, concurrent, cluster, m.stacks,
            LaunchMemory::kStack, m.smem.data(), launch_seed());
  }

 private:
  using Entry = void (*)(const void*);
  using Launch = void (*)(Entry, const void*, unsigned, unsigned, unsigned, unsigned,
                          unsigned char*, size_t, unsigned long long* const*, unsigned long long);
  void* handle_ = nullptr;
  Launch launch_ = nullptr;
  std::vector<Entry> entries_;
};

/// True when a host C++ compiler is available to build emulations.
inline bool have_host_compiler() {
  return std::system("g++ --version > /dev/null 2>&1") == 0;
}

}  // namespace kdsl::emu

// Internals of kdsl::Module and kdsl::Kernel: argument checking, the per-context table of loaded
// specializations, and the launch path. The command line and the tests use them directly.
#pragma once

#include <cuda.h>

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler.h"
#include "dsl/sema.h"
#include "kdsl/kdsl.h"
#include "launch_plan.h"

namespace kdsl::detail {

// The front end's limits (dsl/sema.h), which size the tables below.
inline constexpr int kMaxParams = kMaxKernelParams;
inline constexpr int kMaxSymbols = kMaxKernelSymbols;
inline constexpr int kMaxGenerics = kMaxKernelGenerics;
inline constexpr uint32_t kMaxParamBytes = 4096;  // the classic 4 KiB kernel-parameter limit
inline constexpr size_t kMaxWorkspaces = 8;

/// The arguments of one launch after checking (fixed-size: binding them allocates nothing).
struct BoundArgs {
  DType binding[kMaxGenerics] = {};
  int64_t symbols[kMaxSymbols] = {};
  const TensorRef* tensors[kMaxParams] = {};  // by tensor index (ir::Kernel::tensors order)
  double scalars[kMaxParams] = {};            // by scalar index
  int64_t rows = 0;                           // product of the loop extents
  uint32_t aligned = 0;                       // bit t: tensor t allows 16-byte accesses
  uint32_t contiguous = 0;                    // bit t: tensor t's vector-axis stride is 1
};

/// A specialization loaded into one context, ready to launch.
struct LoadedSpec {
  LaunchPlan plan;
  CUfunction main = nullptr;
  std::vector<CUfunction> follow_ups;
  uint32_t grid_limit = 1;  // persistent grid: SMs x resident CTAs
  bool cache_hit = false;
  std::string tuned;      // the `kdsl tune` record's hint it was compiled with ("": none)
  double compile_ms = 0;  // NVRTC (0 on a disk-cache hit)
  double load_ms = 0;     // front end + cache + module load
};

/// One launch, checked, loaded and packed, ready to enqueue (no allocation: fixed size).
struct PreparedLaunch {
  const LoadedSpec* spec = nullptr;
  uint32_t grid = 0;        // CTAs of the main kernel; 0 for an empty parallel loop
  uint32_t zero_count = 0;  // workspace regions cleared before the main kernel
  CUdeviceptr zero_ptr[kMaxWorkspaces] = {};
  uint64_t zero_bytes[kMaxWorkspaces] = {};
  alignas(16) unsigned char params[kMaxParamBytes];  // the parameter block, spec->plan.param_bytes
};

struct SpecKey {
  uint64_t binding = 0;
  int64_t n = 0;
  uint32_t aligned = 0;
  uint32_t contiguous = 0;
  CUcontext ctx = nullptr;
  bool operator==(const SpecKey&) const = default;
};

struct SpecKeyHash {
  size_t operator()(const SpecKey& k) const;
};

class KernelImpl {
 public:
  KernelImpl(std::shared_ptr<const FrontEnd> fe, const KernelSignature* sig);

  const KernelSignature& sig() const { return *sig_; }
  const FrontEnd& front_end() const { return *fe_; }
  const std::vector<ParamInfo>& params() const { return params_; }
  /// Tensor / scalar index of parameter i (ir::Kernel::params order).
  int32_t slot_of(size_t i) const { return slot_[i]; }

  /// Checks `args` against the signature. Throws ArgumentError naming the argument, what was
  /// expected and what was given.
  void bind(std::span<const Arg> args, BoundArgs& out) const;
  Specialization specialization(const BoundArgs& b) const;
  /// The specialization for `b` loaded in `ctx`: compiled (or read from the disk cache) and
  /// loaded on first use, then found by a hash lookup.
  const LoadedSpec& loaded(const BoundArgs& b, CUcontext ctx) const;
  /// The launch of `b` on `stream` in `ctx`, which must be the calling thread's current context:
  /// loads the specialization (see loaded()), sizes the grid, finds the stream's workspace
  /// (allocated in `ctx` on first use; throws ArgumentError when that would happen during graph
  /// capture) and packs the parameter block.
  void prepare_launch(const BoundArgs& b, CUcontext ctx, CUstream_st* stream,
                      PreparedLaunch& out) const;
  /// Enqueues a prepared launch: the main kernel (unless its grid is empty), then the follow-ups.
  static void enqueue(const PreparedLaunch& p, CUstream_st* stream);
  /// bind, prepare_launch in the current context, enqueue.
  void launch(CUstream_st* stream, std::span<const Arg> args) const;
  /// Overrides the scheduler for specializations compiled from now on (autotuning, experiments).
  void set_schedule_hint(const ScheduleHint& hint) { hint_ = hint; }
  /// Whether specializations without a hint use the tuning database (default true).
  void use_tuning_db(bool use) { use_tuning_db_ = use; }

 private:
  ScheduleHint hint_;
  bool use_tuning_db_ = true;
  std::shared_ptr<const FrontEnd> fe_;
  const KernelSignature* sig_;
  std::vector<ParamInfo> params_;
  std::vector<int32_t> slot_;
  mutable std::shared_mutex mu_;
  mutable std::mutex compile_mu_;
  mutable std::unordered_map<SpecKey, std::unique_ptr<LoadedSpec>, SpecKeyHash> specs_;
};

class ModuleImpl {
 public:
  explicit ModuleImpl(std::shared_ptr<const FrontEnd> fe);
  std::shared_ptr<KernelImpl> kernel(const std::string& name) const;
  const FrontEnd& front_end() const { return *fe_; }

 private:
  std::shared_ptr<const FrontEnd> fe_;
  std::vector<std::shared_ptr<KernelImpl>> kernels_;
};

/// The calling thread's current context, or device 0's primary context made current.
CUcontext current_context();
/// The compile target (architecture, SM count, ...) of the device of `ctx`. Cached.
const DeviceTarget& context_target(CUcontext ctx);

}  // namespace kdsl::detail

// kdsl::Module and kdsl::Kernel: argument checking, specialization lookup and the launch path.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "driver.h"
#include "dsl/numeric.h"
#include "log.h"
#include "module.h"
#include "runtime_impl.h"
#include "text_util.h"
#include "tuning.h"

namespace kdsl {

// ---- TensorRef ----

TensorRef TensorRef::contiguous(void* data, DType dtype, std::span<const int64_t> shape) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    throw ArgumentError(
        fmt::format("a tensor has at most {} axes (got {})", kMaxRank, shape.size()));
  }
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] < 0) throw ArgumentError(fmt::format("tensor size {} is negative", shape[i]));
    t.shape[i] = shape[i];
    t.strides[i] = stride;
    if (__builtin_mul_overflow(stride, std::max<int64_t>(shape[i], 1), &stride)) {
      throw ArgumentError(
          fmt::format("a tensor of shape {} has more than 2^63 elements", fmt::join(shape, "x")));
    }
  }
  return t;
}

TensorRef TensorRef::contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape) {
  return contiguous(data, dtype, std::span<const int64_t>(shape.begin(), shape.size()));
}

TensorRef TensorRef::strided(void* data, DType dtype, std::span<const int64_t> shape,
                             std::span<const int64_t> strides) {
  if (shape.size() != strides.size()) {
    throw ArgumentError(fmt::format("a tensor with {} sizes needs {} strides (got {})",
                                    shape.size(), shape.size(), strides.size()));
  }
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    throw ArgumentError(
        fmt::format("a tensor has at most {} axes (got {})", kMaxRank, shape.size()));
  }
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < strides.size(); ++i) {
    if (shape[i] < 0) throw ArgumentError(fmt::format("tensor size {} is negative", shape[i]));
    if (strides[i] < 0)
      throw ArgumentError(fmt::format("tensor stride {} is negative", strides[i]));
    t.shape[i] = shape[i];
    t.strides[i] = strides[i];
  }
  return t;
}

TensorRef TensorRef::strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                             std::initializer_list<int64_t> strides) {
  return strided(data, dtype, std::span<const int64_t>(shape.begin(), shape.size()),
                 std::span<const int64_t>(strides.begin(), strides.size()));
}

int64_t TensorRef::numel() const {
  if (rank < 0 || rank > kMaxRank) {
    throw ArgumentError(fmt::format("a tensor's rank must be 0 to {} (got {})", kMaxRank, rank));
  }
  int64_t n = 1;
  for (int32_t i = 0; i < rank; ++i) {
    if (shape[i] < 0) throw ArgumentError(fmt::format("tensor size {} is negative", shape[i]));
    if (__builtin_mul_overflow(n, shape[i], &n)) {
      throw ArgumentError("a tensor has more than 2^63 elements");
    }
  }
  return n;
}

namespace detail {
namespace {

std::string ordinal(size_t i) {
  static const char* const suffix[] = {"th", "st", "nd", "rd"};
  size_t n = i + 1;
  size_t s = (n % 100 >= 11 && n % 100 <= 13) || n % 10 > 3 ? 0 : n % 10;
  return fmt::format("{}{}", n, suffix[s]);
}

// "1 axis", "3 axes".
std::string axes(size_t n) {
  return fmt::format("{} {}", n, n == 1 ? "axis" : "axes");
}

std::string shape_str(const TensorRef& t) {
  if (t.rank < 0 || t.rank > kMaxRank) return fmt::format("(invalid rank {})", t.rank);
  std::string s = "(";
  for (int32_t i = 0; i < t.rank; ++i) s += fmt::format("{}{}", i ? ", " : "", t.shape[i]);
  return s + (t.rank == 1 ? ",)" : ")");
}

std::string strides_str(const TensorRef& t) {
  TensorRef strides = t;
  std::copy(std::begin(t.strides), std::end(t.strides), std::begin(strides.shape));
  return shape_str(strides);
}

std::string declared_shape(const KernelSignature& sig, const SignatureParam& p) {
  std::string s = "(";
  for (size_t a = 0; a < p.shape.size(); ++a) {
    const ir::Extent& e = p.shape[a];
    s +=
        (a ? ", " : "") + (e.symbol >= 0 ? sig.symbols[e.symbol].name : std::to_string(e.constant));
  }
  return s + (p.shape.size() == 1 ? ",)" : ")");
}

std::string dtype_str(const KernelSignature& sig, const SignatureParam& p) {
  if (p.generic < 0) return std::string(dtype_name(p.dtype));
  const GenericInfo& g = sig.generics[p.generic];
  std::string dom;
  for (DType t : g.domain) dom += (dom.empty() ? "" : ", ") + std::string(dtype_name(t));
  return fmt::format("{} in ({})", g.name, dom);
}

// Bytes spanned by a tensor with non-negative sizes and strides (from its first to one past its
// last element); 0 when empty; nullopt when that does not fit the address space (2^63 bytes) or
// the span wraps around past the top of it.
std::optional<uint64_t> span_bytes(const TensorRef& t) {
  uint64_t last = 0;
  for (int32_t a = 0; a < t.rank; ++a) {
    if (t.shape[a] == 0) return 0;
    uint64_t step = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(t.shape[a] - 1),
                               static_cast<uint64_t>(t.strides[a]), &step) ||
        __builtin_add_overflow(last, step, &last)) {
      return std::nullopt;
    }
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(last + 1, dtype_size(t.dtype), &bytes) ||
      bytes > static_cast<uint64_t>(INT64_MAX) ||
      reinterpret_cast<uintptr_t>(t.data) > UINTPTR_MAX - bytes) {
    return std::nullopt;
  }
  return bytes;
}

// An axis of `t` (sizes and strides valid, span checked) whose steps land on elements that other
// indices reach too, or nullopt when every index has its own element. With the axes of size > 1
// sorted by stride, each stride must step past everything the smaller-stride axes cover.
std::optional<int32_t> overlapping_axis(const TensorRef& t) {
  int32_t order[kMaxRank];
  int32_t n = 0;
  for (int32_t a = 0; a < t.rank; ++a) {
    if (t.shape[a] == 0) return std::nullopt;  // no elements
    if (t.shape[a] > 1) order[n++] = a;
  }
  for (int32_t i = 1; i < n; ++i) {  // insertion sort by stride (std::sort of 8 values trips a
    for (int32_t j = i; j > 0 && t.strides[order[j]] < t.strides[order[j - 1]]; --j) {  // gcc 12
      std::swap(order[j], order[j - 1]);  // -Warray-bounds false positive)
    }
  }
  int64_t covered = 0;  // elements from the first to one past the last, over the axes so far
  for (int32_t k = 0; k < n; ++k) {
    int32_t a = order[k];
    if (t.strides[a] < std::max<int64_t>(covered, 1)) return a;
    covered = t.strides[a] * (t.shape[a] - 1) + std::max<int64_t>(covered, 1);
  }
  return std::nullopt;
}

}  // namespace

size_t SpecKeyHash::operator()(const SpecKey& k) const {
  uint64_t h = k.binding * 0x9e3779b97f4a7c15ULL;
  h ^= static_cast<uint64_t>(k.n) + 0x7f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= (static_cast<uint64_t>(k.aligned) << 32 | k.contiguous) + (h << 6) + (h >> 2);
  h ^= reinterpret_cast<uintptr_t>(k.ctx) + (h << 6) + (h >> 2);
  return static_cast<size_t>(h);
}

KernelImpl::KernelImpl(std::shared_ptr<const FrontEnd> fe, const KernelSignature* sig)
    : fe_(std::move(fe)), sig_(sig) {
  // A backstop: sema reports a kernel beyond these limits (dsl/sema.h) at its name.
  auto limit = [&](size_t count, int most, const char* what) {
    if (count > static_cast<size_t>(most)) {
      throw ArgumentError(fmt::format("kernel '{}' has {} {}; the runtime supports at most {}",
                                      sig->name, count, what, most));
    }
  };
  limit(sig->params.size(), kMaxParams, "parameters");
  limit(sig->symbols.size(), kMaxSymbols, "shape symbols");
  limit(sig->generics.size(), kMaxGenerics, "generics");
  for (const SignatureParam& p : sig->params) {
    if (p.shape.size() > static_cast<size_t>(kMaxRank)) {
      throw ArgumentError(
          fmt::format("kernel '{}': tensor '{}' has {} axes; the runtime supports "
                      "at most {} (kdsl::kMaxRank)",
                      sig->name, p.name, p.shape.size(), kMaxRank));
    }
  }
  int32_t tensors = 0, scalars = 0;
  for (const SignatureParam& p : sig->params) {
    ParamInfo info;
    info.name = p.name;
    info.is_tensor = p.is_tensor;
    info.is_output = p.is_tensor && p.role != ir::Role::in;
    info.accumulates = p.is_tensor && p.role == ir::Role::inout;
    info.dtype = p.generic >= 0 ? sig->generics[p.generic].name : std::string(dtype_name(p.dtype));
    for (const ir::Extent& e : p.shape) {
      info.shape.push_back(e.symbol >= 0 ? sig->symbols[e.symbol].name
                                         : std::to_string(e.constant));
    }
    info.default_value = p.default_value;
    params_.push_back(std::move(info));
    slot_.push_back(p.is_tensor ? tensors++ : scalars++);
  }
}

void KernelImpl::bind(std::span<const Arg> args, BoundArgs& b) const {
  const KernelSignature& sig = *sig_;
  auto fail = [&](size_t i, const std::string& what) {
    throw ArgumentError(fmt::format("{}: argument '{}' ({} of {}): {}", sig.name,
                                    sig.params[i].name, ordinal(i), sig.params.size(), what));
  };
  if (args.size() != sig.params.size()) {
    std::string names;
    for (const auto& p : sig.params) names += (names.empty() ? "" : ", ") + p.name;
    throw ArgumentError(fmt::format(
        "{} takes {} ({}), {} given; pass kdsl::Arg::use_default() for a scalar "
        "with a default",
        sig.name, counted(static_cast<int64_t>(sig.params.size()), "argument", "arguments"), names,
        args.size()));
  }
  int generic_from[kMaxGenerics];  // the argument that bound each generic; -1: none yet
  std::fill(std::begin(generic_from), std::end(generic_from), -1);
  int symbol_from[kMaxSymbols];
  std::fill(std::begin(symbol_from), std::end(symbol_from), -1);
  b.aligned = b.contiguous = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const SignatureParam& p = sig.params[i];
    const Arg& a = args[i];
    int32_t slot = slot_[i];
    if (!p.is_tensor) {
      if (a.kind() == Arg::Kind::tensor)
        fail(i, fmt::format("expected a number ({}), got a tensor", dtype_str(sig, p)));
      if (a.kind() == Arg::Kind::default_value) {
        if (!p.default_value) fail(i, "has no default value; pass a number");
        b.scalars[slot] = *p.default_value;
      } else {
        b.scalars[slot] = a.number();
      }
      continue;
    }
    if (a.kind() != Arg::Kind::tensor) {
      fail(i, fmt::format("expected a tensor of {} with shape {}, got {}", dtype_str(sig, p),
                          declared_shape(sig, p),
                          a.kind() == Arg::Kind::number ? "a number" : "a default"));
    }
    const TensorRef& t = a.tensor();
    b.tensors[slot] = &t;
    if (p.generic >= 0) {
      const GenericInfo& g = sig.generics[p.generic];
      if (generic_from[p.generic] < 0) {
        if (std::find(g.domain.begin(), g.domain.end(), t.dtype) == g.domain.end()) {
          fail(i, fmt::format("dtype {} is not allowed: expected {}", dtype_name(t.dtype),
                              dtype_str(sig, p)));
        }
        b.binding[p.generic] = t.dtype;
        generic_from[p.generic] = static_cast<int>(i);
      } else if (b.binding[p.generic] != t.dtype) {
        fail(i, fmt::format("dtype {} does not match {} = {} (set by '{}')", dtype_name(t.dtype),
                            g.name, dtype_name(b.binding[p.generic]),
                            sig.params[generic_from[p.generic]].name));
      }
    } else if (p.dtype != t.dtype) {
      fail(i, fmt::format("expected dtype {}, got {}", dtype_name(p.dtype), dtype_name(t.dtype)));
    }
    if (t.rank != static_cast<int32_t>(p.shape.size())) {
      fail(i, fmt::format("expected {} {}, got {} {}", axes(p.shape.size()), declared_shape(sig, p),
                          axes(static_cast<size_t>(std::max(t.rank, 0))), shape_str(t)));
    }
    for (int32_t ax = 0; ax < t.rank; ++ax) {
      const ir::Extent& e = p.shape[ax];
      int64_t n = t.shape[ax];
      if (n < 0) fail(i, fmt::format("axis {} has negative size {}", ax, n));
      if (t.strides[ax] < 0)
        fail(i, fmt::format("axis {} has negative stride {}", ax, t.strides[ax]));
      if (e.symbol < 0) {
        if (n != e.constant)
          fail(i, fmt::format("axis {} must have size {}, got {}", ax, e.constant, n));
      } else if (symbol_from[e.symbol] < 0) {
        b.symbols[e.symbol] = n;
        symbol_from[e.symbol] = static_cast<int>(i * kMaxRank + ax);
      } else if (b.symbols[e.symbol] != n) {
        int from = symbol_from[e.symbol];
        fail(i, fmt::format("axis {} has size {}, but {} = {} (set by '{}' axis {})", ax, n,
                            sig.symbols[e.symbol].name, b.symbols[e.symbol],
                            sig.params[from / kMaxRank].name, from % kMaxRank));
      }
    }
    if (!span_bytes(t)) {
      fail(i, fmt::format("sizes {} and strides {} address more than 2^63 bytes", shape_str(t),
                          strides_str(t)));
    }
    if (t.data == nullptr && t.numel() > 0) fail(i, "is a null pointer");
    if (p.role != ir::Role::in) {
      if (auto ax = overlapping_axis(t)) {
        fail(i, fmt::format("its elements overlap (axis {} has size {} and stride {}); an output "
                            "needs a separate element for each index",
                            *ax, t.shape[*ax], t.strides[*ax]));
      }
    }
    const TensorLayoutBits bits =
        tensor_layout_bits(p.shape, sig.vector_symbol, t.shape, t.strides, dtype_size(t.dtype),
                           reinterpret_cast<uintptr_t>(t.data) % 16 == 0);
    if (bits.aligned) b.aligned |= 1u << slot;
    if (bits.contiguous) b.contiguous |= 1u << slot;
  }
  // Scalars, now that the generics are bound: a value the dtype cannot hold is an error (the
  // launch would truncate or saturate it: value_fit_problem, as `kdsl run --arg` checks), and
  // 16-bit floats are rounded to their dtype here, as the CPU reference rounds them (the kernel
  // receives them as f32).
  for (size_t i = 0; i < args.size(); ++i) {
    const SignatureParam& p = sig.params[i];
    if (p.is_tensor) continue;
    if (p.generic >= 0 && generic_from[p.generic] < 0) continue;  // (every generic types a tensor)
    const DType t = p.generic >= 0 ? b.binding[p.generic] : p.dtype;
    double& v = b.scalars[slot_[i]];
    if (const std::string why = value_fit_problem(v, t); !why.empty()) {
      // (fmt prints a NaN with its sign bit as "-nan"; the user passed a NaN either way.)
      fail(i, fmt::format("{} does not fit {}, {}",
                          std::isnan(v) ? std::string("NaN") : fmt::format("{}", v), dtype_name(t),
                          why));
    }
    if (t == DType::f16 || t == DType::bf16) v = round_to(t, v);
  }
  // Outputs must not overlap any other argument.
  for (size_t i = 0; i < args.size(); ++i) {
    const SignatureParam& p = sig.params[i];
    if (!p.is_tensor || p.role == ir::Role::in) continue;
    const TensorRef& out = *b.tensors[slot_[i]];
    uint64_t out_lo = reinterpret_cast<uintptr_t>(out.data), out_hi = out_lo + *span_bytes(out);
    if (out_lo == out_hi) continue;  // an empty tensor addresses no memory
    for (size_t j = 0; j < args.size(); ++j) {
      if (j == i || !sig.params[j].is_tensor) continue;
      const TensorRef& o = *b.tensors[slot_[j]];
      uint64_t lo = reinterpret_cast<uintptr_t>(o.data), hi = lo + *span_bytes(o);
      if (lo < hi && out_lo < hi && lo < out_hi) {
        fail(i, fmt::format("overlaps argument '{}'; outputs must not alias other arguments "
                            "(an InOut parameter updates a tensor in place)",
                            sig.params[j].name));
      }
    }
  }
  b.rows = 1;
  for (int32_t e : sig.loop_extents) {
    if (__builtin_mul_overflow(b.rows, b.symbols[e], &b.rows)) {
      throw ArgumentError(
          fmt::format("{}: the parallel loop has more than 2^63 iterations", sig.name));
    }
  }
  if (sig.vector_symbol >= 0 && b.symbols[sig.vector_symbol] < 1) {
    throw ArgumentError(fmt::format("{}: the vector axis {} has size {}; it must be at least 1",
                                    sig.name, sig.symbols[sig.vector_symbol].name,
                                    b.symbols[sig.vector_symbol]));
  }
}

Specialization KernelImpl::specialization(const BoundArgs& b) const {
  Specialization s;
  s.binding.assign(b.binding, b.binding + sig_->generics.size());
  s.vector_extent = sig_->vector_symbol >= 0 ? b.symbols[sig_->vector_symbol] : -1;
  s.aligned_mask = b.aligned;
  s.contiguous_mask = b.contiguous;
  return s;
}

CUcontext current_context() {
  const Driver& d = driver();
  CUcontext ctx = nullptr;
  check(d.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (!ctx) ctx = primary_context(0);
  return ctx;
}

const DeviceTarget& context_target(CUcontext ctx) {
  static std::mutex mu;
  static std::map<CUcontext, DeviceTarget> targets;
  std::lock_guard<std::mutex> lock(mu);
  auto it = targets.find(ctx);
  if (it != targets.end()) return it->second;
  const Driver& d = driver();
  CUcontext prev = nullptr;
  check(d.cuCtxGetCurrent(&prev), "cuCtxGetCurrent");
  check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUdevice dev = 0;
  CUresult r = d.cuCtxGetDevice(&dev);
  d.cuCtxSetCurrent(prev);
  check(r, "cuCtxGetDevice");
  DeviceInfo info = device_info(static_cast<int>(dev));
  DeviceTarget t;
  t.name = info.name;
  t.arch = info.arch;
  t.sm_count = info.sm_count;
  t.max_threads_per_sm = info.max_threads_per_sm;
  t.max_smem_per_cta = info.max_smem_per_block_optin;
  return targets.emplace(ctx, t).first->second;
}

namespace {

// The launch path packs parameters into fixed-size arrays; a plan beyond them is a codegen bug.
void check_plan(const LaunchPlan& plan) {
  bool ok = plan.param_bytes <= kMaxParamBytes && plan.workspaces.size() <= kMaxWorkspaces;
  for (const ParamSlot& s : plan.slots) {
    ok = ok && s.offset + s.size <= plan.param_bytes &&
         (s.kind != ParamSlot::Kind::workspace ||
          static_cast<size_t>(s.index) < plan.workspaces.size());
  }
  if (!ok) {
    throw InternalError(fmt::format(
        "launch plan of {} exceeds the runtime's limits ({} parameter "
        "bytes of {}, {} workspaces of {}) or is inconsistent",
        plan.symbol, plan.param_bytes, kMaxParamBytes, plan.workspaces.size(), kMaxWorkspaces));
  }
}

// The persistent grid of a kernel compiled with __cluster_dims__(K, 1, 1): K times the number of
// clusters the driver can place at once, at most `limit` CTAs, at least one cluster.
uint32_t cluster_grid_limit(CUfunction f, const LaunchPlan& plan, uint32_t limit) {
  CUlaunchConfig cfg{};
  cfg.gridDimX = std::max(limit / plan.cluster, 1u) * plan.cluster;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = plan.block_threads;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = plan.dynamic_smem;
  int clusters = 0;
  check(driver().cuOccupancyMaxActiveClusters(&clusters, f, &cfg), "cuOccupancyMaxActiveClusters");
  uint32_t fit = static_cast<uint32_t>(std::max(clusters, 1)) * plan.cluster;
  return std::max(std::min(fit, limit / plan.cluster * plan.cluster), plan.cluster);
}

}  // namespace

const LoadedSpec& KernelImpl::loaded(const BoundArgs& b, CUcontext ctx) const {
  SpecKey key;
  for (size_t g = 0; g < sig_->generics.size(); ++g) {
    key.binding |= static_cast<uint64_t>(b.binding[g]) << (8 * g);
  }
  key.n = sig_->vector_symbol >= 0 ? b.symbols[sig_->vector_symbol] : -1;
  key.aligned = b.aligned;
  key.contiguous = b.contiguous;
  key.ctx = ctx;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = specs_.find(key);
    if (it != specs_.end()) return *it->second;
  }
  std::lock_guard<std::mutex> compile_lock(compile_mu_);
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = specs_.find(key);
    if (it != specs_.end()) return *it->second;
  }
  auto t0 = std::chrono::steady_clock::now();
  const DeviceTarget& target = context_target(ctx);
  Specialization spec = specialization(b);
  // The user's hint, else a schedule `kdsl tune` measured fastest on this GPU model, if any.
  TuningDb* db = use_tuning_db_ ? TuningDb::default_db() : nullptr;
  std::string tuned;
  CompiledKernel ck =
      compile_with_tuning(*fe_, sig_->name, spec, target, hint_, db, nullptr, &tuned);
  check_plan(ck.gen.plan);
  auto ls = std::make_unique<LoadedSpec>();
  ls->tuned = tuned;
  ls->plan = ck.gen.plan;
  LoadedKernel main =
      load_kernel(ctx, ck.binary.cubin, ls->plan.symbol, static_cast<int>(ls->plan.dynamic_smem));
  ls->main = main.function;
  for (const FollowUp& f : ls->plan.follow_ups) {
    ls->follow_ups.push_back(load_kernel(ctx, ck.binary.cubin, f.symbol, 0).function);
  }
  const Driver& d = driver();
  int per_sm = 0;
  check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, ls->main, static_cast<int>(ls->plan.block_threads), ls->plan.dynamic_smem),
        "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  per_sm = std::max(1, std::min<int>(per_sm, static_cast<int>(ls->plan.max_ctas_per_sm)));
  ls->grid_limit = static_cast<uint32_t>(per_sm * target.sm_count);
  if (ls->plan.cluster > 1) {
    // A cluster's CTAs run at once on SMs of one GPC: the persistent grid is the number of
    // clusters that fit at once (the driver's count), in whole clusters.
    ls->grid_limit = cluster_grid_limit(ls->main, ls->plan, ls->grid_limit);
  }
  if (ls->plan.persistent) {
    log().info(
        "kdsl launch: '{}' persistent grid of at most {} CTAs ({} per SM by occupancy, "
        "{} SMs{})",
        ls->plan.symbol, ls->grid_limit, per_sm, target.sm_count,
        ls->plan.cluster > 1 ? fmt::format(", {} clusters of {}", ls->grid_limit / ls->plan.cluster,
                                           ls->plan.cluster)
                             : std::string());
  }
  ls->cache_hit = ck.binary.hit;
  ls->compile_ms = ck.binary.compile_ms;
  ls->load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::unique_lock<std::shared_mutex> lock(mu_);
  return *specs_.emplace(key, std::move(ls)).first->second;
}

namespace {

// Scratch memory for column-reduction partials: one buffer per (context, stream), so launches on
// different streams never share one (the per-thread default stream is one stream per thread).
// Grown on demand, at least doubling; a replaced buffer is never freed, because a CUDA graph
// captured earlier may still use it. A launch that finds a large enough buffer takes only a
// shared lock and allocates nothing.
struct WorkspaceKey {
  CUcontext ctx;
  CUstream_st* stream;
  std::thread::id thread;  // for CU_STREAM_PER_THREAD only
  auto operator<=>(const WorkspaceKey&) const = default;
};
struct WorkspaceBuffer {
  CUdeviceptr ptr = 0;
  uint64_t bytes = 0;
};
std::shared_mutex g_workspace_mu;
std::map<WorkspaceKey, WorkspaceBuffer> g_workspaces;  // guarded by g_workspace_mu
std::vector<CUdeviceptr> g_retired_workspaces;         // replaced, still reachable; same guard

CUdeviceptr grow_workspace(const std::string& kernel, const WorkspaceKey& key, uint64_t bytes) {
  std::unique_lock<std::shared_mutex> lock(g_workspace_mu);
  WorkspaceBuffer& buf = g_workspaces[key];
  if (buf.bytes >= bytes) return buf.ptr;
  const Driver& d = driver();
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  check(d.cuStreamIsCapturing(reinterpret_cast<CUstream>(key.stream), &capturing),
        "cuStreamIsCapturing");
  if (capturing != CU_STREAM_CAPTURE_STATUS_NONE) {
    throw ArgumentError(fmt::format(
        "{}: this launch needs {} bytes of workspace for its column reductions, which cannot be "
        "allocated while the stream is being captured into a CUDA graph; before capturing, launch "
        "the kernel once on this stream (outside capture) with at least as many rows",
        kernel, bytes));
  }
  uint64_t grown = std::max({bytes, 2 * buf.bytes, uint64_t{1} << 20});
  CUdeviceptr ptr = 0;
  check(d.cuMemAlloc(&ptr, grown), "cuMemAlloc (kdsl workspace)");
  if (buf.ptr) g_retired_workspaces.push_back(buf.ptr);
  buf = {ptr, grown};
  return ptr;
}

CUdeviceptr workspace(const std::string& kernel, CUcontext ctx, CUstream_st* stream,
                      uint64_t bytes) {
  WorkspaceKey key{ctx, stream, {}};
  if (reinterpret_cast<CUstream>(stream) == CU_STREAM_PER_THREAD) {
    key.thread = std::this_thread::get_id();
  }
  {
    std::shared_lock<std::shared_mutex> lock(g_workspace_mu);
    auto it = g_workspaces.find(key);
    if (it != g_workspaces.end() && it->second.bytes >= bytes) return it->second.ptr;
  }
  return grow_workspace(kernel, key, bytes);
}

template <class T>
void put(unsigned char* buf, uint32_t offset, T v) {
  std::memcpy(buf + offset, &v, sizeof(T));
}

void put_scalar(unsigned char* buf, const ParamSlot& s, double v) {
  switch (s.dtype) {
    case DType::f32:
      put<float>(buf, s.offset, static_cast<float>(v));
      break;
    case DType::f64:
      put<double>(buf, s.offset, v);
      break;
    case DType::i32:
      put<int32_t>(buf, s.offset, static_cast<int32_t>(v));
      break;
    case DType::i64:
      put<int64_t>(buf, s.offset, static_cast<int64_t>(v));
      break;
    default:
      put<float>(buf, s.offset, static_cast<float>(v));
      break;
  }
}

// Where the launch's workspace regions start (bytes from the buffer's start) and their sizes
// (bytes_per_cta * grid + bytes_per_row * rows + bytes_fixed); returns the total.
uint64_t workspace_layout(const LaunchPlan& plan, uint32_t grid, int64_t rows, uint64_t* offsets,
                          uint64_t* sizes) {
  uint64_t total = 0;
  for (size_t w = 0; w < plan.workspaces.size(); ++w) {
    const WorkspaceSpec& spec = plan.workspaces[w];
    offsets[w] = total;
    sizes[w] = spec.bytes_per_cta * std::max<uint32_t>(grid, 1) +
               spec.bytes_per_row * static_cast<uint64_t>(std::max<int64_t>(rows, 0)) +
               spec.bytes_fixed;
    total += (sizes[w] + 255) / 256 * 256;
  }
  return total;
}

// The kernel's parameter block (plan.param_bytes bytes, at most kMaxParamBytes).
void pack_params(const LaunchPlan& plan, const BoundArgs& b, int64_t partials, CUdeviceptr ws,
                 const uint64_t* ws_offsets, unsigned char* buf) {
  std::memset(buf, 0, plan.param_bytes);
  for (const ParamSlot& s : plan.slots) {
    switch (s.kind) {
      case ParamSlot::Kind::tensor_ptr:
        put(buf, s.offset, b.tensors[s.index]->data);
        break;
      case ParamSlot::Kind::stride:
        put<int64_t>(buf, s.offset, b.tensors[s.index]->strides[s.axis]);
        break;
      case ParamSlot::Kind::symbol:
        put<int64_t>(buf, s.offset, b.symbols[s.index]);
        break;
      case ParamSlot::Kind::rows:
        put<int64_t>(buf, s.offset, b.rows);
        break;
      case ParamSlot::Kind::partials:
        put<int64_t>(buf, s.offset, partials);
        break;
      case ParamSlot::Kind::workspace:
        put<uint64_t>(buf, s.offset, ws + ws_offsets[s.index]);
        break;
      case ParamSlot::Kind::scalar:
        put_scalar(buf, s, b.scalars[s.index]);
        break;
    }
  }
}

}  // namespace

void KernelImpl::prepare_launch(const BoundArgs& b, CUcontext ctx, CUstream_st* stream,
                                PreparedLaunch& out) const {
  const LoadedSpec& ls = loaded(b, ctx);
  const LaunchPlan& plan = ls.plan;
  // row_splits: CTAs of work per group of rows (the scan schedule's chunks along the sequence).
  uint64_t groups =
      static_cast<uint64_t>((b.rows + plan.rows_per_cta - 1) / plan.rows_per_cta) * plan.row_splits;
  if (!plan.persistent && groups > 0x7fffffffu) {  // one CTA per piece of work: the grid's x limit
    throw ArgumentError(fmt::format(
        "{}: {} rows need {} CTAs of {} ({} per row group); a launch has at "
        "most 2^31 - 1",
        sig_->name, b.rows, groups, counted(plan.rows_per_cta, "row", "rows"), plan.row_splits));
  }
  uint32_t grid = static_cast<uint32_t>(
      std::min<uint64_t>(groups, plan.persistent ? ls.grid_limit : 0x7fffffffu));
  // With M = 0 the grid is empty and partials is 0: the follow-up kernels still run and write
  // the column reductions' empty sums (zeros for Out, the old contents for InOut).
  int64_t partials = plan.partials(grid);
  CUdeviceptr ws = 0;
  uint64_t ws_offsets[kMaxWorkspaces] = {}, ws_sizes[kMaxWorkspaces] = {};
  if (!plan.workspaces.empty()) {
    ws = workspace(sig_->name, ctx, stream,
                   workspace_layout(plan, grid, b.rows, ws_offsets, ws_sizes));
  }
  out.zero_count = 0;
  for (size_t w = 0; w < plan.workspaces.size(); ++w) {
    if (!plan.workspaces[w].zeroed || ws_sizes[w] == 0) continue;
    out.zero_ptr[out.zero_count] = ws + ws_offsets[w];
    out.zero_bytes[out.zero_count++] = ws_sizes[w];
  }
  pack_params(plan, b, partials, ws, ws_offsets, out.params);
  out.spec = &ls;
  out.grid = grid;
}

void KernelImpl::enqueue(const PreparedLaunch& p, CUstream_st* stream) {
  const Driver& d = driver();
  const LaunchPlan& plan = p.spec->plan;
  void* params[] = {const_cast<unsigned char*>(p.params)};
  CUstream st = reinterpret_cast<CUstream>(stream);
  for (uint32_t z = 0; z < p.zero_count; ++z) {  // e.g. the scan schedule's look-back flags
    check(d.cuMemsetD8Async(p.zero_ptr[z], 0, p.zero_bytes[z], st), "cuMemsetD8Async (workspace)");
  }
  if (p.grid > 0) {
    check(d.cuLaunchKernel(p.spec->main, p.grid, 1, 1, plan.block_threads, 1, 1, plan.dynamic_smem,
                           st, params, nullptr),
          "cuLaunchKernel");
  }
  for (size_t f = 0; f < p.spec->follow_ups.size(); ++f) {
    const FollowUp& fu = plan.follow_ups[f];
    uint32_t fgrid =
        static_cast<uint32_t>((fu.grid_elements + fu.block_threads - 1) / fu.block_threads);
    check(d.cuLaunchKernel(p.spec->follow_ups[f], fgrid, 1, 1, fu.block_threads, 1, 1, 0, st,
                           params, nullptr),
          "cuLaunchKernel (follow-up)");
  }
}

void KernelImpl::launch(CUstream_st* stream, std::span<const Arg> args) const {
  BoundArgs b;
  bind(args, b);
  PreparedLaunch p;
  prepare_launch(b, current_context(), stream, p);
  enqueue(p, stream);
}

ModuleImpl::ModuleImpl(std::shared_ptr<const FrontEnd> fe) : fe_(std::move(fe)) {
  for (const KernelSignature& sig : fe_->kernels) {
    kernels_.push_back(std::make_shared<KernelImpl>(fe_, &sig));
  }
}

std::shared_ptr<KernelImpl> ModuleImpl::kernel(const std::string& name) const {
  for (const auto& k : kernels_) {
    if (k->sig().name == name) return k;
  }
  std::string names;
  for (const auto& k : kernels_) names += (names.empty() ? "" : ", ") + k->sig().name;
  throw ArgumentError(fmt::format("no kernel named '{}' in {} (kernels: {})", name,
                                  fe_->file->path(), names.empty() ? "none" : names));
}

}  // namespace detail

// ---- public handles ----

namespace {

// The object behind a handle; a default-constructed handle has none (found by a new-user test:
// every use of one dereferenced a null pointer).
template <class T>
T& held(const std::shared_ptr<T>& p, const char* handle, const char* from) {
  if (!p) {
    throw Error(
        fmt::format("this kdsl::{} is empty (default-constructed); get one from {}", handle, from));
  }
  return *p;
}
detail::KernelImpl& held(const std::shared_ptr<detail::KernelImpl>& p) {
  return held(p, "Kernel", "Module::kernel()");
}
detail::ModuleImpl& held(const std::shared_ptr<detail::ModuleImpl>& p) {
  return held(p, "Module", "Module::load() or Module::from_source()");
}

}  // namespace

const std::string& Kernel::name() const {
  return held(impl_).sig().name;
}
const std::string& Kernel::docstring() const {
  return held(impl_).sig().docstring;
}
const std::vector<ParamInfo>& Kernel::params() const {
  return held(impl_).params();
}

void Kernel::launch(CUstream_st* stream, std::span<const Arg> args) const {
  held(impl_).launch(stream, args);
}

std::string Kernel::prepare(std::span<const Arg> args) const {
  const detail::KernelImpl& k = held(impl_);
  detail::BoundArgs b;
  k.bind(args, b);
  return k.loaded(b, detail::current_context()).plan.symbol;
}

Module Module::load(const std::string& path) {
  Module m;
  m.impl_ = std::make_shared<detail::ModuleImpl>(run_front_end(SourceFile::read(path)));
  return m;
}

Module Module::from_source(const std::string& source, const std::string& name) {
  Module m;
  m.impl_ = std::make_shared<detail::ModuleImpl>(
      run_front_end(std::make_shared<const SourceFile>(name, source)));
  return m;
}

Kernel Module::kernel(const std::string& name) const {
  Kernel k;
  k.impl_ = held(impl_).kernel(name);
  return k;
}

std::vector<std::string> Module::kernel_names() const {
  std::vector<std::string> out;
  for (const auto& k : held(impl_).front_end().kernels) out.push_back(k.name);
  return out;
}

const std::string& Module::path() const {
  return held(impl_).front_end().file->path();
}

}  // namespace kdsl

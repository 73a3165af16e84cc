// kdsl_sanitize_cases: launches every stdlib kernel once per shape, for compute-sanitizer
// (scripts/device/sanitize.sh runs it under memcheck, racecheck, synccheck and initcheck).
// Device memory only: inputs are filled with one repeated byte (0x3c: finite for every float
// dtype; 0x01 for bool), outputs poisoned with 0xff, so nothing large moves through the host.
//
//   kdsl_sanitize_cases --list TOOL              the cases TOOL runs: ID FILE KERNEL DTYPE M N
//   kdsl_sanitize_cases --precompile [JOBS]      compiles every case's specialization for sm_90
//                                                into the disk cache (no GPU needed)
//   kdsl_sanitize_cases --run TOOL M [FIRST_ID]  runs TOOL's cases with this M from FIRST_ID on
//
// --run prints "KDSL_CASE ID SYMBOL SCHEDULE" before a launch and "KDSL_DONE ID" after it has
// finished; on an error it prints "KDSL_FAILED ID message" and exits with status 3 (a sticky
// CUDA error ends the process; the script starts the next case in a new one). Status 4: no GPU.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "kdsl/error.h"
#include "src/driver.h"
#include "src/runtime_impl.h"

namespace kdsl {
namespace {

struct Case {
  int id = 0;
  std::string file;  // relative to the source tree, e.g. stdlib/rms_norm.kdsl
  std::string kernel;
  std::vector<DType> binding;
  int64_t m = 1, n = 1;
};

const int64_t kLengths[] = {1, 7, 33, 1000, 65537};  // N (or L): every row schedule and tail

std::string root() {
  const char* r = std::getenv("KDSL_SOURCE_DIR");  // the tree may have moved (GPU machine)
  return r ? r : KDSL_SOURCE_DIR;
}

const Module& module(const std::string& file) {
  static std::map<std::string, Module> modules;
  auto it = modules.find(file);
  if (it == modules.end()) it = modules.emplace(file, Module::load(root() + "/" + file)).first;
  return it->second;
}

// f32 for each generic that allows it, else its first dtype.
std::vector<DType> small_binding(const KernelSignature& sig) {
  std::vector<DType> b;
  for (const GenericInfo& g : sig.generics) {
    bool f32 = std::find(g.domain.begin(), g.domain.end(), DType::f32) != g.domain.end();
    b.push_back(f32 ? DType::f32 : g.domain.front());
  }
  return b;
}

// Every case of every kernel of every stdlib/*.kdsl file, in a fixed order, numbered from 0.
// memcheck: N in kLengths x M in {1, 70000} (M = 600 instead of 70000 for N = 65537: 4.6e9
// elements are for tests/big_gpu_test.cpp; 600 rows still loop a persistent grid). racecheck
// and synccheck: one shape per row schedule (N = 7 sub-warp, 1000 warp or CTA, 65537 CTA) at
// M = 600. initcheck: N = 1000 and 65537 at M = 1 (partial sums of few rows) and M = 600.
std::vector<Case> cases(const std::string& tool) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(root() + "/stdlib")) {
    if (e.path().extension() == ".kdsl") files.push_back("stdlib/" + e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::pair<int64_t, int64_t>> shapes;  // (M, N)
  if (tool == "memcheck") {
    for (int64_t n : kLengths) {
      shapes.push_back({1, n});
      shapes.push_back({n == 65537 ? 600 : 70000, n});
    }
  } else if (tool == "racecheck" || tool == "synccheck") {
    shapes = {{600, 7}, {600, 1000}, {600, 65537}};
  } else if (tool == "initcheck") {
    shapes = {{1, 1000}, {600, 1000}, {1, 65537}};
  } else {
    throw ArgumentError("unknown tool '" + tool + "' (memcheck, racecheck, synccheck, initcheck)");
  }
  std::vector<Case> out;
  for (const std::string& f : files) {
    for (const std::string& name : module(f).kernel_names()) {
      const KernelSignature& sig = module(f).kernel(name).impl().sig();
      for (auto [m, n] : shapes) {
        out.push_back(Case{static_cast<int>(out.size()), f, name, small_binding(sig), m, n});
      }
    }
  }
  return out;
}

std::string binding_text(const KernelSignature& sig, const std::vector<DType>& b) {
  std::string s;
  for (size_t g = 0; g < b.size(); ++g) {
    s += (g ? "," : "") + sig.generics[g].name + "=" + std::string(dtype_name(b[g]));
  }
  return s.empty() ? "-" : s;
}

// The value of each shape symbol: the vector axis N, the first loop axis M, any other 1.
int64_t symbol_value(const KernelSignature& sig, int32_t symbol, const Case& c) {
  if (symbol == sig.vector_symbol) return c.n;
  if (!sig.loop_extents.empty() && symbol == sig.loop_extents.front()) return c.m;
  return 1;
}

// The launch arguments of a case. With `buffers`, in device memory filled as the header says;
// without, at fake addresses (256-byte aligned like cuMemAlloc's, never dereferenced), which bind
// to the same specialization, for precompiling.
struct CaseArgs {
  std::vector<TensorRef> tensors;
  std::vector<Arg> args;
};

CaseArgs case_args(const Case& c, std::vector<DeviceBuffer>* buffers) {
  const KernelSignature& sig = module(c.file).kernel(c.kernel).impl().sig();
  CaseArgs out;
  out.tensors.reserve(sig.params.size());
  uintptr_t fake = uintptr_t{0x7f0000000000};
  for (const SignatureParam& p : sig.params) {
    if (!p.is_tensor) {
      out.args.emplace_back(p.default_value ? Arg::use_default() : Arg(0.5));
      continue;
    }
    DType t = p.generic >= 0 ? c.binding[p.generic] : p.dtype;
    std::vector<int64_t> shape;
    for (const ir::Extent& e : p.shape)
      shape.push_back(e.symbol >= 0 ? symbol_value(sig, e.symbol, c) : e.constant);
    int64_t elems = 1;
    for (int64_t s : shape) elems *= s;
    void* data = reinterpret_cast<void*>(fake += uintptr_t{1} << 36);
    if (buffers) {
      DeviceBuffer& b = buffers->emplace_back(static_cast<size_t>(elems) * dtype_size(t));
      uint8_t byte = p.role == ir::Role::out ? 0xff : t == DType::b8 ? 0x01 : 0x3c;
      check(driver().cuMemsetD8(b.ptr(), byte, b.size()), "cuMemsetD8");
      data = reinterpret_cast<void*>(b.ptr());
    }
    out.tensors.push_back(TensorRef::contiguous(data, t, shape));
    out.args.emplace_back(out.tensors.back());
  }
  return out;
}

void run_case(const Case& c) {
  Kernel k = module(c.file).kernel(c.kernel);
  std::vector<DeviceBuffer> buffers;
  CaseArgs ca = case_args(c, &buffers);
  const std::vector<Arg>& args = ca.args;
  detail::BoundArgs bound;
  k.impl().bind(args, bound);
  const detail::LoadedSpec& ls = k.impl().loaded(bound, detail::current_context());
  std::printf("KDSL_CASE %d %s %s%s\n", c.id, ls.plan.symbol.c_str(), ls.plan.schedule.c_str(),
              ls.plan.persistent ? ".persistent" : "");
  std::fflush(stdout);
  k.launch(nullptr, args);
  check(driver().cuCtxSynchronize(), "the kernel (cuCtxSynchronize)");
  std::printf("KDSL_DONE %d\n", c.id);
  std::fflush(stdout);
}

int main_impl(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 2 && a[0] == "--list") {
    for (const Case& c : cases(a[1])) {
      const KernelSignature& sig = module(c.file).kernel(c.kernel).impl().sig();
      std::printf("%d %s %s %s %lld %lld\n", c.id, c.file.c_str(), c.kernel.c_str(),
                  binding_text(sig, c.binding).c_str(), static_cast<long long>(c.m),
                  static_cast<long long>(c.n));
    }
    return 0;
  }
  if ((a.size() == 1 || a.size() == 2) && a[0] == "--precompile") {
    // Every specialization the cases launch, compiled for sm_90 into the disk cache
    // (KDSL_CACHE_DIR) exactly as the runtime would on an H100/H200.
    std::vector<std::pair<const Case*, Specialization>> work;
    std::map<std::string, int> seen;
    std::vector<Case> all;
    for (const char* tool : {"memcheck", "racecheck", "synccheck", "initcheck"}) {
      for (Case c : cases(tool)) all.push_back(std::move(c));
    }
    for (const Case& c : all) {
      const detail::KernelImpl& k = module(c.file).kernel(c.kernel).impl();
      CaseArgs ca = case_args(c, nullptr);
      detail::BoundArgs bound;
      k.bind(ca.args, bound);
      Specialization spec = k.specialization(bound);
      if (seen[c.file + " " + spec.symbol(c.kernel, ~0u) + std::to_string(spec.aligned_mask) + "/" +
               std::to_string(spec.contiguous_mask)]++ == 0) {
        work.emplace_back(&c, spec);
      }
    }
    const int jobs = a.size() == 2 ? std::max(1, std::stoi(a[1])) : 2;
    std::atomic<size_t> next{0};
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int j = 0; j < jobs; ++j) {
      threads.emplace_back([&] {
        for (size_t i; (i = next++) < work.size();) {
          const Case& c = *work[i].first;
          try {
            CompiledKernel ck = compile_kernel(module(c.file).impl().front_end(), c.kernel,
                                               work[i].second, DeviceTarget{});
            std::printf("%s %s\n", ck.gen.plan.symbol.c_str(),
                        ck.binary.hit ? "(cached)" : "compiled");
          } catch (const std::exception& e) {
            std::printf("FAILED %s %s: %s\n", c.file.c_str(), c.kernel.c_str(), e.what());
            ++failures;
          }
          std::fflush(stdout);
        }
      });
    }
    for (auto& t : threads) t.join();
    std::printf("%zu specializations for sm_90 in the disk cache\n", work.size());
    return failures ? 1 : 0;
  }
  if ((a.size() == 3 || a.size() == 4) && a[0] == "--run") {
    std::string why;
    if (!driver_or_null(&why) || device_count() == 0) {
      std::fprintf(stderr, "kdsl_sanitize_cases: no GPU (%s)\n", why.c_str());
      return 4;
    }
    primary_context(0);
    const int64_t m = std::stoll(a[2]);
    const int first = a.size() == 4 ? std::stoi(a[3]) : 0;
    for (const Case& c : cases(a[1])) {
      if (c.m != m || c.id < first) continue;
      try {
        run_case(c);
      } catch (const std::exception& e) {
        std::printf("KDSL_FAILED %d %s\n", c.id, e.what());
        std::fflush(stdout);
        return 3;
      }
    }
    return 0;
  }
  std::fprintf(
      stderr,
      "usage: kdsl_sanitize_cases --list TOOL | --precompile [JOBS] | --run TOOL M [FIRST_ID]\n");
  return 2;
}

}  // namespace
}  // namespace kdsl

int main(int argc, char** argv) {
  try {
    return kdsl::main_impl(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kdsl_sanitize_cases: %s\n", e.what());
    return 1;
  }
}

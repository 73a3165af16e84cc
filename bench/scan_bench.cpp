// The scan benchmark (issues 4 and 5): linear recurrence forward and backward (real and complex),
// RG-LRU forward and backward and cumsum along a middle and the last axis, timed with CUDA events
// (L2 flushed) next to a same-run device-to-device copy. Prints a table (time, GB/s counting the
// minimal bytes -- each input read once, each output written once -- and the ratio to the copy)
// and writes one JSON record per kernel, dtype and shape.
//
//   kdsl_bench_scan [OUT.json] [--source DIR] [--reps N] [--only KERNEL] [--dtype T]
// Exit status 4 without a GPU, 2 on a usage error. KDSL_SCAN_SCHEDULE=... (schedule_scan.h)
// times other schedules.
#include <cmath>

#include "bench/bench_common.h"

namespace kdsl {
namespace {

struct Case {
  const char* file;
  const char* kernel;
  bool middle;  // (B, L, D) scanned over L; else (M, N) = (B * D, L) scanned over N
  bool complex;
};

constexpr Case kCases[] = {
    {"stdlib/linear_recurrence.kdsl", "linear_recurrence", true, false},
    {"stdlib/linear_recurrence.kdsl", "linear_recurrence_bwd", true, false},
    {"stdlib/linear_recurrence.kdsl", "linear_recurrence", true, true},
    {"stdlib/linear_recurrence.kdsl", "complex_linear_recurrence_bwd", true, true},
    {"stdlib/rg_lru.kdsl", "rg_lru", true, false},
    {"stdlib/rg_lru.kdsl", "rg_lru_bwd", true, false},
    {"stdlib/scan.kdsl", "cumsum_mid", true, false},
    {"stdlib/scan.kdsl", "cumsum", false, false},
};

struct Shape {
  int64_t b, l, d;
};

constexpr Shape kShapes[] = {{4, 2048, 2048}, {1, 8192, 2560}, {1, 32768, 1024}, {1, 32768, 2048}};

// Uniform values in [lo, hi) (c64: that modulus), from splitmix64: fast for 100M elements.
void fill(HostTensor& h, double lo, double hi, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  auto next = [&]() {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
  };
  for (int64_t i = 0; i < h.numel(); ++i) {
    double r = lo + (hi - lo) * next();
    if (h.dtype == DType::c64) {
      double a = 6.283185307179586 * next();
      h.set(i, r * std::cos(a), r * std::sin(a));
    } else {
      h.set(i, r);
    }
  }
}

// The problem with every input given (decays in [0.5, 1) for recurrences' a).
Problem problem(const std::shared_ptr<const FrontEnd>& fe, const Case& c, DType t, const Shape& s,
                uint64_t seed) {
  ProblemSpec ps;
  ps.kernel = c.kernel;
  const KernelSignature* sig = fe->find(c.kernel);
  if (!sig) throw Error(fmt::format("no kernel {}", c.kernel));
  if (!sig->generics.empty()) ps.binding = {c.complex ? DType::c64 : t};
  if (c.middle) {
    ps.shapes = {{"B", s.b}, {"L", s.l}, {"D", s.d}};
  } else {
    ps.shapes = {{"M", s.b * s.d}, {"N", s.l}};
  }
  for (const SignatureParam& p : sig->params) {
    if (!p.is_tensor || p.role != ir::Role::in) continue;
    std::vector<int64_t> shape;
    for (const ir::Extent& e : p.shape) {
      shape.push_back(e.symbol >= 0 ? ps.shapes.at(sig->symbols[e.symbol].name) : e.constant);
    }
    DType dt = p.generic >= 0 ? ps.binding.at(p.generic) : p.dtype;
    HostTensor h(dt, shape);
    bool decay = p.name == "a";
    fill(h, decay ? 0.5 : -1.7, decay ? 0.999 : 1.7, seed * 31 + ps.inputs.size());
    ps.inputs[p.name] = std::move(h);
  }
  return make_problem(fe, ps);
}

int run(int argc, char** argv) {
  bench::Session session(
      "kdsl_bench_scan",
      "kdsl_bench_scan: the stdlib scan kernels at the benchmark shapes (B, L, D) against a "
      "same-run 1 GiB copy",
      kCases, {"bf16", "f32", "c64"});
  if (int status = session.start(argc, argv); status >= 0) return status;
  const bench::Options& opt = session.options();
  fmt::print("{:<30} {:<5} {:>16} {:>10} {:>8} {:>8}  {}\n", "kernel", "dtype", "shape (B,L,D)",
             "us", "GB/s", "of copy", "schedule");
  std::map<std::string, std::shared_ptr<const FrontEnd>> modules;
  uint64_t seed = 1;
  for (const Case& c : kCases) {
    if (!opt.only.empty() && opt.only != c.kernel) continue;
    auto& fe = modules[c.file];
    if (!fe) fe = run_front_end(SourceFile::read(opt.source + "/" + c.file));
    std::vector<DType> dtypes =
        c.complex ? std::vector<DType>{DType::c64} : std::vector<DType>{DType::bf16, DType::f32};
    for (DType t : dtypes) {
      if (!opt.only_dtype.empty() && opt.only_dtype != dtype_name(t)) continue;
      for (const Shape& s : kShapes) {
        Problem p = problem(fe, c, t, s, seed++);
        GpuRun gpu(p);
        bench::Measured m = session.time(p, gpu);
        fmt::print("{:<30} {:<5} {:>16} {:>10.2f} {:>8.0f} {:>8.3f}  {}\n", c.kernel, dtype_name(t),
                   fmt::format("{},{},{}", s.b, s.l, s.d), m.t.median_us, m.gbps,
                   m.gbps / session.copy_gbps(), gpu.loaded().plan.schedule);
        std::cout.flush();
        nlohmann::json rec = {{"kernel", c.kernel}, {"dtype", dtype_name(t)},
                              {"B", s.b},           {"L", s.l},
                              {"D", s.d},           {"reasons", gpu.loaded().plan.reasons}};
        if (std::string(c.kernel).starts_with("cumsum")) {  // torch.cumsum's shape and dim
          rec["op"] = "cumsum";
          rec["shape"] =
              c.middle ? std::vector<int64_t>{s.b, s.l, s.d} : std::vector<int64_t>{s.b * s.d, s.l};
          rec["dim"] = c.middle ? 1 : -1;
        }
        session.add(std::move(rec), m, gpu.loaded().plan);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace kdsl

int main(int argc, char** argv) {
  return kdsl::bench::guarded_main("kdsl_bench_scan", [&] { return kdsl::run(argc, argv); });
}

// The scan benchmark (issues 4 and 5): linear recurrence forward and backward (real and complex),
// RG-LRU forward and backward and cumsum along a middle and the last axis, timed with CUDA events
// (L2 flushed) next to a same-run device-to-device copy. Prints a table (time, GB/s counting the
// minimal bytes -- each input read once, each output written once -- and the ratio to the copy)
// and writes one JSON record per kernel, dtype and shape.
//
//   kdsl_bench_scan [OUT.json] [--source DIR] [--reps N] [--only KERNEL] [--dtype T]
// Exit status 4 without a GPU. KDSL_SCAN_SCHEDULE=... (schedule_scan.h) times other schedules.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "src/driver.h"
#include "src/harness.h"

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
  std::string out_path;
  std::string source =
      std::getenv("KDSL_SOURCE_DIR") ? std::getenv("KDSL_SOURCE_DIR") : KDSL_SOURCE_DIR;
  std::string only, only_dtype;
  int reps = 30;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--source" && i + 1 < argc) {
      source = argv[++i];
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--dtype" && i + 1 < argc) {
      only_dtype = argv[++i];
    } else {
      out_path = a;
    }
  }
  std::string why;
  if (!driver_or_null(&why) || device_count() == 0) {
    std::cerr << "kdsl_bench_scan: no GPU: " << why << "\n";
    return 4;
  }
  primary_context(0);
  Timing copy_t;
  double copy = copy_bandwidth_gbps(nullptr, size_t{1} << 30, &copy_t);
  nlohmann::json records = nlohmann::json::array();
  records.push_back(
      {{"op", "copy"}, {"bytes", 2ull << 30}, {"us", copy_t.median_us}, {"GBps", copy}});
  fmt::print("device-to-device copy (1 GiB): {:.1f} us, {:.0f} GB/s\n", copy_t.median_us, copy);
  fmt::print("{:<30} {:<5} {:>16} {:>10} {:>8} {:>8}  {}\n", "kernel", "dtype", "shape (B,L,D)",
             "us", "GB/s", "of copy", "schedule");
  std::map<std::string, std::shared_ptr<const FrontEnd>> modules;
  uint64_t seed = 1;
  for (const Case& c : kCases) {
    if (!only.empty() && only != c.kernel) continue;
    auto& fe = modules[c.file];
    if (!fe) fe = run_front_end(SourceFile::read(source + "/" + c.file));
    std::vector<DType> dtypes =
        c.complex ? std::vector<DType>{DType::c64} : std::vector<DType>{DType::bf16, DType::f32};
    for (DType t : dtypes) {
      if (!only_dtype.empty() && only_dtype != dtype_name(t)) continue;
      for (const Shape& s : kShapes) {
        Problem p = problem(fe, c, t, s, seed++);
        GpuRun gpu(p);
        Timing tm = time_cuda(
            nullptr, [&] { gpu.launch(); }, 5, reps, true);
        uint64_t bytes = minimal_bytes(p);
        double gbps = static_cast<double>(bytes) / (tm.median_us * 1e3);
        fmt::print("{:<30} {:<5} {:>16} {:>10.2f} {:>8.0f} {:>8.3f}  {}\n", c.kernel, dtype_name(t),
                   fmt::format("{},{},{}", s.b, s.l, s.d), tm.median_us, gbps, gbps / copy,
                   gpu.loaded().plan.schedule);
        std::cout.flush();
        nlohmann::json rec = {{"kernel", c.kernel},
                              {"dtype", dtype_name(t)},
                              {"B", s.b},
                              {"L", s.l},
                              {"D", s.d},
                              {"us", tm.median_us},
                              {"min_us", tm.min_us},
                              {"bytes", bytes},
                              {"GBps", gbps},
                              {"ratio_to_copy", gbps / copy},
                              {"symbol", gpu.loaded().plan.symbol},
                              {"schedule", gpu.loaded().plan.schedule},
                              {"reasons", gpu.loaded().plan.reasons}};
        if (std::string(c.kernel).starts_with("cumsum")) {  // torch.cumsum's shape and dim
          rec["op"] = "cumsum";
          rec["shape"] =
              c.middle ? std::vector<int64_t>{s.b, s.l, s.d} : std::vector<int64_t>{s.b * s.d, s.l};
          rec["dim"] = c.middle ? 1 : -1;
        }
        records.push_back(rec);
        // Written after each record, so a run cut short keeps what it measured.
        if (!out_path.empty()) std::ofstream(out_path) << records.dump(1) << "\n";
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace kdsl

int main(int argc, char** argv) {
  try {
    return kdsl::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "kdsl_bench_scan: " << e.what() << "\n";
    return 1;
  }
}

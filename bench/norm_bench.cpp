// The normalization benchmark (issue 5): every stdlib normalization kernel, forward and backward,
// at the shapes of the table, timed with CUDA events (L2 flushed) next to a same-run
// device-to-device copy. Prints a table and writes one JSON record per kernel, dtype and shape.
//
//   kdsl_bench_norm [OUT.json] [--source DIR] [--reps N] [--only KERNEL]
// Exit status 4 without a GPU.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
  const char* forward;  // the backward's inputs come from this kernel's reference outputs
  const char* op;       // peers' name: rmsnorm, layernorm, softmax
  bool backward;
};

constexpr Case kCases[] = {
    {"stdlib/rms_norm.kdsl", "rms_norm", nullptr, "rmsnorm", false},
    {"stdlib/rms_norm.kdsl", "rms_norm_bwd", "rms_norm", "rmsnorm", true},
    {"stdlib/layer_norm.kdsl", "layer_norm", nullptr, "layernorm", false},
    {"stdlib/layer_norm.kdsl", "layer_norm_bwd", "layer_norm", "layernorm", true},
    {"stdlib/softmax.kdsl", "softmax", nullptr, "softmax", false},
    {"stdlib/softmax.kdsl", "softmax_bwd", "softmax", "softmax", true},
};

struct Shape {
  DType dtype;
  int64_t m, n;
};

constexpr Shape kShapes[] = {{DType::bf16, 1024, 8192},  {DType::bf16, 8192, 8192},
                             {DType::bf16, 32768, 4096}, {DType::bf16, 4096, 32768},
                             {DType::bf16, 65536, 1024}, {DType::f32, 8192, 10240}};

// Inputs of a backward kernel named like the forward's tensors come from a forward run on the
// GPU (so rstd, mean and y are what a training step would save).
std::map<std::string, HostTensor> forward_inputs(const std::shared_ptr<const FrontEnd>& fe,
                                                 const ProblemSpec& bwd, const char* forward) {
  std::map<std::string, HostTensor> out;
  if (!forward) return out;
  ProblemSpec fs = bwd;
  fs.kernel = forward;
  fs.seed = bwd.seed + 7777;
  Problem fp = make_problem(fe, fs);
  GpuRun run(fp);
  run.launch();
  std::vector<HostTensor> done = fp.tensors;
  run.download(done);
  const KernelSignature* bsig = fe->find(bwd.kernel);
  for (size_t t = 0; t < fp.ir.tensors.size(); ++t) {
    for (const SignatureParam& p : bsig->params) {
      if (p.is_tensor && p.role == ir::Role::in && p.name == fp.ir.tensors[t].name) {
        out[p.name] = done[t];
      }
    }
  }
  return out;
}

int run(int argc, char** argv) {
  std::string out_path,
      source = std::getenv("KDSL_SOURCE_DIR") ? std::getenv("KDSL_SOURCE_DIR") : KDSL_SOURCE_DIR;
  std::string only;
  int reps = 30;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--source" && i + 1 < argc)
      source = argv[++i];
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--only" && i + 1 < argc)
      only = argv[++i];
    else
      out_path = a;
  }
  std::string why;
  if (!driver_or_null(&why) || device_count() == 0) {
    std::cerr << "kdsl_bench_norm: no GPU: " << why << "\n";
    return 4;
  }
  primary_context(0);
  Timing copy_t;
  double copy = copy_bandwidth_gbps(nullptr, size_t{1} << 30, &copy_t);
  nlohmann::json records = nlohmann::json::array();
  records.push_back(
      {{"op", "copy"}, {"bytes", 2ull << 30}, {"us", copy_t.median_us}, {"GBps", copy}});
  fmt::print("device-to-device copy (1 GiB): {:.1f} us, {:.0f} GB/s\n", copy_t.median_us, copy);
  fmt::print("{:<16} {:<5} {:>14} {:>10} {:>8} {:>8}  {}\n", "kernel", "dtype", "shape", "us",
             "GB/s", "of copy", "schedule");
  std::map<std::string, std::shared_ptr<const FrontEnd>> modules;
  uint64_t seed = 1;
  for (const Case& c : kCases) {
    if (!only.empty() && only != c.kernel) continue;
    auto& fe = modules[c.file];
    if (!fe) fe = run_front_end(SourceFile::read(source + "/" + c.file));
    for (const Shape& s : kShapes) {
      ProblemSpec ps;
      ps.kernel = c.kernel;
      ps.binding = {s.dtype};
      ps.shapes = {{"M", s.m}, {"N", s.n}};
      ps.seed = seed++;
      ps.inputs = forward_inputs(fe, ps, c.forward);
      Problem p = make_problem(fe, ps);
      GpuRun gpu(p);
      Timing t = time_cuda(
          nullptr, [&] { gpu.launch(); }, 5, reps, true);
      uint64_t bytes = minimal_bytes(p);
      double gbps = static_cast<double>(bytes) / (t.median_us * 1e3);
      fmt::print("{:<16} {:<5} {:>14} {:>10.2f} {:>8.0f} {:>8.3f}  {}\n", c.kernel,
                 dtype_name(s.dtype), fmt::format("{}x{}", s.m, s.n), t.median_us, gbps,
                 gbps / copy, gpu.loaded().plan.schedule);
      std::cout.flush();
      records.push_back({{"kernel", c.kernel},
                         {"op", c.op},
                         {"pass", c.backward ? "bwd" : "fwd"},
                         {"dtype", dtype_name(s.dtype)},
                         {"M", s.m},
                         {"N", s.n},
                         {"us", t.median_us},
                         {"min_us", t.min_us},
                         {"bytes", bytes},
                         {"GBps", gbps},
                         {"ratio_to_copy", gbps / copy},
                         {"symbol", gpu.loaded().plan.symbol},
                         {"schedule", gpu.loaded().plan.schedule}});
    }
  }
  if (!out_path.empty()) std::ofstream(out_path) << records.dump(1) << "\n";
  return 0;
}

}  // namespace
}  // namespace kdsl

int main(int argc, char** argv) {
  try {
    return kdsl::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "kdsl_bench_norm: " << e.what() << "\n";
    return 1;
  }
}

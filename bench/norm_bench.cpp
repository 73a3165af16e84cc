// The normalization benchmark (issue 5): every stdlib normalization kernel, forward and backward,
// at the shapes of the table, timed with CUDA events (L2 flushed) next to a same-run
// device-to-device copy. Prints a table and writes one JSON record per kernel, dtype and shape.
//
//   kdsl_bench_norm [OUT.json] [--source DIR] [--reps N] [--only KERNEL]
// Exit status 4 without a GPU, 2 on a usage error.
#include "bench/bench_common.h"

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
  bench::Session session(
      "kdsl_bench_norm",
      "kdsl_bench_norm: every stdlib normalization kernel at the benchmark shapes (bf16 1024 x "
      "8192 to 4096 x 32768, f32 8192 x 10240) against a same-run 1 GiB copy",
      kCases);
  if (int status = session.start(argc, argv); status >= 0) return status;
  const bench::Options& opt = session.options();
  fmt::print("{:<16} {:<5} {:>14} {:>10} {:>8} {:>8}  {}\n", "kernel", "dtype", "shape", "us",
             "GB/s", "of copy", "schedule");
  std::map<std::string, std::shared_ptr<const FrontEnd>> modules;
  uint64_t seed = 1;
  for (const Case& c : kCases) {
    if (!opt.only.empty() && opt.only != c.kernel) continue;
    auto& fe = modules[c.file];
    if (!fe) fe = run_front_end(SourceFile::read(opt.source + "/" + c.file));
    for (const Shape& s : kShapes) {
      ProblemSpec ps;
      ps.kernel = c.kernel;
      ps.binding = {s.dtype};
      ps.shapes = {{"M", s.m}, {"N", s.n}};
      ps.seed = seed++;
      ps.inputs = forward_inputs(fe, ps, c.forward);
      Problem p = make_problem(fe, ps);
      GpuRun gpu(p);
      bench::Measured m = session.time(p, gpu);
      fmt::print("{:<16} {:<5} {:>14} {:>10.2f} {:>8.0f} {:>8.3f}  {}\n", c.kernel,
                 dtype_name(s.dtype), fmt::format("{}x{}", s.m, s.n), m.t.median_us, m.gbps,
                 m.gbps / session.copy_gbps(), gpu.loaded().plan.schedule);
      std::cout.flush();
      session.add({{"kernel", c.kernel},
                   {"op", c.op},
                   {"pass", c.backward ? "bwd" : "fwd"},
                   {"dtype", dtype_name(s.dtype)},
                   {"M", s.m},
                   {"N", s.n}},
                  m, gpu.loaded().plan);
    }
  }
  return 0;
}

}  // namespace
}  // namespace kdsl

int main(int argc, char** argv) {
  return kdsl::bench::guarded_main("kdsl_bench_norm", [&] { return kdsl::run(argc, argv); });
}

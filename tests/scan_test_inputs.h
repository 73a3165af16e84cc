// The stdlib scan kernels and realistic inputs for them, shared by the emulation and GPU tests:
// decay factors in (0.5, 1) for recurrences (modulus below 1 for c64), cumprod factors near 1, so
// that long sequences neither vanish nor overflow and the results are well conditioned.
#pragma once

#include <cmath>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "src/harness.h"

namespace kdsl::testing {

struct ScanKernel {
  std::string file;
  std::string kernel;
  bool middle = false;  // (B, L, D) tensors scanned over L, else (M, N) over N
  bool complex = false;
};

inline void PrintTo(const ScanKernel& k, std::ostream* os) {
  *os << k.file << ":" << k.kernel << (k.complex ? " (c64)" : "");
}

/// Every kernel of stdlib/scan.kdsl, stdlib/linear_recurrence.kdsl and stdlib/rg_lru.kdsl.
inline std::vector<ScanKernel> stdlib_scan_kernels() {
  std::vector<ScanKernel> out;
  for (const char* op : {"cumsum", "cumprod", "logcumsumexp"}) {
    for (const char* v : {"", "_exclusive", "_reverse", "_reverse_exclusive"}) {
      for (bool mid : {false, true}) {
        std::string name = std::string(op) + v + (mid ? "_mid" : "");
        out.push_back({"stdlib/scan.kdsl", name, mid, false});
        if (std::string(op) != "cumsum")
          out.push_back({"stdlib/scan.kdsl", name + "_bwd", mid, false});
      }
    }
  }
  for (const char* k : {"linear_recurrence", "linear_recurrence_h0", "linear_recurrence_bwd",
                        "linear_recurrence_h0_bwd"}) {
    out.push_back({"stdlib/linear_recurrence.kdsl", k, true, false});
  }
  for (const char* k : {"linear_recurrence", "linear_recurrence_h0",
                        "complex_linear_recurrence_bwd", "complex_linear_recurrence_h0_bwd"}) {
    out.push_back({"stdlib/linear_recurrence.kdsl", k, true, true});
  }
  out.push_back({"stdlib/rg_lru.kdsl", "rg_lru", true, false});
  out.push_back({"stdlib/rg_lru.kdsl", "rg_lru_bwd", true, false});
  return out;
}

/// Fills `h` with values uniform in [lo, hi) (c64: modulus in [lo, hi), any phase), fast
/// (splitmix64), so that large tensors are ready in a fraction of a second.
inline void fast_fill(HostTensor& h, double lo, double hi, uint64_t seed) {
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

/// The problem of `k` for dtype `t` (c64 for complex kernels; the non-generic complex kernels
/// take no binding) at sizes (b, l, d) ((M, N) = (b, l) for last-axis kernels), with realistic
/// inputs: uniform in [-1.7, 1.7) (about unit variance), decays in [0.5, 0.999) for recurrences,
/// factors in [0.9, 1.1) for cumprod. A backward kernel gets its forward's outputs (y, h)
/// computed from the same inputs, as in training, by the interpreter or (forward_on_gpu) the GPU.
inline Problem scan_problem(const std::shared_ptr<const FrontEnd>& fe, const ScanKernel& k, DType t,
                            int64_t b, int64_t l, int64_t d, uint64_t seed,
                            bool forward_on_gpu = false) {
  DType dt = k.complex ? DType::c64 : t;
  auto spec = [&](const std::string& kernel, uint64_t s) {
    ProblemSpec ps;
    ps.kernel = kernel;
    ps.seed = s;
    const KernelSignature* sig = fe->find(kernel);
    if (sig && !sig->generics.empty()) ps.binding = {dt};
    ps.shapes = k.middle ? std::map<std::string, int64_t>{{"B", b}, {"L", l}, {"D", d}}
                         : std::map<std::string, int64_t>{{"M", b}, {"N", l}};
    // Every input given, filled fast.
    Problem probe = make_problem(fe, [&] {
      ProblemSpec empty = ps;
      for (auto& [name, v] : empty.shapes) v = 1;
      return empty;
    }());
    for (size_t i = 0; i < probe.ir.tensors.size(); ++i) {
      const ir::TensorParam& tp = probe.ir.tensors[i];
      if (tp.role != ir::Role::in) continue;
      std::vector<int64_t> shape;
      for (const ir::Extent& e : tp.shape) {
        shape.push_back(e.symbol >= 0 ? ps.shapes.at(probe.ir.symbols[e.symbol].name) : e.constant);
      }
      HostTensor h(tp.dtype, shape);
      double lo = -1.7, hi = 1.7;
      if (tp.name == "a" && k.file.find("linear_recurrence") != std::string::npos)
        lo = 0.5, hi = 0.999;
      if (tp.name == "x" && k.kernel.rfind("cumprod", 0) == 0) lo = 0.9, hi = 1.1;
      fast_fill(h, lo, hi, s * 131 + i);
      ps.inputs[tp.name] = std::move(h);
    }
    return ps;
  };
  ProblemSpec ps = spec(k.kernel, seed);
  std::string fwd = k.kernel;
  if (fwd.size() <= 4 || fwd.compare(fwd.size() - 4, 4, "_bwd") != 0) return make_problem(fe, ps);
  fwd = fwd.substr(0, fwd.size() - 4);
  if (fwd.rfind("complex_", 0) == 0) fwd = fwd.substr(8);
  ProblemSpec fs = spec(fwd, seed + 17);
  for (auto& [name, tensor] : fs.inputs) {
    if (ps.inputs.count(name)) tensor = ps.inputs[name];
  }
  Problem fp = make_problem(fe, fs);
  std::vector<HostTensor> out;
  if (forward_on_gpu) {
    GpuRun gpu(fp);
    gpu.launch();
    out = fp.tensors;
    gpu.download(out);
  } else {
    out = run_reference(fp);
  }
  for (size_t i = 0; i < fp.ir.tensors.size(); ++i) {
    const std::string& name = fp.ir.tensors[i].name;
    if (fp.ir.tensors[i].role != ir::Role::in && ps.inputs.count(name)) ps.inputs[name] = out[i];
  }
  return make_problem(fe, ps);
}

}  // namespace kdsl::testing

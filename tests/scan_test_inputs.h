// The stdlib scan kernels and realistic inputs for them, shared by the emulation and GPU tests:
// decay factors in (0.5, 1) for recurrences (modulus below 1 for c64), cumprod factors near 1, so
// that long sequences neither vanish nor overflow and the results are well conditioned.
#pragma once

#include <cmath>
#include <map>
#include <random>
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

/// The problem of `k` for dtype `t` (c64 for complex kernels; the non-generic complex kernels
/// take no binding) at the given sizes, with realistic inputs.
inline Problem scan_problem(const std::shared_ptr<const FrontEnd>& fe, const ScanKernel& k, DType t,
                            int64_t b, int64_t l, int64_t d, uint64_t seed) {
  ProblemSpec ps;
  ps.kernel = k.kernel;
  ps.seed = seed;
  const KernelSignature* sig = fe->find(k.kernel);
  if (sig && !sig->generics.empty()) ps.binding = {k.complex ? DType::c64 : t};
  DType dt = k.complex ? DType::c64 : t;
  std::vector<int64_t> shape;
  if (k.middle) {
    ps.shapes = {{"B", b}, {"L", l}, {"D", d}};
    shape = {b, l, d};
  } else {
    ps.shapes = {{"M", b}, {"N", l}};
    shape = {b, l};
  }
  std::mt19937_64 rng(seed * 7919 + 1);
  auto fill = [&](double lo, double hi) {
    HostTensor h(dt, shape);
    std::uniform_real_distribution<double> u(lo, hi), ph(-3.1, 3.1);
    for (int64_t i = 0; i < h.numel(); ++i) {
      double r = u(rng);
      if (dt == DType::c64) {
        double a = ph(rng);
        h.set(i, r * std::cos(a), r * std::sin(a));
      } else {
        h.set(i, r);
      }
    }
    return h;
  };
  if (k.file.find("linear_recurrence") != std::string::npos) ps.inputs["a"] = fill(0.5, 0.999);
  if (k.kernel.rfind("cumprod", 0) == 0) ps.inputs["x"] = fill(0.9, 1.1);
  Problem p = make_problem(fe, ps);
  // A backward kernel gets its forward's outputs (y, h) computed from the same inputs, as in
  // training: the gradients are then as well conditioned as they are in practice.
  std::string fwd = k.kernel;
  if (fwd.size() <= 4 || fwd.compare(fwd.size() - 4, 4, "_bwd") != 0) return p;
  fwd = fwd.substr(0, fwd.size() - 4);
  if (fwd.rfind("complex_", 0) == 0) fwd = fwd.substr(8);
  std::map<std::string, HostTensor> inputs;
  for (size_t u = 0; u < p.ir.tensors.size(); ++u) {
    if (p.ir.tensors[u].role == ir::Role::in) inputs[p.ir.tensors[u].name] = p.tensors[u];
  }
  ProblemSpec fs;
  fs.kernel = fwd;
  fs.binding = {dt};
  fs.shapes = ps.shapes;
  fs.seed = seed + 17;
  Problem probe = make_problem(fe, fs);
  for (const ir::TensorParam& t : probe.ir.tensors) {
    if (t.role == ir::Role::in && inputs.count(t.name)) fs.inputs[t.name] = inputs[t.name];
  }
  Problem fp = make_problem(fe, fs);
  std::vector<HostTensor> out = run_reference(fp);
  for (size_t t = 0; t < fp.ir.tensors.size(); ++t) {
    if (fp.ir.tensors[t].role != ir::Role::in && inputs.count(fp.ir.tensors[t].name)) {
      inputs[fp.ir.tensors[t].name] = out[t];
    }
  }
  ps.inputs = inputs;
  return make_problem(fe, ps);
}

}  // namespace kdsl::testing

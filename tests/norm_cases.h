// The stdlib normalization kernels as test cases: each backward kernel with the forward kernel
// whose outputs it takes, and realistic backward inputs made by running that forward.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "src/harness.h"

namespace kdsl::testing {

// A backward kernel gets realistic inputs: the tensors its forward kernel (`forward`) takes
// and produces (x, w, rstd, y, ...) come from running the forward on the CPU reference, so the
// test exercises the conditioning real training sees (random "saved" tensors would make the
// gradients cancel catastrophically).
struct KernelCase {
  const char* file;
  const char* kernel;
  const char* forward;  // nullptr for forward kernels
};

inline constexpr KernelCase kKernels[] = {
    {"stdlib/rms_norm.kdsl", "rms_norm", nullptr},
    {"stdlib/rms_norm.kdsl", "rms_norm_bwd", "rms_norm"},
    {"stdlib/rms_norm.kdsl", "add_rms_norm", nullptr},
    {"stdlib/rms_norm.kdsl", "add_rms_norm_bwd", "add_rms_norm"},
    {"stdlib/layer_norm.kdsl", "layer_norm", nullptr},
    {"stdlib/layer_norm.kdsl", "layer_norm_bwd", "layer_norm"},
    {"stdlib/softmax.kdsl", "softmax", nullptr},
    {"stdlib/softmax.kdsl", "softmax_bwd", "softmax"},
    {"stdlib/softmax.kdsl", "log_softmax", nullptr},
    {"stdlib/softmax.kdsl", "log_softmax_bwd", "log_softmax"},
};

// The forward kernel's tensors after a reference run, by name, for the backward's inputs.
inline std::map<std::string, HostTensor> forward_tensors(const std::shared_ptr<const FrontEnd>& fe,
                                                         const ProblemSpec& bwd,
                                                         const char* forward) {
  std::map<std::string, HostTensor> out;
  if (!forward) return out;
  ProblemSpec fs = bwd;
  fs.kernel = forward;
  fs.seed = bwd.seed + 7777;
  Problem fp = make_problem(fe, fs);
  std::vector<HostTensor> done = run_reference(fp);
  Problem bp = make_problem(fe, bwd);
  for (size_t t = 0; t < fp.ir.tensors.size(); ++t) {
    for (const ir::TensorParam& tp : bp.ir.tensors) {
      if (tp.name == fp.ir.tensors[t].name && tp.role == ir::Role::in) out[tp.name] = done[t];
    }
  }
  return out;
}

}  // namespace kdsl::testing

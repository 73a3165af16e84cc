// Every stdlib normalization kernel on the GPU against the CPU reference interpreter, for f32,
// f16 and bf16, at row lengths that hit every schedule and tail (issue 3) and a few row counts.
#include <fmt/format.h>

#include "gpu_test_util.h"

namespace kdsl {
namespace {

// A backward kernel gets realistic inputs: the tensors its forward kernel (`forward`) takes
// and produces (x, w, rstd, y, ...) come from running the forward on the CPU reference, so the
// test exercises the conditioning real training sees (random "saved" tensors would make the
// gradients cancel catastrophically).
struct KernelCase {
  const char* file;
  const char* kernel;
  const char* forward;  // nullptr for forward kernels
};

constexpr KernelCase kKernels[] = {
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
std::map<std::string, HostTensor> forward_tensors(const std::shared_ptr<const FrontEnd>& fe,
                                                  const ProblemSpec& bwd, const char* forward) {
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

constexpr int64_t kRowLengths[] = {1, 7, 64, 760, 1000, 1024, 4096, 8192, 12288};
constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

class StdlibNormGpu : public ::testing::TestWithParam<KernelCase> {};

TEST_P(StdlibNormGpu, MatchesReferenceAtEveryLengthAndDtype) {
  KDSL_REQUIRE_GPU();
  const KernelCase& kc = GetParam();
  auto fe = testing::front_end(kc.file);
  uint64_t seed = 1;
  for (DType t : kDtypes) {
    for (int64_t n : kRowLengths) {
      // A row count that leaves a partial last wave of the persistent grid, and a single row.
      for (int64_t m : {int64_t{1}, n <= 1024 ? int64_t{3001} : int64_t{301}}) {
        ProblemSpec ps;
        ps.kernel = kc.kernel;
        ps.binding = {t};
        ps.shapes = {{"M", m}, {"N", n}};
        ps.seed = seed++;
        ps.inputs = forward_tensors(fe, ps, kc.forward);
        Problem p = make_problem(fe, ps);
        testing::expect_gpu_matches_reference(
            p, fmt::format("{} {} M={} N={}", kc.kernel, dtype_name(t), m, n));
        if (HasFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stdlib, StdlibNormGpu, ::testing::ValuesIn(kKernels),
                         [](const auto& info) { return std::string(info.param.kernel); });

}  // namespace
}  // namespace kdsl

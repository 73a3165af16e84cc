// The worked example of dsl/SPEC.md section 16 (examples/group_norm.kdsl) on the GPU against the
// reference interpreter, with the documented tolerances. Skips without a CUDA driver or device.
#include <fmt/format.h>

#include "gpu_test_util.h"

namespace kdsl {
namespace {

TEST(GroupNormGpu, ForwardMatchesReference) {
  KDSL_REQUIRE_GPU();
  auto fe = testing::front_end("examples/group_norm.kdsl");
  uint64_t seed = 1;
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (int64_t k : {int64_t{7}, int64_t{64}, int64_t{1000}, int64_t{4096}}) {
      ProblemSpec ps;
      ps.kernel = "group_norm";
      ps.binding = {t};
      ps.shapes = {{"B", 6}, {"G", 32}, {"K", k}};
      ps.seed = seed++;
      Problem p = make_problem(fe, ps);
      testing::expect_gpu_matches_reference(p, fmt::format("group_norm {} K={}", dtype_name(t), k));
      if (HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace kdsl

// Every stdlib normalization kernel on the GPU against the CPU reference interpreter, for f32,
// f16 and bf16, at row lengths that hit every schedule and tail (issue 3) and a few row counts.
#include <fmt/format.h>

#include "gpu_test_util.h"
#include "norm_cases.h"

namespace kdsl {
namespace {

using testing::forward_tensors;
using testing::KernelCase;
using testing::kKernels;

constexpr int64_t kRowLengths[] = {1, 7, 64, 760, 1000, 1024, 4096, 8192, 12288};
constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

class StdlibNormGpu : public ::testing::TestWithParam<KernelCase> {};

// The kernel of `kc` (a backward kernel with its forward's outputs as inputs) at M x N in dtype
// `t`, from fresh random inputs drawn with `seed`, on the GPU against the CPU reference.
void expect_matches_reference(const KernelCase& kc, const std::shared_ptr<const FrontEnd>& fe,
                              DType t, int64_t m, int64_t n, uint64_t seed) {
  ProblemSpec ps;
  ps.kernel = kc.kernel;
  ps.binding = {t};
  ps.shapes = {{"M", m}, {"N", n}};
  ps.seed = seed;
  ps.inputs = forward_tensors(fe, ps, kc.forward);
  Problem p = make_problem(fe, ps);
  testing::expect_gpu_matches_reference(
      p, fmt::format("{} {} M={} N={}", kc.kernel, dtype_name(t), m, n));
}

TEST_P(StdlibNormGpu, MatchesReferenceAtEveryLengthAndDtype) {
  KDSL_REQUIRE_GPU();
  const KernelCase& kc = GetParam();
  auto fe = testing::front_end(kc.file);
  uint64_t seed = 1;
  for (DType t : kDtypes) {
    for (int64_t n : kRowLengths) {
      // A row count that leaves a partial last wave of the persistent grid, and a single row.
      for (int64_t m : {int64_t{1}, n <= 1024 ? int64_t{3001} : int64_t{301}}) {
        expect_matches_reference(kc, fe, t, m, n, seed++);
        if (HasFailure()) return;
      }
    }
  }
}

// Rows of 32K elements: the backward kernels run on thread-block clusters (16-bit rows of
// N = 32768 with the column accumulators in registers, RMSNorm-like kernels on 8 CTAs of 512
// threads; N = 32776 and f32 on 4 CTAs with the accumulators in shared memory), the forward
// kernels one CTA per row or on a persistent grid; 37 rows, so a persistent grid's last wave is
// partial.
TEST_P(StdlibNormGpu, MatchesReferenceOnRowsOf32KElements) {
  KDSL_REQUIRE_GPU();
  const KernelCase& kc = GetParam();
  auto fe = testing::front_end(kc.file);
  uint64_t seed = 101;
  for (DType t : {DType::bf16, DType::f32}) {
    for (int64_t n : {int64_t{32768}, int64_t{32776}}) {
      expect_matches_reference(kc, fe, t, 37, n, seed++);
      if (HasFailure()) return;
    }
  }
}

// Long rows: softmax, log_softmax and RMSNorm on a cluster of 8 CTAs of 1024 threads that holds
// the row in registers (f32 N = 131072 to 262144, bf16 N = 262144; N = 131076 leaves the last
// chunk of the row partly filled), the other kernels streamed or on clusters of 4; 19 rows, so
// some clusters of the persistent grid take two rows and others one.
TEST_P(StdlibNormGpu, MatchesReferenceOnLongRows) {
  KDSL_REQUIRE_GPU();
  const KernelCase& kc = GetParam();
  auto fe = testing::front_end(kc.file);
  uint64_t seed = 201;
  for (auto [t, n] :
       {std::pair{DType::f32, int64_t{262144}}, std::pair{DType::f32, int64_t{131076}},
        std::pair{DType::bf16, int64_t{262144}}}) {
    expect_matches_reference(kc, fe, t, 19, n, seed++);
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Stdlib, StdlibNormGpu, ::testing::ValuesIn(kKernels),
                         [](const auto& info) { return std::string(info.param.kernel); });

}  // namespace
}  // namespace kdsl

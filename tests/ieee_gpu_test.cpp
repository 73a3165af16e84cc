// NaN and infinity inputs on the GPU (tests/ieee_cases.h): every checked output element has the
// class (NaN, +inf, -inf, zero, finite) documented in docs/reliability.md, the same as on the CPU
// reference interpreter (tests/bad_input_test.cpp), and the finite ones match it. Skips without a
// GPU.
#include "gpu_test_util.h"
#include "tests/ieee_cases.h"

namespace kdsl {
namespace {

class IeeeGpu : public ::testing::TestWithParam<testing::IeeeCase> {};

TEST_P(IeeeGpu, SameClassesAsTheReference) {
  KDSL_REQUIRE_GPU();
  const testing::IeeeCase& c = GetParam();
  Problem p = testing::ieee_problem(c, testing::front_end(c.file));
  std::vector<HostTensor> ref = run_reference(p);
  GpuRun gpu(p);
  gpu.launch();
  std::vector<HostTensor> got = p.tensors;
  gpu.download(got);
  EXPECT_EQ(testing::ieee_classes(p, got, c.output),
            c.gpu_expected.empty() ? c.expected : c.gpu_expected)
      << c.name;
  if (!c.gpu_expected.empty())
    return;  // f32 overflow: the float64 reference is finite, see ieee_cases.h
  EXPECT_EQ(testing::ieee_finite_mismatches(p, got, ref, c.output), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Cases, IeeeGpu, ::testing::ValuesIn(testing::ieee_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kdsl

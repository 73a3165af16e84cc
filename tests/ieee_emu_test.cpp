// NaN and infinity inputs (tests/ieee_cases.h) through the generated CUDA on the CPU emulation of
// cuda_emu.h: each checked output element has the class the GPU must give (ieee_gpu_test.cpp
// checks the same table on a GPU), so a prelude or codegen change that turns a NaN into a number
// shows without a GPU, and the finite elements match the float64 reference. The emulation
// computes in f32 as the kernels do, so cases whose f32 classes differ from the float64
// reference's use the GPU column (gpu_expected).
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "scan_emu_util.h"
#include "tests/ieee_cases.h"

namespace kdsl {
namespace {

class IeeeEmu : public ::testing::TestWithParam<testing::IeeeCase> {};

TEST_P(IeeeEmu, SameClassesAsTheGpuTable) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  const testing::IeeeCase& c = GetParam();
  Problem p = testing::ieee_problem(c, testing::front_end(c.file));
  std::vector<HostTensor> got = emu::run_emulated(p);
  EXPECT_EQ(testing::ieee_classes(p, got, c.output),
            c.gpu_expected.empty() ? c.expected : c.gpu_expected)
      << c.name;
  if (!c.gpu_expected.empty()) return;  // f32 overflow: the float64 reference is finite
  // The finite elements match the float64 reference, as on the GPU (ieee_gpu_test.cpp).
  EXPECT_EQ(testing::ieee_finite_mismatches(p, got, run_reference(p), c.output), "") << c.name;
}

// The softmax cases again where the sum of exp(x - max) runs online in the max's pass (streamed
// rows, online=1; OnlineSum in src/schedule.h): the same classes and values. With group=1 one
// thread takes the whole row in order, so its running maximum moves past a NaN, an infinity or
// -inf entries before the row's other values; with 8 threads the partial states merge.
TEST_P(IeeeEmu, OnlineSumsGiveTheSameClasses) {
  if (!emu::have_host_compiler()) GTEST_SKIP() << "skipped: no host C++ compiler (g++)";
  const testing::IeeeCase& c = GetParam();
  if (std::string(c.file) != "stdlib/softmax.kdsl" || std::string(c.kernel).ends_with("_bwd")) {
    GTEST_SKIP() << "not a forward softmax case";
  }
  Problem p = testing::ieee_problem(c, testing::front_end(c.file));
  for (const char* text : {"cache_rows=0,online=1", "cache_rows=0,group=1,online=1",
                           "cache_rows=0,group=8,online=1"}) {
    const ScheduleHint hint = ScheduleHint::parse(text);
    ASSERT_NE(generate(p.ir, p.spec, DeviceTarget{}, hint).source.find("kdsl_op_sumexp<"),
              std::string::npos)
        << c.name << " " << text << ": not online";
    std::vector<HostTensor> got = emu::run_emulated(p, 8, 4, hint);
    EXPECT_EQ(testing::ieee_classes(p, got, c.output),
              c.gpu_expected.empty() ? c.expected : c.gpu_expected)
        << c.name << " " << text;
    if (c.gpu_expected.empty()) {
      EXPECT_EQ(testing::ieee_finite_mismatches(p, got, run_reference(p), c.output), "")
          << c.name << " " << text;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, IeeeEmu, ::testing::ValuesIn(testing::ieee_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kdsl

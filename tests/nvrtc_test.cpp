#include "src/nvrtc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "kdsl/error.h"

namespace kdsl {
namespace {

constexpr const char* kScaleKernel = R"(
extern "C" __global__ void kdsl_test_scale(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
)";

constexpr const char* kBrokenKernel = R"(
extern "C" __global__ void kdsl_test_broken(float* y) {
  int i = threadIdx.x;
  y[i] = undeclared_name * 2.0f;
}
)";

TEST(Nvrtc, CompilesToAnElfCubinWithoutAGpu) {
  Cubin c = nvrtc_compile(kScaleKernel, "kdsl_test_scale", "sm_90", {});
  ASSERT_GT(c.data.size(), 4u);
  EXPECT_EQ(c.data.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_GT(c.compile_ms, 0.0);
  // The kernel symbol is in the image.
  EXPECT_NE(c.data.find("kdsl_test_scale"), std::string::npos);
}

TEST(Nvrtc, ArchSuffixesCompile) {
  Cubin c = nvrtc_compile(kScaleKernel, "kdsl_test_scale", "sm_90a", {"-lineinfo"});
  EXPECT_EQ(c.data.substr(0, 4),
            "\x7f"
            "ELF");
}

TEST(Nvrtc, PtxForTheMatchingVirtualArchitecture) {
  std::string ptx = nvrtc_compile_ptx(kScaleKernel, "kdsl_test_scale", "sm_90a", {"-lineinfo"});
  EXPECT_NE(ptx.find(".target sm_90a"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find(".entry kdsl_test_scale("), std::string::npos) << ptx;
  EXPECT_EQ(ptx.find('\0'), std::string::npos);
  EXPECT_THROW(nvrtc_compile_ptx(kScaleKernel, "kdsl_test_scale", "sm_1", {}), CompileError);
  try {
    nvrtc_compile_ptx(kBrokenKernel, "kdsl_test_broken", "sm_80", {});
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("for compute_80"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("undeclared_name"), std::string::npos) << e.what();
  }
}

TEST(Nvrtc, SyntaxErrorThrowsWithLogArchOptionsNameAndSource) {
  try {
    nvrtc_compile(kBrokenKernel, "kdsl_test_broken", "sm_90", {"-DKDSL_MARK=1"});
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("kdsl_test_broken"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sm_90"), std::string::npos) << msg;
    EXPECT_NE(msg.find("-DKDSL_MARK=1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--gpu-architecture=sm_90"), std::string::npos) << msg;
    EXPECT_NE(msg.find("identifier \"undeclared_name\" is undefined"), std::string::npos) << msg;
    // The offending source line is quoted and marked.
    EXPECT_NE(msg.find(">     4 |   y[i] = undeclared_name * 2.0f;"), std::string::npos) << msg;
  }
}

TEST(Nvrtc, SameFailureGivesSameMessage) {
  auto message = [] {
    try {
      nvrtc_compile(kBrokenKernel, "kdsl_test_broken", "sm_90", {});
    } catch (const CompileError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string first = message();
  EXPECT_NE(first, "no error");
  EXPECT_EQ(first, message());
}

TEST(Nvrtc, UnsupportedArchIsACompileErrorListingTheSupportedOnes) {
  try {
    nvrtc_compile(kScaleKernel, "kdsl_test_scale", "sm_35", {});
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'sm_35'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sm_90"), std::string::npos) << msg;
  }
}

TEST(Nvrtc, ConcurrentCompilesFromSeveralThreads) {
  std::vector<std::string> cubins(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < cubins.size(); ++i) {
    threads.emplace_back(
        [&, i] { cubins[i] = nvrtc_compile(kScaleKernel, "kdsl_test_scale", "sm_90", {}).data; });
  }
  for (auto& t : threads) t.join();
  for (const auto& c : cubins) {
    EXPECT_EQ(c.substr(0, 4),
              "\x7f"
              "ELF");
    EXPECT_EQ(c, cubins[0]);  // NVRTC output is deterministic for the same input
  }
}

TEST(Nvrtc, VersionAndArchitectures) {
  std::string v = nvrtc_version();
  EXPECT_NE(v.find('.'), std::string::npos);
  const auto& archs = nvrtc_supported_archs();
  EXPECT_NE(std::find(archs.begin(), archs.end(), "sm_90"), archs.end());
  EXPECT_TRUE(nvrtc_supports_arch("sm_90"));
  EXPECT_TRUE(nvrtc_supports_arch("sm_90a"));
  EXPECT_TRUE(nvrtc_supports_arch("sm_100f"));
  EXPECT_FALSE(nvrtc_supports_arch("sm_80a"));  // 'a' exists from sm_90
  EXPECT_FALSE(nvrtc_supports_arch("sm_90f"));  // 'f' exists from sm_100
  EXPECT_FALSE(nvrtc_supports_arch("sm_35"));
  EXPECT_FALSE(nvrtc_supports_arch("sm_090"));
  EXPECT_FALSE(nvrtc_supports_arch("compute_90"));
  EXPECT_FALSE(nvrtc_supports_arch("sm_"));
  EXPECT_FALSE(nvrtc_supports_arch(""));
}

TEST(Nvrtc, OptionsStartWithArchAndStandard) {
  auto opts = nvrtc_options("sm_90a", {"-lineinfo"});
  ASSERT_EQ(opts.size(), 3u);
  EXPECT_EQ(opts[0], "--gpu-architecture=sm_90a");
  EXPECT_EQ(opts[1], "-std=c++20");
  EXPECT_EQ(opts[2], "-lineinfo");
}

}  // namespace
}  // namespace kdsl

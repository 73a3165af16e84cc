// Inputs that once broke the front end, through the fuzzer's own function
// (fuzz/front_end_input.h): every file of tests/fuzz_regressions/, and pathological inputs
// generated here (deep brackets, long lines, deep blocks, long chains). Each must finish quickly
// with a diagnostic or a generated kernel; a finding aborts this test binary with its message.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/front_end_input.h"
#include "kdsl/error.h"
#include "kdsl/kdsl.h"

namespace kdsl {
namespace {

const std::string regression_dir = std::string(KDSL_TEST_DIR) + "/fuzz_regressions";

// Generous: each input takes milliseconds, a sanitized build on a loaded machine ten times more.
constexpr double kSecondsPerInput = 20;

double run_timed(const std::vector<uint8_t>& input) {
  auto t0 = std::chrono::steady_clock::now();
  fuzz::run_front_end_input(input.data(), input.size());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::string> regression_files() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(regression_dir)) {
    if (entry.is_regular_file() && entry.path().extension() != ".md") {
      files.push_back(entry.path().filename().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

class FuzzRegression : public testing::TestWithParam<std::string> {};

TEST_P(FuzzRegression, RunsThroughTheFrontEnd) {
  std::ifstream in(regression_dir + "/" + GetParam(), std::ios::binary);
  ASSERT_TRUE(in) << GetParam();
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  EXPECT_LT(run_timed(bytes), kSecondsPerInput) << GetParam();
}

std::string test_name(const testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(0, info.param.rfind('.'));
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Files, FuzzRegression, testing::ValuesIn(regression_files()), test_name);

// ---- generated pathological inputs ---------------------------------------------------------

std::string repeat(const std::string& s, int n) {
  std::string out;
  out.reserve(s.size() * n);
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string join(const std::string& item, const std::string& sep, int n) {
  std::string out = item;
  for (int i = 1; i < n; ++i) out += sep + item;
  return out;
}

constexpr const char* kKernelHead =
    "@kernel\n"
    "def k(x: Tensor[f32, (M, N)], *, y: Out[f32, (M, N)]):\n"
    "    for m in parallel(M):\n";

struct Pathological {
  const char* name;
  std::string source;
};

std::vector<Pathological> pathological_inputs() {
  return {
      {"brackets_10000", "X = " + repeat("(", 10000) + "1" + repeat(")", 10000) + "\n"},
      {"brackets_10000_unclosed", "X = " + repeat("(", 10000) + "\n"},
      {"mixed_brackets_10000", "X = " + repeat("([{", 3400) + "\n"},
      {"subscripts_10000", "X = a" + repeat("[0]", 10000) + "\n"},
      {"calls_10000", "X = f" + repeat("(1)", 10000) + "\n"},
      {"sum_of_20000_terms", "X = " + join("1", "+", 20000) + "\n"},
      {"unary_minus_20000", "X = " + repeat("-", 20000) + "1\n"},
      {"not_10000", "X = " + repeat("not ", 10000) + "True\n"},
      {"power_chain_10000", "X = " + join("2", "**", 10000) + "\n"},
      {"comparison_chain_5000", "X = " + join("2", "<", 5000) + "\n"},
      {"tuple_of_20000", "X = (" + join("1", ",", 20000) + ")\n"},
      {"line_of_200000_digits", "X = " + repeat("1", 200000) + "\n"},
      {"name_of_200000_chars", repeat("X", 200000) + " = 1\n"},
      {"string_of_200000_chars", "X = '" + repeat("a", 200000) + "'\n"},
      {"blocks_500_deep",
       [] {
         std::string s;
         for (int i = 0; i < 500; ++i) s += std::string(i, ' ') + "if x:\n";
         return s;
       }()},
      {"lines_20000", repeat("X = 1\n", 20000)},
      {"nul_and_high_bytes", std::string("X = 1\0\xff\xfe\x80\n", 10) + "def \xc3(\n"},
      {"kernel_sum_of_3000_views",
       kKernelHead + ("        y[m, :] = " + join("x[m, :]", " + ", 3000)) + "\n"},
      {"kernel_150_nested_calls",
       kKernelHead + ("        y[m, :] = " + repeat("exp(", 150) + "x[m, :]" + repeat(")", 150)) +
           "\n"},
      {"kernel_2000_statements",
       [] {
         std::string s = std::string(kKernelHead) + "        a0 = x[m, :]\n";
         for (int i = 0; i < 2000; ++i) {
           s += "        a" + std::to_string(i + 1) + " = a" + std::to_string(i) + " * 0.5\n";
         }
         return s + "        y[m, :] = a2000\n";
       }()},
  };
}

TEST(FuzzPathological, EachFinishesQuickly) {
  for (const Pathological& p : pathological_inputs()) {
    for (uint8_t selector : {0x0a, 0x3f}) {
      std::vector<uint8_t> input = {selector, 0};
      input.insert(input.end(), p.source.begin(), p.source.end());
      EXPECT_LT(run_timed(input), kSecondsPerInput) << p.name;
    }
  }
}

TEST(FuzzPathological, BracketsPastTheLimitAreOneDiagnostic) {
  try {
    Module::from_source("X = " + repeat("(", 10000) + "1" + repeat(")", 10000) + "\n", "deep.kdsl");
    FAIL() << "no error";
  } catch (const SourceError& e) {
    EXPECT_NE(std::string(e.what()).find("deep.kdsl:1:205: error: expression nested too deeply "
                                         "(limit 200)"),
              std::string::npos)
        << e.what();
  }
}

TEST(FuzzPathological, ExponentialHelperInliningIsAnError) {
  std::string source;
  for (int i = 0; i < 40; ++i) {
    source += "def h" + std::to_string(i) + "(a):\n    return h" + std::to_string(i + 1) +
              "(a) + h" + std::to_string(i + 1) + "(a)\n\n";
  }
  source += "def h40(a):\n    return a\n\n" + std::string(kKernelHead) +
            "        y[m, :] = h0(x[m, :])\n";
  try {
    Module::from_source(source, "helpers.kdsl");
    FAIL() << "no error";
  } catch (const SourceError& e) {
    EXPECT_NE(std::string(e.what()).find("error: helper calls expand to more than 10000 inlined "
                                         "calls in this kernel"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kdsl

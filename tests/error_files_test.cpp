// Runs every malformed program in tests/error/. Each file starts with comment lines
//   # expect: LINE:COL: error: MESSAGE
// (LINE counts these lines too), and the diagnostics of the file must be exactly those: the same
// set, nothing missing, nothing more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dsl/parser.h"

namespace kdsl {
namespace {

// ---------------------------------------------------------------------------------------------
// The front end under test. This is the one place to change when more passes (sema) join it.

const char* severity_word(Severity s) {
  switch (s) {
    case Severity::error:
      return "error";
    case Severity::warning:
      return "warning";
    case Severity::note:
      return "note";
  }
  return "error";
}

/// Every diagnostic the front end reports for the file at `path`, as "LINE:COL: error: MESSAGE".
std::vector<std::string> diagnose(const std::string& path) {
  Diagnostics diags;
  parse_module(SourceFile::read(path), diags);
  std::vector<std::string> out;
  for (const Diagnostic& d : diags.all()) {
    out.push_back(std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " +
                  severity_word(d.severity) + ": " + d.message);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

const std::string error_dir = std::string(KDSL_TEST_DIR) + "/error";

/// The .kdsl files of tests/error, sorted.
std::vector<std::string> error_files() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(error_dir)) {
    if (entry.path().extension() == ".kdsl") files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

/// The "# expect: " lines of the file, without that prefix.
std::vector<std::string> expectations(const std::string& path) {
  const std::string prefix = "# expect: ";
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(prefix)) out.push_back(line.substr(prefix.size()));
  }
  return out;
}

class ErrorFile : public testing::TestWithParam<std::string> {};

TEST_P(ErrorFile, ReportsExactlyTheExpectedDiagnostics) {
  const std::string path = error_dir + "/" + GetParam();
  std::vector<std::string> expected = expectations(path);
  ASSERT_FALSE(expected.empty()) << path << " has no '# expect:' line";
  std::vector<std::string> actual = diagnose(path);
  std::sort(expected.begin(), expected.end());
  std::sort(actual.begin(), actual.end());
  EXPECT_EQ(actual, expected) << path;
}

std::string test_name(const testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(0, info.param.rfind('.'));
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Files, ErrorFile, testing::ValuesIn(error_files()), test_name);

TEST(ErrorFiles, FolderHoldsTheMalformedPrograms) {
  EXPECT_GE(error_files().size(), 20u);
}

}  // namespace
}  // namespace kdsl

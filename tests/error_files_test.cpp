// Runs every malformed program in tests/error/ through the front end (parse, then sema when the
// parse is clean). Each file starts with comment lines
//   # expect: LINE:COL: error: MESSAGE
//   # expect: LINE:COL: hint: HINT
//   # expect: LINE:COL: note: NOTE   (e.g. the call that inlined a helper with errors)
// (LINE counts these lines too), and the diagnostics of the file must be exactly those: the same
// set, nothing missing, nothing more. A file that lists any hint must list every hint of its
// diagnostics; a file that lists none is not checked for hints. Files named sema_*.kdsl parse
// cleanly and fail in sema.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dsl/parser.h"
#include "dsl/sema.h"

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

/// Every diagnostic the front end reports for the file at `path`, as "LINE:COL: error: MESSAGE",
/// each followed by "LINE:COL: hint: HINT" when it has a hint and `hints` is set.
std::vector<std::string> diagnose(const std::string& path, bool hints) {
  Diagnostics diags;
  auto module = parse_module(SourceFile::read(path), diags);
  if (!diags.has_errors()) check_module(*module, diags);
  std::vector<std::string> out;
  for (const Diagnostic& d : diags.all()) {
    std::string where = std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": ";
    out.push_back(where + severity_word(d.severity) + ": " + d.message);
    if (hints && !d.hint.empty()) out.push_back(where + "hint: " + d.hint);
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
  bool hints = std::any_of(expected.begin(), expected.end(), [](const std::string& e) {
    return e.find(": hint: ") != std::string::npos;
  });
  std::vector<std::string> actual = diagnose(path, hints);
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
  auto files = error_files();
  auto sema = std::count_if(files.begin(), files.end(),
                            [](const std::string& f) { return f.starts_with("sema_"); });
  EXPECT_GE(sema, 30);
}

// The semantic error files must be well-formed programs: no syntax error in them.
TEST(ErrorFiles, SemaFilesParseCleanly) {
  for (const std::string& f : error_files()) {
    if (!f.starts_with("sema_")) continue;
    Diagnostics diags;
    parse_module(SourceFile::read(error_dir + "/" + f), diags);
    EXPECT_FALSE(diags.has_errors()) << f << "\n" << diags.render();
  }
}

}  // namespace
}  // namespace kdsl

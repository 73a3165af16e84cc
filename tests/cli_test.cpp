// Drives the `kdsl` binary through every subcommand (no GPU needed; the GPU runs are in
// cli_gpu_test.cpp): output text, files and exit codes (docs/cli.md).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "cli_test_util.h"
#include "fifo_writer.h"
#include "kdsl/error.h"
#include "src/driver.h"
#include "src/host_tensor.h"
#include "src/npy.h"

namespace kdsl::testing {
namespace {

namespace fs = std::filesystem;

bool have_gpu() {
  return driver_or_null() && device_count() > 0;
}

void write_file(const std::string& path, const std::string& text, bool executable = false) {
  std::ofstream(path) << text;
  if (executable) fs::permissions(path, fs::perms::owner_all);
}

HostTensor tensor(DType t, std::vector<int64_t> shape, const std::vector<double>& values) {
  HostTensor h(t, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) h.set(static_cast<int64_t>(i), values[i]);
  return h;
}

const std::string kRms = "stdlib/rms_norm.kdsl";
const std::string kColSum = "tests/data/col_sum.kdsl";

// ---------------------------------------------------------------------------------------------
// Help, usage

TEST_F(CliTest, EverySubcommandHasHelpWithAnExample) {
  for (std::vector<std::string> cmd : {std::vector<std::string>{},
                                       {"check"},
                                       {"list"},
                                       {"emit"},
                                       {"compile"},
                                       {"run"},
                                       {"bench"},
                                       {"cache"},
                                       {"cache", "stats"},
                                       {"cache", "list"},
                                       {"cache", "clear"},
                                       {"cache", "prune"}}) {
    cmd.push_back("--help");
    CliResult r = kdsl(cmd);
    EXPECT_EQ(r.code, 0) << show(r);
    EXPECT_NE(r.out.find("Example"), std::string::npos) << cmd[0] << "\n" << show(r);
    // --schedule shows what it takes, not CLI11's type name joined to its validator's.
    EXPECT_EQ(r.out.find("TEXT:KEY"), std::string::npos) << cmd[0] << "\n" << show(r);
  }
  CliResult emit = kdsl({"emit", "--help"});
  EXPECT_NE(emit.out.find("--schedule KEY=INTEGER,..."), std::string::npos) << show(emit);
  CliResult top = kdsl({"--help"});
  EXPECT_NE(top.out.find("Exit codes: 0 ok, 1 user error, 2 usage error, 3 verification failed, "
                         "4 no GPU"),
            std::string::npos);
}

// The top help says what each -v level logs. -vvv is accepted and sets the trace level, at which
// kdsl logs nothing, so it prints what -vv does (the help described -v and -vv only).
TEST_F(CliTest, HelpSaysWhatEachVerbosityLogs) {
  CliResult top = kdsl({"--help"});
  EXPECT_NE(top.out.find("-v compile and cache decisions with times, -vv debug (NVRTC warnings "
                         "too), -vvv the same as -vv (kdsl logs nothing at trace level)"),
            std::string::npos)
      << top.out;
  // What -vv and -vvv print differs only in the times.
  auto logged = [&](const std::string& flag) {
    CliResult r =
        kdsl({flag, "compile", kColSum, "--dtype", "f32", "--shape", "N=8", "--arch", "sm_90"},
             {{"KDSL_CACHE", "off"}});
    EXPECT_EQ(r.code, 0) << show(r);
    return std::regex_replace(r.err, std::regex("[0-9][0-9.]*"), "#");
  };
  const std::string debug = logged("-vv");
  EXPECT_NE(debug.find("kdsl: debug: "), std::string::npos) << debug;
  EXPECT_EQ(logged("-vvv"), debug);
}

TEST_F(CliTest, MissingOrUnknownCommandIsAUsageError) {
  CliResult none = kdsl({});
  EXPECT_EQ(none.code, 2);
  EXPECT_EQ(none.err,
            "kdsl: usage error: a command is required (check, list, emit, compile, run, bench, "
            "tune, cache) (see kdsl --help)\n");
  CliResult bogus = kdsl({"-v", "frobnicate"});
  EXPECT_EQ(bogus.code, 2);
  EXPECT_NE(bogus.err.find("unknown command 'frobnicate'"), std::string::npos) << show(bogus);
  CliResult sub = kdsl({"cache", "wipe"});
  EXPECT_EQ(sub.code, 2);
  EXPECT_EQ(sub.err,
            "kdsl cache: usage error: unknown command 'wipe' (commands: stats, list, clear, "
            "prune) (see kdsl cache --help)\n");
}

// ---------------------------------------------------------------------------------------------
// check, list

TEST_F(CliTest, CheckCleanFiles) {
  CliResult r = kdsl({"check", kRms, kColSum});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_EQ(r.out, kRms + ": ok (4 kernels)\n" + kColSum + ": ok (1 kernel)\n");
  EXPECT_EQ(r.err, "");
  // -v logs the front end's time per file, as docs/cli.md says (check logged nothing).
  CliResult v = kdsl({"-v", "check", kRms});
  EXPECT_EQ(v.code, 0) << show(v);
  EXPECT_NE(v.err.find("kdsl: info: " + kRms + ": parsed and checked in "), std::string::npos)
      << show(v);
}

TEST_F(CliTest, CheckReportsErrorsWithPositionAndCaretAndGoesOn) {
  std::string bad = path("bad.kdsl");
  write_file(bad,
             "@kernel\n"
             "def copy[T: (f32, bf16)](x: Tensor[T, (M, N)], *, y: Out[T, (M, N)]):\n"
             "    for m in parallel(M)\n"
             "        y[m, :] = x[m, :]\n");
  CliResult r = kdsl({"check", bad, "missing.kdsl", kColSum});
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_NE(r.err.find(bad + ":3:25: error: expected ':' at the end of the 'for' line\n"
                             "    for m in parallel(M)\n"
                             "                        ^\n"),
            std::string::npos)
      << show(r);
  EXPECT_NE(r.err.find(bad + ": 1 error\n"), std::string::npos);
  EXPECT_NE(r.err.find("kdsl: error: cannot open 'missing.kdsl': No such file or directory\n"),
            std::string::npos);
  EXPECT_EQ(r.out, kColSum + ": ok (1 kernel)\n");  // the files after the bad ones are checked
}

TEST_F(CliTest, CheckReportsTypeErrors) {
  std::string bad = path("unknown_name.kdsl");
  write_file(bad,
             "@kernel\n"
             "def scale[T: (f32,)](x: Tensor[T, (M, N)], *, y: Out[T, (M, N)]):\n"
             "    for m in parallel(M):\n"
             "        y[m, :] = x[m, :] * factor\n");
  CliResult r = kdsl({"check", bad});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(bad + ":4:29: error: unknown name 'factor'"), std::string::npos) << show(r);
  // A run of a file with errors prints the same diagnostics and exits 1.
  CliResult run =
      kdsl({"run", bad, "-k", "scale", "--dtype", "f32", "--shape", "M=1,N=2", "--device", "cpu"});
  EXPECT_EQ(run.code, 1);
  EXPECT_NE(run.err.find("unknown name 'factor'"), std::string::npos) << show(run);
}

// A .kdsl path that is not a regular file is refused before it is opened, naming what it is:
// `kdsl check` of a FIFO without a writer blocked for good (found by a new-user test). Every
// command loads its file the same way; a link to a regular file is still read.
TEST_F(CliTest, FilesThatAreNotRegularFilesAreRefusedBeforeOpening) {
  FifoWriter fifo(path("pipe.kdsl"));
  ASSERT_TRUE(fifo.ok());
  const std::string refused = "kdsl: error: cannot read '" + fifo.path() +
                              "': it is a FIFO (named pipe), not a regular file\n";
  CliResult check = kdsl({"check", fifo.path(), kColSum});
  EXPECT_EQ(check.code, 1) << show(check);
  EXPECT_EQ(check.err, refused);
  EXPECT_EQ(check.out, kColSum + ": ok (1 kernel)\n");  // the files after it are checked
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"list", fifo.path()},
        {"emit", fifo.path(), "-k", "col_sum", "--dtype", "f32", "--shape", "N=16"},
        {"run", fifo.path(), "-k", "col_sum", "--dtype", "f32", "--shape", "M=2,N=16", "--device",
         "cpu"},
        {"compile", fifo.path(), "--shape", "N=16", "--arch", "sm_90"}}) {
    CliResult r = kdsl(cmd);
    EXPECT_EQ(r.code, 1) << cmd[0] << show(r);
    EXPECT_EQ(r.err, refused) << cmd[0];
  }
  CliResult dir = kdsl({"check", tmp().string()});
  EXPECT_EQ(dir.code, 1) << show(dir);
  EXPECT_EQ(dir.err, "kdsl: error: cannot read '" + tmp().string() +
                         "': it is a directory, not a .kdsl file\n");
  fs::create_symlink(src(kColSum), path("link.kdsl"));
  CliResult link = kdsl({"check", path("link.kdsl")});
  EXPECT_EQ(link.code, 0) << show(link);
  EXPECT_EQ(link.out, path("link.kdsl") + ": ok (1 kernel)\n");
}

TEST_F(CliTest, ListShowsSignaturesDocsAndSpecializedSymbols) {
  CliResult r = kdsl({"list", kRms});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("rms_norm[T: f32 | f16 | bf16](x: Tensor[T, (M, N)], w: Tensor[T, (N,)], "
                       "eps: f32 = 1e-06, *, y: Out[T, (M, N)], rstd: Out[f32, (M,)])\n"
                       "    RMSNorm forward: y = x * r * w with r = 1 / sqrt(mean(x^2) + eps), "
                       "per row.\n"
                       "    specialized (compile-time): N; run-time: M\n"),
            std::string::npos)
      << show(r);
  CliResult j = kdsl({"list", kColSum, "--json"});
  ASSERT_EQ(j.code, 0) << show(j);
  auto doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc.size(), 1u);
  EXPECT_EQ(doc[0]["name"], "col_sum");
  EXPECT_EQ(doc[0]["generics"][0]["dtypes"], nlohmann::json({"f32", "bf16"}));
  EXPECT_EQ(doc[0]["params"][1]["kind"], "InOut");
  EXPECT_EQ(doc[0]["symbols"][1], nlohmann::json({{"name", "N"}, {"specialized", true}}));
}

// Defaults are listed as the kernel spells them, so a signature pasted back checks: a bool as
// True or False (it read 1 and 0, which a bool default refuses) and an integer in full (an i64
// read 4.611686018427388e+18, which an integer default refuses); --json gives a bool and integers
// (found by a new-user test).
TEST_F(CliTest, ListShowsBoolAndIntegerDefaultsAsWritten) {
  write_file(path("defaults.kdsl"),
             "@kernel\n"
             "def d(x: Tensor[i64, (M, N)], k: i64 = 4611686018427387904, j: i32 = -7,\n"
             "      on: bool = True, off: bool = False, e: f32 = 1e-6, *, y: Out[i64, (M, N)]):\n"
             "    for m in parallel(M):\n"
             "        y[m, :] = where(on and not off, x[m, :] + k, x[m, :] + i64(j))\n");
  CliResult r = kdsl({"list", path("defaults.kdsl")});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("k: i64 = 4611686018427387904, j: i32 = -7, on: bool = True, off: bool = "
                       "False, e: f32 = 1e-06, *"),
            std::string::npos)
      << r.out;
  CliResult j = kdsl({"list", path("defaults.kdsl"), "--json"});
  ASSERT_EQ(j.code, 0) << show(j);
  const auto params = nlohmann::json::parse(j.out).at(0).at("params");
  EXPECT_EQ(params.at(1).at("default"), nlohmann::json(int64_t{4611686018427387904})) << j.out;
  EXPECT_TRUE(params.at(1).at("default").is_number_integer()) << j.out;
  EXPECT_EQ(params.at(2).at("default"), nlohmann::json(-7)) << j.out;
  EXPECT_EQ(params.at(3).at("default"), nlohmann::json(true)) << j.out;
  EXPECT_EQ(params.at(4).at("default"), nlohmann::json(false)) << j.out;
  EXPECT_TRUE(params.at(5).at("default").is_number_float()) << j.out;
}

// A file without kernels lists nothing, and a note says so rather than leaving the output blank.
// What a file or the command line gives is echoed without driving the terminal, and --json
// survives bytes that are not UTF-8 (replaced by U+FFFD). A docstring cannot hold such bytes (a
// .kdsl file is UTF-8 text), so those come here through a file name.
TEST_F(CliTest, EchoedTextIsTerminalSafeAndJsonSurvivesBadUtf8) {
  write_file(path("esc.kdsl"),
             "@kernel\n"
             "def k(x: Tensor[f32, (M, N)], *, y: Out[f32, (M, N)]):\n"
             "    \"\"\"Doubles x.\x1b]0;title\x07\x1b[2J\"\"\"\n"
             "    for m in parallel(M):\n"
             "        y[m, :] = x[m, :] * 2.0\n");
  CliResult r = kdsl({"list", path("esc.kdsl")});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("Doubles x.\\x1b]0;title\\x07\\x1b[2J"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  CliResult j = kdsl({"list", path("esc.kdsl"), "--json"});
  EXPECT_EQ(j.code, 0) << show(j);
  EXPECT_EQ(nlohmann::json::parse(j.out).at(0).at("doc"), "Doubles x.\x1b]0;title\x07\x1b[2J");
  const std::string bad_name = path("r\xff.kdsl");
  fs::copy_file(src(kRms), bad_name);
  CliResult b = kdsl({"run", bad_name, "-k", "rms_norm", "--device", "cpu", "--dtype", "f32",
                      "--shape", "M=4,N=8", "--json"});
  EXPECT_EQ(b.code, 0) << show(b);
  EXPECT_EQ(nlohmann::json::parse(b.out).at("file"), path("r\xef\xbf\xbd.kdsl"));
  CliResult missing = kdsl({"check", path("no\x1b[2Jfile.kdsl")});
  EXPECT_EQ(missing.code, 1) << show(missing);
  EXPECT_NE(missing.err.find("no\\x1b[2Jfile.kdsl"), std::string::npos) << missing.err;
  // A clean file's name in `check`'s "FILE: ok" line and in `list`'s note on a file without
  // kernels (both printed it as written; found by a new-user test).
  const std::string title_name = path("t\x1b]0;title\x07.kdsl");
  write_file(title_name, "X = 1\n");
  CliResult ok = kdsl({"check", title_name});
  EXPECT_EQ(ok.code, 0) << show(ok);
  EXPECT_NE(ok.out.find("t\\x1b]0;title\\x07.kdsl: ok (0 kernels)"), std::string::npos) << ok.out;
  EXPECT_EQ(ok.out.find('\x1b'), std::string::npos) << ok.out;
  CliResult none = kdsl({"list", title_name});
  EXPECT_EQ(none.code, 0) << show(none);
  EXPECT_NE(none.err.find("t\\x1b]0;title\\x07.kdsl defines no kernels"), std::string::npos)
      << none.err;
  EXPECT_EQ(none.err.find('\x1b'), std::string::npos) << none.err;
  // A newline in a file name is escaped too: it would start a line of its own.
  const std::string nl_name = path("a\nb.kdsl");
  write_file(nl_name, "X = 1\n");
  CliResult nl = kdsl({"check", nl_name});
  EXPECT_EQ(nl.code, 0) << show(nl);
  EXPECT_EQ(nl.out, path("a\\x0ab.kdsl") + ": ok (0 kernels)\n") << nl.out;
}

// A c64 output's summary is of its elements' moduli, and says so; it was of the real parts alone,
// unlabelled (found by a new-user test). |1.5 + 3i| = 3.3541.
TEST_F(CliTest, ComplexOutputsAreSummarizedByModulus) {
  const std::string f = path("cz.kdsl");
  write_file(f,
             "@kernel\ndef k(x: Tensor[f32, (M, N)], *, y: Out[c64, (M, N)]):\n"
             "    for m in parallel(M):\n"
             "        y[m, :] = c64(x[m, :], 2.0 * x[m, :])\n");
  CliResult r =
      kdsl({"run", f, "-k", "k", "--device", "cpu", "--shape", "M=1,N=3", "--in", "x=const:1.5"});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("y: c64 (1, 3): |z| min 3.3541, max 3.3541, mean 3.3541\n"),
            std::string::npos)
      << show(r);
  CliResult j = kdsl({"run", f, "-k", "k", "--device", "cpu", "--shape", "M=1,N=3", "--in",
                      "x=const:1.5", "--json"});
  ASSERT_EQ(j.code, 0) << show(j);
  const auto y = nlohmann::json::parse(j.out)["outputs"]["y"];
  EXPECT_EQ(y["of"], "modulus") << j.out;
  EXPECT_NEAR(y["max"].get<double>(), std::sqrt(1.5 * 1.5 + 3.0 * 3.0), 1e-6) << j.out;
  // An element with a NaN part is NaN, though |inf + NaN i| would be inf (hypot).
  const std::string g = path("cnan.kdsl");
  write_file(g,
             "@kernel\ndef k(x: Tensor[f32, (M, N)], *, y: Out[c64, (M, N)]):\n"
             "    for m in parallel(M):\n"
             "        y[m, :] = c64(x[m, :], x[m, :] - x[m, :])\n");
  CliResult n = kdsl({"run", g, "-k", "k", "--device", "cpu", "--shape", "M=1,N=2", "--in",
                      "x=const:inf", "--json"});
  ASSERT_EQ(n.code, 0) << show(n);
  const auto yn = nlohmann::json::parse(n.out)["outputs"]["y"];
  EXPECT_EQ(yn["nan"], 2) << n.out;
  EXPECT_EQ(yn["inf"], 0) << n.out;
}

// --out naming the file of another tensor's --in would lose that input: refused before the run
// (found by a new-user test: it was overwritten silently); an InOut tensor updates its own file.
TEST_F(CliTest, OutputOverAnInputFileIsRefusedButInOutUpdatesItsOwn) {
  const std::string f = path("acc.kdsl");
  write_file(f,
             "@kernel\ndef acc(x: Tensor[f32, (M, N)], *, y: InOut[f32, (M, N)], "
             "z: Out[f32, (M, N)]):\n"
             "    for m in parallel(M):\n"
             "        y[m, :] += x[m, :]\n"
             "        z[m, :] = x[m, :]\n");
  const std::string x = path("x.npy"), y = path("y.npy");
  ASSERT_EQ(kdsl({"run", f, "-k", "acc", "--device", "cpu", "--shape", "M=2,N=4", "--in",
                  "x=const:1.5", "--in", "y=const:2", "--out", "z=" + x, "--out", "y=" + y})
                .code,
            0);
  const std::string x_before = read_text(x), y_before = read_text(y);
  CliResult r = kdsl({"run", f, "-k", "acc", "--device", "cpu", "--in", "x=" + x, "--in", "y=" + y,
                      "--out", "z=" + path(".") + "/x.npy"});
  EXPECT_EQ(r.code, 2) << show(r);
  EXPECT_NE(r.err.find("would overwrite the input file of --in x=" + x), std::string::npos)
      << show(r);
  EXPECT_EQ(read_text(x), x_before);
  CliResult inout = kdsl({"run", f, "-k", "acc", "--device", "cpu", "--in", "x=" + x, "--in",
                          "y=" + y, "--out", "y=" + y, "--json"});
  EXPECT_EQ(inout.code, 0) << show(inout);
  EXPECT_NE(read_text(y), y_before);  // 3.5 (the first run: 2 + 1.5) + 1.5
  EXPECT_EQ(nlohmann::json::parse(inout.out)["outputs"]["y"]["max"], 5.0) << inout.out;
}

// The explain of a kernel without a vector axis says so; it read "N = 1: VEC = 1 (16-byte
// accesses)" and "about 0 registers per thread hold the cached vectors" (new-user test).
TEST_F(CliTest, ExplainOfAKernelWithoutAVectorAxis) {
  const std::string f = path("elem.kdsl");
  write_file(f,
             "@kernel\ndef e[T: (f32, f16)](x: Tensor[T, (M, 2)], *, y: Out[T, (M,)]):\n"
             "    for m in parallel(M):\n"
             "        y[m] = x[m, 0] * x[m, 1]\n");
  CliResult r = kdsl({"emit", f, "-k", "e", "--dtype", "f16", "--explain", "--arch", "sm_90"});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("  no vector axis: element accesses (each row's elements read one by one) "
                       "-> rows.subwarp"),
            std::string::npos)
      << show(r);
  EXPECT_NE(r.out.find("register-resident: no vector to hold; each element is read once"),
            std::string::npos)
      << show(r);
  EXPECT_EQ(r.out.find("VEC ="), std::string::npos) << show(r);
}

// A failed write of --out (here a full device) is an error, not a success with a short file.
TEST_F(CliTest, RunOutWriteFailureIsAnError) {
  if (!fs::is_character_file("/dev/full")) GTEST_SKIP() << "skipped: no /dev/full";
  CliResult r = kdsl({"run", kRms, "-k", "rms_norm", "--device", "cpu", "--dtype", "f32", "--shape",
                      "M=4,N=8", "--out", "y=/dev/full"});
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_EQ(r.err, "kdsl: error: /dev/full: write failed: No space left on device\n") << show(r);
}

// --out to an existing file whose directory takes no new files (/proc: the temporary file beside it
// cannot be created, even by root, whom access() lets through) is refused before the run, naming
// the temporary file and the cause; it said "/proc/version: cannot write: No such file or
// directory", after the kernel ran. write_npy itself names them too.
TEST_F(CliTest, OutWhoseTemporaryFileCannotBeCreatedIsRefusedBeforeTheRun) {
  if (!fs::is_regular_file("/proc/version")) GTEST_SKIP() << "skipped: no /proc/version";
  CliResult r = kdsl({"run", kRms, "-k", "rms_norm", "--device", "cpu", "--dtype", "f32", "--shape",
                      "M=4,N=8", "--out", "y=/proc/version"});
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_EQ(r.out, "") << "the kernel ran";
  if (::geteuid() != 0) {
    EXPECT_EQ(r.err,
              "kdsl: error: --out y=/proc/version: cannot write into /proc: permission denied\n");
    return;
  }
  const std::string temp = "cannot create the temporary file /proc/.kdsl-npy.";
  const std::string why =
      ".tmp (the output is written there, then renamed into place): No such file or directory";
  EXPECT_TRUE(r.err.starts_with("kdsl: error: --out y=/proc/version: " + temp)) << r.err;
  EXPECT_TRUE(r.err.ends_with(why + "\n")) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  try {
    write_npy("/proc/version", tensor(DType::f32, {2}, {1, 2}));
    ADD_FAILURE() << "wrote /proc/version";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_TRUE(message.starts_with("/proc/version: " + temp)) << message;
    EXPECT_TRUE(message.ends_with(why)) << message;
  }
}

// A name too long for the file system, given without a directory, names the current directory
// in words ("the file name is 304 bytes long; . allows at most 255").
TEST_F(CliTest, OutNameTooLongInTheCurrentDirectorySaysSo) {
  const long name_max = ::pathconf(source_dir().c_str(), _PC_NAME_MAX);  // kdsl runs there
  if (name_max <= 0) GTEST_SKIP() << "skipped: no limit on the length of a file name";
  const std::string name = std::string(name_max + 45, 'a') + ".npy";
  CliResult r = kdsl({"run", kRms, "-k", "rms_norm", "--device", "cpu", "--dtype", "f32", "--shape",
                      "M=4,N=8", "--out", "y=" + name});
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_EQ(r.err, "kdsl: error: --out y=" + name + ": the file name is " +
                       std::to_string(name.size()) +
                       " bytes long; the file system of the current directory allows at most " +
                       std::to_string(name_max) + "\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(CliTest, ListSaysWhenAFileDefinesNoKernels) {
  write_file(path("empty.kdsl"), "");
  write_file(path("comments.kdsl"), "# only a comment\n\n");
  for (const std::string& file : {path("empty.kdsl"), path("comments.kdsl")}) {
    CliResult r = kdsl({"list", file});
    EXPECT_EQ(r.code, 0) << show(r);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "kdsl: note: " + file +
                         " defines no kernels (a kernel is a function decorated with @kernel)\n");
    CliResult j = kdsl({"list", file, "--json"});
    EXPECT_EQ(j.code, 0) << show(j);
    EXPECT_EQ(nlohmann::json::parse(j.out), nlohmann::json::array());
    EXPECT_EQ(j.err, r.err);
    CliResult quiet = kdsl({"list", file, "-q"});
    EXPECT_EQ(quiet.code, 0) << show(quiet);
    EXPECT_EQ(quiet.err, "");
  }
}

// ---------------------------------------------------------------------------------------------
// emit

TEST_F(CliTest, EmitIrCudaExplainPtx) {
  CliResult ir = kdsl({"emit", kRms, "-k", "rms_norm", "--dtype", "bf16", "--ir"});
  EXPECT_EQ(ir.code, 0) << show(ir);
  EXPECT_TRUE(ir.out.starts_with("kernel rms_norm[T=bf16](x: Tensor[bf16, (M, N)]")) << ir.out;
  // The IR comes before scheduling: a hint there is refused, not ignored.
  CliResult ir_hint =
      kdsl({"emit", kRms, "-k", "rms_norm", "--dtype", "bf16", "--ir", "--schedule", "t=4"});
  EXPECT_EQ(ir_hint.code, 2) << show(ir_hint);
  EXPECT_EQ(ir_hint.err,
            "kdsl emit: usage error: --schedule chooses the schedule of the generated code: use it "
            "with --cuda, --ptx, --sass or --explain, not --ir\n")
      << show(ir_hint);

  std::vector<std::string> spec = {"emit",   kRms,      "-k",    "rms_norm", "-D",
                                   "T=bf16", "--shape", "N=256", "--arch",   "sm_90"};
  auto with = [&](std::initializer_list<std::string> extra) {
    std::vector<std::string> a = spec;
    a.insert(a.end(), extra);
    return kdsl(a);
  };
  CliResult cuda = with({});
  EXPECT_EQ(cuda.code, 0) << show(cuda);
  EXPECT_NE(cuda.out.find("__global__"), std::string::npos);
  EXPECT_NE(cuda.out.find("kdsl_rms_norm_bf16_n256("), std::string::npos);
  EXPECT_EQ(with({"--cuda"}).out, cuda.out);  // deterministic, --cuda is the default

  CliResult explain = with({"--explain"});
  EXPECT_EQ(explain.code, 0) << show(explain);
  EXPECT_TRUE(explain.out.starts_with("kdsl_rms_norm_bf16_n256 for sm_90: schedule rows."))
      << explain.out;
  EXPECT_NE(explain.out.find("\n  N = 256: VEC = 8"), std::string::npos) << explain.out;
  EXPECT_EQ(explain.out.find("__global__"), std::string::npos);

  CliResult ptx = with({"--ptx"});
  EXPECT_EQ(ptx.code, 0) << show(ptx);
  EXPECT_NE(ptx.out.find(".target sm_90"), std::string::npos);
  EXPECT_NE(ptx.out.find(".entry kdsl_rms_norm_bf16_n256("), std::string::npos);
  CliResult ptx80 = kdsl({"emit", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "N=256",
                          "--arch", "sm_80", "--ptx"});
  EXPECT_NE(ptx80.out.find(".target sm_80"), std::string::npos) << show(ptx80);
  // Blanks around the architecture are ignored, as in compile's list; blanks alone are no name.
  CliResult spaced = kdsl({"emit", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "N=256",
                           "--arch", " sm_80 ", "--ptx"});
  EXPECT_NE(spaced.out.find(".target sm_80"), std::string::npos) << show(spaced);
  CliResult blank = kdsl({"emit", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "N=256",
                          "--arch", " ", "--ptx"});
  EXPECT_EQ(blank.code, 2);
  EXPECT_EQ(blank.err,
            "kdsl emit: usage error: --arch: empty architecture: expected one, e.g. sm_90 (see "
            "kdsl emit --help)\n");

  CliResult two = with({"--ptx", "--cuda"});
  EXPECT_EQ(two.code, 2);
  EXPECT_EQ(count_lines(two.err), 1u) << two.err;
}

// The command line assumes row-major tensors, as kdsl run creates and a launch of fresh PyTorch
// tensors passes: a vector axis that is not a tensor's last steps D elements, so emit shows (and
// compile caches) the strided specialization a launch selects, not one with unit strides.
TEST_F(CliTest, EmitOfAStridedVectorAxisUsesItsStride) {
  const std::string mid = path("mid.kdsl"), last = path("last.kdsl");
  write_file(mid,
             "@kernel\ndef k(x: Tensor[f32, (B, L, D)], *, y: Out[f32, (B, L, D)]):\n"
             "    for b, d in parallel(B, D):\n        y[b, :, d] = x[b, :, d] * 2.0\n");
  write_file(last,
             "@kernel\ndef k(x: Tensor[f32, (B, D, L)], *, y: Out[f32, (B, D, L)]):\n"
             "    for b, d in parallel(B, D):\n        y[b, d, :] = x[b, d, :] * 2.0\n");
  CliResult strided = kdsl({"emit", mid, "-k", "k", "--shape", "L=1024", "--arch", "sm_90"});
  EXPECT_EQ(strided.code, 0) << show(strided);
  // Neither tensor is contiguous along L (nor aligned: D's elements step 4 bytes).
  EXPECT_NE(strided.out.find("__global__ void __launch_bounds__(256) kdsl_k_n1024_u00("),
            std::string::npos)
      << strided.out;
  EXPECT_NE(strided.out.find("static_cast<long long>(col + v) * p.st0_1)"), std::string::npos)
      << strided.out;
  EXPECT_EQ(strided.out.find("kdsl_load<VEC"), std::string::npos) << strided.out;
  // The same kernel along the last axis: unit strides, 16-byte loads.
  CliResult unit = kdsl({"emit", last, "-k", "k", "--shape", "L=1024", "--arch", "sm_90"});
  EXPECT_EQ(unit.code, 0) << show(unit);
  EXPECT_NE(unit.out.find("kdsl_k_n1024("), std::string::npos) << unit.out;
  EXPECT_NE(unit.out.find("kdsl_load<VEC, false>(t0 + o0 + col"), std::string::npos) << unit.out;
  // D = 1 given: the axis after L has size 1, so L has unit stride.
  CliResult one =
      kdsl({"emit", mid, "-k", "k", "--shape", "L=1024,D=1", "--arch", "sm_90", "--explain"});
  EXPECT_TRUE(one.out.starts_with("kdsl_k_n1024 for sm_90")) << show(one);
}

TEST_F(CliTest, EmitSassRunsTheToolkitDisassemblerOnTheCubin) {
  fs::create_directories(tmp() / "cuda" / "bin");
  std::string fake = (tmp() / "cuda" / "bin" / "cuobjdump").string();
  // Prints its option and the first bytes of the file it is given (a cubin is an ELF file).
  write_file(fake, "#!/bin/sh\necho \"fake cuobjdump $1\"\nhead -c 4 \"$2\" | tail -c 3\necho\n",
             true);
  std::vector<std::string> args = {"emit",    kRms,    "-k",     "rms_norm", "--dtype", "f32",
                                   "--shape", "N=128", "--arch", "sm_90",    "--sass"};
  CliResult r = kdsl(args, {{"CUDA_HOME", (tmp() / "cuda").string()}});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_EQ(r.out, "fake cuobjdump -sass\nELF\n");

  write_file(fake, "#!/bin/sh\nexit 3\n", true);
  CliResult failed = kdsl(args, {{"CUDA_HOME", (tmp() / "cuda").string()}});
  EXPECT_EQ(failed.code, 1);
  EXPECT_NE(
      failed.err.find("cuobjdump failed on the cubin of kdsl_rms_norm_f32_n128 (exit code 3)"),
      std::string::npos)
      << show(failed);
}

TEST_F(CliTest, EmitSassWithoutADisassemblerSaysSo) {
  for (const char* tool : {"/usr/local/cuda/bin/cuobjdump", "/usr/local/cuda/bin/nvdisasm"}) {
    if (fs::exists(tool)) GTEST_SKIP() << "skipped: " << tool << " is installed";
  }
  fs::create_directories(tmp() / "empty");
  CliResult r =
      kdsl({"emit", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "N=128", "--sass"},
           {{"CUDA_HOME", (tmp() / "empty").string()},
            {"CUDA_PATH", ""},
            {"PATH", (tmp() / "empty").string()}});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err,
            "kdsl: error: --sass needs the CUDA toolkit's disassembler (cuobjdump or nvdisasm), "
            "and none is installed: looked in $CUDA_HOME/bin, $CUDA_PATH/bin, PATH and "
            "/usr/local/cuda/bin (--ptx needs no tool)\n");
}

TEST_F(CliTest, EmitSassWithTheInstalledDisassembler) {
  std::vector<fs::path> dirs;
  for (const char* v : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* d = std::getenv(v)) dirs.push_back(fs::path(d) / "bin");
  }
  dirs.emplace_back("/usr/local/cuda/bin");
  bool found = false;
  for (const auto& d : dirs) found |= fs::exists(d / "cuobjdump") || fs::exists(d / "nvdisasm");
  if (!found) GTEST_SKIP() << "skipped: no cuobjdump or nvdisasm installed";
  CliResult r = kdsl({"emit", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "N=128",
                      "--arch", "sm_90", "--sass"});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("kdsl_rms_norm_f32_n128"), std::string::npos) << show(r);
  EXPECT_NE(r.out.find("EXIT"), std::string::npos) << show(r);
}

// ---------------------------------------------------------------------------------------------
// compile, cache

TEST_F(CliTest, CompileMissThenHit) {
  std::vector<std::string> args = {"compile", kRms,      "-k",   "rms_norm", "--dtype",
                                   "f32",     "--shape", "N=64", "--arch",   "sm_90"};
  CliResult first = kdsl(args);
  EXPECT_EQ(first.code, 0) << show(first);
  EXPECT_TRUE(first.out.starts_with("kdsl_rms_norm_f32_n64 (sm_90): compiled in ")) << first.out;
  EXPECT_NE(first.out.find("\n1 specialization: 1 compiled, 0 disk-cache hits, 0 failed in "),
            std::string::npos)
      << first.out;
  CliResult second = kdsl(args);
  EXPECT_EQ(second.code, 0) << show(second);
  EXPECT_TRUE(second.out.starts_with("kdsl_rms_norm_f32_n64 (sm_90): disk cache hit ("))
      << second.out;
  EXPECT_NE(second.out.find("\n1 specialization: 0 compiled, 1 disk-cache hit, 0 failed in "),
            std::string::npos)
      << second.out;
}

TEST_F(CliTest, CompileAListOfSpecializationsInOrder) {
  CliResult r = kdsl({"compile", kRms, "-k", "rms_norm", "--dtype", "f32,bf16", "--shape",
                      "M=8,N=64,128", "--arch", "sm_90", "-j", "3", "--force-progress"});
  ASSERT_EQ(r.code, 0) << show(r);
  std::vector<std::string> symbols = {"kdsl_rms_norm_f32_n64", "kdsl_rms_norm_f32_n128",
                                      "kdsl_rms_norm_bf16_n64", "kdsl_rms_norm_bf16_n128"};
  size_t at = 0;
  for (const std::string& s : symbols) {
    size_t pos = r.out.find(s + " (sm_90): compiled in ", at);
    EXPECT_NE(pos, std::string::npos) << s << "\n" << r.out;
    at = pos;
  }
  EXPECT_NE(r.out.find("4 specializations: 4 compiled, 0 disk-cache hits, 0 failed in "),
            std::string::npos);
  EXPECT_NE(r.err.find("\r[##############################] 4/4 "), std::string::npos) << r.err;

  CliResult j = kdsl({"compile", kRms, "-k", "rms_norm", "--dtype", "bf16,f32", "--shape",
                      "N=128,64", "--arch", "sm_90", "--json"});
  ASSERT_EQ(j.code, 0) << show(j);
  auto report = nlohmann::json::parse(j.out);
  EXPECT_EQ(report["hits"], 4);
  EXPECT_EQ(report["compiled"], 0);
  ASSERT_EQ(report["results"].size(), 4u);
  EXPECT_EQ(report["results"][0]["symbol"], "kdsl_rms_norm_bf16_n128");
  EXPECT_EQ(report["results"][0]["status"], "hit");
  EXPECT_EQ(report["results"][3]["shape"], nlohmann::json({{"N", 64}}));
}

// --no-progress and --force-progress contradict each other: a usage error naming both, in either
// order (both were accepted, the bar silently off; found by a new-user test). --progress, the
// default, contradicts --no-progress alike and goes with --force-progress.
TEST_F(CliTest, NoProgressAndForceProgressExcludeEachOther) {
  const std::vector<std::string> compile = {"compile", kColSum, "--dtype", "f32",
                                            "--shape", "N=16",  "--arch",  "sm_90"};
  for (const auto& [a, b] :
       {std::pair<std::string, std::string>{"--no-progress", "--force-progress"},
        {"--force-progress", "--no-progress"},
        {"--progress", "--no-progress"}}) {
    std::vector<std::string> cmd = compile;
    cmd.insert(cmd.end(), {a, b});
    CliResult r = kdsl(cmd);
    EXPECT_EQ(r.code, 2) << a << " " << b << show(r);
    EXPECT_EQ(r.out, "");
    const std::string first = a == "--progress" ? a : "--no-progress";
    const std::string second = a == "--progress" ? b : "--force-progress";
    EXPECT_EQ(r.err, "kdsl compile: usage error: " + first + " excludes " + second +
                         " (see kdsl compile --help)\n")
        << a << " " << b;
  }
  for (const std::vector<std::string>& flags : {std::vector<std::string>{"--no-progress"},
                                                {"--force-progress"},
                                                {"--progress"},
                                                {"--progress", "--force-progress"}}) {
    std::vector<std::string> cmd = compile;
    cmd.insert(cmd.end(), flags.begin(), flags.end());
    CliResult r = kdsl(cmd);
    EXPECT_EQ(r.code, 0) << flags[0] << show(r);
    EXPECT_EQ(r.err.find("] 1/1 ") != std::string::npos,
              std::find(flags.begin(), flags.end(), "--force-progress") != flags.end())
        << r.err;
  }
}

TEST_F(CliTest, CompileAWholeFileTakesEveryKernelAndAllowedDtype) {
  CliResult r = kdsl({"compile", kColSum, "--shape", "N=32", "--arch", "sm_90"});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("kdsl_col_sum_f32_n32 (sm_90): compiled"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kdsl_col_sum_bf16_n32 (sm_90): compiled"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 specializations: 2 compiled"), std::string::npos);
  // A dtype one kernel of a file does not allow is left out for that kernel; one no kernel
  // allows is an error.
  CliResult f16 =
      kdsl({"compile", kColSum, "--dtype", "f16", "--shape", "N=32", "--arch", "sm_90"});
  EXPECT_EQ(f16.code, 1);
  EXPECT_EQ(f16.err, "kdsl: error: --dtype f16: no selected kernel allows f16\n");
}

TEST_F(CliTest, CompileFailuresAreReportedAndExitOne) {
  CliResult r = kdsl({"compile", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "N=0,64",
                      "--arch", "sm_90"});
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_NE(r.out.find("kdsl_rms_norm_f32_n0 (sm_90): FAILED\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kdsl_rms_norm_f32_n64 (sm_90): compiled"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 specializations: 1 compiled, 0 disk-cache hits, 1 failed"),
            std::string::npos);
  EXPECT_NE(r.err.find("kdsl: error: kernel 'rms_norm': the vector axis N has size 0; it must "
                       "be at least 1"),
            std::string::npos)
      << r.err;
}

TEST_F(CliTest, CompileWithoutGpuOrArchSaysWhatItCompilesFor) {
  if (have_gpu()) GTEST_SKIP() << "skipped: a GPU is present";
  CliResult r = kdsl({"compile", kColSum, "--dtype", "f32", "--shape", "N=16"});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_EQ(r.err,
            "kdsl: note: no GPU found: compiling for sm_90 (an H100/H200); choose another with "
            "--arch\n");
  CliResult quiet = kdsl({"-q", "compile", kColSum, "--dtype", "f32", "--shape", "N=16"});
  EXPECT_EQ(quiet.err, "");
}

TEST_F(CliTest, CompileWithTheCacheOffSaysNothingWasStored) {
  CliResult r = kdsl({"compile", kColSum, "--dtype", "f32", "--shape", "N=16", "--arch", "sm_90"},
                     {{"KDSL_CACHE", "off"}});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_EQ(r.err, "kdsl: note: the disk cache is off (KDSL_CACHE): nothing was stored\n");
  EXPECT_EQ(kdsl({"cache", "list"}).out, "no entries in " + cache_dir() + "\n");
  // With an entry on disk, listing with the cache off says the cache is off, not that it is
  // empty.
  ASSERT_EQ(kdsl({"compile", kColSum, "--dtype", "f32", "--shape", "N=16", "--arch", "sm_90"}).code,
            0);
  CliResult listed = kdsl({"cache", "list"}, {{"KDSL_CACHE", "off"}});
  EXPECT_EQ(listed.code, 0) << show(listed);
  EXPECT_EQ(listed.out, "the cache is off (KDSL_CACHE); nothing listed\n");
  // --json says so per result.
  CliResult j =
      kdsl({"compile", kColSum, "--dtype", "f32", "--shape", "N=16", "--arch", "sm_90", "--json"},
           {{"KDSL_CACHE", "off"}});
  EXPECT_EQ(j.code, 0) << show(j);
  EXPECT_NE(j.out.find("\"stored\": false"), std::string::npos) << j.out;
  EXPECT_EQ(j.out.find("\"stored\": true"), std::string::npos) << j.out;
}

// clear and prune with the cache off remove nothing and do not read the directory, so --json
// gives what is left as null (not counted), as stats does; it gave 0 entries and 0 bytes beside
// an entry still on disk (found by a new-user test).
TEST_F(CliTest, ClearAndPruneJsonWithTheCacheOffCountNothingLeft) {
  ASSERT_EQ(kdsl({"compile", kColSum, "--dtype", "f32", "--shape", "N=16", "--arch", "sm_90"}).code,
            0);
  for (const char* command : {"clear", "prune"}) {
    CliResult r = kdsl({"cache", command, "--json"}, {{"KDSL_CACHE", "off"}});
    ASSERT_EQ(r.code, 0) << command << "\n" << show(r);
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["enabled"], false) << r.out;
    EXPECT_EQ(j["removed_entries"], 0) << r.out;
    EXPECT_TRUE(j["entries"].is_null()) << command << "\n" << r.out;
    EXPECT_TRUE(j["bytes"].is_null()) << command << "\n" << r.out;
  }
  CliResult on = kdsl({"cache", "prune", "--json"});
  ASSERT_EQ(on.code, 0) << show(on);
  EXPECT_EQ(nlohmann::json::parse(on.out)["entries"], 1) << on.out;
}

// Filling the cache is what compile is for: a kernel compiled but not stored (a failing write, a
// directory the cache may not use) is an error, exit code 1, after every line and the summary.
TEST_F(CliTest, CompileThatStoresNothingSaysSoAndExitsOne) {
  const std::vector<std::string> args = {"compile", kColSum, "--dtype", "f32",
                                         "--shape", "N=16",  "--arch",  "sm_90"};
  CliResult full = kdsl(args, {{"KDSL_CACHE_FAULT", "write"}});  // as a full disk does
  EXPECT_EQ(full.code, 1) << show(full);
  EXPECT_NE(full.out.find("kdsl_col_sum_f32_n16 (sm_90): compiled in "), std::string::npos);
  EXPECT_NE(full.out.find(" ms (not stored)\n1 specialization: 1 compiled, "), std::string::npos)
      << full.out;
  EXPECT_NE(full.err.find("kdsl: error: nothing compiled was stored in the disk cache (" +
                          cache_dir() + "): cannot write "),
            std::string::npos)
      << full.err;
  CliResult json = kdsl(
      {"compile", kColSum, "--dtype", "f32", "--shape", "N=16,32", "--arch", "sm_90", "--json"},
      {{"KDSL_CACHE_FAULT", "write"}});
  EXPECT_EQ(json.code, 1) << show(json);
  nlohmann::json report = nlohmann::json::parse(json.out);
  EXPECT_EQ(report["not_stored"], 2);
  EXPECT_EQ(report["results"][0]["stored"], false);
  // A directory others may write is not used at all.
  fs::create_directories(path("shared"));
  fs::permissions(path("shared"), fs::perms::all);
  CliResult shared = kdsl(args, {{"KDSL_CACHE_DIR", path("shared")}});
  EXPECT_EQ(shared.code, 1) << show(shared);
  EXPECT_NE(
      shared.err.find("kdsl: error: nothing compiled was stored in the disk cache (" +
                      path("shared") + "): " + path("shared") + " is writable by group or others"),
      std::string::npos)
      << shared.err;
  // Stored, then a hit: nothing lost, exit code 0.
  CliResult stored = kdsl(args);
  EXPECT_EQ(stored.code, 0) << show(stored);
  CliResult hit = kdsl(args, {{"KDSL_CACHE_FAULT", "write"}});
  EXPECT_EQ(hit.code, 0) << show(hit);
  EXPECT_EQ(nlohmann::json::parse(kdsl({"compile", kColSum, "--dtype", "f32", "--shape", "N=16",
                                        "--arch", "sm_90", "--json"})
                                      .out)["results"][0]["stored"],
            true);
}

// --shape ignores spaces around entries, names and sizes, as --schedule does around its items.
TEST_F(CliTest, ShapeIgnoresSpacesAroundEntriesNamesAndSizes) {
  CliResult r =
      kdsl({"compile", kColSum, "--dtype", "f32", "--shape", " N = 16 , 32 ", "--arch", "sm_90"});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("2 specializations: 2 compiled"), std::string::npos) << r.out;
  CliResult emit = kdsl({"emit", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape",
                         "M=1024, N=8192", "--arch", "sm_90", "--explain"});
  EXPECT_EQ(emit.code, 0) << show(emit);
  EXPECT_TRUE(emit.out.starts_with("kdsl_rms_norm_f32_n8192 for sm_90: ")) << emit.out;
  // Spaces inside a size, and empty entries, are still errors.
  CliResult inside = kdsl({"emit", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "N=8 192"});
  EXPECT_EQ(inside.code, 2) << show(inside);
  EXPECT_EQ(inside.err,
            "kdsl emit: usage error: bad --shape entry 'N=8 192': a size is a non-negative "
            "integer; e.g. --shape M=1024,N=4096,8192\n");
  CliResult empty = kdsl({"emit", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "N=8, "});
  EXPECT_EQ(empty.code, 2) << show(empty);
  EXPECT_NE(empty.err.find("empty entry"), std::string::npos) << empty.err;
}

// `cache stats` says when the cache directory cannot be used: a regular file, or a path through
// one (which stat reports as ENOTDIR); a directory not created yet is fine.
TEST_F(CliTest, CacheStatsSaysWhenTheDirectoryCannotBeUsed) {
  const std::string file = path("a_file");
  std::ofstream(file) << "x";
  for (const std::string& dir : {file, file + "/sub"}) {
    CliResult r = kdsl({"cache", "stats"}, {{"KDSL_CACHE_DIR", dir}});
    EXPECT_EQ(r.code, 0) << show(r);
    EXPECT_NE(r.out.find("cache                 not usable\n"), std::string::npos) << r.out;
  }
  CliResult fresh = kdsl({"cache", "stats"}, {{"KDSL_CACHE_DIR", path("not_yet/sub")}});
  EXPECT_NE(fresh.out.find("cache                 on (the directory is created by the first "
                           "compile)\n"),
            std::string::npos)
      << fresh.out;
}

// `cache stats` says what a compile does with a directory it cannot write (found by user testing:
// "on (the directory is created by the first compile)" for KDSL_CACHE_DIR=/proc/self/x, where the
// first compile warns and keeps its kernels in memory).
TEST_F(CliTest, CacheStatsSaysWhenCompiledKernelsCannotBeStored) {
  const std::map<std::string, std::string> proc = {{"KDSL_CACHE_DIR", "/proc/self/x"}};
  CliResult r = kdsl({"cache", "stats"}, proc);
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("cache                 on, but not writable: cannot create /proc/self/x: No "
                       "such file or directory; compiled kernels are kept in memory only\n"),
            std::string::npos)
      << r.out;
  auto j = nlohmann::json::parse(kdsl({"cache", "stats", "--json"}, proc).out);
  EXPECT_EQ(j["usable"], true);
  EXPECT_EQ(j["writable"], false);
  EXPECT_EQ(j["unwritable_reason"], "cannot create /proc/self/x: No such file or directory");
  // A directory with entries that cannot be written still gives them (KDSL_CACHE_FAULT=write
  // stands in for a read-only disk: permissions do not stop root).
  ASSERT_EQ(kdsl({"compile", kColSum, "--dtype", "f32", "--shape", "N=16", "--arch", "sm_90"}).code,
            0);
  CliResult ro = kdsl({"cache", "stats"}, {{"KDSL_CACHE_FAULT", "write"}});
  EXPECT_NE(ro.out.find("cache                 on, but not writable: every store fails "
                        "(KDSL_CACHE_FAULT=write); entries already there are loaded, newly "
                        "compiled kernels are kept in memory only\n"),
            std::string::npos)
      << ro.out;
  EXPECT_NE(ro.out.find("entries               1\n"), std::string::npos) << ro.out;
  CliResult ok = kdsl({"cache", "stats"});
  EXPECT_NE(ok.out.find("cache                 on\n"), std::string::npos) << ok.out;
  EXPECT_EQ(nlohmann::json::parse(kdsl({"cache", "stats", "--json"}).out)["writable"], true);
}

// `cache list`, `clear` and `prune` on a directory that cannot be used say so with the reason
// `stats` gives, and exit 1, rather than report an empty cache.
TEST_F(CliTest, CacheListClearPruneSayWhenTheDirectoryCannotBeUsed) {
  const std::string file = path("a_file");
  std::ofstream(file) << "x";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {file, file + " is not a directory"},
      {file + "/sub", "cannot use " + file + "/sub: Not a directory"}};
  for (const auto& [dir, why] : cases) {
    for (const char* command : {"list", "clear", "prune"}) {
      for (bool json : {false, true}) {
        std::vector<std::string> args = {"cache", command};
        if (json) args.push_back("--json");
        CliResult r = kdsl(args, {{"KDSL_CACHE_DIR", dir}});
        EXPECT_EQ(r.code, 1) << command << "\n" << show(r);
        EXPECT_EQ(r.out, "") << command;
        EXPECT_EQ(r.err, "kdsl: error: the cache directory is not usable: " + why + "\n")
            << command;
      }
    }
    CliResult stats = kdsl({"cache", "stats"}, {{"KDSL_CACHE_DIR", dir}});
    EXPECT_NE(stats.out.find("reason                " + why + "\n"), std::string::npos)
        << stats.out;
  }
  // A directory kdsl may not read (permissions do not stop root).
  const std::string closed = path("closed");
  fs::create_directories(closed + "/ab");
  fs::permissions(closed, fs::perms::owner_write);
  if (::access(closed.c_str(), R_OK) != 0) {
    CliResult r = kdsl({"cache", "list"}, {{"KDSL_CACHE_DIR", closed}});
    EXPECT_EQ(r.code, 1) << show(r);
    EXPECT_EQ(r.err, "kdsl: error: the cache directory is not usable: cannot read " + closed +
                         ": Permission denied\n");
  }
  fs::permissions(closed, fs::perms::owner_all);
  // A directory not created yet is an empty cache; so is the cache turned off.
  CliResult fresh = kdsl({"cache", "clear"}, {{"KDSL_CACHE_DIR", path("not_yet/sub")}});
  EXPECT_EQ(fresh.code, 0) << show(fresh);
  CliResult off = kdsl({"cache", "prune"}, {{"KDSL_CACHE_DIR", file}, {"KDSL_CACHE", "off"}});
  EXPECT_EQ(off.code, 0) << show(off);
  EXPECT_EQ(off.out, "the cache is off (KDSL_CACHE); nothing removed\n");
}

// Writes to `file` a kernel the front end accepts but the GPU scan schedule cannot compile (a
// scan's result shifted); returns `file`.
std::string write_shifted_scan(const std::string& file) {
  std::ofstream(file) << "@kernel\n"
                         "def k(x: Tensor[f32, (M, N)], *, y: Out[f32, (M, N)]):\n"
                         "    for m in parallel(M):\n"
                         "        y[m, :] = shift(cumsum(x[m, :]), 1, 0.0)\n";
  return file;
}

// A compile whose later stores evict its earlier ones (a size limit below the set's size) does
// not report them as stored (found by a new-user test: all were "stored: true", exit 0).
TEST_F(CliTest, CompileEvictingItsOwnEntriesSaysSoAndExitsOne) {
  CliResult r = kdsl({"compile", kColSum, "--dtype", "f32", "--shape", "N=16,32,48,64", "--arch",
                      "sm_90", "--json", "-j", "1"},
                     {{"KDSL_CACHE_MAX_SIZE", "1B"}});
  EXPECT_EQ(r.code, 1) << show(r);
  nlohmann::json report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["not_stored"], 3) << r.out;  // the last store is kept
  int stored = 0;
  for (const auto& x : report["results"]) stored += x["stored"].get<bool>();
  EXPECT_EQ(stored, 1) << r.out;
  EXPECT_NE(
      r.err.find("kdsl: error: 3 of 4 specializations are not in the disk cache (" + cache_dir() +
                 "): evicted by a later compile of this command to stay within the cache's "
                 "size limit (1 bytes, KDSL_CACHE_MAX_SIZE)"),
      std::string::npos)
      << r.err;
}

// A kernel the front end accepts but the GPU scan schedule cannot compile: the diagnostic is
// printed as rendered (FILE:LINE:COL: error: ..., the line and a caret), not after a second
// "kdsl: error: ", and compile exits 1.
TEST_F(CliTest, CompileErrorFromTheScheduleIsOneDiagnostic) {
  const std::string file = write_shifted_scan(path("shifted_scan.kdsl"));
  for (bool json : {false, true}) {
    std::vector<std::string> args = {"compile", file, "--shape", "N=64", "--arch", "sm_90"};
    if (json) args.push_back("--json");
    CliResult r = kdsl(args);
    EXPECT_EQ(r.code, 1) << show(r);
    // (The caret at the shift, not at the scan it moves: found by a new-user test.)
    EXPECT_NE(r.err.find(file + ":4:19: error: a scan's result is shifted"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("kdsl: error: "), std::string::npos) << r.err;
  }
}

// A sum of a scan's result scaled by a value the same along the sequence compiles (found by a
// new-user test: dl[d] += 2.0 * sum(c) was refused with a message saying it was not a column
// reduction); other arithmetic on such a sum is a diagnostic naming what is allowed.
TEST_F(CliTest, ScaledSumOfAScanCompilesOtherArithmeticIsADiagnostic) {
  const std::string file = path("scaled_sum.kdsl");
  auto write = [&](const std::string& line) {
    std::ofstream(file) << "@kernel\n"
                           "def k(x: Tensor[f32, (B, L, D)], *, y: Out[f32, (B, L, D)], "
                           "dl: Out[f32, (D,)], s: Out[f32, (B, D)]):\n"
                           "    for b, d in parallel(B, D):\n"
                           "        c = cumsum(x[b, :, d])\n"
                           "        y[b, :, d] = c\n"
                        << line << "\n";
  };
  auto compile = [&](const std::string& lines) {
    write(lines);
    return kdsl({"compile", file, "--shape", "L=4097", "--arch", "sm_90"});
  };
  CliResult r = compile("        dl[d] += 2.0 * sum(c)\n        s[b, d] = 0.0");
  EXPECT_EQ(r.code, 0) << show(r);
  r = compile("        dl[d] += sum(c) + 1.0\n        s[b, d] = 0.0");
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_NE(r.err.find(file + ":6:18: error: a reduction along the sequence of a scan's result "
                              "can only be stored: a sum, as a column reduction"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("        dl[d] += sum(c) + 1.0\n                 ^~~~~~\n"),
            std::string::npos)
      << r.err;  // the caret under the whole sum(c)
  EXPECT_NE(r.err.find("hint: move the other arithmetic inside sum(...)"), std::string::npos)
      << r.err;
  // A sum shared by a valid store and an invalid one (one node after CSE): the diagnostic at the
  // invalid store's line, not at the sum's first use (found by a second new-user test).
  r = compile("        dl[d] += 2.0 * sum(c)\n        s[b, d] = sum(c) + 1.0");
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_NE(r.err.find(file + ":7:9: error: a reduction along the sequence of a scan's result"),
            std::string::npos)
      << r.err;
  // A cast inside a column reduction rounds each term: its own message and hint.
  r = compile("        dl[d] += f32(bf16(2.0 * sum(c)))\n        s[b, d] = 0.0");
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_NE(r.err.find("error: a cast inside a column reduction of a sum of a scan's result "
                       "rounds each term"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("hint: drop the cast: the column reduction adds the unrounded terms"),
            std::string::npos)
      << r.err;
  // An InOut element read by the tiles and written by the main kernel (found by a third new-user
  // test: the chunks after the first read the new value) is refused, at the read.
  // A kernel of its own parameters (after x) and lines (after c = cumsum(...)), in its own file.
  auto compile_kernel = [&](const std::string& name, const std::string& params,
                            const std::string& lines) {
    std::ofstream(path(name)) << "@kernel\n"
                                 "def k(x: Tensor[f32, (B, L, D)], *, "
                              << params
                              << "):\n"
                                 "    for b, d in parallel(B, D):\n"
                                 "        c = cumsum(x[b, :, d])\n"
                              << lines;
    return kdsl({"compile", path(name), "--shape", "L=4097", "--arch", "sm_90"});
  };
  r = compile_kernel("inout_race.kdsl", "u: InOut[f32, (B, D)], v: InOut[f32, (B, D)]",
                     "        u[b, d] += sum(c) * v[b, d]\n"
                     "        v[b, d] = first(x[b, :, d])\n");
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_NE(r.err.find(path("inout_race.kdsl") +
                       ":5:29: error: InOut tensor 'v' is read at an element and written by "
                       "this kernel (line 6)"),
            std::string::npos)
      << r.err;
  // A cast under a negation or factor, and an f32 sum added to an f64 InOut element: their own
  // messages (both had the generic one). (Casts have no location: the caret is at the sum.)
  r = compile("        dl[d] += 0.0\n        s[b, d] = -f32(bf16(sum(c)))");
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_NE(r.err.find(file + ":7:29: error: a sum of a scan's result converted to bf16 under a "
                              "negation, factor or divisor is not supported"),
            std::string::npos)
      << r.err;
  const std::string wide = "y: Out[f32, (B, L, D)], u: InOut[f64, (B, D)]";
  r = compile_kernel("wide.kdsl", wide, "        y[b, :, d] = c\n        u[b, d] += f64(sum(c))\n");
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_NE(r.err.find("error: a sum of f32 values of a scan's result added to an InOut f64 "
                       "element is not supported"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("hint: sum in the element's type: sum(f64(...))"), std::string::npos)
      << r.err;
  // The suggested form compiles.
  r = compile_kernel("wide.kdsl", wide, "        y[b, :, d] = c\n        u[b, d] += sum(f64(c))\n");
  EXPECT_EQ(r.code, 0) << show(r);
  // -sum(c), a cast to the tensor's type and += stay accepted forms.
  r = compile("        dl[d] += -sum(c) * 0.5\n        s[b, d] = f32(sum(c))");
  EXPECT_EQ(r.code, 0) << show(r);
}

// A kernel without scans that a column reduction over part of the loop puts in the scan schedule
// (`cnt[g] += 1` in parallel(B, G)): the hint names that store, not scans (found by a new-user
// test: "in a kernel with scans" for a kernel with none).
TEST_F(CliTest, ScanScheduleHintNamesThePartialColumnReduction) {
  const std::string file = path("groups.kdsl");
  std::ofstream(file) << "@kernel\n"
                         "def k(x: Tensor[f32, (B, G, K)], *, y: Out[f32, (B, G, K)], "
                         "cnt: Out[i64, (G,)]):\n"
                         "    for s, g in parallel(B, G):\n"
                         "        xf = x[s, g, :]\n"
                         "        y[s, g, :] = xf - mean(xf)\n"
                         "        cnt[g] += 1\n";
  CliResult r = kdsl({"compile", file, "--shape", "K=4096", "--arch", "sm_90"});
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_NE(r.err.find("hint: the column reduction over part of the loop at line 6 puts this "
                       "kernel in the GPU scan schedule (SPEC 11.3)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("kernel with scans"), std::string::npos) << r.err;
}

// A schedule diagnostic whose value was made by sema without a location (a where() choosing
// between first() and last(): its condition, a parameter, has none either) takes the nearest
// located operand's (found by a new-user test: the message came bare, without "kdsl: error:",
// a location or a newline).
TEST_F(CliTest, ScheduleDiagnosticFindsALocatedOperand) {
  const std::string file = path("ends.kdsl");
  std::ofstream(file) << "@kernel\n"
                         "def h8(x: Tensor[f32, (M, N)], flag: bool = False, *, y: Out[f32, (M, "
                         "N)], z: Out[f32, (M,)]):\n"
                         "    for m in parallel(M):\n"
                         "        y[m, :] = cumsum(x[m, :])\n"
                         "        z[m] = where(flag, last(x[m, :]), first(x[m, :]))\n";
  for (const char* cmd : {"emit", "compile"}) {
    CliResult r = kdsl({cmd, file, "-k", "h8", "--shape", "N=3000", "--arch", "sm_90"});
    EXPECT_EQ(r.code, 1) << show(r);
    EXPECT_NE(r.err.find(file + ":5:28: error: this value combines the two ends of the sequence"),
              std::string::npos)
        << cmd << ": " << r.err;
    EXPECT_NE(r.err.find("                           ^~~~~~~~~~~~~\n"), std::string::npos)
        << cmd << ": " << r.err;
  }
}

// An InOut tensor read shifted and written by the same kernel (found by a new-user test: the GPU
// code read neighbours that other threads, or the tile before, had already overwritten) is a
// diagnostic at the shift, directly or through an expression; shifted reads of an Out-writing
// kernel and an InOut scanned in place (each position read and written by one thread) compile.
TEST_F(CliTest, ShiftedReadOfAWrittenInOutIsADiagnostic) {
  const std::string file = path("inout.kdsl");
  std::ofstream(file) << "@kernel\n"
                         "def diff(x: InOut[f32, (M, N)]):\n"
                         "    for m in parallel(M):\n"
                         "        x[m, :] = x[m, :] - shift(x[m, :], 1, 0.0)\n"
                         "\n"
                         "@kernel\n"
                         "def diff2(x: InOut[f32, (M, N)]):\n"
                         "    for m in parallel(M):\n"
                         "        x[m, :] = cumsum(shift(x[m, :] * 2.0, -1, 0.0))\n"
                         "\n"
                         "@kernel\n"
                         "def in_place(x: InOut[f32, (M, N)]):\n"
                         "    for m in parallel(M):\n"
                         "        x[m, :] = cumsum(x[m, :])\n"
                         "\n"
                         "@kernel\n"
                         "def to_out(x: Tensor[f32, (M, N)], *, y: Out[f32, (M, N)]):\n"
                         "    for m in parallel(M):\n"
                         "        y[m, :] = x[m, :] - shift(x[m, :], 1, 0.0)\n";
  const std::string msg =
      ": error: InOut tensor 'x' is read at a shifted position and written by this kernel: on "
      "the GPU another thread may have written that position first";
  for (const auto& [kernel, col] :
       {std::pair<std::string, std::string>{"diff", ":4:29"}, {"diff2", ":9:32"}}) {
    CliResult r = kdsl({"compile", file, "-k", kernel, "--shape", "N=64", "--arch", "sm_90"});
    EXPECT_EQ(r.code, 1) << show(r);
    EXPECT_NE(r.err.find(file + col + msg), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("hint: write the result to an Out tensor"), std::string::npos) << r.err;
  }
  for (const char* kernel : {"in_place", "to_out"}) {
    CliResult r = kdsl({"compile", file, "-k", kernel, "--shape", "N=64", "--arch", "sm_90"});
    EXPECT_EQ(r.code, 0) << kernel << ": " << show(r);
  }
}

// Writes to `file` a kernel scanning an n-tuple of f32 along a middle axis; returns `file`.
std::string write_wide_scan(const std::string& file, int n) {
  std::vector<std::string> a, b, sums, values, names;
  for (int i = 0; i < n; ++i) {
    a.push_back(fmt::format("a{}", i));
    b.push_back(fmt::format("b{}", i));
    sums.push_back(fmt::format("a{0} + b{0}", i));
    values.push_back(fmt::format("x[b, :, d] * {}.0", i + 1));
    names.push_back(fmt::format("s{}", i));
  }
  std::ofstream(file) << fmt::format(
      "def op(left, right):\n"
      "    {} = left\n"
      "    {} = right\n"
      "    return {}\n"
      "\n"
      "@kernel\n"
      "def wide(x: Tensor[f32, (B, L, D)], *, y: Out[f32, (B, L, D)]):\n"
      "    for b, d in parallel(B, D):\n"
      "        {} = scan(op, ({}))\n"
      "        y[b, :, d] = s0 + s{}\n",
      fmt::join(a, ", "), fmt::join(b, ", "), fmt::join(sums, ", "), fmt::join(names, ", "),
      fmt::join(values, ", "), n - 1);
  return file;
}

// A scan whose combine carries many values (found by a new-user test: a 24-tuple of f32 along a
// middle axis was "kdsl: internal error", its default tile needing 51240 bytes of shared memory)
// gets a tile with fewer warps that fits, named in the explain; a tuple no tile can hold is a
// diagnostic at the scan with the line and a caret. A 24-tuple (26 register words an element)
// takes the element accesses and the steps their budget allows, not the 2-row layout, whose
// 16 elements a thread would need 416 words (found by a later new-user test: a 250-tuple got
// 4032 words a thread "within a budget of 208").
TEST_F(CliTest, WideScanStatesFitSharedMemoryOrAreADiagnostic) {
  const std::pair<int, const char*> explained[] = {
      {24,
       "tiles of 8 rows x 64 positions (512 chunks); 256 threads = 1 x 8 warps (rows x "
       "positions), lanes 8 x 4, 1 row x 1 position per access, 2 steps; 26 register words per "
       "element"},
      {300,
       "shared memory: the combine's states took the tile to 385416 bytes, over the 49152 a "
       "kernel may hold statically; wr=1,wp=8,vr=1 became wr=1,wp=1,vr=1 (48184 bytes)"}};
  for (const auto& [n, expected] : explained) {
    const std::string file = write_wide_scan(path(fmt::format("wide{}.kdsl", n)), n);
    CliResult r = kdsl({"emit", file, "-k", "wide", "--shape", "B=1,L=32768,D=2048", "--arch",
                        "sm_90", "--explain"});
    EXPECT_EQ(r.code, 0) << show(r);
    EXPECT_NE(r.out.find(expected), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("within a budget"), std::string::npos) << r.out;
  }
  const std::string huge = write_wide_scan(path("wide700.kdsl"), 700);
  CliResult r = kdsl({"emit", huge, "-k", "wide", "--shape", "B=1,L=1000,D=64", "--arch", "sm_90"});
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_NE(r.err.find(huge + ":9:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": error: the scan's states need about "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("over the 49152 a kernel may hold statically"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("^"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: carry fewer values through one scan"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
}

// The row schedule's limit (a vector column reduction that keeps some loop variables, GroupNorm's
// backward) is a diagnostic at the store, as the scan schedule's are: compile and run print it
// once, with the line and a caret, not as a plain "kdsl: error: kernel ..." line.
TEST_F(CliTest, PartialColumnReductionIsOneDiagnosticAtTheStore) {
  const std::string expected =
      "examples/group_norm.kdsl:52:9: error: the column reduction into 'dw' keeps some loop "
      "variables and sums over the others, with a vector value; the GPU code generator does not "
      "support that yet (dsl/SPEC.md section 11.3)\n"
      "        dw[g, :] += dyf * xhat\n"
      "        ^~\n"
      "hint: the CPU reference interpreter runs it (kdsl run --device cpu)\n";
  for (bool json : {false, true}) {
    std::vector<std::string> args = {"compile", "examples/group_norm.kdsl",
                                     "-k",      "group_norm_bwd",
                                     "--dtype", "f32",
                                     "--shape", "K=64",
                                     "--arch",  "sm_90"};
    if (json) args.push_back("--json");
    CliResult r = kdsl(args);
    EXPECT_EQ(r.code, 1) << show(r);
    EXPECT_NE(r.err.find(expected), std::string::npos) << show(r);
    EXPECT_EQ(r.err.find("kdsl: error: "), std::string::npos) << show(r);
  }
  CliResult r = kdsl({"emit", "examples/group_norm.kdsl", "-k", "group_norm_bwd", "--dtype", "f32",
                      "--shape", "K=64", "--arch", "sm_90"});
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_EQ(r.err, expected) << show(r);
}

// A whole-sequence value used in vector math: the diagnostic points at that value (`last(h)`),
// not at the scan that is the expression's first operand.
TEST_F(CliTest, ScheduleErrorPointsAtTheWholeSequenceValue) {
  const std::string file = path("last_in_vector_math.kdsl");
  std::ofstream(file) << "@kernel\n"
                         "def k(x: Tensor[f32, (M, N)], *, y: Out[f32, (M, N)]):\n"
                         "    for m in parallel(M):\n"
                         "        h = cumsum(x[m, :])\n"
                         "        y[m, :] = h - last(h)\n";
  CliResult r = kdsl({"emit", file, "-k", "k", "--shape", "N=64", "--arch", "sm_90"});
  EXPECT_EQ(r.code, 1) << show(r);
  EXPECT_NE(r.err.find(file + ":5:23: error: a value computed along the whole sequence"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("\n                      ^~~~~~~\n"), std::string::npos) << r.err;
}

// bench and tune report a specialization that cannot be generated (exit 1) with or without a
// GPU; without one they used to say only that nothing was timed (exit 4).
TEST_F(CliTest, BenchAndTuneReportWhatCannotBeCompiled) {
  const std::string file = write_shifted_scan(path("shifted_scan.kdsl"));
  for (const char* command : {"bench", "tune"}) {
    CliResult r = kdsl({command, file, "-k", "k", "--shape", "M=4,N=64"});
    EXPECT_EQ(r.code, 1) << command << show(r);
    EXPECT_NE((r.out + r.err).find("a scan's result is shifted"), std::string::npos)
        << command << show(r);
  }
}

// The other comma-separated options ignore spaces around their items too: -k, --dtype, --arch;
// and KDSL_MATH takes any case and spaces around its value, as KDSL_CACHE does.
TEST_F(CliTest, ListsIgnoreSpacesAroundItems) {
  CliResult r = kdsl({"compile", kRms, "-k", "rms_norm, rms_norm_bwd", "--dtype", " f32 , bf16",
                      "--shape", "N=64", "--arch", "sm_90, sm_80"});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("8 specializations: 8 compiled"), std::string::npos) << r.out;
  CliResult math = kdsl({"emit", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "N=64",
                         "--arch", "sm_90", "--explain"},
                        {{"KDSL_MATH", " Accurate "}});
  EXPECT_EQ(math.code, 0) << show(math);
  EXPECT_NE(math.out.find("f32 math: full precision (KDSL_MATH=accurate)"), std::string::npos)
      << math.out;
}

// KDSL_CACHE: the documented spellings, and one warning naming them for anything else (the
// cache then stays on, its default).
TEST_F(CliTest, UnknownKdslCacheValueWarnsOnceAndKeepsTheCacheOn) {
  CliResult r = kdsl({"cache", "stats"}, {{"KDSL_CACHE", "maybe"}});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("cache                 on"), std::string::npos) << r.out;
  EXPECT_EQ(r.err,
            "kdsl: warning: kdsl cache: ignoring KDSL_CACHE='maybe': expected off (or 0, false, "
            "no) or on (or 1, true, yes); the disk cache is on\n");
  CliResult on = kdsl({"cache", "stats"}, {{"KDSL_CACHE", " Yes "}});
  EXPECT_EQ(on.err, "");
  EXPECT_NE(on.out.find("cache                 on"), std::string::npos) << on.out;
}

// KDSL_LOG_LEVEL is read as KDSL_CACHE and KDSL_MATH are: any case, spaces around ignored, blank
// as unset (TRACE was refused with a warning); another value is one warning, and warn stays.
TEST_F(CliTest, LogLevelSpellings) {
  const std::vector<std::string> run = {"run", kRms,      "-k",      "rms_norm", "--dtype",
                                        "f32", "--shape", "M=2,N=8", "--device", "cpu"};
  for (const std::string level : {"INFO", " Info ", "TRACE", "\tdebug\t"}) {
    CliResult r = kdsl(run, {{"KDSL_LOG_LEVEL", level}});
    EXPECT_EQ(r.code, 0) << show(r);
    EXPECT_NE(r.err.find("kdsl: info: input x: random"), std::string::npos) << level << r.err;
    EXPECT_EQ(r.err.find("ignoring"), std::string::npos) << level << r.err;
  }
  for (const std::string level : {"ERROR", " Off ", "Warn", " "}) {
    CliResult r = kdsl(run, {{"KDSL_LOG_LEVEL", level}});
    EXPECT_EQ(r.code, 0) << show(r);
    EXPECT_EQ(r.err, "") << "'" << level << "'";
  }
  CliResult loud = kdsl(run, {{"KDSL_LOG_LEVEL", "loud"}});
  EXPECT_EQ(loud.code, 0) << show(loud);
  const std::string names = "trace, debug, info, warn, warning, error, err, critical or off";
  EXPECT_EQ(loud.err, "kdsl: warning: ignoring KDSL_LOG_LEVEL='loud': expected " + names + "\n");
  // The warning lists exactly the names that are accepted (it left out warning, err and critical).
  const std::regex separator(", | or ");
  for (std::sregex_token_iterator it(names.begin(), names.end(), separator, -1), end; it != end;
       ++it) {
    CliResult r = kdsl({"check", kRms}, {{"KDSL_LOG_LEVEL", it->str()}});
    EXPECT_EQ(r.code, 0) << show(r);
    EXPECT_EQ(r.err.find("ignoring"), std::string::npos) << it->str() << r.err;
  }
}

// i64 inputs beyond 2^53 (which the float64 reference rounds) are named in a warning; values
// up to it are not.
TEST_F(CliTest, I64InputsBeyondFloat64AreWarnedAbout) {
  const std::string kernel = path("cp.kdsl");
  std::ofstream(kernel) << "@kernel\ndef cp(x: Tensor[i64, (M, N)], *, y: Out[i64, (M, N)]):\n"
                           "    for m in parallel(M):\n        y[m, :] = x[m, :]\n";
  HostTensor big(DType::i64, {1, 2});
  const int64_t values[2] = {(int64_t{1} << 53) + 1, 7};
  std::memcpy(big.bytes.data(), values, sizeof values);
  write_npy(path("big.npy"), big);
  CliResult r =
      kdsl({"run", kernel, "-k", "cp", "--in", "x=" + path("big.npy"), "--device", "cpu"});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.err.find("kdsl: warning: input x: element 0 is 9007199254740993, beyond 2^53"),
            std::string::npos)
      << r.err;
  const int64_t fine[2] = {int64_t{1} << 53, -(int64_t{1} << 53)};
  std::memcpy(big.bytes.data(), fine, sizeof fine);
  write_npy(path("fine.npy"), big);
  CliResult ok =
      kdsl({"run", kernel, "-k", "cp", "--in", "x=" + path("fine.npy"), "--device", "cpu"});
  EXPECT_EQ(ok.code, 0) << show(ok);
  EXPECT_EQ(ok.err.find("warning"), std::string::npos) << ok.err;
  // Integer outputs are summarized in full, not as 9.0072e+15.
  EXPECT_NE(ok.out.find("y: i64 (1, 2): min -9007199254740992, max 9007199254740992"),
            std::string::npos)
      << ok.out;
}

// An i64 scalar given beyond 2^53 is read as a float64 (as a launch passes it) and rounded: a
// warning says so, as for --in NAME=const:; it was rounded without a word (found by a new-user
// test).
TEST_F(CliTest, I64ArgumentsBeyondFloat64AreWarnedAbout) {
  const std::string kernel = path("addk.kdsl");
  write_file(kernel,
             "@kernel\ndef addk(x: Tensor[i64, (M, N)], k: i64, *, y: Out[i64, (M, N)]):\n"
             "    for m in parallel(M):\n        y[m, :] = x[m, :] + k\n");
  auto run = [&](const std::string& k) {
    return kdsl({"run", kernel, "-k", "addk", "--shape", "M=1,N=2", "--in", "x=const:0", "--arg",
                 "k=" + k, "--device", "cpu"});
  };
  CliResult r = run("9007199254740993");
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_EQ(r.err,
            "kdsl: warning: --arg k=9007199254740993: the value 9007199254740992 is at or beyond "
            "2^53: it was read as a float64, exact only up to 2^53 in magnitude (dsl/SPEC.md "
            "section 14.1)\n");
  CliResult ok = run("-9007199254740991");
  EXPECT_EQ(ok.code, 0) << show(ok);
  EXPECT_EQ(ok.err, "");
  EXPECT_NE(ok.out.find("min -9007199254740991, max -9007199254740991"), std::string::npos)
      << ok.out;
}

// A bool scalar takes True and False (the language's spellings, any case) as well as 1 and 0;
// another word names those.
TEST_F(CliTest, BoolArgumentsTakeTrueAndFalse) {
  const std::string kernel = path("flag.kdsl");
  std::ofstream(kernel) << "@kernel\ndef k(x: Tensor[f32, (M, N)], flag: bool = False, *, "
                           "y: Out[f32, (M, N)]):\n    for m in parallel(M):\n"
                           "        y[m, :] = where(flag, 1.0, 2.0)\n";
  auto run = [&](const std::string& arg) {
    return kdsl({"run", kernel, "-k", "k", "--shape", "M=1,N=4", "--device", "cpu", "--arg",
                 "flag=" + arg});
  };
  for (const char* yes : {"True", "true", "1"}) {
    CliResult r = run(yes);
    EXPECT_EQ(r.code, 0) << show(r);
    EXPECT_NE(r.out.find("min 1, max 1"), std::string::npos) << yes << r.out;
  }
  for (const char* no : {"False", "FALSE", "0"}) {
    CliResult r = run(no);
    EXPECT_EQ(r.code, 0) << show(r);
    EXPECT_NE(r.out.find("min 2, max 2"), std::string::npos) << no << r.out;
  }
  CliResult bad = run("maybe");
  EXPECT_EQ(bad.code, 2) << show(bad);
  EXPECT_EQ(bad.err,
            "kdsl run: usage error: --arg flag=maybe: 'maybe' is not a decimal number (a bool: "
            "True, False, 1 or 0; e.g. --arg flag=True)\n");
}

// KDSL_DEBUG: 1, on, true, yes log the IR (and imply -v); 0, off, false, no and empty do not;
// another value is one warning and stays off (before, any value but 0 turned it on).
TEST_F(CliTest, DebugSpellings) {
  const std::vector<std::string> emit = {"emit", kRms,      "-k",  "rms_norm", "--dtype",
                                         "f32",  "--shape", "N=8", "--arch",   "sm_90"};
  for (const std::string v : {"1", " On ", "TRUE", "yes"}) {
    CliResult r = kdsl(emit, {{"KDSL_DEBUG", v}});
    EXPECT_EQ(r.code, 0) << show(r);
    EXPECT_NE(r.err.find("kdsl: info: IR after sema and specialization:"), std::string::npos)
        << "'" << v << "' " << r.err;
  }
  for (const std::string v : {"0", "off", "False", "no", ""}) {
    CliResult r = kdsl(emit, {{"KDSL_DEBUG", v}});
    EXPECT_EQ(r.code, 0) << show(r);
    EXPECT_EQ(r.err, "") << "'" << v << "'";
  }
  CliResult odd = kdsl(emit, {{"KDSL_DEBUG", "garbage"}});
  EXPECT_EQ(odd.code, 0) << show(odd);
  EXPECT_EQ(odd.err,
            "kdsl: warning: ignoring KDSL_DEBUG='garbage': expected 1, on, true or yes (on), or 0, "
            "off, false or no (off)\n");
}

TEST_F(CliTest, VerboseLogsCompileAndCacheDecisionsWithTimes) {
  std::vector<std::string> args = {"compile", kColSum, "--dtype", "f32",
                                   "--shape", "N=8",   "--arch",  "sm_90"};
  args.insert(args.begin(), "-v");
  CliResult miss = kdsl(args);
  EXPECT_EQ(miss.code, 0) << show(miss);
  EXPECT_NE(miss.err.find("kdsl: info: " + kColSum + ": parsed and checked in "), std::string::npos)
      << miss.err;
  EXPECT_NE(miss.err.find("kdsl: info: kdsl cache: miss, compiled and stored 'kdsl_col_sum_f32_n8' "
                          "for sm_90"),
            std::string::npos)
      << miss.err;
  EXPECT_NE(miss.err.find("kdsl: info: kdsl_col_sum_f32_n8 compiled for sm_90: "),
            std::string::npos);
  EXPECT_NE(miss.err.find("ms NVRTC"), std::string::npos);
  args.erase(args.begin());
  CliResult hit = kdsl(args, {{"KDSL_LOG_LEVEL", "info"}});  // the same through the environment
  EXPECT_NE(hit.err.find("kdsl: info: kdsl_col_sum_f32_n8 loaded from the disk cache for sm_90: "),
            std::string::npos)
      << hit.err;
}

// `kdsl cache list | clear | prune` leave files that are not entries alone (docs/cache.md): clear
// deleted a user's ab/my.kdslbin, which list showed with the key `abmy`.
TEST_F(CliTest, CacheLeavesFilesThatAreNotEntriesAlone) {
  const std::string mine = cache_dir() + "/ab/my.kdslbin";
  fs::create_directories(cache_dir() + "/ab");
  fs::permissions(cache_dir(), fs::perms::owner_all);
  write_file(mine, "keep\n");
  CliResult list = kdsl({"cache", "list"});
  EXPECT_EQ(list.code, 0) << show(list);
  EXPECT_EQ(list.out, "no entries in " + cache_dir() + "\n");
  for (const char* command : {"clear", "prune"}) {
    CliResult r = kdsl({"cache", command, "--json"});
    EXPECT_EQ(r.code, 0) << show(r);
    EXPECT_EQ(nlohmann::json::parse(r.out)["removed_entries"], 0) << r.out;
    EXPECT_EQ(read_text(mine), "keep\n") << command;
  }
}

// The entries of a shard folder the cache does not trust are neither counted, listed nor removed,
// as a compile neither loads nor replaces them, and each command says so (found by user testing:
// stats and list counted and showed them).
TEST_F(CliTest, CacheSkipsEntriesOfUntrustedShards) {
  ASSERT_EQ(kdsl({"compile", kColSum, "--shape", "N=16", "--arch", "sm_90"}).code, 0);
  auto all = nlohmann::json::parse(kdsl({"cache", "list", "--json"}).out);
  ASSERT_EQ(all.size(), 2u);
  const fs::path shard = fs::path(all[0]["path"].get<std::string>()).parent_path();
  int hidden = 0;
  for (const auto& e : all) hidden += fs::path(e["path"].get<std::string>()).parent_path() == shard;
  const int shown = 2 - hidden;
  const std::string n = fmt::format("{} entr{}", hidden, hidden == 1 ? "y" : "ies");
  fs::permissions(shard, fs::perms::all);
  const std::string why = shard.string() + " is writable by group or others (mode 0777)";

  CliResult stats = kdsl({"cache", "stats"});
  EXPECT_EQ(stats.code, 0) << show(stats);
  EXPECT_NE(stats.out.find(fmt::format("entries               {}\n", shown)), std::string::npos)
      << stats.out;
  EXPECT_NE(stats.out.find("ignored               " + n +
                           " in 1 shard folder the cache does not use (neither loaded, listed nor "
                           "removed):\n  " +
                           n + ": " + why),
            std::string::npos)
      << stats.out;
  auto sj = nlohmann::json::parse(kdsl({"cache", "stats", "--json"}).out);
  EXPECT_EQ(sj["entries"], shown);
  EXPECT_EQ(sj["ignored_entries"], hidden);
  ASSERT_EQ(sj["untrusted_shards"].size(), 1u) << sj;
  EXPECT_EQ(sj["untrusted_shards"][0]["path"], shard.string());
  EXPECT_EQ(sj["untrusted_shards"][0]["entries"], hidden);

  const std::string note = "kdsl: note: " + n + " in " + shard.string();
  CliResult list = kdsl({"cache", "list", "--json"});
  EXPECT_EQ(nlohmann::json::parse(list.out).size(), static_cast<size_t>(shown)) << list.out;
  EXPECT_NE(list.err.find(note + " not listed: the cache does not use that folder: " + why),
            std::string::npos)
      << list.err;
  CliResult clear = kdsl({"cache", "clear"});
  EXPECT_EQ(clear.code, 0) << show(clear);
  EXPECT_TRUE(clear.out.starts_with(fmt::format("removed {} entr", shown))) << clear.out;
  EXPECT_NE(clear.err.find(note + " not removed: the cache does not use that folder: " + why),
            std::string::npos)
      << clear.err;
  for (const auto& e : all) {
    const fs::path p = e["path"].get<std::string>();
    EXPECT_EQ(fs::exists(p), p.parent_path() == shard) << p;
  }
}

TEST_F(CliTest, CacheStatsListPruneClear) {
  CliResult empty = kdsl({"cache", "list"});
  EXPECT_EQ(empty.code, 0);
  EXPECT_EQ(empty.out, "no entries in " + cache_dir() + "\n");
  ASSERT_EQ(kdsl({"compile", kColSum, "--shape", "N=16", "--arch", "sm_90"}).code, 0);

  CliResult stats = kdsl({"cache", "stats"});
  EXPECT_EQ(stats.code, 0) << show(stats);
  EXPECT_NE(stats.out.find("cache directory       " + cache_dir() + "\n"), std::string::npos)
      << stats.out;
  EXPECT_NE(stats.out.find("entries               2\n  sm_90               2\n"), std::string::npos)
      << stats.out;
  EXPECT_NE(stats.out.find("size limit            1.0 GiB ("), std::string::npos) << stats.out;
  auto sj = nlohmann::json::parse(kdsl({"cache", "stats", "--json"}).out);
  EXPECT_EQ(sj["entries"], 2);
  EXPECT_EQ(sj["dir"], cache_dir());
  EXPECT_GT(sj["bytes"].get<uint64_t>(), 1000u);
  EXPECT_EQ(sj["max_bytes"], uint64_t{1} << 30);

  CliResult list = kdsl({"cache", "list"});
  EXPECT_EQ(count_lines(list.out), 3u) << list.out;  // header + 2 entries
  EXPECT_NE(list.out.find("kdsl_col_sum_f32_n16"), std::string::npos);
  EXPECT_NE(list.out.find("kdsl_col_sum_bf16_n16"), std::string::npos);
  auto lj = nlohmann::json::parse(kdsl({"cache", "list", "--json"}).out);
  ASSERT_EQ(lj.size(), 2u);
  EXPECT_EQ(lj[0]["arch"], "sm_90");
  EXPECT_EQ(lj[0]["key"].get<std::string>().size(), 32u);

  CliResult keep = kdsl({"cache", "prune"});
  EXPECT_EQ(keep.code, 0);
  EXPECT_TRUE(
      keep.out.starts_with("removed 0 entries (0 bytes) from " + cache_dir() + "; 2 entries ("))
      << keep.out;
  CliResult pruned = kdsl({"cache", "prune", "--max-size", "1", "--json"});
  auto pj = nlohmann::json::parse(pruned.out);
  EXPECT_EQ(pj["removed_entries"], 2);
  EXPECT_EQ(pj["entries"], 0);
  EXPECT_EQ(pj["max_bytes"], 1);
  CliResult bad = kdsl({"cache", "prune", "--max-size", "12X"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(count_lines(bad.err), 1u);

  ASSERT_EQ(kdsl({"compile", kColSum, "--dtype", "f32", "--shape", "N=16", "--arch", "sm_90"}).code,
            0);
  CliResult clear = kdsl({"cache", "clear"});
  EXPECT_EQ(clear.code, 0);
  EXPECT_TRUE(clear.out.starts_with("removed 1 entry (")) << clear.out;
  EXPECT_NE(clear.out.find("; 0 entries (0 bytes) left"), std::string::npos) << clear.out;

  // With the cache off the directory is not read: its entries are not reported as 0.
  ASSERT_EQ(kdsl({"compile", kColSum, "--dtype", "f32", "--shape", "N=16", "--arch", "sm_90"}).code,
            0);
  CliResult off = kdsl({"cache", "stats"}, {{"KDSL_CACHE", "off"}});
  EXPECT_NE(off.out.find("cache                 off (KDSL_CACHE)\n"), std::string::npos) << off.out;
  EXPECT_NE(off.out.find("entries               not counted (the cache is off)\n"),
            std::string::npos)
      << off.out;
  CliResult off_json = kdsl({"cache", "stats", "--json"}, {{"KDSL_CACHE", "off"}});
  EXPECT_TRUE(nlohmann::json::parse(off_json.out)["entries"].is_null()) << off_json.out;
}

// stats counts every entry where the cache stores it (DIR/<2 hex>/<30 hex>.kdslbin, one shard
// folder per key prefix) with the bytes of its file, and list shows the same ones; a file outside
// that layout (a deeper folder, the top directory) is not an entry.
TEST_F(CliTest, CacheStatsCountsTheEntriesOfEveryShardFolder) {
  ASSERT_EQ(kdsl({"compile", kRms, "-k", "rms_norm", "--dtype", "f32,bf16", "--shape",
                  "N=64,128,256", "--arch", "sm_90"})
                .code,
            0);
  uint64_t files = 0, bytes = 0;
  std::set<fs::path> shards;
  for (const auto& e : fs::recursive_directory_iterator(cache_dir())) {
    if (e.path().extension() != ".kdslbin") continue;
    ++files;
    bytes += e.file_size();
    shards.insert(e.path().parent_path());
    EXPECT_EQ(e.path().parent_path().parent_path(), fs::path(cache_dir())) << e.path();
  }
  ASSERT_EQ(files, 6u);  // 2 dtypes x 3 sizes
  ASSERT_GT(shards.size(), 1u);
  // Not entries: a file named like one in a folder below a shard folder, or in the top directory.
  const std::string name = fs::path(*shards.begin()).filename().string() + std::string(30, 'a');
  fs::create_directories(*shards.begin() / "ab");
  write_file((*shards.begin() / "ab" / (std::string(30, 'b') + ".kdslbin")).string(), "x");
  write_file(cache_dir() + "/" + name + ".kdslbin", "x");

  auto sj = nlohmann::json::parse(kdsl({"cache", "stats", "--json"}).out);
  EXPECT_EQ(sj["entries"], files) << sj;
  EXPECT_EQ(sj["bytes"], bytes) << sj;
  EXPECT_EQ(sj["entries_by_arch"], nlohmann::json({{"sm_90", files}})) << sj;
  CliResult stats = kdsl({"cache", "stats"});
  EXPECT_NE(stats.out.find("entries               6\n  sm_90               6\n"), std::string::npos)
      << stats.out;
  const std::string size = bytes < 1024 * 1024 ? fmt::format("{:.1f} KiB", bytes / 1024.0)
                                               : fmt::format("{:.1f} MiB", bytes / 1048576.0);
  EXPECT_NE(stats.out.find("cache size            " + size + "\n"), std::string::npos) << stats.out;
  EXPECT_EQ(nlohmann::json::parse(kdsl({"cache", "list", "--json"}).out).size(), files);
}

// ---------------------------------------------------------------------------------------------
// run on the CPU reference

// A value below f64's smallest normal is within its range: a subnormal (4e-320) is kept, and
// 1e-400 rounds to 0, for --in const: and --arg alike; only an overflow is out of range. Both
// were refused as "out of the range of f64" (found by a new-user test).
TEST_F(CliTest, TinyValuesAreWithinTheRangeOfF64) {
  const std::string f = path("tiny.kdsl");
  write_file(f,
             "@kernel\ndef k(x: Tensor[f64, (M, N)], s: f64, *, y: Out[f64, (M, N)]):\n"
             "    for m in parallel(M):\n"
             "        y[m, :] = x[m, :] * 1e300 + s\n");
  CliResult r = kdsl({"run", f, "-k", "k", "--device", "cpu", "--shape", "M=1,N=2", "--in",
                      "x=const:4e-320", "--arg", "s=1e-400", "--json"});
  ASSERT_EQ(r.code, 0) << show(r);
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["inputs"]["x"]["value"].get<double>(), 4e-320) << r.out;
  EXPECT_NEAR(doc["outputs"]["y"]["max"].get<double>(), 4e-20, 4e-23) << r.out;
  EXPECT_NEAR(doc["outputs"]["y"]["min"].get<double>(), 4e-20, 4e-23) << r.out;
  CliResult over =
      kdsl({"run", f, "-k", "k", "--device", "cpu", "--shape", "M=1,N=2", "--arg", "s=-1e400"});
  EXPECT_EQ(over.code, 2) << show(over);
  EXPECT_EQ(over.err,
            "kdsl run: usage error: --arg s=-1e400: '-1e400' is out of the range of f64\n");
}

// Values that their dtype cannot hold are refused, not truncated or saturated: --arg on an
// integer scalar (1.5 became 1, 3e9 became 2^31 - 1), --in const: beyond an integer's range or a
// float's largest finite value; inf stays allowed for floats.
TEST_F(CliTest, ValuesThatDoNotFitTheirDtypeAreRefused) {
  const std::string file = path("int_scalar.kdsl");
  std::ofstream(file) << "@kernel\n"
                         "def add_k(x: Tensor[i32, (M, N)], k: i32, *, y: Out[i32, (M, N)]):\n"
                         "    for m in parallel(M):\n"
                         "        y[m, :] = x[m, :] + k\n";
  auto run = [&](std::vector<std::string> a, const std::vector<std::string>& extra) {
    a.insert(a.end(), extra.begin(), extra.end());
    return kdsl(a);
  };
  const std::vector<std::string> ints = {"run",     file,      "-k",       "add_k",
                                         "--shape", "M=2,N=3", "--device", "cpu"};
  const std::vector<std::string> rms = {"run",     kRms,      "-k",       "rms_norm",
                                        "--shape", "M=2,N=8", "--device", "cpu"};
  const std::pair<std::vector<std::string>, std::string> refused[] = {
      {{"--arg", "k=1.5"}, "--arg k=1.5: 'k' is i32, which holds whole numbers only"},
      {{"--arg", "k=nan"}, "--arg k=nan: 'k' is i32, which holds whole numbers only"},
      {{"--arg", "k=3e9"}, "--arg k=3e9: 'k' is i32, which holds -2147483648 to 2147483647"},
      {{"--arg", "k=1", "--in", "x=const:3000000000"},
       "--in x=const:3000000000: 'x' is i32, which holds -2147483648 to 2147483647"}};
  for (const auto& [extra, message] : refused) {
    CliResult r = run(ints, extra);
    EXPECT_EQ(r.code, 1) << show(r);
    EXPECT_EQ(r.err, "kdsl: error: " + message + "\n");
  }
  CliResult ok = run(ints, {"--arg", "k=-7", "--in", "x=const:10"});
  EXPECT_EQ(ok.code, 0) << show(ok);
  EXPECT_NE(ok.out.find("min 3, max 3"), std::string::npos) << ok.out;
  CliResult f16 = run(rms, {"--dtype", "f16", "--in", "x=const:70000"});
  EXPECT_EQ(f16.code, 1) << show(f16);
  EXPECT_EQ(f16.err,
            "kdsl: error: --in x=const:70000: 'x' is f16, whose largest finite value is 65504 "
            "(give inf for infinity)\n");
  EXPECT_EQ(run(rms, {"--dtype", "f16", "--in", "x=const:inf"}).code, 0);
  EXPECT_EQ(run(rms, {"--dtype", "f32", "--arg", "eps=1e39"}).code, 1);
}

// A .npy header's shape is a tuple of non-negative integers: a sign or a decimal point is an
// error ((2,-4) was read as (2, 4)); rank 0 and 1 tuples still read. A pipe is read to its end
// (its size is not known before).
TEST_F(CliTest, NpyShapesAreReadStrictlyAndPipesAreRead) {
  write_npy(path("x.npy"), tensor(DType::f32, {3, 8}, {}));
  std::ifstream in(path("x.npy"), std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = good.find("(3, 8)");
  ASSERT_NE(at, std::string::npos);
  for (std::string bad : {"(3,-8)", "(3, 8.)", "(3,,8)", "(3 8) ", "(3,+8)", "(,3,8)"}) {
    std::string text = good;
    text.replace(at, 6, bad.substr(0, 6));
    if (bad.size() > 6) text.insert(at + 6, bad.substr(6));
    write_file(path("bad.npy"), text);
    CliResult r = kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f32", "--device", "cpu", "--in",
                        "x=" + path("bad.npy")});
    EXPECT_EQ(r.code, 1) << bad << show(r);
    EXPECT_NE(r.err.find("is not a tuple of non-negative integers"), std::string::npos)
        << bad << r.err;
  }
  EXPECT_EQ(read_npy(path("x.npy"), DType::f32).shape, (std::vector<int64_t>{3, 8}));
  write_npy(path("v.npy"), tensor(DType::f32, {8}, {}));
  EXPECT_EQ(read_npy(path("v.npy"), DType::f32).shape, (std::vector<int64_t>{8}));
  // Through a pipe: kdsl reads /dev/stdin, which the shell connects to `cat`.
  const std::string script = path("pipe.sh");
  write_file(script,
             "#!/bin/sh\ncat \"$1\" | \"$2\" run \"$3\" -k rms_norm --dtype f32 --device cpu "
             "--in x=/dev/stdin\n",
             true);
  const std::string cmd = script + " " + path("x.npy") + " " + cli_path() + " " + src(kRms) +
                          " > " + path("pipe.out") + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << read_text(path("pipe.out"));
  EXPECT_NE(read_text(path("pipe.out")).find("y: f32 (3, 8)"), std::string::npos)
      << read_text(path("pipe.out"));
}

// .npy headers as NumPy reads them (a Python dict literal, by ast.literal_eval): a trailing comma
// in the shape tuple is accepted ('shape': (4, 8, ) was "not a tuple of non-negative integers");
// a header that is not a dict says so (}{}{ was "unsupported dtype ''"); a key given twice (the
// first 'descr' was used, literal_eval keeps the last), a key missing (no 'shape' read as a
// scalar) or one NumPy does not know is refused.
TEST_F(CliTest, NpyHeadersAreReadAsNumPyReadsThem) {
  write_npy(path("x.npy"), tensor(DType::f32, {4, 8}, {}));
  const std::string good = read_text(path("x.npy"));
  const size_t data_at = 10 + (static_cast<unsigned char>(good[8]) | (good[9] << 8));
  // The file with `dict` as its header (padded as NumPy pads it) and x.npy's data.
  auto with_header = [&](const std::string& dict) {
    std::string header = dict + std::string((64 - (10 + dict.size() + 1) % 64) % 64, ' ') + "\n";
    std::string file("\x93NUMPY\x01\x00", 8);
    file += static_cast<char>(header.size() & 0xff);
    file += static_cast<char>(header.size() >> 8);
    write_file(path("h.npy"), file + header + good.substr(data_at));
    return path("h.npy");
  };
  const std::pair<std::string, std::vector<int64_t>> accepted[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 8, ), }", {4, 8}},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,8,)}", {4, 8}},
      {"{\"shape\": (32,), \"fortran_order\": False, \"descr\": \"<f4\"}", {32}},
      {"{'descr':'<f4','fortran_order':False,'shape':( 2 ,\n 16 )}", {2, 16}}};
  for (const auto& [dict, shape] : accepted) {
    EXPECT_EQ(read_npy(with_header(dict), DType::f32).shape, shape) << dict;
  }
  const std::string like =
      " (byte {} of the header; expected a Python dict such as {'descr': '<f4', 'fortran_order': "
      "False, 'shape': (2, 3), })";
  auto at_byte = [&](size_t byte) {
    std::string text = like;
    return text.replace(text.find("{}"), 2, std::to_string(byte));
  };
  const std::pair<std::string, std::string> refused[] = {
      {"}{}{", "malformed header: it does not start with '{'" + at_byte(0)},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 8), }{}",
       "malformed header: text follows the dict's '}'" + at_byte(59)},
      {"{'descr': '<f4', 'fortran_order': False 'shape': (4, 8)}",
       "malformed header: no ',' or '}' after the value of 'fortran_order'" + at_byte(40)},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 8}",
       "malformed header: '}' where ')' was expected" + at_byte(55)},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 8), 'descr': '<f8'}",
       "malformed header: it gives 'descr' twice"},
      {"{'descr': '<f4', 'fortran_order': False}", "malformed header: no 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 8), 'order': 'C'}",
       "malformed header: unexpected key 'order' (a .npy header holds descr, fortran_order and "
       "shape)"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (4, 8)}",
       "malformed header: fortran_order is 0, not True or False"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,)}",
       "unsupported dtype '[('a', '<f4')]' (expected f32; bf16 is stored as <u2, <i2 or <V2)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': 32}",
       "shape 32 is not a tuple of non-negative integers"},
      // A NUL byte (which ended the message: found by a new-user test) and other control bytes
      // of the header are shown escaped.
      {std::string("{'descr': '<f4\0\x1b', 'fortran_order': False, 'shape': (4,)}", 57),
       "unsupported dtype '<f4\\x00\\x1b' (expected f32; bf16 is stored as <u2, <i2 or <V2)"}};
  for (const auto& [dict, message] : refused) {
    const std::string file = with_header(dict);
    try {
      read_npy(file, DType::f32);
      ADD_FAILURE() << dict << " was read";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), file + ": " + message) << dict;
    }
  }
}

// --out through a symbolic link writes the link's target and keeps the link (the temporary file
// and rename used to replace the link); two spellings of a file not made yet are one file.
TEST_F(CliTest, OutWritesThroughSymbolicLinksAndKnowsSpellingsOfOneFile) {
  const std::filesystem::path target = tmp() / "target.npy", link = tmp() / "link.npy";
  std::filesystem::create_symlink(target, link);
  CliResult r = kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "M=2,N=8",
                      "--device", "cpu", "--out", "y=" + link.string()});
  EXPECT_EQ(r.code, 0) << show(r);
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(read_npy(target.string(), DType::f32).shape, (std::vector<int64_t>{2, 8}));
  // A replaced file keeps its mode (the temporary file's 0644 replaced a 0600 file's).
  const std::filesystem::path privy = tmp() / "private.npy";
  write_file(privy.string(), "old");
  std::filesystem::permissions(
      privy, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  CliResult kept = kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "M=2,N=8",
                         "--device", "cpu", "--out", "y=" + privy.string()});
  EXPECT_EQ(kept.code, 0) << show(kept);
  EXPECT_EQ(std::filesystem::status(privy).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  // Relative names (kdsl runs in the source directory here; the check stops it before writing).
  const std::string fresh = "kdsl-cli-test-never-written.npy";
  CliResult same = kdsl({"run", kRms, "-k", "add_rms_norm", "--dtype", "f32", "--shape", "M=2,N=8",
                         "--device", "cpu", "--out", "h=" + fresh, "--out", "y=./" + fresh});
  EXPECT_EQ(same.code, 2) << show(same);
  EXPECT_NE(same.err.find("name the same file"), std::string::npos) << same.err;
  EXPECT_FALSE(std::filesystem::exists(src(fresh)));
  // Symbolic links are followed before the run (found by a new-user test): a link to a file not
  // yet made and that file are one file (rstd overwrote y); a link into a missing directory, and
  // a loop, fail before anything runs or is written.
  const std::filesystem::path alias = tmp() / "alias.npy", fresh_target = tmp() / "fresh.npy";
  std::filesystem::create_symlink(fresh_target, alias);
  CliResult twice =
      kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "M=2,N=8", "--device",
            "cpu", "--out", "y=" + fresh_target.string(), "--out", "rstd=" + alias.string()});
  EXPECT_EQ(twice.code, 2) << show(twice);
  EXPECT_NE(twice.err.find("name the same file"), std::string::npos) << twice.err;
  EXPECT_FALSE(std::filesystem::exists(fresh_target));
  const std::filesystem::path dangling = tmp() / "dangling.npy", loop = tmp() / "loop.npy";
  std::filesystem::create_symlink(tmp() / "nowhere" / "z.npy", dangling);
  std::filesystem::create_symlink(loop, loop);
  write_file(privy.string(), "old");
  for (const auto& [bad, expected] :
       {std::pair<std::filesystem::path, std::string>{
            dangling, "(where " + dangling.string() + " links to): no such directory"},
        {loop, loop.string() + ": too many levels of symbolic links"}}) {
    CliResult r2 =
        kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "M=2,N=8", "--device",
              "cpu", "--out", "y=" + privy.string(), "--out", "rstd=" + bad.string()});
    EXPECT_EQ(r2.code, 1) << show(r2);
    EXPECT_NE(r2.err.find(expected), std::string::npos) << r2.err;
    EXPECT_EQ(read_text(privy), "old") << "an output was written before the error";
  }
}

TEST_F(CliTest, RunOnCpuReadsAndWritesNpyFiles) {
  // RMSNorm by hand with eps = 0: row [3, 4, 0, 0] has mean square 6.25, r = 0.4; row
  // [2, 2, 2, 2] has mean square 4, r = 0.5; y = x * r * w.
  write_npy(path("x.npy"), tensor(DType::f32, {2, 4}, {3, 4, 0, 0, 2, 2, 2, 2}));
  write_npy(path("w.npy"), tensor(DType::f32, {4}, {1, 2, 0.5, -1}));
  CliResult r = kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f32", "--device", "cpu", "--in",
                      "x=" + path("x.npy"), "--in", "w=" + path("w.npy"), "--arg", "eps=0", "--out",
                      "y=" + path("y.npy"), "--out", "rstd=" + path("r.npy")});
  ASSERT_EQ(r.code, 0) << show(r);
  EXPECT_EQ(r.out,
            "rms_norm (f32, M=2,N=4): ran on the CPU reference interpreter (float64) in " +
                r.out.substr(r.out.find(" in ") + 4, r.out.find(" ms\n") - r.out.find(" in ") - 4) +
                " ms\n"
                "y: f32 (2, 4): min -1, max 3.2, mean 0.8625 -> " +
                path("y.npy") +
                "\n"
                "rstd: f32 (2,): min 0.4, max 0.5, mean 0.45 -> " +
                path("r.npy") + "\n");
  HostTensor y = read_npy(path("y.npy"), DType::f32);
  ASSERT_EQ(y.shape, (std::vector<int64_t>{2, 4}));
  std::vector<double> want = {1.2, 3.2, 0, 0, 1, 2, 0.5, -1};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y.get(i), want[i], 1e-6) << i;
  HostTensor rstd = read_npy(path("r.npy"), DType::f32);
  EXPECT_NEAR(rstd.get(0), 0.4, 1e-7);
  EXPECT_NEAR(rstd.get(1), 0.5, 1e-7);
}

TEST_F(CliTest, RunOnCpuWithBf16NpyAndConstantInputs) {
  // bf16 travels as raw 16-bit patterns (<u2); w = const:2 gives y = 2 * x * r.
  write_npy(path("x.npy"), tensor(DType::bf16, {1, 4}, {1, -1, 1, -1}));
  CliResult r = kdsl({"run", kRms, "-k", "rms_norm", "-D", "T=bf16", "--device", "cpu", "--in",
                      "x=" + path("x.npy"), "--in", "w=const:2", "--arg", "eps=0", "--out",
                      "y=" + path("y.npy")});
  ASSERT_EQ(r.code, 0) << show(r);
  EXPECT_NE(read_text(path("y.npy")).find("'descr': '<u2'"), std::string::npos);
  HostTensor y = read_npy(path("y.npy"), DType::bf16);
  ASSERT_EQ(y.dtype, DType::bf16);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.get(i), i % 2 ? -2.0 : 2.0);
}

TEST_F(CliTest, RunOnCpuInOutStartsFromTheGivenValues) {
  // acc (InOut) starts at 1 and gets the column sums of x = 2 over M = 3 rows: 1 + 6 = 7.
  CliResult r = kdsl({"run", kColSum, "-k", "col_sum", "--dtype", "f32", "--shape", "M=3,N=5",
                      "--in", "x=const:2", "--in", "acc=const:1", "--device", "cpu", "--out",
                      "acc=" + path("acc.npy")});
  ASSERT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("acc: f32 (5,): min 7, max 7, mean 7 -> "), std::string::npos) << r.out;
  HostTensor acc = read_npy(path("acc.npy"), DType::f32);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(acc.get(i), 7.0);
}

TEST_F(CliTest, RunConvertsNpyDtypesOnlyWhenAsked) {
  write_npy(path("x.npy"), tensor(DType::f64, {1, 2}, {3, 4}));
  std::vector<std::string> args = {
      "run",      kRms,    "-k",    "rms_norm",           "--dtype", "bf16",
      "--device", "cpu",   "--in",  "x=" + path("x.npy"), "--in",    "w=const:1",
      "--arg",    "eps=0", "--out", "y=" + path("y.npy")};
  CliResult refused = kdsl(args);
  EXPECT_EQ(refused.code, 1);
  EXPECT_EQ(refused.err, "kdsl: error: " + path("x.npy") +
                             ": holds f64 values but 'x' is bf16 (add --convert to round them to "
                             "bf16)\n");
  args.push_back("--convert");
  CliResult ok = kdsl(args);
  ASSERT_EQ(ok.code, 0) << show(ok);
  HostTensor y = read_npy(path("y.npy"), DType::bf16);  // r = 1 / sqrt(12.5)
  EXPECT_NEAR(y.get(0), 3 / std::sqrt(12.5), 1e-2);
  EXPECT_NEAR(y.get(1), 4 / std::sqrt(12.5), 1e-2);
}

// --convert rounds to the parameter's dtype; a finite value beyond its largest becomes infinite,
// which is said (once, with a count), as a const: value beyond the dtype is refused.
TEST_F(CliTest, ConvertSaysWhenFiniteValuesBecomeInfinite) {
  const std::string kernel = path("twice.kdsl");
  write_file(
      kernel,
      "@kernel\ndef twice[T: (f32, f16, bf16)](x: Tensor[T, (M, N)], *, y: Out[T, (M, N)]):\n"
      "    for m in parallel(M):\n        y[m, :] = T(2.0 * f32(x[m, :]))\n");
  write_npy(path("x.npy"), tensor(DType::f64, {1, 4}, {1e300, 3, -7e4, 1e38}));
  auto run = [&](const std::string& dtype) {
    return kdsl({"run", kernel, "-k", "twice", "--dtype", dtype, "--device", "cpu", "--in",
                 "x=" + path("x.npy"), "--convert", "--out", "y=" + path("y.npy")});
  };
  CliResult f16 = run("f16");
  ASSERT_EQ(f16.code, 0) << show(f16);
  EXPECT_EQ(f16.err, "kdsl: warning: " + path("x.npy") +
                         ": 3 finite values beyond f16's largest became infinite under --convert "
                         "(the first at element 0: 1e+300)\n");
  HostTensor y = read_npy(path("y.npy"), DType::f16);
  EXPECT_EQ(y.get(1), 6.0);
  EXPECT_TRUE(std::isinf(y.get(2)) && y.get(2) < 0);
  CliResult f32 = run("f32");
  ASSERT_EQ(f32.code, 0) << show(f32);
  EXPECT_EQ(f32.err, "kdsl: warning: " + path("x.npy") +
                         ": 1 finite value beyond f32's largest became infinite under --convert "
                         "(the first at element 0: 1e+300)\n");
}

TEST_F(CliTest, RunRandomInputsAreSeeded) {
  auto run = [&](const std::string& seed, const std::string& out) {
    return kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f16", "--shape", "M=3,N=16", "--device",
                 "cpu", "--seed", seed, "--out", "y=" + path(out)});
  };
  ASSERT_EQ(run("7", "a.npy").code, 0);
  ASSERT_EQ(run("7", "b.npy").code, 0);
  ASSERT_EQ(run("8", "c.npy").code, 0);
  EXPECT_EQ(read_text(path("a.npy")), read_text(path("b.npy")));
  EXPECT_NE(read_text(path("a.npy")), read_text(path("c.npy")));
}

TEST_F(CliTest, RunJsonReport) {
  CliResult r = kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "M=2,N=8", "--in",
                      "w=const:0.5", "--device", "cpu", "--json"});
  ASSERT_EQ(r.code, 0) << show(r);
  auto j = nlohmann::json::parse(r.out);  // stdout is only the JSON
  EXPECT_EQ(j["kernel"], "rms_norm");
  EXPECT_EQ(j["dtype"], "f32");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["shape"], nlohmann::json({{"M", 2}, {"N", 8}}));
  EXPECT_EQ(j["inputs"]["x"]["source"], "random");
  EXPECT_EQ(j["inputs"]["w"], nlohmann::json({{"source", "const"}, {"value", 0.5}}));
  EXPECT_EQ(j["outputs"]["y"]["shape"], nlohmann::json({2, 8}));
  EXPECT_EQ(j["outputs"]["rstd"]["nan"], 0);
}

// ---------------------------------------------------------------------------------------------
// GPU-only actions without a GPU

TEST_F(CliTest, RunWithoutGpuCompilesAndExitsFour) {
  if (have_gpu()) GTEST_SKIP() << "skipped: a GPU is present (cli_gpu_test covers it)";
  CliResult r =
      kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "M=4,N=64", "--verify"});
  EXPECT_EQ(r.code, 4) << show(r);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(
      r.err.starts_with("kdsl: no GPU, so nothing ran: compiled kdsl_rms_norm_f32_n64 for "
                        "sm_90 (NVRTC); --device cpu runs the CPU reference. Reason: "))
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  // With --json an error prints no JSON (docs/cli.md): stdout stays empty, the message and the
  // exit status are the same.
  CliResult j = kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "M=4,N=64",
                      "--bench", "--json"});
  EXPECT_EQ(j.code, 4) << show(j);
  EXPECT_EQ(j.out, "");
  EXPECT_TRUE(j.err.starts_with("kdsl: no GPU, so nothing ran: ")) << j.err;
  // --out is checked first: an output named twice, or a directory for a file.
  const std::vector<std::string> run = {"run",     kRms,  "-k",      "rms_norm",
                                        "--dtype", "f32", "--shape", "M=4,N=64"};
  std::vector<std::string> twice = run;
  twice.insert(twice.end(), {"--out", "y=" + path("a.npy"), "--out", "y=" + path("b.npy")});
  CliResult dup = kdsl(twice);
  EXPECT_EQ(dup.code, 2) << show(dup);
  EXPECT_TRUE(dup.err.starts_with("kdsl run: usage error: --out sets 'y' twice")) << dup.err;
  std::vector<std::string> into_dir = run;
  into_dir.insert(into_dir.end(), {"--out", "y=" + tmp().string()});
  CliResult dir = kdsl(into_dir);
  EXPECT_EQ(dir.code, 1) << show(dir);
  EXPECT_TRUE(dir.err.starts_with("kdsl: error: --out y=" + tmp().string() + ": " + tmp().string() +
                                  " is a directory"))
      << dir.err;
}

TEST_F(CliTest, BenchWithoutGpuExitsFour) {
  if (have_gpu()) GTEST_SKIP() << "skipped: a GPU is present (cli_gpu_test covers it)";
  CliResult r =
      kdsl({"bench", kRms, "-k", "rms_norm", "--dtype", "bf16", "--shape", "M=64,N=1024,2048"});
  EXPECT_EQ(r.code, 4) << show(r);
  EXPECT_TRUE(
      r.err.starts_with("kdsl: no GPU, so nothing was timed: kdsl bench needs one. "
                        "Reason: "))
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1u);
  // The command line is checked first: a symbol without values is a usage error.
  CliResult usage = kdsl({"bench", kRms, "-k", "rms_norm", "--shape", "N=1024"});
  EXPECT_EQ(usage.code, 2);
  EXPECT_EQ(usage.err,
            "kdsl bench: usage error: kernel 'rms_norm' needs a value for M: add "
            "--shape M=SIZE\n");
  // ... and so is a --schedule hint that cannot apply (checked for the default target).
  CliResult hint = kdsl({"bench", "stdlib/scan.kdsl", "-k", "cumsum", "--dtype", "f32", "--shape",
                         "M=2,N=8", "--schedule", "vec=4"});
  EXPECT_EQ(hint.code, 2) << show(hint);
  EXPECT_TRUE(
      hint.err.starts_with("kdsl bench: usage error: --schedule: schedule hint vec=4: "
                           "'cumsum' is a scan kernel"))
      << hint.err;
  CliResult vec = kdsl({"bench", kRms, "-k", "rms_norm", "--dtype", "bf16", "--shape", "M=2,N=1001",
                        "--schedule", "vec=8"});
  EXPECT_EQ(vec.code, 2) << show(vec);
  // A specialization that cannot be generated fails its row with a GPU (exit 1): without one,
  // it is reported too, with the same exit code, rather than only "nothing was timed".
  CliResult row = kdsl({"bench", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape",
                        "M=4,N=8388608", "--schedule", "persistent=0"});
  EXPECT_EQ(row.code, 1) << show(row);
  EXPECT_NE(row.err.find("beyond the row schedule"), std::string::npos) << row.err;
}

TEST_F(CliTest, TuneWithoutGpuExitsFourAfterCheckingTheCommandLine) {
  if (have_gpu()) GTEST_SKIP() << "skipped: a GPU is present (cli_gpu_test covers it)";
  CliResult r = kdsl({"tune", kRms, "-k", "rms_norm", "--dtype", "bf16", "--shape", "M=8,N=1024"});
  EXPECT_EQ(r.code, 4) << show(r);
  EXPECT_TRUE(
      r.err.starts_with("kdsl: no GPU, so nothing was timed: kdsl tune needs one. Reason: "))
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1u);
  CliResult shape = kdsl({"tune", kRms, "-k", "rms_norm", "--dtype", "bf16", "--shape", "N=1024"});
  EXPECT_EQ(shape.code, 2) << show(shape);
  EXPECT_EQ(shape.err,
            "kdsl tune: usage error: kernel 'rms_norm' needs a value for shape symbol M: add "
            "--shape M=SIZE\n");
}

// tune --list prints the candidates without a GPU (with --arch, or sm_90 where there is none):
// the default first, each with its layout; --json gives the same as an object; --arch without
// --list is a usage error (tune times on the GPU in use).
TEST_F(CliTest, TuneListsItsCandidatesWithoutAGpu) {
  CliResult r = kdsl({"tune", src("stdlib/softmax.kdsl"), "-k", "softmax", "--dtype", "f32",
                      "--shape", "M=512,N=524288", "--list", "--arch", "sm_90"});
  ASSERT_EQ(r.code, 0) << show(r);
  EXPECT_TRUE(r.out.starts_with("softmax at M=512,N=524288 for sm_90: ")) << r.out;
  EXPECT_NE(r.out.find("\n  default "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  unroll=16 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> rows.cta (1024 threads per row"), std::string::npos) << r.out;
  CliResult j =
      kdsl({"tune", src("stdlib/linear_recurrence.kdsl"), "-k", "linear_recurrence", "--dtype",
            "bf16", "--shape", "B=1,L=32768,D=2048", "--list", "--arch", "sm_90", "--json"});
  ASSERT_EQ(j.code, 0) << show(j);
  nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["kernel"], "linear_recurrence");
  ASSERT_GE(doc["candidates"].size(), 2u) << j.out;
  EXPECT_EQ(doc["candidates"][0]["hint"], "");
  for (const auto& c : doc["candidates"]) {
    EXPECT_EQ(c["schedule"], "scan.columns") << c.dump();
    EXPECT_TRUE(c["summary"].get<std::string>().starts_with("scan.columns: L = 32768")) << c.dump();
  }
  CliResult arch = kdsl({"tune", kRms, "-k", "rms_norm", "--dtype", "bf16", "--shape", "M=8,N=1024",
                         "--arch", "sm_90"});
  EXPECT_EQ(arch.code, 2) << show(arch);
  EXPECT_EQ(arch.err,
            "kdsl tune: usage error: --arch sm_90: only with --list (kdsl tune times the "
            "candidates on this GPU, for its architecture)\n");
  // The timing options do nothing with --list: usage errors, not ignored.
  for (const char* opt : {"--warmup-ms=5", "--warmup=3", "--reps=3", "--dry-run"}) {
    CliResult timed = kdsl({"tune", kRms, "-k", "rms_norm", "--dtype", "bf16", "--shape",
                            "M=8,N=1024", "--list", opt});
    EXPECT_EQ(timed.code, 2) << opt << show(timed);
    EXPECT_NE(timed.err.find("usage error: --list excludes"), std::string::npos) << timed.err;
  }
}

// A specialization with one candidate (a scan of one position) says "1 candidate", not "1
// candidates" (found by a new-user test).
TEST_F(CliTest, TuneListCountsOneCandidateInTheSingular) {
  CliResult r = kdsl({"tune", src("stdlib/scan.kdsl"), "-k", "cumsum", "--dtype", "f32", "--shape",
                      "M=4,N=1", "--list", "--arch", "sm_90"});
  ASSERT_EQ(r.code, 0) << show(r);
  EXPECT_TRUE(r.out.starts_with("cumsum at M=4,N=1 for sm_90: 1 candidate\n  default ")) << r.out;
}

// Candidates that generate one kernel are listed (and timed) once: a kernel without a vector axis
// has no row loads to prefetch, and its prefetch=0 and prefetch=1 candidates were one launch
// listed twice, with an empty layout column (found by a new-user test).
TEST_F(CliTest, TuneListsEachScheduleOnce) {
  const std::string f = path("elem.kdsl");
  write_file(f,
             "@kernel\ndef e[T: (f32, f16)](x: Tensor[T, (M, 2)], *, y: Out[T, (M,)]):\n"
             "    for m in parallel(M):\n"
             "        y[m] = x[m, 0] * x[m, 1]\n");
  const std::vector<std::string> spec = {"-k", "e", "--dtype", "f16", "--arch", "sm_90"};
  std::vector<std::string> tune = {"tune", f, "--shape", "M=4096", "--list", "--json"};
  tune.insert(tune.end(), spec.begin(), spec.end());
  CliResult r = kdsl(tune);
  ASSERT_EQ(r.code, 0) << show(r);
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  std::vector<std::string> hints;
  for (const auto& c : doc["candidates"]) {
    hints.push_back(c["hint"]);
    EXPECT_TRUE(c["summary"].get<std::string>().starts_with("no vector axis: ")) << c.dump();
  }
  EXPECT_EQ(hints,
            (std::vector<std::string>{"", "group=1,prefetch=0,persistent=1",
                                      "group=2,prefetch=0,persistent=1", "group=2,persistent=0"}));
  // The CUDA of each, comments (which name the hint) aside: all different.
  auto code = [&](const std::string& hint) {
    std::vector<std::string> emit = {"emit", f};
    emit.insert(emit.end(), spec.begin(), spec.end());
    if (!hint.empty()) emit.insert(emit.end(), {"--schedule", hint});
    CliResult e = kdsl(emit);
    EXPECT_EQ(e.code, 0) << hint << show(e);
    std::string text, line;
    std::istringstream in(e.out);
    while (std::getline(in, line)) {
      if (line.find_first_not_of(' ') != line.find("//")) text += line + "\n";
    }
    return text;
  };
  std::set<std::string> seen;
  for (const std::string& h : hints) EXPECT_TRUE(seen.insert(code(h)).second) << h;
  // prefetch=1 there is the kernel of prefetch=0, and the explain says why.
  EXPECT_TRUE(code("group=1,prefetch=1,persistent=1") == code("group=1,prefetch=0,persistent=1"));
  std::vector<std::string> explain = {"emit", f, "--explain", "--schedule",
                                      "prefetch=1,persistent=1"};
  explain.insert(explain.end(), spec.begin(), spec.end());
  CliResult x = kdsl(explain);
  EXPECT_EQ(x.code, 0) << show(x);
  EXPECT_NE(x.out.find("prefetch=1 does not apply: the kernel has no row loads to prefetch"),
            std::string::npos)
      << x.out;
}

// ---------------------------------------------------------------------------------------------
// The README's quick start, with the kernel it shows

TEST_F(CliTest, ReadmeQuickStartKernel) {
  std::string readme = read_text(src("README.md"));
  size_t at = readme.find("`masked_softmax.kdsl`:\n\n```python\n");
  ASSERT_NE(at, std::string::npos) << "README.md lost its quick-start kernel";
  size_t begin = readme.find('\n', readme.find("```python", at)) + 1;
  std::string kernel = readme.substr(begin, readme.find("```\n", begin) - begin);
  write_file(path("masked_softmax.kdsl"), kernel);
  const std::string file = path("masked_softmax.kdsl");

  CliResult check = kdsl({"check", file});
  EXPECT_EQ(check.code, 0) << show(check);
  CliResult list = kdsl({"list", file});
  EXPECT_NE(list.out.find("masked_softmax[T: f32 | f16 | bf16](x: Tensor[T, (M, N)], mask: "
                          "Tensor[bool, (M, N)], scale: f32 = 1, *, y: Out[T, (M, N)])"),
            std::string::npos)
      << show(list);
  CliResult emit = kdsl({"emit", file, "-k", "masked_softmax", "--dtype", "bf16", "--shape",
                         "N=4096", "--explain", "--cuda", "--arch", "sm_90"});
  EXPECT_EQ(emit.code, 0) << show(emit);
  EXPECT_TRUE(emit.out.starts_with("kdsl_masked_softmax_bf16_n4096 for sm_90: schedule "))
      << emit.out;
  EXPECT_NE(emit.out.find("__global__"), std::string::npos);
  // The explain gives the accesses of the bf16 rows and of the bool mask, each its own; it read
  // "VEC = 8 (8-byte accesses)", the mask's width, as if it were the row's.
  EXPECT_NE(emit.out.find("\n  N = 4096: VEC = 8 (bf16: 16-byte accesses; bool: 8-byte accesses), "
                          "512 vectors per row -> "),
            std::string::npos)
      << emit.out;
  CliResult f32 = kdsl({"emit", file, "-k", "masked_softmax", "--dtype", "f32", "--shape", "N=4096",
                        "--explain", "--arch", "sm_90"});
  EXPECT_NE(f32.out.find("VEC = 8 (f32: 2 x 16-byte accesses per vector; bool: 8-byte accesses)"),
            std::string::npos)
      << show(f32);

  // Row 0 keeps entries 0, 1, 3 of x = 0: each 1/3; row 1 keeps none: zeros.
  HostTensor mask(DType::b8, {2, 4});
  for (int i : {0, 1, 3}) mask.set(i, 1);
  write_npy(path("mask.npy"), mask);
  CliResult run =
      kdsl({"run", file, "-k", "masked_softmax", "--dtype", "f32", "--in", "x=const:0", "--in",
            "mask=" + path("mask.npy"), "--device", "cpu", "--out", "y=" + path("y.npy")});
  ASSERT_EQ(run.code, 0) << show(run);
  HostTensor y = read_npy(path("y.npy"), DType::f32);
  std::vector<double> want = {1 / 3.0, 1 / 3.0, 0, 1 / 3.0, 0, 0, 0, 0};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y.get(i), want[i], 1e-7) << i;

  CliResult compile =
      kdsl({"compile", file, "--dtype", "f16,bf16", "--shape", "N=1024,4096", "--arch", "sm_90"});
  EXPECT_EQ(compile.code, 0) << show(compile);
  EXPECT_NE(compile.out.find("4 specializations: 4 compiled"), std::string::npos) << compile.out;
}

// ---------------------------------------------------------------------------------------------
// Schedule hints and seeds: a hint that is malformed or cannot apply is a usage error (exit code
// 2), whether it is found when the text is parsed or when the schedule is chosen; one line names
// the hint and why. So is a seed outside 0 to 2^64 - 1.

TEST_F(CliTest, ScheduleHintsThatCannotApplyAreUsageErrors) {
  auto emit = [&](const std::string& dtype, const std::string& n, const std::string& hint,
                  const std::string& arch = "sm_90") {
    return kdsl({"emit", kRms, "-k", "rms_norm", "--dtype", dtype, "--shape", "N=" + n, "--arch",
                 arch, "--schedule", hint, "--explain"});
  };
  const std::string usage = "kdsl emit: usage error: --schedule: schedule hint ";
  struct Case {
    CliResult r;
    std::string message;
  };
  std::vector<Case> cases = {
      {emit("bf16", "32768", "group=2048"),
       usage + "group=2048: more than 1024 threads per row need a cluster (cluster=2, 4 or 8)"},
      {emit("f32", "8192", "cluster=2", "sm_75"),
       usage + "cluster=2: thread-block clusters need sm_90 or newer, not sm_75"},
      {emit("f32", "8192", "persistent=1,stage=2", "sm_75"),
       usage + "stage=2: staging rows in shared memory needs sm_80 or newer, not sm_75"},
      {emit("f32", "8192", "group=256,,stage=2"),
       usage + "'group=256,,stage=2': item 2 is empty; give KEY=INTEGER items separated by commas"},
      {emit("f32", "8192", "group=256,"),
       usage + "'group=256,': item 2 is empty (a comma at the end); give KEY=INTEGER items "
               "separated by commas"},
      {emit("f32", "8192", "vec=99999999999999999999"),
       usage + "'vec=99999999999999999999': 99999999999999999999 is out of range (vec is 1, 2, 4 "
               "or 8)"},
      {emit("f32", "1001", "vec=8"),
       usage + "vec=8: N = 1001 is not a multiple of 8 (vec divides the row)"},
      {emit("f32", "8192", "prefetch=1"),
       usage + "prefetch=1: prefetching the next row needs a persistent grid (persistent=1)"},
      {emit("f32", "8192", "group=1"),
       usage + "group=1: 8192 elements per thread at N = 8192, beyond the row schedule (at most "
               "512; give a larger group)"},
      {kdsl({"compile", kRms, "-k", "rms_norm", "--dtype", "bf16", "--shape", "N=32768",
             "--schedule", "group=2048", "--arch", "sm_90", "--no-progress"}),
       "kdsl: error: --schedule: schedule hint group=2048: more than 1024 threads per row need a "
       "cluster (cluster=2, 4 or 8)"},
      // Row keys apply to row kernels, scan keys to scan kernels (vr along a middle axis only),
      // and no hint to the reference interpreter.
      {kdsl({"emit", "stdlib/scan.kdsl", "-k", "cumsum", "--dtype", "f32", "--shape", "N=100",
             "--arch", "sm_90", "--schedule", "vec=4"}),
       usage + "vec=4: 'cumsum' is a scan kernel; its keys are t, lp, wp and vr (vec, group, ... "
               "apply to row kernels: normalizations, softmax)"},
      {emit("f32", "8192", "t=4"),
       usage + "t=4: t, lp, wp and vr apply to scan kernels; 'rms_norm' is a row kernel (its keys "
               "are vec, group, cache_rows, ...)"},
      {kdsl({"emit", "stdlib/scan.kdsl", "-k", "cumsum", "--dtype", "f32", "--shape", "N=100",
             "--arch", "sm_90", "--schedule", "t=4,vr=2"}),
       usage + "t=4,vr=2: vr (rows per access) applies to scan.columns (a scan along a middle "
               "axis) only"},
      {kdsl({"emit", "stdlib/scan.kdsl", "-k", "cumsum_mid", "--dtype", "f32", "--shape",
             "B=1,L=4096,D=64", "--arch", "sm_90", "--schedule", "vr=16,lp=1,wp=1"}),
       usage + "lp=1,wp=1,vr=16: scan schedule: 512 rows per tile but 32 threads; the look-back "
               "needs a thread per row (raise wp or lp, or lower vr)"},
      {kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "M=4,N=100", "--device",
             "cpu", "--schedule", "vec=4"}),
       "kdsl run: usage error: --schedule chooses how the GPU code runs: with --device cpu the CPU "
       "reference interpreter runs, and it has no schedule"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.r.code, 2) << c.message << "\n" << show(c.r);
    EXPECT_NE(c.r.err.find(c.message + "\n"), std::string::npos) << show(c.r);
  }
  // Spaces around keys and values are ignored.
  CliResult spaced = emit("f32", "8192", " group = 256 , vec=4");
  EXPECT_EQ(spaced.code, 0) << show(spaced);
  EXPECT_NE(spaced.out.find("schedule hint: vec=4,group=256"), std::string::npos) << spaced.out;
}

// An empty --schedule (or one of blanks) is a usage error, as an empty --shape is, in every
// command that takes one: not read as "no hint".
TEST_F(CliTest, EmptyScheduleHintIsAUsageError) {
  const std::vector<std::string> spec = {kRms,    "-k",       "rms_norm", "--dtype",
                                         "f32",   "--shape",  "M=4,N=64", "--arch",
                                         "sm_90", "--device", "cpu"};
  for (const std::string command : {"emit", "run", "compile", "bench"}) {
    for (const std::string hint : {"", " \t "}) {
      std::vector<std::string> args = {command};
      // --arch is for emit and compile, --device for run; bench takes neither.
      for (size_t i = 0; i < spec.size(); ++i) {
        const bool arch = spec[i] == "--arch", device = spec[i] == "--device";
        if ((arch && (command == "run" || command == "bench")) || (device && command != "run")) {
          ++i;
          continue;
        }
        args.push_back(spec[i]);
      }
      args.insert(args.end(), {"--schedule", hint});
      CliResult r = kdsl(args);
      EXPECT_EQ(r.code, 2) << command << " '" << hint << "'\n" << show(r);
      EXPECT_EQ(r.err, "kdsl " + command +
                           ": usage error: --schedule: empty schedule hint: expected KEY=INTEGER "
                           "items separated by commas, e.g. group=512,prefetch=1 (see kdsl " +
                           command + " --help)\n")
          << command << " '" << hint << "'";
      EXPECT_EQ(r.out, "") << command;
    }
  }
  // An empty or blank KDSL_SCAN_SCHEDULE is as if unset.
  CliResult env = kdsl({"emit", "stdlib/scan.kdsl", "-k", "cumsum", "--dtype", "f32", "--shape",
                        "N=100", "--arch", "sm_90", "--explain"},
                       {{"KDSL_SCAN_SCHEDULE", " "}});
  EXPECT_EQ(env.code, 0) << show(env);
}

// An empty or blank -k is a usage error: compile and bench read it as no -k and took every kernel
// of the file, and run, emit and tune looked for a kernel named ''; an empty item of -k, --dtype
// or -D (a trailing comma) is an empty entry, as in --shape and --arch, not a kernel or dtype
// named '' (found by a new-user test).
TEST_F(CliTest, EmptyKernelOrDtypeEntriesAreUsageErrors) {
  for (const std::string k : {"", " "}) {
    CliResult compile = kdsl({"compile", kRms, "-k", k, "--dtype", "f32", "--shape", "N=8"});
    EXPECT_EQ(compile.code, 2) << show(compile);
    EXPECT_EQ(compile.err,
              "kdsl compile: usage error: --kernel: empty kernel list: expected one or more, e.g. "
              "-k rms_norm,rms_norm_bwd (see kdsl compile --help)\n");
    EXPECT_EQ(compile.out, "");
    CliResult run =
        kdsl({"run", kRms, "-k", k, "--dtype", "f32", "--shape", "M=4,N=8", "--device", "cpu"});
    EXPECT_EQ(run.code, 2) << show(run);
    EXPECT_EQ(run.err,
              "kdsl run: usage error: --kernel: empty kernel name: expected one, e.g. -k rms_norm "
              "(see kdsl run --help)\n");
  }
  EXPECT_FALSE(fs::exists(cache_dir())) << "something was compiled";
  const std::pair<std::vector<std::string>, std::string> lists[] = {
      {{"-k", "rms_norm,", "--dtype", "f32"}, "-k 'rms_norm,': empty entry"},
      {{"-k", "rms_norm", "--dtype", "f32, "}, "--dtype 'f32, ': empty entry"},
      {{"-k", "rms_norm", "-D", "T=f32,,bf16"}, "-D T 'f32,,bf16': empty entry"}};
  for (const auto& [extra, message] : lists) {
    std::vector<std::string> args = {"compile", kRms, "--shape", "N=8", "--arch", "sm_90"};
    args.insert(args.end(), extra.begin(), extra.end());
    CliResult r = kdsl(args);
    EXPECT_EQ(r.code, 2) << show(r);
    EXPECT_EQ(r.err, "kdsl compile: usage error: " + message + "\n");
  }
}

// Spaces around -D's generic name are ignored, as around the dtypes and --shape's names: -D "T =
// bf16" said "kernel 'rms_norm' has no generic named T " (found by a new-user test).
TEST_F(CliTest, DefineIgnoresSpacesAroundTheGenericName) {
  CliResult emit = kdsl({"emit", kRms, "-k", "rms_norm", "-D", " T = bf16", "--shape", "N=8",
                         "--arch", "sm_90", "--explain"});
  EXPECT_EQ(emit.code, 0) << show(emit);
  EXPECT_TRUE(emit.out.starts_with("kdsl_rms_norm_bf16_n8 for sm_90:")) << emit.out;
  CliResult compile = kdsl(
      {"compile", kRms, "-k", "rms_norm", "-D", "T =f32", "--shape", "N=8", "--arch", "sm_90"});
  EXPECT_EQ(compile.code, 0) << show(compile);
  CliResult blank = kdsl({"emit", kRms, "-k", "rms_norm", "-D", " =bf16", "--shape", "N=8"});
  EXPECT_EQ(blank.code, 2) << show(blank);
  EXPECT_EQ(blank.err,
            "kdsl emit: usage error: bad -D ' =bf16': expected GENERIC=DTYPE, e.g. -D T=bf16\n");
}

// An empty --arch is a usage error, not the default architecture (kdsl compile --arch "" compiled
// for sm_90); so is an empty --max-size (prune used KDSL_CACHE_MAX_SIZE).
TEST_F(CliTest, EmptyArchOrMaxSizeIsAUsageError) {
  for (const std::string arch : {"", " "}) {
    CliResult compile = kdsl(
        {"compile", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "N=8", "--arch", arch});
    EXPECT_EQ(compile.code, 2) << show(compile);
    EXPECT_EQ(compile.err,
              "kdsl compile: usage error: --arch: empty architecture list: expected one or more, "
              "e.g. sm_90 or sm_90,sm_100 (see kdsl compile --help)\n");
    EXPECT_EQ(compile.out, "");
    for (const std::string command : {"emit", "run"}) {
      CliResult r = kdsl({command, kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "M=4,N=8",
                          "--arch", arch});
      EXPECT_EQ(r.code, 2) << show(r);
      EXPECT_EQ(r.err, "kdsl " + command +
                           ": usage error: --arch: empty architecture: expected one, e.g. sm_90 "
                           "(see kdsl " +
                           command + " --help)\n");
      EXPECT_EQ(r.out, "");
    }
  }
  EXPECT_FALSE(fs::exists(cache_dir())) << "something was compiled";
  CliResult prune = kdsl({"cache", "prune", "--max-size", ""});
  EXPECT_EQ(prune.code, 2) << show(prune);
  EXPECT_NE(prune.err.find("usage error: --max-size: empty size: expected bytes with an optional "
                           "K, M, G or T suffix, e.g. 256M"),
            std::string::npos)
      << prune.err;
  // A well-formed size beyond 2^64 bytes says where the limit is (found by a new-user test).
  CliResult huge = kdsl({"cache", "prune", "--max-size", "99999999T"});
  EXPECT_EQ(huge.code, 2) << show(huge);
  EXPECT_NE(huge.err.find("at most 2^64 - 1 bytes"), std::string::npos) << huge.err;
}

// The explain counts in the singular for one: "1 chunk", "1 step", "1 position".
TEST_F(CliTest, ExplainCountsOneInTheSingular) {
  struct Case {
    const char *file, *kernel, *shape, *says;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"stdlib/scan.kdsl", "cumsum_mid", "B=1,L=1,D=64",
            "scan.columns: L = 1, forward scan: tiles of 1024 rows x 1 position (1 chunk); 256 "
            "threads = 8 x 1 warps (rows x positions), lanes 32 x 1, 4 rows x 1 position per "
            "access, 1 step; 2 register words per element\n"},
           {"stdlib/scan.kdsl", "cumsum", "M=2,N=100",
            "tiles of 8 rows x 128 positions (1 chunk); 256 threads = 1 x 8 warps (rows x "
            "positions), lanes 8 x 4, 1 row x 4 positions per access, 1 step; 2 register words "
            "per element\n"},
           {"stdlib/softmax.kdsl", "softmax", "N=1",
            "register-resident: about 1 register per thread holds the cached vectors (budget "
            "40)"}}) {
    CliResult r = kdsl({"emit", c.file, "-k", c.kernel, "--dtype", "f32", "--shape", c.shape,
                        "--arch", "sm_90", "--explain"});
    ASSERT_EQ(r.code, 0) << show(r);
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.kernel << ":\n" << r.out;
  }
}

// --seed is a whole number from 0 to 2^64 - 1: a negative seed is not wrapped around.
TEST_F(CliTest, SeedsOutOfRangeAreUsageErrors) {
  auto run = [&](const std::string& seed) {
    return kdsl({"run", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "M=2,N=8", "--device",
                 "cpu", "--seed", seed});
  };
  for (const char* seed : {"-1", "18446744073709551616", "1.5"}) {
    CliResult r = run(seed);
    EXPECT_EQ(r.code, 2) << show(r);
    EXPECT_EQ(r.err, std::string("kdsl run: usage error: --seed: '") + seed +
                         "' is not a whole number from 0 to 18446744073709551615 (see kdsl run "
                         "--help)\n");
  }
  CliResult largest = run("18446744073709551615");
  EXPECT_EQ(largest.code, 0) << show(largest);
}

// ---------------------------------------------------------------------------------------------
// Malformed command lines: one line on stderr, exit code 1 or 2, nothing else.

struct Malformed {
  std::vector<std::string> args;
  int code;
  std::string message;  // the whole line
  bool prefix = false;  // message is only the start of the line
};

TEST_F(CliTest, MalformedCommandLinesGiveOneClearLine) {
  write_npy(path("x24.npy"), tensor(DType::f32, {2, 4}, {}));
  write_npy(path("x3d.npy"), tensor(DType::f32, {2, 4, 1}, {}));
  write_npy(path("i32.npy"), tensor(DType::i32, {2, 4}, {}));
  write_file(path("junk.npy"), "not a numpy file");
  const std::string t = tmp().string();
  const long name_max = std::max(::pathconf(t.c_str(), _PC_NAME_MAX), 255L);
  const std::string too_long = std::string(name_max + 1, 'a') + ".npy";
  const std::vector<std::string> run = {"run", kRms, "-k", "rms_norm", "--device", "cpu"};
  auto cmd = [&](std::initializer_list<std::string> extra) {
    std::vector<std::string> a = run;
    a.insert(a.end(), extra);
    return a;
  };
  std::vector<Malformed> cases = {
      {cmd({"--dtype", "f32", "--shape", "N=8", "--in", "x=" + t + "/x24.npy"}), 1,
       "kdsl: error: " + t + "/x24.npy: has shape (2, 4) but 'x' has shape (M, N) with N = 8"},
      // One kernel where a list is given; kdsl tune times its own schedules (no --schedule).
      {{"emit", kRms, "-k", "rms_norm,rms_norm_bwd", "--dtype", "f32", "--shape", "N=8"},
       2,
       "kdsl emit: usage error: -k rms_norm,rms_norm_bwd: this command takes one kernel (kdsl "
       "compile and kdsl bench take lists)"},
      {{"tune", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "M=8,N=8", "--schedule",
        "vec=4"},
       2,
       "kdsl tune: usage error: unexpected arguments '--schedule', 'vec=4' (see kdsl tune --help)"},
      {cmd({"--dtype", "f32", "--in", "x=" + t + "/x3d.npy"}), 1,
       "kdsl: error: " + t + "/x3d.npy: has shape (2, 4, 1) but 'x' has shape (M, N)"},
      {cmd({"--dtype", "f32", "--in", "w=" + t + "/x24.npy"}), 1,
       "kdsl: error: " + t + "/x24.npy: has shape (2, 4) but 'w' has shape (N,)"},
      {cmd({"--dtype", "f32", "--in", "x=" + t + "/i32.npy"}), 1,
       "kdsl: error: " + t +
           "/i32.npy: holds i32 values but 'x' is f32 (add --convert to round "
           "them to f32)"},
      {cmd({"--dtype", "f32", "--in", "x=" + t + "/missing.npy"}), 1,
       "kdsl: error: " + t + "/missing.npy: cannot open: No such file or directory"},
      {cmd({"--dtype", "f32", "--in", "x=" + t + "/junk.npy"}), 1,
       "kdsl: error: " + t + "/junk.npy: not a .npy file (bad magic)"},
      {cmd({"--dtype", "f32", "--in", "x=" + t}), 1,
       "kdsl: error: " + t + ": is a directory, not a .npy file"},
      {{"run", t + "/missing.kdsl", "-k", "rms_norm"},
       1,
       "kdsl: error: cannot open '" + t + "/missing.kdsl': No such file or directory"},
      {{"run", kRms, "-k", "rms_nrom", "--dtype", "f32"},
       1,
       "kdsl: error: no kernel named 'rms_nrom' in stdlib/rms_norm.kdsl (kernels: rms_norm, "
       "rms_norm_bwd, add_rms_norm, add_rms_norm_bwd)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=x"}), 2,
       "kdsl run: usage error: bad --shape entry 'N=x': a size is a non-negative integer; e.g. "
       "--shape M=1024,N=4096,8192"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=-8"}), 2,
       "kdsl run: usage error: bad --shape entry 'N=-8': a size is a non-negative integer; e.g. "
       "--shape M=1024,N=4096,8192"},
      {cmd({"--dtype", "f32", "--shape", "4,N=8"}), 2,
       "kdsl run: usage error: bad --shape entry '4': a size needs a NAME= before it; e.g. "
       "--shape M=1024,N=4096,8192"},
      {cmd({"--dtype", "f32", "--shape", "M=4,M=5"}), 2,
       "kdsl run: usage error: --shape sets M twice"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--reps", "0"}), 2,
       "kdsl run: usage error: --reps: '0' is not a whole number from 1 to 100000 (see kdsl run "
       "--help)"},
      {cmd({"--dtype", "", "--shape", "M=4,N=8"}), 2,
       "kdsl run: usage error: --dtype: empty dtype: expected one, e.g. bf16 (see kdsl run "
       "--help)"},
      // The timing options without --bench would be ignored.
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--reps", "5"}), 2,
       "kdsl run: usage error: --reps requires --bench (see kdsl run --help)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--no-flush", "--verify"}), 2,
       "kdsl run: usage error: --no-flush requires --bench (see kdsl run --help)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--warmup-ms", "5"}), 2,
       "kdsl run: usage error: --warmup-ms requires --bench (see kdsl run --help)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--bench", "--warmup-ms", "-1"}), 2,
       "kdsl run: usage error: --warmup-ms: '-1' is not a number from 0 to 10000 (see kdsl run "
       "--help)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--bench", "--warmup-ms", "nan"}), 2,
       "kdsl run: usage error: --warmup-ms: 'nan' is not a number from 0 to 10000 (see kdsl run "
       "--help)"},
      // Read as --seed is: no leading spaces, no hexadecimal (strtod took both).
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--bench", "--warmup-ms", " 5"}), 2,
       "kdsl run: usage error: --warmup-ms: ' 5' is not a number from 0 to 10000 (see kdsl run "
       "--help)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--bench", "--warmup-ms", "0x10"}), 2,
       "kdsl run: usage error: --warmup-ms: '0x10' is not a number from 0 to 10000 (see kdsl "
       "run --help)"},
      {cmd({"--dtype", "bf16", "--shape", "M=4,N=8", "--schedule", "group=64,group=64"}), 2,
       "kdsl run: usage error: --schedule: schedule hint 'group=64,group=64': group is given "
       "twice"},
      {cmd({"--dtype", "f32", "--shape", "M=4"}), 2,
       "kdsl run: usage error: kernel 'rms_norm' needs a value for shape symbol N: add --shape "
       "N=SIZE (or an --in file that has it)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8,K=2"}), 1,
       "kdsl: error: kernel 'rms_norm' has no shape symbol K (symbols: M, N)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8,16"}), 2,
       "kdsl run: usage error: this command takes one value per shape symbol, got 2 for N (kdsl "
       "compile and kdsl bench take lists)"},
      {cmd({"--dtype", "f64", "--shape", "M=4,N=8"}), 1,
       "kdsl: error: kernel 'rms_norm' does not allow T = f64 (allowed: f32, f16, bf16)"},
      {cmd({"--dtype", "f17", "--shape", "M=4,N=8"}), 2,
       "kdsl run: usage error: --dtype: unknown dtype 'f17' (dtypes: f16, bf16, f32, f64, i32, "
       "i64, bool, c64)"},
      {cmd({"--shape", "M=4,N=8"}), 2,
       "kdsl run: usage error: kernel 'rms_norm' needs a dtype for T (one of f32, f16, bf16): add "
       "--dtype or -D T=DTYPE"},
      {cmd({"-D", "U=f32", "--shape", "M=4,N=8"}), 1,
       "kdsl: error: kernel 'rms_norm' has no generic named U"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--frobnicate"}), 2,
       "kdsl run: usage error: unexpected argument '--frobnicate' (see kdsl run --help)"},
      {{"run", kRms, "--dtype", "f32"},
       2,
       "kdsl run: usage error: --kernel is required (see kdsl run --help)"},
      {{"emit", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "N=8", "--arch",
        "sm_90,sm_80"},
       2,
       "kdsl emit: usage error: --arch sm_90,sm_80: this command takes one architecture (kdsl "
       "compile takes a list)"},
      // An unknown option is named before a missing required one, and CLI11's wording of
      // repeated or out-of-range values is kdsl's.
      {{"run", kRms, "--foo"},
       2,
       "kdsl run: usage error: unexpected argument '--foo' (see kdsl run --help)"},
      {{"run"}, 2, "kdsl run: usage error: a .kdsl file is required (see kdsl run --help)"},
      {{"emit", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "N=8", "--ptx", "--cuda"},
       2,
       "kdsl emit: usage error: give at most one of --ir, --cuda, --ptx, --sass (see kdsl emit "
       "--help)"},
      {cmd({"--dtype", "f32", "--dtype", "bf16", "--shape", "M=4,N=8"}), 2,
       "kdsl run: usage error: --dtype is given 2 times; it takes one value (see kdsl run --help)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--device", "tpu"}), 2,
       "kdsl run: usage error: --device: 'tpu' is not one of gpu, cpu (see kdsl run --help)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--in", "x"}), 2,
       "kdsl run: usage error: bad --in 'x': expected NAME=FILE.npy or NAME=const:VALUE"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--in", "q=const:1"}), 1,
       "kdsl: error: --in q=const:1: kernel 'rms_norm' has no input tensor 'q' (inputs: x, w)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--in", "x=const:one"}), 2,
       "kdsl run: usage error: --in x=const:one: 'one' is not a decimal number (e.g. const:1.5, "
       "const:-2e-3, const:-inf, const:nan)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--out", "z=" + t + "/z.npy"}), 1,
       "kdsl: error: --out z=" + t +
           "/z.npy: kernel 'rms_norm' has no output 'z' (outputs: y, "
           "rstd)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--out", "y=" + t + "/no/dir/y.npy"}), 1,
       "kdsl: error: --out y=" + t + "/no/dir/y.npy: cannot write into " + t +
           "/no/dir: no such directory"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--out", "y=" + t + "/junk.npy/y.npy"}), 1,
       "kdsl: error: --out y=" + t + "/junk.npy/y.npy: cannot write into " + t +
           "/junk.npy: not a directory"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--out", "y=" + t + "/a.npy", "--out",
            "rstd=" + t + "/r.npy", "--out", "y=" + t + "/b.npy"}),
       2, "kdsl run: usage error: --out sets 'y' twice: y=" + t + "/a.npy and y=" + t + "/b.npy"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--out", "y=" + t + "/a.npy", "--out",
            "rstd=" + t + "/./a.npy"}),
       2,
       "kdsl run: usage error: --out y=" + t + "/a.npy and rstd=" + t +
           "/./a.npy name the same file; one would overwrite the other"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--out", "y=" + t}), 1,
       "kdsl: error: --out y=" + t + ": " + t + " is a directory; give a file name, e.g. " + t +
           "/y.npy"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--out", "y=" + t + "/"}), 1,
       "kdsl: error: --out y=" + t + "/: " + t + "/ is a directory; give a file name, e.g. " + t +
           "/y.npy"},
      // A name longer than the file system allows is refused before the run.
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--out", "y=" + t + "/" + too_long}), 1,
       "kdsl: error: --out y=" + t + "/" + too_long + ": the file name is " +
           std::to_string(too_long.size()) + " bytes long; the file system of " + t +
           " allows at most " + std::to_string(name_max)},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--arg", "eps=small"}), 2,
       "kdsl run: usage error: --arg eps=small: 'small' is not a decimal number (e.g. --arg "
       "eps=1e-5)"},
      // Numbers beyond their type are out of range, not "not a number"; hexadecimal is refused
      // by --arg as by --shape.
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--arg", "eps=1e999"}), 2,
       "kdsl run: usage error: --arg eps=1e999: '1e999' is out of the range of f64"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--arg", "eps=0x10"}), 2,
       "kdsl run: usage error: --arg eps=0x10: '0x10' is not a decimal number (e.g. --arg "
       "eps=1e-5)"},
      {cmd({"--dtype", "f32", "--shape", "M=99999999999999999999,N=8"}), 2,
       "kdsl run: usage error: bad --shape entry 'M=99999999999999999999': a size is at most "
       "9223372036854775807 (2^63 - 1); e.g. --shape M=1024,N=4096,8192"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--arg", "gamma=1"}), 1,
       "kdsl: error: kernel 'rms_norm' has no scalar parameter 'gamma'"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--verify"}), 2,
       "kdsl run: usage error: --verify needs the GPU: with --device cpu the CPU reference is all "
       "that runs"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--schedule", "group=3"}), 2,
       "kdsl run: usage error: --schedule: schedule hint 'group=3': group is a power of two up to "
       "1024 (up to 1024 x cluster with a cluster)"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--schedule", "stage=1"}), 2,
       "kdsl run: usage error: --schedule: schedule hint 'stage=1': stage is 0 or 2 to 8"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=8", "--schedule", "nope=1"}), 2,
       "kdsl run: usage error: --schedule: schedule hint 'nope=1': keys are vec (1, 2, 4, 8), "
       "group (a power of two up to 1024 x cluster), cache_rows, cache_invariant, prefetch, pack, "
       "stream, persistent, smem_columns, butterfly, online, reread (0 or 1), min_ctas (1 to 32), "
       "cluster (1, 2, "
       "4, 8), stage (0, 2 to 8), unroll (0, 1, 2, 4, ..., 64), push (0 to 3); for scan kernels t "
       "(1 to 64), lp, "
       "wp (1 to 32), vr (1 to 16), "
       "powers of two"},
      {cmd({"--dtype", "f32", "--shape", "M=4,N=0"}), 1,
       "kdsl: error: kernel 'rms_norm': the vector axis N has size 0; it must be at least 1"},
      {{"compile", kRms, "-k", "rms_norm", "--dtype", "f32"},
       2,
       "kdsl compile: usage error: kernel 'rms_norm' needs a value for N (specialized: a "
       "compile-time constant): add --shape N=SIZE"},
      {{"compile", kRms, "-k", "rms_norm", "--shape", "N=8", "--arch", "sm_1"},
       2,
       "kdsl compile: usage error: --arch sm_1: NVRTC ",
       true},
      // (Before the missing shape: found by a new-user test.)
      {{"compile", kRms, "--arch", "nope"},
       2,
       "kdsl compile: usage error: --arch nope: NVRTC ",
       true},
      {{"emit", kRms, "-k", "rms_norm", "--arch", "nope"},
       2,
       "kdsl emit: usage error: --arch nope: NVRTC ",
       true},
      {{"run", kRms, "-k", "rms_norm", "--dtype", "f32", "--shape", "M=2,N=8", "--device", "cpu",
        "--arch", "nope"},
       2,
       "kdsl run: usage error: --arch nope: NVRTC ",
       true},
      {{"compile", kRms, "-k", "rms_norm,nope", "--shape", "N=8"},
       1,
       "kdsl: error: no kernel named 'nope' in stdlib/rms_norm.kdsl (kernels: rms_norm, "
       "rms_norm_bwd, add_rms_norm, add_rms_norm_bwd)"},
      {{"emit", kRms, "-k", "rms_norm", "--dtype", "f32", "--cuda"},
       2,
       "kdsl emit: usage error: kernel 'rms_norm' specializes N (a compile-time constant): give "
       "its value, e.g. --shape N=8192"},
      {{"list", t + "/missing.kdsl"},
       1,
       "kdsl: error: cannot open '" + t + "/missing.kdsl': No such file or directory"},
  };
  for (const Malformed& c : cases) {
    std::string line;
    for (const auto& a : c.args) line += a + " ";
    CliResult r = kdsl(c.args);
    EXPECT_EQ(r.code, c.code) << line << "\n" << show(r);
    EXPECT_EQ(count_lines(r.err), 1u) << line << "\n" << show(r);
    if (c.prefix) {
      EXPECT_TRUE(r.err.starts_with(c.message)) << line << "\n" << r.err;
    } else {
      EXPECT_EQ(r.err, c.message + "\n") << line;
    }
    EXPECT_EQ(r.out, "") << line;
  }
}

}  // namespace
}  // namespace kdsl::testing

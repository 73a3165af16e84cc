// The bad-input suite of the public C++ API (docs/reliability.md has the table): unreadable and
// malformed modules, unknown kernels, tensors of absurd or empty sizes, aliased outputs, and NaN
// and infinity inputs on the CPU reference interpreter. Each case gets a clear error or a
// documented result; nothing crashes. The wrong kinds, dtypes, ranks and sizes of launch
// arguments are in tests/launch_args_test.cpp; the same NaN/inf cases on the GPU in
// tests/ieee_gpu_test.cpp.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "src/runtime_impl.h"
#include "tests/fifo_writer.h"
#include "tests/ieee_cases.h"

namespace kdsl {
namespace {

namespace fs = std::filesystem;

const std::string kRoot = KDSL_SOURCE_DIR;

// A temporary folder for the files these tests write, removed at the end.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("kdsl-bad-input-" + std::to_string(::getpid()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name, const std::string& contents) const {
    std::string p = (path_ / name).string();
    std::ofstream(p, std::ios::binary) << contents;
    return p;
  }
  std::string path(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(a different exception) ") + e.what();
  }
  return "(no error)";
}

// ---- Module::load and Module::from_source ----------------------------------------------------

TEST(BadModule, MissingFile) {
  EXPECT_EQ(error_of<Error>([] { Module::load("/nonexistent/x.kdsl"); }),
            "cannot open '/nonexistent/x.kdsl': No such file or directory");
}

TEST(BadModule, Directory) {
  TempDir d;
  EXPECT_EQ(error_of<Error>([&] { Module::load(d.path("")); }),
            "cannot read '" + d.path("") + "': it is a directory, not a .kdsl file");
}

TEST(BadModule, PathThroughAFile) {
  TempDir d;
  std::string f = d.file("plain.kdsl", "X = 1\n");
  EXPECT_EQ(error_of<Error>([&] { Module::load(f + "/inner.kdsl"); }),
            "cannot open '" + f + "/inner.kdsl': Not a directory");
}

TEST(BadModule, UnreadableFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "skipped: root reads files whatever their permissions";
  TempDir d;
  std::string f = d.file("secret.kdsl", "X = 1\n");
  fs::permissions(f, fs::perms::none);
  EXPECT_EQ(error_of<Error>([&] { Module::load(f); }),
            "cannot open '" + f + "': Permission denied");
}

TEST(BadModule, EmptyFileIsAModuleWithoutKernels) {
  TempDir d;
  Module m = Module::load(d.file("empty.kdsl", ""));
  EXPECT_TRUE(m.kernel_names().empty());
  EXPECT_EQ(error_of<ArgumentError>([&] { m.kernel("rms_norm"); }),
            "no kernel named 'rms_norm' in " + d.path("empty.kdsl") + " (kernels: none)");
}

TEST(BadModule, BinaryGarbageIsASourceError) {
  TempDir d;
  std::mt19937 rng(1);
  std::string bytes(64 * 1024, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  std::string path = d.file("garbage.kdsl", bytes);
  std::string what = error_of<SourceError>([&] { Module::load(path); });
  // One error at the first NUL byte, not a parse of the bytes.
  const size_t nul = bytes.find('\0');
  const size_t line_start =
      bytes.rfind('\n', nul) == std::string::npos ? 0 : bytes.rfind('\n', nul) + 1;
  const auto line =
      std::count(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(nul), '\n') + 1;
  EXPECT_EQ(what.rfind(fmt::format("{}:{}:{}: error: a NUL byte: this is not a text file\n", path,
                                   line, nul - line_start + 1),
                       0),
            0u)
      << what.substr(0, 300);
  // The echoed line sends no control byte to the terminal (tabs and the newlines aside).
  for (char c : what) {
    const auto b = static_cast<unsigned char>(c);
    EXPECT_FALSE((b < 0x20 && b != '\n' && b != '\t') || b == 0x7f) << static_cast<int>(b);
  }
}

TEST(BadModule, HugeFileIsRefusedBeforeReading) {
  TempDir d;
  std::string path = d.path("huge.kdsl");
  { std::ofstream(path) << "X = 1\n"; }
  fs::resize_file(path, uintmax_t{5} << 30);  // sparse: 5 GiB, nothing written
  EXPECT_EQ(error_of<Error>([&] { Module::load(path); }),
            "'" + path + "' is 5368709120 bytes; a .kdsl module may be at most 16 MiB");
}

// Only a regular file (or a link to one) is read; anything else is refused before it is opened:
// opening a FIFO without a writer blocked for good, and a device has no end (found by a new-user
// test).
TEST(BadModule, FifoIsRefusedBeforeOpening) {
  TempDir d;
  testing::FifoWriter fifo(d.path("pipe.kdsl"));
  ASSERT_TRUE(fifo.ok());
  EXPECT_EQ(error_of<Error>([&] { Module::load(fifo.path()); }),
            "cannot read '" + fifo.path() + "': it is a FIFO (named pipe), not a regular file");
}

// The path is checked and then opened: a FIFO swapped into its place between the two (here by
// renameat2's atomic exchange, thousands of times) must be refused, not opened for a writer that
// never comes. A reader that blocked would get an empty file from the unblocking writer below,
// which fails the comparison instead of hanging the test.
TEST(BadModule, FifoSwappedInAfterTheCheckIsRefusedWithoutBlocking) {
  TempDir d;
  const std::string path = d.file("m.kdsl", "X = 1\n");
  const std::string other = d.path("other.kdsl");
  ASSERT_EQ(::mkfifo(other.c_str(), 0600), 0);
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    while (!stop) ::renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, other.c_str(), RENAME_EXCHANGE);
  });
  std::thread unblocker([&] {
    while (!stop) {
      for (const std::string& p : {path, other}) {
        const int fd = ::open(p.c_str(), O_WRONLY | O_NONBLOCK);  // (a regular file: unchanged)
        if (fd >= 0) ::close(fd);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  const std::string refused_fifo =
      "cannot read '" + path + "': it is a FIFO (named pipe), not a regular file";
  int read = 0, refused = 0;
  for (int i = 0; i < 4000; ++i) {
    try {
      EXPECT_EQ(SourceFile::read(path)->text(), "X = 1\n") << "read " << i;
      ++read;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), refused_fifo) << "read " << i;
      ++refused;
    }
  }
  stop = true;
  swapper.join();
  unblocker.join();
  std::printf("%d reads, %d refused as a FIFO\n", read, refused);
}

TEST(BadModule, DeviceIsRefusedBeforeReading) {
  if (!fs::exists("/dev/zero")) GTEST_SKIP() << "skipped: no /dev/zero";
  EXPECT_EQ(error_of<Error>([&] { Module::load("/dev/zero"); }),
            "cannot read '/dev/zero': it is a character device, not a regular file");
}

TEST(BadModule, LinkToARegularFileIsRead) {
  TempDir d;
  const std::string file = d.file("real.kdsl", "X = 1\n");
  fs::create_symlink(file, d.path("link.kdsl"));
  EXPECT_TRUE(Module::load(d.path("link.kdsl")).kernel_names().empty());
}

TEST(BadModule, HugeSourceInMemory) {
  std::string text(SourceFile::max_bytes + 1, '#');
  EXPECT_EQ(error_of<Error>([&] { Module::from_source(text, "big"); }),
            "'big' is 16777217 bytes; a .kdsl module may be at most 16 MiB");
}

TEST(BadModule, MalformedSourceRendersFileLineColumnAndCaret) {
  std::string what = error_of<SourceError>([] { Module::from_source("X = (1,\n", "bad.kdsl"); });
  EXPECT_EQ(what, "bad.kdsl:1:5: error: '(' was never closed\nX = (1,\n    ^\n");
}

TEST(BadModule, UnknownKernelListsTheKernels) {
  Module m = Module::load(kRoot + "/stdlib/softmax.kdsl");
  EXPECT_EQ(
      error_of<ArgumentError>([&] { m.kernel("softmx"); }),
      "no kernel named 'softmx' in " + kRoot +
          "/stdlib/softmax.kdsl (kernels: softmax, softmax_bwd, log_softmax, log_softmax_bwd)");
  EXPECT_EQ(error_of<ArgumentError>([&] { m.kernel(""); }).rfind("no kernel named '' in ", 0), 0u);
}

TEST(BadModule, TensorWithMoreAxesThanTheRuntimeSupports) {
  std::string what = error_of<SourceError>([] {
    Module::from_source(R"(
@kernel
def k(x: Tensor[f32, (A, B, C, D, E, F, G, H, N)], *, y: Out[f32, (A, B, C, D, E, F, G, H, N)]):
    for a, b, c, d, e, f, g, h in parallel(A, B, C, D, E, F, G, H):
        y[a, b, c, d, e, f, g, h, :] = x[a, b, c, d, e, f, g, h, :]
)",
                        "axes.kdsl");
  });
  EXPECT_EQ(what.rfind("axes.kdsl:3:22: error: a tensor has at most 8 axes\n", 0), 0u) << what;
}

// ---- TensorRef -------------------------------------------------------------------------------

TEST(BadTensor, NegativeSizeAndStride) {
  EXPECT_EQ(error_of<ArgumentError>([] {
              TensorRef::contiguous(nullptr, DType::f32, {4, -1});
            }),
            "tensor size -1 is negative");
  int64_t shape[] = {4, 4}, strides[] = {4, -1};
  EXPECT_EQ(
      error_of<ArgumentError>([&] { TensorRef::strided(nullptr, DType::f32, shape, strides); }),
      "tensor stride -1 is negative");
}

TEST(BadTensor, TooManyAxes) {
  std::vector<int64_t> shape(9, 1);
  EXPECT_EQ(error_of<ArgumentError>([&] { TensorRef::contiguous(nullptr, DType::f32, shape); }),
            "a tensor has at most 8 axes (got 9)");
}

TEST(BadTensor, ElementCountOverflow) {
  EXPECT_EQ(error_of<ArgumentError>([] {
              TensorRef::contiguous(nullptr, DType::f32, {int64_t{1} << 40, int64_t{1} << 40});
            }),
            "a tensor of shape 1099511627776x1099511627776 has more than 2^63 elements");
  TensorRef t;
  t.rank = 2;
  t.shape[0] = t.shape[1] = int64_t{1} << 40;
  EXPECT_EQ(error_of<ArgumentError>([&] { (void)t.numel(); }),
            "a tensor has more than 2^63 elements");
  t.rank = 12;
  EXPECT_EQ(error_of<ArgumentError>([&] { (void)t.numel(); }),
            "a tensor's rank must be 0 to 8 (got 12)");
}

// ---- launches of a stdlib kernel (argument checks need no GPU) ---------------------------------

void* address(int i) {
  return reinterpret_cast<void*>(uintptr_t{0x7f0000000000} + (uintptr_t(i) << 36));
}

class BadLaunch : public ::testing::Test {
 protected:
  Module module_ = Module::load(kRoot + "/stdlib/rms_norm.kdsl");
  Kernel kernel_ = module_.kernel("rms_norm");
  int64_t M = 64, N = 1024;
  TensorRef x_ = TensorRef::contiguous(address(1), DType::bf16, {M, N});
  TensorRef w_ = TensorRef::contiguous(address(2), DType::bf16, {N});
  TensorRef y_ = TensorRef::contiguous(address(3), DType::bf16, {M, N});
  TensorRef r_ = TensorRef::contiguous(address(4), DType::f32, {M});

  std::string error() const {
    std::vector<Arg> a = {x_, w_, Arg::use_default(), y_, r_};
    return error_of<ArgumentError>([&] {
      detail::BoundArgs b;
      kernel_.impl().bind(a, b);
    });
  }
};

TEST_F(BadLaunch, InputAliasedWithAnOutput) {
  y_.data = x_.data;  // y = x in place
  EXPECT_EQ(error(),
            "rms_norm: argument 'y' (4th of 5): overlaps argument 'x'; outputs must not "
            "alias other arguments (an InOut parameter updates a tensor in place)");
  y_.data = address(3);
  r_.data = static_cast<char*>(w_.data) + 64;  // rstd inside w
  EXPECT_EQ(error().find("argument 'rstd' (5th of 5): overlaps argument 'w'") != std::string::npos,
            true);
}

TEST_F(BadLaunch, ZeroRowsBindsAndEmptyRowsAreAnError) {
  x_ = TensorRef::contiguous(nullptr, DType::bf16, {0, N});
  y_ = TensorRef::contiguous(nullptr, DType::bf16, {0, N});
  r_ = TensorRef::contiguous(nullptr, DType::f32, {0});
  EXPECT_EQ(error(), "(no error)");
  x_ = TensorRef::contiguous(address(1), DType::bf16, {M, 0});
  w_ = TensorRef::contiguous(address(2), DType::bf16, {0});
  y_ = TensorRef::contiguous(address(3), DType::bf16, {M, 0});
  r_ = TensorRef::contiguous(address(4), DType::f32, {M});
  EXPECT_EQ(error(), "rms_norm: the vector axis N has size 0; it must be at least 1");
}

TEST_F(BadLaunch, NegativeSizeSetByHand) {
  x_.shape[0] = -5;
  EXPECT_EQ(error(), "rms_norm: argument 'x' (1st of 5): axis 0 has negative size -5");
}

TEST_F(BadLaunch, InvalidRankSetByHand) {
  x_.rank = 40;
  EXPECT_EQ(error(),
            "rms_norm: argument 'x' (1st of 5): expected 2 axes (M, N), got 40 axes "
            "(invalid rank 40)");
  x_.rank = -1;
  EXPECT_EQ(error(),
            "rms_norm: argument 'x' (1st of 5): expected 2 axes (M, N), got 0 axes "
            "(invalid rank -1)");
}

TEST_F(BadLaunch, SizesBeyondTheAddressSpace) {
  // Consistent sizes, each tensor spanning more than 2^63 bytes: refused before any overflow.
  int64_t big = int64_t{1} << 40;
  int64_t xs[] = {big, big}, xst[] = {big, 1};
  x_ = TensorRef::strided(address(1), DType::bf16, xs, xst);
  int64_t ws[] = {big}, wst[] = {1};
  w_ = TensorRef::strided(address(2), DType::bf16, ws, wst);
  EXPECT_EQ(error(),
            "rms_norm: argument 'x' (1st of 5): sizes (1099511627776, 1099511627776) and "
            "strides (1099511627776, 1) address more than 2^63 bytes");
  // Broadcast rows (stride 0) keep an input's span small: legal for x, never for an output,
  // whose rows would all be the same memory.
  int64_t bs[] = {big, 1024}, bst[] = {0, 1};
  x_ = TensorRef::strided(address(1), DType::bf16, bs, bst);
  w_ = TensorRef::contiguous(address(2), DType::bf16, {1024});
  y_ = TensorRef::strided(address(3), DType::bf16, bs, bst);
  EXPECT_EQ(error(),
            "rms_norm: argument 'y' (4th of 5): its elements overlap (axis 0 has size "
            "1099511627776 and stride 0); an output needs a separate element for each "
            "index");
  // Rows closer together than their length overlap too.
  int64_t os[] = {M, 1024}, ost[] = {512, 1};
  x_ = TensorRef::contiguous(address(1), DType::bf16, {M, 1024});
  y_ = TensorRef::strided(address(3), DType::bf16, os, ost);
  EXPECT_EQ(error(),
            "rms_norm: argument 'y' (4th of 5): its elements overlap (axis 0 has size 64 "
            "and stride 512); an output needs a separate element for each index");
  // Column-major is fine.
  int64_t cst[] = {1, M};
  y_ = TensorRef::strided(address(3), DType::bf16, os, cst);
  EXPECT_EQ(error(), "(no error)");
}

TEST_F(BadLaunch, AddressRangeWrapsAround) {
  x_.data = reinterpret_cast<void*>(UINTPTR_MAX - 1023);
  EXPECT_EQ(error(),
            "rms_norm: argument 'x' (1st of 5): sizes (64, 1024) and strides (1024, 1) "
            "address more than 2^63 bytes");
}

TEST_F(BadLaunch, NaNAndInfiniteScalarsAreAccepted) {
  // A scalar is a number like any other: eps = NaN makes every output NaN (see the table).
  std::vector<Arg> a = {x_, w_, std::numeric_limits<double>::quiet_NaN(), y_, r_};
  detail::BoundArgs b;
  kernel_.impl().bind(a, b);
  EXPECT_TRUE(std::isnan(b.scalars[kernel_.impl().slot_of(2)]));
}

// ---- NaN and infinity through the reference interpreter ---------------------------------------

class Ieee : public ::testing::TestWithParam<testing::IeeeCase> {};

TEST_P(Ieee, ReferenceInterpreterGivesTheDocumentedResult) {
  const testing::IeeeCase& c = GetParam();
  auto fe = run_front_end(SourceFile::read(kRoot + "/" + c.file));
  Problem p = testing::ieee_problem(c, fe);
  std::vector<HostTensor> out = run_reference(p);
  EXPECT_EQ(testing::ieee_classes(p, out, c.output), c.expected) << c.name;
  // Row 1 holds ordinary values: nothing leaks into it from row 0 (column reductions excepted).
  for (size_t t = 0; t < p.ir.tensors.size(); ++t) {
    const HostTensor& h = out[t];
    if (p.ir.tensors[t].role == ir::Role::in || h.shape.size() != 2) continue;
    for (int64_t j = 0; j < h.shape[1]; ++j) {
      EXPECT_TRUE(std::isfinite(h.get(h.shape[1] + j)))
          << c.name << ": " << p.ir.tensors[t].name << "[1, " << j << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Ieee, ::testing::ValuesIn(testing::ieee_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(BadShapes, ZeroRowsRunOnTheInterpreter) {
  auto fe = run_front_end(SourceFile::read(kRoot + "/stdlib/rms_norm.kdsl"));
  ProblemSpec ps;
  ps.kernel = "rms_norm_bwd";
  ps.binding = {DType::f32};
  ps.shapes = {{"M", 0}, {"N", 16}};
  Problem p = make_problem(fe, ps);
  std::vector<HostTensor> out = run_reference(p);
  // dw is a column sum over no rows: zeros.
  for (size_t t = 0; t < p.ir.tensors.size(); ++t) {
    if (p.ir.tensors[t].name != "dw") continue;
    for (int64_t j = 0; j < 16; ++j) EXPECT_EQ(out[t].get(j), 0.0);
  }
}

TEST(BadShapes, ZeroLengthRowsAreAnErrorBeforeLowering) {
  auto fe = run_front_end(SourceFile::read(kRoot + "/stdlib/rms_norm.kdsl"));
  ProblemSpec ps;
  ps.kernel = "rms_norm";
  ps.binding = {DType::f32};
  ps.shapes = {{"M", 4}, {"N", 0}};
  EXPECT_EQ(error_of<ArgumentError>([&] { make_problem(fe, ps); }),
            "kernel 'rms_norm': the vector axis N has size 0; it must be at least 1");
}

}  // namespace
}  // namespace kdsl

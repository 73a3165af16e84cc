// The runtime on a real GPU, through the public API (kdsl::Module, kdsl::Kernel): CUDA graph
// capture and replay, the workspace rule under capture, two GPUs in one process, launches from
// several threads, empty launches (M = 0) and errors thrown before anything is enqueued. Results
// are compared with the double-precision reference interpreter at the documented tolerance of
// their dtype (src/verify.h), outputs poisoned (0xff) first. Skips, saying so, without a driver.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <latch>
#include <map>
#include <optional>
#include <thread>

#include "gpu_test_util.h"

namespace kdsl {
namespace {

constexpr const char* kRms = "stdlib/rms_norm.kdsl";
constexpr const char* kColSum = "tests/data/col_sum.kdsl";  // a column reduction into an InOut

std::string source_path(const std::string& relative) {
  const char* root = std::getenv("KDSL_SOURCE_DIR");  // the tree may have moved (GPU machine)
  return std::string(root ? root : KDSL_SOURCE_DIR) + "/" + relative;
}

// The public handle of a kernel in the source tree (one Module per file, shared by the tests).
Kernel tree_kernel(const std::string& file, const std::string& name) {
  static std::map<std::string, Module> modules;
  auto it = modules.find(file);
  if (it == modules.end()) it = modules.emplace(file, Module::load(source_path(file))).first;
  return it->second.kernel(name);
}

// A blocking stream in the current context, so it is ordered after the legacy-stream memsets and
// copies the helpers below use. Never destroyed: a new stream could otherwise get the handle of
// one that already has a kdsl workspace, which would hide the capture rule tested below.
CUstream new_stream() {
  CUstream s = nullptr;
  check(driver().cuStreamCreate(&s, CU_STREAM_DEFAULT), "cuStreamCreate");
  return s;
}

void sync(CUstream s) {
  check(driver().cuStreamSynchronize(s), "cuStreamSynchronize");
}

// A kernel's problem with random inputs, on the device of the current context.
struct Case {
  Problem p;
  std::vector<DeviceTensor> dev;  // by IR tensor index
  std::vector<Arg> args;          // in parameter order
};

Case make_case(const std::string& file, const std::string& kernel, DType t, int64_t m, int64_t n,
               uint64_t seed) {
  ProblemSpec ps;
  ps.kernel = kernel;
  ps.binding = {t};
  ps.shapes = {{"M", m}, {"N", n}};
  ps.seed = seed;
  Case c{make_problem(testing::front_end(file), ps), {}, {}};
  for (const HostTensor& h : c.p.tensors) c.dev.push_back(DeviceTensor::upload(h));
  for (const ir::Param& prm : c.p.ir.params) {
    if (prm.is_tensor) {
      c.args.emplace_back(c.dev[prm.index].ref);
    } else {
      c.args.emplace_back(c.p.scalars[prm.index]);
    }
  }
  return c;
}

ir::Role role(const Case& c, size_t t) {
  return c.p.ir.tensors[t].role;
}

void upload(const Case& c, size_t t) {
  const HostTensor& h = c.p.tensors[t];
  if (h.bytes.empty()) return;
  check(driver().cuMemcpyHtoD(c.dev[t].buffer.ptr(), h.bytes.data(), h.bytes.size()),
        "cuMemcpyHtoD");
}

// Out tensors to 0xff bytes (NaN for floats); InOut tensors back to their host contents.
void reset_outputs(const Case& c) {
  for (size_t t = 0; t < c.dev.size(); ++t) {
    if (role(c, t) == ir::Role::out)
      check(driver().cuMemsetD8(c.dev[t].buffer.ptr(), 0xff, c.dev[t].buffer.size()), "cuMemsetD8");
    if (role(c, t) == ir::Role::inout) upload(c, t);
  }
  check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
}

// New random inputs (and InOut contents) in the same device buffers, and in c.p for the reference.
void refill_inputs(Case& c, uint64_t seed) {
  for (size_t t = 0; t < c.dev.size(); ++t) {
    if (role(c, t) == ir::Role::out) continue;
    fill_random(c.p.tensors[t], seed * 1000003ULL + t);
    upload(c, t);
  }
}

// Every tensor's device contents, after synchronizing the current context.
std::vector<HostTensor> download(const Case& c) {
  check(driver().cuCtxSynchronize(), "kernel execution (cuCtxSynchronize)");
  std::vector<HostTensor> got = c.p.tensors;
  for (size_t t = 0; t < got.size(); ++t) c.dev[t].download(got[t]);
  return got;
}

// Compares every output with the reference, at `tol` or else the documented tolerance of its dtype.
void expect_matches_reference(const Case& c, const std::vector<HostTensor>& got,
                              const std::string& label, std::optional<Tolerance> tol = {}) {
  std::vector<HostTensor> ref = run_reference(c.p);
  for (size_t t = 0; t < got.size(); ++t) {
    if (role(c, t) == ir::Role::in) continue;
    const ir::TensorParam& tp = c.p.ir.tensors[t];
    Comparison cmp = compare(got[t], ref[t], tol ? *tol : tolerance_for(tp.dtype));
    EXPECT_TRUE(cmp.ok) << label << ": output " << tp.name << ": " << cmp.mismatches << " of "
                        << cmp.checked << " off; worst " << describe_worst(got[t], cmp);
  }
}

void expect_same_outputs(const Case& c, const std::vector<HostTensor>& a,
                         const std::vector<HostTensor>& b, const std::string& label) {
  for (size_t t = 0; t < a.size(); ++t) {
    if (role(c, t) == ir::Role::in) continue;
    EXPECT_TRUE(a[t].bytes == b[t].bytes)
        << label << ": output " << c.p.ir.tensors[t].name << " differs";
  }
}

// A bound on the rounding error of acc + the column sums of x in f32 in any order (the classical
// bound: (M + 1) terms x 2^-24 x the sum of magnitudes, over the worst column), far below the
// size of one missing row for almost every column. The per-element default (1e-5 absolute) is
// not a bound for a sum of M terms that nearly cancels.
Tolerance f32_sum_tolerance(const HostTensor& x, const HostTensor& acc) {
  int64_t m = x.shape[0], n = x.shape[1];
  double worst = 0;
  for (int64_t j = 0; j < n; ++j) {
    double magnitude = std::fabs(acc.get(j));
    for (int64_t i = 0; i < m; ++i) magnitude += std::fabs(x.get(i * n + j));
    worst = std::max(worst, magnitude);
  }
  return {0, static_cast<double>(m + 1) * std::ldexp(1.0, -24) * worst};
}

// Out tensors still hold the 0xff poison: no kernel wrote them.
void expect_outputs_untouched(const Case& c, const std::string& label) {
  std::vector<HostTensor> got = download(c);
  for (size_t t = 0; t < got.size(); ++t) {
    if (role(c, t) != ir::Role::out) continue;
    bool poisoned =
        std::all_of(got[t].bytes.begin(), got[t].bytes.end(), [](uint8_t b) { return b == 0xff; });
    EXPECT_TRUE(poisoned) << label << ": output " << c.p.ir.tensors[t].name << " was written";
  }
}

// Captures kernel.launch(stream, args) into a graph (global capture mode, the strictest) and
// instantiates it. Ends the capture when the launch throws, then rethrows.
CUgraphExec capture(const Kernel& kernel, CUstream stream, const std::vector<Arg>& args) {
  const Driver& d = driver();
  check(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  CUgraph graph = nullptr;
  try {
    kernel.launch(stream, args);
  } catch (...) {
    d.cuStreamEndCapture(stream, &graph);
    if (graph) d.cuGraphDestroy(graph);
    throw;
  }
  check(d.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  CUgraphExec exec = nullptr;
  check(d.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  check(d.cuGraphDestroy(graph), "cuGraphDestroy");
  return exec;
}

// Replays `exec` on `s` with fresh outputs and returns every tensor.
std::vector<HostTensor> replay(const Case& c, CUgraphExec exec, CUstream s) {
  reset_outputs(c);
  check(driver().cuGraphLaunch(exec, s), "cuGraphLaunch");
  sync(s);
  return download(c);
}

// A direct launch on `s` (which also warms it up), then the same launch captured into a graph:
// capturing runs nothing, replaying gives the bits of the direct launch, and replaying after new
// inputs are copied into the same buffers gives the reference result for them.
void check_graph_replay(Case& c, const Kernel& kernel, CUstream s, const std::string& label) {
  reset_outputs(c);
  kernel.launch(s, c.args);
  sync(s);
  std::vector<HostTensor> direct = download(c);
  expect_matches_reference(c, direct, label + " direct launch");

  reset_outputs(c);
  CUgraphExec exec = capture(kernel, s, c.args);
  expect_outputs_untouched(c, label + " capture");
  expect_same_outputs(c, direct, replay(c, exec, s), label + " graph replay vs direct launch");

  refill_inputs(c, 1234);
  expect_matches_reference(c, replay(c, exec, s), label + " graph replay with new inputs");
  check(driver().cuGraphExecDestroy(exec), "cuGraphExecDestroy");
}

TEST(RuntimeGpu, GraphReplayOfRmsNormGivesTheBitsOfADirectLaunch) {
  KDSL_REQUIRE_GPU();
  Kernel k = tree_kernel(kRms, "rms_norm");
  for (auto [t, m, n] : {std::tuple{DType::bf16, 3001, 4096}, {DType::f32, 77, 1000}}) {
    Case c = make_case(kRms, "rms_norm", t, m, n, 1);
    check_graph_replay(c, k, new_stream(),
                       fmt::format("rms_norm {} M={} N={}", dtype_name(t), m, n));
  }
}

TEST(RuntimeGpu, ColumnReductionUnderCaptureNeedsOneLaunchOnTheStreamFirst) {
  KDSL_REQUIRE_GPU();
  Kernel k = tree_kernel(kRms, "rms_norm_bwd");
  Case c = make_case(kRms, "rms_norm_bwd", DType::bf16, 2000, 1024, 2);
  CUstream s = new_stream();
  k.prepare(c.args);  // compiled and loaded, but this stream has no workspace yet
  reset_outputs(c);
  try {
    capture(k, s, c.args);
    ADD_FAILURE() << "capturing rms_norm_bwd on a stream without workspace did not throw";
  } catch (const ArgumentError& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("rms_norm_bwd: this launch needs ", 0), 0u) << msg;
    EXPECT_NE(msg.find(" bytes of workspace for its column reductions, which cannot be allocated "
                       "while the stream is being captured into a CUDA graph; before capturing, "
                       "launch the kernel once on this stream (outside capture) with at least as "
                       "many rows"),
              std::string::npos)
        << msg;
  }
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  check(driver().cuStreamIsCapturing(s, &status), "cuStreamIsCapturing");
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  expect_outputs_untouched(c, "rms_norm_bwd after the refused capture");

  // One direct launch on the stream, then capture works; dw is deterministic, so the replay
  // gives the same bits.
  check_graph_replay(c, k, s, "rms_norm_bwd bf16 M=2000 N=1024");
  // Fewer rows need no more workspace: capturing them on the warmed stream works too.
  Case small = make_case(kRms, "rms_norm_bwd", DType::bf16, 7, 1024, 3);
  CUgraphExec exec = capture(k, s, small.args);
  expect_matches_reference(small, replay(small, exec, s),
                           "rms_norm_bwd M=7 graph on a warm stream");
  check(driver().cuGraphExecDestroy(exec), "cuGraphExecDestroy");
}

TEST(RuntimeGpu, OneProcessRunsAKernelOnTwoGpus) {
  KDSL_REQUIRE_GPU();
  if (device_count() < 2)
    GTEST_SKIP() << "skipped: needs two GPUs, " << device_count() << " visible";
  Kernel k = tree_kernel(kRms, "rms_norm");
  std::vector<Case> cases;
  std::vector<CUstream> streams;
  std::vector<CUcontext> contexts;
  for (int dev = 0; dev < 2; ++dev) {
    contexts.push_back(primary_context(dev));  // current from here on, until the next one
    cases.push_back(make_case(kRms, "rms_norm", DType::bf16, 1000 + dev, 4096, 20 + dev));
    streams.push_back(new_stream());
    reset_outputs(cases.back());
  }
  for (int dev = 0; dev < 2; ++dev) {  // both enqueued before either is waited for
    primary_context(dev);
    k.launch(streams[dev], cases[dev].args);
  }
  for (int dev = 0; dev < 2; ++dev) {
    primary_context(dev);
    expect_matches_reference(cases[dev], download(cases[dev]), fmt::format("device {}", dev));
  }
  // One specialization, loaded once per context.
  detail::BoundArgs b;
  k.impl().bind(cases[0].args, b);
  const detail::LoadedSpec& on0 = k.impl().loaded(b, contexts[0]);
  const detail::LoadedSpec& on1 = k.impl().loaded(b, contexts[1]);
  EXPECT_NE(&on0, &on1);
  EXPECT_NE(on0.main, on1.main);
  EXPECT_EQ(on0.plan.symbol, on1.plan.symbol);
  primary_context(0);
}

TEST(RuntimeGpu, FourThreadsLaunchAtOnceOnTheirOwnStreams) {
  KDSL_REQUIRE_GPU();
  constexpr int kThreads = 4, kIterations = 25;
  // f16 and bf16: their documented tolerances bound dw, a sum over 1500 rows (f32's does not).
  const DType dtypes[kThreads] = {DType::f16, DType::f16, DType::bf16, DType::bf16};
  const int64_t lengths[kThreads] = {1024, 4096, 4096, 760};
  Kernel fwd = tree_kernel(kRms, "rms_norm"), bwd = tree_kernel(kRms, "rms_norm_bwd");
  std::vector<Case> fcases, bcases;
  std::vector<CUstream> streams;
  for (int i = 0; i < kThreads; ++i) {
    fcases.push_back(make_case(kRms, "rms_norm", dtypes[i], 1500 + 17 * i, lengths[i], 40 + i));
    bcases.push_back(make_case(kRms, "rms_norm_bwd", dtypes[i], 1500 + 17 * i, lengths[i], 50 + i));
    reset_outputs(fcases.back());
    reset_outputs(bcases.back());
    streams.push_back(new_stream());
  }
  // Each thread starts with no current context (kdsl makes device 0's primary current), compiles
  // or loads its specializations concurrently with the others, then launches in a loop; the
  // backward passes use per-stream workspaces at the same time.
  std::latch start(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        for (int it = 0; it < kIterations; ++it) {
          fwd.launch(streams[i], fcases[i].args);
          bwd.launch(streams[i], bcases[i].args);
        }
        sync(streams[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_EQ(errors[i], "") << "thread " << i;
    std::string label = fmt::format("thread {} ({} N={})", i, dtype_name(dtypes[i]), lengths[i]);
    expect_matches_reference(fcases[i], download(fcases[i]), label + " rms_norm");
    expect_matches_reference(bcases[i], download(bcases[i]), label + " rms_norm_bwd");
  }
}

TEST(RuntimeGpu, EmptyLaunchRunsNothingButColumnReductions) {
  KDSL_REQUIRE_GPU();
  CUstream s = new_stream();
  // rms_norm with M = 0: succeeds, even with null pointers for the empty tensors.
  Case fwd = make_case(kRms, "rms_norm", DType::bf16, 0, 4096, 60);
  Kernel k = tree_kernel(kRms, "rms_norm");
  const TensorRef& w = fwd.args[1].tensor();
  k.launch(s, {TensorRef::contiguous(nullptr, DType::bf16, {0, 4096}), w, 1e-6,
               TensorRef::contiguous(nullptr, DType::bf16, {0, 4096}),
               TensorRef::contiguous(nullptr, DType::f32, {0})});
  sync(s);

  // rms_norm_bwd with M = 0: dw (Out) is the empty sum, zeros; nothing else is written.
  Case bwd = make_case(kRms, "rms_norm_bwd", DType::bf16, 0, 4096, 61);
  reset_outputs(bwd);
  tree_kernel(kRms, "rms_norm_bwd").launch(s, bwd.args);
  sync(s);
  std::vector<HostTensor> got = download(bwd);
  const HostTensor& dw = got[bwd.p.ir.tensors.size() - 1];
  ASSERT_EQ(bwd.p.ir.tensors.back().name, "dw");
  // (Not compared with the reference interpreter: with no rows it leaves Out column reductions
  // unwritten, where SPEC section 11 says they start from zero.)
  EXPECT_TRUE(std::all_of(dw.bytes.begin(), dw.bytes.end(), [](uint8_t b) { return b == 0; }))
      << "dw of an empty rms_norm_bwd is not all zeros";

  // An InOut column reduction with M = 0 leaves the tensor's bits unchanged; with rows it adds.
  Kernel col = tree_kernel(kColSum, "col_sum");
  Case empty = make_case(kColSum, "col_sum", DType::bf16, 0, 1000, 62);
  reset_outputs(empty);
  col.launch(s, empty.args);
  sync(s);
  got = download(empty);
  EXPECT_TRUE(got[1].bytes == empty.p.tensors[1].bytes) << "acc changed by an empty launch";
  Case rows = make_case(kColSum, "col_sum", DType::bf16, 300, 1000, 63);
  reset_outputs(rows);
  col.launch(s, rows.args);
  expect_matches_reference(rows, download(rows), "col_sum bf16 M=300 N=1000",
                           f32_sum_tolerance(rows.p.tensors[0], rows.p.tensors[1]));
}

TEST(RuntimeGpu, WrongArgumentThrowsBeforeAnythingIsEnqueued) {
  KDSL_REQUIRE_GPU();
  Kernel k = tree_kernel(kRms, "rms_norm");
  Case c = make_case(kRms, "rms_norm", DType::bf16, 512, 4096, 70);
  CUstream s = new_stream();
  k.launch(s, c.args);  // the specialization is loaded: only the check stands in the way
  sync(s);
  reset_outputs(c);
  std::vector<Arg> bad = c.args;
  TensorRef rstd = bad[4].tensor();
  rstd.dtype = DType::f16;  // rstd is f32
  bad[4] = rstd;
  try {
    k.launch(s, bad);
    ADD_FAILURE() << "a wrong dtype did not throw";
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(), "rms_norm: argument 'rstd' (5th of 5): expected dtype f32, got f16");
  }
  sync(s);
  expect_outputs_untouched(c, "rms_norm after a refused launch");
  // The same under capture: the error leaves nothing in the graph.
  EXPECT_THROW(capture(k, s, bad), ArgumentError);
  expect_outputs_untouched(c, "rms_norm after a refused captured launch");
}

}  // namespace
}  // namespace kdsl

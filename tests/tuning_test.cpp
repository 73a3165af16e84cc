#include "src/tuning.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "kdsl/error.h"
#include "scoped_env.h"
#include "src/compiler.h"
#include "src/log.h"
#include "src/runtime_impl.h"
#include "src/schedule_scan.h"

namespace kdsl {
namespace {

std::shared_ptr<const FrontEnd> rms_norm_module() {
  return run_front_end(SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/stdlib/rms_norm.kdsl"));
}

TEST(Tuning, CandidatesStartWithTheDefaultAndAreDistinctSchedules) {
  auto fe = rms_norm_module();
  Specialization spec{{DType::bf16}, 8192, ~0u, ~0u};
  ir::Kernel k = lower_specialized(*fe, "rms_norm", spec);
  DeviceTarget target;
  std::vector<ScheduleHint> c = tuning_candidates(k, spec, target);
  ASSERT_GE(c.size(), 4u);
  EXPECT_TRUE(c[0].empty());
  std::set<std::string> sources;
  for (const ScheduleHint& h : c) sources.insert(generate(k, spec, target, h).source);
  EXPECT_EQ(sources.size(), c.size()) << "two candidates generate the same kernel";
}

// Every candidate generates its own kernel: no pack candidates where no row is 16-bit (f32
// rows, f32 softmax), and the rolled chunk loops of streamed rows of 32 chunks or more (softmax
// f32 N = 262144 at 64 chunks, RMSNorm f32 on a cluster, LayerNorm bf16 at 32) are new kernels.
TEST(Tuning, CandidatesOfFloatRowsAndOfLongStreamedRowsAreDistinctKernels) {
  auto norm = rms_norm_module();
  auto softmax =
      run_front_end(SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/stdlib/softmax.kdsl"));
  auto layer_norm =
      run_front_end(SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/stdlib/layer_norm.kdsl"));
  struct Case {
    const FrontEnd* fe;
    const char* kernel;
    DType dtype;
    int64_t n;
    bool rolled;  // unroll candidates expected
  };
  DeviceTarget target;
  for (const Case& c : {Case{norm.get(), "rms_norm", DType::f32, 8192, false},
                        Case{softmax.get(), "softmax", DType::f32, 524288, true},
                        Case{softmax.get(), "softmax", DType::bf16, 32768, false},
                        Case{norm.get(), "rms_norm", DType::f32, 524288, true},
                        Case{layer_norm.get(), "layer_norm", DType::bf16, 262144, true}}) {
    const std::string what = fmt::format("{} {} N={}", c.kernel, dtype_name(c.dtype), c.n);
    Specialization spec{{c.dtype}, c.n, ~0u, ~0u};
    ir::Kernel k = lower_specialized(*c.fe, c.kernel, spec);
    std::vector<ScheduleHint> cands = tuning_candidates(k, spec, target);
    std::set<std::string> sources;
    std::set<int> unrolls;
    for (const ScheduleHint& h : cands) {
      sources.insert(generate(k, spec, target, h).source);
      unrolls.insert(h.unroll.value_or(0));
      if (c.dtype == DType::f32) {
        EXPECT_FALSE(h.pack.has_value()) << what << ": " << h.str();
      }
    }
    EXPECT_EQ(sources.size(), cands.size()) << what << ": two candidates generate one kernel";
    // Rolled rows: the default (8 at a time, no hint) and 16 and 4.
    const std::set<int> expected = c.rolled ? std::set<int>{0, 4, 16} : std::set<int>{0};
    EXPECT_EQ(unrolls, expected) << what;
    EXPECT_EQ(choose_row_schedule(k, spec, target, {}).unroll, c.rolled ? kRolledChunks : 0)
        << what;
  }
}

// Rows beyond one CTA of 1024 threads (a cluster by default) try the other clusters that hold
// them, also without a persistent grid, each a kernel of its own.
TEST(Tuning, RowsBeyondOneCtaTryOtherClusters) {
  auto softmax =
      run_front_end(SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/stdlib/softmax.kdsl"));
  Specialization spec{{DType::bf16}, 1048576, ~0u, ~0u};
  ir::Kernel k = lower_specialized(*softmax, "softmax", spec);
  DeviceTarget target;
  std::set<std::pair<int, bool>> layouts;  // (cluster, persistent)
  std::set<std::string> sources;
  const std::vector<ScheduleHint> c = tuning_candidates(k, spec, target);
  for (const ScheduleHint& h : c) {
    const RowSchedule s = choose_row_schedule(k, spec, target, h);
    EXPECT_EQ(s.threads, 1024) << h.str();
    layouts.insert({s.cluster, s.persistent});
    sources.insert(generate(k, spec, target, h).source);
  }
  EXPECT_EQ(layouts, (std::set<std::pair<int, bool>>{
                         {2, true}, {4, true}, {8, true}, {2, false}, {4, false}}));
  EXPECT_EQ(sources.size(), c.size());
}

TEST(Tuning, LongRowsAlsoTryOneCtaAndClustersPerRow) {
  auto fe =
      run_front_end(SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/stdlib/layer_norm.kdsl"));
  Specialization spec{{DType::bf16}, 32768, ~0u, ~0u};
  ir::Kernel k = lower_specialized(*fe, "layer_norm_bwd", spec);
  DeviceTarget target;
  std::vector<ScheduleHint> c = tuning_candidates(k, spec, target);
  std::set<int> clusters;
  std::set<std::string> sources;
  for (const ScheduleHint& h : c) {
    clusters.insert(choose_row_schedule(k, spec, target, h).cluster);
    sources.insert(generate(k, spec, target, h).source);
  }
  // The default is a cluster of 4 (4096 threads per row); rows of more than 1024 threads also
  // try 8.
  EXPECT_EQ(clusters, (std::set<int>{1, 2, 4, 8}));
  EXPECT_EQ(sources.size(), c.size()) << "two candidates generate the same kernel";
  // Before sm_90 there are no clusters to try.
  DeviceTarget ampere;
  ampere.arch = "sm_80";
  for (const ScheduleHint& h : tuning_candidates(k, spec, ampere)) {
    EXPECT_EQ(choose_row_schedule(k, spec, ampere, h).cluster, 1) << h.str();
  }
}

// The combine of a row reduction's warps' partials is a candidate the other way than the
// default: in warp order where the default is the butterfly (one CTA per row), the butterfly
// where it is warp order (f32 rows of 10240 by the measured rule; a cluster that reads the CTAs'
// totals back: none with reductions); kernels with a warp or less per row, and clusters, which
// push every warp's partial to every CTA, have none to vary.
TEST(Tuning, RowKernelsTryTheOtherCombineOfTheWarps) {
  auto fe = rms_norm_module();
  auto softmax_fe =
      run_front_end(SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/stdlib/softmax.kdsl"));
  auto layer_norm_fe =
      run_front_end(SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/stdlib/layer_norm.kdsl"));
  DeviceTarget target;
  for (auto [t, n, fallback] : {std::tuple{DType::f32, int64_t{8192}, false},
                                std::tuple{DType::f32, int64_t{10240}, true}}) {
    Specialization spec{{t}, n, ~0u, ~0u};
    ir::Kernel k = lower_specialized(*fe, "rms_norm_bwd", spec);
    const RowSchedule d = choose_row_schedule(k, spec, target);
    EXPECT_EQ(d.butterfly, !fallback) << n;
    bool other = false;
    for (const ScheduleHint& h : tuning_candidates(k, spec, target)) {
      if (!h.butterfly) continue;
      other = true;
      EXPECT_EQ(*h.butterfly, fallback) << n;
      const GeneratedKernel g = generate(k, spec, target, h);
      // The butterfly reads one warp's partial per lane; warp order loops over them.
      const bool lane_read = g.source.find("[buf][group][threadIdx.x &") != std::string::npos ||
                             g.source.find("[buf][group][tl &") != std::string::npos;
      EXPECT_EQ(lane_read, fallback) << n;
      EXPECT_EQ(g.source.find("for (int w = 1; w <") == std::string::npos, fallback) << n;
    }
    EXPECT_TRUE(other) << n;
  }
  Specialization longer{{DType::bf16}, 32768, ~0u, ~0u};
  ir::Kernel pushed = lower_specialized(*fe, "rms_norm_bwd", longer);
  ASSERT_GT(choose_row_schedule(pushed, longer, target).cluster, 1);
  for (const ScheduleHint& h : tuning_candidates(pushed, longer, target)) {
    EXPECT_FALSE(h.butterfly) << h.str();
  }
  ir::Kernel pushed_f32 = lower_specialized(*softmax_fe, "softmax_bwd", longer);
  ASSERT_GT(choose_row_schedule(pushed_f32, longer, target).cluster, 1);
  for (const ScheduleHint& h : tuning_candidates(pushed_f32, longer, target)) {
    EXPECT_FALSE(h.butterfly) << h.str();
  }
  // LayerNorm's Welford states are pushed as well (three words each).
  Specialization ln_long{{DType::bf16}, 262144, ~0u, ~0u};
  ir::Kernel pushed_welford = lower_specialized(*layer_norm_fe, "layer_norm", ln_long);
  ASSERT_GT(choose_row_schedule(pushed_welford, ln_long, target).cluster, 1);
  for (const ScheduleHint& h : tuning_candidates(pushed_welford, ln_long, target)) {
    EXPECT_FALSE(h.butterfly) << h.str();
  }
  // Softmax's two points of the row (the max, then the sum) are pushed too.
  Specialization longest{{DType::bf16}, 262144, ~0u, ~0u};
  ir::Kernel two_points = lower_specialized(*softmax_fe, "softmax", longest);
  ASSERT_GT(choose_row_schedule(two_points, longest, target).cluster, 1);
  for (const ScheduleHint& h : tuning_candidates(two_points, longest, target)) {
    EXPECT_FALSE(h.butterfly) << h.str();
  }
  // Pushed clusters also try the packed, lane-by-lane pushes; LayerNorm backward (column
  // reductions, staged rows) also 32 elements a thread on clusters of 2 with its staged rows read
  // again by each phase. Each candidate generates.
  ir::Kernel ln_bwd = lower_specialized(*layer_norm_fe, "layer_norm_bwd", longer);
  bool push3 = false, reread = false;
  for (const ScheduleHint& h : tuning_candidates(ln_bwd, longer, target)) {
    push3 = push3 || (h.push && *h.push == 3 && !h.reread);
    if (h.reread && *h.reread) {
      reread = true;
      const RowSchedule s = choose_row_schedule(ln_bwd, longer, target, h);
      EXPECT_EQ(s.cluster, 2);
      EXPECT_EQ(s.group, 1024);
      EXPECT_TRUE(s.reread);
      EXPECT_NO_THROW(generate(ln_bwd, longer, target, h));
    }
  }
  EXPECT_TRUE(push3);
  EXPECT_TRUE(reread);
  Specialization small{{DType::bf16}, 256, ~0u, ~0u};
  ir::Kernel k = lower_specialized(*fe, "rms_norm", small);
  ASSERT_LE(choose_row_schedule(k, small, target).group, 32);
  for (const ScheduleHint& h : tuning_candidates(k, small, target)) EXPECT_FALSE(h.butterfly);
}

// A scan kernel's candidates: the default, then layouts near it, each a distinct schedule and a
// distinct kernel, each giving every key of its layout; the default's neighbours are among them.
TEST(Tuning, ScanKernelsTryLayoutsNearTheDefault) {
  auto fe = run_front_end(SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/stdlib/scan.kdsl"));
  Specialization spec{{DType::f32}, 32768, ~0u, ~0u};
  ir::Kernel k = lower_specialized(*fe, "cumsum_mid", spec);
  DeviceTarget target;
  const ScanSchedule s0 = choose_scan_schedule(k, spec, target);
  ASSERT_EQ(s0.vr, 2);  // the default: vr=2, lp=2, t=32 for f32
  std::vector<ScheduleHint> c = tuning_candidates(k, spec, target);
  ASSERT_GE(c.size(), 10u);
  EXPECT_TRUE(c[0].empty());
  std::set<std::string> sources, layouts;
  for (size_t i = 0; i < c.size(); ++i) {
    const ScheduleHint& h = c[i];
    if (i > 0) {
      EXPECT_TRUE(h.t && h.lp && h.vr && !h.has_row_keys()) << h.str();
      EXPECT_LE(*h.vr * 4, 16) << h.str();
    }
    const ScanSchedule s = choose_scan_schedule(k, spec, target, h);
    layouts.insert(fmt::format("{},{},{},{}", s.t, s.lp, s.wp, s.vr));
    sources.insert(generate(k, spec, target, h).source);
  }
  EXPECT_EQ(layouts.size(), c.size()) << "two candidates are the same layout";
  EXPECT_EQ(sources.size(), c.size()) << "two candidates generate the same kernel";
  // A layout as fast in the tenth session's tuning of this kernel, and the default written out.
  EXPECT_TRUE(layouts.contains(fmt::format("16,4,{},4", s0.wp)));
  EXPECT_TRUE(layouts.contains(fmt::format("32,2,{},2", s0.wp)));
  // Along the last axis there are no rows per access to vary.
  Specialization rows{{DType::bf16}, 8192, ~0u, ~0u};
  ir::Kernel cumsum = lower_specialized(*fe, "cumsum", rows);
  std::vector<ScheduleHint> r = tuning_candidates(cumsum, rows, target);
  EXPECT_GE(r.size(), 3u);
  for (const ScheduleHint& h : r) EXPECT_FALSE(h.vr) << h.str();
}

// A scan whose combine carries many f32 values: the default tile fits the static shared memory,
// and every candidate fits it too (kdsl tune --list stopped at the first candidate of 8 warps
// with a usage error, for a 24-tuple when it took the 2-row layout).
TEST(Tuning, WideScanStatesGiveCandidatesThatFit) {
  // 24 values (element accesses, 8 warps) and 300 (the default tile gives up warps along the
  // positions to fit shared memory): every candidate compiles.
  for (auto [n, wp, fewest] : {std::tuple<int, int, size_t>{24, 8, 10}, {300, 1, 3}}) {
    SCOPED_TRACE(n);
    std::string a, b, sums, values, names;
    for (int i = 0; i < n; ++i) {
      const char* sep = i ? ", " : "";
      a += fmt::format("{}a{}", sep, i);
      b += fmt::format("{}b{}", sep, i);
      sums += fmt::format("{}a{} + b{}", sep, i, i);
      values += fmt::format("{}x[b, :, d] * {}.0", sep, i + 1);
      names += fmt::format("{}s{}", sep, i);
    }
    auto fe = run_front_end(std::make_shared<const SourceFile>(
        "wide.kdsl",
        fmt::format("def op(left, right):\n    {} = left\n    {} = right\n    return {}\n"
                    "\n@kernel\ndef wide[T: f32](x: Tensor[T, (B, L, D)], *, y: Out[T, "
                    "(B, L, D)]):\n    for b, d in parallel(B, D):\n        {} = scan(op, "
                    "({}))\n        y[b, :, d] = s0 + s{}\n",
                    a, b, sums, names, values, n - 1)));
    Specialization spec{{DType::f32}, 32768, ~0u, ~0u};
    ir::Kernel k = lower_specialized(*fe, "wide", spec);
    DeviceTarget target;
    EXPECT_EQ(choose_scan_schedule(k, spec, target).wp, wp);
    std::vector<ScheduleHint> c = tuning_candidates(k, spec, target);
    EXPECT_GE(c.size(), fewest);
    for (const ScheduleHint& h : c) EXPECT_NO_THROW(generate(k, spec, target, h)) << h.str();
  }
}

// A scan hint sets its keys of the layout (the rest from the element-access layout), names
// itself in the explain, and is refused with a ScheduleHintError where it cannot apply.
TEST(Tuning, ScanHintsSetTheLayoutOrAreRefused) {
  auto fe = run_front_end(SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/stdlib/scan.kdsl"));
  Specialization spec{{DType::f32}, 32768, ~0u, ~0u};
  ir::Kernel k = lower_specialized(*fe, "cumsum_mid", spec);
  DeviceTarget target;
  const ScanSchedule s =
      choose_scan_schedule(k, spec, target, ScheduleHint::parse("vr=4,lp=4,t=8"));
  EXPECT_EQ(s.vr, 4);
  EXPECT_EQ(s.lp, 4);
  EXPECT_EQ(s.lr, 8);
  EXPECT_EQ(s.t, 8);
  EXPECT_NE(fmt::format("{}", fmt::join(s.reasons, "\n")).find("schedule hint t=8,lp=4,vr=4"),
            std::string::npos);
  EXPECT_THROW(choose_scan_schedule(k, spec, target, ScheduleHint::parse("group=64")),
               ScheduleHintError);
  EXPECT_THROW(choose_scan_schedule(k, spec, target, ScheduleHint::parse("vr=16,lp=1,wp=1")),
               ScheduleHintError);
  // A tile whose shared memory (a state per row and warp) exceeds the static 48 KiB is refused
  // before NVRTC sees it.
  auto lr = run_front_end(
      SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/stdlib/linear_recurrence.kdsl"));
  ir::Kernel rec = lower_specialized(*lr, "linear_recurrence", spec);
  EXPECT_THROW(generate(rec, spec, target, ScheduleHint::parse("vr=8,lp=1,wp=32")),
               ScheduleHintError);
  Specialization rows{{DType::f32}, 8192, ~0u, ~0u};
  ir::Kernel cumsum = lower_specialized(*fe, "cumsum", rows);
  EXPECT_THROW(choose_scan_schedule(cumsum, rows, target, ScheduleHint::parse("vr=2")),
               ScheduleHintError);
  // ... and a row kernel refuses the scan keys.
  auto rms = rms_norm_module();
  Specialization n{{DType::bf16}, 8192, ~0u, ~0u};
  ir::Kernel r = lower_specialized(*rms, "rms_norm", n);
  EXPECT_THROW(generate(r, n, target, ScheduleHint::parse("t=4")), ScheduleHintError);
}

TEST(Tuning, KeyNamesKernelDtypesLengthAndLayoutBits) {
  Specialization spec{{DType::bf16}, 8192, 0x1f, 0x1b};
  EXPECT_EQ(tuning_key("rms_norm", spec), "rms_norm:bf16:n8192:a1f:c1b");
  // KDSL_MATH changes the generated code: a schedule timed under it gets its own record.
  testing::ScopedEnv math("KDSL_MATH", "auto");
  EXPECT_EQ(tuning_key("rms_norm", spec), "rms_norm:bf16:n8192:a1f:c1b");
  math.set("Accurate");
  EXPECT_EQ(tuning_key("rms_norm", spec), "rms_norm:bf16:n8192:a1f:c1b:math=accurate");
  math.set("approx");
  EXPECT_EQ(tuning_key("rms_norm", spec), "rms_norm:bf16:n8192:a1f:c1b:math=approx");
  math.set("fast");
  EXPECT_THROW(tuning_key("rms_norm", spec), ArgumentError);
}

class TuningDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kdsl-tuning-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(TuningDbTest, RecordsAreFoundByGpuAndKey) {
  TuningDb db(dir_);
  EXPECT_FALSE(db.lookup("NVIDIA H200", "k:bf16:n8:a1:c1"));
  db.record("NVIDIA H200", "k:bf16:n8:a1:c1", {"group=512,persistent=0", 70.5, 80.25, "M=8,N=8"});
  db.record("NVIDIA H100", "k:bf16:n8:a1:c1", {"", 90, 90, "M=8,N=8"});
  auto r = db.lookup("NVIDIA H200", "k:bf16:n8:a1:c1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->hint, "group=512,persistent=0");
  EXPECT_DOUBLE_EQ(r->us, 70.5);
  EXPECT_DOUBLE_EQ(r->default_us, 80.25);
  EXPECT_EQ(db.lookup("NVIDIA H100", "k:bf16:n8:a1:c1")->hint, "");
  EXPECT_FALSE(db.lookup("NVIDIA A100", "k:bf16:n8:a1:c1"));
}

TEST_F(TuningDbTest, DamagedFileOrUnusableRecordIsIgnored) {
  { std::ofstream(dir_ / "tuning.json") << "{not json"; }
  TuningDb db(dir_);
  EXPECT_FALSE(db.lookup("NVIDIA H200", "k"));
  db.record("NVIDIA H200", "k", {"group=64", 1, 2, ""});  // rebuilds the file
  EXPECT_EQ(db.lookup("NVIDIA H200", "k")->hint, "group=64");
  {
    std::ofstream(dir_ / "tuning.json")
        << R"({"G": {"k": {"hint": "bogus=1", "us": 1, "default_us": 2}}})";
  }
  EXPECT_FALSE(db.lookup("G", "k"));
}

// A write over a damaged file or a GPU entry that is not a set of records neither throws anything
// but kdsl::Error nor loses the old file (kept as tuning.json.damaged), and releases its lock (a
// second write in the same process used to wait on it forever).
TEST_F(TuningDbTest, WritesOverDamageKeepTheOldFile) {
  TuningDb db(dir_);
  const std::filesystem::path kept = dir_ / "tuning.json.damaged";
  auto text = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string not_records = R"({"G": "not records", "H": {"k": {"hint": "group=64", )"
                                  R"("us": 1, "default_us": 2}}})";
  { std::ofstream(dir_ / "tuning.json") << not_records; }
  db.record("G", "k", {"group=128", 1, 2, "M=1,N=8"});
  db.record("G", "k2", {"group=256", 1, 2, "M=1,N=8"});  // the lock was released
  EXPECT_EQ(db.lookup("G", "k")->hint, "group=128");
  EXPECT_EQ(db.lookup("G", "k2")->hint, "group=256");
  EXPECT_EQ(db.lookup("H", "k")->hint, "group=64");  // the other GPU's records stay
  EXPECT_EQ(text(kept), not_records);
  // A number beyond a double makes the file unreadable as JSON: the next write keeps it aside.
  const std::string overflow = R"({"G": {"k": {"hint": "", "us": 1e400, "default_us": 2}}})";
  { std::ofstream(dir_ / "tuning.json") << overflow; }
  EXPECT_FALSE(db.lookup("G", "k"));
  db.record("G", "k", {"group=512", 1, 2, "M=1,N=8"});
  EXPECT_EQ(db.lookup("G", "k")->hint, "group=512");
  EXPECT_EQ(text(kept), overflow);
}

// A launch looks up the record `kdsl tune` wrote: both key it by the specialization the launch's
// own arguments bind (KernelImpl::specialization; `kdsl tune` through GpuRun::specialization),
// whose alignment bits are those of the real tensors, not all ones. Then compile_with_tuning
// (the runtime's compile step) follows the record, unless the caller gives a hint; a record this
// version cannot follow is ignored (the default is compiled), while the caller's own such hint is
// an error.
TEST_F(TuningDbTest, LaunchesFollowTheRecordUnderTheirOwnKey) {
  constexpr int64_t M = 4, N = 8192;
  Module module = Module::load(std::string(KDSL_SOURCE_DIR) + "/stdlib/rms_norm.kdsl");
  Kernel kernel = module.kernel("rms_norm");
  auto at = [](uintptr_t i) { return reinterpret_cast<void*>(uintptr_t{0x7f0000000000} + i); };
  // w and rstd 4-byte aligned only: their alignment bits are clear.
  std::vector<Arg> args = {TensorRef::contiguous(at(0), DType::f32, {M, N}),
                           TensorRef::contiguous(at(0x1000004), DType::f32, {N}), 1e-6,
                           TensorRef::contiguous(at(0x2000000), DType::f32, {M, N}),
                           TensorRef::contiguous(at(0x3000004), DType::f32, {M})};
  detail::BoundArgs b;
  kernel.impl().bind(args, b);
  Specialization spec = kernel.impl().specialization(b);
  const std::string key = tuning_key("rms_norm", spec);
  EXPECT_NE(key, tuning_key("rms_norm", Specialization{{DType::f32}, N, ~0u, ~0u}));

  auto fe = rms_norm_module();
  ir::Kernel k = lower_specialized(*fe, "rms_norm", spec);
  DeviceTarget target;
  target.name = "NVIDIA H200";
  DiskCache cache(CacheConfig{dir_ / "cache"});
  TuningDb db(dir_);
  auto source_of = [&](const std::string& hint) {
    return generate(k, spec, target, ScheduleHint::parse(hint)).source;
  };
  auto compiled = [&](const std::string& hint, const TuningDb* d, std::string* tuned) {
    return compile_with_tuning(*fe, "rms_norm", spec, target, ScheduleHint::parse(hint), d, &cache,
                               tuned)
        .gen.source;
  };
  const std::string recorded = "group=512,persistent=0";
  ASSERT_NE(source_of(recorded), source_of(""));
  db.record(target.name, key, {recorded, 50, 60, "M=4,N=8192"});
  std::string tuned = "not set";
  EXPECT_EQ(compiled("", &db, &tuned), source_of(recorded));
  EXPECT_EQ(tuned, recorded);
  // The caller's hint wins; no database, or another GPU model: the default.
  EXPECT_EQ(compiled("group=256", &db, &tuned), source_of("group=256"));
  EXPECT_EQ(tuned, "");
  tuned = "not set";
  EXPECT_EQ(compiled("", nullptr, &tuned), source_of(""));
  EXPECT_EQ(tuned, "");
  target.name = "NVIDIA A100";
  EXPECT_EQ(compiled("", &db, &tuned), source_of(""));
  EXPECT_EQ(tuned, "");
  target.name = "NVIDIA H200";
  // A record whose hint this version rejects (more than 1024 threads without a cluster).
  db.record(target.name, key, {"group=2048", 50, 60, "M=4,N=8192"});
  EXPECT_EQ(compiled("", &db, &tuned), source_of(""));
  EXPECT_EQ(tuned, "");
  EXPECT_THROW(compiled("group=2048", &db, &tuned), ScheduleHintError);

  // A record timed after a short warm-up (made before records had warmup_ms, or with
  // --warmup-ms below 25) is still followed, with a warning to tune again; one timed after the
  // full warm-up, silently.
  std::ostringstream logged;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(logged);
  log().sinks().push_back(sink);
  db.record(target.name, key, {recorded, 50, 60, "M=4,N=8192"});
  EXPECT_DOUBLE_EQ(db.lookup(target.name, key)->warmup_ms, 0);
  EXPECT_EQ(compiled("", &db, &tuned), source_of(recorded));
  EXPECT_NE(logged.str().find("was timed after a short warm-up (0 ms"), std::string::npos)
      << logged.str();
  logged.str("");
  db.record(target.name, key, {recorded, 50, 60, "M=4,N=8192", 25});
  EXPECT_DOUBLE_EQ(db.lookup(target.name, key)->warmup_ms, 25);
  EXPECT_EQ(compiled("", &db, &tuned), source_of(recorded));
  EXPECT_EQ(tuned, recorded);
  EXPECT_EQ(logged.str(), "");
  log().sinks().pop_back();
}

// A scan kernel follows its record the same way; a record whose layout cannot apply (a tile with
// more rows than threads) or that holds keys of the row schedule is ignored, with a warning.
TEST_F(TuningDbTest, ScanKernelsFollowTheirRecordToo) {
  auto fe = run_front_end(SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/stdlib/scan.kdsl"));
  Specialization spec{{DType::f32}, 4096, ~0u, ~0u};
  ir::Kernel k = lower_specialized(*fe, "cumsum_mid", spec);
  DeviceTarget target;
  target.name = "NVIDIA H200";
  DiskCache cache(CacheConfig{dir_ / "cache"});
  TuningDb db(dir_);
  const std::string key = tuning_key("cumsum_mid", spec);
  auto source_of = [&](const std::string& hint) {
    return generate(k, spec, target, ScheduleHint::parse(hint)).source;
  };
  auto compiled = [&](std::string* tuned) {
    return compile_with_tuning(*fe, "cumsum_mid", spec, target, {}, &db, &cache, tuned).gen.source;
  };
  const std::string recorded = "t=8,lp=4,vr=4";
  ASSERT_NE(source_of(recorded), source_of(""));
  db.record(target.name, key, {recorded, 10, 12, "B=1,L=4096,D=2048"});
  std::string tuned;
  EXPECT_EQ(compiled(&tuned), source_of(recorded));
  EXPECT_EQ(tuned, recorded);
  for (const char* stale : {"lp=1,wp=1,vr=16", "group=64"}) {
    db.record(target.name, key, {stale, 10, 12, "B=1,L=4096,D=2048"});
    EXPECT_EQ(compiled(&tuned), source_of("")) << stale;
    EXPECT_EQ(tuned, "") << stale;
  }
}

TEST(ScheduleHint, ParsesAndPrintsCanonically) {
  ScheduleHint h = ScheduleHint::parse("prefetch=1,group=512,persistent=0");
  EXPECT_EQ(h.str(), "group=512,prefetch=1,persistent=0");
  EXPECT_THROW(ScheduleHint::parse("group=500"), ArgumentError);
  EXPECT_THROW(ScheduleHint::parse("speed=11"), ArgumentError);
  EXPECT_TRUE(ScheduleHint::parse("").empty());
  // The scan keys: powers of two in their ranges, printed after the row keys.
  ScheduleHint scan = ScheduleHint::parse("vr=4, t=8,lp=2,wp=4");
  EXPECT_EQ(scan.str(), "t=8,lp=2,wp=4,vr=4");
  EXPECT_TRUE(scan.has_scan_keys());
  EXPECT_FALSE(scan.has_row_keys());
  EXPECT_FALSE(scan.empty());
  EXPECT_THROW(ScheduleHint::parse("t=3"), ScheduleHintError);
  EXPECT_THROW(ScheduleHint::parse("t=128"), ScheduleHintError);
  EXPECT_THROW(ScheduleHint::parse("vr=32"), ScheduleHintError);
  EXPECT_THROW(ScheduleHint::parse("lp=0"), ScheduleHintError);
}

}  // namespace
}  // namespace kdsl

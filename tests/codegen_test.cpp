// Code generation: golden source, determinism, self-containment, and NVRTC compiling every stdlib
// kernel (no GPU needed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "cache_test_util.h"
#include "kdsl/error.h"
#include "src/codegen_expr.h"
#include "src/compiler.h"
#include "src/nvrtc.h"

namespace kdsl {
namespace {

std::string source_dir() {
  const char* root = std::getenv("KDSL_SOURCE_DIR");
  return root ? root : KDSL_SOURCE_DIR;
}

std::shared_ptr<const FrontEnd> load(const std::string& relative) {
  return run_front_end(SourceFile::read(source_dir() + "/" + relative));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The generated source after the preludes: the kernel's own code.
std::string kernel_body(const std::string& src) {
  size_t at = src.find("// ---- end of approximate math ----");
  if (at == std::string::npos) at = src.find("// ---- end of prelude ----");
  return src.substr(at);
}

GeneratedKernel gen(const FrontEnd& fe, const std::string& kernel, DType t, int64_t n) {
  Specialization spec{{t}, n, ~0u, ~0u};
  ir::Kernel k = lower_specialized(fe, kernel, spec);
  return generate(k, spec, DeviceTarget{});
}

// To refresh after an intended codegen change: KDSL_UPDATE_GOLDEN=1 build/tests/codegen_test
TEST(Codegen, RmsNormBf16MatchesGoldenSource) {
  testing::ScopedEnv math("KDSL_MATH", nullptr);
  auto fe = load("stdlib/rms_norm.kdsl");
  GeneratedKernel g = gen(*fe, "rms_norm", DType::bf16, 8192);
  std::string path = source_dir() + "/tests/golden/kdsl_rms_norm_bf16_n8192.cu";
  if (std::getenv("KDSL_UPDATE_GOLDEN")) std::ofstream(path) << g.source;
  EXPECT_EQ(g.source, read_file(path)) << "generated source differs from " << path;
  EXPECT_EQ(g.plan.symbol, "kdsl_rms_norm_bf16_n8192");
}

// A store into a 16-bit tensor converts (rounds to nearest even) itself, so a cast to that dtype
// just before the store is not spelled out again: the value stored is the cast's f32 operand.
TEST(Codegen, SixteenBitStoresRoundOnce) {
  for (const char* file : {"stdlib/layer_norm.kdsl", "stdlib/softmax.kdsl"}) {
    auto fe = load(file);
    const std::string kernel =
        std::string(file).find("softmax") != std::string::npos ? "softmax" : "layer_norm";
    for (DType t : {DType::bf16, DType::f16}) {
      std::string src = gen(*fe, kernel, t, 4096).source;
      std::smatch m;
      std::regex store(R"(O\d+\[v\] = (v\d+);)");
      int stores = 0;
      for (auto it = std::sregex_iterator(src.begin(), src.end(), store);
           it != std::sregex_iterator(); ++it, ++stores) {
        std::string def = "const float " + (*it)[1].str() + " = ";
        size_t at = src.find(def);
        ASSERT_NE(at, std::string::npos) << (*it)[1];
        std::string line = src.substr(at, src.find('\n', at) - at);
        EXPECT_EQ(line.find("kdsl_round_"), std::string::npos) << file << ": " << line;
      }
      EXPECT_GT(stores, 0) << file;
    }
  }
}

// f32 math follows the precision of the data (cuda::approx_math): the PTX approximations where
// every float generic is 16-bit, CUDA's full-precision functions otherwise (f32 data, f64 always);
// KDSL_MATH overrides the rule, and another value of it is an error naming the variable.
TEST(Codegen, ApproximateMathOnlyForSixteenBitData) {
  testing::ScopedEnv math("KDSL_MATH", nullptr);
  auto fe = load("stdlib/rg_lru.kdsl");
  auto body = [&](DType t) { return kernel_body(gen(*fe, "rg_lru_bwd", t, 4096).source); };
  const char* approx[] = {"kdsl_sigmoid_approx(", "kdsl_sqrt_approx(", "= kdsl_exp_approx(",
                          "kdsl_expm1_approx("};
  const char* full[] = {"(1.f / (1.f + expf(", " sqrtf(", "= expf(", "expm1f("};  // not rsqrtf
  for (DType t : {DType::bf16, DType::f16}) {
    const std::string b = body(t);
    for (const char* s : approx) EXPECT_NE(b.find(s), std::string::npos) << dtype_name(t) << s;
    for (const char* s : full) EXPECT_EQ(b.find(s), std::string::npos) << dtype_name(t) << s;
  }
  const std::string b32 = body(DType::f32);
  EXPECT_EQ(b32.find("_approx("), std::string::npos);
  // The helpers themselves come only with the kernels that use them.
  EXPECT_EQ(gen(*fe, "rg_lru_bwd", DType::f32, 4096).source.find("kdsl_exp_approx"),
            std::string::npos);
  EXPECT_NE(gen(*fe, "rg_lru_bwd", DType::bf16, 4096).source.find("kdsl approximate f32 math"),
            std::string::npos);
  for (const char* s : full) EXPECT_NE(b32.find(s), std::string::npos) << s;
  {
    testing::ScopedEnv env("KDSL_MATH", "accurate");
    EXPECT_EQ(body(DType::bf16).find("_approx("), std::string::npos);
  }
  // Division (RG-LRU backward no longer divides): div.full for 16-bit data, / for f32.
  auto div = run_front_end(std::make_shared<const SourceFile>("div.kdsl", R"(
@kernel
def ratio[T: (f32, bf16)](x: Tensor[T, (M, N)], z: Tensor[T, (M, N)], *, y: Out[T, (M, N)]):
    for m in parallel(M):
        y[m, :] = T(f32(x[m, :]) / f32(z[m, :]))
)"));
  EXPECT_NE(kernel_body(gen(*div, "ratio", DType::bf16, 1024).source).find("kdsl_div_approx("),
            std::string::npos);
  EXPECT_EQ(kernel_body(gen(*div, "ratio", DType::f32, 1024).source).find("kdsl_div_approx("),
            std::string::npos);
  {
    testing::ScopedEnv env("KDSL_MATH", "approx");
    EXPECT_NE(body(DType::f32).find("= kdsl_exp_approx("), std::string::npos);
    auto scan = load("stdlib/scan.kdsl");
    const std::string f64 = kernel_body(gen(*scan, "logcumsumexp", DType::f64, 4096).source);
    EXPECT_EQ(f64.find("_approx("), std::string::npos) << "f64 math is never approximated";
    EXPECT_NE(f64.find("exp("), std::string::npos);
  }
  // The square root of f16 arithmetic stays correctly rounded (f16 roots can lie closer to a
  // rounding midpoint than sqrt.approx's error).
  {
    auto t = run_front_end(std::make_shared<const SourceFile>(
        "t.kdsl",
        "@kernel\ndef r[T: f16](x: Tensor[T, (M, N)], *, y: Out[T, (M, N)]):\n"
        "    for m in parallel(M):\n        y[m, :] = sqrt(x[m, :]) + T(sqrt(f32(x[m, :])))\n"));
    const std::string b = kernel_body(gen(*t, "r", DType::f16, 256).source);
    EXPECT_NE(b.find("kdsl_round_f16(sqrtf("), std::string::npos) << b;
    EXPECT_NE(b.find("kdsl_sqrt_approx("), std::string::npos) << b;  // the f32 root
  }
  {
    testing::ScopedEnv env("KDSL_MATH", "fast");
    try {
      body(DType::bf16);
      FAIL() << "KDSL_MATH=fast was accepted";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("KDSL_MATH='fast'"), std::string::npos) << e.what();
    }
  }
}

// f32 max and min with a constant other than zero take max.NaN / min.NaN (kdsl_max_nan), and rsqrt
// of a max with a normal constant floor takes rsqrt.approx.ftz (kdsl_rsqrt_normal); max with 0,
// (or a constant that rounds to 0 in f32), with a subnormal floor or of two tensors keep the
// general forms (signed zeros, subnormals).
TEST(Codegen, FloorsWithAConstantTakeSingleInstructions) {
  auto fe = run_front_end(std::make_shared<const SourceFile>("floors.kdsl", R"(
@kernel
def floors[T: f32](x: Tensor[T, (M, N)], z: Tensor[T, (M, N)], *, y: Out[T, (M, N)]):
    for m in parallel(M):
        a = rsqrt(max(x[m, :], 1e-6)) + min(2.0, x[m, :]) + max(x[m, :], 0.0) + max(x[m, :], 1e-50)
        y[m, :] = a + max(x[m, :], z[m, :]) + rsqrt(max(z[m, :], 1e-40)) + rsqrt(x[m, :])
)"));
  const std::string b = kernel_body(gen(*fe, "floors", DType::f32, 1024).source);
  auto count = [&](const std::string& s) {
    int n = 0;
    for (size_t at = b.find(s); at != std::string::npos; at = b.find(s, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("kdsl_rsqrt_normal("), 1) << b;
  EXPECT_EQ(count("rsqrtf("), 2) << b;
  EXPECT_EQ(count("kdsl_max_nan("), 2) << b;
  EXPECT_EQ(count("kdsl_min_nan("), 1) << b;
  EXPECT_EQ(count("kdsl_max("), 2) << b;  // 0 (1e-50, 0 in f32, is the same constant) and z
}

// The rule looks at every float generic: two of them must both be 16-bit, integer generics do not
// count, and a kernel without a generic computes at full precision whatever its tensors hold.
TEST(Codegen, ApproximateMathLooksAtEveryFloatGeneric) {
  testing::ScopedEnv math("KDSL_MATH", nullptr);
  auto fe = load("tests/data/math_rule.kdsl");
  struct Case {
    const char* kernel;
    std::vector<DType> binding;
    bool approx;
  };
  const Case cases[] = {
      {"two_floats", {DType::bf16, DType::f16}, true},
      {"two_floats", {DType::bf16, DType::f32}, false},
      {"two_floats", {DType::f32, DType::f16}, false},
      {"float_and_int", {DType::bf16, DType::i32}, true},
      {"float_and_int", {DType::f32, DType::i64}, false},
      {"no_generic", {}, false},
  };
  for (const Case& c : cases) {
    Specialization spec{c.binding, 256, ~0u, ~0u};
    ir::Kernel k = lower_specialized(*fe, c.kernel, spec);
    GeneratedKernel g = generate(k, spec, DeviceTarget{});
    const std::string body = kernel_body(g.source);
    SCOPED_TRACE(g.plan.symbol);
    EXPECT_EQ(cuda::approx_math(k), c.approx);
    EXPECT_EQ(body.find("= kdsl_exp_approx(") != std::string::npos, c.approx);
    const std::string note = c.approx ? "f32 math: approximate" : "f32 math: full precision";
    EXPECT_NE(g.source.find("// " + note), std::string::npos) << "the header says which";
    EXPECT_EQ(g.plan.reasons.back().rfind(note, 0), 0u) << "and kdsl emit --explain";
  }
}

// Scan combines of custom states (no identity): 4-byte components select on the empty flags,
// 8-byte ones (c64) keep the early returns (measured: the selects cost the complex backward
// recurrence 13 registers and 18% on the H200). The memory-bound 2-row layout and RG-LRU
// backward's 16-bit instruction-bound layout (with values kept for phase B) carry launch bounds
// of two CTAs per SM; the forward's and the f32 layout none.
TEST(Codegen, ScanCombinesAndLaunchBoundsFollowTheMeasuredRules) {
  testing::ScopedEnv math("KDSL_MATH", nullptr);
  testing::ScopedEnv sched("KDSL_SCAN_SCHEDULE", nullptr);
  auto lr = load("stdlib/linear_recurrence.kdsl");
  const std::string bf16 = gen(*lr, "linear_recurrence_bwd", DType::bf16, 32768).source;
  EXPECT_NE(bf16.find("o.c0 = r.h ? (l.h ? "), std::string::npos);
  EXPECT_EQ(bf16.find("if (!r.h) return l;"), std::string::npos);
  EXPECT_NE(bf16.find("__launch_bounds__(256, 2)"), std::string::npos);
  Specialization none{{}, 32768, ~0u, ~0u};
  ir::Kernel k = lower_specialized(*lr, "complex_linear_recurrence_bwd", none);
  const std::string c64 = generate(k, none, DeviceTarget{}).source;
  EXPECT_NE(c64.find("if (!r.h) return l;"), std::string::npos);
  EXPECT_EQ(c64.find("r.h ? (l.h ? "), std::string::npos);
  auto rg_lru = load("stdlib/rg_lru.kdsl");
  const std::string rg = gen(*rg_lru, "rg_lru_bwd", DType::bf16, 32768).source;
  EXPECT_NE(rg.find("__launch_bounds__(256, 2) kdsl_rg_lru_bwd_bf16_n32768("), std::string::npos);
  const std::string fwd = gen(*rg_lru, "rg_lru", DType::bf16, 32768).source;
  EXPECT_NE(fwd.find("__launch_bounds__(256) kdsl_rg_lru_bf16_n32768("), std::string::npos);
  const std::string rg32 = gen(*rg_lru, "rg_lru_bwd", DType::f32, 32768).source;
  EXPECT_NE(rg32.find("__launch_bounds__(256) kdsl_rg_lru_bwd_f32_n32768("), std::string::npos);
}

// Phase A's transcendental results that phase B needs again are kept (ScanSchedule::keep_math):
// RG-LRU backward's r = sigmoid(gate_a) and a = exp(log a), which phase A computes at t + 1 for
// the reverse scan and phase B at t, one step on (the array index j + 1), computed again only
// at the thread's last step. KDSL_SCAN_SCHEDULE keep=0 computes them again everywhere; kernels
// without such values keep nothing.
TEST(Codegen, ScanTilesKeepPhaseATranscendentalsForPhaseB) {
  testing::ScopedEnv math("KDSL_MATH", nullptr);
  testing::ScopedEnv sched("KDSL_SCAN_SCHEDULE", nullptr);
  auto rg_lru = load("stdlib/rg_lru.kdsl");
  for (DType t : {DType::bf16, DType::f32}) {
    const std::string src = kernel_body(gen(*rg_lru, "rg_lru_bwd", t, 32768).source);
    EXPECT_NE(src.find("float K0[T][VR * VP];"), std::string::npos) << dtype_name(t);
    EXPECT_NE(src.find("float K1[T][VR * VP];"), std::string::npos) << dtype_name(t);
    EXPECT_NE(src.find("= K0[j + (1)][v * VP + vp];"), std::string::npos) << dtype_name(t);
    EXPECT_EQ(src.find("float K2["), std::string::npos) << dtype_name(t);
  }
  EXPECT_EQ(kernel_body(gen(*rg_lru, "rg_lru", DType::bf16, 32768).source).find("K0["),
            std::string::npos);
  testing::ScopedEnv off("KDSL_SCAN_SCHEDULE", "keep=0");
  EXPECT_EQ(kernel_body(gen(*rg_lru, "rg_lru_bwd", DType::bf16, 32768).source).find("K0["),
            std::string::npos);
}

TEST(Codegen, IsDeterministicAndSelfContained) {
  auto fe = load("stdlib/layer_norm.kdsl");
  GeneratedKernel a = gen(*fe, "layer_norm_bwd", DType::f16, 1000);
  GeneratedKernel b = gen(*load("stdlib/layer_norm.kdsl"), "layer_norm_bwd", DType::f16, 1000);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.plan.to_json(), b.plan.to_json());
  EXPECT_EQ(a.source.find("#include"), std::string::npos);
  EXPECT_NE(a.source.find("extern \"C\" __global__"), std::string::npos);
  EXPECT_NE(a.source.find(a.plan.symbol + "("), std::string::npos);
  EXPECT_EQ(LaunchPlan::from_json(a.plan.to_json()).to_json(), a.plan.to_json());
}

TEST(Codegen, SymbolNamesKernelAndSpecialization) {
  auto fe = load("stdlib/softmax.kdsl");
  EXPECT_EQ(gen(*fe, "softmax", DType::f32, 7).plan.symbol, "kdsl_softmax_f32_n7");
  Specialization unaligned{{DType::bf16}, 4096, 0, ~0u};
  ir::Kernel k = lower_specialized(*fe, "softmax", unaligned);
  EXPECT_EQ(generate(k, unaligned, DeviceTarget{}).plan.symbol, "kdsl_softmax_bf16_n4096_u03");
}

// A vector column reduction over part of the loop (GroupNorm's backward) has no GPU schedule yet:
// a diagnostic at the store (file:line:col, the line, a caret under the tensor, the hint), as the
// scan schedule's limits give, not an internal error or a message without a place.
TEST(Codegen, PartialVectorColumnReductionIsADiagnosticAtTheStore) {
  auto fe = load("examples/group_norm.kdsl");
  try {
    gen(*fe, "group_norm_bwd", DType::f32, 64);
    FAIL() << "expected a SourceError";
  } catch (const SourceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("group_norm.kdsl:52:9: error: the column reduction into 'dw' "
                        "keeps some loop variables and sums over the others"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("\n        dw[g, :] += dyf * xhat\n        ^~\n"), std::string::npos)
        << what;
    EXPECT_NE(what.find("\nhint: the CPU reference interpreter runs it (kdsl run --device cpu)"),
              std::string::npos)
        << what;
  }
}

// Every stdlib normalization kernel compiles to a cubin for sm_90 at lengths that exercise every
// schedule and tail, for every dtype (NVRTC only; no GPU).
TEST(Codegen, EveryStdlibKernelCompilesWithNvrtc) {
  struct File {
    const char* path;
    std::vector<const char*> kernels;
  };
  const File files[] = {
      {"stdlib/rms_norm.kdsl", {"rms_norm", "rms_norm_bwd", "add_rms_norm", "add_rms_norm_bwd"}},
      {"stdlib/layer_norm.kdsl", {"layer_norm", "layer_norm_bwd"}},
      {"stdlib/softmax.kdsl", {"softmax", "softmax_bwd", "log_softmax", "log_softmax_bwd"}},
  };
  int compiled = 0;
  for (const File& f : files) {
    auto fe = load(f.path);
    for (const char* kernel : f.kernels) {
      for (auto [t, n] : {std::pair{DType::bf16, int64_t{7}},
                          {DType::f16, int64_t{1000}},
                          {DType::f32, int64_t{8192}},
                          {DType::bf16, int64_t{65537}}}) {
        GeneratedKernel g = gen(*fe, kernel, t, n);
        Cubin c = nvrtc_compile(g.source, g.plan.symbol + ".cu", "sm_90", {"-lineinfo"});
        EXPECT_EQ(c.data.substr(0, 4),
                  "\x7f"
                  "ELF")
            << g.plan.symbol;
        ++compiled;
      }
    }
  }
  EXPECT_EQ(compiled, 40);
}

}  // namespace
}  // namespace kdsl

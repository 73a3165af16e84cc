// The worked example of dsl/SPEC.md section 16, examples/group_norm.kdsl: it checks, and its
// kernels match GroupNorm written out here in float64 (forward), and finite differences of that
// forward (backward). Tolerances: interp_test_util.h.
#include "interp_test_util.h"

namespace kdsl {
namespace {

using namespace interp_testing;

Problem group_norm_problem(const std::string& kernel, DType t, int64_t b, int64_t g, int64_t k,
                           uint64_t seed, std::map<std::string, HostTensor> inputs = {}) {
  static std::shared_ptr<const FrontEnd> fe =
      run_front_end(SourceFile::read(std::string(KDSL_SOURCE_DIR) + "/examples/group_norm.kdsl"));
  return problem(fe, kernel, {t}, {{"B", b}, {"G", g}, {"K", k}}, std::move(inputs), {}, seed);
}

TEST(InterpGroupNorm, ExampleChecksAndSpecializesTheGroupAxis) {
  Problem p = group_norm_problem("group_norm", DType::f16, 2, 3, 5, 1);
  ASSERT_GE(p.ir.vector_symbol, 0);
  EXPECT_EQ(p.ir.symbols[p.ir.vector_symbol].name, "K");
  ASSERT_EQ(p.ir.loop.size(), 2u);
  EXPECT_EQ(p.ir.symbols[p.ir.loop[0].extent].name, "B");
  EXPECT_EQ(p.ir.symbols[p.ir.loop[1].extent].name, "G");
}

TEST(InterpGroupNorm, ForwardMatchesFloat64Formula) {
  uint64_t seed = 200;
  for (DType t : kDtypes) {
    for (int64_t k : {1, 7, 96, 1000}) {
      const int64_t b = 3, g = 4;
      Problem p = group_norm_problem("group_norm", t, b, g, k, ++seed);
      std::vector<HostTensor> got = run_reference(p);
      Vec x = values(tensor(p, p.tensors, "x")), w = values(tensor(p, p.tensors, "w"));
      Vec bias = values(tensor(p, p.tensors, "b"));
      Refs ref;
      for (int64_t s = 0; s < b; ++s) {
        for (int64_t q = 0; q < g; ++q) {
          LnRow r = layer_norm_row(row(x, s * g + q, k), row(w, q, k), row(bias, q, k), 1e-5);
          ref["y"].insert(ref["y"].end(), r.y.begin(), r.y.end());
          ref["mu"].push_back(r.mu);
          ref["rstd"].push_back(r.r);
        }
      }
      for (const auto& [name, expected] : ref) {
        expect_rounded_from(tensor(p, got, name), expected,
                            fmt::format("group_norm {} K={} {}", dtype_name(t), k, name));
      }
    }
  }
}

TEST(InterpGroupNorm, BackwardMatchesFormulaAndFiniteDifferences) {
  const int64_t b = 3, g = 2, k = 24;
  const size_t n = static_cast<size_t>(b * g * k), nw = static_cast<size_t>(g * k);
  Vec x = f32_values(n, 301, 2.0, 0.5), w = f32_values(nw, 302, 1.0, 1.0);
  Vec bias = f32_values(nw, 303), dy = f32_values(n, 304), mu, rstd;
  for (int64_t r = 0; r < b * g; ++r) {
    LnRow ln = layer_norm_row(row(x, r, k), row(w, r % g, k), row(bias, r % g, k), 1e-5);
    mu.push_back(ln.mu);
    rstd.push_back(ln.r);
  }
  auto loss = [&](const Vec& xs, const Vec& ws, const Vec& bs) {
    double l = 0;
    for (int64_t r = 0; r < b * g; ++r) {
      l += dot(row(dy, r, k),
               layer_norm_row(row(xs, r, k), row(ws, r % g, k), row(bs, r % g, k), 1e-5).y);
    }
    return l;
  };
  Problem p = group_norm_problem("group_norm_bwd", DType::f32, b, g, k, 305,
                                 {{"x", make_tensor(DType::f32, {b, g, k}, x)},
                                  {"w", make_tensor(DType::f32, {g, k}, w)},
                                  {"dy", make_tensor(DType::f32, {b, g, k}, dy)},
                                  {"mu", make_tensor(DType::f32, {b, g}, mu)},
                                  {"rstd", make_tensor(DType::f32, {b, g}, rstd)}});
  std::vector<HostTensor> got = run_reference(p);
  expect_gradient(tensor(p, got, "dx"),
                  finite_difference([&](const Vec& v) { return loss(v, w, bias); }, x), "dx");
  expect_gradient(tensor(p, got, "dw"),
                  finite_difference([&](const Vec& v) { return loss(x, v, bias); }, w), "dw");
  expect_gradient(tensor(p, got, "db"),
                  finite_difference([&](const Vec& v) { return loss(x, w, v); }, bias), "db");
  // dw and db are sums over the samples only: group q's entries come from rows (s, q).
  Vec db(nw, 0.0);
  for (int64_t s = 0; s < b; ++s) {
    for (size_t j = 0; j < nw; ++j) db[j] += dy[s * nw + j];
  }
  expect_rounded_from(tensor(p, got, "db"), db, "db closed form");
}

}  // namespace
}  // namespace kdsl

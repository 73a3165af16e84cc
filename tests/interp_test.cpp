// The reference interpreter against independent references: every stdlib normalization kernel
// against its formula evaluated here in float64 (hand-written loops), for f32, f16 and bf16 at the
// row lengths of issue 3, and the backward kernels against finite differences of the forward
// formulas (which validates the docstrings' derivations). Tolerances: interp_test_util.h.
#include "interp_test_util.h"

namespace kdsl {
namespace {

using namespace interp_testing;

constexpr int64_t kRowLengths[] = {1, 7, 64, 760, 1000, 1024, 4096, 8192, 12288};
constexpr int64_t kRowCounts[] = {1, 3, 17};

// --- The stdlib kernels, each with its reference -----------------------------------------------

/// The saved tensors a backward kernel takes, from the float64 forward formula on random inputs
/// (rounded to their storage dtypes as a forward kernel would store them).
using Prepare =
    std::function<std::map<std::string, HostTensor>(DType, int64_t m, int64_t n, uint64_t seed)>;
/// The expected outputs of `p` (its inputs are p.tensors).
using Reference = std::function<Refs(const Problem& p)>;

struct KernelCase {
  const char* file;
  const char* kernel;
  Prepare prepare;
  Reference reference;
};

const KernelCase kCases[] = {
    {"stdlib/rms_norm.kdsl", "rms_norm", nullptr,
     [](const Problem& p) {
       Vec x = values(tensor(p, p.tensors, "x")), w = values(tensor(p, p.tensors, "w"));
       int64_t m = p.symbols[0], n = static_cast<int64_t>(w.size());
       Refs out{{"y", {}}, {"rstd", {}}};
       for (int64_t i = 0; i < m; ++i) {
         RmsRow r = rms_norm_row(row(x, i, n), w, p.scalars[0]);
         out["y"].insert(out["y"].end(), r.y.begin(), r.y.end());
         out["rstd"].push_back(r.r);
       }
       return out;
     }},
    {"stdlib/rms_norm.kdsl", "rms_norm_bwd",
     [](DType t, int64_t m, int64_t n, uint64_t seed) { return rms_saved(t, m, n, seed, "x"); },
     [](const Problem& p) {
       Vec dy = values(tensor(p, p.tensors, "dy")), x = values(tensor(p, p.tensors, "x"));
       Vec w = values(tensor(p, p.tensors, "w")), rstd = values(tensor(p, p.tensors, "rstd"));
       int64_t m = static_cast<int64_t>(rstd.size()), n = static_cast<int64_t>(w.size());
       Refs out{{"dx", Vec(dy.size())}, {"dw", Vec(w.size(), 0.0)}};
       for (int64_t i = 0; i < m; ++i) {
         double r = rstd[i], gx = 0;
         for (int64_t j = 0; j < n; ++j) gx += dy[i * n + j] * w[j] * x[i * n + j];
         gx /= static_cast<double>(n);
         for (int64_t j = 0; j < n; ++j) {
           double g = dy[i * n + j] * w[j];
           out["dx"][i * n + j] = r * g - x[i * n + j] * r * r * r * gx;
           out["dw"][j] += dy[i * n + j] * x[i * n + j] * r;
         }
       }
       return out;
     }},
    {"stdlib/rms_norm.kdsl", "add_rms_norm", nullptr,
     [](const Problem& p) {
       Vec x = values(tensor(p, p.tensors, "x")), res = values(tensor(p, p.tensors, "residual"));
       Vec w = values(tensor(p, p.tensors, "w"));
       DType t = p.ir.tensors[0].dtype;
       int64_t m = p.symbols[0], n = static_cast<int64_t>(w.size());
       Refs out{{"h", {}}, {"y", {}}, {"rstd", {}}};
       for (int64_t i = 0; i < m; ++i) {
         Vec h(static_cast<size_t>(n));
         for (int64_t j = 0; j < n; ++j) h[j] = rounded(t, x[i * n + j] + res[i * n + j]);
         RmsRow r = rms_norm_row(h, w, p.scalars[0]);
         out["h"].insert(out["h"].end(), h.begin(), h.end());
         out["y"].insert(out["y"].end(), r.y.begin(), r.y.end());
         out["rstd"].push_back(r.r);
       }
       return out;
     }},
    {"stdlib/rms_norm.kdsl", "add_rms_norm_bwd",
     [](DType t, int64_t m, int64_t n, uint64_t seed) { return rms_saved(t, m, n, seed, "h"); },
     [](const Problem& p) {
       Vec dy = values(tensor(p, p.tensors, "dy")), dh = values(tensor(p, p.tensors, "dh"));
       Vec h = values(tensor(p, p.tensors, "h")), w = values(tensor(p, p.tensors, "w"));
       Vec rstd = values(tensor(p, p.tensors, "rstd"));
       int64_t m = static_cast<int64_t>(rstd.size()), n = static_cast<int64_t>(w.size());
       Refs out{{"dx", Vec(dy.size())}, {"dw", Vec(w.size(), 0.0)}};
       for (int64_t i = 0; i < m; ++i) {
         double r = rstd[i], gh = 0;
         for (int64_t j = 0; j < n; ++j) gh += dy[i * n + j] * w[j] * h[i * n + j];
         gh /= static_cast<double>(n);
         for (int64_t j = 0; j < n; ++j) {
           double g = dy[i * n + j] * w[j];
           out["dx"][i * n + j] = dh[i * n + j] + r * g - h[i * n + j] * r * r * r * gh;
           out["dw"][j] += dy[i * n + j] * h[i * n + j] * r;
         }
       }
       return out;
     }},
    {"stdlib/layer_norm.kdsl", "layer_norm", nullptr,
     [](const Problem& p) {
       Vec x = values(tensor(p, p.tensors, "x")), w = values(tensor(p, p.tensors, "w"));
       Vec b = values(tensor(p, p.tensors, "b"));
       int64_t m = p.symbols[0], n = static_cast<int64_t>(w.size());
       Refs out{{"y", {}}, {"mu", {}}, {"rstd", {}}};
       for (int64_t i = 0; i < m; ++i) {
         LnRow r = layer_norm_row(row(x, i, n), w, b, p.scalars[0]);
         out["y"].insert(out["y"].end(), r.y.begin(), r.y.end());
         out["mu"].push_back(r.mu);
         out["rstd"].push_back(r.r);
       }
       return out;
     }},
    {"stdlib/layer_norm.kdsl", "layer_norm_bwd",
     [](DType t, int64_t m, int64_t n, uint64_t seed) {
       Vec x = values(make_tensor(t, {m, n}, normal(static_cast<size_t>(m * n), seed, 3.0)));
       for (double& v : x) v = rounded(t, v + 1.5);  // a nonzero mean
       Vec one(static_cast<size_t>(n), 1.0), zero(static_cast<size_t>(n), 0.0), mu, r;
       for (int64_t i = 0; i < m; ++i) {
         LnRow ln = layer_norm_row(row(x, i, n), one, zero, 1e-5);
         mu.push_back(ln.mu);
         r.push_back(ln.r);
       }
       return std::map<std::string, HostTensor>{{"x", make_tensor(t, {m, n}, x)},
                                                {"mu", make_tensor(DType::f32, {m}, mu)},
                                                {"rstd", make_tensor(DType::f32, {m}, r)}};
     },
     [](const Problem& p) {
       Vec dy = values(tensor(p, p.tensors, "dy")), x = values(tensor(p, p.tensors, "x"));
       Vec w = values(tensor(p, p.tensors, "w")), mu = values(tensor(p, p.tensors, "mu"));
       Vec rstd = values(tensor(p, p.tensors, "rstd"));
       int64_t m = static_cast<int64_t>(rstd.size()), n = static_cast<int64_t>(w.size());
       Refs out{{"dx", Vec(dy.size())}, {"dw", Vec(w.size(), 0.0)}, {"db", Vec(w.size(), 0.0)}};
       for (int64_t i = 0; i < m; ++i) {
         double r = rstd[i], mg = 0, mgx = 0;
         Vec xhat(static_cast<size_t>(n)), g(static_cast<size_t>(n));
         for (int64_t j = 0; j < n; ++j) {
           xhat[j] = (x[i * n + j] - mu[i]) * r;
           g[j] = dy[i * n + j] * w[j];
           mg += g[j];
           mgx += g[j] * xhat[j];
         }
         mg /= static_cast<double>(n);
         mgx /= static_cast<double>(n);
         for (int64_t j = 0; j < n; ++j) {
           out["dx"][i * n + j] = r * (g[j] - mg - xhat[j] * mgx);
           out["dw"][j] += dy[i * n + j] * xhat[j];
           out["db"][j] += dy[i * n + j];
         }
       }
       return out;
     }},
    {"stdlib/softmax.kdsl", "softmax", nullptr,
     [](const Problem& p) {
       Vec x = values(p.tensors[0]);
       int64_t m = p.symbols[0], n = p.symbols[1];
       Refs out{{"y", {}}};
       for (int64_t i = 0; i < m; ++i) {
         Vec y = softmax_row(row(x, i, n));
         out["y"].insert(out["y"].end(), y.begin(), y.end());
       }
       return out;
     }},
    {"stdlib/softmax.kdsl", "softmax_bwd",
     [](DType t, int64_t m, int64_t n, uint64_t seed) {
       Vec x = normal(static_cast<size_t>(m * n), seed, 2.0), y;
       for (int64_t i = 0; i < m; ++i) {
         Vec r = softmax_row(row(x, i, n));
         y.insert(y.end(), r.begin(), r.end());
       }
       return std::map<std::string, HostTensor>{{"y", make_tensor(t, {m, n}, y)}};
     },
     [](const Problem& p) {
       Vec dy = values(tensor(p, p.tensors, "dy")), y = values(tensor(p, p.tensors, "y"));
       int64_t m = p.symbols[0], n = p.symbols[1];
       Refs out{{"dx", Vec(dy.size())}};
       for (int64_t i = 0; i < m; ++i) {
         double s = 0;
         for (int64_t j = 0; j < n; ++j) s += dy[i * n + j] * y[i * n + j];
         for (int64_t j = 0; j < n; ++j) out["dx"][i * n + j] = y[i * n + j] * (dy[i * n + j] - s);
       }
       return out;
     }},
    {"stdlib/softmax.kdsl", "log_softmax", nullptr,
     [](const Problem& p) {
       Vec x = values(p.tensors[0]);
       int64_t m = p.symbols[0], n = p.symbols[1];
       Refs out{{"y", {}}};
       for (int64_t i = 0; i < m; ++i) {
         Vec y = log_softmax_row(row(x, i, n));
         out["y"].insert(out["y"].end(), y.begin(), y.end());
       }
       return out;
     }},
    {"stdlib/softmax.kdsl", "log_softmax_bwd",
     [](DType t, int64_t m, int64_t n, uint64_t seed) {
       Vec x = normal(static_cast<size_t>(m * n), seed, 2.0), y;
       for (int64_t i = 0; i < m; ++i) {
         Vec r = log_softmax_row(row(x, i, n));
         y.insert(y.end(), r.begin(), r.end());
       }
       return std::map<std::string, HostTensor>{{"y", make_tensor(t, {m, n}, y)}};
     },
     [](const Problem& p) {
       Vec dy = values(tensor(p, p.tensors, "dy")), y = values(tensor(p, p.tensors, "y"));
       int64_t m = p.symbols[0], n = p.symbols[1];
       Refs out{{"dx", Vec(dy.size())}};
       for (int64_t i = 0; i < m; ++i) {
         double s = 0;
         for (int64_t j = 0; j < n; ++j) s += dy[i * n + j];
         for (int64_t j = 0; j < n; ++j) {
           out["dx"][i * n + j] = dy[i * n + j] - std::exp(y[i * n + j]) * s;
         }
       }
       return out;
     }},
};

// Names the case in test listings (ctest -N) instead of dumping its bytes.
void PrintTo(const KernelCase& kc, std::ostream* os) {
  *os << kc.kernel;
}

class InterpStdlib : public ::testing::TestWithParam<KernelCase> {};

TEST_P(InterpStdlib, MatchesFloat64FormulaAtEveryLengthAndDtype) {
  const KernelCase& kc = GetParam();
  uint64_t seed = 100;
  for (DType t : kDtypes) {
    for (int64_t n : kRowLengths) {
      for (int64_t m : kRowCounts) {
        ++seed;
        std::map<std::string, HostTensor> given;
        if (kc.prepare) given = kc.prepare(t, m, n, seed * 31);
        Problem p = problem(kc.file, kc.kernel, t, m, n, seed, given);
        std::vector<HostTensor> got = run_reference(p);
        Refs ref = kc.reference(p);
        for (const auto& [name, expected] : ref) {
          expect_rounded_from(
              tensor(p, got, name), expected,
              fmt::format("{} {} M={} N={} {}", kc.kernel, dtype_name(t), m, n, name));
        }
        if (HasFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stdlib, InterpStdlib, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.kernel); });

// --- Backward kernels against finite differences of the forward formulas ----------------------
//
// L = sum(dy * forward(x, ...)) (plus sum(dh * h) for the fused residual), differentiated by
// central differences in float64 with step 1e-5 * max(1, |v|). The backward kernel runs in f32;
// it must agree to 2e-5 of the gradient's largest magnitude (f32 rounding of the inputs and of
// rstd, about 1e-7, plus the finite-difference error, about 1e-9).

constexpr int64_t kFdShapes[][2] = {{3, 7}, {2, 64}};

TEST(InterpFiniteDifferences, RmsNormBwd) {
  for (const auto& shape : kFdShapes) {
    const int64_t m = shape[0], n = shape[1];  // (not a structured binding: lambdas use them)
    size_t mn = static_cast<size_t>(m * n);
    Vec x = f32_values(mn, 1), w = f32_values(static_cast<size_t>(n), 2, 1.0, 1.0);
    Vec dy = f32_values(mn, 3), rstd;
    auto loss = [&](const Vec& xs, const Vec& ws) {
      double l = 0;
      for (int64_t i = 0; i < m; ++i)
        l += dot(row(dy, i, n), rms_norm_row(row(xs, i, n), ws, 1e-6).y);
      return l;
    };
    for (int64_t i = 0; i < m; ++i) rstd.push_back(rms_norm_row(row(x, i, n), w, 1e-6).r);
    Problem p = problem("stdlib/rms_norm.kdsl", "rms_norm_bwd", DType::f32, m, n, 4,
                        {{"x", make_tensor(DType::f32, {m, n}, x)},
                         {"w", make_tensor(DType::f32, {n}, w)},
                         {"dy", make_tensor(DType::f32, {m, n}, dy)},
                         {"rstd", make_tensor(DType::f32, {m}, rstd)}});
    std::vector<HostTensor> got = run_reference(p);
    expect_gradient(tensor(p, got, "dx"),
                    finite_difference([&](const Vec& v) { return loss(v, w); }, x),
                    fmt::format("dx N={}", n));
    expect_gradient(tensor(p, got, "dw"),
                    finite_difference([&](const Vec& v) { return loss(x, v); }, w),
                    fmt::format("dw N={}", n));
  }
}

TEST(InterpFiniteDifferences, AddRmsNormBwdTakesBothGradients) {
  for (const auto& shape : kFdShapes) {
    const int64_t m = shape[0], n = shape[1];  // (not a structured binding: lambdas use them)
    size_t mn = static_cast<size_t>(m * n);
    Vec x = f32_values(mn, 11), res = f32_values(mn, 12),
        w = f32_values(static_cast<size_t>(n), 13);
    Vec dy = f32_values(mn, 14), dh = f32_values(mn, 15), h(mn), rstd;
    for (size_t i = 0; i < mn; ++i) h[i] = rounded(DType::f32, x[i] + res[i]);
    // L(x, residual, w) = sum(dy * y) + sum(dh * h) with h = x + residual, y = rms_norm(h) * w.
    auto loss = [&](const Vec& xs, const Vec& rs, const Vec& ws) {
      double l = 0;
      for (int64_t i = 0; i < m; ++i) {
        Vec hs(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) hs[j] = xs[i * n + j] + rs[i * n + j];
        l += dot(row(dy, i, n), rms_norm_row(hs, ws, 1e-6).y) + dot(row(dh, i, n), hs);
      }
      return l;
    };
    for (int64_t i = 0; i < m; ++i) rstd.push_back(rms_norm_row(row(h, i, n), w, 1e-6).r);
    Problem p = problem("stdlib/rms_norm.kdsl", "add_rms_norm_bwd", DType::f32, m, n, 16,
                        {{"h", make_tensor(DType::f32, {m, n}, h)},
                         {"w", make_tensor(DType::f32, {n}, w)},
                         {"dy", make_tensor(DType::f32, {m, n}, dy)},
                         {"dh", make_tensor(DType::f32, {m, n}, dh)},
                         {"rstd", make_tensor(DType::f32, {m}, rstd)}});
    std::vector<HostTensor> got = run_reference(p);
    const HostTensor& dx = tensor(p, got, "dx");
    expect_gradient(dx, finite_difference([&](const Vec& v) { return loss(v, res, w); }, x),
                    fmt::format("d/dx N={}", n));
    expect_gradient(dx, finite_difference([&](const Vec& v) { return loss(x, v, w); }, res),
                    fmt::format("d/dresidual N={}", n));
    expect_gradient(tensor(p, got, "dw"),
                    finite_difference([&](const Vec& v) { return loss(x, res, v); }, w),
                    fmt::format("dw N={}", n));
  }
}

TEST(InterpFiniteDifferences, LayerNormBwd) {
  for (const auto& shape : kFdShapes) {
    const int64_t m = shape[0], n = shape[1];  // (not a structured binding: lambdas use them)
    size_t mn = static_cast<size_t>(m * n);
    Vec x = f32_values(mn, 21, 2.0, 0.7), w = f32_values(static_cast<size_t>(n), 22, 1.0, 1.0);
    Vec b = f32_values(static_cast<size_t>(n), 23), dy = f32_values(mn, 24), mu, rstd;
    auto loss = [&](const Vec& xs, const Vec& ws, const Vec& bs) {
      double l = 0;
      for (int64_t i = 0; i < m; ++i) {
        l += dot(row(dy, i, n), layer_norm_row(row(xs, i, n), ws, bs, 1e-5).y);
      }
      return l;
    };
    for (int64_t i = 0; i < m; ++i) {
      LnRow ln = layer_norm_row(row(x, i, n), w, b, 1e-5);
      mu.push_back(ln.mu);
      rstd.push_back(ln.r);
    }
    Problem p = problem("stdlib/layer_norm.kdsl", "layer_norm_bwd", DType::f32, m, n, 25,
                        {{"x", make_tensor(DType::f32, {m, n}, x)},
                         {"w", make_tensor(DType::f32, {n}, w)},
                         {"dy", make_tensor(DType::f32, {m, n}, dy)},
                         {"mu", make_tensor(DType::f32, {m}, mu)},
                         {"rstd", make_tensor(DType::f32, {m}, rstd)}});
    std::vector<HostTensor> got = run_reference(p);
    expect_gradient(tensor(p, got, "dx"),
                    finite_difference([&](const Vec& v) { return loss(v, w, b); }, x),
                    fmt::format("dx N={}", n));
    expect_gradient(tensor(p, got, "dw"),
                    finite_difference([&](const Vec& v) { return loss(x, v, b); }, w),
                    fmt::format("dw N={}", n));
    expect_gradient(tensor(p, got, "db"),
                    finite_difference([&](const Vec& v) { return loss(x, w, v); }, b),
                    fmt::format("db N={}", n));
  }
}

void softmax_family_fd(const char* kernel, Vec (*forward)(const Vec&)) {
  for (const auto& shape : kFdShapes) {
    const int64_t m = shape[0], n = shape[1];  // (not a structured binding: lambdas use them)
    size_t mn = static_cast<size_t>(m * n);
    Vec x = f32_values(mn, 31, 2.0), dy = f32_values(mn, 32), y;
    for (int64_t i = 0; i < m; ++i) {
      Vec r = forward(row(x, i, n));
      y.insert(y.end(), r.begin(), r.end());
    }
    auto loss = [&](const Vec& xs) {
      double l = 0;
      for (int64_t i = 0; i < m; ++i) l += dot(row(dy, i, n), forward(row(xs, i, n)));
      return l;
    };
    Problem p = problem(
        "stdlib/softmax.kdsl", kernel, DType::f32, m, n, 33,
        {{"y", make_tensor(DType::f32, {m, n}, y)}, {"dy", make_tensor(DType::f32, {m, n}, dy)}});
    std::vector<HostTensor> got = run_reference(p);
    expect_gradient(tensor(p, got, "dx"), finite_difference(loss, x),
                    fmt::format("{} dx N={}", kernel, n));
  }
}

TEST(InterpFiniteDifferences, SoftmaxBwd) {
  softmax_family_fd("softmax_bwd", softmax_row);
}

TEST(InterpFiniteDifferences, LogSoftmaxBwd) {
  softmax_family_fd("log_softmax_bwd", log_softmax_row);
}

// RG-LRU (stdlib/rg_lru.kdsl): the backward kernel's four gradients against central differences
// of the forward recurrence written out here in float64 (Griffin, section 2.4: a_t = exp(-8 r_t
// softplus(-Lambda)), h_t = a_t h_{t-1} + sqrt(1 - a_t^2) i_t x_t), L = sum(dh * h). The gates
// are of order 1, so a_t stays below 1 - 1e-4 and the bounded derivative of the square root
// (clamped at 1 - a^2 = 2.5e-7) is the true one.
TEST(InterpFiniteDifferences, RgLruBwd) {
  const int64_t b = 2, l = 9, d = 5;
  const size_t n = static_cast<size_t>(b * l * d);
  const Vec x = f32_values(n, 81), gx = f32_values(n, 82), ga = f32_values(n, 83);
  const Vec lam = f32_values(static_cast<size_t>(d), 84, 1.0, 0.5), dh = f32_values(n, 85);
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  auto forward = [&](const Vec& xs, const Vec& gxs, const Vec& gas, const Vec& lams) {
    Vec h(n);
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t di = 0; di < d; ++di) {
        double state = 0;
        const double sp = std::log1p(std::exp(-lams[di]));  // softplus(-Lambda)
        for (int64_t t = 0; t < l; ++t) {
          const size_t i = static_cast<size_t>((bi * l + t) * d + di);
          const double log_a = -8.0 * sigmoid(gas[i]) * sp, a = std::exp(log_a);
          state = a * state + std::sqrt(-std::expm1(2 * log_a)) * sigmoid(gxs[i]) * xs[i];
          h[i] = state;
        }
      }
    }
    return h;
  };
  auto loss = [&](const Vec& xs, const Vec& gxs, const Vec& gas, const Vec& lams) {
    return dot(dh, forward(xs, gxs, gas, lams));
  };
  Vec h = forward(x, gx, ga, lam);
  for (double& v : h) v = rounded(DType::f32, v);
  const std::vector<int64_t> shape = {b, l, d};
  Problem p = problem(stdlib("stdlib/rg_lru.kdsl"), "rg_lru_bwd", {DType::f32},
                      {{"B", b}, {"L", l}, {"D", d}},
                      {{"x", make_tensor(DType::f32, shape, x)},
                       {"gate_x", make_tensor(DType::f32, shape, gx)},
                       {"gate_a", make_tensor(DType::f32, shape, ga)},
                       {"lam", make_tensor(DType::f32, {d}, lam)},
                       {"h", make_tensor(DType::f32, shape, h)},
                       {"dh", make_tensor(DType::f32, shape, dh)}});
  std::vector<HostTensor> got = run_reference(p);
  expect_gradient(tensor(p, got, "dx"),
                  finite_difference([&](const Vec& v) { return loss(v, gx, ga, lam); }, x), "dx");
  expect_gradient(tensor(p, got, "dgate_x"),
                  finite_difference([&](const Vec& v) { return loss(x, v, ga, lam); }, gx),
                  "dgate_x");
  expect_gradient(tensor(p, got, "dgate_a"),
                  finite_difference([&](const Vec& v) { return loss(x, gx, v, lam); }, ga),
                  "dgate_a");
  expect_gradient(tensor(p, got, "dlam"),
                  finite_difference([&](const Vec& v) { return loss(x, gx, ga, v); }, lam), "dlam");
}

}  // namespace
}  // namespace kdsl

#include "interp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <map>
#include <thread>

#include "dsl/math_ref.h"
#include "dsl/numeric.h"
#include "interp_internal.h"
#include "kdsl/error.h"

namespace kdsl {

using interp_detail::Cplx;
using interp_detail::Val;

namespace {

using ir::Form;
using ir::Op;

bool has_vector_axis(const ir::View& v) {
  return std::any_of(v.begin(), v.end(),
                     [](const ir::AxisIndex& a) { return a.kind == ir::AxisIndex::Kind::vector; });
}

struct Shared {
  const ir::Kernel& k;
  std::vector<HostTensor>& tensors;
  const std::vector<double>& scalars;
  const std::vector<int64_t>& symbols;
  std::vector<std::vector<int64_t>> strides;
  int64_t n = 1;
};

// Column-reduction sums of one thread, per store: dense over the output tensor.
struct Partial {
  std::vector<std::vector<double>> re, im;
};

class RowEval {
 public:
  RowEval(const Shared& sh, Partial& part)
      : sh_(sh), k_(sh.k), part_(part), vals_(k_.nodes.size()) {}

  void run(const std::vector<int64_t>& idx) {
    idx_ = &idx;
    for (size_t i = 0; i < k_.nodes.size(); ++i) eval(i);
    for (size_t s = 0; s < k_.stores.size(); ++s) store(s);
  }

 private:
  int64_t offset(int32_t tensor, const ir::View& view, int64_t j) const {
    const auto& st = sh_.strides[tensor];
    int64_t off = 0;
    for (size_t ax = 0; ax < view.size(); ++ax) {
      switch (view[ax].kind) {
        case ir::AxisIndex::Kind::loop:
          off += (*idx_)[view[ax].value] * st[ax];
          break;
        case ir::AxisIndex::Kind::constant:
          off += view[ax].value * st[ax];
          break;
        case ir::AxisIndex::Kind::vector:
          off += j * st[ax];
          break;
      }
    }
    return off;
  }

  static void resize(Val& v, bool vec, size_t n, bool cplx) {
    v.vec = vec;
    v.re.resize(vec ? n : 1);
    if (cplx) {
      v.im.resize(vec ? n : 1);
    } else {
      v.im.clear();
    }
  }

  void eval(size_t id) {
    const ir::Node& n = k_.nodes[id];
    Val& out = vals_[id];
    const bool vec = n.type.form == Form::vector;
    const size_t len = vec ? static_cast<size_t>(sh_.n) : 1;
    const bool cplx = n.type.dtype == DType::c64;
    resize(out, vec, len, cplx);
    switch (n.op) {
      case Op::constant:
        out.re[0] = n.number;
        if (cplx) out.im[0] = n.number_im;
        return;
      case Op::param:
        out.re[0] = round_to(n.type.dtype, sh_.scalars.at(n.index));
        return;
      case Op::shape:
        out.re[0] = static_cast<double>(sh_.symbols.at(n.index));
        return;
      case Op::position:
        for (size_t j = 0; j < len; ++j) out.re[j] = static_cast<double>(j);
        return;
      case Op::load: {
        const HostTensor& t = sh_.tensors[n.index];
        for (size_t j = 0; j < len; ++j) {
          int64_t off = offset(n.index, n.view, static_cast<int64_t>(j));
          out.re[j] = t.get(off);
          if (cplx) out.im[j] = t.get_imag(off);
        }
        return;
      }
      case Op::reduce:
        reduce(n, out);
        return;
      case Op::scan: {
        std::vector<const Val*> args;
        for (ir::ValueId a : n.args) args.push_back(&vals_[a]);
        interp_detail::eval_scan(k_, n, args, static_cast<size_t>(sh_.n), scans_[id]);
        out = scans_[id][0];
        return;
      }
      case Op::extract:
        out = scans_.at(n.args[0]).at(n.index);
        return;
      case Op::shift:
        interp_detail::eval_shift(n, vals_[n.args[0]], vals_[n.args[1]], static_cast<size_t>(sh_.n),
                                  out);
        return;
      case Op::arg:
        throw InternalError("interpreter: an arg node outside a region");
      default:
        break;
    }
    for (size_t j = 0; j < len; ++j) elementwise(n, j, out);
  }

  void elementwise(const ir::Node& n, size_t j, Val& out) {
    Cplx args[3];
    for (size_t a = 0; a < n.args.size() && a < 3; ++a) {
      const Val& v = vals_[n.args[a]];
      args[a] = {v.r(j), v.i(j)};
    }
    Cplx r = eval_elementwise(n, k_.node(n.args[0]).type.dtype, args);
    out.re[j] = r.re;
    if (!out.im.empty()) out.im[j] = r.im;
  }

  void reduce(const ir::Node& n, Val& out) {
    const Val& a = vals_[n.args[0]];
    size_t len = a.re.size();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    switch (static_cast<ir::ReduceKind>(n.fn)) {
      case ir::ReduceKind::sum: {
        double s = 0, si = 0;
        for (size_t j = 0; j < len; ++j) {
          s += a.re[j];
          si += a.i(j);
        }
        out.re[0] = s;
        if (!out.im.empty()) out.im[0] = si;
        return;
      }
      case ir::ReduceKind::max:
      case ir::ReduceKind::min: {
        bool is_max = static_cast<ir::ReduceKind>(n.fn) == ir::ReduceKind::max;
        double m = is_max ? -std::numeric_limits<double>::infinity()
                          : std::numeric_limits<double>::infinity();
        for (size_t j = 0; j < len; ++j) {
          if (std::isnan(a.re[j])) {
            m = nan;
            break;
          }
          m = is_max ? std::max(m, a.re[j]) : std::min(m, a.re[j]);
        }
        out.re[0] = m;
        return;
      }
      case ir::ReduceKind::var: {
        double mean = 0;
        for (size_t j = 0; j < len; ++j) mean += a.re[j];
        mean /= static_cast<double>(len);
        double m2 = 0;
        for (size_t j = 0; j < len; ++j) m2 += (a.re[j] - mean) * (a.re[j] - mean);
        out.re[0] = m2 / static_cast<double>(len);
        return;
      }
      case ir::ReduceKind::first:
      case ir::ReduceKind::last: {
        size_t j = static_cast<ir::ReduceKind>(n.fn) == ir::ReduceKind::first ? 0 : len - 1;
        out.re[0] = a.r(j);
        if (!out.im.empty()) out.im[0] = a.i(j);
        return;
      }
      case ir::ReduceKind::argmax:
      case ir::ReduceKind::argmin: {
        bool is_max = static_cast<ir::ReduceKind>(n.fn) == ir::ReduceKind::argmax;
        size_t best = 0;
        for (size_t j = 1; j < len; ++j) {
          double x = a.re[j], b = a.re[best];
          if (std::isnan(b)) break;
          if (std::isnan(x) || (is_max ? x > b : x < b)) best = j;
        }
        out.re[0] = static_cast<double>(best);
        return;
      }
    }
  }

  void store(size_t s) {
    const ir::Store& st = k_.stores[s];
    const Val& v = vals_[st.value];
    size_t len = has_vector_axis(st.view) ? static_cast<size_t>(sh_.n) : 1;
    HostTensor& t = sh_.tensors[st.tensor];
    for (size_t j = 0; j < len; ++j) {
      int64_t off = offset(st.tensor, st.view, static_cast<int64_t>(j));
      if (st.kind == ir::StoreKind::write) {
        t.set(off, v.r(j), v.i(j));
      } else {
        part_.re[s][off] += v.r(j);
        part_.im[s][off] += v.i(j);
      }
    }
  }

  const Shared& sh_;
  const ir::Kernel& k_;
  Partial& part_;
  std::vector<Val> vals_;
  std::map<size_t, std::vector<Val>> scans_;  // the results of each scan node
  const std::vector<int64_t>* idx_ = nullptr;
};

void check_shapes(const ir::Kernel& k, const std::vector<HostTensor>& tensors,
                  const std::vector<int64_t>& symbols) {
  if (tensors.size() != k.tensors.size() || symbols.size() != k.symbols.size()) {
    throw ArgumentError(fmt::format("interpreter: kernel '{}' takes {} tensors and {} symbols",
                                    k.name, k.tensors.size(), k.symbols.size()));
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    const ir::TensorParam& p = k.tensors[t];
    bool ok = tensors[t].shape.size() == p.shape.size() && tensors[t].dtype == p.dtype;
    for (size_t ax = 0; ok && ax < p.shape.size(); ++ax) {
      int64_t want = p.shape[ax].symbol >= 0 ? symbols[p.shape[ax].symbol] : p.shape[ax].constant;
      ok = tensors[t].shape[ax] == want;
    }
    if (!ok) {
      throw ArgumentError(
          fmt::format("interpreter: tensor '{}' does not match its declared "
                      "dtype and shape",
                      p.name));
    }
  }
}

// Every element offset a reduce store's view reaches, over all values of the loop variables it
// keeps and every position of its vector axis.
std::vector<uint8_t> reachable_offsets(const Shared& sh, const ir::Store& st) {
  const auto& strides = sh.strides[st.tensor];
  std::vector<uint8_t> out(static_cast<size_t>(sh.tensors[st.tensor].numel()), 0);
  std::vector<std::pair<int64_t, int64_t>> axes;  // (extent, stride) of the varying axes
  int64_t base = 0;
  for (size_t ax = 0; ax < st.view.size(); ++ax) {
    const ir::AxisIndex& a = st.view[ax];
    if (a.kind == ir::AxisIndex::Kind::constant) {
      base += a.value * strides[ax];
    } else if (a.kind == ir::AxisIndex::Kind::vector) {
      axes.push_back({sh.n, strides[ax]});
    } else {
      axes.push_back({sh.symbols[sh.k.loop[a.value].extent], strides[ax]});
    }
  }
  int64_t count = 1;
  for (const auto& [e, stride] : axes) count *= e;
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, off = base;
    for (size_t a = axes.size(); a-- > 0;) {
      off += (rest % axes[a].first) * axes[a].second;
      rest /= axes[a].first;
    }
    out[static_cast<size_t>(off)] = 1;
  }
  return out;
}

}  // namespace

namespace interp_detail {

namespace {

Cplx eval_elementwise_raw(const ir::Node& n, DType at, const Cplx* args);

}  // namespace

Cplx eval_elementwise(const ir::Node& n, DType at, const Cplx* args) {
  Cplx r = eval_elementwise_raw(n, at, args);
  // Integers have no negative zero: 0 * -5, -4 % 2 or i32(-0.5) is the 0 that the GPU's integer
  // arithmetic gives, not the -0.0 of double arithmetic (which f32(...) would carry on: 1 / -0.0
  // is -inf where the GPU gives +inf; found by a new-user test).
  if (is_int(n.type.dtype)) r.re += 0.0;
  return r;
}

namespace {

Cplx eval_elementwise_raw(const ir::Node& n, DType at, const Cplx* args) {
  const Cplx& a = args[0];
  Cplx out;
  switch (n.op) {
    case Op::cast:
      out.re = round_to(n.type.dtype, a.re);
      return out;
    case Op::unary: {
      auto fn = static_cast<ir::UnaryFn>(n.fn);
      if (at == DType::c64) {
        std::complex<double> z(a.re, a.im);
        switch (fn) {
          case ir::UnaryFn::neg:
            return {-z.real(), -z.imag()};
          case ir::UnaryFn::abs:
            return {std::abs(z), 0};
          case ir::UnaryFn::real:
            return {z.real(), 0};
          case ir::UnaryFn::imag:
            return {z.imag(), 0};
          case ir::UnaryFn::conj:
            return {z.real(), -z.imag()};
          default:
            throw InternalError("interpreter: complex unary");
        }
      }
      out.re = ref_unary(fn, a.re);
      return out;
    }
    case Op::binary: {
      const Cplx& b = args[1];
      auto fn = static_cast<ir::BinaryFn>(n.fn);
      if (fn == ir::BinaryFn::complex) return {a.re, b.re};
      if (at == DType::c64) {
        std::complex<double> x(a.re, a.im), y(b.re, b.im), z;
        switch (fn) {
          case ir::BinaryFn::add:
            z = x + y;
            break;
          case ir::BinaryFn::sub:
            z = x - y;
            break;
          case ir::BinaryFn::mul:
            z = x * y;
            break;
          case ir::BinaryFn::div:
            z = x / y;
            break;
          default:
            throw InternalError("interpreter: complex binary");
        }
        return {z.real(), z.imag()};
      }
      out.re = ref_binary(fn, a.re, b.re);
      return out;
    }
    case Op::compare: {
      const Cplx& b = args[1];
      auto fn = static_cast<ir::CompareFn>(n.fn);
      if (at == DType::c64) {
        bool eq = a.re == b.re && a.im == b.im;
        out.re = (fn == ir::CompareFn::eq ? eq : !eq) ? 1 : 0;
        return out;
      }
      out.re = ref_compare(fn, a.re, b.re) ? 1 : 0;
      return out;
    }
    case Op::select:
      return a.re != 0 ? args[1] : args[2];
    default:
      throw InternalError(fmt::format("interpreter: unexpected {}", ir::name(n.op)));
  }
}

}  // namespace

}  // namespace interp_detail

void interpret(const ir::Kernel& k, std::vector<HostTensor>& tensors,
               const std::vector<double>& scalars, const std::vector<int64_t>& symbols) {
  check_shapes(k, tensors, symbols);
  Shared sh{k, tensors, scalars, symbols, {}, 1};
  for (const HostTensor& t : tensors) sh.strides.push_back(t.strides());
  if (k.vector_symbol >= 0) sh.n = symbols[k.vector_symbol];
  int64_t rows = 1;
  for (const ir::LoopVar& l : k.loop) rows *= symbols[l.extent];

  int64_t work = rows * std::max<int64_t>(sh.n, 1) * static_cast<int64_t>(k.nodes.size());
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  int64_t threads =
      std::clamp<int64_t>(work / (1 << 20), 1, std::max<int64_t>(1, std::min<int64_t>(hw, rows)));
  std::vector<Partial> partials(static_cast<size_t>(threads));
  for (Partial& p : partials) {
    for (const ir::Store& st : k.stores) {
      size_t size =
          st.kind == ir::StoreKind::reduce ? static_cast<size_t>(tensors[st.tensor].numel()) : 0;
      p.re.emplace_back(size, 0.0);
      p.im.emplace_back(size, 0.0);
    }
  }
  auto worker = [&](int64_t w) {
    RowEval eval(sh, partials[w]);
    std::vector<int64_t> idx(k.loop.size());
    int64_t begin = rows * w / threads, end = rows * (w + 1) / threads;
    for (int64_t r = begin; r < end; ++r) {
      int64_t rest = r;
      for (size_t l = k.loop.size(); l-- > 0;) {
        int64_t e = symbols[k.loop[l].extent];
        idx[l] = rest % e;
        rest /= e;
      }
      eval.run(idx);
    }
  };
  std::vector<std::thread> pool;
  for (int64_t w = 1; w < threads; ++w) pool.emplace_back(worker, w);
  worker(0);
  for (auto& th : pool) th.join();

  // Column reductions: sum the threads' partials in thread order, then write every element the
  // view reaches once (an empty loop gives zeros for Out and leaves InOut unchanged).
  for (size_t s = 0; s < k.stores.size(); ++s) {
    const ir::Store& st = k.stores[s];
    if (st.kind != ir::StoreKind::reduce) continue;
    HostTensor& t = tensors[st.tensor];
    std::vector<uint8_t> reachable = reachable_offsets(sh, st);
    bool inout = k.tensors[st.tensor].role == ir::Role::inout;
    for (size_t off = 0; off < partials[0].re[s].size(); ++off) {
      if (!reachable[off]) continue;
      double re = inout ? t.get(static_cast<int64_t>(off)) : 0;
      double im = inout ? t.get_imag(static_cast<int64_t>(off)) : 0;
      for (const Partial& p : partials) {
        re += p.re[s][off];
        im += p.im[s][off];
      }
      t.set(static_cast<int64_t>(off), re, im);
    }
  }
}

}  // namespace kdsl

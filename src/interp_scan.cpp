// Scans and shifts in the CPU reference interpreter: the plain sequential definitions of SPEC
// section 10, in float64 (complex128 for c64).
#include <fmt/format.h>

#include <limits>

#include "interp_internal.h"
#include "kdsl/error.h"

namespace kdsl::interp_detail {
namespace {

// The identity of a built-in combine function on dtype t (the first output of an exclusive scan
// without init).
Cplx identity(ir::ScanKind kind, DType t) {
  const double inf = std::numeric_limits<double>::infinity();
  const bool integer = is_int(t);
  switch (kind) {
    case ir::ScanKind::sum:
      return {0, 0};
    case ir::ScanKind::prod:
      return {1, 0};
    case ir::ScanKind::max:
      return {integer ? -9223372036854775808.0 : -inf, 0};
    case ir::ScanKind::min:
      return {integer ? 9223372036854775807.0 : inf, 0};
    case ir::ScanKind::logaddexp:
      return {-inf, 0};
    case ir::ScanKind::custom:
      break;
  }
  throw InternalError("interpreter: an exclusive scan with a user combine function has no init");
}

// Evaluates a scan's combine function on (left..., right...).
class Combine {
 public:
  Combine(const ir::Region& r, size_t k) : r_(r), k_(k), vals_(r.nodes.size()) {}

  void operator()(const std::vector<Cplx>& left, const std::vector<Cplx>& right,
                  std::vector<Cplx>& out) {
    for (size_t i = 0; i < r_.nodes.size(); ++i) {
      const ir::Node& n = r_.nodes[i];
      switch (n.op) {
        case ir::Op::arg: {
          auto a = static_cast<size_t>(n.index);
          vals_[i] = a < k_ ? left[a] : right[a - k_];
          break;
        }
        case ir::Op::constant:
          vals_[i] = {n.number, n.number_im};
          break;
        default: {
          Cplx args[3];
          for (size_t a = 0; a < n.args.size() && a < 3; ++a) args[a] = vals_[n.args[a]];
          vals_[i] = eval_elementwise(n, r_.nodes[n.args[0]].type.dtype, args);
          break;
        }
      }
    }
    for (size_t j = 0; j < k_; ++j) out[j] = vals_[r_.results[j]];
  }

 private:
  const ir::Region& r_;
  size_t k_;
  std::vector<Cplx> vals_;
};

}  // namespace

void eval_scan(const ir::Kernel& k, const ir::Node& n, const std::vector<const Val*>& args,
               size_t len, std::vector<Val>& results) {
  const size_t m = n.results.size();
  Combine combine(k.regions.at(static_cast<size_t>(n.index)), m);
  results.assign(m, Val{});
  for (size_t j = 0; j < m; ++j) {
    results[j].vec = true;
    results[j].re.assign(len, 0.0);
    if (n.results[j].dtype == DType::c64) results[j].im.assign(len, 0.0);
  }
  // c: the combination of the initial value and the elements visited so far (`have` once it
  // holds anything); visited from the last position to the first for a reverse scan, with the
  // accumulated (later) elements as the left operand.
  std::vector<Cplx> c(m), e(m), next(m);
  bool have = false;
  if (n.has_init) {
    for (size_t j = 0; j < m; ++j) c[j] = {args[m + j]->r(0), args[m + j]->i(0)};
    have = true;
  } else if (n.exclusive) {
    for (size_t j = 0; j < m; ++j)
      c[j] = identity(static_cast<ir::ScanKind>(n.fn), n.results[j].dtype);
    have = true;
  }
  for (size_t s = 0; s < len; ++s) {
    size_t t = n.reverse ? len - 1 - s : s;
    for (size_t j = 0; j < m; ++j) e[j] = {args[j]->r(t), args[j]->i(t)};
    if (n.exclusive) {
      for (size_t j = 0; j < m; ++j) {
        results[j].re[t] = c[j].re;
        if (!results[j].im.empty()) results[j].im[t] = c[j].im;
      }
    }
    if (have) {
      combine(c, e, next);
      c.swap(next);
    } else {
      c = e;
      have = true;
    }
    if (!n.exclusive) {
      for (size_t j = 0; j < m; ++j) {
        results[j].re[t] = c[j].re;
        if (!results[j].im.empty()) results[j].im[t] = c[j].im;
      }
    }
  }
}

void eval_shift(const ir::Node& n, const Val& v, const Val& fill, size_t len, Val& out) {
  const int64_t k = n.index;
  const auto l = static_cast<int64_t>(len);
  for (int64_t t = 0; t < l; ++t) {
    int64_t from = t - k;
    bool in = from >= 0 && from < l;
    out.re[static_cast<size_t>(t)] = in ? v.r(static_cast<size_t>(from)) : fill.r(0);
    if (!out.im.empty())
      out.im[static_cast<size_t>(t)] = in ? v.i(static_cast<size_t>(from)) : fill.i(0);
  }
}

}  // namespace kdsl::interp_detail

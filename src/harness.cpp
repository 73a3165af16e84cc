#include "harness.h"

#include <fmt/format.h>

#include <algorithm>

#include "interp.h"
#include "schedule_scan.h"

namespace kdsl {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

}  // namespace

Problem make_problem(std::shared_ptr<const FrontEnd> fe, const ProblemSpec& ps) {
  Problem p;
  p.fe = std::move(fe);
  p.sig = p.fe->find(ps.kernel);
  if (!p.sig)
    throw ArgumentError(fmt::format("no kernel named '{}' in {}", ps.kernel, p.fe->file->path()));
  const KernelSignature& sig = *p.sig;
  for (const auto& entry : ps.shapes) {
    const std::string& name = entry.first;  // a lambda uses it (clang 14: no captured bindings)
    bool known = std::any_of(sig.symbols.begin(), sig.symbols.end(),
                             [&](const ir::Symbol& s) { return s.name == name; });
    if (!known)
      throw ArgumentError(fmt::format("kernel '{}' has no shape symbol {}", sig.name, name));
  }
  for (const ir::Symbol& s : sig.symbols) {
    auto it = ps.shapes.find(s.name);
    if (it == ps.shapes.end()) {
      throw ArgumentError(
          fmt::format("shape symbol {} of kernel '{}' is not set", s.name, sig.name));
    }
    p.symbols.push_back(it->second);
  }
  p.spec.binding = ps.binding;
  p.schedule = ps.schedule;
  p.use_tuning_db = ps.use_tuning_db;
  if (sig.vector_symbol >= 0) p.spec.vector_extent = p.symbols[sig.vector_symbol];
  set_row_major_masks(p.spec, sig, p.symbols);  // the row-major tensors made below
  p.ir = lower_specialized(*p.fe, sig.name, p.spec);
  std::map<std::string, bool> used;
  for (size_t t = 0; t < p.ir.tensors.size(); ++t) {
    const ir::TensorParam& tp = p.ir.tensors[t];
    std::vector<int64_t> shape;
    for (const ir::Extent& e : tp.shape)
      shape.push_back(e.symbol >= 0 ? p.symbols[e.symbol] : e.constant);
    auto given = ps.inputs.find(tp.name);
    if (given != ps.inputs.end()) {
      if (tp.role == ir::Role::out)
        throw ArgumentError(fmt::format("'{}' is an output, not an input", tp.name));
      if (given->second.dtype != tp.dtype || given->second.shape != shape) {
        throw ArgumentError(
            fmt::format("input '{}' has dtype {} and shape {}; the kernel needs {} {}", tp.name,
                        dtype_name(given->second.dtype), shape_text(given->second.shape),
                        dtype_name(tp.dtype), shape_text(shape)));
      }
      p.tensors.push_back(given->second);
      used[tp.name] = true;
      continue;
    }
    HostTensor h(tp.dtype, shape);
    if (tp.role == ir::Role::out) {
      h.poison();
    } else {
      fill_random(h, ps.seed * 1000003ULL + t);
    }
    p.tensors.push_back(std::move(h));
  }
  for (const auto& [name, t] : ps.inputs) {
    if (!used.count(name))
      throw ArgumentError(fmt::format("kernel '{}' has no input '{}'", sig.name, name));
  }
  size_t scalars_used = 0;
  for (const ir::ScalarParam& sp : p.ir.scalars) {
    auto it = ps.scalars.find(sp.name);
    if (it != ps.scalars.end()) {
      p.scalars.push_back(it->second);
      ++scalars_used;
    } else if (sp.default_value) {
      p.scalars.push_back(*sp.default_value);
    } else {
      throw ArgumentError(
          fmt::format("scalar parameter '{}' has no default; give its value", sp.name));
    }
  }
  if (scalars_used != ps.scalars.size()) {
    for (const auto& entry : ps.scalars) {
      const std::string& name = entry.first;
      bool known = std::any_of(p.ir.scalars.begin(), p.ir.scalars.end(),
                               [&](const ir::ScalarParam& s) { return s.name == name; });
      if (!known)
        throw ArgumentError(
            fmt::format("kernel '{}' has no scalar parameter '{}'", sig.name, name));
    }
  }
  return p;
}

std::vector<HostTensor> run_reference(const Problem& p) {
  std::vector<HostTensor> out = p.tensors;
  interpret(p.ir, out, p.scalars, p.symbols);
  return out;
}

Tolerance output_tolerance(const Problem& p, size_t t, const HostTensor& expected) {
  const DType dt = p.ir.tensors[t].dtype;
  const bool summed = std::any_of(p.ir.stores.begin(), p.ir.stores.end(), [&](const ir::Store& st) {
    return st.kind == ir::StoreKind::reduce && st.tensor == static_cast<int32_t>(t);
  });
  if (summed || needs_scan_schedule(p.ir)) return scan_tolerance(dt, expected);
  const bool row_reduction = std::any_of(p.ir.nodes.begin(), p.ir.nodes.end(),
                                         [](const ir::Node& n) { return n.op == ir::Op::reduce; });
  return row_reduction ? row_tolerance(dt, expected) : tolerance_for(dt);
}

uint64_t minimal_bytes(const Problem& p) {
  uint64_t bytes = 0;
  for (size_t t = 0; t < p.tensors.size(); ++t) {
    uint64_t b = p.tensors[t].bytes.size();
    bytes += p.ir.tensors[t].role == ir::Role::inout ? 2 * b : b;
  }
  return bytes;
}

GpuRun::GpuRun(const Problem& p) : p_(p), kernel_(p.fe, p.sig) {
  kernel_.set_schedule_hint(p.schedule);
  kernel_.use_tuning_db(p.use_tuning_db);
  for (size_t t = 0; t < p.tensors.size(); ++t) {
    dev_.push_back(DeviceTensor::upload(p.tensors[t]));
    if (p.ir.tensors[t].role == ir::Role::out) dev_.back().poison();
  }
  for (const ir::Param& prm : p.ir.params) {
    if (prm.is_tensor) {
      args_.emplace_back(dev_[prm.index].ref);
    } else {
      args_.emplace_back(p.scalars[prm.index]);
    }
  }
  detail::BoundArgs bound;
  kernel_.bind(args_, bound);
  loaded_ = &kernel_.loaded(bound, detail::current_context());
}

void GpuRun::launch(CUstream_st* stream) {
  kernel_.launch(stream, args_);
}

void GpuRun::download(std::vector<HostTensor>& tensors) const {
  check(driver().cuCtxSynchronize(), "kernel execution (cuCtxSynchronize)");
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (p_.ir.tensors[t].role != ir::Role::in) dev_[t].download(tensors[t]);
  }
}

}  // namespace kdsl

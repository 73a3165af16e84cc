// Running a kernel on concrete data: seeded inputs, the GPU launch, the CPU reference. Shared by
// `kdsl run`, `kdsl bench`, the GPU tests and bench/.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler.h"
#include "gpu_bench.h"
#include "host_tensor.h"
#include "runtime_impl.h"
#include "verify.h"

namespace kdsl {

/// What to run: a kernel, its dtype binding, every shape symbol's value, scalar overrides and
/// given inputs (the other inputs are random).
struct ProblemSpec {
  std::string kernel;
  std::vector<DType> binding;
  std::map<std::string, int64_t> shapes;
  std::map<std::string, double> scalars;
  std::map<std::string, HostTensor> inputs;
  uint64_t seed = 0;
  ScheduleHint schedule;      // overrides of the scheduler (experiments, tuning)
  bool use_tuning_db = true;  // without a hint, use `kdsl tune`'s record for this GPU if any
};

/// A kernel specialization with host tensors (by IR tensor index: inputs filled, Out tensors
/// poisoned with 0xff bytes) and scalars (by IR scalar index).
struct Problem {
  std::shared_ptr<const FrontEnd> fe;
  const KernelSignature* sig = nullptr;
  Specialization spec;
  ir::Kernel ir;
  std::vector<HostTensor> tensors;
  std::vector<double> scalars;
  std::vector<int64_t> symbols;
  ScheduleHint schedule;
  bool use_tuning_db = true;
};

/// Builds the problem. Random inputs: fill_random with seed `seed * 1000003 + tensor index`.
/// Throws ArgumentError for an unknown kernel, symbol, scalar or input, a missing shape symbol,
/// a scalar without default, or a given input of the wrong dtype or shape.
Problem make_problem(std::shared_ptr<const FrontEnd> fe, const ProblemSpec& ps);

/// The reference interpreter's result: every tensor after running on a copy of the inputs.
std::vector<HostTensor> run_reference(const Problem& p);

/// The tolerance `kdsl run --verify` and `kdsl tune` compare output `t` with (`expected`: the
/// reference's): scan_tolerance (src/verify.h) where the value is a sum of many terms whose
/// partial sums set the f32 error, that is in a scan kernel and for a column reduction
/// (`dw[:] += ...`, summed over every row: RMSNorm backward f32 at 4096 x 32768 gave dw errors
/// of 3e-5 on values of 0.02 that are sums of 4096 terms of about 0.6, a relative 1e-8 of their
/// magnitude); row_tolerance for the other outputs of a kernel with row reductions (their error
/// follows the row's values: softmax backward's dy - sum(dy * y) cancels); tolerance_for(dtype)
/// otherwise (elementwise kernels).
Tolerance output_tolerance(const Problem& p, size_t t, const HostTensor& expected);

/// Bytes a kernel must move at least: each input read once, each output written once (InOut:
/// both).
uint64_t minimal_bytes(const Problem& p);

/// The problem on the GPU (current context): device copies of the tensors and the launch
/// arguments. Out tensors are poisoned (0xff) on the device, InOut tensors hold their host
/// contents.
class GpuRun {
 public:
  explicit GpuRun(const Problem& p);
  /// Launches on `stream` (asynchronous).
  void launch(CUstream_st* stream = nullptr);
  /// Copies every output back into `tensors` (synchronizes first).
  void download(std::vector<HostTensor>& tensors) const;
  const detail::LoadedSpec& loaded() const { return *loaded_; }
  const std::vector<Arg>& args() const { return args_; }
  /// The specialization a launch with these arguments selects (their alignment and layout
  /// bits), which keys the runtime's lookups; Problem::spec has the bits of these row-major
  /// tensors too (set_row_major_masks), so the two agree.
  Specialization specialization() const {
    detail::BoundArgs b;
    kernel_.bind(args_, b);
    return kernel_.specialization(b);
  }

 private:
  const Problem& p_;
  detail::KernelImpl kernel_;
  std::vector<DeviceTensor> dev_;
  std::vector<Arg> args_;
  const detail::LoadedSpec* loaded_ = nullptr;
};

}  // namespace kdsl

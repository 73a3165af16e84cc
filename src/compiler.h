// The compiler driver: runs the stages in order, from .kdsl text to a cubin.
//
//   source -> layout + parse (dsl/parser.h) -> check (dsl/sema.h) -> lower to IR for a dtype
//   binding -> specialize (vector length, alignment) -> schedule -> CUDA C++ -> NVRTC -> disk cache
//
// With KDSL_DEBUG=1 in the environment, the IR and the schedule are logged after each stage.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache.h"
#include "codegen_cuda.h"
#include "dsl/ast.h"
#include "dsl/ir.h"
#include "dsl/sema.h"
#include "schedule.h"
#include "specialization.h"

namespace kdsl {

/// A module after the front end: its syntax tree and kernel signatures. Immutable; shared by
/// every kernel handle of the module.
struct FrontEnd {
  std::shared_ptr<const SourceFile> file;
  std::unique_ptr<ast::Module> ast;
  std::vector<KernelSignature> kernels;

  const KernelSignature* find(const std::string& name) const;
};

/// Parses and checks `file` (every kernel under every dtype binding). Throws kdsl::SourceError
/// carrying every diagnostic when the module has errors.
std::shared_ptr<const FrontEnd> run_front_end(std::shared_ptr<const SourceFile> file);

/// Lowers kernel `name` for the dtype binding of `spec` and specializes it. Throws
/// kdsl::ArgumentError for an unknown kernel or a binding outside the generics' domains.
ir::Kernel lower_specialized(const FrontEnd& fe, const std::string& name,
                             const Specialization& spec);

/// Chooses the schedule and emits CUDA C++ for a specialized kernel.
GeneratedKernel generate(const ir::Kernel& k, const Specialization& spec,
                         const DeviceTarget& target, const ScheduleHint& hint = {});

/// A compiled specialization: its IR, source, launch plan and cubin.
struct CompiledKernel {
  ir::Kernel ir;
  GeneratedKernel gen;
  CompiledEntry binary;    // cubin, whether it was a disk-cache hit, and times
  double frontend_ms = 0;  // lowering + codegen
};

/// The full pipeline for one specialization, through `cache` (null: the process-wide cache).
/// Throws kdsl::CompileError when NVRTC rejects the generated code (never cached).
CompiledKernel compile_kernel(const FrontEnd& fe, const std::string& name,
                              const Specialization& spec, const DeviceTarget& target,
                              DiskCache* cache = nullptr, const ScheduleHint& hint = {});

/// The PTX NVRTC makes of `gen` for `arch`'s virtual architecture, with the options
/// compile_kernel uses (for reading: `kdsl emit --ptx`; never cached). Throws kdsl::CompileError.
std::string generate_ptx(const GeneratedKernel& gen, const std::string& arch);

/// The options kdsl passes to NVRTC (part of every cache key).
std::vector<std::string> kdsl_nvrtc_options(const std::string& arch);

}  // namespace kdsl

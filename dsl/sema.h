// Semantic analysis: resolves names, checks types and shapes, and lowers a kernel to typed IR.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ast.h"
#include "diagnostics.h"
#include "ir.h"

namespace kdsl {

/// The most parameters (tensors and scalars), shape symbols and generics a kernel may have: the
/// runtime binds a launch's arguments into fixed-size tables (src/runtime_impl.h) and keeps one
/// bit per tensor in 32-bit masks. Sema reports a kernel beyond them at its name.
inline constexpr int kMaxKernelParams = 32;
inline constexpr int kMaxKernelSymbols = 16;
inline constexpr int kMaxKernelGenerics = 8;

/// A dtype generic of a kernel (`T: (f32, f16, bf16)`) and the dtypes it may take, in the order
/// written.
struct GenericInfo {
  std::string name;
  std::vector<DType> domain;
  SourceLoc loc;
};

/// One parameter of a kernel, independent of the dtype binding.
struct SignatureParam {
  std::string name;
  bool is_tensor = true;
  ir::Role role = ir::Role::in;         // tensors
  int generic = -1;                     // index into KernelSignature::generics, or -1
  DType dtype = DType::f32;             // when generic < 0
  std::vector<ir::Extent> shape;        // tensors
  std::optional<double> default_value;  // scalars
  bool keyword_only = false;
  SourceLoc loc;
};

/// What a caller must pass to a kernel: its generics, parameters and shape symbols (with which
/// symbol is specialized, i.e. a compile-time constant). Derived from the kernel's header and
/// its views, before any dtype is bound.
struct KernelSignature {
  std::string name;
  std::string docstring;
  SourceLoc loc;
  std::vector<GenericInfo> generics;
  std::vector<SignatureParam> params;
  std::vector<ir::Symbol> symbols;
  int32_t vector_symbol = -1;
  std::vector<std::string> loop_vars;
  std::vector<int32_t> loop_extents;  // symbol index per loop variable
};

/// The signatures of every kernel in `m`, in source order. Errors in kernel headers are reported to
/// `diags`; a kernel whose header has errors is left out.
std::vector<KernelSignature> kernel_signatures(const ast::Module& m, Diagnostics& diags);

/// Type-checks kernel `name` of `m` with its generics bound to `binding` (one dtype per generic,
/// in declaration order) and lowers it to IR. Before: `m` parsed without errors. After: on
/// success the IR satisfies ir::verify(); on failure errors are in `diags` and nullopt is
/// returned. Throws kdsl::Error if `m` has no kernel `name` or the binding does not fit.
std::optional<ir::Kernel> lower_kernel(const ast::Module& m, const std::string& name,
                                       const std::vector<DType>& binding, Diagnostics& diags);

/// Checks every kernel of `m` under every binding of its generics, and every helper and constant.
/// A diagnostic reported for several bindings is reported once; one that holds only for some
/// bindings says for which (`(with T = f16)`).
void check_module(const ast::Module& m, Diagnostics& diags);

}  // namespace kdsl

// CUDA C++ spellings of IR types and elementwise operations, shared by all schedules.
#pragma once

#include <string>
#include <vector>

#include "dsl/ir.h"

namespace kdsl::cuda {

/// Register type a value of dtype `t` is computed in (f16/bf16 compute in float).
const char* reg_type(DType t);
/// Storage type of one tensor element (f16/bf16 as raw 16-bit patterns, bool as one byte).
const char* storage_type(DType t);
/// An expression converting register value `e` of dtype `from` to dtype `to` (rounding to
/// nearest even when narrowing floats; integers truncate toward zero).
std::string convert(DType from, DType to, const std::string& e);
/// An expression converting storage value `e` to the register type.
std::string from_storage(DType t, const std::string& e);
/// An expression converting register value `e` to the storage type.
std::string to_storage(DType t, const std::string& e);
/// The value to convert when storing `v` into a tensor of dtype `storage`: the operand of a cast of
/// an f32 value to that 16-bit float dtype, since the store's own conversion rounds to nearest even
/// and rounding twice to one format gives the bits of rounding once (two instructions fewer per
/// element); otherwise `v` itself.
ir::ValueId stored_value(const ir::Kernel& k, ir::ValueId v, DType storage);
/// A literal of dtype `t` (exact: hexadecimal floats).
std::string literal(DType t, double v, double im = 0);
/// The zero of dtype `t` as a register value.
std::string zero(DType t);
/// Whether the generated code computes f32 exp, exp2, sigmoid, silu, softplus's exp, expm1,
/// division and sqrt with the PTX approximations of the prelude (kdsl_exp_approx and the others;
/// errors of a few f32 ulp, and up to about 2^-17 relative for exp near |x| = 88) instead of CUDA's
/// full-precision functions: when the kernel has a floating-point generic and every one (c64
/// included) is bound to f16 or bf16, so the data's own rounding error (2^-8 or 2^-11 relative) is
/// far larger. Integer generics do not count. KDSL_MATH=accurate or =approx overrides the rule
/// for every kernel; throws kdsl::ArgumentError for another value. f64 math and the square root
/// of f16 arithmetic are never approximated.
bool approx_math(const ir::Kernel& k);

/// KDSL_MATH as a word for keys: "" when unset or "auto" (math by the data's dtypes), else
/// "accurate" or "approx". Throws kdsl::ArgumentError for another value.
std::string math_override();
/// One line saying which f32 math approx_math chose and why (the generated source's header and
/// `kdsl emit --explain`). Throws kdsl::ArgumentError as approx_math does.
std::string math_note(const ir::Kernel& k);
/// The expression computing node `n` from the spelled operands `args` (constants, casts, unary,
/// binary, compare, select). Results of f16/bf16 arithmetic are rounded to their dtype.
std::string op_expr(const ir::Kernel& k, const ir::Node& n, const std::vector<std::string>& args,
                    const std::vector<DType>& arg_dtypes);
/// The reduction's state type, identity and combine functor, and how the final value is read.
struct ReduceSpelling {
  std::string state_type;
  std::string identity;
  std::string op;      // functor instance, e.g. kdsl_op_sum{}
  std::string result;  // format with {0} = the reduced state, e.g. "{0}.m2 / {0}.n"
};
ReduceSpelling reduce_spelling(ir::ReduceKind kind, DType acc_dtype);

}  // namespace kdsl::cuda

// The typed IR of one kernel for one dtype binding: what sema produces and what the interpreter,
// the scheduler and the CUDA code generator consume.
//
// A kernel is one parallel loop over independent indices (rows, or (batch, channel) pairs). Its
// body is a DAG of SSA nodes, each a scalar (one value per loop iteration) or a vector (one value
// per position along the kernel's vector axis), in topological order, plus a list of stores, at
// most one per output view. Control flow has been if-converted into `select` nodes by sema.
//
// Invariants (checked by verify()): operands precede their users; each node's type follows the
// typing rule of its op; loads read inputs (or InOut tensors), stores write outputs; views index
// every axis of their tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kdsl/dtype.h"
#include "source.h"

namespace kdsl::ir {

using ValueId = int32_t;

/// Scalar: one value per iteration of the parallel loop. Vector: one value per position along the
/// vector axis (its length is the vector symbol's value).
enum class Form : uint8_t { scalar, vector };

struct Type {
  DType dtype = DType::f32;
  Form form = Form::scalar;
  bool operator==(const Type&) const = default;
};

enum class Op : uint8_t {
  constant,  // number (and number_im for c64); no operands
  param,     // scalar parameter `index` (into Kernel::scalars)
  shape,     // value of shape symbol `index` (i64 scalar)
  position,  // i64 vector 0, 1, ..., n-1 along the vector axis
  load,      // tensor `index` at `view` (vector when the view has a vector axis)
  arg,       // inside a Region: argument `index`
  cast,      // args[0] converted to type.dtype (round to nearest even when narrowing)
  unary,     // fn = UnaryFn; args[0]
  binary,    // fn = BinaryFn; args[0], args[1]
  compare,   // fn = CompareFn; args[0], args[1]; bool result
  select,    // args[0] (bool) ? args[1] : args[2]
  reduce,    // fn = ReduceKind; args[0] is a vector; scalar result
  scan,      // associative scan along the vector axis: region `index` combines (fn = ScanKind);
             // args = k values then k initial scalars (when has_init); results = the k scanned
             // vectors (read through extract); type = results[0] (SPEC section 10)
  extract,   // result `index` of the multi-result node args[0]
  shift,     // args[0] shifted by `index` positions (out[t] = in[t - index]); args[1] = fill scalar
};

enum class UnaryFn : uint8_t {
  neg,
  lnot,
  exp,
  exp2,
  log,
  log2,
  log1p,
  expm1,
  sqrt,
  rsqrt,
  abs,
  floor,
  ceil,
  tanh,
  sigmoid,
  erf,
  silu,
  gelu,
  gelu_tanh,
  softplus,
  isnan,
  isinf,
  isfinite,
  real,
  imag,
  conj,
};
enum class BinaryFn : uint8_t {
  add,
  sub,
  mul,
  div,
  floordiv,
  mod,
  pow,
  min,
  max,
  land,
  lor,
  complex
};
enum class CompareFn : uint8_t { lt, le, eq, ne, gt, ge };
/// sum, max and min accumulate in the node's dtype (f32 for 16-bit floats); var is the population
/// variance (Welford/Chan on the GPU); argmax/argmin give the first index of the extreme (i64).
/// first/last: the element at position 0 / N - 1, in the operand's dtype (SPEC section 10).
enum class ReduceKind : uint8_t { sum, max, min, var, argmax, argmin, first, last };
/// The combine function of a scan: a built-in with an identity element (sum 0, prod 1,
/// max -inf, min +inf, logaddexp -inf), or `custom` (a user helper, no identity known).
/// The node's region computes the combine in every case.
enum class ScanKind : uint8_t { custom, sum, prod, max, min, logaddexp };

const char* name(Op op);
const char* name(UnaryFn fn);
const char* name(BinaryFn fn);
const char* name(CompareFn fn);
const char* name(ReduceKind kind);
const char* name(ScanKind kind);

/// How one axis of a tensor is indexed in a view: by a loop variable, along the vector axis, or at
/// a constant position.
struct AxisIndex {
  enum class Kind : uint8_t { loop, vector, constant };
  Kind kind = Kind::loop;
  int64_t value = 0;  // loop variable index (Kind::loop) or position (Kind::constant)
  bool operator==(const AxisIndex&) const = default;
};
using View = std::vector<AxisIndex>;

struct Node {
  Op op = Op::constant;
  Type type;
  uint8_t fn = 0;  // UnaryFn / BinaryFn / CompareFn / ReduceKind, by op
  std::vector<ValueId> args;
  double number = 0;          // constant: value (real part)
  double number_im = 0;       // constant: imaginary part (c64)
  int32_t index = -1;         // param, shape, load (tensor), arg, scan (region), extract, shift
  View view;                  // load
  bool reverse = false;       // scan: from the last position to the first
  bool exclusive = false;     // scan: position t combines positions before t only
  bool has_init = false;      // scan: args carry initial values
  std::vector<Type> results;  // scan: the result types (one per scanned value)
  SourceLoc loc;
  uint32_t length = 0;  // bytes of source from loc that the expression spans (0: not known)
};

/// A scan's combine function, (left..., right...) -> (out...), on scalars. Its nodes use Op::arg
/// for the 2k arguments (left tuple first) and `results` lists the k outputs.
struct Region {
  int32_t num_args = 0;
  std::vector<Node> nodes;
  std::vector<ValueId> results;
};

enum class Role : uint8_t { in, out, inout };

/// A tensor axis extent: a shape symbol, or a constant size when symbol < 0.
struct Extent {
  int32_t symbol = -1;
  int64_t constant = 0;
  bool operator==(const Extent&) const = default;
};

struct TensorParam {
  std::string name;
  DType dtype = DType::f32;
  std::vector<Extent> shape;
  Role role = Role::in;
  SourceLoc loc;
};

struct ScalarParam {
  std::string name;
  DType dtype = DType::f32;
  std::optional<double> default_value;
  SourceLoc loc;
};

/// A parameter in declaration order: tensor `index` or scalar `index`.
struct Param {
  bool is_tensor = true;
  int32_t index = 0;
  bool keyword_only = false;
};

/// A shape symbol. The vector axis symbol is specialized (a compile-time constant of the generated
/// code); the others are run-time arguments. `value` is set by specialization.
struct Symbol {
  std::string name;
  bool specialized = false;
  std::optional<int64_t> value;
  SourceLoc loc;
};

struct LoopVar {
  std::string name;
  int32_t extent = -1;  // symbol index
};

enum class StoreKind : uint8_t {
  write,       // view = value (value has the tensor's dtype)
  accumulate,  // view = old + value, for InOut tensors (value in the tensor's or accumulator dtype)
  reduce,      // view (+ old for InOut) = sum of value over the loop variables the view omits
};

struct Store {
  int32_t tensor = -1;
  View view;
  ValueId value = -1;
  StoreKind kind = StoreKind::write;
  SourceLoc loc;
};

struct Kernel {
  std::string name;
  std::string docstring;
  SourceLoc loc;
  std::vector<std::pair<std::string, DType>> generics;  // the binding, in declaration order
  std::vector<Param> params;
  std::vector<TensorParam> tensors;
  std::vector<ScalarParam> scalars;
  std::vector<Symbol> symbols;
  std::vector<LoopVar> loop;
  int32_t vector_symbol = -1;  // -1 when the kernel computes no vectors
  std::vector<Node> nodes;
  std::vector<Store> stores;
  std::vector<Region> regions;

  const Node& node(ValueId id) const { return nodes.at(static_cast<size_t>(id)); }
};

/// A scalar value of dtype `t` (a default, stored as a double of the value rounded to `t`) as the
/// kernel would spell it: f32 and 16-bit values as the shortest text that rounds back to the same
/// float (1e-06, not 9.999999974752427e-07), integers in full (4611686018427387904, not
/// 4.611686018427388e+18), bools as True or False, f64 as the shortest text of the double.
std::string scalar_value_str(double v, DType t);
/// Deterministic text form (`kdsl emit --ir`), one node per line: `%3 = mul vec f32 %1, %2`.
std::string print(const Kernel& k);
/// Checks the invariants listed at the top of this file; throws kdsl::InternalError naming the
/// first broken one. Holds after sema and after every later pass.
void verify(const Kernel& k);

}  // namespace kdsl::ir

// Argument checking of launches (detail::KernelImpl::bind, pure host code: no GPU needed): every
// error with its exact message, the alignment and contiguity flags that pick a specialization,
// and the symbols and rows a correct call binds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "src/runtime_impl.h"

namespace kdsl {
namespace {

// Two generics, a constant-size axis, scalars with and without a default, three kinds of outputs.
constexpr const char* kSource = R"(
@kernel
def mix[T: (f32, f16), U: (f32, f64)](x: Tensor[T, (M, N)], w: Tensor[T, (N,)],
                                      p: Tensor[U, (M, 2)], alpha: f32, beta: f32 = 2.0,
                                      *, y: Out[T, (M, N)], s: Out[U, (M,)],
                                      acc: InOut[f32, (N,)]):
    """y = x * w * alpha + beta; s = p[:, 0] + p[:, 1]; acc += column sums of x."""
    for m in parallel(M):
        xf = f32(x[m, :])
        y[m, :] = T(xf * f32(w) * alpha + beta)
        s[m] = p[m, 0] + p[m, 1]
        acc[:] += xf
)";

// Fake device addresses: far apart, 256-byte aligned; nothing is dereferenced.
void* address(int i) {
  return reinterpret_cast<void*>(uintptr_t{0x7f0000000000} + (uintptr_t(i) << 32));
}

class LaunchArgs : public ::testing::Test {
 protected:
  static constexpr int64_t M = 48, N = 64;
  Module module_ = Module::from_source(kSource, "args.kdsl");
  Kernel kernel_ = module_.kernel("mix");
  const detail::KernelImpl& k_ = kernel_.impl();

  TensorRef x_ = TensorRef::contiguous(address(1), DType::f16, {M, N});
  TensorRef w_ = TensorRef::contiguous(address(2), DType::f16, {N});
  TensorRef p_ = TensorRef::contiguous(address(3), DType::f64, {M, 2});
  TensorRef y_ = TensorRef::contiguous(address(4), DType::f16, {M, N});
  TensorRef s_ = TensorRef::contiguous(address(5), DType::f64, {M});
  TensorRef acc_ = TensorRef::contiguous(address(6), DType::f32, {N});

  std::vector<Arg> args() const { return {x_, w_, p_, 0.5, Arg::use_default(), y_, s_, acc_}; }

  detail::BoundArgs bind(const std::vector<Arg>& a) const {
    detail::BoundArgs b;
    k_.bind(a, b);
    return b;
  }
  std::string error(const std::vector<Arg>& a) const {
    try {
      bind(a);
    } catch (const ArgumentError& e) {
      return e.what();
    }
    return "(no error)";
  }
  int32_t symbol(const std::string& name) const {
    for (size_t i = 0; i < k_.sig().symbols.size(); ++i) {
      if (k_.sig().symbols[i].name == name) return static_cast<int32_t>(i);
    }
    ADD_FAILURE() << "no symbol " << name;
    return 0;
  }
  // Bit of parameter `i` (in parameter order) in BoundArgs::aligned / contiguous.
  uint32_t bit(size_t i) const { return 1u << k_.slot_of(i); }
};

TEST_F(LaunchArgs, CorrectCallBindsDtypesSymbolsRowsScalarsAndTensors) {
  std::vector<Arg> a = args();
  detail::BoundArgs b = bind(a);
  EXPECT_EQ(b.binding[0], DType::f16);
  EXPECT_EQ(b.binding[1], DType::f64);
  EXPECT_EQ(b.symbols[symbol("M")], M);
  EXPECT_EQ(b.symbols[symbol("N")], N);
  EXPECT_EQ(b.rows, M);
  EXPECT_EQ(b.scalars[k_.slot_of(3)], 0.5);
  EXPECT_EQ(b.scalars[k_.slot_of(4)], 2.0);  // beta's default
  for (size_t i : {0, 1, 2, 5, 6, 7}) {
    EXPECT_EQ(b.tensors[k_.slot_of(i)], &a[i].tensor()) << "parameter " << i;
  }
  // Aligned: a 16-byte aligned base and every non-vector axis stepping a multiple of 16 bytes.
  // Not p (its constant axis steps 8 bytes) nor s (8-byte rows).
  EXPECT_EQ(b.aligned, bit(0) | bit(1) | bit(5) | bit(7));
  EXPECT_EQ(b.contiguous, bit(0) | bit(1) | bit(2) | bit(5) | bit(6) | bit(7));
}

TEST_F(LaunchArgs, WrongArgumentCount) {
  std::vector<Arg> a = args();
  a.pop_back();
  EXPECT_EQ(error(a),
            "mix takes 8 arguments (x, w, p, alpha, beta, y, s, acc), 7 given; pass "
            "kdsl::Arg::use_default() for a scalar with a default");
}

TEST_F(LaunchArgs, TensorWhereANumberIsExpected) {
  std::vector<Arg> a = args();
  a[3] = x_;
  EXPECT_EQ(error(a), "mix: argument 'alpha' (4th of 8): expected a number (f32), got a tensor");
}

TEST_F(LaunchArgs, NumberOrDefaultWhereATensorIsExpected) {
  std::vector<Arg> a = args();
  a[0] = 1.0;
  EXPECT_EQ(error(a),
            "mix: argument 'x' (1st of 8): expected a tensor of T in (f32, f16) with shape (M, "
            "N), got a number");
  a = args();
  a[7] = Arg::use_default();
  EXPECT_EQ(error(a),
            "mix: argument 'acc' (8th of 8): expected a tensor of f32 with shape (N,), got a "
            "default");
}

TEST_F(LaunchArgs, WrongFixedDtype) {
  acc_.dtype = DType::f16;
  EXPECT_EQ(error(args()), "mix: argument 'acc' (8th of 8): expected dtype f32, got f16");
}

TEST_F(LaunchArgs, DtypeOutsideTheGenericsDomain) {
  x_.dtype = DType::bf16;
  EXPECT_EQ(error(args()),
            "mix: argument 'x' (1st of 8): dtype bf16 is not allowed: expected T in (f32, f16)");
  x_.dtype = DType::f16;
  p_.dtype = s_.dtype = DType::f16;
  EXPECT_EQ(error(args()),
            "mix: argument 'p' (3rd of 8): dtype f16 is not allowed: expected U in (f32, f64)");
}

TEST_F(LaunchArgs, GenericBoundInconsistently) {
  w_.dtype = DType::f32;
  EXPECT_EQ(error(args()),
            "mix: argument 'w' (2nd of 8): dtype f32 does not match T = f16 (set by 'x')");
  w_.dtype = DType::f16;
  s_.dtype = DType::f32;
  EXPECT_EQ(error(args()),
            "mix: argument 's' (7th of 8): dtype f32 does not match U = f64 (set by 'p')");
}

TEST_F(LaunchArgs, WrongRank) {
  w_ = TensorRef::contiguous(address(2), DType::f16, {1, N});
  EXPECT_EQ(error(args()),
            "mix: argument 'w' (2nd of 8): expected 1 axis (N,), got 2 axes (1, 64)");
  w_ = TensorRef::contiguous(address(2), DType::f16, {N});
  x_ = TensorRef::contiguous(address(1), DType::f16, {M * N});
  EXPECT_EQ(error(args()),
            "mix: argument 'x' (1st of 8): expected 2 axes (M, N), got 1 axis (3072,)");
}

TEST_F(LaunchArgs, SizeContradictingASymbolNamesBothArguments) {
  y_ = TensorRef::contiguous(address(4), DType::f16, {M, N + 1});
  EXPECT_EQ(error(args()),
            "mix: argument 'y' (6th of 8): axis 1 has size 65, but N = 64 (set by 'x' axis 1)");
  y_ = TensorRef::contiguous(address(4), DType::f16, {M, N});
  s_ = TensorRef::contiguous(address(5), DType::f64, {M - 1});
  EXPECT_EQ(error(args()),
            "mix: argument 's' (7th of 8): axis 0 has size 47, but M = 48 (set by 'x' axis 0)");
}

TEST_F(LaunchArgs, ConstantSizeAxisMismatch) {
  p_ = TensorRef::contiguous(address(3), DType::f64, {M, 3});
  EXPECT_EQ(error(args()), "mix: argument 'p' (3rd of 8): axis 1 must have size 2, got 3");
}

TEST_F(LaunchArgs, NullPointer) {
  w_.data = nullptr;
  EXPECT_EQ(error(args()), "mix: argument 'w' (2nd of 8): is a null pointer");
}

TEST_F(LaunchArgs, NegativeSizeOrStride) {
  x_.shape[0] = -1;
  EXPECT_EQ(error(args()), "mix: argument 'x' (1st of 8): axis 0 has negative size -1");
  x_.shape[0] = M;
  x_.strides[0] = -N;
  EXPECT_EQ(error(args()), "mix: argument 'x' (1st of 8): axis 0 has negative stride -64");
}

TEST_F(LaunchArgs, OutputOverlappingAnInput) {
  // y starts at x's last element.
  y_.data = static_cast<char*>(x_.data) + (M * N - 1) * 2;
  EXPECT_EQ(error(args()),
            "mix: argument 'y' (6th of 8): overlaps argument 'x'; outputs must not alias other "
            "arguments (an InOut parameter updates a tensor in place)");
  // One past x's last element: adjacent, not overlapping.
  y_.data = static_cast<char*>(x_.data) + M * N * 2;
  EXPECT_EQ(error(args()), "(no error)");
  // An InOut output may not alias an input either.
  acc_.data = w_.data;
  EXPECT_NE(error(args()).find("argument 'acc' (8th of 8): overlaps argument 'w'"),
            std::string::npos);
}

// An empty tensor addresses no memory, so it overlaps nothing, even where its pointer lies inside
// an output (a zero-row slice of a framework tensor keeps an interior pointer; found by a
// new-user test: "overlaps argument 'x'").
TEST_F(LaunchArgs, EmptyTensorsOverlapNothing) {
  x_ = TensorRef::contiguous(static_cast<char*>(acc_.data) + 4, DType::f16, {0, N});
  p_ = TensorRef::contiguous(static_cast<char*>(acc_.data) + 8, DType::f64, {0, 2});
  y_ = TensorRef::contiguous(static_cast<char*>(acc_.data) + 16, DType::f16, {0, N});
  s_ = TensorRef::contiguous(static_cast<char*>(acc_.data) + 32, DType::f64, {0});
  EXPECT_EQ(error(args()), "(no error)");
}

// A default-constructed handle is empty: every method throws kdsl::Error saying where a real one
// comes from (found by a new-user test: each segfaulted).
TEST(EmptyHandles, ThrowInsteadOfCrashing) {
  Kernel k;
  Module m;
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string kernel_msg =
      "this kdsl::Kernel is empty (default-constructed); get one from Module::kernel()";
  EXPECT_EQ(message([&] { k.params(); }), kernel_msg);
  EXPECT_EQ(message([&] { k.name(); }), kernel_msg);
  EXPECT_EQ(message([&] { k.docstring(); }), kernel_msg);
  EXPECT_EQ(message([&] { k.launch(nullptr, {}); }), kernel_msg);
  EXPECT_EQ(message([&] { k.prepare({}); }), kernel_msg);
  const std::string module_msg =
      "this kdsl::Module is empty (default-constructed); get one from Module::load() or "
      "Module::from_source()";
  EXPECT_EQ(message([&] { m.kernel_names(); }), module_msg);
  EXPECT_EQ(message([&] { m.kernel("x"); }), module_msg);
  EXPECT_EQ(message([&] { m.path(); }), module_msg);
}

// Scalars: a value the dtype cannot hold is an error naming the argument (as `kdsl run --arg`
// says), and f16 and bf16 values are rounded to their dtype on the host, as the CPU reference
// rounds them (the kernel receives an f32; found by a new-user test: 0.1 reached an f16 kernel as
// 0.1f, and 2.7 an i32 one as 2).
TEST(LaunchScalars, ValuesOutsideTheDtypeAreErrorsAndSixteenBitValuesAreRounded) {
  Module m = Module::from_source(R"(
@kernel
def sc[T: (f32, f16, bf16)](x: Tensor[T, (M, N)], k: i32, h: T, *, y: Out[T, (M, N)],
                            z: Out[i32, (M,)]):
    for m in parallel(M):
        y[m, :] = x[m, :] * h
        z[m] = k
)",
                                 "sc.kdsl");
  Kernel kernel = m.kernel("sc");
  const detail::KernelImpl& k = kernel.impl();
  auto bind = [&](DType t, double kv, double hv) {
    const TensorRef x = TensorRef::contiguous(address(1), t, {4, 8});
    const TensorRef y = TensorRef::contiguous(address(2), t, {4, 8});
    const TensorRef z = TensorRef::contiguous(address(3), DType::i32, {4});
    detail::BoundArgs b;
    k.bind(std::vector<Arg>{x, kv, hv, y, z}, b);
    return b;
  };
  auto error = [&](DType t, double kv, double hv) -> std::string {
    try {
      bind(t, kv, hv);
    } catch (const ArgumentError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(bind(DType::f16, 3, 0.1).scalars[k.slot_of(2)], 0.0999755859375);
  EXPECT_EQ(bind(DType::bf16, 3, 0.1).scalars[k.slot_of(2)], 0.10009765625);
  EXPECT_EQ(bind(DType::f32, 3, 0.1).scalars[k.slot_of(2)], 0.1);
  EXPECT_EQ(bind(DType::f32, -7, 0.1).scalars[k.slot_of(1)], -7);
  EXPECT_EQ(error(DType::f32, 2.7, 1),
            "sc: argument 'k' (2nd of 5): 2.7 does not fit i32, which holds whole numbers only");
  EXPECT_EQ(error(DType::f32, 3e9, 1),
            "sc: argument 'k' (2nd of 5): 3000000000 does not fit i32, which holds -2147483648 to "
            "2147483647");
  EXPECT_NE(error(DType::f16, 1, 1e6)
                .find("argument 'h' (3rd of 5): 1000000 does not fit f16, "
                      "whose largest finite value is 65504"),
            std::string::npos)
      << error(DType::f16, 1, 1e6);
  EXPECT_EQ(error(DType::f16, 1, INFINITY), "(no error)");
  // A NaN for an integer: named NaN whatever its sign bit (fmt printed -nan; a new-user test).
  EXPECT_NE(
      error(DType::f32, -std::nan(""), 1).find("argument 'k' (2nd of 5): NaN does not fit i32"),
      std::string::npos)
      << error(DType::f32, -std::nan(""), 1);
}

TEST_F(LaunchArgs, MissingDefault) {
  std::vector<Arg> a = args();
  a[3] = Arg::use_default();
  EXPECT_EQ(error(a), "mix: argument 'alpha' (4th of 8): has no default value; pass a number");
}

TEST_F(LaunchArgs, VectorAxisOfSizeZero) {
  x_ = TensorRef::contiguous(address(1), DType::f16, {M, 0});
  w_ = TensorRef::contiguous(address(2), DType::f16, {0});
  y_ = TensorRef::contiguous(address(4), DType::f16, {M, 0});
  acc_ = TensorRef::contiguous(address(6), DType::f32, {0});
  EXPECT_EQ(error(args()), "mix: the vector axis N has size 0; it must be at least 1");
}

TEST_F(LaunchArgs, EmptyParallelLoopBindsWithNullPointersForEmptyTensors) {
  x_ = TensorRef::contiguous(nullptr, DType::f16, {0, N});
  p_ = TensorRef::contiguous(nullptr, DType::f64, {0, 2});
  y_ = TensorRef::contiguous(nullptr, DType::f16, {0, N});
  s_ = TensorRef::contiguous(nullptr, DType::f64, {0});
  detail::BoundArgs b = bind(args());
  EXPECT_EQ(b.rows, 0);
  EXPECT_EQ(b.symbols[symbol("M")], 0);
  EXPECT_EQ(b.symbols[symbol("N")], N);
  // acc still needs its memory: the column sum over no rows is written to it.
  acc_.data = nullptr;
  EXPECT_EQ(error(args()), "mix: argument 'acc' (8th of 8): is a null pointer");
}

TEST_F(LaunchArgs, MisalignedPointerIsNotAligned) {
  x_.data = static_cast<char*>(x_.data) + 2;  // f16-aligned, not 16-byte aligned
  y_.data = static_cast<char*>(y_.data) + 8;
  detail::BoundArgs b = bind(args());
  EXPECT_EQ(b.aligned, bit(1) | bit(7));
  EXPECT_EQ(b.contiguous, bit(0) | bit(1) | bit(2) | bit(5) | bit(6) | bit(7));
}

TEST_F(LaunchArgs, RowStrideNotAMultipleOf16BytesIsNotAligned) {
  int64_t shape[] = {M, N}, strides[] = {N + 4, 1};  // f16 rows of 136 bytes
  x_ = TensorRef::strided(address(1), DType::f16, shape, strides);
  EXPECT_EQ(bind(args()).aligned, bit(1) | bit(5) | bit(7));
  strides[0] = N + 8;  // 144 bytes: aligned again
  x_ = TensorRef::strided(address(1), DType::f16, shape, strides);
  EXPECT_EQ(bind(args()).aligned, bit(0) | bit(1) | bit(5) | bit(7));
}

TEST_F(LaunchArgs, StridedVectorAxisIsNotContiguous) {
  int64_t shape[] = {M, N}, strides[] = {2 * N, 2};  // every other column
  x_ = TensorRef::strided(address(1), DType::f16, shape, strides);
  detail::BoundArgs b = bind(args());
  EXPECT_EQ(b.contiguous, bit(1) | bit(2) | bit(5) | bit(6) | bit(7));
  // Any stride is contiguous along a vector axis of length 1.
  TensorRef one = TensorRef::contiguous(address(1), DType::f16, {M, 1});
  one.strides[1] = 7;
  std::vector<Arg> a = {one, TensorRef::contiguous(address(2), DType::f16, {1}),
                        p_,  0.5,
                        3.0, TensorRef::contiguous(address(4), DType::f16, {M, 1}),
                        s_,  TensorRef::contiguous(address(6), DType::f32, {1})};
  EXPECT_EQ(bind(a).contiguous & bit(0), bit(0));
}

// The masks the command line assumes (set_row_major_masks: row-major tensors at aligned
// addresses, for kdsl emit, compile and run) are those a launch of such tensors binds: a vector
// axis that is not a tensor's last is contiguous only where the axes after it have size 1, and
// sizes not known count as more than 1.
TEST(RowMajorMasks, AreThoseALaunchOfRowMajorTensorsBinds) {
  Module m = Module::from_source(R"(
@kernel
def mid(x: Tensor[f16, (B, L, D)], w: Tensor[f16, (L,)], *, y: Out[f16, (B, L, D)],
        s: Out[f32, (B, D)]):
    for b, d in parallel(B, D):
        y[b, :, d] = x[b, :, d] * w
        s[b, d] = sum(f32(x[b, :, d]))
)",
                                 "mid.kdsl");
  Kernel kernel = m.kernel("mid");
  const detail::KernelImpl& k = kernel.impl();
  const KernelSignature& sig = k.sig();
  for (const auto& [B, L, D] : {std::tuple<int64_t, int64_t, int64_t>{3, 64, 5},
                                {3, 64, 1},
                                {2, 64, 8},
                                {1, 1, 7},
                                {4, 7, 1}}) {
    SCOPED_TRACE(::testing::Message() << "B, L, D = " << B << ", " << L << ", " << D);
    std::vector<Arg> args = {TensorRef::contiguous(address(1), DType::f16, {B, L, D}),
                             TensorRef::contiguous(address(2), DType::f16, {L}),
                             TensorRef::contiguous(address(3), DType::f16, {B, L, D}),
                             TensorRef::contiguous(address(4), DType::f32, {B, D})};
    detail::BoundArgs b;
    k.bind(args, b);
    Specialization spec;
    spec.vector_extent = L;
    set_row_major_masks(spec, sig, {B, L, D});
    EXPECT_EQ(spec.aligned_mask, b.aligned);
    EXPECT_EQ(spec.contiguous_mask, b.contiguous);
  }
  // Sizes not known (B and D, as for kdsl emit --shape L=64): of the vector tensors only w, whose
  // vector axis is its last, is contiguous; x and y step D elements along L.
  Specialization spec;
  spec.vector_extent = 64;
  set_row_major_masks(spec, sig, {});
  EXPECT_EQ(spec.contiguous_mask, 0b1010u);  // w, and s (no vector axis)
  EXPECT_EQ(spec.aligned_mask, 0b0010u);     // D's elements (and s's) step 2 or 4 bytes
}

// Sema's limits (dsl/sema.h) are the runtime's: a kernel of 32 tensors loads and binds, the last
// in bit 31 of the masks.
TEST(RuntimeLimits, AKernelOfThirtyTwoTensorsLoadsAndBinds) {
  std::string params;
  for (int i = 0; i < kMaxKernelParams - 1; ++i) {
    params += "x" + std::to_string(i) + ": Tensor[f32, (M, N)], ";
  }
  Module m = Module::from_source("@kernel\ndef k(" + params +
                                     "*, y: Out[f32, (M, N)]):\n    for r in parallel(M):\n"
                                     "        y[r, :] = x0[r, :] + x30[r, :]\n",
                                 "many.kdsl");
  Kernel kernel = m.kernel("k");
  std::vector<Arg> args;
  for (int i = 0; i < kMaxKernelParams; ++i) {
    args.push_back(TensorRef::contiguous(address(i + 1), DType::f32, {4, 64}));
  }
  detail::BoundArgs b;
  kernel.impl().bind(args, b);
  EXPECT_EQ(b.contiguous, ~0u);
  EXPECT_EQ(b.aligned, ~0u);
  // An index past the masks' 32 bits is a kdsl bug, never a shift past the width.
  EXPECT_EQ(tensor_bit(31), 0x80000000u);
  EXPECT_THROW(tensor_bit(32), InternalError);
  EXPECT_THROW(Specialization{}.fast(32), InternalError);
}

TEST_F(LaunchArgs, ErrorsAreArgumentErrorsThroughThePublicLaunch) {
  // Kernel::launch checks before it needs a driver, so this throws the same error without a GPU.
  std::vector<Arg> a = args();
  a[3] = x_;
  EXPECT_THROW(kernel_.launch(nullptr, a), ArgumentError);
  EXPECT_THROW(kernel_.prepare(a), ArgumentError);
}

// Kernel::prepare takes a braced list of arguments as launch does (found by a new-user test:
// `k.prepare({x, w, 1e-6, y, rstd})`, the warm-up the docs ask for before graph capture, did not
// compile, as std::span has no constructor from a braced list). Its checks are launch's.
TEST_F(LaunchArgs, PrepareTakesABracedListAsLaunchDoes) {
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const ArgumentError& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string want =
      "mix: argument 'alpha' (4th of 8): expected a number (f32), got a tensor";
  EXPECT_EQ(message([&] {
              kernel_.prepare({x_, w_, p_, x_, Arg::use_default(), y_, s_, acc_});
            }),
            want);
  EXPECT_EQ(message([&] { kernel_.launch(nullptr, {x_, w_, p_, x_, 2.0, y_, s_, acc_}); }), want);
}

// Any arithmetic type is a number argument (found by a new-user test: a size_t, unsigned or long
// long, the natural types of a count, made `{x, n}` ambiguous between Arg's int, int64_t, double,
// float and bool constructors), and a pointer is not one (it used to become the number 1 through
// the bool constructor, so a device pointer passed for a scalar launched silently).
TEST(LaunchScalars, EveryArithmeticTypeIsANumberAndAPointerIsNot) {
  static_assert(std::is_convertible_v<size_t, Arg> && std::is_convertible_v<unsigned, Arg> &&
                std::is_convertible_v<long long, Arg> && std::is_convertible_v<uint16_t, Arg> &&
                std::is_convertible_v<unsigned long long, Arg>);
  static_assert(!std::is_convertible_v<float*, Arg> && !std::is_convertible_v<void*, Arg> &&
                !std::is_convertible_v<const char*, Arg>);
  Module m = Module::from_source(R"(
@kernel
def count(x: Tensor[f32, (M, N)], n: i64, k: i32, *, y: Out[f32, (M, N)]):
    for m in parallel(M):
        y[m, :] = x[m, :] * f32(n) + f32(k)
)",
                                 "count.kdsl");
  Kernel kernel = m.kernel("count");
  const detail::KernelImpl& k = kernel.impl();
  const TensorRef x = TensorRef::contiguous(address(1), DType::f32, {4, 8});
  const TensorRef y = TensorRef::contiguous(address(2), DType::f32, {4, 8});
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 100; ++round) {
    const size_t n = rng() >> 11;                       // below 2^53: exact as a double
    const auto u = static_cast<uint32_t>(rng() >> 33);  // below 2^31: fits k's i32
    const auto ll = -static_cast<long long>(rng() >> 12);
    detail::BoundArgs b;
    k.bind(std::vector<Arg>{x, n, u, y}, b);
    EXPECT_EQ(b.scalars[k.slot_of(1)], static_cast<double>(n)) << n;
    EXPECT_EQ(b.scalars[k.slot_of(2)], static_cast<double>(u)) << u;
    k.bind(std::vector<Arg>{x, ll, uint16_t{7}, y}, b);
    EXPECT_EQ(b.scalars[k.slot_of(1)], static_cast<double>(ll)) << ll;
    EXPECT_EQ(b.scalars[k.slot_of(2)], 7);
  }
}

// TensorRef::strided takes braced sizes and strides as contiguous does (found by a new-user test:
// `TensorRef::strided(p, dtype, {M, N}, {ld, 1})` did not compile).
TEST(BracedTensorRef, StridedTakesBracedSizesAndStrides) {
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 100; ++round) {
    const auto m = static_cast<int64_t>(rng() % 1000), n = static_cast<int64_t>(rng() % 1000);
    const int64_t ld = n + static_cast<int64_t>(rng() % 64);
    const TensorRef t = TensorRef::strided(address(1), DType::bf16, {m, n}, {ld, 1});
    const int64_t shape[] = {m, n}, strides[] = {ld, 1};
    const TensorRef want = TensorRef::strided(address(1), DType::bf16, shape, strides);
    EXPECT_EQ(t.data, want.data);
    EXPECT_EQ(t.dtype, DType::bf16);
    ASSERT_EQ(t.rank, 2);
    for (int a = 0; a < 2; ++a) {
      EXPECT_EQ(t.shape[a], want.shape[a]);
      EXPECT_EQ(t.strides[a], want.strides[a]);
    }
  }
  EXPECT_THROW(TensorRef::strided(address(1), DType::f32, {4, 8}, {8}), ArgumentError);
  EXPECT_THROW(TensorRef::strided(address(1), DType::f32, {4, 8}, {-8, 1}), ArgumentError);
}

}  // namespace
}  // namespace kdsl

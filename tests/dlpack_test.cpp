// DLPack tensors as TensorRefs (include/kdsl/dlpack.h): dtype mapping, devices, byte offsets,
// strides, and every rejection with its message. No GPU needed.
#include "kdsl/dlpack.h"

#include <gtest/gtest.h>

#include <vector>

#include "src/runtime_impl.h"

namespace kdsl {
namespace {

// A DLTensor over fake device memory with the given shape (and strides, when not empty).
struct FakeTensor {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLTensor t{};

  FakeTensor(std::vector<int64_t> sh, std::vector<int64_t> st = {},
             DLDataType dt = {kDLFloat, 32, 1})
      : shape(std::move(sh)), strides(std::move(st)) {
    t.data = reinterpret_cast<void*>(uintptr_t{0x7f0000000000});
    t.device = {kDLCUDA, 0};
    t.ndim = static_cast<int>(shape.size());
    t.dtype = dt;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
  }
};

std::string rejection(const DLTensor& t) {
  try {
    from_dlpack(t);
  } catch (const ArgumentError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(DLPack, ContiguousTensorGetsRowMajorStridesAndTheByteOffset) {
  FakeTensor f({3, 5, 7});
  f.t.byte_offset = 4 * 35;
  TensorRef r = from_dlpack(f.t);
  EXPECT_EQ(r.data, reinterpret_cast<void*>(uintptr_t{0x7f0000000000} + 140));
  EXPECT_EQ(r.dtype, DType::f32);
  ASSERT_EQ(r.rank, 3);
  EXPECT_EQ(r.shape[0], 3);
  EXPECT_EQ(r.shape[1], 5);
  EXPECT_EQ(r.shape[2], 7);
  EXPECT_EQ(r.strides[0], 35);
  EXPECT_EQ(r.strides[1], 7);
  EXPECT_EQ(r.strides[2], 1);
  EXPECT_EQ(r.numel(), 105);
}

TEST(DLPack, ContiguousStridesTreatSizeZeroAndOneAxesLikeTensorRef) {
  FakeTensor f({4, 0, 6});
  TensorRef r = from_dlpack(f.t);
  int64_t shape[] = {4, 0, 6};
  TensorRef c = TensorRef::contiguous(r.data, DType::f32, shape);
  for (int a = 0; a < 3; ++a) EXPECT_EQ(r.strides[a], c.strides[a]) << "axis " << a;
}

TEST(DLPack, ExplicitStridesAreCopied) {
  FakeTensor f({4, 6}, {16, 2});  // a padded, every-other-element view
  TensorRef r = from_dlpack(f.t);
  EXPECT_EQ(r.strides[0], 16);
  EXPECT_EQ(r.strides[1], 2);
}

TEST(DLPack, EveryKdslDtypeMaps) {
  struct Case {
    DLDataType dl;
    DType want;
  };
  const Case cases[] = {
      {{kDLFloat, 16, 1}, DType::f16}, {{kDLFloat, 32, 1}, DType::f32},
      {{kDLFloat, 64, 1}, DType::f64}, {{kDLBfloat, 16, 1}, DType::bf16},
      {{kDLInt, 32, 1}, DType::i32},   {{kDLInt, 64, 1}, DType::i64},
      {{6, 8, 1}, DType::b8},          {{kDLComplex, 64, 1}, DType::c64},
  };
  for (const Case& c : cases) {
    FakeTensor f({2}, {}, c.dl);
    EXPECT_EQ(from_dlpack(f.t).dtype, c.want) << dtype_name(c.want);
  }
}

TEST(DLPack, ManagedMemoryAndTheManagedTensorAreAccepted) {
  FakeTensor f({2, 3}, {}, {kDLBfloat, 16, 1});
  f.t.device = {kDLCUDAManaged, 0};
  DLManagedTensor m{};
  m.dl_tensor = f.t;
  TensorRef r = from_dlpack(m);
  EXPECT_EQ(r.dtype, DType::bf16);
  EXPECT_EQ(r.shape[1], 3);
  EXPECT_EQ(r.strides[0], 3);
}

TEST(DLPack, ScalarTensorHasRankZero) {
  FakeTensor f({});
  TensorRef r = from_dlpack(f.t);
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.numel(), 1);
}

TEST(DLPack, HostMemoryIsRejected) {
  FakeTensor f({2});
  f.t.device = {kDLCPU, 0};
  EXPECT_EQ(rejection(f.t),
            "DLPack tensor: device is kDLCPU (host memory); kdsl needs CUDA device memory "
            "(kDLCUDA or kDLCUDAManaged)");
  f.t.device = {kDLCUDAHost, 0};
  EXPECT_NE(rejection(f.t).find("device is kDLCUDAHost (pinned host memory)"), std::string::npos);
  f.t.device = {kDLROCM, 0};
  EXPECT_NE(rejection(f.t).find("device is kDLROCM;"), std::string::npos);
}

TEST(DLPack, UnsupportedDtypesAreRejectedByName) {
  const std::string tail =
      " is not supported; kdsl takes float16, float32, float64, bfloat16, int32, int64, bool and "
      "complex64, with lanes 1";
  struct Case {
    DLDataType dl;
    const char* name;
  };
  const Case cases[] = {
      {{kDLUInt, 8, 1}, "uint8"},
      {{kDLInt, 16, 1}, "int16"},
      {{kDLFloat, 8, 1}, "float8"},
      {{kDLFloat, 32, 4}, "float32x4"},
      {{kDLComplex, 128, 1}, "complex128"},
      {{kDLBfloat, 32, 1}, "bfloat32"},
      {{6, 1, 1}, "bool1"},
      {{42, 16, 1}, "code 42, 16 bits"},
  };
  for (const Case& c : cases) {
    FakeTensor f({2}, {}, c.dl);
    EXPECT_EQ(rejection(f.t), std::string("DLPack tensor: dtype ") + c.name + tail);
  }
}

TEST(DLPack, RankAboveEightIsRejected) {
  FakeTensor f({1, 1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_EQ(rejection(f.t), "DLPack tensor: ndim is 9; kdsl takes 0 to 8 axes");
  f.t.ndim = -1;
  EXPECT_EQ(rejection(f.t), "DLPack tensor: ndim is -1; kdsl takes 0 to 8 axes");
}

TEST(DLPack, NullShapeIsRejected) {
  FakeTensor f({2, 2});
  f.t.shape = nullptr;
  EXPECT_EQ(rejection(f.t), "DLPack tensor: ndim is 2 but shape is null");
}

TEST(DLPack, NegativeSizesAndStridesAreRejected) {
  FakeTensor size({2, -3});
  EXPECT_EQ(rejection(size.t), "DLPack tensor: axis 1 has negative size -3");
  FakeTensor stride({2, 3}, {-3, 1});  // a flipped view
  EXPECT_EQ(rejection(stride.t),
            "DLPack tensor: axis 0 has negative stride -3; kdsl takes non-negative strides (copy "
            "or flip the tensor first)");
}

// Row-major strides of more than 2^63 elements are refused as TensorRef::contiguous refuses them
// (found by a new-user test: the stride product overflowed, undefined behaviour that in practice
// wrapped to a stride of 0 and accepted the tensor).
TEST(DLPack, RowMajorStridesBeyondTwoToTheSixtyThreeAreRejected) {
  FakeTensor f({int64_t{1} << 32, int64_t{1} << 32, int64_t{1} << 32});
  EXPECT_EQ(rejection(f.t),
            "DLPack tensor: shape 4294967296x4294967296x4294967296 has more than 2^63 elements");
  const int64_t shape[] = {int64_t{1} << 32, int64_t{1} << 32, int64_t{1} << 32};
  EXPECT_THROW(TensorRef::contiguous(nullptr, DType::f32, shape), ArgumentError);
  FakeTensor last({int64_t{1} << 62, 2});  // the element count alone overflows
  EXPECT_EQ(rejection(last.t),
            "DLPack tensor: shape 4611686018427387904x2 has more than 2^63 elements");
  FakeTensor fits({int64_t{1} << 31, int64_t{1} << 31});  // 2^62 elements: a view kdsl can describe
  TensorRef r = from_dlpack(fits.t);
  EXPECT_EQ(r.strides[0], int64_t{1} << 31);
  EXPECT_EQ(r.strides[1], 1);
  FakeTensor strided({int64_t{1} << 32, int64_t{1} << 32, int64_t{1} << 32}, {0, 0, 1});
  EXPECT_EQ(from_dlpack(strided.t).strides[0], 0);  // explicit strides are taken as given
}

TEST(DLPack, NullDataStaysNullSoTheLaunchReportsIt) {
  FakeTensor f({2});
  f.t.data = nullptr;
  f.t.byte_offset = 64;
  EXPECT_EQ(from_dlpack(f.t).data, nullptr);
}

// A padded bf16 activation (row stride 4104 elements, 16-byte aligned) and a weight from DLPack
// bind to rms_norm like native TensorRefs.
TEST(DLPack, TensorsBindToAKernel) {
  Module m = Module::load(std::string(KDSL_TEST_DIR) + "/../stdlib/rms_norm.kdsl");
  const detail::KernelImpl& k = m.kernel("rms_norm").impl();
  const DLDataType bf16{kDLBfloat, 16, 1};
  FakeTensor x({64, 4096}, {4104, 1}, bf16), w({4096}, {}, bf16), y({64, 4096}, {}, bf16),
      rstd({64});
  y.t.data = reinterpret_cast<void*>(uintptr_t{0x7f1000000000});
  w.t.data = reinterpret_cast<void*>(uintptr_t{0x7f2000000000});
  rstd.t.data = reinterpret_cast<void*>(uintptr_t{0x7f3000000000});
  Arg args[] = {from_dlpack(x.t), from_dlpack(w.t), 1e-6, from_dlpack(y.t), from_dlpack(rstd.t)};
  detail::BoundArgs b;
  k.bind(args, b);
  EXPECT_EQ(b.binding[0], DType::bf16);
  EXPECT_EQ(b.rows, 64);
  EXPECT_EQ(b.tensors[0]->strides[0], 4104);
  EXPECT_EQ(b.aligned, 0b0111u);  // rstd's row stride is 4 bytes: no 16-byte accesses along M
  EXPECT_EQ(b.contiguous, 0b1111u);
}

}  // namespace
}  // namespace kdsl

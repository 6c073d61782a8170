// Error paths: every check a user can trip through the public API is tripped once here, and its
// message is checked for the op's name and the offending values; plus what CUDA tensors do on a
// machine without a usable GPU (a sinter::Error, never a crash).
//
// A test under a "Regression:" comment guards a check that was once missing or wrong; the comment
// says what used to happen.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <source_location>
#include <string>
#include <vector>

#include "test_util.h"

namespace sinter {
namespace {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

// What a CUDA allocation, copy or runtime call says when no device can be used.
#ifdef SINTER_WITH_CUDA
constexpr const char* kNoCuda = "no CUDA device is available";
#else
constexpr const char* kNoCuda = "built without CUDA";
#endif

using ::sinter::testing::expect_error;

// The child's side of expect_error_isolated: exits 0 when f() throws sinter::Error holding every
// fragment, 1 (after saying why on stderr) otherwise.
template <class F>
[[noreturn]] void exit_with_error_check(F& f, const std::vector<std::string>& fragments) {
  int code = 0;
  try {
    f();
    std::fprintf(stderr, "expected sinter::Error, but nothing was thrown\n");
    code = 1;
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& frag : fragments) {
      if (msg.find(frag) == std::string::npos) {
        std::fprintf(stderr, "\"%s\" is not in: %s\n", frag.c_str(), msg.c_str());
        code = 1;
      }
    }
  } catch (...) {
    std::fprintf(stderr, "expected sinter::Error, got another exception\n");
    code = 1;
  }
  std::fflush(stderr);
  std::_Exit(code);
}

// expect_error in a child process (a death test), for inputs that crashed the process when this
// file was written: a crash then fails one test instead of ending the run.
template <class F>
void expect_error_isolated(F f, std::initializer_list<std::string> fragments) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::vector<std::string> frags(fragments);
  EXPECT_EXIT(exit_with_error_check(f, frags), ::testing::ExitedWithCode(0), "");
}

// A tensor that claims to live on cuda:0 but wraps host memory. Device checks run before any data
// is touched, so mixed-device errors can be tripped on any machine; never compute with it.
Tensor fake_cuda(const Shape& shape, DType dtype = DType::f32) {
  static double buf[64];
  return from_blob(buf, shape, {.dtype = dtype, .device = Device::cuda(0)});
}

Tensor bools(const Shape& shape) { return full(shape, 1.0, {.dtype = DType::b8}); }

const TensorOptions kI64{.dtype = DType::i64};

// --- elementwise ops (src/ops/elementwise.cpp, src/ops/iter.cpp) ---

TEST(Errors, ElementwiseUndefinedArgument) {
  expect_error([] { add(Tensor(), zeros({1})); }, {"add", "undefined tensor"});
  expect_error([] { mul(zeros({1}), Tensor()); }, {"mul", "undefined tensor"});
  expect_error([] { exp(Tensor()); }, {"exp", "undefined tensor"});
  expect_error([] { pow(2.0, Tensor()); }, {"pow", "undefined tensor"});
  expect_error([] { eq(Tensor(), 1.0); }, {"eq", "undefined tensor"});
  expect_error([] { where(Tensor(), zeros({1}), zeros({1})); }, {"where", "undefined tensor"});
  expect_error([] { where(bools({1}), Tensor(), 0.0); }, {"where", "undefined tensor"});
}

TEST(Errors, BinaryDevicesDiffer) {
  expect_error([] { add(zeros({2}), fake_cuda({2})); },
               {"add", "different devices", "cpu", "cuda:0"});
}

TEST(Errors, OpsWithoutPromotionNeedOneDtype) {
  expect_error(
      [] {
        matmul(zeros({2, 2}), zeros({2, 2}, {.dtype = DType::f64}));
      },
      {"matmul", "f32", "f64"});
}

TEST(Errors, BinaryShapesDoNotBroadcast) {
  expect_error(
      [] {
        add(zeros({2, 3}), zeros({4}));
      },
      {"add", "[2, 3]", "[4]", "cannot be broadcast", "3 vs 4"});
  expect_error([] { maximum(zeros({5}), zeros({2, 3})); }, {"maximum", "[5]", "[2, 3]"});
}

TEST(Errors, UnaryNeedsFloatingTensor) {
  expect_error([] { exp(zeros({2}, kI64)); }, {"exp", "floating", "i64"});
  expect_error([] { sigmoid(zeros({2}, {.dtype = DType::u8})); }, {"sigmoid", "floating", "u8"});
  expect_error([] { neg(bools({2})); }, {"neg", "bool"});
}

TEST(Errors, ClampBounds) {
  expect_error([] { clamp(zeros({2})); }, {"clamp", "at least one of min and max"});
  expect_error([] { clamp(zeros({2}), 2.0, 1.0); }, {"clamp", "min 2", "max 1"});
  expect_error([] { clamp(zeros({2}, kI64), 3, 1); }, {"clamp", "min 3", "max 1"});
}

TEST(Errors, WhereConditionNotBool) {
  expect_error([] { where(zeros({2}), zeros({2}), zeros({2})); }, {"where", "bool", "f32"});
}

TEST(Errors, WhereConditionOnOtherDevice) {
  expect_error([] { where(fake_cuda({2}, DType::b8), zeros({2}), zeros({2})); },
               {"where", "cuda:0", "cpu"});
}

TEST(Errors, WhereValuesDoNotBroadcast) {
  expect_error(
      [] {
        where(bools({3}), zeros({2, 1}), zeros({4}));
      },
      {"where", "[3]", "[2, 4]", "cannot be broadcast"});
}

TEST(Errors, GeluUnknownApproximation) {
  expect_error([] { gelu(zeros({2}), Activation::Relu); },
               {"gelu", "Activation::GeluTanh", "got Activation 1"});
}

TEST(Errors, SumToIncompatibleShape) {
  expect_error([] { sum_to(zeros({3}), {2, 3}); }, {"sum_to", "[3]", "[2, 3]"});
  expect_error([] { sum_to(zeros({2, 3}), {4}); }, {"sum_to", "[2, 3]", "[4]"});
}

// The iteration space holds at most 8 dims after merging; a reversed 9-dim tensor keeps all 9.
TEST(Errors, TooManyDimsAfterMerging) {
  const Tensor x = zeros(Shape(9, 2)).permute({8, 7, 6, 5, 4, 3, 2, 1, 0});
  expect_error([&] { x.contiguous(); }, {"copy_", "9 dims", "at most 8"});
  expect_error([&] { add(x, x); }, {"add", "9 dims", "at most 8"});
}

// Regression: Tensor::mul_/add_ with a scalar (src/tensor/tensor.cpp, inplace_binary) skip the
// integer check that mul/add make; ones(i64).mul_(0.5) silently gives [0, 0, 0] and add_(0.5)
// leaves the tensor unchanged.
TEST(Errors, InplaceFractionalScalarOnIntegerTensor) {
  expect_error([] { zeros({3}, kI64).mul_(0.5); }, {"mul_", "0.5", "i64"});
  expect_error([] { zeros({3}, kI64).add_(0.5); }, {"add_", "0.5", "i64"});
}

// Regression: where(cond, a, double) (src/ops/elementwise.cpp) builds the scalar with full() in a's
// dtype, so a fractional scalar with an integer tensor is truncated (0.5 becomes 0) without a word.
// --- reductions (src/ops/reduce.cpp) ---

TEST(Errors, ReduceUndefinedArgument) {
  expect_error([] { sum(Tensor()); }, {"sum", "undefined tensor"});
  expect_error([] { max(Tensor(), 0); }, {"max", "undefined tensor"});
  expect_error([] { logsumexp(Tensor(), {0}); }, {"logsumexp", "undefined tensor"});
}

TEST(Errors, ReduceDimOutOfRange) {
  expect_error([] { sum(zeros({2, 3}), {2}); }, {"sum", "dim 2", "2 dims"});
  expect_error([] { amin(zeros({2, 3}), {-3}); }, {"amin", "dim -3", "2 dims"});
  expect_error([] { max(zeros({2, 3}), 2); }, {"max", "dim 2", "2 dims"});
  expect_error([] { argmax(zeros({2, 3}), -3); }, {"argmax", "dim -3", "2 dims"});
}

TEST(Errors, ReduceDimRepeated) {
  expect_error([] { sum(zeros({2, 3}), {1, -1}); }, {"sum", "dim -1", "more than once", "[1, -1]"});
}

TEST(Errors, ReduceEmptyDimension) {
  expect_error([] { amax(zeros({2, 0}), {1}); }, {"amax", "empty dimension", "[2, 0]"});
  expect_error([] { max(zeros({0})); }, {"max", "empty dimension", "[0]"});
  expect_error([] { argmin(zeros({0, 3}), 0); }, {"argmin", "empty dimension", "[0, 3]"});
}

TEST(Errors, ReduceNeedsFloatingTensor) {
  expect_error([] { mean(zeros({2}, kI64)); }, {"mean", "floating", "i64"});
  expect_error([] { var(zeros({2}, kI64)); }, {"var", "floating", "i64"});
}

TEST(Errors, VarNegativeCorrection) {
  expect_error([] { var(zeros({2}), {}, -1); }, {"var", "correction", "-1"});
}

TEST(Errors, SumAndMeanMethodsNeedDims) {
  expect_error([] { zeros({2}).sum({}); }, {"sum", "at least one dim"});
  expect_error([] { zeros({2}).mean({}); }, {"mean", "at least one dim"});
}

// --- matmul (src/ops/gemm.cpp) ---

TEST(Errors, MatmulUndefinedArgument) {
  expect_error([] { matmul(Tensor(), zeros({2})); }, {"matmul", "undefined tensor"});
}

TEST(Errors, MatmulDevicesDiffer) {
  expect_error(
      [] {
        matmul(zeros({2, 2}), fake_cuda({2, 2}));
      },
      {"matmul", "different devices", "cpu", "cuda:0"});
}

TEST(Errors, MatmulDtypesDiffer) {
  expect_error(
      [] {
        matmul(zeros({2, 3}), zeros({3, 2}, {.dtype = DType::f64}));
      },
      {"matmul", "dtypes differ", "f32", "f64"});
}

TEST(Errors, MatmulIntegerOperands) {
  expect_error(
      [] {
        matmul(zeros({2, 2}, kI64), zeros({2, 2}, kI64));
      },
      {"matmul", "floating", "i64"});
}

TEST(Errors, MatmulZeroDimOperand) {
  expect_error([] { matmul(zeros({}), zeros({2})); }, {"matmul", "at least 1 dim", "[]", "[2]"});
}

TEST(Errors, MatmulInnerDimMismatch) {
  expect_error(
      [] {
        matmul(zeros({2, 3}), zeros({4, 5}));
      },
      {"matmul", "[2, 3]", "[4, 5]", "3 vs 4"});
  expect_error([] { matmul(zeros({3}), zeros({4})); }, {"matmul", "[3]", "[4]", "3 vs 4"});
}

TEST(Errors, MatmulBatchDimsDoNotBroadcast) {
  expect_error(
      [] {
        matmul(zeros({2, 2, 3}), zeros({3, 3, 4}));
      },
      {"matmul", "[2]", "[3]", "cannot be broadcast"});
}

TEST(Errors, MatmulPrecisionUnknown) {
  expect_error([] { set_matmul_precision("medium"); }, {"set_matmul_precision", "\"medium\""});
}

// --- shape ops (src/ops/shape.cpp) ---

TEST(Errors, ShapeOpsUndefinedArgument) {
  expect_error([] { reshape(Tensor(), {1}); }, {"reshape", "undefined tensor"});
  expect_error([] { transpose(Tensor(), 0, 1); }, {"transpose", "undefined tensor"});
  expect_error([] { narrow(Tensor(), 0, 0, 1); }, {"narrow", "undefined tensor"});
  expect_error([] { flatten(Tensor()); }, {"flatten", "undefined tensor"});
  expect_error([] { cat({zeros({1}), Tensor()}); }, {"cat", "undefined tensor"});
  expect_error([] { stack({zeros({1}), Tensor()}); }, {"stack", "undefined tensor"});
  expect_error([] { split(Tensor(), 1); }, {"split", "undefined tensor"});
  expect_error([] { chunk(Tensor(), 1); }, {"chunk", "undefined tensor"});
  expect_error([] { index_select(zeros({1}), 0, Tensor()); }, {"index_select", "undefined tensor"});
}

TEST(Errors, ReshapeInvalidShape) {
  expect_error(
      [] {
        zeros({6}).reshape({-1, -1});
      },
      {"reshape", "only one dim can be -1", "[-1, -1]"});
  expect_error([] { zeros({6}).reshape({-2, 3}); }, {"reshape", "invalid size -2", "[-2, 3]"});
  expect_error([] { zeros({6}).reshape({4}); }, {"reshape", "[4]", "6 elements"});
  expect_error([] { zeros({6}).reshape({-1, 4}); }, {"reshape", "[-1, 4]", "6 elements"});
  expect_error([] { zeros({6}).view({7}); }, {"view", "[7]", "6 elements"});
}

TEST(Errors, ViewIncompatibleStrides) {
  expect_error(
      [] {
        zeros({2, 3}).t().view({6});
      },
      {"view", "[6]", "strides [1, 3]", "[3, 2]", "reshape"});
}

TEST(Errors, FlattenBadDims) {
  expect_error([] { zeros({2, 3, 4}).flatten(2, 0); }, {"flatten", "start_dim 2", "end_dim 0"});
  expect_error([] { zeros({2, 3}).flatten(0, 2); }, {"flatten", "dim 2", "2 dims"});
}

TEST(Errors, DimOutOfRange) {
  expect_error([] { zeros({2, 3}).unsqueeze(3); }, {"unsqueeze", "dim 3", "2 dims"});
  expect_error([] { zeros({2, 3}).squeeze(-3); }, {"squeeze", "dim -3", "2 dims"});
  expect_error([] { zeros({2, 3}).transpose(0, 2); }, {"transpose", "dim 2", "2 dims"});
}

TEST(Errors, PermuteBadDims) {
  expect_error([] { zeros({2, 3}).permute({0}); }, {"permute", "1 dims given", "2 dims"});
  expect_error([] { zeros({2, 3}).permute({1, -1}); }, {"permute", "dim -1 repeats", "[1, -1]"});
  expect_error([] { zeros({2, 3}).permute({0, 2}); }, {"permute", "dim 2", "2 dims"});
}

TEST(Errors, TransposeOfMoreThanTwoDims) {
  expect_error([] { zeros({1, 2, 3}).t(); }, {"t:", "at most 2 dims", "[1, 2, 3]"});
}

TEST(Errors, NarrowOutOfRange) {
  expect_error([] { zeros({}).narrow(0, 0, 1); }, {"narrow", "0-dim"});
  expect_error([] { zeros({3}).narrow(0, 2, 2); }, {"narrow", "start 2", "length 2", "size 3"});
  expect_error([] { zeros({3}).narrow(0, 0, -1); }, {"narrow", "length -1", "size 3"});
  expect_error([] { zeros({3}).narrow(1, 0, 1); }, {"narrow", "dim 1", "1 dims"});
}

TEST(Errors, SelectOutOfRange) {
  expect_error([] { zeros({}).select(0, 0); }, {"select", "0-dim"});
  expect_error([] { zeros({2, 3}).select(1, 3); }, {"select", "index 3", "dim 1", "size 3"});
  expect_error([] { zeros({2, 3})[-3]; }, {"select", "index -3", "size 2"});
}

TEST(Errors, SliceBadArguments) {
  expect_error([] { zeros({}).slice(0, 0, 1); }, {"slice", "0-dim"});
  expect_error([] { zeros({3}).slice(0, 0, 3, 0); }, {"slice", "step", "0"});
  expect_error([] { zeros({3}).slice(1, 0, 3); }, {"slice", "dim 1", "1 dims"});
}

TEST(Errors, ExpandBadShape) {
  expect_error([] { zeros({2, 3}).expand({3}); }, {"expand", "[2, 3]", "[3]", "fewer dims"});
  expect_error([] { zeros({3}).expand({-1, 3}); }, {"expand", "invalid size -1", "leading"});
  expect_error([] { zeros({2, 3}).expand({4, 3}); }, {"expand", "[2, 3]", "[4, 3]", "2 vs 4"});
}

// Regression: Tensor::expand (src/ops/shape.cpp) checks `want == cur || cur == 1` only, so a size-1
// dim expands to any negative size: zeros({1}).expand({-2}) has shape [-2] and numel -2.
TEST(Errors, ExpandToNegativeSize) {
  expect_error([] { zeros({1}).expand({-2}); }, {"expand", "-2"});
}

// Regression: transpose, squeeze(dim) and flatten (src/ops/shape.cpp) return a 0-dim tensor
// unchanged before checking their dims, so any dim is accepted there (a 0-dim tensor takes only 0
// and -1).
TEST(Errors, ZeroDimTensorDimOutOfRange) {
  expect_error([] { zeros({}).transpose(3, 4); }, {"transpose", "dim 3"});
  expect_error([] { zeros({}).squeeze(5); }, {"squeeze", "dim 5"});
  expect_error([] { zeros({}).flatten(3, 4); }, {"flatten", "dim 3"});
}

// Regression: Tensor::slice (src/ops/shape.cpp) computes (end - start + step - 1) / step, which
// overflows for a huge step: slice(0, 0, 3, INT64_MAX) gets shape [-1] instead of [1].
TEST(Errors, SliceHugeStepKeepsOneElement) {
  const Tensor s = zeros({3}).slice(0, 0, 3, kI64Max);
  EXPECT_EQ(s.shape(), Shape{1});
}

TEST(Errors, CatBadInputs) {
  expect_error([] { cat({}); }, {"cat", "at least one tensor"});
  expect_error([] { cat({zeros({})}); }, {"cat", "0-dim"});
  expect_error([] { cat({zeros({2})}, 1); }, {"cat", "dim 1", "1 dims"});
  expect_error([] { cat({zeros({2}), fake_cuda({2})}); }, {"cat", "tensor 1", "cuda:0", "cpu"});
  expect_error([] { cat({zeros({2}), zeros({2, 1})}); }, {"cat", "tensor 1", "[2, 1]", "[2]"});
  expect_error(
      [] {
        cat({zeros({2, 3}), zeros({2, 4})}, 0);
      },
      {"cat", "tensor 1", "[2, 4]", "[2, 3]", "only in dim 0"});
}

TEST(Errors, StackBadInputs) {
  expect_error([] { stack({}); }, {"stack", "at least one tensor"});
  expect_error([] { stack({zeros({2})}, 3); }, {"stack", "dim 3", "1-dim"});
  expect_error([] { stack({zeros({2}), zeros({3})}); }, {"stack", "tensor 1", "[3]", "[2]"});
}

// Regression: stack (src/ops/shape.cpp) left the device check to cat, so the message named cat,
// an op the caller never called.
TEST(Errors, StackDeviceMismatchNamesStack) {
  expect_error([] { stack({zeros({2}), fake_cuda({2})}); }, {"stack", "tensor 1", "cuda:0"});
}

TEST(Errors, SplitAndChunkBadSizes) {
  expect_error([] { split(zeros({3}), 0); }, {"split", "split_size", "0"});
  expect_error(
      [] {
        split(zeros({3}), std::vector<int64_t>{4, -1});
      },
      {"split", "negative", "[4, -1]"});
  expect_error(
      [] {
        split(zeros({3}), std::vector<int64_t>{1, 1});
      },
      {"split", "[1, 1]", "sum to 2", "size 3"});
  expect_error([] { split(zeros({3}), 1, 1); }, {"split", "dim 1", "1 dims"});
  expect_error([] { chunk(zeros({3}), 0); }, {"chunk", "chunks", "0"});
  expect_error([] { chunk(zeros({3}), 1, 1); }, {"chunk", "dim 1", "1 dims"});
}

TEST(Errors, IndexSelectBadIndex) {
  expect_error([] { index_select(zeros({3}), 0, zeros({2})); }, {"index_select", "i64", "f32"});
  expect_error(
      [] {
        index_select(zeros({3}), 0, zeros({1, 1}, kI64));
      },
      {"index_select", "1-D", "[1, 1]"});
  expect_error([] { index_select(zeros({3}), 0, fake_cuda({1}, DType::i64)); },
               {"index_select", "cuda:0", "cpu"});
  expect_error([] { index_select(zeros({}), 0, zeros({1}, kI64)); }, {"index_select", "0-dim"});
  expect_error([] { index_select(zeros({3}), 1, zeros({1}, kI64)); },
               {"index_select", "dim 1", "1 dims"});
  expect_error(
      [] {
        index_select(zeros({2, 3}), 1, from_vector<int64_t>({0, 3}));
      },
      {"index_select", "out of range", "[0, 3]", "dim 1", "size 3"});
  expect_error(
      [] {
        index_select(zeros({3}), 0, from_vector<int64_t>({-1, 0}));
      },
      {"index_select", "out of range", "[-1, 0]", "size 3"});
}

// --- tensors and factories (src/tensor/tensor.cpp, include/sinter/tensor.h) ---

TEST(Errors, UndefinedTensorUse) {
  const Tensor u;
  expect_error([&] { u.shape(); }, {"undefined tensor"});
  expect_error([&] { u.numel(); }, {"undefined tensor"});
  expect_error([&] { u.dtype(); }, {"undefined tensor"});
  expect_error([&] { u.clone(); }, {"undefined tensor"});
  expect_error([&] { u.to(DType::f64); }, {"undefined tensor"});
  expect_error([&] { u.item<float>(); }, {"undefined tensor"});
  expect_error([&] { zeros_like(u); }, {"undefined tensor"});
}

TEST(Errors, SizeAndStrideDimOutOfRange) {
  expect_error([] { zeros({2, 3}).size(2); }, {"size", "dim 2", "2 dims"});
  expect_error([] { zeros({2, 3}).stride(-3); }, {"stride", "dim -3", "2 dims"});
}

TEST(Errors, DataOfWrongType) {
  expect_error([] { zeros({2}).data<double>(); }, {"Tensor::data", "f32", "f64"});
}

TEST(Errors, ItemOfManyElements) {
  expect_error([] { zeros({2, 3}).item<float>(); }, {"item", "6 elements", "[2, 3]"});
}

TEST(Errors, NegativeSizes) {
  expect_error([] { empty({2, -1}); }, {"empty", "negative size", "[2, -1]"});
  expect_error([] { from_vector<float>({}, {-1}); }, {"from_vector", "negative size", "[-1]"});
  static float buf[4];
  expect_error([] { from_blob(buf, {-2}); }, {"from_blob", "negative size", "[-2]"});
  expect_error([] { linspace(0, 1, -1); }, {"linspace", "-1"});
  expect_error([] { eye(-1, 2); }, {"eye", "-1", "2"});
}

// Regression: numel_of (src/tensor/tensor.cpp) multiplies without an overflow check, so
// empty({2^32, 2^32}) wraps to 0 elements and returns a tensor with no storage behind it (zeros()
// and eye(2^32) of the same size then crash writing through a null pointer).
TEST(Errors, SizeOverflow) {
  expect_error([] { empty({int64_t{1} << 32, int64_t{1} << 32}); }, {"empty", "4294967296"});
}

// Regression: contiguous_strides multiplied the dims without an overflow check, so a shape with a
// zero dim (no elements) and huge others overflowed int64 (undefined behaviour; found by fuzz_idx).
TEST(Errors, StrideOverflowWithAZeroDim) {
  expect_error(
      [] {
        empty({0, int64_t{1} << 32, int64_t{1} << 32});
      },
      {"empty", "4294967296", "strides"});
}

TEST(Errors, PinnedCudaTensor) {
  expect_error([] { empty({2}, {.device = Device::cuda(0), .pinned = true}); },
               {"empty", "pinned", "cuda:0"});
}

TEST(Errors, ArangeBadRange) {
  expect_error([] { arange(0, 1, 0); }, {"arange", "step", "0"});
  expect_error([] { arange(0, std::numeric_limits<double>::infinity()); },
               {"arange", "finite", "inf"});
  expect_error([] { arange(1, 0, 1); }, {"arange", "step 1", "from 1 to 0"});
}

// Regression: arange (src/tensor/tensor.cpp) casts ceil((end - start) / step) to int64 unchecked;
// arange(0, 1e30) overflows that cast and fails later with "empty: negative size in shape
// [-9223372036854775808]", which does not name arange.
TEST(Errors, ArangeTooManyElements) {
  expect_error([] { arange(0, 1e30); }, {"arange"});
}

TEST(Errors, RandomNeedsFloatingDtype) {
  expect_error([] { rand({2}, kI64); }, {"rand", "floating", "i64"});
  expect_error([] { randn({2}, {.dtype = DType::i32}); }, {"randn", "floating", "i32"});
}

TEST(Errors, RandintBadArguments) {
  expect_error([] { randint(3, 3, {2}); }, {"randint", "low (3)", "high (3)"});
  expect_error([] { randint(0, 2, {2}, {.dtype = DType::f32, .requires_grad = true}); },
               {"randint", "require grad"});
}

// Regression: randint (src/tensor/tensor.cpp) does not check [low, high) against the dtype;
// randint(0, 1000, u8) silently wraps values into [0, 256).
TEST(Errors, RandintRangeBeyondDtype) {
  expect_error([] { randint(0, 1000, {4}, {.dtype = DType::u8}); }, {"randint", "1000", "u8"});
}

TEST(Errors, FromVectorCountMismatch) {
  expect_error(
      [] {
        from_vector<float>({1, 2, 3}, {2, 2});
      },
      {"from_vector", "3 values", "[2, 2]"});
}

TEST(Errors, FromBlobBadLayout) {
  static float buf[4];
  expect_error([] { from_blob(buf, {2, 2}, Shape{2}); }, {"from_blob", "[2, 2]", "[2]", "length"});
  expect_error([] { from_blob(nullptr, {2}); }, {"from_blob", "null data", "[2]"});
  expect_error([] { from_blob(buf, {2}, Shape{-1}); }, {"from_blob", "negative stride", "[-1]"});
}

TEST(Errors, PinMemoryOfCudaTensor) {
  expect_error([] { fake_cuda({2}).pin_memory(); }, {"pin_memory", "cuda:0"});
}

TEST(Errors, OutOfHostMemory) {
  // 4 PiB: more than any address space, so the allocation fails at once.
  expect_error([] { empty({int64_t{1} << 50}); }, {"out of host memory", "4503599627370496 bytes"});
}

TEST(Errors, DeviceParseBadString) {
  expect_error([] { Device::parse("gpu:0"); }, {"Device::parse", "\"gpu:0\""});
  expect_error([] { Device::parse("cuda:-1"); }, {"Device::parse", "\"cuda:-1\""});
  expect_error([] { Device::parse("cuda:"); }, {"Device::parse", "\"cuda:\""});
  expect_error([] { Device::parse("cuda:1x"); }, {"Device::parse", "\"cuda:1x\""});
}

// --- in-place ops and copies (src/tensor/tensor.cpp) ---

TEST(Errors, InplaceOnUndefinedTensor) {
  expect_error([] { Tensor().add_(1.0); }, {"add_", "undefined tensor"});
  expect_error([] { Tensor().fill_(1.0); }, {"fill_", "undefined tensor"});
  expect_error([] { zeros({1}).copy_(Tensor()); }, {"copy_", "undefined source"});
}

// Per Note [in-place autograd], a leaf that requires grad, or a view of one, is written only under
// NoGradGuard; the tensor is left as it was.
TEST(Errors, InplaceOnLeafThatRequiresGrad) {
  Tensor w = zeros({2, 3}, {.requires_grad = true});
  expect_error([&] { w.add_(1.0); },
               {"add_", "a leaf tensor that requires grad", "[2, 3]", "NoGradGuard"});
  expect_error([&] { w.zero_(); }, {"fill_", "leaf tensor that requires grad"});
  expect_error([&] { w.mul_(ones({2, 3})); }, {"mul_", "leaf tensor that requires grad"});
  expect_error([&] { w.copy_(ones({3})); }, {"copy_", "leaf tensor that requires grad"});
  expect_error([&] { w.select(0, 1).add_(ones({3})); },
               {"add_", "a view (shape [3]) of a leaf tensor that requires grad (shape [2, 3])"});
  expect_error([&] { w.t().copy_(ones({3, 2})); }, {"copy_", "a view (shape [3, 2]) of a leaf"});
  EXPECT_EQ(w.to_vector<float>(), std::vector<float>(6, 0.0f));
  NoGradGuard ng;
  w.add_(1.0);
  w.select(0, 1).mul_(3.0);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 1, 1, 3, 3, 3}));
  EXPECT_TRUE(w.is_leaf());
}

// A write whose result another node saved: that node's backward says so (as PyTorch's does).
TEST(Errors, InplaceOnTensorSavedForBackward) {
  const Tensor x = ones({3}, {.requires_grad = true});
  Tensor y = sigmoid(x);  // saves its output
  y.mul_(2.0);
  expect_error([&] { y.sum().backward(); }, {"sigmoid backward", "modified by an in-place"});
  Tensor buf = zeros({2, 3});
  Tensor z = buf.select(0, 0) * x;  // saves a view of buf: a write anywhere in buf bumps it
  buf.select(0, 1).copy_(x);
  expect_error([&] { (z.sum() + buf.sum()).backward(); },
               {"mul backward", "modified by an in-place"});
}

TEST(Errors, InplaceOperandMismatch) {
  expect_error([] { zeros({2}).add_(fake_cuda({2})); }, {"add_", "cpu", "cuda:0"});
  expect_error([] { zeros({2}).mul_(zeros({2}, {.dtype = DType::f64})); }, {"mul_", "f64", "f32"});
  expect_error([] { zeros({3}).add_(zeros({2, 3})); }, {"add_", "[2, 3]", "[3]"});
  expect_error([] { zeros({3}).add_(zeros({4})); }, {"add_", "[3]", "[4]", "cannot be broadcast"});
  expect_error([] { zeros({3}).copy_(zeros({2, 3})); }, {"copy_", "[2, 3]", "[3]"});
}

// Regression (Note [in-place overlap]): a source sharing memory with the tensor written in another
// layout was read after being written (the CPU and a GPU giving different wrong answers), and an
// expanded view was written through one element many times.
TEST(Errors, InplaceSourceOverlapsTheTensorWritten) {
  Tensor x = arange(0.0, 16.0).reshape({4, 4});
  expect_error([&] { x.add_(x.t()); },
               {"add_", "shares memory", "strides [1, 4]", "strides [4, 1]", "clone()"});
  expect_error([&] { x.mul_(x.narrow(0, 0, 1)); }, {"mul_", "shape [1, 4]", "shares memory"});
  Tensor v = arange(0.0, 8.0);
  expect_error([&] { v.narrow(0, 1, 7).copy_(v.narrow(0, 0, 7)); },
               {"copy_", "shape [7]", "shares memory"});
  Tensor e = zeros({3}).expand({4, 3});
  expect_error([&] { e.add_(1.0); }, {"add_", "expanded view", "dim 0", "strides [0, 1]"});
  expect_error([&] { e.copy_(ones({4, 3})); }, {"copy_", "expanded view"});
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));  // untouched
}

TEST(Errors, InplaceOverlapThatIsSafeRuns) {
  Tensor x = arange(0.0, 6.0).reshape({2, 3});
  x.add_(x);  // each element with itself
  x.t().mul_(x.t());
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 4, 16, 36, 64, 100}));
  Tensor v = arange(0.0, 6.0);
  v.narrow(0, 0, 3).copy_(v.narrow(0, 3, 3));  // the same storage, disjoint bytes
  v.slice(0, 0, std::nullopt, 2).add_(v.slice(0, 1, std::nullopt, 2));  // interleaved elements
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{7, 4, 8, 3, 9, 5}));
  zeros({3}).expand({4, 3}).fill_(1.0);  // one value into each element: refused by nobody
  Tensor one = zeros({1, 1}).expand({1, 1});
  one.add_(1.0);
  EXPECT_EQ(one.item<float>(), 1.0f);
}

// --- autograd (src/autograd/engine.cpp) ---

TEST(Errors, BackwardOfTensorWithoutGrad) {
  expect_error([] { zeros({2}).sum().backward(); }, {"backward", "does not require grad"});
  expect_error([] { Tensor().backward(); }, {"backward", "root 0", "undefined"});
}

TEST(Errors, BackwardGradientMismatch) {
  const Tensor x = zeros({2, 3}, {.requires_grad = true});
  expect_error([&] { (x * 2.0).backward(); }, {"backward", "scalar", "[2, 3]"});
  expect_error([&] { (x * 2.0).backward(zeros({3})); }, {"backward", "[3]", "[2, 3]"});
  expect_error([&] { (x * 2.0).backward(fake_cuda({2, 3})); }, {"backward", "cuda:0", "cpu"});
  expect_error(
      [&] {
        autograd::backward({x.sum(), x.sum()}, {Tensor()});
      },
      {"backward", "2 roots", "1 gradients"});
}

TEST(Errors, BackwardTwiceWithoutRetainGraph) {
  const Tensor x = ones({2}, {.requires_grad = true});
  const Tensor y = (x * x).sum();
  y.backward();
  expect_error([&] { y.backward(); }, {"sum backward", "second time", "retain_graph"});
}

TEST(Errors, SavedTensorModifiedInPlace) {
  Tensor x = ones({2});
  const Tensor w = ones({2}, {.requires_grad = true});
  const Tensor y = (x * w).sum();
  const uint32_t saved = x.version();
  x.add_(1.0);
  expect_error([&] { y.backward(); }, {"mul backward", "modified by an in-place operation",
                                       "version is " + std::to_string(x.version()),
                                       "saved at version " + std::to_string(saved)});
}

TEST(Errors, LeafHookChangesShape) {
  const Tensor x = ones({2}, {.requires_grad = true});
  x.register_hook([](const Tensor&) { return ones({3}); });
  expect_error([&] { (x * 2.0).sum().backward(); }, {"backward", "[3]", "leaf of shape [2]"});
}

TEST(Errors, RequiresGradRules) {
  expect_error([] { zeros({2}, {.dtype = DType::i64, .requires_grad = true}); },
               {"requires_grad_", "floating", "i64"});
  expect_error([] { Tensor().requires_grad_(); }, {"requires_grad_", "undefined tensor"});
  const Tensor x = zeros({2}, {.requires_grad = true});
  expect_error([&] { (x * 2.0).requires_grad_(false); }, {"requires_grad_", "only leaves"});
}

TEST(Errors, SetGradShapeMismatch) {
  expect_error([] { zeros({2}).set_grad(zeros({3})); }, {"set_grad", "[3]", "[2]"});
  expect_error([] { Tensor().set_grad(zeros({1})); }, {"set_grad", "undefined tensor"});
}

// Regression: Tensor::set_grad (src/autograd/engine.cpp) checks only the shape; a gradient of
// another dtype or device is stored as is and surfaces later in an optimizer or in accumulation.
TEST(Errors, SetGradDtypeOrDeviceMismatch) {
  expect_error([] { zeros({2}).set_grad(zeros({2}, {.dtype = DType::f64})); },
               {"set_grad", "f64", "f32"});
  expect_error([] { zeros({2}).set_grad(fake_cuda({2})); }, {"set_grad", "cuda:0", "cpu"});
}

TEST(Errors, HooksNeedGrad) {
  expect_error([] { zeros({2}).register_hook([](const Tensor& g) { return g; }); },
               {"register_hook", "does not require grad"});
  expect_error([] { zeros({2}).retain_grad(); }, {"retain_grad", "does not require grad"});
  const Tensor x = zeros({2}, {.requires_grad = true});
  expect_error([&] { (x * 2.0).register_post_accumulate_grad_hook([](Tensor&) {}); },
               {"register_post_accumulate_grad_hook", "only leaves"});
  expect_error([] { zeros({2}).register_post_accumulate_grad_hook([](Tensor&) {}); },
               {"register_post_accumulate_grad_hook", "only leaves"});
}

// --- inputs that crash today (each runs in a child process) ---

// Regression: Tensor::detach (src/autograd/engine.cpp) calls alias_of (src/tensor/tensor.cpp),
// which dereferences the null impl of an undefined tensor: a segmentation fault.
TEST(ErrorsDeathTest, DetachOfUndefinedTensor) {
  expect_error_isolated([] { Tensor().detach(); }, {"undefined tensor"});
}

// Regression: to_vector starts with detach(), so an undefined tensor crashes it the same way.
TEST(ErrorsDeathTest, ToVectorOfUndefinedTensor) {
  expect_error_isolated([] { Tensor().to_vector<float>(); }, {"undefined tensor"});
}

// Regression: Tensor::narrow (src/ops/shape.cpp) checks start + length <= n, which overflows for a
// huge length and lets narrow(0, 1, INT64_MAX) through to a segmentation fault.
TEST(ErrorsDeathTest, NarrowLengthOverflow) {
  expect_error_isolated([] { zeros({3}).narrow(0, 1, kI64Max).sum(); },
                        {"narrow", "9223372036854775807"});
}

// --- the CUDA layer without a usable device (src/cuda/runtime_*.cpp, internal/dispatch.h) ---

#define SINTER_SKIP_WITH_CUDA()                                                    \
  do {                                                                             \
    if (::sinter::testing::has_cuda()) GTEST_SKIP() << "a CUDA device is present"; \
  } while (0)

TEST(Errors, NoGpuQueriesReportNoDevice) {
  SINTER_SKIP_WITH_CUDA();
  EXPECT_FALSE(cuda::is_available());
  EXPECT_EQ(cuda::device_count(), 0);
  const cuda::MemoryStats s = cuda::memory_stats();
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.reserved_bytes, 0);
  EXPECT_NO_THROW(cuda::reset_peak_memory_stats());
  EXPECT_NO_THROW(cuda::empty_cache());
}

TEST(Errors, NoGpuCudaTensors) {
  SINTER_SKIP_WITH_CUDA();
  const Tensor x = ones({2, 3});
  expect_error([] { zeros({2}, {.device = Device::cuda()}); }, {kNoCuda});
  expect_error([] { randn({2}, {.device = Device::cuda()}); }, {kNoCuda});
  expect_error([] { arange(4.0, {.device = Device::cuda()}); }, {kNoCuda});
  expect_error([] { from_vector<float>({1, 2}, {2}, {.device = Device::cuda()}); }, {kNoCuda});
  expect_error([&] { x.to(Device::cuda()); }, {kNoCuda});
  expect_error([&] { x.cuda(); }, {kNoCuda});
  expect_error([&] { x.to(Device::cuda(1), true); }, {kNoCuda});
}

// A tensor that claims to be on a device fails on first use, whatever the op.
TEST(Errors, NoGpuForeignCudaTensor) {
  SINTER_SKIP_WITH_CUDA();
  const Tensor c = fake_cuda({2});
  expect_error([&] { add(c, c); }, {kNoCuda});
  expect_error([&] { exp(c); }, {kNoCuda});
  expect_error([&] { sum(c); }, {kNoCuda});
  expect_error([&] { c.to(Device::cpu()); }, {kNoCuda});
  expect_error([&] { c.to_vector<float>(); }, {kNoCuda});
  expect_error([&] { c.str(); }, {kNoCuda});
}

TEST(Errors, NoGpuPinnedMemory) {
  SINTER_SKIP_WITH_CUDA();
  expect_error([] { empty({2}, {.pinned = true}); }, {"allocate_pinned", kNoCuda});
  expect_error([] { zeros({2}).pin_memory(); }, {"allocate_pinned", kNoCuda});
}

TEST(Errors, NoGpuRuntimeCalls) {
  SINTER_SKIP_WITH_CUDA();
  expect_error([] { cuda::current_device(); }, {kNoCuda});
  expect_error([] { cuda::set_device(0); }, {kNoCuda});
  expect_error([] { cuda::get_device_properties(); }, {kNoCuda});
  expect_error([] { cuda::synchronize(); }, {kNoCuda});
  expect_error([] { cuda::Stream::default_stream(); }, {kNoCuda});
  expect_error([] { cuda::Stream::create(); }, {kNoCuda});
  expect_error([] { cuda::current_stream(); }, {kNoCuda});
  expect_error([] { cuda::set_current_stream(cuda::Stream()); }, {kNoCuda});
  expect_error([] { cuda::StreamGuard g{cuda::Stream()}; }, {kNoCuda});
}

// Regression, in a CUDA build: Stream::synchronize, Stream::query and Event::record
// (src/cuda/runtime_cuda.cpp) skip checked_device and fail inside cudaGetDevice with a raw
// "CUDA error cudaErrorInsufficientDriver ... from cudaGetDevice(&previous_)".
TEST(Errors, NoGpuStreamAndEventCalls) {
  SINTER_SKIP_WITH_CUDA();
  expect_error([] { cuda::Stream().synchronize(); }, {kNoCuda});
  expect_error([] { cuda::Stream().query(); }, {kNoCuda});
  expect_error([] { cuda::Event().record(cuda::Stream()); }, {kNoCuda});
}

// Regression, in a build without CUDA: cuda.h documents query() as true, synchronize() and
// Stream::wait as no-ops for an event never recorded, and a CUDA build does so without a device,
// but src/cuda/runtime_nocuda.cpp throws "built without CUDA" from all three.
TEST(Errors, NoGpuEventNeverRecorded) {
  SINTER_SKIP_WITH_CUDA();
  cuda::Event e;
  bool done = false;
  EXPECT_NO_THROW(done = e.query());
  EXPECT_TRUE(done);
  EXPECT_NO_THROW(e.synchronize());
  EXPECT_NO_THROW(cuda::Stream().wait(e));
}

// Regression: allocate_device returns nullptr for 0 bytes before looking for a device (in both
// runtime files), so zeros({0}, cuda) makes a "cuda:0" tensor on a machine with no device.
TEST(Errors, NoGpuZeroSizeCudaTensor) {
  SINTER_SKIP_WITH_CUDA();
  expect_error([] { zeros({0}, {.device = Device::cuda()}); }, {kNoCuda});
}

// These two fail the same way with or without a device.
TEST(Errors, SetDeviceNegative) {
#ifdef SINTER_WITH_CUDA
  expect_error([] { cuda::set_device(-1); }, {"set_device", "device -1"});
#else
  expect_error([] { cuda::set_device(-1); }, {"set_device", kNoCuda});
#endif
}

TEST(Errors, EventElapsedNotRecorded) {
#ifdef SINTER_WITH_CUDA
  expect_error([] { cuda::Event().elapsed_ms(cuda::Event()); },
               {"Event::elapsed_ms", "must be recorded"});
#else
  expect_error([] { cuda::Event().elapsed_ms(cuda::Event()); }, {"Event::elapsed_ms", kNoCuda});
#endif
}

// --- the CUDA layer with a device (label gpu) ---

TEST(CudaErrors, MissingDeviceIndex) {
  SINTER_REQUIRE_CUDA();
  const int n = cuda::device_count();
  const std::string dev = "device " + std::to_string(n);
  expect_error([&] { empty({2}, {.device = Device::cuda(n)}); }, {dev, "does not exist"});
  expect_error([&] { cuda::get_device_properties(n); }, {dev, "does not exist"});
  expect_error([&] { cuda::set_device(n); }, {dev, "does not exist"});
}

// Regression: checked_device (src/cuda/runtime_cuda.cpp) reads -1 as "the current device", so
// Device::cuda(-1) tensors are allocated there while reporting device cuda:-1 (Device::parse
// rejects "cuda:-1").
TEST(CudaErrors, NegativeDeviceIndex) {
  SINTER_REQUIRE_CUDA();
  expect_error([] { empty({2}, {.device = Device::cuda(-1)}); }, {"-1"});
}

TEST(CudaErrors, MixedDevices) {
  SINTER_REQUIRE_CUDA();
  const Tensor c = ones({2}, {.device = Device::cuda()});
  expect_error([&] { add(ones({2}), c); }, {"add", "different devices", "cpu", "cuda:0"});
  expect_error([&] { matmul(ones({1, 2}), c.reshape({2, 1})); }, {"matmul", "cpu", "cuda:0"});
}

TEST(CudaErrors, EventElapsedWithoutTiming) {
  SINTER_REQUIRE_CUDA();
  cuda::Event a(false), b(false);
  a.record(cuda::current_stream());
  b.record(cuda::current_stream());
  b.synchronize();
  expect_error([&] { a.elapsed_ms(b); }, {"Event::elapsed_ms", "enable_timing"});
}

// --- sinter::dist without MPI (the build without it) ---

#ifndef SINTER_WITH_MPI
TEST(Errors, ProcessGroupWithoutMpi) {
  expect_error([] { dist::ProcessGroup::init(); }, {"ProcessGroup: built without MPI"});
}
#endif

}  // namespace
}  // namespace sinter

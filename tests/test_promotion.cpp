// Dtype promotion: promote_types against PyTorch's table written out for Sinter's dtypes,
// result_type's zero-dim and scalar rules, and the elementwise ops computing in the promoted dtype
// with each gradient in its input's dtype.
#include <array>
#include <limits>
#include <string>

#include "test_util.h"

namespace sinter {
namespace {

constexpr std::array<DType, 8> kAll = {DType::f32, DType::f64, DType::bf16, DType::f16,
                                       DType::i64, DType::i32, DType::u8,   DType::b8};

// PyTorch's torch.promote_types for these dtypes, rows and columns in kAll's order.
constexpr DType f32 = DType::f32, f64 = DType::f64, bf16 = DType::bf16, f16 = DType::f16,
                i64 = DType::i64, i32 = DType::i32, u8 = DType::u8, b8 = DType::b8;
constexpr DType kTable[8][8] = {
    /* f32  */ {f32, f64, f32, f32, f32, f32, f32, f32},
    /* f64  */ {f64, f64, f64, f64, f64, f64, f64, f64},
    /* bf16 */ {f32, f64, bf16, f32, bf16, bf16, bf16, bf16},
    /* f16  */ {f32, f64, f32, f16, f16, f16, f16, f16},
    /* i64  */ {f32, f64, bf16, f16, i64, i64, i64, i64},
    /* i32  */ {f32, f64, bf16, f16, i64, i32, i32, i32},
    /* u8   */ {f32, f64, bf16, f16, i64, i32, u8, u8},
    /* b8   */ {f32, f64, bf16, f16, i64, i32, u8, b8},
};

TEST(Promotion, PromoteTypesIsPyTorchsTable) {
  for (size_t i = 0; i < kAll.size(); ++i) {
    for (size_t j = 0; j < kAll.size(); ++j) {
      EXPECT_EQ(promote_types(kAll[i], kAll[j]), kTable[i][j])
          << dtype_name(kAll[i]) << " with " << dtype_name(kAll[j]);
    }
  }
}

Tensor of(DType t, Shape s = {2}) { return zeros(s, {.dtype = t}); }

TEST(Promotion, ZeroDimTensorsCountOnlyFromAHigherCategory) {
  EXPECT_EQ(result_type(of(f32), of(f64, {})), f32);
  EXPECT_EQ(result_type(of(f64, {}), of(f32)), f32);
  EXPECT_EQ(result_type(of(i64), of(f32, {})), f32);
  EXPECT_EQ(result_type(of(i32), of(i64, {})), i32);
  EXPECT_EQ(result_type(of(b8), of(i64, {})), i64);
  EXPECT_EQ(result_type(of(f16), of(bf16, {})), f16);
  EXPECT_EQ(result_type(of(u8), of(f64, {})), f64);
  // Two zero-dim tensors, or two with dims: the plain promotion.
  EXPECT_EQ(result_type(of(f64, {}), of(f32, {})), f64);
  EXPECT_EQ(result_type(of(bf16, {3, 1}), of(f16)), f32);
}

TEST(Promotion, ScalarsPromoteIntegersOnlyWithAFraction) {
  EXPECT_EQ(result_type(of(i64), 0.5), f32);
  EXPECT_EQ(result_type(of(i64), 2.0), i64);
  EXPECT_EQ(result_type(of(u8), -3.0), u8);
  EXPECT_EQ(result_type(of(b8), 1.0), i64);
  EXPECT_EQ(result_type(of(b8), 0.5), f32);
  EXPECT_EQ(result_type(of(i32), std::numeric_limits<double>::infinity()), f32);
  EXPECT_EQ(result_type(of(bf16), 0.5), bf16);
  EXPECT_EQ(result_type(of(f64), 3.0), f64);
}

TEST(Promotion, BinaryOpsComputeInThePromotedDtype) {
  const Tensor a = from_vector<double>({1.5, -2, 4}, {3}).to(f32);
  const Tensor i = from_vector<double>({1, 2, 3}, {3}).to(i64);
  const Tensor h = a.to(bf16);
  EXPECT_EQ(add(a, h).dtype(), f32);
  EXPECT_EQ(add(h, a).dtype(), f32);
  EXPECT_TRUE(testing::all_close(mul(i, a), from_vector<double>({1.5, -4, 12}, {3}), 0, 0));
  EXPECT_EQ(mul(i, a).dtype(), f32);
  EXPECT_EQ(sub(a.to(f64), a).dtype(), f64);
  EXPECT_EQ(maximum(i, h).dtype(), bf16);
  EXPECT_EQ(pow(i.to(i32), a.to(f16)).dtype(), f16);
  EXPECT_EQ(add(i, i.to(u8)).dtype(), i64);
  EXPECT_EQ(add(a.to(f16), a.to(bf16)).dtype(), f32);
  // A zero-dim operand of the same category does not widen.
  EXPECT_EQ(mul(a, full({}, 2.0, {.dtype = f64})).dtype(), f32);
  // Scalars: a fraction makes an integer tensor f32; an integral one keeps it.
  EXPECT_TRUE(testing::all_close(add(i, 0.5), from_vector<double>({1.5, 2.5, 3.5}, {3}), 0, 0));
  EXPECT_EQ(add(i, 0.5).dtype(), f32);
  EXPECT_EQ(add(i, 2.0).dtype(), i64);
  EXPECT_EQ(sub(0.5, i.to(i32)).dtype(), f32);
  EXPECT_EQ(div(i, 4.0).dtype(), i64);  // integer division truncates
  EXPECT_EQ(div(i, 0.5).dtype(), f32);
  EXPECT_EQ(add(gt(a, 0.0), 1.0).dtype(), i64);
  // Comparisons compare in the promoted dtype and give bool.
  EXPECT_TRUE(
      testing::all_close(lt(i, 1.5).to(i64), from_vector<double>({1, 0, 0}, {3}).to(i64), 0, 0));
  EXPECT_TRUE(testing::all_close(eq(i, a.to(bf16)).to(i64), zeros({3}, {.dtype = i64}), 0, 0));
  EXPECT_EQ(ge(h, a).dtype(), b8);
  // where promotes its values; a fraction beside an integer tensor too.
  const Tensor c = gt(a, 0.0);
  EXPECT_EQ(where(c, i, a).dtype(), f32);
  const Tensor w = where(c, i, 0.5);
  EXPECT_EQ(w.dtype(), f32);
  EXPECT_TRUE(testing::all_close(w, from_vector<double>({1, 0.5, 3}, {3}), 0, 0));
}

TEST(Promotion, GradientsComeBackInEachInputsDtype) {
  Tensor a = from_vector<double>({1.5, -2, 4}, {3}).to(f32).requires_grad_(true);
  Tensor b = from_vector<double>({0.5, 3, -1}, {3}).to(bf16).requires_grad_(true);
  Tensor c = from_vector<double>({2}, {}).to(f64).requires_grad_(true);
  // y = (a * b + c) / b: f32 throughout (c is zero-dim f64 beside f32 tensors).
  Tensor y = div(add(mul(a, b), c), b);
  EXPECT_EQ(y.dtype(), f32);
  sum(y).backward();
  ASSERT_TRUE(a.grad().defined() && b.grad().defined() && c.grad().defined());
  EXPECT_EQ(a.grad().dtype(), f32);
  EXPECT_EQ(b.grad().dtype(), bf16);
  EXPECT_EQ(c.grad().dtype(), f64);
  // dy/da = 1; dy/db = -c / b^2; dy/dc = sum(1 / b).
  EXPECT_TRUE(testing::all_close(a.grad(), ones({3}), 1e-6, 1e-6));
  EXPECT_TRUE(testing::all_close(b.grad().to(f64), from_vector<double>({-8, -2.0 / 9, -2}, {3}),
                                 1e-2, 1e-2));
  EXPECT_NEAR(c.grad().item<double>(), 2 + 1.0 / 3 - 1, 1e-6);
}

TEST(Promotion, MixedDevicesAreStillAnError) {
  SINTER_REQUIRE_CUDA();
  testing::expect_error(
      [] { add(zeros({2}), zeros({2}, {.dtype = f64, .device = Device::cuda()})); },
      {"add", "different devices"});
}

TEST(Promotion, CudaComputesAsTheCpu) {
  SINTER_REQUIRE_CUDA();
  const Tensor a = randn({5, 3}), b = randn({3}).to(bf16), i = arange(3.0).to(i64);
  auto both = [](const Tensor& x) { return x.to(Device::cuda()); };
  EXPECT_TRUE(testing::all_close(add(both(a), both(b)).cpu(), add(a, b), 1e-6, 1e-6));
  EXPECT_TRUE(testing::all_close(mul(both(i), both(a)).cpu(), mul(i, a), 1e-6, 1e-6));
  EXPECT_TRUE(testing::all_close(add(both(i), 0.25).cpu(), add(i, 0.25), 0, 0));
}

}  // namespace
}  // namespace sinter

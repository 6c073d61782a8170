// Dtype promotion: promote_types against PyTorch's table written out for Sinter's dtypes,
// result_type's zero-dim and scalar rules, and the elementwise ops computing in the promoted dtype
// with each gradient in its input's dtype.
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "sinter/autocast.h"
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

// A true division of integers divides each operand's own value in f32, as PyTorch's: a u8 tensor
// over a 0-dim -7 divides by -7 (their promotion, u8, would hold 249), an i32 one over 2^40 by
// 2^40.
TEST(Promotion, TrueDivisionOfIntegersReadsEachOperandsValue) {
  const Tensor u = from_vector<int64_t>({3, 5}, {2}).to(DType::u8);
  const Tensor q = div(u, full({}, -7, {.dtype = DType::i64}));
  EXPECT_EQ(q.dtype(), DType::f32);
  EXPECT_FLOAT_EQ(q.to_vector<float>()[0], -3.0f / 7.0f);
  const Tensor big = div(u.to(DType::i32), full({}, int64_t{1} << 40, {.dtype = DType::i64}));
  EXPECT_FLOAT_EQ(big.to_vector<float>()[1], 5.0f / 1099511627776.0f);
}

// Per Note [scalar kinds], a scalar counts when its kind ranks above the tensor's category, as a
// Python number does in torch.result_type.
TEST(Promotion, ScalarsKeepTheirKind) {
  EXPECT_EQ(result_type(of(i64), 0.5), f32);
  EXPECT_EQ(result_type(of(i64), 2.0), f32);
  EXPECT_EQ(result_type(of(i64), 2), i64);
  EXPECT_EQ(result_type(of(i32), int64_t{1} << 40), i32);
  EXPECT_EQ(result_type(of(u8), -3), u8);
  EXPECT_EQ(result_type(of(u8), -3.0), f32);
  EXPECT_EQ(result_type(of(b8), true), b8);
  EXPECT_EQ(result_type(of(b8), 1), i64);
  EXPECT_EQ(result_type(of(b8), 1.0), f32);
  EXPECT_EQ(result_type(of(i32), std::numeric_limits<double>::infinity()), f32);
  EXPECT_EQ(result_type(of(bf16), 0.5), bf16);
  EXPECT_EQ(result_type(of(f16), 2), f16);
  EXPECT_EQ(result_type(of(f64), 3.0f), f64);
  EXPECT_EQ(Scalar(uint8_t{7}).kind(), Scalar::Kind::Int);
  EXPECT_EQ(Scalar(2.5f).kind(), Scalar::Kind::Float);
  EXPECT_EQ(Scalar(false).kind(), Scalar::Kind::Bool);
  testing::expect_error([] { Scalar s(uint64_t{1} << 63); }, {"Scalar", "does not fit int64"});
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
  // Scalars keep their kind: a float scalar makes an integer tensor f32, an integer one keeps it.
  EXPECT_TRUE(testing::all_close(add(i, 0.5), from_vector<double>({1.5, 2.5, 3.5}, {3}), 0, 0));
  EXPECT_EQ(add(i, 0.5).dtype(), f32);
  EXPECT_EQ(add(i, 2.0).dtype(), f32);
  EXPECT_EQ((i * 2.0).dtype(), f32);
  EXPECT_EQ(add(i, 2).dtype(), i64);
  EXPECT_EQ((i * 2).dtype(), i64);
  EXPECT_EQ((2 - i).dtype(), i64);
  EXPECT_EQ(sub(0.5, i.to(i32)).dtype(), f32);
  EXPECT_EQ(pow(i, 2).dtype(), i64);
  EXPECT_EQ(pow(i, 0.5).dtype(), f32);
  EXPECT_EQ(pow(i, -1.0).dtype(), f32);
  // An integer tensor to a negative integer power is refused, as by PyTorch (it would truncate).
  testing::expect_error([&] { pow(i, -1); }, {"pow", "negative integer powers", "-1", "i64"});
  EXPECT_EQ(add(gt(a, 0.0), 1.0).dtype(), f32);
  EXPECT_EQ(add(gt(a, 0.0), 1).dtype(), i64);
  EXPECT_EQ(add(gt(a, 0.0), true).dtype(), b8);
  EXPECT_EQ(clamp(i, 0.5).dtype(), f32);
  EXPECT_EQ(clamp(i, 0, 2).dtype(), i64);
  EXPECT_TRUE(testing::all_close(clamp(i, 1.5), from_vector<double>({1.5, 2, 3}, {3}), 0, 0));
  // Comparisons compare in the promoted dtype and give bool.
  EXPECT_TRUE(
      testing::all_close(lt(i, 1.5).to(i64), from_vector<double>({1, 0, 0}, {3}).to(i64), 0, 0));
  EXPECT_TRUE(testing::all_close(eq(i, a.to(bf16)).to(i64), zeros({3}, {.dtype = i64}), 0, 0));
  EXPECT_EQ(ge(h, a).dtype(), b8);
  // where promotes its values; a float scalar beside an integer tensor too.
  const Tensor c = gt(a, 0.0);
  EXPECT_EQ(where(c, i, a).dtype(), f32);
  const Tensor w = where(c, i, 0.5);
  EXPECT_EQ(w.dtype(), f32);
  EXPECT_TRUE(testing::all_close(w, from_vector<double>({1, 0.5, 3}, {3}), 0, 0));
  EXPECT_EQ(where(c, i, 7).dtype(), i64);
}

// An i64 scalar is not rounded through a double: 2^53 + 1 is the first integer a double cannot
// hold.
TEST(Promotion, LargeIntegerScalarsStayExact) {
  constexpr int64_t big = (int64_t{1} << 53) + 1;
  const TensorOptions i64o{.dtype = i64};
  EXPECT_EQ(full({1}, big, i64o).item<int64_t>(), big);
  EXPECT_EQ(full_like(zeros({1}, i64o), big).item<int64_t>(), big);
  EXPECT_EQ(zeros({1}, i64o).fill_(big).item<int64_t>(), big);
  const Tensor one = ones({2}, i64o);
  EXPECT_EQ(add(one, big).to_vector<int64_t>(), (std::vector<int64_t>{big + 1, big + 1}));
  EXPECT_EQ(sub(big, one).to_vector<int64_t>()[0], big - 1);
  EXPECT_EQ(mul(one, big).to_vector<int64_t>()[0], big);
  EXPECT_EQ(ones({1}, i64o).add_(big).item<int64_t>(), big + 1);
  const Tensor b = full({1}, big, i64o);
  EXPECT_TRUE(eq(b, big).item<bool>());
  EXPECT_FALSE(eq(b, big - 1).item<bool>());  // equal once both are doubles
  EXPECT_TRUE(gt(b, big - 1).item<bool>());
  EXPECT_EQ(clamp(b, std::nullopt, big - 1).item<int64_t>(), big - 1);
  EXPECT_EQ(clamp(one, big).to_vector<int64_t>()[0], big);
  EXPECT_EQ(masked_fill(one, ones({2}, {.dtype = b8}), big).to_vector<int64_t>()[1], big);
  EXPECT_EQ(where(ones({1}, {.dtype = b8}), one.narrow(0, 0, 1), big + 2).item<int64_t>(), 1);
  EXPECT_EQ(where(zeros({1}, {.dtype = b8}), one.narrow(0, 0, 1), big + 2).item<int64_t>(),
            big + 2);
  EXPECT_EQ(div(b, 2, "floor").item<int64_t>(), big / 2);
  EXPECT_EQ(remainder(b, int64_t{1} << 40).item<int64_t>(), 1);
  constexpr int64_t lowest = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(full({1}, lowest, i64o).item<int64_t>(), lowest);
  // Into a floating dtype, an integer scalar rounds once (by way of a double it would round twice:
  // 2^60 + 2^36 + 1 gives 2^60 + 2^37 once, 2^60 twice).
  constexpr int64_t odd = (int64_t{1} << 60) + (int64_t{1} << 36) + 1;
  EXPECT_EQ(add(zeros({1}), odd).item<float>(), static_cast<float>(odd));
  EXPECT_EQ(full({1}, odd).item<float>(), static_cast<float>(odd));
  EXPECT_NE(static_cast<float>(odd), static_cast<float>(static_cast<double>(odd)));
  // -0.0 is a float scalar and keeps its sign.
  EXPECT_TRUE(std::signbit(add(full({1}, -0.0), -0.0).item<float>()));
}

// A scalar beside a narrower integer tensor is read as that dtype's value, as PyTorch casts it:
// -3 beside u8 is 253, 2^32 beside i32 is 0.
TEST(Promotion, IntegerScalarsWrapToTheTensorsDtype) {
  const Tensor u = full({1}, 10, {.dtype = u8});
  EXPECT_EQ(floor_divide(u, -3).to(DType::i64).item<int64_t>(), 0);
  EXPECT_EQ(remainder(u, -3).to(DType::i64).item<int64_t>(), 10);
  EXPECT_EQ(add(u, 250).to(DType::i64).item<int64_t>(), 4);
  EXPECT_TRUE(lt(u, -3).item<bool>());  // 10 < 253
  const Tensor i = full({1}, 7, {.dtype = i32});
  testing::expect_error([&] { floor_divide(i, int64_t{1} << 32); },
                        {"div", "integer division by zero", "4294967296", "i32"});
  EXPECT_EQ(div(i, (int64_t{1} << 32) + 2, "trunc").item<int32_t>(), 3);
}

std::vector<double> values(const Tensor& t) { return t.to(f64).to_vector<double>(); }

// torch.div's documented examples: true division, and the two rounding modes on the same operands.
TEST(Division, MatchesPyTorchsDocumentedResults) {
  const Tensor x = from_vector<float>({0.3810f, 1.2774f, -0.2972f, -0.3719f, 0.4637f}, {5});
  EXPECT_TRUE(testing::all_close(
      div(x, 0.5), from_vector<float>({0.7620f, 2.5548f, -0.5944f, -0.7438f, 0.9274f}, {5}), 0,
      1e-6));
  const Tensor a = from_vector<float>(
      {-0.3711f, -1.9353f, -0.4605f, -0.2917f, 0.1815f, -1.0111f, 0.9805f, -1.5923f, 0.1062f,
       1.4581f, 0.7759f, -1.2344f, -0.1830f, -0.0313f, 1.1908f, -1.4757f},
      {4, 4});
  const Tensor b = from_vector<float>({0.8032f, 0.2930f, -0.8113f, -0.2308f}, {4});
  EXPECT_EQ(values(div(a, b, "trunc")),
            (std::vector<double>{-0., -6, 0, 1, 0, -3, -1, 6, 0, 4, -0., 5, -0., -0., -1, 6}));
  EXPECT_EQ(values(div(a, b, "floor")),
            (std::vector<double>{-1, -7, 0, 1, 0, -4, -2, 6, 0, 4, -1, 5, -1, -1, -2, 6}));
  // The sign of a zero quotient is kept, as in PyTorch's printout.
  EXPECT_TRUE(std::signbit(values(div(a, b, "trunc"))[0]));
  EXPECT_EQ(values(floor_divide(from_vector<float>({4, 3}, {2}), from_vector<float>({2, 2}, {2}))),
            (std::vector<double>{2, 1}));
  EXPECT_EQ(values(floor_divide(from_vector<float>({4, 3}, {2}), 1.4)),
            (std::vector<double>{2, 2}));
  // Python's 1.0 // 0.1 is 9.0, where floor(1.0 / 0.1) is 10.
  EXPECT_EQ(values(floor_divide(ones({1}, {.dtype = f64}), 0.1)), std::vector<double>{9});
  EXPECT_EQ(values(floor_divide(ones({1}), 0.1)), std::vector<double>{9});
}

TEST(Division, IntegersDivideTrulyUnlessARoundingModeIsGiven) {
  const Tensor n = from_vector<int64_t>({-7, 7, 6, 0}, {4});
  const Tensor q = div(n, 2);
  EXPECT_EQ(q.dtype(), f32);
  EXPECT_EQ(values(q), (std::vector<double>{-3.5, 3.5, 3, 0}));
  EXPECT_EQ((n / n.to(DType::i32).add_(10)).dtype(), f32);
  EXPECT_EQ(div(n.to(b8), true).dtype(), f32);
  EXPECT_EQ(values(div(3, n.narrow(0, 0, 3))), (std::vector<double>{-3.0f / 7, 3.0f / 7, 0.5}));
  EXPECT_EQ(div(n, 2, "trunc").dtype(), DType::i64);
  EXPECT_EQ(div(n, 2, "trunc").to_vector<int64_t>(), (std::vector<int64_t>{-3, 3, 3, 0}));
  EXPECT_EQ(div(n, -2, "floor").to_vector<int64_t>(), (std::vector<int64_t>{3, -4, -3, 0}));
  EXPECT_EQ(floor_divide(n, 2).to_vector<int64_t>(), (std::vector<int64_t>{-4, 3, 3, 0}));
  EXPECT_EQ(div(n, 2.0, "floor").dtype(), f32);
  // Division by zero: true division gives inf and NaN, as floats do.
  const std::vector<double> by_zero = values(div(n, 0));
  EXPECT_EQ(by_zero[0], -INFINITY);
  EXPECT_EQ(by_zero[1], INFINITY);
  EXPECT_TRUE(std::isnan(by_zero[3]));
  EXPECT_EQ(values(div(n, 0.0))[2], INFINITY);
  // Integer division by zero is an error, never 0 or a crash.
  testing::expect_error([&] { div(n, 0, "trunc"); }, {"div", "integer division by zero"});
  testing::expect_error([&] { floor_divide(n, n); }, {"div", "integer division by zero", "i64"});
  testing::expect_error([&] { remainder(n, 0); }, {"remainder", "integer division by zero"});
  testing::expect_error([&] { remainder(5, n); }, {"remainder", "integer division by zero"});
  testing::expect_error([&] { div(n, 2, "round"); }, {"div", "rounding_mode", "\"round\""});
  // Floats by zero: inf or NaN, as PyTorch.
  const std::vector<double> fz = values(floor_divide(from_vector<float>({1, -1, 0}, {3}), 0.0));
  EXPECT_EQ(fz[0], INFINITY);
  EXPECT_EQ(fz[1], -INFINITY);
  EXPECT_TRUE(std::isnan(fz[2]));
  EXPECT_TRUE(std::isnan(values(remainder(ones({1}), 0.0))[0]));
  // INT64_MIN // -1 wraps as the integer ops do, instead of faulting.
  constexpr int64_t lowest = std::numeric_limits<int64_t>::min();
  const Tensor m = full({1}, lowest, {.dtype = DType::i64});
  EXPECT_EQ(floor_divide(m, -1).item<int64_t>(), lowest);
  EXPECT_EQ(remainder(m, -1).item<int64_t>(), 0);
}

// torch.remainder's documented examples: the result takes the divisor's sign (Python's %).
TEST(Division, RemainderTakesTheDivisorsSign) {
  EXPECT_EQ(values(remainder(from_vector<float>({-3, -2, -1, 1, 2, 3}, {6}), 2)),
            (std::vector<double>{1, 0, 1, 1, 0, 1}));
  const Tensor r = remainder(from_vector<int64_t>({1, 2, 3, 4, 5}, {5}), -1.5);
  EXPECT_EQ(r.dtype(), f32);
  EXPECT_EQ(values(r), (std::vector<double>{-0.5, -1, 0, -0.5, -1}));
  EXPECT_EQ(remainder(from_vector<int64_t>({-7, 7, -3, 3}, {4}), -2).to_vector<int64_t>(),
            (std::vector<int64_t>{-1, -1, -1, -1}));
  EXPECT_EQ((from_vector<int64_t>({-7, 7}, {2}) % 3).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(values(remainder(5.5, from_vector<float>({2, -2}, {2}))),
            (std::vector<double>{1.5, -0.5}));
  // The rounded quotients have a zero gradient; the remainder's is (1, -floor(a / b)).
  Tensor a = from_vector<double>({5.5, -5.5}, {2}).requires_grad_(true);
  Tensor b = from_vector<double>({2, 2}, {2}).requires_grad_(true);
  sum(remainder(a, b) + div(a, b, "floor")).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{-2, 3}));
}

// Integer inputs where PyTorch takes them: logsumexp promotes to f32; the ops that need floating
// tensors (as PyTorch's mean, var and scatter_add's floating kernels here) say so with the dtype.
TEST(Promotion, IntegerInputsPromoteOrNameTheirDtype) {
  const Tensor n = from_vector<int64_t>({0, 1, 2}, {3});
  const Tensor l = logsumexp(n, {0});
  EXPECT_EQ(l.dtype(), f32);
  EXPECT_NEAR(l.item<float>(), std::log(1 + std::exp(1.0) + std::exp(2.0)), 1e-6);
  EXPECT_EQ(logsumexp(n.to(b8), {0}).dtype(), f32);
  testing::expect_error([&] { hardtanh(n); }, {"hardtanh", "floating", "i64"});
  testing::expect_error([&] { scatter_add(n, 0, n, n); }, {"scatter_add", "floating", "i64"});
  testing::expect_error([&] { mean(n); }, {"mean", "floating", "i64"});
}

// cat and stack promote as PyTorch's do (autocast's "promote" list: a bf16 activation beside an
// f32 one under a guard), with each gradient in its input's dtype.
TEST(Promotion, CatAndStackPromoteToTheWidest) {
  Tensor a = ones({2}, {.dtype = bf16}).requires_grad_(true);
  Tensor b = full({1}, 3.0, {.dtype = f32}).requires_grad_(true);
  const Tensor i = full({2}, 7, {.dtype = i64});
  const Tensor c = cat({a, b, i});
  EXPECT_EQ(c.dtype(), f32);
  EXPECT_EQ(values(c), (std::vector<double>{1, 1, 3, 7, 7}));
  EXPECT_EQ(cat({i, i.to(b8)}).dtype(), i64);
  EXPECT_EQ(stack({i, i.to(f64)}).dtype(), f64);
  EXPECT_EQ(stack({a, a.detach().to(f16)}).dtype(), f32);
  sum(mul(c.narrow(0, 0, 3), from_vector<float>({1, 2, 3}, {3}))).backward();
  EXPECT_EQ(a.grad().dtype(), bf16);
  EXPECT_EQ(values(a.grad()), (std::vector<double>{1, 2}));
  EXPECT_EQ(values(b.grad()), std::vector<double>{3});
  {
    const autocast::Guard amp(DeviceType::cpu, DType::bf16);
    const Tensor y = linear(ones({1, 2}), ones({2, 2}));  // bf16 under the guard
    EXPECT_EQ(cat({y, ones({1, 2})}).dtype(), f32);
  }
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
  // Integer scalars reach the kernels exactly, and the integer quotients agree.
  constexpr int64_t big = (int64_t{1} << 53) + 1;
  const Tensor n = from_vector<int64_t>({-7, 7, big, -big, 0}, {5});
  EXPECT_EQ(add(both(n), big).cpu().to_vector<int64_t>(), add(n, big).to_vector<int64_t>());
  EXPECT_EQ(full({1}, big, {.dtype = i64, .device = Device::cuda()}).item<int64_t>(), big);
  for (int64_t d : {2, -2, 3, -1}) {
    EXPECT_EQ(div(both(n), d, "trunc").cpu().to_vector<int64_t>(),
              div(n, d, "trunc").to_vector<int64_t>());
    EXPECT_EQ(floor_divide(both(n), d).cpu().to_vector<int64_t>(),
              floor_divide(n, d).to_vector<int64_t>());
    EXPECT_EQ(remainder(both(n), d).cpu().to_vector<int64_t>(),
              remainder(n, d).to_vector<int64_t>());
    EXPECT_TRUE(testing::all_close(div(both(n), d).cpu(), div(n, d), 0, 0));
  }
}

}  // namespace
}  // namespace sinter

// sinter/ops_math.h and ops_tensor.h beyond the op table: PyTorch's values at the edges of each
// function's domain (NaN, infinities, zeros), its dtypes (integer inputs, bool and u8 results,
// promotion of bitwise operands), the order statistics' indices and gradients, and the refusals.
#include <cmath>
#include <limits>
#include <vector>

#include "test_util.h"

namespace sinter {
namespace {

using testing::expect_error;

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::nan("");

Tensor f64(const std::vector<double>& v) {
  return from_vector<double>(v, {static_cast<int64_t>(v.size())});
}

// Equal element for element, NaN equal to NaN and the signs of zeros compared.
bool same(const Tensor& got, const std::vector<double>& want, double tol = 0.0) {
  const std::vector<double> g = got.to(DType::f64).to_vector<double>();
  if (g.size() != want.size()) return false;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) || std::isnan(want[i])) {
      if (std::isnan(g[i]) != std::isnan(want[i])) return false;
    } else if (std::isinf(want[i]) || tol == 0.0) {
      if (g[i] != want[i] || std::signbit(g[i]) != std::signbit(want[i])) return false;
    } else if (std::abs(g[i] - want[i]) > tol * (1.0 + std::abs(want[i]))) {
      return false;
    }
  }
  return true;
}

std::vector<int64_t> ints(const Tensor& t) { return t.to(DType::i64).to_vector<int64_t>(); }

TEST(OpsMath, DomainEdgesMatchPyTorch) {
  EXPECT_TRUE(same(asin(f64({2.0, -1.0})), {kNan, -M_PI / 2}));
  EXPECT_TRUE(same(acos(f64({-1.0, 1.0, 1.5})), {M_PI, 0.0, kNan}));
  EXPECT_TRUE(same(acosh(f64({0.5, 1.0})), {kNan, 0.0}));
  EXPECT_TRUE(same(atanh(f64({1.0, -1.0, 2.0, -0.0})), {kInf, -kInf, kNan, -0.0}));
  EXPECT_TRUE(same(log2(f64({0.0, -1.0, 8.0})), {-kInf, kNan, 3.0}));
  EXPECT_TRUE(same(log10(f64({0.0, 1000.0})), {-kInf, 3.0}));
  EXPECT_TRUE(same(exp2(f64({-kInf, 3.0, kInf})), {0.0, 8.0, kInf}));
  EXPECT_TRUE(same(atan(f64({kInf, -kInf})), {M_PI / 2, -M_PI / 2}));
  EXPECT_TRUE(same(sinh(f64({-0.0, 1000.0})), {-0.0, kInf}));
  EXPECT_TRUE(same(cosh(f64({-1000.0})), {kInf}));
  EXPECT_TRUE(same(tan(f64({-0.0, 1.0})), {-0.0, std::tan(1.0)}));
  // Integer inputs compute in f32; reciprocal of 0 is inf; deg2rad of an integer is f32.
  const Tensor i = from_vector<int64_t>({0, 2}, {2});
  EXPECT_EQ(tan(i).dtype(), DType::f32);
  EXPECT_EQ(log2(i.to(DType::b8)).dtype(), DType::f32);
  EXPECT_TRUE(same(reciprocal(i), {kInf, 0.5}));
  EXPECT_EQ(reciprocal(i).dtype(), DType::f32);
  EXPECT_TRUE(same(deg2rad(from_vector<int64_t>({180}, {1})), {M_PI}, 1e-7));
  EXPECT_TRUE(same(rad2deg(f64({M_PI})), {180.0}, 1e-15));
}

TEST(OpsMath, LogaddexpXlogyAndLogitMatchPyTorch) {
  // torch.logaddexp([inf, -inf, 1000, -inf, inf], [inf, -inf, 1000, 1, -inf])
  EXPECT_TRUE(same(
      logaddexp(f64({kInf, -kInf, 1000.0, -kInf, kInf}), f64({kInf, -kInf, 1000.0, 1.0, -kInf})),
      {kInf, -kInf, 1000.0 + std::log(2.0), 1.0, kInf}, 1e-15));
  EXPECT_TRUE(same(logaddexp2(f64({kInf, -kInf, 3.0, -kInf}), f64({kInf, -kInf, 3.0, 1.0})),
                   {kInf, -kInf, 4.0, 1.0}, 1e-15));
  // torch.xlogy and its gradients at a = 0: NaN b stays NaN, 0 * log(0) is 0 (gradient to b
  // 0 / 0 = NaN, as torch's), log(0) with a != 0 is -inf; the gradient to a is log(b) where
  // b > 0, a = 0 included, and 0 where a = 0 and b <= 0.
  Tensor a = f64({0.0, 0.0, 2.0, 0.0, 3.0, 0.0});
  Tensor b = f64({kNan, 0.0, 0.0, -1.0, 2.0, 0.5});
  a.requires_grad_();
  b.requires_grad_();
  const Tensor y = xlogy(a, b);
  EXPECT_TRUE(same(y, {kNan, 0.0, -kInf, 0.0, 3.0 * std::log(2.0), 0.0}, 1e-15));
  sum(y).backward();
  EXPECT_TRUE(same(a.grad(), {kNan, 0.0, -kInf, 0.0, std::log(2.0), -std::log(2.0)}, 1e-15));
  EXPECT_TRUE(same(b.grad(), {kNan, kNan, kInf, -0.0, 1.5, 0.0}, 1e-15));
  // torch.logit: infinities at 0 and 1; with eps the input is clamped and the gradient is 0
  // outside [eps, 1 - eps].
  EXPECT_TRUE(same(logit(f64({0.0, 1.0})), {-kInf, kInf}));
  Tensor p = f64({0.0, 1.0, 0.1, 0.5, 0.9});
  p.requires_grad_();
  const Tensor l = logit(p, 0.2);
  const double l2 = std::log(0.25);
  EXPECT_TRUE(same(l, {l2, -l2, l2, 0.0, -l2}, 1e-15));
  sum(l).backward();
  EXPECT_TRUE(same(p.grad(), {0.0, 0.0, 0.0, 4.0, 0.0}, 1e-15));
  // Without eps: infinite gradients at 0 and 1, NaN outside [0, 1] (torch.logit's backward); a
  // negative eps clamps nothing; eps > 1/2 clamps as torch does instead of failing.
  Tensor q = f64({0.0, 1.0, 2.0, -0.5, 0.25});
  q.requires_grad_();
  const Tensor lq = logit(q);
  EXPECT_TRUE(same(lq, {-kInf, kInf, kNan, kNan, std::log(1.0 / 3.0)}, 1e-15));
  sum(lq).backward();
  EXPECT_TRUE(same(q.grad(), {kInf, kInf, kNan, kNan, 1.0 / 0.1875}, 1e-15));
  EXPECT_TRUE(same(logit(f64({2.0}), -0.1), {kNan}));
  EXPECT_TRUE(same(logit(f64({0.1, 0.5, 0.9}), 0.6),
                   {std::log(1.5), std::log(1.5), std::log(0.4 / 0.6)}, 1e-15));
  // Integer operands convert to f32 as they are: torch.xlogy(int32 -40, uint8 12) is -99.40, not
  // a log of 12 times -40 wrapped to u8. logaddexp of integers alone is refused, as in torch.
  const Tensor neg40 = full({}, -40, {.dtype = DType::i32});
  EXPECT_TRUE(same(xlogy(neg40, from_vector<uint8_t>({12}, {1})), {-40.0 * std::log(12.0)}, 1e-6));
  EXPECT_TRUE(same(logaddexp(full({}, 0.5), full({}, int64_t{1} << 40, {.dtype = DType::i64})),
                   {std::ldexp(1.0, 40)}));
  expect_error([&] { (void)logaddexp(neg40, neg40); }, {"logaddexp", "floating operands only"});
  // bf16 computes in f32 and rounds once: torch.logaddexp(bf16 -0.3965, bf16 -1.1172) is
  // -0.00012 (each step in bf16 gave +0.002).
  const Tensor la = logaddexp(full({1}, -0.3965, {.dtype = DType::bf16}),
                              full({1}, -1.1172, {.dtype = DType::bf16}));
  EXPECT_EQ(la.dtype(), DType::bf16);
  EXPECT_LT(la.to(DType::f32).item<float>(), 0.0f);
}

TEST(OpsMath, TestsOfValuesAndNanToNumMatchPyTorch) {
  const Tensor x = f64({kNan, kInf, -kInf, 1.5, -0.0});
  EXPECT_EQ(ints(isnan(x)), (std::vector<int64_t>{1, 0, 0, 0, 0}));
  EXPECT_EQ(ints(isinf(x)), (std::vector<int64_t>{0, 1, 1, 0, 0}));
  EXPECT_EQ(ints(isposinf(x)), (std::vector<int64_t>{0, 1, 0, 0, 0}));
  EXPECT_EQ(ints(isneginf(x)), (std::vector<int64_t>{0, 0, 1, 0, 0}));
  EXPECT_EQ(ints(isfinite(x)), (std::vector<int64_t>{0, 0, 0, 1, 1}));
  EXPECT_EQ(isnan(x).dtype(), DType::b8);
  const Tensor i = from_vector<int64_t>({1, 2}, {2});
  EXPECT_EQ(ints(isnan(i)), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(ints(isinf(i.to(DType::u8))), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(ints(isfinite(i)), (std::vector<int64_t>{1, 1}));
  // torch.nan_to_num's defaults: each dtype's largest finite value.
  const std::vector<std::pair<DType, double>> tops = {{DType::f32, 3.4028234663852886e38},
                                                      {DType::f16, 65504.0},
                                                      {DType::bf16, 3.3895313892515355e38},
                                                      {DType::f64, 1.7976931348623157e308}};
  for (const auto& [dt, top] : tops) {
    EXPECT_TRUE(same(nan_to_num(x.narrow(0, 0, 4).to(dt)), {0.0, top, -top, 1.5})) << dt;
  }
  EXPECT_TRUE(same(nan_to_num(x, 1.0, 2.0, -3.0), {1.0, 2.0, -3.0, 1.5, -0.0}));
  EXPECT_TRUE(
      same(nan_to_num(x, 1.0, std::nullopt, -3.0).narrow(0, 1, 1), {1.7976931348623157e308}));
  EXPECT_EQ(ints(nan_to_num(i)), (std::vector<int64_t>{1, 2}));
}

TEST(OpsMath, LogicAndBitwiseMatchPyTorch) {
  // NaN is true; any dtypes mix; the result is bool.
  const Tensor l = logical_and(f64({kNan, 0.0, 2.0}), from_vector<int64_t>({1, 1, 0}, {3}));
  EXPECT_EQ(l.dtype(), DType::b8);
  EXPECT_EQ(ints(l), (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(ints(logical_xor(f64({kNan, 0.0}), f64({0.0, 0.0}))), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(ints(logical_or(f64({0.0, 0.0}), f64({-0.0, 3.0}))), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(ints(logical_not(f64({kNan, 0.0}))), (std::vector<int64_t>{0, 1}));
  // Promotion as torch's: i32 & i64 is i64, bool & int scalar is i64, bool & bool stays bool.
  const Tensor i32 = from_vector<int64_t>({5, -6}, {2}).to(DType::i32);
  const Tensor i64 = from_vector<int64_t>({3, 3}, {2});
  EXPECT_EQ(bitwise_and(i32, i64).dtype(), DType::i64);
  EXPECT_EQ(ints(bitwise_and(i32, i64)), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ints(bitwise_or(i32, i64)), (std::vector<int64_t>{7, -5}));
  EXPECT_EQ(ints(bitwise_xor(i32, i64)), (std::vector<int64_t>{6, -7}));
  EXPECT_EQ(bitwise_and(i32, 1).dtype(), DType::i32);
  const Tensor t = from_vector<uint8_t>({1, 0}, {2}).to(DType::b8);
  EXPECT_EQ(bitwise_and(t, 1).dtype(), DType::i64);
  EXPECT_EQ((t & t).dtype(), DType::b8);
  EXPECT_EQ(ints(t ^ from_vector<uint8_t>({1, 1}, {2}).to(DType::b8)),
            (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(ints(~t), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ((~t).dtype(), DType::b8);
  // ~ of u8 is 255 - x, of i64 -x - 1; 200 ^ 255 in u8 is 55.
  const Tensor u8 = from_vector<uint8_t>({0, 7, 200}, {3});
  EXPECT_EQ(ints(~u8), (std::vector<int64_t>{255, 248, 55}));
  EXPECT_EQ((~u8).dtype(), DType::u8);
  EXPECT_EQ(ints(bitwise_xor(u8, 255)), (std::vector<int64_t>{255, 248, 55}));
  EXPECT_EQ(ints(~from_vector<int64_t>({0, -5}, {2})), (std::vector<int64_t>{-1, 4}));
  // Floating operands are refused, as torch refuses them.
  expect_error([&] { (void)bitwise_and(f64({1.0}), f64({1.0})); },
               {"bitwise_and", "not implemented for f64"});
  expect_error([&] { (void)bitwise_or(i64, 2.5); },
               {"bitwise_or", "not implemented for i64 with the number 2.5"});
  expect_error([&] { (void)bitwise_not(f64({1.0})); }, {"bitwise_not"});
  expect_error([&] { (void)bitwise_xor(i64, f64({1.0})); }, {"bitwise_xor"});
}

TEST(OpsMath, AllAnyAndCountNonzeroMatchPyTorch) {
  const Tensor m = from_vector<int64_t>({0, 1, 2, 0, 0, 3}, {2, 3});
  EXPECT_EQ(ints(count_nonzero(m, {1})), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(count_nonzero(m).item<int64_t>(), 3);
  EXPECT_EQ(count_nonzero(m).dtype(), DType::i64);
  EXPECT_EQ(ints(all(m, {0})), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(ints(any(m, {1})), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(any(m, {1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(all(m).dtype(), DType::b8);
  EXPECT_FALSE(all(m).item<bool>());
  EXPECT_TRUE(any(m).item<bool>());
  // u8 gives u8, as torch; no elements: all true, any false; NaN is true.
  EXPECT_EQ(all(from_vector<uint8_t>({1, 2}, {2})).dtype(), DType::u8);
  EXPECT_EQ(ints(all(from_vector<uint8_t>({1, 2}, {2}))), (std::vector<int64_t>{1}));
  EXPECT_TRUE(all(zeros({0})).item<bool>());
  EXPECT_FALSE(any(zeros({0})).item<bool>());
  EXPECT_TRUE(all(f64({kNan})).item<bool>());
  EXPECT_EQ(ints(all(zeros({2, 0}), {1})), (std::vector<int64_t>{1, 1}));
  expect_error([&] { (void)all(m, {0, -2}); }, {"all", "appears more than once"});
  expect_error([&] { (void)count_nonzero(m, {2}); }, {"count_nonzero"});
}

TEST(OpsTensor, ComposedOpsMatchPyTorch) {
  const Tensor a = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  // torch.arange(1, 7).view(2, 3).repeat(2, 1, 2)
  const Tensor r = repeat(a, {2, 1, 2});
  EXPECT_EQ(r.shape(), (Shape{2, 2, 6}));
  EXPECT_EQ(ints(r.select(0, 1)), (std::vector<int64_t>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(tile(a, {2}).shape(), (Shape{2, 6}));
  EXPECT_EQ(repeat(a, {0, 1}).shape(), (Shape{0, 3}));
  expect_error([&] { (void)repeat(a, {2}); }, {"repeat", "at least one per dim"});
  expect_error([&] { (void)repeat(a, {1, -1}); }, {"repeat", "non-negative"});
  // torch.movedim(x, (0, 3), (3, 1)) of a (2, 3, 5, 4) tensor is (3, 4, 5, 2).
  EXPECT_EQ(movedim(zeros({2, 3, 5, 4}), {0, 3}, {3, 1}).shape(), (Shape{3, 4, 5, 2}));
  EXPECT_EQ(movedim(zeros({2, 3, 5}), {-1}, {0}).shape(), (Shape{5, 2, 3}));
  expect_error([&] { (void)movedim(zeros({2, 3}), {0, 0}, {0, 1}); }, {"movedim", "repeated"});
  // diff: bool by xor, n larger than the length gives an empty dim, prepend joined first.
  const Tensor b = from_vector<uint8_t>({1, 1, 0, 1}, {4}).to(DType::b8);
  EXPECT_EQ(diff(b).dtype(), DType::b8);
  EXPECT_EQ(ints(diff(b)), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(diff(f64({1.0, 4.0}), 3).shape(), (Shape{0}));
  EXPECT_TRUE(same(diff(f64({1.0, 4.0, 9.0}), 1, 0, f64({0.0})), {1.0, 3.0, 5.0}));
  // masked_select broadcasts; addmm with beta = 0 ignores the input's NaN.
  EXPECT_TRUE(
      same(masked_select(f64({1.0, 2.0, 3.0}), f64({1.0, 0.0, 1.0}).to(DType::b8)), {1.0, 3.0}));
  const Tensor m = from_vector<double>({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(same(addmm(full({2, 2}, kNan, {.dtype = DType::f64}), m, m, 0.0, 1.0),
                   {7.0, 10.0, 15.0, 22.0}));
  EXPECT_TRUE(same(addmm(f64({1.0, -1.0}), m, m, 2.0, 0.5), {5.5, 3.0, 9.5, 9.0}));
  EXPECT_EQ(trace(m).item<double>(), 5.0);
  expect_error([&] { (void)dot(f64({1.0}), from_vector<float>({1.0f}, {1})); }, {"dot", "dtype"});
  expect_error([&] { (void)dot(a.select(0, 0), a.select(0, 1)); }, {"dot", "floating"});
  expect_error([&] { (void)mv(m, from_vector<float>({1.0f, 2.0f}, {2})); }, {"mv", "f64 and f32"});
  expect_error([&] { (void)addmm(from_vector<float>({1.0f, 1.0f}, {2}), m, m); },
               {"addmm", "one dtype"});
  // nanmean of NaNs alone is NaN; nansum of them 0.
  const Tensor n = f64({kNan, kNan, 1.0, 3.0});
  EXPECT_TRUE(same(nanmean(n.view({2, 2}), {1}), {kNan, 2.0}));
  EXPECT_TRUE(same(nansum(n.view({2, 2}), {1}), {0.0, 4.0}));
  EXPECT_TRUE(same(nanmean(n.to(DType::bf16)), {2.0}));
  expect_error([&] { (void)nanmean(a); }, {"nanmean", "floating"});
}

TEST(OpsTensor, OrderStatisticsMatchPyTorch) {
  // torch.median / nanmedian / kthvalue of [[3, 1, 2, 1], [nan, 1, 5, 0], [2, 2, 2, 2]] along 1.
  const Tensor a = from_vector<double>({3, 1, 2, 1, kNan, 1, 5, 0, 2, 2, 2, 2}, {3, 4});
  const auto [mv, mi] = median(a, 1);
  EXPECT_TRUE(same(mv, {1.0, kNan, 2.0}));
  EXPECT_EQ(ints(mi), (std::vector<int64_t>{3, 0, 1}));
  const auto [nv, ni] = nanmedian(a, 1, true);
  EXPECT_EQ(nv.shape(), (Shape{3, 1}));
  EXPECT_TRUE(same(nv, {1.0, 1.0, 2.0}));
  EXPECT_EQ(ints(ni), (std::vector<int64_t>{3, 1, 1}));
  EXPECT_TRUE(same(std::get<0>(kthvalue(a, 2, 1)), {1.0, 1.0, 2.0}));
  EXPECT_TRUE(same(std::get<0>(kthvalue(a, 4, 1)), {3.0, kNan, 2.0}));
  EXPECT_TRUE(same(median(a), {kNan}));
  EXPECT_TRUE(same(nanmedian(a), {2.0}));
  EXPECT_TRUE(same(nanmedian(full({2}, kNan, {.dtype = DType::f64})), {kNan}));
  expect_error([&] { (void)kthvalue(a, 5, 1); }, {"kthvalue", "k = 5", "out of range"});
  expect_error([&] { (void)median(zeros({0}, {.dtype = DType::i64})); }, {"median", "empty i64"});
  // The median of all elements shares its gradient among the elements equal to it (torch's
  // [0, 0.5, 0, 0.5]); quantile's goes to the two elements it reads (torch's [0, 0, 0.2, 0.8]).
  Tensor x = f64({3.0, 1.0, 2.0, 1.0});
  x.requires_grad_();
  median(x).backward();
  EXPECT_TRUE(same(x.grad(), {0.0, 0.5, 0.0, 0.5}));
  Tensor z = f64({kNan, 1.0, kNan});  // a NaN median: the NaNs share it (torch's [0.5, 0, 0.5])
  z.requires_grad_();
  median(z).backward();
  EXPECT_TRUE(same(z.grad(), {0.5, 0.0, 0.5}));
  Tensor y = f64({3.0, 1.0, 2.0, 1.0});
  y.requires_grad_();
  quantile(y, 0.4).backward();
  EXPECT_TRUE(same(y.grad(), {0.0, 0.0, 0.2, 0.8}, 1e-15));
  // torch.quantile's interpolations and NaN rows; nanquantile leaves the NaNs out.
  const Tensor v = f64({1.0, 2.0, 3.0, 4.0});
  EXPECT_TRUE(same(quantile(v, 0.4, std::nullopt, false, QuantileInterpolation::Midpoint), {2.5}));
  EXPECT_TRUE(same(quantile(v, 0.5, std::nullopt, false, QuantileInterpolation::Nearest), {3.0}));
  EXPECT_TRUE(same(
      quantile(f64({1, 2, 3, 4, 5}), 0.625, std::nullopt, false, QuantileInterpolation::Nearest),
      {3.0}));
  EXPECT_TRUE(same(quantile(a, 0.4, 1), {1.2, kNan, 2.0}, 1e-15));
  const Tensor q = f64({0.25, 0.5});
  const Tensor nq = nanquantile(a, q, 1, true);
  EXPECT_EQ(nq.shape(), (Shape{2, 3, 1}));
  EXPECT_TRUE(same(nq, {1.0, 0.5, 2.0, 1.5, 1.0, 2.0}, 1e-15));
  EXPECT_EQ(quantile(a, q, std::nullopt, true).shape(), (Shape{2, 1, 1}));
  expect_error([&] { (void)quantile(a, 1.5); }, {"quantile", "[0, 1]"});
  expect_error([&] { (void)quantile(a.to(DType::bf16), 0.5); }, {"quantile", "f32 or f64"});
  expect_error([&] { (void)quantile(a, q.to(DType::f32)); }, {"quantile", "dtype"});
}

}  // namespace
}  // namespace sinter

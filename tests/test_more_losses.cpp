// The losses of ops.h's "more losses" section against PyTorch's values (torch.nn.functional in
// f64, written out), their edge cases (probabilities of 0 and 1, zero targets, beta = 0) and their
// error messages. Gradients in general are the op table's (tests/ops_loss.cpp); the ones here are
// where PyTorch's backward is written out by hand or where a kink or a clamp decides the value.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_vector<double>(v, shape);
}

TEST(MoreLosses, BinaryCrossEntropyKnownValues) {
  // Probabilities of 0 and 1 included: 0 log 0 is 0, and a wrong certainty costs 100, the clamp.
  Tensor x = f64({0.0, 0.2, 0.5, 0.9, 1.0, 0.7}, {6});
  Tensor t = f64({0.0, 1.0, 0.5, 0.0, 1.0, 0.3}, {6});
  EXPECT_TRUE(all_close(
      binary_cross_entropy(x, t, Reduction::None),
      f64({0.0, 1.6094379124341003, 0.6931471805599453, 2.302585092994046, 0.0, 0.9497834462097748},
          {6}),
      1e-15, 1e-15));
  EXPECT_NEAR(binary_cross_entropy(x, t).item<double>(), 0.9258256053663111, 1e-15);
  Tensor x2 = f64({0.1, 1.0, 0.0, 0.6}, {4}), t2 = f64({1.0, 0.0, 1.0, 0.25}, {4});
  EXPECT_TRUE(all_close(binary_cross_entropy(x2, t2, Reduction::None),
                        f64({2.3025850929940455, 100.0, 100.0, 0.814924454847114}, {4}), 1e-15,
                        1e-15));
  // weight (3) broadcast over (2, 3).
  Tensor w = f64({2.0, 0.5, 1.5}, {3});
  EXPECT_NEAR(
      binary_cross_entropy(x.reshape({2, 3}), t.reshape({2, 3}), Reduction::Sum, w).item<double>(),
      7.874285082359722, 1e-14);
}

TEST(MoreLosses, BinaryCrossEntropyGradients) {
  Tensor w = f64({2.0, 0.5, 1.5}, {3});
  Tensor x = f64({0.0, 0.2, 0.5, 0.9, 1.0, 0.7}, {2, 3}).requires_grad_();
  Tensor t = f64({0.0, 1.0, 0.5, 0.0, 1.0, 0.3}, {2, 3}).requires_grad_();
  binary_cross_entropy(x, t, Reduction::Mean, w).backward();
  // PyTorch's: w (x - t) / max(x (1 - x), 1e-12) / 6, 0 where x == t (the certain elements).
  EXPECT_TRUE(all_close(
      x.grad(),
      f64({0.0, -0.4166666666666666, 0.0, 3.333333333333334, 0.0, 0.4761904761904761}, {2, 3}),
      1e-14, 1e-14));
  // w (log(1 - x) - log(x)) / 6 where 0 < x < 1, as PyTorch's -logit(x); at x = 0 and 1, where
  // PyTorch gives +-inf, the slope of the clamped forward: w (0 - (-100)) / 6 and w (-100) / 6.
  EXPECT_TRUE(all_close(t.grad(),
                        f64({100.0 * 2 / 6, 0.11552453009332421, 0.0, -0.7324081924454066,
                             -100.0 * 0.5 / 6, -0.21182446509680086},
                            {2, 3}),
                        1e-14, 1e-14));
  // At x of 0 and 1 against the opposite target the clamp of x (1 - x) at PyTorch's 1e-12 (a
  // float) keeps the gradient finite.
  Tensor x2 = f64({0.1, 1.0, 0.0, 0.6}, {4}).requires_grad_();
  binary_cross_entropy(x2, f64({1.0, 0.0, 1.0, 0.25}, {4}), Reduction::Sum).backward();
  EXPECT_TRUE(all_close(
      x2.grad(),
      f64({-9.999999999999998, 1000000003995.8029, -1000000003995.8029, 1.4583333333333333}, {4}),
      1e-15, 1e-14));
}

TEST(MoreLosses, KlDivKnownValues) {
  Tensor in = f64({-1.2, -0.5, -2.0, -0.1, -3.0, -1.0}, {2, 3});
  Tensor t = f64({0.2, 0.5, 0.3, 0.0, 0.6, 0.4}, {2, 3});
  EXPECT_TRUE(all_close(kl_div(in, t, Reduction::None),
                        f64({-0.0818875824868201, -0.09657359027997264, 0.23880815870221916, 0.0,
                             1.4935046257404054, 0.033483707250338},
                            {2, 3}),
                        1e-15, 1e-15));
  EXPECT_NEAR(kl_div(in, t, Reduction::Sum).item<double>(), 1.5873353189261699, 1e-14);
  EXPECT_NEAR(kl_div(in, t).item<double>(), 0.26455588648769496, 1e-15);  // Mean, the default
  EXPECT_NEAR(kl_div(in, t, Reduction::BatchMean).item<double>(), 0.7936676594630849, 1e-15);
  Tensor lt = f64({-1.0, -0.3, -2.5, -0.7, -1.1, -0.2}, {2, 3});
  EXPECT_TRUE(all_close(kl_div(in, lt, Reduction::None, true),
                        f64({0.07357588823428846, 0.1481636441363436, -0.0410424993119494,
                             -0.2979511822748457, 0.6324550590263511, 0.6549846024623855},
                            {2, 3}),
                        1e-15, 1e-15));
  EXPECT_NEAR(kl_div(in, lt, Reduction::BatchMean, true).item<double>(), 0.5850927561362869, 1e-15);
  // A 0-d input is one sample.
  EXPECT_NEAR(kl_div(full({}, -0.5, {.dtype = DType::f64}), full({}, 0.5, {.dtype = DType::f64}),
                     Reduction::BatchMean)
                  .item<double>(),
              0.5 * (std::log(0.5) + 0.5), 1e-15);
}

TEST(MoreLosses, KlDivGradientsAtAZeroTarget) {
  Tensor in = f64({-1.2, -0.5, -2.0, -0.1, -3.0, -1.0}, {2, 3}).requires_grad_();
  Tensor t = f64({0.2, 0.5, 0.3, 0.0, 0.6, 0.4}, {2, 3}).requires_grad_();
  kl_div(in, t, Reduction::BatchMean).backward();
  EXPECT_TRUE(
      all_close(in.grad(), f64({-0.1, -0.25, -0.15, 0.0, -0.3, -0.2}, {2, 3}), 1e-15, 1e-15));
  // (log t + 1 - input) / 2 where t > 0, PyTorch's values; at t == 0 PyTorch gives NaN, Sinter
  // -input / 2 (t log t taken as 0 there, so that a one-hot target does not poison the step).
  EXPECT_TRUE(all_close(t.grad(),
                        f64({0.29528104378294984, 0.40342640972002736, 0.8980135978370319, 0.05,
                             1.7445871881170048, 0.5418546340629224},
                            {2, 3}),
                        1e-15, 1e-15));
}

TEST(MoreLosses, L1FamilyKnownValues) {
  Tensor a = f64({0.5, -1.0, 2.0, 0.0, 3.0, -0.2}, {2, 3});
  Tensor b = f64({0.0, 0.5, 0.5, 0.0, -0.5, -0.1}, {2, 3});
  EXPECT_TRUE(all_close(l1_loss(a, b, Reduction::None), f64({0.5, 1.5, 1.5, 0.0, 3.5, 0.1}, {2, 3}),
                        1e-15, 1e-15));
  EXPECT_NEAR(l1_loss(a, b).item<double>(), 1.1833333333333333, 1e-15);
  EXPECT_NEAR(l1_loss(a, b, Reduction::Sum).item<double>(), 7.1, 1e-14);
  const std::vector<std::tuple<std::string, Tensor, std::vector<double>>> cases = {
      {"smooth_l1", smooth_l1_loss(a, b, Reduction::None), {0.125, 1.0, 1.0, 0.0, 3.0, 0.005}},
      {"smooth_l1 beta 0.5",
       smooth_l1_loss(a, b, Reduction::None, 0.5),
       {0.25, 1.25, 1.25, 0.0, 3.25, 0.01}},
      {"smooth_l1 beta 0",
       smooth_l1_loss(a, b, Reduction::None, 0.0),
       {0.5, 1.5, 1.5, 0.0, 3.5, 0.1}},
      {"huber", huber_loss(a, b, Reduction::None), {0.125, 1.0, 1.0, 0.0, 3.0, 0.005}},
      {"huber delta 0.5",
       huber_loss(a, b, Reduction::None, 0.5),
       {0.125, 0.625, 0.625, 0.0, 1.625, 0.005}},
      {"huber delta 2",
       huber_loss(a, b, Reduction::None, 2.0),
       {0.125, 1.125, 1.125, 0.0, 5.0, 0.005}},
  };
  for (const auto& [name, got, want] : cases) {
    EXPECT_TRUE(all_close(got, f64(want, {2, 3}), 1e-15, 1e-15)) << name;
  }
  EXPECT_NEAR(smooth_l1_loss(a, b).item<double>(), 0.855, 1e-15);
  EXPECT_NEAR(huber_loss(a, b).item<double>(), 0.855, 1e-15);
}

TEST(MoreLosses, L1FamilyGradients) {
  Tensor b = f64({0.0, 0.5, 0.5, 0.0, -0.5, -0.1}, {2, 3});
  const std::vector<double> av = {0.5, -1.0, 2.0, 0.0, 3.0, -0.2};
  // At a == b (element 3) every one of them has gradient 0, PyTorch's sign(0).
  Tensor a = f64(av, {2, 3}).requires_grad_();
  l1_loss(a, b).backward();
  const double s = 1.0 / 6;
  EXPECT_TRUE(all_close(a.grad(), f64({s, -s, s, 0.0, s, -s}, {2, 3}), 1e-15, 1e-15));
  a = f64(av, {2, 3}).requires_grad_();
  smooth_l1_loss(a, b, Reduction::Sum, 2.0).backward();
  EXPECT_TRUE(all_close(a.grad(), f64({0.25, -0.75, 0.75, 0.0, 1.0, -0.05}, {2, 3}), 1e-15, 1e-15));
  a = f64(av, {2, 3}).requires_grad_();
  huber_loss(a, b, Reduction::Sum, 0.5).backward();
  EXPECT_TRUE(all_close(a.grad(), f64({0.5, -0.5, 0.5, 0.0, 0.5, -0.1}, {2, 3}), 1e-15, 1e-15));
  // beta = 0 is l1 in the gradient too: no 0 / 0 from the unused quadratic branch.
  a = f64(av, {2, 3}).requires_grad_();
  smooth_l1_loss(a, b, Reduction::Sum, 0.0).backward();
  EXPECT_TRUE(all_close(a.grad(), f64({1, -1, 1, 0, 1, -1}, {2, 3}), 0, 0));
}

TEST(MoreLosses, CosineEmbeddingKnownValues) {
  Tensor x1 = f64({1.0, 2.0, 0.5, 0.3, -1.0, 2.0, 1.0, 0.0, 0.0, -1.0, 1.0, 1.0}, {4, 3});
  Tensor x2 = f64({0.5, 1.0, -1.0, 0.6, -2.0, 4.0, 0.0, 1.0, 0.0, 2.0, 0.5, -0.5}, {4, 3});
  Tensor y = f64({1.0, -1.0, -1.0, 1.0}, {4});
  // Row 1: parallel vectors with y == -1, cos = 1 up to PyTorch's 1e-12 in each squared norm.
  EXPECT_TRUE(all_close(cosine_embedding_loss(x1, x2, y, 0.0, Reduction::None),
                        f64({0.4180856260375384, 0.9999999999998772, 0.0, 1.5443310539516661}, {4}),
                        1e-15, 1e-15));
  EXPECT_NEAR(cosine_embedding_loss(x1, x2, y).item<double>(), 0.7406041699972705, 1e-15);
  EXPECT_NEAR(cosine_embedding_loss(x1, x2, y, 0.0, Reduction::Sum).item<double>(),
              2.962416679989082, 1e-14);
  EXPECT_TRUE(all_close(cosine_embedding_loss(x1, x2, y, -0.5, Reduction::None),
                        f64({0.4180856260375384, 1.4999999999998772, 0.5, 1.5443310539516661}, {4}),
                        1e-15, 1e-15));
  // (D) inputs with a 0-d y; y of an integer dtype; a y of neither 1 nor -1 costs nothing.
  EXPECT_NEAR(
      cosine_embedding_loss(x1.select(0, 0), x2.select(0, 0), full({}, 1.0, {.dtype = DType::f64}))
          .item<double>(),
      0.4180856260375384, 1e-15);
  EXPECT_NEAR(
      cosine_embedding_loss(x1, x2, from_vector<int64_t>({1, -1, -1, 1}), 0.2).item<double>(),
      (0.4180856260375384 + 0.7999999999998773 + 1.5443310539516661) / 4, 1e-15);
  EXPECT_EQ(cosine_embedding_loss(x1, x2, f64({0, 2, 0.5, 0}, {4})).item<double>(), 0.0);
}

TEST(MoreLosses, CosineEmbeddingGradients) {
  Tensor x1 =
      f64({1.0, 2.0, 0.5, 0.3, -1.0, 2.0, 1.0, 0.0, 0.0, -1.0, 1.0, 1.0}, {4, 3}).requires_grad_();
  Tensor x2 =
      f64({0.5, 1.0, -1.0, 0.6, -2.0, 4.0, 0.0, 1.0, 0.0, 2.0, 0.5, -0.5}, {4, 3}).requires_grad_();
  cosine_embedding_loss(x1, x2, f64({1.0, -1.0, -1.0, 1.0}, {4}), -0.5).backward();
  EXPECT_TRUE(all_close(
      x1.grad(),
      f64({-0.008659440088732387, -0.017318880177464774, 0.08659440088726843, 2.895253481405291e-15,
           -9.652001420334955e-15, 1.930400284066991e-14, 0.0, 0.24999999999974998, 0.0,
           -0.09072184232529282, -0.07938161203460287, -0.011340230290644591},
          {4, 3}),
      1e-14, 1e-12));
  EXPECT_TRUE(all_close(
      x2.grad(),
      f64({-0.0404107204140742, -0.0808214408281484, -0.10102680103512085, 3.625572064791527e-16,
           -1.2073675392798577e-15, 2.4147350785597155e-15, 0.24999999999974998, 0.0, 0.0,
           0.007560153527119917, -0.08316168879816785, -0.05292107468974868},
          {4, 3}),
      1e-14, 1e-12));
}

TEST(MoreLosses, MarginRankingKnownValues) {
  Tensor x1 = f64({0.5, -1.0, 2.0, 0.0}, {4}), x2 = f64({1.0, 0.5, -1.0, 0.3}, {4});
  Tensor y = f64({1.0, -1.0, -1.0, 1.0}, {4});
  EXPECT_TRUE(all_close(margin_ranking_loss(x1, x2, y, 0.0, Reduction::None),
                        f64({0.5, 0.0, 3.0, 0.3}, {4}), 1e-15, 1e-15));
  EXPECT_NEAR(margin_ranking_loss(x1, x2, y).item<double>(), 0.95, 1e-15);
  EXPECT_NEAR(margin_ranking_loss(x1, x2, y, 0.0, Reduction::Sum).item<double>(), 3.8, 1e-15);
  EXPECT_TRUE(all_close(margin_ranking_loss(x1, x2, y, 0.5, Reduction::None),
                        f64({1.0, 0.0, 3.5, 0.8}, {4}), 1e-15, 1e-15));
  Tensor g1 = x1.clone().requires_grad_(), g2 = x2.clone().requires_grad_(),
         gy = y.clone().requires_grad_();
  margin_ranking_loss(g1, g2, gy, 0.5).backward();
  EXPECT_TRUE(all_close(g1.grad(), f64({-0.25, 0.0, 0.25, -0.25}, {4}), 1e-15, 1e-15));
  EXPECT_TRUE(all_close(g2.grad(), f64({0.25, 0.0, -0.25, 0.25}, {4}), 1e-15, 1e-15));
  EXPECT_TRUE(all_close(gy.grad(), f64({0.125, 0.0, -0.75, 0.075}, {4}), 1e-15, 1e-15));
}

TEST(MoreLosses, HalfPrecisionAndAutocast) {
  Tensor x = rand({4, 5}), t = rand({4, 5});
  const double ref =
      binary_cross_entropy(x.to(DType::bf16).to(DType::f32), t.to(DType::bf16).to(DType::f32))
          .item<float>();
  Tensor l = binary_cross_entropy(x.to(DType::bf16), t.to(DType::bf16));
  ASSERT_EQ(l.dtype(), DType::bf16);
  EXPECT_NEAR(l.item<BFloat16>(), ref, 2e-2 * std::abs(ref));
  // Under autocast the bf16 operands are computed in f32, weight included.
  const autocast::Guard amp(DeviceType::cpu, DType::bf16);
  Tensor a = binary_cross_entropy(x.to(DType::bf16), t.to(DType::bf16), Reduction::Mean, ones({5}));
  EXPECT_EQ(a.dtype(), DType::f32);
  EXPECT_NEAR(a.item<float>(), ref, 1e-6 * std::abs(ref));
}

TEST(MoreLossesErrors, ReductionsAndArguments) {
  Tensor x = zeros({2, 3});
  expect_error([&] { mse_loss(x, x, Reduction::BatchMean); },
               {"mse_loss", "BatchMean is kl_div's alone"});
  expect_error([&] { l1_loss(x, x, Reduction::BatchMean); }, {"l1_loss", "BatchMean"});
  expect_error(
      [&] {
        cross_entropy(x, from_vector<int64_t>({0, 1}), {.reduction = Reduction::BatchMean});
      },
      {"cross_entropy", "BatchMean"});
  expect_error([&] { l1_loss(x, x, static_cast<Reduction>(7)); },
               {"l1_loss", "unknown reduction 7"});
  expect_error([&] { kl_div(x, x, static_cast<Reduction>(9)); }, {"kl_div", "unknown reduction 9"});
  expect_error([&] { l1_loss(x, Tensor()); }, {"l1_loss", "undefined"});
  expect_error([&] { kl_div(x, zeros({2, 3}, {.dtype = DType::f64})); }, {"kl_div", "dtype f64"});
  expect_error(
      [&] { huber_loss(zeros({2}, {.dtype = DType::i64}), zeros({2}, {.dtype = DType::i64})); },
      {"huber_loss", "floating", "i64"});
  expect_error([&] { smooth_l1_loss(x, x, Reduction::Mean, -0.5); },
               {"smooth_l1_loss", "beta", "-0.5"});
  expect_error([&] { huber_loss(x, x, Reduction::Mean, 0.0); },
               {"huber_loss", "delta must be > 0", "0"});
}

TEST(MoreLossesErrors, UndefinedArguments) {
  const Tensor x = full({2}, 0.5), u;
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"binary_cross_entropy", [&] { binary_cross_entropy(x, u); }},
      {"binary_cross_entropy", [&] { binary_cross_entropy(u, x); }},
      {"kl_div", [&] { kl_div(u, x); }},
      {"l1_loss", [&] { l1_loss(u, x); }},
      {"smooth_l1_loss", [&] { smooth_l1_loss(x, u); }},
      {"huber_loss", [&] { huber_loss(x, u); }},
      {"cosine_embedding_loss", [&] { cosine_embedding_loss(x, x, u); }},
      {"margin_ranking_loss", [&] { margin_ranking_loss(x, u, x); }},
      {"prelu", [&] { prelu(x, u); }},
  };
  for (const auto& [op, call] : calls) expect_error(call, {op, "undefined"});
}

// Arguments on two devices.
TEST(CudaMoreLosses, ArgumentsOnAnotherDevice) {
  SINTER_REQUIRE_CUDA();
  const Tensor g = full({2, 3}, 0.5, {.device = Device::cuda()}), c = full({2, 3}, 0.5);
  expect_error([&] { binary_cross_entropy(g, c); }, {"binary_cross_entropy", "target on cpu"});
  expect_error([&] { binary_cross_entropy(g, g, Reduction::Mean, ones({3})); },
               {"binary_cross_entropy", "weight on cpu"});
  expect_error([&] { cosine_embedding_loss(g, g, zeros({2})); },
               {"cosine_embedding_loss", "y on cpu"});
  expect_error([&] { margin_ranking_loss(g, g, c); }, {"margin_ranking_loss", "y on cpu"});
  expect_error(
      [&] {
        cross_entropy(g, from_vector<int64_t>({0, 1}).cuda(), {.weight = ones({3})});
      },
      {"cross_entropy", "weight on cpu"});
  expect_error([&] { prelu(g, ones({3})); }, {"prelu", "on cpu"});
}

TEST(MoreLossesErrors, BinaryCrossEntropy) {
  Tensor p = full({2, 3}, 0.5);
  expect_error(
      [&] {
        binary_cross_entropy(p, full({3, 2}, 0.5));
      },
      {"binary_cross_entropy", "target shape [3, 2]", "[2, 3]"});
  expect_error([&] { binary_cross_entropy(p, p, Reduction::Mean, ones({2})); },
               {"binary_cross_entropy", "weight of shape [2]", "[2, 3]"});
  expect_error(
      [&] { binary_cross_entropy(p, p, Reduction::Mean, ones({3}, {.dtype = DType::f64})); },
      {"binary_cross_entropy", "weight has dtype f64"});
  // A logit passed for a probability.
  expect_error(
      [&] {
        binary_cross_entropy(from_vector<float>({0.5f, 1.5f}), full({2}, 0.5));
      },
      {"binary_cross_entropy", "in [0, 1]", "1.5"});
  expect_error(
      [&] {
        binary_cross_entropy(from_vector<float>({-0.25f, 0.5f}), full({2}, 0.5));
      },
      {"binary_cross_entropy", "in [0, 1]", "-0.25"});
}

TEST(MoreLossesErrors, MarginLosses) {
  Tensor a = zeros({4, 3});
  expect_error(
      [&] {
        cosine_embedding_loss(a, zeros({4, 2}), zeros({4}));
      },
      {"cosine_embedding_loss", "x1 of shape [4, 3]", "x2 of shape [4, 2]"});
  expect_error(
      [&] {
        cosine_embedding_loss(zeros({2, 4, 3}), zeros({2, 4, 3}), zeros({2}));
      },
      {"cosine_embedding_loss", "(N, D) or (D)", "[2, 4, 3]"});
  expect_error([&] { cosine_embedding_loss(full({}, 1.0), full({}, 1.0), full({}, 1.0)); },
               {"cosine_embedding_loss", "(N, D) or (D)", "[]"});
  expect_error([&] { cosine_embedding_loss(a, a, zeros({3})); },
               {"cosine_embedding_loss", "y of shape [3]", "expected [4]"});
  expect_error([&] { cosine_embedding_loss(zeros({3}), zeros({3}), zeros({1})); },
               {"cosine_embedding_loss", "y of shape [1]", "expected []"});
  expect_error(
      [&] {
        margin_ranking_loss(zeros({4}), zeros({4}), zeros({1, 4}));
      },
      {"margin_ranking_loss", "same number of dims", "[4], [4] and [1, 4]"});
  expect_error(
      [&] { margin_ranking_loss(zeros({4}), zeros({4}), zeros({4}, {.dtype = DType::f64})); },
      {"margin_ranking_loss", "y has dtype f64"});
}

}  // namespace
}  // namespace sinter

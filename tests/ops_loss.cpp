// Op-table rows of the losses built from other ops (see op_table.h): mse_loss, the binary cross
// entropies, kl_div, the L1 family, the margin losses and ctc_loss (with its known values and
// errors). Probabilities are sigmoid of an input, positive weights exp of one, so that every
// operand's gradient is checked.
#include <cmath>
#include <vector>

#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> loss_rows() {
  return {
      {.name = "MseLoss",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return mse_loss(x[0], x[1]); }},
      {.name = "MseLossSum",
       .shapes = {S{5}, S{5}},
       .fn = [](const Inputs& x) { return mse_loss(x[0], x[1], R::Sum); }},
      {.name = "MseLossNone",
       .shapes = {S{2, 3}, S{2, 3}},
       .fn = [](const Inputs& x) { return mse_loss(x[0], x[1], R::None); }},
      // Targets in (0, 1) from a second random input, so their gradient is checked too.
      {.name = "BceWithLogits",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return binary_cross_entropy_with_logits(x[0], sigmoid(x[1])); }},
      {.name = "BceWithLogitsSum",
       .shapes = {S{6}, S{6}},
       .fn =
           [](const Inputs& x) {
             return binary_cross_entropy_with_logits(x[0], sigmoid(x[1]), R::Sum);
           }},
      {.name = "BceWithLogitsPosWeight",
       .shapes = {S{3, 4}, S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             return binary_cross_entropy_with_logits(x[0], sigmoid(x[1]), R::None, exp(x[2]));
           }},
      {.name = "Bce",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return binary_cross_entropy(sigmoid(x[0]), sigmoid(x[1])); }},
      {.name = "BceWeightedSum",
       .shapes = {S{3, 4}, S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             return binary_cross_entropy(sigmoid(x[0]), sigmoid(x[1]), R::Sum, exp(x[2]));
           }},
      {.name = "BceWeightedNone",
       .shapes = {S{2, 3}, S{2, 3}, S{2, 1}},
       .fn =
           [](const Inputs& x) {
             return binary_cross_entropy(sigmoid(x[0]), sigmoid(x[1]), R::None, exp(x[2]));
           }},
      {.name = "KlDivBatchMean",
       .shapes = {S{3, 5}, S{3, 5}},
       .fn =
           [](const Inputs& x) {
             return kl_div(log_softmax(x[0], 1), softmax(x[1], 1), R::BatchMean);
           }},
      {.name = "KlDivMean",
       .shapes = {S{2, 3}, S{2, 3}},
       .fn = [](const Inputs& x) { return kl_div(x[0], sigmoid(x[1])); }},
      {.name = "KlDivLogTargetNone",
       .shapes = {S{2, 4}, S{2, 4}},
       .fn = [](const Inputs& x) { return kl_div(x[0], x[1], R::None, true); }},
      {.name = "L1Loss",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return l1_loss(x[0], x[1]); }},
      {.name = "L1LossNone",
       .shapes = {S{5}, S{5}},
       .fn = [](const Inputs& x) { return l1_loss(x[0], x[1], R::None); }},
      // Differences of either size against beta and delta (standard normal inputs).
      {.name = "SmoothL1Loss",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return smooth_l1_loss(x[0], x[1]); }},
      {.name = "SmoothL1LossBeta",
       .shapes = {S{2, 5}, S{2, 5}},
       .fn = [](const Inputs& x) { return smooth_l1_loss(x[0], x[1], R::Sum, 0.4); }},
      {.name = "SmoothL1LossBetaZero",
       .shapes = {S{6}, S{6}},
       .fn = [](const Inputs& x) { return smooth_l1_loss(x[0], x[1], R::None, 0.0); }},
      {.name = "HuberLoss",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return huber_loss(x[0], x[1]); }},
      {.name = "HuberLossDelta",
       .shapes = {S{2, 5}, S{2, 5}},
       .fn = [](const Inputs& x) { return huber_loss(x[0], x[1], R::None, 0.6); }},
      // A negative margin so that the y == -1 rows are mostly above it.
      {.name = "CosineEmbeddingLoss",
       .shapes = {S{4, 5}, S{4, 5}},
       .fn =
           [](const Inputs& x) {
             return cosine_embedding_loss(x[0], x[1], index_of({1, -1, -1, 1}, {4}, x[0]), -0.5);
           }},
      {.name = "CosineEmbeddingLossOneSample",
       .shapes = {S{6}, S{6}},
       .fn =
           [](const Inputs& x) {
             return cosine_embedding_loss(x[0], x[1], index_of({-1}, {}, x[0]), -0.3, R::Sum);
           }},
      // y is a random input here, so that its gradient is checked too.
      {.name = "MarginRankingLoss",
       .shapes = {S{6}, S{6}, S{6}},
       .fn = [](const Inputs& x) { return margin_ranking_loss(x[0], x[1], x[2], 0.2); }},
      {.name = "MarginRankingLossBroadcastNone",
       .shapes = {S{3, 4}, S{3, 1}, S{1, 4}},
       .fn = [](const Inputs& x) { return margin_ranking_loss(x[0], x[1], x[2], 0.0, R::None); }},
      // ctc_loss of log_softmax(x): repeated labels, shorter inputs and targets, an empty target.
      {.name = "CtcLoss",
       .shapes = {S{6, 3, 4}},
       .fn =
           [](const Inputs& x) {
             const Tensor& a = x[0];
             return ctc_loss(log_softmax(a, 2), index_of({1, 1, 2, 3, 2, 3, 2, 0, 0}, {3, 3}, a),
                             index_of({6, 5, 3}, {3}, a), index_of({3, 3, 1}, {3}, a));
           }},
      {.name = "CtcLossConcatenatedSumBlank",
       .shapes = {S{5, 2, 3}},
       .fn =
           [](const Inputs& x) {
             const Tensor& a = x[0];
             return ctc_loss(log_softmax(a, 2), index_of({0, 1, 0}, {3}, a),
                             index_of({5, 4}, {2}, a), index_of({2, 1}, {2}, a),
                             {.blank = 2, .reduction = R::Sum});
           }},
      {.name = "CtcLossZeroInfinityNone",
       .shapes = {S{4, 2, 3}},
       .fn =
           [](const Inputs& x) {
             const Tensor& a = x[0];
             return ctc_loss(log_softmax(a, 2), index_of({1, 1, 1, 2, 0, 0}, {2, 3}, a),
                             index_of({4, 4}, {2}, a), index_of({3, 2}, {2}, a),
                             {.reduction = R::None, .zero_infinity = true});
           }},
  };
}

namespace {

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_vector<double>(v, shape);
}
Tensor i64(const std::vector<int64_t>& v, const Shape& shape) {
  return from_vector<int64_t>(v, shape);
}

// torch.nn.functional.ctc_loss of log_softmax(ramp({6, 3, 4}), 2), torch 2.15: repeated labels
// (1, 1), a shorter input, a one-label target; the mean's gradient.
TEST(CtcLoss, MatchesPyTorch) {
  const Tensor x = ramp({6, 3, 4}).requires_grad_();
  const Tensor lp = log_softmax(x, 2);
  const Tensor targets = i64({1, 1, 2, 3, 2, 3, 2, 0, 0}, {3, 3});
  const Tensor il = i64({6, 5, 3}, {3}), tl = i64({3, 3, 1}, {3});
  EXPECT_TRUE(all_close(ctc_loss(lp, targets, il, tl, {.reduction = Reduction::None}),
                        f64({5.494870362264286, 2.866549027169028, 2.526927131064379}, {3}), 1e-12,
                        1e-12));
  const Tensor loss = ctc_loss(lp, targets, il, tl);
  EXPECT_NEAR(loss.item<double>(), 1.77135564251405, 1e-12);
  loss.backward();
  EXPECT_TRUE(all_close(x.grad(),
                        f64({0.0011765065323271994,
                             -0.0740223498362534,
                             0.03773795235609493,
                             0.03510789094783127,
                             -0.019492438475340927,
                             0.027096248772833044,
                             0.016921800345463867,
                             -0.024525610642955983,
                             -0.0296767699727614,
                             0.05199453770805406,
                             -0.1741070111766428,
                             0.15178924344135014,
                             -0.029795073255400116,
                             0.0023062426034997094,
                             0.016872011252405266,
                             0.010616819399495143,
                             0.005254526560859154,
                             0.014456459605609793,
                             0.013611862515877267,
                             -0.033322848682346216,
                             -0.047979118135538304,
                             0.10985645770442332,
                             -0.0974421378148204,
                             0.035564798245935406,
                             -0.03755870720403782,
                             -0.03946384005623829,
                             0.025467354693868693,
                             0.05155519256640743,
                             0.007926160441717138,
                             0.0353617584587945,
                             -0.0512660378636756,
                             0.007978118963163963,
                             -0.1439558079225363,
                             0.0661915266964836,
                             -0.021360779956789252,
                             0.09912506118284196,
                             -0.007107789279857743,
                             -0.045551507646106396,
                             0.01918176879944475,
                             0.033477528126519385,
                             -0.001964440583806179,
                             0.026685709367934386,
                             -0.02025652392731397,
                             -0.004464744856814234,
                             0.0,
                             0.0,
                             0.0,
                             0.0,
                             0.0023846996079103532,
                             -0.0008793666512271713,
                             -0.012312755029753878,
                             0.010807422073070696,
                             0.00581422620151767,
                             0.014498130324444308,
                             0.029625812291852058,
                             -0.04993816881781403,
                             0.0,
                             0.0,
                             0.0,
                             0.0,
                             -0.005101864013615258,
                             0.016301611421308808,
                             -0.06404496330358847,
                             0.05284521589589492,
                             0.0,
                             0.0,
                             0.0,
                             0.0,
                             0.0,
                             0.0,
                             0.0,
                             0.0},
                            {6, 3, 4}),
                        1e-12, 1e-12));
  // The targets concatenated, another blank, summed.
  EXPECT_NEAR(ctc_loss(lp.detach(), i64({0, 0, 2, 3, 2, 3, 2}, {7}), il, tl,
                       {.blank = 1, .reduction = Reduction::Sum})
                  .item<double>(),
              11.877115225436128, 1e-12);
  // Unbatched: (T, C), targets (S), 0-d lengths.
  EXPECT_NEAR(ctc_loss(lp.detach().select(1, 0), i64({2, 1}, {2}), i64({5}, {}), i64({2}, {}),
                       {.reduction = Reduction::None})
                  .item<double>(),
              3.522850890227553, 1e-12);
}

// Three repeated labels need five steps: four give no alignment, an infinite loss; zero_infinity
// makes it 0 and its gradient 0. An empty target's loss is its all-blank path's.
TEST(CtcLoss, InfeasibleIsInfiniteOrZero) {
  const Tensor x = ramp({6, 3, 4}).requires_grad_();
  const Tensor lp = log_softmax(x, 2);
  const Tensor targets = i64({1, 1, 1, 2, 3, 0, 0, 0, 0}, {3, 3});
  const Tensor il = i64({4, 6, 2}, {3}), tl = i64({3, 2, 0}, {3});
  const Tensor none = ctc_loss(lp, targets, il, tl, {.reduction = Reduction::None});
  const std::vector<double> v = none.to_vector<double>();
  EXPECT_TRUE(std::isinf(v[0]) && v[0] > 0);
  EXPECT_NEAR(v[1], 4.0239717176284575, 1e-12);
  EXPECT_NEAR(v[2], 3.571192741774655, 1e-12);
  EXPECT_TRUE(std::isinf(ctc_loss(lp, targets, il, tl).item<double>()));
  const Tensor zi = ctc_loss(lp, targets, il, tl, {.zero_infinity = true});
  EXPECT_NEAR(zi.item<double>(), 1.8610595335296278, 1e-12);
  zi.backward();
  EXPECT_EQ(sum(abs(x.grad().select(1, 0))).item<double>(), 0.0);
  EXPECT_GT(sum(abs(x.grad().select(1, 1))).item<double>(), 0.0);
  // An input of length 0 fits only an empty target.
  const Tensor empty_in =
      ctc_loss(lp.detach().narrow(1, 0, 2), i64({1, 0}, {2, 1}), i64({0, 0}, {2}), i64({0, 1}, {2}),
               {.reduction = Reduction::None});
  EXPECT_EQ(empty_in.to_vector<double>()[0], 0.0);
  EXPECT_TRUE(std::isinf(empty_in.to_vector<double>()[1]));
}

// Half types keep their dtype (the recursion runs in f32).
TEST(CtcLoss, KeepsTheDtype) {
  const Tensor lp = log_softmax(ramp({6, 3, 4}), 2);
  const Tensor targets = i64({1, 1, 2, 3, 2, 3, 2, 0, 0}, {3, 3});
  const Tensor il = i64({6, 5, 3}, {3}), tl = i64({3, 3, 1}, {3});
  const Tensor y = ctc_loss(lp.to(DType::bf16), targets, il, tl);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_NEAR(y.to(DType::f64).item<double>(), 1.77135564251405, 2e-2);
}

TEST(CtcLossErrors, NameTheOpAndTheValues) {
  const Tensor lp = zeros({5, 2, 4});
  const Tensor targets = i64({1, 2, 3, 1}, {2, 2});
  const Tensor il = i64({5, 5}, {2}), tl = i64({2, 2}, {2});
  expect_error([&] { ctc_loss(zeros({5}), targets, il, tl); },
               {"ctc_loss", "3-D (T, N, C) or 2-D (T, C)", "[5]"});
  expect_error([&] { ctc_loss(lp.to(DType::i64), targets, il, tl); }, {"ctc_loss", "i64"});
  expect_error([&] { ctc_loss(lp, targets, il, tl, {.blank = 4}); },
               {"ctc_loss", "blank 4", "4 classes"});
  expect_error([&] { ctc_loss(lp, targets.to(DType::f32), il, tl); },
               {"ctc_loss", "targets must be i64 or i32", "f32"});
  expect_error(
      [&] {
        ctc_loss(lp, i64({1}, {1, 1, 1}), il, tl);
      },
      {"ctc_loss", "2-D (N, S) or 1-D", "[1, 1, 1]"});
  expect_error(
      [&] {
        ctc_loss(lp, i64({1, 2, 3}, {3, 1}), il, tl);
      },
      {"ctc_loss", "[3, 1]", "N = 2 rows"});
  expect_error([&] { ctc_loss(lp, targets, i64({5}, {1}), tl); },
               {"ctc_loss", "input_lengths", "N = 2", "[1]"});
  expect_error([&] { ctc_loss(lp, targets, il, tl.to(DType::f32)); },
               {"ctc_loss", "target_lengths must be i64 or i32", "f32"});
  expect_error(
      [&] {
        ctc_loss(lp, targets, i64({6, 5}, {2}), tl);
      },
      {"ctc_loss", "input length 6 of sample 0", "T = 5"});
  expect_error(
      [&] {
        ctc_loss(lp, targets, il, i64({2, -1}, {2}));
      },
      {"ctc_loss", "target length -1 of sample 1", "negative"});
  expect_error(
      [&] {
        ctc_loss(lp, targets, il, i64({3, 2}, {2}));
      },
      {"ctc_loss", "target length 3 of sample 0", "S = 2"});
  expect_error(
      [&] {
        ctc_loss(lp, i64({1, 2, 3}, {3}), il, tl);
      },
      {"ctc_loss", "1-D targets hold 3 labels", "sum to 4"});
  expect_error(
      [&] {
        ctc_loss(lp, i64({1, 4, 3, 1}, {2, 2}), il, tl);
      },
      {"ctc_loss", "target 4 of sample 0", "4 classes"});
  expect_error([&] { ctc_loss(lp, targets, il, tl, {.reduction = Reduction::BatchMean}); },
               {"ctc_loss", "BatchMean"});
  expect_error(
      [&] {
        ctc_loss(zeros({5, 4}), i64({1}, {1}), il, tl);
      },
      {"ctc_loss", "input_lengths", "0-d", "[2]"});
}

}  // namespace

}  // namespace sinter::testing

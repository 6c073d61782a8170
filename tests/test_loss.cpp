// softmax, log_softmax and the losses against values worked out by hand (the formulas are written
// out in each test), their edge cases (ignore_index, label smoothing, all targets ignored, logits
// of 1e4) and their error messages; the Cuda suites compare the CUDA kernels with the CPU on shapes
// that take every launch path (warp rows, block rows, strided rows).
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;

constexpr double kInf = std::numeric_limits<double>::infinity();

using ::sinter::testing::expect_error;

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_vector<double>(v, shape);
}

Tensor labels(const std::vector<int64_t>& v) { return from_vector<int64_t>(v); }

// cross_entropy(logits, target, o), to call in expect_error.
auto cross_entropy_call(Tensor logits, Tensor target, CrossEntropyOptions o = {}) {
  return [=] { cross_entropy(logits, target, o); };
}

CrossEntropyOptions opts(Reduction r, int64_t ignore_index = -100, double smoothing = 0.0) {
  return {.reduction = r, .ignore_index = ignore_index, .label_smoothing = smoothing};
}

// -log softmax(row)[t] for one row, written out.
double nll_of(const std::vector<double>& row, size_t t) {
  double s = 0;
  for (double v : row) s += std::exp(v);
  return std::log(s) - row[t];
}

TEST(Loss, SoftmaxKnownValues) {
  Tensor x = f64({1, 2, 3, 0, 0, 0}, {2, 3});
  const double s = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  Tensor want = f64(
      {std::exp(1.0) / s, std::exp(2.0) / s, std::exp(3.0) / s, 1. / 3, 1. / 3, 1. / 3}, {2, 3});
  EXPECT_TRUE(all_close(softmax(x, 1), want, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(log_softmax(x, -1), log(want), 1e-12, 1e-12));
  // Over dim 0: columns of two.
  const double a = 1 / (1 + std::exp(-1.0));
  EXPECT_TRUE(all_close(softmax(f64({1, 0}, {2, 1}), 0), f64({a, 1 - a}, {2, 1}), 1e-12, 1e-12));
}

TEST(Loss, SoftmaxSumsToOneOverAMiddleDim) {
  Tensor x = randn({2, 5, 3});
  Tensor s = sum(softmax(x, 1), {1});
  EXPECT_TRUE(all_close(s, ones({2, 3}), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(exp(log_softmax(x, 1)), softmax(x, 1), 1e-6, 1e-6));
}

TEST(Loss, SoftmaxOfAScalarIsOne) {
  EXPECT_DOUBLE_EQ(softmax(full({}, 3.0), 0).item<float>(), 1.0f);
  EXPECT_DOUBLE_EQ(log_softmax(full({}, 3.0), -1).item<float>(), 0.0f);
}

TEST(Loss, SoftmaxLargeLogitsStable) {
  Tensor x = from_vector<float>({1e4f, 1e4f - 1, -1e4f}, {1, 3});
  const double a = 1 / (1 + std::exp(-1.0));
  EXPECT_TRUE(all_close(softmax(x, 1), f64({a, 1 - a, 0}, {1, 3}).to(DType::f32), 1e-6, 1e-5));
  // log_softmax(-1e4) = -2e4 - log(1 + e^-1), finite.
  const double l = -std::log(1 + std::exp(-1.0));
  EXPECT_TRUE(
      all_close(log_softmax(x, 1), f64({l, l - 1, l - 2e4}, {1, 3}).to(DType::f32), 1e-3, 1e-6));
}

TEST(Loss, SoftmaxNegativeInfinityMasks) {
  Tensor x = f64({0, -kInf, 0}, {3}).requires_grad_();
  Tensor y = softmax(x, 0);
  EXPECT_TRUE(all_close(y, f64({0.5, 0, 0.5}, {3}), 1e-12, 1e-12));
  sum(y * f64({1, 2, 3}, {3})).backward();
  // dx = y * (w - sum(w * y)) with sum(w * y) = 2.
  EXPECT_TRUE(all_close(x.grad(), f64({-0.5, 0, 0.5}, {3}), 1e-12, 1e-12));
}

TEST(Loss, SoftmaxBackwardKnownValues) {
  const std::vector<double> xv = {0.5, -1, 2}, w = {1, -2, 0.5};
  Tensor x = f64(xv, {1, 3}).requires_grad_();
  Tensor lx = f64(xv, {1, 3}).requires_grad_();
  sum(softmax(x, 1) * f64(w, {1, 3})).backward();
  sum(log_softmax(lx, 1) * f64(w, {1, 3})).backward();
  double s = 0;
  for (double v : xv) s += std::exp(v);
  std::vector<double> y(3), dx(3), ldx(3);
  double dot = 0, wsum = 0;
  for (int k = 0; k < 3; ++k) {
    y[k] = std::exp(xv[k]) / s;
    dot += w[k] * y[k];
    wsum += w[k];
  }
  for (int k = 0; k < 3; ++k) {
    dx[k] = y[k] * (w[k] - dot);
    ldx[k] = w[k] - y[k] * wsum;
  }
  EXPECT_TRUE(all_close(x.grad(), f64(dx, {1, 3}), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(lx.grad(), f64(ldx, {1, 3}), 1e-12, 1e-12));
}

TEST(Loss, SoftmaxHalfPrecisionOnCpu) {
  Tensor x = randn({4, 9});
  for (DType dt : {DType::bf16, DType::f16}) {
    Tensor y = softmax(x.to(dt), 1);
    ASSERT_EQ(y.dtype(), dt);
    EXPECT_TRUE(all_close(y.to(DType::f32), softmax(x.to(dt).to(DType::f32), 1), 1e-2, 1e-2));
  }
}

TEST(Loss, CrossEntropyKnownValues) {
  Tensor x = f64({1, 2, 3, 1, 1, 1}, {2, 3});
  Tensor t = labels({2, 0});
  const double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3;
  const double l1 = std::log(3.0);
  EXPECT_NEAR(cross_entropy(x, t).item<double>(), (l0 + l1) / 2, 1e-12);
  EXPECT_NEAR(cross_entropy(x, t, opts(Reduction::Sum)).item<double>(), l0 + l1, 1e-12);
  EXPECT_TRUE(
      all_close(cross_entropy(x, t, opts(Reduction::None)), f64({l0, l1}, {2}), 1e-12, 1e-12));
}

TEST(Loss, CrossEntropyGradientIsSoftmaxMinusOneHot) {
  Tensor x = randn({3, 4}, {.dtype = DType::f64}).requires_grad_();
  cross_entropy(x, labels({3, 0, 1})).backward();
  Tensor onehot = f64({0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0}, {3, 4});
  EXPECT_TRUE(all_close(x.grad(), (softmax(x.detach(), 1) - onehot) / 3.0, 1e-12, 1e-12));
}

TEST(Loss, CrossEntropyIgnoreIndexExcludedFromMean) {
  Tensor x = randn({3, 4}, {.dtype = DType::f64}).requires_grad_();
  Tensor t = labels({1, -100, 3});
  Tensor per = cross_entropy(x, t, opts(Reduction::None)).detach();
  std::vector<double> p = per.to_vector<double>();
  EXPECT_EQ(p[1], 0.0);
  // The mean divides by the 2 kept samples, not by 3.
  Tensor loss = cross_entropy(x, t);
  EXPECT_NEAR(loss.item<double>(), (p[0] + p[2]) / 2, 1e-12);
  loss.backward();
  EXPECT_TRUE(all_close(x.grad().select(0, 1), zeros({4}, {.dtype = DType::f64}), 0, 0));
  // A class index as ignore_index.
  EXPECT_NEAR(cross_entropy(x.detach(), labels({1, 0, 3}), opts(Reduction::Mean, 1)).item<double>(),
              (cross_entropy(x.detach(), labels({1, 0, 3}), opts(Reduction::None))
                   .narrow(0, 1, 2)
                   .sum()
                   .item<double>()) /
                  2,
              1e-12);
}

TEST(Loss, CrossEntropyLabelSmoothingFormula) {
  // loss = (1 - eps) * nll + eps / C * sum_c -log softmax(x)[c], averaged over kept samples.
  const std::vector<std::vector<double>> rows = {
      {0.3, -1.2, 2.0, 0.1}, {1.5, 0.5, -0.5, 0.0}, {-2.0, 0.7, 0.2, 1.1}};
  const std::vector<int64_t> t = {2, -100, 0};
  const double eps = 0.25;
  std::vector<double> flat, want;
  for (size_t r = 0; r < rows.size(); ++r) {
    flat.insert(flat.end(), rows[r].begin(), rows[r].end());
    if (t[r] < 0) {
      want.push_back(0);
      continue;
    }
    double smooth = 0;
    for (size_t c = 0; c < 4; ++c) smooth += nll_of(rows[r], c);
    want.push_back((1 - eps) * nll_of(rows[r], static_cast<size_t>(t[r])) + eps / 4 * smooth);
  }
  Tensor x = f64(flat, {3, 4});
  EXPECT_TRUE(all_close(cross_entropy(x, labels(t), opts(Reduction::None, -100, eps)),
                        f64(want, {3}), 1e-12, 1e-12));
  EXPECT_NEAR(cross_entropy(x, labels(t), opts(Reduction::Mean, -100, eps)).item<double>(),
              (want[0] + want[2]) / 2, 1e-12);
  // The gradient of a kept row: softmax - (1 - eps) onehot - eps / C.
  Tensor xg = x.clone().requires_grad_();
  cross_entropy(xg, labels(t), opts(Reduction::Sum, -100, eps)).backward();
  Tensor p = softmax(x, 1).select(0, 2);
  Tensor target_row = f64({1 - eps + eps / 4, eps / 4, eps / 4, eps / 4}, {4});
  EXPECT_TRUE(all_close(xg.grad().select(0, 2), p - target_row, 1e-12, 1e-12));
}

// Per Note [all ignored] in src/ops/softmax.cpp, PyTorch returns NaN for the mean over zero kept
// targets (0 / 0), and so does Sinter; the gradient is zero, not NaN.
TEST(Loss, CrossEntropyAllIgnoredMeanIsNan) {
  Tensor x = randn({2, 3}).requires_grad_();
  Tensor t = labels({-100, -100});
  Tensor loss = cross_entropy(x, t);
  EXPECT_TRUE(std::isnan(loss.item<float>()));
  loss.backward();
  EXPECT_TRUE(all_close(x.grad(), zeros({2, 3}), 0, 0));
  EXPECT_EQ(cross_entropy(x, t, opts(Reduction::Sum)).item<float>(), 0.0f);
  EXPECT_TRUE(all_close(cross_entropy(x, t, opts(Reduction::None)), zeros({2}), 0, 0));
  EXPECT_TRUE(std::isnan(nll_loss(log_softmax(x, 1), t).item<float>()));
}

TEST(Loss, CrossEntropyLargeLogitsStable) {
  Tensor x = from_vector<float>({1e4f, 0, -1e4f, 1e4f, 0, -1e4f}, {2, 3}).requires_grad_();
  Tensor t = labels({0, 1});
  // Row 0: lse = 1e4, so the loss is 0; row 1: 1e4 - 0.
  EXPECT_TRUE(all_close(cross_entropy(x, t, opts(Reduction::None)),
                        from_vector<float>({0, 1e4f}, {2}), 1e-3, 1e-6));
  // With eps = 0.1: lse - 0.9 x[t] - 0.1 / 3 * sum(x) = 1e4 - 9e3 = 1e3 and 1e4.
  Tensor smoothed = cross_entropy(x, t, opts(Reduction::None, -100, 0.1));
  EXPECT_TRUE(all_close(smoothed, from_vector<float>({1e3f, 1e4f}, {2}), 1e-3, 1e-6));
  cross_entropy(x, t).backward();
  // (softmax - onehot) / 2 = rows (0, 0, 0) and (0.5, -0.5, 0).
  EXPECT_TRUE(
      all_close(x.grad(), from_vector<float>({0, 0, 0, 0.5f, -0.5f, 0}, {2, 3}), 1e-6, 1e-6));
}

TEST(Loss, CrossEntropySpatialMatchesFlattened) {
  // (N, C, d) against the same samples laid out as (N * d, C).
  Tensor x = randn({2, 4, 3}, {.dtype = DType::f64});
  Tensor t = from_vector<int64_t>({0, 3, -100, 2, 1, 1}, {2, 3});
  Tensor flat_x = x.permute({0, 2, 1}).reshape({6, 4});
  Tensor flat_t = t.reshape({6});
  for (Reduction r : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
    const CrossEntropyOptions o = opts(r, -100, 0.1);
    Tensor a = cross_entropy(x, t, o);
    Tensor b = cross_entropy(flat_x, flat_t, o);
    EXPECT_TRUE(all_close(a.reshape({-1}), b.reshape({-1}), 1e-12, 1e-12));
  }
}

TEST(Loss, CrossEntropyStridedLogits) {
  Tensor xt = randn({5, 3}, {.dtype = DType::f64});
  Tensor t = labels({4, 0, 2});
  Tensor a = xt.t();
  EXPECT_NEAR(cross_entropy(a, t).item<double>(), cross_entropy(a.contiguous(), t).item<double>(),
              1e-12);
}

TEST(Loss, CrossEntropyHalfPrecisionOnCpu) {
  Tensor x = randn({6, 10});
  Tensor t = labels({0, 9, 3, -100, 5, 5});
  const double ref = cross_entropy(x.to(DType::bf16).to(DType::f32), t).item<float>();
  Tensor l = cross_entropy(x.to(DType::bf16), t);
  ASSERT_EQ(l.dtype(), DType::bf16);
  EXPECT_NEAR(l.item<BFloat16>(), ref, 2e-2 * std::abs(ref) + 1e-2);
}

TEST(Loss, NllLossMatchesCrossEntropy) {
  Tensor x = randn({2, 5, 3}, {.dtype = DType::f64});
  Tensor t = from_vector<int64_t>({4, -100, 0, 1, 2, 3}, {2, 3});
  for (Reduction r : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
    EXPECT_TRUE(all_close(nll_loss(log_softmax(x, 1), t, opts(r)), cross_entropy(x, t, opts(r)),
                          1e-12, 1e-12));
  }
  // nll_loss picks -input[t] without normalizing it.
  Tensor lp = f64({-1, -2, -3, -4, -5, -6}, {2, 3});
  EXPECT_NEAR(nll_loss(lp, labels({2, 0})).item<double>(), (3 + 4) / 2.0, 1e-12);
}

// PyTorch's values for class weights (Note [class weights] in src/ops/softmax.cpp): the mean
// divides by the kept targets' weights, and label smoothing weighs each class's term.
TEST(Loss, CrossEntropyClassWeightsKnownValues) {
  Tensor x = f64({0.3, -1.2, 2.0, 0.1, 1.5, 0.5, -0.5, 0.0, -2.0, 0.7, 0.2, 1.1}, {3, 4});
  Tensor t = labels({2, -100, 0});
  Tensor w = f64({0.5, 2.0, 1.5, 3.0}, {4});
  auto weighted = [&](Reduction r, double eps) {
    return CrossEntropyOptions{
        .reduction = r, .ignore_index = -100, .label_smoothing = eps, .weight = w};
  };
  EXPECT_TRUE(all_close(cross_entropy(x, t, weighted(Reduction::None, 0.0)),
                        f64({0.47551286444543905, 0.0, 1.9261651250182261}, {3}), 1e-15, 1e-15));
  EXPECT_NEAR(cross_entropy(x, t, weighted(Reduction::Mean, 0.0)).item<double>(),
              1.2008389947318325, 1e-15);
  EXPECT_NEAR(cross_entropy(x, t, weighted(Reduction::Sum, 0.0)).item<double>(), 2.401677989463665,
              1e-15);
  EXPECT_TRUE(all_close(cross_entropy(x, t, weighted(Reduction::None, 0.2)),
                        f64({1.1388632932602871, 0.0, 1.9892476875273393}, {3}), 1e-15, 1e-15));
  EXPECT_NEAR(cross_entropy(x, t, weighted(Reduction::Mean, 0.2)).item<double>(),
              1.5640554903938133, 1e-15);
  EXPECT_NEAR(cross_entropy(x, t, weighted(Reduction::Sum, 0.2)).item<double>(), 3.1281109807876266,
              1e-15);
  EXPECT_NEAR(cross_entropy(x, labels({2, 1, 0}), weighted(Reduction::Mean, 0.2)).item<double>(),
              1.5669558602929357, 1e-15);
  Tensor xg = x.clone().requires_grad_();
  cross_entropy(xg, t, weighted(Reduction::Mean, 0.2)).backward();
  EXPECT_TRUE(all_close(xg.grad(),
                        f64({0.09061598813519549, -0.026991713053530254, -0.07304850570197396,
                             0.009424230620308822, 0, 0, 0, 0, -0.20453867235171488,
                             0.06846241958029559, 0.03435108949919146, 0.10172516327222778},
                            {3, 4}),
                        1e-15, 1e-14));
  // (N, C, d): the spatial targets' weights.
  Tensor xs = f64({0.1, 0.2, 0.5, -0.3, 1.0, 0.0, -1.0, 2.0, 0.3, 0.3, 0.0, 0.7}, {2, 3, 2});
  Tensor ts = from_vector<int64_t>({0, 2, 1, -100}, {2, 2});
  const CrossEntropyOptions spatial{.weight = f64({1.0, 2.0, 0.5}, {3})};
  EXPECT_NEAR(cross_entropy(xs, ts, spatial).item<double>(), 1.0120701875568434, 1e-15);
  CrossEntropyOptions smoothed = spatial;
  smoothed.label_smoothing = 0.1;
  EXPECT_NEAR(cross_entropy(xs, ts, smoothed).item<double>(), 1.0294246314181363, 1e-15);
}

TEST(Loss, NllLossClassWeightsKnownValues) {
  Tensor lp =
      log_softmax(f64({0.3, -1.2, 2.0, 0.1, 1.5, 0.5, -0.5, 0.0, -2.0, 0.7, 0.2, 1.1}, {3, 4}), 1);
  Tensor t = labels({2, 1, 0});
  Tensor w = f64({0.5, 2.0, 1.5, 3.0}, {4});
  EXPECT_TRUE(all_close(nll_loss(lp, t, {.reduction = Reduction::None, .weight = w}),
                        f64({0.47551286444543905, 3.092012779881145, 1.9261651250182261}, {3}),
                        1e-15, 1e-15));
  EXPECT_NEAR(nll_loss(lp, t, {.weight = w}).item<double>(), 1.3734226923362025, 1e-15);
  EXPECT_NEAR(nll_loss(lp, t, {.reduction = Reduction::Sum, .weight = w}).item<double>(),
              5.49369076934481, 1e-14);
  // The same mean as cross_entropy's with a weight: -w[t] / sum(w[t]) at each target.
  EXPECT_NEAR(cross_entropy(lp, t, {.weight = w}).item<double>(), 1.3734226923362025, 1e-15);
  Tensor lg = lp.clone().requires_grad_();
  nll_loss(lg, t, {.weight = w}).backward();
  EXPECT_TRUE(all_close(lg.grad(), f64({0, 0, -0.375, 0, 0, -0.5, 0, 0, -0.125, 0, 0, 0}, {3, 4}),
                        1e-15, 1e-15));
}

// A weight of ones takes the path of ops (Note [class weights]) to the fused kernel's results.
TEST(Loss, CrossEntropyWeightOfOnesMatchesTheFusedKernel) {
  Tensor x = randn({2, 5, 3}, {.dtype = DType::f64});
  Tensor t = from_vector<int64_t>({4, -100, 0, 1, 2, 3}, {2, 3});
  for (Reduction r : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
    for (double eps : {0.0, 0.3}) {
      Tensor a = x.clone().requires_grad_(), b = x.clone().requires_grad_();
      CrossEntropyOptions o = opts(r, -100, eps);
      Tensor fused = cross_entropy(a, t, o);
      o.weight = ones({5}, {.dtype = DType::f64});
      Tensor weighted = cross_entropy(b, t, o);
      EXPECT_TRUE(all_close(weighted, fused, 1e-12, 1e-12)) << static_cast<int>(r) << " " << eps;
      sum(fused * fused).backward();
      sum(weighted * weighted).backward();
      EXPECT_TRUE(all_close(b.grad(), a.grad(), 1e-12, 1e-12)) << static_cast<int>(r) << " " << eps;
    }
  }
}

// Per Note [all ignored], with weights too: NaN for the mean, a zero gradient.
TEST(Loss, CrossEntropyClassWeightsAllIgnored) {
  Tensor x = randn({2, 3}, {.dtype = DType::f64}).requires_grad_();
  const CrossEntropyOptions o{.label_smoothing = 0.1, .weight = f64({1, 2, 3}, {3})};
  Tensor loss = cross_entropy(x, labels({-100, -100}), o);
  EXPECT_TRUE(std::isnan(loss.item<double>()));
  loss.backward();
  EXPECT_TRUE(all_close(x.grad(), zeros({2, 3}, {.dtype = DType::f64}), 0, 0));
}

TEST(Loss, CrossEntropyClassWeightsHalfPrecisionAndAutocast) {
  Tensor x = randn({6, 5});
  Tensor t = labels({0, 4, 3, -100, 1, 1});
  Tensor w = rand({5}) + 0.5;
  const double ref = cross_entropy(x.to(DType::bf16).to(DType::f32), t,
                                   {.weight = w.to(DType::bf16).to(DType::f32)})
                         .item<float>();
  Tensor l = cross_entropy(x.to(DType::bf16), t, {.weight = w.to(DType::bf16)});
  ASSERT_EQ(l.dtype(), DType::bf16);
  EXPECT_NEAR(l.item<BFloat16>(), ref, 2e-2 * std::abs(ref) + 1e-2);
  // Under autocast bf16 logits with an f32 weight: both run in f32.
  const autocast::Guard amp(DeviceType::cpu, DType::bf16);
  Tensor a = cross_entropy(x.to(DType::bf16), t, {.weight = w.to(DType::bf16)});
  EXPECT_EQ(a.dtype(), DType::f32);
  EXPECT_NEAR(a.item<float>(), ref, 1e-5 * std::abs(ref));
  EXPECT_EQ(nll_loss(x.to(DType::bf16), t, {.weight = w}).dtype(), DType::f32);
}

TEST(Loss, MseLossKnownValues) {
  Tensor a = f64({1, 2, 3}, {3}), b = f64({1, 0, 0}, {3});
  EXPECT_NEAR(mse_loss(a, b).item<double>(), 13.0 / 3, 1e-12);
  EXPECT_NEAR(mse_loss(a, b, Reduction::Sum).item<double>(), 13.0, 1e-12);
  EXPECT_TRUE(all_close(mse_loss(a, b, Reduction::None), f64({0, 4, 9}, {3}), 0, 0));
  Tensor ag = a.clone().requires_grad_();
  mse_loss(ag, b).backward();
  EXPECT_TRUE(all_close(ag.grad(), f64({0, 4. / 3, 2}, {3}), 1e-12, 1e-12));  // 2 (a - b) / 3
}

double bce_ref(double x, double t, double pw) {
  const double s = 1 / (1 + std::exp(-x));
  return -(pw * t * std::log(s) + (1 - t) * std::log(1 - s));
}

TEST(Loss, BceWithLogitsKnownValues) {
  const std::vector<double> x = {0, 2, -1, 0.5}, t = {0.5, 1, 0, 0.25};
  std::vector<double> want;
  for (size_t i = 0; i < x.size(); ++i) want.push_back(bce_ref(x[i], t[i], 1));
  Tensor xs = f64(x, {4}), ts = f64(t, {4});
  EXPECT_TRUE(all_close(binary_cross_entropy_with_logits(xs, ts, Reduction::None), f64(want, {4}),
                        1e-12, 1e-12));
  EXPECT_NEAR(binary_cross_entropy_with_logits(xs, ts).item<double>(),
              (want[0] + want[1] + want[2] + want[3]) / 4, 1e-12);
  // d/dx = sigmoid(x) - t, also at x == 0, where the kinks of |x| and max(x, 0) cancel.
  Tensor xg = xs.clone().requires_grad_();
  binary_cross_entropy_with_logits(xg, ts, Reduction::Sum).backward();
  EXPECT_TRUE(all_close(xg.grad(), sigmoid(xs) - ts, 1e-12, 1e-12));
}

TEST(Loss, BceWithLogitsPosWeight) {
  // pos_weight over the last dim scales the positive term: -(pw t log s + (1 - t) log(1 - s)).
  const std::vector<double> x = {0.3, -0.7, 1.2, 2.0, -0.1, 0.0}, t = {1, 0.5, 0, 0.9, 0.2, 1};
  const std::vector<double> pw = {2.0, 0.5, 3.0};
  std::vector<double> want;
  for (size_t i = 0; i < x.size(); ++i) want.push_back(bce_ref(x[i], t[i], pw[i % 3]));
  Tensor got = binary_cross_entropy_with_logits(f64(x, {2, 3}), f64(t, {2, 3}), Reduction::None,
                                                f64(pw, {3}));
  EXPECT_TRUE(all_close(got, f64(want, {2, 3}), 1e-12, 1e-12));
  // d/dx = (1 - t) + l (sigmoid(x) - 1) with l = (pw - 1) t + 1, also at x == 0 (element 5).
  Tensor xg = f64(x, {2, 3}).requires_grad_();
  binary_cross_entropy_with_logits(xg, f64(t, {2, 3}), Reduction::Sum, f64(pw, {3})).backward();
  std::vector<double> dx;
  for (size_t i = 0; i < x.size(); ++i) {
    const double l = (pw[i % 3] - 1) * t[i] + 1;
    dx.push_back((1 - t[i]) + l * (1 / (1 + std::exp(-x[i])) - 1));
  }
  EXPECT_TRUE(all_close(xg.grad(), f64(dx, {2, 3}), 1e-12, 1e-12));
}

TEST(Loss, BceWithLogitsLargeLogitsStable) {
  Tensor x = from_vector<float>({100, -100, 100, -1e4f}, {4}).requires_grad_();
  Tensor t = from_vector<float>({0, 1, 1, 0}, {4});
  Tensor l = binary_cross_entropy_with_logits(x, t, Reduction::None);
  EXPECT_TRUE(all_close(l, from_vector<float>({100, 100, 0, 0}, {4}), 1e-5, 1e-6));
  sum(l).backward();
  EXPECT_TRUE(all_close(x.grad(), from_vector<float>({1, -1, 0, 0}, {4}), 1e-6, 1e-6));
}

TEST(LossErrors, TargetOutOfRange) {
  Tensor x = zeros({3, 5});
  expect_error(cross_entropy_call(x, labels({0, 5, 1})),
               {"cross_entropy", "target 5", "out of range [0, 5)", "ignore_index (-100)"});
  expect_error(cross_entropy_call(x, labels({0, -1, 1})),
               {"cross_entropy", "target -1", "out of range [0, 5)"});
  // -100 is only skipped while it is the ignore_index.
  expect_error(cross_entropy_call(x, labels({-100, 1, 1}), opts(Reduction::Mean, 3)),
               {"target -100", "ignore_index (3)"});
  expect_error([&] { nll_loss(x, labels({7, 0, 0})); }, {"nll_loss", "target 7", "[0, 5)"});
}

TEST(LossErrors, WrongTargetDtypeOrShape) {
  Tensor x = zeros({4, 5});
  expect_error(cross_entropy_call(x, zeros({4}, {.dtype = DType::i32})),
               {"cross_entropy", "i64", "i32"});
  expect_error(cross_entropy_call(x, zeros({4})), {"cross_entropy", "i64", "f32"});
  expect_error(cross_entropy_call(x, labels({0, 1, 2})),
               {"cross_entropy", "target shape [3]", "[4, 5]", "expected [4]"});
  expect_error(cross_entropy_call(zeros({2, 3, 4}), zeros({2, 3}, {.dtype = DType::i64})),
               {"cross_entropy", "target shape [2, 3]", "expected [2, 4]"});
  expect_error(cross_entropy_call(zeros({5}), labels({1})), {"cross_entropy", "(N, C)", "[5]"});
  expect_error(
      [&] {
        nll_loss(x, zeros({4, 1}, {.dtype = DType::i64}));
      },
      {"nll_loss", "target shape [4, 1]"});
  expect_error(cross_entropy_call(zeros({2, 3}, {.dtype = DType::i64}), labels({0, 1})),
               {"cross_entropy", "floating"});
  expect_error(cross_entropy_call(zeros({2, 0}), labels({0, 1})), {"cross_entropy", "no classes"});
}

TEST(LossErrors, BadOptionsAndArguments) {
  expect_error(cross_entropy_call(zeros({2, 3}), labels({0, 1}), opts(Reduction::Mean, -100, 1.5)),
               {"cross_entropy", "label_smoothing", "1.5"});
  expect_error([] { softmax(zeros({2, 3}), 2); }, {"softmax", "dim 2 out of range"});
  expect_error(
      [] {
        log_softmax(zeros({2, 3}, {.dtype = DType::i64}), 1);
      },
      {"log_softmax", "floating"});
  expect_error([] { mse_loss(zeros({3}), zeros({3}, {.dtype = DType::f64})); },
               {"mse_loss", "dtype f64"});
  expect_error(
      [] {
        binary_cross_entropy_with_logits(zeros({2, 4}), zeros({2, 3}));
      },
      {"binary_cross_entropy_with_logits", "target shape [2, 3]", "[2, 4]"});
  expect_error(
      [] {
        binary_cross_entropy_with_logits(zeros({2, 4}), zeros({2, 4}), Reduction::Mean, ones({3}));
      },
      {"binary_cross_entropy_with_logits", "pos_weight of shape [3]"});
}

TEST(LossErrors, BadClassWeights) {
  Tensor x = zeros({2, 3});
  expect_error(cross_entropy_call(x, labels({0, 1}), {.weight = ones({4})}),
               {"cross_entropy", "weight of shape [4]", "3 classes", "expected [3]"});
  expect_error(cross_entropy_call(x, labels({0, 1}), {.weight = ones({3}, {.dtype = DType::f64})}),
               {"cross_entropy", "weight has dtype f64", "the input has f32"});
  expect_error(
      [&] {
        nll_loss(x, labels({0, 1}), {.weight = ones({1, 3})});
      },
      {"nll_loss", "weight of shape [1, 3]"});
  expect_error(cross_entropy_call(x, labels({0, 3}), {.weight = ones({3})}),
               {"cross_entropy", "target 3", "out of range [0, 3)"});
}

// --- CUDA against the CPU reference, in the same storage dtype ---

const testing::DTypeTolerances tol_of{.f64 = 1e-10, .f32 = 2e-5, .f16 = 3e-3, .bf16 = 2e-2};

TEST(CudaLoss, SoftmaxMatchesCpuOnEveryRowKind) {
  SINTER_REQUIRE_CUDA();
  struct Case {
    Shape shape;
    int64_t dim;
  };
  // Warp rows, block rows (512 and 1024 threads), strided rows, a tiny dim.
  const std::vector<Case> cases = {{{64, 1000}, -1}, {{6, 3000}, 1},    {{3, 20000}, -1},
                                   {{5, 7, 9}, 1},   {{2, 300, 33}, 1}, {{40, 1}, 1}};
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    for (const Case& c : cases) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(dtype_name(dt) + std::string(" ") + shape_str(c.shape) +
                     (log ? " log_softmax" : " softmax"));
        Tensor x = (randn(c.shape) * 3.0).to(dt);
        Tensor w = randn(c.shape).to(dt);
        Tensor xc = x.clone().requires_grad_(), xg = x.cuda().requires_grad_();
        testing::poison_cuda_cache();
        Tensor yc = log ? log_softmax(xc, c.dim) : softmax(xc, c.dim);
        Tensor yg = log ? log_softmax(xg, c.dim) : softmax(xg, c.dim);
        EXPECT_TRUE(all_close(yg.cpu(), yc, tol_of(dt), tol_of(dt))) << "forward";
        sum(yc * w).backward();
        sum(yg * w.cuda()).backward();
        EXPECT_TRUE(all_close(xg.grad().cpu(), xc.grad(), tol_of(dt), tol_of(dt))) << "backward";
      }
    }
  }
}

TEST(CudaLoss, CrossEntropyMatchesCpuOnEveryRowKind) {
  SINTER_REQUIRE_CUDA();
  // (N, C) with warp rows and block rows, and (N, C, d1, d2) with strided rows.
  const std::vector<Shape> shapes = {{64, 1000}, {8, 5000}, {4, 10, 7, 5}};
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    for (const Shape& s : shapes) {
      Shape ts = s;
      ts.erase(ts.begin() + 1);
      Tensor kept = ge(rand(ts), 0.2);
      Tensor t = where(kept, randint(0, s[1], ts), -100.0);
      Tensor x = (randn(s) * 2.0).to(dt);
      for (Reduction r : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
        for (double eps : {0.0, 0.1}) {
          SCOPED_TRACE(dtype_name(dt) + std::string(" ") + shape_str(s) + " reduction " +
                       std::to_string(static_cast<int>(r)) + " eps " + std::to_string(eps));
          const CrossEntropyOptions o = opts(r, -100, eps);
          Tensor xc = x.clone().requires_grad_(), xg = x.cuda().requires_grad_();
          testing::poison_cuda_cache();
          Tensor lc = cross_entropy(xc, t, o);
          Tensor lg = cross_entropy(xg, t.cuda(), o);
          EXPECT_TRUE(all_close(lg.cpu(), lc, tol_of(dt), tol_of(dt))) << "forward";
          Tensor w = randn(lc.shape()).to(dt);
          sum(lc * w).backward();
          sum(lg * w.cuda()).backward();
          EXPECT_TRUE(all_close(xg.grad().cpu(), xc.grad(), tol_of(dt), tol_of(dt))) << "backward";
        }
      }
    }
  }
}

TEST(CudaLoss, CrossEntropyEdgeCases) {
  SINTER_REQUIRE_CUDA();
  const Device dev = Device::cuda();
  Tensor big = from_vector<float>({1e4f, 0, -1e4f, 1e4f, 0, -1e4f}, {2, 3}).to(dev);
  EXPECT_TRUE(all_close(cross_entropy(big, labels({0, 1}).to(dev), opts(Reduction::None)).cpu(),
                        from_vector<float>({0, 1e4f}, {2}), 1e-3, 1e-6));
  Tensor x = randn({2, 3}, {.device = dev}).requires_grad_();
  Tensor loss = cross_entropy(x, labels({-100, -100}).to(dev));
  EXPECT_TRUE(std::isnan(loss.item<float>()));
  loss.backward();
  EXPECT_TRUE(all_close(x.grad().cpu(), zeros({2, 3}), 0, 0));
  expect_error(
      [&] {
        cross_entropy(x, labels({0, 3}).to(dev));
      },
      {"cross_entropy", "target 3", "out of range [0, 3)"});
  expect_error([&] { cross_entropy(x, labels({0, 1})); }, {"cross_entropy", "target on cpu"});
}

}  // namespace
}  // namespace sinter

// GradScaler: unscaled gradients equal the unscaled loss's, steps with inf or NaN are skipped and
// back the scale off, the scale grows after the interval, clipping after unscale_, gradient
// accumulation, the state dict round trip, the errors, and the fused unscale kernel on CUDA.
#include <cmath>
#include <limits>

#include "internal/dispatch.h"
#include "kern/optim.h"
#include "test_util.h"

namespace sinter {
namespace {

using optim::GradScaler;
using optim::GradScalerOptions;
using testing::expect_error;

// A parameter w and a loss sum(w * x) whose gradient is x.
struct Problem {
  Tensor w = from_vector<double>({1, -2, 3}, {3}).to(DType::f32).requires_grad_(true);
  optim::SGD opt{{w}, {.lr = 0.5}};
  Tensor loss(const std::vector<double>& x) const {
    return sum(mul(w, from_vector<double>(x, {3}).to(DType::f32)));
  }
};

TEST(GradScaler, ScalesTheLossAndUnscalesTheGradients) {
  Problem p;
  GradScaler scaler({.init_scale = 1024.0});
  const Tensor loss = p.loss({0.5, 1, -4});
  const Tensor scaled = scaler.scale(loss);
  EXPECT_FLOAT_EQ(scaled.item<float>(), 1024.0f * loss.item<float>());
  scaled.backward();
  EXPECT_TRUE(testing::all_close(p.w.grad(), from_vector<double>({512, 1024, -4096}, {3}), 0, 0));
  scaler.unscale_(p.opt);
  EXPECT_TRUE(testing::all_close(p.w.grad(), from_vector<double>({0.5, 1, -4}, {3}), 0, 0));
  EXPECT_TRUE(scaler.step(p.opt));
  EXPECT_TRUE(testing::all_close(p.w.detach(), from_vector<double>({0.75, -2.5, 5}, {3}), 0, 0));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1024.0);
  EXPECT_EQ(scaler.growth_tracker(), 1);
}

TEST(GradScaler, InfOrNanSkipsTheStepAndBacksOff) {
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {inf, -inf, std::nan("")}) {
    SCOPED_TRACE(bad);
    Problem p;
    GradScaler scaler({.init_scale = 256.0, .backoff_factor = 0.25});
    // A clean step first: the tracker counts it, then the bad one resets it.
    scaler.scale(p.loss({1, 1, 1})).backward();
    EXPECT_TRUE(scaler.step(p.opt));
    scaler.update();
    EXPECT_EQ(scaler.growth_tracker(), 1);
    const Tensor before = p.w.detach().clone();
    p.opt.zero_grad();
    scaler.scale(p.loss({1, bad, 1})).backward();
    EXPECT_FALSE(scaler.step(p.opt));
    EXPECT_TRUE(testing::all_close(p.w.detach(), before, 0, 0)) << "the step must be skipped";
    scaler.update();
    EXPECT_EQ(scaler.get_scale(), 64.0);
    EXPECT_EQ(scaler.growth_tracker(), 0);
  }
}

TEST(GradScaler, GrowsAfterTheIntervalOfFiniteSteps) {
  Problem p;
  GradScaler scaler({.init_scale = 8.0, .growth_factor = 4.0, .growth_interval = 3});
  const double expected[] = {8, 8, 32, 32, 32, 128};
  for (double want : expected) {
    p.opt.zero_grad();
    scaler.scale(p.loss({0.25, 0.5, 1})).backward();
    EXPECT_TRUE(scaler.step(p.opt));
    scaler.update();
    EXPECT_EQ(scaler.get_scale(), want);
  }
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, ClippingAfterUnscaleSeesTheTrueGradients) {
  Problem p, q;
  GradScaler scaler({.init_scale = 4096.0});
  scaler.scale(p.loss({3, 0, 4})).backward();
  scaler.unscale_(p.opt);
  const double norm = optim::clip_grad_norm_({p.w}, 1.0);
  EXPECT_NEAR(norm, 5.0, 1e-5);
  EXPECT_TRUE(scaler.step(p.opt));  // no second unscale
  scaler.update();
  q.loss({3, 0, 4}).backward();
  optim::clip_grad_norm_({q.w}, 1.0);
  q.opt.step();
  EXPECT_TRUE(testing::all_close(p.w.detach(), q.w.detach(), 1e-6, 1e-6));
}

TEST(GradScaler, AccumulatesScaledMicroBatches) {
  Problem p;
  GradScaler scaler({.init_scale = 512.0});
  scaler.scale(p.loss({1, 2, 3})).backward();
  scaler.scale(p.loss({-3, 0.5, 1})).backward();
  EXPECT_TRUE(scaler.step(p.opt));
  scaler.update();
  // w - lr * (x1 + x2) = (1, -2, 3) - 0.5 * (-2, 2.5, 4)
  EXPECT_TRUE(testing::all_close(p.w.detach(), from_vector<double>({2, -3.25, 1}, {3}), 0, 0));
}

TEST(GradScaler, StateRoundTripAndDisabled) {
  Problem p;
  GradScaler scaler({.init_scale = 128.0, .growth_interval = 5});
  for (int i = 0; i < 3; ++i) {
    p.opt.zero_grad();
    scaler.scale(p.loss({1, 1, 1})).backward();
    scaler.step(p.opt);
    scaler.update();
  }
  const StateDict state = scaler.state_dict();
  GradScaler restored;
  restored.load_state_dict(state);
  EXPECT_EQ(restored.get_scale(), 128.0);
  EXPECT_EQ(restored.growth_tracker(), 3);
  // Two more finite steps reach the interval of 5 on both.
  for (GradScaler* s : {&scaler, &restored}) {
    for (int i = 0; i < 2; ++i) {
      p.opt.zero_grad();
      s->scale(p.loss({1, 1, 1})).backward();
      s->step(p.opt);
      s->update();
    }
    EXPECT_EQ(s->get_scale(), 256.0);
  }
  StateDict bad = state;
  bad["growth_factor"] = full({}, 0.5, {.dtype = DType::f64});
  expect_error([&] { restored.load_state_dict(bad); }, {"GradScaler", "growth_factor", "0.5"});
  EXPECT_EQ(restored.get_scale(), 256.0);  // unchanged by the refused dict
  StateDict missing = state;
  missing.erase("scale");
  expect_error([&] { restored.load_state_dict(missing); }, {"GradScaler", "missing", "scale"});

  GradScaler off({.enabled = false});
  const Tensor loss = p.loss({1, 1, 1});
  EXPECT_TRUE(off.scale(loss).is_same(loss));
  EXPECT_EQ(off.get_scale(), 1.0);
}

TEST(GradScaler, Errors) {
  Problem p;
  GradScaler scaler;
  expect_error([&] { scaler.unscale_(p.opt); }, {"GradScaler::unscale_", "scale(loss) first"});
  scaler.scale(p.loss({1, 1, 1})).backward();
  expect_error([&] { scaler.update(); }, {"GradScaler::update", "step(opt)"});
  scaler.unscale_(p.opt);
  expect_error([&] { scaler.unscale_(p.opt); }, {"GradScaler::unscale_", "already"});
  scaler.step(p.opt);
  expect_error([&] { scaler.step(p.opt); }, {"GradScaler::step", "already"});
  scaler.update();
  expect_error([] { GradScaler s({.growth_factor = 1.0}); }, {"GradScaler", "growth_factor"});
  expect_error([] { GradScaler s({.backoff_factor = 1.0}); }, {"GradScaler", "backoff_factor"});
  expect_error([] { GradScaler s({.growth_interval = 0}); }, {"GradScaler", "growth_interval"});
  expect_error([] { GradScaler s({.init_scale = -1}); }, {"GradScaler", "init_scale"});
}

// The fused unscale kernel on each device: values times inv_scale rounded once to the dtype, the
// flag set by a non-finite element anywhere in a list of tensors with ragged sizes.
void unscale_on(Device dev, DType dtype, bool with_inf) {
  SCOPED_TRACE(dev.str() + " " + dtype_name(dtype));
  const TensorOptions opts{.dtype = dtype, .device = dev};
  std::vector<Tensor> grads = {randn({4099}, opts), randn({7}, opts), randn({3, 1000}, opts)};
  if (with_inf) {
    NoGradGuard ng;
    grads[2].narrow(1, 999, 1).fill_(std::numeric_limits<double>::infinity());
  }
  std::vector<Tensor> want;
  for (const Tensor& g : grads) want.push_back(mul(g, 0.125));
  const Tensor inv = full({}, 0.125, {.dtype = DType::f32, .device = dev});
  const Tensor found = zeros({}, {.dtype = DType::f32, .device = dev});
  std::vector<kern::UnscaleTensor> list;
  for (const Tensor& g : grads) list.push_back({g.data_ptr(), g.numel()});
  SINTER_DISPATCH(dev, unscale_grads, dtype, list.data(), static_cast<int64_t>(list.size()),
                  kern::UnscaleHyper{static_cast<const float*>(inv.data_ptr()),
                                     static_cast<float*>(found.data_ptr())});
  for (size_t k = 0; k < grads.size(); ++k) {
    EXPECT_TRUE(testing::all_close(grads[k].cpu(), want[k].cpu(), 0, 0)) << "tensor " << k;
  }
  EXPECT_EQ(found.item<float>(), with_inf ? 1.0f : 0.0f);
}

TEST(GradScaler, UnscaleKernelOnTheCpu) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    unscale_on(Device::cpu(), dtype, false);
    unscale_on(Device::cpu(), dtype, true);
  }
}

TEST(GradScaler, CudaUnscaleKernel) {
  SINTER_REQUIRE_CUDA();
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    unscale_on(Device::cuda(), dtype, false);
    unscale_on(Device::cuda(), dtype, true);
  }
}

TEST(GradScaler, CudaSkipsWithoutReadingTheFlagBeforeStep) {
  SINTER_REQUIRE_CUDA();
  Tensor w = randn({1000}, {.device = Device::cuda()}).requires_grad_(true);
  optim::SGD opt({w}, {.lr = 0.1});
  GradScaler scaler;
  Tensor x = randn({1000}, {.device = Device::cuda()});
  scaler.scale(sum(mul(w, x))).backward();
  {
    const cuda::NoSyncGuard no_sync;  // unscale_ never waits for the device
    scaler.unscale_(opt);
  }
  EXPECT_TRUE(testing::all_close(w.grad().cpu(), x.cpu(), 1e-6, 1e-6));
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 65536.0);
}

// f16 autocast with loss scaling trains the cnn workload's model: 30 steps on one batch, the loss
// falls and every step after the first few runs (the scale settles).
TEST(GradScaler, CudaF16AutocastTrainsTheCnn) {
  SINTER_REQUIRE_CUDA();
  manual_seed(4);
  nn::Sequential cnn = nn::models::cnn();
  cnn.to(Device::cuda());
  optim::Adam opt(cnn.parameters(), {.lr = 1e-3});
  GradScaler scaler;
  const Tensor x = randn({32, 1, 28, 28}, {.device = Device::cuda()});
  const Tensor y = randint(0, 10, {32}, {.dtype = DType::i64}).to(Device::cuda());
  std::vector<float> losses;
  int skipped = 0;
  for (int i = 0; i < 30; ++i) {
    opt.zero_grad();
    Tensor loss;
    {
      const autocast::Guard amp(DeviceType::cuda, DType::f16);
      loss = cross_entropy(cnn.forward(x), y);
    }
    EXPECT_EQ(loss.dtype(), DType::f32);
    scaler.scale(loss).backward();
    skipped += scaler.step(opt) ? 0 : 1;
    scaler.update();
    losses.push_back(loss.item<float>());
  }
  EXPECT_LT(losses.back(), 0.5f * losses.front());
  EXPECT_LE(skipped, 5);
  for (const Tensor& p : cnn.parameters()) EXPECT_EQ(p.dtype(), DType::f32);
}

}  // namespace
}  // namespace sinter

// sinter::optim: SGD, Adam and AdamW against their update formulas worked out here in plain
// arithmetic, parameter groups, state dicts, schedulers against their closed forms, gradient
// clipping, and the errors for bad hyperparameters.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "sinter/optim.h"
#include "test_util.h"

namespace sinter {
namespace {

using optim::Adagrad;
using optim::Adam;
using optim::AdamW;
using optim::RMSprop;
using optim::SGD;

std::vector<double> vec(const Tensor& t) { return t.to_vector<double>(); }

Tensor leaf(const std::vector<double>& v) {
  return from_vector<double>(v, {static_cast<int64_t>(v.size())}).requires_grad_(true);
}

void set_grad(const Tensor& p, const std::vector<double>& g) {
  p.set_grad(from_vector<double>(g, {static_cast<int64_t>(g.size())}));
}

// Gradients for steps 1, 2, 3, ... of a 3-element parameter: varied signs and sizes, shrinking so
// that AMSGrad's running maximum differs from the running average.
std::vector<double> grad_at(int t) {
  const double s = 1.0 / (t * t);
  return {0.5 * s, -1.5 * s, 2.0 * s + 0.1 * t};
}

const std::vector<double> kStart = {1.0, -2.0, 0.5};

void expect_near(const std::vector<double>& actual, const std::vector<double>& expected,
                 double tol = 1e-12) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tol * (1.0 + std::abs(expected[i]))) << "element " << i;
  }
}

using ::sinter::testing::expect_error;

// --- SGD ---

// Runs `steps` steps of an Opt on kStart with grad_at(t) and returns the parameter.
template <class Opt, class Options>
std::vector<double> run(const Options& o, int steps) {
  Tensor p = leaf(kStart);
  Opt opt({p}, o);
  for (int t = 1; t <= steps; ++t) {
    set_grad(p, grad_at(t));
    opt.step();
  }
  return vec(p);
}

// SGD's, which the tests call with their options as a braced list.
std::vector<double> run_sgd(const optim::SGDOptions& o, int steps) { return run<SGD>(o, steps); }

// The same by hand, element by element.
std::vector<double> sgd_by_hand(double lr, double momentum, double dampening, double wd,
                                bool nesterov, bool maximize, int steps) {
  std::vector<double> p = kStart, buf(3, 0.0);
  for (int t = 1; t <= steps; ++t) {
    const std::vector<double> g = grad_at(t);
    for (int i = 0; i < 3; ++i) {
      double d = maximize ? -g[i] : g[i];
      d = d + wd * p[i];
      if (momentum != 0.0) {
        buf[i] = t == 1 ? d : momentum * buf[i] + (1.0 - dampening) * d;
        d = nesterov ? d + momentum * buf[i] : buf[i];
      }
      p[i] = p[i] - lr * d;
    }
  }
  return p;
}

TEST(OptimSGD, PlainStepsMatchFormula) {
  expect_near(run_sgd({.lr = 0.1}, 3), sgd_by_hand(0.1, 0, 0, 0, false, false, 3));
  // One step by hand, fully spelled out: p - lr * g.
  expect_near(run_sgd({.lr = 0.1}, 1), {1.0 - 0.1 * 0.5, -2.0 + 0.1 * 1.5, 0.5 - 0.1 * 2.1});
}

TEST(OptimSGD, MomentumFirstStepTakesGradientUndampened) {
  // Step 1 with dampening 0.5: the buffer is the gradient itself, so the step is lr * g.
  expect_near(run_sgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.5}, 1),
              {1.0 - 0.1 * 0.5, -2.0 + 0.1 * 1.5, 0.5 - 0.1 * 2.1});
}

TEST(OptimSGD, MomentumDampeningWeightDecayMatchFormula) {
  expect_near(run_sgd({.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, 4),
              sgd_by_hand(0.05, 0.9, 0.1, 0.01, false, false, 4));
}

TEST(OptimSGD, NesterovMatchesFormula) {
  expect_near(run_sgd({.lr = 0.05, .momentum = 0.8, .weight_decay = 0.02, .nesterov = true}, 4),
              sgd_by_hand(0.05, 0.8, 0.0, 0.02, true, false, 4));
  // Nesterov differs from plain momentum, so the test above can tell them apart.
  EXPECT_NE(run_sgd({.lr = 0.05, .momentum = 0.8, .nesterov = true}, 2)[0],
            run_sgd({.lr = 0.05, .momentum = 0.8}, 2)[0]);
}

TEST(OptimSGD, MaximizeAscends) {
  expect_near(run_sgd({.lr = 0.1, .momentum = 0.5, .weight_decay = 0.1, .maximize = true}, 3),
              sgd_by_hand(0.1, 0.5, 0.0, 0.1, false, true, 3));
}

TEST(OptimSGD, SkipsParametersWithoutGradient) {
  Tensor a = leaf({1.0, 2.0}), b = leaf({3.0});
  SGD opt({a, b}, {.lr = 0.5, .momentum = 0.9});
  set_grad(a, {1.0, -1.0});
  opt.step();
  expect_near(vec(a), {0.5, 2.5});
  EXPECT_EQ(vec(b), (std::vector<double>{3.0}));
  EXPECT_TRUE(opt.state(0, 1).empty());
  EXPECT_EQ(opt.state(0, 0).count("momentum_buffer"), 1u);
}

TEST(OptimSGD, ZeroGradDropsOrZeroes) {
  Tensor a = leaf({1.0, 2.0});
  SGD opt({a}, {.lr = 0.1});
  set_grad(a, {1.0, 2.0});
  opt.zero_grad(false);
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(vec(a.grad()), (std::vector<double>{0.0, 0.0}));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(OptimSGD, StepsAfterBackward) {
  // The ordinary loop: a loss, backward, step. loss = sum(w^2) has gradient 2w.
  Tensor w = leaf({1.0, -3.0});
  SGD opt({w}, {.lr = 0.25});
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    sum(mul(w, w)).backward();
    opt.step();
  }
  // Each step multiplies w by 1 - 2 * 0.25 = 0.5.
  expect_near(vec(w), {0.25, -0.75});
  EXPECT_FALSE(w.grad_fn());
}

// --- Adam and AdamW ---

std::vector<double> adam_by_hand(double lr, double b1, double b2, double eps, double wd,
                                 bool decoupled, bool amsgrad, int steps) {
  std::vector<double> p = kStart, m(3, 0.0), v(3, 0.0), vmax(3, 0.0);
  for (int t = 1; t <= steps; ++t) {
    const std::vector<double> g0 = grad_at(t);
    for (int i = 0; i < 3; ++i) {
      double g = g0[i];
      if (decoupled) {
        p[i] = p[i] * (1.0 - lr * wd);
      } else {
        g = g + wd * p[i];
      }
      m[i] = b1 * m[i] + (1.0 - b1) * g;
      v[i] = b2 * v[i] + (1.0 - b2) * g * g;
      vmax[i] = std::max(vmax[i], v[i]);
      const double mhat = m[i] / (1.0 - std::pow(b1, t));
      const double second = amsgrad ? vmax[i] : v[i];
      const double denom = std::sqrt(second) / std::sqrt(1.0 - std::pow(b2, t)) + eps;
      p[i] = p[i] - lr * mhat / denom;
    }
  }
  return p;
}

TEST(OptimAdam, FirstStepIsLrTimesSignForTinyEps) {
  // With bias correction, step 1 moves every element by lr * g / (|g| + eps) ~ lr * sign(g).
  expect_near(run<Adam>(optim::AdamOptions{.lr = 0.01, .eps = 0.0}, 1),
              {1.0 - 0.01, -2.0 + 0.01, 0.5 - 0.01});
}

TEST(OptimAdam, BiasCorrectedStepsMatchFormula) {
  expect_near(run<Adam>(optim::AdamOptions{.lr = 0.01, .betas = {0.8, 0.9}, .eps = 1e-3}, 5),
              adam_by_hand(0.01, 0.8, 0.9, 1e-3, 0.0, false, false, 5));
}

TEST(OptimAdam, L2WeightDecayMatchesFormula) {
  expect_near(run<Adam>(optim::AdamOptions{.lr = 0.02, .eps = 1e-6, .weight_decay = 0.3}, 4),
              adam_by_hand(0.02, 0.9, 0.999, 1e-6, 0.3, false, false, 4));
}

TEST(OptimAdam, AmsgradMatchesFormula) {
  const std::vector<double> ams = adam_by_hand(0.02, 0.5, 0.6, 1e-8, 0.0, false, true, 5);
  expect_near(run<Adam>(optim::AdamOptions{.lr = 0.02, .betas = {0.5, 0.6}, .amsgrad = true}, 5),
              ams);
  // The running maximum matters for these gradients.
  EXPECT_GT(std::abs(ams[0] - adam_by_hand(0.02, 0.5, 0.6, 1e-8, 0.0, false, false, 5)[0]), 1e-6);
}

TEST(OptimAdam, StateHoldsStepAndMoments) {
  Tensor p = leaf(kStart);
  Adam opt({p}, {.lr = 0.1, .betas = {0.5, 0.75}});
  set_grad(p, {2.0, 4.0, -2.0});
  opt.step();
  opt.step();
  const auto& st = opt.state(0, 0);
  EXPECT_EQ(st.at("step").item<double>(), 2.0);
  // m = 0.5 (0.5 g) + 0.5 g = 0.75 g; v = 0.75 (0.25 g^2) + 0.25 g^2 = 0.4375 g^2.
  expect_near(vec(st.at("exp_avg")), {1.5, 3.0, -1.5});
  expect_near(vec(st.at("exp_avg_sq")), {1.75, 7.0, 1.75});
  EXPECT_EQ(st.count("max_exp_avg_sq"), 0u);
}

// A state dict that holds only part of Adam's state (its step count without the first moment)
// starts the parameter over: the next step is a first step, step count 1, fresh moments.
TEST(OptimAdam, PartialStateStartsOver) {
  Tensor p = leaf(kStart);
  Adam opt({p}, {.lr = 0.1});
  set_grad(p, {2.0, 4.0, -2.0});
  opt.step();
  StateDict dict = opt.state_dict();
  ASSERT_EQ(dict.erase("state.0.0.exp_avg"), 1u);
  opt.load_state_dict(dict);
  const std::vector<double> before = vec(p);
  opt.step();
  EXPECT_EQ(opt.state(0, 0).at("step").item<double>(), 1.0);
  // A first step moves each element by lr times the gradient's sign (eps aside).
  const std::vector<double> after = vec(p);
  expect_near({after[0] - before[0], after[1] - before[1], after[2] - before[2]}, {-0.1, -0.1, 0.1},
              1e-6);
}

TEST(OptimAdamW, DecoupledWeightDecayMatchesFormula) {
  expect_near(run<AdamW>(optim::AdamWOptions{.lr = 0.05, .eps = 1e-6, .weight_decay = 0.1}, 4),
              adam_by_hand(0.05, 0.9, 0.999, 1e-6, 0.1, true, false, 4));
  // And it is not Adam's L2 decay.
  EXPECT_GT(std::abs(adam_by_hand(0.05, 0.9, 0.999, 1e-6, 0.1, true, false, 4)[1] -
                     adam_by_hand(0.05, 0.9, 0.999, 1e-6, 0.1, false, false, 4)[1]),
            1e-6);
}

TEST(OptimAdamW, DefaultsAndAmsgrad) {
  Tensor p = leaf(kStart);
  AdamW opt({p}, {.lr = 1e-3, .weight_decay = 0.01});
  EXPECT_EQ(opt.name(), "AdamW");
  EXPECT_EQ(opt.options().betas.second, 0.999);
  EXPECT_EQ(AdamW({leaf({1.0})}).options().weight_decay, 1e-2);
  expect_near(run<AdamW>(
                  optim::AdamWOptions{
                      .lr = 0.03, .betas = {0.6, 0.7}, .weight_decay = 0.2, .amsgrad = true},
                  5),
              adam_by_hand(0.03, 0.6, 0.7, 1e-8, 0.2, true, true, 5));
}

// PyTorch's Adam takes decoupled_weight_decay, and its AdamW is that Adam: the same steps, bit for
// bit. AdamW keeps the flag on.
TEST(OptimAdamW, IsAdamWithDecoupledWeightDecay) {
  const std::vector<double> w =
      run<AdamW>(optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.1, .amsgrad = true}, 4);
  EXPECT_EQ(
      run<Adam>(
          optim::AdamOptions{
              .lr = 0.05, .weight_decay = 0.1, .amsgrad = true, .decoupled_weight_decay = true},
          4),
      w);
  EXPECT_FALSE(Adam({leaf({1.0})}).options().decoupled_weight_decay);
  EXPECT_TRUE(AdamW({leaf({1.0})}).options().decoupled_weight_decay);
  expect_error([&] { AdamW({leaf({1.0})}, {.decoupled_weight_decay = false}); },
               {"AdamW", "decoupled_weight_decay must be true", "group 0"});
  AdamW opt({leaf({1.0})});
  StateDict d = opt.state_dict();
  d["param_groups.0.decoupled_weight_decay"] = full({}, 0.0, {.dtype = DType::f64});
  expect_error([&] { opt.load_state_dict(d); }, {"AdamW", "decoupled_weight_decay"});
  // A dict from before the option keeps the optimizer's own.
  d.erase("param_groups.0.decoupled_weight_decay");
  opt.load_state_dict(d);
  EXPECT_TRUE(opt.options().decoupled_weight_decay);
}

TEST(OptimAdam, MaximizeNegatesGradient) {
  Tensor p = leaf(kStart);
  Adam opt({p}, {.lr = 0.01, .eps = 0.0, .maximize = true});
  set_grad(p, grad_at(1));
  opt.step();
  expect_near(vec(p), {1.0 + 0.01, -2.0 - 0.01, 0.5 + 0.01});
}

// --- RMSprop and Adagrad ---

// PyTorch's documented first steps: RMSprop moves each element by lr * sign(g) / sqrt(1 - alpha)
// (v = (1 - alpha) g^2), Adagrad by lr * sign(g) (s = g^2), whatever the gradient's size.
TEST(OptimRMSprop, FirstStepIsScaledSign) {
  const std::vector<double> g = grad_at(1);
  const std::vector<double> p = run<RMSprop>(optim::RMSpropOptions{.lr = 0.01, .eps = 0.0}, 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(p[i], kStart[i] - 0.01 * (g[i] > 0 ? 1 : -1) / std::sqrt(0.01), 1e-12);
  }
}

TEST(OptimAdagrad, FirstStepIsLrTimesSign) {
  const std::vector<double> g = grad_at(1);
  const std::vector<double> p = run<Adagrad>(optim::AdagradOptions{.lr = 0.1, .eps = 0.0}, 1);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(p[i], kStart[i] - 0.1 * (g[i] > 0 ? 1 : -1), 1e-12);
}

// Three steps against the formulas of rmsprop.h and adagrad.h written out by hand.
TEST(OptimRMSprop, CenteredMomentumWeightDecayMatchFormula) {
  const double lr = 0.01, alpha = 0.9, eps = 1e-6, wd = 0.1, mu = 0.5;
  std::vector<double> p = kStart, v(3, 0.0), m(3, 0.0), b(3, 0.0);
  for (int t = 1; t <= 3; ++t) {
    for (int i = 0; i < 3; ++i) {
      const double g = -grad_at(t)[i] + wd * p[i];  // maximize
      v[i] = alpha * v[i] + (1 - alpha) * g * g;
      m[i] = alpha * m[i] + (1 - alpha) * g;
      b[i] = mu * b[i] + g / (std::sqrt(v[i] - m[i] * m[i]) + eps);
      p[i] -= lr * b[i];
    }
  }
  expect_near(run<RMSprop>(optim::RMSpropOptions{.lr = lr,
                                                 .alpha = alpha,
                                                 .eps = eps,
                                                 .weight_decay = wd,
                                                 .momentum = mu,
                                                 .centered = true,
                                                 .maximize = true},
                           3),
              p);
}

TEST(OptimAdagrad, LrDecayAndInitialAccumulatorMatchFormula) {
  const double lr = 0.1, decay = 0.5, init = 0.2, wd = 0.05;
  std::vector<double> p = kStart, sum(3, init);
  for (int t = 1; t <= 3; ++t) {
    const double clr = lr / (1 + (t - 1) * decay);
    for (int i = 0; i < 3; ++i) {
      const double g = grad_at(t)[i] + wd * p[i];
      sum[i] += g * g;
      p[i] -= clr * g / (std::sqrt(sum[i]) + 1e-10);
    }
  }
  Tensor q = leaf(kStart);
  Adagrad opt({q},
              {.lr = lr, .lr_decay = decay, .weight_decay = wd, .initial_accumulator_value = init});
  for (int t = 1; t <= 3; ++t) {
    set_grad(q, grad_at(t));
    opt.step();
  }
  expect_near(vec(q), p);
  EXPECT_EQ(opt.state(0, 0).at("step").item<double>(), 3.0);
  EXPECT_EQ(opt.state(0, 0).count("sum"), 1u);
}

// RMSprop's momentum is the one a one-cycle schedule cycles; groups override and inherit.
TEST(OptimRMSprop, GroupsAndSchedulers) {
  Tensor a = leaf({1.0}), b = leaf({2.0});
  RMSprop opt({{.params = {a}}, {.params = {b}, .lr = 0.5, .centered = true}},
              {.lr = 0.1, .momentum = 0.9});
  EXPECT_EQ(opt.options(1).momentum, 0.9);
  EXPECT_TRUE(opt.options(1).centered);
  EXPECT_FALSE(opt.options(0).centered);
  EXPECT_EQ(opt.momentum_name(), "momentum");
  optim::OneCycleLR sched(opt, 1.0, 10);
  EXPECT_EQ(opt.options(0).momentum, sched.momentum_at(0));
  sched.step();
  EXPECT_EQ(opt.options(1).momentum, sched.momentum_at(1));
  EXPECT_EQ(opt.lr(1), sched.lr_at(1, 1));
  Adagrad ada({a}, {.lr = 0.1});
  optim::StepLR step_lr(ada, 1, 0.5);
  step_lr.step();
  EXPECT_EQ(ada.lr(), 0.05);
}

// --- parameter groups ---

TEST(OptimParamGroups, EachGroupHasItsOwnLr) {
  Tensor a = leaf({1.0, 1.0}), b = leaf({1.0});
  SGD opt({{.params = {a}}, {.params = {b}, .lr = 0.01}}, {.lr = 0.1, .momentum = 0.9});
  ASSERT_EQ(opt.num_param_groups(), 2u);
  EXPECT_EQ(opt.lr(0), 0.1);
  EXPECT_EQ(opt.lr(1), 0.01);
  EXPECT_EQ(opt.options(1).momentum, 0.9);  // unset options take the defaults
  for (int t = 0; t < 2; ++t) {
    set_grad(a, {1.0, 2.0});
    set_grad(b, {1.0});
    opt.step();
  }
  // Two momentum steps with a constant gradient g: p - lr (g + (0.9 g + g)) = p - 2.9 lr g.
  expect_near(vec(a), {1.0 - 0.29, 1.0 - 0.58});
  expect_near(vec(b), {1.0 - 0.029});
}

TEST(OptimParamGroups, AddParamGroupAndSetLr) {
  Tensor a = leaf({1.0}), b = leaf({2.0});
  Adam opt({a}, {.lr = 0.1});
  opt.add_param_group({.params = {b}, .lr = 0.5, .betas = std::pair{0.5, 0.5}});
  EXPECT_EQ(opt.options(1).betas.first, 0.5);
  EXPECT_EQ(opt.options(1).eps, 1e-8);
  opt.set_lr(0.25);
  EXPECT_EQ(opt.lr(0), 0.25);
  EXPECT_EQ(opt.lr(1), 0.25);
  opt.set_lr(1, 0.75);
  EXPECT_EQ(opt.hyperparameter(1, "lr"), 0.75);
  EXPECT_EQ(opt.parameters().size(), 2u);
}

// --- state dicts ---

// Four steps straight, against two steps, a state dict moved into a fresh optimizer over copies
// of the parameters, and two more steps: the results must be identical.
template <class Opt, class Options>
void expect_round_trip(const Options& o) {
  Tensor p1 = leaf(kStart), q1 = leaf({0.3, -0.7});
  Opt opt1({{.params = {p1}}, {.params = {q1}, .lr = 0.02}}, o);
  auto step = [](Opt& opt, Tensor& p, Tensor& q, int t) {
    set_grad(p, grad_at(t));
    set_grad(q, {0.1 * t, -0.2});
    opt.step();
  };
  step(opt1, p1, q1, 1);
  step(opt1, p1, q1, 2);
  const StateDict dict = opt1.state_dict();

  Tensor p2 = leaf(vec(p1)), q2 = leaf(vec(q1));
  Opt opt2({{.params = {p2}}, {.params = {q2}}}, Options{.lr = 0.9});
  opt2.load_state_dict(dict);
  EXPECT_EQ(opt2.lr(1), 0.02);
  for (int t = 3; t <= 4; ++t) {
    step(opt1, p1, q1, t);
    step(opt2, p2, q2, t);
  }
  EXPECT_EQ(vec(p1), vec(p2));
  EXPECT_EQ(vec(q1), vec(q2));
}

TEST(OptimStateDict, RoundTripGivesIdenticalSteps) {
  expect_round_trip<SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  expect_round_trip<Adam>(optim::AdamOptions{.lr = 0.1, .weight_decay = 0.1, .amsgrad = true});
  expect_round_trip<AdamW>(optim::AdamWOptions{.lr = 0.1, .betas = {0.7, 0.8}});
  expect_round_trip<RMSprop>(
      optim::RMSpropOptions{.lr = 0.01, .weight_decay = 0.1, .momentum = 0.9, .centered = true});
  expect_round_trip<Adagrad>(
      optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.1, .initial_accumulator_value = 0.5});
}

// The state dict keys of the new optimizers are PyTorch's names.
TEST(OptimStateDict, RmspropAndAdagradKeys) {
  Tensor p = leaf(kStart);
  RMSprop rms({p}, {.momentum = 0.9, .centered = true});
  set_grad(p, grad_at(1));
  rms.step();
  const StateDict d = rms.state_dict();
  for (const char* key :
       {"param_groups.0.lr", "param_groups.0.alpha", "param_groups.0.eps",
        "param_groups.0.weight_decay", "param_groups.0.momentum", "param_groups.0.centered",
        "param_groups.0.maximize", "param_groups.0.capturable", "param_groups.0.num_params",
        "state.0.0.step", "state.0.0.square_avg", "state.0.0.momentum_buffer",
        "state.0.0.grad_avg"}) {
    EXPECT_EQ(d.count(key), 1u) << key;
  }
  EXPECT_EQ(d.size(), 13u);
  Adagrad ada({p}, {.initial_accumulator_value = 0.25});
  ada.step();
  const StateDict a = ada.state_dict();
  EXPECT_EQ(a.size(), 10u);  // 7 options, num_params, step and sum
  EXPECT_EQ(a.at("param_groups.0.initial_accumulator_value").item<double>(), 0.25);
  EXPECT_EQ(a.at("param_groups.0.lr_decay").item<double>(), 0.0);
  EXPECT_EQ(a.at("state.0.0.sum").shape(), (Shape{3}));
  // A dict of another optimizer is refused by its first unknown key.
  expect_error([&] { ada.load_state_dict(d); }, {"Adagrad::load_state_dict"});
}

TEST(OptimStateDict, KeysAndScalars) {
  Tensor p = leaf(kStart), q = leaf({1.0});
  Adam opt({p, q}, {.lr = 0.1, .amsgrad = true});
  set_grad(p, grad_at(1));
  opt.step();
  const StateDict d = opt.state_dict();
  for (const char* key :
       {"param_groups.0.lr", "param_groups.0.beta1", "param_groups.0.beta2", "param_groups.0.eps",
        "param_groups.0.weight_decay", "param_groups.0.amsgrad", "param_groups.0.maximize",
        "param_groups.0.capturable", "param_groups.0.decoupled_weight_decay",
        "param_groups.0.num_params", "state.0.0.step", "state.0.0.exp_avg", "state.0.0.exp_avg_sq",
        "state.0.0.max_exp_avg_sq"}) {
    EXPECT_EQ(d.count(key), 1u) << key;
  }
  EXPECT_EQ(d.size(), 14u);  // q has no grad, so no state
  EXPECT_EQ(d.at("param_groups.0.lr").dim(), 0);
  EXPECT_EQ(d.at("param_groups.0.lr").dtype(), DType::f64);
  EXPECT_EQ(d.at("param_groups.0.lr").item<double>(), 0.1);
  EXPECT_EQ(d.at("param_groups.0.amsgrad").item<double>(), 1.0);
  EXPECT_EQ(d.at("param_groups.0.num_params").item<double>(), 2.0);
  EXPECT_EQ(d.at("state.0.0.step").item<double>(), 1.0);
  EXPECT_EQ(d.at("state.0.0.exp_avg").shape(), (Shape{3}));
  // A snapshot: later steps do not change it.
  set_grad(p, grad_at(2));
  opt.step();
  EXPECT_EQ(d.at("state.0.0.step").item<double>(), 1.0);
}

TEST(OptimStateDict, BadDictLeavesOptimizerUntouched) {
  Tensor p = leaf(kStart);
  SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  set_grad(p, grad_at(1));
  opt.step();
  const StateDict good = opt.state_dict();
  const std::vector<double> buf = vec(opt.state(0, 0).at("momentum_buffer"));

  auto expect_rejected = [&](StateDict d, std::initializer_list<std::string> fragments) {
    expect_error([&] { opt.load_state_dict(d); }, fragments);
    EXPECT_EQ(opt.lr(), 0.1);
    EXPECT_EQ(vec(opt.state(0, 0).at("momentum_buffer")), buf);
  };
  StateDict d = good;
  d["state.0.0.momentum_buffer"] = zeros({4}, {.dtype = DType::f64});
  d["param_groups.0.lr"] = full({}, 0.5, {.dtype = DType::f64});
  expect_rejected(d, {"SGD::load_state_dict", "state.0.0.momentum_buffer", "shape [4]"});

  d = good;
  d.erase("param_groups.0.dampening");
  d["param_groups.0.lr"] = full({}, 0.5, {.dtype = DType::f64});
  expect_rejected(d, {"missing", "param_groups.0.dampening"});

  d = good;
  d["param_groups.0.lr"] = full({}, -1.0, {.dtype = DType::f64});
  expect_rejected(d, {"invalid learning rate -1"});

  d = good;
  d["param_groups.1.lr"] = full({}, 0.5, {.dtype = DType::f64});
  expect_rejected(d, {"unexpected key", "param_groups.1.lr", "1 parameter groups"});

  d = good;
  d["param_groups.0.num_params"] = full({}, 2.0, {.dtype = DType::f64});
  expect_rejected(d, {"group 0 has 1 parameters, the state dict has 2"});

  d = good;
  d["state.0.0.exp_avg"] = zeros({3}, {.dtype = DType::f64});
  expect_rejected(d, {"unexpected key", "state.0.0.exp_avg"});

  // The good dict still loads.
  d = good;
  d["param_groups.0.lr"] = full({}, 0.5, {.dtype = DType::f64});
  opt.load_state_dict(d);
  EXPECT_EQ(opt.lr(), 0.5);
}

// --- schedulers ---

Tensor one_param() { return leaf({1.0}); }

TEST(OptimScheduler, StepLRMatchesClosedForm) {
  Tensor p = one_param();
  SGD opt({p}, {.lr = 0.8});
  optim::StepLR sched(opt, 3, 0.5);
  EXPECT_EQ(opt.lr(), 0.8);
  std::vector<double> seen = {opt.lr()};
  for (int t = 1; t <= 7; ++t) {
    sched.step();
    seen.push_back(opt.lr());
  }
  expect_near(seen, {0.8, 0.8, 0.8, 0.4, 0.4, 0.4, 0.2, 0.2});
  EXPECT_EQ(sched.last_epoch(), 7);
  EXPECT_EQ(sched.get_last_lr(), (std::vector<double>{opt.lr()}));
}

TEST(OptimScheduler, CosineAnnealingMatchesClosedForm) {
  Tensor p = one_param();
  SGD opt({p}, {.lr = 1.0});
  optim::CosineAnnealingLR sched(opt, 10, 0.1);
  const double pi = std::numbers::pi;
  for (int t = 0; t <= 12; ++t) {
    if (t > 0) sched.step();
    const double expected = 0.1 + 0.9 * (1.0 + std::cos(pi * t / 10.0)) / 2.0;
    EXPECT_NEAR(opt.lr(), expected, 1e-12) << "t = " << t;
  }
  EXPECT_NEAR(sched.lr_at(0, 5), 0.55, 1e-12);
  EXPECT_NEAR(sched.lr_at(0, 10), 0.1, 1e-12);
}

TEST(OptimScheduler, CosineAnnealingWarmup) {
  Tensor p = one_param();
  Adam opt({p}, {.lr = 2.0});
  optim::CosineAnnealingLR sched(opt, 12, 0.0, 4);
  EXPECT_EQ(opt.lr(), 0.0);  // the warm-up starts from 0
  std::vector<double> seen = {opt.lr()};
  for (int t = 1; t <= 12; ++t) {
    sched.step();
    seen.push_back(opt.lr());
  }
  EXPECT_NEAR(seen[1], 0.5, 1e-12);
  EXPECT_NEAR(seen[3], 1.5, 1e-12);
  EXPECT_NEAR(seen[4], 2.0, 1e-12);
  EXPECT_NEAR(seen[8], 1.0, 1e-12);  // half way through the 8 cosine steps
  EXPECT_NEAR(seen[6], 1.0 + std::cos(std::numbers::pi / 4.0), 1e-12);
  EXPECT_NEAR(seen[12], 0.0, 1e-12);
}

// PyTorch's OneCycleLR schedule, written out for the two-phase cosine case.
double one_cycle_by_hand(double max_lr, int total, double pct_start, double div, double final_div,
                         int t, bool momentum) {
  const double initial = max_lr / div, min_lr = initial / final_div;
  const double e1 = pct_start * total - 1.0, e2 = total - 1.0;
  auto cos_anneal = [](double a, double b, double pct) {
    return b + (a - b) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
  };
  if (t <= e1) {
    const double pct = t / e1;
    return momentum ? cos_anneal(0.95, 0.85, pct) : cos_anneal(initial, max_lr, pct);
  }
  const double pct = (t - e1) / (e2 - e1);
  return momentum ? cos_anneal(0.85, 0.95, pct) : cos_anneal(max_lr, min_lr, pct);
}

TEST(OptimScheduler, OneCycleMatchesPyTorchSchedule) {
  Tensor p = one_param();
  SGD opt({p}, {.lr = 123.0, .momentum = 0.5});
  optim::OneCycleLR sched(opt, 0.4, 20);
  for (int t = 0; t <= 20; ++t) {
    if (t > 0) sched.step();
    EXPECT_NEAR(opt.lr(), one_cycle_by_hand(0.4, 20, 0.3, 25.0, 1e4, t, false), 1e-12)
        << "t = " << t;
    EXPECT_NEAR(opt.options().momentum, one_cycle_by_hand(0.4, 20, 0.3, 25.0, 1e4, t, true), 1e-12)
        << "t = " << t;
  }
  EXPECT_NEAR(sched.lr_at(0, 0), 0.4 / 25.0, 1e-15);
  EXPECT_NEAR(sched.lr_at(0, 5), 0.4, 1e-15);  // the peak, at pct_start * total - 1
  EXPECT_NEAR(sched.lr_at(0, 19), 0.4 / 25.0 / 1e4, 1e-15);
  expect_error([&] { sched.step(); }, {"OneCycleLR", "stepped 21 times", "total_steps is 20"});
}

TEST(OptimScheduler, OneCycleLinearThreePhaseCyclesBeta1) {
  Tensor p = one_param();
  Adam opt({p}, {.lr = 1.0});
  optim::OneCycleLR sched(opt, 1.0, 10,
                          {.pct_start = 0.25,
                           .anneal_strategy = optim::AnnealStrategy::Linear,
                           .div_factor = 10.0,
                           .final_div_factor = 100.0,
                           .three_phase = true});
  // Phases end at 1.5, 3 and 9: 0.1 -> 1 -> 0.1 -> 0.001, linearly.
  EXPECT_NEAR(sched.lr_at(0, 0), 0.1, 1e-15);
  EXPECT_NEAR(sched.lr_at(0, 1), 0.1 + 0.9 / 1.5, 1e-15);
  EXPECT_NEAR(sched.lr_at(0, 2), 1.0 - 0.9 * (0.5 / 1.5), 1e-15);
  EXPECT_NEAR(sched.lr_at(0, 3), 0.1, 1e-15);
  EXPECT_NEAR(sched.lr_at(0, 6), 0.1 + (0.001 - 0.1) * 0.5, 1e-15);
  EXPECT_NEAR(sched.momentum_at(1), 0.95 - 0.1 / 1.5, 1e-15);
  EXPECT_NEAR(sched.momentum_at(6), 0.95, 1e-15);
  EXPECT_EQ(opt.options().betas.first, 0.95);
  sched.step();
  EXPECT_NEAR(opt.options().betas.first, 0.95 - 0.1 / 1.5, 1e-15);
  EXPECT_EQ(opt.options().betas.second, 0.999);
}

TEST(OptimScheduler, StateDictRoundTrip) {
  Tensor p = one_param();
  SGD opt({p}, {.lr = 1.0});
  optim::StepLR a(opt, 2, 0.5);
  for (int i = 0; i < 3; ++i) a.step();
  const StateDict d = a.state_dict();
  EXPECT_EQ(d.at("last_epoch").item<double>(), 3.0);
  EXPECT_EQ(d.at("base_lrs.0").item<double>(), 1.0);

  Tensor q = one_param();
  SGD opt2({q}, {.lr = 7.0});
  optim::StepLR b(opt2, 2, 0.5);
  b.load_state_dict(d);
  EXPECT_EQ(b.last_epoch(), 3);
  a.step();
  b.step();
  EXPECT_EQ(opt.lr(), 0.25);
  EXPECT_EQ(opt2.lr(), 0.25);

  StateDict bad = d;
  bad.erase("last_lr.0");
  expect_error([&] { b.load_state_dict(bad); }, {"LRScheduler::load_state_dict"});
  EXPECT_EQ(b.last_epoch(), 4);
}

// --- gradient clipping ---

TEST(OptimClip, GradNormTwoScalesWhenAbove) {
  Tensor a = leaf({0.0, 0.0}), b = leaf({0.0}), c = leaf({5.0});
  set_grad(a, {3.0, -4.0});
  set_grad(b, {12.0});
  // c has no gradient and is skipped. Total: sqrt(9 + 16 + 144) = 13.
  const double total = optim::clip_grad_norm_({a, b, c}, 6.5);
  EXPECT_NEAR(total, 13.0, 1e-12);
  const double coef = 6.5 / (13.0 + 1e-6);
  expect_near(vec(a.grad()), {3.0 * coef, -4.0 * coef});
  expect_near(vec(b.grad()), {12.0 * coef});
  EXPECT_FALSE(c.grad().defined());
}

// The no-sync form: the same scaling, the total left on the device as a tensor; NaN and inf totals
// as in the host form and PyTorch (NaN: every gradient NaN; inf: scaled by 0).
TEST(OptimClip, GradNormOnDeviceMatchesAndHandlesNanAndInf) {
  Tensor a = leaf({0.0, 0.0}), b = leaf({0.0});
  set_grad(a, {3.0, -4.0});
  set_grad(b, {12.0});
  const Tensor total = optim::clip_grad_norm_on_device_({a, b}, 6.5);
  EXPECT_EQ(total.dim(), 0);
  EXPECT_EQ(total.dtype(), DType::f64);
  EXPECT_NEAR(total.item<double>(), 13.0, 1e-12);
  const double coef = 6.5 / (13.0 + 1e-6);
  expect_near(vec(a.grad()), {3.0 * coef, -4.0 * coef});
  set_grad(a, {std::nan(""), 1.0});
  set_grad(b, {2.0});
  EXPECT_TRUE(std::isnan(optim::clip_grad_norm_on_device_({a, b}, 1.0).item<double>()));
  EXPECT_TRUE(std::isnan(vec(a.grad())[1]));
  EXPECT_TRUE(std::isnan(vec(b.grad())[0]));
  set_grad(a, {std::numeric_limits<double>::infinity(), 1.0});
  EXPECT_TRUE(std::isinf(optim::clip_grad_norm_on_device_({a}, 1.0).item<double>()));
  EXPECT_EQ(vec(a.grad())[1], 0.0);
}

TEST(OptimClip, GradNormBelowLeavesGradients) {
  Tensor a = leaf({0.0, 0.0});
  set_grad(a, {3.0, -4.0});
  EXPECT_NEAR(optim::clip_grad_norm_({a}, 10.0), 5.0, 1e-12);
  EXPECT_EQ(vec(a.grad()), (std::vector<double>{3.0, -4.0}));
}

TEST(OptimClip, GradNormInfAndOne) {
  Tensor a = leaf({0.0, 0.0}), b = leaf({0.0});
  set_grad(a, {3.0, -7.0});
  set_grad(b, {2.0});
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 100.0, 1.0), 12.0, 1e-12);
  const double total = optim::clip_grad_norm_({a, b}, 3.5, std::numeric_limits<double>::infinity());
  EXPECT_EQ(total, 7.0);
  const double coef = 3.5 / (7.0 + 1e-6);
  expect_near(vec(a.grad()), {3.0 * coef, -7.0 * coef});
  expect_near(vec(b.grad()), {2.0 * coef});
  // p = 3: (27 + 8 + 343... scaled) by hand on fresh gradients.
  set_grad(a, {1.0, -2.0});
  set_grad(b, {2.0});
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 100.0, 3.0), std::cbrt(1.0 + 8.0 + 8.0), 1e-12);
}

TEST(OptimClip, GradNormF32) {
  Tensor a = from_vector<float>({3.0f, 4.0f}, {2}).requires_grad_(true);
  a.set_grad(from_vector<float>({3.0f, 4.0f}, {2}));
  EXPECT_NEAR(optim::clip_grad_norm_({a}, 1.0), 5.0, 1e-6);
  expect_near(vec(a.grad()), {0.6, 0.8}, 1e-6);
}

TEST(OptimClip, GradValue) {
  Tensor a = leaf({0.0, 0.0, 0.0});
  set_grad(a, {-3.0, 0.5, 2.0});
  optim::clip_grad_value_({a}, 1.0);
  EXPECT_EQ(vec(a.grad()), (std::vector<double>{-1.0, 0.5, 1.0}));
}

// --- errors ---

TEST(OptimErrors, BadHyperparameters) {
  Tensor p = leaf({1.0});
  expect_error([&] { SGD({p}, {.lr = -0.1}); }, {"SGD", "invalid learning rate -0.1"});
  expect_error([&] { SGD({p}, {.lr = 0.1, .momentum = -0.5}); }, {"SGD", "momentum -0.5"});
  expect_error([&] { SGD({p}, {.lr = 0.1, .weight_decay = -1.0}); }, {"weight_decay -1"});
  expect_error([&] { SGD({p}, {.lr = 0.1, .nesterov = true}); },
               {"SGD", "nesterov", "momentum > 0", "got momentum 0"});
  expect_error([&] { SGD({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}); },
               {"dampening 0.1"});
  expect_error([&] { Adam({p}, {.lr = std::nan("")}); }, {"Adam", "invalid learning rate nan"});
  expect_error([&] { Adam({p}, {.betas = {1.0, 0.999}}); }, {"Adam", "beta1 1", "[0, 1)"});
  expect_error([&] { Adam({p}, {.betas = {0.9, -0.1}}); }, {"beta2 -0.1"});
  expect_error([&] { AdamW({p}, {.eps = -1e-8}); }, {"AdamW", "eps -1e-08"});
  expect_error([&] { AdamW({p}, {.weight_decay = -0.01}); }, {"AdamW", "weight_decay -0.01"});
  expect_error([&] { RMSprop({p}, {.alpha = 1.0}); }, {"RMSprop", "invalid alpha 1", "[0, 1)"});
  expect_error([&] { RMSprop({p}, {.momentum = -0.1}); }, {"RMSprop", "momentum -0.1"});
  expect_error([&] { Adagrad({p}, {.lr_decay = -1.0}); }, {"Adagrad", "lr_decay -1"});
  expect_error([&] { Adagrad({p}, {.initial_accumulator_value = -0.5}); },
               {"Adagrad", "initial_accumulator_value -0.5"});
  SGD opt({p}, {.lr = 0.1});
  expect_error([&] { opt.set_lr(0, -1.0); }, {"invalid learning rate -1"});
  expect_error([&] { opt.set_hyperparameter(0, "nesterov", 0.5); },
               {"SGD", "nesterov", "flag", "0.5"});
  EXPECT_EQ(opt.lr(), 0.1);
  expect_error([&] { opt.set_hyperparameter(0, "beta1", 0.5); }, {"no hyperparameter \"beta1\""});
}

// A group that sets an option its optimizer does not have does not compile (Note [optimizer
// options]): SGD has no betas, Adam no momentum.
template <class G>
concept HasBetas = requires(G g) {
  g.betas;
};
template <class G>
concept HasMomentum = requires(G g) {
  g.momentum;
};
static_assert(!HasBetas<optim::SGDGroup> && HasBetas<optim::AdamGroup>);
static_assert(!HasMomentum<optim::AdamGroup> && HasMomentum<optim::SGDGroup>);

TEST(OptimErrors, BadParameters) {
  Tensor p = leaf({1.0});
  expect_error([&] { SGD(std::vector<Tensor>{}, {.lr = 0.1}); }, {"SGD", "empty parameter list"});
  expect_error([&] { SGD({p, p}, {.lr = 0.1}); }, {"appears more than once"});
  expect_error([&] { SGD({Tensor()}, {.lr = 0.1}); }, {"parameter 0 of group 0 is undefined"});
  expect_error([&] { Adam({mul(p, 2.0)}); }, {"Adam", "not a leaf"});
  expect_error([&] { Adam({from_vector<int64_t>({1}, {1})}); }, {"dtype i64", "floating point"});
  SGD opt({p}, {.lr = 0.1});
  expect_error([&] { opt.add_param_group({.params = {p}}); }, {"appears more than once"});
  expect_error([&] { opt.params(3); }, {"group 3 does not exist"});
}

TEST(OptimErrors, BadSchedulersAndClipping) {
  Tensor p = leaf({1.0});
  SGD opt({p}, {.lr = 0.1});
  expect_error([&] { optim::StepLR(opt, 0); }, {"StepLR", "step_size", "got 0"});
  expect_error([&] { optim::CosineAnnealingLR(opt, 10, 0.0, 10); },
               {"CosineAnnealingLR", "warmup_steps", "got 10"});
  expect_error([&] { optim::CosineAnnealingLR(opt, 0); }, {"T_max must be positive"});
  expect_error([&] { optim::OneCycleLR(opt, 0.1, 0); }, {"OneCycleLR", "total_steps"});
  expect_error([&] { optim::OneCycleLR(opt, 0.1, 10, {.pct_start = 1.5}); }, {"pct_start"});
  expect_error([&] { optim::OneCycleLR(opt, 0.1, 3); }, {"leaves a phase without steps"});
  set_grad(p, {1.0});
  expect_error([&] { optim::clip_grad_norm_({p}, -1.0); }, {"clip_grad_norm_", "max_norm"});
  expect_error([&] { optim::clip_grad_norm_({p}, 1.0, 0.0); }, {"clip_grad_norm_", "norm_type"});
  expect_error([&] { optim::clip_grad_value_({p}, -1.0); }, {"clip_grad_value_", "-1"});
}

// --- CUDA: the same updates on the device agree with the CPU ---

TEST(CudaOptim, UpdatesMatchCpu) {
  SINTER_REQUIRE_CUDA();
  testing::poison_cuda_cache();
  const Shape shape = {257, 3};
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  const Tensor init = randn(shape, {}, &gen);
  std::vector<Tensor> grads;
  for (int t = 0; t < 3; ++t) grads.push_back(randn(shape, {}, &gen));

  auto run = [&](Device dev, auto make) {
    Tensor p = init.to(dev).detach().clone().requires_grad_(true);
    auto opt = make(p);
    for (const Tensor& g : grads) {
      p.set_grad(g.to(dev));
      opt->step();
    }
    return p.cpu();
  };
  auto sgd = [](Tensor p) {
    return std::make_unique<SGD>(
        std::vector<Tensor>{p},
        optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  };
  auto adam = [](Tensor p) {
    return std::make_unique<Adam>(
        std::vector<Tensor>{p},
        optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
  };
  auto adamw = [](Tensor p) {
    return std::make_unique<AdamW>(std::vector<Tensor>{p}, optim::AdamWOptions{.lr = 0.01});
  };
  EXPECT_TRUE(testing::all_close(run(Device::cuda(), sgd), run(Device::cpu(), sgd), 1e-5, 1e-5));
  EXPECT_TRUE(testing::all_close(run(Device::cuda(), adam), run(Device::cpu(), adam), 1e-5, 1e-5));
  EXPECT_TRUE(
      testing::all_close(run(Device::cuda(), adamw), run(Device::cpu(), adamw), 1e-5, 1e-5));
  auto rmsprop = [](Tensor p) {
    return std::make_unique<RMSprop>(std::vector<Tensor>{p},
                                     optim::RMSpropOptions{.momentum = 0.9, .centered = true});
  };
  auto adagrad = [](Tensor p) {
    return std::make_unique<Adagrad>(std::vector<Tensor>{p},
                                     optim::AdagradOptions{.lr_decay = 0.1});
  };
  EXPECT_TRUE(
      testing::all_close(run(Device::cuda(), rmsprop), run(Device::cpu(), rmsprop), 1e-5, 1e-5));
  EXPECT_TRUE(
      testing::all_close(run(Device::cuda(), adagrad), run(Device::cpu(), adagrad), 1e-5, 1e-5));
}

TEST(CudaOptim, ClipGradNormMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  const Tensor g = randn({1000}, {}, &gen);
  for (double norm_type : {2.0, std::numeric_limits<double>::infinity()}) {
    Tensor pc = zeros({1000}).requires_grad_(true);
    Tensor pg = zeros({1000}, {.device = Device::cuda()}).requires_grad_(true);
    pc.set_grad(g.clone());
    pg.set_grad(g.cuda());
    const double tc = optim::clip_grad_norm_({pc}, 0.5, norm_type);
    const double tg = optim::clip_grad_norm_({pg}, 0.5, norm_type);
    EXPECT_NEAR(tg, tc, 1e-4 * tc);
    EXPECT_TRUE(testing::all_close(pg.grad(), pc.grad(), 1e-6, 1e-4));
  }
}

}  // namespace
}  // namespace sinter

namespace sinter {
namespace {

// Capturable Adam (Note [capturable adam]) makes the same updates as the default mode, with the
// step count and the learning rate on the device (here the CPU). The learning rate is kept in f64
// there, so an f64 parameter (as here) gets the default mode's bits exactly.
TEST(CapturableAdam, StepsAsTheDefaultMode) {
  for (bool decoupled : {false, true}) {
    for (bool amsgrad : {false, true}) {
      SCOPED_TRACE(std::string(decoupled ? "AdamW" : "Adam") + (amsgrad ? " amsgrad" : ""));
      auto make = [&](bool capturable, const Tensor& p) -> std::unique_ptr<optim::Optimizer> {
        if (decoupled) {
          return std::make_unique<optim::AdamW>(
              std::vector<Tensor>{p},
              optim::AdamWOptions{
                  .lr = 0.05, .weight_decay = 0.1, .amsgrad = amsgrad, .capturable = capturable});
        }
        return std::make_unique<optim::Adam>(
            std::vector<Tensor>{p},
            optim::AdamOptions{
                .lr = 0.05, .weight_decay = 0.1, .amsgrad = amsgrad, .capturable = capturable});
      };
      Tensor a = leaf(kStart), b = leaf(kStart);
      auto plain = make(false, a), capt = make(true, b);
      for (int t = 1; t <= 6; ++t) {
        if (t == 4) {  // a schedule's change reaches the device learning rate
          plain->set_lr(0.02);
          capt->set_lr(0.02);
        }
        set_grad(a, grad_at(t));
        set_grad(b, grad_at(t));
        plain->step();
        capt->step();
      }
      EXPECT_EQ(vec(b), vec(a));
      const Tensor& step = capt->state(0, 0).at("step");
      EXPECT_EQ(step.dtype(), DType::f32);
      EXPECT_EQ(step.item<float>(), 6.0f);
      EXPECT_EQ(capt->state_dict().at("param_groups.0.capturable").item<double>(), 1.0);
    }
  }
}

// A state dict carries over between the modes, and one from before the option loads.
TEST(CapturableAdam, StateDictsMoveBetweenModes) {
  Tensor a = leaf(kStart), b = leaf(kStart);
  optim::Adam plain({a}, {.lr = 0.05});
  optim::Adam capt({b}, {.lr = 0.05, .capturable = true});
  for (int t = 1; t <= 3; ++t) {
    set_grad(a, grad_at(t));
    plain.step();
  }
  StateDict d = plain.state_dict();
  d["param_groups.0.capturable"] = full({}, 1.0, {.dtype = DType::f64});  // into capturable mode
  capt.load_state_dict(d);
  b.detach().copy_(a.detach());
  for (int t = 4; t <= 5; ++t) {
    set_grad(a, grad_at(t));
    set_grad(b, grad_at(t));
    plain.step();
    capt.step();
  }
  expect_near(vec(b), vec(a), 1e-7);
  StateDict old = plain.state_dict();
  old.erase("param_groups.0.capturable");
  plain.load_state_dict(old);  // the current value stays
  EXPECT_EQ(plain.hyperparameter(0, "capturable"), 0.0);
}

// The rules' capturable mode (Note [optimizer rules]): the step count and the learning rate on the
// device (here the CPU), with Adagrad's decayed rate computed there; an f64 parameter gets the
// default mode's bits (the learning rate kept in f64 on the device), through a change of lr
// midway. SGD keeps no step count.
template <class Opt, class Options>
void expect_capturable_as_default(Options o, bool counts_steps = true) {
  Tensor a = leaf(kStart), b = leaf(kStart);
  Opt plain({a}, o);
  o.capturable = true;
  Opt capt({b}, o);
  for (int t = 1; t <= 5; ++t) {
    if (t == 3) {
      plain.set_lr(0.03);
      capt.set_lr(0.03);
    }
    set_grad(a, grad_at(t));
    set_grad(b, grad_at(t));
    plain.step();
    capt.step();
  }
  EXPECT_EQ(vec(b), vec(a));
  EXPECT_EQ(capt.hyperparameter(0, "capturable"), 1.0);
  EXPECT_EQ(capt.state(0, 0).count("step"), counts_steps ? 1u : 0u);
  if (counts_steps) {
    EXPECT_EQ(capt.state(0, 0).at("step").dtype(), DType::f32);
    EXPECT_EQ(capt.state(0, 0).at("step").template item<float>(), 5.0f);
  }
}

TEST(CapturableRules, StepAsTheDefaultMode) {
  expect_capturable_as_default<RMSprop>(
      optim::RMSpropOptions{.lr = 0.3, .weight_decay = 0.1, .momentum = 0.9, .centered = true});
  expect_capturable_as_default<Adagrad>(
      optim::AdagradOptions{.lr = 0.3, .lr_decay = 0.1, .initial_accumulator_value = 0.1});
  expect_capturable_as_default<SGD>(
      optim::SGDOptions{.lr = 0.3, .momentum = 0.9, .weight_decay = 0.01}, false);
}

}  // namespace
}  // namespace sinter

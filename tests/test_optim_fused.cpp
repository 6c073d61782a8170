// The fused optimizer steps (Note [fused optimizer step]): SGD, Adam and AdamW over lists of
// tensors of ragged sizes against the unfused tensor-op formulas (bit for bit in f32 and f64) and a
// per-element reference in double; on a GPU, CUDA against CPU from the same inputs, with misaligned
// views and more tensors than one launch holds.
#include <cmath>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "sinter/nn.h"
#include "sinter/optim.h"
#include "test_util.h"

namespace sinter {
namespace {

using optim::Adagrad;
using optim::AdagradOptions;
using optim::Adam;
using optim::AdamOptions;
using optim::AdamW;
using optim::RMSprop;
using optim::RMSpropOptions;
using optim::SGD;
using optim::SGDOptions;
using testing::all_close;

const std::vector<int64_t> kSizes = {1, 3, 1000, 4097};
constexpr int kSteps = 4;

// Initial parameters and the gradient of each tensor at each step. With gaps, tensor k has no
// gradient at step s when (k + s) % 3 == 0, so tensors differ in their step counts and some get
// their state only at a later step.
struct Inputs {
  std::vector<Tensor> init;
  std::vector<std::vector<Tensor>> grads;  // grads[step][tensor]
};

Inputs make_inputs(const std::vector<int64_t>& sizes, DType dtype, uint64_t seed, bool gaps) {
  Generator gen(seed);
  Inputs in;
  for (int64_t n : sizes) in.init.push_back(randn({n}, {}, &gen).to(dtype));
  for (int s = 0; s < kSteps; ++s) {
    std::vector<Tensor> g;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const bool skip = gaps && (k + s) % 3 == 0;
      const Tensor r = randn({sizes[k]}, {}, &gen).to(dtype);
      g.push_back(skip ? Tensor() : r);
    }
    in.grads.push_back(g);
  }
  return in;
}

// Parameters with their state after a run.
struct Result {
  std::vector<Tensor> params;
  std::vector<std::vector<Tensor>> state;  // per tensor, in the order of `names`

  // A per-element reference's parameter and state buffers (an empty buffer: none), as f64 tensors.
  void add(const std::vector<double>& p, std::initializer_list<std::vector<double>> buffers) {
    const int64_t n = static_cast<int64_t>(p.size());
    params.push_back(from_vector<double>(p, {n}));
    std::vector<Tensor>& s = state.emplace_back();
    for (const std::vector<double>& b : buffers) {
      s.push_back(b.empty() ? Tensor() : from_vector<double>(b, {n}));
    }
  }
};

// The state entries a check compares ("step" is a host scalar, checked through the updates).
Result collect(const optim::Optimizer& opt, const std::vector<Tensor>& ps,
               const std::vector<std::string>& names) {
  Result r;
  for (size_t k = 0; k < ps.size(); ++k) {
    r.params.push_back(ps[k].detach().cpu());
    std::vector<Tensor> st;
    for (const std::string& name : names) {
      auto it = opt.state(0, k).find(name);
      st.push_back(it == opt.state(0, k).end() ? Tensor() : it->second.cpu());
    }
    r.state.push_back(st);
  }
  return r;
}

// Runs kSteps steps of the optimizer `make` builds over fresh leaves on `dev`. With `misalign`,
// every other parameter and gradient is a view one element into a larger buffer, so its data
// pointer is not 16-byte aligned.
template <class Make>
Result run_fused(const Inputs& in, Device dev, Make make, const std::vector<std::string>& names,
                 bool misalign = false) {
  auto place = [&](const Tensor& t, size_t k) {
    if (!misalign || k % 2 == 0) return t.to(dev).clone();
    const Tensor pad = cat({zeros({1}, {.dtype = t.dtype()}), t}).to(dev);
    return pad.narrow(0, 1, t.numel());
  };
  std::vector<Tensor> ps;
  for (size_t k = 0; k < in.init.size(); ++k) {
    ps.push_back(place(in.init[k], k).detach().requires_grad_(true));
  }
  std::unique_ptr<optim::Optimizer> opt = make(ps);
  for (const std::vector<Tensor>& grads : in.grads) {
    for (size_t k = 0; k < ps.size(); ++k) {
      ps[k].set_grad(grads[k].defined() ? place(grads[k], k) : Tensor());
    }
    opt->step();
  }
  return collect(*opt, ps, names);
}

void expect_same(const Result& a, const Result& b, double atol, double rtol) {
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t k = 0; k < a.params.size(); ++k) {
    SCOPED_TRACE("tensor " + std::to_string(k) + " of " + std::to_string(a.params[k].numel()));
    EXPECT_TRUE(all_close(a.params[k], b.params[k], atol, rtol));
    for (size_t j = 0; j < a.state[k].size(); ++j) {
      ASSERT_EQ(a.state[k][j].defined(), b.state[k][j].defined()) << "state " << j;
      if (a.state[k][j].defined()) {
        EXPECT_TRUE(all_close(a.state[k][j], b.state[k][j], atol, rtol)) << "state " << j;
      }
    }
  }
}

struct DtypeTol {
  DType dtype;
  double tol;
};

// The fused step of every variant on the CPU (run_fused over `make(variant)`) against
// `reference(inputs, variant)`, from the same fresh inputs with gaps in each dtype, within its tol.
template <class Variant, class Make, class Reference>
void expect_matches(const std::vector<Variant>& variants, Make make,
                    const std::vector<std::string>& names, Reference reference,
                    std::initializer_list<DtypeTol> cases) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const DtypeTol c : cases) {
    const Inputs in = make_inputs(kSizes, c.dtype, seed, /*gaps=*/true);
    for (size_t v = 0; v < variants.size(); ++v) {
      SCOPED_TRACE("variant " + std::to_string(v) + ", " + dtype_name(c.dtype));
      expect_same(run_fused(in, Device::cpu(), make(variants[v]), names),
                  reference(in, variants[v]), c.tol, c.tol);
    }
  }
}

// --- SGD ---

const std::vector<SGDOptions> kSgdVariants = {
    {.lr = 0.1},
    {.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01},
    {.lr = 0.05, .momentum = 0.8, .weight_decay = 0.02, .nesterov = true},
    {.lr = 0.1, .momentum = 0.5, .weight_decay = 0.1, .maximize = true},
};
const std::vector<std::string> kSgdState = {"momentum_buffer"};

auto sgd_maker(const SGDOptions& o) {
  return [o](const std::vector<Tensor>& ps) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<SGD>(ps, o);
  };
}

// The SGD step of sgd.h one tensor op at a time, as the optimizer computed it before fusion.
Result sgd_unfused(const Inputs& in, const SGDOptions& o) {
  Result r;
  for (const Tensor& t : in.init) r.params.push_back(t.clone());
  std::vector<Tensor> bufs(in.init.size());
  for (const std::vector<Tensor>& grads : in.grads) {
    for (size_t k = 0; k < grads.size(); ++k) {
      if (!grads[k].defined()) continue;
      Tensor& p = r.params[k];
      Tensor d = grads[k];
      if (o.maximize) d = neg(d);
      if (o.weight_decay != 0.0) d = add(d, p, o.weight_decay);
      if (o.momentum != 0.0) {
        if (!bufs[k].defined()) {
          bufs[k] = d.clone();
        } else {
          bufs[k].mul_(o.momentum).add_(d, 1.0 - o.dampening);
        }
        d = o.nesterov ? add(d, bufs[k], o.momentum) : bufs[k];
      }
      p.add_(d, -o.lr);
    }
  }
  for (const Tensor& b : bufs) r.state.push_back({b});
  return r;
}

// The same, element by element in double.
Result sgd_by_element(const Inputs& in, const SGDOptions& o) {
  Result r;
  for (size_t k = 0; k < in.init.size(); ++k) {
    std::vector<double> p = in.init[k].to_vector<double>(), buf;
    for (const std::vector<Tensor>& grads : in.grads) {
      if (!grads[k].defined()) continue;
      const std::vector<double> g = grads[k].to_vector<double>();
      const bool first = buf.empty();
      if (first && o.momentum != 0.0) buf.resize(p.size());
      for (size_t i = 0; i < p.size(); ++i) {
        double d = o.maximize ? -g[i] : g[i];
        d += o.weight_decay * p[i];
        if (o.momentum != 0.0) {
          buf[i] = first ? d : o.momentum * buf[i] + (1.0 - o.dampening) * d;
          d = o.nesterov ? d + o.momentum * buf[i] : buf[i];
        }
        p[i] -= o.lr * d;
      }
    }
    r.add(p, {buf});
  }
  return r;
}

TEST(OptimFused, SgdMatchesUnfusedOpsExactly) {
  expect_matches(kSgdVariants, sgd_maker, kSgdState, sgd_unfused,
                 {{DType::f32, 0.0}, {DType::f64, 0.0}});
}

TEST(OptimFused, SgdMatchesPerElementReference) {
  expect_matches(
      kSgdVariants, sgd_maker, kSgdState, sgd_by_element,
      {{DType::f64, 1e-12}, {DType::f32, 1e-5}, {DType::bf16, 2e-2}, {DType::f16, 4e-3}});
}

// --- Adam and AdamW ---

struct AdamVariant {
  bool decoupled;
  AdamOptions o;
};

const std::vector<AdamVariant> kAdamVariants = {
    {false, {.lr = 0.01}},
    {false, {.lr = 0.01, .weight_decay = 0.1}},
    {false, {.lr = 0.01, .betas = {0.8, 0.9}, .weight_decay = 0.05, .amsgrad = true}},
    {true, {.lr = 0.01, .weight_decay = 0.1}},
    {true, {.lr = 0.02, .eps = 1e-6, .weight_decay = 0.1, .amsgrad = true, .maximize = true}},
};
const std::vector<std::string> kAdamState = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};

auto adam_maker(const AdamVariant& v) {
  return [v](const std::vector<Tensor>& ps) -> std::unique_ptr<optim::Optimizer> {
    const AdamOptions& o = v.o;
    if (!v.decoupled) return std::make_unique<Adam>(ps, o);
    return std::make_unique<AdamW>(ps, optim::AdamWOptions{.lr = o.lr,
                                                           .betas = o.betas,
                                                           .eps = o.eps,
                                                           .weight_decay = o.weight_decay,
                                                           .amsgrad = o.amsgrad,
                                                           .maximize = o.maximize});
  };
}

// The Adam step of adam.h one tensor op at a time, as the optimizer computed it before fusion.
Result adam_unfused(const Inputs& in, const AdamVariant& var) {
  const AdamOptions& o = var.o;
  const auto [beta1, beta2] = o.betas;
  Result r;
  for (const Tensor& t : in.init) r.params.push_back(t.clone());
  const size_t n = in.init.size();
  std::vector<Tensor> m(n), v(n), vmax(n);
  std::vector<double> steps(n, 0.0);
  for (const std::vector<Tensor>& grads : in.grads) {
    for (size_t k = 0; k < n; ++k) {
      if (!grads[k].defined()) continue;
      Tensor& p = r.params[k];
      if (!m[k].defined()) {
        m[k] = zeros_like(p);
        v[k] = zeros_like(p);
        if (o.amsgrad) vmax[k] = zeros_like(p);
      }
      const double t = ++steps[k];
      Tensor grad = grads[k];
      if (o.maximize) grad = neg(grad);
      if (o.weight_decay != 0.0) {
        if (var.decoupled) {
          p.mul_(1.0 - o.lr * o.weight_decay);
        } else {
          grad = add(grad, p, o.weight_decay);
        }
      }
      m[k].mul_(beta1).add_(grad, 1.0 - beta1);
      v[k].mul_(beta2).add_(mul(grad, grad), 1.0 - beta2);
      const double bias_correction1 = 1.0 - std::pow(beta1, t);
      const double bias_correction2 = 1.0 - std::pow(beta2, t);
      Tensor second = v[k];
      if (o.amsgrad) {
        vmax[k].copy_(maximum(vmax[k], v[k]));
        second = vmax[k];
      }
      Tensor denom = div(sqrt(second), std::sqrt(bias_correction2));
      denom.add_(o.eps);
      p.add_(div(m[k], denom), -(o.lr / bias_correction1));
    }
  }
  for (size_t k = 0; k < n; ++k) r.state.push_back({m[k], v[k], vmax[k]});
  return r;
}

// The same, element by element in double.
Result adam_by_element(const Inputs& in, const AdamVariant& var) {
  const AdamOptions& o = var.o;
  const auto [beta1, beta2] = o.betas;
  Result r;
  for (size_t k = 0; k < in.init.size(); ++k) {
    std::vector<double> p = in.init[k].to_vector<double>(), m, v, vmax;
    double t = 0.0;
    for (const std::vector<Tensor>& grads : in.grads) {
      if (!grads[k].defined()) continue;
      const std::vector<double> g = grads[k].to_vector<double>();
      if (m.empty()) {
        m.assign(p.size(), 0.0);
        v.assign(p.size(), 0.0);
        if (o.amsgrad) vmax.assign(p.size(), 0.0);
      }
      t += 1.0;
      for (size_t i = 0; i < p.size(); ++i) {
        double gi = o.maximize ? -g[i] : g[i];
        if (var.decoupled) {
          p[i] *= 1.0 - o.lr * o.weight_decay;
        } else {
          gi += o.weight_decay * p[i];
        }
        m[i] = beta1 * m[i] + (1.0 - beta1) * gi;
        v[i] = beta2 * v[i] + (1.0 - beta2) * gi * gi;
        double second = v[i];
        if (o.amsgrad) second = vmax[i] = std::max(vmax[i], v[i]);
        const double denom = std::sqrt(second) / std::sqrt(1.0 - std::pow(beta2, t)) + o.eps;
        p[i] -= o.lr / (1.0 - std::pow(beta1, t)) * m[i] / denom;
      }
    }
    r.add(p, {m, v, vmax});
  }
  return r;
}

TEST(OptimFused, AdamMatchesUnfusedOpsExactly) {
  expect_matches(kAdamVariants, adam_maker, kAdamState, adam_unfused,
                 {{DType::f32, 0.0}, {DType::f64, 0.0}});
}

TEST(OptimFused, AdamMatchesPerElementReference) {
  // No f16: (1 - beta2) g^2 falls below f16's range for small gradients, and the step then
  // divides by eps alone; bf16 has f32's range.
  expect_matches(kAdamVariants, adam_maker, kAdamState, adam_by_element,
                 {{DType::f64, 1e-10}, {DType::f32, 1e-4}, {DType::bf16, 3e-2}});
}

// --- layout and bookkeeping ---

// --- RMSprop and Adagrad (Note [optimizer rules]) ---

const std::vector<RMSpropOptions> kRmspropVariants = {
    {.lr = 0.01},
    {.lr = 0.01, .alpha = 0.9, .weight_decay = 0.1, .momentum = 0.9},
    {.lr = 0.005, .eps = 1e-6, .centered = true},
    {.lr = 0.01, .momentum = 0.5, .centered = true, .maximize = true},
};
const std::vector<std::string> kRmspropState = {"square_avg", "momentum_buffer", "grad_avg"};

auto rmsprop_maker(const RMSpropOptions& o) {
  return [o](const std::vector<Tensor>& ps) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<RMSprop>(ps, o);
  };
}

// The RMSprop step of rmsprop.h one tensor op at a time.
Result rmsprop_unfused(const Inputs& in, const RMSpropOptions& o) {
  Result r;
  for (const Tensor& t : in.init) r.params.push_back(t.clone());
  const size_t n = in.init.size();
  std::vector<Tensor> sq(n), buf(n), mean(n);
  for (const std::vector<Tensor>& grads : in.grads) {
    for (size_t k = 0; k < n; ++k) {
      if (!grads[k].defined()) continue;
      Tensor& p = r.params[k];
      if (!sq[k].defined()) {
        sq[k] = zeros_like(p);
        if (o.momentum > 0.0) buf[k] = zeros_like(p);
        if (o.centered) mean[k] = zeros_like(p);
      }
      Tensor grad = grads[k];
      if (o.maximize) grad = neg(grad);
      if (o.weight_decay != 0.0) grad = add(grad, p, o.weight_decay);
      sq[k].mul_(o.alpha).add_(mul(grad, grad), 1.0 - o.alpha);
      Tensor avg;
      if (o.centered) {
        mean[k].mul_(o.alpha).add_(grad, 1.0 - o.alpha);
        avg = sqrt(sub(sq[k], mul(mean[k], mean[k])));
      } else {
        avg = sqrt(sq[k]);
      }
      avg.add_(o.eps);
      if (o.momentum > 0.0) {
        buf[k].mul_(o.momentum).add_(div(grad, avg));
        p.add_(buf[k], -o.lr);
      } else {
        p.add_(div(grad, avg), -o.lr);
      }
    }
  }
  for (size_t k = 0; k < n; ++k) r.state.push_back({sq[k], buf[k], mean[k]});
  return r;
}

// PyTorch's documented RMSprop algorithm, element by element in double.
Result rmsprop_by_element(const Inputs& in, const RMSpropOptions& o) {
  Result r;
  for (size_t k = 0; k < in.init.size(); ++k) {
    std::vector<double> p = in.init[k].to_vector<double>(), v, b, m;
    for (const std::vector<Tensor>& grads : in.grads) {
      if (!grads[k].defined()) continue;
      const std::vector<double> g = grads[k].to_vector<double>();
      if (v.empty()) {
        v.assign(p.size(), 0.0);
        if (o.momentum > 0.0) b.assign(p.size(), 0.0);
        if (o.centered) m.assign(p.size(), 0.0);
      }
      for (size_t i = 0; i < p.size(); ++i) {
        double gi = o.maximize ? -g[i] : g[i];
        gi += o.weight_decay * p[i];
        v[i] = o.alpha * v[i] + (1.0 - o.alpha) * gi * gi;
        double vt = v[i];
        if (o.centered) {
          m[i] = o.alpha * m[i] + (1.0 - o.alpha) * gi;
          vt -= m[i] * m[i];
        }
        const double d = std::sqrt(vt) + o.eps;
        if (o.momentum > 0.0) {
          b[i] = o.momentum * b[i] + gi / d;
          p[i] -= o.lr * b[i];
        } else {
          p[i] -= o.lr * gi / d;
        }
      }
    }
    r.add(p, {v, b, m});
  }
  return r;
}

TEST(OptimFused, RmspropMatchesUnfusedOpsExactly) {
  expect_matches(kRmspropVariants, rmsprop_maker, kRmspropState, rmsprop_unfused,
                 {{DType::f32, 0.0}, {DType::f64, 0.0}});
}

TEST(OptimFused, RmspropMatchesPerElementReference) {
  expect_matches(kRmspropVariants, rmsprop_maker, kRmspropState, rmsprop_by_element,
                 {{DType::f64, 1e-10}, {DType::f32, 1e-4}, {DType::bf16, 3e-2}});
}

const std::vector<AdagradOptions> kAdagradVariants = {
    {.lr = 0.1},
    {.lr = 0.1, .lr_decay = 0.01, .weight_decay = 0.05},
    {.lr = 0.05, .initial_accumulator_value = 0.1, .eps = 1e-6, .maximize = true},
};
const std::vector<std::string> kAdagradState = {"sum"};

auto adagrad_maker(const AdagradOptions& o) {
  return [o](const std::vector<Tensor>& ps) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<Adagrad>(ps, o);
  };
}

// The Adagrad step of adagrad.h one tensor op at a time.
Result adagrad_unfused(const Inputs& in, const AdagradOptions& o) {
  Result r;
  for (const Tensor& t : in.init) r.params.push_back(t.clone());
  const size_t n = in.init.size();
  std::vector<Tensor> sum(n);
  std::vector<double> steps(n, 0.0);
  for (const std::vector<Tensor>& grads : in.grads) {
    for (size_t k = 0; k < n; ++k) {
      if (!grads[k].defined()) continue;
      Tensor& p = r.params[k];
      if (!sum[k].defined()) sum[k] = full_like(p, o.initial_accumulator_value);
      const double t = ++steps[k];
      Tensor grad = grads[k];
      if (o.maximize) grad = neg(grad);
      if (o.weight_decay != 0.0) grad = add(grad, p, o.weight_decay);
      sum[k].add_(mul(grad, grad));
      Tensor std_dev = sqrt(sum[k]);
      std_dev.add_(o.eps);
      p.add_(div(grad, std_dev), -(o.lr / (1.0 + (t - 1.0) * o.lr_decay)));
    }
  }
  for (size_t k = 0; k < n; ++k) r.state.push_back({sum[k]});
  return r;
}

// PyTorch's documented Adagrad algorithm, element by element in double.
Result adagrad_by_element(const Inputs& in, const AdagradOptions& o) {
  Result r;
  for (size_t k = 0; k < in.init.size(); ++k) {
    std::vector<double> p = in.init[k].to_vector<double>(), sum;
    double t = 0.0;
    for (const std::vector<Tensor>& grads : in.grads) {
      if (!grads[k].defined()) continue;
      const std::vector<double> g = grads[k].to_vector<double>();
      if (sum.empty()) sum.assign(p.size(), o.initial_accumulator_value);
      t += 1.0;
      const double clr = o.lr / (1.0 + (t - 1.0) * o.lr_decay);
      for (size_t i = 0; i < p.size(); ++i) {
        double gi = o.maximize ? -g[i] : g[i];
        gi += o.weight_decay * p[i];
        sum[i] += gi * gi;
        p[i] -= clr * gi / (std::sqrt(sum[i]) + o.eps);
      }
    }
    r.add(p, {sum});
  }
  return r;
}

TEST(OptimFused, AdagradMatchesUnfusedOpsExactly) {
  expect_matches(kAdagradVariants, adagrad_maker, kAdagradState, adagrad_unfused,
                 {{DType::f32, 0.0}, {DType::f64, 0.0}});
}

TEST(OptimFused, AdagradMatchesPerElementReference) {
  expect_matches(kAdagradVariants, adagrad_maker, kAdagradState, adagrad_by_element,
                 {{DType::f64, 1e-10}, {DType::f32, 1e-4}, {DType::bf16, 3e-2}});
}

TEST(OptimFused, NonContiguousParameterAndGradient) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  const Tensor init = randn({5, 7}, {}, &gen);
  const Tensor grad = randn({7, 5}, {}, &gen);
  // The same values, once contiguous and once as a transposed view (and a transposed gradient).
  Tensor dense = transpose(init, 0, 1).clone().requires_grad_(true);
  Tensor strided = init.clone().detach();
  strided = transpose(strided, 0, 1).detach().requires_grad_(true);
  ASSERT_FALSE(strided.is_contiguous());
  dense.set_grad(grad.clone());
  strided.set_grad(transpose(transpose(grad, 0, 1).clone(), 0, 1));
  ASSERT_FALSE(strided.grad().is_contiguous());
  Adam a({dense}, {.lr = 0.1, .amsgrad = true});
  Adam b({strided}, {.lr = 0.1, .amsgrad = true});
  for (int s = 0; s < 2; ++s) {
    a.step();
    b.step();
  }
  EXPECT_TRUE(all_close(strided, dense, 0.0, 0.0));
  EXPECT_TRUE(all_close(b.state(0, 0).at("exp_avg"), a.state(0, 0).at("exp_avg"), 0.0, 0.0));
  EXPECT_FALSE(all_close(dense, transpose(init, 0, 1), 0.0, 0.0));
}

// Module::to() changes the parameters in place; state made before it must follow them (a kernel
// reading f32 moments as f64 would read past their end).
TEST(OptimFused, StateFollowsParametersMovedToAnotherDtype) {
  auto lin = std::make_shared<nn::Linear>(3, 2);
  Adam adam(lin->parameters(), {.lr = 0.1});
  SGD sgd(lin->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (Tensor& p : lin->parameters()) p.set_grad(full(p.shape(), 0.5));
  adam.step();
  sgd.step();
  const Tensor m1 = adam.state(0, 0).at("exp_avg").clone();
  const Tensor b1 = sgd.state(0, 0).at("momentum_buffer").clone();
  lin->to(DType::f64);
  for (Tensor& p : lin->parameters()) p.set_grad(full(p.shape(), 0.25, {.dtype = DType::f64}));
  adam.step();
  sgd.step();
  const Tensor m2 = adam.state(0, 0).at("exp_avg");
  const Tensor b2 = sgd.state(0, 0).at("momentum_buffer");
  EXPECT_EQ(m2.dtype(), DType::f64);
  EXPECT_EQ(b2.dtype(), DType::f64);
  // exp_avg = beta1 * m1 + (1 - beta1) * g; momentum = 0.9 * b1 + g (no dampening).
  EXPECT_TRUE(all_close(m2, add(mul(m1.to(DType::f64), 0.9), 0.1 * 0.25), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(b2, add(mul(b1.to(DType::f64), 0.9), 0.25), 1e-12, 1e-12));
  EXPECT_EQ(lin->weight.dtype(), DType::f64);
}

TEST(OptimFused, StepBumpsVersionsAndSkipsEmptyTensors) {
  Tensor p = ones({4}).requires_grad_(true);
  Tensor empty_p = zeros({0}).requires_grad_(true);
  Tensor no_grad = ones({2}).requires_grad_(true);
  SGD opt({p, empty_p, no_grad}, {.lr = 0.5, .momentum = 0.9});
  p.set_grad(full({4}, 2.0));
  empty_p.set_grad(zeros({0}));
  const uint32_t before = p.version();
  opt.step();
  EXPECT_GT(p.version(), before);
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>(4, 0.0f)));
  EXPECT_EQ(opt.state(0, 1).at("momentum_buffer").numel(), 0);
  EXPECT_TRUE(opt.state(0, 2).empty());
  EXPECT_EQ(no_grad.to_vector<float>(), (std::vector<float>(2, 1.0f)));
}

// --- CUDA against CPU ---

// More tensors than one launch holds, of sizes with every remainder modulo the vector widths, and
// one that spans many blocks.
std::vector<int64_t> many_sizes() {
  std::vector<int64_t> sizes = {1, 3, 1000, 4097, 100003};
  for (int k = 0; k < 125; ++k) sizes.push_back(1 + (k * 37) % 509);
  return sizes;
}

// The fused step of every variant on CUDA, with and without misaligned tensors, against the CPU,
// over many_sizes() in each of `dtypes`.
template <class Variant, class Make>
void expect_cuda_matches_cpu(const std::vector<Variant>& variants, Make make,
                             const std::vector<std::string>& names,
                             std::initializer_list<DType> dtypes) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (DType dtype : dtypes) {
    const Inputs in = make_inputs(many_sizes(), dtype, seed, /*gaps=*/true);
    const double rtol = dtype == DType::f32 ? 1e-6 : dtype == DType::f64 ? 1e-12 : 1e-2;
    for (size_t v = 0; v < variants.size(); ++v) {
      for (bool misalign : {false, true}) {
        SCOPED_TRACE("variant " + std::to_string(v) + ", " + dtype_name(dtype) +
                     (misalign ? ", misaligned" : ""));
        testing::poison_cuda_cache();
        const Result gpu = run_fused(in, Device::cuda(), make(variants[v]), names, misalign);
        const Result cpu = run_fused(in, Device::cpu(), make(variants[v]), names);
        expect_same(gpu, cpu, 1e-6, rtol);
      }
    }
  }
}

TEST(CudaOptimFused, SgdMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  expect_cuda_matches_cpu(kSgdVariants, sgd_maker, kSgdState,
                          {DType::f32, DType::f64, DType::bf16, DType::f16});
}

TEST(CudaOptimFused, AdamMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  // No f16, as in AdamMatchesPerElementReference.
  expect_cuda_matches_cpu(kAdamVariants, adam_maker, kAdamState,
                          {DType::f32, DType::f64, DType::bf16});
}

TEST(CudaOptimFused, RmspropMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  expect_cuda_matches_cpu(kRmspropVariants, rmsprop_maker, kRmspropState,
                          {DType::f32, DType::f64, DType::bf16});
}

TEST(CudaOptimFused, AdagradMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  expect_cuda_matches_cpu(kAdagradVariants, adagrad_maker, kAdagradState,
                          {DType::f32, DType::f64, DType::bf16});
}

// A group whose parameters live on CPU and CUDA: one kernel call per device, each on its own.
TEST(CudaOptimFused, MixedDevicesInOneGroup) {
  SINTER_REQUIRE_CUDA();
  const Inputs in = make_inputs(kSizes, DType::f32, testing::fresh_seed(), /*gaps=*/false);
  std::vector<Tensor> ps;
  for (size_t k = 0; k < in.init.size(); ++k) {
    const Device dev = k % 2 ? Device::cuda() : Device::cpu();
    ps.push_back(in.init[k].to(dev).clone().requires_grad_(true));
  }
  Adam opt(ps, {.lr = 0.01, .amsgrad = true});
  for (const std::vector<Tensor>& grads : in.grads) {
    for (size_t k = 0; k < ps.size(); ++k) ps[k].set_grad(grads[k].to(ps[k].device()));
    opt.step();
  }
  const Result cpu =
      run_fused(in, Device::cpu(), adam_maker({false, {.lr = 0.01, .amsgrad = true}}), kAdamState);
  expect_same(collect(opt, ps, kAdamState), cpu, 1e-6, 1e-6);
}

}  // namespace
}  // namespace sinter

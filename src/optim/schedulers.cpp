// Learning-rate schedulers: closed forms of the step count, applied to the optimizer's groups.
#include "sinter/optim/schedulers.h"

#include <cmath>
#include <numbers>
#include <string>
#include <utility>

namespace sinter::optim {

namespace {

Tensor scalar_tensor(double v) { return full({}, v, {.dtype = DType::f64}); }

double scalar_entry(const StateDict& dict, const std::string& key) {
  auto it = dict.find(key);
  SINTER_CHECK(it != dict.end(), "LRScheduler::load_state_dict: missing \"", key, "\"");
  SINTER_CHECK(it->second.defined() && it->second.numel() == 1, "LRScheduler::load_state_dict: \"",
               key, "\" must hold one value");
  return it->second.item<double>();
}

}  // namespace

// --- LRScheduler ---

LRScheduler::LRScheduler(Optimizer& optimizer, std::vector<double> base_lrs)
    : optimizer_(optimizer), base_lrs_(std::move(base_lrs)) {
  if (base_lrs_.empty()) {
    for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) {
      base_lrs_.push_back(optimizer_.lr(g));
    }
  }
}

LRScheduler::~LRScheduler() = default;

void LRScheduler::initial_step() { apply(0); }

void LRScheduler::step() { apply(last_epoch_ + 1); }

void LRScheduler::apply(int64_t t) {
  SINTER_CHECK(optimizer_.num_param_groups() == base_lrs_.size(), "LRScheduler: the optimizer has ",
               optimizer_.num_param_groups(), " param groups, the scheduler was made for ",
               base_lrs_.size());
  std::vector<double> lrs(base_lrs_.size());
  for (size_t g = 0; g < lrs.size(); ++g) lrs[g] = lr_at(g, t);
  for (size_t g = 0; g < lrs.size(); ++g) optimizer_.set_lr(g, lrs[g]);
  apply_extra(t);
  last_epoch_ = t;
  last_lr_ = std::move(lrs);
}

StateDict LRScheduler::state_dict() const {
  StateDict dict;
  dict["last_epoch"] = scalar_tensor(static_cast<double>(last_epoch_));
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    dict["base_lrs." + std::to_string(g)] = scalar_tensor(base_lrs_[g]);
    dict["last_lr." + std::to_string(g)] = scalar_tensor(last_lr_.at(g));
  }
  return dict;
}

void LRScheduler::load_state_dict(const StateDict& dict) {
  const size_t n = base_lrs_.size();
  SINTER_CHECK(dict.size() == 1 + 2 * n, "LRScheduler::load_state_dict: expected ", 1 + 2 * n,
               " entries for ", n, " param groups, got ", dict.size());
  const double epoch = scalar_entry(dict, "last_epoch");
  SINTER_CHECK(epoch >= 0 && epoch == std::floor(epoch),
               "LRScheduler::load_state_dict: last_epoch ", epoch, " is not a step count");
  std::vector<double> base(n), last(n);
  for (size_t g = 0; g < n; ++g) {
    base[g] = scalar_entry(dict, "base_lrs." + std::to_string(g));
    last[g] = scalar_entry(dict, "last_lr." + std::to_string(g));
  }
  last_epoch_ = static_cast<int64_t>(epoch);
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
}

// --- StepLR ---

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  SINTER_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  SINTER_CHECK(gamma >= 0.0, "StepLR: gamma must be >= 0, got ", gamma);
  initial_step();
}

double StepLR::lr_at(size_t group, int64_t t) const {
  return base_lrs_.at(group) * std::pow(gamma_, static_cast<double>(t / step_size_));
}

// --- CosineAnnealingLR ---

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min,
                                     int64_t warmup_steps)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min), warmup_(warmup_steps) {
  SINTER_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  SINTER_CHECK(warmup_steps >= 0 && warmup_steps < T_max,
               "CosineAnnealingLR: warmup_steps must be in [0, T_max = ", T_max, "), got ",
               warmup_steps);
  SINTER_CHECK(eta_min >= 0.0, "CosineAnnealingLR: eta_min must be >= 0, got ", eta_min);
  initial_step();
}

double CosineAnnealingLR::lr_at(size_t group, int64_t t) const {
  const double base = base_lrs_.at(group);
  if (t < warmup_) return base * static_cast<double>(t) / static_cast<double>(warmup_);
  const double x = static_cast<double>(t - warmup_) / static_cast<double>(t_max_ - warmup_);
  return eta_min_ + (base - eta_min_) * (1.0 + std::cos(std::numbers::pi * x)) / 2.0;
}

// --- OneCycleLR ---

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps,
                       const OneCycleLROptions& options)
    : LRScheduler(optimizer,
                  std::vector<double>(optimizer.num_param_groups(), max_lr / options.div_factor)),
      total_steps_(total_steps),
      options_(options) {
  const OneCycleLROptions& o = options_;
  SINTER_CHECK(total_steps > 0, "OneCycleLR: total_steps must be positive, got ", total_steps);
  SINTER_CHECK(max_lr >= 0.0, "OneCycleLR: max_lr must be >= 0, got ", max_lr);
  SINTER_CHECK(o.pct_start >= 0.0 && o.pct_start <= 1.0,
               "OneCycleLR: pct_start must be in [0, 1], got ", o.pct_start);
  SINTER_CHECK(o.div_factor > 0.0 && o.final_div_factor > 0.0,
               "OneCycleLR: div_factor and final_div_factor must be positive, got ", o.div_factor,
               " and ", o.final_div_factor);
  const double initial = max_lr / o.div_factor;
  const double min = initial / o.final_div_factor;
  const double steps = static_cast<double>(total_steps);
  const double last = steps - 1.0;
  if (o.three_phase) {
    phases_ = {{o.pct_start * steps - 1.0, initial, max_lr, o.max_momentum, o.base_momentum},
               {2.0 * o.pct_start * steps - 2.0, max_lr, initial, o.base_momentum, o.max_momentum},
               {last, initial, min, o.max_momentum, o.max_momentum}};
  } else {
    phases_ = {{o.pct_start * steps - 1.0, initial, max_lr, o.max_momentum, o.base_momentum},
               {last, max_lr, min, o.base_momentum, o.max_momentum}};
  }
  // A phase of no steps would divide by zero when located.
  double start = 0.0;
  for (const Phase& ph : phases_) {
    SINTER_CHECK(ph.end_step > start, "OneCycleLR: pct_start ", o.pct_start, " with total_steps ",
                 total_steps, " leaves a phase without steps (it ends at step ", ph.end_step,
                 ", starting at ", start, ")");
    start = ph.end_step;
  }
  if (o.cycle_momentum) {
    SINTER_CHECK(!optimizer.momentum_name().empty(),
                 "OneCycleLR: cycle_momentum needs an "
                 "optimizer with momentum or beta1; ",
                 optimizer.name(), " has neither");
    SINTER_CHECK(o.base_momentum >= 0.0 && o.base_momentum <= o.max_momentum,
                 "OneCycleLR: need 0 <= base_momentum <= max_momentum, got ", o.base_momentum,
                 " and ", o.max_momentum);
  }
  initial_step();
}

double OneCycleLR::anneal(double a, double b, double pct) const {
  if (options_.anneal_strategy == AnnealStrategy::Cos) {
    return b + (a - b) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
  }
  return (b - a) * pct + a;
}

void OneCycleLR::locate(int64_t t, const Phase** phase, double* pct) const {
  SINTER_CHECK(t <= total_steps_, "OneCycleLR: stepped ", t, " times, but total_steps is ",
               total_steps_);
  const double s = static_cast<double>(t);
  double start = 0.0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const Phase& ph = phases_[i];
    if (s <= ph.end_step || i + 1 == phases_.size()) {
      *phase = &ph;
      *pct = (s - start) / (ph.end_step - start);
      return;
    }
    start = ph.end_step;
  }
}

double OneCycleLR::lr_at(size_t group, int64_t t) const {
  (void)group;
  const Phase* ph = nullptr;
  double pct = 0.0;
  locate(t, &ph, &pct);
  return anneal(ph->lr_start, ph->lr_end, pct);
}

double OneCycleLR::momentum_at(int64_t t) const {
  const Phase* ph = nullptr;
  double pct = 0.0;
  locate(t, &ph, &pct);
  return anneal(ph->momentum_start, ph->momentum_end, pct);
}

void OneCycleLR::apply_extra(int64_t t) {
  if (!options_.cycle_momentum) return;
  const double m = momentum_at(t);
  for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) {
    optimizer_.set_hyperparameter(g, optimizer_.momentum_name(), m);
  }
}

}  // namespace sinter::optim

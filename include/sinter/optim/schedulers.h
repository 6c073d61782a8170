// Learning-rate schedulers: StepLR, CosineAnnealingLR (with linear warm-up) and OneCycleLR. Each
// sets its optimizer's learning rates from a closed form of the step count.
#pragma once

#include <cstdint>
#include <vector>

#include "sinter/core/noncopyable.h"
#include "sinter/optim/optimizer.h"
#include "sinter/state_dict.h"

namespace sinter::optim {

// Construction sets every group's lr to its value at step 0 (PyTorch's initial step); each step()
// advances the count t by one and sets the lr for the new t. Call it after optimizer.step(). The
// scheduler keeps a reference to the optimizer, which must outlive it.
class LRScheduler : NonCopyable {
 public:
  virtual ~LRScheduler();

  void step();
  // The learning rates this scheduler set last, one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  // The learning rate of `group` at step t.
  virtual double lr_at(size_t group, int64_t t) const = 0;

  // "last_epoch", "base_lrs.<g>", "last_lr.<g>": 0-dim f64 tensors. Loading does not change the
  // optimizer, whose own state dict holds its learning rates.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& dict);

 protected:
  // base_lrs: each group's starting lr (the optimizer's current lrs when empty).
  explicit LRScheduler(Optimizer& optimizer, std::vector<double> base_lrs = {});
  // Derived constructors end with this: sets the lrs for step 0.
  void initial_step();
  // Sets what else the schedule drives at step t (OneCycleLR's momentum).
  virtual void apply_extra(int64_t /*t*/) {}

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;

 private:
  void apply(int64_t t);
  int64_t last_epoch_ = -1;
  std::vector<double> last_lr_;
};

// lr(t) = base_lr * gamma^floor(t / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(size_t group, int64_t t) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// With W = warmup_steps (0 <= W < T_max):
//   t < W:   lr(t) = base_lr * t / W                        (linear from 0; lr(0) = 0)
//   t >= W:  lr(t) = eta_min + (base_lr - eta_min) * (1 + cos(pi * (t - W) / (T_max - W))) / 2
// so lr reaches base_lr at t = W and eta_min at t = T_max; past T_max the cosine continues (rising
// again), as PyTorch's closed form does. With W = 0 this is PyTorch's CosineAnnealingLR.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0,
                    int64_t warmup_steps = 0);
  double lr_at(size_t group, int64_t t) const override;

 private:
  int64_t t_max_;
  double eta_min_;
  int64_t warmup_;
};

enum class AnnealStrategy { Cos, Linear };

struct OneCycleLROptions {
  double pct_start = 0.3;  // the fraction of steps spent raising the lr
  AnnealStrategy anneal_strategy = AnnealStrategy::Cos;
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25.0;       // initial_lr = max_lr / div_factor
  double final_div_factor = 1e4;  // min_lr = initial_lr / final_div_factor
  bool three_phase = false;
};

// PyTorch's OneCycleLR. Phases end at steps e1 = pct_start * total_steps - 1 and e2 = total_steps
// - 1 (three_phase: e1, e2 = 2 pct_start * total_steps - 2, e3 = total_steps - 1); within a phase
// from step s to e the lr goes from a to b as anneal(a, b, (t - s) / (e - s)), where
//   cos:    b + (a - b) (1 + cos(pi * pct)) / 2        linear:  a + (b - a) pct
// lr: initial_lr -> max_lr -> min_lr (three_phase: initial -> max -> initial -> min). With
// cycle_momentum the optimizer's momentum (SGD's momentum, Adam's beta1) goes the opposite way:
// max_momentum -> base_momentum -> max_momentum. Stepping past total_steps is an error.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps,
             const OneCycleLROptions& options = {});
  double lr_at(size_t group, int64_t t) const override;
  double momentum_at(int64_t t) const;

 private:
  struct Phase {
    double end_step;
    double lr_start, lr_end;
    double momentum_start, momentum_end;
  };
  double anneal(double a, double b, double pct) const;
  // The phase holding step t and the fraction of it done.
  void locate(int64_t t, const Phase** phase, double* pct) const;
  void apply_extra(int64_t t) override;

  int64_t total_steps_;
  OneCycleLROptions options_;
  std::vector<Phase> phases_;
};

}  // namespace sinter::optim

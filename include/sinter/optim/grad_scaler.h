// GradScaler: loss scaling for mixed-precision training, chiefly f16, whose narrow range lets small
// gradients underflow to zero. The loss is multiplied by a large scale before backward; unscale_
// divides the gradients by it again in one fused pass that also notes, on the device, whether any
// was inf or NaN; step skips the optimizer step when one was; update backs the scale off after such
// a step and grows it after growth_interval steps without one.
//
//   optim::GradScaler scaler;
//   scaler.scale(loss).backward();
//   scaler.unscale_(opt);                          // optional: before clipping
//   optim::clip_grad_norm_(params, 1.0);
//   scaler.step(opt);                              // opt.step(), unless a gradient was not finite
//   scaler.update();
//
// With gradient accumulation: scale() and backward() per micro-batch, then unscale_/step/update
// once. In data parallel training, give the process group: the inf/NaN flag is max-reduced across
// ranks in unscale_, so that every rank skips the same steps.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "sinter/dist.h"
#include "sinter/optim/optimizer.h"
#include "sinter/state_dict.h"
#include "sinter/tensor.h"

namespace sinter::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;      // > 1
  double backoff_factor = 0.5;     // in (0, 1)
  int64_t growth_interval = 2000;  // finite steps before the scale grows; >= 1
  bool enabled = true;             // false: every call passes through (scale 1, every step runs)
  std::shared_ptr<dist::ProcessGroup> process_group = nullptr;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss times the scale (kept as a 0-dim f32 tensor on loss's device, made at the first call).
  Tensor scale(const Tensor& loss);
  // Divides opt's gradients by the scale in place (Note [gradient unscale]: one pass per device and
  // dtype) and records whether any was inf or NaN, on the device: no host synchronization. At most
  // once per optimizer between two update() calls.
  void unscale_(Optimizer& opt);
  // opt.step() unless a gradient was inf or NaN; unscales first if unscale_ was not called. Reads
  // the flag (one synchronization). Returns whether the step ran.
  bool step(Optimizer& opt);
  // Adjusts the scale for the next iteration from the flags of the optimizers stepped since the
  // last update: backoff_factor times after a non-finite gradient, growth_factor times after
  // growth_interval finite steps in a row. On the device.
  void update();

  double get_scale() const;        // synchronizes; init_scale before the first scale()
  int64_t growth_tracker() const;  // finite steps since the scale last changed
  bool is_enabled() const { return options_.enabled; }

  // "scale" (f32), "growth_tracker" (i64), "growth_factor", "backoff_factor", "growth_interval"
  // (f64), all 0-dim on the CPU. Loading checks every key and value before changing anything.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& dict);

 private:
  struct Pending {
    Tensor found_inf;  // 0-dim f32 on the scale's device, > 0 when a gradient was not finite
    bool stepped = false;
  };
  void ensure_state(Device device);

  GradScalerOptions options_;
  Tensor scale_;           // 0-dim f32
  Tensor growth_tracker_;  // 0-dim i64, with scale_
  std::map<const Optimizer*, Pending> pending_;
};

}  // namespace sinter::optim

// GradScaler (sinter/optim/grad_scaler.h): the scale and its growth tracker live on the device and
// change by tensor ops; the gradients are unscaled by the fused kernel of Note [gradient unscale].
#include "sinter/optim/grad_scaler.h"

#include <cmath>
#include <tuple>
#include <vector>

#include "internal/dispatch.h"
#include "kern/optim.h"
#include "sinter/autograd.h"
#include "sinter/core/error.h"
#include "sinter/ops.h"

namespace sinter::optim {
namespace {

void check_options(const GradScalerOptions& o) {
  SINTER_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0,
               "GradScaler: init_scale must be "
               "positive and finite, got ",
               o.init_scale);
  SINTER_CHECK(o.growth_factor > 1.0 && std::isfinite(o.growth_factor),
               "GradScaler: growth_factor must be > 1, got ", o.growth_factor);
  SINTER_CHECK(o.backoff_factor > 0.0 && o.backoff_factor < 1.0,
               "GradScaler: backoff_factor must be in (0, 1), got ", o.backoff_factor);
  SINTER_CHECK(o.growth_interval >= 1, "GradScaler: growth_interval must be >= 1, got ",
               o.growth_interval);
}

double scalar_of(const StateDict& dict, const char* key) {
  const auto it = dict.find(key);
  SINTER_CHECK(it != dict.end(), "GradScaler::load_state_dict: missing \"", key, "\"");
  SINTER_CHECK(it->second.numel() == 1, "GradScaler::load_state_dict: \"", key,
               "\" must hold one value, got shape ", it->second.shape());
  return it->second.to(DType::f64).item<double>();
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(std::move(options)) {
  check_options(options_);
}

void GradScaler::ensure_state(Device device) {
  if (!scale_.defined()) {
    scale_ = full({}, options_.init_scale, {.dtype = DType::f32, .device = device});
    growth_tracker_ = zeros({}, {.dtype = DType::i64, .device = device});
  } else if (scale_.device() != device) {
    scale_ = scale_.to(device);
    growth_tracker_ = growth_tracker_.to(device);
  }
}

Tensor GradScaler::scale(const Tensor& loss) {
  SINTER_CHECK(loss.defined(), "GradScaler::scale: undefined loss");
  if (!options_.enabled) return loss;
  SINTER_CHECK(is_floating(loss.dtype()), "GradScaler::scale: the loss must be floating, got ",
               loss.dtype());
  {
    NoGradGuard ng;
    ensure_state(loss.device());
  }
  return mul(loss, scale_);
}

void GradScaler::unscale_(Optimizer& opt) {
  if (!options_.enabled) return;
  SINTER_CHECK(scale_.defined(), "GradScaler::unscale_: no scale yet; call scale(loss) first");
  Pending& pending = pending_[&opt];
  SINTER_CHECK(!pending.found_inf.defined(),
               "GradScaler::unscale_: already called for this "
               "optimizer since the last update()");
  NoGradGuard ng;
  // Gradients grouped by device and dtype, each group one kernel call with its own flag.
  std::map<std::tuple<int, int, DType>, std::vector<Tensor>> groups;
  for (const Tensor& p : opt.parameters()) {
    const Tensor g = p.grad();
    if (!g.defined() || g.numel() == 0) continue;
    SINTER_CHECK(g.is_contiguous(), "GradScaler::unscale_: a gradient of shape ", g.shape(),
                 " is not contiguous");
    SINTER_CHECK(is_floating(g.dtype()), "GradScaler::unscale_: a gradient of dtype ", g.dtype());
    groups[{static_cast<int>(g.device().type), g.device().index, g.dtype()}].push_back(g);
  }
  const Tensor inv = div(1.0, scale_);  // f32, on the scale's device
  Tensor found = zeros({}, {.dtype = DType::f32, .device = scale_.device()});
  for (const auto& [key, grads] : groups) {
    const Device device = grads[0].device();
    const Tensor inv_here = inv.to(device);
    Tensor found_here = zeros({}, {.dtype = DType::f32, .device = device});
    std::vector<kern::UnscaleTensor> list;
    for (const Tensor& g : grads) list.push_back({g.data_ptr(), g.numel()});
    const kern::UnscaleHyper h{static_cast<const float*>(inv_here.data_ptr()),
                               static_cast<float*>(found_here.data_ptr())};
    SINTER_DISPATCH(device, unscale_grads, std::get<2>(key), list.data(),
                    static_cast<int64_t>(list.size()), h);
    for (const Tensor& g : grads) g.bump_version();
    found = add(found, found_here.to(scale_.device()));
  }
  if (options_.process_group) options_.process_group->all_reduce(found, dist::ReduceOp::Max);
  pending.found_inf = found;
}

bool GradScaler::step(Optimizer& opt) {
  if (!options_.enabled) {
    opt.step();
    return true;
  }
  Pending& pending = pending_[&opt];
  SINTER_CHECK(!pending.stepped,
               "GradScaler::step: already called for this optimizer since the "
               "last update()");
  if (!pending.found_inf.defined()) unscale_(opt);  // fills `pending` (map references stay valid)
  const bool finite = pending.found_inf.item<float>() == 0.0f;
  pending.stepped = true;
  if (finite) opt.step();
  return finite;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  SINTER_CHECK(scale_.defined(), "GradScaler::update: no scale yet; call scale(loss) first");
  NoGradGuard ng;
  Tensor found;
  for (const auto& [opt, pending] : pending_) {
    if (!pending.found_inf.defined()) continue;
    found = found.defined() ? add(found, pending.found_inf) : pending.found_inf;
  }
  SINTER_CHECK(found.defined(),
               "GradScaler::update: no gradients were unscaled since the last "
               "update(); call step(opt) (or unscale_(opt)) first");
  const Device dev = scale_.device();
  const Tensor zero_i = zeros({}, {.dtype = DType::i64, .device = dev});
  const Tensor bad = gt(found, 0.0);
  const Tensor count = add(growth_tracker_, 1.0);
  const Tensor grow = ge(count, static_cast<double>(options_.growth_interval));
  const Tensor scaled = where(bad, mul(scale_, options_.backoff_factor),
                              where(grow, mul(scale_, options_.growth_factor), scale_));
  const Tensor tracker = where(bad, zero_i, where(grow, zero_i, count));
  scale_.copy_(scaled);
  growth_tracker_.copy_(tracker);
  pending_.clear();
}

double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? scale_.item<float>() : options_.init_scale;
}

int64_t GradScaler::growth_tracker() const {
  return growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : 0;
}

StateDict GradScaler::state_dict() const {
  StateDict d;
  d["scale"] = full({}, get_scale(), {.dtype = DType::f32});
  d["growth_tracker"] = full({}, static_cast<double>(growth_tracker()), {.dtype = DType::i64});
  d["growth_factor"] = full({}, options_.growth_factor, {.dtype = DType::f64});
  d["backoff_factor"] = full({}, options_.backoff_factor, {.dtype = DType::f64});
  d["growth_interval"] =
      full({}, static_cast<double>(options_.growth_interval), {.dtype = DType::f64});
  return d;
}

void GradScaler::load_state_dict(const StateDict& dict) {
  GradScalerOptions o = options_;
  const double s = scalar_of(dict, "scale");
  o.init_scale = s;
  o.growth_factor = scalar_of(dict, "growth_factor");
  o.backoff_factor = scalar_of(dict, "backoff_factor");
  const double interval = scalar_of(dict, "growth_interval");
  const double tracker = scalar_of(dict, "growth_tracker");
  SINTER_CHECK(interval == std::floor(interval) && tracker == std::floor(tracker) && tracker >= 0,
               "GradScaler::load_state_dict: growth_interval ", interval, " and growth_tracker ",
               tracker, " must be whole numbers");
  o.growth_interval = static_cast<int64_t>(interval);
  check_options(o);
  for (const auto& [key, value] : dict) {
    SINTER_CHECK(key == "scale" || key == "growth_tracker" || key == "growth_factor" ||
                     key == "backoff_factor" || key == "growth_interval",
                 "GradScaler::load_state_dict: unexpected key \"", key, "\"");
  }
  NoGradGuard ng;
  const Device dev = scale_.defined() ? scale_.device() : Device::cpu();
  options_ = o;
  scale_ = full({}, s, {.dtype = DType::f32, .device = dev});
  growth_tracker_ = full({}, tracker, {.dtype = DType::i64, .device = dev});
  pending_.clear();
}

}  // namespace sinter::optim

// Gradient clipping by total norm and by value, with tensor ops (so on any device).
#include "sinter/optim/clip.h"

#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "sinter/autograd.h"
#include "sinter/ops.h"

namespace sinter::optim {

Tensor clip_grad_norm_on_device_(const std::vector<Tensor>& params, double max_norm,
                                 double norm_type) {
  SINTER_CHECK(max_norm >= 0.0, "clip_grad_norm_: max_norm must be >= 0, got ", max_norm);
  SINTER_CHECK(norm_type > 0.0, "clip_grad_norm_: norm_type must be positive (or infinity), got ",
               norm_type);
  const bool inf = std::isinf(norm_type);
  NoGradGuard ng;
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    SINTER_CHECK(p.defined(), "clip_grad_norm_: undefined parameter");
    Tensor g = p.grad();
    if (g.defined() && g.numel() > 0) grads.push_back(g);
  }
  if (grads.empty()) return zeros({}, {.dtype = DType::f32});

  // One partial per gradient (max |g| or sum |g|^p), in f64 for f64 gradients and f32 otherwise,
  // all gathered on the first gradient's device so that reading the total syncs once.
  bool all_f64 = true;
  for (const Tensor& g : grads) all_f64 = all_f64 && g.dtype() == DType::f64;
  const DType acc = all_f64 ? DType::f64 : DType::f32;
  const Device device = grads[0].device();
  std::vector<Tensor> partials;
  partials.reserve(grads.size());
  for (const Tensor& g : grads) {
    const Tensor x = g.dtype() == DType::f64 ? g : g.to(DType::f32);
    Tensor part;
    if (inf) {
      part = max(abs(x));
    } else if (norm_type == 2.0) {
      part = sum(mul(x, x));
    } else if (norm_type == 1.0) {
      part = sum(abs(x));
    } else {
      part = sum(pow(abs(x), norm_type));
    }
    partials.push_back(part.to(device).to(acc));
  }
  const Tensor all = stack(partials);
  const Tensor reduced = inf ? max(all) : sum(all);
  const Tensor total = inf ? reduced : pow(reduced, 1.0 / norm_type);

  // As in PyTorch (clamp to at most 1), a NaN total makes every gradient NaN, so that the step
  // that follows is seen to have failed, and an infinite one scales them by 0. All on the device:
  // the host reads nothing.
  const Tensor coef = div(full({}, max_norm, {.dtype = acc, .device = device}), add(total, 1e-6));
  const Tensor factor = minimum(coef, ones({}, {.dtype = acc, .device = device}));
  // The factor in each gradient's device and dtype, converted once per pair.
  std::map<std::pair<std::string, DType>, Tensor> factors;
  for (Tensor& g : grads) {
    Tensor& f = factors[{g.device().str(), g.dtype()}];
    if (!f.defined()) f = factor.to(g.device()).to(g.dtype());
    g.mul_(f);
  }
  return total;
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  return clip_grad_norm_on_device_(params, max_norm, norm_type).to(DType::f64).item<double>();
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  SINTER_CHECK(clip_value >= 0.0, "clip_grad_value_: clip_value must be >= 0, got ", clip_value);
  NoGradGuard ng;
  for (const Tensor& p : params) {
    SINTER_CHECK(p.defined(), "clip_grad_value_: undefined parameter");
    Tensor g = p.grad();
    if (!g.defined()) continue;
    g.copy_(clamp(g, -clip_value, clip_value));
  }
}

}  // namespace sinter::optim

// Gradient clipping by total norm and by value, with tensor ops (so on any device).
#include "sinter/optim/clip.h"

#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "internal/clip_impl.h"
#include "sinter/autograd.h"
#include "sinter/ops.h"

namespace sinter::optim {

namespace detail {

DType norm_accumulator(const std::vector<Tensor>& grads) {
  for (const Tensor& g : grads) {
    if (g.dtype() != DType::f64) return DType::f32;
  }
  return DType::f64;
}

Tensor grad_norm_partial(const std::vector<Tensor>& grads, double norm_type, DType acc,
                         Device device) {
  const bool inf = std::isinf(norm_type);
  if (grads.empty()) return zeros({}, {.dtype = acc, .device = device});
  // One partial per gradient (max |g| or sum |g|^p), in f64 for f64 gradients and f32 otherwise,
  // all gathered on `device` so that reading the total syncs once.
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
  return inf ? max(all) : sum(all);
}

Tensor scale_to_norm(const std::vector<Tensor>& grads, const Tensor& reduced, double max_norm,
                     double norm_type) {
  const DType acc = reduced.dtype();
  const Device device = reduced.device();
  const Tensor total = std::isinf(norm_type) ? reduced : pow(reduced, 1.0 / norm_type);
  // As in PyTorch (clamp to at most 1), a NaN total makes every gradient NaN, so that the step
  // that follows is seen to have failed, and an infinite one scales them by 0. All on the device:
  // the host reads nothing.
  const Tensor coef = div(full({}, max_norm, {.dtype = acc, .device = device}), add(total, 1e-6));
  const Tensor factor = minimum(coef, ones({}, {.dtype = acc, .device = device}));
  // The factor in each gradient's device and dtype, converted once per pair.
  std::map<std::pair<std::string, DType>, Tensor> factors;
  for (const Tensor& g : grads) {
    Tensor& f = factors[{g.device().str(), g.dtype()}];
    if (!f.defined()) f = factor.to(g.device()).to(g.dtype());
    Tensor target = g;
    target.mul_(f);
  }
  return total;
}

void check_clip_arguments(const char* op, double max_norm, double norm_type) {
  SINTER_CHECK(max_norm >= 0.0, op, ": max_norm must be >= 0, got ", max_norm);
  SINTER_CHECK(norm_type > 0.0, op, ": norm_type must be positive (or infinity), got ", norm_type);
}

}  // namespace detail

Tensor clip_grad_norm_on_device_(const std::vector<Tensor>& params, double max_norm,
                                 double norm_type) {
  detail::check_clip_arguments("clip_grad_norm_", max_norm, norm_type);
  NoGradGuard ng;
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    SINTER_CHECK(p.defined(), "clip_grad_norm_: undefined parameter");
    Tensor g = p.grad();
    if (g.defined() && g.numel() > 0) grads.push_back(g);
  }
  if (grads.empty()) return zeros({}, {.dtype = DType::f32});
  const DType acc = detail::norm_accumulator(grads);
  const Tensor reduced = detail::grad_norm_partial(grads, norm_type, acc, grads[0].device());
  return detail::scale_to_norm(grads, reduced, max_norm, norm_type);
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

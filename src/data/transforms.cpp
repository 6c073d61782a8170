// Batch transforms on (N, C, H, W): normalize with ops (any device), random crop and flip as byte
// copies on the host (any dtype), with per-sample draws from a Philox generator.
#include "sinter/data/transforms.h"

#include <algorithm>
#include <cstring>

#include "sinter/autograd.h"
#include "sinter/ops.h"

namespace sinter::data {
namespace {

void check_nchw(const char* op, const Tensor& x, bool host) {
  SINTER_CHECK(x.defined(), op, ": undefined tensor");
  SINTER_CHECK(x.dim() == 4, op, ": expected (N, C, H, W), got shape ", shape_str(x.shape()));
  if (host) {
    SINTER_CHECK(x.device().is_cpu(), op, ": expected a host tensor, got one on ", x.device(),
                 " (transforms run before the copy to the device)");
  }
}

}  // namespace

Tensor normalize(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std) {
  check_nchw("normalize", x, false);
  SINTER_CHECK(is_floating(x.dtype()), "normalize: expected a floating tensor, got ", x.dtype());
  const int64_t c = x.size(1);
  const auto nm = static_cast<int64_t>(mean.size()), ns = static_cast<int64_t>(std.size());
  SINTER_CHECK((nm == c || nm == 1) && (ns == c || ns == 1), "normalize: ", nm, " means and ", ns,
               " stds for ", c, " channels (give ", c, " or 1 of each)");
  for (double s : std) SINTER_CHECK(s > 0, "normalize: std must be positive, got ", s);
  const TensorOptions opts{.dtype = x.dtype(), .device = x.device()};
  Tensor m = from_vector(mean, {1, nm, 1, 1}).to(opts.device).to(opts.dtype);
  Tensor s = from_vector(std, {1, ns, 1, 1}).to(opts.device).to(opts.dtype);
  return (x - m) / s;
}

Tensor random_crop(const Tensor& x, std::array<int64_t, 2> size, int64_t padding, Generator* gen) {
  check_nchw("random_crop", x, true);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t oh = size[0], ow = size[1];
  SINTER_CHECK(padding >= 0, "random_crop: padding must be >= 0, got ", padding);
  SINTER_CHECK(oh > 0 && ow > 0 && oh <= h + 2 * padding && ow <= w + 2 * padding,
               "random_crop: a ", oh, "x", ow, " window does not fit a ", h, "x", w,
               " image padded by ", padding);
  Tensor src = x.detach().contiguous();
  Tensor out = zeros({n, c, oh, ow}, {.dtype = x.dtype()});
  if (out.numel() == 0) return out;
  // Window origin in padded coordinates: (top, left) in [0, h + 2p - oh] x [0, w + 2p - ow].
  std::vector<int64_t> top =
      randint(0, h + 2 * padding - oh + 1, {n}, {.dtype = DType::i64}, gen).to_vector<int64_t>();
  std::vector<int64_t> left =
      randint(0, w + 2 * padding - ow + 1, {n}, {.dtype = DType::i64}, gen).to_vector<int64_t>();
  const size_t es = element_size(x.dtype());
  const auto* s = static_cast<const uint8_t*>(src.data_ptr());
  auto* d = static_cast<uint8_t*>(out.data_ptr());
  for (int64_t i = 0; i < n; ++i) {
    // Output column j reads input column left - padding + j; rows likewise. Outside: zero padding.
    const int64_t x0 = left[i] - padding, y0 = top[i] - padding;
    const int64_t j_begin = std::max<int64_t>(0, -x0), j_end = std::min<int64_t>(ow, w - x0);
    if (j_begin >= j_end) continue;
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t r = 0; r < oh; ++r) {
        const int64_t yr = y0 + r;
        if (yr < 0 || yr >= h) continue;
        const int64_t in_off = (((i * c + ch) * h + yr) * w + x0 + j_begin);
        const int64_t out_off = (((i * c + ch) * oh + r) * ow + j_begin);
        std::memcpy(d + out_off * es, s + in_off * es, static_cast<size_t>(j_end - j_begin) * es);
      }
    }
  }
  return out;
}

Tensor random_horizontal_flip(const Tensor& x, double p, Generator* gen) {
  check_nchw("random_horizontal_flip", x, true);
  SINTER_CHECK(p >= 0 && p <= 1, "random_horizontal_flip: p must be in [0, 1], got ", p);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  Tensor out = x.detach().clone();
  if (out.numel() == 0) return out;
  std::vector<double> u = rand({n}, {.dtype = DType::f64}, gen).to_vector<double>();
  const size_t es = element_size(x.dtype());
  auto* d = static_cast<uint8_t*>(out.data_ptr());
  std::vector<uint8_t> tmp(es);
  for (int64_t i = 0; i < n; ++i) {
    if (!(u[static_cast<size_t>(i)] < p)) continue;
    for (int64_t row = 0; row < c * h; ++row) {
      uint8_t* line = d + ((i * c * h) + row) * w * static_cast<int64_t>(es);
      for (int64_t a = 0, b = w - 1; a < b; ++a, --b) {
        std::memcpy(tmp.data(), line + a * es, es);
        std::memcpy(line + a * es, line + b * es, es);
        std::memcpy(line + b * es, tmp.data(), es);
      }
    }
  }
  return out;
}

}  // namespace sinter::data

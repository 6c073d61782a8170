// Post-training int8 quantization (Note [int8 quantization] in sinter/quantize.h): the
// calibrators, the int8 layers and their CPU execution.
#include "sinter/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "cpu/int8.h"
#include "internal/ops_impl.h"
#include "internal/parallel.h"
#include "kern/act.h"
#include "nn/fuse_impl.h"
#include "sinter/autograd.h"
#include "sinter/nn/models.h"

namespace sinter::quant {

struct PackedWeights {
  std::vector<cpu::int8::PackedB> groups;
};

const char* calibrator_name(Calibrator c) {
  switch (c) {
    case Calibrator::MinMax:
      return "minmax";
    case Calibrator::Percentile:
      return "percentile";
    case Calibrator::Entropy:
      return "entropy";
  }
  return "?";
}

Calibrator calibrator_from_name(const std::string& name) {
  for (const Calibrator c : {Calibrator::MinMax, Calibrator::Percentile, Calibrator::Entropy}) {
    if (name == calibrator_name(c)) return c;
  }
  SINTER_THROW("quantize: unknown calibrator \"", name,
               "\"; expected minmax, percentile or entropy");
}

// --- Histogram ---

void Histogram::add(const Tensor& x, const std::string& op) {
  SINTER_CHECK(x.defined() && is_floating(x.dtype()), op,
               ": calibration needs a floating input, got ",
               x.defined() ? dtype_name(x.dtype()) : "an undefined tensor");
  Tensor h;
  {
    NoGradGuard no_grad;
    h = x.detach().to(Device::cpu()).to(DType::f32).contiguous();
  }
  const float* v = h.data<float>();
  const int64_t n = h.numel();
  double batch_max = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::abs(static_cast<double>(v[i]));
    SINTER_CHECK(!std::isnan(a), op, ": a calibration input holds NaN (element ", i,
                 " of a tensor of shape ", shape_str(x.shape()), ")");
    batch_max = std::max(batch_max, a);
  }
  SINTER_CHECK(std::isfinite(batch_max), op, ": a calibration input holds inf (shape ",
               shape_str(x.shape()), ")");
  ++batches_;
  count_ += n;
  if (batch_max > 0.0) {
    if (width_ == 0.0) {
      // The first non-zero values: the bins cover exactly [0, their largest]; zeros recorded
      // before (in bin 0) stay there.
      width_ = batch_max / static_cast<double>(kBins);
    }
    // Double the range, merging pairs of bins, until it holds the batch.
    while (batch_max > width_ * static_cast<double>(kBins)) {
      for (int64_t b = 0; b < kBins / 2; ++b) bins_[b] = bins_[2 * b] + bins_[2 * b + 1];
      std::fill(bins_.begin() + kBins / 2, bins_.end(), 0.0);
      width_ *= 2.0;
    }
  }
  max_ = std::max(max_, batch_max);
  if (width_ == 0.0) {
    bins_[0] += static_cast<double>(n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::abs(static_cast<double>(v[i]));
    const auto b = std::min<int64_t>(static_cast<int64_t>(a / width_), kBins - 1);
    bins_[b] += 1.0;
  }
}

namespace {

// TensorRT's entropy calibration: the number of bins i (128..kBins) whose clipped distribution P
// (bins 0..i-1, the values past them added to bin i-1) is closest in KL divergence to Q, bins
// 0..i-1 quantized to 128 levels (each level's count spread evenly over its non-empty bins).
int64_t entropy_bins(const std::vector<double>& bins) {
  constexpr int64_t kLevels = 128;
  const auto n = static_cast<int64_t>(bins.size());
  std::vector<double> suffix(n + 1, 0.0);
  for (int64_t b = n - 1; b >= 0; --b) suffix[b] = suffix[b + 1] + bins[b];
  int64_t best = n;
  double best_kl = std::numeric_limits<double>::infinity();
  std::vector<double> q;
  for (int64_t i = kLevels; i <= n; ++i) {
    q.assign(i, 0.0);
    const double per = static_cast<double>(i) / kLevels;
    for (int64_t l = 0; l < kLevels; ++l) {
      const auto start = static_cast<int64_t>(std::floor(l * per));
      const int64_t end = l == kLevels - 1 ? i : static_cast<int64_t>(std::floor((l + 1) * per));
      double sum = 0.0;
      int64_t nonzero = 0;
      for (int64_t b = start; b < end; ++b) {
        sum += bins[b];
        nonzero += bins[b] != 0.0;
      }
      if (nonzero == 0) continue;
      for (int64_t b = start; b < end; ++b) {
        if (bins[b] != 0.0) q[b] = sum / static_cast<double>(nonzero);
      }
    }
    const double p_total = suffix[0];
    double q_total = 0.0;
    for (const double v : q) q_total += v;
    if (p_total <= 0.0 || q_total <= 0.0) continue;
    double kl = 0.0;
    for (int64_t b = 0; b < i; ++b) {
      const double p = (b == i - 1 ? bins[b] + suffix[i] : bins[b]) / p_total;
      if (p <= 0.0) continue;
      // A clipped bin whose level is empty in Q: a small floor keeps the divergence finite.
      const double qq = std::max(q[b] / q_total, 1e-12);
      kl += p * std::log(p / qq);
    }
    if (kl < best_kl) {
      best_kl = kl;
      best = i;
    }
  }
  return best;
}

}  // namespace

double Histogram::amax(const QuantizeOptions& options) const {
  if (max_ == 0.0) return 0.0;
  switch (options.calibrator) {
    case Calibrator::MinMax:
      return max_;
    case Calibrator::Percentile: {
      const double target = static_cast<double>(count_) * options.percentile / 100.0;
      double seen = 0.0;
      for (int64_t b = 0; b < kBins; ++b) {
        seen += bins_[b];
        if (seen >= target) return std::min(max_, static_cast<double>(b + 1) * width_);
      }
      return max_;
    }
    case Calibrator::Entropy:
      return std::min(max_, (static_cast<double>(entropy_bins(bins_)) + 0.5) * width_);
  }
  return max_;
}

// --- the int8 layers ---

namespace {

void check_options(const QuantizeOptions& o) {
  SINTER_CHECK(o.percentile > 0.0 && o.percentile <= 100.0,
               "quantize: percentile must be in (0, 100], got ", o.percentile);
}

// Quantizes `weight` (rows of k values, one per output channel) into q, per channel, packs it
// for the int8 GEMM in `groups` blocks of rows, and ends the layer's calibration.
void quantize_weight(const Tensor& weight, int64_t rows, int64_t groups, QuantState& q) {
  Tensor w;
  {
    NoGradGuard no_grad;
    w = weight.detach().to(Device::cpu()).to(DType::f32).contiguous();
  }
  const float* v = w.data<float>();
  q.k = w.numel() / rows;
  q.weight_scale.assign(rows, 1.0F);
  q.weight_q.assign(static_cast<size_t>(rows * q.k), 0);
  std::vector<int16_t> widened(static_cast<size_t>(rows * q.k));
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0F;
    for (int64_t p = 0; p < q.k; ++p) amax = std::max(amax, std::abs(v[r * q.k + p]));
    // An all-zero channel keeps scale 1 (its values quantize to 0 either way).
    const float scale = amax > 0.0F ? amax / 127.0F : 1.0F;
    q.weight_scale[r] = scale;
    for (int64_t p = 0; p < q.k; ++p) {
      const int16_t qv = cpu::int8::quantize(v[r * q.k + p], scale);
      q.weight_q[r * q.k + p] = static_cast<int8_t>(qv);
      widened[r * q.k + p] = qv;
    }
  }
  auto packed = std::make_shared<PackedWeights>();
  const int64_t per_group = rows / groups;
  for (int64_t g = 0; g < groups; ++g) {
    packed->groups.push_back(
        cpu::int8::pack_b(per_group, q.k, widened.data() + g * per_group * q.k, q.k));
  }
  q.packed = std::move(packed);
  q.quantized = true;
  q.histogram = Histogram();  // the record is no longer needed
}

void check_recorded(const QuantState& q, const std::string& what) {
  SINTER_CHECK(q.quantized || q.histogram.batches() > 0, "quantize: ", what,
               " recorded no calibration batch (the calibration data never reached it); run at "
               "least one batch through the prepared model before convert()");
}

void set_input_scale(QuantState& q, const QuantizeOptions& options, const std::string& what) {
  check_recorded(q, what);
  const double amax = q.histogram.amax(options);
  q.input_scale = amax > 0.0 ? static_cast<float>(amax / 127.0) : 1.0F;
}

std::string layer_name(const std::string& type, const std::string& path) {
  return path.empty() ? type : type + " '" + path + "'";
}

// The checks of an int8 forward: CPU, f32, no gradient wanted.
void check_int8_input(const char* op, const Tensor& x, const Tensor& weight) {
  SINTER_CHECK(x.defined(), op, ": undefined input");
  SINTER_CHECK(x.device().is_cpu() && weight.device().is_cpu(), op,
               ": int8 layers run on the CPU; the input is on ", x.device(), " and the weight on ",
               weight.device());
  SINTER_CHECK(x.dtype() == DType::f32, op, ": int8 layers take f32 inputs, got ", x.dtype());
  SINTER_CHECK(!GradMode::is_enabled() || !x.requires_grad(), op,
               ": int8 layers are for inference and record no gradient; run under "
               "InferenceMode or NoGradGuard");
}

// The GEMM sums' epilogue: y = act(c s_x s_w[j] + b[j]), the scales multiplied once per channel.
struct Epilogue {
  std::vector<float> scale, bias;  // per output channel (bias 0 without one)
  kern::GemmAct act;
  Epilogue(const QuantState& q, const Tensor& b, kern::GemmAct act)
      : scale(q.weight_scale.size()), bias(q.weight_scale.size(), 0.0F), act(act) {
    for (size_t j = 0; j < scale.size(); ++j) scale[j] = q.input_scale * q.weight_scale[j];
    if (b.defined()) {
      const float* bp = b.data<float>();
      std::copy(bp, bp + bias.size(), bias.begin());
    }
  }
  // out[i * out_stride] = epilogue(c[i * c_stride]) for i < n, all of channel j; the activation
  // is chosen once per run (ReLU inline: the loop vectorizes).
  void run(const int32_t* c, int64_t c_stride, int64_t n, int64_t j, float* out,
           int64_t out_stride) const {
    const float s = scale[j], b = bias[j];
    switch (act) {
      case kern::GemmAct::None:
        for (int64_t i = 0; i < n; ++i)
          out[i * out_stride] = static_cast<float>(c[i * c_stride]) * s + b;
        break;
      case kern::GemmAct::Relu:
        for (int64_t i = 0; i < n; ++i) {
          const float v = static_cast<float>(c[i * c_stride]) * s + b;
          out[i * out_stride] = v < 0.0F ? 0.0F : v;  // NaN stays NaN, as relu
        }
        break;
      default:
        for (int64_t i = 0; i < n; ++i) {
          out[i * out_stride] = kern::activate(act, static_cast<float>(c[i * c_stride]) * s + b);
        }
        break;
    }
  }
};

Tensor f32_bias(const Tensor& bias) {
  if (!bias.defined()) return Tensor();
  NoGradGuard no_grad;
  return bias.detach().to(DType::f32).contiguous();
}

}  // namespace

QuantizedLinear::QuantizedLinear(const nn::Linear& layer)
    : nn::Linear(layer.in_features, layer.out_features, layer.bias.defined()) {
  to(layer.weight.device());
  to(layer.weight.dtype());
  load_state_dict(layer.state_dict());
  activation = layer.activation;
  train(layer.is_training());
}

void QuantizedLinear::convert(const QuantizeOptions& options, const std::string& path) {
  check_options(options);
  set_input_scale(q, options, layer_name(name(), path));
  quantize_weight(weight, out_features, 1, q);
}

Tensor QuantizedLinear::forward(const Tensor& x) {
  if (!q.quantized) {
    q.histogram.add(x, name());
    return nn::Linear::forward(x);
  }
  check_int8_input("QuantizedLinear", x, weight);
  SINTER_CHECK(x.dim() >= 1 && x.size(x.dim() - 1) == in_features,
               "QuantizedLinear: expected input with last dim ", in_features, ", got shape ",
               shape_str(x.shape()));
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor y = empty(out_shape);
  const cpu::int8::PackedB& packed = q.packed->groups.at(0);
  const int64_t rows = x.numel() / in_features, n = out_features, kp = packed.k;
  if (rows == 0) return y;
  const Tensor xc = x.contiguous(), b = f32_bias(bias);
  const float* xp = xc.data<float>();
  float* yp = y.data<float>();
  const Epilogue epi(q, b, kernel_act(activation));
  constexpr int64_t kRows = 32;
  const int64_t blocks = (rows + kRows - 1) / kRows;
  detail::parallel_blocks(blocks, kRows * n * kp, [&](int64_t b0, int64_t b1) {
    std::vector<int16_t> a(static_cast<size_t>(kRows * kp));
    std::vector<int32_t> c(static_cast<size_t>(kRows * n));
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t r0 = blk * kRows, m = std::min(kRows, rows - r0);
      std::fill(a.begin(), a.end(), int16_t{0});
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t p = 0; p < in_features; ++p) {
          a[i * kp + p] = cpu::int8::quantize(xp[(r0 + i) * in_features + p], q.input_scale);
        }
      }
      cpu::int8::gemm(m, a.data(), kp, packed, c.data(), n);
      for (int64_t j = 0; j < n; ++j) epi.run(c.data() + j, n, m, j, yp + r0 * n + j, n);
    }
  });
  return y;
}

QuantizedConv2d::QuantizedConv2d(const nn::Conv2d& layer)
    : nn::Conv2d(layer.in_channels, layer.out_channels, layer.kernel_size,
                 {.stride = layer.options.stride,
                  .padding = layer.options.padding,
                  .dilation = layer.options.dilation,
                  .groups = layer.options.groups,
                  .bias = layer.bias.defined()}) {
  to(layer.weight.device());
  to(layer.weight.dtype());
  load_state_dict(layer.state_dict());
  activation = layer.activation;
  train(layer.is_training());
}

void QuantizedConv2d::convert(const QuantizeOptions& options, const std::string& path) {
  check_options(options);
  set_input_scale(q, options, layer_name(name(), path));
  quantize_weight(weight, out_channels, this->options.groups, q);
}

Tensor QuantizedConv2d::forward(const Tensor& x) {
  if (!q.quantized) {
    q.histogram.add(x, name());
    return nn::Conv2d::forward(x);
  }
  check_int8_input("QuantizedConv2d", x, weight);
  SINTER_CHECK(x.dim() == 4 && x.size(1) == in_channels,
               "QuantizedConv2d: expected input of shape (N, ", in_channels, ", H, W), got shape ",
               shape_str(x.shape()));
  const nn::Conv2dOptions& o = options;
  const int64_t n_img = x.size(0), h = x.size(2), w = x.size(3);
  const int64_t kh = kernel_size.h, kw = kernel_size.w;
  const int64_t span_h = o.dilation.h * (kh - 1) + 1, span_w = o.dilation.w * (kw - 1) + 1;
  SINTER_CHECK(span_h <= h + 2 * o.padding.h && span_w <= w + 2 * o.padding.w,
               "QuantizedConv2d: kernel ", span_h, "x", span_w,
               " is larger than the padded input (input shape ", shape_str(x.shape()), ")");
  const int64_t h_out = (h + 2 * o.padding.h - span_h) / o.stride.h + 1;
  const int64_t w_out = (w + 2 * o.padding.w - span_w) / o.stride.w + 1;
  const int64_t groups = o.groups, cig = in_channels / groups, cog = out_channels / groups;
  const int64_t hw = h_out * w_out, kp = cpu::int8::padded_k(q.k);
  Tensor y = empty({n_img, out_channels, h_out, w_out});
  if (y.numel() == 0) return y;
  // The input quantized once (each value is read by up to kh * kw windows).
  const Tensor xc = x.contiguous(), b = f32_bias(bias);
  const float* xp = xc.data<float>();
  std::vector<int16_t> qx(static_cast<size_t>(xc.numel()));
  detail::parallel_blocks(xc.numel(), 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) qx[i] = cpu::int8::quantize(xp[i], q.input_scale);
  });
  float* yp = y.data<float>();
  const Epilogue epi(q, b, kernel_act(activation));
  // Each tap's offset from a window's corner in a group's input planes; the padding of a cols
  // row (kp past taps) stays 0.
  const int64_t taps = cig * kh * kw;
  std::vector<int64_t> tap_offset(static_cast<size_t>(taps));
  for (int64_t ci = 0; ci < cig; ++ci) {
    for (int64_t i = 0; i < kh; ++i) {
      for (int64_t j = 0; j < kw; ++j) {
        tap_offset[(ci * kh + i) * kw + j] = ci * h * w + i * o.dilation.h * w + j * o.dilation.w;
      }
    }
  }
  // Tasks: an image's block of kPixels output pixels, for every group.
  constexpr int64_t kPixels = 64;
  const int64_t per_image = (hw + kPixels - 1) / kPixels, tasks = n_img * per_image;
  detail::parallel_blocks(tasks, kPixels * out_channels * kp, [&](int64_t t0, int64_t t1) {
    std::vector<int16_t> cols(static_cast<size_t>(kPixels * kp), 0);
    std::vector<int32_t> c(static_cast<size_t>(kPixels * cog));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t img = t / per_image, p0 = (t % per_image) * kPixels;
      const int64_t m = std::min(kPixels, hw - p0);
      for (int64_t g = 0; g < groups; ++g) {
        // cols[pixel][(ci, i, j)]: the window of each output pixel, 0 in the padding. A window
        // inside the image is a gather at the taps' offsets; one at the border checks each tap.
        const int16_t* group_x = qx.data() + (img * in_channels + g * cig) * h * w;
        for (int64_t pi = 0; pi < m; ++pi) {
          const int64_t oh = (p0 + pi) / w_out, ow = (p0 + pi) % w_out;
          const int64_t ih0 = oh * o.stride.h - o.padding.h, iw0 = ow * o.stride.w - o.padding.w;
          int16_t* row = cols.data() + pi * kp;
          if (ih0 >= 0 && ih0 + span_h <= h && iw0 >= 0 && iw0 + span_w <= w) {
            const int16_t* corner = group_x + ih0 * w + iw0;
            for (int64_t t = 0; t < taps; ++t) row[t] = corner[tap_offset[t]];
            continue;
          }
          std::fill(row, row + kp, int16_t{0});
          for (int64_t ci = 0; ci < cig; ++ci) {
            const int16_t* plane = group_x + ci * h * w;
            for (int64_t i = 0; i < kh; ++i) {
              const int64_t ih = ih0 + i * o.dilation.h;
              if (ih < 0 || ih >= h) continue;
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t iw = iw0 + j * o.dilation.w;
                if (iw < 0 || iw >= w) continue;
                row[(ci * kh + i) * kw + j] = plane[ih * w + iw];
              }
            }
          }
        }
        cpu::int8::gemm(m, cols.data(), kp, q.packed->groups.at(g), c.data(), cog);
        for (int64_t co = 0; co < cog; ++co) {
          const int64_t ch = g * cog + co;
          float* out = yp + (img * out_channels + ch) * hw + p0;
          epi.run(c.data() + co, cog, m, ch, out, 1);
        }
      }
    }
  });
  return y;
}

// --- the passes ---

namespace {

void visit(nn::Module& m, const std::string& path,
           const std::function<void(nn::Module&, const std::string&)>& f) {
  f(m, path);
  for (const auto& [name, child] : m.named_children()) {
    visit(*child, path.empty() ? name : path + "." + name, f);
  }
}

}  // namespace

std::shared_ptr<nn::Module> prepare(const nn::Module& model) {
  int64_t layers = 0;
  nn::LayerWrap wrap;
  wrap.linear = [&](std::shared_ptr<nn::Linear> l, const std::string&) {
    ++layers;
    return std::make_shared<QuantizedLinear>(*l);
  };
  wrap.conv = [&](std::shared_ptr<nn::Conv2d> c, const std::string&) {
    ++layers;
    return std::make_shared<QuantizedConv2d>(*c);
  };
  std::shared_ptr<nn::Module> prepared = nn::fuse_with(model, wrap);
  SINTER_CHECK(layers > 0, "quantize: ", model.name(),
               " has no Linear or Conv2d layer, so there is nothing to quantize");
  return prepared;
}

void convert(nn::Module& prepared, const QuantizeOptions& options) {
  check_options(options);
  int64_t layers = 0;
  // Every layer's record is checked before any is converted: a failure leaves the model as it was.
  visit(prepared, "", [&](nn::Module& m, const std::string& path) {
    if (auto* l = dynamic_cast<QuantizedLinear*>(&m)) {
      ++layers;
      check_recorded(l->q, layer_name(l->name(), path));
    } else if (auto* c = dynamic_cast<QuantizedConv2d*>(&m)) {
      ++layers;
      check_recorded(c->q, layer_name(c->name(), path));
    }
  });
  SINTER_CHECK(layers > 0, "quantize: convert() found no QuantizedLinear or QuantizedConv2d in ",
               prepared.name(), "; call prepare() first");
  visit(prepared, "", [&](nn::Module& m, const std::string& path) {
    if (auto* l = dynamic_cast<QuantizedLinear*>(&m)) {
      if (!l->q.quantized) l->convert(options, path);
    } else if (auto* c = dynamic_cast<QuantizedConv2d*>(&m)) {
      if (!c->q.quantized) c->convert(options, path);
    }
  });
}

std::shared_ptr<nn::Module> quantize(const nn::Module& model, int64_t batches,
                                     const std::function<Tensor(int64_t)>& batch,
                                     const QuantizeOptions& options) {
  check_options(options);
  SINTER_CHECK(batches >= 1, "quantize: calibration needs at least one batch, got ", batches);
  std::shared_ptr<nn::Module> prepared = prepare(model);
  {
    NoGradGuard no_grad;
    for (int64_t i = 0; i < batches; ++i) (void)prepared->forward(batch(i));
  }
  convert(*prepared, options);
  return prepared;
}

const char* int8_isa() { return cpu::int8::gemm_isa(); }

int64_t model_bytes(const nn::Module& model) {
  int64_t bytes = 0;
  const auto tensor_bytes = [](const Tensor& t) {
    return t.numel() * static_cast<int64_t>(element_size(t.dtype()));
  };
  visit(const_cast<nn::Module&>(model), "", [&](nn::Module& m, const std::string&) {
    const QuantState* q = nullptr;
    if (auto* l = dynamic_cast<QuantizedLinear*>(&m)) q = &l->q;
    if (auto* c = dynamic_cast<QuantizedConv2d*>(&m)) q = &c->q;
    for (const auto& [name, t] : m.own_parameters()) {
      if (q && q->quantized && name == "weight") continue;
      bytes += tensor_bytes(t);
    }
    for (const auto& [name, t] : m.own_buffers()) bytes += tensor_bytes(t);
    if (q && q->quantized) {
      bytes += static_cast<int64_t>(q->weight_q.size()) +
               4 * static_cast<int64_t>(q->weight_scale.size()) + 4;
    }
  });
  return bytes;
}

}  // namespace sinter::quant

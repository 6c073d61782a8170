// Post-training int8 quantization (Note [int8 quantization] in include/sinter/quantize.h): the
// calibrators and the int8 layers, which run on the int8 kernels of their device (kern/int8.h).
#include "sinter/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <typeinfo>
#include <utility>

#include "internal/dispatch.h"
#include "internal/fuse_impl.h"
#include "internal/infer_plan.h"
#include "internal/ops_impl.h"
#include "kern/int8.h"
#include "sinter/autograd.h"
#include "sinter/nn/models.h"

namespace sinter::quant {

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

void ready_on(QuantState& q, Device device);

// Quantizes `weight` (rows of k values, one per output channel) into q, per channel, ends the
// layer's calibration, and packs the weight for the kernels of its device.
void quantize_weight(const Tensor& weight, int64_t rows, int64_t groups, QuantState& q) {
  Tensor w;
  {
    NoGradGuard no_grad;
    w = weight.detach().to(Device::cpu()).to(DType::f32).contiguous();
  }
  const float* v = w.data<float>();
  q.k = w.numel() / rows;
  q.groups = groups;
  q.weight_scale.assign(rows, 1.0F);
  q.weight_q.assign(static_cast<size_t>(rows * q.k), 0);
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0F;
    for (int64_t p = 0; p < q.k; ++p) amax = std::max(amax, std::abs(v[r * q.k + p]));
    // An all-zero channel keeps scale 1 (its values quantize to 0 either way).
    const float scale = amax > 0.0F ? amax / 127.0F : 1.0F;
    q.weight_scale[r] = scale;
    for (int64_t p = 0; p < q.k; ++p) {
      q.weight_q[r * q.k + p] = static_cast<int8_t>(kern::quantize_int8(v[r * q.k + p], scale));
    }
  }
  SINTER_CHECK(q.k <= kern::kInt8MaxK, "quantize: a weight row of ", q.k,
               " values is more than the ", kern::kInt8MaxK, " whose int8 sums fit int32");
  q.quantized = true;
  q.histogram = Histogram();  // the record is no longer needed
  q.packed = q.channel_scale = Tensor();
  ready_on(q, weight.device());
}

// The packed weight and the epilogue's scales of q on `device` (Note [int8 kernels]): made by
// convert on the weight's device, and again when the layer first runs on another one.
void ready_on(QuantState& q, Device device) {
  if (q.packed.defined() && q.packed.device() == device) return;
  NoGradGuard no_grad;
  const int64_t rows = static_cast<int64_t>(q.weight_scale.size()), groups = q.groups;
  std::vector<float> scale(q.weight_scale.size());
  for (size_t j = 0; j < scale.size(); ++j) scale[j] = q.input_scale * q.weight_scale[j];
  const Tensor w = from_blob(q.weight_q.data(), {rows * q.k}, {.dtype = DType::u8}).to(device);
  int64_t bytes = 0;
  SINTER_DISPATCH(device, int8_packed_bytes, groups, rows / groups, q.k, &bytes);
  Tensor packed = empty({bytes}, {.dtype = DType::u8, .device = device});
  SINTER_DISPATCH(device, int8_pack_weight, groups, rows / groups, q.k,
                  reinterpret_cast<const int8_t*>(w.data<uint8_t>()), packed.data<uint8_t>());
  q.channel_scale = from_vector(scale).to(device);
  q.packed = std::move(packed);
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

// The checks of an int8 forward: the layer's device, f32, no gradient wanted.
void check_int8_input(const char* op, const Tensor& x, const Tensor& weight) {
  SINTER_CHECK(x.defined(), op, ": undefined input");
  SINTER_CHECK(x.device() == weight.device(), op, ": the input is on ", x.device(),
               " and the layer on ", weight.device(), "; move one of them (model.to(device))");
  SINTER_CHECK(x.dtype() == DType::f32, op, ": int8 layers take f32 inputs, got ", x.dtype());
  SINTER_CHECK(!GradMode::is_enabled() || !x.requires_grad(), op,
               ": int8 layers are for inference and record no gradient; run under "
               "InferenceMode or NoGradGuard");
}

// The epilogue's operands on the layer's device; bias: the f32 bias or undefined.
kern::Int8Epilogue epilogue_of(const QuantState& q, const Tensor& bias, Activation act) {
  return {.scale = q.channel_scale.data<float>(),
          .bias = bias.defined() ? bias.data<float>() : nullptr,
          .act = kernel_act(act)};
}

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
  Tensor y = empty(out_shape, {.device = x.device()});
  const int64_t rows = x.numel() / in_features;
  if (rows == 0) return y;
  ready_on(q, x.device());
  const Tensor xc = x.contiguous(), b = f32_bias(bias);
  SINTER_DISPATCH(x.device(), int8_linear, rows, out_features, in_features, xc.data<float>(),
                  q.input_scale, q.packed.data<uint8_t>(), epilogue_of(q, b, activation),
                  y.data<float>());
  return y;
}

QuantizedConv2d::QuantizedConv2d(const nn::Conv2d& layer)
    : nn::Conv2d(layer.in_channels, layer.out_channels, layer.kernel_size, [&] {
        nn::Conv2dOptions o = layer.options;
        o.bias = layer.bias.defined();
        return o;
      }()) {
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
  // The padding of padding_mode and "same" as the float layer's, then the convolution's own.
  Shape pads;
  Tensor xp = mode_padded(x, o.padding_mode, o.same_padding, {o.padding.h, o.padding.w},
                          {o.dilation.h, o.dilation.w}, pads);
  const int64_t kh = kernel_size.h, kw = kernel_size.w;
  if (o.same_padding && o.padding_mode == nn::PaddingMode::Zeros) {  // stride 1 (the layer's check)
    const int64_t th = o.dilation.h * (kh - 1), tw = o.dilation.w * (kw - 1);
    if (th % 2 != 0 || tw % 2 != 0) xp = pad(xp, {0, tw % 2, 0, th % 2});
    pads = {th / 2, tw / 2};
  }
  const int64_t n_img = xp.size(0), h = xp.size(2), w = xp.size(3);
  const int64_t span_h = o.dilation.h * (kh - 1) + 1, span_w = o.dilation.w * (kw - 1) + 1;
  SINTER_CHECK(span_h <= h + 2 * pads[0] && span_w <= w + 2 * pads[1], "QuantizedConv2d: kernel ",
               span_h, "x", span_w, " is larger than the padded input (input shape ",
               shape_str(x.shape()), ")");
  const int64_t h_out = (h + 2 * pads[0] - span_h) / o.stride.h + 1;
  const int64_t w_out = (w + 2 * pads[1] - span_w) / o.stride.w + 1;
  Tensor y = empty({n_img, out_channels, h_out, w_out}, {.device = x.device()});
  if (y.numel() == 0) return y;
  ready_on(q, x.device());
  const Tensor xc = xp.contiguous(), b = f32_bias(bias);
  const kern::Conv2dGeom g{.n = n_img,
                           .c_in = in_channels,
                           .h = h,
                           .w = w,
                           .c_out = out_channels,
                           .kh = kh,
                           .kw = kw,
                           .h_out = h_out,
                           .w_out = w_out,
                           .stride_h = o.stride.h,
                           .stride_w = o.stride.w,
                           .pad_h = pads[0],
                           .pad_w = pads[1],
                           .dil_h = o.dilation.h,
                           .dil_w = o.dilation.w,
                           .groups = o.groups};
  SINTER_DISPATCH(x.device(), int8_conv2d, g, xc.data<float>(), q.input_scale,
                  q.packed.data<uint8_t>(), epilogue_of(q, b, activation), y.data<float>());
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
  // Once converted, a Sequential runs through inference plans as a fused model does (Note [cpu
  // inference plan]); while it calibrates, its int8 layers record module by module.
  if (typeid(*prepared) == typeid(nn::Sequential)) {
    static_cast<nn::Sequential&>(*prepared).inference_plans =
        std::make_shared<nn::detail::InferencePlans>();
  }
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

const char* int8_isa() {
  const char* name = nullptr;
  SINTER_DISPATCH(Device::cpu(), int8_gemm_isa, &name);
  return name;
}

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

// Each module of sinter/nn (and the int8 layers of sinter/quantize.h) as ONNX opset-17 operators:
// its emitter, and its row in module_rows() at the end. A new module's export goes here.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kern/elementwise_ops.h"
#include "onnx/exporter.h"
#include "sinter/nn/activations.h"
#include "sinter/nn/modules.h"
#include "sinter/nn/normalization.h"
#include "sinter/nn/resampling.h"
#include "sinter/nn/rnn.h"
#include "sinter/ops.h"
#include "sinter/quantize.h"

namespace sinter::onnx::detail {

namespace {

// The GELU kernels' constants, so that the exported graph computes their formulas.
using kern::fn::kGeluCubic;
using kern::fn::kSqrt1_2;
using kern::fn::kSqrt2OverPi;

// Per Note [int8 quantization], the input of an int8 layer goes through QuantizeLinear and
// DequantizeLinear with its scale (zero point 0); Sinter's value is unchanged.
Value qdq_input(Exporter& ex, const quant::QuantState& q, const std::string& type,
                const std::string& path, const std::string& scope, const Value& x) {
  SINTER_CHECK(q.quantized, "onnx::export_model: ", where(path), " (", type,
               ") is still calibrating; call quant::convert() before exporting");
  SINTER_CHECK(ex.float_dtype() == DType::f32, "onnx::export_model: ", where(path), " (", type,
               ") exports as int8 QuantizeLinear/DequantizeLinear with f32 scales, so the model "
               "must be exported in f32 (ExportOptions::dtype), not ",
               ex.float_dtype());
  const std::string scale = ex.constant(full({}, q.input_scale), "scale");
  const std::string zero = ex.int8_initializer(
      "const/zero_point_" + std::to_string(ex.graph().initializer_size()), {}, {0});
  const std::string quantized = ex.node("QuantizeLinear", {x.name, scale, zero}, scope);
  return {ex.node("DequantizeLinear", {quantized, scale, zero}, scope), x.t};
}

// The int8 weight of a quantized layer, under the weight's state_dict name, dequantized per
// output channel (axis 0) with its scales; returns the dequantized value's name.
std::string qdq_weight(Exporter& ex, const quant::QuantState& q, const Tensor& w,
                       const std::string& scope) {
  const std::string name = ex.name_or(w, "weight");
  const auto rows = static_cast<int64_t>(q.weight_scale.size());
  const std::string values = ex.int8_initializer(name, w.shape(), q.weight_q);
  const std::string scales =
      ex.constant(from_vector<float>(q.weight_scale, {rows}), "weight_scale");
  const std::string zeros = ex.int8_initializer(name + "_zero_point", {rows},
                                                std::vector<int8_t>(static_cast<size_t>(rows), 0));
  return ex.node_with("DequantizeLinear", {values, scales, zeros}, scope,
                      [](pb::NodeProto* n) { attr(n, "axis", int64_t{0}); });
}

// gelu(x) with Sinter's formulas (opset 17 has no Gelu operator):
//   erf:  0.5 x (1 + erf(x / sqrt 2))
//   tanh: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
std::string gelu(Exporter& ex, const std::string& x, Activation form, const std::string& scope) {
  std::string inner;
  if (form == Activation::GeluTanh) {
    const std::string cube = ex.node(
        "Mul", {ex.node("Mul", {ex.node("Mul", {x, ex.scalar(kGeluCubic)}, scope), x}, scope), x},
        scope);
    inner = ex.node(
        "Tanh",
        {ex.node("Mul", {ex.node("Add", {x, cube}, scope), ex.scalar(kSqrt2OverPi)}, scope)},
        scope);
  } else {
    inner = ex.node("Erf", {ex.node("Mul", {x, ex.scalar(kSqrt1_2)}, scope)}, scope);
  }
  const std::string half_x = ex.node("Mul", {x, ex.scalar(0.5)}, scope);
  return ex.node("Mul", {half_x, ex.node("Add", {inner, ex.scalar(1.0)}, scope)}, scope);
}

// A Linear, then its epilogue activation (Linear::activation) as nodes of its own; `w` names
// the weight's value where it is not the initializer (an int8 layer's dequantized weight).
Value linear(Exporter& ex, nn::Linear& l, const std::string& scope, const Value& x,
             const std::string& w = "") {
  (void)l.forward(x.t);  // checks the input
  const Tensor pre = sinter::linear(x.t, l.weight, l.bias);
  std::vector<std::string> inputs{x.name, w.empty() ? ex.weight(l.weight) : w};
  if (x.t.dim() == 2) {
    // (N, in) x (out, in)^T + (out): one Gemm.
    if (l.bias.defined()) inputs.push_back(ex.weight(l.bias));
    return activation(
        ex,
        {ex.node_with("Gemm", inputs, scope, [](pb::NodeProto* n) { attr(n, "transB", 1); }), pre},
        l.activation, scope);
  }
  // (*, in) x (in, out) with the weight transposed by a node (kept under its own name).
  const std::string wt = ex.node_with("Transpose", {inputs[1]}, scope, [](pb::NodeProto* n) {
    attr(n, "perm", std::vector<int64_t>{1, 0});
  });
  std::string y = ex.node("MatMul", {x.name, wt}, scope);
  if (l.bias.defined()) y = ex.node("Add", {y, ex.weight(l.bias)}, scope);
  return activation(ex, {y, pre}, l.activation, scope);
}

// BatchNormalization of x (N, c, *) by running statistics: eval-mode batch norm, and instance
// norm that tracks them. weight and bias may be undefined (1 and 0); `y` is Sinter's output.
Value normalize_by_running_stats(Exporter& ex, const std::string& scope, const Value& x,
                                 const Tensor& y, int64_t c, const Tensor& weight,
                                 const Tensor& bias, const Tensor& running_mean,
                                 const Tensor& running_var, double eps, double momentum) {
  const std::string scale =
      weight.defined() ? ex.weight(weight) : ex.constant(ones({c}, {.dtype = DType::f64}), "ones");
  const std::string shift =
      bias.defined() ? ex.weight(bias) : ex.constant(zeros({c}, {.dtype = DType::f64}), "zeros");
  return {
      ex.node_with("BatchNormalization",
                   {x.name, scale, shift, ex.weight(running_mean), ex.weight(running_var)}, scope,
                   [&](pb::NodeProto* n) {
                     attr_float(n, "epsilon", eps);
                     attr_float(n, "momentum", 1.0 - momentum);
                   }),
      y};
}

Value batch_norm(Exporter& ex, nn::BatchNorm2d& b, const std::string& path,
                 const std::string& scope, const Value& x) {
  SINTER_CHECK(b.running_mean.defined(), "onnx::export_model: ", where(path), " (", b.name(),
               ") keeps no running statistics, so it normalizes every batch with "
               "its own; ONNX export maps the eval mode's running statistics only");
  const Tensor y = b.forward(x.t);
  return normalize_by_running_stats(ex, scope, x, y, b.num_features, b.weight, b.bias,
                                    b.running_mean, b.running_var, b.eps, b.momentum);
}

Value layer_norm(Exporter& ex, nn::LayerNorm& l, const std::string& scope, const Value& x) {
  const Tensor y = l.forward(x.t);
  std::vector<std::string> inputs{x.name};
  if (l.elementwise_affine) {
    inputs.push_back(ex.weight(l.weight));
    if (l.bias.defined()) inputs.push_back(ex.weight(l.bias));  // B is optional
  } else {
    inputs.push_back(ex.constant(ones(l.normalized_shape, {.dtype = DType::f64}), "ones"));
  }
  const auto axis = -static_cast<int64_t>(l.normalized_shape.size());
  return {ex.node_with("LayerNormalization", inputs, scope,
                       [&](pb::NodeProto* n) {
                         attr(n, "axis", axis);
                         attr_float(n, "epsilon", l.eps);
                       }),
          y};
}

// rms_norm in opset-17 operators (RMSNormalization came in opset 23):
//   x / Sqrt(ReduceMean(x x, over the normalized axes) + eps) weight
// with rms_norm's eps when the module has none (the epsilon of the dtype the sums run in).
Value rms_norm(Exporter& ex, nn::RMSNorm& l, const std::string& scope, const Value& x) {
  const Tensor y = l.forward(x.t);
  const auto k = static_cast<int64_t>(l.normalized_shape.size());
  std::vector<int64_t> axes;
  for (int64_t d = -k; d < 0; ++d) axes.push_back(d);
  const double eps = l.eps ? *l.eps
                           : (x.t.dtype() == DType::f64 ? std::numeric_limits<double>::epsilon()
                                                        : std::numeric_limits<float>::epsilon());
  const std::string square = ex.node("Mul", {x.name, x.name}, scope);
  const std::string mean_square =
      ex.node_with("ReduceMean", {square}, scope, [&](pb::NodeProto* n) {
        attr(n, "axes", axes);
        attr(n, "keepdims", int64_t{1});
      });
  const std::string root =
      ex.node("Sqrt", {ex.node("Add", {mean_square, ex.scalar(eps)}, scope)}, scope);
  std::string out = ex.node("Div", {x.name, root}, scope);
  if (l.elementwise_affine) out = ex.node("Mul", {out, ex.weight(l.weight)}, scope);
  return {out, y};
}

void check_batched_image(const std::string& path, const char* what, const Tensor& x) {
  SINTER_CHECK(x.dim() == 4, "onnx::export_model: ", where(path), " (", what,
               ") takes an unbatched (C, H, W) input here; export with a batched (N, C, H, W) "
               "example input");
}

// Checks that ONNX's pool (opset 17 sizes) gives Sinter's output shape `y` and, for averages,
// that no window runs past the padded input (where the two count the divisor differently).
void check_pool(const std::string& path, const char* what, const Tensor& x, const Tensor& y,
                Size2 k, Size2 s, Size2 p, Size2 d, bool ceil, bool average) {
  const PoolDim h = pool_dim(x.size(2), k.h, s.h, p.h, d.h, ceil);
  const PoolDim w = pool_dim(x.size(3), k.w, s.w, p.w, d.w, ceil);
  SINTER_CHECK(h.size == y.size(2) && w.size == y.size(3), "onnx::export_model: ", where(path),
               " (", what, "): ONNX's ceil mode gives a ", h.size, "x", w.size,
               " output where Sinter's gives ", y.size(2), "x", y.size(3),
               " (its last window would start in the padding); export without ceil_mode");
  SINTER_CHECK(!average || (!h.overhangs && !w.overhangs), "onnx::export_model: ", where(path),
               " (", what,
               "): in ceil mode its last window runs past the padded input, where "
               "ONNX's AveragePool divides by another count than Sinter's; export without "
               "ceil_mode");
}

// MaxPool or AveragePool over (N, C, H, W) with Sinter's pool options (a stride of 0: the
// kernel size); `extra` sets the operator's own attributes.
template <class Extra>
Value pool(Exporter& ex, const char* op, const char* what, nn::Module& m, Size2 k, Size2 stride,
           Size2 pad, Size2 dilation, bool ceil_mode, const std::string& path,
           const std::string& scope, const Value& x, Extra&& extra) {
  check_batched_image(path, what, x.t);
  const Tensor y = m.forward(x.t);
  const Size2 s = (stride.h == 0 && stride.w == 0) ? k : stride;
  check_pool(path, what, x.t, y, k, s, pad, dilation, ceil_mode, std::string(op) == "AveragePool");
  return {ex.node_with(op, {x.name}, scope,
                       [&](pb::NodeProto* n) {
                         attr(n, "kernel_shape", std::vector<int64_t>{k.h, k.w});
                         attr(n, "strides", std::vector<int64_t>{s.h, s.w});
                         attr(n, "pads", std::vector<int64_t>{pad.h, pad.w, pad.h, pad.w});
                         attr(n, "ceil_mode", int64_t{ceil_mode});
                         extra(n);
                       }),
          y};
}

Value max_pool(Exporter& ex, nn::MaxPool2d& m, const std::string& path, const std::string& scope,
               const Value& x) {
  const MaxPool2dOptions& o = m.options;
  return pool(ex, "MaxPool", "MaxPool2d", m, m.kernel_size, o.stride, o.padding, o.dilation,
              o.ceil_mode, path, scope, x, [&](pb::NodeProto* n) {
                attr(n, "dilations", std::vector<int64_t>{o.dilation.h, o.dilation.w});
              });
}

Value avg_pool(Exporter& ex, nn::AvgPool2d& m, const std::string& path, const std::string& scope,
               const Value& x) {
  const AvgPool2dOptions& o = m.options;
  return pool(ex, "AveragePool", "AvgPool2d", m, m.kernel_size, o.stride, o.padding, 1, o.ceil_mode,
              path, scope, x, [&](pb::NodeProto* n) {
                attr(n, "count_include_pad", int64_t{o.count_include_pad});
              });
}

Value adaptive_avg_pool(Exporter& ex, nn::AdaptiveAvgPool2d& m, const std::string& path,
                        const std::string& scope, const Value& x) {
  check_batched_image(path, "AdaptiveAvgPool2d", x.t);
  const Tensor y = m.forward(x.t);
  const int64_t h = x.t.size(2), w = x.t.size(3);
  const Size2 out = m.output_size;
  if (out.h == 1 && out.w == 1) return {ex.node("GlobalAveragePool", {x.name}, scope), y};
  SINTER_CHECK(h % out.h == 0 && w % out.w == 0, "onnx::export_model: ", where(path),
               " (AdaptiveAvgPool2d): an output of ", out.h, "x", out.w, " from ", h, "x", w,
               " has windows of unequal sizes, which no ONNX pooling operator computes; "
               "export with an input whose size the output size divides");
  const Size2 k(h / out.h, w / out.w);
  return {ex.node_with("AveragePool", {x.name}, scope,
                       [&](pb::NodeProto* n) {
                         attr(n, "kernel_shape", std::vector<int64_t>{k.h, k.w});
                         attr(n, "strides", std::vector<int64_t>{k.h, k.w});
                       }),
          y};
}

Value flatten(Exporter& ex, nn::Flatten& f, const std::string& scope, const Value& x) {
  const Tensor y = f.forward(x.t);
  const int64_t rank = x.t.dim();
  const int64_t start = f.start_dim < 0 ? f.start_dim + rank : f.start_dim;
  const int64_t end = f.end_dim < 0 ? f.end_dim + rank : f.end_dim;
  if (start == 1 && end == rank - 1) {
    return {ex.node_with("Flatten", {x.name}, scope, [](pb::NodeProto* n) { attr(n, "axis", 1); }),
            y};
  }
  // Dims before the merged ones are copied (0: the batch stays symbolic), the merged ones are
  // -1, and those after keep their sizes.
  std::vector<int64_t> shape(static_cast<size_t>(start), 0);
  shape.push_back(-1);
  for (int64_t i = end + 1; i < rank; ++i) shape.push_back(x.t.size(i));
  return {ex.node("Reshape", {x.name, ex.ints(shape)}, scope), y};
}

// PRelu's slope broadcasts from the right, so C weights for x (N, C, d1, ...) are reshaped to
// (C, 1, ...); a shared one broadcasts as it is. The initializer keeps its state_dict name.
Value prelu(Exporter& ex, nn::PReLU& p, const std::string& scope, const Value& x) {
  std::string slope = ex.weight(p.weight);
  if (p.num_parameters > 1 && x.t.dim() > 2) {
    std::vector<int64_t> shape(static_cast<size_t>(x.t.dim() - 1), 1);
    shape[0] = p.num_parameters;
    slope = ex.node("Reshape", {slope, ex.ints(shape)}, scope);
  }
  return {ex.node("PRelu", {x.name, slope}, scope), p.forward(x.t)};
}

// A Reshape: the dims before `dim` copied (0: the batch stays symbolic), then the sizes as given
// (-1 inferred), then the later dims' sizes.
Value unflatten(Exporter& ex, nn::Unflatten& u, const std::string& scope, const Value& x) {
  const Tensor y = u.forward(x.t);
  const int64_t d = u.dim < 0 ? u.dim + x.t.dim() : u.dim;
  std::vector<int64_t> shape(static_cast<size_t>(d), 0);
  shape.insert(shape.end(), u.sizes.begin(), u.sizes.end());
  for (int64_t i = d + 1; i < x.t.dim(); ++i) shape.push_back(x.t.size(i));
  return {ex.node("Reshape", {x.name, ex.ints(shape)}, scope), y};
}

// Self-attention over (B, T, E), as MultiheadAttention::forward computes it.
Value attention(Exporter& ex, nn::MultiheadAttention& a, const std::string& path, const Value& x) {
  const std::string scope = path.empty() ? a.name() : path;
  SINTER_CHECK(x.t.dim() == 3, "onnx::export_model: ", where(path),
               " (MultiheadAttention) expects (B, T, E), got ", shape_str(x.t.shape()));
  const Tensor y = a.forward(x.t);
  const int64_t e = a.embed_dim, h = a.num_heads, d = e / h;
  const Value qkv = ex.emit(*a.qkv, join(path, "qkv"), x);
  // (B, T, 3E) -> (B, T, 3, H, d) -> (3, B, H, T, d); q, k, v: (B, H, T, d).
  const std::string heads =
      ex.node_with("Transpose", {ex.node("Reshape", {qkv.name, ex.ints({0, 0, 3, h, d})}, scope)},
                   scope, [](pb::NodeProto* n) {
                     attr(n, "perm", std::vector<int64_t>{2, 0, 3, 1, 4});
                   });
  const auto part = [&](int64_t i) {
    return ex.node_with("Gather", {heads, ex.ints({i}, true)}, scope,
                        [](pb::NodeProto* n) { attr(n, "axis", 0); });
  };
  const std::string q = part(0), k = part(1), v = part(2);
  const std::string merged = attention_core(ex, q, k, v, d, e, a.options.causal, x.name, scope);
  // The projection's input: only its shape matters to emit().
  const Value out =
      ex.emit(*a.out_proj, join(path, "out_proj"),
              {merged, zeros(x.t.shape(), {.dtype = x.t.dtype(), .device = x.t.device()})});
  return {out.name, y};
}

Value transformer_block(Exporter& ex, nn::TransformerBlock& b, const std::string& path,
                        const Value& x) {
  const std::string scope = path.empty() ? b.name() : path;
  const Value a = ex.emit(*b.attn, join(path, "attn"), ex.emit(*b.ln1, join(path, "ln1"), x));
  const Value h{ex.node("Add", {x.name, a.name}, scope), x.t + a.t};
  const Value fc = ex.emit(*b.fc, join(path, "fc"), ex.emit(*b.ln2, join(path, "ln2"), h));
  const Value act = activation(ex, fc, b.options.activation, scope);
  const Value mlp = ex.emit(*b.proj, join(path, "proj"), act);
  return {ex.node("Add", {h.name, mlp.name}, scope), h.t + mlp.t};
}

// --- the norms of nn/normalization.h, the layers of nn/resampling.h ---

// weight or bias (c) as (c, 1, ..., 1), to broadcast over x (N, c, *) of rank `rank`.
std::string per_channel(Exporter& ex, const Tensor& p, int64_t rank, const std::string& scope) {
  std::vector<int64_t> shape(static_cast<size_t>(rank - 1), 1);
  shape[0] = p.size(0);
  return ex.node("Reshape", {ex.weight(p), ex.ints(shape)}, scope);
}

// group_norm as InstanceNormalization of x viewed as (N, G, rest) (opset 17 has no
// GroupNormalization), back to x's shape, then the per-channel affine.
Value group_norm(Exporter& ex, nn::GroupNorm& g, const std::string& scope, const Value& x) {
  const Tensor y = g.forward(x.t);
  const int64_t groups = g.num_groups, rank = x.t.dim();
  const std::string rows = ex.node("Reshape", {x.name, ex.ints({0, groups, -1})}, scope);
  const std::string normed =
      ex.node_with("InstanceNormalization",
                   {rows, ex.constant(ones({groups}, {.dtype = DType::f64}), "ones"),
                    ex.constant(zeros({groups}, {.dtype = DType::f64}), "zeros")},
                   scope, [&](pb::NodeProto* n) { attr_float(n, "epsilon", g.eps); });
  std::string out = ex.node("Reshape", {normed, ex.node("Shape", {x.name}, scope)}, scope);
  if (g.affine) {
    out = ex.node("Mul", {out, per_channel(ex, g.weight, rank, scope)}, scope);
    if (g.bias.defined()) out = ex.node("Add", {out, per_channel(ex, g.bias, rank, scope)}, scope);
  }
  return {out, y};
}

// Eval mode: the running statistics when tracked (BatchNormalization), else each instance's own.
Value instance_norm(Exporter& ex, nn::InstanceNorm& m, const std::string& path,
                    const std::string& scope, const Value& x) {
  SINTER_CHECK(x.t.dim() == m.spatial_dims() + 2, "onnx::export_model: ", where(path), " (",
               m.name(), ") takes an unbatched input of shape ", shape_str(x.t.shape()),
               " here; export with a batched example input");
  const Tensor y = m.forward(x.t);
  const int64_t c = x.t.size(1);
  if (m.track_running_stats) {
    return normalize_by_running_stats(ex, scope, x, y, c, m.weight, m.bias, m.running_mean,
                                      m.running_var, m.eps, m.momentum);
  }
  const std::string scale =
      m.affine ? ex.weight(m.weight) : ex.constant(ones({c}, {.dtype = DType::f64}), "ones");
  const std::string shift =
      m.affine ? ex.weight(m.bias) : ex.constant(zeros({c}, {.dtype = DType::f64}), "zeros");
  return {ex.node_with("InstanceNormalization", {x.name, scale, shift}, scope,
                       [&](pb::NodeProto* n) { attr_float(n, "epsilon", m.eps); }),
          y};
}

// Resize with interpolate's coordinates (Note [resample coordinates] in src/kern/resample.h):
// nearest is asymmetric with floor, nearest-exact half_pixel rounding halves up, the others
// half_pixel or align_corners, cubic with A = -0.75 and the border taps clamped (exclude_outside
// 0). A caller's scale factor maps the coordinates, so it goes in as Resize's scales (f32); else
// the output sizes, with the batch and channels taken from the input.
Value upsample(Exporter& ex, nn::Upsample& u, const std::string& path, const std::string& scope,
               const Value& x) {
  const Tensor y = u.forward(x.t);
  const InterpolateOptions& o = u.options;
  SINTER_CHECK(o.mode != InterpolateMode::Area, "onnx::export_model: ", path,
               " (Upsample) has mode area, which ONNX's Resize does not compute");
  const bool nearest = o.mode == InterpolateMode::Nearest;
  const bool exact = o.mode == InterpolateMode::NearestExact;
  const bool cubic = o.mode == InterpolateMode::Bicubic;
  const bool linear = !nearest && !exact && !cubic;
  std::vector<std::string> inputs{x.name, ""};
  if (!o.scale_factor.empty() && !o.recompute_scale_factor) {
    SINTER_CHECK(ex.float_dtype() == DType::f32, "onnx::export_model: ", where(path),
                 " (Upsample) with a scale_factor exports Resize's f32 scales, so the model must "
                 "be exported in f32, not ",
                 ex.float_dtype());
    std::vector<float> s{1.0f, 1.0f};
    for (int64_t d = 2; d < x.t.dim(); ++d) {
      const double f = o.scale_factor[o.scale_factor.size() == 1 ? 0 : d - 2];
      // A linear dim that keeps its size is the identity (PyTorch's shortcut): scale 1.
      s.push_back(linear && y.size(d) == x.t.size(d) ? 1.0f : static_cast<float>(f));
    }
    inputs.push_back(ex.constant(from_vector<float>(s, {x.t.dim()}), "scales"));
  } else {
    const std::vector<int64_t> spatial(y.shape().begin() + 2, y.shape().end());
    const std::string lead = ex.node_with("Shape", {x.name}, scope, [](pb::NodeProto* n) {
      attr(n, "start", int64_t{0});
      attr(n, "end", int64_t{2});
    });
    inputs.push_back("");
    inputs.push_back(ex.node_with("Concat", {lead, ex.ints(spatial)}, scope,
                                  [](pb::NodeProto* n) { attr(n, "axis", int64_t{0}); }));
  }
  const bool corners = o.align_corners.value_or(false);
  const char* mode = nearest || exact ? "nearest" : (cubic ? "cubic" : "linear");
  const char* coordinates = nearest ? "asymmetric" : (corners ? "align_corners" : "half_pixel");
  return {ex.node_with("Resize", inputs, scope,
                       [&](pb::NodeProto* n) {
                         attr_string(n, "mode", mode);
                         attr_string(n, "coordinate_transformation_mode", coordinates);
                         if (nearest || exact) {
                           attr_string(n, "nearest_mode", nearest ? "floor" : "round_prefer_ceil");
                         }
                         if (cubic) {
                           attr_float(n, "cubic_coeff_a", -0.75);
                           attr(n, "exclude_outside", int64_t{0});
                         }
                       }),
          y};
}

// DepthToSpace's CRD order is pixel_shuffle's.
Value pixel_shuffle(Exporter& ex, nn::PixelShuffle& p, const std::string& path,
                    const std::string& scope, const Value& x) {
  check_batched_image(path, "PixelShuffle", x.t);
  const Tensor y = p.forward(x.t);
  return {ex.node_with("DepthToSpace", {x.name}, scope,
                       [&](pb::NodeProto* n) {
                         attr(n, "blocksize", p.upscale_factor);
                         attr_string(n, "mode", "CRD");
                       }),
          y};
}

// SpaceToDepth orders the channels (i, j, c), pixel_unshuffle (c, i, j): reshapes and a
// transpose instead, (N, C, H, r, W, r) -> (N, C, r, r, H, W).
Value pixel_unshuffle(Exporter& ex, nn::PixelUnshuffle& p, const std::string& path,
                      const std::string& scope, const Value& x) {
  check_batched_image(path, "PixelUnshuffle", x.t);
  const Tensor y = p.forward(x.t);
  const int64_t r = p.downscale_factor, c = x.t.size(1), h = y.size(2), w = y.size(3);
  const std::string blocks = ex.node("Reshape", {x.name, ex.ints({-1, c, h, r, w, r})}, scope);
  const std::string moved = ex.node_with("Transpose", {blocks}, scope, [](pb::NodeProto* n) {
    attr(n, "perm", std::vector<int64_t>{0, 1, 3, 5, 2, 4});
  });
  return {ex.node("Reshape", {moved, ex.ints({-1, c * r * r, h, w})}, scope), y};
}

}  // namespace

std::string positions(Exporter& ex, const std::string& x, const std::string& scope) {
  const std::string t = ex.node_with("Gather", {ex.node("Shape", {x}, scope), ex.ints({1}, true)},
                                     scope, [](pb::NodeProto* n) { attr(n, "axis", 0); });
  return ex.node("Range", {ex.ints({0}, true), t, ex.ints({1}, true)}, scope);
}

std::string attention_core(Exporter& ex, const std::string& q, const std::string& k,
                           const std::string& v, int64_t d, int64_t e, bool causal,
                           const std::string& seq, const std::string& scope) {
  const std::string kt = ex.node_with("Transpose", {k}, scope, [](pb::NodeProto* n) {
    attr(n, "perm", std::vector<int64_t>{0, 1, 3, 2});
  });
  std::string scores = ex.node(
      "Mul",
      {ex.node("MatMul", {q, kt}, scope), ex.scalar(1.0 / std::sqrt(static_cast<double>(d)))},
      scope);
  if (causal) {
    // keep (T, T): query i sees keys j <= i.
    const std::string r = positions(ex, seq, scope);
    const std::string rows = ex.node("Unsqueeze", {r, ex.ints({1})}, scope);
    const std::string cols = ex.node("Unsqueeze", {r, ex.ints({0})}, scope);
    const std::string keep = ex.node("GreaterOrEqual", {rows, cols}, scope);
    scores = ex.node("Where", {keep, scores, ex.scalar(-std::numeric_limits<double>::infinity())},
                     scope);
  }
  const std::string weights =
      ex.node_with("Softmax", {scores}, scope, [](pb::NodeProto* n) { attr(n, "axis", -1); });
  // (B, H, T, d) -> (B, T, H, d) -> (B, T, e), heads side by side.
  return ex.node("Reshape",
                 {ex.node_with("Transpose", {ex.node("MatMul", {weights, v}, scope)}, scope,
                               [](pb::NodeProto* n) {
                                 attr(n, "perm", std::vector<int64_t>{0, 2, 1, 3});
                               }),
                  ex.ints({0, 0, e})},
                 scope);
}

// act(x), for a block's Activation: the ONNX node's output and Sinter's value.
Value activation(Exporter& ex, const Value& x, Activation act, const std::string& scope) {
  switch (act) {
    case Activation::None:
      return x;
    case Activation::Relu:
      return {ex.node("Relu", {x.name}, scope), relu(x.t)};
    case Activation::Gelu:
    case Activation::GeluTanh:
      return {gelu(ex, x.name, act, scope), sinter::gelu(x.t, act)};
  }
  SINTER_THROW("onnx::export_model: unknown activation ", static_cast<int>(act));
}

const std::vector<Mapping>& module_rows() {
  static const std::vector<Mapping> table = {
      SINTER_ONNX_ROW(nn::Sequential, "Sequential",
                      {
                        Value v = x;
                        for (const auto& [name, child] : m.named_children()) {
                          v = ex.emit(*child, join(s.path, name), v);
                        }
                        return v;
                      }),
      SINTER_ONNX_ROW(nn::Linear, "Linear", { return linear(ex, m, s.scope, x); }),
      SINTER_ONNX_ROW(nn::Conv2d, "Conv2d", { return conv2d(ex, m, s.scope, x); }),
      SINTER_ONNX_ROW(nn::Conv1d, "Conv1d", { return conv_layer(ex, m, s.scope, x); }),
      SINTER_ONNX_ROW(nn::Conv3d, "Conv3d", { return conv_layer(ex, m, s.scope, x); }),
      SINTER_ONNX_ROW(nn::ConvTranspose1d, "ConvTranspose1d",
                      { return conv_layer(ex, m, s.scope, x); }),
      SINTER_ONNX_ROW(nn::ConvTranspose2d, "ConvTranspose2d",
                      { return conv_layer(ex, m, s.scope, x); }),
      SINTER_ONNX_ROW(nn::ConvTranspose3d, "ConvTranspose3d",
                      { return conv_layer(ex, m, s.scope, x); }),
      SINTER_ONNX_ROW(nn::RNN, "RNN", { return rnn_layer(ex, m, s, x); }),
      SINTER_ONNX_ROW(nn::LSTM, "LSTM", { return rnn_layer(ex, m, s, x); }),
      SINTER_ONNX_ROW(nn::GRU, "GRU", { return rnn_layer(ex, m, s, x); }),
      SINTER_ONNX_ROW(quant::QuantizedLinear, "QuantizedLinear",
                      {
                        const Value in = qdq_input(ex, m.q, m.name(), s.path, s.scope, x);
                        return linear(ex, m, s.scope, in, qdq_weight(ex, m.q, m.weight, s.scope));
                      }),
      SINTER_ONNX_ROW(quant::QuantizedConv2d, "QuantizedConv2d",
                      {
                        const Value in = qdq_input(ex, m.q, m.name(), s.path, s.scope, x);
                        return conv2d(ex, m, s.scope, in, qdq_weight(ex, m.q, m.weight, s.scope));
                      }),
      SINTER_ONNX_ROW(nn::BatchNorm2d, "BatchNorm2d",
                      { return batch_norm(ex, m, s.path, s.scope, x); }),
      SINTER_ONNX_ROW(nn::BatchNorm1d, "BatchNorm1d",
                      { return batch_norm(ex, m, s.path, s.scope, x); }),
      SINTER_ONNX_ROW(nn::LayerNorm, "LayerNorm", { return layer_norm(ex, m, s.scope, x); }),
      SINTER_ONNX_ROW(nn::RMSNorm, "RMSNorm", { return rms_norm(ex, m, s.scope, x); }),
      SINTER_ONNX_ROW(nn::ReLU, "ReLU",
                      {
                        return {ex.node("Relu", {x.name}, s.scope), m.forward(x.t)};
                      }),
      SINTER_ONNX_ROW(nn::GELU, "GELU",
                      {
                        return {gelu(ex, x.name, m.form, s.scope), m.forward(x.t)};
                      }),
      SINTER_ONNX_ROW(nn::Tanh, "Tanh",
                      {
                        return {ex.node("Tanh", {x.name}, s.scope), m.forward(x.t)};
                      }),
      SINTER_ONNX_ROW(nn::Sigmoid, "Sigmoid",
                      {
                        return {ex.node("Sigmoid", {x.name}, s.scope), m.forward(x.t)};
                      }),
      SINTER_ONNX_ROW(nn::ELU, "ELU",
                      {
                        const double alpha = m.alpha;
                        return {
                            ex.node_with("Elu", {x.name}, s.scope,
                                         [&](pb::NodeProto* n) { attr_float(n, "alpha", alpha); }),
                            m.forward(x.t)};
                      }),
      // With Sinter's constants rather than the operator's defaults, their f32 roundings.
      SINTER_ONNX_ROW(nn::SELU, "SELU",
                      {
                        return {ex.node_with("Selu", {x.name}, s.scope,
                                             [](pb::NodeProto* n) {
                                               attr_float(n, "alpha", kern::fn::kSeluAlpha);
                                               attr_float(n, "gamma", kern::fn::kSeluScale);
                                             }),
                                m.forward(x.t)};
                      }),
      // Opset 17 has no Mish (18 does): x tanh(softplus(x)).
      SINTER_ONNX_ROW(nn::Mish, "Mish",
                      {
                        const std::string t =
                            ex.node("Tanh", {ex.node("Softplus", {x.name}, s.scope)}, s.scope);
                        return {ex.node("Mul", {x.name, t}, s.scope), m.forward(x.t)};
                      }),
      // HardSigmoid's alpha defaults to 0.2: PyTorch's slope is 1/6 (as HardSwish's).
      SINTER_ONNX_ROW(nn::Hardsigmoid, "Hardsigmoid",
                      {
                        return {ex.node_with("HardSigmoid", {x.name}, s.scope,
                                             [](pb::NodeProto* n) {
                                               attr_float(n, "alpha", 1.0 / 6.0);
                                               attr_float(n, "beta", 0.5);
                                             }),
                                m.forward(x.t)};
                      }),
      SINTER_ONNX_ROW(nn::Hardswish, "Hardswish",
                      {
                        return {ex.node("HardSwish", {x.name}, s.scope), m.forward(x.t)};
                      }),
      SINTER_ONNX_ROW(nn::PReLU, "PReLU", { return prelu(ex, m, s.scope, x); }),
      SINTER_ONNX_ROW(nn::Softmax, "Softmax",
                      {
                        const int64_t dim = m.dim;
                        return {ex.node_with("Softmax", {x.name}, s.scope,
                                             [&](pb::NodeProto* n) { attr(n, "axis", dim); }),
                                m.forward(x.t)};
                      }),
      SINTER_ONNX_ROW(nn::LogSoftmax, "LogSoftmax",
                      {
                        const int64_t dim = m.dim;
                        return {ex.node_with("LogSoftmax", {x.name}, s.scope,
                                             [&](pb::NodeProto* n) { attr(n, "axis", dim); }),
                                m.forward(x.t)};
                      }),
      SINTER_ONNX_ROW(nn::Identity, "Identity",
                      {
                        return {ex.node("Identity", {x.name}, s.scope), x.t};
                      }),
      SINTER_ONNX_ROW(nn::Unflatten, "Unflatten", { return unflatten(ex, m, s.scope, x); }),
      SINTER_ONNX_ROW(nn::MaxPool2d, "MaxPool2d", { return max_pool(ex, m, s.path, s.scope, x); }),
      SINTER_ONNX_ROW(nn::AvgPool2d, "AvgPool2d", { return avg_pool(ex, m, s.path, s.scope, x); }),
      SINTER_ONNX_ROW(nn::MaxPool3d, "MaxPool3d", { return pool3d(ex, m, s, x); }),
      SINTER_ONNX_ROW(nn::AvgPool3d, "AvgPool3d", { return pool3d(ex, m, s, x); }),
      SINTER_ONNX_ROW(nn::Unfold, "Unfold", { return unfold_layer(ex, m, s, x); }),
      SINTER_ONNX_ROW(nn::Fold, "Fold", { return fold_layer(ex, m, s, x); }),
      SINTER_ONNX_ROW(nn::AdaptiveAvgPool2d, "AdaptiveAvgPool2d",
                      { return adaptive_avg_pool(ex, m, s.path, s.scope, x); }),
      SINTER_ONNX_ROW(nn::Flatten, "Flatten", { return flatten(ex, m, s.scope, x); }),
      SINTER_ONNX_ROW(nn::Dropout, "Dropout", { return x; }),  // eval mode: the identity
      SINTER_ONNX_ROW(
          nn::Embedding, "Embedding",
          {
            return {ex.node("Gather", {ex.weight(m.weight), x.name}, s.scope), m.forward(x.t)};
          }),
      SINTER_ONNX_ROW(nn::MultiheadAttention, "MultiheadAttention",
                      { return attention(ex, m, s.path, x); }),
      SINTER_ONNX_ROW(nn::TransformerBlock, "TransformerBlock",
                      { return transformer_block(ex, m, s.path, x); }),
      SINTER_ONNX_ROW(nn::BatchNorm3d, "BatchNorm3d",
                      { return batch_norm(ex, m, s.path, s.scope, x); }),
      SINTER_ONNX_ROW(nn::GroupNorm, "GroupNorm", { return group_norm(ex, m, s.scope, x); }),
      SINTER_ONNX_ROW(nn::InstanceNorm1d, "InstanceNorm1d",
                      { return instance_norm(ex, m, s.path, s.scope, x); }),
      SINTER_ONNX_ROW(nn::InstanceNorm2d, "InstanceNorm2d",
                      { return instance_norm(ex, m, s.path, s.scope, x); }),
      SINTER_ONNX_ROW(nn::InstanceNorm3d, "InstanceNorm3d",
                      { return instance_norm(ex, m, s.path, s.scope, x); }),
      SINTER_ONNX_ROW(nn::Upsample, "Upsample", { return upsample(ex, m, s.path, s.scope, x); }),
      SINTER_ONNX_ROW(nn::PixelShuffle, "PixelShuffle",
                      { return pixel_shuffle(ex, m, s.path, s.scope, x); }),
      SINTER_ONNX_ROW(nn::PixelUnshuffle, "PixelUnshuffle",
                      { return pixel_unshuffle(ex, m, s.path, s.scope, x); }),
  };
  return table;
}

}  // namespace sinter::onnx::detail

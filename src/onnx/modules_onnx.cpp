// Each module of sinter/nn (and the int8 layers of sinter/quantize.h) as ONNX opset-17 operators:
// its emitter, and its row in module_rows() at the end. A new module's export goes here.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kern/elementwise_ops.h"
#include "onnx/exporter.h"
#include "sinter/nn/activations.h"
#include "sinter/nn/modules.h"
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

Value conv2d(Exporter& ex, nn::Conv2d& c, const std::string& scope, const Value& x,
             const std::string& w = "") {
  std::vector<std::string> inputs{x.name, w.empty() ? ex.weight(c.weight) : w};
  if (c.bias.defined()) inputs.push_back(ex.weight(c.bias));
  const nn::Conv2dOptions& o = c.options;
  const Size2 k = c.kernel_size;
  (void)c.forward(x.t);  // checks the input
  const Tensor y = sinter::conv2d(
      x.t, c.weight, c.bias,
      {.stride = o.stride, .padding = o.padding, .dilation = o.dilation, .groups = o.groups});
  const Value conv{
      ex.node_with("Conv", inputs, scope,
                   [&](pb::NodeProto* n) {
                     attr(n, "kernel_shape", std::vector<int64_t>{k.h, k.w});
                     attr(n, "strides", std::vector<int64_t>{o.stride.h, o.stride.w});
                     attr(n, "pads",
                          std::vector<int64_t>{o.padding.h, o.padding.w, o.padding.h, o.padding.w});
                     attr(n, "dilations", std::vector<int64_t>{o.dilation.h, o.dilation.w});
                     attr(n, "group", o.groups);
                   }),
      y};
  return activation(ex, conv, c.activation, scope);  // Conv2d::activation
}

Value batch_norm(Exporter& ex, nn::BatchNorm2d& b, const std::string& path,
                 const std::string& scope, const Value& x) {
  SINTER_CHECK(b.running_mean.defined(), "onnx::export_model: ", where(path), " (", b.name(),
               ") keeps no running statistics, so it normalizes every batch with "
               "its own; ONNX export maps the eval mode's running statistics only");
  const Tensor y = b.forward(x.t);
  const int64_t c = b.num_features;
  const std::string scale =
      b.affine ? ex.weight(b.weight) : ex.constant(ones({c}, {.dtype = DType::f64}), "ones");
  const std::string shift =
      b.affine ? ex.weight(b.bias) : ex.constant(zeros({c}, {.dtype = DType::f64}), "zeros");
  return {ex.node_with("BatchNormalization",
                       {x.name, scale, shift, ex.weight(b.running_mean), ex.weight(b.running_var)},
                       scope,
                       [&](pb::NodeProto* n) {
                         attr_float(n, "epsilon", b.eps);
                         attr_float(n, "momentum", 1.0 - b.momentum);
                       }),
          y};
}

Value layer_norm(Exporter& ex, nn::LayerNorm& l, const std::string& scope, const Value& x) {
  const Tensor y = l.forward(x.t);
  std::vector<std::string> inputs{x.name};
  if (l.elementwise_affine) {
    inputs.push_back(ex.weight(l.weight));
    inputs.push_back(ex.weight(l.bias));
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

// The pool's ONNX output size along one dim, and whether its last window runs past the padded
// input (ceil mode).
struct PoolDim {
  int64_t size;
  bool overhangs;
};
PoolDim pool_dim(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  const int64_t size = (ceil ? (span + s - 1) / s : span / s) + 1;
  return {size, (size - 1) * s + d * (k - 1) + 1 > in + 2 * p};
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
  };
  return table;
}

}  // namespace sinter::onnx::detail

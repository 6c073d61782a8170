// ONNX export (Note [onnx export] in sinter/onnx.h): the module tree mapped to ONNX operators with
// the ONNX library's protobuf classes, then checked by its checker and strict shape inference.
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "internal/atomic_file.h"
#include "kern/elementwise_ops.h"
#include "sinter/autograd.h"
#include "sinter/core/noncopyable.h"
#include "sinter/nn/models.h"
#include "sinter/nn/modules.h"
#include "sinter/onnx.h"
#include "sinter/ops.h"
#include "sinter/quantize.h"

namespace sinter::onnx {

namespace {

namespace pb = ::onnx;

// The GELU kernels' constants, so that the exported graph computes their formulas.
using kern::fn::kGeluCubic;
using kern::fn::kSqrt1_2;
using kern::fn::kSqrt2OverPi;

int32_t elem_type(DType t) {
  switch (t) {
    case DType::f32:
      return pb::TensorProto::FLOAT;
    case DType::f64:
      return pb::TensorProto::DOUBLE;
    case DType::bf16:
      return pb::TensorProto::BFLOAT16;
    case DType::f16:
      return pb::TensorProto::FLOAT16;
    case DType::i64:
      return pb::TensorProto::INT64;
    case DType::i32:
      return pb::TensorProto::INT32;
    case DType::u8:
      return pb::TensorProto::UINT8;
    case DType::b8:
      return pb::TensorProto::BOOL;
  }
  SINTER_THROW("onnx::export_model: unknown dtype");
}

// A value of the graph: its name, and the tensor Sinter computes for it from the example input
// (which gives its shape).
struct Value {
  std::string name;
  Tensor t;
};

class Exporter {
 public:
  Exporter(nn::Module& root, const ExportOptions& o, DType float_dtype)
      : o_(o), float_dtype_(float_dtype) {
    for (const auto& [name, p] : root.named_parameters()) names_.emplace(p.impl(), name);
    for (const auto& [name, b] : root.named_buffers()) names_.emplace(b.impl(), name);
    graph_ = model_.mutable_graph();
  }

  pb::ModelProto& model() { return model_; }
  pb::GraphProto& graph() { return *graph_; }

  // --- graph building ---

  // Adds a node; returns its first output's name. Names are "<scope>/<op>_<n>", unique.
  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::string& scope, pb::NodeProto** out = nullptr) {
    pb::NodeProto* n = graph_->add_node();
    n->set_op_type(op);
    for (const std::string& in : inputs) n->add_input(in);
    const std::string name = (scope.empty() ? std::string("") : scope + "/") + op + "_" +
                             std::to_string(graph_->node_size() - 1);
    n->set_name(name);
    n->add_output(name);
    if (out != nullptr) *out = n;
    return name;
  }
  static void attr(pb::NodeProto* n, const char* name, int64_t v) {
    pb::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_float(pb::NodeProto* n, const char* name, double v) {
    pb::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(v));
  }
  static void attr(pb::NodeProto* n, const char* name, const std::vector<int64_t>& v) {
    pb::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::INTS);
    for (const int64_t x : v) a->add_ints(x);
  }
  // A node with one attribute set by `set`.
  template <class Set>
  std::string node_with(const std::string& op, const std::vector<std::string>& inputs,
                        const std::string& scope, Set&& set) {
    pb::NodeProto* n = nullptr;
    std::string name = node(op, inputs, scope, &n);
    set(n);
    return name;
  }

  // The initializer of one of the module's parameters or buffers, under its state_dict name
  // (created on first use: a tied weight is stored once). Floating tensors take the export dtype.
  std::string weight(const Tensor& t) {
    const auto done = weights_.find(t.impl());
    if (done != weights_.end()) return done->second;
    const auto named = names_.find(t.impl());
    const std::string name =
        named != names_.end() ? named->second : "const/tensor_" + std::to_string(weights_.size());
    add_initializer(name, t);
    weights_.emplace(t.impl(), name);
    return name;
  }
  // An anonymous constant tensor (floating ones in the export dtype).
  std::string constant(const Tensor& t, const std::string& hint) {
    const std::string name = "const/" + hint + "_" + std::to_string(graph_->initializer_size());
    add_initializer(name, t);
    return name;
  }
  // A 0-dim floating constant in the export dtype, made once per value.
  std::string scalar(double v) {
    const auto it = scalars_.find(v);
    if (it != scalars_.end()) return it->second;
    const std::string name = constant(full({}, v, {.dtype = DType::f64}), "scalar");
    scalars_.emplace(v, name);
    return name;
  }
  // An i64 constant: 1-D, or 0-dim when `rank0` (a Gather index that drops its axis).
  std::string ints(const std::vector<int64_t>& v, bool rank0 = false) {
    const auto key = std::make_pair(v, rank0);
    const auto it = ints_.find(key);
    if (it != ints_.end()) return it->second;
    const Tensor t = rank0 ? full({}, static_cast<double>(v.at(0)), {.dtype = DType::i64})
                           : from_vector<int64_t>(v, {static_cast<int64_t>(v.size())});
    const std::string name = constant(t, "ints");
    ints_.emplace(key, name);
    return name;
  }

  // An int8 initializer from its values (Sinter has no int8 tensors: the quantized layers keep
  // theirs in a vector, Note [int8 quantization]).
  std::string int8_initializer(const std::string& name, const Shape& shape,
                               const std::vector<int8_t>& values) {
    pb::TensorProto* p = graph_->add_initializer();
    p->set_name(name);
    p->set_data_type(pb::TensorProto::INT8);
    for (const int64_t d : shape) p->add_dims(d);
    p->set_raw_data(values.data(), values.size());
    return name;
  }

  void add_initializer(const std::string& name, const Tensor& t) {
    NoGradGuard no_grad;
    Tensor h = t.detach().to(Device::cpu());
    if (is_floating(h.dtype())) h = h.to(float_dtype_);
    h = h.contiguous();
    pb::TensorProto* p = graph_->add_initializer();
    p->set_name(name);
    p->set_data_type(elem_type(h.dtype()));
    for (const int64_t d : h.shape()) p->add_dims(d);
    p->set_raw_data(h.data_ptr(), static_cast<size_t>(h.numel()) * element_size(h.dtype()));
  }

  // The value's graph type: its dtype (floats as exported) and its shape, with the dynamic dims
  // named.
  void set_type(pb::ValueInfoProto* vi, const std::string& name, const Tensor& t) const {
    vi->set_name(name);
    pb::TypeProto_Tensor* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type(is_floating(t.dtype()) ? float_dtype_ : t.dtype()));
    pb::TensorShapeProto* shape = tt->mutable_shape();
    for (int64_t i = 0; i < t.dim(); ++i) {
      pb::TensorShapeProto_Dimension* d = shape->add_dim();
      if (const char* param = dynamic_dim(i)) {
        d->set_dim_param(param);
      } else {
        d->set_dim_value(t.size(i));
      }
    }
  }
  // The symbolic name of dim i of the input and output, or null where it is fixed.
  const char* dynamic_dim(int64_t i) const {
    if (i == 0 && o_.dynamic_batch) return "batch";
    if (i == 1 && o_.dynamic_sequence) return "sequence";
    return nullptr;
  }

  // --- modules ---

  Value emit(nn::Module& m, const std::string& path, const Value& x) {
    const std::string scope = path.empty() ? m.name() : path;
    for (const Mapping& row : mappings()) {
      if (typeid(m) == *row.type) return row.emit(*this, m, {path, scope}, x);
    }
    std::string names;
    for (const Mapping& row : mappings())
      names += (names.empty() ? "" : ", ") + std::string(row.name);
    SINTER_THROW("onnx::export_model: cannot export ", where(path), " (a ", m.name(),
                 "): it has no ONNX mapping. Supported: ", names);
  }

 private:
  // Where a module sits: its state_dict path ("" for the root) and the scope its nodes are named
  // under.
  struct Site {
    const std::string& path;
    const std::string& scope;
  };
  using Emitter = Value (*)(Exporter&, nn::Module&, const Site&, const Value&);
  struct Mapping {
    const char* name;
    const std::type_info* type;
    Emitter emit;
  };
  // The emitter of a row: F, a captureless lambda, on the module as its own type M.
  template <class M, class F>
  static Value adapt(Exporter& e, nn::Module& m, const Site& s, const Value& x) {
    return F{}(e, static_cast<M&>(m), s, x);
  }
#define SINTER_ONNX_ROW(M, name, ...)                                                             \
  Mapping {                                                                                       \
    name, &typeid(M),                                                                             \
        &adapt<M,                                                                                 \
               decltype([]([[maybe_unused]] Exporter & e, [[maybe_unused]] M & m,                 \
                           [[maybe_unused]] const Site& s, const Value& x) -> Value __VA_ARGS__)> \
  }

  // The module types the export maps, each by its exact type (a subclass may compute something
  // else, so it is not taken for its base), and how: the one list emit() dispatches on and its
  // error names.
  static const std::vector<Mapping>& mappings() {
    static const std::vector<Mapping> table = {
        SINTER_ONNX_ROW(nn::Sequential, "Sequential",
                        {
                          Value v = x;
                          for (const auto& [name, child] : m.named_children()) {
                            v = e.emit(*child, join(s.path, name), v);
                          }
                          return v;
                        }),
        SINTER_ONNX_ROW(nn::Linear, "Linear", { return e.linear(m, s.scope, x); }),
        SINTER_ONNX_ROW(nn::Conv2d, "Conv2d", { return e.conv2d(m, s.scope, x); }),
        SINTER_ONNX_ROW(quant::QuantizedLinear, "QuantizedLinear",
                        {
                          const Value in = e.qdq_input(m.q, m.name(), s.path, s.scope, x);
                          return e.linear(m, s.scope, in, e.qdq_weight(m.q, m.weight, s.scope));
                        }),
        SINTER_ONNX_ROW(quant::QuantizedConv2d, "QuantizedConv2d",
                        {
                          const Value in = e.qdq_input(m.q, m.name(), s.path, s.scope, x);
                          return e.conv2d(m, s.scope, in, e.qdq_weight(m.q, m.weight, s.scope));
                        }),
        SINTER_ONNX_ROW(nn::BatchNorm2d, "BatchNorm2d",
                        { return e.batch_norm(m, s.path, s.scope, x); }),
        SINTER_ONNX_ROW(nn::BatchNorm1d, "BatchNorm1d",
                        { return e.batch_norm(m, s.path, s.scope, x); }),
        SINTER_ONNX_ROW(nn::LayerNorm, "LayerNorm", { return e.layer_norm(m, s.scope, x); }),
        SINTER_ONNX_ROW(nn::RMSNorm, "RMSNorm", { return e.rms_norm(m, s.scope, x); }),
        SINTER_ONNX_ROW(nn::ReLU, "ReLU",
                        {
                          return {e.node("Relu", {x.name}, s.scope), m.forward(x.t)};
                        }),
        SINTER_ONNX_ROW(nn::GELU, "GELU",
                        {
                          return {e.gelu(x.name, m.form, s.scope), m.forward(x.t)};
                        }),
        SINTER_ONNX_ROW(nn::Tanh, "Tanh",
                        {
                          return {e.node("Tanh", {x.name}, s.scope), m.forward(x.t)};
                        }),
        SINTER_ONNX_ROW(nn::Sigmoid, "Sigmoid",
                        {
                          return {e.node("Sigmoid", {x.name}, s.scope), m.forward(x.t)};
                        }),
        SINTER_ONNX_ROW(nn::MaxPool2d, "MaxPool2d", { return e.max_pool(m, s.path, s.scope, x); }),
        SINTER_ONNX_ROW(nn::AvgPool2d, "AvgPool2d", { return e.avg_pool(m, s.path, s.scope, x); }),
        SINTER_ONNX_ROW(nn::AdaptiveAvgPool2d, "AdaptiveAvgPool2d",
                        { return e.adaptive_avg_pool(m, s.path, s.scope, x); }),
        SINTER_ONNX_ROW(nn::Flatten, "Flatten", { return e.flatten(m, s.scope, x); }),
        SINTER_ONNX_ROW(nn::Dropout, "Dropout", { return x; }),  // eval mode: the identity
        SINTER_ONNX_ROW(
            nn::Embedding, "Embedding",
            {
              return {e.node("Gather", {e.weight(m.weight), x.name}, s.scope), m.forward(x.t)};
            }),
        SINTER_ONNX_ROW(nn::MultiheadAttention, "MultiheadAttention",
                        { return e.attention(m, s.path, x); }),
        SINTER_ONNX_ROW(nn::TransformerBlock, "TransformerBlock",
                        { return e.transformer_block(m, s.path, x); }),
        SINTER_ONNX_ROW(nn::models::BasicBlock, "BasicBlock",
                        { return e.basic_block(m, s.path, x); }),
        SINTER_ONNX_ROW(nn::models::GPT, "GPT", { return e.gpt(m, s.path, x); }),
        SINTER_ONNX_ROW(nn::models::LlamaAttention, "LlamaAttention",
                        { return e.llama_attention(m, s.path, x); }),
        SINTER_ONNX_ROW(nn::models::LlamaMLP, "LlamaMLP", { return e.llama_mlp(m, s.path, x); }),
        SINTER_ONNX_ROW(nn::models::LlamaDecoderLayer, "LlamaDecoderLayer",
                        { return e.llama_layer(m, s.path, x); }),
        SINTER_ONNX_ROW(nn::models::Llama, "Llama", { return e.llama(m, s.path, x); }),
    };
    return table;
  }
#undef SINTER_ONNX_ROW

  static std::string join(const std::string& path, const std::string& name) {
    return path.empty() ? name : path + "." + name;
  }
  static std::string where(const std::string& path) {
    return path.empty() ? std::string("the module") : "module '" + path + "'";
  }

  // Note [int8 quantization]: the input of an int8 layer through QuantizeLinear and
  // DequantizeLinear with its scale (zero point 0); Sinter's value is unchanged.
  Value qdq_input(const quant::QuantState& q, const std::string& type, const std::string& path,
                  const std::string& scope, const Value& x) {
    SINTER_CHECK(q.quantized, "onnx::export_model: ", where(path), " (", type,
                 ") is still calibrating; call quant::convert() before exporting");
    SINTER_CHECK(float_dtype_ == DType::f32, "onnx::export_model: ", where(path), " (", type,
                 ") exports as int8 QuantizeLinear/DequantizeLinear with f32 scales, so the model "
                 "must be exported in f32 (ExportOptions::dtype), not ",
                 float_dtype_);
    const std::string scale = constant(full({}, q.input_scale), "scale");
    const std::string zero =
        int8_initializer("const/zero_point_" + std::to_string(graph_->initializer_size()), {}, {0});
    const std::string quantized = node("QuantizeLinear", {x.name, scale, zero}, scope);
    return {node("DequantizeLinear", {quantized, scale, zero}, scope), x.t};
  }

  // The int8 weight of a quantized layer, under the weight's state_dict name, dequantized per
  // output channel (axis 0) with its scales; returns the dequantized value's name.
  std::string qdq_weight(const quant::QuantState& q, const Tensor& w, const std::string& scope) {
    const auto named = names_.find(w.impl());
    const std::string name = named != names_.end() ? named->second : "weight";
    const auto rows = static_cast<int64_t>(q.weight_scale.size());
    const std::string values = int8_initializer(name, w.shape(), q.weight_q);
    const std::string scales = constant(from_vector<float>(q.weight_scale, {rows}), "weight_scale");
    const std::string zeros = int8_initializer(name + "_zero_point", {rows},
                                               std::vector<int8_t>(static_cast<size_t>(rows), 0));
    return node_with("DequantizeLinear", {values, scales, zeros}, scope,
                     [](pb::NodeProto* n) { attr(n, "axis", int64_t{0}); });
  }

  // A Linear, then its epilogue activation (Linear::activation) as nodes of its own; `w` names
  // the weight's value where it is not the initializer (an int8 layer's dequantized weight).
  Value linear(nn::Linear& l, const std::string& scope, const Value& x, const std::string& w = "") {
    (void)l.forward(x.t);  // checks the input
    const Tensor pre = sinter::linear(x.t, l.weight, l.bias);
    std::vector<std::string> inputs{x.name, w.empty() ? weight(l.weight) : w};
    if (x.t.dim() == 2) {
      // (N, in) x (out, in)^T + (out): one Gemm.
      if (l.bias.defined()) inputs.push_back(weight(l.bias));
      return activation(
          {node_with("Gemm", inputs, scope, [](pb::NodeProto* n) { attr(n, "transB", 1); }), pre},
          l.activation, scope);
    }
    // (*, in) x (in, out) with the weight transposed by a node (kept under its own name).
    const std::string wt = node_with("Transpose", {inputs[1]}, scope, [](pb::NodeProto* n) {
      attr(n, "perm", std::vector<int64_t>{1, 0});
    });
    std::string y = node("MatMul", {x.name, wt}, scope);
    if (l.bias.defined()) y = node("Add", {y, weight(l.bias)}, scope);
    return activation({y, pre}, l.activation, scope);
  }

  Value conv2d(nn::Conv2d& c, const std::string& scope, const Value& x, const std::string& w = "") {
    std::vector<std::string> inputs{x.name, w.empty() ? weight(c.weight) : w};
    if (c.bias.defined()) inputs.push_back(weight(c.bias));
    const nn::Conv2dOptions& o = c.options;
    const Size2 k = c.kernel_size;
    (void)c.forward(x.t);  // checks the input
    const Tensor y = sinter::conv2d(
        x.t, c.weight, c.bias,
        {.stride = o.stride, .padding = o.padding, .dilation = o.dilation, .groups = o.groups});
    const Value conv{
        node_with("Conv", inputs, scope,
                  [&](pb::NodeProto* n) {
                    attr(n, "kernel_shape", std::vector<int64_t>{k.h, k.w});
                    attr(n, "strides", std::vector<int64_t>{o.stride.h, o.stride.w});
                    attr(n, "pads",
                         std::vector<int64_t>{o.padding.h, o.padding.w, o.padding.h, o.padding.w});
                    attr(n, "dilations", std::vector<int64_t>{o.dilation.h, o.dilation.w});
                    attr(n, "group", o.groups);
                  }),
        y};
    return activation(conv, c.activation, scope);  // Conv2d::activation
  }

  Value batch_norm(nn::BatchNorm2d& b, const std::string& path, const std::string& scope,
                   const Value& x) {
    SINTER_CHECK(b.running_mean.defined(), "onnx::export_model: ", where(path), " (", b.name(),
                 ") keeps no running statistics, so it normalizes every batch with "
                 "its own; ONNX export maps the eval mode's running statistics only");
    const Tensor y = b.forward(x.t);
    const int64_t c = b.num_features;
    const std::string scale =
        b.affine ? weight(b.weight) : constant(ones({c}, {.dtype = DType::f64}), "ones");
    const std::string shift =
        b.affine ? weight(b.bias) : constant(zeros({c}, {.dtype = DType::f64}), "zeros");
    return {node_with("BatchNormalization",
                      {x.name, scale, shift, weight(b.running_mean), weight(b.running_var)}, scope,
                      [&](pb::NodeProto* n) {
                        attr_float(n, "epsilon", b.eps);
                        attr_float(n, "momentum", 1.0 - b.momentum);
                      }),
            y};
  }

  Value layer_norm(nn::LayerNorm& l, const std::string& scope, const Value& x) {
    const Tensor y = l.forward(x.t);
    std::vector<std::string> inputs{x.name};
    if (l.elementwise_affine) {
      inputs.push_back(weight(l.weight));
      inputs.push_back(weight(l.bias));
    } else {
      inputs.push_back(constant(ones(l.normalized_shape, {.dtype = DType::f64}), "ones"));
    }
    const auto axis = -static_cast<int64_t>(l.normalized_shape.size());
    return {node_with("LayerNormalization", inputs, scope,
                      [&](pb::NodeProto* n) {
                        attr(n, "axis", axis);
                        attr_float(n, "epsilon", l.eps);
                      }),
            y};
  }

  // rms_norm in opset-17 operators (RMSNormalization came in opset 23):
  //   x / Sqrt(ReduceMean(x x, over the normalized axes) + eps) weight
  // with rms_norm's eps when the module has none (the epsilon of the dtype the sums run in).
  Value rms_norm(nn::RMSNorm& l, const std::string& scope, const Value& x) {
    const Tensor y = l.forward(x.t);
    const auto k = static_cast<int64_t>(l.normalized_shape.size());
    std::vector<int64_t> axes;
    for (int64_t d = -k; d < 0; ++d) axes.push_back(d);
    const double eps = l.eps ? *l.eps
                             : (x.t.dtype() == DType::f64 ? std::numeric_limits<double>::epsilon()
                                                          : std::numeric_limits<float>::epsilon());
    const std::string square = node("Mul", {x.name, x.name}, scope);
    const std::string mean_square = node_with("ReduceMean", {square}, scope, [&](pb::NodeProto* n) {
      attr(n, "axes", axes);
      attr(n, "keepdims", int64_t{1});
    });
    const std::string root = node("Sqrt", {node("Add", {mean_square, scalar(eps)}, scope)}, scope);
    std::string out = node("Div", {x.name, root}, scope);
    if (l.elementwise_affine) out = node("Mul", {out, weight(l.weight)}, scope);
    return {out, y};
  }

  // gelu(x) with Sinter's formulas (opset 17 has no Gelu operator):
  //   erf:  0.5 x (1 + erf(x / sqrt 2))
  //   tanh: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  std::string gelu(const std::string& x, Activation form, const std::string& scope) {
    std::string inner;
    if (form == Activation::GeluTanh) {
      const std::string cube = node(
          "Mul", {node("Mul", {node("Mul", {x, scalar(kGeluCubic)}, scope), x}, scope), x}, scope);
      inner =
          node("Tanh", {node("Mul", {node("Add", {x, cube}, scope), scalar(kSqrt2OverPi)}, scope)},
               scope);
    } else {
      inner = node("Erf", {node("Mul", {x, scalar(kSqrt1_2)}, scope)}, scope);
    }
    const std::string half_x = node("Mul", {x, scalar(0.5)}, scope);
    return node("Mul", {half_x, node("Add", {inner, scalar(1.0)}, scope)}, scope);
  }

  // act(x), for a block's Activation: the ONNX node's output and Sinter's value.
  Value activation(const Value& x, Activation act, const std::string& scope) {
    switch (act) {
      case Activation::None:
        return x;
      case Activation::Relu:
        return {node("Relu", {x.name}, scope), relu(x.t)};
      case Activation::Gelu:
      case Activation::GeluTanh:
        return {gelu(x.name, act, scope), sinter::gelu(x.t, act)};
    }
    SINTER_THROW("onnx::export_model: unknown activation ", static_cast<int>(act));
  }

  static void check_batched_image(const std::string& path, const char* what, const Tensor& x) {
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
  static PoolDim pool_dim(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
    const int64_t span = in + 2 * p - d * (k - 1) - 1;
    const int64_t size = (ceil ? (span + s - 1) / s : span / s) + 1;
    return {size, (size - 1) * s + d * (k - 1) + 1 > in + 2 * p};
  }
  // Checks that ONNX's pool (opset 17 sizes) gives Sinter's output shape `y` and, for averages,
  // that no window runs past the padded input (where the two count the divisor differently).
  static void check_pool(const std::string& path, const char* what, const Tensor& x,
                         const Tensor& y, Size2 k, Size2 s, Size2 p, Size2 d, bool ceil,
                         bool average) {
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
  Value pool(const char* op, const char* what, nn::Module& m, Size2 k, Size2 stride, Size2 pad,
             Size2 dilation, bool ceil_mode, const std::string& path, const std::string& scope,
             const Value& x, Extra&& extra) {
    check_batched_image(path, what, x.t);
    const Tensor y = m.forward(x.t);
    const Size2 s = (stride.h == 0 && stride.w == 0) ? k : stride;
    check_pool(path, what, x.t, y, k, s, pad, dilation, ceil_mode,
               std::string(op) == "AveragePool");
    return {node_with(op, {x.name}, scope,
                      [&](pb::NodeProto* n) {
                        attr(n, "kernel_shape", std::vector<int64_t>{k.h, k.w});
                        attr(n, "strides", std::vector<int64_t>{s.h, s.w});
                        attr(n, "pads", std::vector<int64_t>{pad.h, pad.w, pad.h, pad.w});
                        attr(n, "ceil_mode", int64_t{ceil_mode});
                        extra(n);
                      }),
            y};
  }

  Value max_pool(nn::MaxPool2d& m, const std::string& path, const std::string& scope,
                 const Value& x) {
    const MaxPool2dOptions& o = m.options;
    return pool("MaxPool", "MaxPool2d", m, m.kernel_size, o.stride, o.padding, o.dilation,
                o.ceil_mode, path, scope, x, [&](pb::NodeProto* n) {
                  attr(n, "dilations", std::vector<int64_t>{o.dilation.h, o.dilation.w});
                });
  }

  Value avg_pool(nn::AvgPool2d& m, const std::string& path, const std::string& scope,
                 const Value& x) {
    const AvgPool2dOptions& o = m.options;
    return pool("AveragePool", "AvgPool2d", m, m.kernel_size, o.stride, o.padding, 1, o.ceil_mode,
                path, scope, x, [&](pb::NodeProto* n) {
                  attr(n, "count_include_pad", int64_t{o.count_include_pad});
                });
  }

  Value adaptive_avg_pool(nn::AdaptiveAvgPool2d& m, const std::string& path,
                          const std::string& scope, const Value& x) {
    check_batched_image(path, "AdaptiveAvgPool2d", x.t);
    const Tensor y = m.forward(x.t);
    const int64_t h = x.t.size(2), w = x.t.size(3);
    const Size2 out = m.output_size;
    if (out.h == 1 && out.w == 1) return {node("GlobalAveragePool", {x.name}, scope), y};
    SINTER_CHECK(h % out.h == 0 && w % out.w == 0, "onnx::export_model: ", where(path),
                 " (AdaptiveAvgPool2d): an output of ", out.h, "x", out.w, " from ", h, "x", w,
                 " has windows of unequal sizes, which no ONNX pooling operator computes; "
                 "export with an input whose size the output size divides");
    const Size2 k(h / out.h, w / out.w);
    return {node_with("AveragePool", {x.name}, scope,
                      [&](pb::NodeProto* n) {
                        attr(n, "kernel_shape", std::vector<int64_t>{k.h, k.w});
                        attr(n, "strides", std::vector<int64_t>{k.h, k.w});
                      }),
            y};
  }

  Value flatten(nn::Flatten& f, const std::string& scope, const Value& x) {
    const Tensor y = f.forward(x.t);
    const int64_t rank = x.t.dim();
    const int64_t start = f.start_dim < 0 ? f.start_dim + rank : f.start_dim;
    const int64_t end = f.end_dim < 0 ? f.end_dim + rank : f.end_dim;
    if (start == 1 && end == rank - 1) {
      return {node_with("Flatten", {x.name}, scope, [](pb::NodeProto* n) { attr(n, "axis", 1); }),
              y};
    }
    // Dims before the merged ones are copied (0: the batch stays symbolic), the merged ones are
    // -1, and those after keep their sizes.
    std::vector<int64_t> shape(static_cast<size_t>(start), 0);
    shape.push_back(-1);
    for (int64_t i = end + 1; i < rank; ++i) shape.push_back(x.t.size(i));
    return {node("Reshape", {x.name, ints(shape)}, scope), y};
  }

  // 0, 1, ..., T - 1 (i64), with T = dim 1 of `x` read at run time (so dynamic_sequence works).
  std::string positions(const std::string& x, const std::string& scope) {
    const std::string t = node_with("Gather", {node("Shape", {x}, scope), ints({1}, true)}, scope,
                                    [](pb::NodeProto* n) { attr(n, "axis", 0); });
    return node("Range", {ints({0}, true), t, ints({1}, true)}, scope);
  }

  // softmax(q k^T / sqrt(d) + the causal mask) v for q, k and v (B, H, T, d), the heads then side
  // by side: (B, T, e). The mask keeps key j <= query i, with T read from `seq` (B, T, ...) at run
  // time.
  std::string attention_core(const std::string& q, const std::string& k, const std::string& v,
                             int64_t d, int64_t e, bool causal, const std::string& seq,
                             const std::string& scope) {
    const std::string kt = node_with("Transpose", {k}, scope, [](pb::NodeProto* n) {
      attr(n, "perm", std::vector<int64_t>{0, 1, 3, 2});
    });
    std::string scores = node(
        "Mul", {node("MatMul", {q, kt}, scope), scalar(1.0 / std::sqrt(static_cast<double>(d)))},
        scope);
    if (causal) {
      // keep (T, T): query i sees keys j <= i.
      const std::string r = positions(seq, scope);
      const std::string rows = node("Unsqueeze", {r, ints({1})}, scope);
      const std::string cols = node("Unsqueeze", {r, ints({0})}, scope);
      const std::string keep = node("GreaterOrEqual", {rows, cols}, scope);
      scores =
          node("Where", {keep, scores, scalar(-std::numeric_limits<double>::infinity())}, scope);
    }
    const std::string weights =
        node_with("Softmax", {scores}, scope, [](pb::NodeProto* n) { attr(n, "axis", -1); });
    // (B, H, T, d) -> (B, T, H, d) -> (B, T, e), heads side by side.
    return node("Reshape",
                {node_with("Transpose", {node("MatMul", {weights, v}, scope)}, scope,
                           [](pb::NodeProto* n) {
                             attr(n, "perm", std::vector<int64_t>{0, 2, 1, 3});
                           }),
                 ints({0, 0, e})},
                scope);
  }

  // Self-attention over (B, T, E), as MultiheadAttention::forward computes it.
  Value attention(nn::MultiheadAttention& a, const std::string& path, const Value& x) {
    const std::string scope = path.empty() ? a.name() : path;
    SINTER_CHECK(x.t.dim() == 3, "onnx::export_model: ", where(path),
                 " (MultiheadAttention) expects (B, T, E), got ", shape_str(x.t.shape()));
    const Tensor y = a.forward(x.t);
    const int64_t e = a.embed_dim, h = a.num_heads, d = e / h;
    const Value qkv = emit(*a.qkv, join(path, "qkv"), x);
    // (B, T, 3E) -> (B, T, 3, H, d) -> (3, B, H, T, d); q, k, v: (B, H, T, d).
    const std::string heads =
        node_with("Transpose", {node("Reshape", {qkv.name, ints({0, 0, 3, h, d})}, scope)}, scope,
                  [](pb::NodeProto* n) {
                    attr(n, "perm", std::vector<int64_t>{2, 0, 3, 1, 4});
                  });
    const auto part = [&](int64_t i) {
      return node_with("Gather", {heads, ints({i}, true)}, scope,
                       [](pb::NodeProto* n) { attr(n, "axis", 0); });
    };
    const std::string q = part(0), k = part(1), v = part(2);
    const std::string merged = attention_core(q, k, v, d, e, a.options.causal, x.name, scope);
    // The projection's input: only its shape matters to emit().
    const Value out =
        emit(*a.out_proj, join(path, "out_proj"),
             {merged, zeros(x.t.shape(), {.dtype = x.t.dtype(), .device = x.t.device()})});
    return {out.name, y};
  }

  Value transformer_block(nn::TransformerBlock& b, const std::string& path, const Value& x) {
    const std::string scope = path.empty() ? b.name() : path;
    const Value a = emit(*b.attn, join(path, "attn"), emit(*b.ln1, join(path, "ln1"), x));
    const Value h{node("Add", {x.name, a.name}, scope), x.t + a.t};
    const Value fc = emit(*b.fc, join(path, "fc"), emit(*b.ln2, join(path, "ln2"), h));
    const Value act = activation(fc, b.options.activation, scope);
    const Value mlp = emit(*b.proj, join(path, "proj"), act);
    return {node("Add", {h.name, mlp.name}, scope), h.t + mlp.t};
  }

  Value basic_block(nn::models::BasicBlock& b, const std::string& path, const Value& x) {
    const std::string scope = path.empty() ? b.name() : path;
    Value c2;
    if (b.fused) {  // BatchNorm folded, conv1 with its ReLU (Note [inference fusion])
      c2 = emit(*b.conv2, join(path, "conv2"), emit(*b.conv1, join(path, "conv1"), x));
    } else {
      const Value c1 = emit(*b.bn1, join(path, "bn1"), emit(*b.conv1, join(path, "conv1"), x));
      const Value r1{node("Relu", {c1.name}, scope), relu(c1.t)};
      c2 = emit(*b.bn2, join(path, "bn2"), emit(*b.conv2, join(path, "conv2"), r1));
    }
    const Value sc = b.shortcut ? emit(*b.shortcut, join(path, "shortcut"), x) : x;
    return {node("Relu", {node("Add", {c2.name, sc.name}, scope)}, scope), relu(c2.t + sc.t)};
  }

  Value gpt(nn::models::GPT& g, const std::string& path, const Value& idx) {
    const std::string scope = path.empty() ? g.name() : path;
    const Tensor logits = g.forward(idx.t);  // checks the ids and the length
    // x = wte(idx) + wpe(0..T-1), with T read from the ids at run time.
    const std::string pos = positions(idx.name, scope);
    const Value tok = emit(*g.wte, join(path, "wte"), idx);
    const Tensor pos_t =
        arange(static_cast<double>(idx.t.size(1)), {.dtype = DType::i64, .device = idx.t.device()});
    const Value p = emit(*g.wpe, join(path, "wpe"), {pos, pos_t});
    Value x{node("Add", {tok.name, p.name}, scope), tok.t + p.t};
    for (const auto& [name, block] : g.blocks->named_children()) {
      x = emit(*block, join(join(path, "blocks"), name), x);
    }
    x = emit(*g.ln_f, join(path, "ln_f"), x);
    if (g.lm_head) return {emit(*g.lm_head, join(path, "lm_head"), x).name, logits};
    return {tied_head(x.name, g.wte->weight, scope), logits};
  }

  // A tied output head: x embedding^T.
  std::string tied_head(const std::string& x, const Tensor& embedding, const std::string& scope) {
    const std::string wt = node_with("Transpose", {weight(embedding)}, scope, [](pb::NodeProto* n) {
      attr(n, "perm", std::vector<int64_t>{1, 0});
    });
    return node("MatMul", {x, wt}, scope);
  }

  // rope(x) of x (B, H, T, d), the halves of each head turned by the angles of positions 0..T-1
  // (T read from `seq` at run time): cos and sin gathered by position from constant tables of
  // positions 0..rows-1, formed in double as kern::rope_angle forms them, so that the exported
  // turn is Sinter's.
  std::string rope(const std::string& x, int64_t d, double base, int64_t rows,
                   const std::string& seq, const std::string& scope) {
    const auto key = std::make_tuple(d, base, rows);
    auto tables = rope_tables_.find(key);
    if (tables == rope_tables_.end()) {
      const int64_t half = d / 2;
      std::vector<double> c(static_cast<size_t>(rows * half)), s(c.size());
      for (int64_t p = 0; p < rows; ++p) {
        for (int64_t i = 0; i < half; ++i) {
          const double angle =
              static_cast<double>(p) *
              std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
          c[static_cast<size_t>(p * half + i)] = std::cos(angle);
          s[static_cast<size_t>(p * half + i)] = std::sin(angle);
        }
      }
      tables = rope_tables_
                   .emplace(key, std::make_pair(
                                     constant(from_vector<double>(c, {rows, half}), "rope_cos"),
                                     constant(from_vector<double>(s, {rows, half}), "rope_sin")))
                   .first;
    }
    const std::string pos = positions(seq, scope);
    const auto rows_at = [&](const std::string& table) {
      return node_with("Gather", {table, pos}, scope, [](pb::NodeProto* n) { attr(n, "axis", 0); });
    };
    const std::string cos = rows_at(tables->second.first), sin = rows_at(tables->second.second);
    const std::string a = node("Slice", {x, ints({0}), ints({d / 2}), ints({3})}, scope);
    const std::string b = node("Slice", {x, ints({d / 2}), ints({d}), ints({3})}, scope);
    const std::string first =
        node("Sub", {node("Mul", {a, cos}, scope), node("Mul", {b, sin}, scope)}, scope);
    const std::string second =
        node("Add", {node("Mul", {a, sin}, scope), node("Mul", {b, cos}, scope)}, scope);
    return node_with("Concat", {first, second}, scope,
                     [](pb::NodeProto* n) { attr(n, "axis", 3); });
  }

  // A Llama layer's attention over (B, T, E), as LlamaAttention::forward computes it: the K/V
  // heads repeated to the query heads (each group of query heads reads its own K/V head).
  Value llama_attention(nn::models::LlamaAttention& a, const std::string& path, const Value& x) {
    const std::string scope = path.empty() ? a.name() : path;
    SINTER_CHECK(x.t.dim() == 3, "onnx::export_model: ", where(path),
                 " (LlamaAttention) expects (B, T, E), got ", shape_str(x.t.shape()));
    const Tensor y = a.forward(x.t);
    const int64_t h = a.n_head, hk = a.n_kv_head, d = a.head_dim;
    // (B, T, n d) -> (B, n, T, d).
    const auto heads = [&](nn::Linear& proj, const char* name, int64_t n) {
      const Value p = emit(proj, join(path, name), x);
      return node_with("Transpose", {node("Reshape", {p.name, ints({0, 0, n, d})}, scope)}, scope,
                       [](pb::NodeProto* node) {
                         attr(node, "perm", std::vector<int64_t>{0, 2, 1, 3});
                       });
    };
    // (B, hk, T, d) -> (B, hk, h / hk, T, d) -> (B, h, T, d).
    const auto repeat = [&](const std::string& kv) {
      if (h == hk) return kv;
      const std::string wide = node(
          "Expand", {node("Unsqueeze", {kv, ints({2})}, scope), ints({1, 1, h / hk, 1, 1})}, scope);
      return node("Reshape", {wide, ints({0, h, -1, d})}, scope);
    };
    const int64_t rows = rope_rows_ > 0 ? rope_rows_ : x.t.size(1);
    const std::string q = rope(heads(*a.q_proj, "q_proj", h), d, a.rope_base, rows, x.name, scope);
    const std::string k =
        repeat(rope(heads(*a.k_proj, "k_proj", hk), d, a.rope_base, rows, x.name, scope));
    const std::string v = repeat(heads(*a.v_proj, "v_proj", hk));
    const std::string merged = attention_core(q, k, v, d, a.n_embd, true, x.name, scope);
    const Value out =
        emit(*a.o_proj, join(path, "o_proj"),
             {merged, zeros(x.t.shape(), {.dtype = x.t.dtype(), .device = x.t.device()})});
    return {out.name, y};
  }

  // down_proj(silu(gate_proj(x)) up_proj(x)), silu as x Sigmoid(x).
  Value llama_mlp(nn::models::LlamaMLP& m, const std::string& path, const Value& x) {
    const std::string scope = path.empty() ? m.name() : path;
    const Value gate = emit(*m.gate_proj, join(path, "gate_proj"), x);
    const Value up = emit(*m.up_proj, join(path, "up_proj"), x);
    const std::string silu = node("Mul", {gate.name, node("Sigmoid", {gate.name}, scope)}, scope);
    const Value out = emit(*m.down_proj, join(path, "down_proj"),
                           {node("Mul", {silu, up.name}, scope), swiglu(gate.t, up.t)});
    return {out.name, m.forward(x.t)};
  }

  Value llama_layer(nn::models::LlamaDecoderLayer& l, const std::string& path, const Value& x) {
    const std::string scope = path.empty() ? l.name() : path;
    const Value a = emit(*l.self_attn, join(path, "self_attn"),
                         emit(*l.input_layernorm, join(path, "input_layernorm"), x));
    const Value h{node("Add", {x.name, a.name}, scope), x.t + a.t};
    const Value m =
        emit(*l.mlp, join(path, "mlp"),
             emit(*l.post_attention_layernorm, join(path, "post_attention_layernorm"), h));
    return {node("Add", {h.name, m.name}, scope), h.t + m.t};
  }

  Value llama(nn::models::Llama& m, const std::string& path, const Value& idx) {
    const std::string scope = path.empty() ? m.name() : path;
    const Tensor logits = m.forward(idx.t);  // checks the ids and the length
    const std::string model = join(path, "model");
    // The rope tables cover the whole context, so any length up to it runs.
    rope_rows_ = m.config.context_length;
    Value x = emit(*m.model->embed_tokens, join(model, "embed_tokens"), idx);
    for (const auto& [name, layer] : m.model->layers->named_children()) {
      x = emit(*layer, join(join(model, "layers"), name), x);
    }
    x = emit(*m.model->norm, join(model, "norm"), x);
    rope_rows_ = 0;
    if (m.lm_head) return {emit(*m.lm_head, join(path, "lm_head"), x).name, logits};
    return {tied_head(x.name, m.model->embed_tokens->weight, scope), logits};
  }

  const ExportOptions& o_;
  DType float_dtype_;
  pb::ModelProto model_;
  pb::GraphProto* graph_ = nullptr;
  std::unordered_map<const void*, std::string> names_;    // parameter or buffer -> state_dict name
  std::unordered_map<const void*, std::string> weights_;  // -> its initializer
  std::map<double, std::string> scalars_;
  std::map<std::pair<std::vector<int64_t>, bool>, std::string> ints_;
  // (head size, base, rows) -> the cos and sin tables of rope().
  std::map<std::tuple<int64_t, double, int64_t>, std::pair<std::string, std::string>> rope_tables_;
  int64_t rope_rows_ = 0;  // the rows of the rope tables: a Llama's context (0: the input's length)
};

// Restores the training mode of every module in a tree at the end of a scope (a frozen BatchNorm
// inside a training model stays frozen).
class ModeGuard : NonCopyable {
 public:
  explicit ModeGuard(nn::Module& root) { save(root); }
  // Pre-order: each module's (recursive) train() comes after its ancestors' and before its
  // descendants', so each ends with its own mode.
  ~ModeGuard() {
    for (const auto& [m, training] : modes_) m->train(training);
  }

 private:
  void save(nn::Module& m) {
    modes_.emplace_back(&m, m.is_training());
    for (const auto& [name, child] : m.named_children()) save(*child);
  }
  std::vector<std::pair<nn::Module*, bool>> modes_;
};

// Opset 17's convolution and pooling operators take no bfloat16.
void check_bf16_operators(const pb::GraphProto& graph) {
  for (const pb::NodeProto& n : graph.node()) {
    const std::string& op = n.op_type();
    SINTER_CHECK(
        op != "Conv" && op != "MaxPool" && op != "AveragePool" && op != "GlobalAveragePool",
        "onnx::export_model: a bf16 export needs ", op, " (", n.name(),
        "), which takes no bfloat16 in opset 17; export in f32 or f16");
  }
}

// The graph's input and output names must name nothing else: an initializer under the input's
// name would be replaced by the input.
void check_io_names(const pb::GraphProto& graph, const ExportOptions& o) {
  for (const pb::TensorProto& t : graph.initializer()) {
    SINTER_CHECK(t.name() != o.input_name && t.name() != o.output_name,
                 "onnx::export_model: the name '", t.name(),
                 "' is a weight's; choose another input_name or output_name");
  }
  for (const pb::NodeProto& n : graph.node()) {
    for (const std::string& out : n.output()) {
      SINTER_CHECK(out != o.input_name, "onnx::export_model: the input name '", o.input_name,
                   "' is also a value of the graph; choose another input_name");
    }
  }
}

// The inferred shape of the graph's output must be Sinter's: fixed dims equal, dynamic dims not
// fixed to a number (which would mean a size baked into the graph).
void check_inferred_output(const pb::ModelProto& inferred, const Tensor& y,
                           const Exporter& exporter) {
  const pb::ValueInfoProto& out = inferred.graph().output(0);
  SINTER_CHECK(out.type().has_tensor_type() && out.type().tensor_type().has_shape(),
               "onnx::export_model: shape inference found no shape for the output");
  const pb::TensorShapeProto& shape = out.type().tensor_type().shape();
  SINTER_CHECK(shape.dim_size() == y.dim(), "onnx::export_model: the ONNX graph's output has ",
               shape.dim_size(), " dims where Sinter's has ", y.dim());
  for (int64_t i = 0; i < y.dim(); ++i) {
    const pb::TensorShapeProto_Dimension& d = shape.dim(static_cast<int>(i));
    if (exporter.dynamic_dim(i) != nullptr) {
      SINTER_CHECK(!d.has_dim_value(), "onnx::export_model: the output's dim ", i,
                   " should follow "
                   "the input's '",
                   exporter.dynamic_dim(i), "' dim but is fixed to ", d.dim_value(),
                   " in the graph");
    } else {
      SINTER_CHECK(!d.has_dim_value() || d.dim_value() == y.size(i),
                   "onnx::export_model: the ONNX graph's output dim ", i, " is ", d.dim_value(),
                   " where Sinter's is ", y.size(i));
    }
  }
}

}  // namespace

bool is_available() { return true; }

std::string export_to_string(nn::Module& module, const Tensor& example_input,
                             const ExportOptions& o, ExportSummary* summary) {
  SINTER_CHECK(o.opset == 17, "onnx::export_model: opset ", o.opset,
               " is not written; opset 17 is");
  SINTER_CHECK(example_input.defined(), "onnx::export_model: undefined example input");
  SINTER_CHECK(!o.input_name.empty() && !o.output_name.empty() && o.input_name != o.output_name,
               "onnx::export_model: the input and output names must be distinct and non-empty, "
               "got '",
               o.input_name, "' and '", o.output_name, "'");
  SINTER_CHECK(!o.dtype || is_floating(*o.dtype),
               "onnx::export_model: dtype must be floating, got ", *o.dtype);
  SINTER_CHECK(!o.dynamic_sequence || example_input.dim() >= 2,
               "onnx::export_model: dynamic_sequence needs an input of rank 2 or more, got shape ",
               shape_str(example_input.shape()));
  SINTER_CHECK(!o.dynamic_batch || example_input.dim() >= 1,
               "onnx::export_model: dynamic_batch needs an input of rank 1 or more, got a scalar");

  // The module's device and floating dtype: its first floating parameter's (or buffer's).
  std::optional<Tensor> first;
  for (const std::vector<Tensor>& tensors : {module.parameters(), module.buffers()}) {
    const auto it = std::find_if(tensors.begin(), tensors.end(),
                                 [](const Tensor& t) { return is_floating(t.dtype()); });
    if (it != tensors.end()) {
      first = *it;
      break;
    }
  }
  const DType module_dtype =
      first ? first->dtype()
            : (is_floating(example_input.dtype()) ? example_input.dtype() : DType::f32);
  const Device device = first ? first->device() : example_input.device();
  const DType float_dtype = o.dtype.value_or(module_dtype);

  NoGradGuard no_grad;
  ModeGuard mode(module);
  module.eval();
  Tensor x = example_input.detach().to(device);
  if (is_floating(x.dtype())) x = x.to(module_dtype);

  Exporter ex(module, o, float_dtype);
  pb::ModelProto& model = ex.model();
  model.set_ir_version(pb::IR_VERSION);
  model.set_producer_name("sinter");
  model.set_producer_version(SINTER_VERSION);
  model.set_model_version(1);
  pb::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(o.opset);
  pb::GraphProto& graph = ex.graph();
  graph.set_name(o.graph_name.empty() ? module.name() : o.graph_name);
  ex.set_type(graph.add_input(), o.input_name, x);

  Value y = ex.emit(module, "", {o.input_name, x});
  SINTER_CHECK(y.t.defined(), "onnx::export_model: the module returned an undefined tensor");
  for (int64_t i = 0; i < std::min<int64_t>(2, y.t.dim()); ++i) {
    if (ex.dynamic_dim(i) == nullptr) continue;
    SINTER_CHECK(i < x.dim() && y.t.size(i) == x.size(i), "onnx::export_model: the output's dim ",
                 i, " (", y.t.size(i), ") is not the input's '", ex.dynamic_dim(i), "' dim (",
                 i < x.dim() ? x.size(i) : -1, "); export with dynamic_",
                 i == 0 ? "batch" : "sequence", " = false");
  }
  // Name the output: rename the node that makes it, or copy it where the value is also read by
  // another node, or is the input itself (an identity model).
  bool read_elsewhere = y.name == o.input_name;
  pb::NodeProto* producer = nullptr;
  for (pb::NodeProto& n : *graph.mutable_node()) {
    for (const std::string& in : n.input()) read_elsewhere = read_elsewhere || in == y.name;
    for (const std::string& out : n.output()) {
      if (out == y.name) producer = &n;
    }
  }
  if (producer != nullptr && !read_elsewhere) {
    for (std::string& out : *producer->mutable_output()) {
      if (out == y.name) out = o.output_name;
    }
  } else {
    pb::NodeProto* copy = graph.add_node();
    copy->set_op_type("Identity");
    copy->set_name("output/Identity");
    copy->add_input(y.name);
    copy->add_output(o.output_name);
  }
  ex.set_type(graph.add_output(), o.output_name, y.t);
  check_io_names(graph, o);
  if (float_dtype == DType::bf16) check_bf16_operators(graph);
  (*model.add_metadata_props()).set_key("sinter_module");
  model.mutable_metadata_props(0)->set_value(module.name());

  SINTER_CHECK(model.ByteSizeLong() < (size_t{1} << 31), "onnx::export_model: the model takes ",
               model.ByteSizeLong(),
               " bytes, over protobuf's 2 GiB; ONNX's external data files "
               "are not written");
  try {
    pb::checker::check_model(model);
  } catch (const std::exception& e) {
    SINTER_THROW("onnx::export_model: the ONNX checker rejected the graph of ", module.name(), ": ",
                 e.what());
  }
  pb::ModelProto inferred = model;
  try {
    pb::ShapeInferenceOptions strict{true, 1, true};
    pb::shape_inference::InferShapes(inferred, pb::OpSchemaRegistry::Instance(), strict);
  } catch (const std::exception& e) {
    SINTER_THROW("onnx::export_model: ONNX shape inference failed on the graph of ", module.name(),
                 ": ", e.what());
  }
  check_inferred_output(inferred, y.t, ex);

  std::string bytes;
  SINTER_CHECK(model.SerializeToString(&bytes), "onnx::export_model: cannot serialize the model");
  if (summary != nullptr) {
    *summary = {.nodes = graph.node_size(),
                .initializers = graph.initializer_size(),
                .bytes = static_cast<int64_t>(bytes.size())};
  }
  return bytes;
}

ExportSummary export_model(nn::Module& module, const Tensor& example_input, const std::string& path,
                           const ExportOptions& options) {
  SINTER_CHECK(!path.empty(), "onnx::export_model: empty path");
  ExportSummary summary;
  const std::string bytes = export_to_string(module, example_input, options, &summary);
  detail::write_file_atomically(path, {{bytes.data(), bytes.size()}}, "onnx::export_model");
  return summary;
}

}  // namespace sinter::onnx

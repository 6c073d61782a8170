// A fused Sequential described as a cpu::plan::Program, and its plans by input shape (Note [cpu
// inference plan] in src/cpu/infer_plan_dnnl.cpp).
#include "internal/infer_plan.h"

#include <cstring>
#include <typeinfo>
#include <utility>

#include "cpu/infer_plan.h"
#include "internal/profile_op.h"
#include "sinter/autograd.h"
#include "sinter/core/parallel.h"
#include "sinter/nn/activations.h"
#include "sinter/nn/models.h"
#include "sinter/quantize.h"

namespace sinter::nn::detail {

namespace {

using cpu::plan::Layer;
using cpu::plan::Op;
using cpu::plan::Shape3;

// m as an M where it is exactly one (a subclass, an int8 layer say, may compute something else).
template <class M>
const M* as(const Module& m) {
  return typeid(m) == typeid(M) ? static_cast<const M*>(&m) : nullptr;
}

bool plain_f32(const Tensor& t) {
  return t.defined() && t.dtype() == DType::f32 && t.device().is_cpu() && t.is_contiguous();
}

// A weight or bias a plan can copy: not an inference tensor, whose in-place changes leave its
// version as it was, so that a plan would not see them.
bool plain_weight(const Tensor& t) { return plain_f32(t) && !t.is_inference(); }

// The program of a Sequential's modules applied to one value after another; any module it does not
// describe makes the whole description fail.
class Describer {
 public:
  explicit Describer(const Tensor& x) {
    if (x.dim() == 4) {
      program_.c = x.size(1);
      program_.h = x.size(2);
      program_.w = x.size(3);
    } else {
      program_.c = x.size(1);
      program_.h = program_.w = 1;
      flat_ = true;
    }
    shapes_.push_back({program_.c, program_.h, program_.w});
  }

  // Appends m applied to the current value; false where m is not one the plans run.
  bool module(const Module& m);

  const cpu::plan::Program& program() const { return program_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const std::vector<int64_t>& extra() const { return extra_; }
  bool flat() const { return flat_; }

 private:
  int add(const Layer& l, Shape3 out) {
    program_.layers.push_back(l);
    shapes_.push_back(out);
    value_ = static_cast<int>(program_.layers.size());
    return value_;
  }
  bool conv(const Conv2d& c, int input, int residual, bool relu);
  bool max_pool(const MaxPool2d& m);
  bool linear(const Linear& l);
  bool relu();
  bool block(const models::BasicBlock& b);
  bool parameters(const Tensor& weight, const Tensor& bias, const quant::QuantState* q,
                  int64_t rows, Layer* l);
  bool int8(const quant::QuantState& q, int64_t rows, Layer* l);

  cpu::plan::Program program_;
  std::vector<Shape3> shapes_;
  std::vector<Tensor> tensors_;  // the weights and biases the program points into
  std::vector<int64_t> extra_;   // the int8 layers' scales and weights, folded
  int value_ = 0;
  bool flat_ = false;  // the current value is flattened (a Linear may read it)
};

bool Describer::conv(const Conv2d& c, int input, int residual, bool relu) {
  const Conv2dOptions& o = c.options;
  const auto* qc = as<quant::QuantizedConv2d>(c);
  if ((as<Conv2d>(c) == nullptr && qc == nullptr) || (qc != nullptr && !qc->q.quantized)) {
    return false;
  }
  if (flat_ || o.padding_mode != PaddingMode::Zeros || o.same_padding ||
      (qc == nullptr && !plain_weight(c.weight)) || (c.bias.defined() && !plain_weight(c.bias))) {
    return false;
  }
  if (c.activation == Activation::Relu) {
    relu = true;
  } else if (c.activation != Activation::None) {
    return false;
  }
  const Shape3 in = shapes_[input];
  kern::Conv2dGeom g;
  g.c_in = in.c;
  g.h = in.h;
  g.w = in.w;
  g.c_out = c.weight.size(0);
  g.kh = c.weight.size(2);
  g.kw = c.weight.size(3);
  g.stride_h = o.stride.h;
  g.stride_w = o.stride.w;
  g.pad_h = o.padding.h;
  g.pad_w = o.padding.w;
  g.dil_h = o.dilation.h;
  g.dil_w = o.dilation.w;
  g.groups = o.groups;
  if (g.groups < 1 || g.c_in % g.groups != 0 || c.weight.size(1) * g.groups != g.c_in) return false;
  // A kernel larger than the padded input: the op's own error, module by module.
  const int64_t span_h = g.h + 2 * g.pad_h - g.dil_h * (g.kh - 1) - 1;
  const int64_t span_w = g.w + 2 * g.pad_w - g.dil_w * (g.kw - 1) - 1;
  if (span_h < 0 || span_w < 0 || g.stride_h < 1 || g.stride_w < 1) return false;
  g.h_out = span_h / g.stride_h + 1;
  g.w_out = span_w / g.stride_w + 1;
  Layer l;
  l.op = Op::Conv;
  l.input = input;
  l.residual = residual;
  l.relu = relu;
  l.g = g;
  if (!parameters(c.weight, c.bias, qc != nullptr ? &qc->q : nullptr, g.c_out, &l)) return false;
  add(l, {g.c_out, g.h_out, g.w_out});
  return true;
}

// A Conv2d's or Linear's weight (or, for an int8 layer, its quantized weight and scales) and bias
// into l, the tensors into tensors_ (their versions are in the signature).
bool Describer::parameters(const Tensor& weight, const Tensor& bias, const quant::QuantState* q,
                           int64_t rows, Layer* l) {
  if (q != nullptr) {
    if (!int8(*q, rows, l)) return false;
  } else {
    l->weight = static_cast<const float*>(weight.data_ptr());
  }
  tensors_.push_back(weight);
  if (bias.defined()) {
    l->bias = static_cast<const float*>(bias.data_ptr());
    tensors_.push_back(bias);
  }
  return true;
}

// An int8 layer's quantized weight and scales into l, and its scales' bits into the signature's
// extra entries: convert() makes the quantized weight and its scales together, and a new weight_q
// comes with new scales (the f32 weight it came from is in tensors_, with its version).
bool Describer::int8(const quant::QuantState& q, int64_t rows, Layer* l) {
  if (static_cast<int64_t>(q.weight_scale.size()) != rows ||
      static_cast<int64_t>(q.weight_q.size()) != rows * q.k) {
    return false;
  }
  l->int8 = true;
  l->input_scale = q.input_scale;
  l->weight_q = q.weight_q.data();
  l->weight_scale = q.weight_scale.data();
  int32_t bits = 0;
  std::memcpy(&bits, &q.input_scale, sizeof(bits));
  extra_.push_back(bits);
  for (const float s : q.weight_scale) {
    std::memcpy(&bits, &s, sizeof(bits));
    extra_.push_back(bits);
  }
  return true;
}

bool Describer::max_pool(const MaxPool2d& m) {
  const MaxPool2dOptions& o = m.options;
  if (flat_ || o.ceil_mode || o.dilation.h != 1 || o.dilation.w != 1) return false;
  const Shape3 in = shapes_[value_];
  kern::Conv2dGeom g;
  g.c_in = g.c_out = in.c;
  g.h = in.h;
  g.w = in.w;
  g.kh = m.kernel_size.h;
  g.kw = m.kernel_size.w;
  g.stride_h = o.stride.h == 0 ? g.kh : o.stride.h;
  g.stride_w = o.stride.w == 0 ? g.kw : o.stride.w;
  g.pad_h = o.padding.h;
  g.pad_w = o.padding.w;
  if (g.kh < 1 || g.kw < 1 || g.stride_h < 1 || g.stride_w < 1 || g.pad_h < 0 || g.pad_w < 0 ||
      2 * g.pad_h > g.kh || 2 * g.pad_w > g.kw) {
    return false;  // the op's own error, module by module
  }
  if (g.h + 2 * g.pad_h < g.kh || g.w + 2 * g.pad_w < g.kw) return false;
  g.h_out = (g.h + 2 * g.pad_h - g.kh) / g.stride_h + 1;
  g.w_out = (g.w + 2 * g.pad_w - g.kw) / g.stride_w + 1;
  Layer l;
  l.op = Op::MaxPool;
  l.input = value_;
  l.g = g;
  add(l, {in.c, g.h_out, g.w_out});
  return true;
}

bool Describer::linear(const Linear& lin) {
  const Shape3 in = shapes_[value_];
  const auto* ql = as<quant::QuantizedLinear>(lin);
  if ((as<Linear>(lin) == nullptr && ql == nullptr) || (ql != nullptr && !ql->q.quantized)) {
    return false;
  }
  if (!flat_ || (ql == nullptr && !plain_weight(lin.weight)) ||
      (lin.bias.defined() && !plain_weight(lin.bias)) || lin.in_features != in.c * in.h * in.w) {
    return false;
  }
  if (lin.activation != Activation::None && lin.activation != Activation::Relu) return false;
  Layer l;
  l.op = Op::Linear;
  l.input = value_;
  l.relu = lin.activation == Activation::Relu;
  l.in = lin.in_features;
  l.out = lin.out_features;
  if (!parameters(lin.weight, lin.bias, ql != nullptr ? &ql->q : nullptr, l.out, &l)) return false;
  add(l, {l.out, 1, 1});
  return true;
}

// A ReLU module: the epilogue of the Conv2d or Linear that made the current value (relu after its
// residual sum too, as relu(conv + shortcut) is).
bool Describer::relu() {
  if (value_ == 0) return false;
  // Only where nothing has read the value yet (a block's shortcut may start with a ReLU of the
  // value its conv1 reads).
  for (const Layer& reader : program_.layers) {
    if (reader.input == value_ || reader.residual == value_) return false;
  }
  Layer& l = program_.layers[value_ - 1];
  // An int8 layer's relu (kern::int8_epilogue) keeps -0, the relu op does not: not folded.
  if ((l.op != Op::Conv && l.op != Op::Linear) || l.int8) return false;
  l.relu = true;  // relu(relu(v)) is relu(v)
  return true;
}

// A fused BasicBlock: relu(conv2(conv1(x)) + shortcut(x)), the sum and relu conv2's post-ops.
bool Describer::block(const models::BasicBlock& b) {
  if (!b.fused || !b.conv1 || !b.conv2 || b.conv2->activation != Activation::None) return false;
  const int x = value_;
  if (!conv(*b.conv1, x, -1, false)) return false;
  const int a = value_;
  int s = x;
  if (b.shortcut) {
    value_ = x;
    if (!module(*b.shortcut)) return false;
    s = value_;
  }
  return conv(*b.conv2, a, s, true);
}

bool Describer::module(const Module& m) {
  if (as<Sequential>(m) != nullptr) {
    for (const auto& [name, child] : m.named_children()) {
      if (!module(*child)) return false;
    }
    return true;
  }
  if (as<Conv2d>(m) != nullptr || as<quant::QuantizedConv2d>(m) != nullptr) {
    return conv(static_cast<const Conv2d&>(m), value_, -1, false);
  }
  if (as<Linear>(m) != nullptr || as<quant::QuantizedLinear>(m) != nullptr) {
    return linear(static_cast<const Linear&>(m));
  }
  if (const auto* p = as<MaxPool2d>(m)) return max_pool(*p);
  if (as<ReLU>(m) != nullptr) return relu();
  if (as<Identity>(m) != nullptr) return true;
  if (const auto* b = as<models::BasicBlock>(m)) return block(*b);
  if (const auto* a = as<AdaptiveAvgPool2d>(m)) {
    if (flat_ || a->output_size.h != 1 || a->output_size.w != 1) return false;
    Layer l;
    l.op = Op::GlobalAvgPool;
    l.input = value_;
    add(l, {shapes_[value_].c, 1, 1});
    return true;
  }
  if (const auto* f = as<Flatten>(m)) {
    // (N, C, H, W) -> (N, C H W) only; the values keep their bytes.
    if (f->start_dim != 1 || (f->end_dim != -1 && f->end_dim != (flat_ ? 1 : 3))) return false;
    flat_ = true;
    return true;
  }
  return false;
}

// What a plan depends on: the program's layers (their geometry and the weights' addresses) and the
// versions of the tensors it reads.
std::vector<int64_t> signature(const cpu::plan::Program& p, const std::vector<Tensor>& tensors,
                               const std::vector<int64_t>& extra) {
  std::vector<int64_t> s = {p.c, p.h, p.w};
  for (const Layer& l : p.layers) {
    const auto geometry = kern::geometry_key(l.g);
    s.insert(s.end(), geometry.begin(), geometry.end());
    s.insert(s.end(), {static_cast<int64_t>(l.op), l.input, l.residual, l.relu, l.in, l.out, l.int8,
                       reinterpret_cast<int64_t>(l.weight), reinterpret_cast<int64_t>(l.bias),
                       reinterpret_cast<int64_t>(l.weight_q)});
  }
  for (const Tensor& t : tensors) s.push_back(t.version());
  s.insert(s.end(), extra.begin(), extra.end());
  return s;
}

}  // namespace

std::optional<Tensor> InferencePlans::forward(const Sequential& seq, const Tensor& x) {
  if (!onednn_enabled() || !plain_f32(x) || (x.dim() != 4 && x.dim() != 2) || x.size(0) < 1 ||
      x.numel() == 0) {
    return std::nullopt;
  }
  Describer d(x);
  if (!d.module(seq) || d.program().layers.empty()) return std::nullopt;
  const std::vector<int64_t> sig = signature(d.program(), d.tensors(), d.extra());
  const std::vector<int64_t> key = {x.size(0), d.program().c, d.program().h, d.program().w};
  std::shared_ptr<const cpu::plan::Compiled> plan;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it == plans_.end() || it->second.first != sig) {
      if (it == plans_.end() && plans_.size() >= kMaxPlans) plans_.clear();
      plans_[key] = {sig, cpu::plan::compile(d.program(), x.size(0))};
      it = plans_.find(key);
      ++compiled_;
    }
    plan = it->second.second;
  }
  if (!plan) return std::nullopt;
  SINTER_PROFILE_OP("inference_plan", x);
  const Shape3 out = cpu::plan::output_shape(d.program());
  Tensor y = d.flat() ? empty({x.size(0), out.c * out.h * out.w})
                      : empty({x.size(0), out.c, out.h, out.w});
  cpu::plan::run(*plan, static_cast<const float*>(x.data_ptr()), static_cast<float*>(y.data_ptr()));
  return y;
}

int64_t InferencePlans::compiled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return compiled_;
}

}  // namespace sinter::nn::detail

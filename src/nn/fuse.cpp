// nn::fuse_for_inference (Note [inference fusion]): a copy of a module tree with BatchNorm folded
// into convolutions and activations moved into the layers' epilogues.
#include "sinter/nn/fuse.h"

#include <string>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "internal/fuse_impl.h"
#include "internal/infer_plan.h"
#include "sinter/autograd.h"
#include "sinter/core/generator.h"
#include "sinter/nn/activations.h"
#include "sinter/nn/fold.h"
#include "sinter/nn/models.h"
#include "sinter/nn/modules.h"
#include "sinter/nn/normalization.h"
#include "sinter/nn/pooling.h"
#include "sinter/nn/resampling.h"
#include "sinter/nn/rnn.h"

namespace sinter::nn {

namespace {

std::string join(const std::string& path, const std::string& name) {
  return path.empty() ? name : path + "." + name;
}

std::string where(const std::string& path) {
  return path.empty() ? std::string("the module") : "module '" + path + "'";
}

template <class M>
bool is(const Module& m) {
  return typeid(m) == typeid(M);
}

// `copy` given the dtype and device of `original`'s first floating tensor, its values and mode.
template <class M>
std::shared_ptr<M> with_state(std::shared_ptr<M> copy, const Module& original) {
  for (const auto& [name, t] : original.state_dict()) {
    if (!is_floating(t.dtype())) continue;
    copy->to(t.device());
    copy->to(t.dtype());
    break;
  }
  copy->load_state_dict(original.state_dict());
  copy->train(original.is_training());
  return copy;
}

std::shared_ptr<Linear> copy_linear(const Linear& l) {
  auto c = with_state(std::make_shared<Linear>(l.in_features, l.out_features, l.bias.defined()), l);
  c->activation = l.activation;
  return c;
}

Conv2dOptions conv_options(const Conv2d& conv, bool bias) {
  nn::Conv2dOptions o = conv.options;
  o.bias = bias;
  return o;
}

std::shared_ptr<Conv2d> copy_conv(const Conv2d& conv) {
  auto c =
      with_state(std::make_shared<Conv2d>(conv.in_channels, conv.out_channels, conv.kernel_size,
                                          conv_options(conv, conv.bias.defined())),
                 conv);
  c->activation = conv.activation;
  return c;
}

// Whether bn can be folded into conv: running statistics to normalize with, and one per output
// channel of the convolution.
bool foldable(const Conv2d& conv, const Module& next) {
  if (!is<BatchNorm2d>(next)) return false;
  const auto& bn = static_cast<const BatchNorm2d&>(next);
  return bn.track_running_stats && bn.num_features == conv.out_channels &&
         conv.activation == Activation::None;
}

// `folded` (a new layer with a bias) given the weight and bias of `layer` (weight (out, ...),
// bias (out) or undefined) followed by bn in eval mode: W s and (b - running_mean) s + beta per
// output channel, s = gamma / sqrt(running_var + eps), in f64, rounded once to the weight's dtype.
template <class L>
std::shared_ptr<L> fold_into(std::shared_ptr<L> folded, const L& layer, const BatchNorm2d& bn) {
  NoGradGuard no_grad;
  const DType dtype = layer.weight.dtype();
  const Device device = layer.weight.device();
  const int64_t c = layer.weight.size(0);
  const auto f64 = [](const Tensor& t) { return t.detach().to(DType::f64); };
  const TensorOptions o{.dtype = DType::f64, .device = device};
  const Tensor gamma = bn.affine ? f64(bn.weight) : ones({c}, o);
  const Tensor beta = bn.affine ? f64(bn.bias) : zeros({c}, o);
  const Tensor scale = gamma / sqrt(f64(bn.running_var) + bn.eps);
  Shape per_channel(static_cast<size_t>(layer.weight.dim()), 1);
  per_channel[0] = c;
  const Tensor w = f64(layer.weight) * scale.reshape(per_channel);
  const Tensor b0 = layer.bias.defined() ? f64(layer.bias) : zeros({c}, o);
  const Tensor b = (b0 - f64(bn.running_mean)) * scale + beta;
  folded->to(device);
  folded->to(dtype);
  folded->weight.copy_(w.to(dtype));
  folded->bias.copy_(b.to(dtype));
  return folded;
}

// conv followed by bn (eval mode) as one convolution with a bias.
std::shared_ptr<Conv2d> fold(const Conv2d& conv, const BatchNorm2d& bn) {
  return fold_into(std::make_shared<Conv2d>(conv.in_channels, conv.out_channels, conv.kernel_size,
                                            conv_options(conv, true)),
                   conv, bn);
}

// linear followed by bn (eval mode, on (N, C) outputs) as one Linear with a bias.
std::shared_ptr<Linear> fold_linear(const Linear& linear, const BatchNorm2d& bn) {
  return fold_into(std::make_shared<Linear>(linear.in_features, linear.out_features, true), linear,
                   bn);
}

// The epilogue activation of an activation module, or None where it has none.
Activation activation_of(const Module& m) {
  if (is<ReLU>(m)) return Activation::Relu;
  if (is<GELU>(m)) return static_cast<const GELU&>(m).form;
  return Activation::None;
}

std::shared_ptr<Module> fuse(const Module& m, const std::string& path, const LayerWrap& w);

// The layer as the caller of fuse_with wants it (the layer itself without a wrap).
std::shared_ptr<Linear> wrapped(std::shared_ptr<Linear> l, const std::string& path,
                                const LayerWrap& w) {
  return w.linear ? w.linear(std::move(l), path) : l;
}
std::shared_ptr<Conv2d> wrapped(std::shared_ptr<Conv2d> c, const std::string& path,
                                const LayerWrap& w) {
  return w.conv ? w.conv(std::move(c), path) : c;
}

// The children of a Sequential with the patterns of Note [inference fusion] fused.
std::shared_ptr<Sequential> fuse_sequential(const Module& seq, const std::string& path,
                                            const LayerWrap& w) {
  auto out = std::make_shared<Sequential>();
  const auto& children = seq.named_children();
  for (size_t i = 0; i < children.size(); ++i) {
    const Module& child = *children[i].second;
    const std::string child_path = join(path, children[i].first);
    const Module* next = i + 1 < children.size() ? children[i + 1].second.get() : nullptr;
    if (is<Dropout>(child)) continue;
    if (is<Conv2d>(child) || is<Linear>(child)) {
      std::shared_ptr<Conv2d> conv_layer;
      std::shared_ptr<Linear> linear_layer;
      Activation* act = nullptr;
      if (is<Conv2d>(child)) {
        const auto& conv = static_cast<const Conv2d&>(child);
        std::shared_ptr<Conv2d> c;
        if (next && foldable(conv, *next)) {
          c = fold(conv, static_cast<const BatchNorm2d&>(*next));
          ++i;
          next = i + 1 < children.size() ? children[i + 1].second.get() : nullptr;
        } else {
          c = copy_conv(conv);
        }
        act = &c->activation;
        conv_layer = c;
      } else {
        const auto& linear = static_cast<const Linear&>(child);
        if (next && is<BatchNorm1d>(*next) && linear.activation == Activation::None &&
            static_cast<const BatchNorm1d&>(*next).track_running_stats &&
            static_cast<const BatchNorm1d&>(*next).num_features == linear.out_features) {
          linear_layer = fold_linear(linear, static_cast<const BatchNorm1d&>(*next));
          ++i;
          next = i + 1 < children.size() ? children[i + 1].second.get() : nullptr;
        } else {
          linear_layer = copy_linear(linear);
        }
        act = &linear_layer->activation;
      }
      if (next && *act == Activation::None && activation_of(*next) != Activation::None) {
        *act = activation_of(*next);
        ++i;
      }
      if (conv_layer) {
        out->push_back(wrapped(conv_layer, child_path, w));
      } else {
        out->push_back(wrapped(linear_layer, child_path, w));
      }
      continue;
    }
    out->push_back(fuse(child, child_path, w));
  }
  return out;
}

std::shared_ptr<Module> fuse_basic_block(const models::BasicBlock& b, const std::string& path,
                                         const LayerWrap& w) {
  std::shared_ptr<Sequential> shortcut;
  if (b.shortcut) shortcut = fuse_sequential(*b.shortcut, join(path, "shortcut"), w);
  if (b.fused) {
    return models::BasicBlock::folded(
        b.in_planes, b.planes, b.stride, wrapped(copy_conv(*b.conv1), join(path, "conv1"), w),
        wrapped(copy_conv(*b.conv2), join(path, "conv2"), w), std::move(shortcut));
  }
  const auto fold_or_keep = [&](const Conv2d& conv, const BatchNorm2d& bn, const char* name) {
    SINTER_CHECK(bn.track_running_stats, "fuse_for_inference: ", where(join(path, name)),
                 " (BatchNorm2d) keeps no running statistics, so it cannot be folded into the "
                 "convolution before it");
    return fold(conv, bn);
  };
  auto conv1 = fold_or_keep(*b.conv1, *b.bn1, "bn1");
  conv1->activation = Activation::Relu;
  auto conv2 = fold_or_keep(*b.conv2, *b.bn2, "bn2");
  return models::BasicBlock::folded(
      b.in_planes, b.planes, b.stride, wrapped(std::move(conv1), join(path, "conv1"), w),
      wrapped(std::move(conv2), join(path, "conv2"), w), std::move(shortcut));
}

// A copy of a module without parameters, buffers or children (its options are its state).
template <class M>
std::shared_ptr<Module> copy_plain(const Module& m) {
  return std::make_shared<M>(static_cast<const M&>(m));
}

// A convolution layer (not Conv2d, which fusion folds), a recurrent layer or a NormBase layer,
// rebuilt from its own settings with its state.
template <class L>
std::shared_ptr<Module> copy_conv_layer(const Module& m) {
  const auto& l = static_cast<const L&>(m);
  return with_state(std::make_shared<L>(l.in_channels, l.out_channels, l.kernel_size, l.options),
                    l);
}
template <class L>
std::shared_ptr<Module> copy_rnn_layer(const Module& m) {
  const auto& l = static_cast<const L&>(m);
  return with_state(std::make_shared<L>(l.input_size, l.hidden_size, l.options), l);
}
template <class L>
std::shared_ptr<Module> copy_norm(const Module& m) {
  const auto& l = static_cast<const L&>(m);
  return with_state(
      std::make_shared<L>(l.num_features, l.eps, l.momentum, l.affine, l.track_running_stats), l);
}

// The modules with parameters or buffers, rebuilt from their settings with their state.
std::shared_ptr<Module> copy_group_norm(const Module& m) {
  const auto& g = static_cast<const GroupNorm&>(m);
  return with_state(
      std::make_shared<GroupNorm>(g.num_groups, g.num_channels, g.eps, g.affine, g.bias.defined()),
      g);
}

std::shared_ptr<Module> copy_layer_norm(const Module& m) {
  const auto& l = static_cast<const LayerNorm&>(m);
  return with_state(std::make_shared<LayerNorm>(l.normalized_shape, l.eps, l.elementwise_affine,
                                                l.bias.defined()),
                    l);
}

std::shared_ptr<Module> copy_rms_norm(const Module& m) {
  const auto& l = static_cast<const RMSNorm&>(m);
  return with_state(std::make_shared<RMSNorm>(l.normalized_shape, l.eps, l.elementwise_affine), l);
}

std::shared_ptr<Module> copy_embedding(const Module& m) {
  const auto& e = static_cast<const Embedding&>(m);
  return with_state(std::make_shared<Embedding>(e.num_embeddings, e.embedding_dim, e.padding_idx),
                    e);
}

std::shared_ptr<Module> copy_prelu(const Module& m) {
  const auto& p = static_cast<const PReLU&>(m);
  return with_state(std::make_shared<PReLU>(p.num_parameters, p.init), p);
}

std::shared_ptr<Module> copy_multihead_attention(const Module& m) {
  const auto& a = static_cast<const MultiheadAttention&>(m);
  return with_state(std::make_shared<MultiheadAttention>(a.embed_dim, a.num_heads, a.options), a);
}

std::shared_ptr<Module> copy_transformer_block(const Module& m) {
  const auto& b = static_cast<const TransformerBlock&>(m);
  return with_state(std::make_shared<TransformerBlock>(b.embed_dim, b.attn->num_heads, b.options),
                    b);
}

std::shared_ptr<Module> copy_gpt(const Module& m) {
  return with_state(std::make_shared<models::GPT>(static_cast<const models::GPT&>(m).config), m);
}

std::shared_ptr<Module> copy_llama(const Module& m) {
  return with_state(std::make_shared<models::Llama>(static_cast<const models::Llama&>(m).config),
                    m);
}

using CopyFn = std::shared_ptr<Module> (*)(const Module&);

struct LeafCopy {
  std::type_index type;
  const char* name;
  CopyFn copy;
};

// The modules fusion copies as they are, by exact type (a subclass is not its base).
const std::vector<LeafCopy>& leaf_copies() {
  static const std::vector<LeafCopy> table = {
      {typeid(Conv1d), "Conv1d", copy_conv_layer<Conv1d>},
      {typeid(Conv3d), "Conv3d", copy_conv_layer<Conv3d>},
      {typeid(ConvTranspose1d), "ConvTranspose1d", copy_conv_layer<ConvTranspose1d>},
      {typeid(ConvTranspose2d), "ConvTranspose2d", copy_conv_layer<ConvTranspose2d>},
      {typeid(ConvTranspose3d), "ConvTranspose3d", copy_conv_layer<ConvTranspose3d>},
      {typeid(RNN), "RNN", copy_rnn_layer<RNN>},
      {typeid(LSTM), "LSTM", copy_rnn_layer<LSTM>},
      {typeid(GRU), "GRU", copy_rnn_layer<GRU>},
      {typeid(BatchNorm1d), "BatchNorm1d", copy_norm<BatchNorm1d>},
      {typeid(BatchNorm2d), "BatchNorm2d", copy_norm<BatchNorm2d>},
      {typeid(BatchNorm3d), "BatchNorm3d", copy_norm<BatchNorm3d>},
      {typeid(InstanceNorm1d), "InstanceNorm1d", copy_norm<InstanceNorm1d>},
      {typeid(InstanceNorm2d), "InstanceNorm2d", copy_norm<InstanceNorm2d>},
      {typeid(InstanceNorm3d), "InstanceNorm3d", copy_norm<InstanceNorm3d>},
      {typeid(GroupNorm), "GroupNorm", copy_group_norm},
      {typeid(LayerNorm), "LayerNorm", copy_layer_norm},
      {typeid(RMSNorm), "RMSNorm", copy_rms_norm},
      {typeid(Embedding), "Embedding", copy_embedding},
      {typeid(PReLU), "PReLU", copy_prelu},
      {typeid(MultiheadAttention), "MultiheadAttention", copy_multihead_attention},
      {typeid(TransformerBlock), "TransformerBlock", copy_transformer_block},
      {typeid(models::GPT), "GPT", copy_gpt},
      {typeid(models::Llama), "Llama", copy_llama},
      {typeid(ReLU), "ReLU", copy_plain<ReLU>},
      {typeid(GELU), "GELU", copy_plain<GELU>},
      {typeid(Tanh), "Tanh", copy_plain<Tanh>},
      {typeid(Sigmoid), "Sigmoid", copy_plain<Sigmoid>},
      {typeid(ELU), "ELU", copy_plain<ELU>},
      {typeid(SELU), "SELU", copy_plain<SELU>},
      {typeid(Mish), "Mish", copy_plain<Mish>},
      {typeid(Hardswish), "Hardswish", copy_plain<Hardswish>},
      {typeid(Hardsigmoid), "Hardsigmoid", copy_plain<Hardsigmoid>},
      {typeid(Softmax), "Softmax", copy_plain<Softmax>},
      {typeid(LogSoftmax), "LogSoftmax", copy_plain<LogSoftmax>},
      {typeid(Identity), "Identity", copy_plain<Identity>},
      {typeid(Flatten), "Flatten", copy_plain<Flatten>},
      {typeid(Unflatten), "Unflatten", copy_plain<Unflatten>},
      {typeid(Dropout), "Dropout", copy_plain<Dropout>},
      {typeid(MaxPool2d), "MaxPool2d", copy_plain<MaxPool2d>},
      {typeid(AvgPool2d), "AvgPool2d", copy_plain<AvgPool2d>},
      {typeid(AdaptiveAvgPool2d), "AdaptiveAvgPool2d", copy_plain<AdaptiveAvgPool2d>},
      {typeid(MaxPool3d), "MaxPool3d", copy_plain<MaxPool3d>},
      {typeid(AvgPool3d), "AvgPool3d", copy_plain<AvgPool3d>},
      {typeid(Upsample), "Upsample", copy_plain<Upsample>},
      {typeid(PixelShuffle), "PixelShuffle", copy_plain<PixelShuffle>},
      {typeid(PixelUnshuffle), "PixelUnshuffle", copy_plain<PixelUnshuffle>},
      {typeid(Unfold), "Unfold", copy_plain<Unfold>},
      {typeid(Fold), "Fold", copy_plain<Fold>},
  };
  return table;
}

std::shared_ptr<Module> fuse(const Module& m, const std::string& path, const LayerWrap& w) {
  if (is<Sequential>(m)) return fuse_sequential(m, path, w);
  if (is<ModuleList>(m) || is<ModuleDict>(m)) {
    std::shared_ptr<Module> out;
    if (is<ModuleList>(m)) {
      out = std::make_shared<ModuleList>();
    } else {
      out = std::make_shared<ModuleDict>();
    }
    for (const auto& [name, child] : m.named_children()) {
      out->register_module(name, fuse(*child, join(path, name), w));
    }
    return out;
  }
  if (is<models::BasicBlock>(m)) {
    return fuse_basic_block(static_cast<const models::BasicBlock&>(m), path, w);
  }
  if (is<Linear>(m)) return wrapped(copy_linear(static_cast<const Linear&>(m)), path, w);
  if (is<Conv2d>(m)) return wrapped(copy_conv(static_cast<const Conv2d&>(m)), path, w);
  std::string names = "Sequential, ModuleList, ModuleDict, BasicBlock, Linear, Conv2d";
  for (const LeafCopy& leaf : leaf_copies()) {
    if (leaf.type == std::type_index(typeid(m))) return leaf.copy(m);
    names += std::string(", ") + leaf.name;
  }
  SINTER_THROW("fuse_for_inference: cannot copy ", where(path), " (a ", m.name(),
               "): fusion copies ", names);
}

// The module `m` copied as it is (clone's tree walk): containers with their children's copies
// under the same names, an unfused BasicBlock rebuilt with its state, the layers by the table.
std::shared_ptr<Module> clone_tree(const Module& m, const std::string& path) {
  std::shared_ptr<Module> out;
  if (is<Sequential>(m) || is<ModuleList>(m) || is<ModuleDict>(m)) {
    if (is<Sequential>(m)) {
      auto seq = std::make_shared<Sequential>();
      if (static_cast<const Sequential&>(m).inference_plans) {
        seq->inference_plans = std::make_shared<detail::InferencePlans>();
      }
      out = seq;
    } else if (is<ModuleList>(m)) {
      out = std::make_shared<ModuleList>();
    } else {
      out = std::make_shared<ModuleDict>();
    }
    for (const auto& [name, child] : m.named_children()) {
      out->register_module(name, clone_tree(*child, join(path, name)));
    }
    out->train(m.is_training());
    return out;
  }
  if (is<models::BasicBlock>(m) && static_cast<const models::BasicBlock&>(m).bn1) {
    const auto& b = static_cast<const models::BasicBlock&>(m);
    out = with_state(std::make_shared<models::BasicBlock>(b.in_planes, b.planes, b.stride), b);
  } else if (is<Linear>(m)) {
    out = copy_linear(static_cast<const Linear&>(m));
  } else if (is<Conv2d>(m)) {
    const auto& c = static_cast<const Conv2d&>(m);
    auto conv = with_state(
        std::make_shared<Conv2d>(c.in_channels, c.out_channels, c.kernel_size, c.options), c);
    conv->activation = c.activation;
    out = conv;
  } else {
    std::string names = "Sequential, ModuleList, ModuleDict, BasicBlock, Linear, Conv2d";
    for (const LeafCopy& leaf : leaf_copies()) {
      if (leaf.type == std::type_index(typeid(m))) out = leaf.copy(m);
      names += std::string(", ") + leaf.name;
    }
    SINTER_CHECK(out != nullptr, "clone: cannot copy ", where(path), " (a ", m.name(),
                 "): clone copies ", names);
  }
  // The copy's tensors are fresh leaves: each takes its original's requires_grad.
  const std::vector<Tensor> from = m.parameters();
  std::vector<Tensor> to = out->parameters();
  for (size_t i = 0; i < from.size() && i < to.size(); ++i) {
    to[i].requires_grad_(from[i].requires_grad());
  }
  return out;
}

}  // namespace

std::shared_ptr<Module> fuse_with(const Module& module, const LayerWrap& wrap) {
  // The copies are built with fresh layers, whose initialization draws from the default
  // generator; its state is put back, so fusing changes no later random draw.
  Generator& gen = default_generator();
  const GeneratorState state = gen.state();
  std::shared_ptr<Module> fused;
  try {
    fused = fuse(module, "", wrap);
  } catch (...) {
    gen.set_state(state);
    throw;
  }
  gen.set_state(state);
  fused->eval();
  return fused;
}

std::shared_ptr<Module> fuse_for_inference(const Module& module) {
  std::shared_ptr<Module> fused = fuse_with(module, {});
  if (is<Sequential>(*fused)) {
    static_cast<Sequential&>(*fused).inference_plans = std::make_shared<detail::InferencePlans>();
  }
  return fused;
}

int64_t inference_plans_made(const Module& fused) {
  const auto* seq = dynamic_cast<const Sequential*>(&fused);
  return seq != nullptr && seq->inference_plans ? seq->inference_plans->compiled() : 0;
}

std::shared_ptr<Module> clone(const Module& module) {
  // As fuse_with: fresh layers draw their initialization from the default generator, put back.
  Generator& gen = default_generator();
  const GeneratorState state = gen.state();
  std::shared_ptr<Module> copy;
  try {
    copy = clone_tree(module, "");
  } catch (...) {
    gen.set_state(state);
    throw;
  }
  gen.set_state(state);
  return copy;
}

}  // namespace sinter::nn

// The layers: Linear, the convolutions (sinter/nn/conv.h), normalization, dropout, embedding,
// activations, pooling, Flatten, attention and the transformer block, and the containers
// Sequential and ModuleList. Each checks its input's shape at forward and names itself in the
// error; each initializes its parameters as PyTorch does (see reset_parameters).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sinter/nn/conv.h"
#include "sinter/nn/module.h"
#include "sinter/ops.h"

namespace sinter::nn {

// y = x W^T + b. x: (*, in_features) -> (*, out_features); weight: (out_features, in_features).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  std::string name() const override { return "Linear"; }
  Tensor forward(const Tensor& x) override;
  // weight: kaiming_uniform_(a = sqrt(5)); bias: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  void reset_parameters();

  int64_t in_features, out_features;
  Tensor weight;
  Tensor bias;  // undefined without bias
  // Applied after the bias in the GEMM's epilogue: y = act(x W^T + b). None by default;
  // nn::fuse_for_inference sets it where an activation module followed (Note [inference fusion]).
  Activation activation = Activation::None;
  // Set by fp8::prepare: under fp8::Autocast the layer runs fp8::linear (Note [fp8 training]) with
  // these buffers as its delayed-scaling state (Note [fp8 delayed state]).
  bool fp8 = false;
  Tensor fp8_amax_history, fp8_scale, fp8_steps;
};

// What the batch and instance norms keep, as PyTorch's _NormBase: parameters weight (1) and bias
// (0) when affine; buffers running_mean (0), running_var (1) and num_batches_tracked (i64) when
// track_running_stats.
class NormBase : public Module {
 public:
  void reset_parameters();

  int64_t num_features;
  double eps, momentum;
  bool affine, track_running_stats;
  Tensor weight, bias;                                    // undefined unless affine
  Tensor running_mean, running_var, num_batches_tracked;  // undefined unless tracked

 protected:
  // `layer` names the module in the errors of the arguments' checks.
  NormBase(const std::string& layer, int64_t num_features, double eps, double momentum, bool affine,
           bool track_running_stats);
};

// Batch normalization over (N, C, H, W) per channel, with NormBase's parameters and buffers
// (num_batches_tracked counts training batches). Training mode, or no running statistics,
// normalizes with the batch's statistics; eval mode with the running ones.
class BatchNorm2d : public NormBase {
 public:
  BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
              bool track_running_stats = true)
      : NormBase("BatchNorm2d", num_features, eps, momentum, affine, track_running_stats) {}
  std::string name() const override { return "BatchNorm2d"; }
  Tensor forward(const Tensor& x) override;

 protected:
  // The normalization of an input whose shape the caller checked; `op` names the module in errors.
  Tensor normalize(const Tensor& x, const char* op);
};

// Batch normalization over (N, C) or (N, C, L) per channel (dim 1): BatchNorm2d's parameters,
// buffers, options and state_dict keys, for the outputs of Linear layers (and 1-D convolutions).
// nn::fuse_for_inference folds one into the Linear before it.
class BatchNorm1d : public BatchNorm2d {
 public:
  using BatchNorm2d::BatchNorm2d;
  std::string name() const override { return "BatchNorm1d"; }
  Tensor forward(const Tensor& x) override;
};

// Normalizes over the trailing dims `normalized_shape`; weight (1) and bias (0) of that shape when
// elementwise_affine (the weight alone without `bias`, as PyTorch's bias=False).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true);
  std::string name() const override { return "LayerNorm"; }
  Tensor forward(const Tensor& x) override;
  void reset_parameters();

  Shape normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight, bias;  // undefined unless elementwise_affine (bias: and `bias`)
};

// Root mean square normalization over the trailing dims (PyTorch's nn.RMSNorm): rms_norm with a
// weight of normalized_shape (ones at first) when elementwise_affine. eps absent: rms_norm's
// default, the machine epsilon of the type the sums run in.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true);
  std::string name() const override { return "RMSNorm"; }
  Tensor forward(const Tensor& x) override;
  void reset_parameters();

  Shape normalized_shape;
  std::optional<double> eps;
  bool elementwise_affine;
  Tensor weight;  // undefined unless elementwise_affine
};

// Zeroes elements with probability p and scales the rest by 1 / (1 - p) in training mode; the
// identity in eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  std::string name() const override { return "Dropout"; }
  Tensor forward(const Tensor& x) override;

  double p;
};

// A lookup table: i64 indices of any shape -> (*indices.shape, embedding_dim). The row at
// padding_idx (negative counts from the end) starts at zero and gets no gradient.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt);
  std::string name() const override { return "Embedding"; }
  Tensor forward(const Tensor& indices) override;
  // weight: normal(0, 1), with the padding row zeroed.
  void reset_parameters();

  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // normalized to [0, num_embeddings)
  Tensor weight;
};

class ReLU : public Module {
 public:
  std::string name() const override { return "ReLU"; }
  Tensor forward(const Tensor& x) override;
};

// gelu(x, form): Activation::Gelu (erf) or Activation::GeluTanh (tanh approximation).
class GELU : public Module {
 public:
  explicit GELU(Activation form = Activation::Gelu);
  std::string name() const override { return "GELU"; }
  Tensor forward(const Tensor& x) override;

  Activation form;
};

class Tanh : public Module {
 public:
  std::string name() const override { return "Tanh"; }
  Tensor forward(const Tensor& x) override;
};

class Sigmoid : public Module {
 public:
  std::string name() const override { return "Sigmoid"; }
  Tensor forward(const Tensor& x) override;
};

// x: (N, C, H, W) or (C, H, W); max_pool2d with these options (a stride of 0: the kernel size).
//   MaxPool2d(2), MaxPool2d(3, {.stride = 2, .padding = 1})
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, const MaxPool2dOptions& options = {});
  std::string name() const override { return "MaxPool2d"; }
  Tensor forward(const Tensor& x) override;

  Size2 kernel_size;
  MaxPool2dOptions options;
};

// x: (N, C, H, W) or (C, H, W); avg_pool2d with these options (a stride of 0: the kernel size).
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, const AvgPool2dOptions& options = {});
  std::string name() const override { return "AvgPool2d"; }
  Tensor forward(const Tensor& x) override;

  Size2 kernel_size;
  AvgPool2dOptions options;
};

// x: (N, C, H, W) or (C, H, W) -> (N, C, output_size.h, output_size.w).
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size);
  std::string name() const override { return "AdaptiveAvgPool2d"; }
  Tensor forward(const Tensor& x) override;

  Size2 output_size;
};

// Merges dims start_dim..end_dim (negative counts from the end) into one; a view where possible.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  std::string name() const override { return "Flatten"; }
  Tensor forward(const Tensor& x) override;

  int64_t start_dim, end_dim;
};

// --- attention ---

// The keys and values the attention layers of a decoder computed for the positions seen so far,
// kept for generation: a new token then attends to them instead of a new forward over the whole
// context. Layer l holds buffers (B, H_kv, capacity, D), allocated at its first attend() in the
// dtype and on the device of its keys; a forward that feeds t tokens has every layer attend once,
// then advance(t). A cached forward runs without gradients.
class KVCache {
 public:
  KVCache(int64_t n_layer, int64_t capacity);
  int64_t n_layer() const { return static_cast<int64_t>(k_.size()); }
  int64_t capacity() const { return capacity_; }
  int64_t length() const { return length_; }  // positions held by every layer

  // Layer `layer`'s attention for t new positions: k and v (B, H_kv, t, D) are stored at positions
  // length()..length()+t-1, and q (B, H, t, D) at those positions attends causally to the keys of
  // positions 0..length()+t-1 (grouped-query when H_kv < H) -> (B, H, t, Dv). Equal to the rows
  // of a causal attention over the whole sequence.
  Tensor attend(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v);
  // Ends a forward of t positions, after every layer attended to them: length() grows by t.
  void advance(int64_t t);
  // Forgets every position (the buffers are kept for the next sequence).
  void reset();

 private:
  int64_t capacity_, length_ = 0;
  std::vector<Tensor> k_, v_;
  std::vector<int64_t> pending_;  // positions each layer wrote since the last advance
};

struct MultiheadAttentionOptions {
  bool bias = true;      // in the qkv and output projections
  double dropout = 0.0;  // on the attention weights, in training mode
  bool causal = false;   // each position attends to itself and the ones before it
};

// Self-attention over batch-first x: (B, T, E) -> (B, T, E), with num_heads heads of size
// E / num_heads. One fused projection qkv (Linear E -> 3E; q, k and v in that order, each split
// into heads), scaled_dot_product_attention per head, then out_proj (Linear E -> E). Children:
// qkv, out_proj.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads,
                     const MultiheadAttentionOptions& options = {});
  std::string name() const override { return "MultiheadAttention"; }
  Tensor forward(const Tensor& x) override;
  // As forward(x), with `mask` (bool: the keys that take part; or additive) broadcast to the
  // scores (B, num_heads, T, T), as scaled_dot_product_attention takes it.
  Tensor forward(const Tensor& x, const Tensor& mask);
  // Causal self-attention of x (B, t, E) at the positions after those in `cache`, as layer
  // `layer` of it (see KVCache); options.causal is taken as set.
  Tensor forward(const Tensor& x, KVCache& cache, int64_t layer);

  int64_t embed_dim, num_heads;
  MultiheadAttentionOptions options;
  std::shared_ptr<Linear> qkv, out_proj;
};

struct TransformerBlockOptions {
  int64_t mlp_ratio = 4;  // the MLP's hidden width is mlp_ratio * E
  double dropout = 0.0;   // on the attention weights and on both residual branches
  bool bias = true;       // in every Linear
  // Not causal, as MultiheadAttentionOptions and torch.nn.TransformerEncoderLayer: an encoder
  // (ViT, BERT) sees every position; a decoder-only model (GPT) asks for causal itself.
  bool causal = false;
  double eps = 1e-5;  // of the LayerNorms
  // The MLP's activation, applied in fc's GEMM epilogue: Activation::GeluTanh (GPT-2's), Gelu
  // (exact), Relu, or None.
  Activation activation = Activation::GeluTanh;
};

// A pre-LayerNorm transformer block, x: (B, T, E) -> (B, T, E):
//   x = x + dropout(attn(ln1(x)));  x = x + dropout(proj(act(fc(ln2(x)))))
// with fc: Linear E -> mlp_ratio * E and proj back to E. Children: ln1, attn, ln2, fc, proj.
class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t embed_dim, int64_t num_heads,
                   const TransformerBlockOptions& options = {});
  std::string name() const override { return "TransformerBlock"; }
  Tensor forward(const Tensor& x) override;
  // x (B, t, E) at the positions after those in `cache`, as its layer `layer` (in eval mode:
  // no dropout).
  Tensor forward(const Tensor& x, KVCache& cache, int64_t layer);

  int64_t embed_dim;
  TransformerBlockOptions options;
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<MultiheadAttention> attn;
  std::shared_ptr<Linear> fc, proj;
};

namespace detail {
// A module given by value (moved or copied into a new shared_ptr) or a shared_ptr to one.
template <class M>
struct is_module_ptr : std::false_type {};
template <class M>
struct is_module_ptr<std::shared_ptr<M>> : std::is_base_of<Module, M> {};
template <class M>
concept ModuleArg =
    std::is_base_of_v<Module, std::decay_t<M>> || is_module_ptr<std::decay_t<M>>::value;

template <class M>
std::shared_ptr<Module> to_module_ptr(M&& m) {
  if constexpr (is_module_ptr<std::decay_t<M>>::value) {
    return std::forward<M>(m);
  } else {
    return std::make_shared<std::decay_t<M>>(std::forward<M>(m));
  }
}
}  // namespace detail

// Modules held in order, the base of Sequential: push_back names them "0", "1", ..., and a module
// registered under a name of its own (register_module("head", ...)) joins the list too.
class ModuleList : public Module {
 public:
  ModuleList() = default;
  // Modules by value (Note [module handles]) or shared_ptrs, in order.
  template <class... Ms>
  requires(sizeof...(Ms) > 0 && (detail::ModuleArg<Ms> && ...) &&
           !(sizeof...(Ms) == 1 && (std::is_base_of_v<ModuleList, std::decay_t<Ms>> &&
                                    ...))) explicit ModuleList(Ms&&... modules) {
    (push_back(std::forward<Ms>(modules)), ...);
  }
  explicit ModuleList(const std::vector<std::shared_ptr<Module>>& modules);
  std::string name() const override { return "ModuleList"; }

  void push_back(std::shared_ptr<Module> module);
  template <class M>
  requires detail::ModuleArg<M>
  void push_back(M&& module) { push_back(detail::to_module_ptr(std::forward<M>(module))); }
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  // Throws when i is out of range.
  const std::shared_ptr<Module>& operator[](size_t i) const;
  // The module at i as an M; throws when i is out of range or the module is not an M.
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    std::shared_ptr<M> m = std::dynamic_pointer_cast<M>((*this)[i]);
    SINTER_CHECK(m != nullptr, name(), "::at: module ", i, " is a ", (*this)[i]->name(),
                 ", not the type asked for");
    return m;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 protected:
  // Every child, in registration order, whether added by push_back or by register_module (which
  // names it): the list is the children, so nothing registered is trained but skipped.
  void child_registered(const std::shared_ptr<Module>& child) override;
  std::vector<std::shared_ptr<Module>> modules_;
};

// Applies its modules in order: forward(x) = m_{n-1}(... m_0(x)); the identity when empty.
//   Sequential model{Linear(784, 256), ReLU(), Linear(256, 10)};
namespace detail {
class InferencePlans;
}  // namespace detail

class Sequential : public ModuleList {
 public:
  using ModuleList::ModuleList;
  std::string name() const override { return "Sequential"; }
  Tensor forward(const Tensor& x) override;

  // Set on the Sequential nn::fuse_for_inference returns: with grad mode off, forward on a CPU f32
  // input runs through a plan made for the input's shape where the model is one a plan can run
  // (Note [cpu inference plan] in src/cpu/infer_plan_dnnl.cpp), else module by module.
  std::shared_ptr<detail::InferencePlans> inference_plans;
};

}  // namespace sinter::nn

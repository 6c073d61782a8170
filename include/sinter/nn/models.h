// The reference models of the benchmark workloads (shared/reference/workloads.md), built from nn
// layers, so examples, tests and benchmarks train exactly the same networks: MLP, CNN, ResNet-20,
// GPT, Llama and a small ViT.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sinter/nn/modules.h"

namespace sinter::nn::models {

// Linear 784-1024, ReLU, Linear 1024-1024, ReLU, Linear 1024-10 on flattened 28x28 images.
// Input (N, 1, 28, 28) or (N, 784) -> logits (N, 10). 1,863,690 parameters.
Sequential mlp();

// Conv 1-32 3x3 pad 1, ReLU, MaxPool 2; Conv 32-64 3x3 pad 1, ReLU, MaxPool 2; Flatten;
// Linear 3136-128, ReLU, Linear 128-10. Input (N, 1, 28, 28) -> logits (N, 10). 421,642
// parameters.
Sequential cnn();

// The basic residual block of ResNet (He et al. 2016):
//   y = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))
// conv1: 3x3, in_planes -> planes, stride `stride`, pad 1; conv2: 3x3, planes -> planes, pad 1; no
// conv has a bias (the BN after it has one). The shortcut is the identity when the shape is kept
// (stride 1 and in_planes == planes), else a 1x1 conv with the block's stride followed by BN.
// x: (N, in_planes, H, W) -> (N, planes, ceil(H / stride), ceil(W / stride)).
// Children, in order: conv1, bn1, conv2, bn2 and (projection only) shortcut, a Sequential of
// Conv2d and BatchNorm2d, so state-dict keys read "conv1.weight", "shortcut.0.weight", ...
class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride = 1);
  // The block nn::fuse_for_inference makes of a trained one (Note [inference fusion]): conv1 with
  // bn1 folded into its weight and bias and the ReLU in its epilogue, conv2 with bn2 folded in,
  // and the shortcut (null for the identity) already fused. bn1 and bn2 are null and `fused` is
  // set; the children are conv1, conv2 and the shortcut.
  static std::shared_ptr<BasicBlock> folded(int64_t in_planes, int64_t planes, int64_t stride,
                                            std::shared_ptr<Conv2d> conv1,
                                            std::shared_ptr<Conv2d> conv2,
                                            std::shared_ptr<Sequential> shortcut);
  std::string name() const override { return "BasicBlock"; }
  Tensor forward(const Tensor& x) override;

  int64_t in_planes, planes, stride;
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<BatchNorm2d> bn1, bn2;  // null when fused
  std::shared_ptr<Sequential> shortcut;   // null for the identity shortcut
  bool fused = false;

 private:
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, bool fused);
};

// CIFAR ResNet-20: conv 3-16 3x3 + BN + ReLU; three stages of three BasicBlocks with 16, 32 and 64
// channels (the first block of stages 2 and 3 has stride 2 and a 1x1 conv + BN shortcut); global
// average pool; Flatten; Linear 64-10. Input (N, 3, 32, 32) -> logits (N, 10); the feature maps are
// 32x32, 16x16 and 8x8 in the three stages. 272,474 parameters (see tests/test_models.cpp). The
// model is a Sequential whose children are, in order: Conv2d, BatchNorm2d, ReLU, nine BasicBlocks,
// AdaptiveAvgPool2d(1), Flatten, Linear. `in_channels` 1 takes grey images (Fashion-MNIST padded
// to 32x32): only the first conv changes, to 1-16 (272,186 parameters).
Sequential resnet20(int64_t in_channels);
inline Sequential resnet20() { return resnet20(3); }

// A GPT (decoder-only transformer, as GPT-2) over token ids.
struct GPTConfig {
  int64_t vocab_size = 256;  // bytes, for a character-level model
  int64_t context_length = 256;
  int64_t n_layer = 4, n_head = 4, n_embd = 128;
  double dropout = 0.0;     // after the embeddings, on attention weights and residual branches
  bool bias = true;         // in the blocks' Linear layers
  bool tie_weights = true;  // the output head reuses the token embedding (no lm_head)
  // Each block through autograd::checkpoint in training with grad mode on: its activations are
  // recomputed in backward instead of kept (Note [activation checkpointing]); the same gradients.
  bool checkpoint_blocks = false;
};

// gpt-mini of the benchmark workloads: vocabulary 256, context 256, 6 layers, 6 heads, width 384,
// no dropout, an untied head without bias. 10,942,464 parameters.
GPTConfig gpt_mini();

// How GPT::generate and Llama::generate pick each next token.
struct GenerateOptions {
  double temperature = 1.0;        // the logits are divided by it (> 0; lower is greedier)
  int64_t top_k = 0;               // sample among the k most likely tokens only (0: all)
  Generator* generator = nullptr;  // the sampling's random stream (default generator if null)
  // Keep the keys and values of the tokens fed (a KVCache) and feed each new token alone; false
  // feeds the whole window at every step. Both give the same logits (to rounding), so the same
  // tokens for a generator state.
  bool use_cache = true;
};

// idx (B, T) i64, T <= context_length -> logits (B, T, vocab_size):
//   x = wte(idx) + wpe(0..T-1); dropout; n_layer causal TransformerBlocks (pre-LayerNorm, MLP 4x
//   with tanh-GELU); ln_f; logits = x wte^T (tied) or lm_head(x).
// Children: wte, wpe, blocks (a ModuleList: "blocks.0.attn.qkv.weight", ...), ln_f and, untied,
// lm_head. GPT-2 initialization (reset_parameters): every Linear and Embedding weight normal(0,
// 0.02), the residual projections (attn.out_proj, proj) normal(0, 0.02 / sqrt(2 n_layer)), biases
// 0, LayerNorms 1 and 0.
class GPT : public Module {
 public:
  explicit GPT(const GPTConfig& config = {});
  std::string name() const override { return "GPT"; }
  Tensor forward(const Tensor& idx) override;
  // The logits (B, t, vocab_size) of idx (B, t) at the positions after those `cache` holds
  // (KVCache(n_layer, context_length)), which then holds these too: the last t rows of forward()
  // over the whole sequence. Inference: no gradients, no dropout.
  Tensor forward(const Tensor& idx, KVCache& cache);
  void reset_parameters();
  // prompt (B, T0) or (T0) i64 followed by n sampled tokens: (B, T0 + n) or (T0 + n). Each step
  // takes the logits of the last position given the last context_length tokens, in eval mode
  // (restored after) without gradients, and draws from softmax(logits / temperature) over the
  // top_k tokens (ties at the k-th value kept) with multinomial, on the model's device. With the
  // cache, the window is fed once and each new token alone; once the window slides past the
  // context, the positions of every token change and the step feeds the whole window again.
  Tensor generate(const Tensor& prompt, int64_t n, const GenerateOptions& options = {});

  GPTConfig config;
  std::shared_ptr<Embedding> wte, wpe;
  std::shared_ptr<ModuleList> blocks;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<Linear> lm_head;  // null when the weights are tied
};

// A Llama (decoder-only transformer: RMSNorm before each branch, rotary position embedding,
// grouped-query attention, SwiGLU MLP, no biases) over token ids.
struct LlamaConfig {
  int64_t vocab_size = 256;
  int64_t context_length = 256;
  int64_t n_layer = 4, n_head = 4, n_kv_head = 4, n_embd = 128;
  int64_t mlp_hidden = 0;  // 0: 8 n_embd / 3 rounded up to a multiple of 32
  double rope_base = 10000.0;
  double norm_eps = 1e-5;
  bool tie_weights = false;  // the output head reuses the token embedding (no lm_head)
  // Each decoder layer through autograd::checkpoint in training with grad mode on (as
  // GPTConfig::checkpoint_blocks).
  bool checkpoint_layers = false;
};

// The MLP width of `c`: mlp_hidden, or 8 n_embd / 3 rounded up to a multiple of 32.
int64_t mlp_width(const LlamaConfig& c);

// llama-mini of the benchmarks, of gpt-mini's size: vocabulary 256, context 256, 6 layers, 6 query
// heads on 2 K/V heads, width 384, MLP 1024, an untied head. 9,638,784 parameters.
LlamaConfig llama_mini();

// Attention of a Llama layer, x (B, T, E) at positions (T) -> (B, T, E): q, k, v projections (no
// bias; k and v to n_kv_head heads), rope (the halves of each head) on q and k at the positions,
// causal grouped-query scaled_dot_product_attention, o_proj.
class LlamaAttention : public Module {
 public:
  LlamaAttention(int64_t n_embd, int64_t n_head, int64_t n_kv_head, double rope_base);
  std::string name() const override { return "LlamaAttention"; }
  Tensor forward(const Tensor& x) override;  // at positions 0..T-1
  Tensor forward(const Tensor& x, const Tensor& positions);
  // At positions (t) after those in `cache`, as its layer `layer` (see KVCache).
  Tensor forward(const Tensor& x, const Tensor& positions, KVCache& cache, int64_t layer);

  int64_t n_embd, n_head, n_kv_head, head_dim;
  double rope_base;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
};

// down_proj(swiglu(gate_proj(x), up_proj(x))), no biases.
class LlamaMLP : public Module {
 public:
  LlamaMLP(int64_t n_embd, int64_t hidden);
  std::string name() const override { return "LlamaMLP"; }
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;
};

// x + self_attn(input_layernorm(x)), then + mlp(post_attention_layernorm(.)).
class LlamaDecoderLayer : public Module {
 public:
  explicit LlamaDecoderLayer(const LlamaConfig& c);
  std::string name() const override { return "LlamaDecoderLayer"; }
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& x, const Tensor& positions);
  Tensor forward(const Tensor& x, const Tensor& positions, KVCache& cache, int64_t layer);

  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<LlamaMLP> mlp;
  std::shared_ptr<RMSNorm> input_layernorm, post_attention_layernorm;
};

// The layers without the head: embed_tokens, layers (a ModuleList), norm.
class LlamaModel : public Module {
 public:
  explicit LlamaModel(const LlamaConfig& c);
  std::string name() const override { return "LlamaModel"; }
  Tensor forward(const Tensor& idx) override;  // (B, T) i64 -> hidden states (B, T, E)
  // idx (B, t) at the positions after those in `cache` (see Llama::forward(idx, cache)).
  Tensor forward(const Tensor& idx, KVCache& cache);

  LlamaConfig config;
  std::shared_ptr<Embedding> embed_tokens;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<RMSNorm> norm;
};

// idx (B, T) i64, T <= context_length -> logits (B, T, vocab_size). Children: model (LlamaModel)
// and, untied, lm_head, so state-dict keys read as Hugging Face's Llama checkpoints:
// "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
// "model.layers.0.mlp.gate_proj.weight", "model.layers.0.input_layernorm.weight",
// "model.norm.weight", "lm_head.weight". Initialization (reset_parameters): every Linear and
// Embedding weight normal(0, 0.02), RMSNorm weights 1.
class Llama : public Module {
 public:
  explicit Llama(const LlamaConfig& config = {});
  std::string name() const override { return "Llama"; }
  Tensor forward(const Tensor& idx) override;
  // The logits (B, t, vocab_size) of idx (B, t) at the positions after those `cache` holds
  // (KVCache(n_layer, context_length)), which then holds these too; as GPT::forward(idx, cache).
  Tensor forward(const Tensor& idx, KVCache& cache);
  void reset_parameters();
  // As GPT::generate.
  Tensor generate(const Tensor& prompt, int64_t n, const GenerateOptions& options = {});

  LlamaConfig config;
  std::shared_ptr<LlamaModel> model;
  std::shared_ptr<Linear> lm_head;  // null when the weights are tied
};

// A Vision Transformer (Dosovitskiy et al. 2021) for small images: each patch_size x patch_size
// square embedded by a Conv2d (kernel and stride patch_size) into n_embd channels, a learned
// position embedding added, n_layer TransformerBlocks (pre-LayerNorm, not causal, exact GELU), a
// final LayerNorm, the mean over the patches and a Linear head. No class token: the mean pools.
struct ViTConfig {
  int64_t image_size = 32, patch_size = 4, in_channels = 3;
  int64_t n_layer = 4, n_head = 4, n_embd = 64, mlp_ratio = 4;
  int64_t num_classes = 10;
};

// The benchmarks' vit-tiny: 32x32 RGB images in 4x4 patches (64 tokens), width 64, 4 blocks of 4
// heads, MLP 256, 10 classes. 207,946 parameters.
ViTConfig vit_tiny();

// x (N, in_channels, image_size, image_size) -> logits (N, num_classes). Children: patch_embed
// (Conv2d), blocks (a ModuleList), ln (LayerNorm), head (Linear), and the parameter pos_embed
// (1, patches, n_embd), trunc_normal(0, 0.02) as ViT's; the layers keep their own initialization.
class ViT : public Module {
 public:
  explicit ViT(const ViTConfig& config = {});
  std::string name() const override { return "ViT"; }
  Tensor forward(const Tensor& x) override;

  ViTConfig config;
  std::shared_ptr<Conv2d> patch_embed;
  Tensor pos_embed;
  std::shared_ptr<ModuleList> blocks;
  std::shared_ptr<LayerNorm> ln;
  std::shared_ptr<Linear> head;
};

}  // namespace sinter::nn::models

// MultiheadAttention and TransformerBlock: self-attention with a fused qkv projection, and the
// pre-LayerNorm block of GPT-style models.
#include "sinter/nn/modules.h"

namespace sinter::nn {

namespace {

void check_dropout(const char* module, double p) {
  SINTER_CHECK(p >= 0.0 && p < 1.0, module, ": dropout must be in [0, 1), got ", p);
}

// x must be (B, T, E).
void check_sequence(const char* module, const Tensor& x, int64_t embed_dim) {
  SINTER_CHECK(x.defined(), module, ": undefined input");
  SINTER_CHECK(x.dim() == 3 && x.size(2) == embed_dim, module, ": expected input of shape (B, T, ",
               embed_dim, "), got shape ", shape_str(x.shape()));
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads,
                                       const MultiheadAttentionOptions& options)
    : embed_dim(embed_dim), num_heads(num_heads), options(options) {
  SINTER_CHECK(embed_dim > 0 && num_heads > 0,
               "MultiheadAttention: embed_dim and num_heads must be positive, got ", embed_dim,
               " and ", num_heads);
  SINTER_CHECK(embed_dim % num_heads == 0, "MultiheadAttention: embed_dim ", embed_dim,
               " is not divisible by num_heads ", num_heads);
  check_dropout("MultiheadAttention", options.dropout);
  qkv = register_module("qkv", Linear(embed_dim, 3 * embed_dim, options.bias));
  out_proj = register_module("out_proj", Linear(embed_dim, embed_dim, options.bias));
}

Tensor MultiheadAttention::forward(const Tensor& x) { return forward(x, Tensor()); }

Tensor MultiheadAttention::forward(const Tensor& x, const Tensor& mask) {
  check_sequence("MultiheadAttention", x, embed_dim);
  const int64_t b = x.size(0), t = x.size(1), head = embed_dim / num_heads;
  // (B, T, 3E) -> (3, B, H, T, head): q, k and v, each split into heads.
  const Tensor heads = qkv->forward(x).view({b, t, 3, num_heads, head}).permute({2, 0, 3, 1, 4});
  const Tensor y = scaled_dot_product_attention(
      heads.select(0, 0), heads.select(0, 1), heads.select(0, 2),
      {.causal = options.causal, .dropout_p = is_training() ? options.dropout : 0.0, .mask = mask});
  // (B, H, T, head) -> (B, T, E), heads side by side.
  return out_proj->forward(y.transpose(1, 2).reshape({b, t, embed_dim}));
}

TransformerBlock::TransformerBlock(int64_t embed_dim, int64_t num_heads,
                                   const TransformerBlockOptions& options)
    : embed_dim(embed_dim), options(options) {
  SINTER_CHECK(options.mlp_ratio > 0, "TransformerBlock: mlp_ratio must be positive, got ",
               options.mlp_ratio);
  check_dropout("TransformerBlock", options.dropout);
  const Activation act = options.activation;
  SINTER_CHECK(act == Activation::None || act == Activation::Relu || act == Activation::Gelu ||
                   act == Activation::GeluTanh,
               "TransformerBlock: unknown activation ", static_cast<int>(act));
  ln1 = register_module("ln1", LayerNorm({embed_dim}, options.eps));
  attn = register_module(
      "attn", MultiheadAttention(
                  embed_dim, num_heads,
                  {.bias = options.bias, .dropout = options.dropout, .causal = options.causal}));
  ln2 = register_module("ln2", LayerNorm({embed_dim}, options.eps));
  fc = register_module("fc", Linear(embed_dim, options.mlp_ratio * embed_dim, options.bias));
  proj = register_module("proj", Linear(options.mlp_ratio * embed_dim, embed_dim, options.bias));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  check_sequence("TransformerBlock", x, embed_dim);
  const bool training = is_training();
  const Tensor h = x + dropout(attn->forward(ln1->forward(x)), options.dropout, training);
  const Tensor mlp =
      proj->forward(linear(ln2->forward(h), fc->weight, fc->bias, options.activation));
  return h + dropout(mlp, options.dropout, training);
}

}  // namespace sinter::nn

// MultiheadAttention and TransformerBlock: self-attention with a fused qkv projection, and the
// pre-LayerNorm block of GPT-style models; the KV cache of generation.
#include <algorithm>
#include <utility>

#include "internal/ops_impl.h"
#include "sinter/autograd.h"
#include "sinter/fp8.h"
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

KVCache::KVCache(int64_t n_layer, int64_t capacity) : capacity_(capacity) {
  SINTER_CHECK(n_layer > 0 && capacity > 0, "KVCache: n_layer and capacity must be positive, got ",
               n_layer, " and ", capacity);
  k_.resize(static_cast<size_t>(n_layer));
  v_.resize(static_cast<size_t>(n_layer));
  pending_.assign(static_cast<size_t>(n_layer), 0);
}

Tensor KVCache::attend(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v) {
  SINTER_CHECK(layer >= 0 && layer < n_layer(), "KVCache: layer ", layer, " is outside 0 to ",
               n_layer() - 1);
  SINTER_CHECK(
      q.defined() && k.defined() && v.defined() && q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
      "KVCache: expected q, k and v of shape (B, H, t, D), got ",
      q.defined() ? shape_str(q.shape()) : "undefined", ", ",
      k.defined() ? shape_str(k.shape()) : "undefined", " and ",
      v.defined() ? shape_str(v.shape()) : "undefined");
  const size_t l = static_cast<size_t>(layer);
  const int64_t t = k.size(2);
  SINTER_CHECK(pending_[l] == 0, "KVCache: layer ", layer,
               " attended twice without advance() between");
  SINTER_CHECK(q.size(2) == t && v.size(2) == t && v.size(0) == k.size(0) &&
                   v.size(1) == k.size(1) && q.size(0) == k.size(0) && q.size(3) == k.size(3),
               "KVCache: q ", shape_str(q.shape()), ", k ", shape_str(k.shape()), " and v ",
               shape_str(v.shape()), " do not agree in batch, heads or positions");
  SINTER_CHECK(t >= 1 && length_ + t <= capacity_, "KVCache: ", t, " new positions after the ",
               length_, " held exceed the capacity ", capacity_);
  NoGradGuard no_grad;
  const auto fits = [&](const Tensor& buffer, const Tensor& x) {
    return buffer.defined() && buffer.dtype() == x.dtype() && buffer.device() == x.device() &&
           buffer.size(0) == x.size(0) && buffer.size(1) == x.size(1) &&
           buffer.size(3) == x.size(3);
  };
  for (auto [buffer, x] : {std::pair{&k_[l], &k}, std::pair{&v_[l], &v}}) {
    if (fits(*buffer, *x)) continue;
    SINTER_CHECK(length_ == 0, "KVCache: layer ", layer, " holds ", length_, " positions of shape ",
                 shape_str(buffer->shape()), " in ", dtype_name(buffer->dtype()),
                 ", got new ones of shape ", shape_str(x->shape()), " in ", dtype_name(x->dtype()),
                 " (reset() before another sequence)");
    *buffer = empty({x->size(0), x->size(1), capacity_, x->size(3)},
                    {.dtype = x->dtype(), .device = x->device()});
  }
  k_[l].narrow(2, length_, t).copy_(k);
  v_[l].narrow(2, length_, t).copy_(v);
  const int64_t n = length_ + t;
  AttentionOptions options{.enable_gqa = q.size(1) != k.size(1)};
  if (length_ == 0) {
    options.causal = t > 1;
  } else if (t > 1) {
    // Query i sits at position length_ + i and sees the keys j <= length_ + i (bottom-right
    // alignment; causal alone aligns top-left).
    const TensorOptions i64{.dtype = DType::i64, .device = q.device()};
    options.mask =
        le(arange(static_cast<double>(n), i64).unsqueeze(0),
           arange(static_cast<double>(length_), static_cast<double>(n), 1.0, i64).unsqueeze(1));
  }
  pending_[l] = t;
  return scaled_dot_product_attention(q, k_[l].narrow(2, 0, n), v_[l].narrow(2, 0, n), options);
}

void KVCache::advance(int64_t t) {
  for (size_t l = 0; l < pending_.size(); ++l) {
    SINTER_CHECK(pending_[l] == t && t > 0, "KVCache: advance(", t, ") but layer ", l,
                 " attended to ", pending_[l], " new positions");
  }
  length_ += t;
  std::fill(pending_.begin(), pending_.end(), 0);
}

void KVCache::reset() {
  length_ = 0;
  std::fill(pending_.begin(), pending_.end(), 0);
}

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
  const Tensor projected = qkv->forward(x);
  const double dropout = is_training() ? options.dropout : 0.0;
  if (!mask.defined() && dropout == 0.0) {  // the CPU's tiles on the heads where they lie
    const Tensor y = packed_self_attention(projected, num_heads, options.causal);
    if (y.defined()) return out_proj->forward(y);
  }
  // (B, T, 3E) -> (3, B, H, T, head): q, k and v, each split into heads.
  const std::vector<Tensor> heads =
      unbind(projected.view({b, t, 3, num_heads, head}).permute({2, 0, 3, 1, 4}));
  const Tensor y = scaled_dot_product_attention(
      heads[0], heads[1], heads[2], {.causal = options.causal, .dropout_p = dropout, .mask = mask});
  // (B, H, T, head) -> (B, T, E), heads side by side.
  return out_proj->forward(y.transpose(1, 2).reshape({b, t, embed_dim}));
}

Tensor MultiheadAttention::forward(const Tensor& x, KVCache& cache, int64_t layer) {
  check_sequence("MultiheadAttention", x, embed_dim);
  SINTER_CHECK(options.causal, "MultiheadAttention: a KV cache needs causal attention");
  const int64_t b = x.size(0), t = x.size(1), head = embed_dim / num_heads;
  const std::vector<Tensor> heads =
      unbind(qkv->forward(x).view({b, t, 3, num_heads, head}).permute({2, 0, 3, 1, 4}));
  const Tensor y = cache.attend(layer, heads[0], heads[1], heads[2]);
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

namespace {

// fc's output with the MLP's activation: in fc's GEMM epilogue, or after fc's forward where that
// runs in FP8 (fp8::prepare took it; Note [fp8 training]).
Tensor mlp_hidden(Linear& fc, const Tensor& x, Activation act) {
  if (!fc.fp8 || !fp8::is_enabled()) return linear(x, fc.weight, fc.bias, act);
  const Tensor h = fc.forward(x);
  if (act == Activation::None) return h;
  return act == Activation::Relu ? relu(h) : gelu(h, act);
}

}  // namespace

Tensor TransformerBlock::forward(const Tensor& x) {
  check_sequence("TransformerBlock", x, embed_dim);
  const bool training = is_training();
  const Tensor h = x + dropout(attn->forward(ln1->forward(x)), options.dropout, training);
  const Tensor mlp = proj->forward(mlp_hidden(*fc, ln2->forward(h), options.activation));
  return h + dropout(mlp, options.dropout, training);
}

Tensor TransformerBlock::forward(const Tensor& x, KVCache& cache, int64_t layer) {
  check_sequence("TransformerBlock", x, embed_dim);
  const Tensor h = x + attn->forward(ln1->forward(x), cache, layer);
  return h + proj->forward(mlp_hidden(*fc, ln2->forward(h), options.activation));
}

}  // namespace sinter::nn

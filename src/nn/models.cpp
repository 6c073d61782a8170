// The reference models (see sinter/nn/models.h).
#include "sinter/nn/models.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

#include "sinter/autograd.h"
#include "sinter/core/noncopyable.h"
#include "sinter/nn/init.h"

namespace sinter::nn::models {

Sequential mlp() {
  return Sequential(Flatten(), Linear(784, 1024), ReLU(), Linear(1024, 1024), ReLU(),
                    Linear(1024, 10));
}

Sequential cnn() {
  return Sequential(Conv2d(1, 32, 3, {.padding = 1}), ReLU(), MaxPool2d(2),
                    Conv2d(32, 64, 3, {.padding = 1}), ReLU(), MaxPool2d(2), Flatten(),
                    Linear(3136, 128), ReLU(), Linear(128, 10));
}

// --- BasicBlock ---

BasicBlock::BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, bool fused)
    : in_planes(in_planes), planes(planes), stride(stride), fused(fused) {
  SINTER_CHECK(in_planes > 0 && planes > 0,
               "BasicBlock: in_planes and planes must be positive, got ", in_planes, " and ",
               planes);
  SINTER_CHECK(stride > 0, "BasicBlock: stride must be positive, got ", stride);
}

std::shared_ptr<BasicBlock> BasicBlock::folded(int64_t in_planes, int64_t planes, int64_t stride,
                                               std::shared_ptr<Conv2d> conv1,
                                               std::shared_ptr<Conv2d> conv2,
                                               std::shared_ptr<Sequential> shortcut) {
  SINTER_CHECK(conv1 && conv2, "BasicBlock::folded: conv1 and conv2 must be given");
  SINTER_CHECK(conv1->in_channels == in_planes && conv1->out_channels == planes &&
                   conv2->in_channels == planes && conv2->out_channels == planes,
               "BasicBlock::folded: convolutions ", conv1->in_channels, "->", conv1->out_channels,
               " and ", conv2->in_channels, "->", conv2->out_channels, " do not fit a block of ",
               in_planes, "->", planes);
  SINTER_CHECK(shortcut || (stride == 1 && in_planes == planes),
               "BasicBlock::folded: a block of stride ", stride, " from ", in_planes, " to ",
               planes, " planes needs a shortcut");
  std::shared_ptr<BasicBlock> b(new BasicBlock(in_planes, planes, stride, true));
  b->conv1 = b->register_module("conv1", std::move(conv1));
  b->conv2 = b->register_module("conv2", std::move(conv2));
  if (shortcut) b->shortcut = b->register_module("shortcut", std::move(shortcut));
  return b;
}

BasicBlock::BasicBlock(int64_t in_planes, int64_t planes, int64_t stride)
    : BasicBlock(in_planes, planes, stride, false) {
  conv1 = register_module(
      "conv1", Conv2d(in_planes, planes, 3, {.stride = stride, .padding = 1, .bias = false}));
  bn1 = register_module("bn1", BatchNorm2d(planes));
  conv2 = register_module("conv2", Conv2d(planes, planes, 3, {.padding = 1, .bias = false}));
  bn2 = register_module("bn2", BatchNorm2d(planes));
  if (stride != 1 || in_planes != planes) {
    shortcut = register_module(
        "shortcut", Sequential(Conv2d(in_planes, planes, 1, {.stride = stride, .bias = false}),
                               BatchNorm2d(planes)));
  }
}

Tensor BasicBlock::forward(const Tensor& x) {
  SINTER_CHECK(x.defined(), "BasicBlock: undefined input");
  SINTER_CHECK(x.dim() == 4 && x.size(1) == in_planes, "BasicBlock: expected input of shape (N, ",
               in_planes, ", H, W), got shape ", shape_str(x.shape()));
  Tensor y;
  if (fused) {
    y = conv2->forward(conv1->forward(x));  // conv1 applies the ReLU
  } else {
    y = relu(bn1->forward(conv1->forward(x)));
    y = bn2->forward(conv2->forward(y));
  }
  return relu(y + (shortcut ? shortcut->forward(x) : x));
}

// --- ResNet-20 ---

Sequential resnet20(int64_t in_channels) {
  SINTER_CHECK(in_channels > 0, "resnet20: in_channels must be positive, got ", in_channels);
  Sequential model(Conv2d(in_channels, 16, 3, {.padding = 1, .bias = false}), BatchNorm2d(16),
                   ReLU());
  int64_t in_planes = 16;
  for (const int64_t planes : {16, 32, 64}) {
    for (int block = 0; block < 3; ++block) {
      // Stages 2 and 3 halve the feature map in their first block.
      const int64_t stride = (block == 0 && planes != 16) ? 2 : 1;
      model.push_back(BasicBlock(in_planes, planes, stride));
      in_planes = planes;
    }
  }
  model.push_back(AdaptiveAvgPool2d(1));
  model.push_back(Flatten());
  model.push_back(Linear(64, 10));
  return model;
}

GPTConfig gpt_mini() {
  return {.vocab_size = 256,
          .context_length = 256,
          .n_layer = 6,
          .n_head = 6,
          .n_embd = 384,
          .dropout = 0.0,
          .bias = true,
          .tie_weights = false};
}

GPT::GPT(const GPTConfig& c) : config(c) {
  SINTER_CHECK(
      c.vocab_size > 0 && c.context_length > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_embd > 0,
      "GPT: vocab_size, context_length, n_layer, n_head and n_embd must be positive, got ",
      c.vocab_size, ", ", c.context_length, ", ", c.n_layer, ", ", c.n_head, ", ", c.n_embd);
  SINTER_CHECK(c.n_embd % c.n_head == 0, "GPT: n_embd ", c.n_embd, " is not divisible by n_head ",
               c.n_head);
  SINTER_CHECK(c.dropout >= 0.0 && c.dropout < 1.0, "GPT: dropout must be in [0, 1), got ",
               c.dropout);
  wte = register_module("wte", Embedding(c.vocab_size, c.n_embd));
  wpe = register_module("wpe", Embedding(c.context_length, c.n_embd));
  blocks = register_module("blocks", ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    blocks->push_back(TransformerBlock(c.n_embd, c.n_head,
                                       {.dropout = c.dropout,
                                        .bias = c.bias,
                                        .causal = true,
                                        .activation = Activation::GeluTanh}));
  }
  ln_f = register_module("ln_f", LayerNorm({c.n_embd}));
  if (!c.tie_weights) lm_head = register_module("lm_head", Linear(c.n_embd, c.vocab_size, false));
  reset_parameters();
}

void GPT::reset_parameters() {
  NoGradGuard no_grad;
  using init::normal_, init::zeros_;
  const double weight_std = 0.02;
  const double residual_std = weight_std / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  const auto init_linear = [](Linear& l, double s) {
    normal_(l.weight, 0.0, s);
    if (l.bias.defined()) zeros_(l.bias);
  };
  normal_(wte->weight, 0.0, weight_std);
  normal_(wpe->weight, 0.0, weight_std);
  for (const std::shared_ptr<Module>& m : *blocks) {
    auto& block = static_cast<TransformerBlock&>(*m);
    block.ln1->reset_parameters();
    block.ln2->reset_parameters();
    init_linear(*block.attn->qkv, weight_std);
    init_linear(*block.attn->out_proj, residual_std);
    init_linear(*block.fc, weight_std);
    init_linear(*block.proj, residual_std);
  }
  ln_f->reset_parameters();
  if (lm_head) init_linear(*lm_head, weight_std);
}

namespace {

// The positions of token ids idx (B, t) fed after `past` positions: past..past+t-1 (i64, on idx's
// device), checked against the model's context length.
Tensor token_positions(const char* model, const Tensor& idx, int64_t past, int64_t context) {
  SINTER_CHECK(idx.defined() && idx.dtype() == DType::i64 && idx.dim() == 2, model,
               ": expected i64 token ids of shape (B, T), got ",
               idx.defined() ? shape_str(idx.shape()) : "an undefined tensor");
  const int64_t t = idx.size(1);
  if (past == 0) {
    SINTER_CHECK(t >= 1 && t <= context, model, ": sequence length ", t,
                 " is outside 1 to the context length ", context);
  } else {
    SINTER_CHECK(t >= 1 && past + t <= context, model, ": ", t, " tokens after the ", past,
                 " in the KV cache exceed the context length ", context);
  }
  return arange(static_cast<double>(past), static_cast<double>(past + t), 1.0,
                {.dtype = DType::i64, .device = idx.device()});
}

void check_cache(const char* model, const KVCache& cache, int64_t n_layer) {
  SINTER_CHECK(cache.n_layer() == n_layer, model, ": a KV cache of ", cache.n_layer(),
               " layers for a model of ", n_layer);
}

}  // namespace

Tensor GPT::forward(const Tensor& idx) {
  const Tensor pos = token_positions("GPT", idx, 0, config.context_length);
  Tensor x = dropout(wte->forward(idx) + wpe->forward(pos), config.dropout, is_training());
  const bool recompute = config.checkpoint_blocks && is_training() && GradMode::is_enabled();
  for (const std::shared_ptr<Module>& block : *blocks) {
    // The checkpoint inside call(): forward hooks run once, around the whole recomputed block.
    x = block->call([&] {
      if (recompute && x.requires_grad()) {
        return autograd::checkpoint([block](const Tensor& t) { return block->forward(t); }, x);
      }
      return block->forward(x);
    });
  }
  x = ln_f->forward(x);
  return lm_head ? lm_head->forward(x) : linear(x, wte->weight);
}

Tensor GPT::forward(const Tensor& idx, KVCache& cache) {
  check_cache("GPT", cache, config.n_layer);
  const Tensor pos = token_positions("GPT", idx, cache.length(), config.context_length);
  NoGradGuard no_grad;
  Tensor x = wte->forward(idx) + wpe->forward(pos);
  int64_t layer = 0;
  for (const std::shared_ptr<Module>& block : *blocks) {
    x = static_cast<TransformerBlock&>(*block).forward(x, cache, layer++);
  }
  cache.advance(idx.size(1));
  x = ln_f->forward(x);
  return lm_head ? lm_head->forward(x) : linear(x, wte->weight);
}

namespace {

// Restores a module's training mode at the end of a scope.
class TrainingModeGuard : NonCopyable {
 public:
  explicit TrainingModeGuard(Module& m) : m_(m), was_training_(m.is_training()) {}
  ~TrainingModeGuard() { m_.train(was_training_); }

 private:
  Module& m_;
  bool was_training_;
};

// The generation loop of GPT::generate and Llama::generate: `forward(idx)` and `forward(idx,
// cache)` give a model's logits.
template <class Model>
Tensor generate_tokens(const char* who, Model& model, int64_t n_layer, int64_t context,
                       int64_t vocab, const Tensor& prompt, int64_t n, const GenerateOptions& o) {
  SINTER_CHECK(prompt.defined() && prompt.dtype() == DType::i64 &&
                   (prompt.dim() == 1 || prompt.dim() == 2) && prompt.numel() > 0,
               who, ": expected a non-empty i64 prompt of shape (T) or (B, T), got ",
               prompt.defined() ? shape_str(prompt.shape()) : "an undefined tensor");
  SINTER_CHECK(n >= 0, who, ": n must be non-negative, got ", n);
  SINTER_CHECK(o.temperature > 0.0 && std::isfinite(o.temperature), who,
               ": temperature must be positive and finite, got ", o.temperature);
  SINTER_CHECK(o.top_k >= 0, who, ": top_k must be non-negative, got ", o.top_k);
  NoGradGuard no_grad;
  TrainingModeGuard mode(model);
  model.eval();
  std::optional<KVCache> cache;
  if (o.use_cache) cache.emplace(n_layer, context);
  Tensor seq = prompt.dim() == 1 ? prompt.unsqueeze(0) : prompt;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = seq.size(1), fed = std::min(t, context);
    Tensor logits;  // (B, vocab) of the last position
    if (!cache) {
      logits = model.forward(seq.narrow(1, t - fed, fed)).select(1, fed - 1);
    } else if (cache->length() == 0 || cache->length() == context) {
      // The first window, or one that slid: every position is new.
      cache->reset();
      logits = model.forward(seq.narrow(1, t - fed, fed), *cache).select(1, fed - 1);
    } else {
      logits = model.forward(seq.narrow(1, t - 1, 1), *cache).select(1, 0);
    }
    // In f32 or wider, over the temperature.
    if (logits.dtype() != DType::f64) logits = logits.to(DType::f32);
    logits = logits * (1.0 / o.temperature);
    if (o.top_k > 0 && o.top_k < vocab) {
      const Tensor kth = std::get<0>(topk(logits, o.top_k, 1)).narrow(1, o.top_k - 1, 1);
      logits = masked_fill(logits, lt(logits, kth), -INFINITY);
    }
    seq = cat({seq, multinomial(softmax(logits, 1), 1, false, o.generator)}, 1);
  }
  return prompt.dim() == 1 ? seq.squeeze(0) : seq;
}

}  // namespace

Tensor GPT::generate(const Tensor& prompt, int64_t n, const GenerateOptions& o) {
  return generate_tokens("GPT::generate", *this, config.n_layer, config.context_length,
                         config.vocab_size, prompt, n, o);
}

// --- Llama ---

LlamaConfig llama_mini() {
  return {.vocab_size = 256,
          .context_length = 256,
          .n_layer = 6,
          .n_head = 6,
          .n_kv_head = 2,
          .n_embd = 384,
          .mlp_hidden = 1024,
          .tie_weights = false};
}

LlamaAttention::LlamaAttention(int64_t n_embd, int64_t n_head, int64_t n_kv_head, double rope_base)
    : n_embd(n_embd), n_head(n_head), n_kv_head(n_kv_head), rope_base(rope_base) {
  SINTER_CHECK(n_embd > 0 && n_head > 0 && n_kv_head > 0,
               "LlamaAttention: n_embd, n_head and n_kv_head must be positive, got ", n_embd, ", ",
               n_head, ", ", n_kv_head);
  SINTER_CHECK(n_embd % n_head == 0, "LlamaAttention: n_embd ", n_embd,
               " is not divisible by n_head ", n_head);
  SINTER_CHECK(n_head % n_kv_head == 0, "LlamaAttention: n_kv_head ", n_kv_head,
               " does not divide n_head ", n_head);
  head_dim = n_embd / n_head;
  SINTER_CHECK(head_dim % 2 == 0, "LlamaAttention: the head size ", head_dim,
               " (n_embd / n_head) must be even for the rotary embedding");
  q_proj = register_module("q_proj", Linear(n_embd, n_embd, false));
  k_proj = register_module("k_proj", Linear(n_embd, n_kv_head * head_dim, false));
  v_proj = register_module("v_proj", Linear(n_embd, n_kv_head * head_dim, false));
  o_proj = register_module("o_proj", Linear(n_embd, n_embd, false));
}

namespace {

// The positions 0..T-1 of a module's input x (B, T, E), on x's device.
Tensor positions_of(const char* module, const Tensor& x) {
  SINTER_CHECK(x.defined() && x.dim() == 3, module, ": expected (B, T, E), got ",
               x.defined() ? shape_str(x.shape()) : "an undefined tensor");
  return arange(static_cast<double>(x.size(1)), {.dtype = DType::i64, .device = x.device()});
}

}  // namespace

Tensor LlamaAttention::forward(const Tensor& x) {
  return forward(x, positions_of("LlamaAttention", x));
}

namespace {

// LlamaAttention's forward at `positions`, through `cache` as its layer `layer` when not null.
Tensor llama_attention(LlamaAttention& m, const Tensor& x, const Tensor& positions, KVCache* cache,
                       int64_t layer) {
  SINTER_CHECK(x.defined() && x.dim() == 3 && x.size(2) == m.n_embd,
               "LlamaAttention: expected (B, T, ", m.n_embd, "), got ",
               x.defined() ? shape_str(x.shape()) : "an undefined tensor");
  const int64_t b = x.size(0), t = x.size(1);
  // (B, T, heads * D) -> (B, heads, T, D)
  const auto heads = [&](const Tensor& y, int64_t h) {
    return y.reshape({b, t, h, m.head_dim}).transpose(1, 2);
  };
  const Tensor q = rope(heads(m.q_proj->forward(x), m.n_head), positions, m.rope_base);
  const Tensor k = rope(heads(m.k_proj->forward(x), m.n_kv_head), positions, m.rope_base);
  const Tensor v = heads(m.v_proj->forward(x), m.n_kv_head);
  const Tensor a =
      cache ? cache->attend(layer, q, k, v)
            : scaled_dot_product_attention(q, k, v, {.causal = true, .enable_gqa = true});
  return m.o_proj->forward(a.transpose(1, 2).reshape({b, t, m.n_embd}));
}

}  // namespace

Tensor LlamaAttention::forward(const Tensor& x, const Tensor& positions) {
  return llama_attention(*this, x, positions, nullptr, 0);
}

Tensor LlamaAttention::forward(const Tensor& x, const Tensor& positions, KVCache& cache,
                               int64_t layer) {
  return llama_attention(*this, x, positions, &cache, layer);
}

LlamaMLP::LlamaMLP(int64_t n_embd, int64_t hidden) {
  SINTER_CHECK(n_embd > 0 && hidden > 0, "LlamaMLP: n_embd and hidden must be positive, got ",
               n_embd, " and ", hidden);
  gate_proj = register_module("gate_proj", Linear(n_embd, hidden, false));
  up_proj = register_module("up_proj", Linear(n_embd, hidden, false));
  down_proj = register_module("down_proj", Linear(hidden, n_embd, false));
}

Tensor LlamaMLP::forward(const Tensor& x) {
  return down_proj->forward(swiglu(gate_proj->forward(x), up_proj->forward(x)));
}

namespace {}  // namespace

int64_t mlp_width(const LlamaConfig& c) {
  if (c.mlp_hidden > 0) return c.mlp_hidden;
  const int64_t w = (8 * c.n_embd + 2) / 3;
  return (w + 31) / 32 * 32;
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& c) {
  self_attn =
      register_module("self_attn", LlamaAttention(c.n_embd, c.n_head, c.n_kv_head, c.rope_base));
  mlp = register_module("mlp", LlamaMLP(c.n_embd, mlp_width(c)));
  input_layernorm = register_module("input_layernorm", RMSNorm({c.n_embd}, c.norm_eps));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RMSNorm({c.n_embd}, c.norm_eps));
}

Tensor LlamaDecoderLayer::forward(const Tensor& x) {
  return forward(x, positions_of("LlamaDecoderLayer", x));
}

Tensor LlamaDecoderLayer::forward(const Tensor& x, const Tensor& positions) {
  const Tensor h = x + self_attn->forward(input_layernorm->forward(x), positions);
  return h + mlp->forward(post_attention_layernorm->forward(h));
}

Tensor LlamaDecoderLayer::forward(const Tensor& x, const Tensor& positions, KVCache& cache,
                                  int64_t layer) {
  const Tensor h = x + self_attn->forward(input_layernorm->forward(x), positions, cache, layer);
  return h + mlp->forward(post_attention_layernorm->forward(h));
}

LlamaModel::LlamaModel(const LlamaConfig& c) : config(c) {
  SINTER_CHECK(c.vocab_size > 0 && c.context_length > 0 && c.n_layer > 0,
               "Llama: vocab_size, context_length and n_layer must be positive, got ", c.vocab_size,
               ", ", c.context_length, ", ", c.n_layer);
  SINTER_CHECK(c.mlp_hidden >= 0, "Llama: mlp_hidden must be 0 (the default) or positive, got ",
               c.mlp_hidden);
  SINTER_CHECK(std::isfinite(c.rope_base) && c.rope_base > 0,
               "Llama: rope_base must be positive and finite, got ", c.rope_base);
  embed_tokens = register_module("embed_tokens", Embedding(c.vocab_size, c.n_embd));
  layers = register_module("layers", ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) layers->push_back(LlamaDecoderLayer(c));
  norm = register_module("norm", RMSNorm({c.n_embd}, c.norm_eps));
}

Tensor LlamaModel::forward(const Tensor& idx) {
  const Tensor pos = token_positions("Llama", idx, 0, config.context_length);
  Tensor x = embed_tokens->forward(idx);
  const bool recompute = config.checkpoint_layers && is_training() && GradMode::is_enabled();
  for (const std::shared_ptr<Module>& layer : *layers) {
    auto decoder = std::static_pointer_cast<LlamaDecoderLayer>(layer);
    x = decoder->call([&] {
      if (recompute && x.requires_grad()) {
        return autograd::checkpoint(
            [decoder, pos](const Tensor& t) { return decoder->forward(t, pos); }, x);
      }
      return decoder->forward(x, pos);
    });
  }
  return norm->forward(x);
}

Tensor LlamaModel::forward(const Tensor& idx, KVCache& cache) {
  check_cache("Llama", cache, config.n_layer);
  const Tensor pos = token_positions("Llama", idx, cache.length(), config.context_length);
  NoGradGuard no_grad;
  Tensor x = embed_tokens->forward(idx);
  int64_t i = 0;
  for (const std::shared_ptr<Module>& layer : *layers) {
    x = static_cast<LlamaDecoderLayer&>(*layer).forward(x, pos, cache, i++);
  }
  cache.advance(idx.size(1));
  return norm->forward(x);
}

Llama::Llama(const LlamaConfig& c) : config(c) {
  model = register_module("model", LlamaModel(c));
  if (!c.tie_weights) lm_head = register_module("lm_head", Linear(c.n_embd, c.vocab_size, false));
  reset_parameters();
}

void Llama::reset_parameters() {
  NoGradGuard no_grad;
  const double std = 0.02;
  init::normal_(model->embed_tokens->weight, 0.0, std);
  for (const std::shared_ptr<Module>& m : *model->layers) {
    auto& layer = static_cast<LlamaDecoderLayer&>(*m);
    for (Linear* l :
         {layer.self_attn->q_proj.get(), layer.self_attn->k_proj.get(),
          layer.self_attn->v_proj.get(), layer.self_attn->o_proj.get(), layer.mlp->gate_proj.get(),
          layer.mlp->up_proj.get(), layer.mlp->down_proj.get()}) {
      init::normal_(l->weight, 0.0, std);
    }
    layer.input_layernorm->reset_parameters();
    layer.post_attention_layernorm->reset_parameters();
  }
  model->norm->reset_parameters();
  if (lm_head) init::normal_(lm_head->weight, 0.0, std);
}

Tensor Llama::forward(const Tensor& idx) {
  const Tensor x = model->forward(idx);
  return lm_head ? lm_head->forward(x) : linear(x, model->embed_tokens->weight);
}

Tensor Llama::forward(const Tensor& idx, KVCache& cache) {
  NoGradGuard no_grad;
  const Tensor x = model->forward(idx, cache);
  return lm_head ? lm_head->forward(x) : linear(x, model->embed_tokens->weight);
}

Tensor Llama::generate(const Tensor& prompt, int64_t n, const GenerateOptions& o) {
  return generate_tokens("Llama::generate", *this, config.n_layer, config.context_length,
                         config.vocab_size, prompt, n, o);
}

}  // namespace sinter::nn::models

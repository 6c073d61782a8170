// Llama split over a tensor-parallel group (Note [tensor parallel llama] in
// include/sinter/tensor_parallel.h): its layers, the model, and the loading of a whole Llama.
#include <utility>

#include "dist/tensor_parallel_impl.h"
#include "sinter/core/error.h"
#include "sinter/fp8.h"
#include "sinter/nn/init.h"
#include "sinter/ops.h"
#include "sinter/tensor_parallel.h"

namespace sinter::dist::tp {

namespace {

// An RMS norm of x; on a slice of the sequence its weight enters through copy() (Note [sequence
// parallel]).
Tensor norm(nn::RMSNorm& n, const Tensor& x, const std::shared_ptr<ProcessGroup>& group,
            bool sequence_parallel) {
  if (!sequence_parallel) return n.forward(x);
  return rms_norm(x, n.normalized_shape, copy(n.weight, group), n.eps);
}

std::shared_ptr<ColumnParallelLinear> column(int64_t in, int64_t out,
                                             const std::shared_ptr<ProcessGroup>& group,
                                             bool sequence_parallel) {
  return std::make_shared<ColumnParallelLinear>(
      in, out, group, ColumnParallelOptions{.bias = false, .sequence_parallel = sequence_parallel});
}

std::shared_ptr<RowParallelLinear> row(int64_t in, int64_t out,
                                       const std::shared_ptr<ProcessGroup>& group,
                                       bool sequence_parallel) {
  return std::make_shared<RowParallelLinear>(
      in, out, group, RowParallelOptions{.bias = false, .sequence_parallel = sequence_parallel});
}

// The configs of a whole Llama and of this split one agree (`what`: the method, for the message).
void check_same_config(const char* what, const nn::models::LlamaConfig& w,
                       const nn::models::LlamaConfig& c) {
  SINTER_CHECK(w.vocab_size == c.vocab_size && w.context_length == c.context_length &&
                   w.n_layer == c.n_layer && w.n_head == c.n_head && w.n_kv_head == c.n_kv_head &&
                   w.n_embd == c.n_embd && nn::models::mlp_width(w) == nn::models::mlp_width(c) &&
                   w.tie_weights == c.tie_weights,
               "ParallelLlama::", what, ": the whole Llama's config differs from this one's");
}

}  // namespace

ParallelLlamaLayer::ParallelLlamaLayer(const nn::models::LlamaConfig& c,
                                       std::shared_ptr<ProcessGroup> group, bool sequence_parallel)
    : config(c), group(std::move(group)), sequence_parallel(sequence_parallel) {
  const int64_t head_dim = c.n_embd / c.n_head, hidden = nn::models::mlp_width(c);
  const auto& g = this->group;
  input_layernorm = register_module("input_layernorm", nn::RMSNorm({c.n_embd}, c.norm_eps));
  q_proj = register_module("q_proj", column(c.n_embd, c.n_head * head_dim, g, sequence_parallel));
  k_proj =
      register_module("k_proj", column(c.n_embd, c.n_kv_head * head_dim, g, sequence_parallel));
  v_proj =
      register_module("v_proj", column(c.n_embd, c.n_kv_head * head_dim, g, sequence_parallel));
  o_proj = register_module("o_proj", row(c.n_head * head_dim, c.n_embd, g, sequence_parallel));
  post_attention_layernorm =
      register_module("post_attention_layernorm", nn::RMSNorm({c.n_embd}, c.norm_eps));
  gate_proj = register_module("gate_proj", column(c.n_embd, hidden, g, sequence_parallel));
  up_proj = register_module("up_proj", column(c.n_embd, hidden, g, sequence_parallel));
  down_proj = register_module("down_proj", row(hidden, c.n_embd, g, sequence_parallel));
}

Tensor ParallelLlamaLayer::forward(const Tensor& x, const Tensor& positions) {
  const int64_t ranks = group->size(), head_dim = config.n_embd / config.n_head;
  const Tensor a = norm(*input_layernorm, x, group, sequence_parallel);
  const Tensor q_all = q_proj->forward(a);  // (B, T, H / N * D), the whole sequence
  const int64_t b = q_all.size(0), t = q_all.size(1);
  // (B, T, heads * D) -> (B, heads, T, D): this rank's query and K/V heads.
  const auto heads = [&](const Tensor& y, int64_t h) {
    return y.reshape({b, t, h, head_dim}).transpose(1, 2);
  };
  const Tensor q = rope(heads(q_all, config.n_head / ranks), positions, config.rope_base);
  const Tensor k =
      rope(heads(k_proj->forward(a), config.n_kv_head / ranks), positions, config.rope_base);
  const Tensor v = heads(v_proj->forward(a), config.n_kv_head / ranks);
  const Tensor attended =
      scaled_dot_product_attention(q, k, v, {.causal = true, .enable_gqa = true});
  const Tensor h =
      x + o_proj->forward(attended.transpose(1, 2).reshape({b, t, config.n_embd / ranks}));
  const Tensor m = norm(*post_attention_layernorm, h, group, sequence_parallel);
  return h + down_proj->forward(swiglu(gate_proj->forward(m), up_proj->forward(m)));
}

void ParallelLlamaLayer::load_full(const nn::models::LlamaDecoderLayer& whole) {
  detail::assign(input_layernorm->weight, whole.input_layernorm->weight);
  detail::assign(post_attention_layernorm->weight, whole.post_attention_layernorm->weight);
  const auto& attn = *whole.self_attn;
  q_proj->load_full(attn.q_proj->weight.detach(), Tensor());
  k_proj->load_full(attn.k_proj->weight.detach(), Tensor());
  v_proj->load_full(attn.v_proj->weight.detach(), Tensor());
  o_proj->load_full(attn.o_proj->weight.detach(), Tensor());
  gate_proj->load_full(whole.mlp->gate_proj->weight.detach(), Tensor());
  up_proj->load_full(whole.mlp->up_proj->weight.detach(), Tensor());
  down_proj->load_full(whole.mlp->down_proj->weight.detach(), Tensor());
}

ParallelLlama::ParallelLlama(const nn::models::LlamaConfig& c, std::shared_ptr<ProcessGroup> group,
                             bool sequence_parallel)
    : config(c), group(std::move(group)), sequence_parallel(sequence_parallel) {
  SINTER_CHECK(this->group != nullptr, "ParallelLlama: no process group");
  const int ranks = this->group->size();
  SINTER_CHECK(c.vocab_size > 0 && c.context_length > 0 && c.n_layer > 0 && c.n_head > 0 &&
                   c.n_kv_head > 0 && c.n_embd > 0 && c.n_embd % c.n_head == 0 &&
                   c.n_head % c.n_kv_head == 0,
               "ParallelLlama: vocab_size ", c.vocab_size, ", context_length ", c.context_length,
               ", n_layer ", c.n_layer, ", n_head ", c.n_head, ", n_kv_head ", c.n_kv_head,
               ", n_embd ", c.n_embd,
               ": all positive, n_embd divisible by n_head and n_head by n_kv_head");
  const int64_t hidden = nn::models::mlp_width(c);
  SINTER_CHECK(c.n_head % ranks == 0 && c.n_kv_head % ranks == 0 && hidden % ranks == 0 &&
                   c.vocab_size % ranks == 0,
               "ParallelLlama: n_head ", c.n_head, ", n_kv_head ", c.n_kv_head, ", MLP width ",
               hidden, " and vocab_size ", c.vocab_size, " must be divisible by the group's ",
               ranks, " ranks");
  SINTER_CHECK(!c.checkpoint_layers, "ParallelLlama: checkpoint_layers is not supported yet");
  embed_tokens =
      register_module("embed_tokens", std::make_shared<VocabParallelEmbedding>(
                                          c.vocab_size, c.n_embd, this->group, sequence_parallel));
  layers = register_module("layers", nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    layers->push_back(std::make_shared<ParallelLlamaLayer>(c, this->group, sequence_parallel));
  }
  norm = register_module("norm", nn::RMSNorm({c.n_embd}, c.norm_eps));
  if (!c.tie_weights) {
    lm_head =
        register_module("lm_head", column(c.n_embd, c.vocab_size, this->group, sequence_parallel));
  }
  reset_parameters();
}

void ParallelLlama::reset_parameters() {
  NoGradGuard no_grad;
  const auto normal = [](Tensor& t) { nn::init::normal_(t, 0.0, 0.02); };
  detail::init_part(embed_tokens->weight, 0, *group, normal);
  for (const std::shared_ptr<nn::Module>& m : *layers) {
    auto& layer = static_cast<ParallelLlamaLayer&>(*m);
    for (ColumnParallelLinear* l : {layer.q_proj.get(), layer.k_proj.get(), layer.v_proj.get(),
                                    layer.gate_proj.get(), layer.up_proj.get()}) {
      detail::init_part(l->weight, 0, *group, normal);
    }
    detail::init_part(layer.o_proj->weight, 1, *group, normal);
    detail::init_part(layer.down_proj->weight, 1, *group, normal);
    layer.input_layernorm->reset_parameters();
    layer.post_attention_layernorm->reset_parameters();
  }
  norm->reset_parameters();
  if (lm_head) detail::init_part(lm_head->weight, 0, *group, normal);
}

Tensor ParallelLlama::forward(const Tensor& idx) {
  SINTER_CHECK(idx.defined() && idx.dtype() == DType::i64 && idx.dim() == 2 && idx.size(1) >= 1 &&
                   idx.size(1) <= config.context_length,
               "ParallelLlama: expected i64 token ids (B, T) with T in 1 to ",
               config.context_length, ", got ",
               idx.defined() ? shape_str(idx.shape()) : std::string("undefined"));
  const int64_t t = idx.size(1), ranks = group->size();
  SINTER_CHECK(!sequence_parallel || t % ranks == 0,
               "ParallelLlama: sequence parallelism needs a sequence length divisible by the "
               "group's ",
               ranks, " ranks, got ", t);
  const Tensor pos = arange(t, {.dtype = DType::i64, .device = idx.device()});
  Tensor x = embed_tokens->forward(idx);
  for (const std::shared_ptr<nn::Module>& layer : *layers) {
    x = layer->call([&] { return static_cast<ParallelLlamaLayer&>(*layer).forward(x, pos); });
  }
  x = tp::norm(*norm, x, group, sequence_parallel);
  if (lm_head) return lm_head->forward(x);
  return sequence_parallel ? sequence_linear(x, embed_tokens->weight, Tensor(), group)
                           : linear(copy(x, group), embed_tokens->weight);
}

Tensor ParallelLlama::loss(const Tensor& idx, const Tensor& targets,
                           const CrossEntropyOptions& options) {
  return detail::language_model_loss("ParallelLlama", forward(idx), idx, targets, group, options);
}

void ParallelLlama::load_full(const nn::models::Llama& whole) {
  check_same_config("load_full", whole.config, config);
  embed_tokens->load_full(whole.model->embed_tokens->weight.detach());
  for (size_t i = 0; i < layers->size(); ++i) {
    static_cast<ParallelLlamaLayer&>(*(*layers)[i])
        .load_full(static_cast<const nn::models::LlamaDecoderLayer&>(*(*whole.model->layers)[i]));
  }
  detail::assign(norm->weight, whole.model->norm->weight);
  if (lm_head) lm_head->load_full(whole.lm_head->weight.detach(), Tensor());
  fp8::copy_state(whole, *this);
}

void ParallelLlamaLayer::to_full(nn::models::LlamaDecoderLayer& whole) const {
  detail::assign(whole.input_layernorm->weight, input_layernorm->weight);
  detail::assign(whole.post_attention_layernorm->weight, post_attention_layernorm->weight);
  auto& attn = *whole.self_attn;
  detail::assign(attn.q_proj->weight, q_proj->full().first);
  detail::assign(attn.k_proj->weight, k_proj->full().first);
  detail::assign(attn.v_proj->weight, v_proj->full().first);
  detail::assign(attn.o_proj->weight, o_proj->full().first);
  detail::assign(whole.mlp->gate_proj->weight, gate_proj->full().first);
  detail::assign(whole.mlp->up_proj->weight, up_proj->full().first);
  detail::assign(whole.mlp->down_proj->weight, down_proj->full().first);
}

void ParallelLlama::to_full(nn::models::Llama& whole) const {
  check_same_config("to_full", whole.config, config);
  detail::assign(whole.model->embed_tokens->weight, embed_tokens->full());
  for (size_t i = 0; i < layers->size(); ++i) {
    static_cast<const ParallelLlamaLayer&>(*(*layers)[i])
        .to_full(static_cast<nn::models::LlamaDecoderLayer&>(*(*whole.model->layers)[i]));
  }
  detail::assign(whole.model->norm->weight, norm->weight);
  if (lm_head) detail::assign(whole.lm_head->weight, lm_head->full().first);
  fp8::copy_state(*this, whole);
}

}  // namespace sinter::dist::tp

// GPT split over a tensor-parallel group (Note [tensor parallel gpt] in
// include/sinter/tensor_parallel.h): its blocks, the model, and the loading of a whole GPT.
#include <cmath>
#include <utility>

#include "dist/tensor_parallel_impl.h"
#include "sinter/core/error.h"
#include "sinter/fp8.h"
#include "sinter/nn/init.h"
#include "sinter/ops.h"
#include "sinter/tensor_parallel.h"

namespace sinter::dist::tp {

namespace {

void load_norm(nn::LayerNorm& to, const nn::LayerNorm& from) {
  detail::assign(to.weight, from.weight);
  detail::assign(to.bias, from.bias);
}

// A layer norm of x; on a slice of the sequence its parameters enter through copy(), so that their
// gradients are summed over the group (Note [sequence parallel]).
Tensor norm(nn::LayerNorm& ln, const Tensor& x, const std::shared_ptr<ProcessGroup>& group,
            bool sequence_parallel) {
  if (!sequence_parallel) return ln.forward(x);
  return layer_norm(x, ln.normalized_shape, copy(ln.weight, group), copy(ln.bias, group), ln.eps);
}

// The configs of a whole GPT and of this split one agree (`what`: the method, for the message).
void check_same_config(const char* what, const nn::models::GPTConfig& w,
                       const nn::models::GPTConfig& c) {
  SINTER_CHECK(w.vocab_size == c.vocab_size && w.context_length == c.context_length &&
                   w.n_layer == c.n_layer && w.n_head == c.n_head && w.n_embd == c.n_embd &&
                   w.bias == c.bias && w.tie_weights == c.tie_weights,
               "ParallelGPT::", what, ": the whole GPT's config differs from this one's");
}

}  // namespace

ParallelTransformerBlock::ParallelTransformerBlock(int64_t embed_dim, int64_t num_heads, bool bias,
                                                   std::shared_ptr<ProcessGroup> group,
                                                   bool sequence_parallel, double dropout)
    : group(std::move(group)), sequence_parallel(sequence_parallel), dropout(dropout) {
  SINTER_CHECK(dropout >= 0.0 && dropout < 1.0, "ParallelTransformerBlock: dropout ", dropout,
               " is not in [0, 1)");
  ln1 = register_module("ln1", nn::LayerNorm({embed_dim}));
  attn = register_module(
      "attn", std::make_shared<ParallelMultiheadAttention>(
                  embed_dim, num_heads, this->group,
                  nn::MultiheadAttentionOptions{.bias = bias, .dropout = dropout, .causal = true},
                  sequence_parallel));
  ln2 = register_module("ln2", nn::LayerNorm({embed_dim}));
  fc = register_module(
      "fc", std::make_shared<ColumnParallelLinear>(
                embed_dim, 4 * embed_dim, this->group,
                ColumnParallelOptions{.bias = bias, .sequence_parallel = sequence_parallel}));
  proj = register_module(
      "proj", std::make_shared<RowParallelLinear>(
                  4 * embed_dim, embed_dim, this->group,
                  RowParallelOptions{.bias = bias, .sequence_parallel = sequence_parallel}));
}

Tensor ParallelTransformerBlock::forward(const Tensor& x) {
  // The residual branches' dropout as TransformerBlock's, in its order (Note [tensor parallel
  // dropout]).
  const auto drop = [&](const Tensor& t) {
    return detail::region_dropout(t, dropout, is_training(), sequence_parallel, *group);
  };
  const Tensor h = x + drop(attn->forward(norm(*ln1, x, group, sequence_parallel)));
  const Tensor hidden = fc->forward(norm(*ln2, h, group, sequence_parallel));
  return h + drop(proj->forward(gelu(hidden, Activation::GeluTanh)));
}

void ParallelTransformerBlock::load_full(const nn::TransformerBlock& whole) {
  SINTER_CHECK(whole.options.activation == Activation::GeluTanh && whole.options.causal,
               "ParallelTransformerBlock::load_full: a GPT block (causal, tanh GELU) is expected");
  load_norm(*ln1, *whole.ln1);
  load_norm(*ln2, *whole.ln2);
  attn->load_full(*whole.attn);
  fc->load_full(whole.fc->weight.detach(),
                whole.fc->bias.defined() ? whole.fc->bias.detach() : Tensor());
  proj->load_full(whole.proj->weight.detach(),
                  whole.proj->bias.defined() ? whole.proj->bias.detach() : Tensor());
}

ParallelGPT::ParallelGPT(const nn::models::GPTConfig& c, std::shared_ptr<ProcessGroup> group,
                         bool sequence_parallel)
    : config(c), group(std::move(group)), sequence_parallel(sequence_parallel) {
  SINTER_CHECK(this->group != nullptr, "ParallelGPT: no process group");
  const int ranks = this->group->size();
  SINTER_CHECK(c.vocab_size > 0 && c.context_length > 0 && c.n_layer > 0 && c.n_head > 0 &&
                   c.n_embd > 0 && c.n_embd % c.n_head == 0,
               "ParallelGPT: vocab_size ", c.vocab_size, ", context_length ", c.context_length,
               ", n_layer ", c.n_layer, ", n_head ", c.n_head, ", n_embd ", c.n_embd,
               ": all positive, n_embd divisible by n_head");
  SINTER_CHECK(c.n_head % ranks == 0 && c.vocab_size % ranks == 0, "ParallelGPT: n_head ", c.n_head,
               " and vocab_size ", c.vocab_size, " must be divisible by the group's ", ranks,
               " ranks");
  SINTER_CHECK(c.dropout >= 0.0 && c.dropout < 1.0, "ParallelGPT: dropout ", c.dropout,
               " is not in [0, 1)");
  SINTER_CHECK(!c.checkpoint_blocks, "ParallelGPT: checkpoint_blocks is not supported yet");
  wte = register_module("wte", std::make_shared<VocabParallelEmbedding>(
                                   c.vocab_size, c.n_embd, this->group, sequence_parallel));
  wpe = register_module("wpe", nn::Embedding(c.context_length, c.n_embd));
  blocks = register_module("blocks", nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    blocks->push_back(std::make_shared<ParallelTransformerBlock>(
        c.n_embd, c.n_head, c.bias, this->group, sequence_parallel, c.dropout));
  }
  ln_f = register_module("ln_f", nn::LayerNorm({c.n_embd}));
  if (!c.tie_weights) {
    lm_head = register_module(
        "lm_head",
        std::make_shared<ColumnParallelLinear>(
            c.n_embd, c.vocab_size, this->group,
            ColumnParallelOptions{.bias = false, .sequence_parallel = sequence_parallel}));
  }
  reset_parameters();
}

void ParallelGPT::reset_parameters() {
  NoGradGuard no_grad;
  const double weight_std = 0.02;
  const double residual_std = weight_std / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  const auto normal = [](double std) {
    return [std](Tensor& t) { nn::init::normal_(t, 0.0, std); };
  };
  const auto zero_bias = [](const Tensor& b) {
    if (b.defined()) Tensor(b).zero_();
  };
  detail::init_part(wte->weight, 0, *group, normal(weight_std));
  nn::init::normal_(wpe->weight, 0.0, weight_std);
  for (const std::shared_ptr<nn::Module>& m : *blocks) {
    auto& block = static_cast<ParallelTransformerBlock&>(*m);
    block.ln1->reset_parameters();
    block.ln2->reset_parameters();
    detail::init_part(block.attn->qkv->weight, 0, *group, normal(weight_std));
    detail::init_part(block.attn->out_proj->weight, 1, *group, normal(residual_std));
    detail::init_part(block.fc->weight, 0, *group, normal(weight_std));
    detail::init_part(block.proj->weight, 1, *group, normal(residual_std));
    for (const Tensor& b :
         {block.attn->qkv->bias, block.attn->out_proj->bias, block.fc->bias, block.proj->bias}) {
      zero_bias(b);
    }
  }
  ln_f->reset_parameters();
  if (lm_head) detail::init_part(lm_head->weight, 0, *group, normal(weight_std));
}

Tensor ParallelGPT::forward(const Tensor& idx) {
  SINTER_CHECK(idx.defined() && idx.dtype() == DType::i64 && idx.dim() == 2 && idx.size(1) >= 1 &&
                   idx.size(1) <= config.context_length,
               "ParallelGPT: expected i64 token ids (B, T) with T in 1 to ", config.context_length,
               ", got ", idx.defined() ? shape_str(idx.shape()) : std::string("undefined"));
  const int64_t t = idx.size(1), ranks = group->size();
  Tensor pos = arange(t, {.dtype = DType::i64, .device = idx.device()});
  Tensor x;
  if (sequence_parallel) {
    SINTER_CHECK(t % ranks == 0, "ParallelGPT: sequence parallelism needs a sequence length ",
                 "divisible by the group's ", ranks, " ranks, got ", t);
    pos = pos.narrow(0, group->rank() * (t / ranks), t / ranks);
    x = wte->forward(idx) + embedding(copy(wpe->weight, group), pos);
  } else {
    x = wte->forward(idx) + wpe->forward(pos);
  }
  x = detail::region_dropout(x, config.dropout, is_training(), sequence_parallel, *group);
  for (const std::shared_ptr<nn::Module>& block : *blocks) x = (*block)(x);
  x = norm(*ln_f, x, group, sequence_parallel);
  if (lm_head) return lm_head->forward(x);
  return sequence_parallel ? sequence_linear(x, wte->weight, Tensor(), group)
                           : linear(copy(x, group), wte->weight);
}

Tensor ParallelGPT::loss(const Tensor& idx, const Tensor& targets,
                         const CrossEntropyOptions& options) {
  return detail::language_model_loss("ParallelGPT", forward(idx), idx, targets, group, options);
}

void ParallelGPT::load_full(const nn::models::GPT& whole) {
  check_same_config("load_full", whole.config, config);
  wte->load_full(whole.wte->weight.detach());
  detail::assign(wpe->weight, whole.wpe->weight);
  for (size_t i = 0; i < blocks->size(); ++i) {
    static_cast<ParallelTransformerBlock&>(*(*blocks)[i])
        .load_full(static_cast<const nn::TransformerBlock&>(*(*whole.blocks)[i]));
  }
  load_norm(*ln_f, *whole.ln_f);
  if (lm_head) lm_head->load_full(whole.lm_head->weight.detach(), Tensor());
  fp8::copy_state(whole, *this);
}

void ParallelTransformerBlock::to_full(nn::TransformerBlock& whole) const {
  for (auto [to, from] : {std::pair{&whole.ln1, &ln1}, std::pair{&whole.ln2, &ln2}}) {
    detail::assign((*to)->weight, (*from)->weight);
    detail::assign((*to)->bias, (*from)->bias);
  }
  attn->to_full(*whole.attn);
  const auto [fw, fb] = fc->full();
  detail::assign(whole.fc->weight, fw);
  if (fb.defined()) detail::assign(whole.fc->bias, fb);
  const auto [pw, pb] = proj->full();
  detail::assign(whole.proj->weight, pw);
  if (pb.defined()) detail::assign(whole.proj->bias, pb);
}

void ParallelGPT::to_full(nn::models::GPT& whole) const {
  check_same_config("to_full", whole.config, config);
  detail::assign(whole.wte->weight, wte->full());
  detail::assign(whole.wpe->weight, wpe->weight);
  for (size_t i = 0; i < blocks->size(); ++i) {
    static_cast<const ParallelTransformerBlock&>(*(*blocks)[i])
        .to_full(static_cast<nn::TransformerBlock&>(*(*whole.blocks)[i]));
  }
  detail::assign(whole.ln_f->weight, ln_f->weight);
  detail::assign(whole.ln_f->bias, ln_f->bias);
  if (lm_head) detail::assign(whole.lm_head->weight, lm_head->full().first);
  fp8::copy_state(*this, whole);
}

}  // namespace sinter::dist::tp

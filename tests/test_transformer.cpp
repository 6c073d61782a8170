// MultiheadAttention, TransformerBlock and the GPT model: the head split against a per-head
// formula, causality, masks, parameter counts and names, GPT-2 initialization, dropout modes, a
// tiny model learning a sequence, and the errors.
#include <algorithm>
#include <cmath>
#include <vector>

#include "sinter/nn/models.h"
#include "sinter/optim/adam.h"
#include "small_llama.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;

double std_of(const Tensor& t) {
  const std::vector<double> v = t.to_vector<double>();
  double m = 0, q = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) q += (x - m) * (x - m);
  return std::sqrt(q / static_cast<double>(v.size()));
}

// Outputs at positions [0, upto) of f(x) and of f(x with positions >= upto changed) agree.
template <class F>
void expect_causal(F f, const Tensor& x, int64_t upto) {
  Tensor changed = x.clone();
  {
    NoGradGuard ng;
    changed.narrow(1, upto, x.size(1) - upto)
        .copy_(randn(changed.narrow(1, upto, x.size(1) - upto).shape()).to(x.dtype()));
  }
  const Tensor a = f(x), b = f(changed);
  EXPECT_TRUE(all_close(a.narrow(1, 0, upto), b.narrow(1, 0, upto), 1e-6, 1e-6));
  EXPECT_FALSE(all_close(a.narrow(1, upto, 1), b.narrow(1, upto, 1), 1e-4, 1e-4));
}

TEST(MultiheadAttention, SplitsHeadsAsThePerHeadFormula) {
  manual_seed(4);
  const int64_t e = 6, h = 3, hd = 2, b = 2, t = 5;
  nn::MultiheadAttention mha(e, h, {.causal = true});
  const Tensor x = randn({b, t, e});
  std::vector<Tensor> heads;
  const Tensor w = mha.qkv->weight, bias = mha.qkv->bias;
  const Tensor future = triu(ones({t, t}), 1).to(DType::b8);
  for (int64_t i = 0; i < h; ++i) {
    const auto part = [&](int64_t which) {
      return linear(x, w.narrow(0, which * e + i * hd, hd), bias.narrow(0, which * e + i * hd, hd));
    };
    Tensor scores = matmul(part(0), part(1).transpose(1, 2)) * (1.0 / std::sqrt(2.0));
    heads.push_back(matmul(softmax(masked_fill(scores, future, -INFINITY), -1), part(2)));
  }
  const Tensor want = mha.out_proj->forward(cat(heads, 2));
  EXPECT_TRUE(all_close(mha.forward(x), want, 1e-5, 1e-5));
  EXPECT_EQ(mha.forward(x).shape(), (Shape{b, t, e}));
}

TEST(MultiheadAttention, CausalAndMaskedKeysHaveNoInfluence) {
  manual_seed(5);
  nn::MultiheadAttention causal(8, 2, {.causal = true});
  const Tensor x = randn({2, 6, 8});
  expect_causal([&](const Tensor& in) { return causal.forward(in); }, x, 3);

  // A padding mask (B, 1, 1, T): keys 4 and 5 are left out, so changing them changes nothing
  // at the other positions.
  nn::MultiheadAttention full(8, 2);
  const Tensor keep = from_vector<double>({1, 1, 1, 1, 0, 0}, {1, 1, 1, 6}).to(DType::b8);
  Tensor changed = x.clone();
  changed.narrow(1, 4, 2).copy_(randn({2, 2, 8}));
  // The queries at 4 and 5 change with x; those at 0..3 see the same keys.
  EXPECT_TRUE(all_close(full.forward(x, keep).narrow(1, 0, 4),
                        full.forward(changed, keep).narrow(1, 0, 4), 1e-6, 1e-6));
  EXPECT_FALSE(all_close(full.forward(x).narrow(1, 0, 4), full.forward(changed).narrow(1, 0, 4),
                         1e-4, 1e-4));
}

TEST(TransformerBlock, IsCausalResidualAndNamesItsParts) {
  manual_seed(6);
  nn::TransformerBlock block(16, 4, {.causal = true});
  const Tensor x = randn({3, 7, 16});
  expect_causal([&](const Tensor& in) { return block.forward(in); }, x, 4);
  std::vector<std::string> names;
  for (const auto& [name, p] : block.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"ln1.weight", "ln1.bias", "attn.qkv.weight",
                                             "attn.qkv.bias", "attn.out_proj.weight",
                                             "attn.out_proj.bias", "ln2.weight", "ln2.bias",
                                             "fc.weight", "fc.bias", "proj.weight", "proj.bias"}));
  EXPECT_EQ(block.fc->out_features, 64);
  // With the branches' output projections zeroed, the block is the identity.
  {
    NoGradGuard ng;
    block.attn->out_proj->weight.zero_();
    block.attn->out_proj->bias.zero_();
    block.proj->weight.zero_();
    block.proj->bias.zero_();
  }
  EXPECT_TRUE(all_close(block.forward(x), x, 0, 0));
}

// Not causal by default (as torch.nn.TransformerEncoderLayer and MultiheadAttention): a later
// position changes an earlier one's output. The MLP applies the activation it is given.
TEST(TransformerBlock, DefaultsToBidirectionalAndTakesItsActivation) {
  EXPECT_FALSE(nn::TransformerBlockOptions{}.causal);
  EXPECT_EQ(nn::TransformerBlockOptions{}.causal, nn::MultiheadAttentionOptions{}.causal);
  manual_seed(7);
  nn::TransformerBlock block(8, 2);
  EXPECT_FALSE(block.attn->options.causal);
  const Tensor x = randn({1, 5, 8});
  Tensor later = x.clone();
  {
    NoGradGuard ng;
    later.select(1, 4).add_(randn({8}));  // not a constant, which the LayerNorm would remove
  }
  const Tensor y = block.forward(x), y_later = block.forward(later);
  EXPECT_FALSE(all_close(y.select(1, 0), y_later.select(1, 0), 1e-4, 1e-4));
  // Each activation against the block's formula written out with the public ops.
  for (Activation act :
       {Activation::Relu, Activation::Gelu, Activation::GeluTanh, Activation::None}) {
    manual_seed(8);
    nn::TransformerBlock b(8, 2, {.activation = act});
    const Tensor h = x + b.attn->forward(b.ln1->forward(x));
    const Tensor pre = b.fc->forward(b.ln2->forward(h));
    const Tensor a = act == Activation::Relu   ? relu(pre)
                     : act == Activation::None ? pre
                                               : gelu(pre, act);
    EXPECT_TRUE(all_close(b.forward(x), h + b.proj->forward(a), 1e-5, 1e-5))
        << static_cast<int>(act);
  }
  expect_error([] { nn::TransformerBlock(8, 2, {.activation = static_cast<Activation>(9)}); },
               {"TransformerBlock", "activation", "9"});
}

int64_t count(const nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

TEST(GPT, ParametersNamesAndShapes) {
  const nn::models::GPTConfig c{
      .vocab_size = 256, .context_length = 16, .n_layer = 2, .n_head = 2, .n_embd = 32};
  nn::models::GPT tied(c);
  // wte 8192 + wpe 512 + 2 blocks x (ln 64 + qkv 3168 + out 1056 + ln 64 + fc 4224 + proj 4128)
  // + ln_f 64.
  EXPECT_EQ(count(tied), 34176);
  nn::models::GPTConfig untied_config = c;
  untied_config.tie_weights = false;
  nn::models::GPT untied(untied_config);
  EXPECT_EQ(count(untied), 34176 + 256 * 32);
  EXPECT_EQ(tied.lm_head, nullptr);
  // The benchmark workload: an untied head without bias.
  nn::models::GPT mini(nn::models::gpt_mini());
  EXPECT_EQ(count(mini), 10942464);
  EXPECT_FALSE(mini.lm_head->bias.defined());
  const auto sd = tied.state_dict();
  for (const char* key : {"wte.weight", "wpe.weight", "blocks.0.attn.qkv.weight",
                          "blocks.1.proj.bias", "ln_f.weight"}) {
    EXPECT_TRUE(sd.count(key)) << key;
  }
  EXPECT_FALSE(sd.count("lm_head.weight"));
  const Tensor idx = randint(0, 256, {3, 16});
  const Tensor logits = tied.forward(idx);
  EXPECT_EQ(logits.shape(), (Shape{3, 16, 256}));
  // Tied: the logits are the final features times the token embedding.
  const Tensor feats = tied.ln_f->forward([&] {
    Tensor x = tied.wte->forward(idx) + tied.wpe->forward(arange(16.0, {.dtype = DType::i64}));
    for (const auto& b : *tied.blocks) x = b->forward(x);
    return x;
  }());
  EXPECT_TRUE(all_close(logits, matmul(feats, tied.wte->weight.t()), 1e-5, 1e-5));
}

TEST(GPT, InitializesAsGpt2AndIsCausal) {
  manual_seed(7);
  nn::models::GPT gpt(
      {.vocab_size = 64, .context_length = 32, .n_layer = 8, .n_head = 4, .n_embd = 256});
  const auto& block = static_cast<const nn::TransformerBlock&>(*(*gpt.blocks)[3]);
  EXPECT_NEAR(std_of(gpt.wte->weight), 0.02, 0.002);
  EXPECT_NEAR(std_of(block.attn->qkv->weight), 0.02, 0.001);
  EXPECT_NEAR(std_of(block.fc->weight), 0.02, 0.001);
  EXPECT_NEAR(std_of(block.attn->out_proj->weight), 0.005, 0.0005);  // 0.02 / sqrt(16)
  EXPECT_NEAR(std_of(block.proj->weight), 0.005, 0.0005);
  EXPECT_EQ(block.fc->bias.abs().max().item<double>(), 0.0);
  EXPECT_EQ(block.ln1->weight.min().item<double>(), 1.0);

  const Tensor idx = randint(0, 64, {2, 12});
  Tensor changed = idx.clone();
  changed.narrow(1, 8, 4).copy_(randint(0, 64, {2, 4}));
  const Tensor a = gpt.forward(idx), b = gpt.forward(changed);
  EXPECT_TRUE(all_close(a.narrow(1, 0, 8), b.narrow(1, 0, 8), 1e-6, 1e-6));
}

TEST(GPT, DropoutOnlyInTraining) {
  nn::models::GPT gpt({.vocab_size = 32,
                       .context_length = 8,
                       .n_layer = 1,
                       .n_head = 2,
                       .n_embd = 16,
                       .dropout = 0.2});
  const Tensor idx = randint(0, 32, {2, 8});
  gpt.eval();
  EXPECT_TRUE(all_close(gpt.forward(idx), gpt.forward(idx), 0, 0));
  gpt.train();
  EXPECT_FALSE(all_close(gpt.forward(idx), gpt.forward(idx), 1e-4, 1e-4));
}

// Trains `model` (vocabulary 16, context 12 or more) for 80 AdamW steps on windows of the
// sequence 0 1 2 ... 6 0 1 2 ...: each next token is determined by the last. Returns the first
// and the last loss.
std::pair<double, double> train_on_a_repeating_sequence(nn::Module& model) {
  optim::AdamW opt(model.parameters(), {.lr = 1e-2, .weight_decay = 0.0});
  std::vector<double> tokens;
  for (int i = 0; i < 13 + 6; ++i) tokens.push_back(i % 7);
  std::vector<Tensor> inputs, targets;
  for (int s = 0; s < 6; ++s) {
    inputs.push_back(from_vector<double>(tokens, {19}).narrow(0, s, 12));
    targets.push_back(from_vector<double>(tokens, {19}).narrow(0, s + 1, 12));
  }
  const Tensor x = stack(inputs).to(DType::i64), y = stack(targets).to(DType::i64);
  double first = 0, last = 0;
  for (int step = 0; step < 80; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model.forward(x).view({72, 16}), y.view({72}));
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  return {first, last};
}

TEST(GPT, LearnsARepeatingSequence) {
  manual_seed(8);
  nn::models::GPT gpt(
      {.vocab_size = 16, .context_length = 12, .n_layer = 1, .n_head = 2, .n_embd = 32});
  const auto [first, last] = train_on_a_repeating_sequence(gpt);
  EXPECT_GT(first, 2.0);  // about ln 16 at the start
  EXPECT_LT(last, 0.05);
}

TEST(GPT, GeneratesFromTheContextWindowDeterministically) {
  manual_seed(9);
  nn::models::GPT gpt(
      {.vocab_size = 20, .context_length = 6, .n_layer = 1, .n_head = 2, .n_embd = 16});
  gpt.train();
  const Tensor prompt = randint(0, 20, {2, 9});  // longer than the context: the last 6 are fed
  Generator a(3), b(3);
  const Tensor x = gpt.generate(prompt, 5, {.generator = &a});
  EXPECT_EQ(x.shape(), (Shape{2, 14}));
  EXPECT_TRUE(all_close(x.narrow(1, 0, 9), prompt, 0, 0));
  EXPECT_TRUE(all_close(x, gpt.generate(prompt, 5, {.generator = &b}), 0, 0));
  EXPECT_TRUE(gpt.is_training());  // restored
  EXPECT_GE(x.min().item<double>(), 0);
  EXPECT_LT(x.max().item<double>(), 20);

  // top_k = 1 is greedy: each token is the argmax of the logits of the 6 tokens before it.
  gpt.eval();
  const Tensor greedy = gpt.generate(prompt.select(0, 0), 4, {.top_k = 1});
  EXPECT_EQ(greedy.shape(), (Shape{13}));
  for (int64_t i = 9; i < 13; ++i) {
    const Tensor logits = gpt.forward(greedy.narrow(0, i - 6, 6).unsqueeze(0)).select(1, 5);
    EXPECT_EQ(greedy.select(0, i).item<int64_t>(), argmax(logits, 1).item<int64_t>()) << i;
  }
  // top_k = 3: every sampled token is among the three most likely of its step.
  Generator c(4);
  const Tensor top3 =
      gpt.generate(prompt.select(0, 1), 6, {.temperature = 5.0, .top_k = 3, .generator = &c});
  for (int64_t i = 9; i < 15; ++i) {
    const std::vector<double> l =
        gpt.forward(top3.narrow(0, i - 6, 6).unsqueeze(0)).select(1, 5).to_vector<double>();
    const double picked = l[static_cast<size_t>(top3.select(0, i).item<int64_t>())];
    int64_t above = 0;
    for (double v : l) above += v > picked;
    EXPECT_LT(above, 3) << i;
  }
  expect_error([&] { gpt.generate(prompt, 1, {.temperature = 0.0}); },
               {"GPT::generate", "temperature", "0"});
  expect_error([&] { gpt.generate(prompt, -1); }, {"GPT::generate", "n must", "-1"});
  expect_error([&] { gpt.generate(prompt, 1, {.top_k = -2}); }, {"GPT::generate", "top_k"});
  expect_error([&] { gpt.generate(zeros({3}), 1); }, {"GPT::generate", "i64"});
}

TEST(Transformer, ErrorsNameTheModuleAndValues) {
  expect_error([] { nn::MultiheadAttention(10, 3); }, {"MultiheadAttention", "10", "3"});
  expect_error([] { nn::MultiheadAttention(8, 2, {.dropout = 1.0}); },
               {"MultiheadAttention", "dropout"});
  expect_error(
      [] {
        nn::MultiheadAttention(8, 2).forward(zeros({2, 8}));
      },
      {"MultiheadAttention", "(B, T, 8)", "[2, 8]"});
  expect_error([] { nn::TransformerBlock(8, 2, {.mlp_ratio = 0}); },
               {"TransformerBlock", "mlp_ratio"});
  expect_error(
      [] {
        nn::TransformerBlock(8, 2).forward(zeros({1, 3, 4}));
      },
      {"TransformerBlock", "(B, T, 8)", "[1, 3, 4]"});
  expect_error([] { nn::models::GPT({.n_head = 3, .n_embd = 32}); }, {"GPT", "32", "3"});
  expect_error([] { nn::models::GPT({.n_layer = 0}); }, {"GPT", "positive"});
  nn::models::GPT gpt(
      {.vocab_size = 8, .context_length = 4, .n_layer = 1, .n_head = 1, .n_embd = 4});
  expect_error(
      [&] {
        gpt.forward(zeros({1, 5}).to(DType::i64));
      },
      {"GPT", "sequence length 5", "context length 4"});
  expect_error([&] { gpt.forward(zeros({1, 3})); }, {"GPT", "i64"});
  expect_error([&] { gpt.forward(zeros({3}).to(DType::i64)); }, {"GPT", "(B, T)", "[3]"});
}

// --- Llama ---

TEST(Llama, ParametersNamesAndShapes) {
  const nn::models::LlamaConfig c{.vocab_size = 64,
                                  .context_length = 16,
                                  .n_layer = 2,
                                  .n_head = 4,
                                  .n_kv_head = 2,
                                  .n_embd = 32,
                                  .mlp_hidden = 48};
  nn::models::Llama untied(c);
  // embed 2048 + 2 layers x (q 1024 + k 512 + v 512 + o 1024 + 3 x 1536 + 2 norms 64) + norm 32
  // + lm_head 2048.
  EXPECT_EQ(count(untied), 2048 + 2 * (1024 + 512 + 512 + 1024 + 3 * 1536 + 64) + 32 + 2048);
  nn::models::LlamaConfig tied_config = c;
  tied_config.tie_weights = true;
  nn::models::Llama tied(tied_config);
  EXPECT_EQ(count(tied), count(untied) - 2048);
  EXPECT_EQ(tied.lm_head, nullptr);
  // The default MLP width: 8 n_embd / 3 rounded up to a multiple of 32 (86 -> 96).
  nn::models::Llama default_width({.n_layer = 1, .n_embd = 32});
  const auto& layer0 =
      static_cast<const nn::models::LlamaDecoderLayer&>(*(*default_width.model->layers)[0]);
  EXPECT_EQ(layer0.mlp->gate_proj->weight.shape(), (Shape{96, 32}));
  EXPECT_EQ(count(nn::models::Llama(nn::models::llama_mini())), 9638784);
  const auto sd = untied.state_dict();
  for (const char* key :
       {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.k_proj.weight", "model.layers.1.self_attn.o_proj.weight",
        "model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight",
        "model.layers.1.mlp.down_proj.weight", "model.layers.0.input_layernorm.weight",
        "model.layers.1.post_attention_layernorm.weight", "model.norm.weight", "lm_head.weight"}) {
    EXPECT_TRUE(sd.count(key)) << key;
  }
  EXPECT_EQ(sd.at("model.layers.0.self_attn.k_proj.weight").shape(), (Shape{16, 32}));
  for (const auto& [name, t] : sd) EXPECT_EQ(name.find("bias"), std::string::npos) << name;
  const Tensor idx = randint(0, 64, {3, 16});
  EXPECT_EQ(untied.forward(idx).shape(), (Shape{3, 16, 64}));
  // Tied: the logits are the final features times the token embedding.
  EXPECT_TRUE(all_close(tied.forward(idx),
                        matmul(tied.model->forward(idx), tied.model->embed_tokens->weight.t()),
                        1e-5, 1e-5));
}

// One layer written out with the ops (rms_norm, rope on the halves of each head, causal attention
// with each K/V head repeated for its query heads, swiglu) in f64.
TEST(Llama, LayerMatchesItsFormula) {
  manual_seed(21);
  const nn::models::LlamaConfig c = testing::small_llama(1, 16, 24);
  nn::models::LlamaDecoderLayer layer(c);
  layer.to(DType::f64);
  for (Tensor p : layer.parameters()) {
    NoGradGuard ng;
    p.copy_(randn(p.shape(), {.dtype = DType::f64}) * 0.3);
  }
  const Tensor x = randn({2, 5, 16}, {.dtype = DType::f64});
  const Tensor pos = arange(5.0, {.dtype = DType::i64});
  const auto& at = *layer.self_attn;
  const Tensor h = rms_norm(x, {16}, layer.input_layernorm->weight, 1e-6);
  auto split = [](const Tensor& y, int64_t heads) {
    return y.reshape({2, 5, heads, 4}).transpose(1, 2);
  };
  auto repeat = [](const Tensor& kv) {  // (2, 2, 5, 4) -> (2, 4, 5, 4): head g at 2g, 2g + 1
    return kv.unsqueeze(2).expand({2, 2, 2, 5, 4}).reshape({2, 4, 5, 4});
  };
  const Tensor q = rope(split(matmul(h, at.q_proj->weight.t()), 4), pos, 500.0);
  const Tensor k = rope(split(matmul(h, at.k_proj->weight.t()), 2), pos, 500.0);
  const Tensor v = split(matmul(h, at.v_proj->weight.t()), 2);
  const Tensor a = scaled_dot_product_attention(q, repeat(k), repeat(v), {.causal = true});
  const Tensor h1 = x + matmul(a.transpose(1, 2).reshape({2, 5, 16}), at.o_proj->weight.t());
  const Tensor h2 = rms_norm(h1, {16}, layer.post_attention_layernorm->weight, 1e-6);
  const auto& mlp = *layer.mlp;
  const Tensor gate = matmul(h2, mlp.gate_proj->weight.t()),
               up = matmul(h2, mlp.up_proj->weight.t());
  const Tensor want = h1 + matmul(silu(gate) * up, mlp.down_proj->weight.t());
  EXPECT_TRUE(all_close(layer.forward(x), want, 1e-12, 1e-12));
}

TEST(Llama, InitializesAndIsCausal) {
  manual_seed(22);
  nn::models::Llama llama({.vocab_size = 64,
                           .context_length = 32,
                           .n_layer = 2,
                           .n_head = 4,
                           .n_kv_head = 1,
                           .n_embd = 256});
  const auto& layer = static_cast<const nn::models::LlamaDecoderLayer&>(*(*llama.model->layers)[1]);
  EXPECT_NEAR(std_of(llama.model->embed_tokens->weight), 0.02, 0.002);
  EXPECT_NEAR(std_of(layer.self_attn->q_proj->weight), 0.02, 0.001);
  EXPECT_NEAR(std_of(layer.mlp->down_proj->weight), 0.02, 0.001);
  EXPECT_EQ(layer.input_layernorm->weight.min().item<double>(), 1.0);
  const Tensor idx = randint(0, 64, {2, 12});
  Tensor changed = idx.clone();
  changed.narrow(1, 8, 4).copy_(randint(0, 64, {2, 4}));
  const Tensor a = llama.forward(idx), b = llama.forward(changed);
  EXPECT_TRUE(all_close(a.narrow(1, 0, 8), b.narrow(1, 0, 8), 1e-6, 1e-6));
  EXPECT_FALSE(all_close(a.narrow(1, 8, 4), b.narrow(1, 8, 4), 1e-6, 1e-6));
}

TEST(Llama, LearnsARepeatingSequence) {
  manual_seed(23);
  nn::models::Llama llama({.vocab_size = 16,
                           .context_length = 12,
                           .n_layer = 1,
                           .n_head = 2,
                           .n_kv_head = 1,
                           .n_embd = 32});
  const auto [first, last] = train_on_a_repeating_sequence(llama);
  EXPECT_GT(first, 2.0);  // about ln 16 at the start
  EXPECT_LT(last, 0.05);
}

TEST(Llama, BadConfigsAndInputsAreErrors) {
  expect_error([] { nn::models::Llama({.n_head = 4, .n_kv_head = 3, .n_embd = 32}); },
               {"n_kv_head 3", "does not divide n_head 4"});
  expect_error([] { nn::models::Llama({.n_head = 4, .n_kv_head = 4, .n_embd = 12}); },
               {"head size 3", "even"});
  expect_error([] { nn::models::Llama({.n_head = 4, .n_embd = 30}); }, {"not divisible"});
  nn::models::Llama llama({.vocab_size = 8, .context_length = 4, .n_layer = 1, .n_embd = 16});
  expect_error(
      [&] {
        llama.forward(zeros({1, 5}, {.dtype = DType::i64}));
      },
      {"Llama", "sequence length 5", "context length 4"});
  expect_error([&] { llama.forward(zeros({1, 3})); }, {"Llama", "i64"});
}

// --- KV cache ---

// Feeds `idx` (B, T) through the cache in the chunks `chunks` (summing to T) and checks each
// chunk's logits against the rows of one full forward: a first chunk (causal), single tokens and
// a later chunk of several tokens (the bottom-right causal mask).
template <class Model>
void expect_incremental_equals_full(Model& model, const Tensor& idx,
                                    const std::vector<int64_t>& chunks, double tol) {
  model.eval();
  const Tensor full = model.forward(idx);
  nn::KVCache cache(model.config.n_layer, model.config.context_length);
  int64_t at = 0;
  for (int64_t c : chunks) {
    const Tensor part = model.forward(idx.narrow(1, at, c), cache);
    EXPECT_FALSE(part.requires_grad());
    EXPECT_TRUE(all_close(part, full.narrow(1, at, c), tol, tol)) << "positions " << at << "+" << c;
    at += c;
    EXPECT_EQ(cache.length(), at);
  }
  EXPECT_EQ(at, idx.size(1));
}

TEST(KVCache, IncrementalLogitsEqualAFullForward) {
  manual_seed(30);
  nn::models::GPT gpt(
      {.vocab_size = 40, .context_length = 16, .n_layer = 2, .n_head = 2, .n_embd = 32});
  const Tensor idx = randint(0, 40, {2, 16});
  expect_incremental_equals_full(gpt, idx, {5, 1, 1, 3, 1, 5}, 1e-5);
  for (int64_t kv_heads : {4, 2, 1}) {
    nn::models::Llama llama({.vocab_size = 40,
                             .context_length = 16,
                             .n_layer = 2,
                             .n_head = 4,
                             .n_kv_head = kv_heads,
                             .n_embd = 32,
                             .tie_weights = kv_heads == 2});
    expect_incremental_equals_full(llama, idx, {1, 1, 6, 1, 7}, 1e-5);
  }
  // In f64 the orders of summation alone separate them.
  nn::models::Llama llama64({.vocab_size = 40,
                             .context_length = 16,
                             .n_layer = 2,
                             .n_head = 4,
                             .n_kv_head = 2,
                             .n_embd = 32});
  llama64.to(DType::f64);
  expect_incremental_equals_full(llama64, idx, {4, 1, 11}, 1e-12);
  gpt.to(DType::f64);
  expect_incremental_equals_full(gpt, idx, {16}, 1e-12);
}

TEST(KVCache, CachedGenerationDrawsTheSameTokens) {
  manual_seed(31);
  nn::models::GPT gpt(
      {.vocab_size = 30, .context_length = 8, .n_layer = 2, .n_head = 2, .n_embd = 16});
  nn::models::Llama llama({.vocab_size = 30,
                           .context_length = 8,
                           .n_layer = 2,
                           .n_head = 4,
                           .n_kv_head = 2,
                           .n_embd = 16});
  // Sampling at a high temperature, past the context (the window slides after 8 tokens).
  const Tensor prompt = randint(0, 30, {3, 3});
  for (nn::Module* m : std::vector<nn::Module*>{&gpt, &llama}) {
    const auto generate = [&](bool cached) {
      Generator g(5);
      const nn::models::GenerateOptions o{.temperature = 2.0, .generator = &g, .use_cache = cached};
      return m == &gpt ? gpt.generate(prompt, 12, o) : llama.generate(prompt, 12, o);
    };
    const Tensor cached = generate(true), fed_whole = generate(false);
    EXPECT_EQ(cached.shape(), (Shape{3, 15}));
    EXPECT_TRUE(all_close(cached, fed_whole, 0, 0)) << m->name();
  }
  // Greedy Llama: each token the argmax given the window before it.
  const Tensor greedy = llama.generate(prompt.select(0, 0), 7, {.top_k = 1});
  llama.eval();
  for (int64_t i = 3; i < 10; ++i) {
    const int64_t from = std::max<int64_t>(0, i - 8);
    const Tensor logits = llama.forward(greedy.narrow(0, from, i - from).unsqueeze(0));
    EXPECT_EQ(greedy.select(0, i).item<int64_t>(),
              argmax(logits.select(1, i - from - 1), 1).item<int64_t>())
        << i;
  }
  expect_error([&] { llama.generate(prompt, 1, {.temperature = -1.0}); },
               {"Llama::generate", "temperature", "-1"});
}

TEST(KVCache, MisuseIsAnError) {
  nn::models::GPT gpt(
      {.vocab_size = 8, .context_length = 6, .n_layer = 2, .n_head = 1, .n_embd = 4});
  expect_error([] { nn::KVCache(0, 4); }, {"KVCache", "positive", "0"});
  nn::KVCache wrong_layers(3, 6);
  expect_error(
      [&] {
        gpt.forward(zeros({1, 2}, {.dtype = DType::i64}), wrong_layers);
      },
      {"GPT", "3 layers", "model of 2"});
  nn::KVCache cache(2, 6);
  gpt.forward(zeros({1, 4}, {.dtype = DType::i64}), cache);
  expect_error(
      [&] {
        gpt.forward(zeros({1, 3}, {.dtype = DType::i64}), cache);
      },
      {"GPT", "3 tokens after the 4", "context length 6"});
  // Another batch size needs reset() first.
  expect_error(
      [&] {
        gpt.forward(zeros({2, 1}, {.dtype = DType::i64}), cache);
      },
      {"KVCache", "holds 4 positions", "reset()"});
  cache.reset();
  EXPECT_EQ(gpt.forward(zeros({2, 1}, {.dtype = DType::i64}), cache).shape(), (Shape{2, 1, 8}));
  const Tensor q = zeros({1, 1, 1, 4}), kv = zeros({1, 1, 1, 4});
  nn::KVCache raw(2, 3);
  raw.attend(0, q, kv, kv);
  expect_error([&] { raw.attend(0, q, kv, kv); }, {"KVCache", "layer 0", "twice"});
  expect_error([&] { raw.advance(1); }, {"KVCache", "advance(1)", "layer 1", "0 new"});
  expect_error([&] { raw.attend(2, q, kv, kv); }, {"KVCache", "layer 2", "0 to 1"});
  expect_error([&] { raw.attend(1, zeros({1, 1, 4}), kv, kv); }, {"KVCache", "(B, H, t, D)"});
  nn::MultiheadAttention bidirectional(4, 1);
  expect_error(
      [&] {
        bidirectional.forward(zeros({1, 1, 4}), cache, 0);
      },
      {"MultiheadAttention", "causal"});
}

}  // namespace
}  // namespace sinter

// MultiheadAttention, TransformerBlock and the GPT model: the head split against a per-head
// formula, causality, masks, parameter counts and names, GPT-2 initialization, dropout modes, a
// tiny model learning a sequence, and the errors.
#include <cmath>

#include "sinter/nn/models.h"
#include "sinter/optim/adam.h"
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

TEST(GPT, LearnsARepeatingSequence) {
  manual_seed(8);
  nn::models::GPT gpt(
      {.vocab_size = 16, .context_length = 12, .n_layer = 1, .n_head = 2, .n_embd = 32});
  optim::AdamW opt(gpt.parameters(), {.lr = 1e-2, .weight_decay = 0.0});
  // Windows of the sequence 0 1 2 ... 6 0 1 2 ...: each next token is determined by the last.
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
    Tensor loss = cross_entropy(gpt.forward(x).view({72, 16}), y.view({72}));
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
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

}  // namespace
}  // namespace sinter

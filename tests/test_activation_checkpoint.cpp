// Activation checkpointing (Note [activation checkpointing]): gradients bitwise those of the plain
// function, with dropout (the generator replayed) and under autocast, for a function, the GPT's
// blocks and the Llama's layers in f32 and f64; the generator left where the forward left it; and
// the errors.
#include <cstring>
#include <vector>

#include "sinter/autocast.h"
#include "sinter/autograd.h"
#include "sinter/nn/models.h"
#include "sinter/profiler.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::expect_error;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
}

TEST(ActivationCheckpoint, AFunctionWithDropoutGivesTheSameGradientsBitwise) {
  for (const DType dt : {DType::f32, DType::f64}) {
    manual_seed(1);
    const Tensor w = randn({6, 6}).to(dt).requires_grad_(true);
    const Tensor x0 = randn({4, 6}).to(dt);
    const auto fn = [&](const Tensor& x) {
      return dropout(gelu(matmul(x, w)), 0.3, true) * 2.0 + x;
    };
    // Plain.
    default_generator().set_state({7, 100});
    Tensor x = x0.detach().requires_grad_(true);
    Tensor y = fn(x);
    sum(y * y).backward();
    const Tensor gw = w.grad().clone(), gx = x.grad().clone(), plain_y = y.detach();
    w.grad().zero_();
    // Checkpointed: the forward draws the same mask, the recomputation replays it.
    default_generator().set_state({7, 100});
    Tensor xc = x0.detach().requires_grad_(true);
    Tensor yc = autograd::checkpoint(fn, xc);
    const GeneratorState after_forward = default_generator().state();
    EXPECT_TRUE(same_bits(yc.detach(), plain_y));
    sum(yc * yc).backward();
    EXPECT_TRUE(same_bits(w.grad(), gw)) << dt;
    EXPECT_TRUE(same_bits(xc.grad(), gx)) << dt;
    const GeneratorState now = default_generator().state();
    EXPECT_EQ(now.seed, after_forward.seed);
    EXPECT_EQ(now.offset, after_forward.offset);  // the backward's replay set it back
  }
}

TEST(ActivationCheckpoint, SeveralInputsAndOutputsAndUnderAutocast) {
  manual_seed(2);
  const Tensor w = randn({5, 5}).requires_grad_(true);
  const auto fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(in[0], w), relu(in[1]) * in[0]};
  };
  const Tensor a0 = randn({3, 5}), b0 = randn({3, 5});
  const auto run = [&](bool ckpt) {
    w.set_grad(Tensor());
    Tensor a = a0.detach().requires_grad_(true), b = b0.detach();  // b needs no gradient
    std::vector<Tensor> y;
    {
      autocast::Guard amp(DeviceType::cpu, DType::bf16);
      y = ckpt ? autograd::checkpoint(fn, {a, b}) : fn({a, b});
    }
    EXPECT_EQ(y[0].dtype(), DType::bf16);  // the recomputation must run in bf16 too
    (sum(y[0].to(DType::f32)) + sum(y[1] * y[1])).backward();
    EXPECT_FALSE(b.grad().defined());
    return std::vector<Tensor>{w.grad().clone(), a.grad().clone()};
  };
  const std::vector<Tensor> plain = run(false), ckpt = run(true);
  EXPECT_TRUE(same_bits(plain[0], ckpt[0]));
  EXPECT_TRUE(same_bits(plain[1], ckpt[1]));
}

// Every parameter's gradient of one training step of `make()`'s model, checkpointed or not.
template <class Model, class Config>
std::vector<Tensor> step_grads(Config c, DType dt) {
  manual_seed(3);
  Model m(c);
  m.to(dt);
  m.train();
  const Tensor idx = randint(0, c.vocab_size, {2, c.context_length}, {.dtype = DType::i64});
  default_generator().set_state({11, 0});
  const Tensor logits = m.forward(idx);
  cross_entropy(logits.reshape({-1, c.vocab_size}), idx.reshape({-1})).backward();
  std::vector<Tensor> grads;
  for (const Tensor& p : m.parameters()) grads.push_back(p.grad());
  return grads;
}

TEST(ActivationCheckpoint, GptBlocksAndLlamaLayersGiveTheSameGradientsBitwise) {
  for (const DType dt : {DType::f32, DType::f64}) {
    nn::models::GPTConfig g{.vocab_size = 30,
                            .context_length = 12,
                            .n_layer = 3,
                            .n_head = 2,
                            .n_embd = 16,
                            .dropout = 0.1};
    const std::vector<Tensor> plain = step_grads<nn::models::GPT>(g, dt);
    g.checkpoint_blocks = true;
    const std::vector<Tensor> ckpt = step_grads<nn::models::GPT>(g, dt);
    ASSERT_EQ(plain.size(), ckpt.size());
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(same_bits(plain[i], ckpt[i])) << i;

    nn::models::LlamaConfig l{.vocab_size = 30,
                              .context_length = 12,
                              .n_layer = 3,
                              .n_head = 4,
                              .n_kv_head = 2,
                              .n_embd = 16};
    const std::vector<Tensor> lplain = step_grads<nn::models::Llama>(l, dt);
    l.checkpoint_layers = true;
    const std::vector<Tensor> lckpt = step_grads<nn::models::Llama>(l, dt);
    ASSERT_EQ(lplain.size(), lckpt.size());
    for (size_t i = 0; i < lplain.size(); ++i) EXPECT_TRUE(same_bits(lplain[i], lckpt[i])) << i;
  }
}

TEST(ActivationCheckpoint, ProfilerCountsSavedBytesOncePerStorageWithoutParameters) {
  profiler::Guard guard;
  EXPECT_EQ(guard.saved_bytes(), 0);
  const Tensor leaf = randn({1000}).requires_grad_(true);
  const Tensor w = randn({1000}).requires_grad_(true);
  {
    // exp saves its output (4000 bytes); mul saves that output again (the same storage, counted
    // once) and w, a leaf that requires grad (a parameter: not counted), as is the leaf that
    // mul(leaf, 2.0) may save.
    const Tensor y = exp(mul(leaf, 2.0));
    Tensor loss = sum(mul(y, w));
    EXPECT_EQ(guard.saved_bytes(), 4000);
    loss.backward();
    EXPECT_EQ(guard.saved_bytes(), 0);
    EXPECT_GE(guard.peak_saved_bytes(), 4000);
  }
  guard.reset_peak_saved_bytes();
  EXPECT_EQ(guard.peak_saved_bytes(), 0);
  {
    const Tensor y = exp(mul(leaf, 2.0));
    EXPECT_GT(guard.saved_bytes(), 0);
  }  // the graph dropped without a backward
  EXPECT_EQ(guard.saved_bytes(), 0);
  EXPECT_NE(guard.table().find("saved for backward"), std::string::npos);
}

// The acceptance figure of activation checkpointing: a 6-layer GPT at T = 256 keeps at least 3x
// fewer bytes for backward with checkpointed blocks.
TEST(ActivationCheckpoint, SixLayerGptSavesThreeTimesFewerBytes) {
  int64_t peak[2] = {0, 0};
  for (const bool checkpointed : {false, true}) {
    manual_seed(3);
    nn::models::GPT gpt(nn::models::GPTConfig{.vocab_size = 64,
                                              .context_length = 256,
                                              .n_layer = 6,
                                              .n_head = 4,
                                              .n_embd = 64,
                                              .checkpoint_blocks = checkpointed});
    Generator gen(4);
    const Tensor idx = randint(0, 64, {2, 256}, {.dtype = DType::i64}, &gen);
    profiler::Guard guard;
    const Tensor loss = cross_entropy(gpt.forward(idx).reshape({-1, 64}), idx.reshape({-1}));
    peak[checkpointed] = guard.peak_saved_bytes();
    loss.backward();
    EXPECT_EQ(guard.saved_bytes(), 0);
  }
  std::printf(
      "[saved for backward] 6-layer GPT, T = 256: %.2f MiB plain, %.2f MiB checkpointed "
      "(%.1fx)\n",
      peak[0] / 1048576.0, peak[1] / 1048576.0, static_cast<double>(peak[0]) / peak[1]);
  EXPECT_GE(peak[0], 3 * peak[1]);
}

TEST(ActivationCheckpoint, Errors) {
  const Tensor x = randn({2, 2});
  expect_error([&] { autograd::checkpoint([](const Tensor& t) { return t * 2.0; }, x); },
               {"checkpoint", "none of the 1 inputs requires grad"});
  expect_error(
      [&] {
        autograd::checkpoint(std::function<Tensor(const Tensor&)>(),
                             x.detach().requires_grad_(true));
      },
      {"checkpoint", "empty function"});
  // Without grad mode it is the function itself.
  NoGradGuard no_grad;
  EXPECT_TRUE(same_bits(autograd::checkpoint([](const Tensor& t) { return t * 2.0; }, x), x * 2.0));
}

}  // namespace
}  // namespace sinter

// FP8 training (Notes [fp8 scaling], [fp8 gemm], [fp8 training], [fp8 delayed state]): the scales,
// the quantization and the GEMM against formulas written out here with the scalar conversions of
// tests/test_float8.cpp, fp8::linear's output and gradients exactly equal to the written-out
// reference under each recipe, the delayed recipe's history, fp8::prepare on a Llama, and the
// errors. (A finite-difference check does not apply: the quantized GEMMs are piecewise constant,
// and their backward is defined by the formulas it is held to here.)
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "fp8_reference.h"
#include "kern/fp8.h"
#include "sinter/cuda.h"
#include "sinter/fp8.h"
#include "sinter/gguf.h"
#include "sinter/io.h"
#include "sinter/nn/models.h"
#include "sinter/nn/pretrained.h"
#include "sinter/ops.h"
#include "test_util.h"
#include "wgmma_layout.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;
using namespace testing::fp8_ref;

TEST(Fp8, ScaleFromAmax) {
  EXPECT_EQ(fp8::scale_from_amax(2.0f, DType::f8e4m3), 224.0f);
  EXPECT_EQ(fp8::scale_from_amax(2.0f, DType::f8e5m2, 1), 14336.0f);
  EXPECT_EQ(fp8::scale_from_amax(0.0f, DType::f8e4m3), 1.0f);
  EXPECT_EQ(fp8::scale_from_amax(std::numeric_limits<float>::infinity(), DType::f8e4m3), 1.0f);
  EXPECT_EQ(fp8::scale_from_amax(std::numeric_limits<float>::quiet_NaN(), DType::f8e5m2), 1.0f);
  EXPECT_EQ(fp8::scale_from_amax(1e-45f, DType::f8e4m3), std::numeric_limits<float>::max());
  EXPECT_EQ(fp8::max_value(DType::f8e5m2), 57344.0f);
  EXPECT_EQ(fp8::amax(from_vector(std::vector<float>{1.0f, -7.5f, 3.0f})), 7.5f);
  EXPECT_TRUE(std::isnan(fp8::amax(from_vector(std::vector<float>{1.0f, NAN}))));
}

TEST(Fp8, QuantizeEqualsTheWrittenOutTiles) {
  manual_seed(testing::fresh_seed());
  struct Case {
    int64_t rows, cols, tr, tc;
    DType f;
  };
  for (const Case& c :
       {Case{5, 300, 1, 128, DType::f8e4m3}, Case{200, 260, 128, 128, DType::f8e4m3},
        Case{37, 19, 37, 19, DType::f8e5m2}, Case{130, 7, 1, 128, DType::f8e5m2},
        Case{9, 33, 4, 8, DType::f8e4m3}}) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols));
    const Tensor x = spread({c.rows, c.cols}).to(DType::bf16);
    float amax = 0.0f;
    const fp8::Quantized q = fp8::quantize(x, c.f, c.tr, c.tc, std::nullopt, &amax);
    const RefQ r = ref_quantize(mat_of(x), c.f, c.tr, c.tc);
    EXPECT_EQ(q.data.dtype(), c.f);
    expect_equal(q.data, r.q, "codes");
    EXPECT_EQ(q.scale_inv.to_vector<float>(), r.inv);
    EXPECT_EQ(amax, fp8::amax(x));
    expect_equal(
        q.dequantize(),
        [&] {
          Mat d = r.q;
          for (int64_t i = 0; i < d.rows; ++i) {
            for (int64_t j = 0; j < d.cols; ++j) {
              d.v[static_cast<size_t>(i * d.cols + j)] = f32(r.q.at(i, j) * r.inv_at(i, j / r.tc));
            }
          }
          return d;
        }(),
        "dequantized");
  }
  // A NaN, whatever its sign (0 x inf gives a negative one on x86), is the positive NaN code; an
  // empty matrix quantizes to nothing.
  const Tensor nans = from_vector(std::vector<float>{NAN, -NAN, 1.0f}).reshape({1, 3});
  EXPECT_EQ(code_bytes(fp8::quantize(nans, DType::f8e4m3, 1, 3, 1.0f).data),
            (std::vector<uint8_t>{0x7f, 0x7f, 0x38}));
  EXPECT_EQ(fp8::quantize_tensorwise(zeros({0, 16}), DType::f8e4m3).data.numel(), 0);
  // A given scale: every tile takes it, and what passes the largest value saturates.
  const Tensor x = from_vector(std::vector<float>{1.0f, -3.0f, 500.0f, 0.001f}).reshape({2, 2});
  const fp8::Quantized q = fp8::quantize(x, DType::f8e4m3, 2, 2, 2.0f);
  EXPECT_EQ(q.dequantize().to_vector<float>(),
            (std::vector<float>{1.0f, -3.0f, 224.0f, 0.0009765625f}));  // 0.002: 2^-9
  EXPECT_EQ(q.scale_inv.to_vector<float>(), std::vector<float>{0.5f});
}

TEST(Fp8, GemmEqualsTheWrittenOutSums) {
  manual_seed(testing::fresh_seed());
  struct Case {
    int64_t m, n, k, a_tr, b_tr, tc;
    DType fa, fb;
  };
  for (const Case& c : {Case{7, 9, 300, 7, 9, 300, DType::f8e4m3, DType::f8e4m3},
                        Case{7, 9, 300, 1, 128, 128, DType::f8e4m3, DType::f8e4m3},
                        Case{33, 20, 64, 1, 1, 16, DType::f8e5m2, DType::f8e4m3},
                        Case{16, 48, 40, 16, 16, 16, DType::f8e5m2, DType::f8e4m3},
                        Case{5, 6, 1000, 5, 6, 1000, DType::f8e5m2, DType::f8e4m3}}) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k));
    const Tensor a = spread({c.m, c.k}), b = spread({c.n, c.k});
    const fp8::Quantized qa = fp8::quantize(a, c.fa, c.a_tr, c.tc);
    const fp8::Quantized qb = fp8::quantize(b, c.fb, c.b_tr, c.tc);
    const Mat want = ref_gemm(ref_quantize(mat_of(a), c.fa, c.a_tr, c.tc),
                              ref_quantize(mat_of(b), c.fb, c.b_tr, c.tc));
    expect_equal(fp8::gemm(qa, qb, DType::f32), want, "gemm");
    const Tensor bf = fp8::gemm(qa, qb, DType::bf16);
    EXPECT_EQ(bf.dtype(), DType::bf16);
    EXPECT_EQ(bf.to(DType::f32).to_vector<float>(),
              from_vector(want.v).to(DType::bf16).to(DType::f32).to_vector<float>());
  }
}

// The written-out forward and backward of fp8::linear for a recipe, from x, W, b, dy: per-tensor
// scales from the amaxes (or the given ones), or block tiles.
struct RefLinear {
  Mat y, dx, dw;
};

RefLinear ref_linear(const Mat& x, const Mat& w, const std::vector<float>& b, const Mat& dy,
                     fp8::Scaling scaling, int64_t block, const float* scales = nullptr) {
  const bool blk = scaling == fp8::Scaling::Block;
  auto q = [&](const Mat& m, DType f, int64_t tr, int64_t tc, int slot) {
    if (blk) return ref_quantize(m, f, tr, tc);
    return ref_quantize(m, f, m.rows, m.cols, scales ? scales[slot] : 0.0f);
  };
  const RefQ qx = q(x, DType::f8e4m3, 1, block, 0), qw = q(w, DType::f8e4m3, block, block, 1);
  RefLinear out;
  out.y = ref_gemm(qx, qw);
  for (int64_t i = 0; i < out.y.rows; ++i) {
    for (int64_t j = 0; j < out.y.cols; ++j) {
      float& v = out.y.v[static_cast<size_t>(i * out.y.cols + j)];
      v = f32(v + b[static_cast<size_t>(j)]);
    }
  }
  const RefQ qdy = q(dy, DType::f8e5m2, 1, block, 2);
  // dx = dy . W: W^T's tiles are W's transposed; dW = dy^T . x along the rows.
  RefQ wt{transpose(qw.q), {}, qw.tc, qw.tr, (w.rows + qw.tr - 1) / qw.tr};
  const int64_t nbr = (w.rows + qw.tr - 1) / qw.tr, nbc = qw.nbc;
  for (int64_t c = 0; c < nbc; ++c) {
    for (int64_t r = 0; r < nbr; ++r) wt.inv.push_back(qw.inv[static_cast<size_t>(r * nbc + c)]);
  }
  out.dx = ref_gemm(qdy, wt);
  auto qt = [&](const Mat& m, const RefQ& whole, DType f) {
    if (blk) return ref_quantize(transpose(m), f, 1, block);
    RefQ t{transpose(whole.q), whole.inv, m.cols, m.rows, 1};
    return t;
  };
  out.dw = ref_gemm(qt(dy, qdy, DType::f8e5m2), qt(x, qx, DType::f8e4m3));
  return out;
}

TEST(Fp8, LinearEqualsTheWrittenOutReferenceUnderEachRecipe) {
  manual_seed(testing::fresh_seed());
  struct Case {
    int64_t in, out, block;  // blocks that divide every size, and blocks that do not
  };
  for (const fp8::Scaling s : {fp8::Scaling::Current, fp8::Scaling::Block}) {
    for (const Case& c : {Case{48, 32, 16}, Case{48, 144, 128}, Case{160, 40, 32}}) {
      SCOPED_TRACE(::testing::Message() << fp8::scaling_name(s) << " " << c.in << " -> " << c.out
                                        << ", block " << c.block);
      const fp8::Recipe recipe{.scaling = s, .block = c.block};
      const Tensor x = spread({2, 5, c.in}).requires_grad_(true);
      const Tensor w = mul(randn({c.out, c.in}), 0.1).requires_grad_(true);
      const Tensor b = randn({c.out}).requires_grad_(true);
      const Tensor dy = spread({2, 5, c.out});
      const Tensor y = fp8::linear(x, w, b, recipe);
      y.backward(dy);
      const RefLinear want =
          ref_linear(mat_of(x.detach().reshape({10, c.in})), mat_of(w.detach()),
                     b.detach().to_vector<float>(), mat_of(dy.reshape({10, c.out})), s, c.block);
      EXPECT_EQ(y.shape(), (Shape{2, 5, c.out}));
      expect_equal(y.detach().reshape({10, c.out}), want.y, "y");
      expect_equal(x.grad().reshape({10, c.in}), want.dx, "dx");
      expect_equal(w.grad(), want.dw, "dw");
      EXPECT_EQ(b.grad().to_vector<float>(), dy.reshape({10, c.out}).sum({0}).to_vector<float>());
    }
  }
  // An empty batch: an empty output, and gradients of zeros.
  for (const fp8::Scaling s : {fp8::Scaling::Current, fp8::Scaling::Block}) {
    const Tensor w = randn({16, 32}).requires_grad_(true);
    const Tensor y = fp8::linear(zeros({0, 32}), w, Tensor(), {.scaling = s});
    EXPECT_EQ(y.shape(), (Shape{0, 16}));
    y.sum().backward();
    EXPECT_EQ(w.grad().abs().max().item<float>(), 0.0f);
  }
  // bf16 inputs (autocast's): the output in bf16, the gradients in the inputs' dtypes.
  const Tensor x = spread({4, 32}).to(DType::bf16).requires_grad_(true);
  const Tensor w = randn({16, 32}).requires_grad_(true);
  const Tensor y = fp8::linear(x, w, Tensor(), {});
  EXPECT_EQ(y.dtype(), DType::bf16);
  y.backward(ones({4, 16}, {.dtype = DType::bf16}));
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
  EXPECT_EQ(w.grad().dtype(), DType::f32);
}

// Four steps of the delayed recipe with histories of 1 and 3 steps: the first scales by its own
// amaxes, the others by the largest of the last H steps' (a different dy and x each step, so the
// stale scales saturate or waste range), and the state records each.
void delayed_steps(int64_t h) {
  SCOPED_TRACE(::testing::Message() << "history " << h);
  const fp8::Recipe recipe{.scaling = fp8::Scaling::Delayed, .amax_history_len = h, .margin = 1};
  fp8::LinearState st{zeros({3, h}), ones({3}), zeros({1}, {.dtype = DType::i64})};
  const Tensor w = mul(randn({16, 32}), 0.1).requires_grad_(true);
  const Tensor b = zeros({16});
  std::vector<float> scales(3);
  std::vector<std::vector<float>> seen;  // each step's amaxes
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(step);
    const Tensor x = mul(spread({6, 32}), 1.0 + step).requires_grad_(true);
    const Tensor dy = mul(spread({6, 16}), 3.0 - step * 0.5);
    w.set_grad(Tensor());
    const Tensor y = fp8::linear(x, w, b, recipe, &st);
    y.backward(dy);
    const float amaxes[3] = {fp8::amax(x), fp8::amax(w), fp8::amax(dy)};
    if (step == 0) {
      for (int i = 0; i < 3; ++i) {
        scales[i] = fp8::scale_from_amax(amaxes[i], i == 2 ? DType::f8e5m2 : DType::f8e4m3, 1);
      }
    }
    const RefLinear want =
        ref_linear(mat_of(x.detach()), mat_of(w.detach()), std::vector<float>(16, 0.0f), mat_of(dy),
                   fp8::Scaling::Delayed, 0, scales.data());
    expect_equal(y.detach(), want.y, "y");
    expect_equal(x.grad(), want.dx, "dx");
    expect_equal(w.grad(), want.dw, "dw");
    // The history: the next step's column is cleared, and the scales come from the last H steps.
    EXPECT_EQ(st.steps.item<int64_t>(), step + 1);
    const std::vector<float> hist = st.amax_history.to_vector<float>();
    for (int i = 0; i < 3; ++i) {
      if (h > 1) {
        EXPECT_EQ(hist[static_cast<size_t>(i * h + step % h)], amaxes[i]);
      }
      EXPECT_EQ(hist[static_cast<size_t>(i * h + (step + 1) % h)], 0.0f);
    }
    seen.push_back({amaxes[0], amaxes[1], amaxes[2]});
    for (int i = 0; i < 3; ++i) {
      float m = 0.0f;
      for (size_t t = seen.size() >= size_t(h) ? seen.size() - size_t(h) : 0; t < seen.size();
           ++t) {
        m = std::max(m, seen[t][static_cast<size_t>(i)]);
      }
      scales[i] = fp8::scale_from_amax(m, i == 2 ? DType::f8e5m2 : DType::f8e4m3, 1);
      EXPECT_EQ(st.scale.to_vector<float>()[static_cast<size_t>(i)], scales[i]);
    }
  }
  // A forward computed again (activation checkpointing) records nothing new; one without grad
  // (an evaluation) nothing at all.
  const std::vector<float> before = st.amax_history.to_vector<float>();
  const Tensor x = spread({6, 32});
  const auto changed_cells = [&] {
    const std::vector<float> after = st.amax_history.to_vector<float>();
    int changed = 0;
    for (size_t i = 0; i < before.size(); ++i) changed += before[i] != after[i];
    return changed;
  };
  {
    NoGradGuard ng;
    fp8::linear(x, w, b, recipe, &st);
  }
  EXPECT_EQ(changed_cells(), 0);
  fp8::linear(x, w, b, recipe, &st);
  fp8::linear(x, w, b, recipe, &st);
  EXPECT_EQ(changed_cells(), 2);  // the current step's input and weight cells, once
  EXPECT_EQ(st.steps.item<int64_t>(), 4);
}

TEST(Fp8, DelayedScalingUsesTheHistory) {
  manual_seed(testing::fresh_seed());
  delayed_steps(1);
  delayed_steps(3);
}

// Activation checkpointing recomputes the forward in backward, outside fp8::Autocast: the
// recomputation runs under the recipe the forward had, so the gradients are those of the FP8
// layers (and the delayed history records the step).
TEST(Fp8, CheckpointedLayersRecomputeInFp8) {
  manual_seed(testing::fresh_seed());
  const fp8::Recipe recipe{.scaling = fp8::Scaling::Delayed};
  nn::Linear a(32, 48), b(48, 16);
  fp8::prepare(a, recipe, [](const std::string&, const nn::Module&) { return true; });
  fp8::prepare(b, recipe, [](const std::string&, const nn::Module&) { return true; });
  const Tensor x = spread({8, 32}).requires_grad_(true);
  const Tensor dy = spread({8, 16});
  const auto fn = [&](const Tensor& in) { return b.forward(relu(a.forward(in))); };
  std::vector<std::vector<float>> grads[2];
  for (const bool checkpointed : {false, true}) {
    a.load_state_dict({{"fp8_steps", zeros({1}, {.dtype = DType::i64})}}, false);
    b.load_state_dict({{"fp8_steps", zeros({1}, {.dtype = DType::i64})}}, false);
    a.zero_grad();
    x.set_grad(Tensor());
    Tensor y;
    {
      fp8::Autocast in_fp8(recipe);
      y = checkpointed ? autograd::checkpoint(fn, x) : fn(x);
    }
    y.backward(dy);  // outside the scope, as a training loop does
    EXPECT_EQ(a.fp8_steps.item<int64_t>(), 1);
    grads[checkpointed] = {x.grad().to_vector<float>(), a.weight.grad().to_vector<float>()};
  }
  EXPECT_EQ(grads[1], grads[0]);
}

const nn::models::LlamaConfig kTinyLlama{.vocab_size = 64,
                                         .context_length = 16,
                                         .n_layer = 2,
                                         .n_head = 2,
                                         .n_kv_head = 1,
                                         .n_embd = 32,
                                         .mlp_hidden = 64};

TEST(Fp8, PrepareTakesTheInnerLinearLayersOfALlama) {
  manual_seed(testing::fresh_seed());
  nn::models::Llama model(kTinyLlama);
  const std::vector<std::string> taken = fp8::prepare(model, {.scaling = fp8::Scaling::Delayed});
  // The first (layer 0's q projection) and the last (the head) stay out.
  ASSERT_FALSE(taken.empty());
  EXPECT_EQ(std::count(taken.begin(), taken.end(), "lm_head"), 0);
  EXPECT_EQ(std::count(taken.begin(), taken.end(), "model.layers.0.self_attn.q_proj"), 0);
  EXPECT_EQ(std::count(taken.begin(), taken.end(), "model.layers.1.mlp.down_proj"), 1);
  const StateDict sd = model.state_dict();
  EXPECT_EQ(sd.count("model.layers.1.mlp.down_proj.fp8_amax_history"), 1u);
  EXPECT_EQ(sd.at("model.layers.1.mlp.down_proj.fp8_amax_history").shape(), (Shape{3, 16}));
  // Outside fp8::Autocast the layers are the plain ones; inside, the FP8 forms.
  const Tensor idx = randint(0, 64, {2, 16}, {.dtype = DType::i64});
  const Tensor plain = model.forward(idx);
  Tensor f8;
  {
    fp8::Autocast guard({.scaling = fp8::Scaling::Delayed});
    EXPECT_TRUE(fp8::is_enabled());
    f8 = model.forward(idx);
    cross_entropy(f8.reshape({32, 64}), idx.reshape({32})).backward();
  }
  EXPECT_FALSE(fp8::is_enabled());
  EXPECT_TRUE(all_close(model.forward(idx), plain, 0, 0));
  EXPECT_FALSE(all_close(f8, plain, 0, 0));
  const auto sq = [](const Tensor& t) { return std::sqrt(mul(t, t).sum().item<double>()); };
  const double rel = sq(sub(f8, plain)) / sq(plain);
  EXPECT_LT(rel, 0.1);  // FP8's rounding: e4m3 holds 3 bits
  EXPECT_EQ(model.state_dict().at("model.layers.1.mlp.down_proj.fp8_steps").item<int64_t>(), 1);
  // The state round-trips through a state dict into a fresh model.
  nn::models::Llama other(kTinyLlama);
  fp8::prepare(other, {.scaling = fp8::Scaling::Delayed});
  other.load_state_dict(model.state_dict());
  EXPECT_TRUE(all_close(other.state_dict().at("model.layers.1.mlp.up_proj.fp8_scale"),
                        model.state_dict().at("model.layers.1.mlp.up_proj.fp8_scale"), 0, 0));
  // A filter decides instead; layers whose sizes are not multiples of 16 are never taken.
  nn::Linear odd(24, 32);
  EXPECT_TRUE(
      fp8::prepare(odd, {}, [](const std::string&, const nn::Module&) { return true; }).empty());
}

// Every layer fp8::prepare takes runs in FP8: a GPT's MLP projection (whose GELU is otherwise in
// its GEMM's epilogue) too, each layer's history advancing once per training step.
TEST(Fp8, EveryLayerPrepareTakesRunsInFp8) {
  manual_seed(testing::fresh_seed());
  const nn::models::GPTConfig config{
      .vocab_size = 64, .context_length = 16, .n_layer = 2, .n_head = 2, .n_embd = 32};
  nn::models::GPT gpt(config);
  nn::models::Llama llama(kTinyLlama);
  for (nn::Module* model : {static_cast<nn::Module*>(&gpt), static_cast<nn::Module*>(&llama)}) {
    SCOPED_TRACE(model->name());
    const fp8::Recipe recipe{.scaling = fp8::Scaling::Delayed};
    const std::vector<std::string> taken = fp8::prepare(*model, recipe);
    ASSERT_GE(taken.size(), 6u);
    const Tensor idx = randint(0, 64, {2, 16}, {.dtype = DType::i64});
    {
      fp8::Autocast guard(recipe);
      cross_entropy(model->forward(idx).reshape({32, 64}), idx.reshape({32})).backward();
    }
    const StateDict sd = model->state_dict();
    for (const std::string& name : taken) {
      EXPECT_EQ(sd.at(name + ".fp8_steps").item<int64_t>(), 1) << name;
    }
  }
}

// A model trained in FP8 leaves its layers' FP8 state out of the files other tools read: a
// Hugging Face folder (which from_pretrained reads back, its logits the model's), GGUF, and the
// keys is_state_key names.
TEST(Fp8, PreparedModelsExportWithoutTheirTrainingState) {
  manual_seed(testing::fresh_seed());
  nn::models::LlamaConfig config = kTinyLlama;
  config.vocab_size = 256;  // the byte tokenizer's, for GGUF
  nn::models::Llama model(config);
  ASSERT_FALSE(fp8::prepare(model, {.scaling = fp8::Scaling::Delayed}).empty());
  const Tensor idx = randint(0, 256, {2, 16}, {.dtype = DType::i64});
  {
    fp8::Autocast guard({.scaling = fp8::Scaling::Delayed});
    cross_entropy(model.forward(idx).reshape({32, 256}), idx.reshape({32})).backward();
  }
  EXPECT_TRUE(fp8::is_state_key("model.layers.1.mlp.up_proj.fp8_amax_history"));
  EXPECT_TRUE(fp8::is_state_key("fp8_steps"));
  EXPECT_FALSE(fp8::is_state_key("model.layers.1.mlp.up_proj.weight"));
  EXPECT_FALSE(fp8::is_state_key("my_fp8_scale"));
  testing::TempDir dir;
  nn::models::save_pretrained(model, dir.str());
  for (const auto& [key, t] : load(dir.file("model.safetensors"))) {
    EXPECT_FALSE(fp8::is_state_key(key)) << key;
  }
  const nn::models::Pretrained back = nn::models::from_pretrained(dir.str());
  EXPECT_TRUE(all_close(back.module->forward(idx), model.forward(idx), 1e-6, 1e-6));
  gguf::export_model(model, data::BpeTokenizer(), dir.file("model.gguf"));
  EXPECT_TRUE(std::filesystem::exists(dir.file("model.gguf")));
}

TEST(Fp8, BadInputIsAnErrorNamingIt) {
  expect_error([] { fp8::parse_scaling("tensorwise"); }, {"tensorwise", "current, delayed"});
  expect_error([] { fp8::check_recipe({.amax_history_len = 0}); }, {"amax_history_len", "0"});
  expect_error([] { fp8::check_recipe({.margin = 40}); }, {"margin", "40"});
  expect_error([] { fp8::quantize(zeros({4}), DType::f8e4m3, 1, 1); }, {"fp8::quantize", "2-D"});
  expect_error([] { fp8::quantize(zeros({4, 4}), DType::bf16, 1, 1); }, {"format", "bf16"});
  const fp8::Quantized a = fp8::quantize(ones({4, 8}), DType::f8e4m3, 1, 8);
  const fp8::Quantized b = fp8::quantize(ones({4, 6}), DType::f8e4m3, 1, 6);
  expect_error([&] { fp8::gemm(a, b, DType::f32); }, {"fp8::gemm", "[4, 8]", "[4, 6]"});
  const fp8::Quantized c = fp8::quantize(ones({4, 8}), DType::f8e4m3, 1, 4);
  expect_error([&] { fp8::gemm(a, c, DType::f32); }, {"K tiles", "8", "4"});
  expect_error([] { fp8::linear(ones({2, 8}), ones({4, 6}), Tensor(), {}); }, {"last dim 6"});
  expect_error(
      [] {
        fp8::linear(ones({2, 8}), ones({4, 8}), Tensor(), {.scaling = fp8::Scaling::Delayed});
      },
      {"delayed", "LinearState"});
  fp8::LinearState st{zeros({3, 4}), ones({3}), zeros({1}, {.dtype = DType::i64})};
  expect_error(
      [&] {
        fp8::linear(ones({2, 8}), ones({4, 8}), Tensor(),
                    {.scaling = fp8::Scaling::Delayed, .amax_history_len = 8}, &st);
      },
      {"history holds 4", "asks for 8"});
}

}  // namespace
}  // namespace sinter

namespace sinter {
namespace {

// The index math of the CUDA kernels replayed on the host (kern/fp8.h): the quantization's tiles
// cover every element once, in the tile fp8::quantize gives it; and the GEMM's promotion, at every
// accumulator position of every block tile (wgmma::acc_pos), takes the scale of the row's tile of
// a and the column's tile of b for that block of k, as Note [fp8 gemm] writes it.
TEST(Fp8, KernelIndexMathReplaysOnTheHost) {
  for (const auto& [rows, cols, tr, tc] : {std::array<int64_t, 4>{5, 300, 1, 128},
                                           {200, 260, 128, 128},
                                           {130, 7, 1, 128},
                                           {37, 19, 37, 19},
                                           {9, 33, 4, 8}}) {
    SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " tiles " << tr << "x" << tc);
    const kern::Fp8QuantizeArgs q{.rows = rows, .cols = cols, .tile_rows = tr, .tile_cols = tc};
    const int64_t per_row = (cols + tc - 1) / tc, tiles = ((rows + tr - 1) / tr) * per_row;
    std::vector<int> hits(static_cast<size_t>(rows * cols), 0);
    for (int64_t t = 0; t < tiles; ++t) {
      const kern::Fp8Tile tile = kern::fp8_tile(q, t, per_row);
      for (int64_t e = 0; e < tile.h * tile.w; ++e) {
        const int64_t i = kern::fp8_tile_element(q, tile, e);
        ASSERT_GE(i, 0);
        ASSERT_LT(i, rows * cols);
        ++hits[static_cast<size_t>(i)];
        EXPECT_EQ((i / cols) / tr * per_row + (i % cols) / tc, t) << "element " << i;
      }
    }
    EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), rows * cols);
  }
  // The promotion's scales: a (m x k) in 1 x 128 tiles, b (n x k) in 128 x 128 blocks; the scale
  // tables hold their own coordinates, so a lookup shows which entry it read.
  const int64_t m = 200, n = 136, k = 384, cols = k / 128;
  std::vector<float> sa(static_cast<size_t>(m * cols)), sb(static_cast<size_t>(2 * cols));
  for (size_t i = 0; i < sa.size(); ++i) sa[i] = static_cast<float>(i);
  for (size_t i = 0; i < sb.size(); ++i) sb[i] = static_cast<float>(i);
  for (int tm = 0; tm < 2; ++tm) {
    for (int w = 0; w < 2; ++w) {
      for (int tid = 0; tid < 128; ++tid) {
        for (int i = 0; i < 64; ++i) {
          const cudak::wgmma::AccPos pos = cudak::wgmma::acc_pos(w, tid, i);
          const int64_t row = tm * 128 + pos.row, col = pos.col;
          for (int64_t kb = 0; kb < cols; ++kb) {
            const float a = kern::fp8_scale_at(sa.data(), row, m, 1, cols, kb);
            const float b = kern::fp8_scale_at(sb.data(), col, n, 128, cols, kb);
            EXPECT_EQ(a, static_cast<float>(std::min(row, m - 1) * cols + kb));
            EXPECT_EQ(b, static_cast<float>((col / 128) * cols + kb));
          }
        }
      }
    }
  }
}

// The Hopper FP8 GEMM (kernels/gemm_fp8.cu, Note [fp8 wgmma]) against the CPU's on fresh random
// operands: per-tensor and block scales, both operand formats, ragged m and n, k past one stage and
// ragged in its last one, each output dtype. The sums differ in order and in the tensor cores'
// accumulation within a stage, not in the operands or the scales.
TEST(CudaFp8, GemmMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  const cuda::DeviceProperties props = cuda::get_device_properties(0);
  if (props.major != 9) GTEST_SKIP() << "the FP8 GEMM needs a Hopper GPU; " << props.name;
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  manual_seed(seed);
  struct Case {
    int64_t m, n, k;
    bool block;
    DType fa;
    DType out;
    DType fb = DType::f8e4m3;
  };
  for (const Case& c : {Case{128, 128, 128, false, DType::f8e4m3, DType::f32},
                        Case{200, 136, 272, false, DType::f8e4m3, DType::bf16},
                        Case{200, 136, 272, true, DType::f8e4m3, DType::f32},
                        Case{96, 300, 512, true, DType::f8e5m2, DType::f16},
                        Case{257, 64, 1024, false, DType::f8e5m2, DType::f32},
                        Case{64, 80, 256, false, DType::f8e4m3, DType::f32, DType::f8e5m2}}) {
    SCOPED_TRACE(::testing::Message() << c.m << "x" << c.n << "x" << c.k
                                      << (c.block ? " block " : " per-tensor ") << c.fa);
    const Tensor a = spread({c.m, c.k}), b = spread({c.n, c.k});
    const fp8::Quantized qa =
        c.block ? fp8::quantize(a, c.fa, 1, 128) : fp8::quantize(a, c.fa, c.m, c.k);
    const fp8::Quantized qb =
        c.block ? fp8::quantize(b, c.fb, 128, 128) : fp8::quantize(b, c.fb, c.n, c.k);
    const Tensor want = fp8::gemm(qa, qb, DType::f32);
    const auto on_gpu = [](const fp8::Quantized& q) {
      return fp8::Quantized{q.data.to(Device::cuda(0)), q.scale_inv.to(Device::cuda(0)),
                            q.tile_rows, q.tile_cols};
    };
    Tensor got;
    try {
      got = fp8::gemm(on_gpu(qa), on_gpu(qb), c.out);
    } catch (const Error& e) {  // a build without sm_90a
      if (std::string(e.what()).find("sm_90a") == std::string::npos) throw;
      GTEST_SKIP() << e.what();
    }
    EXPECT_EQ(got.dtype(), c.out);
    const double scale = want.abs().max().item<double>();
    // The tensor cores' FP8 sums keep about 14 bits within a stage (Note [fp8 wgmma]); bf16 and
    // f16 round the output.
    const double tol = c.out == DType::f32 ? 1e-3 : 1e-2;
    EXPECT_TRUE(all_close(got.to(Device::cpu()).to(DType::f32), want, tol * scale, tol));
  }
}

// The quantization kernels against the CPU's on fresh random values: codes and scales bit for
// bit, per tile and with one scale (from the amax on the device, or given), and the amax.
TEST(CudaFp8, QuantizeAndAmaxMatchCpu) {
  SINTER_REQUIRE_CUDA();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  manual_seed(seed);
  const Device gpu = Device::cuda(0);
  struct Case {
    int64_t rows, cols, tr, tc;
    DType f;
  };
  for (const Case& c :
       {Case{5, 300, 1, 128, DType::f8e4m3}, Case{200, 260, 128, 128, DType::f8e4m3},
        Case{130, 7, 1, 128, DType::f8e5m2}, Case{37, 19, 37, 19, DType::f8e5m2}}) {
    SCOPED_TRACE(::testing::Message()
                 << c.rows << "x" << c.cols << " tiles " << c.tr << "x" << c.tc << " " << c.f);
    Tensor x = spread({c.rows, c.cols});
    // Zeros, a subnormal, and (in the last tile) an infinity and a NaN.
    float* p = static_cast<float*>(x.data_ptr());
    p[0] = 0.0f;
    p[1] = -0.0f;
    p[2] = 1e-40f;
    p[x.numel() - 1] = std::numeric_limits<float>::infinity();
    p[x.numel() - 2] = std::numeric_limits<float>::quiet_NaN();
    x = x.to(DType::bf16);
    float amax_cpu = 0.0f, amax_gpu = 0.0f;
    const fp8::Quantized want = fp8::quantize(x, c.f, c.tr, c.tc, std::nullopt, &amax_cpu);
    const fp8::Quantized got = fp8::quantize(x.to(gpu), c.f, c.tr, c.tc, std::nullopt, &amax_gpu);
    EXPECT_EQ(got.data.device(), gpu);
    EXPECT_EQ(code_bytes(got.data), code_bytes(want.data));
    EXPECT_EQ(got.scale_inv.to_vector<float>(), want.scale_inv.to_vector<float>());
    EXPECT_TRUE(std::isnan(amax_gpu) && std::isnan(amax_cpu));
    const Tensor finite = spread({c.rows, c.cols});
    EXPECT_EQ(fp8::amax(finite.to(gpu)), fp8::amax(finite));
    // One scale: given, and from the amax (with a margin).
    const fp8::Quantized g1 = fp8::quantize(x.to(gpu), c.f, c.rows, c.cols, 3.5f);
    const fp8::Quantized w1 = fp8::quantize(x, c.f, c.rows, c.cols, 3.5f);
    EXPECT_EQ(code_bytes(g1.data), code_bytes(w1.data));
    EXPECT_EQ(g1.scale_inv.to_vector<float>(), w1.scale_inv.to_vector<float>());
    const fp8::Quantized g2 = fp8::quantize_tensorwise(finite.to(gpu), c.f, 2);
    const fp8::Quantized w2 = fp8::quantize_tensorwise(finite, c.f, 2);
    EXPECT_EQ(code_bytes(g2.data), code_bytes(w2.data));
    EXPECT_EQ(g2.scale_inv.to_vector<float>(), w2.scale_inv.to_vector<float>());
  }
}

// fp8::linear on the GPU against the CPU under the current and block recipes: the same codes and
// scales, the GEMMs' sums within the tensor cores' accumulation.
TEST(CudaFp8, LinearMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  if (cuda::get_device_properties(0).major != 9) GTEST_SKIP() << "the FP8 GEMM needs Hopper";
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  manual_seed(seed);
  const Device gpu = Device::cuda(0);
  for (const fp8::Scaling s : {fp8::Scaling::Current, fp8::Scaling::Block}) {
    SCOPED_TRACE(fp8::scaling_name(s));
    const fp8::Recipe recipe{.scaling = s};
    const Tensor x = spread({4, 64, 256}), w = mul(randn({384, 256}), 0.05), b = randn({384});
    const Tensor dy = spread({4, 64, 384});
    Tensor grads[2][3], ys[2];
    for (int d = 0; d < 2; ++d) {
      const Device dev = d == 0 ? Device::cpu() : gpu;
      const Tensor xd = x.detach().to(dev).requires_grad_(true);
      const Tensor wd = w.detach().to(dev).requires_grad_(true);
      const Tensor bd = b.detach().to(dev).requires_grad_(true);
      ys[d] = fp8::linear(xd, wd, bd, recipe);
      ys[d].backward(dy.to(dev));
      grads[d][0] = xd.grad().to(Device::cpu());
      grads[d][1] = wd.grad().to(Device::cpu());
      grads[d][2] = bd.grad().to(Device::cpu());
    }
    const auto close = [](const Tensor& got, const Tensor& want) {
      return all_close(got, want, 1e-3 * want.abs().max().item<double>(), 1e-3);
    };
    EXPECT_TRUE(close(ys[1].detach().to(Device::cpu()), ys[0].detach()));
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(grads[1][i], grads[0][i])) << "gradient " << i;
  }
}
}  // namespace
}  // namespace sinter

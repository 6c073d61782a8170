// Tensor parallelism under `mpirun -np N` (N = 2 and 4 in CI), Note [tensor parallel linear]: an
// MLP of a column-parallel and a row-parallel Linear over all ranks equals the same MLP of whole
// Linears in one process, in f64: the output, the input's gradient, and each shard's gradient the
// rows or columns of the whole gradient; with the activation kept split between the layers, and
// joined and cut again (gather_output, a whole input to the row-parallel layer). Attention with
// its heads split, against MultiheadAttention; a GPT and a Llama trained split and whole. The
// vocabulary parallel embedding and cross-entropy against Embedding and cross_entropy. The errors
// of shapes that do not split.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "sinter/autocast.h"
#include "sinter/device_mesh.h"
#include "sinter/io.h"
#include "sinter/nn/init.h"
#include "sinter/optim/adam.h"
#include "sinter/optim/clip.h"
#include "sinter/optim/sgd.h"
#include "sinter/profiler.h"
#include "sinter/tensor_parallel.h"
#include "test_util.h"
#include "tp_test_util.h"

namespace sinter::testing {
namespace {

using dist::tp::ColumnParallelLinear;
using dist::tp::RowParallelLinear;

constexpr DType kF64 = DType::f64;

// The whole layers' parameters and input, the same on every rank (one seed).
struct Whole {
  Tensor w1, b1, w2, b2, x, coefficients;
  explicit Whole(int ranks) {
    Generator gen(20261205);
    const int64_t hidden = 4 * ranks;
    w1 = randn({hidden, 6}, {.dtype = kF64}, &gen);
    b1 = randn({hidden}, {.dtype = kF64}, &gen);
    w2 = randn({5, hidden}, {.dtype = kF64}, &gen);
    b2 = randn({5}, {.dtype = kF64}, &gen);
    x = randn({3, 2, 6}, {.dtype = kF64}, &gen);
    coefficients = randn({3, 2, 5}, {.dtype = kF64}, &gen);
  }
};

TEST(TensorParallel, ColumnThenRowEqualsTheWholeMlp) {
  const int n = world().size();
  const Whole whole(n);
  // One process: the whole MLP.
  std::vector<Tensor> ref = {whole.w1.detach().requires_grad_(), whole.b1.detach().requires_grad_(),
                             whole.w2.detach().requires_grad_(), whole.b2.detach().requires_grad_(),
                             whole.x.detach().requires_grad_()};
  const Tensor y_ref = linear(gelu(linear(ref[4], ref[0], ref[1])), ref[2], ref[3]);
  (y_ref * whole.coefficients).sum().backward();
  // Over all ranks; and over the tp groups of a dp x tp mesh, each a group of its own.
  std::vector<std::vector<dist::MeshDim>> meshes = {{{"tp", n}}};
  if (n % 2 == 0 && n > 2) meshes.push_back({{"dp", n / 2}, {"tp", 2}});
  const int64_t hidden = 4 * n;
  for (const auto& dims : meshes) {
    const dist::DeviceMesh mesh(world_ptr(), dims);
    const int r = mesh.coordinate("tp");
    const int64_t h = hidden / mesh.size("tp");
    for (const bool split_between : {true, false}) {
      SCOPED_TRACE(mesh.str() +
                   (split_between ? ", split between the layers" : ", gathered and cut again"));
      ColumnParallelLinear fc(6, hidden, mesh.group_ptr("tp"), {.gather_output = !split_between});
      RowParallelLinear proj(hidden, 5, mesh.group_ptr("tp"), {.input_is_parallel = split_between});
      fc.to(kF64);
      proj.to(kF64);
      fc.load_full(whole.w1, whole.b1);
      proj.load_full(whole.w2, whole.b2);
      const Tensor x = whole.x.detach().requires_grad_();
      const Tensor y = proj.forward(gelu(fc.forward(x)));
      (y * whole.coefficients).sum().backward();
      EXPECT_TRUE(all_close(y, y_ref, 1e-12, 1e-12));
      EXPECT_TRUE(all_close(x.grad(), ref[4].grad(), 1e-12, 1e-12));
      EXPECT_TRUE(all_close(fc.weight.grad(), ref[0].grad().narrow(0, r * h, h), 1e-12, 1e-12));
      EXPECT_TRUE(all_close(fc.bias.grad(), ref[1].grad().narrow(0, r * h, h), 1e-12, 1e-12));
      EXPECT_TRUE(all_close(proj.weight.grad(), ref[2].grad().narrow(1, r * h, h), 1e-12, 1e-12));
      EXPECT_TRUE(all_close(proj.bias.grad(), ref[3].grad(), 1e-12, 1e-12));
      // The shards are the layers' state: (hidden / tp, 6) and (5, hidden / tp).
      EXPECT_EQ(fc.named_parameters().size(), 2u);
      EXPECT_EQ(fc.weight.shape(), (Shape{h, 6}));
      EXPECT_EQ(proj.weight.shape(), (Shape{5, h}));
    }
  }
}

// Per Note [tensor parallel init], a layer's shard is its rows (or columns) of one whole draw from
// the default generator, the same generator state on every rank: the ranks' shards differ, the
// whole bias of a row-parallel layer is the same everywhere, and a ParallelGPT's shards differ
// across ranks too.
TEST(TensorParallel, ShardsArePartsOfOneWholeInitialization) {
  const int n = world().size(), r = world().rank();
  auto group = world_ptr();
  manual_seed(41);
  ColumnParallelLinear fc(3, 2 * n, group);
  RowParallelLinear proj(2 * n, 3, group);
  manual_seed(41);
  Tensor w = empty({2 * n, 3}), b = empty({2 * n});
  nn::init::uniform_(w, -1.0 / std::sqrt(3.0), 1.0 / std::sqrt(3.0));
  nn::init::uniform_(b, -1.0 / std::sqrt(3.0), 1.0 / std::sqrt(3.0));
  EXPECT_TRUE(all_close(fc.weight, w.narrow(0, 2 * r, 2), 0, 0));
  EXPECT_TRUE(all_close(fc.bias, b.narrow(0, 2 * r, 2), 0, 0));
  const Tensor biases = group->all_gather(proj.bias.detach());
  const Tensor wte = group->all_gather(
      dist::tp::ParallelGPT({.vocab_size = 2 * n, .n_layer = 1, .n_head = n, .n_embd = 2 * n},
                            group)
          .wte->weight.detach());
  for (int q = 1; q < n; ++q) {
    EXPECT_TRUE(all_close(biases[q], biases[0], 0, 0));
    EXPECT_FALSE(all_close(wte[q], wte[0], 0, 0)) << "rank " << q << "'s embedding rows";
  }
}

// gather and scatter on their own: join and cut along a middle dim, each the other's gradient.
TEST(TensorParallel, GatherAndScatterAreEachOthersGradient) {
  const int n = world().size(), r = world().rank();
  auto group = world_ptr();
  const Tensor mine = (full({2, 3, 4}, static_cast<double>(r), {.dtype = kF64}) +
                       arange(24, {.dtype = kF64}).reshape({2, 3, 4}))
                          .requires_grad_();
  const Tensor all = dist::tp::gather(mine, group, 1);
  ASSERT_EQ(all.shape(), (Shape{2, 3 * n, 4}));
  for (int q = 0; q < n; ++q) {
    EXPECT_TRUE(all_close(all.narrow(1, 3 * q, 3), mine.detach() - r + q, 0, 0));
  }
  const Tensor weights = arange(2 * 3 * n * 4, {.dtype = kF64}).reshape({2, 3 * n, 4});
  (all * weights).sum().backward();
  EXPECT_TRUE(all_close(mine.grad(), weights.narrow(1, 3 * r, 3), 0, 0));
  const Tensor whole = weights.detach().requires_grad_();
  const Tensor cut = dist::tp::scatter(whole, group, -2);
  EXPECT_TRUE(all_close(cut, weights.narrow(1, 3 * r, 3), 0, 0));
  (cut * (r + 1.0)).sum().backward();
  for (int q = 0; q < n; ++q) {
    EXPECT_TRUE(all_close(whole.grad().narrow(1, 3 * q, 3),
                          full({2, 3, 4}, q + 1.0, {.dtype = kF64}), 0, 0));
  }
}

// Per Note [tensor parallel attention], the heads split over the ranks give the whole layer's
// output and input gradient, causal or not, and each shard's gradient is the whole gradient's
// rows of this rank's heads (qkv) or columns of their features (out_proj).
TEST(TensorParallel, ParallelAttentionEqualsTheWholeLayer) {
  const int n = world().size(), r = world().rank();
  const int64_t heads = 2 * n, head = 3, e = heads * head, rows = e / n;
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    manual_seed(5);
    nn::MultiheadAttention whole(e, heads, {.causal = causal});
    whole.to(kF64);
    Generator gen(6);
    const Tensor x0 = randn({2, 5, e}, {.dtype = kF64}, &gen);
    const Tensor coefficients = randn({2, 5, e}, {.dtype = kF64}, &gen);
    const Tensor xw = x0.detach().requires_grad_();
    const Tensor want = whole.forward(xw);
    (want * coefficients).sum().backward();
    dist::tp::ParallelMultiheadAttention attn(e, heads, world_ptr(), {.causal = causal});
    attn.to(kF64);
    attn.load_full(whole);
    const Tensor x = x0.detach().requires_grad_();
    const Tensor got = attn.forward(x);
    (got * coefficients).sum().backward();
    EXPECT_TRUE(all_close(got, want, 1e-12, 1e-12));
    EXPECT_TRUE(all_close(x.grad(), xw.grad(), 1e-12, 1e-12));
    const Tensor qkv_grad = whole.qkv->weight.grad();
    const Tensor mine =
        cat({qkv_grad.narrow(0, r * rows, rows), qkv_grad.narrow(0, e + r * rows, rows),
             qkv_grad.narrow(0, 2 * e + r * rows, rows)},
            0);
    EXPECT_TRUE(all_close(attn.qkv->weight.grad(), mine, 1e-12, 1e-12));
    EXPECT_TRUE(all_close(attn.out_proj->weight.grad(),
                          whole.out_proj->weight.grad().narrow(1, r * rows, rows), 1e-12, 1e-12));
    EXPECT_TRUE(all_close(attn.out_proj->bias.grad(), whole.out_proj->bias.grad(), 1e-12, 1e-12));
  }
  if (n > 1) {
    expect_error([&] { dist::tp::ParallelMultiheadAttention(n + 1, n + 1, world_ptr()); },
                 {"ParallelMultiheadAttention", "num_heads " + std::to_string(n + 1)});
  }
}

// train_alike (tp_test_util.h) with AdamW, 20 steps.
template <class WholeModel, class SplitModel>
void train_alike_with_adamw(WholeModel& whole, SplitModel& split, int64_t vocab, int64_t t,
                            uint64_t seed, bool clip) {
  const optim::AdamWOptions options{.lr = 1e-2, .weight_decay = 0.1};
  optim::AdamW whole_opt(whole.parameters(), options), split_opt(split.parameters(), options);
  train_alike(whole, split, whole_opt, split_opt, vocab, t, seed, clip, 20);
}

// Per Note [tensor parallel gpt], 20 AdamW steps of a small GPT split over the ranks give the
// losses of the one-process GPT they were loaded from, in f64 within 1e-10, and its parameters
// after the steps: each shard the whole parameter's rows or columns, each whole parameter equal;
// the gradients clipped by the whole model's norm (tp::clip_grad_norm_, the same total);
// with the sequence split between the parallel regions too (Note [sequence parallel]), where the
// layer norms' and position embedding's gradients are summed over the ranks' slices.
TEST(TensorParallel, ParallelGptTrainsAsTheWholeGpt) {
  const int n = world().size(), r = world().rank();
  for (const auto& [tied, sequence_parallel] :
       std::vector<std::pair<bool, bool>>{{true, false}, {false, false}, {true, true}}) {
    SCOPED_TRACE(std::string(tied ? "tied head" : "untied head") +
                 (sequence_parallel ? ", sequence parallel" : ""));
    const nn::models::GPTConfig config{.vocab_size = 6 * n,
                                       .context_length = 4 * n,
                                       .n_layer = 2,
                                       .n_head = 2 * n,
                                       .n_embd = 4 * n,
                                       .tie_weights = tied};
    manual_seed(3);
    nn::models::GPT whole(config);
    whole.to(kF64);
    dist::tp::ParallelGPT split(config, world_ptr(), sequence_parallel);
    split.to(kF64);
    split.load_full(whole);
    train_alike_with_adamw(whole, split, config.vocab_size, 4 * n, 8, /*clip=*/true);
    // After the steps: the shards are the whole parameters' rows or columns.
    const int64_t e = config.n_embd, rows = e / n, v = config.vocab_size / n;
    EXPECT_TRUE(all_close(split.wte->weight, whole.wte->weight.narrow(0, r * v, v), 1e-10, 1e-12));
    EXPECT_TRUE(all_close(split.wpe->weight, whole.wpe->weight, 1e-10, 1e-12));
    const auto& block = static_cast<const nn::TransformerBlock&>(*(*whole.blocks)[1]);
    const auto& mine = static_cast<const dist::tp::ParallelTransformerBlock&>(*(*split.blocks)[1]);
    EXPECT_TRUE(all_close(mine.fc->weight, block.fc->weight.narrow(0, r * 4 * rows, 4 * rows),
                          1e-10, 1e-12));
    EXPECT_TRUE(all_close(mine.proj->weight, block.proj->weight.narrow(1, r * 4 * rows, 4 * rows),
                          1e-10, 1e-12));
    EXPECT_TRUE(all_close(mine.attn->out_proj->weight,
                          block.attn->out_proj->weight.narrow(1, r * rows, rows), 1e-10, 1e-12));
    EXPECT_TRUE(all_close(mine.ln2->weight, block.ln2->weight, 1e-10, 1e-12));
    if (!tied) {
      EXPECT_TRUE(all_close(split.lm_head->weight, whole.lm_head->weight.narrow(0, r * v, v), 1e-10,
                            1e-12));
    }
  }
  expect_error(
      [&] {
        dist::tp::ParallelGPT({.vocab_size = 2 * n, .n_head = n, .n_embd = 2 * n, .dropout = 1.5},
                              world_ptr());
      },
      {"ParallelGPT", "dropout 1.5"});
}

// Per Note [tensor parallel dropout], a GPT with dropout (0.1: after the embeddings, on the
// attention weights, on the residual branches) split over the ranks trains as the whole GPT does
// in one process from the same generator states: each rank's masks are its part of the whole
// model's (its heads' weights; under sequence parallelism its slice of the sequence), so 10 AdamW
// steps give the same losses within 1e-10 (f64).
TEST(TensorParallel, ParallelGptWithDropoutTrainsAsTheWholeGpt) {
  const int n = world().size();
  for (const bool sequence_parallel : {false, true}) {
    SCOPED_TRACE(sequence_parallel ? "sequence parallel" : "whole activations");
    const nn::models::GPTConfig config{.vocab_size = 6 * n,
                                       .context_length = 4 * n,
                                       .n_layer = 2,
                                       .n_head = 2 * n,
                                       .n_embd = 4 * n,
                                       .dropout = 0.1};
    manual_seed(33);
    nn::models::GPT whole(config);
    whole.to(kF64);
    dist::tp::ParallelGPT split(config, world_ptr(), sequence_parallel);
    split.to(kF64);
    split.load_full(whole);
    const optim::AdamWOptions options{.lr = 1e-2};
    optim::AdamW whole_opt(whole.parameters(), options), split_opt(split.parameters(), options);
    Generator data(34);
    for (int step = 0; step < 10; ++step) {
      const Tensor ids = randint(0, config.vocab_size, {2, 4 * n}, {.dtype = DType::i64}, &data);
      manual_seed(500 + static_cast<uint64_t>(step));
      whole_opt.zero_grad();
      const Tensor want =
          cross_entropy(whole.forward(ids).reshape({-1, config.vocab_size}), ids.reshape({-1}));
      want.backward();
      whole_opt.step();
      manual_seed(500 + static_cast<uint64_t>(step));  // the same draws on every rank
      split_opt.zero_grad();
      const Tensor got = split.loss(ids, ids);
      got.backward();
      split_opt.step();
      EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-10 * std::abs(want.item<double>()))
          << "step " << step;
    }
    // Without dropout the loss differs: the masks are really drawn.
    split.eval();
    whole.eval();
    const Tensor ids = zeros({1, 4 * n}, {.dtype = DType::i64});
    manual_seed(7);
    const double train_loss = [&] {
      split.train();
      return split.loss(ids, ids).item<double>();
    }();
    split.eval();
    EXPECT_NE(train_loss, split.loss(ids, ids).item<double>());
  }
}

// Memory under tp N (printed): every split layer's weights on a rank are 1/N of the whole layer's
// (the qkv, fc, proj and out_proj weights, the vocabulary's rows), and what stays whole (the layer
// norms, the position embedding) is the rest.
TEST(TensorParallel, EachRankHoldsItsShareOfTheSplitWeights) {
  const int n = world().size();
  const nn::models::GPTConfig config{
      .vocab_size = 8 * n, .context_length = 8, .n_layer = 2, .n_head = 2 * n, .n_embd = 8 * n};
  nn::models::GPT whole(config);
  dist::tp::ParallelGPT split(config, world_ptr());
  const dist::tp::SplitParameters parts = dist::tp::split_parameters(split);
  auto bytes = [](const std::vector<Tensor>& ts) {
    int64_t b = 0;
    for (const Tensor& t : ts) b += t.numel() * static_cast<int64_t>(element_size(t.dtype()));
    return b;
  };
  const int64_t split_bytes = bytes(parts.shards), whole_bytes = bytes(parts.whole);
  const int64_t all = bytes(whole.parameters());
  EXPECT_EQ(split_bytes * n + whole_bytes, all);
  if (world().rank() == 0) {
    std::printf("tp %d: a rank holds %lld bytes of split weights (1/%d of %lld) and %lld whole\n",
                n, static_cast<long long>(split_bytes), n,
                static_cast<long long>(all - whole_bytes), static_cast<long long>(whole_bytes));
  }
}

// Per Note [tensor parallel llama], 20 AdamW steps of a small Llama (grouped-query attention, two
// query heads per K/V head) split over the ranks give the one-process losses within 1e-10 (f64),
// untied, and tied with sequence parallelism; the shards are the whole parameters' parts after,
// and to_full joins them into the whole Llama's.
TEST(TensorParallel, ParallelLlamaTrainsAsTheWholeLlama) {
  const int n = world().size(), r = world().rank();
  for (const auto& [tied, sequence_parallel] :
       std::vector<std::pair<bool, bool>>{{false, false}, {true, true}}) {
    SCOPED_TRACE(std::string(tied ? "tied head" : "untied head") +
                 (sequence_parallel ? ", sequence parallel" : ""));
    const nn::models::LlamaConfig config{.vocab_size = 6 * n,
                                         .context_length = 4 * n,
                                         .n_layer = 2,
                                         .n_head = 2 * n,
                                         .n_kv_head = n,
                                         .n_embd = 4 * n,
                                         .mlp_hidden = 4 * n,
                                         .tie_weights = tied};
    manual_seed(23);
    nn::models::Llama whole(config);
    whole.to(kF64);
    dist::tp::ParallelLlama split(config, world_ptr(), sequence_parallel);
    split.to(kF64);
    split.load_full(whole);
    train_alike_with_adamw(whole, split, config.vocab_size, 4 * n, 24, /*clip=*/false);
    const auto& layer =
        static_cast<const nn::models::LlamaDecoderLayer&>(*(*whole.model->layers)[1]);
    const auto& mine = static_cast<const dist::tp::ParallelLlamaLayer&>(*(*split.layers)[1]);
    const int64_t kv = layer.self_attn->k_proj->weight.size(0) / n, hidden = 4;
    EXPECT_TRUE(all_close(mine.k_proj->weight,
                          layer.self_attn->k_proj->weight.narrow(0, r * kv, kv), 1e-10, 1e-12));
    EXPECT_TRUE(all_close(mine.down_proj->weight,
                          layer.mlp->down_proj->weight.narrow(1, r * hidden, hidden), 1e-10,
                          1e-12));
    EXPECT_TRUE(
        all_close(mine.input_layernorm->weight, layer.input_layernorm->weight, 1e-10, 1e-12));
    // to_full joins the shards back: every parameter of the whole Llama, by name.
    nn::models::Llama joined(config);
    joined.to(kF64);
    split.to_full(joined);
    const StateDict got = joined.state_dict(), want = whole.state_dict();
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [name, t] : want) {
      EXPECT_TRUE(all_close(got.at(name), t, 1e-10, 1e-12)) << name;
    }
  }
  if (n > 1) {
    expect_error(
        [&] {
          dist::tp::ParallelLlama({.n_head = 2 * n, .n_kv_head = 1, .n_embd = 4 * n}, world_ptr());
        },
        {"ParallelLlama", "n_kv_head 1", "divisible"});
  }
}

// Per ParallelGPT::to_full, a checkpoint that reshards: a GPT trained 5 SGD steps split over all
// ranks is written whole (to_full, a plain GPT's safetensors file under PyTorch's names), read back
// into a GPT in one process and into a GPT split over 2 ranks (the tp groups of a dp x tp mesh),
// and both go on for 5 steps with the losses of the run that was never interrupted (f64, 1e-10).
TEST(TensorParallel, ACheckpointOfTheWholeGptLoadsAtAnotherSize) {
  const int n = world().size();
  const nn::models::GPTConfig config{
      .vocab_size = 4 * n, .context_length = 8, .n_layer = 2, .n_head = 2 * n, .n_embd = 4 * n};
  manual_seed(31);
  dist::tp::ParallelGPT model(config, world_ptr());
  model.to(kF64);
  Generator gen(32);
  std::vector<std::pair<Tensor, Tensor>> batches;
  for (int i = 0; i < 10; ++i) {
    batches.emplace_back(randint(0, config.vocab_size, {2, 8}, {.dtype = DType::i64}, &gen),
                         randint(0, config.vocab_size, {2, 8}, {.dtype = DType::i64}, &gen));
  }
  // Steps [first, first + 5) of `m` with SGD (no state to carry over); their losses.
  const auto steps = [&](auto& m, int first, auto loss_of) {
    optim::SGD opt(m.parameters(), {.lr = 0.5});
    std::vector<double> losses;
    for (int i = first; i < first + 5; ++i) {
      opt.zero_grad();
      const Tensor loss = loss_of(m, batches[i].first, batches[i].second);
      loss.backward();
      opt.step();
      losses.push_back(loss.item<double>());
    }
    return losses;
  };
  const auto split_loss = [](auto& m, const Tensor& ids, const Tensor& targets) {
    return m.loss(ids, targets);
  };
  const auto whole_loss = [&](nn::models::GPT& m, const Tensor& ids, const Tensor& targets) {
    return cross_entropy(m.forward(ids).reshape({-1, config.vocab_size}), targets.reshape({-1}));
  };
  steps(model, 0, split_loss);
  // The whole model written once, by rank 0, to a file every rank then reads.
  nn::models::GPT saved(config);
  saved.to(kF64);
  model.to_full(saved);
  Tensor id =
      full({1}, world().rank() == 0 ? static_cast<double>(::getpid()) : 0.0, {.dtype = DType::i64});
  world().all_reduce(id);
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("sinter_tp_ckpt_" + std::to_string(id.item<int64_t>()) + ".safetensors"))
          .string();
  if (world().rank() == 0) save(saved.state_dict(), path);
  world().barrier();
  // Read twice: into the GPT that goes on in one process, and into the one the split run loads.
  nn::models::GPT whole(config), reloaded(config);
  whole.to(kF64);
  reloaded.to(kF64);
  for (nn::models::GPT* m : {&whole, &reloaded}) {
    StateDict target = m->state_dict();
    load_into(target, path);
  }
  world().barrier();
  if (world().rank() == 0) std::filesystem::remove(path);
  const std::vector<double> want = steps(model, 5, split_loss);
  const std::vector<double> in_one = steps(whole, 5, whole_loss);
  std::vector<dist::MeshDim> dims = {{"tp", n}};
  if (n % 2 == 0 && n > 2) dims = {{"dp", n / 2}, {"tp", 2}};
  const dist::DeviceMesh mesh(world_ptr(), dims);
  dist::tp::ParallelGPT other(config, mesh.group_ptr("tp"));
  other.to(kF64);
  other.load_full(reloaded);
  const std::vector<double> resharded = steps(other, 5, split_loss);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(in_one[i], want[i], 1e-10 * std::abs(want[i])) << "one process, step " << i;
    EXPECT_NEAR(resharded[i], want[i], 1e-10 * std::abs(want[i])) << mesh.str() << ", step " << i;
  }
}

// 20 AdamW steps of `whole` on the whole batch and of `split` (its copy over the mesh's tp
// group, sequence parallel) under DistributedDataParallel over the dp group, each dp rank on its
// two sequences: the losses within 1e-10 (f64).
template <class Whole, class Split>
void train_dp_tp(Whole& whole, const std::shared_ptr<Split>& split, const dist::DeviceMesh& mesh) {
  const int64_t batch = 2 * mesh.size("dp"), t = whole.config.context_length;
  const int64_t vocab = whole.config.vocab_size;
  split->load_full(whole);
  dist::DistributedDataParallel ddp(split, mesh.group_ptr("dp"));
  const optim::AdamWOptions options{.lr = 1e-2, .weight_decay = 0.1};
  optim::AdamW whole_opt(whole.parameters(), options), split_opt(split->parameters(), options);
  Generator gen(18);
  for (int step = 0; step < 20; ++step) {
    const Tensor ids = randint(0, vocab, {batch, t}, {.dtype = DType::i64}, &gen);
    const Tensor targets = randint(0, vocab, {batch, t}, {.dtype = DType::i64}, &gen);
    whole_opt.zero_grad();
    const Tensor want =
        cross_entropy(whole.forward(ids).reshape({-1, vocab}), targets.reshape({-1}));
    want.backward();
    whole_opt.step();
    // This dp rank's two sequences, through DDP (which averages the gradients over dp).
    const int64_t first = 2 * mesh.coordinate("dp");
    split_opt.zero_grad();
    Tensor got = split->loss(ids.narrow(0, first, 2), targets.narrow(0, first, 2));
    got.backward();
    split_opt.step();
    got = got.detach().clone();
    mesh.group("dp").all_reduce(got, dist::ReduceOp::Average);
    EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-10 * std::abs(want.item<double>()))
        << "step " << step;
  }
}

// Data and tensor parallelism composed on a dp x tp mesh (at an even world size): each dp group
// of tp ranks trains its part of the batch with its shards, DistributedDataParallel averages the
// gradients over the dp group, and 20 AdamW steps give the losses of the whole GPT and the whole
// Llama on the whole batch (the dp ranks' mean).
TEST(TensorParallel, DataAndTensorParallelTrainAsTheWholeModel) {
  const int n = world().size();
  if (n % 2 != 0) GTEST_SKIP() << "a dp x tp mesh needs an even world size";
  const dist::DeviceMesh mesh(world_ptr(), {{"dp", n / 2}, {"tp", 2}});
  {
    SCOPED_TRACE("GPT");
    const nn::models::GPTConfig config = mesh_gpt();
    manual_seed(17);
    nn::models::GPT whole(config);
    whole.to(kF64);
    auto split = std::make_shared<dist::tp::ParallelGPT>(config, mesh.group_ptr("tp"),
                                                         /*sequence_parallel=*/true);
    split->to(kF64);
    train_dp_tp(whole, split, mesh);
    EXPECT_TRUE(all_close(split->wpe->weight, whole.wpe->weight, 1e-10, 1e-12));
  }
  {
    SCOPED_TRACE("Llama");
    const nn::models::LlamaConfig config = mesh_llama();
    manual_seed(19);
    nn::models::Llama whole(config);
    whole.to(kF64);
    auto split = std::make_shared<dist::tp::ParallelLlama>(config, mesh.group_ptr("tp"),
                                                           /*sequence_parallel=*/true);
    split->to(kF64);
    train_dp_tp(whole, split, mesh);
    EXPECT_TRUE(all_close(split->norm->weight, whole.model->norm->weight, 1e-10, 1e-12));
  }
}

// Per Note [sequence parallel], the bytes a GPT's forward saves for backward (the profiler's
// count), split over the ranks with and without sequence parallelism: the layer norms' inputs and
// the column-parallel layers' gathered inputs are kept as slices, so less is saved; printed.
TEST(TensorParallel, SequenceParallelSavesFewerActivationBytes) {
  const int n = world().size();
  const nn::models::GPTConfig config{
      .vocab_size = 8 * n, .context_length = 8 * n, .n_layer = 2, .n_head = 2 * n, .n_embd = 8 * n};
  Generator gen(4);
  const Tensor ids = randint(0, config.vocab_size, {4, 8 * n}, {.dtype = DType::i64}, &gen);
  int64_t saved[2] = {0, 0};
  for (const bool sequence_parallel : {false, true}) {
    dist::tp::ParallelGPT model(config, world_ptr(), sequence_parallel);
    const profiler::Guard guard;
    const Tensor loss = model.loss(ids, ids);
    saved[sequence_parallel ? 1 : 0] = guard.saved_bytes();
    loss.backward();
  }
  if (world().rank() == 0) {
    std::printf("tp %d: a GPT forward saves %lld bytes, %lld with sequence parallelism (%.2fx)\n",
                n, static_cast<long long>(saved[0]), static_cast<long long>(saved[1]),
                static_cast<double>(saved[1]) / static_cast<double>(saved[0]));
  }
  EXPECT_GT(saved[1], 0);
  if (n > 1) {
    EXPECT_LT(saved[1], saved[0]);
  }
}

// gather_sequence and reduce_scatter_sequence (Note [sequence parallel]): join and sum-and-cut
// along the sequence dim, each the other's gradient.
TEST(TensorParallel, SequenceGatherAndReduceScatterAreEachOthersGradient) {
  const int n = world().size(), r = world().rank();
  auto group = world_ptr();
  const Tensor slice =
      (arange(2 * 2 * 3, {.dtype = kF64}).reshape({2, 2, 3}) + 100.0 * r).requires_grad_();
  const Tensor whole = dist::tp::gather_sequence(slice, group, 1);
  ASSERT_EQ(whole.shape(), (Shape{2, 2 * n, 3}));
  EXPECT_TRUE(all_close(whole.narrow(1, 2 * r, 2), slice.detach(), 0, 0));
  // Every rank weighs the whole sequence by (rank + 1): the slice's gradient is the sum of the
  // weights over the ranks, on its part of the sequence.
  (whole * (r + 1.0)).sum().backward();
  const double total = n * (n + 1) / 2.0;
  EXPECT_TRUE(all_close(slice.grad(), full({2, 2, 3}, total, {.dtype = kF64}), 0, 0));
  const Tensor base = arange(2 * 2 * n * 3, {.dtype = kF64}).reshape({2, 2 * n, 3});
  const Tensor mine = (base * (r + 1.0)).detach().requires_grad_();
  const Tensor cut = dist::tp::reduce_scatter_sequence(mine, group, -2);
  EXPECT_TRUE(all_close(cut, base.narrow(1, 2 * r, 2) * total, 0, 0));
  (cut * (r + 1.0)).sum().backward();
  for (int q = 0; q < n; ++q) {
    EXPECT_TRUE(all_close(mine.grad().narrow(1, 2 * q, 2),
                          full({2, 2, 3}, q + 1.0, {.dtype = kF64}), 0, 0));
  }
}

// Under bf16 autocast, a sequence-parallel column layer's backward (sequence_linear) runs in the
// forward's dtype and gives each input its gradient in its own dtype, close to the f32 one.
TEST(TensorParallel, SequenceLinearUnderAutocast) {
  const int n = world().size();
  auto group = world_ptr();
  manual_seed(12);
  ColumnParallelLinear fc(8, 4 * n, group, {.sequence_parallel = true});
  Generator gen(13);
  const Tensor x0 = randn({2, 3, 8}, {}, &gen);
  std::vector<Tensor> grads[2];
  for (const bool amp : {false, true}) {
    fc.zero_grad();
    const Tensor x = x0.detach().requires_grad_();
    {
      std::optional<autocast::Guard> guard;
      if (amp) guard.emplace(DeviceType::cpu, DType::bf16);
      const Tensor y = fc.forward(x);
      EXPECT_EQ(y.dtype(), amp ? DType::bf16 : DType::f32);
      y.to(DType::f32).sum().backward();
    }
    grads[amp ? 1 : 0] = {x.grad(), fc.weight.grad(), fc.bias.grad()};
  }
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(grads[1][i].dtype(), DType::f32);
    EXPECT_TRUE(all_close(grads[1][i], grads[0][i], 3e-2, 3e-2)) << "gradient " << i;
  }
}

// Per Note [vocabulary parallel], the embedding of ids in every rank's range (and the first and
// last id) equals Embedding's, and its shard's gradient is the whole gradient's rows.
TEST(TensorParallel, VocabParallelEmbeddingEqualsTheWholeTable) {
  const int n = world().size(), r = world().rank();
  const int64_t vocab = 5 * n, rows = 5;
  Generator gen(7);
  const Tensor table = randn({vocab, 3}, {.dtype = kF64}, &gen);
  const Tensor ids =
      from_vector<int64_t>({0, vocab - 1, 4, 5 % vocab, 2 * n % vocab, vocab - 1, 1, 3}, {2, 4});
  const Tensor coefficients = randn({2, 4, 3}, {.dtype = kF64}, &gen);
  const Tensor whole = table.detach().requires_grad_();
  const Tensor want = embedding(whole, ids);
  (want * coefficients).sum().backward();
  dist::tp::VocabParallelEmbedding emb(vocab, 3, world_ptr());
  emb.to(kF64);
  emb.load_full(table);
  const Tensor got = emb.forward(ids);
  (got * coefficients).sum().backward();
  EXPECT_TRUE(all_close(got, want, 0, 0));
  EXPECT_TRUE(all_close(emb.weight.grad(), whole.grad().narrow(0, r * rows, rows), 0, 0));
}

// Each rank's slice of the logits gives cross_entropy of the whole logits (every reduction,
// ignore_index, label smoothing), and each slice's gradient is the whole gradient's columns;
// targets in every rank's range, and rows with a large shift (the max keeps exp finite).
TEST(TensorParallel, VocabParallelCrossEntropyEqualsTheWholeLoss) {
  const int n = world().size(), r = world().rank();
  const int64_t width = 3, classes = width * n;
  Generator gen(11);
  Tensor logits = randn({6, classes}, {.dtype = kF64}, &gen) * 4.0;
  logits = logits + from_vector<double>({0, 800, -700, 0, 3, 0}, {6, 1});
  const Tensor target =
      from_vector<int64_t>({0, classes - 1, 2, -100, width % classes, classes / 2}, {6});
  for (const Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    for (const double smoothing : {0.0, 0.1}) {
      SCOPED_TRACE("reduction " + std::to_string(static_cast<int>(reduction)) + ", smoothing " +
                   std::to_string(smoothing));
      const CrossEntropyOptions options{.reduction = reduction, .label_smoothing = smoothing};
      const Tensor whole = logits.detach().requires_grad_();
      const Tensor want = cross_entropy(whole, target, options);
      const Tensor weights = reduction == Reduction::None ? arange(6, {.dtype = kF64}) + 1.0
                                                          : full({}, 1.0, {.dtype = kF64});
      (want * weights).sum().backward();
      const Tensor mine = logits.narrow(1, r * width, width).detach().requires_grad_();
      const Tensor got = dist::tp::vocab_parallel_cross_entropy(mine, target, world_ptr(), options);
      (got * weights).sum().backward();
      EXPECT_TRUE(all_close(got, want, 1e-12, 1e-12));
      EXPECT_TRUE(all_close(mine.grad(), whole.grad().narrow(1, r * width, width), 1e-12, 1e-12));
    }
  }
  // Every target ignored: Mean is NaN with a zero gradient, as cross_entropy's (Note [all
  // ignored]).
  const Tensor ignored = full({6}, -100.0, {.dtype = DType::i64});
  const Tensor mine = logits.narrow(1, r * width, width).detach().requires_grad_();
  const Tensor none = dist::tp::vocab_parallel_cross_entropy(mine, ignored, world_ptr());
  EXPECT_TRUE(std::isnan(none.item<double>()));
  EXPECT_TRUE(std::isnan(cross_entropy(logits, ignored).item<double>()));
  none.backward();
  EXPECT_TRUE(all_close(mine.grad(), zeros({6, width}, {.dtype = kF64}), 0, 0));
  // bf16 logits: the loss is computed in f32 and rounded once, as cross_entropy's.
  const Tensor half = logits.to(DType::bf16);
  EXPECT_TRUE(all_close(
      dist::tp::vocab_parallel_cross_entropy(half.narrow(1, r * width, width), target, world_ptr())
          .to(kF64),
      cross_entropy(half, target).to(kF64), 0, 0));
  const Tensor slice = logits.narrow(1, 0, width);
  expect_error(
      [&] {
        (void)dist::tp::vocab_parallel_cross_entropy(slice, target, world_ptr(),
                                                     {.weight = ones({classes}, {.dtype = kF64})});
      },
      {"vocab_parallel_cross_entropy", "class weight"});
  expect_error(
      [&] {
        (void)dist::tp::vocab_parallel_cross_entropy(
            slice, from_vector<int64_t>({0, classes, 1, 0, 2, 0}, {6}), world_ptr());
      },
      {"vocab_parallel_cross_entropy", "target " + std::to_string(classes), "out of range"});
  expect_error(
      [&] {
        (void)dist::tp::vocab_parallel_cross_entropy(slice, target, world_ptr(),
                                                     {.label_smoothing = 1.5});
      },
      {"label_smoothing", "1.5"});
}

TEST(TensorParallel, ShapesThatDoNotSplitAreErrors) {
  const int n = world().size();
  auto group = world_ptr();
  if (n > 1) {  // every size splits over one rank
    expect_error([&] { ColumnParallelLinear(4, 4 * n + 1, group); },
                 {"ColumnParallelLinear", std::to_string(4 * n + 1), "divisible",
                  std::to_string(n) + " ranks"});
    expect_error([&] { RowParallelLinear(4 * n + 1, 4, group); },
                 {"RowParallelLinear", "in_features divisible"});
    expect_error(
        [&] {
          (void)dist::tp::scatter(zeros({2, 2 * n + 1}), group, 1);
        },
        {"tp::scatter", "does not split over"});
  }
  ColumnParallelLinear fc(6, 2 * n, group);
  expect_error([&] { (void)fc.forward(zeros({2, 5})); }, {"ColumnParallelLinear", "6", "[2, 5]"});
  expect_error(
      [&] {
        fc.load_full(zeros({2 * n, 5}), zeros({2 * n}));
      },
      {"load_full", "(" + std::to_string(2 * n) + ", 6)"});
  expect_error([&] { (void)dist::tp::gather(zeros({2}), group, 3); }, {"tp::gather", "dim 3"});
}

}  // namespace
}  // namespace sinter::testing

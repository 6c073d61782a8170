// Fully sharded data parallel under `mpirun -np N` (N = 2 and 4 in CI), Note [fully sharded data
// parallel]: a GPT and a Llama trained sharded over the ranks, each rank on its slice of the batch,
// against the same model trained in one process on the whole batch (f64): the losses, the clipped
// norms and the parameters after; with the blocks as units or the model as one, checkpointed
// blocks, parameters kept from forward to backward, no prefetch. The memory each rank holds between
// steps; what overlaps what; gradient accumulation; mixed precision; state dicts; composition with
// tensor parallelism on a mesh; the errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "sinter/cuda.h"
#include "sinter/device_mesh.h"
#include "sinter/dist_checkpoint.h"
#include "sinter/fsdp.h"
#include "sinter/io.h"
#include "sinter/optim/adam.h"
#include "sinter/optim/clip.h"
#include "sinter/optim/sgd.h"
#include "sinter/tensor_parallel.h"
#include "test_util.h"

namespace sinter::dist {
// Defined in src/dist/fsdp.cpp (the friend of FullyShardedDataParallel).
std::vector<std::string> fsdp_debug_events(const FullyShardedDataParallel& fsdp);
}  // namespace sinter::dist

namespace sinter::testing {
namespace {

constexpr DType kF64 = DType::f64;

nn::models::GPTConfig small_gpt(bool tied, bool checkpoint) {
  return {.vocab_size = 11,
          .context_length = 6,
          .n_layer = 3,
          .n_head = 2,
          .n_embd = 6,
          .tie_weights = tied,
          .checkpoint_blocks = checkpoint};
}

// A GPT in f64 drawn from `seed`, and a copy of one with tensors of its own (to shard).
nn::models::GPT f64_gpt(const nn::models::GPTConfig& config, uint64_t seed) {
  manual_seed(seed);
  nn::models::GPT gpt(config);
  gpt.to(kF64);
  return gpt;
}

std::shared_ptr<nn::models::GPT> copy_of(const nn::models::GPT& whole) {
  auto model = std::make_shared<nn::models::GPT>(whole.config);
  model->to(kF64);
  model->load_state_dict(whole.state_dict());
  return model;
}

// `steps` AdamW steps (weight decay, and clipping at 0.5 when `clip`) of `whole` on batches of
// 2 N sequences and of the sharded model on this rank's two of them: the mean of the ranks' losses
// is the whole batch's loss (each rank has as many tokens), and the gradients FSDP averages are
// the whole batch's. Checks the losses and the clipped norms within 1e-10.
void train_alike(nn::Module& whole, nn::Module& model, dist::FullyShardedDataParallel& fsdp,
                 int64_t vocab, int64_t t, int steps, bool clip, uint64_t seed) {
  const int n = world().size(), r = world().rank();
  const optim::AdamWOptions options{.lr = 1e-2, .weight_decay = 0.1};
  optim::AdamW whole_opt(whole.parameters(), options), opt(fsdp.parameters(), options);
  Generator gen(seed);
  for (int step = 0; step < steps; ++step) {
    const Tensor ids = randint(0, vocab, {2 * n, t}, {.dtype = DType::i64}, &gen);
    const Tensor targets = randint(0, vocab, {2 * n, t}, {.dtype = DType::i64}, &gen);
    whole_opt.zero_grad();
    const Tensor want =
        cross_entropy(whole.forward(ids).reshape({-1, vocab}), targets.reshape({-1}));
    want.backward();
    const double want_norm = clip ? optim::clip_grad_norm_(whole.parameters(), 0.5) : 0.0;
    whole_opt.step();
    opt.zero_grad();
    Tensor got = fsdp.call([&] {
      return cross_entropy(model.forward(ids.narrow(0, 2 * r, 2)).reshape({-1, vocab}),
                           targets.narrow(0, 2 * r, 2).reshape({-1}));
    });
    got.backward();
    const double got_norm = clip ? fsdp.clip_grad_norm_(0.5) : 0.0;
    opt.step();
    got = got.detach().clone();
    world().all_reduce(got, dist::ReduceOp::Average);
    EXPECT_NEAR(got_norm, want_norm, 1e-10 * want_norm) << "step " << step;
    EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-10 * std::abs(want.item<double>()))
        << "step " << step;
  }
}

// Every entry of the sharded model's gathered state dict equals the whole model's.
void expect_same_state(const dist::FullyShardedDataParallel& fsdp, const nn::Module& whole) {
  const StateDict got = fsdp.state_dict(), want = whole.state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(all_close(got.at(name), t, 1e-10, 1e-12)) << name;
  }
}

// Each shard's gradient is its part (elements [rank chunk, ...) of the flattened whole) of the
// gradient of the same parameter of `whole`, by named_parameters() order.
void expect_shard_grads(const dist::FullyShardedDataParallel& fsdp, const nn::Module& whole,
                        double atol, double rtol) {
  const int r = world().rank();
  const auto shards = fsdp.named_parameters();
  const auto want = whole.named_parameters();
  ASSERT_EQ(shards.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(shards[k].first, want[k].first);
    const Tensor g = want[k].second.grad().reshape({-1});
    const int64_t chunk = shards[k].second.numel();
    const int64_t begin = std::min(g.numel(), r * chunk), end = std::min(g.numel(), begin + chunk);
    EXPECT_TRUE(all_close(shards[k].second.grad().narrow(0, 0, end - begin),
                          g.narrow(0, begin, end - begin), atol, rtol))
        << want[k].first;
  }
}

struct Variant {
  const char* what;
  bool tied = true, checkpoint = false, blocks_as_units = true, reshard = true, prefetch = true;
};

// Per Note [fully sharded data parallel], 20 AdamW steps of a small GPT sharded over the ranks
// (each on its slice of the batch) give the one-process GPT's losses on the whole batch within
// 1e-10 (f64), with clipping by the global norm, and its parameters after; for each layout of
// units and option.
TEST(Fsdp, GptTrainsAsTheWholeGpt) {
  for (const Variant& v :
       {Variant{.what = "blocks as units"}, Variant{.what = "untied, clipped", .tied = false},
        Variant{.what = "checkpointed blocks", .checkpoint = true},
        Variant{.what = "one unit", .blocks_as_units = false},
        Variant{.what = "kept whole from forward to backward", .reshard = false},
        Variant{.what = "no prefetch", .prefetch = false}}) {
    SCOPED_TRACE(v.what);
    const nn::models::GPTConfig config = small_gpt(v.tied, v.checkpoint);
    nn::models::GPT whole = f64_gpt(config, 5);
    // Another initialization: the wrapper takes rank 0's parameters, which are the whole model's.
    manual_seed(6 + static_cast<uint64_t>(world().rank()));
    auto model = std::make_shared<nn::models::GPT>(config);
    model->to(kF64);
    if (world().rank() == 0) model->load_state_dict(whole.state_dict());
    dist::FullyShardedDataParallel fsdp(
        model, world_ptr(),
        {.units = v.blocks_as_units ? model->blocks->children()
                                    : std::vector<std::shared_ptr<nn::Module>>{},
         .reshard_after_forward = v.reshard,
         .prefetch = v.prefetch});
    train_alike(whole, *model, fsdp, config.vocab_size, config.context_length, 20,
                /*clip=*/!v.tied, 7);
    expect_same_state(fsdp, whole);
  }
}

// The same for a small Llama (grouped-query attention, SwiGLU), its decoder layers as units.
TEST(Fsdp, LlamaTrainsAsTheWholeLlama) {
  const nn::models::LlamaConfig config{.vocab_size = 10,
                                       .context_length = 6,
                                       .n_layer = 2,
                                       .n_head = 4,
                                       .n_kv_head = 2,
                                       .n_embd = 8,
                                       .mlp_hidden = 12};
  manual_seed(8);
  nn::models::Llama whole(config);
  whole.to(kF64);
  auto model = std::make_shared<nn::models::Llama>(config);
  model->to(kF64);
  model->load_state_dict(whole.state_dict());
  dist::FullyShardedDataParallel fsdp(model, world_ptr(),
                                      {.units = model->model->layers->children()});
  EXPECT_EQ(fsdp.unit_names(), (std::vector<std::string>{"", "model.layers.0", "model.layers.1"}));
  train_alike(whole, *model, fsdp, config.vocab_size, config.context_length, 20, /*clip=*/true, 9);
  expect_same_state(fsdp, whole);
}

// Per Note [fully sharded data parallel], what a rank holds between steps: no parameter or
// gradient whole, its shards and their gradients 1/N of the model (plus under N elements of
// padding per parameter), and an AdamW state of two tensors per shard; printed.
TEST(Fsdp, EachRankHoldsItsShareBetweenSteps) {
  const int n = world().size();
  const nn::models::GPTConfig config = small_gpt(false, false);
  auto model = std::make_shared<nn::models::GPT>(config);
  dist::FullyShardedDataParallel fsdp(model, world_ptr(), {.units = model->blocks->children()});
  optim::AdamW opt(fsdp.parameters(), {.lr = 1e-3});
  const int64_t params = static_cast<int64_t>(model->parameters().size());
  Generator gen(10);
  for (int step = 0; step < 2; ++step) {
    const Tensor ids = randint(0, config.vocab_size, {2, 6}, {.dtype = DType::i64}, &gen);
    opt.zero_grad();
    fsdp.call([&] {
          return cross_entropy(model->forward(ids).reshape({-1, config.vocab_size}),
                               ids.reshape({-1}));
        })
        .backward();
    opt.step();
  }
  const dist::FSDPMemory m = fsdp.memory();
  const int64_t padding = params * (n - 1) * 4;  // at most, in bytes of f32
  EXPECT_EQ(m.whole_params, 0);
  EXPECT_EQ(m.whole_grads, 0);
  EXPECT_GE(m.shards * n, m.whole_total);
  EXPECT_LE(m.shards * n, m.whole_total + padding);
  EXPECT_EQ(m.shard_grads, m.shards);
  int64_t state = 0;
  for (const auto& [key, t] : opt.state_dict()) {
    if (t.dim() > 0) state += t.numel() * static_cast<int64_t>(element_size(t.dtype()));
  }
  EXPECT_EQ(state, 2 * m.shards);
  if (world().rank() == 0) {
    std::printf(
        "fsdp %d: a rank holds %lld of %lld parameter bytes (%.3f), as many of gradients "
        "and twice as many of AdamW state; nothing whole between steps\n",
        n, static_cast<long long>(m.shards), static_cast<long long>(m.whole_total),
        static_cast<double>(m.shards) / static_cast<double>(m.whole_total));
  }
}

// What overlaps what (Note [fully sharded data parallel]): in forward, block k + 1's gather is
// issued before block k has run (before block k is freed); in backward, block k - 1's gather is
// issued before block k's gradients are reduce-scattered, and block k's reduce-scatter is launched
// before block k - 1's backward waits for its parameters. The order comes from the last forward,
// so the second step shows it.
TEST(Fsdp, GathersAndReduceScattersOverlapTheBlocks) {
  const nn::models::GPTConfig config = small_gpt(true, false);
  auto model = std::make_shared<nn::models::GPT>(config);
  dist::FullyShardedDataParallel fsdp(model, world_ptr(), {.units = model->blocks->children()});
  const Tensor ids = zeros({1, 6}, {.dtype = DType::i64});
  for (int step = 0; step < 2; ++step) {
    fsdp.reset_traffic();
    fsdp.call([&] { return model->forward(ids).sum(); }).backward();
  }
  // A step's traffic: the root gathered once, each block twice (forward and backward); every
  // unit reduce-scattered once, all N parts of every padded parameter.
  const dist::FSDPTraffic t = fsdp.traffic();
  EXPECT_EQ(t.gathers, 7);
  EXPECT_EQ(t.reduces, 4);
  EXPECT_EQ(t.reduced_bytes, fsdp.memory().shards * world().size());
  EXPECT_GT(t.gathered_bytes, t.reduced_bytes);
  EXPECT_LT(t.gathered_bytes, 2 * t.reduced_bytes);
  const std::vector<std::string> events = dist::fsdp_debug_events(fsdp);
  auto at = [&](const std::string& e, size_t from = 0) {
    auto it = std::find(events.begin() + static_cast<std::ptrdiff_t>(from), events.end(), e);
    EXPECT_NE(it, events.end()) << e;
    return static_cast<size_t>(it - events.begin());
  };
  std::string all;
  for (const std::string& e : events) all += e + "; ";
  SCOPED_TRACE(all);
  EXPECT_LT(at("gather blocks.1"), at("free blocks.0"));
  EXPECT_LT(at("gather blocks.2"), at("free blocks.1"));
  const size_t backward = at("free blocks.2") + 1;
  EXPECT_LT(at("gather blocks.1", backward), at("reduce blocks.2"));
  EXPECT_LT(at("reduce blocks.2"), at("wait blocks.1", backward));
  EXPECT_LT(at("reduce blocks.1"), at("wait blocks.0", backward));
  // Every unit, the root last, freed as backward finishes it; after its end, only the waits.
  EXPECT_LT(at("reduce blocks.0"), at("free ", backward));
  EXPECT_LT(at("free ", backward), at("backward end"));
  for (size_t k = at("backward end") + 1; k < events.size(); ++k) {
    EXPECT_EQ(events[k].rfind("reduced ", 0), 0u) << events[k];
  }
}

// Gradient accumulation: two backwards under no_sync and a third after it give each shard its
// part of the whole model's gradient summed over the three batches (every rank's slices), and
// no_sync keeps the whole gradients on the parameters meanwhile.
TEST(Fsdp, NoSyncAccumulatesTheWholeGradient) {
  const int n = world().size(), r = world().rank();
  const nn::models::GPTConfig config = small_gpt(true, false);
  nn::models::GPT whole = f64_gpt(config, 11);
  auto model = copy_of(whole);
  dist::FullyShardedDataParallel fsdp(model, world_ptr(), {.units = model->blocks->children()});
  Generator gen(12);
  for (int micro = 0; micro < 3; ++micro) {
    const Tensor ids = randint(0, config.vocab_size, {2 * n, 6}, {.dtype = DType::i64}, &gen);
    auto loss = [&](nn::Module& m, const Tensor& x) {
      return cross_entropy(m.forward(x).reshape({-1, config.vocab_size}), x.reshape({-1}));
    };
    loss(whole, ids).backward();
    if (micro < 2) {
      auto guard = fsdp.no_sync();
      fsdp.call([&] { return loss(*model, ids.narrow(0, 2 * r, 2)); }).backward();
      EXPECT_GT(fsdp.memory().whole_grads, 0);
      EXPECT_EQ(fsdp.memory().shard_grads, 0);
    } else {
      fsdp.call([&] { return loss(*model, ids.narrow(0, 2 * r, 2)); }).backward();
    }
  }
  EXPECT_EQ(fsdp.memory().whole_grads, 0);
  // The whole batch's mean loss is the mean of the ranks' (as many tokens each): its gradient is
  // the average FSDP takes.
  expect_shard_grads(fsdp, whole, 1e-10, 1e-12);
}

// Mixed precision: parameters gathered and computed in bf16, gradients reduced in f32, the shards
// and AdamW's state in f32. Against the same arithmetic written out in one process: a bf16 copy
// of the f32 parameters runs each rank's slice, the f32 gradients are averaged, AdamW steps the
// f32 parameters. The averaging's order differs (to f32 rounding), so the losses agree to 1e-3.
TEST(Fsdp, MixedPrecisionGathersInBf16AndReducesInF32) {
  const int n = world().size(), r = world().rank();
  const nn::models::GPTConfig config = small_gpt(true, false);
  manual_seed(13);
  nn::models::GPT master(config), low(config);
  auto model = std::make_shared<nn::models::GPT>(config);
  model->load_state_dict(master.state_dict());
  low.to(DType::bf16);
  dist::FullyShardedDataParallel fsdp(
      model, world_ptr(), {.units = model->blocks->children(), .param_dtype = DType::bf16});
  // Runs after the wrapper's own pre hook: the block's parameters are gathered by then.
  DType seen = DType::f32;
  model->blocks->children()[0]->register_forward_pre_hook(
      [&](nn::Module& m) { seen = m.parameters()[0].dtype(); });
  const optim::AdamWOptions options{.lr = 1e-2};
  optim::AdamW master_opt(master.parameters(), options), opt(fsdp.parameters(), options);
  Generator gen(14);
  for (int step = 0; step < 3; ++step) {
    const Tensor ids = randint(0, config.vocab_size, {2 * n, 6}, {.dtype = DType::i64}, &gen);
    auto loss = [&](nn::Module& m, const Tensor& x) {
      return cross_entropy(m.forward(x).reshape({-1, config.vocab_size}).to(DType::f32),
                           x.reshape({-1}));
    };
    // The written-out reference: every rank's slice on the bf16 copy, gradients in f32.
    master_opt.zero_grad();
    double want = 0.0;
    for (int k = 0; k < n; ++k) {
      StateDict rounded = master.state_dict();
      for (auto& [key, t] : rounded) t = t.to(DType::bf16);
      low.load_state_dict(rounded);
      low.zero_grad();
      const Tensor l = loss(low, ids.narrow(0, 2 * k, 2));
      l.backward();
      want += l.item<double>() / n;
      const std::vector<Tensor> lp = low.parameters(), mp = master.parameters();
      for (size_t i = 0; i < mp.size(); ++i) {
        const Tensor g = lp[i].grad().to(DType::f32) / n;
        if (mp[i].grad().defined()) {
          mp[i].grad().add_(g);
        } else {
          mp[i].set_grad(g);
        }
      }
    }
    master_opt.step();
    opt.zero_grad();
    Tensor got = fsdp.call([&] { return loss(*model, ids.narrow(0, 2 * r, 2)); });
    got.backward();
    // Averaged in f32: each shard's gradient is its part of the reference's to f32 rounding (a
    // reduction in bf16 would be off by its 8 bits).
    const std::vector<Tensor> want_grads = master.parameters();
    for (size_t k = 0; k < want_grads.size(); ++k) {
      const Tensor g = want_grads[k].grad().reshape({-1});
      const Tensor shard = fsdp.parameters()[k].grad();
      const int64_t begin = std::min(g.numel(), r * shard.numel());
      const int64_t end = std::min(g.numel(), begin + shard.numel());
      EXPECT_TRUE(
          all_close(shard.narrow(0, 0, end - begin), g.narrow(0, begin, end - begin), 1e-6, 1e-5))
          << "step " << step << ", parameter " << k;
    }
    opt.step();
    EXPECT_EQ(seen, DType::bf16);
    for (const Tensor& s : fsdp.parameters()) {
      EXPECT_EQ(s.dtype(), DType::f32);
      EXPECT_EQ(s.grad().dtype(), DType::f32);
    }
    got = got.detach().clone();
    world().all_reduce(got, dist::ReduceOp::Average);
    EXPECT_NEAR(got.item<double>(), want, 1e-3 * want) << "step " << step;
  }
  for (const auto& [key, t] : opt.state_dict()) {
    if (t.dim() > 0) {
      EXPECT_EQ(t.dtype(), DType::f32) << key;
    }
  }
}

// The whole state dict as a checkpoint: gathered after 5 steps, saved as a plain GPT's file, it
// loads into a plain GPT and into a fresh sharded one, and both go on with the losses of the run
// that was never interrupted (f64, 1e-10).
TEST(Fsdp, AWholeCheckpointLoadsIntoAPlainAndAShardedModel) {
  const int n = world().size(), r = world().rank();
  const nn::models::GPTConfig config = small_gpt(false, false);
  manual_seed(15);
  auto model = std::make_shared<nn::models::GPT>(config);
  model->to(kF64);
  dist::FullyShardedDataParallel fsdp(model, world_ptr(), {.units = model->blocks->children()});
  const optim::SGDOptions options{.lr = 0.5};
  optim::SGD opt(fsdp.parameters(), options);
  Generator gen(16);
  std::vector<Tensor> batches;
  for (int k = 0; k < 10; ++k) {
    batches.push_back(randint(0, config.vocab_size, {2 * n, 6}, {.dtype = DType::i64}, &gen));
  }
  auto loss = [&](nn::Module& m, const Tensor& x) {
    return cross_entropy(m.forward(x).reshape({-1, config.vocab_size}), x.reshape({-1}));
  };
  auto step = [&](dist::FullyShardedDataParallel& f, nn::Module& m, optim::Optimizer& o,
                  const Tensor& x) {
    o.zero_grad();
    Tensor l = f.call([&] { return loss(m, x.narrow(0, 2 * r, 2)); });
    l.backward();
    o.step();
    l = l.detach().clone();
    world().all_reduce(l, dist::ReduceOp::Average);
    return l.item<double>();
  };
  for (int k = 0; k < 5; ++k) step(fsdp, *model, opt, batches[k]);
  const std::string path = ::testing::TempDir() + "fsdp_whole_" + std::to_string(getpid()) + "_" +
                           std::to_string(world().rank()) + ".safetensors";
  save(fsdp.state_dict(), path);
  nn::models::GPT plain(config);
  plain.to(kF64);
  plain.load_state_dict(load(path));
  optim::SGD plain_opt(plain.parameters(), options);
  manual_seed(99);
  auto fresh = std::make_shared<nn::models::GPT>(config);
  fresh->to(kF64);
  dist::FullyShardedDataParallel resumed(fresh, world_ptr(), {.units = fresh->blocks->children()});
  resumed.load_state_dict(load(path));
  optim::SGD resumed_opt(resumed.parameters(), options);
  std::filesystem::remove(path);
  for (int k = 5; k < 10; ++k) {
    const double want = step(fsdp, *model, opt, batches[k]);
    plain_opt.zero_grad();
    const Tensor l = loss(plain, batches[k]);
    l.backward();
    plain_opt.step();
    EXPECT_NEAR(l.item<double>(), want, 1e-10 * want) << "step " << k;
    EXPECT_NEAR(step(resumed, *fresh, resumed_opt, batches[k]), want, 1e-10 * want) << "step " << k;
  }
  expect_error([&] { resumed.load_state_dict({}); }, {"load_state_dict", "missing keys"});
  StateDict wrong = plain.state_dict();
  wrong["ln_f.weight"] = zeros({3}, {.dtype = kF64});
  expect_error([&] { resumed.load_state_dict(wrong); },
               {"load_state_dict", "'ln_f.weight'", "[3]"});
}

// A forward without gradients (evaluation) gathers each block for its forward only and leaves
// nothing whole; the outputs equal the whole model's.
TEST(Fsdp, EvaluationLeavesNothingWhole) {
  const nn::models::GPTConfig config = small_gpt(true, false);
  nn::models::GPT whole = f64_gpt(config, 17);
  auto model = copy_of(whole);
  dist::FullyShardedDataParallel fsdp(model, world_ptr(), {.units = model->blocks->children()});
  Tensor ids = randint(0, config.vocab_size, {2, 6}, {.dtype = DType::i64});
  world().broadcast(ids);
  NoGradGuard ng;
  EXPECT_TRUE(all_close(fsdp.forward(ids), whole.forward(ids), 1e-12, 1e-12));
  EXPECT_EQ(fsdp.memory().whole_params, 0);
}

// The misuses named: a sharded model run without the wrapper (its parameters hold no memory),
// units that nest, are not in the model, or share a parameter with the root.
TEST(Fsdp, MisusesAreErrors) {
  const nn::models::GPTConfig config = small_gpt(true, false);
  auto model = std::make_shared<nn::models::GPT>(config);
  auto other = std::make_shared<nn::models::GPT>(config);
  const Tensor ids = zeros({1, 6}, {.dtype = DType::i64});
  expect_error(
      [&] {
        dist::FullyShardedDataParallel f(model, world_ptr(),
                                         {.units = {model->blocks, model->blocks->children()[0]}});
      },
      {"FullyShardedDataParallel", "'blocks.0' is inside unit 'blocks'"});
  expect_error(
      [&] {
        dist::FullyShardedDataParallel f(model, world_ptr(),
                                         {.units = {other->blocks->children()[0]}});
      },
      {"FullyShardedDataParallel", "not a module of the model"});
  // One Linear registered twice: a unit at "0", its weight also under "1".
  auto twice = std::make_shared<nn::Sequential>();
  auto linear = std::make_shared<nn::Linear>(2, 2);
  twice->push_back(linear);
  twice->push_back(linear);
  expect_error([&] { dist::FullyShardedDataParallel f(twice, world_ptr(), {.units = {linear}}); },
               {"FullyShardedDataParallel", "'1.bias' is also registered in unit '0'", "tied"});
  dist::FullyShardedDataParallel fsdp(model, world_ptr(), {.units = model->blocks->children()});
  expect_error([&] { model->forward(ids); }, {"has no memory", "FullyShardedDataParallel"});
  // The wrapper still works after the misuse.
  EXPECT_TRUE(fsdp.forward(ids).defined());
}

// fsdp x tp on a mesh (Note [device mesh]): a GPT split by tensor parallelism over "tp" (with
// sequence parallelism), its shards sharded again by FSDP over "fsdp", trains as the whole GPT
// on the whole batch (f64, 1e-10), each fsdp rank on its slice.
TEST(Fsdp, ComposesWithTensorParallelismOnAMesh) {
  const int n = world().size();
  if (n % 2 != 0) GTEST_SKIP() << "an fsdp x tp mesh needs an even world size";
  const dist::DeviceMesh mesh(world_ptr(), {{"fsdp", n / 2}, {"tp", 2}});
  const int f = mesh.size("fsdp"), fr = mesh.coordinate("fsdp");
  const nn::models::GPTConfig config{
      .vocab_size = 12, .context_length = 8, .n_layer = 2, .n_head = 4, .n_embd = 8};
  nn::models::GPT whole = f64_gpt(config, 19);
  auto split = std::make_shared<dist::tp::ParallelGPT>(config, mesh.group_ptr("tp"),
                                                       /*sequence_parallel=*/true);
  split->to(kF64);
  split->load_full(whole);
  dist::FullyShardedDataParallel fsdp(split, mesh.group_ptr("fsdp"),
                                      {.units = split->blocks->children()});
  const optim::AdamWOptions options{.lr = 1e-2, .weight_decay = 0.1};
  optim::AdamW whole_opt(whole.parameters(), options), opt(fsdp.parameters(), options);
  Generator gen(20);
  for (int step = 0; step < 20; ++step) {
    const Tensor ids = randint(0, config.vocab_size, {2 * f, 8}, {.dtype = DType::i64}, &gen);
    const Tensor targets = randint(0, config.vocab_size, {2 * f, 8}, {.dtype = DType::i64}, &gen);
    whole_opt.zero_grad();
    const Tensor want =
        cross_entropy(whole.forward(ids).reshape({-1, config.vocab_size}), targets.reshape({-1}));
    want.backward();
    whole_opt.step();
    opt.zero_grad();
    Tensor got = fsdp.call(
        [&] { return split->loss(ids.narrow(0, 2 * fr, 2), targets.narrow(0, 2 * fr, 2)); });
    got.backward();
    opt.step();
    got = got.detach().clone();
    mesh.group("fsdp").all_reduce(got, dist::ReduceOp::Average);
    EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-10 * std::abs(want.item<double>()))
        << "step " << step;
  }
}

// A graph kept alive from the step before (a logged loss) on one rank only changes the order in
// which the engine runs gradient nodes there; the reduce-scatters keep their fixed order (Note
// [fully sharded data parallel]), so training goes on as the whole model's.
TEST(Fsdp, AGraphKeptOnOneRankDoesNotReorderTheCollectives) {
  const int n = world().size(), r = world().rank();
  const nn::models::GPTConfig config = small_gpt(true, false);
  nn::models::GPT whole = f64_gpt(config, 21);
  auto model = copy_of(whole);
  dist::FullyShardedDataParallel fsdp(model, world_ptr(), {.units = model->blocks->children()});
  optim::SGD whole_opt(whole.parameters(), {.lr = 0.1}), opt(fsdp.parameters(), {.lr = 0.1});
  Generator gen(22);
  Tensor kept;
  for (int step = 0; step < 4; ++step) {
    const Tensor ids = randint(0, config.vocab_size, {2 * n, 6}, {.dtype = DType::i64}, &gen);
    auto loss = [&](nn::Module& m, const Tensor& x) {
      return cross_entropy(m.forward(x).reshape({-1, config.vocab_size}), x.reshape({-1}));
    };
    whole_opt.zero_grad();
    const Tensor want = loss(whole, ids);
    want.backward();
    whole_opt.step();
    opt.zero_grad();
    Tensor got = fsdp.call([&] { return loss(*model, ids.narrow(0, 2 * r, 2)); });
    got.backward(Tensor(), /*retain_graph=*/true);
    if (r == 0) kept = got;  // its gradient nodes outlive the step on rank 0 only
    opt.step();
    got = got.detach().clone();
    world().all_reduce(got, dist::ReduceOp::Average);
    EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-10 * want.item<double>());
  }
}

// A model whose own parameters all sit in units (the root holds none) works.
TEST(Fsdp, ARootWithoutParametersOfItsOwn) {
  const int r = world().rank();
  auto a = std::make_shared<nn::Linear>(4, 4);
  auto b = std::make_shared<nn::Linear>(4, 2);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(a);
  model->push_back(b);
  model->to(kF64);
  nn::Sequential whole(nn::Linear(4, 4), nn::Linear(4, 2));
  whole.to(kF64);
  whole.load_state_dict(model->state_dict());
  dist::FullyShardedDataParallel fsdp(model, world_ptr(), {.units = {a, b}});
  Tensor all = randn({2 * world().size(), 4}, {.dtype = kF64});
  world().broadcast(all);
  whole.forward(all).pow(2.0).mean().backward();
  fsdp.call([&] { return model->forward(all.narrow(0, 2 * r, 2)).pow(2.0).mean(); }).backward();
  expect_shard_grads(fsdp, whole, 1e-12, 1e-12);
}

// A backward that throws midway (here: a hook on block 0's output, once) drops the whole
// gradients it made: the step run again gives the whole model's gradients, nothing added.
TEST(Fsdp, AFailedBackwardLeavesNothingForTheNextStep) {
  const int n = world().size(), r = world().rank();
  const nn::models::GPTConfig config = small_gpt(false, false);
  nn::models::GPT whole = f64_gpt(config, 23);
  auto model = copy_of(whole);
  dist::FullyShardedDataParallel fsdp(model, world_ptr(), {.units = model->blocks->children()});
  bool fail = true;
  model->blocks->children()[0]->register_forward_hook([&](nn::Module&, const Tensor& out) {
    if (fail) out.register_hook([](const Tensor&) -> Tensor { throw Error("a failing hook"); });
    return out;
  });
  Tensor ids = randint(0, config.vocab_size, {2 * n, 6}, {.dtype = DType::i64});
  world().broadcast(ids);
  auto loss = [&](nn::Module& m, const Tensor& x) {
    return cross_entropy(m.forward(x).reshape({-1, config.vocab_size}), x.reshape({-1}));
  };
  expect_error([&] { fsdp.call([&] { return loss(*model, ids.narrow(0, 2 * r, 2)); }).backward(); },
               {"a failing hook"});
  fail = false;
  for (const Tensor& s : fsdp.parameters()) s.set_grad(Tensor());
  fsdp.call([&] { return loss(*model, ids.narrow(0, 2 * r, 2)); }).backward();
  loss(whole, ids).backward();
  EXPECT_EQ(fsdp.memory().whole_grads, 0);
  expect_shard_grads(fsdp, whole, 1e-10, 1e-12);
}

// Frozen parameters (each block's first norm, as in fine-tuning): the blocks are still freed
// during backward (each once the block before it starts its own), and training equals the whole
// model's with the same parameters frozen.
TEST(Fsdp, UnitsWithFrozenParametersAreFreedDuringBackward) {
  const nn::models::GPTConfig config = small_gpt(true, false);
  nn::models::GPT whole = f64_gpt(config, 24);
  auto model = copy_of(whole);
  for (nn::models::GPT* m : {&whole, model.get()}) {
    for (const std::shared_ptr<nn::Module>& b : m->blocks->children()) {
      static_cast<nn::TransformerBlock&>(*b).ln1->weight.requires_grad_(false);
    }
  }
  dist::FullyShardedDataParallel fsdp(model, world_ptr(), {.units = model->blocks->children()});
  int64_t at_block0 = -1;
  model->blocks->children()[0]->register_forward_hook([&](nn::Module&, const Tensor& out) {
    out.register_hook([&](const Tensor&) {
      at_block0 = fsdp.memory().whole_params;
      return Tensor();
    });
    return out;
  });
  train_alike(whole, *model, fsdp, config.vocab_size, config.context_length, 3, false, 25);
  // At block 0's backward: the root and block 0 whole (2 of 3 blocks freed).
  EXPECT_GT(at_block0, 0);
  EXPECT_LT(at_block0, fsdp.memory().whole_total * 3 / 4);
}

// Misuses that must not corrupt anything: wrapping a model with nothing to train fails and
// leaves it usable; backward through a forward whose blocks an optimizer step changed since is an
// error, as for any saved tensor changed in place. (The root unit stays whole from forward to
// backward: its backward uses the values its forward did.)
TEST(Fsdp, AFailedWrapAndAStaleGraphAreErrors) {
  auto frozen = std::make_shared<nn::Linear>(3, 2);
  frozen->weight.requires_grad_(false);
  frozen->bias.requires_grad_(false);
  expect_error([&] { dist::FullyShardedDataParallel f(frozen, world_ptr()); },
               {"FullyShardedDataParallel", "no parameter that requires grad"});
  EXPECT_EQ(frozen->forward(ones({1, 3})).numel(), 2);  // still has its memory
  // The blocks are gathered again for backward, from the stepped shards.
  auto model = std::make_shared<nn::models::GPT>(small_gpt(true, false));
  dist::FullyShardedDataParallel fsdp(model, world_ptr(), {.units = model->blocks->children()});
  optim::SGD opt(fsdp.parameters(), {.lr = 0.1});
  const Tensor ids = zeros({1, 6}, {.dtype = DType::i64});
  fsdp.call([&] { return model->forward(ids).sum(); }).backward();
  const Tensor stale = fsdp.call([&] { return model->forward(ids).sum(); });
  opt.step();
  expect_error([&] { stale.backward(); }, {"modified by an in-place operation"});
}

// no_sync with a unit the synchronized backward does not reach: its gradients from the no_sync
// backward are still reduce-scattered into its shards (none left behind on the parameters). In
// bf16 the gradients add up in f32: the shards' gradients are the f32 sums of the bf16 ones.
TEST(Fsdp, NoSyncKeepsWhatTheLastBackwardDoesNotReach) {
  const int n = world().size(), r = world().rank();
  for (const bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16" : "f64");
    manual_seed(26);
    auto a = std::make_shared<nn::Linear>(4, 4);
    auto b = std::make_shared<nn::Linear>(4, 3);
    auto model = std::make_shared<nn::Sequential>();
    model->push_back(a);
    model->push_back(b);
    if (!bf16) model->to(kF64);
    const DType dtype = bf16 ? DType::bf16 : kF64;
    // The reference: a copy in the compute dtype, each micro-batch's gradients summed in f32/f64.
    nn::Sequential whole(nn::Linear(4, 4), nn::Linear(4, 3));
    StateDict copy = model->state_dict();
    for (auto& [key, t] : copy) t = t.to(dtype);
    whole.to(dtype);
    whole.load_state_dict(copy);
    dist::FullyShardedDataParallel fsdp(
        model, world_ptr(),
        {.units = {a, b}, .param_dtype = bf16 ? std::optional<DType>(DType::bf16) : std::nullopt});
    Generator gen(27);
    std::vector<Tensor> sums(4);
    for (int micro = 0; micro < 3; ++micro) {
      const Tensor x = randn({2 * n, 4}, {.dtype = dtype}, &gen);
      const bool both = micro == 0;  // later micro-batches reach `a` only
      auto loss = [&](nn::Module& first, nn::Module& second, const Tensor& in) {
        const Tensor h = first(in);
        return (both ? second(h) : h).to(DType::f32).pow(2.0).mean();
      };
      for (int k = 0; k < n; ++k) {  // each rank's slice alone, as each rank computes it
        whole.zero_grad();
        loss(*whole[0], *whole[1], x.narrow(0, 2 * k, 2)).backward();
        const std::vector<Tensor> g = whole.parameters();
        for (size_t i = 0; i < g.size(); ++i) {
          if (!g[i].grad().defined()) continue;
          const Tensor part = g[i].grad().to(bf16 ? DType::f32 : kF64) / n;
          sums[i] = sums[i].defined() ? sums[i] + part : part;
        }
      }
      auto step = [&] {
        fsdp.call([&] { return loss(*a, *b, x.narrow(0, 2 * r, 2)); }).backward();
      };
      if (micro < 2) {
        auto guard = fsdp.no_sync();
        step();
      } else {
        step();
      }
    }
    EXPECT_EQ(fsdp.memory().whole_grads, 0);
    const auto shards = fsdp.named_parameters();
    for (size_t k = 0; k < shards.size(); ++k) {
      const Tensor want = sums[k].reshape({-1});
      const int64_t chunk = shards[k].second.numel();
      const int64_t begin = std::min(want.numel(), r * chunk),
                    end = std::min(want.numel(), begin + chunk);
      ASSERT_TRUE(shards[k].second.grad().defined()) << shards[k].first;
      EXPECT_TRUE(all_close(shards[k].second.grad().narrow(0, 0, end - begin),
                            want.narrow(0, begin, end - begin).to(shards[k].second.dtype()),
                            bf16 ? 1e-6 : 1e-12, bf16 ? 1e-5 : 1e-12))
          << shards[k].first;
    }
  }
}

// On the GPU (NCCL's all-gathers and reduce-scatters on the communication stream, the parameters'
// memory swapped on the compute stream): 10 AdamW steps of the GPT under FSDP, each rank on its
// slice, against the whole GPT on the whole batch on the same GPU (f32, 1e-4); then the shards as
// a distributed checkpoint, read back whole on the CPU.
TEST(CudaFsdp, GptTrainsAsTheWholeGptOnTheGpu) {
  SINTER_REQUIRE_CUDA();
  if (cuda::device_count() < world().local_size()) GTEST_SKIP() << "needs one GPU per rank";
  const Device dev = Device::cuda(world().cuda_device());
  const int n = world().size(), r = world().rank();
  const nn::models::GPTConfig config = small_gpt(false, false);
  manual_seed(40);
  nn::models::GPT whole(config);
  whole.to(dev);
  auto model = std::make_shared<nn::models::GPT>(config);
  model->load_state_dict(whole.state_dict());
  model->to(dev);
  dist::FullyShardedDataParallel fsdp(model, world_ptr(), {.units = model->blocks->children()});
  const optim::AdamWOptions options{.lr = 1e-2, .weight_decay = 0.1};
  optim::AdamW whole_opt(whole.parameters(), options), opt(fsdp.parameters(), options);
  Generator gen(41);
  for (int step = 0; step < 10; ++step) {
    const Tensor ids =
        randint(0, config.vocab_size, {2 * n, 6}, {.dtype = DType::i64}, &gen).to(dev);
    whole_opt.zero_grad();
    const Tensor want =
        cross_entropy(whole.forward(ids).reshape({-1, config.vocab_size}), ids.reshape({-1}));
    want.backward();
    whole_opt.step();
    opt.zero_grad();
    Tensor got = fsdp.call([&] {
      return cross_entropy(model->forward(ids.narrow(0, 2 * r, 2)).reshape({-1, config.vocab_size}),
                           ids.narrow(0, 2 * r, 2).reshape({-1}));
    });
    got.backward();
    opt.step();
    got = got.detach().clone();
    world().all_reduce(got, dist::ReduceOp::Average);
    EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-4 * want.item<double>())
        << "step " << step;
  }
  const std::string dir = ::testing::TempDir() + "cuda_fsdp_" + std::to_string(n);
  dist::save_distributed(dir, fsdp.shard_specs(), world());
  const StateDict saved = dist::load_whole(dir, "model."), now = whole.state_dict();
  for (const auto& [name, t] : now) {
    EXPECT_TRUE(all_close(saved.at(name), t.cpu(), 1e-4, 1e-3)) << name;
  }
  world().barrier();
  if (r == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sinter::testing

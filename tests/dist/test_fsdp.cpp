// Fully sharded data parallel under `mpirun -np N` (N = 2 and 4 in CI), Note [fully sharded data
// parallel]: a GPT and a Llama trained sharded over the ranks, each rank on its slice of the batch,
// against the same model trained in one process on the whole batch (f64): the losses, the clipped
// norms and the parameters after; with the blocks as units or the model as one, checkpointed
// blocks, parameters kept from forward to backward, no prefetch. The memory each rank holds between
// steps; what overlaps what; gradient accumulation; mixed precision; state dicts; composition with
// tensor parallelism on a mesh; the errors (more in test_fsdp_edges.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "fsdp_test_util.h"

namespace sinter::dist {
// Defined in src/dist/fsdp.cpp (the friend of FullyShardedDataParallel).
std::vector<std::string> fsdp_debug_events(const FullyShardedDataParallel& fsdp);
}  // namespace sinter::dist

namespace sinter::testing {
namespace {

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

// 20 AdamW steps of `whole` on batches of 2 F sequences (F: the mesh's fsdp size) and of `split`
// (its copy split over the mesh's tp group) sharded over the fsdp group by blocks, each fsdp rank
// on its 2 sequences, clipped at 0.5 by the whole model's norm (FSDP's clip_grad_norm_ over the tp
// group too): the losses and norms within 1e-10 (f64), and the parameters after, gathered from the
// shards and joined by to_full into a whole model, the whole model's.
template <class Whole, class Split>
void train_on_mesh(Whole& whole, const std::shared_ptr<Split>& split,
                   const std::vector<std::shared_ptr<nn::Module>>& units,
                   const dist::DeviceMesh& mesh) {
  const int f = mesh.size("fsdp"), fr = mesh.coordinate("fsdp");
  const int64_t vocab = whole.config.vocab_size, t = whole.config.context_length;
  split->load_full(whole);
  dist::FullyShardedDataParallel fsdp(split, mesh.group_ptr("fsdp"), {.units = units});
  const optim::AdamWOptions options{.lr = 1e-2, .weight_decay = 0.1};
  optim::AdamW whole_opt(whole.parameters(), options), opt(fsdp.parameters(), options);
  Generator gen(20);
  for (int step = 0; step < 20; ++step) {
    const Tensor ids = randint(0, vocab, {2 * f, t}, {.dtype = DType::i64}, &gen);
    const Tensor targets = randint(0, vocab, {2 * f, t}, {.dtype = DType::i64}, &gen);
    whole_opt.zero_grad();
    const Tensor want =
        cross_entropy(whole.forward(ids).reshape({-1, vocab}), targets.reshape({-1}));
    want.backward();
    const double want_norm = optim::clip_grad_norm_(whole.parameters(), 0.5);
    whole_opt.step();
    opt.zero_grad();
    Tensor got = fsdp.call(
        [&] { return split->loss(ids.narrow(0, 2 * fr, 2), targets.narrow(0, 2 * fr, 2)); });
    got.backward();
    // The whole model's norm from the shards of the split layers and the whole ones.
    const double got_norm = fsdp.clip_grad_norm_(0.5, 2.0, mesh.group_ptr("tp"));
    opt.step();
    got = got.detach().clone();
    mesh.group("fsdp").all_reduce(got, dist::ReduceOp::Average);
    EXPECT_NEAR(got_norm, want_norm, 1e-10 * want_norm) << "step " << step;
    EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-10 * std::abs(want.item<double>()))
        << "step " << step;
  }
  Split gathered(split->config, mesh.group_ptr("tp"), split->sequence_parallel);
  gathered.to(kF64);
  gathered.load_state_dict(fsdp.state_dict());
  Whole joined(whole.config);
  joined.to(kF64);
  gathered.to_full(joined);
  const StateDict got = joined.state_dict(), want = whole.state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) EXPECT_TRUE(all_close(got.at(name), t, 1e-10, 1e-12)) << name;
}

// fsdp x tp on a mesh (Note [device mesh]): a GPT and a Llama split by tensor parallelism over
// "tp" (with sequence parallelism), their shards sharded again by FSDP over "fsdp", train as the
// whole models on the whole batch, each fsdp rank on its slice.
TEST(Fsdp, ComposesWithTensorParallelismOnAMesh) {
  const int n = world().size();
  if (n % 2 != 0) GTEST_SKIP() << "an fsdp x tp mesh needs an even world size";
  const dist::DeviceMesh mesh(world_ptr(), {{"fsdp", n / 2}, {"tp", 2}});
  {
    SCOPED_TRACE("GPT");
    const nn::models::GPTConfig config = mesh_gpt();
    nn::models::GPT whole = f64_gpt(config, 19);
    auto split = std::make_shared<dist::tp::ParallelGPT>(config, mesh.group_ptr("tp"),
                                                         /*sequence_parallel=*/true);
    split->to(kF64);
    train_on_mesh(whole, split, split->blocks->children(), mesh);
  }
  {
    SCOPED_TRACE("Llama");
    const nn::models::LlamaConfig config = mesh_llama();
    manual_seed(22);
    nn::models::Llama whole(config);
    whole.to(kF64);
    auto split = std::make_shared<dist::tp::ParallelLlama>(config, mesh.group_ptr("tp"),
                                                           /*sequence_parallel=*/true);
    split->to(kF64);
    train_on_mesh(whole, split, split->layers->children(), mesh);
  }
}

}  // namespace
}  // namespace sinter::testing

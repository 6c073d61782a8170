// Fully sharded data parallel at its edges, under `mpirun -np N` (N = 2 and 4 in CI): a graph kept
// alive on one rank, a root without parameters, a backward that fails, frozen parameters, a wrap
// that fails, a stale graph, no_sync with a unit the last backward does not reach; and the GPU
// (waiting for one).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "fsdp_test_util.h"

namespace sinter::testing {
namespace {

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

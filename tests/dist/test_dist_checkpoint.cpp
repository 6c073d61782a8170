// Distributed checkpoints under `mpirun -np N` (N = 2 and 4 in CI), Note [distributed checkpoint]:
// the runs a shard's elements make in the whole tensor; a GPT trained on an fsdp x tp mesh, saved
// as every rank's pieces (with AdamW's state), loaded at tp N, at fsdp N and whole in one process,
// each going on with the losses of the run that was never interrupted (f64, 1e-10); the plain
// model's file made from it; an unfinished checkpoint and a mismatch named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "sinter/device_mesh.h"
#include "sinter/dist_checkpoint.h"
#include "sinter/fsdp.h"
#include "sinter/io.h"
#include "sinter/optim/adam.h"
#include "sinter/tensor_parallel.h"
#include "test_util.h"

namespace sinter::testing {
namespace {

using dist::restrict_runs;
using dist::ShardSpec;

constexpr DType kF64 = DType::f64;

// The runs of a column block of a (4, 6) matrix (columns 2..4 of each row, local (4, 2)) that fall
// in a local flat range: a partial row, whole rows as one strided run, a partial row.
TEST(DistCheckpoint, RunsOfAFlatRangeOfAColumnBlock) {
  const std::vector<dist::Run> block = {dist::Run{0, 2, 2, 4, 2, 6}};
  auto same = [](const dist::Run& a, const dist::Run& b) {
    return a.local == b.local && a.global == b.global && a.length == b.length &&
           a.count == b.count &&
           (a.count == 1 ||
            (a.local_stride == b.local_stride && a.global_stride == b.global_stride));
  };
  std::vector<dist::Run> got = restrict_runs(block, 1, 7);  // local elements 1..6
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(same(got[0], dist::Run{0, 3, 1}));           // local 1 -> whole (0, 3)
  EXPECT_TRUE(same(got[1], dist::Run{1, 8, 2, 2, 2, 6}));  // local 2..5 -> rows 1 and 2
  EXPECT_TRUE(same(got[2], dist::Run{5, 20, 1}));          // local 6 -> (3, 2)
  got = restrict_runs(block, 1, 8);                        // the last row whole: it joins the run
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(same(got[1], dist::Run{1, 8, 2, 3, 2, 6}));
  EXPECT_TRUE(restrict_runs(block, 8, 8).empty());
  // Row blocks stay one run.
  const std::vector<dist::Run> rows = restrict_runs({dist::Run{0, 12, 12}}, 3, 9);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(same(rows[0], dist::Run{0, 15, 6}));
}

const nn::models::GPTConfig kConfig{.vocab_size = 12,
                                    .context_length = 8,
                                    .n_layer = 2,
                                    .n_head = 4,
                                    .n_embd = 8,
                                    .tie_weights = false};
const optim::AdamWOptions kAdamW{.lr = 1e-2, .weight_decay = 0.1};

struct Batches {
  std::vector<Tensor> ids, targets;
  explicit Batches(int64_t batch) {
    Generator gen(31);
    for (int k = 0; k < 6; ++k) {
      ids.push_back(randint(0, kConfig.vocab_size, {batch, 8}, {.dtype = DType::i64}, &gen));
      targets.push_back(randint(0, kConfig.vocab_size, {batch, 8}, {.dtype = DType::i64}, &gen));
    }
  }
};

// One step; the loss averaged over `group` (the ranks that split the batch).
double step(optim::Optimizer& opt, dist::ProcessGroup* group, const std::function<Tensor()>& loss) {
  opt.zero_grad();
  Tensor l = loss();
  l.backward();
  opt.step();
  l = l.detach().clone();
  if (group) group->all_reduce(l, dist::ReduceOp::Average);
  return l.item<double>();
}

std::string checkpoint_dir(const char* what) {
  // One folder for all ranks: rank 0's pid, broadcast.
  Tensor pid = full({1}, static_cast<double>(getpid()), {.dtype = DType::i64});
  world().broadcast(pid);
  return ::testing::TempDir() + "dcp_" + what + "_" + std::to_string(pid.item<int64_t>());
}

// Per Note [distributed checkpoint], a GPT trained 3 AdamW steps on an fsdp (N / 2) x tp 2 mesh
// is saved (parameters and optimizer state, every rank its pieces) and trained 3 steps more; the
// checkpoint loaded at tp N, at fsdp N and whole in one process gives those 3 steps' losses
// within 1e-10. The model part, made whole, is the plain GPT's state dict.
TEST(DistCheckpoint, ASavedMeshLoadsAtThreeOtherLayouts) {
  const int n = world().size();
  if (n % 2 != 0) GTEST_SKIP() << "an fsdp x tp mesh needs an even world size";
  const std::string dir = checkpoint_dir("mesh");
  const int64_t batch = 2 * n;
  const Batches data(batch);
  std::vector<double> want;
  {
    const dist::DeviceMesh mesh(world_ptr(), {{"fsdp", n / 2}, {"tp", 2}});
    const int64_t f = mesh.size("fsdp"), slice = batch / f, first = mesh.coordinate("fsdp") * slice;
    manual_seed(30);
    auto split = std::make_shared<dist::tp::ParallelGPT>(kConfig, mesh.group_ptr("tp"), true);
    split->to(kF64);
    dist::FullyShardedDataParallel fsdp(split, mesh.group_ptr("fsdp"),
                                        {.units = split->blocks->children()});
    optim::AdamW opt(fsdp.parameters(), kAdamW);
    for (int k = 0; k < 6; ++k) {
      if (k == 3) {
        std::vector<ShardSpec> specs = fsdp.shard_specs(dist::tp::shard_specs(*split));
        const std::vector<ShardSpec> state = dist::optimizer_specs(opt, specs);
        specs.insert(specs.end(), state.begin(), state.end());
        dist::save_distributed(dir, specs, world(), {{"step", "3"}});
      }
      const double l = step(opt, &mesh.group("fsdp"), [&] {
        return fsdp.call([&] {
          return split->loss(data.ids[k].narrow(0, first, slice),
                             data.targets[k].narrow(0, first, slice));
        });
      });
      if (k >= 3) want.push_back(l);
    }
  }
  EXPECT_EQ(dist::load_distributed_metadata(dir).at("step"), "3");
  {
    SCOPED_TRACE("tp " + std::to_string(n));
    auto split = std::make_shared<dist::tp::ParallelGPT>(kConfig, world_ptr());
    split->to(kF64);
    optim::AdamW opt(split->parameters(), kAdamW);
    const std::vector<ShardSpec> specs = dist::tp::shard_specs(*split);
    dist::load_distributed(dir, specs);
    dist::load_optimizer_state(opt, specs, dir);
    for (int k = 3; k < 6; ++k) {
      const double got =
          step(opt, nullptr, [&] { return split->loss(data.ids[k], data.targets[k]); });
      EXPECT_NEAR(got, want[k - 3], 1e-10 * want[k - 3]) << "step " << k;
    }
  }
  {
    SCOPED_TRACE("fsdp " + std::to_string(n));
    auto model = std::make_shared<nn::models::GPT>(kConfig);
    model->to(kF64);
    dist::FullyShardedDataParallel fsdp(model, world_ptr(), {.units = model->blocks->children()});
    optim::AdamW opt(fsdp.parameters(), kAdamW);
    const std::vector<ShardSpec> specs = fsdp.shard_specs();
    dist::load_distributed(dir, specs);
    dist::load_optimizer_state(opt, specs, dir);
    const int64_t slice = batch / n, first = world().rank() * slice;
    for (int k = 3; k < 6; ++k) {
      const double got = step(opt, &world(), [&] {
        return fsdp.call([&] {
          return cross_entropy(
              model->forward(data.ids[k].narrow(0, first, slice)).reshape({-1, 12}),
              data.targets[k].narrow(0, first, slice).reshape({-1}));
        });
      });
      EXPECT_NEAR(got, want[k - 3], 1e-10 * want[k - 3]) << "step " << k;
    }
  }
  {
    SCOPED_TRACE("one process");
    nn::models::GPT whole(kConfig);
    whole.to(kF64);
    whole.load_state_dict(dist::load_whole(dir, "model."));
    optim::AdamW opt(whole.parameters(), kAdamW);
    std::vector<ShardSpec> specs;
    for (const auto& [name, p] : whole.named_parameters()) {
      specs.push_back(dist::whole_spec("model." + name, p));
    }
    dist::load_optimizer_state(opt, specs, dir);
    for (int k = 3; k < 6; ++k) {
      const double got = step(opt, nullptr, [&] {
        return cross_entropy(whole.forward(data.ids[k]).reshape({-1, 12}),
                             data.targets[k].reshape({-1}));
      });
      EXPECT_NEAR(got, want[k - 3], 1e-10 * want[k - 3]) << "step " << k;
    }
  }
  world().barrier();
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

// A folder without a manifest (a save that never finished), a tensor the checkpoint lacks and a
// whole shape that differs are errors naming them; nothing is loaded.
TEST(DistCheckpoint, UnfinishedAndMismatchedCheckpointsAreErrors) {
  const std::string dir = checkpoint_dir("errors");
  Tensor mine = full({4}, 1.0 + world().rank());
  const int r = world().rank(), n = world().size();
  // Each rank holds elements [r, r + 1) of a whole (n) tensor.
  dist::save_distributed(dir, {ShardSpec{"x", {n}, mine, {dist::Run{r, r, 1}}}}, world());
  Tensor whole = zeros({n});
  dist::load_distributed(dir, {dist::whole_spec("x", whole)});
  for (int k = 0; k < n; ++k) EXPECT_EQ(whole.narrow(0, k, 1).item<float>(), 1.0f + k);
  Tensor target = zeros({n + 1});
  expect_error([&] { dist::load_distributed(dir, {dist::whole_spec("x", target)}); },
               {"load_distributed", "'x'", "[" + std::to_string(n) + "]"});
  expect_error([&] { dist::load_distributed(dir, {dist::whole_spec("y", whole)}); },
               {"load_distributed", "no 'y'"});
  expect_error(
      [&] {
        dist::load_distributed(dir, {ShardSpec{"x", {n}, target, {dist::Run{0, 0, n + 1}}}});
      },
      {"load_distributed", "element " + std::to_string(n), "in no rank's file"});
  EXPECT_EQ(target.sum().item<float>(), 0.0f);
  world().barrier();
  if (r == 0) std::filesystem::remove(std::filesystem::path(dir) / "manifest.safetensors");
  world().barrier();
  expect_error([&] { dist::load_distributed(dir, {dist::whole_spec("x", whole)}); },
               {"load_distributed", "no finished checkpoint"});
  world().barrier();
  if (r == 0) std::filesystem::remove_all(dir);
}

// A ParallelLlama's pieces under Llama's names (Hugging Face's): saved at tp N, made whole, they
// are the state dict of the Llama that to_full joins, key for key.
TEST(DistCheckpoint, AParallelLlamaSavesUnderLlamasNames) {
  const int n = world().size();
  const std::string dir = checkpoint_dir("llama");
  const nn::models::LlamaConfig config{.vocab_size = 4 * n,
                                       .context_length = 4,
                                       .n_layer = 2,
                                       .n_head = 2 * n,
                                       .n_kv_head = n,
                                       .n_embd = 4 * n,
                                       .mlp_hidden = 4 * n};
  manual_seed(32);
  dist::tp::ParallelLlama split(config, world_ptr());
  dist::save_distributed(dir, dist::tp::shard_specs(split), world());
  nn::models::Llama joined(config);
  split.to_full(joined);
  const StateDict got = dist::load_whole(dir, "model."), want = joined.state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(all_close(got.at(name), t, 0, 0)) << name;
  }
  world().barrier();
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

// A save that fails on one rank (a spec given twice there) is an error on every rank, none left
// waiting; pieces nested in others' load; a rank file from another save (of other contents) is
// refused.
TEST(DistCheckpoint, SavesFailTogetherAndFilesOfAnotherSaveAreRefused) {
  const int r = world().rank(), n = world().size();
  const std::string dir = checkpoint_dir("together");
  Tensor mine = full({8}, 1.0 + r);
  std::vector<ShardSpec> specs = {ShardSpec{"x", {8}, mine, {dist::Run{0, 0, 8}}, r == 0}};
  if (r == n - 1) specs.push_back(specs[0]);
  if (n > 1) {
    expect_error([&] { dist::save_distributed(dir, specs, world()); },
                 {"save_distributed", r == n - 1 ? "'x' is given twice" : "another rank failed"});
    specs.resize(1);
  }
  // Rank 0 holds [0, 8); the last rank also [2, 4) of it, nested inside: [4, 6) still loads.
  if (r == n - 1 && n > 1) specs[0] = ShardSpec{"x", {8}, mine, {dist::Run{2, 2, 2}}, true};
  dist::save_distributed(dir, specs, world());
  Tensor got = zeros({2});
  dist::load_distributed(dir, {ShardSpec{"x", {8}, got, {dist::Run{0, 4, 2}}}});
  EXPECT_EQ(got.sum().item<float>(), 2.0f);
  // A rank file of another save (other values) beside this save's manifest.
  const std::string other = checkpoint_dir("together_other");
  Tensor twice = mine * 2.0;
  std::vector<ShardSpec> other_specs = specs;
  other_specs[0].local = twice;
  dist::save_distributed(other, other_specs, world());
  world().barrier();
  if (r == 0) {
    std::filesystem::copy_file(
        std::filesystem::path(other) / ("rank-0-of-" + std::to_string(n) + ".safetensors"),
        std::filesystem::path(dir) / ("rank-0-of-" + std::to_string(n) + ".safetensors"),
        std::filesystem::copy_options::overwrite_existing);
  }
  world().barrier();
  expect_error(
      [&] {
        dist::load_distributed(dir, {ShardSpec{"x", {8}, got, {dist::Run{0, 4, 2}}}});
      },
      {"load_distributed", "not from the save the manifest finished"});
  // A bad spec at load writes nothing, even into the good one before it.
  dist::save_distributed(dir, specs, world());
  Tensor good = zeros({2}), bad = zeros({2});
  expect_error(
      [&] {
        dist::load_distributed(dir, {ShardSpec{"x", {8}, good, {dist::Run{0, 4, 2}}},
                                     ShardSpec{"x", {8}, bad, {dist::Run{1, 4, 2}}}});
      },
      {"load_distributed", "reaches past its local tensor"});
  EXPECT_EQ(good.sum().item<float>(), 0.0f);
  world().barrier();
  if (r == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove_all(other);
  }
}

// A 0-dim parameter whose AdamW state is sharded by FSDP (its buffers [1] on each rank) saves and
// loads back; and loading into an optimizer that has stepped since replaces its state with the
// checkpoint's (a parameter the checkpoint has no state for starts afresh).
struct WithScalar : nn::Module {
  Tensor scale;
  std::shared_ptr<nn::Linear> linear;
  WithScalar() {
    scale = register_parameter("scale", full({}, 2.0));
    linear = register_module("linear", nn::Linear(3, 2));
  }
  Tensor forward(const Tensor& x) override { return linear->forward(x) * scale; }
};

TEST(DistCheckpoint, OptimizerStateOfAScalarParameterAndAFreshOptimizer) {
  const std::string dir = checkpoint_dir("scalar");
  auto model = std::make_shared<WithScalar>();
  dist::FullyShardedDataParallel fsdp(model, world_ptr());
  optim::AdamW opt(fsdp.parameters(), kAdamW);
  const std::vector<ShardSpec> params = fsdp.shard_specs();
  dist::save_distributed(dir, dist::optimizer_specs(opt, params), world());  // no state yet
  auto step = [&] {
    opt.zero_grad();
    fsdp.call([&] { return model->forward(ones({2, 3})).sum(); }).backward();
    opt.step();
  };
  step();
  const std::string stepped = checkpoint_dir("scalar_stepped");
  const StateDict want = opt.state_dict();
  dist::save_distributed(stepped, dist::optimizer_specs(opt, params), world());
  dist::load_optimizer_state(opt, params, dir);
  for (const auto& [key, t] : opt.state_dict()) {
    EXPECT_EQ(key.rfind("state.", 0), std::string::npos) << key << " should be gone";
  }
  dist::load_optimizer_state(opt, params, stepped);
  const StateDict got = opt.state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [key, t] : want) EXPECT_TRUE(all_close(got.at(key), t, 0, 0)) << key;
  // Saved whole (one process's layout: the 0-dim parameter's moments 0-dim), loaded sharded.
  WithScalar plain;
  plain.load_state_dict(fsdp.state_dict());
  optim::AdamW plain_opt(plain.parameters(), kAdamW);
  plain_opt.zero_grad();
  plain.forward(ones({2, 3})).sum().backward();
  plain_opt.step();
  std::vector<ShardSpec> whole;
  for (const auto& [name, p] : plain.named_parameters()) {
    whole.push_back(dist::whole_spec("model." + name, p, world().rank() == 0));
  }
  const std::string single = checkpoint_dir("scalar_single");
  dist::save_distributed(single, dist::optimizer_specs(plain_opt, whole), world());
  dist::load_optimizer_state(opt, params, single);
  const Tensor scale_avg = opt.state_dict().at("state.0.0.exp_avg");  // "scale" comes first
  EXPECT_EQ(scale_avg.shape(), Shape{1});
  if (world().rank() == 0) {
    EXPECT_TRUE(
        all_close(scale_avg.reshape({}), plain_opt.state_dict().at("state.0.0.exp_avg"), 0, 0));
  }
  world().barrier();
  if (world().rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove_all(stepped);
    std::filesystem::remove_all(single);
  }
}

}  // namespace
}  // namespace sinter::testing

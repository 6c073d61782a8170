// Muon over tensor-parallel layers (Note [muon shards]), under `mpirun -np N` (N = 2 and 4 in CI):
// a GPT and a Llama split over the ranks train as the whole models do under Muon, each split
// matrix joined whole to be orthogonalized; the errors.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "sinter/optim/muon.h"
#include "sinter/tensor_parallel.h"
#include "test_util.h"
#include "tp_test_util.h"

namespace sinter::testing {
namespace {

constexpr DType kF64 = DType::f64;

// Muon's groups of a model: its hidden matrices, and the rest in an AdamW group (f64: ns_bf16
// off).
std::vector<optim::MuonGroup> muon_groups(const nn::Module& model) {
  const auto [matrices, rest] = optim::muon_split(model);
  return {{.params = matrices}, {.params = rest, .lr = 1e-2, .adamw = true}};
}
const optim::MuonOptions kMuon{.lr = 0.02, .weight_decay = 0.1, .ns_bf16 = false};

// 6 Muon steps of `whole` and of `split` (loaded from it) on the same batches (train_alike), its
// Muon groups over the split layers' shards, with clipping.
template <class Whole, class Split>
void train_with_muon(Whole& whole, Split& split, int64_t vocab, int64_t t) {
  const std::vector<optim::MuonGroup> whole_groups = muon_groups(whole);
  const std::vector<optim::MuonGroup> split_groups = muon_groups(split);
  ASSERT_EQ(whole_groups[0].params.size(), split_groups[0].params.size());
  ASSERT_FALSE(whole_groups[0].params.empty());
  optim::Muon whole_opt(whole_groups, kMuon);
  const std::unique_ptr<optim::Muon> opt = optim::Muon::over_shards(split_groups, kMuon);
  dist::tp::give_muon_layouts(split, *opt);
  train_alike(whole, split, whole_opt, *opt, vocab, t, 41, /*clip=*/true, 6);
}

// A Whole model of `config` in f64 and its Split form loaded from it train alike under Muon
// (train_with_muon); the whole model's parameters after equal the split model's joined (to_full).
template <class Whole, class Split, class Config>
void expect_muon_steps_as_whole(const Config& config, uint64_t seed) {
  manual_seed(seed);
  Whole whole(config);
  whole.to(kF64);
  Split split(config, world_ptr());
  split.to(kF64);
  split.load_full(whole);
  train_with_muon(whole, split, config.vocab_size, 8);
  Whole joined(config);
  joined.to(kF64);
  split.to_full(joined);
  const StateDict got = joined.state_dict(), want = whole.state_dict();
  for (const auto& [name, t] : want) {
    EXPECT_TRUE(all_close(got.at(name), t, 1e-10, 1e-12)) << name;
  }
}

TEST(TensorParallelMuon, ParallelGptStepsAsTheWholeGpt) {
  const int n = world().size();
  expect_muon_steps_as_whole<nn::models::GPT, dist::tp::ParallelGPT>(
      nn::models::GPTConfig{.vocab_size = 6 * n,
                            .context_length = 8,
                            .n_layer = 2,
                            .n_head = 2 * n,
                            .n_embd = 4 * n,
                            .tie_weights = false},
      42);
}

TEST(TensorParallelMuon, ParallelLlamaStepsAsTheWholeLlama) {
  const int n = world().size();
  expect_muon_steps_as_whole<nn::models::Llama, dist::tp::ParallelLlama>(
      nn::models::LlamaConfig{.vocab_size = 6 * n,
                              .context_length = 8,
                              .n_layer = 2,
                              .n_head = 2 * n,
                              .n_kv_head = n,
                              .n_embd = 4 * n,
                              .mlp_hidden = 6 * n},
      43);
}

TEST(TensorParallelMuon, BadLayoutsAreErrorsNamingThem) {
  const int n = world().size();
  dist::tp::ParallelGPT split({.vocab_size = 2 * n, .n_layer = 1, .n_head = n, .n_embd = 2 * n},
                              world_ptr());
  optim::Muon whole(muon_groups(split));
  expect_error([&] { dist::tp::give_muon_layouts(split, whole); },
               {"tp::give_muon_layouts", "Muon::over_shards"});
  const auto other = optim::Muon::over_shards({{.params = {ones({4, 4})}}});
  expect_error([&] { dist::tp::give_muon_layouts(split, *other); },
               {"tp::give_muon_layouts", "not a 2-D parameter of the model"});
  nn::models::GPT plain({.vocab_size = 4, .n_layer = 1, .n_head = 1, .n_embd = 2});
  const auto over_plain = optim::Muon::over_shards(muon_groups(plain));
  expect_error([&] { dist::tp::give_muon_layouts(plain, *over_plain); },
               {"tp::shard_specs", "ParallelGPT"});
}

}  // namespace
}  // namespace sinter::testing

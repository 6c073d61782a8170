// Muon over fully sharded data parallel's shards (Note [muon shards]), under `mpirun -np N` (N = 2
// and 4 in CI): a GPT trains as the whole GPT does under Muon, each matrix's update gathered whole
// and orthogonalized, the embeddings, norms and biases in AdamW groups; the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "fsdp_test_util.h"
#include "sinter/optim/muon.h"

namespace sinter::testing {
namespace {

// Muon's groups over `matrices` and, in an AdamW group, `rest` (f64 throughout: ns_bf16 off).
std::vector<optim::MuonGroup> muon_groups(const std::vector<Tensor>& matrices,
                                          const std::vector<Tensor>& rest) {
  return {{.params = matrices}, {.params = rest, .lr = 1e-2, .adamw = true}};
}
const optim::MuonOptions kMuon{.lr = 0.02, .weight_decay = 0.1, .ns_bf16 = false};

// 8 steps of Muon over the shards give the one-process GPT's losses under Muon within 1e-10
// (train_alike) and its parameters after; with the model one unit and the blocks units. The
// matrices (15 x 5, 5 x 5, 20 x 5, 5 x 20) do not split evenly over 2 or 4 ranks: the shards'
// padding is no part of any matrix.
TEST(FsdpMuon, TrainsAsMuonOnTheWholeModel) {
  for (const bool blocks_as_units : {true, false}) {
    SCOPED_TRACE(blocks_as_units ? "blocks as units" : "one unit");
    nn::models::GPTConfig config = small_gpt(true, false);
    config.n_head = 1;
    config.n_embd = 5;
    nn::models::GPT whole = f64_gpt(config, 31);
    auto model = copy_of(whole);
    const auto [whole_matrices, whole_rest] = optim::muon_split(whole);
    std::vector<std::string> matrix_names;
    for (const auto& [name, p] : model->named_parameters()) {
      for (const Tensor& m : optim::muon_split(*model).first) {
        if (m.is_same(p)) matrix_names.push_back(name);
      }
    }
    ASSERT_EQ(matrix_names.size(), 12u);  // 4 per block
    dist::FullyShardedDataParallel fsdp(
        model, world_ptr(),
        {.units = blocks_as_units ? model->blocks->children()
                                  : std::vector<std::shared_ptr<nn::Module>>{}});
    std::vector<Tensor> matrices, rest;
    for (const auto& [name, shard] : fsdp.named_parameters()) {
      const bool matrix =
          std::find(matrix_names.begin(), matrix_names.end(), name) != matrix_names.end();
      (matrix ? matrices : rest).push_back(shard);
    }
    optim::Muon whole_opt(muon_groups(whole_matrices, whole_rest), kMuon);
    const std::unique_ptr<optim::Muon> opt =
        optim::Muon::over_shards(muon_groups(matrices, rest), kMuon);
    fsdp.give_muon_layouts(*opt);
    train_alike(whole, *model, fsdp, whole_opt, *opt, config.vocab_size, config.context_length, 8,
                /*clip=*/true, 32);
    expect_same_state(fsdp, whole);
    // Each momentum shard is this rank's part of the whole one.
    const int64_t rank = world().rank();
    for (size_t k = 0; k < matrices.size(); ++k) {
      const Tensor want = whole_opt.state_dict()
                              .at("state.0." + std::to_string(k) + ".momentum_buffer")
                              .reshape({-1});
      const Tensor got = opt->state_dict().at("state.0." + std::to_string(k) + ".momentum_buffer");
      const int64_t chunk = got.numel(), begin = std::min(want.numel(), rank * chunk);
      const int64_t len = std::min(want.numel(), begin + chunk) - begin;
      EXPECT_TRUE(all_close(got.narrow(0, 0, len), want.narrow(0, begin, len), 1e-10, 1e-12))
          << matrix_names[k];
    }
  }
}

TEST(FsdpMuon, BadLayoutsAreErrorsNamingThem) {
  const nn::models::GPTConfig config = small_gpt(true, false);
  auto model = copy_of(f64_gpt(config, 33));
  dist::FullyShardedDataParallel fsdp(model, world_ptr());
  expect_error(
      [&] {
        optim::Muon whole(std::vector<optim::MuonGroup>{{.params = {model->wte->weight}}});
        fsdp.give_muon_layouts(whole);
      },
      {"give_muon_layouts", "Muon::over_shards"});
  expect_error(
      [&] {
        auto muon = optim::Muon::over_shards({{.params = {ones({4}, {.dtype = kF64})}}});
        fsdp.give_muon_layouts(*muon);
      },
      {"give_muon_layouts", "not a shard of this model"});
  expect_error(
      [&] {
        Tensor bias;
        for (const auto& [name, shard] : fsdp.named_parameters()) {
          if (name == "ln_f.bias") bias = shard;
        }
        auto muon = optim::Muon::over_shards({{.params = {bias}}});
        fsdp.give_muon_layouts(*muon);
      },
      {"give_muon_layouts", "'ln_f.bias'", "orthogonalizes matrices"});
}

}  // namespace
}  // namespace sinter::testing

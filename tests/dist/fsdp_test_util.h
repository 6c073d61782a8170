// What the fully sharded data parallel tests (test_fsdp.cpp, test_fsdp_edges.cpp) share: a small
// GPT, its f64 copies, and the checks of training and gradients against the whole model.
#pragma once

#include <gtest/gtest.h>

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

namespace sinter::testing {

inline constexpr DType kF64 = DType::f64;

inline nn::models::GPTConfig small_gpt(bool tied, bool checkpoint) {
  return {.vocab_size = 11,
          .context_length = 6,
          .n_layer = 3,
          .n_head = 2,
          .n_embd = 6,
          .tie_weights = tied,
          .checkpoint_blocks = checkpoint};
}

// A GPT in f64 drawn from `seed`, and a copy of one with tensors of its own (to shard).
inline nn::models::GPT f64_gpt(const nn::models::GPTConfig& config, uint64_t seed) {
  manual_seed(seed);
  nn::models::GPT gpt(config);
  gpt.to(kF64);
  return gpt;
}

inline std::shared_ptr<nn::models::GPT> copy_of(const nn::models::GPT& whole) {
  auto model = std::make_shared<nn::models::GPT>(whole.config);
  model->to(kF64);
  model->load_state_dict(whole.state_dict());
  return model;
}

// `steps` steps (clipping at 0.5 when `clip`) of `whole` with whole_opt on batches of 2 N
// sequences and of the sharded model with opt (over the shards) on this rank's two of them: the
// mean of the ranks' losses is the whole batch's loss (each rank has as many tokens), and the
// gradients FSDP averages are the whole batch's. Checks the losses and the clipped norms within
// 1e-10.
inline void train_alike(nn::Module& whole, nn::Module& model, dist::FullyShardedDataParallel& fsdp,
                        optim::Optimizer& whole_opt, optim::Optimizer& opt, int64_t vocab,
                        int64_t t, int steps, bool clip, uint64_t seed) {
  const int n = world().size(), r = world().rank();
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

// The same with AdamW (weight decay 0.1).
inline void train_alike(nn::Module& whole, nn::Module& model, dist::FullyShardedDataParallel& fsdp,
                        int64_t vocab, int64_t t, int steps, bool clip, uint64_t seed) {
  const optim::AdamWOptions options{.lr = 1e-2, .weight_decay = 0.1};
  optim::AdamW whole_opt(whole.parameters(), options), opt(fsdp.parameters(), options);
  train_alike(whole, model, fsdp, whole_opt, opt, vocab, t, steps, clip, seed);
}

// Every entry of the sharded model's gathered state dict equals the whole model's.
inline void expect_same_state(const dist::FullyShardedDataParallel& fsdp, const nn::Module& whole) {
  const StateDict got = fsdp.state_dict(), want = whole.state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(all_close(got.at(name), t, 1e-10, 1e-12)) << name;
  }
}

// Each shard's gradient is its part (elements [rank chunk, ...) of the flattened whole) of the
// gradient of the same parameter of `whole`, by named_parameters() order.
inline void expect_shard_grads(const dist::FullyShardedDataParallel& fsdp, const nn::Module& whole,
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

}  // namespace sinter::testing

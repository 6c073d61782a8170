// Shared by the tensor-parallel tests (tests/dist/test_tensor_parallel*.cpp): a whole model and
// its split form trained side by side.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "dist_test_util.h"
#include "sinter/optim/clip.h"
#include "sinter/optim/optimizer.h"
#include "sinter/tensor_parallel.h"

namespace sinter::testing {

// `steps` steps of a whole model (forward: logits) in one process with whole_opt, and of its
// split form (loss() over the group) with split_opt, on the same random batches (2 sequences of t
// tokens from generator `seed`): the losses agree within 1e-10 at every step, and with `clip`
// the norms the gradients are clipped at (0.5) too.
template <class WholeModel, class SplitModel>
void train_alike(WholeModel& whole, SplitModel& split, optim::Optimizer& whole_opt,
                 optim::Optimizer& split_opt, int64_t vocab, int64_t t, uint64_t seed, bool clip,
                 int steps) {
  Generator gen(seed);
  for (int step = 0; step < steps; ++step) {
    const Tensor ids = randint(0, vocab, {2, t}, {.dtype = DType::i64}, &gen);
    const Tensor targets = randint(0, vocab, {2, t}, {.dtype = DType::i64}, &gen);
    whole_opt.zero_grad();
    const Tensor want =
        cross_entropy(whole.forward(ids).reshape({-1, vocab}), targets.reshape({-1}));
    want.backward();
    const double want_norm = clip ? optim::clip_grad_norm_(whole.parameters(), 0.5) : 0.0;
    whole_opt.step();
    split_opt.zero_grad();
    const Tensor got = split.loss(ids, targets);
    got.backward();
    const double got_norm = clip ? dist::tp::clip_grad_norm_(split, 0.5, world_ptr()) : 0.0;
    split_opt.step();
    EXPECT_NEAR(got_norm, want_norm, 1e-10 * want_norm) << "step " << step;
    EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-10 * std::abs(want.item<double>()))
        << "step " << step;
  }
}

}  // namespace sinter::testing

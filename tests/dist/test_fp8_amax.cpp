// FP8's delayed scaling over ranks (Note [fp8 delayed state]), 2 ranks: with an amax_group, each
// rank's history holds the largest amax of all ranks, so that the ranks scale alike; without one,
// each its own; a forward without grad (an evaluation one rank may run alone) makes no collective.
#include <gtest/gtest.h>

#include <vector>

#include "dist_test_util.h"
#include "sinter/dist.h"
#include "sinter/fp8.h"
#include "sinter/ops.h"

using namespace sinter;

namespace {

TEST(Fp8Dist, DelayedAmaxesAreAllReducedOverTheGroup) {
  auto pg = sinter::testing::world_ptr();
  const int rank = pg->rank();
  for (const bool grouped : {true, false}) {
    SCOPED_TRACE(grouped ? "amax_group" : "no group");
    const fp8::Recipe recipe{.scaling = fp8::Scaling::Delayed,
                             .amax_history_len = 4,
                             .amax_group = grouped ? pg.get() : nullptr};
    fp8::LinearState st{zeros({3, 4}), ones({3}), zeros({1}, {.dtype = DType::i64})};
    // Rank r's input is (r + 1) times larger, its output gradient (2 - r) times.
    const Tensor x = mul(ones({4, 16}), rank + 1.0).requires_grad_(true);
    const Tensor w = mul(ones({16, 16}), 0.25).requires_grad_(true);
    fp8::linear(x, w, Tensor(), recipe, &st).backward(mul(ones({4, 16}), 2.0 - rank));
    if (rank == 0) {  // one rank alone: no collective, or the other would hang
      NoGradGuard ng;
      fp8::linear(x, w, Tensor(), recipe, &st);
    }
    const std::vector<float> h = st.amax_history.to_vector<float>();
    EXPECT_EQ(h[0], grouped ? 2.0f : rank + 1.0f);  // input, row 0
    EXPECT_EQ(h[4], 0.25f);                         // weight
    EXPECT_EQ(h[8], grouped ? 2.0f : 2.0f - rank);  // output gradient
    EXPECT_EQ(st.scale.to_vector<float>()[0], grouped ? 224.0f : 448.0f / (rank + 1.0f));
    pg->barrier();
  }
}

}  // namespace

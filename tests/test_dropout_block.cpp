// dropout_block and AttentionOptions::dropout_heads (Note [dropout blocks]): a tensor's parts,
// each dropped as a block of the whole, together give the whole tensor's dropout from the same
// generator state, and the generator ends where the whole's draw leaves it; the attention of a
// slice of the heads keeps exactly those heads' weights of the whole attention's mask, fused and
// composed. The index map itself, on the host (what the CUDA kernels run).
#include <gtest/gtest.h>

#include <vector>

#include "kern/philox.h"
#include "sinter/ops.h"
#include "test_util.h"

namespace sinter::testing {
namespace {

TEST(DropoutBlock, TheIndexOfABlockElementInTheWhole) {
  // Blocks of 2 rows of 3 out of 5 rows (block 6 = 2 x 3 elements, whole 15, from row 1).
  const kern::DropoutBlock b{6, 15, 3};
  std::vector<uint64_t> got;
  for (int64_t i = 0; i < 12; ++i) got.push_back(b.index(i));
  EXPECT_EQ(got, (std::vector<uint64_t>{3, 4, 5, 6, 7, 8, 18, 19, 20, 21, 22, 23}));
  EXPECT_EQ(kern::DropoutBlock{}.index(41), 41u);
}

TEST(DropoutBlock, PartsMakeUpTheWholeTensorsDropout) {
  const Tensor x = randn({3, 6, 5}, {.dtype = DType::f64});
  for (const int64_t dim : {0, 1, 2}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    Generator whole_gen(11);
    const Tensor want = dropout(x, 0.4, true, &whole_gen);
    const int64_t n = x.size(dim), cut = n / 3;
    std::vector<Tensor> parts;
    for (const auto& [from, len] :
         std::vector<std::pair<int64_t, int64_t>>{{0, cut}, {cut, n - cut}}) {
      Generator gen(11);
      parts.push_back(dropout_block(x.narrow(dim, from, len), 0.4, true, dim, from, n, &gen));
      EXPECT_EQ(gen.state().offset, whole_gen.state().offset);  // advanced by the whole's count
    }
    EXPECT_TRUE(all_close(cat(parts, dim), want, 0, 0));
  }
  // Not training, or p 0: x itself; a block that does not fit is an error naming it.
  const Tensor part = x.narrow(1, 2, 2);
  EXPECT_TRUE(dropout_block(part, 0.4, false, 1, 2, 6).is_same(part));
  expect_error([&] { dropout_block(part, 0.4, true, 1, 5, 6); },
               {"dropout_block", "[5, 7)", "whole of 6"});
}

TEST(DropoutBlock, AttentionOfSomeHeadsKeepsTheirPartOfTheWholeMask) {
  const Tensor q = randn({2, 4, 5, 8}, {.dtype = DType::f64}),
               k = randn({2, 4, 7, 8}, {.dtype = DType::f64}),
               v = randn({2, 4, 7, 8}, {.dtype = DType::f64});
  for (const AttentionKernel kernel : {AttentionKernel::Fused, AttentionKernel::Composed}) {
    SCOPED_TRACE(kernel == AttentionKernel::Fused ? "fused" : "composed");
    Generator whole_gen(5);
    const Tensor want = scaled_dot_product_attention(
        q, k, v, {.causal = true, .dropout_p = 0.3, .generator = &whole_gen, .kernel = kernel});
    Generator gen(5);
    const Tensor got =
        scaled_dot_product_attention(q.narrow(1, 1, 2), k.narrow(1, 1, 2), v.narrow(1, 1, 2),
                                     {.causal = true,
                                      .dropout_p = 0.3,
                                      .generator = &gen,
                                      .kernel = kernel,
                                      .dropout_heads = 4,
                                      .dropout_head_offset = 1});
    EXPECT_TRUE(all_close(got, want.narrow(1, 1, 2), 1e-12, 1e-12));
    EXPECT_EQ(gen.state().offset, whole_gen.state().offset);
  }
  expect_error(
      [&] {
        scaled_dot_product_attention(
            q, k, v, {.dropout_p = 0.3, .dropout_heads = 4, .dropout_head_offset = 1});
      },
      {"scaled_dot_product_attention", "[1, 5)", "dropout_heads 4"});
  // No heads of four: nothing to compute, and no division by the zero heads.
  const Tensor none = zeros({2, 0, 5, 8}, {.dtype = DType::f64});
  EXPECT_EQ(scaled_dot_product_attention(none, none, none,
                                         {.dropout_p = 0.3,
                                          .kernel = AttentionKernel::Fused,
                                          .dropout_heads = 4,
                                          .dropout_head_offset = 2})
                .numel(),
            0);
}

}  // namespace
}  // namespace sinter::testing

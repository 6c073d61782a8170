// Op-table rows of the reduce family (see op_table.h): sums, means, variances, extrema and their
// indices, logsumexp and cumsum.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> reduce_rows() {
  return {
      {.name = "Cumsum",
       .shapes = {S{3, 5}},
       .fn = [](const Inputs& x) { return cumsum(x[0], 1); }},
      {.name = "CumsumStridedDim",
       .shapes = {S{4, 3, 2}},
       .fn = [](const Inputs& x) { return cumsum(x[0], -3); }},
      {.name = "CumsumLongRows",
       .shapes = {S{2, 70}},
       .fn = [](const Inputs& x) { return cumsum(x[0], 1); },
       .bf16_tol = 1e-1},
      {.name = "CumsumTransposed",
       .shapes = {S{6, 4}},
       .fn = [](const Inputs& x) { return cumsum(x[0].t(), 1); }},
      // Reductions.
      {.name = "SumAll", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return sum(x[0]); }},
      {.name = "SumDims",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return sum(x[0], {0, 2});
           }},
      {.name = "SumKeepdim",
       .shapes = {S{2, 3, 4}},
       .fn = [](const Inputs& x) { return sum(x[0], {-1}, true); }},
      {.name = "MeanDim",
       .shapes = {S{3, 5}},
       .fn = [](const Inputs& x) { return mean(x[0], {1}); }},
      {.name = "MeanAll", .shapes = {S{2, 3, 2}}, .fn = [](const Inputs& x) { return mean(x[0]); }},
      {.name = "Var",
       .shapes = {S{4, 6}},
       .fn = [](const Inputs& x) { return var(x[0], {1}); },
       .bf16_tol = 6e-2},
      {.name = "VarAllBiased",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return var(x[0], {}, 0); },
       .bf16_tol = 6e-2},
      {.name = "MaxAll", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return max(x[0]); }},
      {.name = "MinAll", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return min(x[0]); }},
      {.name = "MaxDimValues",
       .shapes = {S{3, 5}},
       .fn = [](const Inputs& x) { return first(max(x[0], 1)); }},
      {.name = "MaxDimIndices",
       .shapes = {S{3, 5}},
       .fn = [](const Inputs& x) { return second(max(x[0], 0, true)); },
       .grad = false},
      {.name = "MinDimValues",
       .shapes = {S{2, 3, 4}},
       .fn = [](const Inputs& x) { return first(min(x[0], 1, true)); }},
      {.name = "Amax",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return amax(x[0], {0, 2});
           }},
      {.name = "Argmax",
       .shapes = {S{4, 6}},
       .fn = [](const Inputs& x) { return argmax(x[0], 1); },
       .grad = false},
      {.name = "Argmin",
       .shapes = {S{4, 6}},
       .fn = [](const Inputs& x) { return argmin(x[0], 0); },
       .grad = false},
      {.name = "Logsumexp",
       .shapes = {S{3, 5}},
       .fn = [](const Inputs& x) { return logsumexp(x[0], {1}); }},
      {.name = "LogsumexpKeepdim",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return logsumexp(x[0], {0, 2}, true);
           }},
  };
}

}  // namespace sinter::testing

namespace sinter {
namespace {

TEST(Cumsum, IntegralSumsInI64AndScalarIsItself) {
  const Tensor a = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}).to(DType::i32);
  const Tensor c = cumsum(a, 1);
  EXPECT_EQ(c.dtype(), DType::i64);
  EXPECT_EQ(c.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(cumsum(a, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 5, 7, 9}));
  const Tensor b = from_vector<double>({1, 0, 1, 1}, {4}).to(DType::b8);
  EXPECT_EQ(cumsum(b, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 2, 3}));
  const Tensor s = full({}, 2.5);
  EXPECT_EQ(cumsum(s, 0).to_vector<double>(), std::vector<double>{2.5});
  EXPECT_EQ(cumsum(zeros({0, 3}), 0).shape(), (Shape{0, 3}));
  testing::expect_error([] { cumsum(zeros({2, 3}), 2); }, {"cumsum", "dim 2", "2 dims"});
}

}  // namespace
}  // namespace sinter

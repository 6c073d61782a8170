// Op-table rows of matmul and linear (see op_table.h): 1-D, 2-D, batched and broadcast operands,
// transposed operands read in place, and linear's bias and activation in the GEMM epilogue; bmm,
// baddbmm and einsum, which run on matmul.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> gemm_rows() {
  return {
      // Matmul: 1-D, 2-D, batched, broadcast, transposed operands read in place.
      {.name = "Matmul",
       .shapes = {S{3, 4}, S{4, 5}},
       .fn = [](const Inputs& x) { return matmul(x[0], x[1]); },
       .tol = 1e-3},
      {.name = "MatmulVecVec",
       .shapes = {S{6}, S{6}},
       .fn = [](const Inputs& x) { return matmul(x[0], x[1]); },
       .tol = 1e-3},
      {.name = "MatmulMatVec",
       .shapes = {S{3, 6}, S{6}},
       .fn = [](const Inputs& x) { return matmul(x[0], x[1]); },
       .tol = 1e-3},
      {.name = "MatmulVecMat",
       .shapes = {S{6}, S{6, 2}},
       .fn = [](const Inputs& x) { return matmul(x[0], x[1]); },
       .tol = 1e-3},
      {.name = "MatmulBatched",
       .shapes = {S{2, 3, 4}, S{2, 4, 5}},
       .fn = [](const Inputs& x) { return matmul(x[0], x[1]); },
       .tol = 1e-3},
      {.name = "MatmulBroadcast",
       .shapes = {S{2, 1, 3, 4}, S{3, 4, 2}},
       .fn = [](const Inputs& x) { return matmul(x[0], x[1]); },
       .tol = 1e-3},
      {.name = "MatmulTransposed",
       .shapes = {S{4, 3}, S{5, 4}},
       .fn = [](const Inputs& x) { return matmul(x[0].t(), x[1].t()); },
       .tol = 1e-3},
      {.name = "MatmulBatchedTransposed",
       .shapes = {S{2, 4, 3}, S{2, 4, 5}},
       .fn = [](const Inputs& x) { return matmul(x[0].transpose(1, 2), x[1]); },
       .tol = 1e-3},
      // linear: one GEMM with the bias and activation in its epilogue.
      {.name = "Linear",
       .shapes = {S{3, 4}, S{5, 4}, S{5}},
       .fn = [](const Inputs& x) { return linear(x[0], x[1], x[2]); },
       .tol = 1e-3},
      {.name = "LinearNoBias3d",
       .shapes = {S{2, 3, 4}, S{5, 4}},
       .fn = [](const Inputs& x) { return linear(x[0], x[1]); },
       .tol = 1e-3},
      {.name = "LinearVector",
       .shapes = {S{4}, S{5, 4}, S{5}},
       .fn = [](const Inputs& x) { return linear(x[0], x[1], x[2]); },
       .tol = 1e-3},
      {.name = "LinearRelu",
       .shapes = {S{6, 4}, S{5, 4}, S{5}},
       .fn = [](const Inputs& x) { return linear(x[0], x[1], x[2], Activation::Relu); },
       .tol = 1e-3},
      {.name = "LinearGelu",
       .shapes = {S{6, 4}, S{5, 4}, S{5}},
       .fn = [](const Inputs& x) { return linear(x[0], x[1], x[2], Activation::Gelu); },
       .tol = 1e-3},
      {.name = "LinearGeluTanh",
       .shapes = {S{2, 3, 4}, S{5, 4}, S{5}},
       .fn = [](const Inputs& x) { return linear(x[0], x[1], x[2], Activation::GeluTanh); },
       .tol = 1e-3},
      {.name = "LinearTransposedInput",
       .shapes = {S{4, 3}, S{5, 4}, S{5}},
       .fn = [](const Inputs& x) { return linear(x[0].t(), x[1], x[2], Activation::Relu); },
       .tol = 1e-3},
      // bmm and baddbmm: matmul of 3-D operands; baddbmm's scaled input broadcast over the batch.
      {.name = "Bmm",
       .shapes = {S{2, 3, 4}, S{2, 4, 5}},
       .fn = [](const Inputs& x) { return bmm(x[0], x[1]); },
       .tol = 1e-3},
      {.name = "Baddbmm",
       .shapes = {S{3, 1}, S{2, 3, 4}, S{2, 4, 5}},
       .fn = [](const Inputs& x) { return baddbmm(x[0], x[1], x[2], 0.5, -1.5); },
       .tol = 1e-3},
      // einsum: each form of term (Note [einsum as matmuls] in src/ops/einsum.cpp).
      {.name = "EinsumBatched",
       .shapes = {S{2, 3, 4}, S{2, 4, 5}},
       .fn =
           [](const Inputs& x) {
             return einsum("bij,bjk->bik", {x[0], x[1]});
           },
       .tol = 1e-3},
      {.name = "EinsumBilinear",
       .shapes = {S{2, 3}, S{4, 3, 5}, S{2, 5}},
       .fn =
           [](const Inputs& x) {
             return einsum("bn,anm,bm->ba", {x[0], x[1], x[2]});
           },
       .tol = 1e-3},
      {.name = "EinsumEllipsisBroadcast",
       .shapes = {S{2, 1, 3, 4}, S{3, 4, 2}},
       .fn =
           [](const Inputs& x) {
             return einsum("...ij,...jk", {x[0], x[1]});
           },
       .tol = 1e-3},
      {.name = "EinsumDiagonalAndSum",
       .shapes = {S{3, 4, 3}, S{4}},
       .fn =
           [](const Inputs& x) {
             return einsum("iji,j->i", {x[0], x[1]});
           },
       .tol = 1e-3},
      {.name = "EinsumTraceOuter",
       .shapes = {S{3, 3}, S{2}, S{4}},
       .fn =
           [](const Inputs& x) {
             return einsum("ii,j,k", {x[0], x[1], x[2]});
           },
       .tol = 1e-3},
  };
}

}  // namespace sinter::testing

namespace sinter {
namespace {

// Regression: linear with in_features = 0 took its row count as numel / in (0) and threw in a
// reshape. The product over nothing is 0, so the output is the activated bias on every row.
TEST(Linear, NoInputFeaturesGivesTheActivatedBias) {
  const Tensor x = zeros({2, 5, 0}, {.requires_grad = true});
  const Tensor w = zeros({3, 0}, {.requires_grad = true});
  const Tensor b = from_vector<float>({-1, 0.5, 2}, {3}).requires_grad_(true);
  const Tensor y = linear(x, w, b, Activation::Relu);
  ASSERT_EQ(y.shape(), (Shape{2, 5, 3}));
  const std::vector<float> v = y.to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], std::max(b.to_vector<float>()[i % 3], 0.f));
  sum(y).backward();
  EXPECT_EQ(x.grad().shape(), (Shape{2, 5, 0}));
  EXPECT_EQ(w.grad().shape(), (Shape{3, 0}));
  EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{0, 10, 10}));
}

}  // namespace
}  // namespace sinter

// einsum, bmm, baddbmm, the rearranged tensors (flip, roll, diagonal, diag, kron, meshgrid,
// repeat_interleave, nonzero, one_hot), sort, the searches, unique, and the composed elementwise
// ops (lerp, addcmul, addcdiv, clamp with tensor bounds, isclose, allclose) beyond the op table:
// PyTorch's values for the same calls, and the argument checks.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;

// (arange(n) - shift) / scale in f64 with `shape`: the inputs of the PyTorch calls below, which
// build theirs the same way.
Tensor seq(const Shape& shape, double shift, double scale) {
  const TensorOptions f64{.dtype = DType::f64};
  return div(sub(arange(static_cast<double>(numel_of(shape)), f64), shift), scale).reshape(shape);
}

Tensor values(const std::vector<double>& v, const Shape& shape) {
  return from_vector<double>(v, shape);
}

struct EinsumCase {
  std::string equation;
  std::vector<Tensor> operands;
  std::vector<double> want;
  Shape shape;
};

// torch.einsum(equation, *operands) in f64, printed to 12 decimals.
TEST(Einsum, PyTorchValues) {
  const std::vector<EinsumCase> cases = {
      {"ij,jk->ik",
       {seq({2, 3}, 2, 4), seq({3, 2}, 1, 3)},
       {0.083333333333, -0.166666666667, 0.833333333333, 1.333333333333},
       {2, 2}},
      {"bij,bjk->bik",
       {seq({2, 2, 3}, 5, 4), seq({2, 3, 2}, 3, 5)},
       {0.8, 0.2, 0.35, 0.2, 1.7, 2.0, 3.95, 4.7},
       {2, 2, 2}},
      {"i,j->ij", {seq({3}, 1, 2), seq({2}, 0, 4)}, {-0.0, -0.125, 0.0, 0.0, 0.0, 0.125}, {3, 2}},
      {"ii", {seq({3, 3}, 3, 2)}, {1.5}, {}},
      {"ii->i", {seq({3, 3}, 4, 2)}, {-2.0, 0.0, 2.0}, {3}},
      {"ij->ji", {seq({2, 3}, 2, 4)}, {-0.5, 0.25, -0.25, 0.5, 0.0, 0.75}, {3, 2}},
      {"ij->", {seq({2, 3}, 2, 4)}, {0.75}, {}},
      {"bn,anm,bm->ba",
       {seq({2, 3}, 2, 4), seq({2, 3, 2}, 5, 4), seq({2, 2}, 1, 2)},
       {-0.40625, 0.15625, -0.9375, 2.4375},
       {2, 2}},
      {"...ij,...jk",
       {seq({2, 1, 2, 3}, 6, 4), seq({3, 3, 2}, 8, 5)},
       {4.7,  3.95,  2.0,  1.7,  0.2, -0.55, 0.2, -0.1, -4.3, -5.05, -1.6, -1.9,
        -0.7, -0.55, -3.4, -2.8, 0.2, 0.35,  0.2, 0.8,  1.1,  1.25,  3.8,  4.4},
       {2, 3, 2, 2}},
      {"ij,jk,kl->il",
       {seq({2, 3}, 2, 4), seq({3, 2}, 1, 3), seq({2, 2}, 1, 2)},
       {-0.125, -0.166666666667, 0.25, 1.333333333333},
       {2, 2}},
      {"iji->j", {seq({2, 3, 2}, 5, 4)}, {-0.75, 0.25, 1.25}, {3}},
      {"aB,aC",
       {seq({3, 2}, 2, 4), seq({3, 2}, 1, 3)},
       {0.666666666667, 0.666666666667, 0.916666666667, 1.166666666667},
       {2, 2}},
      {"...i,...i->...", {seq({2, 3}, 2, 4), seq({3}, 1, 2)}, {0.25, 0.25}, {2}},
      {"i,i->", {seq({1}, -2, 1), seq({3}, 0, 2)}, {3.0}, {}},
  };
  for (const EinsumCase& c : cases) {
    SCOPED_TRACE(c.equation);
    const Tensor got = einsum(c.equation, c.operands);
    EXPECT_TRUE(all_close(got, values(c.want, c.shape), 1e-11, 1e-11));
  }
  // Spaces are ignored, and f32 operands give f32.
  const Tensor f = einsum(" i j , j k -> i k ",
                          {seq({2, 3}, 2, 4).to(DType::f32), seq({3, 2}, 1, 3).to(DType::f32)});
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_TRUE(all_close(f, values({1.0 / 12, -1.0 / 6, 5.0 / 6, 4.0 / 3}, {2, 2}), 1e-6, 1e-6));
}

TEST(Einsum, GradientsOfDiagonalsAndBroadcasts) {
  // d trace / dA = I; d sum_i A_ii x_i / dx = diag(A).
  const Tensor a = seq({3, 3}, 3, 2).requires_grad_(true);
  einsum("ii", {a}).backward();
  EXPECT_TRUE(all_close(a.grad(), values({1, 0, 0, 0, 1, 0, 0, 0, 1}, {3, 3}), 0, 0));
  // A size-1 dim broadcast against size 3: its gradient is summed (torch: 1.5 = sum(b)).
  const Tensor s = seq({1}, -2, 1).requires_grad_(true);
  einsum("i,i->", {s, seq({3}, 0, 2)}).backward();
  EXPECT_TRUE(all_close(s.grad(), values({1.5}, {1}), 1e-12, 0));
}

TEST(Einsum, Errors) {
  const Tensor m = seq({2, 3}, 0, 1), v = seq({3}, 0, 1);
  expect_error([] { einsum("ij", {}); }, {"einsum", "\"ij\"", "at least one operand"});
  expect_error([&] { einsum("ij,jk->ik", {m}); }, {"\"ij,jk->ik\"", "2 input terms", "1 operands"});
  expect_error([&] { einsum("i1", {m}); }, {"\"i1\"", "invalid character '1'"});
  expect_error([&] { einsum("i.j", {m}); }, {"\"i.j\"", "\"...\""});
  expect_error([&] { einsum("......", {m}); }, {"more than one \"...\""});
  expect_error([&] { einsum("ij->i->j", {m}); }, {"\"ij->i->j\"", "more than one \"->\""});
  expect_error([&] { einsum("ij->k", {m}); }, {"output label 'k'", "does not occur"});
  expect_error([&] { einsum("ij->ii", {m}); }, {"output label 'i'", "more than once"});
  expect_error([&] { einsum("ijk", {m}); }, {"operand 0 has 2 dims", "3 letters"});
  expect_error([&] { einsum("ijk...", {m}); }, {"operand 0 has 2 dims", "fewer than the 3"});
  expect_error([&] { einsum("ii", {m}); }, {"label 'i' repeats in operand 0", "sizes 2 and 3"});
  expect_error(
      [&] {
        einsum("ij,i", {m, v});
      },
      {"\"ij,i\"", "label 'i'", "sizes 2 and 3", "operand 1"});
  expect_error(
      [&] {
        einsum("...,...", {m, seq({2, 2}, 0, 1)});
      },
      {"the dims of \"...\"", "sizes 3 and 2"});
  expect_error(
      [&] {
        einsum("ij,j", {m, v.to(DType::f32)});
      },
      {"operand 1 is f32", "operand 0 f64"});
  expect_error([&] { einsum("i", {v.to(DType::i64)}); }, {"einsum", "floating", "i64"});
  expect_error([&] { einsum("i,i", {v, Tensor()}); }, {"einsum: operand 1 is undefined"});
}

TEST(Bmm, PyTorchValues) {
  // torch.bmm and torch.baddbmm(input, b1, b2, beta=0.5, alpha=-2) on these inputs.
  const Tensor b1 = seq({2, 2, 3}, 5, 4), b2 = seq({2, 3, 2}, 3, 5);
  EXPECT_TRUE(all_close(bmm(b1, b2), values({0.8, 0.2, 0.35, 0.2, 1.7, 2.0, 3.95, 4.7}, {2, 2, 2}),
                        1e-12, 1e-12));
  EXPECT_TRUE(all_close(baddbmm(seq({2, 1, 2}, 1, 2), b1, b2, 0.5, -2.0),
                        values({-1.85, -0.4, -0.95, -0.4, -3.15, -3.5, -7.65, -8.9}, {2, 2, 2}),
                        1e-12, 1e-12));
  // beta = 0: the input's NaN does not reach the result.
  const Tensor nan =
      full({2, 2, 2}, std::numeric_limits<double>::quiet_NaN(), {.dtype = DType::f64});
  EXPECT_TRUE(all_close(baddbmm(nan, b1, b2, 0.0, 1.0), bmm(b1, b2), 0, 0));
}

TEST(Bmm, Errors) {
  const Tensor a = seq({2, 2, 3}, 0, 1), b = seq({2, 3, 2}, 0, 1);
  expect_error([&] { bmm(a.select(0, 0), b); }, {"bmm: expected 3-D tensors", "[2, 3]"});
  expect_error([&] { bmm(a, seq({3, 3, 2}, 0, 1)); }, {"bmm: batch sizes differ"});
  expect_error([&] { bmm(a, a); }, {"bmm: shapes", "cannot be multiplied (3 vs 2)"});
  expect_error([&] { bmm(a, b.to(DType::f32)); }, {"bmm: dtypes differ", "f64", "f32"});
  expect_error([&] { bmm(a.to(DType::i64), b.to(DType::i64)); }, {"bmm: expected floating"});
  expect_error([&] { baddbmm(seq({3}, 0, 1), a, b); }, {"baddbmm", "[3]"});
  expect_error(
      [&] {
        baddbmm(seq({1, 2, 2, 2}, 0, 1), a, b);
      },
      {"baddbmm: input of shape [1, 2, 2, 2] does not broadcast to [2, 2, 2]"});
  expect_error([&] { baddbmm(seq({2}, 0, 1).to(DType::f32), a, b); },
               {"baddbmm: input is f32", "the batches f64"});
  expect_error([&] { baddbmm(seq({2}, 0, 1), a, a); }, {"baddbmm: shapes"});
}

TEST(Rearrange, PyTorchValues) {
  const Tensor x = seq({2, 3, 4}, 0, 1);
  EXPECT_TRUE(all_close(
      flip(x, {0, 2}),
      values({15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20, 3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8},
             {2, 3, 4}),
      0, 0));
  // torch.roll(x, 5) and torch.roll(x, (-1, 6), (0, -1)).
  EXPECT_TRUE(all_close(roll(x, {5}), remainder(sub(x, 5.0), 24.0), 0, 0));
  EXPECT_TRUE(all_close(
      roll(x, {-1, 6}, {0, -1}),
      values({14, 15, 12, 13, 18, 19, 16, 17, 22, 23, 20, 21, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9},
             {2, 3, 4}),
      0, 0));
  // torch.diagonal(x, 1, 2, 1) and torch.diagonal(x, -1, 0, 2).
  EXPECT_TRUE(all_close(diagonal(x, 1, 2, 1), values({4, 9, 16, 21}, {2, 2}), 0, 0));
  EXPECT_TRUE(all_close(diagonal(x, -1, 0, 2), values({12, 16, 20}, {3, 1}), 0, 0));
  EXPECT_EQ(diagonal(x, 5, 1, 2).shape(), (Shape{2, 0}));
  // torch.diag of a vector below the diagonal, and of a matrix above it.
  EXPECT_TRUE(all_close(diag(seq({3}, -1, 1), -1),
                        values({0, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0}, {4, 4}), 0, 0));
  EXPECT_TRUE(all_close(diag(seq({3, 4}, 0, 1), 1), values({1, 6, 11}, {3}), 0, 0));
  // torch.kron((2, 2), (3,)): the vector as (1, 3).
  EXPECT_TRUE(all_close(kron(seq({2, 2}, -1, 1), seq({3}, 1, 1)),
                        values({-1, 0, 1, -2, 0, 2, -3, 0, 3, -4, 0, 4}, {2, 6}), 0, 0));
  // torch.meshgrid(a, b, c, indexing="xy") with len 2, 3, 1: grids of (3, 2, 1).
  const std::vector<Tensor> g = meshgrid({seq({2}, 0, 1), seq({3}, -10, 1), seq({1}, -5, 1)}, "xy");
  ASSERT_EQ(g.size(), 3u);
  EXPECT_TRUE(all_close(g[0], values({0, 1, 0, 1, 0, 1}, {3, 2, 1}), 0, 0));
  EXPECT_TRUE(all_close(g[1], values({10, 10, 11, 11, 12, 12}, {3, 2, 1}), 0, 0));
  EXPECT_TRUE(all_close(g[2], full({3, 2, 1}, 5.0, {.dtype = DType::f64}), 0, 0));
  const std::vector<Tensor> ij = meshgrid({seq({2}, 0, 1), seq({3}, 0, 1)});
  EXPECT_EQ(ij[0].shape(), (Shape{2, 3}));
  // F.one_hot([[0, 3], [1, 0]]) and F.one_hot([2], 5).
  const Tensor h = one_hot(from_vector<int64_t>({0, 3, 1, 0}, {2, 2}));
  EXPECT_EQ(h.dtype(), DType::i64);
  EXPECT_EQ(h.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(h.to_vector<int64_t>(),
            (std::vector<int64_t>{1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(one_hot(from_vector<int64_t>({2}, {1}), 5).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 0, 1, 0, 0}));
}

TEST(Rearrange, DiagonalIsAView) {
  Tensor x = seq({3, 3}, 0, 1);
  const Tensor d = diagonal(x);
  x.select(0, 1).select(0, 1).fill_(-7.0);
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{0, -7, 8}));
  // Its gradient lands on the diagonal of zeros.
  const Tensor a = seq({2, 3}, 0, 1).requires_grad_(true);
  sum(diagonal(a, 1)).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 1, 0, 0, 0, 1}));
}

TEST(Rearrange, Errors) {
  const Tensor x = seq({2, 3}, 0, 1);
  expect_error([&] { flip(x, {1, -1}); }, {"flip: dim 1 appears more than once"});
  expect_error([&] { flip(x, {2}); }, {"flip: dim 2 out of range"});
  expect_error([&] { roll(x, {1, 2}); }, {"roll: without dims", "2 shifts"});
  expect_error([&] { roll(x, {1, 2}, {0}); }, {"roll: 2 shifts", "for 1 dims"});
  expect_error([&] { diagonal(seq({3}, 0, 1)); }, {"diagonal: expected a tensor with at least 2"});
  expect_error([&] { diagonal(x, 0, 1, -1); }, {"diagonal: dim1 and dim2 are the same dim 1"});
  expect_error([&] { diag(seq({2, 2, 2}, 0, 1)); }, {"diag: expected a 1-D or 2-D", "[2, 2, 2]"});
  expect_error([] { meshgrid({}); }, {"meshgrid: expected at least one tensor"});
  expect_error([&] { meshgrid({x}); }, {"meshgrid: expected 0-D or 1-D", "tensor 0"});
  expect_error([&] { meshgrid({seq({2}, 0, 1)}, "yx"); }, {"meshgrid: indexing", "\"yx\""});
  expect_error(
      [&] {
        meshgrid({seq({2}, 0, 1), seq({2}, 0, 1).to(DType::f32)});
      },
      {"meshgrid: tensor 1 is f32"});
  const Tensor idx = from_vector<int64_t>({0, 2}, {2});
  expect_error([&] { one_hot(x); }, {"one_hot: expected i64 indices", "f64"});
  expect_error([&] { one_hot(idx, 2); }, {"one_hot: index 2 is out of range for num_classes 2"});
  expect_error([&] { one_hot(from_vector<int64_t>({-1}, {1})); },
               {"one_hot", "non-negative", "-1"});
  expect_error([&] { one_hot(from_vector<int64_t>({}, {0})); }, {"one_hot: cannot infer"});
  expect_error([&] { one_hot(idx, -2); }, {"one_hot: num_classes must be", "-2"});
}

// torch.sort(stable=True), torch.argsort, torch.searchsorted and torch.bucketize.
TEST(Sort, PyTorchValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = values({2, nan, 1, 2, -0.0, 0.0, -3}, {7});
  const auto [up, up_i] = sort(x);
  EXPECT_TRUE(all_close(up, values({-3, -0.0, 0.0, 1, 2, 2, nan}, {7}), 0, 0));
  EXPECT_EQ(up_i.to_vector<int64_t>(), (std::vector<int64_t>{6, 4, 5, 2, 0, 3, 1}));
  const auto [down, down_i] = sort(x, 0, true);
  EXPECT_TRUE(all_close(down, values({nan, 2, 2, 1, -0.0, 0.0, -3}, {7}), 0, 0));
  EXPECT_EQ(down_i.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 3, 2, 4, 5, 6}));
  const Tensor m = values({3, 1, 2, 1, 1, 0}, {2, 3});
  EXPECT_EQ(argsort(m, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(argsort(m, 0, true).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
  // The gradient of each sorted value goes back to where it came from.
  const Tensor a = values({3, 1, 2}, {3}).requires_grad_(true);
  sum(mul(std::get<0>(sort(a)), values({1, 10, 100}, {3}))).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{100, 1, 10}));

  const Tensor b = values({1, 3, 5, 7, 2, 4, 6, 8}, {2, 4}), v = values({3, 6, 9, 1, 4, 8}, {2, 3});
  const Tensor left = searchsorted(b, v), right = searchsorted(b, v, true);
  EXPECT_EQ(left.dtype(), DType::i64);
  EXPECT_EQ(left.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 4, 0, 1, 3}));
  EXPECT_EQ(right.to_vector<int64_t>(), (std::vector<int64_t>{2, 3, 4, 0, 2, 4}));
  // A NaN value goes after every boundary, on either side.
  const Tensor flat = values({1, 2, 2, 3}, {4});
  EXPECT_EQ(searchsorted(flat, values({0, 2, nan, 3, 3.5, -1}, {2, 3})).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 4, 3, 4, 0}));
  EXPECT_EQ(searchsorted(flat, values({0, 2, nan, 3, 3.5, -1}, {2, 3}), true).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 3, 4, 4, 4, 0}));
  // NaN boundaries (sorted last) give PyTorch's binary search's answers, not a count (torch 2.x:
  // a count would put 1.5 at 2 and 0.5 in the first row at 0).
  const Tensor with_nan = values({1, 2, nan}, {3}), probes = values({0.5, 1.5, 2, 3, nan}, {5});
  EXPECT_EQ(searchsorted(with_nan, probes).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 1, 3, 3}));
  EXPECT_EQ(searchsorted(with_nan, probes, true).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 3, 3, 3}));
  const Tensor rows = values({1, nan, nan, nan, 0, 1, 2, 3}, {2, 4});
  const Tensor rows_v = values({0.5, 1, 2, 1, 2.5, 9}, {2, 3});
  EXPECT_EQ(searchsorted(rows, rows_v).to_vector<int64_t>(),
            (std::vector<int64_t>{4, 4, 4, 1, 3, 4}));
  EXPECT_EQ(searchsorted(rows, rows_v, true).to_vector<int64_t>(),
            (std::vector<int64_t>{4, 4, 4, 2, 3, 4}));
  // A 0-d value takes the boundaries' dtype where its category is not higher (torch's
  // result_type): 0.1000000014 in f32 is 0.1f; 2^40 in i32 wraps to 0.
  EXPECT_EQ(searchsorted(values({0.1, 0.2, 0.3}, {3}).to(DType::f32),
                         full({}, 0.1000000014, {.dtype = DType::f64}), true)
                .item<int64_t>(),
            1);
  EXPECT_EQ(searchsorted(values({1, 2, 3}, {3}).to(DType::i32),
                         full({}, 1099511627776.0, {.dtype = DType::i64}))
                .item<int64_t>(),
            0);
  // Integer boundaries and float values compare in the promoted dtype.
  EXPECT_EQ(searchsorted(values({1, 3, 5}, {3}).to(DType::i64), values({2.5, 3}, {2}))
                .to_vector<int64_t>(),
            (std::vector<int64_t>{1, 1}));
  const Tensor in = values({0.5, 2, 3, 9}, {2, 2}), bounds = values({1, 2, 3}, {3});
  EXPECT_EQ(bucketize(in, bounds).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(bucketize(in, bounds, true).to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 3, 3}));
}

// torch.unique(dim=...) (torch 2.x): rows and columns, with inverse and counts; -0.0 equal to
// 0.0; bool; an empty dim; rows holding NaN each their own.
TEST(Sort, UniqueDimGivesPyTorchsSlices) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor a = values({2, 1, 2, 0, 3, 0, 1, 1, 1}, {3, 3}).to(DType::i64);
  const auto [cols, inv, counts] = unique_dim(a, 1, true, true);
  EXPECT_EQ(cols.shape(), (Shape{3, 2}));
  EXPECT_EQ(cols.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 0, 1, 1}));
  EXPECT_EQ(inv.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(counts.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  const Tensor rows = values({1, 2, 0, 5, 1, 2, -0.0, 5, 1, 1}, {5, 2});
  const auto [u, rows_inv, rows_counts] = unique_dim(rows, 0, true, true);
  EXPECT_TRUE(all_close(u, values({0, 5, 1, 1, 1, 2}, {3, 2}), 0, 0));
  EXPECT_EQ(rows_inv.to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 2, 0, 1}));
  EXPECT_EQ(rows_counts.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 2}));
  const Tensor flags = values({1, 0, 1, 0, 0, 0}, {3, 2}).to(DType::b8);
  const auto [fu, finv, fc] = unique_dim(flags, 0, true);
  EXPECT_EQ(fu.to(DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0}));
  EXPECT_EQ(finv.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_FALSE(fc.defined());
  // Rows with a NaN: none equals another, after the number rows they share a prefix with.
  const auto [nu, ninv, nc] = unique_dim(values({nan, 1, 1, 2, nan, 1}, {3, 2}), 0, true, true);
  EXPECT_EQ(nu.shape(), (Shape{3, 2}));
  EXPECT_EQ(nc.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(ninv.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 2}));
  const auto [eu, einv, ec] = unique_dim(zeros({0, 3}), 0, true, true);
  EXPECT_EQ(eu.shape(), (Shape{0, 3}));
  EXPECT_EQ(einv.numel(), 0);
  EXPECT_EQ(ec.numel(), 0);
  expect_error([] { unique_dim(zeros({3, 0}), 0); }, {"unique_dim", "[3, 0]", "size 0"});
  expect_error([] { unique_dim(full({}, 5.0), 0); }, {"unique_dim", "no dimensions"});
  expect_error([] { unique_dim(zeros({2, 2}), 2); }, {"unique_dim", "dim 2"});
}

// floor, ceil, round (halves to even), trunc and frac against torch 2.x's values in f32, signed
// zeros, infinities and NaN included; round with decimals; bf16 and integer tensors; gradients;
// bool refused.
TEST(PointwiseMath, RoundingMatchesPyTorch) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const std::vector<float> in = {0.5f,  1.5f, 2.5f, -0.5f, -1.5f, -2.7f, 2.7f,
                                 -0.0f, inf,  -inf, nan,   1e20f, -3.0f};
  const Tensor x = from_vector(in, {13});
  const auto same = [](const std::vector<float>& got, const std::vector<float>& want) {
    if (got.size() != want.size()) return false;
    for (size_t i = 0; i < got.size(); ++i) {
      const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
      if (!both_nan && (got[i] != want[i] || std::signbit(got[i]) != std::signbit(want[i]))) {
        return false;
      }
    }
    return true;
  };
  EXPECT_TRUE(same(floor(x).to_vector<float>(),
                   {0, 1, 2, -1, -2, -3, 2, -0.0f, inf, -inf, nan, 1e20f, -3}));
  EXPECT_TRUE(same(ceil(x).to_vector<float>(),
                   {1, 2, 3, -0.0f, -1, -2, 3, -0.0f, inf, -inf, nan, 1e20f, -3}));
  EXPECT_TRUE(same(round(x).to_vector<float>(),
                   {0, 2, 2, -0.0f, -2, -3, 3, -0.0f, inf, -inf, nan, 1e20f, -3}));
  EXPECT_TRUE(same(trunc(x).to_vector<float>(),
                   {0, 1, 2, -0.0f, -1, -2, 2, -0.0f, inf, -inf, nan, 1e20f, -3}));
  EXPECT_TRUE(same(frac(x).to_vector<float>(), {0.5f, 0.5f, 0.5f, -0.5f, -0.5f, -2.7f + 2.0f,
                                                2.7f - 2.0f, 0.0f, nan, nan, nan, 0.0f, 0.0f}));
  const Tensor d =
      from_vector(std::vector<float>{1.2345f, 2.675f, -0.125f, 1234.5f, 1250, 1350}, {6});
  EXPECT_TRUE(same(round(d, 2).to_vector<float>(), {1.2300000190734863f, 2.680000066757202f,
                                                    -0.11999999731779099f, 1234.5f, 1250, 1350}));
  EXPECT_TRUE(same(round(d.narrow(0, 3, 3), -2).to_vector<float>(), {1200, 1200, 1400}));
  // bf16 and f16 with decimals: in f32, rounded once (torch: 1.2265625; 1000, where f16's
  // 1000 * 100 would overflow).
  EXPECT_EQ(round(full({1}, 1.234, {.dtype = DType::bf16}), 2).to(DType::f32).item<float>(),
            1.2265625f);
  EXPECT_EQ(round(full({1}, 1000.0, {.dtype = DType::f16}), 2).to(DType::f32).item<float>(),
            1000.0f);
  const Tensor halves = from_vector(std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}, {4});
  const Tensor b = round(halves.to(DType::bf16));
  EXPECT_EQ(b.dtype(), DType::bf16);
  EXPECT_EQ(b.to(DType::f32).to_vector<float>(), (std::vector<float>{0, 2, 2, 4}));
  // Integer tensors are their own; bool and frac of integers are refused, as in PyTorch.
  const Tensor ints = from_vector(std::vector<float>{1, -2, 3}, {3}).to(DType::i64);
  for (const Tensor& r : {floor(ints), ceil(ints), round(ints), trunc(ints)}) {
    EXPECT_EQ(r.dtype(), DType::i64);
    EXPECT_EQ(r.to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 3}));
  }
  expect_error([&] { floor(gt(ints, 0.0)); }, {"floor", "bool"});
  expect_error([&] { frac(ints); }, {"frac", "i64"});
  expect_error([&] { round(ints, 1); }, {"round", "decimals = 1", "i64"});
  // Zero gradients for the four; frac passes its gradient on.
  const Tensor v = from_vector(std::vector<float>{1.7f, -1.2f}, {2}).requires_grad_(true);
  add(add(floor(v), ceil(v)), add(add(round(v), trunc(v)), mul(frac(v), 3.0))).sum().backward();
  EXPECT_EQ(v.grad().to_vector<float>(), (std::vector<float>{3, 3}));
}

TEST(Sort, Errors) {
  const Tensor m = seq({2, 3}, 0, 1);
  expect_error([&] { sort(m, 2); }, {"sort: dim 2 out of range"});
  expect_error([&] { argsort(m, -3); }, {"sort: dim -3 out of range"});
  expect_error([&] { searchsorted(values({1}, {}), m); },
               {"searchsorted: sorted_sequence must have at least 1 dim"});
  expect_error(
      [&] {
        searchsorted(m, seq({3, 2}, 0, 1));
      },
      {"searchsorted: sorted_sequence of shape [2, 3]", "leading dims [2]", "[3, 2]"});
  expect_error([&] { searchsorted(seq({3}, 0, 1), gt(m, 0.0)); }, {"searchsorted: bool"});
  expect_error([&] { bucketize(m, m); }, {"bucketize: boundaries must be 1-D", "[2, 3]"});
}

TEST(Rearrange, RepeatInterleaveAndNonzero) {
  const Tensor a = seq({2, 3}, 0, 1);
  // torch.repeat_interleave(a, [0, 2, 1], dim=1), (a, [3], dim=0) and (a, 2).
  EXPECT_TRUE(all_close(repeat_interleave(a, from_vector<int64_t>({0, 2, 1}, {3}), 1),
                        values({1, 1, 2, 4, 4, 5}, {2, 3}), 0, 0));
  EXPECT_EQ(repeat_interleave(a, from_vector<int64_t>({3}, {1}), 0).shape(), (Shape{6, 3}));
  EXPECT_TRUE(
      all_close(repeat_interleave(a, 2), values({0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5}, {12}), 0, 0));
  EXPECT_TRUE(all_close(repeat_interleave(values({5}, {}), 2, 0), values({5, 5}, {2}), 0, 0));
  // The gradient of each copy is added back to its slice.
  const Tensor g = seq({3}, 0, 1).requires_grad_(true);
  sum(repeat_interleave(g, from_vector<int64_t>({2, 0, 3}, {3}))).backward();
  EXPECT_EQ(g.grad().to_vector<double>(), (std::vector<double>{2, 0, 3}));
  // torch.nonzero: row-major (n, ndim) indices.
  const Tensor nz = nonzero(values({0, 1, 0, 2, 0, -1}, {2, 3}));
  EXPECT_EQ(nz.dtype(), DType::i64);
  EXPECT_EQ(nz.shape(), (Shape{3, 2}));
  EXPECT_EQ(nz.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0, 1, 2}));
  EXPECT_EQ(nonzero(values({3}, {})).shape(), (Shape{1, 0}));
  EXPECT_EQ(nonzero(zeros({2, 2})).shape(), (Shape{0, 2}));
  EXPECT_EQ(nonzero(gt(a, 3.0)).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 2}));
}

TEST(Rearrange, RepeatInterleaveErrors) {
  const Tensor a = seq({2, 3}, 0, 1);
  expect_error([&] { repeat_interleave(a, -1); },
               {"repeat_interleave: repeats must be non-negative, got -1"});
  expect_error(
      [&] {
        repeat_interleave(a, from_vector<int64_t>({1, 2}, {2}), 1);
      },
      {"repeat_interleave: 2 repeats for dim 1 of size 3"});
  expect_error(
      [&] {
        repeat_interleave(a, values({1, 2}, {2}), 0);
      },
      {"repeat_interleave: repeats must be an i64 tensor", "f64"});
  expect_error([&] { repeat_interleave(a, 2, 2); }, {"repeat_interleave: dim 2 out of range"});
}

// torch.unique(x, return_inverse=True, return_counts=True): NaNs apart, -0.0 with 0.0.
TEST(Sort, UniqueValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = values({2, 1, 2, nan, 0, 1, nan, -0.0, 5}, {3, 3});
  const auto [u, inverse, counts] = unique(x, true, true);
  EXPECT_TRUE(all_close(u, values({0, 1, 2, 5, nan, nan}, {6}), 0, 0));
  EXPECT_EQ(inverse.shape(), (Shape{3, 3}));
  EXPECT_EQ(inverse.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 2, 4, 0, 1, 5, 0, 3}));
  EXPECT_EQ(counts.to_vector<int64_t>(), (std::vector<int64_t>{2, 2, 2, 1, 1, 1}));
  const auto [ui, ii, ci] = unique(from_vector<int64_t>({3, 1, 3, 3}, {4}), false, true);
  EXPECT_EQ(ui.to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));
  EXPECT_FALSE(ii.defined());
  EXPECT_EQ(ci.to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));
  const auto [u0, i0, c0] = unique(values({4}, {}), true, true);
  EXPECT_EQ(u0.shape(), (Shape{1}));
  EXPECT_EQ(i0.shape(), (Shape{}));
  EXPECT_EQ(c0.to_vector<int64_t>(), (std::vector<int64_t>{1}));
  const auto [ue, ie, ce] = unique(zeros({0}), true, true);
  EXPECT_EQ(ue.numel() + ie.numel() + ce.numel(), 0);
}

// torch.lerp, addcmul, addcdiv, clamp with tensor bounds, isclose and allclose.
TEST(Pointwise, PyTorchValues) {
  const Tensor s = values({1, -2, 3}, {3}), e = values({2, 0, -1, 5, 5, 5}, {2, 3});
  EXPECT_TRUE(all_close(lerp(s, e, 0.25), values({1.25, -1.5, 2, 2, -0.25, 3.5}, {2, 3}), 0, 0));
  EXPECT_TRUE(all_close(lerp(s, e, 0.75), values({1.75, -0.5, 0, 4, 3.25, 4.5}, {2, 3}), 0, 0));
  // bf16 and f16: computed in f32 and rounded once, as PyTorch's (rounding end - start and the
  // product too moves about one element in three by a unit here).
  for (const DType dt : {DType::bf16, DType::f16}) {
    Generator gen(testing::fresh_seed());
    const Tensor a = randn({256}, {}, &gen).to(dt);
    const Tensor b = mul(randn({256}, {}, &gen), 37.0).to(dt);
    const Tensor w = rand({256}, {}, &gen).to(dt);
    for (const double weight : {0.1, 0.3, 0.7, 0.95}) {
      EXPECT_TRUE(all_close(lerp(a, b, weight),
                            lerp(a.to(DType::f32), b.to(DType::f32), weight).to(dt), 0, 0))
          << dt << " weight " << weight;
    }
    EXPECT_TRUE(all_close(lerp(a, b, w),
                          lerp(a.to(DType::f32), b.to(DType::f32), w.to(DType::f32)).to(dt), 0, 0))
        << dt;
  }
  EXPECT_TRUE(all_close(lerp(s, e, values({0, 0.5, 1.5}, {3})),
                        values({1, -1, -3, 1, 1.5, 6}, {2, 3}), 0, 0));
  EXPECT_TRUE(all_close(addcmul(s, e, values({2, 3, 4}, {3}), -0.5),
                        values({-1, -2, 5, -4, -9.5, -7}, {2, 3}), 0, 0));
  EXPECT_TRUE(all_close(addcdiv(s, e, values({2, 4, 8}, {3}), 2),
                        values({3, -2, 2.75, 6, 0.5, 4.25}, {2, 3}), 0, 0));
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor a = values({1, inf, nan, 1e-9, 100, -inf}, {6});
  const Tensor b = values({1.00001, inf, nan, 0, 100.0015, inf}, {6});
  auto bools = [](const Tensor& t) { return t.to(DType::i64).to_vector<int64_t>(); };
  EXPECT_EQ(isclose(a, b).dtype(), DType::b8);
  EXPECT_EQ(bools(isclose(a, b)), (std::vector<int64_t>{1, 1, 0, 1, 0, 0}));
  EXPECT_EQ(bools(isclose(a, b, 1e-5, 1e-8, true)), (std::vector<int64_t>{1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(bools(isclose(a, b, 1e-4, 0)), (std::vector<int64_t>{1, 1, 0, 0, 1, 0}));
  EXPECT_EQ(bools(isclose(from_vector<int64_t>({1, 2, 3}, {3}),
                          from_vector<int64_t>({1, 3, 3}, {3}), 0.5)),
            (std::vector<int64_t>{1, 1, 1}));
  EXPECT_TRUE(allclose(a.narrow(0, 0, 2), b.narrow(0, 0, 2)));
  EXPECT_FALSE(allclose(a, b, 1e-5, 1e-8, true));
}

TEST(Pointwise, ClampTakesTheBoundsGradient) {
  // torch.clamp(x, lo, hi).backward(g): hi wins where lo > hi (elements 2 and 4).
  const Tensor x = values({-3, 0.5, 2, 7, 1}, {5}).requires_grad_(true);
  const Tensor lo = values({-1, 0, 3, 0, 2}, {5}).requires_grad_(true);
  const Tensor hi = values({1, 1, 1, 5, 0}, {5}).requires_grad_(true);
  const Tensor y = clamp(x, lo, hi);
  EXPECT_TRUE(all_close(y, values({-1, 0.5, 1, 5, 0}, {5}), 0, 0));
  sum(mul(y, values({1, 2, 3, 4, 5}, {5}))).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 2, 0, 0, 0}));
  EXPECT_EQ(lo.grad().to_vector<double>(), (std::vector<double>{1, 0, 0, 0, 0}));
  EXPECT_EQ(hi.grad().to_vector<double>(), (std::vector<double>{0, 0, 3, 4, 5}));
  // A lower bound alone, broadcast: its gradient summed back to its shape.
  const Tensor x2 = values({-3, 0.5, 2, 7, 1}, {5}).requires_grad_(true);
  const Tensor lo2 = values({1}, {1}).requires_grad_(true);
  sum(clamp(x2, lo2, Tensor())).backward();
  EXPECT_EQ(x2.grad().to_vector<double>(), (std::vector<double>{0, 0, 1, 1, 1}));
  EXPECT_EQ(lo2.grad().to_vector<double>(), (std::vector<double>{2}));
  // Mixed dtypes promote.
  EXPECT_EQ(clamp(from_vector<int64_t>({1, 5}, {2}), Tensor(), values({2.5}, {1})).dtype(),
            DType::f64);
}

TEST(Pointwise, Errors) {
  const Tensor s = values({1, 2}, {2});
  expect_error([&] { lerp(s, s.to(DType::f32), 0.5); }, {"lerp: start is f64, end f32"});
  expect_error([&] { lerp(s.to(DType::i64), s.to(DType::i64), 0.5); },
               {"lerp: expected floating", "i64"});
  expect_error([&] { lerp(s, s, s.to(DType::f32)); }, {"lerp: weight is f32, start f64"});
  expect_error([&] { addcdiv(s, s.to(DType::i64), s.to(DType::i64)); },
               {"addcdiv: integer division", "i64"});
  expect_error([&] { addcmul(s, Tensor(), s); }, {"addcmul: undefined"});
  expect_error([&] { clamp(s, Tensor(), Tensor()); }, {"clamp: at least one of min and max"});
  expect_error([&] { isclose(s, s.to(DType::f32)); }, {"isclose: a is f64, b f32"});
  expect_error([&] { isclose(s, s, -1.0); }, {"isclose: rtol and atol must be non-negative", "-1"});
  expect_error([&] { allclose(s, s, 1e-5, -0.5); }, {"isclose", "atol -0.5"});
}

// torch.erf, expm1, log1p, atan2 and hypot in f64: the exact forms near 0, atan2's quadrants and
// signed zeros, hypot past the squares' range.
TEST(Pointwise, MathPyTorchValues) {
  const Tensor x = values({-2, -0.5, 0, 1e-10, 0.7, 3}, {6});
  EXPECT_TRUE(all_close(erf(x),
                        values({-0.9953222650189527, -0.5204998778130465, 0.0,
                                1.1283791670955126e-10, 0.6778011938374184, 0.9999779095030014},
                               {6}),
                        0, 1e-15));
  EXPECT_TRUE(all_close(expm1(x),
                        values({-0.8646647167633873, -0.3934693402873666, 0.0, 1.00000000005e-10,
                                1.0137527074704764, 19.085536923187668},
                               {6}),
                        0, 1e-15));
  EXPECT_TRUE(all_close(log1p(values({-0.5, 0, 1e-10, 0.7, 3}, {5})),
                        values({-0.6931471805599453, 0.0, 9.999999999500001e-11, 0.5306282510621704,
                                1.3862943611198906},
                               {5}),
                        0, 1e-15));
  EXPECT_TRUE(
      all_close(atan2(values({0, 0, 1, -1, -0.0, 2}, {6}), values({-1, 1, 0, -1, -1, 3}, {6})),
                values({3.141592653589793, 0.0, 1.5707963267948966, -2.356194490192345,
                        -3.141592653589793, 0.5880026035475675},
                       {6}),
                0, 1e-15));
  EXPECT_TRUE(all_close(hypot(values({3, 1e200, 0, -5}, {4}), values({4, 1e200, 0, 12}, {4})),
                        values({5, 1.414213562373095e+200, 0, 13}, {4}), 0, 1e-15));
  // Integers compute in f32; mixed dtypes promote; operands broadcast.
  EXPECT_EQ(erf(from_vector<int64_t>({1, 0}, {2})).dtype(), DType::f32);
  EXPECT_EQ(atan2(from_vector<int64_t>({1}, {1}), from_vector<int64_t>({1}, {1})).dtype(),
            DType::f32);
  const Tensor h = hypot(values({3}, {1}).to(DType::f32), values({4, 0}, {2, 1}));
  EXPECT_EQ(h.dtype(), DType::f64);
  EXPECT_TRUE(all_close(h, values({5, 3}, {2, 1}), 0, 0));
}

// torch.erfinv in f64 across the range (the tails within 1e-12 of +-1, a tiny argument) with its
// gradient sqrt(pi) / 2 exp(erfinv(x)^2); +-1 give +-inf, beyond them NaN; f32 within an ulp or
// two of the same values.
TEST(Pointwise, ErfinvPyTorchValues) {
  const std::vector<double> y = {-0.999999, -0.9, -0.5, -1e-10, 0, 0.3, 0.7, 0.999, 1 - 1e-12};
  const Tensor want =
      values({-3.458910737275499, -1.1630871536766743, -0.4769362762044699, -8.862269254527581e-11,
              0.0, 0.2724627147267543, 0.7328690779592167, 2.3267537655135246, 5.042031898572696},
             {9});
  const Tensor x = values(y, {9}).requires_grad_(true);
  const Tensor e = erfinv(x);
  EXPECT_TRUE(all_close(e, want, 0, 1e-15));
  sum(e).backward();
  EXPECT_TRUE(all_close(x.grad(),
                        values({139146.31032670863, 3.4280428114518418, 1.1125848189719496,
                                0.8862269254527579, 0.8862269254527579, 0.9545203588405493,
                                1.5163632173337642, 198.93951776442498, 97323218788.39914},
                               {9}),
                        0, 1e-11));
  const Tensor x32 = values(y, {9}).to(DType::f32);
  EXPECT_TRUE(all_close(erfinv(x32), erfinv(x32.to(DType::f64)), 0, 3e-7));
  const Tensor edges = erfinv(values({1, -1, 1.5, -2, std::nan("")}, {5}));
  EXPECT_EQ(edges.to_vector<double>()[0], std::numeric_limits<double>::infinity());
  EXPECT_EQ(edges.to_vector<double>()[1], -std::numeric_limits<double>::infinity());
  for (int i = 2; i < 5; ++i) EXPECT_TRUE(std::isnan(edges.to_vector<double>()[i])) << i;
  const Tensor ints = erfinv(from_vector<int64_t>({0, 1}, {2}));
  EXPECT_EQ(ints.dtype(), DType::f32);
  EXPECT_EQ(ints.to_vector<float>()[1], std::numeric_limits<float>::infinity());
}

// torch.lgamma and torch.digamma in f64 across the reflected range, the poles' neighbourhood, the
// shifted range and the series' (Note [gamma functions]); digamma's gradient, trigamma, to 30-digit
// values (mpmath's psi(1, x): torch.polygamma(1, x) is off by up to 1e-9 there); the poles as
// PyTorch gives them; f32 close to the f64 values.
TEST(Pointwise, LgammaDigammaPyTorchValues) {
  const std::vector<double> v = {-7.3, -2.5, -0.5, 1e-8, 0.25, 1.0, 1.5, 2.0, 9.99, 37.2, 1e6};
  const Shape n{11};
  const Tensor x = values(v, n).requires_grad_(true);
  const Tensor lg = lgamma(x), dg = digamma(x);
  EXPECT_TRUE(all_close(lg,
                        values({-7.779101629826852, -0.05624371649767405, 1.2655121234846454,
                                18.42068073818021, 1.2880225246980774, 0.0, -0.12078223763524522,
                                0.0, 12.779315214350193, 96.4397101615684, 12815504.569147611},
                               n),
                        1e-13, 1e-13));
  EXPECT_TRUE(all_close(
      dg,
      values({4.33730730551005, 1.1031566406452433, 0.03648997397857639, -100000000.57721564,
              -4.2274535333762655, -0.5772156649015328, 0.036489973978576194, 0.422784335098467,
              2.2507003728312007, 3.6028076865063574, 13.81551005796419},
             n),
      1e-13, 1e-13));
  sum(dg).backward();
  EXPECT_TRUE(all_close(
      x.grad(),
      values({14.951383181433922, 9.539246644989124, 8.934802200544679, 1.0000000000000002e+16,
              17.19732915450711, 1.6449340668482264, 0.9348022005446793, 0.6449340668482264,
              0.10527695014824179, 0.027246270984764925, 1.0000005000001667e-06},
             n),
      1e-13, 1e-13));
  const Tensor x32 = values(v, n).to(DType::f32);
  EXPECT_TRUE(all_close(lgamma(x32).to(DType::f64), lgamma(x32.to(DType::f64)), 2e-5, 2e-6));
  EXPECT_TRUE(all_close(digamma(x32).to(DType::f64), digamma(x32.to(DType::f64)), 2e-5, 2e-6));
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor poles = values({0, -1, -2, inf, -inf, -0.0}, {6});
  const std::vector<double> l = lgamma(poles).to_vector<double>();
  const std::vector<double> d = digamma(poles).to_vector<double>();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(l[i], inf) << i;
  EXPECT_EQ(d[0], -inf);
  EXPECT_TRUE(std::isnan(d[1]) && std::isnan(d[2]) && std::isnan(d[4]));
  EXPECT_EQ(d[3], inf);
  EXPECT_EQ(d[5], inf);
  EXPECT_EQ(lgamma(from_vector<int64_t>({3}, {1})).dtype(), DType::f32);
}

TEST(Pointwise, MathErrors) {
  const Tensor s = values({1, 2}, {2});
  expect_error([] { erf(Tensor()); }, {"erf: undefined"});
  expect_error([] { erfinv(Tensor()); }, {"erfinv: undefined"});
  expect_error([] { expm1(Tensor()); }, {"expm1: undefined"});
  expect_error([] { log1p(Tensor()); }, {"log1p: undefined"});
  expect_error([&] { atan2(s, Tensor()); }, {"atan2: undefined"});
  expect_error(
      [&] {
        hypot(s, values({1, 2, 3}, {3}));
      },
      {"hypot: shapes [2] and [3] cannot be broadcast"});
}

}  // namespace
}  // namespace sinter

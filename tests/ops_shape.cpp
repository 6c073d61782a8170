// Op-table rows of the shape ops (see op_table.h): views, copies, cat, stack, split, chunk, unbind,
// pad, unfold and fold, and the rearranged tensors (flip, roll, diagonal, diag, kron, meshgrid,
// repeat_interleave, nonzero, one_hot); unfold's and fold's known values and errors.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> shape_rows() {
  return {
      // Shape ops and copies.
      {.name = "Reshape",
       .shapes = {S{2, 6}},
       .fn =
           [](const Inputs& x) {
             return x[0].reshape({3, -1}) * 2.0;
           }},
      {.name = "TransposeContiguous",
       .shapes = {S{2, 3, 4}},
       .fn = [](const Inputs& x) { return x[0].transpose(0, 2).contiguous(); }},
      {.name = "Permute",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return x[0].permute({1, 2, 0}) * 1.0;
           }},
      {.name = "NarrowSelect",
       .shapes = {S{4, 5}},
       .fn = [](const Inputs& x) { return x[0].narrow(1, 1, 3).select(0, 2) * 1.0; }},
      {.name = "SliceStep",
       .shapes = {S{7, 3}},
       .fn = [](const Inputs& x) { return x[0].slice(0, 1, std::nullopt, 2) * 1.0; }},
      {.name = "ExpandSqueeze",
       .shapes = {S{3, 1}},
       .fn =
           [](const Inputs& x) {
             return x[0].expand({2, 3, 4}).unsqueeze(0).squeeze(0) * 1.0;
           }},
      {.name = "Cat",
       .shapes = {S{2, 3}, S{4, 3}},
       .fn =
           [](const Inputs& x) {
             return cat({x[0], x[1]}, 0);
           }},
      {.name = "Stack",
       .shapes = {S{2, 3}, S{2, 3}},
       .fn =
           [](const Inputs& x) {
             return stack({x[0], x[1]}, 1);
           }},
      {.name = "Split",
       .shapes = {S{5, 4}},
       .fn =
           [](const Inputs& x) {
             std::vector<Tensor> p = split(x[0], 2, 0);
             return cat({p[2] * 3.0, p[0], p[1] * 2.0}, 0);
           }},
      {.name = "Chunk",
       .shapes = {S{3, 6}},
       .fn =
           [](const Inputs& x) {
             std::vector<Tensor> p = chunk(x[0], 3, 1);
             return p[0] * p[1] - p[2];
           }},
      // unbind, and a split with a piece left out: the one node's gradient has zeros there.
      {.name = "Unbind",
       .shapes = {S{3, 4, 2}},
       .fn =
           [](const Inputs& x) {
             std::vector<Tensor> p = unbind(x[0], 1);
             return p[0] * p[3] - p[1] * 2.0;
           }},
      {.name = "SplitPieceUnused",
       .shapes = {S{2, 7}},
       .fn =
           [](const Inputs& x) {
             std::vector<Tensor> p = split(x[0], std::vector<int64_t>{3, 2, 2}, -1);
             return p[2] * p[1];
           }},
      // pad: every mode, on the last dims of a batch of images and of a 1-D signal.
      {.name = "PadReflect",
       .shapes = {S{2, 2, 4, 5}},
       .fn =
           [](const Inputs& x) {
             return pad(x[0], {2, 1, 3, 1}, PadMode::Reflect);
           }},
      {.name = "PadReplicate",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return pad(x[0], {3, 2}, PadMode::Replicate);
           }},
      {.name = "PadCircular3d",
       .shapes = {S{1, 2, 3, 2, 3}},
       .fn =
           [](const Inputs& x) {
             return pad(x[0], {1, 3, 2, 0, 1, 1}, PadMode::Circular);
           }},
      {.name = "PadConstantCrop",
       .shapes = {S{3, 4, 5}},
       .fn =
           [](const Inputs& x) {
             return pad(x[0], {-1, 2, 1, -2}, PadMode::Constant, 0.5);
           }},
      // unfold and fold: overlapping, dilated, padded and strided blocks, batched and not.
      {.name = "Unfold",
       .shapes = {S{2, 2, 5, 6}},
       .fn =
           [](const Inputs& x) {
             return unfold(x[0], {2, 3}, {.dilation = {1, 2}, .padding = {1, 0}, .stride = {2, 1}});
           }},
      {.name = "UnfoldUnbatched",
       .shapes = {S{3, 4, 4}},
       .fn = [](const Inputs& x) { return unfold(x[0], 2, {.padding = 1, .stride = 3}); }},
      {.name = "Fold",
       .shapes = {S{2, 8, 8}},
       .fn =
           [](const Inputs& x) {
             return fold(x[0], {4, 5}, 2,
                         {.dilation = {2, 1}, .padding = {1, 0}, .stride = {2, 1}});
           }},
      {.name = "FoldUnbatched",
       .shapes = {S{4, 9}},
       .fn =
           [](const Inputs& x) {
             return fold(x[0], {5, 5}, 2, {.padding = 1, .stride = 2});
           }},
      // Rearranged tensors (src/ops/rearrange.cpp).
      {.name = "Flip",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return flip(x[0], {0, -1});
           }},
      {.name = "Roll",
       .shapes = {S{3, 4}},
       .fn =
           [](const Inputs& x) {
             return roll(x[0], {-1, 6}, {0, 1});
           }},
      {.name = "RollFlattened",
       .shapes = {S{2, 3}},
       .fn = [](const Inputs& x) { return roll(x[0], {4}); }},
      {.name = "Diagonal",
       .shapes = {S{2, 3, 4}},
       .fn = [](const Inputs& x) { return diagonal(x[0], 1, 2, 1) * 1.0; }},
      {.name = "DiagEmbed", .shapes = {S{3}}, .fn = [](const Inputs& x) { return diag(x[0], -1); }},
      {.name = "DiagOfMatrix",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return diag(x[0], 1); }},
      {.name = "Kron",
       .shapes = {S{2, 3}, S{2, 1, 2}},
       .fn = [](const Inputs& x) { return kron(x[0], x[1]); }},
      {.name = "Meshgrid",
       .shapes = {S{2}, S{3}, S{}},
       .fn =
           [](const Inputs& x) {
             const std::vector<Tensor> g = meshgrid({x[0], x[1], x[2]}, "xy");
             return g[0] * g[1] + g[2];
           }},
      {.name = "RepeatInterleave",
       .shapes = {S{2, 3}},
       .fn =
           [](const Inputs& x) {
             return repeat_interleave(x[0], index_of({2, 0, 3}, {3}, x[0]), 1);
           }},
      {.name = "RepeatInterleaveFlat",
       .shapes = {S{2, 3}},
       .fn = [](const Inputs& x) { return repeat_interleave(x[0], 2); }},
      {.name = "Nonzero",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return nonzero(gt(x[0], 0.0)); },
       .grad = false},
      {.name = "OneHot",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return one_hot(argmax(x[0], 1), 5); },
       .grad = false},
  };
}

namespace {

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_vector<double>(v, shape);
}

// torch.nn.functional.unfold and fold of ramp(...), torch 2.15.
TEST(Unfold, MatchesPyTorch) {
  EXPECT_TRUE(all_close(
      unfold(ramp({1, 1, 5, 6}), {2, 3}, {.dilation = {1, 2}, .padding = {1, 0}, .stride = {2, 1}}),
      f64({0.0,
           0.0,
           -0.5715757724135877,
           -0.6324526126243326,
           0.9336230472211368,
           1.6195697621966012,
           0.0,
           0.0,
           -0.2312666378723216,
           0.46681390048434973,
           1.9906073556948702,
           1.8957468311429344,
           0.0,
           0.0,
           1.156986598718789,
           1.5381682338770002,
           1.4031183567457042,
           0.7679285828159943,
           0.0,
           0.6942176872376911,
           1.4545989080882815,
           0.9690983623493521,
           0.31243296641849727,
           0.2743739945318424,
           1.0854497299884602,
           1.013209366648874,
           0.3335208707480733,
           -0.12969575997167004,
           0.6951671775937159,
           1.4004226878068113,
           0.5349881501559051,
           -0.10078322768961984,
           -0.17917772915131736,
           0.23186288776296538,
           2.081963620068133,
           2.442766405835907},
          {1, 6, 6}),
      0, 0));
  EXPECT_TRUE(all_close(unfold(ramp({2, 3, 3}), 2),
                        f64({0.0,
                             0.6942176872376911,
                             1.013209366648874,
                             0.5349881501559051,
                             0.6942176872376911,
                             1.0854497299884602,
                             0.5349881501559051,
                             -0.10078322768961984,
                             1.013209366648874,
                             0.5349881501559051,
                             -0.5715757724135877,
                             -0.6324526126243326,
                             0.5349881501559051,
                             -0.10078322768961984,
                             -0.6324526126243326,
                             -0.2312666378723216,
                             0.46681390048434973,
                             1.156986598718789,
                             1.4545989080882815,
                             0.9690983623493521,
                             1.156986598718789,
                             1.5381682338770002,
                             0.9690983623493521,
                             0.3335208707480733,
                             1.4545989080882815,
                             0.9690983623493521,
                             -0.12969575997167004,
                             -0.17917772915131736,
                             0.9690983623493521,
                             0.3335208707480733,
                             -0.17917772915131736,
                             0.23186288776296538},
                            {8, 4}),
                        0, 0));
}

TEST(Fold, MatchesPyTorch) {
  EXPECT_TRUE(all_close(
      fold(ramp({1, 4, 8}), {4, 5}, 2, {.dilation = {2, 1}, .padding = {1, 0}, .stride = {2, 1}}),
      f64({0.0,
           0.0,
           0.0,
           0.0,
           0.0,
           0.3558104210045877,
           1.8981115345801243,
           1.6055196316887437,
           2.015805197914058,
           1.2707269278351414,
           0.0,
           0.0,
           0.0,
           0.0,
           0.0,
           1.9906073556948702,
           3.9777104512110673,
           3.845884762581611,
           3.1045842213520505,
           1.8370526513277285},
          {1, 1, 4, 5}),
      1e-15, 1e-15));
  EXPECT_TRUE(all_close(
      fold(ramp({4, 4}), {3, 3}, 2),
      f64({0.0, 1.2292058373935961, -0.10078322768961984, 0.8541830921161386, 2.3630464028079174,
           0.3366457497250195, 1.156986598718789, 1.8716891046250734, -0.12969575997167004},
          {1, 3, 3}),
      1e-15, 1e-15));
}

// fold is unfold's adjoint, <unfold(x), y> = <x, fold(y)>, and each op's gradient is the other.
TEST(Fold, IsUnfoldsAdjointAndGradient) {
  const FoldOptions o{.dilation = {1, 2}, .padding = {2, 1}, .stride = {3, 2}};
  Tensor x = randn({2, 3, 7, 8}, {.dtype = DType::f64}).requires_grad_();
  const Tensor cols = unfold(x, {3, 2}, o);
  Tensor y = randn(cols.shape(), {.dtype = DType::f64}).requires_grad_();
  EXPECT_NEAR(sum(cols * y).item<double>(), sum(x * fold(y, {7, 8}, {3, 2}, o)).item<double>(),
              1e-10);
  sum(cols * y).backward();
  EXPECT_TRUE(all_close(x.grad(), fold(y.detach(), {7, 8}, {3, 2}, o), 1e-12, 1e-12));
  Tensor z = y.detach().requires_grad_();
  sum(fold(z, {7, 8}, {3, 2}, o) * x.detach()).backward();
  EXPECT_TRUE(all_close(z.grad(), unfold(x.detach(), {3, 2}, o), 1e-12, 1e-12));
}

// Half types keep their dtype; fold sums overlaps in f32 and rounds once.
TEST(Fold, KeepsTheDtype) {
  const Tensor x = ramp({1, 8, 9}, DType::bf16);
  const Tensor y = fold(x, {4, 4}, 2, {.padding = 0, .stride = 1});
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_TRUE(all_close(y.to(DType::f64), fold(x.to(DType::f64), {4, 4}, 2), 1e-2, 1e-2));
  EXPECT_EQ(unfold(ramp({1, 1, 3, 3}, DType::f16), 2).dtype(), DType::f16);
}

TEST(FoldErrors, NameTheOpAndTheValues) {
  expect_error([] { unfold(zeros({2, 3}), 2); }, {"unfold", "3-D (C, H, W) or 4-D", "[2, 3]"});
  expect_error([] { unfold(zeros({1, 1, 4, 4}).to(DType::i64), 2); }, {"unfold", "i64"});
  expect_error(
      [] {
        unfold(zeros({1, 1, 4, 4}), {0, 2});
      },
      {"unfold", "kernel_size must be positive", "(0, 2)"});
  expect_error(
      [] {
        unfold(zeros({1, 1, 4, 4}), 2, {.dilation = {1, 0}});
      },
      {"unfold", "dilation must be positive", "(1, 0)"});
  expect_error(
      [] {
        unfold(zeros({1, 1, 4, 4}), 2, {.padding = -1});
      },
      {"unfold", "padding must be non-negative", "(-1, -1)"});
  expect_error(
      [] {
        unfold(zeros({1, 1, 4, 4}), 2, {.stride = 0});
      },
      {"unfold", "stride must be positive", "(0, 0)"});
  expect_error(
      [] {
        unfold(zeros({1, 1, 2, 2}), 3);
      },
      {"unfold", "spatial size (2, 2)", "kernel_size (3, 3)", "0x0 blocks"});
  expect_error(
      [] {
        fold(zeros({1, 2, 3, 4}), {3, 3}, 2);
      },
      {"fold", "2-D (C kH kW, L) or 3-D", "[1, 2, 3, 4]"});
  expect_error([] { fold(zeros({1, 4, 4}).to(DType::i32), {3, 3}, 2); }, {"fold", "i32"});
  expect_error(
      [] {
        fold(zeros({1, 4, 4}), {0, 3}, 2);
      },
      {"fold", "output_size must be positive", "(0, 3)"});
  expect_error(
      [] {
        fold(zeros({1, 5, 4}), {3, 3}, 2);
      },
      {"fold", "(5)", "divisible", "(2, 2) = 4"});
  expect_error(
      [] {
        fold(zeros({1, 4, 5}), {3, 3}, 2);
      },
      {"fold", "last dim 5", "output_size (3, 3)", "2 * 2 = 4"});
  expect_error([] { fold(zeros({1, 4, 1}), {1, 1}, 2); }, {"fold", "0x0 blocks"});
}

}  // namespace

}  // namespace sinter::testing

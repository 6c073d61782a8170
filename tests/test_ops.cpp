// The op table: one row per op drives an fp64 central-difference gradcheck on the CPU and a
// CPU-vs-CUDA parity check (forward and backward, f32 and bf16, fresh random inputs, outputs
// poisoned first).
//
// Adding an op, elementwise or with kernels of its own: CONTRIBUTING.md lists the files. Its row
// here (or in tests/ops_<family>.cpp) names it in CamelCase and gives the input shapes, the
// function of the inputs and, if the op needs one, the input domain; both checks pick the row up.
// Known values (KnownValues below) pin a function whose gradcheck alone would not catch a wrong
// formula.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>

#include "op_table.h"

namespace sinter {
namespace {

using testing::Domain;
using testing::Inputs;
using testing::OpRow;

Tensor make_input(const Shape& shape, Domain domain, Generator& gen) {
  const TensorOptions f64{.dtype = DType::f64};
  switch (domain) {
    case Domain::Any:
      return randn(shape, f64, &gen);
    case Domain::Positive:
      return add(mul(rand(shape, f64, &gen), 1.5), 0.5);
    case Domain::NonZero: {
      Tensor mag = add(rand(shape, f64, &gen), 0.3);
      Tensor s = sign(sub(rand(shape, f64, &gen), 0.5));
      return mul(mag, where(eq(s, 0.0), ones_like(s), s));
    }
    case Domain::Unit:
      return mul(sub(rand(shape, f64, &gen), 0.5), 1.8);
  }
  return {};
}

// f64 inputs on the CPU, fresh for `seed`.
Inputs make_inputs(const OpRow& row, uint64_t seed) {
  Generator gen(seed);
  Inputs in;
  for (const Shape& s : row.shapes) in.push_back(make_input(s, row.domain, gen));
  return in;
}

Tensor first(const std::tuple<Tensor, Tensor>& t) { return std::get<0>(t); }
Tensor second(const std::tuple<Tensor, Tensor>& t) { return std::get<1>(t); }

// An i64 index tensor of `shape` on `like`'s device.
Tensor index_of(const std::vector<int64_t>& values, const Shape& shape, const Tensor& like) {
  return from_vector<int64_t>(values, shape).to(like.device());
}

std::vector<OpRow> core_rows() {
  using S = Shape;
  std::vector<OpRow> rows = {
      // Arithmetic, with and without broadcasting.
      {.name = "Add",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return add(x[0], x[1]); }},
      {.name = "AddBroadcast",
       .shapes = {S{2, 3, 4}, S{3, 1}},
       .fn = [](const Inputs& x) { return x[0] + x[1]; }},
      {.name = "AddAlpha",
       .shapes = {S{4, 1}, S{1, 5}},
       .fn = [](const Inputs& x) { return add(x[0], x[1], -2.5); }},
      {.name = "AddScalar", .shapes = {S{5}}, .fn = [](const Inputs& x) { return x[0] + 1.5; }},
      {.name = "Sub", .shapes = {S{3, 4}, S{4}}, .fn = [](const Inputs& x) { return x[0] - x[1]; }},
      {.name = "SubScalarLeft",
       .shapes = {S{2, 3}},
       .fn = [](const Inputs& x) { return 2.0 - x[0]; }},
      {.name = "Mul",
       .shapes = {S{2, 3, 4}, S{2, 1, 4}},
       .fn = [](const Inputs& x) { return x[0] * x[1]; }},
      {.name = "MulScalar", .shapes = {S{6}}, .fn = [](const Inputs& x) { return x[0] * -3.0; }},
      {.name = "Div",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return x[0] / x[1]; },
       .domain = Domain::NonZero},
      {.name = "DivBroadcast",
       .shapes = {S{2, 3}, S{3}},
       .fn = [](const Inputs& x) { return x[0] / x[1]; },
       .domain = Domain::NonZero},
      {.name = "DivScalarLeft",
       .shapes = {S{5}},
       .fn = [](const Inputs& x) { return 2.0 / x[0]; },
       .domain = Domain::NonZero},
      {.name = "DivTrunc",
       .shapes = {S{3, 4}, S{4}},
       .fn = [](const Inputs& x) { return div(x[0] * 4.0, x[1], "trunc"); },
       .domain = Domain::NonZero,
       .grad = false},
      {.name = "FloorDivide",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return floor_divide(x[0] * 4.0, x[1]); },
       .domain = Domain::NonZero,
       .grad = false},
      {.name = "Remainder",
       .shapes = {S{3, 4}, S{4}},
       .fn = [](const Inputs& x) { return remainder(x[0] * 4.0, x[1]); },
       .domain = Domain::NonZero},
      {.name = "RemainderScalar",
       .shapes = {S{7}},
       .fn = [](const Inputs& x) { return x[0] % -0.7; },
       .domain = Domain::NonZero},
      {.name = "RemainderScalarLeft",
       .shapes = {S{7}},
       .fn = [](const Inputs& x) { return remainder(2.5, x[0]); },
       .domain = Domain::NonZero},
      {.name = "Neg", .shapes = {S{2, 5}}, .fn = [](const Inputs& x) { return -x[0]; }},
      {.name = "Pow",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return pow(x[0], x[1]); },
       .domain = Domain::Positive},
      {.name = "PowScalar",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return pow(x[0], 3.0); }},
      {.name = "PowFractional",
       .shapes = {S{7}},
       .fn = [](const Inputs& x) { return pow(x[0], 0.5); },
       .domain = Domain::Positive},
      {.name = "PowScalarBase",
       .shapes = {S{7}},
       .fn = [](const Inputs& x) { return pow(2.0, x[0]); }},
      {.name = "Maximum",
       .shapes = {S{3, 4}, S{4}},
       .fn = [](const Inputs& x) { return maximum(x[0], x[1]); }},
      {.name = "Minimum",
       .shapes = {S{3, 4}, S{3, 1}},
       .fn = [](const Inputs& x) { return minimum(x[0], x[1]); }},
      {.name = "Clamp",
       .shapes = {S{4, 5}},
       .fn = [](const Inputs& x) { return clamp(x[0], -0.5, 0.5); }},
      {.name = "ClampMin",
       .shapes = {S{4, 5}},
       .fn = [](const Inputs& x) { return clamp(x[0], 0.1); }},  // max left out
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
      // Gather and scatter_add: repeated indices (their gradients accumulate), an index smaller
      // than
      // the tensor in the other dims, a strided tensor, src larger than the index.
      {.name = "GatherRepeats",
       .shapes = {S{3, 4}},
       .fn =
           [](const Inputs& x) {
             return gather(x[0], 1, index_of({0, 0, 3, 1, 2, 2}, {3, 2}, x[0]));
           }},
      {.name = "GatherDim0Smaller",
       .shapes = {S{4, 3}},
       .fn =
           [](const Inputs& x) {
             return gather(x[0], 0, index_of({3, 0, 3, 3}, {2, 2}, x[0]));
           }},
      {.name = "GatherStrided3d",
       .shapes = {S{3, 5, 2}},
       .fn =
           [](const Inputs& x) {
             const Tensor idx =
                 index_of({4, 0, 1, 1, 4, 2, 3, 3, 0, 2, 2, 2, 0, 1, 4, 4, 3, 0, 1, 1, 1, 0, 0, 4},
                          {2, 4, 3}, x[0]);
             return gather(x[0].transpose(0, 2), -2, idx);
           }},
      {.name = "ScatterAdd",
       .shapes = {S{3, 4}, S{2, 5}},
       .fn =
           [](const Inputs& x) {
             return scatter_add(x[0], 1, index_of({3, 0, 3, 1, 1, 1}, {2, 3}, x[0]), x[1]);
           }},
      {.name = "ScatterAddDim0",
       .shapes = {S{4, 3}, S{3, 3}},
       .fn =
           [](const Inputs& x) {
             return scatter_add(x[0], 0, index_of({0, 3, 3, 0, 1, 3, 2, 1, 3}, {3, 3}, x[0]), x[1]);
           }},
      // topk's values: largest and smallest, k = 1 and k = n, dim not last, and a k past the CUDA
      // kernel's rounds (its sort path); the indices compared exactly across devices.
      {.name = "TopkLargest",
       .shapes = {S{3, 6}},
       .fn = [](const Inputs& x) { return first(topk(x[0], 3)); }},
      {.name = "TopkSmallestDim0",
       .shapes = {S{5, 4}},
       .fn = [](const Inputs& x) { return first(topk(x[0], 2, 0, false)); }},
      {.name = "TopkOne",
       .shapes = {S{4, 7}},
       .fn = [](const Inputs& x) { return first(topk(x[0], 1)); }},
      {.name = "TopkAllDim1",
       .shapes = {S{2, 5, 3}},
       .fn = [](const Inputs& x) { return first(topk(x[0], 5, 1)); }},
      {.name = "TopkSorted",
       .shapes = {S{2, 30}},
       .fn = [](const Inputs& x) { return first(topk(x[0], 20, 1, false)); }},
      {.name = "TopkIndices",
       .shapes = {S{3, 40}},
       .fn =
           [](const Inputs& x) {
             return cat({second(topk(x[0], 4)), second(topk(x[0].t(), 25, 0, false)).t()}, 1);
           },
       .grad = false},
      {.name = "Where",
       .shapes = {S{3, 4}, S{3, 4}, S{4}},
       .fn = [](const Inputs& x) { return where(gt(x[0], 0.0), x[1], x[2]); }},
      {.name = "WhereScalar",
       .shapes = {S{6}, S{6}},
       .fn = [](const Inputs& x) { return where(lt(x[0], x[1]), x[1], 0.25); }},
      {.name = "MaskedFill",
       .shapes = {S{3, 4}, S{4}},
       .fn = [](const Inputs& x) { return masked_fill(x[0], gt(x[1], 0.0), -1.5); }},
      {.name = "MaskedFillBatch",
       .shapes = {S{2, 3, 4}, S{3, 1}},
       .fn = [](const Inputs& x) { return masked_fill(x[0], lt(x[1], 0.0), 0.0); }},
      {.name = "Tril", .shapes = {S{4, 5}}, .fn = [](const Inputs& x) { return tril(x[0]); }},
      {.name = "TrilBatchDiagonal",
       .shapes = {S{2, 3, 5}},
       .fn = [](const Inputs& x) { return tril(x[0], 1); }},
      {.name = "Triu", .shapes = {S{5, 4}}, .fn = [](const Inputs& x) { return triu(x[0], -1); }},
      {.name = "TriuTransposed",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return triu(x[0].t()); }},
      // Comparisons: bool results, compared exactly.
      {.name = "Eq",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return eq(x[0], x[0].detach() * 1.0); },
       .grad = false},
      {.name = "Ne",
       .shapes = {S{3, 4}, S{4}},
       .fn = [](const Inputs& x) { return ne(x[0], x[1]); },
       .grad = false},
      {.name = "Lt",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return lt(x[0], x[1]); },
       .grad = false},
      {.name = "Le",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return le(x[0], 0.2); },
       .grad = false},
      {.name = "Gt",
       .shapes = {S{2, 3}, S{3}},
       .fn = [](const Inputs& x) { return gt(x[0], x[1]); },
       .grad = false},
      {.name = "Ge",
       .shapes = {S{5}},
       .fn = [](const Inputs& x) { return ge(x[0], -0.1); },
       .grad = false},
      // Unary math and activations.
      {.name = "Exp", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return exp(x[0]); }},
      {.name = "Log",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return log(x[0]); },
       .domain = Domain::Positive},
      {.name = "Sqrt",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return sqrt(x[0]); },
       .domain = Domain::Positive},
      {.name = "Rsqrt",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return rsqrt(x[0]); },
       .domain = Domain::Positive},
      {.name = "Abs",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return abs(x[0]); },
       .domain = Domain::NonZero},
      {.name = "Sin", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return sin(x[0]); }},
      {.name = "Cos", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return cos(x[0]); }},
      {.name = "Tanh", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return tanh(x[0]); }},
      {.name = "Sigmoid", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return sigmoid(x[0]); }},
      {.name = "Relu",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return relu(x[0]); },
       .domain = Domain::NonZero},
      {.name = "LeakyRelu",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return leaky_relu(x[0], 0.2); },
       .domain = Domain::NonZero},
      {.name = "Gelu", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return gelu(x[0]); }},
      {.name = "GeluTanh",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return gelu(x[0], Activation::GeluTanh); }},
      {.name = "Silu", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return silu(x[0]); }},
      {.name = "Hardtanh",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return hardtanh(x[0]); }},
      {.name = "HardtanhBounds",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return hardtanh(x[0], -0.5, 0.25); }},
      {.name = "Softplus",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return softplus(x[0]); }},
      {.name = "SoftplusThreshold",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return softplus(x[0], 2.0, 1.0); }},
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
      {.name = "IndexSelect",
       .shapes = {S{5, 3}},
       .fn =
           [](const Inputs& x) {
             Tensor idx = from_vector<int64_t>({4, 0, 4, 2}, {4}).to(x[0].device());
             return index_select(x[0], 0, idx);
           }},
      {.name = "IndexSelectInner",
       .shapes = {S{2, 5, 3}},
       .fn =
           [](const Inputs& x) {
             Tensor idx = from_vector<int64_t>({1, 1, 3}, {3}).to(x[0].device());
             return index_select(x[0], 1, idx);
           }},
      // Linear, so a large step is exact up to the f32 rounding it measures through.
      {.name = "ToDtypeRoundTrip",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return x[0].to(DType::f32).to(x[0].dtype()) * 1.0; },
       .fd_eps = 1e-2},
      // In-place ops (what optimizers use): not recorded by autograd, so forward parity only.
      {.name = "AddInPlace",
       .shapes = {S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             Tensor r = x[0].detach().clone();
             NoGradGuard ng;
             r.add_(x[1].detach(), -0.5);
             return r.add_(2.0);
           },
       .grad = false},
      {.name = "MulInPlace",
       .shapes = {S{3, 4}, S{3, 1}},
       .fn =
           [](const Inputs& x) {
             Tensor r = x[0].detach().clone();
             NoGradGuard ng;
             r.mul_(x[1].detach());
             return r.mul_(3.0);
           },
       .grad = false},
      {.name = "FillZeroCopyInPlace",
       .shapes = {S{4, 3}},
       .fn =
           [](const Inputs& x) {
             Tensor r = empty({3, 4}, {.dtype = x[0].dtype(), .device = x[0].device()});
             NoGradGuard ng;
             r.fill_(7.0);
             r.narrow(1, 0, 2).zero_();
             r.narrow(0, 1, 2).copy_(x[0].detach().t().narrow(0, 0, 2));
             return r;
           },
       .grad = false},
  };
  return rows;
}

std::vector<OpRow> op_table() {
  std::vector<OpRow> rows = core_rows();
  for (auto family :
       {testing::conv_pool_rows, testing::norm_rows, testing::loss_rows, testing::attention_rows}) {
    std::vector<OpRow> more = family();
    rows.insert(rows.end(), more.begin(), more.end());
  }
  return rows;
}

std::vector<OpRow> differentiable_rows() {
  std::vector<OpRow> rows;
  for (const OpRow& r : op_table()) {
    if (r.grad) rows.push_back(r);
  }
  return rows;
}

std::string row_name(const ::testing::TestParamInfo<OpRow>& info) { return info.param.name; }

// sum(out * w) for fixed random weights w: a scalar whose gradient reaches every output element.
Tensor weighted(const Tensor& out, const Tensor& w) { return sum(mul(out, w)); }

class GradCheck : public ::testing::TestWithParam<OpRow> {};

TEST_P(GradCheck, MatchesFiniteDifferences) {
  const OpRow& row = GetParam();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Inputs in = make_inputs(row, seed);
  for (Tensor& t : in) t.requires_grad_(true);
  Tensor out = row.fn(in);
  ASSERT_TRUE(is_floating(out.dtype()));
  Generator wgen(seed ^ 0x5bd1e995u);
  Tensor w = randn(out.shape(), {.dtype = DType::f64}, &wgen);
  weighted(out, w).backward();

  const double eps = row.fd_eps;
  NoGradGuard ng;
  for (size_t k = 0; k < in.size(); ++k) {
    Tensor analytic = in[k].grad().defined() ? in[k].grad() : zeros_like(in[k]);
    auto* x = static_cast<double*>(in[k].data_ptr());
    std::vector<double> a = analytic.to_vector<double>();
    for (int64_t j = 0; j < in[k].numel(); ++j) {
      const double orig = x[j];
      x[j] = orig + eps;
      const double lp = weighted(row.fn(in), w).item<double>();
      x[j] = orig - eps;
      const double lm = weighted(row.fn(in), w).item<double>();
      x[j] = orig;
      const double numeric = (lp - lm) / (2 * eps);
      EXPECT_NEAR(a[j], numeric, 1e-5 + 1e-3 * std::abs(numeric))
          << row.name << ": input " << k << ", element " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, GradCheck, ::testing::ValuesIn(differentiable_rows()), row_name);

class CudaParity : public ::testing::TestWithParam<OpRow> {};

void check_parity(const OpRow& row, DType dtype, double tol) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(row.name + " " + dtype_name(dtype) + ", seed " + std::to_string(seed));
  Inputs base = make_inputs(row, seed);
  Inputs cpu_in, gpu_in;
  for (const Tensor& b : base) {
    Tensor c = b.to(dtype);
    cpu_in.push_back(c.clone().requires_grad_(row.grad));
    gpu_in.push_back(c.to(Device::cuda()).requires_grad_(row.grad));
  }
  testing::poison_cuda_cache();
  Tensor out_c = row.fn(cpu_in);
  Tensor out_g = row.fn(gpu_in);
  ASSERT_EQ(out_g.device(), Device::cuda());
  const double t = is_floating(out_c.dtype()) ? tol : 0.0;
  EXPECT_TRUE(testing::all_close(out_g.cpu(), out_c, t, t)) << "forward";
  if (!row.grad) return;
  Generator wgen(seed ^ 0x5bd1e995u);
  Tensor w = randn(out_c.shape(), {.dtype = DType::f64}, &wgen).to(dtype);
  testing::poison_cuda_cache();
  weighted(out_c, w).backward();
  weighted(out_g, w.to(Device::cuda())).backward();
  for (size_t k = 0; k < cpu_in.size(); ++k) {
    ASSERT_EQ(cpu_in[k].grad().defined(), gpu_in[k].grad().defined()) << "input " << k;
    if (!cpu_in[k].grad().defined()) continue;
    EXPECT_TRUE(testing::all_close(gpu_in[k].grad().cpu(), cpu_in[k].grad(), tol, tol))
        << "gradient of input " << k;
  }
}

TEST_P(CudaParity, MatchesCpu) {
  SINTER_REQUIRE_CUDA();
  const OpRow& row = GetParam();
  check_parity(row, DType::f32, row.tol);
  if (row.bf16) check_parity(row, DType::bf16, row.bf16_tol);
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaParity, ::testing::ValuesIn(op_table()), row_name);

// Values of PyTorch's functions (torch.nn.functional), for ops where a wrong function consistent
// with its own gradient would pass the gradcheck.
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

TEST(Masking, TrianglesAndMaskedFillKeepWhatTheySay) {
  EXPECT_EQ(tril(ones({3, 3})).to_vector<double>(),
            (std::vector<double>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(triu(ones({2, 3}), 1).to_vector<double>(), (std::vector<double>{0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(tril(ones({2, 3}), -1).to_vector<double>(), (std::vector<double>{0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(triu(ones({2, 2, 2})).to_vector<double>(),
            (std::vector<double>{1, 1, 0, 1, 1, 1, 0, 1}));
  const Tensor ints = from_vector<int64_t>({1, 2, 3, 4}, {2, 2}).to(DType::i32);
  const Tensor lower = tril(ints);
  EXPECT_EQ(lower.dtype(), DType::i32);
  EXPECT_EQ(lower.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ(tril(zeros({0, 4})).shape(), (Shape{0, 4}));

  // The causal mask of attention: -inf above the diagonal.
  const Tensor causal = triu(ones({3, 3}), 1).to(DType::b8);
  const Tensor scores = masked_fill(zeros({3, 3}), causal, -INFINITY);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(scores.to_vector<double>(), (std::vector<double>{0, -inf, -inf, 0, 0, -inf, 0, 0, 0}));
  const Tensor row = from_vector<double>({1, 0}, {2}).to(DType::b8);
  EXPECT_EQ(masked_fill(ones({2, 2}), row, 7.0).to_vector<double>(),
            (std::vector<double>{7, 1, 7, 1}));

  testing::expect_error([] { tril(ones({3})); }, {"tril", "at least 2 dims", "[3]"});
  testing::expect_error([] { triu(Tensor()); }, {"triu"});
  testing::expect_error(
      [] {
        masked_fill(ones({2, 2}), ones({2, 2}), 0.0);
      },
      {"masked_fill", "bool", "f32"});
  testing::expect_error(
      [] {
        masked_fill(ones({2}), ones({3, 2}).to(DType::b8), 0.0);
      },
      {"masked_fill", "[3, 2]", "does not broadcast", "[2]"});
  testing::expect_error(
      [] { masked_fill(ones({2}).to(DType::u8), ones({2}).to(DType::b8), 300.0); },
      {"masked_fill", "300", "does not fit"});
  testing::expect_error(
      [] { masked_fill(zeros({1}).to(DType::i64), ones({1}).to(DType::b8), 0x1p63); },
      {"masked_fill", "does not fit", "i64"});
  EXPECT_EQ(
      masked_fill(zeros({1}).to(DType::u8), ones({1}).to(DType::b8), 255.0).to_vector<int64_t>(),
      std::vector<int64_t>{255});
}

TEST(Gather, PicksAlongADimAndScatterAddAccumulates) {
  const Tensor a = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const auto idx = [](std::vector<int64_t> v, Shape s) { return from_vector<int64_t>(v, s); };
  EXPECT_EQ(gather(a, 1, idx({2, 0, 1, 1}, {2, 2})).to_vector<double>(),
            (std::vector<double>{3, 1, 5, 5}));
  EXPECT_EQ(gather(a, 0, idx({1, 0, 1}, {1, 3})).to_vector<double>(),
            (std::vector<double>{4, 2, 6}));
  EXPECT_EQ(gather(a, -1, idx({0}, {1, 1})).shape(), (Shape{1, 1}));
  EXPECT_EQ(gather(a, 1, idx({}, {2, 0})).shape(), (Shape{2, 0}));
  const Tensor ints = gather(a.to(DType::i32), 0, idx({1, 1}, {1, 2}));
  EXPECT_EQ(ints.dtype(), DType::i32);
  EXPECT_EQ(ints.to_vector<int64_t>(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(gather(full({}, 7.0), 0, full({}, 0.0).to(DType::i64)).to_vector<double>(),
            std::vector<double>{7});

  // Repeated indices: the gradient of a gathered element counts once per gather.
  Tensor x = a.clone().requires_grad_(true);
  sum(gather(x, 1, idx({0, 0, 2, 1, 1, 1}, {2, 3}))).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 0, 1, 0, 3, 0}));

  const Tensor src = from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  // Only src's leading (2, 3) block is read; index (1, 1) adds 5 and 6 into column 1.
  EXPECT_EQ(
      scatter_add(zeros({2, 3}, {.dtype = DType::f64}), 1, idx({0, 0, 2, 1, 1, 1}, {2, 3}), src)
          .to_vector<double>(),
      (std::vector<double>{3, 0, 3, 0, 18, 0}));
  EXPECT_EQ(scatter_add(ones({3}), 0, idx({2, 2}, {2}), full({2}, 0.5)).to_vector<double>(),
            (std::vector<double>{1, 1, 2}));

  testing::expect_error(
      [&] {
        gather(a, 1, idx({0, 3}, {1, 2}));
      },
      {"gather", "index out of range", "[0, 3]", "dim 1 has size 3"});
  testing::expect_error(
      [&] {
        gather(a, 0, idx({-1, 0}, {1, 2}));
      },
      {"gather", "out of range", "[-1, 0]", "size 2"});
  testing::expect_error([&] { gather(a, 1, ones({2, 2})); }, {"gather", "i64", "f32"});
  testing::expect_error(
      [&] {
        gather(a, 1, idx({0, 0}, {2}));
      },
      {"gather", "index has 1 dims", "has 2", "[2]", "[2, 3]"});
  testing::expect_error(
      [&] {
        gather(a, 1, idx({0, 0, 0}, {3, 1}));
      },
      {"gather", "[3, 1]", "larger", "[2, 3]", "dim 0"});
  testing::expect_error([&] { gather(a, 2, idx({0}, {1, 1})); }, {"gather", "dim 2", "2 dims"});
  // Nine dims where the index is smaller than the tensor in each: none merge.
  testing::expect_error([] { gather(zeros(Shape(9, 3)), 0, zeros(Shape(9, 2)).to(DType::i64)); },
                        {"gather", "9 dims remain", "at most 8"});
  testing::expect_error(
      [&] {
        scatter_add(a.to(DType::i32), 0, idx({0}, {1, 1}), ones({1, 1}));
      },
      {"scatter_add", "floating", "i32"});
  testing::expect_error(
      [&] {
        scatter_add(a, 0, idx({0, 1}, {1, 2}), ones({1, 1}).to(DType::f64));
      },
      {"scatter_add", "[1, 2]", "larger than src", "[1, 1]"});
  testing::expect_error(
      [&] {
        scatter_add(a, 0, idx({0}, {1, 1}), ones({1, 1}));
      },
      {"scatter_add", "src is f32", "f64"});
  testing::expect_error(
      [&] {
        scatter_add(a, 0, idx({5}, {1, 1}), ones({1, 1}).to(DType::f64));
      },
      {"scatter_add", "index out of range", "[5, 5]", "size 2"});
}

TEST(Topk, SortsTiesByIndexAndRanksNanLargest) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = from_vector<double>({1, 3, nan, 3, -0.0, 0.0, 2, nan}, {8});
  auto [v, i] = topk(x, 8);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{2, 7, 1, 3, 6, 0, 4, 5}));
  EXPECT_TRUE(testing::all_close(v, from_vector<double>({nan, nan, 3, 3, 2, 1, 0, 0}, {8}), 0, 0));
  auto [vs, is] = topk(x, 8, 0, false);
  EXPECT_EQ(is.to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 0, 6, 1, 3, 2, 7}));
  EXPECT_EQ(std::get<1>(topk(x, 3, 0, false)).to_vector<int64_t>(),
            (std::vector<int64_t>{4, 5, 0}));
  EXPECT_TRUE(std::isnan(vs.to_vector<double>()[7]));

  // Along dim 0 of a (3, 2): the columns' two largest, ties by the smaller row.
  const Tensor m = from_vector<int64_t>({5, 1, 7, 1, 5, 0}, {3, 2}).to(DType::i32);
  auto [mv, mi] = topk(m, 2, 0);
  EXPECT_EQ(mv.dtype(), DType::i32);
  EXPECT_EQ(mv.shape(), (Shape{2, 2}));
  EXPECT_EQ(mv.to_vector<int64_t>(), (std::vector<int64_t>{7, 1, 5, 1}));
  EXPECT_EQ(mi.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(std::get<0>(topk(zeros({2, 3}), 0)).shape(), (Shape{2, 0}));
  EXPECT_EQ(std::get<1>(topk(full({}, 4.0), 1)).shape(), Shape{});

  // The gradient of the values goes to the chosen positions.
  Tensor g = from_vector<double>({0.5, 4, -1, 4}, {4}).requires_grad_(true);
  sum(mul(std::get<0>(topk(g, 2)), from_vector<double>({10, 1}, {2}))).backward();
  EXPECT_EQ(g.grad().to_vector<double>(), (std::vector<double>{0, 10, 0, 1}));

  testing::expect_error([&] { topk(x, 9); }, {"topk", "k = 9", "dim -1 of size 8"});
  testing::expect_error([&] { topk(x, -1); }, {"topk", "k = -1"});
  testing::expect_error([&] { topk(m, 1, 2); }, {"topk", "dim 2", "2 dims"});
}

// Pearson's chi-square of the counts of 0..n-1 in `draws` against probabilities weights / sum,
// over the categories of positive weight; draws of a zero weight fail the test.
double chi_square(const std::vector<int64_t>& draws, const std::vector<double>& weights) {
  std::vector<double> count(weights.size(), 0.0);
  for (int64_t d : draws) {
    EXPECT_TRUE(d >= 0 && d < static_cast<int64_t>(weights.size())) << d;
    if (d >= 0 && d < static_cast<int64_t>(weights.size())) count[static_cast<size_t>(d)] += 1;
  }
  double total = 0, chi2 = 0;
  for (double w : weights) total += w;
  for (size_t j = 0; j < weights.size(); ++j) {
    if (weights[j] == 0) {
      EXPECT_EQ(count[j], 0) << "category " << j << " has weight 0";
      continue;
    }
    const double expected = static_cast<double>(draws.size()) * weights[j] / total;
    chi2 += (count[j] - expected) * (count[j] - expected) / expected;
  }
  return chi2;
}

TEST(Multinomial, FrequenciesFollowTheWeights) {
  // Bounds far in the chi-square tails (p about 1e-4 for 3 and 1 degrees of freedom), which a
  // sampler off by one category or uniform over the non-zero ones fails by far.
  const std::vector<double> w0 = {1, 0, 3, 6, 0, 2}, w1 = {0, 5, 0, 0, 5, 0};
  std::vector<double> both = w0;
  both.insert(both.end(), w1.begin(), w1.end());
  Generator gen(1234);
  const Tensor draws = multinomial(from_vector<double>(both, {2, 6}), 20000, true, &gen);
  EXPECT_EQ(draws.dtype(), DType::i64);
  EXPECT_EQ(draws.shape(), (Shape{2, 20000}));
  const std::vector<int64_t> d = draws.to_vector<int64_t>();
  EXPECT_LT(chi_square({d.begin(), d.begin() + 20000}, w0), 21.0);
  EXPECT_LT(chi_square({d.begin() + 20000, d.end()}, w1), 15.0);

  // Without replacement: 3000 rows of the same weights, each a draw of all 4 non-zero categories.
  // Each row's samples are distinct; the first of each row follows the weights.
  const Tensor rows = from_vector<double>(w0, {1, 6}).to(DType::f32).expand({3000, 6});
  const std::vector<int64_t> perm = multinomial(rows, 4, false, &gen).to_vector<int64_t>();
  std::vector<int64_t> firsts;
  for (size_t r = 0; r < 3000; ++r) {
    std::vector<int64_t> row(perm.begin() + 4 * r, perm.begin() + 4 * r + 4);
    firsts.push_back(row[0]);
    std::sort(row.begin(), row.end());
    EXPECT_EQ(row, (std::vector<int64_t>{0, 2, 3, 5})) << "row " << r;
  }
  EXPECT_LT(chi_square(firsts, w0), 21.0);
  // 1-D weights give a 1-D draw.
  const Tensor pair = multinomial(from_vector<double>(w1, {6}), 2, false, &gen);
  EXPECT_EQ(pair.shape(), (Shape{2}));
  std::vector<int64_t> got = pair.to_vector<int64_t>();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int64_t>{1, 4}));
}

TEST(Multinomial, SeedsRepeatAndBadWeightsAreErrors) {
  const Tensor w = from_vector<double>({0.1, 0.2, 0.3, 0.4}, {4});
  Generator a(7), b(7), c(8);
  const auto da = multinomial(w, 50, true, &a).to_vector<int64_t>();
  EXPECT_EQ(da, multinomial(w, 50, true, &b).to_vector<int64_t>());
  EXPECT_NE(da, multinomial(w, 50, true, &c).to_vector<int64_t>());
  EXPECT_EQ(multinomial(w, 4, false, &a).to_vector<int64_t>(),
            multinomial(w, 4, false, &b).to_vector<int64_t>());
  // A sample of 1 from a one-hot row is that category.
  EXPECT_EQ(multinomial(from_vector<double>({0, 0, 2}, {1, 3}), 2, true).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 2}));

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  testing::expect_error(
      [] {
        multinomial(from_vector<double>({1, -0.5}, {2}), 1);
      },
      {"multinomial", "non-negative", "-0.5"});
  testing::expect_error(
      [&] {
        multinomial(from_vector<double>({1, nan}, {2}), 1);
      },
      {"multinomial", "NaN"});
  testing::expect_error(
      [&] {
        multinomial(from_vector<double>({1, inf}, {2}), 1);
      },
      {"multinomial", "finite", "inf"});
  testing::expect_error(
      [] {
        multinomial(from_vector<double>({1, 1, 0, 0}, {2, 2}), 1);
      },
      {"multinomial", "row 1", "all zero"});
  testing::expect_error(
      [] {
        multinomial(from_vector<double>({1, 0, 1}, {3}), 3);
      },
      {"multinomial", "3 samples without replacement", "2 non-zero"});
  testing::expect_error(
      [] {
        multinomial(ones({2, 2, 2}), 1);
      },
      {"multinomial", "1-D", "2-D", "[2, 2, 2]"});
  testing::expect_error([] { multinomial(ones({3}).to(DType::i64), 1); },
                        {"multinomial", "floating", "i64"});
  testing::expect_error([] { multinomial(ones({3}), 0); }, {"multinomial", "positive", "0"});
  testing::expect_error([] { multinomial(ones({2, 0}), 1); }, {"multinomial", "no categories"});
}

TEST(KnownValues, MatchPyTorch) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = from_vector<double>({-3.0, -1.0, -0.25, 0.0, 0.5, 2.0, nan}, {7});
  const std::vector<std::tuple<std::string, Tensor, std::vector<double>>> cases = {
      {"hardtanh", hardtanh(x), {-1.0, -1.0, -0.25, 0.0, 0.5, 1.0, nan}},
      {"hardtanh(-0.5, 0.25)", hardtanh(x, -0.5, 0.25), {-0.5, -0.5, -0.25, 0.0, 0.25, 0.25, nan}},
      {"softplus",
       softplus(x),
       {0.04858735157374206, 0.31326168751822286, 0.5759394198788436, 0.6931471805599453,
        0.9740769841801067, 2.1269280110429727, nan}},
      {"softplus(2, 1)",
       softplus(x, 2.0, 1.0),
       {0.0012378425688652247, 0.06346400552148625, 0.23703849209005334, 0.34657359027997264,
        0.6566308437591114, 2.0, nan}},
  };
  for (const auto& [name, got, want] : cases) {
    EXPECT_TRUE(testing::all_close(got, from_vector<double>(want, {7}), 1e-15, 1e-15)) << name;
  }
}

}  // namespace
}  // namespace sinter

// The op table: one row per op drives an fp64 central-difference gradcheck on the CPU and a
// CPU-vs-CUDA parity check (forward and backward, f32 and bf16, fresh random inputs, outputs
// poisoned first).
//
// Adding an op, elementwise or with kernels of its own: CONTRIBUTING.md lists the files. Its row
// here (or in tests/ops_<family>.cpp) names it in CamelCase and gives the input shapes, the
// function of the inputs and, if the op needs one, the input domain; both checks pick the row up.
// Known values (KnownValues below) pin a function whose gradcheck alone would not catch a wrong
// formula.
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

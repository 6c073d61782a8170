// The op table: one row per op drives an fp64 central-difference gradcheck on the CPU and a
// CPU-vs-CUDA parity check (forward and backward, f32 and bf16, fresh random inputs, outputs
// poisoned first).
//
// Adding an op: write it in src/ops/<family>.cpp (checks, dispatch, backward), its CPU kernel in
// src/cpu/ and its CUDA kernel in kernels/, then add one row below: a CamelCase name, the input
// shapes, the function of the inputs, and the input domain if the op needs one. Both checks pick
// the row up.
//
// Adding an elementwise op (Note [elementwise op list] in src/internal/elementwise_ops.h) takes
// three files, no kernel code:
//   1. include/sinter/ops.h: its declaration.
//   2. src/internal/elementwise_ops.h: its __host__ __device__ functor in kern::fn and a row of
//      SINTER_UNARY_OPS or SINTER_BINARY_OPS; both backends run that functor. An activation also
//      gets the functor of its backward (g, x) or (g, y) with a SINTER_BINARY_OPS row, and a
//      SINTER_ACTIVATIONS row, which defines the public op and its gradient. An op whose public
//      function needs more (its own checks, several kernels, a backward written in other ops) is
//      written in src/ops/elementwise.cpp instead of a SINTER_ACTIVATIONS row.
//   3. This file: its row below, and known values in KnownValues when the gradcheck alone would not
//      catch a wrong function.
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
      {"Add", {S{3, 4}, S{3, 4}}, [](const Inputs& x) { return add(x[0], x[1]); }},
      {"AddBroadcast", {S{2, 3, 4}, S{3, 1}}, [](const Inputs& x) { return x[0] + x[1]; }},
      {"AddAlpha", {S{4, 1}, S{1, 5}}, [](const Inputs& x) { return add(x[0], x[1], -2.5); }},
      {"AddScalar", {S{5}}, [](const Inputs& x) { return x[0] + 1.5; }},
      {"Sub", {S{3, 4}, S{4}}, [](const Inputs& x) { return x[0] - x[1]; }},
      {"SubScalarLeft", {S{2, 3}}, [](const Inputs& x) { return 2.0 - x[0]; }},
      {"Mul", {S{2, 3, 4}, S{2, 1, 4}}, [](const Inputs& x) { return x[0] * x[1]; }},
      {"MulScalar", {S{6}}, [](const Inputs& x) { return x[0] * -3.0; }},
      {"Div", {S{3, 4}, S{3, 4}}, [](const Inputs& x) { return x[0] / x[1]; }, Domain::NonZero},
      {"DivBroadcast", {S{2, 3}, S{3}}, [](const Inputs& x) { return x[0] / x[1]; }, Domain::NonZero},
      {"DivScalarLeft", {S{5}}, [](const Inputs& x) { return 2.0 / x[0]; }, Domain::NonZero},
      {"Neg", {S{2, 5}}, [](const Inputs& x) { return -x[0]; }},
      {"Pow", {S{3, 4}, S{3, 4}}, [](const Inputs& x) { return pow(x[0], x[1]); }, Domain::Positive},
      {"PowScalar", {S{3, 4}}, [](const Inputs& x) { return pow(x[0], 3.0); }},
      {"PowFractional", {S{7}}, [](const Inputs& x) { return pow(x[0], 0.5); }, Domain::Positive},
      {"PowScalarBase", {S{7}}, [](const Inputs& x) { return pow(2.0, x[0]); }},
      {"Maximum", {S{3, 4}, S{4}}, [](const Inputs& x) { return maximum(x[0], x[1]); }},
      {"Minimum", {S{3, 4}, S{3, 1}}, [](const Inputs& x) { return minimum(x[0], x[1]); }},
      {"Clamp", {S{4, 5}}, [](const Inputs& x) { return clamp(x[0], -0.5, 0.5); }},
      {"ClampMin", {S{4, 5}}, [](const Inputs& x) { return clamp(x[0], 0.1, std::nullopt); }},
      {"Where", {S{3, 4}, S{3, 4}, S{4}},
       [](const Inputs& x) { return where(gt(x[0], 0.0), x[1], x[2]); }},
      {"WhereScalar", {S{6}, S{6}}, [](const Inputs& x) { return where(lt(x[0], x[1]), x[1], 0.25); }},
      // Comparisons: bool results, compared exactly.
      {"Eq", {S{3, 4}}, [](const Inputs& x) { return eq(x[0], x[0].detach() * 1.0); }, Domain::Any, false},
      {"Ne", {S{3, 4}, S{4}}, [](const Inputs& x) { return ne(x[0], x[1]); }, Domain::Any, false},
      {"Lt", {S{3, 4}, S{3, 4}}, [](const Inputs& x) { return lt(x[0], x[1]); }, Domain::Any, false},
      {"Le", {S{3, 4}}, [](const Inputs& x) { return le(x[0], 0.2); }, Domain::Any, false},
      {"Gt", {S{2, 3}, S{3}}, [](const Inputs& x) { return gt(x[0], x[1]); }, Domain::Any, false},
      {"Ge", {S{5}}, [](const Inputs& x) { return ge(x[0], -0.1); }, Domain::Any, false},
      // Unary math and activations.
      {"Exp", {S{3, 4}}, [](const Inputs& x) { return exp(x[0]); }},
      {"Log", {S{3, 4}}, [](const Inputs& x) { return log(x[0]); }, Domain::Positive},
      {"Sqrt", {S{3, 4}}, [](const Inputs& x) { return sqrt(x[0]); }, Domain::Positive},
      {"Rsqrt", {S{3, 4}}, [](const Inputs& x) { return rsqrt(x[0]); }, Domain::Positive},
      {"Abs", {S{3, 4}}, [](const Inputs& x) { return abs(x[0]); }, Domain::NonZero},
      {"Sin", {S{3, 4}}, [](const Inputs& x) { return sin(x[0]); }},
      {"Cos", {S{3, 4}}, [](const Inputs& x) { return cos(x[0]); }},
      {"Tanh", {S{3, 4}}, [](const Inputs& x) { return tanh(x[0]); }},
      {"Sigmoid", {S{3, 4}}, [](const Inputs& x) { return sigmoid(x[0]); }},
      {"Relu", {S{3, 4}}, [](const Inputs& x) { return relu(x[0]); }, Domain::NonZero},
      {"LeakyRelu", {S{3, 4}}, [](const Inputs& x) { return leaky_relu(x[0], 0.2); }, Domain::NonZero},
      {"Gelu", {S{3, 4}}, [](const Inputs& x) { return gelu(x[0]); }},
      {"GeluTanh", {S{3, 4}}, [](const Inputs& x) { return gelu(x[0], "tanh"); }},
      {"Silu", {S{3, 4}}, [](const Inputs& x) { return silu(x[0]); }},
      {"Hardtanh", {S{3, 4}}, [](const Inputs& x) { return hardtanh(x[0]); }},
      {"HardtanhBounds", {S{3, 4}}, [](const Inputs& x) { return hardtanh(x[0], -0.5, 0.25); }},
      {"Softplus", {S{3, 4}}, [](const Inputs& x) { return softplus(x[0]); }},
      {"SoftplusThreshold", {S{3, 4}}, [](const Inputs& x) { return softplus(x[0], 2.0, 1.0); }},
      // Reductions.
      {"SumAll", {S{3, 4}}, [](const Inputs& x) { return sum(x[0]); }},
      {"SumDims", {S{2, 3, 4}}, [](const Inputs& x) { return sum(x[0], {0, 2}); }},
      {"SumKeepdim", {S{2, 3, 4}}, [](const Inputs& x) { return sum(x[0], {-1}, true); }},
      {"MeanDim", {S{3, 5}}, [](const Inputs& x) { return mean(x[0], {1}); }},
      {"MeanAll", {S{2, 3, 2}}, [](const Inputs& x) { return mean(x[0]); }},
      {"Var", {S{4, 6}}, [](const Inputs& x) { return var(x[0], {1}); }, Domain::Any, true, 1e-4, true, 6e-2},
      {"VarAllBiased", {S{3, 4}}, [](const Inputs& x) { return var(x[0], {}, 0); }, Domain::Any, true, 1e-4, true, 6e-2},
      {"MaxAll", {S{3, 4}}, [](const Inputs& x) { return max(x[0]); }},
      {"MinAll", {S{3, 4}}, [](const Inputs& x) { return min(x[0]); }},
      {"MaxDimValues", {S{3, 5}}, [](const Inputs& x) { return first(max(x[0], 1)); }},
      {"MaxDimIndices", {S{3, 5}}, [](const Inputs& x) { return second(max(x[0], 0, true)); }, Domain::Any, false},
      {"MinDimValues", {S{2, 3, 4}}, [](const Inputs& x) { return first(min(x[0], 1, true)); }},
      {"Amax", {S{2, 3, 4}}, [](const Inputs& x) { return amax(x[0], {0, 2}); }},
      {"Argmax", {S{4, 6}}, [](const Inputs& x) { return argmax(x[0], 1); }, Domain::Any, false},
      {"Argmin", {S{4, 6}}, [](const Inputs& x) { return argmin(x[0], 0); }, Domain::Any, false},
      {"Logsumexp", {S{3, 5}}, [](const Inputs& x) { return logsumexp(x[0], {1}); }},
      {"LogsumexpKeepdim", {S{2, 3, 4}}, [](const Inputs& x) { return logsumexp(x[0], {0, 2}, true); }},
      // Matmul: 1-D, 2-D, batched, broadcast, transposed operands read in place.
      {"Matmul", {S{3, 4}, S{4, 5}}, [](const Inputs& x) { return matmul(x[0], x[1]); }, Domain::Any, true, 1e-3},
      {"MatmulVecVec", {S{6}, S{6}}, [](const Inputs& x) { return matmul(x[0], x[1]); }, Domain::Any, true, 1e-3},
      {"MatmulMatVec", {S{3, 6}, S{6}}, [](const Inputs& x) { return matmul(x[0], x[1]); }, Domain::Any, true, 1e-3},
      {"MatmulVecMat", {S{6}, S{6, 2}}, [](const Inputs& x) { return matmul(x[0], x[1]); }, Domain::Any, true, 1e-3},
      {"MatmulBatched", {S{2, 3, 4}, S{2, 4, 5}}, [](const Inputs& x) { return matmul(x[0], x[1]); }, Domain::Any, true, 1e-3},
      {"MatmulBroadcast", {S{2, 1, 3, 4}, S{3, 4, 2}}, [](const Inputs& x) { return matmul(x[0], x[1]); }, Domain::Any, true, 1e-3},
      {"MatmulTransposed", {S{4, 3}, S{5, 4}},
       [](const Inputs& x) { return matmul(x[0].t(), x[1].t()); }, Domain::Any, true, 1e-3},
      {"MatmulBatchedTransposed", {S{2, 4, 3}, S{2, 4, 5}},
       [](const Inputs& x) { return matmul(x[0].transpose(1, 2), x[1]); }, Domain::Any, true, 1e-3},
      // linear: one GEMM with the bias and activation in its epilogue.
      {"Linear", {S{3, 4}, S{5, 4}, S{5}}, [](const Inputs& x) { return linear(x[0], x[1], x[2]); }, Domain::Any, true, 1e-3},
      {"LinearNoBias3d", {S{2, 3, 4}, S{5, 4}}, [](const Inputs& x) { return linear(x[0], x[1]); }, Domain::Any, true, 1e-3},
      {"LinearVector", {S{4}, S{5, 4}, S{5}}, [](const Inputs& x) { return linear(x[0], x[1], x[2]); }, Domain::Any, true, 1e-3},
      {"LinearRelu", {S{6, 4}, S{5, 4}, S{5}}, [](const Inputs& x) { return linear(x[0], x[1], x[2], Activation::Relu); }, Domain::Any, true, 1e-3},
      {"LinearGelu", {S{6, 4}, S{5, 4}, S{5}}, [](const Inputs& x) { return linear(x[0], x[1], x[2], Activation::Gelu); }, Domain::Any, true, 1e-3},
      {"LinearGeluTanh", {S{2, 3, 4}, S{5, 4}, S{5}}, [](const Inputs& x) { return linear(x[0], x[1], x[2], Activation::GeluTanh); }, Domain::Any, true, 1e-3},
      {"LinearTransposedInput", {S{4, 3}, S{5, 4}, S{5}}, [](const Inputs& x) { return linear(x[0].t(), x[1], x[2], Activation::Relu); }, Domain::Any, true, 1e-3},
      // Shape ops and copies.
      {"Reshape", {S{2, 6}}, [](const Inputs& x) { return x[0].reshape({3, -1}) * 2.0; }},
      {"TransposeContiguous", {S{2, 3, 4}}, [](const Inputs& x) { return x[0].transpose(0, 2).contiguous(); }},
      {"Permute", {S{2, 3, 4}}, [](const Inputs& x) { return x[0].permute({1, 2, 0}) * 1.0; }},
      {"NarrowSelect", {S{4, 5}}, [](const Inputs& x) { return x[0].narrow(1, 1, 3).select(0, 2) * 1.0; }},
      {"SliceStep", {S{7, 3}}, [](const Inputs& x) { return x[0].slice(0, 1, std::nullopt, 2) * 1.0; }},
      {"ExpandSqueeze", {S{3, 1}}, [](const Inputs& x) { return x[0].expand({2, 3, 4}).unsqueeze(0).squeeze(0) * 1.0; }},
      {"Cat", {S{2, 3}, S{4, 3}}, [](const Inputs& x) { return cat({x[0], x[1]}, 0); }},
      {"Stack", {S{2, 3}, S{2, 3}}, [](const Inputs& x) { return stack({x[0], x[1]}, 1); }},
      {"Split", {S{5, 4}},
       [](const Inputs& x) {
         std::vector<Tensor> p = split(x[0], 2, 0);
         return cat({p[2] * 3.0, p[0], p[1] * 2.0}, 0);
       }},
      {"Chunk", {S{3, 6}},
       [](const Inputs& x) {
         std::vector<Tensor> p = chunk(x[0], 3, 1);
         return p[0] * p[1] - p[2];
       }},
      {"IndexSelect", {S{5, 3}},
       [](const Inputs& x) {
         Tensor idx = from_vector<int64_t>({4, 0, 4, 2}, {4}).to(x[0].device());
         return index_select(x[0], 0, idx);
       }},
      {"IndexSelectInner", {S{2, 5, 3}},
       [](const Inputs& x) {
         Tensor idx = from_vector<int64_t>({1, 1, 3}, {3}).to(x[0].device());
         return index_select(x[0], 1, idx);
       }},
      // Linear, so a large step is exact up to the f32 rounding it measures through.
      {"ToDtypeRoundTrip", {S{3, 4}}, [](const Inputs& x) { return x[0].to(DType::f32).to(x[0].dtype()) * 1.0; },
       Domain::Any, true, 1e-4, true, 3e-2, 1e-2},
      // In-place ops (what optimizers use): not recorded by autograd, so forward parity only.
      {"AddInPlace", {S{3, 4}, S{4}},
       [](const Inputs& x) {
         Tensor r = x[0].detach().clone();
         NoGradGuard ng;
         r.add_(x[1].detach(), -0.5);
         return r.add_(2.0);
       },
       Domain::Any, false},
      {"MulInPlace", {S{3, 4}, S{3, 1}},
       [](const Inputs& x) {
         Tensor r = x[0].detach().clone();
         NoGradGuard ng;
         r.mul_(x[1].detach());
         return r.mul_(3.0);
       },
       Domain::Any, false},
      {"FillZeroCopyInPlace", {S{4, 3}},
       [](const Inputs& x) {
         Tensor r = empty({3, 4}, {.dtype = x[0].dtype(), .device = x[0].device()});
         NoGradGuard ng;
         r.fill_(7.0);
         r.narrow(1, 0, 2).zero_();
         r.narrow(0, 1, 2).copy_(x[0].detach().t().narrow(0, 0, 2));
         return r;
       },
       Domain::Any, false},
  };
  return rows;
}

std::vector<OpRow> op_table() {
  std::vector<OpRow> rows = core_rows();
  for (auto family : {testing::conv_pool_rows, testing::norm_rows, testing::loss_rows}) {
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

// Op-table rows of the elementwise family (see op_table.h): arithmetic with and without
// broadcasting, where and masking, comparisons (bool results, compared exactly), unary math and
// activations (prelu, erf, erfinv, expm1, log1p, atan2, hypot among them), dtype conversion and the
// in-place ops, and the composed ones (lerp, addcmul, addcdiv, clamp with tensor bounds, isclose);
// and the values of PyTorch's functions and gradients where a wrong formula could pass its own
// gradcheck.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> elementwise_rows() {
  return {
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
      {.name = "Swiglu",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return swiglu(x[0], x[1]); }},
      {.name = "SwigluBroadcast",
       .shapes = {S{2, 3, 4}, S{4}},
       .fn = [](const Inputs& x) { return swiglu(x[0], x[1]); }},
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
      {.name = "Elu", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return elu(x[0]); }},
      {.name = "EluAlpha",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return elu(x[0], 0.4); },
       .domain = Domain::NonZero},
      {.name = "Selu",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return selu(x[0]); },
       .domain = Domain::NonZero},
      {.name = "Mish", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return mish(x[0]); }},
      // Scaled so that some elements fall beyond -3 and 3, where the two are flat or linear.
      {.name = "Hardswish",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return hardswish(x[0] * 2.5); }},
      {.name = "Hardsigmoid",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return hardsigmoid(x[0] * 2.5); }},
      {.name = "PreluChannels",
       .shapes = {S{2, 3, 4}, S{3}},
       .fn = [](const Inputs& x) { return prelu(x[0], x[1]); },
       .domain = Domain::NonZero},
      {.name = "PreluShared",
       .shapes = {S{3, 4}, S{1}},
       .fn = [](const Inputs& x) { return prelu(x[0], x[1]); },
       .domain = Domain::NonZero},
      // Linear, so a large step is exact up to the f32 rounding it measures through.
      {.name = "ToDtypeRoundTrip",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return x[0].to(DType::f32).to(x[0].dtype()) * 1.0; },
       .fd_eps = 1e-2},
      // In-place ops as optimizers use them, under NoGradGuard: forward parity only (the rows of
      // ops_inplace.cpp check them under autograd).
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
      // erf, erfinv, expm1, log1p, atan2 and hypot: rows of the elementwise op list.
      {.name = "Erf", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return erf(x[0]); }},
      {.name = "Erfinv",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return erfinv(x[0]); },
       .domain = Domain::Unit},
      {.name = "Expm1", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return expm1(x[0]); }},
      {.name = "Log1p",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return log1p(x[0]); },
       .domain = Domain::Positive},
      // floor, ceil, round and trunc (zero gradient) and frac (the identity's): steps at the
      // integers, where a finite difference may straddle one; their gradients are checked in
      // PointwiseMath.RoundingMatchesPyTorch.
      {.name = "Floor",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return floor(mul(x[0], 3.0)); },
       .grad = false},
      {.name = "Ceil",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return ceil(mul(x[0], 3.0)); },
       .grad = false},
      {.name = "Round",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return round(mul(x[0], 3.0)); },
       .grad = false},
      {.name = "RoundDecimals",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return round(mul(x[0], 30.0), -1); },
       .grad = false},
      {.name = "Trunc",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return trunc(mul(x[0], 3.0)); },
       .grad = false},
      {.name = "Frac",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return frac(mul(x[0], 3.0)); },
       .grad = false},
      {.name = "Atan2",
       .shapes = {S{3, 4}, S{4}},
       .fn = [](const Inputs& x) { return atan2(x[0], x[1]); },
       .domain = Domain::NonZero},
      {.name = "Hypot",
       .shapes = {S{3, 1}, S{3, 4}},
       .fn = [](const Inputs& x) { return hypot(x[0], x[1]); },
       .domain = Domain::NonZero},
      // Composed ops (src/ops/pointwise.cpp): lerp's two forms, addcmul, addcdiv, clamp with
      // tensor bounds (some below, some above, some crossed), isclose.
      {.name = "LerpScalar",
       .shapes = {S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             return cat({lerp(x[0], x[1], 0.3), lerp(x[0], x[1], 0.8)});
           }},
      {.name = "LerpTensor",
       .shapes = {S{3, 4}, S{3, 4}, S{4}},
       .fn = [](const Inputs& x) { return lerp(x[0], x[1], x[2]); }},
      {.name = "Addcmul",
       .shapes = {S{3, 4}, S{4}, S{3, 1}},
       .fn = [](const Inputs& x) { return addcmul(x[0], x[1], x[2], -0.5); }},
      {.name = "Addcdiv",
       .shapes = {S{3, 4}, S{3, 4}, S{4}},
       .fn = [](const Inputs& x) { return addcdiv(x[0], x[1], x[2], 2.0); },
       .domain = Domain::NonZero},
      {.name = "ClampTensorBounds",
       .shapes = {S{3, 4}, S{4}, S{3, 1}},
       .fn = [](const Inputs& x) { return clamp(x[0], x[1], x[2]); }},
      {.name = "ClampTensorMax",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return clamp(x[0], Tensor(), x[1]); }},
      {.name = "Isclose",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return isclose(x[0], add(x[0], mul(x[1], 1e-3)), 1e-3, 1e-3); },
       .grad = false},
  };
}

}  // namespace sinter::testing

namespace sinter {
namespace {

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
      {"elu",
       elu(x),
       {-0.950212931632136, -0.6321205588285577, -0.22119921692859512, 0.0, 0.5, 2.0, nan}},
      {"elu(0.5)",
       elu(x, 0.5),
       {-0.475106465816068, -0.31606027941427883, -0.11059960846429756, 0.0, 0.5, 2.0, nan}},
      {"selu",
       selu(x),
       {-1.6705687287671118, -1.1113307378125625, -0.388890197478119, 0.0, 0.5253504936777402,
        2.101401974710961, nan}},
      {"mish",
       mish(x),
       {-0.1456474612756246, -0.30340146137410895, -0.129926963679141, 0.0, 0.3752452113048951,
        1.9439589595339946, nan}},
      {"hardswish",
       hardswish(x),
       {-0.0, -0.3333333333333333, -0.11458333333333333, 0.0, 0.2916666666666667,
        1.6666666666666667, nan}},
      {"hardsigmoid",
       hardsigmoid(x),
       {0.0, 0.3333333333333333, 0.4583333333333333, 0.5, 0.5833333333333334, 0.8333333333333334,
        nan}},
      {"softplus(2, 1)",
       softplus(x, 2.0, 1.0),
       {0.0012378425688652247, 0.06346400552148625, 0.23703849209005334, 0.34657359027997264,
        0.6566308437591114, 2.0, nan}},
  };
  for (const auto& [name, got, want] : cases) {
    EXPECT_TRUE(testing::all_close(got, from_vector<double>(want, {7}), 1e-15, 1e-15)) << name;
  }
}

// swiglu(gate, up) = silu(gate) up = gate up / (1 + exp(-gate)), written out.
TEST(KnownValues, SwigluIsSiluOfTheGateTimesUp) {
  const Tensor gate = from_vector<double>({-3.0, -1.0, -0.25, 0.0, 0.5, 2.0}, {6});
  const Tensor up = from_vector<double>({2.0, -1.0, 4.0, 1.0, 3.0, 0.5}, {6});
  const std::vector<double> want{-0.2845552390654007, 0.2689414213699951, -0.43782349911420193, 0.0,
                                 0.933688996802782,   0.8807970779778823};
  EXPECT_TRUE(testing::all_close(swiglu(gate, up), from_vector<double>(want, {6}), 1e-15, 1e-15));
  testing::expect_error([&] { swiglu(gate, zeros({4}, {.dtype = DType::f64})); },
                        {"swiglu", "[6]", "[4]"});
  testing::expect_error([&] { swiglu(gate.to(DType::i64), up.to(DType::i64)); },
                        {"swiglu", "floating"});
}

}  // namespace
}  // namespace sinter

namespace sinter {
namespace {

using testing::expect_error;

// PyTorch's gradients of the activations, at their kinks (-3, 0, 3) too, where a gradcheck
// cannot look.
TEST(KnownValues, ActivationGradientsMatchPyTorch) {
  const std::vector<double> xs = {-3.5, -3.0, -1.0, -0.25, 0.0, 0.5, 2.0, 3.0, 4.0};
  const double s = 1.0507009873554805, sixth = 1.0 / 6;  // selu's scale
  const std::vector<
      std::tuple<std::string, std::function<Tensor(const Tensor&)>, std::vector<double>>>
      cases = {
          {"elu",
           [](const Tensor& x) { return elu(x); },
           {0.0301973834223185, 0.049787068367863944, 0.36787944117144233, 0.7788007830714049, 1.0,
            1.0, 1.0, 1.0, 1.0}},
          // At 0 the slope is alpha's side, as PyTorch's.
          {"elu(0.5)",
           [](const Tensor& x) { return elu(x, 0.5); },
           {0.01509869171115925, 0.024893534183931972, 0.18393972058572117, 0.38940039153570244,
            0.5, 1.0, 1.0, 1.0, 1.0}},
          {"selu",
           [](const Tensor& x) { return selu(x); },
           {0.05308999989009366, 0.08753061208026487, 0.646768603034814, 1.3692091433692577,
            1.7580993408473766, s, s, s, s}},
          {"mish",
           [](const Tensor& x) { return mish(x); },
           {-0.07276041344326706, -0.09339311453232084, 0.059216755877395014, 0.43981560172180506,
            0.6, 0.8864243753577272, 1.0693179342794896, 1.0211069109294435, 1.0044328769037503}},
          {"hardswish",
           [](const Tensor& x) { return hardswish(x); },
           {0.0, 0.0, 0.16666666666666669, 0.4166666666666667, 0.5, 0.6666666666666666,
            1.1666666666666665, 1.0, 1.0}},
          // PyTorch's f64 kernel gives f32's 1/6 (0.1666666716337204); the exact 1/6 here.
          {"hardsigmoid",
           [](const Tensor& x) { return hardsigmoid(x); },
           {0.0, 0.0, sixth, sixth, sixth, sixth, sixth, 0.0, 0.0}},
      };
  for (const auto& [name, f, want] : cases) {
    Tensor x = from_vector<double>(xs, {9}).requires_grad_();
    sum(f(x)).backward();
    EXPECT_TRUE(testing::all_close(x.grad(), from_vector<double>(want, {9}), 1e-15, 1e-15)) << name;
  }
}

TEST(KnownValues, PreluMatchesPyTorch) {
  Tensor x = from_vector<double>({-2.0, 0.0, 1.5, 0.5, -1.0, -0.25}, {2, 3}).requires_grad_();
  Tensor w = from_vector<double>({0.25, -0.5, 2.0}, {3}).requires_grad_();
  Tensor y = prelu(x, w);
  // At x == 0 the weight's side: -0.5 * 0 = -0.0 and a slope of -0.5.
  EXPECT_TRUE(
      testing::all_close(y, from_vector<double>({-0.5, -0.0, 1.5, 0.5, 0.5, -0.5}, {2, 3}), 0, 0));
  EXPECT_TRUE(std::signbit(y.to_vector<double>()[1]));
  sum(y * from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3})).backward();
  EXPECT_TRUE(testing::all_close(
      x.grad(), from_vector<double>({0.25, -1.0, 3.0, 4.0, -2.5, 12.0}, {2, 3}), 0, 0));
  EXPECT_TRUE(testing::all_close(w.grad(), from_vector<double>({-2.0, -5.0, -1.5}, {3}), 0, 0));
  // One shared weight, 0-d or 1-d, over an input of any rank; a 1-d input has one channel.
  Tensor v = from_vector<double>({-4.0, 2.0}, {2});
  const Tensor want = from_vector<double>({-1.0, 2.0}, {2});
  EXPECT_TRUE(testing::all_close(prelu(v, full({1}, 0.25, {.dtype = DType::f64})), want, 0, 0));
  EXPECT_TRUE(testing::all_close(prelu(v, full({}, 0.25, {.dtype = DType::f64})), want, 0, 0));
}

TEST(ActivationErrors, PreluWeightsAndDtypes) {
  expect_error(
      [] {
        prelu(zeros({2, 3}), ones({2}));
      },
      {"prelu", "weight of 2 elements", "[2, 3]", "3 channels", "expected 1 or 3"});
  expect_error([] { prelu(zeros({4}), ones({4})); },
               {"prelu", "weight of 4 elements", "1 channels"});
  expect_error([] { prelu(zeros({2, 3}), ones({1, 3})); }, {"prelu", "0-d or 1-d", "[1, 3]"});
  expect_error(
      [] {
        prelu(zeros({2, 3}), ones({3}, {.dtype = DType::f64}));
      },
      {"prelu", "weight (f64", "input (f32"});
  expect_error(
      [] {
        prelu(zeros({2, 3}, {.dtype = DType::i64}), ones({3}));
      },
      {"prelu", "floating", "i64"});
  expect_error([] { elu(zeros({2}, {.dtype = DType::i64})); }, {"elu", "floating", "i64"});
  expect_error([] { hardswish(zeros({2}, {.dtype = DType::b8})); }, {"hardswish", "floating"});
}

}  // namespace
}  // namespace sinter

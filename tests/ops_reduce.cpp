// Op-table rows of the reduce family (see op_table.h): sums, products, means, variances, extrema
// and their indices, logsumexp, cumsum and cumprod; and their written-out values (PyTorch's).
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
      {.name = "Cumprod",
       .shapes = {S{3, 5}},
       .fn = [](const Inputs& x) { return cumprod(x[0], 1); }},
      {.name = "CumprodStridedDim",
       .shapes = {S{4, 3, 2}},
       .fn = [](const Inputs& x) { return cumprod(x[0], 0); }},
      // Several chunks of the warp scan; near-1 factors keep 70 products in range.
      {.name = "CumprodLongRows",
       .shapes = {S{2, 70}},
       .fn = [](const Inputs& x) { return cumprod(add(mul(x[0], 0.05), 1.0), 1); },
       .bf16_tol = 1e-1},
      // Exact zeros in the scanned rows: the masked gradient (Note [cumprod gradient]) on both
      // devices, with a zero first, in the middle, twice, and none.
      {.name = "CumprodZeros",
       .shapes = {S{4, 5}},
       .fn =
           [](const Inputs& x) {
             const Tensor keep = from_vector<double>({0, 1, 1, 1, 1, 1, 1, 0, 1, 1,  //
                                                      1, 0, 1, 0, 1, 1, 1, 1, 1, 1},
                                                     {4, 5})
                                     .to(x[0].dtype())
                                     .to(x[0].device());
             return cumprod(mul(x[0], keep), 1);
           }},
      // Reductions.
      {.name = "ProdDim", .shapes = {S{3, 5}}, .fn = [](const Inputs& x) { return prod(x[0], 1); }},
      {.name = "ProdKeepdim",
       .shapes = {S{2, 3, 4}},
       .fn = [](const Inputs& x) { return prod(x[0], -2, true); }},
      {.name = "ProdAll", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return prod(x[0]); }},
      // A block per row (past the warp rows' 256).
      {.name = "ProdLongRows",
       .shapes = {S{2, 300}},
       .fn = [](const Inputs& x) { return prod(add(mul(x[0], 0.05), 1.0), 1); },
       .bf16_tol = 1e-1},
      {.name = "SumAll", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return sum(x[0]); }},
      {.name = "SumDims",
       .shapes = {S{2, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return sum(x[0], {0, 2});
           }},
      // Sums over leading or middle dims run along their lines in place (Note [line sums]).
      {.name = "SumLeadingDims",
       .shapes = {S{8, 9, 17}},
       .fn =
           [](const Inputs& x) {
             return sum(x[0], {0, 1});
           }},
      {.name = "SumMiddleDim",
       .shapes = {S{2, 66, 16}},
       .fn = [](const Inputs& x) { return sum(x[0], {1}, true); }},
      {.name = "SumColumns",
       .shapes = {S{70, 33}},
       .fn = [](const Inputs& x) { return sum(x[0], {0}); }},
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

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_vector<double>(v, shape);
}

// Rows with no zero, one zero, two zeros (later ones after a zero), a negative zero and zeros at
// either end; torch.cumprod and torch.prod on them in f64, forward and backward.
const Tensor& zeros_input() {
  static const Tensor x =
      f64({2, 0.5, 0, 3, 0, 1.5, 0, 4, -1, 2, 0.25, 3, 1.5, -2, 0.5, 3, 0.5, 2}, {3, 6});
  return x;
}

TEST(Cumprod, PyTorchValuesAndGradientThroughZeros) {
  const Tensor x = zeros_input().clone().requires_grad_(true);
  const Tensor w = f64({1, -2, 0.5, 3, -1, 2, 0.5, 1, 2, -1, 3, 1, 1, 1, -1, 2, 0.5, -3}, {3, 6});
  const Tensor y = cumprod(x, 1);
  EXPECT_TRUE(testing::all_close(
      y, f64({2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1.5, -3, -1.5, -4.5, -2.25, -4.5}, {3, 6}), 0,
      0));
  sum(mul(y, w)).backward();
  EXPECT_TRUE(testing::all_close(
      x.grad(),
      f64({0, -4, 9.5, 0, 0, 0, -7.5, 0, 0, 0, 0, 0, 2.25, -0.9375, 9.75, 1.125, 24.75, 6.75},
          {3, 6}),
      0, 1e-15));
}

// The central differences of sum(cumprod(x, dim) * w) at inputs with exact zeros (the product is
// linear in each element, so they are exact up to rounding) against the analytic gradient.
TEST(Cumprod, GradientMatchesFiniteDifferencesAtZeros) {
  for (int64_t dim : {0, 1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    Tensor x = (dim == 1 ? zeros_input() : zeros_input().t().contiguous()).clone();
    Generator gen(7);
    const Tensor w = randn(x.shape(), {.dtype = DType::f64}, &gen);
    x.requires_grad_(true);
    sum(mul(cumprod(x, dim), w)).backward();
    const std::vector<double> analytic = x.grad().to_vector<double>();
    NoGradGuard ng;
    auto* p = static_cast<double*>(x.data_ptr());
    for (int64_t j = 0; j < x.numel(); ++j) {
      const double orig = p[j];
      p[j] = orig + 1e-3;
      const double lp = sum(mul(cumprod(x, dim), w)).item<double>();
      p[j] = orig - 1e-3;
      const double lm = sum(mul(cumprod(x, dim), w)).item<double>();
      p[j] = orig;
      EXPECT_NEAR(analytic[static_cast<size_t>(j)], (lp - lm) / 2e-3, 1e-9) << "element " << j;
    }
  }
}

TEST(Cumprod, IntegralProductsInI64AndEdgeShapes) {
  const Tensor a = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}).to(DType::i32);
  const Tensor c = cumprod(a, 1);
  EXPECT_EQ(c.dtype(), DType::i64);
  EXPECT_EQ(c.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 6, 4, 20, 120}));
  EXPECT_EQ(cumprod(a, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 10, 18}));
  const Tensor b = from_vector<double>({1, 0, 1}, {3}).to(DType::b8);
  EXPECT_EQ(cumprod(b, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0}));
  // 3^41 wraps modulo 2^64, as PyTorch's int64 products do.
  const Tensor threes = full({41}, 3, {.dtype = DType::i64});
  EXPECT_EQ(cumprod(threes, 0).to_vector<int64_t>().back(), -420491770248316829LL);
  const Tensor s = full({}, 2.5).requires_grad_(true);
  const Tensor cs = cumprod(s, 0);
  EXPECT_EQ(cs.shape(), Shape{});
  cs.backward();
  EXPECT_EQ(s.grad().item<double>(), 1.0);
  EXPECT_EQ(cumprod(zeros({0, 3}), 0).shape(), (Shape{0, 3}));
  testing::expect_error([] { cumprod(zeros({2, 3}), -3); }, {"cumprod", "dim -3", "2 dims"});
  testing::expect_error([] { cumprod(Tensor(), 0); }, {"cumprod", "undefined"});
}

TEST(Prod, PyTorchValuesAndGradientThroughZeros) {
  const Tensor x = zeros_input().clone().requires_grad_(true);
  const Tensor p = prod(x, 1);
  EXPECT_TRUE(testing::all_close(p, f64({0, 0, -4.5}, {3}), 0, 0));
  sum(mul(p, f64({1, 2, -1}, {3}))).backward();
  // Two zeros: all 0. One zero: the product of the others there, 0 elsewhere. None: out / x.
  EXPECT_TRUE(testing::all_close(
      x.grad(), f64({0, 0, 0, 0, 0, 0, -12, 0, 0, 0, 0, 0, 3, -2.25, 9, 1.5, 9, 2.25}, {3, 6}), 0,
      1e-15));

  const Tensor y = f64({1, 2, 0.5, 4, 3, -1}, {3, 2}).requires_grad_(true);
  const Tensor all = prod(y);
  EXPECT_EQ(all.shape(), Shape{});
  EXPECT_EQ(all.item<double>(), -12.0);
  all.backward();
  EXPECT_TRUE(testing::all_close(y.grad(), f64({-12, -6, -24, -3, -4, 12}, {3, 2}), 0, 1e-15));
  const Tensor k = prod(y, 0, true);
  EXPECT_EQ(k.shape(), (Shape{1, 2}));
  EXPECT_TRUE(testing::all_close(k, f64({1.5, -8}, {1, 2}), 0, 0));
}

TEST(Prod, DtypesAndEmptyRows) {
  const Tensor a = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}).to(DType::i32);
  EXPECT_EQ(prod(a, 0).dtype(), DType::i64);
  EXPECT_EQ(prod(a, 0).to_vector<int64_t>(), (std::vector<int64_t>{4, 10, 18}));
  EXPECT_EQ(prod(a).item<int64_t>(), 720);
  EXPECT_EQ(prod(from_vector<double>({1, 1}, {2}).to(DType::b8)).item<int64_t>(), 1);
  // The product of nothing is 1, as PyTorch's; its gradient is empty.
  const Tensor e = zeros({3, 0}).requires_grad_(true);
  const Tensor pe = prod(e, 1);
  EXPECT_TRUE(testing::all_close(pe, ones({3}), 0, 0));
  sum(pe).backward();
  EXPECT_EQ(e.grad().shape(), (Shape{3, 0}));
  EXPECT_EQ(prod(zeros({0})).item<double>(), 1.0);
  const Tensor s = full({}, -3.0);
  EXPECT_EQ(prod(s, 0).item<double>(), -3.0);
  EXPECT_EQ(prod(s).item<double>(), -3.0);
  testing::expect_error([] { prod(zeros({2, 3}), 2); }, {"prod", "dim 2", "2 dims"});
  testing::expect_error([] { prod(Tensor()); }, {"prod", "undefined"});
}

// A sum over leading or middle dims (Note [line sums]) gives the bits of the same sums over the
// rows of the transposed copy at every thread count (the lanes cut into 1, 2, 4, 8 and 16 groups):
// past one sum chunk, over more lines than one block holds, fewer rows than lanes, rows that are
// not a multiple of the lanes, lines before and after the summed dim, for floating and integral
// dtypes, and over no rows.
TEST(Sum, LinesGiveTheBitsOfTheTransposedRows) {
  Generator gen(testing::fresh_seed());
  for (const DType dt : {DType::f32, DType::f64, DType::bf16, DType::i32}) {
    SCOPED_TRACE(dtype_name(dt));
    // f64 draws use every bit of the mantissa, so that a sum in another order rounds apart.
    const auto draw = [&](const Shape& shape) {
      if (dt == DType::f64) return mul(randn(shape, {.dtype = DType::f64}, &gen), 100.0);
      const Tensor x = mul(randn(shape, {}, &gen), 100.0);
      return x.to(dt);
    };
    const Tensor tall = draw({40000, 19}), wide = draw({37, 4500}), mid = draw({3, 83, 17});
    const Tensor few = draw({11, 300}), even = draw({256, 64});
    for (const int threads : {1, 2, 3, 8, 16}) {
      SCOPED_TRACE(threads);
      const testing::ThreadsGuard guard(threads);
      for (const Tensor& x : {tall, wide, few, even}) {
        EXPECT_TRUE(testing::all_close(sum(x, {0}), sum(x.t().contiguous(), {1}), 0, 0));
      }
      EXPECT_TRUE(
          testing::all_close(sum(mid, {1}), sum(mid.permute({0, 2, 1}).contiguous(), {2}), 0, 0));
    }
    const Tensor none = sum(draw({0, 5}), {0});
    EXPECT_EQ(none.shape(), (Shape{5}));
    EXPECT_EQ(none.abs().max().to(DType::f64).item<double>(), 0.0);
  }
}

// CUDA's sum_lines (a thread a line, for lines of at most 1024 rows over 4096 lines or more)
// against the CPU's: the op-table rows are too small for that path.
TEST(Sum, CudaLinesMatchTheCpu) {
  SINTER_REQUIRE_CUDA();
  Generator gen(testing::fresh_seed());
  const Tensor cols = randn({300, 4200}, {}, &gen), mid = randn({2, 100, 2500}, {}, &gen);
  const Tensor cuda_cols = sum(cols.to(Device::cuda()), {0}).to(Device::cpu());
  const Tensor cuda_mid = sum(mid.to(Device::cuda()), {1}, true).to(Device::cpu());
  // f32 sums of at most 300 terms of size about 1 in order: a few ulp of sqrt(300) each.
  EXPECT_TRUE(testing::all_close(cuda_cols, sum(cols, {0}), 1e-4, 1e-5));
  EXPECT_TRUE(testing::all_close(cuda_mid, sum(mid, {1}, true), 1e-4, 1e-5));
  const Tensor ints = mul(cols, 10.0).to(DType::i32);
  EXPECT_TRUE(testing::all_close(sum(ints.to(Device::cuda()), {0}).to(Device::cpu()),
                                 sum(ints, {0}), 0, 0));
}

}  // namespace
}  // namespace sinter

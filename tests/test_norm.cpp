// batch_norm, layer_norm, dropout and embedding beyond the op table: known values, running
// statistics, dropout mask statistics and its Philox definition, embedding gradients, error
// messages, and CPU-vs-CUDA agreement at sizes that span many blocks.
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/cpu_util.h"
#include "kern/philox.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;

Tensor vec(const std::vector<double>& v, const Shape& shape, DType dtype = DType::f32) {
  return from_vector<double>(v, shape).to(dtype);
}

using ::sinter::testing::expect_error;

// --- batch_norm ---

TEST(BatchNorm, KnownValues) {
  // Channel 0 holds {1, 3, 5, 7} (mean 4, variance 5), channel 1 holds {2, 2, 2, 2}.
  Tensor x = vec({1, 3, 2, 2, 5, 7, 2, 2}, {2, 2, 2});
  Tensor w = vec({2, 1}, {2}), b = vec({0.5, -1}, {2});
  Tensor y = batch_norm(x, {}, {}, w, b, true, 0.1, 1e-5);
  const double s = 2 / std::sqrt(5.0 + 1e-5);
  EXPECT_TRUE(
      all_close(y, vec({-3 * s + 0.5, -s + 0.5, -1, -1, s + 0.5, 3 * s + 0.5, -1, -1}, {2, 2, 2}),
                1e-6, 1e-6));
}

TEST(BatchNorm, RunningStatisticsUseMomentumAndUnbiasedVariance) {
  Tensor x = vec({1, 3, 2, 2, 5, 7, 2, 2}, {2, 2, 2});
  Tensor rm = vec({1, -1}, {2}), rv = vec({2, 3}, {2});
  const uint32_t v0 = rm.version();
  batch_norm(x, rm, rv, {}, {}, true, 0.25);
  // Unbiased variances: 20 / 3 and 0.
  EXPECT_TRUE(all_close(rm, vec({0.75 * 1 + 0.25 * 4, 0.75 * -1 + 0.25 * 2}, {2}), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(rv, vec({0.75 * 2 + 0.25 * 20.0 / 3, 0.75 * 3}, {2}), 1e-6, 1e-6));
  EXPECT_NE(rm.version(), v0);
}

TEST(BatchNorm, RunningStatisticsInF32ForF64Input) {
  Tensor x = vec({1, 3, 5, 7}, {4, 1}, DType::f64);
  Tensor rm = zeros({1}), rv = ones({1});
  batch_norm(x, rm, rv, {}, {}, true);
  EXPECT_EQ(rm.dtype(), DType::f32);
  EXPECT_NEAR(rm.item<float>(), 0.4, 1e-6);
  EXPECT_NEAR(rv.item<float>(), 0.9 + 0.1 * 20.0 / 3, 1e-6);
}

TEST(BatchNorm, EvalUsesRunningStatisticsAndLeavesThemAlone) {
  Generator gen(3);
  Tensor x = randn({4, 2, 3}, {}, &gen);
  Tensor rm = vec({0.5, -1}, {2}), rv = vec({4, 0.25}, {2});
  Tensor w = vec({1.5, -2}, {2}), b = vec({0.1, 0.2}, {2});
  Tensor y = batch_norm(x, rm, rv, w, b, false, 0.1, 0.0);
  Tensor expect =
      add(mul(div(sub(x, rm.reshape({2, 1})), sqrt(rv).reshape({2, 1})), w.reshape({2, 1})),
          b.reshape({2, 1}));
  EXPECT_TRUE(all_close(y, expect, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(rm, vec({0.5, -1}, {2}), 0, 0));
  EXPECT_TRUE(all_close(rv, vec({4, 0.25}, {2}), 0, 0));
}

// The fused backward against autograd through the composed formula.
TEST(BatchNorm, BackwardMatchesComposedOps) {
  Generator gen(11);
  Tensor x = randn({5, 3, 4, 2}, {.dtype = DType::f64}, &gen).requires_grad_();
  Tensor w = randn({3}, {.dtype = DType::f64}, &gen).requires_grad_();
  Tensor b = randn({3}, {.dtype = DType::f64}, &gen).requires_grad_();
  Tensor gy = randn({5, 3, 4, 2}, {.dtype = DType::f64}, &gen);
  sum(mul(batch_norm(x, {}, {}, w, b, true), gy)).backward();
  Tensor gx = x.grad(), gw = w.grad(), gb = b.grad();
  x.set_grad({});
  w.set_grad({});
  b.set_grad({});
  Tensor mu = mean(x, {0, 2, 3}, true), v = var(x, {0, 2, 3}, 0, true);
  Tensor ref =
      add(mul(div(sub(x, mu), sqrt(add(v, 1e-5))), w.reshape({3, 1, 1})), b.reshape({3, 1, 1}));
  sum(mul(ref, gy)).backward();
  EXPECT_TRUE(all_close(gx, x.grad(), 1e-10, 1e-8));
  EXPECT_TRUE(all_close(gw, w.grad(), 1e-10, 1e-8));
  EXPECT_TRUE(all_close(gb, b.grad(), 1e-10, 1e-8));
}

// The f32 vector rows (src/cpu/vec_norm.cpp) promise the bits of the double formulas written out
// with lane_sum (Note [lane sums]): the lanes, the order, the statistics stored in f32. Rows of 45
// and 131 values (full lanes and a tail), and of 1100 (planes of more than 4 KiB, which the sums
// prefetch one ahead of the one they sum).
TEST(BatchNorm, F32VectorRowsGiveTheBitsOfTheWrittenOutFormulas) {
  for (const int64_t hw : {45, 131, 1100}) {
    SCOPED_TRACE("hw = " + std::to_string(hw));
    const int64_t n = 5, c = 2;
    Generator gen(5);
    Tensor x = add(randn({n, c, hw}, {}, &gen), 0.75).requires_grad_();
    Tensor w = randn({c}, {}, &gen).requires_grad_(), b = randn({c}, {}, &gen).requires_grad_();
    const Tensor gy = randn({n, c, hw}, {}, &gen);
    Tensor y = batch_norm(x, {}, {}, w, b, true, 0.1, 1e-5);
    sum(mul(y, gy)).backward();
    const auto xs = x.to_vector<float>(), gs = gy.to_vector<float>(), ws = w.to_vector<float>(),
               bs = b.to_vector<float>(), ys = y.to_vector<float>(),
               dxs = x.grad().to_vector<float>(), dws = w.grad().to_vector<float>(),
               dbs = b.grad().to_vector<float>();
    const auto m = static_cast<double>(n * hw);
    for (int64_t k = 0; k < c; ++k) {
      auto at = [&](int64_t i, int64_t j) { return static_cast<size_t>((i * c + k) * hw + j); };
      double s = 0, q = 0;
      for (int64_t i = 0; i < n; ++i) {
        s += cpu::lane_sum(hw, [&](int64_t j) { return static_cast<double>(xs[at(i, j)]); });
      }
      const double mu = s / m;
      for (int64_t i = 0; i < n; ++i) {
        q += cpu::lane_sum(hw, [&](int64_t j) {
          const double d = static_cast<double>(xs[at(i, j)]) - mu;
          return d * d;
        });
      }
      // The statistics are stored in f32 (Note [norm statistics]) and read back as double.
      const double mean = static_cast<float>(mu);
      const double rs = static_cast<float>(1.0 / std::sqrt(q / m + 1e-5));
      double s_g = 0, s_gx = 0;
      for (int64_t i = 0; i < n; ++i) {
        s_g += cpu::lane_sum(hw, [&](int64_t j) { return static_cast<double>(gs[at(i, j)]); });
        s_gx += cpu::lane_sum(hw, [&](int64_t j) {
          return static_cast<double>(gs[at(i, j)]) * (static_cast<double>(xs[at(i, j)]) - mean);
        });
      }
      const double s_gxhat = s_gx * rs;
      EXPECT_EQ(dbs[k], static_cast<float>(s_g)) << "bias gradient, channel " << k;
      EXPECT_EQ(dws[k], static_cast<float>(s_gxhat)) << "weight gradient, channel " << k;
      const double scale = rs * ws[k], shift = bs[k];
      const double mean_dy = s_g / m, mean_dy_xhat = s_gxhat / m;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < hw; ++j) {
          const double xv = xs[at(i, j)], g = gs[at(i, j)];
          ASSERT_EQ(ys[at(i, j)], static_cast<float>((xv - mean) * scale + shift))
              << "y of image " << i << ", channel " << k << ", element " << j;
          const double xhat = (xv - mean) * rs;
          ASSERT_EQ(dxs[at(i, j)], static_cast<float>(scale * (g - mean_dy - xhat * mean_dy_xhat)))
              << "dx of image " << i << ", channel " << k << ", element " << j;
        }
      }
    }
  }
}

// Eval mode takes inputs with no values per channel (an empty spatial dim): the parameters'
// gradients are zero, in every float dtype, and nothing is read (the sums' prefetch included).
TEST(BatchNorm, EvalBackwardOfEmptyPlanesGivesZeroParameterGradients) {
  for (const DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    SCOPED_TRACE(dtype_name(dt));
    const DType pdt = dt == DType::f64 ? DType::f64 : DType::f32;
    Tensor x = empty({2, 3, 0}, {.dtype = dt}).requires_grad_();
    Tensor w = ones({3}, {.dtype = pdt}).requires_grad_();
    Tensor b = zeros({3}, {.dtype = pdt}).requires_grad_();
    Tensor y = batch_norm(x, zeros({3}, {.dtype = pdt}), ones({3}, {.dtype = pdt}), w, b, false);
    EXPECT_EQ(y.numel(), 0);
    y.backward(empty({2, 3, 0}, {.dtype = dt}));
    EXPECT_TRUE(all_close(w.grad(), zeros({3}, {.dtype = pdt}), 0, 0));
    EXPECT_TRUE(all_close(b.grad(), zeros({3}, {.dtype = pdt}), 0, 0));
    EXPECT_EQ(x.grad().numel(), 0);
  }
}

TEST(BatchNorm, ErrorMessagesNameTheShapes) {
  Tensor x = zeros({4, 3, 2});
  expect_error([] { batch_norm(zeros({5}), {}, {}, {}, {}, true); },
               {"batch_norm", "(N, C, *)", "[5]"});
  expect_error([&] { batch_norm(x, {}, {}, zeros({4}), {}, true); },
               {"batch_norm", "weight", "[4]", "[3]"});
  expect_error(
      [&] {
        batch_norm(x, {}, {}, {}, zeros({2, 3}), true);
      },
      {"batch_norm", "bias", "[2, 3]"});
  expect_error([&] { batch_norm(x, zeros({2}), ones({2}), {}, {}, true); },
               {"batch_norm", "running_mean", "[2]"});
  expect_error([&] { batch_norm(x, zeros({3}), {}, {}, {}, true); },
               {"batch_norm", "running_mean and running_var"});
  expect_error([&] { batch_norm(x, {}, {}, {}, {}, false); }, {"batch_norm", "eval"});
  expect_error(
      [] {
        batch_norm(zeros({1, 3}), {}, {}, {}, {}, true);
      },
      {"batch_norm", "more than 1 value per channel", "[1, 3]"});
  expect_error([&] { batch_norm(x, {}, {}, zeros({3}, {.dtype = DType::f64}), {}, true); },
               {"batch_norm", "weight", "f64"});
  expect_error(
      [] {
        batch_norm(zeros({2, 2}, {.dtype = DType::i64}), {}, {}, {}, {}, true);
      },
      {"batch_norm", "floating"});
}

// bf16 and f16 inputs with f32 parameters (PyTorch's mixed norms, what autocast on the CPU runs):
// the f32 norm of the widened input rounded once, to the bit, forward and backward, in batch_norm
// (training and eval, planes shorter and longer than a vector), layer_norm and rms_norm (Note
// [half norm rows] in src/cpu/norm.cpp), but for bf16 batch norm's f32 normalization; the
// statistics and the parameters' gradients are the f32 ones.
TEST(BatchNorm, HalfInputsWithF32ParametersAreTheF32NormRounded) {
  for (const DType half : {DType::bf16, DType::f16}) {
    for (const int kind : {0, 1, 2, 3}) {  // batch_norm training, eval, layer_norm, rms_norm
      SCOPED_TRACE(std::string(dtype_name(half)) + " kind " + std::to_string(kind));
      Generator gen(testing::fresh_seed());
      const Shape shape = kind < 2 ? Shape{3, 5, 7, 9} : Shape{6, 37};
      const int64_t c = kind < 2 ? 5 : 37;
      const Tensor x0 = mul(randn(shape, {}, &gen), 3.0).to(half);
      const Tensor g0 = randn(shape, {}, &gen).to(half);
      const Tensor w0 = randn({c}, {}, &gen), b0 = randn({c}, {}, &gen);
      const Tensor rm0 = randn({c}, {}, &gen), rv0 = add(rand({c}, {}, &gen), 0.5);
      struct Out {
        Tensor y, dx, dw, db, rm;
      };
      auto run = [&](DType dt) {
        Tensor x = x0.to(dt).detach().requires_grad_(), w = w0.clone().requires_grad_(),
               b = b0.clone().requires_grad_();
        Tensor rm = rm0.clone(), rv = rv0.clone();
        Tensor y = kind == 0   ? batch_norm(x, rm, rv, w, b, true)
                   : kind == 1 ? batch_norm(x, rm, rv, w, b, false)
                   : kind == 2 ? layer_norm(x, {c}, w, b)
                               : rms_norm(x, {c}, w);
        y.backward(g0.to(dt));
        return Out{y, x.grad(), w.grad(), kind == 3 ? zeros({c}) : b.grad(), rm};
      };
      const Out h = run(half), f = run(DType::f32);
      EXPECT_EQ(h.y.dtype(), half);
      const auto rounded = [&](const Tensor& t) { return t.to(half).to(DType::f32); };
      // bf16 batch norm normalizes in f32 (Note [bf16 norm rows]): a value on the edge of a bf16
      // step may round to the other side, one step off, in few places; the rest to the bit.
      const bool f32_rows = half == DType::bf16 && kind < 2;
      for (const auto& [got, want] : {std::pair{h.y, f.y}, std::pair{h.dx, f.dx}}) {
        const Tensor g32 = got.to(DType::f32), w32 = rounded(want);
        if (!f32_rows) {
          EXPECT_TRUE(all_close(g32, w32, 0, 0));
          continue;
        }
        const double scale = w32.abs().max().item<double>();
        EXPECT_TRUE(all_close(g32, w32, 1e-5 * scale, 0x1p-7));
        const double apart = ne(g32, w32).to(DType::f32).mean().item<double>();
        EXPECT_LT(apart, 0.01) << "of the values one bf16 step apart";
      }
      EXPECT_EQ(h.dw.dtype(), DType::f32);
      EXPECT_TRUE(all_close(h.dw, f.dw, 0, 0)) << "dweight";
      EXPECT_TRUE(all_close(h.db, f.db, 0, 0)) << "dbias";
      EXPECT_TRUE(all_close(h.rm, f.rm, 0, 0)) << "running_mean";
    }
  }
  // A channel at its (large) mean with no variance gives its shift exactly, in eval and in
  // training; near it the bf16 rows stay within a bf16 step of the f32 norm (Note [bf16 norm
  // rows]).
  {
    const Tensor x = add(mul(randn({4, 2, 8, 8}), 2.0), 200.0).to(DType::bf16).to(DType::f32);
    const Tensor w = full({2}, 3.0), b = full({2}, 0.75);
    const Tensor rm = mean(x, {0, 2, 3}), rv = zeros({2});
    const Tensor flat = full({4, 2, 8, 8}, 200.0);
    for (const bool train : {false, true}) {
      Tensor m = rm.clone(), v = rv.clone();
      EXPECT_TRUE(
          all_close(batch_norm(flat.to(DType::bf16), full({2}, 200.0), zeros({2}), w, b, train)
                        .to(DType::f32),
                    full({4, 2, 8, 8}, 0.75), 0, 0));
      const Tensor got = batch_norm(x.to(DType::bf16), m, v, w, b, train).to(DType::f32);
      const Tensor want = batch_norm(x, rm.clone(), rv.clone(), w, b, train).to(DType::bf16);
      const double scale = want.to(DType::f32).abs().max().item<double>();
      EXPECT_TRUE(all_close(got, want.to(DType::f32), 1e-5 * scale, 0x1p-7)) << train;
    }
  }
  // f32 parameters go with a bf16 or f16 input only.
  expect_error(
      [] {
        batch_norm(zeros({4, 3}), {}, {}, zeros({3}, {.dtype = DType::bf16}), {}, true);
      },
      {"batch_norm", "weight", "bf16", "f32"});
}

// --- layer_norm ---

TEST(LayerNorm, KnownValues) {
  // Row {1, 2, 3, 4}: mean 2.5, variance 1.25.
  Tensor x = vec({1, 2, 3, 4, 0, 0, 0, 0}, {2, 4});
  Tensor w = vec({1, 2, 1, 2}, {4}), b = vec({0, 0, 1, 1}, {4});
  Tensor y = layer_norm(x, {4}, w, b, 1e-5);
  const double r = 1 / std::sqrt(1.25 + 1e-5);
  EXPECT_TRUE(all_close(y, vec({-1.5 * r, -1.0 * r, 0.5 * r + 1, 3 * r + 1, 0, 0, 1, 1}, {2, 4}),
                        1e-6, 1e-6));
}

TEST(LayerNorm, BackwardMatchesComposedOps) {
  Generator gen(5);
  Tensor x = randn({3, 2, 4, 5}, {.dtype = DType::f64}, &gen).requires_grad_();
  Tensor w = randn({4, 5}, {.dtype = DType::f64}, &gen).requires_grad_();
  Tensor b = randn({4, 5}, {.dtype = DType::f64}, &gen).requires_grad_();
  Tensor gy = randn({3, 2, 4, 5}, {.dtype = DType::f64}, &gen);
  sum(mul(layer_norm(x, {4, 5}, w, b), gy)).backward();
  Tensor gx = x.grad(), gw = w.grad(), gb = b.grad();
  x.set_grad({});
  w.set_grad({});
  b.set_grad({});
  Tensor mu = mean(x, {2, 3}, true), v = var(x, {2, 3}, 0, true);
  sum(mul(add(mul(div(sub(x, mu), sqrt(add(v, 1e-5))), w), b), gy)).backward();
  EXPECT_TRUE(all_close(gx, x.grad(), 1e-10, 1e-8));
  EXPECT_TRUE(all_close(gw, w.grad(), 1e-10, 1e-8));
  EXPECT_TRUE(all_close(gb, b.grad(), 1e-10, 1e-8));
}

// As BatchNorm.F32VectorRowsGiveTheBitsOfTheWrittenOutFormulas, for layer norm's f32 row, with
// and without weight and bias, on rows shorter and longer than a prefetch chunk (Note [row
// prefetch]). Row 0 is constant, so that (x - mu) is 0 and a negative weight makes it -0: without a
// bias the formula's + 0 still turns it into +0, and the bits say so.
TEST(LayerNorm, F32VectorRowGivesTheBitsOfTheWrittenOutFormula) {
  for (const int64_t cols : {45, 131, 300}) {
    for (const int affine : {0, 1, 2, 3}) {
      const bool has_w = (affine & 1) != 0, has_b = (affine & 2) != 0;
      SCOPED_TRACE("cols = " + std::to_string(cols) + ", weight " + std::to_string(has_w) +
                   ", bias " + std::to_string(has_b));
      const int64_t rows = 3;
      Generator gen(6);
      Tensor x = add(randn({rows, cols}, {}, &gen), 0.75);
      x.narrow(0, 0, 1).fill_(1.25);
      const Tensor w = has_w ? randn({cols}, {}, &gen) : Tensor();
      const Tensor b = has_b ? randn({cols}, {}, &gen) : Tensor();
      const auto xs = x.to_vector<float>(),
                 ys = layer_norm(x, {cols}, w, b, 1e-5).to_vector<float>();
      const std::vector<float> ws = has_w ? w.to_vector<float>() : std::vector<float>(),
                               bs = has_b ? b.to_vector<float>() : std::vector<float>();
      for (int64_t r = 0; r < rows; ++r) {
        auto at = [&](int64_t j) { return static_cast<size_t>(r * cols + j); };
        const double mu =
            cpu::lane_sum(cols, [&](int64_t j) { return static_cast<double>(xs[at(j)]); }) /
            static_cast<double>(cols);
        const double q = cpu::lane_sum(cols, [&](int64_t j) {
          const double d = static_cast<double>(xs[at(j)]) - mu;
          return d * d;
        });
        const double rs = 1.0 / std::sqrt(q / static_cast<double>(cols) + 1e-5);
        for (int64_t j = 0; j < cols; ++j) {
          const auto k = static_cast<size_t>(j);
          const double v = (static_cast<double>(xs[at(j)]) - mu) * rs;
          const auto want = static_cast<float>(v * (has_w ? static_cast<double>(ws[k]) : 1.0) +
                                               (has_b ? static_cast<double>(bs[k]) : 0.0));
          ASSERT_EQ(std::bit_cast<uint32_t>(ys[at(j)]), std::bit_cast<uint32_t>(want))
              << "row " << r << ", element " << j << ": " << ys[at(j)] << " vs " << want;
        }
      }
    }
  }
}

// Layer norm's f32 gradient row (and rms_norm's): dx, dweight and dbias are the bits of the
// written-out double formulas on the forward's f32 mean and 1 / std: the row's two sums in
// lane_sum's order, dweight and dbias summed in double over the fixed chunks of rows (Note [layer
// norm chunks]), each chunk in row order, the chunks in order. Rows of 45 (two rounds of the 16
// lanes, then a tail of 13), 64 and 131 (a whole and a partial cache line of column sums), 40 of
// them, so that the 16 chunks hold two or three rows each.
TEST(LayerNorm, F32GradientRowGivesTheBitsOfTheWrittenOutFormulas) {
  constexpr int64_t kChunks = 16;  // kLayerNormChunks
  for (const int64_t cols : {45, 64, 131}) {
    // Layer norm with weight and bias, with neither, with a bias alone; rms_norm with a weight.
    for (const int kind : {0, 1, 2, 3}) {
      const bool rms = kind == 2, has_w = kind == 0 || kind == 2, has_b = kind == 0 || kind == 3;
      SCOPED_TRACE("cols = " + std::to_string(cols) + ", kind " + std::to_string(kind));
      const int64_t rows = 40;
      Generator gen(11);
      Tensor x = add(randn({rows, cols}, {}, &gen), 0.5).requires_grad_();
      Tensor w = has_w ? randn({cols}, {}, &gen).requires_grad_() : Tensor();
      Tensor b = has_b ? randn({cols}, {}, &gen).requires_grad_() : Tensor();
      const Tensor dy = randn({rows, cols}, {}, &gen);
      const Tensor y = rms ? rms_norm(x, {cols}, w, 1e-5) : layer_norm(x, {cols}, w, b, 1e-5);
      y.backward(dy);
      const auto xs = x.to_vector<float>(), gs = dy.to_vector<float>(),
                 dxs = x.grad().to_vector<float>();
      const std::vector<float> ws = has_w ? w.to_vector<float>() : std::vector<float>();
      std::vector<double> dw_total(static_cast<size_t>(cols), 0.0),
          db_total(static_cast<size_t>(cols), 0.0);
      for (int64_t c = 0; c < kChunks; ++c) {
        std::vector<double> dw_chunk(static_cast<size_t>(cols), 0.0),
            db_chunk(static_cast<size_t>(cols), 0.0);
        for (int64_t r = rows * c / kChunks; r < rows * (c + 1) / kChunks; ++r) {
          auto at = [&](int64_t j) { return static_cast<size_t>(r * cols + j); };
          const double n = static_cast<double>(cols);
          const double mu = rms ? 0.0 : cpu::lane_sum(cols, [&](int64_t j) {
                                          return static_cast<double>(xs[at(j)]);
                                        }) / n;
          const double q = cpu::lane_sum(cols, [&](int64_t j) {
            const double d = static_cast<double>(xs[at(j)]) - mu;
            return d * d;
          });
          // The forward keeps its statistics as f32, as PyTorch's does.
          const double mu_kept = static_cast<float>(mu),
                       rs = static_cast<float>(1.0 / std::sqrt(q / n + 1e-5));
          auto xhat = [&](int64_t j) { return (static_cast<double>(xs[at(j)]) - mu_kept) * rs; };
          auto g = [&](int64_t j) {
            return static_cast<double>(gs[at(j)]) *
                   (has_w ? static_cast<double>(ws[static_cast<size_t>(j)]) : 1.0);
          };
          const double mean_g = rms ? 0.0 : cpu::lane_sum(cols, g) / n;
          const double mean_gx = cpu::lane_sum(cols, [&](int64_t j) { return g(j) * xhat(j); }) / n;
          for (int64_t j = 0; j < cols; ++j) {
            const auto want = static_cast<float>(rs * (g(j) - mean_g - xhat(j) * mean_gx));
            ASSERT_EQ(std::bit_cast<uint32_t>(dxs[at(j)]), std::bit_cast<uint32_t>(want))
                << "dx, row " << r << ", element " << j << ": " << dxs[at(j)] << " vs " << want;
            dw_chunk[static_cast<size_t>(j)] += static_cast<double>(gs[at(j)]) * xhat(j);
            db_chunk[static_cast<size_t>(j)] += static_cast<double>(gs[at(j)]);
          }
        }
        for (int64_t j = 0; j < cols; ++j) {
          dw_total[static_cast<size_t>(j)] += dw_chunk[static_cast<size_t>(j)];
          db_total[static_cast<size_t>(j)] += db_chunk[static_cast<size_t>(j)];
        }
      }
      for (const auto& [param, total, what] :
           {std::tuple{w, &dw_total, "dweight"}, std::tuple{b, &db_total, "dbias"}}) {
        if (!param.defined()) continue;
        const auto got = param.grad().to_vector<float>();
        for (int64_t j = 0; j < cols; ++j) {
          const auto want = static_cast<float>((*total)[static_cast<size_t>(j)]);
          ASSERT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(j)]),
                    std::bit_cast<uint32_t>(want))
              << what << ", element " << j << ": " << got[static_cast<size_t>(j)] << " vs " << want;
        }
      }
    }
  }
}

// y = x / sqrt(mean(x^2) + eps) * w, written out: [1, 2, 3, 4] has mean square 7.5.
TEST(RmsNorm, MatchesItsFormula) {
  const Tensor x = from_vector<double>({1, 2, 3, 4, -2, 0, 0, 2}, {2, 4});
  const Tensor w = from_vector<double>({1, -1, 0.5, 2});
  const Tensor y = rms_norm(x, {4}, w, 1e-3);
  const double r0 = 1 / std::sqrt(7.5 + 1e-3), r1 = 1 / std::sqrt(2.0 + 1e-3);
  EXPECT_TRUE(testing::all_close(
      y, from_vector<double>({r0, -2 * r0, 1.5 * r0, 8 * r0, -2 * r1, 0, 0, 4 * r1}, {2, 4}), 1e-15,
      1e-15));
  // Over two trailing dims: the mean square of all eight, without weight.
  const double r = 1 / std::sqrt((30.0 + 8.0) / 8 + 1e-3);
  EXPECT_TRUE(testing::all_close(rms_norm(x, {2, 4}, {}, 1e-3), mul(x, r), 1e-15, 1e-15));
}

// Without eps: the machine epsilon of f32 for f32 and bf16 inputs, of f64 for f64 (PyTorch's
// default); a row of 1e-4 has a mean square of 1e-8, below f32's epsilon, so eps shows.
TEST(RmsNorm, DefaultEpsIsTheComputeTypesEpsilon) {
  const Tensor x = full({1, 3}, 1e-4);
  const double f32_eps = std::numeric_limits<float>::epsilon();
  const double want = 1e-4 / std::sqrt(1e-8 + f32_eps);
  EXPECT_NEAR(rms_norm(x, {3}).flatten()[0].item<float>(), want, 1e-6 * want);
  EXPECT_NEAR(rms_norm(x.to(DType::bf16), {3}).to(DType::f32).flatten()[0].item<float>(), want,
              1e-2 * want);
  const double want64 = 1e-4 / std::sqrt(1e-8 + std::numeric_limits<double>::epsilon());
  EXPECT_NEAR(rms_norm(x.to(DType::f64), {3}).flatten()[0].item<double>(), want64, 1e-14);
}

// The f32 vector row (Note [cpu vector math]) without centring: the bits of the written-out
// formula, with and without weight, rows shorter and longer than a prefetch chunk.
TEST(RmsNorm, F32VectorRowGivesTheBitsOfTheWrittenOutFormula) {
  for (const int64_t cols : {45, 300}) {
    for (const bool has_w : {false, true}) {
      SCOPED_TRACE("cols = " + std::to_string(cols) + ", weight " + std::to_string(has_w));
      Generator gen(8);
      const Tensor x = add(randn({2, cols}, {}, &gen), 0.75);
      const Tensor w = has_w ? randn({cols}, {}, &gen) : Tensor();
      const auto xs = x.to_vector<float>(), ys = rms_norm(x, {cols}, w, 1e-5).to_vector<float>();
      const std::vector<float> ws = has_w ? w.to_vector<float>() : std::vector<float>();
      for (int64_t r = 0; r < 2; ++r) {
        auto at = [&](int64_t j) { return static_cast<size_t>(r * cols + j); };
        const double q = cpu::lane_sum(cols, [&](int64_t j) {
          const double d = static_cast<double>(xs[at(j)]);
          return d * d;
        });
        const double rs = 1.0 / std::sqrt(q / static_cast<double>(cols) + 1e-5);
        for (int64_t j = 0; j < cols; ++j) {
          const double v = static_cast<double>(xs[at(j)]) * rs;
          const auto want = static_cast<float>(
              v * (has_w ? static_cast<double>(ws[static_cast<size_t>(j)]) : 1.0) + 0.0);
          ASSERT_EQ(std::bit_cast<uint32_t>(ys[at(j)]), std::bit_cast<uint32_t>(want))
              << "row " << r << ", element " << j;
        }
      }
    }
  }
}

TEST(RmsNorm, ErrorMessagesNameTheShapes) {
  Tensor x = zeros({2, 3, 4});
  expect_error([&] { rms_norm(x, {3}); }, {"rms_norm", "[3]", "[2, 3, 4]"});
  expect_error([&] { rms_norm(x, {}); }, {"rms_norm", "at least one dim"});
  expect_error([&] { rms_norm(x, {4}, zeros({3})); }, {"rms_norm", "weight", "[3]", "[4]"});
  expect_error([&] { rms_norm(x, {4}, {}, -1.0); }, {"rms_norm", "eps", "-1"});
  expect_error(
      [&] {
        rms_norm(zeros({2, 4}, {.dtype = DType::i64}), {4});
      },
      {"rms_norm", "floating"});
}

TEST(LayerNorm, ErrorMessagesNameTheShapes) {
  Tensor x = zeros({2, 3, 4});
  expect_error([&] { layer_norm(x, {3}); }, {"layer_norm", "[3]", "[2, 3, 4]"});
  expect_error([&] { layer_norm(x, {2, 3, 4, 1}); }, {"layer_norm", "trailing dims"});
  expect_error([&] { layer_norm(x, {}); }, {"layer_norm", "at least one dim"});
  expect_error(
      [&] {
        layer_norm(x, {3, 4}, zeros({4}));
      },
      {"layer_norm", "weight", "[4]", "[3, 4]"});
  expect_error([&] { layer_norm(x, {4}, {}, zeros({3})); }, {"layer_norm", "bias", "[3]"});
}

// --- dropout ---

TEST(Dropout, MaskFractionAndScale) {
  const int64_t n = 200000;
  const double p = 0.3;
  Generator gen(42);
  std::vector<float> y = dropout(ones({n}), p, true, &gen).to_vector<float>();
  int64_t zeros_seen = 0;
  const auto kept = static_cast<float>(1 / (1 - p));
  for (float v : y) {
    if (v == 0) {
      ++zeros_seen;
    } else {
      ASSERT_EQ(v, kept);
    }
  }
  // The standard deviation of the fraction is about 0.001.
  EXPECT_NEAR(static_cast<double>(zeros_seen) / n, p, 0.005);
}

// Per Note [dropout mask], element i is kept iff (w0 >> 8) >= ceil(p 2^24).
TEST(Dropout, MaskFollowsPhiloxDefinition) {
  Generator gen(9);
  gen.reserve(17);  // a non-zero offset
  const GeneratorState st = gen.state();
  const double p = 0.6;
  std::vector<double> y =
      dropout(ones({300}, {.dtype = DType::f64}), p, true, &gen).to_vector<double>();
  const auto threshold = static_cast<uint32_t>(std::ceil(p * 0x1p24));
  for (int64_t i = 0; i < 300; ++i) {
    const bool keep = (kern::philox_element(st.seed, st.offset, i).w[0] >> 8) >= threshold;
    EXPECT_EQ(y[i], keep ? 1 / (1 - p) : 0.0) << "element " << i;
  }
  EXPECT_EQ(gen.state().offset, st.offset + 300);
}

TEST(Dropout, IdentityOrZerosAtTheEnds) {
  Generator gen(1);
  Tensor x = randn({50}, {}, &gen);
  EXPECT_TRUE(all_close(dropout(x, 0.0, true, &gen), x, 0, 0));
  EXPECT_TRUE(all_close(dropout(x, 0.7, false, &gen), x, 0, 0));
  Tensor xr = x.detach().clone().requires_grad_();
  Tensor y = dropout(xr, 1.0, true, &gen);
  EXPECT_TRUE(all_close(y, zeros({50}), 0, 0));
  sum(y).backward();
  EXPECT_TRUE(all_close(xr.grad(), zeros({50}), 0, 0));
}

TEST(Dropout, BackwardUsesTheForwardMask) {
  Generator gen(77);
  Tensor x = ones({1000}).requires_grad_();
  Tensor y = dropout(x, 0.4, true, &gen);
  sum(y).backward();
  EXPECT_TRUE(all_close(x.grad(), y.detach(), 0, 0));
}

TEST(Dropout, GeneratorStateDecidesTheMask) {
  Tensor x = ones({256});
  Generator a(5), b(5);
  Tensor ya = dropout(x, 0.5, true, &a), yb = dropout(x, 0.5, true, &b);
  EXPECT_TRUE(all_close(ya, yb, 0, 0));
  // The counters advance: the next draw differs.
  EXPECT_FALSE(all_close(dropout(x, 0.5, true, &a), ya, 0, 0));
}

TEST(Dropout, RejectsBadProbability) {
  expect_error([] { dropout(ones({3}), -0.1, true); }, {"dropout", "[0, 1]", "-0.1"});
  expect_error([] { dropout(ones({3}), 1.5, true); }, {"dropout", "1.5"});
  expect_error([] { dropout(ones({3}, {.dtype = DType::i64}), 0.5, true); },
               {"dropout", "floating"});
}

// --- embedding ---

TEST(Embedding, GathersRows) {
  Tensor w = arange(12.0).reshape({4, 3});
  Tensor idx = from_vector<int64_t>({3, 1, 0, 3}, {2, 2});
  Tensor y = embedding(w, idx);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  EXPECT_TRUE(all_close(y, vec({9, 10, 11, 3, 4, 5, 0, 1, 2, 9, 10, 11}, {2, 2, 3}), 0, 0));
}

TEST(Embedding, RepeatedIndicesAccumulate) {
  Tensor w = zeros({4, 2}).requires_grad_();
  Tensor idx = from_vector<int64_t>({1, 2, 1, 1});
  sum(embedding(w, idx)).backward();
  EXPECT_TRUE(all_close(w.grad(), vec({0, 0, 3, 3, 1, 1, 0, 0}, {4, 2}), 0, 0));
}

TEST(Embedding, PaddingIdxGetsNoGradient) {
  for (int64_t pad : {1, -3}) {  // -3 is row 1 of 4
    Tensor w = ones({4, 2}).requires_grad_();
    Tensor idx = from_vector<int64_t>({1, 2, 1, 0});
    Tensor y = embedding(w, idx, pad);
    // The padding row still reads its values forward.
    EXPECT_TRUE(all_close(y, ones({4, 2}), 0, 0));
    sum(y).backward();
    EXPECT_TRUE(all_close(w.grad(), vec({1, 1, 0, 0, 1, 1, 0, 0}, {4, 2}), 0, 0)) << pad;
  }
}

TEST(Embedding, OutOfRangeIndexIsAClearError) {
  Tensor w = zeros({4, 3});
  expect_error(
      [&] {
        embedding(w, from_vector<int64_t>({0, 4}));
      },
      {"embedding", "index out of range", "[0, 4]", "4 rows"});
  expect_error(
      [&] {
        embedding(w, from_vector<int64_t>({-1, 2}));
      },
      {"embedding", "index out of range", "[-1, 2]"});
  // Regression: on CUDA, index 0 of a table without rows passed the device check (its skip value)
  // and gave a row of zeros. Refused on the host now, on every device.
  expect_error(
      [] {
        embedding(zeros({0, 3}), from_vector<int64_t>({0, 0}));
      },
      {"embedding", "the table has no rows", "2 indices"});
  EXPECT_EQ(embedding(zeros({0, 3}), zeros({0}, {.dtype = DType::i64})).shape(), (Shape{0, 3}));
}

TEST(Embedding, ErrorMessagesNameTheArguments) {
  expect_error([] { embedding(zeros({4}), from_vector<int64_t>({0})); },
               {"embedding", "2-D", "[4]"});
  // i32 indices are taken, as PyTorch takes them; floating ones are refused.
  EXPECT_EQ(embedding(ones({4, 2}), from_vector<int32_t>({3, 0})).shape(), (Shape{2, 2}));
  expect_error([] { embedding(zeros({4, 2}), zeros({1})); }, {"embedding", "i64 or i32", "f32"});
  expect_error(
      [] {
        embedding(zeros({4, 2}), from_vector<int64_t>({0}), 4);
      },
      {"embedding", "padding_idx 4", "4 rows"});
}

// --- CUDA against the CPU reference ---

void expect_same_on_cuda(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x,
                         double tol) {
  Tensor xc = x.detach().clone().requires_grad_();
  Tensor xg = x.detach().to(Device::cuda()).requires_grad_();
  testing::poison_cuda_cache();
  Tensor yc = fn(xc), yg = fn(xg);
  EXPECT_TRUE(all_close(yg.cpu(), yc, tol, tol)) << "forward";
  Generator gen(99);
  Tensor gy = randn(yc.shape(), {.dtype = x.dtype()}, &gen);
  sum(mul(yc, gy)).backward();
  sum(mul(yg, gy.to(Device::cuda()))).backward();
  EXPECT_TRUE(all_close(xg.grad().cpu(), xc.grad(), tol, tol)) << "backward";
}

TEST(CudaNorm, DropoutSameMaskAsCpu) {
  SINTER_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    Tensor x = randn({1000, 37}).to(dt);
    Generator gc(2024), gg(2024);
    Tensor yc = dropout(x, 0.35, true, &gc);
    Tensor yg = dropout(x.to(Device::cuda()), 0.35, true, &gg);
    EXPECT_TRUE(all_close(yg.cpu(), yc, 0, 0)) << dtype_name(dt);
  }
}

TEST(CudaNorm, BatchNormManyBlocksMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  Generator gen(testing::fresh_seed());
  Tensor x = add(mul(randn({16, 5, 33, 17}, {}, &gen), 3.0), 2.0);
  Tensor w = randn({5}, {}, &gen), b = randn({5}, {}, &gen);
  Tensor rmc = zeros({5}), rvc = ones({5});
  Tensor rmg = rmc.cuda(), rvg = rvc.cuda();
  Tensor wg = w.cuda(), bg = b.cuda();
  expect_same_on_cuda(
      [&](const Tensor& in) {
        return in.is_cuda() ? batch_norm(in, rmg, rvg, wg, bg, true)
                            : batch_norm(in, rmc, rvc, w, b, true);
      },
      x, 1e-4);
  EXPECT_TRUE(all_close(rmg.cpu(), rmc, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(rvg.cpu(), rvc, 1e-5, 1e-5));
  expect_same_on_cuda(
      [&](const Tensor& in) {
        return in.is_cuda() ? batch_norm(in, rmg, rvg, wg, bg, false)
                            : batch_norm(in, rmc, rvc, w, b, false);
      },
      x, 1e-4);
}

TEST(CudaNorm, LayerNormManyBlocksMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  Generator gen(testing::fresh_seed());
  Tensor x = add(randn({300, 1000}, {}, &gen), 1.0);
  Tensor w = randn({1000}, {}, &gen), b = randn({1000}, {}, &gen);
  Tensor wc = w.clone().requires_grad_(), bc = b.clone().requires_grad_();
  Tensor wg = w.cuda().requires_grad_(), bg = b.cuda().requires_grad_();
  expect_same_on_cuda(
      [&](const Tensor& in) {
        return in.is_cuda() ? layer_norm(in, {1000}, wg, bg) : layer_norm(in, {1000}, wc, bc);
      },
      x, 1e-4);
  EXPECT_TRUE(all_close(wg.grad().cpu(), wc.grad(), 1e-3, 1e-3));
  EXPECT_TRUE(all_close(bg.grad().cpu(), bc.grad(), 1e-3, 1e-3));
}

TEST(CudaNorm, EmbeddingMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  Tensor idx = randint(0, 50, {64, 9});
  Tensor w = randn({50, 24});
  Tensor ig = idx.cuda();
  expect_same_on_cuda([&](const Tensor& in) { return embedding(in, in.is_cuda() ? ig : idx, 3); },
                      w, 1e-5);
}

}  // namespace
}  // namespace sinter

// conv2d and pooling beyond the op table: a direct 7-loop convolution as the reference, output
// shapes, small known values, the argument checks, and CPU-vs-CUDA parity at sizes that span many
// tiles, several groups and a split weight-gradient reduction.
#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "op_table.h"
#include "sinter/autocast.h"

namespace sinter {
namespace {

using testing::all_close;

// y[b, co, oh, ow] = bias[co] + sum over (ci, i, j) of w[co, ci, i, j] * x[b, g * cig + ci, ih,
// iw], straight from the definition, in double.
std::vector<double> direct_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias,
                                  const Conv2dOptions& o, Shape* out_shape) {
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const std::vector<double> bv = bias.defined() ? bias.to_vector<double>() : std::vector<double>();
  const int64_t n = x.size(0), c_in = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t c_out = w.size(0), cig = w.size(1), kh = w.size(2), kw = w.size(3);
  const int64_t cog = c_out / o.groups;
  const int64_t h_out = (h + 2 * o.padding.h - o.dilation.h * (kh - 1) - 1) / o.stride.h + 1;
  const int64_t w_out = (wd + 2 * o.padding.w - o.dilation.w * (kw - 1) - 1) / o.stride.w + 1;
  *out_shape = {n, c_out, h_out, w_out};
  std::vector<double> y(static_cast<size_t>(n * c_out * h_out * w_out));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t co = 0; co < c_out; ++co) {
      const int64_t grp = co / cog;
      for (int64_t oh = 0; oh < h_out; ++oh) {
        for (int64_t ow = 0; ow < w_out; ++ow) {
          double s = bv.empty() ? 0.0 : bv[co];
          for (int64_t ci = 0; ci < cig; ++ci) {
            for (int64_t i = 0; i < kh; ++i) {
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t ih = oh * o.stride.h - o.padding.h + i * o.dilation.h;
                const int64_t iw = ow * o.stride.w - o.padding.w + j * o.dilation.w;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                const int64_t c = grp * cig + ci;
                s += wv[((co * cig + ci) * kh + i) * kw + j] *
                     xv[((b * c_in + c) * h + ih) * wd + iw];
              }
            }
          }
          y[((b * c_out + co) * h_out + oh) * w_out + ow] = s;
        }
      }
    }
  }
  return y;
}

struct ConvCase {
  Shape x, w;
  bool bias;
  Conv2dOptions opts;
};

TEST(ConvPool, Conv2dMatchesDirectLoops) {
  const std::vector<ConvCase> cases = {
      {{2, 3, 5, 6}, {4, 3, 3, 3}, true, {}},
      {{2, 4, 7, 6},
       {6, 2, 3, 2},
       true,
       {.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}, .groups = 2}},
      {{1, 6, 9, 8}, {6, 1, 3, 3}, false, {.stride = {2, 3}, .padding = {1, 1}, .groups = 6}},
      {{3, 2, 4, 4}, {5, 2, 1, 1}, true, {.padding = {2, 0}}},
      {{1, 3, 11, 10}, {2, 3, 2, 4}, false, {.stride = {3, 2}, .dilation = {3, 2}}},
      // Stride 1, outputs as wide as the inputs: shifted planes (3x3 "same", dilated, rows of
      // padding only, a 5x5 with groups).
      {{2, 3, 6, 7}, {4, 3, 3, 3}, true, {.padding = {1, 1}}},
      {{2, 3, 6, 7}, {4, 3, 3, 3}, true, {.padding = {2, 2}, .dilation = {2, 2}}},
      {{1, 2, 4, 5}, {3, 2, 3, 3}, false, {.padding = {3, 1}}},
      {{2, 4, 8, 9}, {6, 2, 5, 5}, true, {.padding = {2, 2}, .groups = 2}},
  };
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  for (const ConvCase& c : cases) {
    for (DType dt : {DType::f64, DType::f32}) {
      Tensor x = randn(c.x, {.dtype = dt}, &gen), w = randn(c.w, {.dtype = dt}, &gen);
      Tensor b = c.bias ? randn({c.w[0]}, {.dtype = dt}, &gen) : Tensor();
      Shape shape;
      const std::vector<double> expected = direct_conv2d(x, w, b, c.opts, &shape);
      Tensor y = conv2d(x, w, b, c.opts);
      const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
      EXPECT_TRUE(all_close(y, from_vector(expected, shape), tol, tol))
          << "x " << shape_str(c.x) << " w " << shape_str(c.w) << " " << dtype_name(dt);
    }
  }
}

TEST(ConvPool, Conv2dOutputShapes) {
  Tensor x = zeros({2, 4, 10, 9});
  EXPECT_EQ(conv2d(x, zeros({8, 4, 3, 3})).shape(), (Shape{2, 8, 8, 7}));
  EXPECT_EQ(conv2d(x, zeros({8, 4, 3, 3}), Tensor(), {.padding = {1, 1}}).shape(),
            (Shape{2, 8, 10, 9}));
  EXPECT_EQ(conv2d(x, zeros({8, 2, 3, 3}), Tensor(), {.stride = {2, 2}, .groups = 2}).shape(),
            (Shape{2, 8, 4, 4}));
  EXPECT_EQ(conv2d(x, zeros({8, 4, 3, 3}), Tensor(), {.dilation = {2, 3}}).shape(),
            (Shape{2, 8, 6, 3}));
  EXPECT_EQ(conv2d(x, zeros({3, 4, 10, 9})).shape(), (Shape{2, 3, 1, 1}));
}

TEST(ConvPool, Conv2dKnownValues) {
  // x: 1..16 in a 4x4 plane; a 2x2 kernel of ones sums each 2x2 window.
  std::vector<float> xs(16);
  for (int i = 0; i < 16; ++i) xs[i] = static_cast<float>(i + 1);
  Tensor x = from_vector(xs, {1, 1, 4, 4}).requires_grad_(true);
  Tensor w = ones({1, 1, 2, 2}).requires_grad_(true);
  Tensor b = full({1}, 0.5).requires_grad_(true);
  Tensor y = conv2d(x, w, b, {.stride = {2, 2}});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{14.5f, 22.5f, 46.5f, 54.5f}));
  y.sum().backward();
  // Stride 2 with a 2x2 kernel: every input in exactly one window.
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(16, 1.0f));
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{24, 28, 40, 44}));
  EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{4}));
}

TEST(ConvPool, Conv2dHalfTypesMatchF32) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  Tensor x = randn({2, 4, 7, 6}, {}, &gen), w = randn({6, 2, 3, 3}, {}, &gen);
  const Conv2dOptions o{.stride = {2, 1}, .padding = {1, 1}, .groups = 2};
  for (DType dt : {DType::bf16, DType::f16}) {
    Tensor xr = x.to(dt).to(DType::f32), wr = w.to(dt).to(DType::f32);
    Tensor y = conv2d(x.to(dt), w.to(dt), Tensor(), o);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_TRUE(all_close(y.to(DType::f32), conv2d(xr, wr, Tensor(), o), 2e-2, 1e-2))
        << dtype_name(dt);
  }
}

TEST(ConvPool, MaxPool2dKnownValuesAndIndices) {
  std::vector<float> xs(16);
  for (int i = 0; i < 16; ++i) xs[i] = static_cast<float>((i * 7) % 16);  // a permutation of 0..15
  Tensor x = from_vector(xs, {1, 1, 4, 4}).requires_grad_(true);
  auto [y, idx] = max_pool2d_with_indices(x, {2, 2});
  // Windows {0,7,12,3}, {14,5,10,1}, {8,15,4,11}, {6,13,2,9}.
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{12, 14, 15, 13}));
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{4, 2, 9, 11}));
  y.sum().backward();
  std::vector<float> expected(16, 0.0f);
  for (int64_t i : {4, 2, 9, 11}) expected[i] = 1.0f;
  EXPECT_EQ(x.grad().to_vector<float>(), expected);
}

TEST(ConvPool, MaxPool2dTiesAndNaN) {
  Tensor x = zeros({1, 1, 3, 3});
  auto [y, idx] = max_pool2d_with_indices(x, {2, 2}, {.stride = {1, 1}});
  // Ties: the first position of each window in row-major order.
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 3, 4}));
  std::vector<float> xs(9, 1.0f);
  xs[4] = std::numeric_limits<float>::quiet_NaN();
  Tensor yn = max_pool2d(from_vector(xs, {1, 3, 3}), {2, 2}, {.stride = {1, 1}});
  for (float v : yn.to_vector<float>()) EXPECT_TRUE(std::isnan(v));
}

// The f32 and bf16 kernels clip the edge windows once and run the inner ones a window element at a
// time across the output row; the f64 one checks each tap
// (kern::max_window_argmax): over geometries with padding, dilation and ceil_mode, and inputs with
// ties and NaN, the three pick the same element of every window.
TEST(ConvPool, MaxPool2dClippedWindowsPickAsEveryTapChecked) {
  Generator gen(21);
  // Values on a coarse grid (ties), a few NaN.
  Tensor x = div(randn({2, 3, 9, 8}, {}, &gen) * 2.0, 1.0, "floor");
  std::vector<float> xs = x.to_vector<float>();
  for (size_t i = 0; i < xs.size(); i += 37) xs[i] = std::numeric_limits<float>::quiet_NaN();
  x = from_vector(xs, {2, 3, 9, 8});
  int cases = 0;
  for (int64_t k : {1, 2, 3}) {
    for (int64_t stride : {1, 2, 3}) {
      for (int64_t pad = 0; pad <= k / 2; ++pad) {
        for (int64_t dil : {1, 2}) {
          for (bool ceil : {false, true}) {
            const MaxPool2dOptions o{.stride = {stride, stride + 1 - stride % 2},
                                     .padding = {pad, pad},
                                     .dilation = {dil, dil},
                                     .ceil_mode = ceil};
            auto [want_v, want_i] = max_pool2d_with_indices(x.to(DType::f64), {k, k + 1}, o);
            for (DType dt : {DType::f32, DType::bf16}) {
              auto [v, i] = max_pool2d_with_indices(x.to(dt), {k, k + 1}, o);
              SCOPED_TRACE("k " + std::to_string(k) + " stride " + std::to_string(stride) +
                           " pad " + std::to_string(pad) + " dil " + std::to_string(dil) +
                           " ceil " + std::to_string(ceil) + " " + dtype_name(dt));
              EXPECT_EQ(i.to_vector<int64_t>(), want_i.to_vector<int64_t>());
              EXPECT_TRUE(all_close(v.to(DType::f64), want_v.to(dt).to(DType::f64), 0, 0));
              ++cases;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 100);
}

// max_pool2d's input gradient is the sum of the gradients of the windows an element is the maximum
// of, from 0: with windows that cannot overlap (written directly) and with ones that can (summed),
// -0 comes out as +0 and the other values exactly, in every floating dtype.
TEST(ConvPool, MaxPool2dBackwardSumsFromZero) {
  Generator gen(8);
  const Tensor x = randn({2, 3, 6, 7}, {}, &gen);
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    for (int64_t stride : {1, 2, 3}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " stride " + std::to_string(stride));
      Tensor xt = x.to(dt).clone().requires_grad_();  // a leaf of its own (to() may return x)
      auto [y, idx] = max_pool2d_with_indices(xt, {2, 2}, {.stride = {stride, stride}});
      // -0 everywhere but one window's 1.5.
      std::vector<double> gv(static_cast<size_t>(y.numel()), -0.0);
      gv[5] = 1.5;
      y.backward(from_vector<double>(gv, y.shape()).to(dt));
      const std::vector<double> got = xt.grad().to(DType::f64).to_vector<double>();
      const std::vector<int64_t> picks = idx.to_vector<int64_t>();
      const int64_t plane = 6 * 7, outs = y.size(2) * y.size(3);
      std::vector<double> want(got.size(), 0.0);
      for (size_t o = 0; o < picks.size(); ++o) {
        want[static_cast<size_t>(static_cast<int64_t>(o) / outs * plane + picks[o])] += gv[o];
      }
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], want[i]) << "element " << i;
        ASSERT_FALSE(std::signbit(got[i])) << "element " << i << " is -0";
      }
    }
  }
}

TEST(ConvPool, MaxPool2dPaddingNeverWins) {
  // All inputs negative: a padded position (as if 0) must never be the maximum.
  Tensor x = full({1, 1, 3, 3}, -5.0);
  auto [y, idx] = max_pool2d_with_indices(x, {3, 3}, {.stride = {2, 2}, .padding = {1, 1}});
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(4, -5.0f));
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 3, 4}));
}

TEST(ConvPool, PoolOutputShapes) {
  Tensor x = zeros({2, 3, 7, 6});
  EXPECT_EQ(max_pool2d(x, {2, 2}).shape(), (Shape{2, 3, 3, 3}));
  EXPECT_EQ(max_pool2d(x, {2, 2}, {.ceil_mode = true}).shape(), (Shape{2, 3, 4, 3}));
  EXPECT_EQ(max_pool2d(x, {3, 3}, {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}).shape(),
            (Shape{2, 3, 4, 4}));
  // ceil_mode drops a last window that would start inside the right padding: along W (5, padding
  // 1, k 2, s 2) a 4th window would start at 3 * 2 - 1 = 5, past the input; along H (6) it starts
  // at 5, inside the input, and stays.
  EXPECT_EQ(avg_pool2d(zeros({1, 1, 6, 5}), {2, 2},
                       {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true})
                .shape(),
            (Shape{1, 1, 4, 3}));
  EXPECT_EQ(max_pool2d(x, {2, 2}, {.stride = {1, 1}, .dilation = {2, 2}}).shape(),
            (Shape{2, 3, 5, 4}));
  EXPECT_EQ(avg_pool2d(zeros({3, 7, 6}), {3, 2}).shape(), (Shape{3, 2, 3}));
  EXPECT_EQ(adaptive_avg_pool2d(x, {5, 4}).shape(), (Shape{2, 3, 5, 4}));
  EXPECT_EQ(adaptive_avg_pool2d(zeros({3, 7, 6}), {1, 1}).shape(), (Shape{3, 1, 1}));
}

// Over every small square geometry: max_pool2d refuses exactly those with a window that no input
// element falls in (counted tap by tap here), and every window it accepts takes an input element.
TEST(ConvPool, MaxPoolRefusesExactlyTheEmptyWindows) {
  int accepted = 0, refused = 0;
  for (int64_t in = 1; in <= 6; ++in) {
    Tensor x = add(arange(0.0, static_cast<double>(in * in)).reshape({1, 1, in, in}), 1.0);
    for (int64_t k = 1; k <= 4; ++k)
      for (int64_t s = 1; s <= 3; ++s)
        for (int64_t p = 0; p <= k / 2; ++p)
          for (int64_t d = 1; d <= 4; ++d)
            for (bool ceil_mode : {false, true}) {
              const MaxPool2dOptions o{
                  .stride = {s, s}, .padding = {p, p}, .dilation = {d, d}, .ceil_mode = ceil_mode};
              Tensor y, idx;
              try {
                std::tie(y, idx) = max_pool2d_with_indices(x, {k, k}, o);
              } catch (const Error& e) {
                if (std::string(e.what()).find("too small") != std::string::npos) continue;
                EXPECT_NE(std::string(e.what()).find("holds no input element"), std::string::npos)
                    << e.what();
              }
              bool empty = false;
              const int64_t out = y.defined() ? y.size(-1) : 0;
              for (int64_t w = 0; w < (y.defined() ? out : 64) && !empty; ++w) {
                bool any = false;
                for (int64_t i = 0; i < k; ++i) {
                  const int64_t tap = w * s - p + i * d;
                  any = any || (tap >= 0 && tap < in);
                }
                // Without an output, only the windows before the refused one count.
                if (y.defined() || w * s - p < in) empty = empty || !any;
              }
              SCOPED_TRACE(::testing::Message() << "in " << in << " k " << k << " s " << s << " p "
                                                << p << " d " << d << " ceil " << ceil_mode);
              if (!y.defined()) {
                ++refused;
                EXPECT_TRUE(empty);
                continue;
              }
              ++accepted;
              EXPECT_FALSE(empty);
              for (float v : y.to_vector<float>()) EXPECT_GE(v, 1.0f);
              for (int64_t j : idx.to_vector<int64_t>()) EXPECT_TRUE(j >= 0 && j < in * in);
            }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(accepted, 500);
}

TEST(ConvPool, AvgPool2dDivisors) {
  Tensor x = ones({1, 1, 3, 3});
  const AvgPool2dOptions inc{.stride = {1, 1}, .padding = {1, 1}};
  AvgPool2dOptions exc = inc;
  exc.count_include_pad = false;
  // Corners see 4 of 9 elements, edges 6, the centre 9.
  const std::vector<float> with_pad = avg_pool2d(x, 3, inc).to_vector<float>();
  const std::vector<float> expected = {4 / 9.f, 6 / 9.f, 4 / 9.f, 6 / 9.f, 1.f,
                                       6 / 9.f, 4 / 9.f, 6 / 9.f, 4 / 9.f};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(with_pad[i], expected[i], 1e-6);
  for (float v : avg_pool2d(x, 3, exc).to_vector<float>()) EXPECT_NEAR(v, 1.0f, 1e-6);
  // ceil_mode: the last window of 5 hangs past the input with no padding; it averages what is
  // there.
  Tensor y = avg_pool2d(ones({1, 1, 5, 5}), {2, 2}, {.ceil_mode = true});
  EXPECT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  for (float v : y.to_vector<float>()) EXPECT_NEAR(v, 1.0f, 1e-6);
}

TEST(ConvPool, AdaptiveAvgPool2dKnownValues) {
  // One row 0..4 pooled to 3 columns: windows [0, 2), [1, 4), [3, 5).
  Tensor x = from_vector(std::vector<float>{0, 1, 2, 3, 4}, {1, 1, 1, 5}).requires_grad_(true);
  Tensor y = adaptive_avg_pool2d(x, {1, 3});
  const std::vector<float> yv = y.to_vector<float>();
  EXPECT_NEAR(yv[0], 0.5f, 1e-6);
  EXPECT_NEAR(yv[1], 2.0f, 1e-6);
  EXPECT_NEAR(yv[2], 3.5f, 1e-6);
  y.sum().backward();
  const std::vector<float> gv = x.grad().to_vector<float>();
  const std::vector<float> expected = {0.5f, 0.5f + 1 / 3.f, 1 / 3.f, 1 / 3.f + 0.5f, 0.5f};
  for (size_t i = 0; i < gv.size(); ++i) EXPECT_NEAR(gv[i], expected[i], 1e-6);
}

TEST(ConvPool, AdaptiveAvgPool2dEqualsAvgPoolWhenDivisible) {
  Tensor x = randn({2, 3, 6, 8}, {.dtype = DType::f64});
  EXPECT_TRUE(all_close(adaptive_avg_pool2d(x, {3, 4}), avg_pool2d(x, {2, 2}), 1e-12, 1e-12));
}

// Adaptive average pooling in 1-D and 3-D, and interpolate's area mode, against the windows written
// out: output i of `out` over `in` averages inputs [floor(i in / out), ceil((i + 1) in / out)).
TEST(ConvPool, AdaptiveAvgPool1dAnd3dAverageTheirWindows) {
  const auto lo = [](int64_t i, int64_t in, int64_t out) { return i * in / out; };
  const auto hi = [](int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; };
  const Tensor x = randn({2, 3, 5, 4, 7}, {.dtype = DType::f64});
  const Tensor y = adaptive_avg_pool3d(x, {3, 3, 2});
  ASSERT_EQ(y.shape(), (Shape{2, 3, 3, 3, 2}));
  const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  size_t at = 0;
  for (int64_t p = 0; p < 6; ++p) {
    for (int64_t d = 0; d < 3; ++d) {
      for (int64_t h = 0; h < 3; ++h) {
        for (int64_t w = 0; w < 2; ++w) {
          double sum = 0;
          int64_t count = 0;
          for (int64_t i = lo(d, 5, 3); i < hi(d, 5, 3); ++i) {
            for (int64_t j = lo(h, 4, 3); j < hi(h, 4, 3); ++j) {
              for (int64_t k = lo(w, 7, 2); k < hi(w, 7, 2); ++k, ++count) {
                sum += xv[static_cast<size_t>(((p * 5 + i) * 4 + j) * 7 + k)];
              }
            }
          }
          EXPECT_NEAR(yv[at++], sum / static_cast<double>(count), 1e-12);
        }
      }
    }
  }
  // 1-D: a row of 0..4 to 3 outputs, as adaptive_avg_pool2d's known values.
  const Tensor row = from_vector(std::vector<float>{0, 1, 2, 3, 4}, {1, 5});
  EXPECT_EQ(adaptive_avg_pool1d(row, 3).to_vector<float>(), (std::vector<float>{0.5f, 2, 3.5f}));
  // Area is the adaptive pooling to the output size.
  EXPECT_TRUE(
      all_close(interpolate(x, {.size = {3, 3, 2}, .mode = InterpolateMode::Area}), y, 0, 0));
  const Tensor x2 = randn({2, 3, 7, 5}, {.dtype = DType::f64});
  EXPECT_TRUE(all_close(interpolate(x2, {.scale_factor = {0.5}, .mode = InterpolateMode::Area}),
                        adaptive_avg_pool2d(x2, {3, 2}), 0, 0));
  // Under the CPU's bf16 autocast, area takes the adaptive pools' policies, as in PyTorch: the
  // 3-D pool in f32, the 2-D one in its input's dtype.
  const autocast::Guard amp(DeviceType::cpu, DType::bf16);
  const InterpolateOptions area{.size = {2}, .mode = InterpolateMode::Area};
  EXPECT_EQ(interpolate(x.to(DType::bf16), area).dtype(), DType::f32);
  EXPECT_EQ(interpolate(x2.to(DType::bf16), area).dtype(), DType::bf16);
}

using ::sinter::testing::expect_error;

TEST(ConvPoolErrors, Conv2dArguments) {
  Tensor x = zeros({2, 4, 6, 6}), w = zeros({6, 2, 3, 3});
  // conv2d(x, w) with options `o`, to call in expect_error.
  auto conv_x_w = [&](Conv2dOptions o) { return [&, o] { conv2d(x, w, Tensor(), o); }; };
  expect_error(
      [&] {
        conv2d(zeros({4, 6, 6}), w);
      },
      {"conv2d", "input must be 4-D (N, C, H, W)", "[4, 6, 6]"});
  expect_error([&] { conv2d(x, zeros({6, 2, 3})); }, {"conv2d", "weight must be 4-D", "[6, 2, 3]"});
  expect_error([&] { conv2d(x, w); }, {"conv2d", "4 channels", "groups 1", "expects 2"});
  expect_error(
      [&] {
        conv2d(x, zeros({5, 2, 3, 3}), Tensor(), {.groups = 2});
      },
      {"conv2d", "output channels 5", "not divisible by groups 2"});
  expect_error(conv_x_w({.groups = 0}), {"conv2d", "groups", "got 0"});
  expect_error(conv_x_w({.stride = {0, 1}, .groups = 2}),
               {"conv2d", "stride must be positive", "(0, 1)"});
  expect_error(conv_x_w({.padding = {-1, 0}, .groups = 2}),
               {"conv2d", "padding must be non-negative", "(-1, 0)"});
  expect_error(conv_x_w({.dilation = {1, 0}, .groups = 2}),
               {"conv2d", "dilation must be positive", "(1, 0)"});
  expect_error(
      [&] {
        conv2d(x, zeros({6, 2, 7, 3}), Tensor(), {.groups = 2});
      },
      {"conv2d", "kernel 7x3", "larger than the padded input 6x6"});
  expect_error(conv_x_w({.dilation = {3, 1}, .groups = 2}),
               {"conv2d", "kernel 7x3", "dilation (3, 1)"});
  expect_error([&] { conv2d(x, w, zeros({5}), {.groups = 2}); },
               {"conv2d", "bias must have shape [6]", "[5]"});
  expect_error([&] { conv2d(x, w.to(DType::f64), Tensor(), {.groups = 2}); },
               {"conv2d", "dtype", "f64"});
  expect_error([&] { conv2d(x.to(DType::i64), w.to(DType::i64), Tensor(), {.groups = 2}); },
               {"conv2d", "floating"});
}

TEST(ConvPoolErrors, PoolArguments) {
  Tensor x = zeros({1, 2, 5, 5});
  // max_pool2d(x, {2, 2}) with options `o`, to call in expect_error.
  auto max_pool_x = [&](MaxPool2dOptions o) { return [&, o] { max_pool2d(x, {2, 2}, o); }; };
  expect_error(
      [&] {
        max_pool2d(zeros({5, 5}), {2, 2});
      },
      {"max_pool2d", "3-D (C, H, W) or 4-D (N, C, H, W)", "[5, 5]"});
  expect_error(
      [&] {
        avg_pool2d(x, {0, 2});
      },
      {"avg_pool2d", "kernel_size must be positive", "(0, 2)"});
  expect_error(max_pool_x({.stride = {-1, 1}}),
               {"max_pool2d", "stride must be positive", "(-1, 1)"});
  expect_error(max_pool_x({.padding = {2, 0}}),
               {"max_pool2d", "at most half the kernel size", "(2, 0)"});
  expect_error(max_pool_x({.dilation = {0, 1}}), {"max_pool2d", "dilation must be positive"});
  expect_error(
      [&] {
        max_pool2d(x, {6, 2});
      },
      {"max_pool2d", "too small", "[1, 2, 5, 5]", "output would be 0x"});
  // Dilation can step over the whole input: taps at -1 and 1 of a 1-wide input (both backends
  // read the element before the plane and stored index -1 before this was refused).
  expect_error(
      [&] {
        max_pool2d(zeros({1, 1, 1, 1}), {2, 2}, {.padding = {1, 1}, .dilation = {2, 2}});
      },
      {"max_pool2d", "output row 0 holds no input element", "[1, 1, 1, 1]", "dilation (2, 2)"});
  expect_error(
      [&] {
        max_pool2d(zeros({1, 1, 4, 2}), {2, 2}, {.padding = {0, 1}, .dilation = {1, 3}});
      },
      {"max_pool2d", "output column 0 holds no input element"});
  expect_error([&] { avg_pool2d(x.to(DType::i32), {2, 2}); }, {"avg_pool2d", "floating"});
  expect_error(
      [&] {
        adaptive_avg_pool2d(x, {0, 2});
      },
      {"adaptive_avg_pool2d", "output_size must be positive", "(0, 2)"});
  expect_error(
      [&] {
        adaptive_avg_pool2d(zeros({1, 2, 0, 5}), {1, 1});
      },
      {"adaptive_avg_pool2d", "empty spatial dim"});
  expect_error(
      [&] {
        adaptive_avg_pool1d(zeros({2, 3, 4, 5}), 2);
      },
      {"adaptive_avg_pool1d", "2-D (C, L) or 3-D (N, C, L)"});
  expect_error(
      [&] {
        adaptive_avg_pool3d(zeros({1, 2, 3, 4, 5}), {0, 1, 1});
      },
      {"adaptive_avg_pool3d", "output_size must be positive"});
  expect_error(
      [&] {
        adaptive_avg_pool3d(zeros({2, 3, 4}), {1, 1, 1});
      },
      {"adaptive_avg_pool3d", "4-D (C, D, H, W) or 5-D"});
  expect_error(
      [&] {
        interpolate(zeros({1, 1, 4}),
                    {.size = {2}, .mode = InterpolateMode::Area, .align_corners = true});
      },
      {"interpolate", "align_corners", "area"});
}

// --- CPU vs CUDA at sizes that span many tiles ---

// max |actual - expected| <= tol * max |expected|. The error of a long dot product on rounded
// inputs (TF32) grows with the sum of the terms' magnitudes, not with each result, so a result
// that cancels to near zero keeps the absolute error of its large terms.
::testing::AssertionResult close_to_scale(const Tensor& actual, const Tensor& expected,
                                          double tol) {
  if (actual.shape() != expected.shape()) return ::testing::AssertionFailure() << "shape";
  const std::vector<double> a = actual.to_vector<double>(), b = expected.to_vector<double>();
  double scale = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(b[i]));
    const double d = std::abs(a[i] - b[i]);
    if (!(d <= worst)) {  // NaN is the worst
      worst = d;
      at = i;
    }
  }
  if (worst <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << at << ": " << a[at] << " vs expected " << b[at] << ", beyond " << tol
         << " x max |expected| " << scale;
}

// sum(f(inputs) * wgt) backward on both devices; compares the outputs and every input gradient,
// elementwise (atol = rtol = tol) or, when scaled, with close_to_scale.
void expect_parity(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                   const std::vector<Shape>& shapes, DType dt, double tol, uint64_t seed,
                   bool scaled = false) {
  const auto close = [&](const Tensor& a, const Tensor& b) {
    return scaled ? close_to_scale(a, b, tol) : all_close(a, b, tol, tol);
  };
  Generator gen(seed);
  std::vector<Tensor> cpu_in, gpu_in;
  for (const Shape& s : shapes) {
    Tensor t = randn(s, {.dtype = dt}, &gen);
    cpu_in.push_back(t.clone().requires_grad_(true));
    gpu_in.push_back(t.to(Device::cuda()).requires_grad_(true));
  }
  testing::poison_cuda_cache();
  Tensor yc = f(cpu_in), yg = f(gpu_in);
  ASSERT_EQ(yg.device(), Device::cuda());
  EXPECT_TRUE(close(yg.cpu(), yc)) << "forward, " << dtype_name(dt);
  Tensor wgt = randn(yc.shape(), {.dtype = dt}, &gen);
  testing::poison_cuda_cache();
  sum(mul(yc, wgt)).backward();
  sum(mul(yg, wgt.to(Device::cuda()))).backward();
  for (size_t k = 0; k < shapes.size(); ++k) {
    EXPECT_TRUE(close(gpu_in[k].grad().cpu(), cpu_in[k].grad()))
        << "gradient of input " << k << ", " << dtype_name(dt);
  }
}

// f32 tolerance for reductions of a few hundred to a few thousand terms; bf16/f16 round the
// result once on both sides, so they differ by about one unit in the last place.
const testing::DTypeTolerances tol_for{.f64 = 1e-10, .f32 = 1e-3, .f16 = 2e-2, .bf16 = 5e-2};

// conv2d (with bias when the case has one) through expect_parity, each case with a fresh seed.
void conv_parity(const std::vector<ConvCase>& cases, DType dt, double tol, bool scaled) {
  for (const ConvCase& c : cases) {
    const uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("x " + shape_str(c.x) + " w " + shape_str(c.w) + " seed " + std::to_string(seed));
    std::vector<Shape> shapes = {c.x, c.w};
    if (c.bias) shapes.push_back({c.w[0]});
    expect_parity(testing::conv2d_of(c.opts), shapes, dt, tol, seed, scaled);
  }
}

TEST(CudaConvPool, Conv2dMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  const std::vector<ConvCase> cases = {
      {{4, 16, 28, 28}, {32, 8, 3, 3}, true, {.stride = {2, 2}, .padding = {1, 1}, .groups = 2}},
      {{4, 16, 28, 28}, {24, 16, 3, 3}, false, {.padding = {2, 2}, .dilation = {2, 2}}},
      {{3, 12, 15, 13},
       {20, 6, 5, 3},
       true,
       {.stride = {2, 1}, .padding = {2, 1}, .dilation = {1, 2}, .groups = 2}},
      {{2, 32, 9, 11}, {32, 1, 3, 3}, true, {.padding = {1, 1}, .groups = 32}},
      {{4, 70, 7, 7}, {130, 70, 1, 1}, true, {}},
      // K of the weight gradient = 32 * 16 * 16: the reduction is split over blocks.
      {{32, 8, 16, 16}, {16, 8, 3, 3}, true, {.padding = {1, 1}}},
  };
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    conv_parity(cases, dt, tol_for(dt), false);
  }
}

// The layers of the cnn and resnet20 reference workloads (with smaller batches) and ragged
// channel counts, which the tensor-core kernels take in bf16 and f16, and in f32 under
// set_matmul_precision("high").
std::vector<ConvCase> tensor_core_cases() {
  const Conv2dOptions same{.padding = {1, 1}}, down{.stride = {2, 2}, .padding = {1, 1}};
  const Conv2dOptions shortcut{.stride = {2, 2}};
  return {
      // cnn
      {{16, 1, 28, 28}, {32, 1, 3, 3}, true, same},
      {{16, 32, 14, 14}, {64, 32, 3, 3}, true, same},
      // resnet20
      {{8, 3, 32, 32}, {16, 3, 3, 3}, false, same},
      {{8, 16, 32, 32}, {16, 16, 3, 3}, false, same},
      {{8, 16, 32, 32}, {32, 16, 3, 3}, false, down},
      {{8, 16, 32, 32}, {32, 16, 1, 1}, false, shortcut},
      {{8, 32, 16, 16}, {32, 32, 3, 3}, false, same},
      {{8, 32, 16, 16}, {64, 32, 3, 3}, false, down},
      {{8, 32, 16, 16}, {64, 32, 1, 1}, false, shortcut},
      {{8, 64, 8, 8}, {64, 64, 3, 3}, false, same},
      // ragged: C = 1 and 3, K = 10, odd planes, stride / dilation / groups / asymmetric kernels
      {{3, 1, 9, 7}, {10, 1, 3, 3}, true, same},
      {{2, 3, 11, 13}, {10, 3, 5, 3}, true, {.stride = {2, 1}, .padding = {2, 1}}},
      {{2, 6, 10, 9},
       {10, 3, 3, 2},
       true,
       {.stride = {1, 2}, .padding = {2, 0}, .dilation = {2, 1}, .groups = 2}},
      {{2, 10, 7, 7}, {10, 1, 3, 3}, false, {.padding = {1, 1}, .groups = 10}},
      {{5, 130, 5, 5}, {70, 130, 1, 1}, true, {}},
  };
}

TEST(CudaConvPool, Conv2dTensorCoreBf16F16) {
  SINTER_REQUIRE_CUDA();
  // Both sides multiply the same rounded inputs exactly and sum in f32; they differ by the order
  // of the sums and the final rounding.
  conv_parity(tensor_core_cases(), DType::bf16, tol_for(DType::bf16), false);
  conv_parity(tensor_core_cases(), DType::f16, tol_for(DType::f16), false);
}

TEST(CudaConvPool, Conv2dTensorCoreTf32) {
  SINTER_REQUIRE_CUDA();
  // Restores the default precision however the test ends.
  struct Precision {
    Precision() { set_matmul_precision("high"); }
    ~Precision() { set_matmul_precision("highest"); }
  } precision;
  // TF32 keeps 11 significant bits: each product is off by up to 2^-10 of its size, and the sum of
  // those errors stays well under 1e-3 of the largest result for random inputs.
  conv_parity(tensor_core_cases(), DType::f32, 2e-3, true);
}

TEST(CudaConvPool, PoolsMatchCpu) {
  SINTER_REQUIRE_CUDA();
  using testing::adaptive_pool_of;
  using testing::avg_pool_of;
  using testing::max_pool_of;
  const std::vector<std::pair<std::string, testing::OpFn>> ops = {
      {"max 3x3 s2 p1 ceil",
       max_pool_of({3, 3}, {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true})},
      {"max 2x3 dilated", max_pool_of({2, 3}, {.stride = {1, 2}, .dilation = {2, 2}})},
      {"avg 3x3 s2 p1 ceil",
       avg_pool_of({3, 3}, {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true})},
      {"avg 3x2 s2 p1 exclude pad",
       avg_pool_of({3, 2}, {.stride = {2, 2}, .padding = {1, 1}, .count_include_pad = false})},
      {"adaptive 5x3", adaptive_pool_of({5, 3})},
      {"adaptive 40x30", adaptive_pool_of({40, 30})},
  };
  for (const auto& [name, f] : ops) {
    const uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE(name + ", seed " + std::to_string(seed));
    for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
      expect_parity(f, {Shape{4, 16, 29, 27}}, dt, tol_for(dt), seed);
    }
  }
}

TEST(CudaConvPool, MaxPool2dIndicesMatchCpu) {
  SINTER_REQUIRE_CUDA();
  Tensor x = randn({4, 16, 29, 27});
  const MaxPool2dOptions o{
      .stride = {2, 2}, .padding = {1, 1}, .dilation = {1, 2}, .ceil_mode = true};
  auto [yc, ic] = max_pool2d_with_indices(x, 3, o);
  auto [yg, ig] = max_pool2d_with_indices(x.cuda(), 3, o);
  EXPECT_EQ(ig.cpu().to_vector<int64_t>(), ic.to_vector<int64_t>());
  EXPECT_EQ(yg.cpu().to_vector<float>(), yc.to_vector<float>());
}

}  // namespace
}  // namespace sinter

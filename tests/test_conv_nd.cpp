// conv1d, conv3d, the transposed convolutions, padding="same", pad() and index_add beyond the op
// table: direct loops over the definitions as references (every geometry as a 3-D one, the missing
// spatial dims of size 1), PyTorch's values for small cases, and the argument checks.
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "op_table.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;

// A convolution's options in (D, H, W) order; 1-D and 2-D ones leave the leading dims at 1 / 0.
struct Geom {
  std::array<int64_t, 3> stride{1, 1, 1}, pad{0, 0, 0}, dil{1, 1, 1}, out_pad{0, 0, 0};
  int64_t groups = 1;
};

// x and w with 5 dims: (N, C, *spatial) padded with 1s after the channels.
Tensor as_5d(const Tensor& t) {
  Shape s = t.shape();
  while (s.size() < 5) s.insert(s.begin() + 2, 1);
  return t.reshape(s);
}

int64_t at5(const Shape& s, int64_t a, int64_t b, int64_t d, int64_t h, int64_t w) {
  return (((a * s[1] + b) * s[2] + d) * s[3] + h) * s[4] + w;
}

// y[n, co, o] = bias[co] + sum over (ci, k) of w[co, ci, k] * x[n, group * cig + ci, o * stride -
// pad + k * dil], straight from the definition, in double; x and w 5-D.
Tensor direct_conv(const Tensor& x, const Tensor& w, const Tensor& bias, const Geom& g) {
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const std::vector<double> bv = bias.defined() ? bias.to_vector<double>() : std::vector<double>();
  const Shape xs = x.shape(), ws = w.shape();
  Shape ys{xs[0], ws[0], 0, 0, 0};
  for (int d = 0; d < 3; ++d) {
    ys[2 + d] = (xs[2 + d] + 2 * g.pad[d] - g.dil[d] * (ws[2 + d] - 1) - 1) / g.stride[d] + 1;
  }
  std::vector<double> y(numel_of(ys));
  const int64_t cog = ws[0] / g.groups, cig = ws[1];
  for (int64_t n = 0; n < ys[0]; ++n)
    for (int64_t co = 0; co < ys[1]; ++co)
      for (int64_t od = 0; od < ys[2]; ++od)
        for (int64_t oh = 0; oh < ys[3]; ++oh)
          for (int64_t ow = 0; ow < ys[4]; ++ow) {
            double s = bv.empty() ? 0.0 : bv[co];
            for (int64_t ci = 0; ci < cig; ++ci)
              for (int64_t kd = 0; kd < ws[2]; ++kd)
                for (int64_t kh = 0; kh < ws[3]; ++kh)
                  for (int64_t kw = 0; kw < ws[4]; ++kw) {
                    const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dil[0];
                    const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
                    const int64_t iw = ow * g.stride[2] - g.pad[2] + kw * g.dil[2];
                    if (id < 0 || id >= xs[2] || ih < 0 || ih >= xs[3] || iw < 0 || iw >= xs[4])
                      continue;
                    s += wv[at5(ws, co, ci, kd, kh, kw)] *
                         xv[at5(xs, n, co / cog * cig + ci, id, ih, iw)];
                  }
            y[at5(ys, n, co, od, oh, ow)] = s;
          }
  return from_vector(y, ys);
}

// The transposed convolution by its definition, scattering: x[n, ci, i] * w[ci, co, k] lands on
// y[n, group * cog + co, i * stride - pad + k * dil]; w is (C_in, C_out / groups, *kernel).
Tensor direct_conv_transpose(const Tensor& x, const Tensor& w, const Tensor& bias, const Geom& g) {
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const Shape xs = x.shape(), ws = w.shape();
  Shape ys{xs[0], ws[1] * g.groups, 0, 0, 0};
  for (int d = 0; d < 3; ++d) {
    ys[2 + d] = (xs[2 + d] - 1) * g.stride[d] - 2 * g.pad[d] + g.dil[d] * (ws[2 + d] - 1) +
                g.out_pad[d] + 1;
  }
  std::vector<double> y(numel_of(ys), 0.0);
  const int64_t cig = xs[1] / g.groups, cog = ws[1];
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t ci = 0; ci < xs[1]; ++ci)
      for (int64_t id = 0; id < xs[2]; ++id)
        for (int64_t ih = 0; ih < xs[3]; ++ih)
          for (int64_t iw = 0; iw < xs[4]; ++iw)
            for (int64_t co = 0; co < cog; ++co)
              for (int64_t kd = 0; kd < ws[2]; ++kd)
                for (int64_t kh = 0; kh < ws[3]; ++kh)
                  for (int64_t kw = 0; kw < ws[4]; ++kw) {
                    const int64_t od = id * g.stride[0] - g.pad[0] + kd * g.dil[0];
                    const int64_t oh = ih * g.stride[1] - g.pad[1] + kh * g.dil[1];
                    const int64_t ow = iw * g.stride[2] - g.pad[2] + kw * g.dil[2];
                    if (od < 0 || od >= ys[2] || oh < 0 || oh >= ys[3] || ow < 0 || ow >= ys[4])
                      continue;
                    y[at5(ys, n, ci / cig * cog + co, od, oh, ow)] +=
                        xv[at5(xs, n, ci, id, ih, iw)] * wv[at5(ws, ci, co, kd, kh, kw)];
                  }
  Tensor out = from_vector(y, ys);
  return bias.defined() ? add(out, bias.to(DType::f64).reshape({1, ys[1], 1, 1, 1})) : out;
}

// One case: the op on x (rank 3, 4 or 5) and w, and the reference on their 5-D forms.
struct Case {
  Shape x, w;
  bool bias;
  Geom g;
  bool transposed;
};

// The op the case names, by rank and kind, with the case's options.
Tensor run_case(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  const Geom& g = c.g;
  const size_t rank = c.x.size();
  if (!c.transposed) {
    if (rank == 3) {
      return conv1d(
          x, w, b,
          {.stride = g.stride[2], .padding = g.pad[2], .dilation = g.dil[2], .groups = g.groups});
    }
    if (rank == 4) {
      return conv2d(x, w, b,
                    {.stride = {g.stride[1], g.stride[2]},
                     .padding = {g.pad[1], g.pad[2]},
                     .dilation = {g.dil[1], g.dil[2]},
                     .groups = g.groups});
    }
    return conv3d(x, w, b,
                  {.stride = {g.stride[0], g.stride[1], g.stride[2]},
                   .padding = {g.pad[0], g.pad[1], g.pad[2]},
                   .dilation = {g.dil[0], g.dil[1], g.dil[2]},
                   .groups = g.groups});
  }
  if (rank == 3) {
    return conv_transpose1d(x, w, b,
                            {.stride = g.stride[2],
                             .padding = g.pad[2],
                             .output_padding = g.out_pad[2],
                             .groups = g.groups,
                             .dilation = g.dil[2]});
  }
  if (rank == 4) {
    return conv_transpose2d(x, w, b,
                            {.stride = {g.stride[1], g.stride[2]},
                             .padding = {g.pad[1], g.pad[2]},
                             .output_padding = {g.out_pad[1], g.out_pad[2]},
                             .groups = g.groups,
                             .dilation = {g.dil[1], g.dil[2]}});
  }
  return conv_transpose3d(x, w, b,
                          {.stride = {g.stride[0], g.stride[1], g.stride[2]},
                           .padding = {g.pad[0], g.pad[1], g.pad[2]},
                           .output_padding = {g.out_pad[0], g.out_pad[1], g.out_pad[2]},
                           .groups = g.groups,
                           .dilation = {g.dil[0], g.dil[1], g.dil[2]}});
}

std::vector<Case> cases() {
  return {
      // conv1d
      {{2, 4, 9}, {6, 2, 3}, true, {.stride = {1, 1, 2}, .pad = {0, 0, 1}, .groups = 2}, false},
      {{1, 3, 11}, {2, 3, 4}, false, {.pad = {0, 0, 3}, .dil = {1, 1, 2}}, false},
      // conv3d: strides, padding and dilation in each dim, groups, a kernel of depth 1
      {{2, 2, 4, 5, 4},
       {3, 2, 2, 3, 2},
       true,
       {.stride = {2, 1, 1}, .pad = {1, 1, 0}, .dil = {1, 1, 2}},
       false},
      {{1, 4, 5, 4, 4}, {4, 2, 3, 3, 3}, false, {.pad = {1, 1, 1}, .groups = 2}, false},
      {{2, 3, 3, 4, 5}, {2, 3, 1, 2, 2}, true, {.stride = {1, 2, 2}}, false},
      {{1, 2, 7, 3, 3}, {2, 2, 3, 1, 1}, false, {.stride = {3, 1, 1}, .dil = {2, 1, 1}}, false},
      // conv_transpose1d
      {{2, 3, 5},
       {3, 2, 3},
       true,
       {.stride = {1, 1, 3}, .pad = {0, 0, 1}, .out_pad = {0, 0, 2}},
       true},
      {{1, 4, 4}, {4, 1, 2}, false, {.dil = {1, 1, 3}, .out_pad = {0, 0, 2}, .groups = 2}, true},
      // conv_transpose2d: stride, padding, output padding below the stride and (stride 1) below
      // the dilation, groups
      {{2, 4, 3, 4},
       {4, 3, 3, 3},
       true,
       {.stride = {1, 2, 2}, .pad = {0, 1, 1}, .out_pad = {0, 1, 1}, .groups = 2},
       true},
      {{1, 2, 3, 3}, {2, 3, 2, 3}, false, {.dil = {1, 2, 1}, .out_pad = {0, 1, 0}}, true},
      {{2, 3, 4, 2}, {3, 5, 1, 3}, true, {.stride = {1, 3, 1}, .pad = {0, 0, 1}}, true},
      // conv_transpose3d
      {{1, 2, 2, 3, 2},
       {2, 2, 2, 2, 3},
       true,
       {.stride = {2, 1, 2}, .pad = {1, 0, 1}, .out_pad = {1, 0, 0}},
       true},
      {{2, 4, 3, 2, 2},
       {4, 1, 3, 2, 2},
       false,
       {.stride = {1, 2, 1}, .pad = {1, 0, 0}, .dil = {2, 1, 1}, .out_pad = {1, 1, 0}, .groups = 4},
       true},
  };
}

TEST(ConvNd, MatchDirectLoops) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  for (const Case& c : cases()) {
    for (DType dt : {DType::f64, DType::f32}) {
      SCOPED_TRACE("x " + shape_str(c.x) + " w " + shape_str(c.w) + " " + dtype_name(dt) +
                   (c.transposed ? " transposed" : ""));
      const Tensor x = randn(c.x, {.dtype = dt}, &gen), w = randn(c.w, {.dtype = dt}, &gen);
      const int64_t c_out = c.transposed ? c.w[1] * c.g.groups : c.w[0];
      const Tensor b = c.bias ? randn({c_out}, {.dtype = dt}, &gen) : Tensor();
      const Tensor want = c.transposed ? direct_conv_transpose(as_5d(x), as_5d(w), b, c.g)
                                       : direct_conv(as_5d(x), as_5d(w), b, c.g);
      const Tensor got = run_case(c, x, w, b);
      ASSERT_EQ(as_5d(got).shape(), want.shape());
      const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
      EXPECT_TRUE(all_close(as_5d(got).to(DType::f64), want, tol, tol));
    }
  }
}

// Values printed by PyTorch 2 (torch.nn.functional) for the same calls in f64.
TEST(ConvNd, PyTorchValues) {
  const TensorOptions f64{.dtype = DType::f64};
  // F.conv_transpose2d(x, w, b, stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=2,
  // dilation=(1, 2)), x = arange(1, 25).reshape(1, 4, 2, 3) / 10, w = (arange(1, 25).reshape(4, 1,
  // 3, 2) - 12) / 10, b = (0.5, -0.25).
  const Tensor x2 = div(arange(1.0, 25.0, 1.0, f64).reshape({1, 4, 2, 3}), 10.0);
  const Tensor w2 = div(sub(arange(1.0, 25.0, 1.0, f64).reshape({4, 1, 3, 2}), 12.0), 10.0);
  const Tensor b2 = from_vector<double>({0.5, -0.25}, {2});
  const Tensor y2 = conv_transpose2d(x2, w2, b2,
                                     {.stride = {2, 1},
                                      .padding = {1, 0},
                                      .output_padding = {1, 0},
                                      .groups = 2,
                                      .dilation = {1, 2}});
  EXPECT_TRUE(all_close(
      y2,
      from_vector<double>({0.2,   0.08,  -0.26, 0.18,  0.08,  -0.58, -0.82, -1.92, -0.56, -0.76,
                           -0.16, -0.28, -0.92, -0.12, -0.22, 0.12,  0.04,  -0.28, 0.2,   0.14,
                           1.85,  1.97,  4.51,  2.31,  2.45,  4.19,  4.43,  9.81,  5.17,  5.45,
                           2.21,  2.33,  5.29,  2.73,  2.87,  2.97,  3.13,  6.89,  3.53,  3.71},
                          {1, 2, 4, 5}),
      1e-12, 1e-12));
  // F.conv_transpose1d(x, w, dilation=2, output_padding=1): output padding past the stride.
  const Tensor y1 =
      conv_transpose1d(div(arange(1.0, 7.0, 1.0, f64).reshape({1, 2, 3}), 4.0),
                       div(sub(arange(1.0, 9.0, 1.0, f64).reshape({2, 2, 2}), 4.0), 4.0), Tensor(),
                       {.output_padding = 1, .dilation = 2});
  EXPECT_TRUE(all_close(y1,
                        from_vector<double>({0.0625, -0.0625, 0.1875, 0.375, 0.375, 0.0, 0.6875,
                                             0.8125, 1.9375, 1.25, 1.5, 0.0},
                                            {1, 2, 6}),
                        1e-12, 1e-12));
  // F.conv3d(x, w, b, stride=(2, 1, 1), padding=(1, 0, 1), dilation=(1, 1, 2)).
  const Tensor y3 =
      conv3d(div(arange(1.0, 55.0, 1.0, f64).reshape({1, 2, 3, 3, 3}), 20.0),
             div(sub(arange(1.0, 33.0, 1.0, f64).reshape({2, 2, 2, 2, 2}), 16.0), 16.0),
             from_vector<double>({0.1, -0.2}, {2}),
             {.stride = {2, 1, 1}, .padding = {1, 0, 1}, .dilation = {1, 1, 2}});
  EXPECT_TRUE(
      all_close(y3,
                from_vector<double>(
                    {-0.26875, -0.8375, -0.48125, -0.45625, -1.25,   -0.70625, -3.625,  -8.0875,
                     -4.3875,  -4.15,   -9.2125,  -4.9875,  2.83125, 5.6625,   2.61875, 3.24375,
                     6.45,     2.99375, 8.275,    16.0125,  7.5125,  8.95,     17.2875, 8.1125},
                    {1, 2, 2, 2, 3}),
                1e-12, 1e-12));
  // F.conv_transpose3d(x, w, stride=(2, 1, 1), padding=(1, 0, 0), output_padding=(1, 0, 0),
  // groups=2); its first and last few values.
  const Tensor t3 = conv_transpose3d(
      div(arange(1.0, 17.0, 1.0, f64).reshape({1, 2, 2, 2, 2}), 8.0),
      div(sub(arange(1.0, 17.0, 1.0, f64).reshape({2, 1, 2, 2, 2}), 8.0), 8.0), Tensor(),
      {.stride = {2, 1, 1}, .padding = {1, 0, 0}, .output_padding = {1, 0, 0}, .groups = 2});
  ASSERT_EQ(t3.shape(), (Shape{1, 2, 3, 3, 3}));
  const std::vector<double> v = t3.to_vector<double>();
  EXPECT_EQ(std::vector<double>(v.begin(), v.begin() + 6),
            (std::vector<double>{-0.046875, -0.125, -0.0625, -0.15625, -0.3125, -0.125}));
  EXPECT_EQ(std::vector<double>(v.end() - 6, v.end()),
            (std::vector<double>{2.59375, 5.8125, 3.25, 1.640625, 3.625, 2.0}));
}

// PyTorch's padding="same": the odd element of an even kernel's padding goes on the right.
TEST(ConvNd, SamePaddingAsPyTorch) {
  const TensorOptions f64{.dtype = DType::f64};
  const Tensor x1 = arange(1.0, 6.0, 1.0, f64).reshape({1, 1, 5});
  EXPECT_EQ(
      conv1d(x1, from_vector<double>({1, 2, 3, 4}, {1, 1, 4}), Tensor(), {.same_padding = true})
          .to_vector<double>(),
      (std::vector<double>{20, 30, 40, 26, 14}));
  EXPECT_EQ(conv1d(x1, from_vector<double>({1, -1, 2}, {1, 1, 3}), Tensor(),
                   {.dilation = 2, .same_padding = true})
                .to_vector<double>(),
            (std::vector<double>{5, 6, 8, -2, -2}));
  const Tensor y2 =
      conv2d(arange(1.0, 13.0, 1.0, f64).reshape({1, 1, 3, 4}),
             from_vector<double>({1, 2, 3, 4}, {1, 1, 2, 2}), Tensor(), {.same_padding = true});
  EXPECT_EQ(y2.to_vector<double>(),
            (std::vector<double>{44, 54, 64, 28, 84, 94, 104, 44, 29, 32, 35, 12}));
  // conv3d keeps every size too, even and odd kernels mixed.
  const Tensor x3 = randn({2, 3, 4, 5, 6}), w3 = randn({2, 3, 2, 3, 4});
  const Tensor y3 = conv3d(x3, w3, Tensor(), {.same_padding = true});
  EXPECT_EQ(y3.shape(), (Shape{2, 2, 4, 5, 6}));
  const Tensor explicit_pad = conv3d(pad(x3, {1, 2, 1, 1, 0, 1}), w3);
  EXPECT_TRUE(all_close(y3, explicit_pad, 1e-6, 1e-6));
}

TEST(Pad, ModesAsPyTorch) {
  const TensorOptions f64{.dtype = DType::f64};
  const Tensor x = arange(1.0, 7.0, 1.0, f64).reshape({1, 2, 3});
  EXPECT_EQ(pad(x, {2, 1}, PadMode::Reflect).to_vector<double>(),
            (std::vector<double>{3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}));
  EXPECT_EQ(pad(x, {2, 1}, PadMode::Replicate).to_vector<double>(),
            (std::vector<double>{1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6}));
  EXPECT_EQ(pad(x, {2, 1}, PadMode::Circular).to_vector<double>(),
            (std::vector<double>{2, 3, 1, 2, 3, 1, 5, 6, 4, 5, 6, 4}));
  // Two dims of (1, 3, 4): (1, 2) on the last, (2, 1) on the one before.
  const Tensor x2 = arange(1.0, 13.0, 1.0, f64).reshape({1, 3, 4});
  const Tensor r = pad(x2, {1, 2, 2, 1}, PadMode::Reflect);
  ASSERT_EQ(r.shape(), (Shape{1, 6, 7}));
  EXPECT_EQ(r.to_vector<double>(),
            (std::vector<double>{10, 9, 10, 11, 12, 11, 10, 6, 5, 6, 7, 8, 7, 6,
                                 2,  1, 2,  3,  4,  3,  2,  6, 5, 6, 7, 8, 7, 6,
                                 10, 9, 10, 11, 12, 11, 10, 6, 5, 6, 7, 8, 7, 6}));
  EXPECT_EQ(
      pad(x2, {1, 2, 2, 1}, PadMode::Circular).to_vector<double>(),
      (std::vector<double>{8, 5, 6, 7, 8, 5, 6, 12, 9, 10, 11, 12, 9, 10, 4, 1, 2, 3, 4, 1, 2,
                           8, 5, 6, 7, 8, 5, 6, 12, 9, 10, 11, 12, 9, 10, 4, 1, 2, 3, 4, 1, 2}));
  EXPECT_EQ(pad(x2, {1, 2, 2, 1}, PadMode::Replicate).to_vector<double>(),
            (std::vector<double>{1, 1, 2,  3,  4,  4,  4,  1, 1, 2,  3,  4,  4,  4,
                                 1, 1, 2,  3,  4,  4,  4,  5, 5, 6,  7,  8,  8,  8,
                                 9, 9, 10, 11, 12, 12, 12, 9, 9, 10, 11, 12, 12, 12}));
  // Constant: a value, and negative pads that crop.
  const Tensor c = pad(x2, {1, -1, -1, 2}, PadMode::Constant, 7.0);
  ASSERT_EQ(c.shape(), (Shape{1, 4, 4}));
  EXPECT_EQ(c.to_vector<double>(),
            (std::vector<double>{7, 5, 6, 7, 7, 9, 10, 11, 7, 7, 7, 7, 7, 7, 7, 7}));
  // No padding still gives a new tensor, as PyTorch's.
  const Tensor same = pad(x, {0, 0}, PadMode::Reflect);
  EXPECT_FALSE(same.is_same(x));
  EXPECT_EQ(same.to_vector<double>(), x.to_vector<double>());
  // Integer tensors pad with their own dtype.
  EXPECT_EQ(
      pad(from_vector<int64_t>({1, 2}, {2}), {1, 1}, PadMode::Constant, 5.0).to_vector<int64_t>(),
      (std::vector<int64_t>{5, 1, 2, 5}));
}

TEST(Pad, GradientsGoBackToTheirSources) {
  // Reflect pad (2, 1) of 1 2 3 reads source 2, 1, 0, 1, 2, 1: the gradient counts the reads.
  const Tensor x = from_vector<double>({1, 2, 3}, {1, 1, 3}).requires_grad_(true);
  pad(x, {2, 1}, PadMode::Reflect).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 3, 2}));
  const Tensor y = from_vector<double>({1, 2, 3}, {1, 1, 3}).requires_grad_(true);
  pad(y, {2, 2}, PadMode::Circular).sum().backward();
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{2, 3, 2}));
  const Tensor z = from_vector<double>({1, 2, 3}, {3}).requires_grad_(true);
  mul(pad(z, {-1, 2}, PadMode::Constant, 4.0), from_vector<double>({1, 2, 3, 4}, {4}))
      .sum()
      .backward();
  EXPECT_EQ(z.grad().to_vector<double>(), (std::vector<double>{0, 1, 2}));
}

TEST(IndexAdd, AsPyTorch) {
  // torch.index_add(zeros(2, 4), 1, tensor([3, 0, 3]), arange(1, 7).reshape(2, 3), alpha=2)
  const Tensor a = zeros({2, 4}, {.dtype = DType::f64}).requires_grad_(true);
  const Tensor src =
      arange(1.0, 7.0, 1.0, {.dtype = DType::f64}).reshape({2, 3}).requires_grad_(true);
  const Tensor y = index_add(a, 1, from_vector<int64_t>({3, 0, 3}, {3}), src, 2.0);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{4, 0, 0, 8, 10, 0, 0, 20}));
  mul(y, arange(0.0, 8.0, 1.0, {.dtype = DType::f64}).reshape({2, 4})).sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(src.grad().to_vector<double>(), (std::vector<double>{6, 0, 6, 14, 8, 14}));
}

TEST(ConvNdErrors, Arguments) {
  const Tensor x1 = zeros({2, 4, 6}), w1 = zeros({6, 2, 3});
  expect_error(
      [&] {
        conv1d(zeros({4, 6}), w1);
      },
      {"conv1d", "input must be 3-D (N, C, L)", "[4, 6]"});
  expect_error([&] { conv1d(x1, w1); }, {"conv1d", "4 channels", "groups 1", "expects 2"});
  expect_error(
      [&] {
        conv1d(x1, zeros({6, 2, 9}), Tensor(), {.groups = 2});
      },
      {"conv1d", "kernel of 9", "larger than the padded input 6", "spatial dim 0"});
  expect_error([&] { conv1d(x1, w1, Tensor(), {.stride = 0, .groups = 2}); },
               {"conv1d", "stride 0"});
  expect_error([&] { conv1d(x1, w1, Tensor(), {.stride = 2, .groups = 2, .same_padding = true}); },
               {"conv1d", "same_padding needs stride 1", "stride 2"});
  expect_error([&] { conv1d(x1, w1, Tensor(), {.padding = 1, .groups = 2, .same_padding = true}); },
               {"conv1d", "same_padding with padding 1"});
  const Tensor x3 = zeros({1, 2, 4, 4, 4});
  expect_error(
      [&] {
        conv3d(zeros({2, 4, 4, 4}), zeros({3, 2, 2, 2, 2}));
      },
      {"conv3d", "input must be 5-D (N, C, D, H, W)"});
  expect_error([&] { conv3d(x3, zeros({3, 2, 2, 2})); }, {"conv3d", "weight must be 5-D"});
  expect_error(
      [&] {
        conv3d(x3, zeros({3, 2, 5, 2, 2}));
      },
      {"conv3d", "kernel of 5", "spatial dim 0"});
  expect_error(
      [&] {
        conv3d(x3, zeros({3, 2, 2, 2, 2}), zeros({2}));
      },
      {"conv3d", "bias must have shape [3]", "[2]"});
  expect_error(
      [&] {
        conv3d(x3, zeros({3, 2, 2, 2, 2}).to(DType::f64));
      },
      {"conv3d", "dtype", "f64"});
  // Transposed: weight (C_in, C_out / groups, *kernel).
  const Tensor xt = zeros({1, 4, 3, 3});
  expect_error(
      [&] {
        conv_transpose2d(xt, zeros({3, 2, 3, 3}));
      },
      {"conv_transpose2d", "4 channels", "3 input channels"});
  expect_error(
      [&] {
        conv_transpose2d(xt, zeros({4, 2, 3, 3}), Tensor(), {.groups = 3});
      },
      {"conv_transpose2d", "groups 3 must divide"});
  expect_error(
      [&] {
        conv_transpose2d(xt, zeros({4, 2, 3, 3}), zeros({3}), {.groups = 2});
      },
      {"conv_transpose2d", "bias must have shape [4]", "[3]"});
  expect_error(
      [&] {
        conv_transpose2d(xt, zeros({4, 2, 3, 3}), Tensor(), {.output_padding = 1});
      },
      {"conv_transpose2d", "output_padding 1", "smaller than the stride 1 or the dilation 1"});
  expect_error(
      [&] {
        conv_transpose2d(xt, zeros({4, 2, 1, 1}), Tensor(), {.padding = {2, 0}});
      },
      {"conv_transpose2d", "output would have size -1", "spatial dim 0"});
  expect_error(
      [&] {
        conv_transpose2d(xt, zeros({4, 2, 1, 1}), Tensor(), {.padding = {0, 2}});
      },
      {"conv_transpose2d", "output would have size -1", "spatial dim 1"});
  expect_error(
      [&] {
        conv_transpose2d(xt, zeros({4, 2, 3, 3}), Tensor(), {.stride = {1, 0}});
      },
      {"conv_transpose2d", "stride 0", "spatial dim 1"});
  expect_error(
      [&] {
        conv_transpose1d(zeros({1, 4, 3}), zeros({4, 2, 3}), Tensor(),
                         {.stride = 2, .output_padding = 2});
      },
      {"conv_transpose1d", "output_padding 2", "stride 2"});
  expect_error(
      [&] {
        conv_transpose3d(zeros({1, 4, 3, 3}), zeros({4, 2, 3, 3, 3}));
      },
      {"conv_transpose3d", "input must be 5-D"});
  expect_error(
      [&] {
        conv_transpose3d(zeros({1, 4, 3, 3, 3}), zeros({4, 2, 3, 3, 3}).to(DType::i64));
      },
      {"conv_transpose3d", "dtype"});
}

TEST(PadErrors, Arguments) {
  const Tensor x = zeros({1, 2, 3});
  expect_error([&] { pad(x, {1}); }, {"pad", "(left, right) pairs", "got 1"});
  expect_error(
      [&] {
        pad(x, {1, 1, 1, 1, 1, 1, 1, 1});
      },
      {"pad", "8 pads for 4 dims", "[1, 2, 3]"});
  expect_error([&] { pad(x, {-2, -2}); }, {"pad", "crop 4 elements from dim 2 of size 3"});
  expect_error(
      [&] {
        pad(zeros({3}), {1, 1}, PadMode::Reflect);
      },
      {"pad", "reflect padding of 1 dims takes an input of 2 or 3 dims", "[3]"});
  expect_error(
      [&] {
        pad(x, {3, 0}, PadMode::Reflect);
      },
      {"pad", "reflect pads (3, 0) of dim 2", "smaller than its size 3"});
  expect_error(
      [&] {
        pad(x, {0, 4}, PadMode::Circular);
      },
      {"pad", "circular pads (0, 4)", "at most its size 3"});
  expect_error(
      [&] {
        pad(x, {-1, 0}, PadMode::Replicate);
      },
      {"pad", "replicate padding takes non-negative pads", "(-1, 0)"});
  expect_error(
      [&] {
        pad(x, {1, 0}, PadMode::Replicate, 2.0);
      },
      {"pad", "replicate padding takes no value", "2"});
  expect_error(
      [&] {
        pad(zeros({1, 0}), {1, 0}, PadMode::Replicate);
      },
      {"pad", "replicate pads (1, 0) of dim 1", "its size 0"});
  expect_error([&] { pad(x, {1, 0}, static_cast<PadMode>(9)); }, {"pad", "unknown mode", "9"});
}

TEST(IndexAddErrors, Arguments) {
  const Tensor a = zeros({2, 4}), idx = from_vector<int64_t>({0, 3}, {2});
  expect_error(
      [&] {
        index_add(a, 1, idx, zeros({2, 3}));
      },
      {"index_add", "src of shape [2, 3]", "expected [2, 2]"});
  expect_error(
      [&] {
        index_add(a, 1, from_vector<int64_t>({0, 4}, {2}), zeros({2, 2}));
      },
      {"index_add", "out of range", "[0, 4]", "size 4"});
  // i32 indices are read as i64, as PyTorch's; floating ones are refused.
  EXPECT_TRUE(all_close(index_add(a, 1, idx.to(DType::i32), ones({2, 2})),
                        index_add(a, 1, idx, ones({2, 2})), 0, 0));
  expect_error(
      [&] {
        index_add(a, 1, idx.to(DType::f32), zeros({2, 2}));
      },
      {"index_add", "must be i64 or i32", "f32"});
  expect_error([&] { index_add(a, 2, idx, zeros({2, 2})); }, {"index_add", "dim 2 out of range"});
  expect_error(
      [&] {
        index_add(a.to(DType::i64), 1, idx, zeros({2, 2}).to(DType::i64));
      },
      {"index_add", "floating"});
  expect_error(
      [&] {
        index_add(a, 1, idx, zeros({2, 2}, {.dtype = DType::f64}));
      },
      {"index_add", "src is f64"});
}

// CPU against CUDA at sizes past the op table's: many tiles of the conv2d kernels underneath.
TEST(CudaConvNd, MatchCpu) {
  SINTER_REQUIRE_CUDA();
  const std::vector<Case> big = {
      {{4, 16, 40}, {32, 8, 5}, true, {.stride = {1, 1, 2}, .pad = {0, 0, 2}, .groups = 2}, false},
      {{2, 8, 6, 12, 12}, {16, 8, 3, 3, 3}, true, {.pad = {1, 1, 1}}, false},
      {{4, 16, 9, 9}, {16, 8, 4, 4}, true, {.stride = {1, 2, 2}, .pad = {0, 1, 1}}, true},
      {{2, 8, 4, 6, 6},
       {8, 4, 3, 3, 3},
       true,
       {.stride = {2, 2, 2}, .pad = {1, 1, 1}, .out_pad = {1, 1, 1}},
       true},
  };
  for (const Case& c : big) {
    for (DType dt : {DType::f32, DType::bf16}) {
      const uint64_t seed = testing::fresh_seed();
      SCOPED_TRACE("x " + shape_str(c.x) + " w " + shape_str(c.w) + " " + dtype_name(dt) +
                   ", seed " + std::to_string(seed));
      Generator gen(seed);
      const int64_t c_out = c.transposed ? c.w[1] * c.g.groups : c.w[0];
      std::vector<Tensor> cpu_in = {randn(c.x, {.dtype = dt}, &gen),
                                    randn(c.w, {.dtype = dt}, &gen),
                                    randn({c_out}, {.dtype = dt}, &gen)};
      std::vector<Tensor> gpu_in;
      for (Tensor& t : cpu_in) {
        gpu_in.push_back(t.to(Device::cuda()).requires_grad_(true));
        t.requires_grad_(true);
      }
      testing::poison_cuda_cache();
      const Tensor yc = run_case(c, cpu_in[0], cpu_in[1], cpu_in[2]);
      const Tensor yg = run_case(c, gpu_in[0], gpu_in[1], gpu_in[2]);
      const double tol = dt == DType::f32 ? 1e-3 : 5e-2;
      EXPECT_TRUE(all_close(yg.cpu(), yc, tol, tol)) << "forward";
      const Tensor wgt = randn(yc.shape(), {.dtype = dt}, &gen);
      sum(mul(yc, wgt)).backward();
      sum(mul(yg, wgt.to(Device::cuda()))).backward();
      for (size_t k = 0; k < 3; ++k) {
        EXPECT_TRUE(all_close(gpu_in[k].grad().cpu(), cpu_in[k].grad(), tol, tol))
            << "gradient of input " << k;
      }
    }
  }
}

// The layers' steps never make the host wait for the device (no index tensor read back, no
// pageable copy), so they run under a NoSyncGuard and inside a captured CUDA graph.
TEST(CudaConvNd, LayersNeverWaitForTheDevice) {
  SINTER_REQUIRE_CUDA();
  manual_seed(testing::fresh_seed());
  nn::Sequential m(
      nn::Conv2d(2, 4, 3, {.padding = 1, .padding_mode = nn::PaddingMode::Reflect}),
      nn::Conv2d(4, 4, 2, {.same_padding = true, .padding_mode = nn::PaddingMode::Circular}),
      nn::Conv2d(4, 4, 3, {.padding = {1, 2}, .padding_mode = nn::PaddingMode::Replicate}),
      nn::ConvTranspose2d(4, 2, 3, {.stride = 2, .padding = 1, .output_padding = 1}));
  nn::LSTM lstm(6, 8, {.num_layers = 2, .bidirectional = true, .proj_size = 3});
  nn::GRU gru(6, 8, {.bidirectional = true});
  const TensorOptions cuda{.device = Device::cuda()};
  const auto step = [](nn::Module& model, const Tensor& x) {
    model.to(Device::cuda());
    for (int i = 0; i < 2; ++i) {
      const cuda::NoSyncGuard no_sync;
      model.zero_grad();
      mean(model.forward(x)).backward();
    }
  };
  step(m, randn({2, 2, 8, 8}, cuda));
  step(lstm, randn({5, 2, 6}, cuda));
  step(gru, randn({5, 2, 6}, cuda));
  nn::Sequential m3(
      nn::Conv3d(2, 3, 3, {.stride = {2, 1, 1}, .padding = 1}),
      nn::ConvTranspose3d(3, 2, {3, 2, 2}, {.stride = 2, .output_padding = {1, 0, 0}}));
  step(m3, randn({1, 2, 5, 4, 4}, cuda));
}

}  // namespace
}  // namespace sinter

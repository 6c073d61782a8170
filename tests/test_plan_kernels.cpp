// The inference plans' own kernels against scalar references written here: the direct
// convolution of few taps (Note [small convolutions], src/cpu/conv_small.cpp) on every tile
// width, channel count, stride, dilation and padding it takes, with its bias and relu; and the
// channels-last max pooling (vec::max_pool_nhwc) with padding, dilation, overlapping windows and
// NaN.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/conv_small.h"
#include "cpu/vec_rows.h"
#include "test_util.h"

namespace sinter {
namespace {

kern::Conv2dGeom geometry(int64_t c_in, int64_t h, int64_t w, int64_t c_out, int64_t k,
                          int64_t stride, int64_t pad, int64_t dil) {
  kern::Conv2dGeom g;
  g.n = 1;
  g.c_in = c_in;
  g.h = h;
  g.w = w;
  g.c_out = c_out;
  g.kh = g.kw = k;
  g.stride_h = g.stride_w = stride;
  g.pad_h = g.pad_w = pad;
  g.dil_h = g.dil_w = dil;
  g.h_out = (h + 2 * pad - dil * (k - 1) - 1) / stride + 1;
  g.w_out = (w + 2 * pad - dil * (k - 1) - 1) / stride + 1;
  return g;
}

std::vector<float> uniform(size_t n, std::mt19937& gen) {
  std::uniform_real_distribution<float> d(-1.0F, 1.0F);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// The convolution of a channels-last image in double: y (h_out, w_out, c_out), the weight
// (c_out, c_in, kh, kw), then the bias and relu.
std::vector<double> reference_conv(const std::vector<float>& x, const kern::Conv2dGeom& g,
                                   const std::vector<float>& w, const float* bias, bool relu) {
  std::vector<double> y(static_cast<size_t>(g.h_out * g.w_out * g.c_out));
  for (int64_t oy = 0; oy < g.h_out; ++oy) {
    for (int64_t ox = 0; ox < g.w_out; ++ox) {
      for (int64_t o = 0; o < g.c_out; ++o) {
        double s = 0;
        for (int64_t i = 0; i < g.c_in; ++i) {
          for (int64_t ky = 0; ky < g.kh; ++ky) {
            for (int64_t kx = 0; kx < g.kw; ++kx) {
              const int64_t iy = oy * g.stride_h - g.pad_h + ky * g.dil_h;
              const int64_t ix = ox * g.stride_w - g.pad_w + kx * g.dil_w;
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              s += static_cast<double>(x[(iy * g.w + ix) * g.c_in + i]) *
                   w[((o * g.c_in + i) * g.kh + ky) * g.kw + kx];
            }
          }
        }
        if (bias != nullptr) s += bias[o];
        if (relu && !(s > 0)) s = 0;
        y[(oy * g.w_out + ox) * g.c_out + o] = s;
      }
    }
  }
  return y;
}

void expect_conv_matches(const kern::Conv2dGeom& g, bool with_bias, bool relu, std::mt19937& gen) {
  SCOPED_TRACE("c_in " + std::to_string(g.c_in) + " c_out " + std::to_string(g.c_out) + " k " +
               std::to_string(g.kh) + " stride " + std::to_string(g.stride_h) + " pad " +
               std::to_string(g.pad_h) + " dil " + std::to_string(g.dil_h) + " " +
               std::to_string(g.h) + "x" + std::to_string(g.w) + " bias " +
               std::to_string(with_bias) + " relu " + std::to_string(relu));
  ASSERT_TRUE(cpu::small_conv::takes(g));
  const std::vector<float> x = uniform(static_cast<size_t>(g.h * g.w * g.c_in), gen);
  const std::vector<float> w = uniform(static_cast<size_t>(g.c_out * g.c_in * g.kh * g.kw), gen);
  const std::vector<float> b = uniform(static_cast<size_t>(g.c_out), gen);
  const std::vector<float> packed = cpu::small_conv::pack(g, w.data());
  std::vector<float> scratch(static_cast<size_t>(cpu::small_conv::scratch_floats(g)), 7.0F);
  // A sentinel after the output: the kernel writes h_out w_out c_out floats and no more.
  const size_t n = static_cast<size_t>(g.h_out * g.w_out * g.c_out);
  std::vector<float> y(n + 16, 42.0F);
  const float* bias = with_bias ? b.data() : nullptr;
  cpu::small_conv::run(x.data(), g, packed.data(), bias, relu, scratch.data(), y.data());
  const std::vector<double> want = reference_conv(x, g, w, bias, relu);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(y[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "at " << i;
    if (relu) {
      ASSERT_FALSE(std::signbit(y[i])) << "at " << i;
    }
  }
  for (size_t i = n; i < y.size(); ++i) ASSERT_EQ(y[i], 42.0F);
}

TEST(PlanKernels, SmallConvolutionMatchesItsSums) {
  if (!cpu::small_conv::takes(geometry(1, 8, 8, 32, 3, 1, 1, 1))) {
    GTEST_SKIP() << "the small convolution needs AVX-512F, which this CPU lacks (the plans keep "
                    "oneDNN's convolution there)";
  }
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 gen(static_cast<uint32_t>(seed));
  // Every channel count (two to four vectors) on widths whose last tile holds every count of
  // pixels below a tile (tiles of 6, 4 and 3 pixels).
  for (const int64_t c_out : {32, 48, 64}) {
    for (int64_t w = 1; w <= 10; ++w) {
      expect_conv_matches(geometry(1, 3, w, c_out, 1, 1, 0, 1), true, false, gen);
    }
    expect_conv_matches(geometry(1, 28, 28, c_out, 3, 1, 1, 1), true, true, gen);
  }
  // Strides, padding wider than the window's reach, dilation, channels in, no bias, the most
  // taps (32), a kernel of 5, an output of one pixel.
  expect_conv_matches(geometry(3, 32, 30, 32, 3, 2, 1, 1), false, true, gen);
  expect_conv_matches(geometry(2, 13, 17, 32, 3, 1, 2, 1), true, true, gen);
  expect_conv_matches(geometry(1, 15, 19, 48, 3, 1, 2, 2), true, false, gen);
  expect_conv_matches(geometry(2, 9, 11, 64, 4, 3, 1, 1), true, true, gen);
  expect_conv_matches(geometry(1, 12, 12, 32, 5, 2, 2, 1), false, false, gen);
  expect_conv_matches(geometry(1, 3, 3, 32, 3, 1, 0, 1), true, true, gen);
  // What it does not take: groups, channels out that are not whole vectors or only one, too many
  // taps.
  kern::Conv2dGeom g = geometry(4, 8, 8, 32, 3, 1, 1, 1);
  EXPECT_FALSE(cpu::small_conv::takes(g));  // 36 taps
  g = geometry(1, 8, 8, 16, 3, 1, 1, 1);
  EXPECT_FALSE(cpu::small_conv::takes(g));
  g = geometry(1, 8, 8, 40, 3, 1, 1, 1);
  EXPECT_FALSE(cpu::small_conv::takes(g));
  g = geometry(1, 8, 8, 80, 3, 1, 1, 1);
  EXPECT_FALSE(cpu::small_conv::takes(g));
  g = geometry(5, 8, 8, 32, 1, 1, 0, 1);
  EXPECT_FALSE(cpu::small_conv::takes(g));  // 5 channels in
  EXPECT_TRUE(cpu::small_conv::takes(geometry(4, 8, 8, 32, 2, 1, 0, 1)));
  g = geometry(2, 8, 8, 32, 3, 1, 1, 1);
  g.groups = 2;
  EXPECT_FALSE(cpu::small_conv::takes(g));
}

TEST(PlanKernels, SmallConvolutionReluKeepsNaNAndGivesPositiveZeros) {
  const kern::Conv2dGeom g = geometry(1, 1, 3, 32, 1, 1, 0, 1);
  if (!cpu::small_conv::takes(g)) {
    GTEST_SKIP() << "the small convolution needs AVX-512F, which this CPU lacks";
  }
  // Pixels: NaN, -0 (its sum is +0: the sums start at +0), a negative value.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {nan, -0.0F, -2.0F};
  const std::vector<float> w(32, 1.0F);
  const std::vector<float> packed = cpu::small_conv::pack(g, w.data());
  std::vector<float> scratch(static_cast<size_t>(cpu::small_conv::scratch_floats(g)));
  std::vector<float> y(96);
  const std::vector<float> bias(32, -0.0F);
  cpu::small_conv::run(x.data(), g, packed.data(), bias.data(), true, scratch.data(), y.data());
  for (int j = 0; j < 32; ++j) {
    EXPECT_TRUE(std::isnan(y[j]));
    EXPECT_EQ(y[32 + j], 0.0F);
    EXPECT_FALSE(std::signbit(y[32 + j]));
    EXPECT_EQ(y[64 + j], 0.0F);
    EXPECT_FALSE(std::signbit(y[64 + j]));
  }
}

// The element max pooling picks in a channels-last image (kern::max_window_argmax): the first NaN,
// else the first largest tap inside the image.
std::vector<float> reference_pool(const std::vector<float>& x, const kern::Conv2dGeom& g) {
  std::vector<float> y(static_cast<size_t>(g.h_out * g.w_out * g.c_in));
  for (int64_t oy = 0; oy < g.h_out; ++oy) {
    for (int64_t ox = 0; ox < g.w_out; ++ox) {
      for (int64_t ch = 0; ch < g.c_in; ++ch) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            const int64_t iy = oy * g.stride_h - g.pad_h + ky * g.dil_h;
            const int64_t ix = ox * g.stride_w - g.pad_w + kx * g.dil_w;
            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
            const float v = x[(iy * g.w + ix) * g.c_in + ch];
            if (!std::isnan(m) && (std::isnan(v) || v > m)) m = v;
          }
        }
        y[(oy * g.w_out + ox) * g.c_in + ch] = m;
      }
    }
  }
  return y;
}

TEST(PlanKernels, MaxPoolingMatchesItsWindows) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 gen(static_cast<uint32_t>(seed));
  struct Case {
    int64_t c, h, w, k, stride, pad, dil;
  };
  // Channels below, at and past a vector of 16 (the vector loop and the tail), padded and
  // overlapping windows, dilation, a window of one; images one and two pixels wide, where a
  // window's last taps lie right of the image for every output column (the loop once read the
  // next row's pixel there, and past the image on its last row).
  for (const Case& t :
       {Case{32, 28, 28, 2, 2, 0, 1}, Case{3, 9, 11, 3, 2, 1, 1}, Case{21, 10, 7, 3, 1, 1, 1},
        Case{16, 12, 13, 2, 3, 1, 2}, Case{40, 6, 6, 1, 1, 0, 1}, Case{17, 7, 9, 3, 2, 1, 2},
        Case{1, 4, 1, 3, 2, 1, 1}, Case{5, 5, 1, 3, 2, 1, 1}, Case{16, 4, 1, 3, 3, 1, 1},
        Case{3, 6, 2, 5, 2, 2, 1}, Case{32, 6, 2, 5, 2, 2, 1}}) {
    SCOPED_TRACE("c " + std::to_string(t.c) + " " + std::to_string(t.h) + "x" +
                 std::to_string(t.w) + " k " + std::to_string(t.k) + " stride " +
                 std::to_string(t.stride) + " pad " + std::to_string(t.pad) + " dil " +
                 std::to_string(t.dil));
    kern::Conv2dGeom g = geometry(t.c, t.h, t.w, t.c, t.k, t.stride, t.pad, t.dil);
    std::vector<float> x = uniform(static_cast<size_t>(t.h * t.w * t.c), gen);
    // NaN of both signs in a few places (the window's first NaN is its result, bits and all), a
    // -inf, and zeros of both signs (the first of equal values is kept: +0 or -0, whichever
    // comes first in the window).
    for (size_t i = 0; i < x.size(); i += 3) x[i] = (i / 3) % 2 == 0 ? 0.0F : -0.0F;
    x[std::min<size_t>(5, x.size() - 1)] = std::numeric_limits<float>::quiet_NaN();
    // -NaN then +NaN in the first row's first two pixels: a window holding both takes the first.
    x[0] = -std::numeric_limits<float>::quiet_NaN();
    if (t.w > 1) x[static_cast<size_t>(t.c)] = std::numeric_limits<float>::quiet_NaN();
    x[x.size() / 2] = -std::numeric_limits<float>::quiet_NaN();
    x[x.size() - 1] = -std::numeric_limits<float>::infinity();
    x.shrink_to_fit();  // alone in its buffer: a read past it is the sanitizer's to catch
    const size_t n = static_cast<size_t>(g.h_out * g.w_out * g.c_in);
    std::vector<float> y(n + 16, 42.0F);
    cpu::vec::max_pool_nhwc(x.data(), g, y.data());
    const std::vector<float> want = reference_pool(x, g);
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(want[i])) {
        ASSERT_TRUE(std::isnan(y[i])) << "at " << i;
        ASSERT_EQ(std::signbit(y[i]), std::signbit(want[i])) << "at " << i;
      } else {
        ASSERT_EQ(y[i], want[i]) << "at " << i;
        ASSERT_EQ(std::signbit(y[i]), std::signbit(want[i])) << "at " << i;
      }
    }
    for (size_t i = n; i < y.size(); ++i) ASSERT_EQ(y[i], 42.0F);
  }
}

}  // namespace
}  // namespace sinter

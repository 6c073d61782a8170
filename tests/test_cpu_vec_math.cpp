// The CPU's f32 vector math (Note [cpu vector math]) through the ops that use it (exp, tanh,
// sigmoid, silu, gelu's tanh form), against the f64 formulas on a sweep of the f32 range and on the
// edge values: zeros, subnormal results, overflow to infinity, the infinities and NaN.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/vec_rows.h"
#include "kern/softmax.h"
#include "test_util.h"

namespace sinter {
namespace {

// Inputs: a fine sweep of [-120, 120], the region of tanh's switch of form, and the edges.
std::vector<float> inputs() {
  std::vector<float> x;
  for (int i = -120000; i <= 120000; ++i) x.push_back(static_cast<float>(i) * 1e-3f);
  for (int i = -2000; i <= 2000; ++i) x.push_back(0.55f + static_cast<float>(i) * 1e-6f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v :
       {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-8f, 88.72f, 88.73f, 89.0f, -87.3f, -100.0f, -103.9f,
        -104.0f, 1e30f, -1e30f, inf, -inf, std::numeric_limits<float>::quiet_NaN()}) {
    x.push_back(v);
  }
  return x;
}

// Each op's result (f32, 2 threads' worth of elements) against `ref` in f64: equal where either is
// not finite, else within 4 f32 ulp of the reference's value, or 1e-35 absolute (results near f32's
// smallest numbers, where an f32 exp has overflowed or the f64 formula cancels).
// `cond` scales the ulp bound where the formula itself is ill-conditioned in f32 (its default: 1).
void expect_close(
    const char* name, const std::function<Tensor(const Tensor&)>& op,
    const std::function<double(double)>& ref,
    const std::function<double(double)>& cond = [](double) { return 1.0; }) {
  const std::vector<float> x = inputs();
  const Tensor t = from_vector(x);
  const std::vector<float> got = op(t).to_vector<float>();
  ASSERT_EQ(got.size(), x.size());
  int bad = 0;
  for (size_t i = 0; i < x.size() && bad < 5; ++i) {
    const double want = ref(static_cast<double>(x[i]));
    const auto want_f = static_cast<float>(want);
    const double g = got[i];
    bool ok;
    if (std::isnan(want_f) || std::isnan(g)) {
      ok = std::isnan(want_f) && std::isnan(g);
    } else if (std::isinf(want_f) || std::isinf(g)) {
      ok = want_f == g;
    } else {
      ok = std::abs(g - want) <=
               4 * cond(x[i]) * std::abs(want) * std::numeric_limits<float>::epsilon() ||
           std::abs(g - want) <= 1e-35;
    }
    if (!ok) {
      ++bad;
      ADD_FAILURE() << name << "(" << x[i] << ") = " << got[i] << ", want " << want;
    }
  }
}

TEST(CpuVecMath, ExpTanhAndTheActivationsMatchTheirFormulas) {
  expect_close(
      "exp", [](const Tensor& t) { return exp(t); }, [](double v) { return std::exp(v); });
  expect_close(
      "tanh", [](const Tensor& t) { return tanh(t); }, [](double v) { return std::tanh(v); });
  expect_close(
      "sigmoid", [](const Tensor& t) { return sigmoid(t); },
      [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
  expect_close(
      "silu", [](const Tensor& t) { return silu(t); },
      [](double v) { return v / (1.0 + std::exp(-v)); });  // NaN at -inf, as PyTorch
  expect_close(
      "gelu_tanh", [](const Tensor& t) { return gelu(t, Activation::GeluTanh); },
      [](double v) {
        // 0.5 v (1 + tanh(u)) without its cancellation; NaN at -inf, as PyTorch.
        const double u = std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v);
        return v / (1.0 + std::exp(-2.0 * u));
      },
      // exp(-2u) of an f32 u carries u's rounding, |2u| ulp of it.
      [](double v) {
        return 1.0 + std::abs(2 * std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v));
      });
}

// The exact gelu's row (Note [exact gelu row], or Note [gelu tables] in
// src/cpu/vec_elementwise.cpp on AVX-512) on the same sweep: within 4 f32 ulp of x Phi(x) in f64
// everywhere, the negative tail included, where the functor's 1 + erf cancels.
TEST(CpuVecMath, ExactGeluMatchesItsFormula) {
  expect_close(
      "gelu", [](const Tensor& t) { return gelu(t); },
      [](double v) { return 0.5 * v * std::erfc(-v / std::sqrt(2.0)); });  // NaN at -inf
  const std::vector<float> tail = gelu(from_vector<float>({-13.0f})).to_vector<float>();
  EXPECT_LT(tail[0], 0.0f) << "gelu(-13) is -7.95e-38, not -0";
}

// gelu_tanh's gradient in f32 (the GeluTanhBackward row, on the vector tanh) against its formula
// in f64: the derivative is at most about 1.13, and the f32 formula's 1 - t^2 carries t's rounding.
TEST(CpuVecMath, GeluTanhGradientMatchesItsFormula) {
  const Tensor x = linspace(-12.0, 12.0, 24001).requires_grad_();
  gelu(x, Activation::GeluTanh).sum().backward();
  const std::vector<float> got = x.grad().to_vector<float>(), xs = x.detach().to_vector<float>();
  int bad = 0;
  for (size_t i = 0; i < xs.size() && bad < 5; ++i) {
    const double v = xs[i], k = std::sqrt(2.0 / M_PI), c = 0.044715;
    const double t = std::tanh(k * (v + c * v * v * v));
    const double want = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v);
    if (!(std::abs(got[i] - want) <= 2e-6 * (1 + std::abs(v)))) {
      ++bad;
      ADD_FAILURE() << "gelu_tanh'(" << v << ") = " << got[i] << ", want " << want;
    }
  }
}

// gelu's gradient in f32 (the GeluBackward row) against Phi(x) + x phi(x) in f64.
TEST(CpuVecMath, ExactGeluGradientMatchesItsFormula) {
  const Tensor x = linspace(-14.0, 14.0, 28001).requires_grad_();
  gelu(x).sum().backward();
  const std::vector<float> got = x.grad().to_vector<float>(), xs = x.detach().to_vector<float>();
  int bad = 0;
  for (size_t i = 0; i < xs.size() && bad < 5; ++i) {
    const double v = xs[i];
    const double want =
        0.5 * std::erfc(-v / std::sqrt(2.0)) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    if (!(std::abs(got[i] - want) <= 1e-6)) {
      ++bad;
      ADD_FAILURE() << "gelu'(" << v << ") = " << got[i] << ", want " << want;
    }
  }
}

// A Linear's gelu_tanh epilogue in f32 runs the gelu_tanh op's row, not the scalar functor: near
// x = -5, where the functor's 0.5 x (1 + tanh(u)) cancels to a few correct bits, the two agree.
TEST(CpuVecMath, TheGeluTanhEpilogueRunsTheOpsRow) {
  Generator gen(testing::fresh_seed());
  for (const int64_t rows : {4, 300}) {  // the OpenBLAS and the oneDNN products
    const Tensor x = randn({rows, 96}, {}, &gen), w = mul(randn({130, 96}, {}, &gen), 0.01);
    const Tensor b = sub(mul(randn({130}, {}, &gen), 0.1), 5.0);
    NoGradGuard no_grad;
    EXPECT_TRUE(testing::all_close(linear(x, w, b, Activation::GeluTanh),
                                   gelu(linear(x, w, b), Activation::GeluTanh), 0, 1e-5))
        << rows << " rows";
    // The exact gelu's epilogue runs its row too: near -5 the functor is off by about 4e5 ulp.
    EXPECT_TRUE(
        testing::all_close(linear(x, w, b, Activation::Gelu), gelu(linear(x, w, b)), 0, 1e-5))
        << rows << " rows, exact gelu";
  }
}

// bf16 inputs go through the same f32 kernels (loaded to f32, rounded once on the store).
TEST(CpuVecMath, Bf16GoesThroughTheSameKernels) {
  const Tensor x = linspace(-6.0, 6.0, 1001);
  const Tensor got = gelu(x.to(DType::bf16), Activation::GeluTanh).to(DType::f32);
  const Tensor want =
      gelu(x.to(DType::bf16).to(DType::f32), Activation::GeluTanh).to(DType::bf16).to(DType::f32);
  EXPECT_TRUE(testing::all_close(got, want, 0, 0));
}

// The bf16 conversion rows (src/cpu/vec_convert.cpp) against BFloat16's own conversions, bit for
// bit: random bit patterns (every exponent, NaNs with payloads, subnormals), the edges of rounding
// and overflow, in rows of every length to 40 (the vector bodies and their tails).
TEST(CpuVecMath, Bf16RowsConvertAsBFloat16) {
  std::vector<uint32_t> bits;
  Generator gen(11);
  const Tensor r = randint(0, int64_t{1} << 32, {200000}, {.dtype = DType::i64}, &gen);
  // The edges first (in the rows' vector bodies: zeros beside subnormals and normal values, Note
  // [bf16 rounding instruction]) and last (in the long row's tail).
  const std::vector<uint32_t> edges = {
      0x00000000u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x00008000u, 0x00018000u,
      0x7f7fffffu, 0x7f7f8000u, 0x7f800000u, 0xff800000u, 0x7f800001u, 0x7fc00000u,
      0xffffffffu, 0x3f808000u, 0x3f818000u, 0x80008000u, 0x00000000u, 0x3f800000u,
      0x80000000u, 0x807fffffu, 0x00000000u, 0x00000000u, 0x3f808001u, 0x00000000u};
  bits = edges;
  for (const int64_t v : r.to_vector<int64_t>()) bits.push_back(static_cast<uint32_t>(v));
  bits.insert(bits.end(), edges.begin(), edges.begin() + 15);
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * 4);
  // The tensor casts' dense rows take them too (the copy kernel), both ways.
  const Tensor t = from_vector<float>(x, {static_cast<int64_t>(x.size())});
  const Tensor tb = t.to(DType::bf16);
  const auto* cast = static_cast<const BFloat16*>(tb.data_ptr());
  const std::vector<float> back = tb.to(DType::f32).to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(cast[i].bits, BFloat16(x[i]).bits) << "0x" << std::hex << bits[i];
    ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), static_cast<uint32_t>(cast[i].bits) << 16);
  }
  std::vector<int64_t> lengths = {static_cast<int64_t>(x.size())};
  for (int64_t n = 1; n <= 40; ++n) lengths.push_back(n);
  for (const int64_t n : lengths) {
    std::vector<BFloat16> got(static_cast<size_t>(n));
    cpu::vec::narrow_bf16_row(x.data(), n, got.data());
    std::vector<float> back(static_cast<size_t>(n));
    cpu::vec::widen_bf16_row(got.data(), n, back.data());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i].bits, BFloat16(x[i]).bits) << "0x" << std::hex << bits[i] << " n " << n;
      ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(float(got[i])));
    }
  }
}

// relu, its gradient and add on dense bf16 tensors (Note [bf16 elementwise rows]) give the f32
// ops' results on the widened values, rounded, bit for bit: random bit patterns (NaNs with
// payloads, infinities, subnormals and their sums) and the edges, in the vector bodies and tails,
// each edge added to each other one (+0 + -0, inf + -inf, the largest finite + its negative).
TEST(CpuVecMath, Bf16ElementwiseRowsAreTheF32OpsRounded) {
  Generator gen(13);
  const std::vector<uint16_t> edges = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080,
                                       0x7f7f, 0x7f80, 0xff80, 0x7f81, 0x7fc0, 0xffff,
                                       0x3f80, 0xbf80, 0x4000, 0xff7f, 0x807f, 0x0000};
  // The edges (rotated by `shift`) before and after n random patterns.
  const auto bits = [&](int64_t n, size_t shift) {
    std::vector<uint16_t> e = edges;
    std::rotate(e.begin(), e.begin() + static_cast<std::ptrdiff_t>(shift), e.end());
    std::vector<uint16_t> out = e;
    const Tensor r = randint(0, 1 << 16, {n}, {.dtype = DType::i64}, &gen);
    for (const int64_t v : r.to_vector<int64_t>()) out.push_back(static_cast<uint16_t>(v));
    out.insert(out.end(), e.begin(), e.end());
    return out;
  };
  const auto to_tensor = [](const std::vector<uint16_t>& b) {
    Tensor t = empty({static_cast<int64_t>(b.size())}, {.dtype = DType::bf16});
    std::memcpy(t.data_ptr(), b.data(), b.size() * 2);
    return t;
  };
  const auto same_bits = [](const Tensor& got, const Tensor& want) {
    ASSERT_EQ(got.numel(), want.numel());
    const Tensor g = got.contiguous(), w = want.contiguous();
    const auto* pg = static_cast<const uint16_t*>(g.data_ptr());
    const auto* pw = static_cast<const uint16_t*>(w.data_ptr());
    for (int64_t i = 0; i < g.numel(); ++i) {
      ASSERT_EQ(pg[i], pw[i]) << "element " << i << std::hex << " 0x" << pg[i] << " 0x" << pw[i];
    }
  };
  for (const int64_t n : {int64_t{0}, int64_t{9}, int64_t{100000}}) {
    for (size_t shift = 0; shift < edges.size(); ++shift) {
      SCOPED_TRACE(std::to_string(n) + " shift " + std::to_string(shift));
      const std::vector<uint16_t> ab = bits(n, 0);
      std::vector<uint16_t> bb = bits(n, shift);
      // Two NaNs: which payload an add keeps is the compiler's choice of operand order.
      for (size_t i = 0; i < ab.size(); ++i) {
        if ((ab[i] & 0x7fff) > 0x7f80 && (bb[i] & 0x7fff) > 0x7f80) bb[i] = 0x3f80;
      }
      const Tensor a = to_tensor(ab), b = to_tensor(bb);
      const Tensor a32 = a.to(DType::f32), b32 = b.to(DType::f32);
      same_bits(relu(a), relu(a32).to(DType::bf16));
      same_bits(add(a, b), add(a32, b32).to(DType::bf16));
      Tensor x = a.detach().requires_grad_();
      relu(x).backward(b);
      same_bits(x.grad(), where(gt(a32, 0.0), b32, zeros_like(b32)).to(DType::bf16));
    }
  }
}

// Batch norm's bf16 rows (Note [bf16 norm rows] in src/cpu/vec_norm.cpp): their f32 formulas,
// written out here, rounded as BFloat16 rounds, bit for bit, on the CPU's path (the rounding
// instruction where it has AVX512-BF16, Note [bf16 rounding instruction]), in rows of every length
// to 40 and a long one (the vector bodies and their tails): random bit patterns (NaNs, infinities,
// subnormals), values near the mean, and coefficients that make normal and subnormal results.
TEST(CpuVecMath, Bf16BatchNormRowsAreTheirF32FormulasRounded) {
  Generator gen(17);
  // Random bit patterns (finite: NaNs and infinities made 1), or values of about mu + 2 N(0, 1)
  // (`near`), whose formula's terms are of one size.
  const auto values = [&](int64_t n, bool finite, bool near, double mu) {
    std::vector<BFloat16> out;
    if (near) {
      for (const float v : add(mul(randn({n}, {}, &gen), 2.0), mu).to_vector<float>()) {
        out.push_back(BFloat16(v));
      }
      return out;
    }
    for (const int64_t v :
         randint(0, 1 << 16, {n}, {.dtype = DType::i64}, &gen).to_vector<int64_t>()) {
      BFloat16 b;
      b.bits = static_cast<uint16_t>(v);
      if (finite && (b.bits & 0x7f80) == 0x7f80) b.bits = 0x3f80;
      out.push_back(b);
    }
    return out;
  };
  const auto f = [](BFloat16 b) { return static_cast<float>(b); };
  // The long row is long enough for f32 results a rounding step apart to round to different bf16
  // values in some places: the formulas summed in another order, or fused, are caught.
  std::vector<int64_t> lengths = {(1 << 18) + 3};
  for (int64_t n = 1; n <= 40; ++n) lengths.push_back(n);
  // mean, scale, shift: results of every size, and subnormal ones (scale 1e-39).
  const double coefficients[][3] = {{0.3, 1.7, -0.25}, {1e5, 3e-3, 2.0}, {0.0, 1e-39, 0.0}};
  for (const int64_t n : lengths) {
    for (const auto& [mu, scale, shift] : coefficients) {
      const float hi = static_cast<float>(mu), lo = static_cast<float>(mu - hi);
      // Either operand of the gradient's sum may be NaN, not both: which payload an add keeps is
      // the compiler's choice of operand order.
      for (const int inputs : {0, 1, 2}) {  // x any bits, g finite; the other way; both near
        std::ostringstream trace;
        trace << "n " << n << " mu " << mu << " scale " << scale << " inputs " << inputs;
        SCOPED_TRACE(trace.str());
        const std::vector<BFloat16> x = values(n, inputs == 1, inputs == 2, mu),
                                    g = values(n, inputs == 0, inputs == 2, 0.0);
        std::vector<BFloat16> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
        cpu::vec::affine_row(x.data(), n, mu, scale, shift, y.data());
        const cpu::vec::BatchNormGrad p{mu, 0.7, scale, -0.125, 0.375};
        cpu::vec::batch_norm_grad_row(g.data(), x.data(), n, p, dx.data());
        const auto a = static_cast<float>(p.scale),
                   b = static_cast<float>(-p.scale * p.rstd * p.mean_dy_xhat),
                   c = static_cast<float>(-p.scale * p.mean_dy);
        for (size_t i = 0; i < x.size(); ++i) {
          const float xc = (f(x[i]) - hi) - lo;
          const float want_y = xc * static_cast<float>(scale) + static_cast<float>(shift);
          ASSERT_EQ(y[i].bits, BFloat16(want_y).bits) << i << std::hex << " x 0x" << x[i].bits;
          const float want_dx = f(g[i]) * a + (xc * b + c);
          ASSERT_EQ(dx[i].bits, BFloat16(want_dx).bits)
              << i << std::hex << " x 0x" << x[i].bits << " g 0x" << g[i].bits;
        }
      }
    }
  }
}

// bf16 and f16 softmax rows are the f32 rows of their widened values, rounded once (Note [half
// softmax rows] in src/cpu/softmax.cpp), forward and backward, on rows shorter and longer than a
// vector and with -inf entries (a causal mask's), in several rows split over the threads.
TEST(CpuVecMath, HalfSoftmaxRowsAreTheF32RowsRounded) {
  for (const DType half : {DType::bf16, DType::f16}) {
    for (const int64_t n : {1, 7, 33, 256, 1000}) {
      manual_seed(n);
      const int64_t rows = 64;
      Tensor x = mul(randn({rows, n}), 4.0);
      x = masked_fill(x, gt(triu(ones({rows, n}), 1), 0.5), -INFINITY).to(half);
      const Tensor g = randn({rows, n}).to(half);
      for (const bool log : {false, true}) {
        const Tensor y = log ? log_softmax(x, -1) : softmax(x, -1);
        const Tensor y32 = log ? log_softmax(x.to(DType::f32), -1) : softmax(x.to(DType::f32), -1);
        EXPECT_TRUE(testing::all_close(y.to(DType::f32), y32.to(half).to(DType::f32), 0, 0))
            << half << " n " << n << (log ? " log_softmax" : " softmax");
        // The gradient from the half y and g, and from their widened copies in f32.
        const auto backward = [&](const Tensor& gg, const Tensor& yy) {
          Tensor dx = empty(yy.shape(), {.dtype = yy.dtype()});
          cpu::softmax_rows_backward(kern::Ctx{}, gg.data_ptr(), yy.data_ptr(), yy.dtype(), rows, n,
                                     1, log, dx.data_ptr());
          return dx;
        };
        const Tensor dx = backward(g, y), dx32 = backward(g.to(DType::f32), y.to(DType::f32));
        EXPECT_TRUE(testing::all_close(dx.to(DType::f32), dx32.to(half).to(DType::f32), 0, 0))
            << half << " n " << n << (log ? " log_softmax" : " softmax") << " backward";
      }
    }
  }
}

}  // namespace
// Per Note [row blocks], a row's whole blocks run in place, its last partial block through
// zero-padded local arrays; an element gets the same bits either way (else they would depend on
// where the threads cut a row). Each row on rows of 16 (whole blocks) against the same values in
// rows of 1 to 15 (a partial block alone), and in a row of 37 that starts in the middle of a block
// (in place, too).
TEST(CpuVecMath, ARowsPartialBlockGivesTheWholeBlocksBits) {
  const std::vector<float> x = inputs();
  const auto n = static_cast<int64_t>(x.size()) / 16 * 16;
  const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b, int64_t at,
                            int64_t count) {
    return std::memcmp(a.data() + at, b.data() + at, static_cast<size_t>(count) * 4) == 0;
  };
  for (const auto op : {kern::UnaryOp::Exp, kern::UnaryOp::Tanh, kern::UnaryOp::Sigmoid,
                        kern::UnaryOp::Silu, kern::UnaryOp::GeluTanh, kern::UnaryOp::Gelu}) {
    const cpu::vec::RowFn row = cpu::vec::unary_row(op);
    ASSERT_NE(row, nullptr);
    std::vector<float> whole(x.size()), part(x.size());
    row(x.data(), whole.data(), n);
    for (int64_t b = 0; b < n; b += 16) row(x.data() + b, part.data() + b, 1 + (b / 16) % 15);
    int bad = 0;
    for (int64_t b = 0; b < n && bad < 3; b += 16) {
      if (!same_bits(whole, part, b, 1 + (b / 16) % 15)) ++bad;
    }
    EXPECT_EQ(bad, 0) << "unary op " << static_cast<int>(op);
    std::vector<float> in_place(x.begin(), x.end());
    for (int64_t b = 7; b + 37 <= n; b += 37) row(in_place.data() + b, in_place.data() + b, 37);
    EXPECT_TRUE(same_bits(whole, in_place, 7, (n - 7) / 37 * 37))
        << "unary op " << static_cast<int>(op);
  }
  for (const auto op : {kern::BinaryOp::GeluBackward, kern::BinaryOp::GeluTanhBackward}) {
    const cpu::vec::BinaryRowFn row = cpu::vec::binary_row(op);
    ASSERT_NE(row, nullptr);
    std::vector<float> g(x.size()), whole(x.size()), part(x.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(static_cast<float>(i));
    row(g.data(), x.data(), whole.data(), n);
    for (int64_t b = 0; b < n; b += 16) {
      row(g.data() + b, x.data() + b, part.data() + b, 1 + (b / 16) % 15);
    }
    int bad = 0;
    for (int64_t b = 0; b < n && bad < 3; b += 16) {
      if (!same_bits(whole, part, b, 1 + (b / 16) % 15)) ++bad;
    }
    EXPECT_EQ(bad, 0) << "binary op " << static_cast<int>(op);
  }
}

}  // namespace sinter

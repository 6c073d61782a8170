// The exact gelu's two kinds of CPU row (Note [gelu tables] in src/cpu/vec_elementwise.cpp): the
// AVX-512 tables and Note [exact gelu row]'s formula, each against the f64 formulas over the f32
// range and at the tables' edges, and the tables' promise that a lane's result does not depend on
// the other lanes of its block.
#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "cpu/vec_rows.h"
#include "test_util.h"

namespace sinter {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

double phi_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double gelu_grad(double x) {
  return phi_cdf(x) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

// A sweep of [-120, 120] by 1e-3, the ends of every interval of the tables (multiples of 0.1875
// up to 6 on both sides, of 0.125 from -10 to -6) and the first interval's centre, with their
// neighbours in f32, and the edge values of the f32 range.
std::vector<float> inputs() {
  std::vector<float> x;
  for (int i = -120000; i <= 120000; ++i) x.push_back(static_cast<float>(i) * 1e-3f);
  std::vector<float> edges = {0.09375f, -0.09375f};
  for (int k = 1; k <= 32; ++k) {
    edges.push_back(0.1875f * static_cast<float>(k));
    edges.push_back(-0.1875f * static_cast<float>(k));
    edges.push_back(-6.0f - 0.125f * static_cast<float>(k));
  }
  for (const float e : edges) {
    float up = e, down = e;
    for (int k = 0; k < 3; ++k) {
      x.push_back(up);
      x.push_back(down);
      up = std::nextafter(up, kInf);
      down = std::nextafter(down, -kInf);
    }
  }
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-8f, -13.0f, 1e30f, -1e30f, kInf, -kInf,
                  std::numeric_limits<float>::quiet_NaN()}) {
    x.push_back(v);
  }
  return x;
}

// Failures past the fifth are not printed.
struct Failures {
  int count = 0;
  void add(const std::string& what) {
    if (++count <= 5) ADD_FAILURE() << what;
  }
};

bool same_kind(double got, double want) {  // for non-finite results: the same NaN or infinity
  return std::isnan(got) ? std::isnan(want) : got == want;
}

// The distance from got to want in units of f32's spacing at want.
double ulps(double got, double want) {
  const auto w = static_cast<float>(want);
  return std::abs(got - want) / (std::nextafter(std::abs(w), kInf) - std::abs(w));
}

// gelu: within 4 f32 ulp of x Phi(x) (in f64) or 1e-35, as the op's test holds the row, and from
// 4.5 to 9 (where x Phi(x) comes to round to x) within 2 ulp.
void expect_gelu_close(const char* kind, cpu::vec::RowFn row) {
  const std::vector<float> x = inputs();
  std::vector<float> y(x.size());
  row(x.data(), y.data(), static_cast<int64_t>(x.size()));
  Failures bad;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = x[i] * phi_cdf(x[i]), got = y[i];
    bool ok = std::isfinite(static_cast<float>(want)) && std::isfinite(got)
                  ? std::abs(got - want) <= 4 * std::abs(want) * FLT_EPSILON ||
                        std::abs(got - want) <= 1e-35
                  : same_kind(got, static_cast<float>(want));
    if (x[i] >= 4.5f && x[i] <= 9.0f && ulps(got, want) > 2) ok = false;
    if (!ok)
      bad.add(std::string(kind) + " gelu(" + std::to_string(x[i]) + ") = " + std::to_string(got) +
              ", want " + std::to_string(want));
  }
}

// gelu's gradient with g = 1: within 2.5e-7 of Phi(x) + x phi(x), and from -10 to -1.5 (its tail,
// where the values are small) within 8 f32 ulp of it.
void expect_gradient_close(const char* kind, cpu::vec::BinaryRowFn row) {
  const std::vector<float> x = inputs(), g(x.size(), 1.0f);
  std::vector<float> y(x.size());
  row(g.data(), x.data(), y.data(), static_cast<int64_t>(x.size()));
  Failures bad;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i], got = y[i];
    // The formula's f64 form gives NaN at +-inf (x phi(x) is inf times 0), as the rows do.
    const double want = std::isinf(v) ? std::nan("") : gelu_grad(v);
    bool ok;
    if (!std::isfinite(want) || !std::isfinite(got)) {
      ok = same_kind(got, want);
    } else {
      ok = std::abs(got - want) <= 2.5e-7;
      if (v < -1.5 && v >= -10) ok = ok && std::abs(got - want) <= 8 * std::abs(want) * FLT_EPSILON;
    }
    if (!ok)
      bad.add(std::string(kind) + " gelu'(" + std::to_string(v) + ") = " + std::to_string(got) +
              ", want " + std::to_string(want));
  }
}

TEST(GeluRows, TheTablesAndTheFormulaMatchTheF64Formulas) {
  expect_gelu_close("op's row", cpu::vec::unary_row(kern::UnaryOp::Gelu));
  expect_gelu_close("formula", cpu::vec::gelu_formula_row());
  expect_gradient_close("op's row", cpu::vec::binary_row(kern::BinaryOp::GeluBackward));
  expect_gradient_close("formula", cpu::vec::gelu_backward_formula_row());
}

TEST(GeluRows, TheTablesRunWhereTheCpuHasAvx512) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512F: the rows are the formula's";
  EXPECT_NE(cpu::vec::unary_row(kern::UnaryOp::Gelu), cpu::vec::gelu_formula_row());
  EXPECT_NE(cpu::vec::binary_row(kern::BinaryOp::GeluBackward),
            cpu::vec::gelu_backward_formula_row());
#else
  GTEST_SKIP() << "not x86-64: the rows are the formula's";
#endif
}

// Each value of a sweep of [-16, 16] by 1/64 (and the edges of inputs()) in every lane of a block
// whose other lanes hold one of: values inside the first tables, a value in the tail tables, a
// value past 6 (gelu x, the gradient g), one the formula takes (-50, -inf, NaN; +inf in the
// gradient), with gradients g among them that are infinite or NaN: its result has the bits it has
// alone. The gradient row in place of g or of x gives the same bits.
TEST(GeluRows, ALanesResultDoesNotDependOnItsNeighbours) {
  std::vector<float> values;
  for (int i = -1024; i <= 1024; ++i) values.push_back(static_cast<float>(i) / 64);
  const std::vector<float> edges = inputs();
  values.insert(values.end(), edges.begin() + 240001, edges.end());  // past the sweep
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float others[] = {0.5f, -7.0f, 7.0f, -50.0f, nan, kInf, -kInf};
  const cpu::vec::RowFn fwd = cpu::vec::unary_row(kern::UnaryOp::Gelu);
  const cpu::vec::BinaryRowFn bwd = cpu::vec::binary_row(kern::BinaryOp::GeluBackward);
  const auto same = [](float a, float b) {
    return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
  };
  Failures bad;
  for (size_t k = 0; k < values.size(); ++k) {
    const float v = values[k], g = k % 3 == 0 ? 0.75f : -1.3f;
    float alone_y, alone_dx;
    fwd(&v, &alone_y, 1);
    bwd(&g, &v, &alone_dx, 1);
    for (const float other : others) {
      float x[16], gs[16], y[16], dx[16];
      for (int j = 0; j < 16; ++j) {
        x[j] = j % 5 == 2 ? other : 0.25f * static_cast<float>(j) - 2.0f;
        gs[j] = j % 7 == 3 ? kInf : j % 7 == 5 ? nan : 0.5f;
      }
      const auto lane = static_cast<int>(k % 16);
      x[lane] = v;
      gs[lane] = g;
      fwd(x, y, 16);
      bwd(gs, x, dx, 16);
      if (!same(y[lane], alone_y) || !same(dx[lane], alone_dx)) {
        bad.add("x = " + std::to_string(v) + " beside " + std::to_string(other) + ": gelu " +
                std::to_string(y[lane]) + " against " + std::to_string(alone_y) +
                " alone, gradient " + std::to_string(dx[lane]) + " against " +
                std::to_string(alone_dx));
      }
    }
  }
  std::vector<float> gs(values.size()), dx(values.size());
  for (size_t k = 0; k < gs.size(); ++k) gs[k] = std::sin(static_cast<float>(k));
  const auto n = static_cast<int64_t>(values.size());
  bwd(gs.data(), values.data(), dx.data(), n);
  std::vector<float> on_g = gs, on_x = values;
  bwd(on_g.data(), values.data(), on_g.data(), n);
  bwd(gs.data(), on_x.data(), on_x.data(), n);
  for (size_t k = 0; k < dx.size(); ++k) {
    if (!same(dx[k], on_g[k]) || !same(dx[k], on_x[k])) {
      bad.add("the gradient row in place at x = " + std::to_string(values[k]));
    }
  }
}

// The table rows' errors over every f32 from -10 to 6.5 (Note [gelu tables]), at their largest
// points and over a sweep by 1e-4: gelu within 2.6 ulp from -6 on and 3.3 below, its derivative
// within 7.4e-8 and, from -10 to -1.5, within 2.3 ulp. The rows' results are the same bits on every
// CPU with AVX-512F.
TEST(GeluRows, TheTablesKeepTheirMeasuredBounds) {
  if (cpu::vec::unary_row(kern::UnaryOp::Gelu) == cpu::vec::gelu_formula_row()) {
    GTEST_SKIP() << "no AVX-512F: the rows are the formula's";
  }
  const float worst[] = {-9.99751759f, -5.99249554f, 1.31452405f, -5.99985361f};
  const int64_t n = 165001 + 4;
  std::vector<float> x(n), y(n), dx(n), g(n, 1.0f);
  for (int64_t i = 0; i < 165001; ++i) x[i] = static_cast<float>(i - 100000) * 1e-4f;
  std::copy(std::begin(worst), std::end(worst), x.end() - 4);
  cpu::vec::unary_row(kern::UnaryOp::Gelu)(x.data(), y.data(), n);
  cpu::vec::binary_row(kern::BinaryOp::GeluBackward)(g.data(), x.data(), dx.data(), n);
  Failures bad;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i], want = v * phi_cdf(v), want_dx = gelu_grad(v);
    if (want != 0 && ulps(y[i], want) > (v < -6 ? 3.3 : 2.6)) {
      bad.add("gelu(" + std::to_string(v) + ") off by " + std::to_string(ulps(y[i], want)) +
              " ulp");
    }
    if (std::abs(dx[i] - want_dx) > 7.4e-8 || (v < -1.5 && ulps(dx[i], want_dx) > 2.3)) {
      bad.add("gelu'(" + std::to_string(v) + ") = " + std::to_string(dx[i]) + ", want " +
              std::to_string(want_dx));
    }
  }
}

}  // namespace
}  // namespace sinter

// The reductions' mergeable states (kernels/merges.h) in the trees the kernels make: batch norm's
// Welford combine and softmax's online (maximum, sum), folded element by element and merged over
// random splits in random orders, against two-pass references in double, with the special values
// softmax keeps as its CPU reference does.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "merges.h"

namespace sinter::testing {
namespace {

using cudak::MaxSum;
using cudak::Welford;

// Splits [0, n) into random pieces, folds each with `leaf`, then merges the pieces pairwise in a
// random order (any binary tree the lanes, warps, blocks and splits could make).
template <class S, class Leaf, class Merge>
S random_tree(size_t n, std::mt19937& rng, Leaf leaf, Merge merge) {
  std::vector<S> parts;
  size_t i = 0;
  while (i < n) {
    const size_t len = 1 + rng() % 9;
    parts.push_back(leaf(i, std::min(n, i + len)));
    i += len;
  }
  while (parts.size() > 1) {
    const size_t a = rng() % (parts.size() - 1);
    parts[a] = (rng() % 2) ? merge(parts[a], parts[a + 1]) : merge(parts[a + 1], parts[a]);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(a) + 1);
  }
  return parts.empty() ? leaf(0, 0) : parts[0];
}

TEST(Merges, WelfordTreesMatchTheTwoPassMoments) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = 1 + rng() % 300;
    // An offset far above the spread: a sum of squares would cancel in f32, Welford must not.
    const double offset = trial % 2 ? 1e4 : 0.0;
    std::normal_distribution<double> dist(offset, 1.0 + trial % 5);
    std::vector<float> x(n);
    for (float& v : x) v = static_cast<float>(dist(rng));
    double mean = 0, m2 = 0;
    for (float v : x) mean += v;
    mean /= static_cast<double>(n);
    for (float v : x) m2 += (v - mean) * (v - mean);
    const Welford<float> w = random_tree<Welford<float>>(
        n, rng,
        [&](size_t b, size_t e) {
          Welford<float> s{0, 0, 0};
          for (size_t i = b; i + 4 <= e; i += 4) {  // whole vectors of 4, as the kernel loads
            const float v[4] = {x[i], x[i + 1], x[i + 2], x[i + 3]};
            s = cudak::welford_combine(s, cudak::welford_of<4>(v));
          }
          for (size_t i = b + (e - b) / 4 * 4; i < e; ++i) {
            s = cudak::welford_combine(s, Welford<float>{1, x[i], 0});
          }
          return s;
        },
        [](Welford<float> a, Welford<float> b) { return cudak::welford_combine(a, b); });
    ASSERT_EQ(w.n, static_cast<float>(n));
    EXPECT_NEAR(w.mean, mean, 1e-5 * (1 + std::abs(mean))) << "trial " << trial;
    EXPECT_NEAR(w.m2 / n, m2 / n, 1e-3 * (m2 / n) + 1e-6) << "trial " << trial;
  }
}

// softmax's (m, s) of a row in double, two passes, with the CPU reference's special values.
MaxSum<double> two_pass(const std::vector<double>& x) {
  double m = -INFINITY;
  bool nan = false;
  for (double v : x) {
    if (v != v) {
      nan = true;
    } else {
      m = std::max(m, v);
    }
  }
  double s = 0;
  for (double v : x) s += std::exp(v - m);  // exp(inf - inf), exp(-inf + inf): NaN
  if (nan || m == -INFINITY) s = NAN;
  return {m, s};
}

TEST(Merges, OnlineSoftmaxTreesMatchTheTwoPassSums) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-30, 30);
  const double inf = std::numeric_limits<double>::infinity();
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = 1 + rng() % 200;
    std::vector<double> x(n);
    for (double& v : x) v = u(rng);
    // Special values in some rows: -inf (masked), +inf, NaN, or only -inf.
    const int kind = trial % 8;
    if (kind == 1) x[rng() % n] = -inf;
    if (kind == 2) x[rng() % n] = inf;
    if (kind == 3) x[rng() % n] = NAN;
    if (kind == 4) x.assign(n, -inf);
    if (kind == 5) {
      for (size_t i = 0; i < n; i += 2) x[i] = -inf;
    }
    const MaxSum<double> want = two_pass(x);
    const MaxSum<double> got = cudak::finish_max_sum(random_tree<MaxSum<double>>(
        n, rng,
        [&](size_t b, size_t e) {
          MaxSum<double> s = cudak::max_sum_identity<double>();
          for (size_t i = b; i < e; ++i) cudak::max_sum_add(s, x[i]);
          return s;
        },
        [](MaxSum<double> a, MaxSum<double> b) { return cudak::CombineMaxSum{}(a, b); }));
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", kind " << kind);
    if (std::isnan(want.s)) {
      EXPECT_TRUE(std::isnan(got.s)) << "s " << got.s;
      continue;
    }
    EXPECT_EQ(got.m, want.m);
    EXPECT_NEAR(got.s, want.s, 1e-12 * want.s);
  }
}

}  // namespace
}  // namespace sinter::testing

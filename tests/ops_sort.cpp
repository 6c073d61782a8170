// Op-table rows of topk, sort, argsort, the searches and unique (see op_table.h), with the order of
// ties and NaN, and multinomial's draws against the weights.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> sort_rows() {
  return {
      // topk's values: largest and smallest, k = 1 and k = n, dim not last, and a k past the CUDA
      // kernel's rounds (its sort path); the indices compared exactly across devices.
      {.name = "TopkLargest",
       .shapes = {S{3, 6}},
       .fn = [](const Inputs& x) { return first(topk(x[0], 3)); }},
      {.name = "TopkSmallestDim0",
       .shapes = {S{5, 4}},
       .fn = [](const Inputs& x) { return first(topk(x[0], 2, 0, false)); }},
      {.name = "TopkOne",
       .shapes = {S{4, 7}},
       .fn = [](const Inputs& x) { return first(topk(x[0], 1)); }},
      {.name = "TopkAllDim1",
       .shapes = {S{2, 5, 3}},
       .fn = [](const Inputs& x) { return first(topk(x[0], 5, 1)); }},
      {.name = "TopkSorted",
       .shapes = {S{2, 30}},
       .fn = [](const Inputs& x) { return first(topk(x[0], 20, 1, false)); }},
      {.name = "TopkIndices",
       .shapes = {S{3, 40}},
       .fn =
           [](const Inputs& x) {
             return cat({second(topk(x[0], 4)), second(topk(x[0].t(), 25, 0, false)).t()}, 1);
           },
       .grad = false},
      // sort (topk of the whole dim), argsort, and the searches of sorted boundaries.
      {.name = "Sort",
       .shapes = {S{3, 5}},
       .fn = [](const Inputs& x) { return first(sort(x[0])); }},
      {.name = "SortDescendingDim0",
       .shapes = {S{4, 3}},
       .fn = [](const Inputs& x) { return first(sort(x[0], 0, true)); }},
      {.name = "Argsort",
       .shapes = {S{3, 40}},
       .fn = [](const Inputs& x) { return argsort(x[0], 1, true); },
       .grad = false},
      {.name = "Searchsorted",
       .shapes = {S{2, 6}, S{2, 5}},
       .fn =
           [](const Inputs& x) {
             const Tensor b = first(sort(x[0]));
             return cat({searchsorted(b, x[1]), searchsorted(b, x[1], true)}, 1);
           },
       .grad = false},
      {.name = "Bucketize",
       .shapes = {S{7}, S{3, 4}},
       .fn = [](const Inputs& x) { return bucketize(x[1], first(sort(x[0]))); },
       .grad = false},
      {.name = "Unique",
       .shapes = {S{4, 6}},
       .fn =
           [](const Inputs& x) {
             const auto [u, inverse, counts] = unique(floor_divide(x[0], 0.5), true, true);
             return cat({u, inverse.reshape({-1}).to(u.dtype()), counts.to(u.dtype())});
           },
       .grad = false},
  };
}

}  // namespace sinter::testing

namespace sinter {
namespace {

TEST(Topk, SortsTiesByIndexAndRanksNanLargest) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = from_vector<double>({1, 3, nan, 3, -0.0, 0.0, 2, nan}, {8});
  auto [v, i] = topk(x, 8);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{2, 7, 1, 3, 6, 0, 4, 5}));
  EXPECT_TRUE(testing::all_close(v, from_vector<double>({nan, nan, 3, 3, 2, 1, 0, 0}, {8}), 0, 0));
  auto [vs, is] = topk(x, 8, 0, false);
  EXPECT_EQ(is.to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 0, 6, 1, 3, 2, 7}));
  EXPECT_EQ(std::get<1>(topk(x, 3, 0, false)).to_vector<int64_t>(),
            (std::vector<int64_t>{4, 5, 0}));
  EXPECT_TRUE(std::isnan(vs.to_vector<double>()[7]));

  // Along dim 0 of a (3, 2): the columns' two largest, ties by the smaller row.
  const Tensor m = from_vector<int64_t>({5, 1, 7, 1, 5, 0}, {3, 2}).to(DType::i32);
  auto [mv, mi] = topk(m, 2, 0);
  EXPECT_EQ(mv.dtype(), DType::i32);
  EXPECT_EQ(mv.shape(), (Shape{2, 2}));
  EXPECT_EQ(mv.to_vector<int64_t>(), (std::vector<int64_t>{7, 1, 5, 1}));
  EXPECT_EQ(mi.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(std::get<0>(topk(zeros({2, 3}), 0)).shape(), (Shape{2, 0}));
  EXPECT_EQ(std::get<1>(topk(full({}, 4.0), 1)).shape(), Shape{});

  // The gradient of the values goes to the chosen positions.
  Tensor g = from_vector<double>({0.5, 4, -1, 4}, {4}).requires_grad_(true);
  sum(mul(std::get<0>(topk(g, 2)), from_vector<double>({10, 1}, {2}))).backward();
  EXPECT_EQ(g.grad().to_vector<double>(), (std::vector<double>{0, 10, 0, 1}));

  testing::expect_error([&] { topk(x, 9); }, {"topk", "k = 9", "dim -1 of size 8"});
  testing::expect_error([&] { topk(x, -1); }, {"topk", "k = -1"});
  testing::expect_error([&] { topk(m, 1, 2); }, {"topk", "dim 2", "2 dims"});
}

// Pearson's chi-square of the counts of 0..n-1 in `draws` against probabilities weights / sum,
// over the categories of positive weight; draws of a zero weight fail the test.
double chi_square(const std::vector<int64_t>& draws, const std::vector<double>& weights) {
  std::vector<double> count(weights.size(), 0.0);
  for (int64_t d : draws) {
    EXPECT_TRUE(d >= 0 && d < static_cast<int64_t>(weights.size())) << d;
    if (d >= 0 && d < static_cast<int64_t>(weights.size())) count[static_cast<size_t>(d)] += 1;
  }
  double total = 0, chi2 = 0;
  for (double w : weights) total += w;
  for (size_t j = 0; j < weights.size(); ++j) {
    if (weights[j] == 0) {
      EXPECT_EQ(count[j], 0) << "category " << j << " has weight 0";
      continue;
    }
    const double expected = static_cast<double>(draws.size()) * weights[j] / total;
    chi2 += (count[j] - expected) * (count[j] - expected) / expected;
  }
  return chi2;
}

TEST(Multinomial, FrequenciesFollowTheWeights) {
  // Bounds far in the chi-square tails (p about 1e-4 for 3 and 1 degrees of freedom), which a
  // sampler off by one category or uniform over the non-zero ones fails by far.
  const std::vector<double> w0 = {1, 0, 3, 6, 0, 2}, w1 = {0, 5, 0, 0, 5, 0};
  std::vector<double> both = w0;
  both.insert(both.end(), w1.begin(), w1.end());
  Generator gen(1234);
  const Tensor draws = multinomial(from_vector<double>(both, {2, 6}), 20000, true, &gen);
  EXPECT_EQ(draws.dtype(), DType::i64);
  EXPECT_EQ(draws.shape(), (Shape{2, 20000}));
  const std::vector<int64_t> d = draws.to_vector<int64_t>();
  EXPECT_LT(chi_square({d.begin(), d.begin() + 20000}, w0), 21.0);
  EXPECT_LT(chi_square({d.begin() + 20000, d.end()}, w1), 15.0);

  // Without replacement: 3000 rows of the same weights, each a draw of all 4 non-zero categories.
  // Each row's samples are distinct; the first of each row follows the weights.
  const Tensor rows = from_vector<double>(w0, {1, 6}).to(DType::f32).expand({3000, 6});
  const std::vector<int64_t> perm = multinomial(rows, 4, false, &gen).to_vector<int64_t>();
  std::vector<int64_t> firsts;
  for (size_t r = 0; r < 3000; ++r) {
    std::vector<int64_t> row(perm.begin() + 4 * r, perm.begin() + 4 * r + 4);
    firsts.push_back(row[0]);
    std::sort(row.begin(), row.end());
    EXPECT_EQ(row, (std::vector<int64_t>{0, 2, 3, 5})) << "row " << r;
  }
  EXPECT_LT(chi_square(firsts, w0), 21.0);
  // 1-D weights give a 1-D draw.
  const Tensor pair = multinomial(from_vector<double>(w1, {6}), 2, false, &gen);
  EXPECT_EQ(pair.shape(), (Shape{2}));
  std::vector<int64_t> got = pair.to_vector<int64_t>();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int64_t>{1, 4}));
}

TEST(Multinomial, SeedsRepeatAndBadWeightsAreErrors) {
  const Tensor w = from_vector<double>({0.1, 0.2, 0.3, 0.4}, {4});
  Generator a(7), b(7), c(8);
  const auto da = multinomial(w, 50, true, &a).to_vector<int64_t>();
  EXPECT_EQ(da, multinomial(w, 50, true, &b).to_vector<int64_t>());
  EXPECT_NE(da, multinomial(w, 50, true, &c).to_vector<int64_t>());
  EXPECT_EQ(multinomial(w, 4, false, &a).to_vector<int64_t>(),
            multinomial(w, 4, false, &b).to_vector<int64_t>());
  // A sample of 1 from a one-hot row is that category.
  EXPECT_EQ(multinomial(from_vector<double>({0, 0, 2}, {1, 3}), 2, true).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 2}));

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  testing::expect_error(
      [] {
        multinomial(from_vector<double>({1, -0.5}, {2}), 1);
      },
      {"multinomial", "non-negative", "-0.5"});
  testing::expect_error(
      [&] {
        multinomial(from_vector<double>({1, nan}, {2}), 1);
      },
      {"multinomial", "NaN"});
  testing::expect_error(
      [&] {
        multinomial(from_vector<double>({1, inf}, {2}), 1);
      },
      {"multinomial", "finite", "inf"});
  testing::expect_error(
      [] {
        multinomial(from_vector<double>({1, 1, 0, 0}, {2, 2}), 1);
      },
      {"multinomial", "row 1", "all zero"});
  testing::expect_error(
      [] {
        multinomial(from_vector<double>({1, 0, 1}, {3}), 3);
      },
      {"multinomial", "3 samples without replacement", "2 non-zero"});
  testing::expect_error(
      [] {
        multinomial(ones({2, 2, 2}), 1);
      },
      {"multinomial", "1-D", "2-D", "[2, 2, 2]"});
  testing::expect_error([] { multinomial(ones({3}).to(DType::i64), 1); },
                        {"multinomial", "floating", "i64"});
  testing::expect_error([] { multinomial(ones({3}), 0); }, {"multinomial", "positive", "0"});
  testing::expect_error([] { multinomial(ones({2, 0}), 1); }, {"multinomial", "no categories"});
}

}  // namespace
}  // namespace sinter

// Op-table rows of the index family (see op_table.h): gather and scatter_add (repeated indices,
// whose gradients accumulate; an index smaller than the tensor in the other dims; strided tensors;
// src larger than the index), scatter, scatter_reduce's five reductions (with and without the
// tensor's own values), index_copy, index_fill, index_reduce and index_select; embedding's rows are
// here too.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "op_table.h"

namespace sinter::testing {

namespace {

// scatter, scatter_reduce's reductions and the index ops over them.
std::vector<OpRow> scatter_rows() {
  return {
      {.name = "Scatter",
       .shapes = {S{3, 4}, S{2, 5}},
       .fn =
           [](const Inputs& x) {
             // Each target once: an overwritten source gets the gradient too, as torch's,
             // which differences would not see.
             return scatter(x[0], 1, index_of({3, 0, 2, 1, 2, 0}, {2, 3}, x[0]), x[1]);
           }},
      {.name = "ScatterValue",
       .shapes = {S{4, 3}},
       .fn =
           [](const Inputs& x) {
             return scatter(x[0], 0, index_of({0, 3, 3, 0, 1, 3}, {2, 3}, x[0]), Scalar(2.5));
           }},
      {.name = "ScatterReduceSum",
       .shapes = {S{3, 4}, S{2, 5}},
       .fn =
           [](const Inputs& x) {
             return scatter_reduce(x[0], 1, index_of({3, 0, 3, 1, 1, 1}, {2, 3}, x[0]), x[1],
                                   ScatterReduce::Sum);
           }},
      {.name = "ScatterReduceProd",
       .shapes = {S{4, 3}, S{3, 3}},
       .fn =
           [](const Inputs& x) {
             return scatter_reduce(x[0], 0, index_of({0, 3, 3, 0, 1, 3, 2, 1, 3}, {3, 3}, x[0]),
                                   x[1], ScatterReduce::Prod);
           }},
      {.name = "ScatterReduceProdNoSelf",
       .shapes = {S{4, 3}, S{3, 3}},
       .fn =
           [](const Inputs& x) {
             return scatter_reduce(x[0], 0, index_of({0, 3, 3, 0, 1, 3, 2, 1, 3}, {3, 3}, x[0]),
                                   x[1], ScatterReduce::Prod, false);
           }},
      {.name = "ScatterReduceMean",
       .shapes = {S{3, 4}, S{2, 5}},
       .fn =
           [](const Inputs& x) {
             return scatter_reduce(x[0], 1, index_of({3, 0, 3, 1, 1, 1}, {2, 3}, x[0]), x[1],
                                   ScatterReduce::Mean);
           }},
      {.name = "ScatterReduceMeanNoSelf",
       .shapes = {S{3, 4}, S{2, 5}},
       .fn =
           [](const Inputs& x) {
             return scatter_reduce(x[0], 1, index_of({3, 0, 3, 1, 1, 1}, {2, 3}, x[0]), x[1],
                                   ScatterReduce::Mean, false);
           }},
      {.name = "ScatterReduceAmax",
       .shapes = {S{3, 4}, S{2, 5}},
       .fn =
           [](const Inputs& x) {
             return scatter_reduce(x[0], 1, index_of({3, 0, 3, 1, 1, 1}, {2, 3}, x[0]), x[1],
                                   ScatterReduce::Amax);
           }},
      {.name = "ScatterReduceAminNoSelf",
       .shapes = {S{4, 3}, S{3, 3}},
       .fn =
           [](const Inputs& x) {
             return scatter_reduce(x[0], 0, index_of({0, 3, 3, 0, 1, 3, 2, 1, 3}, {3, 3}, x[0]),
                                   x[1], ScatterReduce::Amin, false);
           }},
      {.name = "IndexCopy",
       .shapes = {S{2, 5, 3}, S{2, 3, 3}},
       .fn =
           [](const Inputs& x) {
             return index_copy(x[0], 1, index_of({4, 0, 2}, {3}, x[0]), x[1]);
           }},
      {.name = "IndexFill",
       .shapes = {S{5, 3}},
       .fn =
           [](const Inputs& x) {
             return index_fill(x[0], 0, index_of({4, 1}, {2}, x[0]), -1.5);
           }},
      {.name = "IndexReduceAmin",
       .shapes = {S{2, 5, 3}, S{2, 4, 3}},
       .fn =
           [](const Inputs& x) {
             return index_reduce(x[0], 1, index_of({4, 0, 4, 2}, {4}, x[0]), x[1],
                                 ScatterReduce::Amin, false);
           }},
  };
}

}  // namespace

std::vector<OpRow> index_rows() {
  std::vector<OpRow> rows = {
      {.name = "GatherRepeats",
       .shapes = {S{3, 4}},
       .fn =
           [](const Inputs& x) {
             return gather(x[0], 1, index_of({0, 0, 3, 1, 2, 2}, {3, 2}, x[0]));
           }},
      {.name = "GatherDim0Smaller",
       .shapes = {S{4, 3}},
       .fn =
           [](const Inputs& x) {
             return gather(x[0], 0, index_of({3, 0, 3, 3}, {2, 2}, x[0]));
           }},
      {.name = "GatherStrided3d",
       .shapes = {S{3, 5, 2}},
       .fn =
           [](const Inputs& x) {
             const Tensor idx =
                 index_of({4, 0, 1, 1, 4, 2, 3, 3, 0, 2, 2, 2, 0, 1, 4, 4, 3, 0, 1, 1, 1, 0, 0, 4},
                          {2, 4, 3}, x[0]);
             return gather(x[0].transpose(0, 2), -2, idx);
           }},
      {.name = "ScatterAdd",
       .shapes = {S{3, 4}, S{2, 5}},
       .fn =
           [](const Inputs& x) {
             return scatter_add(x[0], 1, index_of({3, 0, 3, 1, 1, 1}, {2, 3}, x[0]), x[1]);
           }},
      {.name = "ScatterAddDim0",
       .shapes = {S{4, 3}, S{3, 3}},
       .fn =
           [](const Inputs& x) {
             return scatter_add(x[0], 0, index_of({0, 3, 3, 0, 1, 3, 2, 1, 3}, {3, 3}, x[0]), x[1]);
           }},
      {.name = "IndexSelect",
       .shapes = {S{5, 3}},
       .fn =
           [](const Inputs& x) {
             Tensor idx = from_vector<int64_t>({4, 0, 4, 2}, {4}).to(x[0].device());
             return index_select(x[0], 0, idx);
           }},
      {.name = "IndexSelectInner",
       .shapes = {S{2, 5, 3}},
       .fn =
           [](const Inputs& x) {
             Tensor idx = from_vector<int64_t>({1, 1, 3}, {3}).to(x[0].device());
             return index_select(x[0], 1, idx);
           }},
      {.name = "IndexAdd",
       .shapes = {S{2, 5, 3}, S{2, 4, 3}},
       .fn =
           [](const Inputs& x) {
             return index_add(x[0], 1, index_of({4, 0, 4, 2}, {4}, x[0]), x[1], 0.5);
           }},
      {.name = "Embedding",
       .shapes = {S{6, 3}},
       .fn =
           [](const Inputs& x) {
             Tensor idx = from_vector<int64_t>({4, 0, 4, 2, 5, 0}, {2, 3}).to(x[0].device());
             return embedding(x[0], idx);
           }},
      // The padding row gets no gradient, so the outputs that read it are masked out: the
      // function then does not depend on that row either, and the gradcheck holds.
      {.name = "EmbeddingPadding",
       .shapes = {S{5, 2}},
       .fn =
           [](const Inputs& x) {
             Tensor idx = from_vector<int64_t>({1, 3, 1, 0}, {4}).to(x[0].device());
             Tensor keep = ne(idx, 1.0).to(x[0].dtype()).unsqueeze(1);
             return mul(embedding(x[0], idx, 1), keep);
           }},
  };
  for (OpRow& r : scatter_rows()) rows.push_back(std::move(r));
  return rows;
}

}  // namespace sinter::testing

namespace sinter {
namespace {

TEST(Gather, PicksAlongADimAndScatterAddAccumulates) {
  const Tensor a = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const auto idx = [](std::vector<int64_t> v, Shape s) { return from_vector<int64_t>(v, s); };
  EXPECT_EQ(gather(a, 1, idx({2, 0, 1, 1}, {2, 2})).to_vector<double>(),
            (std::vector<double>{3, 1, 5, 5}));
  EXPECT_EQ(gather(a, 0, idx({1, 0, 1}, {1, 3})).to_vector<double>(),
            (std::vector<double>{4, 2, 6}));
  EXPECT_EQ(gather(a, -1, idx({0}, {1, 1})).shape(), (Shape{1, 1}));
  EXPECT_EQ(gather(a, 1, idx({}, {2, 0})).shape(), (Shape{2, 0}));
  const Tensor ints = gather(a.to(DType::i32), 0, idx({1, 1}, {1, 2}));
  EXPECT_EQ(ints.dtype(), DType::i32);
  EXPECT_EQ(ints.to_vector<int64_t>(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(gather(full({}, 7.0), 0, full({}, 0.0).to(DType::i64)).to_vector<double>(),
            std::vector<double>{7});

  // Repeated indices: the gradient of a gathered element counts once per gather.
  Tensor x = a.clone().requires_grad_(true);
  sum(gather(x, 1, idx({0, 0, 2, 1, 1, 1}, {2, 3}))).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 0, 1, 0, 3, 0}));

  const Tensor src = from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  // Only src's leading (2, 3) block is read; index (1, 1) adds 5 and 6 into column 1.
  EXPECT_EQ(
      scatter_add(zeros({2, 3}, {.dtype = DType::f64}), 1, idx({0, 0, 2, 1, 1, 1}, {2, 3}), src)
          .to_vector<double>(),
      (std::vector<double>{3, 0, 3, 0, 18, 0}));
  EXPECT_EQ(scatter_add(ones({3}), 0, idx({2, 2}, {2}), full({2}, 0.5)).to_vector<double>(),
            (std::vector<double>{1, 1, 2}));

  testing::expect_error(
      [&] {
        gather(a, 1, idx({0, 3}, {1, 2}));
      },
      {"gather", "index out of range", "[0, 3]", "dim 1 has size 3"});
  testing::expect_error(
      [&] {
        gather(a, 0, idx({-1, 0}, {1, 2}));
      },
      {"gather", "out of range", "[-1, 0]", "size 2"});
  testing::expect_error([&] { gather(a, 1, ones({2, 2})); }, {"gather", "i64", "f32"});
  testing::expect_error(
      [&] {
        gather(a, 1, idx({0, 0}, {2}));
      },
      {"gather", "index has 1 dims", "has 2", "[2]", "[2, 3]"});
  testing::expect_error(
      [&] {
        gather(a, 1, idx({0, 0, 0}, {3, 1}));
      },
      {"gather", "[3, 1]", "larger", "[2, 3]", "dim 0"});
  testing::expect_error([&] { gather(a, 2, idx({0}, {1, 1})); }, {"gather", "dim 2", "2 dims"});
  // Nine dims where the index is smaller than the tensor in each: none merge.
  testing::expect_error([] { gather(zeros(Shape(9, 3)), 0, zeros(Shape(9, 2)).to(DType::i64)); },
                        {"gather", "9 dims remain", "at most 8"});
  testing::expect_error(
      [&] {
        scatter_add(a.to(DType::i32), 0, idx({0}, {1, 1}), ones({1, 1}));
      },
      {"scatter_add", "floating", "i32"});
  testing::expect_error(
      [&] {
        scatter_add(a, 0, idx({0, 1}, {1, 2}), ones({1, 1}).to(DType::f64));
      },
      {"scatter_add", "[1, 2]", "larger than src", "[1, 1]"});
  testing::expect_error(
      [&] {
        scatter_add(a, 0, idx({0}, {1, 1}), ones({1, 1}));
      },
      {"scatter_add", "src is f32", "f64"});
  testing::expect_error(
      [&] {
        scatter_add(a, 0, idx({5}, {1, 1}), ones({1, 1}).to(DType::f64));
      },
      {"scatter_add", "index out of range", "[5, 5]", "size 2"});
}

TEST(Scatter, WritesTheLastSourceAndReducesAsTorch) {
  const auto idx = [](std::vector<int64_t> v, Shape s) { return from_vector<int64_t>(v, s); };
  const auto f64 = [](std::vector<double> v) {
    const auto n = static_cast<int64_t>(v.size());
    return from_vector<double>(v, {n});
  };
  // A target written twice keeps the last source, in element order.
  EXPECT_EQ(scatter(zeros({3}, {.dtype = DType::f64}), 0, idx({2, 0, 2}, {3}), f64({1, 2, 3}))
                .to_vector<double>(),
            (std::vector<double>{2, 0, 3}));
  EXPECT_EQ(scatter(zeros({2, 2}, {.dtype = DType::i32}), 1, idx({1, 0}, {2, 1}), Scalar(7))
                .to_vector<int64_t>(),
            (std::vector<int64_t>{0, 7, 7, 0}));
  // torch's values and gradients for a = [1, 5, 3], src = [5, 2, 5, 7] at [0, 0, 1, 2], the
  // output's gradient [1, 2, 3] (torch 2.x).
  struct Case {
    ScatterReduce r;
    bool self;
    std::vector<double> out, ga, gs;
  };
  const std::vector<Case> cases = {
      {ScatterReduce::Amax, true, {5, 5, 7}, {0, 1, 0}, {1, 0, 1, 3}},
      {ScatterReduce::Amin, true, {1, 5, 3}, {1, 1, 3}, {0, 0, 1, 0}},
      {ScatterReduce::Sum, true, {8, 10, 10}, {1, 2, 3}, {1, 1, 2, 3}},
      {ScatterReduce::Mean, true, {8.0 / 3, 5, 5}, {1.0 / 3, 1, 1.5}, {1.0 / 3, 1.0 / 3, 1, 1.5}},
      {ScatterReduce::Prod, true, {10, 25, 21}, {10, 10, 21}, {2, 5, 10, 9}},
      {ScatterReduce::Amax, false, {5, 5, 7}, {0, 0, 0}, {1, 0, 1, 3}},
      {ScatterReduce::Amin, false, {2, 5, 7}, {0, 0, 0}, {0, 1, 1, 3}},
      {ScatterReduce::Mean, false, {3.5, 5, 7}, {0, 0, 0}, {0.5, 0.5, 2, 3}},
      {ScatterReduce::Prod, false, {10, 5, 7}, {0, 0, 0}, {2, 5, 2, 3}},
  };
  for (const Case& c : cases) {
    Tensor a = f64({1, 5, 3}).requires_grad_(true), s = f64({5, 2, 5, 7}).requires_grad_(true);
    Tensor out = scatter_reduce(a, 0, idx({0, 0, 1, 2}, {4}), s, c.r, c.self);
    sum(mul(out, f64({1, 2, 3}))).backward();
    EXPECT_EQ(out.to_vector<double>(), c.out) << static_cast<int>(c.r) << c.self;
    EXPECT_EQ(a.grad().to_vector<double>(), c.ga) << static_cast<int>(c.r) << c.self;
    EXPECT_EQ(s.grad().to_vector<double>(), c.gs) << static_cast<int>(c.r) << c.self;
  }
  // Prod with zeros: each factor gets the product of the others (torch's values).
  Tensor a = f64({0, 2, 3}).requires_grad_(true), s = f64({0, 4, 0, 5}).requires_grad_(true);
  sum(scatter_reduce(a, 0, idx({0, 0, 1, 1}, {4}), s, ScatterReduce::Prod)).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(s.grad().to_vector<double>(), (std::vector<double>{0, 0, 10, 0}));
  // Without include_self, a zero of a outside the targets is the result there: its gradient
  // passes (torch's values).
  Tensor a2 = f64({0, 2, 3}).requires_grad_(true), s2 = f64({4, 5}).requires_grad_(true);
  sum(scatter_reduce(a2, 0, idx({1, 1}, {2}), s2, ScatterReduce::Prod, false)).backward();
  EXPECT_EQ(a2.grad().to_vector<double>(), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(s2.grad().to_vector<double>(), (std::vector<double>{5, 4}));
  // A NaN result takes a NaN gradient where torch's does (0 / 0).
  Tensor a3 = f64({std::numeric_limits<double>::quiet_NaN(), 1}).requires_grad_(true);
  sum(scatter_reduce(a3, 0, idx({1}, {1}), f64({2}), ScatterReduce::Amax)).backward();
  EXPECT_TRUE(std::isnan(a3.grad().to_vector<double>()[0]));
  // Integers: the mean divides with floor; the identity of a max is the dtype's lowest.
  const Tensor ints = from_vector<int64_t>({0, 0, 7}, {3});
  const Tensor isrc = from_vector<int64_t>({1, 2, -8}, {3});
  EXPECT_EQ(scatter_reduce(ints, 0, idx({0, 0, 2}, {3}), isrc, ScatterReduce::Mean, false)
                .to_vector<int64_t>(),
            (std::vector<int64_t>{1, 0, -8}));
  EXPECT_EQ(
      scatter_reduce(ints, 0, idx({0, 0, 2}, {3}), isrc, ScatterReduce::Mean).to_vector<int64_t>(),
      (std::vector<int64_t>{1, 0, -1}));
  EXPECT_EQ(scatter_reduce(ints.to(DType::i32), 0, idx({2}, {1}),
                           isrc.narrow(0, 2, 1).to(DType::i32), ScatterReduce::Amax, false)
                .to_vector<int64_t>(),
            (std::vector<int64_t>{0, 0, -8}));
  // A NaN stays once seen, as torch's amax and amin.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(
      std::isnan(scatter_reduce(f64({1}), 0, idx({0, 0}, {2}), f64({nan, 3}), ScatterReduce::Amax)
                     .item<double>()));
}

TEST(Scatter, IndexOpsWriteWholeSlicesAndCheckTheirArguments) {
  const auto idx = [](std::vector<int64_t> v, Shape s) { return from_vector<int64_t>(v, s); };
  // index_copy, index_fill and index_reduce write whole slices.
  const Tensor m = zeros({3, 2}, {.dtype = DType::f64});
  EXPECT_EQ(index_copy(m, 0, idx({2, 0}, {2}), from_vector<double>({1, 2, 3, 4}, {2, 2}))
                .to_vector<double>(),
            (std::vector<double>{3, 4, 0, 0, 1, 2}));
  EXPECT_EQ(index_fill(m, 1, idx({1}, {1}), -1.0).to_vector<double>(),
            (std::vector<double>{0, -1, 0, -1, 0, -1}));
  EXPECT_EQ(index_reduce(ones({2, 2}, {.dtype = DType::f64}), 0, idx({1, 1}, {2}),
                         from_vector<double>({2, 3, 4, 5}, {2, 2}), ScatterReduce::Prod)
                .to_vector<double>(),
            (std::vector<double>{1, 1, 8, 15}));
  testing::expect_error(
      [&] {
        scatter(m, 0, idx({3}, {1, 1}), 1.0);
      },
      {"scatter", "index out of range", "[3, 3]", "size 3"});
  testing::expect_error(
      [&] {
        scatter_reduce(m, 0, idx({0}, {1, 1}), ones({1, 1}), ScatterReduce::Sum);
      },
      {"scatter_reduce", "src is f32", "f64"});
  testing::expect_error(
      [&] {
        index_copy(m, 0, idx({0}, {1}), zeros({2, 2}, {.dtype = DType::f64}));
      },
      {"index_copy", "source shape [2, 2]", "[3, 2]", "1 indices"});
  testing::expect_error(
      [&] {
        index_fill(m, 0, idx({0}, {1, 1}), 1.0);
      },
      {"index_fill", "1-D", "[1, 1]"});
}

}  // namespace
}  // namespace sinter

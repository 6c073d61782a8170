// Op-table rows of the index family (see op_table.h): gather and scatter_add (repeated indices,
// whose gradients accumulate; an index smaller than the tensor in the other dims; strided tensors;
// src larger than the index) and index_select; embedding's rows are here too.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "op_table.h"

namespace sinter::testing {

std::vector<OpRow> index_rows() {
  return {
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

}  // namespace
}  // namespace sinter

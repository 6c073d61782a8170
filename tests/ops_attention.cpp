// Op-table rows for scaled_dot_product_attention (see op_table.h), and its own tests: the
// composition it equals, masks, the causal pattern, dropout's determinism and the errors.
#include <cmath>
#include <limits>

#include "op_table.h"

namespace sinter::testing {

namespace {

// A fixed bool mask of shape (rows, cols) with at least one true per row, on x's device.
Tensor keep_mask(int64_t rows, int64_t cols, const Tensor& like) {
  std::vector<double> v(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) v[i * cols + j] = (i + 2 * j) % 3 != 1 || j == i % cols;
  }
  return from_vector<double>(v, {rows, cols}).to(DType::b8).to(like.device());
}

OpFn attention_of(AttentionOptions o = {}) {
  return [o](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2], o); };
}

}  // namespace

std::vector<OpRow> attention_rows() {
  using S = Shape;
  return {
      {.name = "Attention",
       .shapes = {S{2, 2, 5, 4}, S{2, 2, 6, 4}, S{2, 2, 6, 3}},
       .fn = attention_of()},
      {.name = "AttentionCausal",
       .shapes = {S{1, 2, 5, 4}, S{1, 2, 5, 4}, S{1, 2, 5, 4}},
       .fn = attention_of({.causal = true})},
      // Tq < Tk: query i sees keys 0..i (top-left aligned); T and D off any tile size.
      {.name = "AttentionCausalRect",
       .shapes = {S{2, 1, 3, 5}, S{2, 1, 7, 5}, S{2, 1, 7, 2}},
       .fn = attention_of({.causal = true, .scale = 0.3})},
      {.name = "AttentionOneQuery",
       .shapes = {S{3, 1, 4}, S{3, 6, 4}, S{3, 6, 4}},
       .fn = attention_of()},
      {.name = "AttentionOneKeyCausal",
       .shapes = {S{2, 1, 1, 3}, S{2, 1, 1, 3}, S{2, 1, 1, 3}},
       .fn = attention_of({.causal = true})},
      {.name = "AttentionBoolMask",
       .shapes = {S{2, 2, 5, 4}, S{2, 2, 6, 4}, S{2, 2, 6, 4}},
       .fn =
           [](const Inputs& x) {
             return scaled_dot_product_attention(x[0], x[1], x[2], {.mask = keep_mask(5, 6, x[0])});
           }},
      {.name = "AttentionAdditiveMaskCausal",
       .shapes = {S{2, 3, 4}, S{2, 3, 4}, S{2, 3, 4}, S{3, 3}},
       .fn =
           [](const Inputs& x) {
             return scaled_dot_product_attention(x[0], x[1], x[2], {.causal = true, .mask = x[3]});
           }},
      // A fresh generator per call: every evaluation of the gradcheck, and both devices, drop the
      // same weights (Philox gives one stream on CPU and CUDA).
      {.name = "AttentionDropout",
       .shapes = {S{2, 1, 6, 4}, S{2, 1, 6, 4}, S{2, 1, 6, 4}},
       .fn =
           [](const Inputs& x) {
             Generator gen(11);
             return scaled_dot_product_attention(x[0], x[1], x[2],
                                                 {.dropout_p = 0.3, .generator = &gen});
           }},
  };
}

namespace {

// The formula written out in f64 on the CPU: softmax(q k^T * scale + bias) v per (batch, query).
std::vector<double> attention_by_hand(const Tensor& q, const Tensor& k, const Tensor& v,
                                      double scale, const std::vector<double>& bias) {
  const int64_t tq = q.size(0), tk = k.size(0), d = q.size(1), dv = v.size(1);
  const std::vector<double> qs = q.to_vector<double>(), ks = k.to_vector<double>(),
                            vs = v.to_vector<double>();
  std::vector<double> out(static_cast<size_t>(tq * dv), 0.0);
  for (int64_t i = 0; i < tq; ++i) {
    std::vector<double> s(static_cast<size_t>(tk));
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < tk; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < d; ++c) dot += qs[i * d + c] * ks[j * d + c];
      s[j] = dot * scale + bias[i * tk + j];
      m = std::max(m, s[j]);
    }
    double z = 0;
    for (int64_t j = 0; j < tk; ++j) z += std::exp(s[j] - m);
    for (int64_t j = 0; j < tk; ++j) {
      const double w = std::exp(s[j] - m) / z;
      for (int64_t c = 0; c < dv; ++c) out[i * dv + c] += w * vs[j * dv + c];
    }
  }
  return out;
}

TEST(Attention, MatchesTheFormulaWithMasksAndScale) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor q = randn({4, 3}, {.dtype = DType::f64}), k = randn({5, 3}, {.dtype = DType::f64}),
               v = randn({5, 2}, {.dtype = DType::f64});
  const std::vector<double> none(20, 0.0);
  EXPECT_TRUE(
      all_close(scaled_dot_product_attention(q, k, v),
                from_vector<double>(attention_by_hand(q, k, v, 1 / std::sqrt(3.0), none), {4, 2}),
                1e-12, 1e-12));
  // Causal: query i sees keys j <= i.
  std::vector<double> causal(20, 0.0);
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 5; ++j) causal[i * 5 + j] = -inf;
  }
  EXPECT_TRUE(all_close(scaled_dot_product_attention(q, k, v, {.causal = true, .scale = 0.7}),
                        from_vector<double>(attention_by_hand(q, k, v, 0.7, causal), {4, 2}), 1e-12,
                        1e-12));
  // A bool mask equals the additive mask of 0 and -inf; a float mask is added.
  const Tensor keep = keep_mask(4, 5, q);
  const std::vector<double> kept = keep.to_vector<double>();
  std::vector<double> bias(20), added(20);
  for (size_t i = 0; i < 20; ++i) {
    bias[i] = kept[i] != 0 ? 0.0 : -inf;
    added[i] = 0.25 * static_cast<double>(i % 4) - 0.5;
  }
  EXPECT_TRUE(
      all_close(scaled_dot_product_attention(q, k, v, {.mask = keep}),
                from_vector<double>(attention_by_hand(q, k, v, 1 / std::sqrt(3.0), bias), {4, 2}),
                1e-12, 1e-12));
  EXPECT_TRUE(
      all_close(scaled_dot_product_attention(q, k, v, {.mask = from_vector<double>(added, {4, 5})}),
                from_vector<double>(attention_by_hand(q, k, v, 1 / std::sqrt(3.0), added), {4, 2}),
                1e-12, 1e-12));
}

TEST(Attention, CausalEqualsItsMaskAndAFullyMaskedRowIsNaN) {
  const Tensor q = randn({2, 3, 6, 4}), k = randn({2, 3, 6, 4}), v = randn({2, 3, 6, 5});
  const Tensor tri = tril(ones({6, 6})).to(DType::b8);
  EXPECT_TRUE(all_close(scaled_dot_product_attention(q, k, v, {.causal = true}),
                        scaled_dot_product_attention(q, k, v, {.mask = tri}), 1e-6, 1e-6));
  // The first query of a mask with an empty first row sees no key.
  const Tensor strict = tril(ones({6, 6}), -1).to(DType::b8);
  const std::vector<double> out =
      scaled_dot_product_attention(q, k, v, {.mask = strict}).to_vector<double>();
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_FALSE(std::isnan(out[5]));  // the second query sees key 0
}

TEST(Attention, DropoutFollowsTheGeneratorAndScalesTheKeptWeights) {
  const Tensor q = randn({1, 8, 4}), k = randn({1, 8, 4}), v = ones({1, 8, 1});
  Generator a(5), b(5);
  const Tensor ya = scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5, .generator = &a});
  const Tensor yb = scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5, .generator = &b});
  EXPECT_TRUE(all_close(ya, yb, 0, 0));
  // With v = 1 each output is the sum of the kept weights / (1 - p): 0, 2, or between.
  const Tensor plain = scaled_dot_product_attention(q, k, v);
  EXPECT_TRUE(all_close(plain, ones({1, 8, 1}), 1e-6, 1e-6));
  EXPECT_FALSE(all_close(ya, plain, 1e-3, 1e-3));
  for (double y : ya.to_vector<double>()) {
    EXPECT_GE(y, -1e-6);
    EXPECT_LE(y, 2 + 1e-5);
  }
}

TEST(Attention, ErrorsNameTheOperandsAndShapes) {
  const Tensor q = zeros({2, 4, 3}), k = zeros({2, 5, 3}), v = zeros({2, 5, 2});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, zeros({2, 5, 4}), v);
      },
      {"scaled_dot_product_attention", "head size 3", "k has 4"});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, k, zeros({2, 4, 2}));
      },
      {"scaled_dot_product_attention", "5 keys", "v has 4"});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, zeros({3, 5, 3}), zeros({3, 5, 2}));
      },
      {"scaled_dot_product_attention", "leading dims", "[2, 4, 3]", "[3, 5, 3]"});
  expect_error([&] { scaled_dot_product_attention(zeros({4}), k, v); },
               {"scaled_dot_product_attention", "rank"});
  expect_error([&] { scaled_dot_product_attention(q, k.to(DType::f64), v); },
               {"scaled_dot_product_attention", "dtype", "f32", "f64"});
  expect_error([&] { scaled_dot_product_attention(q.to(DType::i64), k.to(DType::i64), v); },
               {"scaled_dot_product_attention", "dtype"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, {.dropout_p = 1.0}); },
               {"scaled_dot_product_attention", "dropout_p", "1"});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, {.mask = zeros({4, 4})});
      },
      {"scaled_dot_product_attention", "[4, 4]", "cannot be broadcast", "[2, 4, 5]"});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, {.mask = zeros({3, 2, 4, 5})});
      },
      {"scaled_dot_product_attention", "[3, 2, 4, 5]", "does not broadcast", "[2, 4, 5]"});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, {.mask = zeros({4, 5}).to(DType::i32)});
      },
      {"scaled_dot_product_attention", "bool", "i32"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, {.scale = INFINITY}); },
               {"scaled_dot_product_attention", "scale", "inf"});
  expect_error([&] { scaled_dot_product_attention(q, Tensor(), v); },
               {"scaled_dot_product_attention", "defined"});
}

}  // namespace

}  // namespace sinter::testing

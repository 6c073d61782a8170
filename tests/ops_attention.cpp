// Op-table rows for scaled_dot_product_attention and rope (see op_table.h), and their own tests:
// the composition it equals, masks, the causal pattern, dropout's determinism and the errors; the
// fused kernels (AttentionKernel::Fused: the CPU reference, or the CUDA kernels) against the
// composed form, on shapes across their tile sizes.
#include <cmath>
#include <limits>

#include "attention_test_util.h"
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

// The same through the fused kernels.
OpFn fused_of(AttentionOptions o = {}) {
  o.kernel = AttentionKernel::Fused;
  return attention_of(o);
}

// Attention with dropout 0.3 from a generator seeded 11 in each call: every call draws the same
// weights (Philox gives one stream on CPU and CUDA).
OpFn dropout_of(AttentionOptions o = {}) {
  return [o](const Inputs& x) {
    Generator gen(11);
    AttentionOptions with = o;
    with.dropout_p = 0.3;
    with.generator = &gen;
    return scaled_dot_product_attention(x[0], x[1], x[2], with);
  };
}

// Query, key and value of one shape.
std::vector<Shape> qkv(const Shape& s) { return {s, s, s}; }

// rope at the positions 3 * j^2 + 1000 j (j < T), on x's device.
OpFn rope_of(double base, bool interleaved) {
  return [base, interleaved](const Inputs& x) {
    const int64_t t = x[0].size(-2);
    std::vector<int64_t> p;
    for (int64_t j = 0; j < t; ++j) p.push_back(3 * j * j + 1000 * (j % 3));
    const Tensor pos = from_vector<int64_t>(p, {t}).to(x[0].device());
    return rope(x[0], pos, base, interleaved);
  };
}

}  // namespace

std::vector<OpRow> attention_rows() {
  return {
      {.name = "Attention",
       .shapes = {S{2, 2, 5, 4}, S{2, 2, 6, 4}, S{2, 2, 6, 3}},
       .fn = attention_of()},
      {.name = "AttentionCausal",
       .shapes = qkv(S{1, 2, 5, 4}),
       .fn = attention_of({.causal = true})},
      // Tq < Tk: query i sees keys 0..i (top-left aligned); T and D off any tile size.
      {.name = "AttentionCausalRect",
       .shapes = {S{2, 1, 3, 5}, S{2, 1, 7, 5}, S{2, 1, 7, 2}},
       .fn = attention_of({.causal = true, .scale = 0.3})},
      {.name = "AttentionOneQuery",
       .shapes = {S{3, 1, 4}, S{3, 6, 4}, S{3, 6, 4}},
       .fn = attention_of()},
      {.name = "AttentionOneKeyCausal",
       .shapes = qkv(S{2, 1, 1, 3}),
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
      {.name = "AttentionDropout", .shapes = qkv(S{2, 1, 6, 4}), .fn = dropout_of()},
      // The fused kernels. Gradchecked through the CPU reference; the CUDA parity runs the general
      // kernels in f32 and, for D = 32, 64 and 128, the tensor-core forward in bf16.
      {.name = "AttentionFused",
       .shapes = {S{2, 2, 5, 4}, S{2, 2, 6, 4}, S{2, 2, 6, 4}},
       .fn = fused_of()},
      {.name = "AttentionFusedCausal",
       .shapes = qkv(S{1, 2, 35, 3}),
       .fn = fused_of({.causal = true})},
      {.name = "AttentionFusedCausalRect",
       .shapes = {S{2, 1, 9, 5}, S{2, 1, 4, 5}, S{2, 1, 4, 5}},
       .fn = fused_of({.causal = true, .scale = 0.4})},
      {.name = "AttentionFusedOneQuery",
       .shapes = {S{3, 1, 4}, S{3, 6, 4}, S{3, 6, 4}},
       .fn = fused_of()},
      {.name = "AttentionFusedOneKeyCausal",
       .shapes = qkv(S{2, 1, 1, 3}),
       .fn = fused_of({.causal = true})},
      {.name = "AttentionFusedHead32", .shapes = qkv(S{1, 1, 13, 32}), .fn = fused_of()},
      {.name = "AttentionFusedHead64Causal",
       .shapes = qkv(S{1, 1, 11, 64}),
       .fn = fused_of({.causal = true})},
      {.name = "AttentionFusedHead128Causal",
       .shapes = {S{1, 1, 5, 128}, S{1, 1, 7, 128}, S{1, 1, 7, 128}},
       .fn = fused_of({.causal = true})},
      {.name = "AttentionFusedDropout",
       .shapes = qkv(S{2, 1, 6, 4}),
       .fn = dropout_of({.causal = true, .kernel = AttentionKernel::Fused})},
      // Heads 1 and 2 of a 5-head attention's dropout mask (Note [dropout blocks]), fused and
      // composed.
      {.name = "AttentionFusedDropoutHeadBlock",
       .shapes = qkv(S{2, 2, 6, 4}),
       .fn = dropout_of({.causal = true,
                         .kernel = AttentionKernel::Fused,
                         .dropout_heads = 5,
                         .dropout_head_offset = 1})},
      {.name = "AttentionDropoutHeadBlock",
       .shapes = qkv(S{2, 2, 6, 4}),
       .fn = dropout_of({.dropout_heads = 5, .dropout_head_offset = 1})},
      // Grouped-query attention: 4 query heads on 2 K/V heads; the fused form on the CPU (its
      // reference, gradchecked) and Auto on CUDA (composed: the CUDA kernels take no groups yet).
      {.name = "AttentionGqa",
       .shapes = {S{2, 4, 5, 3}, S{2, 2, 6, 3}, S{2, 2, 6, 3}},
       .fn = attention_of({.enable_gqa = true})},
      {.name = "AttentionFusedGqaCausalDropout",
       .shapes = {S{1, 6, 7, 4}, S{1, 2, 7, 4}, S{1, 2, 7, 4}},
       .fn =
           [](const Inputs& x) {
             Generator gen(5);
             return scaled_dot_product_attention(
                 x[0], x[1], x[2],
                 {.causal = true,
                  .dropout_p = 0.2,
                  .generator = &gen,
                  .kernel = x[0].is_cuda() ? AttentionKernel::Auto : AttentionKernel::Fused,
                  .enable_gqa = true});
           }},
      // rope: positions not in order and far apart, on x's device.
      {.name = "Rope", .shapes = {S{2, 3, 5, 6}}, .fn = rope_of(500.0, false)},
      {.name = "RopeInterleaved", .shapes = {S{4, 8}}, .fn = rope_of(10000.0, true)},
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

void expect_same_attention(const Shape& qs, const Shape& ks, AttentionOptions o, DType dtype,
                           double tol, Way first, Way second) {
  SCOPED_TRACE(shape_str(qs) + " x " + shape_str(ks) + (o.causal ? " causal" : "") + " in " +
               dtype_name(dtype) + ", on " + first.device.str() + " and " + second.device.str());
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  const TensorOptions f64{.dtype = DType::f64};
  const Tensor q0 = randn(qs, f64, &gen), k0 = randn(ks, f64, &gen), v0 = randn(ks, f64, &gen);
  const Tensor w0 = randn(qs, f64, &gen);
  struct Result {
    Tensor out, dq, dk, dv;
  };
  auto run = [&](Way way) {
    Tensor q = q0.to(dtype).to(way.device).requires_grad_(true);
    Tensor k = k0.to(dtype).to(way.device).requires_grad_(true);
    Tensor v = v0.to(dtype).to(way.device).requires_grad_(true);
    Generator drop(seed + 1);
    AttentionOptions oo = o;
    oo.kernel = way.kernel;
    oo.generator = &drop;
    Tensor out = scaled_dot_product_attention(q, k, v, oo);
    sum(mul(out, w0.to(dtype).to(way.device))).backward();
    return Result{out.cpu(), q.grad().cpu(), k.grad().cpu(), v.grad().cpu()};
  };
  const Result a = run(first), b = run(second);
  EXPECT_TRUE(all_close(b.out, a.out, tol, tol)) << "forward";
  EXPECT_TRUE(all_close(b.dq, a.dq, tol, tol)) << "dq";
  EXPECT_TRUE(all_close(b.dk, a.dk, tol, tol)) << "dk";
  EXPECT_TRUE(all_close(b.dv, a.dv, tol, tol)) << "dv";
}

namespace {

// The fused CPU reference against the composed form on the CPU.
void expect_cpu_fused_is_composed(const Shape& qs, const Shape& ks, AttentionOptions o, DType dtype,
                                  double tol) {
  expect_same_attention(qs, ks, o, dtype, tol, {AttentionKernel::Composed, Device::cpu()},
                        {AttentionKernel::Fused, Device::cpu()});
}

// The CUDA kernels against the CPU reference, in the same dtype.
void expect_cuda_fused_is_reference(const Shape& qs, const Shape& ks, AttentionOptions o,
                                    DType dtype, double tol) {
  expect_same_attention(qs, ks, o, dtype, tol, {AttentionKernel::Fused, Device::cpu()},
                        {AttentionKernel::Fused, Device::cuda()});
}

TEST(AttentionFused, TheCpuReferenceEqualsTheComposedForm) {
  for (bool causal : {false, true}) {
    const AttentionOptions o{.causal = causal};
    expect_cpu_fused_is_composed({2, 3, 7, 5}, {2, 3, 7, 5}, o, DType::f64, 1e-12);
    expect_cpu_fused_is_composed({1, 2, 3, 4}, {1, 2, 9, 4}, o, DType::f64, 1e-12);
    expect_cpu_fused_is_composed({1, 1, 9, 4}, {1, 1, 3, 4}, o, DType::f64, 1e-12);
    expect_cpu_fused_is_composed({2, 1, 4}, {2, 8, 4}, o, DType::f32, 1e-5);
    // Both forms drop the same weights (Note [fused attention]).
    expect_cpu_fused_is_composed({2, 2, 6, 3}, {2, 2, 6, 3},
                                 {.causal = causal, .scale = 0.8, .dropout_p = 0.4}, DType::f64,
                                 1e-12);
  }
}

// The composed form on the CPU takes its scores' softmax in one pass (Note [attention softmax] in
// src/cpu/softmax.cpp) in f32, bf16 and f16: against the fused reference (in double inside),
// square, Tq < Tk and Tq > Tk, causal or not, with dropout, gradients included.
TEST(AttentionFused, TheCpuAttentionSoftmaxEqualsTheReference) {
  for (bool causal : {false, true}) {
    const AttentionOptions o{.causal = causal};
    for (const auto& [dtype, tol] :
         {std::pair{DType::f32, 1e-5}, std::pair{DType::bf16, 3e-2}, std::pair{DType::f16, 5e-3}}) {
      expect_cpu_fused_is_composed({2, 3, 7, 5}, {2, 3, 7, 5}, o, dtype, tol);
      expect_cpu_fused_is_composed({1, 2, 3, 4}, {1, 2, 40, 4}, o, dtype, tol);
      expect_cpu_fused_is_composed({1, 1, 37, 4}, {1, 1, 3, 4}, o, dtype, tol);
    }
    expect_cpu_fused_is_composed({2, 2, 6, 3}, {2, 2, 6, 3},
                                 {.causal = causal, .scale = 0.8, .dropout_p = 0.4}, DType::f32,
                                 1e-5);
  }
}

// The one pass against the three ops it stands for (scale, mask, softmax), spelled out: f32 to
// its last bits but the sum's order, bf16 within a rounding step of its own; the masked keys'
// weights and gradients are 0.
TEST(AttentionFused, TheCpuAttentionSoftmaxIsTheScaleMaskAndSoftmax) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    for (const bool causal : {false, true}) {
      SCOPED_TRACE(dtype_name(dtype) + std::string(causal ? " causal" : ""));
      Generator gen(fresh_seed());
      const Tensor q0 = randn({2, 3, 33, 8}, {}, &gen).to(dtype),
                   k0 = randn({2, 3, 40, 8}, {}, &gen).to(dtype),
                   v0 = randn({2, 3, 40, 8}, {}, &gen).to(dtype);
      const Tensor w = randn({2, 3, 33, 8}, {}, &gen).to(dtype);
      auto grads = [&](bool by_hand) {
        Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(),
               v = v0.detach().requires_grad_();
        Tensor out;
        if (by_hand) {
          Tensor scores = mul(matmul(q, k.transpose(-2, -1)), 0.3);
          if (causal) {
            scores = masked_fill(scores, triu(ones({33, 40}, {.dtype = DType::b8}), 1), -INFINITY);
          }
          out = matmul(softmax(scores, -1), v);
        } else {
          out = scaled_dot_product_attention(
              q, k, v, {.causal = causal, .scale = 0.3, .kernel = AttentionKernel::Composed});
        }
        sum(mul(out, w)).backward();
        return std::vector<Tensor>{out, q.grad(), k.grad(), v.grad()};
      };
      const std::vector<Tensor> want = grads(true), got = grads(false);
      const double tol = dtype == DType::f32 ? 2e-6 : 2e-2;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_TRUE(all_close(got[i].to(DType::f32), want[i].to(DType::f32), tol, tol)) << i;
      }
    }
  }
}

// Auto on the CPU: the tiles (Note [cpu attention tiles]) where they take the call, else the
// composed form, bit for bit: f64, a mask, dropout.
TEST(AttentionFused, AutoOnTheCpuComposesWhatTheTilesDoNotTakeAndFusedRefusesWhatItCannotTake) {
  const Tensor q = randn({1, 2, 4, 3}), k = randn({1, 2, 5, 3}), v = randn({1, 2, 5, 3});
  const auto both = [&](const Tensor& q, const Tensor& k, const Tensor& v, AttentionOptions o,
                        uint64_t seed) {
    Generator g1(seed), g2(seed);
    o.generator = &g1;
    const Tensor automatic = scaled_dot_product_attention(q, k, v, o);
    o.generator = &g2;
    o.kernel = AttentionKernel::Composed;
    return std::pair{automatic, scaled_dot_product_attention(q, k, v, o)};
  };
  for (const auto& [got, want] :
       {both(q.to(DType::f64), k.to(DType::f64), v.to(DType::f64), {}, 1),
        both(q, k, v, {.mask = keep_mask(4, 5, q)}, 2), both(q, k, v, {.dropout_p = 0.3}, 3)}) {
    EXPECT_TRUE(all_close(got, want, 0, 0));
  }
  const auto [tiles, composed] = both(q, k, v, {}, 4);
  EXPECT_TRUE(all_close(tiles, composed, 1e-5, 1e-5));
  // What the fused form does not take: a mask, Dv != D, no key.
  expect_error(
      [&] {
        scaled_dot_product_attention(
            q, k, v, {.mask = ones({4, 5}).to(DType::b8), .kernel = AttentionKernel::Fused});
      },
      {"scaled_dot_product_attention", "fused", "[1, 2, 4, 3]", "no mask"});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, k, randn({1, 2, 5, 2}), {.kernel = AttentionKernel::Fused});
      },
      {"scaled_dot_product_attention", "fused", "head size 2"});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, zeros({1, 2, 0, 3}), zeros({1, 2, 0, 3}),
                                     {.kernel = AttentionKernel::Fused});
      },
      {"scaled_dot_product_attention", "fused", "at least one key"});
}

// No query: an empty result, and zero gradients for k and v.
void expect_no_query_is_empty(Device device) {
  const TensorOptions opts{.device = device};
  Tensor q = zeros({1, 2, 0, 3}, opts).requires_grad_(true);
  Tensor k = randn({1, 2, 5, 3}, opts).requires_grad_(true);
  Tensor v = randn({1, 2, 5, 3}, opts).requires_grad_(true);
  const Tensor none = scaled_dot_product_attention(q, k, v, {.kernel = AttentionKernel::Fused});
  EXPECT_EQ(none.shape(), (Shape{1, 2, 0, 3}));
  sum(none).backward();
  EXPECT_EQ(q.grad().shape(), q.shape());
  EXPECT_TRUE(all_close(k.grad().cpu(), zeros({1, 2, 5, 3}), 0, 0));
  EXPECT_TRUE(all_close(v.grad().cpu(), zeros({1, 2, 5, 3}), 0, 0));
}

TEST(AttentionFused, NoQueryIsAnEmptyResult) { expect_no_query_is_empty(Device::cpu()); }

TEST(AttentionFused, CudaNoQueryIsAnEmptyResult) {
  SINTER_REQUIRE_CUDA();
  expect_no_query_is_empty(Device::cuda());
}

TEST(AttentionFused, CudaHeadsOver128AreRefusedAndAutoComposes) {
  SINTER_REQUIRE_CUDA();
  const TensorOptions cuda{.device = Device::cuda()};
  const Tensor q = randn({1, 1, 4, 160}, cuda), k = randn({1, 1, 4, 160}, cuda);
  expect_error([&] { scaled_dot_product_attention(q, k, k, {.kernel = AttentionKernel::Fused}); },
               {"scaled_dot_product_attention", "D <= 128", "160"});
  EXPECT_TRUE(all_close(scaled_dot_product_attention(q, k, k).cpu(),
                        scaled_dot_product_attention(q.cpu(), k.cpu(), k.cpu()), 1e-4, 1e-4));
}

// The CUDA kernels over several tiles of rows and columns (32-column tiles of the general
// kernels, 64 x 64 tiles of the tensor-core forward), ragged ends, causal and not, with dropout.
TEST(AttentionFused, CudaKernelsMatchTheComposedFormAcrossTiles) {
  SINTER_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  for (bool causal : {false, true}) {
    for (int64_t d : {32, 64, 128, 48, 8}) {
      const AttentionOptions o{.causal = causal};
      expect_cuda_fused_is_reference({2, 3, 200, d}, {2, 3, 200, d}, o, DType::f32, 2e-4);
      expect_cuda_fused_is_reference({1, 2, 131, d}, {1, 2, 67, d}, o, DType::f32, 2e-4);
      expect_cuda_fused_is_reference({2, 3, 200, d}, {2, 3, 200, d}, o, DType::bf16, 3e-2);
      expect_cuda_fused_is_reference({1, 2, 67, d}, {1, 2, 131, d}, o, DType::f16, 1e-2);
      expect_cuda_fused_is_reference({1, 2, 70, d}, {1, 2, 70, d}, o, DType::f64, 1e-10);
      // The CUDA fused kernels and the CUDA composed form.
      expect_same_attention({2, 2, 130, d}, {2, 2, 130, d}, o, DType::f32, 2e-4,
                            {AttentionKernel::Composed, gpu}, {AttentionKernel::Fused, gpu});
    }
    const AttentionOptions drop{.causal = causal, .dropout_p = 0.2};
    expect_cuda_fused_is_reference({2, 2, 150, 64}, {2, 2, 150, 64}, drop, DType::f32, 2e-4);
    expect_cuda_fused_is_reference({2, 2, 150, 64}, {2, 2, 150, 64}, drop, DType::bf16, 3e-2);
    expect_cuda_fused_is_reference({1, 2, 90, 128}, {1, 2, 90, 128}, drop, DType::f16, 1e-2);
  }
  // A long causal sequence: many tiles of both sides, the diagonal tile mid-way.
  expect_cuda_fused_is_reference({1, 2, 1000, 64}, {1, 2, 1000, 64}, {.causal = true}, DType::bf16,
                                 3e-2);
}

// Contiguous operands that start off a 16-byte boundary take the general kernels (the tensor-core
// ones copy 16-byte rows): the same result.
TEST(AttentionFused, CudaOperandsOffSixteenBytesTakeTheGeneralKernels) {
  SINTER_REQUIRE_CUDA();
  const TensorOptions opts{.dtype = DType::bf16, .device = Device::cuda()};
  auto offset_by_one = [&](const Tensor& t) {
    Tensor flat = zeros({t.numel() + 1}, opts);
    flat.narrow(0, 1, t.numel()).copy_(t.reshape({t.numel()}));
    return flat.narrow(0, 1, t.numel()).reshape(t.shape());
  };
  const Tensor q = randn({1, 2, 70, 64}, opts), k = randn({1, 2, 70, 64}, opts),
               v = randn({1, 2, 70, 64}, opts);
  const AttentionOptions o{.causal = true, .kernel = AttentionKernel::Fused};
  const Tensor aligned = scaled_dot_product_attention(q, k, v, o);
  const Tensor shifted =
      scaled_dot_product_attention(offset_by_one(q), offset_by_one(k), offset_by_one(v), o);
  EXPECT_TRUE(all_close(shifted.cpu(), aligned.cpu(), 2e-2, 2e-2));
  EXPECT_TRUE(all_close(aligned.cpu(), scaled_dot_product_attention(q.cpu(), k.cpu(), v.cpu(), o),
                        3e-2, 3e-2));
}

}  // namespace

// Grouped-query attention is attention with each K/V head repeated for its query heads: the
// fused CPU reference and the composed form against that repetition written out, values and
// gradients (dk and dv sum over a K/V head's query heads), with dropout drawing the same weights.
TEST(AttentionGqa, EqualsAttentionOnRepeatedHeads) {
  const Tensor q = randn({2, 6, 5, 4}, {.dtype = DType::f64}).requires_grad_();
  const Tensor k = randn({2, 3, 7, 4}, {.dtype = DType::f64}).requires_grad_();
  const Tensor v = randn({2, 3, 7, 4}, {.dtype = DType::f64}).requires_grad_();
  const Tensor up = randn({2, 6, 5, 4}, {.dtype = DType::f64});
  auto repeated = [](const Tensor& t) {  // head g of t at query heads 2g and 2g + 1
    return t.unsqueeze(2).expand({2, 3, 2, 7, 4}).reshape({2, 6, 7, 4});
  };
  auto grads = [&](const Tensor& out) {
    zero_grads({q, k, v});
    sum(mul(out, up)).backward();
    return std::vector<Tensor>{out.detach(), q.grad(), k.grad(), v.grad()};
  };
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    Generator g1(3), g2(3), g3(3);
    const auto want = grads(scaled_dot_product_attention(
        q, repeated(k), repeated(v),
        {.causal = causal, .dropout_p = 0.25, .generator = &g1, .kernel = AttentionKernel::Fused}));
    for (const AttentionKernel kernel : {AttentionKernel::Fused, AttentionKernel::Composed}) {
      Generator& gen = kernel == AttentionKernel::Fused ? g2 : g3;
      const auto got = grads(scaled_dot_product_attention(q, k, v,
                                                          {.causal = causal,
                                                           .dropout_p = 0.25,
                                                           .generator = &gen,
                                                           .kernel = kernel,
                                                           .enable_gqa = true}));
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_TRUE(all_close(got[i], want[i], 1e-12, 1e-12))
            << (kernel == AttentionKernel::Fused ? "fused" : "composed") << ", result " << i;
      }
    }
  }
}

TEST(AttentionGqa, ErrorsNameTheHeads) {
  const Tensor q = randn({1, 6, 3, 4}), k = randn({1, 4, 3, 4});
  expect_error([&] { scaled_dot_product_attention(q, k, k, {.enable_gqa = true}); },
               {"scaled_dot_product_attention", "K/V heads (4)", "query heads (6)"});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, randn({1, 2, 3, 4}), randn({1, 2, 3, 4}));
      },
      {"scaled_dot_product_attention", "leading dims differ"});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, randn({1, 2, 3, 4}), randn({1, 3, 3, 4}),
                                     {.enable_gqa = true});
      },
      {"scaled_dot_product_attention", "k has 2 heads, v has 3"});
}

// rope written out: pair i of the row at position p turns by p * base^(-2i / D), the pairs the
// halves of the row, or neighbours when interleaved.
TEST(Rope, MatchesTheFormula) {
  const int64_t t = 3, d = 8;
  const Tensor x = randn({2, t, d}, {.dtype = DType::f64});
  const std::vector<int64_t> pos{0, 7, 4096};
  const Tensor p = from_vector<int64_t>(pos, {t});
  for (const bool interleaved : {false, true}) {
    SCOPED_TRACE(interleaved ? "interleaved" : "halves");
    const std::vector<double> xs = x.to_vector<double>(),
                              ys = rope(x, p, 100.0, interleaved).to_vector<double>();
    for (int64_t r = 0; r < 2 * t; ++r) {
      for (int64_t i = 0; i < d / 2; ++i) {
        const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + d / 2;
        const double angle = static_cast<double>(pos[static_cast<size_t>(r % t)]) *
                             std::pow(100.0, -2.0 * static_cast<double>(i) / d);
        const double u = xs[static_cast<size_t>(r * d + a)], v = xs[static_cast<size_t>(r * d + b)];
        EXPECT_NEAR(ys[static_cast<size_t>(r * d + a)], u * std::cos(angle) - v * std::sin(angle),
                    1e-12);
        EXPECT_NEAR(ys[static_cast<size_t>(r * d + b)], u * std::sin(angle) + v * std::cos(angle),
                    1e-12);
      }
    }
  }
  // Position 0 is the identity; the turn keeps each row's length.
  EXPECT_TRUE(all_close(rope(x, from_vector<int64_t>({0, 0, 0}, {t})), x, 0, 0));
  const Tensor y = rope(x, p, 100.0);
  EXPECT_TRUE(all_close(sum(mul(y, y), {-1}), sum(mul(x, x), {-1}), 1e-12, 1e-12));
}

// What attention sees of it: q_i . k_j after rope depends on the positions only through their
// difference (the turn of one pair by p and of the other by p' leaves a dot product turned by
// p - p').
TEST(Rope, DotProductsDependOnTheRelativePosition) {
  const Tensor q = randn({1, 1, 16}, {.dtype = DType::f64}),
               k = randn({1, 1, 16}, {.dtype = DType::f64});
  auto dot_at = [&](int64_t pq, int64_t pk) {
    const Tensor rq = rope(q, from_vector<int64_t>({pq}, {1}));
    const Tensor rk = rope(k, from_vector<int64_t>({pk}, {1}));
    return sum(mul(rq, rk)).item<double>();
  };
  EXPECT_NEAR(dot_at(5, 2), dot_at(103, 100), 1e-10);
  EXPECT_NEAR(dot_at(0, 9), dot_at(1000, 1009), 1e-10);
  EXPECT_GT(std::abs(dot_at(5, 2) - dot_at(5, 3)), 1e-6);
}

// The backward turns back by the angles of the forward's positions: changing them in place before
// it is an error, not a gradient turned by other angles.
TEST(Rope, PositionsChangedBeforeTheBackwardAreAnError) {
  const Tensor x = randn({3, 4}).requires_grad_();
  Tensor p = from_vector<int64_t>({0, 5, 9}, {3});
  const Tensor y = rope(x, p);
  p.add_(1);
  expect_error([&] { sum(y).backward(); }, {"rope backward", "modified by an in-place"});
}

TEST(Rope, ErrorsNameTheOperands) {
  const Tensor x = randn({2, 3, 4}), p = from_vector<int64_t>({0, 1, 2}, {3});
  expect_error([&] { rope(randn({2, 3, 5}), p); }, {"rope", "even", "5"});
  expect_error([&] { rope(x, from_vector<int64_t>({0, 1}, {2})); }, {"rope", "T = 3", "[2]"});
  expect_error([&] { rope(x, p.to(DType::f32)); }, {"rope", "i64", "f32"});
  expect_error([&] { rope(x, p, 0.0); }, {"rope", "base", "0"});
  expect_error([&] { rope(randn({4}), from_vector<int64_t>({0}, {1})); }, {"rope", "(..., T, D)"});
  expect_error([&] { rope(x.to(DType::i64), p); }, {"rope", "floating"});
}

}  // namespace sinter::testing

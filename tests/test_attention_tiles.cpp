// The CPU's attention tiles (Note [cpu attention tiles] in src/cpu/vec_attention.cpp), which
// scaled_dot_product_attention's automatic choice runs on the CPU: against the fused reference
// (in double inside) across the tiles' blocks and pads, on heads read where they lie, at every
// thread count, and on scores whose weights underflow, are NaN, or are huge (near 1e10).
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "attention_test_util.h"
#include "cpu/vec_attention.h"
#include "sinter/profiler.h"

namespace sinter::testing {
namespace {

const Way kTiles{AttentionKernel::Auto, Device::cpu()};
const Way kReference{AttentionKernel::Fused, Device::cpu()};

struct Case {
  Shape q, k;
  bool causal = false;
  bool gqa = false;
};

// Query rows across the blocks of 16 (1, 7, 16, 33, 65), keys across the pads of 16 (1, 5, 32,
// 33, 40, 65, 70), heads across the vectors of 16 (3, 16, 17, 33, 64, 80), causal with Tq below,
// equal to and above Tk, and grouped-query heads.
const Case kCases[] = {
    {{2, 3, 7, 5}, {2, 3, 7, 5}},
    {{2, 3, 7, 5}, {2, 3, 7, 5}, true},
    {{1, 2, 33, 16}, {1, 2, 40, 16}, true},
    {{1, 2, 40, 17}, {1, 2, 33, 17}, true},
    {{2, 1, 16, 33}, {2, 1, 70, 33}},
    {{1, 1, 1, 64}, {1, 1, 1, 64}, true},
    {{3, 1, 64}, {3, 5, 64}},
    {{1, 1, 20, 80}, {1, 1, 32, 80}, true},
    {{2, 4, 9, 3}, {2, 2, 11, 3}, false, true},
    {{1, 6, 18, 16}, {1, 2, 18, 16}, true, true},
    {{2, 2, 65, 16}, {2, 2, 65, 16}},
    {{1, 2, 65, 16}, {1, 2, 33, 16}, true},
};

TEST(AttentionTiles, MatchTheReferenceAcrossBlocksAndPads) {
  for (const auto& [dtype, tol] :
       {std::pair{DType::f32, 2e-5}, std::pair{DType::bf16, 3e-2}, std::pair{DType::f16, 4e-3}}) {
    for (const Case& c : kCases) {
      expect_same_attention(c.q, c.k, {.causal = c.causal, .enable_gqa = c.gqa}, dtype, tol,
                            kReference, kTiles);
    }
  }
  // A negative scale: the largest scaled score is scale times the smallest score. At -30 the
  // scores' spread times the scale is far past exp's range, so the largest score's weights would
  // overflow; the gradients carry the scale (as WeightsThatUnderflowAreZero's).
  expect_same_attention({2, 2, 9, 8}, {2, 2, 9, 8}, {.scale = -0.7}, DType::f32, 2e-5, kReference,
                        kTiles);
  expect_same_attention({2, 2, 9, 8}, {2, 2, 9, 8}, {.scale = -30.0}, DType::f32, 1e-3, kReference,
                        kTiles);
}

// The products' loop for CPUs without AVX-512F, forced on this one.
TEST(AttentionTiles, ThePortableProductsMatchTheReference) {
  struct Portable {
    bool before = cpu::vec::attention_tiles_use_portable_products(true);
    ~Portable() { cpu::vec::attention_tiles_use_portable_products(before); }
  } portable;
  for (const Case& c : kCases) {
    expect_same_attention(c.q, c.k, {.causal = c.causal, .enable_gqa = c.gqa}, DType::f32, 2e-5,
                          kReference, kTiles);
  }
}

// No query rows, and no query heads (grouped-query attention on zero heads): empty results, and
// zero gradients for k and v.
TEST(AttentionTiles, NoQueryIsAnEmptyResult) {
  for (const Shape& qs : {Shape{1, 2, 0, 3}, Shape{1, 0, 4, 3}}) {
    SCOPED_TRACE(shape_str(qs));
    Tensor q = zeros(qs).requires_grad_(true);
    Tensor k = randn({1, 2, 5, 3}).requires_grad_(true),
           v = randn({1, 2, 5, 3}).requires_grad_(true);
    const Tensor none = scaled_dot_product_attention(q, k, v, {.enable_gqa = true});
    EXPECT_EQ(none.shape(), qs);
    sum(none).backward();
    EXPECT_EQ(q.grad().shape(), qs);
    EXPECT_TRUE(all_close(k.grad(), zeros({1, 2, 5, 3}), 0, 0));
    EXPECT_TRUE(all_close(v.grad(), zeros({1, 2, 5, 3}), 0, 0));
  }
}

// The heads of a fused projection (B, T, 3, H, D), permuted to (3, B, H, T, D) and unbound, as
// MultiheadAttention splits them: read in place, the same bits as on contiguous copies, and the
// gradient of the projection the same as through the copies. A last dim with a stride (D of a
// transpose) is copied first.
TEST(AttentionTiles, ReadHeadsWhereTheyLie) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  const Tensor packed0 = randn({2, 19, 3, 3, 20}, {}, &gen);
  const Tensor w = randn({2, 3, 19, 20}, {}, &gen);
  for (const bool causal : {false, true}) {
    auto run = [&](bool copies) {
      Tensor packed = packed0.detach().requires_grad_(true);
      std::vector<Tensor> h = unbind(packed.permute({2, 0, 3, 1, 4}));
      if (copies) {
        for (Tensor& t : h) t = t.contiguous();
      }
      const Tensor out = scaled_dot_product_attention(h[0], h[1], h[2], {.causal = causal});
      sum(mul(out, w)).backward();
      return std::vector<Tensor>{out, packed.grad()};
    };
    const std::vector<Tensor> in_place = run(false), copied = run(true);
    EXPECT_TRUE(all_close(in_place[0], copied[0], 0, 0)) << "forward";
    EXPECT_TRUE(all_close(in_place[1], copied[1], 0, 0)) << "gradient";
  }
  // Llama's layout: (B, T, H, D) projections transposed to (B, H, T, D), 6 query heads on 2 K/V
  // heads.
  const Tensor qp = randn({2, 13, 6, 8}, {}, &gen), kp = randn({2, 13, 2, 8}, {}, &gen),
               vp = randn({2, 13, 2, 8}, {}, &gen), wq = randn({2, 6, 13, 8}, {}, &gen);
  auto gqa = [&](bool copies) {
    std::vector<Tensor> leaves{qp.detach().requires_grad_(true), kp.detach().requires_grad_(true),
                               vp.detach().requires_grad_(true)};
    std::vector<Tensor> h;
    for (const Tensor& t : leaves) {
      h.push_back(copies ? t.transpose(1, 2).contiguous() : t.transpose(1, 2));
    }
    const Tensor out =
        scaled_dot_product_attention(h[0], h[1], h[2], {.causal = true, .enable_gqa = true});
    sum(mul(out, wq)).backward();
    return std::vector<Tensor>{out, leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
  };
  const std::vector<Tensor> strided = gqa(false), dense = gqa(true);
  for (size_t i = 0; i < strided.size(); ++i) {
    EXPECT_TRUE(all_close(strided[i], dense[i], 0, 0)) << "grouped-query result " << i;
  }
  const Tensor q = randn({2, 2, 20, 9}, {}, &gen).transpose(-2, -1);  // (2, 2, 9, 20), D strided
  const Tensor k = randn({2, 2, 11, 20}, {}, &gen), v = randn({2, 2, 11, 20}, {}, &gen);
  EXPECT_TRUE(all_close(scaled_dot_product_attention(q, k, v),
                        scaled_dot_product_attention(q.contiguous(), k, v), 0, 0));
}

// MultiheadAttention on the CPU hands its fused projection to the tiles whole
// (packed_self_attention): the same bits as the heads split by views, in f32 and under bf16
// autocast, forward and gradients (of x and of the projections' weights).
TEST(AttentionTiles, MultiheadAttentionTakesThePackedHeads) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  const Tensor x0 = randn({2, 11, 24}, {}, &gen), w = randn({2, 11, 24}, {}, &gen);
  for (const bool causal : {false, true}) {
    for (const bool amp : {false, true}) {
      SCOPED_TRACE(std::string(causal ? "causal" : "") + (amp ? " bf16 autocast" : ""));
      nn::MultiheadAttention m(24, 3, {.causal = causal});
      auto run = [&](bool split) {
        m.zero_grad();
        Tensor x = x0.detach().requires_grad_(true);
        Tensor y;
        {
          std::optional<autocast::Guard> guard;
          if (amp) guard.emplace(DeviceType::cpu, DType::bf16);
          if (split) {
            const std::vector<Tensor> h =
                unbind(m.qkv->forward(x).view({2, 11, 3, 3, 8}).permute({2, 0, 3, 1, 4}));
            const Tensor a = scaled_dot_product_attention(h[0], h[1], h[2], {.causal = causal});
            y = m.out_proj->forward(a.transpose(1, 2).reshape({2, 11, 24}));
          } else {
            y = m.forward(x);
          }
        }
        sum(mul(y.to(DType::f32), w)).backward();
        return std::vector<Tensor>{y, x.grad(), m.qkv->weight.grad(), m.out_proj->weight.grad()};
      };
      std::vector<Tensor> packed;
      {
        const profiler::Guard profile;
        packed = run(false);
        for (const profiler::Event& e : profile.events()) {
          EXPECT_NE(e.name, "unbind") << "the heads were split";
        }
      }
      const std::vector<Tensor> split = run(true);
      for (size_t i = 0; i < packed.size(); ++i) {
        EXPECT_TRUE(all_close(packed[i], split[i], 0, 0)) << "result " << i;
      }
    }
  }
}

TEST(AttentionTiles, SameBitsAtEveryThreadCount) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  const Tensor q0 = randn({3, 4, 37, 24}, {}, &gen), k0 = randn({3, 2, 45, 24}, {}, &gen),
               v0 = randn({3, 2, 45, 24}, {}, &gen), w = randn({3, 4, 37, 24}, {}, &gen);
  for (const bool causal : {false, true}) {
    expect_same_bits_at_every_thread_count([&] {
      Tensor q = q0.detach().requires_grad_(true), k = k0.detach().requires_grad_(true),
             v = v0.detach().requires_grad_(true);
      const Tensor out =
          scaled_dot_product_attention(q, k, v, {.causal = causal, .enable_gqa = true});
      sum(mul(out, w)).backward();
      return std::vector<Tensor>{out, q.grad(), k.grad(), v.grad()};
    });
  }
}

// Scores spread over hundreds (scale 10): many weights' exponents are below -87, where the tiles
// take them as 0; the results and gradients still match the reference, and stay finite. (The
// backward's weights come from lse, an f32 of size 100 here: each carries a relative error of
// about 1e-5, and dq and dk take the scale of 10 on top.)
TEST(AttentionTiles, WeightsThatUnderflowAreZero) {
  for (const bool causal : {false, true}) {
    expect_same_attention({2, 2, 21, 16}, {2, 2, 30, 16}, {.causal = causal, .scale = 10.0},
                          DType::f32, 5e-4, kReference, kTiles);
  }
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  const Tensor q = mul(randn({2, 2, 21, 16}, {}, &gen), 40.0), k = randn({2, 2, 30, 16}, {}, &gen);
  EXPECT_TRUE(all(isfinite(scaled_dot_product_attention(q, k, k))).item<bool>());
}

// Scores near 1e10 (q and k of about 1e5): the scores are scaled before the exponent, where the
// multiply-add's exact product would leave the largest score's exponent hundreds off zero (its
// weight 0, the row NaN). Each row's weights are all on one key; the gradients stay finite, and
// dq and dk near 0.
TEST(AttentionTiles, HugeScoresKeepTheirRows) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  const auto run = [&](const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& g,
                       AttentionKernel kernel) {
    const Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(),
                 v = v0.clone().requires_grad_();
    const Tensor out = scaled_dot_product_attention(q, k, v, {.kernel = kernel});
    out.backward(g);
    return std::vector<Tensor>{out, q.grad(), k.grad(), v.grad()};
  };
  const Tensor q = mul(randn({1, 2, 7, 8}, {}, &gen), 1e5),
               k = mul(randn({1, 2, 9, 8}, {}, &gen), 1e5), v = randn({1, 2, 9, 8}, {}, &gen),
               g = randn({1, 2, 7, 8}, {}, &gen);
  const std::vector<Tensor> got = run(q, k, v, g, AttentionKernel::Auto);
  // Each query row's weight is all on its largest score's key (in double): out_i = v_j, and dv_j
  // is the sum of the g_i whose largest is key j.
  const std::vector<float> qs = q.to_vector<float>(), ks = k.to_vector<float>(),
                           vs = v.to_vector<float>(), gs = g.to_vector<float>();
  std::vector<double> out(2 * 7 * 8), dv(2 * 9 * 8, 0.0);
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 7; ++i) {
      int best = 0;
      double top = -INFINITY;
      for (int j = 0; j < 9; ++j) {
        double dot = 0;
        for (int c = 0; c < 8; ++c)
          dot += double(qs[(h * 7 + i) * 8 + c]) * ks[(h * 9 + j) * 8 + c];
        if (dot > top) top = dot, best = j;
      }
      for (int c = 0; c < 8; ++c) {
        out[(h * 7 + i) * 8 + c] = vs[(h * 9 + best) * 8 + c];
        dv[(h * 9 + best) * 8 + c] += gs[(h * 7 + i) * 8 + c];
      }
    }
  }
  EXPECT_TRUE(all_close(got[0], from_vector(out, {1, 2, 7, 8}), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(got[3], from_vector(dv, {1, 2, 9, 8}), 1e-5, 1e-5));
  // dS is p (dP - D), 0 for a one-hot row but for the rounding of dout . v against dout . out:
  // dq and dk (k and q about 1e5 times it) stay far below the 1e5 a wrong weight would give.
  for (int i = 1; i < 3; ++i) {
    EXPECT_TRUE(all(isfinite(got[i])).item<bool>()) << i;
    EXPECT_LT(max(abs(got[i])).item<double>(), 1.0) << i;
  }
}

// A NaN in a query makes its row NaN (not a row of weights that skipped it), and the other rows
// keep their values; a NaN key makes every row that sees it NaN.
TEST(AttentionTiles, NaNReachesTheRowsThatSeeIt) {
  Tensor q = randn({1, 1, 5, 4}), k = randn({1, 1, 6, 4}), v = randn({1, 1, 6, 4});
  const Tensor clean = scaled_dot_product_attention(q, k, v, {.causal = true});
  Tensor qn = q.clone();
  qn.narrow(2, 2, 1).narrow(3, 1, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  const Tensor got = scaled_dot_product_attention(qn, k, v, {.causal = true});
  EXPECT_TRUE(all(isnan(got.narrow(2, 2, 1))).item<bool>());
  EXPECT_TRUE(all_close(got.narrow(2, 0, 2), clean.narrow(2, 0, 2), 0, 0));
  EXPECT_TRUE(all_close(got.narrow(2, 3, 2), clean.narrow(2, 3, 2), 0, 0));
  Tensor kn = k.clone();
  kn.narrow(2, 3, 1).narrow(3, 0, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  const Tensor seen = scaled_dot_product_attention(q, kn, v, {.causal = true});
  EXPECT_TRUE(all_close(seen.narrow(2, 0, 3), clean.narrow(2, 0, 3), 0, 0));  // keys 0..i < 3
  EXPECT_TRUE(all(isnan(seen.narrow(2, 3, 2))).item<bool>());
}

}  // namespace
}  // namespace sinter::testing

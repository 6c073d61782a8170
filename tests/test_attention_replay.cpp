// The tensor-core attention kernels replayed on the host (kernels/attention_tile.h, Note [attention
// tiles]): the same block schedule, lane rows and columns, causal skips, online-softmax step and
// backward weights that kernels/attention.cu runs, and its warp-level products (ldmatrix and
// mma.sync fragments) on the host warp model. Index maps are checked exactly (every score element
// the mask lets through is visited once by each pass, for tq != tk, residue tiles and causal
// masks; every product element against a naive one); values against a naive attention in double,
// with dropout. CTests build this file again against copies of attention_tile.h with a causal
// bound one tile short and with an ldmatrix address fault, and expect it to fail
// (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "attention_tile.h"
#include "warp_model.h"

namespace sinter::testing {
namespace {

using cudak::attn::kN8;
using cudak::attn::kRows;
using cudak::attn::kWarps;

kern::AttentionArgs args(int64_t bh, int64_t tq, int64_t tk, int64_t d, bool causal,
                         double dropout) {
  kern::AttentionArgs a;
  a.bh = bh;
  a.tq = tq;
  a.tk = tk;
  a.d = d;
  a.scale = 1.0 / std::sqrt(static_cast<double>(d));
  a.causal = causal;
  a.threshold = static_cast<uint32_t>(dropout * 16777216.0);
  a.keep_scale = 1.0 / (1.0 - dropout);
  a.seed = 1234;
  a.offset = 56;
  return a;
}

// Grouped-query attention: `heads` query heads a batch, each `group` of them reading one K/V head.
kern::AttentionArgs grouped(kern::AttentionArgs a, int64_t heads, int64_t group) {
  a.heads = heads;
  a.group = group;
  return a;
}

// The K/V head of query head h, written out: batch h / heads, its head h % heads, of which each
// `group` share a K/V head.
int64_t kv_head_of(const kern::AttentionArgs& a, int64_t h) {
  return h / a.heads * (a.heads / a.group) + h % a.heads / a.group;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Every block of a pass over `tiles` row tiles a head: visit(head, r0) for the tile at r0. Checks
// that the schedule gives each (tile, head) to exactly one block.
void for_each_block(int64_t bh, int64_t tiles, bool last_first,
                    const std::function<void(int64_t, int64_t)>& visit) {
  std::vector<int> seen(bh * tiles, 0);
  for (int64_t b = 0; b < bh * tiles; ++b) {
    const cudak::attn::TileOf t = cudak::attn::tile_of(b, tiles, last_first);
    ASSERT_TRUE(t.tile >= 0 && t.tile < tiles && t.head >= 0 && t.head < bh);
    ++seen[t.head * tiles + t.tile];
    visit(t.head, t.tile * kRows);
  }
  for (int v : seen) ASSERT_EQ(v, 1);
}

// Every accumulator of every lane of a block whose rows start at r0, against the tile of the other
// side at c0: f(row, column) (Note [attention tiles]).
template <class F>
void for_each_acc(int64_t r0, int64_t c0, F&& f) {
  for (int warp = 0; warp < kWarps; ++warp) {
    for (int lane = 0; lane < 32; ++lane) {
      for (int jn = 0; jn < kN8; ++jn) {
        for (int e = 0; e < 4; ++e) {
          f(cudak::attn::lane_row(r0, warp, lane, e / 2), c0 + cudak::attn::acc_col(jn, e, lane));
        }
      }
    }
  }
}

// How often each pass visits score element (h, i, j) that the mask lets through (i < tq, j <
// attention_key_end(i)); must be once.
void check_coverage(const kern::AttentionArgs& a) {
  SCOPED_TRACE(::testing::Message()
               << "tq " << a.tq << " tk " << a.tk << (a.causal ? " causal" : ""));
  auto visible = [&](int64_t i, int64_t j) {
    return i < a.tq && j < kern::attention_key_end(a, i);
  };
  auto expect_once = [&](const std::vector<int>& count, const char* pass) {
    int wrong = 0;
    for (int64_t h = 0; h < a.bh; ++h) {
      for (int64_t i = 0; i < a.tq; ++i) {
        for (int64_t j = 0; j < a.tk; ++j) {
          const int want = visible(i, j) ? 1 : 0;
          if (count[(h * a.tq + i) * a.tk + j] != want && ++wrong <= 3) {
            ADD_FAILURE() << pass << ": element (" << h << ", " << i << ", " << j << ") visited "
                          << count[(h * a.tq + i) * a.tk + j] << " times, want " << want;
          }
        }
      }
    }
    EXPECT_EQ(wrong, 0) << pass << " misses or repeats score elements";
  };
  // The forward and the dq pass: query tiles, walking key tiles up to key_end.
  std::vector<int> by_query(a.bh * a.tq * a.tk, 0);
  for_each_block(a.bh, ceil_div(a.tq, kRows), true, [&](int64_t h, int64_t q0) {
    for (int64_t j0 = 0; j0 < cudak::attn::key_end(a, q0); j0 += kRows) {
      for_each_acc(q0, j0, [&](int64_t i, int64_t j) {
        if (j < a.tk && visible(i, j)) ++by_query[(h * a.tq + i) * a.tk + j];
      });
    }
  });
  expect_once(by_query, "query tiles");
  // The dk/dv pass: key tiles of each K/V head, walking the query tiles of each query head of its
  // group from query_begin; each query head must read its own K/V head.
  std::vector<int> by_key(a.bh * a.tq * a.tk, 0);
  for_each_block(cudak::attn::pass_heads(a, false), ceil_div(a.tk, kRows), false,
                 [&](int64_t g, int64_t k0) {
                   for (int64_t r = 0; r < a.group; ++r) {
                     const int64_t h = kern::attention_first_query_head(a, g) + r;
                     ASSERT_EQ(kv_head_of(a, h), g) << "query head " << h;
                     for (int64_t i0 = cudak::attn::query_begin(a, k0); i0 < a.tq; i0 += kRows) {
                       for_each_acc(k0, i0, [&](int64_t j, int64_t i) {
                         if (j < a.tk && visible(i, j)) ++by_key[(h * a.tq + i) * a.tk + j];
                       });
                     }
                   }
                 });
  expect_once(by_key, "key tiles");
  for (int64_t h = 0; h < a.bh; ++h) ASSERT_EQ(kern::attention_kv_head(a, h), kv_head_of(a, h));
}

TEST(AttentionTiles, EveryVisibleScoreOnceInEachPass) {
  for (bool causal : {false, true}) {
    check_coverage(args(2, 64, 64, 32, causal, 0.0));
    check_coverage(args(1, 70, 130, 32, causal, 0.0));   // residues, tq < tk
    check_coverage(args(2, 200, 65, 32, causal, 0.0));   // tq > tk
    check_coverage(args(1, 1, 129, 32, causal, 0.0));    // one query
    check_coverage(args(1, 129, 1, 32, causal, 0.0));    // one key
    check_coverage(args(3, 192, 192, 32, causal, 0.0));  // whole tiles only
    // Grouped-query attention: 2 batches of 6 query heads on 2 and on 1 K/V heads, and 4 on 4.
    check_coverage(grouped(args(12, 70, 130, 32, causal, 0.0), 6, 3));
    check_coverage(grouped(args(12, 65, 65, 32, causal, 0.0), 6, 6));
    check_coverage(grouped(args(8, 64, 64, 32, causal, 0.0), 4, 1));
  }
}

// The passes with values: the forward's online softmax and both backward passes run per score
// element with the kernels' functions, in f32 as the kernels accumulate; the products of the
// tensor cores (replayed by WarpMma) are plain f32 dot products here.
struct Problem {
  kern::AttentionArgs a;
  // (bh, tq, d), (bh / group, tk, d) twice, (bh, tq, d)
  std::vector<float> q, k, v, dout;
};

Problem make_problem(const kern::AttentionArgs& a) {
  Problem p{a, {}, {}, {}, {}};
  std::mt19937 gen(7);
  std::normal_distribution<float> dist(0.f, 1.f);
  auto fill = [&](std::vector<float>& x, int64_t n) {
    x.resize(n);
    for (float& e : x) e = dist(gen);
  };
  fill(p.q, a.bh * a.tq * a.d);
  fill(p.k, a.bh / a.group * a.tk * a.d);
  fill(p.v, a.bh / a.group * a.tk * a.d);
  fill(p.dout, a.bh * a.tq * a.d);
  return p;
}

float dot(const float* x, const float* y, int64_t d) {
  float s = 0.f;
  for (int64_t c = 0; c < d; ++c) s += x[c] * y[c];
  return s;
}

struct Grads {
  std::vector<float> out, lse, dq, dk, dv;
};

// What a backward lane reads for score element (i, j): the rows of the tiles in shared memory (the
// zeros cp.async fills in past tq or tk), and the row's log-sum-exp and dot (0 past tq).
struct Rows {
  std::vector<float> q, k, v, dout;
  float lse2 = 0.f, dot = 0.f;
};
Rows rows_of(const Problem& p, int64_t h, int64_t i, int64_t j, const std::vector<float>& lse,
             const std::vector<float>& dots) {
  const kern::AttentionArgs& a = p.a;
  const int64_t d = a.d;
  auto row = [&](const std::vector<float>& m, int64_t head, int64_t n, int64_t r) {
    return r < n ? std::vector<float>(m.begin() + (head * n + r) * d,
                                      m.begin() + (head * n + r + 1) * d)
                 : std::vector<float>(d, 0.f);
  };
  const int64_t kvh = kern::attention_kv_head(a, h);
  Rows t{row(p.q, h, a.tq, i), row(p.k, kvh, a.tk, j), row(p.v, kvh, a.tk, j),
         row(p.dout, h, a.tq, i)};
  if (i < a.tq) {
    t.lse2 = lse[h * a.tq + i] * cudak::attn::kLog2e;
    t.dot = dots[h * a.tq + i];
  }
  return t;
}

// backward_weights of element (i, j) from the rows a lane reads. Past tq or tk, or under the mask,
// the weights must be 0 (checked here: the zero rows alone would not make them so, since the p of
// a zero score is not 0).
cudak::attn::Grads weights_of(const kern::AttentionArgs& a, int64_t h, int64_t i, int64_t j,
                              const Rows& t, float scale2, float keep_scale) {
  const float s = dot(t.q.data(), t.k.data(), a.d), dp = dot(t.dout.data(), t.v.data(), a.d);
  const cudak::attn::Grads w =
      cudak::attn::backward_weights(a, h, i, j, s, dp, scale2, t.lse2, t.dot, keep_scale);
  if (i >= a.tq || j >= a.tk || j >= kern::attention_key_end(a, i)) {
    EXPECT_TRUE(w.w == 0.f && w.ds == 0.f)
        << "backward_weights gives weight to masked or padded element (" << h << ", " << i << ", "
        << j << ")";
  }
  return w;
}

// The kernels' passes, replayed.
Grads replay(const Problem& p) {
  const kern::AttentionArgs& a = p.a;
  const int64_t d = a.d;
  const float scale2 = static_cast<float>(a.scale) * cudak::attn::kLog2e;
  const float keep_scale = static_cast<float>(a.keep_scale);
  Grads r;
  r.out.assign(a.bh * a.tq * d, 0.f);
  r.lse.assign(a.bh * a.tq, 0.f);
  // Forward: per query row, key tiles in order; the row's maximum and sum over the four lanes of
  // its g are the tile's over all 64 columns.
  for_each_block(a.bh, ceil_div(a.tq, kRows), true, [&](int64_t h, int64_t q0) {
    const int64_t kvh = kern::attention_kv_head(a, h);
    for (int64_t i = q0; i < std::min(q0 + kRows, a.tq); ++i) {
      float m = -INFINITY, l = 0.f;
      std::vector<float> o(d, 0.f);
      for (int64_t j0 = 0; j0 < cudak::attn::key_end(a, q0); j0 += kRows) {
        float s[kRows], tile_max = -INFINITY;
        for (int c = 0; c < kRows; ++c) {
          const int64_t j = j0 + c;
          const bool valid = j < kern::attention_key_end(a, i);
          s[c] = valid ? dot(&p.q[(h * a.tq + i) * d], &p.k[(kvh * a.tk + j) * d], d) * scale2
                       : -INFINITY;
          tile_max = fmaxf(tile_max, s[c]);
        }
        const cudak::attn::Rescale rs = cudak::attn::online_max(m, tile_max);
        float row_sum = 0.f;
        for (float& x : o) x *= rs.alpha;
        for (int c = 0; c < kRows; ++c) {
          const int64_t j = j0 + c;
          const float w = exp2f(s[c] - rs.base);
          row_sum += w;
          // Past tk the V tile holds the zeros cp.async fills in (and w is 0 there).
          if (j >= a.tk || (a.threshold != 0 && !kern::attention_keep(a, h, i, j))) continue;
          for (int64_t x = 0; x < d; ++x) o[x] += w * p.v[(kvh * a.tk + j) * d + x];
        }
        l = l * rs.alpha + row_sum;
      }
      for (int64_t x = 0; x < d; ++x) r.out[(h * a.tq + i) * d + x] = o[x] * keep_scale / l;
      r.lse[h * a.tq + i] = (m + log2f(l)) / cudak::attn::kLog2e;
    }
  });
  const float scale = static_cast<float>(a.scale);
  std::vector<float> dots(a.bh * a.tq);
  for (int64_t e = 0; e < a.bh * a.tq; ++e) dots[e] = dot(&p.dout[e * d], &r.out[e * d], d);
  // dq by query tiles.
  r.dq.assign(a.bh * a.tq * d, 0.f);
  for_each_block(a.bh, ceil_div(a.tq, kRows), true, [&](int64_t h, int64_t q0) {
    for (int64_t j0 = 0; j0 < cudak::attn::key_end(a, q0); j0 += kRows) {
      for_each_acc(q0, j0, [&](int64_t i, int64_t j) {
        const Rows t = rows_of(p, h, i, j, r.lse, dots);
        const float ds = weights_of(p.a, h, i, j, t, scale2, keep_scale).ds;
        if (i >= a.tq) return;  // the kernel stores rows below tq only
        for (int64_t x = 0; x < d; ++x) r.dq[(h * a.tq + i) * d + x] += scale * ds * t.k[x];
      });
    }
  });
  // dk and dv by key tiles of each K/V head, over the query heads of its group in turn.
  r.dk.assign(a.bh / a.group * a.tk * d, 0.f);
  r.dv.assign(a.bh / a.group * a.tk * d, 0.f);
  for_each_block(
      cudak::attn::pass_heads(a, false), ceil_div(a.tk, kRows), false, [&](int64_t g, int64_t k0) {
        for (int64_t grp = 0; grp < a.group; ++grp) {
          const int64_t h = kern::attention_first_query_head(a, g) + grp;
          for (int64_t i0 = cudak::attn::query_begin(a, k0); i0 < a.tq; i0 += kRows) {
            for_each_acc(k0, i0, [&](int64_t j, int64_t i) {
              const Rows t = rows_of(p, h, i, j, r.lse, dots);
              const cudak::attn::Grads w = weights_of(p.a, h, i, j, t, scale2, keep_scale);
              if (j >= a.tk) return;  // the kernel stores rows below tk only
              for (int64_t x = 0; x < d; ++x) {
                r.dv[(g * a.tk + j) * d + x] += w.w * t.dout[x];
                r.dk[(g * a.tk + j) * d + x] += scale * w.ds * t.q[x];
              }
            });
          }
        }
      });
  return r;
}

// Note [fused attention] in double, from the full score matrix.
std::vector<std::vector<double>> reference(const Problem& p) {
  const kern::AttentionArgs& a = p.a;
  const int64_t d = a.d;
  std::vector<double> out(a.bh * a.tq * d, 0.0), lse(a.bh * a.tq), dq(a.bh * a.tq * d, 0.0),
      dk(a.bh / a.group * a.tk * d, 0.0), dv(a.bh / a.group * a.tk * d, 0.0);
  auto ddot = [&](const float* x, const float* y) {
    double s = 0.0;
    for (int64_t c = 0; c < d; ++c) s += static_cast<double>(x[c]) * y[c];
    return s;
  };
  for (int64_t h = 0; h < a.bh; ++h) {
    const int64_t kh = kv_head_of(a, h);
    for (int64_t i = 0; i < a.tq; ++i) {
      const int64_t end = kern::attention_key_end(a, i);
      const float* qi = &p.q[(h * a.tq + i) * d];
      const float* gi = &p.dout[(h * a.tq + i) * d];
      std::vector<double> s(end), pr(end), keep(end);
      double mx = -INFINITY, sum = 0.0;
      for (int64_t j = 0; j < end; ++j) {
        s[j] = a.scale * ddot(qi, &p.k[(kh * a.tk + j) * d]);
        mx = std::max(mx, s[j]);
      }
      for (int64_t j = 0; j < end; ++j) sum += std::exp(s[j] - mx);
      lse[h * a.tq + i] = mx + std::log(sum);
      for (int64_t j = 0; j < end; ++j) {
        pr[j] = std::exp(s[j] - lse[h * a.tq + i]);
        keep[j] = a.threshold == 0 || kern::attention_keep(a, h, i, j) ? a.keep_scale : 0.0;
        for (int64_t x = 0; x < d; ++x) {
          out[(h * a.tq + i) * d + x] += pr[j] * keep[j] * p.v[(kh * a.tk + j) * d + x];
        }
      }
      double dot_i = 0.0;
      for (int64_t x = 0; x < d; ++x) dot_i += gi[x] * out[(h * a.tq + i) * d + x];
      for (int64_t j = 0; j < end; ++j) {
        const double ds = pr[j] * (keep[j] * ddot(gi, &p.v[(kh * a.tk + j) * d]) - dot_i);
        for (int64_t x = 0; x < d; ++x) {
          dq[(h * a.tq + i) * d + x] += a.scale * ds * p.k[(kh * a.tk + j) * d + x];
          dk[(kh * a.tk + j) * d + x] += a.scale * ds * qi[x];
          dv[(kh * a.tk + j) * d + x] += pr[j] * keep[j] * gi[x];
        }
      }
    }
  }
  return {out, lse, dq, dk, dv};
}

void check_values(const kern::AttentionArgs& a) {
  SCOPED_TRACE(::testing::Message()
               << "tq " << a.tq << " tk " << a.tk << " d " << a.d << (a.causal ? " causal" : "")
               << " keep_scale " << a.keep_scale);
  const Problem p = make_problem(a);
  const Grads got = replay(p);
  const std::vector<std::vector<double>> want = reference(p);
  const char* names[] = {"out", "lse", "dq", "dk", "dv"};
  const std::vector<float>* have[] = {&got.out, &got.lse, &got.dq, &got.dk, &got.dv};
  for (int t = 0; t < 5; ++t) {
    ASSERT_EQ(have[t]->size(), want[t].size());
    double worst = 0.0;
    for (size_t e = 0; e < want[t].size(); ++e) {
      worst = std::max(worst, std::abs((*have[t])[e] - want[t][e]) / (1.0 + std::abs(want[t][e])));
    }
    EXPECT_LT(worst, 2e-4) << names[t];
  }
}

TEST(AttentionTiles, ReplayedPassesMatchTheNaiveAttention) {
  for (bool causal : {false, true}) {
    check_values(args(2, 70, 130, 16, causal, 0.0));
    check_values(args(1, 130, 70, 8, causal, 0.0));
    check_values(args(1, 65, 65, 8, causal, 0.25));  // dropout: the kernels' keep mask
    // Grouped-query attention: 2 batches of 4 query heads on 2 K/V heads, with dropout; and all 4
    // on one.
    check_values(grouped(args(8, 70, 66, 8, causal, 0.25), 4, 2));
    check_values(grouped(args(4, 33, 90, 8, causal, 0.0), 4, 4));
  }
}

// --- the warp-level products on the host warp model (Note [host warp model]) ---

// Every warp of a block through the tensor-core attention's products, for head size kD: Q K^T of a
// 64-key tile (load_row_fragments, mma_rows_tile_t), weights times V (pack_weights,
// mma_weights_tile), both products of a backward pass (backward_products) and the store of an
// accumulator tile (store_acc_rows), against naive products. The values are small integers, whose
// products and sums are exact in bf16, f16 and f32; the tiles' padding columns hold a value no
// product may pick up.
template <typename T, int kD>
int replay_warp_products() {
  constexpr int kLd = cudak::attn::kLd<kD>;
  using cudak::attn::acc_col;
  using cudak::attn::lane_row;
  auto tile = [](int salt) {
    std::vector<T> t(kRows * kLd);
    for (int r = 0; r < kRows; ++r) {
      for (int c = 0; c < kLd; ++c)
        t[r * kLd + c] = T(c < kD ? float((r * 7 + c * 3 + salt) % 5 - 2) : 1000.f);
    }
    return t;
  };
  const std::vector<T> q = tile(0), k = tile(1), v = tile(2), g = tile(3);
  auto at = [](const std::vector<T>& t, int r, int c) {
    return static_cast<float>(t[r * kLd + c]);
  };
  auto dot_rows = [&](const std::vector<T>& a, int i, const std::vector<T>& b, int j) {
    float s = 0;
    for (int c = 0; c < kD; ++c) s += at(a, i, c) * at(b, j, c);
    return s;
  };
  auto weight = [](int row, int col) { return float((row + 2 * col) % 5 - 2); };
  std::atomic<int> wrong{0};
  std::mutex report;
  auto expect = [&](float got, float want, const char* what, int row, int col) {
    if (got == want) return;
    if (++wrong <= 3) {
      std::lock_guard<std::mutex> lock(report);
      ADD_FAILURE() << what << " (" << row << ", " << col << "): " << got << ", want " << want;
    }
  };
  std::vector<T> out(kRows * kD, T(-99.f));
  for (int warp = 0; warp < kWarps; ++warp) {
    HostWarp::run([&](int lane) {
      using Isa = HostIsa;
      uint32_t fa[kD / 16][4];
      cudak::attn::load_row_fragments<Isa, kD>(fa, q.data() + warp * 16 * kLd, lane);
      float s[kN8][4] = {};
      cudak::attn::mma_rows_tile_t<Isa, kD>(s, fa, k.data(), lane);
      float w[kN8][4];
      for (int jn = 0; jn < kN8; ++jn) {
        for (int e = 0; e < 4; ++e) {
          const int row = int(lane_row(0, warp, lane, e / 2)), col = acc_col(jn, e, lane);
          expect(s[jn][e], dot_rows(q, row, k, col), "Q K^T", row, col);
          w[jn][e] = weight(row, col);
        }
      }
      uint32_t pa[kRows / 16][4];
      cudak::attn::pack_weights<Isa, T>(pa, w);
      float o[kD / 8][4] = {};
      cudak::attn::mma_weights_tile<Isa, kD>(o, pa, v.data(), lane);
      for (int jn = 0; jn < kD / 8; ++jn) {
        for (int e = 0; e < 4; ++e) {
          const int row = int(lane_row(0, warp, lane, e / 2)), col = acc_col(jn, e, lane);
          float want = 0;
          for (int j = 0; j < kRows; ++j) want += weight(row, j) * at(v, j, col);
          expect(o[jn][e], want, "W V", row, col);
        }
      }
      float s2[kN8][4], dp[kN8][4];
      cudak::attn::backward_products<Isa, kD>(s2, dp, k.data(), q.data(), v.data(), g.data(), warp,
                                              lane);
      for (int jn = 0; jn < kN8; ++jn) {
        for (int e = 0; e < 4; ++e) {
          const int row = int(lane_row(0, warp, lane, e / 2)), col = acc_col(jn, e, lane);
          expect(s2[jn][e], dot_rows(k, row, q, col), "K Q^T", row, col);
          expect(dp[jn][e], dot_rows(v, row, g, col), "V dout^T", row, col);
        }
      }
      const int64_t rows[2] = {lane_row(0, warp, lane, 0), lane_row(0, warp, lane, 1)};
      const float one[2] = {1.f, 1.f};
      cudak::attn::store_acc_rows<Isa, kD>(out.data(), o, rows, one, kRows - 3, lane);
    });
  }
  // The stored W V: every row below the bound, and nothing past it.
  for (int row = 0; row < kRows; ++row) {
    for (int col = 0; col < kD; ++col) {
      float want = -99.f;
      if (row < kRows - 3) {
        want = 0;
        for (int j = 0; j < kRows; ++j) want += weight(row, j) * at(v, j, col);
      }
      expect(static_cast<float>(out[row * kD + col]), want, "stored W V", row, col);
    }
  }
  return wrong;
}

TEST(AttentionWarp, ProductsMatchTheNaiveOnes) {
  EXPECT_EQ((replay_warp_products<BFloat16, 32>()), 0) << "bf16, D 32";
  EXPECT_EQ((replay_warp_products<BFloat16, 64>()), 0) << "bf16, D 64";
  EXPECT_EQ((replay_warp_products<Half, 128>()), 0) << "f16, D 128";
  EXPECT_EQ((replay_warp_products<Half, 64>()), 0) << "f16, D 64";
}

}  // namespace
}  // namespace sinter::testing

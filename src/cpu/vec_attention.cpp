// The CPU's fused attention in f32 tiles (Note [cpu attention tiles]).
#include "cpu/vec_attention.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu/vec_clones.h"
#include "cpu/vec_exp.h"
#include "internal/parallel.h"
#include "sinter/core/dtype.h"
#include "sinter/core/error.h"

namespace sinter::cpu::vec {

// Note [cpu attention tiles]
// scaled_dot_product_attention on the CPU without its (Tq, Tk) matrices in memory, for f32, bf16
// and f16, computed in f32 (bf16 and f16 widened as they are read, the results rounded once), the
// formulas of Note [fused attention]. Per query head, the query rows go in blocks of kBlockRows:
// the block's scores against the keys its rows see sit in a buffer of kBlockRows x Tk floats (in
// the L1 or L2 cache), then their softmax, then the block's output. The head's keys (transposed)
// and values are widened once into buffers padded with zeros (D and Tk to multiples of 16), so
// that the products (gemm_rows: kRows rows by 16 or 32 columns of sums in registers, written with
// AVX-512F intrinsics; elsewhere a loop compiled for AVX2 and the baseline, src/cpu/vec_clones.h)
// have no tails; a padded key scores 0 and weighs 0. q, k and v are read where they lie (a head's
// rows at any stride, its columns contiguous): the heads of a fused qkv projection are not copied
// out first. Softmax: the row's largest scaled score m (scale times the largest score where scale >
// 0), p_j = exp(s_j scale - m) (the scaling in the exponent's multiply-add, as the backward
// recomputes it, below kFoldedScoreLimit and for scale > 0; scaled first elsewhere) on
// exp_nonpositive (Note [cpu vector math]'s exp), z their sum, lse = m + log z, the weights p / z.
// A weight whose exponent is below -87 (exp near FLT_MIN, 1.2e-38, or below) is 0: computing it
// would make subnormals, each a slow microcode assist on Intel CPUs, and its share of the row is
// far below f32's resolution. A NaN score makes its row NaN. The products run over a block's keys
// up to its last row's end (padded): an inf or NaN in the v of a key that a row of the block does
// not see (a causal mask's future) reaches that row's output through 0 x inf, as in the composed
// form's product of weights and v; the backward keeps the keys a row does not see out of its dS,
// and the padding rows out of dk and dv. The backward runs per K/V head, so that dk and dv of its
// grouped query heads sum without races: per block of a query head's rows, p again from lse, D_i =
// dout_i . out_i, dP = dout V^T, dS = p (dP - D) scale; dv += p^T dout, dk += dS^T q, dq = dS K, dk
// and dv kept in f32 until the K/V head's end. Heads are split over the threads and each head's
// sums run in a fixed order: the bits do not depend on the thread count. They do on the CPU (the
// AVX-512 and AVX2 clones fuse multiply-adds, the baseline does not). Against the composed form
// (matmul, softmax, matmul): bf16 and f16 scores and weights stay f32 here, where the composed form
// rounds them to the dtype between its ops; the f32 results differ by the order of the sums.
namespace {

constexpr int64_t kLanes = 16;       // floats of an AVX-512 register
constexpr int64_t kRows = 8;         // rows of a gemm_tile
constexpr int64_t kBlockRows = 16;   // query rows of one block
constexpr int64_t kKeyPad = 16;      // Tk is padded to this (a vector of gemm_rows' columns)
constexpr float kExpFloor = -87.0f;  // exp(x) < FLT_MIN below about -87.3

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// c (kRows x W) = a b, or c += a b: a's element (r, kk) at a[r a_row + kk a_k], b (k x W) and c
// row-major with leading dims ldb and ldc. Each sum runs over kk in order. The loop for CPUs
// without AVX-512F (the compiler does not keep its sums in registers: about a fifth of the speed).
template <int64_t W>
[[gnu::always_inline]] inline void gemm_tile(const float* __restrict a, int64_t a_row, int64_t a_k,
                                             const float* __restrict b, int64_t ldb,
                                             float* __restrict c, int64_t ldc, int64_t k,
                                             bool accumulate) {
  float acc[kRows][W];
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t l = 0; l < W; ++l) acc[r][l] = accumulate ? c[r * ldc + l] : 0.0f;
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* __restrict bk = b + kk * ldb;
    for (int64_t r = 0; r < kRows; ++r) {
      const float ar = a[r * a_row + kk * a_k];
      for (int64_t l = 0; l < W; ++l) acc[r][l] += ar * bk[l];
    }
  }
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t l = 0; l < W; ++l) c[r * ldc + l] = acc[r][l];
  }
}

SINTER_VECTOR_CLONES void gemm_rows_loop(const float* a, int64_t a_row, int64_t a_k, const float* b,
                                         int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t k,
                                         int64_t n, bool accumulate) {
  for (int64_t i = 0; i < m; i += kRows) {
    for (int64_t j = 0; j < n; j += kLanes) {
      gemm_tile<kLanes>(a + i * a_row, a_row, a_k, b + j, ldb, c + i * ldc + j, ldc, k, accumulate);
    }
  }
}

#if defined(__x86_64__)
// gemm_tile on AVX-512F: kRows x (16 V) sums in registers, each column's two loads of b shared
// by the kRows rows' broadcasts of a.
template <int V>
[[gnu::target("avx512f"), gnu::always_inline]] inline void gemm_tile_avx512(
    const float* a, int64_t a_row, int64_t a_k, const float* b, int64_t ldb, float* c, int64_t ldc,
    int64_t k, bool accumulate) {
  __m512 acc[kRows][V];
  for (int64_t r = 0; r < kRows; ++r) {
    for (int v = 0; v < V; ++v) {
      acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + v * kLanes) : _mm512_setzero_ps();
    }
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    __m512 bv[V];
    for (int v = 0; v < V; ++v) bv[v] = _mm512_loadu_ps(b + kk * ldb + v * kLanes);
    for (int64_t r = 0; r < kRows; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r * a_row + kk * a_k]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(ar, bv[v], acc[r][v]);
    }
  }
  for (int64_t r = 0; r < kRows; ++r) {
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(c + r * ldc + v * kLanes, acc[r][v]);
  }
}

[[gnu::target("avx512f")]] void gemm_rows_avx512(const float* a, int64_t a_row, int64_t a_k,
                                                 const float* b, int64_t ldb, float* c, int64_t ldc,
                                                 int64_t m, int64_t k, int64_t n, bool accumulate) {
  for (int64_t i = 0; i < m; i += kRows) {
    const float* ai = a + i * a_row;
    float* ci = c + i * ldc;
    int64_t j = 0;
    for (; j + 2 * kLanes <= n; j += 2 * kLanes) {
      gemm_tile_avx512<2>(ai, a_row, a_k, b + j, ldb, ci + j, ldc, k, accumulate);
    }
    if (j < n) gemm_tile_avx512<1>(ai, a_row, a_k, b + j, ldb, ci + j, ldc, k, accumulate);
  }
}
#endif

std::atomic<bool> g_portable{false};  // attention_tiles_use_portable_products

// c (m x n) = a (m x k) b (k x n), or c += a b; a as gemm_tile's, m a multiple of kRows and n of
// kLanes. Transposing a (a_row 1, a_k its row length) gives the backward's p^T dout and dS^T q.

void gemm_rows(const float* a, int64_t a_row, int64_t a_k, const float* b, int64_t ldb, float* c,
               int64_t ldc, int64_t m, int64_t k, int64_t n, bool accumulate) {
#if defined(__x86_64__)
  if (cpu_has_avx512f() && !g_portable.load(std::memory_order_relaxed)) {
    return gemm_rows_avx512(a, a_row, a_k, b, ldb, c, ldc, m, k, n, accumulate);
  }
#endif
  gemm_rows_loop(a, a_row, a_k, b, ldb, c, ldc, m, k, n, accumulate);
}

// The lanes of acc combined in halves (a tree, so that a short row does not wait on sixteen
// dependent steps): the largest (row_max's lanes are never NaN), or the sum. In vectors of the
// compiler's (split to the clone's width), not through the array: a loop over it stored each
// level and loaded the next from the store, about a fifth of the forward's softmax.
#if defined(__clang__) || __GNUC__ >= 12  // __builtin_shufflevector
using Lanes16 = float __attribute__((vector_size(64)));
using Lanes8 = float __attribute__((vector_size(32)));
using Lanes4 = float __attribute__((vector_size(16)));
#define SINTER_LOW8(v) __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7)
#define SINTER_HIGH8(v) __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15)
#define SINTER_LOW4(v) __builtin_shufflevector(v, v, 0, 1, 2, 3)
#define SINTER_HIGH4(v) __builtin_shufflevector(v, v, 4, 5, 6, 7)

[[gnu::always_inline]] inline float lanes_max(const float* acc) {
  Lanes16 v;
  std::memcpy(&v, acc, sizeof v);
  const Lanes8 x8 = SINTER_LOW8(v), y8 = SINTER_HIGH8(v);
  const Lanes8 h = y8 > x8 ? y8 : x8;
  const Lanes4 x4 = SINTER_LOW4(h), y4 = SINTER_HIGH4(h);
  const Lanes4 q = y4 > x4 ? y4 : x4;
  const float a = q[2] > q[0] ? q[2] : q[0], b = q[3] > q[1] ? q[3] : q[1];
  return b > a ? b : a;
}

[[gnu::always_inline]] inline float lanes_sum(const float* acc) {
  Lanes16 v;
  std::memcpy(&v, acc, sizeof v);
  const Lanes8 h = SINTER_LOW8(v) + SINTER_HIGH8(v);
  const Lanes4 q = SINTER_LOW4(h) + SINTER_HIGH4(h);
  return (q[0] + q[2]) + (q[1] + q[3]);
}
#undef SINTER_LOW8
#undef SINTER_HIGH8
#undef SINTER_LOW4
#undef SINTER_HIGH4
#else  // the same trees through the array
[[gnu::always_inline]] inline float lanes_max(const float* acc) {
  float a[kLanes];
  std::memcpy(a, acc, sizeof a);
  for (int64_t w = kLanes / 2; w >= 1; w /= 2) {
    for (int64_t l = 0; l < w; ++l) a[l] = a[l + w] > a[l] ? a[l + w] : a[l];
  }
  return a[0];
}

[[gnu::always_inline]] inline float lanes_sum(const float* acc) {
  float a[kLanes];
  std::memcpy(a, acc, sizeof a);
  for (int64_t w = kLanes / 2; w >= 1; w /= 2) {
    for (int64_t l = 0; l < w; ++l) a[l] += a[l + w];
  }
  return a[0];
}
#endif

// The largest s_j for j < end, NaNs passed over (-inf if every one is NaN or -inf). The last
// vector's lanes from end on are -inf in the register: written into s, the vector's load waited on
// the scalar stores (a fifth of the forward's softmax).
[[gnu::always_inline]] inline float row_max(const float* s, int64_t end) {
  const int64_t full = end / kLanes * kLanes;
  float m[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) m[l] = -INFINITY;
  for (int64_t j = 0; j < full; j += kLanes) {
#pragma GCC unroll 1  // one vector, not sixteen scalars
    for (int64_t l = 0; l < kLanes; ++l) m[l] = s[j + l] > m[l] ? s[j + l] : m[l];
  }
  if (full < end) {
#pragma GCC unroll 1
    for (int64_t l = 0; l < kLanes; ++l) {
      const float v = full + l < end ? s[full + l] : -INFINITY;
      m[l] = v > m[l] ? v : m[l];
    }
  }
  return lanes_max(m);
}

// exp(x) for kExpFloor <= x <= 1 (a softmax's exponents: a little above 0 where the scale is in
// the multiply-add, kFoldedScoreLimit below), where it is a normal float: as
// vec::exp (Note [cpu vector math]), n = round(x / ln2) and the Taylor polynomial of exp(r) to
// r^7, but 2^n goes straight into the result's exponent bits, without vec::exp's clamps and its
// two scalings for subnormal and infinite results. NaN stays NaN.
[[gnu::always_inline]] inline float exp_nonpositive(float x) {
  const float t = x * 1.44269504088896341f + kExpRound;
  const float nf = t - kExpRound;
  const float r = (x - nf * 0.693359375f) - nf * -2.12194440e-4f;
  const float p = exp_poly(r);
  const uint32_t n = std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(kExpRound);
  const float y = std::bit_cast<float>(std::bit_cast<uint32_t>(p) + (n << 23));
  return x == x ? y : x;
}

// s_j = exp(s_j scale - sub) for j < end (0 where the exponent is below kExpFloor), 0 for
// end <= j < n (n a multiple of kLanes); returns their sum. Only the vector holding `end` tests j.
[[gnu::always_inline]] inline float exp_row(float* s, int64_t end, int64_t n, float scale,
                                            float sub) {
  float acc[kLanes] = {};
  const int64_t full = end / kLanes * kLanes;
  const auto lane = [&](int64_t j, bool inside) {
    const float x = s[j] * scale - sub;
    const bool keep = inside && !(x < kExpFloor);  // NaN is kept, and stays NaN
    return keep ? exp_nonpositive(keep ? x : 0.0f) : 0.0f;
  };
  for (int64_t j = 0; j < full; j += kLanes) {
#pragma GCC unroll 1
    for (int64_t l = 0; l < kLanes; ++l) {
      s[j + l] = lane(j + l, true);
      acc[l] += s[j + l];
    }
  }
  if (full < end) {
#pragma GCC unroll 1
    for (int64_t l = 0; l < kLanes; ++l) {
      s[full + l] = lane(full + l, full + l < end);
      acc[l] += s[full + l];
    }
  }
  std::fill(s + round_up(end, kLanes), s + n, 0.0f);
  return lanes_sum(acc);
}

[[gnu::always_inline]] inline void scale_row(float* s, int64_t n, float f) {
  for (int64_t j = 0; j < n; ++j) s[j] *= f;
}

// a . b over n floats (n a multiple of kLanes), in kLanes partial sums.
[[gnu::always_inline]] inline float dot_row(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  for (int64_t j = 0; j < n; j += kLanes) {
#pragma GCC unroll 1  // one vector, not sixteen scalars
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += a[j + l] * b[j + l];
  }
  return lanes_sum(acc);
}

// dp_j = p_j (dp_j - di) scale for j < end, 0 from end to n: the scores' gradient of one row.
[[gnu::always_inline]] inline void score_grad_row(const float* p, float* dp, int64_t end, int64_t n,
                                                  float di, float scale) {
  for (int64_t j = 0; j < n; ++j) dp[j] = j < end ? p[j] * (dp[j] - di) * scale : 0.0f;
}

// Scores are scaled in the exponent's multiply-add, exp(s scale - m), only while |m| (the largest
// scaled score, or lse) is below this. The multiply-add's exact product leaves the largest score's
// exponent off zero by up to half an ulp of m: 3e-5 here, but 512 at scores near 1e10, where its
// weight would be 0 and the row NaN. Beyond it the scores are scaled first and the exponent is a
// difference of two f32: 0 for the largest, so that a row whose weight is all on one key gets 1
// there, and from its lse (then the largest score) the backward's p is 1 again. The backward
// decides by |lse|, which is up to log Tk above the forward's m: where the two fall on either side
// of the limit, an exponent differs by up to half an ulp of 1024 (3e-5), not more.
constexpr float kFoldedScoreLimit = 1024.0f;

// The forward's weights of a block's n rows, in place (row r at s + r ld, its keys
// [0, ends[r])): normalized, and their lse. For scale > 0 the largest scaled score is scale times
// the largest score (f32's product is monotone), and below kFoldedScoreLimit the scores are scaled
// in the exponent's multiply-add, as the backward recomputes them; else they are scaled first. A
// NaN score, passed over by the largest, makes its weight NaN, the row's sum, and so every weight
// of the row and its lse.
SINTER_VECTOR_CLONES void softmax_block(float* s, int64_t ld, int64_t n, const int64_t* ends,
                                        int64_t jn, float scale, float* lse) {
  for (int64_t r = 0; r < n; ++r) {
    float* row = s + r * ld;
    float f = scale, mx = scale * row_max(row, ends[r]);
    if (!(scale > 0.0f) || !(std::abs(mx) < kFoldedScoreLimit)) {
      scale_row(row, jn, scale);
      f = 1.0f;
      mx = row_max(row, ends[r]);
    }
    const float z = exp_row(row, ends[r], jn, f, mx);
    scale_row(row, jn, 1.0f / z);
    lse[r] = mx + std::log(z);
  }
}

// The backward's weights p (from the scores at p, in place) and scores' gradients dS (from dP at
// ds, in place) of a block's n rows, with D_r from the rows of dout and out (dp floats each).
SINTER_VECTOR_CLONES void score_grads_block(float* p, float* ds, int64_t ld, int64_t n,
                                            const int64_t* ends, int64_t jn, float scale,
                                            const float* lse, const float* dout, const float* out,
                                            int64_t dp) {
  for (int64_t r = 0; r < n; ++r) {
    float f = scale;
    if (!(scale > 0.0f) || !(std::abs(lse[r]) < kFoldedScoreLimit)) {  // as the forward, by lse
      scale_row(p + r * ld, jn, scale);
      f = 1.0f;
    }
    exp_row(p + r * ld, ends[r], jn, f, lse[r]);
    const float di = dot_row(dout + r * dp, out + r * dp, dp);
    score_grad_row(p + r * ld, ds + r * ld, ends[r], jn, di, scale);
  }
}

template <class T>
T* head_row(const AttentionHeads& x, int64_t h, int64_t t) {
  return static_cast<T*>(x.data) + x.offsets[h] + t * x.row;
}

// Rows [t0, t0 + n) of head h widened into dst (ld floats a row, columns from d on zero), and the
// rows from n to `rows` zero.
template <class T>
void load_rows(const AttentionHeads& x, int64_t h, int64_t t0, int64_t n, int64_t rows, int64_t d,
               float* dst, int64_t ld) {
  for (int64_t t = 0; t < n; ++t) {
    const T* src = head_row<T>(x, h, t0 + t);
    float* out = dst + t * ld;
    for (int64_t c = 0; c < d; ++c) out[c] = static_cast<float>(src[c]);
    std::fill(out + d, out + ld, 0.0f);
  }
  std::fill(dst + n * ld, dst + rows * ld, 0.0f);
}

// The transpose of head h's n rows: dst[c ld + t] = x[t][c], zero elsewhere in dp rows of ld.
// kLanes rows at a time, so that each of dst's rows gets a whole cache line from rows in the L1
// cache (a row at a time wrote one float to each of D lines, with D x Tk floats past the L1).
template <class T>
void load_transposed(const AttentionHeads& x, int64_t h, int64_t n, int64_t d, int64_t dp,
                     float* dst, int64_t ld) {
  std::fill(dst, dst + dp * ld, 0.0f);
  for (int64_t t0 = 0; t0 < n; t0 += kLanes) {
    const int64_t rows = std::min(kLanes, n - t0);
    const T* src[kLanes];
    for (int64_t r = 0; r < rows; ++r) src[r] = head_row<T>(x, h, t0 + r);
    for (int64_t c = 0; c < d; ++c) {
      float* out = dst + c * ld + t0;
      for (int64_t r = 0; r < rows; ++r) out[r] = static_cast<float>(src[r][c]);
    }
  }
}

// n rows of src (ld floats a row) rounded into rows [t0, t0 + n) of head h.
template <class T>
void store_rows(const float* src, int64_t ld, const AttentionHeads& x, int64_t h, int64_t t0,
                int64_t n, int64_t d) {
  for (int64_t t = 0; t < n; ++t) {
    T* out = head_row<T>(x, h, t0 + t);
    for (int64_t c = 0; c < d; ++c) out[c] = static_cast<T>(src[t * ld + c]);
  }
}

// A block of query rows [i0, i0 + n): n rows, m of them with the padding (a multiple of kRows),
// the keys its products take, jn (the last row's end, padded),
// and each row's keys [0, ends[r]).
struct Block {
  int64_t i0, n, m, jn;
  int64_t ends[kBlockRows];
};

Block block_at(const kern::AttentionArgs& a, int64_t i0) {
  Block b{};
  b.i0 = i0;
  b.n = std::min(kBlockRows, a.tq - i0);
  b.m = round_up(b.n, kRows);
  b.jn = round_up(kern::attention_key_end(a, i0 + b.n - 1), kKeyPad);
  for (int64_t r = 0; r < b.n; ++r) b.ends[r] = kern::attention_key_end(a, i0 + r);
  return b;
}

struct Pads {
  int64_t dp, tkp;  // D and Tk, padded
};

Pads pads_of(const kern::AttentionArgs& a) {
  return {round_up(a.d, kLanes), round_up(a.tk, kKeyPad)};
}

template <class T>
void forward(const kern::AttentionArgs& a, const AttentionHeads& q, const AttentionHeads& k,
             const AttentionHeads& v, const AttentionHeads& out, float* lse) {
  const auto [dp, tkp] = pads_of(a);
  const auto scale = static_cast<float>(a.scale);
  detail::parallel_blocks(a.bh, 4 * a.tq * a.tk * a.d, [&](int64_t h0, int64_t h1) {
    std::vector<float> kt(dp * tkp), vr(tkp * dp), qb(kBlockRows * dp), s(kBlockRows * tkp),
        ob(kBlockRows * dp);
    int64_t loaded = -1;  // the K/V head in kt and vr
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t g = kern::attention_kv_head(a, h);
      if (g != loaded) {
        load_transposed<T>(k, g, a.tk, a.d, dp, kt.data(), tkp);
        load_rows<T>(v, g, 0, a.tk, tkp, a.d, vr.data(), dp);
        loaded = g;
      }
      for (int64_t i0 = 0; i0 < a.tq; i0 += kBlockRows) {
        const Block b = block_at(a, i0);
        load_rows<T>(q, h, i0, b.n, b.m, a.d, qb.data(), dp);
        gemm_rows(qb.data(), dp, 1, kt.data(), tkp, s.data(), tkp, b.m, dp, b.jn, false);
        softmax_block(s.data(), tkp, b.n, b.ends, b.jn, scale, lse + h * a.tq + i0);
        // The padding rows' weights are not stored: their outputs are dropped.
        gemm_rows(s.data(), tkp, 1, vr.data(), dp, ob.data(), dp, b.m, b.jn, dp, false);
        store_rows<T>(ob.data(), dp, out, h, i0, b.n, a.d);
      }
    }
  });
}

// One K/V head's buffers in the backward, and one block's.
struct BackwardScratch {
  std::vector<float> kt, vt, kr, dk, dv;      // the head's
  std::vector<float> qb, dob, ob, p, ds, dq;  // the block's
  BackwardScratch(int64_t dp, int64_t tkp)
      : kt(dp * tkp),
        vt(dp * tkp),
        kr(tkp * dp),
        dk(tkp * dp),
        dv(tkp * dp),
        qb(kBlockRows * dp),
        dob(kBlockRows * dp),
        ob(kBlockRows * dp),
        p(kBlockRows * tkp),
        ds(kBlockRows * tkp),
        dq(kBlockRows * dp) {}
};

// One block of query head h's rows: dq stored, dk and dv added into w's.
template <class T>
void backward_block(const kern::AttentionArgs& a, const Pads& pad, const AttentionHeads& q,
                    const AttentionHeads& out, const AttentionHeads& dout, const float* lse,
                    const AttentionHeads& dq, int64_t h, const Block& b, BackwardScratch& w) {
  const int64_t dp = pad.dp, tkp = pad.tkp;
  const auto scale = static_cast<float>(a.scale);
  load_rows<T>(q, h, b.i0, b.n, b.m, a.d, w.qb.data(), dp);
  load_rows<T>(dout, h, b.i0, b.n, b.m, a.d, w.dob.data(), dp);
  load_rows<T>(out, h, b.i0, b.n, b.m, a.d, w.ob.data(), dp);
  gemm_rows(w.qb.data(), dp, 1, w.kt.data(), tkp, w.p.data(), tkp, b.m, dp, b.jn, false);
  gemm_rows(w.dob.data(), dp, 1, w.vt.data(), tkp, w.ds.data(), tkp, b.m, dp, b.jn, false);
  score_grads_block(w.p.data(), w.ds.data(), tkp, b.n, b.ends, b.jn, scale, lse + h * a.tq + b.i0,
                    w.dob.data(), w.ob.data(), dp);
  for (int64_t r = b.n; r < b.m; ++r) {  // the padding rows add nothing to dk and dv (0 x inf)
    std::fill_n(w.p.data() + r * tkp, b.jn, 0.0f);
    std::fill_n(w.ds.data() + r * tkp, b.jn, 0.0f);
  }
  gemm_rows(w.p.data(), 1, tkp, w.dob.data(), dp, w.dv.data(), dp, b.jn, b.m, dp, true);
  gemm_rows(w.ds.data(), 1, tkp, w.qb.data(), dp, w.dk.data(), dp, b.jn, b.m, dp, true);
  gemm_rows(w.ds.data(), tkp, 1, w.kr.data(), dp, w.dq.data(), dp, b.m, b.jn, dp, false);
  store_rows<T>(w.dq.data(), dp, dq, h, b.i0, b.n, a.d);
}

template <class T>
void backward(const kern::AttentionArgs& a, const AttentionHeads& q, const AttentionHeads& k,
              const AttentionHeads& v, const AttentionHeads& out, const AttentionHeads& dout,
              const float* lse, const AttentionHeads& dq, const AttentionHeads& dk,
              const AttentionHeads& dv) {
  const Pads pad = pads_of(a);
  const int64_t dp = pad.dp, tkp = pad.tkp;
  const int64_t kv_heads = a.bh / a.group;
  detail::parallel_blocks(kv_heads, 10 * a.group * a.tq * a.tk * a.d, [&](int64_t g0, int64_t g1) {
    BackwardScratch w(dp, tkp);
    for (int64_t g = g0; g < g1; ++g) {
      load_transposed<T>(k, g, a.tk, a.d, dp, w.kt.data(), tkp);
      load_transposed<T>(v, g, a.tk, a.d, dp, w.vt.data(), tkp);
      load_rows<T>(k, g, 0, a.tk, tkp, a.d, w.kr.data(), dp);
      std::fill(w.dk.begin(), w.dk.end(), 0.0f);
      std::fill(w.dv.begin(), w.dv.end(), 0.0f);
      const int64_t first = kern::attention_first_query_head(a, g);
      for (int64_t h = first; h < first + a.group; ++h) {
        for (int64_t i0 = 0; i0 < a.tq; i0 += kBlockRows) {
          backward_block<T>(a, pad, q, out, dout, lse, dq, h, block_at(a, i0), w);
        }
      }
      store_rows<T>(w.dk.data(), dp, dk, g, 0, a.tk, a.d);
      store_rows<T>(w.dv.data(), dp, dv, g, 0, a.tk, a.d);
    }
  });
}

// f(TypeTag) for the tiles' dtypes.
template <class F>
void visit_tiles(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(float{});
    case DType::bf16:
      return f(BFloat16{});
    case DType::f16:
      return f(Half{});
    default:
      SINTER_THROW("scaled_dot_product_attention: the CPU tiles take f32, bf16 and f16, not ",
                   dtype);
  }
}

}  // namespace

bool attention_tiles_take(const kern::AttentionArgs& a) {
  const bool dtype = a.dtype == DType::f32 || a.dtype == DType::bf16 || a.dtype == DType::f16;
  return dtype && a.threshold == 0 && a.bh >= 1 && a.group >= 1 && a.tq >= 0 && a.tk >= 1 &&
         a.d >= 1;
}

bool attention_tiles_use_portable_products(bool portable) { return g_portable.exchange(portable); }

void attention_tiles_forward(const kern::AttentionArgs& a, const AttentionHeads& q,
                             const AttentionHeads& k, const AttentionHeads& v,
                             const AttentionHeads& out, float* lse) {
  visit_tiles(a.dtype, [&](auto zero) { forward<decltype(zero)>(a, q, k, v, out, lse); });
}

void attention_tiles_backward(const kern::AttentionArgs& a, const AttentionHeads& q,
                              const AttentionHeads& k, const AttentionHeads& v,
                              const AttentionHeads& out, const AttentionHeads& dout,
                              const float* lse, const AttentionHeads& dq, const AttentionHeads& dk,
                              const AttentionHeads& dv) {
  visit_tiles(a.dtype,
              [&](auto zero) { backward<decltype(zero)>(a, q, k, v, out, dout, lse, dq, dk, dv); });
}

}  // namespace sinter::cpu::vec

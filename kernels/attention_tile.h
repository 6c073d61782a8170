// The tensor-core attention kernels' tile loop (kernels/attention.cu), readable by a host compiler:
// which block takes which tile, where a lane's accumulators lie, which tiles of the other side a
// causal mask lets a tile skip, the online softmax's running maximum, the backward's weights of
// one score element, and the warp-level products over an instruction set. The kernels run these
// functions (the forward kernel writes lane_row and acc_col out, see there); the CPU suite
// replays the passes with them against a naive attention, and the products on the host warp
// model (tests/test_attention_replay.cpp).
#pragma once

#include <cmath>
#include <cstdint>

#include "kern/attention.h"

#if defined(__CUDACC__)
#define SINTER_ATTN_FN __host__ __device__ __forceinline__
#define SINTER_ATTN_WARP_FN __device__ __forceinline__
#define SINTER_ATTN_UNROLL _Pragma("unroll")
#else
#define SINTER_ATTN_FN inline
#define SINTER_ATTN_WARP_FN inline
#define SINTER_ATTN_UNROLL
#endif

namespace sinter::cudak::attn {

// Note [attention tiles]
// A block of 4 warps owns 64 rows (queries in the forward and the dq pass, keys in the dk/dv pass)
// and walks 64-row tiles of the other side. Warp w owns rows 16 w.. of the block's rows; lane l,
// with g = l / 4 and t = l % 4 (the mma.sync fragment layout, mma.cuh), holds accumulator e of n8
// tile jn at (row g + 8 (e / 2), column 8 jn + 2 t + e % 2) of the warp's 16 x 64 score tile, so a
// row's 64 columns spread over the four lanes of one g. The causal mask is top-left aligned (query
// i sees keys j <= i, kern::attention_key_end): a query tile starting at q0 sees keys below
// q0 + 64, and a key tile starting at k0 is seen by queries from k0 on, for any tq and tk.
constexpr int kRows = 64;       // rows per block and per tile of the other side
constexpr int kN8 = kRows / 8;  // n8 tiles of a 16 x 64 score tile
constexpr int kWarps = 4;
constexpr float kLog2e = 1.4426950408889634f;

// Block b's (tile, head) over `tiles` tiles a head: heaviest first under a causal mask (last_first:
// late query tiles see the most keys; early key tiles, first, the most queries).
struct TileOf {
  int64_t tile, head;
};
SINTER_ATTN_FN TileOf tile_of(int64_t block, int64_t tiles, bool last_first) {
  const int64_t i = block % tiles;
  return {last_first ? tiles - 1 - i : i, block / tiles};
}

// The heads a pass's blocks take: the query heads (bh) for the forward and the dq pass, which read
// K/V head kern::attention_kv_head of theirs; the K/V heads (bh / group) for the dk/dv pass, whose
// block walks the query tiles of each query head of its group in turn (the group's heads are
// consecutive from kern::attention_first_query_head), so that dk and dv sum over the group in one
// block, without atomics.
SINTER_ATTN_FN int64_t pass_heads(const kern::AttentionArgs& a, bool by_queries) {
  return by_queries ? a.bh : a.bh / a.group;
}

// Lane `lane` of warp `warp` in a block whose rows start at r0 (Note [attention tiles]): the row of
// its accumulators e with e / 2 = x (0: row g, 1: row g + 8), and the column in the 64-row tile of
// the other side of accumulator e of n8 tile jn.
SINTER_ATTN_FN int64_t lane_row(int64_t r0, int warp, int lane, int x) {
  return r0 + warp * 16 + lane / 4 + 8 * x;
}
SINTER_ATTN_FN int acc_col(int jn, int e, int lane) { return 8 * jn + 2 * (lane % 4) + e % 2; }

// The end of the keys the query tile at q0 sees (it walks key tiles from 0 up to it), and the first
// query tile the key tile at k0 is seen by.
SINTER_ATTN_FN int64_t key_end(const kern::AttentionArgs& a, int64_t q0) {
  return a.causal && q0 + kRows < a.tk ? q0 + kRows : a.tk;
}
SINTER_ATTN_FN int64_t query_begin(const kern::AttentionArgs& a, int64_t k0) {
  return a.causal ? k0 : 0;
}

// The online softmax's step for one row in the exp2 domain: m, the running maximum, takes the
// tile's; `base` is what the tile's scores are taken off (0 while the row has seen no key, whose
// weights are all 0 then), `alpha` what the row's running sum and accumulators are scaled by.
struct Rescale {
  float base, alpha;
};
SINTER_ATTN_FN Rescale online_max(float& m, float tile_max) {
  const float m_new = fmaxf(m, tile_max);
  const float base = m_new == -INFINITY ? 0.f : m_new;
  const Rescale r{base, exp2f(m - base)};
  m = m_new;
  return r;
}

// The backward's weights of score element (i, j) of head h, from its unscaled score s and dP
// value dp, the row's log-sum-exp lse2 (exp2 domain) and dot D_i: w = p keep (dv's weight) and
// ds = p (keep dp - D_i) (the score's gradient, before the scale), with p = exp2(s scale2 - lse2)
// and keep = keep_scale or 0 (Note [fused attention]); both 0 past the queries or under the mask.
// lse2 and dot are read only for the elements that need them (the dk/dv pass keeps them in shared
// memory).
struct Grads {
  float w, ds;
};
SINTER_ATTN_FN Grads backward_weights(const kern::AttentionArgs& a, int64_t h, int64_t i, int64_t j,
                                      float s, float dp, float scale2, const float& lse2,
                                      const float& dot, float keep_scale) {
  if (i >= a.tq || j >= kern::attention_key_end(a, i)) return {0.f, 0.f};
  const float p = exp2f(s * scale2 - lse2);
  const float keep = kern::attention_keep(a, h, i, j) ? keep_scale : 0.f;
  return {p * keep, p * (keep * dp - dot)};
}

// --- The warp-level products over an instruction set Isa (mma::DeviceIsa on the GPU, the host
// warp model of tests/warp_model.h in the CPU suite; Note [host warp model]) ---

// The row stride of a shared (64, kD) tile: padded so that ldmatrix reads are free of bank
// conflicts.
template <int kD>
constexpr int kLd = kD + 8;

// The A fragments of 16 rows (k16 steps over kD) of a shared (.., kLd) tile.
template <class Isa, int kD, class T>
SINTER_ATTN_WARP_FN void load_row_fragments(uint32_t (&fa)[kD / 16][4], const T* rows, int lane) {
  const int q = lane / 8, r = lane % 8;
  SINTER_ATTN_UNROLL
  for (int ks = 0; ks < kD / 16; ++ks) {
    Isa::ldmatrix_x4(fa[ks], rows + ((q & 1) * 8 + r) * kLd<kD> + ks * 16 + (q >> 1) * 8);
  }
}

// s (16 x 64) += rows (A fragments, 16 x kD) times the transpose of a shared (64, kLd) tile: the
// 64 dot products of each row with the tile's rows.
template <class Isa, int kD, class T>
SINTER_ATTN_WARP_FN void mma_rows_tile_t(float (&s)[kN8][4], const uint32_t (&fa)[kD / 16][4],
                                         const T* tile, int lane) {
  const int q = lane / 8, r = lane % 8;
  SINTER_ATTN_UNROLL
  for (int ks = 0; ks < kD / 16; ++ks) {
    SINTER_ATTN_UNROLL
    for (int jp = 0; jp < kN8 / 2; ++jp) {
      uint32_t f[4];  // B = tile^T, stored K-major: b0, b1 of n8 tiles 2 jp and 2 jp + 1
      Isa::ldmatrix_x4(f, tile + (jp * 16 + (q >> 1) * 8 + r) * kLd<kD> + ks * 16 + (q & 1) * 8);
      const uint32_t b0[2] = {f[0], f[1]}, b1[2] = {f[2], f[3]};
      Isa::template mma_16816<T>(s[2 * jp], fa[ks], b0);
      Isa::template mma_16816<T>(s[2 * jp + 1], fa[ks], b1);
    }
  }
}

// acc (16 x kD) += weights (A fragments of a 16 x 64 tile) times a shared (64, kLd) tile.
template <class Isa, int kD, class T>
SINTER_ATTN_WARP_FN void mma_weights_tile(float (&acc)[kD / 8][4],
                                          const uint32_t (&pa)[kRows / 16][4], const T* tile,
                                          int lane) {
  const int q = lane / 8, r = lane % 8;
  SINTER_ATTN_UNROLL
  for (int kk = 0; kk < kRows / 16; ++kk) {
    SINTER_ATTN_UNROLL
    for (int jp = 0; jp < kD / 16; ++jp) {
      uint32_t f[4];  // B = tile, stored N-major: read transposed, two n8 tiles at a time
      Isa::ldmatrix_x4_trans(f,
                             tile + (kk * 16 + (q & 1) * 8 + r) * kLd<kD> + jp * 16 + (q >> 1) * 8);
      const uint32_t b0[2] = {f[0], f[1]}, b1[2] = {f[2], f[3]};
      Isa::template mma_16816<T>(acc[2 * jp], pa[kk], b0);
      Isa::template mma_16816<T>(acc[2 * jp + 1], pa[kk], b1);
    }
  }
}

// A 16 x 64 tile of weights held as accumulators, as the A fragments of its product with a tile:
// n8 tile jn holds columns 8 jn.. of k16 step jn / 2, its first half (even jn) or its second.
template <class Isa, class T>
SINTER_ATTN_WARP_FN void pack_weights(uint32_t (&pa)[kRows / 16][4], const float (&w)[kN8][4]) {
  SINTER_ATTN_UNROLL
  for (int jn = 0; jn < kN8; ++jn) {
    pa[jn / 2][(jn % 2) * 2 + 0] = Isa::template pack2<T>(w[jn][0], w[jn][1]);
    pa[jn / 2][(jn % 2) * 2 + 1] = Isa::template pack2<T>(w[jn][2], w[jn][3]);
  }
}

// The two score-shaped products of a backward pass, for the warp's 16 rows of the block's tiles:
// s = a_rows tile_s^T and dp = b_rows tile_dp^T (dq pass: Q K^T and dout V^T; dk/dv pass: K Q^T
// and V dout^T).
template <class Isa, int kD, class T>
SINTER_ATTN_WARP_FN void backward_products(float (&s)[kN8][4], float (&dp)[kN8][4], const T* a_rows,
                                           const T* tile_s, const T* b_rows, const T* tile_dp,
                                           int warp, int lane) {
  SINTER_ATTN_UNROLL
  for (int jn = 0; jn < kN8; ++jn) {
    SINTER_ATTN_UNROLL
    for (int e = 0; e < 4; ++e) s[jn][e] = dp[jn][e] = 0.f;
  }
  uint32_t fa[kD / 16][4];
  load_row_fragments<Isa, kD>(fa, a_rows + warp * 16 * kLd<kD>, lane);
  mma_rows_tile_t<Isa, kD>(s, fa, tile_s, lane);
  load_row_fragments<Isa, kD>(fa, b_rows + warp * 16 * kLd<kD>, lane);
  mma_rows_tile_t<Isa, kD>(dp, fa, tile_dp, lane);
}

// Stores a warp's 16 x kD accumulator tile times scale[x] (x = 0: row g, 1: row g + 8) into rows
// row[x] < rows of a (rows, kD) matrix, two elements per 32-bit store.
template <class Isa, int kD, class T>
SINTER_ATTN_WARP_FN void store_acc_rows(T* dst, const float (&acc)[kD / 8][4],
                                        const int64_t (&row)[2], const float (&scale)[2],
                                        int64_t rows, int lane) {
  const int t = lane % 4;
  SINTER_ATTN_UNROLL
  for (int jn = 0; jn < kD / 8; ++jn) {
    SINTER_ATTN_UNROLL
    for (int x = 0; x < 2; ++x) {
      if (row[x] >= rows) continue;
      *reinterpret_cast<uint32_t*>(dst + row[x] * kD + 8 * jn + 2 * t) =
          Isa::template pack2<T>(acc[jn][2 * x] * scale[x], acc[jn][2 * x + 1] * scale[x]);
    }
  }
}

}  // namespace sinter::cudak::attn

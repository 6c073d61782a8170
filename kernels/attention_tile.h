// The tensor-core attention kernels' tile loop (kernels/attention.cu), readable by a host compiler:
// which block takes which tile, where a lane's accumulators lie, which tiles of the other side a
// causal mask lets a tile skip, the online softmax's running maximum, and the backward's weights
// of one score element. The kernels run these functions (the forward kernel writes lane_row and
// acc_col out, see there); the CPU suite replays the forward and both backward passes with them
// against a naive attention (tests/test_attention_replay.cpp).
#pragma once

#include <cmath>
#include <cstdint>

#include "kern/attention.h"

#if defined(__CUDACC__)
#define SINTER_ATTN_FN __host__ __device__ __forceinline__
#else
#define SINTER_ATTN_FN inline
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

}  // namespace sinter::cudak::attn

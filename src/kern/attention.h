// The kernel interface of the fused scaled_dot_product_attention and of rope: in sinter::cpu
// (src/cpu/attention.cpp) and sinter::cudak (kernels/attention.cu), Note [kernel interfaces].
#pragma once

#include <cmath>
#include <cstdint>

#include "kern/ctx.h"
#include "kern/philox.h"

namespace sinter::kern {

// Note [fused attention]
// q: contiguous (bh, tq, d), k and v: contiguous (bh, tk, d), out: contiguous (bh, tq, d), all of
// `dtype`; tq, tk >= 1. Row i of head h: s_ij = scale * q_i . k_j over the keys it sees (j <= i
// when causal, top-left aligned, else all), p_ij = exp(s_ij - lse_i) with lse_i = log sum_j
// exp(s_ij) (so a row's p sums to 1), w_ij = p_ij * keep_ij / (1 - dropout_p), out_i = sum_j w_ij
// v_j. The forward saves lse, contiguous (bh, tq) of the accumulation dtype (attention_lse_dtype),
// for the backward, which recomputes p from it: no (tq, tk) matrix is ever stored. With
// D_i = dout_i . out_i: dv_j = sum_i w_ij dout_i, ds_ij = p_ij (keep_ij dout_i . v_j /
// (1 - dropout_p) - D_i), dq_i = scale sum_j ds_ij k_j, dk_j = scale sum_i ds_ij q_i.
// keep_ij is the dropout op's mask (Note [dropout mask]) at element (h * tq + i) * tk + j of the
// request (seed, offset): the fused form and the composed one (softmax, dropout, matmul) drop the
// same weights.
// Grouped-query attention: q has bh = batch * heads heads, k and v bh / group (heads / group per
// batch, `group` dividing heads); query head h reads K/V head attention_kv_head(a, h), and the
// query heads of K/V head g are the `group` consecutive ones from attention_first_query_head(a, g).
// dk and dv of a K/V head sum over its query heads, in order. group 1 is plain attention.
struct AttentionArgs {
  DType dtype = DType::f32;
  int64_t bh = 0, tq = 0, tk = 0, d = 0;
  int64_t heads = 1, group = 1;
  double scale = 1.0;
  bool causal = false;
  uint32_t threshold = 0;   // keep iff (philox w0 >> 8) >= threshold; 0 keeps every weight
  double keep_scale = 1.0;  // 1 / (1 - dropout_p)
  uint64_t seed = 0, offset = 0;
  // The heads' place in a larger attention's dropout mask (Note [dropout blocks]), in units of
  // (flattened batch-head) heads; identity by default.
  DropoutBlock drop_heads = {};
};

inline DType attention_lse_dtype(DType dtype) {
  return dtype == DType::f64 ? DType::f64 : DType::f32;
}

// Whether query i keeps its weight on key j (the dropout mask of Note [fused attention]).
SINTER_HD inline bool attention_keep(const AttentionArgs& a, int64_t h, int64_t i, int64_t j) {
  if (a.threshold == 0) return true;
  const uint64_t e = (a.drop_heads.index(h) * a.tq + i) * a.tk + j;
  return (philox_element(a.seed, a.offset, e).w[0] >> 8) >= a.threshold;
}

SINTER_HD inline int64_t attention_kv_head(const AttentionArgs& a, int64_t h) {
  if (a.group == 1) return h;
  return (h / a.heads) * (a.heads / a.group) + (h % a.heads) / a.group;
}

SINTER_HD inline int64_t attention_first_query_head(const AttentionArgs& a, int64_t g) {
  if (a.group == 1) return g;
  const int64_t per_batch = a.heads / a.group;
  return (g / per_batch) * a.heads + (g % per_batch) * a.group;
}

// The keys query i sees: [0, attention_key_end(a, i)).
SINTER_HD inline int64_t attention_key_end(const AttentionArgs& a, int64_t i) {
  return a.causal ? (i + 1 < a.tk ? i + 1 : a.tk) : a.tk;
}

// Note [rotary embedding]
// rope_apply: x and y contiguous (outer, t, d) of `dtype`, d even; positions: t i64 values on the
// kernel's device. Pair i < d / 2 of row (o, j) is (x[first], x[second]) of rope_pair: the two
// halves of the row (i, i + d / 2, Hugging Face's Llama) or neighbours (2i, 2i + 1, Meta's Llama)
// when interleaved. It turns by the angle positions[j] * base^(-2i / d), formed in double
// (rope_angle): y_first = a cos - b sin, y_second = a sin + b cos; `inverse` turns back (sin
// negated), which is the backward. y may be x.
struct RopeArgs {
  DType dtype = DType::f32;
  int64_t outer = 0, t = 0, d = 0;
  double base = 10000.0;
  bool interleaved = false, inverse = false;
};

SINTER_HD inline void rope_pair(const RopeArgs& a, int64_t i, int64_t* first, int64_t* second) {
  *first = a.interleaved ? 2 * i : i;
  *second = a.interleaved ? 2 * i + 1 : i + a.d / 2;
}

SINTER_HD inline double rope_angle(const RopeArgs& a, int64_t position, int64_t i) {
  return static_cast<double>(position) *
         ::pow(a.base, -2.0 * static_cast<double>(i) / static_cast<double>(a.d));
}

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/attention.inc"
#include "kern/declare.h"

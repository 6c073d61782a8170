// The CPU's own fused attention for f32, bf16 and f16 (Note [cpu attention tiles] in
// src/cpu/vec_attention.cpp): what scaled_dot_product_attention's automatic choice runs on the
// CPU where it takes the call.
#pragma once

#include <cstdint>

#include "kern/attention.h"

namespace sinter::cpu::vec {

// One operand of the attention, any of q, k, v, out, dout and the gradients: element c of row t of
// (flattened) head h at data + offsets[h] + t * row + c, counted in elements of the args' dtype.
// The heads of k, v, dk and dv are the K/V heads (bh / group of them).
struct AttentionHeads {
  void* data = nullptr;
  const int64_t* offsets = nullptr;
  int64_t row = 0;
};

// Whether the tiles take these args: f32, bf16 or f16, no dropout, at least one query head,
// Tq >= 0, Tk >= 1, D >= 1.
bool attention_tiles_take(const kern::AttentionArgs& a);

// For the tests: the products on the loop for CPUs without AVX-512F (true) or on the CPU's best
// (false, the default); returns the previous setting.
bool attention_tiles_use_portable_products(bool portable);

// out (Tq rows of D per query head) and lse (bh x Tq floats, contiguous): Note [fused attention].
void attention_tiles_forward(const kern::AttentionArgs& a, const AttentionHeads& q,
                             const AttentionHeads& k, const AttentionHeads& v,
                             const AttentionHeads& out, float* lse);

// dq, dk and dv from the forward's operands, its out and lse, and dout. dk and dv of a K/V head sum
// over its query heads.
void attention_tiles_backward(const kern::AttentionArgs& a, const AttentionHeads& q,
                              const AttentionHeads& k, const AttentionHeads& v,
                              const AttentionHeads& out, const AttentionHeads& dout,
                              const float* lse, const AttentionHeads& dq, const AttentionHeads& dk,
                              const AttentionHeads& dv);

}  // namespace sinter::cpu::vec

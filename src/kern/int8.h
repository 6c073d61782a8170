// The kernel interface of int8 inference (the quantized Linear and Conv2d of src/quant/): in
// sinter::cpu (src/cpu/int8.cpp) and sinter::cudak (kernels/int8.cu), Note [kernel interfaces].
#pragma once

#include <cstdint>

#include "kern/act.h"
#include "kern/conv.h"
#include "kern/ctx.h"

namespace sinter::kern {

// Note [int8 kernels]
// A quantized layer holds its weight as int8 values q_w, rows of k (one row per output channel),
// which its device's backend packs once (int8_pack_weight) into bytes only that backend reads:
// the CPU into 16-channel blocks of int16 pairs (Note [int8 gemm] in src/cpu/int8.h), CUDA into
// rows padded to kInt8RowAlign bytes for the tensor-core GEMM (Note [int8 mma gemm] in
// kernels/int8_mma.h). A forward quantizes the f32 input with quantize_int8 (ONNX's
// QuantizeLinear with zero point 0), sums int8 x int8 products exactly in int32, and writes
// y = act(c scale[ch] + bias[ch]) in f32 (int8_epilogue), scale[ch] = s_x s_w[ch]. Both backends
// compute the same integers, and the same f32 epilogue of them.
//
// The int32 sums are exact while k < 2^17: each product is at most (-128)^2 = 2^14, so k = 2^17
// products of -128 x -128 would sum to 2^31, one past INT32_MAX (mma.sync's .s32 and vpmaddwd's
// lanes wrap, they do not saturate).
constexpr int64_t kInt8MaxK = (int64_t{1} << 17) - 1;
// CUDA's packed rows and quantized input rows are padded to a multiple of this many bytes, so that
// the GEMM's 16-byte loads stay aligned.
constexpr int64_t kInt8RowAlign = 16;

// The epilogue's per-channel operands, f32 on the kernel's device; bias may be null (no bias).
struct Int8Epilogue {
  const float* scale = nullptr;
  const float* bias = nullptr;
  GemmAct act = GemmAct::None;
};

// q = saturate(round_half_even(x / scale)) in [-128, 127]; NaN becomes 0. The host and the
// device compute it alike: an IEEE division and rint in the default rounding mode.
SINTER_HD inline int quantize_int8(float x, float scale) {
  const float v = x / scale;
  if (!(v == v)) return 0;
  if (v <= -128.0F) return -128;
  if (v >= 127.0F) return 127;
  return static_cast<int>(rintf(v));
}

// act(c scale + bias) of one output element, the epilogue both backends run.
// The device rounds the product and the sum apart (no contraction into one fma), as the host does.
SINTER_HD inline float int8_epilogue(int32_t c, float scale, float bias, GemmAct act) {
#ifdef __CUDA_ARCH__
  const float v = __fadd_rn(__fmul_rn(static_cast<float>(c), scale), bias);
#else
  const float v = static_cast<float>(c) * scale + bias;
#endif
  if (act == GemmAct::Relu) return v < 0.0F ? 0.0F : v;  // NaN stays NaN, as relu
  return act == GemmAct::None ? v : activate(act, v);
}

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/int8.inc"
#include "kern/declare.h"

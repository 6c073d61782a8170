// The kernel interface of 2-D convolution (forward, input gradient, weight gradient), NCHW: in
// sinter::cpu (src/cpu/conv.cpp) and sinter::cudak (kernels/conv.cu), Note [kernel interfaces].
#pragma once

#include <array>
#include <cstdint>

#include "kern/act.h"
#include "kern/ctx.h"

namespace sinter::kern {

// One grouped, strided, padded, dilated 2-D convolution. The ops layer checks that the sizes agree
// (c_in and c_out divisible by groups, h_out and w_out >= 1) before any kernel sees them.
struct Conv2dGeom {
  int64_t n = 0, c_in = 0, h = 0, w = 0;  // x: (n, c_in, h, w)
  int64_t c_out = 0, kh = 0, kw = 0;      // weight: (c_out, c_in / groups, kh, kw)
  int64_t h_out = 0, w_out = 0;           // y: (n, c_out, h_out, w_out)
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dil_h = 1, dil_w = 1;
  int64_t groups = 1;
  // f32 may run on tensor cores with inputs rounded to TF32 (set_matmul_precision("high")); the CPU
  // kernels and the other dtypes ignore it.
  bool allow_tf32 = false;
  // Forward only: y = act(conv + bias) in the epilogue; the backward passes ignore it.
  GemmAct act = GemmAct::None;
};

// The geometry's sizes (all but allow_tf32 and act), as a plan cache's key holds them.
inline std::array<int64_t, 16> geometry_key(const Conv2dGeom& g) {
  return {g.n,     g.c_in,     g.h,        g.w,     g.c_out, g.kh,    g.kw,    g.h_out,
          g.w_out, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dil_h, g.dil_w, g.groups};
}

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/conv.inc"
#include "kern/declare.h"

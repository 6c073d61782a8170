// The kernel interface of 2-D max, average and adaptive average pooling, NCHW: in sinter::cpu
// (src/cpu/pool.cpp) and sinter::cudak (kernels/pool.cu), Note [kernel interfaces].
#pragma once

#include <cstdint>

#include "kern/ctx.h"

namespace sinter::kern {

// One 2-D pooling over `planes` independent (h, w) planes (n * c of an NCHW tensor). Window
// (oh, ow) starts at (oh * stride_h - pad_h, ow * stride_w - pad_w).
struct Pool2dGeom {
  int64_t planes = 0, h = 0, w = 0, h_out = 0, w_out = 0;
  int64_t kh = 1, kw = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dil_h = 1, dil_w = 1;   // max pooling only
  bool count_include_pad = true;  // average pooling only
};

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/pool.inc"
#include "kern/declare.h"

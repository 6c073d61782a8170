// The kernel interface of the convolution and pooling family: 2-D convolution (forward, input
// gradient, weight gradient) and max, average and adaptive average pooling, NCHW. Each function
// exists in sinter::cpu (src/cpu/conv.cpp, src/cpu/pool.cpp) and sinter::cudak (kernels/conv.cu,
// kernels/pool.cu, or src/cuda/conv_nocuda.cpp without CUDA), called through SINTER_DISPATCH.
#pragma once

#include <cstdint>

#include "internal/kernels.h"

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
};

// All tensors are contiguous and of `dtype` (f32, f64, bf16 or f16); accumulation is f32 (f64 for
// f64). Outputs are written whole, never accumulated into, and may hold garbage on entry.
// y = conv(x, weight) + bias; bias (c_out) may be null.
void conv2d_forward(const Ctx& ctx, const Conv2dGeom& g, DType dtype, const void* x,
                    const void* weight, const void* bias, void* y);
// dx (n, c_in, h, w) from dy (n, c_out, h_out, w_out): the transposed convolution with `weight`.
void conv2d_backward_input(const Ctx& ctx, const Conv2dGeom& g, DType dtype, const void* dy,
                           const void* weight, void* dx);
// dweight (c_out, c_in / groups, kh, kw) from x and dy, summed over the batch.
void conv2d_backward_weight(const Ctx& ctx, const Conv2dGeom& g, DType dtype, const void* x,
                            const void* dy, void* dweight);

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

// x: contiguous (planes, h, w); y and indices: contiguous (planes, h_out, w_out). indices holds the
// position (ih * w + iw) of the first maximum of each window (NaN counts as the maximum); every
// window holds at least one element of the input (the ops layer limits the padding).
void max_pool2d_forward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* x, void* y,
                        int64_t* indices);
// dx (planes, h, w): each dy element goes to the input position its index names.
void max_pool2d_backward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* dy,
                         const int64_t* indices, void* dx);
// Note [avg pool divisor]: the window is clipped to the padded input [-pad, size + pad) for the
// count_include_pad divisor, and to the input itself for the other one, as in PyTorch; so with
// ceil_mode a window that hangs over the padded edge divides by fewer than kh * kw elements.
void avg_pool2d_forward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* x, void* y);
void avg_pool2d_backward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* dy,
                         void* dx);
// Adaptive: output row oh averages input rows [floor(oh * h / h_out), ceil((oh + 1) * h / h_out)),
// and likewise for columns. Only planes, h, w, h_out and w_out of `g` are read.
void adaptive_avg_pool2d_forward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* x,
                                 void* y);
void adaptive_avg_pool2d_backward(const Ctx& ctx, const Pool2dGeom& g, DType dtype, const void* dy,
                                  void* dx);

}  // namespace sinter::kern

namespace sinter::cpu {
using namespace sinter::kern;  // NOLINT
void conv2d_forward(const Ctx&, const Conv2dGeom&, DType, const void*, const void*, const void*,
                    void*);
void conv2d_backward_input(const Ctx&, const Conv2dGeom&, DType, const void*, const void*, void*);
void conv2d_backward_weight(const Ctx&, const Conv2dGeom&, DType, const void*, const void*, void*);
void max_pool2d_forward(const Ctx&, const Pool2dGeom&, DType, const void*, void*, int64_t*);
void max_pool2d_backward(const Ctx&, const Pool2dGeom&, DType, const void*, const int64_t*, void*);
void avg_pool2d_forward(const Ctx&, const Pool2dGeom&, DType, const void*, void*);
void avg_pool2d_backward(const Ctx&, const Pool2dGeom&, DType, const void*, void*);
void adaptive_avg_pool2d_forward(const Ctx&, const Pool2dGeom&, DType, const void*, void*);
void adaptive_avg_pool2d_backward(const Ctx&, const Pool2dGeom&, DType, const void*, void*);
}  // namespace sinter::cpu

namespace sinter::cudak {
using namespace sinter::kern;  // NOLINT
void conv2d_forward(const Ctx&, const Conv2dGeom&, DType, const void*, const void*, const void*,
                    void*);
void conv2d_backward_input(const Ctx&, const Conv2dGeom&, DType, const void*, const void*, void*);
void conv2d_backward_weight(const Ctx&, const Conv2dGeom&, DType, const void*, const void*, void*);
void max_pool2d_forward(const Ctx&, const Pool2dGeom&, DType, const void*, void*, int64_t*);
void max_pool2d_backward(const Ctx&, const Pool2dGeom&, DType, const void*, const int64_t*, void*);
void avg_pool2d_forward(const Ctx&, const Pool2dGeom&, DType, const void*, void*);
void avg_pool2d_backward(const Ctx&, const Pool2dGeom&, DType, const void*, void*);
void adaptive_avg_pool2d_forward(const Ctx&, const Pool2dGeom&, DType, const void*, void*);
void adaptive_avg_pool2d_backward(const Ctx&, const Pool2dGeom&, DType, const void*, void*);
}  // namespace sinter::cudak

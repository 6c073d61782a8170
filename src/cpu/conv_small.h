// The inference plans' direct convolution for layers with few input taps (Note [small
// convolutions] in src/cpu/conv_small.cpp): a network's first convolution, over one to four
// input channels, where oneDNN's kernels run at a fraction of the FMA units' rate.
#pragma once

#include <cstdint>
#include <vector>

#include "kern/conv.h"

namespace sinter::cpu::small_conv {

// The most c_in and c_in kh kw, and the fewest and most c_out, the kernel takes: a first layer's
// (the kernel was measured there alone).
constexpr int64_t kMaxChannelsIn = 4;
constexpr int64_t kMaxTaps = 32;
constexpr int64_t kMinChannels = 32;
constexpr int64_t kMaxChannels = 64;

// Whether the kernel runs g on this CPU: x86-64 with AVX-512F, groups 1, c_in up to
// kMaxChannelsIn, c_out a multiple of 16 from kMinChannels to kMaxChannels, c_in kh kw up to
// kMaxTaps.
bool takes(const kern::Conv2dGeom& g);

// The weight (c_out, c_in, kh, kw) as the kernel reads it: (kh, kw, c_in, c_out).
std::vector<float> pack(const kern::Conv2dGeom& g, const float* w);

// The floats of scratch one call needs: the input's rows and columns that the windows read, with
// the padding written out as zeros.
int64_t scratch_floats(const kern::Conv2dGeom& g);

// One channels-last image: y (g.h_out, g.w_out, g.c_out) = conv(x (g.h, g.w, g.c_in)) + bias (null:
// none), then relu as the relu op applies it (NaN kept, -0 to 0) where `relu`. g.pad_h and g.pad_w
// pad the top and left; the bottom and right padding is what the output size implies. `packed` is
// pack(g, weight); `scratch` holds scratch_floats(g).
void run(const float* x, const kern::Conv2dGeom& g, const float* packed, const float* bias,
         bool relu, float* scratch, float* y);

}  // namespace sinter::cpu::small_conv

// Note [small convolutions]
// A convolution over few input taps (c_in kh kw up to 32: the first layer of an image network,
// one to four channels) is too thin for oneDNN's kernels: the cnn's 1 -> 32 layer of 3 x 3 ran at
// about a quarter of the FMA units' rate on the Intel machine (7.5 us an image at batch 256, and
// 10 us for half an image at batch 1). Here each output pixel's c_out channels are two to four
// AVX-512 registers, and a tile of pixels (3 to 6 of them) keeps its sums in registers over all
// the taps: per tap, the CV weight vectors are loaded once and each pixel's input value broadcast
// once, CV P fused multiply-adds for CV + P loads. With one vector of channels (c_out 16), each
// broadcast feeds a single multiply-add, and the kernel ran slower than oneDNN's (resnet20's first
// layer, 5.6 us an image): such layers stay on oneDNN. The input's window rows and columns are
// first copied into scratch with the padding written as zeros, so the taps need no bounds tests.
// The sums run in tap order (ky, kx, ci) from zero, then the bias is added and relu applied as the
// relu op applies it: results within f32 rounding of the library's convolution (another order),
// the same bits at every thread count. AVX-512F only: elsewhere the plans keep oneDNN's
// convolution.
#include "cpu/conv_small.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>

#include "cpu/vec_clones.h"
#include "sinter/core/error.h"

namespace sinter::cpu::small_conv {
namespace {

// The padded input's rows and columns: those the windows read.
int64_t padded_h(const kern::Conv2dGeom& g) {
  return (g.h_out - 1) * g.stride_h + (g.kh - 1) * g.dil_h + 1;
}
int64_t padded_w(const kern::Conv2dGeom& g) {
  return (g.w_out - 1) * g.stride_w + (g.kw - 1) * g.dil_w + 1;
}

// The taps of a tile: offsets (in floats) of each tap's input value from the pixel's window
// corner in the padded scratch, in (ky, kx, ci) order.
struct Taps {
  int64_t off[kMaxTaps];
  int64_t count;
};

#if defined(__x86_64__)

// P output pixels, `pix` floats apart in the scratch, CV vectors of 16 channels each: y for the P
// pixels (c_out floats apart).
template <int CV, int P>
[[gnu::target("avx512f"), gnu::always_inline]] inline void tile(const float* xp, int64_t pix,
                                                                const Taps& taps, const float* w,
                                                                int64_t c_out, const float* bias,
                                                                bool relu, float* y) {
  __m512 acc[P][CV];
  for (int p = 0; p < P; ++p) {
    for (int v = 0; v < CV; ++v) acc[p][v] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < taps.count; ++k) {
    __m512 wv[CV];
    for (int v = 0; v < CV; ++v) wv[v] = _mm512_loadu_ps(w + k * c_out + 16 * v);
    const float* xk = xp + taps.off[k];
    for (int p = 0; p < P; ++p) {
      const __m512 xb = _mm512_set1_ps(xk[p * pix]);
      for (int v = 0; v < CV; ++v) acc[p][v] = _mm512_fmadd_ps(xb, wv[v], acc[p][v]);
    }
  }
  const __m512 zero = _mm512_setzero_ps();
  for (int v = 0; v < CV; ++v) {
    const __m512 b = bias != nullptr ? _mm512_loadu_ps(bias + 16 * v) : zero;
    for (int p = 0; p < P; ++p) {
      __m512 s = bias != nullptr ? _mm512_add_ps(acc[p][v], b) : acc[p][v];
      if (relu) {  // the relu op's rule: kept where > 0 or NaN, else +0
        const __mmask16 keep =
            _mm512_cmp_ps_mask(s, zero, _CMP_GT_OQ) | _mm512_cmp_ps_mask(s, s, _CMP_UNORD_Q);
        s = _mm512_maskz_mov_ps(keep, s);
      }
      _mm512_storeu_ps(y + p * c_out + 16 * v, s);
    }
  }
}

// The pixels of a tile for CV vectors of channels: 12 registers of sums, enough to keep both FMA
// units busy through the FMAs' latency, with the CV weights and a broadcast beside them.
template <int CV>
constexpr int kTile = CV == 2   ? 6
                      : CV == 3 ? 4
                                : 3;

// The last pixels of a row, fewer than a tile: a tile of their count.
template <int CV, int P = kTile<CV> - 1>
[[gnu::target("avx512f")]] void tail(int64_t count, const float* xp, int64_t pix, const Taps& taps,
                                     const float* w, int64_t c_out, const float* bias, bool relu,
                                     float* y) {
  if constexpr (P >= 1) {
    if (count == P) {
      tile<CV, P>(xp, pix, taps, w, c_out, bias, relu, y);
    } else {
      tail<CV, P - 1>(count, xp, pix, taps, w, c_out, bias, relu, y);
    }
  }
}

// Every output pixel of the image, its scratch `xp` (rows of wp pixels of c_in).
template <int CV>
[[gnu::target("avx512f")]] void rows(const float* xp, int64_t wp, const kern::Conv2dGeom& g,
                                     const Taps& taps, const float* w, const float* bias, bool relu,
                                     float* y) {
  constexpr int P = kTile<CV>;
  const int64_t pix = g.stride_w * g.c_in;
  for (int64_t oy = 0; oy < g.h_out; ++oy) {
    const float* row = xp + oy * g.stride_h * wp * g.c_in;
    float* out = y + oy * g.w_out * g.c_out;
    int64_t ox = 0;
    for (; ox + P <= g.w_out; ox += P) {
      tile<CV, P>(row + ox * pix, pix, taps, w, g.c_out, bias, relu, out + ox * g.c_out);
    }
    if (ox < g.w_out) {
      tail<CV>(g.w_out - ox, row + ox * pix, pix, taps, w, g.c_out, bias, relu, out + ox * g.c_out);
    }
  }
}

#endif

}  // namespace

bool takes(const kern::Conv2dGeom& g) {
  return cpu_has_avx512f() && g.groups == 1 && g.c_in <= kMaxChannelsIn && g.c_out % 16 == 0 &&
         g.c_out >= kMinChannels && g.c_out <= kMaxChannels && g.c_in * g.kh * g.kw <= kMaxTaps &&
         g.h_out > 0 && g.w_out > 0;
}

std::vector<float> pack(const kern::Conv2dGeom& g, const float* w) {
  std::vector<float> out(static_cast<size_t>(g.kh * g.kw * g.c_in * g.c_out));
  for (int64_t o = 0; o < g.c_out; ++o) {
    for (int64_t i = 0; i < g.c_in; ++i) {
      for (int64_t ky = 0; ky < g.kh; ++ky) {
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          out[static_cast<size_t>(((ky * g.kw + kx) * g.c_in + i) * g.c_out + o)] =
              w[((o * g.c_in + i) * g.kh + ky) * g.kw + kx];
        }
      }
    }
  }
  return out;
}

int64_t scratch_floats(const kern::Conv2dGeom& g) { return padded_h(g) * padded_w(g) * g.c_in; }

void run(const float* x, const kern::Conv2dGeom& g, const float* packed, const float* bias,
         bool relu, float* scratch, float* y) {
  // The padded input: rows [-pad_h, hp - pad_h) and columns [-pad_w, wp - pad_w) of x, zero
  // outside it.
  const int64_t hp = padded_h(g), wp = padded_w(g), c = g.c_in;
  std::fill(scratch, scratch + hp * wp * c, 0.0F);
  const int64_t c0 = std::max<int64_t>(0, -g.pad_w), c1 = std::min(g.w, wp - g.pad_w);
  for (int64_t r = std::max<int64_t>(0, -g.pad_h); r < std::min(g.h, hp - g.pad_h); ++r) {
    if (c1 > c0) {
      std::memcpy(scratch + ((r + g.pad_h) * wp + c0 + g.pad_w) * c, x + (r * g.w + c0) * c,
                  static_cast<size_t>((c1 - c0) * c) * sizeof(float));
    }
  }
  Taps taps{};
  taps.count = 0;
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      for (int64_t i = 0; i < c; ++i) {
        taps.off[taps.count++] = (ky * g.dil_h * wp + kx * g.dil_w) * c + i;
      }
    }
  }
#if defined(__x86_64__)
  switch (g.c_out / 16) {
    case 2:
      rows<2>(scratch, wp, g, taps, packed, bias, relu, y);
      break;
    case 3:
      rows<3>(scratch, wp, g, taps, packed, bias, relu, y);
      break;
    default:
      rows<4>(scratch, wp, g, taps, packed, bias, relu, y);
      break;
  }
#else
  (void)taps, (void)packed, (void)bias, (void)relu, (void)y;
  SINTER_THROW("small convolution: an x86-64 AVX-512 kernel (small_conv::takes says where)");
#endif
}

}  // namespace sinter::cpu::small_conv

// The inference plans' max pooling (Note [cpu inference plan] in src/cpu/infer_plan_dnnl.cpp) on
// channels-last values: a window's channels are one row of c_in floats, its taps rows of the
// input. Where c_in is a multiple of 16 and the CPU has AVX-512F, each output pixel's channels are
// whole registers, its taps taken in turn (max_pool_avx512); elsewhere a loop compiled for
// AVX-512, AVX2 and the baseline (src/cpu/vec_clones.h) takes each tap into a row of outputs.
// Both pick the element the library's own max pooling picks (kern::max_window_argmax): the first
// NaN, else the first maximum (+0 before -0 where +0 comes first), bit for bit, as max_pool2d's
// values are.
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <limits>

#include "cpu/vec_clones.h"
#include "cpu/vec_rows.h"

namespace sinter::cpu::vec {
namespace {

// The channels of one step of the generic loop: a local array of sixteen, whose loops the
// compiler vectorizes (one AVX-512 register, two AVX2 ones) where they are not unrolled first.
// (The compiler's vector types would be lowered for the baseline before the clones are made.)
constexpr int64_t kLanes = 16;

// kern::max_replaces: v where m is not NaN and v > m or v is NaN, else m (the first NaN stays).
[[gnu::always_inline]] inline float max_of(float v, float m) {
  return (m == m && (v > m || v != v)) ? v : m;
}

// Per output row, tap by tap: each tap's maximum into the whole row of outputs whose windows hold
// it inside the image (a contiguous run of columns), so that the outputs' comparisons do not wait
// for each other (one window's taps in turn would chain their comparisons' latency).
SINTER_VECTOR_CLONES void max_pool_rows(const float* x, const kern::Conv2dGeom& g, float* y) {
  const int64_t c = g.c_in;
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  for (int64_t oy = 0; oy < g.h_out; ++oy) {
    float* row = y + oy * g.w_out * c;
    std::fill(row, row + g.w_out * c, kLowest);
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = oy * g.stride_h - g.pad_h + ky * g.dil_h;
      if (iy < 0 || iy >= g.h) continue;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        // Columns ox with 0 <= ox stride - pad + kx dil < w: [ox0, ox1), none where the tap lies
        // right of the image for every ox (the division would round toward zero).
        const int64_t shift = kx * g.dil_w - g.pad_w;
        if (shift > g.w - 1) continue;
        const int64_t ox0 = std::max<int64_t>(0, (-shift + g.stride_w - 1) / g.stride_w);
        const int64_t ox1 = std::min(g.w_out, (g.w - 1 - shift) / g.stride_w + 1);
        for (int64_t ox = ox0; ox < ox1; ++ox) {
          const float* __restrict tap = x + (iy * g.w + ox * g.stride_w + shift) * c;
          float* __restrict out = row + ox * c;
          int64_t j = 0;
          for (; j + kLanes <= c; j += kLanes) {
#pragma GCC unroll 1
            for (int64_t l = 0; l < kLanes; ++l) out[j + l] = max_of(tap[j + l], out[j + l]);
          }
          for (; j < c; ++j) out[j] = max_of(tap[j], out[j]);
        }
      }
    }
  }
}

// The taps [k0, k1) of a window's row or column inside [0, size): from `start` (the first tap's
// index, maybe negative), `dil` apart.
[[gnu::always_inline]] inline void inside(int64_t start, int64_t taps, int64_t dil, int64_t size,
                                          int64_t& k0, int64_t& k1) {
  k0 = 0;
  k1 = taps;
  while (k0 < k1 && start + k0 * dil < 0) ++k0;
  while (k1 > k0 && start + (k1 - 1) * dil >= size) --k1;
}

#if defined(__x86_64__)
// max_of on 16 lanes: MAXPS(v, m) gives m where v is not larger or either is NaN (so a NaN m
// stays, and equal values keep the first), then v itself where it is NaN and m is not.
[[gnu::target("avx512f"), gnu::always_inline]] inline void take(const float* p, __m512& m) {
  const __m512 v = _mm512_loadu_ps(p);
  // (The masked max: GCC 12 warns of the unmasked one's undefined source.)
  const __m512 larger = _mm512_mask_max_ps(m, 0xFFFF, v, m);
  const __mmask16 first_nan =
      _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(m, m, _CMP_ORD_Q);
  m = _mm512_mask_mov_ps(larger, first_nan, v);
}

// c_in a multiple of 16: each output's channels as registers, its taps taken in turn (the same
// values as the loop's, NaN bits included). A 2 x 2 window inside the image (most of them, in
// the usual pooling) takes its four taps without the loops.
[[gnu::target("avx512f")]] void max_pool_avx512(const float* x, const kern::Conv2dGeom& g,
                                                float* y) {
  const int64_t c = g.c_in;
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const int64_t down = g.dil_h * g.w * c, right = g.dil_w * c;  // a tap's neighbours
  for (int64_t oy = 0; oy < g.h_out; ++oy) {
    const int64_t iy = oy * g.stride_h - g.pad_h;
    int64_t ky0 = 0, ky1 = 0;
    inside(iy, g.kh, g.dil_h, g.h, ky0, ky1);
    for (int64_t ox = 0; ox < g.w_out; ++ox) {
      const int64_t ix = ox * g.stride_w - g.pad_w;
      int64_t kx0 = 0, kx1 = 0;
      inside(ix, g.kw, g.dil_w, g.w, kx0, kx1);
      const int64_t corner = ((iy + ky0 * g.dil_h) * g.w + ix + kx0 * g.dil_w) * c;
      float* out = y + (oy * g.w_out + ox) * c;
      const bool quad = ky1 - ky0 == 2 && kx1 - kx0 == 2;
      for (int64_t j = 0; j < c; j += 16) {
        __m512 m = lowest;
        const float* p = x + (corner + j);
        if (quad) {
          take(p, m);
          take(p + right, m);
          take(p + down, m);
          take(p + down + right, m);
        } else {
          for (int64_t ky = 0; ky < ky1 - ky0; ++ky) {
            for (int64_t kx = 0; kx < kx1 - kx0; ++kx) take(p + ky * down + kx * right, m);
          }
        }
        _mm512_storeu_ps(out + j, m);
      }
    }
  }
}

#endif

}  // namespace

void max_pool_nhwc(const float* x, const kern::Conv2dGeom& g, float* y) {
#if defined(__x86_64__)
  if (cpu_has_avx512f() && g.c_in % 16 == 0) return max_pool_avx512(x, g, y);
#endif
  max_pool_rows(x, g, y);
}

}  // namespace sinter::cpu::vec

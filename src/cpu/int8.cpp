// The int8 family's CPU kernels (Note [int8 kernels] in src/kern/int8.h): the GEMM of Note [int8
// gemm] (the packing, the AVX-512 VNNI and AVX2 kernels, the plain fallback and the reference
// loops), and the quantized Linear's and Conv2d's forward passes on it.
#include "cpu/int8.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "internal/parallel.h"
#include "sinter/core/error.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SINTER_INT8_AVX2 1
#endif

namespace sinter::cpu::int8 {

namespace {
constexpr int64_t kBlockRows = 4;  // rows of c per AVX2 micro-kernel
// The packed block of channels jb: pairs p = 0..k/2-1, each 16 channels x 2 values.
inline const int16_t* block_of(PackedView b, int64_t jb) {
  return b.data + jb * (b.k / 2) * (2 * kBlockN);
}
}  // namespace

template <typename T>
void pack_into(int64_t n, int64_t k, const T* b, int64_t ldb, int16_t* out) {
  SINTER_CHECK(n >= 0 && k >= 0 && k <= kMaxK, "int8 gemm: k ", k, " outside [0, ", kMaxK,
               "] (the int32 sums could overflow) or n ", n, " negative");
  const int64_t blocks = (n + kBlockN - 1) / kBlockN, pairs = padded_k(k) / 2;
  std::fill(out, out + packed_elements(n, k), int16_t{0});
  for (int64_t jb = 0; jb < blocks; ++jb) {
    int16_t* blk = out + jb * pairs * 2 * kBlockN;
    for (int64_t pair = 0; pair < pairs; ++pair) {
      for (int64_t ch = 0; ch < kBlockN; ++ch) {
        const int64_t j = jb * kBlockN + ch;
        if (j >= n) continue;
        for (int64_t t = 0; t < 2; ++t) {
          const int64_t kk = 2 * pair + t;
          if (kk < k) blk[(pair * kBlockN + ch) * 2 + t] = b[j * ldb + kk];
        }
      }
    }
  }
}
template void pack_into<int8_t>(int64_t, int64_t, const int8_t*, int64_t, int16_t*);
template void pack_into<int16_t>(int64_t, int64_t, const int16_t*, int64_t, int16_t*);

PackedB pack_b(int64_t n, int64_t k, const int16_t* b, int64_t ldb) {
  PackedB p;
  p.n = n;
  p.k = padded_k(k);
  p.data.resize(static_cast<size_t>(packed_elements(n, k)));
  pack_into(n, k, b, ldb, p.data.data());
  return p;
}

void gemm_reference(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda,
                    const int16_t* b, int64_t ldb, int32_t* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int32_t s = 0;
      for (int64_t p = 0; p < k; ++p) s += int32_t{a[i * lda + p]} * int32_t{b[j * ldb + p]};
      c[i * ldc + j] = s;
    }
  }
}

void gemm_fallback(int64_t m, const int16_t* a, int64_t lda, PackedView b, int32_t* c,
                   int64_t ldc) {
  const int64_t blocks = (b.n + kBlockN - 1) / kBlockN, pairs = b.k / 2;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t jb = 0; jb < blocks; ++jb) {
      int32_t acc[kBlockN] = {};
      const int16_t* blk = block_of(b, jb);
      for (int64_t p = 0; p < pairs; ++p) {
        const int32_t a0 = a[i * lda + 2 * p], a1 = a[i * lda + 2 * p + 1];
        for (int64_t ch = 0; ch < kBlockN; ++ch) {
          acc[ch] += a0 * blk[(p * kBlockN + ch) * 2] + a1 * blk[(p * kBlockN + ch) * 2 + 1];
        }
      }
      const int64_t width = std::min(kBlockN, b.n - jb * kBlockN);
      for (int64_t ch = 0; ch < width; ++ch) c[i * ldc + jb * kBlockN + ch] = acc[ch];
    }
  }
}

namespace {

#ifdef SINTER_INT8_AVX2

// Rows i..i+kRows-1 of c against the channel block jb.
template <int kRows>
__attribute__((target("avx2"))) void micro(const int16_t* a, int64_t lda, const int16_t* blk,
                                           int64_t pairs, int32_t* c, int64_t ldc, int64_t width) {
  __m256i acc[kRows][2];
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t p = 0; p < pairs; ++p) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + p * 32));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + p * 32 + 16));
    for (int r = 0; r < kRows; ++r) {
      int32_t pair;
      __builtin_memcpy(&pair, a + r * lda + 2 * p, sizeof pair);
      const __m256i av = _mm256_set1_epi32(pair);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
    }
  }
  for (int r = 0; r < kRows; ++r) {
    if (width == kBlockN) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc), acc[r][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc + 8), acc[r][1]);
    } else {
      alignas(32) int32_t tmp[kBlockN];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), acc[r][0]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8), acc[r][1]);
      for (int64_t ch = 0; ch < width; ++ch) c[r * ldc + ch] = tmp[ch];
    }
  }
}

// A micro-kernel: `rows` rows of c against one packed channel block.
using Micro = void (*)(const int16_t* a, int64_t lda, const int16_t* blk, int64_t pairs, int32_t* c,
                       int64_t ldc, int64_t width);

// The whole GEMM on one instruction set: each block of channels, the rows kRows at a time through
// `full` and the rest one by one through `one`.
template <int kRows>
void drive(Micro full, Micro one, int64_t m, const int16_t* a, int64_t lda, PackedView b,
           int32_t* c, int64_t ldc) {
  const int64_t blocks = (b.n + kBlockN - 1) / kBlockN, pairs = b.k / 2;
  for (int64_t jb = 0; jb < blocks; ++jb) {
    const int16_t* blk = block_of(b, jb);
    const int64_t width = std::min(kBlockN, b.n - jb * kBlockN);
    int32_t* cj = c + jb * kBlockN;
    int64_t i = 0;
    for (; i + kRows <= m; i += kRows) full(a + i * lda, lda, blk, pairs, cj + i * ldc, ldc, width);
    for (; i < m; ++i) one(a + i * lda, lda, blk, pairs, cj + i * ldc, ldc, width);
  }
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

constexpr int kVnniRows = 8;  // rows of c per AVX-512 micro-kernel: 8 accumulators of 16 lanes

// Pair p of kRows rows into their accumulators acc[r][h].
template <int kRows, int kChains>
__attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) inline void vnni_pair(
    __m512i (&acc)[kRows][kChains], int h, const int16_t* a, int64_t lda, const int16_t* blk,
    int64_t p) {
  const __m512i b = _mm512_loadu_si512(blk + p * 32);
  for (int r = 0; r < kRows; ++r) {
    int32_t pair;
    __builtin_memcpy(&pair, a + r * lda + 2 * p, sizeof pair);
    acc[r][h] = _mm512_dpwssd_epi32(acc[r][h], _mm512_set1_epi32(pair), b);
  }
}

// Rows i..i+kRows-1 of c against the channel block jb, one 512-bit register per row: vpdpwssd
// adds each lane's two int16 products to its int32 sum, as vpmaddwd and vpaddd do together. Its
// latency would bound a single row's chain of sums, so fewer than 4 rows split the pairs over 4
// accumulators each (added at the end: the same exact integers).
template <int kRows>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void micro_vnni(const int16_t* a,
                                                                       int64_t lda,
                                                                       const int16_t* blk,
                                                                       int64_t pairs, int32_t* c,
                                                                       int64_t ldc, int64_t width) {
  constexpr int kChains = kRows >= 4 ? 1 : 4;
  __m512i acc[kRows][kChains];
  for (int r = 0; r < kRows; ++r) {
    for (int h = 0; h < kChains; ++h) acc[r][h] = _mm512_setzero_si512();
  }
  int64_t p = 0;
  for (; p + kChains <= pairs; p += kChains) {
    for (int h = 0; h < kChains; ++h) vnni_pair<kRows>(acc, h, a, lda, blk, p + h);
  }
  for (; p < pairs; ++p) vnni_pair<kRows>(acc, 0, a, lda, blk, p);
  const __mmask16 mask = static_cast<__mmask16>((1U << width) - 1U);
  for (int r = 0; r < kRows; ++r) {
    __m512i sum = acc[r][0];
    for (int h = 1; h < kChains; ++h) sum = _mm512_add_epi32(sum, acc[r][h]);
    _mm512_mask_storeu_epi32(c + r * ldc, mask, sum);
  }
}

bool has_vnni() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vnni");
  return yes;
}

#endif

}  // namespace

bool has_isa(Isa isa) {
  switch (isa) {
#ifdef SINTER_INT8_AVX2
    case Isa::Avx512Vnni:
      return has_vnni();
    case Isa::Avx2:
      return has_avx2();
#endif
    case Isa::Amx:
      return amx::available();
    case Isa::Scalar:
      return true;
    default:
      return false;
  }
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Amx:
      return "amx";
    case Isa::Avx512Vnni:
      return "avx512-vnni";
    case Isa::Avx2:
      return "avx2";
    default:
      return "scalar";
  }
}

void gemm_on(Isa isa, int64_t m, const int16_t* a, int64_t lda, PackedView b, int32_t* c,
             int64_t ldc) {
  SINTER_CHECK(has_isa(isa), "int8 gemm: this CPU has no ", isa_name(isa));
  switch (isa) {
    case Isa::Amx:
      amx::gemm(m, a, lda, b, c, ldc);
      return;
#ifdef SINTER_INT8_AVX2
    case Isa::Avx512Vnni:
      drive<kVnniRows>(micro_vnni<kVnniRows>, micro_vnni<1>, m, a, lda, b, c, ldc);
      return;
    case Isa::Avx2:
      drive<kBlockRows>(micro<kBlockRows>, micro<1>, m, a, lda, b, c, ldc);
      return;
#endif
    default:
      gemm_fallback(m, a, lda, b, c, ldc);
  }
}

// The CPU's best kernel, or the one SINTER_INT8_ISA names (to compare kernels on one machine);
// a name the CPU lacks, or no kernel's name, is an error naming it and the choices.
Isa best_isa() {
  static const Isa best = [] {
    if (const char* want = std::getenv("SINTER_INT8_ISA"); want != nullptr && *want != 0) {
      for (const Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni, Isa::Amx}) {
        if (std::strcmp(want, isa_name(isa)) != 0) continue;
        SINTER_CHECK(has_isa(isa), "SINTER_INT8_ISA=", want, ": this CPU has no ", want);
        return isa;
      }
      SINTER_THROW("SINTER_INT8_ISA=", want, ": not one of scalar, avx2, avx512-vnni, amx");
    }
    return has_isa(Isa::Amx)          ? Isa::Amx
           : has_isa(Isa::Avx512Vnni) ? Isa::Avx512Vnni
           : has_isa(Isa::Avx2)       ? Isa::Avx2
                                      : Isa::Scalar;
  }();
  return best;
}

void gemm(int64_t m, const int16_t* a, int64_t lda, PackedView b, int32_t* c, int64_t ldc) {
  gemm_on(best_isa(), m, a, lda, b, c, ldc);
}

const char* gemm_isa() { return isa_name(best_isa()); }
bool gemm_isa_is(Isa isa) { return best_isa() == isa; }

}  // namespace sinter::cpu::int8

namespace sinter::cpu {

namespace {

// A group's packed bytes: the pair packing, then, where the CPU runs the AMX kernel, the tile
// layout (Note [int8 amx]).
int64_t pair_bytes(int64_t rows, int64_t k) {
  return int8::packed_elements(rows, k) * static_cast<int64_t>(sizeof(int16_t));
}
int64_t tile_bytes(int64_t rows, int64_t k) {
  return int8::gemm_isa_is(int8::Isa::Amx) ? int8::amx::packed_bytes(rows, int8::padded_k(k)) : 0;
}

int8::PackedView packed_group(const uint8_t* packed, int64_t g, int64_t rows, int64_t k) {
  const uint8_t* at = packed + g * (pair_bytes(rows, k) + tile_bytes(rows, k));
  int8::PackedView view{rows, int8::padded_k(k), reinterpret_cast<const int16_t*>(at)};
  if (tile_bytes(rows, k) > 0) view.amx = reinterpret_cast<const int8_t*>(at + pair_bytes(rows, k));
  return view;
}

// out[i * out_stride] = epilogue(c[i * c_stride]) for i < n, all of channel ch.
void epilogue_run(const Int8Epilogue& e, const int32_t* c, int64_t c_stride, int64_t n, int64_t ch,
                  float* out, int64_t out_stride) {
  const float s = e.scale[ch], b = e.bias ? e.bias[ch] : 0.0F;
  if (e.act == GemmAct::None) {  // the common case, a loop that vectorizes
    for (int64_t i = 0; i < n; ++i)
      out[i * out_stride] = static_cast<float>(c[i * c_stride]) * s + b;
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i * out_stride] = int8_epilogue(c[i * c_stride], s, b, e.act);
}

}  // namespace

void int8_packed_bytes(const Ctx&, int64_t groups, int64_t rows, int64_t k, int64_t* bytes) {
  *bytes = groups * (pair_bytes(rows, k) + tile_bytes(rows, k));
}

void int8_pack_weight(const Ctx&, int64_t groups, int64_t rows, int64_t k, const int8_t* w,
                      uint8_t* packed) {
  for (int64_t g = 0; g < groups; ++g) {
    uint8_t* at = packed + g * (pair_bytes(rows, k) + tile_bytes(rows, k));
    int8::pack_into(rows, k, w + g * rows * k, k, reinterpret_cast<int16_t*>(at));
    if (tile_bytes(rows, k) > 0) {
      int8::amx::pack_from(packed_group(packed, g, rows, k),
                           reinterpret_cast<int8_t*>(at + pair_bytes(rows, k)));
    }
  }
}

void int8_gemm_isa(const Ctx&, const char** name) { *name = int8::gemm_isa(); }

void int8_gemm(const Ctx&, int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda,
               const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc) {
  SINTER_CHECK(m >= 0 && n >= 0 && k >= 0 && k <= kInt8MaxK, "int8_gemm: sizes m=", m, " n=", n,
               " k=", k, " (k at most ", kInt8MaxK, ", so that the int32 sums cannot overflow)");
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int32_t s = 0;
      for (int64_t p = 0; p < k; ++p) s += int32_t{a[i * lda + p]} * int32_t{b[j * ldb + p]};
      c[i * ldc + j] = s;
    }
  }
}

void int8_linear(const Ctx&, int64_t rows, int64_t n, int64_t k, const float* x, float x_scale,
                 const uint8_t* packed, const Int8Epilogue& e, float* y) {
  const int8::PackedView w = packed_group(packed, 0, n, k);
  const int64_t kp = w.k;
  constexpr int64_t kRows = 32;
  const int64_t blocks = (rows + kRows - 1) / kRows;
  detail::parallel_blocks(blocks, kRows * n * kp, [&](int64_t b0, int64_t b1) {
    std::vector<int16_t> a(static_cast<size_t>(kRows * kp));
    std::vector<int32_t> c(static_cast<size_t>(kRows * n));
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t r0 = blk * kRows, m = std::min(kRows, rows - r0);
      std::fill(a.begin(), a.end(), int16_t{0});
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t p = 0; p < k; ++p)
          a[i * kp + p] = int8::quantize(x[(r0 + i) * k + p], x_scale);
      }
      int8::gemm(m, a.data(), kp, w, c.data(), n);
      for (int64_t j = 0; j < n; ++j) epilogue_run(e, c.data() + j, n, m, j, y + r0 * n + j, n);
    }
  });
}

namespace {

// The output pixels p0 .. p0 + m - 1 of image img, group g: cols[pixel][(ci, i, j)] the window of
// each pixel (0 in the padding; a row's kp - taps padding stays 0). A window inside the image is a
// gather at the taps' offsets; one at the border checks each tap.
void gather_windows(const Conv2dGeom& g, const int16_t* group_x, int64_t p0, int64_t m,
                    const std::vector<int64_t>& tap_offset, int64_t kp, int16_t* cols) {
  const int64_t cig = g.c_in / g.groups, taps = static_cast<int64_t>(tap_offset.size());
  const int64_t span_h = g.dil_h * (g.kh - 1) + 1, span_w = g.dil_w * (g.kw - 1) + 1;
  for (int64_t pi = 0; pi < m; ++pi) {
    const int64_t oh = (p0 + pi) / g.w_out, ow = (p0 + pi) % g.w_out;
    const int64_t ih0 = oh * g.stride_h - g.pad_h, iw0 = ow * g.stride_w - g.pad_w;
    int16_t* row = cols + pi * kp;
    if (ih0 >= 0 && ih0 + span_h <= g.h && iw0 >= 0 && iw0 + span_w <= g.w) {
      const int16_t* corner = group_x + ih0 * g.w + iw0;
      for (int64_t t = 0; t < taps; ++t) row[t] = corner[tap_offset[t]];
      continue;
    }
    std::fill(row, row + kp, int16_t{0});
    for (int64_t ci = 0; ci < cig; ++ci) {
      const int16_t* plane = group_x + ci * g.h * g.w;
      for (int64_t i = 0; i < g.kh; ++i) {
        const int64_t ih = ih0 + i * g.dil_h;
        if (ih < 0 || ih >= g.h) continue;
        for (int64_t j = 0; j < g.kw; ++j) {
          const int64_t iw = iw0 + j * g.dil_w;
          if (iw < 0 || iw >= g.w) continue;
          row[(ci * g.kh + i) * g.kw + j] = plane[ih * g.w + iw];
        }
      }
    }
  }
}

}  // namespace

void int8_conv2d(const Ctx&, const Conv2dGeom& g, const float* x, float x_scale,
                 const uint8_t* packed, const Int8Epilogue& e, float* y) {
  const int64_t cig = g.c_in / g.groups, cog = g.c_out / g.groups;
  const int64_t hw = g.h_out * g.w_out, taps = cig * g.kh * g.kw, kp = int8::padded_k(taps);
  // The input quantized once (each value is read by up to kh * kw windows).
  const int64_t numel = g.n * g.c_in * g.h * g.w;
  std::vector<int16_t> qx(static_cast<size_t>(numel));
  detail::parallel_blocks(numel, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) qx[i] = int8::quantize(x[i], x_scale);
  });
  // Each tap's offset from a window's corner in a group's input planes.
  std::vector<int64_t> tap_offset(static_cast<size_t>(taps));
  for (int64_t ci = 0; ci < cig; ++ci) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        tap_offset[(ci * g.kh + i) * g.kw + j] = ci * g.h * g.w + i * g.dil_h * g.w + j * g.dil_w;
      }
    }
  }
  // Tasks: an image's block of kPixels output pixels, for every group.
  constexpr int64_t kPixels = 64;
  const int64_t per_image = (hw + kPixels - 1) / kPixels, tasks = g.n * per_image;
  detail::parallel_blocks(tasks, kPixels * g.c_out * kp, [&](int64_t t0, int64_t t1) {
    std::vector<int16_t> cols(static_cast<size_t>(kPixels * kp), 0);
    std::vector<int32_t> c(static_cast<size_t>(kPixels * cog));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t img = t / per_image, p0 = (t % per_image) * kPixels;
      const int64_t m = std::min(kPixels, hw - p0);
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const int16_t* group_x = qx.data() + (img * g.c_in + grp * cig) * g.h * g.w;
        gather_windows(g, group_x, p0, m, tap_offset, kp, cols.data());
        int8::gemm(m, cols.data(), kp, packed_group(packed, grp, cog, taps), c.data(), cog);
        for (int64_t co = 0; co < cog; ++co) {
          const int64_t ch = grp * cog + co;
          epilogue_run(e, c.data() + co, cog, m, ch, y + (img * g.c_out + ch) * hw + p0, 1);
        }
      }
    }
  });
}

}  // namespace sinter::cpu

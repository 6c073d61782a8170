// CPU reference 2-D convolution: im2col + the GEMM kernel for the forward pass and the weight
// gradient, GEMM + col2im for the input gradient, one image at a time so the column buffer stays
// small. The images are split over the CPU threads, each with its own column buffer (Note [conv
// threads]). bf16 and f16 are widened to f32 first, so the weight gradient's sum over the batch is
// not rounded once per image.
#include "kern/conv.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cpu/cpu_util.h"
#include "cpu/onednn.h"
#include "internal/parallel.h"
#include "kern/gemm.h"
#include "sinter/core/error.h"
#include "sinter/core/parallel.h"

namespace sinter::cpu {
namespace {

// Note [column layout]
// The cols buffer of one image is (c_in * kh * kw, h_out * w_out), row (c, i, j) and column (oh,
// ow), holding x[c, oh * stride_h - pad_h + i * dil_h, ow * stride_w - pad_w + j * dil_w] (0
// outside the input). Channels of one group are adjacent, so the same buffer is (groups, kg, hw)
// with kg = (c_in / groups) * kh * kw, one GEMM batch entry per group.

// The output columns [lo, hi) of one row whose input column ow * stride - pad + off lies in
// [0, w): the rest read padding.
struct ValidCols {
  int64_t lo, hi;
};

ValidCols valid_cols(int64_t w_out, int64_t stride, int64_t pad, int64_t off, int64_t w) {
  // iw = ow * stride + first >= 0  <=>  ow >= ceil(-first / stride); iw < w likewise.
  const int64_t first = off - pad;
  int64_t lo = first >= 0 ? 0 : (-first + stride - 1) / stride;
  int64_t hi = w - first <= 0 ? 0 : (w - first + stride - 1) / stride;
  lo = std::min(lo, w_out);
  hi = std::clamp(hi, lo, w_out);
  return {lo, hi};
}

// Stride 1 and an output as wide as the input (a "same" convolution, 3x3 with padding 1): each tap
// (i, j) of a plane is the plane shifted by a constant offset, so its block of cols is one copy,
// with the columns that fall outside the input zeroed after.
bool shifted_plane(const Conv2dGeom& g) {
  return g.stride_h == 1 && g.stride_w == 1 && g.w_out == g.w;
}

// The block of tap (i, j) (its valid columns v, its first input column `first`) of one plane, for
// shifted_plane geometries: output element d = oh w + ow reads plane[d + shift].
template <typename T>
void shifted_copy(const T* plane, const Conv2dGeom& g, int64_t i, ValidCols v, int64_t first,
                  T* dst) {
  const int64_t rows_first = i * g.dil_h - g.pad_h;  // the input row of output row 0
  // Output rows whose input row is inside: [oh0, oh1).
  const int64_t oh0 = std::clamp<int64_t>(-rows_first, 0, g.h_out);
  const int64_t oh1 = std::clamp<int64_t>(g.h - rows_first, oh0, g.h_out);
  const int64_t shift = rows_first * g.w + first;
  std::fill(dst, dst + oh0 * g.w_out, T(0));
  // Every element of the rows [oh0, oh1) whose source lies inside the plane; the columns outside
  // [lo, hi) read a neighbouring row (or were not copied) and are zeroed below.
  const int64_t d0 = std::max(oh0 * g.w_out, -shift);
  const int64_t d1 = std::min(oh1 * g.w_out, g.h * g.w - shift);
  if (d1 > d0) std::copy(plane + d0 + shift, plane + d1 + shift, dst + d0);
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    T* row = dst + oh * g.w_out;
    for (int64_t ow = 0; ow < v.lo; ++ow) row[ow] = T(0);
    for (int64_t ow = v.hi; ow < g.w_out; ++ow) row[ow] = T(0);
  }
  std::fill(dst + oh1 * g.w_out, dst + g.h_out * g.w_out, T(0));
}

// x: (c_in, h, w) of one image -> cols (Note [column layout]).
template <typename T>
void im2col(const T* x, const Conv2dGeom& g, T* cols) {
  const int64_t hw = g.h_out * g.w_out;
  T* dst = cols;
  for (int64_t c = 0; c < g.c_in; ++c) {
    const T* plane = x + c * g.h * g.w;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j, dst += hw) {
        const ValidCols v = valid_cols(g.w_out, g.stride_w, g.pad_w, j * g.dil_w, g.w);
        const int64_t first = j * g.dil_w - g.pad_w;
        if (shifted_plane(g)) {
          shifted_copy(plane, g, i, v, first, dst);
          continue;
        }
        for (int64_t oh = 0; oh < g.h_out; ++oh) {
          const int64_t ih = oh * g.stride_h - g.pad_h + i * g.dil_h;
          T* row = dst + oh * g.w_out;
          if (ih < 0 || ih >= g.h) {
            std::fill(row, row + g.w_out, T(0));
            continue;
          }
          // Column ow reads plane[base + ow * stride_w], inside the row for ow in [lo, hi).
          const int64_t base = ih * g.w + first;
          std::fill(row, row + v.lo, T(0));
          if (g.stride_w == 1) {
            std::copy(plane + base + v.lo, plane + base + v.hi, row + v.lo);
          } else {
            for (int64_t ow = v.lo; ow < v.hi; ++ow) row[ow] = plane[base + ow * g.stride_w];
          }
          std::fill(row + v.hi, row + g.w_out, T(0));
        }
      }
    }
  }
}

// The adjoint of im2col: dx (c_in, h, w) = the sum of cols entries that read each position.
template <typename T>
void col2im(const T* cols, const Conv2dGeom& g, T* dx) {
  const int64_t hw = g.h_out * g.w_out;
  std::fill(dx, dx + g.c_in * g.h * g.w, T(0));
  const T* src = cols;
  for (int64_t c = 0; c < g.c_in; ++c) {
    T* plane = dx + c * g.h * g.w;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j, src += hw) {
        const ValidCols v = valid_cols(g.w_out, g.stride_w, g.pad_w, j * g.dil_w, g.w);
        const int64_t first = j * g.dil_w - g.pad_w;
        for (int64_t oh = 0; oh < g.h_out; ++oh) {
          const int64_t ih = oh * g.stride_h - g.pad_h + i * g.dil_h;
          if (ih < 0 || ih >= g.h) continue;
          const int64_t base = ih * g.w + first;
          const T* row = src + oh * g.w_out;
          if (g.stride_w == 1) {  // contiguous: a loop the compiler vectorizes
            for (int64_t ow = v.lo; ow < v.hi; ++ow) plane[base + ow] += row[ow];
            continue;
          }
          for (int64_t ow = v.lo; ow < v.hi; ++ow) plane[base + ow * g.stride_w] += row[ow];
        }
      }
    }
  }
}

template <typename T>
constexpr DType kDType = std::is_same_v<T, double> ? DType::f64 : DType::f32;

// The per-group GEMM of one image, batched over groups. Shapes per group: op(A) (m, k), op(B)
// (k, n), C (m, n), each group `stride_*` elements after the previous one.
template <typename T>
void group_gemm(const Conv2dGeom& g, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a,
                int64_t lda, int64_t sa, const T* b, int64_t ldb, int64_t sb, T* c, int64_t ldc,
                int64_t sc, double beta) {
  GemmArgs args;
  args.dtype = kDType<T>;
  args.trans_a = ta;
  args.trans_b = tb;
  args.m = m;
  args.n = n;
  args.k = k;
  args.batch = g.groups;
  args.a = a;
  args.lda = lda;
  args.stride_a = sa;
  args.b = b;
  args.ldb = ldb;
  args.stride_b = sb;
  args.c = c;
  args.ldc = ldc;
  args.stride_c = sc;
  args.beta = beta;
  cpu::gemm(Ctx{}, args);
}

// Sizes shared by the three passes, and the element counts of x, w and y.
struct Dims {
  int64_t hw, cig, cog, kg;
  int64_t x_numel, w_numel, y_numel;
  explicit Dims(const Conv2dGeom& g)
      : hw(g.h_out * g.w_out),
        cig(g.c_in / g.groups),
        cog(g.c_out / g.groups),
        kg(g.c_in / g.groups * g.kh * g.kw),
        x_numel(g.n * g.c_in * g.h * g.w),
        w_numel(g.c_out * kg),
        y_numel(g.n * g.c_out * hw) {}
};

// Note [conv threads]
// The forward pass and the input gradient are independent per image: parallel_for splits the batch
// and each piece has its own column buffer. The weight gradient sums over the batch: the images go
// in kWgradChunks fixed chunks (fewer when the batch is smaller), each chunk's sum in its own
// buffer in image order, and the chunks are added in chunk order, so that the result is the same
// bits at any thread count. A piece takes at least one image, and a whole image's work when it is
// small (kImageGrainMacs), so that small problems stay on one thread.
constexpr int64_t kWgradChunks = 8;
constexpr int64_t kImageGrainMacs = int64_t{1} << 20;

// How many images (of `count`, or weight-gradient chunks) a piece takes at least: enough for
// kImageGrainMacs multiply-adds. With fewer than there are threads, all `count` in one piece: they
// then go one after another and each one's GEMMs split over the threads instead (Note [gemm
// blocks]), which gives the same bits.
int64_t image_grain(const Conv2dGeom& g, int64_t count) {
  if (count < get_num_threads()) return std::max<int64_t>(count, 1);
  const int64_t macs =
      std::max<int64_t>(1, g.c_out * (g.c_in / g.groups) * g.kh * g.kw * g.h_out * g.w_out);
  return std::max<int64_t>(1, kImageGrainMacs / macs);
}

template <typename T>
void forward_typed(const Conv2dGeom& g, const T* x, const T* w, const T* bias, T* y) {
  const Dims d(g);
  detail::parallel_for(g.n, image_grain(g, g.n), [&](int64_t b0, int64_t b1) {
    std::vector<T> cols(static_cast<size_t>(g.c_in * g.kh * g.kw * d.hw));
    for (int64_t b = b0; b < b1; ++b) {
      im2col(x + b * g.c_in * g.h * g.w, g, cols.data());
      T* yb = y + b * g.c_out * d.hw;
      // y[b] (groups, cog, hw) = w (groups, cog, kg) @ cols (groups, kg, hw)
      group_gemm<T>(g, false, false, d.cog, d.hw, d.kg, w, d.kg, d.cog * d.kg, cols.data(), d.hw,
                    d.kg * d.hw, yb, d.hw, d.cog * d.hw, 0.0);
      if (bias) {
        for (int64_t co = 0; co < g.c_out; ++co) {
          for (int64_t p = 0; p < d.hw; ++p) yb[co * d.hw + p] += bias[co];
        }
      }
      activate_all(g.act, yb, g.c_out * d.hw);
    }
  });
}

template <typename T>
void backward_input_typed(const Conv2dGeom& g, const T* dy, const T* w, T* dx) {
  const Dims d(g);
  detail::parallel_for(g.n, image_grain(g, g.n), [&](int64_t b0, int64_t b1) {
    std::vector<T> cols(static_cast<size_t>(g.c_in * g.kh * g.kw * d.hw));
    for (int64_t b = b0; b < b1; ++b) {
      // cols (groups, kg, hw) = w^T (groups, kg, cog) @ dy[b] (groups, cog, hw)
      group_gemm<T>(g, true, false, d.kg, d.hw, d.cog, w, d.kg, d.cog * d.kg,
                    dy + b * g.c_out * d.hw, d.hw, d.cog * d.hw, cols.data(), d.hw, d.kg * d.hw,
                    0.0);
      col2im(cols.data(), g, dx + b * g.c_in * g.h * g.w);
    }
  });
}

template <typename T>
void backward_weight_typed(const Conv2dGeom& g, const T* x, const T* dy, T* dw) {
  const Dims d(g);
  if (g.n == 0 || d.hw == 0) {
    std::fill(dw, dw + g.c_out * d.kg, T(0));
    return;
  }
  // Chunk c holds images [n c / chunks, n (c + 1) / chunks); chunk 0 sums straight into dw.
  const int64_t chunks = std::min(g.n, kWgradChunks);
  std::vector<T> partial(static_cast<size_t>((chunks - 1) * d.w_numel));
  const int64_t grain = chunks < get_num_threads()
                            ? chunks
                            : std::max<int64_t>(1, image_grain(g, chunks) * chunks / g.n);
  detail::parallel_for(chunks, grain, [&](int64_t c0, int64_t c1) {
    std::vector<T> cols(static_cast<size_t>(g.c_in * g.kh * g.kw * d.hw));
    for (int64_t c = c0; c < c1; ++c) {
      T* sum = c == 0 ? dw : partial.data() + (c - 1) * d.w_numel;
      const int64_t first = g.n * c / chunks, last = g.n * (c + 1) / chunks;
      for (int64_t b = first; b < last; ++b) {
        im2col(x + b * g.c_in * g.h * g.w, g, cols.data());
        // sum (groups, cog, kg) += dy[b] (groups, cog, hw) @ cols^T (groups, hw, kg)
        group_gemm<T>(g, false, true, d.cog, d.kg, d.hw, dy + b * g.c_out * d.hw, d.hw,
                      d.cog * d.hw, cols.data(), d.hw, d.kg * d.hw, sum, d.kg, d.cog * d.kg,
                      b == first ? 0.0 : 1.0);
      }
    }
  });
  for (int64_t c = 1; c < chunks; ++c) {
    const T* p = partial.data() + (c - 1) * d.w_numel;
    for (int64_t i = 0; i < d.w_numel; ++i) dw[i] += p[i];
  }
}

// A tensor a pass reads: its data (null for an absent bias) and its element count.
struct Input {
  const void* data;
  int64_t numel;
};

// Runs pass(in..., out) with the tensors as the storage type of the floating `dtype`. bf16 and f16
// go by way of f32: the inputs are widened, the f32 pass runs, and its output is rounded once.
template <size_t N, class Pass>
void run_pass(const char* op, DType dtype, const Input (&in)[N], void* out, int64_t out_numel,
              Pass pass) {
  visit_float(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      std::array<const T*, N> typed;
      for (size_t i = 0; i < N; ++i) typed[i] = static_cast<const T*>(in[i].data);
      std::apply([&](auto... p) { pass(p..., static_cast<T*>(out)); }, typed);
    } else {
      std::array<std::vector<float>, N> wide;
      std::array<const float*, N> typed;
      for (size_t i = 0; i < N; ++i) {
        if (in[i].data == nullptr) {
          typed[i] = nullptr;
          continue;
        }
        const T* h = static_cast<const T*>(in[i].data);
        wide[i].resize(static_cast<size_t>(in[i].numel));
        float* w = wide[i].data();
        detail::parallel_blocks(in[i].numel, 1, [&](int64_t j0, int64_t j1) {
          for (int64_t j = j0; j < j1; ++j) w[j] = static_cast<float>(h[j]);
        });
        typed[i] = wide[i].data();
      }
      std::vector<float> out_f(static_cast<size_t>(out_numel));
      std::apply([&](auto... p) { pass(p..., out_f.data()); }, typed);
      T* o = static_cast<T*>(out);
      detail::parallel_blocks(out_numel, 1, [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) o[j] = T(out_f[j]);
      });
    }
  });
}

}  // namespace

void conv2d_forward(const Ctx&, const Conv2dGeom& g, DType dtype, const void* x, const void* w,
                    const void* bias, void* y) {
  if (onednn::conv2d_forward(g, dtype, x, w, bias, y)) return;
  const Dims d(g);
  run_pass("conv2d_forward", dtype, {{x, d.x_numel}, {w, d.w_numel}, {bias, g.c_out}}, y, d.y_numel,
           [&](auto... p) { forward_typed(g, p...); });
}

void conv2d_backward_input(const Ctx&, const Conv2dGeom& g, DType dtype, const void* dy,
                           const void* w, void* dx) {
  if (onednn::conv2d_backward_input(g, dtype, dy, w, dx)) return;
  const Dims d(g);
  run_pass("conv2d_backward_input", dtype, {{dy, d.y_numel}, {w, d.w_numel}}, dx, d.x_numel,
           [&](auto... p) { backward_input_typed(g, p...); });
}

void conv2d_backward_weight(const Ctx&, const Conv2dGeom& g, DType dtype, const void* x,
                            const void* dy, void* dw) {
  if (onednn::conv2d_backward_weight(g, dtype, x, dy, dw)) return;
  const Dims d(g);
  run_pass("conv2d_backward_weight", dtype, {{x, d.x_numel}, {dy, d.y_numel}}, dw, d.w_numel,
           [&](auto... p) { backward_weight_typed(g, p...); });
}

}  // namespace sinter::cpu

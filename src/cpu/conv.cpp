// CPU reference 2-D convolution: im2col + the GEMM kernel for the forward pass and the weight
// gradient, GEMM + col2im for the input gradient, one image at a time so the column buffer stays
// small. bf16 and f16 are widened to f32 first, so the weight gradient's sum over the batch is not
// rounded once per image.
#include "kern/conv.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cpu/cpu_util.h"
#include "kern/gemm.h"
#include "sinter/core/error.h"

namespace sinter::cpu {
namespace {

// Note [column layout]: cols of one image is (c_in * kh * kw, h_out * w_out), row (c, i, j) and
// column (oh, ow), holding x[c, oh * stride_h - pad_h + i * dil_h, ow * stride_w - pad_w + j *
// dil_w] (0 outside the input). Channels of one group are adjacent, so the same buffer is
// (groups, kg, hw) with kg = (c_in / groups) * kh * kw, one GEMM batch entry per group.

// x: (c_in, h, w) of one image -> cols (Note [column layout]).
template <typename T>
void im2col(const T* x, const Conv2dGeom& g, T* cols) {
  const int64_t hw = g.h_out * g.w_out;
  T* dst = cols;
  for (int64_t c = 0; c < g.c_in; ++c) {
    const T* plane = x + c * g.h * g.w;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j, dst += hw) {
        for (int64_t oh = 0; oh < g.h_out; ++oh) {
          const int64_t ih = oh * g.stride_h - g.pad_h + i * g.dil_h;
          T* row = dst + oh * g.w_out;
          if (ih < 0 || ih >= g.h) {
            std::fill(row, row + g.w_out, T(0));
            continue;
          }
          for (int64_t ow = 0; ow < g.w_out; ++ow) {
            const int64_t iw = ow * g.stride_w - g.pad_w + j * g.dil_w;
            row[ow] = iw >= 0 && iw < g.w ? plane[ih * g.w + iw] : T(0);
          }
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
        for (int64_t oh = 0; oh < g.h_out; ++oh) {
          const int64_t ih = oh * g.stride_h - g.pad_h + i * g.dil_h;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t ow = 0; ow < g.w_out; ++ow) {
            const int64_t iw = ow * g.stride_w - g.pad_w + j * g.dil_w;
            if (iw >= 0 && iw < g.w) plane[ih * g.w + iw] += src[oh * g.w_out + ow];
          }
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

template <typename T>
void forward_typed(const Conv2dGeom& g, const T* x, const T* w, const T* bias, T* y) {
  const Dims d(g);
  std::vector<T> cols(static_cast<size_t>(g.c_in * g.kh * g.kw * d.hw));
  for (int64_t b = 0; b < g.n; ++b) {
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
  }
}

template <typename T>
void backward_input_typed(const Conv2dGeom& g, const T* dy, const T* w, T* dx) {
  const Dims d(g);
  std::vector<T> cols(static_cast<size_t>(g.c_in * g.kh * g.kw * d.hw));
  for (int64_t b = 0; b < g.n; ++b) {
    // cols (groups, kg, hw) = w^T (groups, kg, cog) @ dy[b] (groups, cog, hw)
    group_gemm<T>(g, true, false, d.kg, d.hw, d.cog, w, d.kg, d.cog * d.kg, dy + b * g.c_out * d.hw,
                  d.hw, d.cog * d.hw, cols.data(), d.hw, d.kg * d.hw, 0.0);
    col2im(cols.data(), g, dx + b * g.c_in * g.h * g.w);
  }
}

template <typename T>
void backward_weight_typed(const Conv2dGeom& g, const T* x, const T* dy, T* dw) {
  const Dims d(g);
  if (g.n == 0 || d.hw == 0) {
    std::fill(dw, dw + g.c_out * d.kg, T(0));
    return;
  }
  std::vector<T> cols(static_cast<size_t>(g.c_in * g.kh * g.kw * d.hw));
  for (int64_t b = 0; b < g.n; ++b) {
    im2col(x + b * g.c_in * g.h * g.w, g, cols.data());
    // dw (groups, cog, kg) += dy[b] (groups, cog, hw) @ cols^T (groups, hw, kg)
    group_gemm<T>(g, false, true, d.cog, d.kg, d.hw, dy + b * g.c_out * d.hw, d.hw, d.cog * d.hw,
                  cols.data(), d.hw, d.kg * d.hw, dw, d.kg, d.cog * d.kg, b == 0 ? 0.0 : 1.0);
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
        for (int64_t j = 0; j < in[i].numel; ++j) wide[i][j] = static_cast<float>(h[j]);
        typed[i] = wide[i].data();
      }
      std::vector<float> out_f(static_cast<size_t>(out_numel));
      std::apply([&](auto... p) { pass(p..., out_f.data()); }, typed);
      T* o = static_cast<T*>(out);
      for (size_t i = 0; i < out_f.size(); ++i) o[i] = T(out_f[i]);
    }
  });
}

}  // namespace

void conv2d_forward(const Ctx&, const Conv2dGeom& g, DType dtype, const void* x, const void* w,
                    const void* bias, void* y) {
  const Dims d(g);
  run_pass("conv2d_forward", dtype, {{x, d.x_numel}, {w, d.w_numel}, {bias, g.c_out}}, y, d.y_numel,
           [&](auto... p) { forward_typed(g, p...); });
}

void conv2d_backward_input(const Ctx&, const Conv2dGeom& g, DType dtype, const void* dy,
                           const void* w, void* dx) {
  const Dims d(g);
  run_pass("conv2d_backward_input", dtype, {{dy, d.y_numel}, {w, d.w_numel}}, dx, d.x_numel,
           [&](auto... p) { backward_input_typed(g, p...); });
}

void conv2d_backward_weight(const Ctx&, const Conv2dGeom& g, DType dtype, const void* x,
                            const void* dy, void* dw) {
  const Dims d(g);
  run_pass("conv2d_backward_weight", dtype, {{x, d.x_numel}, {dy, d.y_numel}}, dw, d.w_numel,
           [&](auto... p) { backward_weight_typed(g, p...); });
}

}  // namespace sinter::cpu

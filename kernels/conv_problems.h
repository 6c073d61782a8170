// The three passes of a convolution as implicit GEMMs (FwdConv, DgradConv, WgradConv): for each,
// its (m, n, k) extents, A(m, k) and B(k, n) as gathered from the tensors, and where C(m, n) goes,
// over the geometry they index with. The tensor-core kernels of kernels/conv_tc.cu run them as
// they are (FwdTc, ...; Note [conv layout]), the CUDA-core ones of kernels/conv.cu transposed
// (FwdProblem, ...; Note [implicit gemm]). The kernels run them on the GPU; the CPU suite runs
// the same code naively against a direct convolution (tests/test_warp_mma.cpp). No CUDA header: a
// host compiler reads this file too, with the f32 stand-ins of Acc, to_acc and from_acc below.
#pragma once

#include <cstdint>

#include "kern/conv.h"

#if defined(__CUDACC__)
#include "cuda_util.cuh"  // Acc, to_acc, from_acc
#define SINTER_CONV_FN __device__ __forceinline__
#else
#define SINTER_CONV_FN inline
#endif

namespace sinter::cudak {

#if !defined(__CUDACC__)
// Host stand-ins of cuda_util.cuh's accumulation type and conversions, for f32 tensors.
template <typename T>
using Acc = float;
inline float to_acc(float x) { return x; }
template <typename T>
inline T from_acc(float v) {
  return T(v);
}
#endif

// The forward pass's epilogue activation, inlined: a call would make the CUDA-core kernels keep a
// stack frame and spill around it (scripts/check_kernels.sh).
template <typename A>
SINTER_CONV_FN A conv_activate(GemmAct act, A v) {
  return activate(act, v);
}

// The offset of channel c at flattened pixel p = (b, q) of an NCHW tensor of `channels` planes of
// `plane` pixels, computed in J.
template <typename J>
SINTER_CONV_FN J nchw_offset(J p, J c, J channels, J plane) {
  return (p / plane * channels + c) * plane + p % plane;
}

// The sizes every pass reads, in the index type I (int32 when every tensor has fewer than 2^31
// elements, which keeps the per-element divisions cheap).
template <typename I>
struct Geom {
  I n, c_in, h, w, c_out, kh, kw, h_out, w_out, sh, sw, ph, pw, dil_h, dil_w, cig, cog;
  explicit Geom(const Conv2dGeom& g)
      : n(static_cast<I>(g.n)),
        c_in(static_cast<I>(g.c_in)),
        h(static_cast<I>(g.h)),
        w(static_cast<I>(g.w)),
        c_out(static_cast<I>(g.c_out)),
        kh(static_cast<I>(g.kh)),
        kw(static_cast<I>(g.kw)),
        h_out(static_cast<I>(g.h_out)),
        w_out(static_cast<I>(g.w_out)),
        sh(static_cast<I>(g.stride_h)),
        sw(static_cast<I>(g.stride_w)),
        ph(static_cast<I>(g.pad_h)),
        pw(static_cast<I>(g.pad_w)),
        dil_h(static_cast<I>(g.dil_h)),
        dil_w(static_cast<I>(g.dil_w)),
        cig(static_cast<I>(g.c_in / g.groups)),
        cog(static_cast<I>(g.c_out / g.groups)) {}

  SINTER_CONV_FN I taps() const { return kh * kw; }
  // Offsets, computed in the arguments' type J: channel c at flattened pixel p in the output side
  // (y, dy: c_out planes of h_out x w_out) and in the input side (x, dx: c_in planes of h x w);
  // element (co, k) of the weight or its gradient, co the output channel and k = (ci, i, j)
  // flattened, that is ci * taps() + tap.
  template <typename J>
  SINTER_CONV_FN J out_offset(J p, J c) const {
    return nchw_offset<J>(p, c, c_out, J(h_out) * w_out);
  }
  template <typename J>
  SINTER_CONV_FN J in_offset(J p, J c) const {
    return nchw_offset<J>(p, c, c_in, J(h) * w);
  }
  template <typename J>
  SINTER_CONV_FN J weight_offset(J co, J k) const {
    return co * (J(cig) * taps()) + k;
  }

  // x[b, c, oh * sh - ph + i * dil_h, ow * sw - pw + j * dil_w] for output pixel p = (b, oh, ow)
  // and k = (ci, i, j) of group grp (c = grp * cig + ci), each flattened, or `zero` in the
  // padding: the forward's and the weight gradient's gather.
  template <typename T>
  SINTER_CONV_FN T x_tap(const T* x, I p, int grp, I k, T zero) const {
    const I c = grp * cig + k / taps(), t = k % taps();
    const I hw = h_out * w_out, b = p / hw, q = p % hw;
    const I ih = q / w_out * sh - ph + t / kw * dil_h, iw = q % w_out * sw - pw + t % kw * dil_w;
    if (ih < 0 || ih >= h || iw < 0 || iw >= w) return zero;
    return x[((static_cast<int64_t>(b) * c_in + c) * h + ih) * w + iw];
  }
  // dy[b, c, oh, ow] for the output (oh, ow) whose tap t = (i, j) reads input pixel
  // p = (b, ih, iw), with k = (co, i, j) of group grp (c = grp * cog + co), each flattened; or
  // `zero` when no output does (the stride skips it, or it lies past the edges): the input
  // gradient's gather.
  template <typename T>
  SINTER_CONV_FN T dy_tap(const T* dy, I p, int grp, I k, T zero) const {
    const I c = grp * cog + k / taps(), t = k % taps();
    const I hw = h * w, b = p / hw, q = p % hw;
    const I th = q / w + ph - t / kw * dil_h, tw = q % w + pw - t % kw * dil_w;
    if (th < 0 || tw < 0 || th % sh != 0 || tw % sw != 0) return zero;
    const I oh = th / sh, ow = tw / sw;
    if (oh >= h_out || ow >= w_out) return zero;
    return dy[((static_cast<int64_t>(b) * c_out + c) * h_out + oh) * w_out + ow];
  }
};

// Element o of the weight gradient from one K split: stored in dw when the sum over K is whole
// (split < 0); else its partial sum, in the accumulation type, added atomically into acc_out
// (acc_slice 0) or stored at split's slice of acc_out for an ordered sum afterwards.
template <typename T, typename A>
SINTER_CONV_FN void store_wgrad(T* dw, A* acc_out, int64_t acc_slice, int64_t o, A v, int split) {
  if (split < 0) {
    dw[o] = from_acc<T>(v);
  } else if (acc_slice == 0) {
#if defined(__CUDACC__)
    atomicAdd(acc_out + o, v);
#else
    acc_out[o] += v;
#endif
  } else {
    acc_out[split * acc_slice + o] = v;
  }
}

// The (m, n, k) extents of one group's implicit GEMM.
struct ImplicitGemm {
  int64_t m, n, k;
};

// What those extents are made of: the pixels over the batch on the output (y, dy) and input (x, dx)
// sides, and a group's output and input channels, alone and times the kh x kw taps.
struct Extents {
  int64_t out_px, in_px, co, ci, co_taps, ci_taps;
  Extents(const Conv2dGeom& g)  // NOLINT(google-explicit-constructor): shape(g)
      : out_px(g.n * g.h_out * g.w_out),
        in_px(g.n * g.h * g.w),
        co(g.c_out / g.groups),
        ci(g.c_in / g.groups),
        co_taps(co * g.kh * g.kw),
        ci_taps(ci * g.kh * g.kw) {}
};

// Split K for the weight gradient, whose K (the batch times the output plane) is usually far
// longer than M and N: when the output tiles (`tiles` over all groups) cannot fill the `sms`
// multiprocessors, K is split over about 2 blocks per SM, at least 256 of K per split, chunks a
// multiple of the kernel's k step, and groups * splits within the grid's z limit (65535). Split s
// covers K range [split_begin(s), split_end(s)): the splits tile [0, K), none of them empty.
struct SplitK {
  int64_t splits, k_chunk;
};
inline SplitK plan_split_k(int64_t K, int64_t tiles, int sms, int64_t groups, int64_t k_step) {
  int64_t splits = (2 * int64_t(sms) + tiles - 1) / tiles;
  splits = splits < (K + 255) / 256 ? splits : (K + 255) / 256;
  const int64_t z_limit = 65535 / (groups > 1 ? groups : 1);
  splits = splits < z_limit ? splits : z_limit;
  if (splits <= 1) return {1, K};
  int64_t k_chunk = (K + splits - 1) / splits;
  k_chunk = (k_chunk + k_step - 1) / k_step * k_step;
  return {(K + k_chunk - 1) / k_chunk, k_chunk};
}
SINTER_CONV_FN int64_t split_begin(int split, int64_t k_chunk) { return split * k_chunk; }
SINTER_CONV_FN int64_t split_end(int split, int64_t k_chunk, int64_t K) {
  const int64_t end = split_begin(split, k_chunk) + k_chunk;
  return end < K ? end : K;
}

// --- The three passes ---

// Each pass gives, per group grp, A(m, k) and B(k, n) as gathered from the tensors (`zero` in the
// padding) and stores C(m, n) (Note [conv layout]), in the index type I: m runs over pixels (over
// the filter taps for the weight gradient) and n over the group's channels. kAAlongM / kBAlongN say
// along which index an operand is contiguous in memory, so that a warp's threads load along it;
// shape gives (m, n, k).
// The tensor-core kernels (kernels/conv_tc.cu) run the passes as they are, with I = int:
// conv_tc_supported only lets through convolutions whose tensors, and the tile overhang past them,
// index within int32. The CUDA-core kernels (kernels/conv.cu) run them transposed (Transposed).

// Forward: M = n * h_out * w_out, N = cog, K = cig * kh * kw. A((b, oh, ow), (ci, i, j)) = the
// input under tap (i, j) of output (oh, ow); B((ci, i, j), co) = weight[g * cog + co, ci, i, j];
// C((b, oh, ow), co) = y[b, g * cog + co, oh, ow] (+ bias).
template <typename T, typename I>
struct FwdConv {
  Geom<I> g;
  const T *x, *wt, *bias;
  T* y;
  GemmAct act = GemmAct::None;  // applied after the bias (kern::Conv2dGeom::act)
  static constexpr bool kAAlongM = true, kBAlongN = false;
  static ImplicitGemm shape(const Extents& e) { return {e.out_px, e.co, e.ci_taps}; }
  SINTER_CONV_FN T a(int grp, I m, I k, T zero) const { return g.x_tap(x, m, grp, k, zero); }
  SINTER_CONV_FN T b(int grp, I k, I n, T) const { return wt[g.weight_offset(grp * g.cog + n, k)]; }
  SINTER_CONV_FN void store(int grp, I m, I n, Acc<T> v, int) const {
    const I co = grp * g.cog + n;
    if (bias) v += to_acc(bias[co]);
    if (act != GemmAct::None) v = conv_activate(act, v);
    y[g.out_offset(m, co)] = from_acc<T>(v);
  }
};

// Input gradient: M = n * h * w, N = cig, K = cog * kh * kw. A((b, ih, iw), (co, i, j)) = dy at
// the output whose tap (i, j) reads (ih, iw), `zero` if there is none; B((co, i, j), ci) =
// weight[g * cog + co, ci, i, j]; C((b, ih, iw), ci) = dx[b, g * cig + ci, ih, iw].
template <typename T, typename I>
struct DgradConv {
  Geom<I> g;
  const T *dy, *wt;
  T* dx;
  static constexpr bool kAAlongM = true, kBAlongN = false;
  static ImplicitGemm shape(const Extents& e) { return {e.in_px, e.ci, e.co_taps}; }
  SINTER_CONV_FN T a(int grp, I m, I k, T zero) const { return g.dy_tap(dy, m, grp, k, zero); }
  SINTER_CONV_FN T b(int grp, I k, I n, T) const {
    const I taps = g.taps();
    return wt[g.weight_offset(grp * g.cog + k / taps, n * taps + k % taps)];
  }
  SINTER_CONV_FN void store(int grp, I m, I n, Acc<T> v, int) const {
    dx[g.in_offset(m, grp * g.cig + n)] = from_acc<T>(v);
  }
};

// Weight gradient: M = cig * kh * kw, N = cog, K = n * h_out * w_out. A((ci, i, j), (b, oh, ow)) =
// the input under tap (i, j) of output (oh, ow); B((b, oh, ow), co) = dy[b, g * cog + co, oh, ow];
// C((ci, i, j), co) = dweight[g * cog + co, ci, i, j]. With split K the partial sums go to
// `acc_out` (Acc<T>, laid out like dw): added atomically (acc_out zeroed) when acc_slice is 0,
// else stored by split s at acc_out + s * acc_slice for an ordered sum afterwards.
template <typename T, typename I>
struct WgradConv {
  Geom<I> g;
  const T *x, *dy;
  T* dw;
  Acc<T>* acc_out;
  int64_t acc_slice = 0;
  static constexpr bool kAAlongM = false, kBAlongN = false;
  static ImplicitGemm shape(const Extents& e) { return {e.ci_taps, e.co, e.out_px}; }
  SINTER_CONV_FN T a(int grp, I m, I k, T zero) const { return g.x_tap(x, k, grp, m, zero); }
  SINTER_CONV_FN T b(int grp, I k, I n, T) const { return dy[g.out_offset(k, grp * g.cog + n)]; }
  SINTER_CONV_FN void store(int grp, I m, I n, Acc<T> v, int split) const {
    store_wgrad(dw, acc_out, acc_slice, g.weight_offset(grp * g.cog + n, m), v, split);
  }
};

// A pass as the CUDA-core kernels run it (Note [implicit gemm] in kernels/conv.cu): transposed,
// C^T = B^T A^T, so that their M runs over the group's channels and N over the pixels (the taps for
// the weight gradient); int64 indices, and values in the accumulation type, 0 in the padding.
template <template <typename, typename> class Pass, typename T, typename I>
struct Transposed {
  static ImplicitGemm shape(const Extents& e) {
    const ImplicitGemm s = Pass<T, I>::shape(e);
    return {s.n, s.m, s.k};
  }
  Pass<T, I> p;
  SINTER_CONV_FN Acc<T> a(int grp, int64_t m, int64_t k) const {
    return to_acc(p.b(grp, static_cast<I>(k), static_cast<I>(m), zero()));
  }
  SINTER_CONV_FN Acc<T> b(int grp, int64_t k, int64_t n) const {
    return to_acc(p.a(grp, static_cast<I>(n), static_cast<I>(k), zero()));
  }
  SINTER_CONV_FN void store(int grp, int64_t m, int64_t n, Acc<T> v, int split) const {
    p.store(grp, static_cast<I>(n), static_cast<I>(m), v, split);
  }
  static SINTER_CONV_FN T zero() { return from_acc<T>(Acc<T>(0)); }
};

// The passes by kernel family: the tensor-core kernels' (int32 indices) and the CUDA-core ones'.
template <typename T>
using FwdTc = FwdConv<T, int>;
template <typename T>
using DgradTc = DgradConv<T, int>;
template <typename T>
using WgradTc = WgradConv<T, int>;
template <typename T, typename I>
using FwdProblem = Transposed<FwdConv, T, I>;
template <typename T, typename I>
using DgradProblem = Transposed<DgradConv, T, I>;
template <typename T, typename I>
using WgradProblem = Transposed<WgradConv, T, I>;

}  // namespace sinter::cudak

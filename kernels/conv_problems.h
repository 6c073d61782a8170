// The three passes of a convolution as implicit GEMMs, for both kernel families: the CUDA-core
// kernels of kernels/conv.cu (FwdProblem, DgradProblem, WgradProblem; Note [implicit gemm]) and the
// tensor-core ones of kernels/conv_tc.cu (FwdTc, DgradTc, WgradTc; Note [conv layout]). For each:
// its (m, n, k) extents, A(m, k) and B(k, n) as gathered from the tensors, and where C(m, n) goes,
// over the geometry both index with. The kernels run them on the GPU; the CPU suite runs the same
// code naively against a direct convolution (tests/test_warp_mma.cpp). No CUDA header: a host
// compiler reads this file too, with the f32 stand-ins of Acc, to_acc and from_acc below.
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
  // flattened.
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
  // The same widened to the accumulation type, 0 for `zero`.
  template <typename T>
  SINTER_CONV_FN Acc<T> x_at(const T* x, I p, int grp, I k) const {
    return to_acc(x_tap(x, p, grp, k, from_acc<T>(Acc<T>(0))));
  }
  template <typename T>
  SINTER_CONV_FN Acc<T> dy_at(const T* dy, I p, int grp, I k) const {
    return to_acc(dy_tap(dy, p, grp, k, from_acc<T>(Acc<T>(0))));
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

// --- The CUDA-core kernels' problems (kernels/conv.cu), in the index type I ---

// Forward, per group: M = cog, N = n * h_out * w_out, K = cig * kh * kw.
// A(co, (ci, i, j)) = weight[g * cog + co, ci, i, j]; B((ci, i, j), (b, oh, ow)) = the input under
// tap (i, j) of output (oh, ow); C(co, (b, oh, ow)) = y[b, g * cog + co, oh, ow] (+ bias).
template <typename T, typename I>
struct FwdProblem {
  static ImplicitGemm shape(const Extents& e) { return {e.co, e.out_px, e.ci_taps}; }
  Geom<I> g;
  const T* x;
  const T* wt;
  const T* bias;
  T* y;
  SINTER_CONV_FN Acc<T> a(int grp, int64_t m, int64_t k) const {
    return to_acc(wt[g.weight_offset(grp * static_cast<int64_t>(g.cog) + m, k)]);
  }
  SINTER_CONV_FN Acc<T> b(int grp, int64_t k, int64_t n) const {
    return g.x_at(x, static_cast<I>(n), grp, static_cast<I>(k));
  }
  SINTER_CONV_FN void store(int grp, int64_t m, int64_t n, Acc<T> v, int) const {
    const int64_t co = grp * static_cast<int64_t>(g.cog) + m;
    if (bias) v += to_acc(bias[co]);
    y[g.out_offset(n, co)] = from_acc<T>(v);
  }
};

// Input gradient, per group: M = cig, N = n * h * w, K = cog * kh * kw.
// A(ci, (co, i, j)) = weight[g * cog + co, ci, i, j]; B((co, i, j), (b, ih, iw)) = dy at the output
// whose tap (i, j) reads (ih, iw), 0 if there is none; C(ci, (b, ih, iw)) = dx[b, g * cig + ci,
// ..].
template <typename T, typename I>
struct DgradProblem {
  static ImplicitGemm shape(const Extents& e) { return {e.ci, e.in_px, e.co_taps}; }
  Geom<I> g;
  const T* dy;
  const T* wt;
  T* dx;
  SINTER_CONV_FN Acc<T> a(int grp, int64_t m, int64_t k) const {
    const I taps = g.taps(), kk = static_cast<I>(k);
    const int64_t co = grp * static_cast<int64_t>(g.cog) + kk / taps;
    return to_acc(wt[g.weight_offset(co, m * taps + kk % taps)]);
  }
  SINTER_CONV_FN Acc<T> b(int grp, int64_t k, int64_t n) const {
    return g.dy_at(dy, static_cast<I>(n), grp, static_cast<I>(k));
  }
  SINTER_CONV_FN void store(int grp, int64_t m, int64_t n, Acc<T> v, int) const {
    dx[g.in_offset(n, grp * static_cast<int64_t>(g.cig) + m)] = from_acc<T>(v);
  }
};

// Weight gradient, per group: M = cog, N = cig * kh * kw, K = n * h_out * w_out.
// A(co, (b, oh, ow)) = dy[b, g * cog + co, oh, ow]; B((b, oh, ow), (ci, i, j)) = the input under
// tap (i, j) of output (oh, ow); C(co, (ci, i, j)) = dweight[g * cog + co, ci, i, j]. With split K
// the partial sums go to `acc_out` (Acc<T>): added atomically (acc_out zeroed) when acc_slice is 0,
// else stored by split s at acc_out + s * acc_slice for an ordered sum afterwards.
template <typename T, typename I>
struct WgradProblem {
  static ImplicitGemm shape(const Extents& e) { return {e.co, e.ci_taps, e.out_px}; }
  Geom<I> g;
  const T* x;
  const T* dy;
  T* dw;
  Acc<T>* acc_out;
  int64_t acc_slice = 0;
  SINTER_CONV_FN Acc<T> a(int grp, int64_t m, int64_t k) const {
    return to_acc(dy[g.out_offset(k, grp * static_cast<int64_t>(g.cog) + m)]);
  }
  SINTER_CONV_FN Acc<T> b(int grp, int64_t k, int64_t n) const {
    return g.x_at(x, static_cast<I>(k), grp, static_cast<I>(n));
  }
  SINTER_CONV_FN void store(int grp, int64_t m, int64_t n, Acc<T> v, int split) const {
    const int64_t o = g.weight_offset(grp * static_cast<int64_t>(g.cog) + m, n);
    store_wgrad(dw, acc_out, acc_slice, o, v, split);
  }
};

// --- The tensor-core kernels' problems (kernels/conv_tc.cu) ---

// The problems index in int32: conv_tc_supported only lets through convolutions whose tensors, and
// the tile overhang past them, index within int32.
using TcGeom = Geom<int>;

// Each problem gives A(m, k) and B(k, n) of group grp (Note [conv layout]) and stores C(m, n).
// kAAlongM / kBAlongN say along which index the operand is contiguous in memory, so that the
// threads of a warp load along it.
template <typename T>
struct FwdTc {
  static constexpr bool kAAlongM = true, kBAlongN = false;
  // m = (b, oh, ow), n = the group's output channel, k = (ci, r, s).
  static ImplicitGemm shape(const Extents& e) { return {e.out_px, e.co, e.ci_taps}; }
  TcGeom g;
  const T *x, *wt, *bias;
  T* y;
  SINTER_CONV_FN T a(int grp, int m, int k, T zero) const { return g.x_tap(x, m, grp, k, zero); }
  SINTER_CONV_FN T b(int grp, int k, int n, T) const {
    return wt[g.weight_offset(grp * g.cog + n, k)];
  }
  SINTER_CONV_FN void store(int grp, int m, int n, float v, int) const {
    const int co = grp * g.cog + n;
    if (bias) v += to_acc(bias[co]);
    y[g.out_offset(m, co)] = from_acc<T>(v);
  }
};

template <typename T>
struct DgradTc {
  static constexpr bool kAAlongM = true, kBAlongN = false;
  // m = (b, ih, iw), n = the group's input channel, k = (co, r, s).
  static ImplicitGemm shape(const Extents& e) { return {e.in_px, e.ci, e.co_taps}; }
  TcGeom g;
  const T *dy, *wt;
  T* dx;
  SINTER_CONV_FN T a(int grp, int m, int k, T zero) const { return g.dy_tap(dy, m, grp, k, zero); }
  SINTER_CONV_FN T b(int grp, int k, int n, T) const {
    const int taps = g.taps();
    return wt[g.weight_offset(grp * g.cog + k / taps, n * taps + k % taps)];
  }
  SINTER_CONV_FN void store(int grp, int m, int n, float v, int) const {
    dx[g.in_offset(m, grp * g.cig + n)] = from_acc<T>(v);
  }
};

template <typename T>
struct WgradTc {
  static constexpr bool kAAlongM = false, kBAlongN = false;
  // m = (ci, r, s), n = the group's output channel, k = (b, oh, ow).
  static ImplicitGemm shape(const Extents& e) { return {e.ci_taps, e.co, e.out_px}; }
  TcGeom g;
  const T *x, *dy;
  T* dw;
  float* acc_out;         // split K: f32 partial sums, laid out like dw
  int64_t acc_slice = 0;  // 0: added atomically; else split s stores at acc_out + s * acc_slice
  SINTER_CONV_FN T a(int grp, int m, int k, T zero) const { return g.x_tap(x, k, grp, m, zero); }
  SINTER_CONV_FN T b(int grp, int k, int n, T) const {
    return dy[g.out_offset(k, grp * g.cog + n)];
  }
  SINTER_CONV_FN void store(int grp, int m, int n, float v, int split) const {
    store_wgrad(dw, acc_out, acc_slice, g.weight_offset(grp * g.cog + n, m), v, split);
  }
};

}  // namespace sinter::cudak

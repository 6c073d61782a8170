// Tensor-core 2-D convolution (forward, input gradient, weight gradient) as implicit GEMM on
// mma.sync: bf16 and f16 through m16n8k16, f32 as TF32 through m16n8k8, f32 accumulation.
//
// Note [conv layout]
// The library's tensors are NCHW, and these kernels read them as they are (no layout transform).
// Every pass is, per group, C (M, N) = A (M, K) @ B (K, N) with the long pixel dimension as M
// (128-row block tiles) and the short channel dimension as N (32- or 64-column tiles, picked by
// the channel count):
//   forward: M = n * h_out * w_out (b, oh, ow), N = c_out / groups (co), K = c_in / groups * kh *
//   kw
//     (ci, r, s). A(m, k) = x[b, ci, oh * sh - ph + r * dh, ow * sw - pw + s * dw], gathered (0 in
//     the padding); B(k, n) = weight[co, ci, r, s], a plain row of the weight; C(m, n) =
//     y[b, co, oh, ow] (+ bias[co]).
//   dgrad: M = n * h * w (b, ih, iw), N = c_in / groups (ci), K = c_out / groups * kh * kw
//     (co, r, s). A(m, k) = dy[b, co, oh, ow] for the output whose tap (r, s) reads (ih, iw), i.e.
//     oh = (ih + ph - r * dh) / sh when that divides exactly and lies in range, else 0;
//     B(k, n) = weight[co, ci, r, s]; C(m, n) = dx[b, ci, ih, iw].
//   wgrad: M = c_in / groups * kh * kw (ci, r, s), N = c_out / groups (co), K = n * h_out * w_out
//     (b, oh, ow). A(m, k) = x under tap (r, s) of output (oh, ow), gathered as for the forward;
//     B(k, n) = dy[b, co, oh, ow]; C(m, n) = dweight[co, ci, r, s]. K is long, so the caller
//     splits it over blocks that add f32 partial sums atomically.
// Why: in NCHW consecutive m of the forward and dgrad are consecutive (ow, iw) of one channel
// plane, so with stride 1 the A gathers and the C stores of a warp touch consecutive addresses;
// the weight's rows are contiguous along (ci, r, s), and in wgrad both operands are contiguous
// along (b, oh, ow) pixels, the K dim. The workloads' channel counts (1 to 64) would waste most of
// a 128-wide tile as M, so they go to N. Operand elements are gathered one by one (padding,
// stride and dilation make 16-byte copies impossible in NCHW) into registers, stored to shared
// memory M-major / N-major while the previous k step multiplies (double buffer), and read with
// ldmatrix.trans (or 32-bit loads for TF32) by mma::warp_mma_tile.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "conv_tc.cuh"
#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "device_info.cuh"
#include "mma.cuh"

namespace sinter::cudak {
namespace {

constexpr int kThreads = 256;  // 8 warps: 4 along M by 2 along N (mma::ConvTcTile)
constexpr int kBM = 128;
static_assert(mma::ConvTcTile<float, 32>::kBM == kBM);

template <typename T>
constexpr int k_step() {
  return mma::ConvTcTile<T, 32>::kBK;
}

// grid: x over M tiles, y over N tiles, z = group * splits + split; split s covers K range
// [s * k_chunk, min(K, (s + 1) * k_chunk)). Each thread gathers its share of the next k step's
// A (kBM x kBK) and B (kBK x kBN) tiles into registers while the warps multiply the current ones;
// both tiles sit in shared memory k-major (As[k][m], Bs[k][n]), rows padded by 8 elements so the
// ldmatrix.trans rows (and TF32 fragment words) fall on distinct banks. Warp w owns rows
// (w / 2) * 32 and columns (w % 2) * kBN / 2 of the block tile.
template <typename T, int kBN, class P>
__global__ void __launch_bounds__(kThreads)
    conv_tc_kernel(P p, int M, int N, int K, int k_chunk, int splits) {
  using Tile = mma::ConvTcTile<T, kBN>;
  constexpr int kBK = Tile::kBK, kLdA = Tile::kLdA, kLdB = Tile::kLdB;
  constexpr int kALoads = kBM * kBK / kThreads, kBLoads = kBK * kBN / kThreads;
  constexpr int kMI = Tile::kMI, kNI = Tile::kNI;  // warp tile 32 x kBN / 2
  __shared__ __align__(16) T as[2][kBK * kLdA];
  __shared__ __align__(16) T bs[2][kBK * kLdB];

  const int grp = static_cast<int>(blockIdx.z) / splits,
            split = static_cast<int>(blockIdx.z) % splits;
  const int m0 = static_cast<int>(blockIdx.x) * kBM, n0 = static_cast<int>(blockIdx.y) * kBN;
  const int k_begin = static_cast<int>(split_begin(split, k_chunk)),
            k_end = static_cast<int>(split_end(split, k_chunk, K));
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int wm0 = Tile::warp_m0(warp), wn0 = Tile::warp_n0(warp);
  const T zero = from_acc<T>(0.f);

  // Where load l of this thread sits in the tiles (ConvTcTile::load_slot).
  auto a_at = [tid](int l) {
    return Tile::template load_slot<kBM>(tid + l * kThreads, P::kAAlongM);
  };
  auto b_at = [tid](int l) {
    return Tile::template load_slot<kBN>(tid + l * kThreads, P::kBAlongN);
  };

  T ra[kALoads], rb[kBLoads];
  auto gather = [&](int k0) {
#pragma unroll
    for (int l = 0; l < kALoads; ++l) {
      const int m = m0 + a_at(l).row, k = k0 + a_at(l).k;
      ra[l] = m < M && k < k_end ? p.a(grp, m, k, zero) : zero;
    }
#pragma unroll
    for (int l = 0; l < kBLoads; ++l) {
      const int n = n0 + b_at(l).row, k = k0 + b_at(l).k;
      rb[l] = n < N && k < k_end ? p.b(grp, k, n, zero) : zero;
    }
  };

  float acc[kMI][kNI][4] = {};

  int buf = 0;
  if (k_begin < k_end) gather(k_begin);
  for (int k0 = k_begin; k0 < k_end; k0 += kBK) {
    // Buffer buf was last read two steps ago; every warp has passed the barrier of the step in
    // between since, so it is free.
#pragma unroll
    for (int l = 0; l < kALoads; ++l) as[buf][a_at(l).k * kLdA + a_at(l).row] = ra[l];
#pragma unroll
    for (int l = 0; l < kBLoads; ++l) bs[buf][b_at(l).k * kLdB + b_at(l).row] = rb[l];
    __syncthreads();
    if (k0 + kBK < k_end) gather(k0 + kBK);
    mma::warp_mma_tile<T, kMI, kNI, kBK, Tile::kAMajorM, Tile::kBMajorK, kLdA, kLdB>(
        acc, as[buf], bs[buf], wm0, wn0, lane);
    buf ^= 1;
  }

  mma::for_each_acc(acc, wm0, wn0, lane, [&](int r, int c, float v) {
    const int m = m0 + r, n = n0 + c;
    if (m < M && n < N) p.store(grp, m, n, v, splits > 1 ? split : -1);
  });
}

// 64-column tiles, or 32 when the channel count N would leave half of them empty.
int tile_n(int64_t N) { return N <= 32 ? 32 : 64; }

template <typename T, class P>
void launch(const Ctx& ctx, const P& p, int64_t groups, int64_t M, int64_t N, int64_t K,
            int64_t k_chunk, int splits) {
  const int bn = tile_n(N);
  const int64_t gx = (M + kBM - 1) / kBM, gy = (N + bn - 1) / bn, gz = groups * splits;
  SINTER_CHECK(gy <= 65535 && gz <= 65535, "conv2d: problem too large for one launch (grid ", gx,
               " x ", gy, " x ", gz, ")");
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(gz));
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  const int chunk = static_cast<int>(std::max<int64_t>(k_chunk, 1));
  if (bn == 32) {
    conv_tc_kernel<T, 32><<<grid, kThreads, 0, stream>>>(p, m, n, k, chunk, splits);
  } else {
    conv_tc_kernel<T, 64><<<grid, kThreads, 0, stream>>>(p, m, n, k, chunk, splits);
  }
  SINTER_LAUNCH_CHECK("conv_tc_kernel");
}

// Calls fn(T{}) with the CUDA storage type of a tensor-core dtype.
template <class Fn>
void dispatch_tc(DType dtype, Fn fn) {
  switch (dtype) {
    case DType::bf16:
      return fn(__nv_bfloat16{});
    case DType::f16:
      return fn(__half{});
    default:
      return fn(float{});
  }
}

}  // namespace

bool conv_tc_supported(int device, const Conv2dGeom& g, DType dtype) {
  if (dtype != DType::bf16 && dtype != DType::f16 && !(dtype == DType::f32 && g.allow_tf32)) {
    return false;
  }
  // int32 indexing, with room for a block tile hanging past the last element.
  if (!conv_fits_i32(g, int64_t{1} << 20) || g.groups > 65535) return false;
  return device_compute_capability(device) >= 80;
}

int64_t conv_tc_k_step(DType dtype) { return dtype == DType::f32 ? 16 : 32; }

int64_t conv_tc_wgrad_tiles(const Conv2dGeom& g) {
  const int64_t M = g.c_in / g.groups * g.kh * g.kw, N = g.c_out / g.groups;
  const int bn = tile_n(N);
  return ((M + kBM - 1) / kBM) * ((N + bn - 1) / bn) * g.groups;
}

bool conv_tc_forward(const Ctx& ctx, const Conv2dGeom& g, DType dtype, const void* x,
                     const void* weight, const void* bias, void* y) {
  if (!conv_tc_supported(ctx.device, g, dtype)) return false;
  dispatch_tc(dtype, [&](auto t) {
    using T = decltype(t);
    const FwdTc<T> p{Geom<int>(g),
                     static_cast<const T*>(x),
                     static_cast<const T*>(weight),
                     static_cast<const T*>(bias),
                     static_cast<T*>(y),
                     g.act};
    const ImplicitGemm s = FwdTc<T>::shape(g);
    launch<T>(ctx, p, g.groups, s.m, s.n, s.k, s.k, 1);
  });
  return true;
}

bool conv_tc_backward_input(const Ctx& ctx, const Conv2dGeom& g, DType dtype, const void* dy,
                            const void* weight, void* dx) {
  if (!conv_tc_supported(ctx.device, g, dtype)) return false;
  dispatch_tc(dtype, [&](auto t) {
    using T = decltype(t);
    const DgradTc<T> p{Geom<int>(g), static_cast<const T*>(dy), static_cast<const T*>(weight),
                       static_cast<T*>(dx)};
    const ImplicitGemm s = DgradTc<T>::shape(g);
    launch<T>(ctx, p, g.groups, s.m, s.n, s.k, s.k, 1);
  });
  return true;
}

void conv_tc_backward_weight(const Ctx& ctx, const Conv2dGeom& g, DType dtype, const void* x,
                             const void* dy, void* dweight, float* acc, int64_t acc_slice,
                             int64_t k_chunk, int splits) {
  dispatch_tc(dtype, [&](auto t) {
    using T = decltype(t);
    const WgradTc<T> p{Geom<int>(g),
                       static_cast<const T*>(x),
                       static_cast<const T*>(dy),
                       static_cast<T*>(dweight),
                       acc,
                       acc_slice};
    const ImplicitGemm s = WgradTc<T>::shape(g);
    launch<T>(ctx, p, g.groups, s.m, s.n, s.k, k_chunk, splits);
  });
}

}  // namespace sinter::cudak

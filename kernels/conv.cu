// CUDA 2-D convolution as implicit GEMM: the forward pass, the input gradient (dgrad) and the
// weight gradient (wgrad) share one shared-memory tiled GEMM kernel whose operand tiles are
// gathered straight from the NCHW tensors, so no column buffer is ever materialized. Each entry
// point first offers the problem to the tensor-core kernels (kernels/conv_tc.cu: bf16, f16, f32 as
// TF32 when allowed, sm_80 and newer); these CUDA-core kernels take the rest (f32, f64, ...).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "conv_tc.cuh"
#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "device_info.cuh"
#include "fma_tile.cuh"
#include "kern/conv.h"
#include "scratch.cuh"
#include "sinter/core/determinism.h"

namespace sinter::cudak {
namespace {

// Note [implicit gemm]
// Each pass is, per group, C (M, N) = A (M, K) @ B (K, N), where the Problem functor says how to
// read A(m, k) and B(k, n) from the tensors (0 outside the input, as padding) and where C(m, n)
// goes. Blocks of kThreads compute kBM x kBN tiles of C, stepping through K kBK at a time: the
// block stages an A tile and a B tile in shared memory, then each thread accumulates a 4 x 4
// sub-tile, rows ty + 16 i and columns tx + 16 j (Note [fma tile] in kernels/fma_tile.cuh), so
// that a warp's stores to consecutive n are consecutive. blockIdx.z = group * splits + split;
// split s covers K range [s * k_chunk, (s + 1) * k_chunk); with splits > 1 the problem's store
// gets s (else -1) and keeps the partial sums apart or adds them atomically
// (Note [deterministic algorithms]).
constexpr int kBM = 64, kBN = 64, kBK = 16, kThreads = 256;
constexpr int kSub = 4;  // kBM / 16 rows and kBN / 16 columns per thread

template <typename T, class Problem>
__global__ void __launch_bounds__(kThreads)
    conv_gemm_kernel(Problem p, int64_t M, int64_t N, int64_t K, int64_t k_chunk, int splits) {
  using A = Acc<T>;
  __shared__ A as[kBK][kBM + 1];  // +1: the transposing stores spread over banks
  __shared__ A bs[kBK][kBN];
  const int group = static_cast<int>(blockIdx.z) / splits;
  const int split = static_cast<int>(blockIdx.z) % splits;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int64_t k_begin = split_begin(split, k_chunk), k_end = split_end(split, k_chunk, K);
  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;

  A acc[kSub][kSub];
#pragma unroll
  for (int i = 0; i < kSub; ++i) {
#pragma unroll
    for (int j = 0; j < kSub; ++j) acc[i][j] = A(0);
  }

  for (int64_t k0 = k_begin; k0 < k_end; k0 += kBK) {
    // A tile (kBM x kBK): consecutive threads take consecutive k, the contiguous dim of A.
#pragma unroll
    for (int r = 0; r < kBM * kBK / kThreads; ++r) {
      const int e = tid + r * kThreads, mm = e / kBK, kk = e % kBK;
      const int64_t m = m0 + mm, k = k0 + kk;
      as[kk][mm] = m < M && k < k_end ? p.a(group, m, k) : A(0);
    }
    // B tile (kBK x kBN): consecutive threads take consecutive n.
#pragma unroll
    for (int r = 0; r < kBK * kBN / kThreads; ++r) {
      const int e = tid + r * kThreads, kk = e / kBN, nn = e % kBN;
      const int64_t n = n0 + nn, k = k0 + kk;
      bs[kk][nn] = n < N && k < k_end ? p.b(group, k, n) : A(0);
    }
    __syncthreads();
    fma_tile(as, bs, ty, tx, acc);
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < kSub; ++i) {
    const int64_t m = m0 + ty + 16 * i;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < kSub; ++j) {
      const int64_t n = n0 + tx + 16 * j;
      if (n < N) p.store(group, m, n, acc[i][j], splits > 1 ? split : -1);
    }
  }
}

template <typename T>
__global__ void narrow_kernel(const Acc<T>* in, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = from_acc<T>(in[i]);
  }
}

// out[i] = the sum of the splits' partial sums in[s * n + i], s in order.
template <typename T, typename A>
__global__ void sum_splits_kernel(const A* in, int splits, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    A sum = in[i];
    for (int s = 1; s < splits; ++s) sum += in[s * n + i];
    out[i] = from_acc<T>(sum);
  }
}

// Launches conv_gemm_kernel over groups x splits for a problem of (M, N, K) per group.
template <typename T, class Problem>
void launch_gemm(const Ctx& ctx, const Problem& p, int64_t groups, int64_t M, int64_t N, int64_t K,
                 int64_t k_chunk, int splits) {
  const int64_t gx = (N + kBN - 1) / kBN, gy = (M + kBM - 1) / kBM, gz = groups * splits;
  SINTER_CHECK(gx <= INT_MAX && gy <= 65535 && gz <= 65535,
               "conv2d: problem too large for one launch (grid ", gx, " x ", gy, " x ", gz, ")");
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(gz));
  conv_gemm_kernel<T><<<grid, kThreads, 0, static_cast<cudaStream_t>(ctx.stream)>>>(
      p, M, N, std::max<int64_t>(K, 0), std::max<int64_t>(k_chunk, 1), splits);
  SINTER_LAUNCH_CHECK("conv_gemm_kernel");
}

// Calls fn(T{}, I{}) with the CUDA storage type of `dtype` and the index type for g.
template <class Fn>
void dispatch(const char* op, const Conv2dGeom& g, DType dtype, Fn fn) {
  const auto with_index = [&](auto t) {
    if (conv_fits_i32(g)) {
      fn(t, int32_t{});
    } else {
      fn(t, int64_t{});
    }
  };
  visit_floating(dtype, op, [&](auto tag) { with_index(typename decltype(tag)::type{}); });
}

}  // namespace

void conv2d_forward(const Ctx& ctx, const Conv2dGeom& g, DType dtype, const void* x,
                    const void* weight, const void* bias, void* y) {
  if (g.n * g.c_out * g.h_out * g.w_out == 0) return;
  DeviceGuard guard(ctx.device);
  if (conv_tc_forward(ctx, g, dtype, x, weight, bias, y)) return;
  dispatch("conv2d_forward", g, dtype, [&](auto t, auto idx) {
    using T = decltype(t);
    using I = decltype(idx);
    const FwdProblem<T, I> p{{Geom<I>(g), static_cast<const T*>(x), static_cast<const T*>(weight),
                              static_cast<const T*>(bias), static_cast<T*>(y), g.act}};
    const ImplicitGemm s = FwdProblem<T, I>::shape(g);
    launch_gemm<T>(ctx, p, g.groups, s.m, s.n, s.k, s.k, 1);
  });
}

void conv2d_backward_input(const Ctx& ctx, const Conv2dGeom& g, DType dtype, const void* dy,
                           const void* weight, void* dx) {
  if (g.n * g.c_in * g.h * g.w == 0) return;
  DeviceGuard guard(ctx.device);
  if (conv_tc_backward_input(ctx, g, dtype, dy, weight, dx)) return;
  dispatch("conv2d_backward_input", g, dtype, [&](auto t, auto idx) {
    using T = decltype(t);
    using I = decltype(idx);
    const DgradProblem<T, I> p{{Geom<I>(g), static_cast<const T*>(dy),
                                static_cast<const T*>(weight), static_cast<T*>(dx)}};
    const ImplicitGemm s = DgradProblem<T, I>::shape(g);
    launch_gemm<T>(ctx, p, g.groups, s.m, s.n, s.k, s.k, 1);
  });
}

void conv2d_backward_weight(const Ctx& ctx, const Conv2dGeom& g, DType dtype, const void* x,
                            const void* dy, void* dweight) {
  const ImplicitGemm s = WgradProblem<float, int64_t>::shape(g);  // the same for every T and I
  const int64_t M = s.m, N = s.n, K = s.k, total = g.c_out * N;
  if (total == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  // Split K (plan_split_k). The tensor-core kernels tile differently and step k by
  // conv_tc_k_step.
  const int sms = device_sm_count(ctx.device);
  const bool tc = conv_tc_supported(ctx.device, g, dtype);
  const int64_t k_step = tc ? conv_tc_k_step(dtype) : kBK;
  const int64_t tiles =
      tc ? conv_tc_wgrad_tiles(g) : ((M + kBM - 1) / kBM) * ((N + kBN - 1) / kBN) * g.groups;
  const SplitK plan = plan_split_k(K, tiles, sms, g.groups, k_step);
  const int64_t splits = plan.splits, k_chunk = plan.k_chunk;
  dispatch("conv2d_backward_weight", g, dtype, [&](auto t, auto idx) {
    using T = decltype(t);
    using I = decltype(idx);
    using A = Acc<T>;
    WgradProblem<T, I> p{{Geom<I>(g), static_cast<const T*>(x), static_cast<const T*>(dy),
                          static_cast<T*>(dweight), nullptr}};
    // One launch over K range chunks of `chunk`; when parts > 1 the partial sums go to acc_out
    // (see WgradConv for acc_slice).
    const auto run = [&](A* acc_out, int64_t acc_slice, int64_t chunk, int parts) {
      if constexpr (std::is_same_v<A, float>) {
        if (tc) {
          return conv_tc_backward_weight(ctx, g, dtype, x, dy, dweight, acc_out, acc_slice, chunk,
                                         parts);
        }
      }
      p.p.acc_out = acc_out;
      p.p.acc_slice = acc_slice;
      launch_gemm<T>(ctx, p, g.groups, M, N, K, chunk, parts);
    };
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 4096));
    if (splits == 1) {
      run(nullptr, 0, K, 1);
      return;
    }
    if (deterministic_algorithms_enabled()) {
      const Scratch<A> partial(ctx, splits * total);
      run(partial.get(), total, k_chunk, static_cast<int>(splits));
      sum_splits_kernel<T, A><<<blocks, 256, 0, stream>>>(partial.get(), static_cast<int>(splits),
                                                          static_cast<T*>(dweight), total);
      SINTER_LAUNCH_CHECK("sum_splits_kernel");
      return;
    }
    // Split K: partial sums meet in an Acc<T> buffer; for f32 and f64 that is the output itself.
    constexpr bool kSame = std::is_same_v<T, A>;
    const Scratch<A> scratch(ctx, kSame ? 0 : total);
    A* acc = kSame ? static_cast<A*>(dweight) : scratch.get();
    SINTER_CUDA_CHECK(cudaMemsetAsync(acc, 0, static_cast<size_t>(total) * sizeof(A), stream));
    run(acc, 0, k_chunk, static_cast<int>(splits));
    if constexpr (!kSame) {
      narrow_kernel<T><<<blocks, 256, 0, stream>>>(acc, static_cast<T*>(dweight), total);
      SINTER_LAUNCH_CHECK("narrow_kernel");
    }
  });
}

}  // namespace sinter::cudak

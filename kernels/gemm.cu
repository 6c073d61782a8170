// CUDA batched GEMM, row-major C = epilogue(alpha * op(A) @ op(B) + beta * C): the dispatcher that
// picks a kernel family (wgmma on sm_90a, mma.sync on sm_80+, CUDA cores otherwise), and the
// general CUDA-core kernel that takes every problem: f32, f64, bf16 and f16 storage, any layout and
// alignment, f32 accumulation (f64 for f64).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "device_info.cuh"
#include "fma_tile.cuh"
#include "gemm_common.cuh"
#include "kern/gemm.h"

namespace sinter::cudak {
namespace {

// Block tile (kBM, kBN) of C, stepping kBK along k; 256 threads in a 16 x 16 grid, each owning a
// 4 x 4 micro-tile whose rows are ty + 16 * i and columns tx + 16 * j (Note [fma tile] in
// kernels/fma_tile.cuh).
constexpr int kBM = 64, kBN = 64, kBK = 16;
constexpr int kThreads = 256;
constexpr int kTM = kBM / 16, kTN = kBN / 16;
constexpr int kPad = 4;  // keeps rows 16-byte aligned and spreads stores over banks
constexpr int kALoads = kBM * kBK / kThreads;  // elements of the A tile each thread loads
constexpr int kBLoads = kBK * kBN / kThreads;

// grid: x over m tiles, y over n tiles, z over the batch; y and z stride when the grid is capped.
// Each k step stages the next tiles in registers while the current ones are multiplied from shared
// memory. Out-of-range elements load as zero, so edges need no special case in the inner loop.
template <typename T, bool kTransA, bool kTransB>
__global__ void __launch_bounds__(kThreads) gemm_kernel(GemmParams<T> p) {
  using A = Acc<T>;
  // As: op(A) tile stored k-major, (kBK, kBM); Bs: op(B) tile, (kBK, kBN).
  __shared__ A As[kBK][kBM + kPad];
  __shared__ A Bs[kBK][kBN + kPad];

  const int t = threadIdx.x, tx = t % 16, ty = t / 16;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBM;

  // Where load l of this thread sits in the tiles. op(A)(i, q) reads a[i * lda + q] (a[q * lda + i]
  // transposed); the fastest-varying thread index follows the contiguous dim, so loads coalesce.
  // Power-of-two divisions, cheaper to recompute than to keep in registers.
  auto a_i = [t](int l) { return kTransA ? (t + l * kThreads) % kBM : (t + l * kThreads) / kBK; };
  auto a_q = [t](int l) { return kTransA ? (t + l * kThreads) / kBM : (t + l * kThreads) % kBK; };
  auto b_j = [t](int l) { return kTransB ? (t + l * kThreads) / kBK : (t + l * kThreads) % kBN; };
  auto b_q = [t](int l) { return kTransB ? (t + l * kThreads) % kBK : (t + l * kThreads) / kBN; };

  for (int64_t z = blockIdx.z; z < p.batch; z += gridDim.z) {
    const T* a = p.a + z * p.stride_a;
    const T* b = p.b + z * p.stride_b;
    for (int64_t col0 = static_cast<int64_t>(blockIdx.y) * kBN; col0 < p.n;
         col0 += static_cast<int64_t>(gridDim.y) * kBN) {
      A ra[kALoads], rb[kBLoads];
      auto load_tiles = [&](int64_t k0) {
#pragma unroll
        for (int l = 0; l < kALoads; ++l) {
          const int64_t i = row0 + a_i(l), q = k0 + a_q(l);
          ra[l] = i < p.m && q < p.k ? to_acc(a[kTransA ? q * p.lda + i : i * p.lda + q]) : A(0);
        }
#pragma unroll
        for (int l = 0; l < kBLoads; ++l) {
          const int64_t q = k0 + b_q(l), j = col0 + b_j(l);
          rb[l] = q < p.k && j < p.n ? to_acc(b[kTransB ? j * p.ldb + q : q * p.ldb + j]) : A(0);
        }
      };

      A acc[kTM][kTN] = {};
      load_tiles(0);
      for (int64_t k0 = 0; k0 < p.k; k0 += kBK) {
#pragma unroll
        for (int l = 0; l < kALoads; ++l) As[a_q(l)][a_i(l)] = ra[l];
#pragma unroll
        for (int l = 0; l < kBLoads; ++l) Bs[b_q(l)][b_j(l)] = rb[l];
        __syncthreads();
        if (k0 + kBK < p.k) load_tiles(k0 + kBK);
        fma_tile(As, Bs, ty, tx, acc);
        __syncthreads();
      }

#pragma unroll
      for (int i = 0; i < kTM; ++i) {
        const int64_t gi = row0 + ty + 16 * i;
        if (gi >= p.m) continue;
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
          const int64_t gj = col0 + tx + 16 * j;
          if (gj < p.n) gemm_finish(p, z, gi, gj, acc[i][j]);
        }
      }
    }
  }
}

template <typename T, bool kTransA, bool kTransB>
void gemm_launch(const GemmArgs& g, cudaStream_t stream) {
  const GemmParams<T> p = gemm_params<T>(g);
  const int64_t tiles_m = (g.m + kBM - 1) / kBM, tiles_n = (g.n + kBN - 1) / kBN;
  SINTER_CHECK(tiles_m <= INT32_MAX, "gemm: m = ", g.m, " is too large");
  const dim3 grid(static_cast<unsigned>(tiles_m),
                  static_cast<unsigned>(std::min<int64_t>(tiles_n, 65535)),
                  static_cast<unsigned>(std::min<int64_t>(g.batch, 65535)));
  gemm_kernel<T, kTransA, kTransB><<<grid, kThreads, 0, stream>>>(p);
  SINTER_LAUNCH_CHECK("gemm_kernel");
}

template <typename T>
void gemm_typed(const GemmArgs& g, cudaStream_t stream) {
  if (g.trans_a) {
    if (g.trans_b) return gemm_launch<T, true, true>(g, stream);
    return gemm_launch<T, true, false>(g, stream);
  }
  if (g.trans_b) return gemm_launch<T, false, true>(g, stream);
  return gemm_launch<T, false, false>(g, stream);
}

const char* path_name(GemmPath path) {
  // In GemmPath's order.
  constexpr const char* kNames[] = {"auto", "simt", "mma.sync", "wgmma"};
  return kNames[static_cast<int>(path)];
}

}  // namespace

// The general kernel, or the 128 x 128 f32 kernel where it applies.
void gemm_simt(const GemmArgs& g, cudaStream_t stream) {
  if (gemm_sgemm_large(g, stream)) return;
  visit_floating(g.dtype, "gemm",
                 [&](auto tag) { gemm_typed<typename decltype(tag)::type>(g, stream); });
}

void gemm(const Ctx& ctx, const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  const bool tensor_core_type =
      g.dtype == DType::bf16 || g.dtype == DType::f16 || (g.dtype == DType::f32 && g.allow_tf32);
  switch (g.path) {
    case GemmPath::Simt:
      return gemm_simt(g, stream);
    case GemmPath::MmaSync:
    case GemmPath::Wgmma: {
      const bool done = g.path == GemmPath::Wgmma ? gemm_wgmma(g, stream) : gemm_mma(g, stream);
      SINTER_CHECK(done, "gemm: the ", path_name(g.path),
                   " kernels cannot take this problem: dtype ", g.dtype, ", allow_tf32 ",
                   g.allow_tf32, ", m=", g.m, " n=", g.n, " k=", g.k, ", trans_a ", g.trans_a,
                   ", trans_b ", g.trans_b, ", lda ", g.lda, " ldb ", g.ldb, " ldc ", g.ldc,
                   ", compute capability ", device_compute_capability(ctx.device));
      return;
    }
    case GemmPath::Auto:
      break;
  }
  if (tensor_core_type && (gemm_wgmma(g, stream) || gemm_mma(g, stream))) return;
  gemm_simt(g, stream);
}

}  // namespace sinter::cudak

// f32 GEMM on CUDA cores for large problems: 128 x 128 block tiles, 64 x 32 warp tiles, 8 x 8
// outputs per thread, 16-byte global and shared loads, double-buffered shared memory.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda_check.cuh"
#include "device_info.cuh"
#include "gemm_common.cuh"

namespace sinter::cudak {
namespace {

// 256 threads = 8 warps in a 2 (m) x 4 (n) grid; each warp owns a 64 x 32 piece of the block
// tile, and its lanes an 8 (m) x 4 (n) grid. A thread's rows are wm*64 + tm*4 + {0..3} and
// wm*64 + 32 + tm*4 + {0..3}; its columns wn*32 + tn*4 + {0..3} and wn*32 + 16 + tn*4 + {0..3}.
// So one k step reads two float4 of A and two of B from shared memory for 64 FMAs, and a warp's
// reads touch 8 (A) or 4 (B) distinct float4: no bank conflicts.
constexpr int kBM = 128, kBN = 128, kBK = 8;
constexpr int kThreads = 256;
// Shared rows are padded by 4 floats: a k row stays 16-byte aligned, and the transposing scalar
// stores of K-contiguous operands (rows k and k + 4 of the same column) land in different banks.
constexpr int kPad = 4;

struct Smem {
  float a[2][kBK][kBM + kPad];  // op(A) tile, k-major: a[buf][q][i]
  float b[2][kBK][kBN + kPad];  // op(B) tile: b[buf][q][j]
};

// One operand tile of 8 (k) x 128 (m or n) as each thread loads it: 4 consecutive elements of the
// dimension that is contiguous in memory. kKContig: the operand is contiguous along k (A not
// transposed, or B transposed): thread t takes row t / 2 and k offset (t % 2) * 4. Otherwise it is
// contiguous along m / n: thread t takes k row t / 32 and column (t % 32) * 4.
template <bool kKContig>
struct TileLoader {
  const float* base;        // this batch's operand
  int64_t ld, rows, depth;  // ld of the stored matrix; rows: m (or n); depth: k
  int r, q;                 // this thread's row (m or n) and k offset inside the tile

  __device__ TileLoader(const float* b, int64_t l, int64_t rw, int64_t dp, int t)
      : base(b), ld(l), rows(rw), depth(dp) {
    if constexpr (kKContig) {
      r = t / 2;
      q = (t % 2) * 4;
    } else {
      r = (t % 32) * 4;
      q = t / 32;
    }
  }

  // Elements (row0 + r + u, k0 + q) or (row0 + r, k0 + q + u), u < 4: one 16-byte load when all
  // four are in range (the host checked alignment), predicated scalar loads at the edges.
  __device__ float4 load(int64_t row0, int64_t k0) const {
    float v[4];
    if constexpr (kKContig) {
      const int64_t i = row0 + r, kk = k0 + q;
      const float* p = base + i * ld + kk;
      if (i < rows && kk + 3 < depth) return *reinterpret_cast<const float4*>(p);
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = i < rows && kk + u < depth ? p[u] : 0.f;
    } else {
      const int64_t i = row0 + r, kk = k0 + q;
      const float* p = base + kk * ld + i;
      if (kk < depth && i + 3 < rows) return *reinterpret_cast<const float4*>(p);
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = kk < depth && i + u < rows ? p[u] : 0.f;
    }
    return make_float4(v[0], v[1], v[2], v[3]);
  }

  // Stores a loaded float4 into a k-major shared tile s[q][row].
  __device__ void store(float (*s)[kBM + kPad], float4 v) const {
    if constexpr (kKContig) {
      s[q + 0][r] = v.x;
      s[q + 1][r] = v.y;
      s[q + 2][r] = v.z;
      s[q + 3][r] = v.w;
    } else {
      *reinterpret_cast<float4*>(&s[q][r]) = v;
    }
  }
};

// grid: x over m tiles, y over n tiles, z over the batch; y and z stride when the grid is capped.
// Two blocks per SM (at most 128 registers per thread), except with both operands transposed, a
// rare layout whose kernel would spill under that cap.
template <bool kTransA, bool kTransB>
__global__ void __launch_bounds__(kThreads, (kTransA && kTransB) ? 1 : 2)
    sgemm_large_kernel(GemmParams<float> p) {
  __shared__ __align__(16) Smem sm;
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int wm = warp / 4, wn = warp % 4, tm = lane / 4, tn = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBM;
  const int64_t ktiles = (p.k + kBK - 1) / kBK;

  for (int64_t z = blockIdx.z; z < p.batch; z += gridDim.z) {
    // A is contiguous along k unless transposed; B is contiguous along k only when transposed.
    const TileLoader<!kTransA> la(p.a + z * p.stride_a, p.lda, p.m, p.k, t);
    const TileLoader<kTransB> lb(p.b + z * p.stride_b, p.ldb, p.n, p.k, t);
    for (int64_t col0 = static_cast<int64_t>(blockIdx.y) * kBN; col0 < p.n;
         col0 += static_cast<int64_t>(gridDim.y) * kBN) {
      float acc[8][8] = {};
      float4 ra = la.load(row0, 0), rb = lb.load(col0, 0);
      la.store(sm.a[0], ra);
      lb.store(sm.b[0], rb);
      __syncthreads();
      for (int64_t kt = 0; kt < ktiles; ++kt) {
        const int cur = static_cast<int>(kt & 1);
        const bool more = kt + 1 < ktiles;
        if (more) {
          ra = la.load(row0, (kt + 1) * kBK);
          rb = lb.load(col0, (kt + 1) * kBK);
        }
#pragma unroll
        for (int q = 0; q < kBK; ++q) {
          const float4 a0 = *reinterpret_cast<const float4*>(&sm.a[cur][q][wm * 64 + tm * 4]);
          const float4 a1 = *reinterpret_cast<const float4*>(&sm.a[cur][q][wm * 64 + 32 + tm * 4]);
          const float4 b0 = *reinterpret_cast<const float4*>(&sm.b[cur][q][wn * 32 + tn * 4]);
          const float4 b1 = *reinterpret_cast<const float4*>(&sm.b[cur][q][wn * 32 + 16 + tn * 4]);
          const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
          const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
          for (int i = 0; i < 8; ++i) {
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
          }
        }
        if (more) {
          // The other buffer was last read before the previous iteration's barrier.
          la.store(sm.a[cur ^ 1], ra);
          lb.store(sm.b[cur ^ 1], rb);
        }
        __syncthreads();
      }

#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int64_t gi = row0 + wm * 64 + (i / 4) * 32 + tm * 4 + i % 4;
        if (gi >= p.m) continue;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int64_t gj = col0 + wn * 32 + (j / 4) * 16 + tn * 4 + j % 4;
          if (gj < p.n) gemm_finish(p, z, gi, gj, acc[i][j]);
        }
      }
    }
  }
}

}  // namespace

bool gemm_sgemm_large(const GemmArgs& g, cudaStream_t stream) {
  if (g.dtype != DType::f32 || g.k == 0) return false;
  // 16-byte loads need every row (and every batch) of A and B to start 16-byte aligned.
  if (!aligned16(g.a) || !aligned16(g.b) || g.lda % 4 || g.ldb % 4) return false;
  if (g.batch > 1 && (g.stride_a % 4 || g.stride_b % 4)) return false;
  int device = 0;
  SINTER_CUDA_CHECK(cudaGetDevice(&device));
  const int64_t tiles_m = (g.m + kBM - 1) / kBM, tiles_n = (g.n + kBN - 1) / kBN;
  // Fewer 128 x 128 tiles than SMs leaves the GPU idle: the 64 x 64 kernel spreads wider.
  if (tiles_m * tiles_n * g.batch < device_sm_count(device) || tiles_m > INT32_MAX) return false;
  const GemmParams<float> p = gemm_params<float>(g);
  const dim3 grid(static_cast<unsigned>(tiles_m),
                  static_cast<unsigned>(std::min<int64_t>(tiles_n, 65535)),
                  static_cast<unsigned>(std::min<int64_t>(g.batch, 65535)));
  if (g.trans_a) {
    if (g.trans_b) {
      sgemm_large_kernel<true, true><<<grid, kThreads, 0, stream>>>(p);
    } else {
      sgemm_large_kernel<true, false><<<grid, kThreads, 0, stream>>>(p);
    }
  } else if (g.trans_b) {
    sgemm_large_kernel<false, true><<<grid, kThreads, 0, stream>>>(p);
  } else {
    sgemm_large_kernel<false, false><<<grid, kThreads, 0, stream>>>(p);
  }
  SINTER_LAUNCH_CHECK("sgemm_large_kernel");
  return true;
}

}  // namespace sinter::cudak

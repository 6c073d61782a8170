// Tensor-core GEMM on mma.sync (sm_80 and newer): bf16 and f16 through m16n8k16, f32 as TF32
// through m16n8k8, fed by a multi-stage cp.async pipeline in dynamic shared memory, with f32
// accumulators and the shared epilogue gemm_finish.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "cuda_check.cuh"
#include "device_info.cuh"
#include "gemm_common.cuh"
#include "mma.cuh"

namespace sinter::cudak {
namespace {

constexpr int kThreads = 256;  // 8 warps, 2 along m by 4 along n

// Copies the (kRows, kCols) tile whose element (r, c) is g[(row0 + r) * ld + col0 + c] into s
// (row stride kLdS), zero-filling what lies outside rows x cols: a chunk that straddles the column
// edge copies only its in-range bytes.
template <typename T, int kRows, int kCols, int kLdS>
__device__ __forceinline__ void load_tile_async(T* s, const T* g, int64_t ld, int64_t row0,
                                                int64_t col0, int64_t rows, int64_t cols) {
  constexpr int kChunks = kRows * kCols / (16 / static_cast<int>(sizeof(T)));
  static_assert(kChunks % kThreads == 0, "every thread copies the same number of chunks");
#pragma unroll
  for (int l = 0; l < kChunks / kThreads; ++l) {
    const mma::Chunk ch = mma::tile_chunk<T, kCols>(static_cast<int>(threadIdx.x) + l * kThreads);
    const int64_t gr = row0 + ch.r, gc = col0 + ch.c;
    const int bytes = mma::chunk_bytes<T>(gr, gc, rows, cols);
    // A valid address even when nothing is read.
    mma::cp_async16(s + ch.r * kLdS + ch.c, bytes > 0 ? g + gr * ld + gc : g, bytes);
  }
}

// grid: x over output tiles (grouped by 8 tile rows so neighbouring blocks share A and B in L2), z
// over the batch; both stride when the grid is capped. Warp w owns the (kWM, kWN) sub-tile at
// rows (w / 4) * kWM, columns (w % 4) * kWN of the block tile.
template <typename T, int kBM, int kBN, bool kTransA, bool kTransB>
__global__ void __launch_bounds__(kThreads)
    gemm_mma_kernel(GemmParams<T> p, int64_t tiles_m, int64_t tiles_n) {
  using Cfg = mma::MmaTile<T, kBM, kBN, kTransA, kTransB>;
  constexpr int kBK = Cfg::kBK, kStages = Cfg::kStages, kMI = Cfg::kMI, kNI = Cfg::kNI;
  constexpr int kLdA = Cfg::kLdA, kLdB = Cfg::kLdB;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* const smem = reinterpret_cast<T*>(smem_raw);

  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int wm0 = Cfg::warp_m0(warp), wn0 = Cfg::warp_n0(warp);
  const int64_t k_tiles = (p.k + kBK - 1) / kBK, tiles = tiles_m * tiles_n;

  for (int64_t z = blockIdx.z; z < p.batch; z += gridDim.z) {
    const T* a = p.a + z * p.stride_a;
    const T* b = p.b + z * p.stride_b;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const mma::TilePos tp = mma::tile_at(tile, tiles_m, tiles_n);
      const int64_t m0 = tp.tm * kBM, n0 = tp.tn * kBN;

      // Stage s holds A's tile then B's tile of k step kt.
      auto load_stage = [&](int s, int64_t kt) {
        T* sa = smem + s * Cfg::kStageElems;
        T* sb = sa + Cfg::kSizeA;
        const int64_t k0 = kt * kBK;
        if constexpr (kTransA) {  // op(A)(i, q) = a[q * lda + i]
          load_tile_async<T, kBK, kBM, kLdA>(sa, a, p.lda, k0, m0, p.k, p.m);
        } else {  // a[i * lda + q]
          load_tile_async<T, kBM, kBK, kLdA>(sa, a, p.lda, m0, k0, p.m, p.k);
        }
        if constexpr (kTransB) {  // op(B)(q, j) = b[j * ldb + q]
          load_tile_async<T, kBN, kBK, kLdB>(sb, b, p.ldb, n0, k0, p.n, p.k);
        } else {  // b[q * ldb + j]
          load_tile_async<T, kBK, kBN, kLdB>(sb, b, p.ldb, k0, n0, p.k, p.n);
        }
      };

      float acc[kMI][kNI][4] = {};

      // One commit per stage slot, empty or not, so wait_group counts line up with k steps.
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles) load_stage(s, s);
        mma::cp_async_commit();
      }

      for (int64_t kt = 0; kt < k_tiles; ++kt) {
        // kStages - 1 + kt groups are committed; all but the newest kStages - 2 are complete, so
        // step kt has landed. The barrier also tells every warp that the slot step kt - 1 used,
        // which the prefetch below overwrites, has been read.
        mma::cp_async_wait<kStages - 2>();
        __syncthreads();
        if (kt + kStages - 1 < k_tiles) {
          load_stage(static_cast<int>((kt + kStages - 1) % kStages), kt + kStages - 1);
        }
        mma::cp_async_commit();

        const T* sa = smem + static_cast<int>(kt % kStages) * Cfg::kStageElems;
        const T* sb = sa + Cfg::kSizeA;
        mma::warp_mma_tile<T, kMI, kNI, kBK, kTransA, kTransB, kLdA, kLdB>(acc, sa, sb, wm0, wn0,
                                                                           lane);
      }
      // Drain the (empty) trailing groups and let every warp finish reading before the next
      // tile's prologue refills the stages.
      mma::cp_async_wait<0>();
      __syncthreads();

      mma::for_each_acc(acc, wm0, wn0, lane, [&](int r, int c, float v) {
        const int64_t i = m0 + r, j = n0 + c;
        if (i < p.m && j < p.n) gemm_finish(p, z, i, j, v);
      });
    }
  }
}

constexpr int kMaxDevices = 64;  // devices whose shared-memory opt-in is remembered

template <typename T, int kBM, int kBN, bool kTransA, bool kTransB>
void launch(const GemmArgs& g, int dev, cudaStream_t stream) {
  using Cfg = mma::MmaTile<T, kBM, kBN, kTransA, kTransB>;
  auto* kernel = gemm_mma_kernel<T, kBM, kBN, kTransA, kTransB>;
  // The dynamic shared memory exceeds the 48 KiB default, which each device must allow once.
  static std::atomic<uint64_t> opted_in{0};
  const uint64_t bit = dev < kMaxDevices ? uint64_t{1} << dev : 0;
  if (bit == 0 || !(opted_in.load(std::memory_order_relaxed) & bit)) {
    SINTER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(Cfg::kSmemBytes)));
    opted_in.fetch_or(bit, std::memory_order_relaxed);
  }
  const int64_t tiles_m = (g.m + kBM - 1) / kBM, tiles_n = (g.n + kBN - 1) / kBN;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(tiles_m * tiles_n, INT32_MAX)), 1,
                  static_cast<unsigned>(std::min<int64_t>(g.batch, 65535)));
  kernel<<<grid, kThreads, Cfg::kSmemBytes, stream>>>(gemm_params<T>(g), tiles_m, tiles_n);
  SINTER_LAUNCH_CHECK("gemm_mma_kernel");
}

template <typename T, int kBM, int kBN>
void launch_layout(const GemmArgs& g, int dev, cudaStream_t stream) {
  if (g.trans_a) {
    if (g.trans_b) return launch<T, kBM, kBN, true, true>(g, dev, stream);
    return launch<T, kBM, kBN, true, false>(g, dev, stream);
  }
  if (g.trans_b) return launch<T, kBM, kBN, false, true>(g, dev, stream);
  return launch<T, kBM, kBN, false, false>(g, dev, stream);
}

// 128x128 tiles, unless that grid would leave SMs idle; then 64x64 tiles (four times the blocks).
template <typename T>
void launch_typed(const GemmArgs& g, int dev, int sms, cudaStream_t stream) {
  const int64_t big_tiles = ((g.m + 127) / 128) * ((g.n + 127) / 128) * g.batch;
  if (big_tiles < sms) return launch_layout<T, 64, 64>(g, dev, stream);
  return launch_layout<T, 128, 128>(g, dev, stream);
}

}  // namespace

bool gemm_mma(const GemmArgs& g, cudaStream_t stream) {
  if (g.dtype != DType::bf16 && g.dtype != DType::f16 && g.dtype != DType::f32) return false;
  if (g.dtype == DType::f32 && !g.allow_tf32) return false;
  // cp.async moves 16 bytes from 16-byte aligned addresses: every row and batch start of A and B
  // must be one. C goes through the scalar epilogue and needs nothing.
  const int64_t es = g.dtype == DType::f32 ? 4 : 2;
  if (!aligned16(g.a) || !aligned16(g.b) || (g.lda * es) % 16 != 0 || (g.ldb * es) % 16 != 0) {
    return false;
  }
  if (g.batch > 1 && ((g.stride_a * es) % 16 != 0 || (g.stride_b * es) % 16 != 0)) return false;
  int dev = 0;
  SINTER_CUDA_CHECK(cudaGetDevice(&dev));
  if (device_compute_capability(dev) < 80) return false;
  const int sms = device_sm_count(dev);
  if (g.m == 0 || g.n == 0 || g.batch == 0) return true;
  switch (g.dtype) {
    case DType::bf16:
      launch_typed<__nv_bfloat16>(g, dev, sms, stream);
      break;
    case DType::f16:
      launch_typed<__half>(g, dev, sms, stream);
      break;
    default:
      launch_typed<float>(g, dev, sms, stream);
      break;
  }
  return true;
}

}  // namespace sinter::cudak

// The Hopper GEMM (sm_90a) for bf16, f16 and TF32: wgmma reads both operands from shared memory,
// filled by TMA through a ring of mbarrier-guarded stages; one producer warpgroup loads while two
// consumer warpgroups multiply, on persistent blocks that walk the output tiles.
//
// Note [wgmma operand layouts]
// A block computes a 128 x BN tile of C (BN = 128 or 256); consumer warpgroup w owns rows
// 64w..64w+63 and issues m64nBNk16 (k8 for TF32) wgmmas. Each stage holds a 128 x BK tile of op(A)
// and a BN x BK tile of op(B), BK being 128 bytes of k (64 16-bit elements, 32 TF32). Everything is
// in the 128-byte swizzle that TMA writes and wgmma reads; swizzle atoms are 8 rows of 128 bytes (1
// KiB), so every tile starts 1 KiB aligned.
// - K-major operand (A not transposed, or B transposed: k contiguous in memory): one TMA box of
//   (BK, rows); row r of the tile is 128 bytes at r * 128. Descriptor: SBO = 1024 (next 8 rows),
//   LBO unused; the k-th 16-element step starts 32 bytes further (the hardware applies the swizzle
//   to the final address).
// - MN-major operand (A transposed, B not: m or n contiguous): boxes of (64, BK), 64 elements of
//   m or n by BK rows of k, one per 64 columns. Descriptor: SBO = 1024 (next 8 k rows), LBO =
//   BK * 128 (next 64 columns); the k-th step starts 16 * 128 bytes further. wgmma reads it with
//   its transpose flag, which exists for 16-bit types only: TF32 needs both operands K-major, and
//   the other layouts go to the mma.sync kernels.
// Out-of-range rows and columns (ragged m, n, k) come in as zeros from TMA; the epilogue masks
// them. The boxes, descriptors and schedule are kernels/wgmma_layout.h's, which the CPU suite
// replays against the PTX ISA's layouts (tests/test_wgmma_layout.cpp).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <type_traits>

#include "cuda_check.cuh"
#include "device_info.cuh"
#include "gemm_common.cuh"
#include "wgmma_layout.h"
#include "wgmma_ptx.cuh"

namespace sinter::cudak {
namespace {

// TF32 operands are stored as float; this tag selects the TF32 instruction.
struct Tf32 {};
template <typename T>
using Storage = std::conditional_t<std::is_same_v<T, Tf32>, float, T>;

using wgmma::kBKBytes;
using wgmma::kBM;
template <typename T>
constexpr int kBK = kBKBytes / static_cast<int>(sizeof(Storage<T>));
template <typename T>
constexpr int kInstrK = std::is_same_v<T, Tf32> ? 8 : 16;

using wgmma::kStages;
template <int kBN>
constexpr int kStageBytes = (kBM + kBN) * kBKBytes;
template <int kBN>
constexpr size_t kSmemBytes = 1024 /* alignment slack */ + size_t(kStages<kBN>) * kStageBytes<kBN> +
                              2 * kStages<kBN> * sizeof(uint64_t);

// ---- the bf16, f16 and TF32 wgmmas (the shared PTX wrappers are kernels/wgmma_ptx.cuh's) ----

#ifdef SINTER_SM90A

// d (64 x kBN, the m64nNk16 accumulator fragment) += A(desc_a) @ B(desc_b). kTransA / kTransB:
// the operand is MN-major (16-bit types only).
template <typename T, int kBN, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma(float (&d)[kBN / 2], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (kBN == 128 && std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" SINTER_WGMMA_R64
        "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
        : SINTER_WGMMA_D64
        : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransA), "n"(kTransB));
  } else if constexpr (kBN == 128 && std::is_same_v<T, __half>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" SINTER_WGMMA_R64
        "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
        : SINTER_WGMMA_D64
        : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransA), "n"(kTransB));
  } else if constexpr (kBN == 128) {
    static_assert(std::is_same_v<T, Tf32> && !kTransA && !kTransB);
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {" SINTER_WGMMA_R64
        "}, %64, %65, p, 1, 1;\n}\n"
        : SINTER_WGMMA_D64
        : "l"(desc_a), "l"(desc_b), "r"(1));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" SINTER_WGMMA_R128
        "}, %128, %129, p, 1, 1, %131, %132;\n}\n"
        : SINTER_WGMMA_D128
        : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransA), "n"(kTransB));
  } else if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {" SINTER_WGMMA_R128
        "}, %128, %129, p, 1, 1, %131, %132;\n}\n"
        : SINTER_WGMMA_D128
        : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransA), "n"(kTransB));
  } else {
    static_assert(std::is_same_v<T, Tf32> && !kTransA && !kTransB);
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {" SINTER_WGMMA_R128
        "}, %128, %129, p, 1, 1;\n}\n"
        : SINTER_WGMMA_D128
        : "l"(desc_a), "l"(desc_b), "r"(1));
  }
}

#endif  // SINTER_SM90A

struct WgmmaShape {
  int tiles_m, tiles_n, kblocks;
  int64_t tiles;
  bool batch_a, batch_b;  // the operand has a batch dim in its tensor map (stride != 0)
};

// kTransA: A is MN-major (GemmArgs.trans_a); kTransB: B is MN-major (GemmArgs.trans_b false).
template <typename T, int kBN, int kTransA, int kTransB>
__global__ void __launch_bounds__(kWgmmaThreads, 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap map_a,
                      const __grid_constant__ CUtensorMap map_b, GemmParams<Storage<T>> p,
                      WgmmaShape shape) {
#ifdef SINTER_SM90A
  constexpr int kBK = sinter::cudak::kBK<T>;
  constexpr int kS = kStages<kBN>;
  constexpr uint32_t kABytes = kBM * kBKBytes, kBBytes = kBN * kBKBytes;
  constexpr int kElemBytes = static_cast<int>(sizeof(Storage<T>));
  extern __shared__ uint8_t smem_raw[];
  const StageSmem st = stage_smem<kS>(smem_raw, kABytes, kBBytes);
  uint8_t* tiles_a = st.tiles_a;
  uint8_t* tiles_b = st.tiles_b;
  uint64_t* full = st.full;
  uint64_t* empty = st.empty;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;

  if (wg == 0) {
    // Producer: one thread issues every TMA; the rest of the warpgroup gives its registers away.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegisters));
    if (tid != 0) return;
    wgmma::Ring ring;  // Note [wgmma stage ring]
    for (int64_t t = blockIdx.x; t < shape.tiles; t += gridDim.x) {
      const wgmma::TileCoord c = wgmma::tile_coord(t, shape.tiles_m, shape.tiles_n);
      const int m0 = c.tm * kBM, n0 = c.tn * kBN;
      const int za = shape.batch_a ? c.z : 0, zb = shape.batch_b ? c.z : 0;
      for (int kb = 0; kb < shape.kblocks; ++kb) {
        const int k0 = kb * kBK;
        const int s = ring.s;
        mbar_wait(&empty[s], ring.empty_parity());
        mbar_expect_tx(&full[s], wgmma::kStageTxBytes<kBN>);
        uint8_t* da = tiles_a + size_t(s) * kABytes;
        uint8_t* db = tiles_b + size_t(s) * kBBytes;
        for (int h = 0; h < wgmma::boxes(kTransA, kBM); ++h) {
          const wgmma::Box b = wgmma::tile_box<kBK>(kTransA, kBM, h, m0, k0);
          tma_load(da + b.offset, &map_a, &full[s], b.c0, b.c1, za);
        }
        for (int h = 0; h < wgmma::boxes(kTransB, kBN); ++h) {
          const wgmma::Box b = wgmma::tile_box<kBK>(kTransB, kBN, h, n0, k0);
          tma_load(db + b.offset, &map_b, &full[s], b.c0, b.c1, zb);
        }
        ring.next<kS>();
      }
    }
    return;
  }

  // Consumers.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegisters));
  const int w = wg - 1;  // rows 64w..64w+63 of the block tile
  const int lane = tid % 32;
  wgmma::Ring ring;
  float d[kBN / 2];
  const bool pairs_aligned = gemm_pairs_aligned(p);
  for (int64_t t = blockIdx.x; t < shape.tiles; t += gridDim.x) {
    const wgmma::TileCoord c = wgmma::tile_coord(t, shape.tiles_m, shape.tiles_n);
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) d[i] = 0.f;
    int prev = -1;
    for (int kb = 0; kb < shape.kblocks; ++kb) {
      const int s = ring.s;
      mbar_wait(&full[s], ring.full_parity());
      const uint8_t* ta = tiles_a + size_t(s) * kABytes;
      const uint8_t* tb = tiles_b + size_t(s) * kBBytes;
      fence_accumulators(d);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / kInstrK<T>; ++kk) {
        // The kk-th k step (Note [wgmma operand layouts]).
        const uint64_t desc_a =
            operand_desc(ta, wgmma::operand_a<kBK, kInstrK<T>, kElemBytes>(kTransA, w, kk));
        const uint64_t desc_b =
            operand_desc(tb, wgmma::operand_b<kBK, kInstrK<T>, kElemBytes>(kTransB, kk));
        wgmma<T, kBN, kTransA, kTransB>(d, desc_a, desc_b);
      }
      wgmma_commit();
      // The group issued before this one has finished: its stage can be refilled.
      wgmma_wait<1>();
      fence_accumulators(d);
      if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);
      prev = s;
      ring.next<kS>();
    }
    wgmma_wait<0>();
    fence_accumulators(d);
    if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);

      // d[i] and d[i + 1] (even i): a pair of adjacent columns (wgmma::acc_pos).
#pragma unroll
    for (int i = 0; i < kBN / 2; i += 2) {
      const wgmma::AccPos pos = wgmma::acc_pos(w, tid, i);
      const int64_t gi = int64_t(c.tm) * kBM + pos.row, gj = int64_t(c.tn) * kBN + pos.col;
      if (gi < p.m && gj < p.n) gemm_finish_pair(p, c.z, gi, gj, d[i], d[i + 1], pairs_aligned);
    }
  }
#else
  (void)map_a;
  (void)map_b;
  (void)p;
  (void)shape;
#endif
}

// ---- host side ----

template <typename T, int kBN, int kTransA, int kTransB>
bool launch(const GemmArgs& g, int device, cudaStream_t stream) {
  using S = Storage<T>;
  constexpr int kBK = sinter::cudak::kBK<T>;
  const bool batch_a = g.batch > 1 && g.stride_a != 0, batch_b = g.batch > 1 && g.stride_b != 0;
  // A stored (m, k) when K-major, (k, m) when MN-major; B stored (n, k) K-major, (k, n) MN-major.
  CUtensorMap map_a, map_b;
  constexpr int kElem = static_cast<int>(sizeof(S));
  const CUtensorMapDataType type = std::is_same_v<S, float> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : std::is_same_v<S, __nv_bfloat16>
                                       ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                       : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const bool mapped_a = make_map(
      &map_a, g.a,
      wgmma::operand_map<kBK>(kTransA, kBM, g.m, g.k, g.batch, g.lda, g.stride_a, kElem), type);
  const bool mapped_b = make_map(
      &map_b, g.b,
      wgmma::operand_map<kBK>(kTransB, kBN, g.n, g.k, g.batch, g.ldb, g.stride_b, kElem), type);
  if (!mapped_a || !mapped_b) return false;
  WgmmaShape shape;
  shape.tiles_m = static_cast<int>((g.m + kBM - 1) / kBM);
  shape.tiles_n = static_cast<int>((g.n + kBN - 1) / kBN);
  shape.kblocks = static_cast<int>((g.k + kBK - 1) / kBK);
  shape.tiles = int64_t(shape.tiles_m) * shape.tiles_n * g.batch;
  shape.batch_a = batch_a;
  shape.batch_b = batch_b;

  auto kernel = gemm_wgmma_kernel<T, kBN, kTransA, kTransB>;
  static std::atomic<uint64_t> configured{0};  // devices whose shared-memory limit is raised
  const uint64_t bit = device < 64 ? uint64_t(1) << device : 0;
  if (!bit || !(configured.load() & bit)) {
    // Per Note [wgmma registers], with fewer than kWgmmaRegisters and the consumers would wait
    // forever.
    cudaFuncAttributes attr{};
    SINTER_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    if (attr.numRegs < kWgmmaRegisters) return false;
    SINTER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(kSmemBytes<kBN>)));
    configured.fetch_or(bit);
  }
  const int blocks = static_cast<int>(std::min<int64_t>(shape.tiles, device_sm_count(device)));
  kernel<<<blocks, kWgmmaThreads, kSmemBytes<kBN>, stream>>>(map_a, map_b, gemm_params<S>(g),
                                                             shape);
  SINTER_LAUNCH_CHECK("gemm_wgmma_kernel");
  return true;
}

template <typename T, int kBN>
bool launch_layout(const GemmArgs& g, int device, cudaStream_t stream) {
  // wgmma's transpose flags: A is MN-major when transposed, B when not transposed.
  if constexpr (std::is_same_v<T, Tf32>) {
    return launch<T, kBN, 0, 0>(g, device, stream);
  } else {
    if (g.trans_a) {
      if (g.trans_b) return launch<T, kBN, 1, 0>(g, device, stream);
      return launch<T, kBN, 1, 1>(g, device, stream);
    }
    if (g.trans_b) return launch<T, kBN, 0, 0>(g, device, stream);
    return launch<T, kBN, 0, 1>(g, device, stream);
  }
}

template <typename T>
bool launch_typed(const GemmArgs& g, int device, cudaStream_t stream) {
  // 128 x 256 tiles when they still fill the GPU, else 128 x 128.
  const int64_t tiles256 = ((g.m + kBM - 1) / kBM) * ((g.n + 255) / 256) * g.batch;
  if (g.n > 128 && tiles256 >= device_sm_count(device))
    return launch_layout<T, 256>(g, device, stream);
  return launch_layout<T, 128>(g, device, stream);
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

// Never launched: which of this file's device codes the device runs shows in the static shared
// memory of the probe, read with cudaFuncGetAttributes, which launches nothing and so is allowed
// while a stream is being captured (a launch on the legacy stream and a synchronous copy are not).
namespace {
constexpr int kSm90aMarkerInts = 64;
__global__ void sm90a_probe_kernel(int* out) {
#ifdef SINTER_SM90A
  __shared__ int marker[kSm90aMarkerInts];
#else
  __shared__ int marker[1];
#endif
  // Used, so that the array is kept.
  marker[threadIdx.x % (sizeof(marker) / sizeof(int))] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = marker[(threadIdx.x + 1) % (sizeof(marker) / sizeof(int))];
}
}  // namespace

// Whether this device runs the sm_90a code of this library: compute capability 9.0 and a build
// that includes 90a in SINTER_CUDA_ARCHITECTURES. Asked once per device; threads that race on the
// first ask both compute the same answer.
bool sm90a_available(int device) {
  constexpr int kCached = 64;
  static std::atomic<int> cache[kCached];  // 0 unknown, 1 yes, 2 no
  const bool cacheable = device >= 0 && device < kCached;
  if (cacheable) {
    const int v = cache[device].load(std::memory_order_relaxed);
    if (v) return v == 1;
  }
  bool ok = false;
  if (device_compute_capability(device) == 90) {
    DeviceGuard guard(device);
    cudaFuncAttributes attr{};
    SINTER_CUDA_CHECK(cudaFuncGetAttributes(&attr, sm90a_probe_kernel));
    ok = attr.sharedSizeBytes == kSm90aMarkerInts * sizeof(int);
  }
  if (cacheable) cache[device].store(ok ? 1 : 2, std::memory_order_relaxed);
  return ok;
}

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    SINTER_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
                                                       cudaEnableDefault, &q));
    SINTER_CHECK(q == cudaDriverEntryPointSuccess && f,
                 "gemm: the CUDA driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// The 3-D tensor map of one operand (wgmma::operand_map) of element type `type`. False when the
// driver refuses the layout (the caller falls back to another kernel family).
bool make_map(CUtensorMap* map, const void* base, const wgmma::OperandMap& m,
              CUtensorMapDataType type) {
  const cuuint64_t dims[3] = {m.dims[0], m.dims[1], m.dims[2]};
  const cuuint64_t strides[2] = {m.strides[0], m.strides[1]};
  const cuuint32_t box[3] = {m.box[0], m.box[1], m.box[2]};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r =
      encode_tiled_fn()(map, type, 3, const_cast<void*>(base), dims, strides, box, elem_strides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

bool gemm_wgmma(const GemmArgs& g, cudaStream_t stream) {
  if (g.k == 0) return false;
  const bool tf32 = g.dtype == DType::f32 && g.allow_tf32;
  if (!tf32 && g.dtype != DType::bf16 && g.dtype != DType::f16) return false;
  // TF32 has no transpose flag: both operands must be K-major.
  if (tf32 && (g.trans_a || !g.trans_b)) return false;
  const int64_t es = tf32 ? 4 : 2;
  // TMA: 16-byte aligned bases, row and batch strides in multiples of 16 bytes, int32 coordinates.
  if (!aligned(g.a, 16) || !aligned(g.b, 16) || (g.lda * es) % 16 || (g.ldb * es) % 16)
    return false;
  if (g.batch > 1 && ((g.stride_a * es) % 16 || (g.stride_b * es) % 16)) return false;
  if (g.m > INT32_MAX / 2 || g.n > INT32_MAX / 2 || g.k > INT32_MAX / 2 || g.batch > INT32_MAX)
    return false;
  int device = 0;
  SINTER_CUDA_CHECK(cudaGetDevice(&device));
  if (!sm90a_available(device)) return false;
  if (tf32) return launch_typed<Tf32>(g, device, stream);
  if (g.dtype == DType::bf16) return launch_typed<__nv_bfloat16>(g, device, stream);
  return launch_typed<__half>(g, device, stream);
}

}  // namespace sinter::cudak

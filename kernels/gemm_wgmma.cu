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

namespace sinter::cudak {
namespace {

// TF32 operands are stored as float; this tag selects the TF32 instruction.
struct Tf32 {};
template <typename T>
using Storage = std::conditional_t<std::is_same_v<T, Tf32>, float, T>;

using wgmma::kBKBytes;
using wgmma::kBM;
constexpr int kThreads = 384;  // warpgroup 0 produces, 1 and 2 consume
static_assert(kThreads == 128 + 32 * wgmma::kConsumerWarps);

// Note [wgmma registers]
// setmaxnreg moves registers between the warpgroups inside the block's allocation: the producer
// gives its own down to kProducerRegisters and each consumer warpgroup takes kConsumerRegisters,
// which needs kWgmmaRegisters per thread at launch, or the consumers' request would wait forever.
// __launch_bounds__(kThreads, 1) lets ptxas allocate 65536 / 384, rounded down to 8: 168. The
// launcher refuses a kernel that got fewer (the GEMM then takes another kernel family), and
// CheckKernels (scripts/check_kernels.sh, check (c)) fails on any count but kWgmmaRegisters, so
// that a toolkit allocating otherwise cannot turn the wgmma path off without a failing test. The
// scripts read the value from the line below.
constexpr int kWgmmaRegisters = 168;
constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;
static_assert(kProducerRegisters * 128 + kConsumerRegisters * 256 == kWgmmaRegisters * kThreads);
static_assert(kWgmmaRegisters == 65536 / kThreads / 8 * 8);
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

// ---- PTX wrappers, compiled for sm_90a only (the host launches these kernels nowhere else) ----

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SINTER_SM90A 1
#endif

#ifdef SINTER_SM90A

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Waits until the phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// TMA: the box at (c0, c1, c2) of the tensor map into shared memory, completing on bar.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0,
                                         int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar))
      : "memory");
}

// The descriptor of operand o of a stage's tile at `tile` (wgmma::smem_desc).
__device__ __forceinline__ uint64_t operand_desc(const uint8_t* tile, wgmma::Operand o) {
  return wgmma::smem_desc(smem_addr(tile + o.offset), o.lbo, o.sbo);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmmas.
template <int kN>
__device__ __forceinline__ void fence_accumulators(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define SINTER_WGMMA_R64                                                             \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "           \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define SINTER_WGMMA_R128                                                                      \
  SINTER_WGMMA_R64                                                                             \
  ", "                                                                                         \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "           \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "           \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "     \
  "%111, "                                                                                     \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, " \
  "%127"
#define SINTER_WGMMA_D64                                                                          \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),  \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),  \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),  \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),  \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define SINTER_WGMMA_D128                                                                         \
  SINTER_WGMMA_D64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), \
      "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),  \
      "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),  \
      "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),  \
      "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),  \
      "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),           \
      "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),         \
      "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),         \
      "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),         \
      "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

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

#undef SINTER_WGMMA_R64
#undef SINTER_WGMMA_R128
#undef SINTER_WGMMA_D64
#undef SINTER_WGMMA_D128

#endif  // SINTER_SM90A

struct WgmmaShape {
  int tiles_m, tiles_n, kblocks;
  int64_t tiles;
  bool batch_a, batch_b;  // the operand has a batch dim in its tensor map (stride != 0)
};

// kTransA: A is MN-major (GemmArgs.trans_a); kTransB: B is MN-major (GemmArgs.trans_b false).
template <typename T, int kBN, int kTransA, int kTransB>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap map_a,
                      const __grid_constant__ CUtensorMap map_b, GemmParams<Storage<T>> p,
                      WgmmaShape shape) {
#ifdef SINTER_SM90A
  constexpr int kBK = sinter::cudak::kBK<T>;
  constexpr int kS = kStages<kBN>;
  constexpr uint32_t kABytes = kBM * kBKBytes, kBBytes = kBN * kBKBytes;
  constexpr int kElemBytes = static_cast<int>(sizeof(Storage<T>));
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* tiles_a = smem;                         // kS x kABytes
  uint8_t* tiles_b = smem + size_t(kS) * kABytes;  // kS x kBBytes
  auto* full = reinterpret_cast<uint64_t*>(tiles_b + size_t(kS) * kBBytes);
  uint64_t* empty = full + kS;

  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kS; ++s) {
      // The stage barriers of Note [wgmma stage ring] in kernels/wgmma_layout.h.
      mbar_init(&full[s], wgmma::kFullArrivals);
      mbar_init(&empty[s], wgmma::kEmptyArrivals);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

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

// Never launched: which of this file's device codes the device runs shows in the static shared
// memory of the probe, read with cudaFuncGetAttributes, which launches nothing and so is allowed
// while a stream is being captured (a launch on the legacy stream and a synchronous copy are not).
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

// The 3-D tensor map of one operand (wgmma::operand_map). False when the driver refuses the layout
// (the caller falls back to another kernel family).
template <typename S>
bool make_map(CUtensorMap* map, const void* base, const wgmma::OperandMap& m) {
  const CUtensorMapDataType type = std::is_same_v<S, float> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : std::is_same_v<S, __nv_bfloat16>
                                       ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                       : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
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

template <typename T, int kBN, int kTransA, int kTransB>
bool launch(const GemmArgs& g, int device, cudaStream_t stream) {
  using S = Storage<T>;
  constexpr int kBK = sinter::cudak::kBK<T>;
  const bool batch_a = g.batch > 1 && g.stride_a != 0, batch_b = g.batch > 1 && g.stride_b != 0;
  // A stored (m, k) when K-major, (k, m) when MN-major; B stored (n, k) K-major, (k, n) MN-major.
  CUtensorMap map_a, map_b;
  constexpr int kElem = static_cast<int>(sizeof(S));
  const bool mapped_a = make_map<S>(
      &map_a, g.a,
      wgmma::operand_map<kBK>(kTransA, kBM, g.m, g.k, g.batch, g.lda, g.stride_a, kElem));
  const bool mapped_b = make_map<S>(
      &map_b, g.b,
      wgmma::operand_map<kBK>(kTransB, kBN, g.n, g.k, g.batch, g.ldb, g.stride_b, kElem));
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
  kernel<<<blocks, kThreads, kSmemBytes<kBN>, stream>>>(map_a, map_b, gemm_params<S>(g), shape);
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

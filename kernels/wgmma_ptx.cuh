// What the Hopper kernels (kernels/gemm_wgmma.cu, kernels/gemm_fp8.cu) share: the PTX wrappers of
// mbarriers, TMA and wgmma's fences, compiled for sm_90a only (the host launches those kernels
// nowhere else), the accumulator operand lists of the m64n128 and m64n256 wgmmas, and the host's
// checks and tensor maps.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "wgmma_layout.h"

namespace sinter::cudak {

constexpr int kWgmmaThreads = 384;  // warpgroup 0 produces, 1 and 2 consume
static_assert(kWgmmaThreads == 128 + 32 * wgmma::kConsumerWarps);

// Note [wgmma registers]
// setmaxnreg moves registers between the warpgroups inside the block's allocation: the producer
// gives its own down to kProducerRegisters and each consumer warpgroup takes kConsumerRegisters,
// which needs kWgmmaRegisters per thread at launch, or the consumers' request would wait forever.
// __launch_bounds__(kWgmmaThreads, 1) lets ptxas allocate 65536 / 384, rounded down to 8: 168. The
// launcher refuses a kernel that got fewer (the GEMM then takes another kernel family), and
// CheckKernels (scripts/check_kernels.sh, check (c)) fails on any count but kWgmmaRegisters, so
// that a toolkit allocating otherwise cannot turn the wgmma path off without a failing test. The
// scripts read the value from the line below.
constexpr int kWgmmaRegisters = 168;
constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;
static_assert(kProducerRegisters * 128 + kConsumerRegisters * 256 ==
              kWgmmaRegisters * kWgmmaThreads);
static_assert(kWgmmaRegisters == 65536 / kWgmmaThreads / 8 * 8);

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

// A block's stages in dynamic shared memory, from its first 1024-byte boundary (the launch adds
// 1024 bytes of slack): kS A tiles, kS B tiles, then the full and empty mbarriers of each stage
// (Note [wgmma stage ring] in kernels/wgmma_layout.h), which thread 0 initializes before every
// thread of the block continues.
struct StageSmem {
  uint8_t* tiles_a;
  uint8_t* tiles_b;
  uint64_t* full;
  uint64_t* empty;
};
template <int kS>
__device__ __forceinline__ StageSmem stage_smem(uint8_t* smem_raw, uint32_t a_bytes,
                                                uint32_t b_bytes) {
  uint8_t* smem =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  StageSmem st;
  st.tiles_a = smem;
  st.tiles_b = smem + size_t(kS) * a_bytes;
  st.full = reinterpret_cast<uint64_t*>(st.tiles_b + size_t(kS) * b_bytes);
  st.empty = st.full + kS;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kS; ++s) {
      mbar_init(&st.full[s], wgmma::kFullArrivals);
      mbar_init(&st.empty[s], wgmma::kEmptyArrivals);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  return st;
}

#endif  // SINTER_SM90A

// Whether this device runs the sm_90a code of this library: compute capability 9.0 and a build
// that includes 90a in SINTER_CUDA_ARCHITECTURES. Asked once per device.
bool sm90a_available(int device);

// The driver's cuTensorMapEncodeTiled.
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled_fn();

// The 3-D tensor map of one operand (wgmma::operand_map) of element type `type`, with the 128-byte
// swizzle. False when the driver refuses the layout.
bool make_map(CUtensorMap* map, const void* base, const wgmma::OperandMap& m,
              CUtensorMapDataType type);

}  // namespace sinter::cudak

// The Hopper FP8 GEMM (sm_90a) of FP8 training (kern/fp8.h): wgmma with e4m3 or e5m2 operands
// from shared memory, filled by TMA through the same ring of stages as the bf16 GEMM
// (kernels/gemm_wgmma.cu: one producer warpgroup, two consumer warpgroups, persistent 128 x 128
// tiles).
//
// Note [fp8 wgmma]
// FP8 wgmma reads both operands K-major (it has no transpose flag for 8-bit types), so a and b
// come as (rows, k) with k contiguous, and a stage holds 128 bytes of k: 128 FP8 elements, four
// m64n128k32 steps, and exactly one block of the block recipe's scales (kFp8ScaleBlock). The
// tensor cores' FP8 accumulation keeps fewer bits than f32 (DeepSeek-V3 measures about 14), so
// each stage's four wgmmas go into a fresh partial accumulator that is then promoted into the f32
// accumulator: acc = acc + partial * (scale_inv_a * scale_inv_b) under the block recipe (the
// scales of the row's and the column's tiles for this block of k), acc = acc + partial otherwise,
// each operation rounded to f32 as Note [fp8 gemm] writes it (no fused multiply-add); the
// per-tensor scales multiply the sum in the epilogue. The partial is waited for (wgmma.wait_group
// 0) before its promotion, so a stage's wgmmas do not overlap the next stage's: the simple order,
// which a second partial accumulator could pipeline later. The operand layouts, boxes and
// descriptors are those of Note [wgmma operand layouts] with 1-byte elements and 32-element k
// steps, which tests/test_wgmma_layout.cpp replays.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "cuda_check.cuh"
#include "device_info.cuh"
#include "kern/fp8.h"
#include "sinter/core/error.h"
#include "wgmma_layout.h"
#include "wgmma_ptx.cuh"

namespace sinter::cudak {
namespace {

struct E4M3 {};
struct E5M2 {};

constexpr int kBN = 128;
constexpr int kBK = wgmma::kBKBytes;  // FP8 elements of k per stage
constexpr int kInstrK = 32;
constexpr int kS = wgmma::kStages<kBN>;
constexpr uint32_t kABytes = wgmma::kBM * wgmma::kBKBytes, kBBytes = kBN * wgmma::kBKBytes;
constexpr size_t kSmemBytes =
    1024 /* alignment slack */ + size_t(kS) * (kABytes + kBBytes) + 2 * kS * sizeof(uint64_t);
static_assert(kBK == kern::kFp8ScaleBlock, "a stage is one block of the block recipe's scales");

struct Fp8Params {
  void* out;
  int64_t m, n, k;
  const float* sa;
  const float* sb;
  int64_t a_tile_rows, b_tile_rows, scale_cols;
};

struct Fp8Shape {
  int tiles_m, tiles_n, kblocks;
  int64_t tiles;
};

#ifdef SINTER_SM90A

// d (64 x 128 accumulator fragment) += A(desc_a) @ B(desc_b), one k32 step of FP8 operands.
template <class TA, class TB>
__device__ __forceinline__ void wgmma_fp8(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
#define SINTER_WGMMA_FP8(ta, tb)                                                     \
  asm volatile(                                                                      \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                   \
      "wgmma.mma_async.sync.aligned.m64n128k32.f32." ta "." tb " {" SINTER_WGMMA_R64 \
      "}, %64, %65, p, 1, 1;\n}\n"                                                   \
      : SINTER_WGMMA_D64                                                             \
      : "l"(desc_a), "l"(desc_b), "r"(1))
  if constexpr (std::is_same_v<TA, E4M3> && std::is_same_v<TB, E4M3>) {
    SINTER_WGMMA_FP8("e4m3", "e4m3");
  } else if constexpr (std::is_same_v<TA, E5M2> && std::is_same_v<TB, E4M3>) {
    SINTER_WGMMA_FP8("e5m2", "e4m3");
  } else if constexpr (std::is_same_v<TA, E4M3> && std::is_same_v<TB, E5M2>) {
    SINTER_WGMMA_FP8("e4m3", "e5m2");
  } else {
    SINTER_WGMMA_FP8("e5m2", "e5m2");
  }
#undef SINTER_WGMMA_FP8
}

#endif  // SINTER_SM90A

template <class OutT>
__device__ __forceinline__ void store_out(const Fp8Params& p, int64_t i, int64_t j, float v) {
  OutT* out = static_cast<OutT*>(p.out) + i * p.n + j;
  if constexpr (std::is_same_v<OutT, float>) {
    *out = v;
  } else if constexpr (std::is_same_v<OutT, __nv_bfloat16>) {
    *out = __float2bfloat16_rn(v);
  } else {
    *out = __float2half_rn(v);
  }
}

template <class TA, class TB, class OutT>
__global__ void __launch_bounds__(kWgmmaThreads, 1)
    gemm_wgmma_kernel_fp8(const __grid_constant__ CUtensorMap map_a,
                          const __grid_constant__ CUtensorMap map_b, Fp8Params p, Fp8Shape shape) {
#ifdef SINTER_SM90A
  extern __shared__ uint8_t smem_raw[];
  const StageSmem st = stage_smem<kS>(smem_raw, kABytes, kBBytes);
  uint8_t* tiles_a = st.tiles_a;
  uint8_t* tiles_b = st.tiles_b;
  uint64_t* full = st.full;
  uint64_t* empty = st.empty;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;

  if (wg == 0) {
    // Producer: one thread issues every TMA; both operands K-major, one box each.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegisters));
    if (tid != 0) return;
    wgmma::Ring ring;
    for (int64_t t = blockIdx.x; t < shape.tiles; t += gridDim.x) {
      const wgmma::TileCoord c = wgmma::tile_coord(t, shape.tiles_m, shape.tiles_n);
      const int m0 = c.tm * wgmma::kBM, n0 = c.tn * kBN;
      for (int kb = 0; kb < shape.kblocks; ++kb) {
        const int s = ring.s;
        mbar_wait(&empty[s], ring.empty_parity());
        mbar_expect_tx(&full[s], wgmma::kStageTxBytes<kBN>);
        const wgmma::Box ba = wgmma::tile_box<kBK>(false, wgmma::kBM, 0, m0, kb * kBK);
        tma_load(tiles_a + size_t(s) * kABytes + ba.offset, &map_a, &full[s], ba.c0, ba.c1, 0);
        const wgmma::Box bb = wgmma::tile_box<kBK>(false, kBN, 0, n0, kb * kBK);
        tma_load(tiles_b + size_t(s) * kBBytes + bb.offset, &map_b, &full[s], bb.c0, bb.c1, 0);
        ring.next<kS>();
      }
    }
    return;
  }

  // Consumers: warpgroup w owns rows 64w..64w+63 of the block tile.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegisters));
  const int w = wg - 1;
  const int lane = tid % 32;
  const bool blockwise = p.scale_cols > 1;
  wgmma::Ring ring;
  float d[kBN / 2], part[kBN / 2];
  for (int64_t t = blockIdx.x; t < shape.tiles; t += gridDim.x) {
    const wgmma::TileCoord c = wgmma::tile_coord(t, shape.tiles_m, shape.tiles_n);
    const int64_t m0 = int64_t(c.tm) * wgmma::kBM, n0 = int64_t(c.tn) * kBN;
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) d[i] = 0.f;
    for (int kb = 0; kb < shape.kblocks; ++kb) {
      const int s = ring.s;
      mbar_wait(&full[s], ring.full_parity());
      const uint8_t* ta = tiles_a + size_t(s) * kABytes;
      const uint8_t* tb = tiles_b + size_t(s) * kBBytes;
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i) part[i] = 0.f;
      fence_accumulators(part);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / kInstrK; ++kk) {
        const uint64_t desc_a = operand_desc(ta, wgmma::operand_a<kBK, kInstrK, 1>(false, w, kk));
        const uint64_t desc_b = operand_desc(tb, wgmma::operand_b<kBK, kInstrK, 1>(false, kk));
        wgmma_fp8<TA, TB>(part, desc_a, desc_b);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_accumulators(part);
      if (lane == 0)
        mbar_arrive(&empty[s]);  // the stage is read: the producer may refill it
                                 // Promotion (Note [fp8 wgmma]).
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i) {
        if (blockwise) {
          const wgmma::AccPos pos = wgmma::acc_pos(w, tid, i);
          const float sa =
              kern::fp8_scale_at(p.sa, m0 + pos.row, p.m, p.a_tile_rows, p.scale_cols, kb);
          const float sb =
              kern::fp8_scale_at(p.sb, n0 + pos.col, p.n, p.b_tile_rows, p.scale_cols, kb);
          d[i] = __fadd_rn(d[i], __fmul_rn(part[i], __fmul_rn(sa, sb)));
        } else {
          d[i] = __fadd_rn(d[i], part[i]);
        }
      }
      ring.next<kS>();
    }
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) {
      const wgmma::AccPos pos = wgmma::acc_pos(w, tid, i);
      const int64_t gi = m0 + pos.row, gj = n0 + pos.col;
      if (gi >= p.m || gj >= p.n) continue;
      float v = d[i];
      if (!blockwise) {
        const float sa = kern::fp8_scale_at(p.sa, gi, p.m, p.a_tile_rows, 1, 0);
        const float sb = kern::fp8_scale_at(p.sb, gj, p.n, p.b_tile_rows, 1, 0);
        v = __fmul_rn(v, __fmul_rn(sa, sb));
      }
      store_out<OutT>(p, gi, gj, v);
    }
  }
#else
  (void)map_a;
  (void)map_b;
  (void)p;
  (void)shape;
#endif
}

template <class TA, class TB, class OutT>
void launch(const kern::Fp8GemmArgs& g, int device, cudaStream_t stream) {
  CUtensorMap map_a, map_b;
  const bool mapped_a =
      make_map(&map_a, g.a, wgmma::operand_map<kBK>(false, wgmma::kBM, g.m, g.k, 1, g.k, 0, 1),
               CU_TENSOR_MAP_DATA_TYPE_UINT8);
  const bool mapped_b =
      make_map(&map_b, g.b, wgmma::operand_map<kBK>(false, kBN, g.n, g.k, 1, g.k, 0, 1),
               CU_TENSOR_MAP_DATA_TYPE_UINT8);
  SINTER_CHECK(mapped_a && mapped_b, "fp8::gemm: the driver refused the tensor maps of a (", g.m,
               " x ", g.k, ") and b (", g.n, " x ", g.k, ")");
  Fp8Shape shape;
  shape.tiles_m = static_cast<int>((g.m + wgmma::kBM - 1) / wgmma::kBM);
  shape.tiles_n = static_cast<int>((g.n + kBN - 1) / kBN);
  shape.kblocks = static_cast<int>((g.k + kBK - 1) / kBK);
  shape.tiles = int64_t(shape.tiles_m) * shape.tiles_n;
  const Fp8Params p{g.out,         g.m,           g.n,           g.k,         g.a_scale_inv,
                    g.b_scale_inv, g.a_tile_rows, g.b_tile_rows, g.scale_cols};
  auto kernel = gemm_wgmma_kernel_fp8<TA, TB, OutT>;
  static std::atomic<uint64_t> configured{0};  // devices whose shared-memory limit is raised
  const uint64_t bit = device < 64 ? uint64_t(1) << device : 0;
  if (!bit || !(configured.load() & bit)) {
    cudaFuncAttributes attr{};
    SINTER_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    SINTER_CHECK(attr.numRegs >= kWgmmaRegisters, "fp8::gemm: the kernel has ", attr.numRegs,
                 " registers per thread, fewer than the ", kWgmmaRegisters,
                 " its warpgroups need (Note [wgmma registers])");
    SINTER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(kSmemBytes)));
    configured.fetch_or(bit);
  }
  const int blocks = static_cast<int>(std::min<int64_t>(shape.tiles, device_sm_count(device)));
  kernel<<<blocks, kWgmmaThreads, kSmemBytes, stream>>>(map_a, map_b, p, shape);
  SINTER_LAUNCH_CHECK("gemm_wgmma_kernel_fp8");
}

template <class TA, class TB>
void launch_out(const kern::Fp8GemmArgs& g, int device, cudaStream_t stream) {
  switch (g.out_type) {
    case DType::f32:
      return launch<TA, TB, float>(g, device, stream);
    case DType::bf16:
      return launch<TA, TB, __nv_bfloat16>(g, device, stream);
    case DType::f16:
      return launch<TA, TB, __half>(g, device, stream);
    default:
      SINTER_THROW("fp8::gemm: out dtype must be f32, bf16 or f16, got ", g.out_type);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void fp8_gemm(const kern::Ctx& ctx, const kern::Fp8GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
  DeviceGuard guard(ctx.device);
  SINTER_CHECK(sm90a_available(ctx.device),
               "fp8::gemm: the FP8 GEMM runs on Hopper GPUs built "
               "for sm_90a; cuda:",
               ctx.device, " has compute capability ", device_compute_capability(ctx.device));
  SINTER_CHECK(g.k > 0 && g.k % 16 == 0 && aligned16(g.a) && aligned16(g.b),
               "fp8::gemm: TMA needs k a positive multiple of 16 and 16-byte aligned operands, got "
               "k = ",
               g.k);
  SINTER_CHECK(g.m <= INT32_MAX / 2 && g.n <= INT32_MAX / 2 && g.k <= INT32_MAX / 2,
               "fp8::gemm: sizes ", g.m, " x ", g.n, " x ", g.k, " pass the 32-bit coordinates");
  const int64_t blocks = (g.k + kBK - 1) / kBK;
  SINTER_CHECK(g.scale_cols == 1 || g.scale_cols == blocks, "fp8::gemm: the scales have ",
               g.scale_cols, " columns; the GPU takes 1 or one per ", kBK, " of k (", blocks, ")");
  SINTER_CHECK(g.a_tile_rows >= 1 && g.b_tile_rows >= 1, "fp8::gemm: tile rows must be positive");
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  const bool a4 = g.a_type == DType::f8e4m3, b4 = g.b_type == DType::f8e4m3;
  SINTER_CHECK(is_float8(g.a_type) && is_float8(g.b_type), "fp8::gemm: operands must be FP8, got ",
               g.a_type, " and ", g.b_type);
  if (a4 && b4) return launch_out<E4M3, E4M3>(g, ctx.device, stream);
  if (!a4 && b4) return launch_out<E5M2, E4M3>(g, ctx.device, stream);
  if (a4) return launch_out<E4M3, E5M2>(g, ctx.device, stream);
  return launch_out<E5M2, E5M2>(g, ctx.device, stream);
}

}  // namespace sinter::cudak

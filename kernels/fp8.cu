// The CUDA kernels of FP8 training's quantization (kern/fp8.h): the amax of a tensor and the
// scaled quantization of a matrix, per tile or with one scale, computed as the CPU's
// (src/fp8/fp8.cpp) bit for bit: the same f32 products, the same conversion (kern/float8.h).
//
// Note [fp8 quantize kernels]
// Amaxes are kept as the bits of |x| (a non-negative float orders as an unsigned integer, NaN
// above infinity), so that warps, blocks and the grid combine them with integer max, atomicMax
// included, whatever the order. Per-tile scales take one block per tile: the tile's amax, then
// its codes. One scale for every tile (the per-tensor recipes) takes a grid-stride loop, the scale
// read on the device (given, or from an amax the previous kernel left there), so that a forward
// never waits for the host.
// The backward reads each operand transposed (Note [fp8 training]), so fp8::linear quantizes x,
// W and dy with their transposes in one pass (quantize_transpose_kernel): a block stages a
// 128 x 128 region of x in shared memory, finds the amaxes its tiles need (its rows' for 1 x 128
// tiles, its columns' too where x^T has tiles of its own, the region's for 128 x 128 blocks; none
// under one scale) and writes both codes from it, the transpose's along the region's columns so
// that its bytes are consecutive. The per-tensor recipes still take their amax in a pass before
// (the current recipe's scale needs it first); other tiles take two passes.
// The delayed recipe's state (Note [fp8 delayed state]) stays on the device: the first pass's amax
// kernel returns at once where the history has a step (*steps > 0, read on the device), the
// quantization takes the history's scale or that amax's by the same test, and one-thread kernels
// record the amax and advance the history with the host's code (kern::fp8_record_amax,
// kern::fp8_advance). With an amax group the amaxes are all-reduced as float bits (max: a NaN's
// above infinity's, which give the same scale, and neither is recorded).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "kern/float8.h"
#include "kern/fp8.h"

namespace sinter::cudak {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint32_t abs_bits(float v) { return __float_as_uint(v) & 0x7fffffffu; }

// Element i of x as the f32 nearest it (exact for bf16 and f16; f64 rounds as x.to(f32) does).
template <class T>
__device__ __forceinline__ float load(const void* x, int64_t i) {
  return static_cast<float>(widen(static_cast<const T*>(x)[i]));
}

// The largest of v over the block (kThreads threads), returned to every thread. smem: a value per
// warp.
__device__ __forceinline__ uint32_t block_max_bits(uint32_t v, uint32_t* smem) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
  __syncthreads();
  uint32_t m = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) m = max(m, smem[w]);
  return m;
}

// A NaN is encoded as the positive NaN, whatever sign the product gave it (as the CPU does).
__device__ __forceinline__ uint8_t encode(float v, bool e4m3) {
  if (v != v) v = __uint_as_float(0x7fc00000u);
  return e4m3 ? kern::float8_encode(kern::clamp_finite(v, 448.0f), kern::e4m3_format())
              : kern::float8_encode(kern::clamp_finite(v, 57344.0f), kern::e5m2_format());
}

// With `steps`, nothing where *steps > 0 (the same for every thread of the grid).
template <class T>
__global__ void amax_kernel(const void* x, int64_t n, const int64_t* steps, uint32_t* out) {
  __shared__ uint32_t smem[kThreads / 32];
  if (steps && *steps > 0) return;
  uint32_t m = 0;
  for (int64_t i = thread_index(); i < n; i += thread_count()) m = max(m, abs_bits(load<T>(x, i)));
  m = block_max_bits(m, smem);
  if (threadIdx.x == 0 && m > 0) atomicMax(out, m);
}

// One block per tile: its amax, its scale, its codes.
template <class T>
__global__ void quantize_tiles_kernel(kern::Fp8QuantizeArgs q, int64_t tiles_per_row, float fmax,
                                      bool e4m3) {
  __shared__ uint32_t smem[kThreads / 32];
  const int64_t t = blockIdx.x;
  const kern::Fp8Tile tile = kern::fp8_tile(q, t, tiles_per_row);
  const int64_t n = tile.h * tile.w;
  uint32_t m = 0;
  for (int64_t e = threadIdx.x; e < n; e += kThreads) {
    m = max(m, abs_bits(load<T>(q.x, kern::fp8_tile_element(q, tile, e))));
  }
  m = block_max_bits(m, smem);
  const float s = kern::fp8_scale_from_amax(__uint_as_float(m), fmax, 0);
  for (int64_t e = threadIdx.x; e < n; e += kThreads) {
    const int64_t i = kern::fp8_tile_element(q, tile, e);
    q.codes[i] = encode(__fmul_rn(load<T>(q.x, i), s), e4m3);
  }
  if (threadIdx.x == 0) {
    q.scale_inv[t] = __fdiv_rn(1.0f, s);
    if (q.amax_out && m > 0) atomicMax(q.amax_out, m);
  }
}

// One scale for every element: given on the device, from an amax on the device, or by value.
template <class T>
__global__ void quantize_scaled_kernel(kern::Fp8QuantizeArgs q, float fmax, bool e4m3) {
  __shared__ uint32_t smem[kThreads / 32];
  const float s = kern::fp8_one_scale(q, fmax);
  const int64_t n = q.rows * q.cols;
  uint32_t m = 0;
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    const float v = load<T>(q.x, i);
    m = max(m, abs_bits(v));
    q.codes[i] = encode(__fmul_rn(v, s), e4m3);
  }
  const int64_t tiles =
      ((q.rows + q.tile_rows - 1) / q.tile_rows) * ((q.cols + q.tile_cols - 1) / q.tile_cols);
  for (int64_t t = thread_index(); t < tiles; t += thread_count()) {
    q.scale_inv[t] = __fdiv_rn(1.0f, s);
  }
  if (q.amax_out) {
    m = block_max_bits(m, smem);
    if (threadIdx.x == 0 && m > 0) atomicMax(q.amax_out, m);
  }
}

// The fused quantization and transpose (Note [fp8 quantize kernels]): one block per R x R region
// of x (kern::fp8_region), staged in shared memory with a padded row (R + 1 floats), so that both
// the rows (q's codes, x's 1 x R tiles) and the columns (x^T's codes, its 1 x R tiles) are read
// without bank conflicts and written to global memory in consecutive bytes.
constexpr int kRegion = static_cast<int>(kern::kFp8ScaleBlock);
constexpr int kPitch = kRegion + 1;
constexpr size_t kPairSmem = sizeof(float) * (size_t{kRegion} * kPitch + 2 * kRegion);

// The largest |v| of each of the region's rows (by_rows) or columns, into out[R] as bits: a warp
// per line, 32 lanes strided along it.
__device__ void line_amaxes(const float* tile, bool by_rows, uint32_t* out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int line = warp; line < kRegion; line += kThreads / 32) {
    uint32_t m = 0;
    for (int j = lane; j < kRegion; j += 32) {
      m = max(m, abs_bits(by_rows ? tile[line * kPitch + j] : tile[j * kPitch + line]));
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
    }
    if (lane == 0) out[line] = m;
  }
}

template <class T>
__global__ void quantize_transpose_kernel(kern::Fp8QuantizeArgs q, kern::Fp8PairMode mode,
                                          float fmax, bool e4m3) {
  extern __shared__ float tile[];              // kRegion x kPitch, then the line scales
  float* row_scale = tile + kRegion * kPitch;  // x's 1 x R tiles' (kRows), or all (else)
  float* col_scale = row_scale + kRegion;      // x^T's 1 x R tiles' (retile_t)
  __shared__ uint32_t smem[kThreads / 32];
  const kern::Fp8Tile g = kern::fp8_region(q.rows, q.cols, blockIdx.x);
  uint32_t m = 0;
  for (int e = threadIdx.x; e < kRegion * kRegion; e += kThreads) {
    const int r = e / kRegion, c = e % kRegion;
    const float v = r < g.h && c < g.w ? load<T>(q.x, (g.r0 + r) * q.cols + g.c0 + c) : 0.0f;
    tile[r * kPitch + c] = v;
    m = max(m, abs_bits(v));
  }
  m = block_max_bits(m, smem);  // its __syncthreads also publishes the tile
  const bool retile = q.retile_t && mode == kern::Fp8PairMode::kRows;
  if (mode == kern::Fp8PairMode::kRows) {
    auto* bits = reinterpret_cast<uint32_t*>(row_scale);
    line_amaxes(tile, true, bits);
    if (retile) line_amaxes(tile, false, reinterpret_cast<uint32_t*>(col_scale));
    __syncthreads();
    for (int i = threadIdx.x; i < kRegion; i += kThreads) {
      row_scale[i] = kern::fp8_scale_from_amax(__uint_as_float(bits[i]), fmax, 0);
      if (retile) {
        col_scale[i] = kern::fp8_scale_from_amax(
            __uint_as_float(reinterpret_cast<uint32_t*>(col_scale)[i]), fmax, 0);
      }
    }
  } else if (threadIdx.x == 0) {
    row_scale[0] = mode == kern::Fp8PairMode::kOne
                       ? kern::fp8_one_scale(q, fmax)
                       : kern::fp8_scale_from_amax(__uint_as_float(m), fmax, 0);
  }
  __syncthreads();
  const bool per_row = mode == kern::Fp8PairMode::kRows;
  for (int e = threadIdx.x; e < kRegion * kRegion; e += kThreads) {
    const int r = e / kRegion, c = e % kRegion;  // x's codes: along the region's rows
    if (r < g.h && c < g.w) {
      q.codes[(g.r0 + r) * q.cols + g.c0 + c] =
          encode(__fmul_rn(tile[r * kPitch + c], row_scale[per_row ? r : 0]), e4m3);
    }
    const int tc = e / kRegion, tr = e % kRegion;  // x^T's: along the region's columns
    if (tr < g.h && tc < g.w) {
      const float s = retile ? col_scale[tc] : row_scale[per_row ? tr : 0];
      q.codes_t[(g.c0 + tc) * q.rows + g.r0 + tr] =
          encode(__fmul_rn(tile[tr * kPitch + tc], s), e4m3);
    }
  }
  // The scales: one writer per table entry.
  const bool first = g.r0 == 0 && g.c0 == 0;
  for (int i = threadIdx.x; i < kRegion; i += kThreads) {
    if (per_row ? i < g.h : i == 0 && (mode != kern::Fp8PairMode::kOne || first)) {
      const float inv = __fdiv_rn(1.0f, row_scale[per_row ? i : 0]);
      q.scale_inv[kern::fp8_pair_scale_index(mode, q.cols, g, i)] = inv;
      if (!retile) q.scale_inv_t[kern::fp8_pair_scale_index_t(mode, false, q.rows, g, i, 0)] = inv;
    }
    if (retile && i < g.w) {
      q.scale_inv_t[kern::fp8_pair_scale_index_t(mode, true, q.rows, g, 0, i)] =
          __fdiv_rn(1.0f, col_scale[i]);
    }
  }
  if (q.amax_out && threadIdx.x == 0 && m > 0) atomicMax(q.amax_out, m);
}

__global__ void record_amax_kernel(float* hist, int64_t h, const int64_t* steps, int64_t slot,
                                   const uint32_t* amax) {
  kern::fp8_record_amax(hist, h, *steps, slot, __uint_as_float(*amax));
}

__global__ void advance_kernel(float* hist, int64_t h, float* scale, int64_t* steps, int margin) {
  kern::fp8_advance(hist, h, scale, steps, margin);
}

int grid_of(int64_t n, int device) {
  return static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t{4} * device_sm_count(device))));
}

}  // namespace

void fp8_amax(const kern::Ctx& ctx, const void* x, DType x_type, int64_t n, uint32_t* out,
              const int64_t* steps) {
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  SINTER_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(uint32_t), stream));
  if (n == 0) return;
  visit_floating(x_type, "fp8_amax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    amax_kernel<T><<<grid_of(n, ctx.device), kThreads, 0, stream>>>(x, n, steps, out);
  });
  SINTER_LAUNCH_CHECK("fp8_amax");
}

void fp8_quantize(const kern::Ctx& ctx, const kern::Fp8QuantizeArgs& q) {
  if (q.rows == 0 || q.cols == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  const bool e4m3 = q.format == DType::f8e4m3;
  const float fmax = e4m3 ? 448.0f : 57344.0f;
  const int64_t per_row = (q.cols + q.tile_cols - 1) / q.tile_cols;
  const int64_t tiles = ((q.rows + q.tile_rows - 1) / q.tile_rows) * per_row;
  SINTER_CHECK(kern::fp8_has_one_scale(q) || tiles <= INT32_MAX, "fp8::quantize: ", tiles,
               " tiles pass the grid's limit");
  visit_floating(q.x_type, "fp8_quantize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kern::fp8_has_one_scale(q)) {
      quantize_scaled_kernel<T>
          <<<grid_of(q.rows * q.cols, ctx.device), kThreads, 0, stream>>>(q, fmax, e4m3);
    } else {
      quantize_tiles_kernel<T>
          <<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(q, per_row, fmax, e4m3);
    }
  });
  SINTER_LAUNCH_CHECK("fp8_quantize");
}

void fp8_quantize_transpose(const kern::Ctx& ctx, const kern::Fp8QuantizeArgs& q) {
  const kern::Fp8PairMode mode = kern::fp8_pair_mode(q);
  SINTER_CHECK(mode != kern::Fp8PairMode::kUnfused && q.codes_t && q.scale_inv_t,
               "fp8_quantize_transpose: tiles of ", q.tile_rows, " x ", q.tile_cols,
               " are not fused (one scale, 1 x ", kern::kFp8ScaleBlock, " or ",
               kern::kFp8ScaleBlock, " x ", kern::kFp8ScaleBlock, ")");
  if (q.rows == 0 || q.cols == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  const bool e4m3 = q.format == DType::f8e4m3;
  const int64_t b = kern::kFp8ScaleBlock;
  const int64_t regions = ((q.rows + b - 1) / b) * ((q.cols + b - 1) / b);
  SINTER_CHECK(regions <= INT32_MAX, "fp8::quantize: ", regions, " regions pass the grid's limit");
  visit_floating(q.x_type, "fp8_quantize_transpose", [&](auto tag) {
    using T = typename decltype(tag)::type;
    SINTER_CUDA_CHECK(cudaFuncSetAttribute(quantize_transpose_kernel<T>,  // per device: each call
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(kPairSmem)));
    quantize_transpose_kernel<T><<<static_cast<unsigned>(regions), kThreads, kPairSmem, stream>>>(
        q, mode, e4m3 ? 448.0f : 57344.0f, e4m3);
  });
  SINTER_LAUNCH_CHECK("fp8_quantize_transpose");
}

void fp8_record_amax(const kern::Ctx& ctx, float* hist, int64_t h, const int64_t* steps,
                     int64_t slot, const uint32_t* amax) {
  DeviceGuard guard(ctx.device);
  record_amax_kernel<<<1, 1, 0, static_cast<cudaStream_t>(ctx.stream)>>>(hist, h, steps, slot,
                                                                         amax);
  SINTER_LAUNCH_CHECK("fp8_record_amax");
}

void fp8_advance(const kern::Ctx& ctx, float* hist, int64_t h, float* scale, int64_t* steps,
                 int margin) {
  DeviceGuard guard(ctx.device);
  advance_kernel<<<1, 1, 0, static_cast<cudaStream_t>(ctx.stream)>>>(hist, h, scale, steps, margin);
  SINTER_LAUNCH_CHECK("fp8_advance");
}

}  // namespace sinter::cudak

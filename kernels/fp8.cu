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

__global__ void amax_kernel(const float* x, int64_t n, uint32_t* out) {
  __shared__ uint32_t smem[kThreads / 32];
  uint32_t m = 0;
  for (int64_t i = thread_index(); i < n; i += thread_count()) m = max(m, abs_bits(x[i]));
  m = block_max_bits(m, smem);
  if (threadIdx.x == 0 && m > 0) atomicMax(out, m);
}

// One block per tile: its amax, its scale, its codes.
__global__ void quantize_tiles_kernel(kern::Fp8QuantizeArgs q, int64_t tiles_per_row, float fmax,
                                      bool e4m3) {
  __shared__ uint32_t smem[kThreads / 32];
  const int64_t t = blockIdx.x;
  const kern::Fp8Tile tile = kern::fp8_tile(q, t, tiles_per_row);
  const int64_t n = tile.h * tile.w;
  uint32_t m = 0;
  for (int64_t e = threadIdx.x; e < n; e += kThreads) {
    m = max(m, abs_bits(q.x[kern::fp8_tile_element(q, tile, e)]));
  }
  m = block_max_bits(m, smem);
  const float s = kern::fp8_scale_from_amax(__uint_as_float(m), fmax, 0);
  for (int64_t e = threadIdx.x; e < n; e += kThreads) {
    const int64_t i = kern::fp8_tile_element(q, tile, e);
    q.codes[i] = encode(__fmul_rn(q.x[i], s), e4m3);
  }
  if (threadIdx.x == 0) {
    q.scale_inv[t] = __fdiv_rn(1.0f, s);
    if (q.amax_out && m > 0) atomicMax(q.amax_out, m);
  }
}

// One scale for every element: given on the device, from an amax on the device, or by value.
__global__ void quantize_scaled_kernel(kern::Fp8QuantizeArgs q, float fmax, bool e4m3) {
  __shared__ uint32_t smem[kThreads / 32];
  const float s = q.scale_ptr ? *q.scale_ptr
                  : q.amax_in
                      ? kern::fp8_scale_from_amax(__uint_as_float(*q.amax_in), fmax, q.margin)
                      : q.scale;
  const int64_t n = q.rows * q.cols;
  uint32_t m = 0;
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    const float v = q.x[i];
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

int grid_of(int64_t n, int device) {
  return static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t{4} * device_sm_count(device))));
}

}  // namespace

void fp8_amax(const kern::Ctx& ctx, const float* x, int64_t n, uint32_t* out) {
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  SINTER_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(uint32_t), stream));
  if (n == 0) return;
  amax_kernel<<<grid_of(n, ctx.device), kThreads, 0, stream>>>(x, n, out);
  SINTER_LAUNCH_CHECK("fp8_amax");
}

void fp8_quantize(const kern::Ctx& ctx, const kern::Fp8QuantizeArgs& q) {
  if (q.rows == 0 || q.cols == 0) return;
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  const bool e4m3 = q.format == DType::f8e4m3;
  const float fmax = e4m3 ? 448.0f : 57344.0f;
  const bool one_scale = q.scale_ptr || q.amax_in || q.has_scale;
  if (one_scale) {
    quantize_scaled_kernel<<<grid_of(q.rows * q.cols, ctx.device), kThreads, 0, stream>>>(q, fmax,
                                                                                          e4m3);
    SINTER_LAUNCH_CHECK("fp8_quantize");
    return;
  }
  const int64_t per_row = (q.cols + q.tile_cols - 1) / q.tile_cols;
  const int64_t tiles = ((q.rows + q.tile_rows - 1) / q.tile_rows) * per_row;
  SINTER_CHECK(tiles <= INT32_MAX, "fp8::quantize: ", tiles, " tiles pass the grid's limit");
  quantize_tiles_kernel<<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(q, per_row, fmax,
                                                                               e4m3);
  SINTER_LAUNCH_CHECK("fp8_quantize");
}

}  // namespace sinter::cudak

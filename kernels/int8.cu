// The int8 family's CUDA kernels (Note [int8 kernels] in src/kern/int8.h): the GEMM on the
// tensor cores (Note [int8 mma gemm] in kernels/int8_mma.h: mma.sync.m16n8k32 on s8 operands with
// s32 accumulators, sm_80 and newer), and around it the quantized layers' input quantization,
// convolution windows and epilogue (the index math in kernels/int8_layout.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "int8_layout.h"
#include "int8_mma.h"
#include "kern/int8.h"
#include "scratch.cuh"

namespace sinter::cudak {
namespace {

using namespace int8mma;  // NOLINT

// d += A (16x32, row) * B (32x8, col), s8 operands, s32 accumulators; fragments as in Note [int8
// mma gemm].
__device__ __forceinline__ void mma_16832_s8(int32_t (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  (void)d, (void)a, (void)b;
  __trap();
#endif
}

__global__ void __launch_bounds__(kThreads)
    int8_gemm_kernel(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* b,
                     int64_t ldb, int32_t* c, int64_t ldc, bool vector_a, bool vector_b) {
  __shared__ __align__(16) int8_t as[kBM * kLd];
  __shared__ __align__(16) int8_t bs[kBN * kLd];
  const int tid = static_cast<int>(threadIdx.x), w = tid / 32, lane = tid % 32;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  int32_t acc[kMI][kNI][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kBK) {
    load_chunk(tid, a, m, k, lda, m0, k0, vector_a, as);
    load_chunk(tid, b, n, k, ldb, n0, k0, vector_b, bs);
    __syncthreads();
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < kNI; ++ni) {
        uint32_t fa[4], fb[2];
        fragments(as, bs, w, lane, mi, ni, fa, fb);
        mma_16832_s8(acc[mi][ni], fa, fb);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < kNI; ++ni) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const Chunk e = d_elem(lane, r, warp_row0(w) + mi * 16, warp_col0(w) + ni * 8);
        const int64_t row = m0 + e.row, col = n0 + e.col;
        if (row < m && col < n) c[row * ldc + col] = acc[mi][ni][r];
      }
    }
  }
}

constexpr int kBlock = 256;

__global__ void int8_pad_weight_kernel(const int8_t* w, int64_t k, int64_t total, int8_t* out) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    out[e] = int8layout::padded_weight(w, k, e);
  }
}

__global__ void int8_quantize_rows_kernel(const float* x, float scale, int64_t k, int64_t total,
                                          int8_t* out) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    out[e] = int8layout::padded_input(x, scale, k, e);
  }
}

__global__ void int8_quantize_kernel(const float* x, float scale, int64_t total, int8_t* out) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    out[e] = static_cast<int8_t>(kern::quantize_int8(x[e], scale));
  }
}

__global__ void int8_windows_kernel(kern::Conv2dGeom g, const int8_t* qx, int64_t img0, int64_t grp,
                                    int64_t total, int8_t* cols) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    cols[e] = int8layout::window_value(g, qx, img0, grp, e);
  }
}

// y[(i * n + j)] of a Linear's rows row0 ..; c: (rows, n).
__global__ void int8_linear_epilogue_kernel(const int32_t* c, int64_t n, int64_t total,
                                            kern::Int8Epilogue ep, float* y) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t j = e % n;
    y[e] = kern::int8_epilogue(c[e], ep.scale[j], ep.bias ? ep.bias[j] : 0.0F, ep.act);
  }
}

// c: (rows, c_out / groups) of group grp and the pixels from row0, into y (NCHW).
__global__ void int8_conv_epilogue_kernel(kern::Conv2dGeom g, const int32_t* c, int64_t row0,
                                          int64_t grp, int64_t total, kern::Int8Epilogue ep,
                                          float* y) {
  const int64_t cog = g.c_out / g.groups;
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t r = e / cog, j = e % cog, ch = grp * cog + j;
    y[int8layout::conv_out_index(g, row0, grp, r, j)] =
        kern::int8_epilogue(c[e], ep.scale[ch], ep.bias ? ep.bias[ch] : 0.0F, ep.act);
  }
}

// The scratch a layer's pass keeps under (its A operand and int32 sums).
constexpr int64_t kPassBytes = int64_t{256} << 20;
// The GEMM's grid takes at most 65535 row blocks: int8_gemm launches slabs of this many rows.
constexpr int64_t kMaxGemmRows = int64_t{kBM} * 65535;

// One thread per element of `work` in a grid-stride loop.
template <class... Params, class... Args>
void launch_flat(const kern::Ctx& ctx, const char* name, void (*kernel)(Params...), int64_t work,
                 Args... args) {
  if (work <= 0) return;
  kernel<<<wave_grid(work, kBlock, ctx.device), kBlock, 0, stream_of(ctx)>>>(args...);
  SINTER_LAUNCH_CHECK(name);
}

}  // namespace

void int8_gemm(const kern::Ctx& ctx, int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda,
               const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc) {
  SINTER_CHECK(m >= 0 && n >= 0 && k >= 0 && k <= kern::kInt8MaxK, "int8_gemm: sizes m=", m,
               " n=", n, " k=", k, " (k at most ", kern::kInt8MaxK,
               ", so that the int32 sums cannot overflow)");
  if (m == 0 || n == 0) return;
  DeviceGuard guard(ctx.device);
  SINTER_CHECK(
      device_compute_capability(ctx.device) >= 80,
      "int8_gemm: the int8 tensor-core GEMM needs compute capability 8.0 or newer; device ",
      ctx.device, " has ", device_compute_capability(ctx.device) / 10, ".",
      device_compute_capability(ctx.device) % 10);
  const int64_t gx = (n + kBN - 1) / kBN;
  SINTER_CHECK(gx <= INT_MAX, "int8_gemm: n=", n, " is too large for one launch");
  const auto aligned = [](const int8_t* p, int64_t ld) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0 && ld % 16 == 0;
  };
  // Slabs of at most kMaxGemmRows rows: the grid's y takes at most 65535 row blocks.
  for (int64_t r0 = 0; r0 < m; r0 += kMaxGemmRows) {
    const int64_t rows = std::min(kMaxGemmRows, m - r0), gy = (rows + kBM - 1) / kBM;
    const int8_t* ar = a + r0 * lda;
    const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
    int8_gemm_kernel<<<grid, kThreads, 0, stream_of(ctx)>>>(
        rows, n, k, ar, lda, b, ldb, c + r0 * ldc, ldc, aligned(ar, lda), aligned(b, ldb));
    SINTER_LAUNCH_CHECK("int8_gemm_kernel");
  }
}

void int8_gemm_isa(const kern::Ctx&, const char** name) { *name = "mma.sync"; }

void int8_packed_bytes(const kern::Ctx&, int64_t groups, int64_t rows, int64_t k, int64_t* bytes) {
  *bytes = groups * rows * int8layout::row_bytes(k);
}

void int8_pack_weight(const kern::Ctx& ctx, int64_t groups, int64_t rows, int64_t k,
                      const int8_t* w, uint8_t* packed) {
  DeviceGuard guard(ctx.device);
  const int64_t total = groups * rows * int8layout::row_bytes(k);
  launch_flat(ctx, "int8_pad_weight_kernel", int8_pad_weight_kernel, total, w, k, total,
              reinterpret_cast<int8_t*>(packed));
}

void int8_linear(const kern::Ctx& ctx, int64_t m, int64_t n, int64_t k, const float* x,
                 float x_scale, const uint8_t* packed, const kern::Int8Epilogue& e, float* y) {
  DeviceGuard guard(ctx.device);
  const int64_t kp = int8layout::row_bytes(k);
  const int64_t per_pass =
      std::clamp<int64_t>(kPassBytes / std::max<int64_t>(kp + 4 * n, 1), 1, kMaxGemmRows);
  const int64_t rows = std::min(m, per_pass);
  Scratch<int8_t> a(ctx, rows * kp);
  Scratch<int32_t> c(ctx, rows * n);
  const auto* w = reinterpret_cast<const int8_t*>(packed);
  for (int64_t r0 = 0; r0 < m; r0 += rows) {
    const int64_t mr = std::min(rows, m - r0);
    launch_flat(ctx, "int8_quantize_rows_kernel", int8_quantize_rows_kernel, mr * kp, x + r0 * k,
                x_scale, k, mr * kp, a.get());
    int8_gemm(ctx, mr, n, k, a.get(), kp, w, kp, c.get(), n);
    launch_flat(ctx, "int8_linear_epilogue_kernel", int8_linear_epilogue_kernel, mr * n, c.get(), n,
                mr * n, e, y + r0 * n);
  }
}

void int8_conv2d(const kern::Ctx& ctx, const kern::Conv2dGeom& g, const float* x, float x_scale,
                 const uint8_t* packed, const kern::Int8Epilogue& e, float* y) {
  DeviceGuard guard(ctx.device);
  const int64_t cig = g.c_in / g.groups, cog = g.c_out / g.groups, hw = g.h_out * g.w_out;
  const int64_t taps = cig * g.kh * g.kw, kp = int8layout::row_bytes(taps);
  const int64_t numel = g.n * g.c_in * g.h * g.w;
  // The input quantized once (each value is read by up to kh * kw windows).
  Scratch<int8_t> qx(ctx, numel);
  launch_flat(ctx, "int8_quantize_kernel", int8_quantize_kernel, numel, x, x_scale, numel,
              qx.get());
  const int64_t total = g.n * hw;
  const int64_t rows = int8layout::conv_rows_per_pass(g, kPassBytes, kMaxGemmRows);
  Scratch<int8_t> cols(ctx, rows * kp);
  Scratch<int32_t> c(ctx, rows * cog);
  const auto* w = reinterpret_cast<const int8_t*>(packed);
  for (int64_t row0 = 0; row0 < total; row0 += rows) {
    const int64_t pass = std::min(rows, total - row0);
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      launch_flat(ctx, "int8_windows_kernel", int8_windows_kernel, pass * kp, g, qx.get(), row0,
                  grp, pass * kp, cols.get());
      int8_gemm(ctx, pass, cog, taps, cols.get(), kp, w + grp * cog * kp, kp, c.get(), cog);
      launch_flat(ctx, "int8_conv_epilogue_kernel", int8_conv_epilogue_kernel, pass * cog, g,
                  c.get(), row0, grp, pass * cog, e, y);
    }
  }
}

}  // namespace sinter::cudak

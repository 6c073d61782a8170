// CUDA random fills and arange. Element i comes from Philox block (seed, offset + i), as
// Note [philox streams] in src/kern/philox.h says, so values match src/cpu/random.cpp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "kern/philox.h"
#include "kern/random.h"
#include "kern/scalar_ops.h"

namespace sinter::cudak {
namespace {

constexpr int kBlock = 256;

// Philox is compute-bound (ten rounds per element), so a full wave of resident threads is enough.
unsigned grid_for(int64_t n, int device) { return wave_grid(n, kBlock, device); }

enum class Dist { Uniform, Normal };

// a, b: (lo, hi) for Uniform, (mean, std) for Normal; float for every T but double.
template <class T, Dist D, class P>
__global__ void random_float_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, P a, P b) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const PhiloxBlock r = philox_element(seed, offset, static_cast<uint64_t>(i));
    if constexpr (std::is_same_v<P, double>) {
      out[i] = D == Dist::Uniform ? uniform_f64(r, a, b) : normal_f64(r, a, b);
    } else if constexpr (D == Dist::Uniform) {
      out[i] = from_acc<T>(uniform_f32(r, a, b));
    } else {
      out[i] = from_acc<T>(normal_f32(r, a, b));
    }
  }
}

template <class T>
__global__ void random_int_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, int64_t lo,
                                  int64_t hi) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] =
        from_acc<T>(randint_i64(philox_element(seed, offset, static_cast<uint64_t>(i)), lo, hi));
  }
}

// start + i * step with one rounding (fma), as the CPU computes it.
template <class T>
__global__ void arange_kernel(T* out, int64_t n, double start, double step) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = from_acc<T>(::fma(static_cast<double>(i), step, start));
  }
}

template <Dist D>
void launch_random_float(const Ctx& ctx, void* out, DType dtype, int64_t n, uint64_t seed,
                         uint64_t offset, double a, double b, const char* name) {
  SINTER_CHECK(is_floating(dtype), name, ": needs a floating dtype, got ", dtype_name(dtype));
  if (n <= 0) return;
  DeviceGuard guard(ctx.device);
  visit_storage(dtype, "random", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      random_float_kernel<T, D, double><<<grid_for(n, ctx.device), kBlock, 0, ctx.stream>>>(
          static_cast<T*>(out), n, seed, offset, a, b);
    } else if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, __nv_bfloat16> ||
                         std::is_same_v<T, __half>) {
      random_float_kernel<T, D, float><<<grid_for(n, ctx.device), kBlock, 0, ctx.stream>>>(
          static_cast<T*>(out), n, seed, offset, static_cast<float>(a), static_cast<float>(b));
    }
    SINTER_LAUNCH_CHECK(name);
  });
}

}  // namespace

void random_uniform(const Ctx& ctx, void* out, DType dtype, int64_t n, uint64_t seed,
                    uint64_t offset, double lo, double hi) {
  launch_random_float<Dist::Uniform>(ctx, out, dtype, n, seed, offset, lo, hi, "random_uniform");
}

void random_normal(const Ctx& ctx, void* out, DType dtype, int64_t n, uint64_t seed,
                   uint64_t offset, double mean, double std) {
  launch_random_float<Dist::Normal>(ctx, out, dtype, n, seed, offset, mean, std, "random_normal");
}

void random_int(const Ctx& ctx, void* out, DType dtype, int64_t n, uint64_t seed, uint64_t offset,
                int64_t lo, int64_t hi) {
  SINTER_CHECK(hi > lo, "random_int: empty range [", lo, ", ", hi, ")");
  if (n <= 0) return;
  DeviceGuard guard(ctx.device);
  visit_storage(dtype, "random", [&](auto tag) {
    using T = typename decltype(tag)::type;
    random_int_kernel<T><<<grid_for(n, ctx.device), kBlock, 0, ctx.stream>>>(
        static_cast<T*>(out), n, seed, offset, lo, hi);
    SINTER_LAUNCH_CHECK("random_int");
  });
}

void arange(const Ctx& ctx, void* out, DType dtype, int64_t n, double start, double step) {
  if (n <= 0) return;
  DeviceGuard guard(ctx.device);
  visit_storage(dtype, "random", [&](auto tag) {
    using T = typename decltype(tag)::type;
    arange_kernel<T>
        <<<grid_for(n, ctx.device), kBlock, 0, ctx.stream>>>(static_cast<T*>(out), n, start, step);
    SINTER_LAUNCH_CHECK("arange");
  });
}

}  // namespace sinter::cudak

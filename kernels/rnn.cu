// CUDA pointwise steps of the recurrent cells (Note [rnn cell steps] in src/kern/rnn.h): one thread
// per (row, unit), running the unit functions the CPU reference runs, in f32 (f64 for f64).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "kern/rnn.h"
#include "kern/scalar_ops.h"

namespace sinter::cudak {
namespace {

constexpr int kBlock = 256;

template <class T>
__global__ void lstm_cell_kernel(int64_t n, int64_t hidden, const T* gates, const T* c_prev, T* h,
                                 T* c) {
  using C = Acc<T>;
  for (int64_t k = thread_index(); k < n; k += thread_count()) {
    const int64_t b = k / hidden, j = k % hidden;
    const T* row = gates + b * 4 * hidden;
    const auto u =
        kern::lstm_unit<C>(to_acc(row[j]), to_acc(row[hidden + j]), to_acc(row[2 * hidden + j]),
                           to_acc(row[3 * hidden + j]), to_acc(c_prev[k]));
    h[k] = from_acc<T>(u.h);
    c[k] = from_acc<T>(u.c);
  }
}

template <class T>
__global__ void lstm_cell_backward_kernel(int64_t n, int64_t hidden, const T* gates,
                                          const T* c_prev, const T* dh, const T* dc, T* dgates,
                                          T* dc_prev) {
  using C = Acc<T>;
  for (int64_t k = thread_index(); k < n; k += thread_count()) {
    const int64_t b = k / hidden, j = k % hidden;
    const T* row = gates + b * 4 * hidden;
    const auto d = kern::lstm_unit_backward<C>(
        to_acc(row[j]), to_acc(row[hidden + j]), to_acc(row[2 * hidden + j]),
        to_acc(row[3 * hidden + j]), to_acc(c_prev[k]), to_acc(dh[k]), to_acc(dc[k]));
    T* out = dgates + b * 4 * hidden;
    out[j] = from_acc<T>(d.di);
    out[hidden + j] = from_acc<T>(d.df);
    out[2 * hidden + j] = from_acc<T>(d.dg);
    out[3 * hidden + j] = from_acc<T>(d.dout);
    dc_prev[k] = from_acc<T>(d.dc_prev);
  }
}

template <class T>
__global__ void gru_cell_kernel(int64_t n, int64_t hidden, const T* gi, const T* gh,
                                const T* h_prev, T* h) {
  using C = Acc<T>;
  for (int64_t k = thread_index(); k < n; k += thread_count()) {
    const int64_t b = k / hidden, j = k % hidden, row = b * 3 * hidden + j;
    h[k] = from_acc<T>(kern::gru_unit<C>(
        to_acc(gi[row]), to_acc(gi[row + hidden]), to_acc(gi[row + 2 * hidden]), to_acc(gh[row]),
        to_acc(gh[row + hidden]), to_acc(gh[row + 2 * hidden]), to_acc(h_prev[k])));
  }
}

template <class T>
__global__ void gru_cell_backward_kernel(int64_t n, int64_t hidden, const T* gi, const T* gh,
                                         const T* h_prev, const T* dh, T* dgi, T* dgh, T* dh_prev) {
  using C = Acc<T>;
  for (int64_t k = thread_index(); k < n; k += thread_count()) {
    const int64_t b = k / hidden, j = k % hidden, row = b * 3 * hidden + j;
    const auto d = kern::gru_unit_backward<C>(
        to_acc(gi[row]), to_acc(gi[row + hidden]), to_acc(gi[row + 2 * hidden]), to_acc(gh[row]),
        to_acc(gh[row + hidden]), to_acc(gh[row + 2 * hidden]), to_acc(h_prev[k]), to_acc(dh[k]));
    dgi[row] = from_acc<T>(d.dr);
    dgi[row + hidden] = from_acc<T>(d.dz);
    dgi[row + 2 * hidden] = from_acc<T>(d.dn);
    dgh[row] = from_acc<T>(d.dr);
    dgh[row + hidden] = from_acc<T>(d.dz);
    dgh[row + 2 * hidden] = from_acc<T>(d.dhn);
    dh_prev[k] = from_acc<T>(d.dh_prev);
  }
}

}  // namespace

void lstm_cell(const Ctx& ctx, DType dtype, int64_t batch, int64_t hidden, const void* gates,
               const void* c_prev, void* h, void* c) {
  const int64_t n = batch * hidden;
  if (n <= 0) return;
  launch_floating(ctx, dtype, "lstm_cell", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    lstm_cell_kernel<T><<<wave_grid(n, kBlock, ctx.device), kBlock, 0, stream>>>(
        n, hidden, static_cast<const T*>(gates), static_cast<const T*>(c_prev), static_cast<T*>(h),
        static_cast<T*>(c));
    SINTER_LAUNCH_CHECK("lstm_cell");
  });
}

void lstm_cell_backward(const Ctx& ctx, DType dtype, int64_t batch, int64_t hidden,
                        const void* gates, const void* c_prev, const void* dh, const void* dc,
                        void* dgates, void* dc_prev) {
  const int64_t n = batch * hidden;
  if (n <= 0) return;
  launch_floating(ctx, dtype, "lstm_cell_backward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    lstm_cell_backward_kernel<T><<<wave_grid(n, kBlock, ctx.device), kBlock, 0, stream>>>(
        n, hidden, static_cast<const T*>(gates), static_cast<const T*>(c_prev),
        static_cast<const T*>(dh), static_cast<const T*>(dc), static_cast<T*>(dgates),
        static_cast<T*>(dc_prev));
    SINTER_LAUNCH_CHECK("lstm_cell_backward");
  });
}

void gru_cell(const Ctx& ctx, DType dtype, int64_t batch, int64_t hidden, const void* gi,
              const void* gh, const void* h_prev, void* h) {
  const int64_t n = batch * hidden;
  if (n <= 0) return;
  launch_floating(ctx, dtype, "gru_cell", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    gru_cell_kernel<T><<<wave_grid(n, kBlock, ctx.device), kBlock, 0, stream>>>(
        n, hidden, static_cast<const T*>(gi), static_cast<const T*>(gh),
        static_cast<const T*>(h_prev), static_cast<T*>(h));
    SINTER_LAUNCH_CHECK("gru_cell");
  });
}

void gru_cell_backward(const Ctx& ctx, DType dtype, int64_t batch, int64_t hidden, const void* gi,
                       const void* gh, const void* h_prev, const void* dh, void* dgi, void* dgh,
                       void* dh_prev) {
  const int64_t n = batch * hidden;
  if (n <= 0) return;
  launch_floating(ctx, dtype, "gru_cell_backward", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    gru_cell_backward_kernel<T><<<wave_grid(n, kBlock, ctx.device), kBlock, 0, stream>>>(
        n, hidden, static_cast<const T*>(gi), static_cast<const T*>(gh),
        static_cast<const T*>(h_prev), static_cast<const T*>(dh), static_cast<T*>(dgi),
        static_cast<T*>(dgh), static_cast<T*>(dh_prev));
    SINTER_LAUNCH_CHECK("gru_cell_backward");
  });
}

}  // namespace sinter::cudak

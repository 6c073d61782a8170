// What every GEMM kernel family shares: the launch parameters, the epilogue (alpha, beta, bias,
// pre-activation, activation) applied to one accumulator, and the entry points of the families
// that kernels/gemm.cu chooses between.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_util.cuh"
#include "kern/elementwise.h"
#include "kern/gemm.h"
#include "kern/scalar_ops.h"

namespace sinter::cudak {

// GemmArgs with typed pointers (the layout rules are those of kern::GemmArgs).
template <typename T>
struct GemmParams {
  const T* a;
  const T* b;
  T* c;
  const T* bias;  // n elements or null
  T* pre_act;     // laid out like c, or null
  int64_t m, n, k, batch;
  int64_t lda, ldb, ldc;
  int64_t stride_a, stride_b, stride_c;
  Acc<T> alpha, beta;
  GemmAct act;
};

template <typename T>
GemmParams<T> gemm_params(const GemmArgs& g) {
  GemmParams<T> p;
  p.a = static_cast<const T*>(g.a);
  p.b = static_cast<const T*>(g.b);
  p.c = static_cast<T*>(g.c);
  p.bias = static_cast<const T*>(g.bias);
  p.pre_act = static_cast<T*>(g.pre_act);
  p.m = g.m;
  p.n = g.n;
  p.k = g.k;
  p.batch = g.batch;
  p.lda = g.lda;
  p.ldb = g.ldb;
  p.ldc = g.ldc;
  p.stride_a = g.stride_a;
  p.stride_b = g.stride_b;
  p.stride_c = g.stride_c;
  p.alpha = static_cast<Acc<T>>(g.alpha);
  p.beta = static_cast<Acc<T>>(g.beta);
  p.act = g.act;
  return p;
}

// Not inlined: the transcendental paths would otherwise raise every GEMM kernel's register count
// (and spill) for an epilogue step that runs once per output element.
template <typename A>
__device__ __noinline__ A gemm_activate(GemmAct act, A v) {
  return activate(act, v);
}

// Finishes C(i, j) of batch z from its accumulator: the caller has checked i < m and j < n.
// beta == 0 never reads C (it may hold NaN).
template <typename T>
__device__ __forceinline__ void gemm_finish(const GemmParams<T>& p, int64_t z, int64_t i, int64_t j,
                                            Acc<T> acc) {
  using A = Acc<T>;
  const int64_t off = z * p.stride_c + i * p.ldc + j;
  A v = p.alpha * acc;
  if (p.beta != A(0)) v += p.beta * to_acc(p.c[off]);
  if (p.bias) v += to_acc(p.bias[j]);
  if (p.pre_act) p.pre_act[off] = from_acc<T>(v);
  if (p.act != GemmAct::None) v = gemm_activate(p.act, v);
  p.c[off] = from_acc<T>(v);
}

// Whether gemm_finish_pair may store (j, j + 1) pairs with even j as one 2-element access: C and
// pre_act aligned to two elements, and every row and batch starting at an even element.
template <typename T>
__device__ __forceinline__ bool gemm_pairs_aligned(const GemmParams<T>& p) {
  const auto two = static_cast<uintptr_t>(2 * sizeof(T));
  return reinterpret_cast<uintptr_t>(p.c) % two == 0 &&
         reinterpret_cast<uintptr_t>(p.pre_act) % two == 0 && p.ldc % 2 == 0 &&
         (p.batch == 1 || p.stride_c % 2 == 0);
}

// gemm_finish for C(i, j) and C(i, j + 1), j even, i < m and j < n checked by the caller: the same
// arithmetic, with one 2-element load and store per tensor when pairs_aligned and j + 1 < n.
template <typename T>
__device__ __forceinline__ void gemm_finish_pair(const GemmParams<T>& p, int64_t z, int64_t i,
                                                 int64_t j, Acc<T> acc0, Acc<T> acc1,
                                                 bool pairs_aligned) {
  using A = Acc<T>;
  if (!pairs_aligned || j + 1 >= p.n) {
    gemm_finish(p, z, i, j, acc0);
    if (j + 1 < p.n) gemm_finish(p, z, i, j + 1, acc1);
    return;
  }
  struct alignas(2 * sizeof(T)) Pair {
    T x, y;
  };
  const int64_t off = z * p.stride_c + i * p.ldc + j;
  A v0 = p.alpha * acc0, v1 = p.alpha * acc1;
  if (p.beta != A(0)) {
    const Pair c = *reinterpret_cast<const Pair*>(p.c + off);
    v0 += p.beta * to_acc(c.x);
    v1 += p.beta * to_acc(c.y);
  }
  if (p.bias) {
    v0 += to_acc(p.bias[j]);
    v1 += to_acc(p.bias[j + 1]);
  }
  if (p.pre_act) *reinterpret_cast<Pair*>(p.pre_act + off) = Pair{from_acc<T>(v0), from_acc<T>(v1)};
  if (p.act != GemmAct::None) {
    v0 = gemm_activate(p.act, v0);
    v1 = gemm_activate(p.act, v1);
  }
  *reinterpret_cast<Pair*>(p.c + off) = Pair{from_acc<T>(v0), from_acc<T>(v1)};
}

// The kernel families (each in its own file). Each returns false, having launched nothing, when it
// cannot take this problem (dtype, layout, alignment or GPU); kernels/gemm.cu then tries the next.
// gemm_simt takes every problem.
void gemm_simt(const GemmArgs& g, cudaStream_t stream);
bool gemm_sgemm_large(const GemmArgs& g, cudaStream_t stream);  // f32 128 x 128 tiles, CUDA cores
bool gemm_mma(const GemmArgs& g, cudaStream_t stream);          // mma.sync, sm_80 and newer
bool gemm_wgmma(const GemmArgs& g, cudaStream_t stream);        // wgmma + TMA, sm_90a

}  // namespace sinter::cudak

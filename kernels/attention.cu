// CUDA fused attention (Note [fused attention]). Two families:
// - The general kernels, any head size up to 128 and every floating dtype, math in Acc<T> on CUDA
//   cores: a block owns a tile of rows (queries, or keys in the dk/dv pass) and walks tiles of 32
//   columns through shared memory. Each lane computes the dot products of one column with the
//   warp's rows; the warp then adds the weighted column vectors into its rows' accumulators, lane
//   l holding dims l, l + 32, ...
// - The tensor-core kernels for bf16 and f16 with D = 32, 64 or 128 (sm_80+), on mma.sync
//   m16n8k16 with f32 accumulators: the weights stay in registers between the two products of a
//   pass, and the online softmax works on the accumulators in the exp2 domain.
// Both run the backward as two passes that recompute the weights from the saved log-sum-exp: dq by
// query tiles, dk and dv by key tiles, after a pass for the row dots D_i = dout_i . out_i. No
// atomics: the result does not depend on scheduling. Grouped-query attention reads the shared K/V
// head of each query head in place; a dk/dv block sums over its K/V head's query heads
// (attn::pass_heads). rope (Note [rotary embedding]) is here too, a
// thread per pair.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "attention_tile.h"
#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "kern/attention.h"
#include "mma.cuh"
#include "scratch.cuh"

namespace sinter::cudak {
namespace {

constexpr int kWarps = attn::kWarps;
constexpr int kThreads = 32 * kWarps;
constexpr int kCols = 32;  // columns per tile of the general kernels: one per lane
constexpr unsigned kFull = 0xffffffffu;
// exp and log below take and give Acc<T> (CUDA's float overloads for float).

template <class A>
__device__ __forceinline__ A warp_max(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = max(v, shfl_xor(v, offset));
  return v;
}

// Lets `kernel` take `bytes` of dynamic shared memory on `device` (over the 48 KiB default); asks
// once per device and kernel.
template <auto kKernel>
void allow_dynamic_smem(int device, int bytes) {
  static std::atomic<uint64_t> asked{0};
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t{1} << device : 0;
  if (bit != 0 && (asked.load(std::memory_order_relaxed) & bit)) return;
  SINTER_CUDA_CHECK(
      cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  asked.fetch_or(bit, std::memory_order_relaxed);
}

// ---- the general kernels ----

// The shapes of the general kernels for storage type T and head sizes up to 32 * kChunks.
template <class T, int kChunks>
struct General {
  using A = Acc<T>;
  static constexpr int kD = 32 * kChunks;  // the padded head size
  static constexpr int kLd = kD + 1;       // row stride of the tiles read a row per lane
  static constexpr int kRows = sizeof(A) == 8 ? 4 : 8;  // rows per warp
  static constexpr int kBlockRows = kWarps * kRows;
};

// Rows [r0, r0 + n) of a (rows, d) matrix into a shared (n, ld) tile as A, with zeros past the
// matrix's rows and past column d (up to kD).
template <int kD, class T, class A>
__device__ __forceinline__ void load_rows(A* dst, int ld, const T* src, int64_t r0, int n,
                                          int64_t rows, int64_t d) {
  for (int e = threadIdx.x; e < n * kD; e += blockDim.x) {
    const int r = e / kD, c = e % kD;
    const int64_t gr = r0 + r;
    dst[r * ld + c] = gr < rows && c < d ? to_acc(src[gr * d + c]) : A(0);
  }
}

// This block's (tile, head) (attn::tile_of).
__device__ __forceinline__ attn::TileOf tile_of(int64_t tiles, bool last_first) {
  return attn::tile_of(blockIdx.x, tiles, last_first);
}

// Where a backward block works (Note [attention tiles]): its tile's first row r0, of the query
// rows for dq (the last tiles first: under a causal mask they have the most keys) and of the key
// rows for dk and dv (block_rows a tile); its head h (a query head for dq, a K/V head for dk and
// dv: attn::pass_heads), the element offsets into Q/dout of that query head or of the first query
// head of that K/V head's group, and into K/V of the K/V head (d a row); its lane and warp.
struct BackwardBlock {
  int64_t r0, h, off_q, off_k;
  int lane, warp;
};

__device__ __forceinline__ BackwardBlock backward_block(const kern::AttentionArgs& a,
                                                        bool by_queries, int block_rows,
                                                        int64_t d) {
  const auto [tile, h] = tile_of(ceil_div(by_queries ? a.tq : a.tk, block_rows), by_queries);
  const int64_t qh = by_queries ? h : kern::attention_first_query_head(a, h);
  const int64_t kvh = by_queries ? kern::attention_kv_head(a, h) : h;
  return {tile * block_rows,
          h,
          qh * a.tq * d,
          kvh * a.tk * d,
          static_cast<int>(threadIdx.x % 32),
          static_cast<int>(threadIdx.x / 32)};
}

// acc[r][c] += sum over lanes j of shfl(w[r], j) * tile[j][32 c + lane]: the warp's rows add the
// tile's 32 column vectors, weighted.
template <int kRows, int kChunks, class A>
__device__ __forceinline__ void add_weighted(A (&acc)[kRows][kChunks], const A (&w)[kRows],
                                             const A* tile, int ld, int lane) {
#pragma unroll 4
  for (int j = 0; j < kCols; ++j) {
    A col[kChunks];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) col[c] = tile[j * ld + 32 * c + lane];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const A wj = __shfl_sync(kFull, w[r], j);
#pragma unroll
      for (int c = 0; c < kChunks; ++c) acc[r][c] += wj * col[c];
    }
  }
}

// s[r] = rows[r] . tile[lane] for the warp's rows of a shared (.., kD) block and the lane's row of
// a shared (32, kLd) tile.
template <int kRows, int kD, class A>
__device__ __forceinline__ void lane_dots(A (&s)[kRows], const A* rows, const A* tile, int ld,
                                          int lane) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) s[r] = A(0);
#pragma unroll 8
  for (int c = 0; c < kD; ++c) {
    const A t = tile[lane * ld + c];
#pragma unroll
    for (int r = 0; r < kRows; ++r) s[r] += rows[r * kD + c] * t;
  }
}

// Stores the warp's row accumulators (times scale[r]) into rows [row0, row0 + kRows) of a (rows, d)
// matrix.
template <int kRows, int kChunks, class T, class A>
__device__ __forceinline__ void store_rows(T* dst, const A (&acc)[kRows][kChunks],
                                           const A (&scale)[kRows], int64_t row0, int64_t rows,
                                           int64_t d, int lane) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (row0 + r >= rows) break;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int col = 32 * c + lane;
      if (col < d) dst[(row0 + r) * d + col] = from_acc<T>(acc[r][c] * scale[r]);
    }
  }
}

template <class T, int kChunks>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(kern::AttentionArgs a, const T* q, const T* k, const T* v, T* out,
                             Acc<T>* lse) {
  using G = General<T, kChunks>;
  using A = typename G::A;
  constexpr int kD = G::kD, kLd = G::kLd, kRows = G::kRows, kBR = G::kBlockRows;
  extern __shared__ __align__(16) unsigned char smem[];
  A* qs = reinterpret_cast<A*>(smem);  // (kBR, kD)
  A* ks = qs + kBR * kD;               // (kCols, kLd)
  A* vs = ks + kCols * kLd;            // (kCols, kD)
  const auto [tile, h] = tile_of(ceil_div(a.tq, kBR), true);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t q0 = tile * kBR, row0 = q0 + warp * kRows;
  const T* qh = q + h * a.tq * a.d;
  const T* kh = k + kern::attention_kv_head(a, h) * a.tk * a.d;
  const T* vh = v + kern::attention_kv_head(a, h) * a.tk * a.d;
  load_rows<kD>(qs, kD, qh, q0, kBR, a.tq, a.d);

  A m[kRows], l[kRows], o[kRows][kChunks];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY;
    l[r] = A(0);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) o[r][c] = A(0);
  }
  const int64_t key_end = a.causal ? min(a.tk, q0 + kBR) : a.tk;
  for (int64_t j0 = 0; j0 < key_end; j0 += kCols) {
    __syncthreads();  // the previous tile is read
    load_rows<kD>(ks, kLd, kh, j0, kCols, a.tk, a.d);
    load_rows<kD>(vs, kD, vh, j0, kCols, a.tk, a.d);
    __syncthreads();
    A s[kRows], w[kRows];
    lane_dots<kRows, kD>(s, qs + warp * kRows * kD, ks, kLd, lane);
    const int64_t j = j0 + lane;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t i = row0 + r;
      const bool valid = i < a.tq && j < kern::attention_key_end(a, i);
      const A sc = valid ? s[r] * static_cast<A>(a.scale) : A(-INFINITY);
      const A m_new = max(m[r], warp_max(sc));  // the same in every lane
      w[r] = A(0);
      if (m_new == A(-INFINITY)) continue;  // no key of this row seen yet
      const A alpha = exp(m[r] - m_new);
      const A p = valid ? exp(sc - m_new) : A(0);
      l[r] = l[r] * alpha + warp_sum(p);
      m[r] = m_new;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) o[r][c] *= alpha;
      if (valid && kern::attention_keep(a, h, i, j)) w[r] = p * static_cast<A>(a.keep_scale);
    }
    add_weighted(o, w, vs, kD, lane);
  }
  A inv[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    inv[r] = A(1) / l[r];
    if (lane == 0 && row0 + r < a.tq) lse[h * a.tq + row0 + r] = m[r] + log(l[r]);
  }
  store_rows(out + h * a.tq * a.d, o, inv, row0, a.tq, a.d, lane);
}

// dots[i] = dout_i . out_i for each of `rows` rows of length d: a warp per row.
template <class T>
__global__ void __launch_bounds__(kThreads)
    attention_row_dots_kernel(const T* dout, const T* out, int64_t rows, int64_t d, Acc<T>* dots) {
  using A = Acc<T>;
  const int lane = threadIdx.x % 32;
  const int64_t warps = thread_count() / 32;
  for (int64_t row = thread_index() / 32; row < rows; row += warps) {
    A s = A(0);
    for (int64_t c = lane; c < d; c += 32)
      s += to_acc(dout[row * d + c]) * to_acc(out[row * d + c]);
    s = warp_sum(s);
    if (lane == 0) dots[row] = s;
  }
}

// dq by query tiles: ds_ij recomputed from lse and the row dots (Note [fused attention]).
template <class T, int kChunks>
__global__ void __launch_bounds__(kThreads)
    attention_dq_kernel(kern::AttentionArgs a, const T* q, const T* k, const T* v, const T* dout,
                        const Acc<T>* lse, const Acc<T>* dots, T* dq) {
  using G = General<T, kChunks>;
  using A = typename G::A;
  constexpr int kD = G::kD, kLd = G::kLd, kRows = G::kRows, kBR = G::kBlockRows;
  extern __shared__ __align__(16) unsigned char smem[];
  A* qs = reinterpret_cast<A*>(smem);  // (kBR, kD)
  A* gs = qs + kBR * kD;               // dout rows (kBR, kD)
  A* ks = gs + kBR * kD;               // (kCols, kLd)
  A* vs = ks + kCols * kLd;            // (kCols, kLd)
  const auto [q0, h, off_q, off_k, lane, warp] = backward_block(a, true, kBR, a.d);
  const int64_t row0 = q0 + warp * kRows;
  load_rows<kD>(qs, kD, q + off_q, q0, kBR, a.tq, a.d);
  load_rows<kD>(gs, kD, dout + off_q, q0, kBR, a.tq, a.d);

  A row_lse[kRows], row_dot[kRows], acc[kRows][kChunks];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const bool in = row0 + r < a.tq;
    row_lse[r] = in ? lse[h * a.tq + row0 + r] : A(0);
    row_dot[r] = in ? dots[h * a.tq + row0 + r] : A(0);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) acc[r][c] = A(0);
  }
  const A scale = static_cast<A>(a.scale), keep_scale = static_cast<A>(a.keep_scale);
  const int64_t key_end = a.causal ? min(a.tk, q0 + kBR) : a.tk;
  for (int64_t j0 = 0; j0 < key_end; j0 += kCols) {
    __syncthreads();
    load_rows<kD>(ks, kLd, k + off_k, j0, kCols, a.tk, a.d);
    load_rows<kD>(vs, kLd, v + off_k, j0, kCols, a.tk, a.d);
    __syncthreads();
    A s[kRows], dp[kRows], ds[kRows];
    lane_dots<kRows, kD>(s, qs + warp * kRows * kD, ks, kLd, lane);
    lane_dots<kRows, kD>(dp, gs + warp * kRows * kD, vs, kLd, lane);
    const int64_t j = j0 + lane;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t i = row0 + r;
      ds[r] = A(0);
      if (i < a.tq && j < kern::attention_key_end(a, i)) {
        const A p = exp(s[r] * scale - row_lse[r]);
        const A keep = kern::attention_keep(a, h, i, j) ? keep_scale : A(0);
        ds[r] = p * (keep * dp[r] - row_dot[r]) * scale;
      }
    }
    add_weighted(acc, ds, ks, kLd, lane);
  }
  A one[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) one[r] = A(1);
  store_rows(dq + off_q, acc, one, row0, a.tq, a.d, lane);
}

// dk and dv by key tiles: the rows are keys, the tiles' columns queries.
template <class T, int kChunks>
__global__ void __launch_bounds__(kThreads)
    attention_dkdv_kernel(kern::AttentionArgs a, const T* q, const T* k, const T* v, const T* dout,
                          const Acc<T>* lse, const Acc<T>* dots, T* dk, T* dv) {
  using G = General<T, kChunks>;
  using A = typename G::A;
  constexpr int kD = G::kD, kLd = G::kLd, kRows = G::kRows, kBR = G::kBlockRows;
  extern __shared__ __align__(16) unsigned char smem[];
  A* ks = reinterpret_cast<A*>(smem);  // key rows (kBR, kD)
  A* vs = ks + kBR * kD;               // (kBR, kD)
  A* qs = vs + kBR * kD;               // query columns (kCols, kLd)
  A* gs = qs + kCols * kLd;            // dout columns (kCols, kLd)
  A* lse_s = gs + kCols * kLd;         // (kCols)
  A* dot_s = lse_s + kCols;            // (kCols)
  const auto [k0, h, off_q, off_k, lane, warp] = backward_block(a, false, kBR, a.d);
  const int64_t row0 = k0 + warp * kRows;
  load_rows<kD>(ks, kD, k + off_k, k0, kBR, a.tk, a.d);
  load_rows<kD>(vs, kD, v + off_k, k0, kBR, a.tk, a.d);

  A gk[kRows][kChunks], gv[kRows][kChunks];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) gk[r][c] = gv[r][c] = A(0);
  }
  const A scale = static_cast<A>(a.scale), keep_scale = static_cast<A>(a.keep_scale);
  // The query heads of this K/V head, in order (attn::pass_heads).
  const int64_t first = kern::attention_first_query_head(a, h);
  for (int64_t g = 0; g < a.group; ++g) {
    const int64_t qh = first + g, off_g = off_q + g * a.tq * a.d;
    // Causal: queries before k0 see none of the tile's keys.
    for (int64_t i0 = a.causal ? k0 : 0; i0 < a.tq; i0 += kCols) {
      __syncthreads();
      load_rows<kD>(qs, kLd, q + off_g, i0, kCols, a.tq, a.d);
      load_rows<kD>(gs, kLd, dout + off_g, i0, kCols, a.tq, a.d);
      if (threadIdx.x < kCols) {
        const int64_t i = i0 + threadIdx.x;
        lse_s[threadIdx.x] = i < a.tq ? lse[qh * a.tq + i] : A(0);
        dot_s[threadIdx.x] = i < a.tq ? dots[qh * a.tq + i] : A(0);
      }
      __syncthreads();
      A s[kRows], dp[kRows], w[kRows], ds[kRows];
      lane_dots<kRows, kD>(s, ks + warp * kRows * kD, qs, kLd, lane);
      lane_dots<kRows, kD>(dp, vs + warp * kRows * kD, gs, kLd, lane);
      const int64_t i = i0 + lane;
      const int64_t end = i < a.tq ? kern::attention_key_end(a, i) : 0;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t j = row0 + r;
        w[r] = ds[r] = A(0);
        if (j < end) {
          const A p = exp(s[r] * scale - lse_s[lane]);
          const A keep = kern::attention_keep(a, qh, i, j) ? keep_scale : A(0);
          w[r] = p * keep;
          ds[r] = p * (keep * dp[r] - dot_s[lane]) * scale;
        }
      }
      add_weighted(gv, w, gs, kLd, lane);
      add_weighted(gk, ds, qs, kLd, lane);
    }
  }
  A one[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) one[r] = A(1);
  store_rows(dk + off_k, gk, one, row0, a.tk, a.d, lane);
  store_rows(dv + off_k, gv, one, row0, a.tk, a.d, lane);
}

template <auto kKernel, class... Args>
void launch_general(const kern::Ctx& ctx, int64_t blocks, size_t smem, const char* name,
                    Args... args) {
  SINTER_CHECK(blocks <= INT32_MAX, name, ": ", blocks, " blocks exceed one grid");
  allow_dynamic_smem<kKernel>(ctx.device, static_cast<int>(smem));
  kKernel<<<static_cast<unsigned>(blocks), kThreads, smem, static_cast<cudaStream_t>(ctx.stream)>>>(
      args...);
  SINTER_LAUNCH_CHECK(name);
}

template <class T, int kChunks>
void general_forward(const kern::Ctx& ctx, const kern::AttentionArgs& a, const T* q, const T* k,
                     const T* v, T* out, Acc<T>* lse) {
  using G = General<T, kChunks>;
  const size_t smem = sizeof(Acc<T>) * (G::kBlockRows * G::kD + kCols * G::kLd + kCols * G::kD);
  launch_general<attention_forward_kernel<T, kChunks>>(ctx, ceil_div(a.tq, G::kBlockRows) * a.bh,
                                                       smem, "attention_forward_kernel", a, q, k, v,
                                                       out, lse);
}

// dots[i] = dout_i . out_i for the backward's rows (a Scratch of bh * tq values).
template <class T>
void row_dots(const kern::Ctx& ctx, const kern::AttentionArgs& a, const T* dout, const T* out,
              Acc<T>* dots) {
  const int64_t rows = a.bh * a.tq;
  attention_row_dots_kernel<T>
      <<<wave_grid(rows * 32, kThreads, ctx.device), kThreads, 0,
         static_cast<cudaStream_t>(ctx.stream)>>>(dout, out, rows, a.d, dots);
  SINTER_LAUNCH_CHECK("attention_row_dots_kernel");
}

template <class T, int kChunks>
void general_backward(const kern::Ctx& ctx, const kern::AttentionArgs& a, const T* q, const T* k,
                      const T* v, const T* dout, const Acc<T>* lse, const Acc<T>* dots, T* dq,
                      T* dk, T* dv) {
  using G = General<T, kChunks>;
  using A = Acc<T>;
  const size_t smem_dq = sizeof(A) * (2 * G::kBlockRows * G::kD + 2 * kCols * G::kLd);
  launch_general<attention_dq_kernel<T, kChunks>>(ctx, ceil_div(a.tq, G::kBlockRows) * a.bh,
                                                  smem_dq, "attention_dq_kernel", a, q, k, v, dout,
                                                  lse, dots, dq);
  const size_t smem_dkdv = sizeof(A) * (2 * G::kBlockRows * G::kD + 2 * kCols * G::kLd + 2 * kCols);
  launch_general<attention_dkdv_kernel<T, kChunks>>(
      ctx, ceil_div(a.tk, G::kBlockRows) * attn::pass_heads(a, false), smem_dkdv,
      "attention_dkdv_kernel", a, q, k, v, dout, lse, dots, dk, dv);
}

// Calls f(std::integral_constant<int, kChunks>) for the smallest kChunks with 32 * kChunks >= d.
template <class F>
void visit_chunks(int64_t d, F&& f) {
  if (d <= 32) return f(std::integral_constant<int, 1>{});
  if (d <= 64) return f(std::integral_constant<int, 2>{});
  return f(std::integral_constant<int, 4>{});
}

// ---- the tensor-core kernels (bf16, f16; D = 32, 64, 128) ----
//
// The tiles and lanes of Note [attention tiles] in kernels/attention_tile.h. Products are warp
// tiles of 16 x 64 (a score tile) or 16 x D (an accumulator) on mma.sync m16n8k16 with f32
// accumulators; a row's values spread over the four lanes of one g (row reductions take two
// shuffles), and a 16 x 64 tile of weights in accumulators is, packed in pairs, the A fragments of
// the next product (pack_weights). Scores are kept in the exp2 domain.

constexpr int kMmaRows = attn::kRows;
constexpr int kMmaN8 = attn::kN8;
constexpr float kLog2e = attn::kLog2e;

template <int kD>
struct MmaTile {
  static constexpr int kLd = attn::kLd<kD>;
  static constexpr int kElems = kMmaRows * kLd;
  static constexpr int kBytes = kElems * 2;
};

// rows [r0, r0 + 64) of a (rows, kD) 16-bit matrix into a shared (64, kLd) tile by cp.async, zeros
// past the matrix's rows.
template <int kD, class T>
__device__ __forceinline__ void copy_tile_async(T* dst, const T* src, int64_t r0, int64_t rows) {
  // The chunks of the mma.sync GEMM's tiles (mma::tile_chunk), whole rows or none.
  for (int e = threadIdx.x; e < kMmaRows * kD * 2 / 16; e += kThreads) {
    const mma::Chunk ch = mma::tile_chunk<T, kD>(e);
    const bool valid = r0 + ch.r < rows;
    mma::cp_async16(dst + ch.r * MmaTile<kD>::kLd + ch.c,
                    valid ? src + (r0 + ch.r) * kD + ch.c : src, valid);
  }
}

// The first four shared (64, kLd) tiles of the block's dynamic shared memory.
template <class T>
struct FourTiles {
  T *t0, *t1, *t2, *t3;
};
template <int kD, class T>
__device__ __forceinline__ FourTiles<T> four_tiles(unsigned char* smem) {
  static_assert(sizeof(T) == 2, "the tensor-core tiles hold 16-bit elements (MmaTile::kBytes)");
  T* base = reinterpret_cast<T*>(smem);
  constexpr int kElems = MmaTile<kD>::kElems;
  return {base, base + kElems, base + 2 * kElems, base + 3 * kElems};
}

// Rows [r0, r0 + 64) of two (rows, kD) matrices a and b (a Q and dout tile, or a K and V tile)
// into the shared tiles sa and sb, as one cp.async group.
template <int kD, class T>
__device__ __forceinline__ void copy_tile_pair_async(T* sa, const T* a, T* sb, const T* b,
                                                     int64_t r0, int64_t rows) {
  copy_tile_async<kD>(sa, a, r0, rows);
  copy_tile_async<kD>(sb, b, r0, rows);
  mma::cp_async_commit();
}

// Waits for this thread's tile copies, then for every thread's.
__device__ __forceinline__ void tiles_landed() {
  mma::cp_async_wait<0>();
  __syncthreads();
}

// Calls f(jn, e) for each of a lane's elements s[jn][e] of a 16 x 64 score tile, unrolled.
template <class F>
__device__ __forceinline__ void for_each_score(F&& f) {
#pragma unroll
  for (int jn = 0; jn < kMmaN8; ++jn) {
#pragma unroll
    for (int e = 0; e < 4; ++e) f(jn, e);
  }
}

// The warp-level products of attention_tile.h on the tensor cores (mma::DeviceIsa).
template <int kD, class T>
__device__ __forceinline__ void load_row_fragments(uint32_t (&fa)[kD / 16][4], const T* rows,
                                                   int lane) {
  attn::load_row_fragments<mma::DeviceIsa, kD>(fa, rows, lane);
}
template <int kD, class T>
__device__ __forceinline__ void mma_rows_tile_t(float (&s)[kMmaN8][4],
                                                const uint32_t (&fa)[kD / 16][4], const T* tile,
                                                int lane) {
  attn::mma_rows_tile_t<mma::DeviceIsa, kD>(s, fa, tile, lane);
}
template <int kD, class T>
__device__ __forceinline__ void mma_weights_tile(float (&acc)[kD / 8][4],
                                                 const uint32_t (&pa)[kMmaRows / 16][4],
                                                 const T* tile, int lane) {
  attn::mma_weights_tile<mma::DeviceIsa, kD>(acc, pa, tile, lane);
}
template <class T>
__device__ __forceinline__ void pack_weights(uint32_t (&pa)[kMmaRows / 16][4],
                                             const float (&w)[kMmaN8][4]) {
  attn::pack_weights<mma::DeviceIsa, T>(pa, w);
}
template <int kD, class T>
__device__ __forceinline__ void backward_products(float (&s)[kMmaN8][4], float (&dp)[kMmaN8][4],
                                                  const T* a_rows, const T* tile_s, const T* b_rows,
                                                  const T* tile_dp, int warp, int lane) {
  attn::backward_products<mma::DeviceIsa, kD>(s, dp, a_rows, tile_s, b_rows, tile_dp, warp, lane);
}
template <int kD, class T>
__device__ __forceinline__ void store_acc_rows(T* dst, const float (&acc)[kD / 8][4],
                                               const int64_t (&row)[2], const float (&scale)[2],
                                               int64_t rows, int lane) {
  attn::store_acc_rows<mma::DeviceIsa, kD>(dst, acc, row, scale, rows, lane);
}

// The forward: Q in registers, K and V tiles double-buffered (the next tile's copies overlap the
// current tile's math).
template <int kD, class T>
__global__ void __launch_bounds__(kThreads)
    attention_forward_mma_kernel(kern::AttentionArgs a, const T* q, const T* k, const T* v, T* out,
                                 float* lse) {
  using M = MmaTile<kD>;
  extern __shared__ __align__(16) unsigned char smem[];
  // Q, then K and V tiles for buffer b at kv + 2 b M::kElems and kv + (2 b + 1) M::kElems.
  T* qs = reinterpret_cast<T*>(smem);
  T* kv = qs + M::kElems;
  const auto [tile, h] = tile_of(ceil_div(a.tq, kMmaRows), true);
  const int64_t q0 = tile * kMmaRows;
  // The rows and columns of attn::lane_row and attn::acc_col, written out: through the functions
  // ptxas gives this kernel 205 registers at D = 128 and 141 at D = 64, against 168 and 126.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const T* kh = k + kern::attention_kv_head(a, h) * a.tk * kD;
  const T* vh = v + kern::attention_kv_head(a, h) * a.tk * kD;
  const int64_t key_end = attn::key_end(a, q0);
  copy_tile_async<kD>(qs, q + h * a.tq * kD, q0, a.tq);
  copy_tile_pair_async<kD>(kv, kh, kv + M::kElems, vh, 0, a.tk);

  const float scale2 = static_cast<float>(a.scale) * kLog2e;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // rows g and g + 8
  float o[kD / 8][4] = {};
  uint32_t qa[kD / 16][4];
  const int64_t rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  int buf = 0;
  for (int64_t j0 = 0; j0 < key_end; j0 += kMmaRows, buf ^= 1) {
    const T* ks = kv + 2 * buf * M::kElems;
    const T* vs = ks + M::kElems;
    if (j0 + kMmaRows < key_end) {  // the next tile, into the other buffers
      T* next = kv + 2 * (buf ^ 1) * M::kElems;
      copy_tile_pair_async<kD>(next, kh, next + M::kElems, vh, j0 + kMmaRows, a.tk);
      mma::cp_async_wait<1>();
    } else {
      mma::cp_async_wait<0>();
    }
    __syncthreads();  // this tile (and Q) landed for every thread's copies
    if (j0 == 0) load_row_fragments<kD>(qa, qs + warp * 16 * M::kLd, lane);
    float s[kMmaN8][4] = {};
    mma_rows_tile_t<kD>(s, qa, ks, lane);

    // Online softmax over the tile.
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int jn = 0; jn < kMmaN8; ++jn) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t j = j0 + 8 * jn + 2 * t + e % 2;
        const bool valid = j < kern::attention_key_end(a, rows[e / 2]);
        s[jn][e] = valid ? s[jn][e] * scale2 : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], s[jn][e]);
      }
    }
    attn::Rescale rescale[2];
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      tile_max[x] = fmaxf(tile_max[x], __shfl_xor_sync(kFull, tile_max[x], 1));
      tile_max[x] = fmaxf(tile_max[x], __shfl_xor_sync(kFull, tile_max[x], 2));
      rescale[x] = attn::online_max(m[x], tile_max[x]);
    }
    float row_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int jn = 0; jn < kMmaN8; ++jn) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(s[jn][e] - rescale[e / 2].base);
        row_sum[e / 2] += p;
        // The dropped weights leave the P V product; 1 / (1 - dropout_p) is applied at the end.
        const int64_t j = j0 + 8 * jn + 2 * t + e % 2;
        s[jn][e] = a.threshold != 0 && !kern::attention_keep(a, h, rows[e / 2], j) ? 0.f : p;
      }
    }
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      row_sum[x] += __shfl_xor_sync(kFull, row_sum[x], 1);
      row_sum[x] += __shfl_xor_sync(kFull, row_sum[x], 2);
      l[x] = l[x] * rescale[x].alpha + row_sum[x];
    }
#pragma unroll
    for (int jn = 0; jn < kD / 8; ++jn) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o[jn][e] *= rescale[e / 2].alpha;
    }
    uint32_t pa[kMmaRows / 16][4];
    pack_weights<T>(pa, s);
    mma_weights_tile<kD>(o, pa, vs, lane);
    __syncthreads();  // every warp is done with this tile's buffers before they are refilled
  }
  float inv[2];
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    inv[x] = static_cast<float>(a.keep_scale) / l[x];
    if (t == 0 && rows[x] < a.tq) lse[h * a.tq + rows[x]] = (m[x] + log2f(l[x])) / kLog2e;
  }
  store_acc_rows<kD>(out + h * a.tq * kD, o, rows, inv, a.tq, lane);
}

// dq by query tiles: per key tile S = Q K^T and dP = dout V^T, dS = P (keep dP - D), dq += dS K.
template <int kD, class T>
__global__ void __launch_bounds__(kThreads)
    attention_dq_mma_kernel(kern::AttentionArgs a, const T* q, const T* k, const T* v,
                            const T* dout, const float* lse, const float* dots, T* dq) {
  extern __shared__ __align__(16) unsigned char smem[];
  const auto [qs, gs, ks, vs] = four_tiles<kD, T>(smem);
  const auto [q0, h, off_q, off_k, lane, warp] = backward_block(a, true, kMmaRows, kD);
  copy_tile_pair_async<kD>(qs, q + off_q, gs, dout + off_q, q0, a.tq);
  const float scale2 = static_cast<float>(a.scale) * kLog2e,
              keep_scale = static_cast<float>(a.keep_scale);
  const int64_t rows[2] = {attn::lane_row(q0, warp, lane, 0), attn::lane_row(q0, warp, lane, 1)};
  float row_lse2[2], row_dot[2];
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    row_lse2[x] = rows[x] < a.tq ? lse[h * a.tq + rows[x]] * kLog2e : 0.f;
    row_dot[x] = rows[x] < a.tq ? dots[h * a.tq + rows[x]] : 0.f;
  }
  float acc[kD / 8][4] = {};
  const int64_t key_end = attn::key_end(a, q0);
  for (int64_t j0 = 0; j0 < key_end; j0 += kMmaRows) {
    __syncthreads();  // the previous K and V tiles are read
    copy_tile_pair_async<kD>(ks, k + off_k, vs, v + off_k, j0, a.tk);
    tiles_landed();
    float s[kMmaN8][4], dp[kMmaN8][4];
    backward_products<kD>(s, dp, qs, ks, gs, vs, warp, lane);
    for_each_score([&](int jn, int e) {
      s[jn][e] =
          attn::backward_weights(a, h, rows[e / 2], j0 + attn::acc_col(jn, e, lane), s[jn][e],
                                 dp[jn][e], scale2, row_lse2[e / 2], row_dot[e / 2], keep_scale)
              .ds;
    });
    uint32_t pa[kMmaRows / 16][4];
    pack_weights<T>(pa, s);
    mma_weights_tile<kD>(acc, pa, ks, lane);
  }
  const float scale[2] = {static_cast<float>(a.scale), static_cast<float>(a.scale)};
  store_acc_rows<kD>(dq + off_q, acc, rows, scale, a.tq, lane);
}

// dk and dv by key tiles: per query tile S^T = K Q^T and dP^T = V dout^T, W^T = P^T keep,
// dS^T = P^T (keep dP^T - D), dv += W^T dout, dk += dS^T Q.
//
// At kD = 128 this kernel spills (sm_90a, CUDA 13.0: 255 registers, a 56-byte frame, 76 bytes of
// spill stores and 160 of loads per thread). A thread keeps the dK and dV accumulators of its rows,
// 2 x kD / 8 x 4 = 128 f32, through the whole sweep over query tiles, and in each tile the scores
// and dP, 2 x kMmaN8 x 4 = 64 f32, and 16 packed weights: 208 live values before any pointer or
// index. It is left whole for now: what spills is 14 words of loop state, reloaded from L1 once per
// query tile against the tile's 16 x 64 x 128 products for each of dK and dV per warp, while each
// way out adds tensor-core work (dK and dV in two kernels, each recomputing S and dP; or two warps
// per 16 key rows, each owning 64 of the 128 columns, both computing the scores). Which costs less
// is a measurement on a GPU (bench_attention's backward rows at D = 128), not made yet. D = 32 and
// 64 do not spill (165 and 241 registers).
template <int kD, class T>
__global__ void __launch_bounds__(kThreads)
    attention_dkdv_mma_kernel(kern::AttentionArgs a, const T* q, const T* k, const T* v,
                              const T* dout, const float* lse, const float* dots, T* dk, T* dv) {
  extern __shared__ __align__(16) unsigned char smem[];
  const auto [ks, vs, qs, gs] = four_tiles<kD, T>(smem);
  float* lse2_s = reinterpret_cast<float*>(smem + 4 * MmaTile<kD>::kBytes);  // (64)
  float* dot_s = lse2_s + kMmaRows;                                          // (64)
  const auto [k0, h, off_q, off_k, lane, warp] = backward_block(a, false, kMmaRows, kD);
  copy_tile_pair_async<kD>(ks, k + off_k, vs, v + off_k, k0, a.tk);
  const float scale2 = static_cast<float>(a.scale) * kLog2e,
              keep_scale = static_cast<float>(a.keep_scale);
  const int64_t keys[2] = {attn::lane_row(k0, warp, lane, 0), attn::lane_row(k0, warp, lane, 1)};
  float gk[kD / 8][4] = {}, gv[kD / 8][4] = {};
  // The query heads of this K/V head, in order (attn::pass_heads).
  const int64_t first = kern::attention_first_query_head(a, h);
  for (int64_t grp = 0; grp < a.group; ++grp) {
    const int64_t qh = first + grp, off_g = off_q + grp * a.tq * kD;
    for (int64_t i0 = attn::query_begin(a, k0); i0 < a.tq; i0 += kMmaRows) {
      __syncthreads();  // the previous query tiles are read
      copy_tile_pair_async<kD>(qs, q + off_g, gs, dout + off_g, i0, a.tq);
      if (threadIdx.x < kMmaRows) {
        const int64_t i = i0 + threadIdx.x;
        lse2_s[threadIdx.x] = i < a.tq ? lse[qh * a.tq + i] * kLog2e : 0.f;
        dot_s[threadIdx.x] = i < a.tq ? dots[qh * a.tq + i] : 0.f;
      }
      tiles_landed();
      float st[kMmaN8][4], dpt[kMmaN8][4];
      backward_products<kD>(st, dpt, ks, qs, vs, gs, warp, lane);
      for_each_score([&](int jn, int e) {
        const int col = attn::acc_col(jn, e, lane);
        const attn::Grads w =
            attn::backward_weights(a, qh, i0 + col, keys[e / 2], st[jn][e], dpt[jn][e], scale2,
                                   lse2_s[col], dot_s[col], keep_scale);
        st[jn][e] = w.w;
        dpt[jn][e] = w.ds;
      });
      uint32_t pa[kMmaRows / 16][4];
      pack_weights<T>(pa, st);
      mma_weights_tile<kD>(gv, pa, gs, lane);
      pack_weights<T>(pa, dpt);
      mma_weights_tile<kD>(gk, pa, qs, lane);
    }
  }
  mma::cp_async_wait<0>();  // no query tile ran (causal, k0 >= tq): the K and V copies are done
  const float one[2] = {1.f, 1.f};
  const float scale[2] = {static_cast<float>(a.scale), static_cast<float>(a.scale)};
  store_acc_rows<kD>(dk + off_k, gk, keys, scale, a.tk, lane);
  store_acc_rows<kD>(dv + off_k, gv, keys, one, a.tk, lane);
}

// Calls f(std::integral_constant<int, D>) when the tensor-core kernels take the call: bf16 or f16
// on sm_80+, D = 32, 64 or 128, and the 16-byte rows cp.async needs. False when they do not.
template <class F>
bool visit_mma_head(const kern::Ctx& ctx, const kern::AttentionArgs& a,
                    std::initializer_list<const void*> operands, F&& f) {
  if (device_compute_capability(ctx.device) < 80) return false;
  for (const void* p : operands) {
    if (!aligned16(p)) return false;
  }
  switch (a.d) {
    case 32:
      f(std::integral_constant<int, 32>{});
      return true;
    case 64:
      f(std::integral_constant<int, 64>{});
      return true;
    case 128:
      f(std::integral_constant<int, 128>{});
      return true;
    default:
      return false;
  }
}

template <class T>
bool mma_forward(const kern::Ctx& ctx, const kern::AttentionArgs& a, const T* q, const T* k,
                 const T* v, T* out, float* lse) {
  return visit_mma_head(ctx, a, {q, k, v, out}, [&](auto head) {
    constexpr int kD = decltype(head)::value;
    launch_general<attention_forward_mma_kernel<kD, T>>(
        ctx, ceil_div(a.tq, kMmaRows) * a.bh, 5 * MmaTile<kD>::kBytes,
        "attention_forward_mma_kernel", a, q, k, v, out, lse);
  });
}

template <class T>
bool mma_backward(const kern::Ctx& ctx, const kern::AttentionArgs& a, const T* q, const T* k,
                  const T* v, const T* dout, const float* lse, const float* dots, T* dq, T* dk,
                  T* dv) {
  return visit_mma_head(ctx, a, {q, k, v, dout, dq, dk, dv}, [&](auto head) {
    constexpr int kD = decltype(head)::value;
    const int bytes = 4 * MmaTile<kD>::kBytes;
    launch_general<attention_dq_mma_kernel<kD, T>>(ctx, ceil_div(a.tq, kMmaRows) * a.bh, bytes,
                                                   "attention_dq_mma_kernel", a, q, k, v, dout, lse,
                                                   dots, dq);
    launch_general<attention_dkdv_mma_kernel<kD, T>>(
        ctx, ceil_div(a.tk, kMmaRows) * attn::pass_heads(a, false),
        bytes + 2 * kMmaRows * sizeof(float), "attention_dkdv_mma_kernel", a, q, k, v, dout, lse,
        dots, dk, dv);
  });
}

// The op sends heads up to kMaxHead, and at least one query and one key (fused_refusal).
constexpr int64_t kMaxHead = 128;

void check_shape(const AttentionArgs& a, const char* name) {
  SINTER_CHECK(a.d >= 1 && a.d <= kMaxHead && a.tq >= 1 && a.tk >= 1, name,
               ": the CUDA kernels take 1 <= D <= ", kMaxHead, " and Tq, Tk >= 1, got D ", a.d,
               ", Tq ", a.tq, ", Tk ", a.tk);
  SINTER_CHECK(a.group >= 1 && a.heads % a.group == 0 && a.bh % a.heads == 0, name, ": groups of ",
               a.group, " query heads must divide the ", a.heads, " heads, which divide the ", a.bh,
               " batch-heads");
}

// The kernel of Note [rotary embedding]: one thread per pair (row r, pair i) in a grid-stride loop;
// the angle and its cosine and sine in double, the turn in the accumulation type.
template <class T>
__global__ void rope_kernel(kern::RopeArgs a, const T* x, const int64_t* positions, T* y) {
  using A = Acc<T>;
  const int64_t half = a.d / 2, pairs = a.outer * a.t * half;
  for (int64_t p = thread_index(); p < pairs; p += thread_count()) {
    const int64_t r = p / half, i = p % half;
    int64_t first = 0, second = 0;
    kern::rope_pair(a, i, &first, &second);
    double sn = 0, c = 0;
    sincos(kern::rope_angle(a, positions[r % a.t], i), &sn, &c);
    if (a.inverse) sn = -sn;
    const A u = to_acc(x[r * a.d + first]), v = to_acc(x[r * a.d + second]);
    const A ca = static_cast<A>(c), sa = static_cast<A>(sn);
    y[r * a.d + first] = from_acc<T>(u * ca - v * sa);
    y[r * a.d + second] = from_acc<T>(u * sa + v * ca);
  }
}

}  // namespace

void attention_forward(const Ctx& ctx, const AttentionArgs& a, const void* q, const void* k,
                       const void* v, void* out, void* lse) {
  check_shape(a, "attention_forward");
  launch_floating(ctx, a.dtype, "attention_forward", [&](auto tag, cudaStream_t) {
    using T = typename decltype(tag)::type;
    const T* qt = static_cast<const T*>(q);
    const T* kt = static_cast<const T*>(k);
    const T* vt = static_cast<const T*>(v);
    T* ot = static_cast<T*>(out);
    auto* lt = static_cast<Acc<T>*>(lse);
    if constexpr (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>) {
      if (mma_forward(ctx, a, qt, kt, vt, ot, lt)) return;
    }
    visit_chunks(a.d, [&](auto chunks) {
      general_forward<T, decltype(chunks)::value>(ctx, a, qt, kt, vt, ot, lt);
    });
  });
}

void attention_backward(const Ctx& ctx, const AttentionArgs& a, const void* q, const void* k,
                        const void* v, const void* out, const void* dout, const void* lse, void* dq,
                        void* dk, void* dv) {
  check_shape(a, "attention_backward");
  launch_floating(ctx, a.dtype, "attention_backward", [&](auto tag, cudaStream_t) {
    using T = typename decltype(tag)::type;
    const T* qt = static_cast<const T*>(q);
    const T* kt = static_cast<const T*>(k);
    const T* vt = static_cast<const T*>(v);
    const T* gt = static_cast<const T*>(dout);
    const auto* lt = static_cast<const Acc<T>*>(lse);
    T* dqt = static_cast<T*>(dq);
    T* dkt = static_cast<T*>(dk);
    T* dvt = static_cast<T*>(dv);
    Scratch<Acc<T>> dots(ctx, a.bh * a.tq);
    row_dots(ctx, a, gt, static_cast<const T*>(out), dots.get());
    if constexpr (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>) {
      if (mma_backward(ctx, a, qt, kt, vt, gt, lt, dots.get(), dqt, dkt, dvt)) return;
    }
    visit_chunks(a.d, [&](auto chunks) {
      general_backward<T, decltype(chunks)::value>(ctx, a, qt, kt, vt, gt, lt, dots.get(), dqt, dkt,
                                                   dvt);
    });
  });
}

void rope_apply(const Ctx& ctx, const RopeArgs& a, const void* x, const int64_t* positions,
                void* y) {
  const int64_t pairs = a.outer * a.t * (a.d / 2);
  if (pairs == 0) return;
  launch_floating(ctx, a.dtype, "rope", [&](auto tag, cudaStream_t stream) {
    using T = typename decltype(tag)::type;
    rope_kernel<T><<<wave_grid(pairs, kThreads, ctx.device), kThreads, 0, stream>>>(
        a, static_cast<const T*>(x), positions, static_cast<T*>(y));
    SINTER_LAUNCH_CHECK("rope_kernel");
  });
}

}  // namespace sinter::cudak

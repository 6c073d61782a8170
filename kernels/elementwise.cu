// CUDA elementwise kernels: unary, binary, where and copy over an ElementwiseIter. Each op has a
// vectorized path (16-byte loads) for contiguous, aligned operands of one dtype and a general path
// for strided, broadcast and mixed-dtype ones; binary ops also have a vectorized path for row and
// column broadcasts (Note [row layout]). The math is kern/elementwise_ops.h, as on the CPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "kern/elementwise.h"
#include "kern/scalar_ops.h"

namespace sinter::cudak {
namespace {

constexpr int kBlock = 256;

// ---- element types ----

// bf16 and f16 are computed as float (cuda_util.cuh's widen and from_acc).
template <class C, class T>
SINTER_HD C load_as(T v) {
  return convert<C>(widen(v));
}

// The general-path kernels give each thread kUnroll elements, blockDim.x apart (so a warp's
// accesses for one j stay adjacent), and issue all their loads before any math: one element per
// thread leaves too few loads in flight to cover memory latency on strided access.
constexpr int kUnroll = 4;

// Loads the first `cnt` of kUnroll elements (offsets off[j][k]) of a tensor as V.
template <class V, class T, int N>
__device__ __forceinline__ void load_typed(const T* p, const int64_t (&off)[kUnroll][N], int k,
                                           int cnt, V (&dst)[kUnroll]) {
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    if (j < cnt) dst[j] = from_acc<V>(widen(p[off[j][k]]));
  }
}

// The same for a runtime dtype t. The switch is uniform across a launch, so threads never diverge
// on it, and it is taken once per kUnroll elements.
template <class V, int N>
__device__ __forceinline__ void load_dyn(const void* p, DType t, const int64_t (&off)[kUnroll][N],
                                         int k, int cnt, V (&dst)[kUnroll]) {
  switch (t) {
    case DType::f32:
      load_typed(static_cast<const float*>(p), off, k, cnt, dst);
      return;
    case DType::f64:
      load_typed(static_cast<const double*>(p), off, k, cnt, dst);
      return;
    case DType::bf16:
      load_typed(static_cast<const __nv_bfloat16*>(p), off, k, cnt, dst);
      return;
    case DType::f16:
      load_typed(static_cast<const __half*>(p), off, k, cnt, dst);
      return;
    case DType::i64:
      load_typed(static_cast<const int64_t*>(p), off, k, cnt, dst);
      return;
    case DType::i32:
      load_typed(static_cast<const int32_t*>(p), off, k, cnt, dst);
      return;
    case DType::u8:
      load_typed(static_cast<const uint8_t*>(p), off, k, cnt, dst);
      return;
    case DType::b8:
      load_typed(static_cast<const bool*>(p), off, k, cnt, dst);
      return;
    case DType::f8e4m3:
      load_typed(static_cast<const DevFloat8E4M3*>(p), off, k, cnt, dst);
      return;
    case DType::f8e5m2:
      load_typed(static_cast<const DevFloat8E5M2*>(p), off, k, cnt, dst);
      return;
  }
}

template <class T, class C, int N>
__device__ __forceinline__ void store_typed(T* p, const int64_t (&off)[kUnroll][N], int cnt,
                                            const C (&src)[kUnroll]) {
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    if (j < cnt) p[off[j][0]] = from_acc<T>(src[j]);
  }
}

// Stores to operand 0 (the output) of runtime dtype t.
template <class C, int N>
__device__ __forceinline__ void store_dyn(void* p, DType t, const int64_t (&off)[kUnroll][N],
                                          int cnt, const C (&src)[kUnroll]) {
  switch (t) {
    case DType::f32:
      store_typed(static_cast<float*>(p), off, cnt, src);
      return;
    case DType::f64:
      store_typed(static_cast<double*>(p), off, cnt, src);
      return;
    case DType::bf16:
      store_typed(static_cast<__nv_bfloat16*>(p), off, cnt, src);
      return;
    case DType::f16:
      store_typed(static_cast<__half*>(p), off, cnt, src);
      return;
    case DType::i64:
      store_typed(static_cast<int64_t*>(p), off, cnt, src);
      return;
    case DType::i32:
      store_typed(static_cast<int32_t*>(p), off, cnt, src);
      return;
    case DType::u8:
      store_typed(static_cast<uint8_t*>(p), off, cnt, src);
      return;
    case DType::b8:
      store_typed(static_cast<bool*>(p), off, cnt, src);
      return;
    case DType::f8e4m3:
      store_typed(static_cast<DevFloat8E4M3*>(p), off, cnt, src);
      return;
    case DType::f8e5m2:
      store_typed(static_cast<DevFloat8E5M2*>(p), off, cnt, src);
      return;
  }
}

// The bits of scalar operand o's value in dtype t, in the low element_size(t) bytes (a scalar
// operand of where and of a fill).
uint64_t scalar_bits(const kern::Operand& o, DType t) {
  uint64_t bits = 0;
  visit_copy(t, "elementwise", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T x;
    if constexpr (std::is_integral_v<T>) {
      x = kern::scalar_as<T>(o);
    } else {
      x = from_acc<T>(kern::scalar_as<Acc<T>>(o));
    }
    std::memcpy(&bits, &x, sizeof(T));
  });
  return bits;
}

// ---- launch configuration ----

// One thread per work item up to a full wave of resident threads; grid-stride loops do the rest.
unsigned grid_for(int64_t work, int device) { return wave_grid(work, kBlock, device); }

// For the general-path kernels, whose threads take kUnroll elements each.
unsigned unrolled_grid(int64_t n, int device) {
  return grid_for((n + kUnroll - 1) / kUnroll, device);
}

// ---- offset calculator ----

// n / d as (umulhi(n, mul) + n) >> shift with precomputed mul and shift (Granlund and Montgomery's
// division by invariant integers), exact for n, d < 2^31: a few instructions where a division
// takes dozens.
struct FastDiv {
  uint32_t div = 1, mul = 1, shift = 0;

  static FastDiv make(uint32_t d) {
    FastDiv f;
    f.div = d;
    while ((uint64_t{1} << f.shift) < d) ++f.shift;
    f.mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << f.shift) - d)) / d + 1);
    return f;
  }
  __device__ __forceinline__ uint32_t quotient(uint32_t n) const {
    return (__umulhi(n, mul) + n) >> shift;
  }
};

// Maps a linear index of the iteration space to the element offset of each of N operands, in
// 32-bit arithmetic: launchers split larger iterations first (for_each_piece32). Dims are stored
// innermost first; loops run over kMaxDims with a break, so arrays index statically and stay in
// the parameter bank.
template <int N>
struct Indexer {
  int ndim = 0;
  bool flat = false;  // contiguous iteration: every tensor operand's offset is the index itself
  FastDiv div[kMaxDims];
  int32_t stride[kMaxDims][N] = {};

  __device__ __forceinline__ void offsets(int64_t i, int64_t (&off)[N]) const {
    if (flat) {
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] = i;
      return;
    }
    auto r = static_cast<uint32_t>(i);
    int32_t off32[N] = {};
#pragma unroll
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      const uint32_t q = div[d].quotient(r);
      const auto idx = static_cast<int32_t>(r - q * div[d].div);
#pragma unroll
      for (int k = 0; k < N; ++k) off32[k] += idx * stride[d][k];
      r = q;
    }
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = off32[k];
  }
};

constexpr int64_t kMax32 = int64_t{1} << 31;

// Whether the strided index math of `it` fits 32 bits: fewer than 2^31 elements, and no operand
// offset of 2^31 or more.
bool fits32(const ElementwiseIter& it) {
  if (it.numel >= kMax32) return false;
  for (int k = 0; k < it.noperands; ++k) {
    int64_t extent = 0;
    for (int d = 0; d < it.ndim; ++d) extent += (it.sizes[d] - 1) * std::abs(it.op[k].strides[d]);
    if (extent >= kMax32) return false;
  }
  return true;
}

// Calls f(piece) on pieces of `it` that the 32-bit Indexer can walk, halving the dim that spans the
// most memory in some operand (the outermost among equals) until they fit: a transposed copy of
// 50000 x 50000 splits its strided inner dim in a few steps rather than its outer one into 50000
// rows. (A contiguous iteration needs no division at all.)
template <class F>
void for_each_piece32(const ElementwiseIter& it, F&& f) {
  if (it.contiguous || fits32(it)) {
    f(it);
    return;
  }
  int d = 0;
  int64_t widest = -1;
  for (int j = 0; j < it.ndim; ++j) {
    if (it.sizes[j] == 1) continue;
    int64_t extent = it.sizes[j] - 1;  // in elements of a stride-1 operand, for the count alone
    for (int k = 0; k < it.noperands; ++k) {
      extent = std::max(extent, (it.sizes[j] - 1) * std::abs(it.op[k].strides[j]));
    }
    if (extent > widest) {
      widest = extent;
      d = j;
    }
  }
  const int64_t half = it.sizes[d] / 2;
  ElementwiseIter lo = it, hi = it;
  lo.sizes[d] = half;
  hi.sizes[d] = it.sizes[d] - half;
  lo.numel = it.numel / it.sizes[d] * half;
  hi.numel = it.numel - lo.numel;
  for (int k = 0; k < it.noperands; ++k) {
    if (it.op[k].data == nullptr) continue;
    const int64_t bytes =
        half * it.op[k].strides[d] * static_cast<int64_t>(element_size(it.op[k].dtype));
    hi.op[k].data = static_cast<char*>(it.op[k].data) + bytes;
  }
  for_each_piece32(lo, f);
  for_each_piece32(hi, f);
}

// Offsets of this thread's elements base + j * blockDim.x, j < kUnroll; returns how many are < n.
template <int N>
__device__ __forceinline__ int unrolled_offsets(const Indexer<N>& ix, int64_t base, int64_t n,
                                                int64_t (&off)[kUnroll][N]) {
  int cnt = 0;
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    const int64_t i = base + static_cast<int64_t>(j) * blockDim.x;
    if (i < n) {
      ix.offsets(i, off[j]);
      cnt = j + 1;
    }
  }
  return cnt;
}

// First element of this thread's first tile of kUnroll * blockDim.x elements, and the stride
// between its tiles.
__device__ __forceinline__ int64_t tile_start() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x * kUnroll + threadIdx.x;
}
__device__ __forceinline__ int64_t tile_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x * kUnroll;
}

// it: one piece from for_each_piece32.
template <int N>
Indexer<N> make_indexer(const ElementwiseIter& it) {
  Indexer<N> ix;
  ix.flat = it.contiguous;
  ix.ndim = it.ndim;
  // The flat walk divides nothing; and a contiguous iteration is never split, so its sizes can
  // reach 2^32, where the divisor of 32 bits would be 0.
  if (ix.flat) return ix;
  for (int j = 0; j < it.ndim; ++j) {
    const int d = it.ndim - 1 - j;
    ix.div[j] = FastDiv::make(static_cast<uint32_t>(it.sizes[d]));
    for (int k = 0; k < N; ++k) {
      // A dim of size 1 never moves the offset, whatever its stride.
      ix.stride[j][k] = it.sizes[d] == 1 ? 0 : static_cast<int32_t>(it.op[k].strides[d]);
    }
  }
  return ix;
}

// The operands of the general path: pointer and dtype of each, and the value (in the compute type)
// of each scalar operand.
template <int N, class C>
struct Operands {
  void* data[N] = {};
  DType dtype[N] = {};
  C scalar[N] = {};

  __device__ __forceinline__ void load(int k, const int64_t (&off)[kUnroll][N], int cnt,
                                       C (&dst)[kUnroll]) const {
    if (data[k]) {
      load_dyn(data[k], dtype[k], off, k, cnt, dst);
    } else {
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) dst[j] = scalar[k];
    }
  }
};

template <int N, class C>
Operands<N, C> make_operands(const ElementwiseIter& it) {
  Operands<N, C> ops;
  for (int k = 0; k < N; ++k) {
    ops.data[k] = it.op[k].data;
    ops.dtype[k] = it.op[k].dtype;
    ops.scalar[k] = kern::scalar_as<C>(it.op[k]);
  }
  return ops;
}

// ---- unary ----

template <class C, UnaryOp OP>
__global__ void unary_kernel(Indexer<2> ix, Operands<2, C> ops, int64_t n, C p0, C p1) {
  for (int64_t base = tile_start(); base < n; base += tile_stride()) {
    int64_t off[kUnroll][2];
    const int cnt = unrolled_offsets(ix, base, n, off);
    C x[kUnroll];
    ops.load(1, off, cnt, x);
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) x[j] = unary_fn<OP>(x[j], p0, p1);
    store_dyn(ops.data[0], ops.dtype[0], off, cnt, x);
  }
}

// out, in: contiguous, n elements of T, 16-byte aligned.
template <class T, class C, UnaryOp OP>
__global__ void unary_vec_kernel(T* out, const T* in, int64_t n, C p0, C p1) {
  constexpr int kVec = kVecWidth<T>;
  using V = Vec<T, kVec>;
  const int64_t nvec = n / kVec;
  for (int64_t v = thread_index(); v < nvec; v += thread_count()) {
    const V x = reinterpret_cast<const V*>(in)[v];
    V y;
#pragma unroll
    for (int j = 0; j < kVec; ++j) y.v[j] = from_acc<T>(unary_fn<OP>(load_as<C>(x.v[j]), p0, p1));
    reinterpret_cast<V*>(out)[v] = y;
  }
  for (int64_t i = nvec * kVec + thread_index(); i < n; i += thread_count()) {
    out[i] = from_acc<T>(unary_fn<OP>(load_as<C>(in[i]), p0, p1));
  }
}

// Calls f(TypeTag<T>{}) if `t` is a storage type that the vectorized kernels instantiate for
// compute type C, and returns whether it did.
template <class C, class F>
bool visit_vec_storage(DType t, F&& f) {
  if constexpr (std::is_same_v<C, float>) {
    if (t == DType::f32) return f(TypeTag<float>{}), true;
    if (t == DType::bf16) return f(TypeTag<__nv_bfloat16>{}), true;
    if (t == DType::f16) return f(TypeTag<__half>{}), true;
  } else if constexpr (std::is_same_v<C, double>) {
    if (t == DType::f64) return f(TypeTag<double>{}), true;
  } else {
    if (t == DType::i64) return f(TypeTag<int64_t>{}), true;
    if (t == DType::i32) return f(TypeTag<int32_t>{}), true;
    if (t == DType::u8) return f(TypeTag<uint8_t>{}), true;
    if (t == DType::b8) return f(TypeTag<bool>{}), true;
  }
  return false;
}

template <class C, UnaryOp OP>
void launch_unary(const ElementwiseIter& it, C p0, C p1, cudaStream_t stream, int device) {
  const Operand& out = it.op[0];
  const Operand& in = it.op[1];
  bool done = false;
  if (it.contiguous && in.data && out.dtype == in.dtype) {
    visit_vec_storage<C>(in.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, uint8_t> && !std::is_same_v<T, bool>) {
        if (!aligned_to(out.data, 16) || !aligned_to(in.data, 16)) return;
        unary_vec_kernel<T, C, OP>
            <<<grid_for(it.numel / kVecWidth<T> + 1, device), kBlock, 0, stream>>>(
                static_cast<T*>(out.data), static_cast<const T*>(in.data), it.numel, p0, p1);
        SINTER_LAUNCH_CHECK("unary");
        done = true;
      }
    });
  }
  if (done) return;
  unary_kernel<C, OP><<<unrolled_grid(it.numel, device), kBlock, 0, stream>>>(
      make_indexer<2>(it), make_operands<2, C>(it), it.numel, p0, p1);
  SINTER_LAUNCH_CHECK("unary");
}

// ---- binary ----

template <class C, BinaryOp OP>
__global__ void binary_kernel(Indexer<3> ix, Operands<3, C> ops, int64_t n, C p0, C p1) {
  for (int64_t base = tile_start(); base < n; base += tile_stride()) {
    int64_t off[kUnroll][3];
    const int cnt = unrolled_offsets(ix, base, n, off);
    C x[kUnroll], y[kUnroll];
    ops.load(1, off, cnt, x);
    ops.load(2, off, cnt, y);
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) x[j] = binary_fn<OP>(x[j], y[j], p0, p1);
    store_dyn(ops.data[0], ops.dtype[0], off, cnt, x);
  }
}

// kVec elements of a contiguous input from vector v on, or the scalar s repeated if p is null.
template <class C, class T, int kVec>
__device__ __forceinline__ void load_vec(const T* p, C s, int64_t v, C (&dst)[kVec]) {
  if (p == nullptr) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) dst[j] = s;
  } else {
    const Vec<T, kVec> x = reinterpret_cast<const Vec<T, kVec>*>(p)[v];
#pragma unroll
    for (int j = 0; j < kVec; ++j) dst[j] = load_as<C>(x.v[j]);
  }
}

// out: contiguous TO (T, or bool for comparisons); a, b: contiguous T, or null for the scalars
// sa, sb.
template <class T, class TO, class C, BinaryOp OP>
__global__ void binary_vec_kernel(TO* out, const T* a, const T* b, C sa, C sb, int64_t n, C p0,
                                  C p1) {
  constexpr int kVec = kVecWidth<T>;
  using VO = Vec<TO, kVec>;
  const int64_t nvec = n / kVec;
  for (int64_t v = thread_index(); v < nvec; v += thread_count()) {
    C x[kVec], y[kVec];
    load_vec<C, T, kVec>(a, sa, v, x);
    load_vec<C, T, kVec>(b, sb, v, y);
    VO r;
#pragma unroll
    for (int j = 0; j < kVec; ++j) r.v[j] = from_acc<TO>(binary_fn<OP>(x[j], y[j], p0, p1));
    reinterpret_cast<VO*>(out)[v] = r;
  }
  for (int64_t i = nvec * kVec + thread_index(); i < n; i += thread_count()) {
    const C x = a ? load_as<C>(a[i]) : sa;
    const C y = b ? load_as<C>(b[i]) : sb;
    out[i] = from_acc<TO>(binary_fn<OP>(x, y, p0, p1));
  }
}

// ---- binary over rows ----

// Note [row layout]
// An iteration whose innermost dim has stride 1 in the output and stride 1 or 0 (broadcast) in
// every tensor input, e.g. x[m, n] * y[n] or x[m, n] - mean[m, 1]. It is walked as rows of `inner`
// elements; the outer dims (any strides) give each operand's row offset, computed once per
// kVec-element vector. A vector that stays inside its row loads each operand with one 16-byte load
// when its address is aligned (kVec loads of adjacent elements otherwise); a vector across a row
// end takes one element at a time.

// Whether `it` has the row layout (its innermost dim is then the row).
bool row_layout(const ElementwiseIter& it) {
  const int d = it.ndim - 1;
  if (d < 0 || it.op[0].strides[d] != 1) return false;
  for (int k = 1; k < it.noperands; ++k) {
    const Operand& o = it.op[k];
    if (o.data && o.strides[d] != 0 && o.strides[d] != 1) return false;
  }
  return true;
}

// Rows of `it` (Note [row layout]): `rows` maps a row index to the element offset of each operand's
// row start, and an operand k with inner_const[k] reads one element per row.
template <int N>
struct RowIter {
  Indexer<N> rows;
  FastDiv inner;
  bool inner_const[N] = {};
};

// it: one piece from for_each_piece32 with row_layout(it).
template <int N>
RowIter<N> make_row_iter(const ElementwiseIter& it) {
  ElementwiseIter outer = it;
  outer.ndim = it.ndim - 1;
  outer.contiguous = false;
  RowIter<N> ri;
  ri.rows = make_indexer<N>(outer);
  ri.inner = FastDiv::make(static_cast<uint32_t>(it.sizes[it.ndim - 1]));
  for (int k = 0; k < N; ++k) ri.inner_const[k] = it.op[k].strides[it.ndim - 1] == 0;
  return ri;
}

// kVec elements of one row of an input starting at p: the scalar s if p is null, p[0] repeated if
// the operand is constant along the row, else p[0..kVec).
template <class C, class T, int kVec>
__device__ __forceinline__ void load_row_vec(const T* p, bool constant, C s, C (&dst)[kVec]) {
  if (p == nullptr || constant) {
    const C x = p ? load_as<C>(*p) : s;
#pragma unroll
    for (int j = 0; j < kVec; ++j) dst[j] = x;
  } else if (aligned16(p)) {
    const Vec<T, kVec> x = *reinterpret_cast<const Vec<T, kVec>*>(p);
#pragma unroll
    for (int j = 0; j < kVec; ++j) dst[j] = load_as<C>(x.v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) dst[j] = load_as<C>(p[j]);
  }
}

// Row start of an input (null for a scalar) plus column c unless the operand is constant.
template <class T>
__device__ __forceinline__ const T* row_ptr(const T* p, int64_t off, bool constant, uint32_t c) {
  return p ? p + off + (constant ? 0 : c) : nullptr;
}

// out: TO (T, or bool for comparisons) with stride 1 along rows; a, b: T, or null for the scalars
// sa, sb. n < 2^31 elements (a for_each_piece32 piece).
template <class T, class TO, class C, BinaryOp OP>
__global__ void binary_rows_kernel(RowIter<3> ri, TO* out, const T* a, const T* b, C sa, C sb,
                                   int64_t n, C p0, C p1) {
  constexpr int kVec = kVecWidth<T>;
  using VO = Vec<TO, kVec>;
  const int64_t nvec = (n + kVec - 1) / kVec;
  const uint32_t inner = ri.inner.div;
  for (int64_t v = thread_index(); v < nvec; v += thread_count()) {
    const auto i0 = static_cast<uint32_t>(v * kVec);
    const uint32_t r = ri.inner.quotient(i0);
    const uint32_t c = i0 - r * inner;
    if (c + kVec <= inner) {
      int64_t off[3];
      ri.rows.offsets(r, off);
      C x[kVec], y[kVec];
      load_row_vec<C, T, kVec>(row_ptr(a, off[1], ri.inner_const[1], c), ri.inner_const[1], sa, x);
      load_row_vec<C, T, kVec>(row_ptr(b, off[2], ri.inner_const[2], c), ri.inner_const[2], sb, y);
      VO res;
#pragma unroll
      for (int j = 0; j < kVec; ++j) res.v[j] = from_acc<TO>(binary_fn<OP>(x[j], y[j], p0, p1));
      TO* o = out + off[0] + c;
      if (reinterpret_cast<uintptr_t>(o) % sizeof(VO) == 0) {
        *reinterpret_cast<VO*>(o) = res;
      } else {
#pragma unroll
        for (int j = 0; j < kVec; ++j) o[j] = res.v[j];
      }
    } else {
      for (int j = 0; j < kVec; ++j) {
        const uint32_t i = i0 + j;
        if (i >= n) break;
        const uint32_t rr = ri.inner.quotient(i);
        const uint32_t cc = i - rr * inner;
        int64_t off[3];
        ri.rows.offsets(rr, off);
        const T* pa = row_ptr(a, off[1], ri.inner_const[1], cc);
        const T* pb = row_ptr(b, off[2], ri.inner_const[2], cc);
        const C x = pa ? load_as<C>(*pa) : sa;
        const C y = pb ? load_as<C>(*pb) : sb;
        out[off[0] + cc] = from_acc<TO>(binary_fn<OP>(x, y, p0, p1));
      }
    }
  }
}

template <class C, BinaryOp OP>
void launch_binary(const ElementwiseIter& it, C p0, C p1, cudaStream_t stream, int device) {
  const Operand& out = it.op[0];
  const Operand& a = it.op[1];
  const Operand& b = it.op[2];
  const DType t = a.dtype;
  const DType out_t = is_comparison(OP) ? DType::b8 : t;
  bool done = false;
  if (it.contiguous && out.dtype == out_t && (!a.data || a.dtype == t) &&
      (!b.data || b.dtype == t)) {
    visit_vec_storage<C>(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using TO = std::conditional_t<is_comparison(OP), bool, T>;
      constexpr bool kNarrowInt = std::is_same_v<T, uint8_t> || std::is_same_v<T, bool>;
      if constexpr (!kNarrowInt || is_comparison(OP)) {
        constexpr int kVec = kVecWidth<T>;
        if (!aligned_to(out.data, kVec * sizeof(TO)) || !aligned_to(a.data, 16) ||
            !aligned_to(b.data, 16)) {
          return;
        }
        binary_vec_kernel<T, TO, C, OP>
            <<<grid_for(it.numel / kVec + 1, device), kBlock, 0, stream>>>(
                static_cast<TO*>(out.data), static_cast<const T*>(a.data),
                static_cast<const T*>(b.data), kern::scalar_as<C>(a), kern::scalar_as<C>(b),
                it.numel, p0, p1);
        SINTER_LAUNCH_CHECK("binary");
        done = true;
      }
    });
  }
  // Rows at least one vector long (shorter ones would mostly cross row ends); this also takes
  // contiguous operands that the flat path declined for their alignment.
  if (!done && it.numel < kMax32 && out.dtype == out_t && (!a.data || a.dtype == t) &&
      (!b.data || b.dtype == t) && row_layout(it)) {
    visit_vec_storage<C>(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using TO = std::conditional_t<is_comparison(OP), bool, T>;
      constexpr int kVec = kVecWidth<T>;
      if (it.sizes[it.ndim - 1] < kVec) return;
      binary_rows_kernel<T, TO, C, OP>
          <<<grid_for((it.numel + kVec - 1) / kVec, device), kBlock, 0, stream>>>(
              make_row_iter<3>(it), static_cast<TO*>(out.data), static_cast<const T*>(a.data),
              static_cast<const T*>(b.data), kern::scalar_as<C>(a), kern::scalar_as<C>(b), it.numel,
              p0, p1);
      SINTER_LAUNCH_CHECK("binary");
      done = true;
    });
  }
  if (done) return;
  binary_kernel<C, OP><<<unrolled_grid(it.numel, device), kBlock, 0, stream>>>(
      make_indexer<3>(it), make_operands<3, C>(it), it.numel, p0, p1);
  SINTER_LAUNCH_CHECK("binary");
}

// ---- where ----

// Moves bits only: a and b share out's dtype, so T is the unsigned integer of its size. Null
// pointers stand for scalars (given as bits, or as a bool for the condition).
template <class T>
__global__ void where_kernel(Indexer<4> ix, T* out, const bool* cond, const T* a, const T* b,
                             bool sc, T sa, T sb, int64_t n) {
  for (int64_t base = tile_start(); base < n; base += tile_stride()) {
    int64_t off[kUnroll][4];
    const int cnt = unrolled_offsets(ix, base, n, off);
    T r[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      if (j >= cnt) break;
      const bool c = cond ? cond[off[j][1]] : sc;
      r[j] = c ? (a ? a[off[j][2]] : sa) : (b ? b[off[j][3]] : sb);
    }
    store_typed(out, off, cnt, r);
  }
}

template <class T>
void launch_where(const ElementwiseIter& it, cudaStream_t stream, int device) {
  const Operand* op = it.op;
  where_kernel<T><<<unrolled_grid(it.numel, device), kBlock, 0, stream>>>(
      make_indexer<4>(it), static_cast<T*>(op[0].data), static_cast<const bool*>(op[1].data),
      static_cast<const T*>(op[2].data), static_cast<const T*>(op[3].data), op[1].scalar != 0.0,
      static_cast<T>(scalar_bits(op[2], op[0].dtype)),
      static_cast<T>(scalar_bits(op[3], op[0].dtype)), it.numel);
  SINTER_LAUNCH_CHECK("where");
}

// Calls f(TypeTag<U>{}) with U the unsigned integer as wide as an element of t.
template <class F>
void visit_bits(DType t, F&& f) {
  switch (element_size(t)) {
    case 1:
      f(TypeTag<uint8_t>{});
      return;
    case 2:
      f(TypeTag<uint16_t>{});
      return;
    case 4:
      f(TypeTag<uint32_t>{});
      return;
    case 8:
      f(TypeTag<uint64_t>{});
      return;
    default:
      SINTER_THROW("elementwise: unknown dtype ", static_cast<int>(t));
  }
}

// ---- copy ----

// Same dtype: a strided move of bits, or a fill with `fill` when in is null.
template <class T>
__global__ void copy_bits_kernel(Indexer<2> ix, T* out, const T* in, T fill, int64_t n) {
  for (int64_t base = tile_start(); base < n; base += tile_stride()) {
    int64_t off[kUnroll][2];
    const int cnt = unrolled_offsets(ix, base, n, off);
    T r[kUnroll];
    if (in) {
      load_typed(in, off, 1, cnt, r);
    } else {
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) r[j] = fill;
    }
    store_typed(out, off, cnt, r);
  }
}

// Dtype conversion, any layout; the input's dtype is read at run time.
template <class To>
__global__ void convert_kernel(Indexer<2> ix, To* out, const void* in, DType from, int64_t n) {
  for (int64_t base = tile_start(); base < n; base += tile_stride()) {
    int64_t off[kUnroll][2];
    const int cnt = unrolled_offsets(ix, base, n, off);
    To r[kUnroll];
    load_dyn(in, from, off, 1, cnt, r);
    store_typed(out, off, cnt, r);
  }
}

// Fill of a contiguous, 16-byte aligned buffer, one 16-byte store per vector.
template <class U>
__global__ void fill_vec_kernel(U* out, U value, int64_t n) {
  constexpr int kVec = kVecWidth<U>;
  Vec<U, kVec> x;
#pragma unroll
  for (int j = 0; j < kVec; ++j) x.v[j] = value;
  const int64_t nvec = n / kVec;
  for (int64_t v = thread_index(); v < nvec; v += thread_count())
    reinterpret_cast<Vec<U, kVec>*>(out)[v] = x;
  for (int64_t i = nvec * kVec + thread_index(); i < n; i += thread_count()) out[i] = value;
}

// Dtype conversion of contiguous, aligned buffers, kVec elements per load.
template <class To, class From>
__global__ void convert_vec_kernel(To* out, const From* in, int64_t n) {
  constexpr int kVec = kVecWidth<To> < kVecWidth<From> ? kVecWidth<To> : kVecWidth<From>;
  const int64_t nvec = n / kVec;
  for (int64_t v = thread_index(); v < nvec; v += thread_count()) {
    const Vec<From, kVec> x = reinterpret_cast<const Vec<From, kVec>*>(in)[v];
    Vec<To, kVec> y;
#pragma unroll
    for (int j = 0; j < kVec; ++j) y.v[j] = from_acc<To>(widen(x.v[j]));
    reinterpret_cast<Vec<To, kVec>*>(out)[v] = y;
  }
  for (int64_t i = nvec * kVec + thread_index(); i < n; i += thread_count()) {
    out[i] = from_acc<To>(widen(in[i]));
  }
}

void launch_fill(const ElementwiseIter& it, cudaStream_t stream, int device) {
  const Operand& out = it.op[0];
  const size_t esize = element_size(out.dtype);
  const uint64_t bits = scalar_bits(it.op[1], out.dtype);
  if (it.contiguous) {
    bool uniform_bytes = true;  // e.g. zeros: every byte of the element is the same
    for (size_t b = 1; b < esize; ++b) uniform_bytes &= ((bits >> (8 * b)) & 0xff) == (bits & 0xff);
    if (uniform_bytes) {
      SINTER_CUDA_CHECK(cudaMemsetAsync(out.data, static_cast<int>(bits & 0xff),
                                        static_cast<size_t>(it.numel) * esize, stream));
      return;
    }
  }
  visit_bits(out.dtype, [&](auto tag) {
    using U = typename decltype(tag)::type;
    if (it.contiguous && aligned_to(out.data, 16)) {
      fill_vec_kernel<U><<<grid_for(it.numel / kVecWidth<U> + 1, device), kBlock, 0, stream>>>(
          static_cast<U*>(out.data), static_cast<U>(bits), it.numel);
    } else {
      copy_bits_kernel<U><<<unrolled_grid(it.numel, device), kBlock, 0, stream>>>(
          make_indexer<2>(it), static_cast<U*>(out.data), nullptr, static_cast<U>(bits), it.numel);
    }
    SINTER_LAUNCH_CHECK("copy");
  });
}

void launch_copy(const ElementwiseIter& it, cudaStream_t stream, int device) {
  const Operand& out = it.op[0];
  const Operand& in = it.op[1];
  if (in.data == nullptr) {
    launch_fill(it, stream, device);
    return;
  }
  if (out.dtype == in.dtype) {
    if (it.contiguous) {
      SINTER_CUDA_CHECK(cudaMemcpyAsync(out.data, in.data,
                                        static_cast<size_t>(it.numel) * element_size(out.dtype),
                                        cudaMemcpyDeviceToDevice, stream));
      return;
    }
    visit_bits(out.dtype, [&](auto tag) {
      using U = typename decltype(tag)::type;
      copy_bits_kernel<U><<<unrolled_grid(it.numel, device), kBlock, 0, stream>>>(
          make_indexer<2>(it), static_cast<U*>(out.data), static_cast<const U*>(in.data), U{0},
          it.numel);
      SINTER_LAUNCH_CHECK("copy");
    });
    return;
  }
  visit_copy(out.dtype, "elementwise", [&](auto otag) {
    using To = typename decltype(otag)::type;
    if (it.contiguous) {
      bool done = false;
      visit_copy(in.dtype, "elementwise", [&](auto itag) {
        using From = typename decltype(itag)::type;
        if constexpr (!std::is_same_v<To, From>) {
          constexpr int kVec = kVecWidth<To> < kVecWidth<From> ? kVecWidth<To> : kVecWidth<From>;
          if (!aligned_to(out.data, kVec * sizeof(To)) || !aligned_to(in.data, kVec * sizeof(From)))
            return;
          convert_vec_kernel<To, From>
              <<<grid_for(it.numel / kVec + 1, device), kBlock, 0, stream>>>(
                  static_cast<To*>(out.data), static_cast<const From*>(in.data), it.numel);
          SINTER_LAUNCH_CHECK("copy");
          done = true;
        }
      });
      if (done) return;
    }
    convert_kernel<To><<<unrolled_grid(it.numel, device), kBlock, 0, stream>>>(
        make_indexer<2>(it), static_cast<To*>(out.data), in.data, in.dtype, it.numel);
    SINTER_LAUNCH_CHECK("copy");
  });
}

}  // namespace

void unary(const Ctx& ctx, const ElementwiseIter& it, UnaryOp op, double p0, double p1) {
  if (it.numel <= 0) return;
  DeviceGuard guard(ctx.device);
  visit_elementwise("unary", it.op[1].dtype, op, [&](auto ctag, auto opc) {
    using C = typename decltype(ctag)::type;
    for_each_piece32(it, [&](const ElementwiseIter& piece) {
      launch_unary<C, decltype(opc)::value>(piece, convert<C>(p0), convert<C>(p1), ctx.stream,
                                            ctx.device);
    });
  });
}

void binary(const Ctx& ctx, const ElementwiseIter& it, BinaryOp op, double p0, double p1) {
  if (it.numel <= 0) return;
  DeviceGuard guard(ctx.device);
  visit_elementwise("binary", it.op[1].dtype, op, [&](auto ctag, auto opc) {
    using C = typename decltype(ctag)::type;
    for_each_piece32(it, [&](const ElementwiseIter& piece) {
      launch_binary<C, decltype(opc)::value>(piece, convert<C>(p0), convert<C>(p1), ctx.stream,
                                             ctx.device);
    });
  });
}

void where(const Ctx& ctx, const ElementwiseIter& it) {
  if (it.numel <= 0) return;
  DeviceGuard guard(ctx.device);
  visit_bits(it.op[0].dtype, [&](auto tag) {
    using U = typename decltype(tag)::type;
    for_each_piece32(
        it, [&](const ElementwiseIter& piece) { launch_where<U>(piece, ctx.stream, ctx.device); });
  });
}

void copy(const Ctx& ctx, const ElementwiseIter& it) {
  if (it.numel <= 0) return;
  DeviceGuard guard(ctx.device);
  for_each_piece32(
      it, [&](const ElementwiseIter& piece) { launch_copy(piece, ctx.stream, ctx.device); });
}

}  // namespace sinter::cudak

// CPU reference for the elementwise kernels: unary, binary, where and copy over an ElementwiseIter.
// Operands are loaded in chunks into compute-type buffers, so dtype conversion and the op's math
// are each a tight loop. The math is the functor that the CUDA kernels run
// (kern/elementwise_ops.h), on the C library's exp, tanh, ... where the kernels have CUDA's (the
// last bits can differ), except for the f32 unary ops with a vector row, which have polynomials of
// their own (Note [cpu vector math]).
#include "kern/elementwise.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "cpu/cpu_util.h"
#include "cpu/vec_rows.h"
#include "internal/parallel.h"
#include "kern/scalar_ops.h"
#include "sinter/core/error.h"

namespace sinter::cpu {
namespace {

constexpr int64_t kChunk = 256;
// The fewest elements a thread takes (Note [cpu threads] in src/core/parallel.cpp): below about
// this many, waking another thread costs more than the loop.
constexpr int64_t kGrain = 32768;

// The bytes [first, last) an operand's elements span.
std::pair<uintptr_t, uintptr_t> byte_span(const ElementwiseIter& it, const Operand& o) {
  const auto size = static_cast<int64_t>(element_size(o.dtype));
  int64_t lo = 0, hi = 0;
  if (it.contiguous) {
    hi = it.numel - 1;
  } else {
    for (int d = 0; d < it.ndim; ++d) {
      const int64_t extent = (it.sizes[d] - 1) * o.strides[d];
      (extent < 0 ? lo : hi) += extent;
    }
  }
  const auto base = reinterpret_cast<uintptr_t>(o.data);
  return {base + lo * size, base + (hi + 1) * size};
}

// Whether the rows may be split over threads: every output element is written once, and an input
// that shares memory with the output reads each element where it is written (in place). Otherwise
// (an expanded output, or an input that overlaps the output elsewhere) the loop keeps its order.
bool splittable(const ElementwiseIter& it) {
  const Operand& out = it.op[0];
  if (!it.contiguous) {
    for (int d = 0; d < it.ndim; ++d) {
      if (it.sizes[d] > 1 && out.strides[d] == 0) return false;
    }
  }
  const auto [out_first, out_last] = byte_span(it, out);
  for (int k = 1; k < it.noperands; ++k) {
    const Operand& in = it.op[k];
    if (in.data == nullptr) continue;
    const auto [first, last] = byte_span(it, in);
    if (last <= out_first || out_last <= first) continue;
    bool same = in.data == out.data && element_size(in.dtype) == element_size(out.dtype);
    for (int d = 0; d < it.ndim && same && !it.contiguous; ++d) {
      same = it.sizes[d] == 1 || in.strides[d] == out.strides[d];
    }
    if (!same) return false;
  }
  return true;
}

// Walks the iteration space as rows of at most kChunk elements along the innermost dim, calling
// fn(off, step, n) with each operand's element offset of the row's first element and its element
// stride along the row. The rows are split over the CPU threads (parallel_for) when that is safe
// (splittable): fn then runs concurrently on disjoint elements.
template <class F>
void for_each_row(const ElementwiseIter& it, F&& fn) {
  if (it.numel <= 0) return;
  const int nops = it.noperands;
  const int64_t grain = it.numel > kGrain && splittable(it) ? kGrain : it.numel;
  int64_t step[kMaxOperands] = {};
  if (it.contiguous || it.ndim <= 1) {
    for (int k = 0; k < nops; ++k) {
      step[k] = it.contiguous ? 1 : (it.ndim == 1 ? it.op[k].strides[0] : 0);
    }
    detail::parallel_for(it.numel, grain, [&](int64_t begin, int64_t end) {
      for (int64_t start = begin; start < end; start += kChunk) {
        int64_t o[kMaxOperands] = {};
        for (int k = 0; k < nops; ++k) o[k] = start * step[k];
        fn(o, step, std::min(kChunk, end - start));
      }
    });
    return;
  }
  const int inner = it.ndim - 1;
  const int64_t inner_size = it.sizes[inner];
  for (int k = 0; k < nops; ++k) step[k] = it.op[k].strides[inner];
  const int64_t rows = it.numel / inner_size;
  detail::parallel_for(rows, std::max<int64_t>(1, grain / inner_size), [&](int64_t r0, int64_t r1) {
    // The outer index of row r0, and the operands' offsets there.
    int64_t idx[kMaxDims] = {}, off[kMaxOperands] = {};
    for (int64_t d = inner - 1, r = r0; d >= 0; --d) {
      idx[d] = r % it.sizes[d];
      r /= it.sizes[d];
      for (int k = 0; k < nops; ++k) off[k] += idx[d] * it.op[k].strides[d];
    }
    for (int64_t row = r0; row < r1; ++row) {
      for (int64_t start = 0; start < inner_size; start += kChunk) {
        int64_t o[kMaxOperands] = {};
        for (int k = 0; k < nops; ++k) o[k] = off[k] + start * step[k];
        fn(o, step, std::min(kChunk, inner_size - start));
      }
      // Advance the outer index like an odometer, innermost outer dim first.
      for (int d = inner - 1; d >= 0; --d) {
        for (int k = 0; k < nops; ++k) off[k] += it.op[k].strides[d];
        if (++idx[d] < it.sizes[d]) break;
        for (int k = 0; k < nops; ++k) off[k] -= it.op[k].strides[d] * it.sizes[d];
        idx[d] = 0;
      }
    }
  });
}

// dst[0, n) = operand elements off, off + step, ... converted to C (or the scalar, repeated).
template <class C>
void load_row(const Operand& o, int64_t off, int64_t step, int64_t n, C* dst) {
  if (o.data == nullptr) {
    std::fill(dst, dst + n, kern::scalar_as<C>(o));
    return;
  }
  visit_storage(o.dtype, "elementwise", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(o.data) + off;
    if (step == 1) {  // the common case, in a loop the compiler vectorizes
      if constexpr (std::is_same_v<T, BFloat16> && std::is_same_v<C, float>) {
        return vec::widen_bf16_row(p, n, dst);  // the same values, in the vector row
      }
      for (int64_t j = 0; j < n; ++j) dst[j] = convert<C>(to_value(p[j]));
      return;
    }
    for (int64_t j = 0; j < n; ++j) dst[j] = convert<C>(to_value(p[j * step]));
  });
}

template <class C>
void store_row(const Operand& o, int64_t off, int64_t step, int64_t n, const C* src) {
  visit_storage(o.dtype, "elementwise", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(o.data) + off;
    if (step == 1) {
      if constexpr (std::is_same_v<T, BFloat16> && std::is_same_v<C, float>) {
        return vec::narrow_bf16_row(src, n, p);  // BFloat16's rounding, in the vector row
      }
      for (int64_t j = 0; j < n; ++j) p[j] = from_value<T>(src[j]);
      return;
    }
    for (int64_t j = 0; j < n; ++j) p[j * step] = from_value<T>(src[j]);
  });
}

// y = fn(a) (kInputs 1) or fn(a, b) (kInputs 2) over `it` in compute type C: a is op[1], b op[2]
// and y op[0], a chunk of each loaded or stored at a time.
template <class C, int kInputs, class Fn>
void map_rows(const ElementwiseIter& it, Fn fn) {
  // f32 tensors computed in f32: contiguous rows straight from and to the operands.
  bool direct = false;
  if constexpr (std::is_same_v<C, float>) {
    direct = true;
    for (int k = 0; k <= kInputs; ++k) {
      direct = direct && it.op[k].dtype == DType::f32 && it.op[k].data != nullptr;
    }
  }
  for_each_row(it, [&](const int64_t* off, const int64_t* step, int64_t n) {
    if constexpr (std::is_same_v<C, float>) {
      if (direct && step[0] == 1 && step[1] == 1 && (kInputs == 1 || step[2] == 1)) {
        const float* pa = static_cast<const float*>(it.op[1].data) + off[1];
        float* py = static_cast<float*>(it.op[0].data) + off[0];
        if constexpr (kInputs == 1) {
          for (int64_t j = 0; j < n; ++j) py[j] = fn(pa[j]);
        } else {
          const float* pb = static_cast<const float*>(it.op[2].data) + off[2];
          for (int64_t j = 0; j < n; ++j) py[j] = fn(pa[j], pb[j]);
        }
        return;
      }
    }
    C a[kChunk], b[kChunk], y[kChunk];
    load_row(it.op[1], off[1], step[1], n, a);
    if constexpr (kInputs == 2) load_row(it.op[2], off[2], step[2], n, b);
    for (int64_t j = 0; j < n; ++j) {
      if constexpr (kInputs == 1) {
        y[j] = fn(a[j]);
      } else {
        y[j] = fn(a[j], b[j]);
      }
    }
    store_row(it.op[0], off[0], step[0], n, y);
  });
}

// Whether the output and the inputs of `it` (its first `operands`) are dense bf16 tensors: the ops
// with a bf16 row take them there (Note [bf16 elementwise rows] in src/cpu/vec_convert.cpp).
bool dense_bf16(const ElementwiseIter& it, int operands) {
  bool all = it.contiguous;
  for (int k = 0; k < operands; ++k) {
    all = all && it.op[k].dtype == DType::bf16 && it.op[k].data != nullptr;
  }
  return all;
}

template <class T>
const T* input(const ElementwiseIter& it, int k, int64_t off) {
  return static_cast<const T*>(it.op[k].data) + off;
}

}  // namespace

void unary(const Ctx&, const ElementwiseIter& it, UnaryOp op, double p0, double p1) {
  visit_elementwise("unary", it.op[1].dtype, op, [&](auto ctag, auto opc) {
    using C = typename decltype(ctag)::type;
    constexpr UnaryOp OP = decltype(opc)::value;
    if constexpr (OP == UnaryOp::Relu) {
      if (dense_bf16(it, 2)) {
        for_each_row(it, [&](const int64_t* off, const int64_t*, int64_t n) {
          vec::relu_bf16_row(input<BFloat16>(it, 1, off[1]), n,
                             static_cast<BFloat16*>(it.op[0].data) + off[0]);
        });
        return;
      }
    }
    if constexpr (std::is_same_v<C, float>) {
      // The ops with a vector row (their row of SINTER_UNARY_OPS names it), a row at a time.
      if (const vec::RowFn row = vec::unary_row(OP)) {
        const bool f32_in_out = it.op[0].dtype == DType::f32 && it.op[1].dtype == DType::f32 &&
                                it.op[1].data != nullptr;
        for_each_row(it, [&](const int64_t* off, const int64_t* step, int64_t n) {
          if (f32_in_out && step[0] == 1 && step[1] == 1) {  // in place of the operands
            row(static_cast<const float*>(it.op[1].data) + off[1],
                static_cast<float*>(it.op[0].data) + off[0], n);
            return;
          }
          float a[kChunk], y[kChunk];
          load_row(it.op[1], off[1], step[1], n, a);
          row(a, y, n);
          store_row(it.op[0], off[0], step[0], n, y);
        });
        return;
      }
    }
    const C c0 = convert<C>(p0), c1 = convert<C>(p1);
    map_rows<C, 1>(it, [&](C x) { return unary_fn<OP>(x, c0, c1); });
  });
}

void binary(const Ctx&, const ElementwiseIter& it, BinaryOp op, double p0, double p1) {
  visit_elementwise("binary", it.op[1].dtype, op, [&](auto ctag, auto opc) {
    using C = typename decltype(ctag)::type;
    constexpr BinaryOp OP = decltype(opc)::value;
    if constexpr (OP == BinaryOp::Add || OP == BinaryOp::ReluBackward) {
      if (dense_bf16(it, 3)) {
        for_each_row(it, [&](const int64_t* off, const int64_t*, int64_t n) {
          const BFloat16* a = input<BFloat16>(it, 1, off[1]);
          const BFloat16* b = input<BFloat16>(it, 2, off[2]);
          auto* y = static_cast<BFloat16*>(it.op[0].data) + off[0];
          if constexpr (OP == BinaryOp::Add) {
            vec::add_bf16_row(a, b, n, y);
          } else {
            vec::relu_backward_bf16_row(a, b, n, y);
          }
        });
        return;
      }
    }
    if constexpr (std::is_same_v<C, float>) {
      // The ops with a vector row, a row at a time (as unary's).
      if (const vec::BinaryRowFn row = vec::binary_row(OP)) {
        const bool f32_in_out = it.op[0].dtype == DType::f32 && it.op[1].dtype == DType::f32 &&
                                it.op[2].dtype == DType::f32 && it.op[1].data != nullptr &&
                                it.op[2].data != nullptr;
        for_each_row(it, [&](const int64_t* off, const int64_t* step, int64_t n) {
          if (f32_in_out && step[0] == 1 && step[1] == 1 && step[2] == 1) {
            row(static_cast<const float*>(it.op[1].data) + off[1],
                static_cast<const float*>(it.op[2].data) + off[2],
                static_cast<float*>(it.op[0].data) + off[0], n);
            return;
          }
          float a[kChunk], b[kChunk], y[kChunk];
          load_row(it.op[1], off[1], step[1], n, a);
          load_row(it.op[2], off[2], step[2], n, b);
          row(a, b, y, n);
          store_row(it.op[0], off[0], step[0], n, y);
        });
        return;
      }
    }
    const C c0 = convert<C>(p0), c1 = convert<C>(p1);
    map_rows<C, 2>(it, [&](C a, C b) { return binary_fn<OP>(a, b, c0, c1); });
  });
}

// The values pass through op[0]'s compute type, which holds every value of op[0]'s dtype exactly.
void where(const Ctx&, const ElementwiseIter& it) {
  visit_compute_type(it.op[0].dtype, [&](auto ctag) {
    using C = typename decltype(ctag)::type;
    for_each_row(it, [&](const int64_t* off, const int64_t* step, int64_t n) {
      bool cond[kChunk];
      C a[kChunk], b[kChunk];
      load_row(it.op[1], off[1], step[1], n, cond);
      load_row(it.op[2], off[2], step[2], n, a);
      load_row(it.op[3], off[3], step[3], n, b);
      for (int64_t j = 0; j < n; ++j) a[j] = cond[j] ? a[j] : b[j];
      store_row(it.op[0], off[0], step[0], n, a);
    });
  });
}

// Converts straight from the input's type to the output's (bf16/f16 by way of float); see convert()
// in scalar_ops.h for floating-to-integer and to-bool.
void copy(const Ctx&, const ElementwiseIter& it) {
  const Operand& out = it.op[0];
  const Operand& in = it.op[1];
  visit_copy(out.dtype, "elementwise", [&](auto otag) {
    using To = typename decltype(otag)::type;
    if (in.data == nullptr) {
      To v;
      if constexpr (std::is_integral_v<To>) {
        v = kern::scalar_as<To>(in);
      } else {
        v = from_value<To>(kern::scalar_as<Acc<To>>(in));
      }
      for_each_row(it, [&](const int64_t* off, const int64_t* step, int64_t n) {
        To* p = static_cast<To*>(out.data) + off[0];
        for (int64_t j = 0; j < n; ++j) p[j * step[0]] = v;
      });
      return;
    }
    visit_copy(in.dtype, "elementwise", [&](auto itag) {
      using From = typename decltype(itag)::type;
      for_each_row(it, [&](const int64_t* off, const int64_t* step, int64_t n) {
        To* dst = static_cast<To*>(out.data) + off[0];
        const From* src = static_cast<const From*>(in.data) + off[1];
        if (step[0] == 1 && step[1] == 1) {  // dense rows: a block copy, or the vector rows
          if constexpr (std::is_same_v<To, From>) {
            std::memcpy(static_cast<void*>(dst), static_cast<const void*>(src), n * sizeof(To));
            return;
          } else if constexpr (std::is_same_v<From, float> && std::is_same_v<To, BFloat16>) {
            return vec::narrow_bf16_row(src, n, dst);
          } else if constexpr (std::is_same_v<From, BFloat16> && std::is_same_v<To, float>) {
            return vec::widen_bf16_row(src, n, dst);
          }
        }
        for (int64_t j = 0; j < n; ++j) {
          if constexpr (std::is_same_v<To, From>) {
            dst[j * step[0]] = src[j * step[1]];  // bits unchanged, NaN payloads included
          } else {
            dst[j * step[0]] = from_value<To>(to_value(src[j * step[1]]));
          }
        }
      });
    });
  });
}

}  // namespace sinter::cpu

// The scatter family beside scatter_add: scatter, scatter_reduce, index_copy, index_fill and
// index_reduce, on the scatter_reduce kernel (Note [scatter reduce] in src/kern/index.h), with
// torch's gradients.
#include <cstdint>
#include <limits>

#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "internal/tensor_impl.h"
#include "kern/index.h"
#include "sinter/ops.h"

namespace sinter {
namespace {

// out (contiguous) with src (idx's shape) combined into it along d at idx (checked, contiguous)
// by `mode`; records nothing.
void scatter_kernel(const Tensor& out, int64_t d, const Tensor& idx, const Tensor& src,
                    kern::ScatterMode mode) {
  if (idx.numel() == 0) return;
  Tensor sc;
  {
    NoGradGuard ng;
    sc = src.contiguous();
  }
  SINTER_DISPATCH(out.device(), scatter_reduce, out.data_ptr(), out.numel(), out.dtype(),
                  gather_geom("scatter_reduce", idx.shape(), out.strides(), d),
                  static_cast<const int64_t*>(idx.data_ptr()), sc.data_ptr(), mode);
}

// A contiguous copy of a that records nothing: the tensor a scatter writes into.
Tensor copy_of(const Tensor& a) {
  NoGradGuard ng;
  Tensor out = empty(a.shape(), {.dtype = a.dtype(), .device = a.device()});
  out.copy_(a);
  return out;
}

// Whether each element of a tensor of `shape` is a target of idx along d (bool).
Tensor targets_of(const Shape& shape, const Device& device, int64_t d, const Tensor& idx) {
  Tensor hit = zeros(shape, {.dtype = DType::u8, .device = device});
  scatter_kernel(hit, d, idx, ones(idx.shape(), {.dtype = DType::u8, .device = device}),
                 kern::ScatterMode::Assign);
  return hit.to(DType::b8);
}

kern::ScatterMode mode_of(ScatterReduce r) {
  switch (r) {
    case ScatterReduce::Prod:
      return kern::ScatterMode::Prod;
    case ScatterReduce::Amax:
      return kern::ScatterMode::Amax;
    case ScatterReduce::Amin:
      return kern::ScatterMode::Amin;
    default:  // Sum, and Mean's sum
      return kern::ScatterMode::Sum;
  }
}

// The value that leaves a reduction's result unchanged, in dtype t: what the targets hold first
// when a's own values take no part.
Scalar identity_of(ScatterReduce r, DType t) {
  const bool high = r == ScatterReduce::Amin;
  if (r == ScatterReduce::Sum || r == ScatterReduce::Mean) return Scalar(0);
  if (r == ScatterReduce::Prod) return Scalar(1);
  if (is_floating(t)) {
    const double inf = std::numeric_limits<double>::infinity();
    return Scalar(high ? inf : -inf);
  }
  switch (t) {
    case DType::b8:
      return Scalar(high);
    case DType::u8:
      return Scalar(high ? 255 : 0);
    case DType::i32:
      return Scalar(high ? int64_t{std::numeric_limits<int32_t>::max()}
                         : int64_t{std::numeric_limits<int32_t>::min()});
    default:
      return Scalar(high ? std::numeric_limits<int64_t>::max()
                         : std::numeric_limits<int64_t>::min());
  }
}

// What a scatter_reduce's backward reads.
struct ReduceSaved {
  ScatterReduce reduce;
  bool include_self;
  int64_t d;
  SavedTensor idx, a, src, out, count, hit;
};

// Amax and Amin: the gradient shared evenly among the values equal to the result, a's counted
// even where it takes no part (its share then dropped), and a NaN result giving NaN (0 / 0), as
// torch's.
Grads extreme_grads(const ReduceSaved& r, const Tensor& g) {
  Tensor idx = r.idx.get(), a = r.a.get(), src = r.src.get(), out = r.out.get();
  Tensor self_is = eq(a, out).to(g.dtype());
  Tensor src_is = eq(src, gather_kernel(out, r.d, idx)).to(g.dtype());
  Tensor share = div(g, add(self_is, scatter_into_zeros(a.shape(), r.d, idx, src_is)));
  return Grads{mul(self_is, share), mul(src_is, gather_kernel(share, r.d, idx))};
}

// Prod: each factor gets the product of the others: the result over it where it is not zero and
// no other factor is, the product of the nonzero ones where it is the only zero, else 0.
Grads prod_grads(const ReduceSaved& r, const Tensor& g) {
  Tensor idx = r.idx.get(), a = r.a.get(), src = r.src.get(), out = r.out.get();
  const Tensor zero = zeros({}, {.dtype = g.dtype(), .device = g.device()});
  const Tensor one = ones({}, {.dtype = g.dtype(), .device = g.device()});
  Tensor a_zero = eq(a, 0.0), src_zero = eq(src, 0.0);
  // Without include_self, a's zeros count only outside the targets (where the result is a).
  Tensor a_counts = r.include_self ? a_zero : logical_and(a_zero, logical_not(r.hit.get()));
  Tensor zeros_at =
      add(a_counts.to(g.dtype()), scatter_into_zeros(a.shape(), r.d, idx, src_zero.to(g.dtype())));
  Tensor nonzero = scatter_reduce(where(a_zero, one, a), r.d, idx, where(src_zero, one, src),
                                  ScatterReduce::Prod, r.include_self);
  auto others = [&](const Tensor& x, const Tensor& x_zero, const Tensor& z, const Tensor& p,
                    const Tensor& res) {
    Tensor safe = where(x_zero, one, x);
    return where(x_zero, where(eq(z, 1.0), p, zero), where(eq(z, 0.0), div(res, safe), zero));
  };
  Tensor ga = mul(g, others(a, a_zero, zeros_at, nonzero, out));
  Tensor gs = mul(gather_kernel(g, r.d, idx),
                  others(src, src_zero, gather_kernel(zeros_at, r.d, idx),
                         gather_kernel(nonzero, r.d, idx), gather_kernel(out, r.d, idx)));
  return Grads{ga, gs};
}

Grads reduce_grads(const ReduceSaved& r, const Grads& grads) {
  const Tensor& g = grads[0];
  Grads out;
  if (r.reduce == ScatterReduce::Amax || r.reduce == ScatterReduce::Amin) {
    out = extreme_grads(r, g);
  } else if (r.reduce == ScatterReduce::Prod) {
    out = prod_grads(r, g);
  } else {
    Tensor share = g;
    if (r.reduce == ScatterReduce::Mean) {
      Tensor n = r.count.get().to(g.dtype());
      share = div(g, where(eq(n, 0.0), ones_like(n), n));
    }
    out = Grads{share, gather_kernel(share, r.d, r.idx.get())};
  }
  // Where a's own values take no part, its targets get nothing.
  if (!r.include_self) {
    out[0] = where(r.hit.get(), zeros({}, {.dtype = g.dtype(), .device = g.device()}), out[0]);
  }
  return out;
}

}  // namespace

Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  SINTER_PROFILE_OP("scatter", a, index, src);
  const char* op = "scatter";
  const int64_t d = check_gather_index(op, a, dim, index);
  if (a.dim() == 0)
    return scatter(a.reshape({1}), d, index.reshape({1}), src.reshape({1})).reshape({});
  Tensor s = scatter_source(op, a, index, src);
  Tensor idx = index.contiguous();
  Tensor out = copy_of(a);
  scatter_kernel(out, d, idx, s, kern::ScatterMode::Assign);
  if (needs_grad({&a, &s})) {
    SINTER_CHECK(is_floating(a.dtype()), op, ": gradients need a floating tensor, got dtype ",
                 a.dtype());
    SavedTensor si(idx, op);
    record(op, {&out}, {a, s}, [si, d](const Grads& g) {
      Tensor ga = copy_of(g[0]);
      scatter_kernel(ga, d, si.get(),
                     zeros(si.get().shape(), {.dtype = ga.dtype(), .device = ga.device()}),
                     kern::ScatterMode::Assign);
      return Grads{ga, gather_kernel(g[0], d, si.get())};
    });
  }
  return out;
}

Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Scalar& value) {
  check_defined("scatter", a);
  check_defined("scatter", index);
  return scatter(a, dim, index,
                 full(index.shape(), value, {.dtype = a.dtype(), .device = a.device()}));
}

Tensor scatter_reduce(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src,
                      ScatterReduce reduce, bool include_self) {
  SINTER_PROFILE_OP("scatter_reduce", a, index, src);
  const char* op = "scatter_reduce";
  const int64_t d = check_gather_index(op, a, dim, index);
  SINTER_CHECK(!is_float8(a.dtype()), op, ": no arithmetic on ", a.dtype(), " tensors");
  SINTER_CHECK(reduce != ScatterReduce::Mean || a.dtype() != DType::b8, op,
               ": the mean of bool tensors is not defined (as in PyTorch)");
  if (a.dim() == 0) {
    return scatter_reduce(a.reshape({1}), d, index.reshape({1}), src.reshape({1}), reduce,
                          include_self)
        .reshape({});
  }
  Tensor s = scatter_source(op, a, index, src);
  Tensor idx = index.contiguous();
  const TensorOptions like{.dtype = a.dtype(), .device = a.device()};
  Tensor out = copy_of(a);
  Tensor hit;
  if (!include_self) {
    hit = targets_of(a.shape(), a.device(), d, idx);
    scatter_kernel(out, d, idx, full(idx.shape(), identity_of(reduce, a.dtype()), like),
                   kern::ScatterMode::Assign);
  }
  scatter_kernel(out, d, idx, s, mode_of(reduce));
  Tensor count;
  if (reduce == ScatterReduce::Mean) {
    // How many values each target combined (a's own among them where it takes part).
    count = full(a.shape(), include_self ? 1 : 0, like);
    scatter_kernel(count, d, idx, ones(idx.shape(), like), kern::ScatterMode::Sum);
    NoGradGuard ng;
    Tensor n = where(eq(count, 0), ones_like(count), count);
    out = is_floating(a.dtype()) ? div(out, n) : floor_divide(out, n);
  }
  if (needs_grad({&a, &s})) {
    SINTER_CHECK(is_floating(a.dtype()), op, ": gradients need a floating tensor, got dtype ",
                 a.dtype());
    ReduceSaved r{reduce,  include_self, d,           {idx, op}, {a, op},
                  {s, op}, {out, op},    {count, op}, {hit, op}};
    record(op, {&out}, {a, s}, [r](const Grads& g) { return reduce_grads(r, g); });
  }
  return out;
}

namespace {

// index (1-D i64, values in [0, n) for the size n of `shape` along d, or also [-n, 0) counting
// from the end where negative_ok) as a scatter index along d over a tensor of `shape`
// (index.numel() along d).
Tensor spread_index(const char* op, Tensor index, int64_t d, int64_t ndim, Shape shape,
                    bool negative_ok) {
  check_defined(op, index);
  SINTER_CHECK(index.dim() <= 1, op, ": index must be 1-D, got shape ", shape_str(index.shape()));
  SINTER_CHECK(index.dtype() == DType::i64, op, ": index must be i64, got ", index.dtype());
  const int64_t n = ndim == 0 ? 1 : shape[d];
  if (index.numel() > 0) {
    const auto lo = min(index).item<int64_t>(), hi = max(index).item<int64_t>();
    SINTER_CHECK(lo >= (negative_ok ? -n : 0) && hi < n, op, ": index out of range: values span [",
                 lo, ", ", hi, "] but dim ", d, " has size ", n);
    if (lo < 0) index = where(lt(index, 0), add(index, n), index);
  }
  Shape view(static_cast<size_t>(ndim), 1);
  if (ndim > 0) {
    view[d] = index.numel();
    shape[d] = index.numel();
  }
  return ndim == 0 ? index.reshape({}) : index.reshape(view).expand(shape);
}

// index_copy's and index_reduce's source: a's shape, with index.numel() along d.
void check_slices(const char* op, const Tensor& a, int64_t d, const Tensor& index,
                  const Tensor& source) {
  check_defined(op, source);
  SINTER_CHECK(source.dim() == a.dim(), op, ": source has ", source.dim(),
               " dims but the tensor has ", a.dim());
  for (int64_t k = 0; k < a.dim(); ++k) {
    SINTER_CHECK(k == d ? source.size(k) == index.numel() : source.size(k) == a.size(k), op,
                 ": source shape ", shape_str(source.shape()), " does not fit the tensor's ",
                 shape_str(a.shape()), " with ", index.numel(), " indices along dim ", d);
  }
}

}  // namespace

Tensor index_copy(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& source) {
  const char* op = "index_copy";
  check_defined(op, a);
  const int64_t d = wrap_dim(op, dim, a.dim());
  check_slices(op, a, d, index, source);
  return scatter(a, d, spread_index(op, index, d, a.dim(), a.shape(), false), source);
}

Tensor index_fill(const Tensor& a, int64_t dim, const Tensor& index, const Scalar& value) {
  const char* op = "index_fill";
  check_defined(op, a);
  const int64_t d = wrap_dim(op, dim, a.dim());
  return scatter(a, d, spread_index(op, index, d, a.dim(), a.shape(), true), value);
}

Tensor index_reduce(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& source,
                    ScatterReduce reduce, bool include_self) {
  const char* op = "index_reduce";
  check_defined(op, a);
  const int64_t d = wrap_dim(op, dim, a.dim());
  check_slices(op, a, d, index, source);
  return scatter_reduce(a, d, spread_index(op, index, d, a.dim(), a.shape(), false), source, reduce,
                        include_self);
}

}  // namespace sinter

// PyTorch's tensor conveniences composed of other ops (their gradients are those ops'): repeat,
// tile, broadcast_to, movedim, masked_select, diff; the vector and matrix products outer, dot, mv,
// addmm and trace; the NaN-skipping reductions nansum and nanmean; the order statistics kthvalue,
// median, nanmedian, quantile and nanquantile (from a stable sort); and the scatter family beside
// scatter_add (scatter, scatter_reduce, index_copy, index_fill, index_reduce: Note [scatter
// reduce] in src/kern/index.h). sinter/ops.h includes this header.
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "sinter/tensor.h"

namespace sinter {

// a repeated reps[i] times along each dim: reps has at least a.dim() entries, the extra ones
// leading new dims (PyTorch's Tensor.repeat). tile takes fewer too, as ones in front.
Tensor repeat(const Tensor& a, const std::vector<int64_t>& reps);
Tensor tile(const Tensor& a, const std::vector<int64_t>& reps);
// a expanded to `shape` (a view; -1 keeps a dim), as expand.
Tensor broadcast_to(const Tensor& a, const Shape& shape);
// a with its dims `source` moved to the places `destination` (distinct, same count), the others
// keeping their order (a view).
Tensor movedim(const Tensor& a, const std::vector<int64_t>& source,
               const std::vector<int64_t>& destination);
// The elements of a where mask (bool; the two broadcast) is true, as a 1-D tensor in row-major
// order. Reads the mask on the host (the count decides the output's size).
Tensor masked_select(const Tensor& a, const Tensor& mask);
// The n-th forward difference along dim (a[i + 1] - a[i], n times), after prepend and append (when
// given) are joined to a along dim; bool tensors differ by logical_xor, as in PyTorch.
Tensor diff(const Tensor& a, int64_t n = 1, int64_t dim = -1, const Tensor& prepend = Tensor(),
            const Tensor& append = Tensor());

// The outer product of two 1-D tensors: (n, m).
Tensor outer(const Tensor& a, const Tensor& b);
// The inner product of two floating 1-D tensors of one size and dtype: 0-d.
Tensor dot(const Tensor& a, const Tensor& b);
// floating matrix (n, m) times vector (m) of its dtype: (n).
Tensor mv(const Tensor& m, const Tensor& v);
// beta * input + alpha * (m1 @ m2), the three of one dtype, input broadcast to (n, p); with
// beta = 0 input is not read
// (its NaNs do not propagate), as PyTorch's.
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta = 1.0,
             double alpha = 1.0);
// The sum of a 2-D tensor's main diagonal.
Tensor trace(const Tensor& a);

// sum and mean over dims (all when empty) with NaN counted as 0 (nansum) or left out (nanmean; a
// slice of NaNs alone gives NaN; floating tensors only, as mean). nansum of integers is sum.
Tensor nansum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor nanmean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);

// --- order statistics, from a stable sort along the dim (NaN ranks above every number) ---
// The k-th smallest (k from 1) along dim, and the index in a of an element of that value (where
// several are equal, PyTorch may name another of them).
std::tuple<Tensor, Tensor> kthvalue(const Tensor& a, int64_t k, int64_t dim = -1,
                                    bool keepdim = false);
// The lower median along dim (the ((n - 1) / 2)-th smallest; NaN, and a NaN's index, where the
// slice holds one) with its index; nanmedian leaves NaNs out (NaN where a slice has nothing else).
// Their gradient goes to the element indexed.
std::tuple<Tensor, Tensor> median(const Tensor& a, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> nanmedian(const Tensor& a, int64_t dim, bool keepdim = false);
// Of all elements: 0-d, its gradient shared evenly among the elements equal to it (the NaNs for a
// NaN), as PyTorch's.
Tensor median(const Tensor& a);
Tensor nanmedian(const Tensor& a);

// How quantile reads a rank r = q (n - 1) that falls between the sorted values v[i] and v[i + 1]:
// Linear v[i] + (r - i) (v[i + 1] - v[i]), Lower v[i], Higher v[i + 1], Nearest v[round(r)]
// (halves to even), Midpoint (v[i] + v[i + 1]) / 2.
enum class QuantileInterpolation { Linear, Lower, Higher, Nearest, Midpoint };
// The q-quantiles (q in [0, 1]: a number, or a 0-d or 1-D tensor of a's dtype) of a's elements
// along dim (of all, flattened, without one): a's shape without dim (with it as 1 with keepdim),
// after a leading dim of q's length for a 1-D q. f32 and f64 tensors. quantile gives NaN for a
// slice holding NaN (its gradient 0 there); nanquantile leaves NaNs out (NaN where a slice has
// nothing else). Differentiable in a, not in q.
Tensor quantile(const Tensor& a, const Tensor& q, std::optional<int64_t> dim = std::nullopt,
                bool keepdim = false,
                QuantileInterpolation interpolation = QuantileInterpolation::Linear);
Tensor quantile(const Tensor& a, double q, std::optional<int64_t> dim = std::nullopt,
                bool keepdim = false,
                QuantileInterpolation interpolation = QuantileInterpolation::Linear);
Tensor nanquantile(const Tensor& a, const Tensor& q, std::optional<int64_t> dim = std::nullopt,
                   bool keepdim = false,
                   QuantileInterpolation interpolation = QuantileInterpolation::Linear);
Tensor nanquantile(const Tensor& a, double q, std::optional<int64_t> dim = std::nullopt,
                   bool keepdim = false,
                   QuantileInterpolation interpolation = QuantileInterpolation::Linear);

// --- scatter ---
// a with src written along dim at index, as torch.scatter: out[..., index[..., j, ...], ...] =
// src[..., j, ...] (index i64 of a's rank, no larger than src, nor than a outside dim; values in
// range). A target written twice keeps the last source in element order, as torch's CPU kernel
// (on CUDA too). Any dtype; src of a's dtype, or a number. Differentiable: the written targets of
// a get no gradient, src gets it gathered (an overwritten source too, as torch's).
Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Scalar& value);
// a's targets combined with the sources that land on them, as torch.scatter_reduce: Sum, Prod,
// Mean (integers divide by the count with floor), Amax and Amin (NaN propagates); without
// include_self, a's values at the targets take no part. Every dtype but the float8 ones.
// Gradients as torch's: Amax/Amin share theirs evenly among the values equal to the result, Prod
// gives each factor the product of the others (zeros too).
enum class ScatterReduce { Sum, Prod, Mean, Amax, Amin };
Tensor scatter_reduce(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src,
                      ScatterReduce reduce, bool include_self = true);
// index (1-D i64) names slices of a along dim: index_copy writes source's slice j (source has a's
// shape with index.numel() along dim) into slice index[j]; index_fill writes value there;
// index_reduce combines source's slices into them (scatter_reduce's reductions). As torch's.
Tensor index_copy(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& source);
Tensor index_fill(const Tensor& a, int64_t dim, const Tensor& index, const Scalar& value);
Tensor index_reduce(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& source,
                    ScatterReduce reduce, bool include_self = true);

}  // namespace sinter

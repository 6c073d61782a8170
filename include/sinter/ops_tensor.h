// PyTorch's tensor conveniences composed of other ops (their gradients are those ops'): repeat,
// tile, broadcast_to, movedim, masked_select, diff; the vector and matrix products outer, dot, mv,
// addmm and trace; the NaN-skipping reductions nansum and nanmean. sinter/ops.h includes this
// header.
#pragma once

#include <optional>
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
// The inner product of two 1-D tensors of one size and dtype: 0-d.
Tensor dot(const Tensor& a, const Tensor& b);
// matrix (n, m) times vector (m): (n).
Tensor mv(const Tensor& m, const Tensor& v);
// beta * input + alpha * (m1 @ m2), input broadcast to (n, p); with beta = 0 input is not read
// (its NaNs do not propagate), as PyTorch's.
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta = 1.0,
             double alpha = 1.0);
// The sum of a 2-D tensor's main diagonal.
Tensor trace(const Tensor& a);

// sum and mean over dims (all when empty) with NaN counted as 0 (nansum) or left out (nanmean; a
// slice of NaNs alone gives NaN; floating tensors only, as mean). nansum of integers is sum.
Tensor nansum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor nanmean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);

}  // namespace sinter

// Broadcasting and the iteration space of elementwise ops (see internal/iter.h).
#include "internal/iter.h"

#include <algorithm>
#include <cstring>

namespace sinter {

int64_t kern::wrap_integer(DType t, int64_t v) {
  switch (t) {
    case DType::i32:
      return static_cast<int32_t>(static_cast<uint32_t>(v));
    case DType::u8:
      return static_cast<uint8_t>(v);
    case DType::b8:
      return v != 0;
    default:
      return v;
  }
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    SINTER_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ",
                 shape_str(b), " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

kern::ElementwiseIter make_iter(const char* op, const Tensor& out,
                                const std::vector<IterArg>& inputs, DType scalar_dtype) {
  const Shape& shape = out.shape();
  const int nd = static_cast<int>(shape.size());
  const int nops = static_cast<int>(inputs.size()) + 1;
  SINTER_CHECK(nops <= kern::kMaxOperands, op, ": too many operands");
  // The float8 dtypes only move and convert (Note [float8]): copies and fills take them.
  const bool moves = std::strcmp(op, "copy_") == 0 || std::strcmp(op, "fill_") == 0;
  for (const IterArg& a : inputs) {
    const DType t = a.tensor ? a.tensor->dtype() : out.dtype();
    SINTER_CHECK(moves || (!is_float8(t) && !is_float8(out.dtype())), op, ": no arithmetic on ",
                 is_float8(t) ? t : out.dtype(),
                 " tensors (as in PyTorch); convert with .to() first");
  }

  // strides[k][d]: element stride of operand k along output dim d (0 where broadcast).
  std::vector<std::vector<int64_t>> strides(nops, std::vector<int64_t>(nd, 0));
  std::vector<bool> is_tensor(nops, true);
  strides[0] = out.strides();
  for (int k = 1; k < nops; ++k) {
    const Tensor* t = inputs[k - 1].tensor;
    if (!t) {
      is_tensor[k] = false;
      continue;
    }
    const int tnd = static_cast<int>(t->dim());
    SINTER_CHECK(tnd <= nd, op, ": input of shape ", shape_str(t->shape()),
                 " does not broadcast to ", shape_str(shape));
    for (int d = 0; d < tnd; ++d) {
      const int od = d + nd - tnd;
      const int64_t sz = t->size(d);
      SINTER_CHECK(sz == shape[od] || sz == 1, op, ": input of shape ", shape_str(t->shape()),
                   " does not broadcast to ", shape_str(shape));
      strides[k][od] = sz == 1 ? 0 : t->stride(d);
    }
  }

  // Drop size-1 dims, then merge neighbours that every operand walks as one.
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> st(nops);
  for (int d = 0; d < nd; ++d) {
    if (shape[d] == 1) continue;
    sizes.push_back(shape[d]);
    for (int k = 0; k < nops; ++k) st[k].push_back(strides[k][d]);
  }
  for (int d = static_cast<int>(sizes.size()) - 2; d >= 0; --d) {
    bool mergeable = true;
    for (int k = 0; k < nops && mergeable; ++k) {
      mergeable = st[k][d] == st[k][d + 1] * sizes[d + 1];
    }
    if (!mergeable) continue;
    sizes[d] *= sizes[d + 1];
    sizes.erase(sizes.begin() + d + 1);
    for (int k = 0; k < nops; ++k) {
      st[k][d] = st[k][d + 1];
      st[k].erase(st[k].begin() + d + 1);
    }
  }
  if (sizes.empty()) {
    sizes.push_back(1);
    for (int k = 0; k < nops; ++k) st[k].assign(1, 1);
  }
  SINTER_CHECK(static_cast<int>(sizes.size()) <= kern::kMaxDims, op, ": ", sizes.size(),
               " dims remain after merging (at most ", kern::kMaxDims, ")");

  kern::ElementwiseIter it;
  it.ndim = static_cast<int>(sizes.size());
  it.numel = out.numel();
  it.noperands = nops;
  for (int d = 0; d < it.ndim; ++d) it.sizes[d] = sizes[d];
  bool contiguous = true;
  for (int k = 0; k < nops; ++k) {
    kern::Operand& o = it.op[k];
    if (is_tensor[k]) {
      const Tensor& t = k == 0 ? out : *inputs[k - 1].tensor;
      o.data = t.data_ptr();
      o.dtype = t.dtype();
      for (int d = 0; d < it.ndim; ++d) o.strides[d] = st[k][d];
      contiguous = contiguous && it.ndim == 1 && (o.strides[0] == 1 || it.sizes[0] == 1);
    } else {
      o.data = nullptr;
      o.dtype = scalar_dtype;
      const Scalar& s = inputs[k - 1].scalar;
      o.scalar = s.to_double();
      o.scalar_is_int = s.holds_integer();
      o.scalar_int = o.scalar_is_int ? kern::wrap_integer(scalar_dtype, s.to_int()) : 0;
      o.scalar_int_kind = s.is_integral() && !is_integral(scalar_dtype);
    }
  }
  it.contiguous = contiguous;
  return it;
}

}  // namespace sinter

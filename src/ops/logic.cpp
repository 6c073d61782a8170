// Tests of floating values (isnan, isinf, isfinite, nan_to_num), logic and bitwise ops (the bitwise
// ones rows of Note [elementwise op list]) and the reductions all, any and count_nonzero, composed
// of comparisons and sums where no kernel of their own is needed.
#include <algorithm>
#include <limits>

#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/ops.h"

namespace sinter {

namespace {

using kern::BinaryOp;
using kern::UnaryOp;

// All false (or all true) in a's shape: integer and bool tensors hold no NaN or infinity.
Tensor constant_mask(const Tensor& a, bool value) {
  return full(a.shape(), value, {.dtype = DType::b8, .device = a.device()});
}

// Whether each element is non-zero: a itself for bool.
Tensor truth(const char* name, const Tensor& a) {
  check_defined(name, a);
  return a.dtype() == DType::b8 ? a : ne(a, 0);
}

// The largest finite value of a floating dtype, as torch.finfo(dtype).max.
double largest_finite(DType t) {
  switch (t) {
    case DType::f64:
      return std::numeric_limits<double>::max();
    case DType::bf16:
      return 3.3895313892515355e38;
    case DType::f16:
      return 65504.0;
    default:
      return static_cast<double>(std::numeric_limits<float>::max());
  }
}

// The operands of a bitwise op in their result_type, which must be integral.
DType bitwise_type(const char* name, DType t) {
  SINTER_CHECK(!is_floating(t), name, ": not implemented for ", t,
               " tensors (integral and bool tensors only, as in PyTorch)");
  return t;
}

Tensor bitwise(const char* name, const Tensor& a, const Tensor& b, BinaryOp op) {
  check_defined(name, a);
  check_defined(name, b);
  const DType t = bitwise_type(name, a.dtype() == b.dtype() ? a.dtype() : result_type(a, b));
  return binary_kernel(name, a.to(t), b.to(t), op);
}

Tensor bitwise(const char* name, const Tensor& a, const Scalar& b, BinaryOp op) {
  check_defined(name, a);
  const DType t = result_type(a, b);
  SINTER_CHECK(!is_floating(t), name, ": not implemented for ", a.dtype(), " with the number ", b,
               " (integral and bool operands only, as in PyTorch)");
  return binary_kernel(name, a.to(t), full({}, b, {.dtype = t, .device = a.device()}), op);
}

}  // namespace

// --- tests of values ---

Tensor isnan(const Tensor& a) {
  SINTER_PROFILE_OP("isnan", a);
  check_defined("isnan", a);
  return is_floating(a.dtype()) ? ne(a, a) : constant_mask(a, false);
}

Tensor isinf(const Tensor& a) {
  SINTER_PROFILE_OP("isinf", a);
  check_defined("isinf", a);
  return is_floating(a.dtype()) ? eq(abs(a), std::numeric_limits<double>::infinity())
                                : constant_mask(a, false);
}

Tensor isposinf(const Tensor& a) {
  SINTER_PROFILE_OP("isposinf", a);
  check_defined("isposinf", a);
  return is_floating(a.dtype()) ? eq(a, std::numeric_limits<double>::infinity())
                                : constant_mask(a, false);
}

Tensor isneginf(const Tensor& a) {
  SINTER_PROFILE_OP("isneginf", a);
  check_defined("isneginf", a);
  return is_floating(a.dtype()) ? eq(a, -std::numeric_limits<double>::infinity())
                                : constant_mask(a, false);
}

Tensor isfinite(const Tensor& a) {
  SINTER_PROFILE_OP("isfinite", a);
  check_defined("isfinite", a);
  // |NaN| < inf is false, as is inf < inf.
  return is_floating(a.dtype()) ? lt(abs(a), std::numeric_limits<double>::infinity())
                                : constant_mask(a, true);
}

Tensor nan_to_num(const Tensor& a, double nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  SINTER_PROFILE_OP("nan_to_num", a);
  check_defined("nan_to_num", a);
  if (!is_floating(a.dtype())) return a.clone();
  const double top = largest_finite(a.dtype());
  const auto value = [&](double v) {
    return full({}, v, {.dtype = a.dtype(), .device = a.device()});
  };
  // where's gradient passes to a where it is kept and is 0 where a value was put in its place.
  Tensor out = where(isnan(a), value(nan), a);
  out = where(isposinf(a), value(posinf.value_or(top)), out);
  return where(isneginf(a), value(neginf.value_or(-top)), out);
}

// --- logic ---

Tensor logical_not(const Tensor& a) {
  SINTER_PROFILE_OP("logical_not", a);
  check_defined("logical_not", a);
  return a.dtype() == DType::b8 ? eq(a, false) : eq(a, 0);
}

Tensor logical_and(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("logical_and", a, b);
  const Tensor x = truth("logical_and", a), y = truth("logical_and", b);
  return bitwise("logical_and", x, y, BinaryOp::BitwiseAnd);
}

Tensor logical_or(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("logical_or", a, b);
  const Tensor x = truth("logical_or", a), y = truth("logical_or", b);
  return bitwise("logical_or", x, y, BinaryOp::BitwiseOr);
}

Tensor logical_xor(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("logical_xor", a, b);
  const Tensor x = truth("logical_xor", a), y = truth("logical_xor", b);
  return bitwise("logical_xor", x, y, BinaryOp::BitwiseXor);
}

// --- bitwise ---

Tensor bitwise_not(const Tensor& a) {
  SINTER_PROFILE_OP("bitwise_not", a);
  check_defined("bitwise_not", a);
  if (a.dtype() == DType::b8) return logical_not(a);
  bitwise_type("bitwise_not", a.dtype());
  return unary_kernel("bitwise_not", a, UnaryOp::BitwiseNot);
}

#define SINTER_BITWISE_(name, OP)                 \
  Tensor name(const Tensor& a, const Tensor& b) { \
    SINTER_PROFILE_OP(#name, a, b);               \
    return bitwise(#name, a, b, BinaryOp::OP);    \
  }                                               \
  Tensor name(const Tensor& a, const Scalar& b) { \
    SINTER_PROFILE_OP(#name, a);                  \
    return bitwise(#name, a, b, BinaryOp::OP);    \
  }
SINTER_BITWISE_(bitwise_and, BitwiseAnd)
SINTER_BITWISE_(bitwise_or, BitwiseOr)
SINTER_BITWISE_(bitwise_xor, BitwiseXor)
#undef SINTER_BITWISE_

// --- reductions ---

namespace {
// dims checked in the op's name: in range, none twice.
void check_dims(const char* name, const Tensor& a, const std::vector<int64_t>& dims) {
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(a.dim(), 1)), false);
  for (int64_t d : dims) {
    const auto w = static_cast<size_t>(wrap_dim(name, d, a.dim()));
    SINTER_CHECK(!seen[w], name, ": dim ", d, " appears more than once");
    seen[w] = true;
  }
}
}  // namespace

Tensor count_nonzero(const Tensor& a, const std::vector<int64_t>& dims) {
  SINTER_PROFILE_OP("count_nonzero", a);
  check_defined("count_nonzero", a);
  check_dims("count_nonzero", a, dims);
  return sum(truth("count_nonzero", a), dims);
}

Tensor all(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  SINTER_PROFILE_OP("all", a);
  check_defined("all", a);
  check_dims("all", a, dims);
  // No zero among the elements; a u8 tensor gives u8, as PyTorch's.
  const Tensor out = eq(sum(logical_not(truth("all", a)), dims, keepdim), 0);
  return a.dtype() == DType::u8 ? out.to(DType::u8) : out;
}

Tensor any(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  SINTER_PROFILE_OP("any", a);
  check_defined("any", a);
  check_dims("any", a, dims);
  const Tensor out = ne(sum(truth("any", a), dims, keepdim), 0);
  return a.dtype() == DType::u8 ? out.to(DType::u8) : out;
}

}  // namespace sinter

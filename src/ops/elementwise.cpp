// Elementwise ops: arithmetic with broadcasting, comparisons, where, clamp, unary math and
// activations, each with its backward written in other ops.
#include <cmath>
#include <limits>

#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/iter.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "internal/tensor_impl.h"
#include "sinter/ops.h"

namespace sinter {

using kern::BinaryOp;
using kern::UnaryOp;

namespace {

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a);
  check_defined(op, b);
  SINTER_CHECK(a.device() == b.device(), op, ": tensors on different devices: ", a.device(),
               " and ", b.device());
  SINTER_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ: ", a.dtype(), " and ", b.dtype(),
               "; convert one with .to(dtype)");
}

// The operands of a binary op in their result_type (unchanged when they share a dtype).
struct Promoted {
  Tensor a, b;
};
Promoted promoted(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a);
  check_defined(op, b);
  if (a.dtype() == b.dtype()) return {a, b};
  SINTER_CHECK(a.device() == b.device(), op, ": tensors on different devices: ", a.device(),
               " and ", b.device());
  const DType t = result_type(a, b);
  return {a.to(t), b.to(t)};
}

// A tensor operand beside a scalar, in their result_type.
Tensor promoted(const char* op, const Tensor& a, const Scalar& scalar) {
  check_defined(op, a);
  return a.to(result_type(a, scalar));
}

void check_scalar_fits(const char* op, const Tensor& a, const Scalar& s) {
  SINTER_CHECK(is_floating(a.dtype()) || s.holds_integer(), op, ": scalar ", s,
               " is not an integer, but the tensor has dtype ", a.dtype());
}

// The CPU refuses an integer division by zero, as PyTorch's CPU ops do (Note [integer division]).
void check_int_divisor(const char* op, const IterArg& b, DType compute) {
  if (is_floating(compute)) return;
  if (!b.tensor) {
    // The divisor as the tensor's dtype reads it (an i32 tensor's 2^32 is 0).
    SINTER_CHECK(!b.scalar.holds_integer() || kern::wrap_integer(compute, b.scalar.to_int()) != 0,
                 op, ": integer division by zero (the divisor ", b.scalar, " is 0 as ", compute,
                 ")");
    return;
  }
  if (b.tensor->device().is_cpu() && b.tensor->numel() > 0) {
    const bool zero = eq(*b.tensor, 0).to(DType::i64).sum().item<int64_t>() != 0;
    SINTER_CHECK(!zero, op, ": integer division by zero (the divisor of dtype ", b.tensor->dtype(),
                 " and shape ", shape_str(b.tensor->shape()), " holds a 0)");
  }
}

// Forward of a binary kernel (no autograd). Either operand may be a scalar, not both.
Tensor binary_raw(const char* name, const IterArg& a, const IterArg& b, BinaryOp op, double p0 = 0,
                  double p1 = 0) {
  const Tensor& ref = a.tensor ? *a.tensor : *b.tensor;
  if (a.tensor && b.tensor) check_pair(name, *a.tensor, *b.tensor);
  check_defined(name, ref);
  if (!a.tensor) check_scalar_fits(name, ref, a.scalar);
  if (!b.tensor) check_scalar_fits(name, ref, b.scalar);
  SINTER_CHECK(is_floating(ref.dtype()) || kern::integral_ok(op), name,
               ": expected floating tensors, got dtype ", ref.dtype());
  SINTER_CHECK(!is_floating(ref.dtype()) || kern::floating_ok(op), name,
               ": expected integral or bool tensors, got dtype ", ref.dtype());
  Shape shape = a.tensor && b.tensor ? broadcast_shapes(name, a.tensor->shape(), b.tensor->shape())
                                     : ref.shape();
  Tensor out = empty(
      shape, {.dtype = kern::is_comparison(op) ? DType::b8 : ref.dtype(), .device = ref.device()});
  if (out.numel() > 0) {
    kern::ElementwiseIter it = make_iter(name, out, {a, b}, ref.dtype());
    SINTER_DISPATCH(out.device(), binary, it, op, p0, p1);
  }
  return out;
}

Tensor unary_raw(const char* name, const Tensor& a, UnaryOp op, double p0 = 0, double p1 = 0) {
  check_defined(name, a);
  SINTER_CHECK(is_floating(a.dtype()) || (kern::integral_ok(op) && a.dtype() != DType::b8), name,
               ": expected a floating tensor, got dtype ", a.dtype());
  SINTER_CHECK(!is_floating(a.dtype()) || kern::floating_ok(op), name,
               ": expected an integral tensor, got dtype ", a.dtype());
  Tensor out = empty(a.shape(), {.dtype = a.dtype(), .device = a.device()});
  if (out.numel() > 0) {
    kern::ElementwiseIter it = make_iter(name, out, {a}, a.dtype());
    SINTER_DISPATCH(out.device(), unary, it, op, p0, p1);
  }
  return out;
}

}  // namespace

Tensor binary_kernel(const char* name, const Tensor& a, const Tensor& b, BinaryOp op, double p0) {
  return binary_raw(name, a, b, op, p0);
}

Tensor unary_kernel(const char* name, const Tensor& a, UnaryOp op) {
  return unary_raw(name, a, op);
}

DType result_type(const Tensor& a, const Tensor& b) {
  SINTER_CHECK(a.defined() && b.defined(), "result_type: undefined tensor argument");
  auto category = [](DType t) { return t == DType::b8 ? 0 : is_floating(t) ? 2 : 1; };
  const bool za = a.dim() == 0, zb = b.dim() == 0;
  if (za == zb) return promote_types(a.dtype(), b.dtype());
  const DType dims = za ? b.dtype() : a.dtype(), zero = za ? a.dtype() : b.dtype();
  return category(zero) > category(dims) ? promote_types(dims, zero) : dims;
}

DType result_type(const Tensor& a, const Scalar& scalar) {
  SINTER_CHECK(a.defined(), "result_type: undefined tensor argument");
  if (is_floating(a.dtype())) return a.dtype();
  if (scalar.is_float()) return DType::f32;
  return a.dtype() == DType::b8 && scalar.is_int() ? DType::i64 : a.dtype();
}

namespace {

// The tensor an activation's backward reads besides the incoming gradient.
enum class Saved { Input, Output };

// Records the backward of `out`, computed from `a`, when its gradient grad(g) needs nothing saved.
template <class Grad>
Tensor with_grad(const char* name, Tensor out, const Tensor& a, Grad grad) {
  if (needs_grad({&a})) {
    record(name, {&out}, {a}, [grad](const Grads& g) { return Grads{grad(g[0])}; });
  }
  return out;
}

// add and sub (op): a + alpha * b or a - alpha * b, broadcast.
Tensor add_or_sub(const char* name, const Tensor& a, const Tensor& b, const Scalar& alpha,
                  BinaryOp op) {
  SINTER_CHECK(is_floating(a.dtype()) || alpha.is_integral(), name, ": alpha ", alpha,
               " must be an integer for operands of dtype ", a.dtype());
  const bool unit = alpha.to_double() == 1.0;
  Tensor out = unit ? binary_raw(name, a, b, op)
                    : binary_raw(name, a, binary_raw(name, b, alpha, BinaryOp::Mul), op);
  if (needs_grad({&a, &b})) {
    Shape sa = a.shape(), sb = b.shape();
    const double b_scale = op == BinaryOp::Sub ? -alpha.to_double() : alpha.to_double();
    record(name, {&out}, {a, b}, [sa, sb, b_scale](const Grads& g) {
      return Grads{sum_to(g[0], sa), sum_to(b_scale == 1.0 ? g[0] : mul(g[0], b_scale), sb)};
    });
  }
  return out;
}

// Forward of a differentiable unary op whose gradient is grad(g, s), written in other ops, with s
// the op's input or output as `saved_tensor` says.
template <class Grad>
Tensor unary_with_grad(const char* name, UnaryOp op, Saved saved_tensor, const Tensor& a, Grad grad,
                       double p0 = 0, double p1 = 0) {
  Tensor out = unary_raw(name, a, op, p0, p1);
  if (needs_grad({&a})) {
    SavedTensor saved(saved_tensor == Saved::Output ? out : a, name);
    record(name, {&out}, {a},
           [saved, grad](const Grads& g) { return Grads{grad(g[0], saved.get())}; });
  }
  return out;
}

// Forward of a differentiable unary op whose backward is a binary helper kernel on (g, x) or
// (g, y), both with the forward's parameters.
Tensor unary_with_backward(const char* name, UnaryOp op, BinaryOp bw, Saved saved_tensor,
                           const Tensor& a, double p0 = 0, double p1 = 0) {
  auto grad = [name, bw, p0, p1](const Tensor& g, const Tensor& s) {
    return binary_raw(name, g, s, bw, p0, p1);
  };
  return unary_with_grad(name, op, saved_tensor, a, grad, p0, p1);
}

}  // namespace

Tensor sum_to(const Tensor& a, const Shape& shape) {
  SINTER_PROFILE_OP("sum_to", a);
  if (a.shape() == shape) return a;
  const int64_t lead = a.dim() - static_cast<int64_t>(shape.size());
  SINTER_CHECK(lead >= 0, "sum_to: cannot reduce shape ", shape_str(a.shape()), " to ",
               shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else if (shape[d - lead] == 1 && a.size(d) != 1) {
      dims.push_back(d);
    } else {
      SINTER_CHECK(shape[d - lead] == a.size(d), "sum_to: cannot reduce shape ",
                   shape_str(a.shape()), " to ", shape_str(shape));
    }
  }
  Tensor r = dims.empty() ? a : sum(a, dims, true);
  return r.reshape(shape);
}

// --- arithmetic ---

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  SINTER_PROFILE_OP("add", a, b);
  const auto [pa, pb] = promoted("add", a, b);
  return add_or_sub("add", pa, pb, alpha, BinaryOp::Add);
}

Tensor add(const Tensor& a0, const Scalar& b) {
  SINTER_PROFILE_OP("add", a0);
  const Tensor a = promoted("add", a0, b);
  return with_grad("add", binary_raw("add", a, b, BinaryOp::Add), a,
                   [](const Tensor& g) { return g; });
}

Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  SINTER_PROFILE_OP("sub", a, b);
  const auto [pa, pb] = promoted("sub", a, b);
  return add_or_sub("sub", pa, pb, alpha, BinaryOp::Sub);
}

Tensor sub(const Tensor& a, const Scalar& b) {
  SINTER_PROFILE_OP("sub", a);
  return add(a, -b);
}

Tensor sub(const Scalar& a, const Tensor& b0) {
  SINTER_PROFILE_OP("sub", b0);
  const Tensor b = promoted("sub", b0, a);
  return with_grad("rsub", binary_raw("sub", a, b, BinaryOp::Sub), b,
                   [](const Tensor& g) { return neg(g); });
}

Tensor mul(const Tensor& a0, const Tensor& b0) {
  SINTER_PROFILE_OP("mul", a0, b0);
  const auto [a, b] = promoted("mul", a0, b0);
  Tensor out = binary_raw("mul", a, b, BinaryOp::Mul);
  if (needs_grad({&a, &b})) {
    SavedTensor sa_t(b.requires_grad() ? a : Tensor(), "mul");
    SavedTensor sb_t(a.requires_grad() ? b : Tensor(), "mul");
    Shape sa = a.shape(), sb = b.shape();
    record("mul", {&out}, {a, b}, [sa_t, sb_t, sa, sb](const Grads& g) {
      Tensor ga = sb_t.defined() ? sum_to(mul(g[0], sb_t.get()), sa) : Tensor();
      Tensor gb = sa_t.defined() ? sum_to(mul(g[0], sa_t.get()), sb) : Tensor();
      return Grads{ga, gb};
    });
  }
  return out;
}

Tensor swiglu(const Tensor& gate0, const Tensor& up0) {
  SINTER_PROFILE_OP("swiglu", gate0, up0);
  const auto [gate, up] = promoted("swiglu", gate0, up0);
  Tensor out = binary_raw("swiglu", gate, up, BinaryOp::Swiglu);
  if (needs_grad({&gate, &up})) {
    // d up = g silu(gate); d gate = silu'(gate) g up (SiluBackward of g up).
    SavedTensor s_gate(gate, "swiglu");
    SavedTensor s_up(gate.requires_grad() ? up : Tensor(), "swiglu");
    const bool want_up = up.requires_grad();
    Shape sg = gate.shape(), su = up.shape();
    record("swiglu", {&out}, {gate, up}, [s_gate, s_up, want_up, sg, su](const Grads& g) {
      const Tensor x = s_gate.get();
      Tensor dgate =
          s_up.defined()
              ? sum_to(binary_raw("swiglu", mul(g[0], s_up.get()), x, BinaryOp::SiluBackward), sg)
              : Tensor();
      Tensor dup = want_up ? sum_to(mul(g[0], silu(x)), su) : Tensor();
      return Grads{dgate, dup};
    });
  }
  return out;
}

Tensor mul(const Tensor& a0, const Scalar& b) {
  SINTER_PROFILE_OP("mul", a0);
  const Tensor a = promoted("mul", a0, b);
  return with_grad("mul", binary_raw("mul", a, b, BinaryOp::Mul), a,
                   [b](const Tensor& g) { return mul(g, b.to_double()); });
}

namespace {

// The operands of a true division: promoted; where that leaves integers, each operand goes to
// f32 from its own dtype, as PyTorch's (u8 / -7 divides by -7, not by the u8 249).
Promoted true_div_operands(const Tensor& a0, const Tensor& b0) {
  auto [a, b] = promoted("div", a0, b0);
  if (is_floating(a.dtype())) return {a, b};
  return {a0.to(DType::f32), b0.to(DType::f32)};
}
Tensor true_div_operand(const Tensor& a0, const Scalar& s) {
  Tensor a = promoted("div", a0, s);
  return is_floating(a.dtype()) ? a : a0.to(DType::f32);
}

BinaryOp rounding_op(const std::string& mode) {
  SINTER_CHECK(mode == "trunc" || mode == "floor",
               "div: rounding_mode must be \"trunc\" or \"floor\", got \"", mode, "\"");
  return mode == "trunc" ? BinaryOp::DivTrunc : BinaryOp::DivFloor;
}

// A rounded quotient or a remainder of promoted operands, with the integer divisor checked.
Tensor rounded(const char* name, const IterArg& a, const IterArg& b, BinaryOp op) {
  const Tensor& ref = a.tensor ? *a.tensor : *b.tensor;
  check_int_divisor(name, b, ref.dtype());
  return binary_raw(name, a, b, op);
}

// The zero gradient of a rounded quotient (as PyTorch's), for each operand that needs one.
void record_zero_grad(const char* name, Tensor& out, const Tensor& a, const Tensor& b) {
  if (!needs_grad({&a, &b})) return;
  Shape sa = a.shape(), sb = b.shape();
  record(name, {&out}, {a, b}, [sa, sb](const Grads& g) {
    const TensorOptions o{.dtype = g[0].dtype(), .device = g[0].device()};
    return Grads{zeros(sa, o), zeros(sb, o)};
  });
}

}  // namespace

Tensor div(const Tensor& a0, const Tensor& b0) {
  SINTER_PROFILE_OP("div", a0, b0);
  const auto [a, b] = true_div_operands(a0, b0);
  Tensor out = binary_raw("div", a, b, BinaryOp::Div);
  if (needs_grad({&a, &b})) {
    SavedTensor sb_t(b, "div");
    SavedTensor so_t(b.requires_grad() ? out : Tensor(), "div");
    Shape sa = a.shape(), sb = b.shape();
    record("div", {&out}, {a, b}, [sb_t, so_t, sa, sb](const Grads& g) {
      Tensor bb = sb_t.get();
      Tensor ga = sum_to(div(g[0], bb), sa);
      Tensor gb = so_t.defined() ? sum_to(neg(div(mul(g[0], so_t.get()), bb)), sb) : Tensor();
      return Grads{ga, gb};
    });
  }
  return out;
}

Tensor div(const Tensor& a0, const Scalar& b) {
  SINTER_PROFILE_OP("div", a0);
  const Tensor a = true_div_operand(a0, b);
  const double bd = b.to_double();
  return with_grad("div", binary_raw("div", a, b, BinaryOp::Div), a,
                   [bd](const Tensor& g) { return div(g, bd); });
}

Tensor div(const Scalar& a, const Tensor& b0) {
  SINTER_PROFILE_OP("div", b0);
  const Tensor b = true_div_operand(b0, a);
  Tensor out = binary_raw("div", a, b, BinaryOp::Div);
  if (needs_grad({&b})) {
    SavedTensor sb_t(b, "div"), so_t(out, "div");
    record("rdiv", {&out}, {b}, [sb_t, so_t](const Grads& g) {
      return Grads{neg(div(mul(g[0], so_t.get()), sb_t.get()))};
    });
  }
  return out;
}

Tensor div(const Tensor& a0, const Tensor& b0, const std::string& rounding_mode) {
  SINTER_PROFILE_OP("div", a0, b0);
  const BinaryOp op = rounding_op(rounding_mode);
  const auto [a, b] = promoted("div", a0, b0);
  Tensor out = rounded("div", a, b, op);
  record_zero_grad("div", out, a, b);
  return out;
}

Tensor div(const Tensor& a0, const Scalar& b, const std::string& rounding_mode) {
  SINTER_PROFILE_OP("div", a0);
  const BinaryOp op = rounding_op(rounding_mode);
  const Tensor a = promoted("div", a0, b);
  Tensor out = rounded("div", a, b, op);
  record_zero_grad("div", out, a, Tensor());
  return out;
}

Tensor floor_divide(const Tensor& a, const Tensor& b) { return div(a, b, "floor"); }
Tensor floor_divide(const Tensor& a, const Scalar& b) { return div(a, b, "floor"); }

Tensor remainder(const Tensor& a0, const Tensor& b0) {
  SINTER_PROFILE_OP("remainder", a0, b0);
  const auto [a, b] = promoted("remainder", a0, b0);
  Tensor out = rounded("remainder", a, b, BinaryOp::Remainder);
  if (needs_grad({&a, &b})) {
    SavedTensor sa_t(b.requires_grad() ? a : Tensor(), "remainder");
    SavedTensor sb_t(b.requires_grad() ? b : Tensor(), "remainder");
    Shape sa = a.shape(), sb = b.shape();
    record("remainder", {&out}, {a, b}, [sa_t, sb_t, sa, sb](const Grads& g) {
      Tensor gb = sb_t.defined() ? sum_to(neg(mul(g[0], floor_divide(sa_t.get(), sb_t.get()))), sb)
                                 : Tensor();
      return Grads{sum_to(g[0], sa), gb};
    });
  }
  return out;
}

Tensor remainder(const Tensor& a0, const Scalar& b) {
  SINTER_PROFILE_OP("remainder", a0);
  const Tensor a = promoted("remainder", a0, b);
  return with_grad("remainder", rounded("remainder", a, b, BinaryOp::Remainder), a,
                   [](const Tensor& g) { return g; });
}

Tensor remainder(const Scalar& a, const Tensor& b0) {
  SINTER_PROFILE_OP("remainder", b0);
  const Tensor b = promoted("remainder", b0, a);
  Tensor out = rounded("remainder", a, b, BinaryOp::Remainder);
  if (needs_grad({&b})) {
    SavedTensor sb_t(b, "remainder");
    record("rremainder", {&out}, {b}, [sb_t, a](const Grads& g) {
      const Tensor bb = sb_t.get();
      return Grads{neg(
          mul(g[0], floor_divide(full({}, a, {.dtype = bb.dtype(), .device = bb.device()}), bb)))};
    });
  }
  return out;
}

Tensor neg(const Tensor& a) {
  SINTER_PROFILE_OP("neg", a);
  return with_grad("neg", unary_raw("neg", a, UnaryOp::Neg), a,
                   [](const Tensor& g) { return neg(g); });
}

Tensor pow(const Tensor& a0, const Tensor& b0) {
  SINTER_PROFILE_OP("pow", a0, b0);
  const auto [a, b] = promoted("pow", a0, b0);
  Tensor out = binary_raw("pow", a, b, BinaryOp::Pow);
  if (needs_grad({&a, &b})) {
    SavedTensor sa_t(a, "pow"), sb_t(b, "pow"), so_t(out, "pow");
    Shape sa = a.shape(), sb = b.shape();
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    record("pow", {&out}, {a, b}, [=](const Grads& g) {
      Tensor x = sa_t.get(), e = sb_t.get();
      Tensor ga, gb;
      // d/dx x^e = e * x^(e-1); d/de x^e = x^e * log(x), taken as 0 where x == 0.
      if (need_a) ga = sum_to(mul(g[0], mul(e, pow(x, sub(e, 1.0)))), sa);
      if (need_b) {
        Tensor logx = where(eq(x, 0.0), zeros_like(x), log(x));
        gb = sum_to(mul(g[0], mul(so_t.get(), logx)), sb);
      }
      return Grads{ga, gb};
    });
  }
  return out;
}

Tensor pow(const Tensor& a0, const Scalar& exponent_s) {
  SINTER_PROFILE_OP("pow", a0);
  const Tensor a = promoted("pow", a0, exponent_s);
  // As PyTorch: an integer tensor to a negative integer power would truncate to 0 (or +-1).
  SINTER_CHECK(!(is_integral(a.dtype()) && exponent_s.is_int() && exponent_s.to_int() < 0),
               "pow: integers to negative integer powers are not allowed (exponent ",
               exponent_s.to_int(), ", dtype ", a.dtype(), ")");
  Tensor out = binary_raw("pow", a, exponent_s, BinaryOp::Pow);
  const double exponent = exponent_s.to_double();
  if (needs_grad({&a})) {
    SavedTensor sa_t(a, "pow");
    record("pow", {&out}, {a}, [sa_t, exponent](const Grads& g) {
      if (exponent == 0.0) return Grads{zeros_like(g[0])};
      return Grads{mul(g[0], mul(pow(sa_t.get(), exponent - 1.0), exponent))};
    });
  }
  return out;
}

Tensor pow(const Scalar& base_s, const Tensor& exponent0) {
  SINTER_PROFILE_OP("pow", exponent0);
  const Tensor exponent = promoted("pow", exponent0, base_s);
  Tensor out = binary_raw("pow", base_s, exponent, BinaryOp::Pow);
  const double base = base_s.to_double();
  if (needs_grad({&exponent})) {
    SavedTensor so_t(out, "pow");
    const double lb = base == 0.0 ? 0.0 : std::log(base);
    record("pow", {&out}, {exponent},
           [so_t, lb](const Grads& g) { return Grads{mul(mul(g[0], so_t.get()), lb)}; });
  }
  return out;
}

namespace {
// maximum/minimum backward: the gradient goes to the chosen operand, split evenly on ties.
Tensor max_min(const char* name, const Tensor& a0, const Tensor& b0, BinaryOp op) {
  const auto [a, b] = promoted(name, a0, b0);
  Tensor out = binary_raw(name, a, b, op);
  if (needs_grad({&a, &b})) {
    SavedTensor sa_t(a, name), sb_t(b, name);
    Shape sa = a.shape(), sb = b.shape();
    const bool is_max = op == BinaryOp::Maximum;
    record(name, {&out}, {a, b}, [=](const Grads& g) {
      Tensor x = sa_t.get(), y = sb_t.get();
      Tensor wins = (is_max ? gt(x, y) : lt(x, y)).to(x.dtype());
      Tensor w = add(wins, mul(eq(x, y).to(x.dtype()), 0.5));
      return Grads{sum_to(mul(g[0], w), sa), sum_to(mul(g[0], sub(1.0, w)), sb)};
    });
  }
  return out;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("maximum", a, b);
  return max_min("maximum", a, b, BinaryOp::Maximum);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("minimum", a, b);
  return max_min("minimum", a, b, BinaryOp::Minimum);
}

Tensor clamp(const Tensor& a0, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  SINTER_PROFILE_OP("clamp", a0);
  check_defined("clamp", a0);
  SINTER_CHECK(lo || hi, "clamp: at least one of min and max must be given");
  SINTER_CHECK(!lo || !hi || lo->to_double() <= hi->to_double(), "clamp: min ", *lo,
               " is greater than max ", *hi);
  // Promoted by both bounds, as PyTorch's clamp: clamp(i64_tensor, 0.5) is f32.
  Tensor a = lo ? promoted("clamp", a0, *lo) : a0;
  if (hi) a = promoted("clamp", a, *hi);
  if (!is_floating(a.dtype())) {
    // Exact integer bounds, as scalar operands of maximum and minimum (no gradient to carry).
    Tensor out = lo ? binary_raw("clamp", a, *lo, BinaryOp::Maximum) : a;
    return hi ? binary_raw("clamp", out, *hi, BinaryOp::Minimum) : out;
  }
  const double inf = std::numeric_limits<double>::infinity();
  const double l = lo ? lo->to_double() : -inf, h = hi ? hi->to_double() : inf;
  Tensor out = unary_raw("clamp", a, UnaryOp::Clamp, l, h);
  if (needs_grad({&a})) {
    SavedTensor sa_t(a, "clamp");
    record("clamp", {&out}, {a}, [sa_t, l, h](const Grads& g) {
      Tensor x = sa_t.get();
      Tensor inside = mul(ge(x, l).to(x.dtype()), le(x, h).to(x.dtype()));
      return Grads{mul(g[0], inside)};
    });
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a0, const Tensor& b0) {
  SINTER_PROFILE_OP("where", cond, a0, b0);
  check_defined("where", cond);
  const auto [a, b] = promoted("where", a0, b0);
  check_pair("where", a, b);
  SINTER_CHECK(cond.dtype() == DType::b8, "where: condition must be bool, got dtype ",
               cond.dtype());
  SINTER_CHECK(cond.device() == a.device(), "where: condition on ", cond.device(), ", values on ",
               a.device());
  Shape shape =
      broadcast_shapes("where", cond.shape(), broadcast_shapes("where", a.shape(), b.shape()));
  Tensor out = empty(shape, {.dtype = a.dtype(), .device = a.device()});
  if (out.numel() > 0) {
    kern::ElementwiseIter it = make_iter("where", out, {cond, a, b}, a.dtype());
    SINTER_DISPATCH(out.device(), where, it);
  }
  if (needs_grad({&a, &b})) {
    SavedTensor sc(cond, "where");
    Shape sa = a.shape(), sb = b.shape();
    // Only the gradients wanted: masked_fill's value is a 0-dim tensor whose gradient would be a
    // pass over the whole output and a sum of it.
    const bool want_a = a.requires_grad(), want_b = b.requires_grad();
    record("where", {&out}, {a, b}, [sc, sa, sb, want_a, want_b](const Grads& g) {
      Tensor c = sc.get();
      Tensor z = zeros({}, {.dtype = g[0].dtype(), .device = g[0].device()});
      return Grads{want_a ? sum_to(where(c, g[0], z), sa) : Tensor(),
                   want_b ? sum_to(where(c, z, g[0]), sb) : Tensor()};
    });
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a0, const Scalar& b) {
  SINTER_PROFILE_OP("where", cond, a0);
  const Tensor a = promoted("where", a0, b);
  return where(cond, a, full({}, b, {.dtype = a.dtype(), .device = a.device()}));
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, const Scalar& value) {
  SINTER_PROFILE_OP("masked_fill", a, mask);
  check_defined("masked_fill", a);
  check_defined("masked_fill", mask);
  SINTER_CHECK(mask.dtype() == DType::b8, "masked_fill: mask must be bool, got dtype ",
               mask.dtype());
  SINTER_CHECK(mask.device() == a.device(), "masked_fill: mask on ", mask.device(), ", input on ",
               a.device());
  SINTER_CHECK(broadcast_shapes("masked_fill", mask.shape(), a.shape()) == a.shape(),
               "masked_fill: mask of shape ", mask.shape(), " does not broadcast to the input's ",
               a.shape());
  if (!is_floating(a.dtype())) {
    // A fill value the dtype cannot hold is refused rather than wrapped.
    int64_t lo = 0, hi = 1;  // b8
    if (a.dtype() == DType::u8) hi = 255;
    if (a.dtype() == DType::i32) lo = INT32_MIN, hi = INT32_MAX;
    if (a.dtype() == DType::i64) lo = INT64_MIN, hi = INT64_MAX;
    const double d = value.to_double();
    const bool fits = value.is_float() ? d >= static_cast<double>(lo) && d < 0x1p63 &&
                                             d <= static_cast<double>(hi)
                                       : value.to_int() >= lo && value.to_int() <= hi;
    SINTER_CHECK(fits, "masked_fill: value ", value, " does not fit dtype ", a.dtype(), " (", lo,
                 " to ", hi, ")");
    check_scalar_fits("masked_fill", a, value);
  }
  return where(mask, full({}, value, {.dtype = a.dtype(), .device = a.device()}), a);
}

namespace {

// Keeps (i, j) of the last two dims where j - i <= diagonal (lower) or j - i >= diagonal (upper).
Tensor triangle(const char* op, const Tensor& a, int64_t diagonal, bool upper) {
  check_defined(op, a);
  SINTER_CHECK(a.dim() >= 2, op, ": needs at least 2 dims, got shape ", a.shape());
  const int64_t rows = a.size(-2), cols = a.size(-1);
  const TensorOptions i64{.dtype = DType::i64, .device = a.device()};
  const Tensor j_minus_i = sub(arange(static_cast<double>(cols), i64).view({1, cols}),
                               arange(static_cast<double>(rows), i64).view({rows, 1}));
  const int64_t d = diagonal;
  // A zero of a's dtype: a bool triangle stays bool (a scalar 0 would promote it to i64).
  return where(upper ? ge(j_minus_i, d) : le(j_minus_i, d), a,
               zeros({}, {.dtype = a.dtype(), .device = a.device()}));
}

}  // namespace

Tensor tril(const Tensor& a, int64_t diagonal) {
  SINTER_PROFILE_OP("tril", a);
  return triangle("tril", a, diagonal, false);
}
Tensor triu(const Tensor& a, int64_t diagonal) {
  SINTER_PROFILE_OP("triu", a);
  return triangle("triu", a, diagonal, true);
}

// --- comparisons ---

#define SINTER_COMPARISON(name, OP)                                   \
  Tensor name(const Tensor& a, const Tensor& b) {                     \
    const auto [pa, pb] = promoted(#name, a, b);                      \
    return binary_raw(#name, pa, pb, BinaryOp::OP);                   \
  }                                                                   \
  Tensor name(const Tensor& a, const Scalar& b) {                     \
    return binary_raw(#name, promoted(#name, a, b), b, BinaryOp::OP); \
  }
SINTER_COMPARISONS(SINTER_COMPARISON)  // sinter/ops.h
#undef SINTER_COMPARISON

// --- unary math ---

// The gradient of each from the incoming gradient g and the saved input x or output y.

Tensor exp(const Tensor& a) {
  SINTER_PROFILE_OP("exp", a);
  return unary_with_grad("exp", UnaryOp::Exp, Saved::Output, a,
                         [](const Tensor& g, const Tensor& y) { return mul(g, y); });
}

Tensor log(const Tensor& a) {
  SINTER_PROFILE_OP("log", a);
  return unary_with_grad("log", UnaryOp::Log, Saved::Input, a,
                         [](const Tensor& g, const Tensor& x) { return div(g, x); });
}

Tensor sqrt(const Tensor& a) {
  SINTER_PROFILE_OP("sqrt", a);
  return unary_with_grad("sqrt", UnaryOp::Sqrt, Saved::Output, a,
                         [](const Tensor& g, const Tensor& y) { return div(mul(g, 0.5), y); });
}

Tensor rsqrt(const Tensor& a) {
  SINTER_PROFILE_OP("rsqrt", a);
  return unary_with_grad(
      "rsqrt", UnaryOp::Rsqrt, Saved::Output, a,
      [](const Tensor& g, const Tensor& y) { return mul(g, mul(pow(y, 3.0), -0.5)); });
}

Tensor abs(const Tensor& a) {
  SINTER_PROFILE_OP("abs", a);
  return unary_with_grad("abs", UnaryOp::Abs, Saved::Input, a,
                         [](const Tensor& g, const Tensor& x) { return mul(g, sign(x)); });
}

Tensor sign(const Tensor& a) {
  SINTER_PROFILE_OP("sign", a);
  return with_grad("sign", unary_raw("sign", a, UnaryOp::Sign), a,
                   [](const Tensor& g) { return zeros_like(g); });
}

Tensor sin(const Tensor& a) {
  SINTER_PROFILE_OP("sin", a);
  return unary_with_grad("sin", UnaryOp::Sin, Saved::Input, a,
                         [](const Tensor& g, const Tensor& x) { return mul(g, cos(x)); });
}

Tensor cos(const Tensor& a) {
  SINTER_PROFILE_OP("cos", a);
  return unary_with_grad("cos", UnaryOp::Cos, Saved::Input, a,
                         [](const Tensor& g, const Tensor& x) { return neg(mul(g, sin(x))); });
}

// The activations of the op list (Note [elementwise op list] in src/kern/elementwise_ops.h).
#define SINTER_ACTIVATION(name, forward, backward, saved, signature, ...)                 \
  Tensor name signature {                                                                 \
    SINTER_PROFILE_OP(#name, x);                                                          \
    return unary_with_backward(#name, UnaryOp::forward, BinaryOp::backward, Saved::saved, \
                               __VA_ARGS__);                                              \
  }
SINTER_ACTIVATIONS(SINTER_ACTIVATION)
#undef SINTER_ACTIVATION

Tensor gelu(const Tensor& a, Activation form) {
  SINTER_PROFILE_OP("gelu", a);
  SINTER_CHECK(form == Activation::Gelu || form == Activation::GeluTanh,
               "gelu: form must be Activation::Gelu (erf) or Activation::GeluTanh (tanh "
               "approximation), got Activation ",
               static_cast<int>(form));
  const bool tanh = form == Activation::GeluTanh;
  return unary_with_backward("gelu", tanh ? UnaryOp::GeluTanh : UnaryOp::Gelu,
                             tanh ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward,
                             Saved::Input, a);
}

// where(x > 0, x, w x) with w viewed as (1, C, 1, ...), or 0-d when shared, so that it broadcasts
// over x; where and mul give both gradients (w's summed over all but the channels).
Tensor prelu(const Tensor& x, const Tensor& weight) {
  SINTER_PROFILE_OP("prelu", x, weight);
  const char* op = "prelu";
  SINTER_CHECK(x.defined() && weight.defined(), op, ": undefined tensor argument");
  SINTER_CHECK(is_floating(x.dtype()), op, ": expected a floating input, got dtype ", x.dtype());
  SINTER_CHECK(weight.dtype() == x.dtype() && weight.device() == x.device(), op, ": weight (",
               weight.dtype(), " on ", weight.device(), ") must match the input (", x.dtype(),
               " on ", x.device(), ")");
  SINTER_CHECK(weight.dim() <= 1, op, ": weight must be 0-d or 1-d, got shape ",
               shape_str(weight.shape()));
  const int64_t channels = x.dim() >= 2 ? x.size(1) : 1;
  SINTER_CHECK(weight.numel() == 1 || weight.numel() == channels, op, ": weight of ",
               weight.numel(), " elements for an input of shape ", shape_str(x.shape()), " with ",
               channels, " channels; expected 1 or ", channels);
  Shape w_shape;
  if (weight.numel() != 1) {
    w_shape.assign(static_cast<size_t>(x.dim()), 1);
    w_shape[1] = channels;
  }
  return where(gt(x, 0.0), x, mul(weight.reshape(w_shape), x));
}

// --- Tensor method forms ---
Tensor Tensor::exp() const { return sinter::exp(*this); }
Tensor Tensor::log() const { return sinter::log(*this); }
Tensor Tensor::sqrt() const { return sinter::sqrt(*this); }
Tensor Tensor::abs() const { return sinter::abs(*this); }
Tensor Tensor::neg() const { return sinter::neg(*this); }
Tensor Tensor::relu() const { return sinter::relu(*this); }
Tensor Tensor::sigmoid() const { return sinter::sigmoid(*this); }
Tensor Tensor::tanh() const { return sinter::tanh(*this); }
Tensor Tensor::pow(const Scalar& e) const { return sinter::pow(*this, e); }

}  // namespace sinter

// matmul: 1-D, 2-D and batched operands with broadcast batch dims, on the row-major GEMM kernel.
// Transposed views are passed to the kernel as transposed operands instead of being copied.
#include "kern/gemm.h"

#include <atomic>

#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/iter.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "internal/tensor_impl.h"
#include "sinter/ops.h"

namespace sinter {

namespace {

std::atomic<bool> g_allow_tf32{false};

// How the kernel reads one (..., rows, cols) operand: its last two dims as a (maybe transposed)
// row-major matrix, and its batch dims as one stride.
struct GemmOperand {
  Tensor keep;  // owns the memory read
  bool trans = false;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// x: (batch..., r, c), already expanded to the full batch shape.
GemmOperand prepare(const Tensor& x) {
  const int64_t nd = x.dim();
  const int64_t r = x.size(nd - 2), c = x.size(nd - 1);
  auto layout = [&](const Tensor& t, GemmOperand& g) {
    const int64_t sr = t.stride(nd - 2), sc = t.stride(nd - 1);
    if ((sc == 1 || c == 1) && (r == 1 || sr >= std::max<int64_t>(c, 1))) {
      g.trans = false;
      g.ld = r == 1 ? std::max<int64_t>(c, 1) : sr;
      return true;
    }
    if ((sr == 1 || r == 1) && (c == 1 || sc >= std::max<int64_t>(r, 1))) {
      g.trans = true;
      g.ld = c == 1 ? std::max<int64_t>(r, 1) : sc;
      return true;
    }
    return false;
  };
  // Batch dims must collapse into one stride: every non-1 batch dim steps by the next one's span.
  auto batch = [&](const Tensor& t, GemmOperand& g) {
    int64_t stride = 0;
    bool first = true;
    int64_t expected = 0;
    for (int64_t d = nd - 3; d >= 0; --d) {
      if (t.size(d) == 1) continue;
      if (first) {
        stride = t.stride(d);
        expected = stride * t.size(d);
        first = false;
      } else {
        if (t.stride(d) != expected) return false;
        expected *= t.size(d);
      }
    }
    g.batch_stride = stride;
    return true;
  };
  GemmOperand g;
  if (layout(x, g) && batch(x, g)) {
    g.keep = x;
    return g;
  }
  g.keep = x.contiguous();
  layout(g.keep, g);
  batch(g.keep, g);
  return g;
}

// The kernel's arguments for out = a @ b, all of out's dtype: `batch` contiguous (m, n) matrices of
// out from the (m, k) and (k, n) matrices of the operands, at the matmul precision set now.
kern::GemmArgs gemm_args(const GemmOperand& a, const GemmOperand& b, const Tensor& out, int64_t m,
                         int64_t n, int64_t k, int64_t batch) {
  kern::GemmArgs args;
  args.dtype = out.dtype();
  args.trans_a = a.trans;
  args.trans_b = b.trans;
  args.m = m;
  args.n = n;
  args.k = k;
  args.batch = batch;
  args.a = a.keep.data_ptr();
  args.lda = a.ld;
  args.stride_a = a.batch_stride;
  args.b = b.keep.data_ptr();
  args.ldb = b.ld;
  args.stride_b = b.batch_stride;
  args.c = out.data_ptr();
  args.ldc = n;
  args.stride_c = m * n;
  args.allow_tf32 = g_allow_tf32.load();
  return args;
}

// The core op: a (..., m, k) @ b (..., k, n) with broadcast batch dims, both at least 2-D.
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(-2), k = a.size(-1), k2 = b.size(-2), n = b.size(-1);
  SINTER_CHECK(k == k2, "matmul: inner dimensions differ: ", shape_str(a.shape()), " @ ",
               shape_str(b.shape()));
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes("matmul", ba, bb);
  Shape ea = batch, eb = batch, eo = batch;
  ea.insert(ea.end(), {m, k});
  eb.insert(eb.end(), {k, n});
  eo.insert(eo.end(), {m, n});
  Tensor out = empty(eo, {.dtype = a.dtype(), .device = a.device()});
  const int64_t nbatch = numel_of(batch);
  if (out.numel() > 0) {
    GemmOperand ga, gb;
    {
      NoGradGuard ng;
      ga = prepare(a.expand(ea));
      gb = prepare(b.expand(eb));
    }
    SINTER_DISPATCH(a.device(), gemm, gemm_args(ga, gb, out, m, n, k, nbatch));
  }
  if (needs_grad({&a, &b})) {
    SavedTensor sa(b.requires_grad() ? a : Tensor(), "matmul");
    SavedTensor sb(a.requires_grad() ? b : Tensor(), "matmul");
    Shape sha = a.shape(), shb = b.shape();
    record("matmul", {&out}, {a, b}, [sa, sb, sha, shb](const Grads& g) {
      Tensor ga, gb;
      if (sb.defined()) ga = sum_to(matmul_nd(g[0], sb.get().transpose(-1, -2)), sha);
      if (sa.defined()) gb = sum_to(matmul_nd(sa.get().transpose(-1, -2), g[0]), shb);
      return Grads{ga, gb};
    });
  }
  return out;
}

// The checks of bmm's operands (batch1 and batch2 of baddbmm): 3-D, one batch size, one dtype and
// device, inner sizes that match.
void check_bmm(const char* op, const Tensor& a, const Tensor& b) {
  SINTER_CHECK(a.device() == b.device(), op, ": tensors on different devices: ", a.device(),
               " and ", b.device());
  SINTER_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ: ", a.dtype(), " and ", b.dtype());
  SINTER_CHECK(is_floating(a.dtype()), op, ": expected floating tensors, got dtype ", a.dtype());
  SINTER_CHECK(a.dim() == 3 && b.dim() == 3, op, ": expected 3-D tensors, got shapes ",
               shape_str(a.shape()), " and ", shape_str(b.shape()));
  SINTER_CHECK(a.size(0) == b.size(0), op, ": batch sizes differ: ", shape_str(a.shape()), " and ",
               shape_str(b.shape()));
  SINTER_CHECK(a.size(2) == b.size(1), op, ": shapes ", shape_str(a.shape()), " and ",
               shape_str(b.shape()), " cannot be multiplied (", a.size(2), " vs ", b.size(1), ")");
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("matmul", a, b);
  SINTER_CHECK(a.defined() && b.defined(), "matmul: undefined tensor argument");
  SINTER_AUTOCAST(matmul, a, matmul(cast(a), cast(b)));
  SINTER_CHECK(a.device() == b.device(), "matmul: tensors on different devices: ", a.device(),
               " and ", b.device());
  SINTER_CHECK(a.dtype() == b.dtype(), "matmul: dtypes differ: ", a.dtype(), " and ", b.dtype());
  SINTER_CHECK(is_floating(a.dtype()), "matmul: expected floating tensors, got dtype ", a.dtype());
  SINTER_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dim, got ",
               shape_str(a.shape()), " and ", shape_str(b.shape()));
  // 1-D operands become a row (left) or a column (right) and lose that dim again afterwards.
  Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  SINTER_CHECK(a2.size(-1) == b2.size(-2), "matmul: shapes ", shape_str(a.shape()), " and ",
               shape_str(b.shape()), " cannot be multiplied (", a2.size(-1), " vs ", b2.size(-2),
               ")");
  Tensor out = matmul_nd(a2, b2);
  if (b.dim() == 1) out = out.squeeze(-1);
  if (a.dim() == 1) out = out.squeeze(out.dim() == 1 ? 0 : -2);
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act) {
  SINTER_PROFILE_OP("linear", x, weight, bias);
  SINTER_CHECK(x.defined() && weight.defined(), "linear: undefined input or weight");
  SINTER_AUTOCAST(linear, x, linear(cast(x), cast(weight), cast(bias), act));
  SINTER_CHECK(weight.dim() == 2, "linear: weight must be (out, in), got shape ",
               shape_str(weight.shape()));
  const int64_t in = weight.size(1), out_features = weight.size(0);
  SINTER_CHECK(x.dim() >= 1 && x.size(-1) == in, "linear: expected input with last dim ", in,
               ", got shape ", shape_str(x.shape()));
  SINTER_CHECK(x.device() == weight.device() && x.dtype() == weight.dtype(),
               "linear: input and weight differ: ", x.dtype(), " on ", x.device(), " vs ",
               weight.dtype(), " on ", weight.device());
  SINTER_CHECK(is_floating(x.dtype()), "linear: expected floating tensors, got dtype ", x.dtype());
  if (bias.defined()) {
    SINTER_CHECK(bias.dim() == 1 && bias.size(0) == out_features, "linear: bias must be (",
                 out_features, "), got shape ", shape_str(bias.shape()));
    SINTER_CHECK(bias.device() == x.device() && bias.dtype() == x.dtype(), "linear: bias is ",
                 bias.dtype(), " on ", bias.device(), ", input is ", x.dtype(), " on ", x.device());
  }
  // The leading dims' product (not numel / in, which is 0 for in_features = 0).
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor out = empty({rows, out_features}, {.dtype = x.dtype(), .device = x.device()});
  // GELU's backward needs the pre-activation; ReLU's can use the output (y > 0 iff x > 0).
  const bool gelu = act == Activation::Gelu || act == Activation::GeluTanh;
  const bool grad = needs_grad({&x, &weight, &bias});
  Tensor pre;
  if (gelu && grad) pre = empty({rows, out_features}, {.dtype = x.dtype(), .device = x.device()});
  Tensor x2;
  {
    NoGradGuard ng;
    x2 = x.reshape({rows, in});
  }
  if (out.numel() > 0) {
    GemmOperand ga, gb;
    Tensor b;
    {
      NoGradGuard ng;
      ga = prepare(x2);
      gb = prepare(weight.t());
      if (bias.defined()) b = bias.contiguous();
    }
    kern::GemmArgs args = gemm_args(ga, gb, out, rows, out_features, in, 1);
    args.bias = b.defined() ? b.data_ptr() : nullptr;
    args.pre_act = pre.defined() ? pre.data_ptr() : nullptr;
    args.act = kernel_act(act);
    SINTER_DISPATCH(x.device(), gemm, args);
  }
  Tensor y = out.reshape(out_shape);
  if (grad) {
    SavedTensor sx(weight.requires_grad() ? x2 : Tensor(), "linear");
    SavedTensor sw(x.requires_grad() ? weight : Tensor(), "linear");
    // The tensor the activation's backward reads: the output for ReLU, the pre-activation for GELU.
    SavedTensor sa(act == Activation::Relu ? out : pre, "linear");
    const bool need_x = x.requires_grad(), need_w = weight.requires_grad();
    const bool need_b = bias.defined() && bias.requires_grad();
    const Shape x_shape = x.shape();
    record("linear", {&y}, {x, weight, bias},
           [sx, sw, sa, act, need_x, need_w, need_b, x_shape, rows, out_features](const Grads& g) {
             Tensor gz = g[0].reshape({rows, out_features});
             if (act == Activation::Relu) {
               gz = binary_kernel("linear", gz, sa.get(), kern::BinaryOp::ReluBackward);
             } else if (act == Activation::Gelu) {
               gz = binary_kernel("linear", gz, sa.get(), kern::BinaryOp::GeluBackward);
             } else if (act == Activation::GeluTanh) {
               gz = binary_kernel("linear", gz, sa.get(), kern::BinaryOp::GeluTanhBackward);
             }
             Tensor gx, gw, gb;
             if (need_x) gx = matmul_nd(gz, sw.get()).reshape(x_shape);
             if (need_w) gw = matmul_nd(gz.t(), sx.get());
             if (need_b) gb = gz.sum({0});
             return Grads{gx, gw, gb};
           });
  }
  return y;
}

void set_matmul_precision(const std::string& precision) {
  SINTER_CHECK(precision == "highest" || precision == "high",
               "set_matmul_precision: expected \"highest\" or \"high\", got \"", precision, "\"");
  g_allow_tf32 = precision == "high";
}

std::string get_matmul_precision() { return g_allow_tf32 ? "high" : "highest"; }

Tensor Tensor::matmul(const Tensor& other) const { return sinter::matmul(*this, other); }

Tensor bmm(const Tensor& a, const Tensor& b) {
  SINTER_PROFILE_OP("bmm", a, b);
  SINTER_CHECK(a.defined() && b.defined(), "bmm: undefined tensor argument");
  SINTER_AUTOCAST(bmm, a, bmm(cast(a), cast(b)));
  check_bmm("bmm", a, b);
  return matmul_nd(a, b);
}

Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, double beta,
               double alpha) {
  SINTER_PROFILE_OP("baddbmm", input, batch1, batch2);
  SINTER_CHECK(input.defined() && batch1.defined() && batch2.defined(),
               "baddbmm: undefined tensor argument");
  SINTER_AUTOCAST(baddbmm, batch1, baddbmm(cast(input), cast(batch1), cast(batch2), beta, alpha));
  check_bmm("baddbmm", batch1, batch2);
  SINTER_CHECK(input.dtype() == batch1.dtype() && input.device() == batch1.device(),
               "baddbmm: input is ", input.dtype(), " on ", input.device(), ", the batches ",
               batch1.dtype(), " on ", batch1.device());
  const Shape shape = {batch1.size(0), batch1.size(1), batch2.size(2)};
  SINTER_CHECK(input.dim() <= 3 && broadcast_shapes("baddbmm", input.shape(), shape) == shape,
               "baddbmm: input of shape ", shape_str(input.shape()), " does not broadcast to ",
               shape_str(shape));
  Tensor out = matmul_nd(batch1, batch2);
  if (alpha != 1.0) out = mul(out, alpha);
  // beta = 0 leaves input out, so that its NaN and inf do not reach the result.
  if (beta != 0.0) out = add(out, beta == 1.0 ? input : mul(input, beta));
  return out;
}

}  // namespace sinter

// Every public op: free functions in namespace sinter, differentiable unless noted.
// Binary ops broadcast with NumPy rules; tensor operands must share a device. The elementwise
// binary and ternary ops (arithmetic, pow, maximum/minimum, comparisons, where), clamp, cat and
// stack promote their operands' dtypes by result_type; the others (matmul, conv2d, ...) need one
// dtype.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "sinter/ops_math.h"
#include "sinter/ops_tensor.h"
#include "sinter/tensor.h"

namespace sinter {

// --- dtype promotion ---
// The dtype a binary elementwise op computes in, by PyTorch's rules: promote_types of the two
// (sinter/core/dtype.h), except that a zero-dim tensor beside one with dims counts only when its
// category is higher (a 0-d f64 with an f32 tensor gives f32; a 0-d f32 with an i64 tensor, f32).
// The operands are cast to it before the op (each gradient comes back in its input's dtype).
DType result_type(const Tensor& a, const Tensor& b);
// With a scalar operand: the tensor's dtype, except that a scalar with a fraction (or inf, NaN)
// beside an integer or bool tensor gives f32, and an integral scalar beside a bool tensor i64.
// Comparisons with a scalar compare in that dtype. Integer division truncates.
// With a scalar operand (Note [scalar kinds] in include/sinter/core/scalar.h): the tensor's dtype,
// unless the scalar's kind ranks above the tensor's category: a float scalar beside an integer or
// bool tensor gives f32 (the default floating dtype), an integer scalar beside a bool tensor i64.
// Comparisons with a scalar compare in that dtype.
DType result_type(const Tensor& a, const Scalar& scalar);

// --- elementwise arithmetic ---
// A Scalar argument is any C++ number: add(t, 2) keeps an i64 t in i64, add(t, 2.0) makes it f32.
// alpha must be an integer for integer operands.
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);  // a + alpha * b
Tensor add(const Tensor& a, const Scalar& b);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);  // a - alpha * b
Tensor sub(const Tensor& a, const Scalar& b);
Tensor sub(const Scalar& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
// True division, as Python's /: integer and bool operands give f32 (1 / 0 is inf, 0 / 0 NaN).
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Scalar& b);
Tensor div(const Scalar& a, const Tensor& b);
// With rounding_mode "trunc" (toward zero, C++'s integer /) or "floor" (toward -inf, Python's //):
// the result keeps the operands' promoted dtype, integers included. An integer division by zero
// is an error on the CPU (Note [integer division] in src/kern/scalar_ops.h says what CUDA
// gives). The gradient is zero, as in PyTorch.
Tensor div(const Tensor& a, const Tensor& b, const std::string& rounding_mode);
Tensor div(const Tensor& a, const Scalar& b, const std::string& rounding_mode);
// div(a, b, "floor").
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, const Scalar& b);
// a - b * floor(a / b): the result has the sign of b, as Python's % (C++'s fmod and % take the
// sign of a). Integers by zero as div's; floats by zero give NaN. Differentiable: da = g,
// db = -g * floor(a / b).
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Scalar& b);
Tensor remainder(const Scalar& a, const Tensor& b);
Tensor neg(const Tensor& a);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& exponent);
Tensor pow(const Scalar& base, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// Either bound may be left out (std::nullopt), not both: clamp(a, 0.0), clamp(a,
// std::nullopt, 1.0). The result keeps a's dtype; bounds of an integer tensor must be integers.
Tensor clamp(const Tensor& a, std::optional<Scalar> min = std::nullopt,
             std::optional<Scalar> max = std::nullopt);
// Selects a where cond (bool) is true, else b.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
// a with `value` where mask (bool, broadcastable to a's shape) is true: attention masks,
// padding. Differentiable in a (zero gradient where filled).
Tensor masked_fill(const Tensor& a, const Tensor& mask, const Scalar& value);
// The lower (tril) or upper (triu) triangle of the last two dims (rank >= 2; leading dims are a
// batch): element (i, j) is kept where j - i <= diagonal (tril) or j - i >= diagonal (triu), and
// is 0 elsewhere. tril(ones({t, t})) is the causal mask's keep pattern.
Tensor tril(const Tensor& a, int64_t diagonal = 0);
Tensor triu(const Tensor& a, int64_t diagonal = 0);

// --- comparisons (not differentiable; bool results) ---
// eq, ne, lt, le, gt and ge (==, !=, <, <=, >, >=), each of two tensors and of a tensor and a
// scalar: Tensor eq(const Tensor& a, const Tensor& b) and Tensor eq(const Tensor& a,
// const Scalar& b), and so on. The list's second column names each one's elementwise kernel op.
#define SINTER_COMPARISONS(X) X(eq, Eq) X(ne, Ne) X(lt, Lt) X(le, Le) X(gt, Gt) X(ge, Ge)
#define SINTER_DECLARE_COMPARISON_(name, op)     \
  Tensor name(const Tensor& a, const Tensor& b); \
  Tensor name(const Tensor& a, const Scalar& b);
SINTER_COMPARISONS(SINTER_DECLARE_COMPARISON_)
#undef SINTER_DECLARE_COMPARISON_

// --- unary math and activations ---
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor sign(const Tensor& a);  // not differentiable (zero gradient)
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor leaky_relu(const Tensor& a, double negative_slope = 0.01);
// The activations a GEMM's epilogue can apply (linear() below); Gelu and GeluTanh also name the two
// forms of gelu(), exact (erf) and the tanh approximation.
enum class Activation { None, Relu, Gelu, GeluTanh };
// form: Activation::Gelu or Activation::GeluTanh.
Tensor gelu(const Tensor& a, Activation form = Activation::Gelu);
Tensor silu(const Tensor& a);
// silu(gate) * up in one pass, the gated unit of a SwiGLU MLP (Llama's w2(silu(w1 x) * w3 x));
// gate and up broadcast as mul's operands do.
Tensor swiglu(const Tensor& gate, const Tensor& up);
// a clamped to [min_val, max_val]; the gradient is 0 outside (min_val, max_val).
Tensor hardtanh(const Tensor& a, double min_val = -1.0, double max_val = 1.0);
// log(1 + exp(beta * a)) / beta, and a itself where beta * a > threshold.
Tensor softplus(const Tensor& a, double beta = 1.0, double threshold = 20.0);

// --- reductions over a set of dims (all dims when empty) ---
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Variance with `correction` subtracted from the count (1: unbiased, the default).
Tensor var(const Tensor& a, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
           bool keepdim = false);
Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
// Running sums along `dim`: out[..., k, ...] = a[..., 0, ...] + ... + a[..., k, ...]. Floating
// tensors keep their dtype; integral and bool tensors sum into i64.
Tensor cumsum(const Tensor& a, int64_t dim);
// Running products along `dim`: out[..., k, ...] = a[..., 0, ...] * ... * a[..., k, ...], with
// cumsum's dtypes. The gradient is right where `a` has zeros (PyTorch's cumprod_backward).
Tensor cumprod(const Tensor& a, int64_t dim);
// The product of all elements, or over one dim; with sum's dtypes (integral and bool in i64). The
// gradient is the product of the other elements, without a division (right at zeros).
Tensor prod(const Tensor& a);
Tensor prod(const Tensor& a, int64_t dim, bool keepdim = false);
// Over all elements.
Tensor max(const Tensor& a);
Tensor min(const Tensor& a);
// Over one dim: (values, indices); indices are i64 and not differentiable.
std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor amin(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim = false);
// The k largest (or, with largest = false, smallest) elements along `dim`, sorted: (values, i64
// indices), both of a's shape with k along dim. NaN ranks above every number (first when largest,
// last when smallest); equal values come in index order (the smaller index first); -0.0 equals
// 0.0. Differentiable in the values: each gradient goes back to the position it was taken from.
std::tuple<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim = -1, bool largest = true);

// --- linear algebra ---
// 1-D, 2-D and batched operands with broadcast batch dims, as numpy.matmul. Transposed (strided)
// operands are read in place, without a copy.
Tensor matmul(const Tensor& a, const Tensor& b);
// y = act(x @ weight^T + bias) as one GEMM whose epilogue adds the bias and applies act (what
// nn::Linear runs). x: (..., in), weight: (out, in), bias: (out) or undefined; y: (..., out).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              Activation act = Activation::None);
// "highest" (full f32) or "high" (TF32 allowed on CUDA).
void set_matmul_precision(const std::string& precision);
std::string get_matmul_precision();

// --- shape ops (views where possible; see also the Tensor methods) ---
Tensor reshape(const Tensor& a, const Shape& shape);
Tensor transpose(const Tensor& a, int64_t d0, int64_t d1);
Tensor permute(const Tensor& a, const std::vector<int64_t>& dims);
Tensor squeeze(const Tensor& a, int64_t dim);
Tensor unsqueeze(const Tensor& a, int64_t dim);
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& a, int64_t dim, int64_t index);
Tensor expand(const Tensor& a, const Shape& shape);
Tensor flatten(const Tensor& a, int64_t start_dim = 0, int64_t end_dim = -1);
// cat and stack promote mixed dtypes to the widest (promote_types), as PyTorch's; each gradient
// comes back in its input's dtype.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Pieces of `split_size` along dim (the last may be shorter); views, with one backward node for
// them all (Note [split views]). unbind: the a.size(dim) slices along dim, each without it.
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> unbind(const Tensor& a, int64_t dim = 0);
// Gathers slices along dim at the i64 indices of the 1-D `index`.
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
// out[..., j, ...] = a[..., index[..., j, ...], ...] along dim, as torch.gather: index is i64 of
// a's rank, no larger than a in the other dims, with values in [0, a.size(dim)); out has index's
// shape. Differentiable in a (the gradient is added back where each element came from).
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
// a with src added along dim at index, as torch.scatter_add: out[..., index[..., j, ...], ...] +=
// src[..., j, ...]; repeated indices accumulate. index as gather's, and no larger than src (only
// src's leading block of index's shape is read). Floating dtypes; differentiable in a and src.
Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
// a with src's slices added along dim at the i64 indices of the 1-D `index`, as torch.index_add:
// out[..., index[j], ...] += alpha * src[..., j, ...]; repeated indices accumulate. src has a's
// shape but index.numel() along dim. Floating dtypes; differentiable in a and src.
Tensor index_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src,
                 double alpha = 1.0);
// Sums `a` over broadcast dims down to `shape` (the adjoint of expand).
Tensor sum_to(const Tensor& a, const Shape& shape);

// --- convolution and pooling (NCHW) ---
// A 2-D size (kernel, stride, padding, dilation, output size): one number for both dims (`3`,
// `{3}`) or (h, w) (`{3, 5}`); unlike std::array, `{2}` means {2, 2}, not {2, 0}. Prints as
// "(h, w)".
struct Size2 {
  int64_t h = 0;
  int64_t w = 0;
  Size2(int64_t v) : h(v), w(v) {}  // NOLINT(google-explicit-constructor)
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  bool operator==(const Size2&) const = default;
};
std::ostream& operator<<(std::ostream& os, Size2 s);

// The same names in nn::Conv2dOptions, which adds `bias`.
struct Conv2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  // PyTorch's padding="same": the output as large as the input (stride 1 only, padding left 0).
  // Each dim is padded by dilation * (kernel - 1) in all, the odd one on the right (bottom).
  bool same_padding = false;
};
// x: (N, C_in, H, W), weight: (C_out, C_in / groups, kH, kW), bias: (C_out) or undefined.
// Returns (N, C_out, H_out, W_out) with H_out = (H + 2 pad - dil (kH - 1) - 1) / stride + 1.
// act is applied after the bias in the kernel's epilogue (one pass over the output instead of two;
// what a fused nn::Conv2d runs, Note [inference fusion]). Where a gradient is needed, act other
// than None runs as its own op after the convolution (the same values).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv2dOptions& opts = {}, Activation act = Activation::None);

// --- convolutions in 1-D and 3-D, transposed convolutions, padding ---
// A 3-D size (depth, height, width), as Size2: one number for all three or (d, h, w).
struct Size3 {
  int64_t d = 0;
  int64_t h = 0;
  int64_t w = 0;
  Size3(int64_t v) : d(v), h(v), w(v) {}  // NOLINT(google-explicit-constructor)
  Size3(int64_t d_, int64_t h_, int64_t w_) : d(d_), h(h_), w(w_) {}
  bool operator==(const Size3&) const = default;
};
std::ostream& operator<<(std::ostream& os, Size3 s);

struct Conv1dOptions {
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
  bool same_padding = false;  // as Conv2dOptions::same_padding
};
struct Conv3dOptions {
  Size3 stride = 1;
  Size3 padding = 0;
  Size3 dilation = 1;
  int64_t groups = 1;
  bool same_padding = false;  // as Conv2dOptions::same_padding
};
// x: (N, C_in, L), weight: (C_out, C_in / groups, k), bias: (C_out) -> (N, C_out, L_out): conv2d
// over a height of 1.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv1dOptions& opts = {});
// x: (N, C_in, D, H, W), weight: (C_out, C_in / groups, kD, kH, kW) -> (N, C_out, D_out, H_out,
// W_out), each size as conv2d's. Runs as one conv2d over the (N * D_out) depth slices, each with
// its kD input planes as channels (Note [conv3d as conv2d] in src/ops/conv.cpp).
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv3dOptions& opts = {});

// The transposed convolutions (the gradient of a convolution with respect to its input), in
// PyTorch's argument order. output_padding adds that many positions at the end of each output
// dim; it must be smaller than the stride or the dilation of that dim.
struct ConvTranspose1dOptions {
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t output_padding = 0;
  int64_t groups = 1;
  int64_t dilation = 1;
};
struct ConvTranspose2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 output_padding = 0;
  int64_t groups = 1;
  Size2 dilation = 1;
};
struct ConvTranspose3dOptions {
  Size3 stride = 1;
  Size3 padding = 0;
  Size3 output_padding = 0;
  int64_t groups = 1;
  Size3 dilation = 1;
};
// x: (N, C_in, H, W), weight: (C_in, C_out / groups, kH, kW), bias: (C_out) -> (N, C_out, H_out,
// W_out) with H_out = (H - 1) stride - 2 padding + dilation (kH - 1) + output_padding + 1. Runs
// conv2d's input-gradient kernel forward, and its forward and weight-gradient kernels backward.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const ConvTranspose2dOptions& opts = {});
// (N, C_in, L) as conv_transpose2d over a height of 1.
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const ConvTranspose1dOptions& opts = {});
// (N, C_in, D, H, W), weight (C_in, C_out / groups, kD, kH, kW): conv_transpose2d over the depth
// slices, whose kD output planes each are added into the output's depth (index_add).
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const ConvTranspose3dOptions& opts = {});

// How pad() fills: a constant; the input mirrored at its edge, the edge itself left out
// (reflect: 3 2 | 1 2 3 | 2 1); the edge repeated (replicate: 1 1 | 1 2 3 | 3 3); the input
// wrapped around (circular: 2 3 | 1 2 3 | 1 2).
enum class PadMode { Constant, Reflect, Replicate, Circular };
std::ostream& operator<<(std::ostream& os, PadMode m);
// PyTorch's F.pad: `pads` holds (left, right) pairs from the last dim backwards: {1, 2} pads the
// last dim by 1 before and 2 after, {1, 1, 2, 2} the last by 1 and the one before it by 2.
// Constant padding takes any number of dims, and a negative pad crops. The other modes pad the
// last 1, 2 or 3 dims of an input with 1 or 2 dims more (a batch and channels, or channels), each
// pad non-negative; reflect's smaller than its dim, circular's no larger. Differentiable.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode = PadMode::Constant,
           double value = 0.0);

// Pooling windows of `kernel_size`; a stride of 0 means the kernel size. With ceil_mode the output
// rounds up (a last window that would start in the right padding is dropped), as in PyTorch. The
// nn modules MaxPool2d and AvgPool2d take the same options.
struct MaxPool2dOptions {
  Size2 stride = 0;
  Size2 padding = 0;
  Size2 dilation = 1;
  bool ceil_mode = false;
};
struct AvgPool2dOptions {
  Size2 stride = 0;
  Size2 padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;  // Note [avg pool divisor] in src/kern/pool.inc
};
// x: (N, C, H, W) or (C, H, W). Indices are i64 positions in the flattened H * W plane.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, Size2 kernel_size,
                                                   const MaxPool2dOptions& opts = {});
Tensor max_pool2d(const Tensor& x, Size2 kernel_size, const MaxPool2dOptions& opts = {});
Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, const AvgPool2dOptions& opts = {});
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size);
// As adaptive_avg_pool2d over one spatial dim: x (N, C, L) or (C, L) -> (..., output_size), output
// i the mean of inputs [floor(i L / out), ceil((i + 1) L / out)). Differentiable.
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size);

// --- normalization, dropout, sampling, embedding ---
// x: (N, C, *). In training, normalizes with the batch statistics over all dims but C and updates
// the running statistics (if defined) in place: r = (1 - momentum) r + momentum * batch, with the
// unbiased batch variance. In eval, normalizes with the running statistics. weight/bias: (C) or
// undefined.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);
// Normalizes over the trailing dims `normalized_shape`; weight/bias of that shape or undefined.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// Root mean square normalization over the trailing dims `normalized_shape` (PyTorch's rms_norm):
// y = x / sqrt(mean(x^2) + eps) * weight, weight of that shape or undefined. Without eps, the
// machine epsilon of the type the sums run in: f64 for f64 inputs, else f32 (PyTorch's default).
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);
// Zeroes each element with probability p and scales the rest by 1 / (1 - p) when training. The
// mask comes from Philox: the same on CPU and CUDA for one generator state.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);
// dropout of x as the block [offset, offset + x.size(dim)) along `dim` of a tensor whose size there
// is `whole` (its other dims as x's): each element keeps or drops as its element of that whole
// tensor would under dropout() from the same generator state, which advances by the whole's count
// (Note [dropout blocks]). With tensor or sequence parallelism each rank applies its part of the
// mask one process would draw for the whole tensor.
Tensor dropout_block(const Tensor& x, double p, bool training, int64_t dim, int64_t offset,
                     int64_t whole, Generator* gen = nullptr);
// Draws num_samples category indices from weights (n) or (rows, n), one row at a time: index j
// with probability weights[j] / sum(weights). Weights are floating, non-negative and finite, not
// all zero in a row. Without replacement a row's samples are distinct, in the order drawn, and at
// most its number of non-zero weights. Returns i64 (num_samples) or (rows, num_samples); not
// differentiable. Philox uniforms: the same draws on CPU and CUDA for one generator state.
Tensor multinomial(const Tensor& weights, int64_t num_samples, bool replacement = false,
                   Generator* gen = nullptr);
// weight: (num_embeddings, dim); indices: i64 of any shape -> (*indices.shape, dim). Rows at
// padding_idx get no gradient.
Tensor embedding(const Tensor& weight, const Tensor& indices,
                 std::optional<int64_t> padding_idx = std::nullopt);

// --- attention ---

// Rotary position embedding (RoPE) of x (..., T, D) at `positions` (T i64 values, on x's device):
// pair i < D / 2 of the row at position p turns by the angle p * base^(-2i / D), the angle formed
// in double: (a, b) -> (a cos - b sin, a sin + b cos). The pairs are the two halves of the row,
// (x[i], x[i + D/2]) (Hugging Face's Llama), or neighbours (x[2i], x[2i + 1]) with `interleaved`
// (Meta's Llama). D even. Applied to q and k before attention; the gradient turns back.
Tensor rope(const Tensor& x, const Tensor& positions, double base = 10000.0,
            bool interleaved = false);
// Options of scaled_dot_product_attention. `mask` is optional and broadcasts to (..., Tq, Tk):
// bool (true: the key takes part, as PyTorch's attn_mask) or of q's dtype (added to the scores).
// How scaled_dot_product_attention computes. Fused: one kernel per pass that keeps tiles of q, k
// and v on chip with an online softmax, saves each row's log-sum-exp and recomputes the weights in
// the backward, so no (Tq, Tk) matrix is stored; it takes no mask and needs Dv == D >= 1, Tk >= 1
// and, on CUDA, D <= 128 (on the CPU it is the kernels' reference, in double, slow).
// Composed: matmul, masked softmax, dropout and matmul, any shape and mask (the same dropout as
// fused). Auto: fused on CUDA when it applies; on the CPU, where it applies without dropout in f32,
// bf16 or f16, the CPU's tiles (Note [cpu attention tiles]); else composed.
enum class AttentionKernel { Auto, Fused, Composed };

struct AttentionOptions {
  bool causal = false;  // query i sees keys j <= i (top-left aligned when Tq != Tk)
  std::optional<double> scale = std::nullopt;  // default 1 / sqrt(D)
  double dropout_p = 0.0;  // on the attention weights, as dropout(training = true)
  Tensor mask = Tensor();
  Generator* generator = nullptr;  // the dropout's Philox stream (default generator if null)
  AttentionKernel kernel = AttentionKernel::Auto;
  // Grouped-query attention (PyTorch's enable_gqa): k and v may have fewer heads (dim -3) than q, a
  // divisor of q's; query head h reads K/V head h / (Hq / Hkv) of its batch.
  bool enable_gqa = false;
  // With the heads split over ranks (tensor parallelism): q's Hq heads (dim -3) are heads
  // [dropout_head_offset, + Hq) of an attention of dropout_heads heads, whose dropout mask they
  // take their part of (Note [dropout blocks]); the generator advances as for the whole. 0: q's
  // heads are all there are.
  int64_t dropout_heads = 0, dropout_head_offset = 0;
};

// softmax(q k^T * scale + mask) v, with the masked scores at -inf. q: (..., Tq, D), k: (..., Tk,
// D), v: (..., Tk, Dv) with equal leading dims (batch, heads) -> (..., Tq, Dv); with enable_gqa,
// k and v (..., Hkv, Tk, D) may have fewer heads than q (..., Hq, Tq, D), Hkv dividing Hq: the
// fused kernels read each query head's K/V head in place (no repeated copy), the composed form
// repeats them. Differentiable in q, k, v (and an additive mask). A query row whose keys are all
// masked gives NaN, as PyTorch.
// AttentionKernel::Fused where the fused form does not apply is an error saying why.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

// --- recurrent cells ---
// One step of PyTorch's cells (torch.lstm_cell, gru_cell, rnn_tanh_cell, rnn_relu_cell): x (B, I)
// or (I), h and c (B, H) or (H); w_ih (G H, I), w_hh (G H, H), b_ih and b_hh (G H) or undefined,
// with G gates in PyTorch's order: LSTM (i, f, g, o), GRU (r, z, n), RNN one. Each is a linear of
// x and one of h, then the fused pointwise step below (Note [rnn cell steps] in src/kern/rnn.h).
// lstm_cell returns (h', c'): c' = sigmoid(f) c + sigmoid(i) tanh(g), h' = sigmoid(o) tanh(c').
std::tuple<Tensor, Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                     const Tensor& w_ih, const Tensor& w_hh,
                                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
// h' = (1 - z) n + z h, n = tanh(x_n + r (h W_hn^T + b_hn)): r applies after the state's linear.
Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
// h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh), and with relu.
Tensor rnn_tanh_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
Tensor rnn_relu_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
// The fused pointwise steps on their own, for a layer that projects a whole sequence's input at
// once: lstm_cell_step(gates, c) with gates (B, 4H) the sum of both linears -> (h', c');
// gru_cell_step(gi, gh, h) with gi = x W_ih^T + b_ih and gh = h W_hh^T + b_hh, (B, 3H) -> h'.
std::tuple<Tensor, Tensor> lstm_cell_step(const Tensor& gates, const Tensor& c);
Tensor gru_cell_step(const Tensor& gi, const Tensor& gh, const Tensor& h);

// --- softmax and losses ---
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// BatchMean, the sum divided by the input's first dim (the batch), is kl_div's alone (the mean of
// the KL divergence over samples): the other losses refuse it.
enum class Reduction { None, Mean, Sum, BatchMean };

struct CrossEntropyOptions {
  Reduction reduction = Reduction::Mean;
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  // (C) or undefined: a sample of class c counts weight[c] times, in its loss and in the mean.
  Tensor weight = Tensor();
};
// logits: (N, C) or (N, C, d1, ...); target: i64 class indices (N) or (N, d1, ...). Mean divides by
// the number of targets not equal to ignore_index, or with a weight by the sum of their classes'
// weights.
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     const CrossEntropyOptions& opts = {});
// log_probs as logits above (label_smoothing is not used); loss = -weight[t] log_probs[t].
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                const CrossEntropyOptions& opts = {});
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// Numerically stable; target of the logits' shape with values in [0, 1]; pos_weight broadcasts
// over the last dim.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::Mean,
                                        const Tensor& pos_weight = Tensor());

// --- more losses (src/ops/loss.cpp) ---
// Each loss is reduced as `reduction` says; the default is PyTorch's, Mean.
// -weight (t log(x) + (1 - t) log(1 - x)), each log clamped to >= -100 as PyTorch does, so x of 0
// or 1 gives a finite loss. input: probabilities in [0, 1] (an error otherwise: a sync on CUDA);
// target of its shape; weight broadcasts to it. The order of reduction and weight is
// binary_cross_entropy_with_logits's.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            Reduction reduction = Reduction::Mean, const Tensor& weight = Tensor());
// KL(target || input) pointwise: target (log(target) - input), 0 where target == 0; with
// log_target, exp(target) (target - input). input holds log-probabilities. Reduction::BatchMean
// divides the sum by input.size(0), the KL divergence per sample; Mean (PyTorch's default) by
// every element.
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
              bool log_target = false);
// |input - target|.
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// With d = |input - target|: 0.5 d^2 / beta where d < beta, else d - 0.5 beta; beta = 0 is
// l1_loss. beta >= 0.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      Reduction reduction = Reduction::Mean, double beta = 1.0);
// With d = |input - target|: 0.5 d^2 where d < delta, else delta (d - 0.5 delta); delta > 0.
// delta times smooth_l1_loss with beta = delta.
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                  double delta = 1.0);
// x1, x2: (N, D) with y (N), or (D) with a 0-d y; with cos the cosine similarity over D (each
// squared norm plus 1e-12, as PyTorch): 1 - cos where y == 1, max(0, cos - margin) where y == -1,
// 0 for other y.
Tensor cosine_embedding_loss(const Tensor& x1, const Tensor& x2, const Tensor& y,
                             double margin = 0.0, Reduction reduction = Reduction::Mean);
// max(0, -y (x1 - x2) + margin): x1 should rank above x2 where y == 1, below where y == -1. The
// three have the same number of dims and broadcast.
Tensor margin_ranking_loss(const Tensor& x1, const Tensor& x2, const Tensor& y, double margin = 0.0,
                           Reduction reduction = Reduction::Mean);

// --- more activations (src/kern/elementwise_ops.h's list; prelu in src/ops/elementwise.cpp) ---
// x where x > 0, else alpha (exp(x) - 1).
Tensor elu(const Tensor& x, double alpha = 1.0);
// scale elu(x, alpha) with PyTorch's alpha = 1.6732632423543772, scale = 1.0507009873554805.
Tensor selu(const Tensor& x);
// x tanh(softplus(x)).
Tensor mish(const Tensor& x);
// x min(max(x + 3, 0), 6) / 6.
Tensor hardswish(const Tensor& x);
// min(max(x + 3, 0), 6) / 6.
Tensor hardsigmoid(const Tensor& x);
// x where x > 0, else weight x, the weight of x's channel: weight of 1 element (0-d or 1-d),
// shared, or (C) over dim 1 of x (N, C, ...) (an x of under 2 dims has 1 channel), of x's dtype.
// Differentiable in x and weight; at x == 0 the slope is the weight, as PyTorch's.
Tensor prelu(const Tensor& x, const Tensor& weight);

// --- einsum, batched products, and tensors rearranged ---
// Einstein summation, as torch.einsum: "ij,jk->ik" multiplies two matrices. A term holds one
// letter (a-z, A-Z) per dim of its operand and at most one "..." for the dims the letters leave
// (right-aligned and broadcast across operands). A letter repeated in one term takes that
// operand's diagonal; a letter in no output is summed. Without "->" the output is "..." then the
// letters that occur once, upper case before lower case, each alphabetical. Sizes of a letter
// must match or be 1 (broadcast). Contracted pairwise, left to right, as batched matmuls (Note
// [einsum as matmuls] in src/ops/einsum.cpp); differentiable through them.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);
// a: (b, n, m) @ b: (b, m, p) -> (b, n, p): matmul of exactly 3-D operands of one batch size.
Tensor bmm(const Tensor& a, const Tensor& b);
// beta * input + alpha * bmm(batch1, batch2), input broadcast to (b, n, p); with beta = 0, input
// is not read (its NaN and inf do not reach the result), as PyTorch's.
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, double beta = 1.0,
               double alpha = 1.0);
// a with the order of each of `dims` reversed (a copy).
Tensor flip(const Tensor& a, const std::vector<int64_t>& dims);
// a with elements shifted by shifts[i] along dims[i] (wrapping around; negative shifts go back).
// Without dims, a is rolled flattened by the one shift and keeps its shape.
Tensor roll(const Tensor& a, const std::vector<int64_t>& shifts,
            const std::vector<int64_t>& dims = {});
// The diagonal of the (dim1, dim2) planes as a view: those dims removed and a last dim added, of
// the elements a[..., i, ..., i + offset, ...] (offset > 0 above the main diagonal, < 0 below).
Tensor diagonal(const Tensor& a, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
// A 1-D a as the given diagonal of a square matrix of zeros (size n + |diagonal|), or the
// given diagonal of a 2-D a as a new 1-D tensor.
Tensor diag(const Tensor& a, int64_t diagonal = 0);
// The Kronecker product: the operands' dims padded in front with 1s to equal rank; out has
// sizes a.size(d) * b.size(d), out[i * b.size(d) + j] = a[i] * b[j] in each dim.
Tensor kron(const Tensor& a, const Tensor& b);
// Coordinate grids of n 1-D (or 0-d) tensors, each of shape (len_0, ..., len_n-1) with indexing
// "ij"; "xy" swaps the first two dims (len_1, len_0, ...), as numpy. Expanded views.
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors,
                             const std::string& indexing = "ij");
// a's elements along dim in ascending (or descending) order: (values, i64 indices). Stable:
// equal elements keep their order (PyTorch's stable=True); NaN sorts above every number (last
// ascending, first descending); -0.0 equals 0.0. Differentiable in the values, as topk (which it
// runs with k the whole dim).
std::tuple<Tensor, Tensor> sort(const Tensor& a, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& a, int64_t dim = -1, bool descending = false);
// For each of `values`, the index at which it would be inserted into sorted_sequence (ascending,
// along its last dim) to keep it sorted: the first such index, or with right the last.
// sorted_sequence is 1-D, or has values' leading dims; values is a tensor of any shape, a NaN
// goes last. Both are compared in their result_type (a 0-d value in the boundaries' dtype of
// its category, as in PyTorch). i64 of values' shape; not
// differentiable. PyTorch's binary search, step for step (Note [searchsorted] in
// src/kern/sort.h): its results where the boundaries hold NaN (sorted last) too.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool right = false);
// searchsorted(boundaries, input, right) for 1-D boundaries: the bucket of each element of input.
Tensor bucketize(const Tensor& input, const Tensor& boundaries, bool right = false);
// Each slice of a along dim repeated `repeats` times in place (a flattened without dim): [1, 2]
// repeated 2 times is [1, 1, 2, 2]. Tensor repeats: i64, one count per slice (or one for all).
Tensor repeat_interleave(const Tensor& a, int64_t repeats,
                         std::optional<int64_t> dim = std::nullopt);
Tensor repeat_interleave(const Tensor& a, const Tensor& repeats,
                         std::optional<int64_t> dim = std::nullopt);
// a's distinct elements, flattened and sorted (each NaN distinct, as PyTorch's), with, when
// asked, the i64 index of each element of a among them (a's shape) and the i64 count of each;
// those not asked for are undefined. Not differentiable.
std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& a, bool return_inverse = false,
                                          bool return_counts = false);
// torch.unique(a, dim=dim): a's distinct slices along dim, in lexicographic order (of the slices
// flattened, element by element as sort orders them: NaN above every number, -0.0 equal to 0.0),
// with, when asked, the i64 index (a.size(dim)) of each slice among them and the i64 count of each.
// A slice holding a NaN equals no other, as in PyTorch; such slices go after the others that
// share their elements up to the NaN (PyTorch's CPU order among them is its comparator's). Other
// dims of size 0 are an error, as in PyTorch. Stable sorts of the slices' elements, last first:
// a.size(dim) log a.size(dim) work per element of a slice. Not differentiable.
std::tuple<Tensor, Tensor, Tensor> unique_dim(const Tensor& a, int64_t dim,
                                              bool return_inverse = false,
                                              bool return_counts = false);
// The indices of a's non-zero elements in row-major order: i64 (n, a.dim()). Not
// differentiable; reads a on the host (the count decides the output's size).
Tensor nonzero(const Tensor& a);
// i64 (*indices.shape, num_classes) with 1 at each index: indices i64, non-negative, below
// num_classes (-1: the largest index + 1). Not differentiable.
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);

// --- more elementwise math ---
// Integer and bool tensors compute in f32, as PyTorch's. Differentiable.
Tensor erf(const Tensor& a);
// The inverse of erf on [-1, 1]: erfinv(+-1) = +-inf, NaN outside. Integral inputs give f32.
Tensor erfinv(const Tensor& a);
Tensor expm1(const Tensor& a);  // exp(a) - 1, exact near 0
Tensor log1p(const Tensor& a);  // log(1 + a), exact near 0
// The integer at or below each element, at or above it, nearest it (halves to even), toward zero,
// as PyTorch's floor, ceil, round and trunc: integer tensors are their own (a copy), bool is an
// error; zero gradient. round with `decimals` (floating tensors only) is PyTorch's:
// rint(a * 10^d) / 10^d, or rint(a / 10^-d) * 10^-d for d < 0, each step in a's dtype (f32 for
// bf16 and f16, rounded once at the end).
Tensor floor(const Tensor& a);
Tensor ceil(const Tensor& a);
Tensor round(const Tensor& a, int64_t decimals = 0);
Tensor trunc(const Tensor& a);
// a - trunc(a) (floating tensors only; NaN for infinities); its gradient passes as is.
Tensor frac(const Tensor& a);
// The angle of the point (x = b, y = a) in (-pi, pi], broadcast: atan2(0, -1) = pi.
Tensor atan2(const Tensor& a, const Tensor& b);
// sqrt(a^2 + b^2), broadcast, without overflow in the squares.
Tensor hypot(const Tensor& a, const Tensor& b);
// Composed of other ops:
// start + weight * (end - start), as PyTorch: end - (end - start) * (1 - weight) where |weight| >=
// 0.5. start and end of one dtype; the three broadcast. Differentiable in all three.
Tensor lerp(const Tensor& start, const Tensor& end, double weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
// input + value * t1 * t2 and input + value * t1 / t2 (floating t1 and t2), broadcast.
Tensor addcmul(const Tensor& input, const Tensor& t1, const Tensor& t2, double value = 1.0);
Tensor addcdiv(const Tensor& input, const Tensor& t1, const Tensor& t2, double value = 1.0);
// clamp with tensor bounds, broadcast (either may be undefined, not both): min(max(a, lo), hi),
// so hi wins where lo > hi. The gradient goes to whichever was taken, as PyTorch's: a where lo <=
// a <= hi, lo where a < lo <= hi, hi where a > hi or hi < lo.
Tensor clamp(const Tensor& a, const Tensor& min, const Tensor& max);
// |a - b| <= atol + rtol * |b| elementwise (bool, broadcast), or a == b (equal infinities);
// NaNs equal each other with equal_nan. a and b of one dtype. Not differentiable.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false);
// Whether isclose holds for every element.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);

// --- operators ---
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator%(const Tensor& a, const Tensor& b) { return remainder(a, b); }
inline Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
inline Tensor operator%(const Tensor& a, const Scalar& b) { return remainder(a, b); }
inline Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(const Scalar& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(const Scalar& a, const Tensor& b) { return div(a, b); }
inline Tensor operator%(const Scalar& a, const Tensor& b) { return remainder(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }

// --- group and instance normalization, resampling ---
// x: (N, C, *), C divisible by num_groups: each sample's C channels fall in num_groups groups of C
// / num_groups, and each group is normalized over its channels and positions (biased variance),
// then scaled and shifted per channel by weight and bias (C, or undefined), as PyTorch's
// group_norm.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// x: (N, C, *) with at least one position: each (sample, channel) normalized over its positions,
// then weight and bias (C, or undefined) per channel, as PyTorch's instance_norm. With
// use_input_stats the statistics are each instance's own, and running_mean and running_var (C, or
// undefined) move as batch_norm's would by each sample's, averaged over the samples; without it
// the running statistics (then required) normalize every instance.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = Tensor(),
                     const Tensor& running_var = Tensor(), const Tensor& weight = Tensor(),
                     const Tensor& bias = Tensor(), bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);

// The modes of interpolate and the input ranks they take, as PyTorch's: Nearest, NearestExact
// and Area (3-D to 5-D), Linear (3-D), Bilinear and Bicubic (4-D), Trilinear (5-D).
enum class InterpolateMode { Nearest, NearestExact, Linear, Bilinear, Bicubic, Trilinear, Area };

// Exactly one of size and scale_factor: one number for every spatial dim, or one per dim.
// align_corners only with the interpolating modes (false when not given). With scale_factor the
// output size is floor(in * scale_factor), and the coordinates map by 1 / scale_factor unless
// recompute_scale_factor, which maps them by in / out.
struct InterpolateOptions {
  std::vector<int64_t> size = {};
  std::vector<double> scale_factor = {};
  InterpolateMode mode = InterpolateMode::Nearest;
  std::optional<bool> align_corners = std::nullopt;
  bool recompute_scale_factor = false;
};
// x: (N, C, *spatial) with 1 to 3 spatial dims -> (N, C, *out), PyTorch's interpolate (without
// antialias): the source coordinates, taps and weights are PyTorch's (Note [resample
// coordinates] in src/kern/resample.h); Area is adaptive average pooling to the output size
// (adaptive_avg_pool1d, 2d or 3d), as PyTorch's. Differentiable in x.
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);
// (*, C r^2, H, W) -> (*, C, H r, W r): channel c r^2 + i r + j goes to offset (i, j) of each r x r
// block (PyTorch's pixel_shuffle); pixel_unshuffle is its inverse, (*, C, H r, W r) -> (*, C r^2,
// H, W). Reshapes and a permute.
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);

// 1-D pooling of x (N, C, L) or (C, L), as max_pool2d and avg_pool2d over rows of height 1; a
// stride of 0 means the kernel size. Indices are positions along L.
struct MaxPool1dOptions {
  int64_t stride = 0;
  int64_t padding = 0;
  int64_t dilation = 1;
  bool ceil_mode = false;
};
struct AvgPool1dOptions {
  int64_t stride = 0;
  int64_t padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};
std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, int64_t kernel_size,
                                                   const MaxPool1dOptions& opts = {});
Tensor max_pool1d(const Tensor& x, int64_t kernel_size, const MaxPool1dOptions& opts = {});
Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, const AvgPool1dOptions& opts = {});
// x: (N, C, H, W) or (C, H, W): each output takes the maximum of adaptive_avg_pool2d's window (the
// first NaN, else the first maximum), indices its i64 position in the flattened H * W plane.
std::tuple<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, Size2 output_size);
Tensor adaptive_max_pool2d(const Tensor& x, Size2 output_size);

// --- sliding blocks: unfold and fold (src/ops/shape.cpp) ---
// The block geometry of unfold and fold, PyTorch's keyword arguments.
struct FoldOptions {
  Size2 dilation = 1;
  Size2 padding = 0;
  Size2 stride = 1;
};
// PyTorch's F.unfold (im2col): x (N, C, H, W) or (C, H, W) -> (N, C kH kW, L) or (C kH kW, L),
// row c kH kW + i kW + j holding tap (i, j) of channel c for each of the L = H_out W_out blocks
// (row-major), H_out = (H + 2 pad - dil (kH - 1) - 1) / stride + 1. Strided views of the padded
// input, stacked: differentiable (its gradient is fold's), no host syncs.
Tensor unfold(const Tensor& x, Size2 kernel_size, const FoldOptions& opts = {});
// PyTorch's F.fold (col2im), unfold's adjoint: x (N, C kH kW, L) or (C kH kW, L) -> (N, C, H, W)
// or (C, H, W) with (H, W) = output_size, each block's values added back where unfold took them
// (overlaps summed), L the number of blocks output_size holds. Differentiable (its gradient is
// unfold's).
Tensor fold(const Tensor& x, Size2 output_size, Size2 kernel_size, const FoldOptions& opts = {});

// --- 3-D pooling and the CTC loss ---
// 3-D pooling of x (N, C, D, H, W) or (C, D, H, W), as max_pool2d and avg_pool2d with a depth:
// a stride of 0 means the kernel size, padding at most half the kernel, ceil_mode as theirs.
// Indices are i64 positions in the flattened D * H * W volume. Both pool a box, so they run as the
// 2-D pooling of each depth plane followed by the 1-D pooling of the depths (src/ops/pool.cpp).
struct MaxPool3dOptions {
  Size3 stride = 0;
  Size3 padding = 0;
  Size3 dilation = 1;
  bool ceil_mode = false;
};
struct AvgPool3dOptions {
  Size3 stride = 0;
  Size3 padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;  // Note [avg pool divisor] in src/kern/pool.inc
};
std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x, Size3 kernel_size,
                                                   const MaxPool3dOptions& opts = {});
Tensor max_pool3d(const Tensor& x, Size3 kernel_size, const MaxPool3dOptions& opts = {});
Tensor avg_pool3d(const Tensor& x, Size3 kernel_size, const AvgPool3dOptions& opts = {});
// x (N, C, D, H, W) or (C, D, H, W) -> (..., *output_size): each output the mean of its adaptive
// window (adaptive_avg_pool2d's along each dim), as the adaptive pooling of each depth plane
// followed by that of the depths (the same mean, rounded twice). Differentiable.
Tensor adaptive_avg_pool3d(const Tensor& x, Size3 output_size);

struct CtcLossOptions {
  int64_t blank = 0;
  Reduction reduction = Reduction::Mean;
  bool zero_infinity = false;  // an infeasible alignment's infinite loss (and gradient) to zero
};
// PyTorch's ctc_loss: log_probs (T, N, C) or (T, C) log-softmaxed over C; targets (N, S) padded
// or 1-D with every target concatenated (lengths target_lengths), of class indices other than
// blank; input_lengths and target_lengths (N) i64 on log_probs' device, each input length in [1,
// T]. Each loss is -log of the total probability of the alignments of its target (the alpha
// recursion of Graves et al. in log space, T steps of tensor ops over the batch and the 2 S + 1
// extended labels, differentiable by composition); infinite where no alignment fits. Mean
// divides each loss by its target length (at least 1), then averages over the batch.
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CtcLossOptions& opts = {});

}  // namespace sinter

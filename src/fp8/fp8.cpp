// FP8 recipes, fp8::Autocast, scaled quantization and the FP8 GEMM on the CPU (sinter/fp8.h).
#include "sinter/fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "fp8/fp8_impl.h"
#include "internal/dispatch.h"
#include "internal/parallel.h"
#include "kern/fp8.h"
#include "sinter/autograd.h"
#include "sinter/dist.h"
#include "sinter/ops.h"

namespace sinter::fp8 {

// Note [fp8 scaling]
// A tensor goes to FP8 as codes = saturate(x * scale), its values code * scale_inv, with
// scale_inv = 1 / scale (both f32). The scale maps the amax (the largest |x| it covers) to the
// format's largest value, over 2^margin: scale = max / amax / 2^margin, in f32 (1 where amax is
// 0, infinite or NaN). The product x * scale is rounded to f32 and then to the format, saturating
// (what would overflow is the largest value: Transformer Engine's quantization), so that a value a
// little past the amax (delayed scaling's stale scale) is clamped, not lost.
//   - current: one scale per tensor, from the tensor's own amax.
//   - delayed: one scale per tensor, from the largest amax in a history of the last H steps'
//     forward and backward passes (Transformer Engine's DelayedScaling, amax_compute_algo "max"),
//     so that the quantization needs no pass over the tensor before it; the first pass, with no
//     history, takes its own amax. See Note [fp8 delayed state].
//   - block: a scale per tile from the tile's amax (DeepSeek-V3): activations and gradients in
//     1 x 128 tiles along the GEMM's reduction dim, weights in 128 x 128 blocks. The backward's
//     operands are reduced along other dims than the forward's, so the activations and gradients
//     are quantized again, transposed (128 x 1 tiles of the original); the weights' blocks serve
//     both ways, transposed.

const char* scaling_name(Scaling s) {
  switch (s) {
    case Scaling::Current:
      return "current";
    case Scaling::Delayed:
      return "delayed";
    case Scaling::Block:
      return "block";
  }
  return "?";
}

Scaling parse_scaling(const std::string& name, const char* what) {
  for (Scaling s : {Scaling::Current, Scaling::Delayed, Scaling::Block}) {
    if (name == scaling_name(s)) return s;
  }
  SINTER_THROW(what, ": unknown FP8 recipe \"", name, "\" (expected current, delayed or block)");
}

void check_recipe(const Recipe& r) {
  SINTER_CHECK(r.amax_history_len >= 1, "fp8: amax_history_len must be at least 1, got ",
               r.amax_history_len);
  SINTER_CHECK(r.margin >= 0 && r.margin <= 30, "fp8: margin must be in [0, 30], got ", r.margin);
  SINTER_CHECK(r.block >= 1, "fp8: block must be at least 1, got ", r.block);
}

namespace {
thread_local bool g_enabled = false;
thread_local Recipe g_recipe;
}  // namespace

Autocast::Autocast(const Recipe& recipe, bool enabled)
    : prev_enabled_(g_enabled), prev_recipe_(g_recipe) {
  check_recipe(recipe);
  g_enabled = enabled;
  g_recipe = recipe;
}

Autocast::~Autocast() {
  g_enabled = prev_enabled_;
  g_recipe = prev_recipe_;
}

bool is_enabled() { return g_enabled; }
const Recipe& recipe() { return g_recipe; }

float max_value(DType format) {
  SINTER_CHECK(is_float8(format), "fp8: expected f8e4m3 or f8e5m2, got ", format);
  return format == DType::f8e4m3 ? Float8E4M3::kMax : Float8E5M2::kMax;
}

float scale_from_amax(float amax, DType format, int margin) {
  return kern::fp8_scale_from_amax(amax, max_value(format), margin);  // the kernels' formula
}

namespace {

// The tile index of each of `n` rows (or columns) of tiles of `tile` of them: i / tile.
Tensor tile_of(int64_t n, int64_t tile, Device dev) {
  return div(arange(n, {.dtype = DType::i64, .device = dev}), tile, "floor");
}

}  // namespace

Tensor Quantized::dequantize() const {
  SINTER_CHECK(data.defined(), "fp8::Quantized::dequantize: no data");
  const Device dev = data.device();
  const Tensor s = index_select(index_select(scale_inv, 0, tile_of(data.size(0), tile_rows, dev)),
                                1, tile_of(data.size(1), tile_cols, dev));
  return mul(data.to(DType::f32), s);
}

Quantized Quantized::transposed() const {
  return {.data = data.t().contiguous(),
          .scale_inv = scale_inv.t().contiguous(),
          .tile_rows = tile_cols,
          .tile_cols = tile_rows};
}

namespace {

template <class Code>
void quantize_tile(const float* x, int64_t ld, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                   float scale, Code* out) {
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t c = c0; c < c1; ++c) {
      const float v = x[r * ld + c] * scale;
      // A NaN's sign after the product is the CPU's or the GPU's choice: one NaN code for all.
      out[r * ld + c] = Code::saturated(std::isnan(v) ? NAN : v);
    }
  }
}

// The amax of a tile: NaN if it holds one.
float tile_amax(const float* x, int64_t ld, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  float m = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t c = c0; c < c1; ++c) {
      const float a = std::fabs(x[r * ld + c]);
      if (std::isnan(a)) return a;
      m = std::max(m, a);
    }
  }
  return m;
}

float max_with_nan(float a, float b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
}

}  // namespace

namespace {

float bits_as_float(int32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The amax of a CUDA tensor, as the bits of a float in an i32 tensor of one element on its device
// (Note [fp8 quantize kernels]).
Tensor amax_on_device(const Tensor& x) {
  const Tensor xc = x.contiguous();  // read in its dtype
  Tensor bits = empty({1}, {.dtype = DType::i32, .device = x.device()});
#ifdef SINTER_WITH_CUDA
  cudak::fp8_amax(kernel_ctx(x.device()), xc.data_ptr(), xc.dtype(), xc.numel(),
                  static_cast<uint32_t*>(bits.data_ptr()));
#else
  SINTER_THROW("fp8::amax: Sinter was built without CUDA");
#endif
  return bits;
}

// An FP8 form of a rows x cols matrix with tiles of tile_rows x tile_cols (clamped to the matrix,
// as fp8::quantize gives them): codes to fill, and scales of 1 until they are.
Quantized blank(int64_t rows, int64_t cols, DType format, int64_t tile_rows, int64_t tile_cols,
                Device dev) {
  const int64_t tr = std::min(tile_rows, std::max<int64_t>(rows, 1));
  const int64_t tc = std::min(tile_cols, std::max<int64_t>(cols, 1));
  const int64_t nbr = (rows + tr - 1) / tr, nbc = (cols + tc - 1) / tc;
  return {
      .data = empty({rows, cols}, {.dtype = format, .device = dev}),
      .scale_inv = ones({std::max<int64_t>(nbr, 1), std::max<int64_t>(nbc, 1)}, {.device = dev}),
      .tile_rows = tr,
      .tile_cols = tc};
}

void run_on(Device dev, const kern::Fp8QuantizeArgs& a, bool pair) {
#ifdef SINTER_WITH_CUDA
  if (pair) {
    cudak::fp8_quantize_transpose(kernel_ctx(dev), a);
  } else {
    cudak::fp8_quantize(kernel_ctx(dev), a);
  }
#else
  (void)dev;
  (void)a;
  (void)pair;
  SINTER_THROW("fp8::quantize: Sinter was built without CUDA");
#endif
}

}  // namespace

namespace detail {

float all_reduce_amax(float amax, dist::ProcessGroup* group) {
  if (group == nullptr) return amax;
  // NaN as infinity: MPI's max of a NaN depends on the operands' order, infinity's does not.
  Tensor t = full({1}, std::isnan(amax) ? INFINITY : amax);
  group->all_reduce(t, dist::ReduceOp::Max);
  return t.item<float>();
}

QuantizedPair quantize_on_device(const Tensor& x, DType format, int64_t tile_rows,
                                 int64_t tile_cols, const kern::Fp8QuantizeArgs& source,
                                 bool transpose, bool retile) {
  const Tensor xc = x.contiguous();  // read in its dtype, each value as x.to(f32) gives it
  const int64_t rows = xc.size(0), cols = xc.size(1);
  QuantizedPair p{.q = blank(rows, cols, format, tile_rows, tile_cols, x.device()), .t = {}};
  kern::Fp8QuantizeArgs a = source;
  a.x = xc.data_ptr();
  a.x_type = xc.dtype();
  a.rows = rows;
  a.cols = cols;
  a.tile_rows = tile_rows;  // as asked: the fused pass's mode (kern::fp8_pair_mode)
  a.tile_cols = tile_cols;
  a.format = format;
  a.codes = static_cast<uint8_t*>(p.q.data.data_ptr());
  a.scale_inv = static_cast<float*>(p.q.scale_inv.data_ptr());
  a.retile_t = retile;
  if (transpose && kern::fp8_pair_mode(a) != kern::Fp8PairMode::kUnfused) {
    p.t = retile ? blank(cols, rows, format, tile_rows, tile_cols, x.device())
                 : blank(cols, rows, format, tile_cols, tile_rows, x.device());
    a.codes_t = static_cast<uint8_t*>(p.t.data.data_ptr());
    a.scale_inv_t = static_cast<float*>(p.t.scale_inv.data_ptr());
    run_on(x.device(), a, true);
    return p;
  }
  a.tile_rows = p.q.tile_rows;  // the tiles the per-tile kernel walks
  a.tile_cols = p.q.tile_cols;
  run_on(x.device(), a, false);
  if (transpose) {
    // Two passes (Note [fp8 quantize kernels]): x^T's own tiles from a transposed copy, or q's
    // codes and scales transposed.
    p.t = retile ? quantize_on_device(xc.t(), format, tile_rows, tile_cols, source, false, false).q
                 : p.q.transposed();
  }
  return p;
}

}  // namespace detail

namespace {

// quantize() and quantize_with_transpose() on a GPU: the given scale, or each tile's own; x's
// amax read back where asked.
QuantizedPair quantize_cuda(const Tensor& x, DType format, int64_t tile_rows, int64_t tile_cols,
                            std::optional<float> scale, float* amax, bool transpose, bool retile) {
  Tensor bits = amax ? zeros({1}, {.dtype = DType::i32, .device = x.device()}) : Tensor();
  const kern::Fp8QuantizeArgs source{
      .has_scale = scale.has_value(),
      .scale = scale.value_or(1.0f),
      .amax_out = bits.defined() ? static_cast<uint32_t*>(bits.data_ptr()) : nullptr};
  QuantizedPair p =
      detail::quantize_on_device(x, format, tile_rows, tile_cols, source, transpose, retile);
  if (amax) *amax = bits_as_float(bits.item<int32_t>());
  return p;
}

}  // namespace

float amax(const Tensor& x) {
  SINTER_CHECK(x.defined() && is_floating(x.dtype()) && !is_float8(x.dtype()),
               "fp8::amax: expected a tensor of f32, f64, bf16 or f16");
  NoGradGuard ng;
  if (x.device().is_cuda()) return bits_as_float(amax_on_device(x).item<int32_t>());
  const Tensor xf = x.to(DType::f32).contiguous();
  const auto* p = static_cast<const float*>(xf.data_ptr());
  const int64_t n = xf.numel();
  constexpr int64_t kPiece = 1 << 16;
  std::vector<float> parts(static_cast<size_t>((n + kPiece - 1) / kPiece), 0.0f);
  sinter::detail::parallel_blocks(
      static_cast<int64_t>(parts.size()), kPiece, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          parts[static_cast<size_t>(b)] =
              tile_amax(p, 0, 0, 1, b * kPiece, std::min(n, (b + 1) * kPiece));
        }
      });
  float m = 0.0f;
  for (const float a : parts) m = max_with_nan(m, a);
  return m;
}

namespace {

// A 2-D tensor of f32, f64, bf16 or f16 values and an FP8 format, for `op`; tiles of at least 1 x 1
// where given.
void check_values(const Tensor& x, DType format, const char* op, int64_t tile_rows = 1,
                  int64_t tile_cols = 1) {
  SINTER_CHECK(x.defined() && x.dim() == 2, op, ": expected a 2-D tensor, got ",
               x.defined() ? shape_str(x.shape()) : "undefined");
  SINTER_CHECK(is_floating(x.dtype()) && !is_float8(x.dtype()), op,
               ": expected f32, f64, bf16 or f16 values, got ", x.dtype());
  SINTER_CHECK(is_float8(format), op, ": format must be f8e4m3 or f8e5m2, got ", format);
  SINTER_CHECK(tile_rows >= 1 && tile_cols >= 1, op, ": tiles must be at least 1 x 1, got ",
               tile_rows, " x ", tile_cols);
}

}  // namespace

Quantized quantize(const Tensor& x, DType format, int64_t tile_rows, int64_t tile_cols,
                   std::optional<float> scale, float* amax) {
  check_values(x, format, "fp8::quantize", tile_rows, tile_cols);
  NoGradGuard ng;
  if (x.device().is_cuda()) {
    return quantize_cuda(x, format, tile_rows, tile_cols, scale, amax, false, false).q;
  }
  const int64_t rows = x.size(0), cols = x.size(1);
  Quantized q = blank(rows, cols, format, tile_rows, tile_cols, x.device());
  const int64_t tr = q.tile_rows, tc = q.tile_cols;
  const int64_t nbr = (rows + tr - 1) / tr, nbc = (cols + tc - 1) / tc;
  const Tensor xf = x.to(DType::f32).contiguous();
  const float* px = static_cast<const float*>(xf.data_ptr());
  auto* inv = static_cast<float*>(q.scale_inv.data_ptr());
  std::vector<float> amaxes(static_cast<size_t>(nbr * nbc), 0.0f);
  sinter::detail::parallel_blocks(nbr * nbc, tr * tc, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = (t / nbc) * tr, c0 = (t % nbc) * tc;
      const int64_t r1 = std::min(rows, r0 + tr), c1 = std::min(cols, c0 + tc);
      const float a = tile_amax(px, cols, r0, r1, c0, c1);
      amaxes[static_cast<size_t>(t)] = a;
      const float s = scale ? *scale : scale_from_amax(a, format);
      inv[t] = 1.0f / s;
      if (format == DType::f8e4m3) {
        quantize_tile(px, cols, r0, r1, c0, c1, s, static_cast<Float8E4M3*>(q.data.data_ptr()));
      } else {
        quantize_tile(px, cols, r0, r1, c0, c1, s, static_cast<Float8E5M2*>(q.data.data_ptr()));
      }
    }
  });
  if (amax) {
    float m = 0.0f;
    for (const float a : amaxes) m = max_with_nan(m, a);
    *amax = m;
  }
  return q;
}

namespace {

// quantize_tensorwise, with x^T's codes where `transpose`; the amax all-reduced over `group`.
QuantizedPair tensorwise(const Tensor& x, DType format, int margin, bool transpose,
                         dist::ProcessGroup* group) {
  check_values(x, format, "fp8::quantize_tensorwise");
  NoGradGuard ng;
  const int64_t rows = std::max<int64_t>(x.size(0), 1), cols = std::max<int64_t>(x.size(1), 1);
  if (!x.device().is_cuda()) {
    const float a = detail::all_reduce_amax(amax(x), group);
    QuantizedPair p{.q = quantize(x, format, rows, cols, scale_from_amax(a, format, margin)),
                    .t = {}};
    if (transpose) p.t = p.q.transposed();
    return p;
  }
  const Tensor xc = x.contiguous();
  Tensor bits = amax_on_device(xc);  // read by the quantization on the device
  // As float bits: max orders them as the values, a NaN's above infinity's.
  if (group) group->all_reduce(bits, dist::ReduceOp::Max);
  const kern::Fp8QuantizeArgs source{.amax_in = static_cast<const uint32_t*>(bits.data_ptr()),
                                     .margin = margin};
  return detail::quantize_on_device(xc, format, rows, cols, source, transpose, false);
}

}  // namespace

Quantized quantize_tensorwise(const Tensor& x, DType format, int margin,
                              dist::ProcessGroup* group) {
  return tensorwise(x, format, margin, false, group).q;
}

QuantizedPair quantize_tensorwise_with_transpose(const Tensor& x, DType format, int margin,
                                                 dist::ProcessGroup* group) {
  return tensorwise(x, format, margin, true, group);
}

QuantizedPair quantize_with_transpose(const Tensor& x, DType format, int64_t tile_rows,
                                      int64_t tile_cols, bool retile, std::optional<float> scale,
                                      float* amax) {
  check_values(x, format, "fp8::quantize_with_transpose", tile_rows, tile_cols);
  NoGradGuard ng;
  if (x.device().is_cuda()) {
    return quantize_cuda(x, format, tile_rows, tile_cols, scale, amax, true, retile);
  }
  QuantizedPair p{.q = quantize(x, format, tile_rows, tile_cols, scale, amax), .t = {}};
  p.t = retile ? quantize(x.t(), format, tile_rows, tile_cols, scale) : p.q.transposed();
  return p;
}

// Note [fp8 gemm]
// out (M, N) = a (M, K) b (N, K)^T from codes and scales, as the tensor cores compute it with the
// scales in the epilogue: for each block of K (the operands' tile_cols; one block of the whole of
// K for the per-tensor recipes),
//   partial = round_f32(sum over k in the block of code_a * code_b, in f64)
//   acc = acc + partial * (scale_inv_a * scale_inv_b)      (each operation rounded to f32)
// with the blocks in order and acc starting at 0, then rounded once to the output dtype. The
// products of two FP8 values are exact in f64, and so are their sums where the partial sums span
// under 53 bits: always for e4m3 x e4m3 with K under 2^17 (multiples of 2^-18 under 448^2 K), so
// the order of the sum does not matter there; with e5m2 operands, whose range is wider, a sum
// spanning more could round in its last f64 bit, 2^-29 of the f32 result's unit. The CPU computes
// the f64 sums as one f64 GEMM per block.
namespace {

// The GEMM on the GPU (kernels/gemm_fp8.cu, Note [fp8 wgmma]): the same formulas with the sums of
// products in the tensor cores' accumulators, one stage of 128 of k at a time.
Tensor gemm_cuda(const Quantized& a, const Quantized& b, DType out_dtype) {
  const Device dev = a.data.device();
  for (const Tensor* t : {&a.data, &a.scale_inv, &b.data, &b.scale_inv}) {
    SINTER_CHECK(t->device() == dev,
                 "fp8::gemm: operands and scales on different devices: ", t->device(), " and ",
                 dev);
  }
  const int64_t m = a.data.size(0), n = b.data.size(0), k = a.data.size(1);
  if (m == 0 || n == 0) return empty({m, n}, {.dtype = out_dtype, .device = dev});
  if (k == 0) return zeros({m, n}, {.dtype = out_dtype, .device = dev});
  const int64_t cols = a.scale_inv.size(1);
  for (const Quantized* q : {&a, &b}) {  // the kernel reads the scales the tiles name
    const int64_t rows = q->data.size(0);
    SINTER_CHECK(q->scale_inv.dim() == 2 && q->tile_rows >= 1 &&
                     q->scale_inv.size(0) == (rows + q->tile_rows - 1) / q->tile_rows,
                 "fp8::gemm: scale_inv of shape ", shape_str(q->scale_inv.shape()),
                 " does not fit ", rows, " rows in tiles of ", q->tile_rows);
  }
  SINTER_CHECK(b.scale_inv.size(1) == cols && (cols == 1 || a.tile_cols == kern::kFp8ScaleBlock),
               "fp8::gemm: on the GPU the scales are one over the whole of K or one per ",
               kern::kFp8ScaleBlock, " of K; got tiles of ", a.tile_cols, " columns");
  const Tensor da = a.data.contiguous(), db = b.data.contiguous();
  const Tensor sa = a.scale_inv.to(DType::f32).contiguous();
  const Tensor sb = b.scale_inv.to(DType::f32).contiguous();
  Tensor out = empty({m, n}, {.dtype = out_dtype, .device = dev});
  kern::Fp8GemmArgs g{.a = da.data_ptr(),
                      .b = db.data_ptr(),
                      .a_type = da.dtype(),
                      .b_type = db.dtype(),
                      .m = m,
                      .n = n,
                      .k = k,
                      .a_scale_inv = static_cast<const float*>(sa.data_ptr()),
                      .b_scale_inv = static_cast<const float*>(sb.data_ptr()),
                      .a_tile_rows = a.tile_rows,
                      .b_tile_rows = b.tile_rows,
                      .scale_cols = cols,
                      .out = out.data_ptr(),
                      .out_type = out_dtype};
#ifdef SINTER_WITH_CUDA
  cudak::fp8_gemm(kernel_ctx(dev), g);
#else
  (void)g;
  SINTER_THROW("fp8::gemm: Sinter was built without CUDA");
#endif
  return out;
}

}  // namespace

Tensor gemm(const Quantized& a, const Quantized& b, DType out_dtype) {
  SINTER_CHECK(a.data.defined() && b.data.defined() && a.data.dim() == 2 && b.data.dim() == 2,
               "fp8::gemm: expected 2-D quantized operands");
  SINTER_CHECK(is_float8(a.data.dtype()) && is_float8(b.data.dtype()),
               "fp8::gemm: operands must be FP8 codes, got ", a.data.dtype(), " and ",
               b.data.dtype());
  const int64_t m = a.data.size(0), n = b.data.size(0), k = a.data.size(1);
  SINTER_CHECK(b.data.size(1) == k, "fp8::gemm: a is ", shape_str(a.data.shape()), " and b is ",
               shape_str(b.data.shape()), "; both must be (rows, K) with one K");
  const int64_t kb = std::min(a.tile_cols, k);
  SINTER_CHECK(std::min(b.tile_cols, k) == kb || k == 0,
               "fp8::gemm: the operands' K tiles differ (", a.tile_cols, " and ", b.tile_cols, ")");
  SINTER_CHECK(out_dtype == DType::f32 || out_dtype == DType::bf16 || out_dtype == DType::f16,
               "fp8::gemm: out_dtype must be f32, bf16 or f16, got ", out_dtype);
  NoGradGuard ng;
  if (a.data.device().is_cuda() || b.data.device().is_cuda()) return gemm_cuda(a, b, out_dtype);
  const int64_t blocks = k == 0 ? 0 : (k + kb - 1) / kb;
  // Each row's (column's) scales per K block.
  const Tensor sa = index_select(a.scale_inv, 0, tile_of(m, a.tile_rows, Device::cpu()));
  const Tensor sb = index_select(b.scale_inv, 0, tile_of(n, b.tile_rows, Device::cpu()));
  const Tensor qa = a.data.to(DType::f64), qb = b.data.to(DType::f64);
  Tensor acc = zeros({m, n});
  for (int64_t j = 0; j < blocks; ++j) {
    const int64_t k0 = j * kb, k1 = std::min(k, k0 + kb);
    const Tensor partial = matmul(qa.slice(1, k0, k1), qb.slice(1, k0, k1).t()).to(DType::f32);
    const Tensor s = mul(sa.slice(1, j, j + 1), sb.slice(1, j, j + 1).reshape({1, n}));
    acc = add(acc, mul(partial, s));
  }
  return acc.to(out_dtype);
}

}  // namespace sinter::fp8

// The random ops: rand, randn and randint draw from Philox counters that a Generator reserves
// (Note [philox streams]), so the CPU and CUDA give the same values (the random family's kernels,
// src/kern/random.h); multinomial samples categories from weights with those uniforms and an
// exponential race decided by argmax or topk.
#include "kern/random.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/autograd.h"
#include "sinter/ops.h"
#include "sinter/tensor.h"

namespace sinter {

namespace {
Generator& gen_or_default(Generator* g) { return g ? *g : default_generator(); }
}  // namespace

// A new tensor whose n elements come from n reserved Philox counters (Note [philox streams]).
template <class Fill>
Tensor random_tensor(const Shape& shape, const TensorOptions& opts, Generator* gen, Fill fill) {
  TensorOptions o = opts;
  o.requires_grad = false;
  Tensor t = empty(shape, o);
  const GeneratorState st = gen_or_default(gen).reserve(static_cast<uint64_t>(t.numel()));
  if (t.numel() > 0) fill(t, st.seed, st.offset);
  return finish_factory(t, opts);
}

// rand (uniform in [0, 1)) and randn (standard normal) in a floating dtype.
Tensor floating_random(const char* op, bool normal, const Shape& shape, const TensorOptions& opts,
                       Generator* gen) {
  SINTER_PROFILE_OP(op);
  SINTER_CHECK(is_floating(opts.dtype), op, ": dtype must be floating, got ", opts.dtype);
  return random_tensor(shape, opts, gen, [normal](const Tensor& t, uint64_t seed, uint64_t offset) {
    if (normal) {
      SINTER_DISPATCH(t.device(), random_normal, t.data_ptr(), t.dtype(), t.numel(), seed, offset,
                      0.0, 1.0);
    } else {
      SINTER_DISPATCH(t.device(), random_uniform, t.data_ptr(), t.dtype(), t.numel(), seed, offset,
                      0.0, 1.0);
    }
  });
}

Tensor rand(const Shape& shape, const TensorOptions& opts, Generator* gen) {
  return floating_random("rand", false, shape, opts, gen);
}

Tensor randn(const Shape& shape, const TensorOptions& opts, Generator* gen) {
  return floating_random("randn", true, shape, opts, gen);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& opts,
               Generator* gen) {
  SINTER_PROFILE_OP("randint");
  SINTER_CHECK(low < high, "randint: low (", low, ") must be less than high (", high, ")");
  SINTER_CHECK(!is_float8(opts.dtype), "randint: no random draws in ", opts.dtype,
               " (as in PyTorch); draw in f32 and convert with .to()");
  {
    // [low, high) must hold values the dtype represents exactly.
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    switch (opts.dtype) {
      case DType::i32:
        lo = INT32_MIN, hi = static_cast<int64_t>(INT32_MAX) + 1;
        break;
      case DType::u8:
        lo = 0, hi = 256;
        break;
      case DType::b8:
        lo = 0, hi = 2;
        break;
      case DType::f32:
        lo = -(int64_t{1} << 24), hi = int64_t{1} << 24;
        break;
      case DType::bf16:
        lo = -256, hi = 256;
        break;
      case DType::f16:
        lo = -2048, hi = 2048;
        break;
      case DType::f64:
        lo = -(int64_t{1} << 53), hi = int64_t{1} << 53;
        break;
      default:
        break;
    }
    SINTER_CHECK(low >= lo && high <= hi, "randint: range [", low, ", ", high,
                 ") does not fit dtype ", opts.dtype, " (exact values in [", lo, ", ", hi, "))");
  }
  SINTER_CHECK(!opts.requires_grad, "randint: integer tensors cannot require grad");
  return random_tensor(shape, opts, gen,
                       [low, high](const Tensor& t, uint64_t seed, uint64_t offset) {
                         SINTER_DISPATCH(t.device(), random_int, t.data_ptr(), t.dtype(), t.numel(),
                                         seed, offset, low, high);
                       });
}

// Note [exponential race]
// With V_j uniform in (0, 1], log(V_j) / w_j = -E_j / w_j for independent E_j ~ Exp(1), and the
// largest of these keys is category j with probability w_j / sum(w): each E_j / w_j is the time of
// an exponential clock of rate w_j, and the first of them to ring is j with that probability. The
// keys sorted from the largest are a draw without replacement (the clocks in the order they ring).
// Weights are divided by the row's largest first, so that the leader's key is at least log(2^-53)
// and the keys of tiny weights are clamped to -DBL_MAX rather than -inf; zero weights get -inf,
// which therefore never wins while a positive weight remains.
namespace {

// Keys of the race for weights w (rows, n), f64, each row's largest 1, broadcast against uniforms
// u in [0, 1) of shape (rows, n) or (rows, c, n).
Tensor race_keys(const Tensor& w, const Tensor& u) {
  const Tensor key = clamp(div(log(sub(1.0, u)), w), -DBL_MAX);
  return where(gt(w, 0.0), key, -std::numeric_limits<double>::infinity());
}

// Uniforms of `shape` in f64 on `device`.
Tensor uniforms(const Shape& shape, Device device, Generator* gen) {
  return rand(shape, {.dtype = DType::f64, .device = device}, gen);
}

}  // namespace

Tensor multinomial(const Tensor& weights, int64_t num_samples, bool replacement, Generator* gen) {
  SINTER_PROFILE_OP("multinomial", weights);
  const char* op = "multinomial";
  SINTER_CHECK(weights.defined(), op, ": undefined weights");
  SINTER_CHECK(weights.dim() == 1 || weights.dim() == 2, op,
               ": weights must be 1-D (n) or 2-D (rows, n), got shape ",
               shape_str(weights.shape()));
  SINTER_CHECK(is_floating(weights.dtype()), op, ": weights must be floating, got dtype ",
               weights.dtype());
  SINTER_CHECK(num_samples > 0, op, ": num_samples must be positive, got ", num_samples);
  const int64_t n = weights.size(-1), rows = weights.dim() == 2 ? weights.size(0) : 1;
  SINTER_CHECK(n > 0, op, ": no categories to draw from (weights of shape ",
               shape_str(weights.shape()), ")");
  const Shape out_shape = weights.dim() == 2 ? Shape{rows, num_samples} : Shape{num_samples};
  if (rows == 0) return empty(out_shape, {.dtype = DType::i64, .device = weights.device()});
  NoGradGuard ng;
  Tensor w = weights.reshape({rows, n}).to(DType::f64);
  {
    // min is NaN when any weight is (Note [extremum order]).
    const double lo = min(w).item<double>(), hi = max(w).item<double>();
    SINTER_CHECK(!std::isnan(lo), op, ": weights contain NaN");
    SINTER_CHECK(lo >= 0, op, ": weights must be non-negative, got ", lo);
    SINTER_CHECK(std::isfinite(hi), op, ": weights must be finite, got ", hi);
    const Tensor positive = sum(gt(w, 0.0), {1});  // i64 counts per row
    const auto [fewest, row] = min(positive, 0);
    const int64_t count = fewest.item<int64_t>();
    SINTER_CHECK(count > 0, op, ": the weights of row ", row.item<int64_t>(), " are all zero");
    SINTER_CHECK(replacement || num_samples <= count, op, ": cannot draw ", num_samples,
                 " samples without replacement from row ", row.item<int64_t>(), ", which has ",
                 count, " non-zero weights");
  }
  w = div(w, amax(w, {1}, true));
  Tensor out;
  if (!replacement) {
    const Tensor keys = race_keys(w, uniforms({rows, n}, w.device(), gen));
    out = std::get<1>(topk(keys, num_samples, 1, true));
  } else {
    // A race per sample, over (rows, c, n) keys: c samples at a time bounds the memory.
    constexpr int64_t kChunkElems = int64_t{1} << 22;
    const int64_t c = std::clamp<int64_t>(kChunkElems / (rows * n), 1, num_samples);
    const Tensor wb = w.reshape({rows, 1, n});
    std::vector<Tensor> parts;
    for (int64_t s = 0; s < num_samples; s += c) {
      const int64_t m = std::min(c, num_samples - s);
      parts.push_back(argmax(race_keys(wb, uniforms({rows, m, n}, w.device(), gen)), 2));
    }
    out = parts.size() == 1 ? parts[0] : cat(parts, 1);
  }
  return out.reshape(out_shape);
}

}  // namespace sinter

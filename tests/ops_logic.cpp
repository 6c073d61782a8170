// Op-table rows of sinter/ops_math.h: the trigonometric, hyperbolic and logarithmic functions and
// the ops composed of others (reciprocal, logaddexp, xlogy, logit, nan_to_num), gradchecked; the
// tests of values, logic and bitwise ops and all / any / count_nonzero, compared across devices;
// and the composed conveniences of sinter/ops_tensor.h (repeat, movedim, diff, addmm, nansum ...).
#include <limits>
#include <vector>

#include "op_table.h"

namespace sinter::testing {

namespace {

// Small integers (-8..7) from the random inputs, for the bitwise rows.
Tensor small_ints(const Tensor& x, DType t = DType::i64) {
  return clamp(floor(mul(x.detach(), 4.0)), -8.0, 7.0).to(t);
}

// x with NaN, +inf and -inf placed at fixed positions of its flattened first elements.
Tensor with_specials(const Tensor& x) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor flat = x.reshape({-1});
  const int64_t n = flat.numel();
  std::vector<double> put(static_cast<size_t>(n), 0.0);
  std::vector<bool> keep(static_cast<size_t>(n), true);
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(), inf, -inf, 0.0};
  for (int64_t i = 0; i < n && i < 8; i += 2) {
    put[static_cast<size_t>(i)] = specials[i / 2];
    keep[static_cast<size_t>(i)] = false;
  }
  std::vector<uint8_t> keep_bytes(keep.begin(), keep.end());
  const Tensor mask = from_vector<uint8_t>(keep_bytes, x.shape()).to(DType::b8).to(x.device());
  return where(mask, x, from_vector<double>(put, x.shape()).to(x.dtype()).to(x.device()));
}

}  // namespace

std::vector<OpRow> logic_rows() {
  return {
      // lgamma and digamma: on [0.5, 2), and reflected on (-2.86, -2.14), between two poles.
      {.name = "Lgamma",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return lgamma(x[0]); },
       .domain = Domain::Positive},
      {.name = "LgammaReflected",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return lgamma(sub(mul(x[0], 0.4), 2.5)); },
       .domain = Domain::Unit},
      {.name = "Digamma",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return digamma(mul(x[0], 6.0)); },
       .domain = Domain::Positive},
      {.name = "DigammaReflected",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return digamma(sub(mul(x[0], 0.4), 2.5)); },
       .domain = Domain::Unit},
      {.name = "Tan",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return tan(x[0]); },
       .domain = Domain::Unit},
      {.name = "Asin",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return asin(x[0]); },
       .domain = Domain::Unit},
      {.name = "Acos",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return acos(x[0]); },
       .domain = Domain::Unit},
      {.name = "Atan", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return atan(x[0]); }},
      {.name = "Sinh", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return sinh(x[0]); }},
      {.name = "Cosh", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return cosh(x[0]); }},
      {.name = "Asinh", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return asinh(x[0]); }},
      {.name = "Acosh",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return acosh(add(x[0], 1.0)); },
       .domain = Domain::Positive},
      {.name = "Atanh",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return atanh(x[0]); },
       .domain = Domain::Unit},
      {.name = "Log2",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return log2(x[0]); },
       .domain = Domain::Positive},
      {.name = "Log10",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return log10(x[0]); },
       .domain = Domain::Positive},
      {.name = "Exp2", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return exp2(x[0]); }},
      {.name = "Reciprocal",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return reciprocal(x[0]); },
       .domain = Domain::NonZero},
      {.name = "Deg2RadRad2Deg",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return add(deg2rad(x[0]), rad2deg(x[0])); }},
      {.name = "Logaddexp",
       .shapes = {S{3, 4}, S{4}},
       .fn = [](const Inputs& x) { return logaddexp(mul(x[0], 3.0), x[1]); }},
      {.name = "Logaddexp2",
       .shapes = {S{3, 1}, S{3, 4}},
       .fn = [](const Inputs& x) { return logaddexp2(x[0], mul(x[1], 3.0)); }},
      {.name = "Xlogy",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn = [](const Inputs& x) { return xlogy(x[0], x[1]); },
       .domain = Domain::Positive},
      {.name = "XlogyZeros",  // a = 0 in a column: 0 there, and finite gradients
       .shapes = {S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             return xlogy(mul(x[0], tril(ones({3, 4}).to(x[0].device()))), abs(x[1]));
           },
       .domain = Domain::NonZero},
      {.name = "Logit",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return logit(mul(add(x[0], 1.0), 0.5)); },
       .domain = Domain::Unit},
      {.name = "LogitEps",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return logit(mul(add(x[0], 1.0), 0.5), 0.2); },
       .domain = Domain::Unit},
      {.name = "NanToNum",
       .shapes = {S{3, 4}},
       .fn = [](const Inputs& x) { return nan_to_num(with_specials(x[0]), 0.5, 7.0, -9.0); }},
      // Not differentiable: bool and integer results, compared exactly across devices.
      {.name = "IsNanInfFinite",
       .shapes = {S{3, 4}},
       .fn =
           [](const Inputs& x) {
             const Tensor s = with_specials(x[0]);
             return stack({isnan(s), isinf(s), isposinf(s), isneginf(s), isfinite(s)});
           },
       .grad = false},
      {.name = "Logical",
       .shapes = {S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             const Tensor a = small_ints(x[0]), b = gt(x[1], 0.0);
             return stack(
                 {logical_not(a), logical_and(a, b), logical_or(x[0], b), logical_xor(a, x[1])});
           },
       .grad = false},
      {.name = "BitwiseI64",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn =
           [](const Inputs& x) {
             const Tensor a = small_ints(x[0]), b = small_ints(x[1]);
             return stack({bitwise_and(a, b), bitwise_or(a, b), bitwise_xor(a, b), bitwise_not(a),
                           bitwise_and(a, 6)});
           },
       .grad = false},
      {.name = "BitwiseU8Bool",
       .shapes = {S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             const Tensor a = add(small_ints(x[0]), 8).to(DType::u8), b = gt(x[1], 0.0);
             return stack({bitwise_or(a, b), bitwise_not(a), bitwise_xor(a, 255),
                           bitwise_and(b, lt(x[0], 0.5)).to(DType::u8)});
           },
       .grad = false},
      {.name = "RepeatTile",
       .shapes = {S{2, 3}},
       .fn =
           [](const Inputs& x) {
             return add(repeat(x[0], {2, 1, 2}), repeat_interleave(tile(x[0], {2, 1, 1}), 2, 2));
           }},
      {.name = "BroadcastToMovedim",
       .shapes = {S{3, 1, 4}},
       .fn =
           [](const Inputs& x) {
             return mul(movedim(broadcast_to(x[0], {2, 3, 5, 4}), {0, 3}, {3, 1}), 2.0);
           }},
      {.name = "MaskedSelect",
       .shapes = {S{3, 4}, S{4}},
       .fn = [](const Inputs& x) { return masked_select(x[0], gt(x[1].detach(), 0.0)); }},
      {.name = "Diff",
       .shapes = {S{3, 5}, S{3, 1}, S{3, 2}},
       .fn = [](const Inputs& x) { return diff(x[0], 2, 1, x[1], x[2]); }},
      {.name = "OuterDotMv",
       .shapes = {S{3}, S{4}, S{3, 4}},
       .fn =
           [](const Inputs& x) {
             return add(add(outer(x[0], x[1]), dot(x[1], x[1])), mv(x[2], x[1]).view({3, 1}));
           }},
      {.name = "Addmm",
       .shapes = {S{4}, S{3, 5}, S{5, 4}},
       .fn = [](const Inputs& x) { return addmm(x[0], x[1], x[2], 0.5, -2.0); }},
      {.name = "Trace", .shapes = {S{3, 4}}, .fn = [](const Inputs& x) { return trace(x[0]); }},
      {.name = "NansumNanmean",
       .shapes = {S{3, 4}},
       .fn =
           [](const Inputs& x) {
             const Tensor s = with_specials(x[0]);
             const Tensor finite = nan_to_num(s, 0.0, 1.0, -1.0);
             const Tensor no_inf = where(isinf(s), finite, s);
             return cat({nansum(no_inf, {1}), nanmean(no_inf, {0}), nansum(no_inf).view({1})});
           }},
      {.name = "KthvalueMedian",
       .shapes = {S{3, 5}},
       .fn =
           [](const Inputs& x) {
             return cat({std::get<0>(kthvalue(x[0], 2, 1)), std::get<0>(median(x[0], 0)),
                         std::get<0>(nanmedian(with_specials(x[0]), 1)), median(x[0]).view({1}),
                         nanmedian(x[0]).view({1})});
           }},
      {.name = "Quantile",
       .shapes = {S{3, 5}},
       .fn =
           [](const Inputs& x) {
             const Tensor q = from_vector<double>({0.1, 0.5, 0.75}, {3}).to(x[0].dtype());
             std::vector<Tensor> parts;
             for (auto how : {QuantileInterpolation::Linear, QuantileInterpolation::Lower,
                              QuantileInterpolation::Higher, QuantileInterpolation::Nearest,
                              QuantileInterpolation::Midpoint}) {
               parts.push_back(quantile(x[0], q.to(x[0].device()), 1, false, how).reshape({-1}));
             }
             parts.push_back(nanquantile(x[0], 0.3).reshape({-1}));
             return cat(parts);
           },
       .bf16 = false},  // quantile takes f32 and f64
      {.name = "AllAnyCount",
       .shapes = {S{3, 4, 5}},
       .fn =
           [](const Inputs& x) {
             const Tensor a = small_ints(x[0]);
             return cat({all(a, {2}).to(DType::i64), any(gt(x[0], 1.0), {2}).to(DType::i64),
                         count_nonzero(a, {2}),
                         all(ne(a, 100), {1, 2}, true).view({3, 1}).to(DType::i64).expand({3, 4})},
                        0);
           },
       .grad = false},
  };
}

}  // namespace sinter::testing

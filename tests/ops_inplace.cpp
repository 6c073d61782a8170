// Op-table rows of in-place ops under autograd (Note [in-place autograd],
// src/autograd/inplace.cpp): writes into a result, into a view of one (its base rebased), views
// made before a write and used after it, and writes whose backward needs the old values. The
// gradcheck's finite differences run the same function without a graph, where the ops write
// directly: the two paths meet.
#include <vector>

#include "op_table.h"

namespace sinter::testing {

namespace {
Tensor flat(const Tensor& t) { return t.reshape({-1}); }
}  // namespace

std::vector<OpRow> inplace_rows() {
  return {
      {.name = "InPlaceAddIntoResult",
       .shapes = {S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             Tensor y = sin(x[0]);  // saves its input, not y
             y.add_(x[1], 0.5);
             y.add_(2.0);
             return y * y;
           }},
      // mul's backward needs y's old values for x[1]'s gradient: computed on a clone of y.
      {.name = "InPlaceMulBySourceThatRequiresGrad",
       .shapes = {S{3, 4}, S{3, 1}},
       .fn =
           [](const Inputs& x) {
             Tensor y = sin(x[0]);
             y.mul_(x[1]);
             y.mul_(3.0);
             return y * y;
           }},
      {.name = "InPlaceCopyIntoRowOfResult",
       .shapes = {S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             Tensor y = x[0] * 1.5;
             y.select(0, 1).copy_(x[1] * x[1]);
             return y * y;
           }},
      // A buffer that requires no grad filled column by column (an unrolled recurrence).
      {.name = "InPlaceBufferFilledByColumns",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn =
           [](const Inputs& x) {
             Tensor buf = zeros({3, 4}, {.dtype = x[0].dtype(), .device = x[0].device()});
             Tensor h = x[1].select(1, 0);
             for (int64_t t = 0; t < 4; ++t) {
               h = tanh(x[0].select(1, t) * h + x[1].select(1, t));
               buf.select(1, t).copy_(h);
             }
             return buf * buf;
           }},
      // a, made before the write into rows 1-2, is used after it: its graph is remade through
      // the rebased base (row 1 comes from x[1]).
      {.name = "InPlaceViewMadeBeforeWrite",
       .shapes = {S{3, 4}, S{2, 4}},
       .fn =
           [](const Inputs& x) {
             Tensor y = x[0] * 1.0;
             Tensor a = y.narrow(0, 0, 2);
             y.narrow(0, 1, 2).add_(x[1]);
             return cat({flat(a * a), flat(y)});
           }},
      // An expanded view (its elements repeated) made before the write: their gradients add up.
      {.name = "InPlaceExpandedViewMadeBeforeWrite",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn =
           [](const Inputs& x) {
             Tensor y = x[0] * 2.0;
             Tensor e = y.unsqueeze(0).expand({2, 3, 4});
             y.mul_(x[1]);
             return e * e;
           }},
      {.name = "InPlaceThroughTransposedView",
       .shapes = {S{3, 4}, S{2, 3}},
       .fn =
           [](const Inputs& x) {
             Tensor y = x[0] * 1.0;
             Tensor v = y.t().narrow(0, 1, 2);
             v.mul_(2.0);
             v.add_(x[1]);
             return cat({flat(y * y), flat(v)});
           }},
      // A view of a view written: the base's graph takes it; the outer view is remade.
      {.name = "InPlaceViewOfView",
       .shapes = {S{3, 4}, S{2, 2}},
       .fn =
           [](const Inputs& x) {
             Tensor y = x[0] * 1.0;
             Tensor v = y.narrow(0, 1, 2);
             v.narrow(1, 1, 2).mul_(x[1]);
             return cat({flat(v * v), flat(y)});
           }},
      // Filled and zeroed parts pass no gradient back.
      {.name = "InPlaceFillAndZeroParts",
       .shapes = {S{3, 4}, S{3, 4}},
       .fn =
           [](const Inputs& x) {
             Tensor y = x[0] * x[1];
             y.narrow(1, 0, 1).zero_();
             y.narrow(1, 2, 1).fill_(3.0);
             return y * x[0];
           }},
      // The whole result overwritten: its past gets zeros.
      {.name = "InPlaceCopyOverWholeResult",
       .shapes = {S{3, 4}, S{4}},
       .fn =
           [](const Inputs& x) {
             Tensor y = x[0] * 2.0;
             Tensor before = y * 3.0;  // saves nothing of y
             y.copy_(x[1]);
             return cat({flat(y * 3.0), flat(before)});
           }},
  };
}

}  // namespace sinter::testing

// MaxPool3d and AvgPool3d as ONNX's MaxPool and AveragePool (opset 17) with 3-D kernel_shape,
// strides, pads and (for MaxPool) dilations over a batched (N, C, D, H, W) input.
#include <functional>
#include <string>
#include <vector>

#include "onnx/exporter.h"
#include "sinter/nn/pooling.h"
#include "sinter/ops.h"

namespace sinter::onnx::detail {

namespace {

std::vector<int64_t> dhw(Size3 v) { return {v.d, v.h, v.w}; }

// The node of a 3-D pool: checks that ONNX's output sizes (its ceil mode keeps a last window that
// starts in the right padding, Sinter's and PyTorch's drop it) are Sinter's and, for averages,
// that no window runs past the padded input (the two count that divisor differently).
Value pool3d_node(Exporter& ex, nn::Module& m, const Site& s, const Value& x, const char* op,
                  Size3 k, Size3 stride, Size3 pad, Size3 dil, bool ceil_mode,
                  const std::function<void(pb::NodeProto*)>& extra) {
  const std::string what = m.name();
  SINTER_CHECK(x.t.dim() == 5, "onnx::export_model: ", where(s.path), " (", what,
               ") takes an unbatched (C, D, H, W) input here; export with a batched (N, C, D, H, "
               "W) example input");
  const Tensor y = m.forward(x.t);
  const Size3 st = stride == Size3(0) ? k : stride;
  const bool average = std::string(op) == "AveragePool";
  const std::vector<int64_t> ks = dhw(k), ss = dhw(st), ps = dhw(pad), ds = dhw(dil);
  for (int i = 0; i < 3; ++i) {
    const PoolDim p = pool_dim(x.t.size(2 + i), ks[i], ss[i], ps[i], ds[i], ceil_mode);
    SINTER_CHECK(p.size == y.size(2 + i), "onnx::export_model: ", where(s.path), " (", what,
                 "): ONNX's ceil mode gives ", p.size, " outputs along dim ", 2 + i,
                 " where Sinter's gives ", y.size(2 + i),
                 " (its last window would start in the padding); export without ceil_mode");
    SINTER_CHECK(!average || !p.overhangs, "onnx::export_model: ", where(s.path), " (", what,
                 "): in ceil mode its last window along dim ", 2 + i,
                 " runs past the padded input, where ONNX's AveragePool divides by another "
                 "count than Sinter's; export without ceil_mode");
  }
  return {ex.node_with(
              op, {x.name}, s.scope,
              [&](pb::NodeProto* n) {
                attr(n, "kernel_shape", ks);
                attr(n, "strides", ss);
                attr(n, "pads", std::vector<int64_t>{pad.d, pad.h, pad.w, pad.d, pad.h, pad.w});
                attr(n, "ceil_mode", int64_t{ceil_mode});
                extra(n);
              }),
          y};
}

}  // namespace

Value pool3d(Exporter& ex, nn::MaxPool3d& m, const Site& s, const Value& x) {
  const MaxPool3dOptions& o = m.options;
  return pool3d_node(ex, m, s, x, "MaxPool", m.kernel_size, o.stride, o.padding, o.dilation,
                     o.ceil_mode, [&](pb::NodeProto* n) { attr(n, "dilations", dhw(o.dilation)); });
}

Value pool3d(Exporter& ex, nn::AvgPool3d& m, const Site& s, const Value& x) {
  const AvgPool3dOptions& o = m.options;
  return pool3d_node(
      ex, m, s, x, "AveragePool", m.kernel_size, o.stride, o.padding, 1, o.ceil_mode,
      [&](pb::NodeProto* n) { attr(n, "count_include_pad", int64_t{o.count_include_pad}); });
}

}  // namespace sinter::onnx::detail

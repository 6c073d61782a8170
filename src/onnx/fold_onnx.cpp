// Unfold and Fold as ONNX's Conv and ConvTranspose (opset 17 has no Col2Im) with a one-hot
// weight: output channel c kH kW + i kW + j of the grouped convolution (one group per channel)
// takes tap (i, j) of channel c, which is unfold's row; the transposed convolution with the same
// weight adds each row back at its tap, which is fold. Exact: each output is one tap times 1.
#include <string>
#include <vector>

#include "onnx/exporter.h"
#include "sinter/nn/fold.h"
#include "sinter/ops.h"

namespace sinter::onnx::detail {

namespace {

// (C kH kW, 1, kH, kW): row c kH kW + t is 1 at tap t.
Tensor one_hot_taps(int64_t channels, Size2 k) {
  const int64_t taps = k.h * k.w;
  std::vector<float> w(channels * taps * taps, 0.0f);
  for (int64_t r = 0; r < channels * taps; ++r) w[r * taps + r % taps] = 1.0f;
  return from_vector<float>(w, {channels * taps, 1, k.h, k.w});
}

void check_batched(const Site& s, const char* what, const Tensor& x, int64_t dims,
                   const char* shape) {
  SINTER_CHECK(x.dim() == dims, "onnx::export_model: ", where(s.path), " (", what,
               ") takes an unbatched input ", shape_str(x.shape()), " here; export with a batched ",
               shape, " example input");
}

// The attributes Conv and ConvTranspose share.
void set_geometry(pb::NodeProto* n, Size2 k, const FoldOptions& o, int64_t channels) {
  attr(n, "kernel_shape", std::vector<int64_t>{k.h, k.w});
  attr(n, "strides", std::vector<int64_t>{o.stride.h, o.stride.w});
  attr(n, "dilations", std::vector<int64_t>{o.dilation.h, o.dilation.w});
  attr(n, "pads", std::vector<int64_t>{o.padding.h, o.padding.w, o.padding.h, o.padding.w});
  attr(n, "group", channels);
}

}  // namespace

// x (N, C, H, W) -> Conv (N, C kH kW, H_out, W_out) -> Reshape (N, C kH kW, L).
Value unfold_layer(Exporter& ex, nn::Unfold& m, const Site& s, const Value& x) {
  check_batched(s, "Unfold", x.t, 4, "(N, C, H, W)");
  const Tensor y = m.forward(x.t);
  const int64_t c = x.t.size(1);
  const std::string cols = ex.node_with(
      "Conv", {x.name, ex.constant(one_hot_taps(c, m.kernel_size), "unfold_taps")}, s.scope,
      [&](pb::NodeProto* n) { set_geometry(n, m.kernel_size, m.options, c); });
  return {ex.node("Reshape", {cols, ex.ints({0, y.size(1), y.size(2)})}, s.scope), y};
}

// x (N, C kH kW, L) -> Reshape (N, C kH kW, H_out, W_out) -> ConvTranspose (N, C, H, W), its
// output_padding making up what the blocks leave uncovered at the bottom and right.
Value fold_layer(Exporter& ex, nn::Fold& m, const Site& s, const Value& x) {
  check_batched(s, "Fold", x.t, 3, "(N, C kH kW, L)");
  const Tensor y = m.forward(x.t);
  const Size2 k = m.kernel_size, out = m.output_size;
  const FoldOptions& o = m.options;
  const int64_t c = y.size(1);
  auto blocks = [](int64_t size, int64_t kk, int64_t d, int64_t p, int64_t st) {
    return (size + 2 * p - d * (kk - 1) - 1) / st + 1;
  };
  const int64_t h_out = blocks(out.h, k.h, o.dilation.h, o.padding.h, o.stride.h);
  const int64_t w_out = blocks(out.w, k.w, o.dilation.w, o.padding.w, o.stride.w);
  auto extra = [](int64_t size, int64_t n, int64_t kk, int64_t d, int64_t p, int64_t st) {
    return size + 2 * p - ((n - 1) * st + d * (kk - 1) + 1);
  };
  const std::string planes =
      ex.node("Reshape", {x.name, ex.ints({0, x.t.size(1), h_out, w_out})}, s.scope);
  return {
      ex.node_with("ConvTranspose", {planes, ex.constant(one_hot_taps(c, k), "fold_taps")}, s.scope,
                   [&](pb::NodeProto* n) {
                     set_geometry(n, k, o, c);
                     attr(n, "output_padding",
                          std::vector<int64_t>{
                              extra(out.h, h_out, k.h, o.dilation.h, o.padding.h, o.stride.h),
                              extra(out.w, w_out, k.w, o.dilation.w, o.padding.w, o.stride.w)});
                   }),
      y};
}

}  // namespace sinter::onnx::detail

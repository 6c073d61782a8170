// The parts of the CPU inference plans (src/cpu/infer_plan_parts_dnnl.h): oneDNN primitives made
// once, with their weights reordered, and the plans' own loops' operands.
#include "cpu/infer_plan_parts_dnnl.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/conv_small.h"

namespace sinter::cpu::plan {
namespace {

// The right padding that makes oneDNN's output size the geometry's (PyTorch's floor).
memory::dims right_pad(const kern::Conv2dGeom& g) {
  return {(g.h_out - 1) * g.stride_h + (g.kh - 1) * g.dil_h + 1 - g.h - g.pad_h,
          (g.w_out - 1) * g.stride_w + (g.kw - 1) * g.dil_w + 1 - g.w - g.pad_w};
}

Packed pack(const memory::desc& plain, const memory::desc& want, const void* src) {
  Packed p{Storage::allocate(std::max<size_t>(want.get_size(), 1), Device::cpu()), want};
  memory from(plain, onednn::engine(), const_cast<void*>(src));
  memory to(want, onednn::engine(), p.data.data());
  dnnl::stream s(onednn::engine());
  dnnl::reorder(from, to).execute(s, from, to);
  s.wait();
  return p;
}

// A Linear's weight with its input features put in the order of an NHWC value: column
// (y x + x) c + ch of the result is column ch h w + y w + x of `w`, the flattened NCHW order.
template <class T>
std::vector<T> hwc_columns(const Layer& l, const T* w, const Shape3& in) {
  if (in.h * in.w == 1 || in.c == 1) return std::vector<T>(w, w + l.out * l.in);
  std::vector<T> out(static_cast<size_t>(l.out * l.in));
  const int64_t hw = in.h * in.w;
  for (int64_t o = 0; o < l.out; ++o) {
    for (int64_t ch = 0; ch < in.c; ++ch) {
      for (int64_t p = 0; p < hw; ++p) out[o * l.in + p * in.c + ch] = w[o * l.in + ch * hw + p];
    }
  }
  return out;
}

Storage copy_of(const float* v, int64_t n) {
  Storage s = Storage::allocate(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float),
                                Device::cpu());
  std::memcpy(s.data(), v, static_cast<size_t>(n) * sizeof(float));
  return s;
}

dnnl::primitive_attr attributes(bool sum, bool relu) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops ops;
  if (sum) ops.append_sum(1.0F);
  if (relu) ops.append_eltwise(1.0F, dnnl::algorithm::eltwise_relu, 0.0F, 0.0F);
  attr.set_post_ops(ops);
  return attr;
}

// An int8 primitive whose kernel is not a VNNI or AMX one (vpmaddubsw's 16-bit pair sums
// saturate): refused, so that the int8 layers run module by module with exact sums.
void refuse_inexact_int8(const dnnl::primitive_desc_base& pd) {
  onednn::refuse_reference(pd);
  const std::string impl = pd.impl_info_str();
  if (impl.find("vnni") == std::string::npos && impl.find("amx") == std::string::npos) {
    throw dnnl::error(dnnl_unimplemented, "an int8 kernel without VNNI");
  }
}

// The int8 epilogue's operands of output channels [j0, j0 + count): the scales as quantize
// computes them (input_scale weight_scale[j], one f32 product) and the bias (0 where none, as the
// int8 layers add it).
void int8_epilogue_of(const Layer& l, int64_t j0, int64_t count, Part& part) {
  part.channels = count;
  part.scale.resize(static_cast<size_t>(count));
  part.shift.assign(static_cast<size_t>(count), 0.0F);
  for (int64_t j = 0; j < count; ++j) {
    part.scale[j] = l.input_scale * l.weight_scale[j0 + j];
    if (l.bias != nullptr) part.shift[j] = l.bias[j0 + j];
  }
}

// The convolution or pooling of g (its input rows g.h from g.pad_h above, its output rows g.h_out)
// on n images.
Part conv_part(const Layer& l, const kern::Conv2dGeom& g, int64_t n) {
  Part part;
  part.src = nhwc(n, {g.c_in, g.h, g.w});
  part.dst = nhwc(n, {g.c_out, g.h_out, g.w_out});
  const memory::dims strides = {g.stride_h, g.stride_w}, pad_l = {g.pad_h, g.pad_w};
  if (l.op == Op::MaxPool) {  // the plan's own loop (vec::max_pool_nhwc)
    part.pool = true;
    part.geom = g;
    part.geom.n = n;
    return part;
  }
  const memory::dims w_dims =
      g.groups > 1 ? memory::dims{g.groups, g.c_out / g.groups, g.c_in / g.groups, g.kh, g.kw}
                   : memory::dims{g.c_out, g.c_in, g.kh, g.kw};
  const DT wt = l.int8 ? DT::s8 : DT::f32;
  const memory::desc w_plain(w_dims, wt, g.groups > 1 ? Tag::goihw : Tag::oihw);
  const memory::desc w_any(w_dims, wt, Tag::any);
  const memory::dims dil = {g.dil_h - 1, g.dil_w - 1};
  const auto fwd = dnnl::prop_kind::forward_inference;
  const auto algo = dnnl::algorithm::convolution_direct;
  if (l.int8) {
    // The exact int32 sums of the quantized input and weight; the epilogue is the plan's own.
    part.src = memory::desc({n, g.c_in, g.h, g.w}, DT::s8, Tag::nhwc);
    part.dst = memory::desc({n, g.c_out, g.h_out, g.w_out}, DT::s32, Tag::nhwc);
    const dnnl::convolution_forward::desc d(fwd, algo, part.src, w_any, part.dst, strides, dil,
                                            pad_l, right_pad(g));
    const dnnl::convolution_forward::primitive_desc pd(d, attributes(false, false),
                                                       onednn::engine());
    refuse_inexact_int8(pd);
    part.prim = dnnl::convolution_forward(pd);
    part.hold_signals = onednn::holds_signals(pd);
    part.weight = pack(w_plain, pd.weights_desc(), l.weight_q);
    part.scratchpad = pd.scratchpad_desc();
    int8_epilogue_of(l, 0, g.c_out, part);
    part.rows = n * g.h_out * g.w_out;
    part.stride = g.c_out;
    return part;
  }
  if (l.residual < 0 && small_conv::takes(g)) {  // Note [small convolutions]
    part.small = true;
    part.geom = g;
    part.geom.n = n;
    const std::vector<float> packed = small_conv::pack(g, l.weight);
    part.weight.data = copy_of(packed.data(), static_cast<int64_t>(packed.size()));
    if (l.bias != nullptr) part.bias_data = copy_of(l.bias, g.c_out);
    part.own_scratch = static_cast<size_t>(small_conv::scratch_floats(g)) * sizeof(float);
    return part;
  }
  if (l.bias != nullptr) part.bias = memory::desc({g.c_out}, DT::f32, Tag::x);
  const auto d = l.bias != nullptr
                     ? dnnl::convolution_forward::desc(fwd, algo, part.src, w_any, part.bias,
                                                       part.dst, strides, dil, pad_l, right_pad(g))
                     : dnnl::convolution_forward::desc(fwd, algo, part.src, w_any, part.dst,
                                                       strides, dil, pad_l, right_pad(g));
  const dnnl::convolution_forward::primitive_desc pd(d, attributes(l.residual >= 0, l.relu),
                                                     onednn::engine());
  onednn::refuse_reference(pd);
  part.prim = dnnl::convolution_forward(pd);
  part.hold_signals = onednn::holds_signals(pd);
  part.weight = pack(w_plain, pd.weights_desc(), l.weight);
  if (l.bias != nullptr) part.bias_data = copy_of(l.bias, g.c_out);
  part.scratchpad = pd.scratchpad_desc();
  return part;
}

// Output features [j0, j1) of a Linear on n rows; `w` its (out, in) weight (f32, or int8 with
// Layer::int8) with the columns in the value's order.
Part linear_part(const Layer& l, const void* w, int64_t n, int64_t j0, int64_t j1) {
  Part part;
  const int64_t cols = j1 - j0;
  const DT t = l.int8 ? DT::s8 : DT::f32;
  part.src = memory::desc({n, l.in}, t, Tag::ab);
  part.dst = l.int8 ? memory::desc({n, cols}, DT::s32, Tag::ab)
                    : memory::desc({n, cols}, DT::f32, memory::dims{l.out, 1});
  part.dst_at = j0;
  const bool bias = l.bias != nullptr && !l.int8;
  if (bias) part.bias = memory::desc({1, cols}, DT::f32, Tag::ab);
  const memory::desc w_any({l.in, cols}, t, Tag::any);
  const auto d = bias ? dnnl::matmul::desc(part.src, w_any, part.bias, part.dst)
                      : dnnl::matmul::desc(part.src, w_any, part.dst);
  const dnnl::matmul::primitive_desc pd(d, attributes(false, l.relu && !l.int8), onednn::engine());
  if (l.int8) {
    refuse_inexact_int8(pd);
  } else {
    onednn::refuse_reference(pd);
  }
  part.prim = dnnl::matmul(pd);
  part.hold_signals = onednn::holds_signals(pd);
  // Rows [j0, j1) of the stored (out, in) weight, as the (in, cols) matrix.
  const size_t elem = l.int8 ? 1 : sizeof(float);
  part.weight = pack(memory::desc({l.in, cols}, t, Tag::ba), pd.weights_desc(),
                     static_cast<const char*>(w) + j0 * l.in * static_cast<int64_t>(elem));
  if (bias) part.bias_data = copy_of(l.bias + j0, cols);
  if (l.int8) {
    int8_epilogue_of(l, j0, cols, part);
    part.rows = n;
    part.stride = l.out;
  }
  part.scratchpad = pd.scratchpad_desc();
  return part;
}

// Output features [j0, j1) of an f32 Linear at batch 1 (Part::gemv); `w` its (out, in) weight
// with the columns in the value's order.
Part gemv_part(const Layer& l, const std::vector<float>& w, int64_t j0, int64_t j1) {
  Part part;
  part.gemv = true;
  part.src = memory::desc({1, l.in}, DT::f32, Tag::ab);
  part.dst = memory::desc({1, j1 - j0}, DT::f32, Tag::ab);
  part.dst_at = j0;
  part.channels = j1 - j0;
  part.weight.data = copy_of(w.data() + j0 * l.in, (j1 - j0) * l.in);
  if (l.bias != nullptr) part.bias_data = copy_of(l.bias + j0, j1 - j0);
  return part;
}

// The multiply-adds of a band at batch 1 (Note [cpu inference plan]): a convolution or pooling of
// kMinBandMacs or more is cut into at least two bands of output rows, and into bands of about
// kBandMacs; a Linear, read from memory rather than computed, into bands of about kLinearBandMacs,
// an even number of them where more than one (three bands on two threads left one thread a third
// of the weight to read while the other read two: the cnn's 3136 x 128 layer at batch 1).
constexpr int64_t kMinBandMacs = int64_t{1} << 16;
constexpr int64_t kBandMacs = int64_t{1} << 21;
constexpr int64_t kLinearBandMacs = int64_t{1} << 17;

// The bands of a convolution or pooling at batch 1: its multiply-adds (a pooling's window taps)
// over kBandMacs, at least 2 where they reach kMinBandMacs, at most a band a row.
int64_t band_count(const Layer& l) {
  const kern::Conv2dGeom& g = l.g;
  const int64_t macs = l.op == Op::MaxPool
                           ? g.c_out * g.h_out * g.w_out * g.kh * g.kw
                           : g.c_out * (g.c_in / g.groups) * g.kh * g.kw * g.h_out * g.w_out;
  const int64_t least = macs >= kMinBandMacs ? std::min<int64_t>(2, g.h_out) : 1;
  return std::clamp<int64_t>(macs / kBandMacs, least, g.h_out);
}

// Whether output rows [o0, o1) of g read at least one row of its input.
bool reads_a_row(const kern::Conv2dGeom& g, int64_t o0, int64_t o1) {
  const int64_t i0 = o0 * g.stride_h - g.pad_h;
  const int64_t i1 = (o1 - 1) * g.stride_h - g.pad_h + (g.kh - 1) * g.dil_h + 1;
  return std::min(i1, g.h) - std::max<int64_t>(i0, 0) >= 1;
}

// Output rows [o0, o1) of a convolution or pooling on n images, reading its input rows [i0, i1)
// clipped to the image: the rows cut off are the band's padding.
Part band_part(const Layer& l, int64_t n, int64_t o0, int64_t o1) {
  const kern::Conv2dGeom& g = l.g;
  kern::Conv2dGeom band = g;
  int64_t first_row = 0;
  if (o0 > 0 || o1 < g.h_out) {
    const int64_t i0 = o0 * g.stride_h - g.pad_h;
    const int64_t i1 = (o1 - 1) * g.stride_h - g.pad_h + (g.kh - 1) * g.dil_h + 1;
    first_row = std::max<int64_t>(i0, 0);
    band.pad_h = first_row - i0;
    band.h = std::min(i1, g.h) - first_row;
    band.h_out = o1 - o0;
  }
  Part part = conv_part(l, band, n);
  part.src_at = first_row * g.w * g.c_in;
  part.dst_at = o0 * g.w_out * g.c_out;
  return part;
}

}  // namespace

Step layer_step(const Layer& l, int64_t n, const Shape3& in, bool bands) {
  Step step;
  if (l.op == Op::GlobalAvgPool) return step;
  if (l.op == Op::Linear) {
    // The stored (out, in) weight, its columns in the value's NHWC order.
    std::vector<float> w;
    std::vector<int8_t> wq;
    if (l.int8) {
      wq = hwc_columns(l, l.weight_q, in);
    } else {
      w = hwc_columns(l, l.weight, in);
    }
    const void* weight = l.int8 ? static_cast<const void*>(wq.data()) : w.data();
    int64_t cols = l.out;
    if (bands) {
      // An even count, so that two threads (or four) take equal shares.
      int64_t want = std::max<int64_t>(1, l.in * l.out / kLinearBandMacs);
      want += want > 1 ? want % 2 : 0;
      cols = std::max<int64_t>(16, ((l.out + want - 1) / want + 15) / 16 * 16);
    }
    for (int64_t j0 = 0; j0 < l.out; j0 += cols) {
      const int64_t j1 = std::min(l.out, j0 + cols);
      // OpenBLAS's matrix-vector product where several threads may call it at once.
      step.parts.push_back(bands && !l.int8 && openblas_get_parallel() != 0
                               ? gemv_part(l, w, j0, j1)
                               : linear_part(l, weight, n, j0, j1));
    }
    return step;
  }
  const kern::Conv2dGeom& g = l.g;
  const int64_t count = bands ? band_count(l) : 1;
  int64_t rows = (g.h_out + count - 1) / count;
  // A band must read at least one input row (a band wholly in the padding has none): else the
  // layer stays whole.
  for (int64_t o0 = 0; o0 < g.h_out && rows < g.h_out; o0 += rows) {
    if (!reads_a_row(g, o0, std::min(g.h_out, o0 + rows))) rows = g.h_out;
  }
  for (int64_t o0 = 0; o0 < g.h_out; o0 += rows) {
    step.parts.push_back(band_part(l, n, o0, std::min(g.h_out, o0 + rows)));
  }
  return step;
}

bool fuse_pooling(const Layer& conv, const Layer& pool, Step& conv_step, Step& pool_step) {
  const kern::Conv2dGeom &cg = conv.g, &pg = pool.g;
  // At least two bands (a pooling of one row would leave the convolution on one thread).
  const int64_t count = std::min(static_cast<int64_t>(conv_step.parts.size()), pg.h_out);
  if (count < 2 || pg.stride_h != (pg.kh - 1) * pg.dil_h + 1) return false;
  const int64_t rows = (pg.h_out + count - 1) / count;
  Step fused;
  fused.group = 2;
  for (int64_t p0 = 0; p0 < pg.h_out; p0 += rows) {
    // The pooling's output rows [p0, p1) read the convolution's output rows [r0, r1).
    const int64_t p1 = std::min(pg.h_out, p0 + rows);
    const int64_t r0 = std::max<int64_t>(0, p0 * pg.stride_h - pg.pad_h);
    const int64_t r1 =
        std::min(cg.h_out, (p1 - 1) * pg.stride_h - pg.pad_h + (pg.kh - 1) * pg.dil_h + 1);
    if (r1 <= r0 || !reads_a_row(cg, r0, r1) || !reads_a_row(pg, p0, p1)) return false;
    try {  // a band oneDNN refuses leaves the layers unfused
      fused.parts.push_back(band_part(conv, 1, r0, r1));
    } catch (const dnnl::error&) {
      return false;
    }
    Part pooled = band_part(pool, 1, p0, p1);
    pooled.next = true;
    fused.parts.push_back(std::move(pooled));
  }
  conv_step = std::move(fused);
  pool_step = Step{};
  pool_step.skip = true;
  return true;
}

}  // namespace sinter::cpu::plan

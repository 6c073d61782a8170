// Note [cpu inference plan]
// A fused model's forward on the CPU without grad mode (nn::fuse_for_inference and quant::prepare
// set Sequential::inference_plans; src/nn/infer_plan.cpp describes the model as a plan::Program)
// runs as one plan per input shape instead of op by op, as ONNX Runtime runs a session:
//  - The images' values stay channels-last (NHWC) from the first layer to the last, the layout
//    oneDNN's brgemm convolutions read and write: op by op, every convolution reorders its input
//    from NCHW and its output back (a fifth of resnet20's time at batch 256).
//  - Each layer is one oneDNN primitive made once (convolution, max pooling, matmul), its weights
//    reordered into the primitive's layout at compile time. A residual block's sum and ReLU are
//    the second convolution's post-ops, written in place over the shortcut's buffer; max pooling
//    reads the convolution's output while it is in the cache.
//  - The batch is cut into chunks of images (about kChunkBytes of the largest value each, and at
//    least 4 chunks where there are 4 images, from the shapes alone), and each thread runs whole
//    chunks through every layer: the values of a chunk stay in its core's cache, and no layer
//    waits for the other threads. At batch 1 the threads share each layer instead, cut into bands
//    of output rows (a convolution or pooling, each band with its own padding) or of output
//    features (a Linear). The buffers are planned once (a value's buffer is reused once its last
//    reader has run) and kept by each thread between calls, with its primitives' memory objects.
//  - An int8 layer (quant's QuantizedConv2d and QuantizedLinear) quantizes its band of the input
//    as the layer does (kern::quantize_int8), sums in oneDNN's int8 kernels into int32, exact as
//    the layer's own, and writes the layer's f32 epilogue (kern::int8_epilogue) itself, then the
//    int8 block's residual sum and relu as the add and relu ops round them: an int8 model's plan
//    gives the bits of its layers. oneDNN's int8 kernels are exact on CPUs with VNNI (AVX-512
//    VNNI, AVX-VNNI, AMX); without it (pair sums that saturate at 16 bits) no int8 plan is made.
// Every layer's result for an image depends only on that image and the chunk size or bands, which
// depend only on the shapes: the same bits at every thread count. An f32 plan's are not the bits of
// the op-by-op forward (other kernels sum in another order): the two agree to f32 rounding (1e-5
// relative on the reference models, tests/test_infer_plan.cpp). An f32 plan's max pooling and
// ReLU epilogues are oneDNN's, whose NaN handling is its own: a NaN may come out as 0 where
// PyTorch's max_pool2d and relu keep it (the batch-1 Linear bands apply the relu op's rule).
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu/infer_plan.h"
#include "cpu/onednn_common.h"
#include "cpu/vec_rows.h"
#include "internal/parallel.h"
#include "sinter/core/error.h"
#include "sinter/core/parallel.h"
#include "sinter/core/storage.h"

namespace sinter::cpu::plan {

using dnnl::memory;
using Tag = memory::format_tag;
using DT = memory::data_type;

namespace {

// The bytes of the largest value a chunk holds (Note [cpu inference plan]): a few chunks' values
// fit a core's L2 cache.
constexpr int64_t kChunkBytes = int64_t{1} << 19;
constexpr size_t kAlign = 64;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

memory::desc nhwc(int64_t n, const Shape3& s) {
  return memory::desc({n, s.c, s.h, s.w}, DT::f32, Tag::nhwc);
}

// The right padding that makes oneDNN's output size the geometry's (PyTorch's floor).
memory::dims right_pad(const kern::Conv2dGeom& g) {
  return {(g.h_out - 1) * g.stride_h + (g.kh - 1) * g.dil_h + 1 - g.h - g.pad_h,
          (g.w_out - 1) * g.stride_w + (g.kw - 1) * g.dil_w + 1 - g.w - g.pad_w};
}

// A weight reordered once into the layout its primitive asks for.
struct Packed {
  Storage data;
  memory::desc md;
};

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

// One primitive of a layer: the whole of it for a chunk of images, or at batch 1 one band of its
// output rows (a convolution, a pooling) or of its output features (a Linear), whose threads run
// the bands of a layer at once (Note [cpu inference plan]).
struct Part {
  dnnl::primitive prim;
  Packed weight;
  Storage bias_data;  // the bias (of the band's features), copied
  memory::desc src, dst, bias, scratchpad;
  int64_t src_at = 0, dst_at = 0;  // the band's first element in the input and output values
  // An int8 part (Layer::int8) runs on the thread's buffers: src (s8) the band's input quantized,
  // dst (s32) its sums; the f32 epilogue then writes `rows` rows of `channels` outputs, `stride`
  // apart in the output value, with scale[j] = input_scale weight_scale[j] and shift[j] the bias.
  std::vector<float> scale, shift;
  int64_t rows = 0, channels = 0, stride = 0;
  // An f32 Linear's band at batch 1: a matrix-vector product on OpenBLAS (cblas_sgemv reads the
  // band's weight rows, kept plain in `weight.data`, in place: faster than oneDNN's one-row
  // matmul), then the bias and relu (as the relu op applies it) in the plan's own loop.
  bool gemv = false;
  bool hold_signals = false;  // Note [onednn signals] (src/cpu/onednn_common.h)
};

// A layer's parts for one chunk size (none for the global average pooling, its own loop).
struct Step {
  std::vector<Part> parts;
};

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
  if (l.op == Op::MaxPool) {
    const dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::pooling_max, part.src, part.dst, strides,
                                        {g.kh, g.kw}, pad_l, right_pad(g));
    const dnnl::pooling_forward::primitive_desc pd(d, attributes(false, false), onednn::engine());
    onednn::refuse_reference(pd);
    part.prim = dnnl::pooling_forward(pd);
    part.hold_signals = onednn::holds_signals(pd);
    part.scratchpad = pd.scratchpad_desc();
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

// The layer's parts for chunks of n images: one, or at batch 1 (`bands`) its bands.
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
  int64_t rows = g.h_out;
  if (bands) {
    const int64_t macs = l.op == Op::MaxPool
                             ? g.c_out * g.h_out * g.w_out * g.kh * g.kw
                             : g.c_out * (g.c_in / g.groups) * g.kh * g.kw * g.h_out * g.w_out;
    const int64_t least = macs >= kMinBandMacs ? std::min<int64_t>(2, g.h_out) : 1;
    const int64_t want = std::clamp<int64_t>(macs / kBandMacs, least, g.h_out);
    rows = (g.h_out + want - 1) / want;
  }
  // A band must read at least one input row (a band wholly in the padding has none): else the
  // layer stays whole.
  for (int64_t o0 = 0; o0 < g.h_out && rows < g.h_out; o0 += rows) {
    const int64_t o1 = std::min(g.h_out, o0 + rows);
    const int64_t i0 = o0 * g.stride_h - g.pad_h;
    const int64_t i1 = (o1 - 1) * g.stride_h - g.pad_h + (g.kh - 1) * g.dil_h + 1;
    if (std::min(i1, g.h) - std::max<int64_t>(i0, 0) < 1) rows = g.h_out;
  }
  for (int64_t o0 = 0; o0 < g.h_out; o0 += rows) {
    // Output rows [o0, o1) read input rows [i0, i1), clipped to the image: the rows cut off are
    // the band's padding.
    const int64_t o1 = std::min(g.h_out, o0 + rows);
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
    step.parts.push_back(std::move(part));
  }
  return step;
}

}  // namespace

class Compiled {
 public:
  Program program;
  std::vector<Shape3> shapes;
  int64_t batch = 0, per = 0, chunks = 0, last = 0;
  std::vector<Step> steps[2];  // for chunks of `per` images, and the last chunk
  bool bands = false;          // batch 1: the threads share each layer's bands
  uint64_t id = 0;             // unique in the process (the threads' memory objects are by plan)
  // A value's buffer among a thread's `slots` (-1: none, the input read in place or the output
  // written into y).
  std::vector<int> slot;
  int slots = 0;
  size_t slot_bytes = 0, scratch_bytes = 0;
  size_t q_bytes = 0, acc_bytes = 0;  // an int8 part's quantized input and int32 sums, at most
  bool input_in_place = false, output_in_place = false;
  // NCHW input to NHWC and NHWC output to NCHW, by chunk size, where the layouts differ.
  dnnl::reorder to_nhwc[2], to_nchw[2];
};

namespace {

// Assigns each value a buffer, reusing one whose value's last reader has run; a convolution with a
// residual writes over the residual's buffer where it is that value's last reader.
void plan_buffers(Compiled& c) {
  const Program& p = c.program;
  const int values = static_cast<int>(c.shapes.size());
  std::vector<int> last_use(values, -1);
  for (size_t i = 0; i < p.layers.size(); ++i) {
    last_use[p.layers[i].input] = static_cast<int>(i);
    if (p.layers[i].residual >= 0) last_use[p.layers[i].residual] = static_cast<int>(i);
  }
  last_use[values - 1] = static_cast<int>(p.layers.size());  // the output, read at the end
  c.slot.assign(values, -1);
  std::vector<int> owner;  // the value each buffer holds
  // A buffer whose value no reader at or after `layer` needs.
  auto take = [&](int v, int layer) {
    size_t s = 0;
    while (s < owner.size() && owner[s] >= 0 && last_use[owner[s]] >= layer) ++s;
    if (s == owner.size()) owner.push_back(-1);
    owner[s] = v;
    return static_cast<int>(s);
  };
  if (!c.input_in_place) c.slot[0] = take(0, 0);
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const Layer& l = p.layers[i];
    const int v = static_cast<int>(i) + 1, layer = static_cast<int>(i);
    if (v == values - 1 && c.output_in_place) continue;
    if (l.residual >= 0 && l.residual != l.input && c.slot[l.residual] >= 0 &&
        last_use[l.residual] == layer) {
      c.slot[v] = c.slot[l.residual];
      owner[c.slot[v]] = v;
    } else {
      c.slot[v] = take(v, layer);
    }
  }
  c.slots = static_cast<int>(owner.size());
  size_t most = 0;
  for (const Shape3& s : c.shapes) most = std::max(most, static_cast<size_t>(numel(s)));
  c.slot_bytes = aligned(static_cast<size_t>(c.per) * most * sizeof(float));
}

}  // namespace

std::shared_ptr<const Compiled> compile(const Program& p, int64_t batch) {
  SINTER_CHECK(batch > 0 && !p.layers.empty(), "inference plan: batch ", batch, " of ",
               p.layers.size(), " layers");
  static std::atomic<uint64_t> next_id{1};
  auto c = std::make_shared<Compiled>();
  c->id = next_id.fetch_add(1);
  c->program = p;
  c->shapes = value_shapes(p);
  c->batch = batch;
  size_t most = 0;
  for (const Shape3& s : c->shapes) most = std::max(most, static_cast<size_t>(numel(s)));
  // Equal chunks where the batch allows (onednn::even_chunk), and at least 4 where there are 4
  // images, so that the threads share them.
  const int64_t want = kChunkBytes / static_cast<int64_t>(most * sizeof(float));
  c->per = onednn::even_chunk(batch, batch >= 4 ? std::min(want, batch / 4) : 1);
  c->chunks = (batch + c->per - 1) / c->per;
  c->bands = batch == 1;
  c->last = batch - (c->chunks - 1) * c->per;
  // NCHW and NHWC are the same bytes where there is one channel or one pixel.
  const Shape3 in = c->shapes.front(), out = c->shapes.back();
  c->input_in_place = in.c == 1 || in.h * in.w == 1;
  c->output_in_place = out.c == 1 || out.h * out.w == 1;
  if (!onednn::OpenMP::runtime().usable) return nullptr;
  // oneDNN's int8 kernels without VNNI (vpmaddubsw) saturate 16-bit pair sums: the int8 layers'
  // sums would not be exact, so they need a CPU with the VNNI dot products.
  const auto isa = dnnl::get_effective_cpu_isa();
  const bool vnni = isa == dnnl::cpu_isa::avx512_core_vnni ||
                    isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  for (const Layer& l : p.layers) {
    if (l.int8 && !vnni) return nullptr;
  }
  const onednn::OneOpenMPThread one;
  try {
    for (int k = 0; k < (c->last != c->per ? 2 : 1); ++k) {  // the last chunk's, where shorter
      const int64_t n = k == 0 ? c->per : c->last;
      const auto nchw = [&](const Shape3& s) {
        return memory::desc({n, s.c, s.h, s.w}, DT::f32, Tag::nchw);
      };
      const dnnl::engine& e = onednn::engine();
      if (!c->input_in_place) {
        c->to_nhwc[k] = dnnl::reorder(dnnl::reorder::primitive_desc(e, nchw(in), e, nhwc(n, in)));
      }
      if (!c->output_in_place) {
        c->to_nchw[k] = dnnl::reorder(dnnl::reorder::primitive_desc(e, nhwc(n, out), e, nchw(out)));
      }
      for (const Layer& l : p.layers) {
        c->steps[k].push_back(layer_step(l, n, c->shapes[l.input], c->bands));
        for (const Part& part : c->steps[k].back().parts) {
          c->scratch_bytes = std::max(c->scratch_bytes, part.scratchpad.get_size());
          if (l.int8) {
            c->q_bytes = std::max(c->q_bytes, aligned(part.src.get_size()));
            c->acc_bytes = std::max(c->acc_bytes, aligned(part.dst.get_size()));
          }
        }
      }
    }
  } catch (const dnnl::error&) {
    return nullptr;
  }
  c->scratch_bytes = aligned(c->scratch_bytes);
  plan_buffers(*c);
  return c;
}

namespace {

// out (n, c) = the mean over each image's h w pixels of in (n, h, w, c), summed in double in pixel
// order as the library's average pooling sums a plane.
void global_avg_pool(const float* in, int64_t n, const Shape3& s, float* out) {
  const int64_t hw = s.h * s.w;
  std::vector<double> sum(static_cast<size_t>(s.c));
  for (int64_t b = 0; b < n; ++b) {
    std::fill(sum.begin(), sum.end(), 0.0);
    const float* img = in + b * hw * s.c;
    for (int64_t p = 0; p < hw; ++p) {
      for (int64_t ch = 0; ch < s.c; ++ch) sum[ch] += img[p * s.c + ch];
    }
    for (int64_t ch = 0; ch < s.c; ++ch) {
      out[b * s.c + ch] = static_cast<float>(sum[ch] / static_cast<double>(hw));
    }
  }
}

// A part's memory objects on one thread, made at its first run: later runs only point them at
// the call's buffers (making them, and the argument map, costs allocations, a tenth of a batch-1
// forward).
struct PartMemories {
  dnnl::memory src, dst, scratch;
  std::vector<dnnl_exec_arg_t> args;
};

// What a thread keeps between calls: its oneDNN stream, its chunks' values, its scratchpad, and
// the memory objects of the plan it ran last, by chunk size, layer and part.
struct ThreadBuffers {
  std::unique_ptr<dnnl::stream> stream;
  Storage values, scratch, q, acc;
  uint64_t plan = 0;
  std::vector<std::vector<PartMemories>> memories[2];
  std::vector<dnnl::memory> fixed;  // the weights and biases the args point at
};

ThreadBuffers& mine() {
  thread_local ThreadBuffers t;
  if (!t.stream) t.stream = std::make_unique<dnnl::stream>(onednn::engine());
  return t;
}

char* at_least(Storage& s, size_t bytes) {
  if (s.nbytes() < bytes) {
    s = Storage();
    s = Storage::allocate(bytes, Device::cpu());
  }
  return static_cast<char*>(s.data());
}

// This thread's memory objects of part `i` of layer `layer` at chunk size k.
PartMemories& memories(const Compiled& c, int k, size_t layer, size_t i, ThreadBuffers& t) {
  if (t.plan != c.id) {
    t.plan = c.id;
    for (auto& m : t.memories) m.assign(c.steps[0].size(), {});
    t.fixed.clear();
  }
  std::vector<PartMemories>& parts = t.memories[k][layer];
  const Step& step = c.steps[k][layer];
  if (parts.empty()) {
    const dnnl::engine& e = onednn::engine();
    const Layer& l = c.program.layers[layer];
    for (const Part& part : step.parts) {
      PartMemories m{memory(part.src, e, nullptr),
                     memory(part.dst, e, nullptr),
                     memory(part.scratchpad, e, nullptr),
                     {}};
      m.args = {{DNNL_ARG_SRC, m.src.get()},
                {DNNL_ARG_DST, m.dst.get()},
                {DNNL_ARG_SCRATCHPAD, m.scratch.get()}};
      if (l.op != Op::MaxPool) {
        t.fixed.emplace_back(part.weight.md, e, part.weight.data.data());
        m.args.push_back({DNNL_ARG_WEIGHTS, t.fixed.back().get()});
        if (l.bias != nullptr && !l.int8) {  // an int8 layer's bias is in its epilogue
          t.fixed.emplace_back(part.bias, e, part.bias_data.data());
          m.args.push_back({DNNL_ARG_BIAS, t.fixed.back().get()});
        }
      }
      parts.push_back(std::move(m));
    }
  }
  return parts[i];
}

// out[r stride + j] = the int8 epilogue of acc[r channels + j] for the part's rows and channels:
// act(c scale[j] + shift[j]) as kern::int8_epilogue rounds it, then with a residual
// relu(y + res[r stride + j]) as the add and relu ops round it (the int8 BasicBlock's sum).
void int8_epilogue_rows(const Layer& l, const Part& part, const int32_t* acc, const float* res,
                        float* out) {
  for (int64_t r = 0; r < part.rows; ++r) {
    vec::int8_epilogue_row(acc + r * part.channels, part.channels, part.scale.data(),
                           part.shift.data(), l.relu,
                           res != nullptr ? res + r * part.stride : nullptr, out + r * part.stride);
  }
}

// y = relu(W x + b) of a Part::gemv band, y its `channels` outputs.
void run_gemv(const Layer& l, const Part& part, const float* x, float* y) {
  const auto* w = static_cast<const float*>(part.weight.data.data());
  // beta 0 must not read y (it holds an earlier value, maybe NaN; some OpenBLAS versions scale it).
  std::fill(y, y + part.channels, 0.0F);
  cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(part.channels), static_cast<int>(l.in),
              1.0F, w, static_cast<int>(l.in), x, 1, 0.0F, y, 1);
  const auto* b = static_cast<const float*>(part.bias_data.data());
  for (int64_t j = 0; j < part.channels; ++j) {
    float v = l.bias != nullptr ? y[j] + b[j] : y[j];
    if (l.relu) v = (v > 0.0F || v != v) ? v : 0.0F;
    y[j] = v;
  }
}

// Parts [p0, p1) of layer `layer`, from the value at `in` into the value at `out` (and an int8
// convolution's residual at `res`), on this thread.
void run_parts(const Compiled& c, int k, size_t layer, size_t p0, size_t p1, float* in, float* out,
               const float* res) {
  const onednn::OneOpenMPThread one;
  ThreadBuffers& t = mine();
  char* scratch = at_least(t.scratch, c.scratch_bytes);
  const Layer& l = c.program.layers[layer];
  const Step& step = c.steps[k][layer];
  for (size_t i = p0; i < p1; ++i) {
    const Part& part = step.parts[i];
    if (part.gemv) {
      run_gemv(l, part, in, out + part.dst_at);
      continue;
    }
    PartMemories& m = memories(c, k, layer, i, t);
    if (l.int8) {
      // The band's input quantized as the int8 layers quantize it, into this thread's buffer.
      auto* q = reinterpret_cast<int8_t*>(at_least(t.q, c.q_bytes));
      const float* x = in + part.src_at;
      const int64_t count = static_cast<int64_t>(part.src.get_size());
      vec::quantize_int8_row(x, count, l.input_scale, q);
      m.src.set_data_handle(q);
      m.dst.set_data_handle(at_least(t.acc, c.acc_bytes));
    } else {
      m.src.set_data_handle(in + part.src_at);
      m.dst.set_data_handle(out + part.dst_at);
    }
    m.scratch.set_data_handle(scratch);
    dnnl_status_t status = dnnl_success;
    {
      const onednn::SignalsHeld held(part.hold_signals);
      status = dnnl_primitive_execute(part.prim.get(), t.stream->get(),
                                      static_cast<int>(m.args.size()), m.args.data());
    }
    SINTER_CHECK(status == dnnl_success, "inference plan: layer ", layer,
                 "'s oneDNN primitive failed with status ", static_cast<int>(status));
    if (l.int8) {
      t.stream->wait();
      int8_epilogue_rows(l, part, reinterpret_cast<const int32_t*>(t.acc.data()),
                         res != nullptr ? res + part.dst_at : nullptr, out + part.dst_at);
    }
  }
  t.stream->wait();
}

// One chunk through every layer, its values in `arena`: on this thread, or with c.bands each
// layer's bands shared among the threads.
void run_chunk(const Compiled& c, int64_t chunk, const float* x, float* y, char* arena) {
  const onednn::OneOpenMPThread one;
  const Program& p = c.program;
  const int64_t n = chunk == c.chunks - 1 ? c.last : c.per;
  const int k = n == c.per ? 0 : 1;
  const std::vector<Step>& steps = c.steps[k];
  const int values = static_cast<int>(c.shapes.size());
  std::vector<float*> at(values, nullptr);
  auto buffer = [&](int v) { return reinterpret_cast<float*>(arena + c.slot[v] * c.slot_bytes); };
  float* x_chunk = const_cast<float*>(x) + chunk * c.per * numel(c.shapes[0]);
  float* y_chunk = y + chunk * c.per * numel(c.shapes.back());
  at[0] = x_chunk;
  at[values - 1] = y_chunk;
  const dnnl::engine& e = onednn::engine();
  const auto nchw = [&](const Shape3& s, float* data) {
    return memory(memory::desc({n, s.c, s.h, s.w}, DT::f32, Tag::nchw), e, data);
  };
  if (!c.input_in_place) {
    at[0] = buffer(0);
    memory from = nchw(c.shapes[0], x_chunk), to(nhwc(n, c.shapes[0]), e, at[0]);
    c.to_nhwc[k].execute(*mine().stream, from, to);
    mine().stream->wait();
  }
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const Layer& l = p.layers[i];
    const Step& step = steps[i];
    const int v = static_cast<int>(i) + 1;
    if (c.slot[v] >= 0) at[v] = buffer(v);
    if (l.op == Op::GlobalAvgPool) {
      global_avg_pool(at[l.input], n, c.shapes[l.input], at[v]);
      continue;
    }
    // A residual: the f32 convolution's sum post-op adds what its output holds; the int8 one's
    // epilogue reads it.
    const float* res = l.residual >= 0 && l.int8 ? at[l.residual] : nullptr;
    if (l.residual >= 0 && !l.int8 && at[v] != at[l.residual]) {
      std::memcpy(at[v], at[l.residual],
                  static_cast<size_t>(n * numel(c.shapes[v])) * sizeof(float));
    }
    if (c.bands && step.parts.size() > 1) {
      detail::parallel_for(static_cast<int64_t>(step.parts.size()), 1, [&](int64_t a, int64_t b) {
        run_parts(c, k, i, static_cast<size_t>(a), static_cast<size_t>(b), at[l.input], at[v], res);
      });
    } else {
      run_parts(c, k, i, 0, step.parts.size(), at[l.input], at[v], res);
    }
  }
  if (!c.output_in_place) {
    memory from(nhwc(n, c.shapes.back()), e, at[values - 1]), to = nchw(c.shapes.back(), y_chunk);
    c.to_nchw[k].execute(*mine().stream, from, to);
    mine().stream->wait();
  }
}

void run_unchecked(const Compiled& c, const float* x, float* y) {
  const size_t bytes = c.slots * c.slot_bytes;
  if (c.bands) {  // one image, its layers' bands on every thread
    run_chunk(c, 0, x, y, at_least(mine().values, bytes));
    return;
  }
  detail::parallel_for(c.chunks, 1, [&](int64_t c0, int64_t c1) {
    char* arena = at_least(mine().values, bytes);
    for (int64_t k = c0; k < c1; ++k) run_chunk(c, k, x, y, arena);
  });
}

}  // namespace

void run(const Compiled& c, const float* x, float* y) {
  try {
    run_unchecked(c, x, y);
  } catch (const dnnl::error& e) {
    SINTER_THROW("inference plan: oneDNN: ", e.what(), " (status ", static_cast<int>(e.status),
                 ")");
  }
}

}  // namespace sinter::cpu::plan

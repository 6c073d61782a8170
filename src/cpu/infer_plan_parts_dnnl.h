// The parts of the CPU inference plans (Note [cpu inference plan] in src/cpu/infer_plan_dnnl.cpp):
// each layer's oneDNN primitives or own loops, for a chunk of images or a band of one image, made
// when a plan is compiled (src/cpu/infer_plan_parts_dnnl.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/infer_plan.h"
#include "cpu/onednn_common.h"
#include "sinter/core/storage.h"

namespace sinter::cpu::plan {

using dnnl::memory;
using Tag = memory::format_tag;
using DT = memory::data_type;

constexpr size_t kAlign = 64;

inline size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

inline memory::desc nhwc(int64_t n, const Shape3& s) {
  return memory::desc({n, s.c, s.h, s.w}, DT::f32, Tag::nhwc);
}

// A weight reordered once into the layout its primitive asks for.
struct Packed {
  Storage data;
  memory::desc md;
};

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
  // A max pooling: vec::max_pool_nhwc over the geom.n images of `geom` (the band's geometry), on
  // the plain buffers (oneDNN's pooling took 7 us of the cnn's 70 at batch 1 on the Intel
  // machine, and could turn a NaN into 0).
  bool pool = false;
  // An f32 convolution of few taps: small_conv::run over the geom.n images of `geom` (the band's
  // geometry), its packed weight in weight.data, its bias in bias_data, `own_scratch` bytes of
  // the thread's scratch.
  bool small = false;
  size_t own_scratch = 0;
  kern::Conv2dGeom geom;
  // A pooling band of a Step with group 2: it reads the layer's output and writes the next
  // layer's.
  bool next = false;
  bool hold_signals = false;  // Note [onednn signals] (src/cpu/onednn_common.h)
};

// A layer's parts for one chunk size (none for the global average pooling, its own loop). A step
// of `group` 2 holds a convolution with its max pooling at batch 1 (fuse_pooling): its parts
// alternate a band of the convolution and the band of the pooling that reads only those rows,
// one thread running both; the pooling's own step is then `skip`.
struct Step {
  std::vector<Part> parts;
  int group = 1;
  bool skip = false;
};

// The layer's parts for chunks of n images: one, or at batch 1 (`bands`) its bands. `in` is the
// shape of the value it reads.
Step layer_step(const Layer& l, int64_t n, const Shape3& in, bool bands);

// At batch 1, the steps of a convolution `conv` and the max pooling `pool` that follows it and
// alone reads its output, as one step of group 2 and a skipped one (Step), where the pooling's
// windows do not share rows and the convolution would run in bands; else false, the steps left
// as they are.
bool fuse_pooling(const Layer& conv, const Layer& pool, Step& conv_step, Step& pool_step);

}  // namespace sinter::cpu::plan

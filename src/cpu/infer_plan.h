// The CPU inference plans of fused models (Note [cpu inference plan] in
// src/cpu/infer_plan_dnnl.cpp): a model described as a list of layers over per-image values,
// compiled once per batch size into oneDNN primitives, and run on raw f32 buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kern/conv.h"

namespace sinter::cpu::plan {

enum class Op {
  Conv,           // conv, weight (c_out, c_in / groups, kh, kw), bias (c_out) or null
  MaxPool,        // pool: kh x kw windows, stride and padding (dilation 1, floor mode)
  GlobalAvgPool,  // the mean of each channel's plane: (c, h, w) -> (c, 1, 1)
  Linear,         // weight (out, in), bias (out) or null, over the value flattened
};

// One layer. Values: 0 is the model's input, i + 1 layer i's output. An image's value is (c, h, w);
// a Linear's is (out, 1, 1).
struct Layer {
  Op op = Op::Conv;
  int input = 0;
  // Conv only: a value of the output's shape added after the bias, before the activation (a
  // residual block's shortcut), or -1.
  int residual = -1;
  bool relu = false;  // Conv, Linear: relu(y) in the epilogue
  // Conv: the geometry (n unused, act unused: `relu` says); MaxPool: kh, kw, stride_*, pad_* and
  // c_in = c_out, h, w, h_out, w_out.
  kern::Conv2dGeom g;
  const float* weight = nullptr;
  const float* bias = nullptr;
  int64_t in = 0, out = 0;  // Linear
  // An int8 Conv or Linear (Note [int8 quantization]): the input quantized with input_scale, the
  // int8 weight weight_q in the f32 weight's layout (`weight` unused), and the epilogue
  // act(c input_scale weight_scale[ch] + bias[ch]) in f32 (kern::int8_epilogue); a residual is
  // added after it and relu applied to the sum as the relu op does.
  bool int8 = false;
  float input_scale = 0.0F;
  const int8_t* weight_q = nullptr;
  const float* weight_scale = nullptr;  // per output channel
};

struct Program {
  int64_t c = 0, h = 0, w = 0;  // one image of the input, NCHW
  std::vector<Layer> layers;
};

// The output of one image: the last layer's value (c, h, w), written as NCHW (a Linear's as its
// `out` features).
struct Shape3 {
  int64_t c = 0, h = 0, w = 0;
};
Shape3 output_shape(const Program& p);
// The shapes of p's values, index 0 the input; throws sinter::Error where a layer's geometry does
// not fit the value it reads.
std::vector<Shape3> value_shapes(const Program& p);
inline int64_t numel(const Shape3& s) { return s.c * s.h * s.w; }

class Compiled;

// The program's primitives for `batch` images, weights reordered into their layouts once; null
// where oneDNN cannot run some layer (a build without it, an unsupported geometry). Throws
// sinter::Error on a program whose values do not fit together.
std::shared_ptr<const Compiled> compile(const Program& p, int64_t batch);

// y (batch images of output_shape, NCHW) from x (batch images of (c, h, w), NCHW), both
// contiguous f32.
void run(const Compiled& c, const float* x, float* y);

}  // namespace sinter::cpu::plan

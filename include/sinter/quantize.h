// Post-training int8 quantization (Note [int8 quantization]): calibration of the activations'
// ranges over sample batches, per-channel weight scales, int8 layers that run on the CPU and on
// CUDA devices, and their export as an ONNX QDQ model (onnx::export_model).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sinter/nn/modules.h"

namespace sinter::quant {

// Note [int8 quantization]
// quantize(model, batches, batch) makes an int8 copy of a trained model, as TensorRT's and ONNX
// Runtime's post-training quantization do:
//  1. the model is fused (nn::fuse_for_inference: BatchNorm folded, activations in epilogues), and
//     each Linear and Conv2d of the copy becomes a QuantizedLinear or QuantizedConv2d that records
//     the absolute values of its input (a histogram of 2048 bins whose range doubles as larger
//     values come, merging pairs of bins, and the largest value);
//  2. the copy runs on the calibration batches (eval mode, no graph);
//  3. each layer's input scale is set from its record: s_x = amax / 127, amax by the calibrator
//     (MinMax: the largest |x|; Percentile: the |x| below which `percentile` percent of the values
//     lie; Entropy: the range whose 128-level quantization of the histogram is closest to it in
//     Kullback-Leibler divergence, TensorRT's entropy calibration), and its weights are quantized
//     per output channel: s_w[c] = max |W[c]| / 127, q = round(W / s_w) (half to even).
// A quantized layer computes y = act(s_x s_w[c] sum_k q_x q_w + b): the input is quantized with
// q_x = saturate(round(x / s_x)) into [-128, 127] (ONNX's QuantizeLinear with zero point 0), the
// sums are exact int32 (Note [int8 kernels] in src/kern/int8.h), and the bias and activation apply
// in f32. That is what ONNX Runtime computes for the exported QDQ model (QuantizeLinear and
// DequantizeLinear before each layer, the weights as int8 initializers with a DequantizeLinear
// per channel), to f32 rounding. The int8 layers run on f32 inputs on the CPU or a CUDA device
// (wherever the layer is: model.to(device) moves it), without autograd. A quantized Sequential
// runs on the CPU through inference plans as a fused one does (Note [cpu inference plan] in
// src/cpu/infer_plan_dnnl.cpp), with the same bits as its layers one by one.
enum class Calibrator { MinMax, Percentile, Entropy };

struct QuantizeOptions {
  Calibrator calibrator = Calibrator::Percentile;
  double percentile = 99.99;  // Calibrator::Percentile: in (0, 100]
};

const char* calibrator_name(Calibrator c);
// "minmax", "percentile" or "entropy"; anything else is an error listing them.
Calibrator calibrator_from_name(const std::string& name);

// The record of one layer input's absolute values (step 1 of Note [int8 quantization]).
class Histogram {
 public:
  static constexpr int64_t kBins = 2048;
  // Adds every element of x (any device and floating dtype); NaN is an error naming `op`.
  void add(const Tensor& x, const std::string& op);
  int64_t count() const { return count_; }  // values recorded
  int64_t batches() const { return batches_; }
  double max() const { return max_; }
  // The range [0, amax] the calibrator picks (0 when only zeros were seen).
  double amax(const QuantizeOptions& options) const;

 private:
  std::vector<double> bins_ = std::vector<double>(kBins, 0.0);
  double width_ = 0.0;  // of a bin; the bins cover [0, kBins * width_)
  double max_ = 0.0;
  int64_t count_ = 0, batches_ = 0;
};

// The per-layer state both int8 layers share.
struct QuantState {
  bool quantized = false;  // false while calibrating
  Histogram histogram;     // of the input, while calibrating
  float input_scale = 0.0F;
  std::vector<float> weight_scale;  // per output channel
  std::vector<int8_t> weight_q;     // (out, in [/ groups * kh * kw]), row-major
  int64_t k = 0;                    // a weight row's length
  int64_t groups = 1;               // of the convolution; the weight's rows split evenly
  // On the device the layer last ran on: weight_q packed for its int8 kernels (u8 bytes, one block
  // per group, Note [int8 kernels] in src/kern/int8.h) and the epilogue's scales
  // input_scale * weight_scale[c] (f32), made at the first forward there.
  Tensor packed, channel_scale;
};

// A Linear that records its input while calibrating and runs in int8 once converted; parameters
// (the f32 weight and bias) and state_dict keys are the Linear's.
class QuantizedLinear : public nn::Linear {
 public:
  explicit QuantizedLinear(const nn::Linear& layer);
  std::string name() const override { return "QuantizedLinear"; }
  Tensor forward(const Tensor& x) override;
  // Sets the scales and quantizes the weight (step 3); an error if no batch was recorded.
  void convert(const QuantizeOptions& options, const std::string& path);
  QuantState q;
};

// A Conv2d that records its input while calibrating and runs in int8 once converted.
class QuantizedConv2d : public nn::Conv2d {
 public:
  explicit QuantizedConv2d(const nn::Conv2d& layer);
  std::string name() const override { return "QuantizedConv2d"; }
  Tensor forward(const Tensor& x) override;
  void convert(const QuantizeOptions& options, const std::string& path);
  QuantState q;
};

// Step 1: the fused copy of `model` with its Linear and Conv2d layers recording, in eval mode.
// A model without any Linear or Conv2d is an error.
std::shared_ptr<nn::Module> prepare(const nn::Module& model);
// Step 3 on every int8 layer of a prepared model; an error naming the first layer that recorded
// nothing (no calibration batch ran through it).
void convert(nn::Module& prepared, const QuantizeOptions& options = {});
// Steps 1 to 3: batch(i) for i < batches gives the calibration inputs (batches >= 1; 0 is an
// error). Returns the int8 model.
std::shared_ptr<nn::Module> quantize(const nn::Module& model, int64_t batches,
                                     const std::function<Tensor(int64_t)>& batch,
                                     const QuantizeOptions& options = {});

// The instruction set the CPU's int8 GEMM runs on here: "avx512-vnni", "avx2" or "scalar"
// (Note [int8 gemm] in src/cpu/int8.h).
const char* int8_isa();

// The bytes of a quantized model's weights as it holds them for inference: int8 weights, f32
// scales, biases and any other parameters and buffers in their dtype.
int64_t model_bytes(const nn::Module& model);

}  // namespace sinter::quant

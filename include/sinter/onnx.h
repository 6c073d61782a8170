// Exporting a trained module to ONNX, for inference in ONNX Runtime, TensorRT and other runtimes.
// Built on the ONNX library's own protobuf classes, schemas and checker (Debian's libonnx-dev); a
// build without it has these functions, and they throw.
#pragma once

#include <optional>
#include <string>

#include "sinter/core/dtype.h"
#include "sinter/nn/module.h"
#include "sinter/tensor.h"

namespace sinter::onnx {

struct ExportOptions {
  // The only opset written today: 17 (LayerNormalization is an operator from 17 on).
  int64_t opset = 17;
  // Dim 0 of the input and of the output is the symbolic "batch", so the model runs on any
  // batch size; off, the example input's shape is fixed.
  bool dynamic_batch = true;
  // Dim 1 of the input and of the output is the symbolic "sequence" (token models: the GPT runs on
  // any length up to its context).
  bool dynamic_sequence = false;
  // The floating dtype of the weights, the input and the output in the file: f32 by default, or
  // nullopt for the module's own (f64, f16, bf16 or f32). Integer inputs (token ids) stay i64.
  // bf16 suits models without convolution or pooling (opset 17's take no bfloat16: an error).
  std::optional<DType> dtype = DType::f32;
  std::string input_name = "input";
  std::string output_name = "output";
  // The graph's name in the file; empty: the module's name ("Sequential", "GPT").
  std::string graph_name = "";
};

// What an export wrote.
struct ExportSummary {
  int64_t nodes = 0;         // operators in the graph
  int64_t initializers = 0;  // weight tensors (a tied weight counts once)
  int64_t bytes = 0;         // size of the serialized model
};

// Note [onnx export]
// The module tree is walked, not traced: each supported module maps to ONNX operators, and its
// parameters and buffers become initializers under their state_dict names ("0.weight",
// "blocks.1.attn.qkv.bias"), so the file reads like the checkpoint. The example input is run
// through the module in eval mode alongside (restored after), which gives every value its shape
// and checks that the module accepts the input. Supported: Linear, Conv2d (with their epilogue
// activations), BatchNorm2d and BatchNorm1d (eval: the running statistics), LayerNorm, ReLU, GELU
// (both forms), Tanh, Sigmoid, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d (output 1, or sizes that
// divide the input), Flatten, Dropout (the identity), Embedding, Sequential, MultiheadAttention,
// TransformerBlock, and the reference models' BasicBlock and GPT (attention as MatMul, Softmax and
// a causal mask built from the sequence length, so that dynamic_sequence works), and the int8
// layers of quant::quantize as QuantizeLinear/DequantizeLinear pairs (Note [int8 quantization]).
// Any other module is an error naming it and its path. The model is then checked with the ONNX
// checker and strict shape inference, and its inferred output shape must be the one Sinter
// computed.

// Exports `module` applied to inputs like `example_input` (on any device; f32 or the module's
// dtype, i64 for token ids) to the ONNX file `path`, written atomically.
ExportSummary export_model(nn::Module& module, const Tensor& example_input, const std::string& path,
                           const ExportOptions& options = {});

// The same model as serialized bytes, for writing elsewhere.
std::string export_to_string(nn::Module& module, const Tensor& example_input,
                             const ExportOptions& options = {}, ExportSummary* summary = nullptr);

// Whether this build can export (it was built with the ONNX library).
bool is_available();

}  // namespace sinter::onnx

// The ONNX graph under construction, with the ONNX library's protobuf classes: nodes and their
// attributes, initializers and constants, value names and types. Private to src/onnx/.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sinter/nn/module.h"
#include "sinter/onnx.h"
#include "sinter/tensor.h"

namespace sinter::onnx::detail {

namespace pb = ::onnx;

// The ONNX element type of a Sinter dtype.
int32_t elem_type(DType t);

// A value of the graph: its name, and the tensor Sinter computes for it from the example input
// (which gives its shape).
struct Value {
  std::string name;
  Tensor t;
};

// Node attributes.
void attr(pb::NodeProto* n, const char* name, int64_t v);
void attr(pb::NodeProto* n, const char* name, const std::vector<int64_t>& v);
void attr_float(pb::NodeProto* n, const char* name, double v);
void attr_string(pb::NodeProto* n, const char* name, const std::string& v);

class GraphBuilder {
 public:
  // `root`'s parameters and buffers name their initializers (state_dict names); floating tensors
  // are stored in `float_dtype`.
  GraphBuilder(nn::Module& root, const ExportOptions& o, DType float_dtype);

  pb::ModelProto& model() { return model_; }
  pb::GraphProto& graph() { return *graph_; }
  DType float_dtype() const { return float_dtype_; }

  // Adds a node; returns its first output's name. Names are "<scope>/<op>_<n>", unique.
  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::string& scope, pb::NodeProto** out = nullptr);
  // A node with its attributes set by `set`.
  template <class Set>
  std::string node_with(const std::string& op, const std::vector<std::string>& inputs,
                        const std::string& scope, Set&& set) {
    pb::NodeProto* n = nullptr;
    std::string name = node(op, inputs, scope, &n);
    set(n);
    return name;
  }

  // The state_dict name of one of the module's parameters or buffers, or `fallback`.
  std::string name_or(const Tensor& t, const std::string& fallback) const;
  // The initializer of one of the module's parameters or buffers, under its state_dict name
  // (created on first use: a tied weight is stored once). Floating tensors take the export dtype.
  std::string weight(const Tensor& t);
  // An anonymous constant tensor (floating ones in the export dtype).
  std::string constant(const Tensor& t, const std::string& hint);
  // A 0-dim floating constant in the export dtype, made once per value.
  std::string scalar(double v);
  // An i64 constant: 1-D, or 0-dim when `rank0` (a Gather index that drops its axis).
  std::string ints(const std::vector<int64_t>& v, bool rank0 = false);
  // An int8 initializer from its values (Sinter has no int8 tensors: the quantized layers keep
  // theirs in a vector, Note [int8 quantization]).
  std::string int8_initializer(const std::string& name, const Shape& shape,
                               const std::vector<int8_t>& values);

  // The value's graph type: its dtype (floats as exported) and its shape, with the dynamic dims
  // named.
  void set_type(pb::ValueInfoProto* vi, const std::string& name, const Tensor& t) const;
  // The symbolic name of dim i of the input and output, or null where it is fixed.
  const char* dynamic_dim(int64_t i) const;

 private:
  void add_initializer(const std::string& name, const Tensor& t);

  const ExportOptions& o_;
  DType float_dtype_;
  pb::ModelProto model_;
  pb::GraphProto* graph_ = nullptr;
  std::unordered_map<const void*, std::string> names_;    // parameter or buffer -> state_dict name
  std::unordered_map<const void*, std::string> weights_;  // -> its initializer
  std::map<double, std::string> scalars_;
  std::map<std::pair<std::vector<int64_t>, bool>, std::string> ints_;
};

}  // namespace sinter::onnx::detail

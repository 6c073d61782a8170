// The ONNX graph under construction (graph_builder.h): nodes, attributes, initializers and value
// types.
#include "onnx/graph_builder.h"
#include "sinter/autograd.h"
#include "sinter/ops.h"

namespace sinter::onnx::detail {

int32_t elem_type(DType t) {
  switch (t) {
    case DType::f32:
      return pb::TensorProto::FLOAT;
    case DType::f64:
      return pb::TensorProto::DOUBLE;
    case DType::bf16:
      return pb::TensorProto::BFLOAT16;
    case DType::f16:
      return pb::TensorProto::FLOAT16;
    case DType::i64:
      return pb::TensorProto::INT64;
    case DType::i32:
      return pb::TensorProto::INT32;
    case DType::u8:
      return pb::TensorProto::UINT8;
    case DType::b8:
      return pb::TensorProto::BOOL;
    // ONNX's FLOAT8E4M3FN and FLOAT8E5M2 (IR version 9), which the system's older onnx.proto may
    // not name.
    case DType::f8e4m3:
      return 17;
    case DType::f8e5m2:
      return 19;
  }
  SINTER_THROW("onnx::export_model: unknown dtype");
}

void attr(pb::NodeProto* n, const char* name, int64_t v) {
  pb::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::INT);
  a->set_i(v);
}

void attr(pb::NodeProto* n, const char* name, const std::vector<int64_t>& v) {
  pb::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::INTS);
  for (const int64_t x : v) a->add_ints(x);
}

void attr_float(pb::NodeProto* n, const char* name, double v) {
  pb::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(v));
}

void attr_string(pb::NodeProto* n, const char* name, const std::string& v) {
  pb::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::STRING);
  a->set_s(v);
}

GraphBuilder::GraphBuilder(nn::Module& root, const ExportOptions& o, DType float_dtype)
    : o_(o), float_dtype_(float_dtype) {
  for (const auto& [name, p] : root.named_parameters()) names_.emplace(p.impl(), name);
  for (const auto& [name, b] : root.named_buffers()) names_.emplace(b.impl(), name);
  graph_ = model_.mutable_graph();
}

std::string GraphBuilder::node(const std::string& op, const std::vector<std::string>& inputs,
                               const std::string& scope, pb::NodeProto** out) {
  pb::NodeProto* n = graph_->add_node();
  n->set_op_type(op);
  for (const std::string& in : inputs) n->add_input(in);
  const std::string name = (scope.empty() ? std::string("") : scope + "/") + op + "_" +
                           std::to_string(graph_->node_size() - 1);
  n->set_name(name);
  n->add_output(name);
  if (out != nullptr) *out = n;
  return name;
}

std::string GraphBuilder::name_or(const Tensor& t, const std::string& fallback) const {
  const auto named = names_.find(t.impl());
  return named != names_.end() ? named->second : fallback;
}

std::string GraphBuilder::weight(const Tensor& t) {
  const auto done = weights_.find(t.impl());
  if (done != weights_.end()) return done->second;
  const std::string name = name_or(t, "const/tensor_" + std::to_string(weights_.size()));
  add_initializer(name, t);
  weights_.emplace(t.impl(), name);
  return name;
}

std::string GraphBuilder::constant(const Tensor& t, const std::string& hint) {
  const std::string name = "const/" + hint + "_" + std::to_string(graph_->initializer_size());
  add_initializer(name, t);
  return name;
}

std::string GraphBuilder::scalar(double v) {
  const auto it = scalars_.find(v);
  if (it != scalars_.end()) return it->second;
  const std::string name = constant(full({}, v, {.dtype = DType::f64}), "scalar");
  scalars_.emplace(v, name);
  return name;
}

std::string GraphBuilder::ints(const std::vector<int64_t>& v, bool rank0) {
  const auto key = std::make_pair(v, rank0);
  const auto it = ints_.find(key);
  if (it != ints_.end()) return it->second;
  const Tensor t = rank0 ? full({}, static_cast<double>(v.at(0)), {.dtype = DType::i64})
                         : from_vector<int64_t>(v, {static_cast<int64_t>(v.size())});
  const std::string name = constant(t, "ints");
  ints_.emplace(key, name);
  return name;
}

std::string GraphBuilder::int8_initializer(const std::string& name, const Shape& shape,
                                           const std::vector<int8_t>& values) {
  pb::TensorProto* p = graph_->add_initializer();
  p->set_name(name);
  p->set_data_type(pb::TensorProto::INT8);
  for (const int64_t d : shape) p->add_dims(d);
  p->set_raw_data(values.data(), values.size());
  return name;
}

void GraphBuilder::add_initializer(const std::string& name, const Tensor& t) {
  NoGradGuard no_grad;
  Tensor h = t.detach().to(Device::cpu());
  if (is_floating(h.dtype())) h = h.to(float_dtype_);
  h = h.contiguous();
  pb::TensorProto* p = graph_->add_initializer();
  p->set_name(name);
  p->set_data_type(elem_type(h.dtype()));
  for (const int64_t d : h.shape()) p->add_dims(d);
  p->set_raw_data(h.data_ptr(), static_cast<size_t>(h.numel()) * element_size(h.dtype()));
}

void GraphBuilder::set_type(pb::ValueInfoProto* vi, const std::string& name,
                            const Tensor& t) const {
  vi->set_name(name);
  pb::TypeProto_Tensor* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type(is_floating(t.dtype()) ? float_dtype_ : t.dtype()));
  pb::TensorShapeProto* shape = tt->mutable_shape();
  for (int64_t i = 0; i < t.dim(); ++i) {
    pb::TensorShapeProto_Dimension* d = shape->add_dim();
    if (const char* param = dynamic_dim(i)) {
      d->set_dim_param(param);
    } else {
      d->set_dim_value(t.size(i));
    }
  }
}

const char* GraphBuilder::dynamic_dim(int64_t i) const {
  if (i == 0 && o_.dynamic_batch) return "batch";
  if (i == 1 && o_.dynamic_sequence) return "sequence";
  return nullptr;
}

}  // namespace sinter::onnx::detail

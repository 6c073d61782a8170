// ONNX export (Note [onnx export] in include/sinter/onnx.h), its entry points: the options checked,
// the module walked by the Exporter (exporter.h), then the model checked by the ONNX library's
// checker and strict shape inference, and written.
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "internal/atomic_file.h"
#include "onnx/exporter.h"
#include "sinter/autograd.h"
#include "sinter/core/noncopyable.h"
#include "sinter/onnx.h"

namespace sinter::onnx {

namespace detail {

Value Exporter::emit(nn::Module& m, const std::string& path, const Value& x) {
  const std::string scope = path.empty() ? m.name() : path;
  const std::vector<const std::vector<Mapping>*> tables = {&module_rows(), &model_rows()};
  for (const std::vector<Mapping>* rows : tables) {
    for (const Mapping& row : *rows) {
      if (typeid(m) == *row.type) return row.emit(*this, m, {path, scope}, x);
    }
  }
  std::string names;
  for (const std::vector<Mapping>* rows : tables) {
    for (const Mapping& row : *rows) names += (names.empty() ? "" : ", ") + std::string(row.name);
  }
  SINTER_THROW("onnx::export_model: cannot export ", where(path), " (a ", m.name(),
               "): it has no ONNX mapping. Supported: ", names);
}

}  // namespace detail

namespace {

using detail::Exporter;
using detail::GraphBuilder;
using detail::Value;
namespace pb = ::onnx;

// Restores the training mode of every module in a tree at the end of a scope (a frozen BatchNorm
// inside a training model stays frozen).
class ModeGuard : NonCopyable {
 public:
  explicit ModeGuard(nn::Module& root) { save(root); }
  // Pre-order: each module's (recursive) train() comes after its ancestors' and before its
  // descendants', so each ends with its own mode.
  ~ModeGuard() {
    for (const auto& [m, training] : modes_) m->train(training);
  }

 private:
  void save(nn::Module& m) {
    modes_.emplace_back(&m, m.is_training());
    for (const auto& [name, child] : m.named_children()) save(*child);
  }
  std::vector<std::pair<nn::Module*, bool>> modes_;
};

// Opset 17's convolution and pooling operators take no bfloat16.
void check_bf16_operators(const pb::GraphProto& graph) {
  for (const pb::NodeProto& n : graph.node()) {
    const std::string& op = n.op_type();
    SINTER_CHECK(
        op != "Conv" && op != "MaxPool" && op != "AveragePool" && op != "GlobalAveragePool",
        "onnx::export_model: a bf16 export needs ", op, " (", n.name(),
        "), which takes no bfloat16 in opset 17; export in f32 or f16");
  }
}

// The graph's input and output names must name nothing else: an initializer under the input's
// name would be replaced by the input.
void check_io_names(const pb::GraphProto& graph, const ExportOptions& o) {
  for (const pb::TensorProto& t : graph.initializer()) {
    SINTER_CHECK(t.name() != o.input_name && t.name() != o.output_name,
                 "onnx::export_model: the name '", t.name(),
                 "' is a weight's; choose another input_name or output_name");
  }
  for (const pb::NodeProto& n : graph.node()) {
    for (const std::string& out : n.output()) {
      SINTER_CHECK(out != o.input_name, "onnx::export_model: the input name '", o.input_name,
                   "' is also a value of the graph; choose another input_name");
    }
  }
}

// The inferred shape of the graph's output must be Sinter's: fixed dims equal, dynamic dims not
// fixed to a number (which would mean a size baked into the graph).
void check_inferred_output(const pb::ModelProto& inferred, const Tensor& y,
                           const GraphBuilder& builder) {
  const pb::ValueInfoProto& out = inferred.graph().output(0);
  SINTER_CHECK(out.type().has_tensor_type() && out.type().tensor_type().has_shape(),
               "onnx::export_model: shape inference found no shape for the output");
  const pb::TensorShapeProto& shape = out.type().tensor_type().shape();
  SINTER_CHECK(shape.dim_size() == y.dim(), "onnx::export_model: the ONNX graph's output has ",
               shape.dim_size(), " dims where Sinter's has ", y.dim());
  for (int64_t i = 0; i < y.dim(); ++i) {
    const pb::TensorShapeProto_Dimension& d = shape.dim(static_cast<int>(i));
    if (builder.dynamic_dim(i) != nullptr) {
      SINTER_CHECK(!d.has_dim_value(), "onnx::export_model: the output's dim ", i,
                   " should follow "
                   "the input's '",
                   builder.dynamic_dim(i), "' dim but is fixed to ", d.dim_value(),
                   " in the graph");
    } else {
      SINTER_CHECK(!d.has_dim_value() || d.dim_value() == y.size(i),
                   "onnx::export_model: the ONNX graph's output dim ", i, " is ", d.dim_value(),
                   " where Sinter's is ", y.size(i));
    }
  }
}

// Checks the options and the example input before anything runs.
void check_options(const ExportOptions& o, const Tensor& example_input) {
  SINTER_CHECK(o.opset == 17, "onnx::export_model: opset ", o.opset,
               " is not written; opset 17 is");
  SINTER_CHECK(example_input.defined(), "onnx::export_model: undefined example input");
  SINTER_CHECK(!o.input_name.empty() && !o.output_name.empty() && o.input_name != o.output_name,
               "onnx::export_model: the input and output names must be distinct and non-empty, "
               "got '",
               o.input_name, "' and '", o.output_name, "'");
  SINTER_CHECK(!o.dtype || is_floating(*o.dtype),
               "onnx::export_model: dtype must be floating, got ", *o.dtype);
  SINTER_CHECK(!o.dynamic_sequence || example_input.dim() >= 2,
               "onnx::export_model: dynamic_sequence needs an input of rank 2 or more, got shape ",
               shape_str(example_input.shape()));
  SINTER_CHECK(!o.dynamic_batch || example_input.dim() >= 1,
               "onnx::export_model: dynamic_batch needs an input of rank 1 or more, got a scalar");
}

// The module's device and floating dtype: its first floating parameter's (or buffer's), else the
// example input's (f32 for an integer input).
struct Placement {
  DType dtype;
  Device device;
};
Placement placement_of(nn::Module& module, const Tensor& example_input) {
  std::optional<Tensor> first;
  for (const std::vector<Tensor>& tensors : {module.parameters(), module.buffers()}) {
    const auto it = std::find_if(tensors.begin(), tensors.end(),
                                 [](const Tensor& t) { return is_floating(t.dtype()); });
    if (it != tensors.end()) {
      first = *it;
      break;
    }
  }
  const DType dtype =
      first ? first->dtype()
            : (is_floating(example_input.dtype()) ? example_input.dtype() : DType::f32);
  return {dtype, first ? first->device() : example_input.device()};
}

// The model's header: IR version, producer and opset.
void set_model_header(pb::ModelProto& model, const ExportOptions& o) {
  model.set_ir_version(pb::IR_VERSION);
  model.set_producer_name("sinter");
  model.set_producer_version(SINTER_VERSION);
  model.set_model_version(1);
  pb::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(o.opset);
}

// The output's dims named dynamic must be the input's (the batch, the sequence).
void check_dynamic_dims(const GraphBuilder& builder, const Tensor& x, const Tensor& y) {
  for (int64_t i = 0; i < std::min<int64_t>(2, y.dim()); ++i) {
    if (builder.dynamic_dim(i) == nullptr) continue;
    SINTER_CHECK(i < x.dim() && y.size(i) == x.size(i), "onnx::export_model: the output's dim ", i,
                 " (", y.size(i), ") is not the input's '", builder.dynamic_dim(i), "' dim (",
                 i < x.dim() ? x.size(i) : -1, "); export with dynamic_",
                 i == 0 ? "batch" : "sequence", " = false");
  }
}

// Names the value `y` the graph's output (o.output_name): renames the node that makes it, or copies
// it where the value is also read by another node, or is the input itself (an identity model).
void name_output(pb::GraphProto& graph, const std::string& y, const ExportOptions& o) {
  bool read_elsewhere = y == o.input_name;
  pb::NodeProto* producer = nullptr;
  for (pb::NodeProto& n : *graph.mutable_node()) {
    for (const std::string& in : n.input()) read_elsewhere = read_elsewhere || in == y;
    for (const std::string& out : n.output()) {
      if (out == y) producer = &n;
    }
  }
  if (producer != nullptr && !read_elsewhere) {
    for (std::string& out : *producer->mutable_output()) {
      if (out == y) out = o.output_name;
    }
  } else {
    pb::NodeProto* copy = graph.add_node();
    copy->set_op_type("Identity");
    copy->set_name("output/Identity");
    copy->add_input(y);
    copy->add_output(o.output_name);
  }
}

// The ONNX checker and strict shape inference on the finished model; returns the model with its
// inferred shapes.
pb::ModelProto check_model(const pb::ModelProto& model, const std::string& module_name) {
  SINTER_CHECK(model.ByteSizeLong() < (size_t{1} << 31), "onnx::export_model: the model takes ",
               model.ByteSizeLong(),
               " bytes, over protobuf's 2 GiB; ONNX's external data files "
               "are not written");
  try {
    pb::checker::check_model(model);
  } catch (const std::exception& e) {
    SINTER_THROW("onnx::export_model: the ONNX checker rejected the graph of ", module_name, ": ",
                 e.what());
  }
  pb::ModelProto inferred = model;
  try {
    pb::ShapeInferenceOptions strict{true, 1, true};
    pb::shape_inference::InferShapes(inferred, pb::OpSchemaRegistry::Instance(), strict);
  } catch (const std::exception& e) {
    SINTER_THROW("onnx::export_model: ONNX shape inference failed on the graph of ", module_name,
                 ": ", e.what());
  }
  return inferred;
}

}  // namespace

bool is_available() { return true; }

std::string export_to_string(nn::Module& module, const Tensor& example_input,
                             const ExportOptions& o, ExportSummary* summary) {
  check_options(o, example_input);
  const Placement place = placement_of(module, example_input);
  const DType float_dtype = o.dtype.value_or(place.dtype);

  NoGradGuard no_grad;
  ModeGuard mode(module);
  module.eval();
  Tensor x = example_input.detach().to(place.device);
  if (is_floating(x.dtype())) x = x.to(place.dtype);

  Exporter ex(module, o, float_dtype);
  pb::ModelProto& model = ex.model();
  set_model_header(model, o);
  pb::GraphProto& graph = ex.graph();
  graph.set_name(o.graph_name.empty() ? module.name() : o.graph_name);
  ex.set_type(graph.add_input(), o.input_name, x);

  Value y = ex.emit(module, "", {o.input_name, x});
  SINTER_CHECK(y.t.defined(), "onnx::export_model: the module returned an undefined tensor");
  check_dynamic_dims(ex, x, y.t);
  name_output(graph, y.name, o);
  ex.set_type(graph.add_output(), o.output_name, y.t);
  check_io_names(graph, o);
  if (float_dtype == DType::bf16) check_bf16_operators(graph);
  (*model.add_metadata_props()).set_key("sinter_module");
  model.mutable_metadata_props(0)->set_value(module.name());

  check_inferred_output(check_model(model, module.name()), y.t, ex);

  std::string bytes;
  SINTER_CHECK(model.SerializeToString(&bytes), "onnx::export_model: cannot serialize the model");
  if (summary != nullptr) {
    *summary = {.nodes = graph.node_size(),
                .initializers = graph.initializer_size(),
                .bytes = static_cast<int64_t>(bytes.size())};
  }
  return bytes;
}

ExportSummary export_model(nn::Module& module, const Tensor& example_input, const std::string& path,
                           const ExportOptions& options) {
  SINTER_CHECK(!path.empty(), "onnx::export_model: empty path");
  ExportSummary summary;
  const std::string bytes = export_to_string(module, example_input, options, &summary);
  sinter::detail::write_file_atomically(path, {{bytes.data(), bytes.size()}}, "onnx::export_model");
  return summary;
}

}  // namespace sinter::onnx

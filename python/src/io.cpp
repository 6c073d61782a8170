// safetensors files (save_file / load_file, as safetensors.torch's), TensorBoard's SummaryWriter,
// autocast, sinter.cuda's device queries and memory statistics, and ONNX export.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "bind.h"

namespace sinter::python {
namespace {

// The guard behind sinter.autocast: entered and left by the Python context manager.
class AutocastGuard {
 public:
  AutocastGuard(DeviceType device, std::optional<DType> dtype, bool enabled)
      : device_(device), dtype_(dtype), enabled_(enabled) {}
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;
  // A stack: the same context may be entered again inside itself.
  void enter() { guards_.push_back(std::make_unique<autocast::Guard>(device_, dtype_, enabled_)); }
  void exit() {
    if (!guards_.empty()) guards_.pop_back();
  }

 private:
  DeviceType device_;
  std::optional<DType> dtype_;
  bool enabled_;
  std::vector<std::unique_ptr<autocast::Guard>> guards_;
};

void bind_files(nb::module_& m) {
  m.def(
      "save_file",
      [](const StateDict& tensors, const std::string& path,
         const std::optional<Metadata>& metadata) {
        save(tensors, path, metadata.value_or(Metadata{}));
      },
      nb::arg("tensors"), nb::arg("filename"), nb::arg("metadata") = nb::none(),
      "Writes a dict of tensors as a safetensors file (atomically: a temporary file, then a "
      "rename).");
  m.def(
      "load_file",
      [](const std::string& path, nb::handle device) {
        return load(path, device_of(device).value_or(Device::cpu()));
      },
      nb::arg("filename"), nb::arg("device") = "cpu",
      "The tensors of a safetensors file, by name.");
}

void bind_summary(nb::module_& m) {
  nb::class_<SummaryWriter>(m, "SummaryWriter",
                            "TensorBoard event files, as torch.utils.tensorboard's writer.")
      .def(
          "__init__",
          [](SummaryWriter* self, const std::string& log_dir) {
            new (self) SummaryWriter(log_dir);
          },
          nb::arg("log_dir") = "runs")
      .def("add_scalar", &SummaryWriter::add_scalar, nb::arg("tag"), nb::arg("scalar_value"),
           nb::arg("global_step") = 0)
      .def("add_scalars", &SummaryWriter::add_scalars, nb::arg("main_tag"),
           nb::arg("tag_scalar_dict"), nb::arg("global_step") = 0)
      .def("add_histogram", &SummaryWriter::add_histogram, nb::arg("tag"), nb::arg("values"),
           nb::arg("global_step") = 0)
      .def(
          "add_image",
          [](SummaryWriter& w, const std::string& tag, const Tensor& image, int64_t step) {
            w.add_image(tag, image, step);
          },
          nb::arg("tag"), nb::arg("img_tensor"), nb::arg("global_step") = 0)
      .def("add_text", &SummaryWriter::add_text, nb::arg("tag"), nb::arg("text_string"),
           nb::arg("global_step") = 0)
      .def("flush", &SummaryWriter::flush)
      .def("close", &SummaryWriter::close)
      .def_prop_ro("log_dir", &SummaryWriter::log_dir)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](SummaryWriter& w, nb::args) { w.close(); });
}

void bind_cuda(nb::module_& m) {
  m.def("is_available", &cuda::is_available);
  m.def("device_count", &cuda::device_count);
  m.def("synchronize", &cuda::synchronize, nb::arg("device") = -1);
  m.def(
      "memory_allocated", [](int device) { return cuda::memory_stats(device).allocated_bytes; },
      nb::arg("device") = -1);
  m.def(
      "max_memory_allocated",
      [](int device) { return cuda::memory_stats(device).peak_allocated_bytes; },
      nb::arg("device") = -1);
  m.def(
      "memory_reserved", [](int device) { return cuda::memory_stats(device).reserved_bytes; },
      nb::arg("device") = -1);
  m.def("reset_peak_memory_stats", &cuda::reset_peak_memory_stats, nb::arg("device") = -1);
  m.def("current_device", &cuda::current_device);
  m.def("set_device", &cuda::set_device, nb::arg("device"));
  m.def("empty_cache", &cuda::empty_cache);
  m.def("memory_summary", &cuda::memory_summary);
  m.def("is_current_stream_capturing", &cuda::is_capturing);
  m.def(
      "get_device_properties",
      [](int device) {
        const cuda::DeviceProperties p = cuda::get_device_properties(device);
        nb::dict d;
        d["name"] = p.name;
        d["major"] = p.major;
        d["minor"] = p.minor;
        d["multi_processor_count"] = p.multiprocessor_count;
        d["total_memory"] = p.total_memory;
        d["pci_bus_id"] = p.pci_bus_id;
        return d;
      },
      nb::arg("device") = -1);
  // A Python callable run by C++ (a captured step): called with the GIL, released with it.
  auto held = [](nb::object fn) {
    std::shared_ptr<nb::object> p = keep_object(std::move(fn));
    return [p] {
      nb::gil_scoped_acquire gil;
      (*p)();
    };
  };
  nb::class_<cuda::Graph>(m, "CUDAGraph", "A captured sequence of device work, replayed at once.")
      .def(nb::init<>())
      .def(
          "capture",
          [held](cuda::Graph& g, nb::object fn, int device) { g.capture(held(fn), device); },
          nb::arg("fn"), nb::arg("device") = -1,
          "Runs fn on a fresh stream, recording its device work instead of running it.")
      .def("replay", &cuda::Graph::replay)
      .def("captured", &cuda::Graph::captured);
  nb::class_<cuda::GraphedStep>(m, "GraphedStep",
                                "A training step run eagerly `warmup` times, then captured once "
                                "and replayed.")
      .def(
          "__init__",
          [held](cuda::GraphedStep* self, nb::object step, int warmup, int device) {
            new (self) cuda::GraphedStep(held(step), warmup, device);
          },
          nb::arg("step"), nb::arg("warmup") = 3, nb::arg("device") = -1)
      .def("__call__", &cuda::GraphedStep::run)
      .def("graphed", &cuda::GraphedStep::graphed);
}

void bind_onnx(nb::module_& m) {
  m.def(
      "export",
      [](nn::Module& module, const Tensor& example_input, const std::string& path,
         bool dynamic_batch, bool dynamic_sequence, const std::string& input_name,
         const std::string& output_name) {
        const onnx::ExportSummary s = onnx::export_model(module, example_input, path,
                                                         {.dynamic_batch = dynamic_batch,
                                                          .dynamic_sequence = dynamic_sequence,
                                                          .input_name = input_name,
                                                          .output_name = output_name});
        nb::dict d;
        d["nodes"] = s.nodes;
        d["initializers"] = s.initializers;
        d["bytes"] = s.bytes;
        return d;
      },
      nb::arg("model"), nb::arg("args"), nb::arg("f"), nb::kw_only(),
      nb::arg("dynamic_batch") = true, nb::arg("dynamic_sequence") = false,
      nb::arg("input_name") = "input", nb::arg("output_name") = "output",
      "Writes a C++ module (a Linear, a reference model, ...) as an ONNX file (opset 17), as "
      "torch.onnx.export(model, args, f); returns the graph's node, initializer and byte counts.");
}

}  // namespace

void bind_io(nb::module_& m) {
  nb::module_ files = m.def_submodule("safetensors", "safetensors files.");
  bind_files(files);
  nb::module_ tensorboard = m.def_submodule("tensorboard", "TensorBoard logs.");
  bind_summary(tensorboard);
  nb::module_ cuda_module = m.def_submodule("cuda", "CUDA devices and memory.");
  bind_cuda(cuda_module);
  nb::module_ onnx_module = m.def_submodule("onnx", "ONNX export.");
  bind_onnx(onnx_module);
  nb::class_<AutocastGuard>(m, "_AutocastGuard")
      .def(
          "__init__",
          [](AutocastGuard* self, const std::string& device_type, std::optional<PyDType> dtype,
             bool enabled) {
            SINTER_CHECK(device_type == "cpu" || device_type == "cuda",
                         "autocast: device_type must be 'cpu' or 'cuda', got '", device_type, "'");
            new (self)
                AutocastGuard(device_type == "cuda" ? DeviceType::cuda : DeviceType::cpu,
                              dtype ? std::optional<DType>(dtype->t) : std::nullopt, enabled);
          },
          nb::arg("device_type"), nb::arg("dtype") = nb::none(), nb::arg("enabled") = true)
      .def("enter", &AutocastGuard::enter)
      .def("exit", &AutocastGuard::exit);
}

}  // namespace sinter::python

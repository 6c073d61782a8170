// Modules written in Python where the C++ library takes an nn::Module (DDP, ONNX export), and the
// parts of the library that call back into Python: activation checkpointing of a Python function,
// and sinter.distributed (process groups, DDP, the distributed sampler) under mpirun.
#include <nanobind/stl/function.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bind.h"
#include "sinter/dist.h"

namespace sinter::python {
namespace {

// Note [python modules in C++]
// A module written in Python (sinter.nn.Module) becomes an nn::Module for the C++ library by
// mirroring its tree: each Python module a PyModule that registers the same parameter and buffer
// tensors (the handles are shared, not copied) under the same names, and its children: C++ layers
// as themselves, Python modules as PyModules, and a sinter.nn.Sequential as an nn::Sequential of
// its children, so that ONNX export, which maps module types to operators, takes a Sequential of
// layers written in either language. PyModule::forward calls the Python module with the GIL held.
// The mirror is taken when it is made: a tensor the Python module assigns afterwards (a new
// Parameter from .to()) is not followed, so wrap a module (DDP) after moving it.
class PyModule final : public nn::Module {
 public:
  explicit PyModule(nb::handle module) : module_(keep_object(nb::borrow(module))) {
    type_ = nb::cast<std::string>(nb::type_name(module.type()));
    for (auto [name, value] : nb::cast<nb::dict>(module.attr("_parameters"))) {
      if (!value.is_none()) {
        const Tensor& t = nb::cast<const Tensor&>(value);
        register_parameter(nb::cast<std::string>(name), t, t.requires_grad());
      }
    }
    for (auto [name, value] : nb::cast<nb::dict>(module.attr("_buffers"))) {
      if (!value.is_none()) register_buffer(nb::cast<std::string>(name), nb::cast<Tensor>(value));
    }
    for (auto [name, value] : nb::cast<nb::dict>(module.attr("_modules"))) {
      if (!value.is_none()) register_module(nb::cast<std::string>(name), as_cpp_module(value));
    }
  }

  std::string name() const override { return type_; }

  Tensor forward(const Tensor& x) override {
    nb::gil_scoped_acquire gil;
    nb::object out = (*module_)(x);
    SINTER_CHECK(nb::isinstance<Tensor>(out), type_, ".forward returned ",
                 nb::cast<std::string>(nb::type_name(out.type())),
                 "; the C++ library takes modules that return one tensor");
    return nb::cast<Tensor>(out);
  }

  static std::shared_ptr<nn::Module> as_cpp_module(nb::handle module);

 private:
  std::shared_ptr<nb::object> module_;
  std::string type_;
};

std::shared_ptr<nn::Module> PyModule::as_cpp_module(nb::handle module) {
  if (nb::isinstance<nn::Module>(module)) return nb::cast<std::shared_ptr<nn::Module>>(module);
  nb::object nn_package = nb::module_::import_("sinter.nn");
  SINTER_CHECK(nb::isinstance(module, nn_package.attr("Module")),
               "expected a sinter.nn.Module, got ",
               nb::cast<std::string>(nb::type_name(module.type())));
  // A Sequential of the package itself (not a subclass, whose forward may differ).
  if (module.type().is(nn_package.attr("Sequential"))) {
    auto seq = std::make_shared<nn::Sequential>();
    for (nb::handle child : module.attr("_modules").attr("values")()) {
      seq->push_back(as_cpp_module(child));
    }
    return seq;
  }
  return std::make_shared<PyModule>(module);
}

// A Python callable taking and returning lists of tensors, as checkpoint's function.
std::vector<Tensor> checkpoint_py(nb::object fn, const std::vector<Tensor>& inputs) {
  std::shared_ptr<nb::object> held = keep_object(std::move(fn));
  return autograd::checkpoint(
      [held](const std::vector<Tensor>& xs) {
        nb::gil_scoped_acquire gil;
        return nb::cast<std::vector<Tensor>>((*held)(xs));
      },
      inputs);
}

dist::ReduceOp reduce_op_of(const std::string& op) {
  if (op == "sum") return dist::ReduceOp::Sum;
  if (op == "avg") return dist::ReduceOp::Average;
  if (op == "max") return dist::ReduceOp::Max;
  throw nb::value_error(("all_reduce: op must be 'sum', 'avg' or 'max', got '" + op + "'").c_str());
}

void bind_distributed(nb::module_& m) {
  using dist::ProcessGroup;
  nb::class_<ProcessGroup>(m, "ProcessGroup", "The ranks of an mpirun, as torch.distributed's.")
      .def_static(
          "init",
          [](double timeout_s) {
            dist::ProcessGroupOptions o;
            o.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
            nb::gil_scoped_release release;
            return ProcessGroup::init(o);
          },
          nb::arg("timeout") = 300.0)
      .def("rank", &ProcessGroup::rank)
      .def("size", &ProcessGroup::size)
      .def("local_rank", &ProcessGroup::local_rank)
      .def("cuda_device", &ProcessGroup::cuda_device)
      .def(
          "all_reduce",
          [](ProcessGroup& pg, Tensor& t, const std::string& op) {
            nb::gil_scoped_release release;
            pg.all_reduce(t, reduce_op_of(op));
          },
          nb::arg("tensor"), nb::arg("op") = "sum")
      .def(
          "broadcast",
          [](ProcessGroup& pg, Tensor& t, int src) {
            nb::gil_scoped_release release;
            pg.broadcast(t, src);
          },
          nb::arg("tensor"), nb::arg("src") = 0)
      .def(
          "all_gather",
          [](ProcessGroup& pg, const Tensor& t) {
            nb::gil_scoped_release release;
            return pg.all_gather(t);
          },
          nb::arg("tensor"))
      .def("barrier", [](ProcessGroup& pg) {
        nb::gil_scoped_release release;
        pg.barrier();
      });
  using dist::DistributedDataParallel;
  nb::class_<DistributedDataParallel>(m, "_DDP")
      .def(
          "__init__",
          [](DistributedDataParallel* self, std::shared_ptr<nn::Module> module,
             std::shared_ptr<ProcessGroup> pg, double bucket_cap_mb, bool find_unused) {
            new (self) DistributedDataParallel(
                std::move(module), std::move(pg),
                {.bucket_cap_mb = bucket_cap_mb, .find_unused_parameters = find_unused});
          },
          nb::arg("module"), nb::arg("process_group"), nb::arg("bucket_cap_mb") = 25.0,
          nb::arg("find_unused_parameters") = false)
      .def("bucket_layout", &DistributedDataParallel::bucket_layout);
  // Held by DistributedDataParallel.no_sync()'s with-block; dropping it ends the guard.
  nb::class_<DistributedDataParallel::NoSync>(m, "_NoSync")
      .def(nb::init<DistributedDataParallel&>(), nb::arg("ddp"), nb::keep_alive<1, 2>());
  using dist::ZeroRedundancyOptimizer;
  nb::class_<ZeroRedundancyOptimizer, optim::Optimizer>(m, "_ZeRO")
      .def(
          "__init__",
          [](ZeroRedundancyOptimizer* self, DistributedDataParallel& ddp, const std::string& name,
             const nb::dict& options, int stage) {
            new (self) ZeroRedundancyOptimizer(
                ddp, ZeroRedundancyOptimizer::MakeOptimizer([&](const std::vector<Tensor>& shards) {
                  return make_optimizer(name, shards, options);
                }),
                {.stage = stage});
          },
          nb::arg("ddp"), nb::arg("optimizer"), nb::arg("options"), nb::arg("stage") = 2,
          nb::keep_alive<1, 2>())
      .def("clip_grad_norm_", &ZeroRedundancyOptimizer::clip_grad_norm_, nb::arg("max_norm"),
           nb::arg("norm_type") = 2.0)
      .def(
          "save_sharded",
          [](const ZeroRedundancyOptimizer& z, const std::string& path) { z.save_sharded(path); },
          nb::arg("path"))
      .def("load_sharded", &ZeroRedundancyOptimizer::load_sharded, nb::arg("path"))
      .def_prop_ro("stage", &ZeroRedundancyOptimizer::stage);
  nb::class_<dist::DistributedSampler>(m, "_DistributedSampler")
      .def(nb::init<int64_t, int, int, bool, uint64_t, bool>(), nb::arg("size"),
           nb::arg("num_replicas"), nb::arg("rank"), nb::arg("shuffle") = true, nb::arg("seed") = 0,
           nb::arg("drop_last") = false)
      .def("set_epoch", &dist::DistributedSampler::set_epoch, nb::arg("epoch"))
      .def("indices", &dist::DistributedSampler::indices)
      .def("num_samples", &dist::DistributedSampler::num_samples);
}

}  // namespace

void bind_adapter(nb::module_& m) {
  m.def("_as_cpp_module", &PyModule::as_cpp_module, nb::arg("module"),
        "A module written in Python as a C++ module (Note [python modules in C++]).");
  m.def("_checkpoint", &checkpoint_py, nb::arg("function"), nb::arg("inputs"));
  nb::module_ d = m.def_submodule("distributed", "Process groups and DDP, under mpirun.");
  bind_distributed(d);
}

}  // namespace sinter::python

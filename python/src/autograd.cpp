// Autograd from Python: requires_grad, grad, backward, hooks on Tensor; grad mode and inference
// mode for sinter.no_grad, enable_grad, set_grad_enabled and inference_mode (python/sinter/).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bind.h"
#include "internal/autograd_impl.h"
#include "internal/tensor_impl.h"

namespace sinter::python {
namespace {

// The guard behind sinter.inference_mode(mode): entered and left by the Python context manager.
class InferenceGuard {
 public:
  explicit InferenceGuard(bool mode) : mode_(mode) {}
  void enter() { guard_ = std::make_unique<InferenceMode>(mode_); }
  void exit() { guard_.reset(); }

 private:
  bool mode_;
  std::unique_ptr<InferenceMode> guard_;
};

// A node's name lives as long as the program (record() keeps the pointer): one copy per name.
const char* interned(const std::string& name) {
  static std::mutex mu;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mu);
  return names.insert(name).first->c_str();
}

// sinter.autograd.Function.apply's last step: makes `outputs` (computed without a graph) the
// results of a node over `inputs` whose backward is the Python callable `backward`, which takes
// and returns lists (None for an undefined gradient).
void record_function(const std::string& name, const std::vector<nb::object>& outputs,
                     const std::vector<Tensor>& inputs, nb::object backward) {
  std::vector<Tensor*> outs;
  for (const nb::object& o : outputs) outs.push_back(&nb::cast<Tensor&>(o));
  std::shared_ptr<nb::object> fn = keep_object(std::move(backward));
  const size_t n_inputs = inputs.size();
  autograd::record(interned(name), outs, inputs, [fn, n_inputs](const std::vector<Tensor>& grads) {
    nb::gil_scoped_acquire gil;
    nb::list in;
    for (const Tensor& g : grads) {
      in.append(g.defined() ? nb::cast(g) : nb::none());
    }
    nb::object out = (*fn)(in);
    std::vector<Tensor> result;
    for (nb::handle h : out) {
      result.push_back(h.is_none() ? Tensor() : nb::cast<Tensor>(h));
    }
    SINTER_CHECK(result.size() == n_inputs, "autograd.Function: backward gave ", result.size(),
                 " gradients for ", n_inputs, " tensor inputs");
    return result;
  });
}

}  // namespace

void bind_autograd(nb::module_& m, nb::class_<Tensor>& c) {
  c.def_prop_rw(
       "requires_grad", [](const Tensor& t) { return t.requires_grad(); },
       [](Tensor& t, bool v) { t.requires_grad_(v); })
      .def(
          "requires_grad_", [](Tensor& t, bool v) -> Tensor& { return t.requires_grad_(v); },
          nb::arg("requires_grad") = true, nb::rv_policy::reference)
      .def_prop_rw(
          "grad",
          [](const Tensor& t) -> std::optional<Tensor> {
            Tensor g = t.grad();
            return g.defined() ? std::optional<Tensor>(g) : std::nullopt;
          },
          [](Tensor& t, std::optional<Tensor> g) { t.set_grad(g.value_or(Tensor())); },
          nb::arg("value").none())
      .def(
          "backward",
          [](const Tensor& t, std::optional<Tensor> gradient, bool retain_graph) {
            t.backward(gradient.value_or(Tensor()), retain_graph);
          },
          nb::arg("gradient") = nb::none(), nb::arg("retain_graph") = false)
      .def("retain_grad", &Tensor::retain_grad)
      .def_prop_ro("retains_grad",
                   [](const Tensor& t) {
                     return t.defined() && t.impl()->autograd && t.impl()->autograd->retains_grad;
                   })
      .def_prop_ro("output_nr",
                   [](const Tensor& t) {
                     return t.defined() && t.impl()->autograd ? t.impl()->autograd->output_nr : 0;
                   })
      .def(
          "register_post_accumulate_grad_hook",
          [](const Tensor& t, nb::object fn) {
            std::shared_ptr<nb::object> hook = keep_object(std::move(fn));
            t.register_post_accumulate_grad_hook([hook](const Tensor& leaf) {
              nb::gil_scoped_acquire gil;
              (*hook)(leaf);
            });
          },
          nb::arg("hook"),
          "hook(tensor) runs after this leaf's gradient has been accumulated into its .grad.")
      .def_prop_ro("_version", &Tensor::version)
      .def("_impl_id", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.impl()); })
      .def("_grad_fn_name",
           [](const Tensor& t) -> std::optional<std::string> {
             const std::shared_ptr<Node> fn = t.grad_fn();
             if (!fn) return std::nullopt;
             return fn->name();
           })
      .def("is_inference", &Tensor::is_inference)
      .def(
          "register_hook",
          [](const Tensor& t, nb::object fn) {
            std::shared_ptr<nb::object> hook = keep_object(std::move(fn));
            t.register_hook([hook](const Tensor& g) {
              nb::gil_scoped_acquire gil;
              nb::object out = (*hook)(g);
              if (out.is_none()) return Tensor();
              if (!nb::isinstance<Tensor>(out)) {
                throw nb::type_error("a hook must return None or a Tensor");
              }
              return nb::cast<Tensor>(out);
            });
          },
          nb::arg("hook"),
          "hook(grad) runs when this tensor's gradient is computed; a tensor it returns "
          "replaces the gradient.");

  m.def("is_grad_enabled", &GradMode::is_enabled);
  m.def("_set_grad_enabled", &GradMode::set_enabled, nb::arg("mode"));
  m.def("is_inference_mode_enabled", &InferenceMode::is_enabled);
  nb::class_<InferenceGuard>(m, "_InferenceGuard")
      .def(nb::init<bool>(), nb::arg("mode"))
      .def("enter", &InferenceGuard::enter)
      .def("exit", &InferenceGuard::exit);
  m.def("_record_function", &record_function, nb::arg("name"), nb::arg("outputs"),
        nb::arg("inputs"), nb::arg("backward"));
  m.def(
      "_backward",
      [](const std::vector<Tensor>& tensors, const std::vector<std::optional<Tensor>>& grads,
         bool retain_graph) {
        std::vector<Tensor> seeds;
        for (const auto& g : grads) seeds.push_back(g.value_or(Tensor()));
        seeds.resize(tensors.size());
        autograd::backward(tensors, seeds, retain_graph);
      },
      nb::arg("tensors"), nb::arg("grad_tensors"), nb::arg("retain_graph") = false);
  m.def(
      "_grad",
      [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
         const std::vector<std::optional<Tensor>>& grad_outputs, bool retain_graph,
         bool allow_unused) {
        std::vector<Tensor> seeds;
        for (const auto& g : grad_outputs) seeds.push_back(g.value_or(Tensor()));
        seeds.resize(outputs.size());
        std::vector<std::optional<Tensor>> out;
        for (Tensor& g : autograd::grad(outputs, inputs, seeds, retain_graph, allow_unused)) {
          out.push_back(g.defined() ? std::optional<Tensor>(std::move(g)) : std::nullopt);
        }
        return out;
      },
      nb::arg("outputs"), nb::arg("inputs"), nb::arg("grad_outputs"), nb::arg("retain_graph"),
      nb::arg("allow_unused"));
}

}  // namespace sinter::python

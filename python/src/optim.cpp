// sinter._C.optim: the optimizers with PyTorch's keyword arguments (lr=, momentum=, betas=, ...),
// over the parameters of any module, C++ or Python (the tensors are shared, not copied).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <set>
#include <string>
#include <vector>

#include "bind.h"

namespace sinter::python {
namespace {

// Options from keyword arguments named as the options' fields; an unknown name is a TypeError.
template <class Options>
Options options_from(const nb::kwargs& kwargs, const std::set<std::string>& known, Options o,
                     const char* optimizer) {
  for (auto [key, value] : kwargs) {
    const auto name = nb::cast<std::string>(key);
    if (!known.count(name)) {
      throw nb::type_error(
          (std::string(optimizer) + "() got an unexpected keyword argument '" + name + "'")
              .c_str());
    }
  }
  return o;
}

#define SINTER_PY_OPTION_NAME_(type, field, def, check) #field,
#define SINTER_PY_OPTION_SET_(type, field, def, check) \
  if (kwargs.contains(#field)) o.field = nb::cast<type>(kwargs[#field]);

// A Python class `name` for optimizer O with options Opt, listed by the X-macro LIST.
#define SINTER_PY_OPTIMIZER_(O, Opt, LIST, name)                                             \
  nb::class_<O, optim::Optimizer>(m, name).def(                                              \
      "__init__",                                                                            \
      [](O* self, const std::vector<Tensor>& params, nb::kwargs kwargs) {                    \
        Opt o;                                                                               \
        LIST(SINTER_PY_OPTION_SET_)                                                          \
        new (self) O(params, options_from(kwargs, {LIST(SINTER_PY_OPTION_NAME_)}, o, name)); \
      },                                                                                     \
      nb::arg("params"), nb::arg("kwargs"));

}  // namespace

void bind_optim(nb::module_& root) {
  nb::module_ m = root.def_submodule("optim", "The optimizers, with PyTorch's options.");
  nb::class_<optim::Optimizer>(m, "Optimizer")
      .def("step", [](optim::Optimizer& o) { o.step(); })
      .def("zero_grad", &optim::Optimizer::zero_grad, nb::arg("set_to_none") = true)
      .def_prop_rw(
          "lr", [](const optim::Optimizer& o) { return o.lr(); },
          [](optim::Optimizer& o, double lr) { o.set_lr(lr); });
  using optim::Betas;
  SINTER_PY_OPTIMIZER_(optim::SGD, optim::SGDOptions, SINTER_SGD_OPTIONS, "SGD")
  SINTER_PY_OPTIMIZER_(optim::Adam, optim::AdamOptions, SINTER_ADAM_OPTIONS, "Adam")
  SINTER_PY_OPTIMIZER_(optim::AdamW, optim::AdamWOptions, SINTER_ADAMW_OPTIONS, "AdamW")
  SINTER_PY_OPTIMIZER_(optim::RMSprop, optim::RMSpropOptions, SINTER_RMSPROP_OPTIONS, "RMSprop")
  SINTER_PY_OPTIMIZER_(optim::Adagrad, optim::AdagradOptions, SINTER_ADAGRAD_OPTIONS, "Adagrad")
}

}  // namespace sinter::python

// sinter._C.optim: the optimizers with PyTorch's keyword arguments (lr=, momentum=, betas=, ...),
// over the parameters of any module, C++ or Python (the tensors are shared, not copied).
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
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
#define SINTER_PY_GROUP_SET_(type, field, def, check) \
  if (d.contains(#field)) g.field = nb::cast<type>(d[#field]);

// Parameter groups from dicts, as torch.optim takes them: "params" and any option overridden.
template <class Group>
std::vector<Group> groups_from(const nb::list& dicts, const std::set<std::string>& known,
                               const char* optimizer, void (*set)(Group&, const nb::dict&)) {
  std::vector<Group> groups;
  for (nb::handle h : dicts) {
    const auto d = nb::borrow<nb::dict>(h);
    SINTER_CHECK(d.contains("params"), optimizer, ": a parameter group needs \"params\"");
    for (auto [key, value] : d) {
      const auto name = nb::cast<std::string>(key);
      if (name != "params" && !known.count(name)) {
        throw nb::type_error((std::string(optimizer) + ": a parameter group's option '" + name +
                              "' is not one of this optimizer's")
                                 .c_str());
      }
    }
    Group g;
    g.params = nb::cast<std::vector<Tensor>>(nb::list(d["params"]));
    set(g, d);
    groups.push_back(std::move(g));
  }
  return groups;
}

// A Python class `name` for optimizer O with options Opt and groups G, listed by the X-macro
// LIST: params is a list of tensors or of group dicts.
#define SINTER_PY_OPTIMIZER_(O, Opt, G, LIST, name)                                                \
  nb::class_<O, optim::Optimizer>(m, name).def(                                                    \
      "__init__",                                                                                  \
      [](O* self, const nb::list& params, nb::kwargs kwargs) {                                     \
        Opt o;                                                                                     \
        LIST(SINTER_PY_OPTION_SET_)                                                                \
        const std::set<std::string> known{LIST(SINTER_PY_OPTION_NAME_)};                           \
        o = options_from(kwargs, known, o, name);                                                  \
        if (params.size() > 0 && nb::isinstance<nb::dict>(params[0])) {                            \
          new (self) O(groups_from<G>(params, known, name,                                         \
                                      [](G& g, const nb::dict& d) { LIST(SINTER_PY_GROUP_SET_) }), \
                       o);                                                                         \
        } else {                                                                                   \
          new (self) O(nb::cast<std::vector<Tensor>>(params), o);                                  \
        }                                                                                          \
      },                                                                                           \
      nb::arg("params"), nb::arg("kwargs"));

// sinter.optim.lr_scheduler: the schedulers over an optimizer (kept alive by them), as
// torch.optim.lr_scheduler's: step() after the optimizer's step, get_last_lr().
void bind_schedulers(nb::module_& m) {
  using optim::LRScheduler;
  nb::class_<LRScheduler>(m, "LRScheduler")
      .def("step", &LRScheduler::step)
      .def("get_last_lr", &LRScheduler::get_last_lr)
      .def("state_dict", &LRScheduler::state_dict)
      .def("load_state_dict", &LRScheduler::load_state_dict, nb::arg("state_dict"));
  nb::class_<optim::StepLR, LRScheduler>(m, "StepLR")
      .def(nb::init<optim::Optimizer&, int64_t, double>(), nb::arg("optimizer"),
           nb::arg("step_size"), nb::arg("gamma") = 0.1, nb::keep_alive<1, 2>());
  nb::class_<optim::CosineAnnealingLR, LRScheduler>(m, "CosineAnnealingLR")
      .def(nb::init<optim::Optimizer&, int64_t, double, int64_t>(), nb::arg("optimizer"),
           nb::arg("T_max"), nb::arg("eta_min") = 0.0, nb::arg("warmup_steps") = 0,
           nb::keep_alive<1, 2>());
}

}  // namespace

void bind_optim(nb::module_& root) {
  nb::module_ m = root.def_submodule("optim", "The optimizers, with PyTorch's options.");
  nb::class_<optim::Optimizer>(m, "Optimizer")
      .def("step", [](optim::Optimizer& o) { o.step(); })
      .def("zero_grad", &optim::Optimizer::zero_grad, nb::arg("set_to_none") = true)
      .def_prop_rw(
          "lr", [](const optim::Optimizer& o) { return o.lr(); },
          [](optim::Optimizer& o, double lr) { o.set_lr(lr); })
      .def("state_dict", &optim::Optimizer::state_dict,
           "The optimizer's state (its per-parameter buffers and its groups' options), by name.")
      .def("load_state_dict", &optim::Optimizer::load_state_dict, nb::arg("state_dict"))
      .def(
          "group_lr", [](const optim::Optimizer& o, size_t group) { return o.lr(group); },
          nb::arg("group"))
      .def(
          "set_group_lr", [](optim::Optimizer& o, size_t group, double lr) { o.set_lr(group, lr); },
          nb::arg("group"), nb::arg("lr"));
  using optim::Betas;
  nb::module_ schedulers = m.def_submodule("lr_scheduler", "Learning-rate schedules.");
  bind_schedulers(schedulers);
  using namespace optim;
  SINTER_PY_OPTIMIZER_(SGD, SGDOptions, SGDGroup, SINTER_SGD_OPTIONS, "SGD")
  SINTER_PY_OPTIMIZER_(Adam, AdamOptions, AdamGroup, SINTER_ADAM_OPTIONS, "Adam")
  SINTER_PY_OPTIMIZER_(AdamW, AdamWOptions, AdamWGroup, SINTER_ADAMW_OPTIONS, "AdamW")
  SINTER_PY_OPTIMIZER_(RMSprop, RMSpropOptions, RMSpropGroup, SINTER_RMSPROP_OPTIONS, "RMSprop")
  SINTER_PY_OPTIMIZER_(Adagrad, AdagradOptions, AdagradGroup, SINTER_ADAGRAD_OPTIONS, "Adagrad")
}

}  // namespace sinter::python

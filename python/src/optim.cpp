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
Options options_from(const nb::dict& kwargs, const std::set<std::string>& known, Options o,
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

// An optimizer of the class named `which` over params with PyTorch's keyword options: what
// make_optimizer (bind.h) gives ZeRO for its shards.
#define SINTER_PY_MAKE_(O, Opt, LIST, name)                          \
  if (which == name) {                                               \
    const nb::dict& kwargs = options;                                \
    Opt o;                                                           \
    LIST(SINTER_PY_OPTION_SET_)                                      \
    const std::set<std::string> known{LIST(SINTER_PY_OPTION_NAME_)}; \
    o = options_from(kwargs, known, o, name);                        \
    return std::make_unique<O>(params, o);                           \
  }

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
  nb::class_<optim::OneCycleLR, LRScheduler>(m, "OneCycleLR")
      .def(
          "__init__",
          [](optim::OneCycleLR* self, optim::Optimizer& opt, double max_lr,
             std::optional<int64_t> total_steps, std::optional<int64_t> epochs,
             std::optional<int64_t> steps_per_epoch, double pct_start,
             const std::string& anneal_strategy, bool cycle_momentum, double base_momentum,
             double max_momentum, double div_factor, double final_div_factor, bool three_phase) {
            if (!total_steps) {
              SINTER_CHECK(epochs && steps_per_epoch,
                           "OneCycleLR: You must define either total_steps OR (epochs AND "
                           "steps_per_epoch)");
              total_steps = *epochs * *steps_per_epoch;
            }
            SINTER_CHECK(anneal_strategy == "cos" || anneal_strategy == "linear",
                         "OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', got ",
                         anneal_strategy);
            new (self) optim::OneCycleLR(
                opt, max_lr, *total_steps,
                {.pct_start = pct_start,
                 .anneal_strategy = anneal_strategy == "cos" ? optim::AnnealStrategy::Cos
                                                             : optim::AnnealStrategy::Linear,
                 .cycle_momentum = cycle_momentum,
                 .base_momentum = base_momentum,
                 .max_momentum = max_momentum,
                 .div_factor = div_factor,
                 .final_div_factor = final_div_factor,
                 .three_phase = three_phase});
          },
          nb::arg("optimizer"), nb::arg("max_lr"), nb::arg("total_steps") = nb::none(),
          nb::arg("epochs") = nb::none(), nb::arg("steps_per_epoch") = nb::none(),
          nb::arg("pct_start") = 0.3, nb::arg("anneal_strategy") = "cos",
          nb::arg("cycle_momentum") = true, nb::arg("base_momentum") = 0.85,
          nb::arg("max_momentum") = 0.95, nb::arg("div_factor") = 25.0,
          nb::arg("final_div_factor") = 1e4, nb::arg("three_phase") = false,
          nb::keep_alive<1, 2>());
  nb::class_<optim::CosineAnnealingLR, LRScheduler>(m, "CosineAnnealingLR")
      .def(nb::init<optim::Optimizer&, int64_t, double, int64_t>(), nb::arg("optimizer"),
           nb::arg("T_max"), nb::arg("eta_min") = 0.0, nb::arg("warmup_steps") = 0,
           nb::keep_alive<1, 2>());
}

// GradScaler, as torch.amp.GradScaler (the device argument is taken and not needed: the scale
// lives where the loss is).
void bind_grad_scaler(nb::module_& m) {
  using optim::GradScaler;
  nb::class_<GradScaler>(m, "GradScaler")
      .def(
          "__init__",
          [](GradScaler* self, const std::string& device, double init_scale, double growth_factor,
             double backoff_factor, int64_t growth_interval, bool enabled) {
            (void)device;
            new (self) GradScaler({.init_scale = init_scale,
                                   .growth_factor = growth_factor,
                                   .backoff_factor = backoff_factor,
                                   .growth_interval = growth_interval,
                                   .enabled = enabled});
          },
          nb::arg("device") = "cuda", nb::arg("init_scale") = 65536.0,
          nb::arg("growth_factor") = 2.0, nb::arg("backoff_factor") = 0.5,
          nb::arg("growth_interval") = 2000, nb::arg("enabled") = true)
      .def("scale", &GradScaler::scale, nb::arg("outputs"))
      .def("unscale_", &GradScaler::unscale_, nb::arg("optimizer"))
      .def("step", &GradScaler::step, nb::arg("optimizer"),
           "optimizer.step() unless a gradient was inf or NaN; whether it ran.")
      .def(
          "update",
          [](GradScaler& s, std::optional<double> new_scale) {
            SINTER_CHECK(!new_scale, "GradScaler.update: new_scale is not supported");
            s.update();
          },
          nb::arg("new_scale") = nb::none())
      .def("get_scale", &GradScaler::get_scale)
      .def("get_growth_tracker", &GradScaler::growth_tracker)
      .def("is_enabled", &GradScaler::is_enabled)
      .def("state_dict", &GradScaler::state_dict)
      .def("load_state_dict", &GradScaler::load_state_dict, nb::arg("state_dict"));
}

}  // namespace

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& which,
                                                 const std::vector<Tensor>& params,
                                                 const nb::dict& options) {
  using namespace optim;
  SINTER_PY_MAKE_(SGD, SGDOptions, SINTER_SGD_OPTIONS, "SGD")
  SINTER_PY_MAKE_(Adam, AdamOptions, SINTER_ADAM_OPTIONS, "Adam")
  SINTER_PY_MAKE_(AdamW, AdamWOptions, SINTER_ADAMW_OPTIONS, "AdamW")
  SINTER_PY_MAKE_(RMSprop, RMSpropOptions, SINTER_RMSPROP_OPTIONS, "RMSprop")
  SINTER_PY_MAKE_(Adagrad, AdagradOptions, SINTER_ADAGRAD_OPTIONS, "Adagrad")
  if (which == "Muon") {  // its groups and shards are made in C++ (Note [muon shards])
    throw nb::value_error(
        "ZeroRedundancyOptimizer: Muon under ZeRO is made in C++ (optim::Muon::over_shards, with "
        "ZeroOptions::group_of putting the matrices in its Muon group); from Python, use it "
        "with DistributedDataParallel alone");
  }
  throw nb::value_error(
      ("no optimizer named '" + which + "' (SGD, Adam, AdamW, RMSprop or Adagrad)").c_str());
}

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
          nb::arg("group"), nb::arg("lr"))
      .def("_num_groups", &optim::Optimizer::num_param_groups)
      .def("_group_params", &optim::Optimizer::params, nb::arg("group"))
      .def("_get", &optim::Optimizer::hyperparameter, nb::arg("group"), nb::arg("name"))
      .def("_set", &optim::Optimizer::set_hyperparameter, nb::arg("group"), nb::arg("name"),
           nb::arg("value"));
  m.def(
      "_clip_grad_norm_",
      [](const std::vector<Tensor>& params, double max_norm, double norm_type) {
        return optim::clip_grad_norm_on_device_(params, max_norm, norm_type);
      },
      nb::arg("parameters"), nb::arg("max_norm"), nb::arg("norm_type") = 2.0);
  m.def("_clip_grad_value_", &optim::clip_grad_value_, nb::arg("parameters"),
        nb::arg("clip_value"));
  bind_grad_scaler(m);
  using optim::Betas;
  nb::module_ schedulers = m.def_submodule("lr_scheduler", "Learning-rate schedules.");
  bind_schedulers(schedulers);
  using namespace optim;
  SINTER_PY_OPTIMIZER_(SGD, SGDOptions, SGDGroup, SINTER_SGD_OPTIONS, "SGD")
  SINTER_PY_OPTIMIZER_(Adam, AdamOptions, AdamGroup, SINTER_ADAM_OPTIONS, "Adam")
  SINTER_PY_OPTIMIZER_(AdamW, AdamWOptions, AdamWGroup, SINTER_ADAMW_OPTIONS, "AdamW")
  SINTER_PY_OPTIMIZER_(RMSprop, RMSpropOptions, RMSpropGroup, SINTER_RMSPROP_OPTIONS, "RMSprop")
  SINTER_PY_OPTIMIZER_(Adagrad, AdagradOptions, AdagradGroup, SINTER_ADAGRAD_OPTIONS, "Adagrad")
  SINTER_PY_OPTIMIZER_(Muon, MuonOptions, MuonGroup, SINTER_MUON_OPTIONS, "Muon")
}

}  // namespace sinter::python

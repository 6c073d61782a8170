// The pieces of the Python extension sinter._C (nanobind), one file each: dtypes, devices and
// scalars (types.cpp), Tensor (tensor.cpp, indexing.cpp), the ops beyond tensor.cpp's methods
// (ops.cpp), factories (factories.cpp), DLPack and NumPy exchange (dlpack.cpp), autograd
// (autograd.cpp), the C++ modules (nn.cpp, layers.cpp) and functional ops (nn.cpp,
// functional.cpp), the optimizers, schedules and GradScaler (optim.cpp), datasets, the DataLoader
// and the reference models (data.cpp), files, TensorBoard, autocast and CUDA queries (io.cpp), and
// Python modules and functions where C++ takes its own: DDP, ONNX export, checkpointing
// (adapter.cpp), the profiler and int8 quantization (tools.cpp). Python's own layer is
// python/sinter/.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sinter/sinter.h"

namespace sinter::python {

namespace nb = nanobind;

// sinter.dtype: a DType with PyTorch's names (sinter.float32, sinter.int64, ...).
struct PyDType {
  DType t;
};

// The dtype a `dtype=` argument names, or `fallback` where it is None.
DType dtype_or(const std::optional<PyDType>& d, DType fallback);
// A Python bool, int or float as a Scalar (its Python kind kept: PyTorch's scalar promotion);
// nullopt for anything else.
std::optional<Scalar> scalar_of(nb::handle h);
// A value written into a tensor of dtype t must fit it, as PyTorch checks (300 into uint8 is an
// error, not 44).
void check_fits(DType t, const Scalar& v, const char* op);
// The sizes of a call: f(2, 3) and f((2, 3)) alike, as PyTorch takes them; anything but ints is a
// TypeError naming op, the argument and the element, as PyTorch's.
Shape sizes_of(const nb::args& args, const char* op, const char* name = "size");
// A `device=` argument: None, a sinter.device or a string ("cuda:1"; a bad one raises
// RuntimeError naming it, as PyTorch's parser does).
std::optional<Device> device_of(nb::handle h);
// The options of a factory call.
TensorOptions options_of(const std::optional<PyDType>& dtype, nb::handle device, bool requires_grad,
                         DType fallback = DType::f32);

// A Python object held by C++ (a callable, a module), released with the GIL held wherever its
// last owner dies.
std::shared_ptr<nb::object> keep_object(nb::object o);

// A kernel size, stride, ... given as an int or as a tuple (PyTorch's _pair and _triple).
Size2 size2_of(nb::handle h);
Size3 size3_of(nb::handle h);
inline int64_t int_of(nb::handle h) { return nb::cast<int64_t>(h); }
// torch's padding argument: a size, "same" or "valid"; sets `same` and returns the size.
template <class Size, class Of>
inline Size padding_of(nb::handle h, bool& same, Of of) {
  same = false;
  if (nb::isinstance<nb::str>(h)) {
    const auto s = nb::cast<std::string>(h);
    if (s == "same") {
      same = true;
      return Size(0);
    }
    if (s == "valid") return Size(0);
    throw nb::value_error(
        ("Invalid padding string '" + s + "', should be one of {'valid', 'same'}").c_str());
  }
  return of(h);
}

// interpolate's and Upsample's arguments (size or scale_factor, mode, align_corners,
// recompute_scale_factor).
InterpolateOptions interpolate_options_of(nb::handle size, nb::handle scale,
                                          const std::string& mode,
                                          std::optional<bool> align_corners,
                                          std::optional<bool> recompute_scale_factor);
// gelu's `approximate=` argument ("none" or "tanh"; anything else a RuntimeError, as torch's).
Activation gelu_form_of(const std::string& approximate);
// torch's `bias=False` of the norm layers (a weight without a bias): refused by name, since
// Sinter's norm layers keep both or neither.
void refuse_no_bias(const char* layer, bool bias);
// torch's factory keywords of a layer (device=, dtype=): the new layer's tensors moved and cast
// there.
void to_factory(nn::Module& layer, nb::handle device, nb::handle dtype);
// A layer's optional tensor (a bias) for Python: None where undefined.
inline std::optional<Tensor> optional_of(const Tensor& t) {
  return t.defined() ? std::optional<Tensor>(t) : std::nullopt;
}
// A batch or instance norm layer with torch's arguments (affine and track_running_stats default
// to `stats`: true for the batch norms, false for the instance norms).
template <class L>
void bind_norm_layer(nb::module_& m, const char* name, bool stats) {
  nb::class_<L, nn::Module>(m, name)
      .def(
          "__init__",
          [name](L* self, int64_t n, double eps, double momentum, bool affine, bool track,
                 bool bias, nb::handle device, nb::handle dtype) {
            refuse_no_bias(name, bias);
            new (self) L(n, eps, momentum, affine, track);
            to_factory(*self, device, dtype);
          },
          nb::arg("num_features"), nb::arg("eps") = 1e-5, nb::arg("momentum") = 0.1,
          nb::arg("affine") = stats, nb::arg("track_running_stats") = stats, nb::arg("bias") = true,
          nb::kw_only(), nb::arg("device") = nb::none(), nb::arg("dtype") = nb::none())
      // torch's attributes; the tensors None where the layer has none.
      .def_ro("num_features", &L::num_features)
      .def_ro("eps", &L::eps)
      .def_ro("momentum", &L::momentum)
      .def_ro("affine", &L::affine)
      .def_ro("track_running_stats", &L::track_running_stats)
      .def_prop_ro("weight", [](const L& n) { return optional_of(n.weight); })
      .def_prop_ro("bias", [](const L& n) { return optional_of(n.bias); })
      .def_prop_ro("running_mean", [](const L& n) { return optional_of(n.running_mean); })
      .def_prop_ro("running_var", [](const L& n) { return optional_of(n.running_var); });
}

// torch's `inplace=` of a layer, kept on its Python object (made with nb::dynamic_attr) for its
// repr: the layer makes a new tensor either way.
template <class L>
void keep_inplace(L* self, bool inplace) {
  nb::setattr(nb::find(self), "inplace", nb::bool_(inplace));
}
// A `reduction=` argument ("mean", "sum", "none", "batchmean").
Reduction reduction_of(const std::string& r);
// An optional tensor argument, undefined for None.
Tensor or_undefined(const std::optional<Tensor>& t);

// sinter.optim's optimizer of class `which` ("AdamW") over params, with PyTorch's keyword
// options.
std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& which,
                                                 const std::vector<Tensor>& params,
                                                 const nb::dict& options);

void bind_types(nb::module_& m);
void bind_tensor(nb::module_& m);
void bind_indexing(nb::class_<Tensor>& cls);
void bind_factories(nb::module_& m);
void bind_dlpack(nb::module_& m, nb::class_<Tensor>& cls);
void bind_autograd(nb::module_& m, nb::class_<Tensor>& cls);
void bind_ops(nb::module_& m, nb::class_<Tensor>& cls);
void bind_nn(nb::module_& m);
void bind_extra_layers(nb::module_& nn);
void bind_reprs(nb::module_& nn);
void bind_extra_functional(nb::module_& functional);
void bind_models(nb::module_& models);
void bind_optim(nb::module_& m);
void bind_data(nb::module_& m);
void bind_io(nb::module_& m);
void bind_adapter(nb::module_& m);
void bind_tools(nb::module_& m);

}  // namespace sinter::python

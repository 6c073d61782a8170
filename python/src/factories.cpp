// The factories with PyTorch's signatures: sizes as separate ints or one sequence, dtype=,
// device=, requires_grad=; and the flat-values constructor behind sinter.tensor().
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "bind.h"

namespace sinter::python {
namespace {

using OptDType = std::optional<PyDType>;
using OptDevice = nb::handle;

// f(*size, dtype=None, device=None, requires_grad=False) for a factory f(shape, options).
template <class F>
void def_sized(nb::module_& m, const char* name, F f, const char* doc) {
  m.def(
      name,
      [f, name](nb::args size, OptDType dtype, OptDevice device, bool requires_grad) {
        return f(sizes_of(size, name), options_of(dtype, device, requires_grad));
      },
      nb::arg("size"), nb::kw_only(), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
      nb::arg("requires_grad") = false, doc);
}

// A Python number's dtype when no dtype is given: bool, int64 or float32, as PyTorch's default.
DType number_dtype(nb::handle v) {
  if (PyBool_Check(v.ptr())) return DType::b8;
  if (PyLong_Check(v.ptr())) return DType::i64;
  return DType::f32;
}

}  // namespace

void bind_factories(nb::module_& m) {
  def_sized(
      m, "zeros", [](const Shape& s, const TensorOptions& o) { return zeros(s, o); },
      "A tensor of zeros.");
  def_sized(
      m, "ones", [](const Shape& s, const TensorOptions& o) { return ones(s, o); },
      "A tensor of ones.");
  def_sized(
      m, "empty", [](const Shape& s, const TensorOptions& o) { return empty(s, o); },
      "A tensor with uninitialized values.");
  def_sized(
      m, "rand", [](const Shape& s, const TensorOptions& o) { return rand(s, o); },
      "Uniform in [0, 1) (Philox: the same values on the CPU and CUDA for one seed).");
  def_sized(
      m, "randn", [](const Shape& s, const TensorOptions& o) { return randn(s, o); },
      "Standard normal (Philox: the same values on the CPU and CUDA for one seed).");
  m.def(
      "full",
      [](const Shape& size, nb::handle value, OptDType dtype, OptDevice device,
         bool requires_grad) {
        const std::optional<Scalar> v = scalar_of(value);
        SINTER_CHECK(v.has_value(), "full: fill_value must be a number");
        return full(size, *v, options_of(dtype, device, requires_grad, number_dtype(value)));
      },
      nb::arg("size"), nb::arg("fill_value"), nb::kw_only(), nb::arg("dtype") = nb::none(),
      nb::arg("device") = nb::none(), nb::arg("requires_grad") = false);
  m.def(
      "arange",
      [](nb::handle a, std::optional<nb::handle> b, nb::handle step, OptDType dtype,
         OptDevice device, bool requires_grad) {
        const bool floats =
            PyFloat_Check(a.ptr()) || (b && PyFloat_Check(b->ptr())) || PyFloat_Check(step.ptr());
        const double start = b ? nb::cast<double>(a) : 0.0;
        const double end = b ? nb::cast<double>(*b) : nb::cast<double>(a);
        return arange(start, end, nb::cast<double>(step),
                      options_of(dtype, device, requires_grad, floats ? DType::f32 : DType::i64));
      },
      nb::arg("start"), nb::arg("end") = nb::none(), nb::arg("step") = 1, nb::kw_only(),
      nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
      nb::arg("requires_grad") = false,
      "arange(end) or arange(start, end, step): int64 for integer bounds, float32 otherwise.");
  m.def(
      "linspace",
      [](double start, double end, int64_t steps, OptDType dtype, OptDevice device,
         bool requires_grad) {
        return linspace(start, end, steps, options_of(dtype, device, requires_grad));
      },
      nb::arg("start"), nb::arg("end"), nb::arg("steps"), nb::kw_only(),
      nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
      nb::arg("requires_grad") = false);
  m.def(
      "eye",
      [](int64_t n, std::optional<int64_t> cols, OptDType dtype, OptDevice device,
         bool requires_grad) {
        return eye(n, cols.value_or(n), options_of(dtype, device, requires_grad));
      },
      nb::arg("n"), nb::arg("m") = nb::none(), nb::kw_only(), nb::arg("dtype") = nb::none(),
      nb::arg("device") = nb::none(), nb::arg("requires_grad") = false);
  m.def(
      "randint",
      [](int64_t low, int64_t high, const Shape& size, OptDType dtype, OptDevice device) {
        return randint(low, high, size, options_of(dtype, device, false, DType::i64));
      },
      nb::arg("low"), nb::arg("high"), nb::arg("size"), nb::kw_only(),
      nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  // zeros_like, ones_like, empty_like: input's shape, and its dtype and device unless given.
  for (const auto& [name, make] : {std::pair{"zeros_like", &zeros}, std::pair{"ones_like", &ones},
                                   std::pair{"empty_like", &empty}}) {
    m.def(
        name,
        [make](const Tensor& t, OptDType dtype, OptDevice device, bool requires_grad) {
          TensorOptions o = options_of(dtype, device, requires_grad, t.dtype());
          if (device.is_none()) o.device = t.device();
          return make(t.shape(), o);
        },
        nb::arg("input"), nb::kw_only(), nb::arg("dtype") = nb::none(),
        nb::arg("device") = nb::none(), nb::arg("requires_grad") = false);
  }
  m.def(
      "manual_seed", [](uint64_t seed) { manual_seed(seed); }, nb::arg("seed"));
  // sinter.tensor()'s last step (python/sinter/_tensor_data.py reads the nested data): flat
  // values, in f64 or i64 as they came, into a tensor of `shape`.
  m.def(
      "_from_flat",
      [](const std::vector<double>& floats, const std::vector<int64_t>& ints, const Shape& shape,
         PyDType dtype, OptDevice device, bool requires_grad) {
        Tensor t = ints.empty() && !floats.empty() ? from_vector<double>(floats, shape).to(dtype.t)
                                                   : from_vector<int64_t>(ints, shape).to(dtype.t);
        t = t.to(device_of(device).value_or(Device::cpu()));
        if (requires_grad) t.requires_grad_(true);
        return t;
      },
      nb::arg("floats"), nb::arg("ints"), nb::arg("shape"), nb::arg("dtype"),
      nb::arg("device") = nb::none(), nb::arg("requires_grad") = false);
}

}  // namespace sinter::python

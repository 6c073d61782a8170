// sinter.dtype and sinter.device as PyTorch names them, and the conversions the other bindings
// share: Python numbers as Scalars, factory options.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>

#include "bind.h"

namespace sinter::python {

DType dtype_or(const std::optional<PyDType>& d, DType fallback) { return d ? d->t : fallback; }

std::optional<Scalar> scalar_of(nb::handle h) {
  if (PyBool_Check(h.ptr())) return Scalar(h.ptr() == Py_True);
  if (PyLong_Check(h.ptr())) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
    SINTER_CHECK(overflow == 0, "Python int ", nb::cast<std::string>(nb::str(h)),
                 " is out of the range of int64");
    return Scalar(static_cast<int64_t>(v));
  }
  if (PyFloat_Check(h.ptr())) return Scalar(PyFloat_AsDouble(h.ptr()));
  return std::nullopt;
}

void check_fits(DType t, const Scalar& v, const char* op) {
  if (is_floating(t) || t == DType::b8) return;
  const double lo = t == DType::u8 ? 0.0 : t == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
  const double hi = t == DType::u8 ? 255.0 : t == DType::i32 ? 2147483647.0 : 9223372036854775807.0;
  const double x = v.to_double();
  SINTER_CHECK(v.is_int() ? (t == DType::i64 || (x >= lo && x <= hi)) : (x >= lo && x < hi + 1.0),
               op, ": value ", v, " cannot be converted to type ", t, " without overflow");
}

Shape sizes_of(const nb::args& args, const char* op, const char* name) {
  nb::handle items = args;
  if (args.size() == 1 && !PyLong_Check(args[0].ptr()) && !PyIndex_Check(args[0].ptr())) {
    items = args[0];
    if (!PySequence_Check(items.ptr()) || PyUnicode_Check(items.ptr())) {
      throw nb::type_error((std::string(op) + "(): argument '" + name +
                            "' must be tuple of ints, not " +
                            nb::cast<std::string>(nb::type_name(items.type())))
                               .c_str());
    }
  }
  Shape s;
  int64_t pos = 0;
  for (nb::handle h : nb::iter(items)) {
    if (PyBool_Check(h.ptr()) || !PyIndex_Check(h.ptr())) {
      throw nb::type_error((std::string(op) + "(): argument '" + name +
                            "' must be tuple of ints, but found element of type " +
                            nb::cast<std::string>(nb::type_name(h.type())) + " at pos " +
                            std::to_string(pos))
                               .c_str());
    }
    s.push_back(nb::cast<int64_t>(nb::int_(h)));
    ++pos;
  }
  return s;
}

std::optional<Device> device_of(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  if (nb::isinstance<Device>(h)) return nb::cast<Device>(h);
  if (PyUnicode_Check(h.ptr())) return Device::parse(nb::cast<std::string>(h));
  throw nb::type_error("device must be a sinter.device or a string such as 'cuda:0'");
}

TensorOptions options_of(const std::optional<PyDType>& dtype, nb::handle device, bool requires_grad,
                         DType fallback) {
  return {.dtype = dtype_or(dtype, fallback),
          .device = device_of(device).value_or(Device::cpu()),
          .requires_grad = requires_grad};
}

namespace {

// PyTorch's name of each dtype, as sinter.<name>.
const char* torch_name(DType t) {
  switch (t) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::bf16:
      return "bfloat16";
    case DType::f16:
      return "float16";
    case DType::i64:
      return "int64";
    case DType::i32:
      return "int32";
    case DType::u8:
      return "uint8";
    case DType::b8:
      return "bool";
    case DType::f8e4m3:
      return "float8_e4m3fn";
    case DType::f8e5m2:
      return "float8_e5m2";
  }
  return "?";
}

}  // namespace

void bind_types(nb::module_& m) {
  nb::class_<PyDType>(m, "dtype", "A tensor's element type: sinter.float32, sinter.int64, ...")
      .def_prop_ro("is_floating_point", [](const PyDType& d) { return is_floating(d.t); })
      .def_prop_ro("itemsize", [](const PyDType& d) { return element_size(d.t); })
      .def("__repr__", [](const PyDType& d) { return std::string("sinter.") + torch_name(d.t); })
      .def(
          "__eq__",
          [](const PyDType& a, nb::handle b) -> nb::object {
            if (!nb::isinstance<PyDType>(b)) return nb::borrow(Py_NotImplemented);
            return nb::bool_(a.t == nb::cast<PyDType>(b).t);
          },
          nb::arg("other").none())
      .def("__hash__", [](const PyDType& d) { return static_cast<int>(d.t); });
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i64, DType::i32,
                  DType::u8, DType::b8, DType::f8e4m3, DType::f8e5m2}) {
    m.attr(torch_name(t)) = PyDType{t};
  }
  // PyTorch's other names for the same dtypes.
  m.attr("float") = PyDType{DType::f32};
  m.attr("double") = PyDType{DType::f64};
  m.attr("half") = PyDType{DType::f16};
  m.attr("long") = PyDType{DType::i64};
  m.attr("int") = PyDType{DType::i32};

  nb::class_<Device>(m, "device", "Where a tensor lives: sinter.device('cuda:0'), or that string.")
      .def(
          "__init__", [](Device* d, const std::string& s) { new (d) Device(Device::parse(s)); },
          nb::arg("type"))
      .def(
          "__init__",
          [](Device* d, const std::string& type, int index) {
            SINTER_CHECK(index >= 0, "device: index ", index, " is negative");
            new (d) Device(Device::parse(type + ":" + std::to_string(index)));
          },
          nb::arg("type"), nb::arg("index"))
      .def_prop_ro("type", [](const Device& d) { return d.is_cuda() ? "cuda" : "cpu"; })
      .def_prop_ro(
          "index",
          [](const Device& d) { return d.is_cuda() ? std::optional<int>(d.index) : std::nullopt; })
      .def("__repr__",
           [](const Device& d) {
             return d.is_cuda() ? "device(type='cuda', index=" + std::to_string(d.index) + ")"
                                : std::string("device(type='cpu')");
           })
      .def("__str__", &Device::str)
      .def(
          "__eq__",
          [](const Device& a, nb::handle b) -> nb::object {
            if (!nb::isinstance<Device>(b)) return nb::borrow(Py_NotImplemented);
            return nb::bool_(a == nb::cast<Device>(b));
          },
          nb::arg("other").none())
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 1024 + d.index; });
  nb::implicitly_convertible<std::string, Device>();

  // The 8-bit float conversions (Note [float8]) on lists, for the tests that hold them against
  // PyTorch's float8 dtypes: encode floats to codes ("e4m3" or "e5m2"; saturate: Transformer
  // Engine's clamp) and decode codes to floats.
  m.def(
      "_float8_encode",
      [](const std::vector<float>& values, const std::string& format, bool saturate) {
        SINTER_CHECK(format == "e4m3" || format == "e5m2", "_float8_encode: format must be e4m3 ",
                     "or e5m2, got ", format);
        std::vector<int> codes;
        for (float v : values) {
          if (format == "e4m3") {
            codes.push_back((saturate ? Float8E4M3::saturated(v) : Float8E4M3(v)).bits);
          } else {
            codes.push_back((saturate ? Float8E5M2::saturated(v) : Float8E5M2(v)).bits);
          }
        }
        return codes;
      },
      nb::arg("values"), nb::arg("format"), nb::arg("saturate") = false);
  m.def(
      "_float8_decode",
      [](const std::vector<int>& codes, const std::string& format) {
        SINTER_CHECK(format == "e4m3" || format == "e5m2", "_float8_decode: format must be e4m3 ",
                     "or e5m2, got ", format);
        std::vector<float> values;
        for (int c : codes) {
          SINTER_CHECK(c >= 0 && c < 256, "_float8_decode: code ", c, " is not in [0, 256)");
          const auto b = static_cast<uint8_t>(c);
          values.push_back(format == "e4m3" ? static_cast<float>(Float8E4M3::from_bits(b))
                                            : static_cast<float>(Float8E5M2::from_bits(b)));
        }
        return values;
      },
      nb::arg("codes"), nb::arg("format"));
}

Activation gelu_form_of(const std::string& approximate) {
  if (approximate == "none") return Activation::Gelu;
  if (approximate == "tanh") return Activation::GeluTanh;
  throw std::runtime_error("approximate argument must be either none or tanh.");
}

void to_factory(nn::Module& layer, nb::handle device, nb::handle dtype) {
  if (!dtype.is_none()) layer.to(nb::cast<PyDType>(dtype).t);
  if (std::optional<Device> d = device_of(device)) layer.to(*d);
}

void refuse_no_bias(const char* layer, bool bias) {
  if (!bias) {
    throw nb::value_error((std::string(layer) +
                           ": bias=False (a weight without a bias) is not supported; use "
                           "elementwise_affine/affine=False, or freeze the bias at zero")
                              .c_str());
  }
}

Size2 size2_of(nb::handle h) {
  if (PyLong_Check(h.ptr())) return Size2(nb::cast<int64_t>(h));
  const auto v = nb::cast<std::vector<int64_t>>(h);
  SINTER_CHECK(v.size() == 2, "expected an int or a pair of ints, got ", v.size(), " values");
  return Size2(v[0], v[1]);
}

Size3 size3_of(nb::handle h) {
  if (PyLong_Check(h.ptr())) return Size3(nb::cast<int64_t>(h));
  const auto v = nb::cast<std::vector<int64_t>>(h);
  SINTER_CHECK(v.size() == 3, "expected an int or three ints, got ", v.size(), " values");
  return Size3(v[0], v[1], v[2]);
}

Reduction reduction_of(const std::string& r) {
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (r == "none") return Reduction::None;
  if (r == "batchmean") return Reduction::BatchMean;
  throw nb::value_error((r + " is not a valid value for reduction").c_str());
}

Tensor or_undefined(const std::optional<Tensor>& t) { return t.value_or(Tensor()); }

std::shared_ptr<nb::object> keep_object(nb::object o) {
  return std::shared_ptr<nb::object>(new nb::object(std::move(o)), [](nb::object* p) {
    nb::gil_scoped_acquire gil;
    delete p;
  });
}

}  // namespace sinter::python

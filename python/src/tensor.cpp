// sinter.Tensor (sinter._C.Tensor): properties, Python's operators with PyTorch's scalar
// promotion, conversions, views and the common ops as methods. Printing is Python's
// (sinter/_formatting.py); indexing is indexing.cpp's; DLPack and NumPy are dlpack.cpp's.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bind.h"

namespace sinter::python {
namespace {

// a <op> b for a Tensor or Python number b; NotImplemented for anything else, so that Python tries
// b's reflected operator.
template <class WithTensor, class WithScalar>
nb::object binary(const Tensor& a, nb::handle b, WithTensor tt, WithScalar ts) {
  if (nb::isinstance<Tensor>(b)) return nb::cast(tt(a, nb::cast<const Tensor&>(b)));
  if (std::optional<Scalar> s = scalar_of(b)) return nb::cast(ts(a, *s));
  return nb::borrow(Py_NotImplemented);
}

// A Python number as a 0-dim tensor on a's device, in the dtype PyTorch gives it against a (for
// the reflected ops that have no (Scalar, Tensor) form).
Tensor wrapped(const Tensor& a, const Scalar& s) {
  return full({}, s, {.dtype = result_type(a, s), .device = a.device()});
}

nb::object item_of(const Tensor& t) {
  SINTER_CHECK(t.numel() == 1, "item: a Tensor with ", t.numel(),
               " elements cannot be converted to a Python scalar");
  if (t.dtype() == DType::b8) return nb::bool_(t.item<bool>());
  if (is_integral(t.dtype())) return nb::int_(t.to(DType::i64).item<int64_t>());
  return nb::float_(t.to(DType::f64).item<double>());
}

nb::object list_of(const Tensor& t) {
  if (t.dim() == 0) return item_of(t);
  nb::list out;
  for (int64_t i = 0; i < t.size(0); ++i) out.append(list_of(t.select(0, i)));
  return out;
}

// t.to(...): a device, a dtype, both, or another tensor's.
Tensor to_impl(const Tensor& t, nb::args args, bool non_blocking) {
  Tensor out = t;
  for (nb::handle h : args) {
    if (nb::isinstance<PyDType>(h)) {
      out = out.to(nb::cast<PyDType>(h).t);
    } else if (nb::isinstance<Tensor>(h)) {
      const auto& o = nb::cast<const Tensor&>(h);
      out = out.to(o.device(), non_blocking).to(o.dtype());
    } else {
      const std::optional<Device> d = device_of(h);
      SINTER_CHECK(d.has_value(), "to: None is not a device or dtype");
      out = out.to(*d, non_blocking);
    }
  }
  return out;
}

std::vector<int64_t> dims_of(const std::optional<nb::object>& dim) {
  if (!dim || dim->is_none()) return {};
  if (PyLong_Check(dim->ptr())) return {nb::cast<int64_t>(*dim)};
  return nb::cast<std::vector<int64_t>>(*dim);
}

void bind_operators(nb::class_<Tensor>& c) {
  using S = const Scalar&;
  using T = const Tensor&;
// py(a, b) = fn(a, b) and its reflection rpy(a, b) = fn(b, a), b a tensor or a Python number;
// `reflected` is the reflection's value for a number y and the tensor x.
#define SINTER_PY_BINARY_(py, rpy, fn, reflected)                                     \
  c.def(py, [](T a, nb::handle b) {                                                   \
    return binary(                                                                    \
        a, b, [](T x, T y) { return fn(x, y); }, [](T x, S y) { return fn(x, y); });  \
  });                                                                                 \
  c.def(rpy, [](T a, nb::handle b) {                                                  \
    return binary(                                                                    \
        a, b, [](T x, T y) { return fn(y, x); }, [](T x, S y) { return reflected; }); \
  });
  SINTER_PY_BINARY_("__add__", "__radd__", add, add(x, y))
  SINTER_PY_BINARY_("__sub__", "__rsub__", sub, sub(y, x))
  SINTER_PY_BINARY_("__mul__", "__rmul__", mul, mul(x, y))
  SINTER_PY_BINARY_("__truediv__", "__rtruediv__", div, div(y, x))
  SINTER_PY_BINARY_("__floordiv__", "__rfloordiv__", floor_divide, floor_divide(wrapped(x, y), x))
  SINTER_PY_BINARY_("__mod__", "__rmod__", remainder, remainder(y, x))
  SINTER_PY_BINARY_("__pow__", "__rpow__", pow, pow(y, x))
#undef SINTER_PY_BINARY_
  c.def("__matmul__", [](T a, T b) { return matmul(a, b); })
      .def("__neg__", [](T a) { return neg(a); })
      .def("__pos__", [](T a) { return a; })
      .def("__abs__", [](T a) { return abs(a); });
// Comparisons take None and other objects too (NotImplemented: Python then compares identity).
#define SINTER_PY_COMPARISON_(name, py)                                                      \
  c.def(                                                                                     \
      py,                                                                                    \
      [](T a, nb::handle b) {                                                                \
        return binary(                                                                       \
            a, b, [](T x, T y) { return name(x, y); }, [](T x, S y) { return name(x, y); }); \
      },                                                                                     \
      nb::arg("other").none());
  SINTER_PY_COMPARISON_(eq, "__eq__")
  SINTER_PY_COMPARISON_(ne, "__ne__")
  SINTER_PY_COMPARISON_(lt, "__lt__")
  SINTER_PY_COMPARISON_(le, "__le__")
  SINTER_PY_COMPARISON_(gt, "__gt__")
  SINTER_PY_COMPARISON_(ge, "__ge__")
#undef SINTER_PY_COMPARISON_
  // Defining __eq__ makes a class unhashable; PyTorch hashes tensors by identity.
  c.def("__hash__", [](T a) { return reinterpret_cast<intptr_t>(a.impl()); });
}

// An in-place result of dtype `result` must not rise above a's category (float into an integer
// tensor, anything but bool into bool), as PyTorch refuses it.
void check_fits_in_place(const Tensor& a, DType result, const char* op) {
  const bool fits =
      a.dtype() == DType::b8 ? result == DType::b8 : is_floating(a.dtype()) || is_integral(result);
  SINTER_CHECK(fits, op, ": result type ", result, " can't be cast to the desired output type ",
               a.dtype());
}

// The result of an in-place op, f(a) computed out of place, written into a, whose dtype it keeps
// (recorded by autograd per Note [in-place autograd]).
Tensor& write_back(Tensor& a, const std::function<Tensor(const Tensor&)>& f, const char* op) {
  return autograd::in_place(
      a,
      [&](const Tensor& x) {
        Tensor r = f(x);
        check_fits_in_place(a, r.dtype(), op);
        return r;
      },
      op);
}

void bind_in_place_operators(nb::class_<Tensor>& c) {
  using S = const Scalar&;
  using T = const Tensor&;
  using Self = nb::pointer_and_handle<Tensor>;
// a op= b for a Tensor or Python number b: a itself, changed.
#define SINTER_PY_IN_PLACE_(py, fn)                                                         \
  c.def(py, [](Self self, nb::handle b) -> nb::object {                                     \
    if (!nb::isinstance<Tensor>(b) && !scalar_of(b)) return nb::borrow(Py_NotImplemented);  \
    write_back(                                                                             \
        *self.p,                                                                            \
        [&](T x) {                                                                          \
          return nb::cast<Tensor>(binary(                                                   \
              x, b, [](T u, T v) { return fn(u, v); }, [](T u, S v) { return fn(u, v); })); \
        },                                                                                  \
        py);                                                                                \
    return nb::borrow(self.h);                                                              \
  });
  SINTER_PY_IN_PLACE_("__iadd__", add)
  SINTER_PY_IN_PLACE_("__isub__", sub)
  SINTER_PY_IN_PLACE_("__imul__", mul)
  SINTER_PY_IN_PLACE_("__itruediv__", div)
  SINTER_PY_IN_PLACE_("__ifloordiv__", floor_divide)
  SINTER_PY_IN_PLACE_("__imod__", remainder)
  SINTER_PY_IN_PLACE_("__ipow__", pow)
  SINTER_PY_IN_PLACE_("__iand__", bitwise_and)
  SINTER_PY_IN_PLACE_("__ior__", bitwise_or)
  SINTER_PY_IN_PLACE_("__ixor__", bitwise_xor)
#undef SINTER_PY_IN_PLACE_
  // ~, &, | and ^ of integer and bool tensors (and Python ints and bools), as PyTorch's.
  c.def("__invert__", [](T a) { return bitwise_not(a); });
#define SINTER_PY_BITWISE_(py, rpy, fn)                                               \
  c.def(py, [](T a, nb::handle b) {                                                   \
     return binary(                                                                   \
         a, b, [](T x, T y) { return fn(x, y); }, [](T x, S y) { return fn(x, y); }); \
   }).def(rpy, [](T a, nb::handle b) {                                                \
    return binary(                                                                    \
        a, b, [](T x, T y) { return fn(y, x); }, [](T x, S y) { return fn(x, y); });  \
  });
  SINTER_PY_BITWISE_("__and__", "__rand__", bitwise_and)
  SINTER_PY_BITWISE_("__or__", "__ror__", bitwise_or)
  SINTER_PY_BITWISE_("__xor__", "__rxor__", bitwise_xor)
#undef SINTER_PY_BITWISE_
}

void bind_properties(nb::class_<Tensor>& c) {
  c.def_prop_ro("shape", [](const Tensor& t) { return nb::tuple(nb::cast(t.shape())); })
      .def(
          "size",
          [](const Tensor& t, std::optional<int64_t> dim) -> nb::object {
            if (dim) return nb::int_(t.size(*dim));
            return nb::tuple(nb::cast(t.shape()));
          },
          nb::arg("dim") = nb::none())
      .def("stride", [](const Tensor& t) { return nb::tuple(nb::cast(t.strides())); })
      .def_prop_ro("dtype", [](const Tensor& t) { return PyDType{t.dtype()}; })
      .def_prop_ro("device", &Tensor::device)
      .def_prop_ro("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("element_size", [](const Tensor& t) { return element_size(t.dtype()); })
      .def("storage_offset", &Tensor::storage_offset)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def_prop_ro("is_cuda", &Tensor::is_cuda)
      .def_prop_ro("is_leaf", &Tensor::is_leaf)
      .def("is_floating_point", [](const Tensor& t) { return is_floating(t.dtype()); })
      .def("__len__",
           [](const Tensor& t) {
             if (t.dim() == 0) throw nb::type_error("len() of a 0-d tensor");
             return t.size(0);
           })
      .def("item", &item_of)
      .def("tolist", &list_of)
      .def("__bool__", [](const Tensor& t) { return nb::cast<bool>(item_of(t)); })
      .def("__float__", [](const Tensor& t) { return nb::cast<double>(nb::float_(item_of(t))); })
      .def("__int__", [](const Tensor& t) { return nb::cast<int64_t>(nb::int_(item_of(t))); })
      .def("__index__", [](const Tensor& t) {
        if (!is_integral(t.dtype()) || t.dtype() == DType::b8 || t.numel() != 1) {
          throw nb::type_error(
              "only integer tensors of a single element can be converted to an "
              "index");
        }
        return t.to(DType::i64).item<int64_t>();
      });
}

void bind_conversions(nb::class_<Tensor>& c) {
  c.def("to", &to_impl, nb::arg("args"), nb::kw_only(), nb::arg("non_blocking") = false)
      .def("cpu", &Tensor::cpu)
      .def(
          "cuda", [](const Tensor& t, int index, bool) { return t.cuda(index); },
          nb::arg("device") = 0, nb::arg("non_blocking") = false)
      .def("float", [](const Tensor& t) { return t.to(DType::f32); })
      .def("double", [](const Tensor& t) { return t.to(DType::f64); })
      .def("half", [](const Tensor& t) { return t.to(DType::f16); })
      .def("bfloat16", [](const Tensor& t) { return t.to(DType::bf16); })
      .def("long", [](const Tensor& t) { return t.to(DType::i64); })
      .def("int", [](const Tensor& t) { return t.to(DType::i32); })
      .def("bool", [](const Tensor& t) { return t.to(DType::b8); })
      .def("type_as", [](const Tensor& t, const Tensor& o) { return t.to(o.dtype()); })
      .def("contiguous", &Tensor::contiguous)
      .def("clone", &Tensor::clone)
      .def("detach", &Tensor::detach);
}

void bind_views(nb::class_<Tensor>& c) {
  c.def("reshape",
        [](const Tensor& t, nb::args s) { return t.reshape(sizes_of(s, "reshape", "shape")); })
      .def("view", [](const Tensor& t, nb::args s) { return t.view(sizes_of(s, "view", "size")); })
      .def("expand",
           [](const Tensor& t, nb::args s) { return t.expand(sizes_of(s, "expand", "size")); })
      .def("permute",
           [](const Tensor& t, nb::args s) { return t.permute(sizes_of(s, "permute", "dims")); })
      .def("flatten", &Tensor::flatten, nb::arg("start_dim") = 0, nb::arg("end_dim") = -1)
      .def(
          "squeeze",
          [](const Tensor& t, std::optional<int64_t> dim) {
            return dim ? t.squeeze(*dim) : t.squeeze();
          },
          nb::arg("dim") = nb::none())
      .def("unsqueeze", &Tensor::unsqueeze, nb::arg("dim"))
      .def("transpose", &Tensor::transpose, nb::arg("dim0"), nb::arg("dim1"))
      .def("t", &Tensor::t)
      .def_prop_ro("T",
                   [](const Tensor& t) {
                     std::vector<int64_t> dims;
                     for (int64_t d = t.dim() - 1; d >= 0; --d) dims.push_back(d);
                     return t.permute(dims);
                   })
      .def("narrow", &Tensor::narrow, nb::arg("dim"), nb::arg("start"), nb::arg("length"))
      .def("select", &Tensor::select, nb::arg("dim"), nb::arg("index"))
      .def("expand_as", &Tensor::expand_as)
      .def("view_as", [](const Tensor& t, const Tensor& o) { return t.view(o.shape()); })
      .def("reshape_as", [](const Tensor& t, const Tensor& o) { return t.reshape(o.shape()); });
}

// Whether dim is an empty tuple or list: all and any over no dims (each element's own truth).
bool no_dims(const std::optional<nb::object>& dim) {
  return dim && !dim->is_none() && !PyLong_Check(dim->ptr()) && nb::len(*dim) == 0;
}
// Each element's truth as all and any over no dims give it: bool, u8 for a u8 tensor.
Tensor truth_of(const Tensor& a) {
  const Tensor t = logical_not(logical_not(a));
  return a.dtype() == DType::u8 ? t.to(DType::u8) : t;
}

// The logic, bitwise and NaN-aware methods of sinter/ops_math.h with two operands or options.
void bind_logic(nb::class_<Tensor>& c) {
  using S = const Scalar&;
  using T = const Tensor&;
  using D = std::optional<nb::object>;
#define SINTER_PY_PAIR_(name) \
  c.def(                      \
      #name, [](T a, T b) { return name(a, b); }, nb::arg("other"));
  SINTER_PY_PAIR_(logical_and)
  SINTER_PY_PAIR_(logical_or)
  SINTER_PY_PAIR_(logical_xor)
  SINTER_PY_PAIR_(logaddexp)
  SINTER_PY_PAIR_(logaddexp2)
#undef SINTER_PY_PAIR_
#define SINTER_PY_BITWISE_(name)                                                             \
  c.def(                                                                                     \
      #name,                                                                                 \
      [](T a, nb::handle b) {                                                                \
        nb::object r = binary(                                                               \
            a, b, [](T x, T y) { return name(x, y); }, [](T x, S y) { return name(x, y); }); \
        if (r.is(nb::handle(Py_NotImplemented))) {                                           \
          throw nb::type_error(#name ": other must be a tensor or a number");                \
        }                                                                                    \
        return r;                                                                            \
      },                                                                                     \
      nb::arg("other"));
  SINTER_PY_BITWISE_(bitwise_and)
  SINTER_PY_BITWISE_(bitwise_or)
  SINTER_PY_BITWISE_(bitwise_xor)
#undef SINTER_PY_BITWISE_
  c.def(
       "xlogy",
       [](T a, nb::handle b) {
         if (nb::isinstance<Tensor>(b)) return xlogy(a, nb::cast<const Tensor&>(b));
         const std::optional<Scalar> s = scalar_of(b);
         if (!s) throw nb::type_error("xlogy: other must be a tensor or a number");
         // The number in the floating dtype the op computes in, not narrowed to a's integers.
         const DType t = result_type(a, *s);
         return xlogy(
             a, full({}, *s, {.dtype = is_floating(t) ? t : DType::f32, .device = a.device()}));
       },
       nb::arg("other"))
      .def(
          "logit", [](T a, std::optional<double> eps) { return logit(a, eps); },
          nb::arg("eps") = nb::none())
      .def(
          "nan_to_num",
          [](T a, std::optional<double> nan, std::optional<double> posinf,
             std::optional<double> neginf) {
            return nan_to_num(a, nan.value_or(0.0), posinf, neginf);
          },
          nb::arg("nan") = 0.0, nb::arg("posinf") = nb::none(), nb::arg("neginf") = nb::none())
      .def(
          "all",
          [](T a, D dim, bool keepdim) {
            return no_dims(dim) ? truth_of(a) : all(a, dims_of(dim), keepdim);
          },
          nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "any",
          [](T a, D dim, bool keepdim) {
            return no_dims(dim) ? truth_of(a) : any(a, dims_of(dim), keepdim);
          },
          nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "count_nonzero", [](T a, D dim) { return count_nonzero(a, dims_of(dim)); },
          nb::arg("dim") = nb::none());
}

// torch's interpolation names of quantile.
QuantileInterpolation quantile_interpolation(const char* op, const std::string& name) {
  if (name == "linear") return QuantileInterpolation::Linear;
  if (name == "lower") return QuantileInterpolation::Lower;
  if (name == "higher") return QuantileInterpolation::Higher;
  if (name == "nearest") return QuantileInterpolation::Nearest;
  if (name == "midpoint") return QuantileInterpolation::Midpoint;
  SINTER_THROW(op,
               ": interpolation must be one of linear, lower, higher, midpoint or nearest, got '",
               name, "'");
}

// The composed conveniences of sinter/ops_tensor.h.
void bind_compose(nb::class_<Tensor>& c) {
  using T = const Tensor&;
  using D = std::optional<nb::object>;
  c.def("repeat", [](T t, nb::args s) { return repeat(t, sizes_of(s, "repeat", "repeats")); })
      .def("tile", [](T t, nb::args s) { return tile(t, sizes_of(s, "tile", "dims")); })
      .def("broadcast_to",
           [](T t, nb::args s) { return broadcast_to(t, sizes_of(s, "broadcast_to", "size")); })
      .def(
          "movedim",
          [](T t, nb::object source, nb::object destination) {
            return movedim(t, dims_of(source), dims_of(destination));
          },
          nb::arg("source"), nb::arg("destination"))
      .def(
          "masked_select", [](T t, T mask) { return masked_select(t, mask); }, nb::arg("mask"))
      .def(
          "diff",
          [](T t, int64_t n, int64_t dim, std::optional<Tensor> prepend,
             std::optional<Tensor> append) {
            return diff(t, n, dim, prepend.value_or(Tensor()), append.value_or(Tensor()));
          },
          nb::arg("n") = 1, nb::arg("dim") = -1, nb::arg("prepend") = nb::none(),
          nb::arg("append") = nb::none())
      .def(
          "outer", [](T a, T b) { return outer(a, b); }, nb::arg("vec2"))
      .def(
          "dot", [](T a, T b) { return dot(a, b); }, nb::arg("tensor"))
      .def(
          "mv", [](T a, T b) { return mv(a, b); }, nb::arg("vec"))
      .def(
          "addmm",
          [](T input, T m1, T m2, double beta, double alpha) {
            return addmm(input, m1, m2, beta, alpha);
          },
          nb::arg("mat1"), nb::arg("mat2"), nb::kw_only(), nb::arg("beta") = 1.0,
          nb::arg("alpha") = 1.0)
      .def("trace", [](T a) { return trace(a); })
      .def(
          "nansum", [](T t, D dim, bool keepdim) { return nansum(t, dims_of(dim), keepdim); },
          nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "nanmean", [](T t, D dim, bool keepdim) { return nanmean(t, dims_of(dim), keepdim); },
          nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "kthvalue",
          [](T t, int64_t k, int64_t dim, bool keepdim) { return kthvalue(t, k, dim, keepdim); },
          nb::arg("k"), nb::arg("dim") = -1, nb::arg("keepdim") = false);
#define SINTER_PY_MEDIAN_(name)                                                   \
  c.def(                                                                          \
      #name,                                                                      \
      [](T t, std::optional<int64_t> dim, bool keepdim) -> nb::object {           \
        if (!dim && keepdim) throw nb::type_error(#name ": keepdim needs a dim"); \
        if (!dim) return nb::cast(name(t));                                       \
        return nb::cast(name(t, *dim, keepdim));                                  \
      },                                                                          \
      nb::arg("dim") = nb::none(), nb::arg("keepdim") = false);
  SINTER_PY_MEDIAN_(median)
  SINTER_PY_MEDIAN_(nanmedian)
#undef SINTER_PY_MEDIAN_
#define SINTER_PY_QUANTILE_(name)                                                           \
  c.def(                                                                                    \
      #name,                                                                                \
      [](T t, nb::handle q, std::optional<int64_t> dim, bool keepdim,                       \
         const std::string& interpolation) {                                                \
        const QuantileInterpolation how = quantile_interpolation(#name, interpolation);     \
        if (nb::isinstance<Tensor>(q)) {                                                    \
          return name(t, nb::cast<const Tensor&>(q), dim, keepdim, how);                    \
        }                                                                                   \
        return name(t, nb::cast<double>(q), dim, keepdim, how);                             \
      },                                                                                    \
      nb::arg("q"), nb::arg("dim") = nb::none(), nb::arg("keepdim") = false, nb::kw_only(), \
      nb::arg("interpolation") = "linear");
  SINTER_PY_QUANTILE_(quantile)
  SINTER_PY_QUANTILE_(nanquantile)
#undef SINTER_PY_QUANTILE_
}

void bind_unary(nb::class_<Tensor>& c);

void bind_math(nb::class_<Tensor>& c) {
  using T = const Tensor&;
  using D = std::optional<nb::object>;
  c.def(
       "sum", [](T t, D dim, bool keepdim) { return sum(t, dims_of(dim), keepdim); },
       nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "mean", [](T t, D dim, bool keepdim) { return mean(t, dims_of(dim), keepdim); },
          nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "var",
          [](T t, D dim, int64_t correction, bool keepdim) {
            return var(t, dims_of(dim), correction, keepdim);
          },
          nb::arg("dim") = nb::none(), nb::kw_only(), nb::arg("correction") = 1,
          nb::arg("keepdim") = false)
      .def(
          "prod",
          [](T t, std::optional<int64_t> dim, bool keepdim) {
            return dim ? prod(t, *dim, keepdim) : prod(t);
          },
          nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "cumsum", [](T t, int64_t dim) { return cumsum(t, dim); }, nb::arg("dim"))
      .def(
          "cumprod", [](T t, int64_t dim) { return cumprod(t, dim); }, nb::arg("dim"))
      .def(
          "max",
          [](T t, std::optional<int64_t> dim, bool keepdim) -> nb::object {
            if (!dim) return nb::cast(max(t));
            return nb::cast(max(t, *dim, keepdim));
          },
          nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "min",
          [](T t, std::optional<int64_t> dim, bool keepdim) -> nb::object {
            if (!dim) return nb::cast(min(t));
            return nb::cast(min(t, *dim, keepdim));
          },
          nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "argmax", [](T t, int64_t dim, bool keepdim) { return argmax(t, dim, keepdim); },
          nb::arg("dim"), nb::arg("keepdim") = false)
      .def(
          "argmin", [](T t, int64_t dim, bool keepdim) { return argmin(t, dim, keepdim); },
          nb::arg("dim"), nb::arg("keepdim") = false)
      .def(
          "amax", [](T t, D dim, bool keepdim) { return amax(t, dims_of(dim), keepdim); },
          nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "amin", [](T t, D dim, bool keepdim) { return amin(t, dims_of(dim), keepdim); },
          nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "softmax", [](T t, int64_t dim) { return softmax(t, dim); }, nb::arg("dim"))
      .def(
          "log_softmax", [](T t, int64_t dim) { return log_softmax(t, dim); }, nb::arg("dim"))
      .def(
          "clamp",
          [](T t, nb::handle lo, nb::handle hi) {
            if (nb::isinstance<Tensor>(lo) || nb::isinstance<Tensor>(hi)) {
              // Tensor bounds (a number beside one as a 0-d tensor of its dtype against t).
              const auto bound = [&t](nb::handle h) {
                if (h.is_none()) return Tensor();
                if (nb::isinstance<Tensor>(h)) return nb::cast<Tensor>(h);
                const std::optional<Scalar> s = scalar_of(h);
                if (!s) throw nb::type_error("clamp: min and max must be tensors or numbers");
                return wrapped(t, *s);
              };
              return clamp(t, bound(lo), bound(hi));
            }
            // Python numbers keep their kind: an integer tensor clamped by ints stays integer.
            return clamp(t, scalar_of(lo), scalar_of(hi));
          },
          nb::arg("min").none() = nb::none(), nb::arg("max").none() = nb::none())
      .def("matmul", [](T a, T b) { return matmul(a, b); })
      .def("pow", [](T t, nb::handle e) {
        return binary(
            t, e, [](T x, T y) { return pow(x, y); },
            [](T x, const Scalar& y) { return pow(x, y); });
      });
  bind_unary(c);
  bind_logic(c);
  bind_compose(c);
}

// The ops of one tensor as methods, with torch's names.
void bind_unary(nb::class_<Tensor>& c) {
  using T = const Tensor&;
#define SINTER_PY_UNARY_(name) c.def(#name, [](T t) { return name(t); });
  SINTER_PY_UNARY_(exp)
  SINTER_PY_UNARY_(log)
  SINTER_PY_UNARY_(sqrt)
  SINTER_PY_UNARY_(rsqrt)
  SINTER_PY_UNARY_(abs)
  SINTER_PY_UNARY_(neg)
  SINTER_PY_UNARY_(sign)
  SINTER_PY_UNARY_(sin)
  SINTER_PY_UNARY_(cos)
  SINTER_PY_UNARY_(tanh)
  SINTER_PY_UNARY_(sigmoid)
  SINTER_PY_UNARY_(relu)
  SINTER_PY_UNARY_(erf)
  SINTER_PY_UNARY_(erfinv)
  SINTER_PY_UNARY_(lgamma)
  SINTER_PY_UNARY_(digamma)
  SINTER_PY_UNARY_(expm1)
  SINTER_PY_UNARY_(log1p)
  SINTER_PY_UNARY_(floor)
  SINTER_PY_UNARY_(ceil)
  SINTER_PY_UNARY_(trunc)
  SINTER_PY_UNARY_(frac)
  SINTER_PY_UNARY_(tan)
  SINTER_PY_UNARY_(asin)
  SINTER_PY_UNARY_(acos)
  SINTER_PY_UNARY_(atan)
  SINTER_PY_UNARY_(sinh)
  SINTER_PY_UNARY_(cosh)
  SINTER_PY_UNARY_(asinh)
  SINTER_PY_UNARY_(acosh)
  SINTER_PY_UNARY_(atanh)
  SINTER_PY_UNARY_(log2)
  SINTER_PY_UNARY_(log10)
  SINTER_PY_UNARY_(exp2)
  SINTER_PY_UNARY_(reciprocal)
  SINTER_PY_UNARY_(deg2rad)
  SINTER_PY_UNARY_(rad2deg)
  SINTER_PY_UNARY_(isnan)
  SINTER_PY_UNARY_(isinf)
  SINTER_PY_UNARY_(isposinf)
  SINTER_PY_UNARY_(isneginf)
  SINTER_PY_UNARY_(isfinite)
  SINTER_PY_UNARY_(logical_not)
  SINTER_PY_UNARY_(bitwise_not)
#undef SINTER_PY_UNARY_
  c.def("fix", [](T t) { return trunc(t); });
  c.def(
      "round", [](T t, int64_t decimals) { return round(t, decimals); }, nb::kw_only(),
      nb::arg("decimals") = 0);
}

void bind_in_place(nb::class_<Tensor>& c) {
  c.def(
       "zero_", [](Tensor& t) -> Tensor& { return t.zero_(); }, nb::rv_policy::reference)
      .def(
          "fill_",
          [](Tensor& t, nb::handle v) -> Tensor& {
            std::optional<Scalar> s = scalar_of(v);
            if (!s) s = nb::cast<Tensor>(v).item<double>();
            check_fits(t.dtype(), *s, "fill_");
            return t.fill_(*s);
          },
          nb::rv_policy::reference)
      .def(
          "copy_",
          // non_blocking is taken for torch's callers: the copy completes before it returns.
          [](Tensor& t, const Tensor& src, bool) -> Tensor& { return t.copy_(src); },
          nb::arg("src"), nb::arg("non_blocking") = false, nb::rv_policy::reference)
      .def(
          "add_",
          [](Tensor& t, nb::handle other, double alpha) -> Tensor& {
            SINTER_CHECK(
                is_floating(t.dtype()) || (std::isfinite(alpha) && alpha == std::trunc(alpha)),
                "add_: for integral input tensors, argument alpha must not be a "
                "floating point number, got ",
                alpha);
            if (std::optional<Scalar> s = scalar_of(other)) {
              check_fits_in_place(t, result_type(t, *s), "add_");
              if (alpha == 1.0) return t.add_(*s);
              const bool exact =
                  s->is_integral() && alpha == static_cast<double>(static_cast<int64_t>(alpha));
              return t.add_(exact ? Scalar(s->to_int() * static_cast<int64_t>(alpha))
                                  : Scalar(s->to_double() * alpha));
            }
            const Tensor& o = nb::cast<const Tensor&>(other);
            check_fits_in_place(t, result_type(t, o), "add_");
            return t.add_(o.dtype() == t.dtype() ? o : o.to(t.dtype()), alpha);
          },
          nb::arg("other"), nb::kw_only(), nb::arg("alpha") = 1.0, nb::rv_policy::reference)
      .def(
          "_in_place",
          // x._in_place(f, name): f(x) written into x (Note [in-place autograd]); the in-place
          // methods written in Python use it.
          [](Tensor& t, const nb::callable& f, const std::string& name) -> Tensor& {
            return autograd::in_place(
                t, [&](const Tensor& x) { return nb::cast<Tensor>(f(x)); }, name.c_str());
          },
          nb::arg("fn"), nb::arg("name"), nb::rv_policy::reference)
      .def("_records_in_place", [](const Tensor& t) { return autograd::records_in_place(t); })
      .def(
          "_check_in_place",
          // Refuses, naming `name`, a recorded write into a leaf that requires grad or a view of
          // one (Note [in-place autograd]).
          [](const Tensor& t, const std::string& name) {
            if (autograd::records_in_place(t)) autograd::check_in_place_target(name.c_str(), t);
          },
          nb::arg("name"))
      .def(
          "mul_",
          [](Tensor& t, nb::handle other) -> Tensor& {
            if (std::optional<Scalar> s = scalar_of(other)) {
              check_fits_in_place(t, result_type(t, *s), "mul_");
              return t.mul_(*s);
            }
            const Tensor& o = nb::cast<const Tensor&>(other);
            check_fits_in_place(t, result_type(t, o), "mul_");
            return t.mul_(o.dtype() == t.dtype() ? o : o.to(t.dtype()));
          },
          nb::rv_policy::reference);
}

}  // namespace

void bind_tensor(nb::module_& m) {
  nb::class_<Tensor> c(m, "Tensor", "A tensor: sinter's, with PyTorch's names and behaviour.");
  // Tensor(t): another handle on t's tensor (what sinter.nn.Parameter, a subclass, is made from).
  c.def(nb::init<const Tensor&>(), nb::arg("data"));
  bind_properties(c);
  bind_operators(c);
  bind_in_place_operators(c);
  bind_conversions(c);
  bind_views(c);
  bind_math(c);
  bind_in_place(c);
  bind_indexing(c);
  bind_dlpack(m, c);
  bind_autograd(m, c);
  bind_ops(m, c);
  c.def("_str", &Tensor::str);
}

}  // namespace sinter::python

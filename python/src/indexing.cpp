// Tensor.__getitem__ and __setitem__ with PyTorch's rules: integers select, slices (positive
// steps) narrow, None adds a dim, ... stands for the dims not named; and one advanced index, an
// integer tensor or list (index_select along its dim, its shape in that dim's place) or a bool mask
// over the dims it covers. Basic indexing gives views; advanced indexing copies.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bind.h"

namespace sinter::python {
namespace {

std::optional<int64_t> slice_part(nb::handle part) {
  if (part.is_none()) return std::nullopt;
  return nb::cast<int64_t>(part);
}

bool is_advanced(nb::handle h) { return nb::isinstance<Tensor>(h) || PyList_Check(h.ptr()); }

// An advanced index as a tensor on `device`: a tensor, or a (nested) list of ints or bools made
// into one as sinter.tensor makes it.
Tensor index_tensor(nb::handle h, const Device& device) {
  if (nb::isinstance<Tensor>(h)) return nb::cast<Tensor>(h).to(device);
  return nb::cast<Tensor>(nb::module_::import_("sinter").attr("tensor")(h)).to(device);
}

// The items of a key, each with the number of dims it consumes.
std::vector<nb::handle> items_of(nb::handle key) {
  std::vector<nb::handle> items;
  if (PyTuple_Check(key.ptr())) {
    for (nb::handle h : nb::borrow<nb::tuple>(key)) items.push_back(h);
  } else {
    items.push_back(key);
  }
  return items;
}

int64_t dims_used(nb::handle h) {
  if (h.is_none() || h.ptr() == Py_Ellipsis) return 0;
  if (nb::isinstance<Tensor>(h)) {
    const auto& t = nb::cast<const Tensor&>(h);
    return t.dtype() == DType::b8 ? t.dim() : 1;
  }
  return 1;
}

// t indexed by one advanced index at dim d.
Tensor advanced(const Tensor& t, int64_t d, const Tensor& index) {
  if (index.dtype() == DType::b8) {
    const int64_t k = index.dim();
    SINTER_CHECK(k >= 1, "index: a 0-dim bool tensor as an index is not supported");
    SINTER_CHECK(d + k <= t.dim(), "index: a mask of ", index.dim(), " dims at dim ", d,
                 " of a tensor with ", t.dim(), " dims");
    Shape covered(t.shape().begin() + d, t.shape().begin() + d + k);
    const Tensor& mask = index;
    SINTER_CHECK(mask.shape() == covered, "index: the shape of the mask ", shape_str(mask.shape()),
                 " does not match the shape of the indexed tensor ", shape_str(covered), " at dim ",
                 d);
    // The mask's true positions, row-major, as flat indices into the covered dims.
    const Tensor flat_positions = nonzero(mask.reshape({-1})).reshape({-1});
    Shape merged(t.shape().begin(), t.shape().begin() + d);
    merged.push_back(-1);
    merged.insert(merged.end(), t.shape().begin() + d + k, t.shape().end());
    return index_select(t.reshape(merged), d, flat_positions);
  }
  SINTER_CHECK(is_integral(index.dtype()),
               "index: tensors used as indices must be long, int, "
               "byte or bool tensors, got ",
               index.dtype());
  const Tensor flat = index.to(DType::i64).reshape({-1});
  const int64_t n = t.size(d);
  const Tensor wrapped = where(lt(flat, 0), add(flat, n), flat);
  Tensor picked = index_select(t, d, wrapped);
  Shape shape(t.shape().begin(), t.shape().begin() + d);
  shape.insert(shape.end(), index.shape().begin(), index.shape().end());
  shape.insert(shape.end(), t.shape().begin() + d + 1, t.shape().end());
  return picked.reshape(shape);
}

Tensor get(const Tensor& t, nb::handle key) {
  const std::vector<nb::handle> items = items_of(key);
  int64_t used = 0, ellipses = 0, advanced_count = 0;
  for (nb::handle h : items) {
    used += dims_used(h);
    ellipses += h.ptr() == Py_Ellipsis;
    advanced_count += is_advanced(h);
  }
  SINTER_CHECK(ellipses <= 1, "index: an index can only have a single ellipsis ('...')");
  SINTER_CHECK(used <= t.dim(), "index: too many indices for tensor of dimension ", t.dim());
  SINTER_CHECK(advanced_count <= 1,
               "index: more than one advanced index (tensor or list) in one key is not supported; "
               "index one dim at a time");
  Tensor out = t;
  int64_t d = 0;
  std::optional<std::pair<int64_t, nb::handle>> adv;
  for (nb::handle h : items) {
    if (h.is_none()) {
      out = out.unsqueeze(d++);
    } else if (h.ptr() == Py_Ellipsis) {
      d += t.dim() - used;
    } else if (PySlice_Check(h.ptr())) {
      const std::optional<int64_t> step = slice_part(h.attr("step"));
      SINTER_CHECK(step.value_or(1) > 0, "index: step must be greater than zero, got ", *step);
      out =
          out.slice(d++, slice_part(h.attr("start")), slice_part(h.attr("stop")), step.value_or(1));
    } else if (is_advanced(h)) {
      adv = {d, h};
      d += dims_used(h);
    } else if (PyBool_Check(h.ptr())) {
      SINTER_THROW("index: a Python bool as an index is not supported; use a bool tensor");
    } else if (!PyLong_Check(h.ptr()) && !PyIndex_Check(h.ptr())) {
      throw nb::index_error(
          ("only integers, slices (`:`), ellipsis (`...`), None and long or bool tensors are "
           "valid indices (got " +
           std::string(Py_TYPE(h.ptr())->tp_name) + ")")
              .c_str());
    } else {
      const int64_t i = nb::cast<int64_t>(h);
      const int64_t n = out.size(d);
      SINTER_CHECK(i >= -n && i < n, "index ", i, " is out of bounds for dimension ", d,
                   " with size ", n);
      out = out.select(d, i);
    }
  }
  if (adv) return advanced(out, adv->first, index_tensor(adv->second, out.device()));
  return out;
}

void set(Tensor& t, nb::handle key, nb::handle value) {
  Tensor v;
  if (std::optional<Scalar> s = scalar_of(value)) {
    check_fits(t.dtype(), *s, "index_put");
    v = full({}, *s, {.dtype = t.dtype(), .device = t.device()});
  } else {
    v = nb::cast<Tensor>(value);
  }
  // A bool mask over the whole tensor: where(mask, value, t), written back.
  if (!PyTuple_Check(key.ptr()) && nb::isinstance<Tensor>(key) &&
      nb::cast<const Tensor&>(key).dtype() == DType::b8 &&
      nb::cast<const Tensor&>(key).shape() == t.shape()) {
    const Tensor mask = nb::cast<Tensor>(key).to(t.device());
    SINTER_CHECK(v.numel() == 1, "index_put: assigning through a mask takes a single value, got ",
                 v.numel(), " values");
    t.copy_(where(mask, v.to(t.dtype()).reshape({}).expand(t.shape()), t));
    return;
  }
  for (nb::handle h : items_of(key)) {
    SINTER_CHECK(!is_advanced(h),
                 "index_put: assigning through an integer tensor or list index "
                 "is not supported; assign through a bool mask of the tensor's shape or a view");
  }
  Tensor view = get(t, key);
  view.copy_(v.to(t.dtype()));
}

}  // namespace

void bind_indexing(nb::class_<Tensor>& cls) {
  cls.def("__getitem__", &get, nb::arg("key").none())
      .def("__setitem__", &set, nb::arg("key").none(), nb::arg("value"));
}

}  // namespace sinter::python

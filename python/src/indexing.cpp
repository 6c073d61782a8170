// Tensor.__getitem__ and __setitem__ with PyTorch's rules: integers select, slices (positive
// steps) narrow, None adds a dim, ... stands for the dims not named; and advanced indices, integer
// tensors or lists and bool masks (Note [advanced indexing]). Basic indexing gives views; advanced
// indexing copies, and assigns through them.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
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

// A 0-dim integer tensor indexes as the integer it holds (PyTorch's rule), not as an advanced
// index.
bool is_int_tensor(nb::handle h) {
  if (!nb::isinstance<Tensor>(h)) return false;
  const auto& t = nb::cast<const Tensor&>(h);
  return t.dim() == 0 && is_integral(t.dtype()) && t.dtype() != DType::b8;
}

bool is_advanced(nb::handle h) {
  return (nb::isinstance<Tensor>(h) && !is_int_tensor(h)) || PyList_Check(h.ptr());
}

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

// Note [advanced indexing]
// Several advanced indices in one key follow NumPy's rules, as PyTorch's do: a bool mask over k
// dims counts as the k integer indices of its true positions (nonzero), the integer indices
// broadcast together to a shape B, and element b of the result holds t at (i_1[b], ..., i_m[b]) in
// the advanced dims; B takes the advanced dims' place when they are adjacent, else it comes first.
// The advanced dims are moved to the front and merged into one of their sizes' product, the
// positions checked (an index out of range is an IndexError naming it, its dim and size; negative
// ones count from the end) and made flat on the host, and one index_select gathers them. An
// assignment broadcasts the value to the result's shape and selects, for each merged row written,
// its value (where(written, value, current): exact for every dtype and value); a position given
// more than once takes its last value, as PyTorch's CPU kernel does. A 0-dim integer tensor
// indexes as its integer. One advanced index alone (the common case)
// keeps the device-side path of advanced() and reads nothing back for a read.
struct Advanced {
  std::vector<int64_t> dims;    // in the basic-indexed tensor, ascending
  std::vector<Tensor> indices;  // i64, one per dim
};

// The advanced items of a key, each at its dim in the basic-indexed tensor `out`, as integer
// indices (masks split into their nonzero columns).
Advanced advanced_of(const Tensor& out, const std::vector<std::pair<int64_t, nb::handle>>& items) {
  Advanced a;
  for (const auto& [d, h] : items) {
    const Tensor index = index_tensor(h, out.device());
    if (index.dtype() == DType::b8) {
      const int64_t k = index.dim();
      SINTER_CHECK(k >= 1, "index: a 0-dim bool tensor as an index is not supported");
      SINTER_CHECK(d + k <= out.dim(), "index: a mask of ", k, " dims at dim ", d,
                   " of a tensor with ", out.dim(), " dims");
      const Shape covered(out.shape().begin() + d, out.shape().begin() + d + k);
      SINTER_CHECK(index.shape() == covered, "index: the shape of the mask ",
                   shape_str(index.shape()), " does not match the shape of the indexed tensor ",
                   shape_str(covered), " at dim ", d);
      const Tensor nz = nonzero(index);
      for (int64_t c = 0; c < k; ++c) {
        a.dims.push_back(d + c);
        a.indices.push_back(nz.select(1, c));
      }
      continue;
    }
    SINTER_CHECK(is_integral(index.dtype()),
                 "index: tensors used as indices must be long, int, byte or bool tensors, got ",
                 index.dtype());
    a.dims.push_back(d);
    a.indices.push_back(index.to(DType::i64));
  }
  return a;
}

Shape broadcast_shape(const std::vector<Tensor>& ts) {
  Shape b;
  for (const Tensor& t : ts) {
    const Shape& s = t.shape();
    if (s.size() > b.size()) b.insert(b.begin(), s.size() - b.size(), 1);
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& out = b[b.size() - s.size() + i];
      SINTER_CHECK(out == 1 || s[i] == 1 || out == s[i],
                   "index: shape mismatch: indexing tensors could not be broadcast together "
                   "with shapes ",
                   shape_str(b), " and ", shape_str(s));
      if (out == 1) out = s[i];
    }
  }
  return b;
}

// `out` with the advanced dims first and merged: the permuted view, its merged form (P, rest...),
// the flat positions (host, one per element of B), B, and where B goes in the result.
struct Merged {
  Tensor view;  // out.permute(advanced dims first)
  Tensor flat;  // view.reshape(P, rest...)
  std::vector<int64_t> positions;
  Shape batch;        // B
  int64_t place = 0;  // B's dim in the result: the first advanced dim when adjacent
};

Merged merge(const Tensor& out, const Advanced& a) {
  Merged m;
  std::vector<int64_t> perm = a.dims;
  Shape rest;
  for (int64_t d = 0; d < out.dim(); ++d) {
    if (std::find(a.dims.begin(), a.dims.end(), d) == a.dims.end()) {
      perm.push_back(d);
      rest.push_back(out.size(d));
    }
  }
  const bool adjacent = a.dims.back() - a.dims.front() + 1 == static_cast<int64_t>(a.dims.size());
  m.place = adjacent ? a.dims.front() : 0;
  m.view = out.permute(perm);
  m.batch = broadcast_shape(a.indices);
  int64_t n = 1;
  for (int64_t b : m.batch) n *= b;
  m.positions.assign(static_cast<size_t>(n), 0);
  int64_t product = 1;
  for (size_t k = 0; k < a.dims.size(); ++k) {
    const int64_t size = out.size(a.dims[k]);
    product *= size;
    const std::vector<int64_t> host =
        a.indices[k].expand(m.batch).contiguous().cpu().to_vector<int64_t>();
    for (int64_t e = 0; e < n; ++e) {
      int64_t v = host[static_cast<size_t>(e)];
      if (v < -size || v >= size) {
        throw nb::index_error(("index " + std::to_string(v) + " is out of bounds for dimension " +
                               std::to_string(a.dims[k]) + " with size " + std::to_string(size))
                                  .c_str());
      }
      if (v < 0) v += size;
      m.positions[static_cast<size_t>(e)] = m.positions[static_cast<size_t>(e)] * size + v;
    }
  }
  Shape merged{product};
  merged.insert(merged.end(), rest.begin(), rest.end());
  m.flat = m.view.reshape(merged);
  return m;
}

// The permutation that takes (B..., rest...) to the result's order, B at `place`.
std::vector<int64_t> result_order(const Merged& m, int64_t rest_dims) {
  const auto nb_ = static_cast<int64_t>(m.batch.size());
  std::vector<int64_t> order;
  for (int64_t i = 0; i < m.place; ++i) order.push_back(nb_ + i);
  for (int64_t i = 0; i < nb_; ++i) order.push_back(i);
  for (int64_t i = m.place; i < rest_dims; ++i) order.push_back(nb_ + i);
  return order;
}

Tensor gather_advanced(const Tensor& out, const Advanced& a) {
  const Merged m = merge(out, a);
  const Tensor positions = from_vector<int64_t>(m.positions).to(out.device());
  Shape shape = m.batch;
  shape.insert(shape.end(), m.flat.shape().begin() + 1, m.flat.shape().end());
  const Tensor picked = index_select(m.flat, 0, positions).reshape(shape);
  return picked.permute(result_order(m, m.flat.dim() - 1));
}

// out[a] = v: v broadcast to the result's shape, written through the positions (last wins).
void scatter_advanced(const Tensor& out, const Advanced& a, const Tensor& v) {
  Merged m = merge(out, a);
  const int64_t rest_dims = m.flat.dim() - 1;
  const std::vector<int64_t> order = result_order(m, rest_dims);
  Shape result_shape;  // as gather_advanced's result
  Shape canonical = m.batch;
  canonical.insert(canonical.end(), m.flat.shape().begin() + 1, m.flat.shape().end());
  for (int64_t o : order) result_shape.push_back(canonical[static_cast<size_t>(o)]);
  std::vector<int64_t> back(order.size());
  for (size_t i = 0; i < order.size(); ++i) back[static_cast<size_t>(order[i])] = i;
  Shape rows{static_cast<int64_t>(m.positions.size())};
  rows.insert(rows.end(), m.flat.shape().begin() + 1, m.flat.shape().end());
  const Tensor values = v.to(out.dtype()).expand(result_shape).permute(back).reshape(rows);
  if (m.positions.empty()) return;
  // Each row written takes its last write's value (PyTorch's CPU kernel's order), selected, not
  // computed, so that every dtype and every value (inf, NaN) is written as given.
  const int64_t p = m.flat.size(0);
  std::vector<int64_t> source(static_cast<size_t>(p), 0), written(static_cast<size_t>(p), 0);
  for (size_t e = 0; e < m.positions.size(); ++e) {
    source[static_cast<size_t>(m.positions[e])] = static_cast<int64_t>(e);
    written[static_cast<size_t>(m.positions[e])] = 1;
  }
  Shape mask_shape(static_cast<size_t>(m.flat.dim()), 1);
  mask_shape[0] = p;
  const Tensor mask = ne(from_vector<int64_t>(written).to(out.device()), 0).reshape(mask_shape);
  const Tensor picked = index_select(values, 0, from_vector<int64_t>(source).to(out.device()));
  m.view.copy_(where(mask, picked, m.flat).reshape(m.view.shape()));
}

Tensor get(const Tensor& t, nb::handle key) {
  const std::vector<nb::handle> items = items_of(key);
  int64_t used = 0, ellipses = 0;
  for (nb::handle h : items) {
    used += dims_used(h);
    ellipses += h.ptr() == Py_Ellipsis;
  }
  SINTER_CHECK(ellipses <= 1, "index: an index can only have a single ellipsis ('...')");
  SINTER_CHECK(used <= t.dim(), "index: too many indices for tensor of dimension ", t.dim());
  Tensor out = t;
  int64_t d = 0;
  std::vector<std::pair<int64_t, nb::handle>> adv;
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
      adv.emplace_back(d, h);
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
      const int64_t i = is_int_tensor(h) ? nb::cast<const Tensor&>(h).to(DType::i64).item<int64_t>()
                                         : nb::cast<int64_t>(h);
      const int64_t n = out.size(d);
      SINTER_CHECK(i >= -n && i < n, "index ", i, " is out of bounds for dimension ", d,
                   " with size ", n);
      out = out.select(d, i);
    }
  }
  if (adv.size() == 1) {
    return advanced(out, adv[0].first, index_tensor(adv[0].second, out.device()));
  }
  if (adv.size() > 1) return gather_advanced(out, advanced_of(out, adv));
  return out;
}

// The basic part of a key applied (a view) and its advanced items, for an assignment.
Tensor basic_part(const Tensor& t, nb::handle key,
                  std::vector<std::pair<int64_t, nb::handle>>& adv) {
  const std::vector<nb::handle> items = items_of(key);
  nb::list basic;
  int64_t d = 0, kept_dims = 0;
  for (nb::handle h : items) kept_dims += dims_used(h);
  for (nb::handle h : items) {
    if (is_advanced(h)) {
      adv.emplace_back(d, h);
      d += dims_used(h);
      basic.append(nb::slice(nb::none(), nb::none(), nb::none()));
      for (int64_t i = 1; i < dims_used(h); ++i) {
        basic.append(nb::slice(nb::none(), nb::none(), nb::none()));
      }
    } else {
      if (h.is_none())
        ++d;
      else if (h.ptr() == Py_Ellipsis)
        d += t.dim() - kept_dims;
      else if (PySlice_Check(h.ptr()))
        ++d;
      basic.append(h);
    }
  }
  return get(t, nb::tuple(basic));
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
      nb::cast<const Tensor&>(key).shape() == t.shape() && v.numel() == 1) {
    const Tensor mask = nb::cast<Tensor>(key).to(t.device());
    t.copy_(where(mask, v.to(t.dtype()).reshape({}).expand(t.shape()), t));
    return;
  }
  bool any_advanced = false;
  for (nb::handle h : items_of(key)) any_advanced = any_advanced || is_advanced(h);
  if (any_advanced) {
    std::vector<std::pair<int64_t, nb::handle>> adv;
    const Tensor view = basic_part(t, key, adv);
    scatter_advanced(view, advanced_of(view, adv), v);
    return;
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

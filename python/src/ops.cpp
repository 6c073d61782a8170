// The tensor ops beyond tensor.cpp's, with torch's names and signatures, each both a function of
// sinter (sinter.where(c, a, b), sinter.cat([a, b])) and, where torch has it, a Tensor method
// (a.topk(3)). python/sinter/_ops.py adds the functions for the methods of tensor.cpp and names
// the tuples that torch names (topk, sort).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bind.h"

namespace sinter::python {
namespace {

using T = const Tensor&;
using S = const Scalar&;

// Defines `name` as a function of the module (its first argument "input") and as a method of
// Tensor, unless tensor.cpp already has that method. `extra` annotates the other arguments.
template <class F, class... Extra>
void def_both(nb::module_& m, nb::class_<Tensor>& c, const char* name, F f, const Extra&... extra) {
  m.def(name, f, nb::arg("input"), extra...);
  if (!nb::hasattr(c, name)) c.def(name, f, extra...);
}

// An operand that may be a tensor or a Python number (its kind kept, for promotion).
struct Operand {
  std::optional<Tensor> tensor;
  std::optional<Scalar> scalar;
};

Operand operand_of(nb::handle h, const char* op, const char* arg) {
  if (nb::isinstance<Tensor>(h)) return {nb::cast<Tensor>(h), std::nullopt};
  if (std::optional<Scalar> s = scalar_of(h)) return {std::nullopt, s};
  throw nb::type_error((std::string(op) + "(): argument '" + arg +
                        "' must be Tensor or Number, not " +
                        nb::cast<std::string>(nb::type_name(h.type())))
                           .c_str());
}

// A number as a 0-dim tensor that takes part in promotion as a Python number does against `like`.
Tensor as_tensor_like(const Operand& o, T like) {
  if (o.tensor) return *o.tensor;
  return full({}, *o.scalar, {.dtype = result_type(like, *o.scalar), .device = like.device()});
}

// s * k, of the higher of their kinds (alpha scales a number operand before promotion).
Scalar scaled(S s, S k) {
  if (s.is_float() || k.is_float()) return Scalar(s.to_double() * k.to_double());
  return Scalar(s.to_int() * k.to_int());
}

std::vector<int64_t> int_list(nb::handle h) {
  if (PyLong_Check(h.ptr())) return {nb::cast<int64_t>(h)};
  return nb::cast<std::vector<int64_t>>(h);
}

// alpha of add and sub: a Python number or a one-element tensor; a floating alpha for an
// integral result is an error, as PyTorch's.
Scalar alpha_of(T a, const Operand& other, nb::handle alpha, const char* op) {
  std::optional<Scalar> k = scalar_of(alpha);
  if (!k && nb::isinstance<Tensor>(alpha) && nb::cast<const Tensor&>(alpha).numel() == 1) {
    const Tensor& t = nb::cast<const Tensor&>(alpha);
    k = is_floating(t.dtype()) ? Scalar(t.to(DType::f64).item<double>())
                               : Scalar(t.to(DType::i64).item<int64_t>());
  }
  if (!k) {
    throw nb::type_error((std::string(op) + "(): argument 'alpha' must be Number, not " +
                          nb::cast<std::string>(nb::type_name(alpha.type())))
                             .c_str());
  }
  const DType result = other.tensor ? result_type(a, *other.tensor) : result_type(a, *other.scalar);
  SINTER_CHECK(!k->is_float() || is_floating(result),
               "For integral input tensors, argument alpha must not be a floating point number.");
  return *k;
}

// add and sub: input op alpha * other, other a tensor or a number.
template <class WithTensor, class WithScalar>
void def_with_alpha(nb::module_& m, nb::class_<Tensor>& c, const char* name, WithTensor tt,
                    WithScalar ts) {
  def_both(
      m, c, name,
      [name, tt, ts](T a, nb::handle b, nb::handle alpha) {
        const Operand o = operand_of(b, name, "other");
        const Scalar k = alpha_of(a, o, alpha, name);
        return o.tensor ? tt(a, *o.tensor, k) : ts(a, scaled(*o.scalar, k));
      },
      nb::arg("other").none(), nb::kw_only(), nb::arg("alpha") = 1);
}

void bind_binary(nb::module_& m, nb::class_<Tensor>& c) {
  def_with_alpha(
      m, c, "add", [](T a, T b, S k) { return add(a, b, k); }, [](T a, S b) { return add(a, b); });
  def_with_alpha(
      m, c, "sub", [](T a, T b, S k) { return sub(a, b, k); }, [](T a, S b) { return sub(a, b); });
  def_both(
      m, c, "div",
      [](T a, nb::handle b, std::optional<std::string> rounding) {
        const Operand o = operand_of(b, "div", "other");
        if (rounding) return o.tensor ? div(a, *o.tensor, *rounding) : div(a, *o.scalar, *rounding);
        return o.tensor ? div(a, *o.tensor) : div(a, *o.scalar);
      },
      nb::arg("other"), nb::kw_only(), nb::arg("rounding_mode") = nb::none());
// Binary ops whose second operand is a tensor or a number.
#define SINTER_PY_TS_(name)                                        \
  def_both(                                                        \
      m, c, #name,                                                 \
      [](T a, nb::handle b) {                                      \
        const Operand o = operand_of(b, #name, "other");           \
        return o.tensor ? name(a, *o.tensor) : name(a, *o.scalar); \
      },                                                           \
      nb::arg("other").none());
  SINTER_PY_TS_(mul)
  SINTER_PY_TS_(floor_divide)
  SINTER_PY_TS_(remainder)
  SINTER_PY_TS_(eq)
  SINTER_PY_TS_(ne)
  SINTER_PY_TS_(lt)
  SINTER_PY_TS_(le)
  SINTER_PY_TS_(gt)
  SINTER_PY_TS_(ge)
#undef SINTER_PY_TS_
// Binary ops of two tensors (a number is made a tensor as a Python number promotes).
#define SINTER_PY_TT_(name)                                                                        \
  def_both(                                                                                        \
      m, c, #name,                                                                                 \
      [](T a, nb::handle b) { return name(a, as_tensor_like(operand_of(b, #name, "other"), a)); }, \
      nb::arg("other"));
  SINTER_PY_TT_(maximum)
  SINTER_PY_TT_(minimum)
  SINTER_PY_TT_(atan2)
  SINTER_PY_TT_(hypot)
  SINTER_PY_TT_(kron)
  SINTER_PY_TT_(bmm)
#undef SINTER_PY_TT_
  m.def(
      "pow",
      [](nb::handle base, nb::handle e) -> Tensor {
        const Operand b = operand_of(base, "pow", "input");
        const Operand x = operand_of(e, "pow", "exponent");
        if (!b.tensor) {
          SINTER_CHECK(x.tensor.has_value(), "pow: one of input and exponent must be a tensor");
          return pow(*b.scalar, *x.tensor);
        }
        return x.tensor ? pow(*b.tensor, *x.tensor) : pow(*b.tensor, *x.scalar);
      },
      nb::arg("input"), nb::arg("exponent"));
  m.def(
      "matmul", [](T a, T b) { return matmul(a, b); }, nb::arg("input"), nb::arg("other"));
  def_both(
      m, c, "mm",
      [](T a, T b) {
        SINTER_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected 2-D tensors, got ", a.dim(),
                     "-D and ", b.dim(), "-D");
        return matmul(a, b);
      },
      nb::arg("mat2"));
}

void bind_scatter(nb::module_& m, nb::class_<Tensor>& c);

void bind_selection(nb::module_& m, nb::class_<Tensor>& c) {
  // where(condition, input, other); the method is input.where(condition, other), as torch's.
  auto where_fn = [](T cond, nb::handle a, nb::handle b) {
    const Operand x = operand_of(a, "where", "input");
    const Operand y = operand_of(b, "where", "other");
    SINTER_CHECK(x.tensor || y.tensor, "where: input or other must be a tensor");
    if (x.tensor && y.scalar) return where(cond, *x.tensor, *y.scalar);
    const Tensor& like = x.tensor ? *x.tensor : *y.tensor;
    return where(cond, as_tensor_like(x, like), as_tensor_like(y, like));
  };
  m.def("where", where_fn, nb::arg("condition"), nb::arg("input").none(), nb::arg("other").none());
  c.def(
      "where", [=](T self, T cond, nb::handle b) { return where_fn(cond, nb::cast(self), b); },
      nb::arg("condition"), nb::arg("other").none());
  def_both(
      m, c, "masked_fill",
      [](T a, T mask, nb::handle value) {
        const Operand v = operand_of(value, "masked_fill", "value");
        if (v.scalar) return masked_fill(a, mask, *v.scalar);
        SINTER_CHECK(v.tensor->dim() == 0,
                     "masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
                     "with ",
                     v.tensor->dim(), " dimension(s).");
        return where(mask, v.tensor->to(a.dtype()), a);
      },
      nb::arg("mask"), nb::arg("value"));
  def_both(
      m, c, "lerp",
      [](T a, T end, nb::handle w) {
        const Operand o = operand_of(w, "lerp", "weight");
        return o.tensor ? lerp(a, end, *o.tensor) : lerp(a, end, o.scalar->to_double());
      },
      nb::arg("end"), nb::arg("weight"));
  def_both(
      m, c, "addcmul", [](T a, T t1, T t2, double v) { return addcmul(a, t1, t2, v); },
      nb::arg("tensor1"), nb::arg("tensor2"), nb::kw_only(), nb::arg("value") = 1.0);
  def_both(
      m, c, "addcdiv", [](T a, T t1, T t2, double v) { return addcdiv(a, t1, t2, v); },
      nb::arg("tensor1"), nb::arg("tensor2"), nb::kw_only(), nb::arg("value") = 1.0);
  def_both(
      m, c, "baddbmm",
      [](T a, T b1, T b2, double beta, double alpha) { return baddbmm(a, b1, b2, beta, alpha); },
      nb::arg("batch1"), nb::arg("batch2"), nb::kw_only(), nb::arg("beta") = 1.0,
      nb::arg("alpha") = 1.0);
  def_both(
      m, c, "isclose",
      [](T a, T b, double rtol, double atol, bool nan) { return isclose(a, b, rtol, atol, nan); },
      nb::arg("other"), nb::arg("rtol") = 1e-5, nb::arg("atol") = 1e-8,
      nb::arg("equal_nan") = false);
  def_both(
      m, c, "allclose",
      [](T a, T b, double rtol, double atol, bool nan) { return allclose(a, b, rtol, atol, nan); },
      nb::arg("other"), nb::arg("rtol") = 1e-5, nb::arg("atol") = 1e-8,
      nb::arg("equal_nan") = false);
  def_both(
      m, c, "tril", [](T a, int64_t d) { return tril(a, d); }, nb::arg("diagonal") = 0);
  def_both(
      m, c, "triu", [](T a, int64_t d) { return triu(a, d); }, nb::arg("diagonal") = 0);
  def_both(
      m, c, "gather",
      // sparse_grad is taken for torch's callers: the gradient is dense either way (README).
      [](T a, int64_t dim, T index, bool) { return gather(a, dim, index); }, nb::arg("dim"),
      nb::arg("index"), nb::kw_only(), nb::arg("sparse_grad") = false);
  def_both(
      m, c, "index_select", [](T a, int64_t dim, T index) { return index_select(a, dim, index); },
      nb::arg("dim"), nb::arg("index"));
  def_both(
      m, c, "scatter_add",
      [](T a, int64_t dim, T index, T src) { return scatter_add(a, dim, index, src); },
      nb::arg("dim"), nb::arg("index"), nb::arg("src"));
  bind_scatter(m, c);
  def_both(
      m, c, "index_add",
      [](T a, int64_t dim, T index, T src, double alpha) {
        return index_add(a, dim, index, src, alpha);
      },
      nb::arg("dim"), nb::arg("index"), nb::arg("source"), nb::kw_only(), nb::arg("alpha") = 1.0);
  def_both(
      m, c, "nonzero",
      [](T a, bool as_tuple) -> nb::object {
        Tensor nz = nonzero(a);
        if (!as_tuple) return nb::cast(nz);
        nb::list parts;
        for (int64_t d = 0; d < a.dim(); ++d) parts.append(nz.select(1, d));
        return nb::tuple(parts);
      },
      nb::kw_only(), nb::arg("as_tuple") = false);
}

void bind_reductions(nb::module_& m, nb::class_<Tensor>& c) {
  def_both(
      m, c, "logsumexp",
      [](T a, nb::handle dim, bool keepdim) { return logsumexp(a, int_list(dim), keepdim); },
      nb::arg("dim"), nb::arg("keepdim") = false);
  def_both(
      m, c, "topk",
      [](T a, int64_t k, int64_t dim, bool largest, bool sorted) {
        (void)sorted;  // the k values come sorted, as torch's default
        return topk(a, k, dim, largest);
      },
      nb::arg("k"), nb::arg("dim") = -1, nb::arg("largest") = true, nb::arg("sorted") = true);
  def_both(
      m, c, "sort",
      [](T a, int64_t dim, bool descending, bool stable) {
        (void)stable;  // the sort is stable either way
        return sort(a, dim, descending);
      },
      nb::arg("dim") = -1, nb::arg("descending") = false, nb::kw_only(), nb::arg("stable") = false);
  def_both(
      m, c, "argsort",
      [](T a, int64_t dim, bool descending, bool stable) {
        (void)stable;
        return argsort(a, dim, descending);
      },
      nb::arg("dim") = -1, nb::arg("descending") = false, nb::kw_only(), nb::arg("stable") = false);
  def_both(
      m, c, "unique",
      [](T a, bool sorted, bool inverse, bool counts, std::optional<int64_t> dim) -> nb::object {
        (void)sorted;  // always sorted, as torch's on CPU and CUDA
        auto [values, inv, cnt] =
            dim ? unique_dim(a, *dim, inverse, counts) : unique(a, inverse, counts);
        if (!inverse && !counts) return nb::cast(values);
        nb::list out;
        out.append(values);
        if (inverse) out.append(inv);
        if (counts) out.append(cnt);
        return nb::tuple(out);
      },
      nb::arg("sorted") = true, nb::arg("return_inverse") = false, nb::arg("return_counts") = false,
      nb::arg("dim") = nb::none());
  // torch's searchsorted: side ("left" or "right") names right's choice, sorter the order that
  // sorts each row of sorted_sequence; out_int32 gives i32 indices.
  m.def(
      "searchsorted",
      [](T seq, T values, bool out_int32, bool right, std::optional<std::string> side,
         std::optional<Tensor> sorter) {
        if (side) {
          if (*side != "left" && *side != "right") {
            throw nb::value_error(("torch.searchsorted(): side can only be 'left' or 'right' but "
                                   "got " +
                                   *side)
                                      .c_str());
          }
          if (right && *side == "left") {
            throw nb::value_error(
                "torch.searchsorted(): side and right can't be set to opposites, got side of "
                "left while right was True");
          }
          right = *side == "right";
        }
        SINTER_CHECK(!sorter || sorter->shape() == seq.shape(),
                     "searchsorted: boundaries and sorter must have the same size, but got "
                     "boundaries tensor ",
                     shape_str(seq.shape()), " and sorter tensor ",
                     sorter ? shape_str(sorter->shape()) : "");
        Tensor r = searchsorted(sorter ? gather(seq, -1, *sorter) : seq, values, right);
        return out_int32 ? r.to(DType::i32) : r;
      },
      nb::arg("sorted_sequence"), nb::arg("input"), nb::kw_only(), nb::arg("out_int32") = false,
      nb::arg("right") = false, nb::arg("side") = nb::none(), nb::arg("sorter") = nb::none());
  m.def(
      "bucketize",
      [](T input, T bounds, bool out_int32, bool right) {
        Tensor r = bucketize(input, bounds, right);
        return out_int32 ? r.to(DType::i32) : r;
      },
      nb::arg("input"), nb::arg("boundaries"), nb::kw_only(), nb::arg("out_int32") = false,
      nb::arg("right") = false);
  def_both(
      m, c, "multinomial",
      [](T w, int64_t n, bool replacement) { return multinomial(w, n, replacement); },
      nb::arg("num_samples"), nb::arg("replacement") = false);
}

void bind_shapes(nb::module_& m, nb::class_<Tensor>& c) {
  for (const char* name : {"cat", "concat", "concatenate"}) {
    m.def(
        name, [](const std::vector<Tensor>& ts, int64_t dim) { return cat(ts, dim); },
        nb::arg("tensors"), nb::arg("dim") = 0);
  }
  // concatenate is NumPy's name and takes NumPy's `axis` too, as torch's.
  m.def(
      "concatenate", [](const std::vector<Tensor>& ts, int64_t axis) { return cat(ts, axis); },
      nb::arg("tensors"), nb::kw_only(), nb::arg("axis"));
  m.def(
      "stack", [](const std::vector<Tensor>& ts, int64_t dim) { return stack(ts, dim); },
      nb::arg("tensors"), nb::arg("dim") = 0);
  def_both(
      m, c, "split",
      [](T a, nb::handle size, int64_t dim) {
        if (PyLong_Check(size.ptr()))
          return nb::tuple(nb::cast(split(a, nb::cast<int64_t>(size), dim)));
        return nb::tuple(nb::cast(split(a, nb::cast<std::vector<int64_t>>(size), dim)));
      },
      nb::arg("split_size_or_sections"), nb::arg("dim") = 0);
  def_both(
      m, c, "chunk",
      [](T a, int64_t n, int64_t dim) { return nb::tuple(nb::cast(chunk(a, n, dim))); },
      nb::arg("chunks"), nb::arg("dim") = 0);
  def_both(
      m, c, "unbind", [](T a, int64_t dim) { return nb::tuple(nb::cast(unbind(a, dim))); },
      nb::arg("dim") = 0);
  def_both(
      m, c, "flip", [](T a, nb::handle dims) { return flip(a, int_list(dims)); }, nb::arg("dims"));
  def_both(
      m, c, "roll",
      [](T a, nb::handle shifts, nb::handle dims) {
        return roll(a, int_list(shifts), dims.is_none() ? std::vector<int64_t>{} : int_list(dims));
      },
      nb::arg("shifts"), nb::arg("dims").none() = nb::none());
  def_both(
      m, c, "diagonal",
      [](T a, int64_t offset, int64_t d1, int64_t d2) { return diagonal(a, offset, d1, d2); },
      nb::arg("offset") = 0, nb::arg("dim1") = 0, nb::arg("dim2") = 1);
  def_both(
      m, c, "diag", [](T a, int64_t d) { return diag(a, d); }, nb::arg("diagonal") = 0);
  def_both(
      m, c, "repeat_interleave",
      [](T a, nb::handle repeats, std::optional<int64_t> dim, std::optional<int64_t> output_size) {
        Tensor r = nb::isinstance<Tensor>(repeats)
                       ? repeat_interleave(a, nb::cast<Tensor>(repeats), dim)
                       : repeat_interleave(a, nb::cast<int64_t>(repeats), dim);
        // output_size is the result's length along dim (all of it without a dim), checked.
        const int64_t got = dim ? r.size(*dim) : r.numel();
        if (output_size && *output_size != got) {
          throw nb::value_error(("repeat_interleave: output_size=" + std::to_string(*output_size) +
                                 " but the repeats give " + std::to_string(got))
                                    .c_str());
        }
        return r;
      },
      nb::arg("repeats"), nb::arg("dim") = nb::none(), nb::kw_only(),
      nb::arg("output_size") = nb::none());
  m.def(
      "meshgrid",
      [](nb::args tensors, const std::string& indexing) {
        std::vector<Tensor> ts;
        if (tensors.size() == 1 && !nb::isinstance<Tensor>(tensors[0])) {
          ts = nb::cast<std::vector<Tensor>>(tensors[0]);
        } else {
          ts = nb::cast<std::vector<Tensor>>(tensors);
        }
        return nb::tuple(nb::cast(meshgrid(ts, indexing)));
      },
      nb::arg("tensors"), nb::kw_only(), nb::arg("indexing") = "ij");
  m.def(
      "einsum",
      [](const std::string& equation, nb::args operands) {
        std::vector<Tensor> ts;
        if (operands.size() == 1 && !nb::isinstance<Tensor>(operands[0])) {
          ts = nb::cast<std::vector<Tensor>>(operands[0]);
        } else {
          ts = nb::cast<std::vector<Tensor>>(operands);
        }
        return einsum(equation, ts);
      },
      nb::arg("equation"), nb::arg("operands"));
  def_both(
      m, c, "squeeze",
      [](T a, std::optional<int64_t> dim) {
        if (dim) return squeeze(a, *dim);
        Shape kept;
        for (int64_t s : a.shape()) {
          if (s != 1) kept.push_back(s);
        }
        return a.reshape(kept);
      },
      nb::arg("dim") = nb::none());
}

// scatter_reduce's and index_reduce's `reduce=` names; `allowed` lists those the op takes.
ScatterReduce scatter_reduce_of(const std::string& r, const char* op,
                                std::initializer_list<const char*> allowed) {
  static const std::pair<const char*, ScatterReduce> kNames[] = {{"sum", ScatterReduce::Sum},
                                                                 {"prod", ScatterReduce::Prod},
                                                                 {"mean", ScatterReduce::Mean},
                                                                 {"amax", ScatterReduce::Amax},
                                                                 {"amin", ScatterReduce::Amin}};
  for (const char* a : allowed) {
    if (r != a) continue;
    for (const auto& [name, v] : kNames) {
      if (r == name) return v;
    }
  }
  std::string names;
  for (const char* a : allowed) names += std::string(names.empty() ? "" : ", ") + a;
  SINTER_THROW(op, ": reduce argument must be one of ", names, ", got '", r, "'");
}

// A value argument (scatter's, index_fill's) for a tensor of dtype t: a number, or a 0-d tensor
// read as one; it must fit t, as torch checks.
Scalar fill_value_of(nb::handle v, const char* op, DType t) {
  std::optional<Scalar> s;
  if (nb::isinstance<Tensor>(v)) {
    const Tensor x = nb::cast<Tensor>(v);
    SINTER_CHECK(x.dim() == 0, op, ": a tensor value must be 0-dim, got shape ",
                 shape_str(x.shape()));
    s = is_floating(x.dtype()) ? Scalar(x.item<double>()) : Scalar(x.item<int64_t>());
  } else {
    s = scalar_of(v);
  }
  if (!s) {
    throw nb::type_error(
        (std::string(op) + "(): value must be a number or a 0-dim tensor").c_str());
  }
  check_fits(t, *s, op);
  return *s;
}

// scatter (src or value; torch's legacy reduce="add"/"multiply"), scatter_reduce, index_copy,
// index_fill and index_reduce, with torch's arguments.
void bind_scatter(nb::module_& m, nb::class_<Tensor>& c) {
  // scatter(dim, index, src) or scatter(dim, index, value); reduce= is torch's legacy form.
  def_both(
      m, c, "scatter",
      [](T a, int64_t dim, T index, nb::handle src, nb::handle value,
         std::optional<std::string> reduce) {
        SINTER_CHECK(src.is_none() != value.is_none(),
                     "scatter: give one of src (a tensor) and value (a number)");
        const nb::handle given = src.is_none() ? value : src;
        // A tensor of dims (or a 0-d one beside a 0-d index) is src; anything else a value.
        const bool tensor = nb::isinstance<Tensor>(given) &&
                            (nb::cast<Tensor>(given).dim() > 0 || index.dim() == 0);
        const Tensor s = tensor ? nb::cast<Tensor>(given)
                                : full(index.shape(), fill_value_of(given, "scatter", a.dtype()),
                                       {.dtype = a.dtype(), .device = a.device()});
        if (!reduce) return scatter(a, dim, index, s);
        SINTER_CHECK(*reduce == "add" || *reduce == "multiply",
                     "scatter: reduce argument must be either add or multiply, got '", *reduce,
                     "'");
        return scatter_reduce(a, dim, index, s,
                              *reduce == "add" ? ScatterReduce::Sum : ScatterReduce::Prod);
      },
      nb::arg("dim"), nb::arg("index"), nb::arg("src") = nb::none(), nb::kw_only(),
      nb::arg("value") = nb::none(), nb::arg("reduce") = nb::none());
  def_both(
      m, c, "scatter_reduce",
      [](T a, int64_t dim, T index, T src, const std::string& reduce, bool include_self) {
        return scatter_reduce(
            a, dim, index, src,
            scatter_reduce_of(reduce, "scatter_reduce", {"sum", "prod", "mean", "amax", "amin"}),
            include_self);
      },
      nb::arg("dim"), nb::arg("index"), nb::arg("src"), nb::arg("reduce"), nb::kw_only(),
      nb::arg("include_self") = true);
  def_both(
      m, c, "index_copy",
      [](T a, int64_t dim, T index, T src) { return index_copy(a, dim, index, src); },
      nb::arg("dim"), nb::arg("index"), nb::arg("source"));
  def_both(
      m, c, "index_fill",
      [](T a, int64_t dim, T index, nb::handle value) {
        return index_fill(a, dim, index, fill_value_of(value, "index_fill", a.dtype()));
      },
      nb::arg("dim"), nb::arg("index"), nb::arg("value"));
  def_both(
      m, c, "index_reduce",
      [](T a, int64_t dim, T index, T src, const std::string& reduce, bool include_self) {
        return index_reduce(
            a, dim, index, src,
            scatter_reduce_of(reduce, "index_reduce", {"prod", "mean", "amax", "amin"}),
            include_self);
      },
      nb::arg("dim"), nb::arg("index"), nb::arg("source"), nb::arg("reduce"), nb::kw_only(),
      nb::arg("include_self") = true);
}

// torch's cells, one step each: lstm_cell -> (h', c'); gru_cell, rnn_tanh_cell, rnn_relu_cell
// -> h'. hx is (h, c) for the LSTM, h for the others; biases may be None.
void bind_cells(nb::module_& m) {
  using T = const Tensor&;
  using OptT = const std::optional<Tensor>&;
  m.def(
      "lstm_cell",
      [](T x, const std::vector<Tensor>& hx, T w_ih, T w_hh, OptT b_ih, OptT b_hh) {
        if (hx.size() != 2) {
          throw nb::value_error(
              ("lstm_cell: hx must hold (h, c), got " + std::to_string(hx.size()) + " tensors")
                  .c_str());
        }
        return lstm_cell(x, hx[0], hx[1], w_ih, w_hh, or_undefined(b_ih), or_undefined(b_hh));
      },
      nb::arg("input"), nb::arg("hx"), nb::arg("w_ih"), nb::arg("w_hh"),
      nb::arg("b_ih").none() = nb::none(), nb::arg("b_hh").none() = nb::none());
  // The cells of one state: h'.
  using Cell = Tensor (*)(T, T, T, T, T, T);
  for (const auto& [name, cell] : {std::pair<const char*, Cell>{"gru_cell", &gru_cell},
                                   std::pair<const char*, Cell>{"rnn_tanh_cell", &rnn_tanh_cell},
                                   std::pair<const char*, Cell>{"rnn_relu_cell", &rnn_relu_cell}}) {
    m.def(
        name,
        [cell](T x, T h, T w_ih, T w_hh, OptT b_ih, OptT b_hh) {
          return cell(x, h, w_ih, w_hh, or_undefined(b_ih), or_undefined(b_hh));
        },
        nb::arg("input"), nb::arg("hx"), nb::arg("w_ih"), nb::arg("w_hh"),
        nb::arg("b_ih").none() = nb::none(), nb::arg("b_hh").none() = nb::none());
  }
}

}  // namespace

void bind_ops(nb::module_& m, nb::class_<Tensor>& c) {
  bind_cells(m);
  bind_binary(m, c);
  bind_selection(m, c);
  bind_reductions(m, c);
  bind_shapes(m, c);
}

}  // namespace sinter::python

// Zero-copy exchange: Tensor.__dlpack__ / __dlpack_device__ and sinter.from_dlpack (PyTorch, NumPy,
// CuPy, JAX: any DLPack producer or consumer, CPU and CUDA), Tensor.numpy() and __array__. Both
// sides see one memory: the exporter keeps its tensor (its storage) alive for as long as the
// consumer holds the capsule, and an imported tensor keeps the producer's object alive.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "bind.h"

namespace sinter::python {
namespace {

using nb::dlpack::dtype_code;

nb::dlpack::dtype dlpack_dtype(DType t) {
  const auto bits = static_cast<uint8_t>(element_size(t) * 8);
  switch (t) {
    case DType::f32:
    case DType::f64:
    case DType::f16:
      return {static_cast<uint8_t>(dtype_code::Float), bits, 1};
    case DType::bf16:
      return {static_cast<uint8_t>(dtype_code::Bfloat), bits, 1};
    case DType::i64:
    case DType::i32:
      return {static_cast<uint8_t>(dtype_code::Int), bits, 1};
    case DType::u8:
      return {static_cast<uint8_t>(dtype_code::UInt), bits, 1};
    case DType::b8:
      return {static_cast<uint8_t>(dtype_code::Bool), bits, 1};
    case DType::f8e4m3:
      return {static_cast<uint8_t>(dtype_code::Float8_E4M3FN), bits, 1};
    case DType::f8e5m2:
      return {static_cast<uint8_t>(dtype_code::Float8_E5M2), bits, 1};
  }
  SINTER_THROW("dlpack: dtype ", t, " has no DLPack type");
}

DType sinter_dtype(nb::dlpack::dtype d) {
  SINTER_CHECK(d.lanes == 1, "from_dlpack: vector types (", static_cast<int>(d.lanes),
               " lanes) are not supported");
  const auto code = static_cast<dtype_code>(d.code);
  if (code == dtype_code::Float && d.bits == 32) return DType::f32;
  if (code == dtype_code::Float && d.bits == 64) return DType::f64;
  if (code == dtype_code::Float && d.bits == 16) return DType::f16;
  if (code == dtype_code::Bfloat && d.bits == 16) return DType::bf16;
  if (code == dtype_code::Int && d.bits == 64) return DType::i64;
  if (code == dtype_code::Int && d.bits == 32) return DType::i32;
  if (code == dtype_code::UInt && d.bits == 8) return DType::u8;
  if (code == dtype_code::Bool && d.bits == 8) return DType::b8;
  if (code == dtype_code::Float8_E4M3FN && d.bits == 8) return DType::f8e4m3;
  if (code == dtype_code::Float8_E5M2 && d.bits == 8) return DType::f8e5m2;
  SINTER_THROW("from_dlpack: unsupported dtype (DLPack code ", static_cast<int>(d.code), ", ",
               static_cast<int>(d.bits), " bits)");
}

// A capsule owning a copy of the tensor handle: the storage lives while the capsule does.
nb::capsule owner_of(const Tensor& t) {
  return nb::capsule(new Tensor(t), [](void* p) noexcept { delete static_cast<Tensor*>(p); });
}

// t as an ndarray of `Framework` (nb::numpy, or none for nanobind's own, which speaks DLPack).
template <class... Framework>
nb::ndarray<Framework...> as_ndarray(const Tensor& t) {
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  const int device_type = t.is_cuda() ? nb::device::cuda::value : nb::device::cpu::value;
  return nb::ndarray<Framework...>(t.data_ptr(), shape.size(), shape.data(), owner_of(t),
                                   strides.data(), dlpack_dtype(t.dtype()), device_type,
                                   t.is_cuda() ? t.device().index : 0);
}

Tensor from_dlpack(nb::ndarray<> a) {
  Shape shape, strides;
  for (size_t i = 0; i < a.ndim(); ++i) {
    shape.push_back(static_cast<int64_t>(a.shape(i)));
    strides.push_back(a.stride(i));
  }
  Device device = Device::cpu();
  if (a.device_type() == nb::device::cuda::value) {
    device = Device::cuda(a.device_id());
    // The producer's pending writes may be on a stream of its own: the import waits for all the
    // device's work, as the export does, so that Sinter's first read sees them.
    cuda::synchronize(device.index);
  } else {
    SINTER_CHECK(a.device_type() == nb::device::cpu::value, "from_dlpack: unsupported device type ",
                 a.device_type(), " (Sinter takes CPU and CUDA memory)");
  }
  // The deleter holds the producer's array, released with the GIL held.
  auto keep = std::make_shared<nb::ndarray<>>(a);
  return from_blob(a.data(), shape, strides, {.dtype = sinter_dtype(a.dtype()), .device = device},
                   [keep](void*) mutable {
                     nb::gil_scoped_acquire gil;
                     keep.reset();
                   });
}

}  // namespace

void bind_dlpack(nb::module_& m, nb::class_<Tensor>& c) {
  c.def(
       "__dlpack__",
       [](const Tensor& t, nb::kwargs kwargs) {
         if (t.requires_grad()) {
           throw nb::buffer_error(
               "__dlpack__: can't export a tensor that requires grad; use tensor.detach()");
         }
         // dl_device: only the tensor's own; copy=True: a copy (the array API's rules). stream
         // and max_version: the legacy capsule, after the device's work, serves every consumer.
         if (kwargs.contains("dl_device") && !kwargs["dl_device"].is_none()) {
           const auto want = nb::cast<std::pair<int, int>>(kwargs["dl_device"]);
           const int type = t.is_cuda() ? nb::device::cuda::value : nb::device::cpu::value;
           if (want.first != type || (t.is_cuda() && want.second != t.device().index)) {
             throw nb::buffer_error("__dlpack__: dl_device other than the tensor's own");
           }
         }
         const bool copy =
             kwargs.contains("copy") && !kwargs["copy"].is_none() && nb::cast<bool>(kwargs["copy"]);
         const Tensor out = copy ? t.clone() : t;
         if (out.is_cuda()) cuda::synchronize(out.device().index);
         // nanobind's array-API object makes the capsule: versioned when max_version asks.
         nb::object arr = nb::cast(as_ndarray<nb::array_api>(out));
         nb::kwargs rest;
         if (kwargs.contains("max_version")) rest["max_version"] = kwargs["max_version"];
         return arr.attr("__dlpack__")(**rest);
       },
       nb::arg("kwargs"))
      .def("__dlpack_device__",
           [](const Tensor& t) {
             return nb::make_tuple(t.is_cuda() ? nb::device::cuda::value : nb::device::cpu::value,
                                   t.is_cuda() ? t.device().index : 0);
           })
      .def(
          "numpy",
          [](const Tensor& t, bool force) -> nb::object {
            Tensor src = t;
            if (force) src = t.detach().cpu();
            SINTER_CHECK(!src.requires_grad(),
                         "numpy: can't call numpy() on Tensor that requires grad. Use "
                         "tensor.detach().numpy() instead.");
            SINTER_CHECK(!src.is_cuda(), "numpy: can't convert cuda:", src.device().index,
                         " device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                         "to host memory first.");
            SINTER_CHECK(src.dtype() != DType::bf16 && !is_float8(src.dtype()),
                         "numpy: NumPy has no ", src.dtype(), "; convert with .float() first");
            return nb::cast(as_ndarray<nb::numpy>(src));
          },
          nb::kw_only(), nb::arg("force") = false,
          "The tensor's memory as a NumPy array (no copy): writes through either are seen by "
          "the other.");
  m.def("from_dlpack", &from_dlpack, nb::arg("ext_tensor"),
        "A tensor on another library's memory (PyTorch, NumPy, ... through DLPack), without a "
        "copy.");
}

}  // namespace sinter::python

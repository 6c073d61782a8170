// sinter._C.data: the C++ datasets (TensorDataset, FashionMNIST) and the DataLoader, iterated from
// Python as torch.utils.data's: each batch an (input, target) pair; the loader's prefetch thread
// runs while Python waits without the GIL. And sinter._C.models: the reference models.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <optional>
#include <string>

#include "bind.h"

namespace sinter::python {
namespace {

// One pass over a loader; holds the loader (Python keeps it alive too, nb::keep_alive).
class BatchIterator {
 public:
  explicit BatchIterator(data::DataLoader& loader) : loader_(loader) {}
  nb::tuple next() {
    if (!started_) {
      nb::gil_scoped_release release;
      it_ = loader_.begin();
      started_ = true;
    } else {
      nb::gil_scoped_release release;
      ++it_;
    }
    if (it_ == loader_.end()) throw nb::stop_iteration();
    const data::Batch& b = *it_;
    return nb::make_tuple(b.input, b.target);
  }

 private:
  data::DataLoader& loader_;
  data::DataLoader::Iterator it_;
  bool started_ = false;
};

void bind_datasets(nb::module_& m) {
  nb::class_<data::Dataset>(m, "Dataset", "A dataset implemented in C++.")
      .def("__len__", &data::Dataset::size)
      .def("__getitem__", [](const data::Dataset& d, int64_t i) {
        if (i < 0) i += d.size();
        if (i < 0 || i >= d.size()) throw nb::index_error("dataset index out of range");
        const data::Example e = d.get(i);
        return nb::make_tuple(e.input, e.target);
      });
  nb::class_<data::TensorDataset, data::Dataset>(m, "TensorDataset")
      .def(nb::init<Tensor, Tensor>(), nb::arg("inputs"), nb::arg("targets"))
      .def_prop_ro("tensors", [](const data::TensorDataset& d) {
        return nb::make_tuple(d.inputs(), d.targets());
      });
  nb::class_<data::FashionMNIST, data::TensorDataset>(
      m, "FashionMNIST",
      "Fashion-MNIST's images (N, 1, 28, 28), normalized with its mean and std unless "
      "normalize=False, and labels (N) in int64.")
      .def(
          "__init__",
          [](data::FashionMNIST* self, const std::string& root, bool train, bool normalize) {
            new (self) data::FashionMNIST(
                root, train,
                normalize ? data::FashionMNIST::default_normalization() : data::Normalization{});
          },
          nb::arg("root") = data::FashionMNIST::kDebianRoot, nb::arg("train") = true,
          nb::arg("normalize") = true);
  m.def(
      "first",
      [](const data::TensorDataset& d, int64_t n) {
        const int64_t k = std::min(n, d.size());
        return std::make_shared<data::TensorDataset>(d.inputs().narrow(0, 0, k).contiguous(),
                                                     d.targets().narrow(0, 0, k).contiguous());
      },
      nb::arg("dataset"), nb::arg("n"), "The first n samples of a dataset held in memory.");
}

void bind_loader(nb::module_& m) {
  nb::class_<BatchIterator>(m, "_BatchIterator")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", &BatchIterator::next);
  nb::class_<data::DataLoader>(m, "DataLoader",
                               "Batches of a C++ dataset, shuffled per epoch from `seed`.")
      .def(
          "__init__",
          [](data::DataLoader* self, std::shared_ptr<data::Dataset> dataset, int64_t batch_size,
             bool shuffle, uint64_t seed, bool drop_last, nb::handle device) {
            new (self) data::DataLoader(std::const_pointer_cast<const data::Dataset>(dataset),
                                        {.batch_size = batch_size,
                                         .shuffle = shuffle,
                                         .seed = seed,
                                         .drop_last = drop_last,
                                         .device = device_of(device).value_or(Device::cpu())});
          },
          nb::arg("dataset"), nb::arg("batch_size") = 1, nb::arg("shuffle") = false,
          nb::arg("seed") = 0, nb::arg("drop_last") = false, nb::arg("device") = nb::none())
      .def("__len__", &data::DataLoader::size)
      .def(
          "__iter__", [](data::DataLoader& l) { return new BatchIterator(l); },
          nb::keep_alive<0, 1>(), nb::rv_policy::take_ownership);
}

}  // namespace

void bind_data(nb::module_& root) {
  nb::module_ m = root.def_submodule("data", "Datasets and the DataLoader.");
  bind_datasets(m);
  bind_loader(m);
  nb::module_ models = root.def_submodule("models", "The reference models, as the C++ examples'.");
  nb::class_<nn::Sequential, nn::Module>(models, "Sequential")
      .def("__len__", [](const nn::Sequential& s) { return s.named_children().size(); });
  models.def("mlp", [] { return std::make_shared<nn::Sequential>(nn::models::mlp()); });
  models.def("cnn", [] { return std::make_shared<nn::Sequential>(nn::models::cnn()); });
  models.def(
      "resnet20",
      [](int64_t in_channels) {
        return std::make_shared<nn::Sequential>(nn::models::resnet20(in_channels));
      },
      nb::arg("in_channels") = 3);
}

}  // namespace sinter::python

// sinter._C.data: the C++ datasets (TensorDataset, FashionMNIST) and the DataLoader, iterated from
// Python as torch.utils.data's: each batch an (input, target) pair; the loader's prefetch thread
// runs while Python waits without the GIL. And sinter._C.models: the reference models.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "bind.h"
#include "internal/shuffle.h"

namespace sinter::python {
namespace {

// A DataLoader as Python holds it: one pass at a time. A new pass (a new iterator's first batch)
// supersedes the one before, whose iterator then raises instead of reading the pass the loader has
// dropped; the mutex keeps a pass from starting while another thread waits for a batch.
struct Loader {
  Loader(std::shared_ptr<const data::Dataset> dataset, const data::DataLoaderOptions& options)
      : loader(std::move(dataset), options) {}
  data::DataLoader loader;
  std::mutex mu;
  int64_t generation = 0;
};

class BatchIterator {
 public:
  explicit BatchIterator(Loader& loader) : loader_(loader) {}
  nb::tuple next() {
    if (done_) throw nb::stop_iteration();
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(loader_.mu);
      if (generation_ == 0) {
        generation_ = ++loader_.generation;
        it_ = loader_.loader.begin();
      } else {
        SINTER_CHECK(generation_ == loader_.generation,
                     "DataLoader: another pass over this loader has started since this iterator's; "
                     "a loader runs one pass at a time (make a second DataLoader for two)");
        ++it_;
      }
      done_ = it_ == loader_.loader.end();
    }
    if (done_) throw nb::stop_iteration();
    const data::Batch& b = *it_;
    return nb::make_tuple(b.input, b.target);
  }

 private:
  Loader& loader_;
  data::DataLoader::Iterator it_;
  int64_t generation_ = 0;
  bool done_ = false;
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
  m.def(
      "_shuffled_order",
      [](int64_t n, uint64_t seed, int64_t epoch) {
        SINTER_CHECK(n >= 0, "DataLoader: a dataset of ", n, " samples");
        return sinter::detail::shuffled_order(n, seed, epoch);
      },
      nb::arg("n"), nb::arg("seed"), nb::arg("epoch"),
      "The order in which the C++ DataLoader draws n samples in epoch `epoch` for `seed`.");
}

void bind_loader(nb::module_& m) {
  nb::class_<BatchIterator>(m, "_BatchIterator")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", &BatchIterator::next);
  nb::class_<Loader>(m, "DataLoader", "Batches of a C++ dataset, shuffled per epoch from `seed`.")
      .def(
          "__init__",
          [](Loader* self, std::shared_ptr<data::Dataset> dataset, int64_t batch_size, bool shuffle,
             uint64_t seed, bool drop_last, nb::handle device) {
            new (self) Loader(std::const_pointer_cast<const data::Dataset>(dataset),
                              {.batch_size = batch_size,
                               .shuffle = shuffle,
                               .seed = seed,
                               .drop_last = drop_last,
                               .device = device_of(device).value_or(Device::cpu())});
          },
          nb::arg("dataset"), nb::arg("batch_size") = 1, nb::arg("shuffle") = false,
          nb::arg("seed") = 0, nb::arg("drop_last") = false, nb::arg("device") = nb::none())
      .def("__len__", [](const Loader& l) { return l.loader.size(); })
      .def(
          "__iter__", [](Loader& l) { return new BatchIterator(l); }, nb::keep_alive<0, 1>(),
          nb::rv_policy::take_ownership);
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

// Image data sets read from their distribution files: IDX (MNIST, Fashion-MNIST) and the CIFAR-10
// binary batches, held in memory as TensorDatasets.
#pragma once

#include <string>
#include <vector>

#include "sinter/data/dataset.h"

namespace sinter::data {

// Reads an IDX file of unsigned bytes (type code 0x08), plain or gzip-compressed (.gz), into a u8
// tensor of the dims its header gives. Throws sinter::Error naming the file on a bad magic number,
// a truncated or oversized payload, or a gzip error.
Tensor read_idx(const std::string& path);

// Per-channel normalization applied after scaling pixels to [0, 1]: x = (x - mean[c]) / std[c].
// Empty: none.
struct Normalization {
  std::vector<double> mean;
  std::vector<double> std;
};

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte, or the same names with .gz, under `root`.
// inputs: f32 (N, 1, H, W) in [0, 1] (then normalized); targets: i64 (N) in [0, 9].
class MNIST : public TensorDataset {
 public:
  explicit MNIST(const std::string& root, bool train = true, const Normalization& norm = {});
  static Normalization default_normalization() { return {{0.1307}, {0.3081}}; }

 protected:
  MNIST(const char* name, const std::string& root, bool train, const Normalization& norm);
};

// The same files and layout as MNIST; Debian's dataset-fashion-mnist installs them in kDebianRoot.
class FashionMNIST : public MNIST {
 public:
  static constexpr const char* kDebianRoot = "/usr/share/datasets/fashion-mnist";
  explicit FashionMNIST(const std::string& root = kDebianRoot, bool train = true,
                        const Normalization& norm = {});
  static Normalization default_normalization() { return {{0.2860}, {0.3530}}; }
  // The names of the ten labels, as torchvision's FashionMNIST.classes.
  static const std::vector<std::string>& classes();
};

// Reads data_batch_1.bin ... data_batch_5.bin (train) or test_batch.bin under `root` or under
// root/cifar-10-batches-bin. Records of 3073 bytes: a label, then 32x32 red, green, blue planes.
// inputs: f32 (N, 3, 32, 32) in [0, 1] (then normalized); targets: i64 (N) in [0, 9].
class CIFAR10 : public TensorDataset {
 public:
  explicit CIFAR10(const std::string& root, bool train = true, const Normalization& norm = {});
  static Normalization default_normalization() {
    return {{0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616}};
  }
  // The names of the ten labels, as torchvision's CIFAR10.classes.
  static const std::vector<std::string>& classes();
};

}  // namespace sinter::data

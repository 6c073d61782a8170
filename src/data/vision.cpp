// Readers for IDX files (MNIST, Fashion-MNIST) and CIFAR-10 binary batches; gzip through zlib when
// the build has it. Every error names the file and what is wrong with it.
#include "sinter/data/vision.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include "sinter/autograd.h"
#include "sinter/data/transforms.h"
#include "sinter/ops.h"

#ifdef SINTER_WITH_ZLIB
#include <zlib.h>
#endif

namespace sinter::data {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A whole file's bytes, decompressed when its name ends in .gz.
std::vector<uint8_t> read_file(const std::string& what, const std::string& path) {
#ifndef SINTER_WITH_ZLIB
  SINTER_CHECK(!ends_with(path, ".gz"), what, ": cannot read ", path,
               ": Sinter was built without zlib");
#endif
  SINTER_CHECK(fs::is_regular_file(path), what, ": ", path, " does not exist or is not a file");
  std::vector<uint8_t> bytes;
  if (ends_with(path, ".gz")) {
#ifdef SINTER_WITH_ZLIB
    gzFile f = gzopen(path.c_str(), "rb");
    SINTER_CHECK(f != nullptr, what, ": cannot open ", path, ": ", std::strerror(errno));
    std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(f, gzclose);
    gzbuffer(f, 1 << 17);
    // The buffer doubles from 64 KiB up to steps of 16 MiB, so that a small file costs little.
    for (;;) {
      const size_t old = bytes.size();
      const size_t chunk = std::clamp<size_t>(old, size_t{1} << 16, size_t{1} << 24);
      bytes.resize(old + chunk);
      const int n = gzread(f, bytes.data() + old, static_cast<unsigned>(chunk));
      if (n < 0) {
        int code = 0;
        const char* msg = gzerror(f, &code);
        SINTER_THROW(what, ": ", path, " is not a valid gzip stream: ", msg);
      }
      bytes.resize(old + static_cast<size_t>(n));
      if (static_cast<size_t>(n) < chunk) break;
    }
    // gzread stops quietly at a stream cut short; gzerror then says Z_BUF_ERROR instead of Z_OK.
    int code = 0;
    const char* msg = gzerror(f, &code);
    SINTER_CHECK(code == Z_OK, what, ": ", path, " is a truncated or corrupt gzip stream: ", msg);
#endif
  } else {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    SINTER_CHECK(f != nullptr, what, ": cannot open ", path, ": ", std::strerror(errno));
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, std::fclose);
    bytes.resize(static_cast<size_t>(fs::file_size(path)));
    const size_t n = std::fread(bytes.data(), 1, bytes.size(), f);
    SINTER_CHECK(n == bytes.size(), what, ": read ", n, " of ", bytes.size(), " bytes from ", path);
  }
  return bytes;
}

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// An IDX file: magic 0x00 0x00 <type> <ndims>, ndims big-endian u32 dims, then the data.
struct Idx {
  Shape dims;
  std::vector<uint8_t> bytes;
  size_t data_offset = 0;
};

Idx parse_idx(const std::string& path) {
  Idx idx;
  idx.bytes = read_file("read_idx", path);
  const std::vector<uint8_t>& b = idx.bytes;
  SINTER_CHECK(b.size() >= 4, "read_idx: ", path, " is ", b.size(),
               " bytes long, too short for the 4-byte magic number (truncated?)");
  SINTER_CHECK(b[0] == 0 && b[1] == 0, "read_idx: ", path, " has a bad magic number (first bytes ",
               int{b[0]}, ", ", int{b[1]}, "; an IDX file starts with 0, 0)");
  SINTER_CHECK(b[2] == 0x08, "read_idx: ", path, " has element type code ", int{b[2]},
               "; only unsigned bytes (8) are supported");
  const int ndims = b[3];
  SINTER_CHECK(ndims >= 1, "read_idx: ", path, " declares 0 dims");
  const size_t header = 4 + 4 * static_cast<size_t>(ndims);
  SINTER_CHECK(b.size() >= header, "read_idx: ", path, " is truncated: ", b.size(),
               " bytes, but its ", ndims, " dims need a ", header, "-byte header");
  int64_t numel = 1, extent = 1;
  for (int d = 0; d < ndims; ++d) {
    const int64_t n = big_endian_u32(&b[4 + 4 * static_cast<size_t>(d)]);
    idx.dims.push_back(n);
    // Cannot overflow: each factor is < 2^32 and the running product is checked against the file.
    numel *= n;
    SINTER_CHECK(numel <= static_cast<int64_t>(b.size()), "read_idx: ", path, " declares dims ",
                 shape_str(idx.dims), "..., more elements than the file has bytes (", b.size(),
                 ")");
    // With a zero dim numel stays 0, but the tensor's strides still multiply the other dims.
    SINTER_CHECK(!__builtin_mul_overflow(extent, std::max<int64_t>(n, 1), &extent),
                 "read_idx: ", path, " declares dims ", shape_str(idx.dims),
                 "..., too large for a tensor");
  }
  const size_t have = b.size() - header;
  SINTER_CHECK(have == static_cast<size_t>(numel), "read_idx: ", path, " declares dims ",
               shape_str(idx.dims), " (", numel, " bytes of data) but holds ", have,
               " bytes after its header", have < static_cast<size_t>(numel) ? " (truncated)" : "");
  idx.data_offset = header;
  return idx;
}

// root/name, or root/name.gz when only that exists.
std::string find_file(const char* what, const std::string& root, const std::string& name) {
  const fs::path plain = fs::path(root) / name;
  if (fs::exists(plain)) return plain.string();
  const fs::path gz = fs::path(root) / (name + ".gz");
  if (fs::exists(gz)) return gz.string();
  SINTER_THROW(what, ": neither ", plain.string(), " nor ", gz.string(), " exists");
}

Tensor labels_to_i64(const char* what, const std::string& path, const uint8_t* p, int64_t n) {
  Tensor t = empty({n}, {.dtype = DType::i64});
  int64_t* dst = t.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    SINTER_CHECK(p[i] <= 9, what, ": ", path, " holds label ", int{p[i]}, " at record ", i,
                 "; labels are 0..9");
    dst[i] = p[i];
  }
  return t;
}

Tensor apply_norm(const Tensor& x, const Normalization& norm) {
  if (norm.mean.empty() && norm.std.empty()) return x;
  return normalize(x, norm.mean, norm.std);
}

}  // namespace

Tensor read_idx(const std::string& path) {
  Idx idx = parse_idx(path);
  Tensor t = empty(idx.dims, {.dtype = DType::u8});
  if (t.numel() > 0) {
    std::memcpy(t.data_ptr(), idx.bytes.data() + idx.data_offset, static_cast<size_t>(t.numel()));
  }
  return t;
}

MNIST::MNIST(const std::string& root, bool train, const Normalization& norm)
    : MNIST("MNIST", root, train, norm) {}

MNIST::MNIST(const char* name, const std::string& root, bool train, const Normalization& norm) {
  const std::string split = train ? "train" : "t10k";
  const std::string images_path = find_file(name, root, split + "-images-idx3-ubyte");
  const std::string labels_path = find_file(name, root, split + "-labels-idx1-ubyte");
  Idx images = parse_idx(images_path);
  SINTER_CHECK(images.dims.size() == 3, name, ": ", images_path, " has dims ",
               shape_str(images.dims), "; images need 3 (count, height, width)");
  Idx labels = parse_idx(labels_path);
  SINTER_CHECK(labels.dims.size() == 1, name, ": ", labels_path, " has dims ",
               shape_str(labels.dims), "; labels need 1 (count)");
  SINTER_CHECK(images.dims[0] == labels.dims[0], name, ": ", images_path, " holds ", images.dims[0],
               " images but ", labels_path, " holds ", labels.dims[0], " labels");
  const int64_t n = images.dims[0], h = images.dims[1], w = images.dims[2];
  Tensor x = empty({n, 1, h, w});
  float* dst = x.data<float>();
  const uint8_t* src = images.bytes.data() + images.data_offset;
  for (int64_t i = 0; i < n * h * w; ++i) dst[i] = static_cast<float>(src[i]) * (1.0f / 255.0f);
  Tensor y = labels_to_i64(name, labels_path, labels.bytes.data() + labels.data_offset, n);
  NoGradGuard no_grad;
  reset(apply_norm(x, norm), y);
}

const std::vector<std::string>& FashionMNIST::classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                 "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                 "Bag",         "Ankle boot"};
  return names;
}

const std::vector<std::string>& CIFAR10::classes() {
  static const std::vector<std::string> names = {
      "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  return names;
}

FashionMNIST::FashionMNIST(const std::string& root, bool train, const Normalization& norm)
    : MNIST("FashionMNIST", root, train, norm) {}

CIFAR10::CIFAR10(const std::string& root, bool train, const Normalization& norm) {
  constexpr int64_t kRecord = 1 + 3 * 32 * 32;
  std::vector<std::string> names;
  if (train) {
    for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  } else {
    names.push_back("test_batch.bin");
  }
  fs::path dir = root;
  if (!fs::exists(dir / names[0]) && fs::exists(dir / "cifar-10-batches-bin" / names[0])) {
    dir /= "cifar-10-batches-bin";
  }
  std::vector<std::pair<std::string, std::vector<uint8_t>>> files;
  int64_t n = 0;
  for (const std::string& name : names) {
    const std::string path = (dir / name).string();
    std::vector<uint8_t> bytes = read_file("CIFAR10", path);
    const auto size = static_cast<int64_t>(bytes.size());
    SINTER_CHECK(size > 0, "CIFAR10: ", path, " is empty");
    SINTER_CHECK(size % kRecord == 0, "CIFAR10: ", path, " is ", size,
                 " bytes, not a multiple of the 3073-byte record (truncated or not a CIFAR-10 "
                 "binary batch)");
    n += size / kRecord;
    files.emplace_back(path, std::move(bytes));
  }
  // Record: label, then the image as (3, 32, 32) bytes, which is already NCHW order.
  Tensor x = empty({n, 3, 32, 32});
  Tensor y = empty({n}, {.dtype = DType::i64});
  float* xd = x.data<float>();
  int64_t* yd = y.data<int64_t>();
  int64_t row = 0;
  for (const auto& [path, bytes] : files) {
    const auto records = static_cast<int64_t>(bytes.size()) / kRecord;
    for (int64_t r = 0; r < records; ++r, ++row) {
      const uint8_t* rec = bytes.data() + r * kRecord;
      SINTER_CHECK(rec[0] <= 9, "CIFAR10: ", path, " holds label ", int{rec[0]}, " at record ", r,
                   "; labels are 0..9");
      yd[row] = rec[0];
      float* img = xd + row * (kRecord - 1);
      for (int64_t i = 0; i < kRecord - 1; ++i) img[i] = static_cast<float>(rec[1 + i]) / 255.0f;
    }
  }
  NoGradGuard no_grad;
  reset(apply_norm(x, norm), y);
}

}  // namespace sinter::data

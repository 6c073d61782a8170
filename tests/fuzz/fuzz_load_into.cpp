// libFuzzer target: an input is a safetensors file loaded into a small model with load_into, strict
// or not (the input's last byte picks). The load succeeds, or throws a sinter::Error naming the
// file and leaves every parameter and buffer of the model as it was, bit for bit.
#include <cstdint>
#include <cstring>
#include <memory>

#include "fuzz_util.h"
#include "sinter/io.h"
#include "sinter/nn.h"

namespace {

using namespace sinter;

// A model with f32 parameters, f32 buffers and an i64 buffer (BatchNorm's step count).
std::shared_ptr<nn::Sequential> make_model() {
  return std::make_shared<nn::Sequential>(nn::Conv2d(1, 2, 3), nn::BatchNorm2d(2), nn::Flatten(),
                                          nn::Linear(8, 3));
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(),
                     static_cast<size_t>(x.numel()) * element_size(x.dtype())) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<nn::Sequential> model = make_model();
  static const StateDict original = [] {
    StateDict copy;
    for (const auto& [name, t] : model->state_dict()) copy[name] = t.clone();
    return copy;
  }();
  const std::string path = fuzz::write_file("model.safetensors", data, size);
  const bool strict = size == 0 || data[size - 1] % 2 == 0;
  StateDict target = model->state_dict();
  const bool ok = fuzz::reads_or_names_the_file(path, [&] { (void)load_into(target, path, strict); });
  for (const auto& [name, t] : model->state_dict()) {
    if (!ok && !same_bits(t, original.at(name))) {
      fuzz::fail("a failed load_into changed " + name);
    }
    t.detach().copy_(original.at(name));  // the next input starts from the same model
  }
  return 0;
}

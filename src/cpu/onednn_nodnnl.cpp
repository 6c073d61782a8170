// The stand-in for src/cpu/onednn_dnnl.cpp in a build without oneDNN: every convolution and GEMM
// runs in the library's own kernels.
#include <atomic>

#include "cpu/onednn.h"
#include "sinter/core/parallel.h"

namespace sinter {

namespace {
std::atomic<bool> g_wanted{true};
}  // namespace

void set_onednn_enabled(bool on) { g_wanted.store(on); }
bool onednn_enabled() { return false; }
bool onednn_available() { return false; }

namespace cpu::onednn {

bool conv2d_forward(const kern::Conv2dGeom&, DType, const void*, const void*, const void*, void*) {
  return false;
}
bool conv2d_backward_input(const kern::Conv2dGeom&, DType, const void*, const void*, void*) {
  return false;
}
bool conv2d_backward_weight(const kern::Conv2dGeom&, DType, const void*, const void*, void*) {
  return false;
}

bool gemm(DType, bool, bool, int64_t, int64_t, int64_t, const void*, int64_t, const void*, int64_t,
          float*, int64_t, const GemmBatch&) {
  return false;
}

void set_bf16_products(Bf16Products) {}
bool bf16_dot_products() { return false; }
int64_t calls() { return 0; }
int64_t calls_with_signals_held() { return 0; }

}  // namespace cpu::onednn
}  // namespace sinter

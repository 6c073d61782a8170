// The int8 inference plans' rows (Note [cpu inference plan] in src/cpu/infer_plan_dnnl.cpp): the
// input's quantization and the f32 epilogue of the int32 sums, compiled for AVX-512, AVX2 and the
// baseline (src/cpu/vec_clones.h), with the bits of kern::quantize_int8 and kern::int8_epilogue
// on every CPU (no contraction into fused multiply-adds: CMakeLists.txt).
#include <cstdint>

#include "cpu/vec_clones.h"
#include "cpu/vec_rows.h"

namespace sinter::cpu::vec {

SINTER_VECTOR_CLONES void quantize_int8_row(const float* x, int64_t n, float scale, int8_t* q) {
  for (int64_t i = 0; i < n; ++i) {
    // kern::quantize_int8: NaN to 0, saturated to [-128, 127], else rounded half to even.
    float v = x[i] / scale;
    v = v == v ? v : 0.0F;
    v = v < -128.0F ? -128.0F : v;
    v = v > 127.0F ? 127.0F : v;
    q[i] = static_cast<int8_t>(static_cast<int32_t>(__builtin_rintf(v)));
  }
}

SINTER_VECTOR_CLONES void int8_epilogue_row(const int32_t* acc, int64_t n, const float* scale,
                                            const float* shift, bool relu, const float* res,
                                            float* out) {
  if (res == nullptr && !relu) {
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(acc[j]) * scale[j] + shift[j];
  } else if (res == nullptr) {
    for (int64_t j = 0; j < n; ++j) {
      const float v = static_cast<float>(acc[j]) * scale[j] + shift[j];
      out[j] = v < 0.0F ? 0.0F : v;  // kern::int8_epilogue's relu: NaN and -0 stay
    }
  } else if (!relu) {
    for (int64_t j = 0; j < n; ++j) {
      out[j] = (static_cast<float>(acc[j]) * scale[j] + shift[j]) + res[j];
    }
  } else {
    for (int64_t j = 0; j < n; ++j) {
      const float v = (static_cast<float>(acc[j]) * scale[j] + shift[j]) + res[j];
      out[j] = (v > 0.0F || v != v) ? v : 0.0F;  // the relu op's: NaN stays, -0 becomes 0
    }
  }
}

}  // namespace sinter::cpu::vec

// Element types: the DType enum, its sizes and names, and host-side 16-bit float types.
#pragma once

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>

namespace sinter {

// X(dtype, C++ element type, bytes, name, safetensors name): one row per dtype, in enum order. The
// enum, element_size, dtype_name, dtype_of and the safetensors names come from it.
#define SINTER_DTYPES(X)               \
  X(f32, float, 4, "f32", "F32")       \
  X(f64, double, 8, "f64", "F64")      \
  X(bf16, BFloat16, 2, "bf16", "BF16") \
  X(f16, Half, 2, "f16", "F16")        \
  X(i64, int64_t, 8, "i64", "I64")     \
  X(i32, int32_t, 4, "i32", "I32")     \
  X(u8, uint8_t, 1, "u8", "U8")        \
  X(b8, bool, 1, "bool", "BOOL")

#define SINTER_DTYPE_ENUM_(dt, type, bytes, name, st) dt,
enum class DType : uint8_t { SINTER_DTYPES(SINTER_DTYPE_ENUM_) };
#undef SINTER_DTYPE_ENUM_

#define SINTER_DTYPE_COUNT_(dt, type, bytes, name, st) +1
constexpr int kNumDTypes = 0 SINTER_DTYPES(SINTER_DTYPE_COUNT_);
#undef SINTER_DTYPE_COUNT_

size_t element_size(DType t);
const char* dtype_name(DType t);
inline bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16;
}
inline bool is_integral(DType t) { return !is_floating(t); }

// The dtype two operands of a binary op compute and return in, by PyTorch's rules: the categories
// rank bool < integers < floating, and the higher category wins; within one, the wider type (u8 <
// i32 < i64; f16, bf16 < f32 < f64), with f16 and bf16 together giving f32.
DType promote_types(DType a, DType b);
std::ostream& operator<<(std::ostream& os, DType t);

// IEEE binary16. Conversions round to nearest even.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f);           // NOLINT(google-explicit-constructor)
  operator float() const;  // NOLINT(google-explicit-constructor)
};

// bfloat16: the top half of a float32. Conversions round to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) {  // NOLINT(google-explicit-constructor)
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    } else {
      bits = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
  }
  operator float() const {  // NOLINT(google-explicit-constructor)
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// Maps a C++ element type to its DType.
template <typename T>
struct dtype_of;
#define SINTER_DTYPE_OF_(dt, type, bytes, name, st) \
  template <>                                       \
  struct dtype_of<type> {                           \
    static constexpr DType value = DType::dt;       \
  };
SINTER_DTYPES(SINTER_DTYPE_OF_)
#undef SINTER_DTYPE_OF_

}  // namespace sinter

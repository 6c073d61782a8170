// Element types: the DType enum, its sizes and names, and host-side 16-bit float types.
#pragma once

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>

namespace sinter {

enum class DType : uint8_t { f32, f64, bf16, f16, i64, i32, u8, b8 };

constexpr int kNumDTypes = 8;

size_t element_size(DType t);
const char* dtype_name(DType t);
inline bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16;
}
inline bool is_integral(DType t) { return !is_floating(t); }
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
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct dtype_of<BFloat16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct dtype_of<Half> {
  static constexpr DType value = DType::f16;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr DType value = DType::u8;
};
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::b8;
};

}  // namespace sinter

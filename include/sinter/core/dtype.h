// Element types: the DType enum, its sizes and names, and host-side 16-bit float types.
#pragma once

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>

namespace sinter {

// X(dtype, C++ element type, bytes, name, safetensors name): one row per dtype, in enum order. The
// enum, element_size, dtype_name, dtype_of and the safetensors names come from it. The float8
// dtypes (Note [float8]) store, copy and convert; arithmetic on them is an error, as in PyTorch.
#define SINTER_DTYPES(X)                        \
  X(f32, float, 4, "f32", "F32")                \
  X(f64, double, 8, "f64", "F64")               \
  X(bf16, BFloat16, 2, "bf16", "BF16")          \
  X(f16, Half, 2, "f16", "F16")                 \
  X(i64, int64_t, 8, "i64", "I64")              \
  X(i32, int32_t, 4, "i32", "I32")              \
  X(u8, uint8_t, 1, "u8", "U8")                 \
  X(b8, bool, 1, "bool", "BOOL")                \
  X(f8e4m3, Float8E4M3, 1, "f8e4m3", "F8_E4M3") \
  X(f8e5m2, Float8E5M2, 1, "f8e5m2", "F8_E5M2")

#define SINTER_DTYPE_ENUM_(dt, type, bytes, name, st) dt,
enum class DType : uint8_t { SINTER_DTYPES(SINTER_DTYPE_ENUM_) };
#undef SINTER_DTYPE_ENUM_

#define SINTER_DTYPE_COUNT_(dt, type, bytes, name, st) +1
constexpr int kNumDTypes = 0 SINTER_DTYPES(SINTER_DTYPE_COUNT_);
#undef SINTER_DTYPE_COUNT_

size_t element_size(DType t);
const char* dtype_name(DType t);
inline bool is_float8(DType t) { return t == DType::f8e4m3 || t == DType::f8e5m2; }
// The float8 dtypes are floating, as PyTorch's is_floating_point says, though no arithmetic takes
// them.
inline bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16 || is_float8(t);
}
inline bool is_integral(DType t) { return !is_floating(t); }

// The dtype two operands of a binary op compute and return in, by PyTorch's rules: the categories
// rank bool < integers < floating, and the higher category wins; within one, the wider type (u8 <
// i32 < i64; f16, bf16 < f32 < f64), with f16 and bf16 together giving f32. A float8 dtype
// promotes only with itself: with any other it is an error, as in PyTorch.
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

// Note [float8]
// The OCP 8-bit floating point formats (OCP 8-bit Floating Point Specification, OFP8, 2023), as
// PyTorch's float8_e4m3fn and float8_e5m2 are: a sign bit, then
//   E4M3: 4 exponent bits (bias 7), 3 mantissa bits; no infinities; S.1111.111 is NaN, so the
//         largest value is S.1111.110 = 448; subnormals down to 2^-9.
//   E5M2: 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like: S.11111.00 is infinity,
//         S.11111.{01,10,11} NaN; the largest finite value 57344; subnormals down to 2^-16.
// From a float, conversions round to nearest even (a value halfway between two representable
// ones goes to the one with the even mantissa), whatever the floating-point rounding mode, as
// PyTorch's casts do (tests/python/test_float8.py: every code and rounding boundary against its
// float8 dtypes, 2.15): what rounds past the largest value becomes +-448 in E4M3 (above 464, and
// the infinities: E4M3 has none, and PyTorch's casts saturate there; its older scalar type gave
// NaN) and infinity in E5M2 (61440 and above, as IEEE formats round); a NaN stays NaN with its
// sign (S.1111.111, S.11111.11). saturated() clamps to the largest finite value first (NaN stays
// NaN), the clamp of scaled quantization: the same as the cast in E4M3, not in E5M2. A double
// converts through float, as PyTorch's c10 types take a float. The formulas are integer arithmetic
// on the float's bits (src/kern/float8.h), shared with the CUDA copies.
// As tensor dtypes (f8e4m3, f8e5m2; PyTorch's names in Python) they store, copy, fill, convert with
// .to() from and to every dtype (integers and bool by way of float), print, and save in safetensors
// as F8_E4M3 and F8_E5M2. Arithmetic on them, and their promotion with any other dtype, is an error
// naming the dtype, as in PyTorch: scaled FP8 compute goes through sinter::fp8.
struct Float8E4M3 {
  static constexpr float kMax = 448.0f;
  uint8_t bits = 0;
  Float8E4M3() = default;
  Float8E4M3(float f);  // NOLINT(google-explicit-constructor)
  static Float8E4M3 saturated(float f);
  static Float8E4M3 from_bits(uint8_t b) {
    Float8E4M3 v;
    v.bits = b;
    return v;
  }
  operator float() const;  // NOLINT(google-explicit-constructor)
};

struct Float8E5M2 {
  static constexpr float kMax = 57344.0f;
  uint8_t bits = 0;
  Float8E5M2() = default;
  Float8E5M2(float f);  // NOLINT(google-explicit-constructor)
  static Float8E5M2 saturated(float f);
  static Float8E5M2 from_bits(uint8_t b) {
    Float8E5M2 v;
    v.bits = b;
    return v;
  }
  operator float() const;  // NOLINT(google-explicit-constructor)
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

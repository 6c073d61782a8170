// DType sizes and names, and the binary16 conversions of Half.
#include "sinter/core/dtype.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "kern/float8.h"
#include "sinter/core/error.h"

namespace sinter {

namespace {

// Whether t is one of the enum's values, so that a lookup in a table of SINTER_DTYPES rows (in enum
// order) stays in bounds.
bool in_range(DType t) { return static_cast<int>(t) < kNumDTypes; }

#define SINTER_DTYPE_SIZE_(dt, type, bytes, name, st) bytes,
constexpr size_t kElementSizes[] = {SINTER_DTYPES(SINTER_DTYPE_SIZE_)};
#undef SINTER_DTYPE_SIZE_

#define SINTER_DTYPE_NAME_(dt, type, bytes, name, st) name,
constexpr const char* kNames[] = {SINTER_DTYPES(SINTER_DTYPE_NAME_)};
#undef SINTER_DTYPE_NAME_

}  // namespace

size_t element_size(DType t) { return in_range(t) ? kElementSizes[static_cast<int>(t)] : 0; }

const char* dtype_name(DType t) { return in_range(t) ? kNames[static_cast<int>(t)] : "?"; }

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

namespace {

// The rank of t within its category (bool, integers, floating) for promote_types.
int width_rank(DType t) {
  switch (t) {
    case DType::b8:
      return 0;
    case DType::u8:
    case DType::f16:
    case DType::bf16:
      return 1;
    case DType::i32:
    case DType::f32:
      return 2;
    case DType::i64:
    case DType::f64:
      return 3;
    case DType::f8e4m3:
    case DType::f8e5m2:
      return 0;  // promote_types refuses them before it asks
  }
  return 0;
}

int category(DType t) { return t == DType::b8 ? 0 : is_floating(t) ? 2 : 1; }

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  SINTER_CHECK(!is_float8(a) && !is_float8(b), "promote_types: ", a, " and ", b,
               " do not promote (a float8 dtype promotes with no other, as in PyTorch); convert "
               "with .to() first");
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if (width_rank(a) == width_rank(b)) return DType::f32;  // f16 and bf16
  return width_rank(a) > width_rank(b) ? a : b;
}

Half::Half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) {  // NaN
    bits = static_cast<uint16_t>(sign | 0x7e00u);
    return;
  }
  if (absx >= 0x477ff000u) {  // rounds to >= 65520: infinity
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (absx < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // Scale into units of 2^-24 and round to nearest even in float arithmetic.
    float a;
    std::memcpy(&a, &absx, 4);
    const float units = std::nearbyint(a * 16777216.0f);
    bits = static_cast<uint16_t>(sign | static_cast<uint32_t>(units));
    return;
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
  uint32_t h = ((absx - 0x38000000u) >> 13);
  const uint32_t rest = absx & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  bits = static_cast<uint16_t>(sign | h);
}

Half::operator float() const {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t man = bits & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);
    std::memcpy(&out, &v, 4);
    out |= sign;
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (man << 13);
  } else {
    out = sign | ((exp + 112u) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

Float8E4M3::Float8E4M3(float f) : bits(kern::float8_encode(f, kern::e4m3_format())) {}
Float8E4M3 Float8E4M3::saturated(float f) { return Float8E4M3(kern::clamp_finite(f, kMax)); }
Float8E4M3::operator float() const { return kern::float8_decode(bits, kern::e4m3_format()); }

Float8E5M2::Float8E5M2(float f) : bits(kern::float8_encode(f, kern::e5m2_format())) {}
Float8E5M2 Float8E5M2::saturated(float f) { return Float8E5M2(kern::clamp_finite(f, kMax)); }
Float8E5M2::operator float() const { return kern::float8_decode(bits, kern::e5m2_format()); }

}  // namespace sinter

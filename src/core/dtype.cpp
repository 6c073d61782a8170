// DType sizes and names, and the binary16 conversions of Half.
#include "sinter/core/dtype.h"

#include <cmath>
#include <cstdint>
#include <limits>

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
  }
  return 0;
}

int category(DType t) { return t == DType::b8 ? 0 : is_floating(t) ? 2 : 1; }

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
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

namespace {

// An OFP8 format (Note [float8]): exponent bias, mantissa bits, and how overflow and NaN encode.
struct Float8Format {
  int bias, mantissa;
  uint8_t nan;        // the NaN a NaN converts to (sign apart)
  uint8_t overflow;   // what a value rounding past the largest finite one becomes
  uint8_t first_bad;  // the first code (sign apart) that is not a finite value
};

constexpr Float8Format kE4M3{7, 3, 0x7f, 0x7e, 0x7f};
constexpr Float8Format kE5M2{15, 2, 0x7f, 0x7c, 0x7c};

// The code of f rounded to nearest even in format `fmt`: the magnitude scaled by a power of two
// (exact in double) to units of the quantum of its binade (the subnormal quantum below the
// smallest normal), then rounded to the nearest integer, ties to even, by its integer part and
// fraction (both exact), so that the floating-point rounding mode does not matter.
uint8_t float8_encode(float f, const Float8Format& fmt) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  if (std::isnan(f)) return static_cast<uint8_t>(sign | fmt.nan);
  const double a = std::fabs(static_cast<double>(f));
  if (std::isinf(a)) return static_cast<uint8_t>(sign | fmt.overflow);
  const int emin = 1 - fmt.bias;  // the smallest normal binade's exponent
  const int full = 1 << fmt.mantissa;
  int e = emin;
  if (a >= std::ldexp(1.0, emin)) {
    std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
    e -= 1;             // a in [2^e, 2^(e + 1))
  }
  const double x = std::ldexp(a, fmt.mantissa - e);  // under 2^(mantissa + 1)
  const double whole = std::floor(x), fraction = x - whole;
  int64_t n = static_cast<int64_t>(whole);
  if (fraction > 0.5 || (fraction == 0.5 && (n & 1) == 1)) ++n;
  int code;
  if (e == emin && n < full) {
    code = static_cast<int>(n);  // subnormal (or zero)
  } else {
    if (n == 2 * full) {  // rounded up into the next binade
      n = full;
      ++e;
    }
    // A float's exponent is at most 127: past the format's largest, the code passes first_bad.
    code = static_cast<int>(((e + fmt.bias) << fmt.mantissa) | (n - full));
  }
  if (code >= fmt.first_bad) return static_cast<uint8_t>(sign | fmt.overflow);
  return static_cast<uint8_t>(sign | code);
}

float float8_decode(uint8_t bits, const Float8Format& fmt) {
  const bool negative = (bits & 0x80) != 0;
  const int code = bits & 0x7f;
  float v;
  if (code >= fmt.first_bad) {
    v = code == fmt.overflow && fmt.overflow != fmt.nan ? std::numeric_limits<float>::infinity()
                                                        : std::numeric_limits<float>::quiet_NaN();
  } else {
    const int field = code >> fmt.mantissa, m = code & ((1 << fmt.mantissa) - 1);
    v = field == 0 ? std::ldexp(static_cast<float>(m), 1 - fmt.bias - fmt.mantissa)
                   : std::ldexp(static_cast<float>((1 << fmt.mantissa) + m),
                                field - fmt.bias - fmt.mantissa);
  }
  return negative ? -v : v;
}

float clamp_to(float f, float max) {
  if (std::isnan(f)) return f;
  return f > max ? max : f < -max ? -max : f;
}

}  // namespace

Float8E4M3::Float8E4M3(float f) : bits(float8_encode(f, kE4M3)) {}
Float8E4M3 Float8E4M3::saturated(float f) { return Float8E4M3(clamp_to(f, kMax)); }
Float8E4M3::operator float() const { return float8_decode(bits, kE4M3); }

Float8E5M2::Float8E5M2(float f) : bits(float8_encode(f, kE5M2)) {}
Float8E5M2 Float8E5M2::saturated(float f) { return Float8E5M2(clamp_to(f, kMax)); }
Float8E5M2::operator float() const { return float8_decode(bits, kE5M2); }

}  // namespace sinter

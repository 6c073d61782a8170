// The 8-bit float conversions of Note [float8] as integer arithmetic on a float's bits, one formula
// for the host types (Float8E4M3, Float8E5M2) and the CUDA kernels; and SINTER_HD, which marks the
// functions the host and the device share.
#pragma once

#include <cstdint>
#include <cstring>

#ifndef SINTER_HD
#if defined(__CUDACC__)
#define SINTER_HD __host__ __device__
#else
#define SINTER_HD
#endif
#endif

namespace sinter::kern {

// An OFP8 format: exponent bias, mantissa bits, and how overflow and NaN encode.
struct Float8Format {
  int bias, mantissa;
  uint32_t nan;        // the NaN a NaN converts to (sign apart)
  uint32_t overflow;   // what a value rounding past the largest finite one becomes
  uint32_t first_bad;  // the first code (sign apart) that is not a finite value
};

// Functions rather than constants, which device code could not take.
SINTER_HD constexpr Float8Format e4m3_format() { return {7, 3, 0x7f, 0x7e, 0x7f}; }
SINTER_HD constexpr Float8Format e5m2_format() { return {15, 2, 0x7f, 0x7c, 0x7c}; }

SINTER_HD inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

SINTER_HD inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// n >> s rounded to nearest, ties to the even result (s in [1, 31]).
SINTER_HD inline uint32_t shift_round_even(uint32_t n, int s) {
  const uint32_t q = n >> s, rest = n & ((1u << s) - 1), half = 1u << (s - 1);
  return q + (rest > half || (rest == half && (q & 1u)) ? 1u : 0u);
}

// The code of f rounded to nearest even in `fmt`. A normal result keeps the float's exponent and
// rounds its 23-bit mantissa to fmt.mantissa bits (a carry moves into the exponent, as the code is
// one integer); a subnormal result is the significand shifted to units of the smallest
// subnormal, rounded the same way. Integer arithmetic only: the floating-point rounding mode does
// not matter.
SINTER_HD inline uint8_t float8_encode(float f, Float8Format fmt) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | fmt.nan);
  if (a == 0x7f800000u) return static_cast<uint8_t>(sign | fmt.overflow);
  const int e = static_cast<int>(a >> 23);  // the float's biased exponent
  const uint32_t m = a & 0x7fffffu;
  const int field = e - 127 + fmt.bias;  // the exponent field the result would have
  uint32_t code;
  if (field >= 1) {
    const uint32_t shifted = (static_cast<uint32_t>(field) << 23 | m);
    code = shift_round_even(shifted, 23 - fmt.mantissa);
  } else {
    // value = significand * 2^(max(e, 1) - 150); in units of 2^(1 - bias - mantissa).
    const uint32_t significand = e == 0 ? m : (m | 0x800000u);
    const int s = 151 - fmt.bias - fmt.mantissa - (e == 0 ? 1 : e);
    code = s > 25 ? 0u : shift_round_even(significand, s);  // under half the smallest: zero
  }
  if (code >= fmt.first_bad) return static_cast<uint8_t>(sign | fmt.overflow);
  return static_cast<uint8_t>(sign | code);
}

SINTER_HD inline float float8_decode(uint8_t bits, Float8Format fmt) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x80u) << 24, code = bits & 0x7fu;
  if (code >= fmt.first_bad) {
    const bool inf = code == fmt.overflow && fmt.overflow != fmt.nan;
    return bits_float(sign | (inf ? 0x7f800000u : 0x7fc00000u));
  }
  const uint32_t field = code >> fmt.mantissa, m = code & ((1u << fmt.mantissa) - 1);
  if (field == 0) {  // m * 2^(1 - bias - mantissa), exact in float
    const float unit = bits_float(static_cast<uint32_t>(128 - fmt.bias - fmt.mantissa) << 23);
    return bits_float(sign | float_bits(static_cast<float>(m) * unit));
  }
  const auto biased = static_cast<uint32_t>(static_cast<int>(field) - fmt.bias + 127);
  return bits_float(sign | biased << 23 | m << (23 - fmt.mantissa));
}

// The clamp of scaled quantization: to [-max, max], NaN unchanged.
SINTER_HD inline float clamp_finite(float f, float max) {
  if (!(f == f)) return f;
  return f > max ? max : f < -max ? -max : f;
}

}  // namespace sinter::kern

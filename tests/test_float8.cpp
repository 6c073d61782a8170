// The 8-bit float conversions of Note [float8]: every one of the 256 codes of E4M3 and E5M2
// against the specification's value written out here, encoding each value back to its code, every
// rounding boundary between neighbouring values (ties to the even mantissa, a hair either side to
// the nearer), overflow to the largest value (E4M3) or infinity (E5M2), NaN, signed zero, and the
// saturating form. tests/python/test_float8.py holds them against PyTorch's float8 dtypes.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "sinter/core/dtype.h"

namespace sinter {
namespace {

struct Format {
  const char* name;
  int exponent_bits, mantissa_bits, bias;
  bool ieee;  // E5M2: the top exponent is infinity and NaN; E4M3: only S.1111.111 is NaN
};

constexpr Format kE4M3{"e4m3", 4, 3, 7, false};
constexpr Format kE5M2{"e5m2", 5, 2, 15, true};

// The specification's value of `code`.
double spec_value(const Format& f, int code) {
  const int sign = code >> 7, e = (code >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int m = code & ((1 << f.mantissa_bits) - 1);
  const int top = (1 << f.exponent_bits) - 1;
  double v;
  if (f.ieee && e == top) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.ieee && e == top && m == (1 << f.mantissa_bits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.mantissa_bits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -f.mantissa_bits), e - f.bias);
  }
  return sign ? -v : v;
}

uint8_t encode(const Format& f, float v) {
  return f.ieee ? Float8E5M2(v).bits : Float8E4M3(v).bits;
}
float decode(const Format& f, int code) {
  const auto b = static_cast<uint8_t>(code);
  return f.ieee ? static_cast<float>(Float8E5M2::from_bits(b))
                : static_cast<float>(Float8E4M3::from_bits(b));
}

TEST(Float8, EveryCodeDecodesToTheSpecificationsValueAndBack) {
  for (const Format& f : {kE4M3, kE5M2}) {
    SCOPED_TRACE(f.name);
    int nans = 0, infinities = 0;
    for (int code = 0; code < 256; ++code) {
      const double want = spec_value(f, code);
      const float got = decode(f, code);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << "code " << code;
        ++nans;
        continue;
      }
      EXPECT_EQ(static_cast<double>(got), want) << "code " << code;
      EXPECT_EQ(std::signbit(got), (code & 0x80) != 0) << "code " << code;
      if (std::isinf(want)) ++infinities;
      EXPECT_EQ(encode(f, got), code) << "value " << got;  // -0 included
    }
    EXPECT_EQ(nans, f.ieee ? 6 : 2);
    EXPECT_EQ(infinities, f.ieee ? 2 : 0);
  }
  EXPECT_EQ(static_cast<float>(Float8E4M3::from_bits(0x7e)), Float8E4M3::kMax);
  EXPECT_EQ(static_cast<float>(Float8E5M2::from_bits(0x7b)), Float8E5M2::kMax);
  EXPECT_EQ(static_cast<float>(Float8E4M3::from_bits(0x01)), std::ldexp(1.0f, -9));
  EXPECT_EQ(static_cast<float>(Float8E5M2::from_bits(0x01)), std::ldexp(1.0f, -16));
}

// Between each pair of neighbouring finite values (of either sign): the midpoint goes to the code
// with the even mantissa, and the floats just below and above it to the nearer neighbour.
TEST(Float8, RoundsToNearestEvenAtEveryBoundary) {
  for (const Format& f : {kE4M3, kE5M2}) {
    SCOPED_TRACE(f.name);
    for (int sign : {0, 0x80}) {
      for (int code = 0; code < 127; ++code) {
        const int lo = sign | code, hi = sign | (code + 1);
        const double a = spec_value(f, lo), b = spec_value(f, hi);
        if (!std::isfinite(a) || !std::isfinite(b)) continue;
        const auto mid = static_cast<float>((a + b) / 2);  // exact: a few bits each
        ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
        const int even = (code & 1) == 0 ? lo : hi;
        EXPECT_EQ(encode(f, mid), even) << "midpoint " << mid;
        const float toward_a = std::nextafter(mid, static_cast<float>(a));
        const float toward_b = std::nextafter(mid, static_cast<float>(b));
        EXPECT_EQ(encode(f, toward_a), lo) << toward_a;
        EXPECT_EQ(encode(f, toward_b), hi) << toward_b;
      }
    }
  }
}

// Past the largest value: E4M3 has no infinity, and what rounds past 448 (above 464, the midpoint
// to the 480 it cannot hold) is 448, infinities too, as PyTorch's casts saturate; E5M2 rounds to
// infinity from 61440, the midpoint between 57344 and 65536, as IEEE formats do. NaN stays NaN.
TEST(Float8, OverflowAndNaN) {
  EXPECT_EQ(Float8E4M3(464.0f).bits, 0x7e);  // the tie goes to 448's even mantissa
  EXPECT_EQ(Float8E4M3(std::nextafter(464.0f, 500.0f)).bits, 0x7e);
  EXPECT_EQ(Float8E4M3(-1e9f).bits, 0xfe);
  EXPECT_EQ(Float8E4M3(std::numeric_limits<float>::infinity()).bits, 0x7e);
  EXPECT_EQ(Float8E4M3(-std::numeric_limits<float>::infinity()).bits, 0xfe);
  EXPECT_EQ(Float8E5M2(std::nextafter(61440.0f, 0.0f)).bits, 0x7b);
  EXPECT_EQ(Float8E5M2(61440.0f).bits, 0x7c);
  EXPECT_EQ(Float8E5M2(-std::numeric_limits<float>::infinity()).bits, 0xfc);
  EXPECT_EQ(Float8E5M2(3e38f).bits, 0x7c);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(Float8E4M3(nan).bits, 0x7f);
  EXPECT_EQ(Float8E5M2(nan).bits, 0x7f);
  EXPECT_EQ(Float8E4M3(-nan).bits, 0xff);
  EXPECT_EQ(Float8E5M2(-nan).bits, 0xff);
  // float32 subnormals are far below both formats' smallest: zero, with their sign.
  for (const float tiny : {std::numeric_limits<float>::denorm_min(), 1e-40f}) {
    EXPECT_EQ(Float8E4M3(tiny).bits, 0x00);
    EXPECT_EQ(Float8E4M3(-tiny).bits, 0x80);
    EXPECT_EQ(Float8E5M2(tiny).bits, 0x00);
    EXPECT_EQ(Float8E5M2(-tiny).bits, 0x80);
  }
  // Below the smallest subnormal's half: zero, keeping the sign; at the half, the even zero.
  EXPECT_EQ(Float8E4M3(std::ldexp(1.0f, -10)).bits, 0x00);
  EXPECT_EQ(Float8E4M3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)).bits, 0x01);
  EXPECT_EQ(Float8E5M2(-1e-30f).bits, 0x80);
  EXPECT_EQ(Float8E4M3(-0.0f).bits, 0x80);
}

// The rounding is to nearest even whatever the floating-point rounding mode (a caller may have
// changed it): ties, the overflow boundary and the half of the smallest subnormal, both signs.
TEST(Float8, RoundingDoesNotDependOnTheRoundingMode) {
  const int saved = std::fegetround();
  for (const int mode : {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO, FE_TONEAREST}) {
    ASSERT_EQ(std::fesetround(mode), 0);
    EXPECT_EQ(Float8E4M3(1.0625f).bits, 0x38) << mode;  // 1 + 1/16: the tie goes to 1.0
    EXPECT_EQ(Float8E4M3(-1.0625f).bits, 0xb8) << mode;
    EXPECT_EQ(Float8E4M3(1.1875f).bits, 0x3a) << mode;  // 1 + 3/16: the tie goes to 1.25
    EXPECT_EQ(Float8E5M2(61440.0f).bits, 0x7c) << mode;
    EXPECT_EQ(Float8E5M2(60000.0f).bits, 0x7b) << mode;
    EXPECT_EQ(Float8E4M3(std::ldexp(1.0f, -10)).bits, 0x00) << mode;
  }
  std::fesetround(saved);
}

// The saturating form clamps to the largest finite value before rounding; NaN stays NaN.
TEST(Float8, SaturatedClampsToTheLargestValue) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Float8E4M3::saturated(1e6f).bits, 0x7e);
  EXPECT_EQ(Float8E4M3::saturated(-inf).bits, 0xfe);
  EXPECT_EQ(Float8E4M3::saturated(470.0f).bits, 0x7e);
  EXPECT_EQ(Float8E5M2::saturated(inf).bits, 0x7b);
  EXPECT_EQ(Float8E5M2::saturated(-70000.0f).bits, 0xfb);
  EXPECT_TRUE(std::isnan(
      static_cast<float>(Float8E4M3::saturated(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(Float8E4M3::saturated(1.0625f).bits, Float8E4M3(1.0625f).bits);  // in range: as is
}

}  // namespace
}  // namespace sinter

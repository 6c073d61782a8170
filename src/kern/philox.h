// Philox4x32-10, the counter-based generator behind every random op, and the maps from its
// output words to uniform, normal and integer values. Host and device share this code.
#pragma once

#include <math.h>

#include <cmath>
#include <cstdint>

#include "kern/scalar_ops.h"

namespace sinter::kern {

// Note [philox streams]
// A random request of n elements (random_uniform/normal/int in kern/random.inc) consumes n counters
// of one Philox4x32-10 stream; Generator::reserve(n) hands out the first, `offset`. Element i uses
// the 128-bit counter whose low 64 bits are offset + i and whose high 64 bits are 0, under the
// 64-bit key `seed` (key word 0 = its low 32 bits, key word 1 = its high 32 bits). The block's four
// output words w0..w3 map to values as follows.
//   uniform f32/bf16/f16: u = (w0 >> 8) * 2^-24 in [0, 1); value = fma(hi - lo, u, lo) in float,
//     then rounded to the dtype (so bf16/f16 can round up to hi).
//   uniform f64: u = (((w0 << 32) | w1) >> 11) * 2^-53 in [0, 1), value in double. Word 0 leads
//     in both, so f32 and f64 draws agree to float precision.
//   normal: Box-Muller, cosine branch only: z = sqrt(-2 log u1) * cos(2 pi u2), value =
//     fma(std, z, mean). f64 computes in double with u1 = ((((w0 << 32) | w1) >> 11) + 1) * 2^-53
//     in (0, 1] (so the log is finite) and u2 = (((w2 << 32) | w3) >> 11) * 2^-53; the other
//     dtypes compute in float with u1 = ((w0 >> 8) + 1) * 2^-24 and u2 = (w2 >> 8) * 2^-24.
//   randint in [lo, hi): lo + ((w1 << 32) | w0) % (hi - lo) in 64-bit arithmetic, then converted
//     to the dtype.
// Element i depends only on (seed, offset + i), so a request split across threads or devices
// gives the same values; integers and uniforms match bit for bit between CPU and CUDA (fma rounds
// once on both), and normals differ only in the last bits of each side's logf/cosf.

struct PhiloxBlock {
  uint32_t w[4];
};

SINTER_HD inline PhiloxBlock philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                           uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const auto hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const auto hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

// The block of element i of a request (Note [philox streams]).
SINTER_HD inline PhiloxBlock philox_element(uint64_t seed, uint64_t offset, uint64_t i) {
  const uint64_t ctr = offset + i;
  return philox4x32_10(static_cast<uint32_t>(ctr), static_cast<uint32_t>(ctr >> 32), 0u, 0u,
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

SINTER_HD inline uint64_t philox_join(uint32_t lo, uint32_t hi) {
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// [0, 1) from the top 24 bits of one word.
SINTER_HD inline float uniform01_f32(uint32_t w0) { return static_cast<float>(w0 >> 8) * 0x1p-24f; }
// [0, 1) from the top 53 bits of (hi, lo).
SINTER_HD inline double uniform01_f64(uint32_t hi, uint32_t lo) {
  return static_cast<double>(philox_join(lo, hi) >> 11) * 0x1p-53;
}

SINTER_HD inline float uniform_f32(const PhiloxBlock& r, float lo, float hi) {
  return ::fmaf(hi - lo, uniform01_f32(r.w[0]), lo);
}
SINTER_HD inline double uniform_f64(const PhiloxBlock& r, double lo, double hi) {
  return ::fma(hi - lo, uniform01_f64(r.w[0], r.w[1]), lo);
}

SINTER_HD inline float normal_f32(const PhiloxBlock& r, float mean, float std) {
  constexpr float kTwoPi = 6.28318530717958647692f;
  const float u1 = static_cast<float>((r.w[0] >> 8) + 1) * 0x1p-24f;
  const float u2 = uniform01_f32(r.w[2]);
  const float z = ::sqrtf(-2.0f * ::logf(u1)) * ::cosf(kTwoPi * u2);
  return ::fmaf(std, z, mean);
}
SINTER_HD inline double normal_f64(const PhiloxBlock& r, double mean, double std) {
  constexpr double kTwoPi = 6.28318530717958647692;
  const double u1 = static_cast<double>((philox_join(r.w[1], r.w[0]) >> 11) + 1) * 0x1p-53;
  const double u2 = uniform01_f64(r.w[2], r.w[3]);
  const double z = ::sqrt(-2.0 * ::log(u1)) * ::cos(kTwoPi * u2);
  return ::fma(std, z, mean);
}

// Uniform in [lo, hi), hi > lo. The modulo's bias is below (hi - lo) / 2^64.
SINTER_HD inline int64_t randint_i64(const PhiloxBlock& r, int64_t lo, int64_t hi) {
  const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + philox_join(r.w[0], r.w[1]) % range);
}

// Note [dropout blocks]
// A dropout whose tensor is a block of a larger one (tensor or sequence parallelism: this rank's
// heads, or its slice of the sequence) draws that larger tensor's mask: element i of the block
// (flat) takes the counter of its element in the whole, (i / block) * whole + start + i % block,
// where along the split dim (flattened with everything inside it) the block holds `block`
// elements, the whole `whole`, and the block starts at `start`. block == 0 is the identity: the
// tensor is the whole.
struct DropoutBlock {
  int64_t block = 0, whole = 0, start = 0;
  SINTER_HD uint64_t index(int64_t i) const {
    if (block == 0) return static_cast<uint64_t>(i);
    return static_cast<uint64_t>((i / block) * whole + start + i % block);
  }
};

}  // namespace sinter::kern

// Tensors of the float8 dtypes (Note [float8]): conversion from and to every dtype on all 256
// codes and on fresh random floats (bits equal to the scalar conversions of tests/test_float8.cpp),
// strided copies, fills, printing, safetensors files, and the errors of arithmetic and promotion.
// The CUDA rows hold the device's casts to the CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "sinter/io.h"
#include "sinter/ops.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::expect_error;

constexpr DType kFloat8[] = {DType::f8e4m3, DType::f8e5m2};

// The 256 codes of `t` as a tensor of that dtype.
Tensor every_code(DType t) {
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  Tensor out = empty({256}, {.dtype = t});
  std::memcpy(out.data_ptr(), codes.data(), 256);
  return out;
}

std::vector<uint8_t> bits_of(const Tensor& t) {
  const Tensor c = t.to(Device::cpu()).contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p, p + c.numel());
}

float decode(DType t, uint8_t b) {
  return t == DType::f8e4m3 ? static_cast<float>(Float8E4M3::from_bits(b))
                            : static_cast<float>(Float8E5M2::from_bits(b));
}
uint8_t encode(DType t, float v) {
  return t == DType::f8e4m3 ? Float8E4M3(v).bits : Float8E5M2(v).bits;
}

// Floats around every rounding boundary and past the ranges, and fresh random ones of every scale.
std::vector<float> probe_floats(uint64_t seed) {
  std::vector<float> v;
  for (DType t : kFloat8) {
    for (int c = 0; c < 255; ++c) {
      const float a = decode(t, static_cast<uint8_t>(c)),
                  b = decode(t, static_cast<uint8_t>(c + 1));
      if (!std::isfinite(a) || !std::isfinite(b) || (c & 0x7f) == 0x7f) continue;
      const float mid = (a + b) / 2;
      v.insert(v.end(), {a, mid, std::nextafter(mid, a), std::nextafter(mid, b)});
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  v.insert(v.end(), {inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e30f, -7e4f, 465.0f,
                     -0.0f, std::numeric_limits<float>::denorm_min()});
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-24, 18), sign(0, 1);
  for (int i = 0; i < 4000; ++i) {
    v.push_back((sign(rng) ? -1.0f : 1.0f) * std::ldexp(mant(rng), expo(rng)));
  }
  return v;
}

TEST(Float8Tensor, EveryCodeConvertsToEveryDtypeAsTheScalarDoes) {
  for (DType t : kFloat8) {
    SCOPED_TRACE(dtype_name(t));
    const Tensor codes = every_code(t);
    EXPECT_TRUE(is_floating(t));
    EXPECT_EQ(element_size(t), 1u);
    const std::vector<float> f32 = codes.to(DType::f32).to_vector<float>();
    const std::vector<double> f64 = codes.to(DType::f64).to_vector<double>();
    const std::vector<float> bf16 = codes.to(DType::bf16).to(DType::f32).to_vector<float>();
    const std::vector<float> f16 = codes.to(DType::f16).to(DType::f32).to_vector<float>();
    const std::vector<int64_t> i64 = codes.to(DType::i64).to_vector<int64_t>();
    const std::vector<uint8_t> b8 = codes.to(DType::b8).to(DType::u8).to_vector<uint8_t>();
    for (int c = 0; c < 256; ++c) {
      const float want = decode(t, static_cast<uint8_t>(c));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(f32[c]) && std::isnan(f64[c]) && std::isnan(bf16[c]));
        EXPECT_EQ(i64[c], 0) << c;  // NaN to an integer is 0 (kern/scalar_ops.h's convert)
      } else {
        EXPECT_EQ(f32[c], want) << c;
        EXPECT_EQ(f64[c], static_cast<double>(want)) << c;
        EXPECT_EQ(bf16[c], want) << c;  // every float8 value is a bf16 and an f16 value
        EXPECT_EQ(f16[c], want) << c;
        EXPECT_EQ(std::signbit(f32[c]), (c & 0x80) != 0) << c;
        if (std::isfinite(want)) {
          EXPECT_EQ(i64[c], static_cast<int64_t>(want)) << c;
        }
      }
      EXPECT_EQ(b8[c], want != 0.0f ? 1 : 0) << c;
    }
    // And back: each value's tensor converts to its own code (NaNs to the canonical NaN).
    const std::vector<uint8_t> back = bits_of(codes.to(DType::f32).to(t));
    const std::vector<uint8_t> same = bits_of(codes.to(t));
    for (int c = 0; c < 256; ++c) {
      EXPECT_EQ(back[c], encode(t, decode(t, static_cast<uint8_t>(c)))) << c;
      EXPECT_EQ(same[c], c);
    }
    // The other float8 dtype converts by way of float.
    const DType other = t == DType::f8e4m3 ? DType::f8e5m2 : DType::f8e4m3;
    const std::vector<uint8_t> cross = bits_of(codes.to(other));
    for (int c = 0; c < 256; ++c) {
      EXPECT_EQ(cross[c], encode(other, decode(t, static_cast<uint8_t>(c)))) << c;
    }
  }
}

TEST(Float8Tensor, CastsRoundAsTheScalarConversion) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::vector<float> v = probe_floats(seed);
  const Tensor x = from_vector(v);
  for (DType t : kFloat8) {
    SCOPED_TRACE(dtype_name(t));
    const std::vector<uint8_t> from_f32 = bits_of(x.to(t));
    const std::vector<uint8_t> from_bf16 = bits_of(x.to(DType::bf16).to(t));
    const std::vector<float> as_bf16 = x.to(DType::bf16).to(DType::f32).to_vector<float>();
    for (size_t i = 0; i < v.size(); ++i) {
      ASSERT_EQ(from_f32[i], encode(t, v[i])) << v[i];
      ASSERT_EQ(from_bf16[i], encode(t, as_bf16[i])) << as_bf16[i];
    }
    // A double converts through float, as PyTorch's does.
    const std::vector<double> d{1.0 + std::ldexp(1.0, -4) + std::ldexp(1.0, -40), 448.0 + 16.0,
                                std::ldexp(1.0, -10) + std::ldexp(1.0, -60)};
    const std::vector<uint8_t> from_f64 = bits_of(from_vector(d).to(t));
    for (size_t i = 0; i < d.size(); ++i) {
      EXPECT_EQ(from_f64[i], encode(t, static_cast<float>(d[i]))) << d[i];
    }
    // Integers: by way of float (1000 saturates in E4M3), and bool as 0 and 1.
    const std::vector<uint8_t> from_int =
        bits_of(from_vector(std::vector<int64_t>{-3, 17, 1000, 70000}).to(t));
    EXPECT_EQ(from_int, (std::vector<uint8_t>{encode(t, -3), encode(t, 17), encode(t, 1000),
                                              encode(t, 70000)}));
  }
}

TEST(Float8Tensor, StridedCopiesFillsAndFactories) {
  for (DType t : kFloat8) {
    SCOPED_TRACE(dtype_name(t));
    const Tensor a = randn({6, 5}).to(t);
    const Tensor at = a.transpose(0, 1).contiguous();
    EXPECT_EQ(at.dtype(), t);
    const std::vector<uint8_t> ab = bits_of(a), tb = bits_of(at);
    for (int i = 0; i < 6; ++i) {
      for (int j = 0; j < 5; ++j) EXPECT_EQ(tb[j * 6 + i], ab[i * 5 + j]);
    }
    Tensor z = zeros({4}, {.dtype = t});
    EXPECT_EQ(bits_of(z), std::vector<uint8_t>(4, 0));
    z.fill_(1000.0);  // by way of float: saturates in E4M3, 1024 in E5M2
    EXPECT_EQ(bits_of(z), std::vector<uint8_t>(4, encode(t, 1000.0f)));
    Tensor half = full({2, 3}, 0.5, {.dtype = DType::f32}).to(t);
    half.slice(1, 1, 2).copy_(full({2, 1}, -2.0));  // copy_ into a strided view, from f32
    EXPECT_EQ(half.to(DType::f32).to_vector<float>(),
              (std::vector<float>{0.5f, -2.0f, 0.5f, 0.5f, -2.0f, 0.5f}));
    EXPECT_EQ(from_vector(std::vector<Float8E4M3>{Float8E4M3(3.0f)}).dtype(), DType::f8e4m3);
    EXPECT_EQ(a.reshape({30}).slice(0, 2, 4).to(DType::f32).to_vector<float>(),
              a.to(DType::f32).reshape({30}).slice(0, 2, 4).to_vector<float>());
  }
}

TEST(Float8Tensor, PrintsItsValues) {
  const Tensor a = from_vector(std::vector<float>{1.5f, -448.0f, 0.0625f}).to(DType::f8e4m3);
  const std::string s = a.str();
  EXPECT_NE(s.find("1.5"), std::string::npos) << s;
  EXPECT_NE(s.find("-448"), std::string::npos) << s;
  EXPECT_NE(s.find("0.0625"), std::string::npos) << s;
  EXPECT_NE(s.find("dtype=f8e4m3"), std::string::npos) << s;
  EXPECT_NE(from_vector(std::vector<float>{2.0f}).to(DType::f8e5m2).str().find("dtype=f8e5m2"),
            std::string::npos);
}

TEST(Float8Tensor, ArithmeticAndPromotionAreErrorsNamingTheDtype) {
  const Tensor a = ones({3}).to(DType::f8e4m3), b = ones({3}).to(DType::f8e5m2);
  const Tensor f = ones({3});
  expect_error([&] { add(a, a); }, {"add", "no arithmetic on f8e4m3", ".to()"});
  expect_error([&] { mul(b, 2.0); }, {"mul", "f8e5m2"});
  expect_error([&] { neg(a); }, {"f8e4m3"});
  expect_error([&] { a.sum(); }, {"f8e4m3"});
  expect_error([&] { matmul(a.reshape({1, 3}), a.reshape({3, 1})); }, {"f8e4m3"});
  expect_error([&] { add(a, f); }, {"f8e4m3", "f32"});
  expect_error([&] { promote_types(DType::f8e4m3, DType::f32); },
               {"promote_types", "f8e4m3", "f32", "float8"});
  expect_error([&] { promote_types(DType::f8e4m3, DType::f8e5m2); }, {"f8e4m3", "f8e5m2"});
  EXPECT_EQ(promote_types(DType::f8e5m2, DType::f8e5m2), DType::f8e5m2);
  Tensor c = a.clone();
  expect_error([&] { c.add_(a); }, {"add_", "f8e4m3"});
  expect_error([&] { eq(a, a); }, {"f8e4m3"});
  expect_error([] { randint(0, 4, {3}, {.dtype = DType::f8e5m2}); }, {"randint", "f8e5m2"});
}

TEST(Float8Tensor, SafetensorsRoundTripsTheBits) {
  SINTER_REQUIRE_JSON();
  testing::TempDir dir;
  const std::string path = dir.file("f8.safetensors");
  StateDict d{{"e4m3", every_code(DType::f8e4m3).reshape({16, 16})},
              {"e5m2", every_code(DType::f8e5m2)}};
  save(d, path);
  const StateDict back = load(path);
  ASSERT_EQ(back.size(), 2u);
  for (const auto& [name, t] : d) {
    EXPECT_EQ(back.at(name).dtype(), t.dtype()) << name;
    EXPECT_EQ(back.at(name).shape(), t.shape()) << name;
    EXPECT_EQ(bits_of(back.at(name)), bits_of(t)) << name;
  }
  // The header names them as PyTorch's safetensors writes them.
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("\"F8_E4M3\""), std::string::npos);
  EXPECT_NE(bytes.find("\"F8_E5M2\""), std::string::npos);
}

// The device's casts against the CPU's, both ways and between every dtype, dense and strided.
TEST(CudaFloat8, CastsMatchCpu) {
  SINTER_REQUIRE_CUDA();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::vector<float> v = probe_floats(seed);
  const Tensor x = from_vector(v);
  const Device gpu = Device::cuda(0);
  for (DType t : kFloat8) {
    SCOPED_TRACE(dtype_name(t));
    for (DType other : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i64, DType::i32,
                        DType::u8, DType::b8, DType::f8e4m3, DType::f8e5m2}) {
      SCOPED_TRACE(dtype_name(other));
      const Tensor src = x.to(other);
      EXPECT_EQ(bits_of(src.to(gpu).to(t)), bits_of(src.to(t)));
      const Tensor codes = every_code(t);
      EXPECT_EQ(bits_of(codes.to(gpu).to(other).to(Device::cpu()).to(DType::f64).to(t)),
                bits_of(codes.to(other).to(DType::f64).to(t)));
    }
    const Tensor m = x.slice(0, 0, 4000).reshape({40, 100});
    EXPECT_EQ(bits_of(m.to(gpu).transpose(0, 1).to(t)), bits_of(m.transpose(0, 1).to(t)));
    EXPECT_EQ(bits_of(m.to(t).to(gpu).transpose(0, 1).contiguous()),
              bits_of(m.to(t).transpose(0, 1).contiguous()));
    Tensor z = zeros({37}, {.dtype = t, .device = gpu});
    z.fill_(-3.3);
    EXPECT_EQ(bits_of(z), std::vector<uint8_t>(37, encode(t, -3.3f)));
  }
}

}  // namespace
}  // namespace sinter

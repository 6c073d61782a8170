// Post-training int8 quantization (Note [int8 quantization]): the int8 GEMM against its reference,
// rounding and saturation, the calibrators, the int8 layers against the f64 arithmetic of their
// quantized values, whole models, and the errors. The QDQ export in ONNX Runtime is tested in
// test_onnx.cpp.
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/int8.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;

// Random operands of an m x n x k int8 GEMM as the kernels take them: a's rows of k values (zero
// to the even padded k) and b's rows, each with a stride past its values, and the extremes,
// -128 * -128, in every product of the first row and column; the reference's product, and b
// packed.
struct Operands {
  int64_t m, n, k, lda, ldb, ldc;
  std::vector<int16_t> a, b;
  std::vector<int32_t> want;
  cpu::int8::PackedB packed;

  Operands(std::mt19937& rng, int64_t m_, int64_t n_, int64_t k_)
      : m(m_), n(n_), k(k_), lda(cpu::int8::padded_k(k_) + 6), ldb(k_ + 3), ldc(n_ + 3) {
    std::uniform_int_distribution<int> value(-128, 127);
    a.resize(static_cast<size_t>(m * lda));
    b.resize(static_cast<size_t>(n * ldb));
    for (int16_t& v : a) v = static_cast<int16_t>(value(rng));
    for (int16_t& v : b) v = static_cast<int16_t>(value(rng));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t p = k; p < cpu::int8::padded_k(k); ++p) a[i * lda + p] = 0;
    }
    for (int64_t p = 0; p < k; ++p) a[p] = b[p] = -128;
    packed = cpu::int8::pack_b(n, k, b.data(), ldb);
    want.assign(static_cast<size_t>(m * ldc), 7);
    cpu::int8::gemm_reference(m, n, k, a.data(), lda, b.data(), ldb, want.data(), ldc);
  }
  std::string name() const {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  }
};

TEST(Int8Gemm, KernelMatchesTheReference) {
  std::printf("int8 gemm: %s\n", cpu::int8::gemm_isa());
  std::mt19937 rng(static_cast<uint32_t>(testing::fresh_seed()));
  for (const auto& [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 1},
                                                                                  {2, 4, 16},
                                                                                  {3, 5, 31},
                                                                                  {7, 17, 48},
                                                                                  {33, 16, 144},
                                                                                  {64, 10, 3136},
                                                                                  {5, 40, 9},
                                                                                  {8, 16, 2},
                                                                                  {17, 33, 65},
                                                                                  {9, 1, 7}}) {
    const Operands o(rng, m, n, k);
    const auto& [a, packed, want, lda, ldc] = std::tie(o.a, o.packed, o.want, o.lda, o.ldc);
    std::vector<int32_t> got(want.size(), 7), fallback(want.size(), 7);
    cpu::int8::gemm(m, a.data(), lda, packed, got.data(), ldc);
    cpu::int8::gemm_fallback(m, a.data(), lda, packed, fallback.data(), ldc);
    EXPECT_EQ(got, want) << m << "x" << n << "x" << k;
    EXPECT_EQ(fallback, want) << m << "x" << n << "x" << k;
    // Each kernel this CPU has, by name; the others are said to be skipped.
    for (const cpu::int8::Isa isa : {cpu::int8::Isa::Scalar, cpu::int8::Isa::Avx2,
                                     cpu::int8::Isa::Avx512Vnni, cpu::int8::Isa::Amx}) {
      if (!cpu::int8::has_isa(isa)) {
        std::printf("int8 gemm: %s skipped (this CPU lacks it)\n", cpu::int8::isa_name(isa));
        continue;
      }
      std::vector<int32_t> on(want.size(), 7);
      cpu::int8::gemm_on(isa, m, a.data(), lda, packed, on.data(), ldc);
      EXPECT_EQ(on, want) << cpu::int8::isa_name(isa) << " " << m << "x" << n << "x" << k;
    }
    EXPECT_EQ(want[0], 128 * 128 * k);
  }
  expect_error([] { (void)cpu::int8::pack_b(1, cpu::int8::kMaxK + 2, nullptr, 0); },
               {"int8 gemm", "overflow"});
}

// k = kInt8MaxK = 2^17 - 1 products of -128 x -128 sum to 2^31 - 2^14, the largest sum there is;
// one more term would wrap int32, so k = 2^17 is refused by every path.
// The AMX kernel's tile layout and walk (Note [int8 amx]), on the replayed tiles, against the
// reference on the edge shapes of its tiles (rows about 16 and 32, channels about 16 and 32, k
// about 64), with the weight's tile layout made by the call or packed beforehand; and the kernel
// on the CPU's tiles, where it has them.
TEST(Int8Gemm, AmxWalkMatchesTheReference) {
  std::mt19937 rng(static_cast<uint32_t>(testing::fresh_seed()));
  const bool hardware = cpu::int8::has_isa(cpu::int8::Isa::Amx);
  if (!hardware) std::printf("int8 gemm: amx on the CPU's tiles skipped (this CPU lacks them)\n");
  for (const auto& [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 1},
                                                                                  {16, 16, 64},
                                                                                  {17, 17, 65},
                                                                                  {15, 33, 63},
                                                                                  {32, 32, 128},
                                                                                  {33, 31, 2},
                                                                                  {64, 48, 130},
                                                                                  {70, 70, 200},
                                                                                  {5, 1, 257}}) {
    const Operands o(rng, m, n, k);
    const auto& [a, packed, want, lda, ldc] = std::tie(o.a, o.packed, o.want, o.lda, o.ldc);
    std::vector<int8_t> tiled(static_cast<size_t>(cpu::int8::amx::packed_bytes(n, packed.k)));
    cpu::int8::amx::pack_from(packed, tiled.data());
    cpu::int8::PackedView with_tiles = packed;
    with_tiles.amx = tiled.data();
    for (const cpu::int8::PackedView& view :
         {static_cast<cpu::int8::PackedView>(packed), with_tiles}) {
      const std::string what = o.name() + (view.amx ? " tiled" : " made per call");
      std::vector<int32_t> got(want.size(), 7);
      cpu::int8::amx::replay(m, a.data(), lda, view, got.data(), ldc);
      EXPECT_EQ(got, want) << "replay " << what;
      if (hardware) {
        std::vector<int32_t> on(want.size(), 7);
        cpu::int8::amx::gemm(m, a.data(), lda, view, on.data(), ldc);
        EXPECT_EQ(on, want) << "amx " << what;
      }
    }
  }
  if (!hardware) {
    expect_error([] { cpu::int8::amx::gemm(1, nullptr, 0, {}, nullptr, 0); }, {"int8 gemm", "AMX"});
  }
}

TEST(Int8Gemm, SumsAtTheLimitOfKAreExact) {
  constexpr int64_t k = kern::kInt8MaxK;
  const std::vector<int16_t> a16(static_cast<size_t>(cpu::int8::padded_k(k)), 0);
  std::vector<int16_t> row(static_cast<size_t>(k), -128), a(a16);
  std::fill(a.begin(), a.begin() + k, int16_t{-128});
  const cpu::int8::PackedB packed = cpu::int8::pack_b(1, k, row.data(), k);
  int32_t got = 0, fallback = 0, plain = 0;
  for (const cpu::int8::Isa isa :
       {cpu::int8::Isa::Avx2, cpu::int8::Isa::Avx512Vnni, cpu::int8::Isa::Amx}) {
    if (!cpu::int8::has_isa(isa)) continue;
    int32_t on = 0;
    cpu::int8::gemm_on(isa, 1, a.data(), packed.k, packed, &on, 1);
    EXPECT_EQ(on, 2147467264) << cpu::int8::isa_name(isa);
  }
  cpu::int8::gemm(1, a.data(), packed.k, packed, &got, 1);
  cpu::int8::gemm_fallback(1, a.data(), packed.k, packed, &fallback, 1);
  int32_t replayed = 0;
  cpu::int8::amx::replay(1, a.data(), packed.k, packed, &replayed, 1);
  EXPECT_EQ(replayed, 2147467264) << "amx replay";
  const std::vector<int8_t> r8(static_cast<size_t>(k), -128);
  cpu::int8_gemm(kern::Ctx{}, 1, 1, k, r8.data(), k, r8.data(), k, &plain, 1);
  const int32_t want = 2147467264;  // (2^17 - 1) 2^14
  EXPECT_EQ(got, want);
  EXPECT_EQ(fallback, want);
  EXPECT_EQ(plain, want);
  expect_error([&] { (void)cpu::int8::pack_b(1, k + 1, row.data(), k); },
               {"int8 gemm", "131072", "overflow"});
  expect_error(
      [&] { cpu::int8_gemm(kern::Ctx{}, 1, 1, k + 1, r8.data(), k, r8.data(), k, &plain, 1); },
      {"int8_gemm", "k=131072", "131071"});
}

TEST(Int8Gemm, QuantizeRoundsHalfToEvenAndSaturates) {
  using cpu::int8::quantize;
  EXPECT_EQ(quantize(0.5F, 1.0F), 0);
  EXPECT_EQ(quantize(1.5F, 1.0F), 2);
  EXPECT_EQ(quantize(2.5F, 1.0F), 2);
  EXPECT_EQ(quantize(-2.5F, 1.0F), -2);
  EXPECT_EQ(quantize(-0.6F, 0.5F), -1);
  EXPECT_EQ(quantize(127.4F, 1.0F), 127);
  EXPECT_EQ(quantize(1000.0F, 1.0F), 127);
  EXPECT_EQ(quantize(-1000.0F, 1.0F), -128);
  EXPECT_EQ(quantize(-128.0F, 1.0F), -128);
  EXPECT_EQ(quantize(std::nanf(""), 1.0F), 0);
  EXPECT_EQ(quantize(INFINITY, 1.0F), 127);
}

TEST(Quantize, CalibratorsPickTheirRanges) {
  manual_seed(testing::fresh_seed());
  quant::Histogram h;
  // Uniform |x| in [0, 1), in batches of growing range: the bins double and merge.
  const Tensor u = rand({200000});
  h.add(u * 0.25, "test");
  h.add(u.narrow(0, 0, 100000) * 0.5, "test");
  h.add(-u.narrow(0, 100000, 100000), "test");
  EXPECT_EQ(h.batches(), 3);
  EXPECT_EQ(h.count(), 400000);
  const double max = h.max();
  EXPECT_NEAR(max, 1.0, 1e-4);
  EXPECT_DOUBLE_EQ(h.amax({.calibrator = quant::Calibrator::MinMax}), max);
  // 1% of the values lie above 0.96: only the last quarter reaches past 0.5, uniform on [0, 1).
  // The 4000 draws above it vary by about 63 (binomial), so the quantile by about 0.0007: 0.005
  // is seven of those (a seed once landed 0.0024 away, past the bound of 0.002 this had), and
  // still far from the 98th (0.92) and 99.5th (0.98) percentiles.
  const double p99 = h.amax({.calibrator = quant::Calibrator::Percentile, .percentile = 99.0});
  EXPECT_NEAR(p99, 0.96, 0.005);
  EXPECT_DOUBLE_EQ(h.amax({.calibrator = quant::Calibrator::Percentile, .percentile = 100.0}), max);

  // A normal distribution with a few far outliers: entropy clips them (MinMax keeps them and
  // leaves the normal values a handful of levels), keeping a few standard deviations.
  quant::Histogram g;
  g.add(cat({randn({400000}), full({20}, 60.0)}), "test");
  const double e = g.amax({.calibrator = quant::Calibrator::Entropy});
  std::printf("normal with outliers: max %.3f, entropy amax %.3f\n", g.max(), e);
  EXPECT_DOUBLE_EQ(g.max(), 60.0);
  EXPECT_LT(e, 15.0);
  EXPECT_GT(e, 2.0);

  quant::Histogram zeros_only;
  zeros_only.add(zeros({10}), "test");
  EXPECT_EQ(zeros_only.amax({}), 0.0);
  // Zeros before the first non-zero batch stay in the first bin.
  zeros_only.add(full({10}, 2.0), "test");
  EXPECT_DOUBLE_EQ(zeros_only.amax({.calibrator = quant::Calibrator::Percentile, .percentile = 50}),
                   2.0 / quant::Histogram::kBins);

  expect_error([&] { h.add(full({3}, std::nan("")), "QuantizedLinear"); },
               {"QuantizedLinear", "NaN"});
  EXPECT_EQ(quant::calibrator_from_name("percentile"), quant::Calibrator::Percentile);
  expect_error([] { (void)quant::calibrator_from_name("kl"); }, {"kl", "minmax", "entropy"});
}

// The f64 arithmetic of a converted layer: its quantized input and weight, dequantized.
Tensor dequantized_input(const Tensor& x, float scale) {
  std::vector<float> v = x.contiguous().to_vector<float>();
  for (float& e : v) e = static_cast<float>(cpu::int8::quantize(e, scale)) * scale;
  return from_vector<float>(v, x.shape()).to(DType::f64);
}

Tensor dequantized_weight(const quant::QuantState& q, const Shape& shape) {
  std::vector<double> w(q.weight_q.size());
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = static_cast<double>(q.weight_q[i]) *
           static_cast<double>(q.weight_scale[i / static_cast<size_t>(q.k)]);
  }
  return from_vector<double>(w, shape);
}

Tensor calibrated_batch(const Shape& s) { return randn(s) * 1.5 + 0.2; }

TEST(Quantize, Int8LinearComputesTheQuantizedArithmetic) {
  manual_seed(testing::fresh_seed());
  for (const Activation act : {Activation::None, Activation::Relu, Activation::Gelu}) {
    nn::Linear f(37, 21);
    f.activation = act;
    auto l = std::make_shared<quant::QuantizedLinear>(f);
    {
      NoGradGuard no_grad;
      for (int i = 0; i < 3; ++i) (void)l->forward(calibrated_batch({8, 37}));
    }
    l->convert({.calibrator = quant::Calibrator::MinMax}, "fc");
    EXPECT_TRUE(l->q.quantized);
    EXPECT_EQ(l->q.weight_q.size(), 21u * 37u);
    const Tensor x = calibrated_batch({3, 5, 37});  // leading dims kept; values past the range
    InferenceMode im;
    const Tensor y = l->forward(x);
    EXPECT_EQ(y.shape(), (Shape{3, 5, 21}));
    const Tensor ref = linear(dequantized_input(x, l->q.input_scale),
                              dequantized_weight(l->q, {21, 37}), f.bias.to(DType::f64), act);
    EXPECT_TRUE(all_close(y, ref.to(DType::f32), 1e-5, 1e-5));
    // And near the f32 layer on inputs inside the calibrated range: the rounding error of 8 bits.
    // (Inputs past the range are clipped, and one clipped input can move an output by its weight.)
    const double amax = 127.0 * l->q.input_scale;
    const Tensor inside = clamp(x, -amax, amax);
    EXPECT_TRUE(all_close(l->forward(inside), f.forward(inside), 0.15, 0.05));
  }
}

// Convolutions of every kind the int8 layer takes: padding, stride, groups, dilation, no bias, 1x1.
struct ConvCase {
  int64_t cin, cout;
  Size2 k;
  nn::Conv2dOptions o;
  Activation act;
};
const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases{
      {3, 8, 3, {.padding = 1}, Activation::Relu},
      {4, 6, {3, 2}, {.stride = {2, 1}, .padding = {1, 0}, .groups = 2}, Activation::None},
      {5, 5, 3, {.padding = 2, .dilation = 2, .groups = 5, .bias = false}, Activation::GeluTanh},
      {16, 9, 1, {}, Activation::None},
  };
  return cases;
}

TEST(Quantize, Int8ConvComputesTheQuantizedArithmetic) {
  manual_seed(testing::fresh_seed());
  for (const ConvCase& c : conv_cases()) {
    nn::Conv2d f(c.cin, c.cout, c.k, c.o);
    f.activation = c.act;
    auto l = std::make_shared<quant::QuantizedConv2d>(f);
    {
      NoGradGuard no_grad;
      (void)l->forward(calibrated_batch({4, c.cin, 9, 11}));
    }
    l->convert({.calibrator = quant::Calibrator::Percentile, .percentile = 99.9}, "conv");
    const Tensor x = calibrated_batch({2, c.cin, 9, 11});
    NoGradGuard no_grad;
    const Tensor y = l->forward(x);
    const Tensor ref =
        conv2d(dequantized_input(x, l->q.input_scale), dequantized_weight(l->q, f.weight.shape()),
               f.bias.defined() ? f.bias.to(DType::f64) : Tensor(),
               {.stride = c.o.stride,
                .padding = c.o.padding,
                .dilation = c.o.dilation,
                .groups = c.o.groups},
               c.act);
    EXPECT_TRUE(all_close(y, ref.to(DType::f32), 1e-5, 1e-5)) << "groups " << c.o.groups;
  }
}

// A layer that pads by padding_mode or "same" pads the same way in int8: the float layer's padded
// input, then the convolution's own zero padding (none left for those).
TEST(Quantize, Int8ConvPadsAsTheFloatLayer) {
  manual_seed(testing::fresh_seed());
  const std::vector<nn::Conv2dOptions> options = {
      {.padding = {1, 2}, .padding_mode = nn::PaddingMode::Reflect},
      {.stride = 2, .padding = 1, .padding_mode = nn::PaddingMode::Circular},
      {.same_padding = true},
      {.same_padding = true, .padding_mode = nn::PaddingMode::Replicate},
  };
  for (const nn::Conv2dOptions& o : options) {
    nn::Conv2d f(3, 4, {2, 3}, o);
    auto l = std::make_shared<quant::QuantizedConv2d>(f);
    {
      NoGradGuard no_grad;
      (void)l->forward(calibrated_batch({4, 3, 7, 8}));
    }
    l->convert({}, "conv");
    const Tensor x = calibrated_batch({2, 3, 7, 8});
    NoGradGuard no_grad;
    const Tensor y = l->forward(x);
    // The float layer on the dequantized input and weight (padding copies values, so padding
    // and dequantizing commute).
    nn::Conv2d ref_layer(3, 4, {2, 3}, o);
    ref_layer.to(DType::f64);
    ref_layer.weight.copy_(dequantized_weight(l->q, f.weight.shape()));
    ref_layer.bias.copy_(f.bias.to(DType::f64));
    const Tensor ref = ref_layer.forward(dequantized_input(x, l->q.input_scale));
    ASSERT_EQ(y.shape(), ref.shape());
    EXPECT_TRUE(all_close(y, ref.to(DType::f32), 1e-5, 1e-5)) << "padding_mode " << o.padding_mode;
  }
}

TEST(Quantize, ModelsKeepTheirOutputs) {
  for (const bool resnet : {false, true}) {
    for (const quant::Calibrator cal :
         {quant::Calibrator::MinMax, quant::Calibrator::Percentile, quant::Calibrator::Entropy}) {
      // Fixed draws: on noise the entropy calibrator's error depends on the draw (from 0.1 to
      // over 0.8 for the cnn across seeds), so a bound holds only for a given one. The int8
      // layers' arithmetic is tested on fresh draws above, and the accuracy on trained models by
      // the FashionMnistInt8 tests.
      manual_seed(1000 + 10 * static_cast<uint64_t>(resnet) + static_cast<uint64_t>(cal));
      nn::Sequential m = resnet ? nn::models::resnet20(1) : nn::models::cnn();
      const Shape s = resnet ? Shape{16, 1, 32, 32} : Shape{16, 1, 28, 28};
      m.eval();
      const std::shared_ptr<nn::Module> q =
          quant::quantize(m, 4, [&](int64_t) { return randn(s); }, {.calibrator = cal});
      EXPECT_FALSE(q->is_training());
      const Tensor x = randn(s);
      InferenceMode im;
      const Tensor want = m.forward(x), got = q->forward(x);
      const double error =
          testing::relative_difference(testing::flat_values({got}), testing::flat_values({want}));
      std::printf("%s, %s: int8 relative error %.3g\n", resnet ? "resnet20" : "cnn",
                  quant::calibrator_name(cal), error);
      // Untrained models on noise: the output is the small difference of large sums, so the
      // 8-bit error shows more than on a trained model's logits (where the accuracy is tested).
      // Entropy clips the noise's tails by design, so it strays furthest on it (0.65 for the
      // cnn's draw here): its bound says the int8 model follows the float one, not how closely.
      EXPECT_LT(error, cal == quant::Calibrator::Entropy ? 0.9 : 0.1);
      const int64_t f32_bytes = quant::model_bytes(m), int8_bytes = quant::model_bytes(*q);
      EXPECT_LT(int8_bytes, f32_bytes * 3 / 10) << f32_bytes << " " << int8_bytes;
    }
  }
}

class Custom : public nn::Module {
 public:
  std::string name() const override { return "Custom"; }
  Tensor forward(const Tensor& x) override { return x; }
};

TEST(Quantize, ErrorsNameTheProblem) {
  // A module the quantization cannot copy is named with its path.
  nn::Sequential custom{nn::Flatten(), nn::Linear(784, 4), Custom()};
  expect_error([&] { (void)quant::quantize(custom, 1, [](int64_t) {
                       return randn({2, 784});
                     }); },
               {"module '2'", "Custom"});

  nn::Sequential m = nn::models::cnn();
  const auto batch = [](int64_t) { return randn({2, 1, 28, 28}); };
  expect_error([&] { (void)quant::quantize(m, 0, batch); },
               {"quantize", "at least one batch", "0"});
  nn::Sequential no_layers{nn::ReLU(), nn::Flatten()};
  expect_error([&] { (void)quant::quantize(no_layers, 1, batch); },
               {"quantize", "no Linear or Conv2d"});
  // The calibration data never reaches the head: a model prepared, run on nothing, converted.
  const std::shared_ptr<nn::Module> prepared = quant::prepare(m);
  expect_error([&] { quant::convert(*prepared); },
               {"quantize", "QuantizedConv2d '0'", "no calibration batch"});
  expect_error([&] { (void)quant::quantize(m, 1, batch, {.percentile = 0}); },
               {"percentile", "(0, 100]"});
}

TEST(Quantize, Int8LayersRecordNoGradients) {
  manual_seed(testing::fresh_seed());
  nn::Linear f(4, 3);
  auto l = std::make_shared<quant::QuantizedLinear>(f);
  {
    NoGradGuard no_grad;
    (void)l->forward(randn({2, 4}));
  }
  l->convert({}, "fc");
  const Tensor x = randn({2, 4}).requires_grad_(true);
  expect_error([&] { (void)l->forward(x); }, {"QuantizedLinear", "InferenceMode"});
  expect_error(
      [&] {
        (void)l->forward(randn({2, 4}, {.dtype = DType::f64}));
      },
      {"QuantizedLinear", "f32", "f64"});
  expect_error([&] { (void)l->forward(randn({2, 5})); }, {"QuantizedLinear", "last dim 4"});
}

}  // namespace
}  // namespace sinter

namespace sinter {
namespace {

// A quantized layer calibrated on the CPU, its output there, then the same layer moved to the GPU
// (model.to: the first forward there packs the weight for the CUDA kernels) on the same input: the
// same integers and, with no activation or ReLU, the same f32 epilogue (Note [int8 kernels]);
// GELU's erf and tanh differ in the last bits between the host and the device.
void expect_gpu_matches_cpu(nn::Module& layer, const Tensor& x, Activation act) {
  InferenceMode im;
  const Tensor want = layer.forward(x);
  layer.to(Device::cuda(0));
  const Tensor got = layer.forward(x.to(Device::cuda(0))).to(Device::cpu());
  layer.to(Device::cpu());
  if (act == Activation::None || act == Activation::Relu) {
    EXPECT_TRUE(all_close(got, want, 0, 0)) << layer.name();
  } else {
    EXPECT_TRUE(all_close(got, want, 1e-5, 1e-5)) << layer.name();
  }
}

TEST(CudaQuantize, Int8LayersMatchTheCpu) {
  SINTER_REQUIRE_CUDA();
  manual_seed(testing::fresh_seed());
  for (const Activation act : {Activation::None, Activation::Relu, Activation::GeluTanh}) {
    nn::Linear f(300, 70);  // rows not a multiple of 16 bytes: padded on the GPU
    f.activation = act;
    quant::QuantizedLinear l(f);
    {
      NoGradGuard no_grad;
      (void)l.forward(calibrated_batch({8, 300}));
    }
    l.convert({.calibrator = quant::Calibrator::MinMax}, "fc");
    expect_gpu_matches_cpu(l, calibrated_batch({3, 67, 300}), act);
  }
  for (const ConvCase& c : conv_cases()) {
    nn::Conv2d f(c.cin, c.cout, c.k, c.o);
    f.activation = c.act;
    quant::QuantizedConv2d l(f);
    {
      NoGradGuard no_grad;
      (void)l.forward(calibrated_batch({4, c.cin, 19, 23}));
    }
    l.convert({}, "conv");
    expect_gpu_matches_cpu(l, calibrated_batch({3, c.cin, 19, 23}), c.act);
  }
}

TEST(CudaQuantize, QuantizedModelRunsOnTheGpu) {
  SINTER_REQUIRE_CUDA();
  manual_seed(testing::fresh_seed());
  nn::Sequential m = nn::models::resnet20(1);
  m.eval();
  const Shape s{8, 1, 32, 32};
  const std::shared_ptr<nn::Module> q = quant::quantize(m, 2, [&](int64_t) { return randn(s); });
  const Tensor x = randn(s);
  InferenceMode im;
  const Tensor want = q->forward(x);
  q->to(Device::cuda(0));
  const Tensor got = q->forward(x.to(Device::cuda(0))).to(Device::cpu());
  EXPECT_TRUE(all_close(got, want, 1e-4, 1e-4));
  expect_error([&] { (void)q->forward(x); }, {"Quantized", "cpu", "cuda"});
}

}  // namespace
}  // namespace sinter

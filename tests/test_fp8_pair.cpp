// The quantization of a matrix and its transpose in one pass (fp8::quantize_with_transpose; Note
// [fp8 quantize kernels]) against the written-out tiles, the fused kernel's index math replayed
// on the host, and, on a GPU, the fused kernel and the delayed recipe's device-side state against
// the CPU's bit for bit.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fp8_reference.h"
#include "kern/fp8.h"
#include "sinter/cuda.h"
#include "sinter/fp8.h"
#include "sinter/ops.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::all_close;
using testing::expect_error;
using namespace testing::fp8_ref;

struct PairCase {
  int64_t rows, cols, tr, tc;
  bool retile;
  DType f;
};

// The fused pass's modes (1 x 128 with and without x^T's own tiles, 128 x 128), ragged regions,
// and tiles it does not fuse.
const PairCase kPairCases[] = {
    {5, 300, 1, 128, true, DType::f8e4m3},     {200, 260, 1, 128, true, DType::f8e5m2},
    {130, 7, 1, 128, false, DType::f8e4m3},    {200, 260, 128, 128, false, DType::f8e4m3},
    {300, 129, 128, 128, true, DType::f8e5m2}, {9, 33, 4, 8, true, DType::f8e4m3},
    {64, 48, 1, 16, false, DType::f8e5m2}};

// x with zeros, a subnormal, and an infinity and a NaN in its last rows.
Tensor awkward(int64_t rows, int64_t cols) {
  Tensor x = spread({rows, cols});
  float* p = static_cast<float*>(x.data_ptr());
  p[0] = 0.0f;
  p[1] = -0.0f;
  p[2] = 1e-40f;
  p[x.numel() - 1] = std::numeric_limits<float>::infinity();
  p[x.numel() - 3] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

RefQ ref_transposed(const RefQ& r) {
  RefQ t{transpose(r.q), {}, r.tc, r.tr, 0};
  const int64_t nbr = static_cast<int64_t>(r.inv.size()) / r.nbc;
  t.nbc = nbr;
  for (int64_t c = 0; c < r.nbc; ++c) {
    for (int64_t b = 0; b < nbr; ++b) t.inv.push_back(r.inv[static_cast<size_t>(b * r.nbc + c)]);
  }
  return t;
}

TEST(Fp8, QuantizeWithTransposeEqualsTheWrittenOutTiles) {
  manual_seed(testing::fresh_seed());
  for (const PairCase& c : kPairCases) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " tiles " << c.tr << "x" << c.tc
                                      << (c.retile ? " retiled" : ""));
    const Tensor x = spread({c.rows, c.cols}).to(DType::bf16);
    float amax = 0.0f;
    const fp8::QuantizedPair p =
        fp8::quantize_with_transpose(x, c.f, c.tr, c.tc, c.retile, std::nullopt, &amax);
    const RefQ r = ref_quantize(mat_of(x), c.f, c.tr, c.tc);
    const RefQ rt =
        c.retile ? ref_quantize(transpose(mat_of(x)), c.f, c.tr, c.tc) : ref_transposed(r);
    expect_equal(p.q.data, r.q, "codes");
    EXPECT_EQ(p.q.scale_inv.to_vector<float>(), r.inv);
    expect_equal(p.t.data, rt.q, "transposed codes");
    EXPECT_EQ(p.t.scale_inv.to_vector<float>(), rt.inv);
    EXPECT_EQ(p.t.scale_inv.size(1), rt.nbc);
    EXPECT_EQ(amax, fp8::amax(x));
  }
  // One scale: the transpose's codes are the codes transposed, under the same scale.
  const Tensor x = spread({40, 24});
  const fp8::QuantizedPair p = fp8::quantize_tensorwise_with_transpose(x, DType::f8e5m2, 2);
  const RefQ r = ref_quantize(mat_of(x), DType::f8e5m2, 40, 24,
                              fp8::scale_from_amax(fp8::amax(x), DType::f8e5m2, 2));
  expect_equal(p.q.data, r.q, "codes");
  expect_equal(p.t.data, transpose(r.q), "transposed codes");
  EXPECT_EQ(p.t.scale_inv.to_vector<float>(), r.inv);
  EXPECT_EQ(p.t.tile_rows, 24);
  expect_error([] { fp8::quantize_with_transpose(zeros({4}), DType::f8e4m3, 1, 4, true); },
               {"fp8::quantize_with_transpose", "expected a 2-D tensor"});
}

// kernels/fp8.cu's quantize_transpose_kernel walked on the host, thread by thread, with the index
// and scale functions it calls (kern/fp8.h): the codes and scales it writes, and how often each
// is written, against fp8::quantize_with_transpose's.
struct Replay {
  std::vector<uint8_t> codes, codes_t;
  std::vector<float> inv, inv_t;
  std::vector<int> writes, writes_t, inv_writes, inv_t_writes;
  uint32_t amax = 0;  // amax_out's bits
};

uint8_t encode(float v, DType f) {
  if (std::isnan(v)) v = NAN;
  return f == DType::f8e4m3
             ? kern::float8_encode(kern::clamp_finite(v, 448.0f), kern::e4m3_format())
             : kern::float8_encode(kern::clamp_finite(v, 57344.0f), kern::e5m2_format());
}

uint32_t abs_bits(float v) { return kern::float_bits(v) & 0x7fffffffu; }

void replay_region(const kern::Fp8QuantizeArgs& q, const std::vector<float>& x,
                   kern::Fp8PairMode mode, int64_t gi, Replay& out) {
  constexpr int64_t R = kern::kFp8ScaleBlock, kThreads = 256;
  const float fmax = q.format == DType::f8e4m3 ? 448.0f : 57344.0f;
  const kern::Fp8Tile g = kern::fp8_region(q.rows, q.cols, gi);
  std::vector<float> tile(static_cast<size_t>(R * (R + 1)));
  uint32_t m = 0;
  for (int64_t e = 0; e < R * R; ++e) {
    const int64_t r = e / R, c = e % R;
    const float v =
        r < g.h && c < g.w ? x[static_cast<size_t>((g.r0 + r) * q.cols + g.c0 + c)] : 0.0f;
    tile[static_cast<size_t>(r * (R + 1) + c)] = v;
    m = std::max(m, abs_bits(v));
  }
  const bool per_row = mode == kern::Fp8PairMode::kRows;
  const bool retile = q.retile_t && per_row;
  std::vector<float> row_scale(R, 1.0f), col_scale(R, 1.0f);
  if (per_row) {
    for (int64_t line = 0; line < R; ++line) {
      uint32_t rm = 0, cm = 0;
      for (int64_t j = 0; j < R; ++j) {
        rm = std::max(rm, abs_bits(tile[static_cast<size_t>(line * (R + 1) + j)]));
        cm = std::max(cm, abs_bits(tile[static_cast<size_t>(j * (R + 1) + line)]));
      }
      row_scale[static_cast<size_t>(line)] =
          kern::fp8_scale_from_amax(kern::bits_float(rm), fmax, 0);
      col_scale[static_cast<size_t>(line)] =
          kern::fp8_scale_from_amax(kern::bits_float(cm), fmax, 0);
    }
  } else {
    row_scale[0] = mode == kern::Fp8PairMode::kOne
                       ? kern::fp8_one_scale(q, fmax)
                       : kern::fp8_scale_from_amax(kern::bits_float(m), fmax, 0);
  }
  const auto at = [&](int64_t r, int64_t c) { return tile[static_cast<size_t>(r * (R + 1) + c)]; };
  for (int64_t e = 0; e < R * R; ++e) {
    const int64_t r = e / R, c = e % R;
    if (r < g.h && c < g.w) {
      const auto i = static_cast<size_t>((g.r0 + r) * q.cols + g.c0 + c);
      out.codes[i] = encode(at(r, c) * row_scale[static_cast<size_t>(per_row ? r : 0)], q.format);
      ++out.writes[i];
    }
    const int64_t tc = e / R, tr = e % R;
    if (tr < g.h && tc < g.w) {
      const float s = retile ? col_scale[static_cast<size_t>(tc)]
                             : row_scale[static_cast<size_t>(per_row ? tr : 0)];
      const auto i = static_cast<size_t>((g.c0 + tc) * q.rows + g.r0 + tr);
      out.codes_t[i] = encode(at(tr, tc) * s, q.format);
      ++out.writes_t[i];
    }
  }
  const bool first = g.r0 == 0 && g.c0 == 0;
  for (int64_t i = 0; i < std::min(R, kThreads); ++i) {
    if (per_row ? i < g.h : i == 0 && (mode != kern::Fp8PairMode::kOne || first)) {
      const float inv = 1.0f / row_scale[static_cast<size_t>(per_row ? i : 0)];
      const auto at_q = static_cast<size_t>(kern::fp8_pair_scale_index(mode, q.cols, g, i));
      out.inv.at(at_q) = inv;
      ++out.inv_writes.at(at_q);
      if (!retile) {
        const auto at_t =
            static_cast<size_t>(kern::fp8_pair_scale_index_t(mode, false, q.rows, g, i, 0));
        out.inv_t.at(at_t) = inv;
        ++out.inv_t_writes.at(at_t);
      }
    }
    if (retile && i < g.w) {
      const auto at_t =
          static_cast<size_t>(kern::fp8_pair_scale_index_t(mode, true, q.rows, g, 0, i));
      out.inv_t.at(at_t) = 1.0f / col_scale[static_cast<size_t>(i)];
      ++out.inv_t_writes.at(at_t);
    }
  }
  out.amax = std::max(out.amax, m);
}

// Every element of `writes` is 1.
void expect_once(const std::vector<int>& writes, const char* what) {
  EXPECT_EQ(std::count(writes.begin(), writes.end(), 1), static_cast<int64_t>(writes.size()))
      << what;
}

void expect_replay_equals(const fp8::QuantizedPair& want, const Replay& got, float amax) {
  EXPECT_EQ(got.codes, code_bytes(want.q.data));
  EXPECT_EQ(got.codes_t, code_bytes(want.t.data));
  EXPECT_EQ(got.inv, want.q.scale_inv.to_vector<float>());
  EXPECT_EQ(got.inv_t, want.t.scale_inv.to_vector<float>());
  expect_once(got.writes, "codes");
  expect_once(got.writes_t, "transposed codes");
  expect_once(got.inv_writes, "scales");
  expect_once(got.inv_t_writes, "transposed scales");
  EXPECT_EQ(got.amax, kern::float_bits(amax) & 0x7fffffffu);  // the amax_out the kernel leaves
}

Replay replay(const kern::Fp8QuantizeArgs& q, const std::vector<float>& x, const Tensor& inv,
              const Tensor& inv_t) {
  const auto n = static_cast<size_t>(q.rows * q.cols);
  // The scale tables start as fp8::quantize_on_device's: ones.
  Replay out{std::vector<uint8_t>(n, 0),
             std::vector<uint8_t>(n, 0),
             std::vector<float>(static_cast<size_t>(inv.numel()), 1.0f),
             std::vector<float>(static_cast<size_t>(inv_t.numel()), 1.0f),
             std::vector<int>(n, 0),
             std::vector<int>(n, 0),
             std::vector<int>(static_cast<size_t>(inv.numel()), 0),
             std::vector<int>(static_cast<size_t>(inv_t.numel()), 0)};
  const kern::Fp8PairMode mode = kern::fp8_pair_mode(q);
  const int64_t b = kern::kFp8ScaleBlock;
  for (int64_t g = 0; g < ((q.rows + b - 1) / b) * ((q.cols + b - 1) / b); ++g) {
    replay_region(q, x, mode, g, out);
  }
  return out;
}

TEST(Fp8, FusedQuantizeTransposeReplaysOnTheHost) {
  manual_seed(testing::fresh_seed());
  for (const PairCase& c : kPairCases) {
    const kern::Fp8QuantizeArgs q{.rows = c.rows,
                                  .cols = c.cols,
                                  .tile_rows = c.tr,
                                  .tile_cols = c.tc,
                                  .format = c.f,
                                  .retile_t = c.retile};
    if (kern::fp8_pair_mode(q) == kern::Fp8PairMode::kUnfused) continue;
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " tiles " << c.tr << "x" << c.tc
                                      << (c.retile ? " retiled" : ""));
    const Tensor x = awkward(c.rows, c.cols);
    const fp8::QuantizedPair want = fp8::quantize_with_transpose(x, c.f, c.tr, c.tc, c.retile);
    expect_replay_equals(want, replay(q, x.to_vector<float>(), want.q.scale_inv, want.t.scale_inv),
                         fp8::amax(x));
  }
  // One scale: given, from an amax, or the delayed recipe's (the history's scale once steps > 0,
  // the amax's before).
  const Tensor x = awkward(300, 140);
  const std::vector<float> xv = x.to_vector<float>();
  const float amax = 3.0f, history_scale = 5.0f;
  const uint32_t amax_bits = kern::float_bits(amax);
  for (const int64_t steps : {int64_t{0}, int64_t{3}}) {
    for (const bool retile : {false, true}) {  // tiles covering x and x^T: retiling is the same
      const int64_t tile = retile ? 1000 : 0;
      const kern::Fp8QuantizeArgs q{.rows = 300,
                                    .cols = 140,
                                    .tile_rows = retile ? tile : 300,
                                    .tile_cols = retile ? tile : 140,
                                    .format = DType::f8e5m2,
                                    .scale_ptr = &history_scale,
                                    .steps = &steps,
                                    .amax_in = &amax_bits,
                                    .margin = 1,
                                    .retile_t = retile};
      ASSERT_EQ(kern::fp8_pair_mode(q), kern::Fp8PairMode::kOne);
      const float s = steps > 0 ? history_scale : fp8::scale_from_amax(amax, DType::f8e5m2, 1);
      const fp8::QuantizedPair want =
          fp8::quantize_with_transpose(x, DType::f8e5m2, q.tile_rows, q.tile_cols, retile, s);
      expect_replay_equals(want, replay(q, xv, want.q.scale_inv, want.t.scale_inv), fp8::amax(x));
    }
  }
  // One scale in tiles smaller than the matrix, or than its transpose where retiled, is not fused.
  EXPECT_EQ(kern::fp8_pair_mode({.rows = 300, .cols = 140, .tile_rows = 128, .has_scale = true}),
            kern::Fp8PairMode::kUnfused);
  EXPECT_EQ(kern::fp8_pair_mode({.rows = 300,
                                 .cols = 140,
                                 .tile_rows = 300,
                                 .tile_cols = 140,
                                 .has_scale = true,
                                 .retile_t = true}),
            kern::Fp8PairMode::kUnfused);
}

// fp8::linear with only some of x, W and b requiring grad quantizes only the transposes their
// gradients need, and gives each gradient it does give as the run where all require grad; the
// delayed recipe's history advances only when something does. A batch with no rows is no error.
TEST(Fp8, LinearGivesTheGradientsAskedForAndTakesEmptyBatches) {
  manual_seed(testing::fresh_seed());
  const Tensor x = spread({6, 32}), w = mul(randn({16, 32}), 0.1), b = randn({16});
  const Tensor dy = spread({6, 16});
  for (const fp8::Scaling scaling :
       {fp8::Scaling::Current, fp8::Scaling::Block, fp8::Scaling::Delayed}) {
    SCOPED_TRACE(fp8::scaling_name(scaling));
    const fp8::Recipe recipe{.scaling = scaling, .block = 16};
    struct Out {
      std::vector<float> y;
      Tensor grads[3];
      int64_t steps;
    };
    const auto run_with = [&](int mask, const Tensor& xv, const Tensor& dyv) {
      fp8::LinearState st{zeros({3, 16}), ones({3}), zeros({1}, {.dtype = DType::i64})};
      const Tensor in[3] = {xv.detach().requires_grad_((mask & 1) != 0),
                            w.detach().requires_grad_((mask & 2) != 0),
                            b.detach().requires_grad_((mask & 4) != 0)};
      const Tensor y = fp8::linear(in[0], in[1], in[2], recipe, &st);
      if (mask != 0) y.backward(dyv);
      Out o{y.detach().to_vector<float>(), {}, st.steps.item<int64_t>()};
      for (int i = 0; i < 3; ++i) o.grads[i] = in[i].grad();
      return o;
    };
    const Out all = run_with(7, x, dy);
    for (int mask = 0; mask < 7; ++mask) {
      SCOPED_TRACE(mask);
      const Out o = run_with(mask, x, dy);
      EXPECT_EQ(o.y, all.y);
      for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(o.grads[i].defined(), (mask >> i & 1) != 0) << "input " << i;
        if (o.grads[i].defined()) {
          EXPECT_EQ(o.grads[i].to_vector<float>(), all.grads[i].to_vector<float>());
        }
      }
      EXPECT_EQ(o.steps, scaling == fp8::Scaling::Delayed && mask != 0 ? 1 : 0);
    }
    const Out empty = run_with(7, zeros({0, 32}), zeros({0, 16}));
    EXPECT_TRUE(empty.y.empty());
    EXPECT_EQ(empty.grads[0].numel(), 0);
    EXPECT_EQ(empty.grads[1].to_vector<float>(), std::vector<float>(16 * 32, 0.0f));
  }
}

// The fused kernel, and the two-pass forms of the tiles it does not take, against the CPU's bytes.
TEST(CudaFp8, QuantizeWithTransposeMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  manual_seed(seed);
  const Device gpu = Device::cuda(0);
  int i = 0;
  for (const PairCase& c : kPairCases) {
    // The kernels read each input dtype as it is stored.
    const DType in = std::array{DType::bf16, DType::f32, DType::f16, DType::f64}[i++ % 4];
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " tiles " << c.tr << "x" << c.tc
                                      << (c.retile ? " retiled " : " ") << in);
    const Tensor x = awkward(c.rows, c.cols).to(in);
    float amax_cpu = 0.0f, amax_gpu = 0.0f;
    const fp8::QuantizedPair want =
        fp8::quantize_with_transpose(x, c.f, c.tr, c.tc, c.retile, std::nullopt, &amax_cpu);
    const fp8::QuantizedPair got =
        fp8::quantize_with_transpose(x.to(gpu), c.f, c.tr, c.tc, c.retile, std::nullopt, &amax_gpu);
    EXPECT_EQ(got.t.data.device(), gpu);
    EXPECT_EQ(code_bytes(got.q.data), code_bytes(want.q.data));
    EXPECT_EQ(code_bytes(got.t.data), code_bytes(want.t.data));
    EXPECT_EQ(got.q.scale_inv.to_vector<float>(), want.q.scale_inv.to_vector<float>());
    EXPECT_EQ(got.t.scale_inv.to_vector<float>(), want.t.scale_inv.to_vector<float>());
    EXPECT_EQ(got.t.tile_rows, want.t.tile_rows);
    EXPECT_TRUE(std::isnan(amax_gpu) && std::isnan(amax_cpu));
    const Tensor finite = spread({c.rows, c.cols}).to(in);
    const fp8::QuantizedPair g1 = fp8::quantize_tensorwise_with_transpose(finite.to(gpu), c.f, 1);
    const fp8::QuantizedPair w1 = fp8::quantize_tensorwise_with_transpose(finite, c.f, 1);
    EXPECT_EQ(code_bytes(g1.q.data), code_bytes(w1.q.data));
    EXPECT_EQ(code_bytes(g1.t.data), code_bytes(w1.t.data));
    EXPECT_EQ(g1.t.scale_inv.to_vector<float>(), w1.t.scale_inv.to_vector<float>());
    // A given scale with the case's tiles (two passes where they are not the whole matrix): the
    // transpose's table has its own tiles' shape where retiled.
    const fp8::QuantizedPair g2 =
        fp8::quantize_with_transpose(finite.to(gpu), c.f, c.tr, c.tc, c.retile, 0.75f);
    const fp8::QuantizedPair w2 =
        fp8::quantize_with_transpose(finite, c.f, c.tr, c.tc, c.retile, 0.75f);
    EXPECT_EQ(code_bytes(g2.t.data), code_bytes(w2.t.data));
    EXPECT_EQ(g2.t.scale_inv.shape(), w2.t.scale_inv.shape());
    EXPECT_EQ(g2.t.scale_inv.to_vector<float>(), w2.t.scale_inv.to_vector<float>());
  }
}

// The delayed recipe on the GPU, its history kept and updated on the device, against the CPU's
// over four steps: the same amaxes, scales and counts bit for bit (the first step's own amaxes,
// then the history's), and the outputs and gradients within the GEMMs' accumulation; an
// evaluation forward records nothing.
TEST(CudaFp8, DelayedLinearMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  if (cuda::get_device_properties(0).major != 9) GTEST_SKIP() << "the FP8 GEMM needs Hopper";
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  manual_seed(seed);
  const Device gpu = Device::cuda(0);
  const fp8::Recipe recipe{.scaling = fp8::Scaling::Delayed, .amax_history_len = 3, .margin = 1};
  const Tensor w = mul(randn({384, 256}), 0.05), b = randn({384});
  fp8::LinearState st[2];
  Tensor ws[2];
  for (int d = 0; d < 2; ++d) {
    const Device dev = d == 0 ? Device::cpu() : gpu;
    st[d] = {zeros({3, 3}, {.device = dev}), ones({3}, {.device = dev}),
             zeros({1}, {.dtype = DType::i64, .device = dev})};
    ws[d] = w.detach().to(dev).requires_grad_(true);
  }
  const auto close = [](const Tensor& got, const Tensor& want) {
    return all_close(got.to(Device::cpu()), want, 1e-3 * want.abs().max().item<double>(), 1e-3);
  };
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(step);
    const Tensor x = mul(spread({4, 64, 256}), 1.0 + step);
    const Tensor dy = mul(spread({4, 64, 384}), 3.0 - step * 0.5);
    Tensor ys[2], gx[2], gw[2];
    for (int d = 0; d < 2; ++d) {
      const Device dev = d == 0 ? Device::cpu() : gpu;
      const Tensor xd = x.to(dev).requires_grad_(true);
      ws[d].set_grad(Tensor());
      ys[d] = fp8::linear(xd, ws[d], b.to(dev), recipe, &st[d]);
      ys[d].backward(dy.to(dev));
      gx[d] = xd.grad();
      gw[d] = ws[d].grad();
    }
    EXPECT_TRUE(close(ys[1].detach(), ys[0].detach()));
    EXPECT_TRUE(close(gx[1], gx[0]));
    EXPECT_TRUE(close(gw[1], gw[0]));
    EXPECT_EQ(st[1].amax_history.to_vector<float>(), st[0].amax_history.to_vector<float>());
    EXPECT_EQ(st[1].scale.to_vector<float>(), st[0].scale.to_vector<float>());
    EXPECT_EQ(st[1].steps.to_vector<int64_t>(), st[0].steps.to_vector<int64_t>());
  }
  const std::vector<float> before = st[1].amax_history.to_vector<float>();
  {
    NoGradGuard ng;
    fp8::linear(spread({64, 256}).to(gpu), ws[1], b.to(gpu), recipe, &st[1]);
  }
  EXPECT_EQ(st[1].amax_history.to_vector<float>(), before);
  // The state must be beside the input.
  expect_error(
      [&] {
        fp8::linear(spread({64, 256}).to(gpu), ws[1], b.to(gpu), recipe, &st[0]);
      },
      {"fp8::linear", "the delayed recipe's state is on cpu"});
}

}  // namespace
}  // namespace sinter

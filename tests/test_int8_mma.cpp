// The int8 tensor-core GEMM (Note [int8 mma gemm] in kernels/int8_mma.h): a replay on the host of
// whole block tiles, with the kernel's own index math (chunk copies, fragments, accumulator
// positions) and mma.sync.m16n8k32.s8 modelled element by element as the PTX ISA lays out its
// fragments; the quantized layers' CUDA passes around it (kernels/int8_layout.h) replayed on the
// host against the CPU kernels; and, on a GPU, the kernels against the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/int8.h"
#include "int8_layout.h"
#include "int8_mma.h"
#include "kern/int8.h"
#include "test_util.h"

#ifdef SINTER_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace sinter {
namespace {

namespace im = cudak::int8mma;

// mma.sync.m16n8k32.row.col.s32.s8.s8.s32 across a warp, from the PTX ISA's fragment tables
// ("Matrix Fragments for mma.m16n8k32", integer types), element by element: with g = lane / 4 and
// t = lane % 4, a lane's A values a_i (i = 0..15, byte i % 4 of register i / 4) lie at row g for
// i < 4 and 8 <= i < 12, else g + 8, column 4t + i % 4 (+ 16 for i >= 8); its B values b_i
// (i = 0..7) at row (k) 4t + i % 4 (+ 16 for i >= 4), column g; its accumulators c_i at row g
// (i < 2) or g + 8, column 2t + i % 2.
void model_mma(const uint32_t (&a)[32][4], const uint32_t (&b)[32][2], int32_t (&d)[32][4]) {
  int32_t am[16][32] = {}, bm[32][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 16; ++i) {
      const auto v = static_cast<int8_t>((a[lane][i / 4] >> (8 * (i % 4))) & 0xff);
      const int row = (i < 4 || (i >= 8 && i < 12)) ? g : g + 8;
      const int col = 4 * t + i % 4 + (i >= 8 ? 16 : 0);
      am[row][col] = v;
    }
    for (int i = 0; i < 8; ++i) {
      const auto v = static_cast<int8_t>((b[lane][i / 4] >> (8 * (i % 4))) & 0xff);
      bm[4 * t + i % 4 + (i >= 4 ? 16 : 0)][g] = v;
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = i < 2 ? g : g + 8, col = 2 * t + i % 2;
      for (int p = 0; p < 32; ++p) d[lane][i] += am[row][p] * bm[p][col];
    }
  }
}

// The kernel's computation of every block tile, thread by thread and warp by warp.
std::vector<int32_t> replay(int64_t m, int64_t n, int64_t k, const std::vector<int8_t>& a,
                            int64_t lda, bool vector_a, const std::vector<int8_t>& b, int64_t ldb,
                            bool vector_b, int64_t ldc) {
  std::vector<int32_t> c(static_cast<size_t>(m * ldc), -7);
  std::vector<int8_t> as(im::kBM * im::kLd), bs(im::kBN * im::kLd);
  for (int64_t m0 = 0; m0 < m; m0 += im::kBM) {
    for (int64_t n0 = 0; n0 < n; n0 += im::kBN) {
      static int32_t acc[4][32][im::kMI][im::kNI][4];
      std::memset(acc, 0, sizeof acc);
      for (int64_t k0 = 0; k0 < k; k0 += im::kBK) {
        std::fill(as.begin(), as.end(), int8_t{99});  // poison: every read byte must be copied
        std::fill(bs.begin(), bs.end(), int8_t{99});
        for (int tid = 0; tid < im::kThreads; ++tid) {
          im::load_chunk(tid, a.data(), m, k, lda, m0, k0, vector_a, as.data());
          im::load_chunk(tid, b.data(), n, k, ldb, n0, k0, vector_b, bs.data());
        }
        for (int w = 0; w < im::kThreads / 32; ++w) {
          for (int mi = 0; mi < im::kMI; ++mi) {
            for (int ni = 0; ni < im::kNI; ++ni) {
              uint32_t fa[32][4], fb[32][2];
              int32_t d[32][4] = {};
              for (int lane = 0; lane < 32; ++lane) {
                im::fragments(as.data(), bs.data(), w, lane, mi, ni, fa[lane], fb[lane]);
              }
              model_mma(fa, fb, d);
              for (int lane = 0; lane < 32; ++lane) {
                for (int r = 0; r < 4; ++r) acc[w][lane][mi][ni][r] += d[lane][r];
              }
            }
          }
        }
      }
      for (int w = 0; w < im::kThreads / 32; ++w) {
        for (int lane = 0; lane < 32; ++lane) {
          for (int mi = 0; mi < im::kMI; ++mi) {
            for (int ni = 0; ni < im::kNI; ++ni) {
              for (int r = 0; r < 4; ++r) {
                const im::Chunk e =
                    im::d_elem(lane, r, im::warp_row0(w) + mi * 16, im::warp_col0(w) + ni * 8);
                const int64_t row = m0 + e.row, col = n0 + e.col;
                if (row < m && col < n) c[row * ldc + col] = acc[w][lane][mi][ni][r];
              }
            }
          }
        }
      }
    }
  }
  return c;
}

struct Operands {
  std::vector<int8_t> a, b;
  std::vector<int32_t> want;
};

Operands operands(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                  std::mt19937& rng) {
  std::uniform_int_distribution<int> value(-128, 127);
  Operands o;
  o.a.resize(static_cast<size_t>(m * lda));
  o.b.resize(static_cast<size_t>(n * ldb));
  for (int8_t& v : o.a) v = static_cast<int8_t>(value(rng));
  for (int8_t& v : o.b) v = static_cast<int8_t>(value(rng));
  for (int64_t p = 0; p < k; ++p) o.a[p] = o.b[p] = -128;  // the extreme products
  const std::vector<int16_t> a16(o.a.begin(), o.a.end()), b16(o.b.begin(), o.b.end());
  o.want.assign(static_cast<size_t>(m * ldc), -7);
  cpu::int8::gemm_reference(m, n, k, a16.data(), lda, b16.data(), ldb, o.want.data(), ldc);
  return o;
}

TEST(Int8Mma, BlockTilesMatchTheReference) {
  std::mt19937 rng(static_cast<uint32_t>(testing::fresh_seed()));
  struct Case {
    int64_t m, n, k, lda, ldb;
  };
  // Ragged edges in every dim; rows 16-byte aligned (vector copies) or not (byte copies).
  for (const Case& s : {Case{70, 37, 75, 80, 96}, Case{64, 64, 64, 64, 64},
                        Case{1, 129, 33, 33, 35}, Case{130, 8, 300, 304, 300}}) {
    const int64_t ldc = s.n + 1;
    const Operands o = operands(s.m, s.n, s.k, s.lda, s.ldb, ldc, rng);
    const std::vector<int32_t> got =
        replay(s.m, s.n, s.k, o.a, s.lda, s.lda % 16 == 0, o.b, s.ldb, s.ldb % 16 == 0, ldc);
    EXPECT_EQ(got, o.want) << s.m << "x" << s.n << "x" << s.k << " lda " << s.lda;
  }
}

namespace il = cudak::int8layout;

// The CUDA convolution's passes (kernels/int8.cu) element by element with their own index math:
// the weight padded, the input quantized, for each pass of `rows` output pixels (numbered across
// the images) and each group the windows gathered and multiplied (by the CPU's int8_gemm: the
// GEMM's tiles are replayed above), the epilogue written to where it goes.
std::vector<float> replay_conv(const kern::Conv2dGeom& g, const std::vector<float>& x, float xs,
                               const std::vector<int8_t>& w, const kern::Int8Epilogue& e,
                               int64_t rows) {
  const int64_t cig = g.c_in / g.groups, cog = g.c_out / g.groups, hw = g.h_out * g.w_out;
  const int64_t taps = cig * g.kh * g.kw, kp = il::row_bytes(taps), total = g.n * hw;
  std::vector<int8_t> packed(static_cast<size_t>(g.c_out * kp)), qx(x.size());
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = il::padded_weight(w.data(), taps, i);
  for (size_t i = 0; i < x.size(); ++i) qx[i] = static_cast<int8_t>(kern::quantize_int8(x[i], xs));
  std::vector<float> y(static_cast<size_t>(total * g.c_out), std::nanf(""));
  for (int64_t row0 = 0; row0 < total; row0 += rows) {
    const int64_t pass = std::min(rows, total - row0);
    std::vector<int8_t> cols(static_cast<size_t>(pass * kp));
    std::vector<int32_t> c(static_cast<size_t>(pass * cog));
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      for (int64_t i = 0; i < pass * kp; ++i)
        cols[i] = il::window_value(g, qx.data(), row0, grp, i);
      cpu::int8_gemm(kern::Ctx{}, pass, cog, taps, cols.data(), kp, packed.data() + grp * cog * kp,
                     kp, c.data(), cog);
      for (int64_t i = 0; i < pass * cog; ++i) {
        const int64_t r = i / cog, j = i % cog, ch = grp * cog + j;
        y[il::conv_out_index(g, row0, grp, r, j)] =
            kern::int8_epilogue(c[i], e.scale[ch], e.bias ? e.bias[ch] : 0.0F, e.act);
      }
    }
  }
  return y;
}

// The CUDA Linear's passes: the input rows quantized and padded, the GEMM, the epilogue.
std::vector<float> replay_linear(int64_t m, int64_t n, int64_t k, const std::vector<float>& x,
                                 float xs, const std::vector<int8_t>& w,
                                 const kern::Int8Epilogue& e) {
  const int64_t kp = il::row_bytes(k);
  std::vector<int8_t> packed(static_cast<size_t>(n * kp)), a(static_cast<size_t>(m * kp));
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = il::padded_weight(w.data(), k, i);
  for (size_t i = 0; i < a.size(); ++i) a[i] = il::padded_input(x.data(), xs, k, i);
  std::vector<int32_t> c(static_cast<size_t>(m * n));
  cpu::int8_gemm(kern::Ctx{}, m, n, k, a.data(), kp, packed.data(), kp, c.data(), n);
  std::vector<float> y(c.size());
  for (int64_t i = 0; i < m * n; ++i) {
    y[i] = kern::int8_epilogue(c[i], e.scale[i % n], e.bias ? e.bias[i % n] : 0.0F, e.act);
  }
  return y;
}

std::vector<uint8_t> cpu_packed(int64_t groups, int64_t rows, int64_t k,
                                const std::vector<int8_t>& w) {
  int64_t bytes = 0;
  cpu::int8_packed_bytes(kern::Ctx{}, groups, rows, k, &bytes);
  std::vector<uint8_t> packed(static_cast<size_t>(bytes));
  cpu::int8_pack_weight(kern::Ctx{}, groups, rows, k, w.data(), packed.data());
  return packed;
}

struct LayerData {
  std::vector<float> x, scale, bias;
  std::vector<int8_t> w;
};

LayerData layer_data(int64_t x_numel, int64_t rows, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0F, 1.5F);
  std::uniform_int_distribution<int> value(-128, 127);
  LayerData d;
  d.x.resize(static_cast<size_t>(x_numel));
  for (float& v : d.x) v = normal(rng);
  d.x[0] = std::nanf("");  // quantized to 0
  d.w.resize(static_cast<size_t>(rows * k));
  for (int8_t& v : d.w) v = static_cast<int8_t>(value(rng));
  for (int64_t r = 0; r < rows; ++r) {
    d.scale.push_back(1e-3F * (1.0F + static_cast<float>(r % 7)));
    d.bias.push_back(normal(rng));
  }
  return d;
}

TEST(Int8Layout, CudaLayersReplayedOnTheHostMatchTheCpuKernels) {
  std::mt19937 rng(static_cast<uint32_t>(testing::fresh_seed()));
  constexpr float kScale = 0.02F;
  for (const auto& [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 1}, {37, 21, 300}, {5, 70, 16}, {64, 10, 33}}) {
    const LayerData d = layer_data(m * k, n, k, rng);
    const std::vector<uint8_t> packed = cpu_packed(1, n, k, d.w);
    for (const kern::GemmAct act :
         {kern::GemmAct::None, kern::GemmAct::Relu, kern::GemmAct::GeluTanh}) {
      const kern::Int8Epilogue e{d.scale.data(),
                                 act == kern::GemmAct::Relu ? nullptr : d.bias.data(), act};
      std::vector<float> want(static_cast<size_t>(m * n), std::nanf(""));
      cpu::int8_linear(kern::Ctx{}, m, n, k, d.x.data(), kScale, packed.data(), e, want.data());
      const std::vector<float> got = replay_linear(m, n, k, d.x, kScale, d.w, e);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
          << "linear " << m << "x" << n << "x" << k;
    }
  }
  const auto geom = [](int64_t n, int64_t cin, int64_t h, int64_t w, int64_t cout, int64_t kh,
                       int64_t kw, int64_t s, int64_t p, int64_t dil, int64_t groups) {
    kern::Conv2dGeom g{.n = n, .c_in = cin, .h = h, .w = w, .c_out = cout, .kh = kh, .kw = kw};
    g.stride_h = s, g.stride_w = 1;
    g.pad_h = p, g.pad_w = p;
    g.dil_h = dil, g.dil_w = dil;
    g.groups = groups;
    g.h_out = (h + 2 * p - dil * (kh - 1) - 1) / g.stride_h + 1;
    g.w_out = (w + 2 * p - dil * (kw - 1) - 1) / g.stride_w + 1;
    return g;
  };
  for (const kern::Conv2dGeom& g :
       {geom(2, 3, 9, 11, 8, 3, 3, 1, 1, 1, 1), geom(3, 4, 9, 11, 6, 3, 2, 2, 1, 1, 2),
        geom(2, 5, 9, 11, 5, 3, 3, 1, 2, 2, 5), geom(2, 16, 7, 5, 9, 1, 1, 1, 0, 1, 1)}) {
    const int64_t taps = g.c_in / g.groups * g.kh * g.kw;
    const LayerData d = layer_data(g.n * g.c_in * g.h * g.w, g.c_out, taps, rng);
    const std::vector<uint8_t> packed = cpu_packed(g.groups, g.c_out / g.groups, taps, d.w);
    for (const kern::GemmAct act : {kern::GemmAct::None, kern::GemmAct::Relu}) {
      const kern::Int8Epilogue e{d.scale.data(), d.bias.data(), act};
      std::vector<float> want(static_cast<size_t>(g.n * g.c_out * g.h_out * g.w_out));
      cpu::int8_conv2d(kern::Ctx{}, g, d.x.data(), kScale, packed.data(), e, want.data());
      // One pass, passes of one image, and passes of 7 pixels that cross the images' borders.
      const int64_t hw = g.h_out * g.w_out;
      for (const int64_t rows : {g.n * hw, hw, int64_t{7}}) {
        const std::vector<float> got = replay_conv(g, d.x, kScale, d.w, e, rows);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
            << "conv groups " << g.groups << " stride " << g.stride_h << " rows " << rows;
      }
    }
  }
}

// A pass of the CUDA convolution keeps its scratch under the bound and the GEMM's rows under
// theirs, takes at least one pixel, and at most all of them.
TEST(Int8Layout, ConvolutionPassesKeepTheirScratchBounded) {
  kern::Conv2dGeom g{.n = 256, .c_in = 16, .h = 32, .w = 32, .c_out = 16, .kh = 3, .kw = 3};
  g.h_out = g.w_out = 32;
  g.pad_h = g.pad_w = 1;
  const int64_t per_row = il::row_bytes(144) + 4 * 16, total = 256 * 32 * 32;
  EXPECT_EQ(il::conv_rows_per_pass(g, 10 * per_row + 5, total), 10);
  EXPECT_EQ(il::conv_rows_per_pass(g, per_row - 1, total), 1);
  EXPECT_EQ(il::conv_rows_per_pass(g, int64_t{1} << 40, total), total);
  EXPECT_EQ(il::conv_rows_per_pass(g, int64_t{1} << 40, 4096), 4096);
  EXPECT_EQ(il::row_bytes(144), 144);
  EXPECT_EQ(il::row_bytes(145), 160);
}

TEST(CudaInt8Gemm, MatchesTheReference) {
  SINTER_REQUIRE_CUDA();
#ifdef SINTER_WITH_CUDA
  std::mt19937 rng(static_cast<uint32_t>(testing::fresh_seed()));
  for (const auto& [m, n, k, lda] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {70, 37, 75, 80}, {256, 128, 3136, 3136}, {1, 10, 128, 128}, {200, 64, 33, 35}}) {
    const int64_t ldb = lda, ldc = n;
    const Operands o = operands(m, n, k, lda, ldb, ldc, rng);
    int8_t *da = nullptr, *db = nullptr;
    int32_t* dc = nullptr;
    ASSERT_EQ(cudaMalloc(&da, o.a.size()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&db, o.b.size()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dc, o.want.size() * sizeof(int32_t)), cudaSuccess);
    cudaMemcpy(da, o.a.data(), o.a.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(db, o.b.data(), o.b.size(), cudaMemcpyHostToDevice);
    cudaMemset(dc, 0xff, o.want.size() * sizeof(int32_t));
    cudak::int8_gemm(kern::Ctx{}, m, n, k, da, lda, db, ldb, dc, ldc);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<int32_t> got(o.want.size());
    cudaMemcpy(got.data(), dc, got.size() * sizeof(int32_t), cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    EXPECT_EQ(got, o.want) << m << "x" << n << "x" << k;
  }
#endif
}

// k = 2^17 - 1 products of -128 x -128 (2^31 - 2^14) stay exact on the tensor cores, and 2^17 is
// refused before any launch.
TEST(CudaInt8Gemm, SumsAtTheLimitOfKAreExact) {
  SINTER_REQUIRE_CUDA();
#ifdef SINTER_WITH_CUDA
  constexpr int64_t k = kern::kInt8MaxK, ld = k + 1;  // rows of 2^17 bytes: 16-byte aligned
  const std::vector<int8_t> ones(static_cast<size_t>(2 * ld), -128);
  int8_t* d = nullptr;
  int32_t* dc = nullptr;
  ASSERT_EQ(cudaMalloc(&d, ones.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dc, 4 * sizeof(int32_t)), cudaSuccess);
  cudaMemcpy(d, ones.data(), ones.size(), cudaMemcpyHostToDevice);
  cudak::int8_gemm(kern::Ctx{}, 2, 2, k, d, ld, d, ld, dc, 2);
  int32_t got[4] = {};
  ASSERT_EQ(cudaMemcpy(got, dc, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
  for (const int32_t v : got) EXPECT_EQ(v, 2147467264);
  testing::expect_error([&] { cudak::int8_gemm(kern::Ctx{}, 2, 2, k + 1, d, ld, d, ld, dc, 2); },
                        {"int8_gemm", "k=131072"});
  cudaFree(d);
  cudaFree(dc);
#endif
}

}  // namespace
}  // namespace sinter

// The tensor-core warp tile on the host warp model (Note [host warp model]): the kernels' own
// warp_mma_tile_on and for_each_acc (kernels/mma_tile.h), with the tile geometry of the mma.sync
// GEMM (mma::MmaTile: each layout of A and B the dispatcher picks, both block tiles) and of the
// tensor-core convolution (mma::ConvTcTile: both N tiles), for bf16, f16 and TF32 operands and
// every warp of the block. Each warp's accumulators after one block-tile k step must equal the
// naive product of its rows of A and columns of B. A CTest builds this file again against a copy of
// mma_tile.h with two fragment registers swapped and expects it to fail (tests/CMakeLists.txt), so
// the comparison is shown to catch such faults.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "conv_problems.h"
#include "mma_tile.h"
#include "warp_model.h"

namespace sinter::testing {
namespace {

template <typename T>
const char* type_name() {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return "bf16";
  } else if constexpr (std::is_same_v<T, Half>) {
    return "f16";
  } else {
    return "tf32";
  }
}

// One block-tile k step of every warp of one tile configuration (mma::MmaTile, mma::ConvTcTile),
// against the naive product. Returns the number of accumulators that differ (and reports the
// first few).
template <class Tile, typename T>
int replay_tile() {
  constexpr int kBM = Tile::kBM, kBN = Tile::kBN, kBK = Tile::kBK;
  constexpr int kLdA = Tile::kLdA, kLdB = Tile::kLdB;
  constexpr bool kAMajorM = Tile::kAMajorM, kBMajorK = Tile::kBMajorK;
  // Small integers, exact in every operand type and summed exactly; the row padding holds a value
  // that no in-tile element has, so reading it shows.
  std::vector<T> sa(Tile::kSizeA, T(512.0f)), sb(Tile::kSizeB, T(512.0f));
  auto a_index = [](int m, int k) { return kAMajorM ? k * kLdA + m : m * kLdA + k; };
  auto b_index = [](int k, int n) { return kBMajorK ? n * kLdB + k : k * kLdB + n; };
  for (int m = 0; m < kBM; ++m) {
    for (int k = 0; k < kBK; ++k)
      sa[a_index(m, k)] = T(static_cast<float>((m * 7 + k * 3) % 7 - 3));
  }
  for (int k = 0; k < kBK; ++k) {
    for (int n = 0; n < kBN; ++n)
      sb[b_index(k, n)] = T(static_cast<float>((k * 5 + n * 11) % 9 - 4));
  }
  int wrong = 0;
  for (int warp = 0; warp < 8; ++warp) {
    const int wm0 = Tile::warp_m0(warp), wn0 = Tile::warp_n0(warp);
    std::vector<float> got(static_cast<size_t>(kBM) * kBN, -1e30f);
    HostWarp::run([&](int lane) {
      float acc[Tile::kMI][Tile::kNI][4] = {};
      cudak::mma::warp_mma_tile_on<HostIsa, T, Tile::kMI, Tile::kNI, kBK, kAMajorM, kBMajorK, kLdA,
                                   kLdB>(acc, sa.data(), sb.data(), wm0, wn0, lane);
      // Each accumulator has one owner, so the lanes write disjoint elements.
      cudak::mma::for_each_acc(acc, wm0, wn0, lane,
                               [&](int r, int c, float v) { got[r * kBN + c] = v; });
    });
    for (int i = wm0; i < wm0 + Tile::kWM; ++i) {
      for (int j = wn0; j < wn0 + Tile::kWN; ++j) {
        double want = 0;
        for (int k = 0; k < kBK; ++k) {
          want += static_cast<double>(static_cast<float>(sa[a_index(i, k)])) *
                  static_cast<double>(static_cast<float>(sb[b_index(k, j)]));
        }
        if (got[i * kBN + j] != static_cast<float>(want) && ++wrong <= 3) {
          ADD_FAILURE() << type_name<T>() << " " << kBM << "x" << kBN << " A M-major " << kAMajorM
                        << " B K-major " << kBMajorK << " warp " << warp << ": C(" << i << ", " << j
                        << ") = " << got[i * kBN + j] << " differs from the naive product " << want;
        }
      }
    }
  }
  return wrong;
}

// The gemm_mma tiles the dispatcher picks for T: 64x64 and 128x128, each in the four layouts.
template <typename T>
void replay_gemm_tiles() {
  using cudak::mma::MmaTile;
  EXPECT_EQ((replay_tile<MmaTile<T, 64, 64, false, false>, T>()), 0);
  EXPECT_EQ((replay_tile<MmaTile<T, 64, 64, false, true>, T>()), 0);
  EXPECT_EQ((replay_tile<MmaTile<T, 64, 64, true, false>, T>()), 0);
  EXPECT_EQ((replay_tile<MmaTile<T, 64, 64, true, true>, T>()), 0);
  EXPECT_EQ((replay_tile<MmaTile<T, 128, 128, false, false>, T>()), 0);
  EXPECT_EQ((replay_tile<MmaTile<T, 128, 128, false, true>, T>()), 0);
  EXPECT_EQ((replay_tile<MmaTile<T, 128, 128, true, false>, T>()), 0);
  EXPECT_EQ((replay_tile<MmaTile<T, 128, 128, true, true>, T>()), 0);
}

// The tensor-core convolution's tiles: N tiles of 32 and 64 (conv_tc_forward's two kernels).
template <typename T>
void replay_conv_tiles() {
  EXPECT_EQ((replay_tile<cudak::mma::ConvTcTile<T, 32>, T>()), 0);
  EXPECT_EQ((replay_tile<cudak::mma::ConvTcTile<T, 64>, T>()), 0);
}

TEST(WarpMma, Bf16GemmTilesMatchTheNaiveProduct) { replay_gemm_tiles<BFloat16>(); }
TEST(WarpMma, F16GemmTilesMatchTheNaiveProduct) { replay_gemm_tiles<Half>(); }
TEST(WarpMma, Tf32GemmTilesMatchTheNaiveProduct) { replay_gemm_tiles<float>(); }

TEST(WarpMma, Bf16ConvTilesMatchTheNaiveProduct) { replay_conv_tiles<BFloat16>(); }
TEST(WarpMma, F16ConvTilesMatchTheNaiveProduct) { replay_conv_tiles<Half>(); }
TEST(WarpMma, Tf32ConvTilesMatchTheNaiveProduct) { replay_conv_tiles<float>(); }

// The model's instructions themselves, on patterns whose results the PTX ISA's figures give.
TEST(WarpModel, LdmatrixAndTf32FollowThePtxIsa) {
  // Four 8x8 matrices of b16 values 100 q + 10 row + col, row i of matrix q at lane 8 q + i.
  std::vector<uint16_t> m(4 * 64);
  for (int q = 0; q < 4; ++q) {
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 8; ++j)
        m[q * 64 + i * 8 + j] = static_cast<uint16_t>(100 * q + 10 * i + j);
    }
  }
  std::vector<uint32_t> plain(32 * 4), trans(32 * 4);
  HostWarp::run([&](int lane) {
    uint32_t r[4], rt[4];
    const uint16_t* row = m.data() + (lane / 8) * 64 + (lane % 8) * 8;
    HostIsa::ldmatrix_x4(r, row);
    HostIsa::ldmatrix_x4_trans(rt, row);
    for (int q = 0; q < 4; ++q) {
      plain[lane * 4 + q] = r[q];
      trans[lane * 4 + q] = rt[q];
    }
  });
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int q = 0; q < 4; ++q) {
      const uint32_t want = (100u * q + 10u * g + 2u * t) | (100u * q + 10u * g + 2u * t + 1u)
                                                                << 16;
      const uint32_t want_t = (100u * q + 10u * (2u * t) + g) | (100u * q + 10u * (2u * t + 1u) + g)
                                                                    << 16;
      EXPECT_EQ(plain[lane * 4 + q], want) << "lane " << lane << " matrix " << q;
      EXPECT_EQ(trans[lane * 4 + q], want_t) << "lane " << lane << " matrix " << q;
    }
  }
  // TF32: 10 mantissa bits, ties away from zero.
  auto tf32 = [](float x) {
    const uint32_t u = HostIsa::to_tf32(x);
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  EXPECT_EQ(tf32(1.0f + 0x1p-11f), 1.0f + 0x1p-10f);  // the tie goes away from zero
  EXPECT_EQ(tf32(-1.0f - 0x1p-11f), -1.0f - 0x1p-10f);
  EXPECT_EQ(tf32(1.0f + 0x1p-12f), 1.0f);  // below the tie
  EXPECT_EQ(tf32(3.0f), 3.0f);
}

// --- The tensor-core convolution's implicit GEMMs (kernels/conv_problems.h) ---

// A convolution's geometry: kernel (kh, kw), strides, padding and dilation along h and w, with
// h_out and w_out from the sizes as the ops layer computes them.
kern::Conv2dGeom conv_geom_hw(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out,
                              int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                              int64_t pw, int64_t dh, int64_t dw, int64_t groups) {
  // Conv2dGeom's fields in order: x, weight, y, strides, padding, dilation, groups.
  return {n,
          c_in,
          h,
          w,
          c_out,
          kh,
          kw,
          (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1,
          (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1,
          sh,
          sw,
          ph,
          pw,
          dh,
          dw,
          groups};
}
// The same along both axes.
kern::Conv2dGeom conv_geom(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out, int64_t k,
                           int64_t stride, int64_t pad, int64_t dil, int64_t groups) {
  return conv_geom_hw(n, c_in, h, w, c_out, k, k, stride, stride, pad, pad, dil, dil, groups);
}

std::vector<float> small_ints(int64_t size, int salt) {
  std::vector<float> v(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) v[i] = static_cast<float>((i * 7 + salt * 13) % 9 - 4);
  return v;
}

// Runs problem p's implicit GEMM naively, one group at a time: C(m, n) = sum_k A(m, k) B(k, n),
// stored where p.store puts it. The passes as the tensor-core kernels run them take the value of
// padding as a last argument; the transposed ones of the CUDA-core kernels give 0 there themselves.
template <class P>
void run_implicit_gemm(const P& p, const kern::Conv2dGeom& g) {
  const cudak::ImplicitGemm s = P::shape(g);
  auto a = [&](int grp, int64_t m, int64_t k) {
    if constexpr (requires { p.a(grp, 0, 0, 0.0f); }) {
      return p.a(grp, static_cast<int>(m), static_cast<int>(k), 0.0f);
    } else {
      return p.a(grp, m, k);
    }
  };
  auto b = [&](int grp, int64_t k, int64_t n) {
    if constexpr (requires { p.b(grp, 0, 0, 0.0f); }) {
      return p.b(grp, static_cast<int>(k), static_cast<int>(n), 0.0f);
    } else {
      return p.b(grp, k, n);
    }
  };
  for (int grp = 0; grp < g.groups; ++grp) {
    for (int64_t m = 0; m < s.m; ++m) {
      for (int64_t n = 0; n < s.n; ++n) {
        float c = 0;
        for (int64_t k = 0; k < s.k; ++k) c += a(grp, m, k) * b(grp, k, n);
        p.store(grp, static_cast<int>(m), static_cast<int>(n), c, -1);
      }
    }
  }
}

// The three passes of one geometry against a direct convolution written from its definition:
// y[b, co, oh, ow] = bias[co] + sum over ci of the group, i, j of
// x[b, ci, oh * sh - ph + i dil, ow * sw - pw + j dil] w[co, ci', i, j]; dx and dw the adjoints.
void check_conv_passes(const kern::Conv2dGeom& g) {
  const int64_t cig = g.c_in / g.groups, cog = g.c_out / g.groups;
  const std::vector<float> x = small_ints(g.n * g.c_in * g.h * g.w, 1);
  const std::vector<float> wt = small_ints(g.c_out * cig * g.kh * g.kw, 2);
  const std::vector<float> bias = small_ints(g.c_out, 3);
  const std::vector<float> dy = small_ints(g.n * g.c_out * g.h_out * g.w_out, 4);
  std::vector<float> y_want(dy.size()), dx_want(x.size(), 0.0f), dw_want(wt.size(), 0.0f);
  for (int64_t b = 0; b < g.n; ++b) {
    for (int64_t co = 0; co < g.c_out; ++co) {
      const int64_t grp = co / cog;
      for (int64_t oh = 0; oh < g.h_out; ++oh) {
        for (int64_t ow = 0; ow < g.w_out; ++ow) {
          const int64_t yi = ((b * g.c_out + co) * g.h_out + oh) * g.w_out + ow;
          float acc = bias[co];
          for (int64_t cl = 0; cl < cig; ++cl) {
            for (int64_t i = 0; i < g.kh; ++i) {
              for (int64_t j = 0; j < g.kw; ++j) {
                const int64_t ih = oh * g.stride_h - g.pad_h + i * g.dil_h;
                const int64_t iw = ow * g.stride_w - g.pad_w + j * g.dil_w;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                const int64_t xi = ((b * g.c_in + grp * cig + cl) * g.h + ih) * g.w + iw;
                const int64_t wi = ((co * cig + cl) * g.kh + i) * g.kw + j;
                acc += x[xi] * wt[wi];
                dx_want[xi] += dy[yi] * wt[wi];
                dw_want[wi] += dy[yi] * x[xi];
              }
            }
          }
          y_want[yi] = acc;
        }
      }
    }
  }
  const std::string what = "n " + std::to_string(g.n) + " c_in " + std::to_string(g.c_in) + " h " +
                           std::to_string(g.h) + " c_out " + std::to_string(g.c_out) + " k " +
                           std::to_string(g.kh) + " stride " + std::to_string(g.stride_h) +
                           " pad " + std::to_string(g.pad_h) + " dil " + std::to_string(g.dil_h) +
                           " groups " + std::to_string(g.groups);
  // Each family's three problems, run into fresh outputs and compared with the direct results.
  // The pass itself, inside the CUDA-core kernels' Transposed view.
  auto pass = [](auto& q) -> auto& {
    if constexpr (requires { q.p; }) {
      return q.p;
    } else {
      return q;
    }
  };
  auto check = [&](const char* family, auto fwd, auto dgrad, auto wgrad) {
    std::vector<float> y(y_want.size(), -1e30f), dx(x.size(), -1e30f), dw(wt.size(), -1e30f);
    pass(fwd).y = y.data();
    pass(dgrad).dx = dx.data();
    pass(wgrad).dw = dw.data();
    run_implicit_gemm(fwd, g);
    run_implicit_gemm(dgrad, g);
    run_implicit_gemm(wgrad, g);
    EXPECT_EQ(y, y_want) << family << " forward, " << what;
    EXPECT_EQ(dx, dx_want) << family << " input gradient, " << what;
    EXPECT_EQ(dw, dw_want) << family << " weight gradient, " << what;
    // The forward's epilogue activation (kern::Conv2dGeom::act) after the bias.
    std::vector<float> y_relu(y_want.size(), -1e30f), relu_want = y_want;
    for (float& v : relu_want) v = v > 0.0f ? v : 0.0f;
    pass(fwd).y = y_relu.data();
    pass(fwd).act = kern::GemmAct::Relu;
    run_implicit_gemm(fwd, g);
    EXPECT_EQ(y_relu, relu_want) << family << " forward with ReLU, " << what;
  };
  const cudak::Geom<int> g32(g);
  const cudak::Geom<int64_t> g64(g);
  check("tensor-core", cudak::FwdTc<float>{g32, x.data(), wt.data(), bias.data(), nullptr},
        cudak::DgradTc<float>{g32, dy.data(), wt.data(), nullptr},
        cudak::WgradTc<float>{g32, x.data(), dy.data(), nullptr, nullptr, 0});
  check("CUDA-core int32",
        cudak::FwdProblem<float, int>{{g32, x.data(), wt.data(), bias.data(), nullptr}},
        cudak::DgradProblem<float, int>{{g32, dy.data(), wt.data(), nullptr}},
        cudak::WgradProblem<float, int>{{g32, x.data(), dy.data(), nullptr, nullptr, 0}});
  check("CUDA-core int64",
        cudak::FwdProblem<float, int64_t>{{g64, x.data(), wt.data(), bias.data(), nullptr}},
        cudak::DgradProblem<float, int64_t>{{g64, dy.data(), wt.data(), nullptr}},
        cudak::WgradProblem<float, int64_t>{{g64, x.data(), dy.data(), nullptr, nullptr, 0}});
}

TEST(ConvProblems, ImplicitGemmsOfBothFamiliesMatchTheDirectConvolution) {
  check_conv_passes(conv_geom(2, 3, 7, 7, 4, 3, 1, 1, 1, 1));    // same padding
  check_conv_passes(conv_geom(1, 4, 9, 8, 6, 3, 2, 0, 1, 2));    // strided, grouped, no padding
  check_conv_passes(conv_geom(2, 2, 10, 9, 4, 3, 1, 2, 2, 1));   // dilated
  check_conv_passes(conv_geom(1, 6, 8, 8, 6, 3, 2, 1, 1, 6));    // depthwise, strided
  check_conv_passes(conv_geom(3, 5, 5, 6, 2, 1, 1, 0, 1, 1));    // pointwise
  check_conv_passes(conv_geom(1, 4, 11, 11, 8, 5, 3, 2, 2, 2));  // all at once
}

// The convolutions of the benchmark workloads (the reference workloads' cnn and CIFAR ResNet-20,
// and the cuDNN comparison layer), at batch 1.
TEST(ConvProblems, WorkloadGeometriesMatchTheDirectConvolution) {
  check_conv_passes(conv_geom(1, 1, 28, 28, 32, 3, 1, 1, 1, 1));   // cnn conv 1
  check_conv_passes(conv_geom(1, 32, 14, 14, 64, 3, 1, 1, 1, 1));  // cnn conv 2
  check_conv_passes(conv_geom(1, 3, 32, 32, 16, 3, 1, 1, 1, 1));   // resnet20 stem
  check_conv_passes(conv_geom(1, 16, 32, 32, 32, 3, 2, 1, 1, 1));  // resnet20 stage 2 entry
  check_conv_passes(conv_geom(1, 16, 32, 32, 32, 1, 2, 0, 1, 1));  // its 1x1 shortcut
  check_conv_passes(conv_geom(1, 64, 8, 8, 64, 3, 1, 1, 1, 1));    // resnet20 stage 3
  check_conv_passes(conv_geom(1, 64, 32, 32, 64, 3, 1, 1, 1, 1));  // the cuDNN comparison layer
}

// The convolutions of the op table (tests/ops_conv.cpp): non-square kernels and unequal strides,
// padding and dilation along h and w.
TEST(ConvProblems, OpTableGeometriesMatchTheDirectConvolution) {
  check_conv_passes(conv_geom_hw(2, 3, 5, 6, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1));  // Conv2d
  check_conv_passes(
      conv_geom_hw(2, 4, 6, 5, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2));  // Conv2dGroupsStridePad
  check_conv_passes(conv_geom_hw(1, 2, 7, 8, 3, 3, 2, 1, 2, 1, 2, 2, 3, 1));  // Conv2dDilation
  check_conv_passes(conv_geom_hw(2, 3, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3));  // Conv2dDepthwise
  check_conv_passes(conv_geom_hw(2, 4, 3, 3, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1));  // Conv2dPointwise
}

// The conv2d geometries the other convolutions of the op table run on the same kernels (Note
// [conv3d as conv2d] in src/ops/conv.cpp): a 1-D one over a height of 1; a 3-D one's depth slices,
// kD planes folded into the channels; a transposed one as the convolution it transposes (its
// output's size as h, w; its input as the gradient), output_padding past the stride included.
TEST(ConvProblems, GeometriesOfTheOtherConvolutionsMatchTheDirectConvolution) {
  check_conv_passes(conv_geom_hw(2, 4, 1, 9, 6, 1, 3, 1, 2, 0, 1, 1, 1, 2));  // Conv1d
  check_conv_passes(conv_geom_hw(2, 3, 1, 8, 4, 1, 4, 1, 1, 0, 1, 1, 1, 1));  // Conv1dSamePadding
  check_conv_passes(conv_geom_hw(6, 4, 5, 4, 3, 3, 2, 1, 1, 1, 0, 1, 2, 1));  // Conv3d
  check_conv_passes(conv_geom_hw(3, 8, 4, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2));  // Conv3dGroupsSame
  check_conv_passes(conv_geom_hw(2, 6, 6, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1, 2));  // ConvTranspose2d
  check_conv_passes(
      conv_geom_hw(1, 3, 6, 5, 2, 2, 3, 1, 1, 0, 0, 2, 1, 1));  // ConvTranspose2dDilated
  check_conv_passes(conv_geom_hw(2, 2, 1, 15, 3, 1, 3, 1, 3, 0, 1, 1, 1, 1));  // ConvTranspose1d
  check_conv_passes(conv_geom_hw(2, 4, 4, 4, 2, 2, 3, 1, 2, 0, 1, 1, 1, 1));   // ConvTranspose3d
}

// The weight gradient's split-K stores: partial sums added (acc_slice 0) or kept per split.
TEST(ConvProblems, WeightGradientSplitStoresAddOrKeepTheirSlice) {
  const kern::Conv2dGeom g = conv_geom(1, 2, 4, 4, 2, 3, 1, 1, 1, 1);
  const cudak::Geom<int> tg(g);
  // dw: (c_out 2, c_in 2, 3, 3); element (co 1, m 5) of the GEMM is o = 1 * 18 + 5.
  std::vector<float> x = small_ints(32, 1), dy = small_ints(32, 4), dw(36, -1.0f);
  std::vector<float> acc(3 * 36, 0.0f);
  const cudak::WgradTc<float> added{tg, x.data(), dy.data(), dw.data(), acc.data(), 0};
  added.store(0, 5, 1, 2.0f, 0);
  added.store(0, 5, 1, 3.0f, 1);
  EXPECT_EQ(acc[23], 5.0f);
  const cudak::WgradTc<float> kept{tg, x.data(), dy.data(), dw.data(), acc.data(), 36};
  kept.store(0, 5, 1, 7.0f, 2);
  EXPECT_EQ(acc[2 * 36 + 23], 7.0f);
  EXPECT_EQ(acc[23], 5.0f);
  EXPECT_EQ(dw, std::vector<float>(36, -1.0f));  // split stores leave dw alone
  added.store(0, 5, 1, 9.0f, -1);                // a whole sum goes to dw
  EXPECT_EQ(dw[23], 9.0f);
}

// The mma.sync GEMM's cp.async copies of one operand tile (tile_chunk, chunk_bytes), all 256
// threads: the (kRows, kCols) tile at (row0, col0) of a (rows, cols) matrix with row stride ld
// lands in shared memory (row stride kLdS) with zeros outside the matrix, each 16-byte chunk
// copied once from a 16-byte aligned address. At the matrix's edges: rows and columns cut through
// the tile, a column edge inside a chunk.
template <typename T, int kRows, int kCols, int kLdS>
int replay_tile_loads(int64_t row0, int64_t col0, int64_t rows, int64_t cols, int64_t ld) {
  constexpr int kThreads = 256, kElem = static_cast<int>(sizeof(T)), kVec = 16 / kElem;
  constexpr int kChunks = kRows * kCols / kVec;
  static_assert(kChunks % kThreads == 0 && (kLdS * kElem) % 16 == 0);
  std::vector<float> g(static_cast<size_t>(rows * ld), -7.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) g[r * ld + c] = float((r * 31 + c * 7) % 97);
  }
  std::vector<float> s(kRows * kLdS, -1.0f);
  std::vector<int> copies(kChunks, 0);
  for (int l = 0; l < kChunks / kThreads; ++l) {
    for (int tid = 0; tid < kThreads; ++tid) {
      const cudak::mma::Chunk ch = cudak::mma::tile_chunk<T, kCols>(tid + l * kThreads);
      const int64_t gr = row0 + ch.r, gc = col0 + ch.c;
      const int bytes = cudak::mma::chunk_bytes<T>(gr, gc, rows, cols);
      EXPECT_TRUE(ch.r < kRows && ch.c + kVec <= kCols && ch.c % kVec == 0);
      ++copies[ch.r * (kCols / kVec) + ch.c / kVec];
      if (bytes > 0) {
        EXPECT_EQ((gr * ld + gc) * kElem % 16, 0) << "a misaligned cp.async source";
      }
      // cp.async.cg 16 with src-size `bytes`: copies them, zero-fills the rest.
      for (int e = 0; e < kVec; ++e) {
        s[ch.r * kLdS + ch.c + e] = e * kElem < bytes ? g[gr * ld + gc + e] : 0.0f;
      }
    }
  }
  int wrong = 0;
  for (int v : copies) wrong += v != 1;
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      const int64_t gr = row0 + r, gc = col0 + c;
      const float want = gr < rows && gc < cols ? g[gr * ld + gc] : 0.0f;
      if (s[r * kLdS + c] != want && ++wrong <= 3) {
        ADD_FAILURE() << "tile element (" << r << ", " << c << ") is " << s[r * kLdS + c]
                      << ", want " << want;
      }
    }
  }
  return wrong;
}

template <typename T, int kBM, int kBN, bool kTransA, bool kTransB>
void check_gemm_loads() {
  using Cfg = cudak::mma::MmaTile<T, kBM, kBN, kTransA, kTransB>;
  constexpr int kBK = Cfg::kBK, kVec = 16 / static_cast<int>(sizeof(T));
  SCOPED_TRACE(::testing::Message()
               << kBM << "x" << kBN << (kTransA ? " A^T" : "") << (kTransB ? " B^T" : ""));
  // As gemm_mma_kernel's load_stage: A (kBM, kBK) or, transposed, (kBK, kBM); B likewise.
  constexpr int kARows = kTransA ? kBK : kBM, kACols = kTransA ? kBM : kBK;
  constexpr int kBRows = kTransB ? kBN : kBK, kBCols = kTransB ? kBK : kBN;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{300, 400},
                            {kARows + 37, kACols + 13},
                            {kARows + 5, kACols + kVec + 1},
                            {3, 2}}) {
    const int64_t ld = (cols + kVec - 1) / kVec * kVec + kVec;
    EXPECT_EQ((replay_tile_loads<T, kARows, kACols, Cfg::kLdA>(kARows, kACols, rows + kARows,
                                                               cols + kACols, ld + kACols)),
              0)
        << "A";
    EXPECT_EQ((replay_tile_loads<T, kBRows, kBCols, Cfg::kLdB>(0, 0, rows, cols, ld)), 0) << "B";
  }
}

TEST(GemmMmaLoads, TilesCopyTheMatrixAndZeroTheRest) {
  check_gemm_loads<BFloat16, 128, 128, false, false>();
  check_gemm_loads<BFloat16, 128, 128, true, true>();
  check_gemm_loads<Half, 64, 64, false, true>();
  check_gemm_loads<Half, 64, 64, true, false>();
  check_gemm_loads<float, 128, 128, false, false>();
  check_gemm_loads<float, 64, 64, true, true>();
}

// The mma.sync GEMM's grouped tile order (tile_at) gives each output tile to one tile index.
TEST(GemmMmaSchedule, EveryTileOnce) {
  for (int64_t tiles_m : {1, 7, 8, 9, 23}) {
    for (int64_t tiles_n : {1, 2, 9}) {
      std::vector<int> seen(static_cast<size_t>(tiles_m * tiles_n), 0);
      for (int64_t t = 0; t < tiles_m * tiles_n; ++t) {
        const cudak::mma::TilePos p = cudak::mma::tile_at(t, tiles_m, tiles_n);
        ASSERT_TRUE(p.tm >= 0 && p.tm < tiles_m && p.tn >= 0 && p.tn < tiles_n);
        ++seen[p.tm * tiles_n + p.tn];
      }
      for (int v : seen) EXPECT_EQ(v, 1) << tiles_m << " x " << tiles_n;
    }
  }
}

// The weight gradient's split K (plan_split_k, split_begin, split_end), as both kernel families
// walk it: the splits tile [0, K) without gaps or overlaps, none is empty, the chunks are whole
// k steps, and groups * splits fits the grid's z dimension.
TEST(ConvSplitK, SplitsTileKWithinTheGrid) {
  int checked = 0;
  for (int64_t K : {1, 31, 32, 255, 256, 257, 1000, 4096, 100000, 1234567}) {
    for (int64_t tiles : {1, 3, 64, 1000}) {
      for (int64_t groups : {1, 2, 32, 4096}) {
        for (int64_t k_step : {8, 16, 32}) {
          const cudak::SplitK p = cudak::plan_split_k(K, tiles, 132, groups, k_step);
          SCOPED_TRACE(::testing::Message()
                       << "K " << K << " tiles " << tiles << " groups " << groups << " k_step "
                       << k_step << ": " << p.splits << " x " << p.k_chunk);
          ASSERT_GE(p.splits, 1);
          EXPECT_LE(p.splits * groups, std::max<int64_t>(65535, groups));
          if (p.splits > 1) {
            EXPECT_EQ(p.k_chunk % k_step, 0);
          }
          int64_t next = 0;
          for (int s = 0; s < p.splits; ++s) {
            const int64_t b = cudak::split_begin(s, p.k_chunk),
                          e = cudak::split_end(s, p.k_chunk, K);
            EXPECT_EQ(b, next) << "split " << s << " leaves a gap or overlaps";
            EXPECT_LT(b, e) << "split " << s << " is empty";
            next = e;
          }
          EXPECT_EQ(next, K);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 10 * 4 * 4 * 3);
}

// The tensor-core convolution's loads of its operand tiles (ConvTcTile::load_slot, 256 threads):
// every element of the (rows, kBK) tile exactly once, and each warp's 32 loads along the operand's
// contiguous index, for both layouts of A and B, every operand dtype and both N tiles.
template <typename T, int kBN>
void check_load_slots() {
  using Tile = cudak::mma::ConvTcTile<T, kBN>;
  constexpr int kThreads = 256;
  auto check = [](auto rows_tag, bool along_rows) {
    constexpr int kRows = decltype(rows_tag)::value;
    SCOPED_TRACE(::testing::Message() << "rows " << kRows << " kBK " << Tile::kBK
                                      << (along_rows ? " along rows" : " along k"));
    static_assert(kRows * Tile::kBK % kThreads == 0);
    std::vector<int> seen(kRows * Tile::kBK, 0);
    for (int l = 0; l < kRows * Tile::kBK / kThreads; ++l) {
      for (int tid = 0; tid < kThreads; ++tid) {
        const auto s = Tile::template load_slot<kRows>(tid + l * kThreads, along_rows);
        ASSERT_TRUE(s.row >= 0 && s.row < kRows && s.k >= 0 && s.k < Tile::kBK);
        ++seen[s.row * Tile::kBK + s.k];
        if (tid % 32 == 0) continue;
        const auto prev = Tile::template load_slot<kRows>(tid - 1 + l * kThreads, along_rows);
        // Within a warp, the next load is the next element along the contiguous index, or the
        // first of the next line after the last of this one.
        const int line = along_rows ? s.k : s.row, prev_line = along_rows ? prev.k : prev.row;
        const int pos = along_rows ? s.row : s.k, prev_pos = along_rows ? prev.row : prev.k;
        const int line_size = along_rows ? kRows : Tile::kBK;
        EXPECT_TRUE((line == prev_line && pos == prev_pos + 1) ||
                    (line == prev_line + 1 && pos == 0 && prev_pos == line_size - 1))
            << "tid " << tid;
      }
    }
    for (int v : seen) ASSERT_EQ(v, 1);
  };
  for (bool along : {false, true}) {
    check(std::integral_constant<int, Tile::kBM>{}, along);
    check(std::integral_constant<int, kBN>{}, along);
  }
}

TEST(ConvTcLoads, EveryTileElementOnceAndCoalesced) {
  check_load_slots<BFloat16, 32>();
  check_load_slots<BFloat16, 64>();
  check_load_slots<Half, 64>();
  check_load_slots<float, 32>();
  check_load_slots<float, 64>();
}

}  // namespace
}  // namespace sinter::testing

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
#include <vector>

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

}  // namespace
}  // namespace sinter::testing

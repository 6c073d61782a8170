// The int8 tensor-core GEMM (Note [int8 mma gemm] in kernels/int8_mma.h): a replay on the host of
// whole block tiles, with the kernel's own index math (chunk copies, fragments, accumulator
// positions) and mma.sync.m16n8k32.s8 modelled element by element as the PTX ISA lays out its
// fragments; and, on a GPU, the kernel against the reference.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/int8.h"
#include "int8_mma.h"
#include "test_util.h"

#ifdef SINTER_WITH_CUDA
#include <cuda_runtime.h>

#include "int8_gemm.cuh"
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
    std::vector<int32_t> got(o.want.size());
    cudaMemcpy(got.data(), dc, got.size() * sizeof(int32_t), cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    EXPECT_EQ(got, o.want) << m << "x" << n << "x" << k;
  }
#endif
}

}  // namespace
}  // namespace sinter

// One warp's k step of a tile product on the tensor cores (warp_mma_tile_on) and where its
// accumulators lie (for_each_acc), written once over an instruction set Isa: mma::DeviceIsa
// (mma.cuh) in the kernels, and in the CPU suite the host warp model of tests/warp_model.h, which
// runs this same code for the 32 lanes of a warp with ldmatrix and mma.sync as the PTX ISA defines
// them (Note [host warp model]). No CUDA header: a host compiler reads this file too.
//
// Isa gives ldmatrix_x4 and ldmatrix_x4_trans (four 8x8 b16 matrices; lane l gives the row address
// of row l % 8 of matrix l / 8, and receives in r[q] row l / 4, columns 2 * (l % 4) and +1 of
// matrix q, or of matrix q transposed), mma_16816<T> and mma_tf32_1688 (d += A B for the fragment
// layouts mma.cuh spells out) and to_tf32 (f32 rounded to TF32, nearest, ties away from zero).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define SINTER_MMA_FN __device__ __forceinline__
#define SINTER_MMA_HOST_FN __host__ __device__ __forceinline__
#define SINTER_MMA_UNROLL _Pragma("unroll")
#else
#define SINTER_MMA_FN inline
#define SINTER_MMA_HOST_FN inline
#define SINTER_MMA_UNROLL
#endif

namespace sinter::cudak::mma {

// The tile geometry of one instance of the mma.sync GEMM (kernels/gemm_mma.cu), 8 warps. Each
// operand tile is stored in shared memory the way it lies in global memory (rows along the strided
// dim, the contiguous dim within a row), so every 16-byte cp.async copies 16 contiguous bytes. Rows
// are padded: a K-major row (kBK + kVec elements, 80 bytes) and an MN-major row (kBM or kBN + 8
// elements) both put the eight rows one ldmatrix (or one warp's 32-bit fragment loads) touches on
// distinct banks.
template <typename T, int kBM_, int kBN_, bool kTransA, bool kTransB>
struct MmaTile {
  static constexpr bool kTf32 = std::is_same_v<T, float>;
  static constexpr bool kAMajorM = kTransA, kBMajorK = kTransB;  // warp_mma_tile_on's layouts
  static constexpr int kBM = kBM_, kBN = kBN_;
  static constexpr int kBK = kTf32 ? 16 : 32;
  static constexpr int kStages = 4;
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // elements per cp.async
  static constexpr int kWarpsN = 4;
  static constexpr int kWM = kBM / 2, kWN = kBN / kWarpsN;  // warp tile
  static constexpr int kMI = kWM / 16, kNI = kWN / 8;       // mma tiles per warp
  static constexpr int kPadMN = 8;
  // A: trans_a stores it M-major (kBK rows of kBM), else K-major (kBM rows of kBK).
  static constexpr int kLdA = kTransA ? kBM + kPadMN : kBK + kVec;
  static constexpr int kSizeA = kTransA ? kBK * kLdA : kBM * kLdA;
  // B: trans_b stores it K-major (kBN rows of kBK), else N-major (kBK rows of kBN).
  static constexpr int kLdB = kTransB ? kBK + kVec : kBN + kPadMN;
  static constexpr int kSizeB = kTransB ? kBN * kLdB : kBK * kLdB;
  static constexpr int kStageElems = kSizeA + kSizeB;
  static constexpr size_t kSmemBytes = sizeof(T) * kStageElems * kStages;
  // The corner of warp w's (kWM, kWN) tile in the block tile: 2 warps along m by kWarpsN along n.
  static constexpr int warp_m0(int w) { return (w / kWarpsN) * kWM; }
  static constexpr int warp_n0(int w) { return (w % kWarpsN) * kWN; }
  static_assert(kNI % 2 == 0, "ldmatrix x4 loads B fragments for two n8 tiles at once");
  static_assert(kSizeA % kVec == 0 && kSizeB % kVec == 0, "stages stay 16-byte aligned");
};

// The mma.sync GEMM's output tile `tile` of tiles_m x tiles_n: grouped by 8 tile rows, so that
// neighbouring blocks share A and B tiles in L2. Returns the tile's (row, column) of tiles.
struct TilePos {
  int64_t tm, tn;
};
SINTER_MMA_HOST_FN TilePos tile_at(int64_t tile, int64_t tiles_m, int64_t tiles_n) {
  const int64_t group = tile / (8 * tiles_n), in_group = tile % (8 * tiles_n);
  const int64_t group_rows = tiles_m - group * 8 < 8 ? tiles_m - group * 8 : 8;
  return {group * 8 + in_group % group_rows, in_group / group_rows};
}

// The 16-byte chunks the mma.sync GEMM copies with cp.async into a (kRows, kCols) tile of T: chunk
// idx (thread t's l-th: idx = t + l * threads) is row idx / (kCols / kVec), columns from
// (idx % (kCols / kVec)) * kVec. Of the tile at (row0, col0) of a (rows, cols) matrix, a chunk at
// (gr, gc) copies the bytes that lie inside the matrix: none past its rows or columns, and of a
// chunk that straddles the column edge its in-range elements; cp.async zero-fills the rest.
struct Chunk {
  int r, c;
};
template <typename T, int kCols>
SINTER_MMA_HOST_FN Chunk tile_chunk(int idx) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T)), kPerRow = kCols / kVec;
  return {idx / kPerRow, (idx % kPerRow) * kVec};
}
template <typename T>
SINTER_MMA_HOST_FN int chunk_bytes(int64_t gr, int64_t gc, int64_t rows, int64_t cols) {
  constexpr int64_t kVec = 16 / static_cast<int64_t>(sizeof(T));
  if (gr >= rows || gc >= cols) return 0;
  return static_cast<int>((cols - gc < kVec ? cols - gc : kVec) * static_cast<int64_t>(sizeof(T)));
}

// The tile geometry of the tensor-core convolution (kernels/conv_tc.cu), 8 warps, 4 along m by 2
// along n: a (kBM, kBN) block tile of the implicit GEMM, both operand tiles k-major in shared
// memory (As[k][m], Bs[k][n]) with rows padded by 8 elements, read M-major and N-major.
template <typename T, int kBN_>
struct ConvTcTile {
  static constexpr bool kAMajorM = true, kBMajorK = false;
  static constexpr int kBM = 128, kBN = kBN_;
  static constexpr int kBK = std::is_same_v<T, float> ? 16 : 32;
  static constexpr int kLdA = kBM + 8, kLdB = kBN + 8;
  static constexpr int kSizeA = kBK * kLdA, kSizeB = kBK * kLdB;
  static constexpr int kWM = 32, kWN = kBN / 2;        // warp tile
  static constexpr int kMI = kWM / 16, kNI = kWN / 8;  // mma tiles per warp
  static constexpr int warp_m0(int w) { return (w / 2) * kWM; }
  static constexpr int warp_n0(int w) { return (w % 2) * kWN; }
  static_assert(kNI % 2 == 0, "ldmatrix x4 loads B fragments for two n8 tiles at once");

  // Where the e-th element a block loads of a (kRows, kBK) operand tile (A: kRows = kBM, B: kBN)
  // sits: consecutive e run along the operand's contiguous index, its row (m or n) when
  // along_rows, else k, so that a warp's loads coalesce. Power-of-two divisions. Thread tid's
  // load l is e = tid + l * threads.
  struct Slot {
    int row, k;
  };
  template <int kRows>
  static constexpr Slot load_slot(int e, bool along_rows) {
    return along_rows ? Slot{e % kRows, e / kRows} : Slot{e / kBK, e % kBK};
  }
};

// One block-tile k step of a warp's (16 * kMI, 8 * kNI) accumulator tile, read from shared memory:
// acc[im][jn] += A(wm0 + 16 im.., k) B(k, wn0 + 8 jn..) for k in [0, kBK). The A tile is stored
// M-major (sa[k * kLdA + m]) when kAMajorM, else K-major (sa[m * kLdA + k]); the B tile K-major
// (sb[n * kLdB + k]) when kBMajorK, else N-major (sb[k * kLdB + n]). T is __nv_bfloat16 or __half
// (ldmatrix, m16n8k16; rows 16-byte aligned), or their host stand-ins in the warp model, or float
// (32-bit loads rounded to TF32, m16n8k8).
// The padding of kLdA and kLdB decides whether the reads are free of bank conflicts.
template <class Isa, typename T, int kMI, int kNI, int kBK, bool kAMajorM, bool kBMajorK, int kLdA,
          int kLdB>
SINTER_MMA_FN void warp_mma_tile_on(float (&acc)[kMI][kNI][4], const T* sa, const T* sb, int wm0,
                                    int wn0, int lane) {
  if constexpr (std::is_same_v<T, float>) {
    // Fragments as 32-bit words (g = lane / 4, t = lane % 4, see mma_tf32_1688).
    const int g = lane / 4, t = lane % 4;
    auto at = [&](int i, int q) { return kAMajorM ? sa[q * kLdA + i] : sa[i * kLdA + q]; };
    auto bt = [&](int q, int j) { return kBMajorK ? sb[j * kLdB + q] : sb[q * kLdB + j]; };
    SINTER_MMA_UNROLL
    for (int ks = 0; ks < kBK; ks += 8) {
      uint32_t af[kMI][4], bf[kNI][2];
      SINTER_MMA_UNROLL
      for (int im = 0; im < kMI; ++im) {
        const int i = wm0 + im * 16 + g;
        af[im][0] = Isa::to_tf32(at(i, ks + t));
        af[im][1] = Isa::to_tf32(at(i + 8, ks + t));
        af[im][2] = Isa::to_tf32(at(i, ks + t + 4));
        af[im][3] = Isa::to_tf32(at(i + 8, ks + t + 4));
      }
      SINTER_MMA_UNROLL
      for (int jn = 0; jn < kNI; ++jn) {
        const int j = wn0 + jn * 8 + g;
        bf[jn][0] = Isa::to_tf32(bt(ks + t, j));
        bf[jn][1] = Isa::to_tf32(bt(ks + t + 4, j));
      }
      SINTER_MMA_UNROLL
      for (int im = 0; im < kMI; ++im) {
        SINTER_MMA_UNROLL
        for (int jn = 0; jn < kNI; ++jn) Isa::mma_tf32_1688(acc[im][jn], af[im], bf[jn]);
      }
    }
  } else {
    // ldmatrix x4: lane l addresses row l % 8 of 8x8 matrix q = l / 8. For A, matrix q covers
    // rows +(q & 1) * 8 and k +(q >> 1) * 8 (fragment registers a0..a3); for B, two n8 tiles:
    // n +(q >> 1) * 8 and k +(q & 1) * 8 (b0, b1 of the first tile, then of the second). An
    // operand stored MN-major is read transposed.
    static_assert(kNI % 2 == 0, "B fragments come two n8 tiles at a time");
    const int q = lane / 8, r = lane % 8;
    SINTER_MMA_UNROLL
    for (int ks = 0; ks < kBK; ks += 16) {
      uint32_t af[kMI][4], bf[kNI][2];
      SINTER_MMA_UNROLL
      for (int im = 0; im < kMI; ++im) {
        const int i = wm0 + im * 16;
        if constexpr (kAMajorM) {
          Isa::ldmatrix_x4_trans(af[im], sa + (ks + (q >> 1) * 8 + r) * kLdA + i + (q & 1) * 8);
        } else {
          Isa::ldmatrix_x4(af[im], sa + (i + (q & 1) * 8 + r) * kLdA + ks + (q >> 1) * 8);
        }
      }
      SINTER_MMA_UNROLL
      for (int jp = 0; jp < kNI / 2; ++jp) {
        const int j = wn0 + jp * 16;
        uint32_t f[4];
        if constexpr (kBMajorK) {
          Isa::ldmatrix_x4(f, sb + (j + (q >> 1) * 8 + r) * kLdB + ks + (q & 1) * 8);
        } else {
          Isa::ldmatrix_x4_trans(f, sb + (ks + (q & 1) * 8 + r) * kLdB + j + (q >> 1) * 8);
        }
        bf[2 * jp][0] = f[0];
        bf[2 * jp][1] = f[1];
        bf[2 * jp + 1][0] = f[2];
        bf[2 * jp + 1][1] = f[3];
      }
      SINTER_MMA_UNROLL
      for (int im = 0; im < kMI; ++im) {
        SINTER_MMA_UNROLL
        for (int jn = 0; jn < kNI; ++jn) Isa::template mma_16816<T>(acc[im][jn], af[im], bf[jn]);
      }
    }
  }
}

// Calls fn(row, col, value) for every accumulator of a warp's (16 * kMI, 8 * kNI) tile at
// (wm0, wn0): accumulator e of mma tile (im, jn) is D(g + 8 * (e / 2), 2t + e % 2) of that 16x8
// tile, g = lane / 4, t = lane % 4.
template <int kMI, int kNI, class Fn>
SINTER_MMA_FN void for_each_acc(const float (&acc)[kMI][kNI][4], int wm0, int wn0, int lane,
                                Fn fn) {
  const int g = lane / 4, t = lane % 4;
  SINTER_MMA_UNROLL
  for (int im = 0; im < kMI; ++im) {
    SINTER_MMA_UNROLL
    for (int jn = 0; jn < kNI; ++jn) {
      SINTER_MMA_UNROLL
      for (int e = 0; e < 4; ++e) {
        fn(wm0 + im * 16 + g + 8 * (e / 2), wn0 + jn * 8 + 2 * t + e % 2, acc[im][jn][e]);
      }
    }
  }
}

}  // namespace sinter::cudak::mma

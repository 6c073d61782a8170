// The index math of the int8 tensor-core GEMM (kernels/int8.cu: mma.sync.m16n8k32 on s8
// operands into s32 accumulators), written once for the kernel and for the CPU suite's replay of a
// whole block tile (tests/test_int8_mma.cpp), which runs these same functions for every thread and
// lane against a model of the instruction written from the PTX ISA. No CUDA header: a host
// compiler reads this file too.
//
// Note [int8 mma gemm]
// c (m, n) int32 = a (m, k) int8 . b (n, k)^T int8, both operands K-major (a Linear's input rows
// and its weight (out, in), as the CPU's int8 GEMM takes them). A block of kThreads = 128 threads
// (4 warps) computes a kBM x kBN = 64 x 64 tile of c, stepping through k kBK = 32 at a time: each
// thread copies one 16-byte chunk of the A tile and one of the B tile into shared memory (rows of
// kLd bytes; chunks past the matrix, or of a matrix whose rows are not 16-byte aligned, are copied
// byte by byte with zeros outside), then warp w computes its 32 x 32 quarter (rows 32 (w / 2),
// columns 32 (w % 2)) as 2 x 4 mma tiles of 16 x 8. A lane's fragments are 32-bit words of 4
// consecutive k values: with g = lane / 4 and t = lane % 4, a[0] = A[g][4t..4t+3],
// a[1] = A[g+8][4t..], a[2] = A[g][4t+16..], a[3] = A[g+8][4t+16..]; b[0] = B[n = g][4t..4t+3],
// b[1] = B[g][4t+16..]; the accumulators d[0..1] = D[g][2t..2t+1], d[2..3] = D[g+8][2t..]. The sums
// are exact: |a b| <= 2^14, so k up to kern::kInt8MaxK = 2^17 - 1 stays within int32 (Note [int8
// kernels] in src/kern/int8.h).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SINTER_I8_FN __host__ __device__ __forceinline__
#else
#define SINTER_I8_FN inline
#endif

namespace sinter::cudak::int8mma {

constexpr int kBM = 64, kBN = 64, kBK = 32, kThreads = 128, kWarpM = 32, kWarpN = 32;
constexpr int kLd = kBK + 16;  // bytes per shared row: 16-byte aligned, rows on other banks
constexpr int kMI = kWarpM / 16, kNI = kWarpN / 8;  // mma tiles per warp

// The chunk thread `tid` copies of a (kBM or kBN) x kBK tile: row tid / 2, bytes 16 (tid % 2).
struct Chunk {
  int row, col;
};
SINTER_I8_FN Chunk chunk_of(int tid) { return {tid / 2, (tid % 2) * 16}; }

// The corner of warp w's quarter in the block tile.
SINTER_I8_FN int warp_row0(int w) { return (w / 2) * kWarpM; }
SINTER_I8_FN int warp_col0(int w) { return (w % 2) * kWarpN; }

// Fragment word r (0..3) of A for lane `lane`, of the mma tile at (row0, 0) of the shared A tile
// at k offset ks (0: the tile holds one k32 step): its row and first byte.
SINTER_I8_FN Chunk a_word(int lane, int r, int row0) {
  return {row0 + lane / 4 + (r & 1) * 8, (lane % 4) * 4 + (r >> 1) * 16};
}
// Fragment word r (0..1) of B (stored (n, k)) for `lane`, of the mma tile at column n0.
SINTER_I8_FN Chunk b_word(int lane, int r, int col0) {
  return {col0 + lane / 4, (lane % 4) * 4 + r * 16};
}
// Where accumulator r (0..3) of `lane` lies in the mma tile at (row0, col0): (row, column).
SINTER_I8_FN Chunk d_elem(int lane, int r, int row0, int col0) {
  return {row0 + lane / 4 + (r >> 1) * 8, col0 + (lane % 4) * 2 + (r & 1)};
}

// 16 bytes from src to dst, both 16-byte aligned: one vector access on the device.
SINTER_I8_FN void copy16(int8_t* dst, const int8_t* src) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<int4*>(dst) = *reinterpret_cast<const int4*>(src);
#else
  for (int i = 0; i < 16; ++i) dst[i] = src[i];
#endif
}

// Copies thread tid's chunk of the (rows, k) operand x (row stride ld) at tile (r0, k0) into the
// shared tile s (kLd bytes a row): 16 bytes at once where `vector` (rows 16-byte aligned) and the
// chunk lies inside, else byte by byte with zeros outside.
SINTER_I8_FN void load_chunk(int tid, const int8_t* x, int64_t rows, int64_t k, int64_t ld,
                             int64_t r0, int64_t k0, bool vector, int8_t* s) {
  const Chunk ch = chunk_of(tid);
  const int64_t gr = r0 + ch.row, gk = k0 + ch.col;
  int8_t* dst = s + ch.row * kLd + ch.col;
  if (vector && gr < rows && gk + 16 <= k) {
    copy16(dst, x + gr * ld + gk);
    return;
  }
  for (int i = 0; i < 16; ++i) {
    dst[i] = gr < rows && gk + i < k ? x[gr * ld + gk + i] : int8_t{0};
  }
}

// A 32-bit word of 4 int8 values at p (4-byte aligned in shared memory).
SINTER_I8_FN uint32_t word_at(const int8_t* p) {
  return static_cast<uint32_t>(static_cast<uint8_t>(p[0])) |
         static_cast<uint32_t>(static_cast<uint8_t>(p[1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(p[2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(p[3])) << 24;
}

// Lane `lane` of warp w: its fragments of the shared tiles for mma tile (mi, ni).
SINTER_I8_FN void fragments(const int8_t* as, const int8_t* bs, int w, int lane, int mi, int ni,
                            uint32_t (&a)[4], uint32_t (&b)[2]) {
  for (int r = 0; r < 4; ++r) {
    const Chunk p = a_word(lane, r, warp_row0(w) + mi * 16);
    a[r] = word_at(as + p.row * kLd + p.col);
  }
  for (int r = 0; r < 2; ++r) {
    const Chunk p = b_word(lane, r, warp_col0(w) + ni * 8);
    b[r] = word_at(bs + p.row * kLd + p.col);
  }
}

}  // namespace sinter::cudak::int8mma

// Where the Hopper GEMMs (kernels/gemm_wgmma.cu, kernels/gemm_fp8.cu) put their operand tiles and
// how they tell wgmma,
// readable by a host compiler: the tensor-map boxes the producer loads and where they land in a
// stage, each k step's shared-memory matrix descriptor, the byte count a stage's barrier expects,
// and the persistent tile schedule. The kernel runs these functions; the CPU suite replays TMA's
// 128-byte swizzled writes and wgmma's descriptor-driven reads as the PTX ISA defines them and
// checks that every operand element wgmma reads is the one the GEMM means
// (tests/test_wgmma_layout.cpp). Note [wgmma operand layouts] in kernels/gemm_wgmma.cu says why.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SINTER_WGMMA_FN __host__ __device__ __forceinline__
#else
#define SINTER_WGMMA_FN inline
#endif

namespace sinter::cudak::wgmma {

constexpr int kBM = 128;            // rows of C a block computes; 64 per consumer warpgroup
constexpr int kBKBytes = 128;       // bytes of k a stage holds: one 128-byte swizzle row
constexpr int kSwizzleAtom = 1024;  // 8 rows of 128 bytes: every tile starts on such a boundary

// The shared-memory matrix descriptor of PTX ISA 9.7.15.5.1.2.2 for the 128-byte swizzle: start
// address, leading and stride dimension byte offsets (each encoded as (x & 0x3FFFF) >> 4), base
// offset 0 (tiles start on a 1024-byte boundary), swizzle mode 1 (128 bytes) in bits 62-63.
SINTER_WGMMA_FN uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return ((addr & 0x3FFFF) >> 4) | (uint64_t((lbo & 0x3FFFF) >> 4) << 16) |
         (uint64_t((sbo & 0x3FFFF) >> 4) << 32) | (uint64_t(1) << 62);
}

// One operand tile of a stage: `rows` of m (A) or n (B) by kBK of k. MN-major (m or n contiguous in
// memory): boxes of 64 rows by kBK, box h at byte h * kBK * 128. K-major: one box of kBK by rows.
// A box's extents are (inner, outer) in elements, inner being the contiguous dimension, and its
// coordinates (inner, outer) of the tensor map's first two dims.
struct Box {
  uint32_t offset;        // byte offset of the box in the tile
  int c0, c1;             // tensor-map coordinates of its first element
  uint32_t inner, outer;  // extents in elements
};
SINTER_WGMMA_FN int boxes(bool mn_major, int rows) { return mn_major ? rows / 64 : 1; }
template <int kBK>
SINTER_WGMMA_FN Box tile_box(bool mn_major, int rows, int h, int row0, int k0) {
  if (mn_major) return {uint32_t(h * kBK * 128), row0 + 64 * h, k0, 64, uint32_t(kBK)};
  return {0, k0, row0, uint32_t(kBK), uint32_t(rows)};
}
// The tensor map of one operand, as cuTensorMapEncodeTiled takes it: dims (inner, outer, batch) in
// elements, the byte strides of dims 1 and 2 (dim 0 is contiguous), and the box (tile_box's
// extents). The operand is op(A) (mn = m) or op(B) (mn = n) of kern::GemmArgs: MN-major has m or n
// as its inner dim (A transposed, B not), K-major has k. ld and the batch stride are in elements;
// a batch stride of 0 (shared by the batch) makes a map of one batch, whose stride must still be
// valid. Box coordinates (c0, c1, c2) then address base + c0 * elem + c1 * strides[0] + c2 *
// strides[1].
struct OperandMap {
  uint64_t dims[3];
  uint64_t strides[2];
  uint32_t box[3];
};
template <int kBK>
inline OperandMap operand_map(bool mn_major, int tile_rows, int64_t mn, int64_t k, int64_t batch,
                              int64_t ld, int64_t stride, int elem) {
  const uint64_t inner = uint64_t(mn_major ? mn : k), outer = uint64_t(mn_major ? k : mn);
  const uint64_t nb = batch > 1 && stride != 0 ? uint64_t(batch) : 1;
  const Box b = tile_box<kBK>(mn_major, tile_rows, 0, 0, 0);
  return {{inner, outer, nb},
          {uint64_t(ld) * elem, uint64_t(nb > 1 ? stride : ld * int64_t(outer)) * elem},
          {b.inner, b.outer, 1}};
}

// The bytes the boxes of a stage's A and B tiles bring: what its full barrier expects (TMA counts a
// whole box, out-of-range elements included, as it fills them with zeros).
template <int kBN>
constexpr uint32_t kStageTxBytes = (kBM + kBN) * kBKBytes;

// Consumer warpgroup w's operands for k step kk (kInstrK elements of k) of a stage: the byte
// offset of the matrix in its tile and the descriptor's leading and stride byte offsets (Note
// [wgmma operand layouts]). A: its 64 rows; B: all kBN.
struct Operand {
  uint32_t offset, lbo, sbo;
};
template <int kBK, int kInstrK, int kElemBytes>
SINTER_WGMMA_FN Operand operand_a(bool mn_major, int w, int kk) {
  if (mn_major) return {uint32_t(w * kBK * 128 + kk * kInstrK * 128), uint32_t(kBK * 128), 1024};
  return {uint32_t(w * 64 * 128 + kk * kInstrK * kElemBytes), 16, 1024};
}
template <int kBK, int kInstrK, int kElemBytes>
SINTER_WGMMA_FN Operand operand_b(bool mn_major, int kk) {
  if (mn_major) return {uint32_t(kk * kInstrK * 128), uint32_t(kBK * 128), 1024};
  return {uint32_t(kk * kInstrK * kElemBytes), 16, 1024};
}

// Note [wgmma stage ring]
// The producer and every consumer warp walk the kStages stages in the same order: stage s of lap
// `phase` (0, 1, 0, ...). Each stage has two mbarriers. `full` completes a phase once the producer
// has arrived (kFullArrivals) and TMA has brought the stage's expected bytes; `empty` once every
// consumer warp has arrived (kEmptyArrivals: lane 0 of each of the 8 warps of the two consumer
// warpgroups), after the wgmmas that read the stage have retired. mbarrier.try_wait.parity(p)
// passes once the phase of parity p has completed, and a barrier starts in phase 0 (PTX ISA,
// mbarrier): consumers wait on full with parity `phase`, the producer on empty with `phase ^ 1`,
// so its first lap passes at once (the phase before phase 0 counts as completed). A consumer
// releases a stage one k step late, once wgmma.wait_group 1 has retired the group that read it,
// and the last stage of a tile at the tile's end (wait_group 0).
template <int kBN>
constexpr int kStages = kBN == 256 ? 4 : 6;
constexpr int kConsumerWarps = 8;  // two warpgroups
constexpr int kFullArrivals = 1;
constexpr int kEmptyArrivals = kConsumerWarps;
struct Ring {
  int s = 0;
  uint32_t phase = 0;
  SINTER_WGMMA_FN uint32_t full_parity() const { return phase; }
  SINTER_WGMMA_FN uint32_t empty_parity() const { return phase ^ 1; }
  template <int kS>
  SINTER_WGMMA_FN void next() {
    if (++s == kS) {
      s = 0;
      phase ^= 1;
    }
  }
};

// Where accumulator d[i] of consumer warpgroup w's thread tid lies in the block's 128 x kBN tile:
// the wgmma accumulator fragment (PTX ISA 9.7.15.5.1.1, "Accumulator D" of m64nNk16 and m64nNk8),
// with warp = tid / 32, lane = tid % 32, i = 4 j + e: row 64 w + 16 warp + lane / 4 (+ 8 for e >=
// 2), column 8 j + 2 (lane % 4) (+ 1 for odd e). d[i] and d[i + 1] of even i are adjacent columns.
struct AccPos {
  int row, col;
};
SINTER_WGMMA_FN AccPos acc_pos(int w, int tid, int i) {
  const int warp = tid / 32, lane = tid % 32, j = i / 4, e = i % 4;
  return {64 * w + 16 * warp + lane / 4 + (e >= 2 ? 8 : 0), 8 * j + 2 * (lane % 4) + e % 2};
}

// The persistent schedule: tile t of the batch-major order, grouped 8 m-tiles at a time so that
// blocks running together share B tiles (and A tiles) in L2.
struct TileCoord {
  int z, tm, tn;
};
SINTER_WGMMA_FN TileCoord tile_coord(int64_t t, int tiles_m, int tiles_n) {
  constexpr int kGroup = 8;
  const int64_t per_batch = int64_t(tiles_m) * tiles_n;
  const int z = static_cast<int>(t / per_batch);
  const int r = static_cast<int>(t % per_batch);
  const int group = r / (kGroup * tiles_n), in_group = r % (kGroup * tiles_n);
  const int first_m = group * kGroup;
  const int rows = tiles_m - first_m < kGroup ? tiles_m - first_m : kGroup;
  return {z, first_m + in_group % rows, in_group / rows};
}

}  // namespace sinter::cudak::wgmma

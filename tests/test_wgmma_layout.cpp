// The Hopper GEMM's operand traffic replayed on the host (kernels/wgmma_layout.h, Note [wgmma
// operand layouts] in kernels/gemm_wgmma.cu): the producer's TMA boxes written into a stage with
// the 128-byte swizzle, then every consumer k step's descriptor decoded and its matrix read back as
// the PTX ISA defines it, for each layout of A and B the dispatcher picks, 16-bit and TF32 operands
// and both block widths. Every element wgmma reads must be the element of op(A) or op(B) that the k
// step means. A CTest builds this file again against a copy of wgmma_layout.h whose B descriptor
// has its two byte offsets swapped and expects it to fail (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

#include "wgmma_layout.h"

namespace sinter::testing {
namespace {

namespace wg = cudak::wgmma;

// The fields of a shared-memory matrix descriptor, PTX ISA 9.7.15.5.1.2.2 "Matrix Descriptor
// Format": bits 13-0 the encoded start address, 29-16 the encoded leading dimension byte offset,
// 45-32 the encoded stride dimension byte offset, 51-49 the base offset, 63-62 the swizzling mode
// (1: 128-byte); encode(x) = (x & 0x3FFFF) >> 4. Decoded back to bytes.
struct Descriptor {
  uint32_t start, lbo, sbo, base_offset, swizzle;
  uint64_t other_bits;  // bits the format leaves unused: must be 0
};
Descriptor decode(uint64_t d) {
  const uint64_t used =
      0x3FFFull | (0x3FFFull << 16) | (0x3FFFull << 32) | (0x7ull << 49) | (0x3ull << 62);
  return {uint32_t(d & 0x3FFF) << 4,
          uint32_t((d >> 16) & 0x3FFF) << 4,
          uint32_t((d >> 32) & 0x3FFF) << 4,
          uint32_t((d >> 49) & 0x7),
          uint32_t(d >> 62),
          d & ~used};
}

TEST(WgmmaDescriptor, FieldsFollowThePtxIsa) {
  for (uint32_t addr : {0u, 1024u, 0x3FC00u, 0x12340u}) {
    for (auto [lbo, sbo] : {std::pair{16u, 1024u}, std::pair{8192u, 1024u}, std::pair{4096u, 1024u},
                            std::pair{256u, 128u}}) {
      const Descriptor d = decode(wg::smem_desc(addr, lbo, sbo));
      EXPECT_EQ(d.start, addr);
      EXPECT_EQ(d.lbo, lbo);
      EXPECT_EQ(d.sbo, sbo);
      EXPECT_EQ(d.base_offset, 0u);  // tiles start on 1024-byte boundaries
      EXPECT_EQ(d.swizzle, 1u);      // 128-byte swizzle
      EXPECT_EQ(d.other_bits, 0u);
    }
  }
  // The ISA's example: LBO 64 * sizeof(tf32) encodes as 16, SBO 32 * sizeof(tf32) as 8.
  const uint64_t d = wg::smem_desc(0, 256, 128);
  EXPECT_EQ((d >> 16) & 0x3FFF, 16u);
  EXPECT_EQ((d >> 32) & 0x3FFF, 8u);
  // Addresses keep bits 17-4 only: shared memory is below 256 KiB.
  EXPECT_EQ(decode(wg::smem_desc(0x40010, 16, 1024)).start, 0x10u);
}

// The 128-byte swizzle of a shared-memory byte address (TMA's CU_TENSOR_MAP_SWIZZLE_128B, and
// Swizzle<3,4,3> of the ISA's canonical layouts): the 16-byte chunk (bits 6-4) XOR the row within
// the 1024-byte pattern (bits 9-7).
uint32_t swizzle128(uint32_t a) { return a ^ (((a >> 7) & 7) << 4); }

// The ISA's canonical layouts with the 128-byte swizzle (9.7.15.5.1.2.1.3), T = 16 / element bytes:
// K-major ((8,m),(T,2k)):((8T,SBO),(1,T)), MN-major ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)), in
// elements. The byte address of element (row, k) of the matrix a descriptor names, before the
// swizzle (row: m of A or n of B).
uint32_t canonical_address(const Descriptor& d, bool mn_major, int elem, int row, int k) {
  const int t = 16 / elem;
  if (!mn_major) return d.start + (row % 8) * 128 + (row / 8) * d.sbo + k * elem;
  return d.start + (row % t) * elem + (row / t % 8) * 16 + row / (8 * t) * d.lbo + (k % 8) * 128 +
         (k / 8) * d.sbo;
}

// A stage's bytes as element slots, each holding the id of the operand element written there.
struct Smem {
  uint32_t base;  // the stage's shared-memory address
  int elem;
  std::vector<int64_t> slot;
  Smem(uint32_t base, uint32_t bytes, int elem) : base(base), elem(elem), slot(bytes / elem, -1) {}
  int64_t& at(uint32_t addr) {
    EXPECT_GE(addr, base);
    EXPECT_LT(addr - base, slot.size() * elem);
    EXPECT_EQ(addr % elem, 0u);
    return slot.at((addr - base) / elem);
  }
};

// TMA's tiled load of box b with the 128-byte swizzle into the tile at `tile`: box element (i, j)
// (i along the tensor map's contiguous dim 0) lands at row j, byte i * elem of the box, swizzled;
// it is the tensor element at coordinates (c0 + i, c1 + j), whose id id_at gives.
template <class Id>
void tma_box(Smem& s, uint32_t tile, const wg::Box& b, Id id_at) {
  ASSERT_EQ(b.inner * s.elem, 128u) << "the 128-byte swizzle needs 128-byte box rows";
  ASSERT_LE(b.outer, 256u) << "a box dimension is at most 256";
  for (uint32_t j = 0; j < b.outer; ++j) {
    for (uint32_t i = 0; i < b.inner; ++i) {
      int64_t& slot = s.at(swizzle128(tile + b.offset + j * 128 + i * s.elem));
      EXPECT_EQ(slot, -1) << "two boxes write one byte";
      slot = id_at(b.c0 + int(i), b.c1 + int(j));
    }
  }
}

// One stage of gemm_wgmma_kernel<T, kBN, kTransA, kTransB> (kElem-byte operands): the producer's
// loads, then every consumer warpgroup's k steps. Returns the count of elements read wrong.
template <int kElem, int kBN>
int replay_stage(bool trans_a, bool trans_b) {
  constexpr int kBK = wg::kBKBytes / kElem, kInstrK = kElem == 4 ? 8 : 16;
  constexpr uint32_t kABytes = wg::kBM * wg::kBKBytes, kBBytes = kBN * wg::kBKBytes;
  const int m0 = 256, n0 = 512, k0 = 3 * kBK;  // the tile's corner in op(A) and op(B)
  // Ids: op(A)(m, k) and op(B)(k, n), as the GEMM means them.
  auto a_id = [](int m, int k) { return int64_t(m) * 100000 + k; };
  auto b_id = [](int n, int k) { return -(int64_t(n) * 100000 + k) - 2; };
  // The stage at some 1024-aligned address: A's tile, then B's.
  const uint32_t stage = 7 * wg::kSwizzleAtom;
  Smem s(stage, kABytes + kBBytes, kElem);
  uint32_t bytes = 0;
  // A is stored (m, k) when K-major (map dims: k inner, m), (k, m) when MN-major (m inner, k).
  for (int h = 0; h < wg::boxes(trans_a, wg::kBM); ++h) {
    const wg::Box b = wg::tile_box<kBK>(trans_a, wg::kBM, h, m0, k0);
    tma_box(s, stage, b, [&](int c0, int c1) { return trans_a ? a_id(c0, c1) : a_id(c1, c0); });
    bytes += b.inner * b.outer * kElem;
  }
  for (int h = 0; h < wg::boxes(trans_b, kBN); ++h) {
    const wg::Box b = wg::tile_box<kBK>(trans_b, kBN, h, n0, k0);
    tma_box(s, stage + kABytes, b,
            [&](int c0, int c1) { return trans_b ? b_id(c0, c1) : b_id(c1, c0); });
    bytes += b.inner * b.outer * kElem;
  }
  EXPECT_EQ(bytes, wg::kStageTxBytes<kBN>) << "the full barrier's expected bytes";
  EXPECT_EQ(stage % wg::kSwizzleAtom, 0u);
  EXPECT_EQ(kABytes % wg::kSwizzleAtom, 0u);

  int wrong = 0;
  auto expect_read = [&](const Descriptor& d, bool mn_major, int row, int k, int64_t want) {
    const int64_t got = s.at(swizzle128(canonical_address(d, mn_major, kElem, row, k)));
    if (got != want && ++wrong <= 3) {
      ADD_FAILURE() << "wgmma reads element id " << got << " for row " << row << ", k " << k
                    << ", want " << want;
    }
  };
  for (int kk = 0; kk < kBK / kInstrK; ++kk) {
    for (int w = 0; w < 2; ++w) {  // A: warpgroup w's 64 rows
      const wg::Operand o = wg::operand_a<kBK, kInstrK, kElem>(trans_a, w, kk);
      const Descriptor d = decode(wg::smem_desc(stage + o.offset, o.lbo, o.sbo));
      EXPECT_EQ(d.swizzle, 1u);
      for (int r = 0; r < 64; ++r) {
        for (int k = 0; k < kInstrK; ++k) {
          expect_read(d, trans_a, r, k, a_id(m0 + 64 * w + r, k0 + kk * kInstrK + k));
        }
      }
    }
    const wg::Operand o = wg::operand_b<kBK, kInstrK, kElem>(trans_b, kk);
    const Descriptor d = decode(wg::smem_desc(stage + kABytes + o.offset, o.lbo, o.sbo));
    for (int n = 0; n < kBN; ++n) {
      for (int k = 0; k < kInstrK; ++k) {
        expect_read(d, trans_b, n, k, b_id(n0 + n, k0 + kk * kInstrK + k));
      }
    }
  }
  return wrong;
}

// The layouts gemm_wgmma's dispatcher launches: each (trans_a, trans_b) pair of wgmma's flags for
// 16-bit operands, both K-major for TF32 (no transpose flag).
TEST(WgmmaLayout, TmaWritesAndWgmmaReadsAgree) {
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "16-bit, A " << (trans_a ? "MN" : "K") << "-major, B "
                                        << (trans_b ? "MN" : "K") << "-major");
      EXPECT_EQ((replay_stage<2, 128>(trans_a, trans_b)), 0) << "BN 128";
      EXPECT_EQ((replay_stage<2, 256>(trans_a, trans_b)), 0) << "BN 256";
    }
  }
  SCOPED_TRACE("TF32, both K-major");
  EXPECT_EQ((replay_stage<4, 128>(false, false)), 0) << "BN 128";
  EXPECT_EQ((replay_stage<4, 256>(false, false)), 0) << "BN 256";
}

// The persistent schedule gives every (batch, m tile, n tile) to exactly one t.
TEST(WgmmaSchedule, EveryTileOnce) {
  for (int tiles_m : {1, 7, 8, 9, 17, 24}) {
    for (int tiles_n : {1, 3, 5}) {
      for (int batch : {1, 3}) {
        std::set<std::tuple<int, int, int>> seen;
        const int64_t tiles = int64_t(tiles_m) * tiles_n * batch;
        for (int64_t t = 0; t < tiles; ++t) {
          const wg::TileCoord c = wg::tile_coord(t, tiles_m, tiles_n);
          ASSERT_TRUE(c.z >= 0 && c.z < batch && c.tm >= 0 && c.tm < tiles_m && c.tn >= 0 &&
                      c.tn < tiles_n)
              << tiles_m << " x " << tiles_n << " x " << batch << ": t " << t;
          seen.insert({c.z, c.tm, c.tn});
        }
        EXPECT_EQ(static_cast<int64_t>(seen.size()), tiles)
            << tiles_m << " x " << tiles_n << " x " << batch;
      }
    }
  }
}

}  // namespace
}  // namespace sinter::testing

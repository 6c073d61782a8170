// The Hopper GEMM's operand traffic replayed on the host (kernels/wgmma_layout.h, Note [wgmma
// operand layouts] in kernels/gemm_wgmma.cu): the producer's TMA boxes written into a stage with
// the 128-byte swizzle, then every consumer k step's descriptor decoded and its matrix read back as
// the PTX ISA defines it, for each layout of A and B the dispatcher picks, 16-bit, TF32 and FP8
// operands and both block widths. Every element wgmma reads must be the element of op(A) or op(B) that the k
// step means. A CTest builds this file again against a copy of wgmma_layout.h whose B descriptor
// has its two byte offsets swapped and expects it to fail (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
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
  // k per wgmma: 8 for TF32, 16 for 16-bit types, 32 for FP8 (kernels/gemm_fp8.cu).
  constexpr int kBK = wg::kBKBytes / kElem, kInstrK = kElem == 4 ? 8 : kElem == 2 ? 16 : 32;
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
  // The FP8 GEMM (Note [fp8 wgmma]): 1-byte elements, both K-major, 128-wide tiles.
  SCOPED_TRACE("FP8, both K-major");
  EXPECT_EQ((replay_stage<1, 128>(false, false)), 0) << "BN 128";
}

// The tensor maps the host builds (wgmma::operand_map): the box coordinates (c0, c1, c2) the
// producer gives for op(A)(i, p) of batch z (MN-major: (i, p, z), K-major: (p, i, z); z 0 when
// the operand is shared by the batch) address that element as kern::GemmArgs lays it out, with the
// strides TMA accepts (multiples of 16 bytes) and boxes within its limits.
TEST(WgmmaMaps, CoordinatesAddressTheGemmsElements) {
  std::mt19937 rng(3);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int elem = trial % 4 == 3 ? 4 : 2;
    // TF32 operands are K-major only.
    const bool mn_major = elem == 2 && trial % 2, batched = trial % 3 != 0,
               broadcast = trial % 5 == 0;
    const int align = 16 / elem;  // ld and stride in elements: multiples of 16 bytes (gemm_wgmma)
    const int64_t mn = 1 + rng() % 300, k = 1 + rng() % 300;
    const int64_t batch = batched ? 1 + rng() % 4 : 1;
    const int64_t rows = mn_major ? k : mn, cols = mn_major ? mn : k;  // storage (rows, cols)
    const int64_t ld = (cols + align - 1) / align * align + align * int64_t(rng() % 3);
    const int64_t stride = broadcast ? 0 : rows * ld + align * int64_t(rng() % 5);
    const wg::OperandMap m = elem == 2
                                 ? wg::operand_map<64>(mn_major, 128, mn, k, batch, ld, stride, 2)
                                 : wg::operand_map<32>(false, 128, mn, k, batch, ld, stride, 4);
    SCOPED_TRACE(::testing::Message()
                 << (mn_major ? "MN" : "K") << "-major, elem " << elem << ", mn " << mn << ", k "
                 << k << ", batch " << batch << ", ld " << ld << ", stride " << stride);
    EXPECT_EQ(m.strides[0] % 16, 0u);
    EXPECT_EQ(m.strides[1] % 16, 0u);
    EXPECT_EQ(m.box[0] * elem, 128u);
    EXPECT_LE(m.box[1], 256u);
    EXPECT_EQ(m.dims[2], broadcast ? 1u : uint64_t(batch));
    for (int sample = 0; sample < 20; ++sample) {
      const int64_t i = rng() % mn, p = rng() % k, z = rng() % batch;
      const uint64_t c0 = mn_major ? i : p, c1 = mn_major ? p : i, c2 = m.dims[2] > 1 ? z : 0;
      ASSERT_LT(c0, m.dims[0]);
      ASSERT_LT(c1, m.dims[1]);
      ASSERT_LT(c2, m.dims[2]);
      const uint64_t got = c0 * elem + c1 * m.strides[0] + c2 * m.strides[1];
      // kern::GemmArgs: op(A)(i, p) = a[i * lda + p], or a[p * lda + i] transposed (MN-major);
      // batch z adds z * stride.
      const int64_t want = elem * (z * stride + (mn_major ? p * ld + i : i * ld + p));
      EXPECT_EQ(got, uint64_t(want)) << "element (" << i << ", " << p << ") of batch " << z;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 300);
}

// The accumulators of the two consumer warpgroups (acc_pos) cover the block's 128 x kBN tile once,
// each even/odd pair on adjacent columns from an even one (the epilogue's paired stores).
TEST(WgmmaAccumulators, CoverTheBlockTileOnce) {
  for (int bn : {128, 256}) {
    std::vector<int> seen(wg::kBM * bn, 0);
    for (int w = 0; w < 2; ++w) {
      for (int tid = 0; tid < 128; ++tid) {
        for (int i = 0; i < bn / 2; ++i) {
          const wg::AccPos p = wg::acc_pos(w, tid, i);
          ASSERT_TRUE(p.row >= 0 && p.row < wg::kBM && p.col >= 0 && p.col < bn);
          ++seen[p.row * bn + p.col];
          if (i % 2 == 0) {
            const wg::AccPos q = wg::acc_pos(w, tid, i + 1);
            EXPECT_TRUE(p.col % 2 == 0 && q.row == p.row && q.col == p.col + 1);
          }
        }
      }
    }
    for (int v : seen) ASSERT_EQ(v, 1) << "BN " << bn;
  }
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

// --- the stage ring (Note [wgmma stage ring]) ---

// An mbarrier as the PTX ISA describes it: a phase completes when its pending arrivals and its
// transaction bytes both reach zero; the barrier then enters the next phase with the arrival
// count it was initialized with. try_wait.parity(p) passes once the phase of parity p completed:
// when the current phase's parity is not p.
struct Mbarrier {
  int count = 0, pending = 0;
  int64_t tx = 0;
  uint32_t parity = 0;  // of the current, incomplete phase
  explicit Mbarrier(int n) : count(n), pending(n) {}
  bool passed(uint32_t p) const { return parity != p; }
  void settle() {
    if (pending == 0 && tx == 0) {
      parity ^= 1;
      pending = count;
    }
  }
  void arrive() {
    EXPECT_GT(pending, 0) << "an arrive on a completed phase";
    --pending;
    settle();
  }
  void expect_tx(int64_t bytes) { tx += bytes; }
  void complete_tx(int64_t bytes) {
    tx -= bytes;
    settle();
  }
};

// One block of gemm_wgmma_kernel's protocol: its producer thread, its 8 consumer warps and TMA,
// interleaved at random (each step of an actor whose wait passes may run next). The loops follow
// the kernel's, with its Ring; the checks: nothing waits forever, each consumer reads a stage only
// once the tile and k block it wants have landed there, and TMA never writes a stage a consumer's
// wgmmas may still read.
template <int kS>
void run_ring(int tiles, int kblocks, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << kS << " stages, " << tiles << " tiles of " << kblocks
                                    << " k blocks, seed " << seed);
  constexpr int kWarps = wg::kConsumerWarps;
  constexpr int64_t kBytes = 1000;
  std::vector<Mbarrier> full(kS, Mbarrier(wg::kFullArrivals)),
      empty(kS, Mbarrier(wg::kEmptyArrivals));
  std::vector<int64_t> landed(kS, -1);  // the (tile, k block) whose data a stage holds
  std::vector<std::set<int>> readers(kS);
  struct Load {
    int s;
    int64_t what;
  };
  std::vector<Load> in_flight;
  const int64_t steps = int64_t(tiles) * kblocks;
  // Producer: ring position and the next (tile, k block) to load.
  wg::Ring producer;
  int64_t produced = 0;
  // Consumers: ring, next step, and the stage still being read (released one step late).
  struct Consumer {
    wg::Ring ring;
    int64_t step = 0;
    int prev = -1;
    bool done = false;
  };
  std::vector<Consumer> consumers(kWarps);
  std::mt19937 rng(seed);
  while (true) {
    std::vector<std::function<void()>> moves;
    if (produced < steps && empty[producer.s].passed(producer.empty_parity())) {
      moves.push_back([&] {
        const int s = producer.s;
        EXPECT_TRUE(readers[s].empty()) << "TMA overwrites stage " << s << " while it is read";
        full[s].expect_tx(kBytes);
        full[s].arrive();
        landed[s] = -1;  // being written
        in_flight.push_back({s, produced});
        ++produced;
        producer.next<kS>();
      });
    }
    for (size_t i = 0; i < in_flight.size(); ++i) {
      moves.push_back([&, i] {
        const Load l = in_flight[i];
        in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(i));
        landed[l.s] = l.what;
        full[l.s].complete_tx(kBytes);
      });
    }
    for (int c = 0; c < kWarps; ++c) {
      Consumer& w = consumers[c];
      if (w.done) continue;
      const bool tile_end = w.step > 0 && w.step % kblocks == 0 && w.prev >= 0;
      if (tile_end || w.step == steps) {
        // wgmma.wait_group 0 at the tile's end: the last stage is released.
        moves.push_back([&, c] {
          Consumer& x = consumers[c];
          if (x.prev >= 0) {
            readers[x.prev].erase(c);
            empty[x.prev].arrive();
            x.prev = -1;
          }
          if (x.step == steps) x.done = true;
        });
      } else if (full[w.ring.s].passed(w.ring.full_parity())) {
        moves.push_back([&, c] {
          Consumer& x = consumers[c];
          const int s = x.ring.s;
          EXPECT_EQ(landed[s], x.step) << "warp " << c << " reads stage " << s;
          readers[s].insert(c);  // the wgmmas issued on it read it until they retire
          if (x.prev >= 0) {     // wait_group 1: the group before has retired
            readers[x.prev].erase(c);
            empty[x.prev].arrive();
          }
          x.prev = s;
          ++x.step;
          x.ring.template next<kS>();
        });
      }
    }
    if (moves.empty()) break;
    moves[rng() % moves.size()]();
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(produced, steps) << "the producer waits forever";
  for (int c = 0; c < kWarps; ++c) {
    EXPECT_TRUE(consumers[c].done)
        << "consumer warp " << c << " waits forever at step " << consumers[c].step;
  }
}

TEST(WgmmaRing, NoHangNoEarlyReadNoOverwrite) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    for (auto [tiles, kblocks] : {std::pair{1, 1}, std::pair{1, 4}, std::pair{2, 5},
                                  std::pair{3, 6}, std::pair{2, 13}, std::pair{5, 1}}) {
      run_ring<wg::kStages<256>>(tiles, kblocks, seed);
      run_ring<wg::kStages<128>>(tiles, kblocks, seed);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace sinter::testing

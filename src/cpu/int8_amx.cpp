// The int8 GEMM's AMX kernel (Note [int8 amx] in src/cpu/int8.h): the weight's tile layout, the
// kernel's walk over tiles, the tiles themselves (the CPU's, and the replay that runs the same walk
// on any CPU), and the asking of Linux for the tile registers.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/int8.h"
#include "sinter/core/error.h"

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define SINTER_INT8_AMX 1
#endif

namespace sinter::cpu::int8::amx {

int64_t packed_bytes(int64_t n, int64_t k) {
  const int64_t pairs_of_blocks = (n + 2 * kBlockN - 1) / (2 * kBlockN);
  const int64_t chunks = (k + kTileK - 1) / kTileK;
  return pairs_of_blocks * 2 * chunks * kTileRows * kTileBytes;
}

void pack_from(PackedView b, int8_t* out) {
  const int64_t blocks = (b.n + kBlockN - 1) / kBlockN;
  const int64_t chunks = (b.k + kTileK - 1) / kTileK;
  const int64_t padded_blocks = (blocks + 1) / 2 * 2;
  std::fill(out, out + padded_blocks * chunks * kTileRows * kTileBytes, int8_t{0});
  for (int64_t jb = 0; jb < blocks; ++jb) {
    // The pair packing's block jb: pair p, channel ch, value t at ((p 16 + ch) 2 + t).
    const int16_t* blk = b.data + jb * (b.k / 2) * (2 * kBlockN);
    for (int64_t kk = 0; kk < b.k; ++kk) {
      const int64_t q = kk / kTileK, r = (kk % kTileK) / 4, t = kk % 4;
      int8_t* row = out + ((jb * chunks + q) * kTileRows + r) * kTileBytes;
      for (int64_t ch = 0; ch < kBlockN; ++ch) {
        row[ch * 4 + t] = static_cast<int8_t>(blk[((kk / 2) * kBlockN + ch) * 2 + kk % 2]);
      }
    }
  }
}

namespace {

// The tile configuration both kinds of tiles take: palette 1, the eight tiles each 16 rows of 64
// bytes (Note [int8 amx]): c0..c3 in tmm0..3, a0 and a1 in tmm4..5, b0 and b1 in tmm6..7.
struct alignas(64) Config {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(Config) == 64, "the tile configuration is 64 bytes");

constexpr Config eight_full_tiles() {
  Config c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = static_cast<uint16_t>(kTileBytes);
    c.rows[t] = static_cast<uint8_t>(kTileRows);
  }
  return c;
}
constexpr Config kEightFullTiles = eight_full_tiles();

// The replay's tiles: what tileloadd, tdpbssd, tilestored and tilezero do to the eight tiles of
// eight_full_tiles(), as the instruction set reference writes them, in plain C++.
class Replay {
 public:
  // What ldtilecfg checks (a general protection fault on the CPU), and the shapes the walk needs.
  void configure(const Config& config) {
    SINTER_CHECK(config.palette == 1 && config.start_row == 0,
                 "int8 amx replay: palette and start row must be 1 and 0");
    for (const uint8_t r : config.reserved) SINTER_CHECK(r == 0, "int8 amx replay: reserved byte");
    for (int t = 0; t < 16; ++t) {
      const bool used = t < 8;
      SINTER_CHECK(
          config.rows[t] == (used ? kTileRows : 0) && config.colsb[t] == (used ? kTileBytes : 0),
          "int8 amx replay: tile ", t, " is not ", used ? "16 rows of 64 bytes" : "unused");
    }
  }
  void release() {}
  void zero_c() {
    for (int t = 0; t < 4; ++t) std::memset(tile_[t], 0, sizeof tile_[t]);
  }
  void load_a(const int8_t* a0, const int8_t* a1, int64_t stride) {
    load(4, a0, stride);
    load(5, a1, stride);
  }
  void load_b(const int8_t* b0, const int8_t* b1) {
    load(6, b0, kTileBytes);
    load(7, b1, kTileBytes);
  }
  // tdpbssd c, a, b: c.dword[m][n] += the four signed byte products of a.dword[m][q] and
  // b.dword[q][n], for q over a's 16 dwords of a row.
  void multiply() {
    dpbssd(0, 4, 6);
    dpbssd(1, 4, 7);
    dpbssd(2, 5, 6);
    dpbssd(3, 5, 7);
  }
  void store_c(int32_t* c, int64_t stride) {
    for (int t = 0; t < 4; ++t) {
      char* corner = reinterpret_cast<char*>(c + (t / 2) * kTileRows * stride + (t % 2) * kBlockN);
      for (int64_t r = 0; r < kTileRows; ++r) {
        std::memcpy(corner + r * stride * 4, tile_[t][r], kTileBytes);
      }
    }
  }

 private:
  void load(int t, const int8_t* p, int64_t stride) {
    for (int64_t r = 0; r < kTileRows; ++r) std::memcpy(tile_[t][r], p + r * stride, kTileBytes);
  }
  void dpbssd(int c, int a, int b) {
    for (int64_t m = 0; m < kTileRows; ++m) {
      for (int64_t n = 0; n < kTileBytes / 4; ++n) {
        int32_t sum;
        std::memcpy(&sum, &tile_[c][m][n * 4], 4);
        for (int64_t q = 0; q < kTileBytes / 4; ++q) {
          for (int64_t t = 0; t < 4; ++t) {
            const auto av = static_cast<int8_t>(tile_[a][m][q * 4 + t]);
            const auto bv = static_cast<int8_t>(tile_[b][q][n * 4 + t]);
            // The dword sums wrap as the instruction's do (two's complement, never reached
            // under kMaxK).
            sum = static_cast<int32_t>(static_cast<uint32_t>(sum) +
                                       static_cast<uint32_t>(int32_t{av} * int32_t{bv}));
          }
        }
        std::memcpy(&tile_[c][m][n * 4], &sum, 4);
      }
    }
  }
  unsigned char tile_[8][kTileRows][kTileBytes] = {};
};

#ifdef SINTER_INT8_AMX
// The CPU's tiles. Each is an out-of-line call: one tile instruction is 16 x 16 x 64 products.
// The compilers' tile intrinsics do not all tell them what memory the instruction reads (GCC 12's
// _tile_loadconfig names 8 of the configuration's 64 bytes, and its stores of the rest were
// dropped as dead; its _tile_loadd names none): ldtilecfg is written here with the whole
// configuration as its operand, and each load comes after a compiler barrier, so that the stores
// of a's rows and of the tile layout are made before it.
class Hardware {
 public:
  __attribute__((target("amx-tile"))) void configure(const Config& config) {
    __asm__ volatile("ldtilecfg %0" : : "m"(config));
  }
  __attribute__((target("amx-tile"))) void release() { _tile_release(); }
  __attribute__((target("amx-tile"))) void zero_c() {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  __attribute__((target("amx-tile"))) void load_a(const int8_t* a0, const int8_t* a1,
                                                  int64_t stride) {
    __asm__ volatile("" : : : "memory");
    _tile_loadd(4, a0, stride);
    _tile_loadd(5, a1, stride);
  }
  __attribute__((target("amx-tile"))) void load_b(const int8_t* b0, const int8_t* b1) {
    __asm__ volatile("" : : : "memory");
    _tile_loadd(6, b0, kTileBytes);
    _tile_loadd(7, b1, kTileBytes);
  }
  __attribute__((target("amx-tile,amx-int8"))) void multiply() {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  __attribute__((target("amx-tile"))) void store_c(int32_t* c, int64_t stride) {
    const int64_t bytes = stride * 4, down = kTileRows * stride;
    _tile_stored(0, c, bytes);
    _tile_stored(1, c + kBlockN, bytes);
    _tile_stored(2, c + down, bytes);
    _tile_stored(3, c + down + kBlockN, bytes);
  }
};
#endif

// The walk (Note [int8 amx]): for each 32 rows of a, narrowed to int8 and padded with zeros to
// 32 rows of whole 64-value chunks, and each two blocks of 16 channels, the four c tiles summed
// over the chunks of k, stored into a 32 x 32 block and copied out where it lies inside c.
template <typename Tiles>
void walk(Tiles& tiles, int64_t m, const int16_t* a, int64_t lda, PackedView b, int32_t* c,
          int64_t ldc) {
  if (m <= 0 || b.n <= 0) return;
  const int64_t chunks = (b.k + kTileK - 1) / kTileK, kpad = chunks * kTileK;
  const int64_t pairs_of_blocks = (b.n + 2 * kBlockN - 1) / (2 * kBlockN);
  thread_local std::vector<int8_t> packed, rows;
  const int8_t* tiled = b.amx;
  if (tiled == nullptr) {
    packed.resize(static_cast<size_t>(packed_bytes(b.n, b.k)));
    pack_from(b, packed.data());
    tiled = packed.data();
  }
  rows.resize(static_cast<size_t>(2 * kTileRows * kpad));
  alignas(64) int32_t block[2 * kTileRows][2 * kBlockN];
  const int64_t chunk_bytes = kTileRows * kTileBytes;
  tiles.configure(kEightFullTiles);
  for (int64_t i0 = 0; i0 < m; i0 += 2 * kTileRows) {
    const int64_t mi = std::min(2 * kTileRows, m - i0);
    std::fill(rows.begin(), rows.end(), int8_t{0});
    for (int64_t i = 0; i < mi; ++i) {
      const int16_t* from = a + (i0 + i) * lda;
      int8_t* to = rows.data() + i * kpad;
      for (int64_t p = 0; p < b.k; ++p) to[p] = static_cast<int8_t>(from[p]);
    }
    for (int64_t jp = 0; jp < pairs_of_blocks; ++jp) {
      const int8_t* b0 = tiled + (2 * jp) * chunks * chunk_bytes;
      const int8_t* b1 = b0 + chunks * chunk_bytes;
      tiles.zero_c();
      for (int64_t q = 0; q < chunks; ++q) {
        tiles.load_a(rows.data() + q * kTileK, rows.data() + kTileRows * kpad + q * kTileK, kpad);
        tiles.load_b(b0 + q * chunk_bytes, b1 + q * chunk_bytes);
        tiles.multiply();
      }
      tiles.store_c(&block[0][0], 2 * kBlockN);
      const int64_t j0 = jp * 2 * kBlockN, nj = std::min(2 * kBlockN, b.n - j0);
      for (int64_t i = 0; i < mi; ++i) {
        std::memcpy(c + (i0 + i) * ldc + j0, block[i], static_cast<size_t>(nj) * sizeof(int32_t));
      }
    }
  }
  tiles.release();
  // A long k leaves megabytes in these; they are kept for the next call only when small.
  constexpr size_t kKeep = size_t{1} << 20;
  if (rows.capacity() > kKeep) std::vector<int8_t>().swap(rows);
  if (packed.capacity() > kKeep) std::vector<int8_t>().swap(packed);
}

#ifdef SINTER_INT8_AMX
// AMX-TILE and AMX-INT8 in CPUID leaf 7, the tile state enabled by the kernel in XCR0 (bits 17
// and 18), and the process's permission to use it, asked of Linux once (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA). Linux refuses it where a thread already has an
// alternate signal stack too small for the tiles' state (about 11 KB more a signal frame): the
// kernel then falls back to AVX-512 VNNI. Once granted, a later sigaltstack() smaller than that
// fails, in every thread of the process.
bool ask_for_tiles() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool tile = (edx >> 24) & 1U, has_int8 = (edx >> 25) & 1U;
  if (!tile || !has_int8) return false;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || ((ecx >> 27) & 1U) == 0) return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if (((lo >> 17) & 3U) != 3U) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#endif

}  // namespace

bool available() {
#ifdef SINTER_INT8_AMX
  static const bool yes = ask_for_tiles();
  return yes;
#else
  return false;
#endif
}

void gemm(int64_t m, const int16_t* a, int64_t lda, PackedView b, int32_t* c, int64_t ldc) {
#ifdef SINTER_INT8_AMX
  SINTER_CHECK(available(), "int8 gemm: this CPU (or its kernel) has no AMX tiles");
  Hardware tiles;
  walk(tiles, m, a, lda, b, c, ldc);
#else
  (void)m, (void)a, (void)lda, (void)b, (void)c, (void)ldc;
  SINTER_THROW("int8 gemm: AMX is an x86-64 instruction set");
#endif
}

void replay(int64_t m, const int16_t* a, int64_t lda, PackedView b, int32_t* c, int64_t ldc) {
  Replay tiles;
  walk(tiles, m, a, lda, b, c, ldc);
}

}  // namespace sinter::cpu::int8::amx

// The CPU's int8 GEMM behind the int8 family's CPU kernels (src/cpu/int8.cpp, Note [int8 kernels]
// in src/kern/int8.h): the packing of the weight and the GEMM of int8 values into exact int32 sums
// (Note [int8 gemm]).
#pragma once

#include <cstdint>
#include <vector>

#include "kern/int8.h"

namespace sinter::cpu::int8 {

// Note [int8 gemm]
// c(i, j) = sum_k a(i, k) b(j, k), with a the rows of the input (a Linear's input rows, the
// im2col rows of a convolution) and b the weight (out, in): int8 values in [-128, 127] held
// widened to int16, so that AVX2's vpmaddwd multiplies 16 pairs and adds adjacent products into 8
// int32 lanes, exactly (|a b| <= 2^14: sums of k <= kInt8MaxK < 2^17 terms stay within int32). The
// weight is packed once (PackedB): blocks of 16 output channels, and in a block for each pair of k
// the 16 channels' two values side by side, so that one vpmaddwd of a broadcast pair of a-values
// gives 8 channels' partial sums and no horizontal sum is ever needed. The AVX2 kernel keeps 4 rows
// x 16 channels in 8 accumulators; the AVX-512 VNNI kernel reads a pair's 16 channels as one
// 512-bit register and adds the products with vpdpwssd (the same int16 products and exact int32
// sums, fused), 8 rows x 16 channels in 8 accumulators; the fallback walks the same packing in
// plain C++; the reference is three plain loops over the unpacked weight. All give the same
// integers. The kernel is picked at run time by the CPU's instruction sets: AMX (Note [int8 amx]),
// else AVX-512 VNNI, else AVX2, else the fallback; the environment variable SINTER_INT8_ISA
// (scalar, avx2, avx512-vnni, amx) picks one the CPU has instead, to compare them on one machine.
constexpr int64_t kBlockN = 16;
constexpr int64_t kMaxK = kern::kInt8MaxK;
// a's rows hold k values padded with zeros to an even count.
inline int64_t padded_k(int64_t k) { return (k + 1) / 2 * 2; }
// The int16 values of n rows of k once packed: whole blocks of kBlockN channels, k padded to even.
inline int64_t packed_elements(int64_t n, int64_t k) {
  return (n + kBlockN - 1) / kBlockN * padded_k(k) * kBlockN;
}

// Note [int8 amx]
// On a CPU with AMX, tdpbssd multiplies a tile of 16 rows of 64 int8 a-values by a tile of 16
// rows of 16 channels x 4 int8 weights (each row four consecutive k of every channel) and adds
// each row's and channel's sum of 64 products to a tile of 16 x 16 int32 sums: exact, as the
// other kernels' (the products are the same, and the int32 sums of k <= kMaxK cannot wrap). The
// weight's tile layout (amx::pack_from): blocks of 16 channels, their count padded to even with
// zero blocks; in a block, for each chunk of 64 k (the last padded with zeros), 16 rows of 64
// bytes. The kernel (amx::gemm) keeps four c tiles (32 rows x 32 channels) in tmm0..3, loads two
// a tiles and two weight tiles per chunk and runs four tdpbssd; a's rows are narrowed to int8 into
// a zero-padded buffer of 32 rows first. A layer's packed bytes carry the tile layout after the
// pair packing where AMX is the kernel the CPU runs (int8_pack_weight); without it, the kernel
// makes it from the pair packing at each call. Tiles are configured at each call (palette 1, all
// eight 16 rows of 64 bytes) and released after: other code on the thread (oneDNN) configures
// them its own way. Linux gives a process the tile registers only when asked (arch_prctl
// ARCH_REQ_XCOMP_PERM), which amx::available() does once. amx::replay runs the same walk on tiles
// written in plain C++ after the instruction set reference, so that the layout and the walk are
// tested on every CPU; the kernel itself is tested where the CPU has AMX, and skipped elsewhere.
constexpr int64_t kTileRows = 16, kTileBytes = 64, kTileK = 64;

// A packed weight where it lies (a PackedB, or a group of a layer's packed bytes).
struct PackedView {
  int64_t n = 0, k = 0;  // k even
  const int16_t* data = nullptr;
  const int8_t* amx = nullptr;  // the weight in the tile layout, if packed (Note [int8 amx])
};
struct PackedB {
  int64_t n = 0, k = 0;  // k even
  std::vector<int16_t> data;
  operator PackedView() const { return {n, k, data.data()}; }  // NOLINT: a view of it
};
// b (n rows of k values, row stride ldb; k <= kMaxK) packed into out (packed_elements(n, k)
// values); k is padded to even with zeros. T: int8_t or int16_t.
template <typename T>
void pack_into(int64_t n, int64_t k, const T* b, int64_t ldb, int16_t* out);
// The same into a PackedB of its own.
PackedB pack_b(int64_t n, int64_t k, const int16_t* b, int64_t ldb);

// c[i * ldc + j] for i < m, j < b.n; a's rows of b.k values at stride lda.
void gemm(int64_t m, const int16_t* a, int64_t lda, PackedView b, int32_t* c, int64_t ldc);
// The packed walk in plain C++, what gemm runs without AVX2.
void gemm_fallback(int64_t m, const int16_t* a, int64_t lda, PackedView b, int32_t* c, int64_t ldc);
void gemm_reference(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda,
                    const int16_t* b, int64_t ldb, int32_t* c, int64_t ldc);
// The instruction set gemm runs on this CPU: "amx", "avx512-vnni", "avx2" or "scalar".
const char* gemm_isa();

// The kernels one by one, for the tests and benchmarks: whether this CPU has each, its name, and
// gemm on it (an error where the CPU lacks it).
enum class Isa { Scalar, Avx2, Avx512Vnni, Amx };
// Whether gemm runs on `isa` on this CPU.
bool gemm_isa_is(Isa isa);
bool has_isa(Isa isa);
const char* isa_name(Isa isa);
void gemm_on(Isa isa, int64_t m, const int16_t* a, int64_t lda, PackedView b, int32_t* c,
             int64_t ldc);

namespace amx {
// The bytes of n channels of k (even) values in the tile layout, and b laid out so into out.
int64_t packed_bytes(int64_t n, int64_t k);
void pack_from(PackedView b, int8_t* out);
// Whether this CPU has AMX-INT8 and the process may use its tiles (asked of Linux at the first
// call).
bool available();
// gemm on the CPU's tiles (an error where available() is false), and the same walk on the
// replayed tiles, on any CPU.
void gemm(int64_t m, const int16_t* a, int64_t lda, PackedView b, int32_t* c, int64_t ldc);
void replay(int64_t m, const int16_t* a, int64_t lda, PackedView b, int32_t* c, int64_t ldc);
}  // namespace amx

// kern::quantize_int8 widened for the GEMM's rows.
inline int16_t quantize(float x, float scale) {
  return static_cast<int16_t>(kern::quantize_int8(x, scale));
}

}  // namespace sinter::cpu::int8

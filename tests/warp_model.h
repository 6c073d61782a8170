// A host model of one warp for the tensor-core code of kernels/mma_tile.h.
//
// Note [host warp model]
// The kernels' warp-level functions are written over an instruction set (mma_tile.h). Here the
// same functions run on the host: HostWarp::run starts 32 threads, one per lane, each calling the
// function as that lane would. Every warp-collective instruction is a rendezvous: each lane leaves
// its operands (an ldmatrix row address, its mma fragments), all lanes wait at a barrier, then
// each lane takes its result from all lanes' operands as the PTX ISA defines the instruction (the
// fragment layouts of mma.sync.m16n8k16 and m16n8k8 and of ldmatrix, "Warp-level matrix
// instructions" in the PTX ISA). Products are summed in double and rounded once to f32: the tests
// use small integers, whose sums are exact in any order, so the model and the tensor cores agree
// exactly there. A test then compares the accumulators the
// kernel code assembles with a naive product: what it checks is the kernels' own index math (which
// lane gives which address, which register feeds which fragment, where each accumulator lands).
#pragma once

#include <barrier>
#include <cstdint>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#include "sinter/core/dtype.h"

namespace sinter::testing {

class HostWarp {
 public:
  static constexpr int kLanes = 32;

  // Runs body(lane) for the 32 lanes of one warp, each on a thread of its own.
  template <class Body>
  static void run(Body body) {
    HostWarp warp;
    std::vector<std::thread> lanes;
    for (int lane = 0; lane < kLanes; ++lane) {
      lanes.emplace_back([&warp, &body, lane] {
        current() = &warp;
        lane_id() = lane;
        body(lane);
      });
    }
    for (std::thread& t : lanes) t.join();
  }

  static HostWarp*& current() {
    thread_local HostWarp* w = nullptr;
    return w;
  }
  static int& lane_id() {
    thread_local int lane = 0;
    return lane;
  }

  // The operands of one collective, in two sets that alternate: a lane writes set s of its n-th
  // collective (s = n % 2) only after every lane passed the barrier of collective n - 1, so after
  // all had read set s at collective n - 2. One barrier a collective thus suffices.
  struct Operands {
    const void* addr[kLanes] = {};
    uint32_t a[kLanes][4] = {};
    uint32_t b[kLanes][2] = {};
  };
  // This lane's operand set for its next collective (a lane thread serves one warp only).
  Operands& next_operands() {
    thread_local uint64_t n = 0;
    return sets[n++ % 2];
  }

  std::barrier<> barrier{kLanes};
  Operands sets[2];
};

// The instructions of mma_tile.h on the host warp, as the PTX ISA defines them.
struct HostIsa {
  // Lane l receives in r[q] row l / 4, columns 2 (l % 4) and +1 of 8x8 matrix q, whose row i the
  // lane 8 q + i addressed (low half: the lower column).
  static void ldmatrix_x4(uint32_t (&r)[4], const void* p) { ldmatrix(r, p, false); }
  // The same of each matrix transposed: r[q] holds rows 2 (l % 4) and +1 of column l / 4.
  static void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) { ldmatrix(r, p, true); }

  // d += A (16x16) B (16x8), with g = l / 4, t = l % 4: a[0] = A[g][2t, 2t+1], a[1] = A[g+8][..],
  // a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8..]; b[0] = B[2t, 2t+1][g], b[1] = B[2t+8..][g];
  // d[e] = D[g + 8 (e / 2)][2t + e % 2].
  template <typename T>
  static void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    static_assert(std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>);
    mma<16>(d, a, b, [](uint32_t word, int half) {
      const uint16_t bits = static_cast<uint16_t>(word >> (16 * half));
      if constexpr (std::is_same_v<T, BFloat16>) {
        BFloat16 v;
        v.bits = bits;
        return static_cast<double>(static_cast<float>(v));
      } else {
        Half v;
        v.bits = bits;
        return static_cast<double>(static_cast<float>(v));
      }
    });
  }

  // d += A (16x8) B (8x8) on TF32 words: a[0] = A[g][t], a[1] = A[g+8][t], a[2] = A[g][t+4],
  // a[3] = A[g+8][t+4]; b[0] = B[t][g], b[1] = B[t+4][g]; d as for m16n8k16.
  static void mma_tf32_1688(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    mma<8>(d, a, b, [](uint32_t word, int) {
      float f;
      std::memcpy(&f, &word, 4);
      return static_cast<double>(f);
    });
  }

  // Two floats as T (BFloat16 or Half, rounded to nearest even) in one word, lo in the low half:
  // cvt.rn.bf16x2.f32 / cvt.rn.f16x2.f32.
  template <typename T>
  static uint32_t pack2(float lo, float hi) {
    static_assert(std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>);
    return static_cast<uint32_t>(T(lo).bits) | (static_cast<uint32_t>(T(hi).bits) << 16);
  }

  // cvt.rna.tf32.f32: 10 mantissa bits, to nearest with ties away from zero.
  static uint32_t to_tf32(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return u;  // inf and NaN as they are
    return (u + 0x1000u) & 0xffffe000u;
  }

 private:
  static void ldmatrix(uint32_t (&r)[4], const void* p, bool trans) {
    HostWarp& w = *HostWarp::current();
    const int lane = HostWarp::lane_id();
    HostWarp::Operands& o = w.next_operands();
    o.addr[lane] = p;
    w.barrier.arrive_and_wait();
    const int g = lane / 4, t = lane % 4;
    for (int q = 0; q < 4; ++q) {
      uint32_t word = 0;
      for (int h = 0; h < 2; ++h) {
        // Element (g, 2t + h) of matrix q, or of its transpose: (2t + h, g) of matrix q.
        const int row = trans ? 2 * t + h : g, col = trans ? g : 2 * t + h;
        const auto* row_ptr = static_cast<const uint16_t*>(o.addr[8 * q + row]);
        word |= static_cast<uint32_t>(row_ptr[col]) << (16 * h);
      }
      r[q] = word;
    }
  }

  // The m16n8kK product for K = 16 (two halves a word) or 8 (a word each).
  template <int K, class Value>
  static void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], Value value) {
    HostWarp& w = *HostWarp::current();
    const int lane = HostWarp::lane_id();
    HostWarp::Operands& o = w.next_operands();
    std::memcpy(o.a[lane], a, sizeof(o.a[lane]));
    std::memcpy(o.b[lane], b, sizeof(o.b[lane]));
    w.barrier.arrive_and_wait();
    constexpr int kPerWord = K == 16 ? 2 : 1;  // elements a register holds along k
    constexpr int kHalfK = K / 2;              // the k of registers 2, 3 (A) and 1 (B) start here
    // A[row][k] and B[k][col] from the lane and register that hold them.
    auto a_at = [&](int row, int k) {
      const int reg = (row >= 8 ? 1 : 0) + (k >= kHalfK ? 2 : 0);
      const int kk = k % kHalfK;
      return value(o.a[(row % 8) * 4 + kk / kPerWord][reg], kk % kPerWord);
    };
    auto b_at = [&](int k, int col) {
      const int kk = k % kHalfK;
      return value(o.b[col * 4 + kk / kPerWord][k >= kHalfK ? 1 : 0], kk % kPerWord);
    };
    const int g = lane / 4, t = lane % 4;
    float out[4];
    for (int e = 0; e < 4; ++e) {
      const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
      double sum = d[e];
      for (int k = 0; k < K; ++k) sum += a_at(row, k) * b_at(k, col);
      out[e] = static_cast<float>(sum);
    }
    std::memcpy(d, out, sizeof(out));
  }
};

}  // namespace sinter::testing

// The written-out FP8 arithmetic the FP8 tests hold Sinter to (Notes [fp8 scaling], [fp8 gemm]):
// matrices as vectors of floats, the quantization per tile and the GEMM per K block, each
// operation rounded to f32 as the Notes write it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sinter/ops.h"

namespace sinter::testing::fp8_ref {

// A written-out matrix: rows x cols values, row-major.
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<float> v;
  float at(int64_t r, int64_t c) const { return v[static_cast<size_t>(r * cols + c)]; }
};

inline Mat mat_of(const Tensor& t) {
  return {t.size(0), t.size(1), t.to(DType::f32).contiguous().to_vector<float>()};
}

inline Mat transpose(const Mat& m) {
  Mat t{m.cols, m.rows, std::vector<float>(m.v.size())};
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) t.v[static_cast<size_t>(c * m.rows + r)] = m.at(r, c);
  }
  return t;
}

// Rounds through a volatile, so that no multiply-add is fused: each operation rounds to f32.
inline float f32(float x) {
  volatile float v = x;
  return v;
}

// The written-out quantization: the values of the codes (as floats) and a scale_inv per tile.
struct RefQ {
  Mat q;  // code values
  std::vector<float> inv;
  int64_t tr = 0, tc = 0, nbc = 0;
  float inv_at(int64_t r, int64_t kblock) const {
    return inv[static_cast<size_t>((r / tr) * nbc + kblock)];
  }
};

inline float fmax_of(DType f) { return f == DType::f8e4m3 ? 448.0f : 57344.0f; }

inline float code_value(DType f, float x) {
  return f == DType::f8e4m3 ? static_cast<float>(Float8E4M3::saturated(x))
                            : static_cast<float>(Float8E5M2::saturated(x));
}

// scale = max / amax (f32), 1 for amax 0; `fixed` replaces every tile's scale.
inline RefQ ref_quantize(const Mat& x, DType f, int64_t tr, int64_t tc, float fixed = 0.0f) {
  tr = std::min(tr, x.rows);
  tc = std::min(tc, x.cols);
  RefQ out{Mat{x.rows, x.cols, std::vector<float>(x.v.size())}, {}, tr, tc, (x.cols + tc - 1) / tc};
  const int64_t nbr = (x.rows + tr - 1) / tr;
  for (int64_t br = 0; br < nbr; ++br) {
    for (int64_t bc = 0; bc < out.nbc; ++bc) {
      float amax = 0.0f;
      for (int64_t r = br * tr; r < std::min(x.rows, (br + 1) * tr); ++r) {
        for (int64_t c = bc * tc; c < std::min(x.cols, (bc + 1) * tc); ++c) {
          amax = std::max(amax, std::fabs(x.at(r, c)));
        }
      }
      const float s = fixed != 0.0f ? fixed : amax > 0.0f ? f32(fmax_of(f) / amax) : 1.0f;
      out.inv.push_back(f32(1.0f / s));
      for (int64_t r = br * tr; r < std::min(x.rows, (br + 1) * tr); ++r) {
        for (int64_t c = bc * tc; c < std::min(x.cols, (bc + 1) * tc); ++c) {
          out.q.v[static_cast<size_t>(r * x.cols + c)] = code_value(f, f32(x.at(r, c) * s));
        }
      }
    }
  }
  return out;
}

// Note [fp8 gemm], written out: per K block the f64 sum of products in k order, rounded to f32,
// times the two scale_invs' f32 product, added in f32.
inline Mat ref_gemm(const RefQ& a, const RefQ& b) {
  const int64_t m = a.q.rows, n = b.q.rows, k = a.q.cols, kb = a.tc;
  Mat out{m, n, std::vector<float>(static_cast<size_t>(m * n), 0.0f)};
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t blk = 0; blk * kb < k; ++blk) {
        double sum = 0.0;
        for (int64_t t = blk * kb; t < std::min(k, (blk + 1) * kb); ++t) {
          sum += static_cast<double>(a.q.at(i, t)) * static_cast<double>(b.q.at(j, t));
        }
        const float s = f32(a.inv_at(i, blk) * b.inv_at(j, blk));
        acc = f32(acc + f32(static_cast<float>(sum) * s));
      }
      out.v[static_cast<size_t>(i * n + j)] = acc;
    }
  }
  return out;
}

inline void expect_equal(const Tensor& got, const Mat& want, const char* what) {
  const Mat g = mat_of(got);
  ASSERT_EQ(g.rows, want.rows) << what;
  ASSERT_EQ(g.cols, want.cols) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < g.v.size(); ++i) {
    if (g.v[i] != want.v[i] && ++bad <= 3) {
      ADD_FAILURE() << what << "[" << i << "]: " << g.v[i] << " vs " << want.v[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

// The raw bytes of FP8 codes (a comparison of values would not see the signs of zeros and NaNs).
inline std::vector<uint8_t> code_bytes(const Tensor& codes) {
  const Tensor c = codes.to(Device::cpu()).contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p, p + c.numel());
}

// Values over several orders of magnitude, as activations and gradients are.
inline Tensor spread(const Shape& shape) { return mul(randn(shape), exp(mul(randn(shape), 1.5))); }

}  // namespace sinter::testing::fp8_ref

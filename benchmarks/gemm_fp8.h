// bench_gemm's FP8 rows (included by benchmarks/gemm.cpp): the Hopper FP8 GEMM (Note [fp8 wgmma],
// cudak::fp8_gemm) against cuBLASLt's FP8 matmul on the same codes and per-tensor scales (e4m3 x
// e4m3, and e5m2 x e4m3 as the gradients' GEMMs take them); the block recipe's rows (1 x 128 and
// 128 x 128 scales) against cuBLASLt's per-tensor matmul of the same size, the price of the
// per-block promotion. Every row first checks sampled entries of its product against Note [fp8
// gemm]'s formula computed on the host, and the per-tensor rows the whole product against
// cuBLASLt's.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "kern/fp8.h"
#include "sinter/fp8.h"

#ifdef SINTER_WITH_CUDA
#include <cublasLt.h>
#endif

namespace fp8_rows {

using namespace sinter;

struct Fp8Case {
  const char* tag;
  int64_t m, k, n;
  bool block;    // the block recipe's scales, else one per tensor
  DType a_type;  // f8e4m3, or f8e5m2 (an output gradient)
};

const Fp8Case kFp8Cases[] = {
    {"square", 1024, 1024, 1024, false, DType::f8e4m3},
    {"square", 4096, 4096, 4096, false, DType::f8e4m3},
    {"square", 8192, 8192, 8192, false, DType::f8e4m3},
    {"square_grad", 4096, 4096, 4096, false, DType::f8e5m2},
    {"square_block", 4096, 4096, 4096, true, DType::f8e4m3},
    {"square_block", 8192, 8192, 8192, true, DType::f8e4m3},
    // gpt-mini's MLP (8192 tokens, width 384 -> 1536) forward, and its input gradient (e5m2 dy)
    {"gpt_mlp_up_fwd", 8192, 384, 1536, false, DType::f8e4m3},
    {"gpt_mlp_up_dx", 8192, 1536, 384, false, DType::f8e5m2},
    {"gpt_mlp_up_fwd_block", 8192, 384, 1536, true, DType::f8e4m3},
};

std::string fp8_case_name(const Fp8Case& c) {
  return std::string("gemm/fp8/") + (c.a_type == DType::f8e5m2 ? "e5m2xe4m3/" : "e4m3xe4m3/") +
         (c.block ? "block/" : "tensor/") + c.tag + "_m" + std::to_string(c.m) + "_k" +
         std::to_string(c.k) + "_n" + std::to_string(c.n);
}

// The operands of a case, quantized on the host as the recipe does: a (m, k) in 1 x 128 tiles or
// whole, b (n, k) in 128 x 128 blocks or whole.
struct Operands {
  fp8::Quantized a, b;
};
Operands make_operands(const Fp8Case& c, uint64_t seed) {
  manual_seed(seed);
  const Tensor a = randn({c.m, c.k}), b = randn({c.n, c.k});
  return {c.block ? fp8::quantize(a, c.a_type, 1, 128) : fp8::quantize(a, c.a_type, c.m, c.k),
          c.block ? fp8::quantize(b, DType::f8e4m3, 128, 128)
                  : fp8::quantize(b, DType::f8e4m3, c.n, c.k)};
}

// Entry (i, j) of Note [fp8 gemm]'s product, from the host copies of the codes (as f32 values,
// row-major) and the scales.
float product_at(const std::vector<float>& qa, const std::vector<float>& sa,
                 const fp8::Quantized& a, const std::vector<float>& qb,
                 const std::vector<float>& sb, const fp8::Quantized& b, int64_t k, int64_t i,
                 int64_t j) {
  const int64_t kb = std::min(a.tile_cols, k), cols = (k + kb - 1) / kb;
  float acc = 0.0f;
  for (int64_t blk = 0; blk < cols; ++blk) {
    double sum = 0.0;
    for (int64_t t = blk * kb; t < std::min(k, (blk + 1) * kb); ++t) {
      sum += double(qa[size_t(i * k + t)]) * double(qb[size_t(j * k + t)]);
    }
    const float s =
        sa[size_t((i / a.tile_rows) * cols + blk)] * sb[size_t((j / b.tile_rows) * cols + blk)];
    acc += static_cast<float>(sum) * s;
  }
  return acc;
}

// The largest difference of `got` (row-major m x n, f32) from the formula at 256 sampled entries,
// over the largest |entry| sampled; "" when under tol.
std::string check_sampled(const Operands& o, int64_t m, int64_t n, int64_t k,
                          const std::vector<float>& got, double tol) {
  const std::vector<float> qa = o.a.data.to(DType::f32).to_vector<float>();
  const std::vector<float> qb = o.b.data.to(DType::f32).to_vector<float>();
  const std::vector<float> sa = o.a.scale_inv.to_vector<float>();
  const std::vector<float> sb = o.b.scale_inv.to_vector<float>();
  std::mt19937_64 rng(7);
  double worst = 0, largest = 0;
  for (int s = 0; s < 256; ++s) {
    const int64_t i = int64_t(rng() % uint64_t(m)), j = int64_t(rng() % uint64_t(n));
    const float want = product_at(qa, sa, o.a, qb, sb, o.b, k, i, j);
    worst = std::max(worst, std::fabs(double(got[size_t(i * n + j)]) - want));
    largest = std::max(largest, std::fabs(double(want)));
  }
  if (worst <= tol * std::max(largest, 1e-30)) return "";
  return "sampled entries differ by " + std::to_string(worst) + " (largest " +
         std::to_string(largest) + ")";
}

#ifdef SINTER_WITH_CUDA

#define SINTER_CUBLASLT_CHECK(expr) \
  SINTER_BENCH_STATUS_CHECK("cuBLASLt", expr, #expr, CUBLAS_STATUS_SUCCESS, cublasGetStatusName)

// cuBLASLt's FP8 matmul of row-major out (m, n) = a (m, k) b (n, k)^T with per-tensor scales:
// column-major out^T (n, m) = b (k x n column-major, transposed) times a (k x m column-major), the
// "TN" layout its FP8 kernels take; the scales multiply the product as ours do.
class LtFp8 {
 public:
  LtFp8(const fp8::Quantized& a, const fp8::Quantized& b, Tensor& out, cudaStream_t stream)
      : stream_(stream), m_(a.data.size(0)), n_(b.data.size(0)), k_(a.data.size(1)) {
    SINTER_CUBLASLT_CHECK(cublasLtCreate(&handle_));
    SINTER_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
    SINTER_CUBLASLT_CHECK(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    SINTER_CUBLASLT_CHECK(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt)));
    const void* sb = b.scale_inv.data_ptr();  // the first operand is b
    const void* sa = a.scale_inv.data_ptr();
    SINTER_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(
        desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sb, sizeof(sb)));
    SINTER_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(
        desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof(sa)));
    const auto type = [](DType d) { return d == DType::f8e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; };
    SINTER_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&la_, type(b.data.dtype()), k_, n_, k_));
    SINTER_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&lb_, type(a.data.dtype()), k_, m_, k_));
    SINTER_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&lc_, CUDA_R_32F, n_, m_, n_));
    SINTER_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref_));
    workspace_ = empty({kWorkspace}, {.dtype = DType::u8, .device = out.device()});
    const size_t ws = kWorkspace;
    SINTER_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    int found = 0;
    SINTER_CUBLASLT_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, desc_, la_, lb_, lc_, lc_, pref_,
                                                         1, &heuristic_, &found));
    SINTER_CHECK(found > 0, "cuBLASLt has no FP8 algorithm for ", m_, " x ", n_, " x ", k_);
    a_ = a.data.data_ptr();
    b_ = b.data.data_ptr();
    out_ = out.data_ptr();
  }
  ~LtFp8() {
    cublasLtMatmulPreferenceDestroy(pref_);
    cublasLtMatrixLayoutDestroy(la_);
    cublasLtMatrixLayoutDestroy(lb_);
    cublasLtMatrixLayoutDestroy(lc_);
    cublasLtMatmulDescDestroy(desc_);
    cublasLtDestroy(handle_);
  }
  LtFp8(const LtFp8&) = delete;
  LtFp8& operator=(const LtFp8&) = delete;

  void run() const {
    const float alpha = 1.0f, beta = 0.0f;
    SINTER_CUBLASLT_CHECK(cublasLtMatmul(handle_, desc_, &alpha, b_, la_, a_, lb_, &beta, out_, lc_,
                                         out_, lc_, &heuristic_.algo, workspace_.data_ptr(),
                                         kWorkspace, stream_));
  }

 private:
  static constexpr int64_t kWorkspace = int64_t{32} << 20;
  cudaStream_t stream_;
  int64_t m_, n_, k_;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
  Tensor workspace_;
  const void* a_ = nullptr;
  const void* b_ = nullptr;
  void* out_ = nullptr;
};

fp8::Quantized on_device(const fp8::Quantized& q, Device dev) {
  return {q.data.to(dev), q.scale_inv.to(dev), q.tile_rows, q.tile_cols};
}

void run_fp8(benchmark::State& state, const Fp8Case& c) {
  const Device dev = Device::cuda(0);
  const cuda::Stream stream = cuda::current_stream();
  const kern::Ctx ctx{.device = 0, .stream = stream.handle()};
  const Operands host = make_operands(c, 0);
  const fp8::Quantized a = on_device(host.a, dev), b = on_device(host.b, dev);
  // Poisoned, so that a call that wrote nothing cannot pass.
  Tensor out = full({c.m, c.n}, std::nan(""), {.device = dev});
  const kern::Fp8GemmArgs args{.a = a.data.data_ptr(),
                               .b = b.data.data_ptr(),
                               .a_type = c.a_type,
                               .b_type = DType::f8e4m3,
                               .m = c.m,
                               .n = c.n,
                               .k = c.k,
                               .a_scale_inv = static_cast<const float*>(a.scale_inv.data_ptr()),
                               .b_scale_inv = static_cast<const float*>(b.scale_inv.data_ptr()),
                               .a_tile_rows = a.tile_rows,
                               .b_tile_rows = b.tile_rows,
                               .scale_cols = a.scale_inv.size(1),
                               .out = out.data_ptr(),
                               .out_type = DType::f32};
  try {
    cudak::fp8_gemm(ctx, args);
  } catch (const Error& e) {  // not a Hopper GPU, or a build without sm_90a
    SINTER_CUDA_CHECK(cudaStreamSynchronize(stream.handle()));
    bench::skip(state, std::string("the FP8 GEMM refuses: ") + e.what());
    return;
  }
  if (bench::failed(state, "differs from the formula: ",
                    check_sampled(host, c.m, c.n, c.k, out.to_vector<float>(), 1e-3))) {
    return;
  }
  // cuBLASLt on the same codes with one scale per tensor (for the block rows: their own codes
  // with unit scales, the same amount of work).
  const fp8::Quantized ta =
      c.block ? fp8::Quantized{a.data, ones({1, 1}, {.device = dev}), c.m, c.k} : a;
  const fp8::Quantized tb =
      c.block ? fp8::Quantized{b.data, ones({1, 1}, {.device = dev}), c.n, c.k} : b;
  Tensor ref = full({c.m, c.n}, std::nan(""), {.device = dev});
  const LtFp8 lt(ta, tb, ref, stream.handle());
  lt.run();
  if (!c.block) {  // the same sums in another order: within 1e-3 of the product's largest entry
    const std::vector<float> want = ref.to_vector<float>();
    const double atol = 1e-3 * bench::max_abs(want);
    if (bench::failed(state, "differs from cuBLASLt: ",
                      bench::compare(out.to_vector<float>(), want, atol, 1e-3))) {
      return;
    }
  }
  bench::time_flops_against(
      state, "cuBLASLt", 2.0 * double(c.m) * double(c.n) * double(c.k), 10.0,
      [&](int) { cudak::fp8_gemm(ctx, args); }, [&](int) { lt.run(); });
}

#undef SINTER_CUBLASLT_CHECK

#endif  // SINTER_WITH_CUDA

void register_fp8() {
  for (const Fp8Case& c : kFp8Cases) {
    auto body = [=]([[maybe_unused]] benchmark::State& state) {
#ifdef SINTER_WITH_CUDA
      run_fp8(state, c);
#endif
    };
    bench::register_device(fp8_case_name(c), 5, benchmark::kMillisecond, body);
  }
}

// --smoke: the host formula the rows check against equals fp8::gemm (the CPU's) on small
// problems of each kind.
void smoke_fp8() {
  bench::smoke_guarded("gemm/fp8/formula", [] {
    for (const Fp8Case& c : {Fp8Case{"t", 40, 272, 24, false, DType::f8e4m3},
                             Fp8Case{"b", 130, 300, 140, true, DType::f8e5m2}}) {
      const Operands o = make_operands(c, 1);
      const std::vector<float> got = fp8::gemm(o.a, o.b, DType::f32).to_vector<float>();
      const std::string bad = check_sampled(o, c.m, c.n, c.k, got, 1e-6);
      if (!bad.empty()) return std::string(c.tag) + ": " + bad;
    }
    std::printf("smoke: %zu fp8 gemm cases registered on a device run\n", std::size(kFp8Cases));
    return std::string();
  });
}

}  // namespace fp8_rows

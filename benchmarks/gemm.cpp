// GEMM throughput: sinter::matmul on CUDA against cuBLAS on the same operands in the same run, f32
// and bf16, row-major, no transposes. Each case first checks our product against cuBLAS's.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"

#ifdef SINTER_WITH_CUDA
#include <cublas_v2.h>
#endif

namespace {

using namespace sinter;

// c (m, n) = a (m, k) @ b (k, n)
struct GemmShape {
  int64_t m, k, n;
};

constexpr GemmShape kShapes[] = {
    {1024, 1024, 1024},
    {2048, 2048, 2048},
    {4096, 4096, 4096},
    {8192, 768, 3072},  // a transformer MLP's up-projection: 8192 tokens, d_model 768, 4x wider
};

#ifdef SINTER_WITH_CUDA

#define SINTER_CUBLAS_CHECK(expr)                                                                 \
  do {                                                                                            \
    const cublasStatus_t sinter_cublas_status_ = (expr);                                          \
    if (sinter_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                         \
      SINTER_THROW("cuBLAS error ", cublasGetStatusName(sinter_cublas_status_), " from ", #expr); \
    }                                                                                             \
  } while (0)

class CublasHandle {
 public:
  explicit CublasHandle(const cuda::Stream& stream) {
    SINTER_CUBLAS_CHECK(cublasCreate(&handle_));
    SINTER_CUBLAS_CHECK(cublasSetStream(handle_, stream.handle()));
    // Full f32 arithmetic for Sgemm (no TF32), the same contract as matmul precision "highest".
    SINTER_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
  }
  ~CublasHandle() {
    const cublasStatus_t status = cublasDestroy(handle_);
    if (status != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "cublasDestroy: %s\n", cublasGetStatusName(status));
    }
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Row-major c = a @ b is column-major c^T (n, m) = b^T (n, k) @ a^T (k, m): the same buffers with
// the operands swapped, so cuBLAS reads exactly the layout matmul reads.
void cublas_matmul(const CublasHandle& h, const GemmShape& s, const Tensor& a, const Tensor& b,
                   const Tensor& c) {
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  const float alpha = 1.0f, beta = 0.0f;
  if (a.dtype() == DType::f32) {
    SINTER_CUBLAS_CHECK(cublasSgemm(h.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                                    b.data<float>(), n, a.data<float>(), k, &beta, c.data<float>(),
                                    n));
  } else {
    SINTER_CUBLAS_CHECK(cublasGemmEx(h.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                                     b.data_ptr(), CUDA_R_16BF, n, a.data_ptr(), CUDA_R_16BF, k,
                                     &beta, c.data_ptr(), CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
  }
}

// Tolerances relative to the rms of the product (about sqrt(k) for standard normal operands).
// f32: the two summation orders differ by a few units of f32 rounding times sqrt(k); 1e-4 leaves a
// wide margin while a lost k-tile (an error near 0.1 of the rms) still fails. bf16: both round an
// f32 sum to bf16, so they may differ by an ulp (up to 2^-7 relative); allow two.
struct Tolerance {
  double atol_per_rms, rtol;
};
Tolerance tolerance(DType dtype) {
  return dtype == DType::f32 ? Tolerance{1e-4, 1e-4} : Tolerance{1e-3, 1.0 / 64};
}

void run_gemm(benchmark::State& state, DType dtype, const GemmShape& s) {
  set_matmul_precision("highest");
  const Device dev = Device::cuda(0);
  const cuda::Stream stream = cuda::current_stream();
  manual_seed(0);
  const Tensor a = randn({s.m, s.k}, {.dtype = dtype, .device = dev});
  const Tensor b = randn({s.k, s.n}, {.dtype = dtype, .device = dev});
  // Poisoned, so that a cuBLAS call that wrote nothing cannot pass for a reference.
  const Tensor ref = full({s.m, s.n}, std::nan(""), {.dtype = dtype, .device = dev});
  CublasHandle handle(stream);

  // Validate before timing: a fast wrong kernel is a bug, not a result.
  cublas_matmul(handle, s, a, b, ref);
  const std::vector<float> want = ref.to_vector<float>();
  const std::vector<float> got = matmul(a, b).to_vector<float>();
  const Tolerance tol = tolerance(dtype);
  const std::string bad = bench::compare(got, want, tol.atol_per_rms * bench::rms(want), tol.rtol);
  if (!bad.empty()) {
    bench::fail(state, "matmul differs from cuBLAS: " + bad);
    return;
  }

  auto ours = [&](int) { (void)matmul(a, b); };
  auto theirs = [&](int) { cublas_matmul(handle, s, a, b, ref); };
  bench::time_ms(3, ours);  // warm-up: caching allocator, clocks, cuBLAS heuristics
  bench::time_ms(3, theirs);
  const int reps = bench::reps_for(bench::time_ms(3, ours), 20.0);

  // Ours and cuBLAS alternate in every iteration, so both see the same clocks and temperature.
  std::vector<double> ours_ms, theirs_ms;
  for (auto _ : state) {
    const double o = bench::time_ms(reps, ours);
    const double t = bench::time_ms(reps, theirs);
    ours_ms.push_back(o);
    theirs_ms.push_back(t);
    state.SetIterationTime(o * 1e-3);
  }
  const double flop = 2.0 * double(s.m) * double(s.n) * double(s.k);
  const double ours_med = bench::median(ours_ms), theirs_med = bench::median(theirs_ms);
  state.counters["TFLOP/s"] = flop / (ours_med * 1e-3) / 1e12;
  state.counters["cuBLAS_TFLOP/s"] = flop / (theirs_med * 1e-3) / 1e12;
  state.counters["vs_cuBLAS"] = theirs_med / ours_med;
}

#endif  // SINTER_WITH_CUDA

void bm_gemm(benchmark::State& state, DType dtype, GemmShape s) {
  if (bench::skip_without_cuda(state)) return;
#ifdef SINTER_WITH_CUDA
  bench::guarded(state, [&] { run_gemm(state, dtype, s); });
#else
  (void)dtype;
  (void)s;
#endif
}

void register_all() {
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const GemmShape& s : kShapes) {
      const std::string name = "gemm/" + std::string(dtype_name(dtype)) + "/m" +
                               std::to_string(s.m) + "_k" + std::to_string(s.k) + "_n" +
                               std::to_string(s.n);
      benchmark::RegisterBenchmark(name.c_str(), bm_gemm, dtype, s)
          ->Iterations(7)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  return sinter::bench::run_main(argc, argv);
}

// GEMM throughput: the CUDA GEMM kernels (sinter::cudak::gemm, Auto and each forced path) against
// cuBLAS with the matching math mode on the same operands in the same run, fp32, tf32 and bf16, on
// square problems and the GEMMs of the reference workloads; and the FP8 GEMM against cuBLASLt's
// (benchmarks/gemm_fp8.h). Each case first checks its product against cuBLAS's. `--smoke` checks
// the operand layouts, the cuBLAS mapping and the FP8 rows' formula on the CPU instead.
#include "kern/gemm.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "gemm_fp8.h"

#ifdef SINTER_WITH_CUDA
#include <cublas_v2.h>
#endif

namespace {

using namespace sinter;
using bench::Prec, bench::prec_dtype, bench::prec_name;
using kern::GemmPath;

// In GemmPath's order.
constexpr const char* kPathNames[] = {"auto", "simt", "mma_sync", "wgmma"};

const char* path_name(GemmPath p) { return bench::enum_name(p, kPathNames); }

// Auto, then each kernel family that can take the precision: SIMT for fp32, the tensor-core ones
// for tf32 and bf16.
std::vector<GemmPath> paths_for(Prec p) {
  if (p == Prec::F32) return {GemmPath::Auto, GemmPath::Simt};
  return {GemmPath::Auto, GemmPath::MmaSync, GemmPath::Wgmma};
}

// Row-major c (m, n) = op(a) (m, k) @ op(b) (k, n). ta: a is stored (k, m) and read transposed;
// tb: b is stored (n, k) and read transposed. A Linear layer y = x @ w^T with x (N, in), w (out,
// in) is NT (m = N, k = in, n = out); its input gradient dx = dy @ w is NN (m = N, k = out, n =
// in); its weight gradient dw = dy^T @ x is TN (m = out, k = N, n = in).
struct GemmCase {
  const char* tag;
  int64_t m, k, n;
  bool ta, tb;
};

// The three GEMMs of one Linear layer (in -> out) on a batch of `rows`.
// clang-format off
#define LINEAR_GEMMS(tag, rows, in, out)          \
  {tag "_fwd", rows, in, out, false, true},       \
  {tag "_dx", rows, out, in, false, false},       \
  {tag "_dw", out, rows, in, true, false}
// clang-format on

const GemmCase kCases[] = {
    {"square", 512, 512, 512, false, false},
    {"square", 1024, 1024, 1024, false, false},
    {"square", 2048, 2048, 2048, false, false},
    {"square", 4096, 4096, 4096, false, false},
    {"square", 8192, 8192, 8192, false, false},
    {"mlp_up", 8192, 768, 3072, false, false},  // a transformer MLP's up-projection, d_model 768
    // mlp, batch 256: Linear 784-1024, 1024-1024, 1024-10
    LINEAR_GEMMS("mlp_fc1", 256, 784, 1024),
    LINEAR_GEMMS("mlp_fc2", 256, 1024, 1024),
    LINEAR_GEMMS("mlp_fc3", 256, 1024, 10),
    // cnn, batch 256: Linear 3136-128, 128-10
    LINEAR_GEMMS("cnn_fc1", 256, 3136, 128),
    LINEAR_GEMMS("cnn_fc2", 256, 128, 10),
    // resnet20, batch 128: Linear 64-10
    LINEAR_GEMMS("resnet20_fc", 128, 64, 10),
    // gpt-mini, 32 x 256 = 8192 tokens, width 384: qkv, attention projection, MLP up and down, head
    LINEAR_GEMMS("gpt_qkv", 8192, 384, 1152),
    LINEAR_GEMMS("gpt_proj", 8192, 384, 384),
    LINEAR_GEMMS("gpt_mlp_up", 8192, 384, 1536),
    LINEAR_GEMMS("gpt_mlp_down", 8192, 1536, 384),
    LINEAR_GEMMS("gpt_head", 8192, 384, 256),
};
#undef LINEAR_GEMMS

std::string layout_name(const GemmCase& s) {
  return std::string(s.ta ? "T" : "N") + (s.tb ? "T" : "N");
}

std::string case_name(Prec p, GemmPath path, const GemmCase& s) {
  return "gemm/" + std::string(prec_name(p)) + "/" + path_name(path) + "/" + s.tag + "/" +
         layout_name(s) + "_m" + std::to_string(s.m) + "_k" + std::to_string(s.k) + "_n" +
         std::to_string(s.n);
}

// How a and b are stored, and their leading dims.
Shape a_shape(const GemmCase& s) { return s.ta ? Shape{s.k, s.m} : Shape{s.m, s.k}; }
Shape b_shape(const GemmCase& s) { return s.tb ? Shape{s.n, s.k} : Shape{s.k, s.n}; }
int64_t lda(const GemmCase& s) { return s.ta ? s.m : s.k; }
int64_t ldb(const GemmCase& s) { return s.tb ? s.k : s.n; }

kern::GemmArgs gemm_args(const GemmCase& s, Prec p, GemmPath path, const void* a, const void* b,
                         void* c) {
  return {.dtype = prec_dtype(p),
          .trans_a = s.ta,
          .trans_b = s.tb,
          .m = s.m,
          .n = s.n,
          .k = s.k,
          .a = a,
          .lda = lda(s),
          .b = b,
          .ldb = ldb(s),
          .c = c,
          .ldc = s.n,
          .allow_tf32 = p == Prec::TF32,
          .path = path};
}

// The same product as one column-major cuBLAS call: row-major c (m, n) is column-major c^T (n, m) =
// op(b)^T (n, k) @ op(a)^T (k, m), so b's buffer comes first. A row-major b stored (k, n) is, read
// column-major with ld n, b^T already (no transpose); stored (n, k) it is b itself, so transposed.
struct ColMajorCall {
  bool trans_first, trans_second;  // cuBLAS's transa, transb
  int64_t rows, cols, inner;       // cuBLAS's m, n, k
  int64_t ld_first, ld_second, ldc;
};

ColMajorCall cublas_layout(const GemmCase& s) {
  return {s.tb, s.ta, s.n, s.m, s.k, ldb(s), lda(s), s.n};
}

// Tolerances, relative to the rms of the product (about sqrt(k) for standard normal operands).
// fp32: two summation orders differ by a few f32 ulps times sqrt(k); 1e-4 leaves a wide margin
// while a lost k-tile (an error near sqrt(tile / k) of the rms, 0.09 for 64 of 8192) still fails.
// tf32: each product carries the rounding of its inputs to 10 mantissa bits (2^-11 relative), which
// two implementations may do differently (round or truncate): an error near 1e-3 of the rms, with
// tails; allow 1e-2. bf16: both round an f32 sum to bf16, so they may differ by an ulp (2^-7
// relative); allow two.
struct Tolerance {
  double atol_per_rms, rtol;
};
Tolerance tolerance(Prec p) {
  switch (p) {
    case Prec::F32:
      return {1e-4, 1e-4};
    case Prec::TF32:
      return {1e-2, 1e-2};
    case Prec::BF16:
      return {1e-3, 1.0 / 64};
  }
  return {0.0, 0.0};
}

std::string check_product(Prec p, const std::vector<float>& got, const std::vector<float>& want) {
  const Tolerance tol = tolerance(p);
  return bench::compare(got, want, tol.atol_per_rms * bench::rms(want), tol.rtol);
}

#ifdef SINTER_WITH_CUDA

#define SINTER_CUBLAS_CHECK(expr) \
  SINTER_BENCH_STATUS_CHECK("cuBLAS", expr, #expr, CUBLAS_STATUS_SUCCESS, cublasGetStatusName)

class CublasHandle {
 public:
  explicit CublasHandle(const cuda::Stream& stream) {
    SINTER_CUBLAS_CHECK(cublasCreate(&handle_));
    SINTER_CUBLAS_CHECK(cublasSetStream(handle_, stream.handle()));
    // TF32 only where the compute type asks for it (CUBLAS_COMPUTE_32F_FAST_TF32).
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

// cuBLAS with the matching math: fp32 CUBLAS_COMPUTE_32F (no TF32), tf32
// CUBLAS_COMPUTE_32F_FAST_TF32, bf16 operands and result with CUBLAS_COMPUTE_32F.
void cublas_gemm(const CublasHandle& h, const GemmCase& s, Prec p, const Tensor& a, const Tensor& b,
                 const Tensor& c) {
  const ColMajorCall call = cublas_layout(s);
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t type = p == Prec::BF16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      p == Prec::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  SINTER_CUBLAS_CHECK(cublasGemmEx(
      h.get(), call.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
      call.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, int(call.rows), int(call.cols),
      int(call.inner), &alpha, b.data_ptr(), type, int(call.ld_first), a.data_ptr(), type,
      int(call.ld_second), &beta, c.data_ptr(), type, int(call.ldc), compute, CUBLAS_GEMM_DEFAULT));
}

void run_gemm(benchmark::State& state, Prec p, GemmPath path, const GemmCase& s) {
  const Device dev = Device::cuda(0);
  const TensorOptions opts{.dtype = prec_dtype(p), .device = dev};
  const cuda::Stream stream = cuda::current_stream();
  const kern::Ctx ctx{.device = 0, .stream = stream.handle()};
  manual_seed(0);
  const Tensor a = randn(a_shape(s), opts);
  const Tensor b = randn(b_shape(s), opts);
  // Poisoned, so that a call that wrote nothing cannot pass, ours or the reference.
  const Tensor ref = full({s.m, s.n}, std::nan(""), opts);
  const Tensor c = full({s.m, s.n}, std::nan(""), opts);
  const kern::GemmArgs args = gemm_args(s, p, path, a.data_ptr(), b.data_ptr(), c.data_ptr());
  CublasHandle handle(stream);
  cublas_gemm(handle, s, p, a, b, ref);

  // A forced path that does not take this problem (alignment, dtype, a GPU without wgmma) refuses
  // it with a sinter::Error before launching: a skip, unless the device itself is in error.
  try {
    cudak::gemm(ctx, args);
  } catch (const Error& e) {
    if (path == GemmPath::Auto) throw;
    SINTER_CUDA_CHECK(cudaStreamSynchronize(stream.handle()));
    SINTER_CUDA_CHECK(cudaGetLastError());
    bench::skip(state, std::string(path_name(path)) + " refuses: " + e.what());
    return;
  }

  // Validate before timing: a fast wrong kernel is a bug, not a result.
  if (bench::failed(state, "differs from cuBLAS: ",
                    check_product(p, c.to_vector<float>(), ref.to_vector<float>()))) {
    return;
  }
  bench::time_flops_against(
      state, "cuBLAS", 2.0 * double(s.m) * double(s.n) * double(s.k), 10.0,
      [&](int) { cudak::gemm(ctx, args); }, [&](int) { cublas_gemm(handle, s, p, a, b, ref); });
}

#endif  // SINTER_WITH_CUDA

void register_all() {
  for (Prec p : {Prec::F32, Prec::TF32, Prec::BF16}) {
    for (const GemmCase& s : kCases) {
      for (GemmPath path : paths_for(p)) {
        auto body = [=]([[maybe_unused]] benchmark::State& state) {
#ifdef SINTER_WITH_CUDA
          run_gemm(state, p, path, s);
#endif
        };
        bench::register_device(case_name(p, path, s), 5, benchmark::kMillisecond, body);
      }
    }
  }
  fp8_rows::register_fp8();
}

// --- --smoke: the CPU side ---

// op(x)(i, p) of a row-major operand stored with leading dim ld, read transposed or not.
double row_major_at(const std::vector<float>& x, bool trans, int64_t ld, int64_t i, int64_t p) {
  return trans ? x[p * ld + i] : x[i * ld + p];
}

// The product in double, straight from the definition in GemmCase.
std::vector<float> reference_product(const GemmCase& s, const std::vector<float>& a,
                                     const std::vector<float>& b) {
  std::vector<float> c(s.m * s.n);
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < s.k; ++p) {
        acc += row_major_at(a, s.ta, lda(s), i, p) * row_major_at(b, s.tb, ldb(s), p, j);
      }
      c[i * s.n + j] = float(acc);
    }
  }
  return c;
}

// What cublas_gemm asks cuBLAS for, computed on the host the way cuBLAS defines it (column-major:
// element (r, c) of a matrix with leading dim ld at r + c * ld), written back row-major.
std::vector<float> column_major_product(const GemmCase& s, const std::vector<float>& a,
                                        const std::vector<float>& b) {
  const ColMajorCall call = cublas_layout(s);
  auto op = [](const std::vector<float>& x, bool trans, int64_t ld, int64_t r, int64_t c) {
    return double(trans ? x[c + r * ld] : x[r + c * ld]);
  };
  std::vector<float> out(call.ldc * call.cols);
  for (int64_t r = 0; r < call.rows; ++r) {
    for (int64_t c = 0; c < call.cols; ++c) {
      double acc = 0.0;
      for (int64_t p = 0; p < call.inner; ++p) {
        acc += op(b, call.trans_first, call.ld_first, r, p) *
               op(a, call.trans_second, call.ld_second, p, c);
      }
      out[r + c * call.ldc] = float(acc);
    }
  }
  return out;
}

// For each layout on a small odd-sized problem and each precision: the CPU GEMM kernel, called with
// the arguments the benchmark builds, and the host model of the cuBLAS call, against the product
// from the definition. bf16 operands are exact in f32, so only the result's rounding differs.
void smoke_layouts() {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const GemmCase s{"smoke", 13, 29, 7, ta, tb};
      for (Prec p : {Prec::F32, Prec::TF32, Prec::BF16}) {
        const std::string name = "gemm/" + std::string(prec_name(p)) + "/cpu/" + layout_name(s);
        bench::smoke_guarded(name, [&]() -> std::string {
          manual_seed(1);
          const Tensor a = randn(a_shape(s), {.dtype = prec_dtype(p)});
          const Tensor b = randn(b_shape(s), {.dtype = prec_dtype(p)});
          const Tensor c = full({s.m, s.n}, std::nan(""), {.dtype = prec_dtype(p)});
          const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
          const std::vector<float> want = reference_product(s, av, bv);
          for (GemmPath path : paths_for(p)) {
            cpu::gemm(kern::Ctx{}, gemm_args(s, p, path, a.data_ptr(), b.data_ptr(), c.data_ptr()));
            const std::string bad = check_product(p, c.to_vector<float>(), want);
            if (!bad.empty()) return std::string("cpu::gemm, ") + path_name(path) + ": " + bad;
          }
          const std::string bad = check_product(p, column_major_product(s, av, bv), want);
          return bad.empty() ? "" : "cuBLAS mapping: " + bad;
        });
      }
    }
  }
}

// Every registered case: a name that parses back, and operands whose shapes hold the problem.
void smoke_cases() {
  bench::smoke_guarded("gemm/cases", []() -> std::string {
    int count = 0;
    for (Prec p : {Prec::F32, Prec::TF32, Prec::BF16}) {
      for (const GemmCase& s : kCases) {
        for (GemmPath path : paths_for(p)) {
          ++count;
          const Shape as = a_shape(s), bs = b_shape(s);
          if (as[0] * as[1] != s.m * s.k || bs[0] * bs[1] != s.k * s.n || lda(s) != as[1] ||
              ldb(s) != bs[1]) {
            return "operand layout of " + case_name(p, path, s);
          }
        }
      }
    }
    std::printf("smoke: %d gemm cases registered on a device run\n", count);
    return "";
  });
}

void smoke() {
  smoke_layouts();
  smoke_cases();
  fp8_rows::smoke_fp8();
}

}  // namespace

int main(int argc, char** argv) {
  return sinter::bench::bench_main("bench_gemm", argc, argv, smoke, register_all);
}

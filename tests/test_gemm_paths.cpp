// Every GEMM kernel family (GemmArgs.path forces one) against the CPU reference: all four operand
// layouts, ragged edges, batches (one operand shared by the batch), the epilogue (beta, bias,
// pre-activation, ReLU/GELU), and the problems a family must refuse. Stored operands carry padding
// filled with NaN, so a kernel that reads past its rows or columns poisons the result.
#ifdef SINTER_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include <cmath>
#include <source_location>
#include <string>

#include "internal/dispatch.h"
#include "kern/gemm.h"
#include "test_util.h"

namespace sinter {
namespace {

using kern::GemmAct;
using kern::GemmArgs;
using kern::GemmPath;

struct Problem {
  int64_t m, n, k, batch = 1;
  bool trans_a = false, trans_b = false;
  bool shared_b = false;  // B has batch stride 0
  bool pad = true;        // ld rounded up to a multiple of 8 (16-byte rows for 16-bit types)
};

struct Epilogue {
  double alpha = 1, beta = 0;
  bool bias = false, pre_act = false;
  GemmAct act = GemmAct::None;
};

// A stored (batch, rows, ld) matrix whose columns past `cols` hold NaN; returns it and its ld.
Tensor stored(int64_t batch, int64_t rows, int64_t cols, bool pad, DType dt, Generator* g,
              int64_t* ld) {
  *ld = pad ? (cols + 7) / 8 * 8 : cols;
  Tensor t = full({batch, rows, *ld}, std::nan(""), {.dtype = dt});
  NoGradGuard ng;
  t.narrow(2, 0, cols).copy_(randn({batch, rows, cols}, {.dtype = dt}, g));
  return t;
}

std::string describe(GemmPath path, DType dt, bool tf32, const Problem& p, const Epilogue& e) {
  return std::string("path ") + std::to_string(static_cast<int>(path)) + " " + dtype_name(dt) +
         (tf32 ? "+tf32" : "") + " m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) +
         " k=" + std::to_string(p.k) + " batch=" + std::to_string(p.batch) +
         (p.trans_a ? " At" : "") + (p.trans_b ? " Bt" : "") + (p.shared_b ? " sharedB" : "") +
         (p.pad ? "" : " unpadded") + " beta=" + std::to_string(e.beta) + (e.bias ? " bias" : "") +
         (e.pre_act ? " pre_act" : "") + " act=" + std::to_string(static_cast<int>(e.act));
}

using GemmFn = void (*)(const kern::Ctx&, const GemmArgs&);
// Without CUDA the CPU kernel, never called: the tests skip first.
const GemmFn kCudaGemm = SINTER_TEST_KERNEL(true, gemm);

// Runs one problem on the CPU reference and on CUDA with `path` (through `cuda_gemm`), and compares
// C (and pre_act).
void check(GemmPath path, DType dt, bool tf32, const Problem& p, const Epilogue& e, Generator* g,
           GemmFn cuda_gemm = kCudaGemm) {
  const std::string what = describe(path, dt, tf32, p, e);
  GemmArgs args;
  args.dtype = dt;
  args.trans_a = p.trans_a;
  args.trans_b = p.trans_b;
  args.m = p.m;
  args.n = p.n;
  args.k = p.k;
  args.batch = p.batch;
  args.alpha = e.alpha;
  args.beta = e.beta;
  args.act = e.act;
  args.allow_tf32 = tf32;
  args.path = path;
  Tensor a = stored(p.batch, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, p.pad, dt, g, &args.lda);
  Tensor b = stored(p.shared_b ? 1 : p.batch, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, p.pad,
                    dt, g, &args.ldb);
  args.stride_a = a.size(1) * a.size(2);
  args.stride_b = p.shared_b ? 0 : b.size(1) * b.size(2);
  int64_t ldc = 0;
  Tensor c = stored(p.batch, p.m, p.n, p.pad, dt, g, &ldc);
  if (e.beta == 0) {
    NoGradGuard ng;
    c.fill_(std::nan(""));  // beta == 0 must not read C
  }
  args.ldc = ldc;
  args.stride_c = p.m * ldc;
  Tensor bias = randn({p.n}, {.dtype = dt}, g);
  Tensor pre = zeros({p.batch, p.m, ldc}, {.dtype = dt});

  auto run = [&](Device d) {
    Tensor ad = a.to(d), bd = b.to(d), cd = c.to(d).clone(), biasd = bias.to(d), pred = pre.to(d);
    GemmArgs x = args;
    x.a = ad.data_ptr();
    x.b = bd.data_ptr();
    x.c = cd.data_ptr();
    x.bias = e.bias ? biasd.data_ptr() : nullptr;
    x.pre_act = e.pre_act ? pred.data_ptr() : nullptr;
    if (d.is_cuda()) {
      testing::poison_cuda_cache();
      cuda_gemm(kernel_ctx(d), x);
    } else {
      cpu::gemm(kernel_ctx(d), x);
    }
    return std::make_pair(cd.narrow(2, 0, p.n).cpu(), pred.narrow(2, 0, p.n).cpu());
  };
  auto [want_c, want_pre] = run(Device::cpu());
  auto [got_c, got_pre] = run(Device::cuda());

  const double scale = std::sqrt(static_cast<double>(std::max<int64_t>(p.k, 1)));
  const double rtol = dt == DType::f64 ? 1e-10 : dt == DType::f32 ? (tf32 ? 5e-3 : 1e-5) : 1.5e-2;
  EXPECT_TRUE(testing::all_close(got_c, want_c, rtol * scale, rtol)) << what;
  if (e.pre_act) {
    EXPECT_TRUE(testing::all_close(got_pre, want_pre, rtol * scale, rtol)) << what;
  }
}

const std::vector<Problem>& shapes() {
  static const std::vector<Problem> all = {
      {1, 1, 1},      {17, 33, 45},    {64, 64, 64},   {128, 128, 128}, {130, 257, 96},
      {257, 130, 70}, {300, 520, 200}, {5, 700, 1000}, {1000, 3, 17},   {8, 200, 7},
  };
  return all;
}

// One epilogue per problem index, so that every kind is exercised without multiplying the runs.
Epilogue epilogue_for(size_t i) {
  switch (i % 5) {
    case 0:
      return {};
    case 1:
      return {.alpha = 0.5, .beta = 1.5};
    case 2:
      return {.bias = true, .act = GemmAct::Relu};
    case 3:
      return {.beta = -1, .bias = true, .pre_act = true, .act = GemmAct::Gelu};
    default:
      return {.alpha = 2, .bias = true, .pre_act = true, .act = GemmAct::GeluTanh};
  }
}

void sweep(GemmPath path, DType dt, bool tf32, bool only_nt = false) {
  Generator g(testing::fresh_seed());
  size_t i = 0;
  for (int layout = 0; layout < 4; ++layout) {
    const bool ta = layout & 1, tb = layout & 2;
    if (only_nt && (ta || !tb)) continue;
    for (Problem p : shapes()) {
      p.trans_a = ta;
      p.trans_b = tb;
      check(path, dt, tf32, p, epilogue_for(i++), &g);
    }
    // Batched, B shared by the batch, plus a batched ragged problem.
    check(path, dt, tf32, {70, 90, 40, 3, ta, tb, true}, epilogue_for(i++), &g);
    check(path, dt, tf32, {129, 65, 33, 2, ta, tb, false}, epilogue_for(i++), &g);
  }
}

// One row of C (a batch-1 Linear) runs as a matrix-vector product on the CPU: every layout, alpha
// and beta (0 never reads C, which holds NaN), strided rows of A, against the product in f64.
TEST(CpuGemm, OneRowMatchesTheProductInEveryLayout) {
  Generator g(testing::fresh_seed());
  const int64_t n = 37, k = 53, pad = 3;
  for (const DType dt : {DType::f32, DType::f64}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        for (const double beta : {0.0, 0.5}) {
          GemmArgs args;
          args.dtype = dt;
          args.trans_a = ta;
          args.trans_b = tb;
          args.m = 1;
          args.n = n;
          args.k = k;
          args.alpha = 2.0;
          args.beta = beta;
          // A: (1, k), or stored (k, 1) with a row stride of 1 + pad when transposed.
          const Tensor a =
              ta ? randn({k, 1 + pad}, {.dtype = dt}, &g) : randn({1, k}, {.dtype = dt}, &g);
          args.lda = ta ? 1 + pad : k;
          const Tensor b =
              tb ? randn({n, k + pad}, {.dtype = dt}, &g) : randn({k, n + pad}, {.dtype = dt}, &g);
          args.ldb = tb ? k + pad : n + pad;
          Tensor c = beta == 0 ? full({1, n}, std::nan(""), {.dtype = dt})
                               : randn({1, n}, {.dtype = dt}, &g);
          args.ldc = n;
          const Tensor c0 = c.clone();
          args.a = a.data_ptr();
          args.b = b.data_ptr();
          args.c = c.data_ptr();
          cpu::gemm(kernel_ctx(Device::cpu()), args);
          const std::vector<double> av = a.to(DType::f64).to_vector<double>(),
                                    bv = b.to(DType::f64).to_vector<double>(),
                                    cv = c0.to(DType::f64).to_vector<double>(),
                                    got = c.to(DType::f64).to_vector<double>();
          for (int64_t j = 0; j < n; ++j) {
            double want = 0;
            for (int64_t p = 0; p < k; ++p) {
              want += av[ta ? p * args.lda : p] * bv[tb ? j * args.ldb + p : p * args.ldb + j];
            }
            want = 2.0 * want + (beta == 0 ? 0.0 : beta * cv[j]);
            EXPECT_NEAR(got[j], want, dt == DType::f64 ? 1e-12 : 1e-4)
                << dt << " ta " << ta << " tb " << tb << " beta " << beta << " j " << j;
          }
        }
      }
    }
  }
}

struct Deep {
  int64_t m, n, k, chunks;
};

// Entries of C the deep product test checks: all of a small C; of a larger one the first and last
// three, every 97th and those around the block edge near 2064.
bool sampled(int64_t x, int64_t extent) {
  return extent <= 256 || x < 3 || x >= extent - 3 || x % 97 == 0 || (x >= 2040 && x < 2090);
}

// One deep product (Note [deep products]) of stored operands with NaN padding into a C with
// longer rows than its own, against the product in f64.
void check_deep(const Deep& d, bool ta, bool tb, Generator* g, DType dt = DType::f32) {
  SCOPED_TRACE(std::string(dtype_name(dt)) + " m " + std::to_string(d.m) + " n " +
               std::to_string(d.n) + " k " + std::to_string(d.k) + " ta " + std::to_string(ta) +
               " tb " + std::to_string(tb));
  GemmArgs args;
  args.dtype = dt;
  args.trans_a = ta;
  args.trans_b = tb;
  args.m = d.m;
  args.n = d.n;
  args.k = d.k;
  const Tensor a = stored(1, ta ? d.k : d.m, ta ? d.m : d.k, true, dt, g, &args.lda);
  const Tensor b = stored(1, tb ? d.n : d.k, tb ? d.k : d.n, true, dt, g, &args.ldb);
  args.ldc = d.n + 3;
  Tensor c = full({d.m, args.ldc}, std::nan(""), {.dtype = dt});
  args.a = a.data_ptr();
  args.b = b.data_ptr();
  args.c = c.data_ptr();
  ASSERT_EQ(cpu::gemm_depth_chunks(args), d.chunks);
  cpu::gemm(kernel_ctx(Device::cpu()), args);
  const std::vector<float> av = a.to(DType::f32).to_vector<float>(),
                           bv = b.to(DType::f32).to_vector<float>(),
                           got = c.to(DType::f32).to_vector<float>();
  // The f32 sums' rounding, then bf16's or f16's of the result.
  const double rounding = dt == DType::bf16 ? 0x1p-8 : dt == DType::f16 ? 0x1p-11 : 0.0;
  for (int64_t i = 0; i < d.m; ++i) {
    for (int64_t j = 0; j < args.ldc; ++j) {
      const float v = got[static_cast<size_t>(i * args.ldc + j)];
      if (j >= d.n) {
        ASSERT_TRUE(std::isnan(v)) << "C's padding written at " << i << ", " << j;
        continue;
      }
      if (!sampled(i, d.m) || !sampled(j, d.n)) continue;
      double want = 0, scale = 0;
      for (int64_t p = 0; p < d.k; ++p) {
        const double term =
            static_cast<double>(av[static_cast<size_t>(ta ? p * args.lda + i : i * args.lda + p)]) *
            bv[static_cast<size_t>(tb ? j * args.ldb + p : p * args.ldb + j)];
        want += term;
        scale += std::abs(term);
      }
      ASSERT_NEAR(v, want, 2e-6 * scale + rounding * std::abs(want)) << "at " << i << ", " << j;
    }
  }
}

// A product whose sums are much longer than C is wide or tall (a weight gradient) is cut along k
// too (Note [deep products]): f32, bf16 and f16, every layout, four, eight and sixteen runs of
// terms with a shorter last one, C long enough to be cut into blocks of rows and of columns, a C
// with longer rows than its own (their padding untouched), against the product in f64; which
// products are cut and into how many runs; and the same bits at every thread count.
TEST(CpuGemm, DeepProductsMatchTheProductInEveryLayout) {
  Generator g(testing::fresh_seed());
  for (const Deep d : {Deep{64, 48, 4109, 4}, Deep{40, 56, 16389, 8}}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) check_deep(d, ta, tb, &g);
    }
  }
  // bf16 and f16: each run in f32 on its parts widened, the sum rounded once.
  for (const DType dt : {DType::bf16, DType::f16}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) check_deep({64, 48, 4109, 4}, ta, tb, &g, dt);
    }
  }
  check_deep({16, 4100, 8200, 4}, false, true, &g);  // two blocks of columns
  check_deep({4100, 16, 8200, 4}, true, false, &g);  // two blocks of rows
  // bf16 (as f16) in runs of about 512 terms: 16 of them.
  check_deep({16, 4100, 8200, 16}, true, false, &g, DType::bf16);
  check_deep({4100, 16, 8200, 16}, false, true, &g, DType::bf16);
  const auto chunks = [](int64_t m, int64_t n, int64_t k, DType dt = DType::f32, double beta = 0,
                         bool bias = false) {
    GemmArgs args;
    args.dtype = dt;
    args.m = m;
    args.n = n;
    args.k = k;
    args.beta = beta;
    const float one = 1;
    args.bias = bias ? &one : nullptr;
    return cpu::gemm_depth_chunks(args);
  };
  EXPECT_EQ(chunks(64, 48, 24576), 12);
  EXPECT_EQ(chunks(64, 48, 40000), 16);
  EXPECT_EQ(chunks(1024, 1024, 8192), 4);
  EXPECT_EQ(chunks(2048, 2048, 16384), 0);  // its partial Cs would pass 16 MiB
  EXPECT_EQ(chunks(1024, 1024, 16384), 4);
  EXPECT_EQ(chunks(768, 768, 16384), 8);  // seven own Cs in f32, eight in bf16
  EXPECT_EQ(chunks(768, 768, 16384, DType::bf16), 4);
  EXPECT_EQ(chunks(16, 16, 8192), 0);  // too few multiply-adds a run
  EXPECT_EQ(chunks(64, 48, 4095), 0);
  EXPECT_EQ(chunks(3000, 64, 5000), 0);  // sums not twice as long as C is tall
  // bf16 and f16 in shorter runs, but not so short that a run is too small a piece of work.
  EXPECT_EQ(chunks(64, 48, 8192, DType::bf16), 8);
  EXPECT_EQ(chunks(64, 48, 8192, DType::f16), 8);
  EXPECT_EQ(chunks(256, 64, 8320, DType::bf16), 16);  // vit-tiny's MLP weight gradient
  EXPECT_EQ(chunks(256, 64, 8320), 4);
  EXPECT_EQ(chunks(32, 16, 40000), 8);  // 16 runs of 2500 would be too small, as would 12
  EXPECT_EQ(chunks(64, 48, 8192, DType::f64), 0);
  EXPECT_EQ(chunks(64, 48, 8192, DType::f32, 0.5), 0);
  EXPECT_EQ(chunks(64, 48, 8192, DType::f32, 0, true), 0);
  const Tensor at = randn({4109, 64}, {}, &g), b = randn({4109, 48}, {}, &g);
  const Tensor x = randn({8200, 40}, {}, &g), w = randn({56, 40}, {}, &g);
  const Tensor wide = rand({8200, 4100}, {}, &g);
  testing::expect_same_bits_at_every_thread_count([&] {
    Tensor cw = w.detach().requires_grad_();
    linear(x, cw).sum().backward();
    return std::vector<Tensor>{matmul(at.t(), b), matmul(b.t(), at), cw.grad(),
                               matmul(x.t(), wide)};
  });
}

TEST(CudaGemmPaths, SimtEveryDtypeAndLayout) {
  SINTER_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16})
    sweep(GemmPath::Simt, dt, false);
}

TEST(CudaGemmPaths, SimtLargeTilesWithRaggedEdges) {
  SINTER_REQUIRE_CUDA();
  // Enough 128 x 128 tiles to fill the GPU, so the large f32 kernel takes them; ragged m and n,
  // k not a multiple of the 8-deep k tile.
  Generator g(testing::fresh_seed());
  size_t i = 0;
  for (int layout = 0; layout < 4; ++layout) {
    check(GemmPath::Simt, DType::f32, false,
          {1537, 1539, 75, 1, bool(layout & 1), bool(layout & 2)}, epilogue_for(i++), &g);
  }
  check(GemmPath::Simt, DType::f32, false, {512, 512, 64, 40, false, true, true}, epilogue_for(3),
        &g);
}

TEST(CudaGemmPaths, MmaSyncEveryTensorCoreTypeAndLayout) {
  SINTER_REQUIRE_CUDA();
  if (cuda::get_device_properties(0).major < 8) GTEST_SKIP() << "mma.sync needs sm_80 or newer";
  sweep(GemmPath::MmaSync, DType::bf16, false);
  sweep(GemmPath::MmaSync, DType::f16, false);
  sweep(GemmPath::MmaSync, DType::f32, true);
}

TEST(CudaGemmPaths, MmaSyncLargeTilesFillTheGpu) {
  SINTER_REQUIRE_CUDA();
  if (cuda::get_device_properties(0).major < 8) GTEST_SKIP() << "mma.sync needs sm_80 or newer";
  // Enough 128 x 128 tiles for the large configuration, ragged in m and n.
  Generator g(testing::fresh_seed());
  size_t i = 0;
  for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
    for (int layout = 0; layout < 4; ++layout) {
      check(GemmPath::MmaSync, dt, dt == DType::f32,
            {2000, 1544, 72, 1, bool(layout & 1), bool(layout & 2)}, epilogue_for(i++), &g);
    }
  }
}

// Expects `path` (the `kernels` family) to refuse the problem, and its error to say `why`.
void expect_refused(GemmPath path, const std::string& kernels, DType dt, bool tf32,
                    const Problem& p, Generator* g, const std::string& why,
                    std::source_location where = std::source_location::current()) {
  testing::expect_error([&] { check(path, dt, tf32, p, {}, g); },
                        {"gemm: the " + kernels + " kernels cannot take this problem", why}, where);
}

TEST(CudaGemmPaths, MmaSyncRefusesWhatItCannotTake) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  expect_refused(GemmPath::MmaSync, "mma.sync", DType::f32, false, {64, 64, 64}, &g,
                 "allow_tf32 0");
  expect_refused(GemmPath::MmaSync, "mma.sync", DType::f16, false,
                 {64, 64, 63, 1, false, false, false, false}, &g, "k=63");
}

TEST(CudaGemmPaths, WgmmaHalfTypesEveryLayout) {
  SINTER_REQUIRE_CUDA();
  if (cuda::get_device_properties(0).major != 9) GTEST_SKIP() << "wgmma needs a Hopper GPU";
  sweep(GemmPath::Wgmma, DType::bf16, false);
  sweep(GemmPath::Wgmma, DType::f16, false);
}

TEST(CudaGemmPaths, WgmmaTf32KMajorOperands) {
  SINTER_REQUIRE_CUDA();
  if (cuda::get_device_properties(0).major != 9) GTEST_SKIP() << "wgmma needs a Hopper GPU";
  sweep(GemmPath::Wgmma, DType::f32, true, /*only_nt=*/true);
}

TEST(CudaGemmPaths, WgmmaLargeTilesFillTheGpu) {
  SINTER_REQUIRE_CUDA();
  if (cuda::get_device_properties(0).major != 9) GTEST_SKIP() << "wgmma needs a Hopper GPU";
  Generator g(testing::fresh_seed());
  // Enough tiles for the 128 x 256 configuration, many k blocks (the stage ring wraps), and a
  // persistent block that takes several tiles.
  check(GemmPath::Wgmma, DType::bf16, false, {2048, 2304, 1000, 1, false, true}, epilogue_for(2),
        &g);
  check(GemmPath::Wgmma, DType::bf16, false, {2049, 2050, 520, 1, true, false}, epilogue_for(3),
        &g);
  check(GemmPath::Wgmma, DType::f32, true, {2048, 2304, 300, 1, false, true}, epilogue_for(4), &g);
  // The 128 x 256 tiles in the other layouts and in f16 (the M- and N-major operand boxes), and
  // over a batch, with B of its own and shared: at least 132 tiles each, short k.
  check(GemmPath::Wgmma, DType::bf16, false, {2048, 2304, 72, 1, false, false}, epilogue_for(0),
        &g);
  check(GemmPath::Wgmma, DType::bf16, false, {2048, 2304, 72, 1, true, true}, epilogue_for(1), &g);
  check(GemmPath::Wgmma, DType::f16, false, {2049, 2050, 96, 1, false, true}, epilogue_for(2), &g);
  check(GemmPath::Wgmma, DType::f16, false, {2049, 2050, 96, 1, true, false}, epilogue_for(3), &g);
  check(GemmPath::Wgmma, DType::bf16, false, {1000, 1030, 64, 5, false, true}, epilogue_for(4), &g);
  check(GemmPath::Wgmma, DType::f16, false, {1000, 1030, 64, 5, false, false, true},
        epilogue_for(1), &g);
}

TEST(CudaGemmPaths, WgmmaRefusesWhatItCannotTake) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  // TF32 has no transpose flag; unpadded rows break TMA's 16-byte row alignment.
  expect_refused(GemmPath::Wgmma, "wgmma", DType::f32, true, {64, 64, 64}, &g, "allow_tf32 1");
  expect_refused(GemmPath::Wgmma, "wgmma", DType::bf16, false,
                 {64, 64, 63, 1, false, false, false, false}, &g, "k=63");
  expect_refused(GemmPath::Wgmma, "wgmma", DType::f64, false, {8, 8, 8}, &g, "dtype f64");
}

TEST(CudaGemmPaths, AutoFallsBackForUnalignedRows) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  size_t i = 0;
  for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
    for (bool tf32 : {false, true}) {
      if (tf32 && dt != DType::f32) continue;
      check(GemmPath::Auto, dt, tf32, {67, 45, 33, 2, false, false, false, false},
            epilogue_for(i++), &g);
      check(GemmPath::Auto, dt, tf32, {300, 200, 130, 1, true, false}, epilogue_for(i++), &g);
      check(GemmPath::Auto, dt, tf32, {256, 1024, 784, 1, false, true}, epilogue_for(i++), &g);
    }
  }
}

#ifdef SINTER_WITH_CUDA
// cudak::gemm on ctx's device, captured on a stream of its own in global mode (which forbids
// synchronizing calls in every thread of the process), then run as a graph.
void gemm_captured(const kern::Ctx& ctx, const GemmArgs& args) {
  cuda::synchronize(ctx.device);  // the operands were written on the current stream
  const cuda::Stream side = cuda::Stream::create(ctx.device);
  const auto stream = static_cast<cudaStream_t>(side.handle());
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_NO_THROW(cudak::gemm({ctx.device, side.handle()}, args));
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EXPECT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive) << "a call during capture invalidated it";
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  ASSERT_EQ(instantiated, cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
}

// Regression: the first GEMM on a device asked whether the sm_90a kernels run there by launching
// a probe on the legacy stream and copying a flag back, which invalidates a stream capture. CTest
// runs every test in a process of its own, so this GEMM is the device's first.
TEST(CudaGemmPaths, FirstGemmOfADeviceCanBeCaptured) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  check(GemmPath::Auto, DType::bf16, false, {256, 256, 128, 1, false, true}, epilogue_for(2), &g,
        gemm_captured);
}
#endif

}  // namespace
}  // namespace sinter

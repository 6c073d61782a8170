// CPU-vs-CUDA parity at sizes the op table's small shapes do not reach: multi-block reductions,
// split rows, GEMM tiles with ragged edges, vectorized elementwise paths with tails, every dtype,
// and each fast path of the memory-bound kernels with its edges.
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace sinter {
namespace {

const Device kGpu = Device::cuda();

Tensor on_gpu(const Tensor& t) { return t.to(kGpu); }

// atol and rtol are both `tol` unless rtol is given.
void expect_parity(const Tensor& gpu, const Tensor& cpu, double tol, const std::string& what,
                   double rtol = -1) {
  EXPECT_EQ(gpu.device(), kGpu) << what;
  EXPECT_TRUE(testing::all_close(gpu.cpu(), cpu, tol, rtol < 0 ? tol : rtol)) << what;
}

TEST(CudaSizes, ReductionsOverLongAndManyRows) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  for (Shape s :
       {Shape{1, 300001}, Shape{3, 70000}, Shape{1000, 300}, Shape{4099, 17}, Shape{5, 1}}) {
    const std::string name = shape_str(s);
    Tensor x = randn(s, {}, &g);
    Tensor xg = on_gpu(x);
    testing::poison_cuda_cache();
    const double n = static_cast<double>(s[1]);
    expect_parity(sum(xg, {1}), sum(x, {1}), 1e-6 * n, "sum " + name, 1e-5);
    expect_parity(sum(xg, {0}), sum(x, {0}), 1e-6 * static_cast<double>(s[0]), "sum dim 0 " + name,
                  1e-5);
    expect_parity(amax(xg, {1}), amax(x, {1}), 0, "amax " + name);
    auto [vg, ig] = min(xg, 1);
    auto [vc, ic] = min(x, 1);
    expect_parity(vg, vc, 0, "min values " + name);
    EXPECT_EQ(ig.cpu().to_vector<int64_t>(), ic.to_vector<int64_t>()) << "min indices " << name;
    Tensor xb = x.to(DType::bf16);
    expect_parity(sum(on_gpu(xb), {1}), sum(xb, {1}), 2e-2 * std::sqrt(n), "bf16 sum " + name,
                  2e-2);
  }
}

// Both cumsum kernels: a warp per dense row (chunk tails, several chunks, many rows over a
// grid-stride loop), a thread per strided line; forward, the reverse order of its backward, i64.
TEST(CudaSizes, CumsumRowsAndLines) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  for (auto [s, dim] : std::vector<std::pair<Shape, int64_t>>{{{1, 1}, 1},
                                                              {{3, 31}, 1},
                                                              {{5, 33}, 1},
                                                              {{2, 4097}, 1},
                                                              {{20000, 7}, 1},
                                                              {{9, 5, 3}, 1},
                                                              {{300, 2, 129}, 0}}) {
    const std::string name = shape_str(s) + " dim " + std::to_string(dim);
    Tensor x = randn(s, {.requires_grad = true}, &g);
    Tensor xg = on_gpu(x.detach());
    xg.requires_grad_();
    testing::poison_cuda_cache();
    const double n = static_cast<double>(s[static_cast<size_t>(dim)]);
    Tensor yc = cumsum(x, dim), yg = cumsum(xg, dim);
    expect_parity(yg, yc, 1e-6 * n, "cumsum " + name, 1e-5);
    Tensor w = randn(s, {}, &g);
    sum(mul(yc, w)).backward();
    sum(mul(yg, on_gpu(w))).backward();
    expect_parity(xg.grad(), x.grad(), 1e-6 * n, "cumsum backward " + name, 1e-5);
    Tensor xi = mul(x.detach(), 100.0).to(DType::i32);
    EXPECT_EQ(cumsum(on_gpu(xi), dim).cpu().to_vector<int64_t>(),
              cumsum(xi, dim).to_vector<int64_t>())
        << "i32 " << name;
  }
}

// prod over the reduce paths (warp groups, a block per row, split rows) and both cumprod kernels,
// on factors near 1 so that 300001 of them stay in range, with exact zeros in some rows: the
// masked gradient (Note [cumprod gradient]) and the zero-safe prod gradient on the device. i32
// products wrap in i64 as on the CPU.
TEST(CudaSizes, ProductsAndRunningProducts) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  for (auto [s, dim] : std::vector<std::pair<Shape, int64_t>>{{{1, 300001}, 1},
                                                              {{3, 70000}, 1},
                                                              {{1000, 300}, 1},
                                                              {{4099, 17}, 1},
                                                              {{5, 33}, 1},
                                                              {{2, 4097}, 1},
                                                              {{300, 2, 129}, 0}}) {
    const std::string name = shape_str(s) + " dim " + std::to_string(dim);
    Tensor x = add(mul(randn(s, {}, &g), 0.01), 1.0);
    {
      // Zeros: one in the first line, two in the second (when the scanned dim has room).
      NoGradGuard ng;
      const int64_t len = s[static_cast<size_t>(dim)];
      Tensor line = x.select(dim == 0 ? 1 : 0, 0);
      if (len > 3) line.narrow(0, len / 3, 1).zero_();
      if (x.size(dim == 0 ? 1 : 0) > 1 && len > 3) {
        Tensor second = x.select(dim == 0 ? 1 : 0, 1);
        second.narrow(0, 1, 1).zero_();
        second.narrow(0, len - 2, 1).zero_();
      }
    }
    x.requires_grad_(true);
    Tensor xg = on_gpu(x.detach());
    xg.requires_grad_();
    testing::poison_cuda_cache();
    const double n = static_cast<double>(s[static_cast<size_t>(dim)]);
    const double rtol = 2e-6 * std::sqrt(n) + 1e-5;
    Tensor pc = prod(x, dim), pg = prod(xg, dim);
    expect_parity(pg, pc, 1e-30, "prod " + name, rtol);
    Tensor yc = cumprod(x, dim), yg = cumprod(xg, dim);
    expect_parity(yg, yc, 1e-30, "cumprod " + name, rtol);
    Tensor w = randn(s, {}, &g), wp = randn(pc.shape(), {}, &g);
    sum(mul(yc, w)).backward();
    sum(mul(yg, on_gpu(w))).backward();
    expect_parity(xg.grad(), x.grad(), 1e-4 * n, "cumprod backward " + name, 1e-3);
    x.grad().zero_();
    xg.grad().zero_();
    sum(mul(pc, wp)).backward();
    sum(mul(pg, on_gpu(wp))).backward();
    expect_parity(xg.grad(), x.grad(), 1e-30, "prod backward " + name, rtol);
    Tensor xi = randint(-3, 4, s, {.dtype = DType::i32}, &g);
    EXPECT_EQ(cumprod(on_gpu(xi), dim).cpu().to_vector<int64_t>(),
              cumprod(xi, dim).to_vector<int64_t>())
        << "i32 cumprod " << name;
    EXPECT_EQ(prod(on_gpu(xi), dim).cpu().to_vector<int64_t>(), prod(xi, dim).to_vector<int64_t>())
        << "i32 prod " << name;
  }
}

// topk's two CUDA paths, k rounds of a block per row (k <= 16) and the segmented sort (k > 16):
// rows up to 70000, many rows over the grid-stride loop and several sort batches, ties (small
// integers) and NaN, smallest first, a dim not last, every dtype family; values and indices exactly
// as the CPU's, and the gradient.
TEST(CudaSizes, TopkRoundsAndSortPaths) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  struct Case {
    Shape shape;
    int64_t k, dim;
    bool largest;
  };
  for (const Case& c : std::vector<Case>{{{1, 65536}, 1, 1, true},
                                         {{1, 65536}, 16, 1, false},
                                         {{1, 65536}, 17, 1, true},
                                         {{1, 65536}, 65536, 1, false},
                                         {{3, 70000}, 300, 1, true},
                                         {{5000, 40}, 5, 1, true},
                                         {{5000, 40}, 40, 1, false},
                                         {{600, 30000}, 20, 1, true},
                                         {{33, 7, 300}, 16, 1, false},
                                         {{257, 5, 3}, 200, 0, true}}) {
    const std::string name = shape_str(c.shape) + " k " + std::to_string(c.k) + " dim " +
                             std::to_string(c.dim) + (c.largest ? " largest" : " smallest");
    // Small integers: many ties, broken by position on both devices.
    Tensor x = randint(-20, 20, c.shape, {.dtype = DType::f32}, &g);
    const Tensor xi = x.to(DType::i32);
    {
      NoGradGuard ng;
      Tensor flat = x.reshape({-1});
      flat.narrow(0, 3, 1).fill_(std::nan(""));
      flat.narrow(0, x.numel() / 2, 1).fill_(std::nan(""));
    }
    for (DType dt : {DType::f32, DType::bf16, DType::f64, DType::i32}) {
      const Tensor xc = dt == DType::i32 ? xi : x.to(dt);
      const Tensor xg = on_gpu(xc);
      testing::poison_cuda_cache();
      auto [vg, ig] = topk(xg, c.k, c.dim, c.largest);
      auto [vc, ic] = topk(xc, c.k, c.dim, c.largest);
      expect_parity(vg, vc, 0, "values " + name + " " + dtype_name(dt));
      EXPECT_EQ(ig.cpu().to_vector<int64_t>(), ic.to_vector<int64_t>())
          << "indices " << name << " " << dtype_name(dt);
    }
    Tensor xr = randn(c.shape, {.requires_grad = true}, &g);
    Tensor xrg = on_gpu(xr.detach()).requires_grad_(true);
    Tensor w = randn(std::get<0>(topk(xr, c.k, c.dim, c.largest)).shape(), {}, &g);
    sum(mul(std::get<0>(topk(xr, c.k, c.dim, c.largest)), w)).backward();
    sum(mul(std::get<0>(topk(xrg, c.k, c.dim, c.largest)), on_gpu(w))).backward();
    expect_parity(xrg.grad(), xr.grad(), 0, "gradient " + name);
  }
}

// gather over a strided view with many repeated indices, and scatter_add's atomics summing many
// sources into few targets (bf16 atomics: the op table's rows), against the CPU.
TEST(CudaSizes, GatherAndScatterAddWithRepeats) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  Tensor a = randn({300, 257}, {}, &g);
  Tensor idx = randint(0, 300, {1000, 200}, {.dtype = DType::i64}, &g);
  Tensor ac = a.t().requires_grad_(true), ag = on_gpu(a).t().detach().requires_grad_(true);
  Tensor oc = gather(ac, 1, idx.t()), og = gather(ag, 1, on_gpu(idx).t());
  expect_parity(og, oc, 0, "gather");
  sum(mul(oc, oc)).backward();
  sum(mul(og, og)).backward();
  expect_parity(ag.grad(), ac.grad(), 1e-3, "gather gradient");
  Tensor few = randint(0, 4, {5000, 64}, {.dtype = DType::i64}, &g);
  Tensor src = randn({5000, 64}, {}, &g), base = randn({4, 64}, {}, &g);
  for (DType dt : {DType::f32, DType::f64}) {
    expect_parity(scatter_add(on_gpu(base.to(dt)), 0, on_gpu(few), on_gpu(src.to(dt))),
                  scatter_add(base.to(dt), 0, few, src.to(dt)), dt == DType::f64 ? 1e-9 : 1e-3,
                  std::string("scatter_add ") + dtype_name(dt));
  }
}

// multinomial composes Philox uniforms (the same on both devices) with log, argmax and topk: the
// draws agree with the CPU's for one generator state.
TEST(CudaSizes, MultinomialDrawsMatchCpu) {
  SINTER_REQUIRE_CUDA();
  const uint64_t seed = testing::fresh_seed();
  Generator g(seed);
  Tensor w = rand({8, 65}, {}, &g);
  {
    NoGradGuard ng;
    w.narrow(1, 10, 5).zero_();
  }
  for (bool replacement : {true, false}) {
    Generator gc(seed), gg(seed);
    const auto dc = multinomial(w, 40, replacement, &gc).to_vector<int64_t>();
    const auto dg = multinomial(on_gpu(w), 40, replacement, &gg).cpu().to_vector<int64_t>();
    EXPECT_EQ(dg, dc) << (replacement ? "with" : "without") << " replacement, seed " << seed;
  }
}

TEST(CudaSizes, MaxFindsNanAndFirstOfTies) {
  SINTER_REQUIRE_CUDA();
  Tensor x = zeros({2, 5000});
  {
    NoGradGuard ng;
    x.select(0, 0).narrow(0, 1234, 1).fill_(std::nan(""));
    x.select(0, 1).narrow(0, 10, 1).fill_(1.0);
    x.select(0, 1).narrow(0, 4000, 1).fill_(1.0);
  }
  auto [v, i] = max(on_gpu(x), 1);
  EXPECT_TRUE(std::isnan(v.cpu().to_vector<float>()[0]));
  EXPECT_EQ(i.cpu().to_vector<int64_t>(), (std::vector<int64_t>{1234, 10}));
}

TEST(CudaSizes, MatmulRaggedTilesTransposesAndBatches) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    const double tol = dt == DType::f32 ? 1e-3 : dt == DType::f64 ? 1e-10 : 5e-2;
    Tensor a = randn({130, 70}, {.dtype = dt}, &g), b = randn({70, 97}, {.dtype = dt}, &g);
    expect_parity(matmul(on_gpu(a), on_gpu(b)), matmul(a, b), tol,
                  std::string("2-D ") + dtype_name(dt));
    Tensor at = randn({70, 130}, {.dtype = dt}, &g), bt = randn({97, 70}, {.dtype = dt}, &g);
    expect_parity(matmul(on_gpu(at).t(), on_gpu(bt).t()), matmul(at.t(), bt.t()), tol,
                  std::string("transposed ") + dtype_name(dt));
    Tensor ba = randn({3, 1, 65, 33}, {.dtype = dt}, &g),
           bb = randn({4, 33, 66}, {.dtype = dt}, &g);
    expect_parity(matmul(on_gpu(ba), on_gpu(bb)), matmul(ba, bb), tol,
                  std::string("broadcast batch ") + dtype_name(dt));
  }
}

TEST(CudaSizes, ElementwiseVectorTailsBroadcastAndDtypes) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    const double tol = dt == DType::f32 || dt == DType::f64 ? 1e-6 : 1e-2;
    Tensor a = randn({100003}, {.dtype = dt}, &g), b = randn({100003}, {.dtype = dt}, &g);
    testing::poison_cuda_cache();
    expect_parity(add(on_gpu(a), on_gpu(b)), add(a, b), tol, std::string("add ") + dtype_name(dt));
    expect_parity(gelu(on_gpu(a)), gelu(a), tol, std::string("gelu ") + dtype_name(dt));
    // Offset views start off the vector alignment.
    expect_parity(mul(on_gpu(a).narrow(0, 1, 99999), on_gpu(b).narrow(0, 3, 99999)),
                  mul(a.narrow(0, 1, 99999), b.narrow(0, 3, 99999)), tol,
                  std::string("offset mul ") + dtype_name(dt));
    Tensor m = randn({257, 129}, {.dtype = dt}, &g), r = randn({129}, {.dtype = dt}, &g);
    expect_parity(sub(on_gpu(m).t(), on_gpu(r).unsqueeze(1)), sub(m.t(), r.unsqueeze(1)), tol,
                  std::string("strided broadcast ") + dtype_name(dt));
  }
  Tensor i = randint(-1000, 1000, {5003}, {.dtype = DType::i64}, &g);
  expect_parity(mul(on_gpu(i), 3.0), mul(i, 3.0), 0, "i64 mul");
  expect_parity(gt(on_gpu(i), 0.0), gt(i, 0.0), 0, "i64 compare");
}

// Note [row layout] in kernels/elementwise.cu: row and column broadcasts, narrowed (unaligned)
// views and outer-broadcast operands, with rows shorter than, equal to and longer than a vector.
TEST(CudaSizes, BroadcastRowsAndColumnsMatchCpu) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    const double tol = dt == DType::f32 || dt == DType::f64 ? 1e-6 : 1e-2;
    for (int64_t n : {1, 3, 7, 8, 9, 1000, 4099}) {
      const std::string name = std::string(dtype_name(dt)) + " n " + std::to_string(n);
      Tensor x = randn({37, n}, {.dtype = dt}, &g), row = randn({n}, {.dtype = dt}, &g);
      Tensor col = randn({37, 1}, {.dtype = dt}, &g), wide = randn({37, n + 1}, {.dtype = dt}, &g);
      Tensor x3 = randn({3, 37, n}, {.dtype = dt}, &g);
      Tensor xg = on_gpu(x), rowg = on_gpu(row), colg = on_gpu(col), wideg = on_gpu(wide);
      testing::poison_cuda_cache();
      expect_parity(mul(xg, rowg), mul(x, row), tol, "row mul " + name);
      expect_parity(sub(xg, colg), sub(x, col), tol, "column sub " + name);
      expect_parity(add(rowg, colg), add(row, col), tol, "row + column " + name);
      expect_parity(mul(on_gpu(x3), colg), mul(x3, col), tol, "3-D times column " + name);
      // Rows n + 1 apart starting one element in: no row start is 16-byte aligned for long.
      Tensor nw = wide.narrow(-1, 1, n), nwg = wideg.narrow(-1, 1, n);
      expect_parity(div(nwg, rowg), div(nw, row), tol, "narrowed div " + name);
      expect_parity(mul(nwg, xg), mul(nw, x), tol, "narrowed times dense " + name);
      expect_parity(mul(nwg, 2.5), mul(nw, 2.5), tol, "narrowed times scalar " + name);
      expect_parity(gt(xg, rowg), gt(x, row), 0, "row compare " + name);
    }
  }
}

TEST(CudaSizes, HalfRowReductionsAtEveryAlignment) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  for (DType dt : {DType::bf16, DType::f16}) {
    for (int64_t r : {1, 31, 32, 33, 257, 1024, 5000, 70001}) {
      const std::string name = std::string(dtype_name(dt)) + " r " + std::to_string(r);
      // 67 rows: with r odd, row starts take every alignment a 16-byte vector can have.
      Tensor x = randn({r > 5000 ? 3 : 67, r}, {.dtype = dt}, &g);
      Tensor xg = on_gpu(x);
      testing::poison_cuda_cache();
      const double n = static_cast<double>(r);
      expect_parity(sum(xg, {1}), sum(x, {1}), 2e-2 * std::sqrt(n), "sum " + name, 2e-2);
      expect_parity(amax(xg, {1}), amax(x, {1}), 0, "amax " + name);
      auto [vg, ig] = max(xg, 1);
      auto [vc, ic] = max(x, 1);
      expect_parity(vg, vc, 0, "max values " + name);
      // Few distinct 16-bit values: ties are common, and the first must win.
      EXPECT_EQ(ig.cpu().to_vector<int64_t>(), ic.to_vector<int64_t>()) << "max indices " << name;
      auto [ng, jg] = min(on_gpu(x.narrow(1, r / 2, r - r / 2)), 1);
      auto [nc, jc] = min(x.narrow(1, r / 2, r - r / 2), 1);
      expect_parity(ng, nc, 0, "narrowed min " + name);
      EXPECT_EQ(jg.cpu().to_vector<int64_t>(), jc.to_vector<int64_t>()) << "min indices " << name;
    }
  }
}

double row_tol(DType dt) { return dt == DType::f32 ? 1e-4 : dt == DType::f64 ? 1e-9 : 2e-2; }

// Note [cached rows] in kernels/softmax.cu and Note [layer norm rows] in kernels/norm.cu: each row
// length below picks a configuration (warp with 8 or 32 slots, block, the uncached kernels) and
// vector or single-element slots.
const std::vector<int64_t> kRowLengths = {1, 31, 32, 33, 257, 1000, 1024, 1025, 2049, 5000, 8193};

TEST(CudaSizes, SoftmaxRowLengthsAndSpecialValues) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    const double tol = row_tol(dt);
    for (int64_t n : kRowLengths) {
      Tensor x = mul(randn({5, n}, {}, &g), 3.0);
      if (n > 1) {
        NoGradGuard ng;
        x.select(0, 1).narrow(0, n / 2, 1).fill_(std::nan(""));
        x.select(0, 2).fill_(-std::numeric_limits<double>::infinity());
        x.select(0, 3).narrow(0, n - 1, 1).fill_(std::numeric_limits<double>::infinity());
      }
      x = x.to(dt);
      Tensor w = randn({5, n}, {.dtype = dt}, &g);
      for (bool log : {false, true}) {
        const std::string name = std::string(dtype_name(dt)) + " n " + std::to_string(n) +
                                 (log ? " log_softmax" : " softmax");
        Tensor xc = x.clone().requires_grad_(), xg = on_gpu(x).requires_grad_();
        testing::poison_cuda_cache();
        Tensor yc = log ? log_softmax(xc, 1) : softmax(xc, 1);
        Tensor yg = log ? log_softmax(xg, 1) : softmax(xg, 1);
        expect_parity(yg, yc, tol, "forward " + name);
        sum(mul(yc, w)).backward();
        sum(mul(yg, on_gpu(w))).backward();
        expect_parity(xg.grad(), xc.grad(), tol, "backward " + name);
      }
    }
  }
}

TEST(CudaSizes, CrossEntropyRowLengths) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    const double tol = row_tol(dt);
    for (int64_t n : kRowLengths) {
      Tensor x = mul(randn({7, n}, {}, &g), 2.0).to(dt);
      Tensor t = randint(0, n, {7}, {.dtype = DType::i64}, &g);
      for (double eps : {0.0, 0.1}) {
        const std::string name =
            std::string(dtype_name(dt)) + " n " + std::to_string(n) + " eps " + std::to_string(eps);
        CrossEntropyOptions o;
        o.reduction = Reduction::None;
        o.label_smoothing = eps;
        testing::poison_cuda_cache();
        expect_parity(cross_entropy(on_gpu(x), on_gpu(t), o), cross_entropy(x, t, o), tol, name);
      }
    }
  }
}

TEST(CudaSizes, LayerNormRowLengths) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    const double tol = dt == DType::bf16 ? 5e-2 : row_tol(dt) * 10;
    for (int64_t n : kRowLengths) {
      if (n == 1) continue;  // a one-element row normalizes to 0 and has no useful gradient
      const std::string name = std::string(dtype_name(dt)) + " n " + std::to_string(n);
      Tensor x = add(randn({9, n}, {}, &g), 1.5).to(dt);
      Tensor w = randn({n}, {.dtype = dt}, &g), b = randn({n}, {.dtype = dt}, &g);
      Tensor up = randn({9, n}, {.dtype = dt}, &g);
      Tensor xc = x.clone().requires_grad_(), xg = on_gpu(x).requires_grad_();
      Tensor wc = w.clone().requires_grad_(), wg = on_gpu(w).requires_grad_();
      Tensor bc = b.clone().requires_grad_(), bg = on_gpu(b).requires_grad_();
      testing::poison_cuda_cache();
      Tensor yc = layer_norm(xc, {n}, wc, bc), yg = layer_norm(xg, {n}, wg, bg);
      expect_parity(yg, yc, tol, "forward " + name);
      sum(mul(yc, up)).backward();
      sum(mul(yg, on_gpu(up))).backward();
      expect_parity(xg.grad(), xc.grad(), tol, "dx " + name);
      expect_parity(wg.grad(), wc.grad(), tol * std::sqrt(9.0), "dweight " + name);
      expect_parity(bg.grad(), bc.grad(), tol * std::sqrt(9.0), "dbias " + name);
    }
  }
}

// rms_norm runs layer norm's kernels without the centring (kern::RowNorm::Rms): the same row
// lengths, its mean far from zero so that a centred result would differ.
TEST(CudaSizes, RmsNormRowLengths) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    const double tol = dt == DType::bf16 ? 5e-2 : row_tol(dt) * 10;
    for (int64_t n : kRowLengths) {
      const std::string name = std::string(dtype_name(dt)) + " n " + std::to_string(n);
      Tensor x = add(randn({9, n}, {}, &g), 1.5).to(dt);
      Tensor w = randn({n}, {.dtype = dt}, &g);
      Tensor up = randn({9, n}, {.dtype = dt}, &g);
      Tensor xc = x.clone().requires_grad_(), xg = on_gpu(x).requires_grad_();
      Tensor wc = w.clone().requires_grad_(), wg = on_gpu(w).requires_grad_();
      testing::poison_cuda_cache();
      Tensor yc = rms_norm(xc, {n}, wc), yg = rms_norm(xg, {n}, wg);
      expect_parity(yg, yc, tol, "forward " + name);
      sum(mul(yc, up)).backward();
      sum(mul(yg, on_gpu(up))).backward();
      expect_parity(xg.grad(), xc.grad(), tol, "dx " + name);
      expect_parity(wg.grad(), wc.grad(), tol * std::sqrt(9.0), "dweight " + name);
    }
  }
}

// rope (Note [rotary embedding]): more pairs than one wave of threads, head sizes 2 to 128,
// positions up to 32767, both pairings, forward and backward.
TEST(CudaSizes, RopeHeadSizesAndPositions) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    const double tol = dt == DType::bf16 ? 3e-2 : row_tol(dt) * 10;
    for (const int64_t d : {2, 6, 64, 128}) {
      for (const bool interleaved : {false, true}) {
        const std::string name = std::string(dtype_name(dt)) + " d " + std::to_string(d) +
                                 (interleaved ? " interleaved" : " halves");
        const int64_t t = 301;
        const Tensor pos = randint(0, 32768, {t}, {.dtype = DType::i64}, &g);
        Tensor x = randn({5, 7, t, d}, {}, &g).to(dt);
        Tensor up = randn({5, 7, t, d}, {.dtype = dt}, &g);
        Tensor xc = x.clone().requires_grad_(), xg = on_gpu(x).requires_grad_();
        testing::poison_cuda_cache();
        Tensor yc = rope(xc, pos, 10000.0, interleaved);
        Tensor yg = rope(xg, on_gpu(pos), 10000.0, interleaved);
        expect_parity(yg, yc, tol, "forward " + name);
        sum(mul(yc, up)).backward();
        sum(mul(yg, on_gpu(up))).backward();
        expect_parity(xg.grad(), xc.grad(), tol, "dx " + name);
      }
    }
  }
}

// Against Note [batch norm Welford] in kernels/merges.h: many channels of small planes, few
// channels of large planes (split statistics), planes that are and are not a whole number of
// vectors, a mean far from zero.
TEST(CudaSizes, BatchNormChannelsAndPlanes) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  for (DType dt : {DType::f32, DType::bf16}) {
    const double tol = dt == DType::f32 ? 1e-3 : 5e-2;
    for (Shape s : {Shape{2, 300, 7, 7}, Shape{4, 3, 128, 130}, Shape{3, 64, 32, 32},
                    Shape{1, 2, 301, 300}, Shape{5, 4, 3}}) {
      const std::string name = std::string(dtype_name(dt)) + " " + shape_str(s);
      const int64_t c = s[1];
      Tensor x = add(mul(randn(s, {}, &g), 2.0), 50.0).to(dt);
      Tensor w = randn({c}, {.dtype = dt}, &g), b = randn({c}, {.dtype = dt}, &g);
      Tensor up = randn(s, {.dtype = dt}, &g);
      Tensor rmc = zeros({c}, {.dtype = dt}), rvc = ones({c}, {.dtype = dt});
      Tensor rmg = on_gpu(rmc), rvg = on_gpu(rvc);
      Tensor xc = x.clone().requires_grad_(), xg = on_gpu(x).requires_grad_();
      Tensor wc = w.clone().requires_grad_(), wg = on_gpu(w).requires_grad_();
      Tensor bc = b.clone().requires_grad_(), bg = on_gpu(b).requires_grad_();
      testing::poison_cuda_cache();
      Tensor yc = batch_norm(xc, rmc, rvc, wc, bc, true);
      Tensor yg = batch_norm(xg, rmg, rvg, wg, bg, true);
      expect_parity(yg, yc, tol, "forward " + name);
      expect_parity(rmg, rmc, tol, "running mean " + name);
      expect_parity(rvg, rvc, tol, "running var " + name);
      sum(mul(yc, up)).backward();
      sum(mul(yg, on_gpu(up))).backward();
      const double m = static_cast<double>(x.numel() / c);
      expect_parity(xg.grad(), xc.grad(), tol, "dx " + name);
      expect_parity(wg.grad(), wc.grad(), tol * std::sqrt(m), "dweight " + name, tol);
      expect_parity(bg.grad(), bc.grad(), tol * std::sqrt(m), "dbias " + name, tol);
      NoGradGuard ng;
      expect_parity(batch_norm(on_gpu(x), rmg, rvg, on_gpu(w), on_gpu(b), false),
                    batch_norm(x, rmc, rvc, w, b, false), tol, "eval " + name);
    }
  }
}

TEST(CudaSizes, CopiesBetweenEveryDtypePair) {
  SINTER_REQUIRE_CUDA();
  const std::vector<DType> all = {DType::f32, DType::f64, DType::bf16, DType::f16,
                                  DType::i64, DType::i32, DType::u8,   DType::b8};
  Tensor base = mul(rand({1031}), 200.0);
  for (DType from : all) {
    Tensor src = base.to(from);
    for (DType to : all) {
      expect_parity(on_gpu(src).to(to), src.to(to), 0,
                    std::string(dtype_name(from)) + " -> " + dtype_name(to));
    }
  }
}

TEST(CudaSizes, IndexSelectAndItsGradientWithRepeats) {
  SINTER_REQUIRE_CUDA();
  Generator g(testing::fresh_seed());
  Tensor x = randn({300, 257}, {}, &g);
  Tensor idx = randint(0, 300, {1000}, {.dtype = DType::i64}, &g);
  Tensor xc = x.clone().requires_grad_(true), xg = on_gpu(x).requires_grad_(true);
  Tensor oc = index_select(xc, 0, idx), og = index_select(xg, 0, on_gpu(idx));
  expect_parity(og, oc, 0, "forward");
  sum(mul(oc, oc)).backward();
  sum(mul(og, og)).backward();
  expect_parity(xg.grad(), xc.grad(), 1e-4, "gradient");
}

// Iterations past the elementwise kernels' 32-bit index math (for_each_piece32 in
// kernels/elementwise.cu): a contiguous one of 2^32 elements (where, which always takes the general
// path, and once made 32-bit divisors of its size: 0, a division by zero on the host), and strided
// ones of 2.6e9 that the launcher splits (a broadcast into a copy, and a transposed copy). 16 GB of
// u8 and bool at most.
TEST(CudaSizes, ElementwisePast32BitIndexing) {
  SINTER_REQUIRE_CUDA();
  const int64_t side = int64_t{1} << 16;
  const TensorOptions u8{.dtype = DType::u8, .device = kGpu};
  {
    Tensor cond = full({side, side}, 1.0, {.dtype = DType::b8, .device = kGpu});
    cond.narrow(0, side - 1, 1).fill_(0.0);
    const Tensor y = where(cond, full({side, side}, 1.0, u8), full({side, side}, 2.0, u8));
    EXPECT_EQ(sum(y).item<int64_t>(), side * side + side);
    EXPECT_EQ(sum(y[side - 1]).item<int64_t>(), 2 * side);
    EXPECT_EQ(sum(y[side - 2]).item<int64_t>(), side);
  }
  const int64_t cols = 40000;
  std::vector<uint8_t> mod(side);
  std::vector<int64_t> want(side);
  for (int64_t i = 0; i < side; ++i) {
    mod[i] = static_cast<uint8_t>(i % 256);
    want[i] = cols * (i % 256);
  }
  const Tensor x = from_vector(mod, {side, 1}).to(kGpu).expand({side, cols}).contiguous();
  EXPECT_EQ(sum(x, {1}).to_vector<int64_t>(), want);
  const Tensor y = x.t().contiguous();  // (cols, side): y[j][i] = i mod 256
  EXPECT_EQ(sum(y, {0}).to_vector<int64_t>(), want);
  EXPECT_EQ(y[cols - 1].to_vector<uint8_t>(), mod);
}

}  // namespace
}  // namespace sinter

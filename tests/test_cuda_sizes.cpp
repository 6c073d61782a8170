// CPU-vs-CUDA parity at sizes the op table's small shapes do not reach: multi-block reductions,
// split rows, GEMM tiles with ragged edges, vectorized elementwise paths with tails, every dtype.
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

}  // namespace
}  // namespace sinter

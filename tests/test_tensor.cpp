// Tensor semantics: factories, dtypes, views that share storage, broadcasting, copies, printing,
// and random numbers.
#include "test_util.h"

namespace sinter {
namespace {

TEST(Tensor, FactoriesFillShapeAndValues) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.strides(), (Shape{3, 1}));
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(ones({2}, {.dtype = DType::i32}).to_vector<int32_t>(), (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(full({3}, 2.5, {.dtype = DType::f64}).to_vector<double>(),
            (std::vector<double>{2.5, 2.5, 2.5}));
  EXPECT_EQ(arange(5, {.dtype = DType::i64}).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1.0, 2.0, 0.25).to_vector<float>(),
            (std::vector<float>{1.0f, 1.25f, 1.5f, 1.75f}));
  EXPECT_EQ(linspace(0.0, 1.0, 5, {.dtype = DType::f64}).to_vector<double>(),
            (std::vector<double>{0.0, 0.25, 0.5, 0.75, 1.0}));
  EXPECT_EQ(eye(2, 3).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  Tensor s = full({}, 4.0);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item<float>(), 4.0f);
}

TEST(Tensor, FromVectorAndFromBlob) {
  Tensor t = from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(t.dtype(), DType::i64);
  EXPECT_EQ(t.select(0, 1).to_vector<int64_t>(), (std::vector<int64_t>{3, 4}));
  std::vector<float> buf = {1, 2, 3, 4, 5, 6};
  Tensor b = from_blob(buf.data(), {2, 3});
  buf[4] = 50;  // no copy: the tensor sees the caller's memory
  EXPECT_EQ(b.to_vector<float>()[4], 50.0f);
  Tensor strided = from_blob(buf.data(), {3}, {2});
  EXPECT_EQ(strided.to_vector<float>(), (std::vector<float>{1, 3, 50}));
  bool freed = false;
  {
    Tensor owned = from_blob(buf.data(), {6}, {}, [&freed](void*) { freed = true; });
  }
  EXPECT_TRUE(freed);
}

TEST(Tensor, DtypeConversionsRoundAndTruncate) {
  Tensor f = from_vector<float>({1.7f, -1.7f, 0.0f, 3.0f}, {4});
  EXPECT_EQ(f.to(DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{1, -1, 0, 3}));
  EXPECT_EQ(f.to(DType::b8).to_vector<bool>(), (std::vector<bool>{true, true, false, true}));
  // bf16 keeps 8 significant bits: 1 + 2^-8 rounds to even (1), 1 + 3 * 2^-8 rounds up.
  Tensor v = from_vector<float>({1.0f + 1.0f / 256, 1.0f + 3.0f / 256}, {2});
  EXPECT_EQ(v.to(DType::bf16).to_vector<float>(), (std::vector<float>{1.0f, 1.0f + 4.0f / 256}));
  // f16: 65504 is the largest finite value; 1e-7 underflows to a subnormal.
  Tensor h = from_vector<float>({65504.0f, 70000.0f, 5.9604645e-08f}, {3}).to(DType::f16);
  std::vector<float> hv = h.to_vector<float>();
  EXPECT_EQ(hv[0], 65504.0f);
  EXPECT_TRUE(std::isinf(hv[1]));
  EXPECT_EQ(hv[2], 5.9604645e-08f);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor base = arange(12, {.dtype = DType::f64}).reshape({3, 4});
  Tensor tr = base.t();
  EXPECT_EQ(tr.shape(), (Shape{4, 3}));
  EXPECT_EQ(tr.strides(), (Shape{1, 4}));
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_TRUE(tr.storage().is_same(base.storage()));
  Tensor row = base.select(0, 1);
  Tensor col = base.narrow(1, 2, 1);
  Tensor stepped = base.slice(1, 0, std::nullopt, 2);
  EXPECT_EQ(row.to_vector<double>(), (std::vector<double>{4, 5, 6, 7}));
  EXPECT_EQ(col.to_vector<double>(), (std::vector<double>{2, 6, 10}));
  EXPECT_EQ(stepped.to_vector<double>(), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  row.fill_(-1.0);
  EXPECT_EQ(base.to_vector<double>()[5], -1.0);
  EXPECT_EQ(tr.to_vector<double>()[1], -1.0);  // tr(0, 1) = base(1, 0)
  Tensor e = from_vector<double>({1, 2}, {2, 1}).expand({2, 3});
  EXPECT_EQ(e.strides(), (Shape{1, 0}));
  EXPECT_EQ(e.to_vector<double>(), (std::vector<double>{1, 1, 1, 2, 2, 2}));
  Tensor p = arange(24).reshape({2, 3, 4}).permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.contiguous().to_vector<float>()[1], 4.0f);
}

TEST(Tensor, ReshapeViewsWhenPossibleAndCopiesOtherwise) {
  Tensor base = arange(6).reshape({2, 3});
  Tensor v = base.reshape({3, 2});
  EXPECT_TRUE(v.storage().is_same(base.storage()));
  Tensor t = base.t();
  Tensor r = t.reshape({6});  // a transposed tensor cannot be flattened in place
  EXPECT_FALSE(r.storage().is_same(base.storage()));
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_THROW(t.view({6}), Error);
  EXPECT_EQ(base.unsqueeze(1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(base.unsqueeze(-1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(base.unsqueeze(0).squeeze().shape(), (Shape{2, 3}));
  EXPECT_EQ(zeros({2, 3, 4, 5}).flatten(1, 2).shape(), (Shape{2, 12, 5}));
  EXPECT_EQ(base.reshape({-1}).shape(), (Shape{6}));
}

TEST(Tensor, BroadcastingFollowsNumpyRules) {
  Tensor a = arange(3, {.dtype = DType::f64}).reshape({3, 1});
  Tensor b = arange(4, {.dtype = DType::f64});
  Tensor c = a * 10.0 + b;
  EXPECT_EQ(c.shape(), (Shape{3, 4}));
  EXPECT_EQ(c.to_vector<double>()[6], 12.0);
  EXPECT_EQ((zeros({2, 1, 3}) + zeros({4, 1})).shape(), (Shape{2, 4, 3}));
  EXPECT_THROW(zeros({2, 3}) + zeros({4}), Error);
  // A non-contiguous operand broadcasts too.
  Tensor m = arange(6, {.dtype = DType::f64}).reshape({2, 3}).t();
  EXPECT_EQ((m - from_vector<double>({1, 2}, {2})).to_vector<double>(),
            (std::vector<double>{-1, 1, 0, 2, 1, 3}));
}

TEST(Tensor, CatStackSplitChunkIndexSelect) {
  Tensor a = arange(6, {.dtype = DType::i64}).reshape({2, 3});
  Tensor b = arange(3, {.dtype = DType::i64}).reshape({1, 3});
  EXPECT_EQ(cat({a, b}, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 0, 1, 2}));
  EXPECT_EQ(cat({a, a}, 1).shape(), (Shape{2, 6}));
  EXPECT_EQ(stack({a, a}, 0).shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(stack({a, a}, 2).shape(), (Shape{2, 3, 2}));
  std::vector<Tensor> parts = split(arange(7), 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].to_vector<float>(), (std::vector<float>{6}));
  std::vector<Tensor> by = split(arange(7), std::vector<int64_t>{2, 5});
  EXPECT_EQ(by[1].numel(), 5);
  EXPECT_EQ(chunk(arange(6), 4).size(), 3u);  // chunks of ceil(6/4) = 2
  Tensor idx = from_vector<int64_t>({2, 0, 2}, {3});
  EXPECT_EQ(index_select(a, 1, idx).to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 2, 5, 3, 5}));
}

// unbind's and split's pieces are views of the tensor with one backward node for them all (Note
// [split views]): the gradient of the pieces is put together in one pass, never a zero-filled
// tensor of the whole shape per piece.
TEST(Tensor, SplitAndUnbindPiecesAreViewsWithOneNode) {
  const Tensor a = arange(24, {.dtype = DType::f64}).reshape({2, 3, 4}).requires_grad_();
  const std::vector<Tensor> rows = unbind(a, 1);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].shape(), (Shape{2, 4}));
  EXPECT_EQ(rows[1].to_vector<double>(), (std::vector<double>{4, 5, 6, 7, 16, 17, 18, 19}));
  EXPECT_EQ(rows[2].data_ptr(),
            static_cast<const void*>(static_cast<const double*>(a.data_ptr()) + 8));
  EXPECT_EQ(unbind(a, -1).size(), 4u);
  ASSERT_NE(rows[0].grad_fn(), nullptr);
  EXPECT_EQ(rows[0].grad_fn(), rows[2].grad_fn());
  EXPECT_EQ(rows[0].grad_fn()->name(), "unbind");
  const std::vector<Tensor> parts = split(a, 3, -1);
  EXPECT_EQ(parts[0].grad_fn(), parts[1].grad_fn());
  (rows[2] * 3.0 + rows[0]).sum().backward();
  std::vector<double> want(24, 0.0);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      want[i * 12 + j] = 1.0;
      want[i * 12 + 8 + j] = 3.0;
    }
  }
  EXPECT_EQ(a.grad().to_vector<double>(), want);
  testing::expect_error([] { (void)unbind(full({}, 1.0)); }, {"unbind", "0-dim"});
}

TEST(Tensor, ReductionsOverDims) {
  Tensor a = from_vector<double>({1, 5, 2, 8, 0, 3}, {2, 3});
  EXPECT_EQ(sum(a, {0}).to_vector<double>(), (std::vector<double>{9, 5, 5}));
  EXPECT_EQ(sum(a, {1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(mean(a).item<double>(), 19.0 / 6);
  EXPECT_NEAR(var(a, {1}).to_vector<double>()[0], 4.333333333333333, 1e-12);
  EXPECT_EQ(max(a).item<double>(), 8.0);
  EXPECT_EQ(argmax(a, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmin(a, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_NEAR(logsumexp(a, {1}).to_vector<double>()[1],
              std::log(std::exp(8.0) + std::exp(0.0) + std::exp(3.0)), 1e-12);
  Tensor big = full({2}, 1000.0, {.dtype = DType::f64});
  EXPECT_NEAR(logsumexp(big, {0}).item<double>(), 1000.0 + std::log(2.0), 1e-9);
  Tensor ints = from_vector<int32_t>({1, 2, 3}, {3});
  EXPECT_EQ(sum(ints).dtype(), DType::i64);
  EXPECT_EQ(sum(ints).item<int64_t>(), 6);
  EXPECT_EQ(sum(zeros({0, 3})).item<float>(), 0.0f);
}

TEST(Tensor, MatmulShapes) {
  EXPECT_EQ(matmul(ones({3}), ones({3})).dim(), 0);
  EXPECT_EQ(matmul(ones({2, 3}), ones({3})).shape(), (Shape{2}));
  EXPECT_EQ(matmul(ones({3}), ones({3, 4})).shape(), (Shape{4}));
  EXPECT_EQ(matmul(ones({5, 2, 3}), ones({3, 4})).shape(), (Shape{5, 2, 4}));
  EXPECT_EQ(matmul(ones({2, 1, 2, 3}), ones({4, 3, 6})).shape(), (Shape{2, 4, 2, 6}));
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(matmul(a, a.t()).to_vector<float>(), (std::vector<float>{5, 11, 11, 25}));
  EXPECT_EQ(matmul(zeros({2, 0}), zeros({0, 3})).to_vector<float>(), std::vector<float>(6, 0.0f));
}

TEST(Tensor, RandomIsDeterministicPerSeed) {
  manual_seed(7);
  Tensor a = randn({1000});
  manual_seed(7);
  Tensor b = randn({1000});
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  Tensor c = randn({1000});
  EXPECT_NE(a.to_vector<float>(), c.to_vector<float>());
  Generator g(3);
  Tensor n = randn({200000}, {.dtype = DType::f64}, &g);
  EXPECT_NEAR(mean(n).item<double>(), 0.0, 0.01);
  EXPECT_NEAR(var(n).item<double>(), 1.0, 0.02);
  Tensor u = rand({100000}, {}, &g);
  EXPECT_GE(min(u).item<float>(), 0.0f);
  EXPECT_LT(max(u).item<float>(), 1.0f);
  Tensor r = randint(-3, 4, {10000}, {.dtype = DType::i64}, &g);
  EXPECT_EQ(min(r).item<int64_t>(), -3);
  EXPECT_EQ(max(r).item<int64_t>(), 3);
}

TEST(Tensor, GeneratorStateReplaysTheStream) {
  Generator g(5);
  randn({10}, {}, &g);
  const GeneratorState saved = g.state();
  EXPECT_EQ(saved.seed, 5u);
  EXPECT_EQ(saved.offset, 10u);
  Tensor a = rand({7}, {}, &g);
  g.set_state(saved);
  Tensor b = rand({7}, {}, &g);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  g.manual_seed(6);
  EXPECT_EQ(g.state().offset, 0u);
  EXPECT_NE(rand({7}, {}, &g).to_vector<float>(), a.to_vector<float>());
}

TEST(Tensor, PrintingShowsShapeDtypeDeviceAndElides) {
  std::string s = from_vector<float>({1.5f, 2.0f}, {2}).str();
  EXPECT_NE(s.find("[1.5, 2]"), std::string::npos) << s;
  EXPECT_NE(s.find("shape=[2]"), std::string::npos) << s;
  EXPECT_NE(s.find("dtype=f32"), std::string::npos) << s;
  EXPECT_NE(s.find("device=cpu"), std::string::npos) << s;
  std::string big = arange(5000, {.dtype = DType::i64}).str();
  EXPECT_NE(big.find("[0, 1, 2, ..., 4997, 4998, 4999]"), std::string::npos) << big;
  EXPECT_LT(big.size(), 200u);
}

TEST(Tensor, InPlaceOpsAndCopy) {
  Tensor a = zeros({2, 2}, {.dtype = DType::f64});
  a.add_(from_vector<double>({1, 2}, {2}));
  a.mul_(3.0);
  a.add_(ones({2, 2}, {.dtype = DType::f64}), 0.5);
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{3.5, 6.5, 3.5, 6.5}));
  Tensor b = empty({2, 2}, {.dtype = DType::f32});
  b.copy_(a.t());
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{3.5f, 3.5f, 6.5f, 6.5f}));
  b.zero_();
  EXPECT_EQ(b.to_vector<float>(), std::vector<float>(4, 0.0f));
}

TEST(CudaTensor, CopiesBetweenHostAndDevice) {
  SINTER_REQUIRE_CUDA();
  Tensor h = arange(1000, {.dtype = DType::f64});
  Tensor d = h.to(Device::cuda());
  EXPECT_EQ(d.device(), Device::cuda());
  EXPECT_EQ(d.cpu().to_vector<double>(), h.to_vector<double>());
  Tensor pinned = h.pin_memory();
  EXPECT_TRUE(pinned.storage().is_pinned());
  Tensor d2 = pinned.to(Device::cuda(), /*non_blocking=*/true);
  cuda::synchronize();
  EXPECT_EQ(d2.cpu().to_vector<double>(), h.to_vector<double>());
  Tensor strided = d.reshape({10, 100}).t();
  EXPECT_EQ(strided.cpu().to_vector<double>(), h.reshape({10, 100}).t().to_vector<double>());
}

TEST(CudaTensor, FactoriesMatchCpu) {
  SINTER_REQUIRE_CUDA();
  const TensorOptions gpu{.device = Device::cuda()};
  EXPECT_EQ(arange(0.0, 3.0, 0.5, gpu).cpu().to_vector<float>(),
            arange(0.0, 3.0, 0.5).to_vector<float>());
  EXPECT_EQ(linspace(-1.0, 1.0, 9, gpu).cpu().to_vector<float>(),
            linspace(-1.0, 1.0, 9).to_vector<float>());
  EXPECT_EQ(eye(3, 4, gpu).cpu().to_vector<float>(), eye(3, 4).to_vector<float>());
  EXPECT_EQ(
      full({5}, -2.5, {.dtype = DType::bf16, .device = Device::cuda()}).cpu().to_vector<float>(),
      std::vector<float>(5, -2.5f));
  EXPECT_EQ(arange(7, {.dtype = DType::i64, .device = Device::cuda()}).cpu().to_vector<int64_t>(),
            arange(7, {.dtype = DType::i64}).to_vector<int64_t>());
}

TEST(CudaTensor, RandomMatchesCpuForOneSeed) {
  SINTER_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64}) {
    Generator g1(11), g2(11);
    Tensor c = randn({4097}, {.dtype = dt}, &g1);
    Tensor d = randn({4097}, {.dtype = dt, .device = Device::cuda()}, &g2);
    EXPECT_TRUE(testing::all_close(d.cpu(), c, 1e-5, 1e-5)) << dtype_name(dt);
    Tensor ci = randint(0, 1000, {513}, {.dtype = DType::i64}, &g1);
    Tensor di = randint(0, 1000, {513}, {.dtype = DType::i64, .device = Device::cuda()}, &g2);
    EXPECT_EQ(di.cpu().to_vector<int64_t>(), ci.to_vector<int64_t>());
  }
}

}  // namespace
}  // namespace sinter

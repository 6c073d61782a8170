// The CPU kernels' oneDNN paths (Note [onednn convolutions]) against the library's own kernels, the
// reference: the convolutions' forward, input and weight gradients in f32 and bf16 over geometries
// with strides, padding, dilation, groups, a single input channel, batches that cut into several
// chunks with a shorter last one, and a right padding below the left; the bf16 and f32 GEMMs,
// transposed, batched and with linear's epilogue; the same bits at 1, 2 and 3 threads; signals
// during the GEMMs; and the switch.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cpu/onednn.h"
#include "kern/gemm.h"
#include "test_util.h"

namespace sinter {
namespace {

// Turns the oneDNN path on or off for a scope, and back at its end.
class OneDnnGuard : NonCopyable {
 public:
  explicit OneDnnGuard(bool on) : previous_(onednn_enabled()) { set_onednn_enabled(on); }
  ~OneDnnGuard() { set_onednn_enabled(previous_); }

 private:
  bool previous_;
};

// Sets how bf16 products run (Note [bf16 products]) for a scope, and back to automatic at its end.
class Bf16ProductsGuard : NonCopyable {
 public:
  explicit Bf16ProductsGuard(cpu::onednn::Bf16Products how) { cpu::onednn::set_bf16_products(how); }
  ~Bf16ProductsGuard() { cpu::onednn::set_bf16_products(cpu::onednn::Bf16Products::automatic); }
};

using Bf16Products = cpu::onednn::Bf16Products;

#define SKIP_WITHOUT_ONEDNN()                                                              \
  if (!onednn_available()) {                                                               \
    GTEST_SKIP() << "built without oneDNN (SINTER_DNNL): the convolutions run in the own " \
                    "kernels, which the other convolution tests cover";                    \
  }

struct Case {
  std::string name;
  Shape x, w;
  bool bias;
  Conv2dOptions opts;
};

std::vector<Case> cases() {
  return {
      {"3x3 same", {5, 8, 12, 11}, {16, 8, 3, 3}, true, {.padding = {1, 1}}},
      {"strided", {4, 6, 17, 15}, {8, 6, 3, 3}, false, {.stride = {2, 2}, .padding = {1, 1}}},
      {"strided 1x1 shortcut", {4, 16, 16, 16}, {32, 16, 1, 1}, false, {.stride = {2, 2}}},
      // h 34, kernel 1, stride 2: the last input row is never read (a right padding of -1).
      {"right padding below the left", {2, 4, 34, 10}, {4, 4, 1, 1}, true, {.stride = {2, 1}}},
      {"dilated", {3, 4, 13, 14}, {6, 4, 3, 2}, true, {.padding = {2, 1}, .dilation = {2, 3}}},
      {"grouped",
       {3, 8, 9, 10},
       {12, 2, 3, 3},
       true,
       {.stride = {2, 1}, .padding = {1, 2}, .groups = 4}},
      {"one input channel", {6, 1, 28, 28}, {32, 1, 3, 3}, true, {.padding = {1, 1}}},
      // 2.4M multiply-adds an image: chunks of 7 images, the last of 2.
      {"chunks", {37, 16, 32, 32}, {16, 16, 3, 3}, false, {.padding = {1, 1}}},
  };
}

// y and the gradients of x, w (and the bias) for the loss sum(y * r).
std::vector<Tensor> conv_and_grads(const Case& c, DType dt, const Tensor& x, const Tensor& w,
                                   const Tensor& b, const Tensor& r) {
  Tensor cx = x.to(dt).detach().requires_grad_(), cw = w.to(dt).detach().requires_grad_();
  Tensor cb = c.bias ? b.to(dt).detach().requires_grad_() : Tensor();
  Tensor y = conv2d(cx, cw, cb, c.opts);
  (y * r.to(dt)).sum().backward();
  std::vector<Tensor> out = {y, cx.grad(), cw.grad()};
  if (c.bias) out.push_back(cb.grad());
  return out;
}

TEST(OneDnnConv, MatchesTheOwnKernelsInF32AndBf16) {
  SKIP_WITHOUT_ONEDNN();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Tensor x = randn(c.x, {}, &gen), w = randn(c.w, {}, &gen), b = randn({c.w[0]}, {}, &gen);
    const Shape y_shape = conv2d(x, w, Tensor(), c.opts).shape();
    const Tensor r = randn(y_shape, {}, &gen);
    bool f32_ran = false;
    // f32; bf16 on f32 kernels over widened copies; bf16 on the CPU's bf16 dot products (Note
    // [bf16 products]).
    for (const auto& [dt, how] : {std::pair{DType::f32, Bf16Products::automatic},
                                  std::pair{DType::bf16, Bf16Products::widened},
                                  std::pair{DType::bf16, Bf16Products::dot}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (how == Bf16Products::widened ? " widened"
                                                  : how == Bf16Products::dot   ? " on dot products"
                                                                               : ""));
      const Bf16ProductsGuard products(how);
      std::vector<Tensor> own, lib;
      {
        const OneDnnGuard off(false);
        own = conv_and_grads(c, dt, x, w, b, r);
      }
      {
        const OneDnnGuard on(true);
        const int64_t calls = cpu::onednn::calls();
        lib = conv_and_grads(c, dt, x, w, b, r);
        // oneDNN ran the three passes (one call per chunk), or this CPU has no JIT kernel for them
        // (bf16 dot products, on a CPU without them: the other cases still run).
        if (cpu::onednn::calls() == calls) {
          if (how == Bf16Products::dot) continue;
          // bf16 on the f32 kernels runs wherever f32 does (its own plans, reading bf16 images).
          if (f32_ran) ADD_FAILURE() << "bf16 on the f32 kernels did not run " << c.name;
          GTEST_SKIP() << "oneDNN has no kernel for " << c.name << " in " << dtype_name(dt)
                       << " on this CPU: the own kernels ran";
        }
        if (dt == DType::f32) f32_ran = true;
        if (c.name == "chunks") {
          EXPECT_GE(cpu::onednn::calls() - calls, 3 * 6);
        }
      }
      ASSERT_EQ(own.size(), lib.size());
      for (size_t i = 0; i < own.size(); ++i) {
        SCOPED_TRACE("result " + std::to_string(i));
        EXPECT_EQ(lib[i].dtype(), dt);
        // Sums of up to a few thousand products in another order; bf16 rounds each result once,
        // so the two may sit a rounding step apart.
        const double scale = own[i].to(DType::f64).abs().max().item<double>();
        const double atol = dt == DType::f32 ? 2e-5 * scale : 1e-2 * scale;
        EXPECT_TRUE(testing::all_close(lib[i].to(DType::f32), own[i].to(DType::f32), atol,
                                       dt == DType::f32 ? 1e-5 : 1e-2));
      }
    }
  }
}

// The cut into chunks depends on the geometry alone and the chunks' weight gradients are summed in
// chunk order: the same bits at every thread count, deterministic mode or not.
TEST(OneDnnConv, SameBitsAtOneTwoAndThreeThreads) {
  SKIP_WITHOUT_ONEDNN();
  const OneDnnGuard on(true);
  Generator gen(31);
  const Case c = cases().back();
  const Tensor x = randn(c.x, {}, &gen), w = randn(c.w, {}, &gen), b = randn({c.w[0]}, {}, &gen);
  const Tensor r = randn(conv2d(x, w, Tensor(), c.opts).shape(), {}, &gen);
  for (const auto& [dt, how] :
       {std::pair{DType::f32, Bf16Products::automatic},
        std::pair{DType::bf16, Bf16Products::widened}, std::pair{DType::bf16, Bf16Products::dot}}) {
    SCOPED_TRACE(std::string(dtype_name(dt)) + (how == Bf16Products::widened ? " widened"
                                                : how == Bf16Products::dot   ? " on dot products"
                                                                             : ""));
    const Bf16ProductsGuard products(how);
    testing::expect_same_bits_at_every_thread_count(
        [&] { return conv_and_grads(c, dt, x, w, b, r); });
  }
}

// run()'s results on the library's own kernels (own) and with oneDNN on (lib); false where no
// oneDNN primitive ran.
bool own_and_onednn(const std::function<std::vector<Tensor>()>& run, std::vector<Tensor>* own,
                    std::vector<Tensor>* lib) {
  {
    const OneDnnGuard off(false);
    *own = run();
  }
  const OneDnnGuard on(true);
  const int64_t calls = cpu::onednn::calls();
  *lib = run();
  return cpu::onednn::calls() != calls;
}

// bf16 results of oneDNN (lib) against the own kernels' (own): the bf16 products are exact in f32
// on both paths, only the order of the sums differs, and the results may sit a bf16 rounding step
// apart.
void expect_bf16_close(const std::vector<Tensor>& lib, const std::vector<Tensor>& own) {
  ASSERT_EQ(lib.size(), own.size());
  for (size_t i = 0; i < own.size(); ++i) {
    SCOPED_TRACE("result " + std::to_string(i));
    EXPECT_EQ(lib[i].dtype(), DType::bf16);
    const double scale = own[i].to(DType::f64).abs().max().item<double>();
    EXPECT_TRUE(
        testing::all_close(lib[i].to(DType::f32), own[i].to(DType::f32), 1e-2 * scale, 1e-2));
  }
}

// Whether oneDNN has a bf16 matmul on this CPU (refused where its only one is the reference loop).
bool bf16_matmul_runs() {
  const OneDnnGuard on(true);
  const std::vector<BFloat16> a(16 * 16, BFloat16(1.0F));
  std::vector<float> c(16 * 16);
  return cpu::onednn::gemm(DType::bf16, false, false, 16, 16, 16, a.data(), 16, a.data(), 16,
                           c.data(), 16);
}

// bf16 products in oneDNN against the sgemm path on widened operands: plain, transposed views,
// batched with a broadcast operand, and linear's bias and activation epilogue, with gradients.
TEST(OneDnnGemm, Bf16MatchesTheWidenedSgemm) {
  SKIP_WITHOUT_ONEDNN();
  const Bf16ProductsGuard products(Bf16Products::dot);
  if (!bf16_matmul_runs()) {
    GTEST_SKIP() << "oneDNN has no bf16 matmul kernel on this CPU: its products run widened";
  }
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  const DType bf = DType::bf16;
  const Tensor a = randn({70, 300}, {.dtype = bf}, &gen), b = randn({300, 45}, {.dtype = bf}, &gen);
  const Tensor at = randn({300, 70}, {.dtype = bf}, &gen),
               bt = randn({45, 300}, {.dtype = bf}, &gen);
  const Tensor ba = randn({3, 33, 64}, {.dtype = bf}, &gen),
               bb = randn({64, 17}, {.dtype = bf}, &gen);
  const Tensor x = randn({40, 96}, {.dtype = bf}, &gen), w = randn({130, 96}, {.dtype = bf}, &gen);
  const Tensor bias = randn({130}, {.dtype = bf}, &gen);
  // Attention's small products, batched over 70 heads: runs of 32 entries and one of 6 (Note
  // [gemm blocks]), each run one oneDNN call; and one with the first operand broadcast.
  const Tensor q = randn({70, 64, 16}, {.dtype = bf}, &gen),
               k = randn({70, 64, 16}, {.dtype = bf}, &gen);
  const Tensor q1 = randn({33, 16}, {.dtype = bf}, &gen);
  auto run = [&] {
    Tensor cx = x.detach().requires_grad_(), cw = w.detach().requires_grad_();
    Tensor y = linear(cx, cw, bias, Activation::GeluTanh);
    (y * y).sum().backward();
    return std::vector<Tensor>{matmul(a, b),
                               matmul(at.t(), b),
                               matmul(a, bt.t()),
                               matmul(at.t(), bt.t()),
                               matmul(ba, bb),
                               y,
                               cx.grad(),
                               cw.grad(),
                               matmul(q, k.transpose(-2, -1)),
                               matmul(matmul(q, k.transpose(-2, -1)), k),
                               matmul(q1, k.transpose(-2, -1))};
  };
  std::vector<Tensor> own, lib;
  if (!own_and_onednn(run, &own, &lib)) {
    GTEST_SKIP() << "oneDNN has no bf16 matmul kernel on this CPU: the own kernels ran";
  }
  {
    // The batched products themselves (3-D and broadcast operands) ran in oneDNN.
    const OneDnnGuard on(true);
    for (const Tensor& a3 : {q, q1}) {
      const int64_t calls = cpu::onednn::calls();
      (void)matmul(a3, k.transpose(-2, -1));
      EXPECT_GT(cpu::onednn::calls(), calls) << "a batched product left oneDNN";
    }
  }
  expect_bf16_close(lib, own);
}

// A bf16 product large enough to be cut into blocks (Note [gemm blocks]): the same bits at every
// thread count on the oneDNN path too.
TEST(OneDnnGemm, Bf16SameBitsAtOneTwoAndThreeThreads) {
  SKIP_WITHOUT_ONEDNN();
  const OneDnnGuard on(true);
  Generator gen(8);
  const Tensor a = randn({300, 400}, {.dtype = DType::bf16}, &gen);
  const Tensor b = randn({400, 500}, {.dtype = DType::bf16}, &gen);
  const Tensor at = randn({400, 300}, {.dtype = DType::bf16}, &gen);
  const Tensor bt = randn({500, 400}, {.dtype = DType::bf16}, &gen);
  // Blocks of columns (n > m) and of rows, of plain and transposed operands; a batch of small
  // products in runs of entries.
  const Tensor q = randn({70, 64, 16}, {.dtype = DType::bf16}, &gen);
  const Tensor k = randn({70, 64, 16}, {.dtype = DType::bf16}, &gen);
  auto run = [&] {
    return std::vector<Tensor>{matmul(a, b), matmul(at.t(), bt.t()), matmul(bt, at),
                               matmul(q, k.transpose(-2, -1))};
  };
  for (const Bf16Products how : {Bf16Products::dot, Bf16Products::widened}) {
    SCOPED_TRACE(how == Bf16Products::dot ? "on dot products" : "widened");
    const Bf16ProductsGuard products(how);
    testing::expect_same_bits_at_every_thread_count(run);
  }
}

// bf16 products where the dot products are not the faster path (Note [bf16 products]): the
// operands widened to f32, the larger products in oneDNN's f32 kernels, the small ones on the
// sgemm path; against the sgemm path throughout, the bf16 rounding of the same f32 sums in
// another order. Plain, transposed and batched, and linear's epilogue with its gradients.
TEST(OneDnnGemm, Bf16WidenedRunsTheF32Kernels) {
  SKIP_WITHOUT_ONEDNN();
  const Bf16ProductsGuard products(Bf16Products::widened);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  const DType bf = DType::bf16;
  const Tensor a = randn({70, 300}, {.dtype = bf}, &gen), b = randn({300, 45}, {.dtype = bf}, &gen);
  const Tensor bt = randn({45, 300}, {.dtype = bf}, &gen);
  const Tensor x = randn({64, 96}, {.dtype = bf}, &gen), w = randn({130, 96}, {.dtype = bf}, &gen);
  const Tensor bias = randn({130}, {.dtype = bf}, &gen);
  const Tensor q = randn({6, 64, 16}, {.dtype = bf}, &gen),
               k = randn({6, 64, 16}, {.dtype = bf}, &gen);
  auto run = [&] {
    Tensor cx = x.detach().requires_grad_(), cw = w.detach().requires_grad_();
    Tensor y = linear(cx, cw, bias, Activation::GeluTanh);
    (y * y).sum().backward();
    return std::vector<Tensor>{matmul(a, b), matmul(a, bt.t()), y,
                               cx.grad(),    cw.grad(),         matmul(q, k.transpose(-2, -1))};
  };
  std::vector<Tensor> own, lib;
  if (!own_and_onednn(run, &own, &lib)) {
    GTEST_SKIP() << "oneDNN has no f32 matmul kernel on this CPU: the own kernels ran";
  }
  expect_bf16_close(lib, own);
  // The widened product of a (70 x 300 by 300 x 45: 945k multiply-adds) is one f32 oneDNN call.
  const OneDnnGuard on(true);
  const int64_t calls = cpu::onednn::calls();
  (void)matmul(a, b);
  EXPECT_EQ(cpu::onednn::calls(), calls + 1);
}

// f32 products of at least 2^18 multiply-adds in oneDNN (Note [f32 gemm in onednn]) against the
// sgemm path: plain and transposed views, a product cut into column blocks (each block's C has
// longer rows than its own), batched with a broadcast operand, linear's bias and activation
// epilogue with its gradients, and the small and one-row products that stay on OpenBLAS.
TEST(OneDnnGemm, F32MatchesTheSgemm) {
  SKIP_WITHOUT_ONEDNN();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  const Tensor a = randn({70, 300}, {}, &gen), b = randn({300, 45}, {}, &gen);
  const Tensor at = randn({300, 70}, {}, &gen), bt = randn({45, 300}, {}, &gen);
  const Tensor wide_a = randn({130, 500}, {}, &gen), wide_b = randn({500, 1100}, {}, &gen);
  const Tensor ba = randn({3, 70, 64}, {}, &gen), bb = randn({64, 90}, {}, &gen);
  const Tensor x = randn({40, 96}, {}, &gen), w = randn({130, 96}, {}, &gen);
  const Tensor bias = randn({130}, {}, &gen);
  const Tensor row = randn({1, 500}, {}, &gen), small = randn({8, 8}, {}, &gen);
  auto run = [&] {
    std::vector<Tensor> out;
    for (const Activation act : {Activation::Relu, Activation::GeluTanh}) {
      Tensor cx = x.detach().requires_grad_(), cw = w.detach().requires_grad_();
      Tensor y = linear(cx, cw, bias, act);
      (y * y).sum().backward();
      out.insert(out.end(), {y, cx.grad(), cw.grad()});
    }
    out.insert(out.end(),
               {matmul(a, b), matmul(at.t(), b), matmul(a, bt.t()), matmul(at.t(), bt.t()),
                matmul(wide_a, wide_b), matmul(ba, bb), matmul(row, wide_b), matmul(small, small)});
    return out;
  };
  std::vector<Tensor> own, lib;
  if (!own_and_onednn(run, &own, &lib)) {
    GTEST_SKIP() << "oneDNN has no f32 matmul kernel on this CPU: the own kernels ran";
  }
  for (size_t i = 0; i < own.size(); ++i) {
    SCOPED_TRACE("result " + std::to_string(i));
    ASSERT_EQ(lib[i].shape(), own[i].shape());
    // Only the order of the f32 sums differs: a few ulp of the largest term.
    const double scale = own[i].to(DType::f64).abs().max().item<double>();
    EXPECT_TRUE(testing::all_close(lib[i], own[i], 1e-5 * scale, 1e-5));
  }
}

// An f32 product cut into blocks of rows and of columns: the same bits at every thread count on
// the oneDNN path too, and for a one-row product cut into column blocks.
TEST(OneDnnGemm, F32SameBitsAtOneTwoAndThreeThreads) {
  const OneDnnGuard on(true);
  Generator gen(9);
  const Tensor a = randn({300, 400}, {}, &gen), b = randn({400, 500}, {}, &gen);
  const Tensor at = randn({400, 300}, {}, &gen), bt = randn({500, 400}, {}, &gen);
  const Tensor row = randn({1, 1024}, {}, &gen), w = randn({1024, 1024}, {}, &gen);
  auto run = [&] {
    return std::vector<Tensor>{matmul(a, b), matmul(at.t(), bt.t()), matmul(bt, at), matmul(row, w),
                               linear(row, w, Tensor(), Activation::Relu)};
  };
  testing::expect_same_bits_at_every_thread_count(run);
}

// The handler's record (Note [onednn signals]): how many signals it ran for, and how many of them
// found its own frame outside the thread's stack, written where the interrupted code had put the
// stack pointer.
std::atomic<int64_t> g_delivered{0}, g_off_stack{0};
uintptr_t g_stack_low = 0, g_stack_high = 0;

void record_signal(int /*signal*/) {
  // The handler's frame, not a local's address: AddressSanitizer keeps locals on a stack of its
  // own.
  const auto at = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (at < g_stack_low || at >= g_stack_high) g_off_stack.fetch_add(1);
  g_delivered.fetch_add(1);
}

// Widened products (Note [bf16 products]) are the f32 kernels' results on the widened operands,
// rounded once, bit for bit: the convolutions' three passes (chunks with a shorter last one,
// groups, bias) called directly, and the bf16 and f16 matmuls (f16 widens on every CPU) against
// the f32 matmul of the widened operands.
TEST(OneDnnGemm, WidenedProductsAreTheF32ResultsRounded) {
  SKIP_WITHOUT_ONEDNN();
  const OneDnnGuard on(true);
  const Bf16ProductsGuard products(Bf16Products::widened);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  const DType bf = DType::bf16;
  kern::Conv2dGeom g;
  g.n = 37, g.c_in = 8, g.h = 20, g.w = 18, g.c_out = 12, g.kh = 3, g.kw = 3;
  g.pad_h = g.pad_w = 1, g.groups = 2, g.h_out = 20, g.w_out = 18;
  const Tensor x = randn({g.n, g.c_in, g.h, g.w}, {.dtype = bf}, &gen);
  const Tensor w = randn({g.c_out, g.c_in / 2, 3, 3}, {.dtype = bf}, &gen);
  const Tensor b = randn({g.c_out}, {.dtype = bf}, &gen);
  const Tensor dy = randn({g.n, g.c_out, g.h_out, g.w_out}, {.dtype = bf}, &gen);
  const Tensor x32 = x.to(DType::f32), w32 = w.to(DType::f32), b32 = b.to(DType::f32),
               dy32 = dy.to(DType::f32);
  const auto pair = [](const Tensor& like, const Tensor& like32) {
    return std::pair{empty(like.shape(), {.dtype = like.dtype()}),
                     empty(like32.shape(), {.dtype = DType::f32})};
  };
  auto [y, y32] = pair(dy, dy32);
  auto [dx, dx32] = pair(x, x32);
  auto [dw, dw32] = pair(w, w32);
  using cpu::onednn::conv2d_backward_input, cpu::onednn::conv2d_backward_weight,
      cpu::onednn::conv2d_forward;
  ASSERT_TRUE(conv2d_forward(g, bf, x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr()));
  ASSERT_TRUE(conv2d_forward(g, DType::f32, x32.data_ptr(), w32.data_ptr(), b32.data_ptr(),
                             y32.data_ptr()));
  ASSERT_TRUE(conv2d_backward_input(g, bf, dy.data_ptr(), w.data_ptr(), dx.data_ptr()));
  ASSERT_TRUE(
      conv2d_backward_input(g, DType::f32, dy32.data_ptr(), w32.data_ptr(), dx32.data_ptr()));
  ASSERT_TRUE(conv2d_backward_weight(g, bf, x.data_ptr(), dy.data_ptr(), dw.data_ptr()));
  ASSERT_TRUE(
      conv2d_backward_weight(g, DType::f32, x32.data_ptr(), dy32.data_ptr(), dw32.data_ptr()));
  EXPECT_TRUE(testing::all_close(y, y32.to(bf), 0, 0)) << "forward";
  EXPECT_TRUE(testing::all_close(dx, dx32.to(bf), 0, 0)) << "input gradient";
  EXPECT_TRUE(testing::all_close(dw, dw32.to(bf), 0, 0)) << "weight gradient";
  // Values of exponents 2^-6 to 2^6 apart, so that the f32 sums round and their order shows (of
  // values alike, the sums of exact products are mostly exact, whatever the order).
  const auto spread = [&](const Shape& shape, DType dt) {
    const Tensor e = randint(-6, 7, shape, {}, &gen).to(DType::f32);
    return (randn(shape, {}, &gen) * exp2(e)).to(dt);
  };
  for (const DType dt : {bf, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = spread({70, 300}, dt), m = spread({300, 45}, dt);
    const int64_t calls = cpu::onednn::calls();
    const Tensor got = matmul(a, m);
    EXPECT_EQ(cpu::onednn::calls(), calls + 1);  // one f32 matmul in oneDNN
    EXPECT_TRUE(testing::all_close(got, matmul(a.to(DType::f32), m.to(DType::f32)).to(dt), 0, 0));
    // Products cut into blocks of rows (the whole b widened once for them) and of columns (the
    // whole a), of plain and transposed operands (Note [gemm blocks]): on OpenBLAS, the f32 product
    // on operands of the same layouts, bit for bit; in oneDNN's f32 kernels, whose choice may
    // depend on a block operand's row stride (the widened side packs it dense, the f32 reference
    // reads it in place), within a rounding step of the values' scale.
    const auto laid = [](const Tensor& t, bool transposed) {
      return transposed ? t.t().contiguous().t() : t;
    };
    const Tensor tall = spread({600, 300}, dt), narrow = spread({300, 200}, dt);
    const Tensor flat = spread({90, 300}, dt), wide = spread({300, 700}, dt);
    for (const bool library : {false, true}) {
      const OneDnnGuard on(library);
      const double tol = library ? 0.5 : 0.0, rtol = library ? 1e-2 : 0.0;
      for (const bool transposed : {false, true}) {
        for (const auto& [x, y] : {std::pair{tall, narrow}, std::pair{flat, wide}}) {
          SCOPED_TRACE(shape_str(x.shape()) + " x " + shape_str(y.shape()) +
                       (transposed ? " transposed" : "") + (library ? " in oneDNN" : ""));
          const Tensor want =
              matmul(laid(x.to(DType::f32), transposed), laid(y.to(DType::f32), transposed)).to(dt);
          EXPECT_TRUE(testing::all_close(matmul(laid(x, transposed), laid(y, transposed)), want,
                                         tol, rtol));
        }
      }
      // A weight gradient's deep product (Note [deep products]): each run of terms in f32 on the
      // operands' parts widened, the runs' sum in f32 in run order, rounded once: bit for bit.
      // (bf16 and f16 run shorter runs than f32: 12 here, against f32's 4.)
      const Tensor dy = spread({8200, 64}, dt), in = spread({8200, 48}, dt);
      kern::GemmArgs deep;
      deep.dtype = dt;
      deep.m = 64;
      deep.n = 48;
      deep.k = 8200;
      const int64_t runs = cpu::gemm_depth_chunks(deep), depth = (deep.k + runs - 1) / runs;
      ASSERT_EQ(runs, 12);
      Tensor want;
      for (int64_t j = 0; j < runs; ++j) {
        const int64_t k0 = j * depth, len = std::min(deep.k, k0 + depth) - k0;
        const Tensor part =
            matmul(dy.narrow(0, k0, len).to(DType::f32).t(), in.narrow(0, k0, len).to(DType::f32));
        want = j == 0 ? part : add(want, part);
      }
      EXPECT_TRUE(testing::all_close(matmul(dy.t(), in), want.to(dt), 0, 0))
          << "deep product" << (library ? " in oneDNN" : "");
    }
  }
}

// Signals sent to the thread all through a run of f32 GEMMs whose oneDNN implementation moves the
// stack pointer into the heap (oneDNN 2.6's "gemm:jit", which it takes for a long k and a
// transposed a with its rows apart): held during each call, every one runs its handler on the
// thread's own stack. Unheld, they corrupted the heap here within three calls ("corrupted size vs.
// prev_size"), and a Python training loop stopped by Ctrl-C aborted in free() now and then.
TEST(OneDnnGemm, SignalsNeverLandOnAMovedStack) {
  SKIP_WITHOUT_ONEDNN();
  const OneDnnGuard on(true);
  pthread_attr_t attr;
  ASSERT_EQ(pthread_getattr_np(pthread_self(), &attr), 0);
  void* low = nullptr;
  size_t size = 0;
  ASSERT_EQ(pthread_attr_getstack(&attr, &low, &size), 0);
  pthread_attr_destroy(&attr);
  g_stack_low = reinterpret_cast<uintptr_t>(low);
  g_stack_high = g_stack_low + size;
  g_delivered = 0;
  g_off_stack = 0;
  struct sigaction act = {}, previous = {};
  act.sa_handler = record_signal;
  sigemptyset(&act.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &act, &previous), 0);

  constexpr int64_t m = 64, n = 128, k = 1024;
  constexpr int64_t lda = m + 16;
  const std::vector<float> a(k * lda, 0.5F), b(k * n, 0.25F);
  std::vector<float> c(m * n);
  std::atomic<bool> stop{false};
  const pthread_t target = pthread_self();
  std::thread sender([&] {
    while (!stop.load()) {
      pthread_kill(target, SIGUSR2);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  const int64_t held = cpu::onednn::calls_with_signals_held();
  bool ran = true;
  for (int i = 0; i < 300 && ran; ++i) {
    ran = cpu::onednn::gemm(DType::f32, true, false, m, n, k, a.data(), lda, b.data(), n, c.data(),
                            n);
  }
  while (g_delivered.load() == 0) std::this_thread::yield();  // the sender's first, at least
  stop = true;
  sender.join();
  sigaction(SIGUSR2, &previous, nullptr);
  if (!ran || cpu::onednn::calls_with_signals_held() == held) {
    GTEST_SKIP() << "this oneDNN runs the product without a GEMM kernel that moves the stack";
  }
  EXPECT_EQ(c[0], 0.5F * 0.25F * k);
  EXPECT_EQ(g_off_stack.load(), 0) << "of " << g_delivered.load() << " signals";
}

TEST(OneDnnConv, TheSwitch) {
  const OneDnnGuard keep(onednn_enabled());
  set_onednn_enabled(true);
  EXPECT_EQ(onednn_enabled(), onednn_available());
  set_onednn_enabled(false);
  EXPECT_FALSE(onednn_enabled());
  // f64 always runs in the own kernels, switch or not: the op table's gradient checks hold.
  set_onednn_enabled(true);
  Generator gen(3);
  const Tensor x = randn({2, 3, 6, 5}, {.dtype = DType::f64}, &gen);
  const Tensor w = randn({4, 3, 3, 3}, {.dtype = DType::f64}, &gen);
  const Tensor on = conv2d(x, w, Tensor(), {.padding = {1, 1}});
  set_onednn_enabled(false);
  EXPECT_TRUE(testing::all_close(on, conv2d(x, w, Tensor(), {.padding = {1, 1}}), 0, 0));
}

}  // namespace
}  // namespace sinter

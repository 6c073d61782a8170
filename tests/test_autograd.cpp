// The autograd engine: graph shapes (chains, diamonds, reuse), accumulation, retain_graph, version
// counters, hooks, no_grad and detach.
#include "test_util.h"

namespace sinter {
namespace {

std::vector<double> vec(const Tensor& t) { return t.to_vector<double>(); }

Tensor leaf(std::vector<double> v) {
  return from_vector<double>(v, {static_cast<int64_t>(v.size())}).requires_grad_(true);
}

TEST(Autograd, ChainRule) {
  Tensor x = leaf({1.0, 2.0, 3.0});
  Tensor y = sum(mul(exp(x), 2.0));
  y.backward();
  std::vector<double> g = vec(x.grad());
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(g[i], 2.0 * std::exp(i + 1.0), 1e-12);
}

TEST(Autograd, DiamondGraphSumsBothPaths) {
  // y = a * b with a = 2x and b = x^2: dy/dx = 6x^2 reaches x through two paths.
  Tensor x = leaf({1.0, -2.0});
  Tensor a = mul(x, 2.0);
  Tensor b = mul(x, x);
  sum(mul(a, b)).backward();
  std::vector<double> g = vec(x.grad());
  EXPECT_DOUBLE_EQ(g[0], 6.0);
  EXPECT_DOUBLE_EQ(g[1], 24.0);
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf({1.0, 2.0});
  sum(mul(x, 3.0)).backward();
  sum(mul(x, 4.0)).backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{7.0, 7.0}));
  x.grad().zero_();
  sum(x).backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{1.0, 1.0}));
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = sum(exp(x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();  // allowed: the first call kept the graph
  std::vector<double> g = vec(x.grad());
  EXPECT_NEAR(g[0], 2.0 * std::exp(1.0), 1e-12);
  try {
    y.backward();
    FAIL() << "a third backward through a freed graph must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(Autograd, InPlaceChangeOfSavedTensorIsAnError) {
  Tensor x = leaf({1.0, 2.0});
  Tensor w = from_vector<double>({3.0, 4.0}, {2});
  Tensor y = sum(mul(x, w));  // saves w for x's gradient
  w.add_(1.0);
  try {
    y.backward();
    FAIL() << "backward must detect the in-place change";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("mul"), std::string::npos) << msg;
    EXPECT_NE(msg.find("in-place"), std::string::npos) << msg;
  }
}

TEST(Autograd, InPlaceChangeThroughAViewBumpsTheBaseVersion) {
  Tensor w = from_vector<double>({3.0, 4.0}, {2});
  Tensor v = w.view({2, 1});
  const uint32_t before = w.version();
  v.mul_(2.0);
  EXPECT_EQ(w.version(), before + 1);
  EXPECT_EQ(vec(w), (std::vector<double>{6.0, 8.0}));
}

TEST(Autograd, NonScalarBackwardNeedsExplicitGradient) {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = mul(x, x);
  EXPECT_THROW(y.backward(), Error);
  y.backward(from_vector<double>({1.0, 0.5}, {2}));
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{2.0, 2.0}));
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = leaf({1.0});
  Tensor y;
  {
    NoGradGuard ng;
    EXPECT_FALSE(GradMode::is_enabled());
    y = mul(x, 2.0);
  }
  EXPECT_TRUE(GradMode::is_enabled());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
  EXPECT_THROW(y.backward(), Error);
}

TEST(Autograd, DetachCutsTheGraphAndSharesStorage) {
  Tensor x = leaf({1.0, 2.0});
  Tensor d = mul(x, 2.0).detach();
  EXPECT_FALSE(d.requires_grad());
  Tensor y = sum(add(mul(x, d), x));
  y.backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{3.0, 5.0}));
  Tensor a = x.detach();
  EXPECT_EQ(a.data_ptr(), x.data_ptr());
}

TEST(Autograd, TensorHookCanReplaceTheGradient) {
  Tensor x = leaf({1.0, 2.0});
  Tensor h = mul(x, 3.0);
  int calls = 0;
  h.register_hook([&calls](const Tensor& g) {
    ++calls;
    return mul(g, 10.0);
  });
  sum(h).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{30.0, 30.0}));
}

TEST(Autograd, LeafHookAndPostAccumulateHook) {
  Tensor x = leaf({1.0, 2.0});
  std::vector<double> seen;
  x.register_hook([](const Tensor& g) { return mul(g, 2.0); });
  x.register_post_accumulate_grad_hook([&seen](Tensor& p) { seen = p.grad().to_vector<double>(); });
  sum(mul(x, x)).backward();
  EXPECT_EQ(seen, (std::vector<double>{4.0, 8.0}));
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{4.0, 8.0}));
}

// Per Note [gradient stealing], a leaf's first gradient becomes its grad() without a copy where
// nothing else holds it (its memory is the gradient's own), and is a copy where something does: a
// hook that kept it or a view of it, two leaves that get the same tensor (add's gradient goes to
// both inputs), the caller's memory, an inference tensor, a gradient of another dtype. Changing
// one grad() in place then changes nothing else.
TEST(Autograd, FirstGradientIsTakenWithoutACopyWhereNothingElseHoldsIt) {
  {
    Tensor x = leaf({1.0, 2.0});
    const void* made = nullptr;
    x.register_hook([&made](const Tensor& g) {
      Tensor r = mul(g, 2.0);
      made = r.storage().id();
      return r;
    });
    sum(mul(x, x)).backward();
    EXPECT_EQ(x.grad().storage().id(), made);
    EXPECT_EQ(vec(x.grad()), (std::vector<double>{4.0, 8.0}));
  }
  {
    Tensor x = leaf({1.0, 2.0});
    Tensor kept;
    x.register_hook([&kept](const Tensor& g) {
      kept = mul(g, 2.0);
      return kept;
    });
    sum(mul(x, x)).backward();
    EXPECT_FALSE(x.grad().storage().is_same(kept.storage()));
    x.grad().add_(1.0);
    EXPECT_EQ(vec(kept), (std::vector<double>{4.0, 8.0}));
    EXPECT_EQ(vec(x.grad()), (std::vector<double>{5.0, 9.0}));
  }
  {
    // A view of it kept: another tensor on the same memory.
    Tensor x = leaf({1.0, 2.0});
    Tensor alias;
    x.register_hook([&alias](const Tensor& g) {
      Tensor r = mul(g, 2.0);
      alias = r.detach();
      return r;
    });
    sum(mul(x, x)).backward();
    EXPECT_FALSE(x.grad().storage().is_same(alias.storage()));
    x.grad().add_(1.0);
    EXPECT_EQ(vec(alias), (std::vector<double>{4.0, 8.0}));
  }
  {
    Tensor a = leaf({1.0, 2.0}), b = leaf({3.0, 4.0});
    sum(mul(add(a, b), 3.0)).backward();
    EXPECT_FALSE(a.grad().storage().is_same(b.grad().storage()));
    a.grad().add_(1.0);
    EXPECT_EQ(vec(a.grad()), (std::vector<double>{4.0, 4.0}));
    EXPECT_EQ(vec(b.grad()), (std::vector<double>{3.0, 3.0}));
  }
  {
    // The caller's memory (from_blob) and a tensor made under InferenceMode are copied: the
    // buffer stays the caller's, and the grad takes in-place accumulation.
    Tensor x = leaf({1.0, 2.0});
    std::vector<double> buffer(2, 0.0);
    x.register_hook([&buffer](const Tensor& g) {
      Tensor r = from_blob(buffer.data(), {2}, {.dtype = DType::f64});
      r.copy_(g);
      return r;
    });
    sum(mul(x, 3.0)).backward();
    EXPECT_NE(x.grad().data_ptr(), static_cast<void*>(buffer.data()));
    buffer.assign(2, -1.0);
    EXPECT_EQ(vec(x.grad()), (std::vector<double>{3.0, 3.0}));
    Tensor y = leaf({1.0, 2.0});
    y.register_hook([](const Tensor& g) {
      InferenceMode guard;
      return mul(g, 1.0);
    });
    sum(mul(y, 2.0)).backward();
    EXPECT_FALSE(y.grad().is_inference());
    sum(mul(y, 2.0)).backward();  // accumulates in place
    EXPECT_EQ(vec(y.grad()), (std::vector<double>{4.0, 4.0}));
  }
  {
    // An f32 leaf whose gradient comes in f64 (a hook's): the grad is the leaf's dtype.
    Tensor x = full({2}, 1.5).requires_grad_();
    x.register_hook([](const Tensor& g) { return g.to(DType::f64); });
    sum(mul(x, 2.0)).backward();
    EXPECT_EQ(x.grad().dtype(), DType::f32);
    EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2.0f, 2.0f}));
  }
}

TEST(Autograd, RetainGradKeepsANonLeafGradient) {
  Tensor x = leaf({1.0, 2.0});
  Tensor h = mul(x, 3.0);
  h.retain_grad();
  Tensor other = mul(x, 5.0);
  sum(mul(h, h)).backward();
  EXPECT_EQ(vec(h.grad()), (std::vector<double>{6.0, 12.0}));
  EXPECT_FALSE(other.grad().defined());
}

TEST(Autograd, ReusedLeafInOneOpGetsBothContributions) {
  Tensor x = leaf({3.0});
  sum(mul(x, x)).backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{6.0}));
}

TEST(Autograd, BroadcastGradientIsReducedToTheInputShape) {
  Tensor a = zeros({2, 3}, {.dtype = DType::f64, .requires_grad = true});
  Tensor b = zeros({3}, {.dtype = DType::f64, .requires_grad = true});
  sum(add(a, b)).backward();
  EXPECT_EQ(b.grad().shape(), (Shape{3}));
  EXPECT_EQ(vec(b.grad()), (std::vector<double>{2.0, 2.0, 2.0}));
}

// A backward computes only the gradients its inputs want: masked_fill's fill value is a tensor
// without grad, and its gradient (a pass over the output and a sum) was computed and dropped.
TEST(Autograd, WhereComputesOnlyTheWantedGradients) {
  Tensor x = leaf({1, 2, 3, 4});
  const Tensor mask = gt(from_vector<double>({1, 0, 0, 1}, {4}), 0.5);
  Tensor y = masked_fill(x, mask, -1.0);
  int wheres = 0;
  {
    const profiler::Guard guard;
    sum(y).backward();
    for (const profiler::Event& e : guard.events()) wheres += e.name == "where";
  }
  EXPECT_EQ(wheres, 1);
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{0, 1, 1, 0}));
}

TEST(Autograd, MultiOutputOpWithOneUsedOutput) {
  Tensor x = from_vector<double>({1.0, 5.0, 2.0, 7.0, 0.0, 3.0}, {2, 3}).requires_grad_(true);
  auto [values, indices] = max(x, 1);
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  sum(values).backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{0, 1, 0, 1, 0, 0}));
}

TEST(Autograd, InPlaceOnTensorRequiringGradIsAnError) {
  Tensor x = leaf({1.0});
  EXPECT_THROW(x.add_(1.0), Error);
  {
    NoGradGuard ng;
    x.add_(1.0);  // optimizers update parameters this way
  }
  EXPECT_EQ(vec(x), (std::vector<double>{2.0}));
}

// Per Note [in-place autograd], the written tensor takes a new grad_fn, a buffer that required no
// grad starts to, and a backward that needs the old values gets them.
TEST(InPlaceAutograd, WriteIntoBufferRecordsTheSource) {
  Tensor w = leaf({1.0, -2.0});
  Tensor buf = zeros({2, 2}, {.dtype = DType::f64});
  buf.select(0, 1).copy_(w);
  ASSERT_TRUE(buf.requires_grad());
  EXPECT_EQ(buf.grad_fn()->name(), "copy_slices");
  (buf * buf).sum().backward();
  EXPECT_EQ(vec(w.grad()), (std::vector<double>{2.0, -4.0}));
}

TEST(InPlaceAutograd, MulBySourceSeesTheOldValues) {
  Tensor x = leaf({1.0, 2.0});
  Tensor w = leaf({3.0, 4.0});
  Tensor y = x * 1.0;
  y.mul_(w);
  EXPECT_EQ(vec(y), (std::vector<double>{3.0, 8.0}));
  EXPECT_EQ(y.grad_fn()->name(), "copy_");
  y.sum().backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{3.0, 4.0}));
  EXPECT_EQ(vec(w.grad()), (std::vector<double>{1.0, 2.0}));  // y before the write
}

TEST(InPlaceAutograd, ViewsMadeBeforeTheWriteFollowIt) {
  Tensor x = leaf({1.0, 2.0, 3.0});
  Tensor w = leaf({10.0, 20.0});
  Tensor y = x * 1.0;
  Tensor a = y.narrow(0, 0, 2);
  y.narrow(0, 1, 2).add_(w);
  EXPECT_EQ(vec(a), (std::vector<double>{1.0, 12.0}));
  EXPECT_EQ(a.grad_fn()->name(), "as_strided");  // remade through the rebased y
  (a * a).sum().backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{2.0, 24.0, 0.0}));
  EXPECT_EQ(vec(w.grad()), (std::vector<double>{24.0, 0.0}));
}

TEST(InPlaceAutograd, FillPassesZerosToThePast) {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = x * 2.0;
  y.fill_(5.0);
  (y * y).sum().backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{0.0, 0.0}));
}

TEST(InPlaceAutograd, NothingIsRecordedWithoutGradMode) {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = x * 2.0;
  Tensor buf = zeros({2}, {.dtype = DType::f64});
  {
    NoGradGuard ng;
    y.add_(1.0);
    buf.copy_(x);
  }
  EXPECT_EQ(y.grad_fn()->name(), "mul");
  EXPECT_FALSE(buf.requires_grad());
  EXPECT_EQ(vec(y), (std::vector<double>{3.0, 5.0}));
}

TEST(Autograd, IntegerTensorsCannotRequireGrad) {
  Tensor i = zeros({2}, {.dtype = DType::i64});
  EXPECT_THROW(i.requires_grad_(true), Error);
}

TEST(Autograd, DeepChainDoesNotOverflowTheStack) {
  Tensor x = leaf({1.0});
  Tensor y = x;
  for (int i = 0; i < 20000; ++i) y = add(y, 0.0);
  sum(y).backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{1.0}));
}

TEST(Autograd, QueuedCallbacksRunAfterAllNodesInOrder) {
  // A callback queued from the first leaf's hook must see both leaves' gradients: callbacks run
  // after every node, before backward returns.
  Tensor x = leaf({1.0, 2.0});
  Tensor w = leaf({3.0, 4.0});
  std::vector<std::string> log;
  auto queue = [&](const std::string& what) {
    autograd::queue_callback([&log, what] { log.push_back(what); });
  };
  x.register_post_accumulate_grad_hook([&](Tensor&) {
    log.push_back("x");
    queue("first from x");
    autograd::queue_callback([&] {
      log.push_back(std::string("grads ") +
                    (x.grad().defined() && w.grad().defined() ? "set" : "missing"));
      queue("queued by a callback");
    });
  });
  w.register_post_accumulate_grad_hook([&](Tensor&) {
    log.push_back("w");
    queue("from w");
  });
  sum(mul(mul(x, w), 2.0)).backward();
  ASSERT_EQ(log.size(), 6u);
  // The two hooks ran first (in either order), then the callbacks in queueing order.
  const bool x_first = log[0] == "x";
  EXPECT_EQ(log[1], x_first ? "w" : "x");
  std::vector<std::string> tail(log.begin() + 2, log.end());
  std::vector<std::string> expected =
      x_first
          ? std::vector<std::string>{"first from x", "grads set", "from w", "queued by a callback"}
          : std::vector<std::string>{"from w", "first from x", "grads set", "queued by a callback"};
  EXPECT_EQ(tail, expected);

  // The queue belonged to that backward: the next one runs only its own callbacks.
  log.clear();
  sum(mul(x, w)).backward();
  EXPECT_EQ(log.size(), 6u);
}

TEST(Autograd, QueueCallbackOutsideBackwardIsAnError) {
  testing::expect_error([] { autograd::queue_callback([] {}); },
                        {"queue_callback", "outside backward"});
}

TEST(Autograd, FailedBackwardDropsItsCallbacks) {
  Tensor x = leaf({1.0});
  int ran = 0;
  bool fail = true;
  x.register_hook([&](const Tensor&) {
    autograd::queue_callback([&] { ++ran; });
    if (fail) SINTER_CHECK(false, "hook: planned failure");
    return Tensor();
  });
  testing::expect_error([&] { sum(mul(x, 2.0)).backward(); }, {"planned failure"});
  EXPECT_EQ(ran, 0);
  fail = false;
  sum(mul(x, 2.0)).backward();
  EXPECT_EQ(ran, 1);
  // Outside backward again, even after the failure.
  testing::expect_error([] { autograd::queue_callback([] {}); }, {"outside backward"});
}

TEST(Autograd, ThrowingCallbackDropsTheRest) {
  Tensor x = leaf({1.0});
  int ran = 0;
  x.register_post_accumulate_grad_hook([&](Tensor&) {
    autograd::queue_callback([] { SINTER_CHECK(false, "callback: planned failure"); });
    autograd::queue_callback([&] { ++ran; });
  });
  testing::expect_error([&] { sum(x).backward(); }, {"planned failure"});
  EXPECT_EQ(ran, 0);
}
}  // namespace
}  // namespace sinter

namespace sinter {
namespace {

// Per Note [anomaly detection], the first NaN or inf a backward produces names the node, the input
// and the forward inputs' shapes; without the guard the backward completes.
TEST(AutogradGrad, ReturnsGradientsWithoutTouchingAnyGrad) {
  // y = sum(w * x^2): dy/dx = 2 w x, and w (not an input) gets nothing.
  Tensor x = leaf({1.0, -2.0, 3.0});
  Tensor w = leaf({0.5, 2.0, -1.0});
  Tensor y = sum(mul(w, mul(x, x)));
  const std::vector<Tensor> g = autograd::grad({y}, {x});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(vec(g[0]), (std::vector<double>{1.0, -8.0, -6.0}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
}

TEST(AutogradGrad, NonLeafInputsSeedsAndSeveralInputs) {
  Tensor x = leaf({1.0, 2.0});
  Tensor h = mul(x, 3.0);  // a non-leaf input: the gradient stops there
  Tensor y = mul(exp(h), x);
  const Tensor seed = from_vector<double>({1.0, 10.0}, {2});
  const std::vector<Tensor> g = autograd::grad({y}, {h, x}, {seed}, /*retain_graph=*/true);
  for (int i = 0; i < 2; ++i) {
    const double xi = i + 1.0, si = i == 0 ? 1.0 : 10.0;
    EXPECT_NEAR(vec(g[0])[i], si * std::exp(3 * xi) * xi, 1e-9);  // d y / d h
    // d y / d x: through h (3 e^{3x} x) and directly (e^{3x}).
    EXPECT_NEAR(vec(g[1])[i], si * (3 * std::exp(3 * xi) * xi + std::exp(3 * xi)), 1e-9);
  }
  // The graph was retained: backward still runs, and matches.
  y.backward(seed);
  EXPECT_EQ(vec(x.grad()), vec(g[1]));
}

TEST(AutogradGrad, UnusedInputsAndErrors) {
  Tensor x = leaf({1.0});
  Tensor z = leaf({2.0});
  Tensor y = sum(mul(x, 2.0));
  testing::expect_error([&] { autograd::grad({y}, {z}, {}, true); },
                        {"grad: input 0 (shape [1]) was not used"});
  const std::vector<Tensor> g = autograd::grad({y}, {x, z}, {}, true, /*allow_unused=*/true);
  EXPECT_EQ(vec(g[0]), std::vector<double>{2.0});
  EXPECT_FALSE(g[1].defined());
  testing::expect_error([&] { autograd::grad({y}, {from_vector<double>({1.0}, {1})}); },
                        {"grad: input 0 (shape [1]) does not require grad"});
  testing::expect_error([&] { autograd::grad({y}, {}); }, {"grad: no inputs"});
  // Without retain_graph the graph is freed, as by backward().
  autograd::grad({y}, {x});
  testing::expect_error([&] { autograd::grad({y}, {x}); },
                        {"backward through the graph a second time"});
}

TEST(AutogradGrad, LeafHooksRunOnTheReturnedGradient) {
  Tensor x = leaf({1.0, 2.0});
  int calls = 0;
  x.register_hook([&](const Tensor& g) {
    ++calls;
    return mul(g, 10.0);
  });
  const std::vector<Tensor> g = autograd::grad({sum(mul(x, x))}, {x});
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(vec(g[0]), (std::vector<double>{20.0, 40.0}));
  EXPECT_FALSE(x.grad().defined());
}

TEST(DetectAnomaly, NamesTheNodeThatMadeAnInfOrNan) {
  auto run = [](double v) {
    Tensor x = from_vector<double>({1.0, v, 4.0}, {3}).to(DType::f32).requires_grad_(true);
    Tensor w = full({3}, 2.0).requires_grad_(true);
    sum(mul(sqrt(x), w)).backward();  // d sqrt(x)/dx = 0.5 / sqrt(x): inf at 0, NaN below
    return x.grad();
  };
  EXPECT_TRUE(std::isinf(run(0.0).to_vector<double>()[1]));  // no guard: the inf goes through
  EXPECT_FALSE(autograd::is_anomaly_enabled());
  {
    const autograd::DetectAnomalyGuard detect;
    EXPECT_TRUE(autograd::is_anomaly_enabled());
    testing::expect_error([&] { run(0.0); },
                          {"autograd anomaly", "sqrt", "inf", "input 0", "[3] f32"});
    // sqrt(-1) is NaN in the forward: the first gradient it poisons is mul's for w (input 1).
    testing::expect_error([&] { run(-1.0); }, {"autograd anomaly", "mul", "NaN", "input 1"});
    EXPECT_NEAR(run(9.0).to_vector<double>()[1], 2.0 * 0.5 / 3.0, 1e-6);  // finite: no error
    {
      const autograd::DetectAnomalyGuard off(false);
      EXPECT_FALSE(autograd::is_anomaly_enabled());
      EXPECT_TRUE(std::isinf(run(0.0).to_vector<double>()[1]));
    }
  }
  EXPECT_FALSE(autograd::is_anomaly_enabled());
}

// The guard of Note [inference mode] in include/sinter/autograd.h.
TEST(Autograd, InferenceModeRecordsNothingAndMarksItsTensors) {
  Tensor x = leaf({1.0, 2.0});
  Tensor normal = from_vector<double>({3.0, 4.0}, {2});
  Tensor y, v;
  {
    InferenceMode im;
    EXPECT_TRUE(InferenceMode::is_enabled());
    EXPECT_FALSE(GradMode::is_enabled());
    y = mul(x, 2.0);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    EXPECT_TRUE(y.is_inference());
    v = y.narrow(0, 0, 1);  // a view of an inference tensor
    // No version bumps on inference tensors; normal ones still count.
    const uint32_t before = normal.version();
    y.add_(1.0);
    EXPECT_EQ(y.version(), 0u);
    normal.add_(1.0);
    EXPECT_EQ(normal.version(), before + 1);
    {
      InferenceMode off(false);
      EXPECT_FALSE(InferenceMode::is_enabled());
      EXPECT_FALSE(mul(x, 1.0).is_inference());
    }
    EXPECT_TRUE(InferenceMode::is_enabled());
  }
  EXPECT_FALSE(InferenceMode::is_enabled());
  EXPECT_TRUE(GradMode::is_enabled());
  EXPECT_EQ(vec(y), (std::vector<double>{3.0, 5.0}));
  EXPECT_TRUE(v.is_inference());
  EXPECT_TRUE(y.detach().is_inference());
  EXPECT_FALSE(x.is_inference());
  EXPECT_FALSE(y.clone().is_inference());
  // Used without autograd outside the mode: fine.
  EXPECT_EQ(vec(add(y, 1.0)), (std::vector<double>{4.0, 6.0}));
  {
    NoGradGuard ng;
    EXPECT_EQ(vec(mul(y, x)), (std::vector<double>{3.0, 10.0}));
  }
}

TEST(Autograd, InferenceTensorsCannotEnterAutogradOutsideTheMode) {
  Tensor w = leaf({1.0, 2.0});
  Tensor y;
  {
    InferenceMode im;
    y = from_vector<double>({3.0, 4.0}, {2});
    EXPECT_TRUE(y.is_inference());
  }
  // mul saves its operands for backward.
  testing::expect_error([&] { (void)mul(w, y); },
                        {"mul", "InferenceMode", "saved for backward", "clone"});
  testing::expect_error([&] { y.requires_grad_(true); },
                        {"requires_grad_", "InferenceMode", "clone"});
  testing::expect_error([&] { y.add_(1.0); }, {"add_", "InferenceMode", "in place", "clone"});
  testing::expect_error([&] { y.copy_(w.detach()); }, {"copy_", "InferenceMode", "clone"});
  testing::expect_error([&] { y.fill_(0.0); }, {"fill_", "InferenceMode"});
  // A clone is a normal tensor, and the gradient flows through it.
  Tensor c = y.clone();
  sum(mul(w, c)).backward();
  EXPECT_EQ(vec(w.grad()), (std::vector<double>{3.0, 4.0}));
  EXPECT_EQ(vec(y), (std::vector<double>{3.0, 4.0}));  // nothing was changed by the refused ops
}

}  // namespace
}  // namespace sinter

namespace sinter::testing {
namespace {

// Per Note [accumulation first], a leaf's gradient is accumulated (and its post-accumulate hooks
// run) as soon as it is whole, before the other ready nodes, whether or not a graph from before
// keeps the leaf's accumulation node (and its old creation number) alive.
TEST(Autograd, AccumulationRunsFirstWhateverGraphsAreKept) {
  Tensor x = full({3}, 2.0), w1 = full({3}, 3.0).requires_grad_(),
         w2 = full({3}, 4.0).requires_grad_();
  std::vector<std::string> log;
  w2.register_post_accumulate_grad_hook([&](Tensor&) { log.push_back("w2 accumulated"); });
  auto run = [&] {
    const Tensor h = x * w1;
    h.register_hook([&](const Tensor&) {
      log.push_back("h's node");
      return Tensor();
    });
    return (h * w2).sum();
  };
  run().backward();
  const std::vector<std::string> fresh = log;
  EXPECT_EQ(fresh, (std::vector<std::string>{"w2 accumulated", "h's node"}));
  const Tensor kept = run();  // keeps the leaves' accumulation nodes of this graph alive
  log.clear();
  run().backward();
  EXPECT_EQ(log, fresh);
  kept.backward();
}

}  // namespace
}  // namespace sinter::testing

// optim::Muon (Note [muon]): its step against the formulas written out here in plain f64
// arithmetic (momentum, Nesterov, the Newton-Schulz iteration, both learning-rate scales, weight
// decay, wide and tall matrices), the bf16 orthogonalization, AdamW groups against optim::AdamW,
// state dicts, schedules, parameter groups, muon_split, the errors, and the CUDA step against the
// CPU's.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "sinter/nn/models.h"
#include "sinter/optim.h"
#include "test_util.h"

namespace sinter {
namespace {

using optim::Muon;
using optim::MuonOptions;
using ::sinter::testing::all_close;
using ::sinter::testing::expect_error;
using ::sinter::testing::fresh_seed;

// A row-major (rows, cols) matrix of doubles.
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;
  double& at(int64_t r, int64_t c) { return v[r * cols + c]; }
  double at(int64_t r, int64_t c) const { return v[r * cols + c]; }
};

Mat zero_mat(int64_t rows, int64_t cols) { return {rows, cols, std::vector<double>(rows * cols)}; }

Mat transposed(const Mat& m) {
  Mat t = zero_mat(m.cols, m.rows);
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) t.at(c, r) = m.at(r, c);
  }
  return t;
}

Mat product(const Mat& a, const Mat& b) {
  Mat out = zero_mat(a.rows, b.cols);
  for (int64_t r = 0; r < a.rows; ++r) {
    for (int64_t c = 0; c < b.cols; ++c) {
      double s = 0;
      for (int64_t k = 0; k < a.cols; ++k) s += a.at(r, k) * b.at(k, c);
      out.at(r, c) = s;
    }
  }
  return out;
}

// x a + y b, elementwise.
Mat combine(double x, const Mat& a, double y, const Mat& b) {
  Mat out = a;
  for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = x * a.v[i] + y * b.v[i];
  return out;
}

// NS(u) of Note [muon], written out.
Mat orthogonalize(const Mat& u, const MuonOptions& o) {
  const bool tall = u.rows > u.cols;
  Mat x = tall ? transposed(u) : u;
  double norm = 0;
  for (double e : x.v) norm += e * e;
  norm = std::max(std::sqrt(norm), o.eps);
  for (double& e : x.v) e /= norm;
  for (int k = 0; k < static_cast<int>(o.ns_steps); ++k) {
    const Mat m = product(x, transposed(x));
    const Mat n = combine(o.ns_b, m, o.ns_c, product(m, m));
    x = combine(o.ns_a, x, 1.0, product(n, x));
  }
  return tall ? transposed(x) : x;
}

// The gradient of step t of a (rows, cols) parameter: varied signs and sizes.
Mat grad_at(int64_t rows, int64_t cols, int t) {
  Mat g = zero_mat(rows, cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    g.v[i] =
        std::sin(0.7 * static_cast<double>(i) + 1.3 * t) / t + 0.05 * static_cast<double>(i % 3);
  }
  return g;
}

Mat start(int64_t rows, int64_t cols) {
  Mat p = zero_mat(rows, cols);
  for (int64_t i = 0; i < rows * cols; ++i) p.v[i] = std::cos(0.3 * static_cast<double>(i)) - 0.2;
  return p;
}

Tensor tensor_of(const Mat& m) { return from_vector<double>(m.v, {m.rows, m.cols}); }

// `steps` steps of Note [muon]'s formulas on start(rows, cols).
Mat reference_steps(int64_t rows, int64_t cols, const MuonOptions& o, int steps) {
  Mat p = start(rows, cols), buf = zero_mat(rows, cols);
  const double a = static_cast<double>(rows), b = static_cast<double>(cols);
  const double lr = o.match_rms_adamw ? o.lr * 0.2 * std::sqrt(std::max(a, b))
                                      : o.lr * std::sqrt(std::max(1.0, a / b));
  for (int t = 1; t <= steps; ++t) {
    const Mat g = grad_at(rows, cols, t);
    buf = combine(o.momentum, buf, 1.0 - o.momentum, g);
    const Mat u = o.nesterov ? combine(1.0 - o.momentum, g, o.momentum, buf) : buf;
    const Mat update = orthogonalize(u, o);
    p = combine(1.0 - o.lr * o.weight_decay, p, -lr, update);
  }
  return p;
}

Tensor muon_steps(int64_t rows, int64_t cols, const MuonOptions& o, int steps) {
  Tensor p = tensor_of(start(rows, cols)).requires_grad_(true);
  Muon opt({p}, o);
  for (int t = 1; t <= steps; ++t) {
    p.set_grad(tensor_of(grad_at(rows, cols, t)));
    opt.step();
  }
  return p.detach();
}

TEST(Muon, StepEqualsTheWrittenFormulasInF64) {
  for (const bool nesterov : {true, false}) {
    for (const bool match_rms : {false, true}) {
      for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{3, 5}, {6, 4}, {4, 4}}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) +
                     (nesterov ? ", nesterov" : "") + (match_rms ? ", match_rms_adamw" : ""));
        const MuonOptions o{.lr = 0.02,
                            .weight_decay = 0.1,
                            .momentum = 0.9,
                            .nesterov = nesterov,
                            .match_rms_adamw = match_rms,
                            .ns_bf16 = false};
        const Mat want = reference_steps(rows, cols, o, 3);
        EXPECT_TRUE(all_close(muon_steps(rows, cols, o, 3), tensor_of(want), 1e-12, 1e-12));
      }
    }
  }
}

// Other coefficients and step counts go through: the published ones are defaults, not constants.
TEST(Muon, CoefficientsAndStepCountAreTheOptions) {
  const MuonOptions o{.lr = 0.05,
                      .weight_decay = 0.0,
                      .momentum = 0.5,
                      .ns_a = 2.0,
                      .ns_b = -1.5,
                      .ns_c = 0.5,
                      .ns_steps = 3,
                      .ns_bf16 = false};
  EXPECT_TRUE(
      all_close(muon_steps(5, 3, o, 2), tensor_of(reference_steps(5, 3, o, 2)), 1e-12, 1e-12));
  // No steps: the normalized update itself.
  const MuonOptions none{.ns_steps = 0, .ns_bf16 = false};
  const Mat u = grad_at(2, 3, 1);
  EXPECT_TRUE(all_close(optim::muon_orthogonalize(tensor_of(u), none),
                        tensor_of(orthogonalize(u, none)), 1e-14, 1e-14));
}

// With ns_bf16 (PyTorch's) the iteration runs in bf16, whatever the update's dtype: its result is
// bf16, near the f64 iteration's (bf16 keeps 8 bits), and the singular values it gives are near 1
// (O O^T near the identity) as the iteration intends.
TEST(Muon, Bf16OrthogonalizationIsNearTheF64One) {
  manual_seed(fresh_seed());
  const Tensor u = randn({16, 48}, {.dtype = DType::f64});
  const Tensor exact = optim::muon_orthogonalize(u, {.ns_bf16 = false});
  const Tensor bf = optim::muon_orthogonalize(u, {});
  EXPECT_EQ(bf.dtype(), DType::bf16);
  EXPECT_TRUE(all_close(bf.to(DType::f64), exact, 0.05, 0.02));
  const Tensor bf64 = bf.to(DType::f64);
  const Tensor gram = matmul(bf64, bf64.t());
  const Tensor diag = diagonal(gram);
  EXPECT_GT(min(diag).item<double>(), 0.3);
  EXPECT_LT(max(diag).item<double>(), 1.6);
  // A tall update is orthogonalized as its transpose.
  const Tensor tall = optim::muon_orthogonalize(u.t(), {.ns_bf16 = false});
  EXPECT_TRUE(all_close(tall, exact.t(), 1e-13, 1e-13));
}

// An adamw group steps as optim::AdamW with the group's lr, betas, eps and weight decay, bit for
// bit (the same fused rule), on parameters of any shape; its Muon neighbours are unaffected.
TEST(Muon, AdamwGroupsStepAsAdamW) {
  manual_seed(fresh_seed());
  const Tensor a0 = randn({3, 4, 2}), b0 = randn({5}), m0 = randn({4, 6});
  Tensor a = a0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
  Tensor m = m0.clone().requires_grad_(true);
  Tensor ra = a0.clone().requires_grad_(true), rb = b0.clone().requires_grad_(true);
  Muon opt({{.params = {m}},
            {.params = {a, b},
             .lr = 3e-3,
             .weight_decay = 0.05,
             .adamw = true,
             .betas = optim::Betas{0.8, 0.95},
             .adamw_eps = 1e-6}});
  optim::AdamW ref({ra, rb}, {.lr = 3e-3, .betas = {0.8, 0.95}, .eps = 1e-6, .weight_decay = 0.05});
  for (int t = 0; t < 3; ++t) {
    const Tensor ga = randn({3, 4, 2}), gb = randn({5});
    a.set_grad(ga.clone());
    b.set_grad(gb.clone());
    m.set_grad(randn({4, 6}));
    ra.set_grad(ga.clone());
    rb.set_grad(gb.clone());
    opt.step();
    ref.step();
  }
  EXPECT_TRUE(all_close(a, ra, 0, 0));
  EXPECT_TRUE(all_close(b, rb, 0, 0));
  EXPECT_EQ(opt.state(1, 0).count("exp_avg"), 1u);
  EXPECT_EQ(opt.state(1, 0).at("step").item<double>(), 3.0);
  EXPECT_EQ(opt.state(0, 0).count("momentum_buffer"), 1u);
  EXPECT_EQ(opt.state(0, 0).count("exp_avg"), 0u);
}

// Two Muon groups with their own lr and momentum each follow the formulas with theirs.
TEST(Muon, ParameterGroupsTakeTheirOwnOptions) {
  Tensor p = tensor_of(start(3, 5)).requires_grad_(true);
  Tensor q = tensor_of(start(4, 2)).requires_grad_(true);
  Muon opt({{.params = {p}}, {.params = {q}, .lr = 0.1, .momentum = 0.5}},
           {.lr = 0.02, .ns_bf16 = false});
  for (int t = 1; t <= 2; ++t) {
    p.set_grad(tensor_of(grad_at(3, 5, t)));
    q.set_grad(tensor_of(grad_at(4, 2, t)));
    opt.step();
  }
  EXPECT_TRUE(all_close(p, tensor_of(reference_steps(3, 5, {.lr = 0.02, .ns_bf16 = false}, 2)),
                        1e-12, 1e-12));
  EXPECT_TRUE(all_close(
      q, tensor_of(reference_steps(4, 2, {.lr = 0.1, .momentum = 0.5, .ns_bf16 = false}, 2)), 1e-12,
      1e-12));
}

// A state dict taken after 2 steps and loaded into a fresh Muon (and parameters) continues exactly
// as the original does; the hyperparameters travel with it.
TEST(Muon, StateDictRoundTrips) {
  manual_seed(fresh_seed());
  const Tensor m0 = randn({4, 6}, {.dtype = DType::f64}), v0 = randn({6}, {.dtype = DType::f64});
  auto make = [&](Tensor& m, Tensor& v) {
    m = m0.clone().requires_grad_(true);
    v = v0.clone().requires_grad_(true);
    return std::make_unique<Muon>(
        std::vector<optim::MuonGroup>{{.params = {m}}, {.params = {v}, .adamw = true}},
        MuonOptions{.lr = 0.03, .momentum = 0.8});
  };
  Tensor m, v, m2, v2;
  auto opt = make(m, v);
  std::vector<Tensor> grads;
  for (int t = 0; t < 4; ++t) {
    grads.push_back(randn({4, 6}, {.dtype = DType::f64}));
    grads.push_back(randn({6}, {.dtype = DType::f64}));
  }
  for (int t = 0; t < 2; ++t) {
    m.set_grad(grads[2 * t]);
    v.set_grad(grads[2 * t + 1]);
    opt->step();
  }
  const StateDict saved = opt->state_dict();
  EXPECT_EQ(saved.count("state.0.0.momentum_buffer"), 1u);
  EXPECT_EQ(saved.count("state.1.0.exp_avg_sq"), 1u);
  EXPECT_EQ(saved.at("param_groups.1.adamw").item<double>(), 1.0);
  auto opt2 = make(m2, v2);
  opt2->load_state_dict(saved);
  {
    NoGradGuard ng;
    m2.copy_(m);
    v2.copy_(v);
  }
  EXPECT_DOUBLE_EQ(opt2->lr(0), 0.03);
  for (int t = 2; t < 4; ++t) {
    for (auto [mm, vv, o] : {std::tuple{m, v, opt.get()}, std::tuple{m2, v2, opt2.get()}}) {
      mm.set_grad(grads[2 * t]);
      vv.set_grad(grads[2 * t + 1]);
      o->step();
    }
  }
  EXPECT_TRUE(all_close(m2, m, 0, 0));
  EXPECT_TRUE(all_close(v2, v, 0, 0));
}

// A schedule sets every group's lr (Muon's and AdamW's), and the step follows it.
TEST(Muon, SchedulesDriveEveryGroup) {
  Tensor p = tensor_of(start(3, 5)).requires_grad_(true);
  Tensor b = from_vector<double>({0.5, -0.5}).requires_grad_(true);
  Muon opt({{.params = {p}}, {.params = {b}, .lr = 0.01, .adamw = true}},
           {.lr = 0.04, .ns_bf16 = false});
  optim::StepLR sched(opt, 1, 0.5);
  p.set_grad(tensor_of(grad_at(3, 5, 1)));
  b.set_grad(from_vector<double>({1.0, -1.0}));
  opt.step();
  sched.step();
  EXPECT_DOUBLE_EQ(opt.lr(0), 0.02);
  EXPECT_DOUBLE_EQ(opt.lr(1), 0.005);
  // Step 2 at lr 0.02 from step 1 at 0.04: the formulas with the lr changed between the steps.
  Mat want = start(3, 5), buf = zero_mat(3, 5);
  const MuonOptions o{.ns_bf16 = false};
  for (int t = 1; t <= 2; ++t) {
    const double lr = t == 1 ? 0.04 : 0.02;
    const Mat g = grad_at(3, 5, t);
    buf = combine(o.momentum, buf, 1.0 - o.momentum, g);
    const Mat update = orthogonalize(combine(1.0 - o.momentum, g, o.momentum, buf), o);
    want = combine(1.0 - lr * o.weight_decay, want, -lr * std::sqrt(1.0), update);
  }
  p.set_grad(tensor_of(grad_at(3, 5, 2)));
  b.set_grad(from_vector<double>({1.0, -1.0}));
  opt.step();
  EXPECT_TRUE(all_close(p, tensor_of(want), 1e-12, 1e-12));
}

TEST(Muon, SplitsAModelIntoHiddenMatricesAndTheRest) {
  const nn::models::GPTConfig gc{
      .vocab_size = 32, .context_length = 8, .n_layer = 2, .n_head = 2, .n_embd = 16};
  const nn::models::GPT gpt(gc);
  const auto [matrices, rest] = optim::muon_split(gpt);
  EXPECT_EQ(matrices.size() + rest.size(), gpt.parameters().size());
  auto has = [](const std::vector<Tensor>& ts, const Tensor& t) {
    return std::any_of(ts.begin(), ts.end(), [&](const Tensor& x) { return x.is_same(t); });
  };
  EXPECT_TRUE(has(rest, gpt.wte->weight));  // the embedding (and the tied head)
  EXPECT_TRUE(has(rest, gpt.wpe->weight));
  for (const auto& [name, p] : gpt.named_parameters()) {
    const bool hidden_matrix = p.dim() == 2 && name.rfind("blocks.", 0) == 0;
    EXPECT_EQ(has(matrices, p), hidden_matrix) << name;
  }
  const nn::models::LlamaConfig lc{.vocab_size = 32,
                                   .context_length = 8,
                                   .n_layer = 1,
                                   .n_head = 2,
                                   .n_kv_head = 1,
                                   .n_embd = 16,
                                   .tie_weights = false};
  const nn::models::Llama llama(lc);
  const auto [lm, lr] = optim::muon_split(llama);
  EXPECT_TRUE(has(lr, llama.lm_head->weight));
  EXPECT_TRUE(has(lr, llama.model->embed_tokens->weight));
  EXPECT_EQ(lm.size(), 7u);  // q, k, v, o, gate, up, down
}

TEST(Muon, Errors) {
  Tensor v = zeros({3}).requires_grad_(true), m = zeros({2, 2}).requires_grad_(true);
  expect_error(
      [&] {
        Muon({m, v});
      },
      {"Muon: parameter 1 of group 0 has shape [3]", "adamw = true"});
  expect_error([&] { Muon({m}, {.ns_steps = 2.5}); }, {"ns_steps", "2.5"});
  expect_error([&] { Muon({m}, {.ns_steps = 100}); }, {"ns_steps", "under 100"});
  expect_error([&] { Muon({m}, {.lr = -1}); }, {"Muon", "learning rate -1"});
  expect_error([&] { Muon({m}, {.betas = {1.0, 0.9}}); }, {"Muon", "beta1"});
  expect_error([&] { optim::muon_orthogonalize(v); }, {"muon_orthogonalize", "[3]"});
  Muon ok({{.params = {m}}, {.params = {v}, .adamw = true}});  // a vector in an adamw group
  expect_error([&] { ok.set_hyperparameter(0, "ns_steps", 1.5); }, {"ns_steps", "1.5"});
  // Turned into a Muon group after the constructor: refused at the step, before any group moves.
  ok.set_hyperparameter(1, "adamw", 0.0);
  m.set_grad(ones({2, 2}));
  v.set_grad(ones({3}));
  expect_error([&] { ok.step(); }, {"Muon: parameter 0 of group 1 has shape [3]"});
  EXPECT_EQ(max(abs(m)).item<double>(), 0.0);
  EXPECT_TRUE(ok.state(0, 0).empty());
}

// bf16 parameters: the momentum is each lerp computed in f32 and rounded to bf16 once, as
// PyTorch's lerp_ rounds (three roundings, one per operation, drift where the terms cancel).
TEST(Muon, Bf16MomentumRoundsOnce) {
  manual_seed(fresh_seed());
  Tensor p = randn({8, 12}).to(DType::bf16).requires_grad_(true);
  Muon opt({p}, {.momentum = 0.9});
  Tensor want = zeros({8, 12});
  for (int t = 0; t < 3; ++t) {
    const Tensor g = randn({8, 12}).to(DType::bf16);
    p.set_grad(g);
    opt.step();
    // buf + (1 - momentum) (g - buf) in f32, then rounded.
    want = add(want, mul(sub(g.to(DType::f32), want), 1.0 - 0.9)).to(DType::bf16).to(DType::f32);
    EXPECT_TRUE(all_close(opt.state(0, 0).at("momentum_buffer").to(DType::f32), want, 0, 0))
        << "step " << t;
  }
}

// The CUDA step (the same ops on the device) against the CPU's, f32, with the iteration in f32
// and in bf16, on fresh random inputs.
TEST(CudaMuon, StepMatchesCpu) {
  SINTER_REQUIRE_CUDA();
  manual_seed(fresh_seed());
  for (const bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 iteration" : "f32 iteration");
    const Tensor w0 = randn({64, 96}), t0 = randn({96, 32}), b0 = randn({32});
    std::vector<Tensor> cpu{w0.clone(), t0.clone(), b0.clone()}, gpu;
    for (Tensor& t : cpu) {
      t.requires_grad_(true);
      gpu.push_back(t.detach().to(Device::cuda(0)).requires_grad_(true));
    }
    const MuonOptions o{.lr = 0.02, .ns_bf16 = bf16};
    Muon on_cpu({{.params = {cpu[0], cpu[1]}}, {.params = {cpu[2]}, .adamw = true}}, o);
    Muon on_gpu({{.params = {gpu[0], gpu[1]}}, {.params = {gpu[2]}, .adamw = true}}, o);
    for (int t = 0; t < 3; ++t) {
      for (size_t i = 0; i < cpu.size(); ++i) {
        const Tensor g = randn(cpu[i].shape());
        cpu[i].set_grad(g);
        gpu[i].set_grad(g.to(Device::cuda(0)));
      }
      on_cpu.step();
      on_gpu.step();
    }
    for (size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_TRUE(all_close(gpu[i].cpu(), cpu[i], bf16 ? 2e-3 : 1e-5, bf16 ? 2e-3 : 1e-5))
          << "parameter " << i;
    }
  }
}

}  // namespace
}  // namespace sinter

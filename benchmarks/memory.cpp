// Large memory-bound kernels on CUDA, f32: softmax and log_softmax over the last dim, cross_entropy
// forward + backward, layer_norm and batch_norm (training) forward, sum over the last dim and an
// Adam step. GB/s beside a device-to-device cudaMemcpyAsync of as many bytes in the same run; each
// is validated against the CPU first. Every operand is at least 256 MB, well past the 60 MB L2.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"

#ifdef SINTER_WITH_CUDA
#include <cuda_runtime.h>

#include "internal/cuda_check.h"
#endif

namespace {

using namespace sinter;

enum class Op { Softmax, LogSoftmax, CrossEntropy, LayerNorm, BatchNorm, SumLast, Adam };

const char* op_name(Op op) {
  switch (op) {
    case Op::Softmax:
      return "softmax";
    case Op::LogSoftmax:
      return "log_softmax";
    case Op::CrossEntropy:
      return "cross_entropy_fwd_bwd";
    case Op::LayerNorm:
      return "layer_norm_fwd";
    case Op::BatchNorm:
      return "batch_norm_train_fwd";
    case Op::SumLast:
      return "sum_last";
    case Op::Adam:
      return "adam_step";
  }
  return "?";
}

// One timed problem. Row-wise ops and cross_entropy: (rows, cols). batch_norm: (rows, cols, 64, 64)
// read as (N, C, H, W). Adam: rows * cols parameters in one tensor. Each is 64Mi f32 elements
// (256 MiB) per operand.
struct Case {
  Op op;
  int64_t rows, cols;
};

constexpr Case kCases[] = {
    {Op::Softmax, 65536, 1024},      {Op::Softmax, 2048, 32768},
    {Op::LogSoftmax, 65536, 1024},   {Op::LogSoftmax, 2048, 32768},
    {Op::CrossEntropy, 65536, 1000},  // 65536 samples of 1000 classes: 250 MiB of logits
    {Op::LayerNorm, 65536, 1024},    {Op::LayerNorm, 16384, 4096},
    {Op::BatchNorm, 256, 64},  // x (256, 64, 64, 64)
    {Op::SumLast, 65536, 1024},      {Op::Adam, 8192, 8192},
};

constexpr int64_t kPlane = 64;  // batch_norm's H and W
// Input sets the row-wise ops cycle through, so that no call finds its input in L2.
constexpr int kSets = 2;

std::string case_name(const Case& c) {
  std::string shape;
  switch (c.op) {
    case Op::BatchNorm:
      shape = std::to_string(c.rows) + "x" + std::to_string(c.cols) + "x" + std::to_string(kPlane) +
              "x" + std::to_string(kPlane);
      break;
    case Op::Adam:
      shape = std::to_string((c.rows * c.cols) >> 20) + "Mi_params";
      break;
    default:
      shape = std::to_string(c.rows) + "x" + std::to_string(c.cols);
  }
  return std::string(op_name(c.op)) + "/f32/" + shape;
}

#ifdef SINTER_WITH_CUDA

// What a benchmark times: call(i) runs once on input set i % kSets; bytes is what one call must
// read plus write at the least (each operand touched once unless said otherwise).
struct Problem {
  std::function<void(int)> call;
  int64_t bytes = 0;
  bool host_syncs = false;  // the op waits on the device itself (see time_ms_host_synced)
};

std::string where_bad(const std::string& what, const std::string& bad) {
  return bad.empty() ? "" : what + ": " + bad;
}

// --- row-wise ops: softmax, log_softmax, layer_norm, sum over the last dim ---

// weight and bias: (cols) for layer_norm, undefined otherwise.
Tensor run_rowwise(Op op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  switch (op) {
    case Op::Softmax:
      return softmax(x, 1);
    case Op::LogSoftmax:
      return log_softmax(x, 1);
    case Op::LayerNorm:
      return layer_norm(x, {x.size(1)}, weight, bias);
    case Op::SumLast:
      return sum(x, {1});
    default:
      SINTER_THROW("memory benchmark: ", op_name(op), " is not row-wise");
  }
}

struct Tolerance {
  double atol, rtol;
};

// softmax: exp implementations differ by a few ulps and the row sums by their order (cols * 2^-24
// at worst, relative); its values are near 1 / cols, hence the small atol. log_softmax: the log of
// that sum, an absolute error near 1e-6 on values near -log(cols). layer_norm: mean and variance
// summed in two orders, about 1e-6 absolute on unit-scale outputs. sum: as in elementwise.cpp.
Tolerance rowwise_tolerance(Op op, int64_t cols) {
  switch (op) {
    case Op::Softmax:
      return {1e-9, 1e-4};
    case Op::LogSoftmax:
      return {1e-5, 1e-5};
    case Op::LayerNorm:
      return {1e-5, 1e-5};
    case Op::SumLast:
      return {1e-6 * double(cols), 1e-5};
    default:
      return {0.0, 0.0};
  }
}

// "" when the CUDA op matches the CPU op on a small problem with odd sizes (vector tails, partial
// blocks), on a few rows of the timed width (its per-row code path), and on the first and last rows
// of the timed problem itself (its launch configuration).
std::string validate_rowwise(Op op, int64_t cols, const Tensor& x, const Tensor& weight,
                             const Tensor& bias, const Tensor& out) {
  for (const auto& [r, c] : {std::pair<int64_t, int64_t>{37, 1003}, {3, cols}}) {
    const Tensor xs = randn({r, c});
    Tensor ws, bs;
    if (op == Op::LayerNorm) {
      ws = randn({c});
      bs = randn({c});
    }
    const Tolerance tol = rowwise_tolerance(op, c);
    const Tensor got =
        run_rowwise(op, xs.cuda(), ws.defined() ? ws.cuda() : ws, bs.defined() ? bs.cuda() : bs);
    const std::string bad = bench::compare(
        got.to_vector<float>(), run_rowwise(op, xs, ws, bs).to_vector<float>(), tol.atol, tol.rtol);
    if (!bad.empty()) return shape_str({r, c}) + ": " + bad;
  }
  const Tolerance tol = rowwise_tolerance(op, cols);
  const Tensor wc = weight.defined() ? weight.cpu() : weight;
  const Tensor bc = bias.defined() ? bias.cpu() : bias;
  for (int64_t r0 : {int64_t{0}, x.size(0) - 2}) {
    const std::vector<float> want =
        run_rowwise(op, x.narrow(0, r0, 2).cpu(), wc, bc).to_vector<float>();
    const std::vector<float> got = out.narrow(0, r0, 2).to_vector<float>();
    const std::string bad = bench::compare(got, want, tol.atol, tol.rtol);
    if (!bad.empty())
      return "timed rows " + std::to_string(r0) + ".." + std::to_string(r0 + 1) + ": " + bad;
  }
  return "";
}

// Bytes: x read once and the output written once; layer_norm also reads its (cols) weight and
// bias; sum writes one value per row.
Problem make_rowwise(const Case& c, std::string& bad) {
  const TensorOptions opts{.dtype = DType::f32, .device = Device::cuda(0)};
  auto xs = std::make_shared<std::vector<Tensor>>();
  for (int i = 0; i < kSets; ++i) xs->push_back(randn({c.rows, c.cols}, opts));
  Tensor weight, bias;
  if (c.op == Op::LayerNorm) {
    weight = randn({c.cols}, opts);
    bias = randn({c.cols}, opts);
  }
  bad = where_bad(op_name(c.op), validate_rowwise(c.op, c.cols, (*xs)[0], weight, bias,
                                                  run_rowwise(c.op, (*xs)[0], weight, bias)));
  const int64_t n = c.rows * c.cols;
  int64_t elements = 2 * n;
  if (c.op == Op::LayerNorm) elements += 2 * c.cols;
  if (c.op == Op::SumLast) elements = n + c.rows;
  const Op op = c.op;
  return {.call = [xs, weight, bias,
                   op](int i) { (void)run_rowwise(op, (*xs)[i % kSets], weight, bias); },
          .bytes = elements * 4};
}

// --- cross_entropy forward + backward ---

// The mean loss and the logits' gradient: the forward through the public op, then the gradient
// alone from the recorded node's backward function (Node::apply on loss.grad_fn()), so no engine
// walk and no accumulation into logits.grad is timed.
std::pair<Tensor, Tensor> cross_entropy_fwd_bwd(const Tensor& logits, const Tensor& target) {
  const Tensor loss = cross_entropy(logits, target);
  NoGradGuard ng;
  Tensor dx = loss.grad_fn()->apply(std::vector<Tensor>{ones_like(loss)})[0];
  return {loss, dx};
}

std::string validate_cross_entropy() {
  for (const auto& [n, c] : {std::pair<int64_t, int64_t>{37, 1003}, {64, 1000}}) {
    const Tensor logits = randn({n, c}).requires_grad_();
    const Tensor target = randint(0, c, {n});
    const Tensor logits_dev = logits.detach().cuda().requires_grad_();
    const auto [loss_want, dx_want] = cross_entropy_fwd_bwd(logits, target);
    const auto [loss_got, dx_got] = cross_entropy_fwd_bwd(logits_dev, target.cuda());
    const std::string where = shape_str({n, c});
    std::string bad =
        bench::compare(loss_got.to_vector<float>(), loss_want.to_vector<float>(), 1e-6, 1e-5);
    if (!bad.empty()) return where + " loss: " + bad;
    // The gradient is softmax - onehot over n: relative to its largest element.
    const std::vector<float> want = dx_want.to_vector<float>();
    bad = bench::compare(dx_got.to_vector<float>(), want, 1e-5 * bench::max_abs(want), 1e-4);
    if (!bad.empty()) return where + " gradient: " + bad;
  }
  return "";
}

// Bytes: the logits read by the forward and again by the backward, the gradient written; the
// targets read twice; the per-sample log-sum-exp (f32) written and read back, the per-sample loss
// written. cross_entropy checks its targets' range on the host, so it waits on the device once per
// call.
Problem make_cross_entropy(const Case& c, std::string& bad) {
  const Device dev = Device::cuda(0);
  bad = where_bad("cross_entropy", validate_cross_entropy());
  const Tensor logits = randn({c.rows, c.cols}, {.device = dev}).requires_grad_();
  const Tensor target = randint(0, c.cols, {c.rows}, {.dtype = DType::i64, .device = dev});
  const int64_t n = c.rows * c.cols;
  return {.call = [logits, target](int) { (void)cross_entropy_fwd_bwd(logits, target); },
          .bytes = 3 * n * 4 + c.rows * (2 * 8 + 3 * 4),
          .host_syncs = true};
}

// --- batch_norm, training forward ---

std::string validate_batch_norm() {
  for (const Shape& shape : {Shape{6, 5, 7, 9}, Shape{64, 8, 32, 32}}) {
    const int64_t ch = shape[1];
    const Tensor x = randn(shape), w = randn({ch}), b = randn({ch});
    const Tensor rm = randn({ch}), rv = rand({ch}) + 0.5;
    const Tensor rm_dev = rm.cuda(), rv_dev = rv.cuda();
    const Tensor want = batch_norm(x, rm, rv, w, b, true);
    const Tensor got = batch_norm(x.cuda(), rm_dev, rv_dev, w.cuda(), b.cuda(), true);
    const std::string where = shape_str(shape);
    std::string bad = bench::compare(got.to_vector<float>(), want.to_vector<float>(), 1e-5, 1e-5);
    if (!bad.empty()) return where + " output: " + bad;
    bad = bench::compare(rm_dev.to_vector<float>(), rm.to_vector<float>(), 1e-6, 1e-5);
    if (!bad.empty()) return where + " running_mean: " + bad;
    bad = bench::compare(rv_dev.to_vector<float>(), rv.to_vector<float>(), 1e-6, 1e-5);
    if (!bad.empty()) return where + " running_var: " + bad;
  }
  return "";
}

// Bytes: x read twice and the output written once, the least a kernel moves when x does not fit
// in cache (one pass for the batch statistics, one to normalize); the (C) vectors are negligible.
Problem make_batch_norm(const Case& c, std::string& bad) {
  const TensorOptions opts{.dtype = DType::f32, .device = Device::cuda(0)};
  bad = where_bad("batch_norm", validate_batch_norm());
  auto xs = std::make_shared<std::vector<Tensor>>();
  for (int i = 0; i < kSets; ++i) xs->push_back(randn({c.rows, c.cols, kPlane, kPlane}, opts));
  const Tensor w = randn({c.cols}, opts), b = randn({c.cols}, opts);
  const Tensor rm = zeros({c.cols}, opts), rv = ones({c.cols}, opts);
  return {
      .call = [xs, w, b, rm, rv](int i) { (void)batch_norm((*xs)[i % kSets], rm, rv, w, b, true); },
      .bytes = 3 * c.rows * c.cols * kPlane * kPlane * 4};
}

// --- Adam step ---

std::string validate_adam() {
  const int64_t n = 4099;  // odd: vector tails
  const Tensor p0 = randn({n});
  std::vector<Tensor> grads;
  for (int s = 0; s < 3; ++s) grads.push_back(randn({n}));
  Tensor p_cpu = p0.clone().requires_grad_(), p_dev = p0.cuda().requires_grad_();
  optim::Adam opt_cpu({p_cpu}), opt_dev({p_dev});
  for (const Tensor& g : grads) {
    p_cpu.set_grad(g);
    p_dev.set_grad(g.cuda());
    opt_cpu.step();
    opt_dev.step();
  }
  return where_bad("after 3 steps",
                   bench::compare(p_dev.to_vector<float>(), p_cpu.to_vector<float>(), 1e-6, 1e-5));
}

// Bytes: the parameters and the two moments read and written, the gradients read: 7 passes over
// the parameter count. The optimizer holds its state; one step per call.
Problem make_adam(const Case& c, std::string& bad) {
  const TensorOptions opts{.dtype = DType::f32, .device = Device::cuda(0)};
  bad = where_bad("adam", validate_adam());
  const int64_t n = c.rows * c.cols;
  Tensor p = randn({n}, opts).requires_grad_();
  p.set_grad(randn({n}, opts));
  auto opt = std::make_shared<optim::Adam>(std::vector<Tensor>{p});
  return {.call = [opt](int) { opt->step(); }, .bytes = 7 * n * 4};
}

Problem make_problem(const Case& c, std::string& bad) {
  switch (c.op) {
    case Op::CrossEntropy:
      return make_cross_entropy(c, bad);
    case Op::BatchNorm:
      return make_batch_norm(c, bad);
    case Op::Adam:
      return make_adam(c, bad);
    default:
      return make_rowwise(c, bad);
  }
}

void run_memory(benchmark::State& state, const Case& c) {
  const Device dev = Device::cuda(0);
  manual_seed(0);
  std::string bad;
  const Problem prob = make_problem(c, bad);
  if (!bad.empty()) {
    bench::fail(state, std::string(op_name(c.op)) + " differs from the CPU: " + bad);
    return;
  }

  // The reference: a copy of half the bytes, which reads and writes as many bytes as the op, back
  // and forth between two buffers (each larger than L2).
  const int64_t copy_bytes = prob.bytes / 2;
  const Tensor buf[2] = {empty({copy_bytes}, {.dtype = DType::u8, .device = dev}),
                         empty({copy_bytes}, {.dtype = DType::u8, .device = dev})};
  CUstream_st* const stream = cuda::current_stream().handle();
  auto copy = [&](int i) {
    SINTER_CUDA_CHECK(cudaMemcpyAsync(buf[(i + 1) % 2].data_ptr(), buf[i % 2].data_ptr(),
                                      static_cast<size_t>(copy_bytes), cudaMemcpyDeviceToDevice,
                                      stream));
  };
  // An op that waits on the device itself cannot be queued behind a held stream.
  auto time_ours = [&](int reps) {
    return prob.host_syncs ? bench::time_ms_host_synced(reps, prob.call)
                           : bench::time_ms(reps, prob.call);
  };
  time_ours(2 * kSets);  // warm-up: caching allocator, optimizer state, clocks
  bench::time_ms(4, copy);
  // An even count, so that every input set gets the same number of calls.
  const int reps = 2 * bench::reps_for(time_ours(2 * kSets), 5.0, 100);

  // Ours and the copy alternate in every iteration, so both see the same clocks.
  std::vector<double> ours_ms, copy_ms;
  for (auto _ : state) {
    const double o = time_ours(reps);
    const double t = bench::time_ms(reps, copy);
    ours_ms.push_back(o);
    copy_ms.push_back(t);
    state.SetIterationTime(o * 1e-3);
  }
  const double ours_med = bench::median(ours_ms), copy_med = bench::median(copy_ms);
  state.counters["GB/s"] = double(prob.bytes) / (ours_med * 1e-3) / 1e9;
  state.counters["copy_GB/s"] = double(2 * copy_bytes) / (copy_med * 1e-3) / 1e9;
  state.counters["vs_copy"] = (double(prob.bytes) / ours_med) / (double(2 * copy_bytes) / copy_med);
}

#endif  // SINTER_WITH_CUDA

void bm_memory(benchmark::State& state, Case c) {
  if (bench::skip_without_cuda(state)) return;
#ifdef SINTER_WITH_CUDA
  bench::guarded(state, [&] { run_memory(state, c); });
#else
  (void)c;
#endif
}

void register_all() {
  for (const Case& c : kCases) {
    benchmark::RegisterBenchmark(case_name(c).c_str(), bm_memory, c)
        ->Iterations(9)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  return sinter::bench::run_main(argc, argv);
}

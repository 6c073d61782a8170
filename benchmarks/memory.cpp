// Large memory-bound kernels on CUDA, f32 and bf16: softmax and log_softmax over the last dim,
// cross_entropy forward + backward, layer_norm and batch_norm (training) forward, sum over the last
// dim, f32 Adam steps (one 64Mi tensor; a list of ~100M floats in 51 tensors), and FP8 training's
// quantization of a matrix with its transpose (per tensor: the amax pass and the fused pass; per
// 1 x 128 tile and 128 x 1 tile of the transpose: the fused pass alone). GB/s beside a
// device-to-device cudaMemcpyAsync of as many bytes in the same run; each is validated against the
// CPU first. Every operand is at least 128 MB, well past the 60 MB L2. `--smoke` sets up, validates
// and runs each case at a tiny size on the CPU instead.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

using namespace sinter;
using bench::kInputSets;
using bench::Tolerance;

enum class Op {
  Softmax,
  LogSoftmax,
  CrossEntropy,
  LayerNorm,
  BatchNorm,
  SumLast,
  Adam,
  AdamList,
  Fp8Tensorwise,
  Fp8Block
};

constexpr const char* kOpNames[] = {"softmax",
                                    "log_softmax",
                                    "cross_entropy_fwd_bwd",
                                    "layer_norm_fwd",
                                    "batch_norm_train_fwd",
                                    "sum_last",
                                    "adam_step",
                                    "adam_step_list",
                                    "fp8_quantize_transpose_tensorwise",
                                    "fp8_quantize_transpose_block"};

const char* op_name(Op op) { return bench::enum_name(op, kOpNames); }

// One timed problem. Row-wise ops and cross_entropy: (rows, cols). batch_norm: (rows, cols, plane,
// plane) read as (N, C, H, W). Adam: rows * cols parameters in one tensor. Adam list: `rows` blocks
// of a (cols, cols) weight and a (cols) bias, plus three odd-sized tensors. Each is 64Mi elements
// (256 MiB in f32, 128 MiB in bf16) per operand, the list ~100M floats.
struct Case {
  Op op;
  DType dtype;
  int64_t rows, cols;
  int64_t plane = 64;  // batch_norm's H and W
};

constexpr DType kF32 = DType::f32, kBf16 = DType::bf16;

constexpr Case kCases[] = {
    {Op::Softmax, kF32, 65536, 1024},       {Op::Softmax, kF32, 2048, 32768},
    {Op::LogSoftmax, kF32, 65536, 1024},    {Op::LogSoftmax, kF32, 2048, 32768},
    {Op::CrossEntropy, kF32, 65536, 1000},  // 65536 samples of 1000 classes: 250 MiB of logits
    {Op::LayerNorm, kF32, 65536, 1024},     {Op::LayerNorm, kF32, 16384, 4096},
    {Op::BatchNorm, kF32, 256, 64},  // x (256, 64, 64, 64)
    {Op::SumLast, kF32, 65536, 1024},       {Op::Adam, kF32, 8192, 8192},
    {Op::AdamList, kF32, 24, 2048},  // 24 x (2048 x 2048 + 2048) + 5100: 100.7M floats
    {Op::Softmax, kBf16, 65536, 1024},      {Op::LogSoftmax, kBf16, 65536, 1024},
    {Op::CrossEntropy, kBf16, 65536, 1000}, {Op::LayerNorm, kBf16, 65536, 1024},
    {Op::BatchNorm, kBf16, 256, 64},        {Op::SumLast, kBf16, 65536, 1024},
    {Op::Fp8Tensorwise, kF32, 8192, 8192},  {Op::Fp8Block, kF32, 8192, 8192},
    {Op::Fp8Tensorwise, kBf16, 8192, 8192}, {Op::Fp8Block, kBf16, 8192, 8192},
};

// The parameter shapes of an Adam list case: `rows` blocks of a (cols, cols) weight and a (cols)
// bias, then odd sizes (vector tails, a tensor smaller than a block of threads).
std::vector<Shape> adam_list_shapes(const Case& c) {
  std::vector<Shape> shapes;
  for (int64_t i = 0; i < c.rows; ++i) {
    shapes.push_back({c.cols, c.cols});
    shapes.push_back({c.cols});
  }
  for (const Shape& odd : {Shape{1000, 5}, Shape{97}, Shape{3}}) shapes.push_back(odd);
  return shapes;
}

int64_t adam_list_numel(const Case& c) {
  int64_t n = 0;
  for (const Shape& s : adam_list_shapes(c)) n += numel_of(s);
  return n;
}

std::string case_name(const Case& c) {
  std::string shape;
  switch (c.op) {
    case Op::BatchNorm:
      shape = std::to_string(c.rows) + "x" + std::to_string(c.cols) + "x" +
              std::to_string(c.plane) + "x" + std::to_string(c.plane);
      break;
    case Op::Adam:
      shape = std::to_string((c.rows * c.cols) >> 20) + "Mi_params";
      break;
    case Op::AdamList:
      shape = std::to_string(adam_list_shapes(c).size()) + "_tensors_" +
              std::to_string(adam_list_numel(c)) + "_params";
      break;
    default:
      shape = std::to_string(c.rows) + "x" + std::to_string(c.cols);
  }
  return std::string(op_name(c.op)) + "/" + dtype_name(c.dtype) + "/" + shape;
}

// What a benchmark times: call(i) runs once on input set i % kInputSets; bytes is what one call
// must read plus write at the least (each operand touched once unless said otherwise).
struct Problem {
  std::function<void(int)> call;
  int64_t bytes = 0;
  bool host_syncs = false;  // the op waits on the device itself (see time_ms_host_synced)
};

std::string where_bad(const std::string& what, const std::string& bad) {
  return bad.empty() ? "" : what + ": " + bad;
}

int64_t esize(DType dtype) { return static_cast<int64_t>(element_size(dtype)); }

// A tensor on `dev`, or the undefined tensor.
Tensor on(const Tensor& t, Device dev) { return t.defined() ? t.to(dev) : t; }

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

// softmax: exp implementations differ by a few ulps and the row sums by their order (cols * 2^-24
// at worst, relative); its values are near 1 / cols, hence the small atol. log_softmax: the log of
// that sum, an absolute error near 1e-6 on values near -log(cols). layer_norm: mean and variance
// summed in two orders, about 1e-6 absolute on unit-scale outputs. sum: as in elementwise.cpp.
// bf16: both sides compute in f32 from the same bf16 inputs and round the result, which may land
// an ulp (2^-8 relative) apart, so an rtol of two ulps; layer_norm's w * x_hat + b may cancel to
// near 0, where the two f32 values differ by about 1e-6 of its terms' scale: atol 1e-2.
Tolerance rowwise_tolerance(Op op, DType dtype, int64_t cols) {
  const bool bf16 = dtype == DType::bf16;
  switch (op) {
    case Op::Softmax:
      return {1e-9, bf16 ? 1.0 / 64 : 1e-4};
    case Op::LogSoftmax:
      return {1e-5, bf16 ? 1.0 / 64 : 1e-5};
    case Op::LayerNorm:
      return bf16 ? Tolerance{1e-2, 1.0 / 64} : Tolerance{1e-5, 1e-5};
    case Op::SumLast:
      return {1e-6 * double(cols), bf16 ? 1.0 / 64 : 1e-5};
    default:
      return {0.0, 0.0};
  }
}

// "" when the op on `dev` matches the CPU op on a small problem with odd sizes (vector tails,
// partial blocks), on a few rows of the timed width (its per-row code path), and on the first and
// last rows of the timed problem itself (its launch configuration).
std::string validate_rowwise(Op op, DType dtype, Device dev, int64_t cols, const Tensor& x,
                             const Tensor& weight, const Tensor& bias, const Tensor& out) {
  for (const auto& [r, c] : {std::pair<int64_t, int64_t>{37, 1003}, {3, cols}}) {
    const Tensor xs = randn({r, c}, {.dtype = dtype});
    Tensor ws, bs;
    if (op == Op::LayerNorm) {
      ws = randn({c}, {.dtype = dtype});
      bs = randn({c}, {.dtype = dtype});
    }
    const Tolerance tol = rowwise_tolerance(op, dtype, c);
    const Tensor got = run_rowwise(op, xs.to(dev), on(ws, dev), on(bs, dev));
    const std::string bad = bench::compare(
        got.to_vector<float>(), run_rowwise(op, xs, ws, bs).to_vector<float>(), tol.atol, tol.rtol);
    if (!bad.empty()) return shape_str({r, c}) + ": " + bad;
  }
  const Tensor wc = on(weight, Device::cpu()), bc = on(bias, Device::cpu());
  return bench::compare_end_rows(
      out, x.size(0), "timed rows ", rowwise_tolerance(op, dtype, cols),
      [&](int64_t r0) { return run_rowwise(op, x.narrow(0, r0, 2).cpu(), wc, bc); });
}

// Bytes: x read once and the output written once; layer_norm also reads its (cols) weight and
// bias; sum writes one value per row.
Problem make_rowwise(const Case& c, Device dev, std::string& bad) {
  const TensorOptions opts{.dtype = c.dtype, .device = dev};
  auto xs = std::make_shared<std::vector<Tensor>>();
  for (int i = 0; i < kInputSets; ++i) xs->push_back(randn({c.rows, c.cols}, opts));
  Tensor weight, bias;
  if (c.op == Op::LayerNorm) {
    weight = randn({c.cols}, opts);
    bias = randn({c.cols}, opts);
  }
  bad = where_bad(op_name(c.op), validate_rowwise(c.op, c.dtype, dev, c.cols, (*xs)[0], weight,
                                                  bias, run_rowwise(c.op, (*xs)[0], weight, bias)));
  const int64_t n = c.rows * c.cols;
  int64_t elements = 2 * n;
  if (c.op == Op::LayerNorm) elements += 2 * c.cols;
  if (c.op == Op::SumLast) elements = n + c.rows;
  const Op op = c.op;
  return {.call = [xs, weight, bias,
                   op](int i) { (void)run_rowwise(op, (*xs)[i % kInputSets], weight, bias); },
          .bytes = elements * esize(c.dtype)};
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

// bf16: the loss and the gradient rounded to bf16 on both sides: two ulps.
std::string validate_cross_entropy(DType dtype, Device dev) {
  const double rtol = dtype == DType::bf16 ? 1.0 / 64 : 1e-5;
  for (const auto& [n, c] : {std::pair<int64_t, int64_t>{37, 1003}, {64, 1000}}) {
    const Tensor logits = randn({n, c}, {.dtype = dtype}).requires_grad_();
    const Tensor target = randint(0, c, {n});
    const Tensor logits_dev = logits.detach().to(dev).requires_grad_();
    const auto [loss_want, dx_want] = cross_entropy_fwd_bwd(logits, target);
    const auto [loss_got, dx_got] = cross_entropy_fwd_bwd(logits_dev, target.to(dev));
    const std::string where = shape_str({n, c});
    std::string bad =
        bench::compare(loss_got.to_vector<float>(), loss_want.to_vector<float>(), 1e-6, rtol);
    if (!bad.empty()) return where + " loss: " + bad;
    // The gradient is softmax - onehot over n: relative to its largest element.
    const std::vector<float> want = dx_want.to_vector<float>();
    bad = bench::compare(dx_got.to_vector<float>(), want, 1e-5 * bench::max_abs(want),
                         std::max(rtol, 1e-4));
    if (!bad.empty()) return where + " gradient: " + bad;
  }
  return "";
}

// Bytes: the logits read by the forward and again by the backward, the gradient written; the
// targets read twice; the per-sample log-sum-exp (f32) written and read back, the per-sample loss
// written. cross_entropy checks its targets' range on the host, so it waits on the device once per
// call.
Problem make_cross_entropy(const Case& c, Device dev, std::string& bad) {
  bad = where_bad("cross_entropy", validate_cross_entropy(c.dtype, dev));
  const Tensor logits = randn({c.rows, c.cols}, {.dtype = c.dtype, .device = dev}).requires_grad_();
  const Tensor target = randint(0, c.cols, {c.rows}, {.dtype = DType::i64, .device = dev});
  const int64_t n = c.rows * c.cols;
  return {.call = [logits, target](int) { (void)cross_entropy_fwd_bwd(logits, target); },
          .bytes = 3 * n * esize(c.dtype) + c.rows * (2 * 8 + 2 * 4 + esize(c.dtype)),
          .host_syncs = true};
}

// --- batch_norm, training forward ---

// bf16: outputs and running statistics rounded to bf16 on both sides: two ulps, and atol 1e-2 for
// outputs that cancel to near 0 (as for layer_norm).
std::string validate_batch_norm(DType dtype, Device dev) {
  const bool bf16 = dtype == DType::bf16;
  const Tolerance out_tol = bf16 ? Tolerance{1e-2, 1.0 / 64} : Tolerance{1e-5, 1e-5};
  const Tolerance stat_tol = bf16 ? Tolerance{1e-3, 1.0 / 64} : Tolerance{1e-6, 1e-5};
  const TensorOptions opts{.dtype = dtype};
  for (const Shape& shape : {Shape{6, 5, 7, 9}, Shape{64, 8, 32, 32}}) {
    const int64_t ch = shape[1];
    const Tensor x = randn(shape, opts), w = randn({ch}, opts), b = randn({ch}, opts);
    const Tensor rm = randn({ch}, opts), rv = (rand({ch}) + 0.5).to(dtype);
    const Tensor rm_dev = rm.to(dev).clone(), rv_dev = rv.to(dev).clone();
    const Tensor want = batch_norm(x, rm, rv, w, b, true);
    const Tensor got = batch_norm(x.to(dev), rm_dev, rv_dev, w.to(dev), b.to(dev), true);
    const std::string where = shape_str(shape);
    std::string bad =
        bench::compare(got.to_vector<float>(), want.to_vector<float>(), out_tol.atol, out_tol.rtol);
    if (!bad.empty()) return where + " output: " + bad;
    bad = bench::compare(rm_dev.to_vector<float>(), rm.to_vector<float>(), stat_tol.atol,
                         stat_tol.rtol);
    if (!bad.empty()) return where + " running_mean: " + bad;
    bad = bench::compare(rv_dev.to_vector<float>(), rv.to_vector<float>(), stat_tol.atol,
                         stat_tol.rtol);
    if (!bad.empty()) return where + " running_var: " + bad;
  }
  return "";
}

// Bytes: x read twice and the output written once, the least a kernel moves when x does not fit
// in cache (one pass for the batch statistics, one to normalize); the (C) vectors are negligible.
Problem make_batch_norm(const Case& c, Device dev, std::string& bad) {
  const TensorOptions opts{.dtype = c.dtype, .device = dev};
  bad = where_bad("batch_norm", validate_batch_norm(c.dtype, dev));
  auto xs = std::make_shared<std::vector<Tensor>>();
  for (int i = 0; i < kInputSets; ++i)
    xs->push_back(randn({c.rows, c.cols, c.plane, c.plane}, opts));
  const Tensor w = randn({c.cols}, opts), b = randn({c.cols}, opts);
  const Tensor rm = zeros({c.cols}, opts), rv = ones({c.cols}, opts);
  return {.call = [xs, w, b, rm,
                   rv](int i) { (void)batch_norm((*xs)[i % kInputSets], rm, rv, w, b, true); },
          .bytes = 3 * c.rows * c.cols * c.plane * c.plane * esize(c.dtype)};
}

// --- Adam steps ---

// Three steps on `dev` and on the CPU from the same parameters and gradients; "" when the
// parameters agree after them. Odd sizes: vector tails, tensors smaller than a block.
std::string validate_adam(const std::vector<Shape>& shapes, Device dev) {
  std::vector<Tensor> p_cpu, p_dev;
  for (const Shape& s : shapes) {
    const Tensor p0 = randn(s);
    p_cpu.push_back(p0.clone().requires_grad_());
    p_dev.push_back(p0.to(dev).clone().requires_grad_());
  }
  optim::Adam opt_cpu(p_cpu), opt_dev(p_dev);
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Tensor g = randn(shapes[i]);
      p_cpu[i].set_grad(g);
      p_dev[i].set_grad(g.to(dev));
    }
    opt_cpu.step();
    opt_dev.step();
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string bad =
        bench::compare(p_dev[i].to_vector<float>(), p_cpu[i].to_vector<float>(), 1e-6, 1e-5);
    if (!bad.empty()) return "tensor " + std::to_string(i) + " after 3 steps: " + bad;
  }
  return "";
}

// Bytes: the parameters and the two moments read and written, the gradients read: 7 passes over
// the parameter count. The optimizer holds its state; one step per call.
Problem make_adam(const Case& c, Device dev, std::string& bad) {
  const TensorOptions opts{.dtype = DType::f32, .device = dev};
  const std::vector<Shape> shapes =
      c.op == Op::Adam ? std::vector<Shape>{{c.rows * c.cols}} : adam_list_shapes(c);
  bad = where_bad(op_name(c.op),
                  validate_adam(c.op == Op::Adam ? std::vector<Shape>{{4099}}
                                                 : std::vector<Shape>{{4099}, {3}, {64, 33}, {1}},
                                dev));
  std::vector<Tensor> params;
  int64_t n = 0;
  for (const Shape& s : shapes) {
    Tensor p = randn(s, opts).requires_grad_();
    p.set_grad(randn(s, opts));
    params.push_back(p);
    n += numel_of(s);
  }
  auto opt = std::make_shared<optim::Adam>(params);
  return {.call = [opt](int) { opt->step(); }, .bytes = 7 * n * 4};
}

// --- FP8 quantization with the transpose ---

fp8::QuantizedPair run_fp8(Op op, const Tensor& x) {
  return op == Op::Fp8Block ? fp8::quantize_with_transpose(x, DType::f8e4m3, 1, 128, true)
                            : fp8::quantize_tensorwise_with_transpose(x, DType::f8e4m3);
}

// The codes and scales on `dev` equal the CPU's, value for value, on ragged regions.
std::string validate_fp8(Op op, DType dtype, Device dev) {
  const Tensor x = randn({300, 260}, {.dtype = dtype});
  const fp8::QuantizedPair got = run_fp8(op, x.to(dev)), want = run_fp8(op, x);
  const auto values = [](const Tensor& t) { return t.to(DType::f32).to_vector<float>(); };
  for (const auto& [g, w] : {std::pair{got.q, want.q}, std::pair{got.t, want.t}}) {
    for (const auto& [a, b] : {std::pair{g.data, w.data}, std::pair{g.scale_inv, w.scale_inv}}) {
      const std::vector<float> va = values(a), vb = values(b);
      if (a.shape() != b.shape())
        return "shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape());
      const auto diff = std::mismatch(va.begin(), va.end(), vb.begin(), vb.end());
      if (diff.first != va.end()) {
        return "element " + std::to_string(diff.first - va.begin()) + ": " +
               std::to_string(*diff.first) + " vs " + std::to_string(*diff.second);
      }
    }
  }
  return "";
}

// Bytes: x read once, or twice for one scale (its amax first), and two codes per element written.
Problem make_fp8(const Case& c, Device dev, std::string& bad) {
  auto xs = std::make_shared<std::vector<Tensor>>();
  for (int i = 0; i < kInputSets; ++i) {
    xs->push_back(randn({c.rows, c.cols}, {.dtype = c.dtype, .device = dev}));
  }
  bad = where_bad(op_name(c.op), validate_fp8(c.op, c.dtype, dev));
  const int64_t n = c.rows * c.cols, reads = c.op == Op::Fp8Block ? 1 : 2;
  const Op op = c.op;
  return {.call = [xs, op](int i) { (void)run_fp8(op, (*xs)[i % kInputSets]); },
          .bytes = reads * n * esize(c.dtype) + 2 * n};
}

Problem make_problem(const Case& c, Device dev, std::string& bad) {
  switch (c.op) {
    case Op::Fp8Tensorwise:
    case Op::Fp8Block:
      return make_fp8(c, dev, bad);
    case Op::CrossEntropy:
      return make_cross_entropy(c, dev, bad);
    case Op::BatchNorm:
      return make_batch_norm(c, dev, bad);
    case Op::Adam:
    case Op::AdamList:
      return make_adam(c, dev, bad);
    default:
      return make_rowwise(c, dev, bad);
  }
}

#ifdef SINTER_WITH_CUDA

void run_memory(benchmark::State& state, const Case& c) {
  const Device dev = Device::cuda(0);
  manual_seed(0);
  std::string bad;
  const Problem prob = make_problem(c, dev, bad);
  if (bench::failed(state, std::string(op_name(c.op)) + " differs from the CPU: ", bad)) return;
  // An op that waits on the device itself cannot be queued behind a held stream.
  bench::time_bytes_against_copy(state, prob.bytes, [&](int reps) {
    return prob.host_syncs ? bench::time_ms_host_synced(reps, prob.call)
                           : bench::time_ms(reps, prob.call);
  });
}

#endif  // SINTER_WITH_CUDA

void register_all() {
  for (const Case& c : kCases) {
    auto body = [=]([[maybe_unused]] benchmark::State& state) {
#ifdef SINTER_WITH_CUDA
      run_memory(state, c);
#endif
    };
    bench::register_device(case_name(c), 9, benchmark::kMicrosecond, body);
  }
}

// Each case shrunk to a few rows (Adam lists: two blocks of 64), set up, validated and run twice on
// the CPU, through the same code as on a device.
void smoke() {
  for (const Case& c : kCases) {
    Case small = c;
    small.rows = c.op == Op::AdamList ? 2 : c.op == Op::BatchNorm ? 4 : 3;
    small.cols = c.op == Op::AdamList    ? 64
                 : c.op == Op::BatchNorm ? 3
                                         : std::min<int64_t>(c.cols, 1003);
    small.plane = 5;
    bench::smoke_guarded(case_name(c) + " (as " + case_name(small) + ")", [&]() -> std::string {
      manual_seed(0);
      std::string bad;
      const Problem prob = make_problem(small, Device::cpu(), bad);
      if (!bad.empty()) return bad;
      if (prob.bytes <= 0) return "no bytes counted";
      prob.call(0);
      prob.call(1);
      return "";
    });
  }
}

}  // namespace

int main(int argc, char** argv) {
  return sinter::bench::bench_main("bench_memory", argc, argv, smoke, register_all);
}

// Convolution throughput: sinter::conv2d forward, input gradient and weight gradient on CUDA
// against cuDNN on the same operands in the same run, f32 NCHW, on the reference workloads' 3x3
// layers. Each case first checks our result against cuDNN's.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"

#if defined(SINTER_WITH_CUDA) && defined(SINTER_WITH_CUDNN)
#include <cudnn.h>

#include "sinter/autograd.h"
#endif

namespace {

using namespace sinter;

// x (n, c, h, w) * weight (k, c, 3, 3), stride 1, padding 1, no bias: the output has x's size.
struct ConvLayer {
  const char* name;
  int64_t n, c, h, w, k;
};

constexpr int64_t kKernel = 3, kPad = 1;

constexpr ConvLayer kLayers[] = {
    {"cnn_conv1", 256, 1, 28, 28, 32},     // cnn: Conv 1-32 on 28x28
    {"cnn_conv2", 256, 32, 14, 14, 64},    // cnn: Conv 32-64 on 14x14 (after the first pool)
    {"resnet20_s1", 128, 16, 32, 32, 16},  // resnet20 stage 1: 16-16 on 32x32
    {"resnet20_s3", 128, 64, 8, 8, 64},    // resnet20 stage 3: 64-64 on 8x8
    {"c64_32x32", 128, 64, 32, 32, 64},    // the kernel-ceiling case: N=128, C=K=64, 32x32
};

// Which of the three convolutions a benchmark times.
enum class Pass { Forward, BackwardData, BackwardFilter };

// The names say what is timed. The gradients are timed alone ("grad-only"): the backward function
// of the conv2d node, taken from y.grad_fn() and called directly through the public Node::apply, so
// neither the forward, nor the engine's walk, nor the accumulation into .grad is in the time; only
// the gradient asked for is computed, since the other input does not require grad.
const char* pass_name(Pass p) {
  switch (p) {
    case Pass::Forward:
      return "fwd";
    case Pass::BackwardData:
      return "grad_input_only";
    case Pass::BackwardFilter:
      return "grad_weight_only";
  }
  return "?";
}

#if defined(SINTER_WITH_CUDA) && defined(SINTER_WITH_CUDNN)

#define SINTER_CUDNN_CHECK(expr)                                                                \
  do {                                                                                          \
    const cudnnStatus_t sinter_cudnn_status_ = (expr);                                          \
    if (sinter_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                         \
      SINTER_THROW("cuDNN error ", cudnnGetErrorString(sinter_cudnn_status_), " from ", #expr); \
    }                                                                                           \
  } while (0)

// A handle, the three tensor/filter descriptors and the convolution descriptor of one layer.
class CudnnConv {
 public:
  CudnnConv(const cuda::Stream& stream, const ConvLayer& l) {
    SINTER_CUDNN_CHECK(cudnnCreate(&handle_));
    SINTER_CUDNN_CHECK(cudnnSetStream(handle_, stream.handle()));
    SINTER_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_));
    SINTER_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_));
    SINTER_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
    SINTER_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_));
    SINTER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(l.n),
                                                  int(l.c), int(l.h), int(l.w)));
    SINTER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(l.n),
                                                  int(l.k), int(l.h), int(l.w)));
    SINTER_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(l.k),
                                                  int(l.c), int(kKernel), int(kKernel)));
    SINTER_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_, int(kPad), int(kPad), 1, 1, 1, 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    // Full f32 FMA arithmetic. CUDNN_DEFAULT_MATH is not enough: from Ampere on it lets cuDNN run
    // f32 convolutions on TF32 tensor cores, which conv2d in f32 never does.
    SINTER_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_, CUDNN_FMA_MATH));
  }
  ~CudnnConv() {
    // Destruction errors are reported, not thrown, from a destructor.
    report(cudnnDestroyConvolutionDescriptor(conv_));
    report(cudnnDestroyFilterDescriptor(w_));
    report(cudnnDestroyTensorDescriptor(y_));
    report(cudnnDestroyTensorDescriptor(x_));
    report(cudnnDestroy(handle_));
  }
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // Picks the fastest algorithm cuDNN's own timing finds (cudnnFind*, which runs each candidate)
  // among those that stay off tensor cores, and sizes the workspace for it. The descriptor keeps
  // CUDNN_FMA_MATH whatever a result reports, so the run uses FMA arithmetic; validation would
  // catch a TF32 result (its error is near 1e-3 relative).
  void choose(Pass p) {
    pass_ = p;
    constexpr int kMax = 16;
    int count = 0;
    size_t bytes = 0;
    bool found = false;
    switch (p) {
      case Pass::Forward: {
        cudnnConvolutionFwdAlgoPerf_t perf[kMax];
        SINTER_CUDNN_CHECK(
            cudnnFindConvolutionForwardAlgorithm(handle_, x_, w_, conv_, y_, kMax, &count, perf));
        for (int i = 0; i < count && !found; ++i) {
          if (!usable(perf[i].status, perf[i].mathType)) continue;
          fwd_ = perf[i].algo;
          found = true;
        }
        if (found) {
          SINTER_CUDNN_CHECK(
              cudnnGetConvolutionForwardWorkspaceSize(handle_, x_, w_, conv_, y_, fwd_, &bytes));
        }
        break;
      }
      case Pass::BackwardData: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
        SINTER_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(handle_, w_, y_, conv_, x_,
                                                                     kMax, &count, perf));
        for (int i = 0; i < count && !found; ++i) {
          if (!usable(perf[i].status, perf[i].mathType)) continue;
          bwd_data_ = perf[i].algo;
          found = true;
        }
        if (found) {
          SINTER_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(handle_, w_, y_, conv_,
                                                                          x_, bwd_data_, &bytes));
        }
        break;
      }
      case Pass::BackwardFilter: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
        SINTER_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(handle_, x_, y_, conv_, w_,
                                                                       kMax, &count, perf));
        for (int i = 0; i < count && !found; ++i) {
          if (!usable(perf[i].status, perf[i].mathType)) continue;
          bwd_filter_ = perf[i].algo;
          found = true;
        }
        if (found) {
          SINTER_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
              handle_, x_, y_, conv_, w_, bwd_filter_, &bytes));
        }
        break;
      }
    }
    SINTER_CHECK(found, "conv benchmark: cuDNN found no FMA-math algorithm for ", pass_name(p),
                 " among ", count, " candidates");
    workspace_ = empty({int64_t(std::max<size_t>(bytes, 1))},
                       {.dtype = DType::u8, .device = Device::cuda(0)});
    workspace_bytes_ = bytes;
  }

  // Runs the chosen pass: forward y = conv(x, w); backward data dx from (w, dy); backward filter dw
  // from (x, dy). `out` is written whole (beta 0).
  void run(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& out) const {
    const float alpha = 1.0f, beta = 0.0f;
    void* ws = workspace_.data_ptr();
    switch (pass_) {
      case Pass::Forward:
        SINTER_CUDNN_CHECK(cudnnConvolutionForward(handle_, &alpha, x_, x.data_ptr(), w_,
                                                   w.data_ptr(), conv_, fwd_, ws, workspace_bytes_,
                                                   &beta, y_, out.data_ptr()));
        break;
      case Pass::BackwardData:
        SINTER_CUDNN_CHECK(cudnnConvolutionBackwardData(
            handle_, &alpha, w_, w.data_ptr(), y_, dy.data_ptr(), conv_, bwd_data_, ws,
            workspace_bytes_, &beta, x_, out.data_ptr()));
        break;
      case Pass::BackwardFilter:
        SINTER_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
            handle_, &alpha, x_, x.data_ptr(), y_, dy.data_ptr(), conv_, bwd_filter_, ws,
            workspace_bytes_, &beta, w_, out.data_ptr()));
        break;
    }
  }

 private:
  static bool usable(cudnnStatus_t status, cudnnMathType_t math) {
    return status == CUDNN_STATUS_SUCCESS && (math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH);
  }
  static void report(cudnnStatus_t status) {
    if (status != CUDNN_STATUS_SUCCESS)
      std::fprintf(stderr, "cuDNN: %s\n", cudnnGetErrorString(status));
  }

  cudnnHandle_t handle_ = nullptr;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  Pass pass_ = Pass::Forward;
  cudnnConvolutionFwdAlgo_t fwd_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_{};
  Tensor workspace_;
  size_t workspace_bytes_ = 0;
};

// The length of the sum behind each output element: c * 3 * 3 for the forward, k * 3 * 3 for the
// input gradient, n * h * w for the weight gradient.
int64_t reduction_length(const ConvLayer& l, Pass p) {
  switch (p) {
    case Pass::Forward:
      return l.c * kKernel * kKernel;
    case Pass::BackwardData:
      return l.k * kKernel * kKernel;
    case Pass::BackwardFilter:
      return l.n * l.h * l.w;
  }
  return 0;
}

// With standard normal operands a sum of L products has rms sqrt(L), and f32 rounding in any
// summation order drifts by about 2^-24 * L in absolute terms (sqrt(L) relative ulps of the
// result); allow 16 times that, plus 1e-5 of the rms for the transform algorithms cuDNN may pick
// (Winograd, FFT), whose rounding is not that of a plain sum. A lost tile or a wrong tap is off by
// about the rms, thousands of times more.
double tolerance_atol(int64_t length, double rms) {
  return 16.0 * std::ldexp(1.0, -24) * double(length) + 1e-5 * rms;
}

void run_conv(benchmark::State& state, const ConvLayer& l, Pass p) {
  const Device dev = Device::cuda(0);
  const TensorOptions opts{.dtype = DType::f32, .device = dev};
  const cuda::Stream stream = cuda::current_stream();
  manual_seed(0);
  const Tensor x = randn({l.n, l.c, l.h, l.w}, opts);
  const Tensor w = randn({l.k, l.c, kKernel, kKernel}, opts);
  const Tensor dy = randn({l.n, l.k, l.h, l.w}, opts);  // the fixed upstream gradient
  const Conv2dOptions conv_opts{.padding = {kPad, kPad}};

  // Poisoned, so that a cuDNN call that wrote nothing cannot pass for a reference.
  const Shape out_shape = p == Pass::Forward        ? dy.shape()
                          : p == Pass::BackwardData ? x.shape()
                                                    : w.shape();
  const Tensor ref = full(out_shape, std::nan(""), opts);
  CudnnConv theirs_conv(stream, l);
  theirs_conv.choose(p);

  // Ours. For the gradients, a graph whose conv2d node needs only the gradient timed: the input
  // that gets it requires grad, the other one does not.
  Tensor y;
  std::shared_ptr<Node> node;
  if (p != Pass::Forward) {
    const Tensor xg = p == Pass::BackwardData ? x.detach().requires_grad_() : x;
    const Tensor wg = p == Pass::BackwardFilter ? w.detach().requires_grad_() : w;
    y = conv2d(xg, wg, Tensor(), conv_opts);
    node = y.grad_fn();
    SINTER_CHECK(node != nullptr, "conv benchmark: conv2d recorded no node");
  }
  const int slot = p == Pass::BackwardData ? 0 : 1;  // the node returns (dx, dw, dbias)
  auto ours_result = [&]() -> Tensor {
    NoGradGuard ng;
    if (p == Pass::Forward) return conv2d(x, w, Tensor(), conv_opts);
    return node->apply(std::vector<Tensor>{dy})[slot];
  };

  // Validate before timing: a fast wrong kernel is a bug, not a result.
  theirs_conv.run(x, w, dy, ref);
  const std::vector<float> want = ref.to_vector<float>();
  const std::vector<float> got = ours_result().to_vector<float>();
  const double atol = tolerance_atol(reduction_length(l, p), bench::rms(want));
  const std::string bad = bench::compare(got, want, atol, 1e-4);
  if (!bad.empty()) {
    bench::fail(state, std::string(pass_name(p)) + " differs from cuDNN: " + bad);
    return;
  }

  auto ours = [&](int) { (void)ours_result(); };
  auto theirs = [&](int) { theirs_conv.run(x, w, dy, ref); };
  bench::time_ms(3, ours);  // warm-up: caching allocator, clocks
  bench::time_ms(3, theirs);
  const int reps = bench::reps_for(bench::time_ms(3, ours), 20.0);

  // Ours and cuDNN alternate in every iteration, so both see the same clocks and temperature.
  std::vector<double> ours_ms, theirs_ms;
  for (auto _ : state) {
    const double o = bench::time_ms(reps, ours);
    const double t = bench::time_ms(reps, theirs);
    ours_ms.push_back(o);
    theirs_ms.push_back(t);
    state.SetIterationTime(o * 1e-3);
  }
  // The same multiply-adds in each of the three passes.
  const double flop = 2.0 * double(l.n) * double(l.k) * double(l.h) * double(l.w) * double(l.c) *
                      double(kKernel * kKernel);
  const double ours_med = bench::median(ours_ms), theirs_med = bench::median(theirs_ms);
  state.counters["TFLOP/s"] = flop / (ours_med * 1e-3) / 1e12;
  state.counters["cuDNN_TFLOP/s"] = flop / (theirs_med * 1e-3) / 1e12;
  state.counters["vs_cuDNN"] = theirs_med / ours_med;
}

#endif  // SINTER_WITH_CUDA && SINTER_WITH_CUDNN

void bm_conv(benchmark::State& state, ConvLayer l, Pass p) {
  if (bench::skip_without_cuda(state)) return;
#if defined(SINTER_WITH_CUDA) && defined(SINTER_WITH_CUDNN)
  bench::guarded(state, [&] { run_conv(state, l, p); });
#else
  (void)l;
  (void)p;
  // A device but no cuDNN at build time: nothing to compare against, which is not a failure.
  state.SkipWithError("built without cuDNN: no reference to compare against");
#endif
}

void register_all() {
  for (const ConvLayer& l : kLayers) {
    for (Pass p : {Pass::Forward, Pass::BackwardData, Pass::BackwardFilter}) {
      const std::string name = "conv/" + std::string(l.name) + "/" + pass_name(p) + "/n" +
                               std::to_string(l.n) + "_c" + std::to_string(l.c) + "_k" +
                               std::to_string(l.k) + "_" + std::to_string(l.h) + "x" +
                               std::to_string(l.w);
      benchmark::RegisterBenchmark(name.c_str(), bm_conv, l, p)
          ->Iterations(7)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  return sinter::bench::run_main(argc, argv);
}

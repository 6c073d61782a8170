// Convolution throughput: sinter::conv2d forward, input gradient and weight gradient on CUDA
// against cuDNN with the matching math type on the same operands in the same run, fp32, tf32 and
// bf16, NCHW, on the reference workloads' 3x3 layers. Each case first checks our result against
// cuDNN's. `--smoke` checks the three passes' setup against a direct loop on the CPU instead.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "sinter/autograd.h"

#if defined(SINTER_WITH_CUDA) && defined(SINTER_WITH_CUDNN)
#include <cudnn.h>
#endif

namespace {

using namespace sinter;
using bench::Prec, bench::prec_dtype, bench::prec_name;

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
constexpr const char* kPassNames[] = {"fwd", "grad_input_only", "grad_weight_only"};

const char* pass_name(Pass p) { return bench::enum_name(p, kPassNames); }

#if defined(SINTER_WITH_CUDA) && defined(SINTER_WITH_CUDNN)

#define SINTER_CUDNN_CHECK(expr) \
  SINTER_BENCH_STATUS_CHECK("cuDNN", expr, #expr, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)

// A handle, the three tensor/filter descriptors and the convolution descriptor of one layer.
class CudnnConv {
 public:
  CudnnConv(const cuda::Stream& stream, const ConvLayer& l, Prec prec) : prec_(prec) {
    // bf16 tensors with f32 compute (the conv descriptor's type) is cuDNN's BFLOAT16 config.
    const cudnnDataType_t type = prec == Prec::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    SINTER_CUDNN_CHECK(cudnnCreate(&handle_));
    SINTER_CUDNN_CHECK(cudnnSetStream(handle_, stream.handle()));
    SINTER_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_));
    SINTER_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_));
    SINTER_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
    SINTER_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_));
    SINTER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, type, int(l.n), int(l.c),
                                                  int(l.h), int(l.w)));
    SINTER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, type, int(l.n), int(l.k),
                                                  int(l.h), int(l.w)));
    SINTER_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_, type, CUDNN_TENSOR_NCHW, int(l.k), int(l.c),
                                                  int(kKernel), int(kKernel)));
    SINTER_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_, int(kPad), int(kPad), 1, 1, 1, 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    // fp32: full f32 FMA arithmetic. CUDNN_DEFAULT_MATH is not enough: from Ampere on it lets cuDNN
    // run f32 convolutions on TF32 tensor cores. tf32 and bf16: tensor cores allowed.
    SINTER_CUDNN_CHECK(cudnnSetConvolutionMathType(
        conv_, prec == Prec::F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
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

  // One pass's search: find(n, &count, perf) runs and times up to n candidates, pick() takes the
  // fastest usable one into algo, and size(algo, &bytes) gives its workspace.
  template <class Perf, class Algo, class Find, class Size>
  bool choose_algo(Find find, Size size, Algo& algo, int& count, size_t& bytes) {
    constexpr int kMax = 16;
    Perf perf[kMax];
    SINTER_CUDNN_CHECK(find(kMax, &count, perf));
    if (!pick(perf, count, algo)) return false;
    SINTER_CUDNN_CHECK(size(algo, &bytes));
    return true;
  }

  // Picks the fastest algorithm cuDNN's own timing finds (cudnnFind*, which runs each candidate),
  // for fp32 among those that stay off tensor cores, and sizes the workspace for it. For fp32 the
  // descriptor keeps CUDNN_FMA_MATH whatever a result reports, so the run uses FMA arithmetic;
  // validation would catch a TF32 result (its error is near 1e-3 relative).
  // Returns "" when one was found, else why not (cuDNN may have no bf16 algorithm for a layout).
  std::string choose(Pass p) {
    pass_ = p;
    int count = 0;
    size_t bytes = 0;
    bool found = false;
    switch (p) {
      case Pass::Forward:
        found = choose_algo<cudnnConvolutionFwdAlgoPerf_t>(
            [&](int n, int* c, auto* perf) {
              return cudnnFindConvolutionForwardAlgorithm(handle_, x_, w_, conv_, y_, n, c, perf);
            },
            [&](auto algo, size_t* b) {
              return cudnnGetConvolutionForwardWorkspaceSize(handle_, x_, w_, conv_, y_, algo, b);
            },
            fwd_, count, bytes);
        break;
      case Pass::BackwardData:
        found = choose_algo<cudnnConvolutionBwdDataAlgoPerf_t>(
            [&](int n, int* c, auto* perf) {
              return cudnnFindConvolutionBackwardDataAlgorithm(handle_, w_, y_, conv_, x_, n, c,
                                                               perf);
            },
            [&](auto algo, size_t* b) {
              return cudnnGetConvolutionBackwardDataWorkspaceSize(handle_, w_, y_, conv_, x_, algo,
                                                                  b);
            },
            bwd_data_, count, bytes);
        break;
      case Pass::BackwardFilter:
        found = choose_algo<cudnnConvolutionBwdFilterAlgoPerf_t>(
            [&](int n, int* c, auto* perf) {
              return cudnnFindConvolutionBackwardFilterAlgorithm(handle_, x_, y_, conv_, w_, n, c,
                                                                 perf);
            },
            [&](auto algo, size_t* b) {
              return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle_, x_, y_, conv_, w_,
                                                                    algo, b);
            },
            bwd_filter_, count, bytes);
        break;
    }
    if (!found) {
      return std::string("cuDNN found no usable ") + prec_name(prec_) + " algorithm for " +
             pass_name(p) + " among " + std::to_string(count) + " candidates";
    }
    workspace_ = empty({int64_t(std::max<size_t>(bytes, 1))},
                       {.dtype = DType::u8, .device = Device::cuda(0)});
    workspace_bytes_ = bytes;
    return "";
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
  bool usable(cudnnStatus_t status, cudnnMathType_t math) const {
    if (status != CUDNN_STATUS_SUCCESS) return false;
    return prec_ != Prec::F32 || math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH;
  }
  // The first usable algorithm of a cudnnFind* result (fastest first) into `algo`; false if none.
  template <typename Perf, typename Algo>
  bool pick(const Perf* perf, int count, Algo& algo) const {
    for (int i = 0; i < count; ++i) {
      if (!usable(perf[i].status, perf[i].mathType)) continue;
      algo = perf[i].algo;
      return true;
    }
    return false;
  }
  static void report(cudnnStatus_t status) {
    if (status != CUDNN_STATUS_SUCCESS)
      std::fprintf(stderr, "cuDNN: %s\n", cudnnGetErrorString(status));
  }

  Prec prec_;
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

#endif  // SINTER_WITH_CUDA && SINTER_WITH_CUDNN

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

// "" when got matches want. fp32: with standard normal operands a sum of L products has rms
// sqrt(L), and f32 rounding in any summation order drifts by about 2^-24 * L in absolute terms
// (sqrt(L) relative ulps of the result); allow 16 times that, plus 1e-5 of the rms for the
// transform algorithms cuDNN may pick (Winograd, FFT), whose rounding is not that of a plain sum.
// tf32: each product carries its inputs' rounding to 10 mantissa bits (2^-11 relative), done in
// different ways by different implementations: about 1e-3 of the rms, with tails; allow 1e-2.
// bf16: the results are rounded to bf16 (2^-8 relative), two ulps apart at most, plus 1e-2 of the
// rms for cuDNN's algorithms that keep bf16 intermediates. A lost tile or a wrong tap is off by
// about the rms / 3 or more.
std::string check_result(Prec prec, int64_t length, const std::vector<float>& got,
                         const std::vector<float>& want) {
  const double rms = bench::rms(want);
  switch (prec) {
    case Prec::F32:
      return bench::compare(got, want, 16.0 * std::ldexp(1.0, -24) * double(length) + 1e-5 * rms,
                            1e-4);
    case Prec::TF32:
      return bench::compare(got, want, 1e-2 * rms, 1e-2);
    case Prec::BF16:
      return bench::compare(got, want, 1e-2 * rms, 1.0 / 64);
  }
  return "unknown precision";
}

// Sinter's side of one case: conv2d forward, or one gradient alone. For a gradient, a graph whose
// conv2d node needs only the gradient timed (the input that gets it requires grad, the other does
// not), whose backward function is then called directly through the public Node::apply.
class OursConv {
 public:
  OursConv(Pass p, const Tensor& x, const Tensor& w, const Tensor& dy)
      : p_(p), x_(x), w_(w), dy_(dy) {
    if (p == Pass::Forward) return;
    const Tensor xg = p == Pass::BackwardData ? x.detach().requires_grad_() : x;
    const Tensor wg = p == Pass::BackwardFilter ? w.detach().requires_grad_() : w;
    y_ = conv2d(xg, wg, Tensor(), opts_);
    node_ = y_.grad_fn();
    SINTER_CHECK(node_ != nullptr, "conv benchmark: conv2d recorded no node");
  }

  // The result: y for the forward, dx or dw for the gradients.
  Tensor operator()() const {
    NoGradGuard ng;
    if (p_ == Pass::Forward) return conv2d(x_, w_, Tensor(), opts_);
    const int slot = p_ == Pass::BackwardData ? 0 : 1;  // the node returns (dx, dw, dbias)
    return node_->apply(std::vector<Tensor>{dy_})[slot];
  }

 private:
  Pass p_;
  Tensor x_, w_, dy_, y_;
  std::shared_ptr<Node> node_;
  Conv2dOptions opts_{.padding = {kPad, kPad}};
};

// The shape of a pass's result.
Shape result_shape(const ConvLayer& l, Pass p) {
  switch (p) {
    case Pass::Forward:
      return {l.n, l.k, l.h, l.w};
    case Pass::BackwardData:
      return {l.n, l.c, l.h, l.w};
    case Pass::BackwardFilter:
      return {l.k, l.c, kKernel, kKernel};
  }
  return {};
}

#if defined(SINTER_WITH_CUDA) && defined(SINTER_WITH_CUDNN)

void run_conv(benchmark::State& state, const ConvLayer& l, Pass p, Prec prec) {
  bench::PrecisionGuard guard(bench::matmul_precision(prec));
  const Device dev = Device::cuda(0);
  const TensorOptions opts{.dtype = prec_dtype(prec), .device = dev};
  const cuda::Stream stream = cuda::current_stream();
  manual_seed(0);
  const Tensor x = randn({l.n, l.c, l.h, l.w}, opts);
  const Tensor w = randn({l.k, l.c, kKernel, kKernel}, opts);
  const Tensor dy = randn({l.n, l.k, l.h, l.w}, opts);  // the fixed upstream gradient

  // Poisoned, so that a cuDNN call that wrote nothing cannot pass for a reference.
  const Tensor ref = full(result_shape(l, p), std::nan(""), opts);
  CudnnConv theirs_conv(stream, l, prec);
  // No reference to compare against is not a failure of ours.
  if (const std::string none = theirs_conv.choose(p); !none.empty()) {
    bench::skip(state, none);
    return;
  }
  const OursConv ours_result(p, x, w, dy);

  // Validate before timing: a fast wrong kernel is a bug, not a result.
  theirs_conv.run(x, w, dy, ref);
  if (bench::failed(state, std::string(pass_name(p)) + " differs from cuDNN: ",
                    check_result(prec, reduction_length(l, p), ours_result().to_vector<float>(),
                                 ref.to_vector<float>()))) {
    return;
  }
  // The same multiply-adds in each of the three passes.
  const double flop = 2.0 * double(l.n) * double(l.k) * double(l.h) * double(l.w) * double(l.c) *
                      double(kKernel * kKernel);
  bench::time_flops_against(
      state, "cuDNN", flop, 20.0, [&](int) { (void)ours_result(); },
      [&](int) { theirs_conv.run(x, w, dy, ref); });
}

#endif  // SINTER_WITH_CUDA && SINTER_WITH_CUDNN

std::string case_name(const ConvLayer& l, Pass p, Prec prec) {
  return "conv/" + std::string(prec_name(prec)) + "/" + l.name + "/" + pass_name(p) + "/n" +
         std::to_string(l.n) + "_c" + std::to_string(l.c) + "_k" + std::to_string(l.k) + "_" +
         std::to_string(l.h) + "x" + std::to_string(l.w);
}

void register_all() {
  for (Prec prec : {Prec::F32, Prec::TF32, Prec::BF16}) {
    for (const ConvLayer& l : kLayers) {
      for (Pass p : {Pass::Forward, Pass::BackwardData, Pass::BackwardFilter}) {
        auto body = [=](benchmark::State& state) {
#if defined(SINTER_WITH_CUDA) && defined(SINTER_WITH_CUDNN)
          run_conv(state, l, p, prec);
#else
          // A device but no cuDNN at build time: no reference, which is not a failure.
          bench::skip(state, "built without cuDNN: no reference to compare against");
#endif
        };
        bench::register_device(case_name(l, p, prec), 7, benchmark::kMicrosecond, body);
      }
    }
  }
}

// --- --smoke: the CPU side ---

// The three passes by their definitions, in double, for x (n, c, h, w), w (k, c, 3, 3),
// dy (n, k, h, w), stride 1, padding 1: y[n,k,i,j] = sum_{c,a,b} x[n,c,i+a-1,j+b-1] w[k,c,a,b];
// dx and dw are that sum's derivatives, contracted with dy.
std::vector<float> direct_conv(const ConvLayer& l, Pass p, const std::vector<float>& x,
                               const std::vector<float>& w, const std::vector<float>& dy) {
  std::vector<double> out(numel_of(result_shape(l, p)), 0.0);
  auto xi = [&](int64_t n, int64_t c, int64_t i, int64_t j) {
    return ((n * l.c + c) * l.h + i) * l.w + j;
  };
  auto yi = [&](int64_t n, int64_t k, int64_t i, int64_t j) {
    return ((n * l.k + k) * l.h + i) * l.w + j;
  };
  auto wi = [&](int64_t k, int64_t c, int64_t a, int64_t b) {
    return ((k * l.c + c) * kKernel + a) * kKernel + b;
  };
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t k = 0; k < l.k; ++k)
      for (int64_t i = 0; i < l.h; ++i)
        for (int64_t j = 0; j < l.w; ++j)
          for (int64_t c = 0; c < l.c; ++c)
            for (int64_t a = 0; a < kKernel; ++a)
              for (int64_t b = 0; b < kKernel; ++b) {
                const int64_t ii = i + a - kPad, jj = j + b - kPad;
                if (ii < 0 || ii >= l.h || jj < 0 || jj >= l.w) continue;
                switch (p) {
                  case Pass::Forward:
                    out[yi(n, k, i, j)] += double(x[xi(n, c, ii, jj)]) * w[wi(k, c, a, b)];
                    break;
                  case Pass::BackwardData:
                    out[xi(n, c, ii, jj)] += double(dy[yi(n, k, i, j)]) * w[wi(k, c, a, b)];
                    break;
                  case Pass::BackwardFilter:
                    out[wi(k, c, a, b)] += double(dy[yi(n, k, i, j)]) * x[xi(n, c, ii, jj)];
                    break;
                }
              }
  return std::vector<float>(out.begin(), out.end());
}

// Each pass and precision on a tiny layer on the CPU, set up as run_conv sets it up, against the
// direct loops; and every registered case's name.
void smoke() {
  const ConvLayer l{"smoke", 2, 3, 5, 6, 4};
  for (Prec prec : {Prec::F32, Prec::TF32, Prec::BF16}) {
    for (Pass p : {Pass::Forward, Pass::BackwardData, Pass::BackwardFilter}) {
      bench::smoke_guarded(case_name(l, p, prec), [&]() -> std::string {
        bench::PrecisionGuard guard(bench::matmul_precision(prec));
        manual_seed(0);
        const TensorOptions opts{.dtype = prec_dtype(prec)};
        const Tensor x = randn({l.n, l.c, l.h, l.w}, opts);
        const Tensor w = randn({l.k, l.c, kKernel, kKernel}, opts);
        const Tensor dy = randn({l.n, l.k, l.h, l.w}, opts);
        const Tensor got = OursConv(p, x, w, dy)();
        if (got.shape() != result_shape(l, p)) return "shape " + shape_str(got.shape());
        return check_result(
            prec, reduction_length(l, p), got.to_vector<float>(),
            direct_conv(l, p, x.to_vector<float>(), w.to_vector<float>(), dy.to_vector<float>()));
      });
    }
  }
  bench::smoke_guarded("conv/cases", []() -> std::string {
    int count = 0;
    for (Prec prec : {Prec::F32, Prec::TF32, Prec::BF16})
      for (const ConvLayer& l : kLayers)
        for (Pass p : {Pass::Forward, Pass::BackwardData, Pass::BackwardFilter}) {
          if (case_name(l, p, prec).empty() || numel_of(result_shape(l, p)) <= 0) return l.name;
          ++count;
        }
    std::printf("smoke: %d conv cases registered on a device run\n", count);
    return "";
  });
}

}  // namespace

int main(int argc, char** argv) {
  return sinter::bench::bench_main("bench_conv", argc, argv, smoke, register_all);
}

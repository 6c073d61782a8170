// A tour of the Sinter API: tensors, autograd and a few steps of gradient descent on a linear
// model. The README shows the code between the tour markers; a test keeps the two identical.
#include <sinter/sinter.h>

#include <cstdio>
#include <exception>

int main() try {
  // tour-begin
  namespace st = sinter;
  st::manual_seed(0);
  st::Device dev = st::cuda::is_available() ? st::Device::cuda(0) : st::Device::cpu();

  // Data: y = x @ w_true + 0.5, with a little noise.
  st::Tensor x = st::randn({256, 8}, {.device = dev});
  st::Tensor w_true = st::arange(8.0, {.device = dev}).reshape({8, 1});
  st::Tensor y = st::matmul(x, w_true) + 0.5 + 0.01 * st::randn({256, 1}, {.device = dev});

  // Parameters are leaves that require grad.
  st::Tensor w = st::zeros({8, 1}, {.device = dev, .requires_grad = true});
  st::Tensor b = st::zeros({1}, {.device = dev, .requires_grad = true});

  for (int step = 0; step < 200; ++step) {
    st::Tensor err = st::matmul(x, w) + b - y;
    st::Tensor loss = (err * err).mean();
    loss.backward();
    {
      st::NoGradGuard no_grad;  // updates are not part of the graph
      w.add_(w.grad(), -0.1);
      b.add_(b.grad(), -0.1);
      w.grad().zero_();
      b.grad().zero_();
    }
    if (step % 50 == 0) std::printf("step %3d  loss %.5f\n", step, loss.item<float>());
  }
  std::printf("w = %s\n", w.detach().reshape({-1}).str().c_str());
  std::printf("b = %.4f (device %s)\n", b.item<float>(), dev.str().c_str());
  // tour-end
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "tour: %s\n", e.what());
  return 1;
}

// A denoising U-Net on Fashion-MNIST: clothes with Gaussian noise of a random level in, the clean
// picture out. Down the U by strided convolutions, up by a transposed convolution and by bilinear
// interpolation, GroupNorm after every convolution, skips across; TensorBoard gets the losses and a
// grid of clean, noisy and denoised test pictures. A few minutes on two CPU cores.
//
//   denoise                                   # 600 steps, runs/<date>_<host>_denoise
//   denoise --steps 2000 --device cuda
//   tensorboard --logdir runs                 # the losses, and the sample grids under IMAGES
#include <sinter/sinter.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>

namespace st = sinter;

namespace {

struct Args {
  int64_t steps = 600;
  int64_t batch_size = 64;
  double lr = 2e-3;
  int64_t width = 32;
  std::string device = "auto";
  std::string data = st::data::FashionMNIST::kDebianRoot;
  std::string logdir = "runs";
  int64_t limit_train = 0;
  int64_t log_every = 50;
  uint64_t seed = 0;
};

// conv 3x3 (stride 1 or 2), GroupNorm of 8 groups, GELU.
st::nn::Sequential block(int64_t in, int64_t out, int64_t stride = 1) {
  return st::nn::Sequential(st::nn::Conv2d(in, out, 3, {.stride = stride, .padding = 1}),
                            st::nn::GroupNorm(8, out), st::nn::GELU());
}

// (N, 2, 28, 28): the noisy picture and its noise level as a second channel -> the clean picture
// (N, 1, 28, 28), predicted as the noisy one plus a correction.
class DenoisingUNet : public st::nn::Module {
 public:
  explicit DenoisingUNet(int64_t w) {
    enc1_ = register_module("enc1", std::make_shared<st::nn::Sequential>(block(2, w)));
    enc2_ = register_module("enc2", std::make_shared<st::nn::Sequential>(block(w, 2 * w, 2)));
    enc3_ = register_module("enc3", std::make_shared<st::nn::Sequential>(block(2 * w, 2 * w, 2)));
    mid_ = register_module("mid", std::make_shared<st::nn::Sequential>(block(2 * w, 2 * w)));
    up1_ =
        register_module("up1", std::make_shared<st::nn::ConvTranspose2d>(
                                   2 * w, 2 * w, 2, st::nn::ConvTranspose2dOptions{.stride = 2}));
    dec1_ = register_module("dec1", std::make_shared<st::nn::Sequential>(block(4 * w, 2 * w)));
    dec2_ = register_module("dec2", std::make_shared<st::nn::Sequential>(block(3 * w, w)));
    out_ = register_module("out", std::make_shared<st::nn::Conv2d>(w, 1, 1));
  }
  std::string name() const override { return "DenoisingUNet"; }

  st::Tensor forward(const st::Tensor& x) override {
    const st::Tensor e1 = enc1_->forward(x);                            // (N, w, 28, 28)
    const st::Tensor e2 = enc2_->forward(e1);                           // (N, 2w, 14, 14)
    const st::Tensor m = mid_->forward(enc3_->forward(e2));             // (N, 2w, 7, 7)
    st::Tensor d = dec1_->forward(st::cat({up1_->forward(m), e2}, 1));  // (N, 2w, 14, 14)
    d = st::interpolate(d, {.scale_factor = {2.0}, .mode = st::InterpolateMode::Bilinear});
    d = dec2_->forward(st::cat({d, e1}, 1));  // (N, w, 28, 28)
    return x.narrow(1, 0, 1) + out_->forward(d);
  }

 private:
  std::shared_ptr<st::nn::Sequential> enc1_, enc2_, enc3_, mid_, dec1_, dec2_;
  std::shared_ptr<st::nn::ConvTranspose2d> up1_;
  std::shared_ptr<st::nn::Conv2d> out_;
};

// The model's input for clean pictures x (N, 1, 28, 28) at noise levels sigma (N): the noisy
// pictures and sigma as a plane of its own.
st::Tensor noisy_input(const st::Tensor& x, const st::Tensor& sigma, st::Generator* gen) {
  const st::Tensor s = sigma.reshape({-1, 1, 1, 1});
  const st::Tensor noisy =
      x + s * st::randn(x.shape(), {.dtype = x.dtype(), .device = x.device()}, gen);
  return st::cat({noisy, s.expand(x.shape())}, 1);
}

// Mean squared error on the first `n` test pictures at noise level 0.5, with the noise fixed by
// its own generator (the same pictures and noise at every evaluation).
double test_loss(DenoisingUNet& model, const st::Tensor& test, st::Device dev) {
  st::NoGradGuard no_grad;
  model.eval();
  st::Generator gen(1234);
  const st::Tensor x = test.to(dev);
  const st::Tensor in = noisy_input(x, st::full({x.size(0)}, 0.5, {.device = dev}), &gen);
  const double loss = st::mse_loss(model.forward(in), x).item<double>();
  model.train();
  return loss;
}

// Rows of clean, noisy (sigma 0.5) and denoised test pictures, 8 to a row.
st::Tensor sample_grid(DenoisingUNet& model, const st::Tensor& clean, st::Device dev) {
  st::NoGradGuard no_grad;
  model.eval();
  st::Generator gen(99);
  const st::Tensor x = clean.to(dev);
  const st::Tensor in = noisy_input(x, st::full({x.size(0)}, 0.5, {.device = dev}), &gen);
  const st::Tensor out = model.forward(in);
  model.train();
  const st::Tensor rows = st::cat({x, in.narrow(1, 0, 1), out}, 0).cpu();
  return st::clamp(st::make_grid(rows, 8), 0.0, 1.0);
}

int64_t parameter_count(st::nn::Module& m) {
  int64_t n = 0;
  for (const st::Tensor& p : m.parameters()) n += p.numel();
  return n;
}

int run(const Args& a) {
  st::manual_seed(a.seed);
  const st::Device dev = a.device == "auto"
                             ? (st::cuda::is_available() ? st::Device::cuda(0) : st::Device::cpu())
                             : st::Device::parse(a.device);
  const st::data::FashionMNIST train(a.data, true), test(a.data, false);
  st::Tensor images = train.inputs();  // (60000, 1, 28, 28) in [0, 1]
  if (a.limit_train > 0) images = images.narrow(0, 0, std::min(a.limit_train, images.size(0)));
  const st::Tensor test_images = test.inputs().narrow(0, 0, 512);
  const st::Tensor samples = test.inputs().narrow(0, 0, 8);

  DenoisingUNet model(a.width);
  model.to(dev);
  st::optim::Adam opt(model.parameters(), {.lr = a.lr});
  const std::string run_dir = st::make_run_dir(a.logdir, "denoise");
  st::SummaryWriter tb(run_dir);
  std::printf("denoise: %lld parameters on %s, %lld training pictures; TensorBoard: %s\n",
              static_cast<long long>(parameter_count(model)), dev.str().c_str(),
              static_cast<long long>(images.size(0)), run_dir.c_str());
  const double start_loss = test_loss(model, test_images, dev);
  std::printf("step %5d  test loss %.5f  (the noisy pictures' own: %.5f)\n", 0, start_loss, 0.25);
  tb.add_scalar("loss/test", start_loss, 0);
  tb.add_image("samples", sample_grid(model, samples, dev), 0);

  st::Generator gen(a.seed + 1);
  const auto t0 = std::chrono::steady_clock::now();
  double running = 0.0;
  int64_t in_window = 0;
  for (int64_t step = 1; step <= a.steps; ++step) {
    // A random batch at noise levels uniform in [0.1, 1).
    const st::Tensor idx =
        st::randint(0, images.size(0), {a.batch_size}, {.dtype = st::DType::i64}, &gen);
    const st::Tensor x = st::index_select(images, 0, idx).to(dev);
    const st::Tensor sigma = st::rand({a.batch_size}, {.device = dev}, &gen) * 0.9 + 0.1;
    const st::Tensor loss = st::mse_loss(model.forward(noisy_input(x, sigma, &gen)), x);
    opt.zero_grad();
    loss.backward();
    opt.step();
    running += loss.item<double>();
    ++in_window;
    if (step % a.log_every == 0 || step == a.steps) {
      const double tl = test_loss(model, test_images, dev);
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("step %5lld  train loss %.5f  test loss %.5f  %.1f s\n",
                  static_cast<long long>(step), running / in_window, tl, secs);
      std::fflush(stdout);
      tb.add_scalar("loss/train", running / in_window, step);
      tb.add_scalar("loss/test", tl, step);
      tb.add_image("samples", sample_grid(model, samples, dev), step);
      running = 0.0;
      in_window = 0;
    }
  }
  tb.close();
  std::printf("done: test loss %.5f, from %.5f at the start\n", test_loss(model, test_images, dev),
              start_loss);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A denoising U-Net on Fashion-MNIST (conv_transpose2d, group_norm, interpolate)"};
  Args a;
  app.add_option("--steps", a.steps, "training steps")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", a.batch_size, "pictures per step")->check(CLI::PositiveNumber);
  app.add_option("--lr", a.lr, "Adam's learning rate")->check(CLI::PositiveNumber);
  app.add_option("--width", a.width, "channels of the first level (a multiple of 8)")
      ->check(CLI::PositiveNumber);
  app.add_option("--device", a.device, "auto, cpu or cuda[:N]");
  app.add_option("--data", a.data, "the Fashion-MNIST folder (IDX files, plain or gzip)");
  app.add_option("--logdir", a.logdir, "TensorBoard's folder; each run gets a folder inside");
  app.add_option("--limit-train", a.limit_train, "train on the first N pictures only (0: all)");
  app.add_option("--log-every", a.log_every, "steps between test losses and sample grids")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", a.seed, "the seed of the weights, batches and noise");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "denoise: %s\n", e.what());
    return 1;
  }
}

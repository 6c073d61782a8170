// Writes a TensorBoard log folder holding every kind of summary, for
// tests/scripts/check_tensorboard.py to read with the tensorboard package: scalars (NaN and inf
// among them), add_scalars' runs, a histogram of random values (also written to histogram.txt, one
// per line, for the script to bucket itself), images in two layouts and dtypes and a grid, text,
// and one HParams session. The script recomputes the images' pixels from the formula here.
//   summary_dump OUT_DIR
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "sinter/sinter.h"

int main(int argc, char** argv) {
  using namespace sinter;
  if (argc != 2) {
    std::fprintf(stderr, "usage: summary_dump OUT_DIR\n");
    return 2;
  }
  try {
    const std::string out = argv[1];
    SummaryWriter w(out + "/log");
    for (int64_t s = 0; s < 10; ++s)
      w.add_scalar("train/loss", 1.0 / static_cast<double>(s + 1), s);
    w.add_scalar("special", std::nan(""), 0);
    w.add_scalar("special", INFINITY, 1);
    w.add_scalar("special", -INFINITY, 2);
    for (int64_t s = 0; s < 3; ++s) {
      w.add_scalars("lr", {{"a", static_cast<double>(s)}, {"b", 2.0 * static_cast<double>(s)}}, s);
    }

    manual_seed(7);
    const Tensor values = randn({40, 25}) * 3.0;
    w.add_histogram("weights", values, 5);
    std::ofstream hist(out + "/histogram.txt");
    for (const float v : values.to_vector<float>()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g\n", static_cast<double>(v));  // f32 exactly
      hist << buf;
    }
    hist.close();

    // Pixel (c, y, x) of a 3x6x5 picture: ((7c + 3y + x) % 11) / 10, past 1 for the clipping.
    std::vector<float> pixels;
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < 6; ++y) {
        for (int x = 0; x < 5; ++x)
          pixels.push_back(static_cast<float>((7 * c + 3 * y + x) % 11) / 10.0F);
      }
    }
    const Tensor chw = from_vector<float>(pixels, {3, 6, 5});
    w.add_image("image/chw", chw, 1);
    // The same formula times 20, as u8 in (H, W, C).
    std::vector<uint8_t> hwc;
    for (int y = 0; y < 6; ++y) {
      for (int x = 0; x < 5; ++x) {
        for (int c = 0; c < 3; ++c)
          hwc.push_back(static_cast<uint8_t>((7 * c + 3 * y + x) % 11 * 20));
      }
    }
    w.add_image("image/hwc_u8", from_vector<uint8_t>(hwc, {6, 5, 3}), 2, ImageLayout::HWC);
    w.add_image("image/grid", make_grid(stack({chw, chw, chw}), 2, 1), 3);
    w.add_text("sample", "**once** upon a time", 4);
    w.add_hparams({{"lr", 0.001}, {"optimizer", std::string("adamw")}, {"amp", true}},
                  {{"hparam/accuracy", 0.875}}, "session");
    w.close();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "summary_dump: %s\n", e.what());
    return 1;
  }
}

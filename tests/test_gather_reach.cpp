// Replays of kernels/gather_reach.h, the outputs that the gathering backward kernels of interpolate
// and adaptive max pooling visit for each input position, against the taps and windows
// themselves (tests/mutants.json holds a fault of each that these replays must report).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "gather_reach.h"

namespace sinter {
namespace {

// The CUDA backward gathers each input position's gradient from the outputs kern::resample_reach
// names; replayed here on the host, those are exactly the outputs with a tap there, over every
// mode, both corner conventions, scale factors and sizes up and down.
TEST(Interpolate, ReachIsTheOutputsWithATapThere) {
  using kern::ResampleMode;
  int checked = 0;
  for (ResampleMode mode : {ResampleMode::Nearest, ResampleMode::NearestExact, ResampleMode::Linear,
                            ResampleMode::Cubic}) {
    for (bool corners : {false, true}) {
      if (corners && (mode == ResampleMode::Nearest || mode == ResampleMode::NearestExact)) {
        continue;  // align_corners is not theirs
      }
      for (int64_t in = 1; in <= 7; ++in) {
        for (int64_t out = 1; out <= 9; ++out) {
          for (double scale : {0.0, 0.6, 1.1, 1.7, 2.5}) {
            const auto scaled = static_cast<int64_t>(std::floor(static_cast<double>(in) * scale));
            if (scale > 0 && scaled != out) continue;  // a scale factor sets the output size
            kern::ResampleGeom g;
            g.in[2] = in;
            g.out[2] = out;
            g.scale[2] = scale;
            g.mode = mode;
            g.align_corners = corners;
            for (int64_t i = 0; i < in; ++i) {
              int64_t lo = 0, hi = 0;
              kern::resample_reach<float>(g, 2, i, &lo, &hi);
              for (int64_t o = 0; o < out; ++o) {
                const auto t = kern::resample_taps<float>(g, 2, o);
                bool tap = false;
                for (int j = 0; j < t.n; ++j) tap = tap || t.index[j] == i;
                ASSERT_EQ(tap, lo <= o && o <= hi)
                    << "resample reach differs: mode " << static_cast<int>(mode) << " corners "
                    << corners << " " << in << " -> " << out << " scale " << scale << ": input "
                    << i << ", output " << o;
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

// The CUDA backward of adaptive max pooling gathers from kern::adaptive_reach's outputs; replayed
// here, those are exactly the outputs whose windows hold the input position.
TEST(AdaptiveMaxPool2d, ReachIsTheWindowsThatHoldAnInput) {
  for (int64_t in = 1; in <= 12; ++in) {
    for (int64_t out = 1; out <= 12; ++out) {
      for (int64_t i = 0; i < in; ++i) {
        int64_t lo = 0, hi = 0;
        kern::adaptive_reach(i, in, out, &lo, &hi);
        for (int64_t o = 0; o < out; ++o) {
          const bool holds =
              kern::adaptive_start(o, in, out) <= i && i < kern::adaptive_end(o, in, out);
          ASSERT_EQ(holds, lo <= o && o <= hi) << "adaptive reach differs: " << in << " -> " << out
                                               << ": input " << i << ", output " << o;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sinter

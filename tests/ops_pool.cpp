// Op-table rows of max, average, adaptive average and adaptive max pooling, 2-D, 1-D and 3-D (see
// op_table.h); shapes are small and odd so that padding, strides, dilation and ceil_mode leave
// partial windows at the edges. The newer ops' values against PyTorch's, and their errors.
#include <cmath>
#include <vector>

#include "op_table.h"

namespace sinter::testing {

namespace {

OpFn adaptive_max_pool_of(Size2 size) {
  return [size](const Inputs& x) { return adaptive_max_pool2d(x[0], size); };
}

}  // namespace

std::vector<OpRow> pool_rows() {
  return {
      // max pooling; randn inputs have no ties, so the gradient is defined everywhere.
      {.name = "MaxPool2d", .shapes = {S{2, 3, 6, 5}}, .fn = max_pool_of({2, 2})},
      {.name = "MaxPool2dPadCeil",
       .shapes = {S{2, 2, 7, 6}},
       .fn = max_pool_of({3, 3}, {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true})},
      {.name = "MaxPool2dDilation",
       .shapes = {S{1, 2, 7, 7}},
       .fn = max_pool_of({2, 3}, {.stride = {1, 2}, .dilation = {2, 1}})},
      {.name = "MaxPool2dUnbatched",
       .shapes = {S{3, 5, 5}},
       .fn = max_pool_of({3, 3}, {.stride = {2, 2}})},
      {.name = "MaxPool2dIndices",
       .shapes = {S{2, 2, 7, 6}},
       .fn =
           [](const Inputs& x) {
             return std::get<1>(max_pool2d_with_indices(
                 x[0], {3, 2}, {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}));
           },
       .grad = false},

      // average pooling (Note [avg pool divisor] in src/kern/pool.inc).
      {.name = "AvgPool2d", .shapes = {S{2, 3, 6, 6}}, .fn = avg_pool_of({2, 2})},
      {.name = "AvgPool2dPadCeil",
       .shapes = {S{2, 2, 7, 6}},
       .fn = avg_pool_of({3, 3}, {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true})},
      {.name = "AvgPool2dPadCeilExcludePad",
       .shapes = {S{2, 2, 7, 6}},
       .fn = avg_pool_of(
           {3, 2},
           {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true, .count_include_pad = false})},
      {.name = "AvgPool2dUnbatched",
       .shapes = {S{3, 5, 4}},
       .fn = avg_pool_of({2, 3}, {.stride = {1, 1}})},

      // adaptive average pooling, to sizes that do not divide the input (overlapping windows).
      {.name = "AdaptiveAvgPool2d", .shapes = {S{2, 3, 7, 5}}, .fn = adaptive_pool_of({3, 2})},
      {.name = "AdaptiveAvgPool2dUp", .shapes = {S{2, 2, 3, 4}}, .fn = adaptive_pool_of({5, 6})},
      {.name = "AdaptiveAvgPool1d",
       .shapes = {S{2, 3, 7}},
       .fn = [](const Inputs& x) { return adaptive_avg_pool1d(x[0], 3); }},
      {.name = "AdaptiveAvgPool3d",
       .shapes = {S{2, 2, 5, 3, 4}},
       .fn =
           [](const Inputs& x) {
             return adaptive_avg_pool3d(x[0], {2, 4, 3});
           }},
      {.name = "AdaptiveAvgPool3dUnbatched",
       .shapes = {S{2, 3, 4, 5}},
       .fn =
           [](const Inputs& x) {
             return adaptive_avg_pool3d(x[0], {4, 2, 2});
           }},
      {.name = "AdaptiveAvgPool2dGlobal",
       .shapes = {S{2, 3, 4, 5}},
       .fn = adaptive_pool_of({1, 1})},

      // adaptive max pooling: overlapping windows down, and up, where one element is the maximum
      // of several windows and its gradient their sum.
      {.name = "AdaptiveMaxPool2d", .shapes = {S{2, 3, 7, 5}}, .fn = adaptive_max_pool_of({3, 2})},
      {.name = "AdaptiveMaxPool2dUp",
       .shapes = {S{2, 2, 3, 4}},
       .fn = adaptive_max_pool_of({5, 6})},
      {.name = "AdaptiveMaxPool2dUnbatched",
       .shapes = {S{3, 6, 5}},
       .fn = adaptive_max_pool_of({4, 3})},
      {.name = "AdaptiveMaxPool2dIndices",
       .shapes = {S{2, 2, 7, 6}},
       .fn =
           [](const Inputs& x) {
             return second(adaptive_max_pool2d_with_indices(x[0], {3, 4}));
           },
       .grad = false},

      // 1-D pooling: the 2-D kernels over rows of height 1.
      {.name = "MaxPool1d",
       .shapes = {S{2, 3, 9}},
       .fn = [](const Inputs& x) { return max_pool1d(x[0], 3, {.stride = 2, .padding = 1}); }},
      {.name = "MaxPool1dDilationCeil",
       .shapes = {S{2, 2, 10}},
       .fn =
           [](const Inputs& x) {
             return max_pool1d(x[0], 2, {.stride = 3, .dilation = 2, .ceil_mode = true});
           }},
      {.name = "MaxPool1dUnbatched",
       .shapes = {S{3, 8}},
       .fn = [](const Inputs& x) { return max_pool1d(x[0], 2); }},
      {.name = "AvgPool1d",
       .shapes = {S{2, 3, 9}},
       .fn = [](const Inputs& x) { return avg_pool1d(x[0], 3); }},
      {.name = "AvgPool1dPadCeilExcludePad",
       .shapes = {S{2, 2, 9}},
       .fn =
           [](const Inputs& x) {
             return avg_pool1d(
                 x[0], 3,
                 {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false});
           }},
      // 3-D pooling: partial windows in every dim, and an unbatched input.
      {.name = "MaxPool3dPadCeilDilation",
       .shapes = {S{1, 2, 4, 5, 5}},
       .fn =
           [](const Inputs& x) {
             return max_pool3d(x[0], {2, 3, 2},
                               {.stride = {2, 2, 1},
                                .padding = {1, 1, 0},
                                .dilation = {1, 1, 2},
                                .ceil_mode = true});
           }},
      {.name = "MaxPool3dUnbatched",
       .shapes = {S{2, 3, 4, 5}},
       .fn = [](const Inputs& x) { return max_pool3d(x[0], 2); }},
      {.name = "MaxPool3dIndices",
       .shapes = {S{2, 1, 5, 4, 5}},
       .fn =
           [](const Inputs& x) {
             return std::get<1>(max_pool3d_with_indices(
                 x[0], {3, 2, 3}, {.stride = {2, 2, 2}, .padding = {1, 1, 1}, .ceil_mode = true}));
           },
       .grad = false},
      {.name = "AvgPool3dPadCeilExcludePad",
       .shapes = {S{2, 3, 4, 5}},
       .fn =
           [](const Inputs& x) {
             return avg_pool3d(
                 x[0], {3, 2, 2},
                 {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false});
           }},
      {.name = "AvgPool3dIncludePad",
       .shapes = {S{2, 1, 5, 4, 3}},
       .fn =
           [](const Inputs& x) {
             return avg_pool3d(x[0], {2, 3, 2},
                               {.stride = {2, 1, 2}, .padding = {1, 1, 1}, .ceil_mode = true});
           }},
  };
}

namespace {

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_vector<double>(v, shape);
}

// torch.nn.functional's values on ramp(...), torch 2.15.
TEST(AdaptiveMaxPool2d, MatchesPyTorch) {
  const auto [y, indices] = adaptive_max_pool2d_with_indices(ramp({1, 2, 5, 7}), {3, 4});
  EXPECT_TRUE(all_close(
      y,
      f64({0.69421768723769106, 1.1569865987187891, 1.5381682338770002, 1.4545989080882815,
           1.8957468311429344,  1.4031183567457042, 1.6195697621966012, 1.9906073556948702,
           2.4427664058359069,  2.4427664058359069, 1.8370526513277285, 1.4004226878068113,
           1.8672080725254749,  2.8946447738778378, 3.3462419287548637, 3.3462419287548637,
           3.7975574189078047,  3.6579734036669853, 3.3462419287548637, 3.4679745927716441,
           3.9295767373928534,  4.2485908724117705, 4.0979521167226354, 2.9416745455082407},
          {1, 2, 3, 4}),
      0, 0));
  EXPECT_TRUE(all_close(indices.to(DType::f64),
                        f64({1, 10, 11, 12, 21, 22, 19, 20, 29, 29, 31, 27,
                             1, 3,  12, 12, 21, 22, 12, 20, 29, 30, 31, 33},
                            {1, 2, 3, 4}),
                        0, 0));
  // Up: windows overlap, and an element's gradient sums those of the windows it tops.
  const Tensor x = ramp({1, 1, 3, 4}).requires_grad_(true);
  const Tensor up = adaptive_max_pool2d(x, {5, 6});
  EXPECT_TRUE(all_close(up,
                        f64({0,
                             0.69421768723769106,
                             0.69421768723769106,
                             1.0854497299884602,
                             1.0854497299884602,
                             1.013209366648874,
                             0.53498815015590506,
                             0.69421768723769106,
                             0.69421768723769106,
                             1.0854497299884602,
                             1.0854497299884602,
                             1.013209366648874,
                             0.53498815015590506,
                             0.53498815015590506,
                             -0.10078322768961984,
                             -0.5715757724135877,
                             -0.5715757724135877,
                             -0.63245261262433261,
                             0.53498815015590506,
                             0.53498815015590506,
                             0.46681390048434973,
                             1.1569865987187891,
                             1.5381682338770002,
                             1.5381682338770002,
                             -0.2312666378723216,
                             0.46681390048434973,
                             0.46681390048434973,
                             1.1569865987187891,
                             1.5381682338770002,
                             1.5381682338770002},
                            {1, 1, 5, 6}),
                        0, 0));
  sum(mul(up, ramp({1, 1, 5, 6}))).backward();
  EXPECT_TRUE(all_close(
      x.grad(),
      f64({0, 0.91594816672949708, 3.171998016007918, 1.4373850061873803, 4.4053143074417838,
           0.33352087074807329, -0.3088734891229874, 0.23186288776296538, 0.31243296641849727,
           2.9601485278204285, 3.2961695189497457, 6.695776965465738},
          {1, 1, 3, 4}),
      1e-14, 1e-14));
}

TEST(Pool1d, MatchesPyTorch) {
  const Tensor x = ramp({2, 2, 9});
  const auto [y, indices] = max_pool1d_with_indices(x, 3, {.stride = 2, .padding = 1});
  EXPECT_TRUE(all_close(
      y,
      f64({0.69421768723769106, 1.0854497299884602,  1.013209366648874,   -0.10078322768961984,
           -0.2312666378723216, 1.1569865987187891,  1.5381682338770002,  1.4545989080882815,
           0.33352087074807329, 0.23186288776296538, 1.6195697621966012,  1.9906073556948702,
           1.8957468311429344,  0.7679285828159943,  0.69516717759371593, 2.0819636200681328,
           2.4427664058359069,  2.336655638536056,   1.2024443168785672,  1.1586424701348756},
          {2, 2, 5}),
      0, 0));
  EXPECT_TRUE(all_close(
      indices.to(DType::f64),
      f64({1, 2, 3, 5, 8, 1, 2, 3, 5, 8, 1, 2, 3, 5, 8, 1, 2, 3, 5, 8}, {2, 2, 5}), 0, 0));
  EXPECT_TRUE(all_close(
      max_pool1d(x, 2, {.dilation = 2, .ceil_mode = true}),
      f64({1.0854497299884602, 1.0854497299884602, 0.53498815015590506, -0.2312666378723216,
           1.5381682338770002, 1.5381682338770002, 0.96909836234935209, 0.23186288776296538,
           1.9906073556948702, 1.9906073556948702, 1.4031183567457042, 0.69516717759371593,
           2.4427664058359069, 2.4427664058359069, 1.8370526513277285, 1.1586424701348756},
          {2, 2, 4}),
      0, 0));
  EXPECT_TRUE(all_close(
      avg_pool1d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false}),
      f64({0.34710884361884553,   0.93095892795834168, 0.48247142970505302, -0.43493720424251342,
           -0.43185962524832711,  0.81190024960156937, 1.3832512468946903,  0.91907271372856902,
           0.0082157938750286319, 0.02634257930582401, 1.2765964047088689,  1.8353079830114687,
           1.355597923568211,     0.45157851458877801, 0.48477058606277917, 1.7411931539374721,
           2.2871285548133655,    1.7920508689141172,  0.89515283443834104, 0.94342201219550592},
          {2, 2, 5}),
      1e-15, 1e-15));
  EXPECT_TRUE(all_close(
      avg_pool1d(ramp({2, 9}), 4),
      f64({0.69821919596875626, -0.19245586564290879, 1.1541419102921051, 0.24843643599360951},
          {2, 2}),
      1e-15, 1e-15));
}

// torch.nn.functional.max_pool3d (with indices) and avg_pool3d of ramp(...), torch 2.15.
TEST(Pool3d, MatchesPyTorch) {
  const auto [y, indices] = max_pool3d_with_indices(
      ramp({1, 2, 4, 5, 5}), {2, 3, 2},
      {.stride = {2, 2, 1}, .padding = {1, 1, 0}, .dilation = {1, 1, 2}, .ceil_mode = true});
  EXPECT_TRUE(
      all_close(y,
                f64({1.0854497299884602, 1.013209366648874,  1.0854497299884602, 1.4545989080882815,
                     1.5381682338770002, 1.6195697621966012, 1.9906073556948702, 1.8957468311429344,
                     1.6195697621966012, 3.6579734036669853, 3.7975574189078047, 3.6579734036669853,
                     4.2485908724117705, 4.097952116722635,  3.9295767373928534, 4.2485908724117705,
                     4.3909726108017155, 4.69934199708131,   4.852158991074475,  5.149810580553026,
                     4.977235631526227,  5.599996490345607,  5.416546290388713,  5.599996490345607,
                     5.599996490345607,  5.416546290388713,  5.599996490345607,  5.855640225739422,
                     6.049899673897293,  6.234429847627822,  6.499520158580731,  6.69474723401732,
                     6.948858051695237,  6.733190320073292,  6.69474723401732,   6.948858051695237,
                     8.743388649552443,  8.48582949470531,   8.533741600389247,  8.923496021185036,
                     8.992907615834387,  9.191317988357369,  9.451835318341484,  9.638967054570253,
                     9.451835318341484,  10.086336512864102, 9.910522183805911,  10.086336512864102,
                     10.368965756214235, 10.533427106964698, 10.23536732283725,  10.368965756214235,
                     10.533427106964698, 10.827163648338574},
                    {1, 2, 3, 3, 3}),
                0, 0));
  EXPECT_TRUE(
      all_close(indices.to(DType::f64),
                f64({2,  3,  2,  12, 11, 19, 20, 21, 19, 57, 56, 57, 65, 66, 64, 65, 73, 74,
                     82, 83, 84, 92, 93, 92, 92, 93, 92, 2,  1,  9,  10, 18, 19, 20, 18, 19,
                     55, 56, 54, 65, 63, 64, 72, 73, 72, 82, 81, 82, 90, 91, 92, 90, 91, 99},
                    {1, 2, 3, 3, 3}),
                0, 0));
  EXPECT_EQ(indices.dtype(), DType::i64);
  EXPECT_TRUE(all_close(
      avg_pool3d(ramp({2, 3, 4, 5}), {3, 2, 2},
                 {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false}),
      f64({0.9953036778474351, 1.2696331512786974, 0.6571397665098178, 0.9168082510242669,
           0.865478198816773,  0.9432388385062437, 0.5144733550816027, 1.1160144748473413,
           2.056291370972739,  2.1307565720013697, 1.5333457576094784, 0.9712375931637377,
           1.754205354815873,  1.8455639154043415, 2.1021250841816514, 2.3133085314532598,
           2.966725890838127,  2.8292607038429494, 2.7809637249987276, 3.4235745842118237,
           4.331013553074799,  3.9753271350764994, 4.069740042720963,  4.030969709021547,
           4.3925739386118146, 3.7884198753761233, 3.8783312018735576, 4.626169839735489,
           5.239613541499088,  5.02900373079807,   4.977279405260271,  4.926784638892534,
           4.92377966238639,   4.536150417631546,  4.793777901343676,  5.796236461350627},
          {2, 2, 3, 3}),
      1e-14, 1e-14));
  EXPECT_TRUE(all_close(
      avg_pool3d(ramp({1, 1, 5, 4, 3}), {2, 3, 2},
                 {.stride = {2, 1, 2}, .padding = {1, 1, 1}, .ceil_mode = true}),
      f64({0.08443411388740617, 0.18448936164103635, 0.03680279951960719,   0.11251275743298184,
           0.07570395789330299, 0.18880337538045167, -0.008730155994103164, 0.15261963184159458,
           0.2531465668618267,  0.570797965811556,   0.525669790674926,     1.12493747298637,
           0.5992970897429658,  1.2737483528805138,  0.4934031790900373,    0.8922970875042063,
           0.7918862963178147,  1.487171491401772,   1.1250665037163412,    2.3263482276600977,
           1.2006476314085752,  2.4748625961064152,  0.8325091956784204,    1.8389668634944734},
          {1, 1, 3, 4, 2}),
      1e-14, 1e-14));
}

TEST(PoolErrors, Pool3dNamesTheOpAndTheValues) {
  expect_error(
      [] {
        max_pool3d(zeros({2, 3, 4}), 2);
      },
      {"max_pool3d", "4-D (C, D, H, W) or 5-D", "[2, 3, 4]"});
  expect_error([] { avg_pool3d(zeros({1, 2, 3, 4}).to(DType::i64), 2); }, {"avg_pool3d", "i64"});
  expect_error(
      [] {
        max_pool3d(zeros({1, 4, 4, 4}), {2, 0, 2});
      },
      {"max_pool3d", "kernel_size must be positive", "(2, 0, 2)"});
  expect_error(
      [] {
        avg_pool3d(zeros({1, 4, 4, 4}), 2, {.stride = {1, 0, 1}});
      },
      {"avg_pool3d", "stride must be positive", "(1, 0, 1)"});
  expect_error(
      [] {
        max_pool3d(zeros({1, 4, 4, 4}), 2, {.padding = {0, -1, 0}});
      },
      {"max_pool3d", "padding must be non-negative", "(0, -1, 0)"});
  expect_error(
      [] {
        avg_pool3d(zeros({1, 4, 4, 4}), {2, 2, 3}, {.padding = {0, 0, 2}});
      },
      {"avg_pool3d", "padding (0, 0, 2)", "half the kernel size (2, 2, 3)"});
  expect_error(
      [] {
        max_pool3d(zeros({1, 4, 4, 4}), 2, {.dilation = {1, 1, 0}});
      },
      {"max_pool3d", "dilation must be positive", "(1, 1, 0)"});
  expect_error(
      [] {
        max_pool3d(zeros({1, 1, 4, 4}), 2);
      },
      {"max_pool3d", "too small", "[1, 1, 4, 4]", "0x2x2"});
  expect_error(
      [] {
        max_pool3d(zeros({1, 1, 4, 4}), {2, 2, 2}, {.padding = {1, 0, 0}, .dilation = {2, 1, 1}});
      },
      {"max_pool3d", "output d = 0", "holds no input element"});
}

TEST(PoolErrors, AdaptiveMaxAnd1dNameTheOpAndTheValues) {
  expect_error(
      [] {
        adaptive_max_pool2d(zeros({4, 4}), {2, 2});
      },
      {"adaptive_max_pool2d", "3-D (C, H, W) or 4-D", "[4, 4]"});
  expect_error(
      [] {
        adaptive_max_pool2d(zeros({1, 2, 4, 4}), {0, 2});
      },
      {"adaptive_max_pool2d", "output_size must be positive", "(0, 2)"});
  expect_error(
      [] {
        adaptive_max_pool2d(zeros({1, 2, 0, 4}), {2, 2});
      },
      {"adaptive_max_pool2d", "empty spatial dim", "[1, 2, 0, 4]"});
  expect_error(
      [] {
        max_pool1d(zeros({1, 2, 3, 4}), 2);
      },
      {"max_pool1d", "2-D (C, L) or 3-D (N, C, L)", "[1, 2, 3, 4]"});
  expect_error([] { avg_pool1d(zeros({5}), 2); }, {"avg_pool1d", "[5]"});
  expect_error([] { max_pool1d(zeros({1, 2, 8}), 0); }, {"max_pool1d", "kernel_size", "(1, 0)"});
  expect_error(
      [] {
        max_pool1d(zeros({1, 2, 8}), 2, {.padding = 2});
      },
      {"max_pool1d", "padding (0, 2)", "half the kernel size (1, 2)"});
  expect_error(
      [] {
        avg_pool1d(zeros({1, 2, 2}), 3);
      },
      {"avg_pool1d", "too small", "[1, 2, 1, 2]"});
  expect_error([] { avg_pool1d(zeros({1, 2, 8}).to(DType::i64), 2); }, {"avg_pool1d", "i64"});
}

}  // namespace

}  // namespace sinter::testing

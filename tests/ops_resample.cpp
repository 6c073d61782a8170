// Op-table rows of interpolate (every mode, both corner conventions, up and down, scale factors
// that do not divide) and pixel_shuffle / pixel_unshuffle (see op_table.h); interpolate's values
// against PyTorch's and its errors.
#include <cmath>
#include <string>
#include <vector>

#include "op_table.h"

namespace sinter::testing {

namespace {

using M = InterpolateMode;

OpFn interpolate_of(InterpolateOptions o) {
  return [o](const Inputs& x) { return interpolate(x[0], o); };
}

}  // namespace

std::vector<OpRow> resample_rows() {
  return {
      {.name = "InterpolateNearest", .shapes = {S{2, 3, 5}}, .fn = interpolate_of({.size = {8}})},
      {.name = "InterpolateNearest2dDown",
       .shapes = {S{1, 2, 5, 7}},
       .fn = interpolate_of({.scale_factor = {0.6}})},
      {.name = "InterpolateNearestExact3d",
       .shapes = {S{1, 2, 3, 2, 4}},
       .fn = interpolate_of({.scale_factor = {1.5, 2, 0.5}, .mode = M::NearestExact})},
      {.name = "InterpolateLinear",
       .shapes = {S{2, 3, 5}},
       .fn = interpolate_of({.size = {9}, .mode = M::Linear})},
      {.name = "InterpolateLinearCornersDown",
       .shapes = {S{2, 2, 6}},
       .fn = interpolate_of({.scale_factor = {0.7}, .mode = M::Linear, .align_corners = true})},
      {.name = "InterpolateBilinear",
       .shapes = {S{2, 2, 4, 5}},
       .fn = interpolate_of({.scale_factor = {1.5, 1.7}, .mode = M::Bilinear})},
      {.name = "InterpolateBilinearCornersDown",
       .shapes = {S{1, 2, 6, 5}},
       .fn = interpolate_of({.size = {4, 3}, .mode = M::Bilinear, .align_corners = true})},
      {.name = "InterpolateBicubic",
       .shapes = {S{1, 2, 4, 5}},
       .fn = interpolate_of({.size = {7, 6}, .mode = M::Bicubic})},
      {.name = "InterpolateBicubicCornersDown",
       .shapes = {S{1, 2, 6, 7}},
       .fn = interpolate_of({.scale_factor = {0.6}, .mode = M::Bicubic, .align_corners = true})},
      {.name = "InterpolateTrilinear",
       .shapes = {S{1, 2, 3, 4, 3}},
       .fn = interpolate_of({.scale_factor = {1.5}, .mode = M::Trilinear})},
      {.name = "InterpolateTrilinearCorners",
       .shapes = {S{1, 1, 3, 3, 4}},
       .fn = interpolate_of({.size = {4, 2, 5}, .mode = M::Trilinear, .align_corners = true})},
      {.name = "InterpolateArea",
       .shapes = {S{2, 3, 7}},
       .fn = interpolate_of({.size = {3}, .mode = M::Area})},
      {.name = "InterpolateArea2dScaled",
       .shapes = {S{1, 2, 5, 6}},
       .fn = interpolate_of({.scale_factor = {0.7, 1.5}, .mode = M::Area})},
      {.name = "InterpolateArea3d",
       .shapes = {S{1, 2, 4, 3, 5}},
       .fn = interpolate_of({.size = {2, 3, 2}, .mode = M::Area})},
      {.name = "InterpolateBilinearTransposed",
       .shapes = {S{2, 2, 5, 4}},
       .fn =
           [](const Inputs& x) {
             return interpolate(x[0].transpose(2, 3), {.size = {6, 7}, .mode = M::Bilinear});
           }},
      {.name = "PixelShuffle",
       .shapes = {S{2, 8, 3, 2}},
       .fn = [](const Inputs& x) { return pixel_shuffle(x[0], 2); }},
      {.name = "PixelShuffleLeadingDims",
       .shapes = {S{2, 3, 9, 2, 2}},
       .fn = [](const Inputs& x) { return pixel_shuffle(x[0], 3); }},
      {.name = "PixelUnshuffle",
       .shapes = {S{2, 2, 6, 4}},
       .fn = [](const Inputs& x) { return pixel_unshuffle(x[0], 2); }},
  };
}

namespace {

struct InterpolateCase {
  std::string name;
  Shape in;
  InterpolateOptions options;
  Shape out;
  std::vector<double> want;
};

// torch.nn.functional.interpolate(ramp(in), ...) in f64, torch 2.15.
std::vector<InterpolateCase> interpolate_cases() {
  return {
      {"Linear size 8",
       {1, 2, 5},
       {.size = {8}, .mode = InterpolateMode::Linear},
       {1, 2, 8},
       {0, 0.30372023816648985, 0.71866968990961411, 0.96318971662884489, 1.0628746164448395,
        1.017724389357598, 0.74420993237157895, 0.53498815015590506, -0.10078322768961984,
        -0.30675496600635577, -0.57538057492675931, -0.61342860005847488, -0.5070819955143292,
        -0.25634076129432226, 0.16140366495330605, 0.46681390048434973}},
      {"Linear size 8 corners",
       {1, 2, 5},
       {.size = {8}, .mode = InterpolateMode::Linear, .align_corners = true},
       {1, 2, 8},
       {0, 0.39669582127868058, 0.75010797905922943, 0.97366914634538326, 1.0648096261771498,
        1.0235294185545292, 0.80825741672331597, 0.53498815015590506, -0.10078322768961984,
        -0.36980753896045859, -0.5802724638722655, -0.61505922970697691, -0.51782804840947239,
        -0.28857891997975194, 0.067910735709108841, 0.46681390048434973}},
      {"Linear scale 1.7",
       {1, 1, 5},
       {.scale_factor = {1.7}, .mode = InterpolateMode::Linear},
       {1, 1, 8},
       {0, 0.26543617453205837, 0.6737995199659943, 0.9128473581866503, 1.0748261471444034,
        1.0323318157681762, 0.8584907377835016, 0.577184139846461}},
      {"Linear scale 1.7 recompute",
       {1, 1, 5},
       {.scale_factor = {1.7}, .mode = InterpolateMode::Linear, .recompute_scale_factor = true},
       {1, 1, 8},
       {0, 0.30372023816648985, 0.71866968990961411, 0.96318971662884489, 1.0628746164448395,
        1.017724389357598, 0.74420993237157895, 0.53498815015590506}},
      {"Linear down 0.6",
       {1, 1, 7},
       {.scale_factor = {0.6}, .mode = InterpolateMode::Linear},
       {1, 1, 4},
       {0.23140589574589704, 1.0854497299884602, 0.69439522232022788, -0.25771407593094275}},
      {"Nearest size 7",
       {1, 1, 5},
       {.size = {7}},
       {1, 1, 7},
       {0, 0, 0.69421768723769106, 1.0854497299884602, 1.0854497299884602, 1.013209366648874,
        0.53498815015590506}},
      {"Nearest scale 0.7",
       {1, 1, 7},
       {.scale_factor = {0.7}},
       {1, 1, 4},
       {0, 0.69421768723769106, 1.0854497299884602, 0.53498815015590506}},
      {"Nearest scale 1.2 same size",
       {1, 1, 3},
       {.scale_factor = {1.2}},
       {1, 1, 3},
       {0, 0, 0.69421768723769106}},
      {"NearestExact scale 1.5",
       {1, 1, 4},
       {.scale_factor = {1.5}, .mode = InterpolateMode::NearestExact},
       {1, 1, 6},
       {0, 0.69421768723769106, 0.69421768723769106, 1.0854497299884602, 1.013209366648874,
        1.013209366648874}},
      {"NearestExact down size 3",
       {1, 1, 7},
       {.size = {3}, .mode = InterpolateMode::NearestExact},
       {1, 1, 3},
       {0.69421768723769106, 1.013209366648874, -0.10078322768961984}},
      {"Nearest2d size (5, 3)",
       {1, 1, 3, 4},
       {.size = {5, 3}},
       {1, 1, 5, 3},
       {0, 0.69421768723769106, 1.0854497299884602, 0, 0.69421768723769106, 1.0854497299884602,
        0.53498815015590506, -0.10078322768961984, -0.5715757724135877, 0.53498815015590506,
        -0.10078322768961984, -0.5715757724135877, -0.2312666378723216, 0.46681390048434973,
        1.1569865987187891}},
      {"Nearest3d scale 2",
       {1, 1, 2, 2, 2},
       {.scale_factor = {2}},
       {1, 1, 4, 4, 4},
       {0,
        0,
        0.69421768723769106,
        0.69421768723769106,
        0,
        0,
        0.69421768723769106,
        0.69421768723769106,
        1.0854497299884602,
        1.0854497299884602,
        1.013209366648874,
        1.013209366648874,
        1.0854497299884602,
        1.0854497299884602,
        1.013209366648874,
        1.013209366648874,
        0,
        0,
        0.69421768723769106,
        0.69421768723769106,
        0,
        0,
        0.69421768723769106,
        0.69421768723769106,
        1.0854497299884602,
        1.0854497299884602,
        1.013209366648874,
        1.013209366648874,
        1.0854497299884602,
        1.0854497299884602,
        1.013209366648874,
        1.013209366648874,
        0.53498815015590506,
        0.53498815015590506,
        -0.10078322768961984,
        -0.10078322768961984,
        0.53498815015590506,
        0.53498815015590506,
        -0.10078322768961984,
        -0.10078322768961984,
        -0.5715757724135877,
        -0.5715757724135877,
        -0.63245261262433261,
        -0.63245261262433261,
        -0.5715757724135877,
        -0.5715757724135877,
        -0.63245261262433261,
        -0.63245261262433261,
        0.53498815015590506,
        0.53498815015590506,
        -0.10078322768961984,
        -0.10078322768961984,
        0.53498815015590506,
        0.53498815015590506,
        -0.10078322768961984,
        -0.10078322768961984,
        -0.5715757724135877,
        -0.5715757724135877,
        -0.63245261262433261,
        -0.63245261262433261,
        -0.5715757724135877,
        -0.5715757724135877,
        -0.63245261262433261,
        -0.63245261262433261}},
      {"Bilinear scale (1.5, 0.75)",
       {1, 2, 3, 4},
       {.scale_factor = {1.5, 0.75}, .mode = InterpolateMode::Bilinear},
       {1, 2, 4, 3},
       {0.11570294787294848,  0.88983370861307565,   1.0252494272054717,    0.27236460086063302,
        0.27682710428073593,  0.2014714773081317,    0.33836856462700765,   -0.14483287510940837,
        -0.27281573359923539, -0.024262192258232916, 0.6205536246593738,    1.125147222360658,
        1.3736821504651267,   0.65130961654871267,   -0.052492988185046018, 0.63150559539976148,
        0.61702629202038184,  0.72637616075782196,   0.23690707832358801,   0.76052457190076228,
        1.4000033489401775,   1.6272192302803556,    1.4716509895356078,    0.97903550589812571}},
      {"Bilinear size corners",
       {1, 1, 3, 4},
       {.size = {4, 6}, .mode = InterpolateMode::Bilinear, .align_corners = true},
       {1, 1, 4, 6},
       {0,
        0.41653061234261463,
        0.77246409578784492,
        1.0072033214383063,
        1.0565535846526257,
        1.013209366648874,
        0.35665876677060337,
        0.2411937530799316,
        0.12752687417300607,
        0.017456264833572818,
        -0.045099810781048494,
        -0.083898619533263719,
        0.27956988747982958,
        0.16487744401295382,
        0.071654988954136856,
        0.021372510711437531,
        0.039202078595433898,
        0.091087669542778166,
        -0.2312666378723216,
        0.18758168514168116,
        0.60484844013123762,
        1.018952059071901,
        1.3094592527820734,
        1.5381682338770002}},
      {"Bicubic size (5, 7)",
       {1, 1, 3, 4},
       {.size = {5, 7}, .mode = InterpolateMode::Bicubic},
       {1, 1, 5, 7},
       {-0.13290454738416377,  0.19954789797782671,   0.70161811447147593,  1.0914585921804125,
        1.2622227090259588,    1.2253291903798884,    1.1639172475775794,   0.25459565035962745,
        0.29238553340168694,   0.34142937459646439,   0.34852297779593278,  0.31112625094901281,
        0.25071659216369468,   0.2085199510828914,    0.598067143457087,    0.34730593573775798,
        -0.042660391915016763, -0.39007586295486441,  -0.59680558981768739, -0.64066194073115579,
        -0.63849259795500901,  0.096147121267596239,  0.12252467155380846,  0.17628894471066578,
        0.26638851150639614,   0.38724746172001434,   0.51668485685207777,  0.59836287717737502,
        -0.38679283376554752,  -0.072626816328130742, 0.43700713325095653,  0.95985131871062912,
        1.3841947075713068,    1.6515005618688772,    1.7885778426061685}},
      {"Bicubic scale 1.5 corners",
       {1, 1, 3, 4},
       {.scale_factor = {1.5}, .mode = InterpolateMode::Bicubic, .align_corners = true},
       {1, 1, 4, 6},
       {0,
        0.38260816397238373,
        0.83145319345679447,
        1.0401891898386293,
        1.0996735296297833,
        1.013209366648874,
        0.45170537562847862,
        0.26362426372951581,
        -0.0037126265903757939,
        -0.18204556800467747,
        -0.32151630254202029,
        -0.35555393542736036,
        0.35320291875693427,
        0.1523774532307369,
        -0.082637350476098506,
        -0.19248607303182166,
        -0.20236344173436546,
        -0.13196034383019511,
        -0.2312666378723216,
        0.12142000019264179,
        0.64615166781205369,
        1.0156766997748987,
        1.3794237245694936,
        1.5381682338770002}},
      {"Bicubic down (2, 3)",
       {1, 1, 5, 6},
       {.size = {2, 3}, .mode = InterpolateMode::Bicubic},
       {1, 1, 2, 3},
       {-0.62593531230773181, 0.33095286929947076, 1.2780033808612483, 1.014875926092885,
        2.0059336236129508, 1.4382361327441069}},
      {"Trilinear scale 1.5",
       {1, 1, 2, 3, 2},
       {.scale_factor = {1.5}, .mode = InterpolateMode::Trilinear},
       {1, 1, 3, 4, 3},
       {0,
        0.34710884361884548,
        0.69421768723769106,
        0.54272486499423001,
        0.69821919596875615,
        0.8537135269432824,
        0.99370613334970115,
        0.91062503380441318,
        0.8275439342591252,
        0.62673174679466426,
        0.35580697574739678,
        0.084882204700129221,
        -0.2857878862067938,
        -0.12745267445005729,
        0.030882537306679281,
        0.070651829925637705,
        0.22804945768114154,
        0.38544708543664546,
        0.49690751745461559,
        0.61668298130453691,
        0.73645844515445824,
        0.77617140304080068,
        0.7492085472733222,
        0.72224569150584361,
        -0.5715757724135877,
        -0.60201419251896016,
        -0.63245261262433261,
        -0.40142120514295465,
        -0.24212028060647306,
        -0.082819356069991468,
        0.00010890155952997527,
        0.3227409288046606,
        0.64537295604979128,
        0.92561105928693721,
        1.1426101187992479,
        1.3596091783115583}},
      {"Trilinear size corners",
       {1, 1, 2, 3, 2},
       {.size = {3, 2, 4}, .mode = InterpolateMode::Trilinear, .align_corners = true},
       {1, 1, 3, 2, 4},
       {0,
        0.23140589574589701,
        0.46281179149179402,
        0.69421768723769106,
        0.53498815015590506,
        0.32306435754073015,
        0.11114056492555514,
        -0.10078322768961984,
        -0.28578788620679385,
        -0.18023107836896951,
        -0.074674270531145143,
        0.030882537306679225,
        0.84598737443734706,
        0.80355575065612816,
        0.76112412687490916,
        0.71869250309369015,
        -0.5715757724135877,
        -0.591868052483836,
        -0.61216033255408431,
        -0.63245261262433261,
        1.1569865987187891,
        1.2840471437715262,
        1.4111076888242631,
        1.5381682338770002}},
  };
}

// f64 to the rounding; f32, whose coordinates and weights are floats (Note [resample coordinates]
// in src/kern/resample.h), to f32's.
TEST(Interpolate, MatchesPyTorch) {
  for (const InterpolateCase& c : interpolate_cases()) {
    SCOPED_TRACE(c.name);
    const Tensor want = from_vector<double>(c.want, c.out);
    EXPECT_TRUE(all_close(interpolate(ramp(c.in), c.options), want, 1e-14, 1e-13));
    EXPECT_TRUE(all_close(interpolate(ramp(c.in, DType::f32), c.options), want, 1e-6, 1e-6));
  }
}

TEST(Interpolate, BicubicGradientMatchesPyTorch) {
  const Tensor x = ramp({1, 1, 3, 4}).requires_grad_(true);
  const Tensor r = mul(ramp({1, 1, 5, 7}), 0.5);
  sum(mul(interpolate(x, {.size = {5, 7}, .mode = M::Bicubic}), r)).backward();
  const std::vector<double> want = {-0.16046828008505429, 1.3083524796825532,  1.3835492850055378,
                                    0.12572861211982103,  0.40050760671506058, 0.089138096168324507,
                                    1.3349381552426078,   2.5400416174974518,  3.0741534631260259,
                                    2.5863506328066936,   1.2834797064747225,  1.1896538940401777};
  EXPECT_TRUE(all_close(x.grad(), from_vector<double>(want, {1, 1, 3, 4}), 1e-13, 1e-13));
}

// A scale factor that gives back the input's size: nearest still maps by 1 / scale (PyTorch's),
// linear takes the identity.
TEST(Interpolate, SameSizeFromAScaleFactor) {
  const Tensor x = ramp({1, 1, 4});
  EXPECT_TRUE(all_close(interpolate(x, {.scale_factor = {1.1}, .mode = M::Linear}), x, 0, 0));
  const Tensor y = interpolate(x, {.scale_factor = {1.1}});
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4}));
  EXPECT_TRUE(all_close(y, index_select(x, 2, from_vector<int64_t>({0, 0, 1, 2}, {4})), 0, 0));
}

TEST(PixelShuffle, MovesChannelsIntoBlocks) {
  // Channel c r^2 + i r + j of pixel (h, w) lands at (c, h r + i, w r + j).
  const Tensor x = arange(16.0, {.dtype = DType::f64}).reshape({1, 8, 1, 2});
  const Tensor y = pixel_shuffle(x, 2);
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 4}));
  EXPECT_EQ(y.to_vector<double>(),
            (std::vector<double>{0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15}));
  EXPECT_TRUE(all_close(pixel_unshuffle(y, 2), x, 0, 0));
}

TEST(InterpolateErrors, NameTheOpAndTheValues) {
  const Tensor x3 = zeros({1, 2, 4}), x4 = zeros({1, 2, 4, 4});
  expect_error([&] { interpolate(zeros({2, 4}), {.size = {3}}); }, {"interpolate", "[2, 4]"});
  expect_error([&] { interpolate(x3.to(DType::i64), {.size = {3}}); }, {"interpolate", "i64"});
  expect_error([&] { interpolate(x4, {.size = {3}, .mode = M::Linear}); },
               {"interpolate", "linear needs a 3-D input", "[1, 2, 4, 4]"});
  expect_error([&] { interpolate(x3, {.size = {3}, .mode = M::Bicubic}); },
               {"interpolate", "bicubic needs a 4-D input"});
  expect_error([&] { interpolate(x4, {.size = {3}, .mode = M::Trilinear}); },
               {"interpolate", "trilinear needs a 5-D input"});
  expect_error([&] { interpolate(x3, {.size = {3}, .align_corners = false}); },
               {"interpolate", "align_corners", "not nearest"});
  expect_error([&] { interpolate(x3, {.size = {3}, .scale_factor = {2}}); },
               {"interpolate", "exactly one of size and scale_factor", "(3)", "(2.0"});
  expect_error([&] { interpolate(x3, {}); }, {"interpolate", "exactly one"});
  expect_error([&] { interpolate(x3, {.size = {3}, .recompute_scale_factor = true}); },
               {"interpolate", "recompute_scale_factor"});
  expect_error(
      [&] {
        interpolate(x4, {.size = {3, 4, 5}});
      },
      {"interpolate", "size of 1 or 2 values", "(3, 4, 5)"});
  expect_error([&] { interpolate(x3, {.scale_factor = {-2}}); },
               {"interpolate", "scale_factor must be positive", "(-2"});
  expect_error([&] { interpolate(x3, {.scale_factor = {0.2}}); },
               {"interpolate", "sizes must be positive", "spatial size 0 along dim 2"});
  expect_error([&] { interpolate(x3, {.size = {0}}); }, {"interpolate", "sizes must be positive"});
  expect_error([&] { pixel_shuffle(zeros({4, 4}), 2); }, {"pixel_shuffle", "[4, 4]"});
  expect_error(
      [&] {
        pixel_shuffle(zeros({1, 6, 2, 2}), 2);
      },
      {"pixel_shuffle", "6 channels", "upscale_factor 2"});
  expect_error([&] { pixel_shuffle(zeros({1, 4, 2, 2}), 0); }, {"pixel_shuffle", "got 0"});
  expect_error(
      [&] {
        pixel_unshuffle(zeros({1, 1, 4, 5}), 2);
      },
      {"pixel_unshuffle", "height 4 and width 5", "downscale_factor 2"});
}

}  // namespace

}  // namespace sinter::testing

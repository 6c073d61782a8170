// ONNX export (Note [onnx export]): every supported module and the reference models, trained for a
// moment, exported, then run in ONNX Runtime (tests/scripts/onnx_run.py; skipped without the
// onnxruntime package) on fresh inputs of another batch size than the example's, against Sinter's
// own outputs; the files read back with the ONNX library (names, dims, dtypes); and the errors.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "onnx_test_util.h"
#include "test_util.h"

#ifdef SINTER_TEST_WITH_ONNX
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#endif

namespace sinter {
namespace {

using testing::expect_error;
using testing::TempDir;

nn::models::LlamaConfig small_llama(int64_t kv_heads, bool tied) {
  return {.vocab_size = 17,
          .context_length = 12,
          .n_layer = 2,
          .n_head = 4,
          .n_kv_head = kv_heads,
          .n_embd = 16,
          .mlp_hidden = 24,
          .rope_base = 100.0,
          .tie_weights = tied};
}

nn::models::GPTConfig small_gpt(bool tied) {
  return {.vocab_size = 17,
          .context_length = 12,
          .n_layer = 2,
          .n_head = 2,
          .n_embd = 16,
          .tie_weights = tied};
}

// Each row: a module, trained a moment, exported with a batch-4 example, run on batch 3.
std::vector<OnnxCase> onnx_cases() {
  using nn::Sequential;
  std::vector<OnnxCase> c;
  c.push_back({"Linear", make<nn::Linear>([] { return nn::Linear(5, 3); }), rows({5})});
  c.push_back(
      {"LinearOnSequences", make<nn::Linear>([] { return nn::Linear(5, 3); }), rows({4, 5})});
  c.push_back(
      {"LinearNoBias", make<nn::Linear>([] { return nn::Linear(5, 3, false); }), rows({2, 4, 5})});
  c.push_back({"Conv2d",
               make<nn::Conv2d>([] { return nn::Conv2d(3, 4, 3, {.stride = 2, .padding = 1}); }),
               images(3, 9, 8)});
  c.push_back(
      {"Conv2dGroupedDilatedNoBias", make<nn::Conv2d>([] {
         return nn::Conv2d(
             4, 6, {3, 2},
             {.stride = {1, 2}, .padding = {2, 1}, .dilation = 2, .groups = 2, .bias = false});
       }),
       images(4, 9, 9)});
  c.push_back({"BatchNorm2dEval",
               make<Sequential>([] { return Sequential(nn::Conv2d(2, 3, 1), nn::BatchNorm2d(3)); }),
               images(2, 5, 5)});
  c.push_back({"BatchNorm1d", make<Sequential>([] {
                 return Sequential(nn::Linear(6, 5), nn::BatchNorm1d(5), nn::Linear(5, 2));
               }),
               rows({6})});
  c.push_back({"BatchNorm2dNotAffine", make<Sequential>([] {
                 return Sequential(nn::Conv2d(2, 3, 1), nn::BatchNorm2d(3, 1e-3, 0.3, false));
               }),
               images(2, 5, 5)});
  c.push_back({"LayerNorm", make<nn::LayerNorm>([] { return nn::LayerNorm({6}); }), rows({3, 6})});
  c.push_back({"LayerNormWithoutBias", make<Sequential>([] {
                 auto norm = nn::LayerNorm({6}, 1e-5, true, false);
                 nn::init::normal_(norm.weight);
                 return Sequential(nn::Linear(6, 6), std::move(norm));
               }),
               rows({3, 6})});
  c.push_back({"LayerNormTwoDimsNotAffine", make<Sequential>([] {
                 return Sequential(nn::Linear(6, 6), nn::LayerNorm({3, 6}, 1e-4, false));
               }),
               rows({3, 6})});
  c.push_back({"RMSNorm", make<Sequential>([] {
                 auto norm = nn::RMSNorm({6});
                 nn::init::normal_(norm.weight);
                 return Sequential(nn::Linear(6, 6), std::move(norm));
               }),
               rows({3, 6})});
  c.push_back({"RMSNormTwoDimsNoWeight", make<Sequential>([] {
                 return Sequential(nn::Linear(6, 6), nn::RMSNorm({3, 6}, 1e-4, false));
               }),
               rows({3, 6})});
  c.push_back({"Activations", make<Sequential>([] {
                 return Sequential(nn::Linear(6, 8), nn::ReLU(), nn::Linear(8, 8), nn::Tanh(),
                                   nn::Linear(8, 8), nn::Sigmoid(), nn::Linear(8, 8), nn::GELU(),
                                   nn::Linear(8, 8), nn::GELU(Activation::GeluTanh));
               }),
               rows({6})});
  c.push_back({"MaxPool2d", make<Sequential>([] {
                 return Sequential(nn::Conv2d(2, 2, 1),
                                   nn::MaxPool2d(3, {.stride = 2, .padding = 1}),
                                   nn::MaxPool2d(2, {.dilation = 2}));
               }),
               images(2, 11, 10)});
  c.push_back({"MaxPool2dCeilMode", make<Sequential>([] {
                 return Sequential(nn::Conv2d(2, 2, 1), nn::MaxPool2d(2, {.ceil_mode = true}));
               }),
               images(2, 7, 9)});
  c.push_back({"AvgPool2d", make<Sequential>([] {
                 return Sequential(
                     nn::Conv2d(2, 2, 1), nn::AvgPool2d(2),
                     nn::AvgPool2d(3, {.stride = 2, .padding = 1, .count_include_pad = false}),
                     nn::AvgPool2d(3, {.stride = 1, .padding = 1}));
               }),
               images(2, 12, 10)});
  c.push_back({"AdaptiveAvgPool2d", make<Sequential>([] {
                 return Sequential(nn::Conv2d(2, 3, 1), nn::AdaptiveAvgPool2d({2, 3}),
                                   nn::AdaptiveAvgPool2d(1), nn::Flatten());
               }),
               images(2, 4, 6)});
  c.push_back({"FlattenMiddleDimsAndDropout", make<Sequential>([] {
                 return Sequential(nn::Conv2d(2, 3, 1), nn::Dropout(0.5), nn::Flatten(1, 2),
                                   nn::Linear(4, 2));
               }),
               images(2, 5, 4)});
  c.push_back({"Embedding", make<Sequential>([] {
                 return Sequential(nn::Embedding(10, 4, 0), nn::Linear(4, 3));
               }),
               tokens(10, 5)});
  c.push_back({"MultiheadAttention",
               make<nn::MultiheadAttention>([] { return nn::MultiheadAttention(8, 2); }),
               rows({5, 8})});
  c.push_back({"MultiheadAttentionCausal", make<nn::MultiheadAttention>([] {
                 return nn::MultiheadAttention(8, 4, {.bias = false, .causal = true});
               }),
               rows({5, 8})});
  c.push_back({"TransformerBlock", make<nn::TransformerBlock>([] {
                 return nn::TransformerBlock(8, 2, {.dropout = 0.1});
               }),
               rows({6, 8})});
  c.push_back({"TransformerBlockCausalRelu", make<nn::TransformerBlock>([] {
                 return nn::TransformerBlock(8, 2,
                                             {.causal = true, .activation = Activation::Relu});
               }),
               rows({6, 8})});
  c.push_back({"TransformerBlockExactGelu", make<nn::TransformerBlock>([] {
                 return nn::TransformerBlock(8, 2, {.activation = Activation::Gelu});
               }),
               rows({6, 8})});
  c.push_back({"Mlp", make<Sequential>(nn::models::mlp), images(1, 28, 28)});
  c.push_back({"Cnn", make<Sequential>(nn::models::cnn), images(1, 28, 28)});
  c.push_back(
      {"ResNet20", make<Sequential>([] { return nn::models::resnet20(); }), images(3, 32, 32)});
  c.push_back({"ResNet20OneChannel", make<Sequential>([] { return nn::models::resnet20(1); }),
               images(1, 32, 32)});
  c.push_back({"GptTied", make<nn::models::GPT>([] { return nn::models::GPT(small_gpt(true)); }),
               tokens(17, 7)});
  // Dynamic length: exported at length 7, run at 11 (the context is 12).
  c.push_back({"GptUntiedDynamicSequence",
               make<nn::models::GPT>([] { return nn::models::GPT(small_gpt(false)); }),
               tokens(17, 7),
               1e-5,
               {.dynamic_sequence = true},
               3,
               tokens(17, 11)});
  // Llama: grouped-query attention (4 query heads on 2 K/V heads), rope, RMSNorm, SwiGLU.
  // Exported at batch 4 and length 7, run at batch 3 and length 11 (the context is 12).
  c.push_back({"LlamaGqaDynamicSequence",
               make<nn::models::Llama>([] { return nn::models::Llama(small_llama(2, false)); }),
               tokens(17, 7),
               1e-5,
               {.dynamic_sequence = true},
               3,
               tokens(17, 11)});
  c.push_back({"LlamaTiedOneKvHead",
               make<nn::models::Llama>([] { return nn::models::Llama(small_llama(1, true)); }),
               tokens(17, 7)});
  c.push_back({"LlamaLayer", make<nn::models::LlamaDecoderLayer>([] {
                 return nn::models::LlamaDecoderLayer(small_llama(4, false));
               }),
               rows({6, 16})});
  // Fused for inference: BatchNorm folded, activations in the layers' epilogues.
  for (auto [name, model, input] :
       {std::tuple{"MlpFused", make<Sequential>(nn::models::mlp), images(1, 28, 28)},
        std::tuple{"CnnFused", make<Sequential>(nn::models::cnn), images(1, 28, 28)},
        std::tuple{"ResNet20OneChannelFused",
                   make<Sequential>([] { return nn::models::resnet20(1); }), images(1, 32, 32)},
        std::tuple{"LinearBatchNorm1dFused", make<Sequential>([] {
                     return Sequential(nn::Flatten(), nn::Linear(12, 8), nn::BatchNorm1d(8),
                                       nn::ReLU(), nn::Linear(8, 4));
                   }),
                   images(3, 2, 2)},
        std::tuple{"ConvBnGeluFused", make<Sequential>([] {
                     return Sequential(nn::Conv2d(3, 4, 3, {.padding = 1}), nn::BatchNorm2d(4),
                                       nn::GELU(Activation::GeluTanh), nn::Flatten(),
                                       nn::Linear(4 * 36, 5), nn::GELU());
                   }),
                   images(3, 6, 6)}}) {
    OnnxCase f{name, model, input};
    f.fused = true;
    c.push_back(f);
  }
  c.push_back({"FixedBatch",
               make<Sequential>(nn::models::cnn),
               images(1, 28, 28),
               1e-5,
               {.dynamic_batch = false},
               4});
  return c;
}

class OnnxRuntimeMatches : public ::testing::TestWithParam<OnnxCase> {};

TEST_P(OnnxRuntimeMatches, Sinter) {
  SINTER_REQUIRE_ONNX_RUNTIME();
  expect_onnx_runtime_matches(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Modules, OnnxRuntimeMatches, ::testing::ValuesIn(onnx_cases()),
                         [](const ::testing::TestParamInfo<OnnxCase>& info) {
                           return info.param.name;
                         });

// The QDQ export of an int8 model (Note [int8 quantization]) runs in ONNX Runtime close to the
// outputs of Sinter's own int8 execution, on Fashion-MNIST test images where the data set is
// installed (a cnn and a ResNet-20 trained for a moment on it), else on noise; the file is at most
// 0.3x the f32 export. The integer sums are the same, but ONNX Runtime fuses a layer with the next
// one's QuantizeLinear and requantizes with its own rounding (and an int32 bias), so a value near a
// rounding boundary can land one step apart, and the difference grows with depth: the logits agree
// to 1e-2 relative here, and the classes wherever the top two logits are not within that
// (tests/scripts/check_int8_example.py compares the classes of trained models).
TEST(OnnxExport, Int8QdqModelsMatchOnnxRuntime) {
  SINTER_REQUIRE_ONNX_RUNTIME();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  manual_seed(seed);
  std::optional<data::FashionMNIST> train, test;
  if (std::filesystem::exists(data::FashionMNIST::kDebianRoot)) {
    train.emplace(data::FashionMNIST::kDebianRoot, true,
                  data::FashionMNIST::default_normalization());
    test.emplace(data::FashionMNIST::kDebianRoot, false,
                 data::FashionMNIST::default_normalization());
  } else {
    std::printf("no Fashion-MNIST in %s: noise instead\n", data::FashionMNIST::kDebianRoot);
  }
  for (const bool resnet : {false, true}) {
    // Images: the data set's (padded to 32x32 with the background for the ResNet), or noise.
    const auto images = [&](const std::optional<data::FashionMNIST>& set, int64_t start,
                            int64_t n) {
      Tensor x = set ? set->inputs().narrow(0, start, n).contiguous() : randn({n, 1, 28, 28});
      if (!resnet) return x;
      const double background = (0.0 - 0.2860) / 0.3530;
      Tensor padded = full({n, 1, 32, 32}, background);
      NoGradGuard no_grad;
      padded.narrow(2, 2, 28).narrow(3, 2, 28).copy_(x);
      return padded;
    };
    nn::Sequential m = resnet ? nn::models::resnet20(1) : nn::models::cnn();
    optim::Adam opt(m.parameters(), {.lr = 1e-3});
    for (int64_t step = 0; step < (resnet ? 40 : 60); ++step) {
      opt.zero_grad();
      const Tensor x = images(train, step * 32, 32);
      const Tensor y = train ? train->targets().narrow(0, step * 32, 32)
                             : randint(0, 10, {32}, {.dtype = DType::i64});
      cross_entropy(m.forward(x), y).backward();
      opt.step();
    }
    m.eval();
    const std::shared_ptr<nn::Module> q =
        quant::quantize(m, 4, [&](int64_t i) { return images(train, 5000 + i * 64, 64); });
    const TempDir dir;
    const std::string f32_path = dir.file("f32.onnx"), int8_path = dir.file("int8.onnx");
    const Tensor example = images(test, 0, 1);
    const int64_t f32_bytes = onnx::export_model(m, example, f32_path).bytes;
    const int64_t int8_bytes = onnx::export_model(*q, example, int8_path).bytes;
    EXPECT_LE(int8_bytes, f32_bytes * 3 / 10) << f32_bytes;

    const int64_t n = 2000;
    const Tensor x = images(test, 0, n);
    Tensor ours;
    {
      InferenceMode im;
      ours = q->forward(x);
    }
    const Tensor theirs = run_in_onnx_runtime(int8_path, x, dir);
    ASSERT_TRUE(theirs.defined());
    const double error = relative_error(theirs, ours);
    const int64_t agree = sum(eq(argmax(ours, 1), argmax(theirs, 1))).item<int64_t>();
    std::printf(
        "%s: int8 in ONNX Runtime against Sinter: relative error %.3g, the same class "
        "for %lld of %lld images; files %lld and %lld bytes\n",
        resnet ? "resnet20" : "cnn", error, static_cast<long long>(agree),
        static_cast<long long>(n), static_cast<long long>(int8_bytes),
        static_cast<long long>(f32_bytes));
    // About 2.5 times the worst of 14 seeds seen (resnet20: 0.007 to 0.0122).
    EXPECT_LE(error, 3e-2);
    // Images whose two best classes are further apart than the outputs' difference get one class.
    const Tensor top = std::get<0>(topk(ours, 2, 1));
    const Tensor margin = top.select(1, 0) - top.select(1, 1);
    const Tensor clear = gt(margin, mul(abs(theirs - ours).max(), 2.0));
    const Tensor same = eq(argmax(ours, 1), argmax(theirs, 1)).to(DType::i64);
    EXPECT_EQ(sum(where(clear, same, 0)).item<int64_t>(),
              sum(clear.to(DType::i64)).item<int64_t>());
    EXPECT_GE(agree, n * 97 / 100);  // models trained for a moment: close logits
  }
}

// FP16 export of f32 models (ExportOptions::dtype): half the file, and ONNX Runtime's outputs in
// f16 near Sinter's f32 ones.
TEST(OnnxExport, Fp16ExportOfF32ModelsRunsInOnnxRuntime) {
  SINTER_REQUIRE_ONNX_RUNTIME();
  manual_seed(testing::fresh_seed());
  const TempDir dir;
  for (const bool conv : {false, true}) {
    nn::Sequential m = conv ? nn::models::cnn() : nn::models::mlp();
    m.eval();
    const Tensor x = randn({3, 1, 28, 28});
    const int64_t f32_bytes = onnx::export_model(m, x, dir.file("f32.onnx")).bytes;
    const std::string path = dir.file("f16.onnx");
    const int64_t f16_bytes = onnx::export_model(m, x, path, {.dtype = DType::f16}).bytes;
    EXPECT_LT(f16_bytes, f32_bytes * 6 / 10);
    Tensor want;
    {
      NoGradGuard no_grad;
      want = m.forward(x);
    }
    const Tensor got = run_in_onnx_runtime(path, x.to(DType::f16), dir);
    ASSERT_TRUE(got.defined());
    EXPECT_EQ(got.dtype(), DType::f16);
    const double error = relative_error(got.to(DType::f32), want);
    std::printf("%s in f16: relative error %.3g, %lld bytes against %lld\n", conv ? "cnn" : "mlp",
                error, static_cast<long long>(f16_bytes), static_cast<long long>(f32_bytes));
    EXPECT_LE(error, 1e-2);
  }
}

// An f64 model exported in its own dtype runs in f64 in ONNX Runtime, to f64's precision; by
// default the same model is written in f32. (ONNX Runtime's CPU provider has no f64 Conv, so an
// mlp.)
TEST(OnnxExport, KeepsTheModulesDtypeWhenAsked) {
  SINTER_REQUIRE_ONNX_RUNTIME();
  manual_seed(testing::fresh_seed());
  nn::Sequential m = nn::models::mlp();
  m.to(DType::f64);
  const TempDir dir;
  const Tensor x = randn({2, 1, 28, 28}, {.dtype = DType::f64});
  onnx::export_model(m, x, dir.file("f64.onnx"), {.dtype = std::nullopt});
  onnx::export_model(m, x, dir.file("f32.onnx"));
  m.eval();
  const Tensor expected = m.forward(x);
  const Tensor in_f64 = run_in_onnx_runtime(dir.file("f64.onnx"), x, dir);
  ASSERT_TRUE(in_f64.defined());
  EXPECT_EQ(in_f64.dtype(), DType::f64);
  EXPECT_LE(relative_error(in_f64, expected), 1e-12);
  const Tensor in_f32 = run_in_onnx_runtime(dir.file("f32.onnx"), x.to(DType::f32), dir);
  ASSERT_TRUE(in_f32.defined());
  EXPECT_EQ(in_f32.dtype(), DType::f32);
  EXPECT_LE(relative_error(in_f32, expected), 1e-5);
}

// Names of the graph's input and output as asked.
TEST(OnnxExport, NamesTheInputAndOutputAsAsked) {
  SINTER_REQUIRE_ONNX_RUNTIME();
  nn::Sequential m(nn::Linear(3, 2), nn::Dropout(0.2));  // the last value comes from a Gemm
  const TempDir dir;
  onnx::export_model(m, randn({2, 3}), dir.file("m.onnx"),
                     {.input_name = "pixels", .output_name = "logits"});
  m.eval();
  const Tensor x = randn({5, 3});
  const Tensor got = run_in_onnx_runtime(dir.file("m.onnx"), x, dir, "pixels", "logits");
  ASSERT_TRUE(got.defined());
  EXPECT_LE(relative_error(got, m.forward(x)), 1e-6);
  // An identity model: the output is a copy of the input.
  nn::Sequential identity(nn::Dropout(0.5));
  onnx::export_model(identity, randn({2, 3}), dir.file("id.onnx"));
  const Tensor same = run_in_onnx_runtime(dir.file("id.onnx"), x, dir);
  ASSERT_TRUE(same.defined());
  EXPECT_TRUE(testing::all_close(same, x, 0, 0));
}

#ifdef SINTER_TEST_WITH_ONNX

::onnx::ModelProto read_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ::onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromIstream(&in)) << path;
  return model;
}

std::vector<std::string> dims_of(const ::onnx::ValueInfoProto& v) {
  std::vector<std::string> dims;
  for (const auto& d : v.type().tensor_type().shape().dim()) {
    dims.push_back(d.has_dim_param() ? d.dim_param() : std::to_string(d.dim_value()));
  }
  return dims;
}

// The file as another tool reads it: opset 17, the checker's approval, the weights under their
// state_dict names (once each), the symbolic batch dim.
TEST(OnnxExport, TheFileHoldsTheWeightsUnderTheirStateDictNames) {
  SINTER_REQUIRE_ONNX();
  nn::Sequential m = nn::models::cnn();
  const TempDir dir;
  const std::string path = dir.file("cnn.onnx");
  const onnx::ExportSummary summary = onnx::export_model(m, randn({4, 1, 28, 28}), path);
  EXPECT_NO_THROW(::onnx::checker::check_model(path));
  const ::onnx::ModelProto model = read_model(path);
  ASSERT_EQ(model.opset_import_size(), 1);
  EXPECT_EQ(model.opset_import(0).version(), 17);
  EXPECT_EQ(model.producer_name(), "sinter");
  EXPECT_FALSE(model.producer_version().empty());
  std::set<std::string> weights;
  for (const auto& t : model.graph().initializer()) {
    if (t.name().rfind("const/", 0) != 0) {
      weights.insert(t.name());
      EXPECT_EQ(t.data_type(), ::onnx::TensorProto::FLOAT) << t.name();
    }
  }
  std::set<std::string> names;
  for (const auto& [name, t] : m.state_dict()) names.insert(name);
  EXPECT_EQ(weights, names);
  EXPECT_EQ(summary.initializers, model.graph().initializer_size());
  EXPECT_EQ(summary.nodes, model.graph().node_size());
  ASSERT_EQ(model.graph().input_size(), 1);
  EXPECT_EQ(model.graph().input(0).name(), "input");
  EXPECT_EQ(dims_of(model.graph().input(0)), (std::vector<std::string>{"batch", "1", "28", "28"}));
  EXPECT_EQ(dims_of(model.graph().output(0)), (std::vector<std::string>{"batch", "10"}));
}

TEST(OnnxExport, ATiedWeightIsStoredOnce) {
  SINTER_REQUIRE_ONNX();
  nn::models::GPT gpt(small_gpt(true));
  const TempDir dir;
  onnx::export_model(gpt, randint(0, 17, {2, 5}, {.dtype = DType::i64}), dir.file("gpt.onnx"),
                     {.dynamic_sequence = true});
  const ::onnx::ModelProto model = read_model(dir.file("gpt.onnx"));
  int wte = 0;
  for (const auto& t : model.graph().initializer()) {
    wte += t.name() == "wte.weight";
    EXPECT_NE(t.name().rfind("lm_head", 0), 0u) << "a tied model has no head of its own";
  }
  EXPECT_EQ(wte, 1);
  EXPECT_EQ(model.graph().input(0).type().tensor_type().elem_type(), ::onnx::TensorProto::INT64);
  EXPECT_EQ(dims_of(model.graph().input(0)), (std::vector<std::string>{"batch", "sequence"}));
  EXPECT_EQ(dims_of(model.graph().output(0)),
            (std::vector<std::string>{"batch", "sequence", "17"}));
}

// Half-precision exports: the weights in the module's f16 or bf16, accepted by the checker.
TEST(OnnxExport, HalfPrecisionModelsKeepTheirDtype) {
  SINTER_REQUIRE_ONNX();
  const TempDir dir;
  for (const DType dt : {DType::f16, DType::bf16}) {
    nn::Sequential m = nn::models::mlp();
    m.to(dt);
    const std::string path = dir.file(std::string(dtype_name(dt)) + ".onnx");
    onnx::export_model(m, randn({2, 784}).to(dt), path, {.dtype = std::nullopt});
    EXPECT_NO_THROW(::onnx::checker::check_model(path));
    const ::onnx::ModelProto model = read_model(path);
    const int expected =
        dt == DType::f16 ? ::onnx::TensorProto::FLOAT16 : ::onnx::TensorProto::BFLOAT16;
    EXPECT_EQ(model.graph().input(0).type().tensor_type().elem_type(), expected);
    for (const auto& t : model.graph().initializer()) EXPECT_EQ(t.data_type(), expected);
  }
}

#endif  // SINTER_TEST_WITH_ONNX

// A layer of the user's own: not exportable, and the error says which one and where.
class Doubler : public nn::Module {
 public:
  std::string name() const override { return "Doubler"; }
  Tensor forward(const Tensor& x) override { return x * 2.0; }
};

// A subclass of a supported layer may compute something else: it is not taken for its base.
class ShiftedLinear : public nn::Linear {
 public:
  ShiftedLinear() : nn::Linear(3, 3) {}
  Tensor forward(const Tensor& x) override { return nn::Linear::forward(x) + 1.0; }
};

TEST(OnnxExport, ErrorsNameTheModuleAndTheValues) {
  SINTER_REQUIRE_ONNX();
  const Tensor x = randn({2, 3});
  nn::Sequential custom(nn::Linear(3, 3), Doubler());
  expect_error([&] { onnx::export_to_string(custom, x); },
               {"onnx::export_model", "module '1'", "Doubler", "no ONNX mapping",
                "Supported: Sequential, Linear", "GPT"});
  nn::Sequential sub(ShiftedLinear{});
  expect_error([&] { onnx::export_to_string(sub, x); }, {"module '0'", "no ONNX mapping"});
  nn::ModuleList list(nn::Linear(3, 3));
  expect_error([&] { onnx::export_to_string(list, x); }, {"the module", "ModuleList"});

  nn::Sequential no_stats(nn::BatchNorm2d(3, 1e-5, 0.1, true, false));
  expect_error(
      [&] {
        onnx::export_to_string(no_stats, randn({2, 3, 4, 4}));
      },
      {"module '0'", "BatchNorm2d", "running statistics"});
  nn::Sequential uneven(nn::AdaptiveAvgPool2d(3));
  expect_error(
      [&] {
        onnx::export_to_string(uneven, randn({2, 3, 4, 4}));
      },
      {"module '0'", "3x3 from 4x4", "unequal"});
  nn::Sequential overhang(nn::AvgPool2d(2, {.ceil_mode = true}));
  expect_error(
      [&] {
        onnx::export_to_string(overhang, randn({2, 3, 5, 5}));
      },
      {"AvgPool2d", "ceil_mode"});
  nn::Sequential unbatched(nn::MaxPool2d(2));
  expect_error(
      [&] {
        onnx::export_to_string(unbatched, randn({3, 4, 4}));
      },
      {"MaxPool2d", "(N, C, H, W)"});
  // Flatten(0) merges the batch into the features: its output cannot follow the input's batch.
  nn::Sequential merged(nn::Flatten(0));
  expect_error(
      [&] {
        onnx::export_to_string(merged, randn({2, 3}));
      },
      {"output's dim 0 (6)", "'batch' dim (2)", "dynamic_batch = false"});
  EXPECT_NO_THROW(onnx::export_to_string(merged, randn({2, 3}), {.dynamic_batch = false}));

  nn::Sequential ok(nn::Linear(3, 2));
  expect_error([&] { onnx::export_to_string(ok, x, {.opset = 13}); }, {"opset 13"});
  expect_error([&] { onnx::export_to_string(ok, x, {.dtype = DType::i64}); },
               {"dtype must be floating", "i64"});
  expect_error([&] { onnx::export_to_string(ok, x, {.output_name = "input"}); },
               {"distinct", "'input'"});
  expect_error([&] { onnx::export_to_string(ok, randn({2, 4})); }, {"Linear"});
  nn::models::GPT gpt(small_gpt(true));
  expect_error(
      [&] {
        onnx::export_to_string(gpt, randint(0, 17, {1, 13}, {.dtype = DType::i64}));
      },
      {"GPT", "13"});
}

// Export runs the module in eval mode and gives every module its own mode back: a BatchNorm frozen
// inside a training model stays frozen.
TEST(OnnxExport, RestoresEachModulesTrainingMode) {
  SINTER_REQUIRE_ONNX();
  nn::Sequential m(nn::Conv2d(2, 3, 1), nn::BatchNorm2d(3), nn::Dropout(0.1));
  m.train();
  m[1]->eval();
  onnx::export_to_string(m, randn({2, 2, 4, 4}));
  EXPECT_TRUE(m.is_training());
  EXPECT_TRUE(m[0]->is_training());
  EXPECT_FALSE(m[1]->is_training());
  EXPECT_TRUE(m[2]->is_training());
}

// An input named like a weight would replace it in the graph: refused.
TEST(OnnxExport, AnInputNamedLikeAWeightIsRefused) {
  SINTER_REQUIRE_ONNX();
  nn::Linear l(3, 3);
  expect_error(
      [&] {
        onnx::export_to_string(l, randn({2, 3}), {.input_name = "weight"});
      },
      {"'weight'", "input_name"});
  expect_error(
      [&] {
        onnx::export_to_string(l, randn({2, 3}), {.output_name = "bias"});
      },
      {"'bias'", "output_name"});
}

// bf16 has no Conv or pooling in opset 17: the error says so instead of a schema message.
TEST(OnnxExport, Bf16WithConvolutionsIsAClearError) {
  SINTER_REQUIRE_ONNX();
  nn::Sequential m = nn::models::cnn();
  m.to(DType::bf16);
  expect_error(
      [&] {
        onnx::export_to_string(m, randn({2, 1, 28, 28}).to(DType::bf16), {.dtype = std::nullopt});
      },
      {"bf16", "Conv", "opset 17", "f32 or f16"});
}

// A module on the GPU exports as on the CPU (the example values are computed where it lives).
TEST(OnnxExport, CudaModulesExport) {
  SINTER_REQUIRE_CUDA();
  SINTER_REQUIRE_ONNX_RUNTIME();
  manual_seed(testing::fresh_seed());
  nn::models::GPT gpt(small_gpt(false));
  gpt.to(Device::cuda(0));
  const TempDir dir;
  const Tensor idx = randint(0, 17, {2, 6}, {.dtype = DType::i64});
  onnx::export_model(gpt, idx.cuda(), dir.file("gpt.onnx"));
  gpt.eval();
  const Tensor got = run_in_onnx_runtime(dir.file("gpt.onnx"), idx, dir);
  ASSERT_TRUE(got.defined());
  // The GPU's f32 kernels sum in another order than ONNX Runtime's CPU ones.
  EXPECT_LE(relative_error(got, gpt.forward(idx.cuda()).cpu()), 1e-4);
}

// A failed export leaves the file that was there; a folder that does not exist is named.
TEST(OnnxExport, AFailedExportKeepsThePreviousFile) {
  SINTER_REQUIRE_ONNX();
  const TempDir dir;
  const std::string path = dir.file("model.onnx");
  nn::Sequential good(nn::Linear(3, 2));
  onnx::export_model(good, randn({2, 3}), path);
  const auto size = std::filesystem::file_size(path);
  nn::Sequential bad(nn::Linear(3, 3), Doubler());
  EXPECT_THROW(onnx::export_model(bad, randn({2, 3}), path), Error);
  EXPECT_EQ(std::filesystem::file_size(path), size);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);
  const std::string nowhere = dir.file("missing/model.onnx");
  expect_error(
      [&] {
        onnx::export_model(good, randn({2, 3}), nowhere);
      },
      {"onnx::export_model", "cannot create", nowhere});
}

TEST(OnnxExport, ABuildWithoutOnnxSaysSo) {
  if (onnx::is_available()) GTEST_SKIP() << "this build has ONNX";
  nn::Sequential m(nn::Linear(3, 2));
  expect_error([&] { onnx::export_to_string(m, randn({2, 3})); }, {"built without ONNX"});
}

}  // namespace
}  // namespace sinter

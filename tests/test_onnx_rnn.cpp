// The recurrent layers exported as ONNX's LSTM, GRU and RNN operators and run in ONNX Runtime
// against Sinter's outputs; an LSTM with proj_size is refused by name.
#include <vector>

#include "onnx_test_util.h"

namespace sinter {
namespace {

using testing::expect_error;

// Sequence-first inputs (T, 3, features) whose length T is the exported dynamic dim.
std::function<Tensor(int64_t)> sequences(int64_t features) {
  return [=](int64_t t) { return randn({t + 2, 3, features}); };
}

std::vector<OnnxCase> rnn_cases() {
  return {
      {"Lstm", make<nn::LSTM>([] { return nn::LSTM(5, 6); }), sequences(5)},
      {"LstmTwoLayersBidirectionalBatchFirst", make<nn::LSTM>([] {
         return nn::LSTM(5, 6, {.num_layers = 2, .batch_first = true, .bidirectional = true});
       }),
       rows({4, 5})},
      {"GruTwoLayersBidirectional",
       make<nn::GRU>([] { return nn::GRU(4, 7, {.num_layers = 2, .bidirectional = true}); }),
       sequences(4)},
      {"GruNoBiasBatchFirst",
       make<nn::GRU>([] { return nn::GRU(4, 5, {.bias = false, .batch_first = true}); }),
       rows({6, 4})},
      {"RnnRelu",
       make<nn::RNN>([] { return nn::RNN(3, 5, {.nonlinearity = nn::RNNNonlinearity::Relu}); }),
       sequences(3)},
      {"RnnTanhTwoLayersBidirectional",
       make<nn::RNN>([] { return nn::RNN(3, 4, {.num_layers = 2, .bidirectional = true}); }),
       sequences(3)},
  };
}

class OnnxRnnMatches : public ::testing::TestWithParam<OnnxCase> {};

TEST_P(OnnxRnnMatches, Sinter) {
  SINTER_REQUIRE_ONNX_RUNTIME();
  expect_onnx_runtime_matches(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Rnn, OnnxRnnMatches, ::testing::ValuesIn(rnn_cases()),
                         [](const ::testing::TestParamInfo<OnnxCase>& info) {
                           return info.param.name;
                         });

TEST(OnnxRnn, ExportErrorsNameTheLayer) {
  SINTER_REQUIRE_ONNX();
  nn::LSTM projected(3, 4, {.proj_size = 2});
  expect_error(
      [&] {
        onnx::export_to_string(projected, zeros({5, 2, 3}));
      },
      {"LSTM", "proj_size 2"});
  nn::GRU gru(3, 4);
  expect_error(
      [&] {
        onnx::export_to_string(gru, zeros({5, 3}));
      },
      {"GRU", "batched input", "[5, 3]"});
}

}  // namespace
}  // namespace sinter

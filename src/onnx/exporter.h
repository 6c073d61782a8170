// The walk of the module tree (Note [onnx export] in include/sinter/onnx.h): the Exporter, the rows
// that map each module type to its emitter, and the emitters that modules and models share. Private
// to src/onnx/; a module's row and emitter go in modules_onnx.cpp, a model's in models_onnx.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <typeinfo>
#include <utility>
#include <vector>

#include "onnx/graph_builder.h"
#include "sinter/nn/conv.h"
#include "sinter/nn/fold.h"
#include "sinter/nn/pooling.h"
#include "sinter/nn/rnn.h"

namespace sinter::onnx::detail {

class Exporter : public GraphBuilder {
 public:
  using GraphBuilder::GraphBuilder;

  // The nodes of `m`, at state_dict path `path` ("" for the root), applied to `x`: the emitter of
  // the row of m's exact type in module_rows() or model_rows().
  Value emit(nn::Module& m, const std::string& path, const Value& x);

  // Llama's rotary embedding (models_onnx.cpp): (head size, base, rows) -> the cos and sin tables,
  // made once per export, and their rows while a whole Llama is exported (0: the input's length).
  std::map<std::tuple<int64_t, double, int64_t>, std::pair<std::string, std::string>> rope_tables;
  int64_t rope_rows = 0;
};

// Where a module sits: its state_dict path ("" for the root) and the scope its nodes are named
// under.
struct Site {
  const std::string& path;
  const std::string& scope;
};

using Emitter = Value (*)(Exporter&, nn::Module&, const Site&, const Value&);
struct Mapping {
  const char* name;
  const std::type_info* type;
  Emitter emit;
};

// The emitter of a row: F, a captureless lambda, on the module as its own type M.
template <class M, class F>
Value adapt(Exporter& ex, nn::Module& m, const Site& s, const Value& x) {
  return F{}(ex, static_cast<M&>(m), s, x);
}

// A row: module type M, its name in errors, and the body of its emitter, which reads the Exporter
// `ex`, the module `m` (as an M), its Site `s` and the input value `x`.
#define SINTER_ONNX_ROW(M, name, ...)                                                             \
  Mapping {                                                                                       \
    name, &typeid(M),                                                                             \
        &adapt<M,                                                                                 \
               decltype([]([[maybe_unused]] Exporter & ex, [[maybe_unused]] M & m,                \
                           [[maybe_unused]] const Site& s, const Value& x) -> Value __VA_ARGS__)> \
  }

// The module types the export maps, each by its exact type (a subclass may compute something
// else, so it is not taken for its base), and how: the lists emit() dispatches on and its error
// names. The library's modules (modules_onnx.cpp), then the reference models (models_onnx.cpp).
const std::vector<Mapping>& module_rows();
const std::vector<Mapping>& model_rows();

inline std::string join(const std::string& path, const std::string& name) {
  return path.empty() ? name : path + "." + name;
}
inline std::string where(const std::string& path) {
  return path.empty() ? std::string("the module") : "module '" + path + "'";
}

// act(x), for a layer's epilogue Activation: the ONNX nodes' output and Sinter's value
// (modules_onnx.cpp).
Value activation(Exporter& ex, const Value& x, Activation act, const std::string& scope);

// A Conv2d (or an int8 one, whose dequantized weight `w` names) and the other convolution layers
// (Conv1d, Conv3d, the transposed ones) as Conv or ConvTranspose nodes (conv_onnx.cpp).
Value conv2d(Exporter& ex, nn::Conv2d& c, const std::string& scope, const Value& x,
             const std::string& w = "");
Value conv_layer(Exporter& ex, nn::ConvBase& c, const std::string& scope, const Value& x);

// An RNN, LSTM or GRU (sinter/nn/rnn.h) as ONNX's RNN, LSTM or GRU nodes, one per layer
// (rnn_onnx.cpp); an LSTM with proj_size is an error (ONNX's LSTM has no projection).
Value rnn_layer(Exporter& ex, nn::RNNBase& m, const Site& s, const Value& x);

// A pool's ONNX output size along one dim (opset 17), and whether its last window runs past the
// padded input (ceil mode).
struct PoolDim {
  int64_t size;
  bool overhangs;
};
inline PoolDim pool_dim(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  const int64_t size = (ceil ? (span + s - 1) / s : span / s) + 1;
  return {size, (size - 1) * s + d * (k - 1) + 1 > in + 2 * p};
}

// MaxPool3d and AvgPool3d as ONNX's MaxPool and AveragePool with 3-D kernels (pooling_onnx.cpp).
Value pool3d(Exporter& ex, nn::MaxPool3d& m, const Site& s, const Value& x);
Value pool3d(Exporter& ex, nn::AvgPool3d& m, const Site& s, const Value& x);

// Unfold and Fold as Conv and ConvTranspose with a one-hot weight (fold_onnx.cpp).
Value unfold_layer(Exporter& ex, nn::Unfold& m, const Site& s, const Value& x);
Value fold_layer(Exporter& ex, nn::Fold& m, const Site& s, const Value& x);

// 0, 1, ..., T - 1 (i64), with T = dim 1 of `x` read at run time (so dynamic_sequence works).
std::string positions(Exporter& ex, const std::string& x, const std::string& scope);

// softmax(q k^T / sqrt(d) + the causal mask) v for q, k and v (B, H, T, d), the heads then side
// by side: (B, T, e). The mask keeps key j <= query i, with T read from `seq` (B, T, ...) at run
// time.
std::string attention_core(Exporter& ex, const std::string& q, const std::string& k,
                           const std::string& v, int64_t d, int64_t e, bool causal,
                           const std::string& seq, const std::string& scope);

}  // namespace sinter::onnx::detail

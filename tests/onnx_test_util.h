// What the ONNX export tests share (tests/test_onnx.cpp and the test_onnx_<topic>.cpp files):
// running an exported model in ONNX Runtime (tests/scripts/onnx_run.py), the rows of modules to
// export and the check of one row against Sinter's own outputs.
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "sinter/nn.h"
#include "sinter/onnx.h"
#include "sinter/optim.h"
#include "test_util.h"

namespace sinter {

inline const std::string kRunner = std::string(SINTER_SOURCE_DIR) + "/tests/scripts/onnx_run.py";

// Runs a shell command; returns its exit status and (in `output`) what it printed.
inline int run_command(const std::string& command, std::string* output) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output->append(buf, n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Empty where ONNX Runtime can run models here, else why not.
inline const std::string& onnx_runtime_missing() {
  static const std::string missing = [] {
    std::string out;
    const int status = run_command("python3 '" + kRunner + "' --check", &out);
    return status == 0 ? std::string() : (out.empty() ? std::string("python3 not found") : out);
  }();
  return missing;
}

#define SINTER_REQUIRE_ONNX_RUNTIME()                             \
  do {                                                            \
    SINTER_REQUIRE_BUILT_WITH("ONNX", [] {                        \
      nn::Sequential m;                                           \
      onnx::export_to_string(m, zeros({1}));                      \
    });                                                           \
    if (!onnx_runtime_missing().empty())                          \
      GTEST_SKIP() << "ONNX Runtime: " << onnx_runtime_missing(); \
  } while (0)

#define SINTER_REQUIRE_ONNX()              \
  SINTER_REQUIRE_BUILT_WITH("ONNX", [] {   \
    nn::Sequential m;                      \
    onnx::export_to_string(m, zeros({1})); \
  })

// The model's output for `input` in ONNX Runtime.
inline Tensor run_in_onnx_runtime(const std::string& model, const Tensor& input,
                                  const testing::TempDir& dir,
                                  const std::string& input_name = "input",
                                  const std::string& output_name = "output") {
  const std::string in = dir.file("in.safetensors"), out = dir.file("out.safetensors");
  save({{input_name, input}}, in);
  std::string printed;
  const int status =
      run_command("python3 '" + kRunner + "' '" + model + "' '" + in + "' '" + out + "'", &printed);
  if (status != 0) {
    ADD_FAILURE() << "onnx_run.py exited " << status << ":\n" << printed;
    return Tensor();
  }
  return load(out).at(output_name);
}

// max |actual - expected| / max |expected|.
inline double relative_error(const Tensor& actual, const Tensor& expected) {
  const Tensor e = expected.to(DType::f64), a = actual.to(DType::f64);
  const double scale = std::max(abs(e).max().item<double>(), 1e-30);
  return abs(a - e).max().item<double>() / scale;
}

// A few SGD steps in training mode, on random inputs of batch 4 and a loss that reaches every
// output, so that weights, biases and BatchNorm's running statistics all move off their starts.
inline void train_a_moment(nn::Module& m, const std::function<Tensor(int64_t)>& input) {
  m.train();
  optim::SGD opt(m.parameters(), {.lr = 0.05, .momentum = 0.9});
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    const Tensor y = m.forward(input(4));
    const Tensor d = y - randn(y.shape(), {.dtype = y.dtype()});
    mean(d * d).backward();
    opt.step();
  }
}

struct OnnxCase {
  std::string name;
  std::function<std::shared_ptr<nn::Module>()> make;
  std::function<Tensor(int64_t batch)> input;
  double tolerance = 1e-5;  // relative, in f32
  onnx::ExportOptions options = {};
  // The batch ONNX Runtime runs: another than the example's 4, unless the batch is fixed.
  int64_t run_batch = 3;
  // A transform of the run's input for dynamic_sequence (another length).
  std::function<Tensor(int64_t batch)> run_input = nullptr;
  // Exported after nn::fuse_for_inference (Note [inference fusion]).
  bool fused = false;
};

template <class M>
std::function<std::shared_ptr<nn::Module>()> make(std::function<M()> f) {
  return [f] { return std::make_shared<M>(f()); };
}

inline std::function<Tensor(int64_t)> images(int64_t c, int64_t h, int64_t w) {
  return [=](int64_t n) { return randn({n, c, h, w}); };
}
inline std::function<Tensor(int64_t)> rows(Shape rest) {
  return [=](int64_t n) {
    Shape s{n};
    s.insert(s.end(), rest.begin(), rest.end());
    return randn(s);
  };
}
inline std::function<Tensor(int64_t)> tokens(int64_t vocab, int64_t t) {
  return [=](int64_t n) { return randint(0, vocab, {n, t}, {.dtype = DType::i64}); };
}

// A case of `layer` (one without parameters of its own) behind a Linear over the input's last dim,
// on inputs (N, *rest).
template <class L>
OnnxCase after_linear_case(const std::string& name, L layer, Shape rest) {
  const int64_t last = rest.back();
  return {name, [=] { return std::make_shared<nn::Sequential>(nn::Linear(last, last), layer); },
          rows(rest)};
}

// c's module, trained a moment, exported with a batch-4 example and run in ONNX Runtime on another
// input: its outputs within c.tolerance (relative) of Sinter's.
inline void expect_onnx_runtime_matches(const OnnxCase& c) {
  manual_seed(testing::fresh_seed());
  std::shared_ptr<nn::Module> m = c.make();
  train_a_moment(*m, c.input);
  if (c.fused) m = nn::fuse_for_inference(*m);  // in eval mode
  const bool training = m->is_training();
  const testing::TempDir dir;
  const std::string path = dir.file(c.name + ".onnx");
  const onnx::ExportSummary summary = onnx::export_model(*m, c.input(4), path, c.options);
  EXPECT_EQ(m->is_training(), training) << "export must restore the training mode";
  EXPECT_GT(summary.nodes, 0);
  EXPECT_EQ(summary.bytes, static_cast<int64_t>(std::filesystem::file_size(path)));

  const Tensor x = c.run_input ? c.run_input(c.run_batch) : c.input(c.run_batch);
  m->eval();
  Tensor expected;
  {
    NoGradGuard no_grad;
    expected = m->forward(x);
  }
  const Tensor got = run_in_onnx_runtime(path, x, dir);
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.shape(), expected.shape());
  EXPECT_EQ(got.dtype(), DType::f32);
  const double error = relative_error(got, expected);
  std::printf("%s: relative error %.3g over output %s\n", c.name.c_str(), error,
              shape_str(got.shape()).c_str());
  EXPECT_LE(error, c.tolerance) << c.name;
}

}  // namespace sinter

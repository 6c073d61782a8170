// Shared test helpers: device availability, fresh seeds, closeness checks, a small MLP, and
// poisoning of the CUDA cache so that a kernel that leaves output unwritten fails loudly.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <source_location>
#include <string>
#include <vector>

#include "sinter/sinter.h"

namespace sinter::testing {

inline bool has_cuda() { return cuda::is_available(); }

// The kernel `fn` of the CUDA backend when `cuda`, else of the CPU one (src/kern/). A
// build without CUDA has no CUDA kernels to name (Note [kernel interfaces]); its tests skip before
// they would call one.
#ifdef SINTER_WITH_CUDA
#define SINTER_TEST_KERNEL(cuda, fn) ((cuda) ? ::sinter::cudak::fn : ::sinter::cpu::fn)
#else
#define SINTER_TEST_KERNEL(cuda, fn) ::sinter::cpu::fn
#endif

#define SINTER_REQUIRE_CUDA()                                                       \
  do {                                                                              \
    if (!::sinter::testing::has_cuda()) GTEST_SKIP() << "no CUDA device available"; \
  } while (0)

// A seed that differs per run (fresh random inputs); tests print it on failure.
inline uint64_t fresh_seed() {
  static std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// Max over elements of |a - b| - (atol + rtol * |b|); <= 0 means every element is close. NaN in
// either fails unless both are NaN at the same place.
inline ::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected,
                                            double atol, double rtol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << shape_str(actual.shape()) << " vs " << shape_str(expected.shape());
  }
  std::vector<double> a = actual.to_vector<double>(), b = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::isinf(b[i]) && a[i] == b[i]) continue;
    const double diff = std::abs(a[i] - b[i]);
    if (!(diff <= atol + rtol * std::abs(b[i]))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs expected "
                                           << b[i] << " (atol " << atol << ", rtol " << rtol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// sin(0.7 i) + 0.05 i at flat index i: deterministic inputs with no ties and no pattern, for known
// values computed from the same formula in PyTorch.
inline Tensor ramp(const Shape& shape, DType dtype = DType::f64) {
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::sin(0.7 * static_cast<double>(i)) + 0.05 * static_cast<double>(i);
  }
  return from_vector<double>(v, shape).to(dtype);
}

// Every element of `ts`, in order, as doubles (the parameters of a model, to compare runs).
inline std::vector<double> flat_values(const std::vector<Tensor>& ts) {
  std::vector<double> out;
  for (const Tensor& t : ts) {
    std::vector<double> v = t.detach().contiguous().to(DType::f64).to_vector<double>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// max |a - b| / max |b|: how far two runs' values are apart, against the values' scale.
inline double relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / std::max(scale, 1e-300);
}

// A tolerance per floating dtype, looked up as tol(dtype); bf16's serves any other dtype.
struct DTypeTolerances {
  double f64, f32, f16, bf16;
  double operator()(DType dt) const {
    if (dt == DType::f64) return f64;
    if (dt == DType::f32) return f32;
    return dt == DType::f16 ? f16 : bf16;
  }
};

// Whether probe() throws the error of a Sinter built without the optional dependency `name`
// ("built without zlib"), whose features then only throw.
template <class F>
bool built_without(const std::string& name, F probe) {
  try {
    probe();
  } catch (const Error& e) {
    return std::string(e.what()).find("built without " + name) != std::string::npos;
  }
  return false;
}

// Skips the test when Sinter was built without `name` (a string literal), as `probe` finds.
#define SINTER_REQUIRE_BUILT_WITH(name, probe)           \
  do {                                                   \
    if (::sinter::testing::built_without(name, probe)) { \
      GTEST_SKIP() << "Sinter was built without " name;  \
    }                                                    \
  } while (0)

// Skips the test in a build without nlohmann_json, where safetensors files, config.json and
// tokenizer.json are not read.
#define SINTER_REQUIRE_JSON() \
  SINTER_REQUIRE_BUILT_WITH(  \
      "nlohmann_json", [] { ::sinter::load_metadata("/nonexistent/sinter-probe.safetensors"); })

// Asserts that f() throws sinter::Error and that its text holds every fragment; a failure names the
// caller's line.
template <class F>
void expect_error(F f, std::initializer_list<std::string> fragments,
                  std::source_location where = std::source_location::current()) {
  ::testing::ScopedTrace trace(where.file_name(), static_cast<int>(where.line()), "expect_error");
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& frag : fragments) {
      EXPECT_NE(msg.find(frag), std::string::npos) << "\"" << frag << "\" is not in: " << msg;
    }
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected sinter::Error, got another exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected sinter::Error, but nothing was thrown";
}

// The exit code of body() run in a forked child, which never returns into the test framework:
// -1 when the child died of a signal, 99 when body threw.
inline int exit_code_in_child(const std::function<int()>& body) {
  const pid_t child = ::fork();
  if (child == 0) {
    int code = 99;
    try {
      code = body();
    } catch (...) {
    }
    ::_exit(code);
  }
  if (child < 0) return -1;
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A fresh folder for the current test's files, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("sinter-test-" + std::string(info->name()) + "-" + std::to_string(::getpid()) + "-" +
             std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Three Linear layers with ReLUs between them, `in` -> `hidden` -> `hidden` -> `out`, as fc1, fc2
// and fc3.
class Mlp : public nn::Module {
 public:
  Mlp(int64_t in, int64_t hidden, int64_t out) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(in, hidden));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, hidden));
    fc3 = register_module("fc3", std::make_shared<nn::Linear>(hidden, out));
  }
  Tensor forward(const Tensor& x) override {
    return fc3->forward(relu(fc2->forward(relu(fc1->forward(x)))));
  }
  std::shared_ptr<nn::Linear> fc1, fc2, fc3;
};

// Fills the CUDA cache with NaN-filled blocks and frees them, so fresh outputs start as garbage.
inline void poison_cuda_cache() {
  if (!has_cuda()) return;
  NoGradGuard ng;
  std::vector<Tensor> hold;
  for (int64_t n : {64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 1 << 22}) {
    for (int rep = 0; rep < 4; ++rep) {
      hold.push_back(full({n}, std::nan(""), {.dtype = DType::f32, .device = Device::cuda()}));
    }
  }
  cuda::synchronize();
}

// Sets the CPU thread count for a scope, and the previous one again at its end.
class ThreadsGuard : NonCopyable {
 public:
  explicit ThreadsGuard(int n) : previous_(get_num_threads()) { set_num_threads(n); }
  ~ThreadsGuard() { set_num_threads(previous_); }

 private:
  int previous_;
};

// Runs `run` at 1 thread, then at 2 and 3, and expects the same bits from each.
template <class Run>
void expect_same_bits_at_every_thread_count(Run run) {
  std::vector<Tensor> one;
  {
    const ThreadsGuard guard(1);
    one = run();
  }
  for (const int threads : {2, 3}) {
    const ThreadsGuard guard(threads);
    const std::vector<Tensor> many = run();
    ASSERT_EQ(many.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) {
      SCOPED_TRACE("result " + std::to_string(i) + " at " + std::to_string(threads) + " threads");
      EXPECT_TRUE(testing::all_close(many[i], one[i], 0, 0));
    }
  }
}

}  // namespace sinter::testing

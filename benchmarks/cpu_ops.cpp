// The hot memory-bound CPU kernels against the memory bandwidth: add, gelu (tanh form), softmax
// over rows, layer_norm forward and forward with backward, and sums over rows and over columns,
// f32, on operands of 64 MiB (twice the last-level cache of the machines in benchmarks/README.md),
// at get_num_threads() threads (`--threads=N` sets it). Each is timed by the wall clock, its calls
// alternating with those of a tensor copy of as many bytes in the same run, and reported in GB/s of
// the bytes it must move (each operand read once, each result written once) with the median ratio
// to the copy's GB/s. Each op is first checked against its formula on a small problem. `--smoke`
// runs those checks and one call of each at a tiny size.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

using namespace sinter;

// One timed op on its operands: `call` runs it once, moving `bytes` bytes.
struct Problem {
  std::function<void()> call;
  double bytes;
};

constexpr int64_t kRows = 16384, kCols = 1024;  // 16Mi f32 = 64 MiB per operand

// The operands of one case, (rows, cols) f32, made once per case.
struct Operands {
  Tensor a, b, out, w, bias;
  explicit Operands(int64_t rows, int64_t cols) {
    Generator gen(3);
    a = randn({rows, cols}, {}, &gen);
    b = randn({rows, cols}, {}, &gen);
    out = empty({rows, cols});
    w = randn({cols}, {}, &gen);
    bias = randn({cols}, {}, &gen);
  }
};

// The cases by name; each makes its problem on `o`. A copy of `o.a` is the bandwidth reference.
struct Case {
  const char* name;
  Problem (*make)(Operands& o);
};

double bytes_of(const Tensor& t) {
  return static_cast<double>(t.numel()) * static_cast<double>(element_size(t.dtype()));
}

const Case kCases[] = {
    {"add",
     [](Operands& o) -> Problem {
       return {[&o] { o.out = add(o.a, o.b); }, 3 * bytes_of(o.a)};
     }},
    {"gelu_tanh",
     [](Operands& o) -> Problem {
       return {[&o] { o.out = gelu(o.a, Activation::GeluTanh); }, 2 * bytes_of(o.a)};
     }},
    {"softmax_rows",
     [](Operands& o) -> Problem {
       return {[&o] { o.out = softmax(o.a, -1); }, 2 * bytes_of(o.a)};
     }},
    {"layer_norm_fwd",
     [](Operands& o) -> Problem {
       return {[&o] { o.out = layer_norm(o.a, {o.a.size(1)}, o.w, o.bias); }, 2 * bytes_of(o.a)};
     }},
    // The forward, then the backward with o.b as the gradient (the backward reads it and x and
    // writes dx: five operands' bytes in all).
    {"layer_norm_fwd_bwd",
     [](Operands& o) -> Problem {
       // Leaves of their own on the operands' memory: the copy it is compared with reads o.a.
       return {[&o, x = o.a.detach().requires_grad_(true), w = o.w.detach().requires_grad_(true),
                b = o.bias.detach().requires_grad_(true)] {
                 zero_grads({x, w, b});
                 layer_norm(x, {x.size(1)}, w, b).backward(o.b);
               },
               5 * bytes_of(o.a)};
     }},
    {"sum_rows",
     [](Operands& o) -> Problem {
       return {[&o] { o.out = sum(o.a, {1}); }, bytes_of(o.a)};
     }},
    // Over the leading dim: a Linear's bias gradient (Note [line sums] in src/cpu/reduce.cpp).
    {"sum_cols",
     [](Operands& o) -> Problem {
       return {[&o] { o.out = sum(o.a, {0}); }, bytes_of(o.a)};
     }},
};

// Layer norm over the rows of x (f64) with o's weight and bias, written out with f64 ops.
Tensor layer_norm_f64(const Tensor& x, const Operands& o) {
  const Tensor mu = mean(x, {1}, true);
  const Tensor var = mean((x - mu) * (x - mu), {1}, true);
  return (x - mu) / sqrt(var + 1e-5) * o.w.to(DType::f64) + o.bias.to(DType::f64);
}

// The op's result on a small problem against its formula, written out with other ops ("" when
// they agree).
std::string check(const char* name) {
  Operands o(7, 33);
  const std::string n(name);
  Tensor got, want;
  if (n == "add") {
    got = add(o.a, o.b);
    want = (o.a.to(DType::f64) + o.b.to(DType::f64)).to(DType::f32);
  } else if (n == "gelu_tanh") {
    got = gelu(o.a, Activation::GeluTanh);
    const Tensor x = o.a.to(DType::f64);
    want =
        (x * 0.5 * (tanh((x + x * x * x * 0.044715) * std::sqrt(2.0 / M_PI)) + 1.0)).to(DType::f32);
  } else if (n == "softmax_rows") {
    got = softmax(o.a, -1);
    const Tensor e = exp(o.a.to(DType::f64));
    want = (e / sum(e, {1}, true)).to(DType::f32);
  } else if (n == "layer_norm_fwd") {
    got = layer_norm(o.a, {o.a.size(1)}, o.w, o.bias);
    want = layer_norm_f64(o.a.to(DType::f64), o).to(DType::f32);
  } else if (n == "layer_norm_fwd_bwd") {
    // dx against the gradient of the formula written with f64 ops.
    const Tensor x = o.a.clone().requires_grad_(true);
    layer_norm(x, {o.a.size(1)}, o.w, o.bias).backward(o.b);
    got = x.grad();
    const Tensor x64 = o.a.to(DType::f64).requires_grad_(true);
    layer_norm_f64(x64, o).backward(o.b.to(DType::f64));
    want = x64.grad().to(DType::f32);
  } else if (n == "sum_rows") {
    got = sum(o.a, {1});
    want = sum(o.a.to(DType::f64), {1}).to(DType::f32);
  } else if (n == "sum_cols") {
    got = sum(o.a, {0});
    want = sum(o.a.to(DType::f64), {0}).to(DType::f32);
  } else {
    return "no check for " + n;
  }
  const std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  if (g.size() != w.size()) return "result has " + std::to_string(g.size()) + " elements";
  for (size_t i = 0; i < g.size(); ++i) {
    if (!(std::abs(g[i] - w[i]) <= 1e-5 + 1e-5 * std::abs(w[i])))
      return "element " + std::to_string(i) + ": " + std::to_string(g[i]) + " vs " +
             std::to_string(w[i]);
  }
  return "";
}

void run_case(benchmark::State& state, const Case& c) {
  if (bench::failed(state, "check: ", check(c.name))) return;
  Operands o(kRows, kCols);
  const Problem p = c.make(o);
  Tensor copy_dst = empty_like(o.a);
  auto copy = [&] { copy_dst.copy_(o.a); };
  p.call();  // warm-up: the allocator's cache, the pool's threads
  copy();
  // Calls of the op and of the copy alternate one by one, each timed alone, and the ratio is the
  // median of each pair's: the bandwidth of a shared machine moves from one second to the next, and
  // a ratio of two separate medians carried those moves.
  const int reps = bench::reps_for(bench::wall_ms(1, p.call), 200.0, 50);
  const double copy_bytes = 2 * bytes_of(o.a);
  std::vector<double> ours, theirs, ratios;
  for (auto _ : state) {
    double total = 0;
    for (int r = 0; r < reps; ++r) {
      const double t = bench::wall_ms(1, p.call), c = bench::wall_ms(1, copy);
      ours.push_back(t);
      theirs.push_back(c);
      ratios.push_back((p.bytes / t) / (copy_bytes / c));
      total += t;
    }
    state.SetIterationTime(total / reps * 1e-3);
  }
  const double ours_gbps = p.bytes / (bench::median(ours) * 1e6);
  const double copy_gbps = copy_bytes / (bench::median(theirs) * 1e6);
  const double ratio = bench::median(ratios);
  state.counters["GB/s"] = ours_gbps;
  state.counters["copy_GB/s"] = copy_gbps;
  state.counters["threads"] = get_num_threads();
  state.counters["vs_copy"] = ratio;
  bench::report("GB/s", ours_gbps, "copy", copy_gbps, ratio);
}

void register_all() {
  for (const Case& c : kCases) {
    const std::string name = std::string("cpu_ops/") + c.name + "/f32";
    benchmark::RegisterBenchmark(name.c_str(),
                                 [name, &c](benchmark::State& state) {
                                   bench::begin(name);
                                   bench::guarded(state, [&] { run_case(state, c); });
                                   (void)bench::save_summary();
                                 })
        ->Iterations(bench::iterations(7))
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

// Each op's check, and one call of each on small operands.
void smoke() {
  for (const Case& c : kCases) {
    bench::smoke_guarded(std::string("cpu_ops/") + c.name, [&]() -> std::string {
      const std::string bad = check(c.name);
      if (!bad.empty()) return bad;
      Operands o(64, 96);
      c.make(o).call();
      return "";
    });
  }
}

}  // namespace

int main(int argc, char** argv) {
  sinter::bench::take_threads_option(argc, argv);
  return sinter::bench::bench_main("bench_cpu_ops", argc, argv, smoke, register_all);
}

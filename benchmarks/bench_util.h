// What the benchmark programs share: skipping without a device, failing on a wrong result (the exit
// code says so), CUDA-event timing, medians and the host-side comparison behind every validation.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sinter/sinter.h"

#ifdef SINTER_WITH_CUDA
#include <cuda_runtime.h>

#include "internal/cuda_check.h"
#endif

namespace sinter::bench {

// Set by fail(), so that main() returns nonzero and scripts/gpu_check.sh counts the program as
// failed. A skip for want of a device is not a failure.
inline int& failures() {
  static int count = 0;
  return count;
}

inline void fail(benchmark::State& state, const std::string& msg) {
  ++failures();
  state.SkipWithError(msg.c_str());
}

// True, with the benchmark marked skipped, when there is no device to run on.
inline bool skip_without_cuda(benchmark::State& state) {
#ifdef SINTER_WITH_CUDA
  if (cuda::is_available()) return false;
  state.SkipWithError("no CUDA device");
#else
  state.SkipWithError("no CUDA device (built without CUDA)");
#endif
  return true;
}

// Runs a benchmark's body; a sinter::Error (or any exception) fails that benchmark instead of
// ending the program.
template <typename F>
void guarded(benchmark::State& state, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    fail(state, e.what());
  }
}

#ifdef SINTER_WITH_CUDA
// Holds a stream until the host has queued a whole timed batch behind it, so that the events time
// the device's work alone, not the host's rate of launching it. Gives up after two seconds, so that
// a batch whose queuing blocks (a full launch queue, an implicit synchronization) runs late rather
// than never; time_ms() then reports the timing as void.
struct StreamGate {
  std::atomic<bool> open{false};
  std::atomic<bool> expired{false};

  static void CUDART_CB hold(void* self) {
    auto* gate = static_cast<StreamGate*>(self);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!gate->open.load(std::memory_order_acquire)) {
      if (std::chrono::steady_clock::now() > deadline) {
        gate->expired.store(true, std::memory_order_release);
        return;
      }
      std::this_thread::yield();
    }
  }
};

// Milliseconds per call of fn(i), i = 0..reps-1, queued back to back on the current stream and
// timed by CUDA events around the whole batch.
template <typename F>
double time_ms(int reps, F&& fn) {
  const cuda::Stream stream = cuda::current_stream();
  cuda::Event start, stop;
  StreamGate gate;
  SINTER_CUDA_CHECK(cudaLaunchHostFunc(stream.handle(), &StreamGate::hold, &gate));
  try {
    start.record(stream);
    for (int i = 0; i < reps; ++i) fn(i);
    stop.record(stream);
  } catch (...) {
    // The callback still reads `gate`: let it finish before the stack frame goes.
    gate.open.store(true, std::memory_order_release);
    (void)cudaStreamSynchronize(stream.handle());
    throw;
  }
  gate.open.store(true, std::memory_order_release);
  stop.synchronize();
  SINTER_CHECK(!gate.expired.load(std::memory_order_acquire),
               "time_ms: the stream ran before the batch of ", reps,
               " calls was queued (queuing blocked), so the timing would include the host");
  return static_cast<double>(start.elapsed_ms(stop)) / reps;
}
#endif  // SINTER_WITH_CUDA

// How many calls of estimated duration `est_ms` fill a batch of about `target_ms`.
inline int reps_for(double est_ms, double target_ms, int max_reps = 200) {
  if (!(est_ms > 0.0)) return max_reps;
  return static_cast<int>(std::clamp(std::ceil(target_ms / est_ms), 1.0, double(max_reps)));
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

inline double rms(const std::vector<float>& v) {
  double s = 0.0;
  for (float x : v) s += double(x) * x;
  return v.empty() ? 0.0 : std::sqrt(s / double(v.size()));
}

// Checks |got - want| <= atol + rtol * |want| for every element (a NaN anywhere fails). Returns ""
// when all pass, else how many failed and the worst one.
inline std::string compare(const std::vector<float>& got, const std::vector<float>& want,
                           double atol, double rtol) {
  if (got.size() != want.size()) {
    std::ostringstream os;
    os << got.size() << " elements, expected " << want.size();
    return os.str();
  }
  int64_t bad = 0, worst = -1;
  double worst_ratio = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const double ratio = std::abs(g - w) / (atol + rtol * std::abs(w));
    const bool ok = ratio <= 1.0;  // false for NaN
    if (!ok) ++bad;
    if (!ok && (worst < 0 || !(ratio <= worst_ratio))) {
      worst = int64_t(i);
      worst_ratio = std::isnan(ratio) ? INFINITY : ratio;
    }
  }
  if (bad == 0) return "";
  std::ostringstream os;
  os << bad << " of " << got.size() << " elements off (atol " << atol << ", rtol " << rtol
     << "); worst at " << worst << ": " << got[worst] << " vs " << want[worst];
  return os.str();
}

// The body of each program's main(): runs what was registered, then returns 1 when a benchmark
// failed (a wrong result or an error), 0 otherwise, skips included.
inline int run_main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (!cuda::is_available()) {
    std::printf("no CUDA device: every benchmark skipped\n");
  }
  if (failures() > 0) {
    std::printf("%d benchmark(s) FAILED\n", failures());
    return 1;
  }
  return 0;
}

}  // namespace sinter::bench

namespace sinter::bench {

#ifdef SINTER_WITH_CUDA
// Milliseconds per call of fn(i), timed by CUDA events around the whole batch like time_ms(), but
// without holding the stream: for calls that wait on the device themselves (an op that reads a value
// back to the host), which time_ms()'s gate would stall. The time then includes the host's share
// between launches, as such a call costs in any real use.
template <typename F>
double time_ms_host_synced(int reps, F&& fn) {
  const cuda::Stream stream = cuda::current_stream();
  cuda::Event start, stop;
  start.record(stream);
  for (int i = 0; i < reps; ++i) fn(i);
  stop.record(stream);
  stop.synchronize();
  return static_cast<double>(start.elapsed_ms(stop)) / reps;
}
#endif  // SINTER_WITH_CUDA

// The largest |v[i]| (0 for an empty vector), for tolerances relative to a result's scale.
inline double max_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, std::abs(double(x)));
  return m;
}

}  // namespace sinter::bench

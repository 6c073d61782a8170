// What the benchmark programs share: skipping without a device, failing on a wrong result (the exit
// code says so), CUDA-event timing, medians, the host-side comparison behind every validation, the
// timed loop against a reference, the short summary table (and its JSON) each program prints, the
// registration of the device benchmarks, and main() with the --smoke mode's plumbing.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "internal/json_text.h"
#include "sinter/sinter.h"

#ifdef SINTER_WITH_CUDA
#include <cuda_runtime.h>

#include "internal/cuda_check.h"
#endif

namespace sinter::bench {

// The name of `value` in `names`, its enum's names in declaration order ("?" past the end): the
// programs spell their enums (in benchmark names, summary rows, messages) from such tables.
template <typename E, size_t N>
const char* enum_name(E value, const char* const (&names)[N]) {
  const auto i = static_cast<size_t>(value);
  return i < N ? names[i] : "?";
}

// The precisions the kernel benchmarks compare in: fp32 (full f32 arithmetic, no TF32), tf32 (f32
// tensors, TF32 tensor cores allowed: matmul precision "high"), bf16 (bf16 tensors, f32
// accumulation).
enum class Prec { F32, TF32, BF16 };
constexpr const char* kPrecNames[] = {"fp32", "tf32", "bf16"};

inline const char* prec_name(Prec p) { return enum_name(p, kPrecNames); }

inline DType prec_dtype(Prec p) { return p == Prec::BF16 ? DType::bf16 : DType::f32; }

inline const char* matmul_precision(Prec p) { return p == Prec::TF32 ? "high" : "highest"; }

// Sets the matmul precision for a scope and restores the previous one, also on an error.
class PrecisionGuard {
 public:
  explicit PrecisionGuard(const std::string& precision) : previous_(get_matmul_precision()) {
    set_matmul_precision(precision);
  }
  ~PrecisionGuard() { set_matmul_precision(previous_); }
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;

 private:
  std::string previous_;
};

// Set by fail(), so that main() returns nonzero and scripts/gpu_check.sh counts the program as
// failed. A skip for want of a device is not a failure.
inline int& failures() {
  static int count = 0;
  return count;
}

// One line of the summary table printed after a run: what ran, its figure, the reference's figure
// from the same run and the ratio (above 1: Sinter is faster), or why there is none.
struct SummaryRow {
  std::string name;
  std::string metric;     // "TFLOP/s", "GB/s", "ms"
  double ours = NAN;      // Sinter's figure
  std::string reference;  // "cuBLAS", "cuDNN", "copy"
  double theirs = NAN;    // the reference's figure
  double ratio = NAN;     // above 1: Sinter is faster
  std::string status;     // "ok", "skipped: ...", "FAILED: ..."
};

inline std::vector<SummaryRow>& summary() {
  static std::vector<SummaryRow> rows;
  return rows;
}

// A row without figures: a failure, a skip or a smoke check.
inline SummaryRow status_row(const std::string& name, const std::string& status) {
  return {name, "", NAN, "", NAN, NAN, status};
}

// The benchmark now running, named in the summary rows that fail() and skip() add.
inline std::string& current_name() {
  static std::string name;
  return name;
}

// Each benchmark's body starts here, so that its summary rows carry its name.
inline void begin(const std::string& name) { current_name() = name; }

inline void fail(benchmark::State& state, const std::string& msg) {
  ++failures();
  summary().push_back(status_row(current_name(), "FAILED: " + msg));
  state.SkipWithError(msg.c_str());
}

// Fails the benchmark when a check found something wrong (`bad`, "" when it passed), with `what`
// in front of its message. True when it did: the benchmark then stops before timing.
inline bool failed(benchmark::State& state, const std::string& what, const std::string& bad) {
  if (bad.empty()) return false;
  fail(state, what + bad);
  return true;
}

// A case that cannot run here (a kernel path that refuses the problem, a missing reference): shown
// as skipped in the summary, not counted as a failure. Google Benchmark 1.7 has no separate skip
// state, so its JSON carries the reason as an error message starting with "skipped".
inline void skip(benchmark::State& state, const std::string& why) {
  summary().push_back(status_row(current_name(), "skipped: " + why));
  state.SkipWithError(("skipped: " + why).c_str());
}

// Adds the result row of the benchmark now running.
inline void report(const std::string& metric, double ours, const std::string& reference,
                   double theirs, double ratio) {
  summary().push_back({current_name(), metric, ours, reference, theirs, ratio, "ok"});
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
  if (state.error_occurred()) return;
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

// Milliseconds per call of fn(i), timed by CUDA events around the whole batch like time_ms(), but
// without holding the stream: for calls that wait on the device themselves (an op that reads a
// value back to the host), which time_ms()'s gate would stall. The time then includes the host's
// share between launches, as such a call costs in any real use.
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

// Throws a sinter::Error naming the library, the status (as describe(status) spells it) and the
// failing call (`text`) when `expr` does not return `success`: the check behind every cuBLAS and
// cuDNN call, as SINTER_CUDA_CHECK is behind the runtime's.
#define SINTER_BENCH_STATUS_CHECK(library, expr, text, success, describe)              \
  do {                                                                                 \
    const auto sinter_bench_status_ = (expr);                                          \
    if (sinter_bench_status_ != (success)) {                                           \
      SINTER_THROW(library " error ", describe(sinter_bench_status_), " from ", text); \
    }                                                                                  \
  } while (0)
#endif  // SINTER_WITH_CUDA

// Milliseconds per call of fn() over `reps` calls, by the host's wall clock: the CPU's timer.
template <typename F>
double wall_ms(int reps, F&& fn) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
             .count() /
         reps;
}

// --short: fewer timed iterations and batches a quarter as long, for a quick look (the GPU check's
// bench stage); the figures are noisier, the validation the same.
inline bool& short_mode() {
  static bool on = false;
  return on;
}

// The timed iterations of a case: `n`, or 3 at most in short mode.
inline int iterations(int n) { return short_mode() ? std::min(n, 3) : n; }

// How many calls of estimated duration `est_ms` fill a batch of about `target_ms` (a quarter of it
// in short mode).
inline int reps_for(double est_ms, double target_ms, int max_reps = 200) {
  if (short_mode()) {
    target_ms /= 4;
    max_reps = std::max(1, max_reps / 4);
  }
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

// The largest |v[i]| (0 for an empty vector), for tolerances relative to a result's scale.
inline double max_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, std::abs(double(x)));
  return m;
}

// Input sets a memory-bound benchmark cycles through, so that no call finds its inputs in L2.
constexpr int kInputSets = 2;

#ifdef SINTER_WITH_CUDA
// The timed iterations of a case against its reference: each times a batch of `reps` calls of ours
// (time_ours(reps), ms per call), then as many of the reference's, so that both see the same
// clocks and temperature; the iteration's time is ours. Returns the medians, ours first.
template <typename TimeOurs, typename TimeTheirs>
std::pair<double, double> time_alternating(benchmark::State& state, int reps, TimeOurs&& time_ours,
                                           TimeTheirs&& time_theirs) {
  std::vector<double> ours_ms, theirs_ms;
  for (auto _ : state) {
    const double o = time_ours(reps);
    const double t = time_theirs(reps);
    ours_ms.push_back(o);
    theirs_ms.push_back(t);
    state.SetIterationTime(o * 1e-3);
  }
  return {median(ours_ms), median(theirs_ms)};
}

// Times ours(i) against theirs(i), a library's call on the same operands (cuBLAS, cuDNN), after a
// warm-up of both (caching allocator, clocks, the library's heuristics), in batches of about
// `target_ms`, and reports TFLOP/s for `flop` per call and the ratio (above 1: Sinter is faster).
template <typename Ours, typename Theirs>
void time_flops_against(benchmark::State& state, const std::string& reference, double flop,
                        double target_ms, Ours&& ours, Theirs&& theirs) {
  time_ms(3, ours);
  time_ms(3, theirs);
  const int reps = reps_for(time_ms(3, ours), target_ms);
  const auto [ours_med, theirs_med] = time_alternating(
      state, reps, [&](int n) { return time_ms(n, ours); },
      [&](int n) { return time_ms(n, theirs); });
  const double ours_tf = flop / (ours_med * 1e-3) / 1e12;
  const double theirs_tf = flop / (theirs_med * 1e-3) / 1e12;
  state.counters["TFLOP/s"] = ours_tf;
  state.counters[reference + "_TFLOP/s"] = theirs_tf;
  state.counters["vs_" + reference] = theirs_med / ours_med;
  report("TFLOP/s", ours_tf, reference, theirs_tf, theirs_med / ours_med);
}

// Times a memory-bound op that moves `bytes` per call (time_ours(reps): ms per call over `reps`
// calls cycling through kInputSets input sets) against a device-to-device copy of as many bytes,
// and reports GB/s and the ratio (the op's rate over the copy's).
template <typename TimeOurs>
void time_bytes_against_copy(benchmark::State& state, int64_t bytes, TimeOurs&& time_ours) {
  // The reference: a copy of half the bytes, which reads and writes as many bytes as the op, back
  // and forth between two buffers (each larger than L2).
  const Device dev = Device::cuda(0);
  const int64_t copy_bytes = bytes / 2;
  const Tensor buf[2] = {empty({copy_bytes}, {.dtype = DType::u8, .device = dev}),
                         empty({copy_bytes}, {.dtype = DType::u8, .device = dev})};
  CUstream_st* const stream = cuda::current_stream().handle();
  auto copy = [&](int i) {
    SINTER_CUDA_CHECK(cudaMemcpyAsync(buf[(i + 1) % 2].data_ptr(), buf[i % 2].data_ptr(),
                                      static_cast<size_t>(copy_bytes), cudaMemcpyDeviceToDevice,
                                      stream));
  };
  time_ours(2 * kInputSets);  // warm-up: caching allocator, optimizer state, clocks
  time_ms(4, copy);
  // An even count, so that every input set gets the same number of calls.
  const int reps = 2 * reps_for(time_ours(2 * kInputSets), 5.0, 100);
  const auto [ours_med, copy_med] =
      time_alternating(state, reps, time_ours, [&](int n) { return time_ms(n, copy); });
  const double ours_gbs = double(bytes) / (ours_med * 1e-3) / 1e9;
  const double copy_gbs = double(2 * copy_bytes) / (copy_med * 1e-3) / 1e9;
  state.counters["GB/s"] = ours_gbs;
  state.counters["copy_GB/s"] = copy_gbs;
  state.counters["vs_copy"] = ours_gbs / copy_gbs;
  report("GB/s", ours_gbs, "copy", copy_gbs, ours_gbs / copy_gbs);
}
#endif  // SINTER_WITH_CUDA

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

// A check's bounds, as compare() takes them: |got - want| <= atol + rtol * |want|.
struct Tolerance {
  double atol, rtol;
};

// "" when the first two and the last two of `rows` rows of `out`, a timed problem's output, match
// want_rows(r0), the CPU op on rows r0 and r0 + 1 of its inputs: a check of the timed problem's
// launch configuration at the cost of four rows on the CPU. `label` names the rows in the message.
template <typename F>
std::string compare_end_rows(const Tensor& out, int64_t rows, const std::string& label,
                             const Tolerance& tol, F&& want_rows) {
  for (int64_t r0 : {int64_t{0}, rows - 2}) {
    const std::vector<float> want = want_rows(r0).template to_vector<float>();
    const std::vector<float> got = out.narrow(0, r0, 2).to_vector<float>();
    const std::string bad = compare(got, want, tol.atol, tol.rtol);
    if (!bad.empty())
      return label + std::to_string(r0) + ".." + std::to_string(r0 + 1) + ": " + bad;
  }
  return "";
}

// A figure for the table: 3 significant digits, "-" for none.
inline std::string fmt(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf,
                std::abs(v) >= 100 ? "%.0f"
                : std::abs(v) >= 1 ? "%.3g"
                                   : "%.3f",
                v);
  return buf;
}

// The summary as a markdown table, one row per case that ran, failed or was skipped.
inline std::string summary_table(const std::vector<SummaryRow>& rows) {
  std::ostringstream os;
  os << "| benchmark | Sinter | reference | Sinter / reference | status |\n"
     << "|---|---:|---:|---:|---|\n";
  for (const SummaryRow& r : rows) {
    const std::string unit = r.metric.empty() ? "" : " " + r.metric;
    os << "| " << r.name << " | " << fmt(r.ours) << (std::isfinite(r.ours) ? unit : "") << " | "
       << (r.reference.empty() ? "" : r.reference + " ") << fmt(r.theirs) << " | " << fmt(r.ratio)
       << " | " << r.status << " |\n";
  }
  return os.str();
}

using ::sinter::detail::json_string;

inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// {"program": ..., "rows": [{"name", "metric", "sinter", "reference", "reference_value", "ratio",
// "status"}, ...]}: the summary for scripts; the full figures are in --benchmark_out's JSON.
inline std::string summary_json(const std::string& program, const std::vector<SummaryRow>& rows) {
  std::ostringstream os;
  os << "{\n  \"program\": " << json_string(program) << ",\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const SummaryRow& r = rows[i];
    os << (i ? "," : "") << "\n    {\"name\": " << json_string(r.name)
       << ", \"metric\": " << json_string(r.metric) << ", \"sinter\": " << json_number(r.ours)
       << ", \"reference\": " << json_string(r.reference)
       << ", \"reference_value\": " << json_number(r.theirs)
       << ", \"ratio\": " << json_number(r.ratio) << ", \"status\": " << json_string(r.status)
       << "}";
  }
  os << "\n  ]\n}\n";
  return os.str();
}

// The options every program takes besides Google Benchmark's, removed from argv before
// benchmark::Initialize sees it: --smoke (the CPU-side code only, no device needed),
// --summary_out=FILE (the summary as JSON) and --short (see short_mode()).
struct Options {
  bool smoke = false;
  std::string summary_out;
};

inline Options parse_options(int& argc, char** argv) {
  Options opts;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) {
      opts.smoke = true;
    } else if (std::strcmp(argv[i], "--short") == 0) {
      short_mode() = true;
    } else if (std::strncmp(argv[i], "--summary_out=", 14) == 0) {
      opts.summary_out = argv[i] + 14;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return opts;
}

// Takes --threads=N (the CPU kernels' threads: set_num_threads) out of argv, for the programs that
// time the CPU.
inline void take_threads_option(int& argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      char* end = nullptr;
      const long n = std::strtol(argv[i] + 10, &end, 10);
      SINTER_CHECK(*end == '\0' && n >= 1 && n <= 4096, "--threads: ", argv[i] + 10,
                   " is not a thread count from 1 to 4096");
      set_num_threads(static_cast<int>(n));
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
}

// The program and the --summary_out file (empty: none) of this run.
struct SummaryFile {
  std::string program, path;
};
inline SummaryFile& summary_file() {
  static SummaryFile file;
  return file;
}

// Writes the summary JSON so far to the --summary_out file, through a temporary renamed over it:
// run_main saves after every benchmark, so a run killed at its time limit leaves the rows of the
// cases it finished, in a file that parses. False when it could not be written.
inline bool save_summary() {
  const SummaryFile& s = summary_file();
  if (s.path.empty()) return true;
  const std::string tmp = s.path + ".tmp";
  std::ofstream f(tmp);
  f << summary_json(s.program, summary());
  f.close();
  return f && std::rename(tmp.c_str(), s.path.c_str()) == 0;
}

// Prints the summary table (when there is a row) and writes its JSON where asked. Returns false
// when the JSON could not be written.
inline bool write_summary(const std::string& program, const Options& opts) {
  if (!summary().empty()) std::printf("\n%s", summary_table(summary()).c_str());
  summary_file() = {program, opts.summary_out};
  if (!save_summary()) {
    std::fprintf(stderr, "%s: cannot write %s\n", program.c_str(), opts.summary_out.c_str());
    return false;
  }
  return true;
}

// One check of a --smoke run: prints it, adds it to the summary and counts a failure.
inline void smoke_check(const std::string& name, const std::string& bad) {
  std::printf("smoke %-50s %s\n", name.c_str(), bad.empty() ? "ok" : ("FAILED: " + bad).c_str());
  summary().push_back(status_row(name, bad.empty() ? "ok" : "FAILED: " + bad));
  if (!bad.empty()) ++failures();
}

// Runs one smoke check's body; an exception fails that check.
template <typename F>
void smoke_guarded(const std::string& name, F&& body) {
  std::string bad;
  try {
    bad = body();
  } catch (const std::exception& e) {
    bad = e.what();
  }
  smoke_check(name, bad);
}

// The table and JSON writers on a known row (escaping, number formats, missing figures).
inline std::string check_summary_writers() {
  const std::vector<SummaryRow> rows{{"a/\"b\"", "GB/s", 1234.5, "copy", 0.5, 2469.0, "ok"},
                                     status_row("c", "skipped: no\tdevice")};
  const std::string table = summary_table(rows);
  const std::string want_table =
      "| benchmark | Sinter | reference | Sinter / reference | status |\n"
      "|---|---:|---:|---:|---|\n"
      "| a/\"b\" | 1234 GB/s | copy 0.500 | 2469 | ok |\n"
      "| c | - | - | - | skipped: no\tdevice |\n";
  if (table != want_table) return "summary table:\n" + table;
  const std::string json = summary_json("p", rows);
  for (const char* part : {"\"name\": \"a/\\\"b\\\"\"", "\"sinter\": 1234.5", "\"ratio\": 2469",
                           "\"reference_value\": 0.5", "\"sinter\": null", "no\\u0009device"}) {
    if (json.find(part) == std::string::npos) return std::string("summary JSON lacks ") + part;
  }
  return "";
}

// The end of a --smoke run: the table, the JSON, and the exit code.
inline int finish_smoke(const std::string& program, const Options& opts) {
  smoke_guarded("summary writers", check_summary_writers);
  const bool written = write_summary(program, opts);
  std::printf("%s --smoke: %d check(s) failed\n", program.c_str(), failures());
  return failures() == 0 && written ? 0 : 1;
}

// The body of each program's main() after its --smoke branch: runs what was registered, prints the
// summary, then returns 1 when a benchmark failed (a wrong result or an error), 0 otherwise, skips
// included.
inline int run_main(const std::string& program, const Options& opts, int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  summary_file() = {program, opts.summary_out};
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  const bool written = write_summary(program, opts);
  const bool measured = std::any_of(summary().begin(), summary().end(),
                                    [](const SummaryRow& r) { return r.status == "ok"; });
  if (!cuda::is_available() && !measured) {
    std::printf("no CUDA device: every benchmark skipped\n");
  }
  if (failures() > 0) {
    std::printf("%d benchmark(s) FAILED\n", failures());
    return 1;
  }
  return written ? 0 : 1;
}

// Registers a device benchmark: body(state) runs with `name` on its summary rows (begin), unless
// there is no device (skip_without_cuda), and an exception fails it (guarded). `iters` iterations
// (fewer in short mode), each timed by the body (SetIterationTime), shown in `unit`.
template <typename Body>
void register_device(const std::string& name, int iters, benchmark::TimeUnit unit, Body body) {
  benchmark::RegisterBenchmark(name.c_str(),
                               [name, body](benchmark::State& state) {
                                 begin(name);
                                 if (skip_without_cuda(state)) return;
                                 guarded(state, [&] { body(state); });
                                 (void)save_summary();  // write_summary reports a failure
                               })
      ->Iterations(iterations(iters))
      ->UseManualTime()
      ->Unit(unit);
}

// A program's main(): with --smoke, smoke() runs the CPU-side checks and finish_smoke() ends the
// run; otherwise register_all() registers the device benchmarks and run_main() runs them.
template <typename Smoke, typename Register>
int bench_main(const std::string& program, int argc, char** argv, Smoke&& smoke,
               Register&& register_all) {
  const Options opts = parse_options(argc, argv);
  if (opts.smoke) {
    smoke();
    return finish_smoke(program, opts);
  }
  register_all();
  return run_main(program, opts, argc, argv);
}

}  // namespace sinter::bench

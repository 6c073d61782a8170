// What the example trainers share: their main() (example_main) with the options they all take and
// the exit statuses (Note [exit statuses]); --amp and --cuda-graph (TrainStep); stopping on a
// signal (Note [preemption]); --out, --export-weights, --export-onnx and --profile; the progress
// line with the GPU's readings; the gnuplot plot of a metrics CSV; TensorBoard logging
// (Note [example tensorboard]); format(). Checkpoint parts, the generator's state and atomic files
// come from sinter/io.h.
#pragma once

#include <signal.h>
#include <sinter/sinter.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace example {

namespace st = sinter;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// --amp: "off", "bf16" or "f16" on `device`. Returns the autocast dtype (nullopt for off); f16
// pairs with a GradScaler (amp_scaler), bf16 has f32's range and needs none.
inline std::optional<st::DType> amp_dtype(const std::string& amp, st::Device device) {
  if (amp == "off") return std::nullopt;
  if (amp == "bf16") return st::DType::bf16;
  if (amp == "f16") {
    if (!device.is_cuda()) throw st::Error("--amp f16 is for CUDA; use --amp bf16 on the CPU");
    return st::DType::f16;
  }
  throw st::Error("--amp must be off, bf16 or f16, got '" + amp + "'");
}

// An autocast guard for the forward pass of one step, or none without --amp.
class AmpScope {
 public:
  AmpScope(std::optional<st::DType> dtype, st::Device device) {
    if (dtype) guard_.emplace(device.type, *dtype);
  }

 private:
  std::optional<st::autocast::Guard> guard_;
};

// The loss scaler of --amp f16 (a pass-through otherwise); with data parallel training, the group
// that makes every rank skip the same steps.
inline st::optim::GradScaler amp_scaler(std::optional<st::DType> dtype,
                                        std::shared_ptr<st::dist::ProcessGroup> pg = nullptr) {
  return st::optim::GradScaler(
      {.enabled = dtype == st::DType::f16, .process_group = std::move(pg)});
}

// The options both trainers take: --amp and --cuda-graph (`graph_note` ends the latter's help).
inline void add_amp_options(CLI::App& app, std::string& amp, bool& cuda_graph,
                            const std::string& graph_note) {
  app.add_flag("--cuda-graph", cuda_graph,
               "replay each training step as a CUDA graph (after 3 eager warm-up steps): one "
               "launch per step instead of hundreds" +
                   graph_note);
  app.add_option("--amp", amp,
                 "mixed precision: off, bf16 (autocast) or f16 (autocast and loss scaling, CUDA)")
      ->check(CLI::IsMember({"off", "bf16", "f16"}));
}

// The options both trainers take for what they write besides checkpoints: --profile,
// --export-weights and --export-onnx (`onnx_dims` says which dims the ONNX file leaves open).
inline void add_output_options(CLI::App& app, std::string& profile, std::string& profile_schedule,
                               std::string& weights, std::string& onnx,
                               const std::string& onnx_dims) {
  app.add_option("--profile", profile,
                 "profile a window of training steps (every op and backward node); print the "
                 "table and write this Chrome trace");
  app.add_option(
      "--profile-schedule", profile_schedule,
      "WAIT,WARMUP,ACTIVE: steps skipped, recorded and dropped, recorded (ACTIVE 0: all)");
  app.add_option("--export-weights", weights,
                 "write the trained model alone, under PyTorch's state_dict names (safetensors)");
  app.add_option("--export-onnx", onnx,
                 "write the trained model as ONNX (opset 17; " + onnx_dims + ") for ONNX Runtime");
}

// Validators whose errors state the bound as a person would (CLI11's PositiveNumber prints the
// largest double in full): a whole number of at least `min`, and a number above 0.
inline CLI::Validator at_least(int64_t min) {
  return CLI::Validator(
      [min](std::string& v) {
        int64_t n = 0;
        return CLI::detail::lexical_cast(v, n) && n >= min
                   ? std::string()
                   : "must be at least " + std::to_string(min) + ", got " + v;
      },
      "");  // the help says what the option takes
}
inline CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& v) {
        double x = 0;
        return CLI::detail::lexical_cast(v, x) && x > 0 && std::isfinite(x)
                   ? std::string()
                   : "must be a positive number, got " + v;
      },
      "POSITIVE");
}

// --tensorboard DIR and --log-every N, which both trainers take (Note [example tensorboard]).
inline void add_tensorboard_options(CLI::App& app, std::string& dir, int64_t& every) {
  CLI::Option* const tb = app.add_option(
      "--tensorboard", dir,
      "write this run's TensorBoard events to a new folder in DIR named by its start time, host "
      "and model, beside earlier runs (tensorboard --logdir DIR)");
  app.add_option("--log-every", every, "log the step figures to TensorBoard every N steps")
      ->check(at_least(1))
      ->needs(tb);
}

// What --cuda-graph needs of any trainer: a CUDA device, and no f16 loss scaler (it reads its
// overflow flag on the host at each step).
inline void check_cuda_graph(bool cuda_graph, st::Device device, std::optional<st::DType> amp) {
  if (!cuda_graph) return;
  if (!device.is_cuda()) throw st::Error("--cuda-graph needs a CUDA device (--device cuda)");
  if (amp == st::DType::f16) {
    throw st::Error(
        "--cuda-graph with --amp f16: the loss scaler reads its overflow flag on the host at each "
        "step; use --amp bf16");
  }
}

// An example's training step, step(x, y) on one batch, run eagerly or, with --cuda-graph, replayed
// from a CUDA graph (cuda::GraphedStep: eager for 3 warm-up steps, then captured; Note [cuda
// graphs]) on static copies of the batch, made from the first one. A batch of another size than
// `full_batch` (a short last batch) runs eagerly. Both paths run the same function.
template <class Result>
class TrainStep {
 public:
  using Fn = std::function<Result(const st::Tensor& x, const st::Tensor& y)>;

  TrainStep(Fn step, bool cuda_graph, int64_t full_batch)
      : step_(std::move(step)),
        cuda_graph_(cuda_graph),
        full_batch_(full_batch),
        graphed_([this] { static_result_ = step_(static_x_, static_y_); }, 3) {}
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  Result operator()(const st::data::Batch& b) {
    if (!cuda_graph_ || b.input.size(0) != full_batch_) return step_(b.input, b.target);
    if (!static_x_.defined()) {
      static_x_ = b.input.clone();
      static_y_ = b.target.clone();
    } else {
      static_x_.copy_(b.input);
      static_y_.copy_(b.target);
    }
    graphed_.run();
    return static_result_;
  }

 private:
  Fn step_;
  bool cuda_graph_;
  int64_t full_batch_;
  st::Tensor static_x_, static_y_;
  Result static_result_;
  st::cuda::GraphedStep graphed_;
};

// Note [exit statuses]
// 0: done. 1: a failure once the run has started (training, evaluation, writing its files).
// 2: the command line asked for something that cannot be done: an unknown option or a bad value
// (parse_command_line), or any error while setting the run up from the options: a missing,
// unreadable or corrupt file, a device this machine lacks, values that do not fit together.
// 3: a run that ended below its quality bar (--min-accuracy, --max-val-loss). 4: a run stopped
// by SIGTERM or SIGUSR1 (Note [preemption]) after it wrote its checkpoint; --resume goes on from
// it. Each error is one line on stderr, "<program>: <what>".

// Note [preemption]
// A batch scheduler signals a job before it kills it: Slurm sends SIGTERM at the end of the time
// limit or on preemption (and any signal asked for with --signal, e.g. USR1@120, that long before).
// The trainers catch SIGTERM and SIGUSR1; the handler only records the signal. After each step
// the trainer asks every rank whether one was signalled (a one-number max all-reduce with --ddp,
// so that all ranks stop after the same step, however the signal reached them), and if so writes
// its checkpoint, waits for every rank, and exits with status 4 (kPreempted). --resume then
// continues the run exactly as if it had not stopped. Under mpirun, signal the ranks themselves
// (as Slurm does) or send SIGUSR1 to mpirun, which forwards it; mpirun answers SIGTERM by killing
// the ranks within seconds.
constexpr int kPreempted = 4;

inline std::atomic<int>& stop_signal() {
  static std::atomic<int> signal{0};
  return signal;
}

extern "C" inline void record_stop_signal(int sig) { stop_signal().store(sig); }

inline void install_stop_handlers() {
  stop_signal();  // made before any signal can arrive: the handler then only stores into it
  struct sigaction action {};
  action.sa_handler = record_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
}

// The signal that asks this run to stop after the current step (0: none): this rank's, or with a
// process group, the largest of every rank's. Collective when `pg` is given.
inline int stop_requested(st::dist::ProcessGroup* pg) {
  const int mine = stop_signal().load();
  if (!pg) return mine;
  st::Tensor flag = st::full({1}, static_cast<double>(mine), {.dtype = st::DType::i64});
  pg->all_reduce(flag, st::dist::ReduceOp::Max);
  return static_cast<int>(flag.item<int64_t>());
}

// Marks the end of the set-up: errors from here on are failures (status 1), not bad options.
inline bool& setup_finished() {
  static bool finished = false;
  return finished;
}
inline void finish_setup() { setup_finished() = true; }

// Prints an error that reached main and returns its status (Note [exit statuses]).
inline int report_error(const char* program, const std::exception& e) {
  std::fprintf(stderr, "%s: %s\n", program, e.what());
  return setup_finished() ? 1 : 2;
}

// Creates the --out folder (and its parents), or says which folder could not be made and why.
inline void make_out_folder(const std::string& out) {
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) throw st::Error("--out " + out + ": cannot create the folder: " + ec.message());
}

// --export-weights: the model's state dict alone, under the names of its torch.nn equivalent (the
// keys of Sinter's modules are PyTorch's: Sequential children by index, weight/bias,
// running_mean/running_var/num_batches_tracked), so that
//   model.load_state_dict({k: torch.from_numpy(v) for k, v in
//   safetensors.numpy.load_file(p).items()})
// loads it. The full checkpoint (--save) holds the same tensors under "model.".
inline void export_weights(const std::string& path, const st::nn::Module& model,
                           const std::string& model_name) {
  if (path.empty()) return;
  st::StateDict weights = model.state_dict();
  std::erase_if(weights, [](const auto& kv) { return st::fp8::is_state_key(kv.first); });
  st::save(weights, path, {{"model", model_name}});
  std::printf("weights: %s\n", path.c_str());
}

// An export's file, checked before training, so that a run does not end with nowhere to write
// its model: its folder exists, and it is not a folder itself.
inline void check_output_file(const std::string& flag, const std::string& path) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (!folder.empty() && !std::filesystem::is_directory(folder)) {
    throw st::Error(flag + ": the folder " + folder.string() + " of " + path + " does not exist");
  }
  if (std::filesystem::is_directory(path)) {
    throw st::Error(flag + ": " + path + " is a folder, not a file name");
  }
}

// --export-onnx: the trained model as an ONNX file (opset 17, weights under their state_dict names)
// for ONNX Runtime, TensorRT and other runtimes; `example` is one input (any batch size), whose
// batch dim becomes symbolic, and with `dynamic_sequence` its dim 1 (a GPT's length) too.
inline void check_export_onnx(const std::string& path) {
  if (path.empty()) return;
  if (!st::onnx::is_available()) {
    throw st::Error(
        "--export-onnx: Sinter was built without ONNX (apt-get install libonnx-dev "
        "libprotobuf-dev, then rebuild)");
  }
  check_output_file("--export-onnx", path);
}
inline void export_onnx(const std::string& path, st::nn::Module& model, const st::Tensor& example,
                        bool dynamic_sequence = false) {
  if (path.empty()) return;
  const st::onnx::ExportSummary s =
      st::onnx::export_model(model, example, path, {.dynamic_sequence = dynamic_sequence});
  std::printf("onnx: %s (%lld nodes, %lld initializers, %.1f MB)\n", path.c_str(),
              static_cast<long long>(s.nodes), static_cast<long long>(s.initializers),
              static_cast<double>(s.bytes) / 1e6);
}

// --profile-schedule "WAIT,WARMUP,ACTIVE" as a profiler::Schedule (ACTIVE 0: no schedule).
inline std::optional<st::profiler::Schedule> parse_profile_schedule(const std::string& text) {
  std::vector<int64_t> v;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    char* end = nullptr;
    const long long n = std::strtoll(part.c_str(), &end, 10);
    v.push_back(part.empty() || *end != '\0' ? -1 : n);
  }
  if (v.size() != 3 || std::any_of(v.begin(), v.end(), [](int64_t n) { return n < 0; })) {
    throw st::Error(
        "--profile-schedule must be WAIT,WARMUP,ACTIVE: three counts of steps, >= 0, "
        "got '" +
        text + "'");
  }
  if (v[2] == 0) return std::nullopt;
  return st::profiler::Schedule{.wait = v[0], .warmup = v[1], .active = v[2], .repeat = 1};
}

// --profile PATH with --profile-schedule WAIT,WARMUP,ACTIVE (Note [profiler]): the first WAIT
// training steps are not recorded, the next WARMUP are recorded and dropped (their first-call
// costs), the next ACTIVE recorded (ACTIVE 0: every step to the end of the run). Then it prints the
// table of the ops by self time and writes PATH as a Chrome trace (Perfetto, chrome://tracing);
// with --tensorboard also <run>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.trace.json.gz in the
// run's folder `tb_run` (TensorBoard.run_dir()), where TensorBoard's profile plugin (pip install
// tensorboard-plugin-profile) finds a profile of that run, as TensorFlow's profiler writes its
// own. step() ends a training step.
class ProfileScope {
 public:
  void open(const std::string& path, const std::string& schedule, const std::string& tb_run) {
    if (path.empty()) return;
    path_ = path;
    tb_run_ = tb_run;
    if (const std::optional<st::profiler::Schedule> s = parse_profile_schedule(schedule)) {
      guard_.emplace(*s, [this](const st::profiler::Guard& g) { report(g); });
    } else {
      guard_.emplace();
    }
  }
  void step() {
    if (guard_) guard_->step();
  }
  // The whole run's profile without a schedule, or a window the end of training cut short.
  void finish() {
    if (!guard_) return;
    if (!reported_) {
      if (guard_->events().empty()) {
        std::printf("profile: the run ended after %lld steps, before --profile-schedule's window\n",
                    static_cast<long long>(guard_->step_num()));
      } else {
        report(*guard_);
      }
    }
    guard_.reset();
  }

 private:
  void report(const st::profiler::Guard& g) {
    reported_ = true;
    std::printf("%s", g.table().c_str());
    g.write_chrome_trace(path_);
    std::printf("trace: %s\n", path_.c_str());
    if (!tb_run_.empty()) {
      char host[256] = {};
      if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "localhost");
      const std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char session[32];
      std::strftime(session, sizeof session, "%Y_%m_%d_%H_%M_%S", &local);
      const fs::path dir = fs::path(tb_run_) / "plugins" / "profile" / session;
      fs::create_directories(dir);
      const fs::path file = dir / (std::string(host) + ".trace.json.gz");
      g.write_chrome_trace(file.string());
      std::printf("trace for tensorboard: %s\n", file.string().c_str());
    }
  }

  std::string path_, tb_run_;
  std::optional<st::profiler::Guard> guard_;
  bool reported_ = false;
};

// Parses the command line. A bad option or value prints one line, "<program>: <what>", and gives
// exit status 2; --help prints the options and gives 0. nullopt when the run should go on.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv,
                                             const char* program) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s (--help lists the options)\n", program, e.what());
    return 2;
  }
  return std::nullopt;
}

// The main() of an example: stdout line-buffered (progress lines appear as they happen in logs
// too), an App whose repeated options take their last value (so that wrappers such as
// scripts/quickstart.sh can be overridden), the options add_options(app) declares, the command
// line parsed, then run(app), its errors reported with their status (Note [exit statuses]).
template <class AddOptions, class Run>
int example_main(int argc, char** argv, const char* program, const std::string& description,
                 AddOptions&& add_options, Run&& run) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{description};
  // --help shows each option's default value after its help.
  app.option_defaults()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->always_capture_default();
  add_options(app);
  if (const std::optional<int> status = parse_command_line(app, argc, argv, program))
    return *status;
  try {
    return run(app);
  } catch (const std::exception& e) {
    return report_error(program, e);
  }
}

// printf into a std::string.
__attribute__((format(printf, 1, 2))) inline std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string out(static_cast<size_t>(std::max(n, 0)) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), fmt, again);
  va_end(again);
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return out;
}

// The GPU's readings (Note [gpu telemetry]) for the progress bar and metrics.csv: nothing on the
// CPU; every field absent where NVML is missing.
inline std::optional<st::cuda::DeviceStats> gpu_reading(st::Device device) {
  if (!device.is_cuda()) return std::nullopt;
  for (const st::cuda::DeviceStats& s : st::cuda::device_stats()) {
    if (s.device == device.index) return s;
  }
  st::cuda::DeviceStats none;  // every reading absent
  none.device = device.index;
  return none;
}

// "  GPU 87% 12.5 GiB" (or "  GPU n/a n/a"), "" on the CPU: for the end of a progress line.
inline std::string gpu_progress(const std::optional<st::cuda::DeviceStats>& s) {
  if (!s) return "";
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const std::string util =
      s->utilization_percent ? format("%.0f%%", *s->utilization_percent) : "n/a";
  const std::string mem =
      s->memory_used_bytes ? format("%.1f GiB", static_cast<double>(*s->memory_used_bytes) / kGiB)
                           : "n/a";
  return "  GPU " + util + " " + mem;
}

// The metrics.csv columns gpu_util_percent,gpu_memory_gib (after a comma): empty where n/a.
inline std::string gpu_csv_fields(const std::optional<st::cuda::DeviceStats>& s) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::string out = ",";
  if (s && s->utilization_percent) out += format("%.0f", *s->utilization_percent);
  out += ",";
  if (s && s->memory_used_bytes) {
    out += format("%.3f", static_cast<double>(*s->memory_used_bytes) / kGiB);
  }
  return out;
}

// One line that redraws itself on a terminal ("<label> [=====     ] done/total  <stats>  ETA");
// elsewhere a plain line every `plain_every` units and at the end, so that logs stay short. The
// first `first` units were done before this run (a resumed one), so the ETA counts this run's pace.
class Progress {
 public:
  Progress(std::string label, int64_t total, int64_t first = 0, int64_t plain_every = 0)
      : label_(std::move(label)),
        total_(total),
        first_(first),
        plain_every_(plain_every > 0 ? plain_every : std::max<int64_t>(total / 4, 1)),
        tty_(isatty(fileno(stdout)) != 0),
        start_(Clock::now()) {}

  double elapsed() const { return seconds_since(start_); }

  void update(int64_t done, const std::string& stats) {
    const double secs = elapsed();
    const double eta = secs / static_cast<double>(std::max<int64_t>(done - first_, 1)) *
                       static_cast<double>(total_ - done);
    if (tty_) {
      const int width = 24;
      const int filled = static_cast<int>(width * done / std::max<int64_t>(total_, 1));
      std::printf("\r%s [%s%s] %lld/%lld  %s  ETA %.0fs ", label_.c_str(),
                  std::string(filled, '=').c_str(), std::string(width - filled, ' ').c_str(),
                  static_cast<long long>(done), static_cast<long long>(total_), stats.c_str(), eta);
      std::fflush(stdout);
    } else if (done == total_ || done - first_ >= next_plain_) {
      // A line each plain_every units, at the first update past each mark (updates may come
      // every few units only).
      while (next_plain_ <= done - first_) next_plain_ += plain_every_;
      std::printf("%s %lld/%lld  %s\n", label_.c_str(), static_cast<long long>(done),
                  static_cast<long long>(total_), stats.c_str());
      std::fflush(stdout);  // a log being followed (tail -f, a scheduler's output file) sees it now
    }
  }

  // Erases the bar on a terminal, so that a line printed next replaces it (the bar comes back
  // below it with the next update).
  void clear() const {
    if (tty_) std::printf("\r\033[2K");
  }

  void done() const {
    if (tty_) std::printf("\n");
  }

 private:
  std::string label_;
  int64_t total_, first_, plain_every_;
  int64_t next_plain_ = plain_every_;  // units past `first_` that the next plain line waits for
  bool tty_;
  Clock::time_point start_;
};

inline st::Tensor i64_scalar(int64_t v) { return st::from_vector<int64_t>({v}, st::Shape{}); }

// One panel of a plot: the CSV's columns (numbered from 1, titled by its header) against its first
// column, and horizontal reference lines.
struct PlotPanel {
  std::string title{}, xlabel{};
  std::vector<int> columns{};
  std::vector<std::pair<std::string, double>> levels{};  // title, value
};

// Note [example tensorboard]
// With --tensorboard DIR an example logs, on rank 0, into a folder of DIR of its own, named by its
// start time, the host and the model ("Dec04_20-51-07_myhost_llama", Note [run folders] in
// src/summary/summary_writer.cpp), so that runs into one DIR stay apart in TensorBoard; a DIR that
// holds runs already is told where the new one goes. In that folder: every --log-every steps the
// figures of that one step, train/step_loss (and train/step_accuracy), the learning rate it ran at,
// the throughput of the training steps since the last of these logs (evaluations and checkpoints
// left out: leave_out) and the GPU's utilization and memory. Step figures are logged at the step
// count before the step, the updates the model had when it computed that loss, so the first is at
// step 0, the loss of the initial model, and a loss at step s and an evaluation at step s see the
// same model. (The console's "mean loss" is another figure: the mean over the steps since the last
// evaluation, or of the epoch so far.) At each evaluation the evaluation figures and a histogram of
// every parameter and of its gradient; at the end what the example shows of its model (images with
// their predicted labels, a generated text), and in its subfolder "hparams" its hyperparameters
// and final metrics, one session of the HParams table. The step figures read the loss on the
// host, which waits for the GPU: every step at --log-every 1. Steps count from the start of
// training, across --resume: a resumed run, a folder of its own, goes on where its checkpoint was.
class TensorBoard {
 public:
  // No-op when `root` is empty; else a new run folder in `root` with `name` in its name. A folder
  // that cannot be made is an Error (status 2).
  void open(const std::string& root, const std::string& name, int64_t every, int64_t step) {
    if (root.empty()) return;
    const bool earlier = holds_event_files(root);
    writer_ = std::make_unique<st::SummaryWriter>(st::make_run_dir(root, name));
    if (earlier) {
      std::printf("tensorboard: %s holds earlier runs; this run goes to %s\n", root.c_str(),
                  writer_->log_dir().c_str());
    }
    every_ = every;
    last_done_ = step;
    last_ = Clock::now();
  }
  explicit operator bool() const { return writer_ != nullptr; }
  st::SummaryWriter* operator->() const { return writer_.get(); }
  // The run's folder ("" without --tensorboard).
  std::string run_dir() const { return writer_ ? writer_->log_dir() : std::string(); }
  // Whether the figures of the `done`-th training step (counted from 1) are due: they go to step
  // done - 1, the first step's to step 0.
  bool due(int64_t done) const { return writer_ && (done - 1) % every_ == 0; }
  // Time since the last step figures that was not training (an evaluation, a checkpoint): the
  // next throughput leaves it out.
  void leave_out(double seconds) { left_out_ += seconds; }

  // The figures of the `done`-th step (at a due one): `units` samples or tokens per step give the
  // rate.
  void step_figures(int64_t done, double loss, std::optional<double> accuracy, double lr,
                    double units, const char* rate_tag, st::Device device) {
    const double secs = seconds_since(last_) - left_out_;
    const int64_t step = done - 1;
    writer_->add_scalar("train/step_loss", loss, step);
    if (accuracy) writer_->add_scalar("train/step_accuracy", *accuracy, step);
    writer_->add_scalar("train/lr", lr, step);
    if (done > last_done_ && secs > 0) {
      writer_->add_scalar(rate_tag, units * static_cast<double>(done - last_done_) / secs, step);
    }
    if (const std::optional<st::cuda::DeviceStats> gpu = gpu_reading(device)) {
      if (gpu->utilization_percent) {
        writer_->add_scalar("gpu/utilization_percent", *gpu->utilization_percent, step);
      }
      if (gpu->memory_used_bytes) {
        writer_->add_scalar("gpu/memory_gib",
                            static_cast<double>(*gpu->memory_used_bytes) / (1 << 30), step);
      }
    }
    last_done_ = done;
    last_ = Clock::now();
    left_out_ = 0;
  }

  // A histogram of every parameter, "weights/<name>", and of its gradient, "grads/<name>". One
  // that holds NaN or inf (a diverged run) is left out with a line saying so: the run goes on.
  void parameters(const st::nn::Module& model, int64_t step) const {
    const auto histogram = [&](const std::string& tag, const st::Tensor& t) {
      // A sum in f64 is finite exactly when every element is.
      if (std::isfinite(st::sum(t.detach().to(st::DType::f64)).item<double>())) {
        writer_->add_histogram(tag, t, step);
      } else {
        std::printf("tensorboard: no histogram of %s at step %lld (it is not finite)\n",
                    tag.c_str(), static_cast<long long>(step));
      }
    };
    for (const auto& [name, p] : model.named_parameters()) {
      histogram("weights/" + name, p);
      if (p.grad().defined()) histogram("grads/" + name, p.grad());
    }
  }

  // Writes what is left and closes the files; prints where they are.
  void close() {
    if (!writer_) return;
    writer_->close();
    const std::string root = fs::path(writer_->log_dir()).parent_path().string();
    std::printf("tensorboard: %s (tensorboard --logdir %s)\n", writer_->log_dir().c_str(),
                root.c_str());
    writer_.reset();
  }

 private:
  // Whether an event file is anywhere under `dir` (a run TensorBoard would show).
  static bool holds_event_files(const std::string& dir) {
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().filename().string().find("tfevents") != std::string::npos) return true;
    }
    return false;
  }

  std::unique_ptr<st::SummaryWriter> writer_;
  int64_t every_ = 1, last_done_ = 0;
  Clock::time_point last_;
  double left_out_ = 0;
};

// Draws `panels` side by side from `csv` into `png` with gnuplot; without gnuplot says so and goes
// on, since the CSV holds the same figures.
inline void write_plot(const fs::path& csv, const fs::path& png,
                       const std::vector<PlotPanel>& panels) {
  const fs::path script = png.parent_path() / "plot.gp";
  const fs::path tmp_png = png.string() + ".tmp." + std::to_string(getpid());
  std::string gp = format("set terminal png size %zu,400 noenhanced\n", 500 * panels.size()) +
                   "set output '" + tmp_png.string() + "'\n" +
                   "set datafile separator ','\nset key autotitle columnhead\n" +
                   format("set multiplot layout 1,%zu\n", panels.size());
  for (const PlotPanel& p : panels) {
    gp += "set title '" + p.title + "'; set xlabel '" + p.xlabel + "'\nplot ";
    std::string sep;
    for (int c : p.columns) {
      gp += sep + "'" + csv.string() + format("' using 1:%d with linespoints", c);
      sep = ", ";
    }
    for (const auto& [title, value] : p.levels) {
      gp += sep + format("%.17g title '%s' with lines dashtype 2", value, title.c_str());
      sep = ", ";
    }
    gp += "\n";
  }
  gp += "unset multiplot\n";
  st::write_file_atomically(script.string(), gp);
  const std::string cmd = "gnuplot '" + script.string() + "' 2>/dev/null";
  std::error_code ec;
  if (std::system(cmd.c_str()) == 0 && fs::exists(tmp_png) && (fs::rename(tmp_png, png, ec), !ec)) {
    std::printf("plot: %s\n", png.string().c_str());
  } else {
    fs::remove(tmp_png, ec);
    std::printf("plot: skipped (gnuplot is missing or failed; apt-get install gnuplot-nox)\n");
  }
}

}  // namespace example

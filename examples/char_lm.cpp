// Trains the GPT as a byte-level language model on Debian's fortunes (or any text), measured in
// nats per byte against the unigram and bigram baselines, and samples text from its checkpoints.
//
//   char_lm                                         # CPU: ~15 min on 2 cores; GPU: gpt-mini
//   char_lm --stop-at 500                           # stop early, checkpointed, ...
//   char_lm --resume char_lm_out/char_lm.safetensors  # ... and go on to the end
//   char_lm --generate 300 --prompt "The secret of" --temperature 0.8 --top-k 40
//   char_lm --device cuda --amp bf16                # mixed precision (f16: with loss scaling)
//   char_lm --device cuda --dropout 0 --cuda-graph  # each step replayed as a CUDA graph
#include <sinter/data.h>
#include <sinter/io.h>
#include <sinter/nn.h>
#include <sinter/nn/models.h>
#include <sinter/optim.h>
#include <sinter/sinter.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "training.h"

namespace st = sinter;
namespace fs = std::filesystem;
using namespace example;

namespace {

constexpr const char* kFormat = "sinter-char-lm-1";

// Everything that decides what a training run computes; a checkpoint stores it, so that --resume
// and --generate need no other flags.
struct RunConfig {
  int64_t n_layer = 0, n_head = 0, n_embd = 0, context = 0;
  double dropout = 0;
  int64_t batch_size = 0, steps = 0, warmup = 0;
  double lr = 0, min_lr = 0, weight_decay = 0, grad_clip = 0;
  int64_t eval_interval = 0, eval_batches = 0;
  uint64_t seed = 0;
};

// Sized for about 15 minutes on 2 CPU cores (about 0.53 s per step): 1500 steps of 48 x 64 bytes.
// Attention is composed of matmul and softmax, quadratic in the context, and a 300-step trial
// reached a lower validation loss, faster, with 48 x 64 bytes than with 32 x 96.
RunConfig cpu_defaults() {
  return {.n_layer = 4,
          .n_head = 4,
          .n_embd = 128,
          .context = 64,
          .dropout = 0.0,
          .batch_size = 48,
          .steps = 1500,
          .warmup = 100,
          .lr = 3e-3,
          .min_lr = 3e-4,
          .weight_decay = 0.1,
          .grad_clip = 1.0,
          .eval_interval = 100,
          .eval_batches = 16,
          .seed = 0};
}

// The gpt-mini shape of the reference workloads (6 layers, 6 heads, width 384, context 256, batch
// 32) with nanoGPT's character-level settings for that shape (lr 1e-3, a little dropout).
RunConfig gpu_defaults() {
  RunConfig c = cpu_defaults();
  c.n_layer = 6;
  c.n_head = 6;
  c.n_embd = 384;
  c.context = 256;
  c.dropout = 0.1;
  c.batch_size = 32;
  c.steps = 5000;
  c.warmup = 200;
  c.lr = 1e-3;
  c.min_lr = 1e-4;
  c.eval_interval = 250;
  c.eval_batches = 40;
  return c;
}

using Member = std::variant<int64_t RunConfig::*, double RunConfig::*, uint64_t RunConfig::*>;

// A run setting: its flag, its key in checkpoint metadata ("config.<key>") and its help text.
struct Setting {
  const char* flag;
  const char* key;
  Member member;
  const char* help;
};

const std::vector<Setting>& settings() {
  static const std::vector<Setting> all = {
      {"--layers", "n_layer", &RunConfig::n_layer, "transformer blocks"},
      {"--heads", "n_head", &RunConfig::n_head, "attention heads (dividing --width)"},
      {"--width", "n_embd", &RunConfig::n_embd, "embedding width"},
      {"--context", "context", &RunConfig::context, "bytes of context the model sees"},
      {"--dropout", "dropout", &RunConfig::dropout, "dropout rate during training"},
      {"--batch-size", "batch_size", &RunConfig::batch_size, "windows per step"},
      {"--steps", "steps", &RunConfig::steps, "optimizer steps of the whole run"},
      {"--lr", "lr", &RunConfig::lr, "peak learning rate (AdamW)"},
      {"--min-lr", "min_lr", &RunConfig::min_lr, "learning rate the cosine ends at"},
      {"--warmup", "warmup", &RunConfig::warmup, "steps of linear warm-up from 0"},
      {"--weight-decay", "weight_decay", &RunConfig::weight_decay,
       "AdamW's decoupled weight decay, on the weight matrices only"},
      {"--grad-clip", "grad_clip", &RunConfig::grad_clip, "gradient norm clipped to (0: off)"},
      {"--eval-interval", "eval_interval", &RunConfig::eval_interval,
       "steps between evaluations (and checkpoints)"},
      {"--eval-batches", "eval_batches", &RunConfig::eval_batches,
       "validation batches per evaluation (the same windows each time)"},
      {"--seed", "seed", &RunConfig::seed,
       "seed of initialization, windows and dropout (and of sampling with --generate)"},
  };
  return all;
}

// 17 significant digits read back to the same double; help texts want fewer.
std::string to_text(const RunConfig& c, const Member& m, int precision = 17) {
  return std::visit(
      [&](auto member) {
        std::ostringstream s;
        s.precision(precision);
        s << c.*member;
        return s.str();
      },
      m);
}

// Parses `text` into c.*m; false when it is not a whole number of the member's type.
bool from_text(RunConfig& c, const Member& m, const std::string& text) {
  return std::visit(
      [&](auto member) {
        std::istringstream s(text);
        s >> c.*member;
        return !s.fail() && s.eof();
      },
      m);
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream s(text);
  for (std::string line; std::getline(s, line);) out.push_back(line);
  return out;
}

// 64-bit FNV-1a of the corpus, so that --resume notices a different corpus.
std::string corpus_hash(const std::vector<uint8_t>& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : bytes) h = (h ^ b) * 1099511628211ull;
  return format("%016llx", static_cast<unsigned long long>(h));
}

std::string metadata_at(const st::Metadata& meta, const std::string& key, const std::string& path) {
  const auto it = meta.find(key);
  if (it == meta.end()) throw st::Error(path + ": not a char_lm checkpoint (no " + key + ")");
  return it->second;
}

// The run settings and corpus paths a checkpoint was written with.
struct CheckpointInfo {
  RunConfig config;
  std::vector<std::string> data;
  st::Metadata meta;
};

CheckpointInfo read_checkpoint_info(const std::string& path) {
  CheckpointInfo info;
  info.meta = st::load_metadata(path);
  if (metadata_at(info.meta, "format", path) != kFormat) {
    throw st::Error(path + ": format '" + info.meta.at("format") + "', expected '" + kFormat + "'");
  }
  for (const Setting& s : settings()) {
    const std::string text = metadata_at(info.meta, std::string("config.") + s.key, path);
    if (!from_text(info.config, s.member, text)) {
      throw st::Error(path + ": bad value '" + text + "' of config." + s.key);
    }
  }
  info.data = split_lines(metadata_at(info.meta, "config.data", path));
  return info;
}

st::nn::models::GPTConfig gpt_config(const RunConfig& c) {
  return {.vocab_size = 256,
          .context_length = c.context,
          .n_layer = c.n_layer,
          .n_head = c.n_head,
          .n_embd = c.n_embd,
          .dropout = c.dropout};
}

void check_config(const RunConfig& c) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw st::Error(what);
  };
  require(c.n_layer > 0 && c.n_head > 0 && c.n_embd > 0 && c.context > 0 && c.batch_size > 0 &&
              c.steps > 0 && c.eval_interval > 0 && c.eval_batches > 0,
          "--layers, --heads, --width, --context, --batch-size, --steps, --eval-interval and "
          "--eval-batches must be positive");
  require(c.n_embd % c.n_head == 0,
          format("--width %lld is not a multiple of --heads %lld", static_cast<long long>(c.n_embd),
                 static_cast<long long>(c.n_head)));
  require(c.dropout >= 0 && c.dropout < 1, format("--dropout %g is not in [0, 1)", c.dropout));
  require(c.lr > 0 && std::isfinite(c.lr), format("--lr %g is not positive", c.lr));
  require(c.min_lr >= 0 && c.min_lr <= c.lr,
          format("--min-lr %g is not in [0, --lr %g]", c.min_lr, c.lr));
  require(c.warmup >= 0 && c.warmup < c.steps,
          format("--warmup %lld must be in [0, --steps %lld)", static_cast<long long>(c.warmup),
                 static_cast<long long>(c.steps)));
  require(c.weight_decay >= 0, format("--weight-decay %g is negative", c.weight_decay));
  require(c.grad_clip >= 0, format("--grad-clip %g is negative", c.grad_clip));
}

struct Args {
  std::string device = "auto";
  std::vector<std::string> data;
  std::string out = "char_lm_out";
  std::string save, resume, checkpoint, export_weights, export_onnx, profile;
  std::string max_val_loss;  // a number, "unigram" or "bigram"
  int64_t stop_at = 0;
  int64_t generate = 0;
  std::string prompt;
  double temperature = 0.8;
  int64_t top_k = 0;
  std::string amp = "off";
  bool cuda_graph = false;
};

// The run settings given on the command line, applied over the device's defaults (or, with
// --resume, checked against the checkpoint's). Each flag binds to the field of its own RunConfig
// in `given`; CLI11 says after parsing which flags were given.
struct Overrides {
  std::vector<std::pair<const Setting*, CLI::Option*>> flags;
  RunConfig given;

  void apply(RunConfig& c) const {
    for (const auto& [s, opt] : flags) {
      if (opt->count() > 0) std::visit([&](auto m) { c.*m = given.*m; }, s->member);
    }
  }
  // The flags given with a value other than c's, with c's value.
  std::vector<std::string> conflicts(const RunConfig& c) const {
    std::vector<std::string> out;
    for (const auto& [s, opt] : flags) {
      const bool differs = std::visit([&](auto m) { return c.*m != given.*m; }, s->member);
      if (opt->count() > 0 && differs) {
        out.push_back(format("%s (checkpoint: %s)", s->flag, to_text(c, s->member, 6).c_str()));
      }
    }
    return out;
  }
};

st::Device resolve_device(const std::string& name) {
  if (name == "cuda" || (name == "auto" && st::cuda::is_available())) {
    if (!st::cuda::is_available()) throw st::Error("--device cuda: no CUDA device is available");
    return st::Device::cuda(0);
  }
  return st::Device::cpu();
}

// Mean cross-entropy in nats per byte over the validation windows (the same ones every time).
double evaluate(st::nn::models::GPT& model, st::data::DataLoader& loader,
                std::optional<st::DType> amp) {
  st::NoGradGuard no_grad;
  model.eval();
  const st::Device dev = loader.options().device;
  st::Tensor sum = st::zeros({}, {.dtype = st::DType::f64, .device = dev});
  int64_t count = 0;
  for (const st::data::Batch& b : loader) {
    const AmpScope scope(amp, dev);
    const st::Tensor logits = model(b.input);
    sum.add_(st::cross_entropy(logits.reshape({-1, 256}), b.target.reshape({-1}),
                               {.reduction = st::Reduction::Sum})
                 .to(st::DType::f64));
    count += b.target.numel();
  }
  model.train();
  return sum.item<double>() / static_cast<double>(count);
}

void save_checkpoint(const std::string& path, st::nn::models::GPT& model,
                     const st::optim::Optimizer& opt, const st::optim::LRScheduler& sched,
                     const st::optim::GradScaler& scaler, int64_t step, const RunConfig& config,
                     const std::vector<std::string>& data, const std::string& hash,
                     int64_t corpus_bytes) {
  st::StateDict dict;
  st::add_prefixed(dict, "model", model.state_dict());
  st::add_prefixed(dict, "optimizer", opt.state_dict());
  st::add_prefixed(dict, "scheduler", sched.state_dict());
  if (scaler.is_enabled()) st::add_prefixed(dict, "scaler", scaler.state_dict());
  dict["meta.step"] = i64_scalar(step);
  st::add_prefixed(dict, "meta", st::generator_state_dict());
  st::Metadata meta{{"format", kFormat},
                    {"config.data", join(data, "\n")},
                    {"corpus.hash", hash},
                    {"corpus.bytes", std::to_string(corpus_bytes)}};
  for (const Setting& s : settings())
    meta[std::string("config.") + s.key] = to_text(config, s.member);
  st::save(dict, path, meta);
}

// The metrics CSV: its rows are kept in memory and the file rewritten atomically after each
// evaluation; a resumed run keeps the rows up to its checkpoint's step.
class MetricsCsv {
 public:
  static constexpr const char* kHeader =
      "step,train_loss,val_loss,lr,tokens_per_s,gpu_util_percent,gpu_memory_gib";

  MetricsCsv(fs::path path, int64_t keep_until) : path_(std::move(path)) {
    if (keep_until == 0) return;
    std::ifstream in(path_);
    std::string line;
    if (!std::getline(in, line) || line != kHeader) return;
    while (std::getline(in, line)) {
      // Rows past the checkpoint (written before the run was interrupted) and lines that are not
      // rows are dropped.
      char* end = nullptr;
      const long long step = std::strtoll(line.c_str(), &end, 10);
      if (end != line.c_str() && *end == ',' && step <= keep_until) rows_.push_back(line);
    }
  }

  void add(int64_t step, double train_loss, double val_loss, double lr, double tokens_per_s,
           const std::string& gpu_fields) {
    rows_.push_back(format("%lld,%.6f,%.6f,%.6g,%.0f", static_cast<long long>(step), train_loss,
                           val_loss, lr, tokens_per_s) +
                    gpu_fields);
    st::write_file_atomically(path_.string(),
                              std::string(kHeader) + "\n" + join(rows_, "\n") + "\n");
  }

  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  std::vector<std::string> rows_;
};

int generate(const Args& args, uint64_t seed, bool seed_given) {
  const std::string path = args.checkpoint.empty()
                               ? (fs::path(args.out) / "char_lm.safetensors").string()
                               : args.checkpoint;
  const CheckpointInfo info = read_checkpoint_info(path);
  const st::Device dev = resolve_device(args.device);
  st::nn::models::GPT model(gpt_config(info.config));
  const st::StateDict dict = st::load(path);
  model.load_state_dict(st::sub_dict(dict, "model"));
  model.to(dev);
  finish_setup();
  // The empty prompt starts a new fortune: "%\n" separates them in the corpus.
  const std::string context = args.prompt.empty() ? "%\n" : args.prompt;
  std::vector<int64_t> ids(context.begin(), context.end());
  for (int64_t& id : ids) id = static_cast<uint8_t>(id);
  st::Generator gen(seed_given ? seed : info.config.seed);
  const st::Tensor out =
      model.generate(st::from_vector<int64_t>(ids).to(dev), args.generate,
                     {.temperature = args.temperature, .top_k = args.top_k, .generator = &gen});
  const std::vector<int64_t> all = out.to(st::Device::cpu()).to_vector<int64_t>();
  std::string text = args.prompt;
  for (size_t i = ids.size(); i < all.size(); ++i) text += static_cast<char>(all[i]);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::printf("\n");
  return 0;
}

// Everything a training run holds from its set-up to its finish.
struct Run {
  Args args;
  st::Device dev;
  RunConfig cfg;
  std::vector<std::string> data;  // the corpus's files and folders, absolute
  std::unique_ptr<st::data::TextCorpus> corpus;
  std::string hash;
  st::data::ByteBaselines base;
  std::optional<double> max_val_loss;
  std::unique_ptr<st::nn::models::GPT> model;
  std::vector<st::Tensor> params;
  std::unique_ptr<st::optim::AdamW> opt;
  std::unique_ptr<st::optim::CosineAnnealingLR> sched;
  std::optional<st::DType> amp;
  st::optim::GradScaler scaler{{.enabled = false}};
  int64_t start = 0, stop = 0;  // the steps done before this run, and the last one it takes
  std::unique_ptr<st::data::DataLoader> train_loader, val_loader;
  std::string save;
  std::unique_ptr<MetricsCsv> metrics;
};

// The run's settings and corpus: the device's defaults with the flags over them, or, with
// --resume, the checkpoint's (flags that differ from them are an error). Returns the corpus hash
// the checkpoint expects ("" without --resume).
std::string configure(Run& r, const Overrides& overrides) {
  const Args& args = r.args;
  r.cfg = r.dev.is_cuda() ? gpu_defaults() : cpu_defaults();
  // Absolute paths, so that the checkpoint's corpus is found from any folder.
  std::vector<std::string> given_data;
  for (const std::string& p : args.data) {
    given_data.push_back(fs::absolute(p).lexically_normal().string());
  }
  r.data =
      args.data.empty() ? std::vector<std::string>{st::data::default_text_corpus()} : given_data;
  std::string expected_hash;
  if (!args.resume.empty()) {
    const CheckpointInfo info = read_checkpoint_info(args.resume);
    const std::vector<std::string> conflicts = overrides.conflicts(info.config);
    if (!conflicts.empty()) {
      throw st::Error(
          "--resume continues the run as the checkpoint configured it; these flags "
          "differ from it: " +
          join(conflicts, ", "));
    }
    if (!given_data.empty() && given_data != info.data) {
      throw st::Error("--resume: --data differs from the checkpoint's corpus (" +
                      join(info.data, ", ") + ")");
    }
    r.cfg = info.config;
    r.data = info.data;
    expected_hash = metadata_at(info.meta, "corpus.hash", args.resume);
  } else {
    overrides.apply(r.cfg);
  }
  check_config(r.cfg);
  if (args.stop_at < 0 || args.stop_at > r.cfg.steps) {
    throw st::Error(format("--stop-at %lld is not in [1, --steps %lld]",
                           static_cast<long long>(args.stop_at),
                           static_cast<long long>(r.cfg.steps)));
  }
  return expected_hash;
}

// The checkpoint's model, optimizer, scheduler, scaler and random generators; returns its step.
int64_t load_checkpoint(Run& r, const std::string& path) {
  const st::StateDict dict = st::load(path);
  // Check the whole model before touching the optimizer, so a mismatch changes nothing.
  r.model->load_state_dict(st::sub_dict(dict, "model"));
  r.opt->load_state_dict(st::sub_dict(dict, "optimizer"));
  r.sched->load_state_dict(st::sub_dict(dict, "scheduler"));
  const st::StateDict scaler_state = st::sub_dict(dict, "scaler");
  if (r.scaler.is_enabled() && !scaler_state.empty()) r.scaler.load_state_dict(scaler_state);
  st::load_generator_state(st::sub_dict(dict, "meta"));
  if (dict.count("meta.step") == 0) throw st::Error(path + ": no meta.step");
  return dict.at("meta.step").item<int64_t>();
}

// The GPT on the run's device, AdamW and its cosine schedule. Returns the number of parameters.
int64_t build_model(Run& r) {
  const RunConfig& cfg = r.cfg;
  r.model = std::make_unique<st::nn::models::GPT>(gpt_config(cfg));
  r.model->to(r.dev);
  // Weight decay on the matrices (linear and embedding weights) only, as GPT-2 and nanoGPT do:
  // decaying biases and LayerNorm gains only pulls them off their working values.
  std::vector<st::Tensor> decay, no_decay;
  int64_t num_params = 0;
  r.params = r.model->parameters();
  for (const st::Tensor& p : r.params) {
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
    num_params += p.numel();
  }
  r.opt = std::make_unique<st::optim::AdamW>(
      std::vector<st::optim::AdamWGroup>{{.params = decay, .weight_decay = cfg.weight_decay},
                                        {.params = no_decay, .weight_decay = 0.0}},
      st::optim::AdamWOptions{.lr = cfg.lr, .betas = {0.9, 0.95}, .capturable = r.args.cuda_graph});
  r.sched =
      std::make_unique<st::optim::CosineAnnealingLR>(*r.opt, cfg.steps, cfg.min_lr, cfg.warmup);
  return num_params;
}

// What the run trains, on what, and the baselines it is measured against.
void print_summary(const Run& r, int64_t num_params) {
  const RunConfig& cfg = r.cfg;
  const int64_t B = cfg.batch_size, T = cfg.context;
  std::printf("GPT on %s: %lld layers, %lld heads, width %lld, context %lld, %lld parameters\n",
              r.dev.str().c_str(), static_cast<long long>(cfg.n_layer),
              static_cast<long long>(cfg.n_head), static_cast<long long>(cfg.n_embd),
              static_cast<long long>(T), static_cast<long long>(num_params));
  std::printf("corpus: %zu files, %zu bytes (%lld training, %lld validation)\n",
              r.corpus->files().size(), r.corpus->bytes().size(),
              static_cast<long long>(r.corpus->train()->num_bytes()),
              static_cast<long long>(r.corpus->val()->num_bytes()));
  std::printf("AdamW lr %g (warm-up %lld, cosine to %g), batch %lld x %lld bytes, %lld steps\n",
              cfg.lr, static_cast<long long>(cfg.warmup), cfg.min_lr, static_cast<long long>(B),
              static_cast<long long>(T), static_cast<long long>(cfg.steps));
  std::printf("baselines on the validation text: unigram %.4f, bigram %.4f nats/byte\n",
              r.base.unigram, r.base.bigram);
}

// The settings, the corpus and its baselines, the model and its optimizer (from the checkpoint
// with --resume), the loaders, the metrics file. Errors here are bad options (Note [exit
// statuses]).
std::unique_ptr<Run> set_up(const Args& args, const Overrides& overrides) {
  auto r = std::make_unique<Run>();
  r->args = args;
  r->dev = resolve_device(args.device);
  const std::string expected_hash = configure(*r, overrides);
  const RunConfig& cfg = r->cfg;

  st::manual_seed(cfg.seed);
  // Training windows: one fresh random window per example over the whole run (Note [text
  // windows]), so no window repeats by design and step s always reads examples [s B, (s + 1) B).
  // Validation: the same eval_batches x batch_size windows at every evaluation.
  r->corpus = std::make_unique<st::data::TextCorpus>(
      r->data, st::data::TextCorpusOptions{.context = cfg.context,
                                           .seed = cfg.seed,
                                           .train_windows = cfg.steps * cfg.batch_size,
                                           .val_windows = cfg.eval_batches * cfg.batch_size});
  r->hash = corpus_hash(r->corpus->bytes());
  if (!expected_hash.empty() && r->hash != expected_hash) {
    throw st::Error("--resume: the corpus (" + join(r->data, ", ") +
                    ") is not the one the checkpoint was trained on (its bytes changed)");
  }
  r->base = st::data::byte_baselines(*r->corpus);
  if (args.max_val_loss == "unigram") {
    r->max_val_loss = r->base.unigram;
  } else if (args.max_val_loss == "bigram") {
    r->max_val_loss = r->base.bigram;
  } else if (!args.max_val_loss.empty()) {
    r->max_val_loss = std::stod(args.max_val_loss);  // checked by the flag's validator
  }

  const int64_t num_params = build_model(*r);
  r->amp = amp_dtype(args.amp, r->dev);
  r->scaler = amp_scaler(r->amp);
  check_cuda_graph(args.cuda_graph, r->dev, r->amp);
  check_export_onnx(args.export_onnx);
  if (args.cuda_graph && cfg.dropout > 0) {
    throw st::Error(
        format("--cuda-graph needs --dropout 0 (dropout %g would replay one mask at every step)",
               cfg.dropout));
  }
  if (!args.resume.empty()) {
    r->start = load_checkpoint(*r, args.resume);
    std::printf("resumed from %s at step %lld\n", args.resume.c_str(),
                static_cast<long long>(r->start));
  }
  if (args.stop_at > 0 && args.stop_at <= r->start) {
    throw st::Error(format("--stop-at %lld: the checkpoint is already at step %lld",
                           static_cast<long long>(args.stop_at), static_cast<long long>(r->start)));
  }
  r->stop = args.stop_at > 0 ? args.stop_at : cfg.steps;

  const int64_t B = cfg.batch_size;
  r->train_loader = std::make_unique<st::data::DataLoader>(
      r->corpus->train(), st::data::DataLoaderOptions{
                              .batch_size = B,
                              .device = r->dev,
                              .sampler = [start = r->start, stop = r->stop, B](int64_t) {
                                std::vector<int64_t> order(static_cast<size_t>((stop - start) * B));
                                std::iota(order.begin(), order.end(), start * B);
                                return order;
                              }});
  r->val_loader = std::make_unique<st::data::DataLoader>(
      r->corpus->val(), st::data::DataLoaderOptions{.batch_size = B, .device = r->dev});

  print_summary(*r, num_params);

  make_out_folder(args.out);
  r->save = args.save.empty() ? (fs::path(args.out) / "char_lm.safetensors").string() : args.save;
  r->metrics = std::make_unique<MetricsCsv>(fs::path(args.out) / "metrics.csv", r->start);
  return r;
}

// One training step on a batch (x, y): the forward under autocast, the backward through the loss
// scaler, the true gradients clipped on the device (no host read, so the step can be captured),
// the optimizer's step. The eager path and the captured graph both run it. Returns the loss.
st::Tensor train_step(Run& r, const st::Tensor& x, const st::Tensor& y) {
  r.opt->zero_grad();
  st::Tensor loss;
  {
    const AmpScope scope(r.amp, r.dev);
    const st::Tensor logits = (*r.model)(x);
    loss = st::cross_entropy(logits.reshape({-1, 256}), y.reshape({-1}));
  }
  r.scaler.scale(loss).backward();
  if (r.cfg.grad_clip > 0) {
    r.scaler.unscale_(*r.opt);
    st::optim::clip_grad_norm_on_device_(r.params, r.cfg.grad_clip);
  }
  r.scaler.step(*r.opt);
  r.scaler.update();
  return loss;
}

// The training figures of the steps since the last evaluation. The loss sum stays on the device;
// it is read every few steps only.
struct Interval {
  st::Tensor loss_sum;
  int64_t steps = 0;
  double train_secs = 0;  // training time of this interval, without evaluations
  Clock::time_point t0 = Clock::now();

  explicit Interval(st::Device dev)
      : loss_sum(st::zeros({}, {.dtype = st::DType::f64, .device = dev})) {}
  double seconds() const { return train_secs + seconds_since(t0); }
};

// At an evaluation step: the validation loss, a line of output and of metrics.csv, the
// checkpoint; then a new interval begins. Returns the validation loss.
double evaluate_interval(Run& r, Interval& in, Progress& progress, int64_t step, double lr) {
  const int64_t tokens = in.steps * r.cfg.batch_size * r.cfg.context;
  in.train_secs += seconds_since(in.t0);
  const double train_loss = in.loss_sum.item<double>() / in.steps;
  const double tokens_per_s = static_cast<double>(tokens) / in.train_secs;
  double val_loss = 0;
  {
    const st::profiler::Range eval_range("evaluate");
    val_loss = evaluate(*r.model, *r.val_loader, r.amp);
  }
  progress.clear();
  std::printf(
      "step %lld: train %.4f  val %.4f nats/byte (bigram %+.4f)  lr %.2e  %.0f tokens/s"
      "  %.0fs\n",
      static_cast<long long>(step), train_loss, val_loss, val_loss - r.base.bigram, lr,
      tokens_per_s, progress.elapsed());
  r.metrics->add(step, train_loss, val_loss, lr, tokens_per_s, gpu_csv_fields(gpu_reading(r.dev)));
  save_checkpoint(r.save, *r.model, *r.opt, *r.sched, r.scaler, step, r.cfg, r.data, r.hash,
                  static_cast<int64_t>(r.corpus->bytes().size()));
  in.loss_sum.zero_();
  in.steps = 0;
  in.train_secs = 0;
  in.t0 = Clock::now();
  return val_loss;
}

// The steps from the checkpoint's (or 0) to --stop-at (or --steps), evaluated every
// eval_interval steps and at the last. Returns the last validation loss (NaN if no step was left).
double train_steps(Run& r) {
  const RunConfig& cfg = r.cfg;
  TrainStep<st::Tensor> train_step_of(
      [&r](const st::Tensor& x, const st::Tensor& y) { return train_step(r, x, y); },
      r.args.cuda_graph, cfg.batch_size);
  finish_setup();
  double val_loss = std::nan("");
  Progress progress("step", cfg.steps, r.start, std::max<int64_t>(cfg.eval_interval / 2, 1));
  Interval in(r.dev);
  int64_t step = r.start;
  ProfileScope profile(r.args.profile);
  for (const st::data::Batch& b : *r.train_loader) {
    const st::profiler::Range step_range("train step");
    ++step;
    const double lr = r.sched->get_last_lr()[0];
    const st::Tensor loss = train_step_of(b);
    r.sched->step();  // on the host: the capturable optimizer's device lr follows it
    {
      st::NoGradGuard no_grad;
      in.loss_sum.add_(loss.detach().to(st::DType::f64));
    }
    ++in.steps;
    const bool eval_now = step % cfg.eval_interval == 0 || step == r.stop;
    if (step % 10 == 0 || eval_now) {
      // Reading the loss waits for the device, so it happens every few steps only.
      progress.update(
          step,
          format("loss %.4f  lr %.2e  %.0f tokens/s", in.loss_sum.item<double>() / in.steps, lr,
                 static_cast<double>(in.steps * cfg.batch_size * cfg.context) / in.seconds()) +
              gpu_progress(gpu_reading(r.dev)));
    }
    if (eval_now) val_loss = evaluate_interval(r, in, progress, step, lr);
  }
  progress.done();
  profile.finish();
  return val_loss;
}

// The final validation loss, the exports and the plot; status 3 above --max-val-loss.
int finish(Run& r, double val_loss) {
  if (std::isnan(val_loss)) val_loss = evaluate(*r.model, *r.val_loader, r.amp);  // nothing left
  std::printf(
      "final validation loss %.4f nats/byte (%+.4f against the bigram baseline, %+.4f against "
      "the unigram)\n",
      val_loss, val_loss - r.base.bigram, val_loss - r.base.unigram);
  std::printf("metrics: %s\ncheckpoint: %s\n", r.metrics->path().string().c_str(), r.save.c_str());
  export_weights(r.args.export_weights, *r.model, "gpt");
  // Any batch and any length up to the context: the example's (1, context) dims are symbolic.
  export_onnx(r.args.export_onnx, *r.model,
              st::zeros({1, r.cfg.context}, {.dtype = st::DType::i64, .device = r.dev}), true);
  write_plot(r.metrics->path(), fs::path(r.args.out) / "curves.png",
             {{.title = "loss (nats/byte)",
               .xlabel = "step",
               .columns = {2, 3},
               .levels = {{"unigram", r.base.unigram}, {"bigram", r.base.bigram}}},
              {.title = "learning rate", .xlabel = "step", .columns = {4}}});
  if (r.max_val_loss && !(val_loss <= *r.max_val_loss)) {
    std::fprintf(stderr, "validation loss %.4f is above --max-val-loss %s (%.4f)\n", val_loss,
                 r.args.max_val_loss.c_str(), *r.max_val_loss);
    return 3;
  }
  return 0;
}

int train(const Args& args, const Overrides& overrides) {
  const std::unique_ptr<Run> r = set_up(args, overrides);
  const double val_loss = train_steps(*r);
  return finish(*r, val_loss);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  Overrides overrides;
  const RunConfig cpu = cpu_defaults(), gpu = gpu_defaults();
  CLI::Option* gen_opt = nullptr;
  return example_main(
      argc, argv, "char_lm",
      "Train a GPT as a byte-level language model, or sample from its checkpoint",
      [&](CLI::App& app) {
        for (const Setting& s : settings()) {
          const std::string help =
              format("%s (default: %s on the CPU, %s on a GPU)", s.help,
                     to_text(cpu, s.member, 6).c_str(), to_text(gpu, s.member, 6).c_str());
          CLI::Option* opt = std::visit(
              [&](auto m) { return app.add_option(s.flag, overrides.given.*m, help); }, s.member);
          overrides.flags.emplace_back(&s, opt);
        }
        app.add_option("--device", args.device, "auto (CUDA when available), cpu or cuda")
            ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
        add_amp_options(app, args.amp, args.cuda_graph, "; needs --dropout 0");
        app.add_option("--data", args.data,
                       "text files or folders to train on (default: " +
                           st::data::default_text_corpus() + ")")
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
        app.add_option("--out", args.out, "folder for metrics.csv, curves.png and the checkpoint");
        app.add_option("--save", args.save, "checkpoint path (default: <out>/char_lm.safetensors)");
        add_output_options(app, args.profile, args.export_weights, args.export_onnx,
                           "any batch and any length up to the context");
        app.add_option("--resume", args.resume,
                       "checkpoint to continue from, with its settings and corpus");
        app.add_option("--stop-at", args.stop_at,
                       "stop after this step (checkpointed), to continue later with --resume");
        app.add_option(
               "--max-val-loss", args.max_val_loss,
               "exit with status 3 if the final validation loss is above this: nats/byte, or "
               "unigram or bigram for that baseline")
            ->check(CLI::Number | CLI::IsMember({"unigram", "bigram"}));
        gen_opt =
            app.add_option("--generate", args.generate, "sample this many bytes from a checkpoint");
        app.add_option("--checkpoint", args.checkpoint,
                       "checkpoint to sample from (default: <out>/char_lm.safetensors)");
        app.add_option("--prompt", args.prompt,
                       "text the sample continues (default: the start of a new fortune)");
        app.add_option("--temperature", args.temperature, "sampling temperature (> 0)")
            ->check(CLI::Validator(
                [](std::string& v) {
                  double t = 0;
                  return CLI::detail::lexical_cast(v, t) && t > 0 && std::isfinite(t)
                             ? std::string()
                             : "must be a positive number, got " + v;
                },
                "POSITIVE"));
        app.add_option("--top-k", args.top_k, "sample among the k most likely bytes (0: all)");
      },
      [&](CLI::App& app) {
        if (gen_opt->count() > 0) {
          if (!args.resume.empty()) throw st::Error("--generate and --resume exclude each other");
          if (args.generate < 0 || args.top_k < 0) {
            throw st::Error("--generate and --top-k must not be negative");
          }
          return generate(args, overrides.given.seed, app.count("--seed") > 0);
        }
        return train(args, overrides);
      });
}

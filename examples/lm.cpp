// Trains a language model (GPT or Llama) on bytes or BPE tokens of Debian's fortunes, any text, or
// token shards; measures it in nats per token and per byte against the byte baselines; samples
// text from its checkpoints with the KV cache.
//
//   lm                                              # byte-level GPT, CPU: ~13 min on 2 cores
//   lm --model llama --tokenizer bpe                # Llama on BPE tokens (4096), same budget
//   lm --stop-at 500                                # stop early, checkpointed, ...
//   lm --resume lm_out/lm.safetensors               # ... and go on to the end
//   lm --generate 300 --prompt "The secret of" --temperature 0.8 --top-k 40
//   lm --tokenizer bpe --write-shards shards/       # llm.c token shards and tokenizer.json
//   lm --data shards/ --model llama                 # train from the shards
//   lm --batch-tokens 12288                         # accumulate micro-batches to 12288 tokens
//   mpirun -np 2 lm --ddp                           # data parallel (--batch-tokens over all ranks)
//   mpirun -np 2 lm --ddp --zero 2                  # ... with the optimizer state sharded (ZeRO)
//   lm --device cuda --amp bf16 --cuda-graph --dropout 0
#include <sinter/data.h>
#include <sinter/dist.h>
#include <sinter/io.h>
#include <sinter/nn.h>
#include <sinter/nn/models.h>
#include <sinter/optim.h>
#include <sinter/sinter.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "training.h"

namespace st = sinter;
namespace fs = std::filesystem;
using namespace example;

namespace {

constexpr const char* kFormat = "sinter-lm-1";
constexpr const char* kEndOfText = "<|endoftext|>";

// Everything that decides what a training run computes; a checkpoint stores it, so that --resume
// and --generate need no other flags.
struct RunConfig {
  std::string model, tokenizer;
  int64_t vocab = 0;  // BPE tokens in all (the byte tokenizer has 256)
  int64_t n_layer = 0, n_head = 0, n_kv_head = 0, n_embd = 0, context = 0;
  double dropout = 0;
  int64_t batch_size = 0, batch_tokens = 0, steps = 0, warmup = 0;
  double lr = 0, min_lr = 0, weight_decay = 0, grad_clip = 0;
  int64_t eval_interval = 0, eval_batches = 0;
  uint64_t seed = 0;
};

// Sized for about 13 minutes on 2 CPU cores (about 0.53 s per step of the byte-level GPT): 1500
// steps of 48 windows of 64 tokens. Attention is composed of matmul and softmax, quadratic in the
// context, and a 300-step trial reached a lower validation loss, faster, with 48 x 64 bytes than
// with 32 x 96. A Llama has the same width and depth, with 2 K/V heads for its 4 query heads.
RunConfig cpu_defaults() {
  return {.model = "gpt",
          .tokenizer = "bytes",
          .vocab = 4096,
          .n_layer = 4,
          .n_head = 4,
          .n_kv_head = 2,
          .n_embd = 128,
          .context = 64,
          .dropout = 0.0,
          .batch_size = 48,
          .batch_tokens = 0,
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
// 32) with nanoGPT's character-level settings for that shape (lr 1e-3, a little dropout); a Llama
// of that shape is llama-mini (2 K/V heads).
RunConfig gpu_defaults() {
  RunConfig c = cpu_defaults();
  c.n_layer = 6;
  c.n_head = 6;
  c.n_kv_head = 2;
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

using Member = std::variant<std::string RunConfig::*, int64_t RunConfig::*, double RunConfig::*,
                            uint64_t RunConfig::*>;

// A run setting: its flag, its key in checkpoint metadata ("config.<key>") and its help text.
struct Setting {
  const char* flag;
  const char* key;
  Member member;
  const char* help;
};

const std::vector<Setting>& settings() {
  static const std::vector<Setting> all = {
      {"--model", "model", &RunConfig::model, "gpt or llama"},
      {"--tokenizer", "tokenizer", &RunConfig::tokenizer,
       "bytes (256 tokens) or bpe (trained on the training text; with shards: theirs)"},
      {"--vocab", "vocab", &RunConfig::vocab, "BPE tokens in all, with the end-of-text token"},
      {"--layers", "n_layer", &RunConfig::n_layer, "transformer blocks"},
      {"--heads", "n_head", &RunConfig::n_head, "attention heads (dividing --width)"},
      {"--kv-heads", "n_kv_head", &RunConfig::n_kv_head,
       "Llama's key/value heads (dividing --heads)"},
      {"--width", "n_embd", &RunConfig::n_embd, "embedding width"},
      {"--context", "context", &RunConfig::context, "tokens of context the model sees"},
      {"--dropout", "dropout", &RunConfig::dropout, "GPT's dropout rate during training"},
      {"--batch-size", "batch_size", &RunConfig::batch_size,
       "windows per micro-batch on each rank"},
      {"--batch-tokens", "batch_tokens", &RunConfig::batch_tokens,
       "tokens per optimizer step over all ranks, a multiple of batch size x context x ranks: "
       "micro-batches accumulate to it (0: one micro-batch per rank)"},
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

// Parses `text` into c.*m; false when it is not a whole value of the member's type.
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

// 64-bit FNV-1a of the training data, so that --resume notices different data.
class Fnv {
 public:
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 1099511628211ull;
  }
  std::string hex() const { return format("%016llx", static_cast<unsigned long long>(h_)); }

 private:
  uint64_t h_ = 1469598103934665603ull;
};

std::string metadata_at(const st::Metadata& meta, const std::string& key, const std::string& path) {
  const auto it = meta.find(key);
  if (it == meta.end()) throw st::Error(path + ": not an lm checkpoint (no " + key + ")");
  return it->second;
}

// The run settings, data paths and tokenizer a checkpoint was written with.
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

// The checkpoint's tokenizer: its tokenizer.json, or the byte tokenizer.
st::data::BpeTokenizer checkpoint_tokenizer(const CheckpointInfo& info, const std::string& path) {
  const auto it = info.meta.find("tokenizer.json");
  return it == info.meta.end() ? st::data::BpeTokenizer()
                               : st::data::BpeTokenizer::from_json(it->second, path);
}

void require(bool ok, const std::string& what) {
  if (!ok) throw st::Error(what);
}

std::string ll(int64_t v) { return std::to_string(v); }

void check_config(const RunConfig& c) {
  require(c.model == "gpt" || c.model == "llama", "--model must be gpt or llama, got " + c.model);
  require(c.tokenizer == "bytes" || c.tokenizer == "bpe",
          "--tokenizer must be bytes or bpe, got " + c.tokenizer);
  require(c.n_layer > 0 && c.n_head > 0 && c.n_embd > 0 && c.context > 0 && c.batch_size > 0 &&
              c.steps > 0 && c.eval_interval > 0 && c.eval_batches > 0,
          "--layers, --heads, --width, --context, --batch-size, --steps, --eval-interval and "
          "--eval-batches must be positive");
  require(c.tokenizer != "bpe" || (c.vocab >= 257 && c.vocab <= 65536),
          "--vocab " + ll(c.vocab) +
              " is too small for the 256 bytes and the end-of-text token, or more than a shard's "
              "16-bit tokens hold (257 to 65536)");
  require(c.n_embd % c.n_head == 0,
          "--width " + ll(c.n_embd) + " is not a multiple of --heads " + ll(c.n_head));
  if (c.model == "llama") {
    require(c.n_kv_head > 0 && c.n_head % c.n_kv_head == 0,
            "--kv-heads " + ll(c.n_kv_head) + " does not divide --heads " + ll(c.n_head));
    require((c.n_embd / c.n_head) % 2 == 0,
            "the head size --width / --heads = " + ll(c.n_embd / c.n_head) +
                " must be even for the rotary embedding");
    require(c.dropout == 0, "--dropout: the Llama has none (give 0)");
  }
  require(c.dropout >= 0 && c.dropout < 1, format("--dropout %g is not in [0, 1)", c.dropout));
  require(c.batch_tokens >= 0, "--batch-tokens " + ll(c.batch_tokens) + " is negative");
  require(c.lr > 0 && std::isfinite(c.lr), format("--lr %g is not positive", c.lr));
  require(c.min_lr >= 0 && c.min_lr <= c.lr,
          format("--min-lr %g is not in [0, --lr %g]", c.min_lr, c.lr));
  require(c.warmup >= 0 && c.warmup < c.steps,
          "--warmup " + ll(c.warmup) + " must be in [0, --steps " + ll(c.steps) + ")");
  require(c.weight_decay >= 0, format("--weight-decay %g is negative", c.weight_decay));
  require(c.grad_clip >= 0, format("--grad-clip %g is negative", c.grad_clip));
}

struct Args {
  std::string device = "auto";
  std::vector<std::string> data;
  std::string out = "lm_out";
  std::string save, resume, checkpoint, export_weights, export_onnx, profile, write_shards;
  std::string profile_schedule = "2,1,5";
  std::string max_val_loss;  // nats per byte, "unigram" or "bigram"
  int64_t stop_at = 0;
  int64_t generate = 0;
  std::string prompt;
  double temperature = 0.8;
  int64_t top_k = 0;
  std::string amp = "off";
  bool cuda_graph = false;
  bool ddp = false;
  int zero = 0;  // ZeRO stage with --ddp (0: the optimizer replicated on every rank)
  std::string tensorboard;
  int64_t log_every = 10;
};

// The run settings given on the command line, applied over the device's defaults (or, with
// --resume, checked against the checkpoint's). Each flag binds to the field of its own RunConfig
// in `given`; CLI11 says after parsing which flags were given.
struct Overrides {
  std::vector<std::pair<const Setting*, CLI::Option*>> flags;
  RunConfig given;

  bool has(const char* flag) const {
    for (const auto& [s, opt] : flags) {
      if (std::string(s->flag) == flag) return opt->count() > 0;
    }
    return false;
  }
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

// --- the model ---

// A GPT or a Llama; both map (B, T) token ids to (B, T, vocab) logits through Module::forward.
struct LanguageModel {
  std::shared_ptr<st::nn::Module> module;
  std::shared_ptr<st::nn::models::GPT> gpt;
  std::shared_ptr<st::nn::models::Llama> llama;
  int64_t vocab = 0;

  st::Tensor generate(const st::Tensor& prompt, int64_t n,
                      const st::nn::models::GenerateOptions& o) const {
    return gpt ? gpt->generate(prompt, n, o) : llama->generate(prompt, n, o);
  }
};

LanguageModel make_model(const RunConfig& c, int64_t vocab) {
  LanguageModel m;
  m.vocab = vocab;
  if (c.model == "gpt") {
    m.gpt =
        std::make_shared<st::nn::models::GPT>(st::nn::models::GPTConfig{.vocab_size = vocab,
                                                                        .context_length = c.context,
                                                                        .n_layer = c.n_layer,
                                                                        .n_head = c.n_head,
                                                                        .n_embd = c.n_embd,
                                                                        .dropout = c.dropout});
    m.module = m.gpt;
  } else {
    m.llama = std::make_shared<st::nn::models::Llama>(
        st::nn::models::LlamaConfig{.vocab_size = vocab,
                                    .context_length = c.context,
                                    .n_layer = c.n_layer,
                                    .n_head = c.n_head,
                                    .n_kv_head = c.n_kv_head,
                                    .n_embd = c.n_embd});
    m.module = m.llama;
  }
  return m;
}

// Note [model flops]
// FLOPs per trained token, as PaLM's appendix B counts them: 6 per parameter of the matrix
// products (every Linear weight and the output head, tied or not; not the embedding tables, which
// are gathered), plus 12 L E T for attention's two products over a context of T (forward and
// backward, without halving for the causal mask). Model FLOPs utilization is the rate of these
// FLOPs over the device's peak (peak_flops()).
double flops_per_token(const LanguageModel& m, const RunConfig& c) {
  double matmul = 0;
  for (const auto& [name, p] : m.module->named_parameters()) {
    if (p.dim() == 2 && name.find("wte") == std::string::npos &&
        name.find("wpe") == std::string::npos && name.find("embed_tokens") == std::string::npos) {
      matmul += static_cast<double>(p.numel());
    }
  }
  const bool tied = m.gpt ? m.gpt->lm_head == nullptr : m.llama->lm_head == nullptr;
  if (tied) matmul += static_cast<double>(m.vocab * c.n_embd);
  return 6 * matmul + 12.0 * static_cast<double>(c.n_layer * c.n_embd * c.context);
}

// The peak FLOP/s model FLOPs utilization is measured against: on CUDA, the datasheet's dense
// figure for the precision of the run (tensor cores for bf16 and f16, TF32 for f32 at matmul
// precision "high", the FP32 units otherwise) on the GPUs of the table, else 0 (unknown); on the
// CPU, the rate of a 1024^3 matrix product of the run's dtype, measured now (the best of 11).
double peak_flops(st::Device dev, std::optional<st::DType> amp, std::string& what) {
  if (dev.is_cuda()) {
    const std::string name = st::cuda::get_device_properties(dev.index).name;
    struct Peak {
      const char* part;
      double bf16, tf32, fp32;
    };
    const Peak table[] = {{"H200", 989e12, 494e12, 67e12},
                          {"H100", 989e12, 494e12, 67e12},
                          {"A100", 312e12, 156e12, 19.5e12},
                          {"L40S", 362e12, 183e12, 91.6e12},
                          {"RTX 4090", 165e12, 82.6e12, 82.6e12}};
    for (const Peak& p : table) {
      if (name.find(p.part) == std::string::npos) continue;
      const bool tf32 = st::get_matmul_precision() != "highest";
      const double peak = amp ? p.bf16 : tf32 ? p.tf32 : p.fp32;
      what = format("%s's %s peak %.0f TFLOP/s", p.part,
                    amp    ? "bf16"
                    : tf32 ? "tf32"
                           : "fp32",
                    peak / 1e12);
      return peak;
    }
    what = name + ": peak unknown";
    return 0;
  }
  const st::DType dt = amp ? *amp : st::DType::f32;
  st::Generator gen(0);  // not the default one, whose state the run's results depend on
  const st::Tensor a = st::randn({1024, 1024}, {}, &gen).to(dt);
  const st::Tensor b = st::randn({1024, 1024}, {}, &gen).to(dt);
  double best = 1e30;
  for (int i = 0; i < 12; ++i) {
    const auto t0 = Clock::now();
    (void)st::matmul(a, b);
    if (i > 0) best = std::min(best, seconds_since(t0));  // the first warms up
  }
  const double peak = 2.0 * 1024 * 1024 * 1024 / best;
  what = format("measured %s 1024^3 matmul %.0f GFLOP/s", st::dtype_name(dt), peak / 1e9);
  return peak;
}

// --- the data ---

// The tokens of a run: training and validation spans, the tokenizer, and what they cover.
struct TokenData {
  st::data::BpeTokenizer tokenizer;
  std::vector<st::data::TokenSpan> train, val;
  int64_t val_bytes = 0;  // the bytes the validation tokens encode, for nats per byte
  std::unique_ptr<st::data::TextCorpus> corpus;  // text data only: for the baselines
  std::string hash;
  std::string source;  // "fortunes (2576674 bytes)", "4 shards"
};

int64_t total_tokens(const std::vector<st::data::TokenSpan>& spans) {
  int64_t n = 0;
  for (const auto& s : spans) n += s.size;
  return n;
}

// Whether `paths` name token shards: .bin files, or one folder holding .bin files.
bool are_shards(const std::vector<std::string>& paths) {
  if (paths.empty()) return false;
  if (paths.size() == 1 && fs::is_directory(paths[0])) {
    for (const auto& e : fs::directory_iterator(paths[0])) {
      if (e.path().extension() == ".bin") return true;
    }
    return false;
  }
  return std::all_of(paths.begin(), paths.end(),
                     [](const std::string& p) { return fs::path(p).extension() == ".bin"; });
}

// Text: the corpus split as Note [text split] says, each split's runs of adjacent text tokenized
// apart (so no window joins text that is not adjacent), with the byte tokenizer or a BPE trained
// on the training text (or the checkpoint's, on --resume).
void load_text(TokenData& d, const std::vector<std::string>& paths, const RunConfig& c,
               const std::optional<st::data::BpeTokenizer>& given) {
  d.corpus = std::make_unique<st::data::TextCorpus>(
      paths, st::data::TextCorpusOptions{.context = c.tokenizer == "bytes" ? c.context : 1,
                                         .seed = c.seed});
  const std::vector<uint8_t>& bytes = d.corpus->bytes();
  const auto text_of = [&](const st::data::TextSpan& s) {
    return std::string_view(reinterpret_cast<const char*>(bytes.data()) + s.begin,
                            static_cast<size_t>(s.size()));
  };
  if (given) {
    d.tokenizer = *given;
  } else if (c.tokenizer == "bpe") {
    std::string train_text;  // the training runs, apart: end-of-text is cut out before counting
    for (const st::data::TextSpan& s : d.corpus->train()->spans()) {
      train_text.append(text_of(s)).append(kEndOfText);
    }
    const auto t0 = Clock::now();
    d.tokenizer = st::data::BpeTokenizer::train(
        train_text, {.vocab_size = c.vocab, .special_tokens = {kEndOfText}});
    std::printf("BPE: %lld tokens (%lld merges) trained on %lld bytes in %.1f s\n",
                static_cast<long long>(d.tokenizer.vocab_size()),
                static_cast<long long>(d.tokenizer.num_merges()),
                static_cast<long long>(d.corpus->train()->num_bytes()), seconds_since(t0));
  }
  const auto encode = [&](const std::vector<st::data::TextSpan>& spans, const char* name) {
    std::vector<st::data::TokenSpan> out;
    for (const st::data::TextSpan& s : spans) {
      out.push_back(st::data::token_span(d.tokenizer.encode(text_of(s)), name));
    }
    return out;
  };
  d.train = encode(d.corpus->train()->spans(), "the training text");
  d.val = encode(d.corpus->val()->spans(), "the validation text");
  d.val_bytes = d.corpus->val()->num_bytes();
  Fnv h;
  h.add(bytes.data(), bytes.size());
  d.hash = h.hex();
  d.source = format("%zu files, %zu bytes", d.corpus->files().size(), bytes.size());
}

// Shards: *val* files validate, the others train; a tokenizer.json beside them is their tokenizer
// (else they hold bytes).
void load_shards(TokenData& d, const std::vector<std::string>& paths) {
  const std::vector<st::data::TokenSpan> all = st::data::read_token_shards(paths);
  Fnv h;
  for (const st::data::TokenSpan& s : all) {
    (fs::path(s.source).filename().string().find("val") != std::string::npos ? d.val : d.train)
        .push_back(s);
    h.add(s.data, static_cast<size_t>(s.size) * sizeof(uint16_t));
  }
  require(!d.train.empty() && !d.val.empty(),
          "--data: the shards need training and validation files (names with \"val\" validate), "
          "got " +
              std::to_string(d.train.size()) + " and " + std::to_string(d.val.size()));
  const fs::path folder =
      fs::is_directory(paths[0]) ? fs::path(paths[0]) : fs::path(paths[0]).parent_path();
  if (fs::exists(folder / "tokenizer.json")) {
    d.tokenizer = st::data::BpeTokenizer::load((folder / "tokenizer.json").string());
  }
  for (const std::vector<st::data::TokenSpan>* spans : {&d.train, &d.val}) {
    for (const st::data::TokenSpan& s : *spans) {
      const int64_t top = st::data::max_token(s);
      if (top >= d.tokenizer.vocab_size()) {
        throw st::Error(format("--data: %s holds token %lld, outside the %lld tokens of %s",
                               s.source.c_str(), static_cast<long long>(top),
                               static_cast<long long>(d.tokenizer.vocab_size()),
                               fs::exists(folder / "tokenizer.json")
                                   ? (folder / "tokenizer.json").string().c_str()
                                   : "the byte tokenizer (no tokenizer.json beside the shards)"));
      }
    }
  }
  // The bytes each token stands for (none for the special tokens), summed over the validation
  // tokens.
  std::vector<int64_t> bytes_of(static_cast<size_t>(d.tokenizer.vocab_size()));
  for (int32_t id = 0; id < d.tokenizer.vocab_size(); ++id) {
    bytes_of[static_cast<size_t>(id)] = static_cast<int64_t>(d.tokenizer.token(id).size());
  }
  for (const auto& special : d.tokenizer.special_tokens()) {
    bytes_of[static_cast<size_t>(special.second)] = 0;
  }
  for (const st::data::TokenSpan& s : d.val) {
    for (int64_t i = 0; i < s.size; ++i) d.val_bytes += bytes_of[s.data[i]];
  }
  const std::string json = d.tokenizer.to_json();
  h.add(json.data(), json.size());
  d.hash = h.hex();
  d.source = format("%zu shards", all.size());
}

// --write-shards DIR: each split's tokens as one shard per 100M tokens (llm.c's size), the runs of
// text joined by the end-of-text token (BPE) or directly (bytes), and tokenizer.json for BPE.
void write_shards(const TokenData& d, const std::string& dir) {
  make_out_folder(dir);
  const int32_t eot = d.tokenizer.special_id(kEndOfText);
  for (const auto& split : {std::pair{"train", &d.train}, std::pair{"val", &d.val}}) {
    const char* const name = split.first;
    const std::vector<st::data::TokenSpan>* const spans = split.second;
    std::vector<int32_t> tokens;
    int shard = 0;
    const auto flush = [&] {
      const std::string path = (fs::path(dir) / format("%s_%06d.bin", name, shard++)).string();
      st::data::write_token_shard(path, tokens);
      std::printf("%s: %zu tokens\n", path.c_str(), tokens.size());
      tokens.clear();
    };
    for (const st::data::TokenSpan& s : *spans) {
      if (!tokens.empty() && eot >= 0) tokens.push_back(eot);
      tokens.insert(tokens.end(), s.data, s.data + s.size);
      if (tokens.size() >= 100'000'000) flush();
    }
    if (!tokens.empty() || shard == 0) flush();
  }
  if (d.tokenizer.num_merges() > 0 || !d.tokenizer.special_tokens().empty()) {
    d.tokenizer.save((fs::path(dir) / "tokenizer.json").string());
    std::printf("%s\n", (fs::path(dir) / "tokenizer.json").string().c_str());
  }
}

// --- training ---

st::Device resolve_device(const std::string& name,
                          const std::shared_ptr<st::dist::ProcessGroup>& pg) {
  if (name == "cuda" || (name == "auto" && st::cuda::is_available())) {
    if (!st::cuda::is_available()) throw st::Error("--device cuda: no CUDA device is available");
    const int gpu = pg ? pg->cuda_device() : 0;
    st::cuda::set_device(gpu);
    return st::Device::cuda(gpu);
  }
  return st::Device::cpu();
}

// Mean cross-entropy in nats per token over the validation windows (the same ones every time).
double evaluate(LanguageModel& model, st::data::DataLoader& loader, std::optional<st::DType> amp) {
  st::NoGradGuard no_grad;
  model.module->eval();
  const st::Device dev = loader.options().device;
  st::Tensor sum = st::zeros({}, {.dtype = st::DType::f64, .device = dev});
  int64_t count = 0;
  for (const st::data::Batch& b : loader) {
    const AmpScope scope(amp, dev);
    const st::Tensor logits = model.module->forward(b.input);
    sum.add_(st::cross_entropy(logits.reshape({-1, model.vocab}), b.target.reshape({-1}),
                               {.reduction = st::Reduction::Sum})
                 .to(st::DType::f64));
    count += b.target.numel();
  }
  model.module->train();
  return sum.item<double>() / static_cast<double>(count);
}

// The metrics CSV: its rows are kept in memory and the file rewritten atomically after each
// evaluation; a resumed run keeps the rows up to its checkpoint's step.
class MetricsCsv {
 public:
  static constexpr const char* kHeader =
      "step,train_loss,val_loss,val_loss_per_byte,lr,tokens_per_s,mfu_percent,gpu_util_percent,"
      "gpu_memory_gib";

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

  void add(const std::string& row) {
    rows_.push_back(row);
    st::write_file_atomically(path_.string(),
                              std::string(kHeader) + "\n" + join(rows_, "\n") + "\n");
  }

  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  std::vector<std::string> rows_;
};

// Everything a training run holds from its set-up to its finish. With --ddp every rank runs it on
// its own windows of each step; rank 0 alone prints, evaluates and writes files.
struct Run {
  Args args;
  std::shared_ptr<st::dist::ProcessGroup> pg;
  int rank = 0, world = 1;
  bool main_rank = true;
  st::Device dev;
  RunConfig cfg;
  int64_t accum = 1;              // micro-batches per step on each rank
  std::vector<std::string> data;  // absolute paths
  TokenData tokens;
  double bytes_per_token = 1;  // of the validation text
  std::optional<st::data::ByteBaselines> base;
  std::optional<double> max_val_loss;
  LanguageModel model;
  std::vector<st::Tensor> params;
  std::unique_ptr<st::optim::Optimizer> opt;  // AdamW, or --zero's ZeroRedundancyOptimizer over it
  st::dist::ZeroRedundancyOptimizer* zero = nullptr;  // opt, with --zero
  std::unique_ptr<st::optim::CosineAnnealingLR> sched;
  std::unique_ptr<st::dist::DistributedDataParallel> ddp;
  std::optional<st::DType> amp;
  st::optim::GradScaler scaler{{.enabled = false}};
  int64_t start = 0, stop = 0;  // the steps done before this run, and the last one it takes
  std::shared_ptr<st::data::TokenWindows> train_windows, val_windows;
  std::unique_ptr<st::data::DataLoader> train_loader, val_loader;
  double flops_per_token = 0, peak = 0;
  std::string peak_what;
  std::string save;
  std::unique_ptr<MetricsCsv> metrics;
  TensorBoard tb;  // --tensorboard (Note [example tensorboard])
  ProfileScope profile;
  int stopped_by = 0;  // the signal that stopped the run early (Note [preemption])
};

// With --zero the optimizer's state is in shards beside the checkpoint (Note [sharded
// checkpoints]): "<name>.optimizer.rank<r>-of-<N>.safetensors" for "<name>.safetensors".
std::string optimizer_shards(const std::string& checkpoint) {
  const fs::path p(checkpoint);
  return (p.parent_path() / (p.stem().string() + ".optimizer" + p.extension().string())).string();
}

// Collective with --zero: every rank writes its optimizer shard (first, so that the checkpoint,
// renamed into place last, never names shards older than itself), then rank 0 the rest.
void save_checkpoint(const Run& r, int64_t step) {
  if (r.zero) r.zero->save_sharded(optimizer_shards(r.save), {{"step", std::to_string(step)}});
  if (!r.main_rank) return;
  st::StateDict dict;
  st::add_prefixed(dict, "model", r.model.module->state_dict());
  if (!r.zero) st::add_prefixed(dict, "optimizer", r.opt->state_dict());
  st::add_prefixed(dict, "scheduler", r.sched->state_dict());
  if (r.scaler.is_enabled()) st::add_prefixed(dict, "scaler", r.scaler.state_dict());
  dict["meta.step"] = i64_scalar(step);
  st::add_prefixed(dict, "meta", st::generator_state_dict());
  st::Metadata meta{
      {"format", kFormat}, {"config.data", join(r.data, "\n")}, {"data.hash", r.tokens.hash}};
  if (r.tokens.tokenizer.num_merges() > 0 || !r.tokens.tokenizer.special_tokens().empty()) {
    meta["tokenizer.json"] = r.tokens.tokenizer.to_json();
  }
  for (const Setting& s : settings())
    meta[std::string("config.") + s.key] = to_text(r.cfg, s.member);
  if (r.zero) meta["zero.world_size"] = std::to_string(r.world);
  st::save(dict, r.save, meta);
}

// The optimizer state of a checkpoint: its own "optimizer." entries, or with sharded state
// (saved with --zero), this rank's shard when the world size is the same and --zero is on, else
// every shard consolidated into the state of one optimizer (which any world size loads).
void load_optimizer(Run& r, const std::string& path, const st::StateDict& dict, int64_t step) {
  const st::Metadata meta = st::load_metadata(path);
  const auto it = meta.find("zero.world_size");
  if (it == meta.end()) {
    r.opt->load_state_dict(st::sub_dict(dict, "optimizer"));
    return;
  }
  const std::string shards = optimizer_shards(path);
  const int world = std::stoi(it->second);
  for (int k = 0; k < world; ++k) {
    const std::string file = st::dist::ZeroRedundancyOptimizer::shard_path(shards, k, world);
    if (!fs::exists(file))
      throw st::Error("--resume: " + file + " is missing (the optimizer state of rank " +
                      std::to_string(k) + " of " + it->second + ")");
    const st::Metadata shard_meta = st::load_metadata(file);
    const auto at = shard_meta.find("step");
    if (at == shard_meta.end() || at->second != std::to_string(step)) {
      throw st::Error("--resume: " + file + " is the optimizer state of step " +
                      (at == shard_meta.end() ? std::string("?") : at->second) +
                      ", but the checkpoint is at step " + std::to_string(step));
    }
  }
  if (r.zero && world == r.world) {
    r.zero->load_sharded(shards);
    return;
  }
  std::vector<st::StateDict> all;
  for (int k = 0; k < world; ++k) {
    all.push_back(st::load(st::dist::ZeroRedundancyOptimizer::shard_path(shards, k, world)));
  }
  r.opt->load_state_dict(st::dist::ZeroRedundancyOptimizer::consolidate(all));
}

int generate(const Args& args, uint64_t seed, bool seed_given) {
  const std::string path =
      args.checkpoint.empty() ? (fs::path(args.out) / "lm.safetensors").string() : args.checkpoint;
  const CheckpointInfo info = read_checkpoint_info(path);
  const st::data::BpeTokenizer tokenizer = checkpoint_tokenizer(info, path);
  const st::Device dev = resolve_device(args.device, nullptr);
  LanguageModel model = make_model(info.config, tokenizer.vocab_size());
  const st::StateDict dict = st::load(path);
  model.module->load_state_dict(st::sub_dict(dict, "model"));
  model.module->to(dev);
  // The empty prompt starts a new fortune: "%\n" separates them in the corpus.
  const std::vector<int32_t> ids = tokenizer.encode(args.prompt.empty() ? "%\n" : args.prompt);
  if (static_cast<int64_t>(ids.size()) > info.config.context) {
    throw st::Error(format("--prompt: %zu tokens are more than the model's context of %lld",
                           ids.size(), static_cast<long long>(info.config.context)));
  }
  finish_setup();
  std::vector<int64_t> ids64(ids.begin(), ids.end());
  st::Generator gen(seed_given ? seed : info.config.seed);
  const auto t0 = Clock::now();
  const st::Tensor out =
      model.generate(st::from_vector<int64_t>(ids64).to(dev), args.generate,
                     {.temperature = args.temperature, .top_k = args.top_k, .generator = &gen});
  const double secs = seconds_since(t0);
  const std::vector<int64_t> all = out.to(st::Device::cpu()).to_vector<int64_t>();
  const std::vector<int32_t> fresh(all.begin() + static_cast<std::ptrdiff_t>(ids.size()),
                                   all.end());
  const std::string text = args.prompt + tokenizer.decode(fresh);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::printf("\n");
  std::fprintf(stderr, "%lld tokens in %.2f s (%.0f tokens/s, KV cache)\n",
               static_cast<long long>(args.generate), secs,
               static_cast<double>(args.generate) / secs);
  return 0;
}

// The run's settings and data paths: the device's defaults with the flags over them, or, with
// --resume, the checkpoint's (flags that differ from them are an error). Returns the checkpoint's
// info with --resume.
std::optional<CheckpointInfo> configure(Run& r, const Overrides& overrides) {
  const Args& args = r.args;
  r.cfg = r.dev.is_cuda() ? gpu_defaults() : cpu_defaults();
  // Absolute paths, so that the checkpoint's data are found from any folder.
  std::vector<std::string> given_data;
  for (const std::string& p : args.data) {
    given_data.push_back(fs::absolute(p).lexically_normal().string());
  }
  r.data =
      args.data.empty() ? std::vector<std::string>{st::data::default_text_corpus()} : given_data;
  std::optional<CheckpointInfo> info;
  if (!args.resume.empty()) {
    info = read_checkpoint_info(args.resume);
    const std::vector<std::string> conflicts = overrides.conflicts(info->config);
    if (!conflicts.empty()) {
      throw st::Error(
          "--resume continues the run as the checkpoint configured it; these flags "
          "differ from it: " +
          join(conflicts, ", "));
    }
    if (!given_data.empty() && given_data != info->data) {
      throw st::Error("--resume: --data differs from the checkpoint's (" + join(info->data, ", ") +
                      ")");
    }
    r.cfg = info->config;
    r.data = info->data;
  } else {
    overrides.apply(r.cfg);
  }
  check_config(r.cfg);
  if (args.stop_at < 0 || args.stop_at > r.cfg.steps) {
    throw st::Error("--stop-at " + ll(args.stop_at) + " is not in [1, --steps " + ll(r.cfg.steps) +
                    "]");
  }
  // Tokens per step: --batch-tokens, a whole number of micro-batches on every rank.
  const int64_t micro = r.cfg.batch_size * r.cfg.context * r.world;
  if (r.cfg.batch_tokens > 0) {
    require(r.cfg.batch_tokens % micro == 0,
            "--batch-tokens " + ll(r.cfg.batch_tokens) +
                " is not a multiple of --batch-size x --context x ranks = " + ll(micro));
    r.accum = r.cfg.batch_tokens / micro;
  }
  return info;
}

// The checkpoint's model, optimizer, scheduler, scaler and random generators; returns its step.
int64_t load_checkpoint(Run& r, const std::string& path) {
  const st::StateDict dict = st::load(path);
  if (dict.count("meta.step") == 0) throw st::Error(path + ": no meta.step");
  // Check the whole model before touching the optimizer, so a mismatch changes nothing.
  r.model.module->load_state_dict(st::sub_dict(dict, "model"));
  load_optimizer(r, path, dict, dict.at("meta.step").item<int64_t>());
  r.sched->load_state_dict(st::sub_dict(dict, "scheduler"));
  const st::StateDict scaler_state = st::sub_dict(dict, "scaler");
  if (r.scaler.is_enabled() && !scaler_state.empty()) r.scaler.load_state_dict(scaler_state);
  st::load_generator_state(st::sub_dict(dict, "meta"));
  if (dict.count("meta.step") == 0) throw st::Error(path + ": no meta.step");
  return dict.at("meta.step").item<int64_t>();
}

// The model on the run's device, AdamW and its cosine schedule. Returns the number of parameters.
int64_t build_model(Run& r) {
  const RunConfig& cfg = r.cfg;
  r.model = make_model(cfg, r.tokens.tokenizer.vocab_size());
  r.model.module->to(r.dev);
  // Weight decay on the matrices (linear and embedding weights) only, as GPT-2 and nanoGPT do:
  // decaying biases and norm gains only pulls them off their working values.
  std::vector<st::Tensor> decay, no_decay;
  int64_t num_params = 0;
  r.params = r.model.module->parameters();
  for (const st::Tensor& p : r.params) {
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
    num_params += p.numel();
  }
  const auto adamw = [&cfg, &r](const std::vector<st::Tensor>& matrices,
                                const std::vector<st::Tensor>& rest) {
    return std::make_unique<st::optim::AdamW>(
        std::vector<st::optim::AdamWGroup>{{.params = matrices, .weight_decay = cfg.weight_decay},
                                           {.params = rest, .weight_decay = 0.0}},
        st::optim::AdamWOptions{
            .lr = cfg.lr, .betas = {0.9, 0.95}, .capturable = r.args.cuda_graph});
  };
  if (r.args.zero > 0) {
    // The same two groups, sharded (Note [zero sharding]); the DDP wrapper comes first, so it is
    // made here, before a checkpoint is loaded (loading then reaches every rank alike).
    r.ddp = std::make_unique<st::dist::DistributedDataParallel>(r.model.module, r.pg);
    auto zero = std::make_unique<st::dist::ZeroRedundancyOptimizer>(
        *r.ddp,
        st::dist::ZeroRedundancyOptimizer::MakeGroupedOptimizer(
            [&](const std::vector<std::vector<st::Tensor>>& g) { return adamw(g[0], g[1]); }),
        st::dist::ZeroOptions{.stage = r.args.zero,
                              .group_of = [](const std::string&, const st::Tensor& p) {
                                return p.dim() >= 2 ? 0 : 1;
                              }});
    r.zero = zero.get();
    r.opt = std::move(zero);
  } else {
    r.opt = adamw(decay, no_decay);
  }
  r.sched =
      std::make_unique<st::optim::CosineAnnealingLR>(*r.opt, cfg.steps, cfg.min_lr, cfg.warmup);
  return num_params;
}

// What the run trains, on what, and the baselines it is measured against.
void print_summary(const Run& r, int64_t num_params) {
  const RunConfig& cfg = r.cfg;
  std::printf(
      "%s on %s: %lld layers, %lld heads%s, width %lld, context %lld tokens, %lld parameters\n",
      cfg.model == "gpt" ? "GPT" : "Llama", r.dev.str().c_str(),
      static_cast<long long>(cfg.n_layer), static_cast<long long>(cfg.n_head),
      cfg.model == "llama" ? format(" (%lld K/V)", static_cast<long long>(cfg.n_kv_head)).c_str()
                           : "",
      static_cast<long long>(cfg.n_embd), static_cast<long long>(cfg.context),
      static_cast<long long>(num_params));
  std::printf(
      "data: %s; %lld training and %lld validation tokens of a vocabulary of %lld "
      "(%.2f bytes per validation token)\n",
      r.tokens.source.c_str(), static_cast<long long>(total_tokens(r.tokens.train)),
      static_cast<long long>(total_tokens(r.tokens.val)), static_cast<long long>(r.model.vocab),
      r.bytes_per_token);
  std::printf(
      "AdamW lr %g (warm-up %lld, cosine to %g), %lld tokens per step (%d ranks x %lld "
      "micro-batches x %lld x %lld), %lld steps\n",
      cfg.lr, static_cast<long long>(cfg.warmup), cfg.min_lr,
      static_cast<long long>(cfg.batch_size * cfg.context * r.world * r.accum), r.world,
      static_cast<long long>(r.accum), static_cast<long long>(cfg.batch_size),
      static_cast<long long>(cfg.context), static_cast<long long>(cfg.steps));
  std::printf("%.3g FLOPs per token (Note [model flops]); MFU against the %s\n", r.flops_per_token,
              r.peak_what.c_str());
  if (r.base) {
    std::printf("baselines on the validation text: unigram %.4f, bigram %.4f nats/byte\n",
                r.base->unigram, r.base->bigram);
  }
}

// The settings, the data and their tokenizer, the model and its optimizer (from the checkpoint
// with --resume), the loaders, the metrics file. Errors here are bad options (Note [exit
// statuses]).
std::unique_ptr<Run> set_up(const Args& args, const Overrides& overrides) {
  auto r = std::make_unique<Run>();
  r->args = args;
  if (args.zero != 0 && !args.ddp)
    throw st::Error("--zero " + std::to_string(args.zero) + " needs --ddp");
  if (args.ddp) r->pg = st::dist::ProcessGroup::init();
  r->rank = r->pg ? r->pg->rank() : 0;
  r->world = r->pg ? r->pg->size() : 1;
  r->main_rank = r->rank == 0;
  r->dev = resolve_device(args.device, r->pg);
  const std::optional<CheckpointInfo> info = configure(*r, overrides);
  const RunConfig& cfg = r->cfg;

  st::manual_seed(cfg.seed);
  if (are_shards(r->data)) {
    require(args.resume.empty() ? !overrides.has("--tokenizer") && !overrides.has("--vocab") : true,
            "--data: shards carry their tokenizer (a tokenizer.json beside them, else bytes); "
            "drop --tokenizer and --vocab");
    require(args.write_shards.empty(), "--write-shards: the data are shards already");
    load_shards(r->tokens, r->data);
    r->cfg.tokenizer = r->tokens.tokenizer.num_merges() > 0 ? "bpe" : "bytes";
    r->cfg.vocab = r->tokens.tokenizer.vocab_size();
  } else {
    std::optional<st::data::BpeTokenizer> given;
    if (info) given = checkpoint_tokenizer(*info, args.resume);
    load_text(r->tokens, r->data, cfg, given);
    if (cfg.tokenizer == "bytes") r->cfg.vocab = 256;
    r->base = st::data::byte_baselines(*r->tokens.corpus);
  }
  if (info && metadata_at(info->meta, "data.hash", args.resume) != r->tokens.hash) {
    throw st::Error("--resume: the data (" + join(r->data, ", ") +
                    ") are not those the checkpoint was trained on (their bytes changed)");
  }
  r->bytes_per_token = static_cast<double>(r->tokens.val_bytes) /
                       static_cast<double>(std::max<int64_t>(1, total_tokens(r->tokens.val)));
  if (!args.write_shards.empty()) return r;  // nothing else is needed

  if (args.max_val_loss == "unigram" || args.max_val_loss == "bigram") {
    require(r->base.has_value(), "--max-val-loss " + args.max_val_loss +
                                     ": the byte baselines need text data, not shards");
    r->max_val_loss = args.max_val_loss == "unigram" ? r->base->unigram : r->base->bigram;
  } else if (!args.max_val_loss.empty()) {
    r->max_val_loss = std::stod(args.max_val_loss);  // checked by the flag's validator
  }

  const int64_t num_params = build_model(*r);
  r->amp = amp_dtype(args.amp, r->dev);
  r->scaler = amp_scaler(r->amp, r->pg);
  check_cuda_graph(args.cuda_graph, r->dev, r->amp);
  check_export_onnx(args.export_onnx);
  if (args.cuda_graph && cfg.dropout > 0) {
    throw st::Error(
        format("--cuda-graph needs --dropout 0 (dropout %g would replay one mask at every step)",
               cfg.dropout));
  }
  if (args.cuda_graph && r->pg) throw st::Error("--cuda-graph does not combine with --ddp yet");
  if (!args.resume.empty()) {
    r->start = load_checkpoint(*r, args.resume);
    if (r->main_rank) {
      std::printf("resumed from %s at step %lld\n", args.resume.c_str(),
                  static_cast<long long>(r->start));
    }
  }
  if (args.stop_at > 0 && args.stop_at <= r->start) {
    throw st::Error("--stop-at " + ll(args.stop_at) + ": the checkpoint is already at step " +
                    ll(r->start));
  }
  r->stop = args.stop_at > 0 ? args.stop_at : cfg.steps;
  // Built after loading: it broadcasts rank 0's parameters, and from then on averages gradients.
  // (With --zero it was built with the optimizer.)
  if (r->pg && !r->ddp) {
    r->ddp = std::make_unique<st::dist::DistributedDataParallel>(r->model.module, r->pg);
  }

  // Training windows: one fresh random window per example over the whole run (Note [text
  // windows]); step s reads examples [s N, (s + 1) N) for N windows per step, rank r the r-th
  // run of accum x batch_size of them. Validation: the same eval_batches x batch_size windows at
  // every evaluation.
  const int64_t B = cfg.batch_size, rank_windows = B * r->accum,
                step_windows = rank_windows * r->world;
  r->train_windows = std::make_shared<st::data::TokenWindows>(
      r->tokens.train, st::data::TokenWindowsOptions{.context = cfg.context,
                                                     .windows = cfg.steps * step_windows,
                                                     .seed = cfg.seed,
                                                     .split = 0});
  r->val_windows = std::make_shared<st::data::TokenWindows>(
      r->tokens.val,
      st::data::TokenWindowsOptions{
          .context = cfg.context, .windows = cfg.eval_batches * B, .seed = cfg.seed, .split = 1});
  r->train_loader = std::make_unique<st::data::DataLoader>(
      r->train_windows, st::data::DataLoaderOptions{
                            .batch_size = rank_windows,
                            .device = r->dev,
                            .sampler = [start = r->start, stop = r->stop, rank_windows,
                                        step_windows, rank = r->rank](int64_t) {
                              std::vector<int64_t> order;
                              order.reserve(static_cast<size_t>((stop - start) * rank_windows));
                              for (int64_t s = start; s < stop; ++s) {
                                for (int64_t i = 0; i < rank_windows; ++i) {
                                  order.push_back(s * step_windows + rank * rank_windows + i);
                                }
                              }
                              return order;
                            }});
  r->val_loader = std::make_unique<st::data::DataLoader>(
      r->val_windows, st::data::DataLoaderOptions{.batch_size = B, .device = r->dev});

  r->flops_per_token = flops_per_token(r->model, cfg);
  r->peak = peak_flops(r->dev, r->amp, r->peak_what);
  r->save = args.save.empty() ? (fs::path(args.out) / "lm.safetensors").string() : args.save;
  if (r->main_rank) {
    print_summary(*r, num_params);
    make_out_folder(args.out);
    r->metrics = std::make_unique<MetricsCsv>(fs::path(args.out) / "metrics.csv", r->start);
    r->tb.open(args.tensorboard, args.log_every, r->start);
    r->profile.open(args.profile, args.profile_schedule, args.tensorboard);
  }
  return r;
}

// One optimizer step on the windows (x, y) of this rank, accum micro-batches of batch_size: each
// forward under autocast, its loss / accum backward through the loss scaler (with --ddp the
// gradients are all-reduced after the last micro-batch only: no_sync before), then the true
// gradients clipped on the device (no host read, so the step can be captured) and the optimizer's
// step. The eager path and the captured graph both run it. Returns the step's mean loss.
st::Tensor train_step(Run& r, const st::Tensor& x, const st::Tensor& y) {
  r.opt->zero_grad();
  const int64_t B = r.cfg.batch_size;
  st::Tensor total;
  for (int64_t m = 0; m < r.accum; ++m) {
    const st::Tensor xm = x.narrow(0, m * B, B), ym = y.narrow(0, m * B, B);
    st::Tensor loss;
    {
      const AmpScope scope(r.amp, r.dev);
      const st::Tensor logits = r.ddp ? r.ddp->forward(xm) : r.model.module->forward(xm);
      loss = st::cross_entropy(logits.reshape({-1, r.model.vocab}), ym.reshape({-1}));
    }
    const st::Tensor scaled = r.scaler.scale(loss * (1.0 / static_cast<double>(r.accum)));
    if (r.ddp && m + 1 < r.accum) {
      auto no_sync = r.ddp->no_sync();
      scaled.backward();
    } else {
      scaled.backward();
    }
    const st::Tensor detached = loss.detach();
    total = m == 0 ? detached : total + detached;
  }
  if (r.cfg.grad_clip > 0) {
    r.scaler.unscale_(*r.opt);
    if (r.zero) {
      r.zero->clip_grad_norm_(r.cfg.grad_clip);  // over every rank's shard
    } else {
      st::optim::clip_grad_norm_on_device_(r.params, r.cfg.grad_clip);
    }
  }
  r.scaler.step(*r.opt);
  r.scaler.update();
  return total * (1.0 / static_cast<double>(r.accum));
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

// Tokens per second of all ranks over an interval, and its model FLOPs utilization in percent
// (NaN where the peak is unknown).
std::pair<double, double> rates(const Run& r, int64_t steps, double secs) {
  const double tokens =
      static_cast<double>(steps * r.cfg.batch_size * r.cfg.context * r.accum * r.world);
  const double per_s = tokens / secs;
  const double mfu =
      r.peak > 0 ? 100.0 * per_s * r.flops_per_token / (r.peak * static_cast<double>(r.world))
                 : std::nan("");
  return {per_s, mfu};
}

// At an evaluation step: the training loss over all ranks; on rank 0, the validation loss, a line
// of output and of metrics.csv, the checkpoint. Every rank then begins a new interval. Returns the
// validation loss per byte.
double evaluate_interval(Run& r, Interval& in, Progress& progress, int64_t step, double lr) {
  in.train_secs += seconds_since(in.t0);
  double val_per_byte = std::nan("");
  if (r.pg) {  // the training loss of all ranks' windows
    r.pg->all_reduce(in.loss_sum, st::dist::ReduceOp::Sum);
    in.loss_sum.mul_(1.0 / static_cast<double>(r.world));
  }
  if (r.main_rank) {
    const double train_loss = in.loss_sum.item<double>() / static_cast<double>(in.steps);
    const auto [tokens_per_s, mfu] = rates(r, in.steps, in.train_secs);
    double val_loss = 0;
    {
      const st::profiler::Range eval_range("evaluate");
      val_loss = evaluate(r.model, *r.val_loader, r.amp);
    }
    val_per_byte = val_loss / r.bytes_per_token;
    progress.clear();
    std::printf(
        "step %lld: train %.4f  val %.4f nats/token, %.4f nats/byte%s  lr %.2e  %.0f tokens/s"
        "  MFU %.1f%%  %.0fs\n",
        static_cast<long long>(step), train_loss, val_loss, val_per_byte,
        r.base ? format(" (bigram %+.4f)", val_per_byte - r.base->bigram).c_str() : "", lr,
        tokens_per_s, mfu, progress.elapsed());
    r.metrics->add(format("%lld,%.6f,%.6f,%.6f,%.6g,%.0f,%.2f", static_cast<long long>(step),
                          train_loss, val_loss, val_per_byte, lr, tokens_per_s, mfu) +
                   gpu_csv_fields(gpu_reading(r.dev)));
    if (r.tb) {
      r.tb->add_scalar("eval/train_loss", train_loss, step);
      r.tb->add_scalar("eval/val_loss_per_token", val_loss, step);
      r.tb->add_scalar("eval/val_loss_per_byte", val_per_byte, step);
      if (std::isfinite(mfu)) r.tb->add_scalar("eval/mfu_percent", mfu, step);
      r.tb.parameters(*r.model.module, step);
    }
  }
  if (r.main_rank || r.zero) save_checkpoint(r, step);
  in.loss_sum.zero_();
  in.steps = 0;
  in.train_secs = 0;
  in.t0 = Clock::now();
  return val_per_byte;
}

// The steps from the checkpoint's (or 0) to --stop-at (or --steps), evaluated every
// eval_interval steps and at the last. Returns the last validation loss per byte (NaN if no step
// was left, and on ranks other than 0).
double train_steps(Run& r) {
  const RunConfig& cfg = r.cfg;
  TrainStep<st::Tensor> train_step_of(
      [&r](const st::Tensor& x, const st::Tensor& y) { return train_step(r, x, y); },
      r.args.cuda_graph, cfg.batch_size * r.accum);
  finish_setup();
  double val_loss = std::nan("");
  Progress progress("step", cfg.steps, r.start, std::max<int64_t>(cfg.eval_interval / 2, 1));
  Interval in(r.dev);
  int64_t step = r.start;
  for (const st::data::Batch& b : *r.train_loader) {
    std::optional<st::profiler::Range> step_range;
    step_range.emplace("train step");
    ++step;
    const double lr = r.sched->get_last_lr()[0];
    const st::Tensor loss = train_step_of(b);
    r.sched->step();     // on the host: the capturable optimizer's device lr follows it
    step_range.reset();  // the step's range ends in the step the profiler's schedule counts
    r.profile.step();
    {
      st::NoGradGuard no_grad;
      in.loss_sum.add_(loss.detach().to(st::DType::f64));
    }
    ++in.steps;
    if (r.main_rank && r.tb.due(step)) {
      r.tb.step_figures(step, loss.item<double>(), std::nullopt, lr,
                        static_cast<double>(cfg.batch_size * cfg.context * r.accum * r.world),
                        "train/tokens_per_second", r.dev);
    }
    const bool eval_now = step % cfg.eval_interval == 0 || step == r.stop;
    if (r.main_rank && (step % 10 == 0 || eval_now)) {
      // Reading the loss waits for the device, so it happens every few steps only.
      const auto [tokens_per_s, mfu] = rates(r, in.steps, in.seconds());
      progress.update(step, format("loss %.4f  lr %.2e  %.0f tokens/s  MFU %.1f%%",
                                   in.loss_sum.item<double>() / static_cast<double>(in.steps), lr,
                                   tokens_per_s, mfu) +
                                gpu_progress(gpu_reading(r.dev)));
    }
    if (eval_now) val_loss = evaluate_interval(r, in, progress, step, lr);
    // Note [preemption]: a signalled run keeps this step and stops, checkpointed.
    if (step < r.stop) r.stopped_by = stop_requested(r.pg.get());
    if (r.stopped_by != 0) {
      if (r.main_rank || r.zero) save_checkpoint(r, step);
      if (r.main_rank) {
        progress.clear();
        std::printf(
            "stopped by signal %d after step %lld; checkpoint: %s (continue with --resume)\n",
            r.stopped_by, static_cast<long long>(step), r.save.c_str());
        std::fflush(stdout);
      }
      if (r.pg) r.pg->barrier();  // every rank stays until the checkpoint is written
      break;
    }
  }
  progress.done();
  r.profile.finish();
  return val_loss;
}

// --tensorboard at the end: a sample of 200 tokens from the start of a new fortune (temperature
// 0.8, top 40), the run's settings and its final validation loss.
void log_final(Run& r, double val_per_byte) {
  const int64_t step = r.stop;
  const st::data::BpeTokenizer& tok = r.tokens.tokenizer;
  const std::vector<int32_t> prompt = tok.encode("%\n");
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  st::Generator gen(r.cfg.seed);
  r.model.module->eval();
  const int64_t n = std::min<int64_t>(200, r.cfg.context - static_cast<int64_t>(ids.size()));
  const std::vector<int64_t> all =
      r.model
          .generate(st::from_vector<int64_t>(ids).to(r.dev), n,
                    {.temperature = 0.8, .top_k = 40, .generator = &gen})
          .cpu()
          .to_vector<int64_t>();
  const std::vector<int32_t> fresh(all.begin() + static_cast<std::ptrdiff_t>(ids.size()),
                                   all.end());
  // A code block keeps the sample's line breaks and characters as they are in the Markdown view.
  r.tb->add_text("sample", "```\n" + tok.decode(fresh) + "\n```", step);
  std::map<std::string, st::HParamValue> hparams;
  for (const Setting& s : settings()) {
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(r.cfg.*member)>;
          if constexpr (std::is_same_v<T, std::string>) {
            hparams[s.key] = r.cfg.*member;
          } else {
            hparams[s.key] = static_cast<double>(r.cfg.*member);
          }
        },
        s.member);
  }
  hparams["amp"] = r.args.amp;
  hparams["ranks"] = static_cast<double>(r.world);
  r.tb->add_hparams(hparams,
                    {{"hparam/val_loss_per_byte", val_per_byte},
                     {"hparam/val_loss_per_token", val_per_byte * r.bytes_per_token}},
                    "hparams");
}

// The final validation loss, the exports and the plot; status 3 above --max-val-loss.
int finish(Run& r, double val_per_byte) {
  if (!r.main_rank) return 0;
  if (std::isnan(val_per_byte)) {  // nothing was left to train
    val_per_byte = evaluate(r.model, *r.val_loader, r.amp) / r.bytes_per_token;
  }
  std::printf("final validation loss %.4f nats/byte (%.4f nats/token)", val_per_byte,
              val_per_byte * r.bytes_per_token);
  if (r.base) {
    std::printf(", %+.4f against the bigram baseline, %+.4f against the unigram",
                val_per_byte - r.base->bigram, val_per_byte - r.base->unigram);
  }
  std::printf("\nmetrics: %s\ncheckpoint: %s\n", r.metrics->path().string().c_str(),
              r.save.c_str());
  export_weights(r.args.export_weights, *r.model.module, r.cfg.model);
  // Any batch and any length up to the context: the example's (1, context) dims are symbolic.
  export_onnx(r.args.export_onnx, *r.model.module,
              st::zeros({1, r.cfg.context}, {.dtype = st::DType::i64, .device = r.dev}), true);
  std::vector<std::pair<std::string, double>> levels;
  if (r.base) levels = {{"unigram", r.base->unigram}, {"bigram", r.base->bigram}};
  write_plot(
      r.metrics->path(), fs::path(r.args.out) / "curves.png",
      {{.title = "validation loss (nats/byte)", .xlabel = "step", .columns = {4}, .levels = levels},
       {.title = "loss (nats/token)", .xlabel = "step", .columns = {2, 3}},
       {.title = "learning rate", .xlabel = "step", .columns = {5}}});
  if (r.tb) {
    log_final(r, val_per_byte);
    r.tb.close();
  }
  if (r.max_val_loss && !(val_per_byte <= *r.max_val_loss)) {
    std::fprintf(stderr, "validation loss %.4f nats/byte is above --max-val-loss %s (%.4f)\n",
                 val_per_byte, r.args.max_val_loss.c_str(), *r.max_val_loss);
    return 3;
  }
  return 0;
}

int train(const Args& args, const Overrides& overrides) {
  const std::unique_ptr<Run> r = set_up(args, overrides);
  if (!args.write_shards.empty()) {
    write_shards(r->tokens, args.write_shards);
    return 0;
  }
  install_stop_handlers();
  const double val_loss = train_steps(*r);
  if (r->stopped_by != 0) return kPreempted;
  return finish(*r, val_loss);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  Overrides overrides;
  const RunConfig cpu = cpu_defaults(), gpu = gpu_defaults();
  CLI::Option* gen_opt = nullptr;
  return example_main(
      argc, argv, "lm",
      "Train a GPT or a Llama language model on bytes or BPE tokens, or sample from its "
      "checkpoint",
      [&](CLI::App& app) {
        for (const Setting& s : settings()) {
          const std::string a = to_text(cpu, s.member, 6), b = to_text(gpu, s.member, 6);
          const std::string help = a == b ? format("%s (default: %s)", s.help, a.c_str())
                                          : format("%s (default: %s on the CPU, %s on a GPU)",
                                                   s.help, a.c_str(), b.c_str());
          CLI::Option* opt = std::visit(
              [&](auto m) { return app.add_option(s.flag, overrides.given.*m, help); }, s.member);
          overrides.flags.emplace_back(&s, opt);
        }
        app.add_option("--device", args.device, "auto (CUDA when available), cpu or cuda")
            ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
        add_amp_options(app, args.amp, args.cuda_graph, "; needs --dropout 0");
        app.add_flag("--ddp", args.ddp,
                     "data parallel over the ranks of mpirun/srun (NCCL on GPUs, MPI on CPUs)");
        app.add_option("--zero", args.zero,
                       "with --ddp, ZeRO stage 1 (the optimizer state sharded over the ranks) or "
                       "2 (the gradients too); 0: replicated")
            ->check(CLI::IsMember({0, 1, 2}));
        app.add_option("--data", args.data,
                       "text files or folders to train on, or token shards (*.bin files, or a "
                       "folder of them; default: " +
                           st::data::default_text_corpus() + ")")
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
        app.add_option("--write-shards", args.write_shards,
                       "tokenize the text into llm.c shards (train_*.bin, val_*.bin) and "
                       "tokenizer.json in this folder, then exit");
        app.add_option("--out", args.out, "folder for metrics.csv, curves.png and the checkpoint");
        app.add_option("--save", args.save, "checkpoint path (default: <out>/lm.safetensors)");
        add_output_options(app, args.profile, args.profile_schedule, args.export_weights,
                           args.export_onnx, "any batch and any length up to the context");
        add_tensorboard_options(app, args.tensorboard, args.log_every);
        app.add_option("--resume", args.resume,
                       "checkpoint to continue from, with its settings, data and tokenizer");
        app.add_option("--stop-at", args.stop_at,
                       "stop after this step (checkpointed), to continue later with --resume");
        app.add_option(
               "--max-val-loss", args.max_val_loss,
               "exit with status 3 if the final validation loss is above this: nats/byte, or "
               "unigram or bigram for that baseline")
            ->check(CLI::Number | CLI::IsMember({"unigram", "bigram"}));
        gen_opt = app.add_option("--generate", args.generate,
                                 "sample this many tokens from a checkpoint (with the KV cache)");
        app.add_option("--checkpoint", args.checkpoint,
                       "checkpoint to sample from (default: <out>/lm.safetensors)");
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
        app.add_option("--top-k", args.top_k, "sample among the k most likely tokens (0: all)");
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

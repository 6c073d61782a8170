// The configuration of an lm run (config.h): the device defaults, the settings table, the command
// line, the checks of the flags, and reading a checkpoint's settings back.
#include "lm/config.h"

#include <sinter/data.h>
#include <sinter/io.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "training.h"

namespace example::lm {

namespace {

constexpr const char* kFormat = "sinter-lm-1";

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

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream s(text);
  for (std::string line; std::getline(s, line);) out.push_back(line);
  return out;
}

}  // namespace

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
          .optimizer = "adamw",
          .fp8 = "off",
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
      {"--lr", "lr", &RunConfig::lr, "peak learning rate"},
      {"--min-lr", "min_lr", &RunConfig::min_lr, "learning rate the cosine ends at"},
      {"--warmup", "warmup", &RunConfig::warmup,
       "steps of linear warm-up from 0; without the flag, at most --steps / 10"},
      {"--weight-decay", "weight_decay", &RunConfig::weight_decay,
       "decoupled weight decay, on the weight matrices only"},
      {"--grad-clip", "grad_clip", &RunConfig::grad_clip, "gradient norm clipped to (0: off)"},
      {"--optimizer", "optimizer", &RunConfig::optimizer,
       "adamw, or muon: Muon on the hidden layers' weight matrices (scaled so that --lr and "
       "--weight-decay carry over), AdamW on the embeddings, head, norms and biases"},
      {"--fp8", "fp8", &RunConfig::fp8,
       "off, or the hidden Linear layers' GEMMs in FP8 with current, delayed or block scaling "
       "(the first and last layers stay out; the CPU emulates FP8 exactly)"},
      {"--eval-interval", "eval_interval", &RunConfig::eval_interval,
       "steps between evaluations (and checkpoints)"},
      {"--eval-batches", "eval_batches", &RunConfig::eval_batches,
       "validation batches per evaluation (the same windows each time)"},
      {"--seed", "seed", &RunConfig::seed,
       "seed of initialization, windows and dropout (and of sampling with --generate)"},
  };
  return all;
}

std::string to_text(const RunConfig& c, const Member& m, int precision) {
  return std::visit(
      [&](auto member) {
        std::ostringstream s;
        s.precision(precision);
        s << c.*member;
        return s.str();
      },
      m);
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
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
  require(c.optimizer == "adamw" || c.optimizer == "muon",
          "--optimizer must be adamw or muon, got " + c.optimizer);
  require(c.fp8 == "off" || c.fp8 == "current" || c.fp8 == "delayed" || c.fp8 == "block",
          "--fp8 must be off, current, delayed or block, got " + c.fp8);
}

bool Overrides::has(const char* flag) const {
  for (const auto& [s, opt] : flags) {
    if (std::string(s->flag) == flag) return opt->count() > 0;
  }
  return false;
}

void Overrides::apply(RunConfig& c) const {
  for (const auto& [s, opt] : flags) {
    if (opt->count() > 0) std::visit([&](auto m) { c.*m = given.*m; }, s->member);
  }
}

std::vector<std::string> Overrides::conflicts(const RunConfig& c) const {
  std::vector<std::string> out;
  for (const auto& [s, opt] : flags) {
    const bool differs = std::visit([&](auto m) { return c.*m != given.*m; }, s->member);
    if (opt->count() > 0 && differs) {
      out.push_back(format("%s (checkpoint: %s)", s->flag, to_text(c, s->member, 6).c_str()));
    }
  }
  return out;
}

// The settings' flags first, each with its defaults on both devices in its help (the value CLI11
// would show, `given`'s, is not one).
CLI::Option* add_options(CLI::App& app, Args& args, Overrides& overrides) {
  const RunConfig cpu = cpu_defaults(), gpu = gpu_defaults();
  for (const Setting& s : settings()) {
    const std::string a = to_text(cpu, s.member, 6), b = to_text(gpu, s.member, 6);
    const std::string help =
        a == b ? format("%s (default: %s)", s.help, a.c_str())
               : format("%s (default: %s on the CPU, %s on a GPU)", s.help, a.c_str(), b.c_str());
    CLI::Option* opt = std::visit(
        [&](auto m) { return app.add_option(s.flag, overrides.given.*m, help); }, s.member);
    opt->default_str("");
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
  app.add_flag("--fsdp", args.fsdp,
               "fully sharded data parallel over the ranks of mpirun/srun: each rank holds 1/N of "
               "the parameters, gradients and optimizer state, each block gathered around its "
               "forward and backward (instead of --ddp)");
  app.add_option("--tp", args.tp,
                 "tensor parallelism over groups of this many consecutive ranks of mpirun/srun "
                 "(each layer split by heads, hidden units and vocabulary; the rest of the "
                 "ranks data parallel with --ddp)")
      ->check(CLI::PositiveNumber);
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
  app.add_option("--export-gguf", args.export_gguf,
                 "write the trained Llama and its tokenizer as a GGUF file for llama.cpp "
                 "(--model llama)");
  app.add_option("--gguf-type", args.gguf_type,
                 "the GGUF file's weights: f32, f16, bf16 or q8_0 (norms stay f32)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}));
  add_tensorboard_options(app, args.tensorboard, args.log_every);
  app.add_option("--resume", args.resume,
                 "checkpoint to continue from, with its settings, data and tokenizer");
  app.add_option("--init-from", args.init_from,
                 "Hugging Face folder (a LlamaForCausalLM or GPT2LMHeadModel, as --export-hf "
                 "writes) whose model and tokenizer the run starts from");
  app.add_option("--export-hf", args.export_hf,
                 "write the trained model as a Hugging Face folder (config.json, "
                 "model.safetensors, tokenizer.json, ...) for transformers and vLLM");
  app.add_option("--stop-at", args.stop_at,
                 "stop after this step (checkpointed), to continue later with --resume");
  app.add_option("--max-val-loss", args.max_val_loss,
                 "exit with status 3 if the final validation loss is above this: nats/byte, or "
                 "unigram or bigram for that baseline")
      ->check(CLI::Number | CLI::IsMember({"unigram", "bigram"}));
  CLI::Option* const generate = app.add_option(
      "--generate", args.generate, "sample this many tokens from a checkpoint (with the KV cache)");
  app.add_option("--checkpoint", args.checkpoint,
                 "checkpoint to sample from (default: <out>/lm.safetensors)");
  app.add_option("--prompt", args.prompt,
                 "text the sample continues (default: the start of a new fortune)");
  app.add_option("--temperature", args.temperature, "sampling temperature (> 0)")
      ->check(positive());
  app.add_option("--top-k", args.top_k, "sample among the k most likely tokens (0: all)");
  return generate;
}

std::string metadata_at(const st::Metadata& meta, const std::string& key, const std::string& path) {
  const auto it = meta.find(key);
  if (it == meta.end()) throw st::Error(path + ": not an lm checkpoint (no " + key + ")");
  return it->second;
}

st::Metadata checkpoint_metadata(const RunConfig& c, const std::vector<std::string>& data,
                                 const std::string& data_hash,
                                 const st::data::BpeTokenizer& tokenizer) {
  st::Metadata meta{
      {"sinter.format", kFormat}, {"config.data", join(data, "\n")}, {"data.hash", data_hash}};
  if (tokenizer.num_merges() > 0 || !tokenizer.special_tokens().empty()) {
    meta["tokenizer.json"] = tokenizer.to_json();
  }
  for (const Setting& s : settings()) meta[std::string("config.") + s.key] = to_text(c, s.member);
  return meta;
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  CheckpointInfo info;
  info.meta = st::load_metadata(path);
  // Checkpoints written before every safetensors file said "pt" keep theirs under "format".
  const std::string key = info.meta.count("sinter.format") ? "sinter.format" : "format";
  if (metadata_at(info.meta, key, path) != kFormat) {
    throw st::Error(path + ": format '" + info.meta.at(key) + "', expected '" + kFormat + "'");
  }
  for (const Setting& s : settings()) {
    const std::string key = std::string("config.") + s.key;
    // Settings added after checkpoints were first written: older ones ran with the default.
    if (key == "config.optimizer" && !info.meta.count(key)) {
      info.config.optimizer = "adamw";
      continue;
    }
    if (key == "config.fp8" && !info.meta.count(key)) {
      info.config.fp8 = "off";
      continue;
    }
    const std::string text = metadata_at(info.meta, key, path);
    if (!from_text(info.config, s.member, text)) {
      throw st::Error(path + ": bad value '" + text + "' of config." + s.key);
    }
  }
  info.data = split_lines(metadata_at(info.meta, "config.data", path));
  return info;
}

st::data::BpeTokenizer checkpoint_tokenizer(const CheckpointInfo& info, const std::string& path) {
  const auto it = info.meta.find("tokenizer.json");
  return it == info.meta.end() ? st::data::BpeTokenizer()
                               : st::data::BpeTokenizer::from_json(it->second, path);
}

namespace {

// --init-from DIR: the folder's model (nn::models::from_pretrained) sets the model settings; a
// flag that gives another value is an error. The model must be one lm's settings describe (the
// run's checkpoints and --resume rebuild it from them): what they do not say (a Llama's MLP width,
// rope base, epsilon and untied head; a GPT's tied head) must be lm's.
void init_from_folder(Configured& c, const Args& args, const Overrides& overrides) {
  const std::string& dir = args.init_from;
  require(args.resume.empty(),
          "--init-from starts a new run from a model and --resume continues a run: give one");
  auto p = std::make_shared<st::nn::models::Pretrained>();
  try {
    *p = st::nn::models::from_pretrained(dir);
  } catch (const st::Error& e) {
    throw st::Error(std::string("--init-from: ") + e.what());
  }
  RunConfig folder = c.config;
  int64_t model_vocab = 0;
  if (p->llama) {
    const st::nn::models::LlamaConfig& l = p->llama->config;
    const st::nn::models::LlamaConfig lm{.n_embd = l.n_embd};
    const int64_t width = st::nn::models::mlp_width(l), lm_width = st::nn::models::mlp_width(lm);
    require(width == lm_width, "--init-from " + dir + ": intermediate_size " + ll(width) +
                                   " is not lm's MLP width for hidden_size " + ll(l.n_embd) + " (" +
                                   ll(lm_width) + ")");
    require(l.rope_base == lm.rope_base, "--init-from " + dir + ": rope_theta " +
                                             format("%g", l.rope_base) + " is not lm's " +
                                             format("%g", lm.rope_base));
    require(l.norm_eps == lm.norm_eps, "--init-from " + dir + ": rms_norm_eps " +
                                           format("%g", l.norm_eps) + " is not lm's " +
                                           format("%g", lm.norm_eps));
    require(!l.tie_weights, "--init-from " + dir +
                                ": the Llama ties its head to the embedding; lm's Llama does not");
    folder.model = "llama";
    folder.n_layer = l.n_layer;
    folder.n_head = l.n_head;
    folder.n_kv_head = l.n_kv_head;
    folder.n_embd = l.n_embd;
    // A Llama's context is a bound on the positions, not a weight: a shorter one may be asked.
    require(!overrides.has("--context") || c.config.context <= l.context_length,
            "--init-from " + dir + ": --context " + ll(c.config.context) +
                " is longer than the folder's max_position_embeddings " + ll(l.context_length));
    folder.context = overrides.has("--context") ? c.config.context : l.context_length;
    model_vocab = l.vocab_size;
  } else {
    const st::nn::models::GPTConfig& g = p->gpt->config;
    require(g.tie_weights, "--init-from " + dir +
                               ": the GPT has its own output head; lm's GPT ties it to the "
                               "embedding (tie_word_embeddings true)");
    folder.model = "gpt";
    folder.n_layer = g.n_layer;
    folder.n_head = g.n_head;
    folder.n_embd = g.n_embd;
    folder.context = g.context_length;
    model_vocab = g.vocab_size;
  }
  if (!p->tokenizer) p->tokenizer = st::data::BpeTokenizer();
  folder.tokenizer = p->tokenizer->num_merges() > 0 ? "bpe" : "bytes";
  folder.vocab = p->tokenizer->vocab_size();
  require(model_vocab == folder.vocab,
          "--init-from " + dir + ": the model's vocabulary of " + ll(model_vocab) +
              " is not its tokenizer's " + ll(folder.vocab) +
              (fs::exists(fs::path(dir) / "tokenizer.json")
                   ? std::string()
                   : std::string(" (no tokenizer.json: the byte tokenizer)")));
  std::vector<std::string> differ;
  for (const char* flag : {"--model", "--tokenizer", "--vocab", "--layers", "--heads", "--kv-heads",
                           "--width", "--context"}) {
    if (!overrides.has(flag)) continue;
    for (const auto& [s, opt] : overrides.flags) {
      if (std::string(s->flag) != flag) continue;
      const bool same = std::visit([&](auto m) { return folder.*m == c.config.*m; }, s->member);
      if (!same) {
        differ.push_back(
            format("%s (the folder's: %s)", flag, to_text(folder, s->member, 6).c_str()));
      }
    }
  }
  if (!differ.empty()) {
    throw st::Error("--init-from " + dir +
                    ": the folder's model sets these; drop them: " + join(differ, ", "));
  }
  c.config = folder;
  c.init = std::move(p);
}

}  // namespace

Configured configure(const Args& args, const Overrides& overrides, bool cuda, int world) {
  Configured c;
  c.config = cuda ? gpu_defaults() : cpu_defaults();
  // Absolute paths, so that the checkpoint's data are found from any folder.
  std::vector<std::string> given_data;
  for (const std::string& p : args.data) {
    given_data.push_back(fs::absolute(p).lexically_normal().string());
  }
  c.data =
      args.data.empty() ? std::vector<std::string>{st::data::default_text_corpus()} : given_data;
  if (!args.resume.empty()) {
    c.resumed = read_checkpoint_info(args.resume);
    const CheckpointInfo& info = *c.resumed;
    const std::vector<std::string> conflicts = overrides.conflicts(info.config);
    if (!conflicts.empty()) {
      throw st::Error(
          "--resume continues the run as the checkpoint configured it; these flags "
          "differ from it: " +
          join(conflicts, ", "));
    }
    if (!given_data.empty() && given_data != info.data) {
      throw st::Error("--resume: --data differs from the checkpoint's (" + join(info.data, ", ") +
                      ")");
    }
    c.config = info.config;
    c.data = info.data;
  } else {
    overrides.apply(c.config);
    // A short run keeps most of its steps out of the warm-up: without --warmup it is the device's
    // default or a tenth of the steps, whichever is fewer (`lm --steps 20` warms up for 2).
    if (!overrides.has("--warmup")) {
      c.config.warmup = std::min(c.config.warmup, c.config.steps / 10);
    }
  }
  if (!args.init_from.empty()) init_from_folder(c, args, overrides);
  check_config(c.config);
  if (args.stop_at < 0 || args.stop_at > c.config.steps) {
    throw st::Error("--stop-at " + ll(args.stop_at) + " is not in [1, --steps " +
                    ll(c.config.steps) + "]");
  }
  // Tokens per step: --batch-tokens, a whole number of micro-batches on every rank.
  const int64_t micro = c.config.batch_size * c.config.context * world;
  if (c.config.batch_tokens > 0) {
    require(c.config.batch_tokens % micro == 0,
            "--batch-tokens " + ll(c.config.batch_tokens) +
                " is not a multiple of --batch-size x --context x ranks = " + ll(micro));
    c.accum = c.config.batch_tokens / micro;
  }
  return c;
}

}  // namespace example::lm

// The configuration of an lm run: its settings with the device defaults, the table that gives
// each its flag, checkpoint key and help, the command line, the checks of the flags, and what a
// checkpoint says of the run that wrote it.
#pragma once

#include <sinter/data.h>
#include <sinter/io.h>
#include <sinter/nn/pretrained.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "training.h"

namespace example::lm {

// Everything that decides what a training run computes; a checkpoint stores it, so that --resume
// and --generate need no other flags.
struct RunConfig {
  std::string model, tokenizer;
  int64_t vocab = 0;  // BPE tokens in all (the byte tokenizer has 256)
  int64_t n_layer = 0, n_head = 0, n_kv_head = 0, n_embd = 0, context = 0;
  double dropout = 0;
  int64_t batch_size = 0, batch_tokens = 0, steps = 0, warmup = 0;
  double lr = 0, min_lr = 0, weight_decay = 0, grad_clip = 0;
  std::string optimizer;  // adamw or muon (Note [lm muon])
  std::string fp8;        // off, current, delayed or block (Note [lm fp8])
  int64_t eval_interval = 0, eval_batches = 0;
  uint64_t seed = 0;
};

RunConfig cpu_defaults();
RunConfig gpu_defaults();

using Member = std::variant<std::string RunConfig::*, int64_t RunConfig::*, double RunConfig::*,
                            uint64_t RunConfig::*>;

// A run setting: its flag, its key in checkpoint metadata ("config.<key>") and its help text.
struct Setting {
  const char* flag;
  const char* key;
  Member member;
  const char* help;
};

const std::vector<Setting>& settings();

// 17 significant digits read back to the same double; help texts want fewer.
std::string to_text(const RunConfig& c, const Member& m, int precision = 17);

std::string join(const std::vector<std::string>& parts, const std::string& sep);

// Throws `what` as an Error unless `ok`: a bad option or file during the set-up (Note [exit
// statuses]).
void require(bool ok, const std::string& what);

std::string ll(int64_t v);

// Each setting in its range and fitting the others; the first that does not is an Error naming
// its flag.
void check_config(const RunConfig& c);

// The options that are not run settings: what to do with the run, where its files go.
struct Args {
  std::string device = "auto";
  std::vector<std::string> data;
  std::string out = "lm_out";
  std::string save, resume, checkpoint, export_weights, export_onnx, profile, write_shards;
  std::string export_hf, init_from;  // Hugging Face folders, out and in
  std::string export_gguf;
  std::string gguf_type = "f16";  // --gguf-type: f32, f16, bf16 or q8_0
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
  int zero = 0;       // ZeRO stage with --ddp (0: the optimizer replicated on every rank)
  bool fsdp = false;  // fully sharded data parallel over the ranks
  int tp = 1;         // tensor-parallel group size
  std::string tensorboard;
  int64_t log_every = 10;
};

// The run settings given on the command line, applied over the device's defaults (or, with
// --resume, checked against the checkpoint's). Each flag binds to the field of its own RunConfig
// in `given`; CLI11 says after parsing which flags were given.
struct Overrides {
  std::vector<std::pair<const Setting*, CLI::Option*>> flags;
  RunConfig given;

  bool has(const char* flag) const;
  void apply(RunConfig& c) const;
  // The flags given with a value other than c's, with c's value.
  std::vector<std::string> conflicts(const RunConfig& c) const;
};

// Declares every option of lm on `app`: the settings' flags into `overrides`, the others into
// `args`. Returns --generate's option, whose count says whether the command samples.
CLI::Option* add_options(CLI::App& app, Args& args, Overrides& overrides);

std::string metadata_at(const st::Metadata& meta, const std::string& key, const std::string& path);

// The run settings, data paths and tokenizer a checkpoint was written with.
struct CheckpointInfo {
  RunConfig config;
  std::vector<std::string> data;
  st::Metadata meta;
};

// What a checkpoint says of its run, which read_checkpoint_info reads back: the format, the
// settings, the data paths and their hash, and the tokenizer (none for the byte tokenizer).
st::Metadata checkpoint_metadata(const RunConfig& c, const std::vector<std::string>& data,
                                 const std::string& data_hash,
                                 const st::data::BpeTokenizer& tokenizer);

CheckpointInfo read_checkpoint_info(const std::string& path);

// The checkpoint's tokenizer: its tokenizer.json, or the byte tokenizer.
st::data::BpeTokenizer checkpoint_tokenizer(const CheckpointInfo& info, const std::string& path);

// What a run is configured with: its settings, its data and the micro-batches each rank
// accumulates per step; with --resume, the checkpoint's info too.
struct Configured {
  RunConfig config;
  std::vector<std::string> data;  // absolute paths
  int64_t accum = 1;
  std::optional<CheckpointInfo> resumed;
  // --init-from: the folder's model, whose weights the run starts from, and its tokenizer (the
  // byte tokenizer where the folder has no tokenizer.json).
  std::shared_ptr<st::nn::models::Pretrained> init;
};

// The run's settings and data paths: the defaults of the device (a GPU when `cuda`) with the
// flags over them, or, with --resume, the checkpoint's (flags that differ from them are an
// error); with --init-from, the model settings are the folder's; --batch-tokens is checked
// against the `world` ranks.
Configured configure(const Args& args, const Overrides& overrides, bool cuda, int world);

}  // namespace example::lm

// The state of an lm training run (Run) and its checkpoints: what examples/lm.cpp's steps share.
#pragma once

#include <sinter/data.h>
#include <sinter/dist.h>
#include <sinter/fsdp.h>
#include <sinter/optim.h>
#include <sinter/sinter.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lm/config.h"
#include "lm/data.h"
#include "lm/model.h"
#include "training.h"

namespace example::lm {

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

// Everything a training run holds from its set-up to its finish. With --ddp (or --fsdp) every rank
// runs it on its own windows of each step; rank 0 alone prints and writes files (with --fsdp every
// rank takes part in the evaluations and checkpoints, which gather the model).
struct Run {
  Args args;
  std::shared_ptr<st::dist::ProcessGroup> pg;
  int rank = 0, world = 1;
  // The ranks that read different windows (world / tp of them) and this one's place among them;
  // under --tp, its tensor-parallel group (whose ranks read the same windows).
  int data_rank = 0, data_ranks = 1;
  std::shared_ptr<st::dist::ProcessGroup> tp_group, dp_group;
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
  std::shared_ptr<st::nn::models::Pretrained> init;  // --init-from's model, until it is copied
  std::vector<st::Tensor> params;
  std::unique_ptr<st::optim::Optimizer> opt;  // --optimizer's, or --zero's ZeroRedundancyOptimizer
  st::dist::ZeroRedundancyOptimizer* zero = nullptr;  // opt, with --zero
  std::unique_ptr<st::optim::CosineAnnealingLR> sched;
  std::unique_ptr<st::dist::DistributedDataParallel> ddp;
  std::unique_ptr<st::dist::FullyShardedDataParallel> fsdp;  // --fsdp
  std::optional<st::DType> amp;
  std::optional<st::fp8::Recipe> fp8;  // --fp8 (Note [lm fp8])
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

// AdamW over the matrices (with weight decay, as GPT-2 and nanoGPT: decaying biases and norm
// gains only pulls them off their working values) and the rest (without).
std::unique_ptr<st::optim::AdamW> adamw(const Run& r, const std::vector<st::Tensor>& matrices,
                                        const std::vector<st::Tensor>& rest);
// --optimizer's over r.params: AdamW in the two groups above, or Muon (Note [lm muon] in
// examples/lm/optimizer.cpp); an Error where Muon meets a layout it does not take.
std::unique_ptr<st::optim::Optimizer> make_optimizer(const Run& r);
// The refusal make_optimizer makes, for the paths that build their optimizer themselves.
void check_optimizer(const Run& r);
// The names of the parameters in --optimizer's groups (Note [lm muon]): Muon's matrices (none
// under adamw) and the other matrices (decayed); the rest is neither. Of r.model, before FSDP
// shards it.
struct ParamRoles {
  std::set<std::string> muon, decay;
};
ParamRoles param_roles(const Run& r);
// --optimizer's over r.fsdp's shards, each in the group of its parameter's role.
std::unique_ptr<st::optim::Optimizer> fsdp_optimizer(const Run& r, const ParamRoles& roles);
// --zero's ZeroRedundancyOptimizer over r.ddp with --optimizer's groups (Note [lm muon]).
std::unique_ptr<st::dist::ZeroRedundancyOptimizer> zero_optimizer(const Run& r);

// --fp8 (Note [lm fp8] in examples/lm/fp8.cpp): its recipe in r.fp8, and the model's Linear layers
// prepared for it; an Error where the run's layout does not take it. Call before the optimizer is
// made and a checkpoint loaded.
void prepare_fp8(Run& r);

// make_model of a run's config with its Linear layers prepared as that run's are under --fp8, so
// that it takes the run's state dicts (the layers' FP8 state included).
LanguageModel make_trained_model(const RunConfig& c, int64_t vocab);

// While alive, under --fp8 the prepared layers run in FP8 (fp8::Autocast); a no-op otherwise.
class Fp8Scope {
 public:
  explicit Fp8Scope(const std::optional<st::fp8::Recipe>& recipe) {
    if (recipe) guard_.emplace(*recipe);
  }

 private:
  std::optional<st::fp8::Autocast> guard_;
};

// Collective with --zero and --fsdp: the checkpoint of the run at `step` (Note [lm checkpoints] in
// examples/lm/checkpoint.cpp).
void save_checkpoint(const Run& r, int64_t step);
// The checkpoint's model, optimizer, scheduler, scaler and random generators; returns its step.
int64_t load_checkpoint(Run& r, const std::string& path);
// Under --tp (collective over every rank): the whole model the shards make up, on the CPU.
LanguageModel joined_model(const Run& r);

}  // namespace example::lm

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
//   mpirun -np 4 lm --fsdp                          # parameters, gradients and state sharded
//   mpirun -np 4 lm --tp 2 --ddp                    # each layer split over 2 ranks, 2 replicas
//   lm --device cuda --amp bf16 --cuda-graph --dropout 0
//   lm --model llama --export-hf hf/                 # a Hugging Face folder: transformers, vLLM
//   lm --init-from hf/ --steps 200                   # fine-tune a folder (ours or transformers')
//   lm --model llama --tokenizer bpe --export-gguf lm.gguf --gguf-type q8_0   # for llama.cpp
#include <sinter/data.h>
#include <sinter/dist.h>
#include <sinter/io.h>
#include <sinter/nn.h>
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
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "lm/config.h"
#include "lm/data.h"
#include "lm/export.h"
#include "lm/model.h"
#include "lm/run.h"
#include "training.h"

namespace example::lm {
namespace {

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
// With --fsdp and --tp every rank runs it (the layers gather from, or split over, all of them).
double evaluate(LanguageModel& model, st::data::DataLoader& loader, std::optional<st::DType> amp,
                const std::optional<st::fp8::Recipe>& fp8,
                st::dist::FullyShardedDataParallel* fsdp = nullptr) {
  st::NoGradGuard no_grad;
  model.module->eval();
  const st::Device dev = loader.options().device;
  st::Tensor sum = st::zeros({}, {.dtype = st::DType::f64, .device = dev});
  int64_t count = 0;
  for (const st::data::Batch& b : loader) {
    const AmpScope scope(amp, dev);
    const Fp8Scope fp8_scope(fp8);
    const auto loss_of = [&] { return model.loss(b.input, b.target, st::Reduction::Sum); };
    const st::Tensor loss = fsdp ? fsdp->call(loss_of) : loss_of();
    sum.add_(loss.to(st::DType::f64));
    count += b.target.numel();
  }
  model.module->train();
  return sum.item<double>() / static_cast<double>(count);
}

int generate(const Args& args, uint64_t seed, bool seed_given) {
  const std::string path =
      args.checkpoint.empty() ? (fs::path(args.out) / "lm.safetensors").string() : args.checkpoint;
  const CheckpointInfo info = read_checkpoint_info(path);
  const st::data::BpeTokenizer tokenizer = checkpoint_tokenizer(info, path);
  const st::Device dev = resolve_device(args.device, nullptr);
  LanguageModel model = make_trained_model(info.config, tokenizer.vocab_size());
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

// --fsdp: the model sharded over the ranks, each block a unit (Note [fully sharded data
// parallel]), and --optimizer's over the shards in the same groups (Note [lm muon]).
void shard_model(Run& r) {
  const ParamRoles roles = param_roles(r);
  // Each block a unit; under --tp, over the mesh's fsdp dim, the blocks of the split model.
  std::vector<std::shared_ptr<st::nn::Module>> units =
      r.model.gpt      ? r.model.gpt->blocks->children()
      : r.model.llama  ? r.model.llama->model->layers->children()
      : r.model.tp_gpt ? r.model.tp_gpt->blocks->children()
                       : r.model.tp_llama->layers->children();
  r.fsdp = std::make_unique<st::dist::FullyShardedDataParallel>(
      r.model.module, r.dp_group ? r.dp_group : r.pg, st::dist::FSDPOptions{.units = units});
  r.params = r.fsdp->parameters();
  r.opt = fsdp_optimizer(r, roles);
  r.sched = std::make_unique<st::optim::CosineAnnealingLR>(*r.opt, r.cfg.steps, r.cfg.min_lr,
                                                           r.cfg.warmup);
}

// --fsdp and --tp at the end (collective): the model gathered whole; rank 0 goes on with a plain
// copy of it for the final evaluation, the exports and the sample.
void unshard_for_finish(Run& r) {
  if (r.tp_group) {  // every rank joins the shards; rank 0 goes on with the whole model
    LanguageModel whole = joined_model(r);
    if (r.main_rank) {
      whole.module->to(r.dev);
      r.model = whole;
    }
    return;
  }
  const st::StateDict whole = r.fsdp->state_dict();
  if (!r.main_rank) return;
  LanguageModel plain = make_trained_model(r.cfg, r.tokens.tokenizer.vocab_size());
  plain.module->load_state_dict(whole);
  plain.module->to(r.dev);
  r.model = plain;
}

// What a rank holds under --fsdp after its first step, in MiB: its shards of the parameters and
// gradients, the optimizer's state, and the most bytes the step saved for backward.
void print_fsdp_memory(const Run& r, int64_t saved_peak) {
  const st::dist::FSDPMemory m = r.fsdp->memory();
  int64_t state = 0;
  for (const auto& [key, t] : r.opt->state_dict()) {
    if (t.dim() > 0) state += t.numel() * static_cast<int64_t>(st::element_size(t.dtype()));
  }
  const double mib = 1024.0 * 1024.0;
  std::printf(
      "memory per rank (fsdp %d): parameters %.2f MiB (of %.2f whole), gradients %.2f, "
      "optimizer state %.2f, activations saved for backward %.2f at most\n",
      r.data_ranks, static_cast<double>(m.shards) / mib, static_cast<double>(m.whole_total) / mib,
      static_cast<double>(m.shard_grads) / mib, static_cast<double>(state) / mib,
      static_cast<double>(saved_peak) / mib);
}

// The model on the run's device, the optimizer (Note [lm muon]) and its cosine schedule. Returns
// the number of parameters.
int64_t build_model(Run& r) {
  const RunConfig& cfg = r.cfg;
  r.model = make_model(cfg, r.tokens.tokenizer.vocab_size());
  if (r.init) {  // the same model (configure checked it), with the folder's weights
    r.model.module->load_state_dict(r.init->module->state_dict());
    r.init.reset();
  }
  r.model.module->to(r.dev);
  prepare_fp8(r);
  int64_t whole_params = 0;  // counted before a split
  for (const st::Tensor& p : r.model.module->parameters()) whole_params += p.numel();
  if (r.tp_group) {  // the same model, split: it trains as the whole one would
    r.flops_per_token = flops_per_token(r.model, cfg);
    r.model = split_model(r.model, r.tp_group);
  }
  check_optimizer(r);
  if (r.args.fsdp) {
    shard_model(r);
    return whole_params;
  }
  r.params = r.model.module->parameters();
  if (r.args.zero > 0) {
    // The optimizer's groups, sharded (Note [zero sharding]); the DDP wrapper comes first, so it
    // is made here, before a checkpoint is loaded (loading then reaches every rank alike).
    r.ddp = std::make_unique<st::dist::DistributedDataParallel>(r.model.module, r.pg);
    auto zero = zero_optimizer(r);
    r.zero = zero.get();
    r.opt = std::move(zero);
  } else {
    r.opt = make_optimizer(r);
  }
  r.sched =
      std::make_unique<st::optim::CosineAnnealingLR>(*r.opt, cfg.steps, cfg.min_lr, cfg.warmup);
  return whole_params;
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
      "%s lr %g (warm-up %lld, cosine to %g), %lld tokens per step (%d ranks x %lld "
      "micro-batches x %lld x %lld), %lld steps\n",
      cfg.optimizer == "muon" ? "Muon (AdamW beside it)" : "AdamW", cfg.lr,
      static_cast<long long>(cfg.warmup), cfg.min_lr,
      static_cast<long long>(cfg.batch_size * cfg.context * r.data_ranks * r.accum), r.data_ranks,
      static_cast<long long>(r.accum), static_cast<long long>(cfg.batch_size),
      static_cast<long long>(cfg.context), static_cast<long long>(cfg.steps));
  std::printf("%.3g FLOPs per token (Note [model flops]); MFU against the %s\n", r.flops_per_token,
              r.peak_what.c_str());
  if (r.tp_group) {
    std::printf(
        "tensor parallel: %d ranks per group (each layer split over them), %d data-parallel "
        "group(s)\n",
        r.tp_group->size(), r.data_ranks);
  }
  if (r.base) {
    std::printf("baselines on the validation text: unigram %.4f, bigram %.4f nats/byte\n",
                r.base->unigram, r.base->bigram);
  }
}

// With --ddp the process group and this process's rank in it; the device the rank trains on.
void join_ranks(Run& r) {
  const Args& args = r.args;
  if (args.zero != 0 && !args.ddp)
    throw st::Error("--zero " + std::to_string(args.zero) + " needs --ddp");
  if (args.fsdp && args.ddp) throw st::Error("--fsdp and --ddp exclude each other");
  if (args.fsdp && args.cuda_graph) throw st::Error("--cuda-graph does not combine with --fsdp");
  if (args.tp > 1 && (args.zero || args.cuda_graph)) {
    throw st::Error("--tp combines with --ddp or --fsdp (not yet with --zero or --cuda-graph)");
  }
  if (args.ddp || args.fsdp || args.tp > 1) r.pg = st::dist::ProcessGroup::init();
  r.rank = r.pg ? r.pg->rank() : 0;
  r.world = r.pg ? r.pg->size() : 1;
  r.main_rank = r.rank == 0;
  r.data_rank = r.rank;
  r.data_ranks = r.world;
  if (args.tp > 1) {
    if (r.world % args.tp != 0 || (r.world > args.tp && !args.ddp && !args.fsdp)) {
      throw st::Error(format("--tp %d: %d ranks make %d tensor-parallel groups%s", args.tp, r.world,
                             r.world / std::max(args.tp, 1),
                             r.world % args.tp ? " and a remainder" : "; add --ddp or --fsdp"));
    }
    // Per Note [device mesh], tp last: each group on consecutive ranks (one node); the groups
    // data parallel (--ddp) or fully sharded (--fsdp) over the other dim.
    const std::string across = args.fsdp ? "fsdp" : "dp";
    const st::dist::DeviceMesh mesh(r.pg, {{across, r.world / args.tp}, {"tp", args.tp}});
    r.tp_group = mesh.group_ptr("tp");
    r.data_rank = mesh.coordinate(across);
    r.data_ranks = mesh.size(across);
    r.dp_group = mesh.group_ptr(across);
    if (r.main_rank) std::printf("mesh: %s\n", mesh.str().c_str());
  }
  r.dev = resolve_device(args.device, r.pg);
}

// The tokens of the run's data, with their tokenizer (the shards', or on --resume the
// checkpoint's, or with --init-from the folder's), which must be the data `resumed` was trained
// on; the byte baselines of text.
void load_tokens(Run& r, const Overrides& overrides, const std::optional<CheckpointInfo>& resumed) {
  const Args& args = r.args;
  if (are_shards(r.data)) {
    require(args.resume.empty() ? !overrides.has("--tokenizer") && !overrides.has("--vocab") : true,
            "--data: shards carry their tokenizer (a tokenizer.json beside them, else bytes); "
            "drop --tokenizer and --vocab");
    require(args.write_shards.empty(), "--write-shards: the data are shards already");
    load_shards(r.tokens, r.data);
    require(!r.init || r.tokens.tokenizer.to_json() == r.init->tokenizer->to_json(),
            "--init-from " + args.init_from +
                ": the shards' tokenizer is not the folder's (write the shards with it)");
    r.cfg.tokenizer = r.tokens.tokenizer.num_merges() > 0 ? "bpe" : "bytes";
    r.cfg.vocab = r.tokens.tokenizer.vocab_size();
  } else {
    std::optional<st::data::BpeTokenizer> given;
    if (resumed) given = checkpoint_tokenizer(*resumed, args.resume);
    if (r.init) given = *r.init->tokenizer;
    load_text(r.tokens, r.data, r.cfg, given);
    if (r.cfg.tokenizer == "bytes") r.cfg.vocab = 256;
    r.base = st::data::byte_baselines(*r.tokens.corpus);
  }
  if (resumed && metadata_at(resumed->meta, "data.hash", args.resume) != r.tokens.hash) {
    throw st::Error("--resume: the data (" + join(r.data, ", ") +
                    ") are not those the checkpoint was trained on (their bytes changed)");
  }
  r.bytes_per_token = static_cast<double>(r.tokens.val_bytes) /
                      static_cast<double>(std::max<int64_t>(1, total_tokens(r.tokens.val)));
}

// --max-val-loss: nats per byte, or the unigram or bigram baseline of text data.
void set_max_val_loss(Run& r) {
  const std::string& bar = r.args.max_val_loss;
  if (bar == "unigram" || bar == "bigram") {
    require(r.base.has_value(),
            "--max-val-loss " + bar + ": the byte baselines need text data, not shards");
    r.max_val_loss = bar == "unigram" ? r.base->unigram : r.base->bigram;
  } else if (!bar.empty()) {
    r.max_val_loss = std::stod(bar);  // checked by the flag's validator
  }
}

// --amp's autocast and loss scaler, and the options that must fit the run: --cuda-graph and the
// exports.
void set_up_precision(Run& r) {
  const Args& args = r.args;
  r.amp = amp_dtype(args.amp, r.dev);
  r.scaler = amp_scaler(r.amp, r.pg);
  check_cuda_graph(args.cuda_graph, r.dev, r.amp);
  check_exports(args, r.cfg);
  if (args.cuda_graph && r.cfg.dropout > 0) {
    throw st::Error(
        format("--cuda-graph needs --dropout 0 (dropout %g would replay one mask at every step)",
               r.cfg.dropout));
  }
  if (args.cuda_graph && r.pg) throw st::Error("--cuda-graph does not combine with --ddp yet");
}

// The step the run starts after (the checkpoint's with --resume, loaded now) and the one it
// stops at; then the DDP wrapper.
void start_or_resume(Run& r) {
  const Args& args = r.args;
  if (!args.resume.empty()) {
    r.start = load_checkpoint(r, args.resume);
    if (r.main_rank) {
      std::printf("resumed from %s at step %lld\n", args.resume.c_str(),
                  static_cast<long long>(r.start));
    }
  }
  if (args.stop_at > 0 && args.stop_at <= r.start) {
    throw st::Error("--stop-at " + ll(args.stop_at) + ": the checkpoint is already at step " +
                    ll(r.start));
  }
  r.stop = args.stop_at > 0 ? args.stop_at : r.cfg.steps;
  // Built after loading: it broadcasts rank 0's parameters, and from then on averages gradients.
  // (With --zero it was built with the optimizer; --fsdp shards instead.)
  if (r.args.ddp && !r.ddp) {
    r.ddp = std::make_unique<st::dist::DistributedDataParallel>(r.model.module,
                                                                r.dp_group ? r.dp_group : r.pg);
  }
}

// Training windows: one fresh random window per example over the whole run (Note [text
// windows]); step s reads examples [s N, (s + 1) N) for N windows per step, rank r the r-th
// run of accum x batch_size of them. Validation: the same eval_batches x batch_size windows at
// every evaluation.
void make_loaders(Run& r) {
  const RunConfig& cfg = r.cfg;
  const int64_t B = cfg.batch_size, rank_windows = B * r.accum,
                step_windows = rank_windows * r.data_ranks;
  r.train_windows = std::make_shared<st::data::TokenWindows>(
      r.tokens.train, st::data::TokenWindowsOptions{.context = cfg.context,
                                                    .windows = cfg.steps * step_windows,
                                                    .seed = cfg.seed,
                                                    .split = 0});
  r.val_windows = std::make_shared<st::data::TokenWindows>(
      r.tokens.val,
      st::data::TokenWindowsOptions{
          .context = cfg.context, .windows = cfg.eval_batches * B, .seed = cfg.seed, .split = 1});
  r.train_loader = std::make_unique<st::data::DataLoader>(
      r.train_windows, st::data::DataLoaderOptions{
                           .batch_size = rank_windows,
                           .device = r.dev,
                           .sampler = [start = r.start, stop = r.stop, rank_windows, step_windows,
                                       rank = r.data_rank](int64_t) {
                             std::vector<int64_t> order;
                             order.reserve(static_cast<size_t>((stop - start) * rank_windows));
                             for (int64_t s = start; s < stop; ++s) {
                               for (int64_t i = 0; i < rank_windows; ++i) {
                                 order.push_back(s * step_windows + rank * rank_windows + i);
                               }
                             }
                             return order;
                           }});
  r.val_loader = std::make_unique<st::data::DataLoader>(
      r.val_windows, st::data::DataLoaderOptions{.batch_size = B, .device = r.dev});
}

// The figures MFU needs and the checkpoint's path; on rank 0, the summary and the files the run
// writes besides the checkpoint.
void open_outputs(Run& r, int64_t num_params) {
  const Args& args = r.args;
  if (!r.tp_group) r.flops_per_token = flops_per_token(r.model, r.cfg);  // (split: set before)
  r.peak = peak_flops(r.dev, r.amp, r.fp8.has_value(), r.peak_what);
  r.save = args.save.empty() ? (fs::path(args.out) / "lm.safetensors").string() : args.save;
  if (r.main_rank) {
    print_summary(r, num_params);
    make_out_folder(args.out);
    r.metrics = std::make_unique<MetricsCsv>(fs::path(args.out) / "metrics.csv", r.start);
    r.tb.open(args.tensorboard, r.cfg.model, args.log_every, r.start);
    r.profile.open(args.profile, args.profile_schedule, r.tb.run_dir());
  }
}

// The settings, the data and their tokenizer, the model and its optimizer (from the checkpoint
// with --resume), the loaders, the metrics file. Errors here are bad options (Note [exit
// statuses]).
std::unique_ptr<Run> set_up(const Args& args, const Overrides& overrides) {
  auto r = std::make_unique<Run>();
  r->args = args;
  join_ranks(*r);
  Configured configured = configure(args, overrides, r->dev.is_cuda(), r->data_ranks);
  r->cfg = configured.config;
  r->data = std::move(configured.data);
  r->accum = configured.accum;
  r->init = configured.init;
  st::manual_seed(r->cfg.seed);
  load_tokens(*r, overrides, configured.resumed);
  if (!args.write_shards.empty()) return r;  // nothing else is needed
  set_max_val_loss(*r);
  const int64_t num_params = build_model(*r);
  set_up_precision(*r);
  start_or_resume(*r);
  make_loaders(*r);
  open_outputs(*r, num_params);
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
      const Fp8Scope fp8_scope(r.fp8);
      if (r.tp_group) {  // the loss from the vocabulary slices (DDP's hooks are on the parameters)
        loss = r.fsdp ? r.fsdp->call([&] { return r.model.loss(xm, ym); }) : r.model.loss(xm, ym);
      } else {
        const st::Tensor logits = r.ddp    ? r.ddp->forward(xm)
                                  : r.fsdp ? r.fsdp->forward(xm)
                                           : r.model.module->forward(xm);
        loss = st::cross_entropy(logits.reshape({-1, r.model.vocab}), ym.reshape({-1}));
      }
    }
    const st::Tensor scaled = r.scaler.scale(loss * (1.0 / static_cast<double>(r.accum)));
    if (r.ddp && m + 1 < r.accum) {
      auto no_sync = r.ddp->no_sync();
      scaled.backward();
    } else if (r.fsdp && m + 1 < r.accum) {
      auto no_sync = r.fsdp->no_sync();
      scaled.backward();
    } else {
      scaled.backward();
    }
    const st::Tensor detached = loss.detach();
    total = m == 0 ? detached : total + detached;
  }
  if (r.cfg.grad_clip > 0) {
    r.scaler.unscale_(*r.opt);
    if (r.tp_group && r.fsdp) {  // the whole model's norm from FSDP's shards of the split model
      r.fsdp->clip_grad_norm_(r.cfg.grad_clip, 2.0, r.tp_group);
    } else if (r.tp_group) {  // the whole model's norm from the shards
      st::dist::tp::clip_grad_norm_(*r.model.module, r.cfg.grad_clip, r.tp_group);
    } else if (r.zero || r.fsdp) {  // over every rank's shards
      r.zero ? r.zero->clip_grad_norm_(r.cfg.grad_clip) : r.fsdp->clip_grad_norm_(r.cfg.grad_clip);
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
      static_cast<double>(steps * r.cfg.batch_size * r.cfg.context * r.accum * r.data_ranks);
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
  // With --fsdp and --tp every rank evaluates (the layers gather from, or split over, them all).
  const bool everywhere = r.fsdp || r.tp_group;
  const double fsdp_val_loss =
      everywhere ? evaluate(r.model, *r.val_loader, r.amp, r.fp8, r.fsdp.get()) : std::nan("");
  if (r.pg) {  // the training loss of all ranks' windows
    r.pg->all_reduce(in.loss_sum, st::dist::ReduceOp::Sum);
    in.loss_sum.mul_(1.0 / static_cast<double>(r.world));
  }
  if (r.main_rank) {
    const double train_loss = in.loss_sum.item<double>() / static_cast<double>(in.steps);
    const auto [tokens_per_s, mfu] = rates(r, in.steps, in.train_secs);
    double val_loss = fsdp_val_loss;
    if (!everywhere) {
      const st::profiler::Range eval_range("evaluate");
      val_loss = evaluate(r.model, *r.val_loader, r.amp, r.fp8);
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
      if (!r.fsdp && !r.tp_group) r.tb.parameters(*r.model.module, step);  // (not of shards)
    }
  }
  if (r.main_rank || r.zero || r.fsdp || r.tp_group) save_checkpoint(r, step);
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
    // --fsdp: the first step's memory per rank (the activations counted by a profiler guard of
    // its own, unless --profile has one).
    std::optional<st::profiler::Guard> measure;
    if (r.fsdp && step == r.start + 1 && r.args.profile.empty()) measure.emplace();
    const st::Tensor loss = train_step_of(b);
    if (measure && r.main_rank) print_fsdp_memory(r, measure->peak_saved_bytes());
    measure.reset();
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
                        static_cast<double>(cfg.batch_size * cfg.context * r.accum * r.data_ranks),
                        "train/tokens_per_second", r.dev);
    }
    const bool eval_now = step % cfg.eval_interval == 0 || step == r.stop;
    if (r.main_rank && (step % 10 == 0 || eval_now)) {
      // Reading the loss waits for the device, so it happens every few steps only.
      const auto [tokens_per_s, mfu] = rates(r, in.steps, in.seconds());
      progress.update(step, format("mean loss %.4f  lr %.2e  %.0f tokens/s  MFU %.1f%%",
                                   in.loss_sum.item<double>() / static_cast<double>(in.steps), lr,
                                   tokens_per_s, mfu) +
                                gpu_progress(gpu_reading(r.dev)));
    }
    if (eval_now) {
      const Clock::time_point eval_start = Clock::now();
      val_loss = evaluate_interval(r, in, progress, step, lr);
      r.tb.leave_out(seconds_since(eval_start));
    }
    // Per Note [preemption], a signalled run keeps this step and stops, checkpointed.
    if (step < r.stop) r.stopped_by = stop_requested(r.pg.get());
    if (r.stopped_by != 0) {
      if (r.main_rank || r.zero || r.fsdp || r.tp_group) save_checkpoint(r, step);
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
  if (r.fsdp || r.tp_group) unshard_for_finish(r);
  if (!r.main_rank) return 0;
  if (std::isnan(val_per_byte)) {  // nothing was left to train
    val_per_byte = evaluate(r.model, *r.val_loader, r.amp, r.fp8) / r.bytes_per_token;
  }
  std::printf("final validation loss %.4f nats/byte (%.4f nats/token)", val_per_byte,
              val_per_byte * r.bytes_per_token);
  if (r.base) {
    std::printf(", %+.4f against the bigram baseline, %+.4f against the unigram",
                val_per_byte - r.base->bigram, val_per_byte - r.base->unigram);
  }
  std::printf("\nmetrics: %s\ncheckpoint: %s\n", r.metrics->path().string().c_str(),
              r.save.c_str());
  write_exports(r.args, r.cfg, *r.model.module, r.tokens.tokenizer, r.dev);
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
}  // namespace example::lm

int main(int argc, char** argv) {
  using namespace example;
  using namespace example::lm;
  Args args;
  Overrides overrides;
  CLI::Option* generate_opt = nullptr;
  return example_main(
      argc, argv, "lm",
      "Train a GPT or a Llama language model on bytes or BPE tokens, or sample from its "
      "checkpoint",
      [&](CLI::App& app) { generate_opt = add_options(app, args, overrides); },
      [&](CLI::App& app) {
        if (generate_opt->count() > 0) {
          if (!args.resume.empty()) throw st::Error("--generate and --resume exclude each other");
          if (args.generate < 0 || args.top_k < 0) {
            throw st::Error("--generate and --top-k must not be negative");
          }
          return generate(args, overrides.given.seed, app.count("--seed") > 0);
        }
        return train(args, overrides);
      });
}

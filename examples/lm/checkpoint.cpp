// lm's checkpoints: one safetensors file with the model, the schedule, the scaler, the random
// state and the settings, and the optimizer state in it or, sharded, beside it.
#include <sinter/dist_checkpoint.h>

#include <filesystem>
#include <string>
#include <vector>

#include "lm/run.h"

namespace example::lm {
namespace {

// With --zero the optimizer's state is in shards beside the checkpoint (Note [sharded
// checkpoints]): "<name>.optimizer.rank<r>-of-<N>.safetensors" for "<name>.safetensors".
std::string optimizer_shards(const std::string& checkpoint) {
  const fs::path p(checkpoint);
  return (p.parent_path() / (p.stem().string() + ".optimizer" + p.extension().string())).string();
}

// Collective with --zero: every rank writes its optimizer shard (first, so that the checkpoint,
// renamed into place last, never names shards older than itself), then rank 0 the rest.
// Note [lm checkpoints]
// A checkpoint is one safetensors file: the model under "model.", the optimizer's state under
// "optimizer.", the schedule, the loss scaler, the random generators and the step, with the run's
// settings in its header. With --zero the optimizer's state is in shards beside it instead (Note
// [sharded checkpoints]); with --fsdp or --tp the model in the file is gathered whole (so that
// --generate, the exports and any run can read it) and the optimizer's state is a distributed
// checkpoint in the folder "<name>.optimizer" (Note [distributed checkpoint]): every rank writes
// its pieces (one data-parallel replica of each), and a run at any number of ranks and any layout,
// or in one process, reads back its own. The shards are written
// first, the file last (atomically), so the file never names state older than itself.

// The specs of this run's optimizer parameters: its shards with --fsdp or --tp, else the whole
// parameters.
std::vector<st::dist::ShardSpec> optimizer_param_specs(const Run& r) {
  if (r.fsdp) {  // under --tp, FSDP's pieces of the split model's pieces
    return r.fsdp->shard_specs(r.tp_group ? st::dist::tp::shard_specs(*r.model.module)
                                          : std::vector<st::dist::ShardSpec>{});
  }
  if (r.tp_group) return st::dist::tp::shard_specs(*r.model.module, "model.", r.data_rank == 0);
  std::vector<st::dist::ShardSpec> specs;
  for (const auto& [name, p] : r.model.module->named_parameters()) {
    specs.push_back(st::dist::whole_spec("model." + name, p, r.main_rank));
  }
  return specs;
}

std::string optimizer_folder(const std::string& checkpoint) {
  const fs::path p(checkpoint);
  return (p.parent_path() / (p.stem().string() + ".optimizer")).string();
}

}  // namespace

void save_checkpoint(const Run& r, int64_t step) {
  if (r.zero) r.zero->save_sharded(optimizer_shards(r.save), {{"step", std::to_string(step)}});
  st::StateDict model;
  const bool distributed = r.fsdp || r.tp_group;
  if (distributed) {
    st::dist::save_distributed(optimizer_folder(r.save),
                               st::dist::optimizer_specs(*r.opt, optimizer_param_specs(r)), *r.pg,
                               {{"step", std::to_string(step)}});
    // Collective: every rank gathers, or joins its tensor-parallel group's shards.
    model = r.tp_group ? joined_model(r).module->state_dict() : r.fsdp->state_dict();
  }
  if (!r.main_rank) return;
  st::StateDict dict;
  st::add_prefixed(dict, "model", distributed ? model : r.model.module->state_dict());
  if (!r.zero && !distributed) st::add_prefixed(dict, "optimizer", r.opt->state_dict());
  st::add_prefixed(dict, "scheduler", r.sched->state_dict());
  if (r.scaler.is_enabled()) st::add_prefixed(dict, "scaler", r.scaler.state_dict());
  dict["meta.step"] = i64_scalar(step);
  st::add_prefixed(dict, "meta", st::generator_state_dict());
  st::Metadata meta = checkpoint_metadata(r.cfg, r.data, r.tokens.hash, r.tokens.tokenizer);
  if (r.zero) meta["zero.world_size"] = std::to_string(r.world);
  if (r.fsdp) meta["fsdp.world_size"] = std::to_string(r.world);
  if (r.tp_group) meta["tp.size"] = std::to_string(r.tp_group->size());
  st::save(dict, r.save, meta);
}

namespace {

// The optimizer state of a checkpoint: its own "optimizer." entries; with sharded state saved with
// --zero, this rank's shard when the world size is the same and --zero is on, else every shard
// consolidated into the state of one optimizer (which any world size loads); saved with --fsdp,
// this run's pieces of the distributed checkpoint (Note [lm checkpoints]).
void load_optimizer(Run& r, const std::string& path, const st::StateDict& dict, int64_t step) {
  const st::Metadata meta = st::load_metadata(path);
  if (meta.count("fsdp.world_size") || meta.count("tp.size")) {
    if (r.zero) {
      throw st::Error(
          "--resume: a checkpoint saved with --fsdp or --tp does not resume with --zero");
    }
    const std::string folder = optimizer_folder(path);
    const st::Metadata saved = st::dist::load_distributed_metadata(folder);
    const auto at = saved.find("step");
    if (at == saved.end() || at->second != std::to_string(step)) {
      throw st::Error("--resume: " + folder + " is not the optimizer state of step " +
                      std::to_string(step));
    }
    st::dist::load_optimizer_state(*r.opt, optimizer_param_specs(r), folder);
    return;
  }
  const auto it = meta.find("zero.world_size");
  if (r.fsdp || r.tp_group) {
    throw st::Error(
        "--resume: the checkpoint was saved without --fsdp or --tp; its optimizer state does "
        "not shard (resume it without them)");
  }
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

}  // namespace

int64_t load_checkpoint(Run& r, const std::string& path) {
  const st::StateDict dict = st::load(path);
  if (dict.count("meta.step") == 0) throw st::Error(path + ": no meta.step");
  // Check the whole model before touching the optimizer, so a mismatch changes nothing.
  if (r.tp_group) {  // the whole model, then this rank's shards of it (the random stream is the
                     // checkpoint's after this)
    LanguageModel whole = make_trained_model(r.cfg, r.model.vocab);
    whole.module->load_state_dict(st::sub_dict(dict, "model"));
    if (r.fsdp) {  // into a twin of the split model, whose parameters FSDP shards
      r.fsdp->load_state_dict(split_model(whole, r.tp_group).module->state_dict());
    } else {
      if (r.model.tp_gpt) r.model.tp_gpt->load_full(*whole.gpt);
      if (r.model.tp_llama) r.model.tp_llama->load_full(*whole.llama);
    }
  } else if (r.fsdp) {
    r.fsdp->load_state_dict(st::sub_dict(dict, "model"));
  } else {
    r.model.module->load_state_dict(st::sub_dict(dict, "model"));
  }
  load_optimizer(r, path, dict, dict.at("meta.step").item<int64_t>());
  r.sched->load_state_dict(st::sub_dict(dict, "scheduler"));
  const st::StateDict scaler_state = st::sub_dict(dict, "scaler");
  if (r.scaler.is_enabled() && !scaler_state.empty()) r.scaler.load_state_dict(scaler_state);
  st::load_generator_state(st::sub_dict(dict, "meta"));
  return dict.at("meta.step").item<int64_t>();
}

LanguageModel joined_model(const Run& r) {
  if (!r.fsdp) return r.model.joined(r.cfg);
  // FSDP holds the split model's parameters as shards: gathered into a twin of it first, made
  // without drawing from the run's random stream.
  const st::StateDict local = r.fsdp->state_dict();
  const st::GeneratorState stream = st::default_generator().state();
  LanguageModel twin = split_model(make_trained_model(r.cfg, r.model.vocab), r.tp_group);
  st::default_generator().set_state(stream);
  twin.module->load_state_dict(local);
  return twin.joined(r.cfg);
}

}  // namespace example::lm

// Distributed checkpoints: every rank writes the pieces of the model (and optimizer) it holds, and
// a run at another layout (more or fewer ranks, fully sharded or tensor parallel, one process)
// reads back the pieces it needs.
//
//   auto specs = fsdp.shard_specs();                                   // this rank's pieces
//   auto opt_specs = dist::optimizer_specs(opt, specs);                // AdamW's, alike
//   specs.insert(specs.end(), opt_specs.begin(), opt_specs.end());
//   dist::save_distributed("ckpt/step-1000", specs, world, {{"step", "1000"}});
//   ...                                                                // at any other layout:
//   dist::load_distributed("ckpt/step-1000", specs);                   // fills each piece
//   StateDict whole = dist::load_whole("ckpt/step-1000", "model.");   // one process
//
// Note [distributed checkpoint]
// Every tensor of the checkpoint is a whole tensor by its whole model's name (PyTorch's: the plain
// GPT's or Llama's state-dict keys under "model.", the optimizer's state under "optimizer."), of
// which each rank holds pieces. A ShardSpec says where a rank's `local` tensor sits in its whole
// tensor: runs of elements, each `count` stretches of `length` elements, the i-th at flat
// (row-major) offset local + i * local_stride of `local` and global + i * global_stride of the
// whole. A row block of a matrix is one stretch; a column block is one stretch per row.
//
// The folder holds "rank-<r>-of-<W>.safetensors" from each rank r (its writer specs' elements, each
// spec's runs back to back, with the runs and whole shapes in the header) and
// "manifest.safetensors", which rank 0 writes (atomically) after every rank's file is on disk:
// a folder without a manifest is an unfinished checkpoint, and loading it is an error. Saving into
// a folder that holds a checkpoint removes its manifest first, so a run that dies while saving
// leaves no loadable checkpoint there: keep the last good one in another folder (one per step).
//
// Every rank's file and the manifest carry one id per save, a digest of all the rank files'
// contents: a rank file left from another save is an error, not part of this one, and the same
// checkpoint saved twice is the same bytes. Saving is collective throughout: a failure on any rank (a bad
// spec, a full disk) is an error on every rank, the manifest unwritten.
//
// Loading reads the headers of every rank's file and copies, for each spec, the stretches that
// overlap its runs (from the files that have them, read one at a time), whatever layout wrote
// them; pieces written by several ranks (replicas) must agree, and any of them is read. An element
// of a spec that no file holds, a whole shape that differs, or a name the checkpoint lacks is an
// error naming it, and nothing is loaded. Values are converted to the local tensor's dtype.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sinter/dist.h"
#include "sinter/io.h"
#include "sinter/optim/optimizer.h"
#include "sinter/state_dict.h"
#include "sinter/tensor.h"

namespace sinter::dist {

struct Run {
  int64_t local = 0, global = 0, length = 0;
  int64_t count = 1, local_stride = 0, global_stride = 0;
};

struct ShardSpec {
  std::string name;  // the whole tensor's
  Shape whole;       // the whole tensor's shape
  Tensor local;      // contiguous; its elements that the runs name
  std::vector<Run> runs;
  // Whether this rank writes these elements: one rank of each set of replicas does.
  bool writer = true;
};

// The spec of a tensor held whole (replicated), written when `writer`.
ShardSpec whole_spec(const std::string& name, const Tensor& t, bool writer = true);

// The runs of `runs` that fall in the local flat range [begin, end), with their local offsets
// counted from `begin`: where the elements [begin, end) of a local tensor sit in the whole.
std::vector<Run> restrict_runs(const std::vector<Run>& runs, int64_t begin, int64_t end);

// Collective over `world`: every rank writes its writer specs into `dir` (created if missing),
// then rank 0 the manifest, with `metadata` (load_distributed_metadata reads it back). Returns
// when the checkpoint is complete on disk. Spec names must be unique on each rank, and the runs
// of one spec may not name an element of the whole twice.
void save_distributed(const std::string& dir, const std::vector<ShardSpec>& specs,
                      ProcessGroup& world, const Metadata& metadata = {});
// Fills each spec's local tensor from the checkpoint in `dir` (local: each rank reads what it
// needs). Everything is checked before anything is written.
void load_distributed(const std::string& dir, const std::vector<ShardSpec>& specs);
Metadata load_distributed_metadata(const std::string& dir);
// Every tensor of the checkpoint whose name starts with `prefix`, whole, under its name without
// the prefix: "model." gives the plain model's state dict (save() it for a plain safetensors
// file under PyTorch's names).
StateDict load_whole(const std::string& dir, const std::string& prefix = "");

// The specs of an optimizer's state (Note [optimizer state dict]) over parameters whose specs
// are `params` (each param spec's local is the optimizer's parameter, matched by identity): each
// state buffer of a parameter sits where the parameter does, under
// "optimizer.<parameter name>.<state name>"; its step count whole, by the parameter's writer,
// under "optimizer:scalar.<parameter name>.<state name>"; the hyperparameters by the writer of the
// optimizer's first parameter, under "optimizer.param_groups.<g>.<name>". Loading them back is
// load_optimizer_state: the optimizer's state dict rebuilt from the checkpoint alone (a parameter
// it has no state for starts afresh), the hyperparameters from it where it has them.
std::vector<ShardSpec> optimizer_specs(const optim::Optimizer& opt,
                                       const std::vector<ShardSpec>& params);
void load_optimizer_state(optim::Optimizer& opt, const std::vector<ShardSpec>& params,
                          const std::string& dir);

}  // namespace sinter::dist

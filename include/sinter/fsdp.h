// Fully sharded data parallel (ZeRO-3, as PyTorch's FSDP2): every parameter of a model stored as a
// 1/N flat shard on each of the N ranks of a process group, gathered whole only around the blocks
// that use it.
//
//   auto pg = sinter::dist::ProcessGroup::init();                    // mpirun -np N
//   auto model = std::make_shared<nn::models::GPT>(config);          // the same on every rank
//   dist::FullyShardedDataParallel fsdp(model, pg, {.units = model->blocks->children()});
//   optim::AdamW opt(fsdp.parameters(), {.lr = 3e-4});               // over the shards
//   for (...) {
//     opt.zero_grad();
//     Tensor loss = fsdp.call([&] { return cross_entropy(model->forward(x).flatten(0, 1), y); });
//     loss.backward();
//     fsdp.clip_grad_norm_(1.0);
//     opt.step();
//   }
//
// Note [fully sharded data parallel]
// Each parameter p of the model (flattened, padded with zeros to a multiple of N) is cut into N
// equal parts; rank r keeps part r as its "shard", a leaf tensor of p's dtype (or of the shards'
// precision under mixed precision) that the optimizer steps, with the gradient shard beside it.
// The model's own parameter tensors keep their identity and shape but hold no memory between uses
// (Storage::swap_memory); a use outside the scheme is an error naming the tensor, not garbage.
//
// The parameters are grouped into units: each module of FSDPOptions::units (a transformer block)
// takes the parameters of its subtree, and the root unit the rest (embeddings, final norm, head).
// A unit's shards travel together: one all-gather brings the unit's parameters whole, one
// reduce-scatter sends its gradients back as shards. The steps of a training step:
// - forward() / call() gather the root unit, then run the model. Each unit's module is called by
//   its parent through Module::call (Note [forward hooks]): before it runs, its gather is awaited
//   (issued early: while unit k runs, unit k+1's gather is already in flight, in the order the
//   last forward took); after it, its parameters are freed (unless reshard_after_forward is
//   false), and a hook is set on its output's gradient.
// - backward reaches that output: the unit is gathered again (the next unit of backward's gather
//   issued at once), its backward runs, and when every parameter of the unit has its gradient, the
//   gradients are reduce-scattered (averaged over the ranks) into the shards' gradients, the whole
//   gradients and parameters freed, while backward goes on into the next unit. When backward ends,
//   the reduce-scatters are awaited and the root freed: between steps each rank holds 1/N of the
//   parameters, gradients and optimizer state (plus under N elements of padding per parameter).
// - the optimizer steps the shards; the next forward gathers from them.
//
// Every rank must issue the group's collectives in the same order. They are issued from the hooks
// of forward and backward, which run in the same order on every rank that runs the same model on
// its own batch (the engine runs gradient accumulation first, Note [accumulation first], so a graph
// kept from an earlier step changes nothing), and the reduce-scatters in a fixed order besides
// (the last forward's units reversed, then the root: a unit ready early waits for the ones before
// it). Data-dependent control flow that differs across ranks is not supported.
//
// A unit checkpointed inside its call (GPTConfig::checkpoint_blocks) is gathered once for backward
// and recomputed with the parameters whole. A unit with frozen parameters is freed once the unit
// before it starts its backward (or at the end). Under no_sync() the gradients stay whole and
// accumulate (in reduce_dtype) on the parameters; the first synchronized backward after it
// reduce-scatters the sum. A parameter that gets no gradient in a backward counts as zero when
// other parameters of its unit do; a unit none of whose parameters got one is skipped (its shards
// get no gradient). A backward that throws drops the whole gradients not yet reduced. A graph
// whose backward runs after the shards changed (an optimizer step after its forward) is an error,
// as for a saved tensor changed in place.
//
// Mixed precision (FSDP2's MixedPrecisionPolicy): the shards and the optimizer state keep the
// parameters' dtype (f32); the parameters are gathered and computed in param_dtype (bf16), their
// gradients come out in it, and are reduce-scattered in reduce_dtype, f32 unless set (PyTorch's
// default reduces in param_dtype: set reduce_dtype to bf16 for its traffic and rounding).
//
// Buffers (BatchNorm's statistics) are not sharded: rank 0's are broadcast at construction and
// each rank keeps its own after. Move and cast the model before wrapping it: Module::to on a
// sharded model is an error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sinter/core/noncopyable.h"
#include "sinter/dist.h"
#include "sinter/dist_checkpoint.h"
#include "sinter/nn/module.h"
#include "sinter/state_dict.h"
#include "sinter/tensor.h"

namespace sinter::dist {

struct FSDPOptions {
  // The modules of the model's tree sharded as units of their own (GPT's blocks, Llama's layers):
  // each must be called by its parent through Module::call or operator(), as the reference models
  // call their blocks. None may be inside another, nor be the root; a parameter shared between two
  // units (or between a unit and the root) is an error naming it. Empty: the whole model is one
  // unit, gathered for the whole step (ZeRO-3's memory without its per-block saving).
  std::vector<std::shared_ptr<nn::Module>> units;
  // Free each unit's parameters after its forward and gather them again for its backward; false
  // keeps them from forward to backward (one all-gather less per unit and step, more memory).
  bool reshard_after_forward = true;
  // Issue the next unit's all-gather (in forward, and in backward) while this one computes.
  bool prefetch = true;
  // The dtype the floating parameters are gathered and computed in (unset: their own).
  std::optional<DType> param_dtype = std::nullopt;
  // The dtype gradients are averaged in (unset: the shards'; see the Note).
  std::optional<DType> reduce_dtype = std::nullopt;
};

// A rank's communication (FullyShardedDataParallel::traffic): the all-gathers and reduce-scatters
// issued and their bytes (the whole buffers, all N parts), and the seconds the host spent waiting
// for them: on CPU ranks (MPI) the communication not hidden behind computation; on CUDA ranks
// (NCCL) the host does not wait, and it stays near 0.
struct FSDPTraffic {
  int64_t gathers = 0, reduces = 0;
  int64_t gathered_bytes = 0, reduced_bytes = 0;
  double wait_seconds = 0;
};

// What one rank holds, in bytes (FullyShardedDataParallel::memory).
struct FSDPMemory {
  int64_t shards = 0;        // the parameters' shards (every parameter, frozen ones too)
  int64_t shard_grads = 0;   // the shards' gradients
  int64_t whole_params = 0;  // parameters gathered whole right now
  int64_t whole_grads = 0;   // whole gradients held on the parameters right now
  int64_t whole_total = 0;   // what the model's parameters take unsharded, for comparison
};

class FullyShardedDataParallel : NonCopyable {
 public:
  // Collective over `pg`: checks that every rank holds the same model, takes rank 0's parameters
  // and buffers, and keeps this rank's shards (the parameters' memory is freed). Every parameter
  // must be a contiguous tensor with a storage of its own, on one device.
  FullyShardedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> pg,
                           FSDPOptions options = {});
  ~FullyShardedDataParallel();

  // module().forward(x), with the root unit gathered.
  Tensor forward(const Tensor& x);
  // f() (a computation on the model: a forward with other arguments, a loss) with the root unit
  // gathered. The root is freed when the backward of the result ends, or at once if the result
  // needs no gradient.
  Tensor call(const std::function<Tensor()>& f);

  nn::Module& module() { return *module_; }
  ProcessGroup& process_group() { return *pg_; }

  // The shards of the parameters that require grad, in module().named_parameters() order, under
  // the same names: what the optimizer takes (parameter groups by name work as on the model).
  const std::vector<Tensor>& parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;

  // Clipping by the norm of every gradient of the model together (optim::clip_grad_norm_'s rule):
  // each rank's partial over its shards, then one all-reduce. Returns the total norm, the same on
  // every rank. With `tp`, the model is tensor parallel over that group (FSDP over the mesh's
  // fsdp dim, tp over its tp dim): the partial norms of the split layers' parameters
  // (tp::split_parameters' shards) are summed over `tp` too, the rest (whole on every rank of
  // `tp`) counted once, so the norm is the whole model's.
  double clip_grad_norm_(double max_norm, double norm_type = 2.0,
                         const std::shared_ptr<ProcessGroup>& tp = nullptr);

  // While the guard lives, backward keeps the whole gradients on the parameters and adds to them;
  // the first backward after it reduce-scatters the sum (gradient accumulation).
  class NoSync : NonCopyable {
   public:
    explicit NoSync(FullyShardedDataParallel& fsdp);
    ~NoSync();

   private:
    FullyShardedDataParallel& fsdp_;
    bool prev_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // Collective: the model's state dict as the unsharded model's state_dict() would give it (every
  // key, tied tensors under each name), the parameters gathered whole in the shards' dtype (the
  // same on every rank), the buffers this rank's own.
  StateDict state_dict() const;
  // Each rank takes its shards from a whole state dict (as state_dict() gives, or a plain model's
  // file); the buffers are copied. Checked whole before anything changes, as
  // Module::load_state_dict. Local: every rank passes the same dict.
  LoadResult load_state_dict(const StateDict& state, bool strict = true);

  // For a distributed checkpoint (Note [distributed checkpoint]): this rank's shards where they sit
  // in the whole parameters, and the buffers (written by rank 0 of the group), named
  // "<prefix><name>". `base` places the model's own parameters in a larger whole (the specs of a
  // tensor-parallel model, tp::shard_specs, matched by identity, with their names); a parameter
  // it does not name is whole. dist::optimizer_specs over these gives the optimizer's.
  std::vector<ShardSpec> shard_specs(const std::vector<ShardSpec>& base = {},
                                     const std::string& prefix = "model.") const;

  // Gives a Muon made by optim::Muon::over_shards over this model's shards (Note [muon shards])
  // the layout of each of its Muon groups: every parameter of such a group must be the shard of a
  // 2-D parameter (an Error names it otherwise). Its step then gathers each matrix's update whole
  // (one all-gather per matrix), orthogonalizes it, and keeps this rank's part: Muon's step on the
  // whole model, every rank orthogonalizing every matrix. Call it once, before the first step.
  void give_muon_layouts(optim::Muon& muon) const;

  FSDPMemory memory() const;
  // Since construction or the last reset_traffic().
  FSDPTraffic traffic() const;
  void reset_traffic();
  // The units: "" for the root, then each of FSDPOptions::units by its dotted name in the model.
  std::vector<std::string> unit_names() const;

  struct Impl;

 private:
  // For tests: the events of the last step, in order ("gather <unit>", "wait <unit>", "free
  // <unit>", "reduce <unit>", "backward end"), so a test can check what overlaps what.
  friend std::vector<std::string> fsdp_debug_events(const FullyShardedDataParallel& fsdp);

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> pg_;
  // Shared: the hooks on the modules and parameters hold it weakly.
  std::shared_ptr<Impl> impl_;
};

}  // namespace sinter::dist

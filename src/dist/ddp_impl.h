// The state DistributedDataParallel shares with its gradient hooks, and with a
// ZeroRedundancyOptimizer attached to it (src/dist/zero.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sinter/dist.h"

namespace sinter::dist {
namespace detail {

// A bucket: a flat buffer of one device and dtype holding the gradients of `params`, back to back.
struct Bucket {
  std::vector<size_t> params;  // indices into State::params, in packing order
  Device device = Device::cpu();
  DType dtype = DType::f32;
  int64_t numel = 0;
  int group = 0;  // the ZeRO parameter group of every parameter in it (Note [zero sharding])
  // numel rounded up to a multiple of the world size when a ZeroRedundancyOptimizer is attached
  // (Note [zero sharding]), else numel. The tail of the buffer stays zero.
  int64_t padded = 0;
  // (padded,). With ZeRO stage 2 it exists only from the first gradient of a backward until the
  // bucket's reduce-scatter has completed.
  Tensor buffer;
  size_t pending = 0;  // parameters not yet ready in this backward
  std::shared_ptr<Work> work;
  // ZeRO stage 2: where this rank's part of the averaged bucket arrives, (padded / size,).
  Tensor shard_grad;
};

// Checks that every rank of `pg` holds the same model (parameter and buffer names, shapes, dtypes,
// device types; one small collective, more only on a mismatch), else an Error from `who` naming
// the first entry that differs on each rank.
void check_same_model(ProcessGroup& pg, const nn::Module& module, const char* who);
// Broadcasts `tensors` from rank 0, all in flight at once (in place; a non-contiguous tensor goes
// through a contiguous copy).
void broadcast_all(ProcessGroup& pg, const std::vector<Tensor>& tensors);

// Clipping by the norm of every shard's gradient over all ranks of `pg` together
// (optim::clip_grad_norm_'s rule): each rank's partial, one all-reduce, then each shard's gradient
// scaled in place. Returns the total norm. `op` names the caller in errors.
double clip_sharded(const char* op, const std::vector<Tensor>& shards, ProcessGroup& pg,
                    double max_norm, double norm_type);

struct Slot {
  size_t bucket = 0;
  int64_t offset = 0;  // in elements, into the bucket's buffer
};

}  // namespace detail

// What the hooks share with the wrapper. Hooks hold it weakly: they stay registered on the
// parameters after the wrapper is gone, and then do nothing.
struct DistributedDataParallel::Impl {
  ProcessGroup* pg = nullptr;
  DDPOptions options;
  const bool* sync = nullptr;      // the wrapper's sync_
  std::vector<Tensor> all_params;  // module().parameters(), the indices of bucket_layout()
  std::vector<std::string> names;
  std::vector<size_t> trained;          // indices into all_params of those that require grad
  std::vector<detail::Slot> slots;      // per all_params index (meaningful for trained ones)
  std::vector<detail::Bucket> buckets;  // in launch order (Note [bucket order])
  std::vector<bool> ready;              // per all_params index, this backward
  size_t next_launch = 0;
  // Alive while this backward's finalizer is queued: expired means the next hook starts a new
  // backward (and, if the last one failed midway, finds state to clear).
  std::weak_ptr<int> pending;
  bool dirty = false;  // some parameter was marked ready since the last reset
  std::vector<std::string> events;
  // ZeRO (Note [zero sharding]): 0 without it, else its stage, with `shards` its flat parameter
  // shards, one per bucket, whose gradients finalize() sets.
  int zero_stage = 0;
  std::vector<Tensor> shards;
  // ZeRO's parameter group of each all_params entry (empty: all 0); buckets never mix groups.
  std::vector<int> param_group;

  void build_buckets();
  // Rebuilds the buckets by `groups` (as param_group), pads them to a multiple of the world size
  // and sets the ZeRO stage; the shards are set after.
  void attach_zero(int stage, const std::vector<int>& groups);
  void detach_zero();
  void on_grad_ready(size_t i);
  // Starts a synchronized backward; the finalizer holds the returned token.
  std::shared_ptr<int> begin_backward();
  void mark_ready(size_t i);
  void launch_ready_buckets();
  void finalize();
  void reset();
};

}  // namespace sinter::dist

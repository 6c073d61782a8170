// The state FullyShardedDataParallel shares with its hooks (src/dist/fsdp.cpp) and its state
// dicts (src/dist/fsdp_state.cpp): Note [fully sharded data parallel] in include/sinter/fsdp.h.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sinter/fsdp.h"

namespace sinter::dist {
namespace detail {

enum class UnitState { Sharded, Gathering, Whole };

struct FsdpParam {
  std::string name;
  Tensor param;  // the model's tensor: no memory while its unit is sharded
  Tensor shard;  // (chunk,): this rank's part, in the parameter's own dtype
  size_t unit = 0;
  int64_t numel = 0, chunk = 0;
  int64_t offset = 0;  // of the shard in its unit's part
  bool trained = false;
  bool ready = false;  // got its gradient in this backward
  // Under no_sync with a compute dtype other than the reduction's: the gradients so far, in the
  // reduction's dtype (whole), so that many micro-batches add up at its precision.
  Tensor accum;
};

struct FsdpUnit {
  std::string name;                    // "" for the root
  std::shared_ptr<nn::Module> module;  // null for the root
  std::vector<size_t> params;
  int64_t part = 0;  // the sum of its parameters' chunks
  DType shard_dtype = DType::f32, compute_dtype = DType::f32;
  bool has_frozen = false;
  UnitState state = UnitState::Sharded;
  Tensor send, gathered;
  std::shared_ptr<Work> gather;
  size_t trained = 0;  // parameters that require grad
  size_t pending = 0;  // trained parameters without their gradient in this backward
  // The sum of the shards' versions at the last gather: a backward that gathers again after the
  // shards changed (an optimizer step between forward and backward) is an error, as in-place
  // changes to saved tensors are.
  int64_t gathered_version = 0;
  bool any_ready = false;
  bool reduced = false;  // its reduce-scatter was launched in this backward
  Tensor reduce_in, reduce_out;
  std::shared_ptr<Work> reduce;
  int pre_hook = -1, post_hook = -1;
};

}  // namespace detail

struct FullyShardedDataParallel::Impl {
  ProcessGroup* pg = nullptr;
  FSDPOptions options;
  std::vector<detail::FsdpParam> params;
  std::vector<detail::FsdpUnit> units;  // units[0]: the root
  std::vector<Tensor> trained_shards;
  std::vector<std::string> trained_names;
  std::vector<size_t> order;          // the units (not the root) in the last forward's order
  std::vector<size_t> current_order;  // being recorded by this forward
  bool sync = true;
  bool in_backward = false;           // from a backward's first hook to its end
  std::weak_ptr<int> backward_token;  // alive while this backward's finalizer is queued
  std::vector<size_t> launched;       // units whose reduce-scatter is in flight, in order
  std::vector<size_t> reduce_order;   // this backward's: the forward order reversed, the root
  size_t next_reduce = 0;             // into reduce_order
  std::vector<std::string> events;
  FSDPTraffic traffic;
  std::weak_ptr<Impl> self;

  int size() const { return pg->size(); }
  void start_gather(size_t u);
  void finish_gather(size_t u);
  void reshard(size_t u);
  void reshard_all();
  // The unit after (+1) or before (-1) u in the last forward's order; the root comes first.
  std::optional<size_t> neighbour(size_t u, int step) const;
  void pre_forward(size_t u);
  Tensor post_forward(size_t u, const Tensor& out);
  void pre_backward(size_t u);
  void begin_backward();
  void on_grad_ready(size_t i);
  void launch_reduce(size_t u);
  // Launches the reduce-scatters of reduce_order's units from next_reduce on while they are
  // ready; at the end of backward (`all`), of every unit with a gradient.
  void launch_in_order(bool all);
  int64_t shard_version(size_t u) const;
  // work.wait(), its time added to traffic.wait_seconds.
  void timed_wait(Work& work);
  void finalize();
  // After a backward that failed midway or an abandoned graph: waits for what is in flight.
  void recover();
  void reset_backward();
};

}  // namespace sinter::dist

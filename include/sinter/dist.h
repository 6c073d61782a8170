// Data-parallel training across processes: a ProcessGroup of MPI ranks (NCCL for CUDA tensors, MPI
// for CPU tensors), DistributedDataParallel, which averages gradients in buckets while backward is
// still running, and DistributedSampler, which gives each rank its shard of a data set.
//
//   auto pg = sinter::dist::ProcessGroup::init();          // under mpirun -np N (or srun)
//   auto model = std::make_shared<Net>();
//   model->to(sinter::Device::cuda(pg->cuda_device()));
//   sinter::dist::DistributedDataParallel ddp(model, pg);  // broadcasts rank 0's parameters
//   sinter::optim::SGD opt(model->parameters(), {.lr = 0.1});
//   for (...) { opt.zero_grad(); loss_fn(ddp.forward(x), y).backward(); opt.step(); }
//
// Built without MPI (SINTER_MPI=OFF, or MPI not found), ProcessGroup::init() throws "built without
// MPI"; NCCL likewise for CUDA tensors.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sinter/core/noncopyable.h"
#include "sinter/io.h"
#include "sinter/nn/module.h"
#include "sinter/optim/optimizer.h"

namespace sinter::optim {
class Muon;
}  // namespace sinter::optim
#include "sinter/tensor.h"

namespace sinter::dist {

enum class ReduceOp { Sum, Average, Max };

// The handle of an asynchronous collective. wait() blocks until the result is in the tensor (for
// NCCL: until the compute stream of the tensor's device is ordered after it, which the host need
// not wait for) and rethrows a failure as sinter::Error naming the rank. On MPI (CPU tensors) a
// wait longer than the group's timeout throws instead of hanging. On NCCL the host does not wait:
// a collective that never completes (a peer died) is found, and the communicator aborted, by the
// next call on the group after the timeout; a host synchronization before that can still block.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  // True once wait() would not block (never throws; a failed collective counts as completed).
  virtual bool is_completed() = 0;
};

struct ProcessGroupOptions {
  // A collective that has not completed after this long fails with an error on this rank (a peer
  // that died, or ranks that called different collectives), instead of hanging.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Exchange each tensor's shape and dtype before a collective, so that ranks that disagree get an
  // error naming both, instead of undefined behaviour in MPI or NCCL. Costs one tiny collective.
  bool check_shapes = true;
  // The CUDA device of this rank (its NCCL communicator, and where its CUDA tensors must be). -1
  // chooses: device 0 when the process sees exactly one GPU (per-rank CUDA_VISIBLE_DEVICES, Slurm
  // --gpus-per-task=1), else the local rank (every GPU of the node visible to every rank). A local
  // rank with no GPU of its own is an error naming the rank, its local rank and the device count;
  // two ranks on one GPU are an error naming both, at the first collective on CUDA tensors.
  int device = -1;
};

// One process per rank, one GPU per rank. Every collective must be called by all ranks, in the same
// order, with tensors of the same shape and dtype on the same kind of device. CPU tensors go
// through MPI; CUDA tensors through NCCL, on a communication stream of the group, ordered after the
// work queued so far on the device's current stream (events, not host waits).
class ProcessGroup {
 public:
  // Initializes MPI if the process has not (MPI_Init_thread) and builds the group over
  // MPI_COMM_WORLD: rank and size from MPI, local rank and size from the node-local communicator
  // (MPI_Comm_split_type shared). The NCCL communicator is created the first time a CUDA tensor is
  // used: rank 0 makes the unique id and MPI broadcasts it; each rank uses GPU cuda_device().
  static std::shared_ptr<ProcessGroup> init(const ProcessGroupOptions& options = {});

  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  // The index of this rank's GPU (ProcessGroupOptions::device): put the model and the CUDA tensors
  // of collectives on Device::cuda(cuda_device()). Throws when there is none. The default is the
  // automatic choice (device -1).
  virtual int cuda_device() const;

  // In place on `tensor` (contiguous). Average divides the sum by size() (floating types only).
  virtual std::shared_ptr<Work> all_reduce_async(Tensor& tensor, ReduceOp op = ReduceOp::Sum) = 0;
  // `tensor` on `root` is copied into `tensor` on every other rank.
  virtual std::shared_ptr<Work> broadcast_async(Tensor& tensor, int root = 0) = 0;
  // Returns (size(), *tensor.shape()) stacking every rank's tensor in rank order.
  virtual Tensor all_gather(const Tensor& tensor) = 0;
  virtual void barrier() = 0;

  // The ranks of this group that pass the same `color` (>= 0), as a group of their own with this
  // group's options, ranked by `key` and then by their rank here (MPI_Comm_split). Collective:
  // every rank of this group calls it. A group that cannot be split throws.
  virtual std::shared_ptr<ProcessGroup> split(int color, int key);

  // Into preallocated outputs (torch.distributed's reduce_scatter_tensor and
  // all_gather_into_tensor), with n = output.numel() for reduce_scatter and n = input.numel() for
  // all_gather_into; shapes do not matter, only element counts, in row-major order:
  // - reduce_scatter: `input` holds size() * n elements; `output` gets elements [rank() * n,
  //   (rank() + 1) * n) of the reduction of every rank's input.
  // - all_gather_into: `output` holds size() * n elements; elements [r * n, (r + 1) * n) get rank
  //   r's input. The input may be that very part of the output (in place).
  // Both tensors have one dtype and one device. CUDA tensors must be contiguous; CPU tensors that
  // are not travel in contiguous copies (bf16 and f16 are reduced in f32, as all_reduce does).
  virtual std::shared_ptr<Work> reduce_scatter_async(Tensor& output, const Tensor& input,
                                                     ReduceOp op = ReduceOp::Sum) = 0;
  virtual std::shared_ptr<Work> all_gather_into_async(Tensor& output, const Tensor& input) = 0;

  void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum) {
    all_reduce_async(tensor, op)->wait();
  }
  void broadcast(Tensor& tensor, int root = 0) { broadcast_async(tensor, root)->wait(); }
  void reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum) {
    reduce_scatter_async(output, input, op)->wait();
  }
  void all_gather_into(Tensor& output, const Tensor& input) {
    all_gather_into_async(output, input)->wait();
  }

 protected:
  // The checks every backend makes before reduce_scatter and all_gather_into (`what` names the
  // call): defined tensors of one dtype and one device type, and the element counts above.
  // Local: the same on every rank that makes the same call.
  void check_scatter_gather(const char* what, const Tensor& output, const Tensor& input,
                            bool scatter) const;
};

struct DDPOptions {
  // Gradients are packed into buckets of about this size, in reverse order of parameter
  // registration (roughly the order backward produces them); each bucket's all-reduce starts as
  // soon as its last gradient has been accumulated, while backward goes on.
  double bucket_cap_mb = 25.0;
  // A parameter that gets no gradient in a backward is an error naming it, unless this is true:
  // then it counts as ready with a zero gradient when backward ends (the bucket still all-reduces,
  // so every rank stays in step).
  bool find_unused_parameters = false;
  // Before each forward, rank 0's buffers (e.g. BatchNorm running statistics) are broadcast.
  bool broadcast_buffers = true;
};

// Wraps a module for data-parallel training. On construction it checks that every rank has the same
// parameters (names, shapes, dtypes) and broadcasts rank 0's parameters and buffers. Gradients are
// averaged over the ranks during backward(); when backward returns, every parameter's .grad() holds
// the average (the wait for the last bucket happens at the end of backward).
class DistributedDataParallel : NonCopyable {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> pg,
                          DDPOptions options = {});
  ~DistributedDataParallel();

  Tensor forward(const Tensor& x);
  nn::Module& module() { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  ProcessGroup& process_group() { return *pg_; }

  // While the guard lives, backward accumulates gradients locally without communicating; the first
  // backward after it ends all-reduces the accumulated sum (gradient accumulation).
  class NoSync : NonCopyable {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // The buckets as built: parameter indices (into module().parameters()) of each, in launch order.
  std::vector<std::vector<size_t>> bucket_layout() const;

  struct Impl;

 private:
  // For tests: the events of the last synchronized backward, in order ("launch 0", ...,
  // "backward end", "wait 0", ...), so a test can check that bucket all-reduces start before
  // backward ends. Found by argument-dependent lookup.
  friend std::vector<std::string> ddp_debug_events(const DistributedDataParallel& ddp);

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> pg_;
  // Shared: the gradient hooks on the parameters hold it weakly.
  std::shared_ptr<Impl> impl_;
  bool sync_ = true;

  friend class ZeroRedundancyOptimizer;
};

struct ZeroOptions {
  // 1: each rank keeps the optimizer state of its shard only; gradients are all-reduced in full,
  // as plain DDP does. 2: also the gradients: each bucket is reduce-scattered as soon as backward
  // has filled it, a parameter's own gradient is dropped once copied into its bucket, and a rank
  // keeps only its shard's averaged gradient.
  int stage = 2;
  // Parameter groups (weight decay on the matrices only, say): the group, 0 to G - 1, of each of
  // module().named_parameters(). Buckets then never mix groups, and the grouped form of the
  // optimizer function gets each group's shards. Unset: one group.
  std::function<int(const std::string& name, const Tensor& param)> group_of = nullptr;
};

// Note [zero sharding]
// ZeRO (stages 1 and 2) over a DistributedDataParallel's gradient buckets. Each bucket (one device,
// dtype and parameter group; parameters back to back) is padded with zeros to a multiple of the
// world size N and cut into N equal parts; rank r owns part r of every bucket. For each bucket a
// rank holds a flat "shard" tensor: its part of the parameters' values. The optimizer built over
// these shards (any of sinter::optim's, fused or not) keeps state for them only, 1/N of a
// replicated optimizer's plus the padding (under N elements a bucket). step() copies the rank's
// part of the parameters into the shards (the parameters are the truth: a checkpoint loaded into
// the model is followed), runs that optimizer on the averaged shard gradients, then all-gathers
// every bucket's updated shards into the parameters, so that after step() every rank holds the
// same model, as with DDP. Hyperparameters (weight decay included) apply to a shard as they would
// to its parameters: every optimizer's update is elementwise, and the padding stays zero. Muon's
// is not (it orthogonalizes whole matrices): made by optim::Muon::over_shards, it gets its shards'
// layout from here and gathers what it needs (Note [muon shards] in include/sinter/optim/muon.h).
//
// The wrapper is itself an Optimizer: its parameter groups mirror the local optimizer's, so LR
// schedules, set_lr and GradScaler (give it the process group: unscale_ works on the shard
// gradients, and every rank must skip the same steps) take it as they take any optimizer.
// Clipping by the global norm needs every rank's shard: use clip_grad_norm_ below, not
// optim::clip_grad_norm_ on parameters().
//
//   dist::DistributedDataParallel ddp(model, pg);
//   dist::ZeroRedundancyOptimizer opt(ddp, [](const std::vector<Tensor>& shards) {
//     return std::make_unique<optim::AdamW>(shards, optim::AdamWOptions{.lr = 3e-4});
//   });
//   for (...) { opt.zero_grad(); loss(ddp.forward(x)).backward(); opt.clip_grad_norm_(1.0);
//               opt.step(); }
class ZeroRedundancyOptimizer final : public optim::Optimizer {
 public:
  // One parameter group: the optimizer over every shard, in their order.
  using MakeOptimizer =
      std::function<std::unique_ptr<optim::Optimizer>(const std::vector<Tensor>& shards)>;
  // ZeroOptions::group_of's groups: group g of the optimizer over exactly shards[g], in order.
  using MakeGroupedOptimizer = std::function<std::unique_ptr<optim::Optimizer>(
      const std::vector<std::vector<Tensor>>& shards)>;

  // Attaches to `ddp` (which must have no other ZeroRedundancyOptimizer; either may be destroyed
  // first):
  // rebuilds its buckets by group, pads them, and, for stage 2, switches its all-reduces to
  // reduce-scatters. Call it between steps, not in the middle of a backward.
  ZeroRedundancyOptimizer(DistributedDataParallel& ddp, const MakeOptimizer& make,
                          ZeroOptions options = {});
  ZeroRedundancyOptimizer(DistributedDataParallel& ddp, const MakeGroupedOptimizer& make,
                          ZeroOptions options);
  ~ZeroRedundancyOptimizer() override;

  // The local optimizer's step on the shards, then the all-gather of the updated parameters.
  void step() override;
  // The shards' gradients and the parameters' own (stage 1, or accumulated under no_sync).
  void zero_grad(bool set_to_none = true) override;
  // Clipping by the norm of every gradient of the model together (optim::clip_grad_norm_'s rule):
  // each rank's partial over its shards, then one all-reduce. Returns the total norm, the same on
  // every rank.
  double clip_grad_norm_(double max_norm, double norm_type = 2.0);

  // This rank's shard: the local optimizer's state dict (Note [optimizer state dict]) over the
  // shard tensors, and the layout ("zero.*": the world size, the rank, the buckets and the
  // parameters' groups and shapes) that loading and consolidate() read.
  StateDict state_dict() const override;
  // A shard of state_dict() (this rank's, from a group of the same size), or a consolidated dict:
  // the state of one optimizer over all of module().parameters() (group g: the parameters
  // group_of maps to g, in module order), as consolidate() makes and as the local optimizer's type
  // over the unsharded model would save it; this rank takes its part, at any world size.
  // Everything is checked before anything changes.
  void load_state_dict(const StateDict& dict) override;
  // Every rank's state_dict(), in rank order, joined into one consolidated dict: the state of the
  // i-th parameter of group g under "state.<g>.<i>.<name>" in the parameter's shape, as if the
  // local optimizer's type had run unsharded. Errors name the shard at fault: another world
  // size, a rank missing or out of place, shards of different models.
  static StateDict consolidate(const std::vector<StateDict>& shards);

  // Note [sharded checkpoints]
  // Files of the above: "<dir>/<name>.safetensors" stands for its shards
  // "<dir>/<name>.rank<r>-of-<N>.safetensors" (shard_path). save_sharded (collective) has every
  // rank write its shard atomically and returns once all are written; load_sharded reads this
  // rank's, from a run of the same world size (another size is an error that says to consolidate
  // first). consolidate_files reads the N shards of `path` and writes the consolidated dict to
  // `out` atomically; a shard missing or from another run is an error naming the file, and
  // nothing is written. Errors name the file at fault, and a failed load changes nothing.
  static std::string shard_path(const std::string& path, int rank, int world_size);
  // `metadata` goes into every shard's header (sinter::load_metadata reads it back).
  void save_sharded(const std::string& path, const Metadata& metadata = {}) const;
  void load_sharded(const std::string& path);
  static void consolidate_files(const std::string& path, const std::string& out);

  int stage() const { return options_.stage; }
  optim::Optimizer& local_optimizer() { return *inner_; }
  const optim::Optimizer& local_optimizer() const { return *inner_; }
  // The flat shard tensors, one per bucket of ddp.bucket_layout().
  const std::vector<Tensor>& shards() const { return shards_; }

 protected:
  void check(const optim::Hyperparameters& h, size_t group) const override;
  void store(size_t group, const optim::Hyperparameters& h) override;
  optim::Hyperparameters load(size_t group) const override;
  std::vector<std::string> state_names() const override { return {}; }

 private:
  void build(const MakeGroupedOptimizer& make);
  void give_muon_layouts(optim::Muon& muon);
  void load_consolidated(const StateDict& dict);

  // Shared with the DDP wrapper (so either may go first); the group lives as long as this.
  std::shared_ptr<DistributedDataParallel::Impl> impl_;
  std::shared_ptr<ProcessGroup> pg_;
  ZeroOptions options_;
  std::vector<Tensor> shards_;
  // Per group: its parameters (indices into module().parameters(), in order) and its buckets.
  std::vector<std::vector<size_t>> group_params_;
  std::vector<std::vector<size_t>> group_buckets_;
  std::unique_ptr<optim::Optimizer> inner_;
};

// The indices of one rank's shard of a data set of `size` samples. With shuffle, a permutation that
// depends only on (seed, epoch) (call set_epoch before each epoch); the list is padded by repeating
// its start to a multiple of num_replicas (or, with drop_last, cut down to one), and rank r takes
// elements r, r + num_replicas, ... So every rank gets the same count, and an epoch covers every
// sample once (plus the padding).
class DistributedSampler {
 public:
  DistributedSampler(int64_t size, int num_replicas, int rank, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  // Samples per rank per epoch.
  int64_t num_samples() const;
  std::vector<int64_t> indices() const;

 private:
  int64_t size_;
  int num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0;
};

}  // namespace sinter::dist

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
#include <memory>
#include <string>
#include <vector>

#include "sinter/core/noncopyable.h"
#include "sinter/nn/module.h"
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

  void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum) {
    all_reduce_async(tensor, op)->wait();
  }
  void broadcast(Tensor& tensor, int root = 0) { broadcast_async(tensor, root)->wait(); }
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

// Private interface between the MPI process group (process_group_mpi.cpp) and its NCCL backend for
// CUDA tensors (process_group_nccl.cpp, or the stand-in process_group_nonccl.cpp that throws).
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sinter/dist.h"

namespace sinter::dist::detail {

// One NCCL communicator over the group's ranks, on the rank's GPU, with its own communication
// stream. Every call is ordered after the work queued so far on the current stream of the tensor's
// device; the returned Work makes that stream wait for the collective (no host wait).
class NcclBackend {
 public:
  virtual ~NcclBackend() = default;
  virtual std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> broadcast(Tensor& tensor, int root) = 0;
  // `out` holds size() * tensor.numel() elements, contiguous, on the same device.
  virtual std::shared_ptr<Work> all_gather(const Tensor& tensor, Tensor& out) = 0;
  // `input` holds size() * output.numel() elements; both contiguous, on the same device.
  virtual std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input,
                                               ReduceOp op) = 0;
};

struct NcclSetup {
  int rank = 0, size = 1;
  int device = 0;  // from choose_device
  std::chrono::milliseconds timeout{0};
  // Copies `nbytes` at `data` on rank 0 to every rank (an MPI broadcast on the group).
  std::function<void(void* data, size_t nbytes)> broadcast_from_rank0;
  // Gathers `nbytes` at `mine` from every rank into `all` (size * nbytes, in rank order).
  std::function<void(const void* mine, void* all, size_t nbytes)> all_gather;
};

// Makes the communicator (collective: every rank calls it). Without NCCL: throws "built without
// NCCL".
std::unique_ptr<NcclBackend> make_nccl_backend(const NcclSetup& setup);

// "[2, 3]"-style shape text, for messages.
std::string shape_text(const Tensor& tensor);

// The CUDA device of a rank (ProcessGroupOptions::device): `explicit_device` when it is not -1,
// else device 0 when the process sees one GPU (one visible GPU per rank, as with per-rank
// CUDA_VISIBLE_DEVICES or Slurm's --gpus-per-task=1), else local_rank (every GPU of the node
// visible to every rank). Throws sinter::Error naming the rank, its local rank and the device count
// when no such device exists.
int choose_device(int explicit_device, int rank, int local_rank, int device_count);

// A GPU's UUID, the same in every process that sees it, whatever its index there.
using GpuId = std::array<unsigned char, 16>;
// `ids[r]`: rank r's GPU. Throws sinter::Error naming the first two ranks that share a GPU (NCCL
// needs one GPU per rank).
void check_one_gpu_per_rank(const std::vector<GpuId>& ids);

}  // namespace sinter::dist::detail

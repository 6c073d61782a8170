// What every build of ProcessGroup has, with or without MPI and NCCL: the choice of each rank's
// GPU (ProcessGroupOptions::device) and the check that no two ranks share one.
#include <string>

#include "dist/process_group_impl.h"
#include "sinter/core/error.h"
#include "sinter/cuda.h"

namespace sinter::dist {

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key) {
  (void)color, (void)key;
  SINTER_THROW("ProcessGroup::split: this kind of process group (rank ", rank(), " of ", size(),
               ") cannot be split; make the group with ProcessGroup::init()");
}

int ProcessGroup::cuda_device() const {
  return detail::choose_device(-1, rank(), local_rank(), cuda::device_count());
}

void ProcessGroup::check_scatter_gather(const char* what, const Tensor& output, const Tensor& input,
                                        bool scatter) const {
  SINTER_CHECK(output.defined() && input.defined(), what, ": rank ", rank(), ": undefined tensor");
  SINTER_CHECK(output.dtype() == input.dtype(), what, ": rank ", rank(), ": the output is ",
               output.dtype(), " but the input is ", input.dtype());
  SINTER_CHECK(output.device() == input.device(), what, ": rank ", rank(), ": the output is on ",
               output.device(), " but the input is on ", input.device());
  const Tensor& big = scatter ? input : output;
  const Tensor& small = scatter ? output : input;
  SINTER_CHECK(big.numel() == small.numel() * size(), what, ": rank ", rank(), ": the ",
               scatter ? "input" : "output", " must hold ", size(), " (ranks) x ", small.numel(),
               " (the ", scatter ? "output" : "input", "'s elements) = ", small.numel() * size(),
               " elements, but has ", big.numel(), " (shape ", shape_str(big.shape()), ")");
}

namespace detail {

int choose_device(int explicit_device, int rank, int local_rank, int device_count) {
  SINTER_CHECK(device_count > 0, "ProcessGroup: rank ", rank,
               " needs a GPU for CUDA tensors, but sees no CUDA device");
  if (explicit_device != -1) {
    SINTER_CHECK(explicit_device >= 0 && explicit_device < device_count, "ProcessGroup: rank ",
                 rank, " was given device ", explicit_device, ", but sees ", device_count,
                 " CUDA device(s) (0 to ", device_count - 1, ", or -1 to choose automatically)");
    return explicit_device;
  }
  if (device_count == 1) return 0;
  SINTER_CHECK(local_rank < device_count, "ProcessGroup: rank ", rank, " has local rank ",
               local_rank, " but sees ", device_count,
               " CUDA devices; NCCL needs one GPU per rank: start at most one rank per GPU of a "
               "node, make one GPU visible to each rank, or set ProcessGroupOptions::device");
  return local_rank;
}

void check_one_gpu_per_rank(const std::vector<GpuId>& ids) {
  for (size_t a = 0; a < ids.size(); ++a) {
    for (size_t b = a + 1; b < ids.size(); ++b) {
      if (ids[a] != ids[b]) continue;
      std::string uuid;
      for (size_t i = 0; i < ids[a].size(); ++i) {
        static const char* const kHex = "0123456789abcdef";
        if (i == 4 || i == 6 || i == 8 || i == 10) uuid += '-';
        uuid += kHex[ids[a][i] >> 4];
        uuid += kHex[ids[a][i] & 15];
      }
      SINTER_THROW("ProcessGroup: ranks ", a, " and ", b, " use the same GPU (GPU-", uuid,
                   "); NCCL needs one GPU per rank: start at most one rank per GPU of a node, make "
                   "a different GPU visible to each rank, or set ProcessGroupOptions::device");
    }
  }
}

}  // namespace detail
}  // namespace sinter::dist

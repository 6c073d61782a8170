// What every build of ProcessGroup has, with or without MPI and NCCL: the choice of each rank's
// GPU (ProcessGroupOptions::device).
#include "dist/process_group_impl.h"
#include "sinter/core/error.h"
#include "sinter/cuda.h"

namespace sinter::dist {

int ProcessGroup::cuda_device() const {
  return detail::choose_device(-1, rank(), local_rank(), cuda::device_count());
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

}  // namespace detail
}  // namespace sinter::dist

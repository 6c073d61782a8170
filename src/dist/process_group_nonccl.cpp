// The NCCL backend's stand-in in a build with MPI but without NCCL: CUDA tensors get a clear error.
#include "dist/process_group_impl.h"

namespace sinter::dist::detail {

std::unique_ptr<NcclBackend> make_nccl_backend(const NcclSetup& setup) {
  SINTER_THROW("ProcessGroup: rank ", setup.rank,
               ": collectives on CUDA tensors need NCCL, but Sinter was built without NCCL "
               "(use CPU tensors, or build with CUDA and NCCL)");
}

}  // namespace sinter::dist::detail

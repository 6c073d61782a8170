// ProcessGroup in a build without MPI (SINTER_MPI=OFF, or MPI not found): init() throws.
#include "sinter/dist.h"

namespace sinter::dist {

std::shared_ptr<ProcessGroup> ProcessGroup::init(const ProcessGroupOptions&) {
  SINTER_THROW(
      "ProcessGroup: built without MPI (configure with MPI installed, e.g. apt-get install "
      "libopenmpi-dev openmpi-bin, and SINTER_MPI not OFF)");
}

}  // namespace sinter::dist

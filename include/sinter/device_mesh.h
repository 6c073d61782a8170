// A device mesh: the ranks of a process group laid out on up to three named dimensions (data
// parallel "dp", fully sharded "fsdp", tensor parallel "tp"), with a process group per dimension.
//
//   auto world = sinter::dist::ProcessGroup::init();                // mpirun -np 8
//   sinter::dist::DeviceMesh mesh(world, {{"fsdp", 4}, {"tp", 2}});  // prints as "fsdp 4 x tp 2"
//   mesh.group("tp").all_reduce(partial);                           // the 2 ranks of this tp group
//
// Note [device mesh]
// Rank r of the world group sits at the coordinates of r in row-major order over the dims' sizes:
// the last dim changes fastest, so a "tp" named last puts each tensor-parallel group on
// consecutive ranks, which mpirun and srun place on one node (the launch layout in the README:
// ranks filled node by node). Each dim's group holds the ranks whose coordinates differ from this
// rank's in that dim only, ranked by their coordinate there (PyTorch's init_device_mesh lays ranks
// out the same way). A tensor-parallel group talks at every layer, so a "tp" group whose ranks are
// not all on one node is an error naming them, rather than a run that crawls.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sinter/dist.h"

namespace sinter::dist {

struct MeshDim {
  std::string name;
  int size = 1;
};

class DeviceMesh {
 public:
  // Collective: every rank of `world` makes the same mesh. The dims' sizes must multiply to
  // world->size(); names are unique and non-empty, at most three of them.
  DeviceMesh(std::shared_ptr<ProcessGroup> world, std::vector<MeshDim> dims);

  const std::vector<MeshDim>& dims() const { return dims_; }
  bool has(const std::string& dim) const { return index_of(dim) >= 0; }
  // A dim's size and this rank's coordinate in it: 1 and 0 for a dim the mesh does not have.
  int size(const std::string& dim) const;
  int coordinate(const std::string& dim) const;
  // This rank's group along `dim` (an error naming the mesh's dims where it has no such dim).
  ProcessGroup& group(const std::string& dim) const { return *group_ptr(dim); }
  std::shared_ptr<ProcessGroup> group_ptr(const std::string& dim) const;
  // The world ranks of this rank's group along `dim`, in the group's rank order.
  std::vector<int> ranks(const std::string& dim) const;
  ProcessGroup& world() const { return *world_; }
  // "fsdp 2 x tp 2".
  std::string str() const;

 private:
  int index_of(const std::string& dim) const;
  int checked_index(const std::string& dim) const;

  std::shared_ptr<ProcessGroup> world_;
  std::vector<MeshDim> dims_;
  std::vector<int> coordinates_;
  std::vector<std::shared_ptr<ProcessGroup>> groups_;
};

}  // namespace sinter::dist

// DeviceMesh (Note [device mesh] in include/sinter/device_mesh.h): the layout of the ranks and the
// groups of its dims.
#include "sinter/device_mesh.h"

#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "sinter/core/error.h"

namespace sinter::dist {

namespace {

std::string dims_text(const std::vector<MeshDim>& dims) {
  std::ostringstream out;
  for (size_t i = 0; i < dims.size(); ++i)
    out << (i ? " x " : "") << dims[i].name << " " << dims[i].size;
  return out.str();
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

DeviceMesh::DeviceMesh(std::shared_ptr<ProcessGroup> world, std::vector<MeshDim> dims)
    : world_(std::move(world)), dims_(std::move(dims)) {
  SINTER_CHECK(world_ != nullptr, "DeviceMesh: no process group");
  SINTER_CHECK(!dims_.empty() && dims_.size() <= 3, "DeviceMesh: ", dims_.size(),
               " dims; a mesh has one to three (dp, fsdp, tp)");
  std::set<std::string> names;
  int64_t product = 1;
  for (const MeshDim& d : dims_) {
    SINTER_CHECK(!d.name.empty(), "DeviceMesh: a dim without a name in ", dims_text(dims_));
    SINTER_CHECK(names.insert(d.name).second, "DeviceMesh: dim '", d.name, "' repeats in ",
                 dims_text(dims_));
    SINTER_CHECK(d.size > 0, "DeviceMesh: dim '", d.name, "' has size ", d.size);
    product *= d.size;
  }
  SINTER_CHECK(product == world_->size(), "DeviceMesh: ", dims_text(dims_), " holds ", product,
               " ranks, but the process group has ", world_->size());
  // Row-major coordinates of this rank, the last dim fastest.
  coordinates_.resize(dims_.size());
  int rest = world_->rank();
  for (size_t i = dims_.size(); i-- > 0;) {
    coordinates_[i] = rest % dims_[i].size;
    rest /= dims_[i].size;
  }
  // Dim i's group: the ranks with this rank's coordinates in every other dim. Its color is this
  // rank's row-major index over the other dims, its key the coordinate in dim i.
  for (size_t i = 0; i < dims_.size(); ++i) {
    int color = 0;
    for (size_t j = 0; j < dims_.size(); ++j) {
      if (j != i) color = color * dims_[j].size + coordinates_[j];
    }
    groups_.push_back(world_->split(color, coordinates_[i]));
  }
  // Every rank learns whether any tp group spans nodes, and all throw alike (a throw on some
  // ranks only would leave the others waiting in their next collective).
  const int tp = index_of("tp");
  if (tp >= 0 && dims_[tp].size > 1) {
    const ProcessGroup& g = *groups_[tp];
    const bool spans = g.local_size() != g.size();
    Tensor any = from_vector<int64_t>({spans ? 1 : 0}, {1});
    world_->all_reduce(any, ReduceOp::Max);
    SINTER_CHECK(any.item<int64_t>() == 0, "DeviceMesh ", dims_text(dims_), ": ",
                 spans ? "rank " + std::to_string(world_->rank()) + "'s tp group (world ranks " +
                             ranks_text(ranks("tp")) + ") spans nodes"
                       : std::string("a tp group spans nodes"),
                 "; launch the ranks node by node and name tp last, so that each tp group lies "
                 "on one node");
  }
}

int DeviceMesh::index_of(const std::string& dim) const {
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i].name == dim) return static_cast<int>(i);
  }
  return -1;
}

int DeviceMesh::checked_index(const std::string& dim) const {
  const int i = index_of(dim);
  SINTER_CHECK(i >= 0, "DeviceMesh: no dim '", dim, "' in ", dims_text(dims_));
  return i;
}

int DeviceMesh::size(const std::string& dim) const {
  const int i = index_of(dim);
  return i < 0 ? 1 : dims_[i].size;
}

int DeviceMesh::coordinate(const std::string& dim) const {
  const int i = index_of(dim);
  return i < 0 ? 0 : coordinates_[i];
}

std::shared_ptr<ProcessGroup> DeviceMesh::group_ptr(const std::string& dim) const {
  return groups_[checked_index(dim)];
}

std::vector<int> DeviceMesh::ranks(const std::string& dim) const {
  const int i = checked_index(dim);
  // The world rank of each coordinate along dim i, the others this rank's: row-major again.
  std::vector<int> out;
  for (int c = 0; c < dims_[i].size; ++c) {
    int rank = 0;
    for (size_t j = 0; j < dims_.size(); ++j) {
      rank = rank * dims_[j].size + (static_cast<int>(j) == i ? c : coordinates_[j]);
    }
    out.push_back(rank);
  }
  return out;
}

std::string DeviceMesh::str() const { return dims_text(dims_); }

}  // namespace sinter::dist

// DeviceMesh and ProcessGroup::split under `mpirun -np N` (N = 2 and 4 in CI): the row-major
// layout of Note [device mesh], each dim's group holding exactly the ranks that differ from this
// one in that dim (checked by all-reducing the world ranks over it), the dims a mesh does not have,
// and the errors of a bad mesh.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "sinter/device_mesh.h"
#include "test_util.h"

namespace sinter::testing {
namespace {

using dist::DeviceMesh;
using dist::MeshDim;

// The meshes of this world size: one dim; two (an even world), the tp dim of 2 last; three, with
// a dp dim of 1.
std::vector<std::vector<MeshDim>> meshes(int n) {
  std::vector<std::vector<MeshDim>> out = {{{"dp", n}}, {{"dp", 1}, {"tp", n}}};
  if (n % 2 == 0) {
    out.push_back({{"fsdp", n / 2}, {"tp", 2}});
    out.push_back({{"dp", 1}, {"fsdp", 2}, {"tp", n / 2}});
    out.push_back({{"tp", 2}, {"dp", n / 2}});
  }
  return out;
}

// Every dim's group, all-reducing (sum and max) the world ranks over it, gives the ranks the
// layout says; its rank there is this rank's coordinate.
TEST(DeviceMesh, EachDimsGroupHoldsTheRanksOfItsLine) {
  const int n = world().size(), me = world().rank();
  for (const std::vector<MeshDim>& dims : meshes(n)) {
    const DeviceMesh mesh(world_ptr(), dims);
    SCOPED_TRACE(mesh.str());
    // Row-major, the last dim fastest.
    int at = 0;
    for (const MeshDim& d : dims) at = at * d.size + mesh.coordinate(d.name);
    EXPECT_EQ(at, me);
    for (const MeshDim& d : dims) {
      dist::ProcessGroup& g = mesh.group(d.name);
      EXPECT_EQ(g.size(), d.size);
      EXPECT_EQ(g.rank(), mesh.coordinate(d.name));
      const std::vector<int> ranks = mesh.ranks(d.name);
      ASSERT_EQ(static_cast<int>(ranks.size()), d.size);
      EXPECT_EQ(ranks[static_cast<size_t>(g.rank())], me);
      Tensor sum = from_vector<int64_t>({me}), top = from_vector<int64_t>({me});
      g.all_reduce(sum);
      g.all_reduce(top, dist::ReduceOp::Max);
      EXPECT_EQ(sum.item<int64_t>(), std::accumulate(ranks.begin(), ranks.end(), int64_t{0}));
      EXPECT_EQ(top.item<int64_t>(), *std::max_element(ranks.begin(), ranks.end()));
      // The group's all_gather lists the world ranks in the group's rank order.
      const std::vector<int64_t> gathered =
          g.all_gather(from_vector<int64_t>({me})).to_vector<int64_t>();
      EXPECT_EQ(gathered, std::vector<int64_t>(ranks.begin(), ranks.end()));
      // The layout itself, written out: the last dim's group is consecutive ranks, the first
      // dim's is every (n / size)-th rank.
      std::vector<int64_t> expected;
      const int64_t stride = &d == &dims.back() ? 1 : &d == &dims.front() ? n / d.size : 0;
      if (stride > 0) {
        const int64_t first = stride == 1 ? me - me % d.size : me % stride;
        for (int k = 0; k < d.size; ++k) expected.push_back(first + k * stride);
        EXPECT_EQ(gathered, expected) << d.name;
      }
    }
    EXPECT_EQ(mesh.size("pp"), 1);
    EXPECT_EQ(mesh.coordinate("pp"), 0);
    EXPECT_FALSE(mesh.has("pp"));
    expect_error([&] { (void)mesh.group("pp"); }, {"DeviceMesh", "no dim 'pp'", mesh.str()});
  }
}

TEST(DeviceMesh, Str) {
  const int n = world().size();
  EXPECT_EQ(DeviceMesh(world_ptr(), {{"dp", 1}, {"tp", n}}).str(),
            "dp 1 x tp " + std::to_string(n));
}

// A bad mesh is refused on every rank alike, before any collective.
TEST(DeviceMesh, BadMeshesAreErrors) {
  const int n = world().size();
  expect_error(
      [&] {
        DeviceMesh(world_ptr(), {{"dp", n + 1}});
      },
      {"DeviceMesh", "dp " + std::to_string(n + 1), "holds " + std::to_string(n + 1),
       "has " + std::to_string(n)});
  expect_error([&] { DeviceMesh(world_ptr(), {{"tp", n}, {"tp", 1}}); }, {"dim 'tp' repeats"});
  expect_error([&] { DeviceMesh(world_ptr(), {{"dp", 0}, {"tp", n}}); }, {"dim 'dp' has size 0"});
  expect_error([&] { DeviceMesh(world_ptr(), {}); }, {"DeviceMesh", "0 dims"});
  expect_error(
      [&] {
        DeviceMesh(world_ptr(), {{"a", 1}, {"b", 1}, {"c", 1}, {"d", n}});
      },
      {"DeviceMesh", "4 dims"});
  expect_error([&] { DeviceMesh(world_ptr(), {{"", n}}); }, {"without a name"});
  expect_error([&] { (void)world().split(-1, 0); }, {"split", "color -1"});
}

}  // namespace
}  // namespace sinter::testing

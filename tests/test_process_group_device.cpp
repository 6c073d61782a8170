// The choice of a rank's GPU (ProcessGroupOptions::device) and the check that no two ranks share
// one, which need neither MPI nor a GPU: explicit device, one visible GPU per rank, every GPU of
// the node visible, and the errors.
#include <gtest/gtest.h>

#include "dist/process_group_impl.h"
#include "test_util.h"

namespace sinter {
namespace {

using dist::detail::check_one_gpu_per_rank;
using dist::detail::choose_device;
using dist::detail::GpuId;
using testing::expect_error;

struct DeviceCase {
  int explicit_device, local_rank, device_count, want;
};

TEST(ProcessGroupDevice, ChoosesExplicitThenSingleVisibleThenLocalRank) {
  const DeviceCase cases[] = {
      {-1, 0, 1, 0},  // one GPU visible per rank (per-rank CUDA_VISIBLE_DEVICES, Slurm)
      {-1, 3, 1, 0},  // ... whatever the local rank
      {-1, 0, 4, 0},  // every GPU of the node visible: local rank r on cuda:r
      {-1, 3, 4, 3},  // local rank 3 on cuda:3
      {2, 0, 4, 2},   // an explicit device wins
      {0, 3, 1, 0},   // ... over one visible GPU
      {1, 5, 2, 1},   // ... and over a local rank beyond the device count
  };
  for (const DeviceCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "device " << c.explicit_device << " local rank "
                                      << c.local_rank << " of " << c.device_count << " GPUs");
    EXPECT_EQ(choose_device(c.explicit_device, 7, c.local_rank, c.device_count), c.want);
  }
}

TEST(ProcessGroupDevice, ErrorsNameRankLocalRankAndDeviceCount) {
  expect_error([] { choose_device(-1, 5, 2, 2); },
               {"rank 5", "local rank 2", "sees 2 CUDA devices", "ProcessGroupOptions::device"});
  expect_error([] { choose_device(-1, 1, 0, 0); }, {"rank 1", "sees no CUDA device"});
  expect_error([] { choose_device(3, 4, 0, 2); },
               {"rank 4", "was given device 3", "sees 2 CUDA device(s)"});
  expect_error([] { choose_device(-2, 0, 0, 2); }, {"rank 0", "was given device -2"});
}

TEST(ProcessGroupDevice, TwoRanksOnOneGpuAreAnErrorNamingBoth) {
  GpuId a{}, b{};
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<unsigned char>(i);
    b[i] = static_cast<unsigned char>(0xf0 + i);
  }
  check_one_gpu_per_rank({});
  check_one_gpu_per_rank({a});
  check_one_gpu_per_rank({a, b});
  // Four ranks on two GPUs: the first two that share one are named.
  expect_error([&] { check_one_gpu_per_rank({a, b, a, b}); },
               {"ranks 0 and 2 use the same GPU", "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f",
                "one GPU per rank"});
  expect_error([&] { check_one_gpu_per_rank({a, b, b}); },
               {"ranks 1 and 2", "GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff"});
}

}  // namespace
}  // namespace sinter

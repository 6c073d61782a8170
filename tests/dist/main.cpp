// main() of sinter_dist_tests, run under `mpirun -np N`: makes the world process group (which
// initializes MPI), runs the tests on every rank and exits non-zero on every rank if any rank
// failed. Rank 0 prints the usual report; every rank prints its own failures tagged with its rank.
// `--sinter-mode=rank-dies|timeout` runs a failure scenario instead (see run_failure.sh).
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include "dist_test_util.h"

namespace sinter::testing {
namespace {

std::shared_ptr<dist::ProcessGroup> g_world;

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  // The test's name is taken here: gtest holds its lock while it reports a part result.
  void OnTestStart(const ::testing::TestInfo& info) override {
    test_ = std::string(info.test_suite_name()) + "." + info.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] FAILED %s at %s:%d\n%s\n", rank_, test_.c_str(),
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
    std::fflush(stderr);
  }

 private:
  int rank_;
  std::string test_ = "(outside a test)";
};

// Rank 1 kills itself while rank 0 waits in an all_reduce: the job must end (mpirun notices the
// dead rank and stops the rest; failing that, rank 0's 20 s timeout fires) with a non-zero status.
int rank_dies() {
  auto pg = dist::ProcessGroup::init({.timeout = std::chrono::seconds(20)});
  Tensor t = ones({4});
  pg->all_reduce(t);
  if (pg->rank() == 1) {
    std::fprintf(stderr, "rank 1: raising SIGKILL\n");
    std::fflush(stderr);
    std::raise(SIGKILL);
  }
  try {
    pg->all_reduce(t);
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", pg->rank(), e.what());
    return 1;
  }
  std::fprintf(stderr, "rank %d: the all_reduce completed without its peer\n", pg->rank());
  return 0;
}

// Rank 1 skips an all_reduce; rank 0 (2 s timeout) must get the "timed out" error, and then an
// error for any further collective on that group. Rank 1 makes the matching call late, so that
// rank 0's abandoned request completes while it exits and both ranks finalize MPI cleanly.
int timeout_mode() {
  auto pg = dist::ProcessGroup::init({.timeout = std::chrono::seconds(2), .check_shapes = false});
  Tensor t = ones({4});
  if (pg->rank() != 0) {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    pg->all_reduce(t);
    return 0;
  }
  bool timed_out = false, refused = false;
  try {
    pg->all_reduce(t);
  } catch (const Error& e) {
    std::printf("caught: %s\n", e.what());
    timed_out = std::strstr(e.what(), "timed out after 2000 ms") != nullptr;
  }
  try {
    pg->barrier();
  } catch (const Error& e) {
    std::printf("then: %s\n", e.what());
    refused = std::strstr(e.what(), "cannot be used any more") != nullptr;
  }
  std::fflush(stdout);
  return timed_out && refused ? 0 : 1;
}

}  // namespace

dist::ProcessGroup& world() { return *g_world; }
std::shared_ptr<dist::ProcessGroup> world_ptr() { return g_world; }

}  // namespace sinter::testing

int main(int argc, char** argv) {
  using namespace sinter::testing;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--sinter-mode=rank-dies") return rank_dies();
    if (arg == "--sinter-mode=timeout") return timeout_mode();
  }
  ::testing::InitGoogleTest(&argc, argv);
  try {
    g_world = sinter::dist::ProcessGroup::init({.timeout = std::chrono::seconds(60)});
  } catch (const sinter::Error& e) {
    std::fprintf(stderr, "sinter_dist_tests: %s\n", e.what());
    return 1;
  }
  const int rank = g_world->rank();
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new RankFailurePrinter(rank));

  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  try {
    sinter::Tensor any = sinter::from_vector<int32_t>({failed});
    g_world->all_reduce(any, sinter::dist::ReduceOp::Max);
    failed = any.item<int32_t>();
  } catch (const sinter::Error& e) {
    std::fprintf(stderr, "[rank %d] %s\n", rank, e.what());
    failed = 1;
  }
  if (rank == 0 && failed) std::fprintf(stderr, "sinter_dist_tests: some rank failed\n");
  // Released here rather than by a static destructor: its NCCL communicator goes while the CUDA
  // runtime is still there.
  g_world.reset();
  return failed;
}

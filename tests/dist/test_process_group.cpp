// ProcessGroup under `mpirun -np N` (N = 2 in CI): ranks, the MPI collectives on CPU tensors with
// exact rank-dependent results, async Works, the cross-rank shape check, and the NCCL path (Cuda*).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "dist_test_util.h"
#include "test_util.h"

namespace sinter::testing {
namespace {

using dist::ReduceOp;

// Rank r holds v(r, i) = (i even ? 3r : -3r) + i + 0.5 (exact in every floating dtype used here).
double value(int r, int64_t i) {
  return (i % 2 == 0 ? 3.0 * r : -3.0 * r) + static_cast<double>(i) + 0.5;
}

Tensor rank_tensor(DType dtype, int64_t n, bool integral_values = false) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[static_cast<size_t>(i)] = value(world().rank(), i) - (integral_values ? 0.5 : 0.0);
  }
  return from_vector<double>(v, {n}).to(dtype);
}

std::vector<double> expected(ReduceOp op, int64_t n, bool integral_values = false) {
  const int size = world().size();
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0, mx = -1e300;
    for (int r = 0; r < size; ++r) {
      const double v = value(r, i) - (integral_values ? 0.5 : 0.0);
      sum += v;
      mx = std::max(mx, v);
    }
    out[static_cast<size_t>(i)] = op == ReduceOp::Sum ? sum : op == ReduceOp::Max ? mx : sum / size;
  }
  return out;
}

TEST(ProcessGroup, RankAndSize) {
  auto& pg = world();
  EXPECT_GE(pg.size(), 1);
  EXPECT_GE(pg.rank(), 0);
  EXPECT_LT(pg.rank(), pg.size());
  EXPECT_GE(pg.local_rank(), 0);
  EXPECT_LT(pg.local_rank(), pg.local_size());
  EXPECT_LE(pg.local_size(), pg.size());
  // Ranks are distinct, in order; local ranks are distinct among the ranks of one node (the CI job
  // runs on one node, where they equal the ranks).
  Tensor ranks = pg.all_gather(from_vector<int64_t>({pg.rank(), pg.local_rank(), pg.local_size()}));
  ASSERT_EQ(ranks.shape(), (Shape{pg.size(), 3}));
  std::vector<int64_t> v = ranks.to_vector<int64_t>();
  for (int r = 0; r < pg.size(); ++r) EXPECT_EQ(v[3 * r], r);
  if (pg.local_size() == pg.size()) {
    for (int r = 0; r < pg.size(); ++r) EXPECT_EQ(v[3 * r + 1], r);
  }
}

TEST(ProcessGroup, AllReduceExact) {
  for (DType dtype : {DType::f32, DType::f64, DType::i64}) {
    const bool integral = dtype == DType::i64;
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Max}) {
      if (integral && op == ReduceOp::Average) continue;
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " op " << static_cast<int>(op));
      Tensor t = rank_tensor(dtype, 7, integral);
      world().all_reduce(t, op);
      EXPECT_EQ(t.dtype(), dtype);
      EXPECT_EQ(t.to_vector<double>(), expected(op, 7, integral));
    }
  }
}

TEST(ProcessGroup, AllReduceOtherDtypes) {
  const int size = world().size();
  Tensor i32 = full({5}, world().rank() + 1, {.dtype = DType::i32});
  world().all_reduce(i32);
  EXPECT_EQ(i32.to_vector<double>(), std::vector<double>(5, size * (size + 1) / 2));
  Tensor u8 = full({3}, world().rank() + 1, {.dtype = DType::u8});
  world().all_reduce(u8, ReduceOp::Max);
  EXPECT_EQ(u8.to_vector<double>(), std::vector<double>(3, size));
  // Booleans: Sum and Max are both a logical or.
  Tensor b = from_vector<double>({0, 1, world().rank() == 0 ? 1.0 : 0.0}, {3}).to(DType::b8);
  world().all_reduce(b);
  EXPECT_EQ(b.to_vector<double>(), (std::vector<double>{0, 1, 1}));
  // bf16 is reduced in f32 and rounded back; these values are exact in bf16.
  Tensor h = rank_tensor(DType::bf16, 6);
  world().all_reduce(h, ReduceOp::Average);
  EXPECT_EQ(h.dtype(), DType::bf16);
  EXPECT_EQ(h.to_vector<double>(), expected(ReduceOp::Average, 6));
}

TEST(ProcessGroup, AllReduceNonContiguousAndEmpty) {
  // A transposed (non-contiguous) tensor is reduced in a contiguous copy, written back in place.
  Tensor base = rank_tensor(DType::f32, 6).reshape({2, 3});
  Tensor t = base.t();
  ASSERT_FALSE(t.is_contiguous());
  world().all_reduce(t);
  EXPECT_EQ(base.flatten().to_vector<double>(), expected(ReduceOp::Sum, 6));
  Tensor empty_t = zeros({0, 4});
  world().all_reduce(empty_t);
  EXPECT_EQ(empty_t.numel(), 0);
}

TEST(ProcessGroup, AsyncWaitedInReverseOrder) {
  std::vector<Tensor> ts;
  std::vector<std::shared_ptr<dist::Work>> works;
  const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Max, ReduceOp::Sum};
  for (int k = 0; k < 4; ++k) {
    ts.push_back(rank_tensor(k % 2 ? DType::f64 : DType::f32, 1000 + k));
    works.push_back(world().all_reduce_async(ts.back(), ops[k]));
  }
  Tensor bc = full({3}, world().rank() == 0 ? 5.0 : -1.0);
  works.push_back(world().broadcast_async(bc, 0));
  for (int k = static_cast<int>(works.size()) - 1; k >= 0; --k) {
    works[k]->wait();
    EXPECT_TRUE(works[k]->is_completed());
  }
  for (int k = 0; k < 4; ++k) EXPECT_EQ(ts[k].to_vector<double>(), expected(ops[k], 1000 + k));
  EXPECT_EQ(bc.to_vector<double>(), std::vector<double>(3, 5.0));
  works[0]->wait();  // waiting again is a no-op
}

TEST(ProcessGroup, IsCompletedPollsWithoutBlocking) {
  Tensor t = rank_tensor(DType::f32, 16);
  auto work = world().all_reduce_async(t, ReduceOp::Average);
  while (!work->is_completed()) {
  }
  work->wait();
  EXPECT_EQ(t.to_vector<double>(), expected(ReduceOp::Average, 16));
}

TEST(ProcessGroup, BroadcastFromRoot1) {
  const int root = world().size() > 1 ? 1 : 0;
  Tensor t = world().rank() == root ? arange(12, {.dtype = DType::f64}).reshape({3, 4})
                                    : full({3, 4}, -7.0, {.dtype = DType::f64});
  world().broadcast(t, root);
  EXPECT_EQ(t.flatten().to_vector<double>(), arange(12).to_vector<double>());
  // Non-contiguous receivers get the values in place too.
  Tensor base = full({4, 3}, world().rank() == root ? 2.0 : 0.0);
  Tensor view = base.t();
  world().broadcast(view, root);
  EXPECT_EQ(base.flatten().to_vector<double>(), std::vector<double>(12, 2.0));
}

TEST(ProcessGroup, AllGatherStacksInRankOrder) {
  const int size = world().size();
  Tensor t = full({2, 3}, world().rank() * 10.0, {.dtype = DType::i32});
  Tensor out = world().all_gather(t);
  ASSERT_EQ(out.shape(), (Shape{size, 2, 3}));
  EXPECT_EQ(out.dtype(), DType::i32);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(out[r].flatten().to_vector<double>(), std::vector<double>(6, r * 10.0));
  }
}

// expected(op, size * n), this rank's part.
std::vector<double> my_part(ReduceOp op, int64_t n, bool integral_values = false) {
  const std::vector<double> all = expected(op, world().size() * n, integral_values);
  const auto begin = all.begin() + world().rank() * n;
  return {begin, begin + n};
}

TEST(ProcessGroup, ReduceScatterGivesEachRankItsPart) {
  const int size = world().size();
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i64}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Max}) {
      if (op == ReduceOp::Average && dtype == DType::i64) continue;
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " op " << static_cast<int>(op));
      // bf16: small values only (exact in 8 bits), as in AllReduceOtherDtypes.
      const int64_t n = dtype == DType::bf16 ? 3 : 1001;
      const bool integral = dtype == DType::i64;
      Tensor in = rank_tensor(dtype, size * n, integral);
      Tensor out = full({n}, -99.0, {.dtype = dtype});
      world().reduce_scatter(out, in, op);
      EXPECT_EQ(out.dtype(), dtype);
      EXPECT_EQ(out.to_vector<double>(), my_part(op, n, integral));
    }
  }
}

TEST(ProcessGroup, ReduceScatterIntoAViewAndFromAShapedInput) {
  // Only element counts matter: a (size, 2, 3) input, and an output that is a transposed view,
  // filled in place in row-major order of the view.
  const int size = world().size();
  Tensor in = rank_tensor(DType::f32, size * 6).reshape({size, 2, 3});
  Tensor base = zeros({3, 2});
  Tensor out = base.t();
  ASSERT_FALSE(out.is_contiguous());
  world().reduce_scatter(out, in, ReduceOp::Sum);
  EXPECT_EQ(out.contiguous().flatten().to_vector<double>(), my_part(ReduceOp::Sum, 6));
  Tensor empty_out = zeros({0});
  world().reduce_scatter(empty_out, zeros({0}));
}

TEST(ProcessGroup, AllGatherIntoPlacesEachRankInOrder) {
  const int size = world().size();
  for (DType dtype : {DType::f32, DType::bf16, DType::i32, DType::u8}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor in = full({2, 3}, world().rank() + 1.0, {.dtype = dtype});
    Tensor out = zeros({size * 6}, {.dtype = dtype});
    world().all_gather_into(out, in);
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(out.narrow(0, r * 6, 6).to_vector<double>(), std::vector<double>(6, r + 1.0));
    }
  }
  // In place: the input is this rank's part of the output.
  Tensor buf = full({size, 4}, -1.0, {.dtype = DType::f64});
  buf[world().rank()].fill_(10.0 * world().rank());
  world().all_gather_into(buf, buf[world().rank()]);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(buf[r].to_vector<double>(), std::vector<double>(4, 10.0 * r));
  }
  // A non-contiguous output and input.
  Tensor src = arange(6, {.dtype = DType::f32}).reshape({2, 3}).t();
  Tensor dst_base = zeros({3, 2 * size});
  Tensor dst = dst_base.t();
  world().all_gather_into(dst, add(src, 100.0 * world().rank()));
  Tensor flat = dst.contiguous().flatten();
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(flat.narrow(0, r * 6, 6).to_vector<double>(),
              add(src.contiguous().flatten(), 100.0 * r).to_vector<double>());
  }
}

TEST(ProcessGroup, ReduceScatterAndAllGatherAsyncTogether) {
  const int size = world().size();
  std::vector<Tensor> outs, gathered;
  std::vector<std::shared_ptr<dist::Work>> works;
  for (int k = 0; k < 3; ++k) {
    outs.push_back(zeros({100 + k}));
    works.push_back(
        world().reduce_scatter_async(outs.back(), rank_tensor(DType::f32, size * (100 + k))));
    gathered.push_back(zeros({size * (5 + k)}, {.dtype = DType::f64}));
    works.push_back(world().all_gather_into_async(
        gathered.back(), full({5 + k}, world().rank(), {.dtype = DType::f64})));
  }
  for (int k = static_cast<int>(works.size()) - 1; k >= 0; --k) works[k]->wait();
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(outs[k].to_vector<double>(), my_part(ReduceOp::Sum, 100 + k));
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(gathered[k].narrow(0, r * (5 + k), 5 + k).to_vector<double>(),
                std::vector<double>(5 + k, r));
    }
  }
}

TEST(ProcessGroup, ReduceScatterAndAllGatherIntoErrors) {
  const int size = world().size();
  Tensor out = zeros({4});
  expect_error([&] { world().reduce_scatter(out, zeros({4 * size + 1})); },
               {"reduce_scatter: rank", "the input must hold", std::to_string(4 * size),
                "but has " + std::to_string(4 * size + 1)});
  expect_error([&] { world().reduce_scatter(out, zeros({4 * size}, {.dtype = DType::f64})); },
               {"reduce_scatter: rank", "the output is f32 but the input is f64"});
  Tensor iout = zeros({2}, {.dtype = DType::i32});
  expect_error(
      [&] {
        world().reduce_scatter(iout, zeros({2 * size}, {.dtype = DType::i32}), ReduceOp::Average);
      },
      {"reduce_scatter: rank", "Average needs a floating dtype"});
  Tensor gout = zeros({3 * size + 2});
  expect_error([&] { world().all_gather_into(gout, zeros({3})); },
               {"all_gather_into: rank", "the output must hold", "but has"});
  Tensor undefined;
  expect_error([&] { world().all_gather_into(undefined, zeros({3})); },
               {"all_gather_into: rank", "undefined tensor"});
  // The group is still usable.
  Tensor ok = zeros({2});
  world().reduce_scatter(ok, rank_tensor(DType::f32, 2 * size));
  EXPECT_EQ(ok.to_vector<double>(), my_part(ReduceOp::Sum, 2));
}

TEST(ProcessGroup, ReduceScatterSizeMismatchAcrossRanksIsAnError) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int64_t n = world().rank() == 0 ? 3 : 4;
  Tensor out = zeros({n});
  expect_error([&] { world().reduce_scatter(out, zeros({n * world().size()})); },
               {"reduce_scatter: rank", "another rank has shape"});
}

// Rank 0 writes a file late; after the barrier every rank must see it. Without the barrier the
// other ranks look before it exists.
TEST(ProcessGroup, BarrierWaitsForEveryRank) {
  // One name for the whole job: rank 0's process id, summed with zeros from the others.
  Tensor id =
      full({1}, world().rank() == 0 ? static_cast<double>(::getpid()) : 0.0, {.dtype = DType::i64});
  world().all_reduce(id);
  const std::filesystem::path marker =
      std::filesystem::temp_directory_path() /
      ("sinter_barrier_" + std::to_string(id.to_vector<int64_t>()[0]));
  if (world().rank() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::ofstream(marker) << "rank 0 was here\n";
  }
  world().barrier();
  EXPECT_TRUE(std::filesystem::exists(marker)) << "rank " << world().rank();
  world().barrier();  // every rank has looked before it goes
  if (world().rank() == 0) std::filesystem::remove(marker);
}

TEST(ProcessGroup, SecondGroupWorks) {
  auto pg = dist::ProcessGroup::init({.timeout = std::chrono::seconds(30)});
  EXPECT_EQ(pg->rank(), world().rank());
  EXPECT_EQ(pg->size(), world().size());
  Tensor t = rank_tensor(DType::f32, 3);
  pg->all_reduce(t);
  EXPECT_EQ(t.to_vector<double>(), expected(ReduceOp::Sum, 3));
}

// The mismatches below throw on every rank (no hang), and leave the group usable.
TEST(ProcessGroup, ShapeMismatchIsAnErrorOnEveryRank) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  Tensor t = zeros({world().rank() == 0 ? 3 : 4});
  expect_error([&] { world().all_reduce(t); },
               {"all_reduce: rank " + std::to_string(world().rank()) + " has shape [",
                "but another rank has shape [", world().rank() == 0 ? "[4]" : "[3]"});
  Tensor ok = rank_tensor(DType::f32, 5);
  world().all_reduce(ok);
  EXPECT_EQ(ok.to_vector<double>(), expected(ReduceOp::Sum, 5));
}

TEST(ProcessGroup, DtypeMismatchIsAnError) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  Tensor t = zeros({3}, {.dtype = world().rank() == 0 ? DType::f32 : DType::f64});
  expect_error([&] { world().broadcast(t, 0); }, {"broadcast: rank", "dtype f32", "dtype f64"});
  expect_error([&] { (void)world().all_gather(t); }, {"all_gather: rank", "another rank"});
}

TEST(ProcessGroup, MismatchedCallsAreAnError) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  Tensor t = zeros({3});
  // Different ops, then different collectives.
  expect_error([&] { world().all_reduce(t, world().rank() == 0 ? ReduceOp::Sum : ReduceOp::Max); },
               {"all_reduce: rank", "all_reduce Sum", "all_reduce Max"});
  expect_error(
      [&] {
        if (world().rank() == 0) {
          world().broadcast(t, 0);
        } else {
          world().all_reduce(t);
        }
      },
      {"another rank has", "broadcast from root 0", "all_reduce Sum"});
}

TEST(ProcessGroup, ArgumentErrors) {
  Tensor i = zeros({3}, {.dtype = DType::i64});
  expect_error([&] { world().all_reduce(i, ReduceOp::Average); },
               {"all_reduce: rank", "Average needs a floating dtype, got i64"});
  Tensor t = zeros({3});
  expect_error([&] { world().broadcast(t, world().size()); }, {"broadcast: root", "not a rank"});
  expect_error([] { (void)dist::ProcessGroup::init({.timeout = std::chrono::milliseconds(0)}); },
               {"timeout must be positive"});
}

// --- NCCL (CUDA tensors); one GPU per rank ---

bool enough_gpus() { return cuda::device_count() >= world().local_size(); }

TEST(CudaProcessGroup, AllReduce) {
  SINTER_REQUIRE_CUDA();
  if (!enough_gpus()) GTEST_SKIP() << "needs one GPU per rank";
  const Device dev = Device::cuda(world().cuda_device());
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Max}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " op " << static_cast<int>(op));
      // bf16 holds 8 significant bits: v(r, i) is exact in it only while i is small (128.5 is
      // not), so bf16 reduces 6 values, as on the CPU.
      const int64_t n = dtype == DType::bf16 ? 6 : 1000;
      Tensor t = rank_tensor(dtype, n).to(dev);
      world().all_reduce(t, op);
      EXPECT_EQ(t.device(), dev);
      EXPECT_EQ(t.cpu().to_vector<double>(), expected(op, n));
    }
  }
}

TEST(CudaProcessGroup, AsyncBroadcastAndAllGather) {
  SINTER_REQUIRE_CUDA();
  if (!enough_gpus()) GTEST_SKIP() << "needs one GPU per rank";
  const Device dev = Device::cuda(world().cuda_device());
  std::vector<Tensor> ts;
  std::vector<std::shared_ptr<dist::Work>> works;
  for (int k = 0; k < 3; ++k) {
    ts.push_back(rank_tensor(DType::f32, 4096 + k).to(dev));
    works.push_back(world().all_reduce_async(ts.back(), ReduceOp::Sum));
  }
  const int root = world().size() - 1;
  Tensor b = full({8}, world().rank() == root ? 3.0 : 0.0, {.device = dev});
  works.push_back(world().broadcast_async(b, root));
  for (int k = static_cast<int>(works.size()) - 1; k >= 0; --k) works[k]->wait();
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(ts[k].cpu().to_vector<double>(), expected(ReduceOp::Sum, 4096 + k));
  EXPECT_EQ(b.cpu().to_vector<double>(), std::vector<double>(8, 3.0));
  Tensor g = world().all_gather(full({2}, world().rank(), {.device = dev}));
  ASSERT_EQ(g.shape(), (Shape{world().size(), 2}));
  for (int r = 0; r < world().size(); ++r) {
    EXPECT_EQ(g[r].cpu().to_vector<double>(), std::vector<double>(2, r));
  }
}

TEST(CudaProcessGroup, ReduceScatterAndAllGatherInto) {
  SINTER_REQUIRE_CUDA();
  if (!enough_gpus()) GTEST_SKIP() << "needs one GPU per rank";
  const Device dev = Device::cuda(world().cuda_device());
  const int size = world().size();
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Max}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " op " << static_cast<int>(op));
      const int64_t n = dtype == DType::bf16 ? 3 : 4099;
      Tensor out = zeros({n}, {.dtype = dtype, .device = dev});
      world().reduce_scatter(out, rank_tensor(dtype, size * n).to(dev), op);
      EXPECT_EQ(out.cpu().to_vector<double>(), my_part(op, n));
    }
  }
  Tensor buf = zeros({size, 1000}, {.device = dev});
  buf[world().rank()].fill_(world().rank() + 0.5);
  auto work = world().all_gather_into_async(buf, buf[world().rank()]);
  Tensor other = zeros({size * 7}, {.device = dev});
  world().all_gather_into(other, full({7}, 2.0 * world().rank(), {.device = dev}));
  work->wait();
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(buf[r].cpu().to_vector<double>(), std::vector<double>(1000, r + 0.5));
    EXPECT_EQ(other.narrow(0, 7 * r, 7).cpu().to_vector<double>(), std::vector<double>(7, 2.0 * r));
  }
  Tensor strided = zeros({4, 2 * size}, {.device = dev}).t();
  expect_error([&] { world().all_gather_into(strided, zeros({8}, {.device = dev})); },
               {"all_gather_into: rank", "must be contiguous"});
}

}  // namespace
}  // namespace sinter::testing

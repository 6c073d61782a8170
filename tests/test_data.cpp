// The data layer: TensorDataset gathers, the DataLoader's order (shuffle or a sampler, e.g. the
// DistributedSampler's shards), prefetch thread, errors and shutdown, the IDX and CIFAR-10 readers
// (on files written here, and on the installed Fashion-MNIST), and the batch transforms.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sinter/data.h"
#include "sinter/dist.h"
#include "test_util.h"

namespace sinter {
namespace {

namespace fs = std::filesystem;
using data::Batch;
using data::DataLoader;
using data::Example;

using ::sinter::testing::expect_error;

using ::sinter::testing::TempDir;

using Bytes = std::vector<uint8_t>;

void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

void put_be32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}
void put_le32(Bytes& b, uint32_t v) {
  for (int s = 0; s < 32; s += 8) b.push_back(static_cast<uint8_t>(v >> s));
}

// An IDX file of unsigned bytes.
Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& payload) {
  Bytes b = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) put_be32(b, d);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

uint32_t crc32(const Bytes& b) {
  uint32_t c = 0xffffffffu;
  for (uint8_t x : b) {
    c ^= x;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// A gzip member holding `raw` in stored (uncompressed) deflate blocks, so the tests need no zlib.
Bytes gzip_stored(const Bytes& raw) {
  Bytes g = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
  size_t pos = 0;
  do {
    const size_t n = std::min<size_t>(raw.size() - pos, 65535);
    const bool last = pos + n == raw.size();
    g.push_back(last ? 1 : 0);
    g.push_back(static_cast<uint8_t>(n));
    g.push_back(static_cast<uint8_t>(n >> 8));
    g.push_back(static_cast<uint8_t>(~n));
    g.push_back(static_cast<uint8_t>(~n >> 8));
    g.insert(g.end(), raw.begin() + static_cast<std::ptrdiff_t>(pos),
             raw.begin() + static_cast<std::ptrdiff_t>(pos + n));
    pos += n;
  } while (pos < raw.size());
  put_le32(g, crc32(raw));
  put_le32(g, static_cast<uint32_t>(raw.size()));
  return g;
}

// Skips the test in a build without zlib, where reading a .gz file throws.
#define SINTER_REQUIRE_ZLIB() \
  SINTER_REQUIRE_BUILT_WITH("zlib", [] { data::read_idx("/nonexistent/sinter-probe.gz"); })

Bytes iota_bytes(size_t n, int mul = 1) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * static_cast<size_t>(mul));
  return b;
}

// n examples: input row i = (i, -i) as f32, target i as i64.
data::TensorDataset counting_dataset(int64_t n) {
  Tensor idx = arange(static_cast<double>(n), {.dtype = DType::i64});
  Tensor x = stack({idx.to(DType::f32), neg(idx.to(DType::f32))}, 1);
  return data::TensorDataset(x, idx);
}

std::vector<int64_t> targets_of(DataLoader& loader, std::vector<int64_t>* sizes = nullptr) {
  std::vector<int64_t> out;
  for (const Batch& b : loader) {
    const std::vector<int64_t> t = b.target.to_vector<int64_t>();
    const std::vector<float> x = b.input.to_vector<float>();
    EXPECT_EQ(b.input.shape(), (Shape{static_cast<int64_t>(t.size()), 2}));
    for (size_t i = 0; i < t.size(); ++i) {
      EXPECT_EQ(x[2 * i], static_cast<float>(t[i]));  // input and target stay paired
      EXPECT_EQ(x[2 * i + 1], -static_cast<float>(t[i]));
    }
    if (sizes) sizes->push_back(static_cast<int64_t>(t.size()));
    out.insert(out.end(), t.begin(), t.end());
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Datasets and the loader

TEST(TensorDataset, GetAndGetBatchReadRows) {
  data::TensorDataset ds = counting_dataset(10);
  EXPECT_EQ(ds.size(), 10);
  Example e = ds.get(3);
  EXPECT_EQ(e.input.to_vector<float>(), (std::vector<float>{3, -3}));
  EXPECT_EQ(e.target.item<int64_t>(), 3);
  Batch b = ds.get_batch({7, 2, 7});
  EXPECT_EQ(b.input.shape(), (Shape{3, 2}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{7, 2, 7}));
  // The base class's stacking gives the same batch as the gather.
  Batch s = ds.data::Dataset::get_batch({7, 2, 7});
  EXPECT_EQ(s.input.to_vector<float>(), b.input.to_vector<float>());
  EXPECT_EQ(s.target.to_vector<int64_t>(), b.target.to_vector<int64_t>());
  expect_error([&] { ds.get(10); }, {"TensorDataset::get", "10"});
  expect_error([&] { ds.get_batch({1, -1}); }, {"TensorDataset::get_batch", "-1"});
  expect_error([] { data::TensorDataset(zeros({3, 2}), zeros({4})); }, {"3 inputs but 4 targets"});
  expect_error([] { data::TensorDataset(zeros({}), zeros({1})); }, {"leading example dim"});
}

TEST(DataLoader, VisitsEveryExampleOncePerEpoch) {
  auto ds = std::make_shared<data::TensorDataset>(counting_dataset(103));
  DataLoader loader(ds, {.batch_size = 10, .shuffle = true, .seed = 5});
  EXPECT_EQ(loader.size(), 11);
  std::vector<int64_t> sizes;
  std::vector<int64_t> seen = targets_of(loader, &sizes);
  EXPECT_EQ(sizes, (std::vector<int64_t>{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 3}));
  EXPECT_EQ(seen, loader.indices(0));
  std::vector<int64_t> sorted = seen;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(103);
  for (int64_t i = 0; i < 103; ++i) all[static_cast<size_t>(i)] = i;
  EXPECT_EQ(sorted, all);
  EXPECT_NE(seen, all);  // shuffled
}

TEST(DataLoader, DropLastAndNoShuffle) {
  data::TensorDataset ds = counting_dataset(25);
  DataLoader loader(ds, {.batch_size = 8, .drop_last = true});
  EXPECT_EQ(loader.size(), 3);
  std::vector<int64_t> sizes;
  std::vector<int64_t> seen = targets_of(loader, &sizes);
  EXPECT_EQ(sizes, (std::vector<int64_t>{8, 8, 8}));
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], i);
  DataLoader small(ds, {.batch_size = 100, .drop_last = true});
  EXPECT_EQ(small.size(), 0);
  EXPECT_TRUE(targets_of(small).empty());
}

TEST(DataLoader, ShuffleDependsOnlyOnSeedAndEpoch) {
  data::TensorDataset ds = counting_dataset(50);
  DataLoader a(ds, {.batch_size = 7, .shuffle = true, .seed = 42});
  DataLoader b(ds, {.batch_size = 7, .shuffle = true, .seed = 42, .prefetch = 0});
  DataLoader c(ds, {.batch_size = 7, .shuffle = true, .seed = 43});
  const std::vector<int64_t> a0 = targets_of(a), a1 = targets_of(a);
  EXPECT_EQ(a.epoch(), 2);
  EXPECT_NE(a0, a1);  // a fresh permutation each epoch
  EXPECT_EQ(targets_of(b), a0);
  EXPECT_EQ(targets_of(b), a1);
  EXPECT_NE(targets_of(c), a0);
  a.set_epoch(1);
  EXPECT_EQ(targets_of(a), a1);
  EXPECT_EQ(a.indices(0), a0);
  // The permutation is a function of (seed, epoch) alone, the same on every platform and build:
  // pinned values guard the order that a resumed run relies on.
  data::TensorDataset ten = counting_dataset(10);
  DataLoader pinned(ten, {.shuffle = true, .seed = 42});
  EXPECT_EQ(pinned.indices(0), (std::vector<int64_t>{2, 1, 8, 9, 0, 7, 4, 6, 3, 5}));
  EXPECT_EQ(pinned.indices(1), (std::vector<int64_t>{9, 7, 0, 1, 4, 6, 8, 2, 3, 5}));
  expect_error([&] { a.set_epoch(-1); }, {"set_epoch", "-1"});
}

TEST(DataLoader, PrefetchThreadAndInlineModeGiveTheSameBatches) {
  data::TensorDataset ds = counting_dataset(64);
  for (int64_t prefetch : {0, 1, 2, 8}) {
    SCOPED_TRACE(prefetch);
    DataLoader loader(ds, {.batch_size = 5, .shuffle = true, .seed = 9, .prefetch = prefetch});
    EXPECT_EQ(targets_of(loader), loader.indices(0));
  }
}

// A dataset without a gather, which throws at one index and counts its calls.
class FlakyDataset : public data::Dataset {
 public:
  FlakyDataset(int64_t n, int64_t bad) : n_(n), bad_(bad) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override {
    ++calls;
    SINTER_CHECK(i != bad_, "FlakyDataset: example ", i, " is unreadable");
    return {full({2}, static_cast<double>(i)),
            full({}, static_cast<double>(i), {.dtype = DType::i64})};
  }
  mutable std::atomic<int64_t> calls{0};

 private:
  int64_t n_, bad_;
};

TEST(DataLoader, RethrowsWorkerErrorsWhenTheirBatchIsDue) {
  for (int64_t prefetch : {0, 2}) {
    SCOPED_TRACE(prefetch);
    FlakyDataset ds(40, 23);
    DataLoader loader(ds, {.batch_size = 4, .prefetch = prefetch});
    std::vector<int64_t> seen;
    try {
      for (const Batch& b : loader) {
        EXPECT_EQ(b.input.shape(), (Shape{4, 2}));  // the default get_batch stacks examples
        EXPECT_EQ(b.target.shape(), (Shape{4}));
        for (int64_t t : b.target.to_vector<int64_t>()) seen.push_back(t);
      }
      ADD_FAILURE() << "the epoch ended without the dataset's error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("example 23 is unreadable"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(seen.size(), 20u);  // the five batches before the bad one
    // The loader is usable again: a new epoch runs (and fails at the same place).
    expect_error(
        [&] {
          for (const Batch& b : loader) (void)b;
        },
        {"example 23"});
  }
}

// The threads of this process, from /proc (Linux).
int64_t thread_count() {
  return std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                       std::filesystem::directory_iterator());
}

// The thread count once no more than `limit` threads are listed, or after two seconds: a joined
// thread may stay listed in /proc/self/task for a moment after its join returned (on a loaded
// machine, longer), so a count taken at once can be one too high.
int64_t thread_count_settled(int64_t limit) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int64_t n = thread_count();
  while (n > limit && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    n = thread_count();
  }
  return n;
}

TEST(DataLoader, ATransformThatThrowsReachesTheLoopWithoutHangOrLeak) {
  data::TensorDataset ds(rand({64, 3}), arange(64.0, {.dtype = DType::i64}));
  {
    // The first thread a process starts may bring runtime threads of its own (ThreadSanitizer's):
    // the count is taken after one loader has come and gone.
    DataLoader warm_up(ds, {.batch_size = 8, .prefetch = 2});
    for (const Batch& b : warm_up) (void)b;
  }
  // The warm-up loader's thread may still be listed for a moment: the lowest count within a while.
  int64_t threads_before = thread_count();
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    threads_before = std::min(threads_before, thread_count());
  }
  for (int64_t prefetch : {0, 1, 4}) {
    SCOPED_TRACE(prefetch);
    int calls = 0;
    auto transform = [&calls](Batch& b, Generator&) {
      SINTER_CHECK(++calls != 3, "flip: batch ", calls, " cannot be transformed");
      b.input = neg(b.input);
    };
    {
      DataLoader loader(ds, {.batch_size = 8, .prefetch = prefetch, .transform = transform});
      int64_t seen = 0;
      expect_error(
          [&] {
            for (const Batch& b : loader) seen += b.input.size(0);
          },
          {"flip: batch 3 cannot be transformed"});
      EXPECT_EQ(seen, 16);  // the two batches before the bad one
    }                       // the loader and its thread are gone
    EXPECT_LE(thread_count_settled(threads_before), threads_before)
        << "a prefetch thread outlived its loader";
  }
}

TEST(DataLoader, StopsCleanlyMidEpoch) {
  FlakyDataset ds(100000, -1);
  {
    DataLoader loader(ds, {.batch_size = 2, .prefetch = 3});
    int n = 0;
    for (const Batch& b : loader) {
      (void)b;
      if (++n == 3) break;
    }
    // A new epoch while the previous one is in flight ends the previous one first.
    auto it = loader.begin();
    EXPECT_EQ(it->target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  }  // the destructor stops the thread with work left
  // The thread ran ahead by at most the queue bound (plus the batch in hand), never the whole
  // epoch.
  EXPECT_LT(ds.calls.load(), 100);
}

TEST(DataLoader, TransformRunsPerBatchWithAReproducibleGenerator) {
  data::TensorDataset ds(rand({40, 1, 2, 3}), arange(40.0, {.dtype = DType::i64}));
  auto flip = [](Batch& b, Generator& gen) {
    b.input = data::random_horizontal_flip(b.input, 0.5, &gen);
  };
  auto run = [&](uint64_t seed) {
    DataLoader loader(ds, {.batch_size = 8, .seed = seed, .transform = flip});
    std::vector<float> all;
    for (const Batch& b : loader) {
      std::vector<float> v = b.input.to_vector<float>();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  const std::vector<float> a = run(1), b = run(1), c = run(2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, ds.inputs().to_vector<float>());
  expect_error(
      [&] {
        DataLoader loader(
            ds, {.batch_size = 8, .transform = [](Batch& b, Generator&) { b.input = Tensor(); }});
        for (const Batch& bb : loader) (void)bb;
      },
      {"undefined tensor"});
}

TEST(DataLoader, RejectsBadOptions) {
  data::TensorDataset ds = counting_dataset(4);
  expect_error([&] { DataLoader(ds, {.batch_size = 0}); }, {"batch_size", "0"});
  expect_error([&] { DataLoader(ds, {.prefetch = -1}); }, {"prefetch", "-1"});
  expect_error([] { DataLoader(std::shared_ptr<const data::Dataset>(), {}); }, {"null dataset"});
  if (!testing::has_cuda()) {
    expect_error([&] { DataLoader(ds, {.device = Device::cuda()}); }, {"cuda:0", "no CUDA device"});
  }
}

TEST(CudaDataLoader, DeliversTheHostBatchesOnTheDevice) {
  SINTER_REQUIRE_CUDA();
  data::TensorDataset ds(randn({300, 3, 4, 4}), arange(300.0, {.dtype = DType::i64}));
  for (bool pin : {true, false}) {
    for (int64_t prefetch : {0, 2}) {
      SCOPED_TRACE(::testing::Message() << "pin " << pin << " prefetch " << prefetch);
      DataLoader host(ds, {.batch_size = 32, .shuffle = true, .seed = 3});
      DataLoader dev(ds, {.batch_size = 32,
                          .shuffle = true,
                          .seed = 3,
                          .prefetch = prefetch,
                          .device = Device::cuda(),
                          .pin_memory = pin});
      std::vector<Batch> expected;
      for (const Batch& b : host) expected.push_back(b);
      size_t i = 0;
      for (const Batch& b : dev) {
        ASSERT_LT(i, expected.size());
        EXPECT_TRUE(b.input.is_cuda() && b.target.is_cuda());
        // Work on the batch right away: the copy must have been ordered before it.
        Tensor s = b.input * 2.0;
        EXPECT_TRUE(testing::all_close(s.cpu(), expected[i].input * 2.0, 0, 0));
        EXPECT_EQ(b.target.to_vector<int64_t>(), expected[i].target.to_vector<int64_t>());
        ++i;
      }
      EXPECT_EQ(i, expected.size());
    }
  }
}

TEST(DataLoader, SamplerDecidesTheOrder) {
  auto ds = std::make_shared<data::TensorDataset>(counting_dataset(20));
  std::vector<int64_t> asked;
  // Epoch e visits 3e, 3e + 1, ..., repeating and skipping as it likes.
  auto sampler = [&asked](int64_t epoch) {
    asked.push_back(epoch);
    std::vector<int64_t> order;
    for (int64_t i = 0; i < 7; ++i) order.push_back((3 * epoch + i) % 20);
    order.push_back(3 * epoch);  // a repeat
    return order;
  };
  for (int64_t prefetch : {0, 2}) {
    SCOPED_TRACE(prefetch);
    asked.clear();
    DataLoader loader(ds, {.batch_size = 3, .prefetch = prefetch, .sampler = sampler});
    EXPECT_EQ(loader.size(), 3);  // 8 indices in batches of 3
    std::vector<int64_t> sizes;
    EXPECT_EQ(targets_of(loader, &sizes), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 0}));
    EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 2}));
    EXPECT_EQ(targets_of(loader), (std::vector<int64_t>{3, 4, 5, 6, 7, 8, 9, 3}));
    loader.set_epoch(6);
    EXPECT_EQ(targets_of(loader), (std::vector<int64_t>{18, 19, 0, 1, 2, 3, 4, 18}));
    EXPECT_EQ(loader.indices(1), (std::vector<int64_t>{3, 4, 5, 6, 7, 8, 9, 3}));
    // The epochs the loader asked for, in order (size() asks for the next one).
    EXPECT_EQ(asked, (std::vector<int64_t>{0, 0, 1, 6, 1}));
  }
  DataLoader dropping(ds, {.batch_size = 3, .drop_last = true, .sampler = sampler});
  EXPECT_EQ(dropping.size(), 2);
  EXPECT_EQ(targets_of(dropping), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  DataLoader empty(ds,
                   {.batch_size = 3, .sampler = [](int64_t) { return std::vector<int64_t>{}; }});
  EXPECT_EQ(empty.size(), 0);
  EXPECT_TRUE(targets_of(empty).empty());
}

TEST(DataLoader, RejectsSamplerWithShuffleAndBadSamplerIndices) {
  data::TensorDataset ds = counting_dataset(5);
  auto identity = [](int64_t) { return std::vector<int64_t>{0, 1, 2}; };
  expect_error([&] { DataLoader(ds, {.shuffle = true, .sampler = identity}); },
               {"DataLoader", "shuffle must be false", "sampler"});
  for (int64_t bad : {5, -1}) {
    SCOPED_TRACE(bad);
    DataLoader loader(ds, {.batch_size = 2, .sampler = [bad](int64_t) {
                             return std::vector<int64_t>{0, 4, bad};
                           }});
    expect_error(
        [&] {
          for (const Batch& b : loader) (void)b;
        },
        {"DataLoader", "sampler returned index " + std::to_string(bad), "position 2",
         "dataset of 5"});
    EXPECT_EQ(loader.epoch(), 0);  // the failed start did not use up the epoch
  }
}

// ---------------------------------------------------------------------------------------------
// DistributedSampler

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

// The shards of ranks 0..replicas-1 for one epoch.
std::vector<std::vector<int64_t>> all_shards(int64_t size, int replicas, bool shuffle,
                                             uint64_t seed, bool drop_last, int64_t epoch) {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < replicas; ++r) {
    dist::DistributedSampler s(size, replicas, r, shuffle, seed, drop_last);
    s.set_epoch(epoch);
    out.push_back(s.indices());
    EXPECT_EQ(static_cast<int64_t>(out.back().size()), s.num_samples());
  }
  return out;
}

TEST(DistributedSampler, ShardsCoverTheDataSetOncePerEpochPlusPadding) {
  for (int64_t size : {1, 7, 10, 12, 101}) {
    for (int replicas : {1, 2, 3, 4}) {
      for (bool shuffle : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "size " << size << " replicas " << replicas << " shuffle " << shuffle);
        const int64_t per_rank = (size + replicas - 1) / replicas;
        std::vector<int64_t> count(static_cast<size_t>(size), 0);
        for (const std::vector<int64_t>& shard : all_shards(size, replicas, shuffle, 7, false, 2)) {
          EXPECT_EQ(static_cast<int64_t>(shard.size()), per_rank);  // equal lengths
          for (int64_t i : shard) {
            ASSERT_TRUE(i >= 0 && i < size) << i;
            ++count[static_cast<size_t>(i)];
          }
        }
        // Every sample at least once; the padding (per_rank * replicas - size < replicas of them)
        // repeats the order from its start, so counts differ by at most one, and while the padding
        // is shorter than the order, exactly `padding` samples come twice.
        const int64_t padding = per_rank * replicas - size;
        EXPECT_LT(padding, replicas);
        const auto [lo, hi] = std::minmax_element(count.begin(), count.end());
        EXPECT_GE(*lo, 1);
        EXPECT_LE(*hi - *lo, 1);
        if (padding < size) {
          EXPECT_EQ(std::count(count.begin(), count.end(), 2), padding);
          EXPECT_EQ(*hi, padding > 0 ? 2 : 1);
        }
      }
    }
  }
}

TEST(DistributedSampler, StridesThroughTheOrderAndPadsFromItsStart) {
  // Without shuffle the order is 0..9, padded with 0, 1 to 12, and rank r takes every third.
  const auto shards = all_shards(10, 3, false, 0, false, 0);
  EXPECT_EQ(shards[0], (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(shards[1], (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_EQ(shards[2], (std::vector<int64_t>{2, 5, 8, 1}));
  // The sampler drives a loader: rank 1's batches hold its shard in order.
  auto ds = std::make_shared<data::TensorDataset>(counting_dataset(10));
  DataLoader loader(
      ds, {.batch_size = 3,
           .sampler = [s = dist::DistributedSampler(10, 3, 1, false)](int64_t epoch) mutable {
             s.set_epoch(epoch);
             return s.indices();
           }});
  EXPECT_EQ(loader.size(), 2);
  EXPECT_EQ(targets_of(loader), shards[1]);
}

TEST(DistributedSampler, ReshufflesPerEpochFromTheSeed) {
  const auto e0 = all_shards(50, 2, true, 3, false, 0);
  const auto e1 = all_shards(50, 2, true, 3, false, 1);
  EXPECT_NE(e0, e1);                                    // a new permutation each epoch
  EXPECT_EQ(all_shards(50, 2, true, 3, false, 1), e1);  // the same for the same (seed, epoch)
  EXPECT_NE(all_shards(50, 2, true, 4, false, 1), e1);  // another seed, another order
  std::vector<int64_t> both = e0[0];
  both.insert(both.end(), e0[1].begin(), e0[1].end());
  EXPECT_NE(both, iota(50));
  std::sort(both.begin(), both.end());
  EXPECT_EQ(both, iota(50));
  // Only (seed, epoch) matter: a sampler moved to epoch 1 and back matches a fresh one.
  dist::DistributedSampler s(50, 2, 0, true, 3);
  EXPECT_EQ(s.epoch(), 0);
  s.set_epoch(1);
  EXPECT_EQ(s.indices(), e1[0]);
  s.set_epoch(0);
  EXPECT_EQ(s.indices(), e0[0]);
  // Without shuffle the epoch changes nothing.
  EXPECT_EQ(all_shards(50, 2, false, 3, false, 0), all_shards(50, 2, false, 3, false, 5));
  // Pinned: every rank of every build must compute the same permutation (ranks may even run
  // different builds), and a resumed run relies on it too.
  EXPECT_EQ(dist::DistributedSampler(10, 2, 0, true, 42).indices(),
            (std::vector<int64_t>{0, 3, 5, 9, 4}));
}

TEST(DistributedSampler, DropLastCutsToAMultipleOfTheReplicas) {
  for (bool shuffle : {false, true}) {
    SCOPED_TRACE(shuffle);
    const auto shards = all_shards(11, 4, shuffle, 1, true, 0);
    std::set<int64_t> seen;
    for (const std::vector<int64_t>& shard : shards) {
      EXPECT_EQ(shard.size(), 2u);  // 11 / 4, the last 3 of the order dropped
      seen.insert(shard.begin(), shard.end());
    }
    EXPECT_EQ(seen.size(), 8u);  // no repeats
  }
  EXPECT_EQ(all_shards(11, 4, false, 0, true, 0)[3], (std::vector<int64_t>{3, 7}));
  // A multiple of the replicas loses nothing.
  EXPECT_EQ(dist::DistributedSampler(12, 4, 0, true, 0, true).num_samples(), 3);
}

TEST(DistributedSampler, MoreReplicasThanSamples) {
  // 3 samples over 5 ranks: the padded list repeats the order, so every rank still gets one.
  const auto shards = all_shards(3, 5, false, 0, false, 0);
  EXPECT_EQ(shards, (std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0}, {1}}));
  // 2 samples over 5: the order goes round more than twice.
  const auto twice = all_shards(2, 5, true, 9, false, 4);
  for (const auto& shard : twice) EXPECT_EQ(shard.size(), 1u);
  EXPECT_EQ(twice[0], twice[2]);
  EXPECT_EQ(twice[0], twice[4]);
  EXPECT_NE(twice[0], twice[1]);
  // With drop_last, or an empty data set, every rank gets nothing.
  for (const auto& shard : all_shards(3, 5, true, 0, true, 0)) EXPECT_TRUE(shard.empty());
  for (const auto& shard : all_shards(0, 2, true, 0, false, 0)) EXPECT_TRUE(shard.empty());
}

TEST(DistributedSampler, RejectsBadArguments) {
  expect_error([] { dist::DistributedSampler(-3, 2, 0); }, {"DistributedSampler", "size", "-3"});
  expect_error([] { dist::DistributedSampler(10, 0, 0); },
               {"DistributedSampler", "num_replicas", "0"});
  expect_error([] { dist::DistributedSampler(10, 2, 2); },
               {"DistributedSampler", "rank 2", "[0, 2)"});
  expect_error([] { dist::DistributedSampler(10, 2, -1); },
               {"DistributedSampler", "rank -1", "[0, 2)"});
  dist::DistributedSampler s(10, 2, 0);
  s.set_epoch(-4);
  expect_error([&] { (void)s.indices(); }, {"DistributedSampler", "epoch", "-4"});
}

// ---------------------------------------------------------------------------------------------
// IDX, MNIST, CIFAR-10

TEST(IdxReader, ReadsPlainAndGzipFiles) {
  SINTER_REQUIRE_ZLIB();
  TempDir dir;
  const Bytes payload = iota_bytes(2 * 3 * 4, 7);
  const Bytes file = idx_bytes({2, 3, 4}, payload);
  write_bytes(dir.file("a-ubyte"), file);
  write_bytes(dir.file("a-ubyte.gz"), gzip_stored(file));
  for (const std::string name : {"a-ubyte", "a-ubyte.gz"}) {
    SCOPED_TRACE(name);
    Tensor t = data::read_idx(dir.file(name));
    EXPECT_EQ(t.dtype(), DType::u8);
    EXPECT_EQ(t.shape(), (Shape{2, 3, 4}));
    EXPECT_EQ(t.to_vector<uint8_t>(), payload);
  }
  // A larger payload spans several stored blocks.
  const Bytes big = iota_bytes(70000 * 2, 3);
  write_bytes(dir.file("big.gz"), gzip_stored(idx_bytes({70000, 2}, big)));
  EXPECT_EQ(data::read_idx(dir.file("big.gz")).to_vector<uint8_t>(), big);
}

TEST(IdxReader, RejectsCorruptFiles) {
  SINTER_REQUIRE_ZLIB();
  TempDir dir;
  const std::string p = dir.file("bad-ubyte");
  auto expect_bad = [&](const Bytes& bytes, std::initializer_list<std::string> fragments) {
    write_bytes(p, bytes);
    expect_error([&] { data::read_idx(p); }, fragments);
  };
  expect_bad({0, 0}, {p, "too short", "magic"});
  expect_bad({1, 2, 8, 1, 0, 0, 0, 0}, {p, "bad magic number"});
  expect_bad({0, 0, 0x0d, 1, 0, 0, 0, 1, 0, 0, 0, 0}, {p, "type code 13"});
  expect_bad({0, 0, 8, 0}, {p, "0 dims"});
  expect_bad({0, 0, 8, 3, 0, 0, 0, 2}, {p, "truncated", "3 dims"});
  expect_bad(idx_bytes({2, 3}, iota_bytes(5)), {p, "[2, 3]", "holds 5 bytes", "truncated"});
  expect_bad(idx_bytes({2, 3}, iota_bytes(7)), {p, "[2, 3]", "holds 7 bytes"});
  expect_bad(idx_bytes({0xffffffffu, 0xffffffffu}, iota_bytes(4)),
             {p, "more elements than the file has bytes"});
  // No elements, but dims whose strides overflow an int64 (found by fuzz_idx).
  expect_bad(idx_bytes({2, 0, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {}),
             {p, "too large for a tensor"});
  // A gzip stream cut short, and bytes that are not gzip at all.
  const Bytes gz = gzip_stored(idx_bytes({2, 3}, iota_bytes(6)));
  write_bytes(p + ".gz", Bytes(gz.begin(), gz.end() - 12));
  expect_error([&] { data::read_idx(p + ".gz"); }, {p + ".gz"});
  write_bytes(p + ".gz", {0x1f, 0x8b, 8, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  expect_error([&] { data::read_idx(p + ".gz"); }, {p + ".gz"});
  expect_error([&] { data::read_idx(dir.file("nothing-here")); },
               {"nothing-here", "does not exist"});
}

// Writes an MNIST-layout split of n h-by-w images with pixel (i, k) = (i + k) % 256 and label i
// % 10.
void write_mnist(const TempDir& dir, const std::string& split, uint32_t n, uint32_t h, uint32_t w,
                 bool gz) {
  Bytes pix(static_cast<size_t>(n) * h * w), labels(n);
  for (size_t i = 0; i < n; ++i) {
    labels[i] = static_cast<uint8_t>(i % 10);
    for (size_t k = 0; k < static_cast<size_t>(h) * w; ++k) {
      pix[i * h * w + k] = static_cast<uint8_t>((i + k) % 256);
    }
  }
  Bytes images = idx_bytes({n, h, w}, pix), lab = idx_bytes({n}, labels);
  const std::string suffix = gz ? ".gz" : "";
  write_bytes(dir.file(split + "-images-idx3-ubyte" + suffix), gz ? gzip_stored(images) : images);
  write_bytes(dir.file(split + "-labels-idx1-ubyte" + suffix), gz ? gzip_stored(lab) : lab);
}

TEST(Mnist, ReadsBothSplitsScalesAndNormalizes) {
  SINTER_REQUIRE_ZLIB();
  TempDir dir;
  write_mnist(dir, "train", 12, 5, 4, /*gz=*/true);
  write_mnist(dir, "t10k", 3, 5, 4, /*gz=*/false);
  data::MNIST train(dir.str());
  EXPECT_EQ(train.size(), 12);
  EXPECT_EQ(train.inputs().shape(), (Shape{12, 1, 5, 4}));
  EXPECT_EQ(train.inputs().dtype(), DType::f32);
  EXPECT_EQ(train.targets().dtype(), DType::i64);
  EXPECT_EQ(train.targets().to_vector<int64_t>()[11], 1);
  // Pixel (7, k=9) = 16 / 255.
  EXPECT_FLOAT_EQ(train.inputs().to_vector<float>()[7 * 20 + 9], 16.0f / 255.0f);
  data::FashionMNIST test(dir.str(), /*train=*/false, {{0.5}, {0.25}});
  EXPECT_EQ(test.size(), 3);
  EXPECT_FLOAT_EQ(test.inputs().to_vector<float>()[2 * 20 + 3], (5.0f / 255.0f - 0.5f) / 0.25f);
  expect_error([] { data::MNIST("/nonexistent-sinter-root"); },
               {"MNIST", "/nonexistent-sinter-root/train-images-idx3-ubyte", ".gz", "exists"});
}

TEST(Mnist, RejectsInconsistentFiles) {
  TempDir dir;
  write_mnist(dir, "train", 4, 2, 2, false);
  write_bytes(dir.file("train-labels-idx1-ubyte"), idx_bytes({5}, iota_bytes(5)));
  expect_error([&] { data::MNIST m(dir.str()); }, {"holds 4 images", "holds 5 labels"});
  write_bytes(dir.file("train-labels-idx1-ubyte"), idx_bytes({4}, {0, 1, 10, 3}));
  expect_error([&] { data::FashionMNIST m(dir.str()); },
               {"FashionMNIST", "train-labels-idx1-ubyte", "label 10", "record 2"});
  write_bytes(dir.file("train-labels-idx1-ubyte"), idx_bytes({2, 2}, iota_bytes(4)));
  expect_error([&] { data::MNIST m(dir.str()); }, {"labels need 1"});
  write_bytes(dir.file("train-images-idx3-ubyte"), idx_bytes({4, 4}, iota_bytes(16)));
  expect_error([&] { data::MNIST m(dir.str()); }, {"train-images-idx3-ubyte", "images need 3"});
}

TEST(FashionMnist, ReadsTheInstalledDataset) {
  SINTER_REQUIRE_ZLIB();
  const std::string root = data::FashionMNIST::kDebianRoot;
  if (!fs::exists(fs::path(root) / "train-images-idx3-ubyte.gz") &&
      !fs::exists(fs::path(root) / "train-images-idx3-ubyte")) {
    GTEST_SKIP() << root << " is missing (Debian package dataset-fashion-mnist)";
  }
  for (bool train : {true, false}) {
    SCOPED_TRACE(train);
    data::FashionMNIST ds(root, train);
    const int64_t n = train ? 60000 : 10000;
    EXPECT_EQ(ds.size(), n);
    EXPECT_EQ(ds.inputs().shape(), (Shape{n, 1, 28, 28}));
    EXPECT_EQ(ds.targets().shape(), (Shape{n}));
    EXPECT_EQ(ds.inputs().min().item<float>(), 0.0f);
    EXPECT_EQ(ds.inputs().max().item<float>(), 1.0f);
    // Fashion-MNIST is balanced: every class has a tenth of each split.
    std::vector<int64_t> count(10, 0);
    for (int64_t y : ds.targets().to_vector<int64_t>()) {
      ASSERT_TRUE(y >= 0 && y <= 9) << y;
      ++count[static_cast<size_t>(y)];
    }
    EXPECT_EQ(count, std::vector<int64_t>(10, n / 10));
    const double mean = ds.inputs().mean().item<float>();
    EXPECT_NEAR(mean, 0.286, 0.01);
  }
  data::FashionMNIST norm(root, false, data::FashionMNIST::default_normalization());
  EXPECT_NEAR(norm.inputs().mean().item<float>(), 0.0, 0.05);
  DataLoader loader(norm, {.batch_size = 1000, .shuffle = true, .seed = 0});
  int64_t batches = 0;
  for (const Batch& b : loader) {
    EXPECT_EQ(b.input.shape(), (Shape{1000, 1, 28, 28}));
    ++batches;
  }
  EXPECT_EQ(batches, 10);
}

// Writes a CIFAR-10 batch of n records with label (first + i) % 10 and byte (first + i + k) % 256.
Bytes cifar_records(int first, int n) {
  Bytes b;
  for (int i = 0; i < n; ++i) {
    b.push_back(static_cast<uint8_t>((first + i) % 10));
    for (int k = 0; k < 3072; ++k) b.push_back(static_cast<uint8_t>((first + i + k) % 256));
  }
  return b;
}

TEST(Cifar10, ReadsTrainAndTestBatches) {
  TempDir dir;
  fs::create_directories(dir.file("cifar-10-batches-bin"));
  for (int f = 1; f <= 5; ++f) {
    write_bytes(dir.file("cifar-10-batches-bin/data_batch_" + std::to_string(f) + ".bin"),
                cifar_records(10 * f, 3));
  }
  write_bytes(dir.file("test_batch.bin"), cifar_records(0, 4));
  data::CIFAR10 train(dir.str());  // found in the cifar-10-batches-bin subfolder
  EXPECT_EQ(train.size(), 15);
  EXPECT_EQ(train.inputs().shape(), (Shape{15, 3, 32, 32}));
  // Record 4 is the second of data_batch_2: first = 21. Channel 1 (green), pixel (2, 5).
  const int64_t k = 1 * 1024 + 2 * 32 + 5;
  EXPECT_FLOAT_EQ(train.inputs().to_vector<float>()[4 * 3072 + k],
                  static_cast<float>((21 + k) % 256) / 255.0f);
  EXPECT_EQ(train.targets().to_vector<int64_t>()[4], 1);
  data::CIFAR10 test(dir.str(), false, data::CIFAR10::default_normalization());
  EXPECT_EQ(test.size(), 4);
  EXPECT_EQ(test.targets().to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  // Record 1, channel 2 (blue), pixel (0, 3): byte (1 + 2048 + 3) % 256 = 4.
  EXPECT_NEAR(test.inputs().to_vector<float>()[3072 + 2048 + 3], (4.0 / 255.0 - 0.4465) / 0.2616,
              1e-5);
}

TEST(Cifar10, RejectsBadFiles) {
  TempDir dir;
  expect_error([&] { data::CIFAR10 c(dir.str(), false); }, {"test_batch.bin", "does not exist"});
  Bytes b = cifar_records(0, 2);
  b.pop_back();
  write_bytes(dir.file("test_batch.bin"), b);
  expect_error([&] { data::CIFAR10 c(dir.str(), false); },
               {"test_batch.bin", "6145 bytes", "not a multiple of the 3073-byte record"});
  write_bytes(dir.file("test_batch.bin"), {});
  expect_error([&] { data::CIFAR10 c(dir.str(), false); }, {"test_batch.bin", "empty"});
  b = cifar_records(0, 2);
  b[3073] = 11;
  write_bytes(dir.file("test_batch.bin"), b);
  expect_error([&] { data::CIFAR10 c(dir.str(), false); }, {"label 11", "record 1"});
  write_bytes(dir.file("data_batch_1.bin"), cifar_records(0, 1));
  expect_error([&] { data::CIFAR10 c(dir.str(), true); }, {"data_batch_2.bin", "does not exist"});
}

// ---------------------------------------------------------------------------------------------
// Transforms

TEST(Transforms, NormalizePerChannel) {
  Tensor x = full({2, 3, 2, 2}, 1.0);
  Tensor y = data::normalize(x, {0.0, 0.5, 1.0}, {1.0, 0.5, 2.0});
  std::vector<float> v = y.to_vector<float>();
  EXPECT_EQ(v[0], 1.0f);       // channel 0
  EXPECT_EQ(v[4], 1.0f);       // channel 1: (1 - 0.5) / 0.5
  EXPECT_EQ(v[8], 0.0f);       // channel 2
  EXPECT_EQ(v[12 + 4], 1.0f);  // second sample, channel 1
  EXPECT_TRUE(testing::all_close(data::normalize(x, {0.5}, {2.0}), full({2, 3, 2, 2}, 0.25), 0, 0));
  expect_error(
      [&] {
        data::normalize(x, {0.0, 0.0}, {1.0});
      },
      {"normalize", "2 means", "3 channels"});
  expect_error([&] { data::normalize(x, {0.0}, {0.0}); }, {"normalize", "std must be positive"});
  expect_error(
      [&] {
        data::normalize(zeros({3, 2}), {0.0}, {1.0});
      },
      {"normalize", "(N, C, H, W)"});
}

TEST(Transforms, RandomCropCutsAWindowOfThePaddedImage) {
  const int64_t n = 64, c = 2, h = 5, w = 6, pad = 2;
  // Distinct, non-zero values, so a window matches at exactly one offset.
  Tensor x = arange(1.0, 1.0 + n * c * h * w, 1.0).reshape({n, c, h, w});
  Generator gen(testing::fresh_seed());
  const GeneratorState start = gen.state();
  Tensor y = data::random_crop(x, {h, w}, pad, &gen);
  ASSERT_EQ(y.shape(), (Shape{n, c, h, w}));
  const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  auto padded = [&](int64_t i, int64_t ch, int64_t r, int64_t col) -> float {
    r -= pad;
    col -= pad;
    if (r < 0 || r >= h || col < 0 || col >= w) return 0.0f;
    return xv[static_cast<size_t>(((i * c + ch) * h + r) * w + col)];
  };
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (int64_t i = 0; i < n; ++i) {
    int matches = 0;
    for (int64_t t = 0; t <= 2 * pad; ++t) {
      for (int64_t l = 0; l <= 2 * pad; ++l) {
        bool same = true;
        for (int64_t ch = 0; ch < c && same; ++ch) {
          for (int64_t r = 0; r < h && same; ++r) {
            for (int64_t col = 0; col < w && same; ++col) {
              same = yv[static_cast<size_t>(((i * c + ch) * h + r) * w + col)] ==
                     padded(i, ch, t + r, l + col);
            }
          }
        }
        if (same) {
          ++matches;
          offsets.insert({t, l});
        }
      }
    }
    EXPECT_EQ(matches, 1) << "sample " << i;
  }
  EXPECT_GT(offsets.size(), 10u);  // 25 possible offsets, 64 draws
  gen.set_state(start);
  EXPECT_EQ(data::random_crop(x, {h, w}, pad, &gen).to_vector<float>(), yv);
  // Without padding and at full size the crop is the identity; other dtypes crop too.
  EXPECT_EQ(data::random_crop(x, {h, w}, 0, &gen).to_vector<float>(), xv);
  Tensor xi = x.to(DType::u8);
  EXPECT_EQ(data::random_crop(xi, {3, 3}, 0, &gen).shape(), (Shape{n, c, 3, 3}));
  expect_error(
      [&] {
        data::random_crop(x, {h + 5, w}, pad, &gen);
      },
      {"random_crop", "does not fit"});
  expect_error([&] { data::random_crop(x, {h, w}, -1, &gen); }, {"random_crop", "padding"});
}

TEST(Transforms, RandomHorizontalFlipMirrorsSomeSamples) {
  const int64_t n = 200, c = 3, h = 2, w = 5;
  Tensor x = randn({n, c, h, w});
  Generator gen(testing::fresh_seed());
  Tensor y = data::random_horizontal_flip(x, 0.5, &gen);
  const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  int flipped = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool same = true, mirrored = true;
    for (int64_t k = 0; k < c * h * w; ++k) {
      const int64_t row = k / w, col = k % w;
      const float got = yv[static_cast<size_t>(i * c * h * w + k)];
      same = same && got == xv[static_cast<size_t>(i * c * h * w + k)];
      mirrored =
          mirrored && got == xv[static_cast<size_t>(i * c * h * w + row * w + (w - 1 - col))];
    }
    EXPECT_TRUE(same != mirrored) << "sample " << i;
    flipped += mirrored;
  }
  EXPECT_GT(flipped, 60);
  EXPECT_LT(flipped, 140);
  EXPECT_EQ(data::random_horizontal_flip(x, 0.0, &gen).to_vector<float>(), xv);
  Tensor all = data::random_horizontal_flip(x, 1.0, &gen);
  EXPECT_EQ(data::random_horizontal_flip(all, 1.0, &gen).to_vector<float>(), xv);
  expect_error([&] { data::random_horizontal_flip(x, 1.5, &gen); }, {"p must be in [0, 1]"});
}

}  // namespace
}  // namespace sinter

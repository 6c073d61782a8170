// The CPU kernels' threads (Note [cpu threads]): parallel_for's pieces, errors, nesting and
// concurrent callers; the thread count and its environment variables; and elementwise kernels that
// give the same bits at every thread count.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "internal/parallel.h"
#include "test_util.h"

namespace sinter {
namespace {

// Sets the thread count for a scope, and the previous one again at its end.
class ThreadsGuard : NonCopyable {
 public:
  explicit ThreadsGuard(int n) : previous_(get_num_threads()) { set_num_threads(n); }
  ~ThreadsGuard() { set_num_threads(previous_); }

 private:
  int previous_;
};

// The pieces one parallel_for call ran, sorted.
std::vector<std::pair<int64_t, int64_t>> pieces_of(int64_t n, int64_t grain) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> pieces;
  detail::parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mu);
    pieces.emplace_back(begin, end);
  });
  std::sort(pieces.begin(), pieces.end());
  return pieces;
}

TEST(ParallelFor, PiecesTileTheRangeAtEachThreadCount) {
  for (const int threads : {1, 2, 3, 4}) {
    const ThreadsGuard guard(threads);
    for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{100}, int64_t{1000}, int64_t{12345}}) {
      for (const int64_t grain : {int64_t{1}, int64_t{10}, int64_t{400}, int64_t{100000}}) {
        SCOPED_TRACE("threads " + std::to_string(threads) + " n " + std::to_string(n) + " grain " +
                     std::to_string(grain));
        const auto pieces = pieces_of(n, grain);
        ASSERT_EQ(static_cast<int64_t>(pieces.size()), detail::parallel_pieces(n, grain, threads));
        int64_t next = 0;
        for (const auto& [begin, end] : pieces) {
          EXPECT_EQ(begin, next);
          EXPECT_LT(begin, end);
          if (pieces.size() > 1) {
            EXPECT_GE(end - begin, grain);  // n / pieces, and pieces <= n / grain
          }
          next = end;
        }
        EXPECT_EQ(next, n);
        // The same cut every time: it depends on the sizes and the thread count alone.
        EXPECT_EQ(pieces_of(n, grain), pieces);
      }
    }
  }
  EXPECT_EQ(detail::parallel_pieces(0, 10, 4), 0);
  EXPECT_EQ(detail::parallel_pieces(10, 10, 4), 1);
  EXPECT_EQ(detail::parallel_pieces(100, 10, 4), 4);
  EXPECT_EQ(detail::parallel_pieces(30, 10, 4), 3);
}

TEST(ParallelFor, RunsOnSeveralThreadsAndSmallLoopsOnTheCaller) {
  const ThreadsGuard guard(3);
  std::mutex mu;
  std::condition_variable all_in;
  std::set<std::thread::id> ids;
  // Each of the 3 pieces waits (up to a minute) until 3 threads hold one: only 3 threads at once
  // get there, so a loop that ran on fewer would time out.
  detail::parallel_for(3000, 1, [&](int64_t, int64_t) {
    std::unique_lock<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
    all_in.notify_all();
    all_in.wait_for(lock, std::chrono::minutes(1), [&] { return ids.size() == 3; });
  });
  EXPECT_EQ(ids.size(), 3u);
  ids.clear();
  detail::parallel_for(50, 100, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 50);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST(ParallelFor, RethrowsAnErrorAfterEveryPieceRan) {
  const ThreadsGuard guard(3);
  std::atomic<int64_t> done{0};
  EXPECT_THROW(detail::parallel_for(30, 1,
                                    [&](int64_t begin, int64_t end) {
                                      done += end - begin;
                                      if (begin == 0) SINTER_THROW("piece ", begin, " failed");
                                    }),
               Error);
  EXPECT_EQ(done.load(), 30);
  // The pool runs the next loop as usual.
  std::atomic<int64_t> sum{0};
  detail::parallel_for(1000, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
}

TEST(ParallelFor, SetNumThreadsInsideALoopIsAnError) {
  const ThreadsGuard guard(2);
  std::atomic<int> errors{0};
  detail::parallel_for(2, 1, [&](int64_t, int64_t) {
    try {
      set_num_threads(1);
    } catch (const Error& e) {
      if (std::string(e.what()).find("inside a parallel loop") != std::string::npos) ++errors;
    }
  });
  EXPECT_EQ(errors.load(), 2);
  EXPECT_EQ(get_num_threads(), 2);
}

TEST(ParallelFor, NestedLoopsRunOnTheirThread) {
  const ThreadsGuard guard(2);
  std::atomic<int64_t> inner{0};
  std::atomic<bool> same_thread{true};
  detail::parallel_for(4, 1, [&](int64_t begin, int64_t end) {
    const std::thread::id outer = std::this_thread::get_id();
    for (int64_t i = begin; i < end; ++i) {
      detail::parallel_for(100, 1, [&](int64_t b, int64_t e) {
        if (std::this_thread::get_id() != outer) same_thread = false;
        inner += e - b;
      });
    }
  });
  EXPECT_EQ(inner.load(), 400);
  EXPECT_TRUE(same_thread.load());
}

TEST(ParallelFor, ConcurrentCallersEachGetTheirLoopDone) {
  const ThreadsGuard guard(2);
  auto caller = [](int64_t n, std::atomic<int64_t>* total) {
    for (int rep = 0; rep < 200; ++rep) {
      detail::parallel_for(n, 1, [&](int64_t begin, int64_t end) { *total += end - begin; });
    }
  };
  std::atomic<int64_t> a{0}, b{0};
  std::thread other(caller, 37, &b);
  caller(53, &a);
  other.join();
  EXPECT_EQ(a.load(), 200 * 53);
  EXPECT_EQ(b.load(), 200 * 37);
}

// Sets an environment variable for a scope (unset when value is nullopt).
class EnvGuard : NonCopyable {
 public:
  EnvGuard(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* v = std::getenv(name)) previous_ = v;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~EnvGuard() {
    if (previous_) {
      setenv(name_, previous_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

TEST(NumThreads, SetGetAndTheEnvironment) {
  {
    const ThreadsGuard guard(3);
    EXPECT_EQ(get_num_threads(), 3);
  }
  testing::expect_error([] { set_num_threads(0); }, {"set_num_threads", "0"});
  {
    const EnvGuard sinter("SINTER_NUM_THREADS", "5"), omp("OMP_NUM_THREADS", "2");
    EXPECT_EQ(detail::threads_from_environment(), 5);
  }
  {
    const EnvGuard sinter("SINTER_NUM_THREADS", std::nullopt), omp("OMP_NUM_THREADS", "2");
    EXPECT_EQ(detail::threads_from_environment(), 2);
  }
  {
    // OpenMP's list of a count per nesting level: the first is this level's.
    const EnvGuard sinter("SINTER_NUM_THREADS", " 3 "), omp("OMP_NUM_THREADS", "4,1");
    EXPECT_EQ(detail::threads_from_environment(), 3);
    const EnvGuard unset("SINTER_NUM_THREADS", std::nullopt);
    EXPECT_EQ(detail::threads_from_environment(), 4);
  }
  {
    const EnvGuard sinter("SINTER_NUM_THREADS", std::nullopt), omp("OMP_NUM_THREADS", std::nullopt);
    EXPECT_GE(detail::threads_from_environment(), 1);
  }
  for (const char* bad : {"0", "-1", "two", "3x", "5000"}) {
    const EnvGuard sinter("SINTER_NUM_THREADS", bad);
    testing::expect_error([] { detail::threads_from_environment(); }, {"SINTER_NUM_THREADS", bad});
  }
}

// Elementwise kernels over tensors large enough to split, contiguous and strided, at 1, 2 and 3
// threads: the same bits.
TEST(ParallelElementwise, SameBitsAtEveryThreadCount) {
  Generator gen(5);
  const Tensor a = randn({300, 517}, {}, &gen);
  const Tensor b = randn({517}, {}, &gen);
  const Tensor c = randn({517, 300}, {}, &gen).t();  // strided
  // Strided over three outer dims: a piece starts its rows mid-way through several of them.
  const Tensor d = randn({6, 7, 9, 130}, {}, &gen).permute({2, 0, 3, 1});
  auto run = [&] {
    // An in-place update: the output is also the input, element for element.
    Tensor e = a.clone();
    e.mul_(2.0);
    return std::vector<Tensor>{gelu(a),
                               a * b + 1.5,
                               add(a, c),
                               where(gt(a, 0.0), a, c),
                               a.to(DType::bf16),
                               c.contiguous(),
                               exp(c.to(DType::f64)),
                               sub(d, 1.0),
                               d.contiguous(),
                               e};
  };
  std::vector<Tensor> one;
  {
    const ThreadsGuard guard(1);
    one = run();
  }
  for (const int threads : {2, 3}) {
    const ThreadsGuard guard(threads);
    const std::vector<Tensor> many = run();
    for (size_t i = 0; i < one.size(); ++i) {
      SCOPED_TRACE("result " + std::to_string(i) + " at " + std::to_string(threads) + " threads");
      EXPECT_TRUE(testing::all_close(many[i], one[i], 0, 0));
    }
  }
}

// An expanded output has one element under many indices: the fill keeps one thread (and gives no
// race for ThreadSanitizer to see).
TEST(ParallelElementwise, AnExpandedOutputIsWrittenByOneThread) {
  const ThreadsGuard guard(2);
  Tensor x = zeros({1});
  x.expand({100000}).fill_(2.0);
  EXPECT_EQ(x.item<double>(), 2.0);
}

}  // namespace
}  // namespace sinter

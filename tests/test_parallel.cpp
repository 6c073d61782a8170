// The CPU kernels' threads (Note [cpu threads]): parallel_for's pieces, errors, nesting and
// concurrent callers; the thread count and its environment variables; and the CPU kernel families
// (elementwise, reductions, norms, softmax and losses, convolution, matmul, pooling, indexing,
// attention, optimizers) giving the same bits at every thread count.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "internal/cache_aligned.h"
#include "internal/cgroup_memory.h"
#include "internal/parallel.h"
#include "internal/sanitizers.h"
#include "sinter/optim/adam.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::ThreadsGuard;

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

// Per Note [openblas core], on a CPU with AVX2 and FMA OpenBLAS never keeps a kernel set without
// AVX2 (Debian's 0.3.21 fell back to its Prescott kernels on an Emerald Rapids Xeon, at a fifth
// of the speed): the fallback is forced here, then chosen away, on every such CPU. The CPU's
// description names the kernel set.
TEST(OpenBlasCore, LeavesAFallbackForTheKernelsOfTheCpusInstructionSets) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) {
    GTEST_SKIP() << "OPENBLAS_CORETYPE is set: the user's choice is kept";
  }
  const std::string before = blas_core();
  EXPECT_NE(cpu_description().find("; OpenBLAS " + before + ")"), std::string::npos)
      << cpu_description();
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    GTEST_SKIP() << "no AVX2 and FMA here: OpenBLAS runs " << before;
  }
  if (!detail::blas_core_reloadable()) {
    GTEST_SKIP() << "OpenBLAS without DYNAMIC_ARCH: its kernels are fixed at build (" << before
                 << ")";
  }
  EXPECT_NE(before, "Prescott") << cpu_description();
  detail::reload_blas_core("Prescott");
  ASSERT_EQ(blas_core(), "Prescott");
  detail::choose_blas_core();
  const std::string chosen = blas_core();
  EXPECT_TRUE(chosen == "SkylakeX" || chosen == "Haswell") << chosen;
  // The products still hold after the change of kernels: a small one (OpenBLAS's path) in f32.
  const Tensor a = randn({37, 29}), b = randn({29, 41});
  EXPECT_TRUE(testing::all_close(
      matmul(a, b), matmul(a.to(DType::f64), b.to(DType::f64)).to(DType::f32), 1e-5, 1e-5));
  detail::reload_blas_core(before.c_str());  // the process's own choice again
  EXPECT_EQ(blas_core(), before);
#else
  GTEST_SKIP() << "OpenBLAS's kernel choice is checked on x86-64 only";
#endif
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
  EXPECT_EQ(detail::parallel_pieces(100, 10, 4), 10);
  EXPECT_EQ(detail::parallel_pieces(30, 10, 4), 3);
  // Up to 8 pieces a thread where there are several threads (Note [cpu threads]); one at one.
  EXPECT_EQ(detail::parallel_pieces(1000, 10, 2), 16);
  EXPECT_EQ(detail::parallel_pieces(1000, 10, 1), 1);
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

// After the count is lowered, the workers started for a higher one sit the loops out: at most
// get_num_threads() threads run a loop's pieces, however many pieces it has.
TEST(ParallelFor, ALoweredThreadCountHolds) {
  {
    const ThreadsGuard four(4);
    detail::parallel_for(64, 1, [](int64_t, int64_t) {});  // starts 3 workers
  }
  const ThreadsGuard two(2);
  std::mutex mu;
  for (int rep = 0; rep < 5; ++rep) {
    std::set<std::thread::id> ids;  // the threads of this loop
    detail::parallel_for(64, 1, [&](int64_t, int64_t) {
      {
        const std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      }
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    });
    EXPECT_LE(ids.size(), 2u) << "loop " << rep;
  }
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

using testing::expect_same_bits_at_every_thread_count;

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
  expect_same_bits_at_every_thread_count(run);
}

// An expanded output has one element under many indices: the fill keeps one thread (and gives no
// race for ThreadSanitizer to see).
TEST(ParallelElementwise, AnExpandedOutputIsWrittenByOneThread) {
  const ThreadsGuard guard(2);
  Tensor x = zeros({1});
  x.expand({100000}).fill_(2.0);
  EXPECT_EQ(x.item<double>(), 2.0);
}

// The reductions in deterministic mode, over tensors large enough to split: a whole-tensor sum
// longer than one sum chunk (Note [sum chunks]), sums over a leading dim, a mean, a cumulative sum,
// a maximum with its gradient, and the parameter gradients of layer norm (Note [layer norm
// chunks]) and batch norm.
TEST(ParallelKernels, ReductionsGiveTheSameBitsAtOneTwoAndThreeThreads) {
  const DeterministicGuard deterministic;
  Generator gen(11);
  const Tensor a = randn({700, 301}, {}, &gen);
  const Tensor ln_x = randn({1030, 96}, {}, &gen), ln_dy = randn({1030, 96}, {}, &gen);
  const Tensor ln_w = randn({96}, {}, &gen), ln_b = randn({96}, {}, &gen);
  const Tensor bn_x = randn({16, 12, 20, 20}, {}, &gen), bn_dy = randn({16, 12, 20, 20}, {}, &gen);
  expect_same_bits_at_every_thread_count([&] {
    Tensor w = ln_w.clone().requires_grad_(), b = ln_b.clone().requires_grad_();
    Tensor lx = ln_x.clone().requires_grad_();
    (layer_norm(lx, {96}, w, b) * ln_dy).sum().backward();
    Tensor bx = bn_x.clone().requires_grad_();
    Tensor bw = ones({12}).requires_grad_(), bb = zeros({12}).requires_grad_();
    (batch_norm(bx, Tensor(), Tensor(), bw, bb, true) * bn_dy).sum().backward();
    Tensor ax = a.clone().requires_grad_();
    amax(ax, {1}).sum().backward();
    return std::vector<Tensor>{
        sum(a),   sum(a, {0}), mean(a, {0, 1}), cumsum(a, 0), cumsum(a, 1), sum(a.to(DType::f64)),
        w.grad(), b.grad(),    lx.grad(),       bw.grad(),    bb.grad(),    bx.grad(),
        ax.grad()};
  });
}

// Convolution (forward, input and weight gradients over a batch split in chunks: Note [conv
// threads]), matmul split by rows, columns and batch entries, pooling, softmax, cross entropy,
// embedding's gradient with repeated indices, the fused attention and an Adam step.
TEST(ParallelKernels, TheOtherFamiliesGiveTheSameBitsAtOneTwoAndThreeThreads) {
  const DeterministicGuard deterministic;
  Generator gen(12);
  const Tensor x = randn({10, 6, 17, 15}, {}, &gen), w = randn({8, 3, 3, 3}, {}, &gen);
  const Tensor bias = randn({8}, {}, &gen);
  const Tensor m1 = randn({300, 200}, {}, &gen), m2 = randn({200, 500}, {}, &gen);
  const Tensor m3 = randn({40, 700}, {}, &gen), m4 = randn({700, 90}, {}, &gen);
  const Tensor b1 = randn({6, 100, 64}, {}, &gen), b2 = randn({6, 64, 120}, {}, &gen);
  const Tensor logits = randn({500, 130}, {}, &gen);
  const Tensor target = randint(0, 130, {500}, {.dtype = DType::i64}, &gen);
  const Tensor table = randn({50, 700}, {}, &gen);
  const Tensor ids = randint(0, 50, {20, 30}, {.dtype = DType::i64}, &gen);
  const Tensor q = randn({2, 4, 70, 32}, {}, &gen), k = randn({2, 4, 90, 32}, {}, &gen),
               v = randn({2, 4, 90, 32}, {}, &gen);
  const Tensor param = randn({70000}, {}, &gen), grad = randn({70000}, {}, &gen);
  expect_same_bits_at_every_thread_count([&] {
    Tensor cx = x.clone().requires_grad_(), cw = w.clone().requires_grad_();
    Tensor cb = bias.clone().requires_grad_();
    Tensor y = conv2d(cx, cw, cb, {.stride = {2, 1}, .padding = {1, 2}, .groups = 2});
    Tensor pooled = max_pool2d(y, {2, 2});
    (pooled * pooled).sum().backward();
    Tensor lg = logits.clone().requires_grad_();
    cross_entropy(lg, target, {.label_smoothing = 0.1}).backward();
    Tensor tb = table.clone().requires_grad_();
    (embedding(tb, ids) * 0.5).sum().backward();
    Tensor aq = q.clone().requires_grad_(), ak = k.clone().requires_grad_();
    Tensor av = v.clone().requires_grad_();
    Tensor att = scaled_dot_product_attention(aq, ak, av,
                                              {.causal = true, .kernel = AttentionKernel::Fused});
    att.sum().backward();
    Tensor p = param.clone().requires_grad_();
    p.set_grad(grad.clone());
    optim::Adam adam({p}, optim::AdamOptions{.lr = 1e-2});
    adam.step();
    adam.step();
    return std::vector<Tensor>{y,
                               pooled,
                               cx.grad(),
                               cw.grad(),
                               cb.grad(),
                               matmul(m1, m2),
                               matmul(m3, m4),
                               matmul(b1, b2),
                               matmul(m2.t(), m1.t()),
                               softmax(logits, 1),
                               log_softmax(logits, 0),
                               lg.grad(),
                               tb.grad(),
                               att,
                               aq.grad(),
                               ak.grad(),
                               av.grad(),
                               p.detach()};
  });
}

// Large CPU blocks go back to a cache for the next allocation of their size class (Note [cpu
// block cache]): a reused block holds the old values, so every op that promises zeros writes them.
TEST(CpuBlockCache, ReusedBlocksAreWrittenAfresh) {
  for (int i = 0; i < 3; ++i) {
    Tensor junk = full({600000}, 7.0);
    junk = Tensor();
    const Tensor z = zeros({600000});
    EXPECT_EQ(sum(z).item<double>(), 0.0);
    const Tensor e = empty({600000}).zero_();
    EXPECT_EQ(sum(e).item<double>(), 0.0);
  }
  empty_cpu_cache();
  EXPECT_EQ(sum(zeros({600000})).item<double>(), 0.0);
  // Up to cpu_cache_limit() bytes wait (past 1 GiB on machines with more than 8 GiB): of five
  // blocks of a quarter of the limit (never touched, so never resident), three or four fit (a
  // block's size class is at most a quarter larger than asked), and asked for again they leave
  // the cache empty. Builds under AddressSanitizer keep nothing.
  const size_t limit = cpu_cache_limit();
  EXPECT_GT(limit, size_t{0});
  const auto floats = static_cast<int64_t>(limit / 16);
  empty_cpu_cache();
  EXPECT_EQ(cpu_cache_bytes(), size_t{0});
  std::vector<Tensor> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(empty({floats}));
  blocks.clear();
  const size_t kept = cpu_cache_bytes();
  if (detail::kAddressSanitizer) {
    EXPECT_EQ(kept, size_t{0});
  } else {
    EXPECT_GE(kept, 3 * (limit / 4));
    EXPECT_LE(kept, limit);
  }
  for (int i = 0; i < 5; ++i) blocks.push_back(empty({floats}));
  EXPECT_EQ(cpu_cache_bytes(), size_t{0});
  blocks.clear();
  empty_cpu_cache();
  // A request no host block can hold is an error, not a size class rounded past 2^64 to nothing.
  EXPECT_THROW(empty({int64_t{15} << 58}), Error);
  EXPECT_THROW(empty({int64_t{1} << 61}), Error);
}

// The kernels' scratch buffers start on a cache line (src/internal/cache_aligned.h) at every size,
// through a vector's growth and copies, and the arrays left uninitialized too; row pitches are
// whole cache lines.
TEST(CacheAligned, BuffersStartOnACacheLine) {
  const auto on_line = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; };
  for (const size_t n : {size_t{1}, size_t{3}, size_t{17}, size_t{1000}, size_t{1} << 20}) {
    detail::AlignedVector<double> v(n, 1.0);
    EXPECT_TRUE(on_line(v.data())) << n;
    v.resize(3 * n + 1);
    EXPECT_TRUE(on_line(v.data())) << n;
    const detail::AlignedVector<double> copy = v;
    EXPECT_TRUE(on_line(copy.data())) << n;
    EXPECT_EQ(copy, v);
    detail::AlignedVector<float> f;
    f.resize(n);
    EXPECT_TRUE(on_line(f.data())) << n;
    const auto array = detail::aligned_array_for_overwrite<uint64_t>(n);
    EXPECT_TRUE(on_line(array.get())) << n;
  }
  // Rows of a cache-aligned buffer each on a line of their own: a pitch of whole cache lines.
  EXPECT_EQ(detail::cache_line_pitch<double>(1), 8);
  EXPECT_EQ(detail::cache_line_pitch<double>(8), 8);
  EXPECT_EQ(detail::cache_line_pitch<double>(9), 16);
  EXPECT_EQ(detail::cache_line_pitch<float>(17), 32);
  EXPECT_EQ(detail::cache_line_pitch<float>(0), 0);
}

// The cache's limit reads the lowest memory limit among the process's cgroups and their
// ancestors (Note [cpu block cache]): v2's memory.max ("max" for none), v1's memory controller
// wherever it sits in the controller list; other controllers' lines, missing files and paths
// with a trailing slash.
TEST(CpuBlockCache, CgroupLimitIsTheLowestOnThePath) {
  const testing::TempDir dir;
  const auto write = [&](const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(dir.file(path)).parent_path());
    std::ofstream(dir.file(path)) << text;
  };
  write("memory.max", "max\n");
  write("a/memory.max", "3000000000\n");
  write("a/b/memory.max", "max\n");
  write("a/b/c/memory.max", "5000000000\n");
  using detail::cgroup_memory_limit;
  EXPECT_EQ(cgroup_memory_limit("0::/a/b/c\n", dir.str()), size_t{3000000000});
  EXPECT_EQ(cgroup_memory_limit("0::/a/b/c/\n", dir.str()), size_t{3000000000});
  EXPECT_EQ(cgroup_memory_limit("0::/a/b\n", dir.str()), size_t{3000000000});
  EXPECT_EQ(cgroup_memory_limit("0::/\n", dir.str()), size_t{0});           // "max" only
  EXPECT_EQ(cgroup_memory_limit("0::/elsewhere\n", dir.str()), size_t{0});  // no files
  EXPECT_EQ(cgroup_memory_limit("", dir.str()), size_t{0});
  write("memory/x/memory.limit_in_bytes", "2000000000\n");
  write("memory/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(cgroup_memory_limit("7:cpu,memory,pids:/x\n", dir.str()), size_t{2000000000});
  EXPECT_EQ(cgroup_memory_limit("7:cpu,cpuacct:/x\n3:memory:/\n", dir.str()),
            size_t{9223372036854771712ULL});
  EXPECT_EQ(cgroup_memory_limit("7:memory:/x\n0::/a/b/c\n", dir.str()), size_t{2000000000});
  EXPECT_EQ(cgroup_memory_limit("7:memoryless:/x\nnot a line\n", dir.str()), size_t{0});
  // A path without a slash (not what Linux writes) reads its own folder and the root.
  EXPECT_EQ(cgroup_memory_limit("0::a\n", dir.str()), size_t{0});
}

}  // namespace
}  // namespace sinter

// Note [cpu threads]
// The CPU kernels split their loops over one process-wide pool of get_num_threads() - 1 workers
// plus the calling thread. The library's own pool, not OpenMP: it works the same under GCC and
// Clang, ThreadSanitizer understands it (libgomp's barriers are invisible to it), and it has no
// second pool to oversubscribe the cores with. parallel_for cuts [0, n) into
// parallel_pieces(n, grain, threads) contiguous pieces of equal size (the pieces depend on n,
// grain and the thread count, never on timing), and every participant takes the next piece from
// a shared counter until none is left. With more than one thread there are up to
// kPiecesPerThread (8) pieces a thread, so that a thread that runs slower (its core shared with
// another program, its pieces longer) is made up for by the others: with one piece a thread, the
// caller of resnet20's 2-thread step waited a tenth of the time for the other thread to finish.
// Small loops (n <= grain) never leave the calling thread, so that small tensors pay no
// synchronization. One job runs at a time: a parallel_for nested in another, or one from a second
// thread while the pool is busy (a DataLoader's worker), runs serially on its own thread, so the
// cores are never oversubscribed and nothing deadlocks. In the child of a fork() (which waits for a
// running job) every loop runs on the child's one thread. Between jobs a worker polls for the next
// one for kSpin (100 us) before it sleeps, and the caller polls for the last piece likewise: a
// training step runs hundreds of loops with short serial gaps between them, and a sleeping thread
// takes tens of microseconds to wake (resnet20's step at 2 threads was about 7% faster with the
// polling, on the 2-core virtual machine). OpenMP's threads poll the same way, for longer.
#include "sinter/core/parallel.h"

#include <cblas.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "internal/parallel.h"
#include "internal/profile_op.h"
#include "sinter/core/error.h"

namespace sinter {
namespace detail {

int threads_from_environment() {
  for (const char* name : {"SINTER_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    // OMP_NUM_THREADS may list a count per nesting level ("4,1"): the first is this level's.
    std::string text(v);
    if (std::string(name) == "OMP_NUM_THREADS") text = text.substr(0, text.find(','));
    const size_t first = text.find_first_not_of(" \t"), last = text.find_last_not_of(" \t");
    text = first == std::string::npos ? "" : text.substr(first, last - first + 1);
    char* end = nullptr;
    const long n = std::strtol(text.c_str(), &end, 10);
    SINTER_CHECK(!text.empty() && *end == '\0' && n >= 1 && n <= 4096, "set_num_threads: ", name,
                 "=", v, " is not a thread count from 1 to 4096");
    return static_cast<int>(n);
  }
  // The CPUs this process may run on (its affinity mask, as taskset and cgroup cpusets set it).
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace detail

namespace {

// How long a worker polls for the next job, and the caller for the last piece, before sleeping
// (Pool::spin_until).
constexpr std::chrono::microseconds kSpin{100};

thread_local bool t_in_parallel = false;
thread_local bool t_fork_locked = false;  // before_fork took the locks on this thread

// One parallel_for's work, as every participant reads it.
struct Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, pieces = 0;
  int helpers = 0;  // workers that may join: the thread count less the caller

  // Runs piece i, [n i / pieces, n (i + 1) / pieces); what it threw, or null.
  std::exception_ptr run_piece(int64_t i) const {
    try {
      (*fn)(n * i / pieces, n * (i + 1) / pieces);
    } catch (...) {
      return std::current_exception();
    }
    return nullptr;
  }
};

class Pool {
 public:
  static Pool& get() {
    static Pool* pool = new Pool();  // never destroyed: its workers live until the process ends
    return *pool;
  }

  int threads() {
    std::lock_guard<std::mutex> lock(config_);
    if (threads_ == 0) threads_ = detail::threads_from_environment();
    return threads_;
  }

  void set_threads(int n) {
    SINTER_CHECK(n >= 1 && n <= 4096, "set_num_threads: ", n,
                 " is not a thread count from 1 to 4096");
    SINTER_CHECK(!t_in_parallel, "set_num_threads: called inside a parallel loop of a CPU kernel");
    std::unique_lock<std::mutex> job(job_, std::defer_lock);
    if (!forked_) job.lock();  // waits for a running job (a forked child has none)
    std::lock_guard<std::mutex> lock(config_);
    threads_ = n;
  }

  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= grain) return fn(0, n);
    const int threads = this->threads();
    const int64_t pieces = detail::parallel_pieces(n, grain, threads);
    const Job job{&fn, n, pieces, threads - 1};
    if (pieces <= 1 || t_in_parallel || forked_) return serially(job);
    std::unique_lock<std::mutex> job_lock(job_, std::try_to_lock);
    if (!job_lock.owns_lock() || !start_workers(threads - 1)) return serially(job);
    {
      std::lock_guard<std::mutex> lock(state_);
      job_now_ = job;
      next_.store(0);
      pending_ = pieces;
      joined_ = 0;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    work(job);
    // Every piece done, and no worker still inside work(): none can take a piece of the next job.
    spin_until([&] { return pending_.load() == 0 && active_.load() == 0; });
    std::unique_lock<std::mutex> lock(state_);
    done_.wait(lock, [&] { return pending_ == 0 && active_ == 0; });
    job_now_ = Job{};
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  Pool() {
    // The pool is the only one: OpenBLAS runs each call on its caller's thread, and cpu::gemm
    // splits large products over the pool itself. Before that, the kernels OpenBLAS runs on
    // (Note [openblas core]).
    detail::choose_blas_core();
    openblas_set_num_threads(1);
    pthread_atfork([] { Pool::get().before_fork(); }, [] { Pool::get().after_fork(false); },
                   [] { Pool::get().after_fork(true); });
  }

  // fork() waits for a running job and for a change of the thread count; the child has no
  // workers, so its loops run on its one thread. A fork from inside a loop's body (the job is
  // this thread's, or a worker's) does not wait: the child's copies of the locks stay held, and
  // its loops run serially without them.
  void before_fork() {
    t_fork_locked = !t_in_parallel;
    if (!t_fork_locked) return;
    job_.lock();
    config_.lock();
  }
  void after_fork(bool child) {
    if (child) forked_ = true;
    if (!t_fork_locked) return;
    config_.unlock();
    job_.unlock();
  }

  // Polls `ready` for up to kSpin before the caller blocks on a condition variable: waking
  // a sleeping thread takes tens of microseconds (more on a virtual machine), and a training step
  // runs hundreds of loops with short serial gaps between them (Note [cpu threads]).
  template <class Ready>
  static void spin_until(Ready ready) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 1;; ++i) {
      if (ready()) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      if (i % 64 == 0 && std::chrono::steady_clock::now() - start > kSpin) return;
    }
  }

  // The pieces one after another on the calling thread: the same cut as in parallel, and the
  // first error rethrown after every piece ran.
  static void serially(const Job& job) {
    std::exception_ptr error;
    for (int64_t i = 0; i < job.pieces; ++i) {
      std::exception_ptr e = job.run_piece(i);
      if (!error) error = e;
    }
    if (error) std::rethrow_exception(error);
  }

  // False when a thread cannot be started (the loop then runs serially).
  bool start_workers(int want) {
    try {
      while (static_cast<int>(workers_.size()) < want) {
        workers_.emplace_back([this, k = workers_.size() + 1] {
          profiler::detail::name_thread("pool worker " + std::to_string(k));
          worker();
        });
      }
    } catch (const std::system_error&) {
      return !workers_.empty() || want == 0;
    }
    return true;
  }

  // Takes pieces until none is left; the caller and every worker that joined the job run this.
  void work(const Job& job) {
    t_in_parallel = true;
    while (true) {
      const int64_t i = next_.fetch_add(1);
      if (i >= job.pieces) break;
      const std::exception_ptr error = job.run_piece(i);
      std::lock_guard<std::mutex> lock(state_);
      if (error && !error_) error_ = error;
      if (--pending_ == 0 && active_ == 0) done_.notify_all();
    }
    t_in_parallel = false;
  }

  void worker() {
    uint64_t seen = 0;
    bool spin = true;  // false while this worker is one more than the thread count wants
    while (true) {
      Job job;
      if (spin) spin_until([&] { return generation_.load() != seen; });
      {
        std::unique_lock<std::mutex> lock(state_);
        wake_.wait(lock, [&] { return generation_ != seen && job_now_.fn != nullptr; });
        seen = generation_;
        // After set_num_threads lowered the count, the workers beyond it sit the jobs out.
        spin = joined_ < job_now_.helpers;
        if (!spin) continue;
        ++joined_;
        job = job_now_;
        ++active_;
      }
      work(job);
      std::lock_guard<std::mutex> lock(state_);
      if (--active_ == 0 && pending_ == 0) done_.notify_all();
    }
  }

  std::mutex config_;  // threads_
  int threads_ = 0;    // 0: not read from the environment yet
  bool forked_ = false;
  std::mutex job_;  // held by the thread whose job the pool runs
  std::vector<std::thread> workers_;
  std::mutex state_;  // the fields below but next_
  std::condition_variable wake_, done_;
  Job job_now_;
  // Changed under state_; atomic so that spin_until may read them without it.
  std::atomic<int64_t> pending_{0};  // pieces of the job not yet done
  std::atomic<int> active_{0};       // workers inside work()
  int joined_ = 0;                   // workers that took the job now (at most its helpers)
  std::exception_ptr error_;
  std::atomic<uint64_t> generation_{0};  // changed under state_; spin_until reads it without
  std::atomic<int64_t> next_{0};
};

}  // namespace

void set_num_threads(int n) { Pool::get().set_threads(n); }
int get_num_threads() { return Pool::get().threads(); }

namespace detail {

// Pieces per thread where there is more than one (Note [cpu threads]).
constexpr int64_t kPiecesPerThread = 8;

int64_t parallel_pieces(int64_t n, int64_t grain, int threads) {
  if (n <= 0) return 0;
  const int64_t g = std::max<int64_t>(grain, 1);
  return std::clamp<int64_t>(n / g, 1, threads > 1 ? threads * kPiecesPerThread : 1);
}

void parallel_split(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  Pool::get().run(n, grain, fn);
}

}  // namespace detail
}  // namespace sinter

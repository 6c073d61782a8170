// parallel_for: the CPU kernels' intra-op parallelism (Note [cpu threads] in
// src/core/parallel.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

namespace sinter::detail {

// Has OpenBLAS run the kernels the CPU's instruction sets allow where it did not know the CPU
// (Note [openblas core] in src/core/cpu_info.cpp). Runs when the library loads, and as the pool
// starts.
void choose_blas_core();
// Whether OpenBLAS's kernel table can be loaded again (a DYNAMIC_ARCH build), and the reload
// with OPENBLAS_CORETYPE = core for that call (an Error where it cannot). No other thread may
// call OpenBLAS or getenv meanwhile: for choose_blas_core and the tests.
bool blas_core_reloadable();
void reload_blas_core(const char* core);

// Calls fn(begin, end) on pieces that tile [0, n), each of at least `grain` items (one piece when
// n <= grain), on up to get_num_threads() threads, the caller's included, and returns when every
// piece is done. The pieces depend on n, grain and the thread count alone, never on timing. The
// first exception fn throws is rethrown here, after the other pieces ran. The pieces run one after
// another on the calling thread when one thread is set, the call is nested in another
// parallel_for, or another thread is using the pool. A loop of n <= grain calls fn(0, n) directly,
// with no std::function built and no lock taken: the path of every small tensor.
void parallel_split(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

template <class F>
void parallel_for(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  if (n <= grain) {
    fn(int64_t{0}, n);
    return;
  }
  parallel_split(n, grain, std::function<void(int64_t, int64_t)>(std::forward<F>(fn)));
}

// The fewest elements' work a CPU kernel gives a thread: below it, waking a worker costs more than
// it saves.
constexpr int64_t kParallelMinWork = int64_t{1} << 15;

// parallel_for over `count` blocks of about `work` elements' work each: a piece takes at least
// kParallelMinWork elements' work, so that small tensors stay on the calling thread.
template <class F>
void parallel_blocks(int64_t count, int64_t work, F&& fn) {
  const int64_t w = work > 0 ? work : 1;
  parallel_for(count, w >= kParallelMinWork ? 1 : kParallelMinWork / w, std::forward<F>(fn));
}

// SINTER_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs of the process's affinity mask: the
// thread count at the first use. A variable that is not a whole number from 1 to 4096 is an error
// naming it.
int threads_from_environment();

// The number of pieces parallel_for splits n items of `grain` into at `threads` threads: n / grain,
// at most 8 a thread (one at one thread), at least one.
int64_t parallel_pieces(int64_t n, int64_t grain, int threads);

}  // namespace sinter::detail

// parallel_for: the CPU kernels' intra-op parallelism (Note [cpu threads] in
// src/core/parallel.cpp).
#pragma once

#include <cstdint>
#include <functional>

namespace sinter::detail {

// Calls fn(begin, end) on pieces that tile [0, n), each of at least `grain` items (one piece when
// n <= grain), on up to get_num_threads() threads, the caller's included, and returns when every
// piece is done. The pieces depend on n, grain and the thread count alone, never on timing. The
// first exception fn throws is rethrown here, after the other pieces ran. The pieces run one after
// another on the calling thread when one thread is set, the call is nested in another
// parallel_for, or another thread is using the pool.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// SINTER_NUM_THREADS, else OMP_NUM_THREADS, else the hardware threads: the thread count at the
// first use. A variable that is not a whole number from 1 to 4096 is an error naming it.
int threads_from_environment();

// The number of pieces parallel_for splits n items of `grain` into at `threads` threads.
int64_t parallel_pieces(int64_t n, int64_t grain, int threads);

}  // namespace sinter::detail

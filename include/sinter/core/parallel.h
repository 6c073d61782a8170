// The CPU kernels' threads (Note [cpu threads] in src/core/parallel.cpp).
#pragma once

namespace sinter {

// How many threads a CPU kernel splits its work over, the calling thread included. At the first
// use it is SINTER_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs of the affinity mask.
// set_num_threads(n) needs n >= 1; it waits for a kernel running on the pool to finish. The CPU
// matmuls split over these threads too: the library sets OpenBLAS to one thread per call, so that
// its own threads never compete with the pool's.
void set_num_threads(int n);
int get_num_threads();

}  // namespace sinter

// The CPU kernels' threads (Note [cpu threads] in src/core/parallel.cpp).
#pragma once

#include <string>

namespace sinter {

// The CPU's model name and which of the instruction sets the CPU kernels choose among it has
// (avx2, fma, avx512f, avx512_vnni, avx512_bf16, avx512_fp16, amx_tile, amx_int8, amx_bf16), e.g.
// "AMD EPYC (avx2 fma avx512f avx512_vnni avx512_bf16; OpenBLAS Zen)": what a speed figure names
// its machine by. The last part is blas_core().
std::string cpu_description();

// The kernel set OpenBLAS runs the CPU's BLAS calls on ("SkylakeX", "Haswell", "Zen", ...), as
// openblas_get_corename() names it, once the CPU threads have started: where OpenBLAS did not know
// the CPU and fell back to its SSE3 kernels, the library has chosen by the CPU's instruction sets
// instead (Note [openblas core] in src/core/cpu_info.cpp).
std::string blas_core();

// How many threads a CPU kernel splits its work over, the calling thread included. At the first
// use it is SINTER_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs of the affinity mask.
// set_num_threads(n) needs n >= 1; it waits for a kernel running on the pool to finish. The CPU
// matmuls split over these threads too: the library sets OpenBLAS to one thread per call, so that
// its own threads never compete with the pool's.
void set_num_threads(int n);
int get_num_threads();

// The CPU convolutions in f32 and bf16 run in oneDNN (PyTorch's CPU convolution library) when
// Sinter was built with it (onednn_available(); CMake switch SINTER_DNNL), on the threads above,
// and in the library's own im2col + GEMM kernels otherwise. The own kernels also run f64, f16 and
// what oneDNN declines. Either way the bits do not depend on the thread count. On by default;
// SINTER_ONEDNN=0 turns it off at startup (Note [onednn convolutions] in src/cpu/onednn_dnnl.cpp).
void set_onednn_enabled(bool on);
bool onednn_enabled();    // set on, and available
bool onednn_available();  // built with oneDNN

}  // namespace sinter

// The instruction sets the CPU's f32 row kernels (src/cpu/vec_rows.h) are compiled for:
// SINTER_VECTOR_CLONES before a function compiles it three times (AVX-512, AVX2 and the baseline
// x86-64), the loader picking the one this CPU runs (GCC's and Clang's target_clones); elsewhere,
// and under ThreadSanitizer, once for the baseline. For the row files (src/cpu/vec_*.cpp) and the
// kernels written with AVX-512 F intrinsics alone, which ask cpu_has_avx512f() before they run.
#pragma once

// ThreadSanitizer's runtime is not up yet when the loader runs target_clones' resolvers (IFUNC),
// and an instrumented resolver crashes the program before main: a TSan build has the baseline only.
#if defined(__SANITIZE_THREAD__)
#define SINTER_VECTOR_NO_CLONES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SINTER_VECTOR_NO_CLONES 1
#endif
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(SINTER_VECTOR_NO_CLONES)
#define SINTER_VECTOR_CLONES __attribute__((target_clones("avx512f", "arch=haswell", "default")))
#else
#define SINTER_VECTOR_CLONES
#endif

namespace sinter::cpu {

// Whether this CPU runs AVX-512 F, asked once: the test the kernels written with AVX-512 F
// intrinsics alone pass before they run (false off x86-64); those using further extensions ask
// for them too (has_avx512bf16 in src/cpu/vec_bf16.h, the int8 kernels' VNNI test).
inline bool cpu_has_avx512f() {
#if defined(__x86_64__)
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
#else
  return false;
#endif
}

}  // namespace sinter::cpu

// sinter::cpu_description (sinter/core/parallel.h): the CPU's model and the instruction sets its
// kernels choose among, from /proc/cpuinfo; and OpenBLAS's kernel set (Note [openblas core]).
#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "internal/parallel.h"
#include "sinter/core/parallel.h"

namespace sinter {

// Note [openblas core]
// OpenBLAS built for many CPUs (DYNAMIC_ARCH, as Debian's is) picks its kernels by the CPU's model
// number when it loads. A model newer than the library falls back to its Prescott kernels (SSE3):
// Debian 12's OpenBLAS 0.3.21 does so on an Emerald Rapids Xeon (family 6, model 207), where its
// sgemm of 8192 x 64 by 64 x 256 ran at 55 GFLOP/s on 2 threads against 250 with its SkylakeX
// kernels, and attention's small products at half the speed. So when the CPU threads start, before
// the first BLAS call, where OpenBLAS names Prescott while the CPU has AVX2 and FMA, the library
// has OpenBLAS load its kernel table again as OPENBLAS_CORETYPE would choose it at load:
// SkylakeX where the CPU has AVX-512 F, CD, BW, DQ and VL, else Haswell. It does so through
// OpenBLAS's own gotoblas_dynamic_quit and gotoblas_dynamic_init, found at run time (a build
// without DYNAMIC_ARCH has neither, and is left as it is), with OPENBLAS_CORETYPE set only for that
// call. A user's OPENBLAS_CORETYPE is kept. The kernel set changes the order of the sums, not
// their precision; each set gives the same bits at every thread count (Note [gemm blocks]).
void detail::choose_blas_core() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const char* core = openblas_get_corename();
  if (core == nullptr || std::strcmp(core, "Prescott") != 0) return;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  using Fn = void (*)();
  const auto quit = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  const auto init = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (quit == nullptr || init == nullptr) return;
  setenv("OPENBLAS_CORETYPE", avx512 ? "SkylakeX" : "Haswell", 1);
  quit();
  init();
  unsetenv("OPENBLAS_CORETYPE");
}

std::string blas_core() {
  (void)get_num_threads();  // the pool's start chooses the core
  const char* core = openblas_get_corename();
  return core != nullptr ? core : "unknown";
}

std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && model.empty()) model = value;
    if (key == "flags" && flags.empty()) flags = value;
  }
  if (model.empty()) model = "an unknown CPU";
  std::set<std::string> has;
  std::istringstream words(flags);
  for (std::string w; words >> w;) has.insert(w);
  std::string isas;
  for (const char* isa : {"avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                          "amx_tile", "amx_int8", "amx_bf16"}) {
    if (has.count(isa) != 0) isas += (isas.empty() ? "" : " ") + std::string(isa);
  }
  return model + " (" + (isas.empty() ? "no AVX2" : isas) + "; OpenBLAS " + blas_core() + ")";
}

}  // namespace sinter

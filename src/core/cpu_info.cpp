// sinter::cpu_description (sinter/core/parallel.h): the CPU's model and the instruction sets its
// kernels choose among, from /proc/cpuinfo; and OpenBLAS's kernel set (Note [openblas core]).
#include <cblas.h>
#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "internal/parallel.h"
#include "sinter/core/error.h"
#include "sinter/core/parallel.h"

namespace sinter {

// Note [openblas core]
// OpenBLAS built for many CPUs (DYNAMIC_ARCH, as Debian's is) picks its kernels by the CPU's model
// number when it loads. A model newer than the library falls back to old kernels: Debian 12's
// OpenBLAS 0.3.21 takes its Prescott kernels (SSE3) on an Emerald Rapids Xeon (family 6, model
// 207), where its sgemm of 8192 x 64 by 64 x 256 ran at 55 GFLOP/s on 2 threads against 250 with
// its SkylakeX kernels, and attention's small products at half the speed (an AMD family it does
// not know takes its Barcelona kernels). So where OpenBLAS runs a kernel set without AVX2 while the
// CPU and the system have AVX2 and FMA, the library has OpenBLAS load its kernel table again as
// OPENBLAS_CORETYPE would choose it at load: SkylakeX where the CPU has AVX-512 F, CD, BW, DQ and
// VL, else Haswell. It does so through OpenBLAS's own gotoblas_dynamic_quit and
// gotoblas_dynamic_init, found at run time (a build without DYNAMIC_ARCH has neither and is left
// as it is), with OPENBLAS_CORETYPE set for that call alone. Between the two calls OpenBLAS has
// no kernel table, and setenv must not race another thread's getenv, so it runs when the library
// loads (a constructor, after OpenBLAS's own and before the program's threads), and again, as a
// no-op, when the CPU threads start (which keeps this file linked from a static library). A
// user's OPENBLAS_CORETYPE is kept. The kernel set changes the order of the sums, not their
// precision; each set gives the same bits at every thread count (Note [gemm blocks]).
namespace {

// OpenBLAS's kernel sets that use AVX2, by openblas_get_corename()'s names.
bool avx2_core(const char* core) {
  for (const char* name :
       {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator"}) {
    if (strcasecmp(core, name) == 0) return true;
  }
  return false;
}

}  // namespace

void detail::reload_blas_core(const char* core) {
  using Fn = void (*)();
  const auto quit = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  const auto init = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  SINTER_CHECK(quit != nullptr && init != nullptr,
               "reload_blas_core: this OpenBLAS has no gotoblas_dynamic_init (not DYNAMIC_ARCH)");
  setenv("OPENBLAS_CORETYPE", core, 1);
  quit();
  init();
  unsetenv("OPENBLAS_CORETYPE");
}

bool detail::blas_core_reloadable() {
  return dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit") != nullptr &&
         dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init") != nullptr;
}

void detail::choose_blas_core() {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || !blas_core_reloadable()) return;
  const char* core = openblas_get_corename();
  if (core == nullptr || avx2_core(core)) return;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  reload_blas_core(avx512 ? "SkylakeX" : "Haswell");
#endif
}

namespace {
[[gnu::constructor]] void choose_blas_core_at_load() { detail::choose_blas_core(); }
}  // namespace

std::string blas_core() {
  (void)get_num_threads();  // the pool's start, after which the core stays
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
    if (has.count(isa) == 0) continue;
    if (!isas.empty()) isas += ' ';
    isas += isa;
  }
  std::string out = model;
  out += " (";
  out += isas.empty() ? "no AVX2" : isas;
  out += "; OpenBLAS ";
  out += blas_core();
  out += ')';
  return out;
}

}  // namespace sinter

// What the CPU's oneDNN paths share (src/cpu/onednn_dnnl.cpp, the convolutions and GEMMs, and
// src/cpu/infer_plan_dnnl.cpp, the inference plans): the engine, the refusal of oneDNN's reference
// loops, and oneDNN's OpenMP held to the calling thread (Note [onednn convolutions]).
#pragma once

#include <dlfcn.h>

#include <dnnl.hpp>
#include <string>

namespace sinter::cpu::onednn {

// The process's CPU engine.
inline dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// oneDNN's reference implementations (plain loops, for CPUs without the ISA of its JIT kernels) are
// far slower than the library's own kernels: a plan never takes one.
inline void refuse_reference(const dnnl::primitive_desc_base& pd) {
  const std::string impl = pd.impl_info_str();
  if (impl.find("ref") != std::string::npos) {
    throw dnnl::error(dnnl_unimplemented, "a reference implementation");
  }
}

// The OpenMP runtime oneDNN runs on, looked up at run time (the library then needs no OpenMP
// flags to build): libgomp's, by its own handle, so that another runtime loaded first (libiomp5,
// libomp) is not the one set. `usable` is false where oneDNN's threads cannot be held to one: then
// no plan is built and the own kernels run.
struct OpenMP {
  using Set = void (*)(int);
  using Get = int (*)();
  Set set = nullptr;
  Get get = nullptr;
  bool usable = false;

  static const OpenMP& runtime() {
    static const OpenMP omp = [] {
      OpenMP o;
      const unsigned runtime = dnnl::version()->cpu_runtime;
      if (runtime == DNNL_RUNTIME_SEQ) {
        o.usable = true;
      } else if (runtime == DNNL_RUNTIME_OMP) {
        if (void* gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD)) {
          o.set = reinterpret_cast<Set>(dlsym(gomp, "omp_set_num_threads"));
          o.get = reinterpret_cast<Get>(dlsym(gomp, "omp_get_max_threads"));
          o.usable = o.set != nullptr && o.get != nullptr;
        }
      }
      return o;
    }();
    return omp;
  }
};

// The calling thread's OpenMP thread count set to 1 for a scope (oneDNN on OpenMP then runs each
// call on the calling thread) and restored after.
class OneOpenMPThread {
 public:
  OneOpenMPThread() {
    const OpenMP& omp = OpenMP::runtime();
    if (omp.set == nullptr) return;
    previous_ = omp.get();
    if (previous_ != 1) omp.set(1);
  }
  ~OneOpenMPThread() {
    if (previous_ > 1) OpenMP::runtime().set(previous_);
  }
  OneOpenMPThread(const OneOpenMPThread&) = delete;
  OneOpenMPThread& operator=(const OneOpenMPThread&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace sinter::cpu::onednn

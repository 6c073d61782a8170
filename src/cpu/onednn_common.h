// What the CPU's oneDNN paths share (src/cpu/onednn_dnnl.cpp, the convolutions and GEMMs, and
// src/cpu/infer_plan_dnnl.cpp, the inference plans): the engine, the refusal of oneDNN's reference
// loops, and oneDNN's OpenMP held to the calling thread (Note [onednn convolutions]).
#pragma once

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdint>
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

// Note [onednn signals]
// oneDNN's generated f32 GEMM kernels (the "gemm:jit" implementations of its matmuls and of its
// GEMM-based convolutions) point the stack pointer at a heap buffer while they run, up to oneDNN
// 3.11.1 (oneDNN issue 4845). A signal delivered to the thread meanwhile (Ctrl-C in Python, the
// SIGTERM or SIGUSR1 of a preemption, a sampling profiler's SIGPROF) has its frame written there:
// the heap is corrupted, and the process aborts later in some free() ("corrupted size vs.
// prev_size"). So a primitive whose implementation name holds "gemm" runs with the thread's
// asynchronous signals held (pthread_sigmask, two system calls a call): one that arrives
// meanwhile waits until the call returns, a few milliseconds at most, and is then delivered as
// usual. The synchronous signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT) are
// never held: held, they would kill the process without its handler. Every other implementation
// keeps the stack pointer where it is and runs without the two calls.
// (OneDnnGemm.SignalsNeverLandOnAMovedStack sends signals through a run of such GEMMs.)
inline bool holds_signals(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).find("gemm") != std::string::npos;
}

// The calling thread's asynchronous signals held for a scope where `hold` (Note [onednn
// signals]); the thread's mask restored after.
class SignalsHeld {
 public:
  explicit SignalsHeld(bool hold) {
    if (!hold) return;
    sigset_t all;
    sigfillset(&all);
    for (const int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT}) {
      sigdelset(&all, s);
    }
    held_ = pthread_sigmask(SIG_BLOCK, &all, &previous_) == 0;
  }
  ~SignalsHeld() {
    if (held_) pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  sigset_t previous_{};
  bool held_ = false;
};

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

// The images of a chunk of a batch of n: `most` (clamped to [1, n]), or where the batch needs more
// than one chunk, the count nearest to it within [most / 2, 3 most / 2] that cuts the batch into
// equal chunks, a multiple of four of them, so that 2 or 4 threads get the same work; `most` where
// none does, the last chunk smaller. It depends on n and most alone, never on the thread count.
inline int64_t even_chunk(int64_t n, int64_t most) {
  most = std::clamp<int64_t>(most, 1, n);
  if (most == n) return most;
  const int64_t low = std::max<int64_t>(1, most / 2), high = std::min(n - 1, most + most / 2);
  const auto fits = [&](int64_t per) {
    return per >= low && per <= high && n % per == 0 && (n / per) % 4 == 0;
  };
  for (int64_t d = 0; d <= most; ++d) {
    if (fits(most + d)) return most + d;
    if (fits(most - d)) return most - d;
  }
  return most;
}

}  // namespace sinter::cpu::onednn

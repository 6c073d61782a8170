// SINTER_PROFILE_OP("name", tensors...): the first line of every public op (Note [profiler]).
// Costs one relaxed atomic load while no profiler::Guard lives.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "sinter/core/noncopyable.h"
#include "sinter/tensor.h"

namespace sinter::profiler::detail {

extern std::atomic<bool> g_recording;

// The bytes of Note [saved bytes] in src/profiler/profiler.cpp: the storages autograd holds for
// backward, counted once each however many saved tensors share them. saved_add returns true (the
// caller must call saved_remove once later).
bool saved_add(const void* storage, size_t nbytes);
void saved_remove(const void* storage);

// The shapes of an op's tensor arguments ("[2, 3], [3]"); other arguments add nothing.
inline void append_shapes(std::string&, bool&) {}
template <class... Rest>
void append_shapes(std::string& out, bool& cuda, const Tensor& t, const Rest&... rest);
template <class... Rest>
void append_shapes(std::string& out, bool& cuda, const std::vector<Tensor>& ts,
                   const Rest&... rest);

template <class... Rest>
void append_shapes(std::string& out, bool& cuda, const Tensor& t, const Rest&... rest) {
  if (!out.empty()) out += ", ";
  if (t.defined()) {
    out += shape_str(t.shape());
    cuda = cuda || t.device().is_cuda();
  } else {
    out += "undefined";
  }
  append_shapes(out, cuda, rest...);
}

template <class... Rest>
void append_shapes(std::string& out, bool& cuda, const std::vector<Tensor>& ts,
                   const Rest&... rest) {
  for (const Tensor& t : ts) append_shapes(out, cuda, t);
  append_shapes(out, cuda, rest...);
}

// Whether `name` is the op this thread is inside of, one level up: an op that calls itself again
// (autocast's re-entry on cast operands) is recorded once.
bool reentered(const char* name);

struct Backward {};

// Records one op from construction to destruction while a Guard records.
class OpScope : NonCopyable {
 public:
  template <class... Tensors>
  OpScope(const char* name, const Tensors&... inputs) {
    if (!g_recording.load(std::memory_order_relaxed) || reentered(name)) return;
    std::string shapes;
    bool cuda = false;
    append_shapes(shapes, cuda, inputs...);
    begin(name, std::move(shapes), cuda, false);
  }
  // The backward of the autograd node `node_name` on its gradients (the engine's): "<op> backward"
  // for a node an op recorded, the name alone for a leaf's AccumulateGrad.
  OpScope(Backward, const std::string& node_name, const std::vector<Tensor>& grads) {
    if (!g_recording.load(std::memory_order_relaxed)) return;
    owned_name_ = node_name == "AccumulateGrad" ? node_name : node_name + " backward";
    std::string shapes;
    bool cuda = false;
    append_shapes(shapes, cuda, grads);
    begin(owned_name_.c_str(), std::move(shapes), cuda, true);
  }
  ~OpScope() {
    if (active_) end();
  }

 private:
  void begin(const char* name, std::string shapes, bool cuda, bool backward);
  void end();
  bool active_ = false;
  size_t slot_ = 0;
  uint64_t generation_ = 0;
  const char* outer_ = nullptr;  // the name of the op this one is inside of
  std::string owned_name_;
};

// Bytes allocated on this thread (Storage::allocate), for the ops' bytes_allocated.
void note_allocation(size_t nbytes);

// Names the calling thread in the profiler's events and traces (Note [trace thread names] in
// src/profiler/profiler.cpp); a thread the library starts calls it first.
void name_thread(std::string name);

}  // namespace sinter::profiler::detail

#define SINTER_PROFILE_CAT2_(a, b) a##b
#define SINTER_PROFILE_CAT_(a, b) SINTER_PROFILE_CAT2_(a, b)
#define SINTER_PROFILE_OP(...)                                                      \
  const ::sinter::profiler::detail::OpScope SINTER_PROFILE_CAT_(sinter_profile_op_, \
                                                                __LINE__)(__VA_ARGS__)

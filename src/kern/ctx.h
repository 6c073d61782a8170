// The interface between the ops layer and the compute kernels, one header per kernel family in
// src/kern/ (namespace sinter::kern): kern/<family>.h holds the family's types and declares its
// functions, kern/<family>.inc. Ops check their arguments before calling in, so kernels trust
// them: shapes agree, indices are in range, dtypes are the ones named.
//
// Note [kernel interfaces]
// Each family's types live in sinter::kern, and its functions are declared once, with their
// documentation, in kern/<family>.inc, which the family's header includes (through
// kern/declare.h) into namespace sinter::cpu (the reference, src/cpu/) and into
// sinter::cudak (kernels/*.cu): both define every function with that one signature.
// SINTER_DISPATCH (internal/dispatch.h) picks one by the tensors' device; in a build without CUDA
// it never names sinter::cudak, so nothing there needs a stand-in. Adding a kernel: its
// declaration in the family's .inc, a definition in each backend.
#pragma once

#include <cstdint>

#include "sinter/core/dtype.h"

struct CUstream_st;

namespace sinter::kern {

constexpr int kMaxDims = 8;
constexpr int kMaxOperands = 4;

// Where a kernel runs: the CUDA device and stream (ignored by the CPU kernels).
struct Ctx {
  int device = 0;
  CUstream_st* stream = nullptr;
};

}  // namespace sinter::kern

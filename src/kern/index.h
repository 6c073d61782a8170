// The kernel interface of indexing (index_select, index_add, gather, scatter_add, scatter_reduce)
// and of the
// deferred checks of indices: in sinter::cpu (src/cpu/index.cpp) and sinter::cudak
// (kernels/index.cu), Note [kernel interfaces].
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "kern/ctx.h"
#include "kern/scalar_ops.h"
#include "sinter/core/dtype.h"

namespace sinter::kern {

// Note [gather layout]
// gather and scatter_add walk the elements of a contiguous index whose shape is sizes[0, ndim);
// their other small operand (gather's out, scatter_add's src) is contiguous of that shape too.
// Element e, at coordinates c of that shape, reads (gather) or adds into (scatter_add) the element
// of the large operand at offset sum over d != dim of c[d] * strides[d], plus index[e] *
// strides[dim] (strides in elements; the large operand may be any strided view).
// Note [deferred device checks]
// On CUDA, an op whose arguments are known only on the device (class targets, embedding indices)
// does not read them back to validate them, which would make the host wait for the device (and
// rule out CUDA graphs). check_indices looks at them on the device instead: the first value out of
// range goes to the device's check record, in host-mapped memory, and the op's kernels treat such
// values as absent (a loss term of 0, a row of zeros), never reading out of bounds. The host looks
// at the record at its next synchronization with that device (item(), a copy to the host,
// synchronize()) and throws the error there, naming the op and the value. On the CPU the check
// throws at once.
enum class DeviceCheck : int32_t {
  CrossEntropyTarget = 1,  // skip: ignore_index
  EmbeddingIndex = 2,      // skip: none (a value outside [lo, hi))
};
struct DeviceCheckRecord {
  int32_t flag = 0;  // nonzero once a value failed; the first failure's fields are kept
  int32_t what = 0;  // DeviceCheck
  int64_t value = 0, lo = 0, hi = 0, skip = 0;
  // On CUDA: the failing thread claims the record (claim 0 -> 1), writes the fields, then sets
  // flag; the host reads the fields only once flag is set, then clears flag and claim.
  int32_t claim = 0;
};
// "cross_entropy: target 12 is out of range [0, 10) and is not ignore_index (-100)".
std::string device_check_message(const DeviceCheckRecord& r);

struct GatherGeom {
  int ndim = 0;
  int dim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
};

// The large operand's offset of element e, whose index value is i (Note [gather layout]).
SINTER_HD inline int64_t gather_offset(const GatherGeom& g, int64_t e, int64_t i) {
  int64_t off = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t q = e / g.sizes[d];
    off += (d == g.dim ? i : e - q * g.sizes[d]) * g.strides[d];
    e = q;
  }
  return off;
}

// Note [scatter reduce]
// scatter_reduce combines each target of the large operand with the sources that land on it, in
// element order: Assign keeps the last source (CPU and CUDA alike: CUDA sorts the sources by
// target, stably, and one thread walks each target's run), the others fold them into the target's
// value in the compute type C (visit_compute_type: f32 for bf16/f16, rounded once per target),
// integers wrapping; Amax and Amin keep a NaN once one is seen, as torch's do. The op
// (src/ops/index.cpp) gives the targets the reduction's identity first where the tensor's own
// values are left out (include_self=False), and makes Mean of Sum and a count.
enum class ScatterMode : int32_t { Assign, Sum, Prod, Amax, Amin };

template <class C>
SINTER_HD inline C scatter_combine(C target, C v, ScatterMode mode) {
  switch (mode) {
    case ScatterMode::Assign:
      return v;
    case ScatterMode::Sum:
      if constexpr (std::is_integral_v<C>) return scalar::wrap_add(target, v);
      return target + v;
    case ScatterMode::Prod:
      if constexpr (std::is_integral_v<C>) return scalar::wrap_mul(target, v);
      return target * v;
    case ScatterMode::Amax:  // a tie keeps the target, as torch's
      return (target != target || v <= target) ? target : v;
    default:  // Amin
      return (target != target || v >= target) ? target : v;
  }
}

}  // namespace sinter::kern

// The functions of the family, declared once (Note [kernel interfaces]).
#define SINTER_KERNELS_INC "kern/index.inc"
#include "kern/declare.h"

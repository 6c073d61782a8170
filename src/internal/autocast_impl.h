// The ops' side of autocast (sinter/autocast.h). An op of the policy table starts with
//
//   if (const auto to = autocast::detail::target(autocast::Op::matmul, a)) {
//     const autocast::detail::Suspend off;
//     return matmul(autocast::detail::cast(a, *to), autocast::detail::cast(b, *to));
//   }
//
// so that it runs once more, on cast operands, with autocast off for everything it calls.
#pragma once

#include <optional>
#include <string_view>

#include "sinter/autocast.h"
#include "sinter/core/noncopyable.h"
#include "sinter/tensor.h"

namespace sinter::autocast::detail {

// The dtype `op` (a row of the policy table) casts its floating operands to, when a guard covers
// t's device type in this thread and autocast is not suspended; nullopt otherwise.
std::optional<DType> target(Op op, const Tensor& t);

// t in dtype `to` when t is a floating tensor of another dtype, else t itself (undefined stays
// undefined). A leaf that requires grad (a parameter) is cast once per outermost guard: later casts
// of it, while its version is unchanged, return the first.
Tensor cast(const Tensor& t, DType to);

// Turns autocast off in this thread for a scope (an op's re-entry with cast operands, backward);
// Suspend(false) turns it back on (checkpoint's recomputation inside backward).
class Suspend : NonCopyable {
 public:
  explicit Suspend(bool suspend = true);
  ~Suspend();

 private:
  bool previous_;
};

}  // namespace sinter::autocast::detail

// The first lines of an op of the policy table: when autocast applies to op `name` (the token of
// its row in SINTER_AUTOCAST_POLICY) on anchor's device, returns `call` (the op itself on cast(...)
// operands) evaluated with autocast suspended.
#define SINTER_AUTOCAST(name, anchor, call)                                           \
  if (const auto sinter_autocast_to_ =                                                \
          ::sinter::autocast::detail::target(::sinter::autocast::Op::name, anchor)) { \
    const ::sinter::autocast::detail::Suspend sinter_autocast_off_;                   \
    const auto cast = [&](const ::sinter::Tensor& t) {                                \
      return ::sinter::autocast::detail::cast(t, *sinter_autocast_to_);               \
    };                                                                                \
    return call;                                                                      \
  }

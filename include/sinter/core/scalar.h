// sinter::Scalar: a number argument of an op (add(t, 2), clamp(t, 0.5), full(shape, v)) that keeps
// the kind of the C++ value it was made from, as a Python number does in PyTorch.
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <ostream>
#include <type_traits>

#include "sinter/core/error.h"

namespace sinter {

// Note [scalar kinds]
// A C++ bool is a Bool scalar, any other integer type an Int scalar (held exactly as int64_t, so an
// i64 value above 2^53 is not rounded through a double), float and double a Float scalar. The kind
// decides promotion beside a tensor (result_type in sinter/ops.h): a scalar counts only when its
// kind ranks above the tensor's category (bool < integer < floating), so i64_tensor * 2 stays i64,
// i64_tensor * 2.0 is f32 and f16_tensor * 2.0 stays f16.
class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };

  template <class T>
  requires std::is_arithmetic_v<T> Scalar(T v) {  // NOLINT(google-explicit-constructor)
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::Bool;
      i_ = v ? 1 : 0;
    } else if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
        SINTER_CHECK(v <= static_cast<T>(std::numeric_limits<int64_t>::max()), "Scalar: ", v,
                     " does not fit int64");
      }
      kind_ = Kind::Int;
      i_ = static_cast<int64_t>(v);
    } else {
      kind_ = Kind::Float;
      d_ = static_cast<double>(v);
    }
  }

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ != Kind::Float; }  // Bool or Int

  // The value as a double (an Int above 2^53 rounds to the nearest double).
  double to_double() const { return is_float() ? d_ : static_cast<double>(i_); }
  // Whether the value is an integer (every Bool and Int scalar; a Float one with no fraction in
  // int64's range).
  bool holds_integer() const {
    return !is_float() ||
           (d_ >= -0x1p63 && d_ < 0x1p63 && d_ == static_cast<double>(static_cast<int64_t>(d_)));
  }
  // The exact value of a Bool or Int scalar; a Float scalar must hold an integer.
  int64_t to_int() const {
    SINTER_CHECK(holds_integer(), "Scalar: ", d_, " is not an integer in int64's range");
    return is_float() ? static_cast<int64_t>(d_) : i_;
  }
  // -s of the same kind (a Bool scalar gives the Int 0 or -1); the Int minimum wraps to itself.
  Scalar operator-() const {
    if (is_float()) return Scalar(-d_);
    return Scalar(static_cast<int64_t>(0 - static_cast<uint64_t>(i_)));
  }

 private:
  Kind kind_ = Kind::Int;
  int64_t i_ = 0;
  double d_ = 0.0;
};

inline std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_bool()) return os << (s.to_int() ? "true" : "false");
  if (s.is_int()) return os << s.to_int();
  return os << s.to_double();
}

}  // namespace sinter

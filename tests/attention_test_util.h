// What the attention tests share (tests/ops_attention.cpp, tests/test_attention_tiles.cpp).
#pragma once

#include "test_util.h"

namespace sinter::testing {

// A kernel on a device: one way to compute an attention call.
struct Way {
  AttentionKernel kernel;
  Device device;
};

// One attention call computed two ways, forward and the gradients of sum(out * w) in `dtype` from
// the same rounded inputs (fresh random ones): the second within tol of the first.
void expect_same_attention(const Shape& qs, const Shape& ks, AttentionOptions o, DType dtype,
                           double tol, Way first, Way second);

}  // namespace sinter::testing

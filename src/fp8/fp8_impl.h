// What fp8::linear shares with the quantization in src/fp8/fp8.cpp: the GPU path with the scale's
// source on the device (the delayed recipe's history), and the amaxes' all-reduce.
#pragma once

#include <cstdint>

#include "kern/fp8.h"
#include "sinter/fp8.h"

namespace sinter::fp8::detail {

// The max of `amax` over the ranks of `group` (NaN taken as infinity); `amax` where group is null.
float all_reduce_amax(float amax, dist::ProcessGroup* group);

// x (2-D, on a GPU) quantized in tiles of tile_rows x tile_cols, or with the one scale that
// `source`'s scale fields name (kern::fp8_one_scale; its amax_out receives x's amax), and, where
// `transpose`, x^T as quantize_with_transpose gives it (retile: x^T's own tiles).
QuantizedPair quantize_on_device(const Tensor& x, DType format, int64_t tile_rows,
                                 int64_t tile_cols, const kern::Fp8QuantizeArgs& source,
                                 bool transpose, bool retile);

}  // namespace sinter::fp8::detail

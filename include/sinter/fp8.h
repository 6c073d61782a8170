// FP8 training of Linear layers (Note [fp8 training]): the scaling recipes, fp8::Autocast (as
// Transformer Engine's fp8_autocast), the scaled quantization of a matrix and the FP8 GEMM, and
// fp8::linear with its backward. The CPU computes all of it exactly as written in the Note (the
// reference the CUDA kernels are held to).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sinter/core/noncopyable.h"
#include "sinter/tensor.h"

namespace sinter {
namespace dist {
class ProcessGroup;
}  // namespace dist
namespace nn {
class Module;
class Linear;
}  // namespace nn
}  // namespace sinter

namespace sinter::fp8 {

// How a tensor's scale is chosen (Note [fp8 scaling]).
enum class Scaling {
  Current,  // one scale per tensor, from this tensor's amax
  Delayed,  // one scale per tensor, from the amax history of the steps before (Transformer Engine)
  Block,    // a scale per 1 x block tile (activations, gradients) or block x block (weights)
};

const char* scaling_name(Scaling s);
// "current", "delayed" or "block"; anything else is an error naming `what`.
Scaling parse_scaling(const std::string& name, const char* what = "fp8");

struct Recipe {
  Scaling scaling = Scaling::Current;
  // Delayed: how many steps of amax the history keeps, and the margin: scale = max / amax / 2^m.
  int64_t amax_history_len = 16;
  int margin = 0;
  // Block: the tile's length (activations and gradients: 1 x block; weights: block x block).
  int64_t block = 128;
  // Delayed: the amaxes are all-reduced (max) over this group before they enter the history, so
  // that every data-parallel rank uses the same scales. Null: this process's own.
  dist::ProcessGroup* amax_group = nullptr;
};

// Checks a recipe's values (a positive history length and block, a margin in [0, 30]).
void check_recipe(const Recipe& recipe);

// While alive, the Linear layers prepared by fp8::prepare run their three GEMMs in FP8 under
// `recipe` (when `enabled`); guards nest, the innermost winning.
class Autocast : NonCopyable {
 public:
  explicit Autocast(const Recipe& recipe, bool enabled = true);
  ~Autocast();

 private:
  bool prev_enabled_;
  Recipe prev_recipe_;
};

bool is_enabled();
const Recipe& recipe();  // the innermost Autocast's (a default Recipe outside any)

// A matrix in FP8: its codes (f8e4m3 or f8e5m2, rows x cols, contiguous) and the f32 inverse
// scales that give its values, one per tile_rows x tile_cols tile (scale_inv has shape
// (ceil(rows / tile_rows), ceil(cols / tile_cols)); a tile of the whole matrix for one scale).
struct Quantized {
  Tensor data;
  Tensor scale_inv;
  int64_t tile_rows = 0, tile_cols = 0;
  Tensor dequantize() const;     // f32 values: code * scale_inv
  Quantized transposed() const;  // the transpose's codes and scales (the tiles transposed)
};

// A matrix and its transpose in FP8, as the backward's GEMMs take them (Note [fp8 training]).
struct QuantizedPair {
  Quantized q;  // x
  Quantized t;  // x^T
};

// The largest |x| of a tensor (NaN if it holds one; 0 when empty).
float amax(const Tensor& x);

// The largest finite value of an FP8 dtype (448, 57344).
float max_value(DType format);
// The scale that maps `amax` to the format's largest value over 2^margin: max / amax / 2^margin,
// rounded to f32; 1 where amax is 0, infinite or NaN.
float scale_from_amax(float amax, DType format, int margin = 0);

// Quantizes the 2-D `x` (any floating dtype, on the CPU or a GPU) into `format`: each tile of
// tile_rows x tile_cols gets the scale of its own amax (scale_from_amax), or, where `scale` is
// given, every tile that one (per-tensor recipes). Codes are the saturated cast of x * scale (the
// product in f32); scale_inv = 1 / scale in f32. `amax`, if not null, receives the amax of the
// whole of x.
Quantized quantize(const Tensor& x, DType format, int64_t tile_rows, int64_t tile_cols,
                   std::optional<float> scale = std::nullopt, float* amax = nullptr);

// quantize() with one tile of the whole of x and the scale of x's amax (scale_from_amax with
// `margin`): the per-tensor recipes' quantization. On a GPU the amax stays on the device, so the
// host does not wait. With a `group`, the amax is all-reduced (max) over it first: x is this
// rank's part of a tensor split over the group, quantized with the whole tensor's scale (Note
// [fp8 tensor parallel]); every rank of the group calls it.
Quantized quantize_tensorwise(const Tensor& x, DType format, int margin = 0,
                              dist::ProcessGroup* group = nullptr);

// quantize() of x, and of x^T as the backward wants it: with `retile`, x^T's own tiles of
// tile_rows x tile_cols and their amaxes (quantize(x.t(), ...): the block recipe's activations
// and gradients, 128 x 1 tiles of x), else q's codes and scales transposed. On a GPU one kernel
// reads x once for both where the tiles are one of the whole matrix, 1 x 128 or 128 x 128 (Note
// [fp8 quantize kernels]); elsewhere the same result comes from two passes.
QuantizedPair quantize_with_transpose(const Tensor& x, DType format, int64_t tile_rows,
                                      int64_t tile_cols, bool retile,
                                      std::optional<float> scale = std::nullopt,
                                      float* amax = nullptr);
// quantize_tensorwise() of x, and x^T's codes with the same scale (on a GPU, the pass after the
// amax's writes both).
QuantizedPair quantize_tensorwise_with_transpose(const Tensor& x, DType format, int margin = 0,
                                                 dist::ProcessGroup* group = nullptr);

// out (M, N) = a (M, K) times b (N, K) transposed, both quantized along K (tiles of 1 or of a
// block of rows, and of the whole of K or of `block` columns alike: a's and b's tile_cols agree):
// for each K block, the products of codes summed in f64 and rounded to f32, times a's and b's
// scale_inv (their product in f32), added in f32 in block order (Note [fp8 gemm]). out_dtype:
// f32, bf16 or f16.
Tensor gemm(const Quantized& a, const Quantized& b, DType out_dtype);

// The scaling state of one Linear under the delayed recipe (Note [fp8 delayed state]): the amax
// history (3, H) of its input, weight and output gradient, the current step's in column `steps %
// H`, the scales (3) it gives, and the steps recorded. Buffers of the Linear (fp8_amax_history,
// fp8_scale, fp8_steps), so that state dicts and checkpoints carry them.
struct LinearState {
  Tensor amax_history;  // f32 (3, H)
  Tensor scale;         // f32 (3)
  Tensor steps;         // i64 (1): the amaxes recorded so far
};

// Under tensor parallelism (Note [fp8 tensor parallel]): which of a Linear's tensors this rank
// holds only a part of, the rest being on the other ranks of `group`. The per-tensor recipes
// all-reduce (max) those tensors' amaxes over the group, so that each part is quantized with the
// scale the whole tensor has in the whole layer; every rank of the group runs the layer alike.
struct Split {
  dist::ProcessGroup* group = nullptr;
  bool input = false;   // x: this rank's slice of the in features (a row-parallel layer)
  bool weight = false;  // the weight: this rank's shard
  bool grad = false;    // dy: this rank's slice of the out features (a column-parallel layer)
};

// y = x W^T + b with the three GEMMs in FP8 (Note [fp8 training]): the forward e4m3 x e4m3, the
// input gradient e5m2 x e4m3, the weight gradient e4m3 x e5m2, each in f32 and the output in the
// autocast dtype (else x's). `state` is required for the delayed recipe; `split` says what this
// rank holds a part of under tensor parallelism.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Recipe& recipe,
              LinearState* state = nullptr, const Split& split = {});

// Which layers run in FP8: the Linear layers (nn::Linear, and the tensor-parallel
// dist::tp::ColumnParallelLinear and RowParallelLinear, whose GEMM is their shard's), by default
// all but the model's first and last (in registration order), and only those whose GEMM's in and
// out features are multiples of 16 (the FP8 tensor cores' tile) and with no fused activation
// (nn::fuse_for_inference's). A filter, if given, decides instead (a layer is still left out
// where its sizes or activation do not fit).
using LinearFilter = std::function<bool(const std::string& name, const nn::Module& layer)>;

// Marks the chosen Linear layers of `model` for FP8 and gives each its LinearState buffers
// (registered as "fp8_amax_history", "fp8_scale" and "fp8_steps", history length from `recipe`).
// Returns the names of the layers it took. Call it before the optimizer and any state-dict load.
std::vector<std::string> prepare(nn::Module& model, const Recipe& recipe,
                                 const LinearFilter& filter = nullptr);

// Whether a state-dict key names a prepared layer's FP8 state (its fp8_amax_history, fp8_scale or
// fp8_steps buffer): training state, which the files other tools read (Hugging Face folders,
// GGUF, a PyTorch model's weights) leave out.
bool is_state_key(const std::string& key);

// The FP8 marks and state of `from`'s Linear layers given to `to`'s, layer for layer in
// registration order: a whole model and its tensor-parallel split (ParallelGPT::load_full and
// to_full), whose Linear layers correspond in that order. A layer of `to` is marked (and given
// the buffers) where its counterpart is, and its state is a copy of the counterpart's; where the
// counterpart is not marked it is left as it is. Throws, before changing anything, where the two
// differ in their count of Linear layers, or where a marked layer's counterpart's GEMM does not
// fit FP8 (a shard's features not multiples of 16).
void copy_state(const nn::Module& from, nn::Module& to);

}  // namespace sinter::fp8

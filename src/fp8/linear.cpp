// fp8::linear (the three GEMMs of a Linear in FP8, with its backward), the delayed recipe's state,
// and fp8::prepare, which chooses the Linear layers that run in FP8.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fp8/fp8_impl.h"
#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "kern/fp8.h"
#include "sinter/autocast.h"
#include "sinter/dist.h"
#include "sinter/fp8.h"
#include "sinter/nn/modules.h"
#include "sinter/ops.h"
#include "sinter/tensor_parallel.h"

namespace sinter::fp8 {

// Note [fp8 training]
// Under fp8::Autocast, a Linear that fp8::prepare took computes y = x W^T + b with the GEMMs of
// Note [fp8 gemm], in the "hybrid" formats of Transformer Engine:
//   forward          y  = x  . W^T     x e4m3, W e4m3
//   input gradient   dx = dy . W       dy e5m2 (the gradients' range is wider), W e4m3
//   weight gradient  dW = dy^T . x     dy e5m2, x e4m3
// each accumulated in f32, with the bias added in f32 before the output is rounded to the
// autocast dtype (x's dtype outside autocast); dx and dW are returned in x's and W's dtypes, db is
// dy summed in f32. The scales follow the recipe (Note [fp8 scaling]). The backward keeps the FP8
// forms it needs (x's and W's, transposed where its GEMM reduces along their other dim), not x;
// each transpose comes out of the pass that quantizes the tensor (fp8::quantize_with_transpose).
// What the recipe excludes (the first and last Linear layers by default, norms, attention's
// softmax, the loss) is not touched: it runs in the autocast dtype, or f32.

// Note [fp8 delayed state]
// Under the delayed recipe each Linear keeps, as buffers (so state dicts and checkpoints carry
// them), an amax history of 3 rows (its input, weight and output gradient) by H steps, the 3
// scales the history gives, and a count of the steps recorded. A forward whose output needs grad
// records the amaxes of x and W into column (count mod H), taking the larger where the cell
// already holds one (so a recomputed forward records nothing new; a forward without grad, an
// evaluation, records nothing), and the backward that of dy; then each scale is set from its row's
// largest amax over all H steps (scale_from_amax with the recipe's margin; kept where the row is
// all 0), the count advances and the next column is cleared. An amax that is not finite (an
// overflow) is not recorded, so the scales carry over it.
// A pass with no history yet (count 0) scales each tensor by its own amax. With an amax_group, each
// amax recorded is all-reduced (max, NaN as infinity) over it first, so that data-parallel ranks
// keep equal histories (and a forward without grad, which one rank may run alone, makes no
// collective over it; a tensor-parallel layer's do over its group: Note [fp8 tensor parallel]). The
// state lives beside the layer: on a GPU the same steps run on the device, the host reading none of
// it (Note [fp8 quantize kernels]; the first pass's amax is all-reduced at every recorded step
// there, the host not knowing which is the first).

// Note [fp8 tensor parallel]
// A tensor-parallel Linear (dist::tp::ColumnParallelLinear, RowParallelLinear) that fp8::prepare
// took runs fp8::linear on its shard: a column-parallel layer on its input joined whole (copy(),
// or gather_sequence() under sequence parallelism, whose FP8 form the backward keeps), a
// row-parallel one on its slice of the features, its partial products then summed over the group
// as before. Each rank holds only a part of some tensors (Split): the weight (a block of rows or
// of columns), a row-parallel layer's input and a column-parallel layer's output gradient (a
// block of features). Under the per-tensor recipes those tensors' amaxes are all-reduced (max)
// over the group, on every forward and backward, training or not (the group runs the layer
// together), so that each part gets the scale the whole tensor has in the whole layer: the codes
// are the whole layer's, and what a rank computes from whole rows of K (a column-parallel
// layer's output and weight gradient; a row-parallel layer's input and weight gradients) is the
// whole layer's bit for bit; the sums over the group differ from one GEMM's in the order of the
// additions (and, under autocast, in the partial products' rounding to the output dtype before
// the sum, as without FP8). Every forward makes these collectives, evaluations too: the whole
// group runs each. The delayed recipe records these reduced amaxes, so that every rank of the
// group keeps the whole layer's history (its amax_group, over the data-parallel replicas, on
// top). The block recipe needs no collective: its tiles are the whole layer's wherever a shard's
// boundaries fall on the block (the split features a multiple of `block`), and each rank's own
// otherwise. fp8::copy_state carries the marks and the state between a whole model and its split
// (ParallelGPT's and ParallelLlama's load_full and to_full).

namespace {

enum Slot : int64_t { kInput = 0, kWeight = 1, kGrad = 2 };

// After the backward: the scales from the whole history, the count advanced, the next step's
// cells cleared (kern::fp8_advance, on the state's device).
void advance(const LinearState& s, const Recipe& r) {
  auto* hist = static_cast<float*>(s.amax_history.data_ptr());
  auto* scale = static_cast<float*>(s.scale.data_ptr());
  auto* steps = static_cast<int64_t*>(s.steps.data_ptr());
  const int64_t h = s.amax_history.size(1);
  if (s.steps.device().is_cpu()) return kern::fp8_advance(hist, h, scale, steps, r.margin);
#ifdef SINTER_WITH_CUDA
  cudak::fp8_advance(kernel_ctx(s.steps.device()), hist, h, scale, steps, r.margin);
#endif
}

void check_state(const LinearState* s, int64_t history, Device dev) {
  SINTER_CHECK(
      s != nullptr && s->amax_history.defined() && s->scale.defined() && s->steps.defined(),
      "fp8::linear: the delayed recipe needs the layer's LinearState (fp8::prepare)");
  SINTER_CHECK(s->amax_history.dim() == 2 && s->amax_history.size(0) == 3 &&
                   s->amax_history.dtype() == DType::f32 && s->amax_history.is_contiguous(),
               "fp8::linear: amax_history must be a contiguous f32 (3, H) tensor, got ",
               s->amax_history.dtype(), " ", shape_str(s->amax_history.shape()));
  SINTER_CHECK(s->amax_history.size(1) == history, "fp8::linear: the layer's amax history holds ",
               s->amax_history.size(1), " steps, the recipe asks for ", history);
  SINTER_CHECK(s->scale.numel() == 3 && s->scale.dtype() == DType::f32 && s->steps.numel() == 1 &&
                   s->steps.dtype() == DType::i64 && s->scale.is_contiguous(),
               "fp8::linear: scale must be f32 (3) and steps i64 (1)");
  for (const Tensor* t : {&s->amax_history, &s->scale, &s->steps}) {
    SINTER_CHECK(t->device() == dev, "fp8::linear: the delayed recipe's state is on ", t->device(),
                 ", the input on ", dev);
  }
}

// The delayed recipe on the CPU: the history's scale, the amax found in the same pass; with no
// history yet, the amax first. The amax of a tensor split over `part` is all-reduced over it (its
// ranks run the layer together, training or not); only a recorded amax is all-reduced over the
// recipe's amax_group (an evaluation may run on one data-parallel rank alone).
QuantizedPair delayed_on_cpu(const Tensor& x, DType format, const Recipe& r, const LinearState& s,
                             Slot slot, bool record, bool transpose, dist::ProcessGroup* part) {
  // One tile of the whole matrix (at least 1 x 1: a batch may have no rows).
  const int64_t rows = std::max<int64_t>(x.size(0), 1), cols = std::max<int64_t>(x.size(1), 1);
  const auto reduce = [&](float a) {
    a = detail::all_reduce_amax(a, part);
    return record ? detail::all_reduce_amax(a, r.amax_group) : a;
  };
  const bool history = s.steps.item<int64_t>() > 0;
  float a = 0.0f;
  QuantizedPair p;
  if (history) {
    p.q = quantize(x, format, rows, cols, static_cast<const float*>(s.scale.data_ptr())[slot], &a);
    if (record) a = reduce(a);
  } else {
    a = reduce(amax(x));
    p.q = quantize(x, format, rows, cols, scale_from_amax(a, format, r.margin));
  }
  if (record) {
    kern::fp8_record_amax(static_cast<float*>(s.amax_history.data_ptr()), s.amax_history.size(1),
                          s.steps.item<int64_t>(), slot, a);
  }
  if (transpose) p.t = p.q.transposed();
  return p;
}

// The same on a GPU, without the host reading the state: the first pass's amax is taken where
// *steps is 0 (a kernel that reads nothing otherwise), the scale chosen on the device, and the
// amaxes, as float bits, all-reduced (max: a NaN's bits above infinity's, the same scale and
// nothing recorded, as on the CPU) and recorded there.
QuantizedPair delayed_on_gpu(const Tensor& x, DType format, const Recipe& r, const LinearState& s,
                             Slot slot, bool record, bool transpose, dist::ProcessGroup* part) {
  const Tensor xc = x.contiguous();
  const Device dev = x.device();
  Tensor first = zeros({1}, {.dtype = DType::i32, .device = dev});
  Tensor seen = zeros({1}, {.dtype = DType::i32, .device = dev});
  const auto* steps = static_cast<const int64_t*>(s.steps.data_ptr());
  const auto bits = [](const Tensor& t) { return static_cast<uint32_t*>(t.data_ptr()); };
  const auto reduce = [&](Tensor& amax_bits) {
    if (part) part->all_reduce(amax_bits, dist::ReduceOp::Max);
    if (record && r.amax_group) r.amax_group->all_reduce(amax_bits, dist::ReduceOp::Max);
  };
#ifdef SINTER_WITH_CUDA
  cudak::fp8_amax(kernel_ctx(dev), xc.data_ptr(), xc.dtype(), xc.numel(), bits(first), steps);
#endif
  reduce(first);
  const kern::Fp8QuantizeArgs source{
      .scale_ptr = static_cast<const float*>(s.scale.data_ptr()) + slot,
      .steps = steps,
      .amax_in = bits(first),
      .margin = r.margin,
      .amax_out = bits(seen)};
  QuantizedPair p =
      detail::quantize_on_device(xc, format, std::max<int64_t>(xc.size(0), 1),
                                 std::max<int64_t>(xc.size(1), 1), source, transpose, false);
  if (record) {
    reduce(seen);
#ifdef SINTER_WITH_CUDA
    cudak::fp8_record_amax(kernel_ctx(dev), static_cast<float*>(s.amax_history.data_ptr()),
                           s.amax_history.size(1), steps, slot, bits(seen));
#endif
  }
  return p;
}

// A per-tensor quantization (current or delayed recipe) of x and, where `transpose`, of x^T with
// the same scale; under delayed, records the amax where `record`. `part`: the group x is split
// over (Note [fp8 tensor parallel]), null where this rank holds the whole of it.
QuantizedPair quantize_whole(const Tensor& x, DType format, const Recipe& r, LinearState* s,
                             Slot slot, bool record, bool transpose, dist::ProcessGroup* part) {
  if (r.scaling == Scaling::Current) {
    return transpose ? quantize_tensorwise_with_transpose(x, format, r.margin, part)
                     : QuantizedPair{.q = quantize_tensorwise(x, format, r.margin, part), .t = {}};
  }
  return x.device().is_cpu() ? delayed_on_cpu(x, format, r, *s, slot, record, transpose, part)
                             : delayed_on_gpu(x, format, r, *s, slot, record, transpose, part);
}

// Under the block recipe: activations and gradients in 1 x block tiles along the GEMM's reduction
// and (retile) x^T's own for the backward's; weights in blocks, transposed for the backward.
QuantizedPair quantize_block(const Tensor& x, DType format, const Recipe& r, bool weight,
                             bool transpose) {
  const int64_t tr = weight ? r.block : 1;
  if (!transpose) return {.q = quantize(x, format, tr, r.block), .t = {}};
  return quantize_with_transpose(x, format, tr, r.block, !weight);
}

DType output_dtype(const Tensor& x) {
  const std::optional<DType> amp = autocast::dtype(x.device().type);
  return amp ? *amp : x.dtype();
}

void check_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  SINTER_CHECK(x.defined() && w.defined(), "fp8::linear: undefined input or weight");
  SINTER_CHECK(w.dim() == 2, "fp8::linear: weight must be (out, in), got shape ",
               shape_str(w.shape()));
  SINTER_CHECK(x.dim() >= 1 && x.size(-1) == w.size(1),
               "fp8::linear: expected input with last dim ", w.size(1), ", got shape ",
               shape_str(x.shape()));
  for (const Tensor* t : {&x, &w}) {
    SINTER_CHECK(is_floating(t->dtype()) && !is_float8(t->dtype()),
                 "fp8::linear: expected f32, f64, bf16 or f16 input and weight, got ", t->dtype());
    SINTER_CHECK(t->device() == x.device(), "fp8::linear: input on ", x.device(), ", weight on ",
                 t->device());
  }
  if (b.defined()) {
    SINTER_CHECK(b.dim() == 1 && b.size(0) == w.size(0), "fp8::linear: bias must be (", w.size(0),
                 "), got shape ", shape_str(b.shape()));
    SINTER_CHECK(b.device() == x.device(), "fp8::linear: input on ", x.device(), ", bias on ",
                 b.device());
  }
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Recipe& r,
              LinearState* state, const Split& split) {
  check_linear(x, weight, bias);
  check_recipe(r);
  if (r.scaling == Scaling::Delayed) check_state(state, r.amax_history_len, x.device());
  const int64_t in = weight.size(1), out_features = weight.size(0);
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  // The GPU GEMM takes k in multiples of 16, and the weight gradient's k is the rows.
  SINTER_CHECK(x.device().is_cpu() || (rows % 16 == 0 && in % 16 == 0 && out_features % 16 == 0),
               "fp8::linear: on the GPU the rows (", rows, "), in (", in, ") and out (",
               out_features, ") features must be multiples of 16");
  const DType out_dtype = output_dtype(x);
  // Only a forward with a backward to come records amaxes (and reduces them over the ranks), and
  // quantizes the transposes the backward reads (W^T for dx, x^T for dW) in the same pass.
  const bool training = GradMode::is_enabled() && needs_grad({&x, &weight, &bias});
  const bool need_x = training && x.requires_grad(), need_w = training && weight.requires_grad();
  const bool block = r.scaling == Scaling::Block;
  Tensor y;
  QuantizedPair qx, qw;
  {
    NoGradGuard ng;
    const Tensor x2 = x.reshape({rows, in});
    if (block) {
      qx = quantize_block(x2, DType::f8e4m3, r, false, need_w);
      qw = quantize_block(weight, DType::f8e4m3, r, true, need_x);
    } else {
      qx = quantize_whole(x2, DType::f8e4m3, r, state, kInput, training, need_w,
                          split.input ? split.group : nullptr);
      qw = quantize_whole(weight, DType::f8e4m3, r, state, kWeight, training, need_x,
                          split.weight ? split.group : nullptr);
    }
    Tensor acc = gemm(qx.q, qw.q, DType::f32);
    if (bias.defined()) acc = add(acc, bias.to(DType::f32));
    Shape out_shape = x.shape();
    out_shape.back() = out_features;
    y = acc.to(out_dtype).reshape(out_shape);
  }
  if (!training) return y;
  const bool need_b = bias.defined() && bias.requires_grad();
  const Quantized wt = qw.t, xt = qx.t;
  const Shape x_shape = x.shape();
  const DType x_dtype = x.dtype(), w_dtype = weight.dtype();
  const DType b_dtype = bias.defined() ? bias.dtype() : DType::f32;
  LinearState st = state ? *state : LinearState{};
  dist::ProcessGroup* grad_part = split.grad ? split.group : nullptr;
  record("fp8_linear", {&y}, {x, weight, bias},
         [wt, xt, r, st, need_x, need_w, need_b, x_shape, x_dtype, w_dtype, b_dtype, rows,
          out_features, block, grad_part](const Grads& g) mutable {
           NoGradGuard ng;
           const Tensor dy = g[0].reshape({rows, out_features});
           // dy for dx, along the output features; dy^T for dW, along the rows.
           const QuantizedPair qdy =
               block ? quantize_block(dy, DType::f8e5m2, r, false, need_w)
                     : quantize_whole(dy, DType::f8e5m2, r, &st, kGrad, true, need_w, grad_part);
           if (r.scaling == Scaling::Delayed) advance(st, r);
           Tensor gx, gw, gb;
           if (need_x) gx = gemm(qdy.q, wt, DType::f32).to(x_dtype).reshape(x_shape);
           if (need_w) gw = gemm(qdy.t, xt, DType::f32).to(w_dtype);
           if (need_b) gb = dy.to(DType::f32).sum({0}).to(b_dtype);
           return Grads{gx, gw, gb};
         });
  return y;
}

namespace {

// A layer fp8::prepare may take (nn::Linear, or a tensor-parallel Linear), with its FP8 fields.
struct Layer {
  std::string name;
  nn::Module* module = nullptr;
  int64_t in = 0, out = 0;  // the GEMM's: a shard's under tensor parallelism
  bool fused = false;       // an activation in the GEMM's epilogue
  bool* marked = nullptr;
  Tensor *history = nullptr, *scale = nullptr, *steps = nullptr;
};

template <class L>
Layer layer_of(const std::string& name, L& l, bool fused) {
  return {.name = name,
          .module = &l,
          .in = l.weight.size(1),
          .out = l.weight.size(0),
          .fused = fused,
          .marked = &l.fp8,
          .history = &l.fp8_amax_history,
          .scale = &l.fp8_scale,
          .steps = &l.fp8_steps};
}

// The Linear layers under `root`, in registration order.
std::vector<Layer> linear_layers(nn::Module& root) {
  std::vector<Layer> layers;
  std::function<void(nn::Module&, const std::string&)> walk = [&](nn::Module& m,
                                                                  const std::string& name) {
    if (auto* l = dynamic_cast<nn::Linear*>(&m)) {
      layers.push_back(layer_of(name, *l, l->activation != Activation::None));
    } else if (auto* c = dynamic_cast<dist::tp::ColumnParallelLinear*>(&m)) {
      layers.push_back(layer_of(name, *c, false));
    } else if (auto* r = dynamic_cast<dist::tp::RowParallelLinear*>(&m)) {
      layers.push_back(layer_of(name, *r, false));
    }
    for (const auto& [child_name, child] : m.named_children()) {
      walk(*child, name.empty() ? child_name : name + "." + child_name);
    }
  };
  walk(root, "");
  return layers;
}

// Whether the layer's GEMM can run in FP8: in and out features multiples of 16 (the FP8 tensor
// cores' tile), no activation in its epilogue.
bool fits(const Layer& l) { return l.in % 16 == 0 && l.out % 16 == 0 && !l.fused; }

// Marks the layer and registers its state buffers with these values.
void mark(const Layer& l, const Tensor& history, const Tensor& scale, const Tensor& steps) {
  *l.history = l.module->register_buffer("fp8_amax_history", history);
  *l.scale = l.module->register_buffer("fp8_scale", scale);
  *l.steps = l.module->register_buffer("fp8_steps", steps);
  *l.marked = true;
}

}  // namespace

std::vector<std::string> prepare(nn::Module& model, const Recipe& recipe,
                                 const LinearFilter& filter) {
  check_recipe(recipe);
  const std::vector<Layer> layers = linear_layers(model);
  std::vector<std::string> taken;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const bool chosen = filter ? filter(l.name, *l.module) : i != 0 && i + 1 != layers.size();
    if (!chosen || !fits(l) || *l.marked) continue;
    const int64_t h = recipe.amax_history_len;
    const Device dev = l.module->parameters()[0].device();  // the delayed state is beside it
    mark(l, zeros({3, h}, {.device = dev}), ones({3}, {.device = dev}),
         zeros({1}, {.dtype = DType::i64, .device = dev}));
    taken.push_back(l.name);
  }
  return taken;
}

bool is_state_key(const std::string& key) {
  for (const char* name : {"fp8_amax_history", "fp8_scale", "fp8_steps"}) {
    const std::string_view n(name);
    if (key.size() >= n.size() && key.compare(key.size() - n.size(), n.size(), n) == 0 &&
        (key.size() == n.size() || key[key.size() - n.size() - 1] == '.')) {
      return true;
    }
  }
  return false;
}

void copy_state(const nn::Module& from, nn::Module& to) {
  // `from` is only read (linear_layers takes a module it may mark).
  const std::vector<Layer> src = linear_layers(const_cast<nn::Module&>(from));
  const std::vector<Layer> dst = linear_layers(to);
  SINTER_CHECK(src.size() == dst.size(), "fp8::copy_state: ", from.name(), " has ", src.size(),
               " Linear layers, ", to.name(), " has ", dst.size());
  for (size_t i = 0; i < src.size(); ++i) {  // all checked before any changes
    SINTER_CHECK(!*src[i].marked || fits(dst[i]), "fp8::copy_state: ", dst[i].name, "'s GEMM is ",
                 dst[i].out, " x ", dst[i].in,
                 " (a shard's, under tensor parallelism): FP8 takes multiples of 16; leave ",
                 src[i].name,
                 " out of fp8::prepare with a filter, or split the model over fewer "
                 "ranks");
  }
  for (size_t i = 0; i < src.size(); ++i) {
    const Layer &a = src[i], &b = dst[i];
    if (!*a.marked) continue;
    const Device dev = b.module->parameters()[0].device();
    if (!*b.marked) {
      mark(b, a.history->to(dev).clone(), a.scale->to(dev).clone(), a.steps->to(dev).clone());
      continue;
    }
    SINTER_CHECK(b.history->shape() == a.history->shape(), "fp8::copy_state: ", a.name,
                 "'s amax history is ", shape_str(a.history->shape()), ", ", b.name, "'s ",
                 shape_str(b.history->shape()));
    NoGradGuard ng;
    b.history->copy_(*a.history);
    b.scale->copy_(*a.scale);
    b.steps->copy_(*a.steps);
  }
}

}  // namespace sinter::fp8

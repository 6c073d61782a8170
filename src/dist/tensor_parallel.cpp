// Tensor parallelism (Note [tensor parallel linear] in include/sinter/tensor_parallel.h): the four
// differentiable collectives and the column- and row-parallel Linear layers.
#include "sinter/tensor_parallel.h"

#include <cmath>
#include <unordered_set>
#include <utility>
#include <vector>

#include "dist/tensor_parallel_impl.h"
#include "internal/autograd_impl.h"
#include "internal/clip_impl.h"
#include "kern/softmax.h"
#include "sinter/core/error.h"
#include "sinter/fp8.h"
#include "sinter/nn/init.h"
#include "sinter/ops.h"

namespace sinter::dist::tp {

namespace {

void check_args(const char* what, const Tensor& x, const std::shared_ptr<ProcessGroup>& group) {
  SINTER_CHECK(x.defined(), "tp::", what, ": undefined tensor");
  SINTER_CHECK(group != nullptr, "tp::", what, ": no process group");
}

int64_t wrapped(const char* what, const Tensor& x, int64_t dim) {
  const int64_t n = x.dim();
  SINTER_CHECK(n > 0 && dim >= -n && dim < n, "tp::", what, ": dim ", dim,
               " is out of range for a tensor of shape ", shape_str(x.shape()));
  return dim < 0 ? dim + n : dim;
}

// A contiguous copy of t, never an alias of it, that a collective may write.
Tensor fresh(const Tensor& t) {
  NoGradGuard no_grad;
  Tensor out = empty(t.shape(), {.dtype = t.dtype(), .device = t.device()});
  out.copy_(t);
  return out;
}

Tensor summed(const Tensor& t, ProcessGroup& group) {
  Tensor out = fresh(t);
  group.all_reduce(out);
  return out;
}

Tensor joined(const char* /*what*/, const Tensor& t, ProcessGroup& group, int64_t dim) {
  NoGradGuard no_grad;
  const Tensor all = group.all_gather(t.contiguous());  // (N, *shape)
  return group.size() == 1 ? all.select(0, 0).contiguous() : cat(unbind(all, 0), dim);
}

// The size of a rank's part of t along `dim`, which must split over the group.
int64_t part_size(const char* what, const Tensor& t, const ProcessGroup& group, int64_t dim) {
  const int64_t n = t.size(dim), ranks = group.size();
  SINTER_CHECK(n % ranks == 0, "tp::", what, ": dim ", dim, " of shape ", shape_str(t.shape()),
               " does not split over ", ranks, " ranks");
  return n / ranks;
}

Tensor part(const char* what, const Tensor& t, ProcessGroup& group, int64_t dim) {
  const int64_t size = part_size(what, t, group, dim);
  NoGradGuard no_grad;
  return t.narrow(dim, group.rank() * size, size).contiguous();
}

// t summed over the group, this rank's part along `dim` (a reduce-scatter, on a copy with `dim`
// first: the ranks' parts are then consecutive blocks).
Tensor scattered_sum(const char* what, const Tensor& t, ProcessGroup& group, int64_t dim) {
  const int64_t size = part_size(what, t, group, dim);
  NoGradGuard no_grad;
  const Tensor front = fresh(t.transpose(0, dim));
  Shape shape = front.shape();
  shape[0] = size;
  Tensor out = empty(shape, {.dtype = t.dtype(), .device = t.device()});
  group.reduce_scatter(out, front);
  return out.transpose(0, dim).contiguous();
}

// A collective along a dim, `forward` of x, with `backward` of the gradient (the four of
// gather, scatter, gather_sequence and reduce_scatter_sequence).
using AlongDim = Tensor (*)(const char* what, const Tensor& t, ProcessGroup& group, int64_t dim);
Tensor along(const char* what, const char* node, const Tensor& x,
             const std::shared_ptr<ProcessGroup>& group, int64_t dim, AlongDim forward,
             AlongDim backward) {
  check_args(what, x, group);
  const int64_t d = wrapped(what, x, dim);
  Tensor out = forward(what, x, *group, d);
  if (needs_grad({&x})) {
    record(node, {&out}, {x}, [what, group, d, backward](const Grads& g) {
      return Grads{backward(what, g[0], *group, d)};
    });
  }
  return out;
}

int ranks_of(const char* layer, const std::shared_ptr<ProcessGroup>& group) {
  SINTER_CHECK(group != nullptr, layer, ": no process group");
  return group->size();
}

// A Linear's initialization, from the whole layer's fan-in: uniform within 1/sqrt(in_features)
// for the weight (kaiming_uniform_ with a = sqrt(5)) and the bias alike; the weight split along
// `dim`, the bias too where `bias_split`.
void init_linear(Tensor& weight, Tensor& bias, int64_t in_features, int64_t dim, bool bias_split,
                 const ProcessGroup& group) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  const auto uniform = [bound](Tensor& t) { nn::init::uniform_(t, -bound, bound); };
  detail::init_part(weight, dim, group, uniform);
  if (!bias.defined()) return;
  if (bias_split) {
    detail::init_part(bias, 0, group, uniform);
  } else {
    uniform(bias);
  }
}

void check_full(const char* layer, const Tensor& weight, const Tensor& bias, int64_t out,
                int64_t in, bool has_bias) {
  SINTER_CHECK(weight.defined() && weight.shape() == Shape({out, in}), layer,
               "::load_full: the whole weight must be (", out, ", ", in, "), got ",
               weight.defined() ? shape_str(weight.shape()) : std::string("undefined"));
  SINTER_CHECK(bias.defined() == has_bias, layer, "::load_full: the layer ",
               has_bias ? "has" : "has no", " bias, and a bias was ",
               bias.defined() ? "given" : "not given");
  SINTER_CHECK(!bias.defined() || bias.shape() == Shape({out}), layer,
               "::load_full: the whole bias must be (", out, "), got ", shape_str(bias.shape()));
}

// Where both bool tensors are true.
Tensor both(const Tensor& a, const Tensor& b) { return where(a, b, Scalar(false)); }

void check_input(const char* layer, const Tensor& x, int64_t width) {
  SINTER_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == width, layer,
               ": expected an input whose last dim is ", width, ", got ",
               x.defined() ? shape_str(x.shape()) : std::string("undefined"));
}

}  // namespace

Tensor copy(const Tensor& x, const std::shared_ptr<ProcessGroup>& group) {
  check_args("copy", x, group);
  if (!needs_grad({&x})) return x;
  Tensor out = x.detach();
  record("tp_copy", {&out}, {x}, [group](const Grads& g) { return Grads{summed(g[0], *group)}; });
  return out;
}

Tensor reduce(const Tensor& x, const std::shared_ptr<ProcessGroup>& group) {
  check_args("reduce", x, group);
  Tensor out = summed(x, *group);
  if (needs_grad({&x})) record("tp_reduce", {&out}, {x}, [](const Grads& g) { return g; });
  return out;
}

Tensor gather(const Tensor& x, const std::shared_ptr<ProcessGroup>& group, int64_t dim) {
  return along("gather", "tp_gather", x, group, dim, joined, part);
}

Tensor scatter(const Tensor& x, const std::shared_ptr<ProcessGroup>& group, int64_t dim) {
  return along("scatter", "tp_scatter", x, group, dim, part, joined);
}

Tensor gather_sequence(const Tensor& x, const std::shared_ptr<ProcessGroup>& group, int64_t dim) {
  return along("gather_sequence", "tp_gather_sequence", x, group, dim, joined, scattered_sum);
}

Tensor reduce_scatter_sequence(const Tensor& x, const std::shared_ptr<ProcessGroup>& group,
                               int64_t dim) {
  return along("reduce_scatter_sequence", "tp_reduce_scatter_sequence", x, group, dim,
               scattered_sum, joined);
}

Tensor sequence_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const std::shared_ptr<ProcessGroup>& group) {
  check_args("sequence_linear", x, group);
  SINTER_CHECK(x.dim() >= 3, "tp::sequence_linear: x must be (B, T, ...), got ",
               shape_str(x.shape()));
  Tensor y;
  {
    NoGradGuard no_grad;
    y = linear(joined("sequence_linear", x, *group, 1), weight, bias);
  }
  if (!needs_grad({&x, &weight, &bias})) return y;
  const SavedTensor saved_x(x, "tp_sequence_linear"), saved_w(weight, "tp_sequence_linear");
  // The products of backward in the gradient's dtype (the forward's, under autocast), each
  // gradient then in its input's dtype.
  const DType x_dtype = x.dtype(), w_dtype = weight.dtype();
  const DType b_dtype = bias.defined() ? bias.dtype() : w_dtype;
  const bool with_bias = bias.defined();
  record("tp_sequence_linear", {&y}, {x, weight, bias},
         [saved_x, saved_w, group, with_bias, x_dtype, w_dtype, b_dtype](const Grads& g) {
           const DType dt = g[0].dtype();
           const Tensor w = saved_w.get().to(dt);
           const Tensor whole = joined("sequence_linear", saved_x.get(), *group, 1).to(dt);
           const int64_t in = w.size(1), out = w.size(0);
           const Tensor dy = g[0].reshape({-1, out});
           const Tensor dx = scattered_sum("sequence_linear", matmul(g[0], w), *group, 1);
           const Tensor dw = matmul(dy.t(), whole.reshape({-1, in}));
           return Grads{dx.to(x_dtype), dw.to(w_dtype),
                        with_bias ? sum(dy, {0}).to(b_dtype) : Tensor()};
         });
  return y;
}

ColumnParallelLinear::ColumnParallelLinear(int64_t in_features, int64_t out_features,
                                           std::shared_ptr<ProcessGroup> group,
                                           ColumnParallelOptions options)
    : in_features(in_features),
      out_features(out_features),
      group(std::move(group)),
      options(options) {
  const int ranks = ranks_of("ColumnParallelLinear", this->group);
  SINTER_CHECK(in_features > 0 && out_features > 0 && out_features % ranks == 0,
               "ColumnParallelLinear: ", in_features, " -> ", out_features,
               " features: both must be positive and out_features divisible by the group's ", ranks,
               " ranks");
  weight = register_parameter("weight", empty({out_features / ranks, in_features}));
  if (options.bias) bias = register_parameter("bias", empty({out_features / ranks}));
  init_linear(weight, bias, in_features, 0, true, *this->group);
}

Tensor ColumnParallelLinear::forward(const Tensor& x) {
  check_input("ColumnParallelLinear", x, in_features);
  Tensor y;
  if (fp8 && fp8::is_enabled()) {  // the input joined whole first (Note [fp8 tensor parallel])
    const Tensor whole = options.sequence_parallel ? gather_sequence(x, group, 1) : copy(x, group);
    fp8::LinearState state{fp8_amax_history, fp8_scale, fp8_steps};
    y = fp8::linear(whole, weight, bias, fp8::recipe(), &state,
                    {.group = group.get(), .weight = true, .grad = true});
  } else {
    y = options.sequence_parallel ? sequence_linear(x, weight, bias, group)
                                  : linear(copy(x, group), weight, bias);
  }
  return options.gather_output ? gather(y, group, -1) : y;
}

void ColumnParallelLinear::load_full(const Tensor& w, const Tensor& b) {
  check_full("ColumnParallelLinear", w, b, out_features, in_features, bias.defined());
  const int64_t rows = weight.size(0), first = group->rank() * rows;
  detail::assign(weight, w.narrow(0, first, rows));
  if (bias.defined()) detail::assign(bias, b.narrow(0, first, rows));
}

std::pair<Tensor, Tensor> ColumnParallelLinear::full() const {
  return {detail::whole_of(weight, *group, 0),
          bias.defined() ? detail::whole_of(bias, *group, 0) : Tensor()};
}

RowParallelLinear::RowParallelLinear(int64_t in_features, int64_t out_features,
                                     std::shared_ptr<ProcessGroup> group,
                                     RowParallelOptions options)
    : in_features(in_features),
      out_features(out_features),
      group(std::move(group)),
      options(options) {
  const int ranks = ranks_of("RowParallelLinear", this->group);
  SINTER_CHECK(in_features > 0 && out_features > 0 && in_features % ranks == 0,
               "RowParallelLinear: ", in_features, " -> ", out_features,
               " features: both must be positive and in_features divisible by the group's ", ranks,
               " ranks");
  weight = register_parameter("weight", empty({out_features, in_features / ranks}));
  if (options.bias) bias = register_parameter("bias", empty({out_features}));
  init_linear(weight, bias, in_features, 1, false, *this->group);
}

Tensor RowParallelLinear::forward(const Tensor& x) {
  const Tensor mine = options.input_is_parallel ? x : scatter(x, group, -1);
  check_input("RowParallelLinear", mine, weight.size(1));
  Tensor partial;
  if (fp8 && fp8::is_enabled()) {
    fp8::LinearState state{fp8_amax_history, fp8_scale, fp8_steps};
    partial = fp8::linear(mine, weight, Tensor(), fp8::recipe(), &state,
                          {.group = group.get(), .input = true, .weight = true});
  } else {
    partial = linear(mine, weight);
  }
  if (!options.sequence_parallel) {
    const Tensor y = reduce(partial, group);
    return bias.defined() ? y + bias : y;
  }
  const Tensor y = reduce_scatter_sequence(partial, group, 1);
  return bias.defined() ? y + copy(bias, group) : y;
}

void RowParallelLinear::load_full(const Tensor& w, const Tensor& b) {
  check_full("RowParallelLinear", w, b, out_features, in_features, bias.defined());
  const int64_t cols = weight.size(1);
  detail::assign(weight, w.narrow(1, group->rank() * cols, cols));
  if (bias.defined()) detail::assign(bias, b);
}

ParallelMultiheadAttention::ParallelMultiheadAttention(int64_t embed_dim, int64_t num_heads,
                                                       std::shared_ptr<ProcessGroup> group,
                                                       const nn::MultiheadAttentionOptions& options,
                                                       bool sequence_parallel)
    : embed_dim(embed_dim), num_heads(num_heads), group(std::move(group)), options(options) {
  const int ranks = ranks_of("ParallelMultiheadAttention", this->group);
  SINTER_CHECK(
      embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0 && num_heads % ranks == 0,
      "ParallelMultiheadAttention: embed_dim ", embed_dim, " and num_heads ", num_heads,
      ": both positive, embed_dim divisible by num_heads and num_heads by the group's ", ranks,
      " ranks");
  SINTER_CHECK(options.dropout >= 0.0 && options.dropout < 1.0,
               "ParallelMultiheadAttention: dropout ", options.dropout, " is not in [0, 1)");
  qkv = register_module("qkv", std::make_shared<ColumnParallelLinear>(
                                   embed_dim, 3 * embed_dim, this->group,
                                   ColumnParallelOptions{.bias = options.bias,
                                                         .sequence_parallel = sequence_parallel}));
  out_proj = register_module(
      "out_proj",
      std::make_shared<RowParallelLinear>(
          embed_dim, embed_dim, this->group,
          RowParallelOptions{.bias = options.bias, .sequence_parallel = sequence_parallel}));
}

Tensor ParallelMultiheadAttention::forward(const Tensor& x) {
  SINTER_CHECK(x.defined() && x.dim() == 3 && x.size(2) == embed_dim,
               "ParallelMultiheadAttention: expected x (B, T, ", embed_dim, "), got ",
               x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  // (B, T, 3 E / N) -> (3, B, H / N, T, head): this rank's heads' q, k and v (of the whole
  // sequence, also where x holds a slice of it).
  const Tensor projected = qkv->forward(x);
  const int64_t b = x.size(0), t = projected.size(1), heads = num_heads / group->size();
  const int64_t head = embed_dim / num_heads;
  const std::vector<Tensor> qkv_heads =
      unbind(projected.view({b, t, 3, heads, head}).permute({2, 0, 3, 1, 4}));
  const Tensor y = scaled_dot_product_attention(qkv_heads[0], qkv_heads[1], qkv_heads[2],
                                                {.causal = options.causal,
                                                 .dropout_p = is_training() ? options.dropout : 0.0,
                                                 .dropout_heads = num_heads,
                                                 .dropout_head_offset = group->rank() * heads});
  return out_proj->forward(y.transpose(1, 2).reshape({b, t, heads * head}));
}

void ParallelMultiheadAttention::load_full(const nn::MultiheadAttention& whole) {
  SINTER_CHECK(whole.embed_dim == embed_dim && whole.num_heads == num_heads &&
                   whole.qkv->bias.defined() == options.bias,
               "ParallelMultiheadAttention::load_full: a layer of embed_dim ", whole.embed_dim,
               " and ", whole.num_heads, " heads", whole.qkv->bias.defined() ? "" : " without bias",
               " into one of ", embed_dim, " and ", num_heads, options.bias ? "" : " without bias");
  // This rank's heads' rows of each of q, k and v, one after the other.
  const int64_t rows = embed_dim / group->size(), first = group->rank() * rows;
  auto heads_of = [&](const Tensor& t) {
    return cat({t.narrow(0, first, rows), t.narrow(0, embed_dim + first, rows),
                t.narrow(0, 2 * embed_dim + first, rows)},
               0);
  };
  {
    NoGradGuard no_grad;
    qkv->weight.copy_(heads_of(whole.qkv->weight.detach()).to(qkv->weight.dtype()));
    if (options.bias) qkv->bias.copy_(heads_of(whole.qkv->bias.detach()).to(qkv->bias.dtype()));
  }
  out_proj->load_full(whole.out_proj->weight.detach(),
                      options.bias ? whole.out_proj->bias.detach() : Tensor());
}

std::pair<Tensor, Tensor> RowParallelLinear::full() const {
  NoGradGuard no_grad;
  return {detail::whole_of(weight, *group, 1), bias.defined() ? bias.detach().clone() : Tensor()};
}

void ParallelMultiheadAttention::to_full(nn::MultiheadAttention& whole) const {
  SINTER_CHECK(whole.embed_dim == embed_dim && whole.num_heads == num_heads &&
                   whole.qkv->bias.defined() == options.bias,
               "ParallelMultiheadAttention::to_full: a layer of embed_dim ", whole.embed_dim,
               " and ", whole.num_heads, " heads cannot take one of ", embed_dim, " and ",
               num_heads);
  // The ranks' (q, k, v) row blocks, rank after rank, put back as all q rows, all k, all v.
  const int64_t ranks = group->size(), rows = embed_dim / ranks;
  auto unmix = [&](const Tensor& t) {
    std::vector<Tensor> parts;
    for (int64_t part = 0; part < 3; ++part) {
      for (int64_t r = 0; r < ranks; ++r) parts.push_back(t.narrow(0, (3 * r + part) * rows, rows));
    }
    return cat(parts, 0);
  };
  const auto [w, b] = qkv->full();
  detail::assign(whole.qkv->weight, unmix(w));
  if (b.defined()) detail::assign(whole.qkv->bias, unmix(b));
  const auto [ow, ob] = out_proj->full();
  detail::assign(whole.out_proj->weight, ow);
  if (ob.defined()) detail::assign(whole.out_proj->bias, ob);
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t num_embeddings, int64_t embedding_dim,
                                               std::shared_ptr<ProcessGroup> group,
                                               bool sequence_parallel)
    : num_embeddings(num_embeddings),
      embedding_dim(embedding_dim),
      group(std::move(group)),
      sequence_parallel(sequence_parallel) {
  const int ranks = ranks_of("VocabParallelEmbedding", this->group);
  SINTER_CHECK(num_embeddings > 0 && embedding_dim > 0 && num_embeddings % ranks == 0,
               "VocabParallelEmbedding: ", num_embeddings, " embeddings of ", embedding_dim,
               ": both must be positive and num_embeddings divisible by the group's ", ranks,
               " ranks");
  weight = register_parameter("weight", empty({num_embeddings / ranks, embedding_dim}));
  detail::init_part(weight, 0, *this->group, [](Tensor& t) { nn::init::normal_(t); });
}

Tensor VocabParallelEmbedding::forward(const Tensor& ids) {
  SINTER_CHECK(ids.defined() && ids.dtype() == DType::i64,
               "VocabParallelEmbedding: the ids must be an i64 tensor");
  const int64_t rows = weight.size(0), first = group->rank() * rows;
  const Tensor mine = both(ge(ids, first), lt(ids, first + rows));
  const Tensor local = where(mine, ids - first, Scalar(int64_t{0}));
  const Tensor found = embedding(weight, local) * mine.unsqueeze(-1).to(weight.dtype());
  return sequence_parallel ? reduce_scatter_sequence(found, group, 1) : reduce(found, group);
}

void VocabParallelEmbedding::load_full(const Tensor& w) {
  SINTER_CHECK(w.defined() && w.shape() == Shape({num_embeddings, embedding_dim}),
               "VocabParallelEmbedding::load_full: the whole table must be (", num_embeddings, ", ",
               embedding_dim, "), got ",
               w.defined() ? shape_str(w.shape()) : std::string("undefined"));
  const int64_t rows = weight.size(0);
  detail::assign(weight, w.narrow(0, group->rank() * rows, rows));
}

Tensor VocabParallelEmbedding::full() const { return detail::whole_of(weight, *group, 0); }

Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& target,
                                    const std::shared_ptr<ProcessGroup>& group,
                                    const CrossEntropyOptions& options) {
  check_args("vocab_parallel_cross_entropy", logits, group);
  SINTER_CHECK(logits.dim() == 2 && target.defined() && target.dtype() == DType::i64 &&
                   target.shape() == Shape({logits.size(0)}),
               "tp::vocab_parallel_cross_entropy: logits (N, C / ranks) and target (N) i64, got ",
               shape_str(logits.shape()), " and ",
               target.defined() ? shape_str(target.shape()) : std::string("undefined"));
  SINTER_CHECK(!options.weight.defined(),
               "tp::vocab_parallel_cross_entropy: a class weight is not supported");
  SINTER_CHECK(options.reduction != Reduction::BatchMean,
               "tp::vocab_parallel_cross_entropy: reduction BatchMean is kl_div's");
  SINTER_CHECK(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0,
               "tp::vocab_parallel_cross_entropy: label_smoothing must be in [0, 1], got ",
               options.label_smoothing);
  const int64_t width = logits.size(1), first = group->rank() * width;
  const int64_t classes = width * group->size();
  const Tensor valid = ne(target, options.ignore_index);
  if (target.numel() > 0) {  // the same target on every rank: all throw alike
    NoGradGuard no_grad;
    const Tensor kept = where(valid, target, Scalar(int64_t{0}));
    const std::vector<int64_t> lo_hi = stack({min(kept), max(kept)}).to_vector<int64_t>();
    SINTER_CHECK(lo_hi[0] >= 0 && lo_hi[1] < classes, "tp::vocab_parallel_cross_entropy: target ",
                 lo_hi[0] < 0 ? lo_hi[0] : lo_hi[1], " is out of range [0, ", classes,
                 ") and is not ignore_index (", options.ignore_index, ")");
  }
  // In the losses' accumulation dtype (f32, f64 for f64), as cross_entropy; the result in the
  // logits' dtype.
  const DType out_dtype = logits.dtype(), dt = kern::loss_acc_dtype(out_dtype);
  // Each row's max over the whole vocabulary, a constant shift (no gradient).
  Tensor top = fresh(amax(logits.detach(), {1}, true).to(dt));
  group->all_reduce(top, ReduceOp::Max);
  const Tensor z = logits.to(dt) - top;
  const Tensor lse = log(reduce(sum(exp(z), {1}), group));
  const Tensor mine = both(valid, both(ge(target, first), lt(target, first + width)));
  const Tensor local = where(mine, target - first, Scalar(int64_t{0}));
  const Tensor picked = reduce(gather(z, 1, local.unsqueeze(1)).squeeze(1) * mine.to(dt), group);
  Tensor loss = lse - picked;
  if (options.label_smoothing > 0.0) {
    const double eps = options.label_smoothing;
    const Tensor mean_z = reduce(sum(z, {1}), group) / static_cast<double>(classes);
    loss = loss * (1.0 - eps) + (lse - mean_z) * eps;
  }
  loss = loss * valid.to(dt);
  switch (options.reduction) {
    case Reduction::None:
      return loss.to(out_dtype);
    case Reduction::Sum:
      return sum(loss).to(out_dtype);
    default: {
      // Per Note [all ignored] (src/ops/softmax.cpp): with no target kept the loss is NaN and the
      // gradient zero, as cross_entropy's.
      Tensor scale, none_kept;
      {
        NoGradGuard no_grad;
        const Tensor count = sum(valid.to(dt));
        scale = where(gt(count, 0.0), 1.0 / count, Scalar(0.0));
        none_kept = where(gt(count, 0.0), zeros({}, {.dtype = dt, .device = count.device()}),
                          Scalar(std::nan("")));
      }
      return (sum(loss) * scale + none_kept).to(out_dtype);
    }
  }
}

Tensor detail::whole_of(const Tensor& shard, ProcessGroup& group, int64_t dim) {
  return joined("full", shard.detach(), group, dim);
}

void detail::assign(Tensor& to, const Tensor& from) {
  NoGradGuard no_grad;
  to.copy_(from.detach().to(to.dtype()).to(to.device()));
}

Tensor detail::language_model_loss(const char* model, const Tensor& logits, const Tensor& idx,
                                   const Tensor& targets,
                                   const std::shared_ptr<ProcessGroup>& group,
                                   const CrossEntropyOptions& options) {
  SINTER_CHECK(targets.defined() && targets.shape() == idx.shape(), model, "::loss: targets ",
               targets.defined() ? shape_str(targets.shape()) : std::string("undefined"),
               " must have the ids' shape ", shape_str(idx.shape()));
  return vocab_parallel_cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                                      group, options);
}

namespace {

void collect(const nn::Module& m, std::unordered_set<const void*>& seen, SplitParameters& out) {
  const auto* column = dynamic_cast<const ColumnParallelLinear*>(&m);
  const auto* row = dynamic_cast<const RowParallelLinear*>(&m);
  const auto* embedding = dynamic_cast<const VocabParallelEmbedding*>(&m);
  for (const auto& [name, p] : m.own_parameters()) {
    if (!p.defined() || !seen.insert(p.impl()).second) continue;
    const bool shard =
        column != nullptr || embedding != nullptr || (row != nullptr && name == "weight");
    (shard ? out.shards : out.whole).push_back(p);
  }
  for (const std::shared_ptr<nn::Module>& child : m.children()) collect(*child, seen, out);
}

}  // namespace

SplitParameters split_parameters(const nn::Module& module) {
  SplitParameters out;
  std::unordered_set<const void*> seen;
  collect(module, seen, out);
  return out;
}

double clip_grad_norm_(const nn::Module& module, double max_norm,
                       const std::shared_ptr<ProcessGroup>& group, double norm_type) {
  optim::detail::check_clip_arguments("tp::clip_grad_norm_", max_norm, norm_type);
  SINTER_CHECK(group != nullptr, "tp::clip_grad_norm_: no process group");
  const SplitParameters params = split_parameters(module);
  SINTER_CHECK(!params.shards.empty() || !params.whole.empty(),
               "tp::clip_grad_norm_: the module has no parameters");
  NoGradGuard no_grad;
  std::vector<Tensor> all = params.shards;
  all.insert(all.end(), params.whole.begin(), params.whole.end());
  // The accumulator's dtype and device from the parameters (the same on every rank).
  const DType acc = optim::detail::norm_accumulator(all);
  const Device device = all[0].device();
  const auto grads_of = [](const std::vector<Tensor>& ps) {
    std::vector<Tensor> grads;
    for (const Tensor& p : ps) {
      if (p.grad().defined() && p.grad().numel() > 0) grads.push_back(p.grad());
    }
    return grads;
  };
  const std::vector<Tensor> shard_grads = grads_of(params.shards),
                            whole_grads = grads_of(params.whole);
  const bool inf = std::isinf(norm_type);
  Tensor partial =
      fresh(optim::detail::grad_norm_partial(shard_grads, norm_type, acc, device).reshape({1}));
  group->all_reduce(partial, inf ? ReduceOp::Max : ReduceOp::Sum);
  const Tensor mine = optim::detail::grad_norm_partial(whole_grads, norm_type, acc, device);
  const Tensor reduced = inf ? maximum(partial.reshape({}), mine) : partial.reshape({}) + mine;
  std::vector<Tensor> grads = shard_grads;
  grads.insert(grads.end(), whole_grads.begin(), whole_grads.end());
  return optim::detail::scale_to_norm(grads, reduced, max_norm, norm_type)
      .to(DType::f64)
      .item<double>();
}

}  // namespace sinter::dist::tp

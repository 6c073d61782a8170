// Muon (Note [muon] in include/sinter/optim/muon.h): the Muon groups' step as tensor ops on the
// parameters' device, the AdamW groups' as AdamW's fused rule.
#include "sinter/optim/muon.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>

#include "optim/rule.h"
#include "sinter/core/error.h"
#include "sinter/cuda.h"
#include "sinter/nn/module.h"
#include "sinter/ops.h"

namespace sinter::optim {

void check_options(const MuonOptions& o, size_t group) {
  SINTER_CHECK(o.ns_steps == std::floor(o.ns_steps) && o.ns_steps < 100, "Muon: ns_steps must be ",
               "a whole number of steps under 100, got ", o.ns_steps, " in group ", group);
}

Muon::Muon(const std::vector<Tensor>& params, const MuonOptions& options)
    : OptimizerWithOptions(params, options) {
  check_shapes();
}

Muon::Muon(const std::vector<MuonGroup>& groups, const MuonOptions& defaults)
    : OptimizerWithOptions(groups, defaults) {
  check_shapes();
}

Muon::Muon(ShardsTag, const std::vector<MuonGroup>& groups, const MuonOptions& defaults)
    : OptimizerWithOptions(groups, defaults), over_shards_(true) {
  check_shapes();
}

std::unique_ptr<Muon> Muon::over_shards(const std::vector<MuonGroup>& groups,
                                        const MuonOptions& defaults) {
  return std::unique_ptr<Muon>(new Muon(ShardsTag{}, groups, defaults));
}

namespace {

// `count` runs of `length` at offset + k stride of a flat tensor, as a (count, length) view.
Tensor runs_of(const Tensor& flat, int64_t offset, int64_t length, int64_t count, int64_t stride) {
  if (count == 1) return flat.narrow(0, offset, length).unsqueeze(0);
  return flat.view({flat.numel() / stride, stride})
      .narrow(0, offset / stride, count)
      .narrow(1, offset % stride, length);
}

// Whether the runs fit a flat tensor of n elements (and, strided, its view as rows of `stride`).
bool runs_fit(int64_t n, int64_t offset, int64_t length, int64_t count, int64_t stride) {
  if (offset < 0 || length <= 0 || count < 1) return false;
  if (count == 1) return offset + length <= n;
  return stride > 0 && n % stride == 0 && offset % stride + length <= stride &&
         offset / stride + count <= n / stride;
}

}  // namespace

Tensor MuonShards::Piece::in_matrix(const Tensor& matrix) const {
  return runs_of(matrix, matrix_offset, length, count, matrix_stride);
}

Tensor MuonShards::Piece::in_shard(const Tensor& shard) const {
  return runs_of(shard, shard_offset, length, count, shard_stride);
}

void Muon::shard_group(size_t group, MuonShards shards) {
  SINTER_CHECK(over_shards_, "Muon::shard_group: this Muon takes whole matrices (make it with ",
               "Muon::over_shards to give it shards)");
  SINTER_CHECK(group < num_param_groups() && !options(group).adamw, "Muon::shard_group: group ",
               group, " is not a Muon group of this optimizer");
  SINTER_CHECK(shards.pieces.size() == params(group).size() && shards.gather != nullptr,
               "Muon::shard_group: group ", group, " has ", params(group).size(),
               " shards, the layout ", shards.pieces.size(), shards.gather ? "" : " and no gather");
  for (size_t i = 0; i < shards.pieces.size(); ++i) {
    SINTER_CHECK(params(group)[i].is_contiguous(), "Muon::shard_group: shard ", i, " of group ",
                 group, " is not contiguous");
    for (const MuonShards::Piece& piece : shards.pieces[i]) {
      const int64_t numel = piece.shape.size() == 2 ? piece.shape[0] * piece.shape[1] : -1;
      SINTER_CHECK(numel > 0 &&
                       runs_fit(numel, piece.matrix_offset, piece.length, piece.count,
                                piece.matrix_stride) &&
                       runs_fit(params(group)[i].numel(), piece.shard_offset, piece.length,
                                piece.count, piece.shard_stride),
                   "Muon::shard_group: a piece of shard ", i, " of group ", group, " (matrix ",
                   shape_str(piece.shape), ", ", piece.count, " x ", piece.length,
                   " elements) does not fit the matrix or the shard");
    }
  }
  shards_[group] = std::move(shards);
}

void Muon::check_shapes() const {
  for (size_t g = 0; g < num_param_groups(); ++g) {
    if (options(g).adamw) continue;
    for (size_t i = 0; i < params(g).size(); ++i) {
      const Tensor& p = params(g)[i];
      SINTER_CHECK(p.dim() == 2 || (over_shards_ && p.dim() == 1), "Muon: parameter ", i,
                   " of group ", g, " has shape ", shape_str(p.shape()),
                   over_shards_ ? "; Muon::over_shards takes flat shards (ZeRO's, FSDP's) or the "
                                  "2-D shards of tensor-parallel layers"
                                : "; Muon orthogonalizes 2-D updates only (give it a group with "
                                  "adamw = true; under ZeRO, make it with Muon::over_shards)");
      SINTER_CHECK(is_floating(p.dtype()), "Muon: parameter ", i, " of group ", g, " has dtype ",
                   p.dtype(), ", expected a floating-point tensor");
    }
  }
}

double muon_adjusted_lr(double lr, const Shape& shape, bool match_rms_adamw) {
  SINTER_CHECK(shape.size() >= 2, "muon_adjusted_lr: needs a 2-D shape, got ", shape_str(shape));
  const auto a = static_cast<double>(shape[0]), b = static_cast<double>(shape[1]);
  return match_rms_adamw ? lr * 0.2 * std::sqrt(std::max(a, b))
                         : lr * std::sqrt(std::max(1.0, a / b));
}

// Each step of Note [muon]'s iteration is computed in f32 (f64 for an f64 update) from operands
// in X's dtype and rounded to it once, as PyTorch's matmul and addmm round in bf16: products of
// bf16 values are exact in f32, sums in f32. ||X||_F from the sum of squares in f32, rounded.
Tensor muon_orthogonalize(const Tensor& update, const MuonOptions& o) {
  SINTER_CHECK(update.dim() == 2, "muon_orthogonalize: the update must be 2-D, got shape ",
               shape_str(update.shape()));
  check_options(o, 0);
  const DType dt = o.ns_bf16 ? DType::bf16 : update.dtype();
  const DType acc = dt == DType::f64 ? DType::f64 : DType::f32;
  const bool tall = update.size(0) > update.size(1);
  Tensor x = update.to(dt);
  if (tall) x = x.t();
  const Tensor norm = sqrt(sum(mul(x.to(acc), x.to(acc)))).to(dt);
  x = div(x, clamp(norm, Scalar(o.eps)));
  for (int k = 0; k < static_cast<int>(o.ns_steps); ++k) {
    const Tensor xa = x.to(acc);
    const Tensor m = matmul(xa, xa.t()).to(dt).to(acc);
    const Tensor n = add(mul(m, o.ns_b), mul(matmul(m, m), o.ns_c)).to(dt).to(acc);
    x = add(mul(xa, o.ns_a), matmul(n, xa)).to(dt);
  }
  return tall ? x.t() : x;
}

void Muon::step_group(size_t group, const MuonOptions& o) {
  // Before any group changes: the shapes of every group (a group added, or turned from AdamW's
  // into Muon's, since the constructor checked them), and no capture (Muon's groups read the
  // learning rate on the host: a captured step would replay the lr it had then).
  if (group == 0) check_shapes();
  SINTER_CHECK(o.adamw || !cuda::is_capturing(), "Muon: group ", group,
               " cannot step inside a CUDA graph capture (its learning rate is read on the host)");
  if (o.adamw) {  // AdamW's fused rule, with AdamW's options from the group's
    const AdamOptions a{.lr = o.lr,
                        .betas = o.betas,
                        .eps = o.adamw_eps,
                        .weight_decay = o.weight_decay,
                        .decoupled_weight_decay = true};
    SINTER_RULE_STEP(adam, kern::AdamRule, group, a, {"exp_avg", 0.0, true},
                     {"exp_avg_sq", 0.0, true});
    return;
  }
  if (over_shards_) {
    step_sharded(group, o);
    return;
  }
  for (const std::vector<size_t>& bucket : grad_buckets(group)) {
    for (size_t i : bucket) {
      Tensor& p = params_[group][i];
      const Tensor update = muon_orthogonalize(momentum_update(group, i, p.grad(), o), o);
      p.mul_(1.0 - o.lr * o.weight_decay);
      // A bf16 update widens exactly to the parameter's dtype (PyTorch's add_ promotes alike).
      p.add_(update.to(p.dtype()), -muon_adjusted_lr(o.lr, p.shape(), o.match_rms_adamw));
    }
  }
}

Tensor Muon::momentum_update(size_t group, size_t i, const Tensor& grad, const MuonOptions& o) {
  const Tensor& p = params_[group][i];
  auto& state = state_[group][i];
  auto it = state.find("momentum_buffer");
  if (it == state.end()) {
    check_not_capturing(group, i, "momentum_buffer");
    it = state.emplace("momentum_buffer", zeros_like(p)).first;
  }
  fit_state(it->second, p, "momentum_buffer");
  Tensor& buf = it->second;
  // Each lerp rounds once (in f32 for bf16 and f16), as PyTorch's lerp_ and lerp do.
  buf.copy_(lerp(buf, grad, 1.0 - o.momentum));
  return o.nesterov ? lerp(grad, buf, o.momentum) : buf;
}

// Note [muon shards]. Every rank calls the gather: a shard without a gradient (none this step on
// any rank, as they agree) contributes zeros and is left as it is.
void Muon::step_sharded(size_t group, const MuonOptions& o) {
  const auto it = shards_.find(group);
  SINTER_CHECK(it != shards_.end(), "Muon: group ", group,
               " holds shards with no layout (the sharder gives it: ZeroRedundancyOptimizer, "
               "FullyShardedDataParallel::give_muon_layouts or tp::give_muon_layouts)");
  const MuonShards& layout = it->second;
  std::vector<Tensor>& ps = params_[group];
  std::vector<Tensor> us;
  for (size_t i = 0; i < ps.size(); ++i) {
    const Tensor& g = ps[i].grad();
    us.push_back(g.defined() ? momentum_update(group, i, g, o).contiguous() : zeros_like(ps[i]));
  }
  const std::vector<Tensor> whole = layout.gather(us);
  SINTER_CHECK(whole.size() == ps.size(), "Muon: the gather of group ", group, " gave ",
               whole.size(), " buckets for ", ps.size(), " shards");
  for (size_t i = 0; i < ps.size(); ++i) {
    if (!ps[i].grad().defined()) continue;
    Tensor& p = ps[i];
    p.mul_(1.0 - o.lr * o.weight_decay);
    const Tensor flat = p.detach().reshape({-1});  // (a view: the shards are contiguous)
    Tensor update;  // of the last matrix orthogonalized: a shard's pieces of one matrix share it
    int64_t at = -1;
    for (const MuonShards::Piece& piece : layout.pieces[i]) {
      if (piece.bucket_offset != at) {
        const int64_t numel = piece.shape[0] * piece.shape[1];
        const Tensor u = whole[i].narrow(0, piece.bucket_offset, numel).reshape(piece.shape);
        update = muon_orthogonalize(u, o).reshape({-1}).to(p.dtype());
        at = piece.bucket_offset;
      }
      piece.in_shard(flat).add_(piece.in_matrix(update),
                                -muon_adjusted_lr(o.lr, piece.shape, o.match_rms_adamw));
    }
  }
}

std::pair<std::vector<Tensor>, std::vector<Tensor>> muon_split(const nn::Module& model) {
  // Every module by its dotted path, to find a parameter's owner.
  std::map<std::string, const nn::Module*> modules{{"", &model}};
  std::function<void(const nn::Module&, const std::string&)> walk = [&](const nn::Module& m,
                                                                        const std::string& at) {
    for (const auto& [name, child] : m.named_children()) {
      const std::string path = at.empty() ? name : at + "." + name;
      modules[path] = child.get();
      walk(*child, path);
    }
  };
  walk(model, "");
  std::pair<std::vector<Tensor>, std::vector<Tensor>> out;
  for (const auto& [name, p] : model.named_parameters()) {
    const size_t dot = name.rfind('.');
    const std::string owner = dot == std::string::npos ? "" : name.substr(0, dot);
    const std::string top = name.substr(0, name.find('.'));
    const bool embedding = modules.at(owner)->name().find("Embedding") != std::string::npos;
    const bool head = top == "lm_head" || top == "head";
    (p.dim() == 2 && !embedding && !head ? out.first : out.second).push_back(p);
  }
  return out;
}

}  // namespace sinter::optim

// lm's optimizer (--optimizer): AdamW, or Muon with AdamW beside it (Note [lm muon]).
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lm/run.h"

namespace example::lm {

std::unique_ptr<st::optim::AdamW> adamw(const Run& r, const std::vector<st::Tensor>& matrices,
                                        const std::vector<st::Tensor>& rest) {
  return std::make_unique<st::optim::AdamW>(
      std::vector<st::optim::AdamWGroup>{{.params = matrices, .weight_decay = r.cfg.weight_decay},
                                         {.params = rest, .weight_decay = 0.0}},
      st::optim::AdamWOptions{
          .lr = r.cfg.lr, .betas = {0.9, 0.95}, .capturable = r.args.cuda_graph});
}

// Note [lm muon]
// --optimizer muon: optim::Muon over the weight matrices of the hidden layers (attention and MLP
// projections; optim::muon_split), with Moonlight's scale (match_rms_adamw: the update's RMS near
// AdamW's), so that --lr, --weight-decay and the schedule carry over from AdamW unchanged; and
// in the same optimizer, two AdamW groups with lm's AdamW settings: the other matrices (the
// embeddings and the output head) with the weight decay, the rest (norms, biases) without. One
// optimizer, so the schedule, clipping, GradScaler and checkpoints treat it as AdamW. With --zero
// the three groups are sharded, with --fsdp Muon takes FSDP's shards, and with --tp the split
// layers' rows or columns; each way Muon gathers each matrix it needs whole (Note [muon shards]).
// --fsdp with --tp (FSDP's shards of the split layers' shards) is refused, as --cuda-graph is (the
// step reads the learning rate on the host).
void check_optimizer(const Run& r) {
  const Args& a = r.args;
  if (r.cfg.optimizer == "muon" && ((a.fsdp && a.tp > 1) || a.cuda_graph)) {
    throw st::Error(
        "--optimizer muon: Muon orthogonalizes whole weight matrices; it does not combine with "
        "--cuda-graph, nor with --fsdp and --tp together (use one of them, or --optimizer "
        "adamw)");
  }
}

namespace {

// The three groups of Note [lm muon], over whole parameters or (over_shards) ZeRO's shards.
std::unique_ptr<st::optim::Muon> muon(const Run& r, const std::vector<st::Tensor>& matrices,
                                      const std::vector<st::Tensor>& decay,
                                      const std::vector<st::Tensor>& no_decay, bool over_shards) {
  const st::optim::Betas betas{0.9, 0.95};
  const std::vector<st::optim::MuonGroup> groups{
      {.params = matrices, .weight_decay = r.cfg.weight_decay},
      {.params = decay, .weight_decay = r.cfg.weight_decay, .adamw = true, .betas = betas},
      {.params = no_decay, .weight_decay = 0.0, .adamw = true, .betas = betas}};
  const st::optim::MuonOptions o{.lr = r.cfg.lr, .match_rms_adamw = true};
  return over_shards ? st::optim::Muon::over_shards(groups, o)
                     : std::make_unique<st::optim::Muon>(groups, o);
}

}  // namespace

std::unique_ptr<st::optim::Optimizer> make_optimizer(const Run& r) {
  check_optimizer(r);
  std::vector<st::Tensor> decay, no_decay;
  if (r.cfg.optimizer != "muon") {
    for (const st::Tensor& p : r.params) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    return adamw(r, decay, no_decay);
  }
  auto [matrices, rest] = st::optim::muon_split(*r.model.module);
  for (const st::Tensor& p : rest) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  if (!r.tp_group) return muon(r, matrices, decay, no_decay, false);
  std::unique_ptr<st::optim::Muon> m = muon(r, matrices, decay, no_decay, true);
  st::dist::tp::give_muon_layouts(*r.model.module, *m);  // the split matrices joined to step
  return m;
}

ParamRoles param_roles(const Run& r) {
  ParamRoles roles;
  const std::vector<st::Tensor> matrices = r.cfg.optimizer == "muon"
                                               ? st::optim::muon_split(*r.model.module).first
                                               : std::vector<st::Tensor>{};
  for (const auto& [name, p] : r.model.module->named_parameters()) {
    const bool muon = std::any_of(matrices.begin(), matrices.end(),
                                  [&](const st::Tensor& m) { return m.is_same(p); });
    if (muon) {
      roles.muon.insert(name);
    } else if (p.dim() >= 2) {
      roles.decay.insert(name);
    }
  }
  return roles;
}

std::unique_ptr<st::optim::Optimizer> fsdp_optimizer(const Run& r, const ParamRoles& roles) {
  check_optimizer(r);
  std::vector<st::Tensor> matrices, decay, no_decay;
  for (const auto& [name, shard] : r.fsdp->named_parameters()) {
    (roles.muon.count(name)    ? matrices
     : roles.decay.count(name) ? decay
                               : no_decay)
        .push_back(shard);
  }
  if (r.cfg.optimizer != "muon") return adamw(r, decay, no_decay);
  std::unique_ptr<st::optim::Muon> m = muon(r, matrices, decay, no_decay, true);
  r.fsdp->give_muon_layouts(*m);
  return m;
}

std::unique_ptr<st::dist::ZeroRedundancyOptimizer> zero_optimizer(const Run& r) {
  check_optimizer(r);
  using Zero = st::dist::ZeroRedundancyOptimizer;
  const std::function<int(const std::string&, const st::Tensor&)> by_dims =
      [](const std::string&, const st::Tensor& p) { return p.dim() >= 2 ? 0 : 1; };
  if (r.cfg.optimizer != "muon") {
    return std::make_unique<Zero>(
        *r.ddp, Zero::MakeGroupedOptimizer([&](const std::vector<std::vector<st::Tensor>>& g) {
          return adamw(r, g[0], g[1]);
        }),
        st::dist::ZeroOptions{.stage = r.args.zero, .group_of = by_dims});
  }
  const std::vector<st::Tensor> matrices = st::optim::muon_split(*r.model.module).first;
  const std::function<int(const std::string&, const st::Tensor&)> by_role =
      [matrices](const std::string&, const st::Tensor& p) {
        for (const st::Tensor& m : matrices) {
          if (m.is_same(p)) return 0;
        }
        return p.dim() >= 2 ? 1 : 2;
      };
  return std::make_unique<Zero>(
      *r.ddp, Zero::MakeGroupedOptimizer([&](const std::vector<std::vector<st::Tensor>>& g) {
        SINTER_CHECK(g.size() == 3, "--optimizer muon --zero: the model makes ", g.size(),
                     " parameter groups, not Muon's, AdamW's decayed and AdamW's others");
        return muon(r, g[0], g[1], g[2], true);
      }),
      st::dist::ZeroOptions{.stage = r.args.zero, .group_of = by_role});
}

}  // namespace example::lm

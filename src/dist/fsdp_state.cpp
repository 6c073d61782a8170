// FullyShardedDataParallel's state dicts: the whole model's, gathered from the shards, and each
// rank's shards taken from a whole one (Note [fully sharded data parallel] in
// include/sinter/fsdp.h); and Muon's layouts of the shards (Note [muon shards]).
#include <algorithm>
#include <map>
#include <sstream>
#include <utility>

#include "dist/fsdp_impl.h"
#include "sinter/ops.h"
#include "sinter/optim/muon.h"

namespace sinter::dist {

namespace {

constexpr const char* kName = "FullyShardedDataParallel";

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

}  // namespace

StateDict FullyShardedDataParallel::state_dict() const {
  const Impl& s = *impl_;
  NoGradGuard ng;
  const int64_t n = s.size();
  // Each unit's shards gathered in their own dtype (not the compute dtype: the values are the
  // optimizer's), by the storage identity of the model's parameter.
  std::map<const void*, Tensor> whole;
  for (const detail::FsdpUnit& unit : s.units) {
    if (unit.params.empty()) continue;
    const Device device = s.params[unit.params[0]].shard.device();
    Tensor send = empty({unit.part}, {.dtype = unit.shard_dtype, .device = device});
    for (size_t i : unit.params) {
      const detail::FsdpParam& p = s.params[i];
      send.narrow(0, p.offset, p.chunk).copy_(p.shard.detach());
    }
    Tensor all = empty({n * unit.part}, {.dtype = unit.shard_dtype, .device = device});
    pg_->all_gather_into(all, send);
    const Tensor rows = all.view({n, unit.part});
    for (size_t i : unit.params) {
      const detail::FsdpParam& p = s.params[i];
      whole[p.param.storage().id()] = rows.narrow(1, p.offset, p.chunk)
                                          .contiguous()
                                          .reshape({-1})
                                          .narrow(0, 0, p.numel)
                                          .view(p.param.shape());
    }
  }
  StateDict out;
  for (const auto& [key, t] : module_->state_dict()) {
    auto it = whole.find(t.storage().id());
    out[key] = it != whole.end() ? it->second : t.clone();
  }
  return out;
}

LoadResult FullyShardedDataParallel::load_state_dict(const StateDict& state, bool strict) {
  Impl& s = *impl_;
  std::map<const void*, size_t> param_of;  // storage identity -> index into s.params
  for (size_t i = 0; i < s.params.size(); ++i) param_of[s.params[i].param.storage().id()] = i;
  const StateDict own = module_->state_dict();
  LoadResult result;
  for (const auto& [key, t] : own) {
    if (!state.count(key)) result.missing_keys.push_back(key);
  }
  for (const auto& [key, t] : state) {
    if (!own.count(key)) result.unexpected_keys.push_back(key);
  }
  std::vector<std::string> problems;
  if (strict && !result.missing_keys.empty()) {
    problems.push_back("missing keys: " + join(result.missing_keys));
  }
  if (strict && !result.unexpected_keys.empty()) {
    problems.push_back("unexpected keys: " + join(result.unexpected_keys));
  }
  for (const auto& [key, t] : own) {
    auto it = state.find(key);
    if (it == state.end()) continue;
    auto p = param_of.find(t.storage().id());
    // A parameter's dtype is its shard's (the model's tensor may be in the compute dtype).
    const DType dtype = p != param_of.end() ? s.params[p->second].shard.dtype() : t.dtype();
    const Tensor& v = it->second;
    if (!v.defined()) {
      problems.push_back("'" + key + "' is an undefined tensor");
      continue;
    }
    if (v.shape() != t.shape() || v.dtype() != dtype) {
      std::ostringstream os;
      os << "'" << key << "': expected " << shape_str(t.shape()) << " " << dtype << ", got "
         << shape_str(v.shape()) << " " << v.dtype();
      problems.push_back(os.str());
    }
  }
  SINTER_CHECK(problems.empty(), kName, "::load_state_dict: ", join(problems));
  NoGradGuard ng;
  // Every shard is rewritten: gathered copies of the old values go.
  s.reshard_all();
  const int64_t rank = s.pg->rank();
  std::vector<bool> loaded(s.params.size(), false);
  for (const auto& [key, t] : own) {
    auto it = state.find(key);
    if (it == state.end()) continue;
    auto p = param_of.find(t.storage().id());
    if (p == param_of.end()) {
      Tensor buffer = t;
      buffer.copy_(it->second);
      continue;
    }
    if (loaded[p->second]) continue;  // a tied parameter, under its first name
    loaded[p->second] = true;
    detail::FsdpParam& param = s.params[p->second];
    const Tensor flat = it->second.reshape({-1});
    Tensor shard = param.shard.detach();
    shard.zero_();
    const int64_t begin = std::min(param.numel, rank * param.chunk);
    const int64_t end = std::min(param.numel, (rank + 1) * param.chunk);
    if (end > begin) shard.narrow(0, 0, end - begin).copy_(flat.narrow(0, begin, end - begin));
  }
  return result;
}

std::vector<ShardSpec> FullyShardedDataParallel::shard_specs(const std::vector<ShardSpec>& base,
                                                             const std::string& prefix) const {
  const Impl& s = *impl_;
  std::map<const void*, const ShardSpec*> placed;  // storage identity -> spec
  for (const ShardSpec& b : base) placed[b.local.storage().id()] = &b;
  const int64_t rank = s.pg->rank();
  std::vector<ShardSpec> out;
  for (const detail::FsdpParam& p : s.params) {
    auto it = placed.find(p.param.storage().id());
    const ShardSpec own = {prefix + p.name, p.param.shape(), p.param, {Run{0, 0, p.numel}}, true};
    const ShardSpec& where = it != placed.end() ? *it->second : own;
    // This rank's part of the local parameter: elements [rank chunk, (rank + 1) chunk).
    const int64_t begin = std::min(p.numel, rank * p.chunk);
    const int64_t end = std::min(p.numel, (rank + 1) * p.chunk);
    out.push_back(
        {where.name, where.whole, p.shard, restrict_runs(where.runs, begin, end), where.writer});
  }
  for (const auto& [name, b] : module_->named_buffers()) {
    auto it = placed.find(b.storage().id());
    if (it == placed.end()) {
      out.push_back(whole_spec(prefix + name, b, rank == 0));
    } else {  // as the base places it, written by the group's rank 0 at most
      ShardSpec spec = *it->second;
      spec.writer = spec.writer && rank == 0;
      out.push_back(spec);
    }
  }
  return out;
}

// Each parameter's shard is part r of its flat whole, padded to N equal parts: the piece of the
// matrix it holds starts at r * chunk, and the gather of a shard-shaped tensor is the padded
// whole.
void FullyShardedDataParallel::give_muon_layouts(optim::Muon& muon) const {
  const Impl& s = *impl_;
  SINTER_CHECK(muon.takes_shards(), kName,
               "::give_muon_layouts: the Muon must be made by Muon::over_shards");
  const int64_t rank = s.pg->rank();
  for (size_t g = 0; g < muon.num_param_groups(); ++g) {
    if (muon.options(g).adamw) continue;
    optim::MuonShards layout;
    for (const Tensor& shard : muon.params(g)) {
      const auto it =
          std::find_if(s.params.begin(), s.params.end(),
                       [&](const detail::FsdpParam& p) { return p.shard.is_same(shard); });
      SINTER_CHECK(it != s.params.end(), kName, "::give_muon_layouts: Muon's group ", g,
                   " holds a tensor of shape ", shape_str(shard.shape()),
                   " that is not a shard of this model");
      SINTER_CHECK(it->param.dim() == 2, kName, "::give_muon_layouts: Muon's group ", g,
                   " holds the shard of '", it->name, "' of shape ", shape_str(it->param.shape()),
                   "; Muon orthogonalizes matrices (put it in an adamw group)");
      const int64_t from = rank * it->chunk, length = std::min(it->chunk, it->numel - from);
      std::vector<optim::MuonShards::Piece>& pieces = layout.pieces.emplace_back();
      if (length > 0) {  // (else the shard is all padding)
        pieces.push_back({.shape = it->param.shape(),
                          .bucket_offset = 0,
                          .matrix_offset = from,
                          .shard_offset = 0,
                          .length = length});
      }
    }
    layout.gather = [pg = pg_, n = s.size()](const std::vector<Tensor>& parts) {
      std::vector<Tensor> whole, inputs;  // (kept alive until the gathers end)
      std::vector<std::shared_ptr<Work>> works;
      for (const Tensor& part : parts) {
        inputs.push_back(part.contiguous());
        whole.push_back(
            empty({n * part.numel()}, {.dtype = part.dtype(), .device = part.device()}));
        works.push_back(pg->all_gather_into_async(whole.back(), inputs.back()));
      }
      for (const auto& w : works) w->wait();
      return whole;
    };
    muon.shard_group(g, std::move(layout));
  }
}

}  // namespace sinter::dist

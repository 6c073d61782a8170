// ZeroRedundancyOptimizer: the optimizer state and (stage 2) the gradients of a
// DistributedDataParallel sharded over the ranks, Note [zero sharding] in include/sinter/dist.h.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include "dist/ddp_impl.h"
#include "internal/clip_impl.h"
#include "sinter/autograd.h"
#include "sinter/io.h"
#include "sinter/ops.h"
#include "sinter/optim/muon.h"

namespace sinter::dist {

namespace {

constexpr const char* kName = "ZeroRedundancyOptimizer";

Tensor scalar(double v) { return full({}, v, {.dtype = DType::f64}); }

// Part `rank` of bucket `b`: [rank * part, (rank + 1) * part) of its padded flat layout.
struct Part {
  int64_t begin = 0, end = 0;
};

Part part_of(const detail::Bucket& b, int rank, int size) {
  const int64_t part = b.padded / size;
  return {rank * part, (rank + 1) * part};
}

// Calls f(param index, param offset, shard offset, length) for each piece of bucket `b`'s
// parameters that falls in `part`.
template <class F>
void for_each_piece(const detail::Bucket& b, const std::vector<detail::Slot>& slots,
                    const std::vector<Tensor>& params, Part part, F&& f) {
  for (size_t i : b.params) {
    const int64_t lo = slots[i].offset, hi = lo + params[i].numel();
    const int64_t a = std::max(lo, part.begin), z = std::min(hi, part.end);
    if (a < z) f(i, a - lo, a - part.begin, z - a);
  }
}

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(DistributedDataParallel& ddp,
                                                 const MakeOptimizer& make, ZeroOptions options)
    : ZeroRedundancyOptimizer(
          ddp, MakeGroupedOptimizer([make](const std::vector<std::vector<Tensor>>& groups) {
            SINTER_CHECK(groups.size() == 1, kName, ": ZeroOptions::group_of makes ", groups.size(),
                         " parameter groups; give a function that takes the shards of each "
                         "group (a std::vector<std::vector<Tensor>>)");
            SINTER_CHECK(make != nullptr, kName, ": no function to make the local optimizer");
            return make(groups[0]);
          }),
          std::move(options)) {}

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(DistributedDataParallel& ddp,
                                                 const MakeGroupedOptimizer& make,
                                                 ZeroOptions options)
    : Optimizer(kName), impl_(ddp.impl_), pg_(ddp.pg_), options_(std::move(options)) {
  SINTER_CHECK(options_.stage == 1 || options_.stage == 2, kName, ": stage must be 1 or 2, got ",
               options_.stage);
  SINTER_CHECK(make != nullptr, kName, ": no function to make the local optimizer");
  DistributedDataParallel::Impl& impl = *ddp.impl_;
  // Every parameter's group, and each group's parameters in module order.
  std::vector<int> groups(impl.all_params.size(), 0);
  int num_groups = 1;
  if (options_.group_of) {
    num_groups = 0;
    for (size_t i = 0; i < impl.all_params.size(); ++i) {
      groups[i] = options_.group_of(impl.names[i], impl.all_params[i]);
      SINTER_CHECK(groups[i] >= 0 && groups[i] < 1024, kName, ": group_of puts parameter '",
                   impl.names[i], "' in group ", groups[i], " (groups are 0, 1, ...)");
      num_groups = std::max(num_groups, groups[i] + 1);
    }
  }
  group_params_.assign(static_cast<size_t>(num_groups), {});
  for (size_t i = 0; i < impl.all_params.size(); ++i) {
    group_params_[static_cast<size_t>(groups[i])].push_back(i);
  }
  SINTER_CHECK(!impl.trained.empty(), kName, ": the model has no parameter that requires grad");
  impl.attach_zero(options_.stage, options_.group_of ? groups : std::vector<int>{});
  try {
    build(make);
  } catch (...) {
    impl.detach_zero();
    throw;
  }
}

void ZeroRedundancyOptimizer::build(const MakeGroupedOptimizer& make) {
  DistributedDataParallel::Impl& impl = *impl_;
  const int rank = impl.pg->rank(), size = impl.pg->size();
  group_buckets_.assign(group_params_.size(), {});
  std::vector<std::vector<Tensor>> shard_groups(group_params_.size());
  {
    NoGradGuard ng;
    for (size_t k = 0; k < impl.buckets.size(); ++k) {
      const detail::Bucket& b = impl.buckets[k];
      const Part part = part_of(b, rank, size);
      Tensor shard = zeros({part.end - part.begin}, {.dtype = b.dtype, .device = b.device});
      for_each_piece(b, impl.slots, impl.all_params, part,
                     [&](size_t i, int64_t from, int64_t to, int64_t len) {
                       shard.narrow(0, to, len)
                           .copy_(impl.all_params[i].detach().reshape({-1}).narrow(0, from, len));
                     });
      shard.requires_grad_(true);
      shards_.push_back(shard);
      group_buckets_[static_cast<size_t>(b.group)].push_back(k);
      shard_groups[static_cast<size_t>(b.group)].push_back(shard);
    }
  }
  for (size_t g = 0; g < shard_groups.size(); ++g) {
    SINTER_CHECK(!shard_groups[g].empty(), kName, ": parameter group ", g,
                 " has no parameter that requires grad");
  }
  impl.shards = shards_;
  inner_ = make(shard_groups);
  SINTER_CHECK(inner_ != nullptr, kName,
               ": the function to make the local optimizer returned null");
  bool same = inner_->num_param_groups() == shard_groups.size();
  for (size_t g = 0; same && g < shard_groups.size(); ++g) {
    const std::vector<Tensor>& given = inner_->params(g);
    same = given.size() == shard_groups[g].size();
    for (size_t k = 0; same && k < given.size(); ++k) same = given[k].is_same(shard_groups[g][k]);
  }
  SINTER_CHECK(same, kName, ": the local optimizer (", inner_->name(), ") must be made over the ",
               shards_.size(),
               " shard tensors it is given, group by group and in their order; it "
               "holds ",
               inner_->parameters().size(), " parameters in ", inner_->num_param_groups(),
               " group(s)");
  for (size_t g = 0; g < inner_->num_param_groups(); ++g) {
    add_group(inner_->params(g), inner_->hyperparameters(g));
  }
  auto* muon = dynamic_cast<optim::Muon*>(inner_.get());
  if (muon && muon->takes_shards()) give_muon_layouts(*muon);
}

// Per Note [muon shards]: each Muon group's shards, the pieces of matrices each holds (where the
// matrix sits in its bucket, where the piece sits in the matrix and in the shard), and the gather
// of a shard-shaped tensor into its whole bucket.
void ZeroRedundancyOptimizer::give_muon_layouts(optim::Muon& muon) {
  DistributedDataParallel::Impl& impl = *impl_;
  const int rank = impl.pg->rank(), size = impl.pg->size();
  for (size_t g = 0; g < group_buckets_.size(); ++g) {
    if (muon.options(g).adamw) continue;
    optim::MuonShards layout;
    for (size_t k : group_buckets_[g]) {
      const detail::Bucket& b = impl.buckets[k];
      for (size_t i : b.params) {
        SINTER_CHECK(impl.all_params[i].dim() == 2, kName, ": Muon's group ", g,
                     " holds parameter '", impl.names[i], "' of shape ",
                     shape_str(impl.all_params[i].shape()),
                     "; Muon orthogonalizes matrices (put it in an adamw group with group_of)");
      }
      std::vector<optim::MuonShards::Piece>& pieces = layout.pieces.emplace_back();
      for_each_piece(b, impl.slots, impl.all_params, part_of(b, rank, size),
                     [&](size_t i, int64_t from, int64_t to, int64_t len) {
                       pieces.push_back({.shape = impl.all_params[i].shape(),
                                         .bucket_offset = impl.slots[i].offset,
                                         .matrix_offset = from,
                                         .shard_offset = to,
                                         .length = len});
                     });
    }
    layout.gather = [impl = impl_, pg = pg_,
                     buckets = group_buckets_[g]](const std::vector<Tensor>& parts) {
      std::vector<Tensor> whole;
      std::vector<std::shared_ptr<Work>> works;
      for (size_t j = 0; j < buckets.size(); ++j) {
        const detail::Bucket& b = impl->buckets[buckets[j]];
        whole.push_back(empty({b.padded}, {.dtype = b.dtype, .device = b.device}));
        works.push_back(pg->all_gather_into_async(whole.back(), parts[j]));
      }
      for (const auto& w : works) w->wait();
      return whole;
    };
    muon.shard_group(g, std::move(layout));
  }
}

ZeroRedundancyOptimizer::~ZeroRedundancyOptimizer() { impl_->detach_zero(); }

void ZeroRedundancyOptimizer::check(const optim::Hyperparameters& h, size_t group) const {
  // The local optimizer checks the values when they are stored; here only the names.
  if (!inner_ || group >= inner_->num_param_groups()) return;
  const optim::Hyperparameters own = inner_->hyperparameters(group);
  for (const auto& [name, value] : h) {
    SINTER_CHECK(own.count(name), kName, ": group ", group, ": ", inner_->name(),
                 " has no hyperparameter \"", name, "\"");
  }
}

void ZeroRedundancyOptimizer::store(size_t group, const optim::Hyperparameters& h) {
  const optim::Hyperparameters own = inner_->hyperparameters(group);
  for (const auto& [name, value] : h) {
    if (own.at(name) != value) inner_->set_hyperparameter(group, name, value);
  }
}

optim::Hyperparameters ZeroRedundancyOptimizer::load(size_t group) const {
  return inner_->hyperparameters(group);
}

void ZeroRedundancyOptimizer::step() {
  NoGradGuard ng;
  DistributedDataParallel::Impl& impl = *impl_;
  ProcessGroup& pg = *impl.pg;
  const int rank = pg.rank(), size = pg.size();
  // The parameters are the truth (a checkpoint may have been loaded into the model since the last
  // step): this rank's part of them goes into its shards first.
  for (size_t k = 0; k < impl.buckets.size(); ++k) {
    const detail::Bucket& b = impl.buckets[k];
    for_each_piece(b, impl.slots, impl.all_params, part_of(b, rank, size),
                   [&](size_t i, int64_t from, int64_t to, int64_t len) {
                     Tensor piece = shards_[k].detach().narrow(0, to, len);
                     piece.copy_(impl.all_params[i].detach().reshape({-1}).narrow(0, from, len));
                   });
  }
  inner_->step();
  // Every bucket's updated shards, gathered into the parameters.
  std::vector<Tensor> full_buckets;
  std::vector<std::shared_ptr<Work>> works;
  for (size_t k = 0; k < impl.buckets.size(); ++k) {
    const detail::Bucket& b = impl.buckets[k];
    full_buckets.push_back(empty({b.padded}, {.dtype = b.dtype, .device = b.device}));
    works.push_back(pg.all_gather_into_async(full_buckets.back(), shards_[k].detach()));
  }
  for (size_t k = 0; k < impl.buckets.size(); ++k) {
    works[k]->wait();
    const detail::Bucket& b = impl.buckets[k];
    for (size_t i : b.params) {
      Tensor p = impl.all_params[i].detach();
      p.copy_(full_buckets[k].narrow(0, impl.slots[i].offset, p.numel()).view(p.shape()));
    }
  }
}

void ZeroRedundancyOptimizer::zero_grad(bool set_to_none) {
  Optimizer::zero_grad(set_to_none);
  zero_grads(impl_->all_params, set_to_none);
}

double detail::clip_sharded(const char* op, const std::vector<Tensor>& shards, ProcessGroup& pg,
                            double max_norm, double norm_type) {
  optim::detail::check_clip_arguments(op, max_norm, norm_type);
  NoGradGuard ng;
  // The accumulator's dtype and device from the shards (the same on every rank), not from which
  // gradients this rank happens to have.
  const DType acc = optim::detail::norm_accumulator(shards);
  std::vector<Tensor> grads;
  for (const Tensor& s : shards) {
    if (s.grad().defined() && s.grad().numel() > 0) grads.push_back(s.grad());
  }
  Tensor partial = optim::detail::grad_norm_partial(grads, norm_type, acc, shards[0].device());
  partial = partial.contiguous();
  pg.all_reduce(partial, std::isinf(norm_type) ? ReduceOp::Max : ReduceOp::Sum);
  const Tensor total = optim::detail::scale_to_norm(grads, partial, max_norm, norm_type);
  return total.to(DType::f64).item<double>();
}

double ZeroRedundancyOptimizer::clip_grad_norm_(double max_norm, double norm_type) {
  return detail::clip_sharded("ZeroRedundancyOptimizer::clip_grad_norm_", shards_, *impl_->pg,
                              max_norm, norm_type);
}

StateDict ZeroRedundancyOptimizer::state_dict() const {
  const DistributedDataParallel::Impl& impl = *impl_;
  auto ints = [](const std::vector<int64_t>& v) {
    return from_vector(v, {static_cast<int64_t>(v.size())}, {.dtype = DType::i64});
  };
  StateDict dict = inner_->state_dict();
  dict["zero.world_size"] = scalar(impl.pg->size());
  dict["zero.rank"] = scalar(impl.pg->rank());
  dict["zero.stage"] = scalar(options_.stage);
  dict["zero.num_buckets"] = scalar(static_cast<double>(impl.buckets.size()));
  dict["zero.num_groups"] = scalar(static_cast<double>(group_params_.size()));
  for (size_t g = 0; g < group_params_.size(); ++g) {
    dict["zero.group." + std::to_string(g) + ".params"] =
        ints({group_params_[g].begin(), group_params_[g].end()});
    for (size_t j = 0; j < group_buckets_[g].size(); ++j) {
      const std::string key = "zero.bucket." + std::to_string(group_buckets_[g][j]);
      dict[key + ".group"] = scalar(static_cast<double>(g));
      dict[key + ".index"] = scalar(static_cast<double>(j));
    }
  }
  for (size_t k = 0; k < impl.buckets.size(); ++k) {
    const detail::Bucket& b = impl.buckets[k];
    const std::string key = "zero.bucket." + std::to_string(k);
    dict[key + ".numel"] = scalar(static_cast<double>(b.numel));
    dict[key + ".params"] = ints({b.params.begin(), b.params.end()});
  }
  for (size_t i = 0; i < impl.all_params.size(); ++i) {
    const Shape& shape = impl.all_params[i].shape();
    dict["zero.param." + std::to_string(i) + ".shape"] = ints({shape.begin(), shape.end()});
  }
  return dict;
}

namespace {

// The one number under `key`, else an Error naming `op` and `what` the dict should have been.
double number(const StateDict& dict, const std::string& key, const std::string& op,
              const char* what) {
  auto it = dict.find(key);
  SINTER_CHECK(it != dict.end(), op, ": missing \"", key, "\": not ", what);
  SINTER_CHECK(it->second.numel() == 1, op, ": \"", key, "\" must hold one number, has shape ",
               shape_str(it->second.shape()));
  return it->second.to(DType::f64).item<double>();
}

const Tensor& entry(const StateDict& dict, const std::string& key, const std::string& op,
                    const char* what) {
  auto it = dict.find(key);
  SINTER_CHECK(it != dict.end(), op, ": missing \"", key, "\": not ", what);
  return it->second;
}

std::vector<int64_t> ints(const Tensor& t) {
  return t.to(DType::i64).contiguous().to_vector<int64_t>();
}

// "state.<g>.<i>." and the names of the entries under it.
std::vector<std::string> state_names_of(const StateDict& dict, const std::string& prefix) {
  std::vector<std::string> names;
  for (auto it = dict.lower_bound(prefix); it != dict.end() && it->first.rfind(prefix, 0) == 0;
       ++it) {
    names.push_back(it->first.substr(prefix.size()));
  }
  return names;
}

std::string state_prefix(size_t group, size_t index) {
  return "state." + std::to_string(group) + "." + std::to_string(index) + ".";
}

constexpr const char* kShardWhat = "the state of one rank of a ZeroRedundancyOptimizer";

// Position of each parameter in its group's list ("zero.group.<g>.params"), by parameter index.
std::map<int64_t, size_t> positions(const std::vector<int64_t>& params) {
  std::map<int64_t, size_t> at;
  for (size_t j = 0; j < params.size(); ++j) at[params[j]] = j;
  return at;
}

}  // namespace

StateDict ZeroRedundancyOptimizer::consolidate(const std::vector<StateDict>& shards) {
  const std::string op = std::string(kName) + "::consolidate";
  SINTER_CHECK(!shards.empty(), op, ": no shards");
  const int64_t n = static_cast<int64_t>(shards.size());
  const StateDict& first = shards[0];
  for (int64_t r = 0; r < n; ++r) {
    const double world = number(shards[r], "zero.world_size", op, kShardWhat);
    SINTER_CHECK(world == static_cast<double>(n), op, ": shard ", r, " was saved by one of ", world,
                 " ranks, but ", n, " shards were given (every rank's, in rank order)");
    const double rank = number(shards[r], "zero.rank", op, kShardWhat);
    SINTER_CHECK(rank == static_cast<double>(r), op, ": shard ", r, " is rank ", rank,
                 "'s (give every rank's shard once, in rank order)");
  }
  const int64_t buckets = static_cast<int64_t>(number(first, "zero.num_buckets", op, kShardWhat));
  const int64_t groups = static_cast<int64_t>(number(first, "zero.num_groups", op, kShardWhat));
  StateDict out;
  std::vector<std::map<int64_t, size_t>> position(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    for (auto it = first.lower_bound(prefix); it != first.end() && it->first.rfind(prefix, 0) == 0;
         ++it) {
      out[it->first] = it->second.clone();
    }
    const std::vector<int64_t> params =
        ints(entry(first, "zero.group." + std::to_string(g) + ".params", op, kShardWhat));
    out[prefix + "num_params"] = scalar(static_cast<double>(params.size()));
    position[static_cast<size_t>(g)] = positions(params);
  }
  for (int64_t k = 0; k < buckets; ++k) {
    const std::string bkey = "zero.bucket." + std::to_string(k);
    const int64_t numel = static_cast<int64_t>(number(first, bkey + ".numel", op, kShardWhat));
    const auto g = static_cast<size_t>(number(first, bkey + ".group", op, kShardWhat));
    const auto j = static_cast<size_t>(number(first, bkey + ".index", op, kShardWhat));
    SINTER_CHECK(g < position.size(), op, ": bucket ", k, " is in group ", g, " of ", groups);
    const std::vector<int64_t> params = ints(entry(first, bkey + ".params", op, kShardWhat));
    for (int64_t r = 1; r < n; ++r) {
      SINTER_CHECK(number(shards[r], bkey + ".numel", op, kShardWhat) == numel &&
                       ints(entry(shards[r], bkey + ".params", op, kShardWhat)) == params,
                   op, ": shards 0 and ", r, " disagree on bucket ", k,
                   " (they come from different models or runs)");
    }
    for (const std::string& name : state_names_of(first, state_prefix(g, j))) {
      const std::string key = state_prefix(g, j) + name;
      const Tensor& head = first.at(key);
      Tensor flat;
      if (head.dim() > 0) {
        std::vector<Tensor> parts;
        for (int64_t r = 0; r < n; ++r) parts.push_back(entry(shards[r], key, op, kShardWhat));
        flat = cat(parts, 0);
        SINTER_CHECK(flat.numel() >= numel, op, ": \"", key, "\" holds ", flat.numel(),
                     " elements over the shards, bucket ", k, " has ", numel);
      }
      int64_t offset = 0;
      for (int64_t i : params) {
        const std::vector<int64_t> shape =
            ints(entry(first, "zero.param." + std::to_string(i) + ".shape", op, kShardWhat));
        int64_t count = 1;
        for (int64_t d : shape) count *= d;
        auto at = position[g].find(i);
        SINTER_CHECK(at != position[g].end(), op, ": parameter ", i, " of bucket ", k,
                     " is not in its group ", g);
        out[state_prefix(g, at->second) + name] =
            head.dim() == 0
                ? head.clone()
                : flat.narrow(0, offset, count).reshape(Shape(shape.begin(), shape.end())).clone();
        offset += count;
      }
    }
  }
  return out;
}

void ZeroRedundancyOptimizer::load_consolidated(const StateDict& dict) {
  const DistributedDataParallel::Impl& impl = *impl_;
  const std::string op = std::string(kName) + "::load_state_dict";
  constexpr const char* what = "an optimizer's state dict";
  const size_t groups = group_params_.size();
  SINTER_CHECK(!dict.count("param_groups." + std::to_string(groups) + ".num_params"), op,
               ": the state dict has more than the ", groups,
               " parameter group(s) of this "
               "optimizer");
  StateDict local;
  for (size_t g = 0; g < groups; ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    const double count = number(dict, prefix + "num_params", op, what);
    SINTER_CHECK(count == static_cast<double>(group_params_[g].size()), op, ": group ", g,
                 " of the state dict has ", count, " parameters, but this model has ",
                 group_params_[g].size(), " in it");
    for (auto it = dict.lower_bound(prefix); it != dict.end() && it->first.rfind(prefix, 0) == 0;
         ++it) {
      local[it->first] = it->second;
    }
    local[prefix + "num_params"] = scalar(static_cast<double>(group_buckets_[g].size()));
  }
  const int rank = impl.pg->rank(), size = impl.pg->size();
  for (size_t g = 0; g < groups; ++g) {
    const std::map<int64_t, size_t> position =
        positions({group_params_[g].begin(), group_params_[g].end()});
    auto key_of = [&](size_t i, const std::string& name) {
      return state_prefix(g, position.at(static_cast<int64_t>(i))) + name;
    };
    for (size_t j = 0; j < group_buckets_[g].size(); ++j) {
      const detail::Bucket& b = impl.buckets[group_buckets_[g][j]];
      // The names any parameter of the bucket has state under; every one of them must have them
      // all (the shard is one tensor).
      std::vector<std::string> names;
      for (size_t i : b.params) {
        for (const std::string& name :
             state_names_of(dict, state_prefix(g, position.at(static_cast<int64_t>(i))))) {
          if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
        }
      }
      const Part part = part_of(b, rank, size);
      for (const std::string& name : names) {
        Tensor shard;
        for (size_t i : b.params) {
          const std::string key = key_of(i, name);
          auto it = dict.find(key);
          SINTER_CHECK(it != dict.end(), op, ": missing \"", key, "\" (parameter '", impl.names[i],
                       "' has no \"", name,
                       "\" but others of its bucket do; they cannot share a shard)");
          const Tensor& t = it->second;
          if (t.dim() == 0) {
            shard = t;
            continue;
          }
          SINTER_CHECK(t.shape() == impl.all_params[i].shape(), op, ": \"", key, "\" has shape ",
                       shape_str(t.shape()), ", parameter '", impl.names[i], "' has ",
                       shape_str(impl.all_params[i].shape()));
          if (!shard.defined() || shard.dim() == 0) {
            shard = zeros({part.end - part.begin}, {.dtype = t.dtype()});
          }
        }
        if (shard.dim() > 0) {
          for_each_piece(b, impl.slots, impl.all_params, part,
                         [&](size_t i, int64_t from, int64_t to, int64_t len) {
                           const Tensor& t = dict.at(key_of(i, name));
                           shard.narrow(0, to, len)
                               .copy_(t.reshape({-1}).to(shard.dtype()).narrow(0, from, len));
                         });
        }
        local[state_prefix(g, j) + name] = shard;
      }
    }
  }
  inner_->load_state_dict(local);
}

void ZeroRedundancyOptimizer::load_state_dict(const StateDict& dict) {
  if (!dict.count("zero.world_size")) {
    load_consolidated(dict);
    return;
  }
  const DistributedDataParallel::Impl& impl = *impl_;
  const std::string op = std::string(kName) + "::load_state_dict";
  auto value = [&](const std::string& key) { return number(dict, key, op, kShardWhat); };
  const double world = value("zero.world_size");
  SINTER_CHECK(world == impl.pg->size(), op, ": the shard was saved by one of ", world,
               " ranks, but this group has ", impl.pg->size(),
               "; consolidate the shards into one state dict first");
  SINTER_CHECK(value("zero.rank") == impl.pg->rank(), op, ": the shard is rank ",
               value("zero.rank"), "'s, but this is rank ", impl.pg->rank());
  SINTER_CHECK(value("zero.num_groups") == static_cast<double>(group_params_.size()), op,
               ": the shard has ", value("zero.num_groups"), " parameter groups, this optimizer ",
               group_params_.size());
  SINTER_CHECK(value("zero.num_buckets") == static_cast<double>(impl.buckets.size()), op,
               ": the shard has ", value("zero.num_buckets"), " buckets, this model has ",
               impl.buckets.size(), " (another model, or another bucket_cap_mb)");
  for (size_t k = 0; k < impl.buckets.size(); ++k) {
    const double n = value("zero.bucket." + std::to_string(k) + ".numel");
    SINTER_CHECK(n == static_cast<double>(impl.buckets[k].numel), op, ": bucket ", k, " has ", n,
                 " elements in the shard, ", impl.buckets[k].numel, " in this model");
  }
  StateDict local;
  for (const auto& [key, t] : dict) {
    if (key.rfind("zero.", 0) != 0) local[key] = t;
  }
  inner_->load_state_dict(local);
}

std::string ZeroRedundancyOptimizer::shard_path(const std::string& path, int rank, int world_size) {
  const std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + ".rank" + std::to_string(rank) + "-of-" +
                             std::to_string(world_size) + p.extension().string()))
      .string();
}

void ZeroRedundancyOptimizer::save_sharded(const std::string& path,
                                           const Metadata& metadata) const {
  ProcessGroup& pg = *impl_->pg;
  std::string error;
  try {
    Metadata meta = metadata;
    meta["sinter.format"] = "sinter-zero-shard-1";
    sinter::save(state_dict(), shard_path(path, pg.rank(), pg.size()), meta);
  } catch (const std::exception& e) {
    error = e.what();
  }
  // Every rank learns whether every shard was written (so none goes on believing the checkpoint
  // is whole).
  Tensor failed = full({1}, error.empty() ? 0.0 : 1.0, {.dtype = DType::i64});
  pg.all_reduce(failed, ReduceOp::Max);
  SINTER_CHECK(error.empty(), kName, "::save_sharded: rank ", pg.rank(), ": ", error);
  SINTER_CHECK(failed.item<int64_t>() == 0, kName,
               "::save_sharded: another rank failed to write "
               "its shard of ",
               path);
}

void ZeroRedundancyOptimizer::load_sharded(const std::string& path) {
  ProcessGroup& pg = *impl_->pg;
  const std::string mine = shard_path(path, pg.rank(), pg.size());
  if (!std::filesystem::exists(mine)) {
    // Name what is there instead: shards of another world size.
    const std::filesystem::path p(path);
    const std::string prefix = p.stem().string() + ".rank";
    std::string found;
    std::error_code ec;
    const std::filesystem::path dir = p.parent_path().empty() ? "." : p.parent_path();
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind(prefix, 0) == 0 && found.empty()) found = e.path().string();
    }
    SINTER_CHECK(found.empty(), kName, "::load_sharded: ", mine, " does not exist, but ", found,
                 " does: the shards are of another world size; consolidate them "
                 "(ZeroRedundancyOptimizer::consolidate_files) and load the result with "
                 "load_state_dict");
    SINTER_THROW(kName, "::load_sharded: ", mine, " does not exist (rank ", pg.rank(), " of ",
                 pg.size(), ")");
  }
  try {
    load_state_dict(sinter::load(mine));
  } catch (const std::exception& e) {
    SINTER_THROW(kName, "::load_sharded: ", mine, ": ", e.what());
  }
}

void ZeroRedundancyOptimizer::consolidate_files(const std::string& path, const std::string& out) {
  const std::string op = std::string(kName) + "::consolidate_files";
  // The world size from rank 0's shard: "<stem>.rank0-of-<N><ext>".
  const std::filesystem::path p(path);
  const std::filesystem::path dir = p.parent_path().empty() ? "." : p.parent_path();
  const std::string prefix = p.stem().string() + ".rank0-of-";
  int world = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) != 0 || e.path().extension() != p.extension()) continue;
    const std::string digits =
        n.substr(prefix.size(), n.size() - prefix.size() - p.extension().string().size());
    SINTER_CHECK(!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos &&
                     digits.size() < 7,
                 op, ": ", e.path().string(), " is not named as a shard");
    SINTER_CHECK(world == 0, op, ": shards of two world sizes next to ", path, " (",
                 shard_path(path, 0, world), " and ", e.path().string(), ")");
    world = std::stoi(digits);
  }
  SINTER_CHECK(world > 0, op, ": no shard of ", path, " (looked for ", p.stem().string(),
               ".rank0-of-N", p.extension().string(), " in ", dir.string(), ")");
  std::vector<StateDict> shards;
  for (int r = 0; r < world; ++r) {
    const std::string file = shard_path(path, r, world);
    SINTER_CHECK(std::filesystem::exists(file), op, ": ", file, " is missing (rank ", r, " of ",
                 world, "); nothing was written");
    shards.push_back(sinter::load(file));
  }
  StateDict whole;
  try {
    whole = consolidate(shards);
  } catch (const std::exception& e) {
    SINTER_THROW(op, ": the shards of ", path, ": ", e.what(), "; nothing was written");
  }
  sinter::save(whole, out, {{"sinter.format", "sinter-zero-consolidated-1"}});
}

}  // namespace sinter::dist

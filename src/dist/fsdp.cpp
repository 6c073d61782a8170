// FullyShardedDataParallel: parameters as 1/N flat shards, gathered per unit around its forward
// and backward, gradients reduce-scattered per unit as backward finishes it (Note [fully sharded
// data parallel] in include/sinter/fsdp.h).
#include "sinter/fsdp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "dist/ddp_impl.h"
#include "dist/fsdp_impl.h"
#include "internal/clip_impl.h"
#include "internal/tensor_impl.h"
#include "sinter/autograd.h"
#include "sinter/ops.h"
#include "sinter/tensor_parallel.h"

namespace sinter::dist {

namespace {

constexpr const char* kName = "FullyShardedDataParallel";
using Param = detail::FsdpParam;
using Unit = detail::FsdpUnit;
using detail::UnitState;

// Swaps `memory` into t's storage (Storage::swap_memory): t's old memory goes to `memory`.
void swap_into(const Tensor& t, Storage memory) { t.impl()->storage.swap_memory(memory); }

// Frees t's memory: every view of it is left without bytes until the next swap_into.
void release(const Tensor& t) {
  swap_into(t, Storage::from_blob(nullptr, 0, t.storage().device()));
}

}  // namespace

void FullyShardedDataParallel::Impl::start_gather(size_t u) {
  Unit& unit = units[u];
  if (unit.state != UnitState::Sharded) return;
  if (unit.params.empty()) {  // a root with no parameters of its own
    unit.state = UnitState::Whole;
    return;
  }
  NoGradGuard ng;
  events.push_back("gather " + unit.name);
  const Device device = params[unit.params[0]].shard.device();
  unit.send = empty({unit.part}, {.dtype = unit.compute_dtype, .device = device});
  for (size_t i : unit.params) {
    const Param& p = params[i];
    unit.send.narrow(0, p.offset, p.chunk).copy_(p.shard.detach());
  }
  unit.gathered = empty({size() * unit.part}, {.dtype = unit.compute_dtype, .device = device});
  unit.gather = pg->all_gather_into_async(unit.gathered, unit.send);
  ++traffic.gathers;
  traffic.gathered_bytes +=
      unit.gathered.numel() * static_cast<int64_t>(element_size(unit.compute_dtype));
  unit.state = UnitState::Gathering;
}

void FullyShardedDataParallel::Impl::finish_gather(size_t u) {
  Unit& unit = units[u];
  if (unit.state == UnitState::Whole) return;
  start_gather(u);
  if (unit.state == UnitState::Whole) return;  // nothing to gather
  NoGradGuard ng;
  events.push_back("wait " + unit.name);
  std::shared_ptr<Work> work = std::move(unit.gather);
  timed_wait(*work);
  // Row r of `rows` is rank r's part: each parameter's column block, rows in order, is the
  // parameter flattened (and padded).
  const Tensor rows = unit.gathered.view({size(), unit.part});
  for (size_t i : unit.params) {
    const Param& p = params[i];
    Tensor whole =
        empty({size() * p.chunk}, {.dtype = unit.compute_dtype, .device = rows.device()});
    whole.view({size(), p.chunk}).copy_(rows.narrow(1, p.offset, p.chunk));
    swap_into(p.param, whole.storage());
  }
  unit.send = Tensor();
  unit.gathered = Tensor();
  unit.state = UnitState::Whole;
  // Gathered for backward from shards that changed since the forward's gather: the tensors saved
  // then no longer match, which their version check reports.
  const int64_t version = shard_version(u);
  if (in_backward && version != unit.gathered_version) {
    for (size_t i : unit.params) params[i].param.bump_version();
  }
  unit.gathered_version = version;
}

void FullyShardedDataParallel::Impl::timed_wait(Work& work) {
  const auto t0 = std::chrono::steady_clock::now();
  work.wait();
  traffic.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int64_t FullyShardedDataParallel::Impl::shard_version(size_t u) const {
  int64_t sum = 0;
  for (size_t i : units[u].params) sum += params[i].shard.version();
  return sum;
}

void FullyShardedDataParallel::Impl::reshard(size_t u) {
  Unit& unit = units[u];
  if (unit.state == UnitState::Sharded) return;
  if (unit.state == UnitState::Gathering) {
    // A prefetch nobody used: it must still complete (every rank issued it).
    std::shared_ptr<Work> work = std::move(unit.gather);
    work->wait();
    unit.send = Tensor();
    unit.gathered = Tensor();
    unit.state = UnitState::Sharded;
    return;
  }
  events.push_back("free " + unit.name);
  for (size_t i : unit.params) release(params[i].param);
  unit.state = UnitState::Sharded;
}

void FullyShardedDataParallel::Impl::reshard_all() {
  for (size_t u = 0; u < units.size(); ++u) reshard(u);
}

std::optional<size_t> FullyShardedDataParallel::Impl::neighbour(size_t u, int step) const {
  // The forward order with the root first: [0, order...].
  std::vector<size_t> seq{0};
  seq.insert(seq.end(), order.begin(), order.end());
  auto it = std::find(seq.begin(), seq.end(), u);
  if (it == seq.end()) return std::nullopt;
  const auto at = static_cast<int64_t>(it - seq.begin()) + step;
  if (at < 0 || at >= static_cast<int64_t>(seq.size())) return std::nullopt;
  return seq[static_cast<size_t>(at)];
}

void FullyShardedDataParallel::Impl::pre_forward(size_t u) {
  if (in_backward) {  // recomputed inside backward (a checkpoint): only the parameters are needed
    finish_gather(u);
    return;
  }
  current_order.push_back(u);
  finish_gather(u);
  if (!options.prefetch) return;
  if (std::optional<size_t> next = neighbour(u, +1)) start_gather(*next);
}

Tensor FullyShardedDataParallel::Impl::post_forward(size_t u, const Tensor& out) {
  if (in_backward) return out;
  const bool grad = out.defined() && out.requires_grad() && GradMode::is_enabled();
  if (grad) {
    // Backward reaching the output gathers the unit again before its nodes run.
    out.register_hook([weak = self, u](const Tensor&) {
      if (std::shared_ptr<Impl> impl = weak.lock()) impl->pre_backward(u);
      return Tensor();
    });
  }
  // The root stays whole: backward starts with it (the head).
  if (!grad || (options.reshard_after_forward && u != 0)) reshard(u);
  return out;
}

void FullyShardedDataParallel::Impl::pre_backward(size_t u) {
  begin_backward();
  // The unit after u in forward has run its whole backward once u's output has its gradient; one
  // with frozen parameters (which no gradient hook tells about) is freed now.
  if (std::optional<size_t> done = neighbour(u, +1)) {
    if (units[*done].has_frozen && units[*done].pending == 0) reshard(*done);
  }
  finish_gather(u);
  if (!options.prefetch) return;
  // Backward runs the units in reverse: the root's backward starts with the last unit.
  std::optional<size_t> next =
      u == 0 ? (order.empty() ? std::nullopt : std::optional<size_t>(order.back()))
             : neighbour(u, -1);
  if (next && *next != 0) start_gather(*next);
}

void FullyShardedDataParallel::Impl::begin_backward() {
  if (!backward_token.expired()) return;
  recover();  // a backward that failed midway left its state
  in_backward = true;
  reduce_order.assign(order.rbegin(), order.rend());
  reduce_order.push_back(0);
  for (size_t u = 1; u < units.size(); ++u) {
    if (std::find(order.begin(), order.end(), u) == order.end()) reduce_order.push_back(u);
  }
  next_reduce = 0;
  auto token = std::make_shared<int>(0);
  backward_token = token;
  autograd::queue_callback([weak = self, token] {
    if (std::shared_ptr<Impl> impl = weak.lock()) impl->finalize();
  });
}

void FullyShardedDataParallel::Impl::on_grad_ready(size_t i) {
  begin_backward();
  Param& p = params[i];
  Unit& unit = units[p.unit];
  // Under no_sync, a low-precision gradient joins the running sum at the reduction's precision.
  const DType reduce_dtype = options.reduce_dtype.value_or(unit.shard_dtype);
  if (!sync && p.param.grad().defined() && p.param.grad().dtype() != reduce_dtype) {
    NoGradGuard ng;
    const Tensor g = p.param.grad().to(reduce_dtype);
    p.accum = p.accum.defined() ? p.accum.add_(g) : g;
    p.param.set_grad(Tensor());
  }
  if (p.ready) {
    // A second gradient in one backward (a parameter a checkpointed region shares with the rest):
    // fine until its unit's reduce-scatter has gone.
    SINTER_CHECK(!unit.reduced, kName, ": parameter '", p.name,
                 "' got another gradient after its unit's gradients were reduce-scattered (is "
                 "it reached through two separate graphs?)");
    return;
  }
  p.ready = true;
  unit.any_ready = true;
  if (--unit.pending > 0) return;
  if (sync) launch_in_order(false);
  // Every node that reads the unit's trained parameters has run; a frozen one may still be read
  // (freed by the next unit's pre_backward, or at the end).
  if (!unit.has_frozen) reshard(p.unit);
}

void FullyShardedDataParallel::Impl::launch_in_order(bool all) {
  for (; next_reduce < reduce_order.size(); ++next_reduce) {
    const size_t u = reduce_order[next_reduce];
    Unit& unit = units[u];
    if (unit.trained == 0) continue;  // nothing to reduce
    bool any = unit.any_ready;
    for (size_t i : unit.params) {  // gradients from no_sync backwards only
      any = any || params[i].accum.defined() || params[i].param.grad().defined();
    }
    if (!all && unit.pending > 0) return;
    if (any) launch_reduce(u);
  }
}

void FullyShardedDataParallel::Impl::launch_reduce(size_t u) {
  Unit& unit = units[u];
  NoGradGuard ng;
  events.push_back("reduce " + unit.name);
  const DType dtype = options.reduce_dtype.value_or(unit.shard_dtype);
  const Device device = params[unit.params[0]].shard.device();
  const TensorOptions opts{.dtype = dtype, .device = device};
  // Rank r's row gets part r of every parameter's (padded) gradient: the layout the gather reads.
  unit.reduce_in = zeros({size() * unit.part}, opts);
  const Tensor rows = unit.reduce_in.view({size(), unit.part});
  for (size_t i : unit.params) {
    Param& p = params[i];
    Tensor g = p.trained ? p.param.grad() : Tensor();
    if (p.accum.defined()) g = g.defined() ? p.accum.add_(g.to(p.accum.dtype())) : p.accum;
    if (!g.defined()) continue;
    Tensor cols = rows.narrow(1, p.offset, p.chunk);
    if (p.numel == size() * p.chunk) {
      cols.copy_(g.reshape({size(), p.chunk}));
    } else {
      Tensor padded = zeros({size() * p.chunk}, opts);
      padded.narrow(0, 0, p.numel).copy_(g.reshape({-1}));
      cols.copy_(padded.view({size(), p.chunk}));
    }
    p.param.set_grad(Tensor());
    p.accum = Tensor();
  }
  unit.reduce_out = empty({unit.part}, opts);
  unit.reduce = pg->reduce_scatter_async(unit.reduce_out, unit.reduce_in, ReduceOp::Average);
  ++traffic.reduces;
  traffic.reduced_bytes += unit.reduce_in.numel() * static_cast<int64_t>(element_size(dtype));
  unit.reduced = true;
  launched.push_back(u);
}

void FullyShardedDataParallel::Impl::finalize() {
  events.push_back("backward end");
  if (sync) {
    // Units some of whose parameters got no gradient (they count as zero), or whose gradients
    // come from no_sync backwards only.
    launch_in_order(true);
    NoGradGuard ng;
    for (size_t u : launched) {
      Unit& unit = units[u];
      std::shared_ptr<Work> work = std::move(unit.reduce);
      timed_wait(*work);
      events.push_back("reduced " + unit.name);
      for (size_t i : unit.params) {
        Param& p = params[i];
        if (!p.trained) continue;
        Tensor piece = unit.reduce_out.narrow(0, p.offset, p.chunk);
        if (piece.dtype() != p.shard.dtype()) piece = piece.to(p.shard.dtype());
        Tensor g = p.shard.grad();
        if (g.defined()) {
          g.add_(piece);
        } else {
          p.shard.set_grad(piece);
        }
      }
      unit.reduce_in = Tensor();
      unit.reduce_out = Tensor();
    }
    launched.clear();
  }
  reshard_all();
  reset_backward();
}

void FullyShardedDataParallel::Impl::recover() {
  if (!in_backward || !backward_token.expired()) return;
  for (size_t u : launched) {
    if (!units[u].reduce) continue;
    try {
      units[u].reduce->wait();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sinter: %s: dropping a failed reduce-scatter: %s\n", kName, e.what());
    }
  }
  // The failed backward's whole gradients would otherwise join the next step's.
  for (Param& p : params) {
    if (p.trained && !units[p.unit].reduced) {
      p.param.set_grad(Tensor());
      p.accum = Tensor();
    }
  }
  reset_backward();
}

void FullyShardedDataParallel::Impl::reset_backward() {
  for (Param& p : params) p.ready = false;
  for (Unit& unit : units) {
    unit.pending = unit.trained;
    unit.any_ready = false;
    unit.reduced = false;
    unit.reduce.reset();
    unit.reduce_in = Tensor();
    unit.reduce_out = Tensor();
  }
  launched.clear();
  next_reduce = 0;
  in_backward = false;
}

namespace {

// The dotted path of every module of `units` in the tree under `root`, and an error for one that
// is not there, is the root, or sits inside another.
std::vector<std::string> unit_paths(const nn::Module& root,
                                    const std::vector<std::shared_ptr<nn::Module>>& units) {
  std::map<const nn::Module*, size_t> index;
  for (size_t k = 0; k < units.size(); ++k) {
    SINTER_CHECK(units[k] != nullptr, kName, ": unit ", k, " is null");
    SINTER_CHECK(units[k].get() != &root, kName, ": unit ", k,
                 " is the model itself (its parameters form the root unit already)");
    SINTER_CHECK(index.emplace(units[k].get(), k).second, kName, ": unit ", k, " is given twice");
  }
  std::vector<std::string> paths(units.size());
  std::vector<bool> found(units.size(), false);
  auto walk = [&](auto& self, const nn::Module& m, const std::string& prefix,
                  const std::string& inside) -> void {
    for (const auto& [name, child] : m.named_children()) {
      const std::string path = prefix.empty() ? name : prefix + "." + name;
      std::string within = inside;
      if (auto it = index.find(child.get()); it != index.end()) {
        SINTER_CHECK(inside.empty(), kName, ": unit '", path, "' is inside unit '", inside,
                     "'; units may not nest");
        if (!found[it->second]) paths[it->second] = path;
        found[it->second] = true;
        within = path;
      }
      self(self, *child, path, within);
    }
  };
  walk(walk, root, "", "");
  for (size_t k = 0; k < units.size(); ++k) {
    SINTER_CHECK(found[k], kName, ": unit ", k, " (", units[k]->name(),
                 ") is not a module of the model");
  }
  return paths;
}

bool inside(const std::string& key, const std::string& path) {
  return path.empty() || key.rfind(path + ".", 0) == 0;
}

// Which unit each parameter of `root` belongs to (its unit's subtree, else the root), in
// named_parameters() order; a parameter reached from two units, or from a unit and outside it
// (tied), is an error naming both paths.
void assign_params(FullyShardedDataParallel::Impl& s, const nn::Module& root) {
  std::map<const void*, size_t> owner;  // storage identity -> unit
  for (size_t u = 1; u < s.units.size(); ++u) {
    for (const auto& [name, t] : s.units[u].module->named_parameters()) {
      auto [it, fresh] = owner.emplace(t.storage().id(), u);
      SINTER_CHECK(fresh || it->second == u, kName, ": parameter '", s.units[u].name, ".", name,
                   "' is shared by units '", s.units[it->second].name, "' and '", s.units[u].name,
                   "'; a tied parameter must sit in one unit (or the root) only");
    }
  }
  // Every name a tensor is registered under must lie in its unit.
  for (const auto& [key, t] : root.state_dict()) {
    auto it = owner.find(t.storage().id());
    if (it == owner.end()) continue;
    SINTER_CHECK(inside(key, s.units[it->second].name), kName, ": parameter '", key,
                 "' is also registered in unit '", s.units[it->second].name,
                 "'; a tied parameter must sit in one unit (or the root) only");
  }
  const int64_t n = s.pg->size();
  Device device = Device::cpu();
  bool first = true;
  for (const auto& [name, t] : root.named_parameters()) {
    SINTER_CHECK(
        t.is_contiguous() && t.storage_offset() == 0 &&
            t.storage().nbytes() == static_cast<size_t>(t.numel()) * element_size(t.dtype()),
        kName, ": parameter '", name, "' (", shape_str(t.shape()),
        ") must be a contiguous tensor with a storage of its own");
    SINTER_CHECK(first || t.device() == device, kName, ": parameter '", name, "' is on ",
                 t.device(), ", the others on ", device);
    device = t.device();
    first = false;
    auto it = owner.find(t.storage().id());
    Param p;
    p.name = name;
    p.param = t;
    p.unit = it == owner.end() ? 0 : it->second;
    p.numel = t.numel();
    p.chunk = (p.numel + n - 1) / n;
    p.trained = t.requires_grad();
    Unit& unit = s.units[p.unit];
    SINTER_CHECK(unit.params.empty() || s.params[unit.params[0]].param.dtype() == t.dtype(), kName,
                 ": unit '", unit.name, "' holds parameters of ",
                 s.params[unit.params[0]].param.dtype(), " and ", t.dtype(), " ('", name,
                 "'); the parameters of one unit share a dtype");
    p.offset = unit.part;
    unit.part += p.chunk;
    unit.shard_dtype = t.dtype();
    unit.compute_dtype =
        s.options.param_dtype && is_floating(t.dtype()) ? *s.options.param_dtype : t.dtype();
    unit.has_frozen = unit.has_frozen || !p.trained;
    unit.trained += p.trained ? 1 : 0;
    unit.params.push_back(s.params.size());
    s.params.push_back(std::move(p));
  }
  SINTER_CHECK(!s.params.empty(), kName, ": the model has no parameters");
  for (size_t u = 1; u < s.units.size(); ++u) {
    SINTER_CHECK(!s.units[u].params.empty(), kName, ": unit '", s.units[u].name,
                 "' has no parameters");
  }
}

// Each rank's shard of every parameter; the parameters then give up their memory (and take the
// compute dtype).
void make_shards(FullyShardedDataParallel::Impl& s) {
  // Checked before any parameter gives up its memory: a failed wrap leaves the model as it was.
  SINTER_CHECK(
      std::any_of(s.params.begin(), s.params.end(), [](const Param& p) { return p.trained; }),
      kName, ": the model has no parameter that requires grad");
  NoGradGuard ng;
  const int64_t rank = s.pg->rank();
  for (Param& p : s.params) {
    const Tensor flat = p.param.detach().reshape({-1});
    Tensor shard = zeros({p.chunk}, {.dtype = p.param.dtype(), .device = p.param.device()});
    const int64_t begin = std::min(p.numel, rank * p.chunk);
    const int64_t end = std::min(p.numel, (rank + 1) * p.chunk);
    if (end > begin) shard.narrow(0, 0, end - begin).copy_(flat.narrow(0, begin, end - begin));
    if (p.trained) {
      shard.requires_grad_(true);
      s.trained_shards.push_back(shard);
      s.trained_names.push_back(p.name);
    }
    p.shard = shard;
    p.param.set_grad(Tensor());
    release(p.param);
    p.param.impl()->dtype = s.units[p.unit].compute_dtype;
  }
  s.reset_backward();
}

// The forward hooks of each unit's module and the gradient hooks of the parameters; they hold the
// state weakly and do nothing once the wrapper is gone.
void set_hooks(const std::shared_ptr<FullyShardedDataParallel::Impl>& impl) {
  std::weak_ptr<FullyShardedDataParallel::Impl> weak = impl;
  for (size_t u = 1; u < impl->units.size(); ++u) {
    Unit& unit = impl->units[u];
    unit.pre_hook = unit.module->register_forward_pre_hook([weak, u](nn::Module&) {
      if (auto s = weak.lock()) s->pre_forward(u);
    });
    unit.post_hook = unit.module->register_forward_hook([weak, u](nn::Module&, const Tensor& out) {
      if (auto s = weak.lock()) return s->post_forward(u, out);
      return out;
    });
  }
  for (size_t i = 0; i < impl->params.size(); ++i) {
    if (!impl->params[i].trained) continue;
    impl->params[i].param.register_post_accumulate_grad_hook([weak, i](Tensor&) {
      if (auto s = weak.lock()) s->on_grad_ready(i);
    });
  }
}

}  // namespace

FullyShardedDataParallel::FullyShardedDataParallel(std::shared_ptr<nn::Module> module,
                                                   std::shared_ptr<ProcessGroup> pg,
                                                   FSDPOptions options)
    : module_(std::move(module)), pg_(std::move(pg)) {
  SINTER_CHECK(module_ != nullptr, kName, ": module is null");
  SINTER_CHECK(pg_ != nullptr, kName, ": process group is null");
  for (const std::optional<DType>& d : {options.param_dtype, options.reduce_dtype}) {
    SINTER_CHECK(!d || is_floating(*d), kName,
                 ": param_dtype and reduce_dtype must be floating, got ", *d);
  }
  auto impl = std::make_shared<Impl>();
  impl->pg = pg_.get();
  impl->self = impl;
  const std::vector<std::string> paths = unit_paths(*module_, options.units);
  detail::check_same_model(*pg_, *module_, kName);
  {
    std::vector<Tensor> all = module_->parameters();
    for (const Tensor& b : module_->buffers()) all.push_back(b);
    detail::broadcast_all(*pg_, all);
  }
  impl->units.resize(options.units.size() + 1);
  for (size_t k = 0; k < options.units.size(); ++k) {
    impl->units[k + 1].name = paths[k];
    impl->units[k + 1].module = options.units[k];
  }
  impl->options = std::move(options);
  assign_params(*impl, *module_);
  make_shards(*impl);
  set_hooks(impl);
  impl_ = std::move(impl);
}

FullyShardedDataParallel::~FullyShardedDataParallel() {
  if (!impl_) return;
  // Collectives in flight write into the units' buffers; they finish first. The parameters stay
  // without memory: state_dict() before the wrapper goes keeps the model.
  try {
    impl_->recover();
    for (Unit& unit : impl_->units) {
      if (unit.gather) unit.gather->wait();
      if (unit.reduce) unit.reduce->wait();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sinter: %s: dropping a failed collective: %s\n", kName, e.what());
  }
  for (Unit& unit : impl_->units) {
    if (!unit.module) continue;
    unit.module->remove_forward_hook(unit.pre_hook);
    unit.module->remove_forward_hook(unit.post_hook);
  }
}

Tensor FullyShardedDataParallel::forward(const Tensor& x) {
  return call([&] { return module_->forward(x); });
}

Tensor FullyShardedDataParallel::call(const std::function<Tensor()>& f) {
  Impl& s = *impl_;
  s.recover();
  // Parameters still whole from a graph never backpropagated, or a forward without gradients:
  // the shards may have changed since (an optimizer step), so everything is gathered afresh.
  s.reshard_all();
  s.events.clear();
  s.current_order.clear();
  s.finish_gather(0);
  if (s.options.prefetch && !s.order.empty()) s.start_gather(s.order[0]);
  Tensor out;
  try {
    out = f();
  } catch (...) {
    s.reshard_all();
    throw;
  }
  s.order = s.current_order;
  out = s.post_forward(0, out);
  if (!out.defined() || !out.requires_grad() || !GradMode::is_enabled()) s.reshard_all();
  return out;
}

const std::vector<Tensor>& FullyShardedDataParallel::parameters() const {
  return impl_->trained_shards;
}

std::vector<std::pair<std::string, Tensor>> FullyShardedDataParallel::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t k = 0; k < impl_->trained_shards.size(); ++k) {
    out.emplace_back(impl_->trained_names[k], impl_->trained_shards[k]);
  }
  return out;
}

double FullyShardedDataParallel::clip_grad_norm_(double max_norm, double norm_type,
                                                 const std::shared_ptr<ProcessGroup>& tp) {
  const char* op = "FullyShardedDataParallel::clip_grad_norm_";
  if (!tp) return detail::clip_sharded(op, impl_->trained_shards, *pg_, max_norm, norm_type);
  optim::detail::check_clip_arguments(op, max_norm, norm_type);
  NoGradGuard ng;
  std::set<const void*> split;  // the tensor-parallel shards, by storage identity
  for (const Tensor& t : tp::split_parameters(*module_).shards) split.insert(t.storage().id());
  std::vector<Tensor> split_grads, whole_grads;
  for (const Param& p : impl_->params) {
    const Tensor g = p.trained ? p.shard.grad() : Tensor();
    if (!g.defined() || g.numel() == 0) continue;
    (split.count(p.param.storage().id()) ? split_grads : whole_grads).push_back(g);
  }
  const DType acc = optim::detail::norm_accumulator(impl_->trained_shards);
  const Device device = impl_->trained_shards[0].device();
  const bool inf = std::isinf(norm_type);
  const ReduceOp how = inf ? ReduceOp::Max : ReduceOp::Sum;
  // [split, whole] partials over this rank's shards, reduced over the fsdp group; the split one
  // over the tp group as well.
  Tensor parts =
      cat({optim::detail::grad_norm_partial(split_grads, norm_type, acc, device).reshape({1}),
           optim::detail::grad_norm_partial(whole_grads, norm_type, acc, device).reshape({1})})
          .contiguous();
  pg_->all_reduce(parts, how);
  Tensor split_part = parts.narrow(0, 0, 1).clone();
  tp->all_reduce(split_part, how);
  const Tensor whole_part = parts.narrow(0, 1, 1);
  const Tensor reduced =
      (inf ? maximum(split_part, whole_part) : split_part + whole_part).reshape({});
  std::vector<Tensor> grads = split_grads;
  grads.insert(grads.end(), whole_grads.begin(), whole_grads.end());
  return optim::detail::scale_to_norm(grads, reduced, max_norm, norm_type)
      .to(DType::f64)
      .item<double>();
}

FullyShardedDataParallel::NoSync::NoSync(FullyShardedDataParallel& fsdp)
    : fsdp_(fsdp), prev_(fsdp.impl_->sync) {
  fsdp_.impl_->sync = false;
}

FullyShardedDataParallel::NoSync::~NoSync() { fsdp_.impl_->sync = prev_; }

FSDPMemory FullyShardedDataParallel::memory() const {
  FSDPMemory m;
  auto bytes = [](const Tensor& t) {
    return t.defined() ? t.numel() * static_cast<int64_t>(element_size(t.dtype())) : 0;
  };
  for (const Param& p : impl_->params) {
    m.shards += bytes(p.shard);
    m.shard_grads += bytes(p.shard.grad());
    m.whole_params += static_cast<int64_t>(p.param.storage().nbytes());
    m.whole_grads += bytes(p.param.grad());
    m.whole_total += p.numel * static_cast<int64_t>(element_size(p.shard.dtype()));
  }
  return m;
}

FSDPTraffic FullyShardedDataParallel::traffic() const { return impl_->traffic; }

void FullyShardedDataParallel::reset_traffic() { impl_->traffic = FSDPTraffic{}; }

std::vector<std::string> FullyShardedDataParallel::unit_names() const {
  std::vector<std::string> names;
  for (const Unit& unit : impl_->units) names.push_back(unit.name);
  return names;
}

std::vector<std::string> fsdp_debug_events(const FullyShardedDataParallel& fsdp) {
  return fsdp.impl_->events;
}

}  // namespace sinter::dist

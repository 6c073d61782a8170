// DistributedDataParallel: checks and broadcasts the model from rank 0, then averages gradients
// over the ranks in buckets whose all-reduces start from the post-accumulate hooks while backward
// runs.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

#include "dist/ddp_impl.h"
#include "sinter/autograd.h"

namespace sinter::dist {

using detail::Bucket;
using detail::Slot;

// Note [bucket order]
// Parameters go into buckets in reverse order of registration, which is roughly the order backward
// produces their gradients, so the first buckets fill while backward is still deep in the model.
// Buckets are launched strictly in index order (a bucket that fills early waits for the ones before
// it): every rank then issues the same collectives in the same order, which MPI and NCCL require,
// even if hooks fire in a different order on some rank.

namespace {

// FNV-1a, for the cross-rank model check.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// A description of one tensor of the model that must agree across ranks (the device's type, not
// its index: each rank has its own GPU, ProcessGroup::cuda_device()).
std::string describe(const std::string& kind, const std::string& name, const Tensor& t) {
  std::ostringstream os;
  os << kind << " '" << name << "' " << shape_str(t.shape()) << " " << t.dtype() << " "
     << (t.is_cuda() ? "cuda" : "cpu");
  if (kind == "parameter") os << (t.requires_grad() ? "" : " (frozen)");
  return os.str();
}

constexpr int64_t kDescriptorChars = 256;

Tensor encode(const std::string& s) {
  std::vector<int64_t> v(kDescriptorChars, 0);
  for (size_t i = 0; i < s.size() && i < static_cast<size_t>(kDescriptorChars); ++i)
    v[i] = static_cast<unsigned char>(s[i]);
  return from_vector(v, {kDescriptorChars}, {.dtype = DType::i64});
}

std::string decode(const Tensor& row) {
  std::string s;
  for (int64_t c : row.contiguous().to_vector<int64_t>()) {
    if (c == 0) break;
    s.push_back(static_cast<char>(c));
  }
  return s;
}

}  // namespace

namespace detail {

// Broadcasts `tensors` from rank 0, all in flight at once. A non-contiguous tensor goes through a
// contiguous copy.
void broadcast_all(ProcessGroup& pg, const std::vector<Tensor>& tensors) {
  NoGradGuard no_grad;
  std::vector<std::pair<Tensor, Tensor>> staged;  // (target, contiguous buffer)
  std::vector<std::shared_ptr<Work>> works;
  for (const Tensor& t : tensors) {
    Tensor buf = t.is_contiguous() ? t.detach() : t.contiguous();
    works.push_back(pg.broadcast_async(buf, 0));
    staged.emplace_back(t, buf);
  }
  for (auto& w : works) w->wait();
  for (auto& [t, buf] : staged) {
    if (buf.is_same(t) || buf.storage().is_same(t.storage())) {
      t.bump_version();
    } else {
      Tensor target = t.detach();
      target.copy_(buf);
    }
  }
}

void check_same_model(ProcessGroup& pg, const nn::Module& module, const char* who) {
  // Every rank must hold the same model: compare a hash of the descriptions, and on a mismatch find
  // and name the first tensor that differs (two more small collectives, taken by every rank alike).
  std::vector<std::string> desc;
  for (auto& [name, p] : module.named_parameters()) desc.push_back(describe("parameter", name, p));
  for (auto& [name, b] : module.named_buffers()) desc.push_back(describe("buffer", name, b));
  std::vector<int64_t> hashes;
  uint64_t total = fnv1a("");
  for (const std::string& d : desc) {
    hashes.push_back(static_cast<int64_t>(fnv1a(d)));
    total = total * 1099511628211ull ^ static_cast<uint64_t>(hashes.back());
  }
  Tensor summary = from_vector(
      std::vector<int64_t>{static_cast<int64_t>(desc.size()), static_cast<int64_t>(total)}, {2},
      {.dtype = DType::i64});
  std::vector<int64_t> all = pg.all_gather(summary).contiguous().to_vector<int64_t>();
  const int n = pg.size();
  bool same = true;
  int64_t max_count = 0;
  for (int r = 0; r < n; ++r) {
    same = same && all[2 * r] == all[0] && all[2 * r + 1] == all[1];
    max_count = std::max(max_count, all[2 * r]);
  }
  if (!same) {
    std::vector<int64_t> mine(max_count, 0);
    std::copy(hashes.begin(), hashes.end(), mine.begin());
    std::vector<int64_t> table =
        pg.all_gather(from_vector(mine, {max_count}, {.dtype = DType::i64}))
            .contiguous()
            .to_vector<int64_t>();
    int64_t first = max_count;
    for (int64_t j = 0; j < max_count && first == max_count; ++j) {
      for (int r = 1; r < n; ++r) {
        const bool present0 = j < all[0], present_r = j < all[2 * r];
        if (present0 != present_r || table[r * max_count + j] != table[j]) first = j;
      }
    }
    if (first == max_count) first = 0;  // a hash collision in the totals; name the first entry
    const std::string own =
        first < static_cast<int64_t>(desc.size()) ? desc[first] : std::string("nothing");
    Tensor names_all = pg.all_gather(encode(own));
    std::ostringstream os;
    for (int r = 0; r < n; ++r)
      os << (r ? ", " : "") << "rank " << r << " has " << decode(names_all.select(0, r));
    SINTER_CHECK(false, who,
                 ": the ranks hold different models (every rank must build the same one); first "
                 "difference at entry ",
                 first, " of the parameters then buffers: ", os.str());
  }
}

}  // namespace detail

using detail::broadcast_all;
using detail::check_same_model;

void DistributedDataParallel::Impl::build_buckets() {
  const double cap_bytes = options.bucket_cap_mb * 1024.0 * 1024.0;
  // Open bucket per (device type, device index, dtype, ZeRO group); closed ones are final.
  std::map<std::tuple<int, int, int, int>, Bucket> open;
  std::vector<Bucket> closed;
  auto bytes = [](const Bucket& b) { return static_cast<double>(b.numel) * element_size(b.dtype); };
  for (auto it = trained.rbegin(); it != trained.rend(); ++it) {
    const Tensor& p = all_params[*it];
    const int group = param_group.empty() ? 0 : param_group[*it];
    auto key = std::make_tuple(static_cast<int>(p.device().type), p.device().index,
                               static_cast<int>(p.dtype()), group);
    Bucket& b = open[key];
    b.group = group;
    const double p_bytes = static_cast<double>(p.numel()) * element_size(p.dtype());
    if (!b.params.empty() && bytes(b) + p_bytes > cap_bytes) {
      closed.push_back(std::move(b));
      b = Bucket();
    }
    b.device = p.device();
    b.dtype = p.dtype();
    b.params.push_back(*it);
    b.numel += p.numel();
    if (bytes(b) >= cap_bytes) {  // a parameter at or over the cap travels alone
      closed.push_back(std::move(b));
      b = Bucket();
    }
  }
  for (auto& [key, b] : open) {
    if (!b.params.empty()) closed.push_back(std::move(b));
  }
  // Launch order: by the reverse-registration position of each bucket's first parameter.
  std::sort(closed.begin(), closed.end(),
            [](const Bucket& a, const Bucket& b) { return a.params[0] > b.params[0]; });
  buckets = std::move(closed);
  slots.assign(all_params.size(), Slot());
  for (size_t k = 0; k < buckets.size(); ++k) {
    Bucket& b = buckets[k];
    int64_t offset = 0;
    for (size_t i : b.params) {
      slots[i] = {k, offset};
      offset += all_params[i].numel();
    }
    b.padded = b.numel;
    b.buffer = zeros({b.numel}, {.dtype = b.dtype, .device = b.device});
    b.pending = b.params.size();
  }
}

void DistributedDataParallel::Impl::attach_zero(int stage, const std::vector<int>& groups) {
  SINTER_CHECK(zero_stage == 0,
               "ZeroRedundancyOptimizer: this DistributedDataParallel already has one");
  SINTER_CHECK(!dirty, "ZeroRedundancyOptimizer: attached in the middle of a backward");
  if (groups != param_group) {  // buckets that never mix groups
    param_group = groups;
    build_buckets();
  }
  const int64_t n = pg->size();
  for (Bucket& b : buckets) {
    b.padded = (b.numel + n - 1) / n * n;
    // Stage 2 makes its buffers per backward.
    b.buffer = stage == 2 ? Tensor() : zeros({b.padded}, {.dtype = b.dtype, .device = b.device});
  }
  zero_stage = stage;
}

void DistributedDataParallel::Impl::detach_zero() {
  // Back to plain all-reduces (the padded buffers do no harm).
  reset();
  for (Bucket& b : buckets) {
    if (!b.buffer.defined()) b.buffer = zeros({b.padded}, {.dtype = b.dtype, .device = b.device});
  }
  zero_stage = 0;
  shards.clear();
}

void DistributedDataParallel::Impl::reset() {
  // After a failed backward: let launched collectives finish so the buffers are free again.
  for (Bucket& b : buckets) {
    if (b.work) {
      try {
        b.work->wait();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sinter: DistributedDataParallel: dropping a failed all-reduce: %s\n",
                     e.what());
      }
      b.work.reset();
    }
    if (zero_stage == 2) {
      b.buffer = Tensor();
      b.shard_grad = Tensor();
    }
    b.pending = b.params.size();
  }
  std::fill(ready.begin(), ready.end(), false);
  next_launch = 0;
  dirty = false;
}

std::shared_ptr<int> DistributedDataParallel::Impl::begin_backward() {
  if (dirty) reset();  // the last backward failed midway
  events.clear();
  auto token = std::make_shared<int>(0);
  pending = token;
  return token;
}

void DistributedDataParallel::Impl::mark_ready(size_t i) {
  SINTER_CHECK(!ready[i], "DistributedDataParallel: parameter '", names[i],
               "' got its gradient twice in one backward (is it reached through two separate "
               "graphs?); each parameter must be ready once per backward");
  const Tensor& p = all_params[i];
  const Slot& s = slots[i];
  Bucket& b = buckets[s.bucket];
  if (!b.buffer.defined()) b.buffer = zeros({b.padded}, {.dtype = b.dtype, .device = b.device});
  Tensor slot = b.buffer.narrow(0, s.offset, p.numel()).view(p.shape());
  Tensor g = p.grad();
  if (g.defined()) {
    slot.copy_(g);
  } else {
    slot.zero_();
  }
  // ZeRO stage 2: the bucket holds the gradient now; the parameter's own copy goes.
  if (zero_stage == 2) p.set_grad(Tensor());
  ready[i] = true;
  dirty = true;
  --b.pending;
}

void DistributedDataParallel::Impl::launch_ready_buckets() {
  while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
    Bucket& b = buckets[next_launch];
    if (zero_stage == 2) {
      b.shard_grad = empty({b.padded / pg->size()}, {.dtype = b.dtype, .device = b.device});
      b.work = pg->reduce_scatter_async(b.shard_grad, b.buffer, ReduceOp::Average);
    } else {
      b.work = pg->all_reduce_async(b.buffer, ReduceOp::Average);
    }
    events.push_back("launch " + std::to_string(next_launch));
    ++next_launch;
  }
  // Stage 2: buffers of buckets whose reduce-scatter is done are freed while backward goes on.
  if (zero_stage == 2) {
    for (size_t k = 0; k < next_launch; ++k) {
      Bucket& b = buckets[k];
      if (b.work && b.buffer.defined() && b.work->is_completed()) {
        b.work->wait();
        b.buffer = Tensor();
      }
    }
  }
}

void DistributedDataParallel::Impl::on_grad_ready(size_t i) {
  mark_ready(i);
  launch_ready_buckets();
}

void DistributedDataParallel::Impl::finalize() {
  events.push_back("backward end");
  std::vector<size_t> missing;
  for (const Bucket& b : buckets) {
    for (size_t i : b.params) {
      if (ready[i]) continue;
      if (!options.find_unused_parameters) {
        missing.push_back(i);
        continue;
      }
      // Unused here: its gradient so far (from no_sync backwards), or zero, which it then gets.
      if (!all_params[i].grad().defined()) all_params[i].set_grad(zeros_like(all_params[i]));
      mark_ready(i);
    }
  }
  if (!missing.empty()) {
    reset();
    const size_t first = *std::min_element(missing.begin(), missing.end());
    const std::string more =
        missing.size() > 1 ? " (and " + std::to_string(missing.size() - 1) + " more)" : "";
    SINTER_CHECK(false, "DistributedDataParallel: parameter '", names[first], "'", more,
                 " got no gradient in this backward; pass find_unused_parameters = true if that "
                 "is intended");
  }
  launch_ready_buckets();
  for (size_t k = 0; k < buckets.size(); ++k) {
    Bucket& b = buckets[k];
    std::shared_ptr<Work> work = std::move(b.work);
    work->wait();
    events.push_back("wait " + std::to_string(k));
    if (zero_stage == 2) {
      // Only this rank's part of the average stays: added to what the shard holds, as backward
      // adds to a parameter's gradient.
      b.buffer = Tensor();
      Tensor g = shards[k].grad();
      if (g.defined()) {
        g.add_(b.shard_grad);
      } else {
        shards[k].set_grad(b.shard_grad);
      }
      b.shard_grad = Tensor();
      continue;
    }
    for (size_t i : b.params) {
      const Tensor& p = all_params[i];
      Tensor slot = b.buffer.narrow(0, slots[i].offset, p.numel()).view(p.shape());
      Tensor g = p.grad();
      g.copy_(slot);
    }
    if (zero_stage == 1) {
      // The shard's gradient is its part of the averaged bucket (a view: no copy).
      const int64_t part = b.padded / pg->size();
      shards[k].set_grad(b.buffer.narrow(0, pg->rank() * part, part));
    }
  }
  reset();
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<ProcessGroup> pg,
                                                 DDPOptions options)
    : module_(std::move(module)), pg_(std::move(pg)) {
  SINTER_CHECK(module_ != nullptr, "DistributedDataParallel: module is null");
  SINTER_CHECK(pg_ != nullptr, "DistributedDataParallel: process group is null");
  SINTER_CHECK(options.bucket_cap_mb > 0,
               "DistributedDataParallel: bucket_cap_mb must be > 0, got ", options.bucket_cap_mb);
  auto impl = std::make_shared<Impl>();
  impl->pg = pg_.get();
  impl->options = options;
  impl->sync = &sync_;

  check_same_model(*pg_, *module_, "DistributedDataParallel");
  std::vector<Tensor> to_broadcast;
  for (auto& [name, p] : module_->named_parameters()) {
    impl->all_params.push_back(p);
    impl->names.push_back(name);
    to_broadcast.push_back(p);
  }
  for (const Tensor& b : module_->buffers()) to_broadcast.push_back(b);

  broadcast_all(*pg_, to_broadcast);

  for (size_t i = 0; i < impl->all_params.size(); ++i) {
    if (impl->all_params[i].requires_grad()) impl->trained.push_back(i);
  }
  impl->ready.assign(impl->all_params.size(), false);
  impl->build_buckets();

  std::weak_ptr<Impl> weak = impl;
  for (size_t i : impl->trained) {
    impl->all_params[i].register_post_accumulate_grad_hook([weak, i](Tensor&) {
      std::shared_ptr<Impl> s = weak.lock();
      if (!s || !*s->sync) return;
      if (s->pending.expired()) {
        autograd::queue_callback([weak, token = s->begin_backward()] {
          if (std::shared_ptr<Impl> st = weak.lock()) st->finalize();
        });
      }
      s->on_grad_ready(i);
    });
  }
  impl_ = std::move(impl);
}

DistributedDataParallel::~DistributedDataParallel() {
  // Collectives still in flight (a backward that failed midway) write into the buckets.
  if (impl_ && impl_->dirty) impl_->reset();
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  if (impl_->options.broadcast_buffers) {
    std::vector<Tensor> buffers = module_->buffers();
    if (!buffers.empty()) broadcast_all(*pg_, buffers);
  }
  return module_->forward(x);
}

std::vector<std::vector<size_t>> DistributedDataParallel::bucket_layout() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : impl_->buckets) out.push_back(b.params);
  return out;
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp)
    : ddp_(ddp), prev_(ddp.sync_) {
  ddp_.sync_ = false;
}

DistributedDataParallel::NoSync::~NoSync() { ddp_.sync_ = prev_; }

std::vector<std::string> ddp_debug_events(const DistributedDataParallel& ddp) {
  return ddp.impl_->events;
}

}  // namespace sinter::dist

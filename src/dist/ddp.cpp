// DistributedDataParallel: checks and broadcasts the model from rank 0, then averages gradients
// over the ranks in buckets whose all-reduces start from the post-accumulate hooks while backward
// runs.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

#include "sinter/autograd.h"
#include "sinter/dist.h"

namespace sinter::dist {

// Note [bucket order]
// Parameters go into buckets in reverse order of registration, which is roughly the order backward
// produces their gradients, so the first buckets fill while backward is still deep in the model.
// Buckets are launched strictly in index order (a bucket that fills early waits for the ones before
// it): every rank then issues the same collectives in the same order, which MPI and NCCL require,
// even if hooks fire in a different order on some rank.

namespace {

// A bucket: a flat buffer of one device and dtype holding the gradients of `params`, back to back.
struct Bucket {
  std::vector<size_t> params;  // indices into State::params, in packing order
  Device device = Device::cpu();
  DType dtype = DType::f32;
  int64_t numel = 0;
  Tensor buffer;       // (numel,)
  size_t pending = 0;  // parameters not yet ready in this backward
  std::shared_ptr<Work> work;
};

struct Slot {
  size_t bucket = 0;
  int64_t offset = 0;  // in elements, into the bucket's buffer
};

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

}  // namespace

// What the hooks share with the wrapper. Hooks hold it weakly: they stay registered on the
// parameters after the wrapper is gone, and then do nothing.
struct DistributedDataParallel::Impl {
  ProcessGroup* pg = nullptr;
  DDPOptions options;
  const bool* sync = nullptr;      // the wrapper's sync_
  std::vector<Tensor> all_params;  // module().parameters(), the indices of bucket_layout()
  std::vector<std::string> names;
  std::vector<size_t> trained;  // indices into all_params of those that require grad
  std::vector<Slot> slots;      // per all_params index (meaningful for trained ones)
  std::vector<Bucket> buckets;  // in launch order (Note [bucket order])
  std::vector<bool> ready;      // per all_params index, this backward
  size_t next_launch = 0;
  // Alive while this backward's finalizer is queued: expired means the next hook starts a new
  // backward (and, if the last one failed midway, finds state to clear).
  std::weak_ptr<int> pending;
  bool dirty = false;  // some parameter was marked ready since the last reset
  std::vector<std::string> events;

  void build_buckets();
  void on_grad_ready(size_t i);
  // Starts a synchronized backward; the finalizer holds the returned token.
  std::shared_ptr<int> begin_backward();
  void mark_ready(size_t i);
  void launch_ready_buckets();
  void finalize();
  void reset();
};

void DistributedDataParallel::Impl::build_buckets() {
  const double cap_bytes = options.bucket_cap_mb * 1024.0 * 1024.0;
  // Open bucket per (device type, device index, dtype); closed ones are final.
  std::map<std::tuple<int, int, int>, Bucket> open;
  std::vector<Bucket> closed;
  auto bytes = [](const Bucket& b) { return static_cast<double>(b.numel) * element_size(b.dtype); };
  for (auto it = trained.rbegin(); it != trained.rend(); ++it) {
    const Tensor& p = all_params[*it];
    auto key = std::make_tuple(static_cast<int>(p.device().type), p.device().index,
                               static_cast<int>(p.dtype()));
    Bucket& b = open[key];
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
    b.buffer = zeros({b.numel}, {.dtype = b.dtype, .device = b.device});
    b.pending = b.params.size();
  }
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
  Tensor slot = b.buffer.narrow(0, s.offset, p.numel()).view(p.shape());
  Tensor g = p.grad();
  if (g.defined()) {
    slot.copy_(g);
  } else {
    slot.zero_();
  }
  ready[i] = true;
  dirty = true;
  --b.pending;
}

void DistributedDataParallel::Impl::launch_ready_buckets() {
  while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
    Bucket& b = buckets[next_launch];
    b.work = pg->all_reduce_async(b.buffer, ReduceOp::Average);
    events.push_back("launch " + std::to_string(next_launch));
    ++next_launch;
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
    for (size_t i : b.params) {
      const Tensor& p = all_params[i];
      Tensor slot = b.buffer.narrow(0, slots[i].offset, p.numel()).view(p.shape());
      Tensor g = p.grad();
      g.copy_(slot);
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

  // Every rank must hold the same model: compare a hash of the descriptions, and on a mismatch find
  // and name the first tensor that differs (two more small collectives, taken by every rank alike).
  std::vector<std::string> desc;
  std::vector<Tensor> to_broadcast;
  for (auto& [name, p] : module_->named_parameters()) {
    desc.push_back(describe("parameter", name, p));
    impl->all_params.push_back(p);
    impl->names.push_back(name);
    to_broadcast.push_back(p);
  }
  for (auto& [name, b] : module_->named_buffers()) {
    desc.push_back(describe("buffer", name, b));
    to_broadcast.push_back(b);
  }
  std::vector<int64_t> hashes;
  uint64_t total = fnv1a("");
  for (const std::string& d : desc) {
    hashes.push_back(static_cast<int64_t>(fnv1a(d)));
    total = total * 1099511628211ull ^ static_cast<uint64_t>(hashes.back());
  }
  Tensor summary = from_vector(
      std::vector<int64_t>{static_cast<int64_t>(desc.size()), static_cast<int64_t>(total)}, {2},
      {.dtype = DType::i64});
  std::vector<int64_t> all = pg_->all_gather(summary).contiguous().to_vector<int64_t>();
  const int n = pg_->size();
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
        pg_->all_gather(from_vector(mine, {max_count}, {.dtype = DType::i64}))
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
    Tensor names_all = pg_->all_gather(encode(own));
    std::ostringstream os;
    for (int r = 0; r < n; ++r)
      os << (r ? ", " : "") << "rank " << r << " has " << decode(names_all.select(0, r));
    SINTER_CHECK(false,
                 "DistributedDataParallel: the ranks hold different models (every rank must "
                 "build the same one); first difference at entry ",
                 first, " of the parameters then buffers: ", os.str());
  }

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

// DataLoader: the per-epoch order, the prefetch thread with its bounded queue, and the stage that
// moves host batches to a CUDA device with asynchronous copies on a side stream.
#include "sinter/data/dataloader.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "internal/cuda_runtime.h"
#include "internal/profile_op.h"
#include "internal/shuffle.h"
#include "sinter/autograd.h"
#include "sinter/cuda.h"
#include "sinter/ops.h"

namespace sinter::data {
namespace {

using sinter::detail::mix_seed;

void check_host_batch(const Batch& b) {
  SINTER_CHECK(b.input.defined() && b.target.defined(),
               "DataLoader: the dataset or transform returned a batch with an undefined tensor");
}

}  // namespace

namespace detail {

// One epoch in flight: the order, the producer (a thread, or the consumer itself when prefetch is
// 0), and, for a CUDA device, the batch whose copy has been queued ahead of the one handed out.
class EpochRun {
 public:
  EpochRun(std::shared_ptr<const Dataset> dataset, const DataLoaderOptions& opts,
           std::vector<int64_t> order, int64_t num_batches, int64_t epoch)
      : dataset_(std::move(dataset)),
        opts_(opts),
        order_(std::move(order)),
        num_batches_(num_batches),
        gen_(mix_seed(opts.seed, epoch, 2)) {
    if (opts_.device.is_cuda()) copy_stream_ = cuda::Stream::create(opts_.device.index);
    if (opts_.prefetch > 0 && num_batches_ > 0)
      worker_ = std::thread([this] {
        sinter::profiler::detail::name_thread("data loader");
        produce_all();
      });
  }

  ~EpochRun() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    space_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  // The next batch on the target device, or nothing at the end of the epoch.
  std::optional<Batch> next() {
    std::optional<Staged> s;
    if (staged_) {
      s = std::move(staged_);
      staged_.reset();
    } else {
      std::optional<Batch> host = next_host(/*wait=*/true);
      if (!host) return std::nullopt;
      s = stage(std::move(*host));
    }
    if (opts_.device.is_cuda()) {
      // Work queued on the consumer's stream from now on reads the batch after its copy is done.
      cuda::current_stream(opts_.device.index).wait(s->copied);
      // Queue the next copy now, so that it overlaps the consumer's work on this batch.
      if (std::optional<Batch> host = next_host(/*wait=*/false)) staged_ = stage(std::move(*host));
    }
    return std::move(s->batch);
  }

 private:
  struct Staged {
    Batch batch;
    Batch host;  // the pinned source, kept until the batch has been handed out
    cuda::Event copied{false};
  };

  Batch make(int64_t b) {
    NoGradGuard no_grad;
    const int64_t bs = opts_.batch_size;
    const int64_t begin = b * bs;
    const int64_t end = std::min<int64_t>(begin + bs, static_cast<int64_t>(order_.size()));
    std::vector<int64_t> idx(order_.begin() + begin, order_.begin() + end);
    Batch batch = dataset_->get_batch(idx);
    check_host_batch(batch);
    if (opts_.transform) {
      opts_.transform(batch, gen_);
      check_host_batch(batch);
    }
    if (opts_.device.is_cuda() && opts_.pin_memory) {
      if (batch.input.device().is_cpu()) batch.input = batch.input.pin_memory();
      if (batch.target.device().is_cpu()) batch.target = batch.target.pin_memory();
    }
    return batch;
  }

  void produce_all() {
    try {
      for (int64_t b = 0; b < num_batches_; ++b) {
        {
          std::unique_lock<std::mutex> lock(mu_);
          space_.wait(lock, [&] { return stop_ || static_cast<int64_t>(queue_.size()) < cap(); });
          if (stop_) return;
        }
        Batch batch = make(b);
        {
          std::lock_guard<std::mutex> lock(mu_);
          queue_.push_back(std::move(batch));
        }
        ready_.notify_one();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
    }
    ready_.notify_one();
  }

  int64_t cap() const { return opts_.prefetch; }

  // The next host batch in order; with wait=false, nothing unless one is ready now. A worker's
  // error is rethrown once the batches made before it have been handed out.
  std::optional<Batch> next_host(bool wait) {
    if (opts_.prefetch == 0) {
      if (produced_ >= num_batches_ || !wait) return std::nullopt;
      return make(produced_++);
    }
    if (num_batches_ == 0) return std::nullopt;
    std::unique_lock<std::mutex> lock(mu_);
    if (wait) ready_.wait(lock, [&] { return !queue_.empty() || finished_; });
    if (!queue_.empty()) {
      Batch b = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      space_.notify_one();
      return b;
    }
    if (wait && error_) {
      std::exception_ptr e = std::exchange(error_, nullptr);
      std::rethrow_exception(e);
    }
    return std::nullopt;
  }

  // Moves a host batch to the target device. For CUDA: the outputs are allocated from the
  // consumer's stream, the copy runs on copy_stream_ after the consumer's queued work (which may
  // still read the memory the allocator hands out again), and `copied` marks its end.
  Staged stage(Batch host) {
    Staged s;
    if (!opts_.device.is_cuda()) {
      s.batch = std::move(host);
      return s;
    }
    const Device dev = opts_.device;
    cuda::Event consumer_done(false);
    consumer_done.record(cuda::current_stream(dev.index));
    copy_stream_.wait(consumer_done);
    auto copy = [&](const Tensor& src) {
      if (src.device() == dev) return src;
      Tensor h = src.device().is_cpu() ? src.contiguous() : src.to(Device::cpu());
      Tensor out = empty(h.shape(), {.dtype = h.dtype(), .device = dev});
      if (h.numel() > 0) {
        cuda::StreamGuard on_copy_stream(copy_stream_);
        cuda::detail::copy_bytes(out.data_ptr(), dev, h.data_ptr(), Device::cpu(),
                                 static_cast<size_t>(h.numel()) * element_size(h.dtype()));
      }
      return out;
    };
    s.batch = {copy(host.input), copy(host.target)};
    s.copied.record(copy_stream_);
    s.host = std::move(host);
    return s;
  }

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions opts_;
  std::vector<int64_t> order_;
  int64_t num_batches_;
  Generator gen_;
  cuda::Stream copy_stream_;
  std::optional<Staged> staged_;
  int64_t produced_ = 0;  // prefetch == 0 only

  std::mutex mu_;
  std::condition_variable ready_;  // a batch was queued, or the worker finished
  std::condition_variable space_;  // the queue has room, or stop_ was set
  std::deque<Batch> queue_;
  bool stop_ = false;
  bool finished_ = false;
  std::exception_ptr error_;
  std::thread worker_;  // last: started after everything it uses exists
};

}  // namespace detail

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  SINTER_CHECK(dataset_ != nullptr, "DataLoader: null dataset");
  SINTER_CHECK(options_.batch_size > 0, "DataLoader: batch_size must be positive, got ",
               options_.batch_size);
  SINTER_CHECK(options_.prefetch >= 0, "DataLoader: prefetch must be >= 0, got ",
               options_.prefetch);
  SINTER_CHECK(dataset_->size() >= 0, "DataLoader: dataset size is negative: ", dataset_->size());
  SINTER_CHECK(!(options_.sampler && options_.shuffle),
               "DataLoader: shuffle must be false when a sampler is set (the sampler decides the "
               "order; shuffle inside it)");
  if (options_.device.is_cuda()) {
    SINTER_CHECK(cuda::is_available(), "DataLoader: batches are to go to ", options_.device,
                 " but no CUDA device is available");
  }
}

DataLoader::DataLoader(const Dataset& dataset, DataLoaderOptions options)
    : DataLoader(std::shared_ptr<const Dataset>(&dataset, [](const Dataset*) {}),
                 std::move(options)) {}

DataLoader::~DataLoader() = default;

int64_t DataLoader::num_batches(int64_t num_indices) const {
  const int64_t bs = options_.batch_size;
  return options_.drop_last ? num_indices / bs : (num_indices + bs - 1) / bs;
}

int64_t DataLoader::size() const {
  if (options_.sampler) return num_batches(static_cast<int64_t>(indices(next_epoch_).size()));
  return num_batches(dataset_->size());
}

void DataLoader::set_epoch(int64_t epoch) {
  SINTER_CHECK(epoch >= 0, "DataLoader::set_epoch: epoch must be >= 0, got ", epoch);
  next_epoch_ = epoch;
}

std::vector<int64_t> DataLoader::indices(int64_t epoch) const {
  const int64_t n = dataset_->size();
  if (options_.sampler) {
    std::vector<int64_t> order = options_.sampler(epoch);
    // Checked here, on the consumer's thread, so that a bad sampler fails when the epoch starts.
    for (size_t i = 0; i < order.size(); ++i) {
      SINTER_CHECK(order[i] >= 0 && order[i] < n, "DataLoader: the sampler returned index ",
                   order[i], " (position ", i, " of epoch ", epoch, ") for a dataset of ", n,
                   " examples");
    }
    return order;
  }
  if (options_.shuffle) return sinter::detail::shuffled_order(n, options_.seed, epoch);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  return order;
}

DataLoader::Iterator DataLoader::begin() {
  run_.reset();  // ends the previous epoch (joins its thread) before the next one starts
  // The epoch counts as started only once its order is known (a sampler's bad index throws).
  const int64_t epoch = next_epoch_;
  std::vector<int64_t> order = indices(epoch);
  ++next_epoch_;
  const int64_t batches = num_batches(static_cast<int64_t>(order.size()));
  run_ = std::make_unique<detail::EpochRun>(dataset_, options_, std::move(order), batches, epoch);
  return Iterator(run_.get());
}

DataLoader::Iterator::Iterator(detail::EpochRun* run) : run_(run), done_(false) { ++*this; }

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  SINTER_CHECK(!done_, "DataLoader::Iterator: incremented past the end");
  std::optional<Batch> b = run_->next();
  if (b) {
    current_ = std::move(*b);
  } else {
    current_ = {};
    done_ = true;
  }
  return *this;
}

}  // namespace sinter::data

// The NCCL backend of ProcessGroup for CUDA tensors: one communicator per group on the rank's GPU
// (rank 0's unique id broadcast through MPI), and a communication stream of its own, ordered
// against the device's current stream with events, never with host waits.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dist/process_group_impl.h"
#include "internal/cuda_check.h"
#include "internal/cuda_runtime.h"
#include "sinter/core/noncopyable.h"
#include "sinter/cuda.h"

namespace sinter::dist::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Note [nccl loading]
// NCCL is opened when a CUDA tensor first meets a process group, with dlopen("libnccl.so.2"), not
// linked: a process that already holds an NCCL (PyTorch's wheel brings its own, and Python
// imports sinter and torch in either order) then shares that one, since the loader matches the
// soname, instead of the first import's NCCL shadowing the other's newer symbols. Where the loader
// finds none, the library found at build time (SINTER_NCCL_LIBRARY) is tried; failing both is an
// error naming them. Every NCCL call goes through the table below.
struct NcclApi {
  decltype(&::ncclGetErrorString) GetErrorString;
  decltype(&::ncclGetUniqueId) GetUniqueId;
  decltype(&::ncclCommInitRank) CommInitRank;
  decltype(&::ncclCommDestroy) CommDestroy;
  decltype(&::ncclCommAbort) CommAbort;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError;
  decltype(&::ncclAllReduce) AllReduce;
  decltype(&::ncclBroadcast) Broadcast;
  decltype(&::ncclReduceScatter) ReduceScatter;
  decltype(&::ncclAllGather) AllGather;
};

#ifndef SINTER_NCCL_LIBRARY
#define SINTER_NCCL_LIBRARY "libnccl.so"
#endif

const NcclApi& nccl() {
  static const NcclApi api = [] {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) lib = dlopen(SINTER_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    SINTER_CHECK(lib != nullptr, "ProcessGroup: NCCL could not be loaded (libnccl.so.2, then ",
                 SINTER_NCCL_LIBRARY, "): ", dlerror(),
                 "; install NCCL or add its folder to LD_LIBRARY_PATH");
    auto sym = [lib](const char* name) {
      void* f = dlsym(lib, name);
      SINTER_CHECK(f != nullptr, "ProcessGroup: the NCCL library has no ", name);
      return f;
    };
    NcclApi a{};
#define SINTER_NCCL_LOAD_(field) a.field = reinterpret_cast<decltype(a.field)>(sym("nccl" #field));
    SINTER_NCCL_LOAD_(GetErrorString)
    SINTER_NCCL_LOAD_(GetUniqueId)
    SINTER_NCCL_LOAD_(CommInitRank)
    SINTER_NCCL_LOAD_(CommDestroy)
    SINTER_NCCL_LOAD_(CommAbort)
    SINTER_NCCL_LOAD_(CommGetAsyncError)
    SINTER_NCCL_LOAD_(AllReduce)
    SINTER_NCCL_LOAD_(Broadcast)
    SINTER_NCCL_LOAD_(ReduceScatter)
    SINTER_NCCL_LOAD_(AllGather)
#undef SINTER_NCCL_LOAD_
    return a;
  }();
  return api;
}

#define SINTER_NCCL_CALL(rank, what, expr)                                       \
  do {                                                                           \
    const ncclResult_t sinter_nccl_rc_ = (expr);                                 \
    if (sinter_nccl_rc_ != ncclSuccess) {                                        \
      SINTER_THROW("ProcessGroup: rank ", rank, ": ", what,                      \
                   " failed in NCCL: ", nccl().GetErrorString(sinter_nccl_rc_)); \
    }                                                                            \
  } while (0)

// NCCL's type of each dtype; bools travel as their 0/1 bytes. (The float8 types: NCCL 2.24.)
constexpr std::pair<DType, ncclDataType_t> kNcclTypes[] = {
    {DType::f32, ncclFloat32},      {DType::f64, ncclFloat64}, {DType::bf16, ncclBfloat16},
    {DType::f16, ncclFloat16},      {DType::i64, ncclInt64},   {DType::i32, ncclInt32},
    {DType::u8, ncclUint8},         {DType::b8, ncclUint8},    {DType::f8e4m3, ncclFloat8e4m3},
    {DType::f8e5m2, ncclFloat8e5m2}};
static_assert(std::size(kNcclTypes) == size_t(kNumDTypes), "every dtype has an NCCL type");

ncclDataType_t nccl_type(DType dtype) {
  for (const auto& [dt, type] : kNcclTypes) {
    if (dt == dtype) return type;
  }
  SINTER_THROW("ProcessGroup: dtype ", dtype, " has no NCCL type");
}

// Makes `device` current for a scope.
class DeviceSwitch : NonCopyable {
 public:
  explicit DeviceSwitch(int device) {
    SINTER_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) SINTER_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceSwitch() { (void)cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

using EventPtr = std::shared_ptr<CUevent_st>;

EventPtr make_event() {
  cudaEvent_t e = nullptr;
  SINTER_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return EventPtr(e, [](cudaEvent_t ev) { (void)cudaEventDestroy(ev); });
}

// True once the collective recorded in `e` has ended, or the query failed (a failed collective
// counts as ended). cudaErrorNotReady is cleared from the runtime's last error, as everywhere in
// the library, so that no later launch check reports it.
bool finished(const EventPtr& e) {
  if (cudaEventQuery(e.get()) != cudaErrorNotReady) return true;
  (void)cudaGetLastError();
  return false;
}

// Note [NCCL lock]
// CommState::mutex guards the communicator handle, `ready`, `pending` and `broken`: collectives
// and the Works' wait() and is_completed() may run on different threads. It is the innermost lock
// of the process group: taken with none of MpiGroup's held, and never held while calling MPI. Only
// the caching allocator's lock is taken under it (record_stream), and the allocator takes no lock
// of the process group.
// Nothing done under it waits for another thread of this process: event records and queries,
// stream waits, ncclCommAbort (which does not wait for peers), and the NCCL calls that queue a
// collective (which, the first time, may wait for the peer ranks to connect).
struct CommState {
  std::mutex mutex;
  ncclComm_t comm = nullptr;
  // Set once at creation, then read without the lock.
  cudaStream_t stream = nullptr;
  int rank = 0, device = 0;
  std::chrono::milliseconds timeout{0};
  // Recorded on the compute stream, waited for by the communication stream, at each launch.
  EventPtr ready = make_event();
  std::string broken;  // set on a timeout or an NCCL error: the communicator is aborted
  struct Pending {
    EventPtr done;
    Clock::time_point start;
    std::string what;
  };
  std::vector<Pending> pending;

  // The member functions below are called with `mutex` held.
  void ensure_usable(const char* what) const {
    SINTER_CHECK(broken.empty(), what, ": rank ", rank,
                 ": the NCCL communicator failed earlier and cannot be used any more: ", broken);
  }

  // Drops finished collectives; one older than the timeout aborts the communicator (which makes
  // its kernels return, so no stream stays blocked) and throws. Asynchronous NCCL errors (a peer
  // that went away) are reported here too.
  void check_progress() {
    ncclResult_t async = ncclSuccess;
    if (nccl().CommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress) {
      fail(sinter::detail::str_cat(
          "rank ", rank, ": NCCL reported an asynchronous error: ", nccl().GetErrorString(async)));
    }
    std::erase_if(pending, [](const Pending& p) { return finished(p.done); });
    for (const Pending& p : pending) {
      if (Clock::now() - p.start > timeout) {
        fail(sinter::detail::str_cat(
            "rank ", rank, ": ", p.what, " timed out after ", timeout.count(),
            " ms (a peer died or stalled, or the ranks called different collectives); "
            "the NCCL communicator was aborted"));
      }
    }
  }

  [[noreturn]] void fail(const std::string& why) {
    if (broken.empty()) {
      broken = why;
      (void)nccl().CommAbort(comm);
      comm = nullptr;
      pending.clear();
    }
    SINTER_THROW(why);
  }

  // The collectives still queued end before the communicator goes (destroyed under them, NCCL
  // may hang or touch freed buffers); those not done within the timeout (a peer gone) are aborted.
  ~CommState() {
    if (comm) {
      bool drained = true;
      if (stream) {
        const Clock::time_point deadline = Clock::now() + timeout;
        while (cudaStreamQuery(stream) == cudaErrorNotReady) {
          if (Clock::now() >= deadline) {
            drained = false;
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        (void)cudaGetLastError();
      }
      (void)(drained ? nccl().CommDestroy(comm) : nccl().CommAbort(comm));
    }
    if (stream) {
      // Live tensors may still name the stream as a use (Note [stream uses]): it is done with them.
      (void)cudaStreamSynchronize(stream);
      cuda::detail::forget_stream(stream);
      (void)cudaStreamDestroy(stream);
    }
  }
};

// wait(): the device's current stream waits for the collective's `done` event (the host does not).
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<CommState> state, EventPtr done, std::vector<Tensor> keep,
           std::string what)
      : state_(std::move(state)),
        done_(std::move(done)),
        keep_(std::move(keep)),
        what_(std::move(what)),
        start_(Clock::now()) {}
  ~NcclWork() override {
    // Unwaited: still order the compute stream after the collective, so that work queued there
    // later does not race it on the tensors (the reuse of their memory is guarded by the stream
    // uses of Note [stream uses]).
    if (!waited_) {
      try {
        order_current_stream();
      } catch (...) {
      }
    }
  }

  void wait() override {
    if (waited_) return;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      // Even when the collective has ended: an NCCL error ends its kernel too.
      if (state_->broken.empty()) state_->check_progress();
      if (!state_->broken.empty()) SINTER_THROW(what_, ": ", state_->broken);
    }
    order_current_stream();
    waited_ = true;
    keep_.clear();
  }

  bool is_completed() override {
    if (waited_ || finished(done_)) return true;
    std::lock_guard<std::mutex> lock(state_->mutex);
    return !state_->broken.empty();
  }

 private:
  void order_current_stream() {
    DeviceSwitch guard(state_->device);
    cudaStream_t compute = cuda::detail::current_stream_handle(state_->device);
    SINTER_CUDA_CHECK(cudaStreamWaitEvent(compute, done_.get(), 0));
  }

  std::shared_ptr<CommState> state_;
  EventPtr done_;
  std::vector<Tensor> keep_;
  std::string what_;
  Clock::time_point start_;
  bool waited_ = false;
};

// Bools are 0/1 bytes: Sum and Max both become Max (or). The float8 dtypes move (broadcast,
// all_gather) but are not reduced: no arithmetic takes them (Note [float8]), as the MPI backend
// has no type for them.
void check_reducible(const char* op, DType dtype) {
  SINTER_CHECK(!is_float8(dtype), op, ": no reduction of ", dtype,
               " tensors (no arithmetic takes them); reduce in f32 or bf16");
}

ncclRedOp_t reduce_op(DType dtype, ReduceOp op) {
  if (dtype == DType::b8 || op == ReduceOp::Max) return ncclMax;
  return op == ReduceOp::Average ? ncclAvg : ncclSum;
}

class NcclBackendImpl final : public NcclBackend {
 public:
  explicit NcclBackendImpl(std::shared_ptr<CommState> state) : state_(std::move(state)) {}

  std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op) override {
    check_reducible("all_reduce", tensor.dtype());
    return launch("all_reduce", tensor, {tensor}, 1, [&](cudaStream_t s) {
      return nccl().AllReduce(tensor.data_ptr(), tensor.data_ptr(),
                              static_cast<size_t>(tensor.numel()), nccl_type(tensor.dtype()),
                              reduce_op(tensor.dtype(), op), state_->comm, s);
    });
  }

  std::shared_ptr<Work> broadcast(Tensor& tensor, int root) override {
    // The root only reads its tensor.
    return launch("broadcast", tensor, {tensor}, state_->rank == root ? 0 : 1, [&](cudaStream_t s) {
      return nccl().Broadcast(tensor.data_ptr(), tensor.data_ptr(),
                              static_cast<size_t>(tensor.numel()), nccl_type(tensor.dtype()), root,
                              state_->comm, s);
    });
  }

  std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op) override {
    check_reducible("reduce_scatter", input.dtype());
    return launch("reduce_scatter", input, {output, input}, 1, [&](cudaStream_t s) {
      return nccl().ReduceScatter(input.data_ptr(), output.data_ptr(),
                                  static_cast<size_t>(output.numel()), nccl_type(input.dtype()),
                                  reduce_op(input.dtype(), op), state_->comm, s);
    });
  }

  std::shared_ptr<Work> all_gather(const Tensor& tensor, Tensor& out) override {
    return launch("all_gather", tensor, {out, tensor}, 1, [&](cudaStream_t s) {
      return nccl().AllGather(tensor.data_ptr(), out.data_ptr(),
                              static_cast<size_t>(tensor.numel()), nccl_type(tensor.dtype()),
                              state_->comm, s);
    });
  }

 private:
  // `keep`: the tensors the collective uses, of which the first `written` are written (their
  // version moves, as in the MPI backend; a tensor only read, saved for backward, stays valid).
  template <class Call>
  std::shared_ptr<Work> launch(const char* what, const Tensor& tensor, std::vector<Tensor> keep,
                               size_t written, Call&& call) {
    CommState& st = *state_;
    // A collective's end is an event the host polls (timeouts, errors), which a graph cannot hold.
    SINTER_CHECK(!cuda::is_capturing(), what, ": rank ", st.rank,
                 ": NCCL collectives cannot be captured into a CUDA graph; keep the all-reduce "
                 "outside the captured step");
    std::lock_guard<std::mutex> lock(st.mutex);
    st.ensure_usable(what);
    st.check_progress();
    SINTER_CHECK(tensor.device().index == st.device, what, ": rank ", st.rank,
                 ": the tensor is on cuda:", tensor.device().index,
                 ", but this rank's GPU is cuda:", st.device,
                 " (one GPU per rank: use Device::cuda(pg->cuda_device()))");
    SINTER_CHECK(tensor.is_contiguous(), what, ": rank ", st.rank,
                 ": CUDA tensors must be contiguous (shape ", shape_text(tensor), ")");
    const std::string text = sinter::detail::str_cat(what, " of shape ", shape_text(tensor));
    DeviceSwitch guard(st.device);
    // The communication stream starts after everything queued so far on the compute stream.
    cudaStream_t compute = cuda::detail::current_stream_handle(st.device);
    SINTER_CUDA_CHECK(cudaEventRecord(st.ready.get(), compute));
    SINTER_CUDA_CHECK(cudaStreamWaitEvent(st.stream, st.ready.get(), 0));
    // Freed later, a tensor's block goes back to the pool of the stream it was allocated on, which
    // the communication stream is not ordered with (Note [stream uses]). Named before the call, so
    // that no failure after it leaves a block unguarded.
    for (const Tensor& t : keep) cuda::detail::record_stream(t.storage().data(), st.stream);
    if (tensor.numel() > 0) {
      const ncclResult_t rc = call(st.stream);
      if (rc != ncclSuccess) {
        st.fail(sinter::detail::str_cat("rank ", st.rank, ": ", text,
                                        " failed in NCCL: ", nccl().GetErrorString(rc)));
      }
    }
    EventPtr done = make_event();
    SINTER_CUDA_CHECK(cudaEventRecord(done.get(), st.stream));
    st.pending.push_back({done, Clock::now(), text});
    for (size_t i = 0; i < written; ++i) keep[i].bump_version();
    return std::make_shared<NcclWork>(state_, std::move(done), std::move(keep), text);
  }

  std::shared_ptr<CommState> state_;
};

}  // namespace

std::unique_ptr<NcclBackend> make_nccl_backend(const NcclSetup& setup) {
  // Every rank opens NCCL (Note [nccl loading]), and rank 0 makes the id, before any rank waits for
  // another: a rank that failed alone would leave the others in the broadcast. The ranks then
  // agree on the outcome, and every one throws when any failed.
  ncclUniqueId id{};
  std::string error;
  try {
    (void)nccl();
    if (setup.rank == 0) SINTER_NCCL_CALL(setup.rank, "ncclGetUniqueId", nccl().GetUniqueId(&id));
  } catch (const Error& e) {
    error = e.what();
  }
  const char ok = error.empty() ? 1 : 0;
  std::vector<char> oks(static_cast<size_t>(setup.size));
  setup.all_gather(&ok, oks.data(), 1);
  SINTER_CHECK(error.empty(), error);
  for (int r = 0; r < setup.size; ++r) {
    SINTER_CHECK(oks[static_cast<size_t>(r)] != 0, "ProcessGroup: rank ", setup.rank, ": rank ", r,
                 " could not set up NCCL (its own error says why)");
  }
  setup.broadcast_from_rank0(&id, sizeof(id));
  // One GPU per rank: it becomes this process's current device. Two ranks on one GPU would fail
  // inside NCCL's setup with a message that names neither; every rank compares the GPUs' UUIDs
  // first and throws the same error.
  SINTER_CUDA_CHECK(cudaSetDevice(setup.device));
  cudaDeviceProp prop{};
  SINTER_CUDA_CHECK(cudaGetDeviceProperties(&prop, setup.device));
  GpuId mine{};
  std::memcpy(mine.data(), prop.uuid.bytes, mine.size());
  std::vector<GpuId> ids(static_cast<size_t>(setup.size));
  setup.all_gather(mine.data(), ids.data(), mine.size());
  check_one_gpu_per_rank(ids);
  auto state = std::make_shared<CommState>();
  state->rank = setup.rank;
  state->device = setup.device;
  state->timeout = setup.timeout;
  SINTER_CUDA_CHECK(cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking));
  SINTER_NCCL_CALL(setup.rank, "ncclCommInitRank",
                   nccl().CommInitRank(&state->comm, setup.size, id, setup.rank));
  return std::make_unique<NcclBackendImpl>(std::move(state));
}

}  // namespace sinter::dist::detail

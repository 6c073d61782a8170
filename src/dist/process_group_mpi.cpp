// ProcessGroup over MPI: initialization and shutdown, the MPI backend for CPU tensors, the shape
// check before each collective, and the hand-off of CUDA tensors to the NCCL backend.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <iterator>
#include <mutex>
#include <thread>
#include <utility>

#include "dist/process_group_impl.h"
#include "sinter/autograd.h"
#include "sinter/cuda.h"

namespace sinter::dist {
namespace detail {

std::string shape_text(const Tensor& tensor) { return shape_str(tensor.shape()); }

}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;

// MPI is initialized with MPI_THREAD_SERIALIZED (enough for OpenMPI's fast paths), so every MPI
// call of the library holds this lock: collectives may then be started and waited from any thread.
std::mutex g_mpi_mutex;

[[noreturn]] void mpi_fail(int rank, const std::string& what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  SINTER_THROW(
      "ProcessGroup: rank ", rank, ": ", what, " failed in MPI: ",
      len ? std::string(text, static_cast<size_t>(len)) : "error code " + std::to_string(code));
}

#define SINTER_MPI_CALL(rank, what, expr)                                    \
  do {                                                                       \
    const int sinter_mpi_rc_ = (expr);                                       \
    if (sinter_mpi_rc_ != MPI_SUCCESS) mpi_fail(rank, what, sinter_mpi_rc_); \
  } while (0)

// MPI counts are ints: larger buffers go in several requests of at most this many elements.
constexpr int64_t kMaxCount = int64_t{1} << 30;

// Buffers and requests of collectives whose Work was dropped unwaited or timed out: MPI still
// writes into the buffers, so they stay alive until the requests complete.
struct Orphan {
  std::vector<MPI_Request> requests;
  std::vector<Tensor> buffers;
};

class MpiGroup;

// Note [MPI shutdown]
// The library calls MPI_Finalize once, at exit, from this object's destructor, and only when it
// initialized MPI itself. Before that it tears down every live group (NCCL communicator first, then
// the duplicated MPI communicator), waiting a bounded time for collectives still in flight. If some
// never complete (a peer died, or ranks disagreed and a collective timed out), MPI_Finalize would
// hang, so the job is aborted instead (non-zero exit; mpirun stops the other ranks).
struct Runtime {
  bool we_initialized = false;
  std::vector<std::weak_ptr<MpiGroup>> groups;
  ~Runtime();
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

enum CallKind : int64_t {
  kAllReduce = 1,
  kBroadcast = 2,
  kAllGather = 3,
  kReduceScatter = 4,
  kAllGatherInto = 5
};
const char* call_name(int64_t kind) {
  switch (kind) {
    case kAllReduce:
      return "all_reduce";
    case kBroadcast:
      return "broadcast";
    case kAllGather:
      return "all_gather";
    case kReduceScatter:
      return "reduce_scatter";
    case kAllGatherInto:
      return "all_gather_into";
    default:
      return "collective";
  }
}
// In ReduceOp's order.
constexpr const char* kReduceOpNames[] = {"Sum", "Average", "Max"};

// What the shape check exchanges: the call, its op or root, device type, dtype, numel, ndim and
// the first kMaxCheckedDims sizes (-1 past ndim).
constexpr int kMaxCheckedDims = 8;
constexpr int kCheckLen = 6 + kMaxCheckedDims;

std::vector<int64_t> call_signature(int64_t kind, int64_t extra, const Tensor& t) {
  std::vector<int64_t> v(kCheckLen, -1);
  v[0] = kind;
  v[1] = extra;
  v[2] = static_cast<int64_t>(t.device().type);
  v[3] = static_cast<int64_t>(t.dtype());
  v[4] = t.numel();
  v[5] = t.dim();
  for (int64_t d = 0; d < std::min<int64_t>(t.dim(), kMaxCheckedDims); ++d) v[6 + d] = t.size(d);
  return v;
}

std::string describe_signature(const std::vector<int64_t>& v) {
  std::string shape = "[";
  for (int64_t d = 0; d < std::min<int64_t>(v[5], kMaxCheckedDims); ++d) {
    shape += (d ? ", " : "") + std::to_string(v[6 + d]);
  }
  if (v[5] > kMaxCheckedDims) shape += ", ...";
  shape += "]";
  const bool dtype_ok = v[3] >= 0 && v[3] < kNumDTypes;
  std::string extra;
  if ((v[0] == kAllReduce || v[0] == kReduceScatter) && v[1] >= 0 &&
      v[1] < int64_t(std::size(kReduceOpNames))) {
    extra = std::string(" ") + kReduceOpNames[v[1]];
  } else if (v[0] == kBroadcast) {
    extra = " from root " + std::to_string(v[1]);
  }
  return sinter::detail::str_cat(
      "shape ", shape, " dtype ", dtype_ok ? dtype_name(static_cast<DType>(v[3])) : "?", " (",
      call_name(v[0]), extra, " on ",
      v[2] == static_cast<int64_t>(DeviceType::cuda) ? "cuda" : "cpu", ")");
}

class MpiWork;

class MpiGroup final : public ProcessGroup, public std::enable_shared_from_this<MpiGroup> {
 public:
  // `device_local_rank`: the node-local rank that picks the GPU (ProcessGroupOptions::device -1):
  // a split group's is its parent's, so that a rank keeps its GPU in every group; -1: this group's
  // own local rank.
  MpiGroup(MPI_Comm comm, const ProcessGroupOptions& options, int device_local_rank = -1)
      : comm_(comm), options_(options) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm local;
    SINTER_MPI_CALL(rank_, "MPI_Comm_split_type",
                    MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
    device_local_rank_ = device_local_rank >= 0 ? device_local_rank : local_rank_;
  }
  ~MpiGroup() override { teardown(std::chrono::milliseconds(0)); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  int cuda_device() const override {
    return detail::choose_device(options_.device, rank_, device_local_rank_, cuda::device_count());
  }

  std::shared_ptr<Work> all_reduce_async(Tensor& tensor, ReduceOp op) override;
  std::shared_ptr<Work> broadcast_async(Tensor& tensor, int root) override;
  Tensor all_gather(const Tensor& tensor) override;
  void barrier() override;
  std::shared_ptr<ProcessGroup> split(int color, int key) override;
  std::shared_ptr<Work> reduce_scatter_async(Tensor& output, const Tensor& input,
                                             ReduceOp op) override;
  std::shared_ptr<Work> all_gather_into_async(Tensor& output, const Tensor& input) override;

  // Waits up to `drain` for orphaned collectives, then frees the NCCL and MPI communicators.
  // Returns false when some collective never completed. Idempotent; MPI must not be finalized.
  bool teardown(std::chrono::milliseconds drain);

  // Called by a Work that timed out or failed: later collectives on this group throw `why`.
  void mark_broken(const std::string& why) {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (broken_.empty()) broken_ = why;
  }
  void adopt(Orphan orphan) {
    std::lock_guard<std::mutex> lock(state_mutex_);
    orphans_.push_back(std::move(orphan));
  }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  bool torn_down() const { return torn_down_; }

 private:
  void ensure_usable(const char* what);
  // Collective: throws on every rank when the ranks' signatures differ (Note in dist.h on
  // check_shapes). min and max over ranks come from one MPI_MAX all-reduce of (v, -v).
  void check_same(const char* what, int64_t kind, int64_t extra, const Tensor& t);
  void reap_orphans();
  detail::NcclBackend& nccl();

  MPI_Comm comm_;
  ProcessGroupOptions options_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, device_local_rank_ = 0;
  // Guards the creation of nccl_ (collective, so it may block on peers while held); taken before
  // g_mpi_mutex, never after it, and never with state_mutex_ held.
  std::mutex nccl_mutex_;
  std::unique_ptr<detail::NcclBackend> nccl_;
  std::mutex state_mutex_;
  std::string broken_;
  std::vector<Orphan> orphans_;
  bool torn_down_ = false;

  friend class MpiWork;
};

// Requests of one MPI collective. `finish` runs once after they complete (Average's division, the
// copy back from a temporary into the caller's tensor).
class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<MpiGroup> group, std::string what, std::vector<MPI_Request> requests,
          std::vector<Tensor> buffers, std::function<void()> finish)
      : group_(std::move(group)),
        what_(std::move(what)),
        requests_(std::move(requests)),
        buffers_(std::move(buffers)),
        finish_(std::move(finish)),
        start_(Clock::now()) {}

  ~MpiWork() override {
    if (state_ == State::Pending && !group_->torn_down()) {
      group_->adopt(Orphan{std::move(requests_), std::move(buffers_)});
    }
  }

  void wait() override {
    int spins = 0;
    while (state_ == State::Pending) {
      if (poll()) break;
      if (Clock::now() - start_ > group_->timeout()) {
        error_ = sinter::detail::str_cat(
            "rank ", group_->rank(), ": ", what_, " timed out after ", group_->timeout().count(),
            " ms (a peer died or stalled, or the ranks called different collectives); this "
            "ProcessGroup cannot be used any more");
        group_->mark_broken(error_);
        group_->adopt(Orphan{std::move(requests_), std::move(buffers_)});
        requests_.clear();
        state_ = State::Failed;
        break;
      }
      // Spin briefly for short collectives, then back off so that a rank sharing a core with its
      // peer (oversubscribed CI) leaves it the CPU.
      if (++spins < 100) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(std::min(spins, 500)));
      }
    }
    if (state_ == State::Failed) SINTER_THROW(error_);
  }

  bool is_completed() override {
    if (state_ == State::Pending) poll();
    return state_ != State::Pending;
  }

 private:
  enum class State { Pending, Done, Failed };

  // One MPI_Testall; on completion runs finish_. Never throws: a failure is kept for wait().
  bool poll() {
    if (group_->torn_down()) {
      fail(sinter::detail::str_cat("rank ", group_->rank(), ": ", what_,
                                   ": MPI was finalized before the collective completed"));
      return true;
    }
    int done = 0;
    int rc = MPI_SUCCESS;
    {
      std::lock_guard<std::mutex> lock(g_mpi_mutex);
      rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                       MPI_STATUSES_IGNORE);
    }
    try {
      if (rc != MPI_SUCCESS) mpi_fail(group_->rank(), what_, rc);
      if (!done) return false;
      if (finish_) finish_();
      state_ = State::Done;
      buffers_.clear();
    } catch (const std::exception& e) {
      fail(e.what());
    }
    return true;
  }

  void fail(const std::string& why) {
    error_ = why;
    group_->mark_broken(why);
    state_ = State::Failed;
  }

  std::shared_ptr<MpiGroup> group_;
  std::string what_;
  std::vector<MPI_Request> requests_;
  std::vector<Tensor> buffers_;
  std::function<void()> finish_;
  Clock::time_point start_;
  State state_ = State::Pending;
  std::string error_;
};

// A Work with nothing in flight (empty tensors): complete at once.
class DoneWork final : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};

void MpiGroup::ensure_usable(const char* what) {
  SINTER_CHECK(!torn_down_, what, ": rank ", rank_, ": MPI has been finalized");
  std::lock_guard<std::mutex> lock(state_mutex_);
  SINTER_CHECK(broken_.empty(), what, ": rank ", rank_,
               ": the process group failed earlier and cannot be used any more: ", broken_);
}

void MpiGroup::reap_orphans() {
  std::lock_guard<std::mutex> state(state_mutex_);
  std::lock_guard<std::mutex> lock(g_mpi_mutex);
  std::erase_if(orphans_, [](Orphan& o) {
    int done = 0;
    const int rc = MPI_Testall(static_cast<int>(o.requests.size()), o.requests.data(), &done,
                               MPI_STATUSES_IGNORE);
    return rc != MPI_SUCCESS || done;
  });
}

void MpiGroup::check_same(const char* what, int64_t kind, int64_t extra, const Tensor& t) {
  if (!options_.check_shapes) return;
  const std::vector<int64_t> mine = call_signature(kind, extra, t);
  Tensor buf = empty({2 * kCheckLen}, {.dtype = DType::i64});
  int64_t* p = buf.data<int64_t>();
  for (int i = 0; i < kCheckLen; ++i) {
    p[i] = mine[i];
    p[kCheckLen + i] = -mine[i];
  }
  MPI_Request req;
  {
    std::lock_guard<std::mutex> lock(g_mpi_mutex);
    SINTER_MPI_CALL(
        rank_, std::string(what) + " (shape check)",
        MPI_Iallreduce(MPI_IN_PLACE, p, 2 * kCheckLen, MPI_INT64_T, MPI_MAX, comm_, &req));
  }
  // Named like the collective itself: a peer that never arrives times out here.
  MpiWork(shared_from_this(), sinter::detail::str_cat(what, " of shape ", detail::shape_text(t)),
          {req}, {buf}, nullptr)
      .wait();
  std::vector<int64_t> hi(kCheckLen), lo(kCheckLen);
  for (int i = 0; i < kCheckLen; ++i) {
    hi[i] = p[i];
    lo[i] = -p[kCheckLen + i];
  }
  if (hi == lo) return;
  SINTER_THROW(what, ": rank ", rank_, " has ", describe_signature(mine), ", but another rank has ",
               describe_signature(mine == hi ? lo : hi),
               "; every rank must make the same collectives in the same order, with tensors of the "
               "same shape and dtype");
}

detail::NcclBackend& MpiGroup::nccl() {
  std::lock_guard<std::mutex> lock(nccl_mutex_);
  if (!nccl_) {
    detail::NcclSetup setup;
    setup.rank = rank_;
    setup.size = size_;
    setup.device = cuda_device();
    setup.timeout = options_.timeout;
    setup.broadcast_from_rank0 = [this](void* data, size_t nbytes) {
      std::lock_guard<std::mutex> lock(g_mpi_mutex);
      SINTER_MPI_CALL(rank_, "broadcast of the NCCL unique id",
                      MPI_Bcast(data, static_cast<int>(nbytes), MPI_BYTE, 0, comm_));
    };
    setup.all_gather = [this](const void* mine, void* all, size_t nbytes) {
      std::lock_guard<std::mutex> lock(g_mpi_mutex);
      SINTER_MPI_CALL(rank_, "all_gather of the ranks' GPU ids",
                      MPI_Allgather(mine, static_cast<int>(nbytes), MPI_BYTE, all,
                                    static_cast<int>(nbytes), MPI_BYTE, comm_));
    };
    nccl_ = detail::make_nccl_backend(setup);
  }
  return *nccl_;
}

MPI_Datatype mpi_type(DType dtype) {
  // Bools are 0/1 bytes: Sum and Max both become Max (or).
  const std::pair<DType, MPI_Datatype> types[] = {
      {DType::f32, MPI_FLOAT},   {DType::f64, MPI_DOUBLE}, {DType::i64, MPI_INT64_T},
      {DType::i32, MPI_INT32_T}, {DType::u8, MPI_UINT8_T}, {DType::b8, MPI_UINT8_T}};
  for (const auto& [dt, type] : types) {
    if (dt == dtype) return type;
  }
  SINTER_THROW("all_reduce: dtype ", dtype, " has no MPI type");
}

// Divides the summed `buf` (contiguous f32 or f64) by the number of ranks.
void divide_in_place(Tensor& buf, int size) {
  const int64_t n = buf.numel();
  if (buf.dtype() == DType::f32) {
    float* p = buf.data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<float>(size);
  } else {
    double* p = buf.data<double>();
    for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<double>(size);
  }
}

std::shared_ptr<Work> MpiGroup::all_reduce_async(Tensor& tensor, ReduceOp op) {
  SINTER_CHECK(tensor.defined(), "all_reduce: rank ", rank_, ": undefined tensor");
  ensure_usable("all_reduce");
  check_same("all_reduce", kAllReduce, static_cast<int64_t>(op), tensor);
  const DType dtype = tensor.dtype();
  SINTER_CHECK(op != ReduceOp::Average || is_floating(dtype), "all_reduce: rank ", rank_,
               ": ReduceOp::Average needs a floating dtype, got ", dtype,
               " (reduce with Sum and divide)");
  if (tensor.is_cuda()) return nccl().all_reduce(tensor, op);
  reap_orphans();
  if (tensor.numel() == 0) return std::make_shared<DoneWork>();

  // bf16 and f16 have no MPI type: they are reduced in an f32 copy and rounded once on the way
  // back (as NCCL does). A non-contiguous tensor is reduced in a contiguous copy. Either copy is
  // written back into `tensor` when the Work completes.
  const bool half = dtype == DType::bf16 || dtype == DType::f16;
  Tensor buf = half ? tensor.to(DType::f32).contiguous()
                    : (tensor.is_contiguous() ? tensor : tensor.contiguous());
  const bool copy_back = !buf.is_same(tensor);
  const MPI_Datatype type = mpi_type(buf.dtype());
  const MPI_Op mpi_op = (op == ReduceOp::Max || dtype == DType::b8) ? MPI_MAX : MPI_SUM;
  const std::string what =
      sinter::detail::str_cat("all_reduce of shape ", detail::shape_text(tensor));
  std::vector<MPI_Request> requests;
  {
    std::lock_guard<std::mutex> lock(g_mpi_mutex);
    char* base = static_cast<char*>(buf.data_ptr());
    const int64_t n = buf.numel(), esize = static_cast<int64_t>(element_size(buf.dtype()));
    for (int64_t off = 0; off < n; off += kMaxCount) {
      MPI_Request r;
      SINTER_MPI_CALL(
          rank_, what,
          MPI_Iallreduce(MPI_IN_PLACE, base + off * esize,
                         static_cast<int>(std::min(kMaxCount, n - off)), type, mpi_op, comm_, &r));
      requests.push_back(r);
    }
  }
  if (!copy_back) tensor.bump_version();
  std::function<void()> finish;
  if (op == ReduceOp::Average || copy_back) {
    finish = [tensor, buf, op, copy_back, size = size_]() mutable {
      if (op == ReduceOp::Average) divide_in_place(buf, size);
      if (copy_back) {
        NoGradGuard no_grad;
        tensor.copy_(buf);
      }
    };
  }
  return std::make_shared<MpiWork>(shared_from_this(), what, std::move(requests),
                                   std::vector<Tensor>{buf, tensor}, std::move(finish));
}

std::shared_ptr<Work> MpiGroup::broadcast_async(Tensor& tensor, int root) {
  SINTER_CHECK(tensor.defined(), "broadcast: rank ", rank_, ": undefined tensor");
  SINTER_CHECK(root >= 0 && root < size_, "broadcast: root ", root,
               " is not a rank of this group of size ", size_);
  ensure_usable("broadcast");
  check_same("broadcast", kBroadcast, root, tensor);
  if (tensor.is_cuda()) return nccl().broadcast(tensor, root);
  reap_orphans();
  if (tensor.numel() == 0) return std::make_shared<DoneWork>();

  // Bytes, so every dtype goes; a non-contiguous tensor travels in a contiguous copy.
  Tensor buf = tensor.is_contiguous() ? tensor : tensor.contiguous();
  const bool copy_back = !buf.is_same(tensor) && rank_ != root;
  const std::string what =
      sinter::detail::str_cat("broadcast of shape ", detail::shape_text(tensor));
  std::vector<MPI_Request> requests;
  {
    std::lock_guard<std::mutex> lock(g_mpi_mutex);
    char* base = static_cast<char*>(buf.data_ptr());
    const int64_t n = buf.numel() * static_cast<int64_t>(element_size(buf.dtype()));
    for (int64_t off = 0; off < n; off += kMaxCount) {
      MPI_Request r;
      SINTER_MPI_CALL(rank_, what,
                      MPI_Ibcast(base + off, static_cast<int>(std::min(kMaxCount, n - off)),
                                 MPI_BYTE, root, comm_, &r));
      requests.push_back(r);
    }
  }
  if (rank_ != root && !copy_back) tensor.bump_version();
  std::function<void()> finish;
  if (copy_back) {
    finish = [tensor, buf]() mutable {
      NoGradGuard no_grad;
      tensor.copy_(buf);
    };
  }
  return std::make_shared<MpiWork>(shared_from_this(), what, std::move(requests),
                                   std::vector<Tensor>{buf, tensor}, std::move(finish));
}

Tensor MpiGroup::all_gather(const Tensor& tensor) {
  SINTER_CHECK(tensor.defined(), "all_gather: rank ", rank_, ": undefined tensor");
  ensure_usable("all_gather");
  check_same("all_gather", kAllGather, 0, tensor);
  Shape out_shape{size_};
  out_shape.insert(out_shape.end(), tensor.shape().begin(), tensor.shape().end());
  Tensor out = empty(out_shape, {.dtype = tensor.dtype(), .device = tensor.device()});
  if (tensor.is_cuda()) {
    nccl().all_gather(tensor, out)->wait();
    return out;
  }
  reap_orphans();
  if (tensor.numel() == 0) return out;
  Tensor src = tensor.is_contiguous() ? tensor : tensor.contiguous();
  const int64_t nbytes = src.numel() * static_cast<int64_t>(element_size(src.dtype()));
  SINTER_CHECK(nbytes <= INT_MAX, "all_gather: rank ", rank_, ": ", nbytes,
               " bytes per rank is more than one MPI call can carry (", INT_MAX, ")");
  const std::string what =
      sinter::detail::str_cat("all_gather of shape ", detail::shape_text(tensor));
  MPI_Request r;
  {
    std::lock_guard<std::mutex> lock(g_mpi_mutex);
    SINTER_MPI_CALL(rank_, what,
                    MPI_Iallgather(src.data_ptr(), static_cast<int>(nbytes), MPI_BYTE,
                                   out.data_ptr(), static_cast<int>(nbytes), MPI_BYTE, comm_, &r));
  }
  MpiWork(shared_from_this(), what, {r}, {src, out}, nullptr).wait();
  return out;
}

std::shared_ptr<Work> MpiGroup::reduce_scatter_async(Tensor& output, const Tensor& input,
                                                     ReduceOp op) {
  check_scatter_gather("reduce_scatter", output, input, /*scatter=*/true);
  ensure_usable("reduce_scatter");
  const DType dtype = input.dtype();
  SINTER_CHECK(op != ReduceOp::Average || is_floating(dtype), "reduce_scatter: rank ", rank_,
               ": ReduceOp::Average needs a floating dtype, got ", dtype,
               " (reduce with Sum and divide)");
  if (input.is_cuda()) {
    SINTER_CHECK(input.is_contiguous() && output.is_contiguous(), "reduce_scatter: rank ", rank_,
                 ": CUDA tensors must be contiguous (input ", detail::shape_text(input),
                 ", output ", detail::shape_text(output), ")");
  }
  check_same("reduce_scatter", kReduceScatter, static_cast<int64_t>(op), input);
  if (input.is_cuda()) return nccl().reduce_scatter(output, input, op);
  reap_orphans();
  const int64_t n = output.numel();
  if (n == 0) return std::make_shared<DoneWork>();
  SINTER_CHECK(n <= INT_MAX, "reduce_scatter: rank ", rank_, ": ", n,
               " elements per rank is more than one MPI call can carry (", INT_MAX, ")");

  // As in all_reduce: bf16 and f16 go through f32 copies, a non-contiguous output through a
  // contiguous one, written back when the Work completes.
  const bool half = dtype == DType::bf16 || dtype == DType::f16;
  Tensor in = half ? input.to(DType::f32).contiguous() : input.contiguous();
  Tensor out = (half || !output.is_contiguous()) ? empty({n}, {.dtype = in.dtype()}) : output;
  const bool copy_back = !out.is_same(output);
  const MPI_Datatype type = mpi_type(in.dtype());
  const MPI_Op mpi_op = (op == ReduceOp::Max || dtype == DType::b8) ? MPI_MAX : MPI_SUM;
  const std::string what =
      sinter::detail::str_cat("reduce_scatter of shape ", detail::shape_text(input));
  MPI_Request r;
  {
    std::lock_guard<std::mutex> lock(g_mpi_mutex);
    SINTER_MPI_CALL(rank_, what,
                    MPI_Ireduce_scatter_block(in.data_ptr(), out.data_ptr(), static_cast<int>(n),
                                              type, mpi_op, comm_, &r));
  }
  if (!copy_back) output.bump_version();
  std::function<void()> finish;
  if (op == ReduceOp::Average || copy_back) {
    finish = [output, out, op, copy_back, size = size_]() mutable {
      if (op == ReduceOp::Average) divide_in_place(out, size);
      if (copy_back) {
        NoGradGuard no_grad;
        output.copy_(out.view(output.shape()));
      }
    };
  }
  return std::make_shared<MpiWork>(shared_from_this(), what, std::vector<MPI_Request>{r},
                                   std::vector<Tensor>{in, out, output}, std::move(finish));
}

std::shared_ptr<Work> MpiGroup::all_gather_into_async(Tensor& output, const Tensor& input) {
  check_scatter_gather("all_gather_into", output, input, /*scatter=*/false);
  ensure_usable("all_gather_into");
  if (input.is_cuda()) {
    SINTER_CHECK(input.is_contiguous() && output.is_contiguous(), "all_gather_into: rank ", rank_,
                 ": CUDA tensors must be contiguous (input ", detail::shape_text(input),
                 ", output ", detail::shape_text(output), ")");
  }
  check_same("all_gather_into", kAllGatherInto, 0, input);
  if (input.is_cuda()) return nccl().all_gather(input, output);
  reap_orphans();
  if (input.numel() == 0) return std::make_shared<DoneWork>();
  const int64_t nbytes = input.numel() * static_cast<int64_t>(element_size(input.dtype()));
  SINTER_CHECK(nbytes <= INT_MAX, "all_gather_into: rank ", rank_, ": ", nbytes,
               " bytes per rank is more than one MPI call can carry (", INT_MAX, ")");
  Tensor out = output.is_contiguous() ? output : empty({output.numel()}, {.dtype = output.dtype()});
  const bool copy_back = !out.is_same(output);
  char* mine = static_cast<char*>(out.data_ptr()) + rank_ * nbytes;
  // In place: the input is this rank's part of the output already (MPI_IN_PLACE).
  const bool in_place = !copy_back && input.is_contiguous() && input.data_ptr() == mine;
  Tensor in = in_place || input.is_contiguous() ? input : input.contiguous();
  const std::string what =
      sinter::detail::str_cat("all_gather_into of shape ", detail::shape_text(input));
  MPI_Request r;
  {
    std::lock_guard<std::mutex> lock(g_mpi_mutex);
    SINTER_MPI_CALL(
        rank_, what,
        MPI_Iallgather(in_place ? MPI_IN_PLACE : in.data_ptr(), static_cast<int>(nbytes), MPI_BYTE,
                       out.data_ptr(), static_cast<int>(nbytes), MPI_BYTE, comm_, &r));
  }
  if (!copy_back) output.bump_version();
  std::function<void()> finish;
  if (copy_back) {
    finish = [output, out]() mutable {
      NoGradGuard no_grad;
      output.copy_(out.view(output.shape()));
    };
  }
  return std::make_shared<MpiWork>(shared_from_this(), what, std::vector<MPI_Request>{r},
                                   std::vector<Tensor>{in, out, output}, std::move(finish));
}

void MpiGroup::barrier() {
  ensure_usable("barrier");
  reap_orphans();
  MPI_Request r;
  {
    std::lock_guard<std::mutex> lock(g_mpi_mutex);
    SINTER_MPI_CALL(rank_, "barrier", MPI_Ibarrier(comm_, &r));
  }
  MpiWork(shared_from_this(), "barrier", {r}, {}, nullptr).wait();
}

bool MpiGroup::teardown(std::chrono::milliseconds drain) {
  if (torn_down_) return true;
  int finalized = 0;
  MPI_Finalized(&finalized);
  bool drained = true;
  if (!finalized) {
    const auto deadline = Clock::now() + drain;
    for (;;) {
      reap_orphans();
      {
        std::lock_guard<std::mutex> lock(state_mutex_);
        drained = orphans_.empty();
      }
      if (drained || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  nccl_.reset();
  if (!finalized && drained) {
    std::lock_guard<std::mutex> lock(g_mpi_mutex);
    MPI_Comm_free(&comm_);
  }
  if (!drained) {
    // MPI may still write into these buffers: they are kept (leaked) rather than freed under it.
    new std::vector<Orphan>(std::move(orphans_));
  }
  torn_down_ = true;
  return drained;
}

Runtime::~Runtime() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  bool clean = true;
  for (auto& weak : groups) {
    if (auto group = weak.lock()) clean = group->teardown(std::chrono::seconds(10)) && clean;
  }
  if (!we_initialized) return;
  if (!clean) {
    std::fprintf(stderr,
                 "sinter::dist: a collective never completed; aborting the MPI job instead of "
                 "hanging in MPI_Finalize\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

// A group of our own over `comm`, errors returned as codes, known to the runtime's teardown.
// Called with g_mpi_mutex held. The communicator is freed if the group cannot be made.
std::shared_ptr<MpiGroup> adopt_communicator(MPI_Comm comm, const ProcessGroupOptions& options,
                                             int device_local_rank = -1) {
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  std::shared_ptr<MpiGroup> group;
  try {
    group = std::make_shared<MpiGroup>(comm, options, device_local_rank);
  } catch (...) {
    MPI_Comm_free(&comm);
    throw;
  }
  Runtime& rt = runtime();
  std::erase_if(rt.groups, [](const std::weak_ptr<MpiGroup>& g) { return g.expired(); });
  rt.groups.push_back(group);
  return group;
}

std::shared_ptr<ProcessGroup> MpiGroup::split(int color, int key) {
  SINTER_CHECK(color >= 0, "ProcessGroup::split: rank ", rank_, " passed color ", color,
               "; colors are >= 0");
  ensure_usable("split");
  std::lock_guard<std::mutex> lock(g_mpi_mutex);
  MPI_Comm comm;
  SINTER_MPI_CALL(rank_, "MPI_Comm_split", MPI_Comm_split(comm_, color, key, &comm));
  return adopt_communicator(comm, options_, device_local_rank_);
}

}  // namespace

std::shared_ptr<ProcessGroup> ProcessGroup::init(const ProcessGroupOptions& options) {
  SINTER_CHECK(options.timeout.count() > 0,
               "ProcessGroup::init: the timeout must be positive, got ", options.timeout.count(),
               " ms");
  SINTER_CHECK(options.device >= -1, "ProcessGroup::init: device ", options.device,
               " is not a device index (or -1 to choose automatically)");
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(g_mpi_mutex);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  SINTER_CHECK(!finalized, "ProcessGroup::init: MPI has already been finalized");
  if (!initialized) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    SINTER_CHECK(rc == MPI_SUCCESS, "ProcessGroup::init: MPI_Init_thread failed (code ", rc, ")");
    rt.we_initialized = true;
  }
  // A communicator of our own, so that the user's MPI traffic never matches ours, and errors that
  // come back as codes (turned into sinter::Error) instead of aborting the job.
  MPI_Comm comm;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  SINTER_CHECK(rc == MPI_SUCCESS, "ProcessGroup::init: MPI_Comm_dup failed (code ", rc, ")");
  return adopt_communicator(comm, options);
}

}  // namespace sinter::dist

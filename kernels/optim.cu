// CUDA fused optimizer steps (src/kern/optim.h): one launch updates up to kMaxTensors
// tensors, whose pointers travel in the kernel parameters; each block takes kChunk elements of one
// tensor, with 16-byte vector accesses when all of that tensor's pointers allow them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "cuda_check.cuh"
#include "cuda_util.cuh"
#include "kern/optim.h"
#include "kern/scalar_ops.h"

namespace sinter::cudak {
namespace {

constexpr int kThreads = 256;
// Elements per block: a multiple of every vector width (4 f32, 2 f64, 8 bf16/f16), so every chunk
// of an aligned tensor starts aligned.
constexpr int64_t kChunk = 4096;
// Tensors per launch. A Launch<AdamTensor> then takes about 3.3 KB, inside the 4 KB of kernel
// parameters that every CUDA version allows.
constexpr int kMaxTensors = 48;
constexpr int64_t kMaxGrid = 2147483647;  // gridDim.x

// The tensors of one launch. Block b works on tensor k with block_start[k] <= b <
// block_start[k + 1], elements [(b - block_start[k]) * kChunk, ... + kChunk) of it.
template <class Meta>
struct Launch {
  Meta tensors[kMaxTensors];
  int32_t block_start[kMaxTensors + 1];
  bool aligned[kMaxTensors];  // every pointer of the tensor is 16-byte aligned
  int count;
};

static_assert(sizeof(Launch<AdamTensor>) + sizeof(AdamScalars<double>) < 4000,
              "one launch's kernel parameters must fit in 4 KB");
static_assert(sizeof(Launch<RuleTensor>) + sizeof(RmspropRule::Scalars<double>) < 4000 &&
                  sizeof(Launch<RuleTensor>) + sizeof(AdagradRule::Scalars<double>) < 4000,
              "one launch's kernel parameters must fit in 4 KB");

template <class T, int N>
__device__ __forceinline__ Vec<T, N> load(const void* p, int64_t i) {
  return *reinterpret_cast<const Vec<T, N>*>(static_cast<const T*>(p) + i);
}

template <class T, int N>
__device__ __forceinline__ void store(void* p, int64_t i, const Vec<T, N>& x) {
  *reinterpret_cast<Vec<T, N>*>(static_cast<T*>(p) + i) = x;
}

// The tensor of this block (binary search over block_start) and its element range [begin, end).
template <class Meta>
__device__ __forceinline__ int find_tensor(const Launch<Meta>& l, int64_t& begin, int64_t& end) {
  const int32_t b = static_cast<int32_t>(blockIdx.x);
  int lo = 0, hi = l.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (l.block_start[mid] <= b) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  begin = static_cast<int64_t>(b - l.block_start[lo]) * kChunk;
  end = begin + kChunk < l.tensors[lo].numel ? begin + kChunk : l.tensors[lo].numel;
  return lo;
}

// Calls op.template apply<W>(i) for the vectors of [begin, end) when aligned, then
// op.template apply<1>(i) for the elements left (all of them when not aligned).
template <int W, class Op>
__device__ __forceinline__ void for_range(bool aligned, int64_t begin, int64_t end, const Op& op) {
  if (aligned) {
    const int64_t nvec = (end - begin) / W;
    for (int64_t v = threadIdx.x; v < nvec; v += blockDim.x) op.template apply<W>(begin + v * W);
    begin += nvec * W;
  }
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) op.template apply<1>(i);
}

template <class T>
struct SgdOp {
  using C = Acc<T>;
  SgdScalars<C> s;
  SgdTensor t;

  template <int N>
  __device__ __forceinline__ void apply(int64_t i) const {
    Vec<T, N> p = load<T, N>(t.param, i);
    const Vec<T, N> g = load<T, N>(t.grad, i);
    const SgdScalars<C> sc = s.with_device_lr();  // Note [capturable adam]
    const bool read_buf = s.use_momentum && !t.init_buffer;
    Vec<T, N> b = read_buf ? load<T, N>(t.momentum_buffer, i) : Vec<T, N>{};
#pragma unroll
    for (int j = 0; j < N; ++j) {
      C pc = to_acc(p.v[j]);
      C bc = read_buf ? to_acc(b.v[j]) : C(0);
      sgd_element(sc, t.init_buffer, pc, to_acc(g.v[j]), bc);
      p.v[j] = from_acc<T>(pc);
      b.v[j] = from_acc<T>(bc);
    }
    store<T, N>(t.param, i, p);
    if (s.use_momentum) store<T, N>(t.momentum_buffer, i, b);
  }
};

template <class T>
struct AdamOp {
  using C = Acc<T>;
  AdamScalars<C> s;
  AdamTensor t;

  template <int N>
  __device__ __forceinline__ void apply(int64_t i) const {
    C neg_step_size = static_cast<C>(-t.step_size);
    C bc2_sqrt = static_cast<C>(t.bias_correction2_sqrt);
    AdamScalars<C> sc = s;
    if (t.step_device) {  // Note [capturable adam]
      const auto d =
          adam_device_scalars<C>(t.step_device, s.lr_device, s.beta1, s.beta2, s.weight_decay);
      neg_step_size = d.neg_step_size;
      bc2_sqrt = d.bias_correction2_sqrt;
      sc.decay_factor = d.decay_factor;
    }
    Vec<T, N> p = load<T, N>(t.param, i);
    const Vec<T, N> g = load<T, N>(t.grad, i);
    Vec<T, N> m = load<T, N>(t.exp_avg, i);
    Vec<T, N> v = load<T, N>(t.exp_avg_sq, i);
    Vec<T, N> vmax = s.amsgrad ? load<T, N>(t.max_exp_avg_sq, i) : Vec<T, N>{};
#pragma unroll
    for (int j = 0; j < N; ++j) {
      C pc = to_acc(p.v[j]), mc = to_acc(m.v[j]), vc = to_acc(v.v[j]);
      C vmaxc = s.amsgrad ? to_acc(vmax.v[j]) : C(0);
      adam_element(sc, neg_step_size, bc2_sqrt, pc, to_acc(g.v[j]), mc, vc, vmaxc);
      p.v[j] = from_acc<T>(pc);
      m.v[j] = from_acc<T>(mc);
      v.v[j] = from_acc<T>(vc);
      vmax.v[j] = from_acc<T>(vmaxc);
    }
    store<T, N>(t.param, i, p);
    store<T, N>(t.exp_avg, i, m);
    store<T, N>(t.exp_avg_sq, i, v);
    if (s.amsgrad) store<T, N>(t.max_exp_avg_sq, i, vmax);
  }
};

template <class T>
struct UnscaleOp {
  using C = Acc<T>;
  UnscaleScalars<C> s;
  UnscaleTensor t;

  template <int N>
  __device__ __forceinline__ void apply(int64_t i) const {
    const C inv = static_cast<C>(*s.inv_scale);
    Vec<T, N> g = load<T, N>(t.grad, i);
    bool finite = true;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      C gc = to_acc(g.v[j]);
      finite &= unscale_element(gc, inv);
      g.v[j] = from_acc<T>(gc);
    }
    store<T, N>(t.grad, i, g);
    if (!finite) *s.found_inf = 1.0f;  // every writer writes the same value
  }
};

// One element range of a rule's optimizer (Note [optimizer rules]).
template <class T, class Rule>
struct RuleOp {
  using C = Acc<T>;
  typename Rule::template Scalars<C> s;
  RuleTensor t;

  template <int N>
  __device__ __forceinline__ void apply(int64_t i) const {
    const C lr = rule_lr<Rule, C>(s, t);
    Vec<T, N> p = load<T, N>(t.param, i);
    const Vec<T, N> g = load<T, N>(t.grad, i);
    Vec<T, N> b[Rule::kBuffers];
#pragma unroll
    for (int j = 0; j < Rule::kBuffers; ++j) {
      b[j] = t.buffers[j] ? load<T, N>(t.buffers[j], i) : Vec<T, N>{};
    }
#pragma unroll
    for (int e = 0; e < N; ++e) {
      C pc = to_acc(p.v[e]);
      C bc[kMaxRuleBuffers] = {};
#pragma unroll
      for (int j = 0; j < Rule::kBuffers; ++j) bc[j] = t.buffers[j] ? to_acc(b[j].v[e]) : C(0);
      Rule::element(s, lr, pc, to_acc(g.v[e]), bc);
      p.v[e] = from_acc<T>(pc);
#pragma unroll
      for (int j = 0; j < Rule::kBuffers; ++j) b[j].v[e] = from_acc<T>(bc[j]);
    }
    store<T, N>(t.param, i, p);
#pragma unroll
    for (int j = 0; j < Rule::kBuffers; ++j) {
      if (t.buffers[j]) store<T, N>(t.buffers[j], i, b[j]);
    }
  }
};

// __grid_constant__: the tensor list is read in place from the parameter space, never copied to
// local memory, although blocks index it at run time.
template <class T>
__global__ void __launch_bounds__(kThreads)
    sgd_kernel(const __grid_constant__ Launch<SgdTensor> l, const SgdScalars<Acc<T>> s) {
  int64_t begin = 0, end = 0;
  const int k = find_tensor(l, begin, end);
  for_range<kVecWidth<T>>(l.aligned[k], begin, end, SgdOp<T>{s, l.tensors[k]});
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    adam_kernel(const __grid_constant__ Launch<AdamTensor> l, const AdamScalars<Acc<T>> s) {
  int64_t begin = 0, end = 0;
  const int k = find_tensor(l, begin, end);
  for_range<kVecWidth<T>>(l.aligned[k], begin, end, AdamOp<T>{s, l.tensors[k]});
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    unscale_kernel(const __grid_constant__ Launch<UnscaleTensor> l,
                   const UnscaleScalars<Acc<T>> s) {
  int64_t begin = 0, end = 0;
  const int k = find_tensor(l, begin, end);
  for_range<kVecWidth<T>>(l.aligned[k], begin, end, UnscaleOp<T>{s, l.tensors[k]});
}

template <class T, class Rule>
__global__ void __launch_bounds__(kThreads)
    rule_kernel(const __grid_constant__ Launch<RuleTensor> l,
                const typename Rule::template Scalars<Acc<T>> s) {
  int64_t begin = 0, end = 0;
  const int k = find_tensor(l, begin, end);
  for_range<kVecWidth<T>>(l.aligned[k], begin, end, RuleOp<T, Rule>{s, l.tensors[k]});
}

bool all_aligned(const UnscaleTensor& t) { return aligned16(t.grad); }

bool all_aligned(const RuleTensor& t) {
  bool ok = aligned16(t.param) && aligned16(t.grad);
  for (void* b : t.buffers) ok = ok && (!b || aligned16(b));
  return ok;
}

bool all_aligned(const SgdTensor& t) {
  return aligned16(t.param) && aligned16(t.grad) &&
         (!t.momentum_buffer || aligned16(t.momentum_buffer));
}

bool all_aligned(const AdamTensor& t) {
  return aligned16(t.param) && aligned16(t.grad) && aligned16(t.exp_avg) &&
         aligned16(t.exp_avg_sq) && (!t.max_exp_avg_sq || aligned16(t.max_exp_avg_sq));
}

// Packs the non-empty tensors into Launch lists of at most kMaxTensors tensors and kMaxGrid blocks
// and calls launch(list, blocks) for each.
template <class Meta, class F>
void for_each_launch(const char* op, const Meta* tensors, int64_t count, F&& launch) {
  Launch<Meta> l{};
  int64_t blocks = 0;
  auto flush = [&] {
    if (l.count == 0) return;
    l.block_start[l.count] = static_cast<int32_t>(blocks);
    launch(l, blocks);
    l.count = 0;
    blocks = 0;
  };
  for (int64_t k = 0; k < count; ++k) {
    const Meta& t = tensors[k];
    if (t.numel == 0) continue;
    const int64_t need = (t.numel + kChunk - 1) / kChunk;
    SINTER_CHECK(need <= kMaxGrid, op, ": tensor ", k, " has ", t.numel,
                 " elements, more than one launch covers");
    if (l.count == kMaxTensors || blocks + need > kMaxGrid) flush();
    l.tensors[l.count] = t;
    l.aligned[l.count] = all_aligned(t);
    l.block_start[l.count] = static_cast<int32_t>(blocks);
    ++l.count;
    blocks += need;
  }
  flush();
}

}  // namespace

namespace {

// One call of sgd_step, adam_step or unscale_grads: `kernel<T>` over every launch of the list.
template <class Meta, class Hyper, template <class> class Scalars, class Kernel>
void step(const char* op, const Ctx& ctx, DType dtype, const Meta* tensors, int64_t count,
          const Hyper& h, Kernel kernel) {
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  visit_floating(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Scalars<Acc<T>> s(h);
    for_each_launch(op, tensors, count, [&](const Launch<Meta>& l, int64_t blocks) {
      kernel(tag, l, s, static_cast<unsigned>(blocks), stream);
      SINTER_LAUNCH_CHECK(op);
    });
  });
}

}  // namespace

// The entry points of the three list kernels: `step` with the op's kernel.
#define SINTER_LIST_STEP(name, Prefix, kernel_name)                                         \
  void name(const Ctx& ctx, DType dtype, const Prefix##Tensor* tensors, int64_t count,      \
            const Prefix##Hyper& h) {                                                       \
    step<Prefix##Tensor, Prefix##Hyper, Prefix##Scalars>(                                   \
        #name, ctx, dtype, tensors, count, h,                                               \
        [](auto tag, const auto& l, const auto& s, unsigned blocks, cudaStream_t stream) {  \
          kernel_name<typename decltype(tag)::type><<<blocks, kThreads, 0, stream>>>(l, s); \
        });                                                                                 \
  }
SINTER_LIST_STEP(sgd_step, Sgd, sgd_kernel)
SINTER_LIST_STEP(adam_step, Adam, adam_kernel)
SINTER_LIST_STEP(unscale_grads, Unscale, unscale_kernel)
#undef SINTER_LIST_STEP

namespace {

// One call of a rule's step (Note [optimizer rules]): rule_kernel<T, Rule> over every launch.
template <class Rule>
void rule_step(const char* op, const Ctx& ctx, DType dtype, const RuleTensor* tensors,
               int64_t count, const typename Rule::Hyper& h) {
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  visit_floating(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const typename Rule::template Scalars<Acc<T>> s(h);
    for_each_launch(op, tensors, count, [&](const Launch<RuleTensor>& l, int64_t blocks) {
      rule_kernel<T, Rule><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(l, s);
      SINTER_LAUNCH_CHECK(op);
    });
  });
}

}  // namespace

#define SINTER_DEFINE_RULE_STEP_(name, Rule)                                              \
  void name##_step(const Ctx& ctx, DType dtype, const RuleTensor* tensors, int64_t count, \
                   const Rule::Hyper& h) {                                                \
    rule_step<Rule>(#name "_step", ctx, dtype, tensors, count, h);                        \
  }
SINTER_OPTIM_RULES(SINTER_DEFINE_RULE_STEP_)
#undef SINTER_DEFINE_RULE_STEP_

}  // namespace sinter::cudak

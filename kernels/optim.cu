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
// Tensors per launch. A Launch<RuleTensor> (88 bytes a tensor) then takes about 3.7 KB, inside the
// 4 KB of kernel parameters that every CUDA version allows, with the rule's scalars.
constexpr int kMaxTensors = 40;
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

// Every rule's launch and scalars fit the 4 KB of kernel parameters.
#define SINTER_RULE_FITS_(name, Rule) \
  static_assert(sizeof(Launch<RuleTensor>) + sizeof(RuleCall<Rule, double>) < 4000, #name);
SINTER_OPTIM_RULES(SINTER_RULE_FITS_)
#undef SINTER_RULE_FITS_

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
  RuleCall<Rule, C> s;
  RuleTensor t;

  template <int N>
  __device__ __forceinline__ void apply(int64_t i) const {
    C st[kMaxRuleStep];
    rule_step_scalars<Rule, C>(s, t, st);
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
      Rule::element(s, st, t.fresh, pc, to_acc(g.v[e]), bc);
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
    unscale_kernel(const __grid_constant__ Launch<UnscaleTensor> l,
                   const UnscaleScalars<Acc<T>> s) {
  int64_t begin = 0, end = 0;
  const int k = find_tensor(l, begin, end);
  for_range<kVecWidth<T>>(l.aligned[k], begin, end, UnscaleOp<T>{s, l.tensors[k]});
}

template <class T, class Rule>
__global__ void __launch_bounds__(kThreads)
    rule_kernel(const __grid_constant__ Launch<RuleTensor> l, const RuleCall<Rule, Acc<T>> s) {
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

// One call of a list kernel: kernel(tag, launch, s, blocks, stream) for every launch of the list,
// with s = Scalars<Acc<T>>(h) in the compute type of the list's storage type T.
template <template <class> class Scalars, class Meta, class Hyper, class Kernel>
void launch_lists(const char* op, const Ctx& ctx, DType dtype, const Meta* tensors, int64_t count,
                  const Hyper& h, Kernel kernel) {
  DeviceGuard guard(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  visit_floating(dtype, op, [&](auto tag) {
    const Scalars<Acc<typename decltype(tag)::type>> s(h);
    for_each_launch(op, tensors, count, [&](const Launch<Meta>& l, int64_t blocks) {
      kernel(tag, l, s, static_cast<unsigned>(blocks), stream);
      SINTER_LAUNCH_CHECK(op);
    });
  });
}

}  // namespace

void unscale_grads(const Ctx& ctx, DType dtype, const UnscaleTensor* tensors, int64_t count,
                   const UnscaleHyper& h) {
  launch_lists<UnscaleScalars>(
      "unscale_grads", ctx, dtype, tensors, count, h,
      [](auto tag, const auto& l, const auto& s, unsigned blocks, cudaStream_t stream) {
        unscale_kernel<typename decltype(tag)::type><<<blocks, kThreads, 0, stream>>>(l, s);
      });
}

// The steps of the rules (Note [optimizer rules]): rule_kernel<T, Rule> over every launch.
#define SINTER_DEFINE_RULE_STEP_(name, Rule)                                                      \
  void name##_step(const Ctx& ctx, DType dtype, const RuleTensor* tensors, int64_t count,         \
                   const Rule::Hyper& h) {                                                        \
    launch_lists<RuleCallOf<Rule>::template type>(                                                \
        #name "_step", ctx, dtype, tensors, count, h,                                             \
        [](auto tag, const auto& l, const auto& s, unsigned blocks, cudaStream_t stream) {        \
          rule_kernel<typename decltype(tag)::type, Rule><<<blocks, kThreads, 0, stream>>>(l, s); \
        });                                                                                       \
  }
SINTER_OPTIM_RULES(SINTER_DEFINE_RULE_STEP_)
#undef SINTER_DEFINE_RULE_STEP_

}  // namespace sinter::cudak

// Note [onednn convolutions]
// In a build with oneDNN (SINTER_WITH_DNNL), the CPU convolutions in f32 and bf16 run in oneDNN's
// JIT kernels, the library PyTorch's CPU convolutions run in: direct convolutions over blocked
// layouts (channels in vector-wide blocks), where im2col + GEMM spends its time copying columns.
// bf16 runs on the CPU's bf16 dot products where they are the faster path, else on f32 kernels
// (Note [bf16 products]): the weights widened once a call, the images by the reorders into the
// primitive's layout (a bf16 NCHW tensor to f32 blocks in one pass, on CPUs with AVX-512, where
// oneDNN's reorders take bf16 in JIT code; widening each chunk first, as below AVX-512, took about
// 4% of resnet20's bf16 step), the f32 results rounded by the library. f32 sums either
// way, rounded once as the library's own kernel rounds. Each call reorders the plain NCHW tensors
// into the layouts the primitive asks for and the output back, as PyTorch does with NCHW tensors.
//
// Threads: oneDNN would split a call over OpenMP threads of its own, which spin for milliseconds
// after each call, on the cores the library's pool is about to use (steps about a fifth slower on
// the 2-core machine). So oneDNN runs single-threaded, on the library's pool: the batch is cut into
// chunks of images sized by the geometry alone (about kChunkMacs multiply-adds, never by the
// thread count), each chunk one primitive call on one thread. Where the batch allows, the chunks
// are equal and a multiple of four in number, so that 2 or 4 threads get the same work: 19
// chunks of 7 images (resnet20's batch of 128) kept one of 2 threads waiting for the other at
// the end of every convolution, a twentieth of its time. The weight gradient is summed in
// f32 over the chunks' gradients in chunk order, in at most kMaxPartials runs of consecutive
// chunks whose sums are then added in order. Since the cut and the primitives do not
// depend on the thread count, neither do the bits; the sum has a fixed order, so deterministic
// mode runs here too.
//
// The bf16 GEMMs and the larger f32 ones (src/cpu/gemm.cpp, Note [f32 gemm in onednn]) run here
// too: each block of Note [gemm blocks] is one oneDNN matmul, of the operands in place (f32, and
// bf16 on the CPU's bf16 dot products with f32 sums of the exact products) or of the GEMM's
// widened copies (bf16 elsewhere, and f16); alpha, beta, the epilogue and the rounding to bf16 or
// f16 stay the GEMM's own.
//
// Every call passes its own scratchpad (scratchpad_mode::user): oneDNN's default one is shared
// between primitives, and with it the chunked bf16 weight gradient came out wrong
// (OneDnnConv.SameBitsAtOneTwoAndThreeThreads caught it). Primitives whose only implementation is
// oneDNN's reference loops (a CPU without the ISA of its JIT kernels) are refused, so that the own
// kernels run instead.
//
// The library's own kernels (src/cpu/conv.cpp, the widening sgemm path) stay the reference: f64,
// the f16 convolutions and smaller f16 GEMMs, what oneDNN declines, a build without oneDNN and
// set_onednn_enabled(false) run there, and tests/test_onednn.cpp compares the two. Plans are built
// once per geometry (or GEMM shape and strides), chunk size, dtype and pass, and kept (at most
// kMaxPlans).
#include <dlfcn.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cpu/onednn.h"
#include "cpu/onednn_common.h"
#include "cpu/vec_rows.h"
#include "internal/cache_aligned.h"
#include "internal/parallel.h"
#include "sinter/core/error.h"
#include "sinter/core/parallel.h"
#include "sinter/core/storage.h"

namespace sinter {

namespace {

// SINTER_ONEDNN=0 turns the oneDNN path off at startup; set_onednn_enabled changes it.
bool wanted_from_environment() {
  const char* v = std::getenv("SINTER_ONEDNN");
  if (v == nullptr || *v == '\0') return true;
  const std::string s(v);
  SINTER_CHECK(s == "0" || s == "1", "set_onednn_enabled: SINTER_ONEDNN=", v,
               " is neither 0 nor 1");
  return s == "1";
}

std::atomic<bool>& wanted() {
  static std::atomic<bool> on{wanted_from_environment()};
  return on;
}

}  // namespace

void set_onednn_enabled(bool on) { wanted().store(on); }
bool onednn_enabled() { return wanted().load(); }
bool onednn_available() { return true; }

namespace cpu::onednn {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using DT = memory::data_type;

constexpr size_t kMaxPlans = 256;
// The most multiply-adds a chunk of images holds (one image where an image has more; Note
// [onednn convolutions]): a chunk is a fraction of a millisecond on one core, so the threads
// balance, and the batches of the reference workloads cut into tens of chunks.
constexpr int64_t kChunkMacs = int64_t{1} << 24;
// The most f32 weight gradients a backward pass keeps at once (Note [onednn convolutions]).
constexpr int64_t kMaxPartials = 16;

enum class Pass { forward, backward_input, backward_weight };

// One argument of a primitive: the plain tensor the caller holds, and the layout the primitive
// wants (the same desc where no reorder is needed).
struct Arg {
  int id = 0;  // DNNL_ARG_*
  memory::desc plain, inner;
  bool output = false;
};

struct Plan {
  dnnl::primitive prim;
  std::vector<Arg> args;
  // args[i]'s plain to inner (inner to plain for the output); none where the two are equal.
  std::vector<dnnl::reorder> reorders;
  // Each call's own (oneDNN's shared one is not safe across threads).
  memory::desc scratchpad;
  bool hold_signals = false;  // Note [onednn signals]
};

struct Shapes {
  memory::dims x, w, y, bias, strides, dilates, pad_l, pad_r;
};

Shapes shapes(const kern::Conv2dGeom& g) {
  Shapes s;
  s.x = {g.n, g.c_in, g.h, g.w};
  s.y = {g.n, g.c_out, g.h_out, g.w_out};
  if (g.groups > 1) {
    s.w = {g.groups, g.c_out / g.groups, g.c_in / g.groups, g.kh, g.kw};
  } else {
    s.w = {g.c_out, g.c_in, g.kh, g.kw};
  }
  s.bias = {g.c_out};
  s.strides = {g.stride_h, g.stride_w};
  s.dilates = {g.dil_h - 1, g.dil_w - 1};
  s.pad_l = {g.pad_h, g.pad_w};
  // The right padding that makes oneDNN's output size the geometry's (PyTorch's floor).
  s.pad_r = {(g.h_out - 1) * g.stride_h + (g.kh - 1) * g.dil_h + 1 - g.h - g.pad_h,
             (g.w_out - 1) * g.stride_w + (g.kw - 1) * g.dil_w + 1 - g.w - g.pad_w};
  return s;
}

memory::desc any(const memory::dims& d, DT t) { return memory::desc(d, t, Tag::any); }

// The primitive of `pass` in dtype t. The images it reads (x, or dy) come as plain tensors of
// dtype `in` (bf16 for t = f32 where a bf16 convolution runs on the f32 kernels: their reorder into
// the primitive's layout widens them, exactly, in the same pass).
Plan build(Pass pass, const kern::Conv2dGeom& g, DT t, bool has_bias, DT in) {
  const Shapes s = shapes(g);
  const Tag wtag = g.groups > 1 ? Tag::goihw : Tag::oihw;
  const memory::desc x_plain(s.x, t, Tag::nchw), y_plain(s.y, t, Tag::nchw), w_plain(s.w, t, wtag),
      b_plain(s.bias, t, Tag::x), x_in(s.x, in, Tag::nchw), y_in(s.y, in, Tag::nchw);
  const auto algo = dnnl::algorithm::convolution_direct;
  auto fwd_desc = has_bias ? dnnl::convolution_forward::desc(
                                 dnnl::prop_kind::forward_training, algo, any(s.x, t), any(s.w, t),
                                 b_plain, any(s.y, t), s.strides, s.dilates, s.pad_l, s.pad_r)
                           : dnnl::convolution_forward::desc(
                                 dnnl::prop_kind::forward_training, algo, any(s.x, t), any(s.w, t),
                                 any(s.y, t), s.strides, s.dilates, s.pad_l, s.pad_r);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // The forward pass's activation as a post-op (the epilogue of kern::Conv2dGeom::act).
  dnnl::primitive_attr fwd_attr;
  fwd_attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (pass == Pass::forward && g.act != kern::GemmAct::None) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0F,
                       g.act == kern::GemmAct::Relu   ? dnnl::algorithm::eltwise_relu
                       : g.act == kern::GemmAct::Gelu ? dnnl::algorithm::eltwise_gelu_erf
                                                      : dnnl::algorithm::eltwise_gelu_tanh,
                       0.0F, 0.0F);
    fwd_attr.set_post_ops(ops);
  }
  const dnnl::convolution_forward::primitive_desc fwd(fwd_desc, fwd_attr, engine());
  refuse_reference(fwd);
  Plan plan;
  plan.scratchpad = fwd.scratchpad_desc();
  switch (pass) {
    case Pass::forward:
      plan.prim = dnnl::convolution_forward(fwd);
      plan.hold_signals = holds_signals(fwd);
      plan.args = {{DNNL_ARG_SRC, x_in, fwd.src_desc()},
                   {DNNL_ARG_WEIGHTS, w_plain, fwd.weights_desc()},
                   {DNNL_ARG_DST, y_plain, fwd.dst_desc(), true}};
      if (has_bias) plan.args.push_back({DNNL_ARG_BIAS, b_plain, fwd.bias_desc()});
      break;
    case Pass::backward_input: {
      const dnnl::convolution_backward_data::desc d(algo, any(s.x, t), any(s.w, t), any(s.y, t),
                                                    s.strides, s.dilates, s.pad_l, s.pad_r);
      const dnnl::convolution_backward_data::primitive_desc pd(d, attr, engine(), fwd);
      refuse_reference(pd);
      plan.scratchpad = pd.scratchpad_desc();
      plan.prim = dnnl::convolution_backward_data(pd);
      plan.hold_signals = holds_signals(pd);
      plan.args = {{DNNL_ARG_DIFF_DST, y_in, pd.diff_dst_desc()},
                   {DNNL_ARG_WEIGHTS, w_plain, pd.weights_desc()},
                   {DNNL_ARG_DIFF_SRC, x_plain, pd.diff_src_desc(), true}};
      break;
    }
    case Pass::backward_weight: {
      // The weight gradient in f32: run() sums the chunks' partial gradients before rounding.
      const memory::desc w_f32(s.w, DT::f32, wtag);
      const dnnl::convolution_backward_weights::desc d(algo, any(s.x, t), any(s.w, DT::f32),
                                                       any(s.y, t), s.strides, s.dilates, s.pad_l,
                                                       s.pad_r);
      const dnnl::convolution_backward_weights::primitive_desc pd(d, attr, engine(), fwd);
      refuse_reference(pd);
      plan.scratchpad = pd.scratchpad_desc();
      plan.prim = dnnl::convolution_backward_weights(pd);
      plan.hold_signals = holds_signals(pd);
      plan.args = {{DNNL_ARG_SRC, x_in, pd.src_desc()},
                   {DNNL_ARG_DIFF_DST, y_in, pd.diff_dst_desc()},
                   {DNNL_ARG_DIFF_WEIGHTS, w_f32, pd.diff_weights_desc(), true}};
      break;
    }
  }
  for (const Arg& a : plan.args) {
    plan.reorders.emplace_back();
    if (a.inner == a.plain) continue;
    const dnnl::reorder::primitive_desc pd =
        a.output ? dnnl::reorder::primitive_desc(engine(), a.inner, engine(), a.plain, attr)
                 : dnnl::reorder::primitive_desc(engine(), a.plain, engine(), a.inner, attr);
    // Layout changes (and bf16 images widened on the way) need no scratchpad; one that did would
    // need its own too.
    if (pd.scratchpad_desc().get_size() != 0) {
      throw dnnl::error(dnnl_unimplemented, "a reorder with a scratchpad");
    }
    plan.reorders.back() = dnnl::reorder(pd);
  }
  return plan;
}

// The plans built so far, by key; a key whose build failed maps to an empty plan.
class Plans {
 public:
  // The plan under `key`, made by build() the first time (and kept, empty where build() threw a
  // dnnl::error: no implementation for this geometry or dtype, and the reference runs it).
  template <class Build>
  std::shared_ptr<const Plan> get(const std::vector<int64_t>& key, Build build) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = plans_.find(key);
      if (it != plans_.end()) return it->second;
    }
    std::shared_ptr<const Plan> plan;
    const OneOpenMPThread one;  // the primitive is built for the one thread it runs on
    try {
      if (OpenMP::runtime().usable) plan = std::make_shared<const Plan>(build());
    } catch (const dnnl::error&) {
      plan = nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (plans_.emplace(key, plan).second) {
      order_.push_back(key);
      if (order_.size() > kMaxPlans) {
        plans_.erase(order_.front());
        order_.pop_front();
      }
    }
    return plans_.at(key);
  }

 private:
  std::mutex mutex_;
  std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans_;
  std::list<std::vector<int64_t>> order_;
};

Plans& plans() {
  static Plans* p = new Plans();  // never destroyed: a late convolution may still look one up
  return *p;
}

// The images of a chunk, from the geometry alone: as many as kChunkMacs multiply-adds hold, cut
// evenly (onednn::even_chunk, Note [onednn convolutions]).
int64_t chunk_images(const kern::Conv2dGeom& g) {
  const int64_t macs =
      std::max<int64_t>(1, g.c_out * (g.c_in / g.groups) * g.kh * g.kw * g.h_out * g.w_out);
  return even_chunk(g.n, kChunkMacs / macs);
}

std::atomic<int64_t> g_calls{0}, g_held_calls{0};

// Runs one chunk's primitive on the tensors at `pointers` (in the order of plan.args). oneDNN's
// errors (out of memory, mostly) come out as sinter::Error.
void execute_unchecked(const Plan& plan, const std::vector<void*>& pointers);

void execute(const Plan& plan, const std::vector<void*>& pointers) {
  try {
    execute_unchecked(plan, pointers);
  } catch (const dnnl::error& e) {
    SINTER_THROW("oneDNN: ", e.what(), " (status ", static_cast<int>(e.status), ")");
  }
  g_calls.fetch_add(1, std::memory_order_relaxed);
}

void execute_unchecked(const Plan& plan, const std::vector<void*>& pointers) {
  const OneOpenMPThread one;
  thread_local std::unique_ptr<dnnl::stream> stream;
  if (!stream) stream = std::make_unique<dnnl::stream>(engine());
  std::unordered_map<int, memory> args;
  std::vector<std::pair<size_t, std::pair<memory, memory>>> copy_out;  // (arg, (inner, plain))
  // The reordered tensors and the scratchpad in one buffer of this thread's, kept for its next
  // call: the chunks of a pass need the same sizes, and fresh pages would be zeroed by the kernel
  // every time.
  constexpr size_t kAlign = 64;
  auto aligned = [](size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; };
  size_t need = aligned(plan.scratchpad.get_size());
  for (const Arg& a : plan.args) {
    if (!(a.inner == a.plain)) need += aligned(a.inner.get_size());
  }
  thread_local Storage buffer;
  if (buffer.nbytes() < need) {
    buffer = Storage();
    buffer = Storage::allocate(need, Device::cpu());
  }
  char* next = static_cast<char*>(buffer.data());
  auto carve = [&](size_t bytes) {
    char* p = next;
    next += aligned(bytes);
    return p;
  };
  for (size_t i = 0; i < plan.args.size(); ++i) {
    const Arg& a = plan.args[i];
    memory plain(a.plain, engine(), pointers[i]);
    if (a.inner == a.plain) {
      args.emplace(a.id, plain);
      continue;
    }
    memory inner(a.inner, engine(), carve(a.inner.get_size()));
    if (a.output) {
      copy_out.push_back({i, {inner, plain}});
    } else {
      plan.reorders[i].execute(*stream, plain, inner);
    }
    args.emplace(a.id, inner);
  }
  args.emplace(DNNL_ARG_SCRATCHPAD,
               memory(plan.scratchpad, engine(), carve(plan.scratchpad.get_size())));
  {
    const SignalsHeld held(plan.hold_signals);
    plan.prim.execute(*stream, args);
  }
  if (plan.hold_signals) g_held_calls.fetch_add(1, std::memory_order_relaxed);
  for (auto& [i, io] : copy_out) plan.reorders[i].execute(*stream, io.first, io.second);
  stream->wait();
}

std::vector<int64_t> plan_key(Pass pass, const kern::Conv2dGeom& g, DType dtype, bool has_bias,
                              bool widened) {
  std::vector<int64_t> key = {static_cast<int64_t>(pass), static_cast<int64_t>(dtype),
                              has_bias ? 1 : 0, widened ? 1 : 0,
                              pass == Pass::forward ? static_cast<int64_t>(g.act) : 0};
  const auto geometry = kern::geometry_key(g);
  key.insert(key.end(), geometry.begin(), geometry.end());
  return key;
}

// n bf16 values at p widened to f32 (Note [bf16 products]).
detail::AlignedVector<float> widened(const void* p, int64_t n) {
  detail::AlignedVector<float> out(static_cast<size_t>(n));
  vec::widen_bf16_row(static_cast<const BFloat16*>(p), n, out.data());
  return out;
}
void widen_into(const void* p, int64_t n, detail::AlignedVector<float>& out) {
  out.resize(static_cast<size_t>(n));
  vec::widen_bf16_row(static_cast<const BFloat16*>(p), n, out.data());
}
// Whether oneDNN's reorders widen bf16 in their JIT code: from AVX-512 (avx512_core) on; below it
// a bf16 reorder is a reference loop, and the chunks' images are widened by the library first.
bool reorders_widen() {
  static const bool jit = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto want = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    return (isa & want) == want;
  }();
  return jit;
}
// A thread's f32 chunks are kept for its next ones up to kKeepFloats (a larger one is freed at the
// end of the thread's piece of the call).
void trim(detail::AlignedVector<float>& v) {
  constexpr size_t kKeepFloats = size_t{1} << 20;
  if (v.capacity() > kKeepFloats) detail::AlignedVector<float>().swap(v);
}

// A convolution's chunks as run() cuts them (Note [onednn convolutions]): `per` images each, the
// last `last`; x_image and y_image are an image's bytes in the caller's dtype; `widen`: bf16 on
// the f32 kernels (Note [bf16 products]), the weight and bias widened once, the images by the
// primitive's reorders, or (`host_widen`, where those are not JIT code) into the thread's buffers.
struct Chunks {
  DType dtype;
  bool has_bias = false, widen = false, host_widen = false;
  int64_t per = 0, chunks = 0, last = 0, x_image = 0, y_image = 0, elem = 0, w_numel = 0;
  std::shared_ptr<const Plan> plan[2];
  const Plan& of(int64_t c) const { return *plan[c == chunks - 1 ? 1 : 0]; }
  int64_t images(int64_t c) const { return c == chunks - 1 ? last : per; }
};

void* at_bytes(void* p, int64_t bytes) { return static_cast<char*>(p) + bytes; }

// The forward ((x, w, y[, bias]), the images of x and y cut) or the input gradient ((dy, w, dx)),
// chunk by chunk over the pool; widened, the weight (and bias) once, each chunk's input by the
// primitive's reorder (build's `in`) or into the thread's buffer, and its output rounded from the
// thread's f32 buffer.
void run_images(const Chunks& k, Pass pass, const std::vector<void*>& pointers,
                int64_t w_channels) {
  const int64_t in_image = pass == Pass::forward ? k.x_image : k.y_image;
  const int64_t out_image = pass == Pass::forward ? k.y_image : k.x_image;
  detail::AlignedVector<float> w32, b32;
  if (k.widen) {
    w32 = widened(pointers[1], k.w_numel);
    if (k.has_bias) b32 = widened(pointers[3], w_channels);
  }
  detail::parallel_for(k.chunks, 1, [&](int64_t c0, int64_t c1) {
    thread_local detail::AlignedVector<float> in32, out32;
    for (int64_t c = c0; c < c1; ++c) {
      std::vector<void*> p = pointers;
      p[0] = at_bytes(pointers[0], c * k.per * in_image);
      p[2] = at_bytes(pointers[2], c * k.per * out_image);
      if (!k.widen) {
        execute(k.of(c), p);
        continue;
      }
      if (k.host_widen) {
        widen_into(p[0], k.images(c) * in_image / k.elem, in32);
        p[0] = in32.data();
      }
      out32.resize(static_cast<size_t>(k.images(c) * out_image / k.elem));
      void* const out = p[2];
      p[1] = w32.data();
      p[2] = out32.data();
      if (k.has_bias) p[3] = b32.data();
      execute(k.of(c), p);
      vec::narrow_bf16_row(out32.data(), k.images(c) * out_image / k.elem,
                           static_cast<BFloat16*>(out));
    }
    trim(in32);
    trim(out32);
  });
}

// The weight gradient ((x, dy, dw)): the chunks in at most kMaxPartials runs of consecutive chunks
// (from the geometry alone); each run sums its chunks' f32 gradients in order into its partial,
// and the partials are summed in order: the memory stays bounded however many chunks the batch
// makes. Widened, each chunk's x and dy by the primitive's reorders (build's `in`) or into the
// thread's buffers.
void run_weight_gradient(const Chunks& k, const std::vector<void*>& pointers) {
  const int64_t runs = std::min(k.chunks, kMaxPartials), w_numel = k.w_numel;
  Storage partial = Storage::allocate(
      static_cast<size_t>((runs + (k.chunks > runs ? runs : 0)) * w_numel) * sizeof(float),
      Device::cpu());
  float* part = static_cast<float*>(partial.data());
  float* scratch = part + runs * w_numel;  // a run's later chunks, one at a time
  detail::parallel_for(runs, 1, [&](int64_t r0, int64_t r1) {
    thread_local detail::AlignedVector<float> x32, dy32;
    for (int64_t r = r0; r < r1; ++r) {
      float* sum = part + r * w_numel;
      float* one = scratch + r * w_numel;
      for (int64_t c = k.chunks * r / runs; c < k.chunks * (r + 1) / runs; ++c) {
        const bool first = c == k.chunks * r / runs;
        void* x_chunk = at_bytes(pointers[0], c * k.per * k.x_image);
        void* dy_chunk = at_bytes(pointers[1], c * k.per * k.y_image);
        if (k.host_widen) {
          widen_into(x_chunk, k.images(c) * k.x_image / k.elem, x32);
          widen_into(dy_chunk, k.images(c) * k.y_image / k.elem, dy32);
          x_chunk = x32.data();
          dy_chunk = dy32.data();
        }
        execute(k.of(c), {x_chunk, dy_chunk, first ? sum : one});
        if (!first) {
          for (int64_t i = 0; i < w_numel; ++i) sum[i] += one[i];
        }
      }
    }
    trim(x32);
    trim(dy32);
  });
  detail::parallel_blocks(w_numel, runs, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float total = part[i];
      for (int64_t r = 1; r < runs; ++r) total += part[r * w_numel + i];
      if (k.dtype == DType::f32) {
        static_cast<float*>(pointers[2])[i] = total;
      } else {
        static_cast<BFloat16*>(pointers[2])[i] = BFloat16(total);
      }
    }
  });
}

// x, w, y in the pass's order (forward: x, w, y[, bias]; backward input: dy, w, dx; backward
// weight: x, dy, dw), as plain contiguous tensors of `dtype`.
bool run(Pass pass, const kern::Conv2dGeom& g, DType dtype, bool has_bias,
         const std::vector<void*>& pointers) {
  if (!onednn_enabled()) return false;
  if (dtype != DType::f32 && dtype != DType::bf16) return false;
  if (g.n <= 0 || g.c_in <= 0 || g.c_out <= 0 || g.h <= 0 || g.w <= 0 || g.h_out <= 0 ||
      g.w_out <= 0) {
    return false;
  }
  Chunks k;
  k.dtype = dtype;
  k.has_bias = has_bias;
  // bf16 runs as f32 on widened copies where its dot products are not the faster path (Note
  // [bf16 products]).
  k.widen = dtype == DType::bf16 && !bf16_dot_products();
  k.host_widen = k.widen && !reorders_widen();
  const bool bf16_in = k.widen && !k.host_widen;
  const DType kernel_dtype = k.widen ? DType::f32 : dtype;
  const DT t = kernel_dtype == DType::f32 ? DT::f32 : DT::bf16;
  k.per = chunk_images(g);
  k.chunks = (g.n + k.per - 1) / k.per;
  k.last = g.n - (k.chunks - 1) * k.per;
  for (int i = 0; i < 2; ++i) {
    kern::Conv2dGeom c = g;
    c.n = i == 0 ? k.per : k.last;
    k.plan[i] = plans().get(plan_key(pass, c, kernel_dtype, has_bias, bf16_in),
                            [&] { return build(pass, c, t, has_bias, bf16_in ? DT::bf16 : t); });
    if (!k.plan[i]) return false;
  }
  k.elem = static_cast<int64_t>(element_size(dtype));
  k.x_image = g.c_in * g.h * g.w * k.elem;
  k.y_image = g.c_out * g.h_out * g.w_out * k.elem;
  k.w_numel = g.c_out * (g.c_in / g.groups) * g.kh * g.kw;
  if (pass == Pass::backward_weight) {
    run_weight_gradient(k, pointers);
  } else {
    run_images(k, pass, pointers, g.c_out);
  }
  return true;
}

// The GEMMs' primitives, by dtype, shape, transposes and row strides; an empty plan where oneDNN
// has none. The key of a GEMM's plan, apart from the convolutions' (whose first entry is a Pass).
constexpr int64_t kGemmKey = 3;

Plan build_gemm(DT t, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                int64_t ldc, const GemmBatch& batch) {
  // op(a) (m, k) and op(b) (k, n) as strided views of the stored matrices; a batch of them as 3D
  // views, a stride of 0 as a batch of one that oneDNN broadcasts.
  memory::dims a_dims{m, k}, a_strides = ta ? memory::dims{1, lda} : memory::dims{lda, 1};
  memory::dims b_dims{k, n}, b_strides = tb ? memory::dims{1, ldb} : memory::dims{ldb, 1};
  memory::dims c_dims{m, n}, c_strides{ldc, 1};
  if (batch.count > 1) {
    a_dims.insert(a_dims.begin(), batch.stride_a == 0 ? 1 : batch.count);
    a_strides.insert(a_strides.begin(), batch.stride_a == 0 ? m * k : batch.stride_a);
    b_dims.insert(b_dims.begin(), batch.stride_b == 0 ? 1 : batch.count);
    b_strides.insert(b_strides.begin(), batch.stride_b == 0 ? k * n : batch.stride_b);
    c_dims.insert(c_dims.begin(), batch.count);
    c_strides.insert(c_strides.begin(), m * ldc);
  }
  const memory::desc a_md(a_dims, t, a_strides);
  const memory::desc b_md(b_dims, t, b_strides);
  const memory::desc c_md(c_dims, DT::f32, c_strides);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine());
  refuse_reference(pd);
  Plan p;
  p.prim = dnnl::matmul(pd);
  p.hold_signals = holds_signals(pd);
  p.args = {
      {DNNL_ARG_SRC, a_md, a_md}, {DNNL_ARG_WEIGHTS, b_md, b_md}, {DNNL_ARG_DST, c_md, c_md, true}};
  p.reorders.resize(3);
  p.scratchpad = pd.scratchpad_desc();
  return p;
}

}  // namespace

// Note [bf16 products]
// A bf16 product runs on the CPU's bf16 dot products only where they outrun its f32 FMAs: AMX-BF16
// (oneDNN's effective ISA avx512_core_amx: an instruction makes 16 x 16 dot products of 32 terms),
// and AVX512-BF16 on AMD (Zen 4 and later, where a VDPBF16PS does twice a VFMADD231PS's
// multiply-adds). Intel's AVX512-BF16 without AMX does as many multiply-adds a cycle as its f32
// FMAs, and its bf16 kernels ran slower than the f32 ones, in oneDNN and in PyTorch alike (on the
// Intel machine of benchmarks/README.md, 103 to 155 GFLOP/s on 2 threads against 226 to 282 in
// f32): there, and on CPUs without AVX512-BF16, the operands are widened to f32 (exactly) and the
// f32 kernels run, chunk by chunk in the convolutions and block by block in the GEMMs (the operand
// every block of a product reads whole widened once for all of them, src/cpu/gemm.cpp: once a
// block, it cost a bf16 Linear of gpt-mini's a quarter of its time), the results rounded to bf16
// once as on the dot-product path: the widened result is the f32 kernel's
// result on the widened operands, rounded (tests/test_onednn.cpp holds them equal bit for bit;
// a weight gradient's deep product sums shorter runs than f32's, Note [deep products]).
// Both sum the exact products in f32, in their kernels' orders (the dot products also flush
// subnormal inputs and products to zero): results may sit a bf16 rounding step apart between the
// two paths, so between CPUs of the two kinds; on one CPU they do not depend on the thread count.
namespace {
std::atomic<int> g_bf16_products{static_cast<int>(Bf16Products::automatic)};

bool amd_cpu() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  return ebx == 0x68747541U && edx == 0x69746e65U && ecx == 0x444d4163U;  // "AuthenticAMD"
#else
  return false;
#endif
}
}  // namespace

void set_bf16_products(Bf16Products how) { g_bf16_products.store(static_cast<int>(how)); }

bool bf16_dot_products() {
  static const bool fast = [] {
    // oneDNN's ISAs are sets of feature bits, each including those below it.
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto has = [&](dnnl::cpu_isa want) {
      return (isa & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
    };
    return has(dnnl::cpu_isa::avx512_core_amx) ||
           (has(dnnl::cpu_isa::avx512_core_bf16) && amd_cpu());
  }();
  switch (static_cast<Bf16Products>(g_bf16_products.load())) {
    case Bf16Products::dot:
      return true;
    case Bf16Products::widened:
      return false;
    default:
      return fast;
  }
}

int64_t calls() { return g_calls.load(std::memory_order_relaxed); }
int64_t calls_with_signals_held() { return g_held_calls.load(std::memory_order_relaxed); }

bool gemm(DType ab, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
          const void* b, int64_t ldb, float* c, int64_t ldc, const GemmBatch& batch) {
  if (m <= 0 || n <= 0 || k <= 0 || batch.count <= 0 || (ab != DType::f32 && ab != DType::bf16)) {
    return false;
  }
  const DT t = ab == DType::f32 ? DT::f32 : DT::bf16;
  const std::shared_ptr<const Plan> plan =
      plans().get({kGemmKey, static_cast<int64_t>(ab), ta, tb, m, n, k, lda, ldb, ldc, batch.count,
                   batch.count > 1 ? batch.stride_a : 0, batch.count > 1 ? batch.stride_b : 0},
                  [&] { return build_gemm(t, ta, tb, m, n, k, lda, ldb, ldc, batch); });
  if (!plan) return false;
  execute(*plan, {const_cast<void*>(a), const_cast<void*>(b), c});
  return true;
}

bool conv2d_forward(const kern::Conv2dGeom& g, DType dtype, const void* x, const void* w,
                    const void* bias, void* y) {
  std::vector<void*> p = {const_cast<void*>(x), const_cast<void*>(w), y};
  if (bias != nullptr) p.push_back(const_cast<void*>(bias));
  return run(Pass::forward, g, dtype, bias != nullptr, p);
}

bool conv2d_backward_input(const kern::Conv2dGeom& g, DType dtype, const void* dy, const void* w,
                           void* dx) {
  return run(Pass::backward_input, g, dtype, false,
             {const_cast<void*>(dy), const_cast<void*>(w), dx});
}

bool conv2d_backward_weight(const kern::Conv2dGeom& g, DType dtype, const void* x, const void* dy,
                            void* dw) {
  return run(Pass::backward_weight, g, dtype, false,
             {const_cast<void*>(x), const_cast<void*>(dy), dw});
}

}  // namespace cpu::onednn
}  // namespace sinter

// Note [cpu inference plan]
// A fused model's forward on the CPU without grad mode (nn::fuse_for_inference and quant::prepare
// set Sequential::inference_plans; src/nn/infer_plan.cpp describes the model as a plan::Program)
// runs as one plan per input shape instead of op by op, as ONNX Runtime runs a session:
//  - The images' values stay channels-last (NHWC) from the first layer to the last, the layout
//    oneDNN's brgemm convolutions read and write: op by op, every convolution reorders its input
//    from NCHW and its output back (a fifth of resnet20's time at batch 256).
//  - Each convolution or matmul is one oneDNN primitive made once, its weights reordered into the
//    primitive's layout at compile time (the parts: src/cpu/infer_plan_parts_dnnl.cpp). A residual
//    block's sum and ReLU are the second convolution's post-ops, written in place over the
//    shortcut's buffer. A convolution of few input taps (an image network's first layer) is the
//    plan's own kernel (Note [small convolutions]), and max pooling its own loop
//    (vec::max_pool_nhwc).
//  - The batch is cut into chunks of images (about kChunkBytes of the largest value each, and at
//    least 4 chunks where there are 4 images, from the shapes alone), and each thread runs whole
//    chunks through every layer: the values of a chunk stay in its core's cache, and no layer
//    waits for the other threads. The Linears that end a model whose chunks are small run after
//    all chunks, on about four blocks of the batch's rows (plan_head: a weight read once a block
//    rather than once a chunk). At batch 1 the threads share each layer instead, cut into bands of
//    output rows (a convolution or pooling, each band with its own padding) or of output features
//    (a Linear); a max pooling whose windows share no rows, alone reading a convolution's output,
//    runs with it, the convolution's bands cut along the pooling's rows so that each thread pools
//    the rows it computed (fuse_poolings). The buffers are planned once (a value's buffer is reused
//    once its last reader has run) and kept by each thread between calls, with its primitives'
//    memory objects.
//  - An int8 layer (quant's QuantizedConv2d and QuantizedLinear) quantizes its band of the input
//    as the layer does (kern::quantize_int8), sums in oneDNN's int8 kernels into int32, exact as
//    the layer's own, and writes the layer's f32 epilogue (kern::int8_epilogue) itself, then the
//    int8 block's residual sum and relu as the add and relu ops round them: an int8 model's plan
//    gives the bits of its layers. oneDNN's int8 kernels are exact on CPUs with VNNI (AVX-512
//    VNNI, AVX-VNNI, AMX); without it (pair sums that saturate at 16 bits) no int8 plan is made.
// Every layer's result for an image depends only on that image and the chunk size, head blocks or
// bands, which depend only on the shapes: the same bits at every thread count. An f32 plan's are
// not the bits of the op-by-op forward (other kernels sum in another order): the two agree to f32
// rounding (1e-5 relative on the reference models, tests/test_infer_plan.cpp). Max pooling and
// the small convolutions keep the library's NaN (max_pool2d's: the window's first NaN is its
// result; the relu op's); the other f32 ReLU epilogues are oneDNN's, whose NaN handling is its
// own: a NaN may come out as 0 where PyTorch's relu keeps it (the batch-1 Linear bands apply the
// relu op's rule).
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu/conv_small.h"
#include "cpu/infer_plan.h"
#include "cpu/infer_plan_parts_dnnl.h"
#include "cpu/onednn_common.h"
#include "cpu/vec_rows.h"
#include "internal/parallel.h"
#include "sinter/core/error.h"
#include "sinter/core/parallel.h"
#include "sinter/core/storage.h"

namespace sinter::cpu::plan {

namespace {

// The bytes of the largest value a chunk holds (Note [cpu inference plan]): a few chunks' values
// fit a core's L2 cache.
constexpr int64_t kChunkBytes = int64_t{1} << 19;

}  // namespace

class Compiled {
 public:
  Program program;
  std::vector<Shape3> shapes;
  int64_t batch = 0, per = 0, chunks = 0, last = 0;
  // For chunks of `per` images, and the last chunk; for the head's layers, its blocks (head).
  std::vector<Step> steps[2];
  bool bands = false;  // batch 1: the threads share each layer's bands
  uint64_t id = 0;     // unique in the process (the threads' memory objects are by plan)
  // A value's buffer among a thread's `slots` (-1: none, the input read in place or the output
  // written into y).
  std::vector<int> slot;
  int slots = 0;
  size_t slot_bytes = 0, scratch_bytes = 0;
  size_t q_bytes = 0, acc_bytes = 0;  // an int8 part's quantized input and int32 sums, at most
  bool input_in_place = false, output_in_place = false;
  // NCHW input to NHWC and NHWC output to NCHW, by chunk size, where the layouts differ.
  dnnl::reorder to_nhwc[2], to_nchw[2];
  // The batched head (Note [cpu inference plan]), or head -1: layers [head, end) run on blocks of
  // head_per rows of the whole batch (steps[0], and steps[1] for the last block of head_last),
  // after every chunk has run the layers before it into the head's input. Value v of the head
  // (head <= v, not the output) lies in the calling thread's head buffer at head_at[v] floats.
  int head = -1;
  int64_t head_per = 0, head_blocks = 0, head_last = 0;
  std::vector<size_t> head_at;
  size_t head_floats = 0;
};

namespace {

// Assigns each value a buffer, reusing one whose value's last reader has run; a convolution with a
// residual writes over the residual's buffer where it is that value's last reader. (Made after the
// steps: a fused pooling's output is written while its convolution runs.)
void plan_buffers(Compiled& c) {
  const Program& p = c.program;
  const int values = static_cast<int>(c.shapes.size());
  std::vector<int> last_use(values, -1);
  for (size_t i = 0; i < p.layers.size(); ++i) {
    last_use[p.layers[i].input] = static_cast<int>(i);
    if (p.layers[i].residual >= 0) last_use[p.layers[i].residual] = static_cast<int>(i);
  }
  last_use[values - 1] = static_cast<int>(p.layers.size());  // the output, read at the end
  c.slot.assign(values, -1);
  std::vector<int> owner;  // the value each buffer holds
  // A buffer whose value no reader at or after `layer` needs.
  auto take = [&](int v, int layer) {
    size_t s = 0;
    while (s < owner.size() && owner[s] >= 0 && last_use[owner[s]] >= layer) ++s;
    if (s == owner.size()) owner.push_back(-1);
    owner[s] = v;
    return static_cast<int>(s);
  };
  if (!c.input_in_place) c.slot[0] = take(0, 0);
  const size_t end = c.head >= 0 ? static_cast<size_t>(c.head) : p.layers.size();
  for (size_t i = 0; i < end; ++i) {
    const Layer& l = p.layers[i];
    const int v = static_cast<int>(i) + 1;
    if (v == c.head) continue;  // in the head buffer
    // A pooling fused into the convolution before it (Step::skip) writes while the other bands
    // of that convolution still read its input: its buffer is taken as of the convolution.
    const int layer = static_cast<int>(i) - (c.steps[0][i].skip ? 1 : 0);
    if (v == values - 1 && c.output_in_place) continue;
    if (l.residual >= 0 && l.residual != l.input && c.slot[l.residual] >= 0 &&
        last_use[l.residual] == layer) {
      c.slot[v] = c.slot[l.residual];
      owner[c.slot[v]] = v;
    } else {
      c.slot[v] = take(v, layer);
    }
  }
  c.slots = static_cast<int>(owner.size());
  size_t most = 0;
  for (const Shape3& s : c.shapes) most = std::max(most, static_cast<size_t>(numel(s)));
  c.slot_bytes = aligned(static_cast<size_t>(c.per) * most * sizeof(float));
}

}  // namespace

// The batched head (Compiled::head): the Linears that end a model of chunks of fewer than 64
// images, each reading the layer before, on about four blocks of the batch (even_chunk: from the
// shapes alone; their (out, 1, 1) output is the same bytes in NCHW). Run per chunk, the cnn's 3136
// x 128 layer read its 1.6 MB weight for every 4 images, a seventh of its batch-256 forward.
void plan_head(Compiled& c) {
  const Program& p = c.program;
  int head = static_cast<int>(p.layers.size());
  while (head > 0 && p.layers[head - 1].op == Op::Linear && p.layers[head - 1].input == head - 1 &&
         p.layers[head - 1].residual < 0) {
    --head;
  }
  c.head_per = onednn::even_chunk(c.batch, std::max<int64_t>(1, c.batch / 4));
  if (c.bands || head == 0 || head == static_cast<int>(p.layers.size()) || c.chunks < 2 ||
      c.per >= 64 || c.head_per <= c.per || !c.output_in_place) {
    c.head_per = 0;
    return;
  }
  c.head = head;
  c.head_blocks = (c.batch + c.head_per - 1) / c.head_per;
  c.head_last = c.batch - (c.head_blocks - 1) * c.head_per;
  c.head_at.assign(c.shapes.size(), 0);
  for (size_t v = static_cast<size_t>(head); v + 1 < c.shapes.size(); ++v) {
    c.head_at[v] = c.head_floats;
    c.head_floats +=
        aligned(static_cast<size_t>(c.batch * numel(c.shapes[v])) * sizeof(float)) / sizeof(float);
  }
}

// At batch 1, each convolution with the max pooling that follows it and alone reads its output,
// as one step (fuse_pooling): a thread pools the rows its band of the convolution wrote, while
// they are in its cache, without waiting for the other bands (the cnn's two poolings took a
// fifth of its batch-1 forward as layers of their own).
void fuse_poolings(const Program& p, std::vector<Step>& steps) {
  const int layers = static_cast<int>(p.layers.size());
  for (int i = 0; i + 1 < layers; ++i) {
    const Layer &conv = p.layers[i], &pool = p.layers[i + 1];
    if (conv.op != Op::Conv || pool.op != Op::MaxPool || pool.input != i + 1) continue;
    bool alone = true;  // no other layer reads the convolution's output
    for (int j = 0; j < layers; ++j) {
      if (j != i + 1 && (p.layers[j].input == i + 1 || p.layers[j].residual == i + 1)) {
        alone = false;
      }
    }
    if (alone) (void)fuse_pooling(conv, pool, steps[i], steps[i + 1]);
  }
}

std::shared_ptr<const Compiled> compile(const Program& p, int64_t batch) {
  SINTER_CHECK(batch > 0 && !p.layers.empty(), "inference plan: batch ", batch, " of ",
               p.layers.size(), " layers");
  static std::atomic<uint64_t> next_id{1};
  auto c = std::make_shared<Compiled>();
  c->id = next_id.fetch_add(1);
  c->program = p;
  c->shapes = value_shapes(p);
  c->batch = batch;
  size_t most = 0;
  for (const Shape3& s : c->shapes) most = std::max(most, static_cast<size_t>(numel(s)));
  // Equal chunks where the batch allows (onednn::even_chunk), and at least 4 where there are 4
  // images, so that the threads share them.
  const int64_t want = kChunkBytes / static_cast<int64_t>(most * sizeof(float));
  c->per = onednn::even_chunk(batch, batch >= 4 ? std::min(want, batch / 4) : 1);
  c->chunks = (batch + c->per - 1) / c->per;
  c->bands = batch == 1;
  c->last = batch - (c->chunks - 1) * c->per;
  // NCHW and NHWC are the same bytes where there is one channel or one pixel.
  const Shape3 in = c->shapes.front(), out = c->shapes.back();
  c->input_in_place = in.c == 1 || in.h * in.w == 1;
  c->output_in_place = out.c == 1 || out.h * out.w == 1;
  if (!onednn::OpenMP::runtime().usable) return nullptr;
  // oneDNN's int8 kernels without VNNI (vpmaddubsw) saturate 16-bit pair sums: the int8 layers'
  // sums would not be exact, so they need a CPU with the VNNI dot products.
  // (oneDNN's ISAs are sets of feature bits, each including those below it.)
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto has = [&](dnnl::cpu_isa want) {
    return (isa & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
  };
  const bool vnni = has(dnnl::cpu_isa::avx512_core_vnni) || has(dnnl::cpu_isa::avx2_vnni);
  for (const Layer& l : p.layers) {
    if (l.int8 && !vnni) return nullptr;
  }
  plan_head(*c);
  const onednn::OneOpenMPThread one;
  try {
    // By k: the chunks of `per` images and the head's blocks of head_per rows, then the last chunk
    // and block where shorter.
    const bool short_chunk = c->last != c->per, short_block = c->head_last != c->head_per;
    for (int k = 0; k < (short_chunk || short_block ? 2 : 1); ++k) {
      const int64_t n = k == 0 ? c->per : c->last;
      const auto nchw = [&](const Shape3& s) {
        return memory::desc({n, s.c, s.h, s.w}, DT::f32, Tag::nchw);
      };
      const dnnl::engine& e = onednn::engine();
      if (!c->input_in_place && (k == 0 || short_chunk)) {
        c->to_nhwc[k] = dnnl::reorder(dnnl::reorder::primitive_desc(e, nchw(in), e, nhwc(n, in)));
      }
      if (!c->output_in_place && (k == 0 || short_chunk)) {
        c->to_nchw[k] = dnnl::reorder(dnnl::reorder::primitive_desc(e, nhwc(n, out), e, nchw(out)));
      }
      for (size_t i = 0; i < p.layers.size(); ++i) {
        const Layer& l = p.layers[i];
        const bool in_head = c->head >= 0 && static_cast<int>(i) >= c->head;
        if (k == 1 && !(in_head ? short_block : short_chunk)) {
          c->steps[k].emplace_back();  // never run
        } else {
          const int64_t rows = !in_head ? n : k == 0 ? c->head_per : c->head_last;
          c->steps[k].push_back(layer_step(l, rows, c->shapes[l.input], c->bands));
        }
      }
      if (c->bands) fuse_poolings(p, c->steps[k]);
      for (size_t i = 0; i < p.layers.size(); ++i) {
        const Layer& l = p.layers[i];
        for (const Part& part : c->steps[k][i].parts) {
          c->scratch_bytes =
              std::max({c->scratch_bytes, part.scratchpad.get_size(), part.own_scratch});
          if (l.int8 && !part.pool) {
            c->q_bytes = std::max(c->q_bytes, aligned(part.src.get_size()));
            c->acc_bytes = std::max(c->acc_bytes, aligned(part.dst.get_size()));
          }
        }
      }
    }
  } catch (const dnnl::error&) {
    return nullptr;
  }
  c->scratch_bytes = aligned(c->scratch_bytes);
  plan_buffers(*c);
  return c;
}

namespace {

// out (n, c) = the mean over each image's h w pixels of in (n, h, w, c), summed in double in pixel
// order as the library's average pooling sums a plane.
void global_avg_pool(const float* in, int64_t n, const Shape3& s, float* out) {
  const int64_t hw = s.h * s.w;
  std::vector<double> sum(static_cast<size_t>(s.c));
  for (int64_t b = 0; b < n; ++b) {
    std::fill(sum.begin(), sum.end(), 0.0);
    const float* img = in + b * hw * s.c;
    for (int64_t p = 0; p < hw; ++p) {
      for (int64_t ch = 0; ch < s.c; ++ch) sum[ch] += img[p * s.c + ch];
    }
    for (int64_t ch = 0; ch < s.c; ++ch) {
      out[b * s.c + ch] = static_cast<float>(sum[ch] / static_cast<double>(hw));
    }
  }
}

// A part's memory objects on one thread, made at its first run: later runs only point them at
// the call's buffers (making them, and the argument map, costs allocations, a tenth of a batch-1
// forward).
struct PartMemories {
  dnnl::memory src, dst, scratch;
  std::vector<dnnl_exec_arg_t> args;
};

// What a thread keeps between calls: its oneDNN stream, its chunks' values, its scratchpad, and
// the memory objects of the plan it ran last, by chunk size, layer and part.
struct ThreadBuffers {
  std::unique_ptr<dnnl::stream> stream;
  Storage values, scratch, q, acc, head;
  uint64_t plan = 0;
  std::vector<std::vector<PartMemories>> memories[2];
  std::vector<dnnl::memory> fixed;  // the weights and biases the args point at
};

ThreadBuffers& mine() {
  thread_local ThreadBuffers t;
  if (!t.stream) t.stream = std::make_unique<dnnl::stream>(onednn::engine());
  return t;
}

char* at_least(Storage& s, size_t bytes) {
  if (s.nbytes() < bytes) {
    s = Storage();
    s = Storage::allocate(bytes, Device::cpu());
  }
  return static_cast<char*>(s.data());
}

// This thread's memory objects of part `i` of layer `layer` at chunk size k.
PartMemories& memories(const Compiled& c, int k, size_t layer, size_t i, ThreadBuffers& t) {
  if (t.plan != c.id) {
    t.plan = c.id;
    for (auto& m : t.memories) m.assign(c.steps[0].size(), {});
    t.fixed.clear();
  }
  std::vector<PartMemories>& parts = t.memories[k][layer];
  const Step& step = c.steps[k][layer];
  if (parts.empty()) {
    const dnnl::engine& e = onednn::engine();
    const Layer& l = c.program.layers[layer];
    for (const Part& part : step.parts) {
      if (part.gemv || part.pool || part.small) {  // the plan's own loops
        parts.emplace_back();
        continue;
      }
      PartMemories m{memory(part.src, e, nullptr),
                     memory(part.dst, e, nullptr),
                     memory(part.scratchpad, e, nullptr),
                     {}};
      m.args = {{DNNL_ARG_SRC, m.src.get()},
                {DNNL_ARG_DST, m.dst.get()},
                {DNNL_ARG_SCRATCHPAD, m.scratch.get()}};
      t.fixed.emplace_back(part.weight.md, e, part.weight.data.data());
      m.args.push_back({DNNL_ARG_WEIGHTS, t.fixed.back().get()});
      if (l.bias != nullptr && !l.int8) {  // an int8 layer's bias is in its epilogue
        t.fixed.emplace_back(part.bias, e, part.bias_data.data());
        m.args.push_back({DNNL_ARG_BIAS, t.fixed.back().get()});
      }
      parts.push_back(std::move(m));
    }
  }
  return parts[i];
}

// out[r stride + j] = the int8 epilogue of acc[r channels + j] for the part's rows and channels:
// act(c scale[j] + shift[j]) as kern::int8_epilogue rounds it, then with a residual
// relu(y + res[r stride + j]) as the add and relu ops round it (the int8 BasicBlock's sum).
void int8_epilogue_rows(const Layer& l, const Part& part, const int32_t* acc, const float* res,
                        float* out) {
  for (int64_t r = 0; r < part.rows; ++r) {
    vec::int8_epilogue_row(acc + r * part.channels, part.channels, part.scale.data(),
                           part.shift.data(), l.relu,
                           res != nullptr ? res + r * part.stride : nullptr, out + r * part.stride);
  }
}

// y = relu(W x + b) of a Part::gemv band, y its `channels` outputs.
void run_gemv(const Layer& l, const Part& part, const float* x, float* y) {
  const auto* w = static_cast<const float*>(part.weight.data.data());
  // beta 0 must not read y (it holds an earlier value, maybe NaN; some OpenBLAS versions scale it).
  std::fill(y, y + part.channels, 0.0F);
  cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(part.channels), static_cast<int>(l.in),
              1.0F, w, static_cast<int>(l.in), x, 1, 0.0F, y, 1);
  const auto* b = static_cast<const float*>(part.bias_data.data());
  for (int64_t j = 0; j < part.channels; ++j) {
    float v = l.bias != nullptr ? y[j] + b[j] : y[j];
    if (l.relu) v = (v > 0.0F || v != v) ? v : 0.0F;
    y[j] = v;
  }
}

// Parts [p0, p1) of layer `layer`, from the value at `layer_in` into the value at `layer_out` (and
// an int8 convolution's residual at `res`; a fused pooling's band from `layer_out` into
// `next_out`), on this thread.
void run_parts(const Compiled& c, int k, size_t layer, size_t p0, size_t p1, float* layer_in,
               float* layer_out, const float* res, float* next_out) {
  const onednn::OneOpenMPThread one;
  ThreadBuffers& t = mine();
  char* scratch = at_least(t.scratch, c.scratch_bytes);
  const Layer& l = c.program.layers[layer];
  const Step& step = c.steps[k][layer];
  for (size_t i = p0; i < p1; ++i) {
    const Part& part = step.parts[i];
    // A fused pooling's band reads the layer's output and writes the next layer's (Step).
    float* in = part.next ? layer_out : layer_in;
    float* out = part.next ? next_out : layer_out;
    if (part.gemv) {
      run_gemv(l, part, in, out + part.dst_at);
      continue;
    }
    if (part.small) {
      const kern::Conv2dGeom& g = part.geom;
      const auto* bias =
          l.bias != nullptr ? static_cast<const float*>(part.bias_data.data()) : nullptr;
      for (int64_t b = 0; b < g.n; ++b) {
        small_conv::run(in + part.src_at + b * g.h * g.w * g.c_in, g,
                        static_cast<const float*>(part.weight.data.data()), bias, l.relu,
                        reinterpret_cast<float*>(scratch),
                        out + part.dst_at + b * g.h_out * g.w_out * g.c_out);
      }
      continue;
    }
    if (part.pool) {
      // A fused pooling reads what the part before it wrote, maybe in oneDNN's stream.
      if (part.next) t.stream->wait();
      // (Band parts hold one image: n > 1 only where the part is the whole layer.)
      const kern::Conv2dGeom& g = part.geom;
      for (int64_t b = 0; b < g.n; ++b) {
        vec::max_pool_nhwc(in + part.src_at + b * g.h * g.w * g.c_in, g,
                           out + part.dst_at + b * g.h_out * g.w_out * g.c_in);
      }
      continue;
    }
    PartMemories& m = memories(c, k, layer, i, t);
    if (l.int8) {
      // The band's input quantized as the int8 layers quantize it, into this thread's buffer.
      auto* q = reinterpret_cast<int8_t*>(at_least(t.q, c.q_bytes));
      const float* x = in + part.src_at;
      const int64_t count = static_cast<int64_t>(part.src.get_size());
      vec::quantize_int8_row(x, count, l.input_scale, q);
      m.src.set_data_handle(q);
      m.dst.set_data_handle(at_least(t.acc, c.acc_bytes));
    } else {
      m.src.set_data_handle(in + part.src_at);
      m.dst.set_data_handle(out + part.dst_at);
    }
    m.scratch.set_data_handle(scratch);
    dnnl_status_t status = dnnl_success;
    {
      const onednn::SignalsHeld held(part.hold_signals);
      status = dnnl_primitive_execute(part.prim.get(), t.stream->get(),
                                      static_cast<int>(m.args.size()), m.args.data());
    }
    SINTER_CHECK(status == dnnl_success, "inference plan: layer ", layer,
                 "'s oneDNN primitive failed with status ", static_cast<int>(status));
    if (l.int8) {
      t.stream->wait();
      int8_epilogue_rows(l, part, reinterpret_cast<const int32_t*>(t.acc.data()),
                         res != nullptr ? res + part.dst_at : nullptr, out + part.dst_at);
    }
  }
  t.stream->wait();
}

// One chunk through every layer, its values in `arena`: on this thread, or with c.bands each
// layer's bands shared among the threads.
void run_chunk(const Compiled& c, int64_t chunk, const float* x, float* y, char* arena,
               float* head) {
  const onednn::OneOpenMPThread one;
  const Program& p = c.program;
  const int64_t n = chunk == c.chunks - 1 ? c.last : c.per;
  const int k = n == c.per ? 0 : 1;
  const std::vector<Step>& steps = c.steps[k];
  const int values = static_cast<int>(c.shapes.size());
  std::vector<float*> at(values, nullptr);
  auto buffer = [&](int v) { return reinterpret_cast<float*>(arena + c.slot[v] * c.slot_bytes); };
  float* x_chunk = const_cast<float*>(x) + chunk * c.per * numel(c.shapes[0]);
  float* y_chunk = y + chunk * c.per * numel(c.shapes.back());
  at[0] = x_chunk;
  at[values - 1] = y_chunk;
  const size_t end = c.head >= 0 ? static_cast<size_t>(c.head) : p.layers.size();
  if (c.head >= 0) at[c.head] = head + c.head_at[c.head] + chunk * c.per * numel(c.shapes[c.head]);
  const dnnl::engine& e = onednn::engine();
  const auto nchw = [&](const Shape3& s, float* data) {
    return memory(memory::desc({n, s.c, s.h, s.w}, DT::f32, Tag::nchw), e, data);
  };
  if (!c.input_in_place) {
    at[0] = buffer(0);
    memory from = nchw(c.shapes[0], x_chunk), to(nhwc(n, c.shapes[0]), e, at[0]);
    c.to_nhwc[k].execute(*mine().stream, from, to);
    mine().stream->wait();
  }
  for (size_t i = 0; i < end; ++i) {
    const Layer& l = p.layers[i];
    const Step& step = steps[i];
    const int v = static_cast<int>(i) + 1;
    if (c.slot[v] >= 0) at[v] = buffer(v);
    if (step.skip) continue;  // run with the layer before (Step)
    if (l.op == Op::GlobalAvgPool) {
      global_avg_pool(at[l.input], n, c.shapes[l.input], at[v]);
      continue;
    }
    // A residual: the f32 convolution's sum post-op adds what its output holds; the int8 one's
    // epilogue reads it.
    const float* res = l.residual >= 0 && l.int8 ? at[l.residual] : nullptr;
    if (l.residual >= 0 && !l.int8 && at[v] != at[l.residual]) {
      std::memcpy(at[v], at[l.residual],
                  static_cast<size_t>(n * numel(c.shapes[v])) * sizeof(float));
    }
    float* next = nullptr;  // a fused pooling's output, the next layer's value
    if (step.group > 1) {
      if (c.slot[v + 1] >= 0) at[v + 1] = buffer(v + 1);
      next = at[v + 1];
    }
    const auto g = static_cast<size_t>(step.group);
    if (c.bands && step.parts.size() > g) {
      const auto groups = static_cast<int64_t>(step.parts.size() / g);
      detail::parallel_for(groups, 1, [&](int64_t a, int64_t b) {
        run_parts(c, k, i, static_cast<size_t>(a) * g, static_cast<size_t>(b) * g, at[l.input],
                  at[v], res, next);
      });
    } else {
      run_parts(c, k, i, 0, step.parts.size(), at[l.input], at[v], res, next);
    }
  }
  if (!c.output_in_place && c.head < 0) {
    memory from(nhwc(n, c.shapes.back()), e, at[values - 1]), to = nchw(c.shapes.back(), y_chunk);
    c.to_nchw[k].execute(*mine().stream, from, to);
    mine().stream->wait();
  }
}

// The head's block `b` (Compiled::head): its rows through the head's layers, the last into y.
void run_head_block(const Compiled& c, int64_t b, float* head, float* y) {
  const Program& p = c.program;
  const int64_t rows = b == c.head_blocks - 1 ? c.head_last : c.head_per;
  const int k = rows == c.head_per ? 0 : 1;
  const int last = static_cast<int>(p.layers.size());
  auto value = [&](int v) {
    float* base = v == last ? y : head + c.head_at[v];
    return base + b * c.head_per * numel(c.shapes[v]);
  };
  for (int i = c.head; i < last; ++i) {
    const size_t parts = c.steps[k][i].parts.size();
    run_parts(c, k, static_cast<size_t>(i), 0, parts, value(i), value(i + 1), nullptr, nullptr);
  }
}

void run_unchecked(const Compiled& c, const float* x, float* y) {
  const size_t bytes = c.slots * c.slot_bytes;
  if (c.bands) {  // one image, its layers' bands on every thread
    run_chunk(c, 0, x, y, at_least(mine().values, bytes), nullptr);
    return;
  }
  float* head = c.head >= 0
                    ? reinterpret_cast<float*>(at_least(mine().head, c.head_floats * sizeof(float)))
                    : nullptr;
  detail::parallel_for(c.chunks, 1, [&](int64_t c0, int64_t c1) {
    char* arena = at_least(mine().values, bytes);
    for (int64_t k = c0; k < c1; ++k) run_chunk(c, k, x, y, arena, head);
  });
  if (c.head >= 0) {
    detail::parallel_for(c.head_blocks, 1, [&](int64_t b0, int64_t b1) {
      const onednn::OneOpenMPThread one;
      for (int64_t b = b0; b < b1; ++b) run_head_block(c, b, head, y);
    });
    // A large batch's head values are not kept for the next call.
    constexpr size_t kKeepHeadBytes = size_t{16} << 20;
    if (c.head_floats * sizeof(float) > kKeepHeadBytes) mine().head = Storage();
  }
}

}  // namespace

void run(const Compiled& c, const float* x, float* y) {
  try {
    run_unchecked(c, x, y);
  } catch (const dnnl::error& e) {
    SINTER_THROW("inference plan: oneDNN: ", e.what(), " (status ", static_cast<int>(e.status),
                 ")");
  }
}

}  // namespace sinter::cpu::plan

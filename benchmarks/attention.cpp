// scaled_dot_product_attention on CUDA: the fused kernels (AttentionKernel::Fused) against the
// composed form (matmul, masked softmax, matmul) on the same operands, causal, (B*H, T, D) with
// B*H*T = 131072 tokens per case, T = 256 .. 4096, D = 64 and 128, f32 and bf16; the forward alone
// (no graph) and forward + backward (the gradients of q, k and v for a fixed upstream gradient).
// Grouped-query rows (`gqa4`): (B, 8, T, D) queries on (B, 2, T, D) keys and values, T = 1024, the
// fused kernels reading the shared K/V heads in place against the composed form's repeated copy.
// Each case also reports the memory-bound ceiling: the time a device-to-device copy takes to move
// the bytes the pass must read and write at least (q, k, v, out; and dout, dq, dk, dv), over ours.
// `--smoke` runs the setup and the validation on a small problem on the CPU instead.
#include <cstdint>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

using namespace sinter;

enum class Pass { Forward, ForwardBackward };
constexpr const char* kPassNames[] = {"fwd", "fwd_bwd"};

const char* pass_name(Pass p) { return bench::enum_name(p, kPassNames); }

constexpr int64_t kTokens = 131072;  // B*H*T of every case

struct Problem {
  int64_t bh, t, d;  // bh: batch x query heads
  DType dtype;
  int64_t heads = 1, group = 1;  // grouped-query: `group` of the `heads` query heads per K/V head
};

// Causal attention's multiply-adds, counted as flash attention does: 2 matmuls of (T, T, D) in the
// forward, 5 in the backward (2.5x), half of each under the causal mask.
double flop(const Problem& p, Pass pass) {
  const double forward = 4.0 * double(p.bh) * double(p.t) * double(p.t) * double(p.d) / 2;
  return pass == Pass::Forward ? forward : 3.5 * forward;
}

// What a pass reads and writes at least: q, k, v and out; the backward also dout, dq, dk, dv (k,
// v, dk and dv a group's share of q's size).
int64_t min_bytes(const Problem& p, Pass pass) {
  const int64_t tensor = p.bh * p.t * p.d * static_cast<int64_t>(element_size(p.dtype));
  const int64_t kv = tensor / p.group;
  return (pass == Pass::Forward ? 1 : 2) * (2 * tensor + 2 * kv);
}

struct Operands {
  Tensor q, k, v, dout;
};

Operands make_operands(const Problem& p, Device dev) {
  const TensorOptions opts{.dtype = p.dtype, .device = dev};
  if (p.group == 1) {
    const Shape s{p.bh, p.t, p.d};
    return {randn(s, opts), randn(s, opts), randn(s, opts), randn(s, opts)};
  }
  const int64_t b = p.bh / p.heads;
  const Shape sq{b, p.heads, p.t, p.d}, skv{b, p.heads / p.group, p.t, p.d};
  return {randn(sq, opts), randn(skv, opts), randn(skv, opts), randn(sq, opts)};
}

// One pass of one form: the output (forward) or the three gradients (forward + backward).
std::vector<Tensor> run_pass(const Operands& x, Pass pass, AttentionKernel kernel) {
  const AttentionOptions o{
      .causal = true, .kernel = kernel, .enable_gqa = x.q.dim() == 4 && x.k.size(1) != x.q.size(1)};
  if (pass == Pass::Forward) {
    NoGradGuard ng;
    return {scaled_dot_product_attention(x.q, x.k, x.v, o)};
  }
  Tensor q = x.q.detach().requires_grad_(true), k = x.k.detach().requires_grad_(true),
         v = x.v.detach().requires_grad_(true);
  scaled_dot_product_attention(q, k, v, o).backward(x.dout);
  return {q.grad(), k.grad(), v.grad()};
}

// "" when the fused results match the composed ones, on the first head (all of it for a small
// problem): bf16 within a few of its ulps of the output's scale, f32 within 1e-3.
std::string validate(const Operands& x, Pass pass) {
  const std::vector<Tensor> fused = run_pass(x, pass, AttentionKernel::Fused);
  const std::vector<Tensor> composed = run_pass(x, pass, AttentionKernel::Composed);
  const bool bf16 = x.q.dtype() == DType::bf16;
  const char* const names[] = {"dq", "dk", "dv"};
  for (size_t i = 0; i < fused.size(); ++i) {
    const std::vector<float> got = fused[i].narrow(0, 0, 1).to_vector<float>();
    const std::vector<float> want = composed[i].narrow(0, 0, 1).to_vector<float>();
    const double scale = bench::max_abs(want);
    const std::string bad =
        bench::compare(got, want, (bf16 ? 3e-2 : 1e-4) * scale, bf16 ? 3e-2 : 1e-3);
    if (!bad.empty()) return std::string(pass == Pass::Forward ? "out" : names[i]) + ": " + bad;
  }
  return "";
}

#ifdef SINTER_WITH_CUDA

void run_attention(benchmark::State& state, const Problem& p, Pass pass) {
  const Device dev = Device::cuda(0);
  manual_seed(0);
  const Operands x = make_operands(p, dev);
  if (bench::failed(state, "fused differs from composed: ", validate(x, pass))) return;
  auto fused = [&](int) { (void)run_pass(x, pass, AttentionKernel::Fused); };
  auto composed = [&](int) { (void)run_pass(x, pass, AttentionKernel::Composed); };
  bench::time_flops_against(state, "composed", flop(p, pass), 20.0, fused, composed);

  // The ceiling: a copy of the pass's minimal bytes (half each way between two buffers).
  const int64_t half = min_bytes(p, pass) / 2;
  const Tensor buf[2] = {empty({half}, {.dtype = DType::u8, .device = dev}),
                         empty({half}, {.dtype = DType::u8, .device = dev})};
  CUstream_st* const stream = cuda::current_stream().handle();
  auto copy = [&](int i) {
    SINTER_CUDA_CHECK(cudaMemcpyAsync(buf[(i + 1) % 2].data_ptr(), buf[i % 2].data_ptr(),
                                      static_cast<size_t>(half), cudaMemcpyDeviceToDevice, stream));
  };
  bench::time_ms(4, copy);
  const double ceiling_ms = bench::time_ms(20, copy);
  const double ours_ms = flop(p, pass) / (state.counters["TFLOP/s"] * 1e12) * 1e3;
  state.counters["ceiling_ms"] = ceiling_ms;
  state.counters["vs_ceiling"] = ceiling_ms / ours_ms;
}

#endif  // SINTER_WITH_CUDA

void register_all() {
  for (Pass pass : {Pass::Forward, Pass::ForwardBackward}) {
    for (DType dtype : {DType::bf16, DType::f32}) {
      for (int64_t d : {64, 128}) {
        for (int64_t t : {256, 1024, 4096}) {
          const Problem p{kTokens / t, t, d, dtype};
          const std::string name = std::string("attention/") + pass_name(pass) + "/" +
                                   dtype_name(dtype) + "/causal/bh" + std::to_string(p.bh) + "_t" +
                                   std::to_string(t) + "_d" + std::to_string(d);
          auto body = [=]([[maybe_unused]] benchmark::State& state) {
#ifdef SINTER_WITH_CUDA
            run_attention(state, p, pass);
#endif
          };
          bench::register_device(name, 7, benchmark::kMillisecond, body);
        }
        // Grouped-query: 8 query heads on 2 K/V heads (llama-style), T = 1024.
        const int64_t t = 1024, heads = 8, group = 4;
        const Problem p{kTokens / t, t, d, dtype, heads, group};
        const std::string name = std::string("attention/") + pass_name(pass) + "/" +
                                 dtype_name(dtype) + "/causal_gqa" + std::to_string(group) + "/b" +
                                 std::to_string(p.bh / heads) + "_h" + std::to_string(heads) +
                                 "_t" + std::to_string(t) + "_d" + std::to_string(d);
        auto body = [=]([[maybe_unused]] benchmark::State& state) {
#ifdef SINTER_WITH_CUDA
          run_attention(state, p, pass);
#endif
        };
        bench::register_device(name, 7, benchmark::kMillisecond, body);
      }
    }
  }
}

// Each pass and dtype on a (3, 37, 16) problem and a grouped-query (2, 4 on 2, 37, 16) one on the
// CPU: the fused CPU reference against the composed form, and the figures' counts.
void smoke() {
  for (Pass pass : {Pass::Forward, Pass::ForwardBackward}) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (const Problem& p : {Problem{3, 37, 16, dtype}, Problem{8, 37, 16, dtype, 4, 2}}) {
        const std::string name = std::string("attention/") + pass_name(pass) + "/" +
                                 dtype_name(dtype) + (p.group > 1 ? "/gqa2" : "") + "/bh" +
                                 std::to_string(p.bh) + "_t37_d16";
        bench::smoke_guarded(name, [&]() -> std::string {
          manual_seed(0);
          if (flop(p, pass) <= 0 || min_bytes(p, pass) <= 0) return "no work counted";
          return validate(make_operands(p, Device::cpu()), pass);
        });
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return sinter::bench::bench_main("bench_attention", argc, argv, smoke, register_all);
}

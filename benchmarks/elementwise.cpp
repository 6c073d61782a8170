// Memory-bound ops on CUDA (add, mul by a broadcast row, gelu, sum over the last dim), f32 and
// bf16: GB/s beside a device-to-device cudaMemcpyAsync of as many bytes, validated against the CPU
// first. `--smoke` runs the setup and the validation on a small problem on the CPU instead.
#include <cstdint>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

using namespace sinter;
using bench::Tolerance;

enum class Op { Add, MulRow, Gelu, SumLast };

constexpr const char* kOpNames[] = {"add", "mul_row", "gelu", "sum_last"};

const char* op_name(Op op) { return bench::enum_name(op, kOpNames); }

// The timed problem: (8192, 8192), 64Mi elements, 256 MiB in f32 and 128 MiB in bf16 per operand,
// well past the 60 MB L2.
constexpr int64_t kRows = 8192, kCols = 8192;

// Inputs for (rows, cols): two (rows, cols) tensors for add; (rows, cols) and a (cols,) row for
// mul_row; one (rows, cols) tensor for gelu and sum_last.
std::vector<Tensor> make_inputs(Op op, int64_t rows, int64_t cols, const TensorOptions& opts) {
  std::vector<Tensor> in{randn({rows, cols}, opts)};
  if (op == Op::Add) in.push_back(randn({rows, cols}, opts));
  if (op == Op::MulRow) in.push_back(randn({cols}, opts));
  return in;
}

Tensor run_op(Op op, const std::vector<Tensor>& in) {
  switch (op) {
    case Op::Add:
      return add(in[0], in[1]);
    case Op::MulRow:
      return mul(in[0], in[1]);
    case Op::Gelu:
      return gelu(in[0]);
    case Op::SumLast:
      return sum(in[0], {1});
  }
  SINTER_THROW("elementwise benchmark: unknown op");
}

// Bytes one call reads plus writes, each operand touched once.
int64_t bytes_moved(Op op, int64_t rows, int64_t cols, DType dtype) {
  const int64_t n = rows * cols;
  int64_t elements = 0;
  switch (op) {
    case Op::Add:
      elements = 3 * n;
      break;
    case Op::MulRow:
      elements = 2 * n + cols;
      break;
    case Op::Gelu:
      elements = 2 * n;
      break;
    case Op::SumLast:
      elements = n + rows;
      break;
  }
  return elements * static_cast<int64_t>(element_size(dtype));
}

// add and mul round one exact result on both sides; gelu differs by the erf implementations, a few
// f32 ulps; a sum over `cols` standard normals differs by the summation order, about
// cols * 2^-24 * max|x| at worst. bf16 results may land an ulp apart (2^-7 relative) after rounding
// the same f32 value computed in two ways; allow two.
Tolerance tolerance(Op op, DType dtype, int64_t cols) {
  const bool bf16 = dtype == DType::bf16;
  switch (op) {
    case Op::Add:
    case Op::MulRow:
      return bf16 ? Tolerance{1e-6, 1.0 / 64} : Tolerance{1e-6, 1e-6};
    case Op::Gelu:
      return bf16 ? Tolerance{1e-4, 1.0 / 64} : Tolerance{1e-6, 1e-5};
    case Op::SumLast:
      return {1e-6 * double(cols), bf16 ? 1.0 / 64 : 1e-5};
  }
  return {0.0, 0.0};
}

// Rows [r0, r0 + n) of the 2-D operands; a 1-D broadcast row is used whole.
std::vector<Tensor> rows_of(const std::vector<Tensor>& in, int64_t r0, int64_t n) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) out.push_back(t.dim() == 2 ? t.narrow(0, r0, n) : t);
  return out;
}

std::vector<Tensor> to_cpu(const std::vector<Tensor>& in) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) out.push_back(t.cpu());
  return out;
}

// "" when the CUDA op matches the CPU op, else what differs. Two checks: a small problem with odd
// sizes (vector tails, partial blocks), then the first and last rows of the timed problem (its
// launch configuration).
std::string validate(Op op, DType dtype, const std::vector<Tensor>& timed_in,
                     const Tensor& timed_out) {
  const int64_t rows = 37, cols = 1003;
  const std::vector<Tensor> small = make_inputs(op, rows, cols, {.dtype = dtype});
  std::vector<Tensor> small_dev;
  for (const Tensor& t : small) small_dev.push_back(t.to(timed_out.device()));
  const Tolerance tol = tolerance(op, dtype, cols);
  const std::string bad = bench::compare(run_op(op, small_dev).to_vector<float>(),
                                         run_op(op, small).to_vector<float>(), tol.atol, tol.rtol);
  if (!bad.empty())
    return "small (" + std::to_string(rows) + ", " + std::to_string(cols) + "): " + bad;

  return bench::compare_end_rows(
      timed_out, timed_out.size(0), "rows ", tolerance(op, dtype, timed_in[0].size(1)),
      [&](int64_t r0) { return run_op(op, to_cpu(rows_of(timed_in, r0, 2))); });
}

#ifdef SINTER_WITH_CUDA

void run_elementwise(benchmark::State& state, Op op, DType dtype) {
  const Device dev = Device::cuda(0);
  const TensorOptions opts{.dtype = dtype, .device = dev};
  manual_seed(0);
  std::vector<std::vector<Tensor>> sets;
  for (int i = 0; i < bench::kInputSets; ++i) sets.push_back(make_inputs(op, kRows, kCols, opts));

  if (bench::failed(state, std::string(op_name(op)) + " differs from the CPU: ",
                    validate(op, dtype, sets[0], run_op(op, sets[0])))) {
    return;
  }
  auto ours = [&](int i) { (void)run_op(op, sets[i % bench::kInputSets]); };
  bench::time_bytes_against_copy(state, bytes_moved(op, kRows, kCols, dtype),
                                 [&](int reps) { return bench::time_ms(reps, ours); });
}

#endif  // SINTER_WITH_CUDA

void register_all() {
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (Op op : {Op::Add, Op::MulRow, Op::Gelu, Op::SumLast}) {
      const std::string name = std::string(op_name(op)) + "/" + dtype_name(dtype) + "/" +
                               std::to_string(kRows) + "x" + std::to_string(kCols);
      auto body = [=]([[maybe_unused]] benchmark::State& state) {
#ifdef SINTER_WITH_CUDA
        run_elementwise(state, op, dtype);
#endif
      };
      bench::register_device(name, 9, benchmark::kMicrosecond, body);
    }
  }
}

// Each op and dtype on a (6, 1030) problem on the CPU: inputs, the op, its byte count and the
// validation, through the same code as on a device.
void smoke() {
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (Op op : {Op::Add, Op::MulRow, Op::Gelu, Op::SumLast}) {
      const std::string name = std::string(op_name(op)) + "/" + dtype_name(dtype) + "/6x1030";
      bench::smoke_guarded(name, [&]() -> std::string {
        manual_seed(0);
        const std::vector<Tensor> in = make_inputs(op, 6, 1030, {.dtype = dtype});
        if (bytes_moved(op, 6, 1030, dtype) <= 0) return "no bytes counted";
        return validate(op, dtype, in, run_op(op, in));
      });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return sinter::bench::bench_main("bench_elementwise", argc, argv, smoke, register_all);
}

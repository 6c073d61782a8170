// The op table: one row per op drives an fp64 central-difference gradcheck on the CPU and a
// CPU-vs-CUDA parity check (forward and backward, f32 and bf16, fresh random inputs, outputs
// poisoned first), whose CPU half also runs on machines without a GPU.
//
// Adding an op, elementwise or with kernels of its own: CONTRIBUTING.md lists the files. Its row
// in tests/ops_<family>.cpp (the family of its src/ops/ file) names it in CamelCase and gives the
// input shapes, the function of the inputs and, if the op needs one, the input domain; both checks
// pick the row up. Known values (KnownValues in ops_elementwise.cpp, and each family's own tests)
// pin a function whose gradcheck alone would not catch a wrong formula.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>

#include "op_table.h"

namespace sinter {
namespace {

using testing::Domain;
using testing::Inputs;
using testing::OpRow;

Tensor make_input(const Shape& shape, Domain domain, Generator& gen) {
  const TensorOptions f64{.dtype = DType::f64};
  switch (domain) {
    case Domain::Any:
      return randn(shape, f64, &gen);
    case Domain::Positive:
      return add(mul(rand(shape, f64, &gen), 1.5), 0.5);
    case Domain::NonZero: {
      Tensor mag = add(rand(shape, f64, &gen), 0.3);
      Tensor s = sign(sub(rand(shape, f64, &gen), 0.5));
      return mul(mag, where(eq(s, 0.0), ones_like(s), s));
    }
    case Domain::Unit:
      return mul(sub(rand(shape, f64, &gen), 0.5), 1.8);
  }
  return {};
}

// f64 inputs on the CPU, fresh for `seed`.
Inputs make_inputs(const OpRow& row, uint64_t seed) {
  Generator gen(seed);
  Inputs in;
  for (const Shape& s : row.shapes) in.push_back(make_input(s, row.domain, gen));
  return in;
}

std::vector<OpRow> op_table() {
  std::vector<OpRow> rows;
  for (auto family : testing::op_families()) {
    std::vector<OpRow> more = family();
    rows.insert(rows.end(), more.begin(), more.end());
  }
  return rows;
}

std::vector<OpRow> differentiable_rows() {
  std::vector<OpRow> rows;
  for (const OpRow& r : op_table()) {
    if (r.grad) rows.push_back(r);
  }
  return rows;
}

std::string row_name(const ::testing::TestParamInfo<OpRow>& info) { return info.param.name; }

// sum(out * w) for fixed random weights w: a scalar whose gradient reaches every output element.
Tensor weighted(const Tensor& out, const Tensor& w) { return sum(mul(out, w)); }

class GradCheck : public ::testing::TestWithParam<OpRow> {};

TEST_P(GradCheck, MatchesFiniteDifferences) {
  const OpRow& row = GetParam();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Inputs in = make_inputs(row, seed);
  for (Tensor& t : in) t.requires_grad_(true);
  Tensor out = row.fn(in);
  ASSERT_TRUE(is_floating(out.dtype()));
  Generator wgen(seed ^ 0x5bd1e995u);
  Tensor w = randn(out.shape(), {.dtype = DType::f64}, &wgen);
  weighted(out, w).backward();

  const double eps = row.fd_eps;
  NoGradGuard ng;
  for (size_t k = 0; k < in.size(); ++k) {
    Tensor analytic = in[k].grad().defined() ? in[k].grad() : zeros_like(in[k]);
    auto* x = static_cast<double*>(in[k].data_ptr());
    std::vector<double> a = analytic.to_vector<double>();
    for (int64_t j = 0; j < in[k].numel(); ++j) {
      const double orig = x[j];
      x[j] = orig + eps;
      const double lp = weighted(row.fn(in), w).item<double>();
      x[j] = orig - eps;
      const double lm = weighted(row.fn(in), w).item<double>();
      x[j] = orig;
      const double numeric = (lp - lm) / (2 * eps);
      EXPECT_NEAR(a[j], numeric, 1e-5 + 1e-3 * std::abs(numeric))
          << row.name << ": input " << k << ", element " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, GradCheck, ::testing::ValuesIn(differentiable_rows()), row_name);

class CudaParity : public ::testing::TestWithParam<OpRow> {};

void check_parity(const OpRow& row, DType dtype, double tol) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(row.name + " " + dtype_name(dtype) + ", seed " + std::to_string(seed));
  Inputs base = make_inputs(row, seed);
  Inputs cpu_in, gpu_in;
  for (const Tensor& b : base) {
    Tensor c = b.to(dtype);
    cpu_in.push_back(c.clone().requires_grad_(row.grad));
    gpu_in.push_back(c.to(Device::cuda()).requires_grad_(row.grad));
  }
  testing::poison_cuda_cache();
  Tensor out_c = row.fn(cpu_in);
  Tensor out_g = row.fn(gpu_in);
  ASSERT_EQ(out_g.device(), Device::cuda());
  const double t = is_floating(out_c.dtype()) ? tol : 0.0;
  EXPECT_TRUE(testing::all_close(out_g.cpu(), out_c, t, t)) << "forward";
  if (!row.grad) return;
  Generator wgen(seed ^ 0x5bd1e995u);
  Tensor w = randn(out_c.shape(), {.dtype = DType::f64}, &wgen).to(dtype);
  testing::poison_cuda_cache();
  weighted(out_c, w).backward();
  weighted(out_g, w.to(Device::cuda())).backward();
  for (size_t k = 0; k < cpu_in.size(); ++k) {
    ASSERT_EQ(cpu_in[k].grad().defined(), gpu_in[k].grad().defined()) << "input " << k;
    if (!cpu_in[k].grad().defined()) continue;
    EXPECT_TRUE(testing::all_close(gpu_in[k].grad().cpu(), cpu_in[k].grad(), tol, tol))
        << "gradient of input " << k;
  }
}

TEST_P(CudaParity, MatchesCpu) {
  SINTER_REQUIRE_CUDA();
  const OpRow& row = GetParam();
  check_parity(row, DType::f32, row.tol);
  if (row.bf16) check_parity(row, DType::bf16, row.bf16_tol);
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaParity, ::testing::ValuesIn(op_table()), row_name);

// The CPU half of the parity check, on every machine: a row that throws on the CPU (shapes that do
// not fit together, a dtype an op refuses) fails here, before a GPU run would find it.
class CpuRun : public ::testing::TestWithParam<OpRow> {};

TEST_P(CpuRun, RunsAsTheParityCheckRunsIt) {
  const OpRow& row = GetParam();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (DType dtype : {DType::f32, DType::bf16}) {
    if (dtype == DType::bf16 && !row.bf16) continue;
    SCOPED_TRACE(dtype_name(dtype));
    Inputs in;
    for (const Tensor& b : make_inputs(row, seed))
      in.push_back(b.to(dtype).requires_grad_(row.grad));
    Tensor out;
    ASSERT_NO_THROW(out = row.fn(in));
    if (!row.grad) continue;
    Generator wgen(seed ^ 0x5bd1e995u);
    ASSERT_NO_THROW(
        weighted(out, randn(out.shape(), {.dtype = DType::f64}, &wgen).to(dtype)).backward());
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CpuRun, ::testing::ValuesIn(op_table()), row_name);

}  // namespace
}  // namespace sinter

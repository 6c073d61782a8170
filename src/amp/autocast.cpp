// Autocast state (per thread, per device type), the policy table, and the cast cache.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "internal/autocast_impl.h"
#include "sinter/autograd.h"
#include "sinter/core/error.h"

namespace sinter::autocast {
namespace {

struct State {
  std::array<std::optional<DType>, 2> dtype;  // by DeviceType
  int depth = 0;                              // guards alive (the cache lives while depth > 0)
  bool suspended = false;
  struct Cached {
    Tensor source;  // held, so that its TensorImpl address is not reused while cached
    uint32_t version;
    Tensor cast;
  };
  // Keyed by the parameter's TensorImpl and the target dtype.
  std::unordered_map<const void*, std::array<std::optional<Cached>, kNumDTypes>> cache;
};

thread_local State t_state;

size_t slot(DeviceType d) { return static_cast<size_t>(d); }

}  // namespace

Guard::Guard(DeviceType device, std::optional<DType> dtype_opt, bool enabled) : device_(device) {
  // PyTorch's defaults: f16 on CUDA, bf16 on the CPU.
  const DType dtype = dtype_opt.value_or(device == DeviceType::cuda ? DType::f16 : DType::bf16);
  if (enabled) {
    SINTER_CHECK(dtype == DType::bf16 || dtype == DType::f16,
                 "autocast::Guard: the dtype must be bf16 or f16, got ", dtype);
    SINTER_CHECK(dtype == DType::bf16 || device == DeviceType::cuda,
                 "autocast::Guard: f16 autocast is for CUDA; use bf16 on the CPU");
  }
  previous_ = t_state.dtype[slot(device)];
  t_state.dtype[slot(device)] = enabled ? std::optional<DType>(dtype) : std::nullopt;
  ++t_state.depth;
}

Guard::~Guard() {
  t_state.dtype[slot(device_)] = previous_;
  if (--t_state.depth == 0) t_state.cache.clear();
}

std::optional<DType> dtype(DeviceType device) { return t_state.dtype[slot(device)]; }

const std::vector<PolicyRow>& policy_table() {
#define SINTER_AUTOCAST_ROW_(op, cuda, cpu) {#op, Policy::cuda, Policy::cpu},
  static const std::vector<PolicyRow> table = {SINTER_AUTOCAST_POLICY(SINTER_AUTOCAST_ROW_)};
#undef SINTER_AUTOCAST_ROW_
  return table;
}

namespace {

Policy of_device(const PolicyRow& row, DeviceType device) {
  return device == DeviceType::cpu ? row.cpu : row.cuda;
}

}  // namespace

Policy policy(Op op, DeviceType device) {
  return of_device(policy_table().at(static_cast<size_t>(op)), device);
}

std::optional<Policy> policy(std::string_view op, DeviceType device) {
  const auto& table = policy_table();
  const auto it =
      std::find_if(table.begin(), table.end(), [&](const auto& row) { return row.op == op; });
  if (it == table.end()) return std::nullopt;
  return of_device(*it, device);
}

namespace detail {

std::optional<DType> target(Op op, const Tensor& t) {
  if (t_state.suspended || !t.defined()) return std::nullopt;
  const std::optional<DType> low = t_state.dtype[slot(t.device().type)];
  if (!low) return std::nullopt;
  switch (policy(op, t.device().type)) {
    case Policy::LowPrecision:
      return *low;
    case Policy::Float32:
      return DType::f32;
    case Policy::Inputs:
      break;
  }
  return std::nullopt;
}

// A parameter's cast is made once per outermost Guard and reused while the parameter is unchanged
// and the cast still links it to the graph: one made under NoGradGuard has no link (reused in
// training, the parameter would get no gradient), and a backward without retain_graph releases
// the link of the one it went through (gradient accumulation runs several backwards in a guard).
Tensor cast(const Tensor& t, DType to) {
  // f64 asks for its precision: it is left as it is, as in PyTorch.
  if (!t.defined() || !is_floating(t.dtype()) || t.dtype() == DType::f64 || t.dtype() == to)
    return t;
  if (!(t.is_leaf() && t.requires_grad()) || t_state.depth == 0 || !GradMode::is_enabled())
    return t.to(to);
  auto& entry = t_state.cache[t.impl()][static_cast<size_t>(to)];
  if (!entry || entry->version != t.version() || !entry->cast.grad_fn() ||
      entry->cast.grad_fn()->released())
    entry = State::Cached{t, t.version(), t.to(to)};
  return entry->cast;
}

Suspend::Suspend(bool suspend) : previous_(t_state.suspended) { t_state.suspended = suspend; }
Suspend::~Suspend() { t_state.suspended = previous_; }

}  // namespace detail
}  // namespace sinter::autocast

// Note [deterministic algorithms]
// With sinter::use_deterministic_algorithms(true), a CUDA kernel that would add into one place
// from many threads with atomics (whose order the hardware picks, so the rounding changes from run
// to run) takes a path whose order is fixed by the data alone:
// - conv2d weight gradient with split K: each split writes its partial sums to its own slice of a
//   scratch buffer, and a second kernel adds the slices in split order (kernels/conv.cu);
// - layer_norm's weight and bias gradients: one partial sum per row chunk, added in chunk order
//   (kernels/norm.cu);
// - index_add (the backward of embedding and index_select) and scatter_add (of gather): the
//   targets are sorted stably with their positions (CUB's radix sort), then one thread per target
//   adds its sources in position order (kernels/index.cu). For f32 and f64 that is the CPU's order,
//   so the two agree bitwise. bf16 and f16 add in f32 and round once per target, where the CPU
//   reference and the atomics round after every addition: in this mode they are more accurate,
//   and differ from the CPU reference by more than the order.
// Every other kernel is deterministic already: reductions use fixed trees, the GEMMs never split K
// across blocks, the attention backward has no atomics, the backward of interpolate and of
// adaptive max pooling gather per input element (kernels/gather_reach.h), and the CPU runs each
// kernel on one thread (OpenBLAS with a fixed thread count). The flag is read on the host when a
// kernel is launched, so a CUDA graph keeps the paths it was captured with.
#include "sinter/core/determinism.h"

#include <atomic>

namespace sinter {
namespace {
std::atomic<bool> deterministic{false};
}  // namespace

void use_deterministic_algorithms(bool on) { deterministic.store(on, std::memory_order_relaxed); }

bool deterministic_algorithms_enabled() { return deterministic.load(std::memory_order_relaxed); }

}  // namespace sinter

// The autograd engine: graph nodes, grad mode, and the backward walk (Note [autograd graph]).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "sinter/core/noncopyable.h"
#include "sinter/tensor.h"

namespace sinter {

// Note [autograd graph]
// Every differentiable op with an input that requires grad records a Node whose next_edges point at
// the nodes that produced its inputs (a leaf's edge points at its AccumulateGrad node). Saved
// tensors are detached aliases that remember the version they were saved at, so the graph never
// holds a tensor's autograd state (no reference cycles) and an in-place change is caught at
// backward time. backward() walks the nodes reachable from the root in reverse topological order
// (the node created last runs first among those ready), summing gradients per input slot.

class Node;

struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  // Unlinks the chain of nodes only this one keeps alive iteratively, so deep graphs do not
  // overflow the stack when freed.
  virtual ~Node();
  // grads[i] is the gradient of output i (undefined when nothing flowed into it). Returns one
  // gradient per next edge (undefined for inputs that need none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors after a backward without retain_graph.
  virtual void release() { released_ = true; }
  bool released() const { return released_; }

  std::vector<Edge> next_edges;
  uint32_t num_outputs = 1;
  uint64_t sequence_nr;
  // Hooks on the gradient of one output (registered through Tensor::register_hook on a non-leaf).
  std::vector<std::pair<uint32_t, TensorHook>> pre_hooks;
  // The forward inputs' shapes and dtypes, recorded while anomaly detection is on (Note [anomaly
  // detection]); empty otherwise.
  std::string forward_inputs;

 protected:
  bool released_ = false;
};

// Whether ops record the graph; thread-local, on by default.
struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

class NoGradGuard : NonCopyable {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }

 private:
  bool prev_;
};

// Note [inference mode]
// While an InferenceMode guard lives in a thread (as PyTorch's torch.inference_mode), grad mode is
// off, so no op records a graph or saves a tensor, and every tensor made in that thread is an
// inference tensor (Tensor::is_inference; views of one are too). An inference tensor keeps no
// version count (in-place ops on it bump nothing), and it cannot enter autograd later: outside
// InferenceMode, an op that would save one for backward, requires_grad_(true) on one, and an
// in-place op on one are errors that say to clone() it (a clone made outside is a normal tensor).
// Guards nest; InferenceMode(false) turns the mode off inside an enabled region (grad mode is
// then as it was outside).
class InferenceMode : NonCopyable {
 public:
  explicit InferenceMode(bool enabled = true);
  ~InferenceMode();
  static bool is_enabled();

 private:
  bool prev_mode_;
  bool prev_grad_;
};

namespace autograd {

// Runs backward from `roots` seeded with `grads` (same length; an undefined seed of a scalar root
// is 1).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
              bool retain_graph = false);

// Note [autograd.grad]
// grad(outputs, inputs) returns the gradients of the outputs (seeded with grad_outputs; none: 1 for
// each scalar output) with respect to each input, as torch.autograd.grad: nothing is accumulated
// into any .grad(), and only the part of the graph between the outputs and the inputs runs (a
// parameter not among the inputs is not touched). An input may be a leaf or the result of an op;
// its hooks run on the gradient returned, as they would before it was accumulated. Each input
// must require grad; one the outputs do not depend on is an error unless allow_unused, and then
// its gradient is undefined. The graph is freed unless retain_graph. The gradients are computed
// without a graph of their own (there is no create_graph: no second derivatives).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool allow_unused = false);

// Queues `callback` to run when the backward() now running on this thread has run all its nodes,
// before it returns (the outermost one, where a node runs a backward of its own: checkpoint());
// callbacks run in the order they were queued (one may queue another, which runs after the rest).
// Valid only inside a backward (from a hook or a node); outside, it throws. If the backward fails,
// or a callback throws, the callbacks not yet run are dropped (destroyed) and the error propagates.
// DistributedDataParallel uses this to wait for its last all-reduce.
void queue_callback(std::function<void()> callback);

// Note [activation checkpointing]
// checkpoint(fn, inputs) returns fn(inputs) computed without a graph, so none of fn's intermediates
// are kept for backward; it saves only its inputs. When backward reaches the outputs, the node
// recomputes fn on the saved inputs with grad mode on, the default generator at the state it had
// at the forward (dropout draws the same mask) and the forward's autocast dtypes, and runs a
// backward of its own from the recomputed outputs: the parameters fn uses get their gradients
// there, the inputs' gradients go on through the outer graph. The result is bitwise that of the
// plain fn on deterministic kernels, and the memory of fn's activations is needed one checkpoint
// at a time. The default generator is set back after the recomputation. At least one input must
// require grad (else no node would be recorded and fn's parameters would get no gradient). fn
// must compute the same thing twice: it may not depend on state it changes (a BatchNorm's running
// statistics would be updated twice).
std::vector<Tensor> checkpoint(
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& inputs);
// One input and one output.
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input);

// Note [in-place autograd]
// An in-place op (x.add_(y), x.mul_(2), x.copy_(y), x[i] = y from Python, ...) on a tensor that
// autograd records, or with a source that requires grad, is recorded as PyTorch records it:
// - Its result is computed out of place, f(x), with the graph of f, and written into x's memory.
//   When f's graph saved x itself (its backward needs x's old values: x.mul_(w) with w requiring
//   grad), f runs again on a clone of x, so that the saved values stay the old ones.
// - The write is copy_'s node: x's new grad_fn passes the gradient to the result (summed to its
//   shape, in its dtype) and zeros to x's old graph.
// - x a view (made by a view op: slice, select, transpose, view, ...) writes its base's memory, so
//   the base is rebased: its new grad_fn passes the gradient outside the view's elements to the
//   base's old graph and the gradient of the view's elements to the result; the view's own grad_fn
//   becomes its elements taken from the new base. Other views of the base made before are brought
//   up to date the same way when next used (the base counts its rebases; each view remembers the
//   count its graph was made at).
// - Refused, as PyTorch refuses them: an in-place op on a leaf that requires grad or on a view of
//   one (optimizers write under NoGradGuard), and a backward that needs a tensor's values from
//   before an in-place op changed it (SavedTensor's version check names the op).
// Without grad mode, or when nothing requires grad, in-place ops write directly and record nothing.

// Whether writing `sources` into `self` in place is recorded: grad mode is on, and self, its base
// (for a view) or a source requires grad.
bool records_in_place(const Tensor& self, std::initializer_list<const Tensor*> sources = {});

// Refuses, naming `op`, a recorded in-place write into a leaf that requires grad or into a view
// of one.
void check_in_place_target(const char* op, const Tensor& self);

// Writes f(self) into self (self's dtype kept; f's result broadcast to self's shape), recorded per
// Note [in-place autograd] when it must be; `op` names the op in errors.
Tensor& in_place(Tensor& self, const std::function<Tensor(const Tensor&)>& f, const char* op);

// Note [anomaly detection]
// While a DetectAnomalyGuard is alive in a thread, ops record their inputs' shapes with each graph
// node, and backward checks every gradient a node produces: the first NaN or inf stops it with a
// sinter::Error naming the node (the forward op that created it), the input the gradient is for,
// and the forward inputs' shapes. Each check reads a value back from the device, so the mode is for
// finding a bug, not for training at full speed. Guards nest.
class DetectAnomalyGuard : NonCopyable {
 public:
  explicit DetectAnomalyGuard(bool enabled = true);
  ~DetectAnomalyGuard();

 private:
  bool previous_;
};

bool is_anomaly_enabled();

}  // namespace autograd
}  // namespace sinter

// The backward engine (Note [autograd graph]): grad mode, leaf accumulation, hooks, and the walk.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "internal/profile_op.h"
#include "internal/tensor_impl.h"
#include "sinter/ops.h"

namespace sinter {

namespace {

thread_local bool t_anomaly = false;  // Note [anomaly detection]
thread_local bool g_grad_enabled = true;
thread_local bool t_inference_mode = false;  // Note [inference mode]
// The callback queue of each backward() running on this thread, innermost last (a hook may run a
// backward of its own).
thread_local std::vector<std::vector<std::function<void()>>*> g_callback_queues;
std::atomic<uint64_t> g_next_sequence_nr{0};
}  // namespace

bool GradMode::is_enabled() { return g_grad_enabled; }
void GradMode::set_enabled(bool enabled) { g_grad_enabled = enabled; }

InferenceMode::InferenceMode(bool enabled)
    : prev_mode_(t_inference_mode), prev_grad_(g_grad_enabled) {
  t_inference_mode = enabled;
  if (enabled) g_grad_enabled = false;
}

InferenceMode::~InferenceMode() {
  t_inference_mode = prev_mode_;
  g_grad_enabled = prev_grad_;
}

bool InferenceMode::is_enabled() { return t_inference_mode; }

bool Tensor::is_inference() const { return impl_ && impl_->inference; }

Node::Node() : sequence_nr(g_next_sequence_nr.fetch_add(1)) {}

Node::~Node() {
  std::vector<std::shared_ptr<Node>> stack;
  for (Edge& e : next_edges) {
    if (e.node) stack.push_back(std::move(e.node));
  }
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    if (n.use_count() != 1) continue;
    for (Edge& e : n->next_edges) {
      if (e.node) stack.push_back(std::move(e.node));
    }
  }
}

namespace autograd {

// Sums the gradients that reach a leaf into its grad(), running the leaf's hooks around it.
class AccumulateGrad : public Node {
 public:
  // Per Note [accumulation first], the highest priority: it runs as soon as its gradient is whole.
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {
    sequence_nr = std::numeric_limits<uint64_t>::max();
  }
  std::string name() const override { return "AccumulateGrad"; }
  void release() override {}  // holds no saved tensors: a leaf may accumulate again

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = std::move(grads[0]);
    if (!g.defined()) return {};
    Tensor var(leaf_);
    AutogradMeta& m = leaf_->meta();
    g = hooked(std::move(g));
    SINTER_CHECK(g.shape() == var.shape(), "backward: gradient of shape ", shape_str(g.shape()),
                 " for a leaf of shape ", shape_str(var.shape()));
    if (!m.grad.defined()) {
      if (sole_gradient(g, var)) {
        m.grad = std::move(g);  // Note [gradient stealing]
      } else {
        m.grad = g.to(var.dtype()).contiguous();
        if (m.grad.impl() == g.impl() || m.grad.storage().is_same(g.storage()))
          m.grad = m.grad.clone();
      }
    } else {
      m.grad.add_(g.dtype() == m.grad.dtype() ? g : g.to(m.grad.dtype()));
    }
    for (auto& hook : m.post_hooks) hook(var);
    return {};
  }

  // Note [gradient stealing]
  // A leaf's first gradient becomes its grad() as it is, without a copy, where nothing else can
  // see it: this tensor the only handle of memory the library allocated (no view, no saved
  // tensor, no hook that kept it, no other edge that carries it; not the caller's memory of
  // from_blob or DLPack), exactly the leaf's dtype, device and size, dense, an ordinary tensor
  // (not made under InferenceMode, which later in-place accumulation would refuse) and outside any
  // graph (a hook's result that requires grad stays a copy). PyTorch's AccumulateGrad does the
  // same. The copy took an eighth of the mlp workload's backward (1.9M parameters).
  static bool sole_gradient(const Tensor& g, const Tensor& var) {
    const size_t bytes = static_cast<size_t>(g.numel()) * element_size(g.dtype());
    const Storage& s = g.storage();
    return g.impl_ptr().use_count() == 1 && s.use_count() == 1 && s.owns_memory() &&
           g.dtype() == var.dtype() && g.device() == var.device() && !g.requires_grad() &&
           !g.is_inference() && g.is_contiguous() && g.storage_offset() == 0 && s.nbytes() == bytes;
  }

  // The leaf's hooks on the gradient that came (grads[0], when defined), in place.
  void apply_hooks(std::vector<Tensor>& grads) const {
    if (!grads.empty() && grads[0].defined()) grads[0] = hooked(std::move(grads[0]));
  }

 private:
  Tensor hooked(Tensor g) const {
    for (auto& hook : leaf_->meta().hooks) {
      Tensor r = hook(g);
      if (r.defined()) g = r;
    }
    return g;
  }

  std::shared_ptr<TensorImpl> leaf_;
};

SavedTensor::SavedTensor(const Tensor& t, const char* op)
    : t_(t.defined() ? alias_of(t) : Tensor()), version_(t.defined() ? t.version() : 0), op_(op) {
  SINTER_CHECK(!t.is_inference() || !GradMode::is_enabled(), op, ": an input (shape ",
               shape_str(t.shape()),
               ") was made under InferenceMode, and inference tensors cannot be saved for "
               "backward; clone() it outside InferenceMode to get a normal tensor");
  // Leaves that require grad (parameters) are not counted: they live whether saved or not.
  if (t_.defined() && profiler::detail::g_recording.load(std::memory_order_relaxed) &&
      t_.storage().nbytes() > 0 && !(t.is_leaf() && t.requires_grad())) {
    counted_ = profiler::detail::saved_add(t_.storage().id(), t_.storage().nbytes());
  }
}

SavedTensor::SavedTensor(const SavedTensor& other)
    : t_(other.t_), version_(other.version_), op_(other.op_), counted_(other.counted_) {
  if (counted_) profiler::detail::saved_add(t_.storage().id(), t_.storage().nbytes());
}

SavedTensor& SavedTensor::operator=(const SavedTensor& other) {
  if (this == &other) return *this;
  SavedTensor copy(other);
  if (counted_) profiler::detail::saved_remove(t_.storage().id());
  t_ = std::move(copy.t_);
  version_ = copy.version_;
  op_ = copy.op_;
  counted_ = copy.counted_;
  copy.counted_ = false;
  return *this;
}

SavedTensor::~SavedTensor() {
  if (counted_) profiler::detail::saved_remove(t_.storage().id());
}

Tensor SavedTensor::get() const {
  SINTER_CHECK(!t_.defined() || t_.version() == version_, op_,
               " backward: a tensor saved for backward was modified by an in-place operation (its "
               "version is ",
               t_.version(), ", it was saved at version ", version_,
               "); clone it before changing it in place");
  return t_;
}

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grads) {
  SINTER_CHECK(
      fn_ != nullptr, name_, " backward: trying to backward through the graph a second ",
      "time, but its saved tensors were freed; pass retain_graph=true to the first backward");
  std::vector<Tensor> out = fn_(grads);
  SINTER_CHECK(out.size() == next_edges.size(), name_, " backward: returned ", out.size(),
               " gradients for ", next_edges.size(), " inputs");
  return out;
}

void FunctionNode::release() {
  fn_ = nullptr;
  released_ = true;
}

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  return std::any_of(inputs.begin(), inputs.end(),
                     [](const Tensor* t) { return t && t->defined() && t->requires_grad(); });
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  return std::any_of(inputs.begin(), inputs.end(),
                     [](const Tensor& t) { return t.defined() && t.requires_grad(); });
}

namespace {

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  AutogradMeta& m = leaf.impl()->meta();
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(leaf.impl_ptr());
    m.grad_accumulator = acc;
  }
  return acc;
}

Edge edge_of(const Tensor& t) {
  refresh_view(t);  // Note [in-place autograd]
  if (!t.defined() || !t.requires_grad()) return {};
  AutogradMeta& m = t.impl()->meta();
  if (m.grad_fn) return {m.grad_fn, m.output_nr};
  return {grad_accumulator(t), 0};
}

}  // namespace

void record(const char* name, const std::vector<Tensor*>& outputs,
            const std::vector<Tensor>& inputs, BackwardFn fn) {
  auto node = std::make_shared<FunctionNode>(name, std::move(fn));
  node->num_outputs = static_cast<uint32_t>(outputs.size());
  if (t_anomaly) {  // Note [anomaly detection]
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& in = inputs[i];
      node->forward_inputs +=
          (i ? ", " : "") + (in.defined() ? shape_str(in.shape()) + " " + dtype_name(in.dtype())
                                          : std::string("undefined"));
    }
  }
  node->next_edges.reserve(inputs.size());
  for (const Tensor& in : inputs) node->next_edges.push_back(edge_of(in));
  for (size_t i = 0; i < outputs.size(); ++i) {
    AutogradMeta& m = outputs[i]->impl()->meta();
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = static_cast<uint32_t>(i);
  }
}

void queue_callback(std::function<void()> callback) {
  SINTER_CHECK(!g_callback_queues.empty(),
               "queue_callback: called outside backward(); a callback can be queued only from a "
               "hook or node while backward runs");
  SINTER_CHECK(callback != nullptr, "queue_callback: empty callback");
  // The outermost backward's: a backward run inside a node (autograd::checkpoint's recomputation)
  // is part of it, and what waits for the whole backward (DDP's last all-reduce) must wait for it.
  g_callback_queues.front()->push_back(std::move(callback));
}

namespace {

// Throws the error of Note [anomaly detection] when a gradient of `node` holds a NaN or inf.
void check_anomaly(const Node& node, const std::vector<Tensor>& out) {
  for (size_t j = 0; j < out.size(); ++j) {
    const Tensor& g = out[j];
    if (!g.defined() || !is_floating(g.dtype()) || g.numel() == 0) continue;
    // 0 * x is 0 for every finite x and NaN for inf and NaN: one reduction says which.
    const double probe = sum(mul(g.detach(), 0.0)).to(DType::f64).item<double>();
    if (probe == 0.0) continue;
    const std::vector<double> v = g.detach().to(DType::f64).cpu().reshape({-1}).to_vector<double>();
    const bool nan = std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
    SINTER_THROW("autograd anomaly: the backward of ", node.name(), " produced ",
                 nan ? "NaN" : "inf", " in the gradient of its input ", j, " (shape ",
                 shape_str(g.shape()), ")",
                 node.forward_inputs.empty() ? std::string()
                                             : "; the forward op's inputs: " + node.forward_inputs);
  }
}
}  // namespace

DetectAnomalyGuard::DetectAnomalyGuard(bool enabled) : previous_(t_anomaly) { t_anomaly = enabled; }
DetectAnomalyGuard::~DetectAnomalyGuard() { t_anomaly = previous_; }
bool is_anomaly_enabled() { return t_anomaly; }

namespace {

// The gradient that seeds root i: `grad`, or ones for a scalar root given none.
Tensor seed_of(const Tensor& root, const Tensor& grad, size_t i) {
  SINTER_CHECK(root.defined(), "backward: root ", i, " is an undefined tensor");
  SINTER_CHECK(root.requires_grad(), "backward: tensor ", i, " of shape ", shape_str(root.shape()),
               " does not require grad and has no grad_fn");
  Tensor seed = grad;
  if (!seed.defined()) {
    SINTER_CHECK(root.numel() == 1,
                 "backward: a gradient can be implied only for a scalar; got "
                 "shape ",
                 shape_str(root.shape()), ", pass gradient explicitly");
    seed = ones(root.shape(), {.dtype = root.dtype(), .device = root.device()});
  }
  SINTER_CHECK(seed.shape() == root.shape(), "backward: gradient of shape ",
               shape_str(seed.shape()), " for a tensor of shape ", shape_str(root.shape()));
  SINTER_CHECK(seed.device() == root.device(), "backward: gradient on ", seed.device(),
               " for a tensor on ", root.device());
  SINTER_CHECK(seed.dtype() == root.dtype(), "backward: gradient of dtype ", seed.dtype(),
               " for a tensor of dtype ", root.dtype());
  return seed;
}

// For every node reachable from the roots, the number of edges that point at it (deps), and
// seen[n] true for each. With `keep`, only the edges into kept nodes count, and only from nodes
// that `expand`.
void count_dependencies(const std::vector<std::shared_ptr<Node>>& root_nodes,
                        std::unordered_map<Node*, int>& deps, std::unordered_map<Node*, bool>& seen,
                        const std::function<bool(Node*)>& keep = nullptr,
                        const std::function<bool(Node*)>& expand = nullptr) {
  std::vector<Node*> stack;
  for (const auto& n : root_nodes) {
    if (!seen[n.get()]) {
      seen[n.get()] = true;
      stack.push_back(n.get());
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (expand && !expand(n)) continue;
    for (const Edge& e : n->next_edges) {
      if (!e.valid() || (keep && !keep(e.node.get()))) continue;
      deps[e.node.get()] += 1;
      if (!seen[e.node.get()]) {
        seen[e.node.get()] = true;
        stack.push_back(e.node.get());
      }
    }
  }
}

// The hooks on the gradients of node's outputs (`in`, one per output, undefined where none came),
// applied in place.
void apply_pre_hooks(Node* node, std::vector<Tensor>& in) {
  in.resize(node->num_outputs);
  for (auto& [slot, hook] : node->pre_hooks) {
    if (!in[slot].defined()) continue;
    Tensor r = hook(in[slot]);
    if (!r.defined()) continue;
    SINTER_CHECK(r.shape() == in[slot].shape() && r.dtype() == in[slot].dtype(),
                 "backward: a hook on the gradient of ", node->name(), " returned ",
                 shape_str(r.shape()), " ", r.dtype(), " for a gradient of ",
                 shape_str(in[slot].shape()), " ", in[slot].dtype());
    in[slot] = r;
  }
}

// The gradients of node's inputs from those of its outputs: the hooks on them first (unless
// already applied), then the node's backward; none when no gradient came.
std::vector<Tensor> run_node(Node* node, std::vector<Tensor> in, bool retain_graph,
                             bool hooked = false) {
  if (!hooked) apply_pre_hooks(node, in);
  const bool any = std::any_of(in.begin(), in.end(), [](const Tensor& t) { return t.defined(); });
  if (!any) return {};
  SINTER_CHECK(!node->released(), node->name(),
               " backward: trying to backward through the "
               "graph a second time, but its saved tensors were freed; pass retain_graph=true "
               "to the first backward");
  std::optional<profiler::detail::OpScope> scope;  // Note [profiler]
  if (profiler::detail::g_recording.load(std::memory_order_relaxed)) {
    scope.emplace(profiler::detail::Backward{}, node->name(), in);
  }
  std::vector<Tensor> out = node->apply(std::move(in));
  if (t_anomaly) check_anomaly(*node, out);
  if (!retain_graph) node->release();
  return out;
}

}  // namespace

namespace {

// What grad() asks of the walk (Note [autograd.grad]): the edges whose gradients it returns, and
// which nodes are worth running.
struct Capture {
  std::vector<Edge> edges;
  std::unordered_set<Node*> targets;  // the edges' nodes
  std::unordered_set<Node*> through;  // nodes with a target below them: these run
  std::vector<Tensor> grads;          // one per edge, undefined where none came
};

// Fills capture.through over the graph below `root_nodes` (iteratively: graphs are deep).
void find_paths(const std::vector<std::shared_ptr<Node>>& root_nodes, Capture& capture) {
  std::unordered_map<Node*, bool> reaches;  // node -> a target is it or below it
  std::vector<std::pair<Node*, size_t>> stack;
  for (const auto& r : root_nodes) {
    if (reaches.count(r.get())) continue;
    stack.emplace_back(r.get(), 0);
    while (!stack.empty()) {
      Node* n = stack.back().first;
      size_t& next = stack.back().second;
      if (next < n->next_edges.size()) {
        Node* child = n->next_edges[next++].node.get();
        if (child != nullptr && !reaches.count(child)) stack.emplace_back(child, 0);
        continue;
      }
      bool below = false;
      for (const Edge& e : n->next_edges) below = below || (e.valid() && reaches[e.node.get()]);
      if (below) capture.through.insert(n);
      reaches[n] = below || capture.targets.count(n) > 0;
      stack.pop_back();
    }
  }
}

// The walk of backward() and grad(): seeded at the roots, each node runs once all its gradients
// have come, latest first. With a capture, only nodes on a path to its edges take part, and the
// gradients of its edges are taken as they complete.
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                  bool retain_graph, Capture* capture) {
  SINTER_CHECK(roots.size() == grads.size(), "backward: ", roots.size(), " roots but ",
               grads.size(), " gradients");
  NoGradGuard no_grad;
  // The backward ops take the dtypes the forward chose (autocast::Guard's documentation).
  const autocast::detail::Suspend no_autocast;

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::unordered_map<Node*, int> deps;
  std::vector<std::shared_ptr<Node>> root_nodes;

  auto accumulate = [&](Node* node, uint32_t slot, Tensor g) {
    auto& buf = buffers[node];
    if (buf.empty()) buf.resize(node->num_outputs);
    if (!buf[slot].defined()) {
      buf[slot] = std::move(g);
    } else {
      buf[slot] = add(buf[slot], g);
    }
  };

  std::vector<Tensor> seeds;
  for (size_t i = 0; i < roots.size(); ++i) {
    seeds.push_back(seed_of(roots[i], grads[i], i));
    root_nodes.push_back(edge_of(roots[i]).node);
  }
  std::function<bool(Node*)> wanted = nullptr, runs = nullptr;
  if (capture != nullptr) {
    find_paths(root_nodes, *capture);
    wanted = [capture](Node* n) {
      return capture->targets.count(n) > 0 || capture->through.count(n) > 0;
    };
    runs = [capture](Node* n) { return capture->through.count(n) > 0; };
    std::erase_if(root_nodes, [&](const std::shared_ptr<Node>& n) { return !wanted(n.get()); });
  }
  for (size_t i = 0; i < roots.size(); ++i) {
    const Edge e = edge_of(roots[i]);
    if (!wanted || wanted(e.node.get())) accumulate(e.node.get(), e.input_nr, std::move(seeds[i]));
  }
  std::unordered_map<Node*, bool> seen;
  count_dependencies(root_nodes, deps, seen, wanted, runs);

  std::vector<std::function<void()>> callbacks;
  g_callback_queues.push_back(&callbacks);
  struct PopQueue {
    ~PopQueue() { g_callback_queues.pop_back(); }
  } pop_queue;

  // Note [accumulation first]
  // Ready nodes run latest-created first (the reverse of forward), except that a leaf's
  // AccumulateGrad runs as soon as it is ready, whenever it was created: a leaf's node lives as
  // long as any graph that uses the leaf, so its creation number depends on which earlier graphs
  // are still alive (a loss kept for logging). Ordered by it, the gradient hooks that launch
  // collectives (DistributedDataParallel's buckets, FullyShardedDataParallel's reduce-scatters)
  // would fire in a different order on a rank that keeps an old graph than on one that does not,
  // and the ranks' collectives would no longer match.
  auto later_first = [](Node* a, Node* b) { return a->sequence_nr < b->sequence_nr; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  for (auto& n : root_nodes) {
    if (deps[n.get()] == 0 && seen[n.get()]) {
      ready.push(n.get());
      seen[n.get()] = false;  // queued once
    }
  }

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> in = std::move(buffers[node]);
    buffers.erase(node);
    const bool target = capture != nullptr && capture->targets.count(node) > 0;
    if (target) {
      // A leaf's own hooks run on its gradient, as they would before accumulating it.
      if (auto* acc = dynamic_cast<AccumulateGrad*>(node)) acc->apply_hooks(in);
      apply_pre_hooks(node, in);
      for (size_t k = 0; k < capture->edges.size(); ++k) {
        const Edge& e = capture->edges[k];
        if (e.node.get() == node) capture->grads[k] = in[e.input_nr];
      }
    }
    if (runs && !runs(node)) continue;
    const std::vector<Tensor> out = run_node(node, std::move(in), retain_graph, target);
    for (size_t j = 0; j < node->next_edges.size(); ++j) {
      const Edge& e = node->next_edges[j];
      if (!e.valid() || (wanted && !wanted(e.node.get()))) continue;
      if (j < out.size() && out[j].defined()) accumulate(e.node.get(), e.input_nr, out[j]);
      if (--deps[e.node.get()] == 0) ready.push(e.node.get());
    }
  }

  // Indexed, not iterated: a callback may queue more.
  for (size_t i = 0; i < callbacks.size(); ++i) {
    std::function<void()> callback = std::move(callbacks[i]);
    callback();
  }
}

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
              bool retain_graph) {
  run_backward(roots, grads, retain_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool allow_unused) {
  SINTER_CHECK(!inputs.empty(), "grad: no inputs to differentiate with respect to");
  SINTER_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
               "grad: ", outputs.size(), " outputs but ", grad_outputs.size(), " grad_outputs");
  Capture capture;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SINTER_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "grad: input ", i,
                 inputs[i].defined() ? " (shape " + shape_str(inputs[i].shape()) + ")" : "",
                 " does not require grad and has no grad_fn");
    capture.edges.push_back(edge_of(inputs[i]));
    capture.targets.insert(capture.edges.back().node.get());
  }
  capture.grads.resize(inputs.size());
  run_backward(outputs, grad_outputs.empty() ? std::vector<Tensor>(outputs.size()) : grad_outputs,
               retain_graph, &capture);
  std::vector<Tensor> out = std::move(capture.grads);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!out[i].defined()) {
      SINTER_CHECK(allow_unused, "grad: input ", i, " (shape ", shape_str(inputs[i].shape()),
                   ") was not used to compute the outputs; pass allow_unused=true to get an "
                   "undefined gradient for it");
      continue;
    }
    if (out[i].dtype() != inputs[i].dtype()) out[i] = out[i].to(inputs[i].dtype());
  }
  return out;
}

}  // namespace autograd

// --- Tensor's autograd methods ---

bool Tensor::requires_grad() const {
  if (!impl_) return false;
  if (impl_->autograd && (impl_->autograd->requires_grad || impl_->autograd->grad_fn)) return true;
  // A view whose base an in-place op rebased since (Note [in-place autograd]).
  const std::shared_ptr<TensorImpl>& base = impl_->view_base;
  return base && base->rebases != impl_->view_seen && Tensor(base).requires_grad();
}

Tensor& Tensor::requires_grad_(bool value) {
  SINTER_CHECK(defined(), "requires_grad_: undefined tensor");
  SINTER_CHECK(!value || is_floating(dtype()),
               "requires_grad_: only floating tensors can "
               "require grad, got dtype ",
               dtype());
  SINTER_CHECK(!value || !impl_->inference || InferenceMode::is_enabled(),
               "requires_grad_: the tensor was made under InferenceMode, and an inference tensor "
               "cannot require grad outside it; clone() it first");
  autograd::refresh_view(*this);  // Note [in-place autograd]
  SINTER_CHECK(is_leaf(),
               "requires_grad_: only leaves can change requires_grad; call detach() "
               "first for a result of an op");
  impl_->meta().requires_grad = value;
  // A leaf is a base of its own: writes into its views are refused as writes into it.
  if (value) impl_->view_base.reset();
  return *this;
}

Tensor Tensor::grad() const { return impl_ && impl_->autograd ? impl_->autograd->grad : Tensor(); }

void Tensor::set_grad(const Tensor& g) const {
  SINTER_CHECK(defined(), "set_grad: undefined tensor");
  SINTER_CHECK(!g.defined() || g.shape() == shape(), "set_grad: gradient of shape ",
               shape_str(g.shape()), " for a tensor of shape ", shape_str(shape()));
  SINTER_CHECK(!g.defined() || (g.dtype() == dtype() && g.device() == device()),
               "set_grad: gradient is ", g.dtype(), " on ", g.device(), ", the tensor is ", dtype(),
               " on ", device());
  impl_->meta().grad = g;
}

bool Tensor::is_leaf() const {
  if (impl_ && impl_->autograd && impl_->autograd->grad_fn) return false;
  // A view whose base was rebased since is the base's result (Note [in-place autograd]).
  return !(impl_ && impl_->view_base && impl_->view_base->rebases != impl_->view_seen &&
           Tensor(impl_->view_base).requires_grad());
}

std::shared_ptr<Node> Tensor::grad_fn() const {
  if (GradMode::is_enabled()) autograd::refresh_view(*this);  // Note [in-place autograd]
  return impl_ && impl_->autograd ? impl_->autograd->grad_fn : nullptr;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph);
}

Tensor Tensor::detach() const {
  SINTER_CHECK(defined(), "detach: undefined tensor");
  return alias_of(*this);
}

void Tensor::register_hook(TensorHook hook) const {
  SINTER_CHECK(requires_grad(), "register_hook: the tensor does not require grad");
  autograd::refresh_view(*this);  // Note [in-place autograd]
  AutogradMeta& m = impl_->meta();
  if (m.grad_fn) {
    m.grad_fn->pre_hooks.emplace_back(m.output_nr, std::move(hook));
  } else {
    m.hooks.push_back(std::move(hook));
  }
}

void Tensor::retain_grad() const {
  SINTER_CHECK(requires_grad(), "retain_grad: the tensor does not require grad");
  autograd::refresh_view(*this);  // Note [in-place autograd]
  AutogradMeta& m = impl_->meta();
  if (!m.grad_fn || m.retains_grad) return;
  m.retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_;
  const Node* node = m.grad_fn.get();
  register_hook([weak, node](const Tensor& g) {
    // Only while the tensor is this node's output: an in-place op moves it to a new grad_fn.
    if (auto impl = weak.lock(); impl && impl->meta().grad_fn.get() == node) {
      AutogradMeta& meta = impl->meta();
      meta.grad = meta.grad.defined() ? add(meta.grad, g) : g.clone();
    }
    return Tensor();
  });
}

void Tensor::register_post_accumulate_grad_hook(PostAccumulateHook hook) const {
  SINTER_CHECK(requires_grad() && is_leaf(),
               "register_post_accumulate_grad_hook: only leaves that "
               "require grad accumulate gradients");
  impl_->meta().post_hooks.push_back(std::move(hook));
}

uint32_t Tensor::version() const { return impl_ ? impl_->version->load() : 0; }
void Tensor::bump_version() const {
  // Inference tensors keep no version count (Note [inference mode]).
  if (impl_ && !impl_->inference) impl_->version->fetch_add(1);
}

}  // namespace sinter

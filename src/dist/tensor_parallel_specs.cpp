// tp::shard_specs: where each parameter of a tensor-parallel model sits in the whole model's, for
// distributed checkpoints (Note [distributed checkpoint] in include/sinter/dist_checkpoint.h).
#include <functional>
#include <string>
#include <utility>

#include "sinter/tensor_parallel.h"

namespace sinter::dist::tp {

namespace {

using Rename = std::function<std::string(const std::string&)>;

// Rows [first, first + rows) of a whole (?, cols) tensor, at local row `at`.
Run row_block(int64_t at, int64_t first, int64_t rows, int64_t cols) {
  return {at * cols, first * cols, rows * cols};
}

// ParallelLlama's names as Llama's (Hugging Face's): the layers under "model.", attention's and
// the MLP's projections under "self_attn." and "mlp.".
std::string llama_name(const std::string& local) {
  if (local.rfind("lm_head.", 0) == 0) return local;
  if (local.rfind("layers.", 0) != 0) return "model." + local;
  const size_t dot = local.find('.', 7);
  const std::string layer = local.substr(0, dot + 1), rest = local.substr(dot + 1);
  for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
    if (rest.rfind(std::string(p) + ".", 0) == 0) return "model." + layer + "self_attn." + rest;
  }
  for (const char* p : {"gate_proj", "up_proj", "down_proj"}) {
    if (rest.rfind(std::string(p) + ".", 0) == 0) return "model." + layer + "mlp." + rest;
  }
  return "model." + local;
}

struct Walk {
  std::string prefix;
  Rename rename;
  bool replica_writer = true;
  std::vector<ShardSpec> out;

  void add(const std::string& path, const char* what, const Tensor& t, Shape whole,
           std::vector<Run> runs, bool writer = true) {
    if (!t.defined()) return;
    const std::string local = path.empty() ? what : path + "." + what;
    out.push_back({prefix + rename(local), std::move(whole), t, std::move(runs), writer});
  }

  // A Linear's FP8 state (fp8::prepare's buffers): the whole layer's on every rank of the group.
  template <class L>
  void fp8_state(const std::string& path, const L& l) {
    for (const auto& [what, t] :
         {std::pair{"fp8_amax_history", &l.fp8_amax_history}, std::pair{"fp8_scale", &l.fp8_scale},
          std::pair{"fp8_steps", &l.fp8_steps}}) {
      if (l.fp8) add(path, what, *t, t->shape(), {Run{0, 0, t->numel()}}, l.group->rank() == 0);
    }
  }

  void column(const std::string& path, const ColumnParallelLinear& c) {
    const int64_t rows = c.weight.size(0), r = c.group->rank();
    add(path, "weight", c.weight, {c.out_features, c.in_features},
        {row_block(0, r * rows, rows, c.in_features)});
    add(path, "bias", c.bias, {c.out_features}, {row_block(0, r * rows, rows, 1)});
    fp8_state(path, c);
  }

  void row(const std::string& path, const RowParallelLinear& l) {
    const int64_t cols = l.weight.size(1), r = l.group->rank();
    add(path, "weight", l.weight, {l.out_features, l.in_features},
        {Run{0, r * cols, cols, l.out_features, cols, l.in_features}});
    add(path, "bias", l.bias, {l.out_features}, {Run{0, 0, l.out_features}}, l.group->rank() == 0);
    fp8_state(path, l);
  }

  // The qkv rows of this rank's heads: a block of each of the whole qkv's q, k and v thirds.
  void attention(const std::string& path, const ParallelMultiheadAttention& a) {
    const ColumnParallelLinear& qkv = *a.qkv;
    const int64_t e = a.embed_dim, rows = qkv.weight.size(0) / 3, first = a.group->rank() * rows;
    const std::string at = path.empty() ? "qkv" : path + ".qkv";
    std::vector<Run> w, b;
    for (int64_t k = 0; k < 3; ++k) {
      w.push_back(row_block(k * rows, k * e + first, rows, e));
      b.push_back(row_block(k * rows, k * e + first, rows, 1));
    }
    add(at, "weight", qkv.weight, {3 * e, e}, w);
    add(at, "bias", qkv.bias, {3 * e}, b);
    fp8_state(at, qkv);
    row(path.empty() ? "out_proj" : path + ".out_proj", *a.out_proj);
  }

  void visit(const nn::Module& m, const std::string& path) {
    if (auto* a = dynamic_cast<const ParallelMultiheadAttention*>(&m)) return attention(path, *a);
    if (auto* c = dynamic_cast<const ColumnParallelLinear*>(&m)) return column(path, *c);
    if (auto* l = dynamic_cast<const RowParallelLinear*>(&m)) return row(path, *l);
    if (auto* v = dynamic_cast<const VocabParallelEmbedding*>(&m)) {
      const int64_t rows = v->weight.size(0), r = v->group->rank();
      return add(path, "weight", v->weight, {v->num_embeddings, v->embedding_dim},
                 {row_block(0, r * rows, rows, v->embedding_dim)});
    }
    for (const auto& [name, t] : m.own_parameters()) {
      add(path, name.c_str(), t, t.shape(), {Run{0, 0, t.numel()}}, replica_writer);
    }
    for (const auto& [name, t] : m.own_buffers()) {
      add(path, name.c_str(), t, t.shape(), {Run{0, 0, t.numel()}}, replica_writer);
    }
    for (const auto& [name, child] : m.named_children()) {
      visit(*child, path.empty() ? name : path + "." + name);
    }
  }
};

}  // namespace

std::vector<ShardSpec> shard_specs(const nn::Module& model, const std::string& prefix,
                                   bool writer) {
  Walk walk;
  walk.prefix = prefix;
  walk.rename = [](const std::string& s) { return s; };
  std::shared_ptr<ProcessGroup> group;
  if (auto* gpt = dynamic_cast<const ParallelGPT*>(&model)) group = gpt->group;
  if (auto* llama = dynamic_cast<const ParallelLlama*>(&model)) {
    group = llama->group;
    walk.rename = llama_name;
  }
  SINTER_CHECK(group != nullptr,
               "tp::shard_specs: the model must be a ParallelGPT or a "
               "ParallelLlama, got ",
               model.name());
  walk.replica_writer = group->rank() == 0;
  walk.visit(model, "");
  if (!writer) {
    for (ShardSpec& s : walk.out) s.writer = false;
  }
  return walk.out;
}

}  // namespace sinter::dist::tp

// tp::shard_specs: where each parameter of a tensor-parallel model sits in the whole model's, for
// distributed checkpoints (Note [distributed checkpoint] in include/sinter/dist_checkpoint.h),
// and the Muon layouts made from them (Note [muon shards]).
#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "sinter/optim/muon.h"
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

namespace {

std::shared_ptr<ProcessGroup> group_of(const nn::Module& model) {
  if (auto* gpt = dynamic_cast<const ParallelGPT*>(&model)) return gpt->group;
  if (auto* llama = dynamic_cast<const ParallelLlama*>(&model)) return llama->group;
  return nullptr;
}

}  // namespace

std::vector<ShardSpec> shard_specs(const nn::Module& model, const std::string& prefix,
                                   bool writer) {
  Walk walk;
  walk.prefix = prefix;
  walk.rename = [](const std::string& s) { return s; };
  const std::shared_ptr<ProcessGroup> group = group_of(model);
  if (dynamic_cast<const ParallelLlama*>(&model)) walk.rename = llama_name;
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

void give_muon_layouts(const nn::Module& model, optim::Muon& muon) {
  const char* op = "tp::give_muon_layouts";
  SINTER_CHECK(muon.takes_shards(), op, ": the Muon must be made by Muon::over_shards");
  const std::vector<ShardSpec> specs = shard_specs(model, "");
  const std::shared_ptr<ProcessGroup> group = group_of(model);
  for (size_t g = 0; g < muon.num_param_groups(); ++g) {
    if (muon.options(g).adamw) continue;
    optim::MuonShards layout;
    std::vector<bool> split;  // per parameter: a part on each rank (else whole on every rank)
    for (const Tensor& p : muon.params(g)) {
      const auto it = std::find_if(specs.begin(), specs.end(),
                                   [&](const ShardSpec& s) { return s.local.is_same(p); });
      SINTER_CHECK(it != specs.end() && it->whole.size() == 2, op, ": Muon's group ", g,
                   " holds a tensor of shape ", shape_str(p.shape()),
                   " that is not a 2-D parameter of the model");
      std::vector<optim::MuonShards::Piece>& pieces = layout.pieces.emplace_back();
      for (const Run& run : it->runs) {  // (a row-parallel shard: one run of `count` rows)
        pieces.push_back({.shape = it->whole,
                          .bucket_offset = 0,
                          .matrix_offset = run.global,
                          .shard_offset = run.local,
                          .length = run.length,
                          .count = run.count,
                          .matrix_stride = run.global_stride,
                          .shard_stride = run.local_stride});
      }
      split.push_back(p.numel() < it->whole[0] * it->whole[1]);
    }
    layout.gather = [group, split, pieces = layout.pieces](const std::vector<Tensor>& parts) {
      std::vector<Tensor> whole;
      std::vector<std::shared_ptr<Work>> works;
      for (size_t i = 0; i < parts.size(); ++i) {
        const Tensor flat = parts[i].reshape({-1});
        if (!split[i]) {  // whole on every rank already
          whole.push_back(flat);
          continue;
        }
        // This rank's pieces in a zero matrix: the sum over the group is the whole, exactly.
        const int64_t numel = pieces[i].front().shape[0] * pieces[i].front().shape[1];
        whole.push_back(zeros({numel}, {.dtype = flat.dtype(), .device = flat.device()}));
        for (const optim::MuonShards::Piece& piece : pieces[i]) {
          piece.in_matrix(whole.back()).copy_(piece.in_shard(flat));
        }
        works.push_back(group->all_reduce_async(whole.back(), ReduceOp::Sum));
      }
      for (const auto& w : works) w->wait();
      return whole;
    };
    muon.shard_group(g, std::move(layout));
  }
}

}  // namespace sinter::dist::tp

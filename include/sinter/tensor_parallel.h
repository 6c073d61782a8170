// Tensor parallelism (Megatron-LM's): a Linear's weight split across the ranks of a group, by
// output features (ColumnParallelLinear) or by input features (RowParallelLinear), and the four
// differentiable collectives between the parallel and the replicated regions.
//
//   sinter::dist::DeviceMesh mesh(world, {{"dp", 2}, {"tp", 2}});
//   auto tp = mesh.group_ptr("tp");
//   auto fc = std::make_shared<tp::ColumnParallelLinear>(512, 2048, tp);  // output: a 1/2 slice
//   auto proj = std::make_shared<tp::RowParallelLinear>(2048, 512, tp);   // input: that slice
//   Tensor y = proj->forward(gelu(fc->forward(x)));  // x and y whole, on every rank of the group
//
// Note [tensor parallel linear]
// A column-parallel Linear (in -> out) keeps rows [r out / N, (r + 1) out / N) of the weight and of
// the bias on rank r of an N-rank group: its output is that slice of the features. Its input is
// the whole activation, the same on every rank: copy() passes it on, and in backward sums the
// ranks' input gradients (each rank's holds its slice's share). A row-parallel Linear (in -> out)
// keeps columns [r in / N, (r + 1) in / N) of the weight and the whole bias: its input is that
// slice of the features (a column-parallel layer's output, as is), its partial products are summed
// over the ranks by reduce() (whose backward passes the gradient on, the same on every rank), and
// the bias is added once, after the sum. Between the two the activation stays split: one all-reduce
// forward and one backward per pair of layers, as in Megatron-LM. gather() and scatter() join and
// cut a dim instead (a column-parallel layer's `gather_output`, a row-parallel one's input that
// is whole). Each collective runs on every rank of the group in the same order, forward and
// backward alike. The parameters' names are Linear's (weight, bias): a rank's state dict holds its
// shard, and load_full() takes a whole Linear's weight and bias and keeps this rank's shard.
//
// Note [tensor parallel init]
// A layer's shard is its part of one initialization of the whole layer: every rank draws the whole
// weight from the default generator and keeps its rows or columns (Megatron-LM's initialization
// on the CPU). Every rank of a group must therefore seed alike (manual_seed with one seed), as the
// parameters that are whole on every rank (a row-parallel bias, the layer norms) need anyway:
// ranks seeded apart would hold different copies of those. Shards drawn each from its own rank's
// generator would be the same on every rank seeded alike: their units would start as copies and
// get the same gradients, a model 1/N as wide.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sinter/dist.h"
#include "sinter/dist_checkpoint.h"
#include "sinter/nn/models.h"
#include "sinter/nn/module.h"
#include "sinter/nn/modules.h"
#include "sinter/ops.h"
#include "sinter/tensor.h"

namespace sinter::dist::tp {

// Forward: x as is; backward: the gradient summed over the group.
Tensor copy(const Tensor& x, const std::shared_ptr<ProcessGroup>& group);
// Forward: x summed over the group; backward: the gradient as is.
Tensor reduce(const Tensor& x, const std::shared_ptr<ProcessGroup>& group);
// Forward: the ranks' x joined along `dim` in rank order; backward: this rank's part of the
// gradient.
Tensor gather(const Tensor& x, const std::shared_ptr<ProcessGroup>& group, int64_t dim);
// Forward: this rank's part of x along `dim` (size divisible by the group's); backward: the ranks'
// gradients joined along `dim`.
Tensor scatter(const Tensor& x, const std::shared_ptr<ProcessGroup>& group, int64_t dim);

// Note [sequence parallel]
// Between the tensor-parallel regions the activations are whole on every rank: the layer norms,
// residual adds and dropout there do the same work N times and keep N copies. With sequence
// parallelism (Megatron-LM's) each rank keeps its slice of the sequence there, dim 1 of a
// (B, T, ...) activation, T / N positions: a column-parallel layer joins the slices first
// (gather_sequence: all-gather forward, reduce-scatter backward) and a row-parallel layer cuts its
// sum (reduce_scatter_sequence: reduce-scatter forward, all-gather backward) where it would
// all-reduce: the same bytes moved, and the activations between the regions 1/N. The parameters
// used on slices (layer norms, position embeddings, a row-parallel layer's bias) are whole on
// every rank, but each rank's gradient covers its slice only: they enter the computation through
// copy(), whose backward sums their gradients over the group.

// Forward: the ranks' x joined along `dim`; backward: the gradient summed over the group, this
// rank's part of it along `dim` (a reduce-scatter).
Tensor gather_sequence(const Tensor& x, const std::shared_ptr<ProcessGroup>& group, int64_t dim);
// Forward: x summed over the group, this rank's part along `dim` (a reduce-scatter); backward: the
// ranks' gradients joined along `dim`.
Tensor reduce_scatter_sequence(const Tensor& x, const std::shared_ptr<ProcessGroup>& group,
                               int64_t dim);
// linear(gather_sequence(x, group, 1), weight, bias) that saves x, this rank's slice (B, T / N,
// ...), for backward and gathers it again there, as Megatron-LM does: the gathered input, N times
// the slice, is never kept. The input's gradient is reduce-scattered.
Tensor sequence_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const std::shared_ptr<ProcessGroup>& group);

struct ColumnParallelOptions {
  bool bias = true;
  // Join the ranks' output slices (gather) into the whole output on every rank.
  bool gather_output = false;
  // The input (B, T, ...) holds this rank's T / N positions (Note [sequence parallel]).
  bool sequence_parallel = false;
};

class ColumnParallelLinear : public nn::Module {
 public:
  // out_features divisible by the group's size; the shard is this rank's rows of a whole Linear's
  // initialization (Note [tensor parallel init]).
  ColumnParallelLinear(int64_t in_features, int64_t out_features,
                       std::shared_ptr<ProcessGroup> group, ColumnParallelOptions options = {});
  std::string name() const override { return "ColumnParallelLinear"; }
  Tensor forward(const Tensor& x) override;
  // This rank's rows of a whole (out, in) weight and (out) bias (undefined where none).
  void load_full(const Tensor& weight, const Tensor& bias);
  // The whole weight and bias, joined from every rank's shard (collective: every rank calls it).
  std::pair<Tensor, Tensor> full() const;

  int64_t in_features, out_features;  // the whole layer's
  std::shared_ptr<ProcessGroup> group;
  ColumnParallelOptions options;
  Tensor weight, bias;  // (out / N, in), (out / N)
  // As nn::Linear's: set by fp8::prepare (Note [fp8 tensor parallel]).
  bool fp8 = false;
  Tensor fp8_amax_history, fp8_scale, fp8_steps;
};

struct RowParallelOptions {
  bool bias = true;
  // The input is this rank's slice of the features already (a column-parallel layer's output);
  // false: the whole input, cut here (scatter).
  bool input_is_parallel = true;
  // The output (B, T, out) holds this rank's T / N positions (Note [sequence parallel]).
  bool sequence_parallel = false;
};

class RowParallelLinear : public nn::Module {
 public:
  RowParallelLinear(int64_t in_features, int64_t out_features, std::shared_ptr<ProcessGroup> group,
                    RowParallelOptions options = {});
  std::string name() const override { return "RowParallelLinear"; }
  Tensor forward(const Tensor& x) override;
  // This rank's columns of a whole (out, in) weight, and the whole (out) bias.
  void load_full(const Tensor& weight, const Tensor& bias);
  // The whole weight (joined from every rank's columns) and bias (collective).
  std::pair<Tensor, Tensor> full() const;

  int64_t in_features, out_features;
  std::shared_ptr<ProcessGroup> group;
  RowParallelOptions options;
  Tensor weight, bias;  // (out, in / N), (out)
  // As nn::Linear's: set by fp8::prepare (Note [fp8 tensor parallel]).
  bool fp8 = false;
  Tensor fp8_amax_history, fp8_scale, fp8_steps;
};

// Note [tensor parallel attention]
// Self-attention with its heads split over the group, as Megatron-LM splits them: rank r of N
// computes heads [r H / N, (r + 1) H / N). Its qkv projection is column parallel with the rows of
// those heads' q, k and v (3 E / N rows: the q rows of its heads, then their k rows, then their v
// rows, so that the projection's output reads as (3, H / N, head) as the whole layer's does); the
// attention of each head needs no other rank; out_proj is row parallel over the heads' features.
// One all-reduce forward (out_proj's) and one backward (qkv's input), as the MLP. load_full takes
// a whole MultiheadAttention's parameters (the layout of GPT's blocks). Dropout on the attention
// weights takes this rank's heads' part of the whole layer's mask (Note [tensor parallel dropout]).
class ParallelMultiheadAttention : public nn::Module {
 public:
  // num_heads divisible by the group's size. sequence_parallel: the input and the output hold this
  // rank's T / N positions (Note [sequence parallel]).
  ParallelMultiheadAttention(int64_t embed_dim, int64_t num_heads,
                             std::shared_ptr<ProcessGroup> group,
                             const nn::MultiheadAttentionOptions& options = {},
                             bool sequence_parallel = false);
  std::string name() const override { return "ParallelMultiheadAttention"; }
  // x (B, T, E), the same on every rank -> (B, T, E), the same on every rank.
  Tensor forward(const Tensor& x) override;
  // This rank's shards of a whole layer's qkv and out_proj.
  void load_full(const nn::MultiheadAttention& whole);
  // Writes the whole layer's parameters into `whole` (collective): load_full's inverse.
  void to_full(nn::MultiheadAttention& whole) const;

  int64_t embed_dim, num_heads;
  std::shared_ptr<ProcessGroup> group;
  nn::MultiheadAttentionOptions options;
  std::shared_ptr<ColumnParallelLinear> qkv;
  std::shared_ptr<RowParallelLinear> out_proj;
};

// Note [vocabulary parallel]
// The embedding table and the output head of a language model split by vocabulary rows, as
// Megatron-LM splits them: rank r of N holds tokens [r V / N, (r + 1) V / N). The embedding looks
// up the ids in its range (a zero row for the others) and reduce() sums the ranks' rows, so each id
// gets the one rank's row that holds it. The cross-entropy takes each rank's slice of the logits
// (a column-parallel head's output, never gathered: no rank holds the whole (tokens, V) logits) and
// computes PyTorch's cross_entropy of the whole logits from three sums over the group: the max of
// each row (all-reduced, no gradient: the softmax does not depend on it), the sum of exp(z - max),
// and the target's logit (held by one rank, zero elsewhere); with label smoothing, the sum of the
// row too. The sums go through reduce(), so backward gives each rank its slice of softmax -
// one_hot, as the whole cross_entropy's gradient.

class VocabParallelEmbedding : public nn::Module {
 public:
  // num_embeddings divisible by the group's size; the shard is this rank's rows of a whole
  // table drawn normal(0, 1), as Embedding's (Note [tensor parallel init]).
  // sequence_parallel: the output (B, T, dim) of ids (B, T) holds this rank's T / N positions.
  VocabParallelEmbedding(int64_t num_embeddings, int64_t embedding_dim,
                         std::shared_ptr<ProcessGroup> group, bool sequence_parallel = false);
  std::string name() const override { return "VocabParallelEmbedding"; }
  // ids: i64 in [0, num_embeddings), the same on every rank -> (*ids.shape, embedding_dim).
  Tensor forward(const Tensor& ids) override;
  // This rank's rows of a whole (num_embeddings, embedding_dim) table.
  void load_full(const Tensor& weight);
  // The whole table, joined from every rank's rows (collective).
  Tensor full() const;

  int64_t num_embeddings, embedding_dim;
  std::shared_ptr<ProcessGroup> group;
  bool sequence_parallel;
  Tensor weight;  // (num_embeddings / N, embedding_dim)
};

// cross_entropy of the whole logits, whose (N, C / ranks) slice this rank holds (classes
// [rank C / ranks, ...)), with target (N) i64 in [0, C) or ignore_index, the same on every rank.
// Reduction None, Mean or Sum, ignore_index and label_smoothing as cross_entropy's; a class
// weight is refused. The result is the same on every rank.
Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& target,
                                    const std::shared_ptr<ProcessGroup>& group,
                                    const CrossEntropyOptions& options = {});

// The parameters of a module built from these layers: the shards (the column-parallel layers'
// weights and biases, the row-parallel layers' weights, the vocabulary-parallel embeddings'
// tables) and the parameters whole on every rank of the group (everything else), each once.
struct SplitParameters {
  std::vector<Tensor> shards, whole;
};
SplitParameters split_parameters(const nn::Module& module);

// optim::clip_grad_norm_ of the whole model's gradients: the shards' partial norms summed over the
// group (max for norm_type infinity), the whole parameters' counted once, then every gradient
// scaled alike. Returns the total norm, the same on every rank.
double clip_grad_norm_(const nn::Module& module, double max_norm,
                       const std::shared_ptr<ProcessGroup>& group, double norm_type = 2.0);

// Note [tensor parallel gpt]
// GPT (nn::models::GPT, the same config) with every block split over the group: each block's
// attention by heads (ParallelMultiheadAttention) and its MLP as a column-parallel fc and a
// row-parallel proj, the token embedding and the head by vocabulary (VocabParallelEmbedding; the
// tied head reads the embedding's shard, an untied one is column parallel); the position
// embedding and the layer norms are whole on every rank, and get the same gradients there. Two
// all-reduces a block forward and two backward. forward() gives this rank's slice of the logits;
// loss() the whole cross-entropy from the slices (vocab_parallel_cross_entropy). load_full()
// takes a whole GPT's parameters, so that a run can be checked against the one-process model or
// start from its checkpoint.
//
// Note [tensor parallel dropout]
// Dropout must agree across the group where the activations are whole (the same mask on every
// rank) and differ where they are split (each rank its part). Every rank draws from the default
// generator kept in step with the others (seed them alike, as Note [tensor parallel init] needs
// anyway): each dropout reserves the count of the whole tensor's mask, and a rank holding a part
// (its heads' attention weights; under sequence parallelism its slice of the sequence) keeps
// exactly the elements of that part (dropout_block, AttentionOptions::dropout_heads: Note [dropout
// blocks]). So the ranks' masks together are the mask one process draws for the whole GPT from
// the same generator state: with dropout, the split GPT trains as the whole one, step for step.
// (Data-parallel replicas seeded alike draw the same masks on their different batches.)
class ParallelTransformerBlock : public nn::Module {
 public:
  ParallelTransformerBlock(int64_t embed_dim, int64_t num_heads, bool bias,
                           std::shared_ptr<ProcessGroup> group, bool sequence_parallel = false,
                           double dropout = 0.0);
  std::string name() const override { return "ParallelTransformerBlock"; }
  Tensor forward(const Tensor& x) override;
  void load_full(const nn::TransformerBlock& whole);
  void to_full(nn::TransformerBlock& whole) const;

  std::shared_ptr<nn::LayerNorm> ln1, ln2;
  std::shared_ptr<ParallelMultiheadAttention> attn;
  std::shared_ptr<ColumnParallelLinear> fc;
  std::shared_ptr<RowParallelLinear> proj;
  std::shared_ptr<ProcessGroup> group;
  bool sequence_parallel;
  double dropout;  // on the attention weights and the residual branches, as TransformerBlock
};

class ParallelGPT : public nn::Module {
 public:
  // n_head, 4 n_embd and vocab_size divisible by the group's size. sequence_parallel
  // (Note [sequence parallel]): the activations between the parallel regions hold T / N positions
  // (T divisible by the group's size).
  ParallelGPT(const nn::models::GPTConfig& config, std::shared_ptr<ProcessGroup> group,
              bool sequence_parallel = false);
  std::string name() const override { return "ParallelGPT"; }
  // idx (B, T) i64, the same on every rank -> this rank's (B, T, vocab_size / N) logits.
  Tensor forward(const Tensor& idx) override;
  // The whole cross-entropy of the logits against targets (B, T), the same on every rank.
  Tensor loss(const Tensor& idx, const Tensor& targets, const CrossEntropyOptions& options = {});
  void load_full(const nn::models::GPT& whole);
  // Writes the whole GPT's parameters into `whole` (collective: every rank calls it, every rank
  // gets them): load_full's inverse. A checkpoint saved from `whole` (a plain GPT's safetensors,
  // PyTorch's names) loads at any group size through load_full, or into a GPT in one process.
  void to_full(nn::models::GPT& whole) const;
  // GPT's initialization (normal(0, 0.02), the residual projections scaled by 1 / sqrt(2
  // n_layer), zero biases, the norms' ones and zeros), each shard its part of a whole draw (Note
  // [tensor parallel init]); the constructor runs it.
  void reset_parameters();

  nn::models::GPTConfig config;
  std::shared_ptr<ProcessGroup> group;
  bool sequence_parallel;
  std::shared_ptr<VocabParallelEmbedding> wte;
  std::shared_ptr<nn::Embedding> wpe;
  std::shared_ptr<nn::ModuleList> blocks;
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<ColumnParallelLinear> lm_head;  // null when the weights are tied
};

// Note [tensor parallel llama]
// Llama (nn::models::Llama, the same config) split as ParallelGPT (Note [tensor parallel gpt]):
// q_proj, k_proj and v_proj column parallel by heads (rank r keeps query heads [r H / N, ...) and
// K/V heads [r KV / N, ...): with KV divisible by N, its query heads read exactly its K/V heads
// under grouped-query attention, rope at the whole sequence's positions), o_proj row parallel;
// gate_proj and up_proj column parallel by the MLP's hidden units (swiglu is elementwise on them),
// down_proj row parallel; the token embedding and the head by vocabulary; the RMS norms whole on
// every rank (through copy() on a slice of the sequence, Note [sequence parallel]). No biases.
class ParallelLlamaLayer : public nn::Module {
 public:
  ParallelLlamaLayer(const nn::models::LlamaConfig& config, std::shared_ptr<ProcessGroup> group,
                     bool sequence_parallel = false);
  std::string name() const override { return "ParallelLlamaLayer"; }
  // x (B, T, E), or (B, T / N, E) with sequence parallelism; positions: the whole sequence's (T).
  Tensor forward(const Tensor& x, const Tensor& positions);
  void load_full(const nn::models::LlamaDecoderLayer& whole);
  void to_full(nn::models::LlamaDecoderLayer& whole) const;

  nn::models::LlamaConfig config;
  std::shared_ptr<ProcessGroup> group;
  bool sequence_parallel;
  std::shared_ptr<nn::RMSNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<ColumnParallelLinear> q_proj, k_proj, v_proj, gate_proj, up_proj;
  std::shared_ptr<RowParallelLinear> o_proj, down_proj;
};

class ParallelLlama : public nn::Module {
 public:
  // n_head, n_kv_head, the MLP width and vocab_size divisible by the group's size.
  ParallelLlama(const nn::models::LlamaConfig& config, std::shared_ptr<ProcessGroup> group,
                bool sequence_parallel = false);
  std::string name() const override { return "ParallelLlama"; }
  // idx (B, T) i64, the same on every rank -> this rank's (B, T, vocab_size / N) logits.
  Tensor forward(const Tensor& idx) override;
  // The whole cross-entropy of the logits against targets (B, T), the same on every rank.
  Tensor loss(const Tensor& idx, const Tensor& targets, const CrossEntropyOptions& options = {});
  void load_full(const nn::models::Llama& whole);
  // Writes the whole Llama's parameters into `whole` (collective; every rank gets them):
  // load_full's inverse, as ParallelGPT::to_full.
  void to_full(nn::models::Llama& whole) const;
  // Llama's initialization (normal(0, 0.02) weights, the norms' ones), each shard its part of a
  // whole draw (Note [tensor parallel init]); the constructor runs it.
  void reset_parameters();

  nn::models::LlamaConfig config;
  std::shared_ptr<ProcessGroup> group;
  bool sequence_parallel;
  std::shared_ptr<VocabParallelEmbedding> embed_tokens;
  std::shared_ptr<nn::ModuleList> layers;
  std::shared_ptr<nn::RMSNorm> norm;
  std::shared_ptr<ColumnParallelLinear> lm_head;  // null when the weights are tied
};

// Where each parameter (and buffer) of a ParallelGPT or ParallelLlama sits in the whole model's,
// for a distributed checkpoint (Note [distributed checkpoint]): named "<prefix>" + the whole GPT's
// or Llama's name (Hugging Face's for Llama), a column-parallel shard a block of the whole
// weight's rows, a row-parallel one a block of its columns, the attention's qkv rows a block of
// each of the whole q, k and v, a vocabulary shard a block of rows; what is whole on every rank
// is written by the group's rank 0. `writer` false makes none of them written: the replicas of
// data parallelism (a dp x tp mesh's dp ranks other than 0) hold the same pieces.
// FullyShardedDataParallel::shard_specs takes these as its base when it shards such a model.
std::vector<ShardSpec> shard_specs(const nn::Module& model, const std::string& prefix = "model.",
                                   bool writer = true);

// Gives a Muon made by optim::Muon::over_shards over the parameters of `model` (a ParallelGPT or
// ParallelLlama) the layout of each of its Muon groups (Note [muon shards]), from shard_specs:
// each split weight's rows or columns are pieces of the whole matrix, which the step joins over
// the model's group (the ranks' pieces placed in a zero matrix and all-reduced), orthogonalizes
// and cuts again, so that the split model steps as Muon steps the whole one. A parameter of a
// Muon group must be a 2-D parameter of the model (an Error names it otherwise); one whole on
// every rank is orthogonalized as it is. Collective at each step over the model's group: every
// rank of it steps.
void give_muon_layouts(const nn::Module& model, optim::Muon& muon);

}  // namespace sinter::dist::tp

// Muon: momentum, then each 2-D update orthogonalized by a Newton-Schulz iteration, as PyTorch's
// torch.optim.Muon; with AdamW groups for the parameters Muon does not take, in one optimizer.
//
//   auto [matrices, rest] = optim::muon_split(model);  // hidden 2-D weights; the others
//   optim::Muon opt({{.params = matrices, .lr = 0.02},
//                    {.params = rest, .lr = 3e-4, .weight_decay = 0.0, .adamw = true}});
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sinter/optim/muon_options.h"
#include "sinter/optim/optimizer.h"

namespace sinter::nn {
class Module;
}  // namespace sinter::nn

namespace sinter::optim {

// The parameter groups of the options in muon_options.h.
SINTER_OPTIMIZER_GROUP(Muon, SINTER_MUON_OPTIONS)

// Note [muon]
// Per parameter p (2-D, (A, B)) of a Muon group with gradient g, as torch.optim.Muon's step:
//   buf <- buf + (1 - momentum) (g - buf)        (buf starts at 0; PyTorch's lerp_)
//   u   <- g + momentum (buf - g) if nesterov, else buf
//   O   <- NS(u): X <- u (in bf16 with ns_bf16), transposed when A > B so that X is wide;
//          X <- X / max(||X||_F, eps); ns_steps times:
//            M <- X X^T;  N <- b M + c M M;  X <- a X + N X
//          then transposed back when it was
//   p   <- p (1 - lr weight_decay) - lr' O,  lr' = lr sqrt(max(1, A / B)), or with
//          match_rms_adamw lr 0.2 sqrt(max(A, B)) (Moonlight's scale: the update's RMS near
//          AdamW's, so AdamW's lr and weight decay carry over)
// in the parameter's dtype apart from NS, whose three steps each round once to bf16 with ns_bf16,
// as PyTorch's matmul and addmm do. The five steps' default (a, b, c) = (3.4445, -4.775, 2.0315)
// are the published quintic coefficients. State: "momentum_buffer". A group with `adamw` steps its
// parameters (any shape) as optim::AdamW with the group's lr, betas, adamw_eps and weight_decay,
// with AdamW's state ("exp_avg", "exp_avg_sq", "step") and fused kernels. The step is ops on the
// parameters' device: the same code on the CPU and on CUDA. momentum_name() is "momentum": a
// one-cycle schedule cycles the Muon groups' momentum (the AdamW groups' betas stay).
//
// Note [muon shards]
// Muon needs each matrix whole to orthogonalize its update, and the sharders give an optimizer
// parts of matrices: ZeRO (Note [zero sharding]) flat shards, each a rank's part of a bucket of
// parameters laid back to back; FSDP a rank's flat part of each parameter; tensor parallelism each
// rank's block of rows or columns of a weight (Note [tensor parallel linear]). A Muon made by
// Muon::over_shards takes such shards (1-D, or a tensor-parallel layer's 2-D ones) in its Muon
// groups, and the sharder (ZeroRedundancyOptimizer does it; FullyShardedDataParallel's and
// tp::give_muon_layouts for the others) gives each such group its MuonShards: for every shard the
// pieces of matrices it holds, and a gather that joins a shard-shaped tensor of every rank into
// its whole bucket. A step keeps the momentum on the shard (elementwise, as any optimizer's state
// under ZeRO), gathers the group's updates u (all the group's collectives in flight together),
// orthogonalizes each matrix that has a piece in the shard, whole and once, from the gathered
// bucket (a matrix cut between two ranks' parts is orthogonalized by both, alike), and gives each
// piece its part of the update with its matrix's lr'. That is Muon's step on the whole
// parameters: the momentum and the weight decay are elementwise, and every rank orthogonalizes
// the same u. What the sharding saves is memory (the momentum 1/N), not the iteration: each rank
// orthogonalizes every matrix that touches its part, and the gather moves the Muon groups'
// updates once more per step. During the step a rank holds the gathered updates of its group's
// matrices whole, all at once (under tensor parallelism, every hidden matrix of the model), as
// the price of one round of collectives in flight together.
struct MuonShards {
  // `count` runs of `length` elements, the k-th at matrix_offset + k matrix_stride in the matrix
  // (flat) and at shard_offset + k shard_stride in the shard: a block of columns of the matrix in
  // one piece (a row-parallel layer's shard), or one run.
  struct Piece {
    Shape shape;                // the whole matrix's, 2-D
    int64_t bucket_offset = 0;  // where the matrix starts in the gathered bucket
    int64_t matrix_offset = 0;  // the piece's first element in the matrix, flat
    int64_t shard_offset = 0;   // and in the shard
    int64_t length = 0;
    int64_t count = 1, matrix_stride = 0, shard_stride = 0;
    // The piece's elements as a (count, length) view of the flat matrix, or of the flat shard.
    Tensor in_matrix(const Tensor& matrix) const;
    Tensor in_shard(const Tensor& shard) const;
  };
  std::vector<std::vector<Piece>> pieces;  // per parameter (shard) of the group, in order
  // Collective: each of the group's shard-shaped tensors joined with every rank's into its whole
  // bucket, flat, in the group's order.
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> gather;
};

class Muon : public OptimizerWithOptions<MuonOptions, MuonGroup> {
 public:
  // Every parameter of a Muon group must be 2-D: an Error names the group, the index and the
  // shape otherwise (put it in an adamw group).
  explicit Muon(const std::vector<Tensor>& params, const MuonOptions& options = {});
  Muon(const std::vector<MuonGroup>& groups, const MuonOptions& defaults = {});
  // A Muon over shards (Note [muon shards]): its Muon groups take contiguous 1-D or 2-D shards,
  // each group given its layout by shard_group before the first step.
  static std::unique_ptr<Muon> over_shards(const std::vector<MuonGroup>& groups,
                                           const MuonOptions& defaults = {});
  bool takes_shards() const { return over_shards_; }
  // The layout of Muon group `group`'s shards (an over_shards Muon's, Muon groups only).
  void shard_group(size_t group, MuonShards shards);
  std::string momentum_name() const override { return "momentum"; }

 protected:
  void step_group(size_t group, const MuonOptions& o) override;
  std::vector<std::string> state_names() const override {
    return {"momentum_buffer", "exp_avg", "exp_avg_sq", "step"};
  }

 private:
  struct ShardsTag {};
  Muon(ShardsTag, const std::vector<MuonGroup>& groups, const MuonOptions& defaults);
  void check_shapes() const;
  // The momentum and Nesterov update of parameter `i` of `group` (its state made at first use).
  Tensor momentum_update(size_t group, size_t i, const Tensor& grad, const MuonOptions& o);
  void step_sharded(size_t group, const MuonOptions& o);

  bool over_shards_ = false;
  std::map<size_t, MuonShards> shards_;
};

// NS(u) of Note [muon] for a 2-D `update`: the orthogonalized update, in bf16 when o.ns_bf16, else
// in the update's dtype.
Tensor muon_orthogonalize(const Tensor& update, const MuonOptions& o = {});

// The learning rate a Muon group's (A, B) parameter steps with (Note [muon]'s lr').
double muon_adjusted_lr(double lr, const Shape& shape, bool match_rms_adamw);

// A model's parameters split as Muon is used: the 2-D weights of its hidden layers (first), and
// the rest (second): embeddings (a parameter of an Embedding-named module), the output head (a
// parameter named "lm_head.*", or "head.*"), norms, biases and every parameter that is not 2-D.
std::pair<std::vector<Tensor>, std::vector<Tensor>> muon_split(const nn::Module& model);

}  // namespace sinter::optim

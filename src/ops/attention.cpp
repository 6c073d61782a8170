// scaled_dot_product_attention: the fused kernels (kern/attention.h), the CPU's attention tiles
// (Note [cpu attention tiles]; packed_self_attention, MultiheadAttention's fused qkv on them), and
// the composed form (scores by matmul, masks, softmax, dropout, matmul), which runs on either
// device and is differentiable through its parts; rope, the rotary position embedding of q and k.
#include "kern/attention.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cpu/attention_softmax.h"
#include "cpu/vec_attention.h"
#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/iter.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/core/error.h"
#include "sinter/ops.h"

namespace sinter {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

void check_operands(const Tensor& q, const Tensor& k, const Tensor& v, bool gqa) {
  SINTER_CHECK(q.defined() && k.defined() && v.defined(), kOp, ": q, k and v must be defined");
  SINTER_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), kOp,
               ": q, k and v need one rank of at least 2, got shapes ", q.shape(), ", ", k.shape(),
               ", ", v.shape());
  SINTER_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype() && is_floating(q.dtype()), kOp,
               ": q, k and v need one floating dtype, got ", q.dtype(), ", ", k.dtype(), ", ",
               v.dtype());
  SINTER_CHECK(q.device() == k.device() && q.device() == v.device(), kOp, ": q on ", q.device(),
               ", k on ", k.device(), ", v on ", v.device());
  // With enable_gqa, dim -3 (the heads) of k and v may divide q's instead of equalling it.
  const int64_t heads_dim = gqa ? q.dim() - 3 : -1;
  SINTER_CHECK(!gqa || q.dim() >= 3, kOp, ": enable_gqa needs q, k and v of (..., H, T, D), got q ",
               q.shape());
  for (int64_t d = 0; d + 2 < q.dim(); ++d) {
    if (d == heads_dim) continue;
    SINTER_CHECK(k.size(d) == q.size(d) && v.size(d) == q.size(d), kOp,
                 ": the leading dims differ: q ", q.shape(), ", k ", k.shape(), ", v ", v.shape());
  }
  if (gqa) {
    const int64_t hq = q.size(-3), hkv = k.size(-3);
    SINTER_CHECK(v.size(-3) == hkv, kOp, ": k has ", hkv, " heads, v has ", v.size(-3));
    SINTER_CHECK(hkv >= 1 && hq % hkv == 0, kOp, ": grouped-query attention needs the K/V heads (",
                 hkv, ") to divide the query heads (", hq, ")");
  }
  SINTER_CHECK(k.size(-1) == q.size(-1), kOp, ": q has head size ", q.size(-1), ", k has ",
               k.size(-1));
  SINTER_CHECK(v.size(-2) == k.size(-2), kOp, ": k has ", k.size(-2), " keys, v has ", v.size(-2));
}

// The scores with the user's mask applied: -inf where a bool mask is false, + an additive one.
Tensor apply_mask(const Tensor& scores, const Tensor& mask) {
  SINTER_CHECK(mask.device() == scores.device(), kOp, ": mask on ", mask.device(), ", q on ",
               scores.device());
  SINTER_CHECK(mask.dtype() == DType::b8 || mask.dtype() == scores.dtype(), kOp,
               ": the mask must be bool or of q's dtype ", scores.dtype(), ", got ", mask.dtype());
  SINTER_CHECK(broadcast_shapes(kOp, mask.shape(), scores.shape()) == scores.shape(), kOp,
               ": a mask of shape ", mask.shape(), " does not broadcast to the scores' ",
               scores.shape());
  if (mask.dtype() == DType::b8) return where(mask, scores, -INFINITY);
  return add(scores, mask);
}

// The largest head size of the CUDA fused kernels.
constexpr int64_t kCudaMaxHead = 128;

// Why the fused form cannot take this call, or "" when it can.
std::string fused_refusal(const Tensor& q, const Tensor& k, const Tensor& v,
                          const AttentionOptions& o) {
  const int64_t d = q.size(-1);
  if (o.mask.defined()) return "it takes no mask";
  if (v.size(-1) != d) return "it needs v's head size " + std::to_string(v.size(-1)) + " == D";
  if (d < 1) return "it needs D >= 1";
  if (k.size(-2) < 1) return "it needs at least one key";
  if (q.device().is_cuda() && d > kCudaMaxHead) {
    return "on CUDA it needs D <= " + std::to_string(kCudaMaxHead) + ", got " + std::to_string(d);
  }
  return "";
}

// The args of Note [fused attention] for q and k, without dropout.
kern::AttentionArgs attention_args(const Tensor& q, const Tensor& k, double scale,
                                   const AttentionOptions& o) {
  int64_t bh = 1;  // the leading dims, flattened
  for (int64_t i = 0; i + 2 < q.dim(); ++i) bh *= q.size(i);
  kern::AttentionArgs a{.dtype = q.dtype(),
                        .bh = bh,
                        .tq = q.size(-2),
                        .tk = k.size(-2),
                        .d = q.size(-1),
                        .scale = scale,
                        .causal = o.causal};
  if (q.dim() >= 3 && k.size(-3) != q.size(-3)) {  // grouped-query attention
    a.heads = q.size(-3);
    a.group = q.size(-3) / k.size(-3);
  }
  return a;
}

Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                       const AttentionOptions& o) {
  kern::AttentionArgs a = attention_args(q, k, scale, o);
  const int64_t bh = a.bh, tq = a.tq;
  if (o.dropout_p > 0.0) {
    Generator& g = o.generator ? *o.generator : default_generator();
    int64_t whole = bh;  // the (flattened) heads of the whole attention's mask
    if (o.dropout_heads > 0) {
      const int64_t hq = q.size(-3);
      a.drop_heads = {hq, o.dropout_heads, o.dropout_head_offset};
      whole = hq > 0 ? bh / hq * o.dropout_heads : 0;
    }
    const GeneratorState st = g.reserve(static_cast<uint64_t>(whole * tq * a.tk));
    // Note [dropout mask], as the dropout op draws it.
    a.threshold = static_cast<uint32_t>(std::ceil(o.dropout_p * 0x1p24));
    a.keep_scale = 1.0 / (1.0 - o.dropout_p);
    a.seed = st.seed;
    a.offset = st.offset;
  }
  const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  const TensorOptions like{.dtype = q.dtype(), .device = q.device()};
  Tensor out = empty(q.shape(), like);
  const Tensor lse =
      empty({bh, tq}, {.dtype = kern::attention_lse_dtype(q.dtype()), .device = q.device()});
  const bool work = bh > 0 && tq > 0;  // the kernels take Tq, Tk >= 1
  if (work) {
    SINTER_DISPATCH(q.device(), attention_forward, a, qc.data_ptr(), kc.data_ptr(), vc.data_ptr(),
                    out.data_ptr(), lse.data_ptr());
  }
  if (needs_grad({&q, &k, &v})) {
    const SavedTensor sq(qc, kOp), sk(kc, kOp), sv(vc, kOp), so(out, kOp);
    record(kOp, {&out}, {q, k, v}, [a, work, sq, sk, sv, so, lse, like](const Grads& g) {
      const Tensor qs = sq.get(), ks = sk.get(), vs = sv.get(), os = so.get();
      if (!work)
        return Grads{zeros(qs.shape(), like), zeros(ks.shape(), like), zeros(vs.shape(), like)};
      const Tensor dout = g[0].contiguous();
      Tensor dq = empty(qs.shape(), like), dk = empty(ks.shape(), like),
             dv = empty(vs.shape(), like);
      {
        SINTER_DISPATCH(like.device, attention_backward, a, qs.data_ptr(), ks.data_ptr(),
                        vs.data_ptr(), os.data_ptr(), dout.data_ptr(), lse.data_ptr(),
                        dq.data_ptr(), dk.data_ptr(), dv.data_ptr());
      }
      return Grads{dq, dk, dv};
    });
  }
  return out;
}

// The offsets of the heads of a (..., T, D) tensor (its leading dims flattened, in order), in
// elements from its data pointer.
std::vector<int64_t> head_offsets(const Tensor& t) {
  const int64_t lead = t.dim() - 2;
  int64_t count = 1;
  for (int64_t i = 0; i < lead; ++i) count *= t.size(i);
  std::vector<int64_t> offsets(static_cast<size_t>(count));
  std::vector<int64_t> index(static_cast<size_t>(lead), 0);
  for (int64_t h = 0; h < count; ++h) {
    int64_t at = 0;
    for (int64_t i = 0; i < lead; ++i) at += index[i] * t.stride(i);
    offsets[h] = at;
    for (int64_t i = lead - 1; i >= 0 && ++index[i] == t.size(i); --i) index[i] = 0;
  }
  return offsets;
}

// A tensor's heads for the tiles, with the offsets that `offsets` keeps alive.
cpu::vec::AttentionHeads heads_of(const Tensor& t, std::vector<int64_t>& offsets) {
  offsets = head_offsets(t);
  return {t.data_ptr(), offsets.data(), t.dim() >= 2 ? t.stride(-2) : 0};
}

// t itself where its rows are contiguous (the tiles read the heads of a fused qkv projection where
// they lie), else a contiguous copy.
Tensor with_contiguous_rows(const Tensor& t) {
  return t.stride(-1) == 1 || t.size(-1) == 1 ? t : t.contiguous();
}

// The CPU's own fused attention, f32 tiles (Note [cpu attention tiles]); `a` from attention_args.
Tensor tiled_attention(const Tensor& q0, const Tensor& k0, const Tensor& v0,
                       const kern::AttentionArgs& a) {
  const Tensor q = with_contiguous_rows(q0), k = with_contiguous_rows(k0),
               v = with_contiguous_rows(v0);
  const TensorOptions like{.dtype = q.dtype(), .device = q.device()};
  Tensor out = empty(q.shape(), like);
  const Tensor lse = empty({a.bh, a.tq}, {.dtype = DType::f32, .device = q.device()});
  {
    std::vector<int64_t> qo, ko, vo, oo;
    cpu::vec::attention_tiles_forward(a, heads_of(q, qo), heads_of(k, ko), heads_of(v, vo),
                                      heads_of(out, oo), lse.data<float>());
  }
  if (needs_grad({&q0, &k0, &v0})) {
    const SavedTensor sq(q, kOp), sk(k, kOp), sv(v, kOp), so(out, kOp);
    record(kOp, {&out}, {q0, k0, v0}, [a, sq, sk, sv, so, lse, like](const Grads& g) {
      const Tensor qs = sq.get(), ks = sk.get(), vs = sv.get(), os = so.get();
      const Tensor dout = with_contiguous_rows(g[0]);
      Tensor dq = empty(qs.shape(), like), dk = empty(ks.shape(), like),
             dv = empty(vs.shape(), like);
      std::vector<int64_t> offsets[8];
      cpu::vec::attention_tiles_backward(
          a, heads_of(qs, offsets[0]), heads_of(ks, offsets[1]), heads_of(vs, offsets[2]),
          heads_of(os, offsets[3]), heads_of(dout, offsets[4]), lse.data<float>(),
          heads_of(dq, offsets[5]), heads_of(dk, offsets[6]), heads_of(dv, offsets[7]));
      return Grads{dq, dk, dv};
    });
  }
  return out;
}

// The heads of self-attention on a fused projection (B, T, 3E) and of its (B, T, E) output, for
// packed_self_attention: head bb x heads + hh at element (bb, 0, part x E + hh x D).
struct PackedHeads {
  std::vector<int64_t> q, k, v, out;
  PackedHeads(int64_t b, int64_t t, int64_t heads, int64_t d) {
    const int64_t e = heads * d;
    for (int64_t bb = 0; bb < b; ++bb) {
      for (int64_t hh = 0; hh < heads; ++hh) {
        q.push_back(bb * t * 3 * e + hh * d);
        k.push_back(q.back() + e);
        v.push_back(q.back() + 2 * e);
        out.push_back(bb * t * e + hh * d);
      }
    }
  }
};

// k or v (..., Hkv, Tk, D) with each head repeated for its `group` query heads: (..., Hq, Tk, D).
Tensor repeat_kv(const Tensor& t, int64_t group) {
  if (group == 1) return t;
  Tensor u = t.unsqueeze(-3);  // (..., Hkv, 1, Tk, D)
  Shape wide = u.shape();
  wide[wide.size() - 3] = group;
  Shape out = t.shape();
  out[out.size() - 3] *= group;
  return u.expand(wide).reshape(out);
}

// softmax(scores scale) with the causal mask, in one pass on the CPU (Note [attention softmax] in
// src/cpu/softmax.cpp): scores (..., Tq, Tk) of f32, bf16 or f16.
Tensor attention_softmax(const Tensor& scores, double scale, bool causal) {
  SINTER_PROFILE_OP("attention_softmax", scores);
  const Tensor x = scores.contiguous();
  const int64_t n = x.size(-1), tq = x.size(-2), rows = n > 0 ? x.numel() / n : 0;
  const TensorOptions like{.dtype = x.dtype(), .device = x.device()};
  Tensor y = empty(x.shape(), like);
  cpu::attention_softmax_rows(x.data_ptr(), x.dtype(), rows, tq, n, scale, causal, y.data_ptr());
  if (needs_grad({&scores})) {
    const SavedTensor sy(y, "attention_softmax");
    record("attention_softmax", {&y}, {scores},
           [sy, like, rows, tq, n, scale, causal](const Grads& g) {
             const Tensor ys = sy.get(), gc = g[0].to(like.dtype).contiguous();
             Tensor dx = empty(ys.shape(), like);
             cpu::attention_softmax_rows_backward(gc.data_ptr(), ys.data_ptr(), like.dtype, rows,
                                                  tq, n, scale, causal, dx.data_ptr());
             return Grads{dx};
           });
  }
  return y;
}

Tensor composed_attention(const Tensor& q, const Tensor& k0, const Tensor& v0, double scale,
                          const AttentionOptions& o) {
  const int64_t group = q.dim() >= 3 ? q.size(-3) / k0.size(-3) : 1;
  const Tensor k = repeat_kv(k0, group), v = repeat_kv(v0, group);
  const int64_t tq = q.size(-2), tk = k.size(-2);
  const Tensor product = matmul(q, k.transpose(-2, -1));  // (..., Tq, Tk)
  const DType dt = q.dtype();
  Tensor weights;
  if (q.device().is_cpu() && !o.mask.defined() &&
      (dt == DType::f32 || dt == DType::bf16 || dt == DType::f16)) {
    weights = attention_softmax(product, scale, o.causal);
  } else {
    Tensor scores = mul(product, scale);
    if (o.mask.defined()) scores = apply_mask(scores, o.mask);
    if (o.causal) {
      const Tensor future = triu(ones({tq, tk}, {.dtype = DType::b8, .device = q.device()}), 1);
      scores = masked_fill(scores, future, -INFINITY);
    }
    weights = softmax(scores, -1);
  }
  if (o.dropout_p > 0.0) {
    weights = o.dropout_heads > 0
                  ? dropout_block(weights, o.dropout_p, true, -3, o.dropout_head_offset,
                                  o.dropout_heads, o.generator)
                  : dropout(weights, o.dropout_p, true, o.generator);
  }
  return matmul(weights, v);
}

}  // namespace

Tensor rope(const Tensor& x, const Tensor& positions, double base, bool interleaved) {
  SINTER_PROFILE_OP("rope", x, positions);
  constexpr const char* op = "rope";
  SINTER_CHECK(x.defined() && positions.defined(), op, ": x and positions must be defined");
  SINTER_CHECK(is_floating(x.dtype()), op, ": x must be floating, got dtype ", x.dtype());
  SINTER_CHECK(x.dim() >= 2, op, ": x must be (..., T, D), got shape ", x.shape());
  const int64_t t = x.size(-2), d = x.size(-1);
  SINTER_CHECK(d % 2 == 0, op, ": the head size D must be even, got ", d);
  SINTER_CHECK(positions.dtype() == DType::i64, op, ": positions must be i64, got ",
               positions.dtype());
  SINTER_CHECK(positions.dim() == 1 && positions.size(0) == t, op,
               ": positions must be one per row of T = ", t, ", got shape ", positions.shape());
  SINTER_CHECK(positions.device() == x.device(), op, ": positions on ", positions.device(),
               ", x on ", x.device());
  SINTER_CHECK(std::isfinite(base) && base > 0, op, ": base must be positive and finite, got ",
               base);
  int64_t outer = 1;
  for (int64_t i = 0; i + 2 < x.dim(); ++i) outer *= x.size(i);
  kern::RopeArgs a{
      .dtype = x.dtype(), .outer = outer, .t = t, .d = d, .base = base, .interleaved = interleaved};
  const Tensor xc = x.contiguous(), pc = positions.contiguous();
  const TensorOptions like{.dtype = x.dtype(), .device = x.device()};
  Tensor y = empty(x.shape(), like);
  SINTER_DISPATCH(x.device(), rope_apply, a, xc.data_ptr(), pc.data<int64_t>(), y.data_ptr());
  if (needs_grad({&x})) {
    a.inverse = true;
    const SavedTensor sp(pc, op);  // a change to positions before the backward is an error
    record(op, {&y}, {x}, [a, sp, like](const Grads& g) {
      const Tensor gc = g[0].contiguous(), ps = sp.get();
      Tensor dx = empty(gc.shape(), like);
      SINTER_DISPATCH(like.device, rope_apply, a, gc.data_ptr(), ps.data<int64_t>(), dx.data_ptr());
      return Grads{dx};
    });
  }
  return y;
}

Tensor packed_self_attention(const Tensor& qkv, int64_t heads, bool causal) {
  if (!qkv.defined() || !qkv.device().is_cpu() || qkv.dim() != 3 || heads < 1 || qkv.size(0) < 1 ||
      qkv.size(1) < 1 || qkv.size(2) < 3 * heads || qkv.size(2) % (3 * heads) != 0) {
    return Tensor();  // before autocast's cast: the split heads would cast again
  }
  SINTER_AUTOCAST(scaled_dot_product_attention, qkv,
                  packed_self_attention(cast(qkv), heads, causal));
  const int64_t b = qkv.size(0), t = qkv.size(1), e = qkv.size(2) / 3, d = e / heads;
  const kern::AttentionArgs a{.dtype = qkv.dtype(),
                              .bh = b * heads,
                              .tq = t,
                              .tk = t,
                              .d = d,
                              .scale = 1.0 / std::sqrt(static_cast<double>(d)),
                              .causal = causal};
  if (!cpu::vec::attention_tiles_take(a)) return Tensor();
  SINTER_PROFILE_OP("scaled_dot_product_attention", qkv);
  const Tensor p = qkv.contiguous();
  const TensorOptions like{.dtype = p.dtype(), .device = p.device()};
  Tensor out = empty({b, t, e}, like);
  const Tensor lse = empty({a.bh, t}, {.dtype = DType::f32, .device = p.device()});
  const auto heads_at = [](const Tensor& x, const std::vector<int64_t>& offsets) {
    return cpu::vec::AttentionHeads{x.data_ptr(), offsets.data(), x.size(2)};
  };
  const PackedHeads at(b, t, heads, d);
  cpu::vec::attention_tiles_forward(a, heads_at(p, at.q), heads_at(p, at.k), heads_at(p, at.v),
                                    heads_at(out, at.out), lse.data<float>());
  if (needs_grad({&qkv})) {
    const SavedTensor sp(p, kOp), so(out, kOp);
    record(kOp, {&out}, {qkv}, [a, b, t, heads, d, sp, so, lse, like, heads_at](const Grads& g) {
      const Tensor ps = sp.get(), os = so.get(), dout = g[0].contiguous();
      Tensor dp = empty(ps.shape(), like);  // every element is one of a head's dq, dk or dv
      const PackedHeads at(b, t, heads, d);
      cpu::vec::attention_tiles_backward(
          a, heads_at(ps, at.q), heads_at(ps, at.k), heads_at(ps, at.v), heads_at(os, at.out),
          heads_at(dout, at.out), lse.data<float>(), heads_at(dp, at.q), heads_at(dp, at.k),
          heads_at(dp, at.v));
      return Grads{dp};
    });
  }
  return out;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& o) {
  SINTER_PROFILE_OP("scaled_dot_product_attention", q, k, v);
  // An additive mask is cast with q, k and v: the scores it is added to are in q's dtype.
  const auto masked = [&o](Tensor mask) {
    AttentionOptions c = o;
    c.mask = std::move(mask);
    return c;
  };
  SINTER_AUTOCAST(scaled_dot_product_attention, q,
                  scaled_dot_product_attention(cast(q), cast(k), cast(v), masked(cast(o.mask))));
  check_operands(q, k, v, o.enable_gqa);
  SINTER_CHECK(o.dropout_p >= 0.0 && o.dropout_p < 1.0, kOp, ": dropout_p must be in [0, 1), got ",
               o.dropout_p);
  SINTER_CHECK(o.dropout_heads == 0 || (q.dim() >= 3 && o.dropout_head_offset >= 0 &&
                                        o.dropout_head_offset + q.size(-3) <= o.dropout_heads),
               kOp, ": q's heads [", o.dropout_head_offset, ", ",
               o.dropout_head_offset + (q.dim() >= 3 ? q.size(-3) : 0),
               ") do not fit dropout_heads ", o.dropout_heads);
  const int64_t d = q.size(-1);
  SINTER_CHECK(d > 0 || o.scale, kOp, ": head size 0 needs an explicit scale");
  const double scale = o.scale.value_or(1.0 / std::sqrt(static_cast<double>(d)));
  SINTER_CHECK(std::isfinite(scale), kOp, ": scale must be finite, got ", scale);

  if (o.kernel == AttentionKernel::Composed) return composed_attention(q, k, v, scale, o);
  const std::string refusal = fused_refusal(q, k, v, o);
  SINTER_CHECK(o.kernel != AttentionKernel::Fused || refusal.empty(), kOp,
               ": the fused kernel cannot take q ", q.shape(), ", k ", k.shape(), ", v ", v.shape(),
               " on ", q.device(), ": ", refusal);
  const bool fused =
      refusal.empty() && (o.kernel == AttentionKernel::Fused || q.device().is_cuda());
  if (fused) return fused_attention(q, k, v, scale, o);
  if (refusal.empty() && q.device().is_cpu() && o.dropout_p == 0.0) {
    const kern::AttentionArgs a = attention_args(q, k, scale, o);
    if (cpu::vec::attention_tiles_take(a)) return tiled_attention(q, k, v, a);
  }
  return composed_attention(q, k, v, scale, o);
}

}  // namespace sinter

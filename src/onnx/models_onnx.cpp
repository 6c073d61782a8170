// The reference models of sinter/nn/models.h (ResNet's BasicBlock, GPT, Llama) as ONNX opset-17
// operators: their emitters, and their rows in model_rows() at the end.
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "onnx/exporter.h"
#include "sinter/nn/models.h"
#include "sinter/ops.h"

namespace sinter::onnx::detail {

namespace {

// A tied output head: x embedding^T.
std::string tied_head(Exporter& ex, const std::string& x, const Tensor& embedding,
                      const std::string& scope) {
  const std::string wt =
      ex.node_with("Transpose", {ex.weight(embedding)}, scope, [](pb::NodeProto* n) {
        attr(n, "perm", std::vector<int64_t>{1, 0});
      });
  return ex.node("MatMul", {x, wt}, scope);
}

// rope(x) of x (B, H, T, d), the halves of each head turned by the angles of positions 0..T-1
// (T read from `seq` at run time): cos and sin gathered by position from constant tables of
// positions 0..rows-1, formed in double as kern::rope_angle forms them, so that the exported
// turn is Sinter's.
std::string rope(Exporter& ex, const std::string& x, int64_t d, double base, int64_t rows,
                 const std::string& seq, const std::string& scope) {
  const auto key = std::make_tuple(d, base, rows);
  auto tables = ex.rope_tables.find(key);
  if (tables == ex.rope_tables.end()) {
    const int64_t half = d / 2;
    std::vector<double> c(static_cast<size_t>(rows * half)), s(c.size());
    for (int64_t p = 0; p < rows; ++p) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(p) *
                             std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
        c[static_cast<size_t>(p * half + i)] = std::cos(angle);
        s[static_cast<size_t>(p * half + i)] = std::sin(angle);
      }
    }
    tables = ex.rope_tables
                 .emplace(key, std::make_pair(
                                   ex.constant(from_vector<double>(c, {rows, half}), "rope_cos"),
                                   ex.constant(from_vector<double>(s, {rows, half}), "rope_sin")))
                 .first;
  }
  const std::string pos = positions(ex, seq, scope);
  const auto rows_at = [&](const std::string& table) {
    return ex.node_with("Gather", {table, pos}, scope,
                        [](pb::NodeProto* n) { attr(n, "axis", 0); });
  };
  const std::string cos = rows_at(tables->second.first), sin = rows_at(tables->second.second);
  const std::string a = ex.node("Slice", {x, ex.ints({0}), ex.ints({d / 2}), ex.ints({3})}, scope);
  const std::string b = ex.node("Slice", {x, ex.ints({d / 2}), ex.ints({d}), ex.ints({3})}, scope);
  const std::string first =
      ex.node("Sub", {ex.node("Mul", {a, cos}, scope), ex.node("Mul", {b, sin}, scope)}, scope);
  const std::string second =
      ex.node("Add", {ex.node("Mul", {a, sin}, scope), ex.node("Mul", {b, cos}, scope)}, scope);
  return ex.node_with("Concat", {first, second}, scope,
                      [](pb::NodeProto* n) { attr(n, "axis", 3); });
}

Value basic_block(Exporter& ex, nn::models::BasicBlock& b, const std::string& path,
                  const Value& x) {
  const std::string scope = path.empty() ? b.name() : path;
  Value c2;
  if (b.fused) {  // BatchNorm folded, conv1 with its ReLU (Note [inference fusion])
    c2 = ex.emit(*b.conv2, join(path, "conv2"), ex.emit(*b.conv1, join(path, "conv1"), x));
  } else {
    const Value c1 = ex.emit(*b.bn1, join(path, "bn1"), ex.emit(*b.conv1, join(path, "conv1"), x));
    const Value r1{ex.node("Relu", {c1.name}, scope), relu(c1.t)};
    c2 = ex.emit(*b.bn2, join(path, "bn2"), ex.emit(*b.conv2, join(path, "conv2"), r1));
  }
  const Value sc = b.shortcut ? ex.emit(*b.shortcut, join(path, "shortcut"), x) : x;
  return {ex.node("Relu", {ex.node("Add", {c2.name, sc.name}, scope)}, scope), relu(c2.t + sc.t)};
}

Value gpt(Exporter& ex, nn::models::GPT& g, const std::string& path, const Value& idx) {
  const std::string scope = path.empty() ? g.name() : path;
  const Tensor logits = g.forward(idx.t);  // checks the ids and the length
  // x = wte(idx) + wpe(0..T-1), with T read from the ids at run time.
  const std::string pos = positions(ex, idx.name, scope);
  const Value tok = ex.emit(*g.wte, join(path, "wte"), idx);
  const Tensor pos_t =
      arange(static_cast<double>(idx.t.size(1)), {.dtype = DType::i64, .device = idx.t.device()});
  const Value p = ex.emit(*g.wpe, join(path, "wpe"), {pos, pos_t});
  Value x{ex.node("Add", {tok.name, p.name}, scope), tok.t + p.t};
  for (const auto& [name, block] : g.blocks->named_children()) {
    x = ex.emit(*block, join(join(path, "blocks"), name), x);
  }
  x = ex.emit(*g.ln_f, join(path, "ln_f"), x);
  if (g.lm_head) return {ex.emit(*g.lm_head, join(path, "lm_head"), x).name, logits};
  return {tied_head(ex, x.name, g.wte->weight, scope), logits};
}

// A Llama layer's attention over (B, T, E), as LlamaAttention::forward computes it: the K/V
// heads repeated to the query heads (each group of query heads reads its own K/V head).
Value llama_attention(Exporter& ex, nn::models::LlamaAttention& a, const std::string& path,
                      const Value& x) {
  const std::string scope = path.empty() ? a.name() : path;
  SINTER_CHECK(x.t.dim() == 3, "onnx::export_model: ", where(path),
               " (LlamaAttention) expects (B, T, E), got ", shape_str(x.t.shape()));
  const Tensor y = a.forward(x.t);
  const int64_t h = a.n_head, hk = a.n_kv_head, d = a.head_dim;
  // (B, T, n d) -> (B, n, T, d).
  const auto heads = [&](nn::Linear& proj, const char* name, int64_t n) {
    const Value p = ex.emit(proj, join(path, name), x);
    return ex.node_with("Transpose", {ex.node("Reshape", {p.name, ex.ints({0, 0, n, d})}, scope)},
                        scope, [](pb::NodeProto* node) {
                          attr(node, "perm", std::vector<int64_t>{0, 2, 1, 3});
                        });
  };
  // (B, hk, T, d) -> (B, hk, h / hk, T, d) -> (B, h, T, d).
  const auto repeat = [&](const std::string& kv) {
    if (h == hk) return kv;
    const std::string wide = ex.node(
        "Expand", {ex.node("Unsqueeze", {kv, ex.ints({2})}, scope), ex.ints({1, 1, h / hk, 1, 1})},
        scope);
    return ex.node("Reshape", {wide, ex.ints({0, h, -1, d})}, scope);
  };
  const int64_t rows = ex.rope_rows > 0 ? ex.rope_rows : x.t.size(1);
  const std::string q =
      rope(ex, heads(*a.q_proj, "q_proj", h), d, a.rope_base, rows, x.name, scope);
  const std::string k =
      repeat(rope(ex, heads(*a.k_proj, "k_proj", hk), d, a.rope_base, rows, x.name, scope));
  const std::string v = repeat(heads(*a.v_proj, "v_proj", hk));
  const std::string merged = attention_core(ex, q, k, v, d, a.n_embd, true, x.name, scope);
  const Value out =
      ex.emit(*a.o_proj, join(path, "o_proj"),
              {merged, zeros(x.t.shape(), {.dtype = x.t.dtype(), .device = x.t.device()})});
  return {out.name, y};
}

// down_proj(silu(gate_proj(x)) up_proj(x)), silu as x Sigmoid(x).
Value llama_mlp(Exporter& ex, nn::models::LlamaMLP& m, const std::string& path, const Value& x) {
  const std::string scope = path.empty() ? m.name() : path;
  const Value gate = ex.emit(*m.gate_proj, join(path, "gate_proj"), x);
  const Value up = ex.emit(*m.up_proj, join(path, "up_proj"), x);
  const std::string silu =
      ex.node("Mul", {gate.name, ex.node("Sigmoid", {gate.name}, scope)}, scope);
  const Value out = ex.emit(*m.down_proj, join(path, "down_proj"),
                            {ex.node("Mul", {silu, up.name}, scope), swiglu(gate.t, up.t)});
  return {out.name, m.forward(x.t)};
}

Value llama_layer(Exporter& ex, nn::models::LlamaDecoderLayer& l, const std::string& path,
                  const Value& x) {
  const std::string scope = path.empty() ? l.name() : path;
  const Value a = ex.emit(*l.self_attn, join(path, "self_attn"),
                          ex.emit(*l.input_layernorm, join(path, "input_layernorm"), x));
  const Value h{ex.node("Add", {x.name, a.name}, scope), x.t + a.t};
  const Value m =
      ex.emit(*l.mlp, join(path, "mlp"),
              ex.emit(*l.post_attention_layernorm, join(path, "post_attention_layernorm"), h));
  return {ex.node("Add", {h.name, m.name}, scope), h.t + m.t};
}

Value llama(Exporter& ex, nn::models::Llama& m, const std::string& path, const Value& idx) {
  const std::string scope = path.empty() ? m.name() : path;
  const Tensor logits = m.forward(idx.t);  // checks the ids and the length
  const std::string model = join(path, "model");
  // The rope tables cover the whole context, so any length up to it runs.
  ex.rope_rows = m.config.context_length;
  Value x = ex.emit(*m.model->embed_tokens, join(model, "embed_tokens"), idx);
  for (const auto& [name, layer] : m.model->layers->named_children()) {
    x = ex.emit(*layer, join(join(model, "layers"), name), x);
  }
  x = ex.emit(*m.model->norm, join(model, "norm"), x);
  ex.rope_rows = 0;
  if (m.lm_head) return {ex.emit(*m.lm_head, join(path, "lm_head"), x).name, logits};
  return {tied_head(ex, x.name, m.model->embed_tokens->weight, scope), logits};
}

}  // namespace

const std::vector<Mapping>& model_rows() {
  static const std::vector<Mapping> table = {
      SINTER_ONNX_ROW(nn::models::BasicBlock, "BasicBlock",
                      { return basic_block(ex, m, s.path, x); }),
      SINTER_ONNX_ROW(nn::models::GPT, "GPT", { return gpt(ex, m, s.path, x); }),
      SINTER_ONNX_ROW(nn::models::LlamaAttention, "LlamaAttention",
                      { return llama_attention(ex, m, s.path, x); }),
      SINTER_ONNX_ROW(nn::models::LlamaMLP, "LlamaMLP", { return llama_mlp(ex, m, s.path, x); }),
      SINTER_ONNX_ROW(nn::models::LlamaDecoderLayer, "LlamaDecoderLayer",
                      { return llama_layer(ex, m, s.path, x); }),
      SINTER_ONNX_ROW(nn::models::Llama, "Llama", { return llama(ex, m, s.path, x); }),
  };
  return table;
}

}  // namespace sinter::onnx::detail

// GGUF export of a Llama (see sinter/gguf.h): the header ("GGUF", version 3, the counts), the
// metadata's key-value pairs, the tensor infos, then the tensors' data, each at a multiple of the
// alignment; every number little-endian.
#include "sinter/gguf.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "internal/atomic_file.h"
#include "internal/byte_level.h"
#include "sinter/autograd.h"
#include "sinter/core/error.h"
#include "sinter/fp8.h"
#include "sinter/nn/models.h"

static_assert(std::endian::native == std::endian::little,
              "GGUF is written little-endian; this host is not little-endian");

namespace sinter::gguf {
namespace {

// ggml's tensor types and GGUF's metadata value types, as the file numbers them.
enum class GgmlType : uint32_t { f32 = 0, f16 = 1, q8_0 = 8, bf16 = 30 };
enum class Value : uint32_t { u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9 };

// Note [gguf tensor types]
// What each type stores, as convert_hf_to_gguf.py chooses: the norm weights (every 1-D tensor)
// f32 always; every matrix, token_embd and output included, in the type's encoding. q8_0 cuts a
// row into blocks of 32 values, each stored as an f16 scale d = max|x| / 127 and 32 int8
// q = round(x * (1 / d)) (halves away from zero, in f32, as ggml's reference quantize_row_q8_0
// and the gguf package compute it, so the bytes are theirs); a matrix whose rows are not a
// multiple of 32 long is f16 instead, as the converter falls back. f16 and bf16 round to nearest
// even.

struct TypeRow {
  Type type;
  const char* name;
  uint32_t file_type;  // general.file_type: llama.cpp's LLAMA_FTYPE_ALL_F32, MOSTLY_F16, ...
  GgmlType matrix;     // the matrices' encoding
};
constexpr TypeRow kTypes[] = {
    {Type::f32, "f32", 0, GgmlType::f32},
    {Type::f16, "f16", 1, GgmlType::f16},
    {Type::bf16, "bf16", 32, GgmlType::bf16},
    {Type::q8_0, "q8_0", 7, GgmlType::q8_0},
};

const TypeRow& row_of(Type type) {
  for (const TypeRow& r : kTypes) {
    if (r.type == type) return r;
  }
  SINTER_THROW("gguf: unknown Type ", static_cast<int>(type));
}

constexpr int64_t kQ8Block = 32;
// general.quantization_version: ggml's GGML_QNT_VERSION, the layout of its quantized blocks.
constexpr uint32_t kQuantVersion = 2;

// Little-endian bytes under construction.
struct Bytes {
  std::string data;

  void raw(const void* p, size_t n) { data.append(static_cast<const char*>(p), n); }
  template <class T>
  void put(T v) {
    raw(&v, sizeof v);
  }
  void str(std::string_view s) {
    put<uint64_t>(s.size());
    raw(s.data(), s.size());
  }
};

// The metadata's key-value pairs, counted.
struct Metadata {
  Bytes out;
  uint64_t count = 0;

  void key(std::string_view k, Value type) {
    out.str(k);
    out.put(static_cast<uint32_t>(type));
    ++count;
  }
  void u32(std::string_view k, uint64_t v) {
    key(k, Value::u32);
    out.put(static_cast<uint32_t>(v));
  }
  void f32(std::string_view k, double v) {
    key(k, Value::f32);
    out.put(static_cast<float>(v));
  }
  void boolean(std::string_view k, bool v) {
    key(k, Value::boolean);
    out.put(static_cast<uint8_t>(v));
  }
  void str(std::string_view k, std::string_view v) {
    key(k, Value::string);
    out.str(v);
  }
  void strings(std::string_view k, const std::vector<std::string>& v) {
    key(k, Value::array);
    out.put(static_cast<uint32_t>(Value::string));
    out.put<uint64_t>(v.size());
    for (const std::string& s : v) out.str(s);
  }
  void i32s(std::string_view k, const std::vector<int32_t>& v) {
    key(k, Value::array);
    out.put(static_cast<uint32_t>(Value::i32));
    out.put<uint64_t>(v.size());
    for (const int32_t x : v) out.put(x);
  }
};

// A tensor of the file: its row-major shape (written reversed: ne[0] is the row length).
struct TensorOut {
  std::string name;
  Shape shape;
  GgmlType type;
  std::string data;
};

std::vector<float> host_f32(const Tensor& t) {
  NoGradGuard no_grad;
  const Tensor h = t.detach().to(Device::cpu()).to(DType::f32).contiguous();
  const float* p = h.data<float>();
  return std::vector<float>(p, p + h.numel());
}

// The rows of q_proj or k_proj (n_head heads of D rows) in llama.cpp's order, per Note [gguf
// export] in include/sinter/gguf.h: row 2i + j of a head is row i + j D/2 of Sinter's.
std::vector<float> rope_neighbour_rows(const std::vector<float>& w, int64_t rows, int64_t cols,
                                       int64_t n_head) {
  const int64_t d = rows / n_head, half = d / 2;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < n_head; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        const float* src = w.data() + (h * d + i + j * half) * cols;
        std::memcpy(out.data() + (h * d + 2 * i + j) * cols, src, sizeof(float) * cols);
      }
    }
  }
  return out;
}

void q8_0_encode(const std::vector<float>& x, Bytes& out) {
  for (size_t b = 0; b < x.size(); b += kQ8Block) {
    float amax = 0;
    for (int64_t j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 127;
    const float inv = d != 0 ? 1.0f / d : 0.0f;
    out.put(Half(d).bits);
    for (int64_t j = 0; j < kQ8Block; ++j) {
      out.put(static_cast<int8_t>(std::roundf(x[b + j] * inv)));
    }
  }
}

// `x` (row-major `shape`) in `matrix`'s encoding, or f32 for a 1-D tensor, per Note [gguf tensor
// types].
TensorOut encode(std::string name, const Shape& shape, const std::vector<float>& x,
                 GgmlType matrix) {
  GgmlType type = shape.size() < 2 ? GgmlType::f32 : matrix;
  if (type == GgmlType::q8_0 && shape.back() % kQ8Block != 0) type = GgmlType::f16;
  Bytes out;
  switch (type) {
    case GgmlType::f32:
      out.raw(x.data(), x.size() * sizeof(float));
      break;
    case GgmlType::f16:
      for (const float v : x) out.put(Half(v).bits);
      break;
    case GgmlType::bf16:
      for (const float v : x) out.put(BFloat16(v).bits);
      break;
    case GgmlType::q8_0:
      q8_0_encode(x, out);
      break;
  }
  return {std::move(name), shape, type, std::move(out.data)};
}

// A decoder layer's tensors: the name after "model.layers.N." and after "blk.N.", and whose heads
// the rows of a rope projection are reordered by.
enum class Rope { none, q, k };
struct LayerTensor {
  const char* sinter;
  const char* gguf;
  Rope rope;
};
constexpr LayerTensor kLayerTensors[] = {
    {"input_layernorm.weight", "attn_norm.weight", Rope::none},
    {"self_attn.q_proj.weight", "attn_q.weight", Rope::q},
    {"self_attn.k_proj.weight", "attn_k.weight", Rope::k},
    {"self_attn.v_proj.weight", "attn_v.weight", Rope::none},
    {"self_attn.o_proj.weight", "attn_output.weight", Rope::none},
    {"post_attention_layernorm.weight", "ffn_norm.weight", Rope::none},
    {"mlp.gate_proj.weight", "ffn_gate.weight", Rope::none},
    {"mlp.up_proj.weight", "ffn_up.weight", Rope::none},
    {"mlp.down_proj.weight", "ffn_down.weight", Rope::none},
};

// Every tensor of the model's state dict under its GGUF name, in the file's order; a state-dict
// entry that has no GGUF name is an Error.
std::vector<TensorOut> model_tensors(const nn::models::Llama& llama, GgmlType matrix) {
  const nn::models::LlamaConfig& c = llama.config;
  const StateDict dict = llama.state_dict();
  std::set<std::string> unused;
  for (const auto& [name, t] : dict) {
    if (!fp8::is_state_key(name)) unused.insert(name);  // (training state, not the model's)
  }
  std::vector<TensorOut> out;
  const auto add = [&](const std::string& from, std::string to, Rope rope) {
    const auto it = dict.find(from);
    SINTER_CHECK(it != dict.end(), "gguf::export_model: the Llama has no ", from);
    unused.erase(from);
    const Shape& shape = it->second.shape();
    std::vector<float> x = host_f32(it->second);
    if (rope != Rope::none) {
      x = rope_neighbour_rows(x, shape[0], shape[1], rope == Rope::q ? c.n_head : c.n_kv_head);
    }
    out.push_back(encode(std::move(to), shape, x, matrix));
  };
  add("model.embed_tokens.weight", "token_embd.weight", Rope::none);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string from = "model.layers." + std::to_string(l) + ".";
    const std::string to = "blk." + std::to_string(l) + ".";
    for (const LayerTensor& t : kLayerTensors) add(from + t.sinter, to + t.gguf, t.rope);
  }
  add("model.norm.weight", "output_norm.weight", Rope::none);
  if (!c.tie_weights) add("lm_head.weight", "output.weight", Rope::none);
  SINTER_CHECK(unused.empty(), "gguf::export_model: the Llama's state dict holds ",
               std::vector<std::string>(unused.begin(), unused.end()),
               ", which the GGUF llama architecture has no place for");
  return out;
}

// The llama.* hyperparameters, from the config and the tensors' shapes.
void add_hyperparameters(Metadata& kv, const nn::models::Llama& llama, int64_t n_vocab,
                         int64_t n_ff) {
  const nn::models::LlamaConfig& c = llama.config;
  kv.u32("llama.context_length", c.context_length);
  kv.u32("llama.embedding_length", c.n_embd);
  kv.u32("llama.block_count", c.n_layer);
  kv.u32("llama.feed_forward_length", n_ff);
  kv.u32("llama.attention.head_count", c.n_head);
  kv.u32("llama.attention.head_count_kv", c.n_kv_head);
  kv.f32("llama.rope.freq_base", c.rope_base);
  kv.f32("llama.attention.layer_norm_rms_epsilon", c.norm_eps);
  kv.u32("llama.rope.dimension_count", c.n_embd / c.n_head);
  kv.u32("llama.vocab_size", n_vocab);
}

// The tokenizer.ggml.* entries of Note [gguf export] in include/sinter/gguf.h.
void add_tokenizer(Metadata& kv, const data::BpeTokenizer& tokenizer, int64_t n_vocab) {
  SINTER_CHECK(tokenizer.vocab_size() <= n_vocab, "gguf::export_model: the tokenizer has ",
               tokenizer.vocab_size(), " tokens, more than the model's vocabulary of ", n_vocab);
  constexpr int32_t kNormal = 1, kControl = 3, kUnused = 5;
  std::vector<std::string> tokens;
  std::vector<int32_t> types(static_cast<size_t>(n_vocab), kNormal);
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id) {
    tokens.push_back(detail::to_byte_level(tokenizer.token(static_cast<int32_t>(id))));
  }
  for (const auto& [name, id] : tokenizer.special_tokens()) {
    tokens[static_cast<size_t>(id)] = name;
    types[static_cast<size_t>(id)] = kControl;
  }
  for (int64_t id = tokenizer.vocab_size(); id < n_vocab; ++id) {
    tokens.push_back("[PAD" + std::to_string(id) + "]");
    types[static_cast<size_t>(id)] = kUnused;
  }
  std::vector<std::string> merges;
  for (const auto& [a, b] : tokenizer.merges()) {
    merges.push_back(detail::byte_level_merge(tokenizer.token(a), tokenizer.token(b)));
  }
  kv.str("tokenizer.ggml.model", "gpt2");
  kv.str("tokenizer.ggml.pre", "gpt-2");
  kv.strings("tokenizer.ggml.tokens", tokens);
  kv.i32s("tokenizer.ggml.token_type", types);
  kv.strings("tokenizer.ggml.merges", merges);
  const int32_t end_of_text = tokenizer.special_id("<|endoftext|>");
  if (end_of_text >= 0) {
    kv.u32("tokenizer.ggml.bos_token_id", static_cast<uint64_t>(end_of_text));
    kv.u32("tokenizer.ggml.eos_token_id", static_cast<uint64_t>(end_of_text));
  }
  kv.boolean("tokenizer.ggml.add_bos_token", false);
}

uint64_t align_up(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

}  // namespace

Type parse_type(const std::string& name) {
  for (const TypeRow& r : kTypes) {
    if (name == r.name) return r.type;
  }
  SINTER_THROW("gguf::parse_type: unknown type '", name, "' (f32, f16, bf16 or q8_0)");
}

const char* type_name(Type type) { return row_of(type).name; }

ExportSummary export_model(const nn::Module& module, const data::BpeTokenizer& tokenizer,
                           const std::string& path, const ExportOptions& options) {
  const auto* llama = dynamic_cast<const nn::models::Llama*>(&module);
  SINTER_CHECK(llama != nullptr, "gguf::export_model: ", path, ": the module is a ", module.name(),
               ", not a Llama (the only architecture exported to GGUF)");
  const uint64_t alignment = options.alignment;
  SINTER_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, "gguf::export_model: ", path,
               ": alignment ", alignment, " is not a power of two");
  const TypeRow& type = row_of(options.type);
  const std::vector<TensorOut> tensors = model_tensors(*llama, type.matrix);
  const auto rows_of = [&](const std::string& name) -> int64_t {
    for (const TensorOut& t : tensors) {
      if (t.name == name) return t.shape[0];
    }
    return 0;
  };
  const int64_t n_vocab = rows_of("token_embd.weight"), n_ff = rows_of("blk.0.ffn_gate.weight");

  Metadata kv;
  kv.str("general.architecture", "llama");
  kv.str("general.type", "model");
  kv.str("general.name", options.name.empty() ? "sinter-llama" : options.name);
  kv.u32("general.file_type", type.file_type);
  kv.u32("general.quantization_version", kQuantVersion);
  kv.u32("general.alignment", alignment);
  add_hyperparameters(kv, *llama, n_vocab, n_ff);
  add_tokenizer(kv, tokenizer, n_vocab);

  Bytes head;
  head.raw("GGUF", 4);
  head.put<uint32_t>(3);
  head.put<uint64_t>(tensors.size());
  head.put<uint64_t>(kv.count);
  head.raw(kv.out.data.data(), kv.out.data.size());
  uint64_t offset = 0;
  for (const TensorOut& t : tensors) {
    head.str(t.name);
    head.put(static_cast<uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) head.put(static_cast<uint64_t>(*d));
    head.put(static_cast<uint32_t>(t.type));
    head.put(offset);
    offset = align_up(offset + t.data.size(), alignment);
  }
  head.data.resize(align_up(head.data.size(), alignment), '\0');

  const std::string zeros(alignment, '\0');
  std::vector<detail::ByteRange> parts{{head.data.data(), head.data.size()}};
  for (const TensorOut& t : tensors) {
    parts.push_back({t.data.data(), t.data.size()});
    parts.push_back({zeros.data(), align_up(t.data.size(), alignment) - t.data.size()});
  }
  detail::write_file_atomically(path, parts, "gguf::export_model");
  return {.tensors = static_cast<int64_t>(tensors.size()),
          .bytes = static_cast<int64_t>(head.data.size() + offset)};
}

}  // namespace sinter::gguf

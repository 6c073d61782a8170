// Hugging Face model folders (pretrained.h): the names, layouts and config fields of
// LlamaForCausalLM and GPT2LMHeadModel, written and read.
#include "sinter/nn/pretrained.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "internal/json_text.h"
#include "sinter/autograd.h"
#include "sinter/core/error.h"
#include "sinter/fp8.h"
#include "sinter/io.h"
#include "sinter/ops.h"

#ifdef SINTER_WITH_NLOHMANN_JSON
#include <nlohmann/json.hpp>
#endif

namespace sinter::nn::models {
namespace {

namespace fs = std::filesystem;

constexpr const char* kEndOfText = "<|endoftext|>";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kSingleFile = "model.safetensors";

// One weight under its two names: Sinter's state-dict key and the Hugging Face class's, and
// whether the class stores it transposed (GPT-2's Conv1D keeps a (in, out) matrix).
struct WeightName {
  std::string ours, theirs;
  bool transposed = false;
};

// A Llama's keys are Hugging Face's already (models.h); its layers' FP8 training state, where
// fp8::prepare gave them one, is not a weight of the folder.
std::vector<WeightName> llama_names(const Llama& m) {
  std::vector<WeightName> names;
  for (const auto& [key, value] : m.state_dict()) {
    if (!fp8::is_state_key(key)) names.push_back({key, key});
  }
  return names;
}

// GPT -> GPT2LMHeadModel: blocks.i.{ln1, attn.qkv, attn.out_proj, ln2, fc, proj} are
// transformer.h.i.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}. Both split c_attn's
// output as q, k, v, each heads-major, so the fused matrix needs no reordering, only the transpose.
std::vector<WeightName> gpt_names(const GPTConfig& c) {
  std::vector<WeightName> names = {{"wte.weight", "transformer.wte.weight"},
                                   {"wpe.weight", "transformer.wpe.weight"},
                                   {"ln_f.weight", "transformer.ln_f.weight"},
                                   {"ln_f.bias", "transformer.ln_f.bias"}};
  const std::pair<const char*, const char*> layers[] = {
      {"ln1", "ln_1"}, {"attn.qkv", "attn.c_attn"}, {"attn.out_proj", "attn.c_proj"},
      {"ln2", "ln_2"}, {"fc", "mlp.c_fc"},          {"proj", "mlp.c_proj"}};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string ours = "blocks." + std::to_string(i) + ".";
    const std::string theirs = "transformer.h." + std::to_string(i) + ".";
    for (const auto& [a, b] : layers) {
      const bool linear = std::string(a).find("ln") != 0;
      names.push_back({ours + a + ".weight", theirs + b + ".weight", linear});
      names.push_back({ours + a + ".bias", theirs + b + ".bias"});
    }
  }
  if (!c.tie_weights) names.push_back({"lm_head.weight", "lm_head.weight"});
  return names;
}

// --- writing ---

// A double as JSON: the shortest text that reads back to it, with ".0" where that is an integer
// (so that Python reads a float).
std::string json_number(double v) {
  SINTER_CHECK(std::isfinite(v), "save_pretrained: a config value is not finite: ", v);
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// A JSON object written field by field, in the order given (config files read best so).
class JsonObject {
 public:
  JsonObject& raw(const std::string& key, const std::string& value) {
    fields_.emplace_back(key, value);
    return *this;
  }
  JsonObject& str(const std::string& key, const std::string& v) {
    return raw(key, sinter::detail::json_string(v));
  }
  JsonObject& num(const std::string& key, int64_t v) { return raw(key, std::to_string(v)); }
  JsonObject& real(const std::string& key, double v) { return raw(key, json_number(v)); }
  JsonObject& flag(const std::string& key, bool v) { return raw(key, v ? "true" : "false"); }
  JsonObject& id(const std::string& key, int32_t v) {  // a token id, null where there is none
    return raw(key, v < 0 ? "null" : std::to_string(v));
  }
  std::string text(int indent = 0) const {
    const std::string pad(static_cast<size_t>(indent) + 2, ' ');
    std::string out = "{";
    for (size_t i = 0; i < fields_.size(); ++i) {
      out += (i ? ",\n" : "\n") + pad + sinter::detail::json_string(fields_[i].first) + ": " +
             fields_[i].second;
    }
    return out + "\n" + std::string(static_cast<size_t>(indent), ' ') + "}";
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

const char* torch_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return "float32";
    case DType::bf16:
      return "bfloat16";
    case DType::f16:
      return "float16";
    default:
      break;
  }
  SINTER_THROW("save_pretrained: dtype ", dtype_name(t), " is not one of f32, bf16 and f16");
}

void write_text(const fs::path& path, const std::string& text) {
  write_file_atomically(path.string(), text);
}

// Note [hugging face configs]
// config.json names every field the class reads, with Sinter's values, rather than leaving any to
// the class's defaults: LlamaConfig's defaults are not Sinter's (rms_norm_eps 1e-6, BOS 1 and EOS
// 2, which are bytes of Sinter's vocabulary, tie_word_embeddings false) and GPT2Config's EOS is
// 50256. rope_theta is written both at the top (transformers 4 and the serving tools that follow
// it) and in rope_parameters (transformers 5), and the dtype both as "torch_dtype" (4) and "dtype"
// (5). Reading checks the fields that change what the model computes against what Sinter's model
// computes, and refuses the file where they differ.
std::string llama_config(const Llama& m, DType dtype, int32_t bos, int32_t eos) {
  const LlamaConfig& c = m.config;
  JsonObject rope;
  rope.str("rope_type", "default").real("rope_theta", c.rope_base);
  JsonObject j;
  j.raw("architectures", "[\"LlamaForCausalLM\"]")
      .str("model_type", "llama")
      .num("vocab_size", c.vocab_size)
      .num("hidden_size", c.n_embd)
      .num("intermediate_size", mlp_width(c))
      .num("num_hidden_layers", c.n_layer)
      .num("num_attention_heads", c.n_head)
      .num("num_key_value_heads", c.n_kv_head)
      .num("head_dim", c.n_embd / c.n_head)
      .str("hidden_act", "silu")
      .num("max_position_embeddings", c.context_length)
      .real("rms_norm_eps", c.norm_eps)
      .real("rope_theta", c.rope_base)
      .raw("rope_parameters", rope.text(2))
      .flag("attention_bias", false)
      .real("attention_dropout", 0.0)
      .flag("mlp_bias", false)
      .num("pretraining_tp", 1)
      .flag("tie_word_embeddings", c.tie_weights)
      .real("initializer_range", 0.02)
      .flag("use_cache", true)
      .id("bos_token_id", bos)
      .id("eos_token_id", eos)
      .raw("pad_token_id", "null")
      .str("torch_dtype", torch_dtype(dtype))
      .str("dtype", torch_dtype(dtype));
  return j.text() + "\n";
}

std::string gpt_config(const GPT& m, DType dtype, int32_t bos, int32_t eos) {
  const GPTConfig& c = m.config;
  JsonObject j;
  j.raw("architectures", "[\"GPT2LMHeadModel\"]")
      .str("model_type", "gpt2")
      .num("vocab_size", c.vocab_size)
      .num("n_positions", c.context_length)
      .num("n_embd", c.n_embd)
      .num("n_layer", c.n_layer)
      .num("n_head", c.n_head)
      .raw("n_inner", "null")
      .str("activation_function", "gelu_new")
      .real("resid_pdrop", c.dropout)
      .real("embd_pdrop", c.dropout)
      .real("attn_pdrop", c.dropout)
      .real("layer_norm_epsilon", m.ln_f->eps)
      .real("initializer_range", 0.02)
      .flag("scale_attn_weights", true)
      .flag("scale_attn_by_inverse_layer_idx", false)
      .flag("reorder_and_upcast_attn", false)
      .flag("add_cross_attention", false)
      .flag("tie_word_embeddings", c.tie_weights)
      .flag("use_cache", true)
      .id("bos_token_id", bos)
      .id("eos_token_id", eos)
      .str("torch_dtype", torch_dtype(dtype))
      .str("dtype", torch_dtype(dtype));
  return j.text() + "\n";
}

std::string generation_config(int32_t bos, int32_t eos) {
  JsonObject j;
  j.flag("_from_model_config", true).id("bos_token_id", bos).id("eos_token_id", eos);
  return j.text() + "\n";
}

// PreTrainedTokenizerFast over tokenizer.json, adding no BOS or EOS of its own (without this file
// AutoTokenizer takes the tokenizer class of config.json's model type, LlamaTokenizerFast, which
// prepends a "<s>" that is not in the vocabulary).
std::string tokenizer_config(const data::BpeTokenizer& t, int64_t context, int32_t eot) {
  JsonObject added;
  for (const auto& [content, id] : t.special_tokens()) {
    JsonObject a;
    a.str("content", content)
        .flag("lstrip", false)
        .flag("normalized", false)
        .flag("rstrip", false)
        .flag("single_word", false)
        .flag("special", true);
    added.raw(std::to_string(id), a.text(4));
  }
  const std::string eot_text = eot < 0 ? "null" : sinter::detail::json_string(kEndOfText);
  JsonObject j;
  j.str("tokenizer_class", "PreTrainedTokenizerFast")
      .num("model_max_length", context)
      .flag("add_bos_token", false)
      .flag("add_eos_token", false)
      .flag("clean_up_tokenization_spaces", false)
      .raw("bos_token", eot_text)
      .raw("eos_token", eot_text)
      .raw("unk_token", "null")
      .raw("pad_token", "null")
      .raw("added_tokens_decoder", added.text(2));
  return j.text() + "\n";
}

std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

// Whether `name` is a weight file save_pretrained writes (single, sharded or the index).
bool is_weight_file(const std::string& name) {
  if (name == kSingleFile || name == kIndexFile) return true;
  return name.rfind("model-", 0) == 0 && name.find("-of-") != std::string::npos &&
         name.size() > 12 && name.substr(name.size() - 12) == ".safetensors";
}

// The tensors under the class's names, on the host, in the file dtype.
StateDict their_weights(const StateDict& ours, const std::vector<WeightName>& names, DType dtype) {
  NoGradGuard no_grad;
  StateDict theirs;
  for (const WeightName& n : names) {
    Tensor t;
    const auto it = ours.find(n.ours);
    if (it != ours.end()) {
      t = it->second.detach().to(Device::cpu());
    } else {
      // A GPT without biases: GPT-2's Linear layers have them, and zero ones change nothing.
      const std::string weight = n.ours.substr(0, n.ours.size() - 4) + "weight";
      SINTER_CHECK(n.ours.ends_with(".bias") && ours.count(weight), "save_pretrained: ", n.ours,
                   " is not in the model's state dict");
      t = zeros({ours.at(weight).size(0)});
    }
    if (n.transposed) t = t.t();
    theirs[n.theirs] = t.contiguous().to(dtype);
  }
  return theirs;
}

void write_weights(const StateDict& weights, const fs::path& dir, int64_t max_shard_bytes) {
  SINTER_CHECK(max_shard_bytes > 0, "save_pretrained: max_shard_bytes must be positive, got ",
               max_shard_bytes);
  std::vector<StateDict> shards(1);
  std::vector<int64_t> bytes(1, 0);
  int64_t total = 0;
  for (const auto& [name, t] : weights) {
    const int64_t n = t.numel() * static_cast<int64_t>(element_size(t.dtype()));
    if (!shards.back().empty() && bytes.back() + n > max_shard_bytes) {
      shards.emplace_back();
      bytes.push_back(0);
    }
    shards.back()[name] = t;
    bytes.back() += n;
    total += n;
  }
  // Note [weight file order]
  // A reader takes model.safetensors where there is one (transformers does), else the index. Each
  // file is written whole, but the folder is not one write: the order keeps a run killed between
  // two files from leaving a folder that reads as a mix of two saves without an error. One file:
  // the old index goes first (the old shards then name nothing), then model.safetensors, then the
  // old shards. Shards: the old model.safetensors goes first, then the shards, the index, and
  // shards of another count. (Shards of the same count are replaced one by one: a run killed
  // among them leaves a mix under the old index, as transformers' own save would.)
  std::set<std::string> written;
  const auto remove_file = [&](const std::string& name) {
    std::error_code ec;
    fs::remove(dir / name, ec);
    SINTER_CHECK(!ec, "save_pretrained: cannot remove the earlier save's ", (dir / name).string(),
                 ": ", ec.message());
  };
  if (shards.size() == 1) {
    remove_file(kIndexFile);
    save(shards[0], (dir / kSingleFile).string(), {{"format", "pt"}});
    written.insert(kSingleFile);
  } else {
    remove_file(kSingleFile);
    JsonObject map;
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string file = shard_name(i, shards.size());
      save(shards[i], (dir / file).string(), {{"format", "pt"}});
      written.insert(file);
      for (const auto& entry : shards[i]) map.str(entry.first, file);
    }
    JsonObject meta;
    meta.num("total_size", total);
    JsonObject index;
    index.raw("metadata", meta.text(2)).raw("weight_map", map.text(2));
    write_text(dir / kIndexFile, index.text() + "\n");
    written.insert(kIndexFile);
  }
  std::error_code ec;
  std::vector<std::string> stale;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (is_weight_file(name) && !written.count(name)) stale.push_back(name);
  }
  SINTER_CHECK(!ec, "save_pretrained: cannot list ", dir.string(), ": ", ec.message());
  for (const std::string& name : stale) remove_file(name);
}

}  // namespace

void save_pretrained(const Module& model, const std::string& dir,
                     const SavePretrainedOptions& options) {
  SINTER_CHECK(!dir.empty(), "save_pretrained: empty folder name");
  const auto* gpt = dynamic_cast<const GPT*>(&model);
  const auto* llama = dynamic_cast<const Llama*>(&model);
  SINTER_CHECK(gpt || llama, "save_pretrained: ", model.name(),
               " is not a GPT or a Llama, the models with a Hugging Face class");
  torch_dtype(options.dtype);  // checks it before anything is written
  const int64_t vocab = gpt ? gpt->config.vocab_size : llama->config.vocab_size;
  const int64_t context = gpt ? gpt->config.context_length : llama->config.context_length;
  int32_t eot = -1;
  if (options.tokenizer) {
    SINTER_CHECK(options.tokenizer->vocab_size() <= vocab, "save_pretrained: the tokenizer has ",
                 options.tokenizer->vocab_size(), " tokens, more than the model's vocabulary of ",
                 vocab);
    eot = options.tokenizer->special_id(kEndOfText);
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  SINTER_CHECK(!ec && fs::is_directory(dir), "save_pretrained: cannot create the folder ", dir,
               ": ", ec ? ec.message() : std::string("a file of that name exists"));
  const fs::path folder(dir);
  const StateDict ours = model.state_dict();
  write_weights(
      their_weights(ours, gpt ? gpt_names(gpt->config) : llama_names(*llama), options.dtype),
      folder, options.max_shard_bytes);
  write_text(folder / "config.json", gpt ? gpt_config(*gpt, options.dtype, eot, eot)
                                         : llama_config(*llama, options.dtype, eot, eot));
  write_text(folder / "generation_config.json", generation_config(eot, eot));
  if (options.tokenizer) {
    options.tokenizer->save((folder / "tokenizer.json").string());
    write_text(folder / "tokenizer_config.json",
               tokenizer_config(*options.tokenizer, context, eot));
  } else {  // an earlier save's tokenizer is not this model's
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
      std::error_code ec;
      fs::remove(folder / name, ec);
      SINTER_CHECK(!ec, "save_pretrained: cannot remove ", (folder / name).string(), ": ",
                   ec.message());
    }
  }
}

#ifdef SINTER_WITH_NLOHMANN_JSON

namespace {

using json = nlohmann::json;

// fs::exists without the exception a permission error throws: that is a missing file here too.
bool file_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  SINTER_CHECK(in.good(), "from_pretrained: cannot open ", path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return json::parse(buffer.str());
  } catch (const json::exception& e) {
    SINTER_THROW("from_pretrained: ", path.string(), " is not JSON: ", e.what());
  }
}

// The fields of config.json, each read with the file's name and the field's in its errors.
class Config {
 public:
  Config(json j, std::string path) : j_(std::move(j)), path_(std::move(path)) {
    SINTER_CHECK(j_.is_object(), "from_pretrained: ", path_, " is not a JSON object");
  }

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  int64_t integer(const char* key) const {
    SINTER_CHECK(has(key) && j_[key].is_number_integer(), "from_pretrained: ", path_, ": \"", key,
                 "\" is ", has(key) ? j_[key].dump() : "missing", ", not an integer");
    return j_[key].get<int64_t>();
  }
  int64_t integer(const char* key, int64_t fallback) const {
    return has(key) ? integer(key) : fallback;
  }
  double real(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    SINTER_CHECK(j_[key].is_number(), "from_pretrained: ", path_, ": \"", key, "\" is ",
                 j_[key].dump(), ", not a number");
    return j_[key].get<double>();
  }
  bool flag(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    SINTER_CHECK(j_[key].is_boolean(), "from_pretrained: ", path_, ": \"", key, "\" is ",
                 j_[key].dump(), ", not true or false");
    return j_[key].get<bool>();
  }
  std::string text(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    SINTER_CHECK(j_[key].is_string(), "from_pretrained: ", path_, ": \"", key, "\" is ",
                 j_[key].dump(), ", not a string");
    return j_[key].get<std::string>();
  }

  // A field that must have the value Sinter's model computes with (absent: the class default,
  // which is that value).
  void require_flag(const char* key, bool value, const char* why) const {
    SINTER_CHECK(flag(key, value) == value, "from_pretrained: ", path_, ": \"", key, "\" is ",
                 j_[key].dump(), "; Sinter's model ", why);
  }
  void require_text(const char* key, std::initializer_list<const char*> values,
                    const char* why) const {
    const std::string v = text(key, *values.begin());
    const bool ok =
        std::any_of(values.begin(), values.end(), [&](const char* x) { return v == x; });
    SINTER_CHECK(ok, "from_pretrained: ", path_, ": \"", key, "\" is \"", v, "\"; Sinter's model ",
                 why);
  }

  const json& raw() const { return j_; }
  const std::string& path() const { return path_; }

 private:
  json j_;
  std::string path_;
};

void require_architecture(const Config& c, const char* cls) {
  if (!c.has("architectures")) return;
  const json& a = c.raw()["architectures"];
  const bool ok = a.is_array() && std::any_of(a.begin(), a.end(), [&](const json& x) {
                    return x.is_string() && x.get<std::string>() == cls;
                  });
  SINTER_CHECK(ok, "from_pretrained: ", c.path(), ": \"architectures\" is ", a.dump(),
               "; Sinter reads ", cls, " (a causal language model with its head)");
}

// rope_theta from transformers 5's rope_parameters or 4's top-level field (with rope_scaling,
// where 4 kept the scaling), refusing any scaling other than none, and two thetas that differ
// (transformers 4 would read one, 5 the other).
double rope_theta(const Config& c) {
  std::optional<double> theta;
  if (c.has("rope_theta")) theta = c.real("rope_theta", 0.0);
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!c.has(key)) continue;
    const json& r = c.raw()[key];
    SINTER_CHECK(r.is_object(), "from_pretrained: ", c.path(), ": \"", key, "\" is ", r.dump(),
                 ", not an object");
    std::string type = "default";
    for (const char* name : {"type", "rope_type"}) {  // rope_type, where both are, as transformers
      if (!r.contains(name)) continue;
      SINTER_CHECK(r[name].is_string(), "from_pretrained: ", c.path(), ": \"", key, "\".", name,
                   " is ", r[name].dump(), ", not a string");
      type = r[name].get<std::string>();
    }
    SINTER_CHECK(type == "default", "from_pretrained: ", c.path(), ": \"", key,
                 "\" has rope_type \"", type, "\"; Sinter's Llama computes the default rope only (",
                 r.dump(), ")");
    if (r.contains("rope_theta")) {
      SINTER_CHECK(r["rope_theta"].is_number(), "from_pretrained: ", c.path(), ": \"", key,
                   "\".rope_theta is ", r["rope_theta"].dump(), ", not a number");
      const double t = r["rope_theta"].get<double>();
      SINTER_CHECK(!theta || *theta == t, "from_pretrained: ", c.path(), ": \"", key,
                   "\".rope_theta ", t, " is not the rope_theta ", *theta,
                   " given elsewhere in the file (transformers' versions would differ on it)");
      theta = t;
    }
  }
  return theta.value_or(10000.0);
}

LlamaConfig read_llama_config(const Config& c) {
  require_architecture(c, "LlamaForCausalLM");
  c.require_text("hidden_act", {"silu", "swish"}, "uses SiLU in its MLP");
  c.require_flag("attention_bias", false, "has no biases in attention");
  c.require_flag("mlp_bias", false, "has no biases in its MLP");
  // pretraining_tp > 1 computes the same projections in slices (to rounding): read as one.
  LlamaConfig l;
  l.vocab_size = c.integer("vocab_size");
  l.n_embd = c.integer("hidden_size");
  l.mlp_hidden = c.integer("intermediate_size");
  l.n_layer = c.integer("num_hidden_layers");
  l.n_head = c.integer("num_attention_heads");
  l.n_kv_head = c.integer("num_key_value_heads", l.n_head);
  l.context_length = c.integer("max_position_embeddings");
  l.norm_eps = c.real("rms_norm_eps", 1e-6);  // LlamaConfig's default
  l.rope_base = rope_theta(c);
  l.tie_weights = c.flag("tie_word_embeddings", false);
  SINTER_CHECK(l.n_head > 0 && l.n_embd % l.n_head == 0, "from_pretrained: ", c.path(),
               ": hidden_size ", l.n_embd, " is not a multiple of num_attention_heads ", l.n_head);
  const int64_t head_dim = c.integer("head_dim", l.n_embd / l.n_head);
  SINTER_CHECK(head_dim == l.n_embd / l.n_head, "from_pretrained: ", c.path(), ": \"head_dim\" is ",
               head_dim, "; Sinter's Llama has heads of hidden_size / num_attention_heads = ",
               l.n_embd / l.n_head);
  return l;
}

GPTConfig read_gpt_config(const Config& c, double dropout) {
  require_architecture(c, "GPT2LMHeadModel");
  c.require_text("activation_function", {"gelu_new", "gelu_pytorch_tanh"},
                 "uses the tanh GELU (gelu_new) in its MLP");
  c.require_flag("scale_attn_weights", true, "scales attention scores by 1/sqrt(head size)");
  c.require_flag("scale_attn_by_inverse_layer_idx", false,
                 "does not scale attention by the layer index");
  c.require_flag("add_cross_attention", false, "has no cross-attention");
  GPTConfig g;
  g.vocab_size = c.integer("vocab_size");
  g.context_length = c.integer("n_positions");
  g.n_embd = c.integer("n_embd");
  g.n_layer = c.integer("n_layer");
  g.n_head = c.integer("n_head");
  g.dropout = dropout;
  g.bias = true;
  g.tie_weights = c.flag("tie_word_embeddings", true);
  const int64_t inner = c.integer("n_inner", 4 * g.n_embd);
  SINTER_CHECK(inner == 4 * g.n_embd, "from_pretrained: ", c.path(), ": \"n_inner\" is ", inner,
               "; Sinter's GPT has an MLP of 4 n_embd = ", 4 * g.n_embd);
  const double eps = c.real("layer_norm_epsilon", 1e-5);
  SINTER_CHECK(eps == 1e-5, "from_pretrained: ", c.path(), ": \"layer_norm_epsilon\" is ", eps,
               "; Sinter's GPT normalizes with 1e-5");
  return g;
}

// Every tensor of the folder's weights, under the file's names, on the host.
StateDict read_weights(const fs::path& dir, DType& dtype) {
  std::vector<std::string> files;
  if (file_exists(dir /
                  kSingleFile)) {  // first, as transformers reads it (Note [weight file order])
    files.push_back(kSingleFile);
  } else {
    SINTER_CHECK(file_exists(dir / kIndexFile), "from_pretrained: ", dir.string(), " has neither ",
                 kSingleFile, " nor ", kIndexFile,
                 " (only safetensors weights are read: save them with safe_serialization)");
    const json index = read_json(dir / kIndexFile);
    SINTER_CHECK(index.contains("weight_map") && index["weight_map"].is_object(),
                 "from_pretrained: ", (dir / kIndexFile).string(), " has no weight_map object");
    std::set<std::string> names;
    for (const auto& [tensor, file] : index["weight_map"].items()) {
      SINTER_CHECK(file.is_string(), "from_pretrained: ", (dir / kIndexFile).string(),
                   ": the file of ", tensor, " is ", file.dump(), ", not a name");
      names.insert(file.get<std::string>());
    }
    files.assign(names.begin(), names.end());
  }
  StateDict all;
  std::set<DType> dtypes;
  for (const std::string& f : files) {
    SINTER_CHECK(f.find('/') == std::string::npos && f.find("..") == std::string::npos,
                 "from_pretrained: the index names the file \"", f, "\" outside the folder");
    for (auto& [name, t] : load((dir / f).string())) {
      SINTER_CHECK(all.count(name) == 0, "from_pretrained: ", name, " is in two files");
      dtypes.insert(t.dtype());
      all[name] = std::move(t);
    }
  }
  dtype = dtypes.size() == 1 ? *dtypes.begin() : DType::f32;
  return all;
}

// Buffers that Hugging Face checkpoints carry and Sinter computes instead: GPT-2's causal masks
// and old Llamas' rotary frequencies.
bool is_derived_buffer(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") ||
         name.ends_with("rotary_emb.inv_freq");
}

void copy_weights(Module& model, const std::vector<WeightName>& names, const StateDict& theirs,
                  bool tied, const std::string& dir) {
  NoGradGuard no_grad;
  const StateDict ours = model.state_dict();
  StateDict converted;
  std::set<std::string> used;
  for (const WeightName& n : names) {
    const auto it = theirs.find(n.theirs);
    SINTER_CHECK(it != theirs.end(), "from_pretrained: ", dir, ": the weights lack ", n.theirs);
    Tensor t = it->second;
    SINTER_CHECK(is_floating(t.dtype()), "from_pretrained: ", dir, ": ", n.theirs, " is ",
                 dtype_name(t.dtype()), ", not a floating-point tensor");
    if (n.transposed) {
      SINTER_CHECK(t.dim() == 2, "from_pretrained: ", dir, ": ", n.theirs, " has shape ", t.shape(),
                   ", not a matrix");
      t = t.t();
    }
    const Tensor& dst = ours.at(n.ours);
    SINTER_CHECK(t.shape() == dst.shape(), "from_pretrained: ", dir, ": ", n.theirs, " has shape ",
                 it->second.shape(), "; the config makes it ",
                 n.transposed ? dst.t().shape() : dst.shape());
    converted[n.ours] = t.to(dst.dtype());
    used.insert(n.theirs);
  }
  for (const auto& [name, t] : theirs) {
    if (used.count(name) || is_derived_buffer(name)) continue;
    if (tied && name == "lm_head.weight") {
      // A tied checkpoint may keep the head's copy of the embedding; a head of its own, which
      // transformers would load untied, is not that model.
      const std::string embedding = names.front().theirs;
      const Tensor& e = theirs.at(embedding);
      SINTER_CHECK(t.shape() == e.shape() &&
                       (t.to(DType::f32) - e.to(DType::f32)).abs().max().item<float>() == 0.0f,
                   "from_pretrained: ", dir,
                   ": tie_word_embeddings is true but lm_head.weight is not the embedding ",
                   embedding, " (transformers would read an untied head)");
      continue;
    }
    SINTER_THROW("from_pretrained: ", dir, ": the weights hold ", name, " (shape ", t.shape(),
                 "), which the config's model has no place for");
  }
  model.load_state_dict(converted);
}

// GPT-2 checkpoints of the first release (and of GPT2Model) name the weights without the
// "transformer." prefix that GPT2LMHeadModel's save_pretrained writes; transformers adds it.
void add_gpt2_prefix(StateDict& weights) {
  for (const auto& entry : weights) {
    if (entry.first.starts_with("transformer.") || entry.first == "lm_head.weight") return;
  }
  StateDict prefixed;
  for (auto& [name, t] : weights) prefixed["transformer." + name] = std::move(t);
  weights = std::move(prefixed);
}

Pretrained read_folder(const std::string& dir, const FromPretrainedOptions& options) {
  const fs::path folder(dir);
  std::error_code ec;
  SINTER_CHECK(fs::is_directory(folder, ec), "from_pretrained: ", dir, " is not a folder");
  const Config config(read_json(folder / "config.json"), (folder / "config.json").string());
  const std::string type = config.text("model_type", "");
  Pretrained p;
  StateDict weights = read_weights(folder, p.dtype);
  if (type == "llama") {
    p.llama = std::make_shared<Llama>(read_llama_config(config));
    p.module = p.llama;
    copy_weights(*p.llama, llama_names(*p.llama), weights, p.llama->config.tie_weights, dir);
  } else if (type == "gpt2") {
    p.gpt = std::make_shared<GPT>(read_gpt_config(config, options.dropout));
    add_gpt2_prefix(weights);
    p.module = p.gpt;
    copy_weights(*p.gpt, gpt_names(p.gpt->config), weights, p.gpt->config.tie_weights, dir);
  } else {
    SINTER_THROW("from_pretrained: ", config.path(), ": model_type \"", type,
                 "\" is not one Sinter reads (llama, gpt2)");
  }
  if (options.tokenizer && file_exists(folder / "tokenizer.json")) {
    p.tokenizer = data::BpeTokenizer::load((folder / "tokenizer.json").string());
    const int64_t vocab = p.gpt ? p.gpt->config.vocab_size : p.llama->config.vocab_size;
    SINTER_CHECK(p.tokenizer->vocab_size() <= vocab, "from_pretrained: ", dir,
                 ": tokenizer.json has ", p.tokenizer->vocab_size(),
                 " tokens, more than the model's vocabulary of ", vocab);
  }
  p.module->to(options.device);
  return p;
}

}  // namespace

Pretrained from_pretrained(const std::string& dir, const FromPretrainedOptions& options) {
  try {
    return read_folder(dir, options);
  } catch (const json::exception& e) {
    SINTER_THROW("from_pretrained: ", dir, ": ", e.what());
  } catch (const fs::filesystem_error& e) {
    SINTER_THROW("from_pretrained: ", dir, ": ", e.what());
  }
}

#else

Pretrained from_pretrained(const std::string& dir, const FromPretrainedOptions&) {
  SINTER_THROW("from_pretrained: cannot read ", dir,
               ": Sinter was built without nlohmann_json, which reads config.json");
}

#endif

}  // namespace sinter::nn::models

// nn::models::save_pretrained and from_pretrained without Python: the round trip of each model (the
// same logits; a GPT without biases reads back with zero ones), the files and their fields, GPT-2's
// transposed matrices written out by hand, shards and stale files, and the errors.
// tests/scripts/check_pretrained_hf.py checks the same folders against transformers itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sinter/autograd.h"
#include "sinter/io.h"
#include "sinter/nn/models.h"
#include "sinter/nn/pretrained.h"
#include "sinter/sinter.h"
#include "test_util.h"

namespace sinter {
namespace {

namespace fs = std::filesystem;
namespace models = nn::models;
using ::sinter::testing::all_close;
using ::sinter::testing::expect_error;
using ::sinter::testing::TempDir;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void perturb(nn::Module& m, Generator& gen) {
  NoGradGuard no_grad;
  for (Tensor& p : m.parameters()) p.add_(randn(p.shape(), {}, &gen) * 0.05);
}

Tensor logits_of(nn::Module& m, const Tensor& ids) {
  NoGradGuard no_grad;
  m.eval();
  return m.forward(ids);
}

models::LlamaConfig small_llama(bool tied) {
  return {.vocab_size = 40,
          .context_length = 16,
          .n_layer = 2,
          .n_head = 4,
          .n_kv_head = 2,
          .n_embd = 32,
          .rope_base = 500.0,
          .norm_eps = 1e-6,
          .tie_weights = tied};
}

TEST(Pretrained, LlamaRoundTripsWithItsConfig) {
  SINTER_REQUIRE_JSON();
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    Generator gen(testing::fresh_seed());
    models::Llama llama(small_llama(tied));
    perturb(llama, gen);
    const TempDir dir;
    models::save_pretrained(llama, dir.str());
    const std::string config = read_text(dir.path() / "config.json");
    for (const char* field : {"\"model_type\": \"llama\"", "\"num_key_value_heads\": 2",
                              "\"rms_norm_eps\": 1e-06", "\"rope_theta\": 500.0",
                              "\"intermediate_size\": 96", "\"max_position_embeddings\": 16"}) {
      EXPECT_NE(config.find(field), std::string::npos) << field << " not in " << config;
    }
    EXPECT_NE(
        config.find(tied ? "\"tie_word_embeddings\": true" : "\"tie_word_embeddings\": false"),
        std::string::npos);
    EXPECT_EQ(load(dir.file("model.safetensors")).count("lm_head.weight"), tied ? 0u : 1u);
    EXPECT_EQ(load_metadata(dir.file("model.safetensors")).at("format"), "pt");
    EXPECT_FALSE(fs::exists(dir.path() / "tokenizer.json"));  // none was given

    const models::Pretrained back = models::from_pretrained(dir.str());
    ASSERT_TRUE(back.llama);
    EXPECT_EQ(back.llama->config.norm_eps, 1e-6);
    EXPECT_EQ(back.llama->config.rope_base, 500.0);
    EXPECT_EQ(back.llama->config.tie_weights, tied);
    EXPECT_FALSE(back.tokenizer.has_value());
    const Tensor ids = randint(0, 40, {2, 10}, {.dtype = DType::i64}, &gen);
    EXPECT_TRUE(all_close(logits_of(*back.module, ids), logits_of(llama, ids), 0, 0));
  }
}

// GPT-2's Conv1D keeps (in, out): c_attn is qkv's weight transposed, and its bias qkv's bias.
TEST(Pretrained, GptIsWrittenAsGpt2WithConv1DMatrices) {
  SINTER_REQUIRE_JSON();
  Generator gen(testing::fresh_seed());
  models::GPT gpt(
      {.vocab_size = 40, .context_length = 16, .n_layer = 2, .n_head = 4, .n_embd = 32});
  perturb(gpt, gen);
  const TempDir dir;
  models::save_pretrained(gpt, dir.str(), {.dtype = DType::bf16});
  const StateDict files = load(dir.file("model.safetensors"));
  const StateDict ours = gpt.state_dict();
  EXPECT_EQ(files.at("transformer.h.1.attn.c_attn.weight").shape(), (Shape{32, 96}));
  EXPECT_EQ(files.at("transformer.h.1.attn.c_attn.weight").dtype(), DType::bf16);
  EXPECT_TRUE(all_close(files.at("transformer.h.1.attn.c_attn.weight").to(DType::f32),
                        ours.at("blocks.1.attn.qkv.weight").t().to(DType::bf16).to(DType::f32), 0,
                        0));
  EXPECT_TRUE(all_close(files.at("transformer.h.0.mlp.c_proj.bias").to(DType::f32),
                        ours.at("blocks.0.proj.bias").to(DType::bf16).to(DType::f32), 0, 0));
  EXPECT_EQ(files.count("lm_head.weight"), 0u);  // tied
  EXPECT_NE(read_text(dir.path() / "config.json").find("\"dtype\": \"bfloat16\""),
            std::string::npos);

  const models::Pretrained back = models::from_pretrained(dir.str());
  ASSERT_TRUE(back.gpt);
  EXPECT_EQ(back.dtype, DType::bf16);
  EXPECT_TRUE(all_close(back.gpt->state_dict().at("blocks.1.fc.weight"),
                        ours.at("blocks.1.fc.weight").to(DType::bf16).to(DType::f32), 0, 0));
}

TEST(Pretrained, GptWithoutBiasesReadsBackWithZeroOnes) {
  SINTER_REQUIRE_JSON();
  Generator gen(testing::fresh_seed());
  models::GPT gpt({.vocab_size = 40,
                   .context_length = 16,
                   .n_layer = 1,
                   .n_head = 2,
                   .n_embd = 16,
                   .bias = false,
                   .tie_weights = false});
  perturb(gpt, gen);
  const TempDir dir;
  models::save_pretrained(gpt, dir.str());
  const models::Pretrained back = models::from_pretrained(dir.str());
  ASSERT_TRUE(back.gpt);
  EXPECT_TRUE(back.gpt->config.bias);
  EXPECT_FALSE(back.gpt->config.tie_weights);
  EXPECT_EQ(back.gpt->state_dict().at("blocks.0.attn.qkv.bias").abs().max().item<float>(), 0.0f);
  const Tensor ids = randint(0, 40, {1, 12}, {.dtype = DType::i64}, &gen);
  EXPECT_TRUE(all_close(logits_of(*back.module, ids), logits_of(gpt, ids), 1e-6, 1e-5));
}

TEST(Pretrained, ShardsGetAnIndexAndStaleFilesGo) {
  SINTER_REQUIRE_JSON();
  Generator gen(testing::fresh_seed());
  models::Llama llama(small_llama(false));
  perturb(llama, gen);
  const TempDir dir;
  models::save_pretrained(llama, dir.str(), {.max_shard_bytes = 8000});
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors"));
  const std::string index = read_text(dir.path() / "model.safetensors.index.json");
  EXPECT_NE(index.find("\"weight_map\""), std::string::npos);
  EXPECT_NE(index.find("\"total_size\""), std::string::npos);
  int shards = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    shards += e.path().filename().string().starts_with("model-0000");
  }
  EXPECT_GT(shards, 2);
  const Tensor ids = randint(0, 40, {1, 8}, {.dtype = DType::i64}, &gen);
  const models::Pretrained sharded = models::from_pretrained(dir.str());
  EXPECT_TRUE(all_close(logits_of(*sharded.module, ids), logits_of(llama, ids), 0, 0));
  // Saved again in one file: the shards and the index of the first save are removed.
  models::save_pretrained(llama, dir.str());
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_FALSE(e.path().filename().string().starts_with("model-")) << e.path();
  }
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors.index.json"));
}

TEST(Pretrained, TheTokenizerTravelsWithTheModel) {
  SINTER_REQUIRE_JSON();
  const data::BpeTokenizer tok =
      data::BpeTokenizer::train("low lower lowest newer newest wider widest<|endoftext|>",
                                {.vocab_size = 270, .special_tokens = {"<|endoftext|>"}});
  models::Llama llama({.vocab_size = tok.vocab_size(),
                       .context_length = 8,
                       .n_layer = 1,
                       .n_head = 2,
                       .n_kv_head = 1,
                       .n_embd = 16});
  const TempDir dir;
  models::save_pretrained(llama, dir.str(), {.tokenizer = &tok});
  const std::string eot = std::to_string(tok.special_id("<|endoftext|>"));
  const std::string tconfig = read_text(dir.path() / "tokenizer_config.json");
  EXPECT_NE(tconfig.find("\"tokenizer_class\": \"PreTrainedTokenizerFast\""), std::string::npos);
  EXPECT_NE(tconfig.find("\"add_bos_token\": false"), std::string::npos);
  EXPECT_NE(tconfig.find("\"" + eot + "\": {"), std::string::npos);
  EXPECT_NE(read_text(dir.path() / "generation_config.json").find("\"eos_token_id\": " + eot),
            std::string::npos);
  EXPECT_NE(read_text(dir.path() / "config.json").find("\"bos_token_id\": " + eot),
            std::string::npos);
  const models::Pretrained back = models::from_pretrained(dir.str());
  ASSERT_TRUE(back.tokenizer.has_value());
  EXPECT_EQ(back.tokenizer->encode("the lowest newest"), tok.encode("the lowest newest"));
}

// A config as transformers 4 wrote it (rope_theta at the top, rope_scaling null, torch_dtype only,
// no head_dim) reads as the same model; two rope thetas that differ are refused.
TEST(Pretrained, ReadsTransformers4ConfigsAndRefusesTwoThetas) {
  SINTER_REQUIRE_JSON();
  Generator gen(testing::fresh_seed());
  models::Llama llama(small_llama(false));
  perturb(llama, gen);
  const TempDir dir;
  models::save_pretrained(llama, dir.str());
  const std::string v4 = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 40, "hidden_size": 32, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_act": "silu",
    "max_position_embeddings": 16, "rms_norm_eps": 1e-06, "rope_theta": 500.0,
    "rope_scaling": null, "attention_bias": false, "tie_word_embeddings": false,
    "torch_dtype": "float32", "transformers_version": "4.44.0"})";
  write_file_atomically(dir.file("config.json"), v4);
  const models::Pretrained back = models::from_pretrained(dir.str());
  ASSERT_TRUE(back.llama);
  EXPECT_EQ(back.llama->config.rope_base, 500.0);
  const Tensor ids = randint(0, 40, {1, 9}, {.dtype = DType::i64}, &gen);
  EXPECT_TRUE(all_close(logits_of(*back.module, ids), logits_of(llama, ids), 0, 0));

  std::string two = v4;
  two.replace(two.find("\"rope_scaling\": null"), 20,
              R"("rope_scaling": {"rope_type": "default", "rope_theta": 10000.0})");
  write_file_atomically(dir.file("config.json"), two);
  expect_error([&] { models::from_pretrained(dir.str()); },
               {"rope_theta 10000", "is not the rope_theta 500"});
  std::string typed = v4;
  typed.replace(typed.find("\"rope_scaling\": null"), 20, R"("rope_scaling": {"rope_type": 3})");
  write_file_atomically(dir.file("config.json"), typed);
  expect_error([&] { models::from_pretrained(dir.str()); }, {"rope_type is 3, not a string"});
}

// GPT-2 as first released: no "transformer." prefix, and its attention masks as buffers.
TEST(Pretrained, ReadsGpt2WeightsWithoutThePrefix) {
  SINTER_REQUIRE_JSON();
  Generator gen(testing::fresh_seed());
  models::GPT gpt(
      {.vocab_size = 40, .context_length = 16, .n_layer = 1, .n_head = 2, .n_embd = 16});
  perturb(gpt, gen);
  const TempDir dir;
  models::save_pretrained(gpt, dir.str());
  StateDict bare;
  for (const auto& [name, t] : load(dir.file("model.safetensors"))) {
    ASSERT_TRUE(name.starts_with("transformer.")) << name;
    bare[name.substr(12)] = t;
  }
  bare["h.0.attn.bias"] = ones({1, 1, 16, 16});
  save(bare, dir.file("model.safetensors"));
  const models::Pretrained back = models::from_pretrained(dir.str());
  const Tensor ids = randint(0, 40, {1, 9}, {.dtype = DType::i64}, &gen);
  EXPECT_TRUE(all_close(logits_of(*back.module, ids), logits_of(gpt, ids), 0, 0));
}

// transformers reads model.safetensors before an index, and loads a head of its own untied: a
// tied config over a file whose head is not the embedding is refused.
TEST(Pretrained, ReadsAsTransformersWhereFilesDisagree) {
  SINTER_REQUIRE_JSON();
  Generator gen(testing::fresh_seed());
  models::Llama tied(small_llama(true)), other(small_llama(true));
  perturb(tied, gen);
  perturb(other, gen);
  const TempDir dir, sharded;
  models::save_pretrained(other, sharded.str(), {.max_shard_bytes = 8000});
  models::save_pretrained(tied, dir.str());
  for (const auto& e : fs::directory_iterator(sharded.path())) {
    if (e.path().filename().string().starts_with("model-") ||
        e.path().filename() == "model.safetensors.index.json") {
      fs::copy_file(e.path(), dir.path() / e.path().filename());
    }
  }
  const Tensor ids = randint(0, 40, {1, 9}, {.dtype = DType::i64}, &gen);
  EXPECT_TRUE(all_close(logits_of(*models::from_pretrained(dir.str()).module, ids),
                        logits_of(tied, ids), 0, 0));

  StateDict weights = load(dir.file("model.safetensors"));
  weights["lm_head.weight"] = weights.at("model.embed_tokens.weight").clone();
  save(weights, dir.file("model.safetensors"));
  EXPECT_NO_THROW(models::from_pretrained(dir.str()));  // the embedding's copy
  weights["lm_head.weight"] = weights.at("lm_head.weight") * 2.0;
  save(weights, dir.file("model.safetensors"));
  expect_error([&] { models::from_pretrained(dir.str()); },
               {"tie_word_embeddings is true but lm_head.weight is not the embedding"});
}

TEST(Pretrained, BadModelsAndFoldersAreErrors) {
  SINTER_REQUIRE_JSON();
  const TempDir dir;
  expect_error([&] { models::save_pretrained(nn::Linear(2, 2), dir.str()); },
               {"save_pretrained", "Linear", "not a GPT or a Llama"});
  models::Llama llama(small_llama(false));
  expect_error([&] { models::save_pretrained(llama, dir.str(), {.dtype = DType::i64}); },
               {"save_pretrained", "i64", "f32, bf16 and f16"});
  EXPECT_FALSE(fs::exists(dir.path() / "config.json"));  // checked before anything is written
  expect_error([&] { models::from_pretrained(dir.file("missing")); }, {"is not a folder"});
  expect_error([&] { models::from_pretrained(dir.str()); }, {"config.json"});

  models::save_pretrained(llama, dir.str());
  const auto rewrite_config = [&](const std::string& from, const std::string& to) {
    std::string text = read_text(dir.path() / "config.json");
    ASSERT_NE(text.find(from), std::string::npos);
    text.replace(text.find(from), from.size(), to);
    write_file_atomically(dir.file("config.json"), text);
  };
  rewrite_config("\"model_type\": \"llama\"", "\"model_type\": \"mistral\"");
  expect_error([&] { models::from_pretrained(dir.str()); },
               {"model_type \"mistral\" is not one Sinter reads"});
  rewrite_config("\"model_type\": \"mistral\"", "\"model_type\": \"llama\"");
  rewrite_config("\"mlp_bias\": false", "\"mlp_bias\": true");
  expect_error([&] { models::from_pretrained(dir.str()); }, {"\"mlp_bias\" is true"});
  rewrite_config("\"mlp_bias\": true", "\"mlp_bias\": false");
  rewrite_config("\"head_dim\": 8", "\"head_dim\": 16");
  expect_error([&] { models::from_pretrained(dir.str()); }, {"\"head_dim\" is 16"});
  rewrite_config("\"head_dim\": 16", "\"head_dim\": 8");

  // A weight missing, and one the model has no place for.
  StateDict weights = load(dir.file("model.safetensors"));
  weights.erase("model.norm.weight");
  save(weights, dir.file("model.safetensors"));
  expect_error([&] { models::from_pretrained(dir.str()); }, {"lack model.norm.weight"});
  weights["model.norm.weight"] = ones({32});
  weights["model.extra.weight"] = ones({3});
  save(weights, dir.file("model.safetensors"));
  expect_error([&] { models::from_pretrained(dir.str()); }, {"model.extra.weight", "no place for"});
}

}  // namespace
}  // namespace sinter

// gguf::export_model: the files read back by a small GGUF reader written here from the format's
// specification (header, metadata, tensor infos, alignment), the q/k rows in llama.cpp's rope
// order, q8_0 blocks against bytes written out by hand, the vocabulary, and the errors.
// tests/scripts/check_gguf.py reads the same files with the `gguf` package and llama.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "sinter/gguf.h"
#include "sinter/nn/models.h"
#include "sinter/sinter.h"
#include "small_llama.h"
#include "test_util.h"

namespace sinter {
namespace {

using ::sinter::testing::expect_error;
using ::sinter::testing::TempDir;

// A metadata value: its GGUF type (for an array, its elements' type) and its contents.
struct Value {
  uint32_t type = 0;
  bool array = false;
  uint64_t u = 0;  // an integer or bool
  float f = 0;
  std::string s;
  std::vector<std::string> strings;
  std::vector<int32_t> ints;
};

struct TensorInfo {
  std::vector<uint64_t> dims;  // ne[0] first
  uint32_t type = 0;
  uint64_t offset = 0;  // from the data's start
};

struct File {
  std::string bytes;
  uint32_t version = 0;
  std::map<std::string, Value> kv;
  std::vector<std::string> order;  // the tensors' names in file order
  std::map<std::string, TensorInfo> tensors;
  uint64_t data_start = 0;

  // The bytes of tensor `name`, n of them.
  std::string data(const std::string& name, size_t n) const {
    return bytes.substr(data_start + tensors.at(name).offset, n);
  }
};

class Reader {
 public:
  explicit Reader(const std::string& bytes) : b_(bytes) {}
  template <class T>
  T get() {
    EXPECT_LE(at_ + sizeof(T), b_.size());
    T v{};
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = get<uint64_t>();
    std::string s = b_.substr(at_, n);
    at_ += n;
    return s;
  }
  size_t at() const { return at_; }

 private:
  const std::string& b_;
  size_t at_ = 0;
};

constexpr uint32_t kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9;
constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ8_0 = 8, kGgmlBF16 = 30;

void read_scalar(Reader& r, uint32_t type, Value& v) {
  switch (type) {
    case kU32:
      v.u = r.get<uint32_t>();
      break;
    case kI32:
      v.ints.push_back(r.get<int32_t>());
      break;
    case kF32:
      v.f = r.get<float>();
      break;
    case kBool:
      v.u = r.get<uint8_t>();
      break;
    case kString:
      v.strings.push_back(r.str());
      break;
    default:
      ADD_FAILURE() << "unexpected value type " << type;
  }
}

File read_gguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  File f;
  f.bytes.assign(std::istreambuf_iterator<char>(in), {});
  Reader r(f.bytes);
  EXPECT_EQ(f.bytes.substr(0, 4), "GGUF");
  r.get<uint32_t>();
  f.version = r.get<uint32_t>();
  const auto n_tensors = r.get<uint64_t>(), n_kv = r.get<uint64_t>();
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = r.str();
    Value v;
    v.type = r.get<uint32_t>();
    if (v.type == kArray) {
      v.array = true;
      v.type = r.get<uint32_t>();
      const auto n = r.get<uint64_t>();
      for (uint64_t j = 0; j < n; ++j) read_scalar(r, v.type, v);
    } else {
      read_scalar(r, v.type, v);
      if (v.type == kString) v.s = v.strings.at(0);
    }
    EXPECT_TRUE(f.kv.emplace(key, v).second) << key << " twice";
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const std::string name = r.str();
    TensorInfo t;
    const auto n_dims = r.get<uint32_t>();
    for (uint32_t d = 0; d < n_dims; ++d) t.dims.push_back(r.get<uint64_t>());
    t.type = r.get<uint32_t>();
    t.offset = r.get<uint64_t>();
    f.order.push_back(name);
    f.tensors[name] = t;
  }
  const uint64_t alignment = f.kv.count("general.alignment") ? f.kv["general.alignment"].u : 32;
  f.data_start = (r.at() + alignment - 1) / alignment * alignment;
  return f;
}

nn::models::LlamaConfig config(int64_t n_embd, int64_t mlp_hidden) {
  nn::models::LlamaConfig c = testing::small_llama(1, n_embd, mlp_hidden);
  c.context_length = 48;
  return c;
}

TEST(Gguf, WritesTheHeaderMetadataAndTensorInfos) {
  TempDir dir;
  const nn::models::Llama llama(config(32, 48));
  const std::string path = dir.file("m.gguf");
  const gguf::ExportSummary s =
      gguf::export_model(llama, data::BpeTokenizer(), path, {.type = gguf::Type::q8_0});
  const File f = read_gguf(path);
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(s.bytes, static_cast<int64_t>(f.bytes.size()));
  EXPECT_EQ(s.tensors, 12);

  const std::map<std::string, uint64_t> u32s = {{"general.file_type", 7},
                                                {"general.quantization_version", 2},
                                                {"general.alignment", 32},
                                                {"llama.context_length", 48},
                                                {"llama.embedding_length", 32},
                                                {"llama.block_count", 1},
                                                {"llama.feed_forward_length", 48},
                                                {"llama.attention.head_count", 4},
                                                {"llama.attention.head_count_kv", 2},
                                                {"llama.rope.dimension_count", 8},
                                                {"llama.vocab_size", 256}};
  for (const auto& [key, v] : u32s) {
    ASSERT_TRUE(f.kv.count(key)) << key;
    EXPECT_EQ(f.kv.at(key).type, kU32) << key;
    EXPECT_EQ(f.kv.at(key).u, v) << key;
  }
  EXPECT_EQ(f.kv.at("general.architecture").s, "llama");
  EXPECT_EQ(f.kv.at("general.name").s, "sinter-llama");
  EXPECT_EQ(f.kv.at("llama.rope.freq_base").f, 500.0f);
  EXPECT_EQ(f.kv.at("llama.attention.layer_norm_rms_epsilon").f, 1e-6f);

  // Row-major (rows, cols) is ne = {cols, rows}; norms f32, ffn_down's 48-long rows f16 (no
  // q8_0), the rest q8_0; every tensor at a multiple of 32, in file order without overlap.
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> dims = {
      {"token_embd.weight", {32, 256}},  {"blk.0.attn_norm.weight", {32}},
      {"blk.0.attn_q.weight", {32, 32}}, {"blk.0.attn_k.weight", {32, 16}},
      {"blk.0.attn_v.weight", {32, 16}}, {"blk.0.attn_output.weight", {32, 32}},
      {"blk.0.ffn_norm.weight", {32}},   {"blk.0.ffn_gate.weight", {32, 48}},
      {"blk.0.ffn_up.weight", {32, 48}}, {"blk.0.ffn_down.weight", {48, 32}},
      {"output_norm.weight", {32}},      {"output.weight", {32, 256}}};
  ASSERT_EQ(f.order.size(), dims.size());
  uint64_t end = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    const auto& [name, ne] = dims[i];
    EXPECT_EQ(f.order[i], name);
    const TensorInfo& t = f.tensors.at(name);
    EXPECT_EQ(t.dims, ne) << name;
    const uint32_t want = ne.size() == 1 ? kGgmlF32 : ne[0] % 32 ? kGgmlF16 : kGgmlQ8_0;
    EXPECT_EQ(t.type, want) << name;
    EXPECT_EQ(t.offset % 32, 0u) << name;
    EXPECT_GE(t.offset, end) << name;
    const uint64_t n = ne.size() == 1 ? ne[0] : ne[0] * ne[1];
    end = t.offset + (t.type == kGgmlQ8_0 ? n / 32 * 34 : t.type == kGgmlF16 ? 2 * n : 4 * n);
  }
  EXPECT_EQ(f.data_start % 32, 0u);
  EXPECT_EQ(f.bytes.size(), f.data_start + (end + 31) / 32 * 32);
}

// Rows of q_proj set to their index: per head of D = 8 rows, llama.cpp's order takes the rows
// (i, i + D/2) in turn; and rope on neighbours of those rows gives rope-on-halves' scores.
TEST(Gguf, PermutesQueryAndKeyRowsForNeighbourRope) {
  TempDir dir;
  nn::models::LlamaConfig c = config(32, 32);
  c.tie_weights = true;
  const nn::models::Llama llama(c);
  auto& attn = *llama.model->layers->at<nn::models::LlamaDecoderLayer>(0)->self_attn;
  {
    NoGradGuard no_grad;
    attn.q_proj->weight.copy_(expand(arange(32).reshape({32, 1}), {32, 32}));
  }
  const std::string path = dir.file("m.gguf");
  gguf::export_model(llama, data::BpeTokenizer(), path, {.type = gguf::Type::f32});
  const File f = read_gguf(path);
  EXPECT_EQ(f.tensors.count("output.weight"), 0u);
  std::vector<float> q(32 * 32);
  std::memcpy(q.data(), f.data("blk.0.attn_q.weight", q.size() * 4).data(), q.size() * 4);
  const std::vector<int> head0 = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int h = 0; h < 4; ++h) {
    for (int r = 0; r < 8; ++r) EXPECT_EQ(q[(h * 8 + r) * 32], h * 8 + head0[r]) << h << " " << r;
  }

  // Scores of a random input under both ropes (2 query heads per K/V head).
  std::vector<float> k(16 * 32);
  std::memcpy(k.data(), f.data("blk.0.attn_k.weight", k.size() * 4).data(), k.size() * 4);
  const Tensor gq = from_blob(q.data(), {32, 32}), gk = from_blob(k.data(), {16, 32});
  const Tensor x = randn({5, 32}), pos = arange(5, {.dtype = DType::i64});
  const auto scores = [&](const Tensor& wq, const Tensor& wk, bool interleaved) {
    const Tensor qh =
        rope(transpose(matmul(x, wq.t()).reshape({5, 4, 8}), 0, 1), pos, 500.0, interleaved);
    const Tensor kh =
        rope(transpose(matmul(x, wk.t()).reshape({5, 2, 8}), 0, 1), pos, 500.0, interleaved);
    const Tensor kv =
        expand(kh.reshape({2, 1, 5, 8}), {2, 2, 5, 8}).contiguous().reshape({4, 5, 8});
    return matmul(qh, transpose(kv, 1, 2));
  };
  NoGradGuard no_grad;
  EXPECT_TRUE(testing::all_close(
      scores(gq, gk, true), scores(attn.q_proj->weight, attn.k_proj->weight, false), 1e-4, 1e-5));
}

// One row of token_embd, three q8_0 blocks: x = (j - 16) / 4 (scale 4/127), zeros (scale 0), and
// 1e-3 ((j mod 7) - 3) (a subnormal f16 scale); the bytes as ggml's quantize_row_q8_0_ref gives.
TEST(Gguf, EncodesQ8_0BlocksAsGgml) {
  TempDir dir;
  const nn::models::Llama llama(config(96, 64));
  std::vector<float> row(96, 0.0f);
  for (int j = 0; j < 32; ++j) {
    row[j] = static_cast<float>(j - 16) / 4;
    row[64 + j] = 1e-3f * static_cast<float>(j % 7 - 3);
  }
  {
    NoGradGuard no_grad;
    llama.model->embed_tokens->weight.select(0, 0).copy_(from_blob(row.data(), {96}));
  }
  const std::string path = dir.file("m.gguf");
  gguf::export_model(llama, data::BpeTokenizer(), path, {.type = gguf::Type::q8_0});
  const File f = read_gguf(path);
  ASSERT_EQ(f.tensors.at("token_embd.weight").type, kGgmlQ8_0);
  const std::string got = f.data("token_embd.weight", 3 * 34);
  std::string want = "\x08\x28";
  for (const int q :
       {-127, -119, -111, -103, -95, -87, -79, -71, -64, -56, -48, -40, -32, -24, -16, -8,
        0,    8,    16,   24,   32,  40,  48,  56,  64,  71,  79,  87,  95,  103, 111, 119}) {
    want += static_cast<char>(q);
  }
  want += std::string(34, '\0');
  want += "\x8c\x01";
  for (int j = 0; j < 32; ++j) {
    static const int kQ[7] = {-127, -85, -42, 0, 42, 85, 127};
    want += static_cast<char>(kQ[j % 7]);
  }
  EXPECT_EQ(got, want);
}

TEST(Gguf, WritesTheVocabularyAsGpt2ByteLevel) {
  TempDir dir;
  const data::BpeTokenizer bpe = data::BpeTokenizer::train("the cat and the hat and the bat\n",
                                                           {.vocab_size = 262, .min_frequency = 2});
  ASSERT_GT(bpe.num_merges(), 0);
  nn::models::LlamaConfig c = config(32, 32);
  c.vocab_size = bpe.vocab_size() + 2;  // two tokens more than the tokenizer: padding
  const nn::models::Llama llama(c);
  const std::string path = dir.file("m.gguf");
  gguf::export_model(llama, bpe, path, {.name = "tiny"});
  const File f = read_gguf(path);
  EXPECT_EQ(f.kv.at("general.name").s, "tiny");
  EXPECT_EQ(f.kv.at("general.file_type").u, 1u);
  EXPECT_EQ(f.tensors.at("blk.0.attn_q.weight").type, kGgmlF16);
  EXPECT_EQ(f.kv.at("tokenizer.ggml.model").s, "gpt2");
  EXPECT_EQ(f.kv.at("tokenizer.ggml.pre").s, "gpt-2");
  const std::vector<std::string>& tokens = f.kv.at("tokenizer.ggml.tokens").strings;
  const std::vector<int32_t>& types = f.kv.at("tokenizer.ggml.token_type").ints;
  ASSERT_EQ(tokens.size(), static_cast<size_t>(c.vocab_size));
  ASSERT_EQ(types.size(), tokens.size());
  EXPECT_EQ(tokens['a'], "a");
  EXPECT_EQ(tokens[' '], "\xc4\xa0");   // U+0120
  EXPECT_EQ(tokens['\n'], "\xc4\x8a");  // U+010A
  EXPECT_EQ(tokens[0xAD], "\xc5\x83");  // soft hyphen: U+0100 + 67, after 67 bytes without a glyph
  EXPECT_EQ(tokens[0xFF], "\xc3\xbf");  // U+00FF, itself
  const int32_t end = bpe.special_id("<|endoftext|>");
  EXPECT_EQ(tokens[end], "<|endoftext|>");
  EXPECT_EQ(types[end], 3);
  EXPECT_EQ(types['a'], 1);
  EXPECT_EQ(tokens[bpe.vocab_size()], "[PAD" + std::to_string(bpe.vocab_size()) + "]");
  EXPECT_EQ(types[bpe.vocab_size() + 1], 5);
  const std::vector<std::string>& merges = f.kv.at("tokenizer.ggml.merges").strings;
  ASSERT_EQ(merges.size(), static_cast<size_t>(bpe.num_merges()));
  // The text is ASCII letters, spaces and a newline: only the space is spelled otherwise.
  const auto spelled = [&](int32_t id) {
    std::string out;
    for (const char ch : bpe.token(id))
      out += ch == ' ' ? std::string("\xc4\xa0") : std::string(1, ch);
    return out;
  };
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto [a, b] = bpe.merges()[i];
    EXPECT_EQ(merges[i], spelled(a) + " " + spelled(b)) << i;
  }
  EXPECT_EQ(f.kv.at("tokenizer.ggml.bos_token_id").u, static_cast<uint64_t>(end));
  EXPECT_EQ(f.kv.at("tokenizer.ggml.eos_token_id").u, static_cast<uint64_t>(end));
  EXPECT_EQ(f.kv.at("tokenizer.ggml.add_bos_token").type, kBool);
  EXPECT_EQ(f.kv.at("tokenizer.ggml.add_bos_token").u, 0u);
}

TEST(Gguf, BF16RoundsEachWeightToNearestEven) {
  TempDir dir;
  const nn::models::Llama llama(config(32, 32));
  const std::string path = dir.file("m.gguf");
  gguf::export_model(llama, data::BpeTokenizer(), path, {.type = gguf::Type::bf16});
  const File f = read_gguf(path);
  EXPECT_EQ(f.kv.at("general.file_type").u, 32u);
  ASSERT_EQ(f.tensors.at("blk.0.ffn_up.weight").type, kGgmlBF16);
  const Tensor w = llama.model->layers->at<nn::models::LlamaDecoderLayer>(0)
                       ->mlp->up_proj->weight.to(DType::bf16)
                       .contiguous();
  EXPECT_EQ(f.data("blk.0.ffn_up.weight", 32 * 32 * 2),
            std::string(static_cast<const char*>(w.data_ptr()), 32 * 32 * 2));
}

TEST(Gguf, RejectsOtherModelsTypesAndTokenizers) {
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  nn::models::GPT gpt;
  expect_error([&] { gguf::export_model(gpt, data::BpeTokenizer(), path); },
               {"gguf::export_model", "GPT", "not a Llama"});
  expect_error([] { gguf::parse_type("q4_0"); }, {"gguf::parse_type", "'q4_0'"});
  EXPECT_EQ(gguf::parse_type("q8_0"), gguf::Type::q8_0);
  nn::models::LlamaConfig c = config(32, 32);
  c.vocab_size = 100;
  const nn::models::Llama small(c);
  expect_error([&] { gguf::export_model(small, data::BpeTokenizer(), path); },
               {"gguf::export_model", "256 tokens", "vocabulary of 100"});
  const nn::models::Llama llama(config(32, 32));
  expect_error([&] { gguf::export_model(llama, data::BpeTokenizer(), path, {.alignment = 24}); },
               {"gguf::export_model", "alignment 24"});
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace sinter

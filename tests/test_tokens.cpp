// Token shards (Note [token shards]): written and read back, the bytes of llm.c's format, every
// corrupt or truncated shard a clear error naming the file; and TokenWindows over shards and
// vectors.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "sinter/data/tokens.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::expect_error;

// A shard's bytes as llm.c's writer lays them out: int32 header [magic, version, n, 0 x 253],
// then n uint16 tokens.
std::string llmc_shard(int32_t magic, int32_t version, int32_t n,
                       const std::vector<uint16_t>& tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = n;
  std::string bytes(reinterpret_cast<const char*>(header.data()), 1024);
  bytes.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2);
  return bytes;
}

std::string write(const testing::TempDir& dir, const std::string& name, const std::string& bytes) {
  std::ofstream(dir.file(name), std::ios::binary) << bytes;
  return dir.file(name);
}

TEST(TokenShard, WritesLlmcsBytesAndReadsThemBack) {
  testing::TempDir dir;
  const std::vector<int32_t> tokens{0, 1, 50256, 65535, 7};
  data::write_token_shard(dir.file("a.bin"), tokens);
  std::ifstream in(dir.file("a.bin"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(bytes, llmc_shard(20240520, 1, 5, {0, 1, 50256, 65535, 7}));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
  const data::TokenSpan span = data::read_token_shard(dir.file("a.bin"));
  ASSERT_EQ(span.size, 5);
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(span.data[i], tokens[i]);
  EXPECT_EQ(span.source, dir.file("a.bin"));
  // An empty shard is a header alone.
  data::write_token_shard(dir.file("empty.bin"), std::vector<int32_t>{});
  EXPECT_EQ(data::read_token_shard(dir.file("empty.bin")).size, 0);
  EXPECT_EQ(std::filesystem::file_size(dir.file("empty.bin")), 1024u);
}

TEST(TokenShard, CorruptShardsAreErrorsNamingTheFile) {
  testing::TempDir dir;
  expect_error([&] { data::read_token_shard(dir.file("none.bin")); },
               {"read_token_shard", "cannot open", "none.bin"});
  expect_error([&] { data::read_token_shard(write(dir, "short.bin", std::string(100, '\0'))); },
               {"read_token_shard", "short.bin", "100 bytes", "1024"});
  expect_error([&] { data::read_token_shard(write(dir, "magic.bin", llmc_shard(7, 1, 0, {}))); },
               {"read_token_shard", "magic.bin", "magic 7", "20240520"});
  expect_error(
      [&] {
        data::read_token_shard(write(dir, "v2.bin", llmc_shard(20240520, 2, 1, {5, 0})));
      },
      {"read_token_shard", "v2.bin", "version 2", "version 1"});
  expect_error(
      [&] {
        data::read_token_shard(write(dir, "cut.bin", llmc_shard(20240520, 1, 4, {1, 2})));
      },
      {"read_token_shard", "cut.bin", "counts 4 tokens", "1032 bytes", "1028", "truncated"});
  expect_error(
      [&] {
        data::read_token_shard(write(dir, "long.bin", llmc_shard(20240520, 1, 1, {1, 2})));
      },
      {"read_token_shard", "long.bin", "counts 1 tokens", "1026 bytes", "has 1028"});
  expect_error(
      [&] { data::read_token_shard(write(dir, "neg.bin", llmc_shard(20240520, 1, -3, {}))); },
      {"read_token_shard", "neg.bin", "-3"});
  expect_error(
      [&] {
        data::write_token_shard(dir.file("w.bin"), std::vector<int32_t>{1, 70000});
      },
      {"write_token_shard", "w.bin", "token 1", "70000", "65535"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("w.bin")));
  expect_error([&] { data::read_token_shards({dir.path().string()}); },
               {"read_token_shard", dir.path().string()});  // the first corrupt *.bin
  std::filesystem::create_directory(dir.file("nothing"));
  expect_error([&] { data::read_token_shards({dir.file("nothing")}); },
               {"read_token_shards", "no shard", "nothing"});
}

TEST(TokenShard, FoldersReadTheirShardsInOrderOfName) {
  testing::TempDir dir;
  data::write_token_shard(dir.file("train_000001.bin"), std::vector<int32_t>{3, 4});
  data::write_token_shard(dir.file("train_000000.bin"), std::vector<int32_t>{1, 2});
  write(dir, "notes.txt", "not a shard");
  const std::vector<data::TokenSpan> spans = data::read_token_shards({dir.path().string()});
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].data[0], 1);
  EXPECT_EQ(spans[1].data[1], 4);
  EXPECT_NE(spans[1].source.find("train_000001.bin"), std::string::npos);
}

TEST(TokenWindows, WindowsStayInsideOneSpanAndShiftByOne) {
  testing::TempDir dir;
  std::vector<int32_t> a(50), b(9);
  for (int32_t i = 0; i < 50; ++i) a[static_cast<size_t>(i)] = 1000 + i;
  for (int32_t i = 0; i < 9; ++i) b[static_cast<size_t>(i)] = 2000 + i;
  data::write_token_shard(dir.file("a.bin"), a);
  const std::vector<data::TokenSpan> spans{data::read_token_shard(dir.file("a.bin")),
                                           data::token_span(b, "b")};
  const data::TokenWindows windows(spans, {.context = 8, .seed = 3});
  EXPECT_EQ(windows.size(), 59 / 8);
  EXPECT_EQ(windows.num_tokens(), 59);
  EXPECT_EQ(data::max_token(spans[0]), 1049);
  EXPECT_EQ(data::max_token(spans[1]), 2008);
  EXPECT_EQ(data::max_token(data::token_span({}, "none")), -1);
  std::set<std::pair<size_t, int64_t>> seen;
  const data::TokenWindows many(spans, {.context = 8, .windows = 2000, .seed = 3});
  for (int64_t i = 0; i < many.size(); ++i) {
    const auto [s, p] = many.position(i);
    seen.insert({s, p});
    ASSERT_LE(p + 9, spans[s].size) << i;  // the whole window in its span
  }
  EXPECT_EQ(seen.size(), 42u + 1u);  // every window that fits: 42 in a, 1 in b
  const data::Example e = many.get(5);
  const auto [s, p] = many.position(5);
  for (int64_t j = 0; j < 8; ++j) {
    EXPECT_EQ(e.input.data<int64_t>()[j], spans[s].data[p + j]);
    EXPECT_EQ(e.target.data<int64_t>()[j], spans[s].data[p + j + 1]);
  }
  const data::Batch batch = many.get_batch({5, 6});
  EXPECT_EQ(batch.input.shape(), (Shape{2, 8}));
  EXPECT_EQ(batch.input.select(0, 0).to_vector<int64_t>(), e.input.to_vector<int64_t>());
  // The draw depends on the seed and the split.
  const data::TokenWindows other(spans, {.context = 8, .windows = 2000, .seed = 3, .split = 1});
  int64_t same = 0;
  for (int64_t i = 0; i < 100; ++i) same += many.position(i) == other.position(i);
  EXPECT_LT(same, 20);
  expect_error([&] { data::TokenWindows({data::token_span(b, "tiny")}, {.context = 9}); },
               {"TokenWindows", "9 tokens", "tiny", "context + 1 = 10"});
  expect_error([&] { data::token_span({-1}, "neg"); }, {"token_span", "neg", "-1"});
  expect_error([&] { many.get(2000); }, {"TokenWindows", "index 2000"});
}

}  // namespace
}  // namespace sinter

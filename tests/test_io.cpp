// safetensors save/load: round trips of every dtype, the exact byte layout the format specifies,
// rejection of corrupt files with errors that name the file, atomic replacement, and load_into's
// all-or-nothing copy.
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "sinter/io.h"
#include "test_util.h"

namespace sinter {
namespace {

namespace fs = std::filesystem;

using ::sinter::testing::exit_code_in_child;
using ::sinter::testing::expect_error;


// A fresh folder under the system temp dir, removed with everything in it at the end of the test.
using ::sinter::testing::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file from a header text (not padded) and a data region.
std::string raw_file(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

std::vector<uint8_t> raw(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p, p + c.numel() * static_cast<int64_t>(element_size(c.dtype())));
}

void expect_same(const StateDict& got, const StateDict& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    SCOPED_TRACE(name);
    ASSERT_EQ(got.count(name), 1u);
    const Tensor& g = got.at(name);
    EXPECT_EQ(g.shape(), w.shape());
    EXPECT_EQ(g.dtype(), w.dtype());
    EXPECT_TRUE(g.device().is_cpu());
    EXPECT_EQ(raw(g), raw(w.cpu()));
  }
}

StateDict every_dtype(uint64_t seed) {
  Generator gen(seed);
  Tensor f = randn({3, 4}, {}, &gen);
  StateDict d;
  d["f32"] = f;
  d["f64"] = randn({5}, {.dtype = DType::f64}, &gen);
  d["bf16"] = f.to(DType::bf16);
  d["f16"] = f.to(DType::f16);
  d["i64"] = randint(-1000000, 1000000, {2, 3}, {.dtype = DType::i64}, &gen);
  d["i32"] = randint(-1000, 1000, {7}, {.dtype = DType::i32}, &gen);
  d["u8"] = randint(0, 256, {2, 2, 2}, {.dtype = DType::u8}, &gen);
  d["bool"] = gt(randn({6}, {}, &gen), 0.0);
  d["scalar"] = full({}, 3.25, {.dtype = DType::f64});
  d["scalar_i64"] = full({}, -7, {.dtype = DType::i64});
  d["empty"] = zeros({0, 3});
  d["empty_u8"] = zeros({4, 0}, {.dtype = DType::u8});
  d["transposed"] = f.t();             // non-contiguous
  d["strided"] = f.slice(1, 0, 4, 2);  // non-contiguous, offset view
  d["narrowed"] = f.narrow(0, 1, 2).select(1, 3);
  return d;
}

TEST(SafetensorsIo, RoundTripsEveryDtypeShapeAndLayout) {
  SINTER_REQUIRE_JSON();
  TempDir dir;
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const StateDict d = every_dtype(seed);
  ASSERT_FALSE(d.at("transposed").is_contiguous());
  const std::string path = dir.file("model.safetensors");
  save(d, path);
  expect_same(load(path), d);
  // No temp file is left behind.
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename(), "model.safetensors");
  }
  EXPECT_EQ(load_metadata(path), (Metadata{{"format", "pt"}}));
}

TEST(SafetensorsIo, EmptyDictRoundTrips) {
  SINTER_REQUIRE_JSON();
  TempDir dir;
  const std::string path = dir.file("empty.safetensors");
  save({}, path);
  const std::string header = R"({"__metadata__":{"format":"pt"}})";  // 32 bytes: no padding
  EXPECT_EQ(read_bytes(path), le64(header.size()) + header);
  EXPECT_TRUE(load(path).empty());
}

// The layout written out by hand from the format's description: the header's JSON with keys in
// sorted order, padded with spaces to a multiple of 8, then the tensors in name order.
TEST(SafetensorsIo, HeaderBytesMatchTheSpecification) {
  SINTER_REQUIRE_JSON();
  TempDir dir;
  const std::string path = dir.file("tiny.safetensors");
  StateDict d;
  d["b"] = from_vector<int64_t>({7, -2}, {2, 1});
  d["a"] = from_vector<float>({1.0f, -2.5f});
  d["c"] = full({}, 1.0, {.dtype = DType::bf16});
  save(d, path, {{"format", "pt"}, {"step", "12"}});

  std::string json = R"({"__metadata__":{"format":"pt","step":"12"},)"
                     R"("a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},)"
                     R"("b":{"data_offsets":[8,24],"dtype":"I64","shape":[2,1]},)"
                     R"("c":{"data_offsets":[24,26],"dtype":"BF16","shape":[]}})";
  while (json.size() % 8 != 0) json += ' ';
  std::string data;
  const float a[2] = {1.0f, -2.5f};
  const int64_t b[2] = {7, -2};
  data.append(reinterpret_cast<const char*>(a), sizeof a);
  data.append(reinterpret_cast<const char*>(b), sizeof b);
  data += std::string("\x80\x3f", 2);  // bf16 1.0 = 0x3f80, little-endian
  const std::string expected = le64(json.size()) + json + data;
  EXPECT_EQ(read_bytes(path), expected);
  EXPECT_EQ(load_metadata(path), (Metadata{{"format", "pt"}, {"step", "12"}}));
}

TEST(SafetensorsIo, MetadataRoundTrips) {
  SINTER_REQUIRE_JSON();
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  const Metadata md = {{"epoch", "3"}, {"note", "quotes \" and \\ and\nnewlines, ünïcode"}};
  save({{"w", ones({2})}}, path, md);
  Metadata with_format = md;
  with_format["format"] = "pt";  // Note [safetensors format] in src/io/safetensors.cpp
  EXPECT_EQ(load_metadata(path), with_format);
  EXPECT_EQ(load(path).size(), 1u);
}

// Hugging Face's loaders refuse any "format" but a framework's: save says "pt" by default, keeps
// one they accept, and refuses to write one they would refuse (and leaves no file).
TEST(SafetensorsIo, FormatIsOneOtherReadersAccept) {
  SINTER_REQUIRE_JSON();
  TempDir dir;
  const std::string path = dir.file("f.safetensors");
  save({{"w", ones({2})}}, path, {{"format", "flax"}});
  EXPECT_EQ(load_metadata(path).at("format"), "flax");
  const std::string bad = dir.file("bad.safetensors");
  expect_error([&] { save({{"w", ones({2})}}, bad, {{"format", "state-dict"}}); },
               {"save", "metadata format 'state-dict' is not one of pt, tf, flax, mlx"});
  EXPECT_FALSE(std::filesystem::exists(bad));
}

TEST(SafetensorsIo, ReadsFilesFromOtherWriters) {
  SINTER_REQUIRE_JSON();
  // Unsorted offsets, an unpadded header with spaces inside, a metadata-free layout.
  TempDir dir;
  const std::string path = dir.file("other.safetensors");
  const std::string header =
      R"({ "y": {"dtype": "U8", "shape": [3], "data_offsets": [4, 7]},
           "x": {"dtype": "I32", "shape": [], "data_offsets": [0, 4]} })";
  std::string data;
  const int32_t x = -123456;
  data.append(reinterpret_cast<const char*>(&x), 4);
  data += "\x01\x02\xff";
  write_bytes(path, raw_file(header, data));
  StateDict d = load(path);
  EXPECT_EQ(d.at("x").item<int32_t>(), -123456);
  EXPECT_EQ(d.at("x").dim(), 0);
  EXPECT_EQ(d.at("y").to_vector<uint8_t>(), (std::vector<uint8_t>{1, 2, 255}));
}

TEST(SafetensorsIo, RejectsCorruptFiles) {
  SINTER_REQUIRE_JSON();
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  const std::string eight(8, '\0');
  auto expect_bad = [&](const std::string& bytes, std::initializer_list<std::string> fragments) {
    write_bytes(path, bytes);
    expect_error([&] { load(path); }, fragments);
  };
  auto t = [](const std::string& dtype, const std::string& shape, const std::string& offsets) {
    return R"({"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" + offsets +
           "}";
  };
  expect_bad("", {path, "too short for the 8-byte header length"});
  expect_bad("abc", {path, "too short"});
  expect_bad(le64(uint64_t{1} << 60) + "{}", {path, "header length", "runs past the end"});
  expect_bad(le64(100) + "{}", {path, "runs past the end"});
  expect_bad(raw_file("not json at all!", ""), {path, "not valid JSON"});
  expect_bad(raw_file(R"({"a": )", ""), {path, "not valid JSON"});
  expect_bad(raw_file("[1, 2]", ""), {path, "must be a JSON object"});
  expect_bad(raw_file(R"({"a":)" + t("F32", "[2]", "[0,8]") + "}", eight + "xx"),
             {path, "trailing bytes"});
  expect_bad(raw_file(R"({"a":)" + t("F32", "[2]", "[0,8]") + "}", "1234"),
             {path, "'a'", "out of range"});
  expect_bad(raw_file(R"({"a":)" + t("F32", "[2]", "[0,4]") + "}", "1234"),
             {path, "'a'", "span 4 bytes", "takes 8"});
  expect_bad(raw_file(R"({"a":)" + t("F32", "[2]", "[8,0]") + "}", eight),
             {path, "'a'", "out of range"});
  expect_bad(raw_file(R"({"a":)" + t("Q7", "[2]", "[0,8]") + "}", eight),
             {path, "unknown dtype", "Q7"});
  expect_bad(raw_file(R"({"a":)" + t("F32", "[-2]", "[0,8]") + "}", eight),
             {path, "non-negative integer"});
  expect_bad(raw_file(R"({"a":)" + t("F32", "[4611686018427387904,4]", "[0,8]") + "}", eight),
             {path, "too many elements"});
  expect_bad(raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", eight),
             {path, "lacks one of dtype, shape, data_offsets"});
  expect_bad(
      raw_file(R"({"a":)" + t("F32", "[2]", "[0,8]") + R"(,"b":)" + t("F32", "[2]", "[4,12]") + "}",
               eight + "1234"),
      {path, "'b'", "overlaps"});
  expect_bad(raw_file(R"({"a":)" + t("U8", "[2]", "[2,4]") + "}", "1234"), {path, "gap", "'a'"});
  expect_bad(raw_file(R"({"__metadata__":{"k":3}})", ""), {path, "__metadata__", "string"});
  expect_bad(raw_file(R"({"a":)" + t("BOOL", "[2]", "[0,2]") + "}", std::string("\x01\x02", 2)),
             {path, "BOOL", "'a'", "byte 2"});
  // A valid file cut short anywhere after the header is caught by the size checks.
  save({{"w", ones({16})}}, path);
  const std::string good = read_bytes(path);
  write_bytes(path, good.substr(0, good.size() - 5));
  expect_error([&] { load(path); }, {path, "'w'", "out of range"});
  write_bytes(path, good.substr(0, 20));
  expect_error([&] { load(path); }, {path, "runs past the end"});
  expect_error([&] { load(dir.file("missing.safetensors")); },
               {"missing.safetensors", "does not exist"});
  expect_error([&] { load_metadata(dir.file("missing.safetensors")); },
               {"load_metadata", "does not exist"});
}

TEST(SafetensorsIo, RejectsBadDicts) {
  SINTER_REQUIRE_JSON();
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  expect_error([&] { save({{"a", Tensor()}}, path); }, {path, "'a'", "undefined"});
  expect_error([&] { save({{"__metadata__", ones({1})}}, path); }, {"__metadata__", "reserved"});
  expect_error([&] { save({{"", ones({1})}}, path); }, {"empty name"});
  EXPECT_FALSE(fs::exists(path));
}

TEST(SafetensorsIo, FailedSaveLeavesTheOldFileIntact) {
  SINTER_REQUIRE_JSON();
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  save({{"w", full({4}, 1.0)}}, path);
  const std::string before = read_bytes(path);
  // Fails before writing (an undefined tensor after a good one).
  expect_error([&] { save({{"a", full({4}, 2.0)}, {"b", Tensor()}}, path); }, {"undefined"});
  EXPECT_EQ(read_bytes(path), before);
  // Fails at the rename: the destination is a non-empty directory. The temp file is removed.
  const std::string as_dir = dir.file("taken");
  fs::create_directories(fs::path(as_dir) / "inside");
  expect_error([&] { save({{"w", full({4}, 2.0)}}, as_dir); }, {"cannot rename", as_dir});
  // Fails at the create: the folder does not exist.
  const std::string nowhere = dir.file("no/such/dir/ckpt.safetensors");
  expect_error([&] { save({{"w", full({4}, 2.0)}}, nowhere); }, {"cannot create", nowhere});
  EXPECT_EQ(read_bytes(path), before);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"ckpt.safetensors", "taken"}));
  // A successful save replaces the file.
  save({{"w", full({4}, 3.0)}}, path);
  EXPECT_EQ(load(path).at("w").to_vector<float>(), std::vector<float>(4, 3.0f));
}

TEST(SafetensorsIo, LoadIntoCopiesOnlyAfterEveryCheckPasses) {
  SINTER_REQUIRE_JSON();
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  save({{"a", full({2}, 5.0)}, {"b", full({3}, 6.0)}}, path);

  Tensor a = zeros({2}).requires_grad_();  // a parameter: the copy must not need NoGradGuard
  Tensor b = zeros({3});
  StateDict target{{"a", a}, {"b", b}};
  LoadResult r = load_into(target, path);
  EXPECT_TRUE(r.missing_keys.empty() && r.unexpected_keys.empty());
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>(2, 5.0f));
  EXPECT_EQ(b.to_vector<float>(), std::vector<float>(3, 6.0f));

  // "a" matches and comes first, "b" does not: nothing is copied.
  a.detach().zero_();
  Tensor b4 = zeros({4});
  StateDict wrong_shape{{"a", a}, {"b", b4}};
  expect_error([&] { load_into(wrong_shape, path); }, {path, "'b'", "[3]", "[4]"});
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>(2, 0.0f));
  StateDict wrong_dtype{{"a", a}, {"b", zeros({3}, {.dtype = DType::f64})}};
  expect_error([&] { load_into(wrong_dtype, path); }, {path, "'b'", "dtype"});
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>(2, 0.0f));

  // Strict: names must match; not strict: the common names are copied and the rest reported.
  Tensor c = zeros({1});
  StateDict other{{"a", a}, {"c", c}};
  expect_error([&] { load_into(other, path); },
               {path, "missing from the file [c]", "unexpected in the file [b]"});
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>(2, 0.0f));
  r = load_into(other, path, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, std::vector<std::string>{"c"});
  EXPECT_EQ(r.unexpected_keys, std::vector<std::string>{"b"});
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>(2, 5.0f));
  EXPECT_EQ(c.to_vector<float>(), std::vector<float>(1, 0.0f));

  // A corrupt file changes nothing either.
  a.detach().zero_();
  const std::string good = read_bytes(path);
  write_bytes(path, good.substr(0, good.size() - 1));
  expect_error([&] { load_into(target, path); }, {path});
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>(2, 0.0f));
}

TEST(CudaSafetensorsIo, SavesDeviceTensorsAndLoadsOntoTheDevice) {
  SINTER_REQUIRE_CUDA();
  SINTER_REQUIRE_JSON();
  TempDir dir;
  const std::string path = dir.file("gpu.safetensors");
  const StateDict host = every_dtype(testing::fresh_seed());
  StateDict dev;
  for (const auto& [name, t] : host) dev[name] = t.to(Device::cuda());
  save(dev, path);
  expect_same(load(path), host);
  StateDict back = load(path, Device::cuda());
  for (const auto& [name, t] : back) {
    EXPECT_TRUE(t.is_cuda()) << name;
    EXPECT_EQ(raw(t.cpu()), raw(host.at(name))) << name;
  }
  StateDict target;
  for (const auto& [name, t] : host) target[name] = zeros_like(t.contiguous()).to(Device::cuda());
  load_into(target, path);
  for (const auto& [name, t] : target) EXPECT_EQ(raw(t.cpu()), raw(host.at(name))) << name;
}

}  // namespace
}  // namespace sinter

namespace sinter {
namespace {

// Crash safety: a writer saving checkpoints in a loop is killed with SIGKILL at 50 random moments;
// after each kill the file at the path loads, whole, and holds one of the written steps (the write
// goes to a temporary file that is renamed over the path only once complete and flushed).
TEST(SafetensorsIo, SigkillDuringSavesNeverLeavesABrokenFile) {
  const testing::TempDir dir;
  const std::string path = (dir.path() / "ckpt.safetensors").string();
  std::mt19937 rng(testing::fresh_seed());
  std::uniform_int_distribution<int> pause_us(200, 20000);
  int64_t last_seen = -1;
  for (int round = 0; round < 50; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0) << "fork failed";
    if (child == 0) {
      // The writer: step k is a 256 KiB tensor filled with k, and k again in a scalar.
      try {
        for (int64_t k = last_seen + 1;; ++k) {
          StateDict d;
          d["weights"] = full({65536}, static_cast<double>(k), {.dtype = DType::f32});
          d["step"] = full({}, static_cast<double>(k), {.dtype = DType::i64});
          save(d, path);
        }
      } catch (...) {
        ::_exit(3);  // never back into the test framework from the child
      }
    }
    ::usleep(static_cast<useconds_t>(pause_us(rng)));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer ended on its own";
    if (!std::filesystem::exists(path)) continue;  // killed before its first rename
    StateDict d;
    ASSERT_NO_THROW(d = load(path)) << "round " << round;
    const int64_t step = d.at("step").item<int64_t>();
    const std::vector<float> w = d.at("weights").to_vector<float>();
    ASSERT_EQ(w.size(), 65536u);
    EXPECT_TRUE(std::all_of(w.begin(), w.end(), [&](float v) { return v == step; }))
        << "round " << round << ": a checkpoint mixing steps";
    EXPECT_GE(step, last_seen) << "an older checkpoint replaced a newer one";
    last_seen = step;
  }
}

// A write that fails partway (a full disk; here the file-size limit, which fails write() the same
// way) is a clear error naming the file, leaves the previous checkpoint as it was and removes the
// temporary file. Run in a child process, whose file-size limit the test lowers.
TEST(SafetensorsIo, AFailedWriteKeepsThePreviousCheckpoint) {
  const testing::TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  save({{"w", full({4}, 1.0)}}, path);
  const int status = exit_code_in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing
    const rlimit limit{64 * 1024, 64 * 1024};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 4;
    try {
      save({{"w", full({1 << 20}, 2.0)}}, path);  // 4 MiB: over the limit
      return 1;                                   // no error: wrong
    } catch (const Error& e) {
      const std::string m = e.what();
      return m.find("cannot write") != std::string::npos && m.find(path) != std::string::npos ? 0
                                                                                              : 2;
    }
  });
  EXPECT_EQ(status, 0) << "1: no error; 2: the message lacks the cause or the path; 4: "
                          "setrlimit failed; 99: another error";
  EXPECT_EQ(load(path).at("w").to_vector<float>(), std::vector<float>(4, 1.0f));
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    names.push_back(e.path().filename().string());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"ckpt.safetensors"})) << "a temporary file was left";
}

// A full disk: the child process mounts a 64 KiB tmpfs over the folder in a mount namespace of its
// own (as root, or in a user namespace), saves a small checkpoint that fits, then a 4 MiB one,
// whose write() fails with ENOSPC. Skipped where the machine allows neither namespace.
TEST(SafetensorsIo, AFullDiskKeepsThePreviousCheckpoint) {
  const testing::TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  const int status = exit_code_in_child([&] {
    if (::unshare(CLONE_NEWNS) != 0 && ::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return 77;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", dir.path().c_str(), "tmpfs", 0, "size=64k") != 0) {
      return 77;
    }
    save({{"w", full({4}, 1.0)}}, path);
    try {
      save({{"w", full({1 << 20}, 2.0)}}, path);
      return 1;  // no error: wrong
    } catch (const Error& e) {
      const std::string m = e.what();
      if (m.find("cannot write") == std::string::npos || m.find(path) == std::string::npos ||
          m.find(std::strerror(ENOSPC)) == std::string::npos) {
        return 2;
      }
    }
    if (load(path).at("w").to_vector<float>() != std::vector<float>(4, 1.0f)) return 3;
    return std::distance(std::filesystem::directory_iterator(dir.path()),
                         std::filesystem::directory_iterator()) == 1
               ? 0
               : 4;
  });
  if (status == 77) GTEST_SKIP() << "cannot mount a small tmpfs here (no mount or user namespace)";
  EXPECT_EQ(status, 0)
      << "1: no error; 2: the message lacks the cause or the path; 3: the previous checkpoint "
         "changed; 4: a temporary file was left; 99: another error";
}

// A checkpoint of several parts: each comes back under its prefix, and the generator's state
// draws the same numbers after a round trip through a file.
TEST(Checkpoint, PrefixedPartsAndTheGeneratorRoundTrip) {
  SINTER_REQUIRE_JSON();
  TempDir dir;
  StateDict dict;
  add_prefixed(dict, "model", {{"weight", ones({2})}, {"bias", zeros({1})}});
  add_prefixed(dict, "modelx", {{"w", ones({1})}});
  Generator gen(uint64_t{1} << 63 | 5);  // above 2^63: stored as an i64 bit pattern
  (void)rand({3}, {}, &gen);
  add_prefixed(dict, "meta", generator_state_dict(gen));
  testing::expect_error(
      [&] {
        add_prefixed(dict, "model", {{"bias", ones({1})}});
      },
      {"add_prefixed", "model.bias", "already"});
  const std::string path = dir.file("ckpt.safetensors");
  save(dict, path);
  const StateDict back = load(path);
  const StateDict model = sub_dict(back, "model");
  EXPECT_EQ(model.size(), 2u);  // not modelx's entry
  EXPECT_TRUE(testing::all_close(model.at("weight"), ones({2}), 0, 0));
  EXPECT_EQ(sub_dict(back, "modelx").size(), 1u);
  Generator other(1);
  load_generator_state(sub_dict(back, "meta"), other);
  EXPECT_EQ(other.state().seed, gen.state().seed);
  EXPECT_EQ(other.state().offset, gen.state().offset);
  EXPECT_TRUE(testing::all_close(rand({4}, {}, &other), rand({4}, {}, &gen), 0, 0));
  testing::expect_error([&] { load_generator_state(sub_dict(back, "model"), other); },
                        {"load_generator_state", "rng_seed"});
  testing::expect_error(
      [&] {
        load_generator_state({{"rng_seed", ones({1})}, {"rng_offset", ones({1})}}, other);
      },
      {"load_generator_state", "rng_seed", "i64", "f32"});
}

TEST(Checkpoint, TextFilesAreWrittenWhole) {
  TempDir dir;
  const std::string path = dir.file("metrics.csv");
  write_file_atomically(path, "a,b\n1,2\n");
  write_file_atomically(path, "a,b\n3,4\n");
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "a,b\n3,4\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);  // no temporary file left
  testing::expect_error([&] { write_file_atomically(dir.file("no/such/dir/x"), "x"); },
                        {"write_file_atomically", "no/such/dir"});
}

}  // namespace
}  // namespace sinter

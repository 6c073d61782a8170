// SummaryWriter: the TFRecord framing and its CRC32C, TensorBoard's histogram buckets, the events a
// writer appends (read back here with a small protobuf reader), the background thread under load,
// a killed writer, a failed write, bad input, and the names of run folders.
// tests/scripts/check_tensorboard.py reads the same kinds of files with the tensorboard package.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cfloat>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "sinter/summary.h"
#include "summary/record.h"
#include "test_util.h"

#ifdef SINTER_TEST_WITH_PNG
#include <png.h>
#endif

namespace sinter {
namespace {

using ::sinter::testing::exit_code_in_child;
using ::sinter::testing::expect_error;
using ::sinter::testing::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The payloads of the whole records of an event file, each checked against its CRCs; `tail` gets
// the bytes after the last whole record.
std::vector<std::string> read_records(const std::string& path, size_t* tail = nullptr) {
  const std::string b = read_bytes(path);
  std::vector<std::string> out;
  size_t off = 0;
  while (off + 12 <= b.size()) {
    uint64_t n = 0;
    uint32_t length_crc = 0, payload_crc = 0;
    std::memcpy(&n, b.data() + off, 8);
    std::memcpy(&length_crc, b.data() + off + 8, 4);
    EXPECT_EQ(length_crc, summary::masked_crc32c(std::string_view(b.data() + off, 8)));
    if (off + 16 + n > b.size()) break;
    const std::string payload = b.substr(off + 12, n);
    std::memcpy(&payload_crc, b.data() + off + 12 + n, 4);
    EXPECT_EQ(payload_crc, summary::masked_crc32c(payload)) << "record " << out.size();
    out.push_back(payload);
    off += 16 + n;
  }
  if (tail != nullptr) *tail = b.size() - off;
  return out;
}

// A protobuf message's fields by number: varints and fixed-width values as their bits, the
// length-delimited ones as bytes.
struct Fields {
  std::multimap<int, uint64_t> numbers;
  std::multimap<int, std::string> bytes;

  explicit Fields(const std::string& m) {
    size_t i = 0;
    auto varint = [&] {
      uint64_t v = 0;
      for (int shift = 0;; shift += 7) {
        const auto c = static_cast<uint8_t>(m.at(i++));
        v |= static_cast<uint64_t>(c & 0x7F) << shift;
        if ((c & 0x80) == 0) return v;
      }
    };
    while (i < m.size()) {
      const uint64_t key = varint();
      const int field = static_cast<int>(key >> 3);
      switch (key & 7) {
        case 0:
          numbers.emplace(field, varint());
          break;
        case 1: {
          uint64_t v = 0;
          std::memcpy(&v, m.data() + i, 8);
          numbers.emplace(field, v);
          i += 8;
          break;
        }
        case 5: {
          uint32_t v = 0;
          std::memcpy(&v, m.data() + i, 4);
          numbers.emplace(field, v);
          i += 4;
          break;
        }
        case 2: {
          const uint64_t n = varint();
          bytes.emplace(field, m.substr(i, n));
          i += n;
          break;
        }
        default:
          ADD_FAILURE() << "wire type " << (key & 7);
          return;
      }
    }
  }
  uint64_t number(int f) const { return numbers.count(f) ? numbers.find(f)->second : 0; }
  std::string str(int f) const { return bytes.count(f) ? bytes.find(f)->second : std::string(); }
  double f64(int f) const {
    const uint64_t b = number(f);
    double d;
    std::memcpy(&d, &b, 8);
    return d;
  }
  float f32(int f) const {
    const auto b = static_cast<uint32_t>(number(f));
    float v;
    std::memcpy(&v, &b, 4);
    return v;
  }
};

// The event files directly in `folder` (not its subfolders).
std::vector<std::string> event_files(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(folder)) {
    if (e.is_regular_file() && e.path().filename().string().find("tfevents") != std::string::npos) {
      out.push_back(e.path().string());
    }
  }
  return out;
}

// The Summary.Value of a summary event.
Fields summary_value(const std::string& event) {
  return Fields(Fields(Fields(event).str(5)).str(1));
}

TEST(Summary, Crc32cMatchesTheCastagnoliCheckValues) {
  EXPECT_EQ(summary::crc32c(""), 0u);
  EXPECT_EQ(summary::crc32c("123456789"), 0xE3069283u);  // the CRC catalogue's check value
  EXPECT_EQ(summary::crc32c(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720, B.4
  EXPECT_EQ(summary::crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  const uint32_t c = summary::crc32c("a");
  EXPECT_EQ(summary::masked_crc32c("a"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
  const std::string r = summary::frame_record("hello");
  ASSERT_EQ(r.size(), 5u + 16u);
  EXPECT_EQ(static_cast<uint8_t>(r[0]), 5);
  EXPECT_EQ(r.substr(12, 5), "hello");
}

TEST(Summary, HistogramBucketsAreTensorBoardsDefault) {
  const std::vector<double>& limits = summary::default_bucket_limits();
  ASSERT_EQ(limits.size() % 2, 1u);
  const size_t mid = limits.size() / 2;
  EXPECT_EQ(limits[mid], 0.0);
  EXPECT_DOUBLE_EQ(limits[mid + 1], 1e-12);
  EXPECT_DOUBLE_EQ(limits[mid + 2], 1.1e-12);
  EXPECT_EQ(limits.back(), DBL_MAX);
  EXPECT_GE(limits[limits.size() - 2], 1e20 / 1.1);
  EXPECT_LT(limits[limits.size() - 2], 1e20);
  for (size_t i = 0; i < limits.size(); ++i) EXPECT_EQ(limits[i], -limits[limits.size() - 1 - i]);
  EXPECT_TRUE(std::is_sorted(limits.begin(), limits.end()));

  // 1.0 lies in [1.1^k * 1e-12, 1.1^(k+1) * 1e-12): its bucket's right edge is the first limit > 1.
  const summary::Histogram one = summary::make_histogram({1.0, 1.0});
  ASSERT_EQ(one.limits.size(), 1u);
  EXPECT_EQ(one.limits[0], *std::upper_bound(limits.begin(), limits.end(), 1.0));
  EXPECT_EQ(one.counts[0], 2.0);
  EXPECT_EQ(one.num, 2.0);

  // Values on both sides of 0, with an empty run between them merged into one bucket.
  const std::vector<double> v = {-3.0, -2.9, 0.0, 5.0, 5.0, 5.01};
  const summary::Histogram h = summary::make_histogram(v);
  EXPECT_EQ(h.min, -3.0);
  EXPECT_EQ(h.max, 5.01);
  EXPECT_EQ(h.num, 6.0);
  EXPECT_DOUBLE_EQ(h.sum, 9.11);
  EXPECT_DOUBLE_EQ(h.sum_squares, 9.0 + 2.9 * 2.9 + 25 + 25 + 5.01 * 5.01);
  double total = 0;
  for (const double c : h.counts) total += c;
  EXPECT_EQ(total, 6.0);
  EXPECT_TRUE(std::is_sorted(h.limits.begin(), h.limits.end()));
  EXPECT_GT(h.limits.front(), -3.0);  // the first bucket holds the minimum
  EXPECT_GT(h.limits.back(), 5.01);
  EXPECT_NE(h.counts.front(), 0.0);
  EXPECT_NE(h.counts.back(), 0.0);
  // Every value lies between its bucket's left edge (the previous limit, or min) and its limit.
  for (const double x : v) {
    size_t b = 0;
    while (h.limits[b] <= x) ++b;
    const double left = b == 0 ? h.min : h.limits[b - 1];
    EXPECT_LE(left, x);
    EXPECT_GT(h.counts[b], 0.0) << x;
  }
  // The empty buckets between -2.9 and 0 became one: far fewer than the ~280 limits between.
  EXPECT_LT(h.limits.size(), 12u);
  expect_error([] { (void)summary::make_histogram({}); }, {"make_histogram", "no values"});
}

TEST(Summary, EventsHoldWhatWasLogged) {
  const TempDir dir;
  const std::string log = dir.file("run");
  {
    SummaryWriter w(log);
    EXPECT_EQ(w.log_dir(), log);
    EXPECT_NE(w.file_path().find("events.out.tfevents."), std::string::npos);
    w.add_scalar("loss", 0.25, 7);
    w.add_scalar("loss/nan", std::nan(""), 8);
    w.add_scalar("loss/inf", -INFINITY, 9);
    w.add_histogram("weights", arange(10.0).reshape({2, 5}), 3);
    w.add_text("sample", "# hello", 4);
    w.add_image("image", full({3, 2, 5}, 0.5), 5);
    w.add_scalars("lr", {{"a", 1.0}, {"b", 2.0}}, 6);
    w.flush();
    // Flushed: the file holds every record now, while the writer is open.
    EXPECT_EQ(read_records(w.file_path()).size(), 1u + 6u);
  }
  const std::vector<std::string> files = event_files(log);
  ASSERT_EQ(files.size(), 1u);
  size_t tail = 1;
  const std::vector<std::string> r = read_records(files[0], &tail);
  EXPECT_EQ(tail, 0u);
  ASSERT_EQ(r.size(), 7u);
  EXPECT_EQ(Fields(r[0]).str(3), "brain.Event:2");
  EXPECT_GT(Fields(r[0]).f64(1), 1.6e9);  // a wall time in seconds

  EXPECT_EQ(Fields(r[1]).number(2), 7u);
  EXPECT_EQ(summary_value(r[1]).str(1), "loss");
  EXPECT_EQ(summary_value(r[1]).f32(2), 0.25F);
  EXPECT_TRUE(std::isnan(summary_value(r[2]).f32(2)));
  EXPECT_EQ(summary_value(r[3]).f32(2), -INFINITY);

  const Fields histo(summary_value(r[4]).str(5));
  EXPECT_EQ(histo.f64(1), 0.0);
  EXPECT_EQ(histo.f64(2), 9.0);
  EXPECT_EQ(histo.f64(3), 10.0);
  EXPECT_EQ(histo.f64(4), 45.0);
  EXPECT_EQ(histo.f64(5), 285.0);
  const std::string counts = histo.str(7);  // packed doubles
  double total = 0;
  for (size_t i = 0; i + 8 <= counts.size(); i += 8) {
    double c;
    std::memcpy(&c, counts.data() + i, 8);
    total += c;
  }
  EXPECT_EQ(total, 10.0);
  EXPECT_EQ(histo.str(6).size(), counts.size());

  const Fields text = summary_value(r[5]);
  EXPECT_EQ(text.str(1), "sample/text_summary");
  EXPECT_EQ(Fields(Fields(text.str(9)).str(1)).str(1), "text");
  EXPECT_EQ(Fields(text.str(8)).number(1), 7u);  // DT_STRING
  EXPECT_EQ(Fields(text.str(8)).str(8), "# hello");

  const Fields image(summary_value(r[6]).str(4));
  EXPECT_EQ(image.number(1), 2u);
  EXPECT_EQ(image.number(2), 5u);
  EXPECT_EQ(image.number(3), 3u);
  const std::string png = image.str(4);
  if (summary::png_supported()) {
    ASSERT_GT(png.size(), 24u);
    EXPECT_EQ(png.substr(1, 3), "PNG");
    EXPECT_EQ(static_cast<uint8_t>(png[19]), 5);  // IHDR width, big-endian
    EXPECT_EQ(static_cast<uint8_t>(png[23]), 2);  // IHDR height
  }

  // add_scalars: one run folder per key, each with the main tag.
  for (const char* key : {"a", "b"}) {
    const std::vector<std::string> sub = event_files(log + "/lr_" + key);
    ASSERT_EQ(sub.size(), 1u) << key;
    const std::vector<std::string> rs = read_records(sub[0]);
    ASSERT_EQ(rs.size(), 2u);
    EXPECT_EQ(summary_value(rs[1]).str(1), "lr");
    EXPECT_EQ(summary_value(rs[1]).f32(2), key[0] == 'a' ? 1.0F : 2.0F);
    EXPECT_EQ(Fields(rs[1]).number(2), 6u);
  }
}

TEST(Summary, HparamsWriteTheSessionOfARun) {
  const TempDir dir;
  {
    SummaryWriter w(dir.str());
    w.add_hparams({{"lr", 0.01}, {"optimizer", std::string("adamw")}, {"amp", true}},
                  {{"accuracy", 0.9}}, "trial");
  }
  const std::vector<std::string> files = event_files(dir.str() + "/trial");
  ASSERT_EQ(files.size(), 1u);
  const std::vector<std::string> r = read_records(files[0]);
  ASSERT_EQ(r.size(), 5u);
  const char* tags[] = {"_hparams_/experiment", "_hparams_/session_start_info",
                        "_hparams_/session_end_info", "accuracy"};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(summary_value(r[i + 1]).str(1), tags[i]);
  // The session start's hparams map: google.protobuf.Value number 2, string 3, bool 4.
  const Fields plugin(Fields(summary_value(r[2]).str(9)).str(1));
  EXPECT_EQ(plugin.str(1), "hparams");
  const Fields start(Fields(plugin.str(2)).str(3));
  std::map<std::string, Fields> values;
  for (const auto& [field, entry] : start.bytes) {
    const Fields e(entry);
    values.emplace(e.str(1), Fields(e.str(2)));
  }
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(values.at("lr").f64(2), 0.01);
  EXPECT_EQ(values.at("optimizer").str(3), "adamw");
  EXPECT_EQ(values.at("amp").number(4), 1u);
  EXPECT_FLOAT_EQ(summary_value(r[4]).f32(2), 0.9F);
  const Fields end(Fields(Fields(Fields(summary_value(r[3]).str(9)).str(1)).str(2)).str(4));
  EXPECT_EQ(end.number(1), 1u);  // STATUS_SUCCESS
}

// Two threads log through a queue of two: every summary arrives, each thread's in its order.
TEST(Summary, TheBackgroundWriterKeepsEverySummaryUnderLoad) {
  const TempDir dir;
  constexpr int kPerThread = 2000;
  std::string path;
  {
    SummaryWriter w(dir.str(), {.max_queue = 2});
    path = w.file_path();
    auto log = [&](const std::string& tag) {
      for (int i = 0; i < kPerThread; ++i) w.add_scalar(tag, i, i);
    };
    std::thread a(log, "a"), b(log, "b");
    a.join();
    b.join();
  }
  const std::vector<std::string> r = read_records(path);
  ASSERT_EQ(r.size(), 1u + 2u * kPerThread);
  std::map<std::string, int64_t> next;
  for (size_t i = 1; i < r.size(); ++i) {
    const Fields v = summary_value(r[i]);
    const auto step = static_cast<int64_t>(Fields(r[i]).number(2));
    EXPECT_EQ(step, next[v.str(1)]++);
    EXPECT_EQ(v.f32(2), static_cast<float>(step));
  }
}

// A writer killed at random moments: the file holds whole records up to the kill, and at most the
// start of one more.
TEST(Summary, AKilledWriterLeavesWholeRecords) {
  std::mt19937 rng(testing::fresh_seed());
  for (int trial = 0; trial < 10; ++trial) {
    const TempDir dir;
    // The child says when its file exists (header flushed), so that the kill lands mid-writing
    // however slowly a loaded machine starts it.
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(ready[0]);
      try {
        SummaryWriter w(dir.str());
        w.flush();
        const char byte = 1;
        if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
        for (int64_t step = 0;; ++step) {
          w.add_scalar("loss", 1.0 / static_cast<double>(step + 1), step);
          if (step % 50 == 0) {
            w.add_text("note", std::string(static_cast<size_t>(step % 700), 'x'), step);
          }
        }
      } catch (...) {
      }
      ::_exit(1);
    }
    ASSERT_GT(child, 0);
    ::close(ready[1]);
    char byte = 0;
    const ssize_t got = ::read(ready[0], &byte, 1);
    ::close(ready[0]);
    ::usleep(static_cast<useconds_t>(std::uniform_int_distribution<int>(0, 30000)(rng)));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_EQ(got, 1) << "the child died before its writer was made";
    const std::vector<std::string> files = event_files(dir.str());
    ASSERT_EQ(files.size(), 1u);
    // read_records checks every CRC, and the length CRC of a partial record at the end.
    const std::vector<std::string> r = read_records(files[0]);
    ASSERT_GE(r.size(), 1u);
    EXPECT_EQ(Fields(r[0]).str(3), "brain.Event:2");
    for (size_t i = 1; i < r.size(); ++i) {
      EXPECT_FALSE(summary_value(r[i]).str(1).empty()) << "record " << i;
    }
  }
}

// A write that fails (the file-size limit: EFBIG) is an Error at the next call, naming the file.
TEST(Summary, AFailedWriteIsAnErrorAtTheNextCall) {
  const TempDir dir;
  const int status = exit_code_in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    SummaryWriter w(dir.str());
    const rlimit limit{4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 4;
    try {
      for (int i = 0; i < 100000; ++i) w.add_text("t", std::string(100, 'x'), i);
      w.flush();
      return 1;
    } catch (const Error& e) {
      const std::string m = e.what();
      if (m.find("cannot write") == std::string::npos ||
          m.find(w.file_path()) == std::string::npos) {
        return 2;
      }
    }
    try {
      w.close();
      return 3;
    } catch (const Error&) {
      return 0;
    }
  });
  EXPECT_EQ(status, 0) << "1: no error; 2: the message lacks the cause or the path; 3: close did "
                          "not report it; 4: setrlimit failed";
}

TEST(Summary, BadInputIsAClearError) {
  const TempDir dir;
  std::ofstream(dir.file("taken")) << "a file";
  expect_error([&] { SummaryWriter w(dir.file("taken")); },
               {"cannot create the log folder", "taken"});
  expect_error([&] { SummaryWriter w(dir.file("taken") + "/sub"); },
               {"cannot create the log folder"});
  expect_error([] { SummaryWriter w(""); }, {"empty"});

  SummaryWriter w(dir.file("log"));
  expect_error([&] { w.add_scalar("", 1.0, 0); }, {"add_scalar", "tag is empty"});
  expect_error(
      [&] {
        w.add_histogram("h", from_vector<float>({1.0F, NAN, INFINITY}, {3}), 0);
      },
      {"add_histogram", "'h'", "1 NaN", "1 infinite"});
  expect_error([&] { w.add_histogram("h", zeros({0, 3}), 0); }, {"'h'", "no elements"});
  expect_error(
      [&] {
        w.add_image("img", zeros({2, 3, 4, 5}), 0);
      },
      {"add_image", "'img'", "[2, 3, 4, 5]", "CHW", "3 dimensions"});
  expect_error([&] { w.add_image("img", zeros({4, 5}), 0, ImageLayout::HWC); }, {"HWC"});
  expect_error([&] { w.add_image("img", zeros({2, 4, 5}), 0); }, {"2 channels", "1, 3 or 4"});
  expect_error(
      [&] {
        w.add_image("img", zeros({1, 4, 5}, {.dtype = DType::i32}), 0);
      },
      {"i32", "u8"});
  expect_error([&] { w.add_scalars("s", {{"a/b", 1.0}}, 0); }, {"add_scalars", "'a/b'"});
  expect_error([&] { w.add_hparams({}, {}); }, {"add_hparams", "no hyperparameters"});
  expect_error([&] { w.add_hparams({{"x", 1.0}}, {}, "../out"); }, {"leaves the log folder"});
  w.close();
  w.close();  // idempotent
  expect_error([&] { w.add_scalar("x", 1.0, 0); }, {"add_scalar", "closed"});
  // Nothing half-written: the records before the errors are whole, and none came from them.
  size_t tail = 1;
  EXPECT_EQ(read_records(w.file_path(), &tail).size(), 1u);
  EXPECT_EQ(tail, 0u);
}

// Per Note [run folders]: the name from the start time, host and comment, PyTorch's; runs started
// in the same second get folders of their own; bad roots and comments are clear errors.
TEST(Summary, RunFoldersNeverCollide) {
  const TempDir dir;
  std::tm t{};
  t.tm_year = 2024 - 1900;
  t.tm_mon = 11;
  t.tm_mday = 4;
  t.tm_hour = 20;
  t.tm_min = 51;
  t.tm_sec = 7;
  t.tm_isdst = -1;
  const std::time_t start = std::mktime(&t);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  const std::string root = dir.file("runs/sub");  // made with its parents
  const std::string first = make_run_dir(root, "llama", start);
  EXPECT_EQ(first, root + "/Dec04_20-51-07_" + host + "_llama");
  EXPECT_TRUE(std::filesystem::is_directory(first));
  EXPECT_EQ(make_run_dir(root, "llama", start), first + "_2");
  EXPECT_EQ(make_run_dir(root, "llama", start), first + "_3");
  EXPECT_EQ(make_run_dir(root, "", start), root + "/Dec04_20-51-07_" + host);
  EXPECT_EQ(make_run_dir(root, "gpt", start + 1), root + "/Dec04_20-51-08_" + host + "_gpt");
  std::ofstream(dir.file("taken")) << "a file";
  expect_error([&] { make_run_dir(dir.file("taken"), "x"); },
               {"make_run_dir", "cannot create the log folder", "taken"});
  expect_error([&] { make_run_dir(root, "a/b"); }, {"make_run_dir", "'a/b'"});
  expect_error([] { make_run_dir(""); }, {"make_run_dir", "empty"});
}

TEST(Summary, ImagesScaleAndClipAsPyTorch) {
  if (!summary::png_supported()) GTEST_SKIP() << "Sinter was built without libpng";
  const TempDir dir;
  std::string path;
  {
    SummaryWriter w(dir.str());
    path = w.file_path();
    // HW, HWC and u8 layouts all give 4x2 pictures.
    w.add_image("hw",
                from_vector<float>({-1.0F, 0.0F, 0.5F, 1.0F, 2.0F, NAN, 0.999F, 0.1F}, {4, 2}), 0,
                ImageLayout::HW);
    w.add_image("hwc", zeros({4, 2, 4}), 0, ImageLayout::HWC);
    w.add_image("u8", full({1, 4, 2}, 200, {.dtype = DType::u8}), 0);
  }
  const std::vector<std::string> r = read_records(path);
  ASSERT_EQ(r.size(), 4u);
  for (size_t i = 1; i < 4; ++i) {
    const Fields image(summary_value(r[i]).str(4));
    EXPECT_EQ(image.number(1), 4u);
    EXPECT_EQ(image.number(2), 2u);
  }
  EXPECT_EQ(Fields(summary_value(r[2]).str(4)).number(3), 4u);
#ifdef SINTER_TEST_WITH_PNG
  // Decoded by libpng: x * 255 clipped to [0, 255] and truncated; NaN is 0.
  auto decode = [](const std::string& png, uint32_t format) {
    png_image image;
    std::memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    EXPECT_NE(png_image_begin_read_from_memory(&image, png.data(), png.size()), 0);
    image.format = format;
    std::vector<uint8_t> pixels(PNG_IMAGE_SIZE(image));
    EXPECT_NE(png_image_finish_read(&image, nullptr, pixels.data(), 0, nullptr), 0);
    return pixels;
  };
  EXPECT_EQ(decode(Fields(summary_value(r[1]).str(4)).str(4), PNG_FORMAT_GRAY),
            (std::vector<uint8_t>{0, 0, 127, 255, 255, 0, 254, 25}));
  EXPECT_EQ(decode(Fields(summary_value(r[3]).str(4)).str(4), PNG_FORMAT_GRAY),
            std::vector<uint8_t>(8, 200));
#endif
}

TEST(Summary, MakeGridTilesAsTorchvision) {
  const Tensor images = arange(5 * 2 * 2 * 3.0).reshape({5, 2, 2, 3}) + 1.0;
  const Tensor g = make_grid(images, 3, 1, -1.0);
  // 2 rows of 3 cells of (2+1)x(3+1), plus the padding on the far side.
  EXPECT_EQ(g.shape(), (Shape{2, 2 * 3 + 1, 3 * 4 + 1}));
  EXPECT_TRUE(testing::all_close(g.narrow(1, 1, 2).narrow(2, 1, 3), images.select(0, 0), 0, 0));
  EXPECT_TRUE(testing::all_close(g.narrow(1, 4, 2).narrow(2, 5, 3), images.select(0, 4), 0, 0));
  EXPECT_EQ(g.select(0, 0).select(0, 0).to_vector<float>(), std::vector<float>(13, -1.0F));
  // The empty sixth cell keeps the padding value.
  EXPECT_EQ(g.narrow(1, 4, 2).narrow(2, 9, 3).contiguous().to_vector<float>(),
            std::vector<float>(2 * 2 * 3, -1.0F));
  expect_error([] { (void)make_grid(zeros({2, 3}), 8); }, {"make_grid", "(N, C, H, W)"});
  expect_error([] { (void)make_grid(zeros({1, 1, 2, 2}), 0); }, {"make_grid", "nrow 0"});
}

// add_histogram of a CUDA tensor (and of bf16 values) writes what the same values on the CPU do.
TEST(CudaSummary, HistogramOfADeviceTensorIsTheCpus) {
  SINTER_REQUIRE_CUDA();
  manual_seed(testing::fresh_seed());
  const TempDir dir;
  const Tensor values = randn({300, 7}) * 2.0;
  std::string path;
  {
    SummaryWriter w(dir.str());
    path = w.file_path();
    w.add_histogram("cpu", values, 0);
    w.add_histogram("cuda", values.to(Device::cuda(0)), 0);
    w.add_histogram("cpu_bf16", values.to(DType::bf16), 0);
    w.add_histogram("cuda_bf16", values.to(Device::cuda(0)).to(DType::bf16), 0);
  }
  const std::vector<std::string> r = read_records(path);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(summary_value(r[1]).str(5), summary_value(r[2]).str(5));
  EXPECT_EQ(summary_value(r[3]).str(5), summary_value(r[4]).str(5));
}

}  // namespace
}  // namespace sinter

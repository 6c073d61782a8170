// Token shards (Note [token shards]) and token windows (see sinter/data/tokens.h).
#include "sinter/data/tokens.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "internal/atomic_file.h"
#include "sinter/core/error.h"
#include "sinter/tensor.h"
#include "windows.h"

static_assert(std::endian::native == std::endian::little,
              "token shards are little-endian; this host is not");

namespace sinter::data {
namespace {

constexpr size_t kHeaderInts = 256;
constexpr size_t kHeaderBytes = kHeaderInts * sizeof(int32_t);

// A mapped file, unmapped when the last TokenSpan holding it goes.
struct Mapping {
  void* base = nullptr;
  size_t size = 0;
  Mapping(void* b, size_t n) : base(b), size(n) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (base) munmap(base, size);
  }
};

// Closes a file descriptor at scope exit.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

void write_token_shard(const std::string& path, std::span<const int32_t> tokens) {
  std::vector<uint16_t> body(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    SINTER_CHECK(tokens[i] >= 0 && tokens[i] <= 65535, "write_token_shard: ", path, ": token ", i,
                 " is ", tokens[i], ", outside the 16 bits of a shard's tokens (0 to 65535)");
    body[i] = static_cast<uint16_t>(tokens[i]);
  }
  SINTER_CHECK(tokens.size() <= static_cast<size_t>(INT32_MAX), "write_token_shard: ", path, ": ",
               tokens.size(), " tokens are more than a shard's header can count (2^31 - 1)");
  int32_t header[kHeaderInts] = {};
  header[0] = kTokenShardMagic;
  header[1] = kTokenShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  sinter::detail::write_file_atomically(
      path, {{header, kHeaderBytes}, {body.data(), body.size() * sizeof(uint16_t)}},
      "write_token_shard");
}

TokenSpan parse_token_shard(std::span<const uint8_t> bytes, const std::string& source) {
  SINTER_CHECK(bytes.size() >= kHeaderBytes, "read_token_shard: ", source, " has ", bytes.size(),
               " bytes, fewer than the 1024 of a shard's header");
  int32_t header[3];
  std::memcpy(header, bytes.data(), sizeof header);
  SINTER_CHECK(header[0] == kTokenShardMagic, "read_token_shard: ", source, ": magic ", header[0],
               ", not a token shard's ", kTokenShardMagic);
  SINTER_CHECK(header[1] == kTokenShardVersion, "read_token_shard: ", source, ": version ",
               header[1], "; this reader takes version ", kTokenShardVersion, " (uint16 tokens)");
  const int64_t n = header[2];
  const auto want = static_cast<int64_t>(kHeaderBytes) + 2 * n;
  SINTER_CHECK(n >= 0 && static_cast<int64_t>(bytes.size()) == want, "read_token_shard: ", source,
               ": the header counts ", n, " tokens (", want, " bytes in all), the file has ",
               bytes.size(), " bytes",
               static_cast<int64_t>(bytes.size()) < want ? " (truncated)" : "");
  return {reinterpret_cast<const uint16_t*>(bytes.data() + kHeaderBytes), n, nullptr, source};
}

TokenSpan read_token_shard(const std::string& path) {
  Fd file{open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  SINTER_CHECK(file.fd >= 0, "read_token_shard: cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  SINTER_CHECK(fstat(file.fd, &st) == 0, "read_token_shard: cannot stat ", path, ": ",
               std::strerror(errno));
  SINTER_CHECK(S_ISREG(st.st_mode), "read_token_shard: ", path, " is not a file");
  const auto size = static_cast<size_t>(st.st_size);
  SINTER_CHECK(size >= kHeaderBytes, "read_token_shard: ", path, " has ", size,
               " bytes, fewer than the 1024 of a shard's header");
  void* base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd, 0);
  SINTER_CHECK(base != MAP_FAILED, "read_token_shard: cannot map ", path, ": ",
               std::strerror(errno));
  auto mapping = std::make_shared<const Mapping>(base, size);
  TokenSpan span = parse_token_shard({static_cast<const uint8_t*>(base), size}, path);
  span.owner = std::move(mapping);
  return span;
}

std::vector<TokenSpan> read_token_shards(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<TokenSpan> spans;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!fs::is_directory(path, ec)) {
      spans.push_back(read_token_shard(path));
      continue;
    }
    std::vector<std::string> files;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().extension() == ".bin" && it->is_regular_file()) {
        files.push_back(it->path().string());
      }
    }
    SINTER_CHECK(!ec, "read_token_shards: cannot list the folder ", path, ": ", ec.message());
    SINTER_CHECK(!files.empty(), "read_token_shards: no shard (*.bin) in the folder ", path);
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) spans.push_back(read_token_shard(f));
  }
  SINTER_CHECK(!spans.empty(), "read_token_shards: no paths given");
  return spans;
}

TokenSpan token_span(const std::vector<int32_t>& tokens, const std::string& source) {
  auto held = std::make_shared<std::vector<uint16_t>>(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    SINTER_CHECK(tokens[i] >= 0 && tokens[i] <= 65535, "token_span: ", source, ": token ", i,
                 " is ", tokens[i], ", outside 0 to 65535");
    (*held)[i] = static_cast<uint16_t>(tokens[i]);
  }
  TokenSpan span{held->data(), static_cast<int64_t>(held->size()), nullptr, source};
  span.owner = std::move(held);
  return span;
}

int64_t max_token(const TokenSpan& span) {
  int64_t m = -1;
  for (int64_t i = 0; i < span.size; ++i) m = std::max<int64_t>(m, span.data[i]);
  return m;
}

TokenWindows::TokenWindows(std::vector<TokenSpan> spans, const TokenWindowsOptions& o)
    : spans_(std::move(spans)), options_(o) {
  SINTER_CHECK(o.context >= 1, "TokenWindows: context must be >= 1, got ", o.context);
  SINTER_CHECK(o.windows >= 0, "TokenWindows: windows must be >= 0 (0: the default), got ",
               o.windows);
  std::vector<int64_t> sizes;
  int64_t longest = 0;
  for (const TokenSpan& s : spans_) {
    sizes.push_back(s.size);
    num_tokens_ += s.size;
    longest = std::max(longest, s.size);
  }
  window_ends_ = detail::window_ends(sizes, o.context);
  SINTER_CHECK(!window_ends_.empty() && window_ends_.back() > 0, "TokenWindows: ", spans_.size(),
               " spans of ", num_tokens_, " tokens (the longest ", longest, ", in ",
               spans_.empty() ? std::string("none") : spans_.front().source,
               spans_.size() > 1 ? " and others" : "",
               ") are too short for one window of context + 1 = ", o.context + 1, " tokens");
  windows_ = o.windows > 0 ? o.windows : std::max<int64_t>(1, num_tokens_ / o.context);
}

std::pair<size_t, int64_t> TokenWindows::position(int64_t index) const {
  SINTER_CHECK(index >= 0 && index < windows_, "TokenWindows: index ", index, " out of range for ",
               windows_, " windows");
  return detail::pick_window(window_ends_, index, options_.split, options_.seed);
}

void TokenWindows::fill(int64_t index, int64_t* in, int64_t* target) const {
  const auto [s, offset] = position(index);
  const uint16_t* src = spans_[s].data + offset;
  for (int64_t j = 0; j < options_.context; ++j) {
    in[j] = src[j];
    target[j] = src[j + 1];
  }
}

Example TokenWindows::get(int64_t index) const {
  Tensor in = empty({options_.context}, {.dtype = DType::i64});
  Tensor target = empty({options_.context}, {.dtype = DType::i64});
  fill(index, in.data<int64_t>(), target.data<int64_t>());
  return {in, target};
}

Batch TokenWindows::get_batch(const std::vector<int64_t>& indices) const {
  SINTER_CHECK(!indices.empty(), "TokenWindows::get_batch: no indices");
  const auto b = static_cast<int64_t>(indices.size()), t = options_.context;
  Tensor in = empty({b, t}, {.dtype = DType::i64});
  Tensor target = empty({b, t}, {.dtype = DType::i64});
  for (int64_t k = 0; k < b; ++k) {
    fill(indices[static_cast<size_t>(k)], in.data<int64_t>() + k * t,
         target.data<int64_t>() + k * t);
  }
  return {in, target};
}

}  // namespace sinter::data

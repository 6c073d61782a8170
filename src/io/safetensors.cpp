// safetensors save/load of state dicts: an 8-byte little-endian header length N, N bytes of JSON
// (padded with spaces to a multiple of 8), then every tensor's raw little-endian bytes back to
// back.
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <utility>

#include "internal/atomic_file.h"
#include "sinter/autograd.h"
#include "sinter/io.h"

#ifdef SINTER_WITH_NLOHMANN_JSON
#include <nlohmann/json.hpp>
#endif

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian bytes; this host is not little-endian");

namespace sinter {

#ifndef SINTER_WITH_NLOHMANN_JSON

void save(const StateDict&, const std::string& path, const Metadata&) {
  SINTER_THROW("save: cannot write ", path, ": Sinter was built without nlohmann_json");
}
StateDict load(const std::string& path, Device) {
  SINTER_THROW("load: cannot read ", path, ": Sinter was built without nlohmann_json");
}
Metadata load_metadata(const std::string& path) {
  SINTER_THROW("load_metadata: cannot read ", path, ": Sinter was built without nlohmann_json");
}
LoadResult load_into(StateDict&, const std::string& path, bool) {
  SINTER_THROW("load_into: cannot read ", path, ": Sinter was built without nlohmann_json");
}

#else

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// A header larger than this is refused before it is read (the Python library's own limit).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

// The safetensors name of each dtype, indexed by the enum (a tensor's dtype is always in range).
#define SINTER_DTYPE_ST_(dt, type, bytes, name, st) st,
constexpr const char* kSafetensorsDTypes[] = {SINTER_DTYPES(SINTER_DTYPE_ST_)};
#undef SINTER_DTYPE_ST_

const char* safetensors_dtype(DType t) { return kSafetensorsDTypes[static_cast<int>(t)]; }

bool parse_dtype(const std::string& s, DType* out) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    if (s == safetensors_dtype(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

bool is_known_format(const std::string& f) {
  return f == "pt" || f == "tf" || f == "flax" || f == "mlx";
}

std::string errno_text() { return std::strerror(errno); }

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin;
  uint64_t end;
};

struct Header {
  std::vector<Entry> entries;  // sorted by data offset
  Metadata metadata;
  uint64_t data_start = 0;  // 8 + N
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

uint64_t json_uint(const json& v, const std::string& path, const std::string& what) {
  SINTER_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0),
               "load: ", path, ": ", what, " must be a non-negative integer, got ", v.dump());
  return v.get<uint64_t>();
}

// Note [safetensors checks]
// Everything in a header is checked before any tensor is read, so a corrupt file never allocates
// from a bogus size or reads outside the file:
//   - the file holds the 8-byte length, and the header length fits in the rest of the file;
//   - the header is a JSON object; "__metadata__", if present, maps strings to strings;
//   - each tensor entry has a known "dtype", a "shape" of non-negative integers and "data_offsets"
//     [begin, end] with begin <= end and end - begin == numel * element size (no overflow);
//   - sorted by offset, the tensors tile the data region exactly: the first starts at 0, each
//     starts where the previous ended (no gap, no overlap), and the last ends at the end of file.
Header read_header(std::FILE* f, const std::string& path) {
  struct stat st {};
  SINTER_CHECK(::fstat(::fileno(f), &st) == 0, "load: cannot stat ", path, ": ", errno_text());
  const auto file_size = static_cast<uint64_t>(st.st_size);
  SINTER_CHECK(file_size >= 8, "load: ", path, " is ", file_size,
               " bytes, too short for the 8-byte header length (truncated?)");
  uint8_t len_bytes[8];
  SINTER_CHECK(std::fread(len_bytes, 1, 8, f) == 8, "load: cannot read ", path, ": ", errno_text());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  SINTER_CHECK(n <= file_size - 8, "load: ", path, ": header length ", n,
               " runs past the end of the file (", file_size,
               " bytes; truncated or not a "
               "safetensors file)");
  SINTER_CHECK(n <= kMaxHeaderBytes, "load: ", path, ": header length ", n,
               " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  SINTER_CHECK(n >= 2, "load: ", path, ": header length ", n, " is too short for a JSON object");
  std::string text(n, '\0');
  SINTER_CHECK(std::fread(text.data(), 1, n, f) == n, "load: cannot read the header of ", path,
               ": ", errno_text());

  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    SINTER_THROW("load: ", path, ": the header is not valid JSON: ", e.what());
  }
  SINTER_CHECK(j.is_object(), "load: ", path, ": the header must be a JSON object, got ",
               j.type_name());

  Header h;
  h.data_start = 8 + n;
  const uint64_t data_size = file_size - h.data_start;
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      SINTER_CHECK(v.is_object(), "load: ", path, ": __metadata__ must be an object, got ",
                   v.type_name());
      for (const auto& [k, mv] : v.items()) {
        SINTER_CHECK(mv.is_string(), "load: ", path, ": __metadata__ value of '", k,
                     "' must be a string, got ", mv.dump());
        h.metadata[k] = mv.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    SINTER_CHECK(v.is_object(), "load: ", path, ": ", where, " must be an object, got ", v.dump());
    SINTER_CHECK(v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
                 "load: ", path, ": ", where,
                 " lacks one of dtype, shape, data_offsets: ", v.dump());
    const json& dt = v["dtype"];
    SINTER_CHECK(dt.is_string(), "load: ", path, ": ", where, ": dtype must be a string, got ",
                 dt.dump());
    Entry e;
    e.name = name;
    SINTER_CHECK(parse_dtype(dt.get<std::string>(), &e.dtype), "load: ", path, ": ", where,
                 ": unknown dtype ", dt.dump(),
                 " (supported: F32, F64, BF16, F16, I64, I32, U8, BOOL)");
    const json& sh = v["shape"];
    SINTER_CHECK(sh.is_array(), "load: ", path, ": ", where, ": shape must be an array, got ",
                 sh.dump());
    // numel * element size must stay below 2^63: every factor is checked against that bound.
    const uint64_t limit = uint64_t{1} << 62;
    uint64_t numel = 1;
    for (const json& d : sh) {
      const uint64_t size = json_uint(d, path, where + " shape entry");
      SINTER_CHECK(size <= limit && (size == 0 || numel <= limit / size), "load: ", path, ": ",
                   where, ": shape ", sh.dump(), " has too many elements");
      numel *= size;
      e.shape.push_back(static_cast<int64_t>(size));
    }
    const json& off = v["data_offsets"];
    SINTER_CHECK(off.is_array() && off.size() == 2, "load: ", path, ": ", where,
                 ": data_offsets must be [begin, end], got ", off.dump());
    e.begin = json_uint(off[0], path, where + " data_offsets begin");
    e.end = json_uint(off[1], path, where + " data_offsets end");
    SINTER_CHECK(e.begin <= e.end && e.end <= data_size, "load: ", path, ": ", where,
                 ": data_offsets ", off.dump(), " are out of range for the ", data_size,
                 "-byte data region");
    const uint64_t nbytes = numel * element_size(e.dtype);
    SINTER_CHECK(e.end - e.begin == nbytes, "load: ", path, ": ", where, ": data_offsets ",
                 off.dump(), " span ", e.end - e.begin, " bytes, but ", dt.get<std::string>(),
                 " of shape ", sh.dump(), " takes ", nbytes);
    h.entries.push_back(std::move(e));
  }
  std::sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (const Entry& e : h.entries) {
    SINTER_CHECK(e.begin >= expected, "load: ", path, ": tensor '", e.name, "' at [", e.begin, ", ",
                 e.end, ") overlaps the tensor before it, which ends at ", expected);
    SINTER_CHECK(e.begin == expected, "load: ", path, ": a gap in the data: tensor '", e.name,
                 "' starts at ", e.begin, " but the tensor before it ends at ", expected);
    expected = e.end;
  }
  SINTER_CHECK(expected == data_size, "load: ", path, ": the tensors cover ", expected,
               " bytes but the data region holds ", data_size,
               expected < data_size ? " (trailing bytes)" : "");
  return h;
}

File open_for_reading(const std::string& path, const char* op) {
  SINTER_CHECK(fs::is_regular_file(path), op, ": ", path, " does not exist or is not a file");
  File f(std::fopen(path.c_str(), "rb"));
  SINTER_CHECK(f != nullptr, op, ": cannot open ", path, ": ", errno_text());
  return f;
}

}  // namespace

void save(const StateDict& dict, const std::string& path, const Metadata& metadata) {
  SINTER_CHECK(!path.empty(), "save: empty path");
  // Host, contiguous copies first: nothing touches the disk until every tensor is in hand.
  std::vector<Tensor> host;
  host.reserve(dict.size());
  json header = json::object();  // std::map-backed: keys in sorted order, as the dict
  uint64_t offset = 0;
  {
    NoGradGuard no_grad;
    for (const auto& [name, t] : dict) {
      SINTER_CHECK(!name.empty(), "save: ", path, ": a tensor has an empty name");
      SINTER_CHECK(name != "__metadata__", "save: ", path,
                   ": '__metadata__' is reserved and cannot name a tensor");
      SINTER_CHECK(t.defined(), "save: ", path, ": tensor '", name, "' is undefined");
      Tensor h = t.detach().to(Device::cpu()).contiguous();
      const uint64_t nbytes = static_cast<uint64_t>(h.numel()) * element_size(h.dtype());
      header[name] = {{"dtype", safetensors_dtype(h.dtype())},
                      {"shape", h.shape()},
                      {"data_offsets", {offset, offset + nbytes}}};
      offset += nbytes;
      host.push_back(std::move(h));
    }
  }
  // Note [safetensors format]
  // Hugging Face's loaders (transformers' from_pretrained among them) refuse a file whose
  // metadata "format" is not one of the frameworks they know, so every file Sinter writes says
  // "pt": the tensors are laid out as torch.save_file lays them out. A caller's own format goes
  // under another key (the examples' checkpoints use "sinter.format").
  Metadata meta = metadata;
  const auto format = meta.find("format");
  if (format == meta.end()) {
    meta["format"] = "pt";
  } else {
    SINTER_CHECK(is_known_format(format->second), "save: ", path, ": metadata format '",
                 format->second, "' is not one of pt, tf, flax, mlx (the values Hugging Face's ",
                 "loaders accept); store a format of your own under another key");
  }
  header["__metadata__"] = meta;
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    SINTER_THROW("save: ", path,
                 ": a tensor name or metadata string is not valid UTF-8: ", e.what());
  }
  // Padding the header keeps the data 8-byte aligned in the file.
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<uint8_t>(text.size() >> (8 * i));

  std::vector<detail::ByteRange> parts{{len_bytes, 8}, {text.data(), text.size()}};
  for (const Tensor& h : host) {
    parts.push_back({h.data_ptr(), static_cast<size_t>(h.numel()) * element_size(h.dtype())});
  }
  detail::write_file_atomically(path, parts, "save");
}

StateDict load(const std::string& path, Device device) {
  File f = open_for_reading(path, "load");
  const Header h = read_header(f.get(), path);
  StateDict out;
  // Entries are sorted by offset and tile the data region, so one sequential read covers them.
  for (const Entry& e : h.entries) {
    Tensor t = empty(e.shape, {.dtype = e.dtype});
    const size_t nbytes = e.end - e.begin;
    if (nbytes > 0) {
      SINTER_CHECK(std::fread(t.data_ptr(), 1, nbytes, f.get()) == nbytes, "load: ", path,
                   ": cannot read the data of tensor '", e.name, "' (truncated while reading?)");
    }
    if (e.dtype == DType::b8) {
      const auto* p = static_cast<const uint8_t*>(t.data_ptr());
      for (size_t i = 0; i < nbytes; ++i) {
        SINTER_CHECK(p[i] <= 1, "load: ", path, ": BOOL tensor '", e.name, "' holds byte ",
                     int{p[i]}, " at element ", i, " (only 0 and 1 are booleans)");
      }
    }
    out.emplace(e.name, device.is_cpu() ? t : t.to(device));
  }
  return out;
}

Metadata load_metadata(const std::string& path) {
  File f = open_for_reading(path, "load_metadata");
  return read_header(f.get(), path).metadata;
}

LoadResult load_into(StateDict& target, const std::string& path, bool strict) {
  const StateDict loaded = load(path, Device::cpu());
  LoadResult r;
  for (const auto& [name, t] : target) {
    if (!loaded.count(name)) r.missing_keys.push_back(name);
  }
  for (const auto& [name, t] : loaded) {
    if (!target.count(name)) r.unexpected_keys.push_back(name);
  }
  if (strict) {
    SINTER_CHECK(r.missing_keys.empty() && r.unexpected_keys.empty(), "load_into: ", path,
                 " does not match the state dict: missing from the file ", r.missing_keys,
                 ", unexpected in the file ", r.unexpected_keys);
  }
  // Every check before the first copy, so that a mismatch leaves `target` as it was.
  for (const auto& [name, src] : loaded) {
    auto it = target.find(name);
    if (it == target.end()) continue;
    const Tensor& dst = it->second;
    SINTER_CHECK(dst.defined(), "load_into: ", path, ": target tensor '", name, "' is undefined");
    SINTER_CHECK(dst.shape() == src.shape(), "load_into: ", path, ": tensor '", name,
                 "' has shape ", shape_str(src.shape()), " in the file but ",
                 shape_str(dst.shape()), " in the state dict");
    SINTER_CHECK(dst.dtype() == src.dtype(), "load_into: ", path, ": tensor '", name,
                 "' has dtype ", src.dtype(), " in the file but ", dst.dtype(),
                 " in the state dict");
  }
  NoGradGuard no_grad;
  for (const auto& [name, src] : loaded) {
    auto it = target.find(name);
    if (it != target.end()) it->second.copy_(src);
  }
  return r;
}

#endif  // SINTER_WITH_NLOHMANN_JSON

}  // namespace sinter

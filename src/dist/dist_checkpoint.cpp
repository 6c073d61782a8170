// Distributed checkpoints: pieces of whole tensors written by every rank, read back at any layout
// (Note [distributed checkpoint] in include/sinter/dist_checkpoint.h).
#include "sinter/dist_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "sinter/ops.h"

namespace sinter::dist {

namespace {

constexpr const char* kSave = "save_distributed";
constexpr const char* kLoad = "load_distributed";
constexpr const char* kManifest = "manifest.safetensors";
constexpr const char* kRuns = "sinter.dcp.runs.";
constexpr const char* kShape = "sinter.dcp.shape.";
constexpr const char* kWorld = "sinter.dcp.world_size";
constexpr const char* kId = "sinter.dcp.save_id";
constexpr const char* kDtype = "sinter.dcp.dtype.";
// The optimizer's per-parameter scalars (step counts), apart from its buffers: a 0-dim parameter's
// buffers are 0-dim too.
constexpr const char* kScalars = "optimizer:scalar.";

std::string rank_file(const std::string& dir, int rank, int world) {
  return (std::filesystem::path(dir) /
          ("rank-" + std::to_string(rank) + "-of-" + std::to_string(world) + ".safetensors"))
      .string();
}

std::string ints_text(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

std::vector<int64_t> parse_ints(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    SINTER_CHECK(used == item.size() && !item.empty(), kLoad, ": ", what, ": \"", text,
                 "\" is not a list of integers");
    out.push_back(v);
  }
  return out;
}

std::string runs_text(const std::vector<Run>& runs) {
  std::vector<int64_t> v;
  for (const Run& r : runs) {
    v.insert(v.end(), {r.local, r.global, r.length, r.count, r.local_stride, r.global_stride});
  }
  return ints_text(v);
}

// Calls f(local offset, global offset, length) for each stretch of `run`.
template <class F>
void for_each_stretch(const Run& run, F&& f) {
  for (int64_t i = 0; i < run.count; ++i) {
    f(run.local + i * run.local_stride, run.global + i * run.global_stride, run.length);
  }
}

int64_t elements(const std::vector<Run>& runs) {
  int64_t n = 0;
  for (const Run& r : runs) n += r.count * r.length;
  return n;
}

// One stretch of a whole tensor held by a rank's file: `length` elements from flat `global`,
// at element `offset` of that file's tensor.
struct Stored {
  int64_t global = 0, length = 0;
  int file = 0;
  int64_t offset = 0;
};

struct Entry {
  Shape shape;
  DType dtype = DType::f32;
  std::vector<Stored> stretches;  // sorted by global
  // reach[i]: the stretch among stretches[0..i] that ends furthest (for pieces nested in others).
  std::vector<size_t> reach;
  std::map<int, int64_t> file_elements;  // each file's tensor of it, in elements
};

struct Index {
  int world = 0;
  std::vector<std::string> files;
  std::map<std::string, Entry> entries;
};

DType parse_dtype(const std::string& name, const std::string& where) {
  for (int k = 0; k < kNumDTypes; ++k) {
    if (name == dtype_name(static_cast<DType>(k))) return static_cast<DType>(k);
  }
  SINTER_THROW(kLoad, ": ", where, ": unknown dtype \"", name, "\"");
}

Index read_index(const std::string& dir) {
  const std::string manifest = (std::filesystem::path(dir) / kManifest).string();
  SINTER_CHECK(std::filesystem::exists(manifest), kLoad, ": '", dir,
               "' holds no finished checkpoint (no ", kManifest, ")");
  const Metadata meta = load_metadata(manifest);
  auto w = meta.find(kWorld);
  SINTER_CHECK(w != meta.end(), kLoad, ": ", manifest, " has no ", kWorld);
  auto id = meta.find(kId);
  SINTER_CHECK(id != meta.end(), kLoad, ": ", manifest, " has no ", kId);
  Index index;
  index.world = static_cast<int>(parse_ints(w->second, kWorld).at(0));
  for (int r = 0; r < index.world; ++r) {
    const std::string path = rank_file(dir, r, index.world);
    SINTER_CHECK(std::filesystem::exists(path), kLoad, ": ", path,
                 " is missing (the checkpoint was", " written by ", index.world, " ranks)");
    index.files.push_back(path);
    const Metadata meta_r = load_metadata(path);  // the header only
    auto own_id = meta_r.find(kId);
    SINTER_CHECK(own_id != meta_r.end() && own_id->second == id->second, kLoad, ": ", path,
                 " is not from the save the manifest finished (a file of an earlier save)");
    for (const auto& [key, value] : meta_r) {
      if (key.rfind(kRuns, 0) != 0) continue;
      const std::string name = key.substr(std::string(kRuns).size());
      auto shape = meta_r.find(kShape + name);
      SINTER_CHECK(shape != meta_r.end(), kLoad, ": ", path, " has runs of '", name,
                   "' but not its shape");
      const std::vector<int64_t> whole = parse_ints(shape->second, path);
      Entry& e = index.entries[name];
      SINTER_CHECK(e.stretches.empty() || e.shape == Shape(whole), kLoad, ": '", name, "' is ",
                   shape_str(e.shape), " in one file and ", shape_str(Shape(whole)), " in ", path);
      e.shape = Shape(whole);
      auto dtype = meta_r.find(kDtype + name);
      SINTER_CHECK(dtype != meta_r.end(), kLoad, ": ", path, " has no dtype for '", name, "'");
      e.dtype = parse_dtype(dtype->second, path);
      const std::vector<int64_t> v = parse_ints(value, path);
      int64_t offset = 0;
      for (size_t k = 0; k + 6 <= v.size(); k += 6) {
        const Run run{v[k], v[k + 1], v[k + 2], v[k + 3], v[k + 4], v[k + 5]};
        for_each_stretch(run, [&](int64_t, int64_t global, int64_t length) {
          e.stretches.push_back({global, length, r, offset});
          offset += length;
        });
      }
      e.file_elements[r] = offset;
    }
  }
  for (auto& [name, e] : index.entries) {
    std::stable_sort(e.stretches.begin(), e.stretches.end(),
                     [](const Stored& a, const Stored& b) { return a.global < b.global; });
    e.reach.resize(e.stretches.size());
    for (size_t i = 0; i < e.stretches.size(); ++i) {
      const auto end = [&](size_t k) { return e.stretches[k].global + e.stretches[k].length; };
      e.reach[i] = i > 0 && end(e.reach[i - 1]) >= end(i) ? e.reach[i - 1] : i;
    }
  }
  return index;
}

// A copy from a file's tensor into a local tensor: `length` elements.
struct Copy {
  int file = 0;
  int64_t from = 0, to = 0, length = 0;
};

// The copies that fill the global stretch [global, global + length) at local `local`, or an
// error naming the first element no file holds.
void plan_stretch(const std::string& name, const Entry& e, int64_t local, int64_t global,
                  int64_t length, std::vector<Copy>& out) {
  const int64_t end = global + length;
  int64_t at = global;
  while (at < end) {
    // Of the stretches that start at or before `at`, the one that reaches furthest.
    auto it = std::upper_bound(e.stretches.begin(), e.stretches.end(), at,
                               [](int64_t g, const Stored& s) { return g < s.global; });
    if (it == e.stretches.begin()) break;
    const Stored& s = e.stretches[e.reach[static_cast<size_t>(it - e.stretches.begin()) - 1]];
    if (s.global + s.length <= at) break;
    const int64_t stop = std::min(end, s.global + s.length);
    out.push_back({s.file, s.offset + (at - s.global), local + (at - global), stop - at});
    at = stop;
  }
  SINTER_CHECK(at >= end, kLoad, ": element ", at, " of '", name, "' ", shape_str(e.shape),
               " is in no rank's file");
}

// Joins the stretch `piece` to `last` when it continues last's progression (one length, one
// stride in both tensors).
bool extend(Run& last, const Run& piece) {
  if (last.length != piece.length) return false;
  const int64_t ls = piece.local - last.local, gs = piece.global - last.global;
  if (last.count == 1) {
    if (ls <= 0) return false;
    last.local_stride = ls;
    last.global_stride = gs;
  } else if (ls != last.local_stride * last.count || gs != last.global_stride * last.count) {
    return false;
  }
  ++last.count;
  return true;
}

}  // namespace

ShardSpec whole_spec(const std::string& name, const Tensor& t, bool writer) {
  return {name, t.shape(), t, {Run{0, 0, t.numel()}}, writer};
}

std::vector<Run> restrict_runs(const std::vector<Run>& runs, int64_t begin, int64_t end) {
  std::vector<Run> out;
  for (const Run& run : runs) {
    for_each_stretch(run, [&](int64_t local, int64_t global, int64_t length) {
      const int64_t a = std::max(local, begin), z = std::min(local + length, end);
      if (a >= z) return;
      const Run piece{a - begin, global + (a - local), z - a};
      if (out.empty() || !extend(out.back(), piece)) out.push_back(piece);
    });
  }
  return out;
}

namespace {

// FNV-1a over a rank file's contents: its metadata, its tensors' names and bytes.
uint64_t digest(const StateDict& dict, const Metadata& meta) {
  uint64_t h = 1469598103934665603ull;
  auto add = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (const auto& [key, value] : meta) {
    add(key.data(), key.size() + 1);
    add(value.data(), value.size() + 1);
  }
  for (const auto& [name, t] : dict) {
    add(name.data(), name.size() + 1);
    const Tensor c = t.contiguous();
    add(c.data_ptr(), static_cast<size_t>(c.numel()) * element_size(c.dtype()));
  }
  return h;
}

// Every rank's verdict on a step of a collective save: each rank calls it once per step, so that a
// failure on one rank stops all of them together (no rank left waiting in a collective).
void agree(ProcessGroup& world, const std::string& failure) {
  Tensor failed = full({1}, failure.empty() ? 0.0 : 1.0, {.dtype = DType::i64});
  world.all_reduce(failed, ReduceOp::Max);
  SINTER_CHECK(failed.item<int64_t>() == 0, kSave, ": ",
               failure.empty() ? "another rank failed" : failure);
}

template <class F>
std::string attempt(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The elements of `s`'s runs, back to back, in a CPU tensor; an error for runs that name one
// element of the whole twice.
Tensor gather_runs(const ShardSpec& s) {
  SINTER_CHECK(s.local.defined() && s.local.is_contiguous(), kSave, ": the local tensor of '",
               s.name, "' must be defined and contiguous");
  std::vector<std::pair<int64_t, int64_t>> spans;  // global [start, end)
  for (const Run& run : s.runs) {
    for_each_stretch(run, [&](int64_t local, int64_t global, int64_t length) {
      SINTER_CHECK(local >= 0 && length >= 0 && local + length <= s.local.numel() && global >= 0 &&
                       global + length <= numel_of(s.whole),
                   kSave, ": a run of '", s.name, "' reaches past its local tensor (",
                   s.local.numel(), " elements) or its whole ", shape_str(s.whole));
      spans.emplace_back(global, global + length);
    });
  }
  std::sort(spans.begin(), spans.end());
  for (size_t k = 1; k < spans.size(); ++k) {
    SINTER_CHECK(spans[k].first >= spans[k - 1].second, kSave, ": the runs of '", s.name,
                 "' name element ", spans[k].first, " of the whole twice");
  }
  NoGradGuard ng;
  const Tensor flat = s.local.detach().reshape({-1});
  Tensor data = empty({elements(s.runs)}, {.dtype = flat.dtype(), .device = Device::cpu()});
  int64_t at = 0;
  for (const Run& run : s.runs) {
    for_each_stretch(run, [&](int64_t local, int64_t, int64_t length) {
      data.narrow(0, at, length).copy_(flat.narrow(0, local, length));
      at += length;
    });
  }
  return data;
}

}  // namespace

void save_distributed(const std::string& dir, const std::vector<ShardSpec>& specs,
                      ProcessGroup& world, const Metadata& metadata) {
  const int rank = world.rank(), size = world.size();
  StateDict dict;
  Metadata meta = metadata;
  agree(world, attempt([&] {
          std::set<std::string> names;
          for (const ShardSpec& s : specs) {
            SINTER_CHECK(names.insert(s.name).second, kSave, ": '", s.name, "' is given twice");
            const Tensor data = gather_runs(s);
            if (!s.writer) continue;
            dict[s.name] = data;
            meta[kRuns + s.name] = runs_text(s.runs);
            meta[kShape + s.name] = ints_text(std::vector<int64_t>(s.whole.begin(), s.whole.end()));
            meta[kDtype + s.name] = dtype_name(data.dtype());
          }
        }));
  // One id for this save, in every rank's file and the manifest, so that a rank file left from
  // another save is never read as part of this one: a digest of every rank's file, so that the
  // same checkpoint saved twice is the same bytes (a resumed run's checkpoint equals the
  // uninterrupted run's).
  const std::vector<int64_t> digests =
      world.all_gather(from_vector<int64_t>({static_cast<int64_t>(digest(dict, meta))}, {1}))
          .contiguous()
          .to_vector<int64_t>();
  uint64_t combined = 1469598103934665603ull;
  for (const int64_t d : digests)
    combined = (combined ^ static_cast<uint64_t>(d)) * 1099511628211ull;
  const std::string save_id = std::to_string(combined);
  meta[kId] = save_id;
  const std::string manifest = (std::filesystem::path(dir) / kManifest).string();
  agree(world, attempt([&] {
          if (rank != 0) return;
          std::filesystem::create_directories(dir);
          std::filesystem::remove(manifest);  // not a finished checkpoint until the end
          // Rank files of saves at other world sizes (those at this one are overwritten).
          const std::string mine = "-of-" + std::to_string(size) + ".safetensors";
          for (const auto& entry : std::filesystem::directory_iterator(dir)) {
            const std::string f = entry.path().filename().string();
            if (f.rfind("rank-", 0) == 0 && f.find("-of-") != std::string::npos &&
                f.size() > mine.size() && f.compare(f.size() - mine.size(), mine.size(), mine)) {
              std::filesystem::remove(entry.path());
            }
          }
        }));
  agree(world, attempt([&] { save(dict, rank_file(dir, rank, size), meta); }));
  agree(world, attempt([&] {
          if (rank != 0) return;
          Metadata m = metadata;
          m[kWorld] = std::to_string(size);
          m[kId] = save_id;
          save(StateDict{}, manifest, m);
        }));
}

Metadata load_distributed_metadata(const std::string& dir) {
  Metadata meta = load_metadata((std::filesystem::path(dir) / kManifest).string());
  meta.erase(kWorld);
  meta.erase(kId);
  return meta;
}

void load_distributed(const std::string& dir, const std::vector<ShardSpec>& specs) {
  const Index index = read_index(dir);
  // Every spec's copies planned and checked against the files' headers before any is made.
  std::vector<std::vector<Copy>> plans(specs.size());
  std::set<int> needed;
  for (size_t k = 0; k < specs.size(); ++k) {
    const ShardSpec& s = specs[k];
    auto it = index.entries.find(s.name);
    SINTER_CHECK(it != index.entries.end(), kLoad, ": the checkpoint in '", dir, "' has no '",
                 s.name, "'");
    SINTER_CHECK(it->second.shape == s.whole, kLoad, ": '", s.name, "' is ",
                 shape_str(it->second.shape), " in the checkpoint, ", shape_str(s.whole), " here");
    SINTER_CHECK(s.local.defined() && s.local.is_contiguous(), kLoad, ": the local tensor of '",
                 s.name, "' must be defined and contiguous");
    for (const Run& run : s.runs) {
      for_each_stretch(run, [&](int64_t local, int64_t global, int64_t length) {
        plan_stretch(s.name, it->second, local, global, length, plans[k]);
      });
    }
    for (const Copy& c : plans[k]) {
      SINTER_CHECK(c.to >= 0 && c.to + c.length <= s.local.numel(), kLoad, ": a run of '", s.name,
                   "' reaches past its local tensor (", s.local.numel(), " elements)");
      SINTER_CHECK(c.from + c.length <= it->second.file_elements.at(c.file), kLoad, ": ",
                   index.files[static_cast<size_t>(c.file)], " holds fewer elements of '", s.name,
                   "' than its header says");
      needed.insert(c.file);
    }
  }
  // Into copies first, one file read at a time; then into the local tensors.
  NoGradGuard ng;
  std::vector<Tensor> staged;
  for (const ShardSpec& s : specs) staged.push_back(s.local.detach().clone().view({-1}));
  for (int f : needed) {
    const std::string& path = index.files[static_cast<size_t>(f)];
    const StateDict file = load(path);
    for (size_t k = 0; k < specs.size(); ++k) {
      for (const Copy& c : plans[k]) {
        if (c.file != f) continue;
        auto t = file.find(specs[k].name);
        SINTER_CHECK(t != file.end() && t->second.numel() >= c.from + c.length, kLoad, ": ", path,
                     " does not hold the '", specs[k].name, "' its header describes");
        staged[k].narrow(0, c.to, c.length).copy_(t->second.narrow(0, c.from, c.length));
      }
    }
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    Tensor local = specs[k].local.detach().view({-1});
    local.copy_(staged[k]);
  }
}

StateDict load_whole(const std::string& dir, const std::string& prefix) {
  const Index index = read_index(dir);
  std::vector<ShardSpec> specs;
  for (const auto& [name, e] : index.entries) {
    if (name.rfind(prefix, 0) != 0) continue;
    specs.push_back(whole_spec(name, zeros(e.shape, {.dtype = e.dtype})));
  }
  load_distributed(dir, specs);
  StateDict out;
  for (const ShardSpec& s : specs) out[s.name.substr(prefix.size())] = s.local;
  return out;
}

namespace {

// The spec of each of the optimizer's parameters (by identity), group by group.
std::vector<std::vector<const ShardSpec*>> specs_of(const optim::Optimizer& opt,
                                                    const std::vector<ShardSpec>& params,
                                                    const char* op) {
  std::vector<std::vector<const ShardSpec*>> out(opt.num_param_groups());
  for (size_t g = 0; g < opt.num_param_groups(); ++g) {
    for (const Tensor& p : opt.params(g)) {
      const ShardSpec* found = nullptr;
      for (const ShardSpec& s : params) {
        if (s.local.is_same(p)) found = &s;
      }
      SINTER_CHECK(found != nullptr, op, ": parameter ", out[g].size(), " of group ", g, " of ",
                   opt.name(), " (", shape_str(p.shape()), ") has no spec among the ",
                   params.size(), " given");
      out[g].push_back(found);
    }
  }
  return out;
}

std::string state_prefix(size_t g, size_t i) {
  return "state." + std::to_string(g) + "." + std::to_string(i) + ".";
}

}  // namespace

std::vector<ShardSpec> optimizer_specs(const optim::Optimizer& opt,
                                       const std::vector<ShardSpec>& params) {
  const auto specs = specs_of(opt, params, "optimizer_specs");
  const StateDict state = opt.state_dict();
  std::vector<ShardSpec> out;
  for (size_t g = 0; g < specs.size(); ++g) {
    for (size_t i = 0; i < specs[g].size(); ++i) {
      const ShardSpec& p = *specs[g][i];
      const std::string prefix = state_prefix(g, i);
      for (auto it = state.lower_bound(prefix);
           it != state.end() && it->first.rfind(prefix, 0) == 0; ++it) {
        const std::string state = it->first.substr(prefix.size());
        if (it->second.dim() == 0 && p.local.dim() > 0) {  // a step count
          out.push_back(whole_spec(kScalars + p.name + "." + state, it->second, p.writer));
        } else {
          out.push_back({"optimizer." + p.name + "." + state, p.whole, it->second.contiguous(),
                         p.runs, p.writer});
        }
      }
    }
  }
  const bool writer = !specs.empty() && !specs[0].empty() && specs[0][0]->writer;
  for (const auto& [key, t] : state) {
    if (key.rfind("param_groups.", 0) == 0)
      out.push_back(whole_spec("optimizer." + key, t, writer));
  }
  return out;
}

void load_optimizer_state(optim::Optimizer& opt, const std::vector<ShardSpec>& params,
                          const std::string& dir) {
  const auto specs = specs_of(opt, params, "load_optimizer_state");
  const Index index = read_index(dir);
  // The hyperparameters as they are unless the checkpoint has them; the state only from it.
  StateDict dict;
  for (const auto& [key, t] : opt.state_dict()) {
    if (key.rfind("param_groups.", 0) == 0) dict[key] = t;
  }
  std::vector<ShardSpec> wanted;
  for (size_t g = 0; g < specs.size(); ++g) {
    for (size_t i = 0; i < specs[g].size(); ++i) {
      const ShardSpec& p = *specs[g][i];
      for (const std::string& prefix : {"optimizer." + p.name + ".", kScalars + p.name + "."}) {
        const bool scalar = prefix.rfind(kScalars, 0) == 0;
        for (auto it = index.entries.lower_bound(prefix);
             it != index.entries.end() && it->first.rfind(prefix, 0) == 0; ++it) {
          const std::string name = it->first.substr(prefix.size());
          if (name.find('.') != std::string::npos) continue;  // another parameter's
          const Tensor local =
              scalar ? zeros({}, {.dtype = it->second.dtype}) : zeros_like(p.local);
          wanted.push_back(scalar ? whole_spec(it->first, local)
                                  : ShardSpec{it->first, p.whole, local, p.runs, p.writer});
          dict[state_prefix(g, i) + name] = local;
        }
      }
    }
  }
  for (const auto& [name, e] : index.entries) {
    if (name.rfind("optimizer.param_groups.", 0) != 0) continue;
    Tensor local = zeros({}, {.dtype = DType::f64});
    wanted.push_back(whole_spec(name, local));
    dict[name.substr(std::string("optimizer.").size())] = local;
  }
  load_distributed(dir, wanted);
  opt.load_state_dict(dict);
}

}  // namespace sinter::dist

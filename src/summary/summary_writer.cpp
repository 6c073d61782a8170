// SummaryWriter: TensorBoard event files written by a background thread (Note [event files]).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "sinter/core/error.h"
#include "sinter/ops.h"
#include "sinter/summary.h"
#include "summary/protobuf.h"
#include "summary/record.h"

namespace sinter {

// Note [event files]
// An event file is a sequence of TFRecords (summary/record.h), each one serialized Event: the first
// holds file_version "brain.Event:2", the rest a Summary with one value at a wall time and step.
// TensorBoard reads every file whose name contains "tfevents" under a run's folder, and reads them
// while they grow: a reader that meets a partial record at the end waits for the rest. So records
// are appended with write(2) in whole batches (never a record split across a failed write and a
// retry), and a file is never rewritten: atomic replacement (Note [atomic writes]) does not apply
// to a log that is read while it grows.
//
// The layout is PyTorch's, so that a run logged by either looks the same in TensorBoard and in its
// event accumulator: add_scalars writes each key to "<log_dir>/<main_tag>_<key>" under the tag
// main_tag; add_hparams writes the HParams plugin's experiment, session start and session end
// summaries (tags "_hparams_/...") and the metrics as scalars at step 0 into a subfolder named by
// the run; add_text stores the string as a DT_STRING tensor under "<tag>/text_summary" with the
// text plugin's metadata.
//
// The calling thread checks the arguments (so bad input is an Error at once) and copies what it
// logs to host memory with the wall time of the call; the writer thread builds the protobufs,
// buckets histograms, encodes PNGs and writes. It writes after each batch of queued summaries, so
// what TensorBoard shows trails the program by one batch, not by a flush interval.

namespace {

using summary::ProtoWriter;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::string event_bytes(double wall_time, int64_t step, const ProtoWriter& value) {
  ProtoWriter summary;
  summary.message(1, value);
  ProtoWriter event;
  event.float64(1, wall_time).int64(2, step).message(5, summary);
  return event.str();
}

ProtoWriter plugin_metadata(const std::string& plugin, const std::string& content) {
  ProtoWriter data;
  data.bytes(1, plugin).bytes(2, content);
  ProtoWriter metadata;
  metadata.message(1, data);
  return metadata;
}

// google.protobuf.Value of a hyperparameter: number_value 2, string_value 3, bool_value 4.
ProtoWriter hparam_value(const HParamValue& v) {
  ProtoWriter out;
  if (const double* d = std::get_if<double>(&v)) {
    out.float64(2, *d);
  } else if (const std::string* s = std::get_if<std::string>(&v)) {
    out.bytes(3, *s);
  } else {
    out.varint(4, std::get<bool>(v) ? 1 : 0);
  }
  return out;
}

// The HParams plugin's DataType: DATA_TYPE_STRING 1, DATA_TYPE_BOOL 2, DATA_TYPE_FLOAT64 3.
int hparam_type(const HParamValue& v) {
  if (std::holds_alternative<double>(v)) return 3;
  return std::holds_alternative<std::string>(v) ? 1 : 2;
}

// Creates `folder` and its parents, or says why it cannot (`who` names the caller).
void make_folder(const char* who, const std::string& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  SINTER_CHECK(!ec && std::filesystem::is_directory(folder), who,
               ": cannot create the log folder '", folder,
               "': ", ec ? ec.message() : "a file of that name is in the way");
}

std::string check_tag(const char* op, const std::string& tag) {
  SINTER_CHECK(!tag.empty(), "SummaryWriter::", op, ": the tag is empty");
  return tag;
}

}  // namespace

struct SummaryWriter::Impl {
  struct File {
    std::string path;
    int fd = -1;
  };
  struct Job {
    File* file;
    std::function<std::string()> event;  // the serialized Event
  };

  std::string log_dir;
  SummaryWriterOptions options;
  std::vector<std::unique_ptr<File>> files;  // every file, each behind its own pointer
  File* main = nullptr;                      // files[0]: read without the lock, never moved
  std::map<std::string, File*> subfolders;   // add_scalars' and add_hparams' files by folder

  std::mutex mu;
  std::condition_variable work, room, done_cv;
  std::deque<Job> queue;
  uint64_t queued = 0, done = 0;
  bool stopping = false, closed = false;
  std::string error;  // the writer thread's first failure
  std::thread thread;

  // Creates `folder` and a new event file in it, holding its file_version record.
  File* open_file(const std::string& folder) {
    static std::atomic<uint64_t> serial{0};
    make_folder("SummaryWriter", folder);
    const double wall = now_seconds();
    char name[96];
    std::snprintf(name, sizeof name, "events.out.tfevents.%010lld.", static_cast<long long>(wall));
    const std::string path =
        (std::filesystem::path(folder) / (name + host_name() + "." + std::to_string(getpid()) +
                                          "." + std::to_string(serial++) + options.filename_suffix))
            .string();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    SINTER_CHECK(fd >= 0, "SummaryWriter: cannot create '", path, "': ", std::strerror(errno));
    auto file = std::make_unique<File>(File{path, fd});
    ProtoWriter version;
    version.float64(1, wall).bytes(3, "brain.Event:2");
    const std::string err = write_all(*file, summary::frame_record(version.str()));
    if (!err.empty()) {
      ::close(fd);
      SINTER_THROW("SummaryWriter: ", err);
    }
    files.push_back(std::move(file));
    return files.back().get();
  }

  File* subfolder(const char* op, const std::string& name) {
    std::lock_guard lk(mu);
    throw_if_failed_locked(op);
    auto it = subfolders.find(name);
    if (it != subfolders.end()) return it->second;
    File* f = open_file((std::filesystem::path(log_dir) / name).string());
    subfolders.emplace(name, f);
    return f;
  }

  // "" when all of `bytes` went to the file, else why not.
  static std::string write_all(const File& f, const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::write(f.fd, bytes.data() + off, bytes.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return "cannot write '" + f.path + "': " + std::strerror(n < 0 ? errno : EIO);
      off += static_cast<size_t>(n);
    }
    return "";
  }

  void throw_if_failed_locked(const char* op) const {
    SINTER_CHECK(!closed, "SummaryWriter::", op, ": the writer of '", log_dir, "' is closed");
    SINTER_CHECK(error.empty(), "SummaryWriter::", op, ": an earlier write under '", log_dir,
                 "' failed: ", error);
  }

  void push(const char* op, File* file, std::function<std::string()> event) {
    std::unique_lock lk(mu);
    throw_if_failed_locked(op);
    room.wait(lk, [&] { return queue.size() < options.max_queue || !error.empty(); });
    throw_if_failed_locked(op);
    queue.push_back({file, std::move(event)});
    ++queued;
    work.notify_one();
  }

  void run() {
    for (;;) {
      std::deque<Job> batch;
      {
        std::unique_lock lk(mu);
        work.wait(lk, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        batch.swap(queue);
        room.notify_all();
      }
      std::string err;
      std::vector<std::pair<File*, std::string>> out;  // per file, in the order first seen
      for (Job& job : batch) {
        if (!err.empty()) break;
        try {
          std::string record = summary::frame_record(job.event());
          auto it = std::find_if(out.begin(), out.end(),
                                 [&](const auto& p) { return p.first == job.file; });
          if (it == out.end()) {
            out.emplace_back(job.file, std::move(record));
          } else {
            it->second += record;
          }
        } catch (const std::exception& e) {
          err = e.what();
        }
      }
      for (const auto& [file, bytes] : out) {
        if (!err.empty()) break;
        err = write_all(*file, bytes);
      }
      std::lock_guard lk(mu);
      if (!err.empty() && error.empty()) error = err;
      done += batch.size();
      done_cv.notify_all();
      room.notify_all();
    }
  }
};

SummaryWriter::SummaryWriter(const std::string& log_dir, SummaryWriterOptions options)
    : impl_(std::make_unique<Impl>()) {
  SINTER_CHECK(!log_dir.empty(), "SummaryWriter: the log folder is empty");
  SINTER_CHECK(options.max_queue > 0, "SummaryWriter: max_queue is 0");
  impl_->log_dir = log_dir;
  impl_->options = std::move(options);
  impl_->main = impl_->open_file(log_dir);
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

SummaryWriter::~SummaryWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "SummaryWriter: %s\n", e.what());
  }
}

const std::string& SummaryWriter::log_dir() const { return impl_->log_dir; }
std::string SummaryWriter::file_path() const { return impl_->main->path; }

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  const double wall = now_seconds();
  impl_->push("add_scalar", impl_->main, [tag = check_tag("add_scalar", tag), value, step, wall] {
    ProtoWriter v;
    v.bytes(1, tag).float32(2, static_cast<float>(value));
    return event_bytes(wall, step, v);
  });
}

void SummaryWriter::add_scalars(const std::string& main_tag,
                                const std::map<std::string, double>& values, int64_t step) {
  check_tag("add_scalars", main_tag);
  const double wall = now_seconds();
  std::string folder_tag = main_tag;
  std::replace(folder_tag.begin(), folder_tag.end(), '/', '_');
  for (const auto& [key, value] : values) {
    SINTER_CHECK(!key.empty() && key.find('/') == std::string::npos,
                 "SummaryWriter::add_scalars: '", main_tag, "' has the key '", key,
                 "', which is no folder name");
    Impl::File* file = impl_->subfolder("add_scalars", folder_tag + "_" + key);
    impl_->push("add_scalars", file, [main_tag, value = value, step, wall] {
      ProtoWriter v;
      v.bytes(1, main_tag).float32(2, static_cast<float>(value));
      return event_bytes(wall, step, v);
    });
  }
}

void SummaryWriter::add_histogram(const std::string& tag, const Tensor& values, int64_t step) {
  check_tag("add_histogram", tag);
  SINTER_CHECK(values.defined(), "SummaryWriter::add_histogram: '", tag,
               "' is an undefined tensor");
  SINTER_CHECK(values.numel() > 0, "SummaryWriter::add_histogram: '", tag,
               "' has no elements (shape ", shape_str(values.shape()), ")");
  const double wall = now_seconds();
  std::vector<double> v = values.detach().cpu().to_vector<double>();
  int64_t nan = 0, inf = 0;
  for (const double x : v) {
    nan += std::isnan(x) ? 1 : 0;
    inf += std::isinf(x) ? 1 : 0;
  }
  SINTER_CHECK(nan == 0 && inf == 0, "SummaryWriter::add_histogram: '", tag, "' holds ", nan,
               " NaN and ", inf, " infinite values of ", v.size(),
               " (a histogram needs finite values)");
  impl_->push("add_histogram", impl_->main, [tag, v = std::move(v), step, wall] {
    const summary::Histogram h = summary::make_histogram(v);
    ProtoWriter histo;
    histo.float64(1, h.min).float64(2, h.max).float64(3, h.num).float64(4, h.sum);
    histo.float64(5, h.sum_squares).packed_float64(6, h.limits).packed_float64(7, h.counts);
    ProtoWriter value;
    value.bytes(1, tag).message(5, histo);
    return event_bytes(wall, step, value);
  });
}

void SummaryWriter::add_image(const std::string& tag, const Tensor& image, int64_t step,
                              ImageLayout layout) {
  check_tag("add_image", tag);
  SINTER_CHECK(image.defined(), "SummaryWriter::add_image: '", tag, "' is an undefined tensor");
  const char* name = layout == ImageLayout::CHW ? "CHW" : layout == ImageLayout::HWC ? "HWC" : "HW";
  const int64_t rank = layout == ImageLayout::HW ? 2 : 3;
  SINTER_CHECK(image.dim() == rank, "SummaryWriter::add_image: '", tag, "' has shape ",
               shape_str(image.shape()), "; the layout ", name, " takes ", rank, " dimensions");
  SINTER_CHECK(is_floating(image.dtype()) || image.dtype() == DType::u8,
               "SummaryWriter::add_image: '", tag, "' is ", dtype_name(image.dtype()),
               "; an image is floating-point in [0, 1] or u8");
  // As (H, W, C) on the host.
  Tensor hwc = layout == ImageLayout::CHW  ? image.permute({1, 2, 0})
               : layout == ImageLayout::HW ? image.unsqueeze(2)
                                           : image;
  const int64_t h = hwc.size(0), w = hwc.size(1), c = hwc.size(2);
  SINTER_CHECK(c == 1 || c == 3 || c == 4, "SummaryWriter::add_image: '", tag, "' has ", c,
               " channels (shape ", shape_str(image.shape()), ", layout ", name,
               "); an image has 1, 3 or 4");
  SINTER_CHECK(h > 0 && w > 0 && h < (1 << 24) && w < (1 << 24), "SummaryWriter::add_image: '", tag,
               "' is ", h, "x", w, " pixels");
  SINTER_CHECK(
      summary::png_supported(), "SummaryWriter::add_image: '", tag,
      "': this Sinter was built without libpng (apt-get install libpng-dev, then rebuild)");
  const double wall = now_seconds();
  std::vector<uint8_t> pixels;
  if (image.dtype() == DType::u8) {
    pixels = hwc.detach().cpu().contiguous().to_vector<uint8_t>();
  } else {
    const std::vector<float> f = hwc.detach().cpu().to(DType::f32).contiguous().to_vector<float>();
    pixels.resize(f.size());
    for (size_t i = 0; i < f.size(); ++i) {
      const float s = std::isnan(f[i]) ? 0.0F : std::clamp(f[i] * 255.0F, 0.0F, 255.0F);
      pixels[i] = static_cast<uint8_t>(s);
    }
  }
  impl_->push("add_image", impl_->main, [tag, pixels = std::move(pixels), h, w, c, step, wall] {
    ProtoWriter img;
    img.varint(1, static_cast<uint64_t>(h)).varint(2, static_cast<uint64_t>(w));
    img.varint(3, static_cast<uint64_t>(c)).bytes(4, summary::encode_png(pixels, h, w, c));
    ProtoWriter value;
    value.bytes(1, tag).message(4, img);
    return event_bytes(wall, step, value);
  });
}

void SummaryWriter::add_text(const std::string& tag, const std::string& text, int64_t step) {
  check_tag("add_text", tag);
  const double wall = now_seconds();
  impl_->push("add_text", impl_->main, [tag, text, step, wall] {
    ProtoWriter dim;
    dim.int64(1, 1);
    ProtoWriter shape;
    shape.message(2, dim);
    ProtoWriter tensor;
    tensor.varint(1, 7).message(2, shape).bytes(8, text);  // DT_STRING, shape [1]
    ProtoWriter value;
    value.bytes(1, tag + "/text_summary")
        .message(9, plugin_metadata("text", ""))
        .message(8, tensor);
    return event_bytes(wall, step, value);
  });
}

void SummaryWriter::add_hparams(const std::map<std::string, HParamValue>& hparams,
                                const std::map<std::string, double>& metrics,
                                const std::string& run_name) {
  SINTER_CHECK(!hparams.empty(), "SummaryWriter::add_hparams: no hyperparameters");
  for (const auto& [name, value] : metrics) check_tag("add_hparams", name);
  const double wall = now_seconds();
  const std::string run =
      run_name.empty() ? std::to_string(static_cast<long long>(wall * 1e3) / 1000.0) : run_name;
  SINTER_CHECK(run.find("..") == std::string::npos && run.front() != '/',
               "SummaryWriter::add_hparams: the run name '", run, "' leaves the log folder");
  Impl::File* file = impl_->subfolder("add_hparams", run);
  // HParamsPluginData: version 1 (0), experiment 2, session_start_info 3, session_end_info 4.
  auto summary = [wall](const std::string& tag, int field, const ProtoWriter& data) {
    ProtoWriter content;
    content.varint(1, 0).message(field, data);
    ProtoWriter value;
    value.bytes(1, tag).message(9, plugin_metadata("hparams", content.str()));
    return event_bytes(wall, 0, value);
  };
  impl_->push("add_hparams", file, [=] {
    ProtoWriter experiment;
    for (const auto& [name, value] : hparams) {
      ProtoWriter info;
      info.bytes(1, name).varint(4, static_cast<uint64_t>(hparam_type(value)));
      experiment.message(4, info);
    }
    for (const auto& [name, value] : metrics) {
      ProtoWriter metric_name;
      metric_name.bytes(2, name);
      ProtoWriter info;
      info.message(1, metric_name);
      experiment.message(5, info);
    }
    return summary("_hparams_/experiment", 2, experiment);
  });
  impl_->push("add_hparams", file, [=] {
    ProtoWriter start;
    for (const auto& [name, value] : hparams) {
      ProtoWriter entry;
      entry.bytes(1, name).message(2, hparam_value(value));
      start.message(1, entry);
    }
    start.float64(5, wall);
    return summary("_hparams_/session_start_info", 3, start);
  });
  impl_->push("add_hparams", file, [=] {
    ProtoWriter end;
    end.varint(1, 1).float64(2, wall);  // STATUS_SUCCESS
    return summary("_hparams_/session_end_info", 4, end);
  });
  for (const auto& [name, value] : metrics) {
    impl_->push("add_hparams", file, [name, value = value, wall] {
      ProtoWriter v;
      v.bytes(1, name).float32(2, static_cast<float>(value));
      return event_bytes(wall, 0, v);
    });
  }
}

void SummaryWriter::flush() {
  std::unique_lock lk(impl_->mu);
  impl_->throw_if_failed_locked("flush");
  const uint64_t target = impl_->queued;
  impl_->done_cv.wait(lk, [&] { return impl_->done >= target; });
  impl_->throw_if_failed_locked("flush");
}

void SummaryWriter::close() {
  {
    std::lock_guard lk(impl_->mu);
    if (impl_->closed) return;
    impl_->stopping = true;
    impl_->work.notify_one();
  }
  if (impl_->thread.joinable()) impl_->thread.join();
  std::lock_guard lk(impl_->mu);
  std::string err;
  for (auto& f : impl_->files) {
    if (f->fd >= 0 && ::close(f->fd) != 0 && err.empty()) {
      err = "cannot close '" + f->path + "': " + std::strerror(errno);
    }
    f->fd = -1;
  }
  impl_->closed = true;
  if (impl_->error.empty()) impl_->error = err;
  SINTER_CHECK(impl_->error.empty(), "SummaryWriter::close: writing under '", impl_->log_dir,
               "' failed: ", impl_->error);
}

Tensor make_grid(const Tensor& images, int64_t nrow, int64_t padding, double pad_value) {
  SINTER_CHECK(images.defined() && images.dim() == 4,
               "make_grid: images of shape (N, C, H, W), got ",
               images.defined() ? shape_str(images.shape()) : std::string("an undefined tensor"));
  SINTER_CHECK(nrow > 0 && padding >= 0, "make_grid: nrow ", nrow, " and padding ", padding,
               " (nrow > 0, padding >= 0)");
  const int64_t n = images.size(0), c = images.size(1), h = images.size(2), w = images.size(3);
  SINTER_CHECK(n > 0, "make_grid: no images (shape ", shape_str(images.shape()), ")");
  const int64_t cols = std::min(nrow, n), rows = (n + cols - 1) / cols;
  const int64_t cell_h = h + padding, cell_w = w + padding;
  Tensor grid = full({c, rows * cell_h + padding, cols * cell_w + padding}, pad_value,
                     {.dtype = images.dtype(), .device = images.device()});
  const Tensor src = images.detach();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t y = (i / cols) * cell_h + padding, x = (i % cols) * cell_w + padding;
    grid.narrow(1, y, h).narrow(2, x, w).copy_(src.select(0, i));
  }
  return grid;
}

// Note [run folders]
// A run's folder is named when it starts, as PyTorch's SummaryWriter names its default
// "runs/<Mon><DD>_<HH>-<MM>-<SS>_<host><comment>", so that runs sort by start and say where they
// ran; another run into the same root never shares a folder, whose events would interleave with
// this one's in TensorBoard (a curve zigzagging back over itself). create_directory is the claim:
// of two processes that start in the same second, one makes the name and the other, finding it
// there, goes on to "_2", "_3", ....
std::string make_run_dir(const std::string& root, const std::string& comment, std::time_t start) {
  SINTER_CHECK(!root.empty(), "make_run_dir: the log folder is empty");
  SINTER_CHECK(comment.find('/') == std::string::npos, "make_run_dir: the comment '", comment,
               "' holds a '/'");
  make_folder("make_run_dir", root);
  std::tm local{};
  localtime_r(&start, &local);
  char when[32];
  std::strftime(when, sizeof when, "%b%d_%H-%M-%S", &local);
  const std::string name =
      std::string(when) + "_" + host_name() + (comment.empty() ? "" : "_" + comment);
  for (int k = 1;; ++k) {
    const std::filesystem::path dir =
        std::filesystem::path(root) / (k == 1 ? name : name + "_" + std::to_string(k));
    std::error_code ec;
    if (std::filesystem::create_directory(dir, ec)) return dir.string();
    SINTER_CHECK(!ec, "make_run_dir: cannot create '", dir.string(), "': ", ec.message());
  }
}

}  // namespace sinter

// TensorBoard logging: SummaryWriter writes the event files that TensorBoard reads (scalars,
// histograms, images, text, hyperparameters), as torch.utils.tensorboard.SummaryWriter does, from a
// background thread so that logging does not stall a training step.
#pragma once

#include <cstdint>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "sinter/core/noncopyable.h"
#include "sinter/tensor.h"

namespace sinter {

struct SummaryWriterOptions {
  // Summaries waiting for the writer thread; a call that finds the queue full waits for room.
  size_t max_queue = 1024;
  // Appended to the event file's name (as PyTorch's filename_suffix).
  std::string filename_suffix = "";
};

// How an image tensor's dimensions are laid out: channels first or last, or one channel (HW).
enum class ImageLayout { CHW, HWC, HW };

// A hyperparameter's value in add_hparams: a number, a string or a flag (the HParams plugin's
// three types).
using HParamValue = std::variant<double, std::string, bool>;

// Writes TensorBoard event files under `log_dir` (created, with its parents, if missing): one file
// "events.out.tfevents.<seconds>.<host>.<pid>.<n><suffix>" per writer, and one per subfolder that
// add_scalars and add_hparams write, as PyTorch lays them out (Note [event files] in
// src/summary/summary_writer.cpp). Every add_* call captures its values and wall time, then
// returns; a writer thread encodes and appends them. A file always holds whole records up to its
// last write, so TensorBoard can read it while training runs. An error of the writer thread (a full
// disk) becomes a sinter::Error at the next call, flush() or close().
class SummaryWriter : NonCopyable {
 public:
  explicit SummaryWriter(const std::string& log_dir, SummaryWriterOptions options = {});
  ~SummaryWriter();  // close(); an error is printed to stderr, never thrown

  // A number at `step` (stored as a 32-bit float, as TensorBoard's scalars are; NaN and inf are
  // written as they are, and TensorBoard shows them).
  void add_scalar(const std::string& tag, double value, int64_t step);
  // Several numbers at `step` on one chart: each goes to "<log_dir>/<main_tag>_<key>" under the tag
  // `main_tag`, so TensorBoard draws them as runs of one chart.
  void add_scalars(const std::string& main_tag, const std::map<std::string, double>& values,
                   int64_t step);
  // The distribution of `values` (any shape, dtype and device) in TensorBoard's default buckets:
  // exponentially spaced limits +-1e-12 * 1.1^k up to 1e20, with runs of empty buckets merged.
  // Every element must be finite: NaN or inf is an Error naming the tag and how many there are.
  void add_histogram(const std::string& tag, const Tensor& values, int64_t step);
  // An image, PNG-encoded: floating-point values in [0, 1] (scaled by 255, clipped and truncated
  // as PyTorch does; NaN becomes 0) or uint8 values. 1, 3 or 4 channels: gray, RGB or RGBA (PyTorch
  // repeats one channel to RGB; the gray PNG shows the same picture, a third the size).
  void add_image(const std::string& tag, const Tensor& image, int64_t step,
                 ImageLayout layout = ImageLayout::CHW);
  // Text, rendered as Markdown by TensorBoard's text plugin.
  void add_text(const std::string& tag, const std::string& text, int64_t step);
  // One run of the HParams dashboard: its hyperparameters and its final metrics, written to
  // "<log_dir>/<run_name>" (the current time in seconds when empty), the metrics as scalars at
  // step 0 there too, so that runs compare in the plugin's table.
  void add_hparams(const std::map<std::string, HParamValue>& hparams,
                   const std::map<std::string, double>& metrics, const std::string& run_name = "");

  // Returns when everything added so far is in the files (handed to the operating system).
  void flush();
  // Flushes, stops the writer thread and closes the files; later calls are an Error. Idempotent.
  void close();

  const std::string& log_dir() const;
  // The main event file's path.
  std::string file_path() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A new folder for one run under `root` (made, with `root`, if missing), for a SummaryWriter:
// "<Mon><DD>_<HH>-<MM>-<SS>_<host>" from the local time `start`, then "_<comment>" unless the
// comment is empty ("Dec04_20-51-07_myhost_llama"), and "_2", "_3", ... when a run that started in
// the same second has the name already. This call makes the folder, so that no two runs share one
// (Note [run folders] in src/summary/summary_writer.cpp).
std::string make_run_dir(const std::string& root, const std::string& comment = "",
                         std::time_t start = std::time(nullptr));

// Tiles `images` (N, C, H, W) into one (C, H', W') image with `nrow` images per row and `padding`
// pixels of `pad_value` around each, as torchvision.utils.make_grid does (for add_image), except
// that one channel stays one (torchvision repeats it to three).
Tensor make_grid(const Tensor& images, int64_t nrow = 8, int64_t padding = 2,
                 double pad_value = 0.0);

}  // namespace sinter

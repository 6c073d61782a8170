// sinter.profiler (the op profiler: tables, Chrome traces, schedules, named ranges) and
// sinter.quantization (post-training int8: prepare, calibrate, convert) from Python.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bind.h"

namespace sinter::python {
namespace {

// What a Guard recorded, kept after the Guard ends (the Python profiler's results outlive its
// with-block, as torch's do): the events, the table and the Chrome trace as text.
struct ProfileResult {
  std::vector<profiler::Event> events;
  std::string table;
  std::string trace;
  int64_t peak_saved_bytes = 0;
};

ProfileResult snapshot(const profiler::Guard& g) {
  ProfileResult r{g.events(), g.table(), "", g.peak_saved_bytes()};
  char path[] = "/tmp/sinter-trace-XXXXXX";
  const int fd = mkstemp(path);
  SINTER_CHECK(fd >= 0, "profiler: cannot make a temporary file for the trace");
  close(fd);
  g.write_chrome_trace(path);
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  r.trace = text.str();
  std::remove(path);
  return r;
}

// A Guard as the Python profiler holds it: made at __enter__, snapshotted and ended at __exit__;
// with a schedule, on_trace_ready gets a snapshot of each cycle.
class PyProfiler {
 public:
  PyProfiler(std::optional<profiler::Schedule> schedule, nb::object on_trace_ready)
      : schedule_(schedule), callback_(std::move(on_trace_ready)) {}
  void start() {
    if (!schedule_) {
      guard_ = std::make_unique<profiler::Guard>();
      return;
    }
    nb::object cb = callback_;
    guard_ = std::make_unique<profiler::Guard>(*schedule_, [cb](const profiler::Guard& g) {
      if (!cb.is_none()) cb(snapshot(g));
    });
  }
  ProfileResult stop() {
    SINTER_CHECK(guard_ != nullptr, "profiler: stop() without start()");
    ProfileResult r = snapshot(*guard_);
    guard_.reset();
    return r;
  }
  void step() {
    SINTER_CHECK(guard_ != nullptr, "profiler: step() outside the profiler's with-block");
    guard_->step();
  }

 private:
  std::optional<profiler::Schedule> schedule_;
  nb::object callback_;
  std::unique_ptr<profiler::Guard> guard_;
};

// A named range held across a Python with-block.
class PyRange {
 public:
  explicit PyRange(std::string name) : name_(std::move(name)) {}
  void enter() { range_ = std::make_unique<profiler::Range>(name_.c_str()); }
  void exit() { range_.reset(); }

 private:
  std::string name_;  // outlives the range, which keeps its pointer
  std::unique_ptr<profiler::Range> range_;
};

void bind_profiler(nb::module_& m) {
  using profiler::Event;
  nb::class_<Event>(m, "Event", "One recorded op (times in host nanoseconds from the start).")
      .def_ro("name", &Event::name)
      .def_ro("shapes", &Event::shapes)
      .def_ro("start_ns", &Event::start_ns)
      .def_ro("end_ns", &Event::end_ns)
      .def_ro("self_ns", &Event::self_ns)
      .def_ro("device_ms", &Event::device_ms)
      .def_ro("bytes_allocated", &Event::bytes_allocated)
      .def_ro("depth", &Event::depth)
      .def_ro("thread_name", &Event::thread_name)
      .def_ro("backward", &Event::backward)
      .def("__repr__", [](const Event& e) {
        return "Event(name='" + e.name + "', shapes='" + e.shapes +
               "', self_us=" + std::to_string(e.self_ns / 1000) + ")";
      });
  nb::class_<ProfileResult>(m, "_Result")
      .def_ro("events", &ProfileResult::events)
      .def_ro("table", &ProfileResult::table)
      .def_ro("trace", &ProfileResult::trace)
      .def_ro("peak_saved_bytes", &ProfileResult::peak_saved_bytes);
  nb::class_<PyProfiler>(m, "_Profiler")
      .def(
          "__init__",
          [](PyProfiler* self, std::optional<std::vector<int64_t>> schedule, nb::object cb) {
            std::optional<profiler::Schedule> s;
            if (schedule) {
              SINTER_CHECK(schedule->size() == 5, "profiler: a schedule has 5 numbers");
              s = profiler::Schedule{.skip_first = (*schedule)[0],
                                     .wait = (*schedule)[1],
                                     .warmup = (*schedule)[2],
                                     .active = (*schedule)[3],
                                     .repeat = (*schedule)[4]};
            }
            new (self) PyProfiler(s, std::move(cb));
          },
          nb::arg("schedule").none(), nb::arg("on_trace_ready").none())
      .def("start", &PyProfiler::start)
      .def("stop", &PyProfiler::stop)
      .def("step", &PyProfiler::step);
  nb::class_<PyRange>(m, "_Range")
      .def(nb::init<std::string>(), nb::arg("name"))
      .def("enter", &PyRange::enter)
      .def("exit", &PyRange::exit);
}

void bind_quantization(nb::module_& m) {
  auto options = [](const std::string& calibrator, double percentile) {
    return quant::QuantizeOptions{.calibrator = quant::calibrator_from_name(calibrator),
                                  .percentile = percentile};
  };
  m.def(
      "prepare", [](const nn::Module& model) { return quant::prepare(model); }, nb::arg("model"),
      "The fused copy of a model whose Linear and Conv2d layers record their inputs (eval mode).");
  m.def(
      "convert",
      [options](std::shared_ptr<nn::Module> prepared, const std::string& calibrator,
                double percentile) {
        quant::convert(*prepared, options(calibrator, percentile));
        return prepared;
      },
      nb::arg("model"), nb::arg("calibrator") = "percentile", nb::arg("percentile") = 99.99,
      "Sets each recording layer's scales from what it saw: the model is then int8.");
  m.def("model_bytes", &quant::model_bytes, nb::arg("model"));
  m.def("int8_isa", &quant::int8_isa);
}

// The guard behind sinter.fp8.autocast, entered and left by the Python context manager.
class Fp8Guard {
 public:
  Fp8Guard(const fp8::Recipe& recipe, bool enabled) : recipe_(recipe), enabled_(enabled) {}
  Fp8Guard(const Fp8Guard&) = delete;
  Fp8Guard& operator=(const Fp8Guard&) = delete;
  // A stack: the same context may be entered again inside itself.
  void enter() { guards_.push_back(std::make_unique<fp8::Autocast>(recipe_, enabled_)); }
  void exit() {
    if (!guards_.empty()) guards_.pop_back();
  }

 private:
  fp8::Recipe recipe_;
  bool enabled_;
  std::vector<std::unique_ptr<fp8::Autocast>> guards_;
};

// sinter.fp8: FP8 training of Linear layers (Note [fp8 training]), with Transformer Engine's
// names: a recipe, fp8.autocast(enabled, fp8_recipe) and prepare(model).
void bind_fp8(nb::module_& m) {
  nb::class_<fp8::Recipe>(m, "Recipe", "How FP8 tensors are scaled: current, delayed or block.")
      .def(
          "__init__",
          [](fp8::Recipe* self, const std::string& scaling, int64_t amax_history_len, int margin,
             int64_t block) {
            new (self) fp8::Recipe{.scaling = fp8::parse_scaling(scaling, "fp8.Recipe"),
                                   .amax_history_len = amax_history_len,
                                   .margin = margin,
                                   .block = block};
            fp8::check_recipe(*self);
          },
          nb::arg("scaling") = "current", nb::arg("amax_history_len") = 16, nb::arg("margin") = 0,
          nb::arg("block") = 128)
      .def_prop_ro("scaling", [](const fp8::Recipe& r) { return fp8::scaling_name(r.scaling); })
      .def_ro("amax_history_len", &fp8::Recipe::amax_history_len)
      .def_ro("margin", &fp8::Recipe::margin)
      .def_ro("block", &fp8::Recipe::block);
  nb::class_<Fp8Guard>(m, "_Guard")
      .def(nb::init<const fp8::Recipe&, bool>(), nb::arg("recipe"), nb::arg("enabled"))
      .def("enter", &Fp8Guard::enter)
      .def("exit", &Fp8Guard::exit);
  m.def(
      "prepare",
      [](nn::Module& model, const fp8::Recipe& recipe) { return fp8::prepare(model, recipe); },
      nb::arg("model"), nb::arg("recipe"),
      "Marks the model's Linear layers but the first and last for FP8 (with the delayed recipe's "
      "state as buffers); returns their names.");
  m.def("is_enabled", &fp8::is_enabled);
}

}  // namespace

void bind_tools(nb::module_& root) {
  nb::module_ prof = root.def_submodule("profiler", "The op profiler.");
  bind_profiler(prof);
  nb::module_ q = root.def_submodule("quantization", "Post-training int8 quantization.");
  bind_quantization(q);
  nb::module_ f8 = root.def_submodule("fp8", "FP8 training of Linear layers.");
  bind_fp8(f8);
}

}  // namespace sinter::python

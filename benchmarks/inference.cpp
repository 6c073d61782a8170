// bench_inference: the reference models' inference on the CPU, Sinter against ONNX Runtime on the
// same exported models in the same run: latency at batch 1 and throughput at batch 256, for the
// mlp, cnn and resnet20 in f32 (Sinter: the model fused for inference, Note [inference fusion];
// ONNX Runtime: the f32 export, which it fuses itself) and in int8 (the model quantized with
// quant::quantize, Note [int8 quantization]; ONNX Runtime: its QDQ export). Both use the same
// thread count. Sinter's medians go to <out>/sinter_inference.json, ONNX Runtime's (from
// benchmarks/onnxruntime_reference.py) to <out>/onnxruntime_inference.json, and compare.py
// --inference prints the table of ratios.
//
// --rounds N runs both N times, one model at a time (Sinter's rows of a model, then ONNX Runtime's
// of it), into <out>/sinter_inference.roundR.json and onnxruntime_inference.roundR.json, and the
// table gives each row's median ratio over the rounds with its range: the speed of a shared
// machine drifts by more than the rows' margins within a minute, so each ratio is taken between
// runs a few seconds apart.
//
//   bench_inference [--out DIR] [--threads N] [--models mlp,cnn,resnet20] [--rounds N] [--smoke]
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "sinter/sinter.h"

namespace st = sinter;
namespace fs = std::filesystem;

namespace {

struct Options {
  std::string out = "bench_inference_out";
  int threads = 0;  // 0: Sinter's default
  std::vector<std::string> models = {"mlp", "cnn", "resnet20"};
  int rounds = 1;
  bool smoke = false;  // one repetition of each, tiny batches: a check that everything runs
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw st::Error("bench_inference: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--out") {
      o.out = value();
    } else if (a == "--threads") {
      o.threads = std::stoi(value());
      if (o.threads < 1) throw st::Error("bench_inference: --threads must be at least 1");
    } else if (a == "--models") {
      o.models = split(value());
      for (const std::string& m : o.models) {
        if (m != "mlp" && m != "cnn" && m != "resnet20") {
          throw st::Error("bench_inference: unknown model " + m + " (mlp, cnn, resnet20)");
        }
      }
    } else if (a == "--rounds") {
      o.rounds = std::stoi(value());
      if (o.rounds < 1) throw st::Error("bench_inference: --rounds must be at least 1");
    } else if (a == "--smoke") {
      o.smoke = true;
    } else {
      throw st::Error("bench_inference: unknown argument " + a +
                      " (--out DIR, --threads N, --models LIST, --rounds N, --smoke)");
    }
  }
  return o;
}

st::nn::Sequential make_model(const std::string& name) {
  if (name == "mlp") return st::nn::models::mlp();
  if (name == "cnn") return st::nn::models::cnn();
  return st::nn::models::resnet20(1);
}

st::Shape input_shape(const std::string& model, int64_t batch) {
  const int64_t side = model == "resnet20" ? 32 : 28;
  return {batch, 1, side, side};
}

// The median milliseconds of `reps` calls of f, after two warm-up calls.
double median_ms(int reps, const std::function<void()>& f) {
  f();
  f();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int run_command(const std::string& command) {
  std::fflush(stdout);
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A model built, fused for inference and quantized, and exported for ONNX Runtime (where the
// build has ONNX).
struct Prepared {
  std::string name;
  st::nn::Sequential model;
  std::shared_ptr<st::nn::Module> fused, int8;
};

Prepared prepare(const std::string& name, const std::string& out) {
  st::manual_seed(0);
  Prepared p{name, make_model(name), nullptr, nullptr};
  p.model.eval();
  p.fused = st::nn::fuse_for_inference(p.model);
  p.int8 =
      st::quant::quantize(p.model, 4, [&](int64_t) { return st::randn(input_shape(name, 64)); });
  const st::Tensor example = st::randn(input_shape(name, 1));
  if (st::onnx::is_available()) {
    st::onnx::export_model(p.model, example, (fs::path(out) / (name + ".f32.onnx")).string());
    st::onnx::export_model(*p.int8, example, (fs::path(out) / (name + ".int8.onnx")).string());
  }
  return p;
}

// Times a model's rows (f32 and int8 at each batch), printing each and adding its JSON object to
// rows.
void time_model(const Prepared& p, const std::vector<int64_t>& batches, bool smoke,
                std::vector<std::string>& rows) {
  for (const auto& [precision, m] :
       {std::pair<const char*, st::nn::Module*>{"f32", p.fused.get()}, {"int8", p.int8.get()}}) {
    for (const int64_t batch : batches) {
      const st::Tensor x = st::randn(input_shape(p.name, batch));
      const int reps = smoke ? 1 : (batch == 1 ? 200 : 10);
      const double ms = median_ms(reps, [&] {
        st::InferenceMode inference;
        (void)m->forward(x);
      });
      // Which path the model took: its inference plan, or module by module (the int8 layers on
      // their own GEMM's instruction set).
      const bool planned = st::nn::inference_plans_made(*m) > 0;
      const std::string path = planned ? std::string("plan")
                               : m == p.fused.get()
                                   ? std::string("modules")
                                   : "modules, int8 " + std::string(st::quant::int8_isa());
      std::printf("%-9s %-5s batch %4lld: %9.3f ms (%.0f images/s) [%s]\n", p.name.c_str(),
                  precision, static_cast<long long>(batch), ms,
                  1000.0 * static_cast<double>(batch) / ms, path.c_str());
      std::ostringstream row;
      row << "{\"model\": \"" << p.name << "\", \"precision\": \"" << precision
          << "\", \"batch\": " << batch << ", \"ms\": " << ms << "}";
      rows.push_back(row.str());
    }
  }
}

// text into path through a temporary file and a rename, so that a reader never sees half of it.
void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f) throw st::Error("bench_inference: cannot write " + tmp);
  }
  fs::rename(tmp, path);
}

// One round's JSON files: Sinter's, ONNX Runtime's.
struct Round {
  std::string sinter_json, ort_json;
};

int run(const Options& o) {
  if (o.threads > 0) st::set_num_threads(o.threads);
  const int threads = st::get_num_threads();
  fs::create_directories(o.out);
  const std::vector<int64_t> batches =
      o.smoke ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1, 256};
  const std::string cpu = st::cpu_description();
  std::printf("CPU: %s, %d threads; int8 GEMM kernel: %s; oneDNN %s\n", cpu.c_str(), threads,
              st::quant::int8_isa(), st::onednn_enabled() ? "on" : "off");
  std::vector<Prepared> models;
  for (const std::string& name : o.models) models.push_back(prepare(name, o.out));
  std::string batch_list;
  for (const int64_t b : batches) {
    if (!batch_list.empty()) batch_list += ',';
    batch_list += std::to_string(b);
  }
  const std::string bench_dir = std::string(SINTER_SOURCE_DIR) + "/benchmarks";
  // ONNX Runtime runs where the build exported the models and the package is installed (the
  // script exits 77 without it).
  bool ort = st::onnx::is_available();
  if (!ort) std::printf("onnxruntime: skipped (Sinter was built without ONNX: nothing exported)\n");
  std::vector<Round> rounds;
  for (int r = 0; r < o.rounds; ++r) {
    const std::string suffix = o.rounds > 1 ? ".round" + std::to_string(r + 1) : "";
    const Round round{(fs::path(o.out) / ("sinter_inference" + suffix + ".json")).string(),
                      (fs::path(o.out) / ("onnxruntime_inference" + suffix + ".json")).string()};
    if (o.rounds > 1) std::printf("round %d of %d\n", r + 1, o.rounds);
    fs::remove(round.ort_json);  // ONNX Runtime's rows are appended model by model
    std::vector<std::string> rows;
    // Sinter's rows of the round, written also when ONNX Runtime fails part way.
    const auto write_sinter = [&] {
      std::string json = "{\"runtime\": \"sinter\", \"threads\": " + std::to_string(threads) +
                         ", \"cpu\": \"" + cpu + "\", \"int8_isa\": \"" + st::quant::int8_isa() +
                         "\", \"results\": [";
      for (size_t i = 0; i < rows.size(); ++i) json += (i ? ", " : "") + rows[i];
      write_atomically(round.sinter_json, json + "]}\n");
      std::printf("sinter: %s\n", round.sinter_json.c_str());
    };
    for (const Prepared& p : models) {
      time_model(p, batches, o.smoke, rows);
      if (!ort) continue;
      const int rc = run_command(
          "python3 '" + bench_dir + "/onnxruntime_reference.py' --dir '" + o.out + "' --models " +
          p.name + " --batches " + batch_list + " --threads " + std::to_string(threads) +
          (o.smoke ? " --smoke" : "") + " --append --out '" + round.ort_json + "'");
      if (rc == 77) {
        std::printf("onnxruntime: skipped (no onnxruntime package: pip install onnxruntime)\n");
        ort = false;
      } else if (rc != 0) {
        write_sinter();
        std::fprintf(stderr, "bench_inference: onnxruntime_reference.py exited %d\n", rc);
        return 1;
      }
    }
    write_sinter();
    rounds.push_back(round);
  }
  if (!ort) return 0;
  std::string files;
  for (const Round& r : rounds) files += " '" + r.sinter_json + "' '" + r.ort_json + "'";
  return run_command("python3 '" + bench_dir + "/compare.py' --inference" + files) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}

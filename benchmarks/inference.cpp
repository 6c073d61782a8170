// bench_inference: the reference models' inference on the CPU, Sinter against ONNX Runtime on the
// same exported models in the same run: latency at batch 1 and throughput at batch 256, for the
// mlp, cnn and resnet20 in f32 (Sinter: the model fused for inference, Note [inference fusion];
// ONNX Runtime: the f32 export, which it fuses itself) and in int8 (the model quantized with
// quant::quantize, Note [int8 quantization]; ONNX Runtime: its QDQ export). Both use the same
// thread count. Sinter's medians go to <out>/sinter_inference.json, ONNX Runtime's (from
// benchmarks/onnxruntime_reference.py) to <out>/onnxruntime_inference.json, and compare.py
// --inference prints the table of ratios.
//
//   bench_inference [--out DIR] [--threads N] [--models mlp,cnn,resnet20] [--smoke]
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
    } else if (a == "--smoke") {
      o.smoke = true;
    } else {
      throw st::Error("bench_inference: unknown argument " + a +
                      " (--out DIR, --threads N, --models LIST, --smoke)");
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

int run(const Options& o) {
  if (o.threads > 0) st::set_num_threads(o.threads);
  const int threads = st::get_num_threads();
  fs::create_directories(o.out);
  const std::vector<int64_t> batches =
      o.smoke ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1, 256};
  std::ostringstream json;
  const std::string cpu = st::cpu_description();
  std::printf("CPU: %s, %d threads; int8 GEMM kernel: %s; oneDNN %s\n", cpu.c_str(), threads,
              st::quant::int8_isa(), st::onednn_enabled() ? "on" : "off");
  json << "{\"runtime\": \"sinter\", \"threads\": " << threads << ", \"cpu\": \"" << cpu
       << "\", \"int8_isa\": \"" << st::quant::int8_isa() << "\", \"results\": [";
  bool first = true;
  for (const std::string& name : o.models) {
    st::manual_seed(0);
    st::nn::Sequential model = make_model(name);
    model.eval();
    const std::shared_ptr<st::nn::Module> fused = st::nn::fuse_for_inference(model);
    const std::shared_ptr<st::nn::Module> int8 =
        st::quant::quantize(model, 4, [&](int64_t) { return st::randn(input_shape(name, 64)); });
    const st::Tensor example = st::randn(input_shape(name, 1));
    if (st::onnx::is_available()) {
      st::onnx::export_model(model, example, (fs::path(o.out) / (name + ".f32.onnx")).string());
      st::onnx::export_model(*int8, example, (fs::path(o.out) / (name + ".int8.onnx")).string());
    }
    for (const auto& [precision, m] :
         {std::pair<const char*, st::nn::Module*>{"f32", fused.get()}, {"int8", int8.get()}}) {
      for (const int64_t batch : batches) {
        const st::Tensor x = st::randn(input_shape(name, batch));
        const int reps = o.smoke ? 1 : (batch == 1 ? 200 : 10);
        const double ms = median_ms(reps, [&] {
          st::InferenceMode inference;
          (void)m->forward(x);
        });
        // Which path the model took: its inference plan, or module by module (the int8 layers
        // on their own GEMM's instruction set).
        const bool planned = st::nn::inference_plans_made(*m) > 0;
        const std::string path = planned ? std::string("plan")
                                 : m == fused.get()
                                     ? std::string("modules")
                                     : "modules, int8 " + std::string(st::quant::int8_isa());
        std::printf("%-9s %-5s batch %4lld: %9.3f ms (%.0f images/s) [%s]\n", name.c_str(),
                    precision, static_cast<long long>(batch), ms,
                    1000.0 * static_cast<double>(batch) / ms, path.c_str());
        json << (first ? "" : ", ") << "{\"model\": \"" << name << "\", \"precision\": \""
             << precision << "\", \"batch\": " << batch << ", \"ms\": " << ms << "}";
        first = false;
      }
    }
  }
  json << "]}\n";
  const std::string sinter_json = (fs::path(o.out) / "sinter_inference.json").string();
  std::ofstream(sinter_json) << json.str();
  std::printf("sinter: %s\n", sinter_json.c_str());
  if (!st::onnx::is_available()) {
    std::printf("onnxruntime: skipped (Sinter was built without ONNX, so nothing was exported)\n");
    return 0;
  }
  std::string batch_list;
  for (const int64_t b : batches) {
    if (!batch_list.empty()) batch_list += ',';
    batch_list += std::to_string(b);
  }
  const std::string bench_dir = std::string(SINTER_SOURCE_DIR) + "/benchmarks";
  const std::string ort_json = (fs::path(o.out) / "onnxruntime_inference.json").string();
  std::string models;
  for (const std::string& m : o.models) models += (models.empty() ? "" : ",") + m;
  const int rc = run_command("python3 '" + bench_dir + "/onnxruntime_reference.py' --dir '" +
                             o.out + "' --models " + models + " --batches " + batch_list +
                             " --threads " + std::to_string(threads) + (o.smoke ? " --smoke" : "") +
                             " --out '" + ort_json + "'");
  if (rc == 77) {
    std::printf("onnxruntime: skipped (no onnxruntime package: pip install onnxruntime)\n");
    return 0;
  }
  if (rc != 0) {
    std::fprintf(stderr, "bench_inference: onnxruntime_reference.py exited %d\n", rc);
    return 1;
  }
  return run_command("python3 '" + bench_dir + "/compare.py' --inference '" + sinter_json + "' '" +
                     ort_json + "'") == 0
             ? 0
             : 1;
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

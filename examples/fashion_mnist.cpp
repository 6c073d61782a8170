// Trains the mlp, cnn or resnet20 reference model on Fashion-MNIST: a progress bar (plain lines
// when not on a terminal), a metrics CSV per epoch, test accuracy, checkpoints with resume, and a
// PNG plot.
//
//   fashion_mnist --model cnn --epochs 10 --device auto --save cnn.safetensors
//   fashion_mnist --model cnn --epochs 12 --resume cnn.safetensors   # two more epochs
//   mpirun -np 8 fashion_mnist --ddp --model cnn --epochs 10        # data parallel, 8 ranks
//   fashion_mnist --model cnn --amp bf16                             # mixed precision
//   fashion_mnist --model cnn --device cuda --cuda-graph             # steps replayed as a graph
//   fashion_mnist --model resnet20 --export-onnx resnet20.onnx       # images padded to 32x32
//   fashion_mnist --model cnn --quantize int8 --export-onnx cnn.int8.onnx  # + an int8 QDQ model
#include <sinter/data.h>
#include <sinter/dist.h>
#include <sinter/io.h>
#include <sinter/nn.h>
#include <sinter/nn/models.h>
#include <sinter/optim.h>
#include <sinter/sinter.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "training.h"

namespace st = sinter;
namespace fs = std::filesystem;
using namespace example;

namespace {

struct Args {
  std::string model = "cnn";
  int epochs = 10;
  int64_t batch_size = 128;
  double lr = 0.0;  // 0: the model's default
  std::string device = "auto";
  std::string data = st::data::FashionMNIST::kDebianRoot;
  uint64_t seed = 0;
  std::string save;
  std::string resume;
  std::string export_weights;
  std::string export_onnx;
  std::string profile;
  std::string profile_schedule = "2,1,5";
  std::string out = "fashion_mnist_out";
  int64_t limit_train = 0;  // 0: all 60000
  int64_t limit_test = 0;   // 0: all 10000
  double min_accuracy = 0.0;
  bool ddp = false;
  std::string amp = "off";
  bool cuda_graph = false;
  std::string quantize = "off";
  int64_t calibration_batches = 16;
  std::string calibrator = "percentile";
  std::string tensorboard;
  int64_t log_every = 10;
};

struct EvalResult {
  double loss = 0, accuracy = 0;
};

// The model's loss and accuracy on the loader's batches (moved to `on` where given: the int8
// model runs on the CPU), and each sample's predicted class in `predictions` where given.
EvalResult evaluate(st::nn::Module& model, st::data::DataLoader& loader,
                    std::optional<st::DType> amp, std::optional<st::Device> on = std::nullopt,
                    std::vector<int64_t>* predictions = nullptr) {
  st::InferenceMode inference;
  model.eval();
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  for (st::data::Batch b : loader) {
    if (on) {
      b.input = b.input.to(*on);
      b.target = b.target.to(*on);
    }
    st::Tensor logits;
    {
      const AmpScope scope(amp, b.input.device());
      logits = model(b.input);
    }
    const int64_t n = b.target.size(0);
    loss_sum +=
        st::cross_entropy(logits, b.target, {.reduction = st::Reduction::Sum}).item<double>();
    const st::Tensor predicted = st::argmax(logits, 1);
    correct += st::sum(st::eq(predicted, b.target)).item<int64_t>();
    if (predictions) {
      const std::vector<int64_t> p = predicted.to_vector<int64_t>();
      predictions->insert(predictions->end(), p.begin(), p.end());
    }
    seen += n;
  }
  model.train();
  return {loss_sum / static_cast<double>(seen),
          static_cast<double>(correct) / static_cast<double>(seen)};
}

// Where a run stands: epochs done, and in the next one (a run stopped by a signal, Note
// [preemption]) the batches done and the sums of its training figures so far over every rank
// (loss times samples, correct, samples).
struct Position {
  int epochs_done = 0;
  int64_t batches_done = 0;
  std::vector<double> sums{0.0, 0.0, 0.0};
};

void save_checkpoint(const std::string& path, const std::string& model_name, st::nn::Module& model,
                     const st::optim::Optimizer& opt, const st::optim::GradScaler& scaler,
                     const Position& at) {
  st::StateDict dict;
  st::add_prefixed(dict, "model", model.state_dict());
  st::add_prefixed(dict, "optimizer", opt.state_dict());
  if (scaler.is_enabled()) st::add_prefixed(dict, "scaler", scaler.state_dict());
  dict["meta.epochs_done"] = i64_scalar(at.epochs_done);
  if (at.batches_done > 0) {
    dict["meta.batches_done"] = i64_scalar(at.batches_done);
    dict["meta.epoch_sums"] = st::from_vector<double>(at.sums);
  }
  st::add_prefixed(dict, "meta", st::generator_state_dict());
  st::save(dict, path, {{"model", model_name}, {"sinter.format", "sinter-checkpoint-1"}});
}

// Returns where the checkpoint's run stood.
Position load_checkpoint(const std::string& path, const std::string& model_name,
                         st::nn::Module& model, st::optim::Optimizer& opt,
                         st::optim::GradScaler& scaler) {
  const st::Metadata meta = st::load_metadata(path);
  const auto it = meta.find("model");
  if (it == meta.end() || it->second != model_name) {
    throw st::Error("--resume: " + path + " holds a checkpoint of model '" +
                    (it == meta.end() ? std::string("?") : it->second) + "', not '" + model_name +
                    "'");
  }
  const st::StateDict dict = st::load(path);
  const st::StateDict model_state = st::sub_dict(dict, "model");
  const st::StateDict opt_state = st::sub_dict(dict, "optimizer");
  // Check the whole model before touching the optimizer, so a mismatch changes nothing.
  const st::StateDict scaler_state = st::sub_dict(dict, "scaler");
  model.load_state_dict(model_state);
  opt.load_state_dict(opt_state);
  if (scaler.is_enabled() && !scaler_state.empty()) scaler.load_state_dict(scaler_state);
  st::load_generator_state(st::sub_dict(dict, "meta"));
  Position at;
  at.epochs_done = static_cast<int>(dict.at("meta.epochs_done").item<int64_t>());
  if (dict.count("meta.batches_done")) {
    at.batches_done = dict.at("meta.batches_done").item<int64_t>();
    const st::Tensor& sums = dict.at("meta.epoch_sums");
    if (sums.numel() != 3) throw st::Error("--resume: " + path + ": meta.epoch_sums is not 3 sums");
    at.sums = sums.to(st::DType::f64).to_vector<double>();
  }
  return at;
}

// The first `limit` samples of a data set (all when limit is 0 or more than it holds).
std::shared_ptr<const st::data::TensorDataset> first_samples(
    std::shared_ptr<const st::data::TensorDataset> set, int64_t limit) {
  if (limit <= 0 || limit >= set->size()) return set;
  return std::make_shared<st::data::TensorDataset>(set->inputs().narrow(0, 0, limit).contiguous(),
                                                   set->targets().narrow(0, 0, limit).contiguous());
}

// ResNet-20 is built for 32x32 images: the 28x28 ones are centred on a 32x32 background of the
// value a black pixel has after normalization, as if the images had been 32x32 all along.
std::shared_ptr<const st::data::TensorDataset> pad_to_32(
    std::shared_ptr<const st::data::TensorDataset> set, const st::data::Normalization& norm) {
  const st::Tensor& x = set->inputs();
  const double black = (0.0 - norm.mean.at(0)) / norm.std.at(0);
  st::Tensor padded = st::full({x.size(0), x.size(1), 32, 32}, black, {.dtype = x.dtype()});
  padded.narrow(2, 2, 28).narrow(3, 2, 28).copy_(x);
  return std::make_shared<st::data::TensorDataset>(padded, set->targets());
}

st::nn::Sequential make_model(const std::string& name) {
  if (name == "mlp") return st::nn::models::mlp();
  if (name == "cnn") return st::nn::models::cnn();
  return st::nn::models::resnet20(1);
}

// Everything a run holds from its set-up to its finish. With --ddp every rank runs it on its shard
// of each batch; rank 0 alone prints, evaluates and writes files. Without it, the group stays null
// and this is one process.
struct Run {
  Args args;
  std::shared_ptr<st::dist::ProcessGroup> pg;
  int rank = 0, world = 1;
  bool main_rank = true;
  int64_t rank_batch = 0;  // this rank's share of --batch-size
  st::Device dev;
  std::optional<st::DType> amp;
  std::shared_ptr<const st::data::TensorDataset> train_set, test_set;
  std::unique_ptr<st::data::DataLoader> train_loader, test_loader;
  std::shared_ptr<st::nn::Sequential> model;
  std::unique_ptr<st::optim::Optimizer> opt;
  st::optim::GradScaler scaler{{.enabled = false}};
  std::unique_ptr<st::dist::DistributedDataParallel> ddp;
  int start_epoch = 0;
  Position resumed;    // where --resume's checkpoint stood (batches into start_epoch + 1)
  int stopped_by = 0;  // the signal that stopped the run early (Note [preemption])
  fs::path csv;
  std::ofstream metrics;
  TensorBoard tb;  // --tensorboard (Note [example tensorboard])
  ProfileScope profile;
};

// The optimizer each model trains with (--lr replaces its learning rate).
std::unique_ptr<st::optim::Optimizer> make_optimizer(const Args& args, st::nn::Module& model) {
  const double lr = args.lr;
  if (args.model == "mlp") {
    return std::make_unique<st::optim::SGD>(
        model.parameters(),
        st::optim::SGDOptions{
            .lr = lr > 0 ? lr : 0.01, .momentum = 0.9, .capturable = args.cuda_graph});
  }
  if (args.model == "resnet20") {
    return std::make_unique<st::optim::SGD>(model.parameters(),
                                            st::optim::SGDOptions{.lr = lr > 0 ? lr : 0.05,
                                                                  .momentum = 0.9,
                                                                  .weight_decay = 5e-4,
                                                                  .capturable = args.cuda_graph});
  }
  return std::make_unique<st::optim::Adam>(
      model.parameters(),
      st::optim::AdamOptions{.lr = lr > 0 ? lr : 1e-3, .capturable = args.cuda_graph});
}

// The training set (this rank's shard with --ddp) and, on rank 0, the test set, with their loaders.
void load_data(Run& r) {
  const Args& args = r.args;
  const st::data::Normalization norm = st::data::FashionMNIST::default_normalization();
  const bool padded = args.model == "resnet20";
  r.train_set = first_samples(std::make_shared<st::data::FashionMNIST>(args.data, true, norm),
                              args.limit_train);
  if (padded) r.train_set = pad_to_32(r.train_set, norm);
  st::data::DataLoaderOptions train_options{
      .batch_size = r.rank_batch, .shuffle = true, .seed = args.seed, .device = r.dev};
  if (r.pg) {
    // Each rank reads its own shard, reshuffled per epoch from the seed; the loader's epoch (which
    // --resume sets) is passed on to the sampler, as set_epoch.
    train_options.shuffle = false;
    train_options.sampler =
        [sampler = st::dist::DistributedSampler(r.train_set->size(), r.world, r.rank, true,
                                                args.seed)](int64_t epoch) mutable {
          sampler.set_epoch(epoch);
          return sampler.indices();
        };
  }
  r.train_loader = std::make_unique<st::data::DataLoader>(r.train_set, train_options);
  if (r.main_rank) {
    r.test_set = first_samples(std::make_shared<st::data::FashionMNIST>(args.data, false, norm),
                               args.limit_test);
    if (padded) r.test_set = pad_to_32(r.test_set, norm);
    r.test_loader = std::make_unique<st::data::DataLoader>(
        r.test_set, st::data::DataLoaderOptions{.batch_size = 1000, .device = r.dev});
  }
}

// The process group and device, the data, the model and its optimizer (from the checkpoint with
// --resume), the metrics file. Errors here are bad options (Note [exit statuses]).
std::unique_ptr<Run> set_up(const Args& args) {
  auto r = std::make_unique<Run>();
  r->args = args;
  if (args.ddp) r->pg = st::dist::ProcessGroup::init();
  r->rank = r->pg ? r->pg->rank() : 0;
  r->world = r->pg ? r->pg->size() : 1;
  r->main_rank = r->rank == 0;
  // --batch-size is the global batch: each rank takes its share, so the optimizer sees the same
  // batch size (and learning rate) as a single process would.
  if (args.batch_size < r->world) {
    throw st::Error("--batch-size " + std::to_string(args.batch_size) + " is smaller than the " +
                    std::to_string(r->world) + " ranks");
  }
  r->rank_batch = args.batch_size / r->world;

  st::manual_seed(args.seed);
  const bool want_cuda =
      args.device == "cuda" || (args.device == "auto" && st::cuda::is_available());
  // One GPU per rank: the group picks it, and says so when this rank has none.
  const int gpu = want_cuda && r->pg ? r->pg->cuda_device() : 0;
  r->dev = want_cuda ? st::Device::cuda(gpu) : st::Device::cpu();
  if (want_cuda) st::cuda::set_device(gpu);
  r->amp = amp_dtype(args.amp, r->dev);
  check_cuda_graph(args.cuda_graph, r->dev, r->amp);
  check_export_onnx(args.export_onnx);
  if (args.cuda_graph && r->pg) throw st::Error("--cuda-graph does not combine with --ddp yet");

  load_data(*r);
  r->model = std::make_shared<st::nn::Sequential>(make_model(args.model));
  r->model->to(r->dev);
  r->opt = make_optimizer(args, *r->model);
  r->scaler = amp_scaler(r->amp, r->pg);
  if (!args.resume.empty()) {
    // Every rank loads the checkpoint (its optimizer state too), so the file must be readable on
    // every node.
    r->resumed = load_checkpoint(args.resume, args.model, *r->model, *r->opt, r->scaler);
    r->start_epoch = r->resumed.epochs_done;
    if (r->main_rank && r->resumed.batches_done > 0) {
      std::printf("resumed from %s in epoch %d, after batch %lld\n", args.resume.c_str(),
                  r->start_epoch + 1, static_cast<long long>(r->resumed.batches_done));
    } else if (r->main_rank) {
      std::printf("resumed from %s after epoch %d\n", args.resume.c_str(), r->start_epoch);
    }
  }
  r->train_loader->set_epoch(r->start_epoch);
  // Built after loading: it broadcasts rank 0's parameters, and from then on averages gradients.
  if (r->pg) r->ddp = std::make_unique<st::dist::DistributedDataParallel>(r->model, r->pg);

  r->csv = fs::path(args.out) / "metrics.csv";
  if (r->main_rank) {
    make_out_folder(args.out);
    r->tb.open(args.tensorboard, args.model, args.log_every,
               r->start_epoch * r->train_loader->size() + r->resumed.batches_done);
    r->profile.open(args.profile, args.profile_schedule, r->tb.run_dir());
    const bool fresh_csv = r->start_epoch == 0 || !fs::exists(r->csv);
    r->metrics.open(r->csv, fresh_csv ? std::ios::trunc : std::ios::app);
    if (fresh_csv) {
      r->metrics << "epoch,train_loss,train_acc,test_loss,test_acc,seconds,gpu_util_percent,"
                    "gpu_memory_gib\n";
    }
    int64_t num_params = 0;
    for (const st::Tensor& p : r->model->parameters()) num_params += p.numel();
    std::printf("model %s on %s: %lld parameters, %lld training samples, batch %lld%s\n",
                args.model.c_str(), r->dev.str().c_str(), static_cast<long long>(num_params),
                static_cast<long long>(r->train_set->size()),
                static_cast<long long>(r->rank_batch * r->world),
                r->amp ? format(", autocast %s", st::dtype_name(*r->amp)).c_str() : "");
    if (r->pg) {
      std::printf("data parallel: %d ranks (%d on this node), %lld samples per rank per step\n",
                  r->world, r->pg->local_size(), static_cast<long long>(r->rank_batch));
    }
  }
  return r;
}

struct StepResult {
  st::Tensor logits, loss;
};

// One training step on a batch (x, y): the forward under autocast, the backward through the loss
// scaler, the optimizer's step. The eager path and the captured graph both run it.
StepResult train_step(Run& r, const st::Tensor& x, const st::Tensor& y) {
  r.opt->zero_grad();
  StepResult out;
  {
    const AmpScope scope(r.amp, r.dev);
    out.logits = r.ddp ? r.ddp->forward(x) : (*r.model)(x);
    out.loss = st::cross_entropy(out.logits, y);
  }
  r.scaler.scale(out.loss).backward();
  r.scaler.step(*r.opt);
  r.scaler.update();
  return out;
}

using Stepper = TrainStep<StepResult>;

struct TrainFigures {
  double loss = 0, accuracy = 0;
  // Set when a signal stopped the epoch (Note [preemption]): the batches done and the sums so far.
  std::optional<Position> stopped;
};

// One pass over the training set, with a progress bar on rank 0. Returns the loss and accuracy
// over every rank's shard. A resumed run's first epoch skips the batches its checkpoint had done
// and starts from their sums (held by rank 0: the ranks' sums are added at the end).
TrainFigures train_epoch(Run& r, Stepper& step, int epoch) {
  const int64_t batches = r.train_loader->size();
  const bool resuming = epoch == r.start_epoch + 1 && r.resumed.batches_done > 0;
  const int64_t skip = resuming ? r.resumed.batches_done : 0;
  const std::vector<double> start =
      resuming && r.main_rank ? r.resumed.sums : std::vector<double>{0.0, 0.0, 0.0};
  Progress progress(format("epoch %d/%d", epoch, r.args.epochs), batches, skip);
  // Running sums stay on the device; they are read once per progress update.
  st::Tensor loss_sum = st::full({}, start[0], {.device = r.dev});
  st::Tensor correct = st::full({}, start[1], {.dtype = st::DType::i64, .device = r.dev});
  int64_t seen = static_cast<int64_t>(start[2]), batch = 0;
  TrainFigures figures;
  for (const st::data::Batch& b : *r.train_loader) {
    if (batch < skip) {  // done before the checkpoint; the loader's order is the same
      ++batch;
      continue;
    }
    std::optional<st::profiler::Range> step_range;
    step_range.emplace("train step");
    const StepResult out = step(b);
    const int64_t n = b.target.size(0);
    st::Tensor batch_correct;
    {
      st::NoGradGuard no_grad;
      loss_sum.add_(out.loss.detach(), static_cast<double>(n));
      batch_correct = st::sum(st::eq(st::argmax(out.logits, 1), b.target));
      correct.add_(batch_correct);
      seen += n;
    }
    // Rank 0's figures are of its own shard (times the ranks for the sample rate).
    ++batch;
    step_range.reset();  // the step's range ends in the step the profiler's schedule counts
    r.profile.step();
    const int64_t global_step = (epoch - 1) * batches + batch;
    if (r.main_rank && r.tb.due(global_step)) {
      r.tb.step_figures(global_step, out.loss.item<double>(),
                        static_cast<double>(batch_correct.item<int64_t>()) / static_cast<double>(n),
                        r.opt->lr(), static_cast<double>(n * r.world), "train/samples_per_second",
                        r.dev);
    }
    if (r.main_rank && (batch % 20 == 0 || batch == batches)) {
      progress.update(
          batch, format("mean loss %.4f  acc %.4f  %.0f samples/s", loss_sum.item<double>() / seen,
                        static_cast<double>(correct.item<int64_t>()) / seen,
                        static_cast<double>(seen * r.world) / progress.elapsed()) +
                     gpu_progress(gpu_reading(r.dev)));
    }
    // Per Note [preemption], a signalled run keeps this batch and stops here.
    if (batch < batches) r.stopped_by = stop_requested(r.pg.get());
    if (r.stopped_by != 0) {
      figures.stopped = Position{.epochs_done = epoch - 1, .batches_done = batch};
      break;
    }
  }
  if (r.main_rank) progress.done();
  // The epoch's figures over every rank's shard: (loss sum, correct, seen) summed.
  st::Tensor totals = st::from_vector<double>({loss_sum.item<double>(),
                                               static_cast<double>(correct.item<int64_t>()),
                                               static_cast<double>(seen)});
  if (r.pg) r.pg->all_reduce(totals);
  const std::vector<double> sums = totals.to_vector<double>();
  if (figures.stopped) {
    figures.stopped->sums = sums;
    return figures;
  }
  figures.loss = sums[0] / sums[2];
  figures.accuracy = sums[1] / sums[2];
  return figures;
}

// Rank 0 after an epoch: the test figures, a line of output and of metrics.csv, the checkpoint.
EvalResult evaluate_epoch(Run& r, int epoch, const TrainFigures& train, double secs_training) {
  EvalResult test;
  const Clock::time_point t0 = Clock::now();
  {
    const st::profiler::Range eval_range("evaluate");
    test = evaluate(*r.model, *r.test_loader, r.amp);
  }
  const double secs = secs_training + seconds_since(t0);
  std::printf("epoch %d: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.1fs\n", epoch,
              train.loss, train.accuracy, test.loss, test.accuracy, secs);
  r.metrics << epoch << ',' << train.loss << ',' << train.accuracy << ',' << test.loss << ','
            << test.accuracy << ',' << secs << gpu_csv_fields(gpu_reading(r.dev)) << '\n';
  r.metrics.flush();
  if (r.tb) {
    const int64_t step = epoch * r.train_loader->size();
    r.tb->add_scalar("epoch/train_loss", train.loss, step);
    r.tb->add_scalar("epoch/train_accuracy", train.accuracy, step);
    r.tb->add_scalar("epoch/test_loss", test.loss, step);
    r.tb->add_scalar("epoch/test_accuracy", test.accuracy, step);
    r.tb->add_scalar("epoch/seconds", secs, step);
    r.tb.parameters(*r.model, step);
  }
  if (!r.args.save.empty()) {
    save_checkpoint(r.args.save, r.args.model, *r.model, *r.opt, r.scaler,
                    Position{.epochs_done = epoch});
  }
  return test;
}

// --quantize int8 (Note [int8 quantization]): the trained model calibrated on the first
// --calibration-batches training batches, its int8 copy evaluated on the CPU, the figures of both
// side by side, and with --export-onnx the int8 QDQ model written there.
void quantize_int8(Run& r, const EvalResult& f32) {
  const st::quant::QuantizeOptions options{.calibrator =
                                               st::quant::calibrator_from_name(r.args.calibrator)};
  std::vector<st::Tensor> batches;
  for (const st::data::Batch& b : *r.train_loader) {
    if (static_cast<int64_t>(batches.size()) == r.args.calibration_batches) break;
    batches.push_back(b.input);
  }
  const Clock::time_point t0 = Clock::now();
  const std::shared_ptr<st::nn::Module> q = st::quant::quantize(
      *r.model, static_cast<int64_t>(batches.size()),
      [&](int64_t i) { return batches[static_cast<size_t>(i)]; }, options);
  q->to(st::Device::cpu());
  const double calibration_secs = seconds_since(t0);
  std::vector<int64_t> predicted;
  const EvalResult int8 = evaluate(*q, *r.test_loader, std::nullopt, st::Device::cpu(), &predicted);
  // The int8 model's class for each test image, one per line in the test set's order.
  const fs::path predictions = fs::path(r.args.out) / "int8_predictions.txt";
  {
    std::ofstream out(predictions);
    for (const int64_t c : predicted) out << c << '\n';
    if (!out) throw st::Error("--quantize: cannot write " + predictions.string());
  }
  const st::Tensor example = r.test_set->inputs().narrow(0, 0, 1);
  const auto mb = [](int64_t bytes) { return static_cast<double>(bytes) / 1e6; };
  std::printf("int8: %s calibration on %zu batches (%.1fs), int8 on the CPU (%s)\n",
              r.args.calibrator.c_str(), batches.size(), calibration_secs, st::quant::int8_isa());
  std::printf("%-12s %10s %10s\n", "", "f32", "int8");
  std::printf("%-12s %10.4f %10.4f\n", "accuracy", f32.accuracy, int8.accuracy);
  std::printf("%-12s %9.2fM %9.2fM\n", "weights", mb(st::quant::model_bytes(*r.model)),
              mb(st::quant::model_bytes(*q)));
  if (st::onnx::is_available()) {
    st::onnx::ExportSummary f32_onnx, int8_onnx;
    (void)st::onnx::export_to_string(*r.model, example, {}, &f32_onnx);
    (void)st::onnx::export_to_string(*q, example, {}, &int8_onnx);
    std::printf("%-12s %9.2fM %9.2fM\n", "onnx", mb(f32_onnx.bytes), mb(int8_onnx.bytes));
  }
  std::printf("int8 predictions: %s\n", predictions.string().c_str());
  export_onnx(r.args.export_onnx, *q, example);
}

// --tensorboard at the end: the first 32 test images in a grid with the model's labels for them
// (as text, "predicted (true)" where wrong), the hyperparameters and the final figures.
void log_final(Run& r, const EvalResult& test) {
  const int64_t step = r.args.epochs * r.train_loader->size();
  const int64_t n = std::min<int64_t>(32, r.test_set->size());
  const st::Tensor images = r.test_set->inputs().narrow(0, 0, n);
  const st::Tensor labels = r.test_set->targets().narrow(0, 0, n);
  st::Tensor predicted;
  {
    st::InferenceMode inference;
    r.model->eval();
    const AmpScope scope(r.amp, r.dev);
    predicted = st::argmax((*r.model)(images.to(r.dev)), 1).cpu();
  }
  // Undo the normalization for display: x * std + mean, in [0, 1].
  const st::data::Normalization norm = st::data::FashionMNIST::default_normalization();
  const st::Tensor pixels = st::clamp(images * norm.std[0] + norm.mean[0], 0.0, 1.0);
  r.tb->add_image("test/images", st::make_grid(pixels, 8), step);
  const std::vector<std::string>& classes = st::data::FashionMNIST::classes();
  const std::vector<int64_t> p = predicted.to_vector<int64_t>(), t = labels.to_vector<int64_t>();
  std::string table =
      "| | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 |\n|---|---|---|---|---|---|---|---|---|\n";
  for (int64_t i = 0; i < n; ++i) {
    const auto c = [&](int64_t k) { return classes[static_cast<size_t>(k)]; };
    if (i % 8 == 0) table += "| row " + std::to_string(i / 8 + 1) + " |";
    table += " " + (p[i] == t[i] ? c(p[i]) : c(p[i]) + " (" + c(t[i]) + ")") + " |";
    if (i % 8 == 7 || i == n - 1) table += "\n";
  }
  r.tb->add_text("test/predictions", table, step);
  r.tb->add_hparams({{"model", r.args.model},
                     {"epochs", static_cast<double>(r.args.epochs)},
                     {"batch_size", static_cast<double>(r.args.batch_size)},
                     {"lr", r.opt->lr()},
                     {"amp", r.args.amp},
                     {"seed", static_cast<double>(r.args.seed)},
                     {"ranks", static_cast<double>(r.world)}},
                    {{"hparam/test_accuracy", test.accuracy}, {"hparam/test_loss", test.loss}},
                    "hparams");
}

// Rank 0 at the end: the final accuracy, the exports and the plot; status 3 below
// --min-accuracy.
int finish(Run& r, EvalResult test) {
  if (r.start_epoch >= r.args.epochs) test = evaluate(*r.model, *r.test_loader, r.amp);
  std::printf("test accuracy: %.4f\n", test.accuracy);
  std::printf("metrics: %s\n", r.csv.string().c_str());
  if (!r.args.save.empty()) std::printf("checkpoint: %s\n", r.args.save.c_str());
  export_weights(r.args.export_weights, *r.model, r.args.model);
  if (r.args.quantize == "int8") {
    quantize_int8(r, test);
  } else {
    export_onnx(r.args.export_onnx, *r.model, r.test_set->inputs().narrow(0, 0, 1));
  }
  r.metrics.close();
  if (r.tb) {
    log_final(r, test);
    r.tb.close();
  }
  write_plot(r.csv, fs::path(r.args.out) / "curves.png",
             {{.title = "loss", .xlabel = "epoch", .columns = {2, 4}},
              {.title = "accuracy", .xlabel = "epoch", .columns = {3, 5}}});
  if (test.accuracy < r.args.min_accuracy) {
    std::fprintf(stderr, "test accuracy %.4f is below --min-accuracy %.4f\n", test.accuracy,
                 r.args.min_accuracy);
    return 3;
  }
  return 0;
}

int run(const Args& args) {
  const std::unique_ptr<Run> r = set_up(args);
  install_stop_handlers();
  Stepper step([&r](const st::Tensor& x, const st::Tensor& y) { return train_step(*r, x, y); },
               args.cuda_graph, r->rank_batch);
  finish_setup();
  EvalResult test;
  for (int epoch = r->start_epoch + 1; epoch <= args.epochs; ++epoch) {
    const Clock::time_point t0 = Clock::now();
    const TrainFigures train = train_epoch(*r, step, epoch);
    if (train.stopped) {
      if (r->main_rank) {
        if (!args.save.empty()) {
          save_checkpoint(args.save, args.model, *r->model, *r->opt, r->scaler, *train.stopped);
        }
        std::printf("stopped by signal %d in epoch %d after batch %lld; %s\n", r->stopped_by, epoch,
                    static_cast<long long>(train.stopped->batches_done),
                    args.save.empty()
                        ? "no --save, so no checkpoint"
                        : ("checkpoint: " + args.save + " (continue with --resume)").c_str());
        std::fflush(stdout);
      }
      if (r->pg) r->pg->barrier();  // every rank stays until the checkpoint is written
      return kPreempted;
    }
    if (r->main_rank) {
      const Clock::time_point eval_start = Clock::now();
      test = evaluate_epoch(*r, epoch, train, seconds_since(t0));
      r->tb.leave_out(seconds_since(eval_start));
    }
  }
  if (!r->main_rank) return 0;
  r->profile.finish();
  return finish(*r, test);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  return example_main(
      argc, argv, "fashion_mnist",
      "Train the mlp, cnn or resnet20 reference model on Fashion-MNIST",
      [&](CLI::App& app) {
        app.add_option("--model", args.model,
                       "mlp, cnn or resnet20 (on the images padded to 32x32)")
            ->check(CLI::IsMember({"mlp", "cnn", "resnet20"}));
        app.add_option("--epochs", args.epochs,
                       "total epochs (with --resume: including those done)")
            ->check(CLI::Range(1, 1000000));
        app.add_option("--batch-size", args.batch_size,
                       "samples per step (with --ddp: over all ranks; each of the N ranks takes "
                       "batch-size / N)")
            ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
        app.add_option("--lr", args.lr,
                       "learning rate (default: 0.01 SGD for mlp, 1e-3 Adam for cnn, 0.05 SGD with "
                       "weight decay 5e-4 for resnet20)")
            ->check(positive())
            ->default_str("");  // 0, which the help gives for each model
        app.add_option("--device", args.device, "auto, cpu or cuda")
            ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
        app.add_option("--data", args.data, "folder with the four IDX files (.gz or plain)");
        app.add_option("--seed", args.seed, "seed of initialization and shuffling");
        app.add_option("--save", args.save, "checkpoint written after every epoch (safetensors)");
        add_output_options(app, args.profile, args.profile_schedule, args.export_weights,
                           args.export_onnx, "any batch size");
        add_tensorboard_options(app, args.tensorboard, args.log_every);
        app.add_option("--resume", args.resume, "checkpoint to continue from");
        app.add_option("--out", args.out, "folder for metrics.csv and curves.png");
        app.add_option("--limit-train", args.limit_train,
                       "train on the first N samples only (0: all)")
            ->check(at_least(0));
        app.add_option("--limit-test", args.limit_test,
                       "evaluate on the first N test samples only (0: all)")
            ->check(at_least(0));
        app.add_option("--min-accuracy", args.min_accuracy,
                       "exit with status 3 below this test accuracy")
            ->check(CLI::Range(0.0, 1.0));
        app.add_flag(
            "--ddp", args.ddp,
            "data-parallel training under mpirun -np N (or srun): one rank per GPU (cuda:local "
            "rank) or CPU process, each on its shard of the training set; rank 0 alone prints, "
            "evaluates and writes metrics, plot and checkpoints");
        add_amp_options(app, args.amp, args.cuda_graph, "");
        app.add_option("--quantize", args.quantize,
                       "off, or int8: after training, quantize the model (BatchNorm folded, "
                       "per-channel int8 weights, calibrated int8 inputs), evaluate it on the CPU "
                       "beside the f32 model, and export it as an ONNX QDQ model to --export-onnx")
            ->check(CLI::IsMember({"off", "int8"}));
        app.add_option("--calibration-batches", args.calibration_batches,
                       "training batches the int8 calibration runs")
            ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
        app.add_option("--calibrator", args.calibrator,
                       "the int8 input ranges: minmax, percentile (99.99%) or entropy (KL, as "
                       "TensorRT's)")
            ->check(CLI::IsMember({"minmax", "percentile", "entropy"}));
      },
      [&](CLI::App&) { return run(args); });
}

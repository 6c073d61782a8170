// The op profiler (Note [profiler]): a CPU training step under a Guard gives one event per op and
// per backward node (names, shapes, nesting, self times, bytes), a table sorted by self time, and a
// Chrome trace that is valid JSON with one complete event per op; a transformer's step is covered
// by its ops' self times; autocast's re-entry counts once; a schedule records its window of steps;
// the trace names the process and every thread that recorded (Note [trace thread names]).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "internal/parallel.h"
#include "test_util.h"

namespace sinter {
namespace {

using testing::expect_error;

// A row of table(): its calls, total and self ms, the first three of its last six fields (a name
// may hold spaces, "linear backward").
std::tuple<long long, double, double> table_row(const std::string& line) {
  std::istringstream words(line);
  std::vector<std::string> fields{std::istream_iterator<std::string>(words), {}};
  if (fields.size() < 7) ADD_FAILURE() << "a short row: " << line;
  if (fields.size() < 7) return {0, 0.0, 0.0};
  const size_t at = fields.size() - 6;
  return {std::stoll(fields[at]), std::stod(fields[at + 1]), std::stod(fields[at + 2])};
}

// One SGD step of a two-layer network on the CPU.
void train_step(nn::Sequential& model) {
  const Tensor x = rand({16, 8}), y = randint(0, 4, {16}, {.dtype = DType::i64});
  model.zero_grad();
  const profiler::Range forward("forward");
  const Tensor loss = cross_entropy(model.forward(x), y);
  loss.backward();
  NoGradGuard no_grad;
  for (Tensor& p : model.parameters()) p.add_(mul(p.grad(), 0.1), -1.0);
}

TEST(Profiler, RecordsEveryOpOfATrainingStep) {
  nn::Sequential model(nn::Linear(8, 32), nn::ReLU(), nn::Linear(32, 4));
  train_step(model);  // outside any Guard: nothing is recorded
  const testing::TempDir dir;
  const std::string trace = dir.file("trace.json");
  std::vector<profiler::Event> events;
  std::string table;
  {
    const profiler::Guard guard;
    expect_error([] { profiler::Guard second; }, {"profiler::Guard", "one at a time"});
    train_step(model);
    events = guard.events();
    table = guard.table();
    guard.write_chrome_trace(trace);
  }
  std::set<std::string> names;
  for (const profiler::Event& e : events) {
    names.insert(e.name);
    EXPECT_LE(e.start_ns, e.end_ns) << e.name;
    EXPECT_EQ(e.device_ms, -1) << e.name;  // CPU ops
  }
  for (const char* op : {"forward", "linear", "relu", "cross_entropy", "mul", "linear backward",
                         "relu backward", "cross_entropy backward"}) {
    EXPECT_TRUE(names.count(op)) << op << " was not recorded";
  }
  for (const profiler::Event& e : events) {
    EXPECT_EQ(e.backward,
              e.name.find(" backward") != std::string::npos || e.name == "AccumulateGrad")
        << e.name;
    EXPECT_GE(e.self_ns, 0) << e.name;
    EXPECT_LE(e.self_ns, e.end_ns - e.start_ns) << e.name;
  }
  const auto linear = std::find_if(events.begin(), events.end(),
                                   [](const profiler::Event& e) { return e.name == "linear"; });
  ASSERT_NE(linear, events.end());
  EXPECT_EQ(linear->shapes, "[16, 8], [32, 8], [32]");
  EXPECT_EQ(linear->depth, 1);  // inside the "forward" range
  EXPECT_GE(linear->bytes_allocated, 16 * 32 * 4);

  // The table: a header, then one row per name, by self host time, largest first; a row's self
  // time is at most its total.
  std::istringstream rows(table);
  std::string line;
  std::getline(rows, line);
  EXPECT_NE(line.find("self ms"), std::string::npos) << line;
  std::vector<double> selfs;
  size_t row_count = 0;
  while (std::getline(rows, line)) {
    if (line.rfind("saved for backward:", 0) == 0) break;  // the footer
    const auto [calls, total, self] = table_row(line);
    EXPECT_LE(self, total + 1e-3) << line;
    selfs.push_back(self);
    ++row_count;
  }
  EXPECT_EQ(row_count, names.size());
  EXPECT_EQ(line.rfind("saved for backward:", 0), 0u) << "the table ends with the saved bytes";
  EXPECT_TRUE(std::is_sorted(selfs.rbegin(), selfs.rend())) << table;

  // The trace: valid JSON, one complete event per recorded op after the metadata events.
  std::ifstream in(trace);
  const nlohmann::json j = nlohmann::json::parse(in);  // throws on invalid JSON
  ASSERT_TRUE(j.at("traceEvents").is_array());
  size_t complete = 0;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "M") continue;
    ++complete;
    EXPECT_EQ(e.at("ph"), "X");
    EXPECT_TRUE(e.at("name").is_string());
    EXPECT_TRUE(e.at("ts").is_number() && e.at("dur").is_number());
    EXPECT_TRUE(e.at("args").at("shapes").is_string());
    EXPECT_TRUE(e.at("args").at("depth").is_number_integer());
    EXPECT_TRUE(e.at("args").at("self_us").is_number());
    const std::string name = e.at("name").get<std::string>();
    const bool backward = name.find(" backward") != std::string::npos || name == "AccumulateGrad";
    EXPECT_EQ(e.at("cat"), backward ? "backward" : "op");
  }
  EXPECT_EQ(complete, events.size());
}

// Per Note [trace thread names], the trace's metadata events name the process "sinter" under its
// process id, and each thread that recorded: the main thread, the thread pool's workers and a
// DataLoader's producer; every complete event's thread has its name.
TEST(Profiler, TheTraceNamesTheProcessAndItsThreads) {
  const int threads_before = get_num_threads();
  set_num_threads(2);
  const testing::TempDir dir;
  const std::string trace = dir.file("trace.json");
  std::vector<profiler::Event> events;
  {
    const profiler::Guard guard;
    (void)sum(ones({3}));
    // The caller's first piece waits (up to half a second) for a piece to run on another thread,
    // so that the worker takes one however late a loaded machine wakes it; and the loop runs
    // again (for up to 20 s) where none did: a job that found the pool busy (a thread an earlier
    // test left winding down) ran serially on the caller, as Note [cpu threads] says it must.
    const std::thread::id caller = std::this_thread::get_id();
    std::atomic<bool> elsewhere{false};
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!elsewhere && std::chrono::steady_clock::now() < give_up) {
      std::atomic<bool> waited{false};
      detail::parallel_for(16, 1, [&](int64_t, int64_t) {
        const profiler::Range piece("piece");
        if (std::this_thread::get_id() != caller) {
          elsewhere = true;
          return;
        }
        if (waited.exchange(true)) return;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
        while (!elsewhere && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      });
    }
    data::DataLoader loader(std::make_shared<data::TensorDataset>(rand({8, 2}), zeros({8})),
                            {.batch_size = 4, .prefetch = 1});
    for (const data::Batch& b : loader) (void)b;
    events = guard.events();
    guard.write_chrome_trace(trace);
  }
  set_num_threads(threads_before);
  std::set<std::string> event_threads;
  for (const profiler::Event& e : events) {
    event_threads.insert(e.thread_name);
    if (e.name == "sum") {
      EXPECT_EQ(e.thread_name, "main thread");
    }
  }
  EXPECT_TRUE(event_threads.count("main thread"));
  // Any worker: after a test at 3 threads the pool keeps two, and either may join a 2-thread job.
  EXPECT_TRUE(std::any_of(event_threads.begin(), event_threads.end(), [](const std::string& t) {
    return t.rfind("pool worker ", 0) == 0;
  })) << "no piece ran on a pool worker";
  EXPECT_TRUE(event_threads.count("data loader")) << "no op ran on the loader's thread";

  std::ifstream in(trace);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::map<int64_t, std::string> names;  // tid -> thread_name
  std::string process;
  std::set<int64_t> tids;
  for (const auto& e : j.at("traceEvents")) {
    EXPECT_EQ(e.at("pid").get<int64_t>(), getpid()) << e;
    if (e.at("ph") == "X") tids.insert(e.at("tid").get<int64_t>());
    if (e.at("name") == "process_name") process = e.at("args").at("name").get<std::string>();
    if (e.at("name") == "thread_name") {
      names[e.at("tid").get<int64_t>()] = e.at("args").at("name").get<std::string>();
    }
  }
  EXPECT_EQ(process, "sinter");
  for (const int64_t tid : tids) EXPECT_TRUE(names.count(tid)) << "thread " << tid << " unnamed";
  std::set<std::string> trace_threads;
  for (const auto& [tid, name] : names) trace_threads.insert(name);
  EXPECT_EQ(trace_threads, event_threads);
}

TEST(Profiler, AGuardStartsEmpty) {
  {
    const profiler::Guard first;
    (void)sum(ones({3}));
  }
  const profiler::Guard second;
  EXPECT_TRUE(second.events().empty());
  (void)sum(ones({3}));
  ASSERT_EQ(second.events().size(), 1u);
  EXPECT_EQ(second.events()[0].name, "sum");
  EXPECT_EQ(second.events()[0].shapes, "[3]");
}

// A small transformer's training step: the self times of the forward ops, the backward nodes and
// the optimizer's step add up to at least 90% of the step's wall time (what the table shows is
// where the time went), each Linear's forward has its backward, and the self times nest. The best
// of up to 10 steps counts: a step on a loaded machine can lose the CPU between two ops.
TEST(Profiler, ATransformerStepIsCoveredByItsOps) {
  manual_seed(testing::fresh_seed());
  nn::models::GPTConfig c;
  c.vocab_size = 256;
  c.context_length = 64;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 128;
  nn::models::GPT model(c);
  optim::AdamW opt(model.parameters(), {.lr = 1e-3});
  const Tensor idx = randint(0, 256, {8, 64}, {.dtype = DType::i64});
  const Tensor target = randint(0, 256, {8 * 64}, {.dtype = DType::i64});
  const auto step = [&] {
    opt.zero_grad();
    const Tensor loss = cross_entropy(model.forward(idx).reshape({8 * 64, 256}), target);
    loss.backward();
    opt.step();
  };
  step();  // first-call costs
  double best = 0;
  std::string table;
  for (int trial = 0; trial < 10 && best < 0.95; ++trial) {
    const profiler::Guard guard;
    const auto t0 = std::chrono::steady_clock::now();
    step();
    const double wall_ns = static_cast<double>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count());
    const std::vector<profiler::Event> events = guard.events();
    double self_ns = 0;
    int64_t linear = 0, linear_backward = 0, backward_nodes = 0, top = 0;
    for (const profiler::Event& e : events) {
      self_ns += static_cast<double>(e.self_ns);
      linear += e.name == "linear" ? 1 : 0;
      linear_backward += e.name == "linear backward" ? 1 : 0;
      backward_nodes += e.backward ? 1 : 0;
      top += e.depth == 0 ? e.end_ns - e.start_ns : 0;
    }
    EXPECT_EQ(linear, 2 * 4 + 1) << "qkv, out_proj, fc and proj in each of 2 blocks, the tied head";
    EXPECT_EQ(linear_backward, linear);
    EXPECT_GT(backward_nodes, linear);
    // Self times partition the top-level ops' time.
    EXPECT_NEAR(self_ns, static_cast<double>(top), 1e-6 * static_cast<double>(top) + 1000);
    best = std::max(best, self_ns / wall_ns);
    table = guard.table();
    // The table's self column adds up to the same time.
    std::istringstream rows(table);
    std::string line;
    std::getline(rows, line);
    double table_self_ms = 0;
    while (std::getline(rows, line) && line.rfind("saved for backward:", 0) != 0) {
      table_self_ms += std::get<2>(table_row(line));
    }
    EXPECT_NEAR(table_self_ms, self_ns / 1e6, 0.01 + 1e-3 * self_ns / 1e6) << table;
  }
  std::printf("the ops cover %.1f%% of the step\n", 100 * best);
  EXPECT_GE(best, 0.9) << "the ops cover " << 100 * best << "% of the step\n" << table;
}

// Under autocast an op of the policy runs once more on cast operands: counted once.
TEST(Profiler, AnOpUnderAutocastCountsOnce) {
  nn::Sequential model(nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 16), nn::ReLU(),
                       nn::Linear(16, 4));
  const Tensor x = rand({4, 8});
  const profiler::Guard guard;
  {
    const autocast::Guard amp(DeviceType::cpu, DType::bf16);
    const Tensor loss = model.forward(x).to(DType::f32).sum();
    loss.backward();
  }
  int64_t linear = 0, linear_backward = 0;
  for (const profiler::Event& e : guard.events()) {
    linear += e.name == "linear" ? 1 : 0;
    linear_backward += e.name == "linear backward" ? 1 : 0;
    if (e.name == "linear") {
      EXPECT_EQ(e.depth, 0);
    }
  }
  EXPECT_EQ(linear, 3);
  EXPECT_EQ(linear_backward, 3);
  const std::string table = guard.table();
  EXPECT_NE(table.find("linear                                  3 "), std::string::npos) << table;
}

// skip_first 1, then 2 cycles of wait 1, warm-up 1, active 2: steps 3-4 and 7-8 are reported,
// each window alone; nothing is recorded outside the warm-up and active steps.
TEST(Profiler, AScheduleRecordsItsWindowOfSteps) {
  std::vector<std::vector<std::string>> windows;
  {
    profiler::Guard guard({.skip_first = 1, .wait = 1, .warmup = 1, .active = 2, .repeat = 2},
                          [&](const profiler::Guard& g) {
                            std::vector<std::string> shapes;
                            for (const profiler::Event& e : g.events()) shapes.push_back(e.shapes);
                            windows.push_back(shapes);
                          });
    const std::vector<bool> recording = {false, false, true, true,  true, false,
                                         true,  true,  true, false, false};
    for (int64_t k = 0; k < 11; ++k) {
      EXPECT_EQ(guard.recording(), recording[static_cast<size_t>(k)]) << "step " << k;
      (void)sum(ones({k + 1}));
      guard.step();
    }
    EXPECT_EQ(guard.step_num(), 11);
    EXPECT_TRUE(guard.events().empty());
  }
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_EQ(windows[0], (std::vector<std::string>{"[4]", "[5]"}));
  EXPECT_EQ(windows[1], (std::vector<std::string>{"[8]", "[9]"}));
  expect_error([] { profiler::Guard g({.active = 0}, nullptr); },
               {"profiler::Schedule", "active 0"});
}

// A ".gz" path writes the trace gzip-compressed (TensorBoard's profile plugin reads
// "<host>.trace.json.gz").
TEST(Profiler, ATraceEndingInGzIsCompressed) {
  const testing::TempDir dir;
  const profiler::Guard guard;
  for (int i = 0; i < 50; ++i) (void)sum(ones({3}));
  const std::string plain = dir.file("t.json"), gz = dir.file("t.json.gz");
  guard.write_chrome_trace(plain);
  try {
    guard.write_chrome_trace(gz);
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();  // a build without zlib
  }
  std::ifstream in(gz, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), 18u);
  EXPECT_EQ(static_cast<uint8_t>(bytes[0]), 0x1f);
  EXPECT_EQ(static_cast<uint8_t>(bytes[1]), 0x8b);
  EXPECT_LT(bytes.size(), std::filesystem::file_size(plain) / 4);
}

}  // namespace
}  // namespace sinter

// The op profiler (Note [profiler]): a CPU training step under a Guard gives one event per op
// (names, shapes, nesting, bytes), a table sorted by total time, and a Chrome trace that is valid
// JSON with one complete event per op.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace sinter {
namespace {

using testing::expect_error;

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
  for (const char* op : {"forward", "linear", "relu", "cross_entropy", "mul"}) {
    EXPECT_TRUE(names.count(op)) << op << " was not recorded";
  }
  const auto linear = std::find_if(events.begin(), events.end(),
                                   [](const profiler::Event& e) { return e.name == "linear"; });
  ASSERT_NE(linear, events.end());
  EXPECT_EQ(linear->shapes, "[16, 8], [32, 8], [32]");
  EXPECT_EQ(linear->depth, 1);  // inside the "forward" range
  EXPECT_GE(linear->bytes_allocated, 16 * 32 * 4);

  // The table: a header, then one row per name, by total host time, largest first.
  std::istringstream rows(table);
  std::string line;
  std::getline(rows, line);
  EXPECT_NE(line.find("calls"), std::string::npos) << line;
  std::vector<double> totals;
  size_t row_count = 0;
  while (std::getline(rows, line)) {
    if (line.rfind("saved for backward:", 0) == 0) break;  // the footer
    std::istringstream fields(line);
    std::string name;
    long long calls = 0;
    double total = 0;
    fields >> name >> calls >> total;
    totals.push_back(total);
    ++row_count;
  }
  EXPECT_EQ(row_count, names.size());
  EXPECT_EQ(line.rfind("saved for backward:", 0), 0u) << "the table ends with the saved bytes";
  EXPECT_TRUE(std::is_sorted(totals.rbegin(), totals.rend())) << table;

  // The trace: valid JSON, one complete event per recorded op.
  std::ifstream in(trace);
  const nlohmann::json j = nlohmann::json::parse(in);  // throws on invalid JSON
  ASSERT_TRUE(j.at("traceEvents").is_array());
  EXPECT_EQ(j.at("traceEvents").size(), events.size());
  for (const auto& e : j.at("traceEvents")) {
    EXPECT_EQ(e.at("ph"), "X");
    EXPECT_TRUE(e.at("name").is_string());
    EXPECT_TRUE(e.at("ts").is_number() && e.at("dur").is_number());
    EXPECT_TRUE(e.at("args").at("shapes").is_string());
  }
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

}  // namespace
}  // namespace sinter

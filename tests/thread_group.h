// An in-process ProcessGroup for tests: ranks are threads meeting at a barrier (no MPI), so the
// data-parallel machinery (DDP, ZeRO) is tested on every build. tests/dist/ repeats the end-to-end
// checks over MPI.
#pragma once

#include <barrier>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sinter/autograd.h"
#include "sinter/dist.h"
#include "sinter/ops.h"

namespace sinter::testing {

using dist::ProcessGroup;
using dist::ReduceOp;
using dist::Work;

// What the ranks of one ThreadGroup share: a barrier and one tensor slot per rank.
struct Meeting {
  explicit Meeting(int n) : size(n), bar(n), slots(n) {}
  int size;
  std::barrier<> bar;
  std::vector<Tensor> slots;
  std::mutex mu;
  std::vector<std::string> ops;  // every collective rank 0 ran, in order
};

// A rank of an in-process group. Collectives are lazy: an async one happens in wait(), so a
// caller that reads the tensor without waiting sees its own, unreduced values.
class ThreadGroup : public ProcessGroup {
 public:
  ThreadGroup(std::shared_ptr<Meeting> m, int rank) : m_(std::move(m)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return m_->size; }
  int local_rank() const override { return rank_; }
  int local_size() const override { return m_->size; }

  std::shared_ptr<Work> all_reduce_async(Tensor& tensor, ReduceOp op) override {
    Tensor t = tensor;
    return lazy("all_reduce", [this, t, op]() mutable {
      Tensor result = exchange(t, [&](const std::vector<Tensor>& all) {
        Tensor acc = all[0].clone();
        for (int r = 1; r < size(); ++r) {
          if (op == ReduceOp::Max) {
            acc = maximum(acc, all[r]);
          } else {
            acc.add_(all[r]);
          }
        }
        if (op == ReduceOp::Average) acc = div(acc, static_cast<double>(size()));
        return acc;
      });
      t.copy_(result);
    });
  }
  std::shared_ptr<Work> broadcast_async(Tensor& tensor, int root) override {
    Tensor t = tensor;
    return lazy("broadcast", [this, t, root]() mutable {
      t.copy_(exchange(t, [&](const std::vector<Tensor>& all) { return all[root].clone(); }));
    });
  }
  Tensor all_gather(const Tensor& tensor) override {
    note("all_gather");
    return exchange(tensor, [](const std::vector<Tensor>& all) { return stack(all); });
  }
  void barrier() override { m_->bar.arrive_and_wait(); }
  std::shared_ptr<Work> reduce_scatter_async(Tensor& output, const Tensor& input,
                                             ReduceOp op) override {
    check_scatter_gather("reduce_scatter", output, input, true);
    Tensor out = output;
    Tensor in = input;
    return lazy("reduce_scatter", [this, out, in, op]() mutable {
      const int64_t n = out.numel();
      Tensor result = exchange(in, [&](const std::vector<Tensor>& all) {
        Tensor acc = all[0].flatten().narrow(0, rank_ * n, n).clone();
        for (int r = 1; r < size(); ++r) {
          Tensor part = all[r].flatten().narrow(0, rank_ * n, n);
          acc = op == ReduceOp::Max ? maximum(acc, part) : add(acc, part);
        }
        if (op == ReduceOp::Average) acc = div(acc, static_cast<double>(size()));
        return acc;
      });
      out.copy_(result.view(out.shape()));
    });
  }
  std::shared_ptr<Work> all_gather_into_async(Tensor& output, const Tensor& input) override {
    check_scatter_gather("all_gather_into", output, input, false);
    Tensor out = output;
    Tensor in = input;
    return lazy("all_gather_into", [this, out, in]() mutable {
      Tensor result = exchange(in, [&](const std::vector<Tensor>& all) {
        std::vector<Tensor> flat;
        for (const Tensor& t : all) flat.push_back(t.flatten());
        return cat(flat, 0);
      });
      out.copy_(result.view(out.shape()));
    });
  }

 private:
  struct LazyWork : Work {
    std::function<void()> run;
    bool done = false;
    void wait() override {
      if (!done) run();
      done = true;
    }
    bool is_completed() override { return done; }
  };
  void note(const char* op) {
    if (rank_ != 0) return;
    std::lock_guard<std::mutex> lock(m_->mu);
    m_->ops.emplace_back(op);
  }
  std::shared_ptr<Work> lazy(const char* op, std::function<void()> run) {
    note(op);
    auto w = std::make_shared<LazyWork>();
    w->run = std::move(run);
    return w;
  }
  // Every rank posts its tensor; each computes f(all) while all are posted, then they part.
  template <class F>
  Tensor exchange(const Tensor& mine, F f) {
    NoGradGuard no_grad;
    m_->slots[rank_] = mine.detach();
    m_->bar.arrive_and_wait();
    Tensor out = f(m_->slots);
    m_->bar.arrive_and_wait();
    return out;
  }

  std::shared_ptr<Meeting> m_;
  int rank_;
};

// Runs body(rank, group) on n threads; rethrows the first rank's failure.
inline void run_ranks(int n, const std::function<void(int, std::shared_ptr<ProcessGroup>)>& body,
                      std::shared_ptr<Meeting>* meeting = nullptr) {
  auto m = std::make_shared<Meeting>(n);
  if (meeting) *meeting = m;
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r, std::make_shared<ThreadGroup>(m, r));
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace sinter::testing

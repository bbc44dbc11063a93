// rlflow/agent/tool_pool.hpp: a bounded pool of threads that run tool calls for every conversation
// of a rollout worker (actor_rollout_ref.rollout.agent.num_workers threads), so many
// conversations waiting on tools never start more than that many calls at once. A call that
// hangs holds its thread until its own time limit ends it (the subprocess tool's timeout_s).
// verl: the AgentLoopWorker actors (agent.num_workers) whose event loops run the tools.
#pragma once
#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include <rlflow/core/error.hpp>

namespace rlflow::agent {

class ToolPool {
 public:
  //! 'threads' workers (>= 1), started now and joined by the destructor.
  explicit ToolPool(int threads) {
    if (threads < 1)
      throw config_error(msg("rlflow::agent::ToolPool: ", threads, " threads; actor_rollout_ref.rollout.agent.num_workers must be >= 1 "
                             "(the tool calls that run at once)"));
    th_.reserve(std::size_t(threads));
    for (int i = 0; i < threads; ++i) th_.emplace_back([this] { work(); });
  }
  ToolPool(ToolPool const&) = delete;
  ToolPool& operator=(ToolPool const&) = delete;
  ~ToolPool() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : th_) t.join();
  }

  int size() const { return int(th_.size()); }

  //! Runs every job on the pool and returns when all have ended; the first job's exception (in
  //! job order) is rethrown after all have ended.
  void run_all(std::span<std::function<void()> const> jobs) {
    std::vector<std::future<void>> done;
    done.reserve(jobs.size());
    {
      std::lock_guard<std::mutex> lk(m_);
      for (auto const& j : jobs) {
        std::packaged_task<void()> t(j);
        done.push_back(t.get_future());
        q_.push_back(std::move(t));
      }
    }
    cv_.notify_all();
    for (auto& f : done) f.wait();
    for (auto& f : done) f.get();
  }

  //! The most jobs that ran at once since construction.
  int peak_busy() const {
    std::lock_guard<std::mutex> lk(m_);
    return peak_;
  }

 private:
  void work() {
    while (true) {
      std::packaged_task<void()> t;
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return stop_ || !q_.empty(); });
        if (q_.empty()) return;
        t = std::move(q_.front());
        q_.pop_front();
        peak_ = std::max(peak_, ++busy_);
      }
      t();  // stores the job's exception in its future
      std::lock_guard<std::mutex> lk(m_);
      --busy_;
    }
  }

  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> q_;
  std::vector<std::thread> th_;
  int busy_ = 0, peak_ = 0;
  bool stop_ = false;
};

}  // namespace rlflow::agent

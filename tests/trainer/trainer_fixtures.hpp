// Shared fixtures of the Trainer tests: a quiet TrainerOptions, a fresh temporary folder, the
// demo task's trainers and a small, fast configuration (8 prompts x 4 samples, 2 DP workers).
#pragma once
#include <catch2/catch.hpp>  // REQUIRE in require_tp_weights_match
#include <rlflow/trainer/trainer.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <vector>
#include <stdexcept>
#include <string>
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/reverse_task.hpp"

namespace rlflow::testing {

//! |a - b| <= rel * max(1, |b|): the tolerance of the TP-against-TP=1 comparisons.
inline bool close(double a, double b, double rel) { return std::abs(a - b) <= rel * std::max(1.0, std::abs(b)); }

//! ||a - b|| / ||b|| in double (relative L2 difference of two weight vectors).
inline double rel_l2(std::vector<float> const& a, std::vector<float> const& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

//! Final weights 'wb' of a run that differs from 'wa' only in rounding (another TP layout, another
//! inlining of the same sums), after 'steps' AdamW steps of learning rate 'lr': relative L2
//! difference <= 1e-4, and every weight within 1e-4 (close) but at most one in 10,000, which stay
//! within 2 * lr * steps. Those are weights whose gradient is rounding noise: Adam divides a
//! gradient by its own running magnitude, so noise of either sign moves a weight by up to about
//! lr per step, and the two runs' noise differs.
inline void require_weights_close(std::vector<float> const& wa, std::vector<float> const& wb, double lr, int steps) {
  REQUIRE(wa.size() == wb.size());
  INFO("relative L2 difference of the final weights: " << rel_l2(wb, wa));
  REQUIRE(rel_l2(wb, wa) <= 1e-4);
  std::size_t outside = 0;
  for (std::size_t i = 0; i < wa.size(); ++i) {
    if (close(wb[i], wa[i], 1e-4)) continue;
    ++outside;
    INFO("weight " << i << ": " << wb[i] << " vs " << wa[i]);
    REQUIRE(std::abs(double(wb[i]) - wa[i]) <= 2 * lr * steps);
  }
  INFO(outside << " of " << wa.size() << " weights differ by more than 1e-4");
  REQUIRE(outside * 10000 <= wa.size());
}

//! The training-TP run's final weights 'wb' against the TP = 1 run's 'wa': every rank's gathered
//! copy ('per_rank') identical and equal to wb, and wb close to wa (require_weights_close).
inline void require_tp_weights_match(std::vector<std::vector<float>> const& per_rank, std::vector<float> const& wa,
                                     std::vector<float> const& wb, double lr, int steps) {
  for (auto const& w : per_rank) REQUIRE(w == per_rank[0]);
  REQUIRE(wb == per_rank[0]);
  require_weights_close(wa, wb, lr, steps);
}

//! A schedule that does not depend on timing, for bound K: step t trains only once the batch of
//! step t + K has been started (its version chosen), i.e. before version t exists, so the batch of
//! step s is generated with version max(start, s - 1 - K) however slow either side is. The hook
//! reads the trainer through 'holder' (set once the trainer is built).
template <class T>
std::shared_ptr<AsyncHooks> lockstep_hooks(std::shared_ptr<T*> holder, std::int64_t k) {
  auto h = std::make_shared<AsyncHooks>();
  h->before_train = [holder, k](std::int64_t t, DataProto const&) {
    T& tr = **holder;
    std::int64_t const want = std::min(t + k, tr.total_steps());
    while (tr.async_rollout()->started_through() < want) std::this_thread::sleep_for(std::chrono::microseconds(200));
  };
  return h;
}

//! No console output; 'hooks' for the async tests' schedules.
inline TrainerOptions quiet(std::shared_ptr<AsyncHooks const> hooks = nullptr) {
  TrainerOptions o;
  o.console = false;
  o.async_hooks = std::move(hooks);
  return o;
}

//! The string task the trainer tests train on (its default reversal task).
inline tasks::StringTask const task{};

using Score = examples::ReverseScore;
using GRPOTrainer = Trainer<GRPO, Colocate<3>, roles::RuleReward<Score>>;
using PPOTrainer = Trainer<PPO, roles::ValueCritic, roles::RuleReward<Score>, Colocate<3>>;  // any order

//! An empty path under the temporary folder, unique to this process: <tmp>/rlflow_test_<name>_<pid>.
inline std::filesystem::path fresh_dir(std::string const& name) {
  auto p = std::filesystem::temp_directory_path() / ("rlflow_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p;
}

//! 8 prompts x 4 samples, 2 DP workers, a 32-wide GPT, two actor updates per step, 3 steps: a
//! step takes milliseconds.
inline TrainerConfig tiny_config(std::filesystem::path const& dir) {
  TrainerConfig c = examples::reverse_base_config();
  c.data.train_batch_size = 8;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 4;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.actor.optim.lr = 3e-3;
  c.actor_rollout_ref.rollout.n = 4;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 16;
  c.actor_rollout_ref.model.n_embd = 32;
  c.critic.ppo_micro_batch_size_per_gpu = 8;
  c.critic.optim.lr = 1e-3;
  c.trainer.total_training_steps = 3;
  c.trainer.default_local_dir = dir.string().c_str();
  return c;
}

//! Metrics without the wall-clock ones (they differ run to run).
inline Metrics deterministic_part(Metrics m) {
  for (auto it = m.begin(); it != m.end();) {
    if (it->first.rfind("timing_s/", 0) == 0 || it->first.rfind("perf/", 0) == 0) it = m.erase(it);
    else ++it;
  }
  return m;
}

//! Runs run() in a forked child and SIGKILLs it after 'at' seconds (the kill -9 tests). Returns
//! true when the kill interrupted it, false when it had finished; a child that failed (threw, or
//! exited non-zero) is a test failure, returned as the exit status through 'exit_status'.
template <class Run>
bool run_killed_after(double at, Run run, int& exit_status) {
  pid_t const pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    try {
      run();
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(at));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  exit_status = WIFSIGNALED(status) ? -1 : WEXITSTATUS(status);
  return WIFSIGNALED(status);
}

}  // namespace rlflow::testing

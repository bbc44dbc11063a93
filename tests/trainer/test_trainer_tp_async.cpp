// Training TP (actor_rollout_ref.actor.megatron.tensor_model_parallel_size) in the async modes:
// with staleness bound 0, trainer_mode=colocate_async and separate_async at training TP = 2 on
// 2 trainer workers train as the same mode at TP = 1 on 1 worker (the same DP size, so the same
// mini-batches): every non-timing metric within 1e-4 relative at every step, the final weights
// within 1e-4 (element-wise and relative L2), every rank gathering the same full weights, and the
// rollout workers holding the gathered weights the trainer published for the last batch (bit for bit).
// Resume under training TP = 2 in both modes, with bound 0 and bound 1 (batches generated ahead, in
// the checkpoint's replay buffer; lockstep hooks fix the schedule): the run resumed from the step-3
// checkpoint equals the uninterrupted one bit for bit (weights and metrics), and at bound 1 both
// stay within 1e-4 of the same schedule at training TP = 1.
#include <catch2/catch.hpp>

#include <rlflow/trainer/trainer.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/reverse_task.hpp"
#include "trainer/trainer_fixtures.hpp"  // close, rel_l2, lockstep_hooks

namespace test_trainer_tp_async {

using namespace rlflow;
namespace fs = std::filesystem;
using rlflow::testing::close;
using rlflow::testing::lockstep_hooks;
using rlflow::testing::rel_l2;

namespace {
using Reward = roles::RuleReward<examples::ReverseScore>;
using SyncTrainer = Trainer<GRPO, Colocate<3>, Reward>;  // also trainer_mode=colocate_async
using SepTrainer = Trainer<GRPO, SeparateAsync, Reward>;

using rlflow::testing::task;

using rlflow::testing::quiet;


//! 8 prompts x 4 samples a step, training TP 'train_tp' on train_tp trainer workers (DP 1), bound 0.
TrainerConfig tp_async_config(std::string const& name, bool separate, int train_tp, std::int64_t seed, std::int64_t steps) {
  TrainerConfig c = examples::reverse_base_config();
  c.data.train_batch_size = 8;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 4;  // two actor updates a step
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.actor.optim.lr = 3e-3;
  c.actor_rollout_ref.rollout.n = 4;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 16;
  c.actor_rollout_ref.model.n_embd = 32;
  c.actor_rollout_ref.model.n_head = 4;
  c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = train_tp;
  c.trainer.n_gpus_per_node = train_tp;
  c.trainer.total_training_steps = steps;
  c.seed = seed;
  if (separate) {
    c.trainer.v1.trainer_mode = "separate_async";
    c.trainer.v1.separate_async.parameter_sync_step = 2;  // train_batch_size / ppo_mini_batch_size
    c.trainer.v1.separate_async.num_warmup_batches = 0;
    c.actor_rollout_ref.rollout.nnodes = 1;
    c.actor_rollout_ref.rollout.n_gpus_per_node = 2;  // the same standalone pool for both runs
    c.actor_rollout_ref.rollout.checkpoint_engine.backend = "nccl";
  } else {
    c.trainer.v1.trainer_mode = "colocate_async";
    c.trainer.v1.colocate_async.num_warmup_batches = 0;
  }
  auto dir = fs::temp_directory_path() / ("rlflow_tp_async_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  c.trainer.default_local_dir = dir.string().c_str();
  return c;
}



//! 'steps' steps of trainer type T at training TP 2 against training TP 1, both in the same async mode.
template <class T>
void compare_async_training_tp(bool separate, std::int64_t seed, std::int64_t steps) {
  auto data = task.make_dataset(256, std::uint64_t(seed));
  T a(tp_async_config("one", separate, 1, seed, steps), data, task.charset(), quiet());
  T b(tp_async_config("two", separate, 2, seed, steps), data, task.charset(), quiet());
  REQUIRE(a.async_rollout() != nullptr);
  REQUIRE(b.async_rollout() != nullptr);
  REQUIRE(b.actor_rollout_wg().world_size() == 2);
  for (int t : b.actor_rollout_wg().template call<&T::actor_role::training_tp>()) REQUIRE(t == 2);
  for (int t : a.actor_rollout_wg().template call<&T::actor_role::training_tp>()) REQUIRE(t == 1);
  std::vector<float> published;  // version steps - 1 of the TP = 2 run, gathered from its shards
  for (std::int64_t s = 1; s <= steps; ++s) {
    Metrics const ma = a.step(), mb = b.step();
    if (s == steps - 1) published = b.actor_weights();
    REQUIRE(ma.at("training/off_policy/trajectory_staleness/max") == 0);
    REQUIRE(mb.at("training/off_policy/trajectory_staleness/max") == 0);
    for (auto const& [k, v] : ma) {
      // timings and throughputs differ; the async bookkeeping counts the pools' devices
      if (k.starts_with("timing_s/") || k.starts_with("perf/") || k.starts_with("separate_async/") ||
          k.starts_with("colocate_async/"))
        continue;
      INFO("step " << s << " metric " << k << ": " << (mb.count(k) ? mb.at(k) : NAN) << " vs " << v);
      REQUIRE(mb.count(k) == 1);
      if (std::isnan(v)) REQUIRE(std::isnan(mb.at(k)));
      else REQUIRE(close(mb.at(k), v, 1e-4));
    }
  }
  // every rank of the TP group gathers the same full weights
  auto const per_rank = b.actor_rollout_wg().template call<&T::actor_role::gather_actor_weights>();
  REQUIRE(per_rank.size() == 2);
  auto const wa = a.actor_weights(), wb = b.actor_weights();
  rlflow::testing::require_tp_weights_match(per_rank, wa, wb, a.config().actor_rollout_ref.actor.optim.lr, int(steps));
  // the rollout workers (TP<1>: each rank the whole model) generated the last step's batch with
  // version steps - 1 (bound 0) and generate nothing after it: they hold those gathered weights
  auto const rw = b.async_rollout()->workers().template call<&roles::StandaloneRollout<cpu::tag, 1>::rollout_weights>();
  REQUIRE(!rw.empty());
  REQUIRE(published.size() == wb.size());
  REQUIRE(published != wb);  // the last step changed the weights: the check below can fail
  for (auto const& w : rw) REQUIRE(w == published);
}
}  // namespace

TEST_CASE("training TP = 2 in colocate_async (bound 0) trains as TP = 1 in colocate_async", "[trainer][async][train_tp]") {
  std::int64_t const seed = GENERATE(take(2, random(1, 1000000)));
  INFO("seed " << seed);
  compare_async_training_tp<SyncTrainer>(false, seed, 4);
}

TEST_CASE("training TP = 2 in separate_async (bound 0) trains as TP = 1 in separate_async", "[trainer][async][train_tp]") {
  std::int64_t const seed = GENERATE(take(2, random(1, 1000000)));
  INFO("seed " << seed);
  compare_async_training_tp<SepTrainer>(true, seed, 4);
}

namespace {
//! What one run reports: the metrics of the steps it ran, the final full weights, every TP rank's
//! gathered weights, the weights right after construction and the start-up warnings.
struct RunResult {
  std::vector<Metrics> metrics;
  std::vector<float> weights, at_start;
  std::vector<std::vector<float>> per_rank;
  std::vector<std::string> warnings;
  std::int64_t start_step = 0;
};

template <class T>
RunResult run_lockstep(TrainerConfig const& c, std::int64_t k, PromptDataset const& data) {
  auto holder = std::make_shared<T*>(nullptr);
  T t(c, data, task.charset(), quiet(lockstep_hooks(holder, k)));
  *holder = &t;
  RunResult r;
  r.start_step = t.global_step();
  r.at_start = t.actor_weights();
  r.warnings = t.startup_warnings();
  while (t.global_step() < t.total_steps()) r.metrics.push_back(t.step());
  r.weights = t.actor_weights();
  r.per_rank = t.actor_rollout_wg().template call<&T::actor_role::gather_actor_weights>();
  return r;
}

bool skipped_metric(std::string const& k) {
  return k.starts_with("timing_s/") || k.starts_with("perf/") || k.starts_with("separate_async/") || k.starts_with("colocate_async/");
}

//! Every non-timing, non-bookkeeping metric of a within rel of b's (rel = 0: bit for bit).
void require_metrics(std::vector<Metrics> const& a, std::vector<Metrics> const& b, double rel) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    for (auto const& [k, v] : b[i]) {
      if (skipped_metric(k)) continue;
      INFO("step index " << i << " metric " << k << ": " << (a[i].count(k) ? a[i].at(k) : NAN) << " vs " << v);
      REQUIRE(a[i].count(k) == 1);
      if (std::isnan(v)) REQUIRE(std::isnan(a[i].at(k)));
      else if (rel == 0) REQUIRE(a[i].at(k) == v);
      else REQUIRE(close(a[i].at(k), v, rel));
    }
}

template <class T>
void resume_under_training_tp(bool separate, std::int64_t k, std::int64_t seed) {
  std::string const mode = separate ? "separate_async" : "colocate_async";
  std::string const tag = std::string(separate ? "sep" : "co") + std::to_string(k);
  auto const data = task.make_dataset(256, std::uint64_t(seed));
  auto warmup = [&](TrainerConfig& c) {
    (separate ? c.trainer.v1.separate_async.num_warmup_batches : c.trainer.v1.colocate_async.num_warmup_batches) = k;
  };
  // uninterrupted: 6 steps at training TP 2, checkpoints at steps 3 and 6
  TrainerConfig cfg = tp_async_config("rfull_" + tag, separate, 2, seed, 6);
  warmup(cfg);
  cfg.trainer.save_freq = 3;
  RunResult const full = run_lockstep<T>(cfg, k, data);
  REQUIRE(full.metrics.size() == 6);
  for (std::size_t i = 0; i < full.metrics.size(); ++i)  // the lockstep schedule
    REQUIRE(full.metrics[i].at(mode + "/policy_version") == double(std::max<std::int64_t>(0, std::int64_t(i) - k)));
  auto const ck = fs::path(std::string(cfg.trainer.default_local_dir.view())) / "global_step_3";
  REQUIRE(fs::exists(ck));
  if (k > 0) {  // the checkpoint holds the batches generated ahead
    auto const st = nlohmann::json::parse(std::ifstream(ck / "trainer_state.json"));
    REQUIRE(st.at("replay_buffer").size() >= std::size_t(k));
    REQUIRE(st["replay_buffer"][0]["step"] == 4);
  }
  // resumed from step 3 in another folder at training TP 2
  TrainerConfig rcfg = tp_async_config("rres_" + tag, separate, 2, seed, 6);
  warmup(rcfg);
  rcfg.trainer.save_freq = 3;
  rcfg.trainer.resume_mode = "resume_path";
  rcfg.trainer.resume_from_path = ck.string().c_str();
  RunResult const res = run_lockstep<T>(rcfg, k, data);
  REQUIRE(res.warnings.empty());
  REQUIRE(res.start_step == 3);
  REQUIRE(res.at_start != full.weights);  // steps 4..6 move the weights: the checks below can fail
  REQUIRE(res.metrics.size() == 3);
  REQUIRE(res.per_rank.size() == 2);
  REQUIRE(res.per_rank[0] == res.per_rank[1]);
  REQUIRE(res.weights == full.weights);
  require_metrics(res.metrics, std::vector<Metrics>(full.metrics.begin() + 3, full.metrics.end()), 0.0);
  for (std::size_t i = 0; i < res.metrics.size(); ++i)
    REQUIRE(res.metrics[i].at(mode + "/policy_version") == full.metrics[i + 3].at(mode + "/policy_version"));
  if (k > 0) {  // staleness > 0 under training TP: the same schedule at training TP 1, within 1e-4
    TrainerConfig ocfg = tp_async_config("rone_" + tag, separate, 1, seed, 6);
    warmup(ocfg);
    RunResult const one = run_lockstep<T>(ocfg, k, data);
    bool stale = false;
    for (auto const& m : full.metrics) stale = stale || m.at("training/off_policy/trajectory_staleness/max") > 0;
    REQUIRE(stale);
    require_metrics(full.metrics, one.metrics, 1e-4);
    INFO("relative L2 difference of the final weights: " << rel_l2(full.weights, one.weights));
    REQUIRE(rel_l2(full.weights, one.weights) <= 1e-4);
    fs::remove_all(std::string(ocfg.trainer.default_local_dir.view()));
  }
  fs::remove_all(std::string(cfg.trainer.default_local_dir.view()));
  fs::remove_all(std::string(rcfg.trainer.default_local_dir.view()));
}
}  // namespace

TEST_CASE("training TP = 2 in colocate_async resumes from a checkpoint exactly, at bound 0 and 1", "[trainer][async][train_tp][resume]") {
  std::int64_t const seed = GENERATE(take(1, random(1, 1000000)));
  std::int64_t const k = GENERATE(0, 1);
  INFO("seed " << seed << ", bound " << k);
  resume_under_training_tp<SyncTrainer>(false, k, seed);
}

TEST_CASE("training TP = 2 in separate_async resumes from a checkpoint exactly, at bound 0 and 1", "[trainer][async][train_tp][resume]") {
  std::int64_t const seed = GENERATE(take(1, random(1, 1000000)));
  std::int64_t const k = GENERATE(0, 1);
  INFO("seed " << seed << ", bound " << k);
  resume_under_training_tp<SepTrainer>(true, k, seed);
}

}  // namespace test_trainer_tp_async

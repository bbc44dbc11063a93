// tests/advantage_step/test_trainer_adv_options.cpp <-> trainer.hpp + roles/actor_rollout_ref.hpp:
// the Trainer runs verl's rollout-correction modes (bypass: old_log_probs := rollout_log_probs and
// the bypass_mode loss; decoupled: IS weights and rejection on the driver) and PF-PPO, with verl's
// metric names.
#include <catch2/catch.hpp>

#include <rlflow/trainer/trainer.hpp>

#include <cmath>
#include <unistd.h>

#include "trainer/trainer_fixtures.hpp"

namespace test_trainer_adv_options {

using namespace rlflow;
namespace fs = std::filesystem;

namespace {
using rlflow::testing::quiet;
using Score = examples::ReverseScore;

TrainerConfig tiny(fs::path const& dir) {
  TrainerConfig c = examples::reverse_base_config();
  c.data.train_batch_size = 8;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 4;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.rollout.n = 4;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 16;
  c.actor_rollout_ref.model.n_embd = 32;
  c.critic.ppo_micro_batch_size_per_gpu = 8;
  c.trainer.total_training_steps = 2;
  c.trainer.default_local_dir = dir.string().c_str();
  return c;
}
using rlflow::testing::fresh_dir;
using rlflow::testing::task;
}  // namespace

TEST_CASE("Trainer: bypass mode takes old_log_probs from the rollout and reports rollout_corr metrics", "[trainer][rollout_corr]") {
  auto dir = fresh_dir("bypass");
  auto cfg = tiny(dir);
  cfg.apply_overrides({"algorithm.rollout_correction.bypass_mode=true", "algorithm.rollout_correction.rollout_is=token",
                       "algorithm.rollout_correction.rollout_rs=token_k3", "algorithm.rollout_correction.rollout_rs_threshold=0.5"});
  SECTION("ppo_clip") {
    Trainer<GRPO, roles::RuleReward<Score>> t(cfg, task.make_dataset(64, 3), task.charset(), quiet());
    auto m = t.step();
    CHECK(m.count("actor/entropy") == 0);  // no actor forward for old log-probs (verl's bypass)
    REQUIRE(m.count("rollout_corr/kl") == 1);
    REQUIRE(m.count("rollout_corr/rollout_is_mean") == 1);
    REQUIRE(m.count("rollout_corr/rollout_rs_token_k3_masked_fraction") == 1);
    CHECK(std::isfinite(m.at("actor/pg_loss")));
    CHECK(m.count("actor/pg_clipfrac") == 1);
    // first micro-batch of the first step: the policy equals the rollout's up to float rounding
    CHECK(std::fabs(m.at("rollout_corr/kl")) < 1e-2);
  }
  SECTION("reinforce") {
    cfg.apply_overrides({"algorithm.rollout_correction.loss_type=reinforce"});
    Trainer<GRPO, roles::RuleReward<Score>> t(cfg, task.make_dataset(64, 3), task.charset(), quiet());
    auto m = t.step();
    REQUIRE(m.count("rollout_corr/chi2_token") == 1);
    CHECK(m.count("actor/pg_clipfrac") == 0);  // REINFORCE reports ppo_kl only
    CHECK(m.count("actor/ppo_kl") == 1);
  }
  fs::remove_all(dir);
}

TEST_CASE("Trainer: decoupled rollout correction and PF-PPO", "[trainer][rollout_corr]") {
  auto dir = fresh_dir("decoupled");
  auto cfg = tiny(dir);
  cfg.apply_overrides({"algorithm.rollout_correction.rollout_is=sequence", "algorithm.rollout_correction.rollout_is_threshold=2.0"});
  {
    Trainer<GRPO, roles::RuleReward<Score>> t(cfg, task.make_dataset(64, 3), task.charset(), quiet());
    auto m = t.step();
    REQUIRE(m.count("rollout_corr/rollout_is_mean") == 1);
    REQUIRE(m.count("rollout_corr/training_ppl") == 1);
    CHECK(m.count("actor/entropy") == 1);  // old log-probs recomputed by the actor
  }
  auto cfg2 = tiny(dir);
  cfg2.apply_overrides({"algorithm.use_pf_ppo=true", "algorithm.pf_ppo.reweight_method=max_random"});
  Trainer<PPO, roles::ValueCritic, roles::RuleReward<Score>> t(cfg2, task.make_dataset(64, 3), task.charset(), quiet());
  auto m = t.step();
  CHECK(std::isfinite(m.at("critic/advantages/mean")));
  CHECK(m.count("critic/vf_loss") == 1);
  fs::remove_all(dir);
}

}  // namespace test_trainer_adv_options

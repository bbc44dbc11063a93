// tests/trainer/test_dynamic_bsz_trainer.cpp <-> the Trainer with verl's keys
// actor_rollout_ref.actor.use_dynamic_bsz / ppo_max_token_len_per_gpu, critic.use_dynamic_bsz,
// actor_rollout_ref.model.use_remove_padding and critic.model.use_remove_padding: a PPO step with
// token-budget micro-batches over packed rows takes the same step as fixed micro-batches over padded
// rows (same samples, same losses and gradient norms to rounding).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "trainer/trainer_fixtures.hpp"

namespace test_dynamic_bsz_trainer {

using namespace rlflow;
using namespace rlflow::testing;

TEST_CASE("trainer.dynamic_bsz_through_trainer: PPO with token budgets and packed rows takes the padded fixed-cut step",
          "[trainer][dynamic_bsz]") {
  tasks::StringTask const task{};
  auto const dir = fresh_dir("dynamic_bsz");
  TrainerConfig base = tiny_config(dir / "fixed");
  base.trainer.total_training_steps = 1;
  base.actor_rollout_ref.actor.use_kl_loss = true;
  base.actor_rollout_ref.actor.entropy_coeff = 0.01;
  base.actor_rollout_ref.actor.loss_agg_mode = GENERATE("token-mean", "seq-mean-token-mean");
  TrainerConfig dyn = base;
  dyn.trainer.default_local_dir = (dir / "dynamic").string().c_str();
  std::int64_t const budget = dyn.data.max_prompt_length + dyn.data.max_response_length;  // the longest row fits
  dyn.actor_rollout_ref.actor.use_dynamic_bsz = true;
  dyn.actor_rollout_ref.actor.ppo_max_token_len_per_gpu = budget;
  dyn.actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu = budget;
  dyn.actor_rollout_ref.ref.log_prob_max_token_len_per_gpu = budget;
  dyn.critic.use_dynamic_bsz = true;
  dyn.critic.ppo_max_token_len_per_gpu = budget;
  dyn.actor_rollout_ref.model.use_remove_padding = true;
  dyn.critic.model.use_remove_padding = true;
  PPOTrainer fixed(base, task.make_dataset(256, 3), task.charset(), quiet());
  PPOTrainer dynamic(dyn, task.make_dataset(256, 3), task.charset(), quiet());
  Metrics const a = fixed.step(), b = dynamic.step();
  for (auto key : {"response_length/mean", "critic/score/mean", "actor/pg_loss", "actor/grad_norm", "actor/kl_loss",
                   "actor/entropy_loss", "critic/vf_loss", "critic/grad_norm"}) {
    INFO(key << ": fixed " << a.at(key) << ", dynamic " << b.at(key));
    REQUIRE(a.count(key) == 1);
    REQUIRE(b.count(key) == 1);
    REQUIRE(close(b.at(key), a.at(key), 1e-4));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace test_dynamic_bsz_trainer

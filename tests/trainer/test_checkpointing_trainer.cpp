// tests/trainer/test_checkpointing_trainer.cpp <-> the Trainer with verl's keys
// actor_rollout_ref.model.enable_gradient_checkpointing and critic.model.enable_gradient_checkpointing:
// PPO steps with activation checkpointing in the actor, reference and critic take exactly the steps
// without it (bit-identical gradients, so every metric but the wall-clock ones is the same bits),
// over padded and packed rows, for GPT-2 and a Llama-family model.
#include <catch2/catch.hpp>

#include <string>

#include "trainer/trainer_fixtures.hpp"

namespace test_checkpointing_trainer {

using namespace rlflow;
using namespace rlflow::testing;

TEST_CASE("trainer.checkpointing_through_trainer: PPO with gradient checkpointing takes the kept-activation steps bit for bit",
          "[trainer][checkpointing]") {
  bool const packed = GENERATE(false, true);
  char const* arch = GENERATE("gpt2", "qwen3");
  INFO("packed " << packed << ", arch " << arch);
  tasks::StringTask const task{};
  auto const dir = fresh_dir("checkpointing");
  TrainerConfig base = tiny_config(dir / "kept");
  base.trainer.total_training_steps = 2;
  base.actor_rollout_ref.model.n_layer = 3;
  base.actor_rollout_ref.model.arch = arch;
  base.actor_rollout_ref.actor.use_kl_loss = true;
  base.actor_rollout_ref.actor.entropy_coeff = 0.01;
  base.actor_rollout_ref.model.use_remove_padding = packed;
  base.critic.model.use_remove_padding = packed;
  TrainerConfig ckpt = base;
  ckpt.trainer.default_local_dir = (dir / "checkpointed").string().c_str();
  ckpt.actor_rollout_ref.model.enable_gradient_checkpointing = true;
  ckpt.critic.model.enable_gradient_checkpointing = true;
  PPOTrainer kept(base, task.make_dataset(256, 3), task.charset(), quiet());
  PPOTrainer checkpointed(ckpt, task.make_dataset(256, 3), task.charset(), quiet());
  for (int step = 0; step < 2; ++step) {
    Metrics const a = deterministic_part(kept.step()), b = deterministic_part(checkpointed.step());
    REQUIRE(a.count("actor/grad_norm") == 1);
    REQUIRE(a.count("critic/grad_norm") == 1);
    REQUIRE(a.at("actor/grad_norm") > 0.0);
    for (auto const& [key, value] : a) {
      INFO("step " << step << ", " << key << ": kept " << value);
      REQUIRE(b.count(key) == 1);
      REQUIRE(b.at(key) == value);
    }
    REQUIRE(b.size() == a.size());
  }
  // the keys took effect: the checkpointed roles keep less (3 layers: L (N, C) rows + one layer)
  auto const actor_kept = kept.workers().execute_all<&PPOTrainer::actor_role::actor_activation_bytes>();
  auto const actor_ckpt = checkpointed.workers().execute_all<&PPOTrainer::actor_role::actor_activation_bytes>();
  auto const critic_kept = kept.workers().execute_all<&PPOTrainer::critic_role::activation_bytes>();
  auto const critic_ckpt = checkpointed.workers().execute_all<&PPOTrainer::critic_role::activation_bytes>();
  REQUIRE(actor_kept.size() == actor_ckpt.size());
  for (std::size_t r = 0; r < actor_kept.size(); ++r) {
    INFO("worker " << r);
    REQUIRE(actor_ckpt[r] > 0);
    REQUIRE(actor_ckpt[r] < actor_kept[r]);
    REQUIRE(critic_ckpt[r] > 0);
    REQUIRE(critic_ckpt[r] < critic_kept[r]);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace test_checkpointing_trainer

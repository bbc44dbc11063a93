// rlflow/config/impl/presets.ipp: the bodies of the non-template functions declared in rlflow/config/presets.hpp (see RLFLOW_DECL in rlflow/core/config.hpp).
#pragma once

namespace rlflow::presets {

RLFLOW_DECL TrainerConfig tiny_gpt_cpu(std::int64_t max_prompt_length, std::int64_t max_response_length) {
  TrainerConfig c;
  c.data.max_prompt_length = max_prompt_length;
  c.data.max_response_length = max_response_length;
  c.actor_rollout_ref.model.n_layer = 2;
  c.actor_rollout_ref.model.n_head = 4;
  c.actor_rollout_ref.model.n_embd = 64;
  c.actor_rollout_ref.actor.optim.weight_decay = 0.0;
  c.actor_rollout_ref.actor.ppo_epochs = 1;
  c.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 128;  // used when KL is on
  c.trainer.nnodes = 1;
  c.trainer.n_gpus_per_node = 2;  // two DP workers (threads) on the CPU
  c.trainer.device = "cpu";       // what Backend<cpu::tag> runs on (verl's default is cuda)
  c.trainer.save_freq = -1;
  c.trainer.project_name = "rlflow";
  c.trainer.resume_mode = "disable";
  c.seed = 1;
  return c;
}

RLFLOW_DECL TrainerConfig grpo_tiny_cpu(std::int64_t max_prompt_length, std::int64_t max_response_length) {
  TrainerConfig c = tiny_gpt_cpu(max_prompt_length, max_response_length);
  c.data.train_batch_size = 32;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 32;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 128;
  c.actor_rollout_ref.actor.optim.lr = 3e-3;
  c.actor_rollout_ref.rollout.n = 8;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 128;
  c.trainer.total_training_steps = 200;
  return c;
}

}  // namespace rlflow::presets

// rlflow/presets.hpp: starting configurations for the built-in tiny GPT on a CPU. verl's
// defaults (TrainerConfig{}) describe 8 GPUs, a pretrained model and 512-token sequences; a
// randomly initialised model on two CPU cores needs other sizes, a higher learning rate and
// several samples per prompt. These presets are what the examples and the quickstart start from;
// every field stays overridable (key=value, --config FILE).
#pragma once
#include <cstdint>

#include <rlflow/trainer_config.hpp>  // TrainerConfig

namespace rlflow::presets {

//! A 2-layer GPT (width 64, 4 heads) trained from random initialisation by two data-parallel
//! worker threads (trainer.n_gpus_per_node=2), no weight decay, one PPO epoch, no checkpoints,
//! no resume, seed 1. 'max_prompt_length' counts BOS and the prompt's tokens,
//! 'max_response_length' the answer's tokens and EOS.
inline TrainerConfig tiny_gpt_cpu(std::int64_t max_prompt_length, std::int64_t max_response_length) {
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
  c.trainer.save_freq = -1;
  c.trainer.project_name = "rlflow";
  c.trainer.resume_mode = "disable";
  c.seed = 1;
  return c;
}

//! tiny_gpt_cpu plus GRPO's batch: 32 prompts x 8 samples a step, one actor update a step
//! (mini-batch 32 prompts, micro-batches of 128 rows), lr 3e-3, 200 steps. This is the demo's
//! configuration (examples/00_grpo_reverse); it learns short string tasks in seconds.
inline TrainerConfig grpo_tiny_cpu(std::int64_t max_prompt_length, std::int64_t max_response_length) {
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

// rlflow/config/presets.hpp: starting configurations for the built-in tiny GPT on a CPU. verl's
// defaults (TrainerConfig{}) describe 8 GPUs, a pretrained model and 512-token sequences; a
// randomly initialised model on two CPU cores needs other sizes, a higher learning rate and
// several samples per prompt. These presets are what the examples and the quickstart start from;
// every field stays overridable (key=value, --config FILE).
#pragma once
#include <cstdint>

#include <rlflow/core/config.hpp>          // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/config/trainer_config.hpp>  // TrainerConfig

namespace rlflow::presets {

//! A 2-layer GPT (width 64, 4 heads) trained from random initialisation by two data-parallel
//! worker threads (trainer.n_gpus_per_node=2), no weight decay, one PPO epoch, no checkpoints,
//! no resume, seed 1. 'max_prompt_length' counts BOS and the prompt's tokens,
//! 'max_response_length' the answer's tokens and EOS.
RLFLOW_DECL TrainerConfig tiny_gpt_cpu(std::int64_t max_prompt_length, std::int64_t max_response_length);

//! tiny_gpt_cpu plus GRPO's batch: 32 prompts x 8 samples a step, one actor update a step
//! (mini-batch 32 prompts, micro-batches of 128 rows), lr 3e-3, 200 steps. This is the demo's
//! configuration (examples/00_grpo_reverse); it learns short string tasks in seconds.
RLFLOW_DECL TrainerConfig grpo_tiny_cpu(std::int64_t max_prompt_length, std::int64_t max_response_length);

}  // namespace rlflow::presets

#if RLFLOW_DEFINE_BODIES
#include <rlflow/config/impl/presets.ipp>
#endif

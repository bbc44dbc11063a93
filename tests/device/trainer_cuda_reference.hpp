// tests/device/trainer_cuda_reference.hpp: the CPU side of test_trainer_cuda. The CPU Trainers the
// CUDA steps are compared against are compiled by the host compiler in their own translation unit
// (trainer_cuda_reference.cpp, with the compiled part), so that nvcc compiles only the CUDA types.
#pragma once
#include <rlflow/config/trainer_config.hpp>
#include <rlflow/core/metrics.hpp>

#include <vector>

namespace rlflow::test_cuda_trainer {

//! One CPU Trainer step from the reverse task's dataset (256 prompts of 3 letters, seed as in cfg).
struct CpuStep {
  std::vector<float> initial_weights;  //!< the actor's weights before the step
  Metrics metrics;                     //!< the step's metrics
  std::vector<float> final_weights;    //!< the actor's weights after the step
};

CpuStep cpu_grpo_step(TrainerConfig const& cfg);  //!< Trainer<GRPO, Colocate<3>, RuleReward<ReverseScore>>
CpuStep cpu_ppo_step(TrainerConfig const& cfg);   //!< the same with roles::ValueCritic, PPO

}  // namespace rlflow::test_cuda_trainer

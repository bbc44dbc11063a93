// examples/03_ppo_reverse_cuda.cu: the twin of 03_ppo_reverse.cpp with Backend<cuda::tag>: the
// policy's engines on the device (one worker per device); the critic (roles::ValueCritic) runs on
// the CPU engine. Same command line as 03_ppo_reverse. Built when nvcc exists.
#include <rlflow/rlflow.hpp>
#include <rlflow/trainer/trainer_cuda.cuh>  // the CUDA engines of the built-in roles

#include "common/reverse_task.hpp"  // the task, its reward, the configuration, the main loop

using Trainer = rlflow::Trainer<rlflow::PPO, rlflow::Colocate<3>, rlflow::Backend<rlflow::cuda::tag>,
                                rlflow::roles::ValueCritic, rlflow::roles::RuleReward<rlflow::examples::ReverseScore>>;

int main(int argc, char** argv) {
  rlflow::TrainerConfig cfg = rlflow::examples::ppo_reverse_config();
  cfg.trainer.n_gpus_per_node = 1;  // one worker per device
  cfg.trainer.experiment_name = "ppo_reverse_cuda";
  cfg.trainer.default_local_dir = "runs/ppo_reverse_cuda";
  return rlflow::examples::run_reverse_example<Trainer>(
      argc, argv, "03_ppo_reverse_cuda: PPO (GAE + critic) on string reversal with a tiny GPT on the GPU", cfg);
}
